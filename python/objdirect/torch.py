"""objdirect.torch: PyTorch datasets and checkpoints over ObjDirect (s3torchconnector-style).

    from objdirect.torch import MapDataset, IterableDataset, Checkpoint

    ds = MapDataset.from_prefix("s3://bucket/train/", endpoint="http://127.0.0.1:9000",
                                transform=lambda r: torch.frombuffer(r.read(), dtype=torch.uint8))
    loader = torch.utils.data.DataLoader(ds, batch_size=8, num_workers=2)

    ckpt = Checkpoint(endpoint="http://127.0.0.1:9000")
    with ckpt.writer("s3://bucket/ckpt/epoch1.pt") as f:
        torch.save(model.state_dict(), f)
    with ckpt.reader("s3://bucket/ckpt/epoch1.pt") as f:
        state = torch.load(f)

Datasets (from_prefix, from_objects across buckets, from_manifest) shuffle per (seed, epoch),
prefetch within prefetch_bytes, resume a stopped epoch (state_dict / load_state_dict), shard by
worker and rank (drop_last) and list once per job; as_tensor / device= fetch into tensors.
save / load and save_safetensors / load_safetensors move checkpoints with each storage's byte
range fetched straight into its (device) tensor. docs/python.md has the details and limits.

s3torchconnector's names take its arguments, so that moving is an import change: S3MapDataset,
S3IterableDataset, S3Checkpoint, S3ReaderConstructor (reader_constructor=), S3ClientConfig
(s3client_config=), S3Reader, S3Writer.

Items are ObjectReader objects (file-like: read, readinto, seek, tell; .bucket, .key, .size)
passed through ``transform`` (identity by default). Datasets hold client settings, not a live
client: each process (DataLoader workers included, forked or spawned) opens its own Client on
first use (a Client itself also re-initialises after fork()).

Errors: the objdirect exceptions (NoSuchKey, NoSuchBucket, ...); listing errors surface when the
dataset is first used (len(), indexing or iteration), not at from_prefix().

Thread safety: datasets follow torch's rules (one per worker process); an ObjectReader or
ObjectWriter is for one thread at a time.
"""

from __future__ import annotations

import collections
import dataclasses
import io
import logging
import os
import random
import threading
import time
from typing import Callable, Iterator, List, NamedTuple, Optional, Sequence, Tuple

import torch.utils.data

from . import parse_uri
from .errors import InvalidRange
from .client import Client, ClientConfig, TransferResult
from .objects import ObjectReader, ObjectWriter
from .objects import get_range


def _get_range(client: Client, bucket: str, key: str, offset: int, length: int) -> bytes:
    """One GET of a range whose length the zip directory gave (checked against the object's
    size): no HEAD, no copy."""
    return get_range(client, bucket, key, offset, length, as_bytes=False)

__all__ = ["MapDataset", "IterableDataset", "Checkpoint", "ObjectReader", "ObjectWriter", "Entry",
           "AsTensor", "as_tensor", "epoch_order", "shard_order", "save", "load",
           "load_safetensors", "save_safetensors", "ReaderConstructor", "S3ReaderConstructor",
           "S3ClientConfig", "S3MapDataset", "S3IterableDataset", "S3Checkpoint", "S3Reader",
           "S3Writer"]


def _identity(x):
    return x


class _ClientSource:
    """Builds one Client per process from the given settings (or reuses `client` in its own)."""

    def __init__(self, client: Optional[Client], kwargs: dict):
        if client is not None and kwargs:
            raise TypeError("pass either client= or client settings, not both")
        self._args = dict(client._args) if client is not None else dict(kwargs)
        self._client = client
        self._pid = os.getpid()
        self._lock = threading.Lock()

    def get(self) -> Client:
        with self._lock:
            if self._client is None or self._pid != os.getpid():
                self._client = Client(**self._args)
                self._pid = os.getpid()
            return self._client

    def __getstate__(self):
        return {"args": self._args}

    def __setstate__(self, state):
        self._args = state["args"]
        self._client = None
        self._pid = os.getpid()
        self._lock = threading.Lock()


# -- datasets -----------------------------------------------------------------------------------


class Entry(NamedTuple):
    """One object of a dataset: bucket, key and size in bytes (None: unknown, a HEAD finds it)."""

    bucket: str
    key: str
    size: Optional[int] = None


# How many LISTs of a whole prefix this process made (tests and benchmarks read it).
list_calls = 0


def _dist():
    """torch.distributed when it is initialised, else None."""
    import torch.distributed as dist
    return dist if dist.is_available() and dist.is_initialized() else None


# A listing reports its progress every _LIST_PROGRESS_OBJECTS objects and when it ends (a
# dataset's list_progress(objects_listed, done) and an INFO line of the "objdirect.torch"
# logger), so that a prefix of millions of objects does not look like a hang.
_LIST_PROGRESS_OBJECTS = 10000
_log = logging.getLogger("objdirect.torch")


def _listed(client: Client, bucket: str, prefix: str,
            progress: Optional[Callable[[int, bool], None]]) -> List[Entry]:
    out, t0 = [], time.monotonic()

    def report(done: bool):
        _log.info("%s %d objects under s3://%s/%s (%.1f s)", "listed" if done else "listing:",
                  len(out), bucket, prefix, time.monotonic() - t0)
        if progress is not None:
            progress(len(out), done)

    for o in client.list(bucket, prefix):
        out.append(Entry(bucket, o.key, o.size))
        if len(out) % _LIST_PROGRESS_OBJECTS == 0:
            report(False)
    report(True)
    return out


def _list_entries(client: Client, bucket: str, prefix: str,
                  progress: Optional[Callable[[int, bool], None]] = None) -> List[Entry]:
    """The objects under prefix, in key order, listed once per job: when torch.distributed is
    initialised rank 0 lists and broadcasts the list (every rank must call this at the same
    point, as for any collective); otherwise this process lists. The process that lists
    reports its progress (see _LIST_PROGRESS_OBJECTS)."""
    global list_calls
    dist = _dist()
    if dist is None:
        list_calls += 1
        return _listed(client, bucket, prefix, progress)
    box = [None]
    if dist.get_rank() == 0:
        list_calls += 1
        try:
            box[0] = ("ok", _listed(client, bucket, prefix, progress))
        except Exception as e:  # the other ranks wait in the broadcast: send them the error
            box[0] = ("error", e)
    dist.broadcast_object_list(box, src=0)
    kind, value = box[0]
    if kind == "error":
        raise value
    return value


def _parse_manifest(manifest) -> List[Entry]:
    out = []
    for item in manifest:
        if isinstance(item, Entry):
            out.append(item)
            continue
        if isinstance(item, dict):
            uri, size = item["uri"], item.get("size")
        else:
            uri, size = item
        bucket, key = parse_uri(uri)
        if not key:
            raise ValueError(f"no key in {uri!r}")
        if size is not None and int(size) < 0:
            raise ValueError(f"negative size for {uri!r}")
        out.append(Entry(bucket, key, None if size is None else int(size)))
    return out


def epoch_order(n: int, shuffle: bool, seed: int, epoch: int) -> List[int]:
    """The order of n samples in an epoch: 0..n-1, or a permutation determined by (seed, epoch)
    alone (the same in every process, every run and every Python version: random.Random seeded
    with a string uses SHA-512)."""
    order = list(range(n))
    if shuffle:
        random.Random(f"objdirect:{seed}:{epoch}").shuffle(order)
    return order


def shard_order(order: Sequence[int], *, rank: int = 0, world: int = 1, drop_last: bool = False,
                position: int = 0, worker: int = 0, workers: int = 1,
                batch_size: int = 1) -> List[int]:
    """What one DataLoader worker of one rank yields of an epoch's order.

    Rank r takes samples r, r+world, ... of the order (with drop_last the order is first cut to a
    multiple of world, so every rank gets the same count). The first ``position`` of the rank's
    samples are skipped (a resumed epoch). The rest go to the workers in blocks of batch_size:
    block b to worker b % workers, the order in which a DataLoader with that batch_size hands
    batches out, so the samples a DataLoader has yielded are always a prefix of the rank's
    sequence, and position = samples seen resumes exactly.
    """
    if not 0 <= rank < world or not 0 <= worker < workers or batch_size < 1 or position < 0:
        raise ValueError("bad shard parameters")
    n = len(order)
    if drop_last:
        n -= n % world
    mine = list(order[rank:n:world])[position:]
    out = []
    for b in range(worker * batch_size, len(mine), workers * batch_size):
        out.extend(mine[b:b + batch_size])
    return out


class AsTensor:
    """A transform that lands each object straight in a tensor: ``torch.empty(size /
    itemsize, dtype=dtype, device=device)`` filled by get_into, through the client's device path
    for CUDA tensors (GPUDirect where the fabric supports it, the pinned bounce pipeline
    otherwise; never a host copy made by Python). A dataset given one fetches (and prefetches)
    into the tensor itself. ``allocate(nbytes)`` replaces the allocation (any get_into buffer).
    Raises ValueError when an object's size is not a multiple of the dtype's size.
    """

    def __init__(self, dtype=None, device=None, allocate: Optional[Callable] = None):
        import torch
        self.dtype = torch.uint8 if dtype is None else dtype
        self.device = device
        self._allocate = allocate

    def allocate(self, nbytes: int):
        import torch
        if self._allocate is not None:
            return self._allocate(nbytes)
        item = torch.empty((), dtype=self.dtype).element_size()
        if nbytes % item:
            raise ValueError(f"object of {nbytes} bytes is not a whole number of {self.dtype}")
        return torch.empty(nbytes // item, dtype=self.dtype, device=self.device)

    def __call__(self, reader: "ObjectReader"):
        buf = self.allocate(reader.size)
        reader.readinto_buffer(buf)
        return buf


def as_tensor(dtype=None, device=None, *, allocate: Optional[Callable] = None) -> AsTensor:
    """The AsTensor transform (s3torchconnector users would write it by hand)."""
    return AsTensor(dtype, device, allocate)


class _Batch:
    """One Client.get_many of consecutive entries: their buffers (slices of one bytearray arena,
    or the target's tensors) and the future of the call's per-item results."""

    def __init__(self, client: Client, entries: List[Entry], target: Optional[AsTensor]):
        self.entries = entries
        self.nbytes = sum(e.size for e in entries)
        if target is not None:
            self.bufs = [target.allocate(e.size) for e in entries]
        else:
            # torch.empty, not bytearray: every byte is about to be overwritten by the GETs, and
            # bytearray's zero-fill was 7 % of a read-ahead worker's CPU (docs/BENCHMARKS.md).
            arena = memoryview(torch.empty(self.nbytes, dtype=torch.uint8).numpy())
            self.bufs, off = [], 0
            for e in entries:
                self.bufs.append(arena[off:off + e.size])
                off += e.size
        # Zero-byte objects need no GET; the others go as one batch (one registration of the
        # arena, the GIL released for the whole batch, up to `concurrency` GETs in flight).
        self._slots = [i for i, e in enumerate(entries) if e.size]
        reqs = [(entries[i].bucket, entries[i].key, self.bufs[i]) for i in self._slots]
        self._future = client._submit(client.get_many, reqs, return_exceptions=True) \
            if reqs else None
        self._results: Optional[dict] = None

    def outcome(self, i: int):
        """Entry i's TransferResult or exception (None for a zero-byte object); waits."""
        if self._results is None:
            got = self._future.result() if self._future is not None else []
            self._results = dict(zip(self._slots, got))
        return self._results.get(i)

    def wait(self):
        """Waits for the batch, ignoring its results (buffers must outlive their GETs)."""
        if self._future is not None:
            try:
                self._future.result()
            except BaseException:
                pass


def _batch_caps(prefetch: int, prefetch_bytes: int) -> Tuple[int, int]:
    """The largest batch (objects, bytes): half the prefetch budget, so that one batch is in
    flight while the consumer works through the one before."""
    return max(1, (prefetch + 1) // 2), max(1, prefetch_bytes // 2)


class _Prefetcher:
    """Fetches the objects of an entry sequence ahead of the consumer, in batches.

    Each batch is one Client.get_many of the next consecutive entries into one arena (AsTensor
    targets: the target's tensors), at most half of ``prefetch`` objects and half of
    ``prefetch_bytes`` bytes, so that a batch is in flight while the consumer works through the
    one before. At most ``prefetch`` objects are in flight or fetched and not yet handed out,
    and a batch's bytes count against ``prefetch_bytes`` until its last object is handed out
    (an object larger than the budget's free part is fetched alone once nothing is held). The
    object handed out is the consumer's and no longer counted (an arena lives while any of its
    slices does). Objects of unknown size cost a HEAD first. peak_bytes / peak_objects record
    the most ever held; batches counts the get_many calls.
    """

    def __init__(self, client: Client, entries: Iterator[Entry], prefetch: int,
                 prefetch_bytes: int, target: Optional[AsTensor]):
        self._client = client
        self._entries = iter(entries)
        self._prefetch = prefetch
        self._bytes_max = prefetch_bytes
        self._target = target
        self._batches: collections.deque = collections.deque()  # [batch, next index]
        self._held_bytes = 0    # bytes of the batches not wholly handed out
        self._held_objects = 0  # objects in flight or fetched, not handed out
        self._next: Optional[Entry] = None
        self._done = False
        self.peak_bytes = 0
        self.peak_objects = 0
        self.batches = 0

    def _peek(self) -> Optional[Entry]:
        if self._next is None and not self._done:
            e = next(self._entries, None)
            if e is None:
                self._done = True
            elif e.size is None:
                e = Entry(e.bucket, e.key, self._client.head(e.bucket, e.key).size)
            self._next = e
        return self._next

    def _fill(self):
        cap_n, cap_b = _batch_caps(self._prefetch, self._bytes_max)
        while True:
            room_n = self._prefetch - self._held_objects
            room_b = self._bytes_max - self._held_bytes
            if self._batches and (room_n < cap_n or room_b < cap_b):
                return
            batch, nbytes = [], 0
            while len(batch) < min(cap_n, room_n):
                e = self._peek()
                if e is None:
                    break
                fits = nbytes + e.size <= min(cap_b, room_b) or (
                    not batch and (not self._batches or e.size <= room_b))
                if not fits:
                    break
                batch.append(e)
                nbytes += e.size
                self._next = None
            if not batch:
                return
            self._batches.append([_Batch(self._client, batch, self._target), 0])
            self.batches += 1
            self._held_objects += len(batch)
            self._held_bytes += nbytes
            self.peak_bytes = max(self.peak_bytes, self._held_bytes)
            self.peak_objects = max(self.peak_objects, self._held_objects)

    def __iter__(self):
        return self

    def __next__(self):
        self._fill()
        if not self._batches:
            raise StopIteration
        slot = self._batches[0]
        b, i = slot
        try:
            r = b.outcome(i)
        except BaseException:
            self.close()
            raise
        if isinstance(r, BaseException):
            self.close()
            raise r
        slot[1] += 1
        self._held_objects -= 1
        if slot[1] == len(b.entries):
            self._batches.popleft()
            self._held_bytes -= b.nbytes
        self._fill()  # the next batch overlaps the consumer's work on this one
        return b.entries[i], b.bufs[i]

    def close(self):
        # Buffers of queued fetches must outlive them: wait, ignore their results.
        while self._batches:
            self._batches.popleft()[0].wait()
        self._held_bytes = self._held_objects = 0


class _DatasetBase:
    """What MapDataset and IterableDataset share: the entries (listed once, lazily), the client
    source, the transform, shuffle/seed/epoch/position state and the prefetch settings."""

    def _setup(self, *, entries: Optional[List[Entry]], bucket: str, prefix: str,
               source: _ClientSource, transform: Callable, reader_mode: str, shuffle: bool,
               seed: int, prefetch: Optional[int], prefetch_bytes: int, device,
               list_progress: Optional[Callable[[int, bool], None]] = None):
        reader_mode, self._reader_buffer_size = _reader_choice(reader_mode)
        if prefetch is not None and prefetch < 0 or prefetch_bytes < 1:
            raise ValueError("prefetch must be >= 0 and prefetch_bytes positive")
        if reader_mode == "ranged" and prefetch:
            raise ValueError("prefetch fetches whole objects: use reader_mode='whole'")
        if device is not None:
            if transform is not _identity:
                raise ValueError("pass device= or transform=, not both (see as_tensor)")
            transform = AsTensor(None, device)
        self.bucket = bucket
        self.prefix = prefix
        self._entries_list = entries
        self._list_progress = list_progress
        self._source = source
        self._transform = transform
        self._reader_mode = reader_mode
        self.shuffle = bool(shuffle)
        self.seed = int(seed)
        self.epoch = 0
        self._position = 0
        self.prefetch = prefetch
        self.prefetch_bytes = int(prefetch_bytes)

    # -- entries --

    @property
    def entries(self) -> List[Entry]:
        """Every object of the dataset in key (or given) order; lists the prefix on first use."""
        if self._entries_list is None:
            self._entries_list = _list_entries(self._source.get(), self.bucket, self.prefix,
                                               self._list_progress)
        return self._entries_list

    @property
    def keys(self) -> List[str]:
        return [e.key for e in self.entries]

    # -- epochs and resumption --

    def set_epoch(self, epoch: int) -> None:
        """Selects the epoch's order (a new permutation when shuffle=True) and starts it from
        the beginning (position 0). Call it before each epoch, as with DistributedSampler."""
        self.epoch = int(epoch)
        self._position = 0
        self._resume = 0

    def state_dict(self, samples_seen: Optional[int] = None) -> dict:
        """Where the epoch stands: {"epoch", "seed", "shuffle", "position", "num_samples"}.

        position counts this rank's samples already consumed in the epoch: by default the
        samples this object yielded in this process (iteration without DataLoader workers);
        with DataLoader workers, which iterate copies, pass samples_seen, the count the training
        loop took from the DataLoader since this pass began (after a resume: since the resume),
        e.g. state_dict(samples_seen=steps * batch_size).
        """
        pos = self._position if samples_seen is None else self._resume_from() + int(samples_seen)
        return {"epoch": self.epoch, "seed": self.seed, "shuffle": self.shuffle,
                "position": pos, "num_samples": len(self.entries)}

    def load_state_dict(self, state: dict) -> None:
        """Resumes a stopped epoch: the next iterations (or indexing, for MapDataset) cover
        exactly the samples the saved epoch had not yet produced, in the same order. Raises
        ValueError when the dataset's objects, seed or shuffle differ from the saved ones."""
        if state.get("num_samples", len(self.entries)) != len(self.entries):
            raise ValueError(f"state is for {state['num_samples']} samples, the dataset has "
                             f"{len(self.entries)}")
        if state.get("seed", self.seed) != self.seed or state.get("shuffle",
                                                                  self.shuffle) != self.shuffle:
            raise ValueError("state was saved with another seed or shuffle setting")
        if int(state["position"]) < 0:
            raise ValueError("negative position")
        self.epoch = int(state["epoch"])
        self._position = int(state["position"])
        self._resume = self._position

    def _resume_from(self) -> int:
        return getattr(self, "_resume", 0)

    def _rank(self):
        """(rank, world size) this dataset shards by: torch.distributed's with shard_by_rank
        when it is initialised, else (0, 1)."""
        dist = _dist() if self._shard_by_rank else None
        return (dist.get_rank(), dist.get_world_size()) if dist is not None else (0, 1)

    # -- fetching --

    def _reader(self, client: Client, e: Entry, data=None) -> "ObjectReader":
        r = ObjectReader(client, e.bucket, e.key, mode=self._reader_mode, size=e.size,
                         buffer_size=self._reader_buffer_size)
        if data is not None:
            r._data = memoryview(data)
        return r

    def _item(self, client: Client, e: Entry, buf):
        """The transform's output for an entry whose bytes the prefetcher fetched into buf."""
        if isinstance(self._transform, AsTensor):
            return buf
        return self._transform(self._reader(client, e, buf))

    def _direct(self, client: Client, e: Entry):
        """An item without prefetch: the reader fetches when the transform reads."""
        if isinstance(self._transform, AsTensor):
            return self._transform(self._reader(client, e))
        return self._transform(self._reader(client, e))

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("last_prefetcher", None)
        state["_list_progress"] = None  # a callback of the process that built the dataset
        return state

    def _prefetcher(self, client, entries) -> _Prefetcher:
        target = self._transform if isinstance(self._transform, AsTensor) else None
        p = _Prefetcher(client, entries, self.prefetch, self.prefetch_bytes, target)
        self.last_prefetcher = p
        return p


_PREFETCH_BYTES = 64 << 20


class MapDataset(_DatasetBase, torch.utils.data.Dataset):
    """A map-style dataset: item i is transform(ObjectReader of the i-th object).

    The order is key order (from_prefix) or the given order, permuted per (seed, epoch) when
    shuffle=True. shard_by_rank: the dataset is this torch.distributed rank's share of that
    order (samples r, r+world, ...; see shard_order), for a plain sampler instead of a
    DistributedSampler; drop_last cuts the order to a multiple of the world size first, so
    every rank has the same len() and its DataLoader the same number of batches (without it
    the first len % world ranks have one sample more). After load_state_dict() the dataset
    covers only the samples the saved epoch had not produced on this rank: len() counts them
    and item i is the (position + i)-th of the rank's epoch.
    prefetch: on item i the next ``prefetch`` items (i+1, ...) are fetched in the background
    (bounded by prefetch_bytes), which serves a sequential sampler; another access pattern only
    wastes the read-ahead.
    """

    def __init__(self, bucket: str, keys, prefix: str, source: _ClientSource, transform: Callable,
                 reader_mode: str, *, entries: Optional[List[Entry]] = None,
                 shuffle: bool = False, seed: int = 0, prefetch: int = 0,
                 prefetch_bytes: int = _PREFETCH_BYTES, device=None,
                 shard_by_rank: bool = False, drop_last: bool = False,
                 list_progress: Optional[Callable[[int, bool], None]] = None):
        if entries is None and keys is not None:
            entries = [Entry(bucket, k, s) for k, s in keys]
        self._setup(entries=entries, bucket=bucket, prefix=prefix, source=source,
                    transform=transform, reader_mode=reader_mode, shuffle=shuffle, seed=seed,
                    prefetch=prefetch, prefetch_bytes=prefetch_bytes, device=device,
                    list_progress=list_progress)
        self._shard_by_rank = bool(shard_by_rank)
        self.drop_last = bool(drop_last)
        self._order_cache = None
        self._ahead = {}  # index -> (entry, _Batch, index in the batch) fetched ahead
        self.batches = 0  # get_many calls of the read-ahead
        if entries is None and shard_by_rank and _dist() is not None:
            self.entries  # the collective: every rank constructs the dataset at the same point

    @classmethod
    def from_prefix(cls, s3_uri: str, *, transform: Callable = _identity,
                    client: Optional[Client] = None, reader_mode: str = "whole",
                    shuffle: bool = False, seed: int = 0, prefetch: int = 0,
                    prefetch_bytes: int = _PREFETCH_BYTES, device=None,
                    shard_by_rank: bool = False, drop_last: bool = False,
                    reader_constructor: Optional["ReaderConstructor"] = None,
                    s3client_config: Optional["S3ClientConfig"] = None,
                    list_progress: Optional[Callable[[int, bool], None]] = None,
                    **client_kwargs) -> "MapDataset":
        """Every object under s3://bucket/prefix, listed on first use (once per job: see
        IterableDataset; with shard_by_rank under torch.distributed, at construction, which
        every rank must reach). client_kwargs are objdirect.Client's (endpoint, fabric, ...).
        reader_constructor and s3client_config: s3torchconnector's (S3ReaderConstructor,
        S3ClientConfig), instead of reader_mode and client settings. list_progress(objects
        listed, done) is called every 10,000 objects of the listing and when it ends, in the
        process that lists (an INFO line of the "objdirect.torch" logger says the same)."""
        bucket, prefix = parse_uri(s3_uri)
        return cls(bucket, None, prefix,
                   _ClientSource(client, _with_config(client_kwargs, s3client_config)),
                   transform, reader_constructor or reader_mode, shuffle=shuffle, seed=seed,
                   prefetch=prefetch, prefetch_bytes=prefetch_bytes, device=device,
                   shard_by_rank=shard_by_rank, drop_last=drop_last, list_progress=list_progress)

    @classmethod
    def from_objects(cls, s3_uris: Sequence[str], *, transform: Callable = _identity,
                     client: Optional[Client] = None, reader_mode: str = "whole",
                     **kwargs) -> "MapDataset":
        """The given objects (one URI or several), in any buckets, in the given order (sizes
        found by HEAD)."""
        return cls.from_manifest([(u, None) for u in _uris(s3_uris)], transform=transform,
                                 client=client, reader_mode=reader_mode, **kwargs)

    @classmethod
    def from_manifest(cls, manifest, *, transform: Callable = _identity,
                      client: Optional[Client] = None, reader_mode: str = "whole",
                      shuffle: bool = False, seed: int = 0, prefetch: int = 0,
                      prefetch_bytes: int = _PREFETCH_BYTES, device=None,
                      shard_by_rank: bool = False, drop_last: bool = False,
                      reader_constructor: Optional["ReaderConstructor"] = None,
                      s3client_config: Optional["S3ClientConfig"] = None,
                      **client_kwargs) -> "MapDataset":
        """The objects of a manifest, no LIST: (uri, size) pairs, {"uri", "size"} dicts or
        Entry values (size None: found by HEAD when needed), in the given order."""
        entries = _parse_manifest(manifest)
        return cls("", None, "",
                   _ClientSource(client, _with_config(client_kwargs, s3client_config)),
                   transform, reader_constructor or reader_mode,
                   entries=entries, shuffle=shuffle, seed=seed, prefetch=prefetch,
                   prefetch_bytes=prefetch_bytes, device=device, shard_by_rank=shard_by_rank,
                   drop_last=drop_last)

    def _order(self) -> List[int]:
        """This rank's samples of the epoch, in order (every sample without shard_by_rank)."""
        rank, world = self._rank()
        key = (len(self.entries), self.shuffle, self.seed, self.epoch, rank, world,
               self.drop_last)
        if self._order_cache is None or self._order_cache[0] != key:
            order = epoch_order(len(self.entries), self.shuffle, self.seed, self.epoch)
            self._order_cache = (key, shard_order(order, rank=rank, world=world,
                                                  drop_last=self.drop_last))
        return self._order_cache[1]

    def __len__(self):
        return max(0, len(self._order()) - self._resume_from())

    def _entry(self, i: int) -> Entry:
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"index {i} out of range for {n} samples")
        return self.entries[self._order()[self._resume_from() + i]]

    def __getitem__(self, i):
        client = self._source.get()
        e = self._entry(i)
        self._position = self._resume_from() + (i if i >= 0 else i + len(self)) + 1
        if not self.prefetch:
            return self._direct(client, e)
        hit = self._ahead.pop(i, None)
        # Read-ahead of the next indices; what is not the sequential successor is dropped.
        for j in [j for j in self._ahead if not i < j <= i + self.prefetch]:
            self._drop(j)
        held = sum(x[0].size for x in self._ahead.values())
        want = []
        for j in range(i + 1, min(i + 1 + self.prefetch, len(self))):
            if j in self._ahead:
                continue
            ej = self._entry(j)
            if ej.size is None or held + ej.size > self.prefetch_bytes:
                break
            want.append((j, ej))
            held += ej.size
        # One get_many for the missing successors, once they make half the window (or nothing
        # is ahead): batches, not one GET call per item.
        cap_n, _ = _batch_caps(self.prefetch, self.prefetch_bytes)
        if want and (len(want) >= cap_n or not self._ahead):
            batch = _Batch(client, [ej for _, ej in want], self._target())
            self.batches += 1
            for k, (j, ej) in enumerate(want):
                self._ahead[j] = (ej, batch, k)
        if hit is not None:
            ej, batch, k = hit
            r = batch.outcome(k)
            if isinstance(r, BaseException):
                raise r
            return self._item(client, ej, batch.bufs[k])
        return self._direct(client, e)

    def _target(self) -> Optional[AsTensor]:
        return self._transform if isinstance(self._transform, AsTensor) else None

    def _drop(self, j):
        _, batch, _ = self._ahead.pop(j)
        batch.wait()

    def __getstate__(self):
        state = super().__getstate__()
        state["_ahead"] = {}
        return state


class IterableDataset(_DatasetBase, torch.utils.data.IterableDataset):
    """An iterable dataset over the objects under a prefix (or of a manifest or a list).

    shard_by_worker: DataLoader workers share the samples (see shard_order: blocks of
    batch_size per worker, so pass the DataLoader's batch_size for exact resumption).
    shard_by_rank: also split across torch.distributed ranks; drop_last gives every rank the
    same count. shuffle/seed/set_epoch: a deterministic per-epoch permutation (the same in
    every rank and worker). prefetch objects (default 8) are fetched ahead of the consumer in
    each worker, bounded by prefetch_bytes (default 64 MiB; see _Prefetcher).

    Listing happens once per job: on first use of the dataset, and when torch.distributed is
    initialised at from_prefix() (every rank must call it; rank 0 lists and broadcasts). Use the
    dataset (len(), .entries) before handing it to a DataLoader and its workers inherit the
    list; a worker that finds no list lists the prefix itself.
    """

    def __init__(self, bucket: str, prefix: str, source: _ClientSource, transform: Callable,
                 shard_by_worker: bool, shard_by_rank: bool, reader_mode: str, *,
                 entries: Optional[List[Entry]] = None, shuffle: bool = False, seed: int = 0,
                 drop_last: bool = False, batch_size: int = 1, prefetch: Optional[int] = None,
                 prefetch_bytes: int = _PREFETCH_BYTES, device=None,
                 list_progress: Optional[Callable[[int, bool], None]] = None):
        if prefetch is None:
            prefetch = 8 if _reader_choice(reader_mode)[0] == "whole" else 0
        if batch_size < 1:
            raise ValueError("batch_size must be positive")
        self._setup(entries=entries, bucket=bucket, prefix=prefix, source=source,
                    transform=transform, reader_mode=reader_mode, shuffle=shuffle, seed=seed,
                    prefetch=prefetch, prefetch_bytes=prefetch_bytes, device=device,
                    list_progress=list_progress)
        self._shard_by_worker = shard_by_worker
        self._shard_by_rank = shard_by_rank
        self.drop_last = drop_last
        self.batch_size = batch_size
        if entries is None and shard_by_rank and _dist() is not None:
            self.entries  # the collective: every rank constructs the dataset at the same point

    @classmethod
    def from_prefix(cls, s3_uri: str, *, transform: Callable = _identity,
                    shard_by_worker: bool = True, shard_by_rank: bool = False,
                    enable_sharding: Optional[bool] = None,
                    client: Optional[Client] = None, reader_mode: str = "whole",
                    reader_constructor: Optional["ReaderConstructor"] = None,
                    s3client_config: Optional["S3ClientConfig"] = None,
                    **kwargs) -> "IterableDataset":
        """Every object under s3://bucket/prefix, in key order (then shuffled if asked).
        enable_sharding (s3torchconnector's name) sets shard_by_worker and shard_by_rank;
        reader_constructor, s3client_config and list_progress as MapDataset.from_prefix."""
        if enable_sharding is not None:
            shard_by_worker = shard_by_rank = bool(enable_sharding)
        bucket, prefix = parse_uri(s3_uri)
        source = _ClientSource(client, _with_config(_client_kwargs(kwargs), s3client_config))
        return cls(bucket, prefix, source, transform, shard_by_worker, shard_by_rank,
                   reader_constructor or reader_mode, **kwargs)

    @classmethod
    def from_objects(cls, s3_uris: Sequence[str], **kwargs) -> "IterableDataset":
        """The given objects (one URI or several), in any buckets, in the given order (sizes
        found by HEAD)."""
        return cls.from_manifest([(u, None) for u in _uris(s3_uris)], **kwargs)

    @classmethod
    def from_manifest(cls, manifest, *, transform: Callable = _identity,
                      shard_by_worker: bool = True, shard_by_rank: bool = False,
                      enable_sharding: Optional[bool] = None, client: Optional[Client] = None,
                      reader_mode: str = "whole",
                      reader_constructor: Optional["ReaderConstructor"] = None,
                      s3client_config: Optional["S3ClientConfig"] = None,
                      **kwargs) -> "IterableDataset":
        """The objects of a manifest, no LIST: (uri, size) pairs, {"uri", "size"} dicts or
        Entry values, in the given order."""
        if enable_sharding is not None:
            shard_by_worker = shard_by_rank = bool(enable_sharding)
        source = _ClientSource(client, _with_config(_client_kwargs(kwargs), s3client_config))
        return cls("", "", source, transform, shard_by_worker, shard_by_rank,
                   reader_constructor or reader_mode, entries=_parse_manifest(manifest),
                   **kwargs)

    def __len__(self):
        """The samples this rank yields in the current epoch (all workers together)."""
        rank, world = self._rank()
        return len(shard_order(range(len(self.entries)), rank=rank, world=world,
                               drop_last=self.drop_last, position=self._resume_from()))

    def plan(self, worker: int = 0, workers: int = 1) -> List[Entry]:
        """The entries one worker of this rank yields this epoch, in order."""
        rank, world = self._rank()
        entries = self.entries
        order = epoch_order(len(entries), self.shuffle, self.seed, self.epoch)
        idx = shard_order(order, rank=rank, world=world, drop_last=self.drop_last,
                          position=self._resume_from(), worker=worker, workers=workers,
                          batch_size=self.batch_size)
        return [entries[i] for i in idx]

    def __iter__(self) -> Iterator:
        client = self._source.get()
        info = torch.utils.data.get_worker_info() if self._shard_by_worker else None
        mine = self.plan(info.id, info.num_workers) if info is not None else self.plan()
        self._position = self._resume_from()
        if not self.prefetch:
            for e in mine:
                self._position += 1
                yield self._direct(client, e)
            return
        p = self._prefetcher(client, mine)
        try:
            for e, buf in p:
                self._position += 1
                yield self._item(client, e, buf)
        finally:
            p.close()


def _client_kwargs(kwargs: dict) -> dict:
    """Splits Client settings out of a dataset constructor's keyword arguments (in place)."""
    import inspect
    names = set(inspect.signature(Client.__init__).parameters) - {"self"}
    return {k: kwargs.pop(k) for k in list(kwargs) if k in names}


# -- checkpoints --------------------------------------------------------------------------------


class Checkpoint:
    """Writers and readers of s3:// URIs for torch.save / torch.load.

    Takes objdirect.Client's settings (endpoint, region, profile, fabric, ...) or client=, or
    s3torchconnector's s3client_config (an S3ClientConfig). reader_constructor (an
    S3ReaderConstructor choice) sets how reader() reads unless its call says otherwise
    (default: ranged with an 8 MiB read-ahead window).
    """

    def __init__(self, *, client: Optional[Client] = None,
                 reader_constructor: Optional["ReaderConstructor"] = None,
                 s3client_config: Optional["S3ClientConfig"] = None, **client_kwargs):
        self._source = _ClientSource(client, _with_config(client_kwargs, s3client_config))
        self._reader = _reader_choice(reader_constructor or ReaderConstructor("ranged"))

    def writer(self, s3_uri: str, *, part_size: Optional[int] = None) -> ObjectWriter:
        """A streaming writer (multipart upload of part_size parts; see ObjectWriter)."""
        bucket, key = parse_uri(s3_uri)
        if not key:
            raise ValueError(f"no key in {s3_uri!r}")
        return ObjectWriter(self._source.get(), bucket, key, part_size=part_size)

    def reader(self, s3_uri: str, *, mode: Optional[str] = None,
               buffer_size: Optional[int] = None) -> ObjectReader:
        """A seekable reader; "ranged" (the default, unless the Checkpoint's
        reader_constructor says otherwise) keeps memory within buffer_size (8 MiB)."""
        bucket, key = parse_uri(s3_uri)
        if not key:
            raise ValueError(f"no key in {s3_uri!r}")
        return ObjectReader(self._source.get(), bucket, key, mode=mode or self._reader[0],
                            buffer_size=buffer_size or self._reader[1])


# -- s3torchconnector's names ---------------------------------------------------------------------
#
# So that moving from s3torchconnector is an import change: its classes' names (aliases of the
# ones above, taking its keyword arguments: region, endpoint, transform, enable_sharding,
# reader_constructor, s3client_config), its reader choices and its client settings.

_READ_WINDOW_BYTES = 8 << 20  # a ranged reader's default read-ahead window (s3torchconnector's)


class ReaderConstructor(NamedTuple):
    """How items and checkpoint readers read their object (an S3ReaderConstructor choice):
    mode "whole" (the first read fetches the whole object in one GET) or "ranged" (GETs of what
    is read, with a read-ahead window of buffer_size bytes for reads smaller than it; larger
    reads go straight into the caller's buffer)."""

    mode: str = "whole"
    buffer_size: int = _READ_WINDOW_BYTES


class S3ReaderConstructor:
    """s3torchconnector's reader choices, for ``reader_constructor=``."""

    @staticmethod
    def sequential() -> ReaderConstructor:
        """The whole object in one GET on first read; reads and seeks served from it."""
        return ReaderConstructor("whole")

    @staticmethod
    def range_based(buffer_size: Optional[int] = None) -> ReaderConstructor:
        """Ranged GETs of what is read; buffer_size (default 8 MiB) the read-ahead window, 0 for
        none (every read is one GET of exactly its bytes)."""
        if buffer_size is not None and int(buffer_size) < 0:
            raise ValueError("buffer_size must be >= 0")
        n = _READ_WINDOW_BYTES if buffer_size is None else int(buffer_size)
        return ReaderConstructor("ranged", max(1, n))  # a 1-byte window: no read is smaller

    @staticmethod
    def default() -> ReaderConstructor:
        return S3ReaderConstructor.sequential()


def _reader_choice(how) -> Tuple[str, int]:
    """(mode, window bytes) of a reader_mode string or a ReaderConstructor."""
    if isinstance(how, ReaderConstructor):
        how, size = how.mode, how.buffer_size
    else:
        size = _READ_WINDOW_BYTES
    if how not in ("whole", "ranged"):
        raise ValueError("reader_mode must be 'whole' or 'ranged' (or reader_constructor an "
                         "S3ReaderConstructor choice)")
    return how, int(size)


@dataclasses.dataclass(frozen=True)
class S3ClientConfig:
    """s3torchconnector's client settings, for ``s3client_config=``: part_size (bytes per part
    and per ranged GET of a large object: ClientConfig.multipart_chunksize), max_attempts (per
    request, 1..20), force_path_style (False, s3torchconnector's default: virtual-hosted
    addressing, which needs a server with --domain; True: path style, ObjDirect's own default
    when no s3client_config is given). throughput_target_gbps is accepted and not used
    (concurrency= sets the requests in flight). unsigned (anonymous) requests are not supported:
    client_config() raises NotImplementedError for unsigned=True."""

    throughput_target_gbps: float = 10.0
    part_size: int = 8 << 20
    unsigned: bool = False
    force_path_style: bool = False
    max_attempts: int = 10

    def client_config(self) -> ClientConfig:
        """The objdirect.ClientConfig of these settings."""
        if self.unsigned:
            raise NotImplementedError("unsigned (anonymous) requests are not supported")
        return ClientConfig(max_attempts=int(self.max_attempts),
                            multipart_chunksize=int(self.part_size),
                            addressing_style="path" if self.force_path_style else "virtual")


def _with_config(client_kwargs: dict, s3client_config: Optional[S3ClientConfig]) -> dict:
    """client_kwargs with s3client_config as Client's config= (both given: TypeError)."""
    if s3client_config is None:
        return client_kwargs
    if not isinstance(s3client_config, S3ClientConfig):
        raise TypeError("s3client_config must be an objdirect.torch.S3ClientConfig")
    if "config" in client_kwargs:
        raise TypeError("pass either config= or s3client_config=, not both")
    return dict(client_kwargs, config=s3client_config.client_config())


def _uris(s3_uris) -> List[str]:
    """One URI or an iterable of them (from_objects takes both, as s3torchconnector's)."""
    return [s3_uris] if isinstance(s3_uris, str) else list(s3_uris)


class S3Checkpoint(Checkpoint):
    """s3torchconnector's S3Checkpoint(region, endpoint=None, s3client_config=None,
    reader_constructor=None): a Checkpoint whose reader() reads sequentially (one GET of the
    whole object) unless reader_constructor says otherwise, as s3torchconnector's does. Other
    keywords are objdirect.Client's (fabric, credentials, ...)."""

    def __init__(self, region: Optional[str] = None, endpoint: Optional[str] = None,
                 s3client_config: Optional[S3ClientConfig] = None,
                 reader_constructor: Optional[ReaderConstructor] = None, **client_kwargs):
        if region is not None:
            client_kwargs["region"] = region
        if endpoint is not None:
            client_kwargs["endpoint"] = endpoint
        super().__init__(reader_constructor=reader_constructor or S3ReaderConstructor.default(),
                         s3client_config=s3client_config, **client_kwargs)


S3MapDataset = MapDataset
S3IterableDataset = IterableDataset
S3Reader = ObjectReader
S3Writer = ObjectWriter


# -- save / load --------------------------------------------------------------------------------
#
# torch.save writes a zip archive (stored, uncompressed records): <archive>/data.pkl (the
# pickled object, tensors as persistent ids naming storage records), <archive>/data/<key> (one
# record per storage, the raw bytes), <archive>/version and, in torch 2.x, byteorder. load()
# reads the archive's directory once (the tail holding the end-of-central-directory record,
# which for most files holds the central directory too), predicts where each record's bytes
# lie from the directory alone (records end to end), and fetches each record's local header
# together with its bytes in one ranged GET, checking the header; neighbouring small CPU
# storages share one GET. data.pkl is unpickled; each storage is allocated on its destination
# device and its bytes land straight in it (concurrently, on a pool of `concurrency` threads),
# so tensor bytes never pass through a host buffer of ours (but CPU storages already inside the
# tail, copied from it). docs/python.md, "save and
# load", describes the parsing and its limits.

_EOCD = 0x06054B50
_EOCD64 = 0x06064B50
_EOCD64_LOCATOR = 0x07064B50
_CENTRAL = 0x02014B50
_LOCAL = 0x04034B50

zip_directory_bytes_max = 64 << 20  # the largest central directory load() accepts
zip_records_max = 1 << 20           # the most records it accepts
safetensors_header_bytes_max = 100 << 20  # as the safetensors library's own limit
local_header_bytes_max = 30 + 0xFFFF + 0xFFFF  # fixed part, longest name, longest extra
# load(): CPU storages of at most load_coalesce_record_bytes_max that lie next to each other in
# the file share one GET into one allocation, up to load_group_bytes_max bytes a GET.
load_coalesce_record_bytes_max = 1 << 20
load_group_bytes_max = 16 << 20
_HEAD_BYTES = 64 << 10  # load()'s first GET: the size, and data.pkl for most checkpoints
_TAIL_BYTES = 64 << 10  # EOCD (22 bytes) + the longest comment (65535) is under 66 KiB
_TAIL_BYTES += 22 + 20 + 56


class ZipRecord(NamedTuple):
    """One central-directory entry: name, compression method, stored and original sizes, and
    the offset of its local header."""

    name: str
    method: int
    compressed_size: int
    size: int
    header_offset: int
    flags: int = 0            # general purpose bit flag (bit 3: a data descriptor follows)
    raw_name: bytes = b""     # the name as stored (the local header repeats it)


def parse_zip_tail(tail: bytes, object_size: int) -> Tuple[int, int, int]:
    """(central directory offset, its size, record count) from the last bytes of a zip file
    (``tail`` ends at object_size). Handles zip64. Raises ValueError for anything that is not a
    zip ending, a directory outside the object, or one over zip_directory_bytes_max /
    zip_records_max."""
    import struct
    base = object_size - len(tail)
    i = tail.rfind(struct.pack("<I", _EOCD))
    while i >= 0 and len(tail) - i < 22:
        i = tail.rfind(struct.pack("<I", _EOCD), 0, i)
    if i < 0:
        raise ValueError("not a zip file: no end of central directory record")
    (_, disk, cd_disk, n_here, n, cd_size, cd_off,
     comment_len) = struct.unpack_from("<IHHHHIIH", tail, i)
    if i + 22 + comment_len != len(tail) or disk != cd_disk or n_here != n:
        raise ValueError("malformed or multi-disk end of central directory record")
    if 0xFFFF in (n,) or 0xFFFFFFFF in (cd_size, cd_off):
        j = i - 20
        if j < 0 or struct.unpack_from("<I", tail, j)[0] != _EOCD64_LOCATOR:
            raise ValueError("zip64 end of central directory locator missing")
        eocd64 = struct.unpack_from("<Q", tail, j + 8)[0] - base
        if not 0 <= eocd64 <= len(tail) - 56 or struct.unpack_from(
                "<I", tail, eocd64)[0] != _EOCD64:
            raise ValueError("zip64 end of central directory record missing")
        n, cd_size, cd_off = struct.unpack_from("<QQQ", tail, eocd64 + 32)
    if cd_size > zip_directory_bytes_max or n > zip_records_max:
        raise ValueError(f"zip directory of {cd_size} bytes / {n} records is over the limits "
                         f"(zip_directory_bytes_max, zip_records_max)")
    if cd_off + cd_size > object_size:
        raise ValueError("zip central directory lies outside the object")
    return cd_off, cd_size, n


def parse_central_directory(buf: bytes, count: int, object_size: int) -> List[ZipRecord]:
    """The records of a central directory. Raises ValueError for malformed entries or records
    outside the object."""
    import struct
    out, pos = [], 0
    for _ in range(count):
        if pos + 46 > len(buf) or struct.unpack_from("<I", buf, pos)[0] != _CENTRAL:
            raise ValueError("malformed zip central directory")
        flags, method = struct.unpack_from("<HH", buf, pos + 8)
        csize, usize, nlen, xlen, clen = struct.unpack_from("<IIHHH", buf, pos + 20)
        off, = struct.unpack_from("<I", buf, pos + 42)
        if pos + 46 + nlen + xlen + clen > len(buf):
            raise ValueError("malformed zip central directory")
        raw_name = bytes(buf[pos + 46:pos + 46 + nlen])
        name = raw_name.decode("utf-8", "replace")
        extra = buf[pos + 46 + nlen:pos + 46 + nlen + xlen]
        # zip64: the fields saturated at 0xFFFFFFFF come, in order, from extra field 0x0001.
        want = [v == 0xFFFFFFFF for v in (usize, csize, off)]
        if any(want):
            x = 0
            while x + 4 <= len(extra):
                tag, size = struct.unpack_from("<HH", extra, x)
                if x + 4 + size > len(extra):
                    raise ValueError("malformed zip extra field")
                if tag == 1:
                    vals = list(struct.unpack_from(f"<{size // 8}Q", extra, x + 4))
                    if len(vals) < sum(want):
                        raise ValueError("short zip64 extra field")
                    if want[0]:
                        usize = vals.pop(0)
                    if want[1]:
                        csize = vals.pop(0)
                    if want[2]:
                        off = vals.pop(0)
                    break
                x += 4 + size
            else:
                raise ValueError("zip64 extra field missing")
        if off + 30 > object_size or csize > object_size:
            raise ValueError(f"zip record {name!r} lies outside the object")
        out.append(ZipRecord(name, method, csize, usize, off, flags, raw_name))
        pos += 46 + nlen + xlen + clen
    return out


def local_data_offset(header: bytes, record: ZipRecord, object_size: int) -> int:
    """The offset of a record's bytes, from (the first bytes of) its local header. Raises
    ValueError when the header is not one, or the bytes would lie outside the object."""
    import struct
    if len(header) < 30 or struct.unpack_from("<I", header, 0)[0] != _LOCAL:
        raise ValueError(f"bad local header for zip record {record.name!r}")
    nlen, xlen = struct.unpack_from("<HH", header, 26)
    start = record.header_offset + 30 + nlen + xlen
    if start + record.compressed_size > object_size:
        raise ValueError(f"zip record {record.name!r} lies outside the object")
    return start


_LOCAL_GUESS = 30 + 256 + 128  # a local header with a name and torch's alignment padding


def _get_first(client: Client, bucket: str, key: str):
    """(the object's first _HEAD_BYTES, its size) from one ranged GET, whose reply gives the
    size: what load() does instead of a HEAD. A 0-byte object (S3 refuses any range of it) is
    (b"", 0)."""
    buf = bytearray(_HEAD_BYTES)
    try:
        r = client.get_into(bucket, key, buf, offset=0, length=len(buf))
    except InvalidRange:
        return b"", 0
    del buf[r.nbytes:]
    return buf, r.object_size


def _read_directory(client: Client, bucket: str, key: str, size: int, first=b""):
    """(records, tail bytes, where the tail starts, central directory offset, GETs made): one
    ranged GET of the object's last _TAIL_BYTES (none when ``first``, the object's first bytes,
    is the whole object), and one of the central directory when it does not lie in that tail."""
    tail_len = min(size, _TAIL_BYTES)
    tail_start = size - tail_len
    if size <= len(first):
        tail, gets = first[tail_start:size], 0
    else:
        tail, gets = _get_range(client, bucket, key, tail_start, tail_len), 1
    cd_off, cd_size, n = parse_zip_tail(tail, size)
    if cd_off >= tail_start:  # the directory is already in the tail
        cd = tail[cd_off - tail_start:cd_off - tail_start + cd_size]
    elif cd_size:
        cd = _get_range(client, bucket, key, cd_off, cd_size)
        gets += 1
    else:
        cd = b""
    return parse_central_directory(cd, n, size), tail, tail_start, cd_off, gets


def _locate(client: Client, bucket: str, key: str, size: int, r: ZipRecord) -> Tuple[int, int]:
    """(offset of a record's bytes, GETs made) from its local header, read by itself."""
    import struct
    head = _get_range(client, bucket, key, r.header_offset,
                      min(_LOCAL_GUESS, size - r.header_offset))
    gets = 1
    if len(head) >= 30:
        nlen, xlen = struct.unpack_from("<HH", head, 26)
        if 30 + nlen + xlen > len(head):
            head = _get_range(client, bucket, key, r.header_offset, 30 + nlen + xlen)
            gets += 1
    return local_data_offset(head, r, size), gets


def plan_torch_records(client: Client, bucket: str, key: str, size: int,
                       pool=None) -> dict:
    """{record name: (offset, nbytes, ZipRecord)} of a zip in s3://bucket/key: the exact byte
    range of every record, read from every local header. Costs 1 or 2 ranged GETs for the
    directory plus one small one per record, concurrent on ``pool``. load() does not need it
    (see predict_record_layout); it is the exact reference."""
    records, _, _, _, _ = _read_directory(client, bucket, key, size)

    def locate(r: ZipRecord):
        return r.name, (_locate(client, bucket, key, size, r)[0], r.compressed_size, r)

    if pool is None:
        return dict(locate(r) for r in records)
    return dict(pool.map(locate, records))


def predict_record_layout(records: Sequence[ZipRecord], cd_offset: int) -> dict:
    """{record name: offset of its bytes} where the records lie end to end, as torch's writer
    lays them (local header, data, the next local header, ..., the central directory): a
    record's data then ends where the next record (or the directory) begins, less the data
    descriptor that follows it when flag bit 3 says so (16 bytes, 24 for a zip64 record; torch's
    writer sets the bit), so no local header needs to be read first. A record whose predicted
    local header would be shorter than 30 bytes plus its name, or longer than
    local_header_bytes_max (what a local header can be), is left out. The prediction is
    only a plan: load() fetches each record's local header together with its data in one
    ranged GET and checks it (check_local_header) before it trusts the offset."""
    out = {}
    ordered = sorted(records, key=lambda r: r.header_offset)
    for i, r in enumerate(ordered):
        end = ordered[i + 1].header_offset if i + 1 < len(ordered) else cd_offset
        if r.flags & 8:  # a data descriptor (signature, CRC, sizes) follows the data
            big = max(r.compressed_size, r.size, r.header_offset) >= 0xFFFFFFFF
            end -= 24 if big else 16
        data = end - r.compressed_size
        h = data - r.header_offset
        if not 30 + len(r.raw_name) <= h <= local_header_bytes_max:
            continue
        out[r.name] = data
    return out


def check_local_header(head: bytes, record: ZipRecord, data_offset: int) -> bool:
    """Whether ``head`` (the bytes from the record's local header up to data_offset) is the
    record's local header and ends exactly at data_offset: the signature, the same name as the
    central directory, and 30 + name + extra lengths equal to its length."""
    import struct
    head = bytes(head)
    if len(head) != data_offset - record.header_offset or len(head) < 30:
        return False
    if struct.unpack_from("<I", head, 0)[0] != _LOCAL:
        return False
    nlen, xlen = struct.unpack_from("<HH", head, 26)
    return 30 + nlen + xlen == len(head) and head[30:30 + nlen] == record.raw_name


_MEMO_OPS = frozenset(("PUT", "BINPUT", "LONG_BINPUT", "GET", "BINGET", "LONG_BINGET"))


def check_pickle_memo(data: bytes) -> None:
    """Raises ValueError when the pickle ``data`` names a memo index at or above its own length
    in bytes, or does not parse as opcodes. A pickler numbers its memo entries from 0, one per
    PUT of at least two bytes, so no real pickle comes near that; a damaged one (a flipped byte
    in a LONG_BINPUT) would otherwise make the C unpickler grow its memo table to the index:
    8 bytes per entry, up to 32 GiB, zero-filled before the next opcode is read."""
    import pickletools
    ops = pickletools.genops(data)
    while True:
        try:
            op, arg, pos = next(ops)
        except StopIteration:
            return
        except Exception as e:  # pickletools' complaints about a damaged opcode stream
            raise ValueError(f"the pickle does not parse: {e}") from None
        if op.name in _MEMO_OPS and int(arg) >= len(data):
            raise ValueError(f"the pickle names memo entry {int(arg)} at byte {pos}, beyond "
                             f"its {len(data)} bytes")


def _storage_device(map_location, location: str):
    """Where a storage saved at `location` goes, or None when map_location is a function (then
    the storage is loaded on the CPU and handed to it, as torch.load does)."""
    if map_location is None:
        return torch.device(location)
    if isinstance(map_location, (str, torch.device)):
        return torch.device(map_location)
    if isinstance(map_location, dict):
        return torch.device(map_location.get(location, location))
    return None


# CPU storages of at least this many bytes are loaded into memory advised for transparent huge
# pages (where the kernel's THP mode is "madvise", as on Debian): numpy does the same for its
# arrays of 4 MiB or more, torch's allocator does not. Filling fresh 4 KiB pages costs a fault
# and a zeroing each, about as much as the copy itself (docs/BENCHMARKS.md, optimisation 12).
load_huge_pages_bytes_min = 4 << 20


def _madvise_huge(buf) -> None:
    """Asks for huge pages under a fresh CPU tensor's 2 MiB-aligned interior, before its first
    touch. Best effort: nothing happens where madvise or THP are unavailable."""
    global _madvise
    if _madvise is None:
        try:
            import ctypes
            libc = ctypes.CDLL(None, use_errno=True)
            fn = libc.madvise
            fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
            fn.restype = ctypes.c_int
            _madvise = fn
        except (OSError, AttributeError):
            _madvise = False
    if not _madvise:
        return
    huge = 2 << 20
    start = buf.data_ptr()
    lo = -(-start // huge) * huge
    hi = (start + buf.numel() * buf.element_size()) // huge * huge
    if hi > lo:
        _madvise(lo, hi - lo, 14)  # MADV_HUGEPAGE; an error (no THP) changes nothing


_madvise = None


def _untyped(t):
    return t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage().untyped()


def _typed_storage(untyped, dtype):
    try:
        return torch.storage.TypedStorage(wrap_storage=untyped, dtype=dtype, _internal=True)
    except TypeError:  # torch < 2.0 has no _internal
        return torch.storage.TypedStorage(wrap_storage=untyped, dtype=dtype)


def _pool(client: Client, concurrency: Optional[int]):
    import concurrent.futures
    n = concurrency or client.config.get("concurrency", 8)
    return concurrent.futures.ThreadPoolExecutor(max_workers=max(1, int(n)),
                                                 thread_name_prefix="objdirect-load")


_default_clients: dict = {}


def _client_of(client: Optional[Client], kwargs: dict) -> Client:
    if client is not None:
        if kwargs:
            raise TypeError("pass either client= or client settings, not both")
        return client
    key = (os.getpid(), tuple(sorted(kwargs.items())))
    if key not in _default_clients:
        _default_clients[key] = Client(**kwargs)
    return _default_clients[key]


def save(obj, s3_uri: str, *, client: Optional[Client] = None, part_size: Optional[int] = None,
         parts_in_flight: int = 4, pickle_protocol: int = 2, **client_kwargs) -> TransferResult:
    """torch.save(obj) straight into s3://bucket/key, streamed as a multipart upload.

    Memory: at most (parts_in_flight + 1) x part_size bytes of part buffers (default 5 x the
    client's part_size_bytes, 8 MiB: 40 MiB) whatever the checkpoint's size, plus what
    torch.save itself holds (the pickle; a device tensor's host copy; a CPU storage's bytes
    are handed over from its own memory, not copied). parts_in_flight parts upload
    concurrently. An exception (in torch.save, or a failed part) aborts the upload: no object
    is left, an existing one is untouched. Returns the upload's TransferResult.
    """
    c = _client_of(client, client_kwargs)
    bucket, key = parse_uri(s3_uri)
    if not key:
        raise ValueError(f"no key in {s3_uri!r}")
    w = ObjectWriter(c, bucket, key, part_size=part_size, parts_in_flight=parts_in_flight)
    with w:
        torch.save(obj, w, pickle_protocol=pickle_protocol)
    return w.result


def load(s3_uri: str, map_location=None, *, client: Optional[Client] = None,
         concurrency: Optional[int] = None, stats: Optional[dict] = None, **client_kwargs):
    """torch.load of s3://bucket/key, with each tensor storage fetched straight into its
    destination.

    map_location as torch.load's: None (where each storage was saved), a device or its name
    ("cuda", "cuda:1", "cpu"), a {saved: target} dict, or a function (storages are then loaded
    on the CPU and passed to it). Requests (no HEAD): one ranged GET of the first 64 KiB, whose
    reply gives the size (data.pkl comes from it for most files; a checkpoint that small is
    then in hand whole), one ranged GET of the tail (the central directory with it for most
    files; a second GET otherwise), then one ranged GET per record not already in those bytes
    (storages: not in the tail): its local header together with its bytes (see
    predict_record_layout; the header is checked, and a record whose layout the prediction got
    wrong is read exactly, header first). Storages are allocated on the target device with room
    for their local header in front, so each one's GET lands straight in the storage's memory
    (device memory: the client's GPUDirect path where the fabric supports it, else its pinned
    bounce pipeline), up to ``concurrency`` (default the client's) at once. Small CPU storages
    next to each other in the file share one GET into one allocation (see
    load_coalesce_record_bytes_max, load_group_bytes_max); storages that are slices are not
    resizable. Files torch.save
    did not write as a stored zip (the legacy format, compressed records) are loaded through
    torch.load on a ranged reader instead.

    Like torch.load(weights_only=False) this unpickles arbitrary objects: load only
    checkpoints you trust. ``stats``, when given, receives {"records", "storages",
    "storage_bytes", "requests" (GETs made), "mispredicted" (records read exactly
    after a failed header check), "groups" (GETs shared by neighbouring small storages)}.
    """
    import pickle
    c = _client_of(client, client_kwargs)
    bucket, key = parse_uri(s3_uri)
    first, size = _get_first(c, bucket, key)
    pool = _pool(c, concurrency)
    try:
        try:
            records, tail, tail_start, cd_off, gets = _read_directory(c, bucket, key, size,
                                                                      first)
        except ValueError:
            records = None
        by_name = {r.name: r for r in records or ()}
        pkl = [n for n in by_name if n.endswith("/data.pkl") and n.count("/") == 1]
        if not pkl or any(r.method != 0 for r in records):
            with ObjectReader(c, bucket, key, mode="ranged") as f:
                return torch.load(f, map_location=map_location)
        prefix = pkl[0][:-len("data.pkl")]
        predicted = predict_record_layout(records, cd_off)
        counts = {"requests": 1 + gets, "mispredicted": 0}
        count_lock = threading.Lock()

        def count(requests: int, mispredicted: int = 0):
            with count_lock:
                counts["requests"] += requests
                counts["mispredicted"] += mispredicted

        def in_tail(start: int, end: int) -> bool:
            return start >= tail_start and end <= size

        def record(name: str) -> bytes:
            r = by_name[prefix + name]
            n = r.compressed_size
            data = predicted.get(r.name)
            if data is not None:
                start, end = r.header_offset, data + n
                if in_tail(start, end):
                    chunk = tail[start - tail_start:end - tail_start]
                elif end <= len(first):  # data.pkl, byteorder: usually in the first bytes
                    chunk = first[start:end]
                else:
                    chunk = _get_range(c, bucket, key, start, end - start)
                    count(1)
                h = data - start
                if len(chunk) == end - start and check_local_header(chunk[:h], r, data):
                    return bytes(chunk[h:])
                count(0, 1)
            off, g = _locate(c, bucket, key, size, r)
            count(g + (1 if n else 0))
            return _get_range(c, bucket, key, off, n)

        def fetch_storage(r: ZipRecord, buf, pad: int, h: int):
            """The record's local header and bytes into buf[pad - h:pad + n] in one GET, the
            header checked; read exactly (header, then bytes) when the check fails."""
            n = r.compressed_size
            if h:
                c.get_into(bucket, key, buf[pad - h:pad + n], offset=r.header_offset,
                           length=h + n)
                head = buf[pad - h:pad]
                head = head.numpy().tobytes() if head.device.type == "cpu" else \
                    head.cpu().numpy().tobytes()  # a device buffer: only the header comes back
                if check_local_header(head, r, r.header_offset + h):
                    count(1)
                    return
                count(1, 1)
            off, g = _locate(c, bucket, key, size, r)
            c.get_into(bucket, key, buf[pad:pad + n], offset=off, length=n)
            count(g + 1)

        class Group:
            """Neighbouring small storage records fetched by one GET into one CPU allocation
            (their local headers between them included); each storage is a slice of it."""

            def __init__(self, start: int):
                self.start, self.end, self.names = start, start, []
                self.buf = self.future = None
                self.pad = start % 64  # slices keep the file's alignment of the data

        groups = {}
        cur = None
        for r in sorted(records, key=lambda r: r.header_offset):
            data = predicted.get(r.name)
            n = r.compressed_size
            if n == 0 and r.name.startswith(prefix + "data/"):
                continue  # an empty storage needs no bytes and does not break a group
            small = (r.name.startswith(prefix + "data/") and data is not None and
                     0 < n <= load_coalesce_record_bytes_max and
                     not in_tail(r.header_offset, data + n))
            if not small:
                cur = None
                continue
            if cur is None or data + n - cur.start > load_group_bytes_max:
                cur = Group(r.header_offset)
            cur.names.append(r.name)
            cur.end = data + n
            groups[r.name] = cur
        groups = {k: g for k, g in groups.items() if len(g.names) > 1}

        def fetch_group(g: Group):
            """The group's bytes in one GET, then every local header in it checked; a record
            whose header does not match is read exactly into its slice (the predicted data
            ranges of different records never overlap)."""
            span = g.end - g.start
            c.get_into(bucket, key, g.buf[g.pad:g.pad + span], offset=g.start, length=span)
            count(1)
            arr = g.buf.numpy()
            for name in g.names:
                r = by_name[name]
                data = predicted[name]
                lo, hi = g.pad + r.header_offset - g.start, g.pad + data - g.start
                if check_local_header(arr[lo:hi].tobytes(), r, data):
                    continue
                off, gets = _locate(c, bucket, key, size, r)
                c.get_into(bucket, key, g.buf[hi:hi + r.compressed_size], offset=off,
                           length=r.compressed_size)
                count(gets + 1, 1)

        if (prefix + "byteorder") in by_name and record("byteorder") not in (b"little", b""):
            raise NotImplementedError("big-endian checkpoints are not supported")
        restore = None if _storage_device(map_location, "cpu") is not None else \
            torch.serialization._get_restore_location(map_location)
        loaded, futures, fetched = {}, [], [0]

        def persistent_load(saved_id):
            typename = saved_id[0].decode() if isinstance(saved_id[0], bytes) else saved_id[0]
            if typename != "storage":
                raise pickle.UnpicklingError(f"unknown persistent id {typename!r}")
            storage_type, skey, location, numel = saved_id[1:]
            location = location.decode() if isinstance(location, bytes) else location
            dtype = torch.uint8 if storage_type is torch.UntypedStorage else storage_type.dtype
            if skey not in loaded:
                name = prefix + f"data/{skey}"
                if name not in by_name:
                    raise ValueError(f"checkpoint has no record {name!r}")
                r = by_name[name]
                n = r.compressed_size
                want = numel * torch._utils._element_size(dtype)
                if n != want:
                    raise ValueError(f"record {name!r} holds {n} bytes, the storage {want}")
                device = _storage_device(map_location, location) or torch.device("cpu")
                data = predicted.get(name)
                g = groups.get(name) if device.type == "cpu" else None
                if g is not None:
                    if g.buf is None:
                        g.buf = torch.empty(g.pad + g.end - g.start, dtype=torch.uint8)
                        g.future = pool.submit(fetch_group, g)
                        futures.append(g.future)
                    lo = g.pad + data - g.start
                    try:
                        untyped = _untyped(g.buf)[lo:lo + n]
                    except (TypeError, RuntimeError, NotImplementedError):
                        g = None  # no storage slices: one GET of its own below
                if g is not None:
                    fetched[0] += n
                    if restore is not None:  # the function sees the bytes: fetch them first
                        g.future.result()
                        untyped = restore(untyped, location)
                    loaded[skey] = _typed_storage(untyped, dtype)
                    return loaded[skey]
                h = data - r.header_offset if data is not None and n else 0
                pad = -(-h // 64) * 64  # the storage starts 64-aligned after its header
                buf = torch.empty(pad + n, dtype=torch.uint8, device=device)
                if device.type == "cpu" and n >= load_huge_pages_bytes_min:
                    _madvise_huge(buf)
                try:
                    untyped = _untyped(buf)[pad:pad + n] if pad else _untyped(buf)
                except (TypeError, RuntimeError, NotImplementedError):  # no storage slices
                    h = pad = 0
                    buf = torch.empty(n, dtype=torch.uint8, device=device)
                    untyped = _untyped(buf)
                fetched[0] += n
                fut = None
                if n and device.type == "cpu" and h and in_tail(r.header_offset, data + n):
                    chunk = tail[r.header_offset - tail_start:data + n - tail_start]
                    if check_local_header(chunk[:h], r, data):  # already here: no GET
                        import numpy
                        buf[pad:].numpy()[:] = numpy.frombuffer(chunk, numpy.uint8, offset=h)
                    else:
                        count(0, 1)
                        fut = pool.submit(fetch_storage, r, buf, pad, 0)
                elif n:
                    fut = pool.submit(fetch_storage, r, buf, pad, h)
                if fut is not None:
                    futures.append(fut)
                if restore is not None:  # the function sees the bytes: fetch them first
                    if fut is not None:
                        fut.result()
                    untyped = restore(untyped, location)
                loaded[skey] = _typed_storage(untyped, dtype)
            return loaded[skey]

        class Unpickler(pickle.Unpickler):
            def find_class(self, mod_name, name):
                if type(name) is str and "Storage" in name:
                    try:
                        return torch.serialization.StorageType(name)
                    except KeyError:
                        pass
                mod_name = {"torch.tensor": "torch._tensor"}.get(mod_name, mod_name)
                return super().find_class(mod_name, name)

        pickled = record("data.pkl")
        check_pickle_memo(pickled)
        u = Unpickler(io.BytesIO(pickled), encoding="utf-8")
        u.persistent_load = persistent_load
        try:
            result = u.load()
        finally:
            for fut in futures:  # buffers must outlive their fetches, even on failure
                fut.exception()
        for fut in futures:
            fut.result()
        torch._utils._validate_loaded_sparse_tensors()
        if stats is not None:
            stats.update(records=len(records), storages=len(loaded), storage_bytes=fetched[0],
                         groups=sum(1 for g in set(groups.values()) if g.buf is not None),
                         **counts)
        return result
    finally:
        pool.shutdown(wait=True)


# -- safetensors --------------------------------------------------------------------------------
#
# A safetensors file: 8 bytes little-endian header length N, N bytes of JSON
# {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}, then the
# data; offsets are relative to the end of the header.

_ST_DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16,
              "BF16": torch.bfloat16, "I64": torch.int64, "I32": torch.int32,
              "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool}
_ST_NAMES = {v: k for k, v in _ST_DTYPES.items()}


def parse_safetensors_header(header: bytes, data_bytes: int) -> Tuple[dict, dict]:
    """({name: (dtype, shape, begin, end)}, metadata) of a safetensors JSON header, with offsets
    relative to the data section of data_bytes bytes. Raises ValueError for a malformed header,
    an unknown dtype, a size that does not match the shape, or a range outside the data."""
    import json
    try:
        doc = json.loads(bytes(header).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"safetensors header is not JSON: {e}") from None
    if not isinstance(doc, dict):
        raise ValueError("safetensors header is not a JSON object")
    meta = doc.pop("__metadata__", {}) or {}
    out = {}
    for name, t in doc.items():
        try:
            dtype = _ST_DTYPES[t["dtype"]]
            shape = [int(d) for d in t["shape"]]
            begin, end = (int(x) for x in t["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"bad safetensors entry {name!r}") from None
        n = torch.empty((), dtype=dtype).element_size()
        for d in shape:
            if d < 0:
                raise ValueError(f"bad shape for {name!r}")
            n *= d
        if not 0 <= begin <= end <= data_bytes or end - begin != n:
            raise ValueError(f"bad data_offsets for {name!r}")
        out[name] = (dtype, shape, begin, end)
    return out, meta


def load_safetensors(s3_uri: str, device=None, *, client: Optional[Client] = None,
                     concurrency: Optional[int] = None, **client_kwargs) -> dict:
    """{name: tensor} of a safetensors object, each tensor allocated on ``device`` (default the
    CPU) and its exact byte range fetched straight into it (device memory through the client's
    device path), concurrently. One GET for the header (two when it is over 64 KiB; its reply
    gives the object's size, so no HEAD), then one per non-empty tensor. Raises ValueError for a malformed file (header over
    safetensors_header_bytes_max included)."""
    import struct
    c = _client_of(client, client_kwargs)
    bucket, key = parse_uri(s3_uri)
    # The first 64 KiB in one ranged GET whose reply also says the object's size: no HEAD.
    first = bytearray(64 << 10)
    try:
        r = c.get_into(bucket, key, first, offset=0, length=len(first))
    except InvalidRange:  # S3 refuses any range of a 0-byte object
        raise ValueError("not a safetensors file: empty") from None
    size = r.object_size
    del first[r.nbytes:]
    if len(first) < 8:
        raise ValueError("not a safetensors file: shorter than 8 bytes")
    n, = struct.unpack_from("<Q", first, 0)
    if n > safetensors_header_bytes_max or 8 + n > size:
        raise ValueError(f"safetensors header of {n} bytes: over safetensors_header_bytes_max "
                         f"or past the end")
    header = first[8:8 + n] if 8 + n <= len(first) else _get_range(c, bucket, key, 8, n)
    entries, _ = parse_safetensors_header(header, size - 8 - n)
    out, futures = {}, []
    pool = _pool(c, concurrency)
    try:
        for name, (dtype, shape, begin, end) in entries.items():
            buf = torch.empty(end - begin, dtype=torch.uint8, device=device or "cpu")
            if buf.device.type == "cpu" and end - begin >= load_huge_pages_bytes_min:
                _madvise_huge(buf)
            if end > begin:
                futures.append(pool.submit(c.get_into, bucket, key, buf, offset=8 + n + begin,
                                           length=end - begin))
            out[name] = buf.view(dtype).reshape(shape) if end > begin else torch.empty(
                shape, dtype=dtype, device=device or "cpu")
        for f in futures:
            f.exception()
        for f in futures:
            f.result()
    finally:
        pool.shutdown(wait=True)
    return out


def save_safetensors(tensors: dict, s3_uri: str, *, metadata: Optional[dict] = None,
                     client: Optional[Client] = None, part_size: Optional[int] = None,
                     parts_in_flight: int = 4, **client_kwargs) -> TransferResult:
    """Writes {name: tensor} as a safetensors object (tensors in name order, streamed through an
    ObjectWriter: memory bounded as for save(); device tensors are copied to the host one at a
    time). Raises ValueError for a dtype safetensors has no name for."""
    import json
    c = _client_of(client, client_kwargs)
    bucket, key = parse_uri(s3_uri)
    header, pos = {}, 0
    names = sorted(tensors)
    for name in names:
        t = tensors[name]
        if t.dtype not in _ST_NAMES:
            raise ValueError(f"safetensors has no dtype for {t.dtype}")
        nbytes = t.numel() * t.element_size()
        header[name] = {"dtype": _ST_NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [pos, pos + nbytes]}
        pos += nbytes
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # the data section starts 8-aligned, as the library does
    w = ObjectWriter(c, bucket, key, part_size=part_size, parts_in_flight=parts_in_flight)
    with w:
        w.write(len(raw).to_bytes(8, "little") + raw)
        for name in names:
            t = tensors[name].detach().contiguous().cpu().reshape(-1)
            if t.numel():
                w.write(t.view(torch.uint8).numpy() if t.dtype != torch.uint8 else t.numpy())
    return w.result
