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

Items are ObjectReader objects (file-like: read, readinto, seek, tell; .bucket, .key, .size)
passed through ``transform`` (identity by default). Datasets hold client settings, not a live
client: each process (DataLoader workers included, forked or spawned) opens its own Client on
first use, because a client's threads and connections do not survive fork().

Errors: the objdirect exceptions (NoSuchKey, NoSuchBucket, ...); listing errors surface when the
dataset is first used (len(), indexing or iteration), not at from_prefix().

Thread safety: datasets follow torch's rules (one per worker process); an ObjectReader or
ObjectWriter is for one thread at a time.
"""

from __future__ import annotations

import io
import os
import threading
from typing import Callable, Iterator, List, Optional, Sequence, Tuple

import torch.utils.data

from . import parse_uri
from .client import Client, TransferResult

__all__ = ["MapDataset", "IterableDataset", "Checkpoint", "ObjectReader", "ObjectWriter"]


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


# -- readers and writers ------------------------------------------------------------------------


class ObjectReader(io.RawIOBase):
    """A read-only, seekable file over one object.

    mode "whole" (default): the first read fetches the whole object into memory with one GET
    (over RDMA when available) and later reads and seeks are served from it; what small-object
    transforms want. mode "ranged" (Checkpoint.reader's default): memory stays bounded by
    ``buffer_size`` whatever the object size; a readinto() of at least buffer_size bytes is one
    ranged GET straight into the caller's buffer (no copy), smaller reads are served from a
    read-ahead window of buffer_size bytes fetched with one ranged GET at the read position.

    Raises NoSuchKey etc. from the first call that needs the object (size, read).
    """

    def __init__(self, client: Client, bucket: str, key: str, *, mode: str = "whole",
                 size: Optional[int] = None, buffer_size: int = 8 << 20):
        super().__init__()
        if mode not in ("whole", "ranged"):
            raise ValueError("mode must be 'whole' or 'ranged'")
        if buffer_size < 1:
            raise ValueError("buffer_size must be positive")
        self._client = client
        self.bucket = bucket
        self.key = key
        self._mode = mode
        self._size = size
        self._data: Optional[memoryview] = None
        self._pos = 0
        self.buffer_size = buffer_size
        self._window: Optional[bytearray] = None  # ranged mode: read-ahead bytes
        self._window_start = 0
        self._window_len = 0
        self.requests = 0  # ranged GETs made (ranged mode)

    @property
    def size(self) -> int:
        if self._size is None:
            self._size = self._client.head(self.bucket, self.key).size
        return self._size

    def readable(self):
        return True

    def seekable(self):
        return True

    def tell(self):
        self._check_open()
        return self._pos

    def seek(self, offset, whence=io.SEEK_SET):
        self._check_open()
        if whence == io.SEEK_SET:
            pos = offset
        elif whence == io.SEEK_CUR:
            pos = self._pos + offset
        elif whence == io.SEEK_END:
            pos = self.size + offset
        else:
            raise ValueError(f"invalid whence {whence}")
        if pos < 0:
            raise ValueError("negative seek position")
        self._pos = pos
        return pos

    def _load(self):
        if self._data is None:
            data = self._client.get(self.bucket, self.key)
            self._data = memoryview(data)
            self._size = len(data)
        return self._data

    def read(self, size=-1):
        self._check_open()
        if self._mode == "whole" or size is None or size < 0:
            data = self._load() if self._mode == "whole" else None
            if data is None:  # ranged mode, read to the end
                if self._pos >= self.size:
                    return b""
                out = self._client.get(self.bucket, self.key, offset=self._pos)
                self._pos += len(out)
                return out
            end = len(data) if size is None or size < 0 else min(len(data), self._pos + size)
            out = bytes(data[self._pos:end]) if self._pos < end else b""
            self._pos = max(self._pos, end)
            return out
        return super().read(size)

    def readall(self):
        return self.read(-1)

    def readinto(self, b):
        self._check_open()
        mv = memoryview(b).cast("B")
        if self._mode == "whole":
            data = self._load()
            n = max(0, min(len(mv), len(data) - self._pos))
            mv[:n] = data[self._pos:self._pos + n]
            self._pos += n
            return n
        if len(mv) == 0 or self._pos >= self.size:
            return 0
        # Fills the whole request (up to the end of the object): torch.load's reader takes a short
        # read for an error.
        n = min(len(mv), self.size - self._pos)
        done = 0
        while done < n:
            w0, wlen = self._window_start, self._window_len
            if w0 <= self._pos < w0 + wlen:
                k = min(n - done, w0 + wlen - self._pos)
                mv[done:done + k] = memoryview(self._window)[self._pos - w0:self._pos - w0 + k]
            elif n - done >= self.buffer_size:
                k, _ = self._client.get_into(self.bucket, self.key, mv[done:n], offset=self._pos,
                                             length=n - done)
                self.requests += 1
            else:
                if self._window is None:
                    self._window = bytearray(self.buffer_size)
                want = min(self.buffer_size, self.size - self._pos)
                got, _ = self._client.get_into(self.bucket, self.key,
                                               memoryview(self._window)[:want], offset=self._pos,
                                               length=want)
                self.requests += 1
                self._window_start, self._window_len = self._pos, got
                if got == 0:
                    break
                continue
            if k == 0:
                break
            done += k
            self._pos += k
        return done

    def close(self):
        self._data = None
        self._window = None
        self._window_len = 0
        super().close()

    def _check_open(self):
        if self.closed:
            raise ValueError("I/O operation on a closed ObjectReader")

    def __repr__(self):
        return f"<objdirect.torch.ObjectReader s3://{self.bucket}/{self.key}>"


class ObjectWriter(io.RawIOBase):
    """A write-only file that becomes one object on close(), streamed as it is written.

    Bytes collect in a part buffer of ``part_size`` bytes (default: the client's part_size_bytes,
    at least 5 MiB, S3's floor for all but the last part). When a part fills, a multipart upload
    starts (on the first one) and the part is uploaded on a background thread while the next one
    fills; at most two part buffers exist at once, whatever the object size. close() uploads the
    last part and completes the upload, or sends a small object as one put(). Leaving a ``with``
    block by an exception, or any upload error, aborts the multipart upload: no object is
    written (an existing object of that key is left as it was). close() raises the upload's error
    (NoSuchBucket, AccessDenied, ...).
    """

    MIN_PART_SIZE = 5 << 20

    def __init__(self, client: Client, bucket: str, key: str, *, part_size: Optional[int] = None):
        super().__init__()
        self._client = client
        self.bucket = bucket
        self.key = key
        if part_size is None:
            part_size = client.config.get("part_size_bytes", 8 << 20)
        self.part_size = max(int(part_size), self.MIN_PART_SIZE)
        self._buf = bytearray(self.part_size)
        self._spare: Optional[bytearray] = None
        self._fill = 0
        self._written = 0
        self._upload_id: Optional[str] = None
        self._parts: List[Tuple[int, str]] = []
        self._part_results = []
        self._pending = None  # (future, buffer) of the part being uploaded
        self._executor = None
        self._discard = False
        self.result = None  # the TransferResult once closed

    def writable(self):
        return True

    def write(self, b):
        if self.closed:
            raise ValueError("write to a closed ObjectWriter")
        mv = memoryview(b).cast("B")
        n = len(mv)
        done = 0
        try:
            while done < n:
                take = min(n - done, self.part_size - self._fill)
                self._buf[self._fill:self._fill + take] = mv[done:done + take]
                self._fill += take
                done += take
                if self._fill == self.part_size:
                    self._send_part()
        except BaseException:
            self._abort()
            raise
        self._written += n
        return n

    def tell(self):
        return self._written

    def flush(self):
        pass

    def _wait_pending(self):
        if self._pending is not None:
            future, buf = self._pending
            self._pending = None
            r = future.result()
            self._parts.append((len(self._parts) + 1, r.etag))
            self._part_results.append(r)
            self._spare = buf

    def _send_part(self):
        import concurrent.futures
        if self._upload_id is None:
            self._upload_id = self._client.create_multipart_upload(self.bucket, self.key)
            self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        self._wait_pending()
        buf, n = self._buf, self._fill
        number = len(self._parts) + 1
        view = memoryview(buf)[:n]
        future = self._executor.submit(self._client.upload_part, self.bucket, self.key,
                                       self._upload_id, number, view)
        self._pending = (future, buf)
        self._buf = self._spare if self._spare is not None else bytearray(self.part_size)
        self._spare = None
        self._fill = 0

    def _abort(self):
        if self._pending is not None:
            try:
                self._pending[0].result()
            except BaseException:
                pass
            self._pending = None
        if self._upload_id is not None:
            upload_id, self._upload_id = self._upload_id, None
            try:
                self._client.abort_multipart_upload(self.bucket, self.key, upload_id)
            except Exception:
                pass
        self._discard = True

    def close(self):
        if self.closed:
            return
        try:
            if self._discard:
                self._abort()
            elif self._upload_id is None:
                self.result = self._client.put(self.bucket, self.key,
                                               memoryview(self._buf)[:self._fill])
            else:
                try:
                    if self._fill or not self._parts and self._pending is None:
                        self._send_part()
                    self._wait_pending()
                    done = self._client.complete_multipart_upload(
                        self.bucket, self.key, self._upload_id, self._parts)
                    self._upload_id = None
                    self.result = self._merged_result(done)
                except BaseException:
                    self._abort()
                    raise
        finally:
            if self._executor is not None:
                self._executor.shutdown(wait=True)
                self._executor = None
            self._buf = bytearray()
            self._spare = None
            super().close()

    def _merged_result(self, done):
        """The whole upload as one TransferResult: bytes written, the object's ETag, and the path
        of the parts (rdma only if every part went over RDMA)."""
        paths = {r.path for r in self._part_results}
        path = "rdma" if paths == {"rdma"} else (
            "http" if paths == {"http"} else "http-fallback")
        res = TransferResult(self._written, path)
        res.etag, res.object_size = done.etag, self._written
        first = self._part_results[0]
        res.fabric, res.reason = first.fabric, first.reason
        res.requests = sum(r.requests for r in self._part_results) + 2
        return res

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self._discard = True
        self.close()

    def __repr__(self):
        return f"<objdirect.torch.ObjectWriter s3://{self.bucket}/{self.key}>"


# -- datasets -----------------------------------------------------------------------------------


def _list_keys(client: Client, bucket: str, prefix: str) -> List[Tuple[str, int]]:
    return [(o.key, o.size) for o in client.list(bucket, prefix)]


class MapDataset(torch.utils.data.Dataset):
    """A map-style dataset: item i is transform(ObjectReader of the i-th object, in key order)."""

    def __init__(self, bucket: str, keys: Optional[Sequence[Tuple[str, Optional[int]]]],
                 prefix: str, source: _ClientSource, transform: Callable, reader_mode: str):
        self.bucket = bucket
        self._keys = None if keys is None else list(keys)
        self._prefix = prefix
        self._source = source
        self._transform = transform
        self._reader_mode = reader_mode

    @classmethod
    def from_prefix(cls, s3_uri: str, *, transform: Callable = _identity,
                    client: Optional[Client] = None, reader_mode: str = "whole",
                    **client_kwargs) -> "MapDataset":
        """Every object under s3://bucket/prefix. Keys are listed on first use.

        client_kwargs are objdirect.Client's (endpoint, region, profile, fabric, ...).
        """
        bucket, prefix = parse_uri(s3_uri)
        return cls(bucket, None, prefix, _ClientSource(client, client_kwargs), transform,
                   reader_mode)

    @classmethod
    def from_objects(cls, s3_uris: Sequence[str], *, transform: Callable = _identity,
                     client: Optional[Client] = None, reader_mode: str = "whole",
                     **client_kwargs) -> "MapDataset":
        """The given objects, all in one bucket, in the given order."""
        parsed = [parse_uri(u) for u in s3_uris]
        buckets = {b for b, _ in parsed}
        if len(buckets) > 1:
            raise ValueError("all objects of a MapDataset must be in one bucket")
        bucket = buckets.pop() if buckets else ""
        return cls(bucket, [(k, None) for _, k in parsed], "", _ClientSource(client, client_kwargs),
                   transform, reader_mode)

    @property
    def keys(self) -> List[str]:
        return [k for k, _ in self._entries()]

    def _entries(self):
        if self._keys is None:
            self._keys = _list_keys(self._source.get(), self.bucket, self._prefix)
        return self._keys

    def __len__(self):
        return len(self._entries())

    def __getitem__(self, i):
        key, size = self._entries()[i]
        reader = ObjectReader(self._source.get(), self.bucket, key, mode=self._reader_mode,
                              size=size)
        return self._transform(reader)


class IterableDataset(torch.utils.data.IterableDataset):
    """An iterable dataset over every object under a prefix, listed lazily at each iteration.

    shard_by_worker: each DataLoader worker takes every num_workers-th object (worker w takes
    objects w, w+n, ...), so the workers together yield each object once. shard_by_rank: also
    shard across torch.distributed ranks (when initialised).
    """

    def __init__(self, bucket: str, prefix: str, source: _ClientSource, transform: Callable,
                 shard_by_worker: bool, shard_by_rank: bool, reader_mode: str):
        self.bucket = bucket
        self.prefix = prefix
        self._source = source
        self._transform = transform
        self._shard_by_worker = shard_by_worker
        self._shard_by_rank = shard_by_rank
        self._reader_mode = reader_mode

    @classmethod
    def from_prefix(cls, s3_uri: str, *, transform: Callable = _identity,
                    shard_by_worker: bool = True, shard_by_rank: bool = False,
                    client: Optional[Client] = None, reader_mode: str = "whole",
                    **client_kwargs) -> "IterableDataset":
        bucket, prefix = parse_uri(s3_uri)
        return cls(bucket, prefix, _ClientSource(client, client_kwargs), transform,
                   shard_by_worker, shard_by_rank, reader_mode)

    def _shard(self):
        index, count = 0, 1
        if self._shard_by_rank:
            import torch.distributed as dist
            if dist.is_available() and dist.is_initialized():
                index, count = dist.get_rank(), dist.get_world_size()
        if self._shard_by_worker:
            info = torch.utils.data.get_worker_info()
            if info is not None:
                index, count = index * info.num_workers + info.id, count * info.num_workers
        return index, count

    def __iter__(self) -> Iterator:
        client = self._source.get()
        index, count = self._shard()
        for i, obj in enumerate(client.list(self.bucket, self.prefix)):
            if i % count == index:
                yield self._transform(ObjectReader(client, self.bucket, obj.key,
                                                   mode=self._reader_mode, size=obj.size))


# -- checkpoints --------------------------------------------------------------------------------


class Checkpoint:
    """Writers and readers of s3:// URIs for torch.save / torch.load.

    Takes objdirect.Client's settings (endpoint, region, profile, fabric, ...) or client=.
    """

    def __init__(self, *, client: Optional[Client] = None, **client_kwargs):
        self._source = _ClientSource(client, client_kwargs)

    def writer(self, s3_uri: str, *, part_size: Optional[int] = None) -> ObjectWriter:
        """A streaming writer (multipart upload of part_size parts; see ObjectWriter)."""
        bucket, key = parse_uri(s3_uri)
        if not key:
            raise ValueError(f"no key in {s3_uri!r}")
        return ObjectWriter(self._source.get(), bucket, key, part_size=part_size)

    def reader(self, s3_uri: str, *, mode: str = "ranged",
               buffer_size: int = 8 << 20) -> ObjectReader:
        """A seekable reader; "ranged" (default) keeps memory within buffer_size."""
        bucket, key = parse_uri(s3_uri)
        if not key:
            raise ValueError(f"no key in {s3_uri!r}")
        return ObjectReader(self._source.get(), bucket, key, mode=mode, buffer_size=buffer_size)
