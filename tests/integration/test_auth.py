"""Authentication: SigV4 header and query (presigned) auth, payload hashes, signed streaming chunks,
clock skew, anonymous access."""

import datetime
import os
import time
import urllib.error
import urllib.request

import pytest

import objd


def test_valid_signature_and_unsigned_payload(server, bucket):
    r = objd.request(server, "PUT", objd.opath(bucket, "ok"), body=b"data")
    assert r.status == 200, r
    r = objd.request(server, "PUT", objd.opath(bucket, "ok2"), body=b"data", payload_hash="UNSIGNED-PAYLOAD")
    assert r.status == 200, r


def test_wrong_secret_is_signature_does_not_match(server, bucket):
    r = objd.request(server, "GET", "/" + bucket, secret_key=objd.SECRET_KEY + "x")
    objd.assert_error(r, 403, "SignatureDoesNotMatch")
    r = objd.request(server, "PUT", objd.opath(bucket, "ws"), body=b"x", secret_key="nope")
    objd.assert_error(r, 403, "SignatureDoesNotMatch")
    assert objd.request(server, "HEAD", objd.opath(bucket, "ws")).status == 404


def test_unknown_access_key(server, bucket):
    r = objd.request(server, "GET", "/" + bucket, access_key="AKIAUNKNOWNKEY000000")
    objd.assert_error(r, 403, "InvalidAccessKeyId")


@pytest.mark.parametrize("method,sub", [("GET", ""), ("GET", "/key"), ("PUT", "/key"), ("DELETE", "/key"),
                                        ("GET", "?list-type=2")])
def test_anonymous_is_access_denied(server, bucket, method, sub):
    target = ("/" + bucket + sub) if not sub.startswith("?") else ("/" + bucket + sub)
    r = objd.send(server.host, method, target, {"Host": server.host}, b"x" if method == "PUT" else b"")
    objd.assert_error(r, 403, "AccessDenied")


def test_anonymous_list_buckets_denied(server):
    r = objd.send(server.host, "GET", "/", {"Host": server.host})
    objd.assert_error(r, 403, "AccessDenied")


def test_tampered_request_after_signing(server, bucket):
    target, hdrs = objd.sign_headers(server.host, "GET", "/" + bucket, query={"list-type": "2", "prefix": "a"})
    r = objd.send(server.host, "GET", target.replace("prefix=a", "prefix=b"), hdrs)
    objd.assert_error(r, 403, "SignatureDoesNotMatch")
    target, hdrs = objd.sign_headers(server.host, "PUT", objd.opath(bucket, "t"), headers={"x-amz-meta-a": "1"},
                                     body=b"abc")
    hdrs["x-amz-meta-a"] = "2"
    r = objd.send(server.host, "PUT", target, hdrs, b"abc")
    objd.assert_error(r, 403, "SignatureDoesNotMatch")


def test_malformed_authorization_header(server, bucket):
    for auth in ("AWS4-HMAC-SHA256 garbage", "AWS4-HMAC-SHA256 Credential=x, SignedHeaders=host, Signature=zz",
                 "Bearer abc"):
        r = objd.send(server.host, "GET", "/" + bucket,
                      {"Host": server.host, "Authorization": auth, "x-amz-date": "20250101T000000Z",
                       "x-amz-content-sha256": objd.EMPTY_SHA256})
        assert r.status in (400, 403), (auth, r)
        f = objd.error_fields(r.body)
        assert f["Code"] in ("AuthorizationHeaderMalformed", "InvalidArgument", "AccessDenied",
                             "SignatureDoesNotMatch", "InvalidAccessKeyId", "InvalidRequest"), (auth, f)
        assert f["Message"].strip()


def test_sigv2_is_refused_cleanly(server, bucket):
    r = objd.send(server.host, "GET", "/" + bucket, {"Host": server.host, "Authorization": f"AWS {objd.ACCESS_KEY}:abc=",
                                                       "Date": "Wed, 01 Jan 2025 00:00:00 GMT"})
    assert r.status in (400, 403), r
    assert objd.error_fields(r.body)["Message"].strip()


def test_wrong_content_sha256_for_body(server, bucket):
    wrong = "0" * 64
    r = objd.request(server, "PUT", objd.opath(bucket, "sha"), body=b"real body", payload_hash=wrong)
    objd.assert_error(r, 400, "XAmzContentSHA256Mismatch")
    assert objd.request(server, "HEAD", objd.opath(bucket, "sha")).status == 404


def test_content_sha256_not_hex(server, bucket):
    r = objd.request(server, "PUT", objd.opath(bucket, "sha2"), body=b"x", payload_hash="not-a-hash")
    assert r.status == 400, r
    assert objd.request(server, "HEAD", objd.opath(bucket, "sha2")).status == 404


def test_missing_content_sha256_header(server, bucket):
    target, hdrs = objd.sign_headers(server.host, "GET", "/" + bucket)
    del hdrs["X-Amz-Content-SHA256"]
    r = objd.send(server.host, "GET", target, hdrs)
    assert r.status in (400, 403), r


def _streaming_put(server, bucket, key, payload, chunk, corrupt_chunk):
    n = (len(payload) + chunk - 1) // chunk
    enc_len = sum(len(f"{min(chunk, len(payload) - i * chunk):x};chunk-signature=") + 68 +
                  min(chunk, len(payload) - i * chunk) for i in range(n)) + len("0;chunk-signature=") + 68
    target, hdrs = objd.sign_headers(server.host, "PUT", objd.opath(bucket, key),
                                     headers={"Content-Encoding": "aws-chunked",
                                              "x-amz-decoded-content-length": str(len(payload)),
                                              "Content-Length": str(enc_len)},
                                     payload_hash="STREAMING-AWS4-HMAC-SHA256-PAYLOAD")
    body = objd.aws_chunked_signed(hdrs, payload, chunk, corrupt_chunk=corrupt_chunk)
    assert len(body) == enc_len
    return objd.send(server.host, "PUT", target, hdrs, body)


@pytest.mark.parametrize("corrupt", [0, 2, 4])  # first, middle, the final 0-length chunk
def test_streaming_corrupted_chunk_signature(server, bucket, corrupt):
    payload = os.urandom(4 * 65536 + 100)
    key = f"stream-bad-{corrupt}"
    r = _streaming_put(server, bucket, key, payload, 65536, corrupt)
    objd.assert_error(r, 403, "SignatureDoesNotMatch")
    assert objd.request(server, "HEAD", objd.opath(bucket, key)).status == 404
    objd.health(server)


def test_streaming_good_chunk_signatures(server, bucket):
    payload = os.urandom(4 * 65536 + 100)
    r = _streaming_put(server, bucket, "stream-ok", payload, 65536, None)
    assert r.status == 200, r
    assert objd.request(server, "GET", objd.opath(bucket, "stream-ok")).body == payload


def test_streaming_chunk_tampered_data(server, bucket):
    payload = os.urandom(3 * 65536)
    chunk = 65536
    n = 3
    enc_len = sum(len(f"{chunk:x};chunk-signature=") + 68 + chunk for _ in range(n)) + len("0;chunk-signature=") + 68
    target, hdrs = objd.sign_headers(server.host, "PUT", objd.opath(bucket, "stream-tamper"),
                                     headers={"Content-Encoding": "aws-chunked",
                                              "x-amz-decoded-content-length": str(len(payload)),
                                              "Content-Length": str(enc_len)},
                                     payload_hash="STREAMING-AWS4-HMAC-SHA256-PAYLOAD")
    body = bytearray(objd.aws_chunked_signed(hdrs, payload, chunk))
    body[len(body) // 2] ^= 0xFF  # flip a data byte in the middle chunk
    r = objd.send(server.host, "PUT", target, hdrs, bytes(body))
    objd.assert_error(r, 403, "SignatureDoesNotMatch")
    assert objd.request(server, "HEAD", objd.opath(bucket, "stream-tamper")).status == 404


@pytest.mark.parametrize("minutes", [-20, 20])
def test_clock_skew(server, bucket, minutes):
    ts = datetime.datetime.utcnow() + datetime.timedelta(minutes=minutes)
    r = objd.request(server, "GET", "/" + bucket, timestamp=ts)
    objd.assert_error(r, 403, "RequestTimeTooSkewed")


def test_clock_skew_within_limit_ok(server, bucket):
    ts = datetime.datetime.utcnow() - datetime.timedelta(minutes=10)
    r = objd.request(server, "GET", "/" + bucket, timestamp=ts)
    assert r.status == 200, r


def test_presigned_get_and_put(server, s3, bucket):
    url = s3.generate_presigned_url("put_object", Params={"Bucket": bucket, "Key": "pre sign/ü"}, ExpiresIn=300)
    with urllib.request.urlopen(urllib.request.Request(url, data=b"via presign", method="PUT"), timeout=30) as r:
        assert r.status == 200
    url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "pre sign/ü"}, ExpiresIn=300)
    with urllib.request.urlopen(url, timeout=30) as r:
        assert r.read() == b"via presign"
        assert r.headers.get("x-amz-request-id")


def test_presigned_tampered(server, s3, bucket):
    s3.put_object(Bucket=bucket, Key="ps", Body=b"1")
    s3.put_object(Bucket=bucket, Key="ps2", Body=b"2")
    url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "ps"}, ExpiresIn=300)
    bad = url.replace("/ps?", "/ps2?")
    assert bad != url
    with pytest.raises(urllib.error.HTTPError) as ei:
        urllib.request.urlopen(bad, timeout=30)
    assert ei.value.code == 403
    f = objd.error_fields(ei.value.read())
    assert f["Code"] == "SignatureDoesNotMatch", f


def test_presigned_expired(server, s3, bucket):
    s3.put_object(Bucket=bucket, Key="exp", Body=b"1")
    url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "exp"}, ExpiresIn=1)
    time.sleep(2.5)
    with pytest.raises(urllib.error.HTTPError) as ei:
        urllib.request.urlopen(url, timeout=30)
    assert ei.value.code == 403
    f = objd.error_fields(ei.value.read())
    assert f["Code"] == "AccessDenied", f
    assert f["Message"].strip()


def test_presigned_expires_too_long(server, s3, bucket):
    """X-Amz-Expires over 7 days is refused even with a valid signature (AWS: 400
    AuthorizationQueryParametersError)."""
    s3.put_object(Bucket=bucket, Key="long", Body=b"1")
    url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "long"}, ExpiresIn=604801)
    assert "X-Amz-Expires=604801" in url
    with pytest.raises(urllib.error.HTTPError) as ei:
        urllib.request.urlopen(url, timeout=30)
    assert ei.value.code == 400
    f = objd.error_fields(ei.value.read())
    assert f["Code"] == "AuthorizationQueryParametersError", f
    assert f["Message"].strip()
    # Every malformed query parameter answers the same code: a bad credential scope, a missing one.
    for bad in (url.replace("%2Fus-east-1%2F", "%2Fnowhere-1%2F"),
                url.replace("X-Amz-Algorithm=AWS4-HMAC-SHA256", "X-Amz-Algorithm=AWS4-HMAC-MD5")):
        assert bad != url
        with pytest.raises(urllib.error.HTTPError) as ei:
            urllib.request.urlopen(bad, timeout=30)
        assert ei.value.code == 400
        assert objd.error_fields(ei.value.read())["Code"] == "AuthorizationQueryParametersError"
