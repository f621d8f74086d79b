"""Bucket lifecycle as AWS documents it: Put/Get/DeleteBucketLifecycleConfiguration (boto3,
`aws s3api`), the codes for bad rules, and the background worker with a shortened day
(--lifecycle-day-seconds 1, a pass every 200 ms): Expiration Days by prefix and by tag, Expiration
Date in the past, AbortIncompleteMultipartUpload, disabled rules left alone, the bounded work per
pass (--lifecycle-actions-per-pass-max), and the objdirect_lifecycle_* metrics."""

import json
import os
import re
import subprocess
import time

import botocore.exceptions
import pytest

import objd


@pytest.fixture(scope="module")
def lc_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("lifecycle")
    srv = objd.Server(str(root / "data"), str(root / "server.log"),
                      extra_args=os.environ.get("OBJDIRECT_SERVER_ARGS", "").split() +
                      ["--lifecycle-day-seconds", "1", "--lifecycle-interval-ms", "200",
                       "--lifecycle-actions-per-pass-max", "5"])
    srv.start()
    yield srv
    crashed = not srv.alive()
    rc = srv.stop()
    assert not crashed and rc == 0, f"server rc={rc}; log:\n{srv.log_tail()}"


@pytest.fixture
def lc(lc_server):
    return objd.boto3_client(lc_server)


_n = [0]


@pytest.fixture
def lbucket(lc):
    _n[0] += 1
    name = f"lc-{os.getpid()}-{_n[0]}"
    lc.create_bucket(Bucket=name)
    yield name
    try:
        lc.delete_bucket_lifecycle(Bucket=name)
        for page in lc.get_paginator("list_objects_v2").paginate(Bucket=name):
            for o in page.get("Contents", []):
                lc.delete_object(Bucket=name, Key=o["Key"])
        for u in lc.list_multipart_uploads(Bucket=name).get("Uploads", []):
            lc.abort_multipart_upload(Bucket=name, Key=u["Key"], UploadId=u["UploadId"])
        lc.delete_bucket(Bucket=name)
    except botocore.exceptions.ClientError:
        pass


def code_of(e):
    return e.value.response["Error"]["Code"]


def keys(s3, b):
    return sorted(o["Key"] for o in s3.list_objects_v2(Bucket=b).get("Contents", []))


def metric(srv, name):
    r = objd.request(srv, "GET", "/metrics", sign=False, timeout_s=10)
    m = re.search(rf"^{name} ([0-9.e+]+)$", r.body.decode(), re.M)
    return float(m.group(1)) if m else None


def counted(srv, name, before, want):
    """How far counter `name` moved from `before`. The worker counts an action just after the action
    becomes visible, so a test that saw the effect waits (briefly) for the count to catch up."""
    wait_for(lambda: metric(srv, name) - before >= want, timeout_s=5)
    return metric(srv, name) - before


def wait_for(pred, timeout_s=20):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.1)
    return pred()


def test_put_get_delete_configuration(lc, lbucket):
    with pytest.raises(botocore.exceptions.ClientError) as e:
        lc.get_bucket_lifecycle_configuration(Bucket=lbucket)
    assert code_of(e) == "NoSuchLifecycleConfiguration"
    rules = [{"ID": "tmp", "Filter": {"Prefix": "tmp/"}, "Status": "Enabled", "Expiration": {"Days": 30},
              "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 7}},
             {"ID": "tagged", "Filter": {"And": {"Prefix": "logs/", "Tags": [{"Key": "k", "Value": "v"}]}},
              "Status": "Disabled", "NoncurrentVersionExpiration": {"NoncurrentDays": 3}}]
    lc.put_bucket_lifecycle_configuration(Bucket=lbucket, LifecycleConfiguration={"Rules": rules})
    got = lc.get_bucket_lifecycle_configuration(Bucket=lbucket)["Rules"]
    assert [r["ID"] for r in got] == ["tmp", "tagged"]
    assert got[0]["Expiration"] == {"Days": 30} and got[0]["Filter"] == {"Prefix": "tmp/"}
    assert got[0]["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 7}
    assert got[1]["Filter"]["And"]["Tags"] == [{"Key": "k", "Value": "v"}]
    assert got[1]["Status"] == "Disabled"
    r = lc.delete_bucket_lifecycle(Bucket=lbucket)
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 204
    with pytest.raises(botocore.exceptions.ClientError) as e:
        lc.get_bucket_lifecycle_configuration(Bucket=lbucket)
    assert code_of(e) == "NoSuchLifecycleConfiguration"


def test_bad_configurations(lc_server, lc, lbucket):
    bad = [
        ([{"Filter": {"Prefix": ""}, "Status": "Enabled"}], "InvalidRequest"),                 # no action
        ([{"Filter": {"Prefix": ""}, "Status": "Enabled", "Expiration": {"Days": 0}}], "InvalidArgument"),
        ([{"ID": "a", "Filter": {"Prefix": ""}, "Status": "Enabled", "Expiration": {"Days": 1}}] * 2,
         "InvalidArgument"),                                                                # duplicate IDs
        ([{"Filter": {"Tag": {"Key": "k", "Value": "v"}}, "Status": "Enabled",
           "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}}], "InvalidRequest"),
        ([{"Filter": {"Prefix": ""}, "Status": "Enabled", "Transitions": [{"Days": 1, "StorageClass": "GLACIER"}]}],
         "NotImplemented"),
    ]
    for rules, code in bad:
        with pytest.raises(botocore.exceptions.ClientError) as e:
            lc.put_bucket_lifecycle_configuration(Bucket=lbucket, LifecycleConfiguration={"Rules": rules})
        assert code_of(e) == code, rules
    # A Content-MD5 that does not match the body: 400 BadDigest, nothing stored.
    body = (b"<LifecycleConfiguration><Rule><ID>r</ID><Filter><Prefix></Prefix></Filter>"
            b"<Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule></LifecycleConfiguration>")
    r = objd.request(lc_server, "PUT", f"/{lbucket}", query={"lifecycle": ""}, body=body,
                     headers={"Content-MD5": "1B2M2Y8AsgTpgAmY7PhCfg=="})
    objd.assert_error(r, 400, "BadDigest")
    with pytest.raises(botocore.exceptions.ClientError) as e:
        lc.get_bucket_lifecycle_configuration(Bucket=lbucket)
    assert code_of(e) == "NoSuchLifecycleConfiguration"


def test_expiration_by_prefix_and_tag_with_a_short_day(lc_server, lc, lbucket):
    for k in ("tmp/a", "tmp/b", "keep/a"):
        lc.put_object(Bucket=lbucket, Key=k, Body=b"x")
    lc.put_object(Bucket=lbucket, Key="logs/old", Body=b"x", Tagging="expire=yes")
    lc.put_object(Bucket=lbucket, Key="logs/tagless", Body=b"x")
    before = metric(lc_server, "objdirect_lifecycle_objects_expired_total")
    lc.put_bucket_lifecycle_configuration(Bucket=lbucket, LifecycleConfiguration={"Rules": [
        {"ID": "tmp", "Filter": {"Prefix": "tmp/"}, "Status": "Enabled", "Expiration": {"Days": 1}},
        {"ID": "tag", "Filter": {"And": {"Prefix": "logs/", "Tags": [{"Key": "expire", "Value": "yes"}]}},
         "Status": "Enabled", "Expiration": {"Days": 1}},
        {"ID": "off", "Filter": {"Prefix": "keep/"}, "Status": "Disabled", "Expiration": {"Days": 1}}]})
    assert wait_for(lambda: keys(lc, lbucket) == ["keep/a", "logs/tagless"]), keys(lc, lbucket)
    assert counted(lc_server, "objdirect_lifecycle_objects_expired_total", before, 3) == 3
    # A fresh object under an expiring prefix lives about a day.
    lc.put_object(Bucket=lbucket, Key="tmp/new", Body=b"y")
    assert "tmp/new" in keys(lc, lbucket)
    assert wait_for(lambda: "tmp/new" not in keys(lc, lbucket))


def test_expiration_date_in_the_past(lc, lbucket):
    lc.put_object(Bucket=lbucket, Key="dated/a", Body=b"x")
    lc.put_object(Bucket=lbucket, Key="other", Body=b"x")
    lc.put_bucket_lifecycle_configuration(Bucket=lbucket, LifecycleConfiguration={"Rules": [
        {"ID": "d", "Filter": {"Prefix": "dated/"}, "Status": "Enabled",
         "Expiration": {"Date": "2020-01-01T00:00:00Z"}}]})
    assert wait_for(lambda: keys(lc, lbucket) == ["other"]), keys(lc, lbucket)


def test_abort_incomplete_multipart_upload(lc_server, lc, lbucket):
    old = lc.create_multipart_upload(Bucket=lbucket, Key="up/old")["UploadId"]
    lc.upload_part(Bucket=lbucket, Key="up/old", UploadId=old, PartNumber=1, Body=b"p" * 100)
    other = lc.create_multipart_upload(Bucket=lbucket, Key="elsewhere")["UploadId"]
    before = metric(lc_server, "objdirect_lifecycle_uploads_aborted_total")
    lc.put_bucket_lifecycle_configuration(Bucket=lbucket, LifecycleConfiguration={"Rules": [
        {"ID": "abort", "Filter": {"Prefix": "up/"}, "Status": "Enabled",
         "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}}]})

    def uploads():
        return sorted(u["UploadId"] for u in lc.list_multipart_uploads(Bucket=lbucket).get("Uploads", []))
    assert wait_for(lambda: uploads() == [other]), uploads()
    with pytest.raises(botocore.exceptions.ClientError) as e:
        lc.list_parts(Bucket=lbucket, Key="up/old", UploadId=old)
    assert code_of(e) == "NoSuchUpload"
    assert counted(lc_server, "objdirect_lifecycle_uploads_aborted_total", before, 1) == 1


def test_work_per_pass_is_bounded(lc_server, lc, lbucket):
    for i in range(23):
        lc.put_object(Bucket=lbucket, Key=f"bulk/{i:02d}", Body=b"x")
    time.sleep(1.1)  # older than a day
    passes0 = metric(lc_server, "objdirect_lifecycle_passes_total")
    lc.put_bucket_lifecycle_configuration(Bucket=lbucket, LifecycleConfiguration={"Rules": [
        {"ID": "bulk", "Filter": {"Prefix": "bulk/"}, "Status": "Enabled", "Expiration": {"Days": 1}}]})
    assert wait_for(lambda: keys(lc, lbucket) == []), keys(lc, lbucket)
    # At most 5 deletions per pass (--lifecycle-actions-per-pass-max 5): 23 objects need 5 passes.
    assert metric(lc_server, "objdirect_lifecycle_passes_total") - passes0 >= 5


def test_aws_s3api_lifecycle(lc_server, lbucket):
    aws = objd.which("aws")
    if not aws:
        pytest.skip("aws CLI not installed")
    env = dict(os.environ)
    env.pop("AWS_CA_BUNDLE", None)
    env.update({"AWS_ACCESS_KEY_ID": objd.ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": objd.SECRET_KEY,
                "AWS_DEFAULT_REGION": "us-east-1", "AWS_CONFIG_FILE": "/dev/null",
                "AWS_SHARED_CREDENTIALS_FILE": "/dev/null", "AWS_PAGER": "",
                "AWS_EC2_METADATA_DISABLED": "true", "AWS_MAX_ATTEMPTS": "1"})
    base = [aws, "--endpoint-url", lc_server.endpoint, "--output", "json", "s3api"]
    cfg = {"Rules": [{"ID": "r", "Filter": {"Prefix": "x/"}, "Status": "Enabled", "Expiration": {"Days": 9}}]}
    p = subprocess.run(base + ["put-bucket-lifecycle-configuration", "--bucket", lbucket,
                               "--lifecycle-configuration", json.dumps(cfg)],
                       env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    p = subprocess.run(base + ["get-bucket-lifecycle-configuration", "--bucket", lbucket], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["Rules"] == cfg["Rules"]
    p = subprocess.run(base + ["delete-bucket-lifecycle", "--bucket", lbucket], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr


def versions_of(s3, b):
    r = s3.list_object_versions(Bucket=b)
    out = [(v["Key"], v["VersionId"], "v", v["IsLatest"]) for v in r.get("Versions", [])]
    out += [(m["Key"], m["VersionId"], "m", m["IsLatest"]) for m in r.get("DeleteMarkers", [])]
    return sorted(out)


def test_noncurrent_versions_and_expired_delete_markers(lc_server, lc, lbucket):
    if not objd.keeps_versions():
        pytest.skip("this backend does not keep versions (docs/versioning.md)")
    lc.put_bucket_versioning(Bucket=lbucket, VersioningConfiguration={"Status": "Enabled"})
    # "nc/a": three versions; the newest noncurrent one is spared (NewerNoncurrentVersions 1).
    a = [lc.put_object(Bucket=lbucket, Key="nc/a", Body=bytes([i]))["VersionId"] for i in range(3)]
    # "gone/k": one version and a marker: the version expires, then the lone marker does.
    g = lc.put_object(Bucket=lbucket, Key="gone/k", Body=b"g")["VersionId"]
    gm = lc.delete_object(Bucket=lbucket, Key="gone/k")["VersionId"]
    # Outside the prefix nothing happens.
    o = [lc.put_object(Bucket=lbucket, Key="other", Body=bytes([i]))["VersionId"] for i in range(2)]
    before = metric(lc_server, "objdirect_lifecycle_objects_expired_total")
    lc.put_bucket_lifecycle_configuration(Bucket=lbucket, LifecycleConfiguration={"Rules": [
        {"ID": "nc", "Filter": {"Prefix": "nc/"}, "Status": "Enabled",
         "NoncurrentVersionExpiration": {"NoncurrentDays": 1, "NewerNoncurrentVersions": 1}},
        {"ID": "gone", "Filter": {"Prefix": "gone/"}, "Status": "Enabled",
         "NoncurrentVersionExpiration": {"NoncurrentDays": 1},
         "Expiration": {"ExpiredObjectDeleteMarker": True}}]})
    want = sorted([("nc/a", a[2], "v", True), ("nc/a", a[1], "v", False),
                   ("other", o[1], "v", True), ("other", o[0], "v", False)])
    assert wait_for(lambda: versions_of(lc, lbucket) == want), versions_of(lc, lbucket)
    # a[0], g, then the marker gm once it was the only version left.
    assert counted(lc_server, "objdirect_lifecycle_objects_expired_total", before, 3) == 3
    assert lc.get_object(Bucket=lbucket, Key="nc/a")["Body"].read() == bytes([2])
    with pytest.raises(botocore.exceptions.ClientError) as e:
        lc.get_object(Bucket=lbucket, Key="gone/k", VersionId=gm)
    assert code_of(e) == "NoSuchVersion"
    assert g not in [v[1] for v in versions_of(lc, lbucket)]
    # Clean up every version so the fixture can delete the bucket.
    lc.delete_bucket_lifecycle(Bucket=lbucket)
    for k, vid, _, _ in versions_of(lc, lbucket):
        lc.delete_object(Bucket=lbucket, Key=k, VersionId=vid)
