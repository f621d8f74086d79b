"""Several users from --credentials: each sees and touches only its own buckets."""

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

import objd

ALICE = ("alice-key", "alice-secret-0123456789")
BOB = ("bob-key", "bob-secret-0123456789")


@pytest.fixture(scope="module")
def users_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("users")
    creds = root / "credentials"
    creds.write_text(f"# two users\n{ALICE[0]} {ALICE[1]}\n\n{BOB[0]} {BOB[1]}  # trailing comment\n")
    srv = objd.Server(str(root / "data"), str(root / "server.log"), extra_args=["--credentials", str(creds)])
    srv.start()
    yield srv
    assert srv.stop() == 0


def client(srv, user):
    return boto3.client("s3", endpoint_url=srv.endpoint, aws_access_key_id=user[0], aws_secret_access_key=user[1],
                        region_name=objd.REGION,
                        config=Config(signature_version="s3v4", s3={"addressing_style": "path"},
                                      retries={"total_max_attempts": 1}))


def code(exc):
    return exc.value.response["Error"]["Code"]


def test_users_are_isolated(users_server):
    alice, bob = client(users_server, ALICE), client(users_server, BOB)
    alice.create_bucket(Bucket="alice-bucket")
    alice.put_object(Bucket="alice-bucket", Key="secret.txt", Body=b"alice only")
    bob.create_bucket(Bucket="bob-bucket")

    assert [b["Name"] for b in alice.list_buckets()["Buckets"]] == ["alice-bucket"]
    assert [b["Name"] for b in bob.list_buckets()["Buckets"]] == ["bob-bucket"]

    with pytest.raises(ClientError) as e:
        bob.get_object(Bucket="alice-bucket", Key="secret.txt")
    assert code(e) == "AccessDenied"
    with pytest.raises(ClientError) as e:
        bob.put_object(Bucket="alice-bucket", Key="x", Body=b"intruder")
    assert code(e) == "AccessDenied"
    with pytest.raises(ClientError) as e:
        bob.list_objects_v2(Bucket="alice-bucket")
    assert code(e) == "AccessDenied"
    with pytest.raises(ClientError) as e:
        bob.delete_bucket(Bucket="alice-bucket")
    assert code(e) == "AccessDenied"
    with pytest.raises(ClientError) as e:
        bob.copy_object(Bucket="bob-bucket", Key="stolen", CopySource={"Bucket": "alice-bucket", "Key": "secret.txt"})
    assert code(e) == "AccessDenied"
    # The name is taken by another user: BucketAlreadyExists, not ...OwnedByYou.
    with pytest.raises(ClientError) as e:
        bob.create_bucket(Bucket="alice-bucket")
    assert code(e) == "BucketAlreadyExists"
    # Her own re-create in us-east-1 is AWS's 200, and the bucket stays as it was.
    alice.create_bucket(Bucket="alice-bucket")

    # Nothing Bob tried changed Alice's data.
    assert alice.get_object(Bucket="alice-bucket", Key="secret.txt")["Body"].read() == b"alice only"
    assert [o["Key"] for o in alice.list_objects_v2(Bucket="alice-bucket")["Contents"]] == ["secret.txt"]


def test_unknown_user_is_refused(users_server):
    stranger = client(users_server, ("nobody", "nothing-at-all-123"))
    with pytest.raises(ClientError) as e:
        stranger.list_buckets()
    assert code(e) == "InvalidAccessKeyId"
