"""Bucket CORS as AWS documents it: Put/Get/DeleteBucketCors (boto3, `aws s3api`), the rule
limits and error codes, preflight OPTIONS answered before authentication (200 with
Access-Control-* headers, 403 AccessForbidden when no rule allows, 400 without Origin or
Access-Control-Request-Method), and the Access-Control-* headers on actual requests from an
allowed Origin."""

import json
import os
import subprocess

import botocore.exceptions
import pytest

import objd

RULES = {
    "CORSRules": [
        {"ID": "web", "AllowedOrigins": ["https://*.example.com"], "AllowedMethods": ["GET", "PUT"],
         "AllowedHeaders": ["x-amz-*", "Content-Type"], "ExposeHeaders": ["ETag"], "MaxAgeSeconds": 3000},
        {"AllowedOrigins": ["*"], "AllowedMethods": ["HEAD"]},
    ]
}


def code_of(excinfo):
    return excinfo.value.response["Error"]["Code"]


def preflight(server, path, origin=None, method=None, headers=None):
    h = {}
    if origin is not None:
        h["Origin"] = origin
    if method is not None:
        h["Access-Control-Request-Method"] = method
    if headers is not None:
        h["Access-Control-Request-Headers"] = headers
    return objd.request(server, "OPTIONS", path, headers=h, sign=False)


def test_put_get_delete_bucket_cors(s3, bucket):
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.get_bucket_cors(Bucket=bucket)
    assert code_of(e) == "NoSuchCORSConfiguration"
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    s3.put_bucket_cors(Bucket=bucket, CORSConfiguration=RULES)
    got = s3.get_bucket_cors(Bucket=bucket)["CORSRules"]
    if objd.gateway_mode() and os.environ.get("OBJDIRECT_UPSTREAM_KIND") == "radosgw":
        # radosgw 16 keeps a rule's AllowedHeaders sorted; the gateway answers the upstream's
        # document (docs/scale-out.md, "What the gateway passes through").
        want = RULES["CORSRules"][0]["AllowedHeaders"]
        assert got[0]["AllowedHeaders"] == sorted(want)
        got[0]["AllowedHeaders"] = want
    assert got == RULES["CORSRules"]
    r = s3.delete_bucket_cors(Bucket=bucket)
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 204
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.get_bucket_cors(Bucket=bucket)
    assert code_of(e) == "NoSuchCORSConfiguration"


def test_bad_configurations(server, s3, bucket):
    bad = [
        ({"CORSRules": [{"AllowedOrigins": ["*"], "AllowedMethods": ["PATCH"]}]}, "InvalidRequest"),
        ({"CORSRules": [{"AllowedOrigins": ["*.a.*"], "AllowedMethods": ["GET"]}]}, "InvalidRequest"),
        ({"CORSRules": [{"AllowedOrigins": ["*"], "AllowedMethods": ["GET"], "ExposeHeaders": ["*"]}]},
         "InvalidRequest"),
        # limits::cors_rules_max + 1 rules
        ({"CORSRules": [{"AllowedOrigins": ["*"], "AllowedMethods": ["GET"]}] * 101}, "MalformedXML"),
    ]
    for cfg, code in bad:
        with pytest.raises(botocore.exceptions.ClientError) as e:
            s3.put_bucket_cors(Bucket=bucket, CORSConfiguration=cfg)
        assert code_of(e) == code, cfg
    s3.put_bucket_cors(Bucket=bucket, CORSConfiguration={
        "CORSRules": [{"AllowedOrigins": ["*"], "AllowedMethods": ["GET"]}] * 100})
    for body in (b"<CORSConfiguration/>", b"<CORSConfiguration><CORSRule><AllowedOrigin>*</AllowedOrigin>"
                 b"</CORSRule></CORSConfiguration>", b"not xml"):
        r = objd.request(server, "PUT", "/" + bucket, query={"cors": ""}, body=body)
        objd.assert_error(r, 400, "MalformedXML")
    assert len(s3.get_bucket_cors(Bucket=bucket)["CORSRules"]) == 100  # unchanged


def test_preflight(server, s3, bucket):
    path = objd.opath(bucket, "some/key")
    # No CORS configuration: 403 AccessForbidden.
    objd.assert_error(preflight(server, path, "https://app.example.com", "GET"), 403, "AccessForbidden")
    s3.put_bucket_cors(Bucket=bucket, CORSConfiguration=RULES)
    r = preflight(server, path, "https://app.example.com", "PUT", "x-amz-date, Content-Type")
    assert r.status == 200, r
    assert r.header("access-control-allow-origin") == "https://app.example.com"
    assert r.header("access-control-allow-methods") == "GET, PUT"
    assert r.header("access-control-allow-headers") == "x-amz-date, Content-Type"
    assert r.header("access-control-expose-headers") == "ETag"
    assert r.header("access-control-max-age") == "3000"
    assert r.header("access-control-allow-credentials") == "true"
    assert "Origin" in r.header("vary")
    assert r.body == b""
    # The wildcard rule answers "*".
    r = preflight(server, path, "https://anything.org", "HEAD")
    assert r.status == 200 and r.header("access-control-allow-origin") == "*", r
    # Not allowed: origin, method, header.
    for origin, method, hdrs in (("https://evil.org", "PUT", None), ("https://app.example.com", "DELETE", None),
                                 ("https://app.example.com", "PUT", "authorization")):
        objd.assert_error(preflight(server, path, origin, method, hdrs), 403, "AccessForbidden")
    # Missing pieces: 400.
    objd.assert_error(preflight(server, path, None, "GET"), 400, "BadRequest")
    objd.assert_error(preflight(server, path, "https://app.example.com", None), 400, "BadRequest")
    # A missing bucket reads as one without CORS.
    objd.assert_error(preflight(server, "/" + bucket + "-nope/k", "https://a.example.com", "GET"), 403,
                      "AccessForbidden")


def test_actual_request_headers(server, s3, bucket):
    s3.put_bucket_cors(Bucket=bucket, CORSConfiguration=RULES)
    s3.put_object(Bucket=bucket, Key="k", Body=b"v")
    r = objd.request(server, "GET", objd.opath(bucket, "k"), headers={"Origin": "https://app.example.com"})
    assert r.status == 200 and r.body == b"v", r
    assert r.header("access-control-allow-origin") == "https://app.example.com"
    assert r.header("access-control-expose-headers") == "ETag"
    # Errors carry them too (the browser can read the S3 error).
    r = objd.request(server, "GET", objd.opath(bucket, "absent"), headers={"Origin": "https://app.example.com"})
    assert r.status == 404 and r.header("access-control-allow-origin") == "https://app.example.com", r
    # No matching rule (DELETE is not allowed), or no Origin: no CORS headers.
    r = objd.request(server, "DELETE", objd.opath(bucket, "k"), headers={"Origin": "https://app.example.com"})
    assert r.status == 204 and r.header("access-control-allow-origin") is None, r
    r = objd.request(server, "GET", "/" + bucket, headers={"Origin": "https://evil.org"})
    assert r.status == 200 and r.header("access-control-allow-origin") is None, r


def test_aws_s3api_cors(server, bucket, tmp_path):
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

    def run(*args, check=True):
        p = subprocess.run(base + list(args), env=env, capture_output=True, text=True, timeout=60)
        if check:
            assert p.returncode == 0, (args, p.stdout, p.stderr)
        return p

    cfg = {"CORSRules": [{"AllowedOrigins": ["https://ui.example.com"], "AllowedMethods": ["GET"]}]}
    run("put-bucket-cors", "--bucket", bucket, "--cors-configuration", json.dumps(cfg))
    out = json.loads(run("get-bucket-cors", "--bucket", bucket).stdout)
    assert out["CORSRules"] == cfg["CORSRules"]
    run("delete-bucket-cors", "--bucket", bucket)
    p = run("get-bucket-cors", "--bucket", bucket, check=False)
    assert p.returncode != 0 and "NoSuchCORSConfiguration" in p.stderr, (p.stdout, p.stderr)
