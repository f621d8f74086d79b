"""objdirect.Client: the S3-over-RDMA client for Python.

A Client talks to one S3 endpoint through libobjdirect. Data calls (get_into, get, put) move bytes
directly between the caller's buffer and the server: over RDMA when a fabric is available and the
server accepts it, otherwise over HTTP into (or from) the same buffer. The GIL is released for the
whole transfer, so threads (and the *_async methods) overlap.

Buffers accepted by get_into / put: anything with the buffer protocol (bytes and memoryview for
put; bytearray, writable memoryview, numpy arrays for both), and CPU DLPack producers (torch
tensors: ``__dlpack__`` with ``__dlpack_device__`` on the CPU), and CUDA device memory: objects
with ``__cuda_array_interface__`` (CuPy, Numba) and DLPack producers on CUDA or CUDA managed memory
(torch CUDA tensors). They must be contiguous. Device memory moves through libobjdirect's pinned
staging pipeline on the legacy default CUDA stream (docs/gpu.md) and is never touched from the
CPU; the call returns once the data is in (or out of) device memory. A device buffer raises
DeviceBufferNotSupported before anything is sent when this process has not loaded CUDA, when the
CUDA driver does not know the pointer, or for other devices (ROCm, ...).

Errors: every failure raises an objdirect.ObjDirectError subclass (objdirect.errors): NoSuchKey,
NoSuchBucket, AccessDenied, InvalidRange, Unavailable (server unreachable), Timeout, ...; a bad
buffer raises TypeError or BufferError, a bad argument ValueError.

Thread safety: a Client is thread-safe; share one between threads. Fork safety: a Client used in
a child of os.fork() (a DataLoader worker, for one) re-initialises itself on its first call there:
it opens a new native client with the same configuration, and the parent's (whose threads and
connections did not survive the fork) is abandoned, never touched again. Calls that were in
flight in the parent at the fork are the parent's. Clients pickle as their constructor arguments.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import threading
from typing import Iterator, NamedTuple, Optional

from . import _objdirect, errors
from . import ranges as _ranges

__all__ = ["Client", "ClientConfig", "TransferResult", "ObjectInfo", "ObjectSummary", "GetRequest",
           "PutRequest", "Registration"]


class _Transfer(NamedTuple):
    nbytes: int
    path: str  # "rdma", "http" or "http-fallback"


class TransferResult(_Transfer):
    """(nbytes, path) of a data call; unpacks as a pair.

    Also: etag (unquoted), fabric ("libfabric:shm", ...; "" when RDMA was not attempted), reason
    (why RDMA was not used; "" for rdma), object_size, requests (HTTP requests made).
    """

    etag: str
    fabric: str
    reason: str
    object_size: int
    requests: int

    @classmethod
    def _from_native(cls, t):
        r = cls(t[0], t[1])
        r.etag, r.fabric, r.reason, r.object_size, r.requests = t[2], t[3], t[4], t[5], t[6]
        return r


@dataclasses.dataclass(frozen=True)
class ObjectInfo:
    """HeadObject's answer."""

    size: int
    etag: str
    last_modified: str  # HTTP date as the server sent it
    content_type: str
    # x-amz-meta-NAME values by NAME (lower-case, without the prefix); RFC 2047 words as sent
    metadata: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class ObjectSummary:
    """One entry of Client.list(): an object, or (is_prefix) a common prefix under a delimiter."""

    key: str
    size: int = 0
    etag: str = ""
    last_modified: str = ""  # ISO 8601
    is_prefix: bool = False


class GetRequest(NamedTuple):
    """One object of Client.get_many: read (bucket, key) into buf, as get_into(bucket, key, buf,
    offset=offset, length=length) would. A plain tuple in this order works too."""

    bucket: str
    key: str
    buf: object
    offset: int = 0
    length: Optional[int] = None


class PutRequest(NamedTuple):
    """One object of Client.put_many: write buf as (bucket, key). A plain tuple works too."""

    bucket: str
    key: str
    buf: object


class Registration:
    """A buffer pinned with the client's fabric by Client.register(buf): RDMA transfers into or
    out of it (or any slice of it) skip per-call registration until release(). A context manager;
    release() is idempotent. The buffer is held (its buffer protocol export stays open) while the
    registration is active; transfers in flight when it is released keep the registration alive
    until they end. With no fabric (fabric "none", HTTP only) nothing is registered (fabrics is
    empty) and it does no harm."""

    def __init__(self, native):
        self._native = native

    @property
    def active(self) -> bool:
        return self._native.active

    @property
    def nbytes(self) -> int:
        return self._native.nbytes

    @property
    def fabrics(self) -> list:
        """Fabrics the buffer is registered with ("libfabric:shm", ...); empty without RDMA."""
        return self._native.fabrics

    def release(self) -> None:
        self._native.release()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()

    def __repr__(self):
        return (f"objdirect.Registration(nbytes={self.nbytes}, fabrics={self.fabrics!r}, "
                f"active={self.active})")


@dataclasses.dataclass(frozen=True)
class ClientConfig:
    """The client's settings under the names boto3 (botocore.config.Config) and s3transfer
    (TransferConfig) users know, for ``Client(config=...)``. Every field left None keeps the
    default (the environment, ~/.aws, then libobjdirect's ClientConfig default). A keyword given
    to Client explicitly wins over the same setting here.

    max_attempts, retry_mode: attempts in all per request (1..20) and "standard" | "adaptive" |
        "legacy" (default AWS_MAX_ATTEMPTS / AWS_RETRY_MODE, the profile, else 3 and "standard").
    max_concurrency: requests in flight per call (parts of one object, items of a batch), and
        the threads of the *_async calls (Client's ``concurrency``; default 8).
    multipart_chunksize: bytes per part of a multipart upload and per ranged GET of a large
        download (``part_size_bytes``; default 8 MiB; uploads use at least 5 MiB).
    multipart_threshold: objects from this size up are uploaded as a multipart upload, smaller
        ones with one PutObject (default 8 MiB).
    connect_timeout, read_timeout: seconds (floats) to connect, and to wait for any progress on a
        connection (defaults 10 and 120).
    max_pool_connections: keep-alive connections kept to the endpoint (default 64).
    region_name: the SigV4 region (``region``).
    addressing_style: "path" (https://host/bucket/key, the default: always works against
        ObjDirect) or "virtual" (https://bucket.host/key, the server's --domain).
    ca_bundle: PEM file of the certificate authorities an https endpoint's certificate must
        chain to (default AWS_CA_BUNDLE, the profile's ca_bundle, else the system store).
    redirects_max: how many 307 Temporary Redirects one request follows (default 3; 0: none).
    """

    max_attempts: Optional[int] = None
    retry_mode: Optional[str] = None
    max_concurrency: Optional[int] = None
    multipart_chunksize: Optional[int] = None
    multipart_threshold: Optional[int] = None
    connect_timeout: Optional[float] = None
    read_timeout: Optional[float] = None
    max_pool_connections: Optional[int] = None
    region_name: Optional[str] = None
    addressing_style: Optional[str] = None
    ca_bundle: Optional[str] = None
    redirects_max: Optional[int] = None

    def merge(self, other: "ClientConfig") -> "ClientConfig":
        """A new ClientConfig: this one with other's non-None fields on top (as botocore's)."""
        return dataclasses.replace(self, **{f.name: getattr(other, f.name)
                                            for f in dataclasses.fields(other)
                                            if getattr(other, f.name) is not None})

    def _overrides(self) -> dict:
        """The native option names (libobjdirect's ClientConfig fields) of the fields set."""
        o = dict(max_attempts=self.max_attempts, retry_mode=self.retry_mode,
                 concurrency=self.max_concurrency, part_size_bytes=self.multipart_chunksize,
                 multipart_threshold_bytes=self.multipart_threshold,
                 connections_max=self.max_pool_connections, region=self.region_name,
                 addressing_style=self.addressing_style, ca_bundle=self.ca_bundle,
                 redirects_max=self.redirects_max)
        if self.connect_timeout is not None:
            o["connect_timeout_ms"] = _ms(self.connect_timeout)
        if self.read_timeout is not None:
            o["io_timeout_ms"] = _ms(self.read_timeout)
        return {k: v for k, v in o.items() if v is not None}


_OPTION_NAMES = ("access_key", "secret_key", "session_token", "part_size_bytes", "concurrency",
                 "connections_max", "connect_timeout_s", "io_timeout_s", "token_lifetime_s",
                 "registrations_max", "registered_bytes_max")


class Client:
    """A client of one S3 endpoint.

    Args:
        endpoint: "http://host:port" or "https://host:port" (the certificate verified against
            ClientConfig.ca_bundle / AWS_CA_BUNDLE, else the system store). Default:
            AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, else endpoint_url in the profile's
            ~/.aws/config section (as boto3).
        region: default AWS_REGION, AWS_DEFAULT_REGION, the profile's region, else us-east-1.
        profile: the ~/.aws/credentials and ~/.aws/config profile (default AWS_PROFILE, else
            "default"). Keys come from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY /
            AWS_SESSION_TOKEN, else the profile; an explicitly named profile wins over the
            environment (as ``aws --profile``).
        fabric: "auto" (OBJDIRECT_FABRIC if set, else the first fabric of fabric_order that the
            server offers, opens here and has not failed against this server recently),
            "libfabric:tcp", "libfabric:shm", "libfabric:verbs", "libfabric:efa", "ucx", or
            "none" (HTTP only).
        fabric_order: auto's order, a comma list (default OBJDIRECT_FABRIC_ORDER, else shm on
            the server's own kernel, then verbs, efa, UCX over rc/dc, then libfabric:tcp, then
            UCX over tcp/sm; docs/client.md, "Choosing a fabric").
        fabric_failure_memory_ms: how long a fabric that failed against a server is skipped
            there (default 30000; 0: never).
        access_key, secret_key, session_token: explicit credentials.
        part_size_bytes: objects above this move in parts (default 8 MiB).
        concurrency: parts in flight per call, and the worker threads of the *_async methods.
        connections_max, connect_timeout_s, io_timeout_s, token_lifetime_s, registrations_max,
        registered_bytes_max: see ClientConfig in include/objdirect/client.hpp.
        rdma: "auto" (RDMA from rdma_min_bytes up, HTTP below it and as the fallback), "required"
            (RDMA for every transfer; a decline raises RDMANotSupported instead of falling
            back) or "off". Default OBJDIRECT_RDMA, else "auto".
        rdma_min_bytes: the crossover below which "auto" sends plain HTTP (default
            OBJDIRECT_RDMA_MIN_BYTES, else 512 KiB; docs/client.md, "The fastest path").
        rdma_put_min_bytes: the lower crossover of uploads; they use the smaller of the two
            (default OBJDIRECT_RDMA_PUT_MIN_BYTES, else 64 KiB).
        rdma_learn: with rdma and fabric "auto", from the crossover up each get / put goes the
            path this client measured faster for its direction and size (a power of two);
            a size's first 3 calls go over RDMA and the next 3 over HTTP, then a probe one
            call in 32 to 1024 (spaced by its cost) re-measures the slower path
            (default OBJDIRECT_RDMA_LEARN, else True; docs/client.md, "The fastest path").
        max_attempts, retry_mode: retries as boto3 names them (default AWS_MAX_ATTEMPTS /
            AWS_RETRY_MODE, else the profile's max_attempts / retry_mode, else 3 and
            "standard"; "adaptive" adds a client-side rate limiter). retry_base_delay_s,
            retry_max_backoff_s: the back-off (full jitter, 0.1 s doubling, at most 20 s).
        config: an objdirect.ClientConfig (boto3 / s3transfer names: max_concurrency,
            multipart_chunksize, multipart_threshold, connect_timeout, read_timeout,
            addressing_style, ca_bundle, ...). A keyword above given explicitly wins over it.

    Raises InvalidArgument for a bad configuration (no endpoint, unknown fabric, missing
    profile). Nothing is connected until the first call.
    """

    def __init__(self, endpoint: Optional[str] = None, region: Optional[str] = None,
                 profile: Optional[str] = None, fabric: Optional[str] = "auto", *,
                 access_key: Optional[str] = None, secret_key: Optional[str] = None,
                 session_token: Optional[str] = None, part_size_bytes: Optional[int] = None,
                 concurrency: Optional[int] = None, connections_max: Optional[int] = None,
                 connect_timeout_s: Optional[float] = None, io_timeout_s: Optional[float] = None,
                 token_lifetime_s: Optional[int] = None, registrations_max: Optional[int] = None,
                 registered_bytes_max: Optional[int] = None, fabric_order: Optional[str] = None,
                 fabric_failure_memory_ms: Optional[int] = None, max_attempts: Optional[int] = None,
                 retry_mode: Optional[str] = None, retry_base_delay_s: Optional[float] = None,
                 retry_max_backoff_s: Optional[float] = None, rdma: Optional[str] = None,
                 rdma_min_bytes: Optional[int] = None, rdma_put_min_bytes: Optional[int] = None,
                 rdma_learn: Optional[bool] = None, config: Optional[ClientConfig] = None):
        if config is not None and not isinstance(config, ClientConfig):
            raise TypeError(f"config must be an objdirect.ClientConfig, got "
                            f"{type(config).__name__}")
        self._args = dict(endpoint=endpoint, region=region, profile=profile, fabric=fabric,
                          fabric_order=fabric_order, fabric_failure_memory_ms=fabric_failure_memory_ms,
                          access_key=access_key, secret_key=secret_key,
                          session_token=session_token, part_size_bytes=part_size_bytes,
                          concurrency=concurrency, connections_max=connections_max,
                          connect_timeout_s=connect_timeout_s, io_timeout_s=io_timeout_s,
                          token_lifetime_s=token_lifetime_s, registrations_max=registrations_max,
                          registered_bytes_max=registered_bytes_max, max_attempts=max_attempts,
                          retry_mode=retry_mode, retry_base_delay_s=retry_base_delay_s,
                          retry_max_backoff_s=retry_max_backoff_s, rdma=rdma,
                          rdma_min_bytes=rdma_min_bytes, rdma_put_min_bytes=rdma_put_min_bytes,
                          rdma_learn=rdma_learn, config=config)
        # The config object first; keywords given explicitly replace its settings below.
        overrides = config._overrides() if config is not None else {}
        overrides.update((k, v) for k, v in dict(endpoint=endpoint, region=region, access_key=access_key,
                         secret_key=secret_key, session_token=session_token,
                         part_size_bytes=part_size_bytes, concurrency=concurrency,
                         connections_max=connections_max, token_lifetime_s=token_lifetime_s,
                         registrations_max=registrations_max,
                         registered_bytes_max=registered_bytes_max, fabric_order=fabric_order,
                         fabric_failure_memory_ms=fabric_failure_memory_ms,
                         max_attempts=max_attempts, retry_mode=retry_mode, rdma=rdma,
                         rdma_min_bytes=rdma_min_bytes,
                         rdma_put_min_bytes=rdma_put_min_bytes,
                         rdma_learn=rdma_learn).items() if v is not None)
        if retry_base_delay_s is not None:
            overrides["retry_base_delay_ms"] = _ms(retry_base_delay_s)
        if retry_max_backoff_s is not None:
            overrides["retry_max_backoff_ms"] = _ms(retry_max_backoff_s)
        # "auto" leaves the choice to the loaded config: OBJDIRECT_FABRIC, else auto.
        overrides["fabric"] = None if fabric in (None, "auto") else fabric
        if connect_timeout_s is not None:
            overrides["connect_timeout_ms"] = _ms(connect_timeout_s)
        if io_timeout_s is not None:
            overrides["io_timeout_ms"] = _ms(io_timeout_s)
        self._native_args = (profile or "", overrides)
        self._native_handle = _objdirect.NativeClient(*self._native_args)
        self._pid = os.getpid()
        self._executor = None
        self._executor_lock = threading.Lock()
        self._closed = False

    # -- fork safety -----------------------------------------------------------------------------

    @property
    def _native(self):
        if self._pid != os.getpid():
            self._reinit_after_fork()
        return self._native_handle

    def _reinit_after_fork(self):
        """In a child of fork(): the parent's native client (its progress and pool threads, its
        connections, its registrations) did not come along. Destroying it here would join threads
        that do not exist in this process, so it is kept alive forever, never used again, and a
        new native client with the same configuration replaces it. The locks are new too: a
        parent thread may have held the old ones at the moment of the fork."""
        with _fork_lock:
            if self._pid == os.getpid():
                return
            _abandoned.append(self._native_handle)
            _abandoned.append(self._executor)
            self._executor = None
            self._executor_lock = threading.Lock()
            self._native_handle = _objdirect.NativeClient(*self._native_args)
            self._pid = os.getpid()
            self.reinitialised_after_fork = True

    # -- lifecycle -------------------------------------------------------------------------------

    def close(self):
        """Waits for pending *_async calls and stops their threads. Idempotent."""
        if self._pid != os.getpid():
            self._reinit_after_fork()  # the parent's executor is not this process's to join
        self._closed = True
        with self._executor_lock:
            ex, self._executor = self._executor, None
        if ex is not None:
            ex.shutdown(wait=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __reduce__(self):
        return (_rebuild_client, (self._args,))

    def __repr__(self):
        c = self._native.config()
        return f"objdirect.Client(endpoint={c['endpoint']!r}, region={c['region']!r}, fabric={c['fabric']!r})"

    @property
    def config(self) -> dict:
        """The effective configuration (endpoint, region, profile, fabric, ...; no secret)."""
        return self._native.config()

    # -- data ------------------------------------------------------------------------------------

    def get_into(self, bucket: str, key: str, buf, *, offset: int = 0,
                 length: Optional[int] = None, sse_c_key=None) -> TransferResult:
        """Reads an object into ``buf``; returns (nbytes, path).

        With offset 0 and no length, the whole object, which must fit in buf (InvalidArgument
        "buffer too small" otherwise). Otherwise the range [offset, offset+length) into the first
        ``length`` bytes of buf (length defaults to len(buf) in bytes); a range past the end is
        cut, and nbytes says how many bytes landed. Raises NoSuchKey, NoSuchBucket, InvalidRange
        (offset at or past the end), PreconditionFailed (replaced during a multi-part read), ...

        sse_c_key: the SSE-C key the object was written with (see put); host memory only. Without
        it an SSE-C object raises InvalidRequest, with another key AccessDenied.
        """
        return TransferResult._from_native(
            self._native.get_into(bucket, key, buf, _nonneg(offset, "offset"),
                                  None if length is None else _nonneg(length, "length"),
                                  sse_c_key))

    def get(self, bucket: str, key: str, *, offset: int = 0, length: Optional[int] = None,
            sse_c_key=None) -> bytes:
        """The object (or the range [offset, offset+length), cut at the end) as bytes, filled in
        place (no copy) and with no HEAD. With a length: one ranged GET (in parts above
        part_size_bytes). Without: a first GET of up to 256 KiB
        (``_objdirect.get_first_window_bytes_max``, at most part_size_bytes) from offset learns
        the size from its reply, so an object that fits costs one request; a larger one costs
        one more GET for the rest, pinned to the first reply's ETag with If-Match (an object
        replaced in between is read again). length=0 makes no request. Raises NoSuchKey,
        InvalidRange (offset at or past the end of a non-empty object), ...
        sse_c_key as get_into's."""
        return self._native.get_bytes(bucket, key, _nonneg(offset, "offset"),
                                      None if length is None else _nonneg(length, "length"),
                                      sse_c_key)

    def put(self, bucket: str, key: str, buf, *, content_type: Optional[str] = None,
            metadata: Optional[dict] = None, sse_c_key=None) -> TransferResult:
        """Writes buf (any buffer kind; bytes included) as the object; returns (nbytes, path).

        Objects above part_size_bytes go as a multipart upload (aborted on failure).
        content_type sets Content-Type; metadata ({name: value}) the x-amz-meta-* headers (names
        sent lower-case; names plus values at most 2 KiB; host memory only). Raises NoSuchBucket,
        AccessDenied, InvalidArgument (bad metadata), ...

        sse_c_key: SSE-C (docs/sse-c.md), as boto3's SSECustomerKey: the 32 bytes of an AES-256 key
        (bytes, bytes-like, or a str of 32 UTF-8 bytes); the library sends the algorithm AES256 and
        the key's MD5, over HTTP and RDMA alike, and wipes its own copies after the call. The
        object can then be read only with the same key. Host memory only. The server takes SSE-C
        only over TLS unless it runs with --sse-c-over-http (InvalidRequest otherwise).
        """
        meta = [(str(k), str(v)) for k, v in (metadata or {}).items()]
        return TransferResult._from_native(
            self._native.put(bucket, key, buf, content_type or "", meta, sse_c_key))

    # -- batches, ranges, registration -----------------------------------------------------------

    def get_many(self, requests, *, return_exceptions: bool = False) -> list:
        """Reads many objects at once: requests is an iterable of GetRequest (or tuples
        (bucket, key, buf[, offset[, length]])), each read as get_into would. Up to
        ``concurrency`` requests are in flight at once, with the GIL released for the whole batch
        (libobjdirect's Client::get_many); buffers that are slices of one arena laid end to end
        are registered once, as one range, when the batch may use RDMA.

        Returns one TransferResult per request, in input order. One failure does not stop the
        others: with return_exceptions=True a failed item's entry is its exception (NoSuchKey,
        ...), as asyncio.gather does; by default, once every request has finished, the first
        failure in input order is raised, with the whole list (exceptions in place) as its
        ``results`` attribute. Bad arguments (a read-only buffer, a length beyond the buffer)
        raise before anything is sent."""
        items = []
        for r in requests:
            g = GetRequest(*r)
            items.append((g.bucket, g.key, g.buf, _nonneg(g.offset, "offset"),
                          None if g.length is None else _nonneg(g.length, "length"), ""))
        return _batch_results(self._native.get_many(items), return_exceptions)

    def put_many(self, requests, *, return_exceptions: bool = False) -> list:
        """Writes many objects at once: requests is an iterable of PutRequest (or tuples
        (bucket, key, buf)), each written as put would (multipart above part_size_bytes). In
        flight, GIL, registration, order and errors as get_many."""
        items = [tuple(PutRequest(*r)) for r in requests]
        return _batch_results(self._native.put_many(items), return_exceptions)

    def get_ranges_into(self, bucket: str, key: str, ranges, bufs, *,
                        gap_bytes: int = 64 << 10,
                        group_bytes_max: int = _ranges.group_bytes_max_default) -> list:
        """Reads several byte ranges of one object: ranges[i] = (offset, length) into bufs[i]
        (writable, at least length bytes). Ranges are sorted and merged into fewer GETs where at
        most gap_bytes lie between them (objdirect.ranges.coalesce; a merged GET is never longer
        than group_bytes_max), the GETs run concurrently (as get_many), and every GET carries
        If-Match on the ETag a first HEAD returned, so all ranges come from one version of the
        object: an overwrite in between raises PreconditionFailed instead of mixing versions.
        A single-range GET lands straight in its buffer; a merged one goes through a scratch
        buffer and is copied out. Overlapping and duplicate ranges are allowed.

        Returns the bytes landed per range, in input order (fewer than length where a range
        reaches past the end of the object; 0 for a zero-length range). Raises InvalidRange for
        a non-empty range starting at or past the end, ValueError for a bad range or buffer
        count, NoSuchKey, PreconditionFailed, ..."""
        ranges_ = [(_nonneg(o, "offset"), _nonneg(n, "length")) for o, n in ranges]
        bufs = list(bufs)
        if len(bufs) != len(ranges_):
            raise ValueError(f"{len(ranges_)} ranges but {len(bufs)} buffers")
        for i, ((_, n), b) in enumerate(zip(ranges_, bufs)):
            if _objdirect.buffer_info(b, True)[1] < n:
                raise ValueError(f"buffer {i} holds fewer than the range's {n} bytes")
        info = self.head(bucket, key)
        for o, n in ranges_:
            if n > 0 and o >= info.size:
                raise errors._from_native(
                    "invalid_range", "InvalidRange", 416,
                    f"range at {o} starts at or past the end of the {info.size}-byte object "
                    f"s3://{bucket}/{key}")
        spans = [_ranges.Span(o, min(n, info.size - o), i) for i, (o, n) in enumerate(ranges_)
                 if n > 0]
        groups = [(g.offset, g.length, [(s.tag, s.offset - g.offset, s.length) for s in g.members])
                  for g in _ranges.coalesce(spans, gap_bytes, group_bytes_max)]
        landed = self._native.get_ranges(bucket, key, info.etag, groups, bufs) if groups else \
            [0] * len(bufs)
        return list(landed)

    def register(self, buf) -> Registration:
        """Pins buf (any buffer kind get_into or put accepts) with the client's fabric once, so
        that transfers into or out of it, or any slice of it, skip per-call registration: a
        reusable arena. Use as ``with client.register(arena): ...`` or call release(). Raises
        TypeError / BufferError for a bad buffer, TransportError when the provider refuses."""
        return Registration(self._native.register(buf))

    # -- control ---------------------------------------------------------------------------------

    def head(self, bucket: str, key: str, *, sse_c_key=None) -> ObjectInfo:
        """HeadObject. Raises NoSuchKey (also for a missing bucket: HEAD has no body to tell).
        sse_c_key: the key of an SSE-C object (as get_into's)."""
        return ObjectInfo(*self._native.head(bucket, key, sse_c_key))

    def presign(self, bucket: str, key: str, *, method: str = "GET",
                expires_in: int = 3600) -> str:
        """A presigned URL (SigV4 query authentication) for one `method` ("GET", "HEAD", "PUT",
        "DELETE") on the object, valid for expires_in seconds (1..604800, as AWS). Anyone holding
        it may do that operation until it expires. Makes no request. Raises InvalidArgument for
        another method, an empty bucket or key, or expires_in out of range.
        """
        return self._native.presign(method, bucket, key, int(expires_in))

    def list(self, bucket: str, prefix: str = "", delimiter: str = "", *,
             page_size: int = 1000) -> Iterator[ObjectSummary]:
        """Yields the objects under prefix in key order, pages fetched lazily (ListObjectsV2).

        With a delimiter, common prefixes are yielded too (is_prefix=True), in key order among the
        objects. Raises NoSuchBucket (on the first next()), AccessDenied, ...
        """
        if not 1 <= page_size <= 1000:
            raise ValueError("page_size must be 1..1000")
        token = ""
        while True:
            objects, prefixes, token = self._native.list_page(bucket, prefix, delimiter, token,
                                                              page_size)
            entries = [ObjectSummary(k, s, e, m) for (k, s, e, m) in objects]
            entries += [ObjectSummary(p, is_prefix=True) for p in prefixes]
            if prefixes:
                entries.sort(key=lambda e: e.key)
            yield from entries
            if token is None:
                return

    def delete(self, bucket: str, key: str) -> None:
        """DeleteObject (a missing key is not an error in S3)."""
        self._native.delete_object(bucket, key)

    def create_bucket(self, bucket: str) -> None:
        """Raises BucketAlreadyOwnedByYou, BucketAlreadyExists, InvalidBucketName."""
        self._native.create_bucket(bucket)

    def delete_bucket(self, bucket: str) -> None:
        """Raises NoSuchBucket, BucketNotEmpty."""
        self._native.delete_bucket(bucket)

    def list_buckets(self) -> list:
        """The names of the caller's buckets."""
        return self._native.list_buckets()

    def copy(self, src_bucket: str, src_key: str, dst_bucket: str, dst_key: str, *,
             copy_source_sse_c_key=None, sse_c_key=None) -> TransferResult:
        """Server-side copy (CopyObject; UploadPartCopy parts above 5 GiB): no object byte
        passes through this process. Raises NoSuchKey, NoSuchBucket, AccessDenied, ...

        copy_source_sse_c_key: the source's SSE-C key (boto3's CopySourceSSECustomerKey);
        sse_c_key: the copy's (none: the copy is stored without SSE-C)."""
        return TransferResult._from_native(self._native.copy(
            src_bucket, src_key, dst_bucket, dst_key, copy_source_sse_c_key, sse_c_key))

    def delete_objects(self, bucket: str, keys) -> list:
        """DeleteObjects in batches of 1000 keys. Returns [(key, errc, message)] of the keys the
        server did not delete (empty: all gone; missing keys count as deleted)."""
        return self._native.delete_objects(bucket, list(keys))

    # -- explicit multipart uploads (streams of unknown size) ------------------------------------

    def create_multipart_upload(self, bucket: str, key: str, *, sse_c_key=None) -> str:
        """CreateMultipartUpload; returns the upload id. sse_c_key: the SSE-C key the object
        is encrypted with; every upload_part and the complete then take the same key."""
        return self._native.create_multipart_upload(bucket, key, sse_c_key)

    def upload_part(self, bucket: str, key: str, upload_id: str, part_number: int,
                    buf, *, sse_c_key=None) -> TransferResult:
        """UploadPart number part_number (1..10000) from any buffer kind, over RDMA when it can.
        All parts but the last must be at least 5 MiB. result.etag is the part's ETag.
        sse_c_key: the upload's SSE-C key (none: InvalidRequest; another: InvalidArgument)."""
        return TransferResult._from_native(
            self._native.upload_part(bucket, key, upload_id, part_number, buf, sse_c_key))

    def complete_multipart_upload(self, bucket: str, key: str, upload_id: str,
                                  parts, *, sse_c_key=None) -> TransferResult:
        """CompleteMultipartUpload; parts is [(part_number, etag)] in ascending order.
        sse_c_key: the upload's SSE-C key (sent as AWS asks, and on a confirming HEAD)."""
        return TransferResult._from_native(self._native.complete_multipart_upload(
            bucket, key, upload_id, [(int(n), str(e)) for n, e in parts], sse_c_key))

    def abort_multipart_upload(self, bucket: str, key: str, upload_id: str) -> None:
        """AbortMultipartUpload: drops the uploaded parts. Raises NoSuchUpload."""
        self._native.abort_multipart_upload(bucket, key, upload_id)

    def stats(self) -> dict:
        """The client's counters since it was created (objdirect::Client::stats()):

        ``requests``: {operation: {"2xx"|"3xx"|"4xx"|"5xx"|"failed": count}};
        ``bytes`` and ``transfers``: {"rdma"|"http"|"http-fallback": count} for data calls;
        ``rdma_declines``: {reason: count} for calls that fell back to HTTP;
        ``errors``: {error name: count}; ``retries``; ``retry_reasons``: {reason: count}
        ("SlowDown", "InternalError", "http_503", "connection_reset", "short_body",
        "truncated_xml", "stale_connection", ...); ``completes_confirmed`` (lost
        CompleteMultipartUpload answers that HEAD confirmed); ``rdma_revocations``
        (registrations revoked after an RDMA request that did not succeed); ``requests_in_flight``.
        """
        return self._native.stats()

    # -- async -----------------------------------------------------------------------------------
    # Each returns a concurrent.futures.Future of the synchronous call's result (or exception),
    # run on the client's pool of `concurrency` threads. The buffer must stay alive and untouched
    # until the future is done.

    def get_into_async(self, bucket, key, buf, *, offset=0, length=None) -> concurrent.futures.Future:
        return self._submit(self.get_into, bucket, key, buf, offset=offset, length=length)

    def get_async(self, bucket, key, *, offset=0, length=None) -> concurrent.futures.Future:
        return self._submit(self.get, bucket, key, offset=offset, length=length)

    def put_async(self, bucket, key, buf) -> concurrent.futures.Future:
        return self._submit(self.put, bucket, key, buf)

    def head_async(self, bucket, key) -> concurrent.futures.Future:
        return self._submit(self.head, bucket, key)

    def delete_async(self, bucket, key) -> concurrent.futures.Future:
        return self._submit(self.delete, bucket, key)

    def _submit(self, fn, *args, **kwargs):
        if self._closed:
            raise RuntimeError("objdirect.Client is closed")
        if self._pid != os.getpid():
            self._reinit_after_fork()
        with self._executor_lock:
            if self._executor is None:
                self._executor = concurrent.futures.ThreadPoolExecutor(
                    max_workers=self._native.config()["concurrency"],
                    thread_name_prefix="objdirect")
            return self._executor.submit(fn, *args, **kwargs)


# Native clients and executors inherited across fork(): never destroyed (see _reinit_after_fork).
_abandoned: list = []
_fork_lock = threading.Lock()


def _after_fork_in_child():
    global _fork_lock
    _fork_lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _batch_results(entries, return_exceptions):
    out = [e if isinstance(e, BaseException) else TransferResult._from_native(e) for e in entries]
    if not return_exceptions:
        for e in out:
            if isinstance(e, BaseException):
                e.results = out
                raise e
    return out


def _rebuild_client(args):
    return Client(**args)


def _ms(seconds):
    ms = int(round(float(seconds) * 1000))
    if ms <= 0:
        raise ValueError("timeouts must be positive")
    return ms


def _nonneg(v, what):
    v = int(v)
    if v < 0:
        raise ValueError(f"{what} must be >= 0")
    return v
