"""objdirect.objects: file objects over single objects, without torch.

ObjectReader (a seekable read-only file: whole-object or ranged, bounded read-ahead) and
ObjectWriter (a write-only file streamed as a multipart upload, committed on close, aborted on
error). objdirect.torch (datasets, checkpoints) and objdirect.fs (fsspec open) use them; both
are re-exported by objdirect.torch.

Thread safety: one thread at a time per reader or writer.
"""

from __future__ import annotations

import collections
import io
from typing import List, Optional, Tuple

from .client import Client, TransferResult
from .errors import InvalidRange

__all__ = ["ObjectReader", "ObjectWriter", "get_range"]

def get_range(client: Client, bucket: str, key: str, offset: int, length: int, *,
              as_bytes: bool = True):
    """Bytes [offset, offset+length) of an object, cut at its end: Client.get with the length,
    one ranged GET (in parts above part_size_bytes) straight into the returned bytes, no HEAD.
    Raises InvalidRange for a range starting at or past the end of a non-empty object,
    NoSuchKey, ... (as_bytes is kept for callers that asked for a bytearray: the result is
    bytes either way.)"""
    if length <= 0:
        return b""
    return client.get(bucket, key, offset=offset, length=length)


# -- readers and writers ------------------------------------------------------------------------


class ObjectReader(io.RawIOBase):
    """A read-only, seekable file over one object.

    mode "whole" (default): the first read fetches the whole object into memory with one GET
    (over RDMA when available) and later reads and seeks are served from it; what small-object
    transforms want. mode "ranged" (Checkpoint.reader's default): memory stays bounded by
    ``buffer_size`` whatever the object size; a readinto() of at least buffer_size bytes is one
    ranged GET straight into the caller's buffer (no copy), smaller reads are served from a
    read-ahead window of buffer_size bytes fetched with one ranged GET at the read position.
    Neither mode sends a HEAD to learn the size unless asked for it (``size``, a seek from the
    end) before the first read: the first GET's reply carries it.

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
        """The object's size: given, learnt from a GET, else (whole mode, or a ranged reader
        positioned at or past the end) from a HEAD."""
        if self._size is None and self._mode == "ranged":
            self._fill_window(self._pos)  # the GET's reply carries the size: no HEAD
        if self._size is None:
            self._size = self._client.head(self.bucket, self.key).size
        return self._size

    def _fill_window(self, pos: int) -> int:
        """Ranged mode: one GET of up to buffer_size bytes at pos into the read-ahead window,
        which learns the size when it is unknown. Returns the bytes landed (0 at the end; 0 and
        the size still unknown when pos is at or past the end of the object)."""
        if self._window is None:
            self._window = bytearray(self.buffer_size)
        want = self.buffer_size if self._size is None else min(self.buffer_size,
                                                               self._size - pos)
        if want <= 0:
            return 0
        try:
            r = self._client.get_into(self.bucket, self.key, memoryview(self._window)[:want],
                                      offset=pos, length=want)
        except InvalidRange:
            if self._size is not None:
                raise
            return 0
        self.requests += 1
        if self._size is None:
            self._size = r.object_size
        self._window_start, self._window_len = pos, r.nbytes
        return r.nbytes

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
            if self._size is not None:
                # Size known (a listing or a manifest): one GET straight into a buffer of that
                # size, no HEAD. An object that grew since fails with "buffer too small".
                buf = bytearray(self._size)
                n, _ = self._client.get_into(self.bucket, self.key, buf) if self._size else (0, "")
                self._data = memoryview(buf)[:n]
                self._size = n
            else:
                data = self._client.get(self.bucket, self.key)
                self._data = memoryview(data)
                self._size = len(data)
        return self._data

    def read(self, size=-1):
        self._check_open()
        if self._mode == "whole" or size is None or size < 0:
            data = self._load() if self._mode == "whole" else None
            if data is None:  # ranged mode, read to the end
                if self._size is not None and self._pos >= self._size:
                    return b""
                try:  # no HEAD: Client.get learns the size from its first GET
                    out = self._client.get(self.bucket, self.key, offset=self._pos)
                except InvalidRange:  # at or past the end
                    return b""
                self._pos += len(out)
                return out
            end = len(data) if size is None or size < 0 else min(len(data), self._pos + size)
            out = bytes(data[self._pos:end]) if self._pos < end else b""
            self._pos = max(self._pos, end)
            return out
        return super().read(size)

    def readall(self):
        return self.read(-1)

    def readinto_buffer(self, buf):
        """The whole object straight into buf (any get_into buffer, device memory included),
        with no copy through this reader; returns the byte count."""
        self._check_open()
        if self._data is not None:
            n = len(self._data)
            memoryview(buf).cast("B")[:n] = self._data
            return n
        n, _ = self._client.get_into(self.bucket, self.key, buf)
        self._size = n
        return n

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
                if self._fill_window(self._pos) == 0:
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

    Bytes collect in a part buffer of ``part_size`` bytes (default: the client's part_size_bytes;
    at least part_bytes_min, 5 MiB, S3's floor for all but the last part). When a part fills, a
    multipart upload starts (on the first one) and the part is uploaded on a background thread
    while the next one fills; up to ``parts_in_flight`` parts (default 1) upload at once, so at most
    parts_in_flight + 1 part buffers exist, whatever the object size. close() uploads the last
    part and completes the upload, or sends a small object as one put(). Leaving a ``with``
    block by an exception, or any upload error, aborts the multipart upload: no object is
    written (an existing object of that key is left as it was). close() raises the upload's error
    (NoSuchBucket, AccessDenied, ...).
    """

    part_bytes_min = 5 << 20  # S3's floor for every part but the last

    def __init__(self, client: Client, bucket: str, key: str, *, part_size: Optional[int] = None,
                 parts_in_flight: int = 1):
        super().__init__()
        self._client = client
        self.bucket = bucket
        self.key = key
        if part_size is None:
            part_size = client.config.get("part_size_bytes", 8 << 20)
        if parts_in_flight < 1:
            raise ValueError("parts_in_flight must be >= 1")
        self.part_size = max(int(part_size), self.part_bytes_min)
        self.parts_in_flight = int(parts_in_flight)
        self._buf = bytearray(self.part_size)
        self._spares: List[bytearray] = []
        self._fill = 0
        self._written = 0
        self._upload_id: Optional[str] = None
        self._parts: List[Tuple[int, str]] = []
        self._part_results = []
        self._pending = collections.deque()  # (future, buffer) of parts being uploaded
        self._next_part = 1
        self._executor = None
        self._discard = False
        self.buffers_allocated = 1  # part buffers ever allocated (the memory bound, tested)
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
                # through a memoryview: bytearray slice assignment from another object copies
                # the source into a temporary bytearray first
                memoryview(self._buf)[self._fill:self._fill + take] = mv[done:done + take]
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

    def _wait_oldest(self):
        future, buf = self._pending.popleft()
        r = future.result()
        self._part_results.append(r)
        self._spares.append(buf)

    def _wait_pending(self):
        while self._pending:
            self._wait_oldest()

    def _send_part(self):
        import concurrent.futures
        if self._upload_id is None:
            self._upload_id = self._client.create_multipart_upload(self.bucket, self.key)
            self._executor = concurrent.futures.ThreadPoolExecutor(
                max_workers=self.parts_in_flight)
        while len(self._pending) >= self.parts_in_flight:
            self._wait_oldest()
        buf, n = self._buf, self._fill
        number = self._next_part
        self._next_part += 1
        view = memoryview(buf)[:n]

        def upload():
            r = self._client.upload_part(self.bucket, self.key, self._upload_id, number, view)
            self._parts.append((number, r.etag))
            return r
        self._pending.append((self._executor.submit(upload), buf))
        if self._spares:
            self._buf = self._spares.pop()
        else:
            self._buf = bytearray(self.part_size)
            self.buffers_allocated += 1
        self._fill = 0

    def _abort(self):
        while self._pending:
            try:
                self._pending.popleft()[0].result()
            except BaseException:
                pass
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
                    if self._fill or self._next_part == 1:
                        self._send_part()
                    self._wait_pending()
                    done = self._client.complete_multipart_upload(
                        self.bucket, self.key, self._upload_id, sorted(self._parts))
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
            self._spares = []
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
