"""The objdirect CLI as a separate process against the REAL objdirect-server on a loopback port.

Covers what the C++ client_integration_test does not: recursive copies of directory trees (up and
back down, compared by SHA-256), keys that would escape the destination, S3 -> S3 server-side
copies (checked in the server's access log), rm --recursive, interrupted downloads (SIGKILL and
SIGINT mid-transfer leave no destination file), the exit codes, the progress bar on a
pseudo-terminal and its absence when piped, and `objdirect bench`.

Run by ctest (cli_pytest) with OBJDIRECT_BIN_DIR=<build>/bin; a missing binary fails.
"""

import hashlib
import json
import os
import pty
import re
import select
import signal
import subprocess
import threading
import time

import pytest

ACCESS_KEY = "cliAccessKey"
SECRET_KEY = "cli-secret-key/0123456789"
MIB = 1 << 20


def binary(name):
    d = os.environ.get("OBJDIRECT_BIN_DIR")
    assert d, "OBJDIRECT_BIN_DIR is not set (ctest sets it to <build>/bin)"
    path = os.path.join(d, name)
    assert os.access(path, os.X_OK), f"{path} is missing"
    return path


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    d = tmp_path_factory.mktemp("server")
    log = open(d / "server.log", "ab")
    cmd = [binary("objdirect-server"), "--listen", "127.0.0.1:0", "--data", str(d / "data"),
           "--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY, "--no-fsync",
           "--access-log", str(d / "access.log")]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL)
    line = b""
    deadline = time.monotonic() + 30
    while not line.endswith(b"\n"):
        assert time.monotonic() < deadline and proc.poll() is None, f"server did not start: {line!r}"
        if select.select([proc.stdout], [], [], 0.2)[0]:
            line += os.read(proc.stdout.fileno(), 1)
    m = re.match(rb"objdirect-server listening on (http://127\.0\.0\.1:\d+)", line)
    assert m, line

    def pump():
        for chunk in iter(lambda: os.read(proc.stdout.fileno(), 65536), b""):
            log.write(chunk)
    threading.Thread(target=pump, daemon=True).start()

    class S:
        endpoint = m.group(1).decode()
        access_log = d / "access.log"
        process = proc
    yield S
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def cli_env(server, **extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("AWS_") and not k.startswith("OBJDIRECT_")}
    env.update(AWS_ENDPOINT_URL=server.endpoint, AWS_ACCESS_KEY_ID=ACCESS_KEY,
               AWS_SECRET_ACCESS_KEY=SECRET_KEY, OBJDIRECT_FABRIC="none",
               AWS_SHARED_CREDENTIALS_FILE="/nonexistent/cli-test/credentials",
               AWS_CONFIG_FILE="/nonexistent/cli-test/config", FI_TCP_IFACE="lo")
    env.update(extra)
    return env


def access_log(server):
    """The server's access log records; a line still being written (no newline yet) is left out."""
    with open(server.access_log) as f:
        return [json.loads(line) for line in f if line.endswith("\n")]


def wait_log(server, pred, timeout=10):
    """The access log once pred(records) holds: the server logs a request after its reply."""
    deadline = time.monotonic() + timeout
    while True:
        log = access_log(server)
        if pred(log) or time.monotonic() > deadline:
            return log
        time.sleep(0.01)


def run(server, *args, env=None, check=True, timeout=120):
    p = subprocess.run([binary("objdirect"), *args], capture_output=True, text=True,
                       env=env or cli_env(server), timeout=timeout, stdin=subprocess.DEVNULL)
    if check:
        assert p.returncode == 0, f"objdirect {' '.join(args)}: rc {p.returncode}\n{p.stderr}"
    return p


_bucket_seq = [0]


@pytest.fixture
def bucket(server, request):
    _bucket_seq[0] += 1
    name = f"cli-{_bucket_seq[0]}-{os.getpid()}"
    run(server, "mb", f"s3://{name}")
    yield name
    run(server, "rm", "--recursive", f"s3://{name}", check=False)
    run(server, "rb", f"s3://{name}", check=False)


def tree_digest(root):
    out = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = os.path.join(dirpath, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, root)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def make_tree(root):
    files = {
        "top.txt": b"hello\n",
        "empty": b"",
        "a/one.bin": os.urandom(100_000),
        "a/b/two.bin": os.urandom(3 * MIB + 17),      # 4 ranged GETs of 1 MiB down
        "a/b/c/deep/three.bin": os.urandom(12 * MIB + 5),  # multipart up (5 MiB parts)
        "z/name with spaces+plus.txt": b"spaces",
    }
    for rel, data in files.items():
        p = os.path.join(root, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)
    return files


def keys_of(server, bucket, prefix=""):
    p = run(server, "ls", "--recursive", f"s3://{bucket}/{prefix}")
    return sorted(line.split(None, 2)[2] for line in p.stdout.splitlines() if line.strip())


# -- recursive copies -----------------------------------------------------------------------------


def test_recursive_copy_up_and_back_down(server, bucket, tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    files = make_tree(src)
    up = run(server, "cp", "--recursive", "--part-size", str(MIB), str(src), f"s3://{bucket}/pre")
    assert re.search(r"^upload: 6 files, \d+ bytes in .* via http", up.stdout, re.M), up.stdout
    assert up.stderr == ""  # piped: no progress bar
    assert keys_of(server, bucket) == sorted("pre/" + k for k in files)
    down = run(server, "cp", "-r", "--part-size", "1MiB", "--json", f"s3://{bucket}/pre/",
               str(dst))
    summary = json.loads(down.stdout)
    assert summary["files"] == 6 and summary["path"] == "http"
    assert summary["bytes"] == sum(len(v) for v in files.values())
    assert tree_digest(dst) == tree_digest(src)
    assert not [f for f in os.listdir(dst) if ".objdirect-" in f]


def test_recursive_download_refuses_keys_that_escape(server, bucket, tmp_path):
    f = tmp_path / "f"
    f.write_bytes(b"evil")
    for key in ("esc/ok", "esc/../../outside"):
        run(server, "cp", str(f), f"s3://{bucket}/{key}")
    dst = tmp_path / "deep" / "dst"
    p = run(server, "cp", "-r", f"s3://{bucket}/esc/", str(dst), check=False)
    assert p.returncode == 2, p.stderr
    assert "refusing key '../../outside'" in p.stderr and len(p.stderr.splitlines()) == 1
    assert not (tmp_path / "outside").exists() and not (tmp_path / "deep" / "outside").exists()
    assert not dst.exists()  # every key is checked before anything is written


def test_s3_to_s3_copy_is_server_side(server, bucket, tmp_path):
    data = os.urandom(2 * MIB + 3)
    (tmp_path / "obj").write_bytes(data)
    run(server, "cp", str(tmp_path / "obj"), f"s3://{bucket}/src/obj")
    run(server, "cp", str(tmp_path / "obj"), f"s3://{bucket}/src/sub/obj2")
    cp = run(server, "cp", f"s3://{bucket}/src/obj", f"s3://{bucket}/dst/copied")
    assert cp.stdout.startswith("copy: ") and "via http" in cp.stdout
    got = subprocess.run([binary("objdirect"), "cat", f"s3://{bucket}/dst/copied"],
                         capture_output=True, env=cli_env(server), check=True).stdout
    assert got == data
    r = run(server, "cp", "-r", f"s3://{bucket}/src/", f"s3://{bucket}/tree/")
    assert "2 files" in r.stdout
    assert keys_of(server, bucket, "tree/") == ["tree/obj", "tree/sub/obj2"]
    log = wait_log(server, lambda log: sum(e["op"] == "CopyObject" and e["bucket"] == bucket
                                           for e in log) >= 3)
    ops = [(e["op"], e["key"]) for e in log if e["bucket"] == bucket]
    assert ("CopyObject", "dst/copied") in ops and ("CopyObject", "tree/sub/obj2") in ops
    # No object byte went through the client: the sources were never read by GET.
    assert not [k for op, k in ops if op == "GetObject" and k.startswith("src/")]


def test_rm_recursive(server, bucket, tmp_path):
    (tmp_path / "f").write_bytes(b"x")
    for i in range(25):
        run(server, "cp", str(tmp_path / "f"), f"s3://{bucket}/gone/{i % 3}/k{i}")
    run(server, "cp", str(tmp_path / "f"), f"s3://{bucket}/kept/k")
    run(server, "cp", str(tmp_path / "f"), f"s3://{bucket}/gone-not-a-child")
    p = run(server, "rm", "-r", f"s3://{bucket}/gone")
    assert p.stdout.startswith("delete: 25 objects")
    assert keys_of(server, bucket) == ["gone-not-a-child", "kept/k"]
    log = wait_log(server, lambda log: any(e["op"] == "DeleteObjects" and e["bucket"] == bucket
                                           for e in log))
    assert any(e["op"] == "DeleteObjects" and e["bucket"] == bucket for e in log)


def test_stdin_upload_and_stdout_download(server, bucket):
    for size, parts in ((100, None), (5 * MIB, 1), (12 * MIB + 5, 3)):
        data = os.urandom(size)
        up = subprocess.run([binary("objdirect"), "cp", "--part-size", "5MiB", "--json", "-",
                             f"s3://{bucket}/stream"], input=data, capture_output=True,
                            env=cli_env(server), timeout=120)
        assert up.returncode == 0, up.stderr
        assert json.loads(up.stdout)["bytes"] == size
        etag = json.loads(run(server, "stat", "--json", f"s3://{bucket}/stream").stdout)["etag"]
        assert etag.endswith(f"-{parts}") if parts else "-" not in etag, (size, etag)
        down = subprocess.run([binary("objdirect"), "cp", f"s3://{bucket}/stream", "-"],
                              capture_output=True, env=cli_env(server), timeout=120)
        assert down.returncode == 0 and down.stdout == data, down.stderr
    bad = run(server, "cp", "-", f"s3://{bucket}/", check=False)
    assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1


# -- interrupted downloads --------------------------------------------------------------------------


@pytest.fixture
def big_object(server, bucket, tmp_path):
    src = tmp_path / "big.src"
    with open(src, "wb") as f:
        f.truncate(256 * MIB)
    run(server, "cp", str(src), f"s3://{bucket}/big", "--part-size", str(64 * MIB))
    src.unlink()
    return f"s3://{bucket}/big"


def start_download_and_interrupt(server, url, dest, sig):
    """Starts a slow download (1 MiB parts, one at a time, over HTTP) and sends `sig` once its
    temporary file exists; returns (returncode, the temp names seen)."""
    d = os.path.dirname(dest)
    p = subprocess.Popen([binary("objdirect"), "cp", "--part-size", str(MIB), "--concurrency",
                          "1", "--fabric", "none", url, dest], env=cli_env(server),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    temps = []
    while not temps:
        assert time.monotonic() < deadline, "no temporary file appeared"
        assert p.poll() is None, f"download ended before it could be interrupted: {p.stderr.read()}"
        temps = [f for f in os.listdir(d) if f.startswith("." + os.path.basename(dest))]
        time.sleep(0.002)
    time.sleep(0.05)  # some parts in
    assert p.poll() is None, "download finished before the signal: make the object larger"
    p.send_signal(sig)
    p.wait(30)
    return p.returncode, temps


def test_sigkill_mid_download_leaves_no_destination(server, big_object, tmp_path):
    dest = str(tmp_path / "out.bin")
    rc, temps = start_download_and_interrupt(server, big_object, dest, signal.SIGKILL)
    assert rc == -signal.SIGKILL
    assert not os.path.exists(dest)
    assert re.fullmatch(r"\.out\.bin\.objdirect-\w{6}", temps[0])  # only a hidden temp name
    # An existing destination stays as it was.
    os.unlink(os.path.join(tmp_path, temps[0]))
    with open(dest, "wb") as f:
        f.write(b"previous contents")
    rc, _ = start_download_and_interrupt(server, big_object, dest, signal.SIGKILL)
    assert rc == -signal.SIGKILL
    with open(dest, "rb") as f:
        assert f.read() == b"previous contents"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_mid_download_removes_the_temp_file(server, big_object, tmp_path, sig):
    dest = str(tmp_path / "out.bin")
    rc, _ = start_download_and_interrupt(server, big_object, dest, sig)
    assert rc == -sig
    assert os.listdir(tmp_path) == []  # neither the destination nor the temp file


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_mid_upload_aborts_the_multipart_upload(server, bucket, tmp_path, sig):
    src = tmp_path / "up.bin"
    with open(src, "wb") as f:
        f.truncate(256 * MIB)
    key = f"interrupted-{int(sig)}"
    p = subprocess.Popen([binary("objdirect"), "cp", "--part-size", str(5 * MIB), "--concurrency",
                          "1", "--fabric", "none", str(src), f"s3://{bucket}/{key}"],
                         env=cli_env(server), stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def ops():
        return [e["op"] for e in access_log(server)
                if e["bucket"] == bucket and e["key"] == key]
    deadline = time.monotonic() + 60
    while "UploadPart" not in ops():
        assert time.monotonic() < deadline and p.poll() is None, p.stderr.read()
        time.sleep(0.005)
    p.send_signal(sig)
    p.wait(30)
    assert p.returncode == -sig
    wait_log(server, lambda log: any(e["op"] == "AbortMultipartUpload" and e["key"] == key
                                     for e in log))
    log = ops()
    # (a part in flight may still be logged after the abort: the server logs at completion)
    assert log[0] == "CreateMultipartUpload" and "AbortMultipartUpload" in log, log
    assert "CompleteMultipartUpload" not in log
    assert key not in " ".join(keys_of(server, bucket))


def test_signal_exit_is_not_held_by_a_stalled_server(server, bucket, tmp_path):
    """The abort waits at most limits::cli_abort_wait_ms (2 s) for a server that does not answer."""
    src = tmp_path / "up.bin"
    with open(src, "wb") as f:
        f.truncate(64 * MIB)
    p = subprocess.Popen([binary("objdirect"), "cp", "--part-size", str(5 * MIB), "--concurrency",
                          "1", "--fabric", "none", str(src), f"s3://{bucket}/stalled"],
                         env=cli_env(server), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not any(e["op"] == "UploadPart" and e["key"] == "stalled"
                  for e in access_log(server)):
        assert time.monotonic() < deadline and p.poll() is None, p.stderr.read()
        time.sleep(0.005)
    server.process.send_signal(signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        p.send_signal(signal.SIGINT)
        p.wait(30)
        waited = time.monotonic() - t0
    finally:
        server.process.send_signal(signal.SIGCONT)
    assert p.returncode == -signal.SIGINT
    assert 1.0 < waited < 10, waited  # it tried to abort, then gave up after about 2 s


def test_failed_download_leaves_nothing(server, bucket, tmp_path):
    p = run(server, "cp", f"s3://{bucket}/missing", str(tmp_path / "x"), check=False)
    assert p.returncode == 3
    assert os.listdir(tmp_path) == []


# -- exit codes -------------------------------------------------------------------------------------


def test_exit_codes_and_one_line_errors(server, bucket, tmp_path):
    cases = [
        (3, ["cp", f"s3://{bucket}/nope", str(tmp_path / "x")]),
        (3, ["stat", f"s3://{bucket}/nope"]),
        (3, ["ls", "s3://no-such-bucket-cli"]),
        (3, ["cp", str(tmp_path / "no-such-file"), f"s3://{bucket}/k"]),
        (2, ["cp", str(tmp_path / "a"), str(tmp_path / "b")]),
        (2, ["cp", "--fabric", "bogus", "s3://b/k", "x"]),
        (2, ["cp", "--part-size", "8XB", "s3://b/k", "x"]),
        (2, ["cp", "--part-size", "0", "s3://b/k", "x"]),
        (2, ["cp", "--part-size", "-3", "s3://b/k", "x"]),
        (2, ["cp", "--concurrency", "0", "s3://b/k", "x"]),
        (2, ["rm", "s3://bucket-only"]),
        (2, ["cp", str(tmp_path), f"s3://{bucket}/dir"]),  # a directory without --recursive
    ]
    for rc, args in cases:
        p = run(server, *args, check=False)
        assert p.returncode == rc, (args, p.returncode, p.stderr)
        assert len(p.stderr.strip().splitlines()) == 1, (args, p.stderr)
    denied = run(server, "ls", f"s3://{bucket}", check=False,
                 env=cli_env(server, AWS_SECRET_ACCESS_KEY="wrong-secret"))
    assert denied.returncode == 4, denied.stderr
    assert len(denied.stderr.strip().splitlines()) == 1
    unreachable = run(server, "ls", "--endpoint-url", "http://127.0.0.1:1", check=False)
    assert unreachable.returncode == 5 and len(unreachable.stderr.strip().splitlines()) == 1
    no_command = run(server, check=False)
    assert no_command.returncode == 2
    help_text = run(server, "--help").stdout
    assert "Exit codes: 0 ok" in help_text and "bench" in help_text


def test_profile_option(server, bucket, tmp_path):
    creds = tmp_path / "credentials"
    creds.write_text(f"[other]\naws_access_key_id = {ACCESS_KEY}\n"
                     f"aws_secret_access_key = {SECRET_KEY}\n")
    env = cli_env(server, AWS_SHARED_CREDENTIALS_FILE=str(creds), AWS_SECRET_ACCESS_KEY="bad")
    assert run(server, "ls", f"s3://{bucket}", "--profile", "other", env=env).returncode == 0
    p = run(server, "ls", f"s3://{bucket}", "--profile", "missing", env=env, check=False)
    assert p.returncode == 2


# -- progress ---------------------------------------------------------------------------------------


def run_on_pty(server, args):
    """Runs the CLI with stderr on a pseudo-terminal; returns (rc, stdout, what the tty got)."""
    master, slave = pty.openpty()
    p = subprocess.Popen([binary("objdirect"), *args], env=cli_env(server),
                         stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    tty = b""
    while True:
        r, _, _ = select.select([master], [], [], 0.1)
        if r:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            tty += chunk
        elif p.poll() is not None:
            break
    os.close(master)
    out = p.stdout.read().decode()
    return p.wait(), out, tty.decode(errors="replace")


def test_progress_bar_on_a_tty_only(server, bucket, tmp_path):
    src = tmp_path / "p.bin"
    src.write_bytes(os.urandom(24 * MIB))
    rc, out, tty = run_on_pty(server, ["cp", "--part-size", str(MIB), "--concurrency", "1",
                                       str(src), f"s3://{bucket}/p.bin"])
    assert rc == 0, tty
    assert "total" in tty and "ETA" in tty and "MiB" in tty and "/s" in tty, tty
    assert re.search(r"\d+%", tty)
    assert out.startswith("upload: ") and "via http" in out  # the final line, on stdout
    rc, out, tty = run_on_pty(server, ["cp", "-r", "--part-size", str(MIB), "--concurrency", "1",
                                       f"s3://{bucket}/", str(tmp_path / "down")])
    assert rc == 0 and "[1/1]" in tty and "ETA" in tty, tty
    rc, out, tty = run_on_pty(server, ["cp", "--no-progress", str(src), f"s3://{bucket}/q"])
    assert rc == 0 and tty == "", tty
    rc, out, tty = run_on_pty(server, ["cp", "--json", str(src), f"s3://{bucket}/q"])
    assert rc == 0 and tty == "" and json.loads(out)["bytes"] == 24 * MIB
    piped = run(server, "cp", str(src), f"s3://{bucket}/r")
    assert piped.stderr == ""


# -- bench --------------------------------------------------------------------------------------------


def test_bench_runs_the_benchmark_beside_the_binary(server):
    p = run(server, "bench", "--help")
    direct = subprocess.run([binary("objdirect-bench"), "--help"], capture_output=True, text=True)
    assert p.stdout == direct.stdout and p.stdout


# -- README -----------------------------------------------------------------------------------------


def test_readme_cli_example(server, tmp_path):
    readme = open(os.path.join(os.path.dirname(__file__), "..", "..", "README.md")).read()
    block = readme[readme.index("The CLI ("):]
    block = block[block.index("```sh\n") + 6:]
    block = block[:block.index("```")]
    assert "objdirect mb s3://demo" in block
    script = block.replace("build/bin/objdirect", binary("objdirect"))
    script = script.replace("http://127.0.0.1:9000", server.endpoint)
    script = script.replace("AWS_ACCESS_KEY_ID=objdirect ", f"AWS_ACCESS_KEY_ID={ACCESS_KEY} ")
    script = script.replace("AWS_SECRET_ACCESS_KEY=objdirect-secret",
                            f"AWS_SECRET_ACCESS_KEY='{SECRET_KEY}'")
    (tmp_path / "big.bin").write_bytes(os.urandom(20 * MIB))
    (tmp_path / "dataset" / "sub").mkdir(parents=True)
    (tmp_path / "dataset" / "sub" / "a.txt").write_text("a")
    p = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, env=cli_env(server),
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert (tmp_path / "copy.bin").read_bytes() == (tmp_path / "big.bin").read_bytes()
    assert " big2.bin\n" in p.stdout and " dataset/sub/a.txt\n" in p.stdout
    assert keys_of(server, "demo") == ["big.bin", "big2.bin"]
