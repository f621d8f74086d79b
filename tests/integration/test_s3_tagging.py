"""Object and bucket tagging as AWS documents it: Put/Get/DeleteObjectTagging,
Put/Get/DeleteBucketTagging, x-amz-tagging on PutObject, CopyObject (x-amz-tagging-directive) and
CreateMultipartUpload, x-amz-tagging-count on GET, the limits (10 tags per object, 50 per bucket,
128-character keys, 256-character values) and their error codes; with boto3, raw signed HTTP and
`aws s3api` (Debian's AWS CLI v2)."""

import json
import os
import subprocess

import botocore.exceptions
import pytest

import objd

NS = "http://s3.amazonaws.com/doc/2006-03-01/"


def code_of(excinfo):
    return excinfo.value.response["Error"]["Code"]


def tagset(d):
    return [{"Key": k, "Value": v} for k, v in d.items()]


def as_dict(ts):
    return {t["Key"]: t["Value"] for t in ts}


def behind_radosgw():
    """The gateway in front of radosgw (docs/scale-out.md, "Verified upstreams"): its tagging
    answers differ from S3's where noted."""
    return objd.gateway_mode() and os.environ.get("OBJDIRECT_UPSTREAM_KIND") == "radosgw"


def test_put_get_delete_object_tagging(s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"data")
    assert s3.get_object_tagging(Bucket=bucket, Key="k")["TagSet"] == []
    before = s3.head_object(Bucket=bucket, Key="k")
    tags = {"project": "blue", "owner": "ml team", "empty": "", "unicode": "caf\u00e9"}
    s3.put_object_tagging(Bucket=bucket, Key="k", Tagging={"TagSet": tagset(tags)})
    got = s3.get_object_tagging(Bucket=bucket, Key="k")["TagSet"]
    if behind_radosgw():
        # radosgw 16 returns the tag set sorted by key; the gateway passes its answer on.
        assert got == sorted(tagset(tags), key=lambda t: t["Key"])
    else:
        assert got == tagset(tags)  # in the order given
    g = s3.get_object(Bucket=bucket, Key="k")
    assert g["Body"].read() == b"data"
    if not objd.gateway_mode():
        # The gateway's GET takes its metadata from the upstream's HEAD, which carries no tag
        # count (S3 sends x-amz-tagging-count on GET only): no TagCount there
        # (docs/scale-out.md, "What the gateway passes through").
        assert g["TagCount"] == 4
    after = s3.head_object(Bucket=bucket, Key="k")
    # Tagging changes neither the bytes, the ETag nor Last-Modified.
    assert after["ETag"] == before["ETag"]
    if not behind_radosgw():
        # radosgw 16 moves Last-Modified to the time of PutObjectTagging (seen one second later
        # when the PUT and the tagging fall in different seconds); the gateway passes it on.
        assert after["LastModified"] == before["LastModified"]
    s3.put_object_tagging(Bucket=bucket, Key="k", Tagging={"TagSet": tagset({"only": "one"})})
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="k")["TagSet"]) == {"only": "one"}
    r = s3.delete_object_tagging(Bucket=bucket, Key="k")
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 204
    assert s3.get_object_tagging(Bucket=bucket, Key="k")["TagSet"] == []
    assert "TagCount" not in s3.get_object(Bucket=bucket, Key="k")  # (none through the gateway)
    # An overwrite starts without tags.
    s3.put_object_tagging(Bucket=bucket, Key="k", Tagging={"TagSet": tagset({"a": "1"})})
    s3.put_object(Bucket=bucket, Key="k", Body=b"new")
    assert s3.get_object_tagging(Bucket=bucket, Key="k")["TagSet"] == []


def test_object_tagging_on_missing_object_and_bucket(s3, bucket):
    for call in (lambda: s3.get_object_tagging(Bucket=bucket, Key="absent"),
                 lambda: s3.put_object_tagging(Bucket=bucket, Key="absent",
                                               Tagging={"TagSet": tagset({"a": "1"})}),
                 lambda: s3.delete_object_tagging(Bucket=bucket, Key="absent")):
        with pytest.raises(botocore.exceptions.ClientError) as e:
            call()
        assert code_of(e) == "NoSuchKey"
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.get_object_tagging(Bucket=bucket + "-nope", Key="k")
    assert code_of(e) == "NoSuchBucket"


def test_object_tag_limits(server, s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    ten = {f"k{i}": "v" for i in range(10)}
    s3.put_object_tagging(Bucket=bucket, Key="k", Tagging={"TagSet": tagset(ten)})
    assert len(s3.get_object_tagging(Bucket=bucket, Key="k")["TagSet"]) == 10
    bad = [
        {f"k{i}": "v" for i in range(11)},  # limits::object_tags_max + 1
        {"k" * 129: "v"},                   # limits::tag_key_chars_max + 1
        {"k": "v" * 257},                   # limits::tag_value_chars_max + 1
        {"aws:reserved": "v"},
        {"bad*char": "v"},
    ]
    for tags in bad:
        with pytest.raises(botocore.exceptions.ClientError) as e:
            s3.put_object_tagging(Bucket=bucket, Key="k", Tagging={"TagSet": tagset(tags)})
        assert code_of(e) == "InvalidTag", tags
    # At the limits exactly: accepted.
    s3.put_object_tagging(Bucket=bucket, Key="k",
                          Tagging={"TagSet": tagset({"k" * 128: "v" * 256})})
    # Duplicate keys (boto3 cannot send them: raw XML).
    body = (f'<Tagging xmlns="{NS}"><TagSet><Tag><Key>a</Key><Value>1</Value></Tag>'
            "<Tag><Key>a</Key><Value>2</Value></Tag></TagSet></Tagging>").encode()
    r = objd.request(server, "PUT", objd.opath(bucket, "k"), query={"tagging": ""}, body=body)
    objd.assert_error(r, 400, "InvalidTag")
    r = objd.request(server, "PUT", objd.opath(bucket, "k"), query={"tagging": ""},
                     body=b"<Tagging><Tag/></Tagging>")
    objd.assert_error(r, 400, "MalformedXML")
    # Failed calls changed nothing.
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="k")["TagSet"]) == {"k" * 128: "v" * 256}


def test_x_amz_tagging_on_put(s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"x", Tagging="a=1&b=two%20words&c=x+y&d")
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="k")["TagSet"]) == {
        "a": "1", "b": "two words", "c": "x y", "d": ""}
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.put_object(Bucket=bucket, Key="k2", Body=b"x", Tagging="&".join(f"k{i}=v" for i in range(11)))
    assert code_of(e) == "InvalidTag"
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.put_object(Bucket=bucket, Key="k2", Body=b"x", Tagging="a=1&a=2")
    assert code_of(e) == "InvalidTag"
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.put_object(Bucket=bucket, Key="k2", Body=b"x", Tagging="a=%zz")
    assert code_of(e) == "InvalidArgument"
    # Nothing was stored by the refused PUTs.
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.head_object(Bucket=bucket, Key="k2")
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404


def test_copy_tagging_directive(server, s3, bucket):
    s3.put_object(Bucket=bucket, Key="src", Body=b"payload", Tagging="a=1&b=2")
    src = {"Bucket": bucket, "Key": "src"}
    s3.copy_object(Bucket=bucket, Key="copy", CopySource=src)  # COPY is the default
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="copy")["TagSet"]) == {"a": "1", "b": "2"}
    s3.copy_object(Bucket=bucket, Key="replaced", CopySource=src, TaggingDirective="REPLACE",
                   Tagging="c=3")
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="replaced")["TagSet"]) == {"c": "3"}
    s3.copy_object(Bucket=bucket, Key="none", CopySource=src, TaggingDirective="REPLACE")
    assert s3.get_object_tagging(Bucket=bucket, Key="none")["TagSet"] == []
    # The metadata directive does not decide the tags.
    s3.copy_object(Bucket=bucket, Key="meta", CopySource=src, MetadataDirective="REPLACE",
                   Metadata={"m": "1"})
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="meta")["TagSet"]) == {"a": "1", "b": "2"}
    r = objd.request(server, "PUT", objd.opath(bucket, "bad"),
                     headers={"x-amz-copy-source": f"/{bucket}/src", "x-amz-tagging-directive": "MOVE"})
    objd.assert_error(r, 400, "InvalidArgument")
    assert s3.get_object(Bucket=bucket, Key="replaced")["Body"].read() == b"payload"


def test_multipart_upload_tags(s3, bucket):
    up = s3.create_multipart_upload(Bucket=bucket, Key="mp", Tagging="stage=raw&team=ml")
    part = s3.upload_part(Bucket=bucket, Key="mp", UploadId=up["UploadId"], PartNumber=1, Body=b"p" * 1000)
    s3.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=up["UploadId"],
                                 MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
    if behind_radosgw():
        # radosgw 16 answers GetObjectTagging of the completed object with an empty 200 body
        # (which the gateway reads as no tags): CreateMultipartUpload's x-amz-tagging is not
        # kept there.
        assert s3.get_object_tagging(Bucket=bucket, Key="mp")["TagSet"] == []
        return
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="mp")["TagSet"]) == {"stage": "raw", "team": "ml"}
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.create_multipart_upload(Bucket=bucket, Key="mp2", Tagging="aws:x=1")
    assert code_of(e) == "InvalidTag"


def test_bucket_tagging(server, s3, bucket):
    # Through the gateway each call goes to the upstream, which keeps the tags
    # (docs/scale-out.md, "What the gateway passes through").
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.get_bucket_tagging(Bucket=bucket)
    assert code_of(e) == "NoSuchTagSet"
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    tags = {f"t{i}": str(i) for i in range(50)}  # limits::bucket_tags_max
    r = s3.put_bucket_tagging(Bucket=bucket, Tagging={"TagSet": tagset(tags)})
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 204
    got = s3.get_bucket_tagging(Bucket=bucket)["TagSet"]
    if behind_radosgw():
        # radosgw 16 returns the tag set sorted by key; the gateway passes its answer on.
        got = sorted(got, key=lambda t: int(t["Key"][1:]))
    assert got == tagset(tags)
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.put_bucket_tagging(Bucket=bucket, Tagging={"TagSet": tagset({f"t{i}": "v" for i in range(51)})})
    assert code_of(e) == "InvalidTag"
    assert len(s3.get_bucket_tagging(Bucket=bucket)["TagSet"]) == 50
    # A wrong Content-MD5 is refused.
    body = f'<Tagging xmlns="{NS}"><TagSet/></Tagging>'.encode()
    r = objd.request(server, "PUT", "/" + bucket, query={"tagging": ""}, body=body,
                     headers={"Content-MD5": "1B2M2Y8AsgTpgAmY7PhCfg=="})
    objd.assert_error(r, 400, "BadDigest")
    r = s3.delete_bucket_tagging(Bucket=bucket)
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 204
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.get_bucket_tagging(Bucket=bucket)
    assert code_of(e) == "NoSuchTagSet"
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.put_bucket_tagging(Bucket=bucket + "-nope", Tagging={"TagSet": tagset({"a": "1"})})
    assert code_of(e) == "NoSuchBucket"


def test_aws_s3api_tagging(server, bucket, tmp_path):
    aws = objd.which("aws")
    if not aws:
        pytest.skip("aws CLI not installed")
    env = dict(os.environ)
    env.pop("AWS_CA_BUNDLE", None)
    env.update({"AWS_ACCESS_KEY_ID": objd.ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": objd.SECRET_KEY,
                "AWS_DEFAULT_REGION": "us-east-1", "AWS_CONFIG_FILE": "/dev/null",
                "AWS_SHARED_CREDENTIALS_FILE": "/dev/null", "AWS_PAGER": "",
                "AWS_EC2_METADATA_DISABLED": "true", "AWS_MAX_ATTEMPTS": "1"})
    base = [aws, "--endpoint-url", server.endpoint, "--output", "json", "s3api"]

    def run(*args):
        p = subprocess.run(base + list(args), env=env, capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, (args, p.stdout, p.stderr)
        return json.loads(p.stdout) if p.stdout.strip() else {}

    src = tmp_path / "obj"
    src.write_bytes(b"hello")
    run("put-object", "--bucket", bucket, "--key", "k", "--body", str(src), "--tagging", "a=1&b=2")
    assert as_dict(run("get-object-tagging", "--bucket", bucket, "--key", "k")["TagSet"]) == {"a": "1", "b": "2"}
    run("put-object-tagging", "--bucket", bucket, "--key", "k",
        "--tagging", json.dumps({"TagSet": [{"Key": "c", "Value": "3"}]}))
    assert run("get-object-tagging", "--bucket", bucket, "--key", "k")["TagSet"] == [{"Key": "c", "Value": "3"}]
    run("delete-object-tagging", "--bucket", bucket, "--key", "k")
    assert run("get-object-tagging", "--bucket", bucket, "--key", "k")["TagSet"] == []
    run("put-bucket-tagging", "--bucket", bucket,
        "--tagging", json.dumps({"TagSet": [{"Key": "team", "Value": "ml"}]}))
    assert run("get-bucket-tagging", "--bucket", bucket)["TagSet"] == [{"Key": "team", "Value": "ml"}]
    run("delete-bucket-tagging", "--bucket", bucket)
    p = subprocess.run(base + ["get-bucket-tagging", "--bucket", bucket], env=env, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode != 0 and "NoSuchTagSet" in p.stderr, (p.stdout, p.stderr)


def versioned_bucket(s3, bucket):
    if not objd.keeps_versions():
        pytest.skip("this backend keeps no versions (docs/versioning.md)")
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})


def test_tagging_by_version_id(server, s3, bucket):
    """Put/Get/DeleteObjectTagging ?versionId= act on that version and answer x-amz-version-id;
    without versionId they act on the latest one (issue 20)."""
    versioned_bucket(s3, bucket)
    v1 = s3.put_object(Bucket=bucket, Key="k", Body=b"one")["VersionId"]
    v2 = s3.put_object(Bucket=bucket, Key="k", Body=b"two")["VersionId"]
    assert v1 != v2
    r = s3.put_object_tagging(Bucket=bucket, Key="k", VersionId=v1,
                              Tagging={"TagSet": tagset({"v": "1"})})
    assert r["VersionId"] == v1
    latest = s3.get_object_tagging(Bucket=bucket, Key="k")
    assert latest["VersionId"] == v2 and latest["TagSet"] == []
    old = s3.get_object_tagging(Bucket=bucket, Key="k", VersionId=v1)
    assert old["VersionId"] == v1 and as_dict(old["TagSet"]) == {"v": "1"}
    r = s3.put_object_tagging(Bucket=bucket, Key="k", Tagging={"TagSet": tagset({"v": "2"})})
    assert r["VersionId"] == v2
    # Each version keeps its own tags, bytes and ETag; neither becomes the latest by tagging.
    g1 = s3.get_object(Bucket=bucket, Key="k", VersionId=v1)
    assert g1["Body"].read() == b"one" and g1["TagCount"] == 1
    g = s3.get_object(Bucket=bucket, Key="k")
    assert g["Body"].read() == b"two" and g["VersionId"] == v2 and g["TagCount"] == 1
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="k", VersionId=v1)["TagSet"]) == {
        "v": "1"}
    d = s3.delete_object_tagging(Bucket=bucket, Key="k", VersionId=v1)
    assert d["ResponseMetadata"]["HTTPStatusCode"] == 204 and d["VersionId"] == v1
    assert s3.get_object_tagging(Bucket=bucket, Key="k", VersionId=v1)["TagSet"] == []
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="k")["TagSet"]) == {"v": "2"}
    # Raw HTTP: the header is on each answer.
    path = objd.opath(bucket, "k")
    r = objd.request(server, "GET", path, query={"tagging": "", "versionId": v1})
    assert r.status == 200 and r.header("x-amz-version-id") == v1, r
    # An unknown id, a malformed one, an empty one.
    unknown = "0" * 32
    for method, body in (("GET", b""), ("PUT", b"<Tagging><TagSet/></Tagging>"), ("DELETE", b"")):
        r = objd.request(server, method, path, query={"tagging": "", "versionId": unknown},
                         body=body)
        objd.assert_error(r, 404, "NoSuchVersion")
        r = objd.request(server, method, path, query={"tagging": "", "versionId": "nope"},
                         body=body)
        objd.assert_error(r, 400, "InvalidArgument")
        r = objd.request(server, method, path, query={"tagging": "", "versionId": ""}, body=body)
        objd.assert_error(r, 400, "InvalidArgument")


def test_tagging_of_a_delete_marker(server, s3, bucket):
    """A delete marker has no tags: by its id, 405 MethodNotAllowed (with x-amz-delete-marker);
    as the latest version, 404 NoSuchKey; the older versions stay taggable."""
    versioned_bucket(s3, bucket)
    v1 = s3.put_object(Bucket=bucket, Key="k", Body=b"one")["VersionId"]
    marker = s3.delete_object(Bucket=bucket, Key="k")
    assert marker["DeleteMarker"] is True
    dm = marker["VersionId"]
    path = objd.opath(bucket, "k")
    for method, body in (("GET", b""), ("PUT", b"<Tagging><TagSet/></Tagging>"), ("DELETE", b"")):
        r = objd.request(server, method, path, query={"tagging": "", "versionId": dm}, body=body)
        objd.assert_error(r, 405, "MethodNotAllowed")
        assert r.header("x-amz-delete-marker") == "true" and r.header("x-amz-version-id") == dm, r
        r = objd.request(server, method, path, query={"tagging": ""}, body=body)
        objd.assert_error(r, 404, "NoSuchKey")
        assert r.header("x-amz-delete-marker") == "true" and r.header("x-amz-version-id") == dm, r
    r = s3.put_object_tagging(Bucket=bucket, Key="k", VersionId=v1,
                              Tagging={"TagSet": tagset({"kept": "yes"})})
    assert r["VersionId"] == v1
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="k", VersionId=v1)["TagSet"]) == {
        "kept": "yes"}


def test_tagging_of_the_null_version(server, s3, bucket):
    """An object written before versioning is the "null" version: taggable by that id, and the
    answers name it; in a never-versioned bucket no x-amz-version-id is sent."""
    s3.put_object(Bucket=bucket, Key="k", Body=b"before")
    path = objd.opath(bucket, "k")
    r = objd.request(server, "PUT", path, query={"tagging": ""},
                     body=b"<Tagging><TagSet><Tag><Key>a</Key><Value>1</Value></Tag></TagSet>"
                          b"</Tagging>")
    assert r.status == 200 and r.header("x-amz-version-id") is None, r
    r = objd.request(server, "GET", path, query={"tagging": "", "versionId": "null"})
    assert r.status == 200 and b"<Key>a</Key>" in r.body, r
    versioned_bucket(s3, bucket)
    s3.put_object(Bucket=bucket, Key="k", Body=b"after")
    r = s3.put_object_tagging(Bucket=bucket, Key="k", VersionId="null",
                              Tagging={"TagSet": tagset({"n": "ull"})})
    assert r["VersionId"] == "null"
    g = s3.get_object_tagging(Bucket=bucket, Key="k", VersionId="null")
    assert g["VersionId"] == "null" and as_dict(g["TagSet"]) == {"n": "ull"}
    assert s3.get_object(Bucket=bucket, Key="k", VersionId="null")["Body"].read() == b"before"
    assert s3.get_object_tagging(Bucket=bucket, Key="k")["TagSet"] == []
