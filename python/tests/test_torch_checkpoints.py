"""objdirect.torch.save / load and the safetensors pair against the real objdirect-server:
nested state dicts with shared storages and views, exact range planning against Python's own
zipfile reader, bounded memory, aborted saves, the legacy-format fallback, and the parsers'
behaviour on damaged input (random mutations must give ValueError, nothing else).
"""

import io
import random
import struct
import tracemalloc
import zipfile

import pytest
import torch

import objdirect
import objdirect.torch as odt
from conftest import ACCESS_KEY, SECRET_KEY


def settings(server, **kw):
    return dict(endpoint=server.endpoint, access_key=ACCESS_KEY, secret_key=SECRET_KEY,
                fabric="none", **kw)


def nested_state():
    torch.manual_seed(3)
    w = torch.randn(64, 32)
    shared = torch.arange(100, dtype=torch.int64)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Linear(16, 2))
    return {
        "model": model.state_dict(),
        "opt": {"step": 17, "lr": 0.1, "buffers": [w, w[3:9], w.t()]},  # views of one storage
        "shared": {"a": shared, "b": shared, "tail": shared[90:]},
        "dtypes": {"bf16": torch.randn(33).to(torch.bfloat16), "bool": torch.rand(17) > 0.5,
                   "f16": torch.randn(5, 3).half(), "i8": torch.randint(-5, 5, (40,),
                                                                      dtype=torch.int8)},
        "empty": torch.empty(0, 4),
        "scalar": torch.tensor(2.5),
        "meta": ("epoch", 3, None, b"bytes"),
    }


def check_equal(a, b):
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape
        assert a.stride() == b.stride() and a.storage_offset() == b.storage_offset()
        assert torch.equal(a, b)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            check_equal(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            check_equal(x, y)
    else:
        assert a == b


def data_ptr(t):
    return t.storage().data_ptr()


def test_save_load_round_trips_nested_state_with_shared_storages_and_views(server, bucket):
    state = nested_state()
    uri = f"s3://{bucket}/ckpt/nested.pt"
    r = odt.save(state, uri, **settings(server))
    assert r.nbytes > 8000
    for loc in (None, "cpu", torch.device("cpu"), {"cpu": "cpu"}, lambda s, loc: s):
        stats = {}
        got = odt.load(uri, map_location=loc, stats=stats, **settings(server))
        check_equal(state, got)
        # Shared storages stay shared, views stay views of the loaded storage.
        b = got["opt"]["buffers"]
        assert data_ptr(b[0]) == data_ptr(b[1]) == data_ptr(b[2])
        assert got["shared"]["a"] is got["shared"]["b"]
        assert data_ptr(got["shared"]["tail"]) == data_ptr(got["shared"]["a"])
        got["shared"]["a"][95] = -1
        assert int(got["shared"]["tail"][5]) == -1
        # One storage per distinct saved storage, each fetched once.
        assert stats["storages"] == len({data_ptr(t) for t in _tensors(state)}) == 12
        assert stats["storage_bytes"] == sum(
            t.storage().nbytes() for t in {data_ptr(t): t for t in _tensors(state)}.values())
    # torch.load reads what save() wrote, and load() reads what torch.save wrote.
    with odt.Checkpoint(**settings(server)).reader(uri) as f:
        check_equal(state, torch.load(f))
    buf = io.BytesIO()
    torch.save(state, buf)
    objdirect.Client(**settings(server)).put(bucket, "ckpt/torch.pt", buf.getvalue())
    check_equal(state, odt.load(f"s3://{bucket}/ckpt/torch.pt", **settings(server)))


def _tensors(obj):
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _tensors(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _tensors(v)


def test_ranges_are_planned_exactly(server, client, bucket):
    state = nested_state()
    buf = io.BytesIO()
    torch.save(state, buf)
    raw = buf.getvalue()
    client.put(bucket, "plan.pt", raw)
    plan = odt.plan_torch_records(client, bucket, "plan.pt", len(raw))
    z = zipfile.ZipFile(io.BytesIO(raw))
    assert sorted(plan) == sorted(z.namelist())
    for info in z.infolist():
        off, n, _ = plan[info.filename]
        nlen, xlen = struct.unpack_from("<HH", raw, info.header_offset + 26)
        assert off == info.header_offset + 30 + nlen + xlen  # Python's zipfile agrees
        assert n == info.compress_size == info.file_size
        assert raw[off:off + n] == z.read(info.filename)
    # Each storage record's range is exactly the storage: its byte count, no more.
    storage_records = [n for n in plan if "/data/" in n]
    assert len(storage_records) == len({data_ptr(t) for t in _tensors(state)})


def _get_head_counts(c):
    req = c.stats()["requests"]
    return (sum(req.get("GetObject", {}).values()), sum(req.get("HeadObject", {}).values()))


def _expected_gets(raw):
    """GETs load() needs for an archive laid end to end: the tail (with the directory in it
    here), then one per non-empty record not wholly inside the tail."""
    z = zipfile.ZipFile(io.BytesIO(raw))
    tail_start = max(0, len(raw) - odt._TAIL_BYTES)
    out = 1
    for info in z.infolist():
        nlen, xlen = struct.unpack_from("<HH", raw, info.header_offset + 26)
        end = info.header_offset + 30 + nlen + xlen + info.compress_size
        if info.header_offset < tail_start and (info.compress_size or
                                                info.filename.endswith("data.pkl")):
            out += 1
        assert end <= len(raw)
    return out, len(z.infolist())


def test_load_fetches_each_record_with_its_local_header_in_one_get(server, client, bucket):
    torch.manual_seed(5)
    # 24 storages of 4..92 KiB (past the 64 KiB tail) and some small ones beside them.
    state = {f"w{i}": torch.randn(1024 * (1 + i % 23)) for i in range(24)}
    state.update(nested_state())
    from conftest import make_client
    with make_client(server, fabric="none") as c:
        for how in ("odt.save", "torch.save"):
            uri = f"s3://{bucket}/ckpt/gets-{how}.pt"
            if how == "odt.save":
                odt.save(state, uri, client=c)
            else:
                buf = io.BytesIO()
                torch.save(state, buf)
                c.put(bucket, f"ckpt/gets-{how}.pt", buf.getvalue())
            raw = c.get(bucket, f"ckpt/gets-{how}.pt")
            want_gets, nrecords = _expected_gets(raw)
            gets, heads = _get_head_counts(c)
            st = {}
            got = odt.load(uri, client=c, stats=st)
            gets, heads = (a - b for a, b in zip(_get_head_counts(c), (gets, heads)))
            check_equal(state, got)
            # One GET per record (header and bytes together) instead of a header GET and a
            # data GET each: the old plan's 2 + records + storages.
            assert (gets, heads) == (want_gets, 1), (how, gets, heads, want_gets)
            assert st["requests"] == gets + heads and st["mispredicted"] == 0
            assert gets < 2 + nrecords, (gets, nrecords)

        # A writer that leaves bytes between records (or writes data descriptors) breaks the
        # end-to-end prediction: the header check catches it and those records are read
        # exactly; the tensors are still right.
        buf = io.BytesIO()
        torch.save(state, buf)
        src = zipfile.ZipFile(io.BytesIO(buf.getvalue()))
        out = io.BytesIO()
        gaps = 0
        with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
            for i, info in enumerate(src.infolist()):
                z.writestr(info.filename, src.read(info.filename))
                if "/data/" in info.filename and info.file_size and i % 3 == 0:
                    z.fp.write(b"\0junk" * 20)  # a gap the central directory does not mention
                    z.start_dir = z.fp.tell()  # where zipfile writes the next record
                    gaps += 1
        c.put(bucket, "ckpt/gaps.pt", out.getvalue())
        st = {}
        check_equal(state, odt.load(f"s3://{bucket}/ckpt/gaps.pt", client=c, stats=st))
        assert gaps and st["mispredicted"] == gaps, (st, gaps)


def test_save_memory_is_bounded_and_load_allocates_no_host_buffers(server, bucket):
    mib = 1 << 20
    torch.manual_seed(1)
    state = {f"layer{i}": torch.randn(mib) for i in range(12)}  # 48 MiB
    uri = f"s3://{bucket}/ckpt/big.pt"
    tracemalloc.start()
    try:
        r = odt.save(state, uri, part_size=5 * mib, parts_in_flight=3, **settings(server))
        _, peak_save = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        got = odt.load(uri, **settings(server))
        _, peak_load = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert r.etag.endswith(tuple(f"-{n}" for n in range(9, 12))), r.etag  # 5 MiB parts
    # (parts_in_flight + 1) part buffers of 5 MiB plus one 4 MiB tensor record in torch.save.
    assert peak_save < 4 * 5 * mib + 4 * mib + 2 * mib, f"save peak {peak_save / mib:.1f} MiB"
    # load: tensor bytes land in the storages (torch's allocator, not traced); nothing of ours
    # holds them.
    assert peak_load < 2 * mib, f"load peak {peak_load / mib:.1f} MiB"
    for k, v in state.items():
        assert torch.equal(got[k], v)


class Explodes:
    def __reduce__(self):
        raise RuntimeError("serialization failed half way")


def test_an_exception_aborts_the_save_and_leaves_no_object(server, client, bucket):
    uri = f"s3://{bucket}/ckpt/crash.pt"
    odt.save({"old": torch.ones(3)}, uri, **settings(server))
    before = client.head(bucket, "ckpt/crash.pt").etag
    big = {f"t{i}": torch.randn(1 << 20) for i in range(4)}  # 16 MiB: parts are in flight
    with pytest.raises(RuntimeError, match="half way"):
        odt.save({"tensors": big, "z": Explodes()}, uri, part_size=5 << 20, **settings(server))
    assert client.head(bucket, "ckpt/crash.pt").etag == before  # the old object is untouched
    with pytest.raises(RuntimeError):
        odt.save({"tensors": big, "z": Explodes()}, f"s3://{bucket}/ckpt/new.pt",
                 part_size=5 << 20, **settings(server))
    with pytest.raises(objdirect.NoSuchKey):
        client.head(bucket, "ckpt/new.pt")
    with pytest.raises(objdirect.NoSuchBucket):
        odt.save({"x": 1}, "s3://no-such-bucket-here/x.pt", **settings(server))


def test_legacy_format_falls_back_to_torch_load(server, client, bucket):
    state = {"w": torch.randn(10), "n": 4}
    buf = io.BytesIO()
    torch.save(state, buf, _use_new_zipfile_serialization=False)
    client.put(bucket, "legacy.pt", buf.getvalue())
    got = odt.load(f"s3://{bucket}/legacy.pt", **settings(server))
    assert got["n"] == 4 and torch.equal(got["w"], state["w"])


def test_safetensors_round_trip_and_ranges(server, client, bucket):
    torch.manual_seed(2)
    tensors = {"w": torch.randn(16, 8), "b": torch.arange(8, dtype=torch.int64),
               "h": torch.randn(3).to(torch.bfloat16), "m": torch.rand(5) > 0.5,
               "e": torch.empty(0, 3)}
    uri = f"s3://{bucket}/w.safetensors"
    odt.save_safetensors(tensors, uri, metadata={"format": "pt"}, **settings(server))
    raw = client.get(bucket, "w.safetensors")
    n, = struct.unpack_from("<Q", raw, 0)
    entries, meta = odt.parse_safetensors_header(raw[8:8 + n], len(raw) - 8 - n)
    assert meta == {"format": "pt"} and (8 + n) % 8 == 0
    for name, t in tensors.items():
        dtype, shape, begin, end = entries[name]
        assert dtype == t.dtype and shape == list(t.shape) and end - begin == t.numel() * \
            t.element_size()
        assert raw[8 + n + begin:8 + n + end] == t.contiguous().view(torch.uint8).numpy(
        ).tobytes() if t.numel() else True
    got = odt.load_safetensors(uri, **settings(server))
    assert got.keys() == tensors.keys()
    for name in tensors:
        assert got[name].dtype == tensors[name].dtype and torch.equal(got[name], tensors[name])
    # A file written by hand (as the safetensors library does) loads too.
    data = struct.pack("<3f", 1.0, 2.0, 3.0)
    header = b'{"x":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}}'
    client.put(bucket, "hand.safetensors", struct.pack("<Q", len(header)) + header + data)
    x = odt.load_safetensors(f"s3://{bucket}/hand.safetensors", client=client)["x"]
    assert x.tolist() == [1.0, 2.0, 3.0]


def test_safetensors_header_limit_and_errors(server, client, bucket, monkeypatch):
    header = b'{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'
    client.put(bucket, "s", struct.pack("<Q", len(header)) + header + bytes(8))
    assert odt.load_safetensors(f"s3://{bucket}/s", client=client)["x"].tolist() == [0, 0]
    monkeypatch.setattr(odt, "safetensors_header_bytes_max", len(header) - 1)
    with pytest.raises(ValueError, match="safetensors_header_bytes_max"):
        odt.load_safetensors(f"s3://{bucket}/s", client=client)
    monkeypatch.undo()
    for bad in (b'{"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}',  # size != shape
                b'{"x":{"dtype":"Q9","shape":[2],"data_offsets":[0,8]}}',   # unknown dtype
                b'{"x":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}',  # past the data
                b'[1,2]', b'\xff\xfe'):
        with pytest.raises(ValueError):
            odt.parse_safetensors_header(bad, 8)


def test_zip_directory_limits(monkeypatch):
    buf = io.BytesIO()
    torch.save({"a": torch.ones(4)}, buf)
    raw = buf.getvalue()
    cd_off, cd_size, n = odt.parse_zip_tail(raw[-4096:], len(raw))
    assert n == len(zipfile.ZipFile(io.BytesIO(raw)).namelist())
    monkeypatch.setattr(odt, "zip_records_max", n - 1)
    with pytest.raises(ValueError, match="zip_records_max"):
        odt.parse_zip_tail(raw[-4096:], len(raw))
    monkeypatch.setattr(odt, "zip_records_max", 1 << 20)
    monkeypatch.setattr(odt, "zip_directory_bytes_max", cd_size - 1)
    with pytest.raises(ValueError, match="zip_directory_bytes_max"):
        odt.parse_zip_tail(raw[-4096:], len(raw))


def test_parsers_reject_damaged_input_with_value_error_only():
    """A small fuzz loop (fixed seed, a few thousand inputs) over the three parsers: any
    mutation of a real archive's tail and directory, or of a safetensors header, either parses
    to in-bounds records or raises ValueError."""
    buf = io.BytesIO()
    torch.save({"a": torch.ones(4), "b": [torch.zeros(2)]}, buf)
    raw = bytearray(buf.getvalue())
    rng = random.Random(16)
    header = bytearray(b'{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
                       b'"__metadata__":{"k":"v"}}')
    for _ in range(3000):
        m = bytearray(raw)
        for _ in range(rng.randint(1, 6)):
            i = rng.randrange(max(0, len(m) - 400), len(m))
            m[i] = rng.randrange(256)
        if rng.random() < 0.2:
            m = m[:rng.randrange(len(m))]
        try:
            cd_off, cd_size, n = odt.parse_zip_tail(bytes(m[-4096:]), len(m))
            recs = odt.parse_central_directory(bytes(m[cd_off:cd_off + cd_size]), n, len(m))
            for r in recs:
                off = odt.local_data_offset(bytes(m[r.header_offset:r.header_offset + 400]), r,
                                            len(m))
                assert 0 <= off and off + r.compressed_size <= len(m)
        except ValueError:
            pass
        h = bytearray(header)
        for _ in range(rng.randint(1, 4)):
            h[rng.randrange(len(h))] = rng.randrange(256)
        try:
            entries, _ = odt.parse_safetensors_header(bytes(h), 8)
            assert all(0 <= b <= e <= 8 for _, _, b, e in entries.values())
        except ValueError:
            pass
