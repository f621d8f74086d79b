"""objdirect.dcp: a torch.distributed.checkpoint backend over ObjDirect (torch >= 2.0).

    import torch.distributed.checkpoint as dcp
    from objdirect.dcp import StorageWriter, StorageReader
    dcp.save(state_dict, storage_writer=StorageWriter("s3://ckpt/step100", endpoint=...))
    dcp.load(state_dict, storage_reader=StorageReader("s3://ckpt/step100", endpoint=...))

Layout: the one torch's FileSystemWriter writes, under the checkpoint id's prefix: one object
``__{rank}_{n}.distcp`` per rank and file (items: raw bytes for BYTE_IO items, torch.save of
each tensor otherwise), and ``.metadata``, the pickled Metadata whose storage_data maps every
item to (relative path, offset, length). So StorageReader reads a checkpoint FileSystemWriter
wrote (copied to the bucket as is), and FileSystemReader reads one StorageWriter wrote (copied
to a directory).

- Writes: each rank's files are streamed as multipart uploads (bounded memory:
  (parts_in_flight + 1) x part_size per file, files_per_rank files at once). Each tensor item
  is the blob torch.save writes of a fresh row-major copy of the tensor, produced by
  write_tensor_blob with the storage's bytes streamed from the tensor's memory: a contiguous
  CPU tensor's own bytes, a device tensor or a view in pieces through a HostChunkPool
  (pinned_pool_bytes_max per file), any size (zip64 fields from 4 GiB - 1, as torch's writer);
  torch.save only for a dtype without a typed storage (float8). ``.metadata`` is committed by
  the coordinator with one PUT once every rank's files are complete: a reader sees the checkpoint
  whole or not at all (no rename by copy and delete).
- Reads (read_items): the planner's read items are grouped per object, and each one's first
  ranges (a BYTE_IO item or a small tensor blob whole; a larger blob's first and last 4 KiB,
  where torch.save keeps data.pkl, the storage's local header and the zip directory) are sorted
  and coalesced into ranged GETs (objdirect.ranges; gaps up to gap_bytes), issued concurrently
  (``concurrency``). Each tensor blob's layout is parsed from those bytes (parse_tensor_blob:
  objdirect.torch's zip parser, data.pkl unpickled with only the tensor rebuild allowed) and,
  where the destination tensor has the saved dtype, is contiguous and the wanted box is one run
  of the storage (tensor_region), the bytes land in it: copied out of a GET that already holds
  them (CPU destinations), else one ranged get_into straight into the tensor's memory (device
  destinations always: the client's device path). Anything else goes through torch.load and
  copy_, counted (StorageReader.last_stats["fallback_reasons"]).
- ``dcp.async_save`` works: write_data returns a completed Future after the uploads finish on
  the calling (background) thread.

The planning, loading and writing functions (plan_reads, plan_load, parse_tensor_blob,
tensor_region, read_items, assign_files, write_tensor_blob) are plain and unit-tested without DCP
(Debian 12's torch 1.13 has none); the classes exist only where torch.distributed.checkpoint
imports, and scripts/gpu-check.sh runs them on a torch 2.x machine.

Thread safety: one writer or reader per dcp.save / dcp.load call.
"""

from __future__ import annotations

import collections
import concurrent.futures
import io
import pickle
import struct
import zlib
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from . import parse_uri
from . import ranges as _ranges
from .client import Client

__all__ = ["plan_reads", "fetch_plan", "assign_files", "ReadPlanEntry", "dcp_available",
           "plan_load", "read_items", "parse_tensor_blob", "tensor_region", "index_spans",
           "TensorLayout", "write_tensor_blob", "tensor_pickle", "HostChunkPool"]


class ReadPlanEntry(NamedTuple):
    """One GET of a load: object path relative to the checkpoint, the byte range, and the
    (offset, length) storage ranges it covers (one per distinct stored item)."""

    relative_path: str
    offset: int
    length: int
    members: Tuple[Tuple[int, int], ...]


def _coalesced(by_path: Dict[str, set], gap_bytes: int,
               group_bytes_max: int) -> List[ReadPlanEntry]:
    """The GETs of {path: {(offset, length)}}: per object in path order, the ranges sorted by
    offset and merged across gaps up to gap_bytes, capped at group_bytes_max
    (objdirect.ranges.coalesce); each GET names the ranges it covers."""
    out = []
    for path in sorted(by_path):
        spans = [_ranges.Span(o, n, (o, n)) for o, n in sorted(by_path[path])]
        for g in _ranges.coalesce(spans, gap_bytes, group_bytes_max):
            out.append(ReadPlanEntry(path, g.offset, g.length, tuple(s.tag for s in g.members)))
    return out


def plan_reads(items: Sequence, storage_data: dict, *, gap_bytes: int = _ranges.gap_bytes_default,
               group_bytes_max: int = _ranges.group_bytes_max_default) -> List[ReadPlanEntry]:
    """The GETs of a load. items: objects with ``storage_index`` (ReadItem); storage_data:
    {storage_index: info with relative_path, offset, length} (Metadata.storage_data). Items
    that share a stored range (resharding reads one saved shard into several destinations)
    fetch it once. Groups are per object, sorted by offset, merged across gaps up to gap_bytes
    and capped at group_bytes_max (objdirect.ranges.coalesce). Raises KeyError for an item the
    metadata does not know."""
    by_path: Dict[str, set] = {}
    for it in items:
        info = storage_data[it.storage_index]
        by_path.setdefault(info.relative_path, set()).add((int(info.offset), int(info.length)))
    return _coalesced(by_path, gap_bytes, group_bytes_max)


def fetch_plan(get, plan: Sequence[ReadPlanEntry], executor=None) -> dict:
    """Issues a load's GETs: get(relative_path, offset, length) -> bytes for every entry of
    plan, concurrently on executor (in order without one), and returns {(relative_path,
    offset, length): memoryview} for every stored range the entries cover. Raises the first
    failure, after every GET ended (buffers stay valid until then). Raises ValueError when a
    GET returns fewer bytes than its entry needs (a truncated object)."""
    def one(e: ReadPlanEntry):
        data = get(e.relative_path, e.offset, e.length)
        if len(data) < e.length:
            raise ValueError(f"{e.relative_path}: {len(data)} bytes at {e.offset}, "
                             f"wanted {e.length} (truncated checkpoint?)")
        view = memoryview(data)
        return {(e.relative_path, o, n): view[o - e.offset:o - e.offset + n]
                for o, n in e.members}

    out = {}
    if executor is None:
        for e in plan:
            out.update(one(e))
        return out
    futures = [executor.submit(one, e) for e in plan]
    for f in futures:
        f.exception()
    for f in futures:
        out.update(f.result())
    return out


def assign_files(sizes: Sequence[int], files: int) -> List[List[int]]:
    """Splits write items (given by their byte sizes) into ``files`` files of similar total
    size, as FileSystemWriter's thread_count files: largest first, each into the lightest file.
    Returns the item indices of each file (empty files dropped), each list in item order."""
    if files < 1:
        raise ValueError("files must be >= 1")
    buckets = [[] for _ in range(files)]
    load = [0] * files
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        j = min(range(files), key=lambda j: load[j])
        buckets[j].append(i)
        load[j] += sizes[i]
    return [sorted(b) for b in buckets if b]



# -- tensor blobs written from the tensor's own memory (plain functions, no DCP needed) ----------
#
# write_tensor_blob writes what torch.save of a fresh row-major copy of t writes (the same zip
# records in the same order: data.pkl, the storage record data/0, the records torch's version
# adds, with torch's 64-byte alignment, data descriptors, zip64 fields and zip64 end records),
# but the storage record's bytes come from the tensor's memory: a contiguous CPU tensor's
# storage bytes as one memoryview, anything else (a device tensor, a non-contiguous view) in
# pieces copied into a bounded pool of host chunks (pinned for device tensors), CRC32 computed
# as they stream. Any storage size streams: a size or offset of 0xFFFFFFFF or more goes in zip64
# fields exactly where torch's writer (miniz under PyTorchStreamWriter) puts them.

_ZIP64_FROM = 0xFFFFFFFF  # miniz: a size or offset from this value up takes zip64 fields
pinned_pool_bytes_max_default = 32 << 20  # the host staging pool of one file's writer
pinned_pool_chunks = 2  # the pool's chunks: the next piece is copied while one is written


class HostChunkPool:
    """At most ``bytes_max`` bytes of host staging buffers, in ``chunks`` chunks of
    bytes_max // chunks bytes, allocated on first use (pinned when ``pin``: device tensors'
    pieces are copied into them). ``high_water``: the most bytes allocated (the bound, tested).
    Thread safety: one writer at a time."""

    def __init__(self, bytes_max: int = pinned_pool_bytes_max_default, *,
                 chunks: int = pinned_pool_chunks, pin: bool = True):
        if chunks < 1 or bytes_max < 64 * chunks:
            raise ValueError("a pool needs chunks >= 1 of at least 64 bytes each")
        self.bytes_max = int(bytes_max)
        self.chunks = int(chunks)
        self.chunk_bytes = self.bytes_max // self.chunks // 64 * 64
        self.pin = pin
        self._free: list = []
        self.allocated = 0
        self.high_water = 0

    def take(self):
        """A free chunk (a 1-d uint8 CPU tensor of chunk_bytes), allocated while under the
        bound; RuntimeError when all chunks are taken."""
        import torch
        if self._free:
            return self._free.pop()
        if self.allocated >= self.chunks:
            raise RuntimeError("host chunk pool exhausted")
        buf = torch.empty(self.chunk_bytes, dtype=torch.uint8, pin_memory=self.pin)
        self.allocated += 1
        self.high_water = max(self.high_water, self.allocated * self.chunk_bytes)
        return buf

    def give(self, buf) -> None:
        self._free.append(buf)


def _pieces(t, max_bytes: int):
    """Views of t, at most max_bytes each (one element at least), whose bytes in row-major order
    are t's: slices of a contiguous t flattened, else blocks of rows (of sub-rows, recursively)."""
    es = t.element_size()
    if t.numel() * es <= max_bytes or t.dim() == 0:
        yield t
    elif t.is_contiguous():
        flat = t.reshape(-1)
        step = max(1, max_bytes // es)
        for i in range(0, flat.numel(), step):
            yield flat[i:i + step]
    else:
        row = (t.numel() // t.size(0)) * es
        if row > max_bytes:
            for i in range(t.size(0)):
                yield from _pieces(t[i], max_bytes)
        else:
            k = max(1, max_bytes // row)
            for i in range(0, t.size(0), k):
                yield t[i:i + k]


def _host_chunks(t, pool: Optional[HostChunkPool]):
    """t's bytes in row-major order as host memoryviews, each valid until the next is asked for:
    a contiguous CPU t's own memory (pool None), else pieces copied into pool's chunks (a device
    copy is issued for the next piece before the current one is handed out)."""
    import torch
    if pool is None:
        if not t.is_contiguous() or t.device.type != "cpu":
            raise ValueError("a device or non-contiguous tensor needs a pool")
        if t.numel():
            yield memoryview(_bytes_of(t).numpy())
        return
    cuda = t.device.type == "cuda"
    pending = collections.deque()  # (chunk, nbytes, event or None)

    def ready():
        buf, n, ev = pending.popleft()
        if ev is not None:
            ev.synchronize()
        return buf, n

    for piece in _pieces(t, pool.chunk_bytes):
        n = piece.numel() * piece.element_size()
        if n == 0:
            continue
        buf = pool.take()
        dst = buf[:n].view(t.dtype).view(piece.shape)
        ev = None
        if cuda:
            with torch.cuda.device(t.device):
                dst.copy_(piece, non_blocking=True)
                ev = torch.cuda.Event()
                ev.record()
        else:
            dst.copy_(piece)
        pending.append((buf, n, ev))
        if len(pending) == pool.chunks:
            b, k = ready()
            yield memoryview(b[:k].numpy())
            pool.give(b)
    while pending:
        b, k = ready()
        yield memoryview(b[:k].numpy())
        pool.give(b)


def _contiguous_stride(size) -> Tuple[int, ...]:
    out, acc = [], 1
    for s in reversed(tuple(size)):
        out.append(acc)
        acc *= max(int(s), 1)
    return tuple(reversed(out))


def tensor_pickle(dtype, size) -> bytes:
    """data.pkl of torch.save(t) for a contiguous tensor t of this dtype and size whose storage
    holds exactly its elements (storage key '0', location 'cpu'): the same bytes as torch's
    pickler writes (protocol 2)."""
    import torch
    storage_type = getattr(torch, torch.storage._dtype_to_storage_type_map()[dtype])
    size = tuple(int(s) for s in size)
    numel = 1
    for s in size:
        numel *= s
    stub = object()

    class _Tensor:
        def __reduce_ex__(self, protocol):
            return (torch._utils._rebuild_tensor_v2,
                    (stub, 0, size, _contiguous_stride(size), False, collections.OrderedDict()))

    buf = io.BytesIO()
    p = pickle.Pickler(buf, protocol=2)
    p.persistent_id = lambda o: ("storage", storage_type, "0", "cpu", numel) if o is stub else None
    p.dump(_Tensor())
    return buf.getvalue()


_blob_templates: dict = {}


def _blob_template(dtype, empty: bool):
    """The records torch.save writes for a tensor of dtype with one element (none when empty):
    [(name, bytes)] in order (data.pkl, data/0 unless this torch version omits an empty
    storage's, and what the version adds: byteorder, version, ...)."""
    import zipfile
    import torch
    key = (dtype, empty)
    if key not in _blob_templates:
        b = io.BytesIO()
        torch.save(torch.zeros(0 if empty else 1, dtype=dtype), b)
        with zipfile.ZipFile(b) as z:
            recs = [(i.filename, z.read(i)) for i in z.infolist()]
        if not empty and not any(n.endswith("/data/0") for n, _ in recs):
            raise RuntimeError("torch.save wrote no data/0 record")
        _blob_templates[key] = recs
    return _blob_templates[key]


def _zip64_extra(values) -> bytes:
    """Zip64 extended information (tag 0x0001) holding ``values``, b"" when there are none."""
    return struct.pack(f"<HH{len(values)}Q", 1, 8 * len(values), *values) if values else b""


def _local_header(name: bytes, cursor: int, size: int, flags: int, align: int,
                  zip64_from: int) -> bytes:
    """A local header as torch's writer makes it: sizes and CRC 0 (a data descriptor follows),
    a zip64 field when the record's size or its offset reaches zip64_from (the size, 0 for the
    compressed size, which miniz fills in later, and the offset), then torch's "FB" padding
    field, so that the data starts aligned."""
    extra = _zip64_extra(([size, 0] if size >= zip64_from else []) +
                         ([cursor] if cursor >= zip64_from else []))
    pad = (-(cursor + 30 + len(name) + len(extra) + 4)) % align
    return (struct.pack("<IHHHHHIIIHH", 0x04034B50, 0, flags, 0, 0, 0, 0, 0, 0, len(name),
                        len(extra) + 4 + pad) + name + extra + b"FB" + struct.pack("<H", pad) +
            b"Z" * pad)


def _has_typed_storage(dtype) -> bool:
    """Whether torch pickles a storage of this dtype as a typed storage class (tensor_pickle
    can name it); float8 types have none."""
    import torch
    return dtype in torch.storage._dtype_to_storage_type_map()


def write_tensor_blob(w, t, *, pool: Optional[HostChunkPool] = None,
                      _zip64_from: int = _ZIP64_FROM) -> str:
    """Writes to w (write(buffer)) the blob torch.save writes of a fresh row-major copy of t,
    in the zip layout torch's writer uses (records as this torch version's torch.save, stored,
    aligned as torch aligns, data descriptors, zip64 fields for sizes and offsets of 4 GiB - 1
    and more, zip64 end records), with the storage's bytes streamed from t's memory, whatever
    their size: a contiguous CPU tensor's own bytes; a device tensor's or a non-contiguous
    view's through pool's chunks (pool required for them). A Parameter is saved as its data (a
    plain tensor). Returns "streamed", or "torch.save" when the dtype has no typed storage
    class (float8 types): then t goes through torch.save of its host copy (t itself for a CPU
    tensor that is its whole storage, else a contiguous copy). ``_zip64_from`` is for tests
    only: the size or offset from which zip64 fields are written (torch's: 0xFFFFFFFF)."""
    import torch
    t = t.detach().resolve_conj().resolve_neg()  # a lazy conj/neg view: its values (copied)
    nbytes = t.numel() * t.element_size()
    if not _has_typed_storage(t.dtype):
        c = t.cpu()
        st = c.untyped_storage() if hasattr(c, "untyped_storage") else c.storage()
        if not c.is_contiguous() or c.storage_offset() != 0 or st.nbytes() != nbytes:
            c = c.contiguous().clone()  # torch.save writes a view's whole storage
        torch.save(c, w)
        return "torch.save"
    if pool is None and (t.device.type != "cpu" or not t.is_contiguous()):
        raise ValueError("a device or non-contiguous tensor needs a pool")
    big = _zip64_from
    records = []  # (name, flags, crc, size, offset) for the central directory
    cursor = 0

    def put(b) -> None:
        nonlocal cursor
        w.write(b)
        cursor += len(b)

    def record(name: str, chunks, size: int) -> None:
        # torch's writer: a data descriptor after the data (flag bit 3) unless it is empty,
        # with 8-byte sizes when the record has a zip64 field (its size or offset is big)
        nb, start, flags = name.encode(), cursor, 0x0808 if size else 0x0800
        put(_local_header(nb, cursor, size, flags, align, big))
        crc, n = 0, 0
        for c in chunks:
            crc = zlib.crc32(c, crc)
            n += len(c)
            put(c)
        if n != size:
            raise RuntimeError(f"{name}: {n} bytes streamed, {size} expected")
        if size:
            put(struct.pack("<IIQQ" if max(n, start) >= big else "<IIII", 0x08074B50, crc, n, n))
        records.append((nb, flags, crc, n, start))

    template = _blob_template(t.dtype, nbytes == 0)
    # newer torch versions record their (configurable) storage alignment; 1.13 aligns to 64
    align = next((int(d) for n, d in template if n.endswith("/.storage_alignment")), 64)
    for name, data in template:
        base = name.split("/", 1)[1] if "/" in name else name
        if base == "data.pkl":
            pkl = tensor_pickle(t.dtype, t.size())
            record(name, [pkl], len(pkl))
        elif base == "data/0":
            record(name, _host_chunks(t, None if t.device.type == "cpu" and t.is_contiguous()
                                      else pool), nbytes)
        else:
            record(name, [data] if data else [], len(data))
    cd_off = cursor

    def field(v: int) -> int:  # a 32-bit field: the value, or 0xFFFFFFFF with zip64 holding it
        return v if v < big else 0xFFFFFFFF

    for nb, flags, crc, n, off in records:
        extra = _zip64_extra(([n, n] if n >= big else []) + ([off] if off >= big else []))
        put(struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 0, 0, flags, 0, 0, 0, crc, field(n),
                        field(n), len(nb), len(extra), 0, 0, 0, 0, field(off)) + nb + extra)
    cd_size, k, eocd64 = cursor - cd_off, len(records), cursor
    put(struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 0x031E, 0x2D, 0, 0, k, k, cd_size, cd_off))
    put(struct.pack("<IIQI", 0x07064B50, 0, eocd64, 1))
    put(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, min(k, 0xFFFF), min(k, 0xFFFF),
                    field(cd_size), field(cd_off), 0))
    return "streamed"

# -- loads that land in the planner's tensors (plain functions, no DCP needed) -------------------
#
# A tensor item of FileSystemWriter's layout is a torch.save zip of one tensor at (offset,
# length) in its file: records data.pkl (the pickle naming the storage), byteorder (torch 2.x),
# data/<key> (the storage's raw bytes, stored, 64-aligned), version, ..., then the central
# directory and the end record. So its first blob_head_bytes hold data.pkl and the storage's
# local header, and its last blob_tail_bytes hold the directory: those two small ranges say
# where the tensor's bytes lie, and the bytes can then land in the destination tensor.

blob_head_bytes = 4096  # fetched from the start of a tensor blob: data.pkl, local headers
blob_tail_bytes = 4096  # fetched from its end: the central directory and the end record


class TensorLayout(NamedTuple):
    """Where a torch.save blob of one tensor keeps the tensor: the storage record's bytes at
    [data_offset, data_offset + data_bytes) of the blob, and the saved tensor's dtype,
    storage_offset (elements), size and stride."""

    data_offset: int
    data_bytes: int
    dtype: object
    storage_offset: int
    size: Tuple[int, ...]
    stride: Tuple[int, ...]


class _StorageRef(NamedTuple):
    dtype: object
    key: str
    numel: int


class _Rebuilt(NamedTuple):
    storage: _StorageRef
    storage_offset: int
    size: tuple
    stride: tuple


def _rebuild_tensor_v2(storage, storage_offset, size, stride, *args):
    return _Rebuilt(storage, storage_offset, tuple(size), tuple(stride))


def index_spans(length: int, is_tensor: bool) -> List[Tuple[int, int]]:
    """The ranges (relative to an item's blob of ``length`` bytes) a load fetches before it
    knows where the tensor lies: a BYTE_IO item, and a tensor blob of at most blob_head_bytes +
    blob_tail_bytes, whole; a larger tensor blob, its head and its tail."""
    if not is_tensor or length <= blob_head_bytes + blob_tail_bytes:
        return [(0, length)]
    return [(0, blob_head_bytes), (length - blob_tail_bytes, blob_tail_bytes)]


def parse_tensor_blob(head, tail, length: int) -> TensorLayout:
    """The TensorLayout of a torch.save blob of ``length`` bytes from its first bytes ``head``
    and its last bytes ``tail`` (both may be the whole blob), without torch.load: the zip
    directory from the tail (objdirect.torch's parser), data.pkl and the storage's local header
    from the head, data.pkl unpickled with nothing but the tensor rebuild allowed. Raises
    ValueError when the blob is not one stored (uncompressed) zip of one plain little-endian
    tensor, or when what is needed lies outside head and tail (the caller then falls back to
    torch.load)."""
    import pickle
    import torch
    from . import torch as odt
    head, tail = memoryview(head).cast("B"), memoryview(tail).cast("B")
    if len(tail) > length or len(head) > length:
        raise ValueError("head or tail longer than the blob")
    tail_start = length - len(tail)
    cd_off, cd_size, n = odt.parse_zip_tail(bytes(tail), length)
    if cd_off < tail_start:
        raise ValueError("the central directory is not in the fetched tail")
    records = odt.parse_central_directory(bytes(tail[cd_off - tail_start:
                                                     cd_off - tail_start + cd_size]), n, length)
    if any(r.method != 0 for r in records):
        raise ValueError("compressed records")
    by_name = {r.name: r for r in records}
    pkl = [k for k in by_name if k.endswith("/data.pkl") and k.count("/") == 1]
    if len(pkl) != 1:
        raise ValueError("no data.pkl record")
    prefix = pkl[0][:-len("data.pkl")]

    def record_bytes(name: str, want_data: bool = True):
        r = by_name[name]
        if r.header_offset + 30 > len(head):
            raise ValueError(f"local header of {name!r} is not in the fetched head")
        start = odt.local_data_offset(bytes(head[r.header_offset:r.header_offset +
                                                 min(len(head) - r.header_offset,
                                                     odt.local_header_bytes_max)]), r, length)
        if start > len(head) or (want_data and start + r.compressed_size > len(head)):
            raise ValueError(f"record {name!r} is not in the fetched head")
        return start, (bytes(head[start:start + r.compressed_size]) if want_data else None)

    if prefix + "byteorder" in by_name and record_bytes(prefix + "byteorder")[1] != b"little":
        raise ValueError("not a little-endian blob")
    _, pickled = record_bytes(pkl[0])

    class Unpickler(pickle.Unpickler):
        def find_class(self, mod_name, name):
            if (mod_name, name) == ("torch._utils", "_rebuild_tensor_v2"):
                return _rebuild_tensor_v2
            if (mod_name, name) == ("collections", "OrderedDict"):
                return collections.OrderedDict
            if mod_name == "torch" and name.endswith("Storage"):
                try:
                    return torch.serialization.StorageType(name)
                except (KeyError, AttributeError):
                    pass
            raise ValueError(f"not a plain tensor blob: it pickles {mod_name}.{name}")

        def persistent_load(self, saved_id):
            if not (isinstance(saved_id, tuple) and len(saved_id) == 5 and
                    saved_id[0] in ("storage", b"storage")):
                raise ValueError("unknown persistent id")
            storage_type, key, _location, numel = saved_id[1:]
            dtype = getattr(storage_type, "dtype", torch.uint8)
            return _StorageRef(dtype, key.decode() if isinstance(key, bytes) else str(key),
                               int(numel))

    odt.check_pickle_memo(pickled)
    try:
        t = Unpickler(io.BytesIO(pickled), encoding="utf-8").load()
    except ValueError:
        raise
    except Exception as e:  # a pickle of anything else
        raise ValueError(f"data.pkl does not unpickle as one tensor: {e}") from None
    if not isinstance(t, _Rebuilt) or not isinstance(t.storage, _StorageRef):
        raise ValueError("data.pkl is not one tensor")
    ints = [t.storage_offset, t.storage.numel, *t.size, *t.stride]
    if (not isinstance(t.storage.dtype, torch.dtype) or len(t.size) != len(t.stride) or
            not all(isinstance(v, int) and v >= 0 for v in ints)):
        raise ValueError("data.pkl's tensor has a malformed dtype, size or stride")
    name = prefix + "data/" + t.storage.key
    if name not in by_name:
        raise ValueError(f"no storage record {name!r}")
    elem = torch.empty((), dtype=t.storage.dtype).element_size()
    r = by_name[name]
    if r.compressed_size != t.storage.numel * elem:
        raise ValueError(f"record {name!r} holds {r.compressed_size} bytes, the storage "
                         f"{t.storage.numel * elem}")
    start, _ = record_bytes(name, want_data=False)
    return TensorLayout(start, r.compressed_size, t.storage.dtype, t.storage_offset,
                        t.size, t.stride)


def tensor_region(layout: TensorLayout, offsets: Sequence[int],
                  lengths: Sequence[int]) -> Optional[Tuple[int, int]]:
    """(offset in the blob, nbytes) of the box [offsets, offsets + lengths) of the saved tensor
    when its elements are one run of the storage in row-major order, else None: the saved
    tensor is contiguous (strides of extent-1 dimensions ignored), and the box is full in every
    dimension after the first one it narrows, and of extent 1 in those before. A 0-element box
    is (data_offset, 0). Raises ValueError for a box outside the tensor or the storage."""
    import torch
    size, stride = tuple(layout.size), tuple(layout.stride)
    offsets, lengths = tuple(int(o) for o in offsets), tuple(int(n) for n in lengths)
    if len(offsets) != len(size) or len(lengths) != len(size):
        raise ValueError(f"a {len(lengths)}-d box of a {len(size)}-d tensor")
    for o, n, s in zip(offsets, lengths, size):
        if o < 0 or n < 0 or o + n > s:
            raise ValueError(f"box {offsets}+{lengths} outside the tensor {size}")
    elem = torch.empty((), dtype=layout.dtype).element_size()
    numel = 1
    for n in lengths:
        numel *= n
    if numel == 0:
        return layout.data_offset, 0
    expect = 1
    for d in range(len(size) - 1, -1, -1):
        if size[d] != 1 and stride[d] != expect:
            return None  # the saved tensor is not contiguous
        expect *= size[d]
    narrowed = [d for d in range(len(size)) if lengths[d] != size[d]]
    if narrowed and any(lengths[d] != 1 for d in range(narrowed[0])):
        return None
    first = layout.storage_offset + sum(o * s for o, s in zip(offsets, stride))
    begin, nbytes = first * elem, numel * elem
    if begin + nbytes > layout.data_bytes:
        raise ValueError("the tensor lies outside its storage record")
    return layout.data_offset + begin, nbytes


def _is_tensor_item(item) -> bool:
    return getattr(getattr(item, "type", None), "name", "TENSOR") != "BYTE_IO"


def plan_load(items: Sequence, storage_data: dict, *, gap_bytes: int = _ranges.gap_bytes_default,
              group_bytes_max: int = _ranges.group_bytes_max_default) -> List[ReadPlanEntry]:
    """The first GETs of a load: every distinct stored range's index_spans (BYTE_IO items and
    small tensor blobs whole; a larger tensor blob's head and tail), as absolute (offset,
    length) members, sorted and coalesced per object like plan_reads. Raises KeyError for an
    item the metadata does not know."""
    by_path: Dict[str, set] = {}
    for it in items:
        info = storage_data[it.storage_index]
        o, n = int(info.offset), int(info.length)
        for lo, k in index_spans(n, _is_tensor_item(it)):
            by_path.setdefault(info.relative_path, set()).add((o + lo, k))
    return _coalesced(by_path, gap_bytes, group_bytes_max)


def _fetched(fetched: dict, path: str, offset: int, length: int):
    """The bytes [offset, offset + length) of path if one fetched range holds them, else None.
    fetched: {path: [(offset, length, memoryview)]}."""
    for o, n, view in fetched.get(path, ()):
        if o <= offset and offset + length <= o + n:
            return view[offset - o:offset - o + length]
    return None


def _narrow(t, offsets, lengths):
    for d, (o, n) in enumerate(zip(offsets, lengths)):
        t = t.narrow(d, int(o), int(n))
    return t


def _bytes_of(t):
    """A contiguous tensor's memory as a 1-d uint8 tensor (the same memory). as_strided, not
    reshape: a contiguous tensor's extent-1 dimensions may have any stride, and so may the
    reshape of a 1-element one, which view(uint8) refuses."""
    import torch
    flat = t.as_strided((t.numel(),), (1,))
    return flat if flat.dtype == torch.uint8 else flat.view(torch.uint8)


def read_items(items: Sequence, storage_data: dict, *, get: Callable, get_into: Callable,
               resolve_tensor: Callable, commit_tensor: Callable, load_bytes: Callable,
               executor=None, gap_bytes: int = _ranges.gap_bytes_default,
               group_bytes_max: int = _ranges.group_bytes_max_default) -> dict:
    """A DCP load's read_data without DCP: items are ReadItems (storage_index, type,
    storage_offsets, lengths), storage_data maps storage_index to (relative_path, offset,
    length). get(path, offset, length) -> bytes; get_into(path, buf, offset, length) -> bytes
    landed; resolve_tensor(item) -> the destination tensor; commit_tensor(item, tensor);
    load_bytes(item, io.BytesIO).

    1. plan_load's GETs (sorted, coalesced per object), concurrently on executor.
    2. Each tensor blob's TensorLayout from its head and tail (parse_tensor_blob), and the
       item's box in it (tensor_region).
    3. Where the destination has the saved dtype, is contiguous and holds exactly the box, the
       box's bytes land in it: a CPU destination is copied from the fetched range when that
       holds them, else (and always for a device destination: the client's device path) one
       get_into of exactly those bytes straight into the tensor's memory, concurrently.
       Otherwise the blob (fetched whole if need be) goes through torch.load, is narrowed to
       the box and copy_'d into the destination (converting dtype, any strides): a fallback,
       counted with its reason.

    Returns the counts {"index_gets", "direct_gets", "copied", "empty", "fallback",
    "fallback_reasons": {reason: n}, "bytes_direct", "bytes_copied"}. Raises ValueError for a
    truncated checkpoint (a GET shorter than its range), the first GET failure (after every GET
    ended), or a size mismatch between a destination and its box."""
    import torch
    stats = {"index_gets": 0, "direct_gets": 0, "copied": 0, "empty": 0, "fallback": 0,
             "fallback_reasons": {}, "bytes_direct": 0, "bytes_copied": 0}
    plan = plan_load(items, storage_data, gap_bytes=gap_bytes, group_bytes_max=group_bytes_max)
    stats["index_gets"] = len(plan)
    # Each GET's whole range is kept (not only its members): a coalesced GET may also hold the
    # bytes of a box between a blob's head and tail, which then need no GET of their own.
    fetched: Dict[str, list] = {}
    whole = [e._replace(members=((e.offset, e.length),)) for e in plan]
    for (path, o, n), view in fetch_plan(get, whole, executor).items():
        fetched.setdefault(path, []).append((o, n, view))
    layouts: dict = {}
    whole_blobs: dict = {}

    def blob(path, o, n):
        """The whole blob's bytes: from the fetched ranges, else one GET (kept for the others)."""
        key = (path, o, n)
        if key not in whole_blobs:
            view = _fetched(fetched, path, o, n)
            if view is None:
                data = get(path, o, n)
                if len(data) < n:
                    raise ValueError(f"{path}: {len(data)} bytes at {o}, wanted {n} "
                                     f"(truncated checkpoint?)")
                view = memoryview(data)
            whole_blobs[key] = view
        return whole_blobs[key]

    def layout_of(path, o, n):
        key = (path, o, n)
        if key not in layouts:
            head = _fetched(fetched, path, o, min(n, blob_head_bytes))
            tail = _fetched(fetched, path, o + n - min(n, blob_tail_bytes), min(n, blob_tail_bytes))
            try:
                if head is None or tail is None:
                    raise ValueError("head or tail not fetched")
                layouts[key] = parse_tensor_blob(head, tail, n)
            except ValueError as e:
                layouts[key] = e
        return layouts[key]

    def fallback(req, info, target, reason):
        stats["fallback"] += 1
        stats["fallback_reasons"][reason] = stats["fallback_reasons"].get(reason, 0) + 1
        data = blob(info.relative_path, int(info.offset), int(info.length))
        t = torch.load(io.BytesIO(bytes(data)), map_location="cpu", weights_only=True)
        t = _narrow(t.detach(), req.storage_offsets, req.lengths)
        if target.size() != t.size():
            raise ValueError(f"req {req.storage_index} mismatch sizes {target.size()} vs "
                             f"{t.size()}")
        with torch.no_grad():
            target.copy_(t)

    def direct(path, target, offset, nbytes):
        got = get_into(path, _bytes_of(target), offset, nbytes)
        if got < nbytes:
            raise ValueError(f"{path}: {got} bytes at {offset}, wanted {nbytes} "
                             f"(truncated checkpoint?)")

    pending = []  # (item, target, future or None)
    for req in items:
        info = storage_data[req.storage_index]
        path, o, n = info.relative_path, int(info.offset), int(info.length)
        if not _is_tensor_item(req):
            load_bytes(req, io.BytesIO(bytes(blob(path, o, n))))
            continue
        target = resolve_tensor(req).detach()
        lay = layout_of(path, o, n)
        region, reason = None, None
        if isinstance(lay, ValueError):
            reason = "blob not parsed"
        else:
            region = tensor_region(lay, req.storage_offsets, req.lengths)
            if region is None:
                reason = "box not contiguous in the saved tensor"
            elif target.dtype != lay.dtype:
                reason = "dtype differs"
            elif not target.is_contiguous():
                reason = "destination not contiguous"
            elif tuple(target.size()) != tuple(int(x) for x in req.lengths):
                raise ValueError(f"req {req.storage_index} mismatch sizes {tuple(target.size())} "
                                 f"vs {tuple(req.lengths)}")
        if reason is not None:
            fallback(req, info, target, reason)
            pending.append((req, target, None))
            continue
        at, nbytes = region
        if nbytes == 0:
            stats["empty"] += 1
            pending.append((req, target, None))
            continue
        view = _fetched(fetched, path, o + at, nbytes) if target.device.type == "cpu" else None
        if view is not None:
            memoryview(_bytes_of(target).numpy())[:] = view
            stats["copied"] += 1
            stats["bytes_copied"] += nbytes
            pending.append((req, target, None))
            continue
        stats["direct_gets"] += 1
        stats["bytes_direct"] += nbytes
        if executor is None:
            direct(path, target, o + at, nbytes)
            pending.append((req, target, None))
        else:
            pending.append((req, target, executor.submit(direct, path, target, o + at, nbytes)))
    for _, _, f in pending:
        if f is not None:
            f.exception()  # every GET ends before anything is raised
    for req, target, f in pending:
        if f is not None:
            f.result()
        commit_tensor(req, target)
    return stats


def _join(prefix: str, name: str) -> str:
    return f"{prefix.rstrip('/')}/{name}" if prefix else name


def dcp_available() -> Tuple[bool, str]:
    """(True, "") when torch.distributed.checkpoint is usable here, else (False, why)."""
    try:
        import torch
        major = int(torch.__version__.split(".")[0])
        if major < 2:
            return False, (f"torch {torch.__version__} < 2.0 has no usable "
                           "torch.distributed.checkpoint")
        import torch.distributed.checkpoint  # noqa: F401
        return True, ""
    except Exception as e:  # ImportError, or DCP failing at import (torch 1.13 on Python 3.11)
        return False, f"torch.distributed.checkpoint does not import: {e}"


_ok, _why = dcp_available()
if _ok:
    import torch
    from torch.distributed.checkpoint import (StorageReader as _StorageReader,
                                              StorageWriter as _StorageWriter)
    from torch.distributed.checkpoint.planner import WriteItemType
    from torch.distributed.checkpoint.storage import WriteResult
    from torch.futures import Future

    from torch.distributed.checkpoint.filesystem import _StorageInfo

    from .objects import ObjectWriter

    try:  # torch >= 2.3: what dcp.async_save stages through (FileSystemWriter is one too)
        from torch.distributed.checkpoint.staging import BlockingAsyncStager as _Stager
    except ImportError:
        _Stager = object

    def _client(client, kwargs):
        if client is not None:
            return client
        return Client(**kwargs)

    class StorageWriter(_StorageWriter, _Stager):
        """Writes a DCP checkpoint under s3://bucket/prefix (see the module docstring)."""

        def __init__(self, checkpoint_id: str = "", *, client: Optional[Client] = None,
                     files_per_rank: int = 1, part_size: Optional[int] = None,
                     parts_in_flight: int = 4,
                     pinned_pool_bytes_max: int = pinned_pool_bytes_max_default,
                     **client_kwargs):
            _StorageWriter.__init__(self)
            if _Stager is not object:
                _Stager.__init__(self, cache_staged_state_dict=False)
            self._client_obj = client
            self._client_kwargs = client_kwargs
            self.files_per_rank = files_per_rank
            self.part_size = part_size
            self.parts_in_flight = parts_in_flight
            self.pinned_pool_bytes_max = pinned_pool_bytes_max
            # write_data's counts: tensor items streamed or through torch.save (dtypes without a
            # typed storage: float8), and the host pools' largest high-water mark.
            self.last_stats: dict = {}
            self.reset(checkpoint_id)

        def reset(self, checkpoint_id=None):
            if checkpoint_id:
                self.bucket, self.prefix = parse_uri(str(checkpoint_id))

        @classmethod
        def validate_checkpoint_id(cls, checkpoint_id) -> bool:
            return str(checkpoint_id).startswith("s3://")

        @property
        def client(self) -> Client:
            if self._client_obj is None:
                self._client_obj = Client(**self._client_kwargs)
            return self._client_obj

        def set_up_storage_writer(self, is_coordinator: bool) -> None:
            self.is_coordinator = is_coordinator

        def prepare_local_plan(self, plan):
            return plan

        def prepare_global_plan(self, plans):
            import dataclasses
            return [dataclasses.replace(p, storage_data=f"__{i}_") for i, p in enumerate(plans)]

        def storage_meta(self):
            try:
                from torch.distributed.checkpoint.metadata import StorageMeta
            except ImportError:  # torch < 2.4
                return None
            import uuid
            return StorageMeta(checkpoint_id=f"s3://{self.bucket}/{self.prefix}",
                               save_id=str(uuid.uuid4()))

        def write_data(self, plan, planner):
            file_prefix = plan.storage_data
            sizes = []
            for item in plan.items:  # as FileSystemWriter's _item_size, for balancing only
                if item.type == WriteItemType.BYTE_IO:
                    sizes.append(0)
                    continue
                n = torch._utils._element_size(item.tensor_data.properties.dtype)
                for d in item.tensor_data.size:
                    n *= d
                sizes.append(n)
            groups = assign_files(sizes, self.files_per_rank)
            results = []
            pools = []

            def write_file(n, idxs):
                name = f"{file_prefix}{n}.distcp"
                w = ObjectWriter(self.client, self.bucket, _join(self.prefix, name),
                                 part_size=self.part_size, parts_in_flight=self.parts_in_flight)
                out = []
                # one pool per file (files are written concurrently): pinned where CUDA is
                pool = HostChunkPool(self.pinned_pool_bytes_max, pin=torch.cuda.is_available())
                pools.append(pool)
                hows = []
                with w:
                    for i in idxs:
                        item = plan.items[i]
                        data = planner.resolve_data(item)
                        offset = w.tell()
                        if item.type == WriteItemType.BYTE_IO:
                            w.write(data.getbuffer() if isinstance(data, io.BytesIO) else data)
                        else:
                            # torch.save's bytes of a row-major copy, streamed from t's memory
                            # (a device tensor's through the pool): no host copy of the tensor.
                            hows.append(write_tensor_blob(w, data, pool=pool))
                        length = w.tell() - offset
                        out.append(WriteResult(index=item.index, size_in_bytes=length,
                                               storage_data=_StorageInfo(name, offset, length)))
                return out, hows

            stats = {"streamed": 0, "torch.save": 0, "pool_high_water": 0,
                     "pool_bytes_max": self.pinned_pool_bytes_max}
            with concurrent.futures.ThreadPoolExecutor(max(1, len(groups))) as ex:
                for r, hows in ex.map(lambda a: write_file(*a), enumerate(groups)):
                    results.extend(r)
                    for h in hows:
                        stats[h] += 1
            stats["pool_high_water"] = max([p.high_water for p in pools] + [0])
            self.last_stats = stats
            fut = Future()
            fut.set_result(results)
            return fut

        def finish(self, metadata, results) -> None:
            storage_md = {}
            for wr_list in results:
                storage_md.update({wr.index: wr.storage_data for wr in wr_list})
            metadata.storage_data = storage_md
            if hasattr(metadata, "storage_meta"):
                metadata.storage_meta = self.storage_meta()
            # One PUT of the whole .metadata: the commit point, atomic in S3.
            self.client.put(self.bucket, _join(self.prefix, ".metadata"), pickle.dumps(metadata))

    class StorageReader(_StorageReader):
        """Reads a DCP checkpoint under s3://bucket/prefix, FileSystemWriter's layout."""

        def __init__(self, checkpoint_id: str = "", *, client: Optional[Client] = None,
                     concurrency: Optional[int] = None, gap_bytes: int = _ranges.gap_bytes_default,
                     **client_kwargs):
            super().__init__()
            self._client_obj = client
            self._client_kwargs = client_kwargs
            self.concurrency = concurrency
            self.gap_bytes = gap_bytes
            self.reset(checkpoint_id)
            self.last_plan: List[ReadPlanEntry] = []  # the first GETs of the last read_data
            self.last_stats: dict = {}  # read_items' counts of the last read_data

        def reset(self, checkpoint_id=None):
            if checkpoint_id:
                self.bucket, self.prefix = parse_uri(str(checkpoint_id))

        @classmethod
        def validate_checkpoint_id(cls, checkpoint_id) -> bool:
            return str(checkpoint_id).startswith("s3://")

        @property
        def client(self) -> Client:
            if self._client_obj is None:
                self._client_obj = Client(**self._client_kwargs)
            return self._client_obj

        def read_metadata(self):
            raw = self.client.get(self.bucket, _join(self.prefix, ".metadata"))
            md = pickle.loads(raw)
            if hasattr(md, "storage_meta"):  # torch >= 2.4, as FileSystemReader does
                import uuid
                from torch.distributed.checkpoint.metadata import StorageMeta
                if md.storage_meta is None:
                    md.storage_meta = StorageMeta()
                md.storage_meta.load_id = str(uuid.uuid4())
            return md

        def set_up_storage_reader(self, metadata, is_coordinator: bool) -> None:
            self.storage_data = metadata.storage_data

        def prepare_local_plan(self, plan):
            return plan

        def prepare_global_plan(self, plans):
            return plans

        def read_data(self, plan, planner):
            # read_items (a plain function, tested without DCP) does the work; this only binds
            # it to the client and the planner.
            self.last_plan = plan_load(plan.items, self.storage_data, gap_bytes=self.gap_bytes)
            n = self.concurrency or self.client.config.get("concurrency", 8)

            def key(path):
                return _join(self.prefix, path)

            with concurrent.futures.ThreadPoolExecutor(max(1, n)) as ex:
                self.last_stats = read_items(
                    plan.items, self.storage_data, executor=ex, gap_bytes=self.gap_bytes,
                    get=lambda p, o, n: self.client.get(self.bucket, key(p), offset=o, length=n),
                    get_into=lambda p, buf, o, n: self.client.get_into(
                        self.bucket, key(p), buf, offset=o, length=n).nbytes,
                    resolve_tensor=planner.resolve_tensor, commit_tensor=planner.commit_tensor,
                    load_bytes=planner.load_bytes)
            fut = Future()
            fut.set_result(None)
            return fut

    class S3StorageWriter(StorageWriter):
        """s3torchconnector.dcp's S3StorageWriter(region, path, s3client_config=None,
        prefix_strategy=None, thread_count=1): a StorageWriter of checkpoint id ``path``
        ("s3://bucket/prefix"), thread_count files per rank written concurrently
        (files_per_rank). Other keywords are StorageWriter's and Client's. prefix_strategy
        (spreading files over key prefixes) is not supported: NotImplementedError."""

        def __init__(self, region: Optional[str], path: str, s3client_config=None,
                     prefix_strategy=None, thread_count: int = 1, **kwargs):
            from .torch import _with_config
            if prefix_strategy is not None:
                raise NotImplementedError("prefix_strategy is not supported")
            if region is not None:
                kwargs.setdefault("region", region)
            super().__init__(path, files_per_rank=thread_count,
                             **_with_config(kwargs, s3client_config))

    class S3StorageReader(StorageReader):
        """s3torchconnector.dcp's S3StorageReader(region, path, s3client_config=None,
        reader_constructor=None): a StorageReader of checkpoint id ``path``. reader_constructor
        is accepted and unused (loads plan their own ranged GETs: read_items)."""

        def __init__(self, region: Optional[str], path: str, s3client_config=None,
                     reader_constructor=None, **kwargs):
            from .torch import _with_config
            if region is not None:
                kwargs.setdefault("region", region)
            super().__init__(path, **_with_config(kwargs, s3client_config))

    __all__ += ["StorageWriter", "StorageReader", "S3StorageWriter", "S3StorageReader"]
else:
    _unavailable_reason = _why

    class _Unavailable:
        def __init__(self, *args, **kwargs):
            raise RuntimeError(f"objdirect.dcp needs torch >= 2.0: {_unavailable_reason}")

    class StorageWriter(_Unavailable):
        pass

    class StorageReader(_Unavailable):
        pass

    class S3StorageWriter(_Unavailable):
        pass

    class S3StorageReader(_Unavailable):
        pass
