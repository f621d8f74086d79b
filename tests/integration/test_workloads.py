"""Real-world workloads built on other S3 SDKs against objdirect-server, used as their users use
them: a backup tool (restic 0.14, Debian `restic`, minio-go) backs up, verifies, restores and
prunes a tree; a FUSE mount (s3fs 1.90, Debian `s3fs`, libcurl) is used from a shell. Run on the
local backend, on RADOS, and through the gateway in front of ObjDirect and of radosgw
(tests/integration/CMakeLists.txt), so the gateway serves clients that are not ours in front of
an upstream that is not ours (docs/scale-out.md, "Verified upstreams").
"""

import filecmp
import hashlib
import os
import shutil
import subprocess
import time

import pytest

import objd

MiB = 1 << 20


def tool(name):
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed (scripts/bootstrap installs Debian's {name})")
    return path


def make_tree(root, seed):
    """A tree with an empty file, small files, nested directories and two files large enough
    for multipart uploads by both tools (restic packs, s3fs's 10 MiB parts)."""
    rnd = hashlib.sha256(seed.encode()).digest()
    files = {"empty": b"", "a/one.txt": b"one\n", "a/b/c/deep.bin": os.urandom(70_000),
             "big/blob1.bin": os.urandom(12 * MiB + 3), "big/blob2.bin": os.urandom(24 * MiB + 1),
             "names/with space and ü.txt": rnd * 100}
    for i in range(40):
        files[f"many/f{i:03d}"] = os.urandom(i * 997)
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    return files


def same_tree(a, b):
    cmp = filecmp.dircmp(a, b)
    assert not cmp.left_only and not cmp.right_only and not cmp.diff_files, \
        (cmp.left_only, cmp.right_only, cmp.diff_files)
    _, mismatch, errors = filecmp.cmpfiles(a, b, cmp.common_files, shallow=False)
    assert not mismatch and not errors, (mismatch, errors)
    for d in cmp.common_dirs:
        same_tree(a / d, b / d)


def test_restic_backup_verify_restore_prune(server, s3, bucket, tmp_path):
    restic = tool("restic")
    env = dict(os.environ, RESTIC_REPOSITORY=f"s3:{server.endpoint}/{bucket}/repo",
               RESTIC_PASSWORD="objdirect-workload", AWS_ACCESS_KEY_ID=objd.ACCESS_KEY,
               AWS_SECRET_ACCESS_KEY=objd.SECRET_KEY, AWS_DEFAULT_REGION=objd.REGION,
               RESTIC_CACHE_DIR=str(tmp_path / "cache"), HOME=str(tmp_path))

    def run(*args):
        r = subprocess.run([restic, *args],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=300)
        assert r.returncode == 0, f"restic {' '.join(args)}: rc={r.returncode}\n{r.stdout[-4000:]}"
        return r.stdout

    src = tmp_path / "src"
    make_tree(src, "first")
    run("init")
    run("backup", str(src))
    (src / "a" / "one.txt").write_text("changed\n")
    (src / "many" / "f001").unlink()
    (src / "added.bin").write_bytes(os.urandom(3 * MiB))
    run("backup", str(src))
    run("check", "--read-data")
    # restore the latest snapshot byte-exact
    out = tmp_path / "restored"
    run("restore", "latest", "--target", str(out))
    same_tree(src, out / src.relative_to("/"))
    # prune everything but the last snapshot; the repository still checks and restores
    run("forget", "--keep-last", "1", "--prune")
    assert run("snapshots", "--json").count('"id"') == 1
    run("check", "--read-data")
    out2 = tmp_path / "restored2"
    run("restore", "latest", "--target", str(out2))
    same_tree(src, out2 / src.relative_to("/"))
    # what restic stored is plain S3 objects under the prefix, readable by boto3
    keys = [o["Key"] for p in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="repo/")
            for o in p.get("Contents", [])]
    assert "repo/config" in keys and any(k.startswith("repo/data/") for k in keys), keys


@pytest.fixture
def s3fs_mount(server, bucket, tmp_path):
    s3fs = tool("s3fs")
    if not os.path.exists("/dev/fuse") or not os.access("/dev/fuse", os.R_OK | os.W_OK):
        pytest.skip("/dev/fuse is not usable here: the FUSE workload needs it")
    if shutil.which("fusermount") is None and shutil.which("fusermount3") is None:
        pytest.skip("fusermount is not installed (Debian fuse3, a dependency of s3fs)")
    passwd = tmp_path / "passwd-s3fs"
    passwd.write_text(f"{objd.ACCESS_KEY}:{objd.SECRET_KEY}\n")
    passwd.chmod(0o600)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    log = tmp_path / "s3fs.log"
    # -f: in the foreground, so the test owns the process; 10 MiB parts (multipart above that);
    # no stat cache, so every shell command sees what the server holds.
    proc = subprocess.Popen(
        [s3fs, bucket, str(mnt), "-f", "-o", f"url={server.endpoint}", "-o", "use_path_request_style",
         "-o", f"passwd_file={passwd}", "-o", "endpoint=" + objd.REGION, "-o", "sigv4",
         "-o", "multipart_size=10", "-o", "stat_cache_expire=0",
         "-o", f"logfile={log}", "-o", "dbglevel=warn"],
        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while not os.path.ismount(mnt):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            text = log.read_text() if log.exists() else ""
            # s3fs checks the bucket against the server before it mounts: that failing is ours
            if "check_service" in text or "CheckBucket" in text:
                pytest.fail(f"s3fs refused the server (rc={proc.poll()}):\n{text[-4000:]}")
            pytest.skip(f"FUSE does not work here (s3fs rc={proc.poll()}): {text[-2000:]}")
        time.sleep(0.1)
    try:
        yield mnt
    finally:
        fm = shutil.which("fusermount3") or shutil.which("fusermount")
        subprocess.run([fm, "-u", str(mnt)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            subprocess.run([fm, "-uz", str(mnt)])


def test_s3fs_mount_used_from_a_shell(s3fs_mount, s3, bucket, tmp_path):
    mnt = s3fs_mount
    src = tmp_path / "src"
    make_tree(src, "fuse")
    script = f"""
set -eu
cd {mnt}
cp -r {src}/. .
mkdir -p made/here
echo "hello from a shell" > made/here/greeting.txt
mv a/one.txt a/renamed.txt
rm many/f000 many/f001
cat big/blob2.bin > big/copy-of-blob2.bin
ls -la . a big many > /dev/null
test "$(cat made/here/greeting.txt)" = "hello from a shell"
echo appended >> made/here/greeting.txt
find . -type f | sort > {tmp_path}/listing.txt
"""
    r = subprocess.run(["bash", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-4000:]
    # what the shell did, seen through S3 by boto3
    keys = {o["Key"] for p in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket)
            for o in p.get("Contents", [])}
    assert "a/renamed.txt" in keys and "a/one.txt" not in keys, sorted(keys)
    assert "many/f000" not in keys and "many/f002" in keys, sorted(keys)
    body = s3.get_object(Bucket=bucket, Key="made/here/greeting.txt")["Body"].read()
    assert body == b"hello from a shell\nappended\n"
    for rel in ("big/blob1.bin", "big/blob2.bin", "a/b/c/deep.bin", "names/with space and ü.txt",
                "empty"):
        got = s3.get_object(Bucket=bucket, Key=rel)["Body"].read()
        assert got == (src / rel).read_bytes(), rel
    assert s3.get_object(Bucket=bucket, Key="big/copy-of-blob2.bin")["Body"].read() == \
        (src / "big" / "blob2.bin").read_bytes()
    # and read back through the mount, byte-exact
    assert (mnt / "big" / "blob2.bin").read_bytes() == (src / "big" / "blob2.bin").read_bytes()
    listed = (tmp_path / "listing.txt").read_text().split("\n")
    assert "./made/here/greeting.txt" in listed and "./a/renamed.txt" in listed, listed
    # a directory removed from the shell is gone from S3
    r = subprocess.run(["bash", "-c", f"set -eu; rm -r {mnt}/many; test ! -e {mnt}/many"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    assert r.returncode == 0, r.stdout
    left = [o["Key"] for p in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="many/")
            for o in p.get("Contents", [])]
    assert left == [], left
