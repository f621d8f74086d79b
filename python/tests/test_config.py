"""objdirect.ClientConfig (boto3 / s3transfer names) against the real objdirect-server: each name
changes what the client does; HTTPS endpoints with a test CA (ca_bundle and AWS_CA_BUNDLE), a
wrong CA and a certificate for another name refused; virtual-hosted addressing against the
server's --domain; 307 Temporary Redirects followed through a tiny redirecting proxy, bounded by
redirects_max.
"""

import http.client
import http.server
import os
import socket
import subprocess
import threading
import time
import urllib.parse

import numpy as np
import pytest

import objdirect
from conftest import ACCESS_KEY, SECRET_KEY, Server, make_client

MiB = 1 << 20


def test_names_map_to_the_native_settings(server):
    cfg = objdirect.ClientConfig(max_attempts=5, retry_mode="adaptive", max_concurrency=3,
                                 multipart_chunksize=6 * MiB, multipart_threshold=7 * MiB,
                                 connect_timeout=2.5, read_timeout=7, max_pool_connections=9,
                                 region_name="eu-west-1", addressing_style="virtual",
                                 redirects_max=2)
    with make_client(server, config=cfg) as c:
        got = c.config
    assert (got["max_attempts"], got["retry_mode"], got["concurrency"], got["part_size_bytes"],
            got["multipart_threshold_bytes"], got["connect_timeout_ms"], got["io_timeout_ms"],
            got["connections_max"], got["region"], got["addressing_style"],
            got["redirects_max"]) == (5, "adaptive", 3, 6 * MiB, 7 * MiB, 2500, 7000, 9,
                                      "eu-west-1", "virtual", 2)
    # A keyword given explicitly wins over the config object; merge() layers configs.
    with make_client(server, config=cfg, concurrency=4, max_attempts=2) as c:
        assert (c.config["concurrency"], c.config["max_attempts"]) == (4, 2)
    merged = cfg.merge(objdirect.ClientConfig(max_concurrency=11))
    assert (merged.max_concurrency, merged.max_attempts) == (11, 5)
    with pytest.raises(TypeError):
        make_client(server, config={"max_attempts": 2})
    with pytest.raises(objdirect.InvalidArgument, match="addressing_style"):
        make_client(server, config=objdirect.ClientConfig(addressing_style="dns"))
    with pytest.raises(objdirect.InvalidArgument, match="redirects_max"):
        make_client(server, config=objdirect.ClientConfig(redirects_max=11))
    with pytest.raises(objdirect.InvalidArgument, match="ca_bundle"):
        make_client(server, config=objdirect.ClientConfig(ca_bundle="/nonexistent/ca.pem"))
    with pytest.raises(objdirect.InvalidArgument, match="retry_mode"):
        make_client(server, config=objdirect.ClientConfig(retry_mode="eager"))


def test_multipart_threshold_and_chunksize(server, bucket):
    cfg = objdirect.ClientConfig(multipart_threshold=6 * MiB, multipart_chunksize=5 * MiB)
    with make_client(server, config=cfg) as c:
        below = np.random.default_rng(1).integers(0, 256, 6 * MiB - 1, dtype=np.uint8)
        at = np.random.default_rng(2).integers(0, 256, 6 * MiB, dtype=np.uint8)
        assert "-" not in c.put(bucket, "below", below).etag  # one PutObject
        r = c.put(bucket, "at", at)
        assert r.etag.endswith("-2")  # 5 MiB + 1 MiB parts
        assert c.get(bucket, "at") == at.tobytes()
    # Without a threshold the chunk size decides, as before: 6 MiB is one part of 8 MiB.
    with make_client(server) as c:
        assert "-" not in c.put(bucket, "default", at).etag


class _FakeServer:
    """A local HTTP server on a free port: every request is counted, its body read, and then
    answered by respond(handler)."""

    protocol_version = "HTTP/1.0"

    def __init__(self):
        outer = self
        self.count = 0

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = outer.protocol_version

            def _any(self):
                outer.count += 1
                n = int(self.headers.get("content-length") or 0)
                if n:
                    self.rfile.read(n)
                outer.respond(self)

            do_GET = do_PUT = do_HEAD = do_POST = do_DELETE = _any

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.httpd.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @staticmethod
    def reply(h, status, body, headers=()):
        h.send_response(status)
        for k, v in headers:
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if h.command != "HEAD":
            h.wfile.write(body)

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class _Always(_FakeServer):
    """Answers every request with `status` and `body` (or not at all when hang)."""

    def __init__(self, status=503, body=b"", hang=False):
        self.status, self.body, self.hang = status, body, hang
        super().__init__()

    def respond(self, h):
        if self.hang:
            time.sleep(5)
            return
        self.reply(h, self.status, self.body)


SLOW_DOWN = (b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>SlowDown</Code>"
             b"<Message>Please reduce your request rate.</Message></Error>")


def _client_of(endpoint, **kw):
    return objdirect.Client(endpoint=endpoint, access_key=ACCESS_KEY, secret_key=SECRET_KEY,
                            fabric="none", **kw)


def test_max_attempts_and_read_timeout_change_behaviour():
    s = _Always(503, SLOW_DOWN)
    try:
        for attempts in (1, 4):
            s.count = 0
            cfg = objdirect.ClientConfig(max_attempts=attempts)
            with _client_of(s.endpoint, config=cfg, retry_base_delay_s=0.01) as c:
                with pytest.raises(objdirect.SlowDown):
                    c.get_into("bkt", "k", bytearray(10))
                assert c.stats()["retries"] == attempts - 1
            assert s.count == attempts
    finally:
        s.close()
    h = _Always(hang=True)
    try:
        with _client_of(h.endpoint, config=objdirect.ClientConfig(read_timeout=0.3,
                                                                  max_attempts=1)) as c:
            t0 = time.monotonic()
            with pytest.raises(objdirect.Timeout):
                c.head("bkt", "k")
            assert time.monotonic() - t0 < 3
    finally:
        h.close()


# -- HTTPS ---------------------------------------------------------------------------------------


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory):
    d = tmp_path_factory.mktemp("tls")
    # A test CA, a server certificate for 127.0.0.1 only (no DNS name) signed by it, and an
    # unrelated CA.
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
             "ca.crt", "-days", "2", "-subj", "/CN=objdirect test CA", cwd=d)
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "srv.key", "-out", "srv.csr",
             "-subj", "/CN=127.0.0.1", cwd=d)
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    _openssl("x509", "-req", "-in", "srv.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", "srv.crt", "-days", "2", "-extfile", "san.ext", cwd=d)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "other.key", "-out",
             "other.crt", "-days", "2", "-subj", "/CN=unrelated CA", cwd=d)
    s = Server(d / "data", d / "server.log", ["--no-fsync", "--tls-cert", str(d / "srv.crt"),
                                              "--tls-key", str(d / "srv.key")])
    s.start()
    s.ca, s.other_ca = str(d / "ca.crt"), str(d / "other.crt")
    assert s.endpoint.startswith("https://")
    yield s
    s.stop()


@pytest.mark.parametrize("fabric", ["none", "libfabric:shm"])
def test_https_round_trip_with_ca_bundle(tls_server, fabric):
    cfg = objdirect.ClientConfig(ca_bundle=tls_server.ca)
    with make_client(tls_server, config=cfg, fabric=fabric) as c:
        b = "tls-" + fabric.replace(":", "-")
        c.create_bucket(b)
        src = np.random.default_rng(4).integers(0, 256, 3 * MiB, dtype=np.uint8)
        r = c.put(b, "o", src)
        assert r.path == ("http" if fabric == "none" else "rdma")
        dst = np.zeros_like(src)
        assert c.get_into(b, "o", dst).nbytes == src.nbytes
        np.testing.assert_array_equal(dst, src)
        assert [o.key for o in c.list(b)] == ["o"]
        assert c.presign(b, "o").startswith("https://127.0.0.1:")
        c.delete(b, "o")
        c.delete_bucket(b)


def test_https_ca_bundle_from_aws_ca_bundle(tls_server, monkeypatch):
    monkeypatch.setenv("AWS_CA_BUNDLE", tls_server.ca)
    with make_client(tls_server) as c:
        assert c.config["ca_bundle"] == tls_server.ca
        assert isinstance(c.list_buckets(), list)


def test_https_wrong_ca_and_wrong_name_refused(tls_server):
    # An unrelated CA: refused at once, with the reason, and not retried.
    with make_client(tls_server, config=objdirect.ClientConfig(ca_bundle=tls_server.other_ca),
                     max_attempts=5) as c:
        t0 = time.monotonic()
        with pytest.raises(objdirect.AccessDenied, match="certificate.*refused") as e:
            c.list_buckets()
        assert time.monotonic() - t0 < 2
        assert tls_server.other_ca in str(e.value)
        assert c.stats()["retries"] == 0
    # No CA bundle: the system's store does not know the test CA.
    with make_client(tls_server) as c:
        with pytest.raises(objdirect.AccessDenied, match="system's CA store"):
            c.list_buckets()
    # The right CA but another name: the certificate names 127.0.0.1 only.
    port = tls_server.endpoint.rsplit(":", 1)[1]
    with objdirect.Client(endpoint=f"https://localhost:{port}", access_key=ACCESS_KEY,
                          secret_key=SECRET_KEY, fabric="none",
                          config=objdirect.ClientConfig(ca_bundle=tls_server.ca)) as c:
        with pytest.raises(objdirect.AccessDenied, match="does not name localhost"):
            c.list_buckets()
    # Plain HTTP to the TLS port is no answer either.
    with objdirect.Client(endpoint=f"http://127.0.0.1:{port}", access_key=ACCESS_KEY,
                          secret_key=SECRET_KEY, fabric="none", max_attempts=1,
                          io_timeout_s=5) as c:
        with pytest.raises(objdirect.ObjDirectError):
            c.list_buckets()


# -- virtual-hosted addressing -------------------------------------------------------------------


def test_virtual_hosted_addressing_against_domain(tmp_path, server):
    # localhost resolves here (/etc/hosts); the server's --domain is the endpoint's host, so
    # bucket.localhost names the bucket.
    s = Server(tmp_path / "data", tmp_path / "server.log",
               ["--no-fsync", "--domain", "localhost"])
    s.start()
    try:
        port = s.endpoint.rsplit(":", 1)[1]
        cfg = objdirect.ClientConfig(addressing_style="virtual")
        with objdirect.Client(endpoint=f"http://localhost:{port}", access_key=ACCESS_KEY,
                              secret_key=SECRET_KEY, fabric="none", config=cfg) as c:
            c.create_bucket("vhost-bkt")
            assert c.put("vhost-bkt", "dir/a b.txt", b"virtual").nbytes == 7
            assert c.get("vhost-bkt", "dir/a b.txt") == b"virtual"
            assert c.head("vhost-bkt", "dir/a b.txt").size == 7
            assert [o.key for o in c.list("vhost-bkt")] == ["dir/a b.txt"]
            assert "vhost-bkt" in c.list_buckets()
            # presign honours the style: the bucket is in the URL's host, and the server takes
            # the URL (fetched from 127.0.0.1 with that Host: bucket.localhost need not resolve)
            url = urllib.parse.urlsplit(c.presign("vhost-bkt", "dir/a b.txt"))
            assert url.hostname == "vhost-bkt.localhost" and url.path == "/dir/a%20b.txt", url
            conn = http.client.HTTPConnection("127.0.0.1", int(port), timeout=10)
            conn.request("GET", url.path + "?" + url.query, headers={"Host": url.netloc})
            resp = conn.getresponse()
            assert resp.status == 200 and resp.read() == b"virtual"
            conn.close()
            c.delete("vhost-bkt", "dir/a b.txt")
            c.delete_bucket("vhost-bkt")
        # The requests really named the bucket in the Host: the same client against a server without --domain reads the key as the bucket.
        with make_client(server) as pc:
            pc.create_bucket("vhost-other")
            pc.put("vhost-other", "k", b"x")
            sport = server.endpoint.rsplit(":", 1)[1]
            with objdirect.Client(endpoint=f"http://localhost:{sport}", access_key=ACCESS_KEY,
                                  secret_key=SECRET_KEY, fabric="none", config=cfg) as vc:
                with pytest.raises((objdirect.NoSuchBucket, objdirect.NoSuchKey)):
                    vc.get("vhost-other", "k")
            pc.delete("vhost-other", "k")
            pc.delete_bucket("vhost-other")
    finally:
        s.stop()


# -- 307 redirects -------------------------------------------------------------------------------


class _Redirector(_FakeServer):
    """Answers every request with 307 Temporary Redirect to `target` + the same path and query
    (reading any body first, as S3 does)."""

    protocol_version = "HTTP/1.1"

    def __init__(self, target=None):
        self.target = target
        super().__init__()

    def respond(self, h):
        body = (b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>TemporaryRedirect"
                b"</Code><Message>Please re-send this request to the specified temporary"
                b" endpoint.</Message></Error>")
        self.reply(h, 307, body, [("Location", (self.target or self.endpoint) + h.path)])


def test_307_redirect_followed_and_bounded(server, bucket):
    proxy = _Redirector(server.endpoint)
    try:
        with _client_of(proxy.endpoint) as c:
            src = np.random.default_rng(8).integers(0, 256, 300_000, dtype=np.uint8)
            assert c.put(bucket, "moved", src).nbytes == src.nbytes
            dst = np.zeros_like(src)
            assert c.get_into(bucket, "moved", dst).nbytes == src.nbytes
            np.testing.assert_array_equal(dst, src)
            assert c.head(bucket, "moved").size == src.nbytes
            assert [o.key for o in c.list(bucket)] == ["moved"]
            c.delete(bucket, "moved")
        assert proxy.count == 5  # every request went through the redirect once
        # redirects_max=0: the 307 is the answer.
        with _client_of(proxy.endpoint, config=objdirect.ClientConfig(redirects_max=0)) as c:
            with pytest.raises(objdirect.ObjDirectError) as e:
                c.list_buckets()
            assert e.value.http_status in (307, 500) or "Redirect" in str(e.value)
    finally:
        proxy.close()
    loop = _Redirector()  # to itself, for ever
    try:
        with _client_of(loop.endpoint, config=objdirect.ClientConfig(redirects_max=2)) as c:
            with pytest.raises(objdirect.ObjDirectError, match="too many redirects"):
                c.head(bucket, "k")
        assert loop.count == 3  # the request and two redirects followed
    finally:
        loop.close()
