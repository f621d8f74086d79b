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
  (parts_in_flight + 1) x part_size per file, parts_in_flight files at once), so device tensors
  pass through torch.save's host copy one at a time. ``.metadata`` is committed by the
  coordinator with one PUT once every rank's files are complete: a reader sees the checkpoint
  whole or not at all (no rename by copy and delete).
- Reads: the planner's read items are grouped per object, sorted and coalesced into ranged
  GETs (objdirect.ranges; gaps up to gap_bytes), issued concurrently (``concurrency``), and each
  item is copied into the planner's destination tensor, device tensors included.
- ``dcp.async_save`` works: write_data returns a completed Future after the uploads finish on
  the calling (background) thread.

The planning functions (plan_reads, assign_files) are plain and unit-tested without DCP
(Debian 12's torch 1.13 has none); the classes exist only where torch.distributed.checkpoint
imports, and scripts/gpu-check.sh runs them on a torch 2.x machine.

Thread safety: one writer or reader per dcp.save / dcp.load call.
"""

from __future__ import annotations

import concurrent.futures
import io
import pickle
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from . import parse_uri
from . import ranges as _ranges
from .client import Client

__all__ = ["plan_reads", "fetch_plan", "assign_files", "ReadPlanEntry", "dcp_available"]


class ReadPlanEntry(NamedTuple):
    """One GET of a load: object path relative to the checkpoint, the byte range, and the
    (offset, length) storage ranges it covers (one per distinct stored item)."""

    relative_path: str
    offset: int
    length: int
    members: Tuple[Tuple[int, int], ...]


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
    out = []
    for path in sorted(by_path):
        spans = [_ranges.Span(o, n, (o, n)) for o, n in sorted(by_path[path])]
        for g in _ranges.coalesce(spans, gap_bytes, group_bytes_max):
            out.append(ReadPlanEntry(path, g.offset, g.length, tuple(s.tag for s in g.members)))
    return out


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
    from torch.distributed.checkpoint.planner import (LoadItemType, WriteItemType)
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
                     parts_in_flight: int = 4, **client_kwargs):
            _StorageWriter.__init__(self)
            if _Stager is not object:
                _Stager.__init__(self, cache_staged_state_dict=False)
            self._client_obj = client
            self._client_kwargs = client_kwargs
            self.files_per_rank = files_per_rank
            self.part_size = part_size
            self.parts_in_flight = parts_in_flight
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

            def write_file(n, idxs):
                name = f"{file_prefix}{n}.distcp"
                w = ObjectWriter(self.client, self.bucket, _join(self.prefix, name),
                                 part_size=self.part_size, parts_in_flight=self.parts_in_flight)
                out = []
                with w:
                    for i in idxs:
                        item = plan.items[i]
                        data = planner.resolve_data(item)
                        offset = w.tell()
                        if item.type == WriteItemType.BYTE_IO:
                            w.write(data.getbuffer() if isinstance(data, io.BytesIO) else data)
                        else:
                            t = data.detach()
                            if t.device.type != "cpu":
                                t = t.cpu()
                            # torch.save writes a view's whole storage: save only the item's
                            # bytes, as FileSystemWriter does.
                            if (not t.is_contiguous() or t.untyped_storage().nbytes()
                                    != t.numel() * t.element_size()):
                                t = t.clone(memory_format=torch.contiguous_format)
                            torch.save(t, w)
                        length = w.tell() - offset
                        out.append(WriteResult(index=item.index, size_in_bytes=length,
                                               storage_data=_StorageInfo(name, offset, length)))
                return out

            with concurrent.futures.ThreadPoolExecutor(max(1, len(groups))) as ex:
                for r in ex.map(lambda a: write_file(*a), enumerate(groups)):
                    results.extend(r)
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
            self.last_plan: List[ReadPlanEntry] = []

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
            try:
                from torch.distributed._shard._utils import narrow_tensor_by_index
            except ImportError:  # pragma: no cover - moved in later 2.x
                from torch.distributed.checkpoint._utils import narrow_tensor_by_index
            entries = plan_reads(plan.items, self.storage_data, gap_bytes=self.gap_bytes)
            self.last_plan = entries
            n = self.concurrency or self.client.config.get("concurrency", 8)
            def get(path, offset, length):
                return self.client.get(self.bucket, _join(self.prefix, path), offset=offset,
                                       length=length)

            with concurrent.futures.ThreadPoolExecutor(max(1, n)) as ex:
                blobs = fetch_plan(get, entries, ex)
            for req in plan.items:
                info = self.storage_data[req.storage_index]
                blob = blobs[(info.relative_path, int(info.offset), int(info.length))]
                if req.type == LoadItemType.BYTE_IO:
                    planner.load_bytes(req, io.BytesIO(bytes(blob)))
                else:
                    tensor = torch.load(io.BytesIO(blob), map_location="cpu", weights_only=True)
                    tensor = narrow_tensor_by_index(tensor, req.storage_offsets, req.lengths)
                    target = planner.resolve_tensor(req).detach()
                    if target.size() != tensor.size():
                        raise ValueError(f"req {req.storage_index} mismatch sizes "
                                         f"{target.size()} vs {tensor.size()}")
                    target.copy_(tensor)
                    planner.commit_tensor(req, target)
            fut = Future()
            fut.set_result(None)
            return fut

    __all__ += ["StorageWriter", "StorageReader"]
else:
    _unavailable_reason = _why

    class _Unavailable:
        def __init__(self, *args, **kwargs):
            raise RuntimeError(f"objdirect.dcp needs torch >= 2.0: {_unavailable_reason}")

    class StorageWriter(_Unavailable):
        pass

    class StorageReader(_Unavailable):
        pass
