"""Concurrency: overwrites racing with readers (every GET is one whole version), racing creates,
racing Completes, racing DeleteObjects and PUTs."""

import concurrent.futures
import hashlib
import os
import threading

from botocore.exceptions import ClientError

import objd
from conftest import unique_bucket

MIB = 1 << 20


def test_overwrite_races_with_readers(server, bucket):
    """4 writers overwrite one key with 2 MiB versions while 4 readers GET it: every GET returns
    exactly one written version, with that version's ETag and length."""
    versions = {}
    lock = threading.Lock()
    first = os.urandom(2 * MIB)
    versions[hashlib.md5(first).hexdigest()] = hashlib.sha256(first).hexdigest()
    assert objd.request(server, "PUT", objd.opath(bucket, "hot"), body=first).status == 200
    stop = threading.Event()
    errors = []

    def writer(n):
        s3 = objd.boto3_client(server)
        for i in range(6):
            body = bytes([n, i]) + os.urandom(2 * MIB - 2)
            with lock:
                versions[hashlib.md5(body).hexdigest()] = hashlib.sha256(body).hexdigest()
            s3.put_object(Bucket=bucket, Key="hot", Body=body)

    def reader():
        s3 = objd.boto3_client(server)
        reads = 0
        while not stop.is_set() or reads < 3:
            r = s3.get_object(Bucket=bucket, Key="hot")
            body = r["Body"].read()
            etag = r["ETag"].strip('"')
            with lock:
                want = versions.get(etag)
            if want is None or hashlib.sha256(body).hexdigest() != want or len(body) != 2 * MIB:
                errors.append(f"GET returned a body that is not the version of its ETag {etag}")
            reads += 1
        return reads

    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        readers = [ex.submit(reader) for _ in range(4)]
        writers = [ex.submit(writer, n) for n in range(4)]
        for w in writers:
            w.result()
        stop.set()
        total_reads = sum(r.result() for r in readers)
    assert not errors, errors[:3]
    assert total_reads >= 12
    g = objd.request(server, "GET", objd.opath(bucket, "hot"))
    assert hashlib.sha256(g.body).hexdigest() == versions[g.header("etag").strip('"')]


def test_ranged_reads_race_with_overwrites(server, bucket):
    """A ranged GET with If-Match (what the AWS CRT does per part) never mixes versions: it is
    either the range of the version it names, or 412."""
    a = b"A" * (4 * MIB)
    b = b"B" * (4 * MIB)
    r = objd.request(server, "PUT", objd.opath(bucket, "rr"), body=a)
    etag_a = r.header("etag")
    stop = threading.Event()
    bad = []

    def flipper():
        s3 = objd.boto3_client(server)
        for i in range(10):
            s3.put_object(Bucket=bucket, Key="rr", Body=b if i % 2 == 0 else a)
        stop.set()

    def ranger():
        while not stop.is_set():
            r = objd.request(server, "GET", objd.opath(bucket, "rr"),
                             headers={"Range": "bytes=1000000-2999999", "If-Match": etag_a})
            if r.status == 206:
                if r.body != a[1000000:3000000]:
                    bad.append("206 body is not version A")
            elif r.status != 412:
                bad.append(f"status {r.status}")

    with concurrent.futures.ThreadPoolExecutor(3) as ex:
        fs = [ex.submit(ranger), ex.submit(ranger), ex.submit(flipper)]
        for f in fs:
            f.result()
    assert not bad, bad[:3]


def test_racing_create_bucket(server, s3):
    name = unique_bucket("race")
    barrier = threading.Barrier(6)

    def create(_):
        barrier.wait()
        return objd.request(server, "PUT", "/" + name).status

    with concurrent.futures.ThreadPoolExecutor(6) as ex:
        statuses = sorted(ex.map(create, range(6)))
    # In us-east-1 S3 answers a re-create of one's own bucket 200 (elsewhere 409
    # BucketAlreadyOwnedByYou): racing creates by one owner all succeed, and one bucket exists.
    assert statuses == [200] * 6, statuses
    assert [b["Name"] for b in s3.list_buckets()["Buckets"]].count(name) == 1
    s3.delete_bucket(Bucket=name)


def test_racing_completes_same_key(server, s3, bucket):
    """Three uploads of one key complete at once: the object is exactly one of them."""
    uploads = []
    for n in range(3):
        part = bytes([n]) * (5 * MIB)
        uid = s3.create_multipart_upload(Bucket=bucket, Key="mp")["UploadId"]
        e1 = s3.upload_part(Bucket=bucket, Key="mp", UploadId=uid, PartNumber=1, Body=part)["ETag"]
        e2 = s3.upload_part(Bucket=bucket, Key="mp", UploadId=uid, PartNumber=2, Body=bytes([n]) * 10)["ETag"]
        uploads.append((uid, [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}],
                        hashlib.sha256(part + bytes([n]) * 10).hexdigest()))
    barrier = threading.Barrier(3)

    def complete(u):
        c = objd.boto3_client(server)
        barrier.wait()
        return c.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=u[0],
                                           MultipartUpload={"Parts": u[1]})["ETag"]

    with concurrent.futures.ThreadPoolExecutor(3) as ex:
        etags = list(ex.map(complete, uploads))
    assert all(e.endswith('-2"') for e in etags), etags
    body = s3.get_object(Bucket=bucket, Key="mp")["Body"].read()
    assert hashlib.sha256(body).hexdigest() in {u[2] for u in uploads}
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


def test_racing_if_none_match_puts(server, bucket):
    """Eight PUTs with If-None-Match: * on a new key: exactly one wins, the others get 412 (or 409
    ConditionalRequestConflict), and the object is the winner's."""
    barrier = threading.Barrier(8)

    def put(n):
        barrier.wait()
        r = objd.request(server, "PUT", objd.opath(bucket, "once"), headers={"If-None-Match": "*"},
                         body=f"writer {n}".encode() * 1000)
        return n, r.status

    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        results = list(ex.map(put, range(8)))
    winners = [n for n, st in results if st == 200]
    assert len(winners) == 1, results
    assert all(st in (200, 409, 412) for _, st in results), results
    body = objd.request(server, "GET", objd.opath(bucket, "once")).body
    assert body == f"writer {winners[0]}".encode() * 1000


def test_delete_objects_races_with_puts(server, s3, bucket):
    keys = [f"d/{i}" for i in range(200)]

    def put_all():
        c = objd.boto3_client(server)
        for k in keys:
            c.put_object(Bucket=bucket, Key=k, Body=b"x")

    def delete_all():
        c = objd.boto3_client(server)
        for i in range(0, 200, 50):
            c.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys[i:i + 50]], "Quiet": True})

    with concurrent.futures.ThreadPoolExecutor(2) as ex:
        f1, f2 = ex.submit(put_all), ex.submit(delete_all)
        f1.result()
        f2.result()
    listed = [o["Key"] for p in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="d/")
              for o in p.get("Contents", [])]
    for k in listed:  # whatever survived is readable and whole
        assert s3.get_object(Bucket=bucket, Key=k)["Body"].read() == b"x"
    try:
        s3.delete_bucket(Bucket=bucket)
        assert listed == []
    except ClientError as e:
        assert e.response["Error"]["Code"] == "BucketNotEmpty" and listed
