"""Addressing and HTTP plumbing: virtual-hosted style (--domain), path style on the bare domain,
Expect: 100-continue, keep-alive reuse. Runs its own server with --domain example.test."""

import os
import socket
import time

import pytest

import objd

DOMAIN = "example.test"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("objd-addr")
    srv = objd.Server(str(root / "data"), str(root / "server.log"), ["--domain", DOMAIN, "--region", "us-east-1"])
    srv.start()
    yield srv
    crashed = not srv.alive()
    rc = srv.stop()
    assert not crashed, f"server died: {srv.log_tail()}"
    assert rc == 0, f"exit status {rc} on SIGTERM: {srv.log_tail()}"


@pytest.fixture(scope="module")
def s3(server):
    return objd.boto3_client(server)


def vreq(server, host_header, method, path, query=None, headers=None, body=b""):
    """A request signed for Host: host_header, sent to the server's loopback port."""
    target, hdrs = objd.sign_headers(host_header, method, path, query, headers, body=body)
    return objd.send(server.host, method, target, hdrs, body)


def test_virtual_hosted_bucket_and_object(server, s3):
    vhost = f"vhost-bkt.{DOMAIN}:{server.port}"
    r = vreq(server, vhost, "PUT", "/")
    assert r.status == 200, r
    s3.head_bucket(Bucket="vhost-bkt")
    r = vreq(server, vhost, "PUT", "/dir/obj%20key", body=b"virtual")
    assert r.status == 200, r
    assert s3.get_object(Bucket="vhost-bkt", Key="dir/obj key")["Body"].read() == b"virtual"
    r = vreq(server, vhost, "GET", "/dir/obj%20key")
    assert r.status == 200 and r.body == b"virtual", r
    r = vreq(server, vhost, "GET", "/", query=[("list-type", "2")])
    assert r.status == 200, r
    assert [e.text for e in r.xml().iter(objd.S3_NS + "Key")] == ["dir/obj key"]
    r = vreq(server, vhost, "DELETE", "/dir/obj%20key")
    assert r.status == 204, r
    r = vreq(server, vhost, "DELETE", "/")
    assert r.status == 204, r


def test_virtual_hosted_without_port_and_dotted_bucket(server, s3):
    s3.create_bucket(Bucket="a.b.c")
    r = vreq(server, f"a.b.c.{DOMAIN}", "PUT", "/k", body=b"dots")
    assert r.status == 200, r
    assert s3.get_object(Bucket="a.b.c", Key="k")["Body"].read() == b"dots"
    s3.delete_object(Bucket="a.b.c", Key="k")
    s3.delete_bucket(Bucket="a.b.c")


def test_path_style_on_bare_domain(server, s3):
    s3.create_bucket(Bucket="bare-dom")
    r = vreq(server, f"{DOMAIN}:{server.port}", "PUT", "/bare-dom/k", body=b"path")
    assert r.status == 200, r
    assert s3.get_object(Bucket="bare-dom", Key="k")["Body"].read() == b"path"
    s3.delete_object(Bucket="bare-dom", Key="k")
    s3.delete_bucket(Bucket="bare-dom")


def test_virtual_hosted_missing_bucket(server):
    r = vreq(server, f"no-such-vbucket.{DOMAIN}", "GET", "/k")
    objd.assert_error(r, 404, "NoSuchBucket")


def _read_response(sock, deadline_s=10):
    got = b""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if b"\r\n\r\n" in got:
            head, _, rest = got.partition(b"\r\n\r\n")
            if head.startswith(b"HTTP/1.1 100"):
                return head, rest
            cl = [ln for ln in head.split(b"\r\n") if ln.lower().startswith(b"content-length:")]
            if not cl or len(rest) >= int(cl[0].split(b":")[1]):
                return head, rest
        c = sock.recv(65536)
        if not c:
            break
        got += c
    head, _, rest = got.partition(b"\r\n\r\n")
    return head, rest


def test_expect_100_continue(server, s3):
    s3.create_bucket(Bucket="expect-bkt")
    body = os.urandom(2 << 20)
    target, hdrs = objd.sign_headers(server.host, "PUT", "/expect-bkt/k", body=body,
                                     headers={"Expect": "100-continue", "Content-Length": str(len(body))})
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    sock.sendall((f"PUT {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hdrs.items()) + "\r\n").encode())
    head, rest = _read_response(sock, 5)
    assert head.startswith(b"HTTP/1.1 100"), head
    sock.sendall(body)
    head, rest = _read_response(sock)
    sock.close()
    assert head.startswith(b"HTTP/1.1 200"), head
    assert s3.get_object(Bucket="expect-bkt", Key="k")["Body"].read() == body
    s3.delete_object(Bucket="expect-bkt", Key="k")
    s3.delete_bucket(Bucket="expect-bkt")


def test_expect_100_continue_refused_without_body(server):
    """A request that fails authentication gets its final answer without the body being sent."""
    body_len = 64 << 20
    target, hdrs = objd.sign_headers(server.host, "PUT", "/expect-bkt2/k", payload_hash="UNSIGNED-PAYLOAD",
                                     headers={"Expect": "100-continue", "Content-Length": str(body_len)},
                                     secret_key="wrong-secret")
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    sock.sendall((f"PUT {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hdrs.items()) + "\r\n").encode())
    head, rest = _read_response(sock, 5)
    sock.close()
    assert head.startswith(b"HTTP/1.1 403"), head
    assert b"SignatureDoesNotMatch" in rest
    objd.health(server)


def test_keepalive_many_requests_one_connection(server, s3):
    s3.create_bucket(Bucket="ka-bkt")
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    for i in range(50):
        body = f"body {i}".encode()
        target, hdrs = objd.sign_headers(server.host, "PUT", f"/ka-bkt/k{i}", body=body,
                                         headers={"Content-Length": str(len(body))})
        sock.sendall((f"PUT {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hdrs.items())
                      + "\r\n").encode() + body)
        head, rest = _read_response(sock)
        assert head.startswith(b"HTTP/1.1 200"), (i, head)
    sock.close()
    assert s3.list_objects_v2(Bucket="ka-bkt")["KeyCount"] == 50
    for i in range(50):
        s3.delete_object(Bucket="ka-bkt", Key=f"k{i}")
    s3.delete_bucket(Bucket="ka-bkt")
