"""The RDMA data path from Python: libfabric tcp and shm (and UCX) on loopback against the real
objdirect-server, into numpy arrays and torch tensors; and the HTTP fallback when the server
offers no fabric. A fabric that does not open here is a failure, not a skip: both libfabric
providers work on any Linux machine (FI_TCP_IFACE=lo is set in conftest).
"""

import os

import numpy as np
import pytest
import torch

import objdirect
from conftest import Server, make_client

FABRICS = ["libfabric:tcp", "libfabric:shm", "ucx"]


@pytest.mark.parametrize("fabric", FABRICS)
def test_rdma_round_trip(server, bucket, fabric):
    with make_client(server, fabric=fabric, part_size_bytes=5 << 20) as c:
        src = np.random.default_rng(11).integers(0, 256, 3 << 20, dtype=np.uint8)
        r = c.put(bucket, "rdma.bin", src)
        assert (r.nbytes, r.path, r.fabric, r.reason) == (src.nbytes, "rdma", fabric, "")
        dst = np.zeros_like(src)
        g = c.get_into(bucket, "rdma.bin", dst)
        assert (g.nbytes, g.path, g.fabric) == (src.nbytes, "rdma", fabric)
        np.testing.assert_array_equal(dst, src)
        # A range, into a torch tensor (DLPack), over the fabric.
        t = torch.zeros(1000, dtype=torch.uint8)
        g = c.get_into(bucket, "rdma.bin", t, offset=12345)
        assert (g.nbytes, g.path) == (1000, "rdma")
        assert t.numpy().tobytes() == src[12345:13345].tobytes()
        # get() fills its bytes object over the fabric too.
        assert c.get(bucket, "rdma.bin", offset=100, length=50) == src[100:150].tobytes()


@pytest.mark.parametrize("fabric", FABRICS)
def test_rdma_transfers_whose_last_chunk_borrows(server, bucket, fabric):
    """Objects 1, 100 and 4,096 bytes past two of the server's RDMA chunks (4 MiB): the engine's
    last chunk borrows from the one before it (src/server/rdma/chunk_plan.hpp), on PUT (the
    server's RDMA READs) and GET (its RDMA WRITEs), and every byte lands where it belongs."""
    chunk = 4 << 20
    with make_client(server, fabric=fabric, part_size_bytes=64 << 20) as c:
        for tail in (1, 100, 4096):
            src = np.random.default_rng(tail).integers(0, 256, 2 * chunk + tail, dtype=np.uint8)
            r = c.put(bucket, f"tail-{tail}", src)
            assert (r.nbytes, r.path) == (src.nbytes, "rdma"), (r.path, r.reason)
            assert "-" not in r.etag, r.etag  # one PutObject, not a multipart upload
            dst = np.zeros_like(src)
            g = c.get_into(bucket, f"tail-{tail}", dst)
            assert (g.nbytes, g.path) == (src.nbytes, "rdma"), (g.path, g.reason)
            np.testing.assert_array_equal(dst, src)


def test_rdma_multipart(server, bucket):
    with make_client(server, fabric="libfabric:shm", part_size_bytes=5 << 20, concurrency=2) as c:
        src = np.random.default_rng(5).integers(0, 256, 11 << 20, dtype=np.uint8)
        r = c.put(bucket, "big", src)
        assert r.path == "rdma" and r.etag.endswith("-3")
        dst = np.zeros_like(src)
        g = c.get_into(bucket, "big", dst)
        assert g.path == "rdma" and g.requests >= 3
        np.testing.assert_array_equal(dst, src)


def _progress_thread_switches():
    """Voluntary context switches so far of this process's RDMA progress threads (named
    od-progress): one per sleep or wait such a thread enters."""
    total = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                if f.read().strip() != "od-progress":
                    continue
            with open(f"/proc/self/task/{tid}/status") as f:
                total += sum(int(line.split()[1]) for line in f
                             if line.startswith("voluntary_ctxt_switches:"))
        except FileNotFoundError:  # the thread ended
            pass
    return total


def test_small_shm_batches_leave_the_progress_thread_asleep_once_the_server_says_so(tmp_path):
    """A server whose shm writes land without the client's polls says so in each RDMA reply
    (x-amz-rdma-target-progress: none, docs/rdma_protocol.md); with several small GETs in
    flight the client's progress thread then sleeps instead of polling for them (about 2 fewer
    context switches per GET here). A lone GET keeps it polling either way, which shortens its
    wait for the reply. A server with CMA off (FI_SHM_DISABLE_CMA=1 in its environment) does not
    say it, and its small writes wait for the client's poll, which still comes at once."""
    per_get = {}
    count, size = 400, 4096
    for cma in ("on", "off"):
        env = {"FI_SHM_DISABLE_CMA": "1"} if cma == "off" else None
        s = Server(tmp_path / cma, tmp_path / f"{cma}.log", ["--no-fsync", "--fabric", "libfabric:shm"],
                   env=env).start()
        try:
            with make_client(s, fabric="libfabric:shm", concurrency=8) as c:
                c.create_bucket("small")
                src = np.random.default_rng(7).integers(0, 256, count * size, dtype=np.uint8)
                keys = [f"k{i}" for i in range(count)]
                for r in c.put_many([("small", k, src[i * size:(i + 1) * size])
                                     for i, k in enumerate(keys)]):
                    assert r.path == "rdma"
                arena = np.zeros_like(src)
                items = [("small", k, arena[i * size:(i + 1) * size]) for i, k in enumerate(keys)]
                assert {g.path for g in c.get_many(items)} == {"rdma"}  # the server's word, if any
                arena[:] = 0
                before = _progress_thread_switches()
                for _ in range(3):
                    assert {g.path for g in c.get_many(items)} == {"rdma"}
                per_get[cma] = (_progress_thread_switches() - before) / (3 * count)
                np.testing.assert_array_equal(arena, src)
        finally:
            s.stop()
    assert per_get["off"] >= 0.2, per_get  # the threads are found and counted
    assert per_get["on"] * 5 <= per_get["off"], per_get


def test_fallback_to_http_when_the_server_has_no_fabric(tmp_path):
    s = Server(tmp_path / "data", tmp_path / "server.log", ["--no-fsync", "--fabric", "none"]).start()
    try:
        with make_client(s, fabric="libfabric:tcp") as c:
            c.create_bucket("fallback")
            data = bytes(range(256)) * 100
            r = c.put("fallback", "k", data)
            assert r.nbytes == len(data) and r.path in ("http", "http-fallback") and r.reason
            buf = bytearray(len(data))
            g = c.get_into("fallback", "k", buf)
            assert g.path in ("http", "http-fallback") and g.reason and bytes(buf) == data
    finally:
        s.stop()


def test_stats_match_rdma_and_fallback_transfers(server, bucket, tmp_path):
    """Client.stats() counts what the transfers did: RDMA bytes on a server with fabrics,
    http-fallback bytes and declines on a server without."""
    src = np.random.default_rng(3).integers(0, 256, 1 << 20, dtype=np.uint8)
    with make_client(server, fabric="libfabric:tcp") as c:
        assert c.put(bucket, "stats.bin", src).path == "rdma"
        dst = np.zeros_like(src)
        assert c.get_into(bucket, "stats.bin", dst).path == "rdma"
        s = c.stats()
        assert s["bytes"] == {"rdma": 2 * src.nbytes}
        assert s["transfers"] == {"rdma": 2}
        assert s["rdma_declines"] == {}
        # The new endpoint's first RDMA request is refused until it proves whose it is, then
        # sent again (docs/rdma_protocol.md, "Endpoint binding"); the GET finds it bound.
        assert s["requests"]["PutObject"] == {"2xx": 1, "4xx": 1}
        assert s["requests"]["GetObject"] == {"2xx": 1}
        assert s["requests_in_flight"] == 0
    fb = Server(tmp_path / "data", tmp_path / "server.log", ["--no-fsync", "--fabric", "none"]).start()
    try:
        with make_client(fb, fabric="libfabric:tcp") as c:
            c.create_bucket("fbstats")
            c.put("fbstats", "k", src)
            c.get_into("fbstats", "k", np.zeros_like(src))
            s = c.stats()
            assert s["bytes"] == {"http-fallback": 2 * src.nbytes}
            assert s["transfers"] == {"http-fallback": 2}
            assert sum(s["rdma_declines"].values()) == 2 and "other" not in s["rdma_declines"]
    finally:
        fb.stop()
