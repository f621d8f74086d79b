"""Shared helpers of the objdirect-server integration suite.

- Server: starts the real objdirect-server binary on a loopback port with a data dir, stops it
  (SIGTERM) or kills it (SIGKILL), restarts it on the same data dir.
- sign_headers()/request(): SigV4-signed raw HTTP (botocore.auth.SigV4Auth on an AWSRequest, sent
  with http.client) so that a test controls every header and every byte of the body.
- raw_exchange(): a plain socket for bytes that are not HTTP at all.
- assert_error(): checks an S3 error response (status, Code, non-empty Message, Resource,
  RequestId, x-amz-request-id header).
- boto3_client(): Debian boto3 1.26 pointed at a Server, path-style, one attempt.

Nothing here skips: a missing binary or tool is a failure.
"""

import datetime
import glob
import hashlib
import hmac
import http.client
import os
import select
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.parse
import xml.etree.ElementTree as ET

import boto3
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials

ACCESS_KEY = "itestaccesskey"
SECRET_KEY = "itest-secret-key/0123456789+abcdef"
REGION = "us-east-1"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
S3_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"


def gateway_mode():
    """True when the suite runs against a gateway (scripts/with-upstream.sh: --backend s3)."""
    return "--backend s3" in os.environ.get("OBJDIRECT_SERVER_ARGS", "")


def keeps_versions():
    """True when the suite's backend keeps object versions (docs/versioning.md): the local and
    RADOS backends, with or without the read-through cache (--cache-dir, which forwards the
    version calls); not the gateway (--backend s3), which passes them through."""
    args = os.environ.get("OBJDIRECT_SERVER_ARGS", "").split()
    backend = args[args.index("--backend") + 1] if "--backend" in args[:-1] else "local"
    return backend in ("local", "rados")


def server_binary():
    bin_dir = os.environ.get("OBJDIRECT_BIN_DIR")
    assert bin_dir, "OBJDIRECT_BIN_DIR is not set (ctest sets it to <build>/bin)"
    path = os.path.join(bin_dir, "objdirect-server")
    assert os.access(path, os.X_OK), f"{path} does not exist or is not executable (build target objdirect-server)"
    return path


RADOS_START_S = 120  # how long a --backend rados server may take to listen


class Server:
    """One objdirect-server process. Not thread-safe; one test drives it."""

    def __init__(self, data_dir, log_path, extra_args=(), listen_host="127.0.0.1", netns=None,
                 connect_host=None, env=None):
        """listen_host: --listen address (port 0); netns: run it in that network namespace
        (tests/integration/netns.py); connect_host: the address clients use (listen_host unless
        that is 0.0.0.0); env: extra environment variables for the server."""
        self.data_dir = data_dir
        self.log_path = log_path
        self.extra_args = list(extra_args)
        self.listen_host = listen_host
        self.netns = netns
        self.connect_host = connect_host or listen_host
        self.env = dict(env or {})
        self.proc = None
        self.port = None
        self._pump = None

    @property
    def host(self):
        return f"{self.connect_host}:{self.port}"

    @property
    def endpoint(self):
        return f"http://{self.connect_host}:{self.port}"

    def start(self, timeout_s=30):
        if "rados" in self.extra_args and timeout_s < RADOS_START_S:
            # Connecting to the Ceph cluster and creating the pools is monitor work, which an
            # overloaded single-node test cluster can take tens of seconds for.
            timeout_s = RADOS_START_S
        os.makedirs(self.data_dir, exist_ok=True)
        cmd = [server_binary(), "--listen", f"{self.listen_host}:0", "--data", self.data_dir,
               "--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY] + self.extra_args
        if self.netns:
            cmd = ["ip", "netns", "exec", self.netns] + cmd  # ip execs the server: same pid
        log = open(self.log_path, "ab")
        log.write(("\n### " + " ".join(cmd) + "\n").encode())
        log.flush()
        env = dict(os.environ, **self.env) if self.env else None
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, env=env)
        try:
            self._await_listening(log, timeout_s)
        except BaseException:
            # Whatever failed here, the server must not outlive the test.
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            raise
        return self

    def _await_listening(self, log, timeout_s):
        deadline = time.monotonic() + timeout_s
        line = b""
        # poll(), not select(): a test process may hold descriptors past select()'s 1024.
        poller = select.poll()
        poller.register(self.proc.stdout, select.POLLIN)
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                stacks = self._stacks() if self.proc.poll() is None else ""
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(f"server did not print its listening line within {timeout_s}s "
                                     f"(rc={self.proc.returncode}, got {line!r}); log:\n{self.log_tail()}"
                                     f"\n{stacks}")
            if poller.poll(int(min(left, 0.2) * 1000)):
                c = os.read(self.proc.stdout.fileno(), 1)
                if not c:
                    continue
                line += c
        text = line.decode(errors="replace").strip()
        log.write(("### stdout: " + text + "\n").encode())
        log.flush()
        prefix = f"objdirect-server listening on http://{self.listen_host}:"
        assert text.startswith(prefix), f"unexpected first stdout line {text!r}"
        self.port = int(text[len(prefix):].rstrip("/"))

        # Keep draining stdout so the server never blocks on a full pipe.
        def pump(src=self.proc.stdout, dst=log):
            for chunk in iter(lambda: os.read(src.fileno(), 65536), b""):
                dst.write(chunk)
                dst.flush()
        self._pump = threading.Thread(target=pump, daemon=True)
        self._pump.start()

    def _stacks(self):
        """Thread stacks of a hung server (gdb, if installed), for the failure message."""
        gdb = shutil.which("gdb")
        if not gdb:
            return "(no gdb for stacks)"
        try:
            p = subprocess.run([gdb, "-batch", "-p", str(self.proc.pid), "-ex", "thread apply all bt 30"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
            return "stacks of the hung server:\n" + p.stdout.decode(errors="replace")[-12000:]
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"(gdb failed: {e})"

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout_s=15):
        """SIGTERM, wait; returns the exit code (SIGKILL after timeout_s, then raises)."""
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"server ignored SIGTERM for {timeout_s}s")

    def kill9(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
            self._remove_shm_leftovers()

    def _remove_shm_leftovers(self):
        """A SIGKILLed server cannot unlink its libfabric shm region (/dev/shm/<pid>:0:0, 16 MiB of
        tmpfs each); remove what the dead process left so that repeated runs do not fill memory."""
        leaked = glob.glob(f"/dev/shm/{self.proc.pid}:*")
        for f in leaked:
            try:
                os.unlink(f)
            except OSError:
                pass
        if leaked:
            with open(self.log_path, "ab") as log:
                log.write(f"### removed after SIGKILL: {' '.join(leaked)}\n".encode())

    def log_tail(self, n_bytes=4000):
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, 2)
                size = f.tell()
                f.seek(max(0, size - n_bytes))
                return f.read().decode(errors="replace")
        except OSError:
            return "(no log)"


# ------------------------------------------------------------------------------------------------
# Signed raw HTTP


class _SigV4(SigV4Auth):
    """SigV4Auth with S3's path rules (no dot-segment or slash normalisation) and an optional
    fixed timestamp (for clock-skew tests)."""

    def __init__(self, credentials, timestamp=None):
        super().__init__(credentials, "s3", REGION)
        self._fixed = timestamp

    def _normalize_url_path(self, path):
        return path

    def add_auth(self, request):
        if self._fixed is None:
            return super().add_auth(request)
        request.context["timestamp"] = self._fixed.strftime("%Y%m%dT%H%M%SZ")
        self._modify_request_before_signing(request)
        canonical_request = self.canonical_request(request)
        string_to_sign = self.string_to_sign(request, canonical_request)
        signature = self.signature(string_to_sign, request)
        self._inject_signature_to_request(request, signature)


def quote_key(key):
    """Percent-encodes an object key for a path (S3 style: '/' kept, everything else strict)."""
    return urllib.parse.quote(key, safe="/~")


def opath(bucket, key=None):
    return f"/{bucket}" if key is None else f"/{bucket}/{quote_key(key)}"


def query_string(query):
    """query: None, a dict or a list of (name, value); value None means a bare name (?uploads)."""
    if not query:
        return ""
    items = query.items() if isinstance(query, dict) else query
    parts = []
    for k, v in items:
        k = urllib.parse.quote(str(k), safe="-_.~")
        parts.append(k if v is None else f"{k}={urllib.parse.quote(str(v), safe='-_.~')}")
    return "&".join(parts)


def sign_headers(host, method, path, query=None, headers=None, payload_hash=None, body=b"",
                 access_key=ACCESS_KEY, secret_key=SECRET_KEY, timestamp=None):
    """Returns (target, headers) for a request signed with SigV4. payload_hash defaults to the
    sha256 of body; pass 'UNSIGNED-PAYLOAD' or a streaming marker to override. Every header given
    (plus host, x-amz-date, x-amz-content-sha256) is signed."""
    qs = query_string(query)
    target = path + ("?" + qs if qs else "")
    hdrs = dict(headers or {})
    if payload_hash is None:
        payload_hash = hashlib.sha256(body).hexdigest()
    hdrs["X-Amz-Content-SHA256"] = payload_hash
    hdrs["Host"] = host
    req = AWSRequest(method=method, url=f"http://{host}{target}", headers=hdrs, data=b"")
    _SigV4(Credentials(access_key, secret_key), timestamp).add_auth(req)
    return target, dict(req.headers.items())


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.header_list = headers
        self.headers = {k.lower(): v for k, v in headers}
        self.body = body

    def header(self, name, default=None):
        return self.headers.get(name.lower(), default)

    def xml(self):
        return ET.fromstring(self.body)

    def __repr__(self):
        return f"<Response {self.status} {self.headers} {self.body[:600]!r}>"


def send(host, method, target, headers, body=b"", timeout_s=60):
    """Sends exactly these headers (no Host/Accept-Encoding added) and body; returns Response."""
    h, p = host.rsplit(":", 1)
    conn = http.client.HTTPConnection(h, int(p), timeout=timeout_s)
    try:
        conn.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
        names = {k.lower() for k in headers}
        for k, v in headers.items():
            # raw UTF-8 on the wire (http.client would otherwise insist on latin-1)
            conn.putheader(k, v.encode("utf-8") if isinstance(v, str) else v)
        if "content-length" not in names and "transfer-encoding" not in names and (body or method in ("PUT", "POST")):
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders()
        if body:
            conn.send(body)
        r = conn.getresponse()
        data = r.read()
        return Response(r.status, r.getheaders(), data)
    finally:
        conn.close()


def request(server, method, path, query=None, headers=None, body=b"", sign=True, payload_hash=None,
            access_key=ACCESS_KEY, secret_key=SECRET_KEY, timestamp=None, timeout_s=60):
    """One signed (or, with sign=False, anonymous) request to server; returns Response."""
    host = server.host if isinstance(server, Server) else server
    if sign:
        target, hdrs = sign_headers(host, method, path, query, headers, payload_hash, body,
                                    access_key, secret_key, timestamp)
    else:
        qs = query_string(query)
        target = path + ("?" + qs if qs else "")
        hdrs = dict(headers or {})
        hdrs["Host"] = host
    return send(host, method, target, hdrs, body, timeout_s)


def signing_key(secret_key, date8):
    k = hmac.new(("AWS4" + secret_key).encode(), date8.encode(), hashlib.sha256).digest()
    for part in (REGION, "s3", "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    return k


def seed_signature(headers):
    auth = headers["Authorization"]
    return auth.rsplit("Signature=", 1)[1].strip()


def aws_chunked_signed(headers, payload, chunk_bytes, secret_key=SECRET_KEY, corrupt_chunk=None, trailer=None,
                       corrupt_trailer=False):
    """Encodes payload as STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER] chunks, chaining signatures
    from the seed signature in headers (as produced by sign_headers). corrupt_chunk: index of a
    chunk whose signature is flipped. trailer: (name, value) sent after the final chunk with an
    x-amz-trailer-signature (flipped if corrupt_trailer)."""
    amz_date = headers["X-Amz-Date"]
    scope = f"{amz_date[:8]}/{REGION}/s3/aws4_request"
    key = signing_key(secret_key, amz_date[:8])
    prev = seed_signature(headers)
    out = bytearray()
    chunks = [payload[i:i + chunk_bytes] for i in range(0, len(payload), chunk_bytes)] + [b""]

    def flip(sig):
        return ("0" if sig[0] != "0" else "1") + sig[1:]

    for i, c in enumerate(chunks):
        sts = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", amz_date, scope, prev, EMPTY_SHA256,
                         hashlib.sha256(c).hexdigest()])
        sig = hmac.new(key, sts.encode(), hashlib.sha256).hexdigest()
        prev = sig
        if corrupt_chunk == i:
            sig = flip(sig)
        out += f"{len(c):x};chunk-signature={sig}\r\n".encode() + c
        if c or trailer is None:
            out += b"\r\n"
    if trailer is not None:
        line = f"{trailer[0]}:{trailer[1]}\n".encode()
        sts = "\n".join(["AWS4-HMAC-SHA256-TRAILER", amz_date, scope, prev, hashlib.sha256(line).hexdigest()])
        sig = hmac.new(key, sts.encode(), hashlib.sha256).hexdigest()
        if corrupt_trailer:
            sig = flip(sig)
        out += line.replace(b"\n", b"\r\n") + f"x-amz-trailer-signature:{sig}\r\n\r\n".encode()
    return bytes(out)


def raw_exchange(server, data, read_timeout_s=10, shutdown_write=False):
    """Sends raw bytes on a fresh connection, returns what the server sent back until it closed
    or read_timeout_s passed (b'' if it closed without answering)."""
    s = socket.create_connection(("127.0.0.1", server.port), timeout=read_timeout_s)
    try:
        s.sendall(data)
        if shutdown_write:
            s.shutdown(socket.SHUT_WR)
        out = b""
        deadline = time.monotonic() + read_timeout_s
        while time.monotonic() < deadline:
            try:
                c = s.recv(65536)
            except socket.timeout:
                break
            except ConnectionResetError:
                break
            if not c:
                break
            out += c
            if b"\r\n\r\n" in out:
                head, _, rest = out.partition(b"\r\n\r\n")
                cl = [l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")]
                if cl and len(rest) >= int(cl[0].split(b":", 1)[1]):
                    break
        return out
    finally:
        s.close()


def status_of(raw):
    """HTTP status code of a raw response (0 if there is none)."""
    if not raw.startswith(b"HTTP/1."):
        return 0
    return int(raw.split(b" ", 2)[1])


# ------------------------------------------------------------------------------------------------
# S3 checks


def error_fields(body):
    root = ET.fromstring(body)
    tag = root.tag.replace(S3_NS, "")
    assert tag == "Error", f"error body root is {root.tag}, want Error: {body[:300]!r}"
    return {c.tag.replace(S3_NS, ""): (c.text or "") for c in root}


def assert_error(resp, status, code):
    """An S3 error: HTTP status, <Code>, non-empty <Message>, <Resource>, <RequestId>, and an
    x-amz-request-id header equal to RequestId."""
    assert resp.status == status, f"want {status} {code}, got {resp!r}"
    assert resp.header("x-amz-request-id"), f"no x-amz-request-id: {resp!r}"
    if status == 304 or resp.body == b"":
        assert code is None or resp.body == b"", resp
        return None
    f = error_fields(resp.body)
    assert f.get("Code") == code, f"want Code {code}, got {f}"
    assert f.get("Message", "").strip(), f"empty Message: {f}"
    assert "Resource" in f, f"no Resource: {f}"
    assert f.get("RequestId"), f"no RequestId: {f}"
    return f


def health(server):
    """The server answers a signed ListBuckets with 200."""
    r = request(server, "GET", "/", timeout_s=15)
    assert r.status == 200, f"health check failed: {r!r}"
    return r


def cli_env(server):
    """The environment for the objdirect CLI (or aws) against `server` as the test user: the
    endpoint and credentials the AWS way, FI_TCP_IFACE=lo for libfabric tcp, and no profile or
    CA bundle from the caller's environment."""
    env = dict(os.environ, AWS_ENDPOINT_URL=server.endpoint, AWS_ACCESS_KEY_ID=ACCESS_KEY,
               AWS_SECRET_ACCESS_KEY=SECRET_KEY, AWS_REGION=REGION, FI_TCP_IFACE="lo")
    env.pop("AWS_PROFILE", None)
    env.pop("AWS_CA_BUNDLE", None)
    return env


def boto3_client(server, **s3cfg):
    cfg = Config(signature_version="s3v4", s3=dict({"addressing_style": "path"}, **s3cfg),
                 retries={"total_max_attempts": 1}, connect_timeout=10, read_timeout=120)
    return boto3.client("s3", endpoint_url=server.endpoint, aws_access_key_id=ACCESS_KEY,
                        aws_secret_access_key=SECRET_KEY, region_name=REGION, config=cfg)


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for c in iter(lambda: f.read(1 << 20), b""):
            h.update(c)
    return h.hexdigest()


def files_under(path):
    out = []
    for root, _, files in os.walk(path):
        out += [os.path.join(root, f) for f in files]
    return out


def which(name):
    return shutil.which(name)


def utcnow():
    return datetime.datetime.utcnow()
