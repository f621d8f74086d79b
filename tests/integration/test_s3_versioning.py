"""Bucket versioning as AWS documents it: Put/GetBucketVersioning (Enabled, Suspended, MFA Delete
refused), version ids on PutObject, CopyObject and CompleteMultipartUpload, GET/HEAD/DELETE with
versionId, delete markers, null versions after suspension, DeleteObjects with VersionId,
ListObjectVersions with prefix, delimiter, markers and paging, and DeleteBucket of a bucket that
holds only versions; with boto3, raw signed HTTP, `aws s3api`, rclone --s3-versions and RDMA
(the objdirect CLI over libfabric tcp). The same assertions run on the local and the RADOS backend
(rados.integration_s3_versioning); backends without versioning answer NotImplemented."""

import json
import os
import shutil
import subprocess

import boto3
import botocore.exceptions
import pytest
from botocore.config import Config

import objd

NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"


def gateway_upstream():
    """The upstream kind when the server under test is the gateway (--backend s3, started by
    scripts/with-upstream.sh), else None."""
    if "--backend s3" not in os.environ.get("OBJDIRECT_SERVER_ARGS", ""):
        return None
    return os.environ.get("OBJDIRECT_UPSTREAM_KIND", "objdirect")


# Upstreams whose version ids are opaque to them: a malformed id is answered 404 NoSuchVersion (not
# 400 InvalidArgument), DeleteObjects of one deletes nothing without an error, and objects written
# before versioning was enabled carry no version id at all (not "null").
OPAQUE_IDS = ("radosgw", "moto")


def backend_keeps_versions():
    # The local and RADOS backends keep versions (objd.keeps_versions); the gateway passes
    # versioning through, and every verified upstream (a second ObjDirect, radosgw, moto) keeps
    # them (docs/scale-out.md); the read-through cache forwards the version calls.
    return objd.keeps_versions() or gateway_upstream() is not None


@pytest.fixture(scope="module")
def vsrv(tmp_path_factory):
    root = tmp_path_factory.mktemp("versioning")
    old = os.environ.get("FI_TCP_IFACE")
    os.environ["FI_TCP_IFACE"] = "lo"
    # OBJDIRECT_SERVER_ARGS: the backend of the entry (scripts/with-ceph.sh for the RADOS one).
    s = objd.Server(str(root / "data"), str(root / "server.log"),
                    extra_args=os.environ.get("OBJDIRECT_SERVER_ARGS", "").split() +
                    ["--fabric", "libfabric:tcp"])
    s.start()
    yield s
    crashed = not s.alive()
    rc = s.stop()
    if old is None:
        os.environ.pop("FI_TCP_IFACE", None)
    assert not crashed and rc == 0, f"server rc={rc}; log:\n{s.log_tail()}"


@pytest.fixture(scope="module")
def vs3(vsrv):
    cfg = Config(s3={"addressing_style": "path"}, retries={"total_max_attempts": 1})
    return boto3.client("s3", endpoint_url=vsrv.endpoint, region_name=objd.REGION,
                        aws_access_key_id=objd.ACCESS_KEY, aws_secret_access_key=objd.SECRET_KEY, config=cfg)


_n = [0]


def new_bucket(vs3, enable=True):
    _n[0] += 1
    name = f"ver-{os.getpid()}-{_n[0]}"
    vs3.create_bucket(Bucket=name)
    if enable:
        vs3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    return name


@pytest.fixture
def vb(vs3):
    if not backend_keeps_versions():
        pytest.skip("this backend does not keep versions (test_backend_without_versioning)")
    return new_bucket(vs3)


def code_of(excinfo):
    return excinfo.value.response["Error"]["Code"]


def status_of(excinfo):
    return excinfo.value.response["ResponseMetadata"]["HTTPStatusCode"]


def headers_of(excinfo):
    return excinfo.value.response["ResponseMetadata"]["HTTPHeaders"]


def all_versions(vs3, bucket, **kw):
    r = vs3.list_object_versions(Bucket=bucket, **kw)
    entries = [("v", v["Key"], v["VersionId"], v["IsLatest"]) for v in r.get("Versions", [])]
    entries += [("m", m["Key"], m["VersionId"], m["IsLatest"]) for m in r.get("DeleteMarkers", [])]
    return r, entries


def raw_versions(vsrv, bucket, query=None):
    """ListObjectVersions as raw XML: the entries in document order (boto3 splits them)."""
    q = {"versions": ""}
    q.update(query or {})
    r = objd.request(vsrv, "GET", f"/{bucket}", query=q)
    assert r.status == 200, r
    root = r.xml()
    out = []
    for e in root:
        tag = e.tag.replace(NS, "")
        if tag in ("Version", "DeleteMarker"):
            out.append((tag, e.find(NS + "Key").text, e.find(NS + "VersionId").text,
                        e.find(NS + "IsLatest").text))
    return root, out


def test_backend_without_versioning(vs3):
    if backend_keeps_versions():
        pytest.skip("this backend keeps versions")
    b = new_bucket(vs3, enable=False)
    with pytest.raises(botocore.exceptions.ClientError) as e:
        vs3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
    assert code_of(e) == "NotImplemented" and status_of(e) == 501
    # Nothing changed: still never versioned, objects still plain.
    assert "Status" not in vs3.get_bucket_versioning(Bucket=b)
    vs3.put_object(Bucket=b, Key="k", Body=b"x")
    assert "VersionId" not in vs3.head_object(Bucket=b, Key="k")
    with pytest.raises(botocore.exceptions.ClientError) as e:
        vs3.get_object(Bucket=b, Key="k", VersionId="0123456789abcdef0123456789abcdef")
    assert code_of(e) == "NotImplemented"


def test_get_put_bucket_versioning(vsrv, vs3):
    if not backend_keeps_versions():
        pytest.skip("this backend does not keep versions")
    b = new_bucket(vs3, enable=False)
    got = vs3.get_bucket_versioning(Bucket=b)
    assert "Status" not in got and "MFADelete" not in got  # never versioned: empty configuration
    vs3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
    assert vs3.get_bucket_versioning(Bucket=b)["Status"] == "Enabled"
    vs3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Suspended"})
    assert vs3.get_bucket_versioning(Bucket=b)["Status"] == "Suspended"
    # MFADelete Disabled is accepted; Enabled needs an MFA device this server does not have.
    vs3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled", "MFADelete": "Disabled"})
    with pytest.raises(botocore.exceptions.ClientError) as e:
        vs3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled", "MFADelete": "Enabled"})
    assert code_of(e) == "InvalidRequest" and status_of(e) == 400
    assert vs3.get_bucket_versioning(Bucket=b)["Status"] == "Enabled"
    # Bad documents: MalformedXML.
    for body in (b"<VersioningConfiguration><Status>On</Status></VersioningConfiguration>",
                 b"<Nope/>", b"not xml"):
        r = objd.request(vsrv, "PUT", f"/{b}", query={"versioning": ""}, body=body)
        objd.assert_error(r, 400, "MalformedXML")
    with pytest.raises(botocore.exceptions.ClientError) as e:
        vs3.get_bucket_versioning(Bucket="no-such-bucket-ver")
    assert code_of(e) == "NoSuchBucket"


def test_versions_get_head_delete(vsrv, vs3, vb):
    ids = []
    for i in range(3):
        r = vs3.put_object(Bucket=vb, Key="k", Body=f"body-{i}".encode())
        ids.append(r["VersionId"])
    assert len(set(ids)) == 3 and "null" not in ids
    g = vs3.get_object(Bucket=vb, Key="k")
    assert g["Body"].read() == b"body-2" and g["VersionId"] == ids[2]
    for i, vid in enumerate(ids):
        g = vs3.get_object(Bucket=vb, Key="k", VersionId=vid)
        assert g["Body"].read() == f"body-{i}".encode() and g["VersionId"] == vid
        h = vs3.head_object(Bucket=vb, Key="k", VersionId=vid)
        assert h["VersionId"] == vid and h["ContentLength"] == 6
    # A range of an old version.
    g = vs3.get_object(Bucket=vb, Key="k", VersionId=ids[0], Range="bytes=5-5")
    assert g["Body"].read() == b"0"
    # Unknown id: 404 NoSuchVersion; malformed or empty: 400 InvalidArgument.
    with pytest.raises(botocore.exceptions.ClientError) as e:
        vs3.get_object(Bucket=vb, Key="k", VersionId="0123456789abcdef0123456789abcdef")
    assert code_of(e) == "NoSuchVersion" and status_of(e) == 404
    with pytest.raises(botocore.exceptions.ClientError) as e:
        vs3.get_object(Bucket=vb, Key="k", VersionId="not-a-version")
    if gateway_upstream() in OPAQUE_IDS:
        assert code_of(e) == "NoSuchVersion" and status_of(e) == 404
    else:
        assert code_of(e) == "InvalidArgument" and status_of(e) == 400
    r = objd.request(vsrv, "GET", f"/{vb}/k", query={"versionId": ""})
    objd.assert_error(r, 400, "InvalidArgument")
    with pytest.raises(botocore.exceptions.ClientError) as e:
        vs3.head_object(Bucket=vb, Key="k", VersionId="0123456789abcdef0123456789abcdef")
    assert status_of(e) == 404
    # Deleting a version by id removes it for good; the next newest becomes the latest.
    d = vs3.delete_object(Bucket=vb, Key="k", VersionId=ids[2])
    assert d["VersionId"] == ids[2] and "DeleteMarker" not in d
    assert vs3.get_object(Bucket=vb, Key="k")["Body"].read() == b"body-1"
    with pytest.raises(botocore.exceptions.ClientError) as e:
        vs3.get_object(Bucket=vb, Key="k", VersionId=ids[2])
    assert code_of(e) == "NoSuchVersion"
    # Deleting an unknown well-formed id succeeds and removes nothing (204, as AWS).
    d = vs3.delete_object(Bucket=vb, Key="k", VersionId="0123456789abcdef0123456789abcdef")
    assert d["ResponseMetadata"]["HTTPStatusCode"] == 204
    if gateway_upstream() not in OPAQUE_IDS:
        with pytest.raises(botocore.exceptions.ClientError) as e:
            vs3.delete_object(Bucket=vb, Key="k", VersionId="bad id")
        assert code_of(e) == "InvalidArgument"
    _, entries = all_versions(vs3, vb)
    assert entries == [("v", "k", ids[1], True), ("v", "k", ids[0], False)]


def test_delete_markers(vsrv, vs3, vb):
    v1 = vs3.put_object(Bucket=vb, Key="k", Body=b"one")["VersionId"]
    d = vs3.delete_object(Bucket=vb, Key="k")
    assert d["DeleteMarker"] is True and d["VersionId"] not in (v1, "null")
    marker = d["VersionId"]
    # The latest is a marker: GET and HEAD answer 404 NoSuchKey, saying it is a marker.
    with pytest.raises(botocore.exceptions.ClientError) as e:
        vs3.get_object(Bucket=vb, Key="k")
    assert code_of(e) == "NoSuchKey" and status_of(e) == 404
    # radosgw 16 does not say so, and the gateway answers as its upstream rather than list the
    # key's versions on every missing-key GET (docs/scale-out.md).
    says_marker = gateway_upstream() != "radosgw"
    if says_marker:
        assert headers_of(e)["x-amz-delete-marker"] == "true"
        assert headers_of(e)["x-amz-version-id"] == marker
    with pytest.raises(botocore.exceptions.ClientError) as e:
        vs3.head_object(Bucket=vb, Key="k")
    assert status_of(e) == 404
    assert headers_of(e).get("x-amz-delete-marker") == ("true" if says_marker else None)
    # The marker by id: 405 MethodNotAllowed; the old version is still there.
    with pytest.raises(botocore.exceptions.ClientError) as e:
        vs3.get_object(Bucket=vb, Key="k", VersionId=marker)
    assert code_of(e) == "MethodNotAllowed" and status_of(e) == 405
    assert headers_of(e)["x-amz-delete-marker"] == "true"
    with pytest.raises(botocore.exceptions.ClientError) as e:
        vs3.head_object(Bucket=vb, Key="k", VersionId=marker)
    assert status_of(e) == 405
    assert vs3.get_object(Bucket=vb, Key="k", VersionId=v1)["Body"].read() == b"one"
    # Listings: v1 and v2 hide the key; ListObjectVersions shows the marker as latest.
    assert vs3.list_objects_v2(Bucket=vb).get("KeyCount") == 0
    assert "Contents" not in vs3.list_objects(Bucket=vb)
    _, entries = raw_versions(vsrv, vb)
    assert entries == [("DeleteMarker", "k", marker, "true"), ("Version", "k", v1, "false")]
    # A second delete writes a second marker (AWS does; radosgw 16 writes none and names none).
    d2 = vs3.delete_object(Bucket=vb, Key="k")
    markers = [marker]
    if gateway_upstream() == "radosgw":
        assert "VersionId" not in d2
    else:
        assert d2["VersionId"] != marker
        markers.insert(0, d2["VersionId"])
    # Removing the markers by id brings the object back.
    for m in markers:
        d = vs3.delete_object(Bucket=vb, Key="k", VersionId=m)
        # moto 5.2 does not always say x-amz-delete-marker when a marker is removed by id.
        assert d.get("DeleteMarker") in ((True, None) if gateway_upstream() == "moto" else (True,))
        assert d["VersionId"] == m
    assert vs3.get_object(Bucket=vb, Key="k")["Body"].read() == b"one"
    assert [o["Key"] for o in vs3.list_objects_v2(Bucket=vb)["Contents"]] == ["k"]
    # A marker for a key that never existed (AWS writes one too).
    d = vs3.delete_object(Bucket=vb, Key="never")
    assert d.get("DeleteMarker") in ((True, None) if gateway_upstream() == "moto" else (True,))
    # If-None-Match: * sees a key whose latest is a marker as absent.
    r = objd.request(vsrv, "PUT", f"/{vb}/never", headers={"If-None-Match": "*"}, body=b"now")
    assert r.status == 200, r
    r = objd.request(vsrv, "PUT", f"/{vb}/never", headers={"If-None-Match": "*"}, body=b"again")
    objd.assert_error(r, 412, "PreconditionFailed")


def test_null_versions_and_suspension(vsrv, vs3):
    if not backend_keeps_versions():
        pytest.skip("this backend does not keep versions")
    b = new_bucket(vs3, enable=False)
    r = vs3.put_object(Bucket=b, Key="k", Body=b"before")
    assert "VersionId" not in r  # never versioned: no version ids at all
    vs3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
    # The object written before versioning is the null version.
    if gateway_upstream() in OPAQUE_IDS:
        assert vs3.head_object(Bucket=b, Key="k").get("VersionId") in (None, "null")
    else:
        assert vs3.head_object(Bucket=b, Key="k")["VersionId"] == "null"
    v1 = vs3.put_object(Bucket=b, Key="k", Body=b"v1")["VersionId"]
    assert vs3.get_object(Bucket=b, Key="k", VersionId="null")["Body"].read() == b"before"
    vs3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Suspended"})
    # Suspended: a PUT writes the null version, replacing the old null one; v1 stays.
    r = vs3.put_object(Bucket=b, Key="k", Body=b"suspended")
    if gateway_upstream() in OPAQUE_IDS:
        # Neither names the null version, nor serves versionId=null alike (moto: 400): the rest of
        # the null-version rules are the upstream's own, passed through unchecked here.
        assert r.get("VersionId") in (None, "null")
        assert vs3.get_object(Bucket=b, Key="k")["Body"].read() == b"suspended"
        if gateway_upstream() == "radosgw":  # moto 5.2 answers HEAD of v1 here with 400
            assert vs3.get_object(Bucket=b, Key="k", VersionId=v1)["Body"].read() == b"v1"
        return
    assert r["VersionId"] == "null"
    assert vs3.get_object(Bucket=b, Key="k", VersionId="null")["Body"].read() == b"suspended"
    assert vs3.get_object(Bucket=b, Key="k", VersionId=v1)["Body"].read() == b"v1"
    _, entries = all_versions(vs3, b)
    assert entries == [("v", "k", "null", True), ("v", "k", v1, False)]
    # Suspended: a DELETE writes a null delete marker, replacing the null version.
    d = vs3.delete_object(Bucket=b, Key="k")
    assert d["DeleteMarker"] is True and d["VersionId"] == "null"
    _, entries = raw_versions(vsrv, b)
    assert entries == [("DeleteMarker", "k", "null", "true"), ("Version", "k", v1, "false")]
    # versionId=null addresses it.
    d = vs3.delete_object(Bucket=b, Key="k", VersionId="null")
    assert d["DeleteMarker"] is True and d["VersionId"] == "null"
    assert vs3.get_object(Bucket=b, Key="k")["Body"].read() == b"v1"
    # Re-enabled: new ids again, the null version keeps its place.
    vs3.put_object(Bucket=b, Key="n", Body=b"null one")
    vs3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
    v2 = vs3.put_object(Bucket=b, Key="n", Body=b"two")["VersionId"]
    _, entries = all_versions(vs3, b, Prefix="n")
    assert entries == [("v", "n", v2, True), ("v", "n", "null", False)]


def test_copy_and_multipart_versions(vs3, vb):
    v1 = vs3.put_object(Bucket=vb, Key="src", Body=b"first")["VersionId"]
    v2 = vs3.put_object(Bucket=vb, Key="src", Body=b"second")["VersionId"]
    # CopySource with a VersionId copies that version and says so.
    r = vs3.copy_object(Bucket=vb, Key="dst", CopySource={"Bucket": vb, "Key": "src", "VersionId": v1})
    assert r["CopySourceVersionId"] == v1 and r["VersionId"] not in (v1, v2)
    assert vs3.get_object(Bucket=vb, Key="dst")["Body"].read() == b"first"
    r = vs3.copy_object(Bucket=vb, Key="dst", CopySource={"Bucket": vb, "Key": "src"})
    assert r["CopySourceVersionId"] == v2
    # Restoring an old version onto its own key (COPY directive) is allowed and makes a new one.
    r = vs3.copy_object(Bucket=vb, Key="src", CopySource={"Bucket": vb, "Key": "src", "VersionId": v1})
    v3 = r["VersionId"]
    assert v3 not in (v1, v2)
    assert vs3.get_object(Bucket=vb, Key="src")["Body"].read() == b"first"
    # Copy onto itself with REPLACE: a new version sharing the bytes; the old one stays readable.
    r = vs3.copy_object(Bucket=vb, Key="src", CopySource={"Bucket": vb, "Key": "src"},
                        MetadataDirective="REPLACE", Metadata={"m": "1"})
    v4 = r["VersionId"]
    assert vs3.head_object(Bucket=vb, Key="src")["Metadata"] == {"m": "1"}
    vs3.delete_object(Bucket=vb, Key="src", VersionId=v4)
    assert vs3.get_object(Bucket=vb, Key="src", VersionId=v3)["Body"].read() == b"first"
    # A delete marker as copy source.
    m = vs3.delete_object(Bucket=vb, Key="src")["VersionId"]
    with pytest.raises(botocore.exceptions.ClientError) as e:
        vs3.copy_object(Bucket=vb, Key="x", CopySource={"Bucket": vb, "Key": "src", "VersionId": m})
    assert code_of(e) == "InvalidRequest"
    with pytest.raises(botocore.exceptions.ClientError) as e:
        vs3.copy_object(Bucket=vb, Key="x", CopySource={"Bucket": vb, "Key": "src"})
    assert code_of(e) == "NoSuchKey"
    # UploadPartCopy from a version; CompleteMultipartUpload returns the new version's id.
    up = vs3.create_multipart_upload(Bucket=vb, Key="mp")["UploadId"]
    p1 = vs3.upload_part_copy(Bucket=vb, Key="mp", UploadId=up, PartNumber=1,
                              CopySource={"Bucket": vb, "Key": "src", "VersionId": v2})
    c = vs3.complete_multipart_upload(Bucket=vb, Key="mp", UploadId=up, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": p1["CopyPartResult"]["ETag"]}]})
    assert c["VersionId"] and c["VersionId"] != "null"
    assert vs3.get_object(Bucket=vb, Key="mp", VersionId=c["VersionId"])["Body"].read() == b"second"
    assert vs3.head_object(Bucket=vb, Key="mp")["VersionId"] == c["VersionId"]


def test_delete_objects_with_versions(vs3, vb):
    a1 = vs3.put_object(Bucket=vb, Key="a", Body=b"1")["VersionId"]
    a2 = vs3.put_object(Bucket=vb, Key="a", Body=b"2")["VersionId"]
    vs3.put_object(Bucket=vb, Key="b", Body=b"b")
    r = vs3.delete_objects(Bucket=vb, Delete={"Objects": [
        {"Key": "a", "VersionId": a2}, {"Key": "b"}, {"Key": "a", "VersionId": "bad"}]})
    deleted = {(d["Key"], d.get("VersionId")): d for d in r["Deleted"]}
    assert ("a", a2) in deleted and "DeleteMarker" not in deleted[("a", a2)]
    assert deleted[("b", None)]["DeleteMarker"] is True
    assert deleted[("b", None)]["DeleteMarkerVersionId"]
    if gateway_upstream() in OPAQUE_IDS:
        assert "Errors" not in r and ("a", "bad") in deleted
    else:
        assert [(e["Key"], e["Code"]) for e in r["Errors"]] == [("a", "InvalidArgument")]
    _, entries = all_versions(vs3, vb)
    assert ("v", "a", a1, True) in entries and ("v", "a", a2, True) not in entries
    marker = deleted[("b", None)]["DeleteMarkerVersionId"]
    r = vs3.delete_objects(Bucket=vb, Delete={"Objects": [{"Key": "b", "VersionId": marker}]})
    assert r["Deleted"][0]["VersionId"] == marker
    assert r["Deleted"][0].get("DeleteMarker") in ((True, None) if gateway_upstream() == "moto" else (True,))


def test_list_object_versions_order_prefix_delimiter(vsrv, vs3, vb):
    ids = {}
    for key in ("b/2", "a", "b/1", "c"):
        ids[key] = [vs3.put_object(Bucket=vb, Key=key, Body=key.encode() * n)["VersionId"] for n in (1, 2)]
    m = vs3.delete_object(Bucket=vb, Key="c")["VersionId"]
    root, entries = raw_versions(vsrv, vb)
    # Key ascending, newest first, markers in place.
    expect = []
    for key in ("a", "b/1", "b/2"):
        expect += [("Version", key, ids[key][1], "true"), ("Version", key, ids[key][0], "false")]
    expect += [("DeleteMarker", "c", m, "true"), ("Version", "c", ids["c"][1], "false"),
               ("Version", "c", ids["c"][0], "false")]
    assert entries == expect
    v = vs3.list_object_versions(Bucket=vb, Prefix="b/")
    assert [(x["Key"], x["Size"]) for x in v["Versions"]] == [("b/1", 6), ("b/1", 3), ("b/2", 6), ("b/2", 3)]
    v = vs3.list_object_versions(Bucket=vb, Delimiter="/")
    assert [p["Prefix"] for p in v["CommonPrefixes"]] == ["b/"]
    assert [x["Key"] for x in v["Versions"]] == ["a", "a", "c", "c"]
    # key-marker alone starts after that key; with version-id-marker, after that version.
    v = vs3.list_object_versions(Bucket=vb, KeyMarker="b/1")
    assert [x["Key"] for x in v["Versions"]][0] == "b/2"
    v = vs3.list_object_versions(Bucket=vb, KeyMarker="b/1", VersionIdMarker=ids["b/1"][1])
    assert [(x["Key"], x["VersionId"]) for x in v["Versions"]][0] == ("b/1", ids["b/1"][0])
    # A version-id-marker without a key-marker is refused.
    r = objd.request(vsrv, "GET", f"/{vb}", query={"versions": "", "version-id-marker": ids["a"][0]})
    objd.assert_error(r, 400, "InvalidArgument")
    # Truncation in the middle of a key says where to resume.
    v = vs3.list_object_versions(Bucket=vb, MaxKeys=3)
    assert v["IsTruncated"] is True
    assert v["NextKeyMarker"] == "b/1" and v["NextVersionIdMarker"] == ids["b/1"][1]
    # An unversioned-bucket style listing still works on a never-versioned bucket: VersionId null.
    plain = new_bucket(vs3, enable=False)
    vs3.put_object(Bucket=plain, Key="p", Body=b"p")
    v = vs3.list_object_versions(Bucket=plain)
    assert [(x["Key"], x["VersionId"], x["IsLatest"]) for x in v["Versions"]] == [("p", "null", True)]


def test_list_objects_hides_prefixes_whose_keys_are_all_deleted(vs3, vb):
    # As AWS: ListObjects rolls up "gone/" only while some key below it is not deleted;
    # ListObjectVersions still shows it (its markers are versions).
    for key in ("gone/a", "gone/b", "half/a", "half/b"):
        vs3.put_object(Bucket=vb, Key=key, Body=b"x")
    for key in ("gone/a", "gone/b", "half/a"):
        vs3.delete_object(Bucket=vb, Key=key)
    r = vs3.list_objects_v2(Bucket=vb, Delimiter="/")
    # moto 5.2 still lists a common prefix whose keys all end in delete markers (AWS does not).
    want = ["gone/", "half/"] if gateway_upstream() == "moto" else ["half/"]
    assert [p["Prefix"] for p in r.get("CommonPrefixes", [])] == want
    r = vs3.list_objects(Bucket=vb, Delimiter="/")
    # moto 5.2 still lists a common prefix whose keys all end in delete markers (AWS does not).
    want = ["gone/", "half/"] if gateway_upstream() == "moto" else ["half/"]
    assert [p["Prefix"] for p in r.get("CommonPrefixes", [])] == want
    v = vs3.list_object_versions(Bucket=vb, Delimiter="/")
    assert [p["Prefix"] for p in v["CommonPrefixes"]] == ["gone/", "half/"]


def test_list_object_versions_paginator(vs3, vb):
    want = []
    for i in range(4):
        key = f"p/{i}"
        ids = [vs3.put_object(Bucket=vb, Key=key, Body=b"x")["VersionId"] for _ in range(2)]
        if i == 2:
            ids.append(vs3.delete_object(Bucket=vb, Key=key)["VersionId"])
        want += [(key, vid) for vid in reversed(ids)]
    pages = list(vs3.get_paginator("list_object_versions").paginate(
        Bucket=vb, Prefix="p/", PaginationConfig={"PageSize": 2}))
    assert len(pages) == 5 and all(p["IsTruncated"] for p in pages[:-1]) and not pages[-1]["IsTruncated"]
    got = []
    for p in pages:
        page = [(x["Key"], x["VersionId"], x["LastModified"]) for x in p.get("Versions", [])]
        page += [(x["Key"], x["VersionId"], x["LastModified"]) for x in p.get("DeleteMarkers", [])]
        assert len(page) <= 2
        got += page
    # boto3 splits each page into Versions and DeleteMarkers; the union is every version once.
    assert sorted((k, v) for k, v, _ in got) == sorted(want)
    assert len(got) == len(want) == 9


def test_delete_bucket_with_only_versions(vs3, vb):
    v = vs3.put_object(Bucket=vb, Key="k", Body=b"x")["VersionId"]
    m = vs3.delete_object(Bucket=vb, Key="k")["VersionId"]
    assert "Contents" not in vs3.list_objects_v2(Bucket=vb)
    with pytest.raises(botocore.exceptions.ClientError) as e:
        vs3.delete_bucket(Bucket=vb)
    assert code_of(e) == "BucketNotEmpty" and status_of(e) == 409
    vs3.delete_object(Bucket=vb, Key="k", VersionId=v)
    with pytest.raises(botocore.exceptions.ClientError) as e:  # the marker alone keeps it
        vs3.delete_bucket(Bucket=vb)
    assert code_of(e) == "BucketNotEmpty"
    vs3.delete_object(Bucket=vb, Key="k", VersionId=m)
    vs3.delete_bucket(Bucket=vb)


def aws_env(vsrv):
    env = dict(os.environ, AWS_ACCESS_KEY_ID=objd.ACCESS_KEY, AWS_SECRET_ACCESS_KEY=objd.SECRET_KEY,
               AWS_DEFAULT_REGION=objd.REGION, AWS_EC2_METADATA_DISABLED="true", AWS_PAGER="")
    env.pop("AWS_PROFILE", None)
    env.pop("AWS_CA_BUNDLE", None)
    return env


def test_aws_cli_versioning(vsrv, vs3):
    if not backend_keeps_versions():
        pytest.skip("this backend does not keep versions")
    aws = shutil.which("aws")
    assert aws, "the AWS CLI is not installed (scripts/bootstrap installs it)"
    b = new_bucket(vs3, enable=False)

    def run(*args):
        p = subprocess.run([aws, "--endpoint-url", vsrv.endpoint, "s3api", *args, "--output", "json"],
                           env=aws_env(vsrv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        assert p.returncode == 0, p.stderr.decode()
        out = p.stdout.decode().strip()
        return json.loads(out) if out else {}

    assert run("get-bucket-versioning", "--bucket", b).get("Status") is None
    run("put-bucket-versioning", "--bucket", b, "--versioning-configuration", "Status=Enabled")
    assert run("get-bucket-versioning", "--bucket", b)["Status"] == "Enabled"
    v1 = vs3.put_object(Bucket=b, Key="k", Body=b"1")["VersionId"]
    v2 = vs3.put_object(Bucket=b, Key="k", Body=b"22")["VersionId"]
    m = vs3.delete_object(Bucket=b, Key="k")["VersionId"]
    out = run("list-object-versions", "--bucket", b)
    assert [(v["VersionId"], v["IsLatest"], v["Size"]) for v in out["Versions"]] == [(v2, False, 2), (v1, False, 1)]
    assert [(d["VersionId"], d["IsLatest"]) for d in out["DeleteMarkers"]] == [(m, True)]
    run("put-bucket-versioning", "--bucket", b, "--versioning-configuration", "Status=Suspended")
    assert run("get-bucket-versioning", "--bucket", b)["Status"] == "Suspended"


def test_rclone_s3_versions(vsrv, vs3, vb, tmp_path):
    rclone = shutil.which("rclone")
    assert rclone, "rclone is not installed (scripts/bootstrap installs it)"
    vs3.put_object(Bucket=vb, Key="doc.txt", Body=b"old!")
    vs3.put_object(Bucket=vb, Key="doc.txt", Body=b"newest")
    env = dict(os.environ, RCLONE_CONFIG="/dev/null", RCLONE_CONFIG_IT_TYPE="s3", RCLONE_CONFIG_IT_PROVIDER="Other",
               RCLONE_CONFIG_IT_ENDPOINT=vsrv.endpoint, RCLONE_CONFIG_IT_ACCESS_KEY_ID=objd.ACCESS_KEY,
               RCLONE_CONFIG_IT_SECRET_ACCESS_KEY=objd.SECRET_KEY, RCLONE_CONFIG_IT_FORCE_PATH_STYLE="true",
               RCLONE_CONFIG_IT_REGION="us-east-1")
    env.pop("AWS_CA_BUNDLE", None)
    p = subprocess.run([rclone, "--retries", "1", "--low-level-retries", "1", "lsjson", "--s3-versions",
                        f"it:{vb}"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    assert p.returncode == 0, p.stderr.decode()
    listed = sorted((o["Path"], o["Size"]) for o in json.loads(p.stdout))
    # rclone names an old version "doc-v<time>.txt".
    assert len(listed) == 2, listed
    assert ("doc.txt", 6) in listed
    old = [x for x in listed if x[0] != "doc.txt"]
    assert old[0][0].startswith("doc-v") and old[0][0].endswith(".txt") and old[0][1] == 4
    # And it reads the old version back by that name.
    p = subprocess.run([rclone, "--s3-versions", "cat", f"it:{vb}/{old[0][0]}"], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    assert p.returncode == 0 and p.stdout == b"old!", p.stderr.decode()


def cli(vsrv, *args):
    env = dict(os.environ, AWS_ENDPOINT_URL=vsrv.endpoint, AWS_ACCESS_KEY_ID=objd.ACCESS_KEY,
               AWS_SECRET_ACCESS_KEY=objd.SECRET_KEY, AWS_REGION=objd.REGION, FI_TCP_IFACE="lo")
    env.pop("AWS_PROFILE", None)
    env.pop("AWS_CA_BUNDLE", None)
    exe = os.path.join(os.environ["OBJDIRECT_BIN_DIR"], "objdirect")
    p = subprocess.run([exe, "cp", "--json", "--fabric", "libfabric:tcp", *args], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    assert p.returncode == 0, p.stderr.decode()
    return json.loads(p.stdout.decode().strip().splitlines()[-1])


def test_rdma_put_and_get_on_versioned_object(vsrv, vs3, vb, tmp_path):
    bodies = [os.urandom((1 << 20) + 17), os.urandom(2 << 20)]
    for i, body in enumerate(bodies):
        src = tmp_path / f"in{i}"
        src.write_bytes(body)
        report = cli(vsrv, str(src), f"s3://{vb}/r.bin")
        assert report.get("path") == "rdma", report
    v = vs3.list_object_versions(Bucket=vb)["Versions"]
    assert [x["Size"] for x in v] == [len(bodies[1]), len(bodies[0])]
    # RDMA GET of the latest version; the older one is intact.
    out = tmp_path / "out"
    report = cli(vsrv, f"s3://{vb}/r.bin", str(out))
    assert report.get("path") == "rdma", report
    assert out.read_bytes() == bodies[1]
    assert vs3.get_object(Bucket=vb, Key="r.bin", VersionId=v[1]["VersionId"])["Body"].read() == bodies[0]
    # After a delete marker the RDMA GET fails as a plain GET does.
    vs3.delete_object(Bucket=vb, Key="r.bin")
    env = dict(os.environ, AWS_ENDPOINT_URL=vsrv.endpoint, AWS_ACCESS_KEY_ID=objd.ACCESS_KEY,
               AWS_SECRET_ACCESS_KEY=objd.SECRET_KEY, AWS_REGION=objd.REGION, FI_TCP_IFACE="lo")
    env.pop("AWS_CA_BUNDLE", None)
    exe = os.path.join(os.environ["OBJDIRECT_BIN_DIR"], "objdirect")
    p = subprocess.run([exe, "cp", "--fabric", "libfabric:tcp", f"s3://{vb}/r.bin", str(tmp_path / "gone")],
                       env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    assert p.returncode != 0
