"""objdirect.Client against the real objdirect-server: data, buffers, errors, list, async, config."""

import array
import concurrent.futures
import os
import pickle
import socket
import threading
import time

import numpy as np
import pytest

import objdirect
from conftest import ACCESS_KEY, SECRET_KEY, make_client


def pattern(n, seed=1):
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()


# -- round trips --------------------------------------------------------------------------------


def test_bytearray_round_trip(client, bucket):
    data = pattern(100_000)
    nbytes, path = client.put(bucket, "a", data)
    assert (nbytes, path) == (len(data), "http")
    buf = bytearray(len(data))
    r = client.get_into(bucket, "a", buf)
    assert r == (len(data), "http")
    assert r.nbytes == len(data) and r.path == "http" and r.object_size == len(data)
    assert r.etag and r.requests >= 1 and r.fabric == ""
    assert bytes(buf) == data
    assert client.get(bucket, "a") == data


def test_numpy_round_trip_multipart(server, bucket):
    # 12 MiB with 5 MiB parts: a multipart upload and a 3-part ranged download.
    with make_client(server, part_size_bytes=5 << 20, concurrency=3) as c:
        src = np.random.default_rng(7).standard_normal(3 << 20).astype(np.float32)
        r = c.put(bucket, "weights.bin", src)
        assert r.nbytes == src.nbytes and r.etag.endswith("-3")
        dst = np.zeros_like(src)
        r = c.get_into(bucket, "weights.bin", dst)
        assert r.nbytes == src.nbytes and r.requests >= 3
        np.testing.assert_array_equal(dst, src)
        # A 2-D view of the same bytes.
        dst2 = np.empty((1024, 3 << 10), dtype=np.float32)
        c.get_into(bucket, "weights.bin", dst2)
        np.testing.assert_array_equal(dst2.ravel(), src)


def test_ranges(client, bucket):
    data = pattern(10_000)
    client.put(bucket, "r", data)
    buf = bytearray(100)
    assert client.get_into(bucket, "r", buf, offset=1000).nbytes == 100
    assert bytes(buf) == data[1000:1100]
    buf = bytearray(100)
    assert client.get_into(bucket, "r", buf, offset=20, length=10).nbytes == 10
    assert bytes(buf[:10]) == data[20:30] and bytes(buf[10:]) == bytes(90)
    # A range past the end is cut.
    buf = bytearray(100)
    assert client.get_into(bucket, "r", buf, offset=9950).nbytes == 50
    assert bytes(buf[:50]) == data[9950:]
    assert client.get(bucket, "r", offset=9990) == data[9990:]
    assert client.get(bucket, "r", offset=5, length=3) == data[5:8]
    with pytest.raises(ValueError):
        client.get_into(bucket, "r", bytearray(10), length=11)
    with pytest.raises(ValueError):
        client.get_into(bucket, "r", bytearray(10), offset=-1)


def test_empty_object(client, bucket):
    assert client.put(bucket, "empty", b"").nbytes == 0
    assert client.get(bucket, "empty") == b""
    assert client.head(bucket, "empty").size == 0
    assert client.get_into(bucket, "empty", bytearray(0)).nbytes == 0


def test_head_and_delete(client, bucket):
    client.put(bucket, "h", b"hello")
    info = client.head(bucket, "h")
    assert info.size == 5 and info.etag and info.last_modified
    client.delete(bucket, "h")
    with pytest.raises(objdirect.NoSuchKey):
        client.head(bucket, "h")
    client.delete(bucket, "h")  # deleting a missing key is not an error


def test_put_content_type_and_metadata(client, bucket):
    r = client.put(bucket, "m", b"meta", content_type="text/plain",
                   metadata={"Owner": "alice", "n": "1"})
    assert r.nbytes == 4
    info = client.head(bucket, "m")
    assert info.content_type == "text/plain"
    assert info.metadata == {"owner": "alice", "n": "1"}
    assert client.head(bucket, "m").size == 4
    client.put(bucket, "plain", b"x")
    assert client.head(bucket, "plain").metadata == {}
    with pytest.raises(objdirect.InvalidArgument):
        client.put(bucket, "bad", b"x", metadata={"a": "line\nbreak"})
    with pytest.raises(objdirect.InvalidArgument):
        client.put(bucket, "big", b"x", metadata={"k": "v" * 2048})


def test_presign_get_and_put(client, bucket):
    import urllib.error
    import urllib.request
    client.put(bucket, "pre sign/\u00fc", b"presigned bytes")
    url = client.presign(bucket, "pre sign/\u00fc", expires_in=60)
    with urllib.request.urlopen(url, timeout=30) as r:
        assert r.read() == b"presigned bytes"
    put = client.presign(bucket, "via-url", method="PUT", expires_in=60)
    req = urllib.request.Request(put, data=b"uploaded", method="PUT")
    with urllib.request.urlopen(req, timeout=30) as r:
        assert r.status == 200
    assert client.get(bucket, "via-url") == b"uploaded"
    # Another key with the same signature: refused.
    with pytest.raises(urllib.error.HTTPError) as ei:
        urllib.request.urlopen(url.replace("pre%20sign", "pre%20sigX"), timeout=30)
    assert ei.value.code == 403
    for bad in (0, 604801):
        with pytest.raises(objdirect.ObjDirectError):
            client.presign(bucket, "k", expires_in=bad)
    with pytest.raises(objdirect.ObjDirectError):
        client.presign(bucket, "k", method="POST")


# -- buffer kinds -------------------------------------------------------------------------------

N = 4096


def _np_f_order():
    return np.asfortranarray(np.zeros((64, 16), dtype=np.float32))


# (name, factory of a destination of N bytes, bytes-of(destination))
DESTINATIONS = [
    ("bytearray", lambda: bytearray(N), bytes),
    ("memoryview", lambda: memoryview(bytearray(N)), bytes),
    ("memoryview-slice", lambda: memoryview(bytearray(N + 10))[5:N + 5], bytes),
    ("numpy-uint8", lambda: np.zeros(N, np.uint8), lambda a: a.tobytes()),
    ("numpy-2d-float64", lambda: np.zeros((16, N // 128), np.float64), lambda a: a.tobytes()),
    ("numpy-fortran", _np_f_order, lambda a: a.tobytes(order="A")),
    ("array", lambda: array.array("B", bytes(N)), bytes),
]


def fill(dst, data):
    if isinstance(dst, np.ndarray):  # in memory order, whatever the layout
        dst.reshape(-1, order="A").view(np.uint8)[:] = np.frombuffer(data, np.uint8)
    else:
        memoryview(dst).cast("B")[:] = data


@pytest.mark.parametrize("name,make,as_bytes", DESTINATIONS, ids=[d[0] for d in DESTINATIONS])
def test_buffer_kinds(client, bucket, name, make, as_bytes):
    data = pattern(N, seed=3)
    src = make()
    fill(src, data)
    assert client.put(bucket, "k", src).nbytes == N
    assert client.get(bucket, "k") == data
    dst = make()
    assert client.get_into(bucket, "k", dst).nbytes == N
    assert as_bytes(dst) == data


def test_put_accepts_read_only_buffers(client, bucket):
    data = pattern(1000)
    client.put(bucket, "bytes", data)
    client.put(bucket, "ro-view", memoryview(data)[10:20])
    ro = np.frombuffer(data, dtype=np.uint8)
    assert not ro.flags.writeable
    client.put(bucket, "ro-numpy", ro)
    assert client.get(bucket, "ro-view") == data[10:20]
    assert client.get(bucket, "ro-numpy") == data


def test_get_into_is_zero_copy(client, bucket):
    a = np.zeros(N, np.uint8)
    addr, n = objdirect._objdirect.buffer_info(a, True)
    assert (addr, n) == (a.ctypes.data, N)
    view = memoryview(bytearray(64))[8:40]
    addr2, n2 = objdirect._objdirect.buffer_info(view, False)
    assert n2 == 32
    assert addr2 == objdirect._objdirect.buffer_info(view.obj, False)[0] + 8


def test_buffer_errors(client, bucket):
    client.put(bucket, "k", pattern(N))
    with pytest.raises(BufferError, match="read-only"):
        client.get_into(bucket, "k", bytes(N))
    with pytest.raises(BufferError, match="read-only"):
        client.get_into(bucket, "k", np.frombuffer(bytes(N), np.uint8))
    with pytest.raises(BufferError, match="contiguous"):
        client.get_into(bucket, "k", np.zeros(2 * N, np.uint8)[::2])
    with pytest.raises(BufferError, match="contiguous"):
        client.put(bucket, "k2", np.zeros(2 * N, np.uint8)[::2])
    with pytest.raises(TypeError):
        client.get_into(bucket, "k", "a string")
    with pytest.raises(TypeError):
        client.put(bucket, "k2", 12345)
    # Too small for the whole object: libobjdirect's invalid_argument.
    with pytest.raises(objdirect.InvalidArgument, match="too small"):
        client.get_into(bucket, "k", bytearray(N - 1))
    with pytest.raises(objdirect.NoSuchKey):
        client.head(bucket, "k2")  # no failed put left anything behind


class FakeCudaArray:
    """Looks like a CuPy/Numba device array; its pointer must never be dereferenced."""

    def __init__(self, n):
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": "|u1", "data": (0xDEAD0000, False),
                                         "version": 3}


class FakeDLPackDevice:
    """A DLPack producer on CUDA device 0; __dlpack__ must never be called."""

    def __init__(self, device_type=2):
        self.device_type = device_type

    def __dlpack_device__(self):
        return (self.device_type, 0)

    def __dlpack__(self, stream=None):
        raise AssertionError("__dlpack__ called for a device tensor")


@pytest.mark.parametrize("make", [lambda: FakeCudaArray(N), lambda: FakeDLPackDevice(2),
                                  lambda: FakeDLPackDevice(10)], ids=["cuda-array-interface",
                                                                     "dlpack-cuda", "dlpack-rocm"])
def test_device_buffers_are_refused_without_cuda(client, bucket, make):
    # This process has not loaded CUDA, so these pointers cannot be device memory libobjdirect
    # could copy: refused before anything is sent (test_device_memory.py covers the GPU path).
    client.put(bucket, "k", pattern(N))
    with pytest.raises(objdirect.DeviceBufferNotSupported) as e:
        client.get_into(bucket, "k", make())
    assert isinstance(e.value, NotImplementedError) and "GPU" in str(e.value)
    with pytest.raises(objdirect.DeviceBufferNotSupported):
        client.put(bucket, "dev", make())
    with pytest.raises(objdirect.NoSuchKey):
        client.head(bucket, "dev")


def _server_ops(server, bucket, key, at_least, since):
    """[(op, status)] of the reads (GetObject, HeadObject) the server's access log holds for
    bucket/key after line `since`, waiting (the server logs a request after its reply) until
    there are at least `at_least`. Writes are left out: a PUT's line may land after `since`."""
    import json
    deadline = time.monotonic() + 10
    while True:
        with open(server.access_log) as f:
            recs = [json.loads(line) for line in f if line.endswith("\n")][since:]
        ops = [r for r in recs if r["bucket"] == bucket and r["key"] == key and
               r["op"] in ("GetObject", "HeadObject")]
        if len(ops) >= at_least or time.monotonic() > deadline:
            time.sleep(0.05)  # a stray extra request would show now
            with open(server.access_log) as f:
                recs = [json.loads(line) for line in f if line.endswith("\n")][since:]
            return [(r["op"], r["status"]) for r in recs if r["bucket"] == bucket and
                    r["key"] == key and r["op"] in ("GetObject", "HeadObject")]
        time.sleep(0.01)


def _log_len(server):
    with open(server.access_log) as f:
        return sum(1 for _ in f)


def test_get_sends_no_head_and_learns_the_size_from_its_own_reply(server, bucket):
    """Client.get makes no HeadObject (the server's access log): with a length, one ranged GET;
    without, one GET for an object within the first window, two (the rest pinned by If-Match)
    above it; a 0-byte object is one refused ranged GET and b""; a huge length is not
    allocated."""
    from objdirect import _objdirect
    window = _objdirect.get_first_window_bytes_max
    assert window == 256 << 10 and _objdirect.get_length_alloc_bytes_max == 64 << 20
    small, big = pattern(1000, 3), pattern(window + 12345, 4)
    with make_client(server) as c:
        assert c._native.first_window_bytes() == window
        c.put(bucket, "small", small)
        c.put(bucket, "big", big)
        c.put(bucket, "empty", b"")
        cases = [  # key, kwargs, expected bytes, GETs (status) the server sees
            ("small", {}, small, [206]),
            ("small", dict(offset=10, length=100), small[10:110], [206]),
            ("small", dict(offset=990, length=100), small[990:], [206]),  # cut at the end
            ("small", dict(offset=5, length=1 << 40), small[5:], [206]),  # not allocated
            ("big", {}, big, [206, 206]),
            ("big", dict(offset=7), big[7:], [206, 206]),
            ("big", dict(offset=window + 1), big[window + 1:], [206]),
            ("big", dict(offset=3, length=window + 100), big[3:window + 103], [206]),
            ("big", dict(offset=3, length=100 << 20), big[3:], [206, 206]),  # over alloc max
            ("empty", {}, b"", [416]),
            ("empty", dict(length=10), b"", [416]),
        ]
        for key, kw, want, statuses in cases:
            mark = _log_len(server)
            before = c.stats()["requests"].get("HeadObject", {})
            got = c.get(bucket, key, **kw)
            assert got == want, (key, kw)
            assert _server_ops(server, bucket, key, len(statuses), mark) == \
                [("GetObject", s) for s in statuses], (key, kw)
            assert c.stats()["requests"].get("HeadObject", {}) == before
        mark = _log_len(server)
        assert c.get(bucket, "small", offset=3, length=0) == b""  # no request at all
        with pytest.raises(objdirect.InvalidRange):
            c.get(bucket, "small", offset=1000)
        with pytest.raises(objdirect.InvalidRange):
            c.get(bucket, "small", offset=2000, length=5)
        with pytest.raises(objdirect.NoSuchKey):
            c.get(bucket, "missing")
        assert _server_ops(server, bucket, "small", 2, mark) == [("GetObject", 416)] * 2
        # A window-sized object needs no second GET; one byte more does.
        c.put(bucket, "edge", big[:window])
        mark = _log_len(server)
        assert c.get(bucket, "edge") == big[:window]
        assert _server_ops(server, bucket, "edge", 1, mark) == [("GetObject", 206)]
        c.put(bucket, "edge", big[:window + 1])
        mark = _log_len(server)
        assert c.get(bucket, "edge") == big[:window + 1]
        assert _server_ops(server, bucket, "edge", 2, mark) == [("GetObject", 206)] * 2
    # fabric "auto": the first window is below rdma_min_bytes, so a small object goes over HTTP
    # (no RDMA proposed for a window it does not fill); the rest of a large one over RDMA.
    large = pattern(window + (2 << 20), 5)
    with make_client(server, fabric="auto") as c:
        c.put(bucket, "r-small", small)
        c.put(bucket, "r-large", large)
        t0 = dict(c.stats()["transfers"])
        assert c.get(bucket, "r-small") == small
        t1 = dict(c.stats()["transfers"])
        assert c.get(bucket, "r-large") == large
        t2 = dict(c.stats()["transfers"])
        assert (t1.get("http", 0) - t0.get("http", 0), t1.get("rdma", 0) - t0.get("rdma", 0)) == \
            (1, 0)
        assert (t2.get("http", 0) - t1.get("http", 0), t2.get("rdma", 0) - t1.get("rdma", 0)) == \
            (1, 1)


# -- errors -------------------------------------------------------------------------------------


def test_error_carries_the_servers_request_id(server, client, bucket):
    import json
    with pytest.raises(objdirect.NoSuchKey) as e:
        client.get(bucket, "missing-for-request-id")
    rid = e.value.request_id
    assert rid and e.value.code == "NoSuchKey"

    def logged(key):
        # The server logs a request after its reply: wait for the line.
        deadline = time.monotonic() + 10
        while True:
            with open(server.access_log) as f:
                recs = [json.loads(line) for line in f if line.endswith("\n")]
            recs = [r for r in recs if r["key"] == key]
            if recs or time.monotonic() > deadline:
                return recs
            time.sleep(0.01)
    ours = logged("missing-for-request-id")
    assert [r["request_id"] for r in ours] == [rid]
    assert ours[0]["error"] == "NoSuchKey" and ours[0]["status"] == 404
    # HEAD has no body: the id comes from the x-amz-request-id header.
    with pytest.raises(objdirect.NoSuchKey) as e:
        client.head(bucket, "missing-head-for-request-id")
    assert [r["request_id"] for r in logged("missing-head-for-request-id")] == [
        e.value.request_id]
    # An error no server reply carried has none.
    with make_client_at("http://127.0.0.1:1") as dead:
        with pytest.raises(objdirect.Unavailable) as e:
            dead.head(bucket, "k")
    assert e.value.request_id is None


def make_client_at(endpoint):
    from conftest import ACCESS_KEY, SECRET_KEY
    return objdirect.Client(endpoint=endpoint, access_key=ACCESS_KEY, secret_key=SECRET_KEY,
                            fabric="none", connect_timeout_s=2)


def test_typed_errors(client, bucket):
    with pytest.raises(objdirect.NoSuchKey) as e:
        client.get(bucket, "missing")
    err = e.value
    assert isinstance(err, objdirect.ObjDirectError)
    assert (err.code, err.errc, err.http_status) == ("NoSuchKey", "no_such_key", 404)
    assert err.message and str(err).startswith("NoSuchKey: ")
    assert "RequestId" not in err.message
    with pytest.raises(objdirect.NoSuchKey):
        client.get_into(bucket, "missing", bytearray(10))
    with pytest.raises(objdirect.NoSuchBucket) as e:
        client.get_into("no-such-bucket-here", "k", bytearray(10))
    assert e.value.code == "NoSuchBucket"
    with pytest.raises(objdirect.NoSuchBucket):
        client.put("no-such-bucket-here", "k", b"x")
    client.put(bucket, "small", b"0123456789")
    with pytest.raises(objdirect.InvalidRange) as e:
        client.get_into(bucket, "small", bytearray(10), offset=10)
    assert e.value.http_status == 416
    with pytest.raises(objdirect.BucketNotEmpty):
        client.delete_bucket(bucket)
    # us-east-1 (the test server's region): AWS answers the owner's re-create with 200 and keeps
    # the bucket; BucketAlreadyOwnedByYou is the answer of other regions (test_s3_buckets.py).
    client.create_bucket(bucket)
    with pytest.raises(objdirect.InvalidBucketName):
        client.create_bucket("Bad_Bucket")
    # Exceptions survive pickling (DataLoader workers send them to the main process).
    again = pickle.loads(pickle.dumps(err))
    assert type(again) is objdirect.NoSuchKey and again.code == "NoSuchKey" and again.message == err.message


def test_wrong_secret_is_access_denied(server, bucket):
    with objdirect.Client(endpoint=server.endpoint, access_key=ACCESS_KEY, secret_key="wrong",
                          fabric="none") as c:
        with pytest.raises(objdirect.AccessDenied) as e:
            c.put(bucket, "k", b"x")
        assert e.value.http_status == 403
        assert type(e.value) is objdirect.SignatureDoesNotMatch
    with objdirect.Client(endpoint=server.endpoint, access_key="nobody", secret_key="x",
                          fabric="none") as c:
        with pytest.raises(objdirect.InvalidAccessKeyId):
            c.list_buckets()


def test_unreachable_server_is_unavailable():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    with objdirect.Client(endpoint=f"http://127.0.0.1:{port}", access_key="a", secret_key="b",
                          fabric="none", connect_timeout_s=2) as c:
        with pytest.raises(objdirect.Unavailable) as e:
            c.get("b", "k")
        assert isinstance(e.value, ConnectionError)


def test_bad_configuration_is_invalid_argument():
    with pytest.raises(objdirect.InvalidArgument):
        objdirect.Client(endpoint="http://127.0.0.1:1", fabric="carrier-pigeon")
    with pytest.raises(objdirect.InvalidArgument):
        objdirect.Client(endpoint="ftp://example")
    with pytest.raises(objdirect.InvalidArgument):
        objdirect.Client(endpoint="http://127.0.0.1:1", profile="no-such-profile")


def test_every_errc_maps_to_an_objdirect_error():
    for errc, s3, status in objdirect._objdirect.errc_table():
        if errc == "ok":
            continue
        e = objdirect.errors._from_native(errc, s3, status, "m")
        assert isinstance(e, objdirect.ObjDirectError)
        assert (e.code, e.errc, e.http_status, e.message) == (s3, errc, status, "m")
        if errc in objdirect.errors._BY_ERRC:
            assert type(e) is objdirect.errors._BY_ERRC[errc]


# -- list ---------------------------------------------------------------------------------------


def test_list_is_a_lazy_generator(client, bucket):
    keys = sorted([f"data/{i:04d}" for i in range(250)] + ["a", "z/1", "z/2"])
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        list(ex.map(lambda k: client.put(bucket, k, k.encode()), keys))
    it = client.list(bucket, page_size=100)
    assert iter(it) is it
    got = list(it)
    assert [o.key for o in got] == keys
    assert all(o.size == len(o.key) and o.etag and not o.is_prefix for o in got)
    assert [o.key for o in client.list(bucket, "data/", page_size=7)] == keys[1:251]
    top = list(client.list(bucket, delimiter="/"))
    assert [(o.key, o.is_prefix) for o in top] == [("a", False), ("data/", True), ("z/", True)]
    assert list(client.list(bucket, "nothing/")) == []
    gen = client.list("no-such-bucket-here")
    with pytest.raises(objdirect.NoSuchBucket):
        next(gen)
    assert bucket in client.list_buckets()


# -- async and the GIL --------------------------------------------------------------------------


def test_async(client, bucket):
    blobs = {f"k{i}": pattern(50_000 + i, seed=i) for i in range(16)}
    puts = [client.put_async(bucket, k, v) for k, v in blobs.items()]
    assert all(isinstance(f, concurrent.futures.Future) for f in puts)
    assert [f.result(30).nbytes for f in puts] == [len(v) for v in blobs.values()]
    bufs = {k: np.zeros(len(v), np.uint8) for k, v in blobs.items()}
    gets = {k: client.get_into_async(bucket, k, bufs[k]) for k in blobs}
    for k, f in gets.items():
        assert f.result(30).nbytes == len(blobs[k])
        assert bufs[k].tobytes() == blobs[k]
    assert client.get_async(bucket, "k3").result(30) == blobs["k3"]
    assert client.head_async(bucket, "k3").result(30).size == len(blobs["k3"])
    missing = client.get_async(bucket, "missing")
    assert isinstance(missing.exception(30), objdirect.NoSuchKey)
    client.delete_async(bucket, "k3").result(30)
    with pytest.raises(objdirect.NoSuchKey):
        client.head(bucket, "k3")


def test_gil_is_released_during_a_transfer():
    # A server that accepts and never answers: the GET blocks in libobjdirect until the I/O
    # timeout. Python code in another thread must run meanwhile (it cannot if the GIL is held).
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(8)
    port = lsock.getsockname()[1]
    try:
        with objdirect.Client(endpoint=f"http://127.0.0.1:{port}", access_key="a",
                              secret_key="b", fabric="none", io_timeout_s=3) as c:
            box = {}

            def worker():
                t0 = time.monotonic()
                try:
                    c.get("b", "k")
                except objdirect.ObjDirectError as e:
                    box["error"] = e
                box["elapsed"] = time.monotonic() - t0

            t = threading.Thread(target=worker)
            t.start()
            time.sleep(0.5)  # the worker is now blocked inside the call
            n, t_end = 0, time.monotonic() + 0.5
            while time.monotonic() < t_end:
                n += 1
            assert t.is_alive(), "the call returned before the stall (server answered?)"
            t.join(30)
            assert n > 10_000, f"main thread made {n} iterations while a transfer was blocked"
            assert isinstance(box.get("error"), (objdirect.Timeout, objdirect.Unavailable,
                                                 objdirect.InternalError)), box
            assert box["elapsed"] >= 2.5
    finally:
        lsock.close()


# -- configuration ------------------------------------------------------------------------------


def test_environment_configuration(server, bucket, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", server.endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_REGION", "eu-west-3")
    with objdirect.Client(fabric="none") as c:
        assert c.config["endpoint"] == server.endpoint and c.config["region"] == "eu-west-3"
        # The server signs for us-east-1: a request in eu-west-3 is refused, so the region is used.
        with pytest.raises(objdirect.ObjDirectError, match="region"):
            c.put(bucket, "env", b"x")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    with objdirect.Client(fabric="none") as c:
        c.put(bucket, "env", b"from the environment")
        assert c.get(bucket, "env") == b"from the environment"
        assert "secret_key" not in c.config


def test_the_crossover_per_direction(server, bucket, monkeypatch):
    # Defaults: GETs over RDMA from 512 KiB, uploads from 64 KiB (docs/client.md, "The fastest
    # path"); the environment and the keywords set each; a bad count is a clear error.
    with make_client(server, fabric="auto") as c:
        assert (c.config["rdma_min_bytes"], c.config["rdma_put_min_bytes"]) == (512 << 10, 64 << 10)
    monkeypatch.setenv("OBJDIRECT_RDMA_PUT_MIN_BYTES", "8192")
    data = pattern(10_000, 7)
    with make_client(server, fabric="auto") as c:
        assert c.config["rdma_put_min_bytes"] == 8192
        assert c.put(bucket, "xo", data).path == "rdma"  # 10,000 >= 8,192: an upload over RDMA
        r = c.get_into(bucket, "xo", bytearray(len(data)))
        assert r.path == "http"  # 10,000 < 512 KiB: the GET over HTTP
    with make_client(server, fabric="auto", rdma_put_min_bytes=16384) as c:
        assert c.put(bucket, "xo", data).path == "http"  # the keyword wins over the environment
    monkeypatch.setenv("OBJDIRECT_RDMA_PUT_MIN_BYTES", "64k")
    with pytest.raises(objdirect.InvalidArgument, match="OBJDIRECT_RDMA_PUT_MIN_BYTES"):
        make_client(server, fabric="auto")


def test_auto_learns_which_path_is_faster_per_size(server, bucket, monkeypatch):
    # docs/client.md, "The fastest path": above the crossover, a size's first 3 calls go over
    # RDMA and the next 3 over HTTP ("auto: measuring ..."); then the faster one, and the stats
    # count each choice. rdma_learn=False (or OBJDIRECT_RDMA_LEARN=0) keeps RDMA at every call.
    data = pattern(1 << 20, 9)
    buf = bytearray(len(data))
    with make_client(server, fabric="auto") as c:
        assert c.config["rdma_learn"] is True
        c.put(bucket, "learn", data)
        paths = []
        for _ in range(10):
            r = c.get_into(bucket, "learn", buf)
            assert bytes(buf) == data
            paths.append(r.path)
            if r.path == "http":
                assert r.reason.startswith("auto: "), r.reason
        assert paths[:6] == ["rdma"] * 3 + ["http"] * 3, paths
        choices = c.stats()["auto_choices"]
        assert choices["learning_rdma"] == 3 + 1 and choices["learning_http"] == 3, choices
        decided = choices.get("measured_rdma", 0) + choices.get("measured_http", 0)
        assert decided == 4, choices
        # no probe before the 32nd decided call: each decided call took the faster path as
        # measured so far (which may change from call to call where the two are close)
        assert paths[6:].count("rdma") == choices.get("measured_rdma", 0), (paths, choices)
    with make_client(server, fabric="auto", rdma_learn=False) as c:
        assert all(c.get_into(bucket, "learn", buf).path == "rdma" for _ in range(8))
        assert c.stats()["auto_choices"] == {}
    monkeypatch.setenv("OBJDIRECT_RDMA_LEARN", "0")
    with make_client(server, fabric="auto") as c:
        assert c.config["rdma_learn"] is False
    monkeypatch.setenv("OBJDIRECT_RDMA_LEARN", "no")
    with pytest.raises(objdirect.InvalidArgument, match="OBJDIRECT_RDMA_LEARN must be 0 or 1"):
        make_client(server, fabric="auto")


def test_profile_configuration(server, bucket, monkeypatch, tmp_path):
    (tmp_path / "credentials").write_text(
        f"[default]\naws_access_key_id = wrong\naws_secret_access_key = wrong\n\n"
        f"[train]\naws_access_key_id = {ACCESS_KEY}\naws_secret_access_key = {SECRET_KEY}\n")
    (tmp_path / "config").write_text(
        f"[profile train]\nregion = ap-south-1\nendpoint_url = {server.endpoint}\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    with objdirect.Client(profile="train", fabric="none") as c:
        assert c.config["profile"] == "train" and c.config["region"] == "ap-south-1"
        assert c.config["endpoint"] == server.endpoint and c.config["access_key"] == ACCESS_KEY
    # The server wants us-east-1; an explicit argument wins over the profile.
    with objdirect.Client(profile="train", region="us-east-1", fabric="none") as c:
        c.put(bucket, "profile", b"p")
        assert c.get(bucket, "profile") == b"p"
    monkeypatch.setenv("AWS_PROFILE", "train")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    with objdirect.Client(fabric="none") as c:
        assert c.config["profile"] == "train" and c.get(bucket, "profile") == b"p"
    with objdirect.Client(server.endpoint, profile="default", fabric="none") as c:
        with pytest.raises(objdirect.AccessDenied):  # the default profile's keys are wrong
            c.get(bucket, "profile")


def test_client_pickles_as_its_settings(server, bucket):
    with make_client(server, concurrency=3) as c:
        c.put(bucket, "p", b"pickled")
        c2 = pickle.loads(pickle.dumps(c))
        assert c2 is not c and c2.config["concurrency"] == 3
        assert c2.get(bucket, "p") == b"pickled"
        c2.close()


def test_closed_client_refuses_async(server):
    c = make_client(server)
    c.close()
    with pytest.raises(RuntimeError):
        c.get_async("b", "k")
