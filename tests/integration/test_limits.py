"""Limits: DeleteObjects key count, max-keys clamping, --connections-max; DeleteObjects semantics."""

import base64
import concurrent.futures
import hashlib
import os
import socket
import subprocess
import time

import pytest

import objd
from conftest import empty_and_delete, unique_bucket

NS = objd.S3_NS


def delete_body(keys, quiet=False):
    xml = "<Delete>" + ("<Quiet>true</Quiet>" if quiet else "") + "".join(
        f"<Object><Key>{k}</Key></Object>" for k in keys) + "</Delete>"
    return xml.encode()


def post_delete(server, bucket, body):
    md5 = base64.b64encode(hashlib.md5(body).digest()).decode()
    return objd.request(server, "POST", "/" + bucket, query=[("delete", None)], body=body, headers={"Content-MD5": md5})


def test_delete_objects_1001_keys_is_malformed_xml(server, s3, bucket):
    s3.put_object(Bucket=bucket, Key="k0", Body=b"x")
    r = post_delete(server, bucket, delete_body([f"k{i}" for i in range(1001)]))
    objd.assert_error(r, 400, "MalformedXML")
    s3.head_object(Bucket=bucket, Key="k0")  # nothing was deleted


def test_delete_objects_1000_keys_ok(server, bucket):
    r = post_delete(server, bucket, delete_body([f"k{i}" for i in range(1000)]))
    assert r.status == 200, r
    deleted = r.xml().findall(NS + "Deleted")
    assert len(deleted) == 1000  # missing keys count as deleted


def test_delete_objects_numeric_keys_and_quiet(server, s3, bucket):
    keys = ["0", "7", "1e3", "a b", "x&y", "\u00fc"]
    for k in keys:
        s3.put_object(Bucket=bucket, Key=k, Body=b"x")
    s3.put_object(Bucket=bucket, Key="keep", Body=b"x")
    esc = [k.replace("&", "&amp;") for k in keys]
    r = post_delete(server, bucket, delete_body(esc))
    assert r.status == 200, r
    assert sorted(e.find(NS + "Key").text for e in r.xml().findall(NS + "Deleted")) == sorted(keys)
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["keep"]
    r = post_delete(server, bucket, delete_body(["keep"], quiet=True))
    assert r.status == 200, r
    assert r.xml().findall(NS + "Deleted") == []
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0


def test_delete_objects_via_boto3(s3, bucket):
    for k in ("1", "2", "3"):
        s3.put_object(Bucket=bucket, Key=k, Body=b"x")
    r = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "1"}, {"Key": "2"}, {"Key": "nope"}]})
    assert sorted(d["Key"] for d in r["Deleted"]) == ["1", "2", "nope"]
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["3"]


@pytest.fixture(scope="module")
def big_bucket(server, s3):
    name = unique_bucket("many")
    s3.create_bucket(Bucket=name)
    keys = [f"k{i:05d}" for i in range(1005)]
    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        list(ex.map(lambda k: s3.put_object(Bucket=name, Key=k, Body=b""), keys))
    yield name, keys
    empty_and_delete(s3, name)


@pytest.mark.parametrize("v2", [True, False])
def test_max_keys_over_1000_clamps(server, big_bucket, v2):
    name, keys = big_bucket
    q = [("list-type", "2")] if v2 else []
    r = objd.request(server, "GET", "/" + name, query=q + [("max-keys", "5000")])
    assert r.status == 200, r
    root = r.xml()
    got = [c.find(NS + "Key").text for c in root.findall(NS + "Contents")]
    assert got == keys[:1000]
    assert root.find(NS + "IsTruncated").text == "true"


def test_default_list_is_1000_and_paginates(s3, big_bucket):
    name, keys = big_bucket
    r = s3.list_objects_v2(Bucket=name)
    assert r["KeyCount"] == 1000 and r["IsTruncated"]
    r2 = s3.list_objects_v2(Bucket=name, ContinuationToken=r["NextContinuationToken"])
    assert [o["Key"] for o in r2["Contents"]] == keys[1000:]
    assert not r2["IsTruncated"]


# ------------------------------------------------------------------------------------------------
CONNECTIONS_MAX = 4


@pytest.fixture
def small_server(tmp_path):
    srv = objd.Server(str(tmp_path / "data"), str(tmp_path / "server.log"),
                      ["--connections-max", str(CONNECTIONS_MAX)]).start()
    yield srv
    alive = srv.alive()
    srv.stop()
    assert alive, "server died"


def keepalive_request(sock, host):
    """One signed ListBuckets on an open socket; returns the status (0: closed/reset/timeout)."""
    target, hdrs = objd.sign_headers(host, "GET", "/")
    try:
        sock.sendall((f"GET {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hdrs.items())
                      + "\r\n").encode())
        got = b""
        while b"\r\n\r\n" not in got:
            c = sock.recv(65536)
            if not c:
                return 0
            got += c
        head, _, rest = got.partition(b"\r\n\r\n")
        cl = [l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")]
        need = int(cl[0].split(b":")[1]) if cl else 0
        while len(rest) < need:
            c = sock.recv(65536)
            if not c:
                break
            rest += c
        return objd.status_of(got)
    except (socket.timeout, ConnectionResetError, BrokenPipeError):
        return 0


def test_connections_max_honoured(small_server):
    srv = small_server
    held = []
    for _ in range(CONNECTIONS_MAX):
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        assert keepalive_request(s, srv.host) == 200
        held.append(s)
    # every slot is taken by a live keep-alive connection: the next one is refused or waits
    extra = socket.create_connection(("127.0.0.1", srv.port), timeout=2)
    st = keepalive_request(extra, srv.host)
    assert st in (0, 503), f"connection {CONNECTIONS_MAX + 1} was served ({st}) with --connections-max {CONNECTIONS_MAX}"
    extra.close()
    # the held connections still work
    for s in held:
        assert keepalive_request(s, srv.host) == 200
    for s in held:
        s.close()
    # once they are gone the server serves new connections again
    deadline = time.monotonic() + 10
    while True:
        try:
            objd.health(srv)
            break
        except (AssertionError, OSError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_connection_flood_stays_healthy(small_server):
    srv = small_server
    socks = []
    for _ in range(50):
        try:
            socks.append(socket.create_connection(("127.0.0.1", srv.port), timeout=2))
        except OSError:
            pass
    for s in socks:
        s.close()
    deadline = time.monotonic() + 10
    while True:
        try:
            objd.health(srv)
            break
        except (AssertionError, OSError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@pytest.mark.parametrize("threads, ok", [("256", True), ("257", False)])
def test_put_digest_threads_max(tmp_path, threads, ok):
    """--put-digest-threads is capped at limits::put_digest_threads_max (256)."""
    if ok:
        srv = objd.Server(str(tmp_path / "data"), str(tmp_path / "server.log"),
                          ["--put-digest-threads", threads])
        srv.start()
        try:
            body = os.urandom(3 * 1024 * 1024 + 5)
            r = objd.request(srv, "PUT", objd.opath("digest-max"))
            assert r.status == 200, r
            r = objd.request(srv, "PUT", objd.opath("digest-max", "obj"), body=body)
            assert r.status == 200 and r.header("etag") == f'"{hashlib.md5(body).hexdigest()}"', r
        finally:
            srv.stop()
        return
    cmd = [objd.server_binary(), "--listen", "127.0.0.1:0", "--data", str(tmp_path / "data"),
           "--access-key", objd.ACCESS_KEY, "--secret-key", objd.SECRET_KEY,
           "--put-digest-threads", threads]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    assert p.returncode != 0, (p.returncode, p.stderr)
    assert "--put-digest-threads: Value 257 not in range" in p.stderr.decode(), p.stderr.decode()


def _congestion_controls():
    with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as f:
        available = f.read().split()
    with open("/proc/sys/net/ipv4/tcp_congestion_control") as f:
        default = f.read().strip()
    return available, default


def _server_side_congestion(port):
    """The congestion control of the server's end of the connections to `port`, from ss(8)."""
    out = subprocess.run(["ss", "-tniH", "state", "established", f"( sport = :{port} )"],
                         capture_output=True, text=True, timeout=30, check=True).stdout
    # ss prints each socket as an address line followed by an indented info line.
    return [l.split()[0] for l in out.splitlines() if l[:1] in (" ", "\t") and l.strip()]


def test_tcp_congestion_is_set_on_accepted_connections(tmp_path):
    """--tcp-congestion NAME: every accepted connection runs NAME, not the kernel's default
    (docs/BENCHMARKS.md, "TCP congestion control"), and the server says which it uses."""
    available, default = _congestion_controls()
    others = [c for c in available if c != default]
    want = others[0] if others else default
    srv = objd.Server(str(tmp_path / "data"), str(tmp_path / "server.log"),
                      ["--no-fsync", "--tcp-congestion", want])
    srv.start()
    try:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")  # anonymous: 403
            assert s.recv(4096).startswith(b"HTTP/1.1 ")
            assert _server_side_congestion(srv.port) == [want]
    finally:
        srv.stop()
    with open(tmp_path / "server.log") as f:
        assert f"TCP congestion control {want}\n" in f.read()


@pytest.mark.parametrize("name, says", [
    ("nosuch", "TCP congestion control 'nosuch': not available in this kernel (available: "),
    ("x" * 16, "TCP congestion control name longer than 15 bytes"),
])
def test_tcp_congestion_refused(tmp_path, name, says):
    """A congestion control the kernel does not have, or a name past
    limits::tcp_congestion_name_bytes_max (15), stops the server at start with a clear message."""
    cmd = [objd.server_binary(), "--listen", "127.0.0.1:0", "--data", str(tmp_path / "data"),
           "--access-key", objd.ACCESS_KEY, "--secret-key", objd.SECRET_KEY,
           "--tcp-congestion", name]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    assert p.returncode != 0, (p.returncode, p.stderr)
    assert says in p.stderr.decode(), p.stderr.decode()
    assert b"listening on" not in p.stdout
