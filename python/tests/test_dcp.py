"""objdirect.dcp: the planning functions without DCP (always), and save / load through
torch.distributed.checkpoint against the real server where torch >= 2.0 has a usable DCP
(skipped here on Debian 12's torch 1.13 with that reason; scripts/gpu-check.sh runs them on a
torch 2.x machine, where OBJDIRECT_REQUIRE_DCP=1 turns the skip into a failure)."""

import collections
import os
import random

import pytest

import objdirect.dcp as odd
from conftest import ACCESS_KEY, SECRET_KEY

Info = collections.namedtuple("Info", "relative_path offset length")
Item = collections.namedtuple("Item", "storage_index")


def test_plan_reads_sorts_coalesces_and_dedupes_per_object():
    md = {"a": Info("__0_0.distcp", 1000, 100), "b": Info("__0_0.distcp", 0, 500),
          "c": Info("__0_0.distcp", 520, 80), "d": Info("__1_0.distcp", 0, 10),
          "e": Info("__0_0.distcp", 10 << 20, 4)}
    items = [Item("a"), Item("e"), Item("b"), Item("d"), Item("c"), Item("a")]  # "a" twice
    plan = odd.plan_reads(items, md, gap_bytes=400)
    assert plan == [
        odd.ReadPlanEntry("__0_0.distcp", 0, 1100, ((0, 500), (520, 80), (1000, 100))),
        odd.ReadPlanEntry("__0_0.distcp", 10 << 20, 4, ((10 << 20, 4),)),
        odd.ReadPlanEntry("__1_0.distcp", 0, 10, ((0, 10),))]
    assert len(odd.plan_reads(items, md, gap_bytes=0)) == 5
    with pytest.raises(KeyError):
        odd.plan_reads([Item("zz")], md)


def test_plan_reads_covers_every_item_exactly_with_random_layouts():
    rng = random.Random(4)
    for _ in range(200):
        md, pos = {}, collections.Counter()
        for i in range(rng.randint(1, 40)):
            f = f"__{rng.randrange(3)}_0.distcp"
            n = rng.randrange(1, 5000)
            md[i] = Info(f, pos[f], n)
            pos[f] += n + rng.choice([0, 0, 10, 3000])
        items = [Item(rng.choice(list(md))) for _ in range(rng.randint(1, 60))]
        gap = rng.choice([0, 100, 1 << 20])
        plan = odd.plan_reads(items, md, gap_bytes=gap, group_bytes_max=1 << 14)
        for e in plan:  # a GET covers exactly its members, and stays within the cap or is one
            assert e.offset == min(o for o, _ in e.members)
            assert e.offset + e.length == max(o + n for o, n in e.members)
            assert e.length <= 1 << 14 or len(e.members) == 1
        want = {(md[it.storage_index].relative_path, md[it.storage_index].offset,
                 md[it.storage_index].length) for it in items}
        got = [(e.relative_path, o, n) for e in plan for o, n in e.members]
        assert sorted(got) == sorted(want)  # every stored range once, nothing else
        by_path = collections.defaultdict(list)
        for e in plan:
            by_path[e.relative_path].append(e.offset)
        assert all(v == sorted(v) for v in by_path.values())


def test_assign_files_balances_sizes():
    sizes = [100, 1, 50, 50, 7, 0]
    files = odd.assign_files(sizes, 2)
    assert sorted(i for f in files for i in f) == list(range(6))
    loads = sorted(sum(sizes[i] for i in f) for f in files)
    assert loads == [100, 108] or loads == [101, 107] or max(loads) - min(loads) <= 8
    assert odd.assign_files(sizes, 1) == [list(range(6))]
    assert len(odd.assign_files([5], 4)) == 1  # empty files are dropped
    with pytest.raises(ValueError):
        odd.assign_files(sizes, 0)


ok, why = odd.dcp_available()
needs_dcp = pytest.mark.skipif(not ok and not os.environ.get("OBJDIRECT_REQUIRE_DCP"),
                               reason=why or "DCP available")


def settings(server):
    return dict(endpoint=server.endpoint, access_key=ACCESS_KEY, secret_key=SECRET_KEY,
                fabric="none")


def test_without_dcp_the_classes_say_why():
    if ok:
        pytest.skip("torch.distributed.checkpoint is usable here")
    for cls, args in ((odd.StorageWriter, ("s3://b/k",)), (odd.StorageReader, ("s3://b/k",)),
                      (odd.S3StorageWriter, ("us-east-1", "s3://b/k")),
                      (odd.S3StorageReader, ("us-east-1", "s3://b/k"))):
        with pytest.raises(RuntimeError, match="torch >= 2.0"):
            cls(*args)


@needs_dcp
def test_dcp_under_s3torchconnector_names(server, client, bucket, monkeypatch):
    """s3torchconnector.dcp's S3StorageWriter(region, path, thread_count=) and
    S3StorageReader(region, path): a save and load through them, credentials from the
    environment as s3torchconnector takes them."""
    import torch
    import torch.distributed.checkpoint as dcp
    from objdirect.torch import S3ClientConfig
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    torch.manual_seed(2)
    state = {"w": torch.randn(64, 32), "b": torch.randn(32), "step": 3}
    uri = f"s3://{bucket}/s3names"
    cfg = S3ClientConfig(force_path_style=True)
    w = odd.S3StorageWriter("us-east-1", uri, s3client_config=cfg, thread_count=2,
                            endpoint=server.endpoint, fabric="none")
    assert w.files_per_rank == 2 and w.client.config["addressing_style"] == "path"
    dcp.save(state, storage_writer=w) if hasattr(dcp, "save") else dcp.save_state_dict(
        state, storage_writer=w, no_dist=True)
    target = {"w": torch.zeros(64, 32), "b": torch.zeros(32), "step": 0}
    r = odd.S3StorageReader("us-east-1", uri, s3client_config=cfg, endpoint=server.endpoint,
                            fabric="none")
    dcp.load(target, storage_reader=r) if hasattr(dcp, "load") else dcp.load_state_dict(
        target, storage_reader=r, no_dist=True)
    assert torch.equal(target["w"], state["w"]) and torch.equal(target["b"], state["b"])
    assert target["step"] == 3
    assert len([o for o in client.list(bucket, "s3names/") if o.key.endswith(".distcp")]) == 2
    with pytest.raises(NotImplementedError):
        odd.S3StorageWriter("us-east-1", uri, prefix_strategy=object())


@needs_dcp
def test_dcp_save_load_and_filesystem_layout(server, client, bucket, tmp_path):
    import torch
    import torch.distributed.checkpoint as dcp
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    # The model lives on the device: its tensors are written from device memory.
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.Linear(512, 8)).to(device)
    state = {"model": model.state_dict(), "step": 5, "extra": {"blob": b"x" * 100}}
    uri = f"s3://{bucket}/ckpt/step5"
    w = odd.StorageWriter(uri, files_per_rank=2, pinned_pool_bytes_max=64 << 10,
                          **settings(server))
    dcp.save_state_dict(state, storage_writer=w, no_dist=True) if not hasattr(dcp, "save") \
        else dcp.save(state, storage_writer=w)
    # Every tensor streamed (torch.save's bytes, no torch.save); a device tensor (the 512 KiB
    # weight among them) through the 64 KiB pinned pool, never a host copy of the tensor.
    assert w.last_stats["streamed"] == 4 and w.last_stats["torch.save"] == 0, w.last_stats
    assert w.last_stats["pool_high_water"] <= 64 << 10, w.last_stats
    if device == "cuda":
        assert w.last_stats["pool_high_water"] > 0, w.last_stats
    else:
        assert w.last_stats["pool_high_water"] == 0, w.last_stats  # contiguous CPU: none
    keys = sorted(o.key for o in client.list(bucket, "ckpt/step5/"))
    assert "ckpt/step5/.metadata" in keys and any(k.endswith(".distcp") for k in keys)
    target = {"model": {k: torch.zeros_like(v, device=device) for k, v in
                        model.state_dict().items()}, "step": 0, "extra": {"blob": b""}}
    r = odd.StorageReader(uri, **settings(server))
    dcp.load_state_dict(target, storage_reader=r, no_dist=True) if not hasattr(dcp, "load") \
        else dcp.load(target, storage_reader=r)
    for k, v in model.state_dict().items():
        assert torch.equal(target["model"][k].cpu(), v.cpu())
    assert r.last_plan and len(r.last_plan) <= 2 * 2  # coalesced: few GETs per file
    # Every tensor landed without torch.load: device destinations by a GET into device memory
    # each (the 4 tensors of the model), CPU ones copied out of the coalesced GETs.
    assert r.last_stats["fallback"] == 0, r.last_stats
    if device == "cuda":
        assert r.last_stats["direct_gets"] == 4, r.last_stats
    # torch's own FileSystemReader reads what StorageWriter wrote (copied to a directory).
    ours = tmp_path / "ours"
    ours.mkdir()
    for k in keys:
        (ours / k.rsplit("/", 1)[1]).write_bytes(client.get(bucket, k))
    target3 = {"model": {k: torch.zeros_like(v, device="cpu") for k, v in
                         model.state_dict().items()}, "step": 0, "extra": {"blob": b""}}
    fsr = dcp.FileSystemReader(str(ours))
    dcp.load(target3, storage_reader=fsr) if hasattr(dcp, "load") else dcp.load_state_dict(
        target3, storage_reader=fsr, no_dist=True)
    for k, v in model.state_dict().items():
        assert torch.equal(target3["model"][k], v.cpu())
    # What torch's own FileSystemWriter wrote, copied to the bucket, loads through the reader.
    fsw = dcp.FileSystemWriter(str(tmp_path / "fs"))
    dcp.save(state, storage_writer=fsw) if hasattr(dcp, "save") else dcp.save_state_dict(
        state, storage_writer=fsw, no_dist=True)
    for p in (tmp_path / "fs").iterdir():
        client.put(bucket, f"fs/{p.name}", p.read_bytes())
    target2 = {"model": {k: torch.zeros_like(v, device="cpu") for k, v in
                         model.state_dict().items()}, "step": 0, "extra": {"blob": b""}}
    r2 = odd.StorageReader(f"s3://{bucket}/fs", **settings(server))
    dcp.load(target2, storage_reader=r2) if hasattr(dcp, "load") else dcp.load_state_dict(
        target2, storage_reader=r2, no_dist=True)
    for k, v in model.state_dict().items():
        assert torch.equal(target2["model"][k], v.cpu())
    assert r2.last_stats["fallback"] == 0, r2.last_stats  # FileSystemWriter's blobs parse
    # async_save (torch >= 2.3) works with the writer.
    if hasattr(dcp, "async_save"):
        import torch.distributed as dist
        if not dist.is_initialized():
            dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{_port()}", rank=0,
                                    world_size=1)
        f = dcp.async_save(state, storage_writer=odd.StorageWriter(f"{uri}-async",
                                                                   **settings(server)))
        f.result()
        assert client.head(bucket, "ckpt/step5-async/.metadata").size > 0


def _port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_fetch_plan_issues_one_get_per_entry_concurrently_and_slices_exactly():
    import concurrent.futures
    import threading
    files = {"__0_0.distcp": bytes(range(256)) * 40,
             "__1_0.distcp": bytes(range(255, -1, -1)) * 4}
    md = {i: Info("__0_0.distcp", 100 * i, 60) for i in range(50)}
    md.update({100 + i: Info("__1_0.distcp", 200 * i, 150) for i in range(5)})
    items = [Item(k) for k in md]
    plan = odd.plan_reads(items, md, gap_bytes=40, group_bytes_max=2000)
    calls, active, peak = [], [0], [0]
    lock = threading.Lock()
    gate = threading.Barrier(2, timeout=10)

    def get(path, offset, length):
        with lock:
            calls.append((path, offset, length))
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        if len(calls) <= 2:
            gate.wait()  # the first two GETs must be in flight together
        with lock:
            active[0] -= 1
        return files[path][offset:offset + length]

    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        got = odd.fetch_plan(get, plan, ex)
    assert len(calls) == len(plan) and peak[0] >= 2
    for info in md.values():
        key = (info.relative_path, info.offset, info.length)
        assert bytes(got[key]) == files[info.relative_path][info.offset:info.offset +
                                                            info.length]
    with pytest.raises(ValueError, match="truncated"):
        odd.fetch_plan(lambda p, o, n: b"x", plan[:1])


# -- loads landing in the planner's tensors (read_items), torch 1.13 and a real server ----------

import enum  # noqa: E402
import io  # noqa: E402

LoadItemType = enum.Enum("LoadItemType", "TENSOR BYTE_IO")
ReadItem = collections.namedtuple(
    "ReadItem", "type storage_index storage_offsets lengths dest_index dest_offsets")


def _fsw_file(objs, path="__0_0.distcp"):
    """A .distcp file in FileSystemWriter's layout, by hand: each item appended at the file's
    position, tensors as torch.save blobs, BYTE_IO items raw; and its storage_data."""
    import torch
    f, md = io.BytesIO(), {}
    for idx, obj in objs:
        off = f.tell()
        if isinstance(obj, bytes):
            f.write(obj)
        else:
            torch.save(obj, f)
        md[idx] = Info(path, off, f.tell() - off)
    return f.getvalue(), md


def _tensor_item(idx, shape, dest, offsets=None, dest_offsets=None):
    offsets = tuple(offsets or (0,) * len(shape))
    return ReadItem(LoadItemType.TENSOR, idx, offsets, tuple(shape), dest,
                    tuple(dest_offsets or (0,) * len(shape)))


def test_parse_tensor_blob_and_region_match_torch_save():
    import torch
    cases = [torch.arange(12, dtype=torch.float32).reshape(3, 4), torch.zeros(0, 3),
             torch.tensor(5.0), torch.arange(20000.).reshape(100, 200),
             torch.ones(3, dtype=torch.bfloat16), torch.tensor([True, False]),
             torch.arange(10, dtype=torch.int64)[3:]]  # a view: storage_offset 3
    for t in cases:
        b = io.BytesIO()
        torch.save(t, b)
        blob = b.getvalue()
        lay = odd.parse_tensor_blob(blob[:odd.blob_head_bytes], blob[-odd.blob_tail_bytes:],
                                    len(blob))
        assert (lay.dtype, lay.size) == (t.dtype, tuple(t.shape))
        at, n = odd.tensor_region(lay, [0] * t.dim(), list(t.shape))
        want = t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() \
            else b""
        assert blob[at:at + n] == want
    m = torch.arange(24.).reshape(2, 3, 4)
    b = io.BytesIO()
    torch.save(m, b)
    blob = b.getvalue()
    lay = odd.parse_tensor_blob(blob, blob, len(blob))
    # Boxes that are one run: full trailing dimensions after the first narrowed one.
    for offs, lens in [((1, 0, 0), (1, 3, 4)), ((0, 1, 0), (1, 2, 4)), ((1, 2, 1), (1, 1, 3)),
                       ((0, 0, 0), (2, 3, 4))]:
        at, n = odd.tensor_region(lay, offs, lens)
        want = m[offs[0]:offs[0] + lens[0], offs[1]:offs[1] + lens[1],
                 offs[2]:offs[2] + lens[2]].contiguous().numpy().tobytes()
        assert blob[at:at + n] == want, (offs, lens)
    assert odd.tensor_region(lay, (0, 0, 0), (2, 3, 2)) is None  # columns: not one run
    assert odd.tensor_region(lay, (0, 1, 0), (2, 1, 4)) is None
    with pytest.raises(ValueError):
        odd.tensor_region(lay, (1, 0, 0), (2, 3, 4))  # outside the tensor
    b = io.BytesIO()
    torch.save(m.t() if m.dim() == 2 else m.transpose(0, 2), b)  # a non-contiguous save
    blob = b.getvalue()
    assert odd.tensor_region(odd.parse_tensor_blob(blob, blob, len(blob)), (0, 0, 0),
                             (4, 3, 2)) is None
    # What is not a plain tensor blob is refused (and a load falls back to torch.load).
    for obj in (torch.nn.Parameter(torch.ones(2)), {"a": torch.ones(2)}):
        b = io.BytesIO()
        torch.save(obj, b)
        blob = b.getvalue()
        with pytest.raises(ValueError):
            odd.parse_tensor_blob(blob, blob, len(blob))
    with pytest.raises(ValueError, match="not in the fetched"):
        big = io.BytesIO()
        torch.save(torch.ones(5000), big)
        blob = big.getvalue()
        odd.parse_tensor_blob(blob[:100], blob[-odd.blob_tail_bytes:], len(blob))
    assert odd.index_spans(100, False) == [(0, 100)]
    assert odd.index_spans(8192, True) == [(0, 8192)]
    assert odd.index_spans(9000, True) == [(0, 4096), (9000 - 4096, 4096)]


def _load_case():
    import torch
    g = torch.Generator().manual_seed(1)
    src = {
        "w": torch.randn(64, 300, generator=g),             # 76.8 KB: head and tail first
        "w2": torch.randn(128, 256, generator=g),           # read as two row boxes + columns
        "b": torch.randn(3, 4, generator=g),                # small: fetched whole
        "nc": torch.randn(8, 6, generator=g),               # into a transposed destination
        "dt": torch.randn(5, 5, generator=g, dtype=torch.float64),  # into float32
        "empty": torch.zeros(0, 4),
        "scalar": torch.tensor(3.5),
        "bf": torch.randn(7, generator=g).to(torch.bfloat16),
        "bool": torch.tensor([True, False, True]),
        "view": torch.arange(100, dtype=torch.int32)[10:50],  # saved with storage_offset 10
        "param": torch.nn.Parameter(torch.ones(4)),         # not a plain tensor blob
    }
    objs = [(k, v) for k, v in src.items()] + [("bytes", b"hello" * 100)]
    data, md = _fsw_file(objs)
    dest = {k: torch.zeros_like(v.detach()) for k, v in src.items()}
    dest["nc"] = torch.zeros(6, 8).t()
    dest["dt"] = torch.zeros(5, 5, dtype=torch.float32)
    dest["w2a"], dest["w2b"] = torch.zeros(64, 256), torch.zeros(64, 256)
    dest["w2c"] = torch.zeros(128, 128)
    items = [_tensor_item(k, tuple(src[k].shape), k) for k in src if k != "w2"]
    items += [_tensor_item("w2", (64, 256), "w2a"), _tensor_item("w2", (64, 256), "w2b", (64, 0)),
              _tensor_item("w2", (128, 128), "w2c", (0, 128)),
              ReadItem(LoadItemType.BYTE_IO, "bytes", (), (), "bytes", ())]
    return src, data, md, dest, items


@pytest.mark.parametrize("gap", [0, 1 << 20])
def test_read_items_lands_in_destinations_and_falls_back_exactly(server, client, bucket, gap):
    import concurrent.futures
    import torch
    src, data, md, dest, items = _load_case()
    client.put(bucket, "ck/__0_0.distcp", data)
    loaded, committed = {}, []

    def resolve(req):
        t = dest[req.dest_index]
        for d, (o, n) in enumerate(zip(req.dest_offsets, req.lengths)):
            t = t.narrow(d, o, n)
        return t

    def gets():
        req = client.stats()["requests"]
        return (sum(req.get("GetObject", {}).values()), sum(req.get("HeadObject", {}).values()))

    before = gets()
    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        stats = odd.read_items(
            items, md, executor=ex, gap_bytes=gap,
            get=lambda p, o, n: client.get(bucket, "ck/" + p, offset=o, length=n),
            get_into=lambda p, buf, o, n: client.get_into(bucket, "ck/" + p, buf, offset=o,
                                                          length=n).nbytes,
            resolve_tensor=resolve, commit_tensor=lambda req, t: committed.append(req),
            load_bytes=lambda req, f: loaded.__setitem__(req.storage_index, f.read()))
    after = gets()
    for k, v in src.items():
        if k != "w2":
            assert torch.equal(dest[k], v.detach().to(dest[k].dtype)), k
    assert torch.equal(dest["w2a"], src["w2"][:64]) and torch.equal(dest["w2b"], src["w2"][64:])
    assert torch.equal(dest["w2c"], src["w2"][:, 128:])
    assert loaded == {"bytes": b"hello" * 100}
    assert len(committed) == len(items) - 1  # every tensor item, none for the bytes
    assert stats["fallback_reasons"] == {"destination not contiguous": 1, "dtype differs": 1,
                                         "box not contiguous in the saved tensor": 1,
                                         "blob not parsed": 1}
    assert stats["empty"] == 1
    if gap == 0:
        # The two large blobs: head and tail only at first, then each box in one GET straight
        # into its destination (w, w2's two row boxes); the column box fetches w2 whole.
        assert stats["direct_gets"] == 3 and stats["bytes_direct"] == (64 * 300 + 128 * 256) * 4
        assert after[0] - before[0] == stats["index_gets"] + 3 + 1
        assert stats["index_gets"] == len(odd.plan_load(items, md, gap_bytes=0))
    else:
        # One GET covers the whole file: every box is copied out of it, nothing more is fetched.
        assert stats["index_gets"] == 1 and stats["direct_gets"] == 0
        assert after[0] - before[0] == 1
    assert after[1] == before[1]  # no HEAD


def test_read_items_reports_a_truncated_checkpoint(server, client, bucket):
    import torch
    data, md = _fsw_file([("t", torch.ones(4000))])
    client.put(bucket, "tr", data[:-10])
    dest = torch.zeros(4000)
    kw = dict(get=lambda p, o, n: client.get(bucket, "tr", offset=o, length=n),
              get_into=lambda p, buf, o, n: client.get_into(bucket, "tr", buf, offset=o,
                                                            length=n).nbytes,
              resolve_tensor=lambda req: dest, commit_tensor=lambda req, t: None,
              load_bytes=None)
    with pytest.raises(ValueError, match="truncated"):
        odd.read_items([_tensor_item("t", (4000,), "t")], md, **kw)


def test_parse_tensor_blob_rejects_damaged_blobs_with_value_error_only(tmp_path):
    """A mutation loop over parse_tensor_blob and tensor_region (the zip directory, local
    headers, data.pkl through the restricted unpickler), fed with torch.save blobs of several
    tensors and two write_tensor_blob blobs with zip64 fields: each input gives a layout whose
    box lies inside the blob, or raises ValueError, nothing else, quickly and within bounded
    memory (test_torch_checkpoints.fuzz_loop, seeded the same way)."""
    import torch
    from test_torch_checkpoints import _mutate, fuzz_loop, fuzz_settings
    seed, iterations = fuzz_settings()
    corpus = []
    for t in (torch.arange(12.).reshape(3, 4), torch.zeros(0, 2), torch.tensor(1, dtype=torch.int8),
              torch.arange(6000, dtype=torch.int16), torch.ones(2, 3, dtype=torch.bfloat16).t()):
        b = io.BytesIO()
        torch.save(t, b)
        corpus.append(b.getvalue())
    for zip64_from in (1, 64):  # blobs with zip64 fields (at a lowered threshold)
        b = io.BytesIO()
        odd.write_tensor_blob(b, torch.arange(600, dtype=torch.int16), _zip64_from=zip64_from)
        corpus.append(b.getvalue())

    def parse(m, _):
        n = len(m)
        lay = odd.parse_tensor_blob(m[:odd.blob_head_bytes], m[-odd.blob_tail_bytes:], n)
        region = odd.tensor_region(lay, [0] * len(lay.size), list(lay.size))
        if region is not None:
            assert 0 <= region[0] and region[0] + region[1] <= n, (region, n)

    rejected, slowest, peak = fuzz_loop(
        tmp_path, seed, iterations,
        lambda rng: (bytes(_mutate(rng, bytearray(rng.choice(corpus)))), "", None), parse)
    print(f"fuzz: {rejected} of {iterations} blobs rejected, slowest {slowest * 1000:.1f} CPU-ms, "
          f"traced peak {peak / 1024:.0f} KiB")


# -- tensor blobs written from the tensor's memory (write_tensor_blob) ---------------------------

def _writer_cases():
    import torch
    torch.manual_seed(3)
    big = torch.randn(64, 48)
    return {
        "float32": torch.randn(5, 7),
        "bool": torch.rand(13) > 0.5,
        "bfloat16": torch.randn(4, 9).to(torch.bfloat16),
        "float16": torch.randn(3, 3, 3).half(),
        "int8": torch.randint(-128, 127, (33,), dtype=torch.int8),
        "int64": torch.arange(-20, 20),
        "empty": torch.empty(0, 3),
        "empty_bool": torch.empty(0, dtype=torch.bool),
        "scalar": torch.tensor(2.5, dtype=torch.float64),
        "transposed_view": big.t()[5:40],
        "strided_view": big[::3, 1::2],
        "row_slice_of_a_bigger_storage": big[10:20],
        "parameter": torch.nn.Parameter(torch.randn(6, 10)),
        "complex_conj_view": torch.randn(4, 3, dtype=torch.complex64).conj(),
    }


def _torch_save_bytes(t):
    import io
    import torch
    b = io.BytesIO()
    fresh = torch.empty(t.shape, dtype=t.dtype)  # row-major strides, extent-1 dimensions too
    fresh.copy_(t.detach())
    torch.save(fresh, b)
    return b.getvalue()


def _records(blob):
    import io
    import zipfile
    with zipfile.ZipFile(io.BytesIO(blob)) as z:
        assert z.testzip() is None  # every record's CRC32 is right
        return {i.filename: z.read(i) for i in z.infolist()
                if not i.filename.endswith("serialization_id")}


@pytest.mark.parametrize("name", sorted(_writer_cases()))
def test_write_tensor_blob_is_what_torch_save_writes(name):
    import io
    import torch
    t = _writer_cases()[name]
    pool = odd.HostChunkPool(256, pin=False)  # 2 chunks of 128 bytes: views go in pieces
    b = io.BytesIO()
    assert odd.write_tensor_blob(b, t, pool=pool) == "streamed"
    blob = b.getvalue()
    ref = _torch_save_bytes(t)
    if ref == _torch_save_bytes(t):  # torch.save deterministic (1.13): byte for byte
        assert blob == ref
    else:  # torch writes a serialization id per save: the same records otherwise
        assert _records(blob) == _records(ref)
    assert _records(blob) == _records(ref)
    got = torch.load(io.BytesIO(blob))
    assert type(got) is torch.Tensor and got.dtype == t.dtype and got.is_contiguous()
    assert torch.equal(got, t.detach())
    lay = odd.parse_tensor_blob(blob, blob, len(blob))
    assert (lay.dtype, lay.size, lay.storage_offset) == (t.dtype, tuple(t.shape), 0)
    assert lay.data_bytes == t.numel() * t.element_size()
    if t.numel():
        assert blob[lay.data_offset:lay.data_offset + lay.data_bytes] == \
            got.reshape(-1).view(torch.uint8).numpy().tobytes()
    assert pool.high_water <= pool.bytes_max
    if t.is_contiguous():
        assert pool.high_water == 0  # a contiguous CPU tensor needs no staging


def test_write_tensor_blob_streams_a_contiguous_cpu_tensor_from_its_own_memory():
    import io
    import torch
    t = torch.randn(1000, 100)
    t_bytes = t.numel() * t.element_size()

    class Recorder(io.RawIOBase):
        def __init__(self):
            self.writes, self.out = [], io.BytesIO()

        def write(self, b):
            mv = memoryview(b)
            self.writes.append((len(mv), _address(mv)))
            return self.out.write(mv)

    r = Recorder()
    assert odd.write_tensor_blob(r, t) == "streamed"  # no pool needed
    storage_writes = [(n, addr) for n, addr in r.writes if n == t_bytes]
    assert storage_writes == [(t_bytes, t.data_ptr())]  # one write, of the tensor's own memory
    assert max(n for n, _ in r.writes if n != t_bytes) < 4096
    assert torch.equal(torch.load(io.BytesIO(r.out.getvalue())), t)
    with pytest.raises(ValueError, match="pool"):
        odd.write_tensor_blob(io.BytesIO(), t.t())  # a view without a pool


def _address(mv):
    import numpy as np
    return np.frombuffer(mv, dtype=np.uint8).ctypes.data if len(mv) else 0


def test_host_chunk_pool_bound_holds_for_a_large_view():
    import io
    import torch
    t = torch.randn(512, 512).t()  # 1 MiB, not contiguous
    pool = odd.HostChunkPool(64 << 10, pin=False)
    b = io.BytesIO()
    odd.write_tensor_blob(b, t, pool=pool)
    assert torch.equal(torch.load(io.BytesIO(b.getvalue())), t)
    assert pool.high_water == 64 << 10 == pool.bytes_max  # both chunks used, never more
    p = odd.HostChunkPool(256, chunks=2, pin=False)
    p.take(), p.take()
    with pytest.raises(RuntimeError, match="exhausted"):
        p.take()
    with pytest.raises(ValueError):
        odd.HostChunkPool(64, chunks=2)


def test_write_tensor_blob_without_a_typed_storage_goes_through_torch_save(monkeypatch):
    """A dtype torch pickles without a typed storage class (float8 on torch 2.x; here float32
    declared so) is written by torch.save of its host copy: a view's bytes only."""
    import io
    import torch
    real = odd._has_typed_storage
    monkeypatch.setattr(odd, "_has_typed_storage", lambda dt: dt != torch.float32 and real(dt))
    big = torch.randn(40, 10)
    for t in (big, big[5:9], big.t()):
        b = io.BytesIO()
        assert odd.write_tensor_blob(b, t) == "torch.save"
        assert b.getvalue() == _torch_save_bytes(t) or _records(b.getvalue()) == \
            _records(_torch_save_bytes(t))
        got = torch.load(io.BytesIO(b.getvalue()))
        assert torch.equal(got, t) and got.numel() * 4 == len(
            _records(b.getvalue())["archive/data/0"])  # a view's bytes only
    assert odd.write_tensor_blob(io.BytesIO(), big.int()) == "streamed"


def _zip_walk(blob):
    """An independent reading of a stored zip as torch writes it: [(name, local header offset,
    local zip64 values, data offset, data length, descriptor length)] in file order, the central
    directory's {name: (32-bit csize, usize, offset fields, zip64 values)}, and the end record's
    (32-bit directory size, directory offset) with the zip64 end record's (count, size, offset).
    """
    import struct

    def zip64(extra):
        x = 0
        while x < len(extra):
            tag, n = struct.unpack_from("<HH", extra, x)
            if tag == 1:
                return list(struct.unpack_from(f"<{n // 8}Q", extra, x + 4))
            x += 4 + n
        return []

    eocd = blob.rindex(b"PK\x05\x06")
    _, _, _, _, k, cd_size32, cd_off32, _ = struct.unpack_from("<IHHHHIIH", blob, eocd)
    loc = struct.unpack_from("<IIQI", blob, eocd - 20)
    assert loc[0] == 0x07064B50
    e64 = struct.unpack_from("<IQHHIIQQQQ", blob, loc[2])
    assert e64[0] == 0x06064B50 and e64[1] == 44
    count, cd_size, cd_off = e64[7], e64[8], e64[9]
    central, pos = {}, cd_off
    for _ in range(count):
        f = struct.unpack_from("<IHHHHHHIIIHHHHHII", blob, pos)
        assert f[0] == 0x02014B50
        name = blob[pos + 46:pos + 46 + f[10]].decode()
        extra = blob[pos + 46 + f[10]:pos + 46 + f[10] + f[11]]
        central[name] = (f[8], f[9], f[16], zip64(extra), f[7])
        pos += 46 + f[10] + f[11] + f[12]
    assert pos == cd_off + cd_size
    local, pos = [], 0
    while pos < cd_off:
        f = struct.unpack_from("<IHHHHHIIIHH", blob, pos)
        assert f[0] == 0x04034B50 and f[6:9] == (0, 0, 0)  # CRC and sizes in the descriptor
        name = blob[pos + 30:pos + 30 + f[9]].decode()
        extra = blob[pos + 30 + f[9]:pos + 30 + f[9] + f[10]]
        data = pos + 30 + f[9] + f[10]
        c = central[name]
        n = c[3][0] if c[0] == 0xFFFFFFFF else c[0]
        desc = 0
        if f[2] & 8:
            assert struct.unpack_from("<I", blob, data + n)[0] == 0x08074B50
            nxt = [o for o in [cd_off] + [v[2] if v[2] != 0xFFFFFFFF else v[3][-1]
                                          for v in central.values()] if o > data]
            desc = min(nxt) - data - n
        local.append((name, pos, zip64(extra), data, n, desc))
        pos = data + n + desc
    assert pos == cd_off
    return local, central, (cd_size32, cd_off32), (count, cd_size, cd_off)


@pytest.mark.parametrize("zip64_from", [1, 64, 100, 4096, 40000])
def test_write_tensor_blob_writes_zip64_fields_where_torch_does(zip64_from):
    """The zip64 layout at a lowered threshold (a record's size or offset from zip64_from up:
    torch's is 0xFFFFFFFF, and test_zip64_blob.py checks a > 4 GiB blob against torch.save byte
    for byte): a local header's zip64 field holds (size, 0) for a big record and the offset for
    one that starts at or past it, a 24-byte data descriptor follows either, the central
    directory saturates the 32-bit fields at 0xFFFFFFFF with the values in its zip64 field,
    the end record saturates the directory's offset and size; Python's zipfile and both of
    ObjDirect's parsers read it. (torch.load's miniz compares the saturated 32-bit fields
    with the archive's size, so it reads such fields only in an archive over 4 GiB:
    test_zip64_blob.py.)"""
    import io
    import struct
    import torch
    import objdirect.torch as odt
    t = torch.arange(3000, dtype=torch.int32).reshape(30, 100)  # a 12,000-byte storage
    b = io.BytesIO()
    assert odd.write_tensor_blob(b, t, _zip64_from=zip64_from) == "streamed"
    blob = b.getvalue()
    local, central, (cd_size32, cd_off32), (count, cd_size, cd_off) = _zip_walk(blob)
    # torch.save's records (1.13: data.pkl, data/0, version; torch 2.x adds its own), in order
    assert [x[0] for x in local] == [n for n, _ in odd._blob_template(t.dtype, False)]
    for name, off, z64, data, n, desc in local:
        big_size, big_off = n >= zip64_from, off >= zip64_from
        assert z64 == [n, 0] * big_size + [off] * big_off, name
        assert desc == (24 if big_size or big_off else 16), name
        if name.endswith("data/0"):
            assert data % 64 == 0 and blob[data:data + n] == t.numpy().tobytes()
        csize, usize, coff, cz64, _ = central[name]
        sat = 0xFFFFFFFF
        assert (csize, usize, coff) == (sat if big_size else n, sat if big_size else n,
                                        sat if big_off else off), name
        assert cz64 == [n, n] * big_size + [off] * big_off, name
        crc, = struct.unpack_from("<I", blob, data + n + 4)
        assert crc == central[name][4]
    assert count == len(local) and cd_off32 == (0xFFFFFFFF if cd_off >= zip64_from else cd_off)
    assert cd_size32 == (0xFFFFFFFF if cd_size >= zip64_from else cd_size)
    assert _records(blob) == _records(_torch_save_bytes(t))  # zipfile: every CRC checked
    records = odt.parse_central_directory(blob[cd_off:cd_off + cd_size], count, len(blob))
    assert odt.parse_zip_tail(blob[-4096:], len(blob)) == (cd_off, cd_size, count)
    assert [(r.name, r.compressed_size, r.header_offset) for r in records] == \
        [(x[0], x[4], x[1]) for x in local]
    lay = odd.parse_tensor_blob(blob[:odd.blob_head_bytes], blob[-odd.blob_tail_bytes:],
                                len(blob))
    data0 = next(x for x in local if x[0].endswith("/data/0"))
    assert (lay.data_offset, lay.data_bytes, lay.size) == (data0[3], 12000, (30, 100))
    if zip64_from >= 40000:  # nothing reaches it: torch.save's bytes (where deterministic)
        assert torch.equal(torch.load(io.BytesIO(blob)), t)
        if _torch_save_bytes(t) == _torch_save_bytes(t):
            assert blob == _torch_save_bytes(t)


def test_written_blobs_load_through_read_items_from_the_real_server(server, client, bucket):
    import concurrent.futures
    import torch
    from objdirect.objects import ObjectWriter
    src = {k: v.detach() for k, v in _writer_cases().items()}
    src["large"] = torch.randn(3 << 20)  # 12 MiB: several parts
    md = {}
    pool = odd.HostChunkPool(1 << 20, pin=False)
    with ObjectWriter(client, bucket, "wck/__0_0.distcp", part_size=5 << 20,
                      parts_in_flight=2) as w:
        for k, t in src.items():
            off = w.tell()
            odd.write_tensor_blob(w, t, pool=pool)
            md[k] = Info("__0_0.distcp", off, w.tell() - off)
    assert w.buffers_allocated <= 3 and pool.high_water <= 1 << 20
    dest = {k: torch.zeros(t.shape, dtype=t.dtype) for k, t in src.items()}
    items = [_tensor_item(k, tuple(t.shape), k) for k, t in src.items()]
    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        stats = odd.read_items(
            items, md, executor=ex,
            get=lambda p, o, n: client.get(bucket, "wck/" + p, offset=o, length=n),
            get_into=lambda p, buf, o, n: client.get_into(bucket, "wck/" + p, buf, offset=o,
                                                          length=n).nbytes,
            resolve_tensor=lambda req: dest[req.dest_index],
            commit_tensor=lambda req, t: None, load_bytes=None)
    assert stats["fallback"] == 0, stats
    for k, t in src.items():
        assert torch.equal(dest[k], t), k


gpu = False
try:
    import torch as _torch
    gpu = _torch.cuda.is_available()
except ImportError:
    pass


@pytest.mark.skipif(not gpu and not os.environ.get("OBJDIRECT_REQUIRE_GPU"),
                    reason="no CUDA device on this machine")
def test_write_tensor_blob_from_device_memory_through_the_bounded_pinned_pool():
    import io
    import torch
    base = torch.randn(2048, 2048, device="cuda")  # 16 MiB
    for t in (base, base.t()[3:1000], base.to(torch.bfloat16)):
        pool = odd.HostChunkPool(1 << 20)  # pinned, 2 chunks of 512 KiB
        b = io.BytesIO()
        assert odd.write_tensor_blob(b, t, pool=pool) == "streamed"
        assert pool.high_water <= 1 << 20  # no host copy of the whole tensor
        assert pool._free and all(c.is_pinned() for c in pool._free)
        got = torch.load(io.BytesIO(b.getvalue()))
        assert torch.equal(got, t.cpu())
        assert _records(b.getvalue()) == _records(_torch_save_bytes(t.cpu()))


def test_write_tensor_blob_round_trips_random_views_and_pool_sizes():
    import io
    import torch
    rng = random.Random(16)
    dtypes = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8,
              torch.uint8, torch.int16, torch.int32, torch.int64, torch.bool]
    for _ in range(60):
        dims = [rng.randint(0, 9) for _ in range(rng.randint(0, 4))]
        base = (torch.randn(dims) * 50).to(rng.choice(dtypes))
        t = base
        for d in range(t.dim()):  # a random slice with a random step in each dimension
            if t.size(d) > 1 and rng.random() < 0.5:
                lo = rng.randint(0, t.size(d) - 1)
                t = t.narrow(d, lo, rng.randint(1, t.size(d) - lo))[
                    (slice(None),) * d + (slice(None, None, rng.randint(1, 3)),)]
        if t.dim() >= 2 and rng.random() < 0.5:
            t = t.transpose(0, t.dim() - 1)
        pool = odd.HostChunkPool(64 * rng.choice([2, 4, 16]), chunks=rng.choice([1, 2]),
                                 pin=False)
        b = io.BytesIO()
        odd.write_tensor_blob(b, t, pool=pool)
        assert _records(b.getvalue()) == _records(_torch_save_bytes(t)), (t.shape, t.stride())
        assert torch.equal(torch.load(io.BytesIO(b.getvalue())), t)
        assert pool.high_water <= pool.bytes_max


def test_read_items_lands_in_a_one_element_destination_with_any_stride(server, client, bucket):
    import torch
    src = {"a": torch.tensor([7.5]), "b": torch.arange(6.).reshape(6, 1)}
    data, md = _fsw_file(list(src.items()))
    client.put(bucket, "one/__0_0.distcp", data)
    # contiguous by torch's rule (extent-1 dimensions' strides ignored), strides not 1
    dest = {"a": torch.zeros(8)[::4][:1], "b": torch.zeros(6, 3)[:, :1]}
    assert dest["a"].is_contiguous() and dest["a"].stride() == (4,)
    items = [_tensor_item(k, tuple(t.shape), k) for k, t in src.items()]
    stats = odd.read_items(
        items, md, gap_bytes=0,
        get=lambda p, o, n: client.get(bucket, "one/" + p, offset=o, length=n),
        get_into=lambda p, buf, o, n: client.get_into(bucket, "one/" + p, buf, offset=o,
                                                      length=n).nbytes,
        resolve_tensor=lambda req: dest[req.dest_index], commit_tensor=lambda req, t: None,
        load_bytes=None)
    assert torch.equal(dest["a"], src["a"]) and stats["fallback_reasons"] == {
        "destination not contiguous": 1}, stats  # b: a column of a wider tensor
    assert torch.equal(dest["b"], src["b"])
