"""The objdirect CLI as a separate process against the REAL objdirect-server on a loopback port.

Covers what the C++ client_integration_test does not: recursive copies of directory trees (up and
back down, compared by SHA-256), keys that would escape the destination, S3 -> S3 server-side
copies (checked in the server's access log), rm --recursive, interrupted downloads (SIGKILL and
SIGINT mid-transfer leave no destination file), the exit codes, the progress bar on a
pseudo-terminal and its absence when piped, `objdirect bench`, and the `aws s3` commands and flags:
sync (all three directions, --delete, --checksum, --exact-timestamps, --exclude/--include), mv,
presign (fetched with urllib; tampered and expired URLs refused), --dryrun, --quiet,
--content-type/--metadata (read back by boto3) and ls --human-readable --summarize.

Run by ctest (cli_pytest) with OBJDIRECT_BIN_DIR=<build>/bin; a missing binary fails.
"""

import hashlib
import json
import os
import shutil
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


def test_stdin_upload_guesses_no_content_type_as_awscli(server, bucket):
    """`cp - s3://B/K.json` sends no Content-Type (the server stores binary/octet-stream), single
    and multipart, as `aws s3 cp -` does (checked against the AWS CLI itself when installed);
    --content-type always wins."""
    s3 = s3_client(server)
    for size in (100, 6 * MIB):
        data = os.urandom(size)
        for key, extra in (("plain.json", []), ("typed.json", ["--content-type", "text/x-typed"])):
            up = subprocess.run([binary("objdirect"), "cp", "--part-size", "5MiB", *extra, "-",
                                 f"s3://{bucket}/{size}/{key}"], input=data, capture_output=True,
                                env=cli_env(server), timeout=120)
            assert up.returncode == 0, up.stderr
        h = s3.head_object(Bucket=bucket, Key=f"{size}/plain.json")
        assert h["ContentType"] == "binary/octet-stream", (size, h["ContentType"])
        assert s3.head_object(Bucket=bucket, Key=f"{size}/typed.json")["ContentType"] == \
            "text/x-typed"
        assert h["ETag"].strip('"').endswith("-2") == (size > 5 * MIB)
    for aws in ("/usr/bin/aws", shutil.which("aws")):
        if not aws or not os.access(aws, os.X_OK):
            continue
        env = cli_env(server, AWS_DEFAULT_REGION="us-east-1")
        p = subprocess.run([aws, "--endpoint-url", server.endpoint, "s3", "cp", "-",
                            f"s3://{bucket}/aws.json"], input=b"{}", capture_output=True, env=env,
                           timeout=120)
        assert p.returncode == 0, p.stderr
        assert s3.head_object(Bucket=bucket, Key="aws.json")["ContentType"] == \
            s3.head_object(Bucket=bucket, Key="100/plain.json")["ContentType"], aws


def test_profile_s3_block_transfer_settings(server, bucket, tmp_path):
    """The profile's nested `s3 =` block as awscli reads it: multipart_chunksize and
    multipart_threshold (with awscli's MB suffix, 1024-based) decide the part plan and
    max_concurrent_requests the width; command-line flags still win; use_accelerate_endpoint =
    true is refused with a message naming it."""
    cfg = tmp_path / "config"
    cfg.write_text("[default]\ns3 =\n  multipart_chunksize = 5MB\n  multipart_threshold = 6MB\n"
                   "  max_concurrent_requests = 2\n")
    env = cli_env(server, AWS_CONFIG_FILE=str(cfg))
    f = tmp_path / "twelve.bin"
    f.write_bytes(os.urandom(12 * MIB))
    small = tmp_path / "six.bin"
    small.write_bytes(os.urandom(6 * MIB - 1))
    run(server, "cp", str(f), f"s3://{bucket}/p", env=env)
    run(server, "cp", str(small), f"s3://{bucket}/s", env=env)
    run(server, "cp", "--part-size", "8MiB", str(f), f"s3://{bucket}/flag", env=env)
    run(server, "cp", str(f), f"s3://{bucket}/default")  # no profile: 8 MiB parts
    s3 = s3_client(server)
    etag = lambda k: s3.head_object(Bucket=bucket, Key=k)["ETag"].strip('"')
    assert etag("p").endswith("-3")  # 5 MiB chunks
    assert "-" not in etag("s")  # under the 6 MB threshold: one PutObject
    assert etag("flag").endswith("-2") and etag("default").endswith("-2")
    cfg.write_text("[default]\ns3 =\n  use_accelerate_endpoint = true\n")
    p = run(server, "cp", str(small), f"s3://{bucket}/acc", env=env, check=False)
    assert p.returncode != 0 and "use_accelerate_endpoint" in p.stderr, p.stderr
    cfg.write_text("[default]\ns3 =\n  multipart_chunksize = 1.5MB\n")
    p = run(server, "ls", env=env, check=False)
    assert p.returncode != 0 and "s3.multipart_chunksize" in p.stderr, p.stderr


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


def stop_process(pid: int, timeout: float = 30) -> None:
    """SIGSTOP, then wait until every thread of the process is stopped. kill() returns once the
    stop is queued: the thread it picks must run before the others are told, and on a loaded
    machine the others went on serving requests for several milliseconds."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + timeout
    while True:
        states = []
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            except FileNotFoundError:  # a thread that ended meanwhile
                pass
        if states and all(st in ("T", "t") for st in states):
            return
        assert time.monotonic() < deadline, f"process {pid} did not stop: {states}"
        time.sleep(0.001)


def test_signal_exit_is_not_held_by_a_stalled_server(server, bucket, tmp_path):
    """The abort waits at most limits::cli_abort_wait_ms (2 s) for a server that does not answer.
    The upload reads stdin, which the test keeps open after the first parts: the upload is
    certainly in flight when the signal comes (a file would be sent whole in a fraction of a
    second, and a loaded machine could let the upload finish before the signal)."""
    p = subprocess.Popen([binary("objdirect"), "cp", "--part-size", str(5 * MIB), "--concurrency",
                          "1", "--fabric", "none", "-", f"s3://{bucket}/stalled"],
                         env=cli_env(server), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    p.stdin.write(bytes(11 * MIB))  # two whole parts and a bit: stdin stays open
    p.stdin.flush()
    deadline = time.monotonic() + 60
    while not any(e["op"] == "UploadPart" and e["key"] == "stalled"
                  for e in access_log(server)):
        assert time.monotonic() < deadline and p.poll() is None, p.stderr.read()
        time.sleep(0.005)
    stop_process(server.process.pid)
    try:
        t0 = time.monotonic()
        p.send_signal(signal.SIGINT)
        p.wait(30)
        waited = time.monotonic() - t0
    finally:
        server.process.send_signal(signal.SIGCONT)
    p.stdin.close()
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
    # sync and mv draw the same bar (per-file lines on stdout); --quiet draws nothing.
    rc, out, tty = run_on_pty(server, ["sync", "--part-size", str(MIB), "--concurrency", "1",
                                       f"s3://{bucket}/", str(tmp_path / "sync")])
    assert rc == 0 and "[1/2]" in tty and "ETA" in tty, tty
    assert f"download: s3://{bucket}/q to {tmp_path / 'sync' / 'q'}\n" in out, out
    rc, out, tty = run_on_pty(server, ["sync", "--quiet", str(tmp_path / "sync"),
                                       f"s3://{bucket}/again"])
    assert rc == 0 and tty == "" and out == "", (tty, out)
    assert keys_of(server, bucket, "again/") == ["again/p.bin", "again/q"]
    piped = run(server, "cp", str(src), f"s3://{bucket}/r")
    assert piped.stderr == ""


# -- the aws s3 commands: sync, mv, presign, filters, --dryrun, --quiet, metadata, ls -h -----------


def write_files(root, files):
    for rel, data in files.items():
        p = os.path.join(root, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)


def sync_tree():
    return {
        "top.txt": b"hello\n",
        "a/one.bin": os.urandom(70_000),
        "a/skip.tmp": b"scratch",
        "a/keep.tmp": b"kept by --include",
        "a/b/c/deep.bin": os.urandom(6 * MIB + 3),  # two 5 MiB parts up: a multipart ETag
        "z/name with spaces.txt": b"spaces",
    }


def file_lines(p, verb):
    return sorted(line for line in p.stdout.splitlines() if line.startswith(verb + ": "))


def s3_client(server):
    import boto3
    from botocore.config import Config
    return boto3.client("s3", endpoint_url=server.endpoint, aws_access_key_id=ACCESS_KEY,
                        aws_secret_access_key=SECRET_KEY, region_name="us-east-1",
                        config=Config(s3={"addressing_style": "path"},
                                      retries={"max_attempts": 1}))


def test_sync_round_trips_a_tree_with_filters_and_delete(server, bucket, tmp_path):
    src, down, down2 = tmp_path / "src", tmp_path / "down", tmp_path / "down2"
    files = sync_tree()
    write_files(src, files)
    filt = ["--exclude", "*.tmp", "--include", "a/keep.tmp", "--part-size", "5MiB"]
    up = run(server, "sync", *filt, str(src), f"s3://{bucket}/t")
    wanted = sorted(k for k in files if k != "a/skip.tmp")
    assert file_lines(up, "upload") == sorted(
        f"upload: {src / k} to s3://{bucket}/t/{k}" for k in wanted), up.stdout
    assert keys_of(server, bucket) == sorted("t/" + k for k in wanted)
    # Nothing changed: the second sync copies nothing, by time and by ETag (multipart included).
    for extra in ([], ["--checksum"]):
        again = run(server, "sync", *filt, *extra, str(src), f"s3://{bucket}/t")
        assert file_lines(again, "upload") == [] and "sync: 0 files" in again.stdout, again.stdout
    # Down, then back again: the same bytes, and a second sync downloads nothing.
    run(server, "sync", f"s3://{bucket}/t", str(down))
    assert tree_digest(down) == {k: v for k, v in tree_digest(src).items() if k != "a/skip.tmp"}
    assert file_lines(run(server, "sync", f"s3://{bucket}/t", str(down)), "download") == []
    # S3 -> S3 (server-side), twice.
    s3s3 = run(server, "sync", f"s3://{bucket}/t", f"s3://{bucket}/u")
    assert len(file_lines(s3s3, "copy")) == len(wanted)
    assert file_lines(run(server, "sync", f"s3://{bucket}/t", f"s3://{bucket}/u"), "copy") == []
    # A changed size uploads that file only; --delete removes what the source lost, but never an
    # excluded destination file.
    (src / "top.txt").write_bytes(b"hello, longer\n")
    os.remove(src / "z" / "name with spaces.txt")
    changed = run(server, "sync", "--delete", *filt, str(src), f"s3://{bucket}/t")
    assert file_lines(changed, "upload") == [f"upload: {src / 'top.txt'} to s3://{bucket}/t/top.txt"]
    assert file_lines(changed, "delete") == [f"delete: s3://{bucket}/t/z/name with spaces.txt"]
    run(server, "cp", str(src / "a" / "skip.tmp"), f"s3://{bucket}/t/a/skip.tmp")
    run(server, "sync", "--delete", *filt, str(src), f"s3://{bucket}/t")
    assert f"t/a/skip.tmp" in keys_of(server, bucket, "t/")
    # S3 -> local --delete and S3 -> S3 --delete follow.
    gone = run(server, "sync", "--delete", f"s3://{bucket}/t", str(down), "--exclude", "*.tmp")
    assert file_lines(gone, "delete") == [f"delete: {down / 'z' / 'name with spaces.txt'}"]
    assert (down / "top.txt").read_bytes() == b"hello, longer\n"
    assert (down / "a" / "keep.tmp").exists()  # excluded on both sides: kept
    run(server, "sync", "--delete", f"s3://{bucket}/t", f"s3://{bucket}/u")
    assert keys_of(server, bucket, "u/") == [k.replace("t/", "u/", 1)
                                             for k in keys_of(server, bucket, "t/")]


def test_sync_checksum_and_exact_timestamps(server, bucket, tmp_path):
    src, down = tmp_path / "src", tmp_path / "down"
    write_files(src, {"f.bin": b"A" * 1000})
    run(server, "sync", str(src), f"s3://{bucket}/c")
    # Same size, other bytes, an old mtime: by time it is current, by checksum it is not.
    (src / "f.bin").write_bytes(b"B" * 1000)
    os.utime(src / "f.bin", (1_000_000_000, 1_000_000_000))
    assert file_lines(run(server, "sync", str(src), f"s3://{bucket}/c"), "upload") == []
    fixed = run(server, "sync", "--checksum", str(src), f"s3://{bucket}/c")
    assert len(file_lines(fixed, "upload")) == 1
    assert run(server, "cat", f"s3://{bucket}/c/f.bin").stdout == "B" * 1000
    # Down: the file gets the object's time; an older local file of the same size is current by
    # default and stale with --exact-timestamps.
    run(server, "sync", f"s3://{bucket}/c", str(down))
    (down / "f.bin").write_bytes(b"C" * 1000)
    os.utime(down / "f.bin", (1_000_000_000, 1_000_000_000))
    assert file_lines(run(server, "sync", f"s3://{bucket}/c", str(down)), "download") == []
    exact = run(server, "sync", "--exact-timestamps", f"s3://{bucket}/c", str(down))
    assert len(file_lines(exact, "download")) == 1
    assert (down / "f.bin").read_bytes() == b"B" * 1000


def test_mv_leaves_no_source(server, bucket, tmp_path):
    f = tmp_path / "one.txt"
    f.write_bytes(b"moving")
    p = run(server, "mv", str(f), f"s3://{bucket}/m/")
    assert p.stdout.startswith(f"move: {f} to s3://{bucket}/m/one.txt\n") and not f.exists()
    run(server, "mv", f"s3://{bucket}/m/one.txt", f"s3://{bucket}/n/two.txt")
    assert keys_of(server, bucket) == ["n/two.txt"]
    back = tmp_path / "back.txt"
    run(server, "mv", f"s3://{bucket}/n/two.txt", str(back))
    assert back.read_bytes() == b"moving" and keys_of(server, bucket) == []
    # A tree, with a filter: the excluded file stays where it was.
    tree = tmp_path / "tree"
    write_files(tree, {"x/a.bin": os.urandom(5000), "x/y/b.bin": b"b", "c.tmp": b"c"})
    run(server, "mv", "-r", "--exclude", "*.tmp", str(tree), f"s3://{bucket}/r")
    assert keys_of(server, bucket) == ["r/x/a.bin", "r/x/y/b.bin"]
    assert [p.name for p in tree.rglob("*") if p.is_file()] == ["c.tmp"]
    run(server, "mv", "-r", f"s3://{bucket}/r", f"s3://{bucket}/s")
    assert keys_of(server, bucket) == ["s/x/a.bin", "s/x/y/b.bin"]
    out = tmp_path / "out"
    run(server, "mv", "-r", f"s3://{bucket}/s/", str(out))
    assert keys_of(server, bucket) == [] and (out / "x" / "y" / "b.bin").read_bytes() == b"b"
    bad = run(server, "mv", f"s3://{bucket}/q", f"s3://{bucket}/q", check=False)
    assert bad.returncode == 3  # no such object: nothing moved


def test_presign_url_over_plain_http(server, bucket, tmp_path):
    import urllib.error
    import urllib.request
    data = os.urandom(10_000)
    (tmp_path / "p.bin").write_bytes(data)
    run(server, "cp", str(tmp_path / "p.bin"), f"s3://{bucket}/dir/p q.bin")
    url = run(server, "presign", f"s3://{bucket}/dir/p q.bin").stdout.strip()
    assert url.startswith(server.endpoint + f"/{bucket}/dir/p%20q.bin?") and "X-Amz-Expires=3600" in url
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.read() == data

    def status(u):
        try:
            with urllib.request.urlopen(u, timeout=10) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code
    sig = url.rindex("X-Amz-Signature=") + len("X-Amz-Signature=")
    tampered = url[:sig] + ("0" if url[sig] != "0" else "1") + url[sig + 1:]
    assert status(tampered) == 403
    assert status(url.replace("p%20q.bin", "p%20r.bin")) == 403  # another key: another signature
    short = run(server, "presign", "--expires-in", "1", f"s3://{bucket}/dir/p q.bin").stdout.strip()
    time.sleep(2.1)
    assert status(short) == 403
    for bad in ("604801",):
        p = run(server, "presign", "--expires-in", bad, f"s3://{bucket}/k", check=False)
        assert p.returncode == 2 and "604800" in p.stderr, p.stderr
    assert "X-Amz-Expires=604800" in run(server, "presign", "--expires-in", "604800",
                                         f"s3://{bucket}/k").stdout


def test_dryrun_changes_nothing(server, bucket, tmp_path):
    src = tmp_path / "src"
    write_files(src, {"a.txt": b"a", "d/b.txt": b"b"})
    run(server, "cp", str(src / "a.txt"), f"s3://{bucket}/old.txt")
    cmds = [["sync", "--delete", str(src), f"s3://{bucket}/"],
            ["cp", "-r", str(src), f"s3://{bucket}/c"],
            ["mv", f"s3://{bucket}/old.txt", f"s3://{bucket}/new.txt"],
            ["rm", "-r", f"s3://{bucket}/"],
            ["sync", f"s3://{bucket}/", str(tmp_path / "down")]]
    outs = []
    for cmd in cmds:
        p = run(server, cmd[0], "--dryrun", *cmd[1:])
        lines = p.stdout.splitlines()
        assert lines and all(line.startswith("(dryrun) ") for line in lines), (cmd, p.stdout)
        outs.append(p.stdout)
    assert f"(dryrun) delete: s3://{bucket}/old.txt\n" in outs[0]
    assert f"(dryrun) upload: {src / 'd' / 'b.txt'} to s3://{bucket}/d/b.txt\n" in outs[0]
    assert keys_of(server, bucket) == ["old.txt"]
    assert sorted(p.name for p in src.rglob("*") if p.is_file()) == ["a.txt", "b.txt"]
    assert not (tmp_path / "down").exists()
    # --quiet: no output at all, and the work is done.
    q = run(server, "sync", "--quiet", str(src), f"s3://{bucket}/q")
    assert q.stdout == "" and q.stderr == ""
    assert keys_of(server, bucket, "q/") == ["q/a.txt", "q/d/b.txt"]


def test_metadata_and_content_type_visible_via_head(server, bucket, tmp_path):
    small, big = tmp_path / "s.txt", tmp_path / "b.bin"
    small.write_bytes(b"meta")
    big.write_bytes(os.urandom(6 * MIB))
    meta = ["--content-type", "text/x-test", "--metadata", "Owner=alice,tag=a=b"]
    run(server, "cp", *meta, str(small), f"s3://{bucket}/s.txt")
    run(server, "cp", *meta, "--part-size", "5MiB", str(big), f"s3://{bucket}/b.bin")  # multipart
    tree = tmp_path / "t"
    write_files(tree, {"x.json": b"{}"})
    run(server, "sync", "--content-type", "application/json", "--metadata", "k=v", str(tree),
        f"s3://{bucket}/t")
    s3 = s3_client(server)
    for key in ("s.txt", "b.bin"):
        h = s3.head_object(Bucket=bucket, Key=key)
        assert h["ContentType"] == "text/x-test", h
        assert h["Metadata"] == {"owner": "alice", "tag": "a=b"}, h
    h = s3.head_object(Bucket=bucket, Key="t/x.json")
    assert h["ContentType"] == "application/json" and h["Metadata"] == {"k": "v"}
    # Refused before any request: a malformed list, a name that is no HTTP token, and names plus
    # values above user_metadata_bytes_max (2 KiB).
    run(server, "cp", "--metadata", "k=" + "v" * 2047, str(small), f"s3://{bucket}/edge")  # 2048 B
    assert s3.head_object(Bucket=bucket, Key="edge")["Metadata"] == {"k": "v" * 2047}
    for bad in ("novalue", "bad name=1", "k=" + "v" * 2048):
        p = run(server, "cp", "--metadata", bad, str(small), f"s3://{bucket}/bad", check=False)
        assert p.returncode == 2, (bad, p.stderr)
    assert "bad" not in keys_of(server, bucket)
    assert run(server, "stat", f"s3://{bucket}/bad", check=False).returncode == 3


def test_content_type_guessed_and_metadata_as_json(server, bucket, tmp_path):
    """As aws s3 cp: without --content-type the type comes from the file's extension (upper
    case too, and on the multipart path); --content-type overrides it; an unknown extension
    leaves the server's default. --metadata also takes aws-cli's JSON form."""
    files = {"page.HTML": b"<p>", "data.json": b"{}", "notes.txt": b"n", "blob.unknownext": b"u",
             "noext": b"x"}
    write_files(tmp_path / "g", files)
    big = tmp_path / "big.csv"
    big.write_bytes(os.urandom(6 * MIB))
    for name in files:
        run(server, "cp", str(tmp_path / "g" / name), f"s3://{bucket}/g/{name}")
    run(server, "cp", "--part-size", "5MiB", str(big), f"s3://{bucket}/g/big.csv")  # multipart
    run(server, "cp", "--content-type", "text/x-mine", str(tmp_path / "g" / "data.json"),
        f"s3://{bucket}/g/forced.json")
    run(server, "cp", "-r", str(tmp_path / "g"), f"s3://{bucket}/r")  # the tree path too
    run(server, "cp", "--metadata", '{"Owner": "alice", "tag": "a=b,c", "q": "say \\"hi\\""}',
        str(tmp_path / "g" / "notes.txt"), f"s3://{bucket}/g/json-meta")
    s3 = s3_client(server)
    want = {"g/page.HTML": "text/html", "g/data.json": "application/json",
            "g/notes.txt": "text/plain", "g/big.csv": "text/csv", "g/forced.json": "text/x-mine",
            "r/data.json": "application/json", "r/page.HTML": "text/html",
            "g/blob.unknownext": "binary/octet-stream", "g/noext": "binary/octet-stream"}
    got = {k: s3.head_object(Bucket=bucket, Key=k)["ContentType"] for k in want}
    assert got == want
    h = s3.head_object(Bucket=bucket, Key="g/json-meta")
    assert h["Metadata"] == {"owner": "alice", "tag": "a=b,c", "q": 'say "hi"'}, h
    for bad in ('{"k": 1}', '{"k": "v"', "[1]", '{"": "v"}'):
        p = run(server, "cp", "--metadata", bad, str(tmp_path / "g" / "noext"),
                f"s3://{bucket}/bad", check=False)
        assert p.returncode == 2 and "--metadata" in p.stderr, (bad, p.stderr)


def test_multipart_threshold_decides_the_part_plan(server, bucket, tmp_path):
    """--multipart-threshold (ClientConfig::multipart_threshold_bytes) decides whether the CLI
    uploads a file in parts: a 12 MiB file with 5 MiB parts is one PutObject under a 16 MiB
    threshold (a plain MD5 ETag) and three parts without it; sync's ETag comparison follows the
    same plan (a second sync --checksum uploads nothing)."""
    f = tmp_path / "t" / "twelve.bin"
    f.parent.mkdir()
    f.write_bytes(os.urandom(12 * MIB))
    run(server, "cp", "--part-size", "5MiB", "--multipart-threshold", "16MiB", str(f),
        f"s3://{bucket}/single")
    run(server, "cp", "--part-size", "5MiB", str(f), f"s3://{bucket}/parts")
    s3 = s3_client(server)
    assert "-" not in s3.head_object(Bucket=bucket, Key="single")["ETag"]
    assert s3.head_object(Bucket=bucket, Key="parts")["ETag"].strip('"').endswith("-3")
    args = ["sync", "--part-size", "5MiB", "--multipart-threshold", "16MiB", str(f.parent),
            f"s3://{bucket}/sync"]
    run(server, *args)
    assert "-" not in s3.head_object(Bucket=bucket, Key="sync/twelve.bin")["ETag"]
    p = run(server, *args, "--checksum")
    assert "upload:" not in p.stdout, p.stdout


def test_ls_human_readable_summarize(server, bucket, tmp_path):
    sizes = {"one": 1, "hundred": 100, "kib": 1536, "mib": 3 * MIB}
    for name, size in sizes.items():
        (tmp_path / "h" / name).parent.mkdir(exist_ok=True)
        (tmp_path / "h" / name).write_bytes(b"x" * size)
    run(server, "cp", "-r", str(tmp_path / "h"), f"s3://{bucket}/h")
    p = run(server, "ls", "-r", "--human-readable", "--summarize", f"s3://{bucket}/")
    human = {line.rsplit(" ", 1)[1]: line.split(None, 1)[1].rsplit(" ", 1)[0].strip()
             for line in p.stdout.splitlines() if line.startswith("20")}
    assert human == {"h/one": "1 Byte", "h/hundred": "100 Bytes", "h/kib": "1.5 KiB",
                     "h/mib": "3.0 MiB"}, p.stdout
    total = sum(sizes.values())
    assert p.stdout.endswith(f"\nTotal Objects: 4\n   Total Size: 3.0 MiB\n"), p.stdout
    raw = run(server, "ls", "-r", "--summarize", f"s3://{bucket}/h/")
    assert raw.stdout.endswith(f"\nTotal Objects: 4\n   Total Size: {total}\n"), raw.stdout


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
