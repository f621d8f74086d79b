"""Batch and range calls (Client.get_many, put_many, get_ranges_into, register) against the real
objdirect-server, over HTTP and over the libfabric tcp and shm fabrics: results in input order,
per-item errors, arenas registered once, ranges coalesced into fewer GETs with exact bytes, and
all ranges pinned to one version of the object.
"""

import numpy as np
import pytest

import objdirect
from conftest import make_client

PATHS = ["none", "libfabric:tcp", "libfabric:shm"]


def _gets(c):
    return sum(c.stats()["requests"].get("GetObject", {}).values())


def _expected_path(fabric):
    return "http" if fabric == "none" else "rdma"


@pytest.mark.parametrize("fabric", PATHS)
def test_get_many_order_and_per_item_errors(server, bucket, fabric):
    rng = np.random.default_rng(5)
    sizes = [1 + 997 * i for i in range(24)]  # every object a different size, in no sorted order
    rng.shuffle(sizes)
    srcs = [rng.integers(0, 256, n, dtype=np.uint8) for n in sizes]
    with make_client(server, fabric=fabric, concurrency=6) as c:
        put = c.put_many([(bucket, f"o/{i}", s) for i, s in enumerate(srcs)])
        assert [r.nbytes for r in put] == sizes
        assert {r.path for r in put} == {_expected_path(fabric)}
        assert [c.head(bucket, f"o/{i}").size for i in range(len(srcs))] == sizes

        # A missing key at 7 and a missing bucket at 15 among good ones: only they fail.
        keys = [f"o/{i}" for i in range(len(srcs))]
        keys[7] = "o/missing"
        dsts = [np.zeros(n, dtype=np.uint8) for n in sizes]
        reqs = [objdirect.GetRequest(bucket, k, d) for k, d in zip(keys, dsts)]
        reqs[15] = reqs[15]._replace(bucket=bucket + "-absent")
        out = c.get_many(reqs, return_exceptions=True)
        assert len(out) == len(srcs)
        assert isinstance(out[7], objdirect.NoSuchKey)
        assert isinstance(out[15], objdirect.NoSuchBucket)
        for i, (r, s, d) in enumerate(zip(out, srcs, dsts)):
            if i in (7, 15):
                assert not d.any(), "a failed item's buffer stayed untouched"
                continue
            assert (r.nbytes, r.path) == (s.nbytes, _expected_path(fabric)), i
            np.testing.assert_array_equal(d, s)

        # By default the first failure (input order) is raised once all have run, with the list.
        dsts2 = [np.zeros(n, dtype=np.uint8) for n in sizes]
        with pytest.raises(objdirect.NoSuchKey) as e:
            c.get_many([(bucket, k, d) for k, d in zip(keys, dsts2)])
        assert len(e.value.results) == len(srcs) and isinstance(e.value.results[7],
                                                                objdirect.NoSuchKey)
        np.testing.assert_array_equal(dsts2[-1], srcs[-1])

        # Ranges as get_into takes them: (offset, length) into the first bytes of the buffer.
        d = np.zeros(100, dtype=np.uint8)
        r = c.get_many([(bucket, "o/3", d, 10, 50)])[0]
        assert r.nbytes == min(50, sizes[3] - 10)
        np.testing.assert_array_equal(d[:r.nbytes], srcs[3][10:10 + r.nbytes])
        # Bad arguments raise before anything is sent.
        with pytest.raises(BufferError):
            c.get_many([(bucket, "o/1", bytes(10))])
        with pytest.raises(ValueError):
            c.get_many([(bucket, "o/1", bytearray(10), 0, 11)])
        assert c.get_many([]) == [] and c.put_many([]) == []


@pytest.mark.parametrize("fabric", ["libfabric:tcp", "libfabric:shm"])
def test_batch_registers_an_arena_once(server, bucket, fabric):
    n, size = 40, 4096
    with make_client(server, fabric=fabric) as c:
        src = np.random.default_rng(9).integers(0, 256, n * size, dtype=np.uint8)
        before = c.stats()["rdma_registrations"]
        put = c.put_many([(bucket, f"a/{i}", src[i * size:(i + 1) * size]) for i in range(n)])
        assert {r.path for r in put} == {"rdma"}
        after_put = c.stats()["rdma_registrations"]
        # The 40 slices lie end to end: one registration for the batch.
        assert after_put - before == 1
        arena = np.zeros(n * size, dtype=np.uint8)
        got = c.get_many([(bucket, f"a/{i}", arena[i * size:(i + 1) * size]) for i in range(n)])
        assert {r.path for r in got} == {"rdma"}
        assert c.stats()["rdma_registrations"] - after_put == 1
        np.testing.assert_array_equal(arena, src)
        # Separate buffers: one registration each (the count the arena saves).
        mark = c.stats()["rdma_registrations"]
        bufs = [np.zeros(size, dtype=np.uint8) for _ in range(n)]
        c.get_many([(bucket, f"a/{i}", b) for i, b in enumerate(bufs)])
        assert c.stats()["rdma_registrations"] - mark == n


@pytest.mark.parametrize("fabric", ["none", "libfabric:shm"])
def test_register_pins_a_reusable_arena(server, bucket, fabric):
    size = 64 << 10
    with make_client(server, fabric=fabric) as c:
        src = np.random.default_rng(3).integers(0, 256, 8 * size, dtype=np.uint8)
        c.put(bucket, "whole", src)
        arena = np.zeros(8 * size, dtype=np.uint8)
        before = c.stats()["rdma_registrations"]
        with c.register(arena) as reg:
            assert reg.active and reg.nbytes == arena.nbytes
            assert reg.fabrics == ([] if fabric == "none" else [fabric])
            assert c.stats()["rdma_registrations"] - before == (0 if fabric == "none" else 1)
            for i in range(8):  # slices of the arena find the registration: no new one
                r = c.get_into(bucket, "whole", arena[i * size:(i + 1) * size],
                               offset=i * size, length=size)
                assert (r.nbytes, r.path) == (size, _expected_path(fabric))
            assert c.stats()["rdma_registrations"] - before == (0 if fabric == "none" else 1)
        assert not reg.active
        reg.release()  # idempotent
        np.testing.assert_array_equal(arena, src)
        with pytest.raises(TypeError):
            c.register(12345)


@pytest.mark.parametrize("fabric", PATHS)
def test_get_ranges_into_coalesced_exact_bytes(server, bucket, fabric):
    size = 1 << 20
    src = np.random.default_rng(21).integers(0, 256, size, dtype=np.uint8)
    with make_client(server, fabric=fabric) as c:
        c.put(bucket, "obj", src)
        # Unsorted; 100..200 and 300..400 and 250..260 merge (gaps < 64 KiB), as do the
        # overlapping pair near 500 KiB and its duplicate; 900 KiB stands alone; the last
        # reaches past the end (cut) and one is empty.
        ranges = [(300, 100), (100, 100), (900 << 10, 4096), (250, 10), (500 << 10, 8192),
                  (size - 10, 100), ((500 << 10) + 4096, 8192), (500 << 10, 8192), (7, 0)]
        bufs = [np.zeros(max(n, 1), dtype=np.uint8) for _, n in ranges]
        gets = _gets(c)
        landed = c.get_ranges_into(bucket, "obj", ranges, bufs)
        assert landed == [min(n, size - o) for o, n in ranges]
        for (o, n), b, k in zip(ranges, bufs, landed):
            np.testing.assert_array_equal(b[:k], src[o:o + k])
        # Four GETs: [100, 400), the 500 KiB cluster, 900 KiB, the tail.
        assert _gets(c) - gets == 4
        # With gap_bytes=0 only overlapping or touching ranges merge.
        gets = _gets(c)
        c.get_ranges_into(bucket, "obj", ranges[:4], bufs[:4], gap_bytes=0)
        assert _gets(c) - gets == 4
        # Everything merged into one GET and then copied out, still exact.
        gets = _gets(c)
        bufs2 = [np.zeros(max(n, 1), dtype=np.uint8) for _, n in ranges]
        assert c.get_ranges_into(bucket, "obj", ranges, bufs2, gap_bytes=size) == landed
        assert _gets(c) - gets == 1
        for (o, _), b, k in zip(ranges, bufs2, landed):
            np.testing.assert_array_equal(b[:k], src[o:o + k])
        if fabric != "none":
            assert c.stats()["transfers"].get("rdma", 0) > 0

        with pytest.raises(objdirect.InvalidRange):
            c.get_ranges_into(bucket, "obj", [(0, 10), (size, 1)], [bytearray(10)] * 2)
        with pytest.raises(ValueError):
            c.get_ranges_into(bucket, "obj", [(0, 10)], [])
        with pytest.raises(ValueError):
            c.get_ranges_into(bucket, "obj", [(0, 10)], [bytearray(9)])
        with pytest.raises(objdirect.NoSuchKey):
            c.get_ranges_into(bucket, "absent", [(0, 10)], [bytearray(10)])


def test_get_ranges_into_is_pinned_to_one_version(server, bucket):
    with make_client(server) as c, make_client(server) as other:
        c.put(bucket, "v", b"a" * 200_000)
        real_head = c.head

        def head_then_overwrite(b, k):
            info = real_head(b, k)
            other.put(b, k, b"b" * 200_000)  # replaced between the HEAD and the GETs
            return info

        c.head = head_then_overwrite
        bufs = [bytearray(10), bytearray(10)]
        with pytest.raises(objdirect.PreconditionFailed):
            c.get_ranges_into(bucket, "v", [(0, 10), (150_000, 10)], bufs)
        del c.head
        assert c.get_ranges_into(bucket, "v", [(0, 10), (150_000, 10)], bufs) == [10, 10]
        assert bufs == [bytearray(b"b" * 10)] * 2
