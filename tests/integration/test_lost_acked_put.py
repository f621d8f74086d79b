"""Regression test for the lost acknowledged PUT of the kill -9 campaign (issue 7, docs/RELIABILITY.md).

Root cause: botocore (Debian 12's 1.29, used by boto3 and awscli v1) sends `Expect: 100-continue`
on every PutObject/UploadPart, even with an empty body. The server answered an empty-body request
with its final response and no "100 Continue" (nothing to continue). botocore then keeps that
final status line on the connection object (AWSConnection.response_class is reset only for a
request *without* Expect) and, for the next Expect request on the same keep-alive connection,
returns the remembered status instead of reading the real one. So after an empty PUT:
  - a PUT whose connection died before the answer (the server was SIGKILLed) came back as 200 with
    no headers, although the server never stored it: the campaign's "lost" key t1/k4 (its
    thread's previous request was an empty PUT; the access log has no line for the lost PUT);
  - a PUT the server rejected (400 BadDigest) came back as 200: boto3 reported success.
The server now sends "100 Continue" before any final answer to an Expect request on a connection
it keeps open, so botocore never sees a final answer in place of a 100.
"""

import base64
import hashlib
import os
import socket

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

import objd


def fresh_client(server):
    # One client, so consecutive calls share one pooled keep-alive connection. A short read
    # timeout: a client that lost track of the answers on its connection waits for a close.
    cfg = Config(signature_version="s3v4", s3={"addressing_style": "path"},
                 retries={"total_max_attempts": 1}, connect_timeout=10, read_timeout=10)
    return boto3.client("s3", endpoint_url=server.endpoint, aws_access_key_id=objd.ACCESS_KEY,
                        aws_secret_access_key=objd.SECRET_KEY, region_name=objd.REGION, config=cfg)


def test_lost_acked_put_bad_digest_after_empty_put(server, s3, bucket):
    c = fresh_client(server)
    c.put_object(Bucket=bucket, Key="empty", Body=b"")  # Expect: 100-continue, Content-Length: 0
    body = os.urandom(4096)
    wrong_md5 = base64.b64encode(hashlib.md5(b"something else").digest()).decode()
    with pytest.raises(ClientError) as ei:
        r = c.put_object(Bucket=bucket, Key="k", Body=body, ContentMD5=wrong_md5)
        pytest.fail(f"a PUT with a wrong Content-MD5 was acknowledged: {r['ResponseMetadata']}")
    assert ei.value.response["Error"]["Code"] == "BadDigest"
    with pytest.raises(ClientError) as ei:
        s3.head_object(Bucket=bucket, Key="k")
    assert ei.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    # the connection stays in sync: a good PUT right after is acknowledged by the server itself
    r = c.put_object(Bucket=bucket, Key="k", Body=body)
    assert r["ResponseMetadata"].get("RequestId")
    assert r["ETag"].strip('"') == hashlib.md5(body).hexdigest()
    got = s3.get_object(Bucket=bucket, Key="k")["Body"].read()
    assert got == body


def test_lost_acked_put_every_answer_is_the_servers(server, s3, bucket):
    """Empty PUT, then PUTs of each kind the campaign makes: every acknowledgement carries the
    server's request id and the ETag of what was sent (a made-up answer has neither)."""
    c = fresh_client(server)
    for i, size in enumerate([0, 1, 0, 4096, 0, 0, 100_000]):
        body = os.urandom(size)
        r = c.put_object(Bucket=bucket, Key=f"k{i}", Body=body)
        assert r["ResponseMetadata"].get("RequestId"), r["ResponseMetadata"]
        assert r["ETag"].strip('"') == hashlib.md5(body).hexdigest()
        assert s3.get_object(Bucket=bucket, Key=f"k{i}")["Body"].read() == body


def _read_head(sock):
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            break
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    return head, rest


def test_lost_acked_put_empty_body_gets_100_continue(server, bucket):
    """On the wire: an empty-body PUT with Expect: 100-continue gets "100 Continue" before its
    final answer when the connection stays open, and the next request on it is answered too."""
    path = f"/{bucket}/wire"
    target, hdrs = objd.sign_headers(server.host, "PUT", path,
                                     headers={"Expect": "100-continue", "Content-Length": "0"})
    host, port = server.host.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as s:
        req = f"PUT {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hdrs.items()) + "\r\n"
        s.sendall(req.encode())
        head, rest = _read_head(s)
        assert head.startswith(b"HTTP/1.1 100 Continue"), head
        if b"\r\n\r\n" not in rest:
            rest += s.recv(65536)
        final = rest.split(b"\r\n", 1)[0]
        assert final.startswith(b"HTTP/1.1 200"), rest
        assert b"connection: close" not in rest.lower()
