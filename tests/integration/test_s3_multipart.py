"""Multipart uploads (Create/UploadPart/UploadPartCopy/Complete/Abort/ListParts/ListMultipartUploads)
and CopyObject (directives, conditional copy)."""

import hashlib
import os

import pytest
from botocore.exceptions import ClientError

import objd

MIB = 1 << 20
NS = objd.S3_NS


def code_of(ei):
    return ei.value.response["Error"]["Code"]


def mp_etag(parts):
    d = b"".join(hashlib.md5(p).digest() for p in parts)
    return f'"{hashlib.md5(d).hexdigest()}-{len(parts)}"'


def upload(s3, bucket, key, parts):
    uid = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    done = []
    for i, p in enumerate(parts, 1):
        e = s3.upload_part(Bucket=bucket, Key=key, UploadId=uid, PartNumber=i, Body=p)["ETag"]
        assert e == f'"{hashlib.md5(p).hexdigest()}"'
        done.append({"PartNumber": i, "ETag": e})
    return uid, done


def test_multipart_roundtrip_etag_and_content(s3, bucket):
    parts = [os.urandom(5 * MIB), os.urandom(5 * MIB), os.urandom(1234)]
    uid, done = upload(s3, bucket, "mp", parts)
    r = s3.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=uid, MultipartUpload={"Parts": done})
    assert r["ETag"] == mp_etag(parts)
    h = s3.head_object(Bucket=bucket, Key="mp")
    assert h["ETag"] == mp_etag(parts)
    assert h["ContentLength"] == sum(map(len, parts))
    assert s3.get_object(Bucket=bucket, Key="mp")["Body"].read() == b"".join(parts)
    # a range across the part boundary
    g = s3.get_object(Bucket=bucket, Key="mp", Range=f"bytes={5 * MIB - 10}-{5 * MIB + 9}")
    assert g["Body"].read() == (parts[0] + parts[1])[5 * MIB - 10:5 * MIB + 10]
    # the upload is gone afterwards
    with pytest.raises(ClientError) as ei:
        s3.list_parts(Bucket=bucket, Key="mp", UploadId=uid)
    assert code_of(ei) == "NoSuchUpload"


def test_multipart_metadata_from_create(s3, bucket):
    uid = s3.create_multipart_upload(Bucket=bucket, Key="mpm", ContentType="text/x-itest",
                                     Metadata={"origin": "create"})["UploadId"]
    e = s3.upload_part(Bucket=bucket, Key="mpm", UploadId=uid, PartNumber=1, Body=b"tiny last part")["ETag"]
    s3.complete_multipart_upload(Bucket=bucket, Key="mpm", UploadId=uid,
                                 MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e}]})
    h = s3.head_object(Bucket=bucket, Key="mpm")
    assert h["ContentType"] == "text/x-itest"
    assert h["Metadata"] == {"origin": "create"}


def test_noncontiguous_parts_and_part_overwrite(s3, bucket):
    uid = s3.create_multipart_upload(Bucket=bucket, Key="nc")["UploadId"]
    a, b_old, b, c = os.urandom(5 * MIB), b"old" * 10, os.urandom(5 * MIB), b"tail"
    e1 = s3.upload_part(Bucket=bucket, Key="nc", UploadId=uid, PartNumber=3, Body=a)["ETag"]
    s3.upload_part(Bucket=bucket, Key="nc", UploadId=uid, PartNumber=7, Body=b_old)
    e2 = s3.upload_part(Bucket=bucket, Key="nc", UploadId=uid, PartNumber=7, Body=b)["ETag"]  # overwrite
    e3 = s3.upload_part(Bucket=bucket, Key="nc", UploadId=uid, PartNumber=42, Body=c)["ETag"]
    s3.complete_multipart_upload(Bucket=bucket, Key="nc", UploadId=uid, MultipartUpload={"Parts": [
        {"PartNumber": 3, "ETag": e1}, {"PartNumber": 7, "ETag": e2}, {"PartNumber": 42, "ETag": e3}]})
    assert s3.get_object(Bucket=bucket, Key="nc")["Body"].read() == a + b + c


def test_list_parts_and_pagination(s3, bucket):
    uid = s3.create_multipart_upload(Bucket=bucket, Key="lp")["UploadId"]
    bodies = {n: f"part {n}".encode() * 10 for n in (1, 2, 3, 5, 8)}
    for n, body in bodies.items():
        s3.upload_part(Bucket=bucket, Key="lp", UploadId=uid, PartNumber=n, Body=body)
    r = s3.list_parts(Bucket=bucket, Key="lp", UploadId=uid)
    assert [p["PartNumber"] for p in r["Parts"]] == [1, 2, 3, 5, 8]
    for p in r["Parts"]:
        assert p["Size"] == len(bodies[p["PartNumber"]])
        assert p["ETag"] == f'"{hashlib.md5(bodies[p["PartNumber"]]).hexdigest()}"'
    assert r["UploadId"] == uid and r["Key"] == "lp"
    r = s3.list_parts(Bucket=bucket, Key="lp", UploadId=uid, MaxParts=2)
    assert [p["PartNumber"] for p in r["Parts"]] == [1, 2] and r["IsTruncated"]
    r = s3.list_parts(Bucket=bucket, Key="lp", UploadId=uid, MaxParts=2, PartNumberMarker=r["NextPartNumberMarker"])
    assert [p["PartNumber"] for p in r["Parts"]] == [3, 5] and r["IsTruncated"]
    r = s3.list_parts(Bucket=bucket, Key="lp", UploadId=uid, MaxParts=2, PartNumberMarker=r["NextPartNumberMarker"])
    assert [p["PartNumber"] for p in r["Parts"]] == [8] and not r["IsTruncated"]
    s3.abort_multipart_upload(Bucket=bucket, Key="lp", UploadId=uid)


def test_list_multipart_uploads(s3, bucket):
    ids = {}
    for k in ("u/one", "u/two", "v/three"):
        ids[k] = s3.create_multipart_upload(Bucket=bucket, Key=k)["UploadId"]
    r = s3.list_multipart_uploads(Bucket=bucket)
    assert sorted((u["Key"], u["UploadId"]) for u in r["Uploads"]) == sorted(ids.items())
    r = s3.list_multipart_uploads(Bucket=bucket, Prefix="u/")
    assert sorted(u["Key"] for u in r["Uploads"]) == ["u/one", "u/two"]
    r = s3.list_multipart_uploads(Bucket=bucket, Delimiter="/")
    assert sorted(p["Prefix"] for p in r.get("CommonPrefixes", [])) == ["u/", "v/"]
    r = s3.list_multipart_uploads(Bucket=bucket, MaxUploads=1)
    assert len(r["Uploads"]) == 1 and r["IsTruncated"]
    for k, uid in ids.items():
        s3.abort_multipart_upload(Bucket=bucket, Key=k, UploadId=uid)
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


def test_abort_then_nosuchupload(s3, bucket):
    uid, done = upload(s3, bucket, "ab", [b"x" * 100])
    s3.abort_multipart_upload(Bucket=bucket, Key="ab", UploadId=uid)
    for call in (lambda: s3.upload_part(Bucket=bucket, Key="ab", UploadId=uid, PartNumber=2, Body=b"y"),
                 lambda: s3.list_parts(Bucket=bucket, Key="ab", UploadId=uid),
                 lambda: s3.complete_multipart_upload(Bucket=bucket, Key="ab", UploadId=uid,
                                                      MultipartUpload={"Parts": done}),
                 lambda: s3.abort_multipart_upload(Bucket=bucket, Key="ab", UploadId=uid)):
        with pytest.raises(ClientError) as ei:
            call()
        assert code_of(ei) == "NoSuchUpload"
    with pytest.raises(ClientError):
        s3.head_object(Bucket=bucket, Key="ab")


def test_unknown_upload_id_raw(server, bucket):
    r = objd.request(server, "GET", objd.opath(bucket, "k"), query=[("uploadId", "does-not-exist")])
    objd.assert_error(r, 404, "NoSuchUpload")


def test_complete_invalid_part_wrong_etag(s3, bucket):
    uid, done = upload(s3, bucket, "ip", [os.urandom(5 * MIB), b"end"])
    done[1]["ETag"] = '"00000000000000000000000000000000"'
    with pytest.raises(ClientError) as ei:
        s3.complete_multipart_upload(Bucket=bucket, Key="ip", UploadId=uid, MultipartUpload={"Parts": done})
    assert code_of(ei) == "InvalidPart"
    # the upload survives a failed Complete
    assert len(s3.list_parts(Bucket=bucket, Key="ip", UploadId=uid)["Parts"]) == 2
    s3.abort_multipart_upload(Bucket=bucket, Key="ip", UploadId=uid)


def test_complete_invalid_part_missing_number(s3, bucket):
    uid, done = upload(s3, bucket, "ip2", [os.urandom(5 * MIB)])
    with pytest.raises(ClientError) as ei:
        s3.complete_multipart_upload(Bucket=bucket, Key="ip2", UploadId=uid,
                                     MultipartUpload={"Parts": done + [{"PartNumber": 9, "ETag": done[0]["ETag"]}]})
    assert code_of(ei) == "InvalidPart"
    s3.abort_multipart_upload(Bucket=bucket, Key="ip2", UploadId=uid)


def test_complete_invalid_part_order(s3, bucket):
    uid, done = upload(s3, bucket, "po", [os.urandom(5 * MIB), b"end"])
    with pytest.raises(ClientError) as ei:
        s3.complete_multipart_upload(Bucket=bucket, Key="po", UploadId=uid,
                                     MultipartUpload={"Parts": list(reversed(done))})
    assert code_of(ei) == "InvalidPartOrder"
    s3.abort_multipart_upload(Bucket=bucket, Key="po", UploadId=uid)


def test_complete_entity_too_small(s3, bucket):
    uid, done = upload(s3, bucket, "ets", [b"small first part", b"second"])
    with pytest.raises(ClientError) as ei:
        s3.complete_multipart_upload(Bucket=bucket, Key="ets", UploadId=uid, MultipartUpload={"Parts": done})
    assert code_of(ei) == "EntityTooSmall"
    s3.abort_multipart_upload(Bucket=bucket, Key="ets", UploadId=uid)


def test_complete_malformed_and_empty(server, s3, bucket):
    uid = s3.create_multipart_upload(Bucket=bucket, Key="mx")["UploadId"]
    for body in (b"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber>",
                 b"<CompleteMultipartUpload></CompleteMultipartUpload>",
                 b"not xml at all"):
        r = objd.request(server, "POST", objd.opath(bucket, "mx"), query=[("uploadId", uid)], body=body)
        objd.assert_error(r, 400, "MalformedXML")
    s3.abort_multipart_upload(Bucket=bucket, Key="mx", UploadId=uid)


@pytest.mark.parametrize("part_number", ["0", "10001", "-1", "abc"])
def test_bad_part_numbers_rejected(server, s3, bucket, part_number):
    uid = s3.create_multipart_upload(Bucket=bucket, Key="pn")["UploadId"]
    r = objd.request(server, "PUT", objd.opath(bucket, "pn"), query=[("partNumber", part_number), ("uploadId", uid)],
                     body=b"data")
    objd.assert_error(r, 400, "InvalidArgument")
    s3.abort_multipart_upload(Bucket=bucket, Key="pn", UploadId=uid)


def test_part_number_10000_accepted(s3, bucket):
    uid = s3.create_multipart_upload(Bucket=bucket, Key="p10k")["UploadId"]
    e = s3.upload_part(Bucket=bucket, Key="p10k", UploadId=uid, PartNumber=10000, Body=b"last")["ETag"]
    s3.complete_multipart_upload(Bucket=bucket, Key="p10k", UploadId=uid,
                                 MultipartUpload={"Parts": [{"PartNumber": 10000, "ETag": e}]})
    assert s3.get_object(Bucket=bucket, Key="p10k")["Body"].read() == b"last"


def test_complete_if_none_match(server, s3, bucket):
    s3.put_object(Bucket=bucket, Key="cin", Body=b"existing")
    uid, done = upload(s3, bucket, "cin", [b"new"])
    xml = ("<CompleteMultipartUpload>" + "".join(
        f"<Part><PartNumber>{p['PartNumber']}</PartNumber><ETag>{p['ETag']}</ETag></Part>" for p in done)
        + "</CompleteMultipartUpload>").encode()
    r = objd.request(server, "POST", objd.opath(bucket, "cin"), query=[("uploadId", uid)], body=xml,
                     headers={"If-None-Match": "*"})
    objd.assert_error(r, 412, "PreconditionFailed")
    assert s3.get_object(Bucket=bucket, Key="cin")["Body"].read() == b"existing"


def test_upload_part_copy_with_range(s3, bucket):
    src = os.urandom(12 * MIB)
    s3.put_object(Bucket=bucket, Key="copy src/ü", Body=src)
    uid = s3.create_multipart_upload(Bucket=bucket, Key="upc")["UploadId"]
    r1 = s3.upload_part_copy(Bucket=bucket, Key="upc", UploadId=uid, PartNumber=1,
                             CopySource={"Bucket": bucket, "Key": "copy src/ü"},
                             CopySourceRange=f"bytes={MIB}-{7 * MIB - 1}")
    assert r1["CopyPartResult"]["ETag"] == f'"{hashlib.md5(src[MIB:7 * MIB]).hexdigest()}"'
    r2 = s3.upload_part_copy(Bucket=bucket, Key="upc", UploadId=uid, PartNumber=2,
                             CopySource={"Bucket": bucket, "Key": "copy src/ü"})
    e3 = s3.upload_part(Bucket=bucket, Key="upc", UploadId=uid, PartNumber=3, Body=b"tail")["ETag"]
    s3.complete_multipart_upload(Bucket=bucket, Key="upc", UploadId=uid, MultipartUpload={"Parts": [
        {"PartNumber": 1, "ETag": r1["CopyPartResult"]["ETag"]},
        {"PartNumber": 2, "ETag": r2["CopyPartResult"]["ETag"]},
        {"PartNumber": 3, "ETag": e3}]})
    got = s3.get_object(Bucket=bucket, Key="upc")["Body"].read()
    assert got == src[MIB:7 * MIB] + src + b"tail"


def test_upload_part_copy_bad_range(s3, bucket):
    s3.put_object(Bucket=bucket, Key="small-src", Body=b"0123456789")
    uid = s3.create_multipart_upload(Bucket=bucket, Key="upcb")["UploadId"]
    with pytest.raises(ClientError) as ei:
        s3.upload_part_copy(Bucket=bucket, Key="upcb", UploadId=uid, PartNumber=1,
                            CopySource={"Bucket": bucket, "Key": "small-src"}, CopySourceRange="bytes=5-100")
    # AWS answers 400 InvalidArgument ("Range specified is not valid for source object of size");
    # any 400 that stores nothing is acceptable to clients.
    assert ei.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert code_of(ei) in ("InvalidRange", "InvalidArgument", "InvalidRequest")
    # ... and ObjDirect answers exactly what AWS does.
    assert code_of(ei) == "InvalidArgument"
    assert ei.value.response["Error"]["Message"] == \
        "Range specified is not valid for source object of size: 10"
    assert s3.list_parts(Bucket=bucket, Key="upcb", UploadId=uid).get("Parts", []) == []
    s3.abort_multipart_upload(Bucket=bucket, Key="upcb", UploadId=uid)


# ------------------------------------------------------------------------------------------------
# CopyObject


def test_copy_object_copy_directive_keeps_metadata(s3, bucket):
    s3.put_object(Bucket=bucket, Key="c/src", Body=b"payload", ContentType="text/x-src", Metadata={"k": "v"})
    r = s3.copy_object(Bucket=bucket, Key="c/dst", CopySource={"Bucket": bucket, "Key": "c/src"})
    assert r["CopyObjectResult"]["ETag"] == f'"{hashlib.md5(b"payload").hexdigest()}"'
    assert r["CopyObjectResult"]["LastModified"]
    h = s3.head_object(Bucket=bucket, Key="c/dst")
    assert h["ContentType"] == "text/x-src" and h["Metadata"] == {"k": "v"}
    assert s3.get_object(Bucket=bucket, Key="c/dst")["Body"].read() == b"payload"


def test_copy_object_replace_directive(s3, bucket):
    s3.put_object(Bucket=bucket, Key="r/src", Body=b"payload", ContentType="text/x-src", Metadata={"k": "v"})
    s3.copy_object(Bucket=bucket, Key="r/dst", CopySource={"Bucket": bucket, "Key": "r/src"},
                   MetadataDirective="REPLACE", ContentType="text/x-new", Metadata={"n": "2"})
    h = s3.head_object(Bucket=bucket, Key="r/dst")
    assert h["ContentType"] == "text/x-new" and h["Metadata"] == {"n": "2"}


def test_copy_onto_itself_needs_replace(s3, bucket):
    s3.put_object(Bucket=bucket, Key="self", Body=b"x", Metadata={"a": "1"})
    with pytest.raises(ClientError) as ei:
        s3.copy_object(Bucket=bucket, Key="self", CopySource={"Bucket": bucket, "Key": "self"})
    assert code_of(ei) == "InvalidRequest"
    s3.copy_object(Bucket=bucket, Key="self", CopySource={"Bucket": bucket, "Key": "self"},
                   MetadataDirective="REPLACE", Metadata={"a": "2"})
    assert s3.head_object(Bucket=bucket, Key="self")["Metadata"] == {"a": "2"}


def test_copy_source_conditions(s3, bucket):
    s3.put_object(Bucket=bucket, Key="cs", Body=b"cond")
    etag = f'"{hashlib.md5(b"cond").hexdigest()}"'
    with pytest.raises(ClientError) as ei:
        s3.copy_object(Bucket=bucket, Key="cs2", CopySource={"Bucket": bucket, "Key": "cs"},
                       CopySourceIfMatch='"ffffffffffffffffffffffffffffffff"')
    assert code_of(ei) == "PreconditionFailed"
    with pytest.raises(ClientError) as ei:
        s3.copy_object(Bucket=bucket, Key="cs2", CopySource={"Bucket": bucket, "Key": "cs"},
                       CopySourceIfNoneMatch=etag)
    assert code_of(ei) == "PreconditionFailed"
    with pytest.raises(ClientError):
        s3.head_object(Bucket=bucket, Key="cs2")
    s3.copy_object(Bucket=bucket, Key="cs2", CopySource={"Bucket": bucket, "Key": "cs"}, CopySourceIfMatch=etag)
    assert s3.get_object(Bucket=bucket, Key="cs2")["Body"].read() == b"cond"


def test_copy_missing_source(s3, bucket):
    with pytest.raises(ClientError) as ei:
        s3.copy_object(Bucket=bucket, Key="dst", CopySource={"Bucket": bucket, "Key": "no-such-source"})
    assert code_of(ei) == "NoSuchKey"
    with pytest.raises(ClientError) as ei:
        s3.copy_object(Bucket=bucket, Key="dst", CopySource={"Bucket": "no-such-bucket-zz", "Key": "k"})
    assert code_of(ei) == "NoSuchBucket"


def test_copy_source_raw_encoded_key_and_leading_slash(server, s3, bucket):
    key = "dir/with space+plus/\u00fc.bin"
    s3.put_object(Bucket=bucket, Key=key, Body=b"enc")
    for i, src in enumerate((f"/{bucket}/{objd.quote_key(key)}", f"{bucket}/{objd.quote_key(key)}")):
        r = objd.request(server, "PUT", objd.opath(bucket, f"copied{i}"), headers={"x-amz-copy-source": src})
        assert r.status == 200, (src, r)
        assert r.xml().tag == NS + "CopyObjectResult"
        assert s3.get_object(Bucket=bucket, Key=f"copied{i}")["Body"].read() == b"enc"


def test_copy_across_buckets(s3, bucket):
    other = bucket + "-o"
    s3.create_bucket(Bucket=other)
    try:
        s3.put_object(Bucket=bucket, Key="x", Body=b"across")
        s3.copy_object(Bucket=other, Key="y", CopySource={"Bucket": bucket, "Key": "x"})
        assert s3.get_object(Bucket=other, Key="y")["Body"].read() == b"across"
        s3.delete_object(Bucket=other, Key="y")
    finally:
        s3.delete_bucket(Bucket=other)


def test_get_part_number_beyond_the_parts(server, s3, bucket):
    parts = [os.urandom(5 * MIB), b"tail"]
    uid, done = upload(s3, bucket, "pnx", parts)
    s3.complete_multipart_upload(Bucket=bucket, Key="pnx", UploadId=uid,
                                 MultipartUpload={"Parts": done})
    s3.put_object(Bucket=bucket, Key="single", Body=b"one part")
    cases = [("pnx", 3, 2), ("single", 2, 1)]
    if objd.gateway_mode():
        cases = [("single", 2, 1)]  # the gateway does not learn an upstream object's part list
    for key, asked, actual in cases:
        r = objd.request(server, "GET", objd.opath(bucket, key), query={"partNumber": str(asked)})
        f = objd.assert_error(r, 416, "InvalidPartNumber")
        assert f["PartNumberRequested"] == str(asked) and f["ActualPartCount"] == str(actual), f
    if not objd.gateway_mode():
        r = objd.request(server, "GET", objd.opath(bucket, "pnx"), query={"partNumber": "2"})
        assert r.status == 206 and r.body == b"tail", r


@pytest.mark.skipif(objd.gateway_mode(), reason="the gateway does not learn an upstream object's "
                    "part list, so it cannot recognise a Complete it already did")
def test_complete_repeated_after_success_answers_the_same(s3, bucket):
    parts = [os.urandom(5 * MIB), b"end"]
    uid, done = upload(s3, bucket, "again", parts)
    first = s3.complete_multipart_upload(Bucket=bucket, Key="again", UploadId=uid,
                                         MultipartUpload={"Parts": done})
    second = s3.complete_multipart_upload(Bucket=bucket, Key="again", UploadId=uid,
                                          MultipartUpload={"Parts": done})
    assert first["ETag"] == second["ETag"] == mp_etag(parts)
    assert s3.get_object(Bucket=bucket, Key="again")["Body"].read() == b"".join(parts)
    # Another part list for the finished upload is not that result: NoSuchUpload.
    with pytest.raises(ClientError) as ei:
        s3.complete_multipart_upload(Bucket=bucket, Key="again", UploadId=uid,
                                     MultipartUpload={"Parts": done[:1]})
    assert code_of(ei) == "NoSuchUpload"


def test_complete_of_a_checksum_upload_needs_every_part_checksum(server, s3, bucket):
    import base64
    import zlib
    uid = s3.create_multipart_upload(Bucket=bucket, Key="ck", ChecksumAlgorithm="CRC32")["UploadId"]
    parts = [os.urandom(5 * MIB), b"last"]
    listed = []
    for i, p in enumerate(parts, 1):
        crc = base64.b64encode(zlib.crc32(p).to_bytes(4, "big")).decode()
        r = s3.upload_part(Bucket=bucket, Key="ck", UploadId=uid, PartNumber=i, Body=p,
                           ChecksumCRC32=crc)
        listed.append({"PartNumber": i, "ETag": r["ETag"], "ChecksumCRC32": crc})

    def complete(part_list, headers=None):
        body = "<CompleteMultipartUpload>" + "".join(
            f"<Part><PartNumber>{p['PartNumber']}</PartNumber><ETag>{p['ETag']}</ETag>"
            + (f"<ChecksumCRC32>{p['ChecksumCRC32']}</ChecksumCRC32>" if "ChecksumCRC32" in p else "")
            + "</Part>" for p in part_list) + "</CompleteMultipartUpload>"
        return objd.request(server, "POST", objd.opath(bucket, "ck"), query={"uploadId": uid},
                            headers=headers, body=body.encode())

    missing = [listed[0], {k: v for k, v in listed[1].items() if k != "ChecksumCRC32"}]
    f = objd.assert_error(complete(missing), 400, "InvalidRequest")
    assert "part 2" in f["Message"], f
    # The composite checksum on the Complete is checked: a wrong one is refused, nothing is made.
    composite = base64.b64encode(zlib.crc32(b"".join(
        base64.b64decode(p["ChecksumCRC32"]) for p in listed)).to_bytes(4, "big")).decode()
    wrong = base64.b64encode(b"\0\0\0\0").decode()
    objd.assert_error(complete(listed, {"x-amz-checksum-crc32": wrong}), 400, "BadDigest")
    objd.assert_error(complete(listed, {"x-amz-checksum-crc32c": composite}), 400, "InvalidRequest")
    with pytest.raises(ClientError):
        s3.head_object(Bucket=bucket, Key="ck")
    r = complete(listed, {"x-amz-checksum-crc32": composite + "-2"})
    assert r.status == 200 and b"<Error>" not in r.body, r
    assert s3.get_object(Bucket=bucket, Key="ck")["Body"].read() == b"".join(parts)
