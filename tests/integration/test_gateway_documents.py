"""The gateway's bucket documents (docs/scale-out.md, "What the gateway passes through" and
"Bucket owners and policies"), against the real gateway binary in front of a real upstream:

- lifecycle passed through: Put/Get/Delete (boto3 and `aws s3api`), NoSuchLifecycleConfiguration,
  the rules stored at the upstream and executed there (an ObjDirect upstream with a shortened
  day), never by the gateway's own worker;
- CORS stored upstream and applied by the gateway: preflights allowed and refused, the document
  cache (N preflights cost one upstream read), a Put/Delete through the gateway seen at once, a
  change made directly at the upstream seen within the TTL;
- bucket owners and policies in the state bucket: the state bucket invisible to the gateway's
  clients, each bucket's owner kept there (another user's CreateBucket refused, ListBuckets per
  owner, a cold ListBuckets reading the owners with one listing), the policy an object there and
  not the upstream's bucket policy, and NotImplemented naming --gateway-state-bucket without one. (Cross-user sharing over HTTP and RDMA and explicit
  Deny: test_s3_policy.py, which the gateway*.integration_s3_policy entries run through the
  gateway.)

Starts its own ObjDirect upstream, or uses the radosgw / moto one scripts/with-upstream.sh
started (OBJDIRECT_UPSTREAM_KIND); the expiry check needs an ObjDirect upstream's test hook.
"""

import json
import os
import re
import subprocess
import time
import urllib.request

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

import objd

ALICE = ("alice-key", "alice-secret-0123456789")
BOB = ("bob-key", "bob-secret-0123456789")
TTL_MS = 1500
KIND = os.environ.get("OBJDIRECT_UPSTREAM_KIND", "objdirect")
EXTERNAL = KIND != "objdirect" and bool(os.environ.get("OBJDIRECT_UPSTREAM_URL"))
STATE = f"gw-state-{os.getpid()}"


class Upstream:
    def __init__(self, endpoint, ak, sk, srv=None):
        self.endpoint, self.ak, self.sk, self.srv = endpoint, ak, sk, srv


def client(endpoint, user):
    cfg = Config(signature_version="s3v4", s3={"addressing_style": "path"},
                 retries={"total_max_attempts": 1}, connect_timeout=10, read_timeout=60)
    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=user[0],
                        aws_secret_access_key=user[1], region_name=objd.REGION, config=cfg)


def start_gateway(root, upstream, name, extra):
    creds = root / f"{name}.credentials"
    creds.write_text("".join(f"{k} {s}\n" for k, s in (ALICE, BOB)))
    gw = objd.Server(str(root / name), str(root / f"{name}.log"),
                     extra_args=["--backend", "s3", "--upstream", upstream.endpoint, "--fabric", "none",
                                 "--credentials", str(creds)] + extra,
                     env={"AWS_ACCESS_KEY_ID": upstream.ak, "AWS_SECRET_ACCESS_KEY": upstream.sk})
    gw.start()
    return gw


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    root = tmp_path_factory.mktemp("gwdocs")
    if EXTERNAL:
        up = Upstream(os.environ["OBJDIRECT_UPSTREAM_URL"], os.environ["AWS_ACCESS_KEY_ID"],
                      os.environ["AWS_SECRET_ACCESS_KEY"])
    else:
        # The upstream executes lifecycle rules with a one-second day, a pass every 200 ms.
        srv = objd.Server(str(root / "up"), str(root / "up.log"),
                          extra_args=["--fabric", "none", "--lifecycle-day-seconds", "1",
                                      "--lifecycle-interval-ms", "200"])
        srv.start()
        up = Upstream(srv.endpoint, objd.ACCESS_KEY, objd.SECRET_KEY, srv)
    # The gateway's own worker runs as often: it must leave gateway buckets to the upstream.
    gw = start_gateway(root, up, "gw", ["--gateway-state-bucket", STATE,
                                        "--gateway-document-cache-ttl-ms", str(TTL_MS),
                                        "--lifecycle-day-seconds", "1", "--lifecycle-interval-ms", "200"])
    yield {"up": up, "gw": gw, "root": root}
    crashed = not gw.alive()
    rc = gw.stop()
    if up.srv:
        assert up.srv.alive(), up.srv.log_tail()
        assert up.srv.stop() == 0
    assert not crashed and rc == 0, f"gateway rc={rc}; log:\n{gw.log_tail()}"


_n = [0]


@pytest.fixture
def bucket(env):
    _n[0] += 1
    name = f"gwd-{os.getpid()}-{_n[0]}"
    alice = client(env["gw"].endpoint, ALICE)
    alice.create_bucket(Bucket=name)
    yield name
    try:
        for o in alice.list_objects_v2(Bucket=name).get("Contents", []):
            alice.delete_object(Bucket=name, Key=o["Key"])
        alice.delete_bucket(Bucket=name)
    except ClientError:
        pass


def upstream_client(env):
    up = env["up"]
    return client(up.endpoint, (up.ak, up.sk))


def code(e):
    return e.value.response["Error"]["Code"]


def metric(srv, name):
    with urllib.request.urlopen(srv.endpoint + "/metrics", timeout=15) as r:
        m = re.search(rf"^{name} ([0-9.e+]+)$", r.read().decode(), re.M)
    assert m, f"{name} not in /metrics"
    return float(m.group(1))


def wait_for(pred, timeout_s):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.2)
    return pred()


def aws(env, *args):
    e = dict(os.environ, AWS_ACCESS_KEY_ID=ALICE[0], AWS_SECRET_ACCESS_KEY=ALICE[1],
             AWS_DEFAULT_REGION=objd.REGION, AWS_EC2_METADATA_DISABLED="true")
    e.pop("AWS_PROFILE", None)
    p = subprocess.run(["aws", "--endpoint-url", env["gw"].endpoint] + list(args),
                       capture_output=True, text=True, env=e, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout


RULES = {"Rules": [{"ID": "old", "Status": "Enabled", "Filter": {"Prefix": "old/"},
                    "Expiration": {"Days": 1}}]}


# --- lifecycle ----------------------------------------------------------------------------------

def test_lifecycle_passed_through_and_executed_by_the_upstream(env, bucket):
    alice = client(env["gw"].endpoint, ALICE)
    with pytest.raises(ClientError) as e:
        alice.get_bucket_lifecycle_configuration(Bucket=bucket)
    assert code(e) == "NoSuchLifecycleConfiguration"
    # The S3 layer validates before the call: nothing reaches the upstream.
    with pytest.raises(ClientError) as e:
        alice.put_bucket_lifecycle_configuration(
            Bucket=bucket, LifecycleConfiguration={"Rules": [dict(RULES["Rules"][0], Status="Maybe")]})
    assert code(e) == "MalformedXML"
    body = (b"<LifecycleConfiguration><Rule><ID>r</ID><Filter><Prefix></Prefix></Filter>"
            b"<Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule></LifecycleConfiguration>")
    r = objd.request(env["gw"], "PUT", f"/{bucket}", query={"lifecycle": ""}, body=body,
                     headers={"Content-MD5": "1B2M2Y8AsgTpgAmY7PhCfg=="}, access_key=ALICE[0], secret_key=ALICE[1])
    objd.assert_error(r, 400, "BadDigest")
    with pytest.raises(ClientError) as e:
        upstream_client(env).get_bucket_lifecycle_configuration(Bucket=bucket)
    assert code(e) == "NoSuchLifecycleConfiguration"
    alice.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration=RULES)
    got = alice.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
    assert [(r["ID"], r["Filter"]["Prefix"], r["Expiration"]["Days"]) for r in got] == [("old", "old/", 1)]
    # Kept by the upstream, as its own configuration.
    at_upstream = upstream_client(env).get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
    assert [r["ID"] for r in at_upstream] == ["old"]
    if not EXTERNAL:
        alice.put_object(Bucket=bucket, Key="old/a", Body=b"a")
        alice.put_object(Bucket=bucket, Key="keep/b", Body=b"b")
        upstream_expired = metric(env["up"].srv, "objdirect_lifecycle_objects_expired_total")
        assert wait_for(lambda: "Contents" not in alice.list_objects_v2(Bucket=bucket, Prefix="old/"), 20)
        assert [o["Key"] for o in alice.list_objects_v2(Bucket=bucket)["Contents"]] == ["keep/b"]
        # Counted just after the delete is visible: wait for the count too.
        assert wait_for(lambda: metric(env["up"].srv, "objdirect_lifecycle_objects_expired_total")
                        >= upstream_expired + 1, 5)
        # The gateway's worker (as fast, with the same short day) ran and never acted on it.
        assert metric(env["gw"], "objdirect_lifecycle_passes_total") > 0
        assert metric(env["gw"], "objdirect_lifecycle_objects_expired_total") == 0
    alice.delete_bucket_lifecycle(Bucket=bucket)
    with pytest.raises(ClientError) as e:
        alice.get_bucket_lifecycle_configuration(Bucket=bucket)
    assert code(e) == "NoSuchLifecycleConfiguration"
    with pytest.raises(ClientError) as e:
        upstream_client(env).get_bucket_lifecycle_configuration(Bucket=bucket)
    assert code(e) == "NoSuchLifecycleConfiguration"


def test_aws_s3api_lifecycle_cors_and_policy_through_the_gateway(env, bucket, tmp_path):
    lc = tmp_path / "lc.json"
    lc.write_text(json.dumps(RULES))
    aws(env, "s3api", "put-bucket-lifecycle-configuration", "--bucket", bucket,
        "--lifecycle-configuration", f"file://{lc}")
    assert json.loads(aws(env, "s3api", "get-bucket-lifecycle-configuration", "--bucket", bucket))["Rules"][0]["ID"] == "old"
    cors = tmp_path / "cors.json"
    cors.write_text(json.dumps({"CORSRules": [{"AllowedOrigins": ["https://app.example"],
                                               "AllowedMethods": ["GET"]}]}))
    aws(env, "s3api", "put-bucket-cors", "--bucket", bucket, "--cors-configuration", f"file://{cors}")
    got = json.loads(aws(env, "s3api", "get-bucket-cors", "--bucket", bucket))["CORSRules"]
    assert got[0]["AllowedOrigins"] == ["https://app.example"]
    policy = {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"AWS": [BOB[0]]}, "Action": "s3:GetObject",
         "Resource": f"arn:aws:s3:::{bucket}/*"}]}
    aws(env, "s3api", "put-bucket-policy", "--bucket", bucket, "--policy", json.dumps(policy))
    assert json.loads(json.loads(aws(env, "s3api", "get-bucket-policy", "--bucket", bucket))["Policy"]) == policy
    for sub in ("lifecycle", "cors", "policy"):
        aws(env, "s3api", f"delete-bucket-{sub}", "--bucket", bucket)


# --- CORS ---------------------------------------------------------------------------------------

CORS = {"CORSRules": [{"AllowedOrigins": ["https://app.example"], "AllowedMethods": ["GET", "PUT"],
                       "AllowedHeaders": ["*"], "MaxAgeSeconds": 300}]}


def preflight(srv, bucket, origin, method="GET"):
    return objd.request(srv, "OPTIONS", objd.opath(bucket, "k"), sign=False,
                        headers={"Origin": origin, "Access-Control-Request-Method": method})


def test_cors_stored_upstream_applied_by_the_gateway(env, bucket):
    gw = env["gw"]
    alice = client(gw.endpoint, ALICE)
    objd.assert_error(preflight(gw, bucket, "https://app.example"), 403, "AccessForbidden")
    alice.put_bucket_cors(Bucket=bucket, CORSConfiguration=CORS)
    # Kept by the upstream; the gateway's Put invalidated its cache at once.
    assert upstream_client(env).get_bucket_cors(Bucket=bucket)["CORSRules"][0]["AllowedOrigins"] == ["https://app.example"]
    r = preflight(gw, bucket, "https://app.example", "PUT")
    assert r.status == 200, r
    assert r.header("Access-Control-Allow-Origin") == "https://app.example"
    assert "PUT" in r.header("Access-Control-Allow-Methods")
    objd.assert_error(preflight(gw, bucket, "https://evil.example"), 403, "AccessForbidden")
    objd.assert_error(preflight(gw, bucket, "https://app.example", "DELETE"), 403, "AccessForbidden")
    # An actual request from the allowed origin carries the headers.
    alice.put_object(Bucket=bucket, Key="k", Body=b"x")
    g = objd.request(gw, "GET", objd.opath(bucket, "k"), headers={"Origin": "https://app.example"},
                     access_key=ALICE[0], secret_key=ALICE[1])
    assert g.status == 200 and g.header("Access-Control-Allow-Origin") == "https://app.example", g
    # The cache: twenty preflights cost at most one upstream request (a TTL expiry).
    before = metric(gw, "objdirect_upstream_requests_total")
    hits = metric(gw, "objdirect_upstream_document_cache_hits_total")
    for _ in range(20):
        assert preflight(gw, bucket, "https://app.example").status == 200
    assert metric(gw, "objdirect_upstream_requests_total") - before <= 1
    assert metric(gw, "objdirect_upstream_document_cache_hits_total") - hits >= 19
    # Deleted through the gateway: refused at once.
    alice.delete_bucket_cors(Bucket=bucket)
    objd.assert_error(preflight(gw, bucket, "https://app.example"), 403, "AccessForbidden")
    with pytest.raises(ClientError) as e:
        alice.get_bucket_cors(Bucket=bucket)
    assert code(e) == "NoSuchCORSConfiguration"


def test_cors_changed_at_the_upstream_is_seen_within_the_ttl(env, bucket):
    gw = env["gw"]
    alice = client(gw.endpoint, ALICE)
    alice.put_bucket_cors(Bucket=bucket, CORSConfiguration=CORS)
    assert preflight(gw, bucket, "https://app.example").status == 200  # cached now
    changed = {"CORSRules": [dict(CORS["CORSRules"][0], AllowedOrigins=["https://other.example"])]}
    upstream_client(env).put_bucket_cors(Bucket=bucket, CORSConfiguration=changed)
    t0 = time.monotonic()
    assert wait_for(lambda: preflight(gw, bucket, "https://other.example").status == 200, TTL_MS / 1000 + 2)
    assert time.monotonic() - t0 <= TTL_MS / 1000 + 2
    objd.assert_error(preflight(gw, bucket, "https://app.example"), 403, "AccessForbidden")
    alice.delete_bucket_cors(Bucket=bucket)


def test_document_cache_bound(env, bucket):
    """A gateway caching one document: a second bucket's preflight evicts the first's rules."""
    gw = start_gateway(env["root"], env["up"], "gw1", ["--gateway-document-cache-entries", "1",
                                                        "--gateway-document-cache-ttl-ms", "60000",
                                                             "--lifecycle-interval-ms", "0"])
    try:
        alice = client(gw.endpoint, ALICE)
        other = bucket + "-b"
        alice.create_bucket(Bucket=other)
        for b in (bucket, other):
            alice.put_bucket_cors(Bucket=b, CORSConfiguration=CORS)
        reads = lambda: metric(gw, "objdirect_upstream_document_reads_total")  # noqa: E731
        r0 = reads()
        assert preflight(gw, bucket, "https://app.example").status == 200
        assert preflight(gw, bucket, "https://app.example").status == 200
        assert reads() == r0 + 1  # the second one was a hit
        assert preflight(gw, other, "https://app.example").status == 200
        assert preflight(gw, bucket, "https://app.example").status == 200
        assert reads() == r0 + 3  # evicted by the other bucket's rules: read again
        for b in (bucket, other):
            alice.delete_bucket_cors(Bucket=b)
        alice.delete_bucket(Bucket=other)
    finally:
        assert gw.stop() == 0


# --- owners, policies and the state bucket ------------------------------------------------------

def test_state_bucket_is_invisible(env, bucket):
    gw = env["gw"]
    alice = client(gw.endpoint, ALICE)
    assert STATE not in [b["Name"] for b in alice.list_buckets()["Buckets"]]
    with pytest.raises(ClientError) as e:
        alice.head_bucket(Bucket=STATE)
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    for fn in (lambda: alice.list_objects_v2(Bucket=STATE),
               lambda: alice.get_object(Bucket=STATE, Key=f"buckets/{bucket}/owner"),
               lambda: alice.put_object(Bucket=STATE, Key=f"buckets/{bucket}/owner", Body=b"mallory"),
               lambda: alice.delete_object(Bucket=STATE, Key=f"buckets/{bucket}/owner"),
               lambda: alice.copy_object(Bucket=bucket, Key="c", CopySource={"Bucket": STATE, "Key": f"buckets/{bucket}/owner"}),
               lambda: alice.delete_bucket(Bucket=STATE)):
        with pytest.raises(ClientError) as e:
            fn()
        assert code(e) == "NoSuchBucket", e.value.response
    with pytest.raises(ClientError) as e:
        alice.create_bucket(Bucket=STATE)
    assert code(e) == "BucketAlreadyExists"
    # At the upstream it is an ordinary bucket holding the owner record.
    up = upstream_client(env)
    assert up.get_object(Bucket=STATE, Key=f"buckets/{bucket}/owner")["Body"].read() == ALICE[0].encode()


def test_owners_are_kept_in_the_state_bucket(env, bucket):
    gw = env["gw"]
    alice, bob = client(gw.endpoint, ALICE), client(gw.endpoint, BOB)
    with pytest.raises(ClientError) as e:
        bob.create_bucket(Bucket=bucket)
    assert code(e) == "BucketAlreadyExists"
    names = lambda c: [b["Name"] for b in c.list_buckets()["Buckets"]]  # noqa: E731
    assert bucket in names(alice) and bucket not in names(bob)
    with pytest.raises(ClientError) as e:
        bob.list_objects_v2(Bucket=bucket)
    assert code(e) == "AccessDenied"
    with pytest.raises(ClientError) as e:
        bob.put_object(Bucket=bucket, Key="x", Body=b"x")
    assert code(e) == "AccessDenied"


def test_cold_list_buckets_reads_owners_from_one_listing(env):
    """A gateway with a cold cache answers ListBuckets of 30 buckets with the upstream's ListBuckets
    and one LIST page of the state bucket per 1,000 of its keys (about 330 buckets), not one owner
    record GET per bucket; each user sees their own."""
    alice, bob = client(env["gw"].endpoint, ALICE), client(env["gw"].endpoint, BOB)
    names = [f"gwd-{os.getpid()}-own{i:02d}" for i in range(30)]
    for i, n in enumerate(names):
        (alice if i % 2 else bob).create_bucket(Bucket=n)
    try:
        gw = start_gateway(env["root"], env["up"], "gwcold", ["--gateway-state-bucket", STATE,
                                                             "--gateway-document-cache-ttl-ms", "60000",
                                                             "--lifecycle-interval-ms", "0"])
        try:
            pages = upstream_client(env).get_paginator("list_objects_v2").paginate(
                Bucket=STATE, Prefix="buckets/", PaginationConfig={"PageSize": 1000})
            state_keys = sum(p.get("KeyCount", 0) for p in pages)
            before = metric(gw, "objdirect_upstream_requests_total")
            reads = metric(gw, "objdirect_upstream_document_reads_total")
            listed = [b["Name"] for b in client(gw.endpoint, ALICE).list_buckets()["Buckets"]]
            cost = metric(gw, "objdirect_upstream_requests_total") - before
            assert [n for n in listed if n in names] == names[1::2]
            assert cost <= 1 + max(1, -(-state_keys // 1000)), (cost, state_keys)
            assert metric(gw, "objdirect_upstream_document_reads_total") == reads
            # Bob's view, from the cache the listing filled: the upstream's ListBuckets alone.
            before = metric(gw, "objdirect_upstream_requests_total")
            listed = [b["Name"] for b in client(gw.endpoint, BOB).list_buckets()["Buckets"]]
            assert [n for n in listed if n in names] == names[0::2]
            assert metric(gw, "objdirect_upstream_requests_total") - before == 1
        finally:
            assert gw.stop() == 0
    finally:
        for i, n in enumerate(names):
            (alice if i % 2 else bob).delete_bucket(Bucket=n)


def test_policy_is_a_state_object_not_the_upstreams_policy(env, bucket):
    gw = env["gw"]
    alice, bob = client(gw.endpoint, ALICE), client(gw.endpoint, BOB)
    alice.put_object(Bucket=bucket, Key="data/a", Body=b"shared")
    with pytest.raises(ClientError) as e:
        bob.get_object(Bucket=bucket, Key="data/a")
    assert code(e) == "AccessDenied"
    policy = json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"AWS": [BOB[0]]}, "Action": "s3:GetObject",
         "Resource": f"arn:aws:s3:::{bucket}/*"}]})
    alice.put_bucket_policy(Bucket=bucket, Policy=policy)
    # Written through this gateway: in force at once.
    assert bob.get_object(Bucket=bucket, Key="data/a")["Body"].read() == b"shared"
    up = upstream_client(env)
    assert up.get_object(Bucket=STATE, Key=f"buckets/{bucket}/policy")["Body"].read() == policy.encode()
    with pytest.raises(ClientError) as e:
        up.get_bucket_policy(Bucket=bucket)
    assert code(e) in ("NoSuchBucketPolicy", "NotImplemented")  # never handed to the upstream
    alice.delete_bucket_policy(Bucket=bucket)
    with pytest.raises(ClientError) as e:
        bob.get_object(Bucket=bucket, Key="data/a")
    assert code(e) == "AccessDenied"
    with pytest.raises(ClientError) as e:
        up.head_object(Bucket=STATE, Key=f"buckets/{bucket}/policy")
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404


def test_deleted_bucket_leaves_no_state(env):
    gw = env["gw"]
    alice, bob = client(gw.endpoint, ALICE), client(gw.endpoint, BOB)
    name = f"gwd-{os.getpid()}-gone"
    alice.create_bucket(Bucket=name)
    alice.put_bucket_policy(Bucket=name, Policy=json.dumps({"Statement": [
        {"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{name}/*"}]}))
    alice.delete_bucket(Bucket=name)
    up = upstream_client(env)
    left = up.list_objects_v2(Bucket=STATE, Prefix=f"buckets/{name}/").get("Contents", [])
    assert left == []
    bob.create_bucket(Bucket=name)  # the name is free again, and no old policy comes back
    with pytest.raises(ClientError) as e:
        bob.get_bucket_policy(Bucket=name)
    assert code(e) == "NoSuchBucketPolicy"
    bob.delete_bucket(Bucket=name)


def test_policy_without_state_bucket_is_not_implemented(env, bucket):
    gw = start_gateway(env["root"], env["up"], "gw0", [])
    try:
        policy = json.dumps({"Statement": [{"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
                                            "Resource": f"arn:aws:s3:::{bucket}/*"}]}).encode()
        r = objd.request(gw, "PUT", f"/{bucket}", query={"policy": ""}, body=policy)
        objd.assert_error(r, 501, "NotImplemented")
        assert b"--gateway-state-bucket" in r.body, r.body
        # Reading one is not an error: without the state bucket no bucket has a policy.
        objd.assert_error(objd.request(gw, "GET", f"/{bucket}", query={"policy": ""}), 404, "NoSuchBucketPolicy")
    finally:
        assert gw.stop() == 0


def test_records_left_by_a_crash(env):
    """What a gateway killed between the owner record and the upstream CreateBucket (or between
    the upstream DeleteBucket and the records' removal) leaves: records without a bucket. The
    name stays its owner's; the owner's CreateBucket completes it, without the old policy."""
    gw = env["gw"]
    alice, bob = client(gw.endpoint, ALICE), client(gw.endpoint, BOB)
    name = f"gwd-{os.getpid()}-crash"
    up = upstream_client(env)
    up.put_object(Bucket=STATE, Key=f"buckets/{name}/owner", Body=ALICE[0].encode())
    up.put_object(Bucket=STATE, Key=f"buckets/{name}/policy", Body=json.dumps({"Statement": [
        {"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{name}/*"}]}).encode())
    assert name not in [b["Name"] for b in alice.list_buckets()["Buckets"]]
    with pytest.raises(ClientError) as e:
        bob.create_bucket(Bucket=name)
    assert code(e) == "BucketAlreadyExists"
    alice.create_bucket(Bucket=name)
    assert name in [b["Name"] for b in alice.list_buckets()["Buckets"]]
    with pytest.raises(ClientError) as e:
        alice.get_bucket_policy(Bucket=name)
    assert code(e) == "NoSuchBucketPolicy"
    alice.put_object(Bucket=name, Key="k", Body=b"x")
    with pytest.raises(ClientError) as e:
        bob.get_object(Bucket=name, Key="k")
    assert code(e) == "AccessDenied"
    alice.delete_object(Bucket=name, Key="k")
    alice.delete_bucket(Bucket=name)
