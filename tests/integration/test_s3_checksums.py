"""Checksums: x-amz-checksum-{crc32,crc32c,crc64nvme,sha1,sha256} on PUT, BadDigest on a wrong value,
Content-MD5, GET with x-amz-checksum-mode (whole object only, never on 206), multipart composite
checksums (-N), aws-chunked uploads with trailers (the 2025 SDK default)."""

import base64
import hashlib
import os
import zlib

import pytest

import objd


def _table(poly, bits):
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        t.append(c)
    return t


_T32C = _table(0x82F63B78, 32)
_T64 = _table(0x9A6C9329AC4BC9B5, 64)
_M64 = (1 << 64) - 1


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _T32C[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def crc64nvme(data):
    c = _M64
    for b in data:
        c = _T64[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ _M64


def checksum(alg, data):
    """base64 of the big-endian checksum, as S3 sends it."""
    if alg == "crc32":
        raw = zlib.crc32(data).to_bytes(4, "big")
    elif alg == "crc32c":
        raw = crc32c(data).to_bytes(4, "big")
    elif alg == "crc64nvme":
        raw = crc64nvme(data).to_bytes(8, "big")
    else:
        raw = hashlib.new(alg, data).digest()
    return base64.b64encode(raw).decode()


def test_reference_checksums():
    # The check values of the catalogue, so a wrong reference cannot hide a server bug.
    assert crc32c(b"123456789") == 0xE3069283
    assert crc64nvme(b"123456789") == 0xAE8B14860A799888


ALGS = ["crc32", "crc32c", "crc64nvme", "sha1", "sha256"]
BODY = os.urandom(20_000)


@pytest.mark.parametrize("alg", ALGS)
def test_put_with_checksum_and_get_it_back(server, bucket, alg):
    hdr = f"x-amz-checksum-{alg}"
    want = checksum(alg, BODY)
    r = objd.request(server, "PUT", objd.opath(bucket, alg), headers={hdr: want}, body=BODY)
    assert r.status == 200, r
    assert r.header(hdr) == want, r.headers
    g = objd.request(server, "GET", objd.opath(bucket, alg), headers={"x-amz-checksum-mode": "ENABLED"})
    assert g.status == 200 and g.body == BODY, g
    assert g.header(hdr) == want, g.headers
    h = objd.request(server, "HEAD", objd.opath(bucket, alg), headers={"x-amz-checksum-mode": "ENABLED"})
    assert h.header(hdr) == want, h.headers
    # without checksum mode: no checksum
    g = objd.request(server, "GET", objd.opath(bucket, alg))
    assert g.header(hdr) is None, g.headers
    # never on a 206
    g = objd.request(server, "GET", objd.opath(bucket, alg),
                     headers={"x-amz-checksum-mode": "ENABLED", "Range": "bytes=0-99"})
    assert g.status == 206 and g.body == BODY[:100], g
    assert not [k for k in g.headers if k.startswith("x-amz-checksum-")], g.headers


@pytest.mark.parametrize("alg", ALGS)
def test_put_with_wrong_checksum_is_bad_digest(server, bucket, alg):
    wrong = checksum(alg, BODY + b"!")
    r = objd.request(server, "PUT", objd.opath(bucket, "bad-" + alg), headers={f"x-amz-checksum-{alg}": wrong},
                     body=BODY)
    objd.assert_error(r, 400, "BadDigest")
    assert objd.request(server, "HEAD", objd.opath(bucket, "bad-" + alg)).status == 404


def test_put_with_sdk_checksum_algorithm_header(server, bucket):
    want = checksum("crc32", BODY)
    r = objd.request(server, "PUT", objd.opath(bucket, "sdk"), body=BODY,
                     headers={"x-amz-sdk-checksum-algorithm": "CRC32", "x-amz-checksum-crc32": want})
    assert r.status == 200, r


def test_content_md5(server, bucket):
    good = base64.b64encode(hashlib.md5(BODY).digest()).decode()
    r = objd.request(server, "PUT", objd.opath(bucket, "md5"), headers={"Content-MD5": good}, body=BODY)
    assert r.status == 200, r
    bad = base64.b64encode(hashlib.md5(BODY + b"x").digest()).decode()
    r = objd.request(server, "PUT", objd.opath(bucket, "md5-bad"), headers={"Content-MD5": bad}, body=BODY)
    objd.assert_error(r, 400, "BadDigest")
    assert objd.request(server, "HEAD", objd.opath(bucket, "md5-bad")).status == 404
    r = objd.request(server, "PUT", objd.opath(bucket, "md5-inv"), headers={"Content-MD5": "not base64!"}, body=BODY)
    objd.assert_error(r, 400, "InvalidDigest")


def test_boto3_checksum_algorithm_roundtrip(s3, bucket):
    s3.put_object(Bucket=bucket, Key="b3", Body=BODY, ChecksumAlgorithm="SHA256")
    h = s3.head_object(Bucket=bucket, Key="b3", ChecksumMode="ENABLED")
    assert h.get("ChecksumSHA256") == checksum("sha256", BODY)


@pytest.mark.parametrize("alg", ["crc32", "sha256"])
def test_multipart_composite_checksum(server, s3, bucket, alg):
    parts = [os.urandom(5 << 20), os.urandom(1000)]
    uid = s3.create_multipart_upload(Bucket=bucket, Key="mpc", ChecksumAlgorithm=alg.upper())["UploadId"]
    field = "Checksum" + alg.upper()
    done = []
    for i, p in enumerate(parts, 1):
        r = objd.request(server, "PUT", objd.opath(bucket, "mpc"), query=[("partNumber", str(i)), ("uploadId", uid)],
                         headers={f"x-amz-checksum-{alg}": checksum(alg, p)}, body=p)
        assert r.status == 200, r
        assert r.header(f"x-amz-checksum-{alg}") == checksum(alg, p)
        done.append({"PartNumber": i, "ETag": r.header("etag"), field: checksum(alg, p)})
    res = s3.complete_multipart_upload(Bucket=bucket, Key="mpc", UploadId=uid, MultipartUpload={"Parts": done})
    raw = b"".join(base64.b64decode(checksum(alg, p)) for p in parts)
    if alg == "crc32":
        comp = base64.b64encode(zlib.crc32(raw).to_bytes(4, "big")).decode()
    else:
        comp = base64.b64encode(hashlib.sha256(raw).digest()).decode()
    # Complete's answer carries the composite on every backend and upstream (a gateway keeps the
    # part checksums where the upstream's ListParts lacks them).
    assert res.get(field) == f"{comp}-2", res
    g = objd.request(server, "GET", objd.opath(bucket, "mpc"), headers={"x-amz-checksum-mode": "ENABLED"})
    assert g.status == 200 and g.body == b"".join(parts)
    if os.environ.get("OBJDIRECT_UPSTREAM_KIND") == "radosgw":
        # radosgw 16 stores no checksums and an upload's metadata is fixed at Create, before the
        # composite is known: later GETs have none (docs/scale-out.md, "Verified upstreams").
        assert g.header(f"x-amz-checksum-{alg}") is None, g.headers
    else:
        assert g.header(f"x-amz-checksum-{alg}") == f"{comp}-2", g.headers
    g = objd.request(server, "GET", objd.opath(bucket, "mpc"),
                     headers={"x-amz-checksum-mode": "ENABLED", "Range": "bytes=0-9"})
    assert g.status == 206 and not [k for k in g.headers if k.startswith("x-amz-checksum-")], g.headers
    if objd.gateway_mode():
        return  # a gateway has no parts list of upstream objects (docs/scale-out.md, caveats)
    # per-part checksums are kept: GET ?partNumber=1 with checksum mode returns part 1's
    g = objd.request(server, "HEAD", objd.opath(bucket, "mpc"), query=[("partNumber", "1")],
                     headers={"x-amz-checksum-mode": "ENABLED"})
    assert g.status == 206, g
    assert g.header("content-length") == str(len(parts[0]))
    assert g.header("x-amz-mp-parts-count") == "2"


def test_multipart_part_wrong_checksum(server, s3, bucket):
    uid = s3.create_multipart_upload(Bucket=bucket, Key="mpbad", ChecksumAlgorithm="CRC32C")["UploadId"]
    r = objd.request(server, "PUT", objd.opath(bucket, "mpbad"), query=[("partNumber", "1"), ("uploadId", uid)],
                     headers={"x-amz-checksum-crc32c": checksum("crc32c", b"other")}, body=b"data")
    objd.assert_error(r, 400, "BadDigest")
    assert s3.list_parts(Bucket=bucket, Key="mpbad", UploadId=uid).get("Parts", []) == []
    s3.abort_multipart_upload(Bucket=bucket, Key="mpbad", UploadId=uid)


# ------------------------------------------------------------------------------------------------
# aws-chunked with trailers (what boto3 >= 1.36, AWS CLI >= 2.23 and the JS SDK send by default)


def aws_chunked_unsigned(payload, chunk, trailer_name, trailer_value):
    out = b""
    for i in range(0, len(payload), chunk):
        c = payload[i:i + chunk]
        out += f"{len(c):x}\r\n".encode() + c + b"\r\n"
    out += b"0\r\n" + f"{trailer_name}:{trailer_value}\r\n".encode() + b"\r\n"
    return out


def put_unsigned_trailer(server, bucket, key, payload, alg, value, content_encoding="aws-chunked"):
    name = f"x-amz-checksum-{alg}"
    body = aws_chunked_unsigned(payload, 8192, name, value)
    headers = {"Content-Encoding": content_encoding, "x-amz-decoded-content-length": str(len(payload)),
               "x-amz-trailer": name, "x-amz-sdk-checksum-algorithm": alg.upper(), "Content-Length": str(len(body))}
    return objd.request(server, "PUT", objd.opath(bucket, key), headers=headers, body=body,
                        payload_hash="STREAMING-UNSIGNED-PAYLOAD-TRAILER")


@pytest.mark.parametrize("alg", ["crc32", "crc32c", "crc64nvme"])
def test_aws_chunked_unsigned_trailer(server, bucket, alg):
    payload = os.urandom(30_000)
    r = put_unsigned_trailer(server, bucket, "tr-" + alg, payload, alg, checksum(alg, payload))
    assert r.status == 200, r
    g = objd.request(server, "GET", objd.opath(bucket, "tr-" + alg), headers={"x-amz-checksum-mode": "ENABLED"})
    assert g.body == payload
    assert g.header(f"x-amz-checksum-{alg}") == checksum(alg, payload)
    assert g.header("content-encoding") in (None, ""), "aws-chunked must not be stored as Content-Encoding"


def test_aws_chunked_trailer_wrong_checksum(server, bucket):
    payload = os.urandom(30_000)
    r = put_unsigned_trailer(server, bucket, "tr-bad", payload, "crc32", checksum("crc32", payload + b"x"))
    objd.assert_error(r, 400, "BadDigest")
    assert objd.request(server, "HEAD", objd.opath(bucket, "tr-bad")).status == 404


def test_aws_chunked_keeps_other_content_encoding(server, bucket):
    payload = os.urandom(1000)
    r = put_unsigned_trailer(server, bucket, "tr-gz", payload, "crc32", checksum("crc32", payload),
                             content_encoding="gzip, aws-chunked")
    assert r.status == 200, r
    h = objd.request(server, "HEAD", objd.opath(bucket, "tr-gz"))
    assert h.header("content-encoding") == "gzip", h.headers


def test_aws_chunked_decoded_length_mismatch(server, bucket):
    payload = os.urandom(5000)
    name = "x-amz-checksum-crc32"
    body = aws_chunked_unsigned(payload, 4096, name, checksum("crc32", payload))
    r = objd.request(server, "PUT", objd.opath(bucket, "tr-len"), body=body,
                     headers={"Content-Encoding": "aws-chunked", "x-amz-decoded-content-length": "4999",
                              "x-amz-trailer": name}, payload_hash="STREAMING-UNSIGNED-PAYLOAD-TRAILER")
    assert r.status == 400, r
    assert objd.request(server, "HEAD", objd.opath(bucket, "tr-len")).status == 404


def test_signed_streaming_payload(server, bucket):
    payload = os.urandom(150_000)
    chunk = 64 * 1024
    n = (len(payload) + chunk - 1) // chunk
    enc_len = sum(len(f"{min(chunk, len(payload) - i * chunk):x};chunk-signature=") + 64 + 4 +
                  min(chunk, len(payload) - i * chunk) for i in range(n)) + len("0;chunk-signature=") + 64 + 4
    target, hdrs = objd.sign_headers(server.host, "PUT", objd.opath(bucket, "sig-stream"),
                                     headers={"Content-Encoding": "aws-chunked",
                                              "x-amz-decoded-content-length": str(len(payload)),
                                              "Content-Length": str(enc_len)},
                                     payload_hash="STREAMING-AWS4-HMAC-SHA256-PAYLOAD")
    body = objd.aws_chunked_signed(hdrs, payload, chunk)
    assert len(body) == enc_len
    r = objd.send(server.host, "PUT", target, hdrs, body)
    assert r.status == 200, r
    assert objd.request(server, "GET", objd.opath(bucket, "sig-stream")).body == payload


def _signed_trailer_put(server, bucket, key, payload, value, corrupt_trailer=False):
    name = "x-amz-checksum-crc32c"
    target, hdrs = objd.sign_headers(server.host, "PUT", objd.opath(bucket, key),
                                     headers={"Content-Encoding": "aws-chunked", "x-amz-trailer": name,
                                              "x-amz-decoded-content-length": str(len(payload))},
                                     payload_hash="STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER")
    body = objd.aws_chunked_signed(hdrs, payload, 64 * 1024, trailer=(name, value), corrupt_trailer=corrupt_trailer)
    hdrs["Content-Length"] = str(len(body))  # not signed: computed after the seed signature
    return objd.send(server.host, "PUT", target, hdrs, body)


def test_signed_streaming_with_trailer(server, bucket):
    payload = os.urandom(100_000)
    r = _signed_trailer_put(server, bucket, "sig-trailer", payload, checksum("crc32c", payload))
    assert r.status == 200, r
    g = objd.request(server, "GET", objd.opath(bucket, "sig-trailer"), headers={"x-amz-checksum-mode": "ENABLED"})
    assert g.body == payload
    assert g.header("x-amz-checksum-crc32c") == checksum("crc32c", payload)


def test_signed_streaming_trailer_bad_signature(server, bucket):
    payload = os.urandom(100_000)
    r = _signed_trailer_put(server, bucket, "sig-trailer-bad", payload, checksum("crc32c", payload),
                            corrupt_trailer=True)
    objd.assert_error(r, 403, "SignatureDoesNotMatch")
    assert objd.request(server, "HEAD", objd.opath(bucket, "sig-trailer-bad")).status == 404


def test_signed_streaming_trailer_wrong_checksum(server, bucket):
    payload = os.urandom(100_000)
    r = _signed_trailer_put(server, bucket, "sig-trailer-sum", payload, checksum("crc32c", payload + b"!"))
    objd.assert_error(r, 400, "BadDigest")
    assert objd.request(server, "HEAD", objd.opath(bucket, "sig-trailer-sum")).status == 404


# Several of the server's 1 MiB receive chunks: each is hashed on another thread while the next
# one is received, so this checks that every byte is hashed once, in order.
BIG = os.urandom(5 * 1024 * 1024 + 12345)


def test_multi_chunk_body_is_hashed_whole_and_in_order(server, bucket):
    md5 = hashlib.md5(BIG)
    headers = {"x-amz-checksum-crc32c": checksum("crc32c", BIG),
               "Content-MD5": base64.b64encode(md5.digest()).decode()}
    r = objd.request(server, "PUT", objd.opath(bucket, "big"), headers=headers, body=BIG)
    assert r.status == 200, r
    assert r.header("etag") == f'"{md5.hexdigest()}"', r.headers
    assert r.header("x-amz-checksum-crc32c") == headers["x-amz-checksum-crc32c"], r.headers
    g = objd.request(server, "GET", objd.opath(bucket, "big"))
    assert g.status == 200 and g.body == BIG
    # One flipped bit in the first or the last chunk, or two chunks swapped: BadDigest, and
    # nothing is stored.
    mib = 1024 * 1024
    swapped = BIG[mib:2 * mib] + BIG[:mib] + BIG[2 * mib:]
    for i, body in enumerate([bytes([BIG[0] ^ 1]) + BIG[1:], BIG[:-1] + bytes([BIG[-1] ^ 1]), swapped]):
        r = objd.request(server, "PUT", objd.opath(bucket, f"big-bad-{i}"), headers=headers, body=body)
        objd.assert_error(r, 400, "BadDigest")
        assert objd.request(server, "HEAD", objd.opath(bucket, f"big-bad-{i}")).status == 404
