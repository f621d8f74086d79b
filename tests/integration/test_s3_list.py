"""ListObjects v1 and v2, ListObjectVersions on an unversioned bucket: prefix, delimiter, max-keys,
continuation-token, start-after, marker, fetch-owner, encoding-type=url, ordering, odd keys."""

import hashlib
import urllib.parse

import pytest

import objd
from conftest import empty_and_delete, unique_bucket

NS = objd.S3_NS
KEYS = ["a/b", "a//b", "a/b/c", "a/c/d", "../x", " sp ace", "unicode \u00fc/\u65e5\u672c", "0", "1e3", "b",
        "z", "a%2Fb", "plus+sign", "q?uery&amp", "~tilde", "A-upper"]
SORTED = sorted(KEYS, key=lambda k: k.encode("utf-8"))


@pytest.fixture(scope="module")
def lb(server, s3):
    name = unique_bucket("list")
    s3.create_bucket(Bucket=name)
    for k in KEYS:
        r = objd.request(server, "PUT", objd.opath(name, k), body=k.encode())
        assert r.status == 200, (k, r)
    yield name
    empty_and_delete(s3, name)


def lst(server, bucket, **q):
    """Raw ListObjects (v2 unless v1=1): returns (root, keys, common prefixes)."""
    v1 = q.pop("v1", False)
    query = [] if v1 else [("list-type", "2")]
    query += [(k.replace("_", "-"), v) for k, v in q.items()]
    r = objd.request(server, "GET", "/" + bucket, query=query)
    assert r.status == 200, r
    root = r.xml()
    assert root.tag == NS + "ListBucketResult", root.tag
    keys = [c.find(NS + "Key").text or "" for c in root.findall(NS + "Contents")]
    prefixes = [c.find(NS + "Prefix").text or "" for c in root.findall(NS + "CommonPrefixes")]
    return root, keys, prefixes


def text(root, tag):
    e = root.find(NS + tag)
    return None if e is None else (e.text or "")


def test_v2_lists_everything_in_utf8_byte_order(server, lb):
    root, keys, prefixes = lst(server, lb)
    assert keys == SORTED
    assert prefixes == []
    assert text(root, "KeyCount") == str(len(KEYS))
    assert text(root, "IsTruncated") == "false"
    assert text(root, "Name") == lb
    assert text(root, "MaxKeys") == "1000"


def test_v2_contents_fields(server, lb):
    root, _, _ = lst(server, lb, prefix="0")
    c = root.find(NS + "Contents")
    assert c.find(NS + "Key").text == "0"
    assert c.find(NS + "Size").text == "1"
    assert c.find(NS + "ETag").text == f'"{hashlib.md5(b"0").hexdigest()}"'
    assert c.find(NS + "LastModified").text.endswith("Z")
    assert c.find(NS + "StorageClass").text == "STANDARD"
    assert c.find(NS + "Owner") is None  # v2 sends Owner only with fetch-owner=true


def test_v2_fetch_owner(server, lb):
    root, _, _ = lst(server, lb, prefix="0", fetch_owner="true")
    owner = root.find(NS + "Contents").find(NS + "Owner")
    assert owner is not None and owner.find(NS + "ID").text


def test_v1_lists_everything_with_owner(server, lb):
    root, keys, _ = lst(server, lb, v1=True)
    assert keys == SORTED
    assert text(root, "IsTruncated") == "false"
    assert text(root, "Marker") == ""
    assert root.find(NS + "Contents").find(NS + "Owner") is not None


def test_numeric_and_dot_keys_stay_strings(server, lb):
    for k in ("0", "1e3", "../x", "a//b", " sp ace"):
        r = objd.request(server, "GET", objd.opath(lb, k))
        assert r.status == 200 and r.body == k.encode(), (k, r)


@pytest.mark.parametrize("v1", [False, True])
def test_prefix(server, lb, v1):
    _, keys, _ = lst(server, lb, v1=v1, prefix="a/")
    assert keys == [k for k in SORTED if k.startswith("a/")]
    _, keys, _ = lst(server, lb, v1=v1, prefix="unicode \u00fc/")
    assert keys == ["unicode \u00fc/\u65e5\u672c"]
    _, keys, _ = lst(server, lb, v1=v1, prefix="nothing-here")
    assert keys == []


@pytest.mark.parametrize("v1", [False, True])
def test_delimiter_top_level(server, lb, v1):
    root, keys, prefixes = lst(server, lb, v1=v1, delimiter="/")
    assert keys == [k for k in SORTED if "/" not in k]
    assert prefixes == sorted({k.split("/")[0] + "/" for k in KEYS if "/" in k}, key=lambda p: p.encode())
    assert text(root, "Delimiter") == "/"
    if not v1:
        assert text(root, "KeyCount") == str(len(keys) + len(prefixes))


def test_delimiter_with_prefix(server, lb):
    _, keys, prefixes = lst(server, lb, prefix="a/", delimiter="/")
    assert keys == ["a/b"]
    assert prefixes == ["a//", "a/b/", "a/c/"]


def test_v2_pagination_continuation_token(server, lb):
    got, token, pages = [], None, 0
    while True:
        q = {"max_keys": "3"}
        if token:
            q["continuation_token"] = token
        root, keys, _ = lst(server, lb, **q)
        pages += 1
        assert len(keys) <= 3
        got += keys
        if text(root, "IsTruncated") == "true":
            token = text(root, "NextContinuationToken")
            assert token
        else:
            assert text(root, "NextContinuationToken") in (None, "")
            break
        assert pages < 20
    assert got == SORTED
    assert pages == (len(KEYS) + 2) // 3


def test_v2_pagination_with_delimiter_counts_prefixes(server, lb):
    seen, token = [], None
    for _ in range(20):
        q = {"max_keys": "2", "delimiter": "/"}
        if token:
            q["continuation_token"] = token
        root, keys, prefixes = lst(server, lb, **q)
        assert len(keys) + len(prefixes) <= 2
        seen += sorted(keys + prefixes, key=lambda x: x.encode())  # one page: two sorted lists
        if text(root, "IsTruncated") != "true":
            break
        token = text(root, "NextContinuationToken")
    want = sorted({k if "/" not in k else k.split("/")[0] + "/" for k in KEYS}, key=lambda x: x.encode())
    assert seen == want


def test_v2_start_after(server, lb):
    _, keys, _ = lst(server, lb, start_after="a/b")
    assert keys == [k for k in SORTED if k.encode() > b"a/b"]
    root, keys, _ = lst(server, lb, start_after="zzz")
    assert keys == ["~tilde"]  # '~' sorts after 'z'
    assert text(root, "StartAfter") == "zzz"
    _, keys, _ = lst(server, lb, start_after="~~")
    assert keys == []


def test_v1_marker_pagination(server, lb):
    got, marker = [], ""
    for _ in range(20):
        q = {"v1": True, "max_keys": "4"}
        if marker:
            q["marker"] = marker
        root, keys, _ = lst(server, lb, **q)
        got += keys
        if text(root, "IsTruncated") != "true":
            break
        # without a delimiter S3 omits NextMarker; the client continues from the last key
        marker = text(root, "NextMarker") or keys[-1]
    assert got == SORTED


def test_v1_next_marker_with_delimiter(server, lb):
    root, keys, prefixes = lst(server, lb, v1=True, delimiter="/", max_keys="2")
    assert text(root, "IsTruncated") == "true"
    nm = text(root, "NextMarker")
    assert nm == (keys + prefixes)[-1] or nm == sorted(keys + prefixes, key=lambda x: x.encode())[-1], (nm, keys,
                                                                                                          prefixes)


def test_encoding_type_url(server, lb):
    root, keys, _ = lst(server, lb, encoding_type="url")
    assert text(root, "EncodingType") == "url"
    decoded = [urllib.parse.unquote_plus(k) for k in keys]
    assert decoded == SORTED
    for k in keys:  # nothing left that needs encoding
        assert " " not in k and all(ord(ch) < 128 for ch in k), k
    assert "plus%2Bsign" in keys
    root, _, prefixes = lst(server, lb, encoding_type="url", delimiter="/", prefix="unicode \u00fc/")
    assert text(root, "Prefix") == urllib.parse.quote("unicode \u00fc/", safe="/") or \
        urllib.parse.unquote_plus(text(root, "Prefix")) == "unicode \u00fc/"


def test_encoding_type_url_v1_echoes_prefix_unencoded(server, lb):
    # AWS ListObjects (v1) with encoding-type=url returns <Prefix> as sent; ListObjectsV2 and
    # ListObjectVersions percent-encode it (recorded against real S3).
    p = "unicode \u00fc/"
    root, _, prefixes = lst(server, lb, v1=True, encoding_type="url", delimiter="/", prefix=p)
    assert text(root, "EncodingType") == "url"
    assert text(root, "Prefix") == p
    root, _, _ = lst(server, lb, encoding_type="url", delimiter="/", prefix=p)
    assert text(root, "Prefix") != p
    assert urllib.parse.unquote(text(root, "Prefix")) == p
    r = objd.request(server, "GET", "/" + lb, query=[("versions", ""), ("encoding-type", "url"),
                                                      ("prefix", p)])
    assert r.status == 200, r
    v = r.xml().find(NS + "Prefix").text
    assert v != p and urllib.parse.unquote(v) == p, v


def test_boto3_paginators_v1_v2(s3, lb):
    for op in ("list_objects", "list_objects_v2"):
        keys = []
        for page in s3.get_paginator(op).paginate(Bucket=lb, PaginationConfig={"PageSize": 5}):
            keys += [o["Key"] for o in page.get("Contents", [])]
        assert keys == SORTED, op


def test_list_empty_bucket(server, bucket):
    root, keys, prefixes = lst(server, bucket)
    assert keys == [] and prefixes == []
    assert text(root, "KeyCount") == "0"
    assert text(root, "IsTruncated") == "false"


def test_invalid_max_keys(server, lb):
    r = objd.request(server, "GET", "/" + lb, query=[("list-type", "2"), ("max-keys", "-1")])
    objd.assert_error(r, 400, "InvalidArgument")


def test_invalid_continuation_token(server, lb):
    r = objd.request(server, "GET", "/" + lb, query=[("list-type", "2"), ("continuation-token", "!!not-a-token!!")])
    objd.assert_error(r, 400, "InvalidArgument")


def test_list_object_versions_unversioned(server, s3, lb):
    r = objd.request(server, "GET", "/" + lb, query=[("versions", None)])
    assert r.status == 200, r
    root = r.xml()
    assert root.tag == NS + "ListVersionsResult", root.tag
    versions = root.findall(NS + "Version")
    assert [v.find(NS + "Key").text for v in versions] == SORTED
    for v in versions:
        assert v.find(NS + "VersionId").text == "null"
        assert v.find(NS + "IsLatest").text == "true"
    assert root.findall(NS + "DeleteMarker") == []
    # and through boto3, with a prefix
    r = s3.list_object_versions(Bucket=lb, Prefix="a/")
    assert [v["Key"] for v in r["Versions"]] == [k for k in SORTED if k.startswith("a/")]
    assert {v["VersionId"] for v in r["Versions"]} == {"null"}


def test_get_bucket_versioning_unversioned(s3, lb):
    r = s3.get_bucket_versioning(Bucket=lb)
    assert r.get("Status") in (None, "")
