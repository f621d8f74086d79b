"""Bad input over raw sockets: malformed XML, truncated bodies, oversized headers, bad names, path
traversal, NUL in keys, garbage request lines, timeouts. After each, the server must still answer.

This module runs its own server with small limits:
  --header-bytes-max 8192 --idle-timeout-ms 2000 --request-timeout-ms 4000
"""

import base64
import hashlib
import os
import socket
import time

import pytest

import objd
from conftest import empty_and_delete, unique_bucket

HEADER_BYTES_MAX = 8192


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("objd-bad")
    srv = objd.Server(str(root / "data"), str(root / "server.log"),
                      ["--header-bytes-max", str(HEADER_BYTES_MAX), "--idle-timeout-ms", "2000",
                       "--request-timeout-ms", "4000"])
    srv.start()
    srv.root = str(root)
    yield srv
    crashed = not srv.alive()
    rc = srv.stop()
    assert not crashed, f"server died: {srv.log_tail()}"
    assert rc == 0, f"exit status {rc} on SIGTERM: {srv.log_tail()}"


@pytest.fixture(scope="module")
def s3(server):
    return objd.boto3_client(server)


@pytest.fixture
def bucket(s3):
    name = unique_bucket("bad")
    s3.create_bucket(Bucket=name)
    yield name
    empty_and_delete(s3, name)


def tmp_files(server):
    return objd.files_under(os.path.join(server.data_dir, "tmp"))


def wait_tmp_empty(server, timeout_s=5):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not tmp_files(server):
            return
        time.sleep(0.1)
    raise AssertionError(f"files left under DATA/tmp: {tmp_files(server)}")


def head_bytes(target, hdrs, method="PUT"):
    return (f"{method} {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hdrs.items()) + "\r\n").encode()


# ------------------------------------------------------------------------------------------------
def test_delete_objects_malformed_xml(server, bucket):
    for body in (b"<Delete><Object><Key>a</Key></Object>", b"\x00\xff not xml", b"<Delete></Delete>",
                 b"<Other><Object><Key>a</Key></Object></Other>"):
        md5 = base64.b64encode(hashlib.md5(body).digest()).decode()
        r = objd.request(server, "POST", "/" + bucket, query=[("delete", None)], body=body,
                         headers={"Content-MD5": md5})
        objd.assert_error(r, 400, "MalformedXML")
    objd.health(server)


def test_create_bucket_malformed_xml(server, s3):
    name = unique_bucket("badxml")
    r = objd.request(server, "PUT", "/" + name, body=b"<CreateBucketConfiguration><LocationConstraint>")
    objd.assert_error(r, 400, "MalformedXML")
    objd.health(server)


def test_xml_entity_expansion_is_not_evaluated(server, bucket):
    body = (b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">'
            b'<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">]><Delete><Object><Key>&c;</Key></Object></Delete>')
    md5 = base64.b64encode(hashlib.md5(body).digest()).decode()
    r = objd.request(server, "POST", "/" + bucket, query=[("delete", None)], body=body, headers={"Content-MD5": md5})
    assert r.status in (200, 400), r
    assert b"a" * 80 not in r.body, "an XML entity was expanded"
    objd.health(server)


def test_truncated_body_then_close(server, bucket):
    total, sent = 4 << 20, 1 << 20
    target, hdrs = objd.sign_headers(server.host, "PUT", objd.opath(bucket, "trunc"),
                                     headers={"Content-Length": str(total)}, payload_hash="UNSIGNED-PAYLOAD")
    s = socket.create_connection(("127.0.0.1", server.port))
    s.sendall(head_bytes(target, hdrs) + os.urandom(sent))
    time.sleep(0.3)
    s.close()
    time.sleep(0.3)
    assert objd.request(server, "HEAD", objd.opath(bucket, "trunc")).status == 404
    objd.health(server)
    wait_tmp_empty(server)


def test_truncated_multipart_part_then_close(server, s3, bucket):
    uid = s3.create_multipart_upload(Bucket=bucket, Key="tp")["UploadId"]
    target, hdrs = objd.sign_headers(server.host, "PUT", objd.opath(bucket, "tp"),
                                     query=[("partNumber", "1"), ("uploadId", uid)],
                                     headers={"Content-Length": str(6 << 20)}, payload_hash="UNSIGNED-PAYLOAD")
    s = socket.create_connection(("127.0.0.1", server.port))
    s.sendall(head_bytes(target, hdrs) + os.urandom(1 << 20))
    time.sleep(0.2)
    s.close()
    time.sleep(0.3)
    assert s3.list_parts(Bucket=bucket, Key="tp", UploadId=uid).get("Parts", []) == []
    s3.abort_multipart_upload(Bucket=bucket, Key="tp", UploadId=uid)
    objd.health(server)
    wait_tmp_empty(server)


def test_slow_body_hits_request_timeout(server, bucket):
    target, hdrs = objd.sign_headers(server.host, "PUT", objd.opath(bucket, "slow"),
                                     headers={"Content-Length": "1000000"}, payload_hash="UNSIGNED-PAYLOAD")
    s = socket.create_connection(("127.0.0.1", server.port), timeout=15)
    s.sendall(head_bytes(target, hdrs) + b"x" * 1000)
    t0 = time.monotonic()
    got = b""
    try:
        while True:
            c = s.recv(65536)
            if not c:
                break
            got += c
    except (socket.timeout, ConnectionResetError):
        pass
    s.close()
    waited = time.monotonic() - t0
    assert waited < 12, f"server kept a stalled upload open {waited:.1f}s with --request-timeout-ms 4000"
    assert got == b"" or objd.status_of(got) in (400, 408), got[:300]
    assert objd.request(server, "HEAD", objd.opath(bucket, "slow")).status == 404
    objd.health(server)


def test_idle_keepalive_connection_is_closed(server):
    """After one request on a keep-alive connection, --idle-timeout-ms 2000 closes it."""
    target, hdrs = objd.sign_headers(server.host, "GET", "/")
    s = socket.create_connection(("127.0.0.1", server.port), timeout=15)
    s.sendall(head_bytes(target, hdrs, "GET"))
    got = b""
    while b"</ListAllMyBucketsResult>" not in got:
        c = s.recv(65536)
        assert c, f"closed before the response ended: {got[:300]!r}"
        got += c
    assert objd.status_of(got) == 200, got[:300]
    t0 = time.monotonic()
    try:
        data = s.recv(100)
    except (socket.timeout, ConnectionResetError):
        data = None
    waited = time.monotonic() - t0
    s.close()
    assert data == b"", f"idle keep-alive connection not closed within 15s (--idle-timeout-ms 2000): {data!r}"
    assert 1.0 < waited < 10, waited


@pytest.mark.parametrize("size", [HEADER_BYTES_MAX + 100, 64 * 1024, 1 << 20])
def test_oversized_header(server, bucket, size):
    target, hdrs = objd.sign_headers(server.host, "GET", "/" + bucket, headers={"x-amz-meta-big": "v" * size})
    raw = objd.raw_exchange(server, head_bytes(target, hdrs, "GET"), read_timeout_s=10)
    st = objd.status_of(raw)
    assert st in (400, 431), raw[:400]
    objd.health(server)


def test_many_small_headers_over_limit(server, bucket):
    hdrs = {f"x-h-{i}": "y" * 40 for i in range(400)}  # ~20 KiB in 400 lines
    raw = objd.raw_exchange(server, head_bytes("/" + bucket, dict(hdrs, Host=server.host), "GET"), read_timeout_s=10)
    assert objd.status_of(raw) in (400, 431), raw[:400]
    objd.health(server)


@pytest.mark.parametrize("name", ["a", "Bad_Bucket", "-x-", "a" * 70])
def test_invalid_bucket_name_raw(server, name):
    r = objd.request(server, "PUT", "/" + name)
    objd.assert_error(r, 400, "InvalidBucketName")
    objd.health(server)


TRAVERSAL_KEYS = ["../../../../../../../../../../tmp/objd-escape-{pid}", "../x", "a/../../b", "a/./b",
                  "..%2F..%2Fliteral", "x/../../../../../../../../etc/objd-escape-{pid}", "...", "a/..b/..c",
                  "\\..\\..\\win"]


def test_dotdot_keys_are_plain_keys_and_never_escape(server, s3, bucket):
    before_root = set(os.listdir(server.root))
    keys = [k.format(pid=os.getpid()) for k in TRAVERSAL_KEYS]
    for k in keys:
        r = objd.request(server, "PUT", objd.opath(bucket, k), body=k.encode())
        assert r.status == 200, (k, r)
    for k in keys:
        r = objd.request(server, "GET", objd.opath(bucket, k))
        assert r.status == 200 and r.body == k.encode(), (k, r)
    listed = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]]
    assert sorted(listed) == sorted(keys)
    # nothing outside the data dir
    assert not os.path.exists(f"/tmp/objd-escape-{os.getpid()}")
    assert not os.path.exists(f"/etc/objd-escape-{os.getpid()}")
    assert set(os.listdir(server.root)) == before_root
    data = os.path.realpath(server.data_dir)
    for f in objd.files_under(server.data_dir):
        assert os.path.realpath(f).startswith(data + os.sep), f
    for k in keys:
        r = objd.request(server, "DELETE", objd.opath(bucket, k))
        assert r.status == 204, (k, r)
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0


@pytest.mark.parametrize("key", [".", ".."])
def test_dot_only_keys(server, bucket, key):
    """'.' and '..' alone: either stored as plain keys or refused with a clean 400."""
    r = objd.request(server, "PUT", objd.opath(bucket, key), body=b"dot")
    if r.status == 200:
        g = objd.request(server, "GET", objd.opath(bucket, key))
        assert g.status == 200 and g.body == b"dot", g
    else:
        assert r.status == 400, r
        assert objd.error_fields(r.body)["Message"].strip()
    objd.health(server)


def test_key_with_nul_is_clean_400(server, bucket):
    r = objd.send(server.host, "PUT", f"/{bucket}/a%00b", objd.sign_headers(
        server.host, "PUT", f"/{bucket}/a%00b", body=b"x")[1], b"x")
    assert r.status == 400, r
    f = objd.error_fields(r.body)
    assert f["Code"] and f["Message"].strip(), f
    objd.health(server)


def test_invalid_percent_encoding(server, bucket):
    target, hdrs = objd.sign_headers(server.host, "GET", f"/{bucket}/bad%zzkey")
    r = objd.send(server.host, "GET", target, hdrs)
    assert r.status == 400, r
    objd.health(server)


@pytest.mark.parametrize("raw", [
    b"GARBAGE\r\n\r\n",
    b"GET\r\n\r\n",
    b"GET / HTTP/9.9\r\nHost: x\r\n\r\n",
    b"\x00\x01\x02\x03\xff\xfe\r\n\r\n",
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 100,  # a TLS ClientHello
    b"GET /" + b"a" * 100_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
    b"PUT /b/k HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
    b"PUT /b/k HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
    b"PUT /b/k HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello",
    b"PUT /b/k HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n",
], ids=["garbage", "no-target", "http-9.9", "binary", "tls-hello", "long-target", "cl-nonnumeric", "cl-negative",
        "cl-twice", "bad-chunk", "bad-header-line"])
def test_garbage_requests(server, raw):
    got = objd.raw_exchange(server, raw, read_timeout_s=5)
    st = objd.status_of(got)
    # the server answers 4xx/5xx or closes; it never answers 2xx to garbage
    assert st == 0 or 400 <= st < 600, got[:300]
    objd.health(server)


def test_half_sent_request_line_then_close(server):
    for raw in (b"GET /", b"PUT /x/y HTTP/1.1\r\nHost: a", b"\r\n"):
        s = socket.create_connection(("127.0.0.1", server.port))
        s.sendall(raw)
        s.close()
    objd.health(server)


def test_put_content_length_over_limit(server, bucket):
    target, hdrs = objd.sign_headers(server.host, "PUT", objd.opath(bucket, "huge"),
                                     headers={"Content-Length": str((5 << 30) + 1)}, payload_hash="UNSIGNED-PAYLOAD")
    raw = objd.raw_exchange(server, head_bytes(target, hdrs), read_timeout_s=10)
    assert objd.status_of(raw) == 400, raw[:400]
    assert b"EntityTooLarge" in raw, raw[:400]
    objd.health(server)


def test_pipelined_requests(server, bucket):
    t1, h1 = objd.sign_headers(server.host, "PUT", objd.opath(bucket, "p1"), body=b"one",
                               headers={"Content-Length": "3"})
    t2, h2 = objd.sign_headers(server.host, "GET", objd.opath(bucket, "p1"))
    raw = head_bytes(t1, h1) + b"one" + head_bytes(t2, h2, "GET")
    s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    s.sendall(raw)
    got = b""
    deadline = time.monotonic() + 10
    while got.count(b"HTTP/1.1 ") < 2 or not got.endswith(b"one"):
        if time.monotonic() > deadline:
            break
        c = s.recv(65536)
        if not c:
            break
        got += c
    s.close()
    assert got.startswith(b"HTTP/1.1 200"), got[:300]
    assert got.count(b"HTTP/1.1 200") == 2 and got.endswith(b"one"), got[:600]


def test_no_tmp_leak_after_bad_inputs(server):
    wait_tmp_empty(server)


def test_path_that_is_not_utf8_is_invalid_uri(server, bucket):
    # %FF decodes to a byte that is no UTF-8: AWS answers 400 InvalidURI.
    for path in (f"/{bucket}/%FF", f"/{bucket}/a%C3", f"/{bucket}/%ED%A0%80"):
        r = objd.request(server, "PUT", path, body=b"x")
        objd.assert_error(r, 400, "InvalidURI")
        r = objd.request(server, "GET", path)
        objd.assert_error(r, 400, "InvalidURI")
    # Nothing was stored.
    r = objd.request(server, "GET", f"/{bucket}", query={"list-type": "2"})
    assert r.status == 200 and b"<Key>" not in r.body, r
