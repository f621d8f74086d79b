"""Bucket policies as AWS documents them, on a server with several users (--credentials):
Put/Get/DeleteBucketPolicy (boto3, `aws s3api`), MalformedPolicy, cross-user read sharing over
HTTP (boto3) and RDMA (the objdirect CLI, libfabric tcp on loopback), explicit deny winning over
the owner, anonymous reads only where a policy allows them, the aws:SourceIp and s3:prefix
conditions, and the ACL calls answered as AWS answers them under BucketOwnerEnforced."""

import json
import os
import subprocess

import boto3
import pytest
from botocore import UNSIGNED
from botocore.config import Config
from botocore.exceptions import ClientError

import objd

ALICE = ("alice-key", "alice-secret-0123456789")
BOB = ("bob-key", "bob-secret-0123456789")
CAROL = ("carol-key", "carol-secret-0123456789")


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    root = tmp_path_factory.mktemp("policy")
    creds = root / "credentials"
    creds.write_text("".join(f"{k} {s}\n" for k, s in (ALICE, BOB, CAROL)))
    old = os.environ.get("FI_TCP_IFACE")
    os.environ["FI_TCP_IFACE"] = "lo"
    # OBJDIRECT_SERVER_ARGS: the backend of the entry (scripts/with-ceph.sh for the RADOS one).
    s = objd.Server(str(root / "data"), str(root / "server.log"),
                    extra_args=os.environ.get("OBJDIRECT_SERVER_ARGS", "").split() +
                    ["--credentials", str(creds), "--fabric", "libfabric:tcp"])
    s.start()
    yield s
    crashed = not s.alive()
    rc = s.stop()
    if old is None:
        os.environ.pop("FI_TCP_IFACE", None)
    assert not crashed and rc == 0, f"server rc={rc}; log:\n{s.log_tail()}"


def client(s, user):
    cfg = Config(signature_version=UNSIGNED if user is None else "s3v4", s3={"addressing_style": "path"},
                 retries={"total_max_attempts": 1})
    kw = {} if user is None else {"aws_access_key_id": user[0], "aws_secret_access_key": user[1]}
    return boto3.client("s3", endpoint_url=s.endpoint, region_name=objd.REGION, config=cfg, **kw)


def code(exc):
    return exc.value.response["Error"]["Code"]


def denied(fn):
    with pytest.raises(ClientError) as e:
        fn()
    assert code(e) == "AccessDenied", e.value.response
    return e


_n = [0]


@pytest.fixture
def shared(srv):
    """A bucket of alice's with two objects; its policy is removed afterwards."""
    _n[0] += 1
    name = f"shared-{os.getpid()}-{_n[0]}"
    alice = client(srv, ALICE)
    alice.create_bucket(Bucket=name)
    alice.put_object(Bucket=name, Key="data/a.bin", Body=b"A" * 1000)
    alice.put_object(Bucket=name, Key="secret/s.txt", Body=b"S")
    yield name
    try:
        alice.delete_bucket_policy(Bucket=name)
        for k in ("data/a.bin", "secret/s.txt", "data/rdma.bin", "public/p.txt"):
            alice.delete_object(Bucket=name, Key=k)
        alice.delete_bucket(Bucket=name)
    except ClientError:
        pass


def read_policy(bucket, principal):
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "Share", "Effect": "Allow", "Principal": {"AWS": [principal]},
         "Action": ["s3:GetObject", "s3:ListBucket"],
         "Resource": [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"]},
        {"Sid": "NoSecrets", "Effect": "Deny", "Principal": "*", "Action": "s3:*",
         "Resource": f"arn:aws:s3:::{bucket}/secret/*"}]}


def test_put_get_delete_policy(srv, shared):
    alice = client(srv, ALICE)
    with pytest.raises(ClientError) as e:
        alice.get_bucket_policy(Bucket=shared)
    assert code(e) == "NoSuchBucketPolicy"
    doc = json.dumps(read_policy(shared, BOB[0]), indent=1)
    r = alice.put_bucket_policy(Bucket=shared, Policy=doc)
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 204
    assert alice.get_bucket_policy(Bucket=shared)["Policy"] == doc  # as it was put
    # Only the owner (or whom the policy allows) manages it.
    denied(lambda: client(srv, BOB).get_bucket_policy(Bucket=shared))
    denied(lambda: client(srv, BOB).put_bucket_policy(Bucket=shared, Policy=doc))
    r = alice.delete_bucket_policy(Bucket=shared)
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 204
    with pytest.raises(ClientError) as e:
        alice.get_bucket_policy(Bucket=shared)
    assert code(e) == "NoSuchBucketPolicy"


def test_malformed_policies(srv, shared):
    alice = client(srv, ALICE)
    stmt = {"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{shared}/*"}
    bad = ["not json", json.dumps({"Statement": []}),
           json.dumps({"Statement": [dict(stmt, Effect="Perhaps")]}),
           json.dumps({"Statement": [dict(stmt, Action="ec2:RunInstances")]}),
           json.dumps({"Statement": [dict(stmt, Resource="arn:aws:s3:::another-bucket/*")]}),
           json.dumps({"Statement": [{k: v for k, v in stmt.items() if k != "Principal"}]}),
           json.dumps({"Statement": [dict(stmt, Condition={"IpAddress": {"aws:SourceIp": "999.1.1.1/8"}})]}),
           json.dumps({"Statement": [stmt] * 101}),                     # limits::policy_statements_max + 1
           json.dumps({"Id": "x" * (20 * 1024), "Statement": [stmt]})]  # limits::bucket_policy_bytes_max
    for doc in bad:
        with pytest.raises(ClientError) as e:
            alice.put_bucket_policy(Bucket=shared, Policy=doc)
        assert code(e) == "MalformedPolicy", doc[:200]
    with pytest.raises(ClientError) as e:
        alice.get_bucket_policy(Bucket=shared)
    assert code(e) == "NoSuchBucketPolicy"  # nothing was stored


def test_cross_user_read_sharing_over_http(srv, shared):
    alice, bob, carol = client(srv, ALICE), client(srv, BOB), client(srv, CAROL)
    denied(lambda: bob.get_object(Bucket=shared, Key="data/a.bin"))
    alice.put_bucket_policy(Bucket=shared, Policy=json.dumps(read_policy(shared, BOB[0])))
    assert bob.get_object(Bucket=shared, Key="data/a.bin")["Body"].read() == b"A" * 1000
    assert bob.head_object(Bucket=shared, Key="data/a.bin")["ContentLength"] == 1000
    keys = [o["Key"] for o in bob.list_objects_v2(Bucket=shared)["Contents"]]
    assert "data/a.bin" in keys
    # Read-only: no writes, no deletes, nothing for carol, and the deny covers everyone.
    denied(lambda: bob.put_object(Bucket=shared, Key="data/new", Body=b"x"))
    denied(lambda: bob.delete_object(Bucket=shared, Key="data/a.bin"))
    r = bob.delete_objects(Bucket=shared, Delete={"Objects": [{"Key": "data/a.bin"}]})
    assert [e["Code"] for e in r.get("Errors", [])] == ["AccessDenied"], r
    denied(lambda: carol.get_object(Bucket=shared, Key="data/a.bin"))
    denied(lambda: bob.get_object(Bucket=shared, Key="secret/s.txt"))
    # Explicit deny wins over ownership too.
    denied(lambda: alice.get_object(Bucket=shared, Key="secret/s.txt"))
    assert alice.get_object(Bucket=shared, Key="data/a.bin")["Body"].read() == b"A" * 1000
    # Copying out of the shared bucket needs GetObject on the source only.
    bob.create_bucket(Bucket=shared + "-bob")
    try:
        bob.copy_object(Bucket=shared + "-bob", Key="copy", CopySource={"Bucket": shared, "Key": "data/a.bin"})
        assert bob.get_object(Bucket=shared + "-bob", Key="copy")["Body"].read() == b"A" * 1000
        denied(lambda: bob.copy_object(Bucket=shared + "-bob", Key="c2",
                                       CopySource={"Bucket": shared, "Key": "secret/s.txt"}))
        bob.delete_object(Bucket=shared + "-bob", Key="copy")
    finally:
        bob.delete_bucket(Bucket=shared + "-bob")
    # ListBuckets still shows only one's own buckets.
    assert shared not in [b["Name"] for b in bob.list_buckets()["Buckets"]]


def cli_get(srv, user, bucket, key, out):
    env = dict(os.environ, AWS_ENDPOINT_URL=srv.endpoint, AWS_ACCESS_KEY_ID=user[0],
               AWS_SECRET_ACCESS_KEY=user[1], AWS_REGION=objd.REGION, FI_TCP_IFACE="lo")
    env.pop("AWS_PROFILE", None)
    env.pop("AWS_CA_BUNDLE", None)
    cli = os.path.join(os.environ["OBJDIRECT_BIN_DIR"], "objdirect")
    return subprocess.run([cli, "cp", "--json", "--fabric", "libfabric:tcp", f"s3://{bucket}/{key}", str(out)],
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)


def test_cross_user_read_sharing_over_rdma(srv, shared, tmp_path):
    alice = client(srv, ALICE)
    body = os.urandom(3 << 20)
    alice.put_object(Bucket=shared, Key="data/rdma.bin", Body=body)
    out = tmp_path / "bob.bin"
    p = cli_get(srv, BOB, shared, "data/rdma.bin", out)
    assert p.returncode == 4, (p.returncode, p.stderr.decode())  # access denied, before any byte
    assert not out.exists() or out.read_bytes() != body
    alice.put_bucket_policy(Bucket=shared, Policy=json.dumps(read_policy(shared, BOB[0])))
    p = cli_get(srv, BOB, shared, "data/rdma.bin", out)
    assert p.returncode == 0, p.stderr.decode()
    report = json.loads(p.stdout.decode().strip().splitlines()[-1])
    assert report.get("path") == "rdma", report
    assert out.read_bytes() == body
    # The deny holds for RDMA requests as well, and carol is still refused.
    p = cli_get(srv, BOB, shared, "secret/s.txt", tmp_path / "s")
    assert p.returncode == 4, p.stderr.decode()
    p = cli_get(srv, CAROL, shared, "data/rdma.bin", tmp_path / "c")
    assert p.returncode == 4, p.stderr.decode()


def test_anonymous_reads_only_where_allowed(srv, shared):
    alice, anon = client(srv, ALICE), client(srv, None)
    alice.put_object(Bucket=shared, Key="public/p.txt", Body=b"hello world")
    denied(lambda: anon.get_object(Bucket=shared, Key="public/p.txt"))
    alice.put_bucket_policy(Bucket=shared, Policy=json.dumps({"Statement": [
        {"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
         "Resource": f"arn:aws:s3:::{shared}/public/*",
         "Condition": {"IpAddress": {"aws:SourceIp": ["127.0.0.0/8", "::1/128"]}}}]}))
    assert anon.get_object(Bucket=shared, Key="public/p.txt")["Body"].read() == b"hello world"
    r = objd.send(srv.host, "GET", f"/{shared}/public/p.txt", {"Host": srv.host})
    assert r.status == 200 and r.body == b"hello world", r
    denied(lambda: anon.get_object(Bucket=shared, Key="data/a.bin"))
    denied(lambda: anon.list_objects_v2(Bucket=shared))
    denied(lambda: anon.put_object(Bucket=shared, Key="public/x", Body=b"x"))
    denied(lambda: anon.list_buckets())
    denied(lambda: anon.create_bucket(Bucket=shared + "-anon"))
    # A source address outside the condition: denied.
    alice.put_bucket_policy(Bucket=shared, Policy=json.dumps({"Statement": [
        {"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
         "Resource": f"arn:aws:s3:::{shared}/public/*",
         "Condition": {"IpAddress": {"aws:SourceIp": "10.0.0.0/8"}}}]}))
    denied(lambda: anon.get_object(Bucket=shared, Key="public/p.txt"))


def test_prefix_condition_on_listing(srv, shared):
    alice, bob = client(srv, ALICE), client(srv, BOB)
    alice.put_bucket_policy(Bucket=shared, Policy=json.dumps({"Statement": [
        {"Effect": "Allow", "Principal": {"AWS": BOB[0]}, "Action": "s3:ListBucket",
         "Resource": f"arn:aws:s3:::{shared}", "Condition": {"StringLike": {"s3:prefix": "data/*"}}}]}))
    assert [o["Key"] for o in bob.list_objects_v2(Bucket=shared, Prefix="data/")["Contents"]] == ["data/a.bin"]
    denied(lambda: bob.list_objects_v2(Bucket=shared, Prefix="secret/"))
    denied(lambda: bob.list_objects_v2(Bucket=shared))


def test_acls_under_bucket_owner_enforced(srv, shared):
    alice = client(srv, ALICE)
    acl = alice.get_bucket_acl(Bucket=shared)
    assert acl["Owner"]["ID"] == ALICE[0]
    assert [(g["Grantee"]["ID"], g["Permission"]) for g in acl["Grants"]] == [(ALICE[0], "FULL_CONTROL")]
    oacl = alice.get_object_acl(Bucket=shared, Key="data/a.bin")
    assert [g["Permission"] for g in oacl["Grants"]] == ["FULL_CONTROL"]
    alice.put_bucket_acl(Bucket=shared, ACL="private")
    alice.put_object_acl(Bucket=shared, Key="data/a.bin", ACL="bucket-owner-full-control")
    for call in (lambda: alice.put_bucket_acl(Bucket=shared, ACL="public-read"),
                 lambda: alice.put_object_acl(Bucket=shared, Key="data/a.bin", ACL="public-read"),
                 lambda: alice.put_object(Bucket=shared, Key="data/x", Body=b"x", ACL="public-read"),
                 lambda: alice.put_object(Bucket=shared, Key="data/x", Body=b"x", GrantRead="id=bob-key")):
        with pytest.raises(ClientError) as e:
            call()
        assert code(e) == "AccessControlListNotSupported"
    oc = alice.get_bucket_ownership_controls(Bucket=shared)
    assert oc["OwnershipControls"]["Rules"] == [{"ObjectOwnership": "BucketOwnerEnforced"}]
    denied(lambda: client(srv, BOB).get_bucket_acl(Bucket=shared))


def test_aws_s3api_policy(srv, shared):
    aws = objd.which("aws")
    if not aws:
        pytest.skip("aws CLI not installed")
    env = dict(os.environ)
    env.pop("AWS_CA_BUNDLE", None)
    env.update({"AWS_ACCESS_KEY_ID": ALICE[0], "AWS_SECRET_ACCESS_KEY": ALICE[1],
                "AWS_DEFAULT_REGION": "us-east-1", "AWS_CONFIG_FILE": "/dev/null",
                "AWS_SHARED_CREDENTIALS_FILE": "/dev/null", "AWS_PAGER": "",
                "AWS_EC2_METADATA_DISABLED": "true", "AWS_MAX_ATTEMPTS": "1"})
    base = [aws, "--endpoint-url", srv.endpoint, "--output", "json", "s3api"]
    doc = json.dumps(read_policy(shared, BOB[0]))
    p = subprocess.run(base + ["put-bucket-policy", "--bucket", shared, "--policy", doc], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    p = subprocess.run(base + ["get-bucket-policy", "--bucket", shared], env=env, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert json.loads(json.loads(p.stdout)["Policy"]) == json.loads(doc)
    assert client(srv, BOB).get_object(Bucket=shared, Key="data/a.bin")["Body"].read() == b"A" * 1000
    p = subprocess.run(base + ["delete-bucket-policy", "--bucket", shared], env=env, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    denied(lambda: client(srv, BOB).get_object(Bucket=shared, Key="data/a.bin"))
