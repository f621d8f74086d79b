"""SSE-C from Python (docs/sse-c.md): sse_c_key= on put, get, get_into (ranges), head, copy and the
explicit multipart calls, against the real objdirect-server with --sse-c-over-http, over HTTP and
libfabric tcp and shm; objects written by objdirect read by boto3 with the same SSECustomerKey
and the other way round (the same algorithm, key encoding and MD5); the errors of a missing, wrong
or malformed key; and the key absent from the server's log and access log.
"""

import base64

import boto3
import botocore.config
import botocore.exceptions
import numpy as np
import pytest

import objdirect
from conftest import ACCESS_KEY, SECRET_KEY, Server, make_client

KEY = bytes(range(32))
OTHER = bytes(range(50, 82))
PATHS = ["none", "libfabric:tcp", "libfabric:shm"]


@pytest.fixture(scope="module")
def ssrv(tmp_path_factory):
    d = tmp_path_factory.mktemp("ssec")
    s = Server(d / "data", d / "server.log",
               ["--no-fsync", "--sse-c-over-http", "--access-log", str(d / "access.log")])
    s.access_log = d / "access.log"
    s.start()
    yield s
    s.stop()
    logs = (d / "server.log").read_bytes() + (d / "access.log").read_bytes()
    for k in (KEY, OTHER):
        assert base64.b64encode(k) not in logs, "an SSE-C key reached the server's logs"


_n = [0]


@pytest.fixture
def sb(ssrv):
    _n[0] += 1
    name = f"py-ssec-{_n[0]}"
    with make_client(ssrv) as c:
        c.create_bucket(name)
    return name


def client(ssrv, fabric, **kw):
    if fabric != "none":
        kw.setdefault("rdma", "required")  # the bytes must travel over the fabric
        kw.setdefault("rdma_min_bytes", 0)
    return make_client(ssrv, fabric=fabric, **kw)


def boto(ssrv):
    return boto3.client("s3", endpoint_url=ssrv.endpoint, aws_access_key_id=ACCESS_KEY,
                        aws_secret_access_key=SECRET_KEY, region_name="us-east-1",
                        config=botocore.config.Config(s3={"addressing_style": "path"}))


@pytest.mark.parametrize("fabric", PATHS)
def test_put_get_ranges_head(ssrv, sb, fabric):
    src = np.random.default_rng(3).integers(0, 256, (2 << 20) + 13, dtype=np.uint8)
    with client(ssrv, fabric) as c:
        r = c.put(sb, "o", src, sse_c_key=KEY, content_type="application/x-test")
        assert r.path == ("http" if fabric == "none" else "rdma"), r.reason
        dst = np.zeros_like(src)
        g = c.get_into(sb, "o", dst, sse_c_key=KEY)
        assert g.nbytes == src.nbytes and g.path == r.path
        np.testing.assert_array_equal(dst, src)
        for off, n in [(0, 1), (15, 33), (1 << 20, 70000), (src.nbytes - 7, 7)]:
            part = np.zeros(n, dtype=np.uint8)
            got = c.get_into(sb, "o", part, offset=off, length=n, sse_c_key=KEY)
            assert got.nbytes == n
            assert part.tobytes() == src[off:off + n].tobytes(), off
        assert c.get(sb, "o", offset=5, length=11, sse_c_key=KEY) == src[5:16].tobytes()
        assert c.get(sb, "o", sse_c_key=bytearray(KEY)) == src.tobytes()
        info = c.head(sb, "o", sse_c_key=memoryview(KEY))
        assert info.size == src.nbytes and info.content_type == "application/x-test"

        # No key: 400 InvalidRequest; another key: 403 AccessDenied; nothing lands.
        dst[:] = 7
        with pytest.raises(objdirect.ObjDirectError) as e:
            c.get_into(sb, "o", dst)
        assert (e.value.code, e.value.http_status) == ("InvalidRequest", 400)
        with pytest.raises(objdirect.AccessDenied):
            c.get_into(sb, "o", dst, sse_c_key=OTHER)
        with pytest.raises(objdirect.AccessDenied):
            c.get_into(sb, "o", dst, offset=100, length=10, sse_c_key=OTHER)
        assert (dst == 7).all(), "a refused read wrote into the buffer"
        with pytest.raises(objdirect.AccessDenied):
            c.head(sb, "o", sse_c_key=OTHER)


def test_key_forms_and_errors(ssrv, sb):
    with make_client(ssrv) as c:
        # A str key of 32 UTF-8 bytes, as boto3 accepts: the same key as its bytes.
        skey = "0123456789abcdef0123456789ABCDEF"
        c.put(sb, "s", b"str key", sse_c_key=skey)
        assert c.get(sb, "s", sse_c_key=skey.encode()) == b"str key"
        for bad in (b"short", KEY + b"x", ""):
            with pytest.raises(objdirect.InvalidArgument, match="32 bytes"):
                c.put(sb, "bad", b"x", sse_c_key=bad)
        with pytest.raises(TypeError):
            c.put(sb, "bad", b"x", sse_c_key=12345)
        # A key for an object stored without SSE-C: 400 InvalidRequest.
        c.put(sb, "plain", b"plain")
        with pytest.raises(objdirect.ObjDirectError) as e:
            c.get(sb, "plain", sse_c_key=KEY)
        assert e.value.code == "InvalidRequest"


def test_boto3_reads_what_objdirect_wrote_and_back(ssrv, sb):
    s3 = boto(ssrv)
    body = np.random.default_rng(9).integers(0, 256, 300_000, dtype=np.uint8).tobytes()
    with make_client(ssrv) as c:
        c.put(sb, "od", body, sse_c_key=KEY)
        got = s3.get_object(Bucket=sb, Key="od", SSECustomerAlgorithm="AES256", SSECustomerKey=KEY)
        assert got["Body"].read() == body
        assert got["SSECustomerAlgorithm"] == "AES256"
        s3.put_object(Bucket=sb, Key="b3", Body=body, SSECustomerAlgorithm="AES256",
                      SSECustomerKey=OTHER)
        assert c.get(sb, "b3", sse_c_key=OTHER) == body
        with pytest.raises(botocore.exceptions.ClientError):
            s3.get_object(Bucket=sb, Key="od")


@pytest.mark.parametrize("fabric", ["none", "libfabric:shm"])
def test_multipart(ssrv, sb, fabric):
    a = np.random.default_rng(1).integers(0, 256, 5 << 20, dtype=np.uint8)
    b = np.random.default_rng(2).integers(0, 256, 4321, dtype=np.uint8)
    with client(ssrv, fabric, part_size_bytes=5 << 20, concurrency=2) as c:
        # put() of a big object: a multipart upload, every part and the Complete with the key.
        big = np.concatenate([a, a[:1 << 20], b])
        r = c.put(sb, "big", big, sse_c_key=KEY)
        assert r.etag.endswith("-2")
        assert c.get(sb, "big", sse_c_key=KEY) == big.tobytes()
        # The explicit calls.
        uid = c.create_multipart_upload(sb, "mp", sse_c_key=KEY)
        # A full 5 MiB part refused on its header alone: the server's S3 error, not a broken pipe.
        with pytest.raises(objdirect.ObjDirectError) as e:
            c.upload_part(sb, "mp", uid, 1, a)
        assert e.value.code == "InvalidRequest"
        with pytest.raises(objdirect.InvalidArgument):
            c.upload_part(sb, "mp", uid, 1, a, sse_c_key=OTHER)
        p1 = c.upload_part(sb, "mp", uid, 1, a, sse_c_key=KEY)
        p2 = c.upload_part(sb, "mp", uid, 2, b, sse_c_key=KEY)
        done = c.complete_multipart_upload(sb, "mp", uid, [(1, p1.etag), (2, p2.etag)],
                                           sse_c_key=KEY)
        assert done.etag.endswith("-2")
        out = np.zeros(a.nbytes + b.nbytes, dtype=np.uint8)
        c.get_into(sb, "mp", out, sse_c_key=KEY)
        assert out.tobytes() == a.tobytes() + b.tobytes()


def test_copy(ssrv, sb):
    with make_client(ssrv) as c:
        c.put(sb, "src", b"copy me" * 1000, sse_c_key=KEY)
        with pytest.raises(objdirect.ObjDirectError):
            c.copy(sb, "src", sb, "dst")
        c.copy(sb, "src", sb, "dst", copy_source_sse_c_key=KEY, sse_c_key=OTHER)
        assert c.get(sb, "dst", sse_c_key=OTHER) == b"copy me" * 1000
        with pytest.raises(objdirect.AccessDenied):
            c.get(sb, "dst", sse_c_key=KEY)
        c.copy(sb, "dst", sb, "plain", copy_source_sse_c_key=OTHER)
        assert c.get(sb, "plain") == b"copy me" * 1000
