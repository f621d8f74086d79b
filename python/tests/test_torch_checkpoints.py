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
    """GETs load() needs for an archive laid end to end: the first 64 KiB (the size comes with
    it: no HEAD), the tail (with the directory in it here) unless the first GET held the whole
    archive, then one per non-empty record not wholly inside the tail, but for data.pkl and
    the other small records read as bytes when the first GET holds them."""
    z = zipfile.ZipFile(io.BytesIO(raw))
    tail_start = max(0, len(raw) - odt._TAIL_BYTES)
    out = 1 if len(raw) <= odt._HEAD_BYTES else 2
    for info in z.infolist():
        nlen, xlen = struct.unpack_from("<HH", raw, info.header_offset + 26)
        end = info.header_offset + 30 + nlen + xlen + info.compress_size
        if "/data/" not in info.filename and end <= odt._HEAD_BYTES:
            continue
        if info.header_offset < tail_start and (info.compress_size or
                                                info.filename.endswith("data.pkl")):
            out += 1
        assert end <= len(raw)
    return out, len(z.infolist())


def test_load_sends_no_head_and_reads_a_small_checkpoint_in_one_get(server, bucket):
    """load()'s first GET (64 KiB) gives the size: a checkpoint that small is then in hand whole
    (1 GET, no HEAD); an empty object is refused as torch.load refuses it."""
    from conftest import make_client
    state = {"a": torch.arange(10.), "b": {"c": torch.ones(3, dtype=torch.int8)}, "n": 7}
    buf = io.BytesIO()
    torch.save(state, buf)
    assert len(buf.getvalue()) <= odt._HEAD_BYTES
    with make_client(server, fabric="none") as c:
        c.put(bucket, "small.pt", buf.getvalue())
        before = _get_head_counts(c)
        st = {}
        check_equal(state, odt.load(f"s3://{bucket}/small.pt", client=c, stats=st))
        gets, heads = (a - b for a, b in zip(_get_head_counts(c), before))
        assert (gets, heads, st["requests"]) == (1, 0, 1), (gets, heads, st)
        c.put(bucket, "empty.pt", b"")
        with pytest.raises(Exception) as e:
            odt.load(f"s3://{bucket}/empty.pt", client=c)
        with pytest.raises(type(e.value)):
            torch.load(io.BytesIO(b""))


def test_load_fetches_each_record_with_its_local_header_in_one_get(server, client, bucket,
                                                                  monkeypatch):
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

            def load(**limits):
                for k, v in limits.items():
                    monkeypatch.setattr(odt, k, v)
                before = _get_head_counts(c)
                st = {}
                got = odt.load(uri, client=c, stats=st)
                check_equal(state, got)
                gets, heads = (a - b for a, b in zip(_get_head_counts(c), before))
                assert heads == 0 and st["requests"] == gets, (st, gets, heads)
                assert st["mispredicted"] == 0, st
                return gets, st

            # No coalescing: one GET per record (header and bytes together) instead of a
            # header GET and a data GET each, the first version's 2 + records + storages.
            gets, st = load(load_coalesce_record_bytes_max=0)
            assert gets == want_gets and st["groups"] == 0, (how, gets, want_gets)
            assert gets < 2 + nrecords, (gets, nrecords)
            # Default: the small storages outside the tail lie next to each other and share
            # one GET: the tail, data.pkl and one group.
            gets, st = load(load_coalesce_record_bytes_max=1 << 20)
            assert (gets, st["groups"]) == (3, 1), (how, gets, st)
            # Groups of at most 200 KiB: several GETs, still far fewer than records.
            gets, st = load(load_group_bytes_max=200 << 10)
            assert 3 < gets < want_gets and st["groups"] > 1, (how, gets, st)
            monkeypatch.setattr(odt, "load_group_bytes_max", 16 << 20)

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
    # (parts_in_flight + 1) part buffers of 5 MiB: torch.save hands the writer each storage's
    # memory, which goes straight into a part (no copy of a storage).
    assert peak_save < 4 * 5 * mib + 2 * mib, f"save peak {peak_save / mib:.1f} MiB"
    # load: tensor bytes land in the storages (torch's allocator, not traced); nothing of ours
    # holds them.
    assert peak_load < 2 * mib, f"load peak {peak_load / mib:.1f} MiB"
    for k, v in state.items():
        assert torch.equal(got[k], v)


def thp_mode():
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            return f.read().split("[")[1].split("]")[0]
    except (OSError, IndexError):
        return "unavailable"


def advised_huge(ptr):
    """Whether the mapping holding address ptr carries MADV_HUGEPAGE ("hg" in VmFlags)."""
    with open("/proc/self/smaps") as f:
        inside = False
        for line in f:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                lo, hi = (int(x, 16) for x in head.split("-"))
                inside = lo <= ptr < hi
            elif inside and head == "VmFlags:":
                return "hg" in line.split()[1:]
    return False


@pytest.mark.skipif(thp_mode() != "madvise", reason="transparent huge pages are not in madvise "
                    "mode here: " + thp_mode())
def test_load_advises_huge_pages_for_large_cpu_storages(server, bucket):
    """Large CPU storages (load_huge_pages_bytes_min and up) are advised for huge pages before
    their bytes land (torch's allocator alone does not advise). load and load_safetensors."""
    state = {"big": torch.arange(3 << 20, dtype=torch.int32),  # 12 MiB
             "small": torch.arange(1000, dtype=torch.int32)}
    uri = f"s3://{bucket}/ckpt/huge.pt"
    odt.save(state, uri, **settings(server))
    got = odt.load(uri, **settings(server))
    assert torch.equal(got["big"], state["big"]) and torch.equal(got["small"], state["small"])
    assert advised_huge(data_ptr(got["big"]) + (4 << 20))
    st_uri = f"s3://{bucket}/ckpt/huge.safetensors"
    odt.save_safetensors(state, st_uri, **settings(server))
    got = odt.load_safetensors(st_uri, **settings(server))
    assert torch.equal(got["big"], state["big"])
    assert advised_huge(got["big"].data_ptr() + (4 << 20))


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
    before = _get_head_counts(client)
    got = odt.load_safetensors(uri, client=client)
    gets, heads = (a - b for a, b in zip(_get_head_counts(client), before))
    assert (gets, heads) == (1 + 4, 0)  # the header (its reply gives the size), 4 non-empty
    assert got.keys() == tensors.keys()
    for name in tensors:
        assert got[name].dtype == tensors[name].dtype and torch.equal(got[name], tensors[name])
    # A file written by hand (as the safetensors library does) loads too.
    data = struct.pack("<3f", 1.0, 2.0, 3.0)
    header = b'{"x":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}}'
    client.put(bucket, "hand.safetensors", struct.pack("<Q", len(header)) + header + data)
    x = odt.load_safetensors(f"s3://{bucket}/hand.safetensors", client=client)["x"]
    assert x.tolist() == [1.0, 2.0, 3.0]
    client.put(bucket, "empty.safetensors", b"")
    with pytest.raises(ValueError, match="not a safetensors file"):
        odt.load_safetensors(f"s3://{bucket}/empty.safetensors", client=client)


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


class _Unseekable(io.RawIOBase):
    """A write-only stream zipfile cannot seek: it then writes data descriptors (flag bit 3)."""

    def __init__(self):
        self.buf = bytearray()

    def writable(self):
        return True

    def write(self, b):
        self.buf += b
        return len(b)


def _zip_of(members, *, seekable=True, zip64=False):
    """A stored zip of {name: bytes} written by Python's zipfile: seekable (sizes in the local
    headers), unseekable (data descriptors), or with zip64 records everywhere (the module's
    ZIP64_LIMIT lowered while writing, so even a small file carries zip64 extras and the zip64
    end of central directory)."""
    out = io.BytesIO() if seekable else _Unseekable()
    limit = zipfile.ZIP64_LIMIT
    if zip64:
        zipfile.ZIP64_LIMIT = 16
    try:
        with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
            for name, data in members.items():
                z.writestr(name, data)
    finally:
        zipfile.ZIP64_LIMIT = limit
    return bytes(out.getvalue() if seekable else out.buf)


def _safetensors_header(tensors):
    import json
    header, pos = {}, 0
    for name in sorted(tensors):
        t = tensors[name]
        n = t.numel() * t.element_size()
        header[name] = {"dtype": odt._ST_NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [pos, pos + n]}
        pos += n
    header["__metadata__"] = {"format": "pt"}
    return json.dumps(header).encode(), pos


def fuzz_corpus():
    """Real files: torch.save archives (small, nested, many records), zipfile rewrites of one
    (sizes in the local headers, data descriptors, zip64 throughout), and safetensors headers."""
    def saved(obj):
        buf = io.BytesIO()
        torch.save(obj, buf)
        return buf.getvalue()

    small = saved({"a": torch.ones(4), "b": [torch.zeros(2)]})
    members = {i.filename: zipfile.ZipFile(io.BytesIO(small)).read(i.filename)
               for i in zipfile.ZipFile(io.BytesIO(small)).infolist()}
    zips = {"torch-small": small, "torch-nested": saved(nested_state()),
            "torch-many": saved({f"t{i}": torch.arange(i) for i in range(40)}),
            "zipfile-seekable": _zip_of(members),
            "zipfile-descriptors": _zip_of(members, seekable=False),
            "zipfile-zip64": _zip_of(members, zip64=True)}
    headers = {"st-one": _safetensors_header({"x": torch.ones(2)}),
               "st-mixed": _safetensors_header({"w": torch.randn(3, 4).half(),
                                                "b": torch.zeros(5, dtype=torch.bool),
                                                "i": torch.arange(7)})}
    return zips, headers


def parse_zip(m: bytes):
    """Everything load() parses of an archive, on bytes in memory; returns the records and
    the predicted layout. Raises ValueError only."""
    size = len(m)
    cd_off, cd_size, n = odt.parse_zip_tail(m[-odt._TAIL_BYTES:], size)
    recs = odt.parse_central_directory(m[cd_off:cd_off + cd_size], n, size)
    for r in recs:
        off = odt.local_data_offset(m[r.header_offset:r.header_offset + odt._LOCAL_GUESS], r,
                                    size)
        assert 0 <= off and off + r.compressed_size <= size
    predicted = odt.predict_record_layout(recs, cd_off)
    by_name = {r.name: r for r in recs}
    for name, data in predicted.items():
        r = by_name[name]
        assert r.header_offset + 30 <= data and data + r.compressed_size <= size
        assert data - r.header_offset <= odt.local_header_bytes_max
        assert odt.check_local_header(m[r.header_offset:data], r, data) in (True, False)
    return recs, predicted


def test_fuzz_corpus_parses_exactly():
    """The corpus itself: every archive's records, exact offsets and predicted layout agree
    with Python's zipfile (the prediction, where made, passes the header check)."""
    zips, headers = fuzz_corpus()
    for name, raw in zips.items():
        recs, predicted = parse_zip(raw)
        z = zipfile.ZipFile(io.BytesIO(raw))
        assert [r.name for r in recs] == z.namelist(), name
        for info in z.infolist():
            nlen, xlen = struct.unpack_from("<HH", raw, info.header_offset + 26)
            data = info.header_offset + 30 + nlen + xlen
            assert predicted[info.filename] == data, (name, info.filename)
            r = next(r for r in recs if r.name == info.filename)
            assert odt.check_local_header(raw[r.header_offset:data], r, data)
            assert raw[data:data + r.compressed_size] == z.read(info.filename)
    for name, (h, nbytes) in headers.items():
        entries, meta = odt.parse_safetensors_header(h, nbytes)
        assert meta == {"format": "pt"} and entries, name


_FIELDS = (0, 1, 0x7F, 0xFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF)


def _mutate(rng, m: bytearray) -> bytearray:
    for _ in range(rng.randint(1, 6)):
        kind = rng.random()
        tail = max(0, len(m) - 1200)  # the directory, the tail records, the EOCD records
        i = rng.randrange(tail, len(m)) if rng.random() < 0.7 or not tail else \
            rng.randrange(len(m))
        if kind < 0.45:
            m[i] = rng.randrange(256)
        elif kind < 0.75:  # a little-endian field set to a boundary value
            w = rng.choice((2, 4, 8))
            v = rng.choice(_FIELDS + (len(m), len(m) - 1, rng.randrange(1 << 32)))
            m[i:i + w] = (v & ((1 << (8 * w)) - 1)).to_bytes(w, "little")
        elif kind < 0.85:
            del m[i:i + rng.randint(1, 64)]
        elif kind < 0.95:
            m[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
        else:
            m = m[:rng.randrange(len(m) + 1)]
        if not m:
            break
    return m


def fuzz_loop(tmp_path, seed: int, iterations: int, make_input, parse):
    """The mutation loop both parser fuzz tests share. ``make_input(rng)`` returns an input, a
    label and a context; ``parse(m, context)`` must return (its own asserts checking what it parsed) or raise
    ValueError, nothing else, within 2 CPU-s per input (CPU time: a loaded machine must not fail
    the bound) and a tracemalloc peak under 16 MiB. A failure names the seed, the iteration and
    the label, and leaves the input in fuzz-failure.bin under tmp_path. Returns (rejected,
    slowest CPU-s, peak bytes)."""
    import time
    rng = random.Random(seed)
    slowest, rejected = 0.0, 0
    tracemalloc.start()
    try:
        for it in range(iterations):
            m, label, ctx = make_input(rng)
            t = time.thread_time()
            try:
                parse(m, ctx)
            except ValueError:
                rejected += 1
            except BaseException as e:
                (tmp_path / "fuzz-failure.bin").write_bytes(m)
                raise AssertionError(f"seed {seed} iteration {it}{label}: {type(e).__name__}: "
                                     f"{e}; input in {tmp_path / 'fuzz-failure.bin'}") from e
            slowest = max(slowest, time.thread_time() - t)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert 0 < rejected < iterations  # the loop reaches both outcomes
    assert slowest < 2.0, f"an input took {slowest:.2f} CPU-s to parse"  # no hang
    assert peak < 16 << 20, f"parsing allocated {peak >> 20} MiB"  # no huge allocation
    return rejected, slowest, peak


def fuzz_settings():
    """OBJDIRECT_FUZZ_SEED (default 16) and OBJDIRECT_FUZZ_ITERATIONS (default 3000)."""
    import os
    return (int(os.environ.get("OBJDIRECT_FUZZ_SEED", "16")),
            int(os.environ.get("OBJDIRECT_FUZZ_ITERATIONS", "3000")))


def test_parsers_reject_damaged_input_with_value_error_only(tmp_path):
    """A mutation loop over load()'s parsers (zip tail, central directory, local headers, the
    predicted layout and its header check) and the safetensors header parser, fed with the
    corpus above: each input parses to in-bounds records or raises ValueError, nothing else,
    quickly and within bounded memory (fuzz_loop). Seeded and bounded: OBJDIRECT_FUZZ_SEED and
    OBJDIRECT_FUZZ_ITERATIONS reproduce or extend a run."""
    seed, iterations = fuzz_settings()
    print(f"fuzz: seed {seed}, {iterations} iterations (OBJDIRECT_FUZZ_SEED, "
          f"OBJDIRECT_FUZZ_ITERATIONS)")
    zips, headers = fuzz_corpus()

    def make_input(rng):
        if rng.random() < 0.75:
            name = rng.choice(sorted(zips))
            return bytes(_mutate(rng, bytearray(zips[name]))), f" (zip from {name})", None
        name = rng.choice(sorted(headers))
        h, nbytes = headers[name]
        return bytes(_mutate(rng, bytearray(h))), f" (safetensors from {name})", nbytes

    def parse(m, nbytes):
        if nbytes is None:
            parse_zip(m)
        else:
            entries, _ = odt.parse_safetensors_header(m, nbytes)
            assert all(0 <= b <= e <= nbytes for _, _, b, e in entries.values())

    rejected, slowest, peak = fuzz_loop(tmp_path, seed, iterations, make_input, parse)
    print(f"fuzz: {rejected} of {iterations} inputs rejected with ValueError, slowest "
          f"{slowest * 1000:.1f} CPU-ms, traced peak {peak / 1024:.0f} KiB")


def _doctored_memo_blob(state) -> bytes:
    """torch.save(state) with its data.pkl's first BINUNICODE 'storage' + BINPUT rewritten, in
    the same 14 bytes, as BINUNICODE 'st', LONG_BINPUT 0x02000000, NONE, POP: the blob stays a
    valid stored zip (no CRC is checked by the parsers)."""
    buf = io.BytesIO()
    torch.save(state, buf)
    raw = bytearray(buf.getvalue())
    old = b"X\x07\x00\x00\x00storageq"  # then the BINPUT's index byte
    new = b"X\x02\x00\x00\x00st" + b"r\x00\x00\x00\x02" + b"N0"
    assert len(old) + 1 == len(new) and raw.count(old) == 1
    i = raw.index(old)
    raw[i:i + len(new)] = new
    return bytes(raw)


def test_a_memo_index_beyond_the_pickle_is_refused_before_unpickling(server, bucket):
    """A damaged LONG_BINPUT makes the C unpickler zero-fill a memo table twice as long as its
    index (512 MiB and 0.4 CPU-s at 0x02000000 here; the fuzz loop of test_dcp found one):
    check_pickle_memo refuses it first, with ValueError, fast and without the allocation, in
    load() and in objdirect.dcp's single-tensor parser alike; real pickles pass."""
    import time
    import objdirect.dcp as odd
    from conftest import make_client
    state = {"w": torch.arange(12.).reshape(3, 4)}
    good = io.BytesIO()
    torch.save(state, good)
    pkl = next(zipfile.ZipFile(io.BytesIO(good.getvalue())).read(n) for n in
               zipfile.ZipFile(io.BytesIO(good.getvalue())).namelist() if n.endswith("data.pkl"))
    odt.check_pickle_memo(pkl)  # a real pickle passes
    with pytest.raises(ValueError, match="memo entry 2147483647"):
        odt.check_pickle_memo(pkl.replace(b"q\x01", b"j\xff\xff\xff\x7f", 1))  # a LONG_BINGET
    with pytest.raises(ValueError, match="does not parse"):
        odt.check_pickle_memo(b"\x80\x02\xfe")  # no such opcode
    bad = _doctored_memo_blob(state)
    tracemalloc.start()
    t = time.thread_time()
    try:
        with pytest.raises(ValueError, match="memo entry"):
            odd.parse_tensor_blob(bad, bad, len(bad))
        with make_client(server, fabric="none") as c:
            c.put(bucket, "memo.pt", bad)
            with pytest.raises(ValueError, match="memo entry"):
                odt.load(f"s3://{bucket}/memo.pt", client=c)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert time.thread_time() - t < 1.0
    assert peak < 16 << 20, f"refusing the pickle allocated {peak >> 20} MiB"


def test_local_header_bytes_max_bounds_the_prediction():
    raw = _zip_of({"archive/data.pkl": b"x" * 10, "archive/data/0": b"y" * 100})
    z = zipfile.ZipFile(io.BytesIO(raw))
    size = len(raw)
    cd_off, cd_size, n = odt.parse_zip_tail(raw, size)
    recs = odt.parse_central_directory(raw[cd_off:cd_off + cd_size], n, size)
    assert set(odt.predict_record_layout(recs, cd_off)) == set(z.namelist())
    # A directory claiming the second record starts far after the first: the first one's local
    # header would have to be longer than any local header can be: no prediction for it.
    far = recs[1]._replace(header_offset=recs[0].header_offset + 30 + len(recs[0].raw_name) +
                           odt.local_header_bytes_max + 10 + recs[0].compressed_size)
    assert set(odt.predict_record_layout([recs[0], far], far.header_offset + 200)) == \
        {recs[1].name}
    assert odt.local_header_bytes_max == 30 + 0xFFFF + 0xFFFF
