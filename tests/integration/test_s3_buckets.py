"""Bucket operations: ListBuckets, CreateBucket (names, already owned), DeleteBucket, HeadBucket,
GetBucketLocation; request ids on every response."""

import xml.etree.ElementTree as ET

import pytest
from botocore.exceptions import ClientError

import objd
from conftest import unique_bucket

NS = objd.S3_NS


def test_list_buckets_shows_created_bucket_with_date(server, s3, bucket):
    r = s3.list_buckets()
    names = [b["Name"] for b in r["Buckets"]]
    assert bucket in names
    created = next(b for b in r["Buckets"] if b["Name"] == bucket)["CreationDate"]
    assert created.year >= 2024
    assert r["Owner"].get("ID")


def test_list_buckets_raw_xml_and_request_id(server, bucket):
    r = objd.request(server, "GET", "/")
    assert r.status == 200, r
    assert r.header("x-amz-request-id")
    assert r.header("content-type", "").startswith("application/xml"), r.headers
    root = r.xml()
    assert root.tag == NS + "ListAllMyBucketsResult", root.tag
    assert bucket in [e.text for e in root.iter(NS + "Name")]


@pytest.mark.parametrize("name", [
    "ab",                       # too short
    "a" * 64,                   # too long
    "UpperCase",                # upper case
    "under_score",
    "-leading-dash",
    "trailing-dash-",
    "192.168.5.4",              # IP address form
    "two..dots",
    "xn--punycode-prefix",
    "bad-suffix-s3alias",
])
def test_create_bucket_invalid_name(server, name):
    r = objd.request(server, "PUT", "/" + name)
    objd.assert_error(r, 400, "InvalidBucketName")


@pytest.mark.parametrize("name", ["abc", "a" * 63, "with.dots.ok", "0numeric-start9"])
def test_create_bucket_valid_edge_names(server, s3, name):
    r = objd.request(server, "PUT", "/" + name)
    assert r.status == 200, r
    assert r.header("x-amz-request-id")
    s3.head_bucket(Bucket=name)
    s3.delete_bucket(Bucket=name)


def test_create_bucket_twice_in_us_east_1_is_200_and_keeps_contents(server, s3, bucket):
    # AWS CreateBucket: "If you create a bucket that already exists and you own it, in us-east-1
    # you get 200 OK and the bucket is reset" - in fact its contents stay; elsewhere 409.
    s3.put_object(Bucket=bucket, Key="kept", Body=b"still here")
    r = objd.request(server, "PUT", "/" + bucket)
    assert r.status == 200, r
    assert r.header("location") == "/" + bucket, r.headers
    assert s3.get_object(Bucket=bucket, Key="kept")["Body"].read() == b"still here"


def test_create_bucket_twice_elsewhere_already_owned(tmp_path):
    srv = objd.Server(str(tmp_path / "data"), str(tmp_path / "server.log"),
                      extra_args=["--region", "eu-west-1"])
    srv.start()
    try:
        import boto3
        from botocore.config import Config
        eu = boto3.client("s3", endpoint_url=srv.endpoint, aws_access_key_id=objd.ACCESS_KEY,
                          aws_secret_access_key=objd.SECRET_KEY, region_name="eu-west-1",
                          config=Config(s3={"addressing_style": "path"}))
        name = unique_bucket("own")
        cfg = {"LocationConstraint": "eu-west-1"}
        eu.create_bucket(Bucket=name, CreateBucketConfiguration=cfg)
        with pytest.raises(ClientError) as e:
            eu.create_bucket(Bucket=name, CreateBucketConfiguration=cfg)
        assert e.value.response["Error"]["Code"] == "BucketAlreadyOwnedByYou"
        assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 409
    finally:
        assert srv.stop() == 0


def test_create_bucket_location_constraints(server, s3):
    # AWS: us-east-1 is the default and may not be named; another region than the endpoint's is
    # refused too. Both are 400 InvalidLocationConstraint, and no bucket is made.
    name = unique_bucket("loc")
    for region in ("us-east-1", "eu-west-1"):
        body = (b'<CreateBucketConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
                b"<LocationConstraint>" + region.encode() + b"</LocationConstraint>"
                b"</CreateBucketConfiguration>")
        r = objd.request(server, "PUT", "/" + name, body=body)
        objd.assert_error(r, 400, "InvalidLocationConstraint")
        objd.assert_error(objd.request(server, "HEAD", "/" + name), 404, None)
    # No constraint (and the empty one) is us-east-1.
    r = objd.request(server, "PUT", "/" + name,
                     body=b"<CreateBucketConfiguration><LocationConstraint/></CreateBucketConfiguration>")
    assert r.status == 200, r
    s3.delete_bucket(Bucket=name)


def test_delete_bucket_not_empty(server, s3, bucket):
    s3.put_object(Bucket=bucket, Key="x", Body=b"1")
    r = objd.request(server, "DELETE", "/" + bucket)
    objd.assert_error(r, 409, "BucketNotEmpty")
    s3.head_bucket(Bucket=bucket)


def test_delete_bucket_with_pending_upload_is_not_empty_or_aborts(server, s3):
    # AWS deletes a bucket whose only content is in-progress uploads. We only require consistency:
    # either 409 BucketNotEmpty, or 204 and the bucket (with its upload) is gone.
    name = unique_bucket("mpu")
    s3.create_bucket(Bucket=name)
    s3.create_multipart_upload(Bucket=name, Key="k")
    r = objd.request(server, "DELETE", "/" + name)
    if r.status == 409:
        objd.assert_error(r, 409, "BucketNotEmpty")
        for u in s3.list_multipart_uploads(Bucket=name).get("Uploads", []):
            s3.abort_multipart_upload(Bucket=name, Key=u["Key"], UploadId=u["UploadId"])
        s3.delete_bucket(Bucket=name)
    else:
        assert r.status == 204, r
    with pytest.raises(ClientError):
        s3.head_bucket(Bucket=name)


def test_delete_bucket_missing(server):
    r = objd.request(server, "DELETE", "/" + unique_bucket("gone"))
    objd.assert_error(r, 404, "NoSuchBucket")


def test_delete_bucket_then_recreate(server, s3):
    name = unique_bucket("re")
    s3.create_bucket(Bucket=name)
    r = objd.request(server, "DELETE", "/" + name)
    assert r.status == 204, r
    assert r.body == b""
    s3.create_bucket(Bucket=name)
    assert s3.list_objects_v2(Bucket=name)["KeyCount"] == 0
    s3.delete_bucket(Bucket=name)


def test_head_bucket(server, bucket):
    r = objd.request(server, "HEAD", "/" + bucket)
    assert r.status == 200, r
    assert r.header("x-amz-request-id")
    assert r.body == b""


def test_head_bucket_missing_is_404_without_body(server):
    r = objd.request(server, "HEAD", "/" + unique_bucket("nohead"))
    assert r.status == 404, r
    assert r.body == b""
    assert r.header("x-amz-request-id")


def test_get_bucket_location(server, s3, bucket):
    r = objd.request(server, "GET", "/" + bucket, query=[("location", None)])
    assert r.status == 200, r
    root = r.xml()
    assert root.tag == NS + "LocationConstraint", root.tag
    # us-east-1 is reported as an empty LocationConstraint, as AWS does
    assert (root.text or "") in ("", "us-east-1")
    loc = s3.get_bucket_location(Bucket=bucket)["LocationConstraint"]
    assert loc in (None, "us-east-1")


def test_get_bucket_location_missing_bucket(server):
    r = objd.request(server, "GET", "/" + unique_bucket("noloc"), query=[("location", None)])
    objd.assert_error(r, 404, "NoSuchBucket")


def test_list_objects_missing_bucket(server):
    r = objd.request(server, "GET", "/" + unique_bucket("nolist"), query=[("list-type", "2")])
    f = objd.assert_error(r, 404, "NoSuchBucket")
    assert f.get("BucketName", "").startswith("nolist") or "nolist" in f["Resource"], f


def test_bucket_name_in_error_resource(server):
    name = unique_bucket("res")
    r = objd.request(server, "GET", f"/{name}/some/key")
    f = objd.assert_error(r, 404, "NoSuchBucket")
    assert name in f["Resource"], f


def test_unknown_bucket_subresource_is_clean_error(server, bucket):
    # A subresource ObjDirect does not implement must not look like success or crash.
    r = objd.request(server, "GET", "/" + bucket, query=[("torrent", None)])
    assert r.status in (400, 404, 405, 501), r
    if r.body:
        ET.fromstring(r.body)
    objd.health(server)


def test_list_buckets_max_buckets_continuation_and_prefix(server, s3):
    # AWS ListBuckets: max-buckets (1..10000), continuation-token, prefix, and <ContinuationToken>
    # in the reply while more buckets follow; <Prefix> is echoed when given.
    stem = unique_bucket("lbp")
    names = [f"{stem}-{i}" for i in range(5)]
    for n in names:
        s3.create_bucket(Bucket=n)
    try:
        seen, token, pages = [], None, 0
        while True:
            q = [("max-buckets", "2"), ("prefix", stem + "-")]
            if token:
                q.append(("continuation-token", token))
            r = objd.request(server, "GET", "/", query=q)
            assert r.status == 200, r
            root = r.xml()
            assert root.find(NS + "Prefix").text == stem + "-"
            page = [e.find(NS + "Name").text for e in root.iter(NS + "Bucket")]
            assert 1 <= len(page) <= 2, page
            seen += page
            pages += 1
            t = root.find(NS + "ContinuationToken")
            if t is None:
                break
            token = t.text
        assert seen == sorted(names) and pages == 3, (seen, pages)
        # Without max-buckets everything comes in one page, with no token.
        root = objd.request(server, "GET", "/").xml()
        assert root.find(NS + "ContinuationToken") is None
        assert root.find(NS + "Prefix") is None
        for bad in ("0", "10001", "-1", "x"):
            objd.assert_error(objd.request(server, "GET", "/", query=[("max-buckets", bad)]),
                              400, "InvalidArgument")
        objd.assert_error(objd.request(server, "GET", "/", query=[("continuation-token", "%%")]),
                          400, "InvalidArgument")
    finally:
        for n in names:
            s3.delete_bucket(Bucket=n)
