"""Fixtures of the objdirect Python suite: the REAL objdirect-server binary on a loopback port.

The binary comes from $OBJDIRECT_BIN_DIR (ctest sets <build>/bin). The package under test is the
one on sys.path (ctest puts <build>/python first). Nothing here skips: a missing binary fails.
The environment is scrubbed of AWS_* and OBJDIRECT_* settings so the developer's ~/.aws and
shell cannot change what a test sees.
"""

import os
import re
import select
import signal
import subprocess
import threading
import time

import pytest

ACCESS_KEY = "pytestaccesskey"
SECRET_KEY = "pytest-secret-key/0123456789+abcdef"

# The suite's own controls survive the scrub: where the binaries are, the switches that turn the
# GPU and DCP skips into failures (scripts/gpu-check.sh sets them), and the parsers' fuzz loop
# seed and length. No client reads these.
TEST_CONTROLS = ("OBJDIRECT_BIN_DIR", "OBJDIRECT_REQUIRE_GPU", "OBJDIRECT_REQUIRE_DCP",
                 "OBJDIRECT_FUZZ_SEED", "OBJDIRECT_FUZZ_ITERATIONS")
for _k in list(os.environ):
    if _k.startswith("AWS_") or (_k.startswith("OBJDIRECT_") and _k not in TEST_CONTROLS):
        del os.environ[_k]
# No profile files unless a test writes its own.
os.environ["AWS_SHARED_CREDENTIALS_FILE"] = "/nonexistent/objdirect-pytest/credentials"
os.environ["AWS_CONFIG_FILE"] = "/nonexistent/objdirect-pytest/config"
# libfabric's tcp provider: stay on loopback (the machine may have other interfaces).
os.environ.setdefault("FI_TCP_IFACE", "lo")

import objdirect  # noqa: E402  (after the scrub: nothing may read the environment before)


def server_binary():
    bin_dir = os.environ.get("OBJDIRECT_BIN_DIR")
    assert bin_dir, "OBJDIRECT_BIN_DIR is not set (ctest sets it to <build>/bin)"
    path = os.path.join(bin_dir, "objdirect-server")
    assert os.access(path, os.X_OK), f"{path} is missing (build the objdirect-server target)"
    return path


class Server:
    """One objdirect-server process; stdout is drained into the log after the listening line."""

    def __init__(self, data_dir, log_path, extra_args=(), env=None):
        """env: variables set in the server's environment only (added to this process's)."""
        self.data_dir, self.log_path, self.extra_args = data_dir, log_path, list(extra_args)
        self.env = dict(os.environ, **env) if env else None
        self.proc = None
        self.endpoint = None

    def start(self, timeout_s=30):
        os.makedirs(self.data_dir, exist_ok=True)
        cmd = [server_binary(), "--listen", "127.0.0.1:0", "--data", str(self.data_dir),
               "--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY] + self.extra_args
        log = open(self.log_path, "ab")
        log.write(("### " + " ".join(cmd) + "\n").encode())
        log.flush()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL,
                                     env=self.env)
        deadline = time.monotonic() + timeout_s
        line = b""
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(f"objdirect-server did not start (got {line!r}); log:\n{self.log_tail()}")
            r, _, _ = select.select([self.proc.stdout], [], [], min(left, 0.2))
            if r:
                line += os.read(self.proc.stdout.fileno(), 1)
        m = re.match(r"objdirect-server listening on (https?://127\.0\.0\.1:\d+)", line.decode())
        assert m, f"unexpected first line {line!r}"
        self.endpoint = m.group(1)

        def pump(src=self.proc.stdout, dst=log):
            for chunk in iter(lambda: os.read(src.fileno(), 65536), b""):
                dst.write(chunk)
                dst.flush()
        threading.Thread(target=pump, daemon=True).start()
        return self

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def log_tail(self, n=4000):
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-n:].decode(errors="replace")
        except OSError:
            return "(no log)"


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    d = tmp_path_factory.mktemp("server")
    s = Server(d / "data", d / "server.log", ["--no-fsync", "--access-log", str(d / "access.log")])
    s.access_log = d / "access.log"
    s.start()
    yield s
    s.stop()


def make_client(server, **kwargs):
    kwargs.setdefault("fabric", "none")
    return objdirect.Client(endpoint=server.endpoint, access_key=ACCESS_KEY, secret_key=SECRET_KEY,
                            **kwargs)


@pytest.fixture
def client(server):
    with make_client(server) as c:
        yield c


def _bucket_name(nodeid):
    name = re.sub(r"[^a-z0-9-]+", "-", nodeid.split("::")[-1].lower()).strip("-")
    return ("py-" + name)[:55].rstrip("-")


@pytest.fixture
def bucket(client, request):
    name = _bucket_name(request.node.nodeid)
    client.create_bucket(name)
    yield name
    for o in list(client.list(name)):
        client.delete(name, o.key)
    client.delete_bucket(name)
