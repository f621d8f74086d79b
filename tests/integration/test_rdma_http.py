"""The RDMA header protocol as seen by a plain HTTP client (docs/rdma_protocol.md): malformed
ObjDirect tokens and unsigned tokens are refused, other providers' tokens are declined (501, the
body over HTTP), and a token PUT that moves no data never stores a 0-byte object.
(End-to-end RDMA transfers are tested with the client library, not here.)"""

import pytest

import objd

CUOBJECT_DC_V1 = "0" * 16 + ":" + "0" * 8 + ":" + "0" * 8 + ":0000:000000:1:" + "0" * 32  # 81 chars


@pytest.mark.parametrize("token", ["OD1.", "OD1.!!!!", "OD1.AAAA"])
def test_get_with_malformed_objdirect_token(server, bucket, token):
    assert objd.request(server, "PUT", objd.opath(bucket, "o"), body=b"data").status == 200
    r = objd.request(server, "GET", objd.opath(bucket, "o"), headers={"x-amz-rdma-token": token})
    objd.assert_error(r, 400, "InvalidRDMAToken")
    assert r.header("x-amz-rdma-reply") is None, r.headers


# Another provider's token (docs/rdma_protocol.md, "Decline"): this server cannot serve it, so a
# GET or Range GET gets the body over HTTP with x-amz-rdma-reply: 501, never an error.
@pytest.mark.parametrize("token", ["garbage", CUOBJECT_DC_V1])
def test_get_with_foreign_token_is_declined_with_the_body(server, bucket, token):
    assert len(CUOBJECT_DC_V1) == 81
    body = bytes(range(256)) * 40
    assert objd.request(server, "PUT", objd.opath(bucket, "o"), body=body).status == 200
    r = objd.request(server, "GET", objd.opath(bucket, "o"), headers={"x-amz-rdma-token": token})
    assert r.status == 200 and r.body == body, r
    assert r.header("x-amz-rdma-reply") == "501", r.headers
    r = objd.request(server, "GET", objd.opath(bucket, "o"),
                     headers={"x-amz-rdma-token": token, "Range": "bytes=100-299"})
    assert r.status == 206 and r.body == body[100:300], r
    assert r.header("x-amz-rdma-reply") == "501", r.headers


@pytest.mark.parametrize("token", ["garbage", CUOBJECT_DC_V1])
def test_put_with_foreign_token_is_declined_and_stores_nothing(server, bucket, token):
    r = objd.request(server, "PUT", objd.opath(bucket, "p"), headers={"x-amz-rdma-token": token},
                     body=b"", payload_hash="UNSIGNED-PAYLOAD")
    objd.assert_error(r, 501, "RDMANotSupported")
    assert r.header("x-amz-rdma-reply") == "501"
    assert objd.request(server, "HEAD", objd.opath(bucket, "p")).status == 404


def test_put_with_malformed_objdirect_token_stores_nothing(server, bucket):
    r = objd.request(server, "PUT", objd.opath(bucket, "p"), headers={"x-amz-rdma-token": "OD1.!!!!"},
                     body=b"", payload_hash="UNSIGNED-PAYLOAD")
    objd.assert_error(r, 400, "InvalidRDMAToken")
    assert r.header("x-amz-rdma-reply") is None
    assert objd.request(server, "HEAD", objd.opath(bucket, "p")).status == 404


def test_unsigned_token_header_is_refused(server, bucket):
    target, hdrs = objd.sign_headers(server.host, "PUT", objd.opath(bucket, "u"), payload_hash="UNSIGNED-PAYLOAD")
    hdrs["x-amz-rdma-token"] = "garbage"  # added after signing: not in SignedHeaders
    r = objd.send(server.host, "PUT", target, hdrs, b"")
    assert r.status in (400, 403), r
    assert objd.error_fields(r.body)["Message"].strip()
    assert objd.request(server, "HEAD", objd.opath(bucket, "u")).status == 404


def test_upload_part_with_invalid_token_stores_no_part(server, s3, bucket):
    uid = s3.create_multipart_upload(Bucket=bucket, Key="mp")["UploadId"]
    r = objd.request(server, "PUT", objd.opath(bucket, "mp"), query=[("partNumber", "1"), ("uploadId", uid)],
                     headers={"x-amz-rdma-token": "garbage"}, body=b"", payload_hash="UNSIGNED-PAYLOAD")
    objd.assert_error(r, 501, "RDMANotSupported")
    assert r.header("x-amz-rdma-reply") == "501"
    assert s3.list_parts(Bucket=bucket, Key="mp", UploadId=uid).get("Parts", []) == []
    s3.abort_multipart_upload(Bucket=bucket, Key="mp", UploadId=uid)


def test_plain_requests_carry_no_rdma_reply(server, bucket):
    objd.request(server, "PUT", objd.opath(bucket, "plain"), body=b"x")
    r = objd.request(server, "GET", objd.opath(bucket, "plain"))
    assert r.status == 200 and r.body == b"x"
    assert r.header("x-amz-rdma-reply") is None
