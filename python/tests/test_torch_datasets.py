"""objdirect.torch datasets against the real objdirect-server: shuffle, resumption, prefetch
bounds, rank sharding with torch.distributed (gloo, 2 processes), from_objects across buckets,
from_manifest without LIST or HEAD, fork safety in DataLoader workers, and objects landing in
(fake) CUDA device memory through as_tensor.
"""

import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import textwrap
import time
import tracemalloc

import pytest
import torch
import torch.utils.data

from objdirect.torch import IterableDataset, MapDataset, as_tensor, epoch_order, shard_order
from conftest import ACCESS_KEY, SECRET_KEY, make_client


def settings(server, **kw):
    return dict(endpoint=server.endpoint, access_key=ACCESS_KEY, secret_key=SECRET_KEY,
                fabric="none", **kw)


def fill(client, bucket, prefix, n, size=lambda i: 64):
    objs = {}
    for i in range(n):
        key = f"{prefix}{i:03d}"
        objs[key] = (bytes([i % 251]) + i.to_bytes(4, "little")) * (size(i) // 5 + 1)
        objs[key] = objs[key][:max(size(i), 5)]
        client.put(bucket, key, objs[key])
    return objs


def key_of(reader):
    return reader.key


def access_log(server):
    with open(server.access_log) as f:
        return [json.loads(line) for line in f if line.endswith("\n")]


# -- order and sharding (plain functions) -------------------------------------------------------


def test_epoch_order_is_a_deterministic_permutation():
    a = epoch_order(100, True, 7, 0)
    assert sorted(a) == list(range(100)) and a != list(range(100))
    assert a == epoch_order(100, True, 7, 0)  # same seed and epoch: same order
    assert a != epoch_order(100, True, 7, 1) and a != epoch_order(100, True, 8, 0)
    assert epoch_order(5, False, 7, 3) == [0, 1, 2, 3, 4]
    # Pinned: the order must not change between runs, processes or Python versions (a resumed
    # job depends on it). Same value under Debian's 3.11 and pyenv's interpreter.
    assert epoch_order(10, True, 0, 0) == [5, 4, 2, 7, 1, 0, 8, 3, 9, 6]


def test_shard_order_ranks_workers_and_drop_last():
    order = list(range(23))
    ranks = [shard_order(order, rank=r, world=3) for r in range(3)]
    assert sorted(sum(ranks, [])) == order and [len(r) for r in ranks] == [8, 8, 7]
    even = [shard_order(order, rank=r, world=3, drop_last=True) for r in range(3)]
    assert [len(r) for r in even] == [7, 7, 7] and len(set(sum(even, []))) == 21
    # Workers take blocks of batch_size in turn: what a DataLoader yields is a prefix of the
    # rank's sequence, so resuming at `position` yields exactly the rest.
    mine = shard_order(order, rank=1, world=2)
    w = [shard_order(order, rank=1, world=2, worker=k, workers=2, batch_size=3) for k in (0, 1)]
    assert w[0] == mine[0:3] + mine[6:9] and w[1] == mine[3:6] + mine[9:12]
    rest = [shard_order(order, rank=1, world=2, position=4, worker=k, workers=2) for k in (0, 1)]
    assert sorted(rest[0] + rest[1]) == sorted(mine[4:])
    with pytest.raises(ValueError):
        shard_order(order, rank=2, world=2)


# -- shuffle, resumption ------------------------------------------------------------------------


def test_shuffle_is_deterministic_per_seed_and_epoch_and_covers_every_sample(server, client,
                                                                            bucket):
    objs = fill(client, bucket, "s/", 30)
    mk = lambda **kw: IterableDataset.from_prefix(f"s3://{bucket}/s/", transform=key_of,
                                                  shuffle=True, **settings(server, **kw))
    ds = mk(seed=3)
    first = list(ds)
    assert sorted(first) == sorted(objs) and first != sorted(objs)
    assert list(mk(seed=3)) == first  # another dataset, same seed: same order
    assert list(mk(seed=4)) != first
    ds.set_epoch(1)
    second = list(ds)
    assert sorted(second) == sorted(objs) and second != first
    again = mk(seed=3)
    again.set_epoch(1)
    assert list(again) == second
    # Through a DataLoader with 2 workers: every sample exactly once, in the same order as
    # in-process iteration (one sample per batch: worker blocks of 1).
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)
    assert list(loader) == second
    # MapDataset: the same permutation per (seed, epoch).
    m = MapDataset.from_prefix(f"s3://{bucket}/s/", transform=key_of, shuffle=True, seed=3,
                               **settings(server))
    m.set_epoch(1)
    assert [m[i] for i in range(len(m))] == second
    assert m[0] == ds.entries[epoch_order(30, True, 3, 1)[0]].key


def test_resumed_state_dict_yields_exactly_the_remaining_samples(server, client, bucket):
    fill(client, bucket, "r/", 26)
    mk = lambda seed=11, **kw: IterableDataset.from_prefix(
        f"s3://{bucket}/r/", transform=key_of, shuffle=True, seed=seed, **settings(server, **kw))
    ds = mk()
    ds.set_epoch(2)
    full = list(ds)
    # In-process: stop after 7 samples.
    ds.set_epoch(2)
    it = iter(ds)
    seen = [next(it) for _ in range(7)]
    state = ds.state_dict()
    assert seen == full[:7] and state["position"] == 7 and state["epoch"] == 2
    resumed = mk()
    resumed.load_state_dict(state)
    assert len(resumed) == 19 and list(resumed) == full[7:]
    # Through a DataLoader with 2 workers and batches of 4: stopped after 3 batches.
    ds4 = mk(batch_size=4)
    ds4.set_epoch(2)
    loader = iter(torch.utils.data.DataLoader(ds4, batch_size=4, num_workers=2,
                                              collate_fn=list))
    taken = [k for _ in range(3) for k in next(loader)]
    assert taken == full[:12]
    state = ds4.state_dict(samples_seen=len(taken))
    del loader
    again = mk(batch_size=4)
    again.load_state_dict(json.loads(json.dumps(state)))  # survives a JSON round trip
    rest = [k for b in torch.utils.data.DataLoader(again, batch_size=4, num_workers=2,
                                                   collate_fn=list) for k in b]
    assert rest == full[12:]
    # MapDataset: after load_state_dict the dataset is the remaining samples.
    m = MapDataset.from_prefix(f"s3://{bucket}/r/", transform=key_of, shuffle=True, seed=11,
                               **settings(server))
    m.set_epoch(2)
    assert [m[i] for i in range(5)] == full[:5]
    ms = m.state_dict()
    m2 = MapDataset.from_prefix(f"s3://{bucket}/r/", transform=key_of, shuffle=True, seed=11,
                                **settings(server))
    m2.load_state_dict(ms)
    assert len(m2) == 21 and list(torch.utils.data.DataLoader(m2, batch_size=None)) == full[5:]
    with pytest.raises(ValueError, match="seed"):
        mk(seed=12).load_state_dict(state)
    m2.set_epoch(3)
    assert len(m2) == 26


# -- prefetch -----------------------------------------------------------------------------------


def test_prefetch_respects_prefetch_bytes(server, client, bucket):
    kib = 1024
    sizes = [(37 * i % 9 + 1) * 20 * kib for i in range(40)]  # 20..180 KiB
    objs = fill(client, bucket, "p/", 40, size=lambda i: sizes[i])
    bound = 400 * kib
    ds = IterableDataset.from_prefix(f"s3://{bucket}/p/", transform=lambda r: len(r.read()),
                                     prefetch=16, prefetch_bytes=bound, **settings(server))
    ds.entries  # list before measuring
    tracemalloc.start()
    try:
        got = []
        for n in ds:
            got.append(n)
            time.sleep(0.005)  # a slow consumer: the prefetcher fills up to its bound
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert got == [len(objs[k]) for k in sorted(objs)]
    p = ds.last_prefetcher
    assert p.peak_bytes <= bound, p.peak_bytes
    assert p.peak_objects >= 3, "nothing was fetched ahead"
    # Independent of the prefetcher's own count: Python-side memory (the object buffers are
    # bytearrays) stays within the bound plus the one object the consumer holds and its copy.
    assert peak <= bound + 2 * max(sizes) + 256 * kib, peak
    # prefetch (objects) bounds too, and an object above prefetch_bytes still comes, alone.
    ds2 = IterableDataset.from_prefix(f"s3://{bucket}/p/", transform=lambda r: len(r.read()),
                                      prefetch=2, prefetch_bytes=10 * kib, **settings(server))
    assert list(ds2) == got and ds2.last_prefetcher.peak_objects == 1
    ds3 = IterableDataset.from_prefix(f"s3://{bucket}/p/", transform=lambda r: len(r.read()),
                                      prefetch=2, **settings(server))
    assert list(ds3) == got and ds3.last_prefetcher.peak_objects == 2
    # MapDataset read-ahead under a sequential sampler: same items, bounded the same way.
    m = MapDataset.from_prefix(f"s3://{bucket}/p/", transform=lambda r: len(r.read()),
                               prefetch=4, prefetch_bytes=bound, **settings(server))
    assert [m[i] for i in range(len(m))] == got
    with pytest.raises(ValueError):
        IterableDataset.from_prefix(f"s3://{bucket}/p/", reader_mode="ranged", prefetch=4,
                                    **settings(server))


def _gets(c):
    return sum(c.stats()["requests"].get("GetObject", {}).values())


@pytest.mark.parametrize("fabric", ["none", "libfabric:shm"])
def test_prefetch_fetches_in_get_many_batches_with_the_same_bytes_in_order(server, bucket,
                                                                           fabric):
    kib = 1024
    n = 30
    sizes = [(i * 7 % 11) * kib + 3 for i in range(n)]
    sizes[4] = 0  # an empty object needs no GET
    with make_client(server, fabric=fabric, rdma_min_bytes=1) as c:  # RDMA for every size
        objs = fill(c, bucket, "g/", n, size=lambda i: sizes[i])
        objs["g/004"] = b""
        c.put(bucket, "g/004", b"")
        order = epoch_order(n, True, 7, 3)
        want = [objs[f"g/{i:03d}"] for i in order]
        results = {}
        for prefetch in (8, 0):
            ds = IterableDataset.from_prefix(f"s3://{bucket}/g/", transform=lambda r: r.read(),
                                             client=c, shuffle=True, seed=7, prefetch=prefetch)
            ds.set_epoch(3)
            ds.entries  # list before counting
            gets, regs = _gets(c), c.stats()["rdma_registrations"]
            rdma = c.stats()["transfers"].get("rdma", 0)
            got = list(ds)
            results[prefetch] = (got, _gets(c) - gets, c.stats()["rdma_registrations"] - regs,
                                 c.stats()["transfers"].get("rdma", 0) - rdma,
                                 getattr(ds, "last_prefetcher", None))
        got8, gets8, regs8, rdma8, p = results[8]
        got0, gets0, _, _, _ = results[0]
        assert got8 == want and got0 == want
        # One GET per non-empty object either way, no HEAD (sizes come from the listing) ...
        assert gets8 == gets0 == n - 1, (gets8, gets0)
        # ... but in get_many batches of at most half the window: ceil(30 / 4) = 8 calls.
        assert p.batches == 8, p.batches
        assert p.peak_objects <= 8
        if fabric != "none":
            # Every GET went over RDMA, and each batch landed in one arena registered once.
            assert rdma8 == n - 1, rdma8
            assert regs8 == p.batches, (regs8, p.batches)
        # MapDataset read-ahead under a sequential sampler batches too.
        m = MapDataset.from_prefix(f"s3://{bucket}/g/", transform=lambda r: r.read(), client=c,
                                   shuffle=True, seed=7, prefetch=8)
        m.set_epoch(3)
        len(m)
        gets = _gets(c)
        assert [m[i] for i in range(len(m))] == want
        assert _gets(c) - gets == n - 1
        assert m.batches < n // 2, m.batches
        # A missing object fails its own turn only: what comes before it in its batch (and in
        # the batches before) is yielded first.
        import objdirect
        manifest = [(f"s3://{bucket}/g/{i:03d}", len(objs[f"g/{i:03d}"])) for i in range(9)]
        manifest[6] = (f"s3://{bucket}/g/missing", 10)
        it = iter(IterableDataset.from_manifest(manifest, transform=lambda r: r.read(),
                                                client=c, prefetch=8))
        assert [next(it) for _ in range(6)] == [objs[f"g/{i:03d}"] for i in range(6)]
        with pytest.raises(objdirect.NoSuchKey):
            next(it)


# -- where the objects come from ----------------------------------------------------------------


def test_from_objects_across_buckets_and_from_manifest_without_list_or_head(server, client,
                                                                            bucket):
    other = bucket[:50] + "-b2"
    client.create_bucket(other)
    try:
        a = fill(client, bucket, "m/", 3)
        b = fill(client, other, "n/", 2)
        uris = [f"s3://{other}/n/001", f"s3://{bucket}/m/000", f"s3://{other}/n/000",
                f"s3://{bucket}/m/002"]
        want = [b["n/001"], a["m/000"], b["n/000"], a["m/002"]]
        read = lambda r: (r.bucket, r.read())
        m = MapDataset.from_objects(uris, transform=read, **settings(server))
        assert [m[i][1] for i in range(4)] == want and m[0][0] == other
        it = IterableDataset.from_objects(uris, transform=read, **settings(server))
        assert [v for _, v in it] == want
        # A manifest gives sizes: no LIST and no HEAD reach the server.
        manifest = [(u, len(w)) for u, w in zip(uris, want)]
        before = len(access_log(server))
        it = IterableDataset.from_manifest(manifest, transform=read, **settings(server))
        assert [v for _, v in it] == want
        m = MapDataset.from_manifest([{"uri": u, "size": s} for u, s in manifest],
                                     transform=read, prefetch=2, **settings(server))
        assert [m[i][1] for i in range(4)] == want
        time.sleep(0.3)  # the server logs a request after its reply
        ops = {r["op"] for r in access_log(server)[before:]}
        assert ops == {"GetObject"}, ops
        with pytest.raises(ValueError):
            MapDataset.from_manifest([("s3://b/k", -1)], **settings(server))
    finally:
        for o in list(client.list(other)):
            client.delete(other, o.key)
        client.delete_bucket(other)


# -- torch.distributed: list once, shard by rank ------------------------------------------------

RANK = textwrap.dedent("""
    import json, sys
    import torch, torch.distributed as dist, torch.utils.data
    import objdirect.torch as odt
    endpoint, ak, sk, bucket, port, rank = sys.argv[1:7]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=int(rank),
                            world_size=2)
    ds = odt.IterableDataset.from_prefix(f"s3://{bucket}/d/", transform=lambda r: r.key,
                                         shard_by_rank=True, drop_last=True, shuffle=True,
                                         seed=5, endpoint=endpoint, access_key=ak,
                                         secret_key=sk, fabric="none")
    listed = odt.list_calls
    keys = list(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2))
    # MapDataset on the same list (no second LIST): this rank's share, batched by a DataLoader.
    def mapped(drop_last):
        return odt.MapDataset.from_manifest(ds.entries, transform=lambda r: r.key,
                                            shard_by_rank=True, drop_last=drop_last,
                                            shuffle=True, seed=5, endpoint=endpoint,
                                            access_key=ak, secret_key=sk, fabric="none")
    m = mapped(True)
    batches = list(torch.utils.data.DataLoader(m, batch_size=4, num_workers=2))
    uneven = mapped(False)
    resumed = mapped(True)
    resumed.load_state_dict({"epoch": 0, "seed": 5, "shuffle": True, "position": 3,
                             "num_samples": len(ds.entries)})
    dist.barrier()
    print(json.dumps({"keys": keys, "list_calls": listed, "len": len(ds),
                      "map_batches": batches, "map_len": len(m), "map_uneven": list(uneven),
                      "map_resumed": list(resumed), "map_listed": odt.list_calls - listed}))
    dist.destroy_process_group()
""")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_ranks_list_once_and_share_the_samples(server, client, bucket):
    objs = fill(client, bucket, "d/", 21)
    port = free_port()
    before = len(access_log(server))
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo")
    procs = [subprocess.Popen([sys.executable, "-c", RANK, server.endpoint, ACCESS_KEY,
                               SECRET_KEY, bucket, str(port), str(r)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(2)]
    outs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
            outs.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert [o["list_calls"] for o in outs] == [1, 0]  # rank 0 listed, rank 1 received it
    k0, k1 = outs[0]["keys"], outs[1]["keys"]
    assert len(k0) == len(k1) == 10 == outs[0]["len"]  # drop_last: 21 -> 2 x 10
    assert not set(k0) & set(k1) and set(k0) | set(k1) <= set(objs)
    order = [sorted(objs)[i] for i in epoch_order(21, True, 5, 0)]
    assert k0 == order[0:20:2] and k1 == order[1:20:2]
    # MapDataset with shard_by_rank: the same shares; drop_last keeps the ranks equal (10 each,
    # batches of 4, 4, 2 on both), without it rank 0 has the 21st sample; a resumed rank yields
    # the rest of its own share.
    for o, k in zip(outs, (k0, k1)):
        assert o["map_len"] == 10 and [len(b) for b in o["map_batches"]] == [4, 4, 2], o
        assert sum(o["map_batches"], []) == k
        assert o["map_resumed"] == k[3:]
        assert o["map_listed"] == 0
    assert outs[0]["map_uneven"] == order[0:21:2] and outs[1]["map_uneven"] == order[1:21:2]
    assert len(outs[0]["map_uneven"]) == 11 and len(outs[1]["map_uneven"]) == 10
    time.sleep(0.3)
    lists = [r for r in access_log(server)[before:]
             if r["op"].startswith("ListObjects") and r["bucket"] == bucket]
    assert len(lists) == 1, lists  # one LIST in the whole job (2 ranks x 2 workers)


# -- fork safety --------------------------------------------------------------------------------


@pytest.mark.parametrize("fabric", ["none", "libfabric:tcp", "libfabric:shm"])
def test_a_client_used_after_fork_reinitialises_itself(server, bucket, fabric):
    c = make_client(server, fabric=fabric)
    c.put(bucket, "f", b"before the fork")
    # Threads, connections and (over RDMA) a fabric endpoint and registrations now exist.
    assert c.get(bucket, "f") == b"before the fork"
    big = bytearray(1 << 20)
    assert c.get_into(bucket, "f", big).path == ("http" if fabric == "none" else "rdma")
    pid = os.fork()
    if pid == 0:  # the child: any failure is its exit status; it must never hang
        code = 1
        try:
            ok = c.get(bucket, "f") == b"before the fork"
            ok = ok and c.get_async(bucket, "f").result(30) == b"before the fork"
            ok = ok and c.get_into(bucket, "f", bytearray(64)).nbytes == 15
            c.put(bucket, "from-child", b"child")
            ok = ok and getattr(c, "reinitialised_after_fork", False)
            c.close()
            code = 0 if ok else 2
        finally:
            os._exit(code)
    deadline = time.monotonic() + 60
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hung")
        time.sleep(0.05)
    assert os.waitstatus_to_exitcode(status) == 0
    assert c.get(bucket, "from-child") == b"child"  # the parent's client still works
    c.close()


def _wait_child(pid, what):
    deadline = time.monotonic() + 60
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail(f"the forked child hung {what}")
        time.sleep(0.05)


@pytest.mark.parametrize("fabric", ["none", "libfabric:tcp", "libfabric:shm", "ucx"])
def test_a_client_the_child_never_used_is_freed_there_without_harm(server, bucket, fabric):
    """A DataLoader worker's garbage collector may free a Client (and a registration) it
    inherited but never used, kept alive in the parent only by a reference cycle. Destroying
    the parent's native client there would join threads that do not exist in the child: with
    libfabric tcp the child hung, and a DataLoader test ended in std::system_error ("No such
    process") and abort. The child must neither hang nor abort."""
    import gc
    c = make_client(server, fabric=fabric)
    c.put(bucket, "g", os.urandom(1 << 20))
    big = bytearray(1 << 20)
    assert c.get_into(bucket, "g", big).path == ("http" if fabric == "none" else "rdma")
    reg = c.register(big)
    gc.disable()
    try:
        cycle = {"client": c, "registration": reg}
        cycle["self"] = cycle
        del c, reg, cycle
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                gc.collect()
                code = 0
            finally:
                os._exit(code)
        assert _wait_child(pid, "freeing an inherited client") == 0
    finally:
        gc.enable()
        gc.collect()  # in the parent: the client and the registration are destroyed as usual


def test_a_fork_in_a_dataloader_worker_works(server, bucket):
    c = make_client(server)
    objs = fill(c, bucket, "w/", 12)
    # The transform captures the parent's Client itself, used in every forked worker.
    ds = MapDataset.from_prefix(f"s3://{bucket}/w/", client=c,
                                transform=lambda r: c.get(r.bucket, r.key))
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2, timeout=60,
                                         multiprocessing_context="fork")
    assert list(loader) == [objs[k] for k in sorted(objs)]
    assert c.get(bucket, "w/000") == objs["w/000"]
    c.close()


# -- into device memory -------------------------------------------------------------------------

FAKE_CUDA = pathlib.Path(os.environ.get("OBJDIRECT_BIN_DIR", "")).parent / "tests" / \
    "libobjdirect_fake_cuda.so"

DEVICE_CHILD = textwrap.dedent("""
    import ctypes, os, sys
    lib = ctypes.CDLL(os.environ["OBJDIRECT_CUDA_LIBRARY"])
    lib.fake_cuda_alias.restype = ctypes.c_void_p
    lib.fake_cuda_alias.argtypes = [ctypes.c_void_p]
    import objdirect, objdirect.torch as odt

    class DeviceArray:  # CuPy-like device memory the CPU must never touch (PROT_NONE)
        def __init__(self, n):
            p = ctypes.c_void_p()
            assert lib.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(max(n, 1))) == 0
            self.ptr, self.n = p.value, n
            self.__cuda_array_interface__ = {"shape": (n,), "typestr": "|u1",
                                             "data": (p.value, False), "strides": None,
                                             "version": 3}
        def bytes(self):
            return ctypes.string_at(lib.fake_cuda_alias(self.ptr), self.n)

    endpoint, ak, sk, bucket, fabric = sys.argv[1:6]
    c = objdirect.Client(endpoint=endpoint, access_key=ak, secret_key=sk, fabric=fabric)
    c.create_bucket(bucket)
    want = {f"x/{i}": os.urandom(1000 * (i + 1)) for i in range(6)}
    for k, v in want.items():
        c.put(bucket, k, v)
    t = odt.as_tensor(allocate=DeviceArray)
    for prefetch in (0, 3):
        ds = odt.IterableDataset.from_prefix(f"s3://{bucket}/x/", transform=t, client=c,
                                             prefetch=prefetch)
        got = list(ds)
        assert all(isinstance(g, DeviceArray) for g in got)
        assert [g.bytes() for g in got] == [want[k] for k in sorted(want)], prefetch
    m = odt.MapDataset.from_prefix(f"s3://{bucket}/x/", transform=t, client=c, prefetch=2)
    assert [m[i].bytes() for i in range(len(m))] == [want[k] for k in sorted(want)]
    print("device dataset ok")
""")


@pytest.mark.skipif(not FAKE_CUDA.exists(), reason=f"{FAKE_CUDA} not built")
@pytest.mark.parametrize("fabric", ["none", "libfabric:tcp"])
def test_dataset_lands_objects_in_device_memory_with_fake_cuda(server, fabric):
    env = dict(os.environ, OBJDIRECT_CUDA_LIBRARY=str(FAKE_CUDA),
               OBJDIRECT_CUDART_LIBRARY=str(FAKE_CUDA))
    bucket = "devds-" + fabric.replace(":", "-")
    p = subprocess.run([sys.executable, "-c", DEVICE_CHILD, server.endpoint, ACCESS_KEY,
                        SECRET_KEY, bucket, fabric], env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode != -signal.SIGSEGV, "the CPU touched device memory:\n" + p.stderr
    assert p.returncode == 0, p.stdout + p.stderr
    assert "device dataset ok" in p.stdout


def test_as_tensor_lands_objects_in_cpu_tensors(server, client, bucket):
    fill(client, bucket, "t/", 4, size=lambda i: 400)
    ds = IterableDataset.from_prefix(f"s3://{bucket}/t/", transform=as_tensor(torch.int32),
                                     **settings(server))
    got = list(ds)
    assert all(t.dtype == torch.int32 and t.numel() == 100 for t in got)
    assert bytes(got[2].numpy().tobytes()) == client.get(bucket, "t/002")
    ds = MapDataset.from_prefix(f"s3://{bucket}/t/", device="cpu", **settings(server))
    assert ds[1].dtype == torch.uint8 and bytes(ds[1].numpy()) == client.get(bucket, "t/001")
    fill(client, bucket, "odd/", 1, size=lambda i: 7)
    with pytest.raises(ValueError, match="whole number"):
        list(IterableDataset.from_prefix(f"s3://{bucket}/odd/", transform=as_tensor(torch.int32),
                                         **settings(server)))


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_workers_inherit_the_list_made_in_the_main_process(server, client, bucket, context):
    objs = fill(client, bucket, "l/", 9)
    before = len(access_log(server))
    ds = IterableDataset.from_prefix(f"s3://{bucket}/l/", transform=key_of, shuffle=True,
                                     **settings(server))
    assert len(ds) == 9  # lists here, once
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2, timeout=60,
                                         multiprocessing_context=context,
                                         persistent_workers=True)
    assert sorted(loader) == sorted(objs)
    assert sorted(loader) == sorted(objs)  # a second epoch lists nothing either
    time.sleep(0.3)
    lists = [r for r in access_log(server)[before:]
             if r["op"].startswith("ListObjects") and r["bucket"] == bucket]
    assert len(lists) == 1, lists


def test_enable_sharding_is_s3torchconnectors_switch(server, client, bucket):
    objs = fill(client, bucket, "e/", 6)
    for on, copies in ((True, 1), (False, 2)):
        ds = IterableDataset.from_prefix(f"s3://{bucket}/e/", transform=key_of,
                                         enable_sharding=on, **settings(server))
        ds.entries
        got = list(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2))
        assert sorted(got) == sorted(list(objs) * copies)


def test_a_listing_reports_its_progress_so_it_does_not_look_like_a_hang(server, client, bucket,
                                                                         monkeypatch, caplog):
    """list_progress(objects listed, done) every _LIST_PROGRESS_OBJECTS objects (lowered to 10
    here) and at the end, and the same as INFO lines of the objdirect.torch logger; a pickled
    dataset (what a spawned worker gets) leaves the callback behind."""
    import logging
    import pickle
    import objdirect.torch as odt
    fill(client, bucket, "p/", 25)
    monkeypatch.setattr(odt, "_LIST_PROGRESS_OBJECTS", 10)
    for cls in (MapDataset, IterableDataset):
        calls, before = [], odt.list_calls
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="objdirect.torch"):
            ds = cls.from_prefix(f"s3://{bucket}/p/", list_progress=lambda n, done:
                                 calls.append((n, done)), **settings(server))
            assert calls == []  # nothing is listed before the dataset is used
            assert len(ds.entries) == 25
        assert calls == [(10, False), (20, False), (25, True)], cls
        assert odt.list_calls == before + 1
        lines = [r.getMessage() for r in caplog.records if r.name == "objdirect.torch"]
        assert [m.split(" (")[0] for m in lines] == [
            f"listing: 10 objects under s3://{bucket}/p/",
            f"listing: 20 objects under s3://{bucket}/p/",
            f"listed 25 objects under s3://{bucket}/p/"], lines
        copy = pickle.loads(pickle.dumps(ds))
        assert copy._list_progress is None and len(copy.entries) == 25
