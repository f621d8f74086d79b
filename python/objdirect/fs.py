"""objdirect.fs: an fsspec filesystem over ObjDirect, protocol ``objdirect``.

    import fsspec, pandas as pd
    fs = fsspec.filesystem("objdirect", endpoint="http://127.0.0.1:9000")
    fs.pipe_file("bucket/a.bin", b"...")
    df = pd.read_csv("objdirect://bucket/t.csv", storage_options={"endpoint": ...})

Paths are "bucket/key" (with or without "objdirect://"; "s3://" is accepted too, so code written
for s3fs paths works once the filesystem object is this one). Directories are key prefixes up
to "/", as in s3fs. Constructor arguments are objdirect.Client's (endpoint, fabric, keys, ...) or
client=. fsspec finds the protocol through the package's fsspec.specs entry point. fsspec's
own "s3" protocol stays s3fs's unless register_s3() is called (explicit, per process).

Reads move bytes straight into the caller's memory (RDMA when the fabric allows it):
cat_file is one ranged GET, cat_ranges coalesces neighbouring ranges of an object (see
objdirect.ranges) and issues the GETs concurrently, get_file GETs into a memory map of the
local file, put_file PUTs from one (multipart, parallel parts). open(..., "rb") is an fsspec
buffered file (read-ahead blocks, ranged GETs); open(..., "wb") streams into a multipart upload
(objdirect.torch.ObjectWriter: bounded memory), committed on close.

Errors: a missing object or bucket raises FileNotFoundError (from NoSuchKey / NoSuchBucket);
other failures raise the objdirect exceptions.

Thread safety: as fsspec filesystems; the underlying Client is thread-safe and fork-safe.
"""

from __future__ import annotations

import concurrent.futures
import io
import mmap
import os
from typing import Optional

import fsspec
from fsspec.spec import AbstractBufferedFile, AbstractFileSystem

from . import ranges as _ranges
from .client import Client
from .errors import NoSuchBucket, NoSuchKey
from .objects import ObjectWriter, get_range

__all__ = ["ObjDirectFileSystem", "ObjDirectS3FileSystem", "register_s3"]


def _missing(path, e):
    err = FileNotFoundError(path)
    err.__cause__ = e
    return err


class ObjDirectFileSystem(AbstractFileSystem):
    """fsspec filesystem of one ObjDirect (or any S3) endpoint."""

    protocol = ("objdirect",)
    root_marker = ""

    def __init__(self, *args, client: Optional[Client] = None, cat_ranges_gap_bytes=None,
                 **kwargs):
        fs_kwargs = {k: kwargs.pop(k) for k in list(kwargs)
                     if k in ("use_listings_cache", "listings_expiry_time", "max_paths",
                              "skip_instance_cache", "asynchronous", "loop")}
        super().__init__(*args, **fs_kwargs)
        if client is not None and kwargs:
            raise TypeError("pass either client= or client settings, not both")
        self.client = client if client is not None else Client(**kwargs)
        self.gap_bytes = (_ranges.gap_bytes_default if cat_ranges_gap_bytes is None
                          else int(cat_ranges_gap_bytes))
        self._pool = None

    # -- paths --

    @classmethod
    def _strip_protocol(cls, path):
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]
        path = str(path)
        for p in ("objdirect://", "s3://", "s3a://"):
            if path.startswith(p):
                path = path[len(p):]
                break
        return path.lstrip("/").rstrip("/")

    def _split(self, path):
        path = self._strip_protocol(path)
        bucket, _, key = path.partition("/")
        return bucket, key

    def _executor(self):
        if self._pool is None:
            n = self.client.config.get("concurrency", 8)
            self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=n,
                                                               thread_name_prefix="objdirect-fs")
        return self._pool

    # -- listing --

    def _entry(self, bucket, o):
        if o.is_prefix:
            return {"name": f"{bucket}/{o.key.rstrip('/')}", "size": 0, "type": "directory"}
        return {"name": f"{bucket}/{o.key}", "size": o.size, "type": "file", "ETag": o.etag,
                "LastModified": o.last_modified}

    def ls(self, path, detail=True, **kwargs):
        bucket, key = self._split(path)
        if not bucket:
            out = [{"name": b, "size": 0, "type": "directory"} for b in self.client.list_buckets()]
        else:
            prefix = key + "/" if key else ""
            try:
                out = [self._entry(bucket, o)
                       for o in self.client.list(bucket, prefix, delimiter="/")]
            except NoSuchBucket as e:
                raise _missing(path, e)
            if not out and key:
                out = [self.info(path)]  # a file, or FileNotFoundError
        return out if detail else [e["name"] for e in out]

    def info(self, path, **kwargs):
        bucket, key = self._split(path)
        if not bucket:
            return {"name": "", "size": 0, "type": "directory"}
        if not key:
            if bucket in self.client.list_buckets():
                return {"name": bucket, "size": 0, "type": "directory"}
            raise FileNotFoundError(path)
        try:
            h = self.client.head(bucket, key)
            return {"name": f"{bucket}/{key}", "size": h.size, "type": "file", "ETag": h.etag,
                    "LastModified": h.last_modified, "ContentType": h.content_type}
        except NoSuchKey:
            pass
        try:
            for _ in self.client.list(bucket, key + "/", page_size=1):
                return {"name": f"{bucket}/{key}", "size": 0, "type": "directory"}
        except NoSuchBucket as e:
            raise _missing(path, e)
        raise FileNotFoundError(path)

    # -- whole objects and ranges --

    def cat_file(self, path, start=None, end=None, **kwargs):
        bucket, key = self._split(path)
        try:
            if start is None and end is None:
                return self.client.get(bucket, key)
            size = None
            if (start is not None and start < 0) or (end is not None and end < 0):
                size = self.client.head(bucket, key).size
            lo = 0 if start is None else (start if start >= 0 else max(0, size + start))
            hi = None if end is None else (end if end >= 0 else max(0, size + end))
            if hi is not None and hi <= lo:
                return b""
            if size is not None and lo >= size:
                return b""
            try:
                if hi is not None:  # one GET (Client.get would HEAD first)
                    return get_range(self.client, bucket, key, lo, hi - lo)
                return self.client.get(bucket, key, offset=lo)
            except Exception as e:  # a range starting at or past the end is empty, as in s3fs
                from .errors import InvalidRange
                if isinstance(e, InvalidRange):
                    return b""
                raise
        except (NoSuchKey, NoSuchBucket) as e:
            raise _missing(path, e)

    def cat_ranges(self, paths, starts, ends, max_gap=None, on_error="return", **kwargs):
        """Bytes of each (path, start, end), in order. Ranges of one object are coalesced
        (gaps up to max_gap, default cat_ranges_gap_bytes = 1 MiB) and all GETs run
        concurrently on the client's concurrency threads. on_error="return" puts the exception
        in place of the bytes, otherwise it raises."""
        if not (len(paths) == len(starts) == len(ends)):
            raise ValueError("paths, starts and ends must have the same length")
        gap = self.gap_bytes if max_gap is None else int(max_gap)
        by_object = {}
        out = [None] * len(paths)
        for i, (p, s, e) in enumerate(zip(paths, starts, ends)):
            if s is None or e is None or s < 0 or e < 0:
                out[i] = ("whole-or-negative", p, s, e)  # rare: handled one by one below
                continue
            by_object.setdefault(self._split(p), []).append(
                _ranges.Span(int(s), max(0, int(e) - int(s)), i))
        ex = self._executor()
        jobs = []

        def get(bucket, key, offset, length):
            from .errors import InvalidRange
            if not length:
                return b""
            try:
                return get_range(self.client, bucket, key, offset, length)
            except InvalidRange:  # a range at or past the end is empty, as in s3fs
                return b""
        for (bucket, key), spans in by_object.items():
            for g in _ranges.coalesce(spans, gap):
                jobs.append((ex.submit(get, bucket, key, g.offset, g.length), g, bucket, key))
        self.last_cat_ranges_gets = len(jobs)
        for fut, g, bucket, key in jobs:
            try:
                data = memoryview(fut.result())
                for s in g.members:
                    lo = s.offset - g.offset
                    out[s.tag] = bytes(data[lo:lo + s.length])
            except Exception as e:
                if isinstance(e, (NoSuchKey, NoSuchBucket)):
                    e = _missing(f"{bucket}/{key}", e)
                if on_error != "return":
                    raise e
                for s in g.members:
                    out[s.tag] = e
        for i, v in enumerate(out):
            if isinstance(v, tuple) and v and v[0] == "whole-or-negative":
                try:
                    out[i] = self.cat_file(v[1], v[2], v[3])
                except Exception as e:
                    if on_error != "return":
                        raise
                    out[i] = e
        return out

    def pipe_file(self, path, value, **kwargs):
        bucket, key = self._split(path)
        try:
            self.client.put(bucket, key, value)
        except NoSuchBucket as e:
            raise _missing(path, e)
        self.invalidate_cache(self._parent(path))

    # -- local files --

    def get_file(self, rpath, lpath, callback=None, **kwargs):
        """The object into the local file lpath: one get_into into a shared memory map of it
        (parallel parts, RDMA into the page cache), no intermediate buffer."""
        if os.path.isdir(lpath):
            return
        bucket, key = self._split(rpath)
        try:
            size = self.client.head(bucket, key).size
        except NoSuchKey as e:
            raise _missing(rpath, e)
        with open(lpath, "w+b") as f:
            if size:
                f.truncate(size)
                with mmap.mmap(f.fileno(), size) as m:
                    self.client.get_into(bucket, key, m)
        if callback is not None:
            callback.set_size(size)
            callback.relative_update(size)

    def put_file(self, lpath, rpath, callback=None, **kwargs):
        """The local file lpath as the object: one put from a read-only memory map of it."""
        if os.path.isdir(lpath):
            return
        bucket, key = self._split(rpath)
        with open(lpath, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            try:
                if size:
                    with mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) as m:
                        self.client.put(bucket, key, memoryview(m))
                else:
                    self.client.put(bucket, key, b"")
            except NoSuchBucket as e:
                raise _missing(rpath, e)
        if callback is not None:
            callback.set_size(size)
            callback.relative_update(size)
        self.invalidate_cache(self._parent(rpath))

    # -- deletion and buckets --

    def rm_file(self, path):
        bucket, key = self._split(path)
        if key:
            self.client.delete(bucket, key)
        self.invalidate_cache(self._parent(path))

    def rm(self, path, recursive=False, maxdepth=None):
        """Deletes objects (recursive: everything under the prefixes) with DeleteObjects, 1000
        keys a request. A bucket itself is removed by rmdir."""
        paths = self.expand_path(path, recursive=recursive, maxdepth=maxdepth)
        by_bucket = {}
        for p in paths:
            bucket, key = self._split(p)
            if key:
                by_bucket.setdefault(bucket, []).append(key)
        for bucket, keys in by_bucket.items():
            failed = self.client.delete_objects(bucket, keys)
            if failed:
                raise OSError(f"could not delete {failed[:3]}...")
        self.invalidate_cache()

    def _rm(self, path):
        self.rm_file(path)

    def mkdir(self, path, create_parents=True, **kwargs):
        bucket, key = self._split(path)
        if not key:
            self.client.create_bucket(bucket)

    def makedirs(self, path, exist_ok=False):
        bucket, key = self._split(path)
        if not key:
            try:
                self.client.create_bucket(bucket)
            except Exception as e:
                from .errors import BucketAlreadyOwnedByYou
                if not (exist_ok and isinstance(e, BucketAlreadyOwnedByYou)):
                    raise

    def rmdir(self, path):
        bucket, key = self._split(path)
        if not key:
            self.client.delete_bucket(bucket)

    def created(self, path):
        raise NotImplementedError("S3 keeps no creation time")

    def modified(self, path):
        import email.utils
        return email.utils.parsedate_to_datetime(self.info(path)["LastModified"])

    def cp_file(self, path1, path2, **kwargs):
        b1, k1 = self._split(path1)
        b2, k2 = self._split(path2)
        self.client.copy(b1, k1, b2, k2)

    # -- open --

    def _open(self, path, mode="rb", block_size=None, autocommit=True, cache_options=None,
              **kwargs):
        bucket, key = self._split(path)
        if "r" in mode:
            return _ReadFile(self, path, mode, block_size=block_size or 8 << 20,
                             cache_options=cache_options, **kwargs)
        if "a" in mode or "x" in mode:
            raise ValueError(f"mode {mode!r} is not supported (objects are written whole)")
        return io.BufferedWriter(ObjectWriter(self.client, bucket, key), 1 << 20)


class _ReadFile(AbstractBufferedFile):
    """fsspec's buffered read file; each block is one ranged GET."""

    def _fetch_range(self, start, end):
        bucket, key = self.fs._split(self.path)
        if end <= start:
            return b""
        try:
            return get_range(self.fs.client, bucket, key, start, end - start)
        except (NoSuchKey, NoSuchBucket) as e:
            raise _missing(self.path, e)


def register(clobber: bool = False):
    """Registers the ``objdirect`` protocol with fsspec (``import objdirect`` does this)."""
    fsspec.register_implementation("objdirect", ObjDirectFileSystem, clobber=clobber)


class ObjDirectS3FileSystem(ObjDirectFileSystem):
    """The same filesystem under fsspec's ``s3`` and ``s3a`` protocol names, for code that
    opens s3:// URLs through fsspec (``fsspec.open("s3://b/k")``, pandas' "s3://..." paths).
    Nothing registers it but register_s3(): those names belong to s3fs, and a library that took
    them on import would change what every other user of fsspec in the process gets."""

    protocol = ("s3", "s3a")


def register_s3(clobber: bool = False):
    """Makes fsspec's ``s3://`` and ``s3a://`` open through ObjDirect (ObjDirectS3FileSystem),
    for this process, when explicitly asked. Raises ValueError when another implementation of
    either name is already imported and registered (s3fs in use) unless clobber=True. An s3fs
    that is installed but not yet imported is not in use: registering takes precedence over
    it."""
    # fsspec.registry is a read-only view whose get() does not see the entries (fsspec 2022.11).
    taken = {name: fsspec.registry[name] for name in ObjDirectS3FileSystem.protocol
             if name in fsspec.registry and fsspec.registry[name] is not ObjDirectS3FileSystem}
    if taken and not clobber:
        raise ValueError(f"fsspec protocol(s) {sorted(taken)} already registered to "
                         f"{sorted({c.__module__ + '.' + c.__name__ for c in taken.values()})}; "
                         f"pass clobber=True to replace them in this process")
    for name in ObjDirectS3FileSystem.protocol:
        fsspec.register_implementation(name, ObjDirectS3FileSystem, clobber=True)
