// libobjdirect: the ObjDirect S3 client for C++.
//
// One Client talks to one S3 endpoint. Data calls (get, put and their async and batch forms) move
// bytes straight between the caller's buffer and the server: over RDMA when a fabric is available
// and the server accepts the x-amz-rdma-token, otherwise over HTTP with the body read into (or
// written from) the caller's buffer without intermediate copies. Control calls (head, list,
// delete_object, create_bucket, delete_bucket) are plain HTTP.
//
// There is no size cap. Objects larger than ClientConfig::part_size_bytes are moved in parts, up
// to ClientConfig::concurrency at a time: downloads as Range GETs pinned to one version of the
// object with If-Match on its ETag (an overwrite during the download fails the call with
// precondition_failed instead of mixing versions), uploads as a multipart upload (parallel
// UploadPart, then CompleteMultipartUpload; AbortMultipartUpload on failure).
//
// Every data call reports how the bytes travelled (TransferResult::path): rdma, http (RDMA was not
// attempted: fabric "none", or none available), or http_fallback (RDMA was attempted and the
// server declined, with the server's or the client's reason).
//
// CUDA device memory: every data call (get, put, their async and batch forms, register_memory)
// also accepts CUDA device and managed pointers (cudaMalloc, cudaMallocManaged, PyTorch/CuPy
// tensors). The client recognises them with the CUDA driver (only when the process has already
// loaded CUDA: a host-only process never loads it). Device memory goes straight to the NIC
// (GPUDirect RDMA, TransferResult::memory "cuda-direct") when the fabric registers CUDA memory
// itself (caps().cuda_memory) and the server accepts the RDMA; otherwise (Debian's libfabric and
// UCX, managed memory, a declining server) the client moves the bytes through pinned host
// staging buffers that are registered once with the fabric and reused: chunk N+1 is on the wire
// while chunk N is copied with cudaMemcpyAsync (PUT: the reverse, each request carrying the
// CRC32C of its chunk, computed on the staging buffer). When the server declines RDMA, or the
// fabric is "none", the HTTP body goes through the same staging buffers: the CPU never reads or
// writes device memory. Synchronous calls use the legacy default stream and return once every
// copy has completed. TransferResult::memory says "cuda-bounce" for such calls. Details and the
// integration contract: docs/gpu.md. At most limits::client_staging_pools_max device transfers
// of one Client run at once (each holds 4 x part_size_bytes of pinned memory); more wait.
//
// Errors: every call returns Status/Result (no exceptions). Codes are the objdirect::Errc table:
// S3 errors are mapped back from the XML <Code> (no_such_key, no_such_bucket, access_denied,
// precondition_failed, ...); a server that cannot be reached is Errc::unavailable; a stalled
// connection is Errc::timeout; a malformed reply is Errc::io_error.
//
// Thread safety: a Client is thread-safe; any number of threads may call any method at once. The
// caller must keep buffers alive and untouched until the call (or its future) completes. The free
// functions (path_name, memory_kind_name, memory_kind, cuda_memory_status) are thread-safe too.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "objdirect/config.hpp"
#include "objdirect/export.hpp"
#include "objdirect/status.hpp"

namespace objdirect {

// How the bytes of a data call travelled.
enum class TransferPath : std::uint8_t {
  rdma,           // every byte moved over the fabric
  http,           // RDMA was not attempted (fabric "none", or no fabric could be opened)
  http_fallback,  // RDMA was attempted; the server declined or failed, bytes went over HTTP
};
// "rdma", "http", "http-fallback".
OBJDIRECT_API std::string_view path_name(TransferPath path) noexcept;

// Where a data buffer lives, as every data call classifies it (see "CUDA device memory" above).
enum class MemoryKind : std::uint8_t {
  host,          // host memory: pageable, pinned, or memory the CUDA driver does not know
  cuda_device,   // cudaMalloc / cuMemAlloc memory: the library never touches it from the CPU
  cuda_managed,  // cudaMallocManaged memory: moved through CUDA copies too
};
// "host", "cuda-device", "cuda-managed".
OBJDIRECT_API std::string_view memory_kind_name(MemoryKind kind) noexcept;
// The kind of the memory at ptr, as get, put and register_memory see it: host for nullptr, when
// CUDA is not loaded in this process (a process that has not loaded CUDA holds no device memory;
// this call never loads it), or when the driver does not know the pointer. Cheap: one driver
// query once CUDA is loaded.
OBJDIRECT_API MemoryKind memory_kind(const void* ptr) noexcept;
// Whether the data calls can take device memory in this process: OK once CUDA is loaded here (by
// the application, PyTorch, CuPy, ...) and usable. Otherwise unavailable, "CUDA is not loaded in
// this process", with the loader's or the driver's message in parentheses when CUDA cannot be
// used at all (no libcudart, no GPU); finding that out loads the CUDA libraries once.
OBJDIRECT_API Status cuda_memory_status();

// A byte range of an object: `length` bytes from `offset`.
struct ByteRange {
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
};

struct TransferResult {
  std::uint64_t bytes = 0;  // bytes moved (written into dst for get, read from src for put)
  std::string etag;         // unquoted; multipart uploads end in "-N"
  TransferPath path = TransferPath::http;
  std::string fabric;             // "libfabric:shm", ... ; empty when RDMA was not attempted
  std::string reason;             // why RDMA was not used or was declined; empty for rdma
  std::uint64_t object_size = 0;  // whole object size as the server reported it
  std::uint32_t requests = 0;     // HTTP requests this call made
  // Where the caller's buffer was: "host"; "cuda-direct" (CUDA device memory registered by the
  // fabric itself: GPUDirect RDMA); or "cuda-bounce" (CUDA device or managed memory moved through
  // the client's pinned staging buffers). See "CUDA device memory" above.
  std::string memory = "host";
};

struct ObjectInfo {
  std::uint64_t size = 0;
  std::string etag;           // unquoted
  std::string last_modified;  // HTTP date, as the server sent it
  std::string content_type;
  // User metadata: the x-amz-meta-NAME headers, NAME lower-case and without the prefix.
  std::map<std::string, std::string> metadata;
};

// An SSE-C customer key (docs/sse-c.md): the 32 bytes of the AES-256 key the server encrypts an
// object with and never stores. A request that carries it sends
// x-amz-server-side-encryption-customer-algorithm: AES256, -customer-key (base64 of the 32 bytes)
// and -customer-key-MD5 (base64 of their MD5, computed by the client), all three in the SigV4
// SignedHeaders, on HTTP and on RDMA requests alike (the token request is the signed request).
// An object written with a key must be read (get, head, copy's source) with the same key: no key
// is 400 invalid_request, another key 403 access_denied. The server accepts these headers only
// over TLS (https endpoints) unless it runs with --sse-c-over-http.
// Each copy owns its bytes and wipes them (OPENSSL_cleanse) when destroyed or assigned over; the
// client wipes the header values it builds from a key once the request is sent, and never logs
// them. Thread safety: a value; concurrent const use is safe.
class OBJDIRECT_API SseCustomerKey {
 public:
  static constexpr std::size_t size_bytes = 32;
  // Errors: invalid_argument unless raw is exactly 32 bytes.
  static Result<SseCustomerKey> from_bytes(std::string_view raw);
  SseCustomerKey(const SseCustomerKey& o) noexcept;
  SseCustomerKey& operator=(const SseCustomerKey& o) noexcept;
  ~SseCustomerKey();
  const std::array<std::byte, size_bytes>& bytes() const noexcept { return key_; }

 private:
  SseCustomerKey() = default;
  std::array<std::byte, size_bytes> key_{};
};

// What an upload sets besides the bytes (put with options, create_multipart_upload with options).
// Validated by the call: invalid_argument for a content type or metadata value with a control
// character (CR, LF, NUL, ...), a metadata name that is empty or not an HTTP token, or names
// plus values above limits::user_metadata_bytes_max (2 KiB, as S3).
struct PutOptions {
  std::string content_type;  // Content-Type; empty: the server's default (binary/octet-stream)
  // x-amz-meta-NAME: VALUE, NAME without the prefix (sent lower-case, as S3 stores it).
  std::vector<std::pair<std::string, std::string>> metadata;
  // SSE-C: the object is encrypted at rest with this key (on the PutObject, or on the
  // CreateMultipartUpload and every UploadPart and the CompleteMultipartUpload of a multipart
  // upload). Host memory only.
  std::optional<SseCustomerKey> sse_c;
};

// What a read sends besides the range (get with options).
struct GetOptions {
  // Not empty: the ETag (unquoted) the read is pinned to, as GetRequest::if_match.
  std::string if_match;
  // SSE-C: the key the object was written with (on every request of the read, and on the HEAD
  // an empty buffer asks). Host memory only.
  std::optional<SseCustomerKey> sse_c;
};

// What a server-side copy sends besides the names (copy with options).
struct CopyOptions {
  // The source object's SSE-C key (x-amz-copy-source-server-side-encryption-customer-*), needed
  // when the source was written with one; also sent on the HEAD of the source.
  std::optional<SseCustomerKey> source_sse_c;
  // SSE-C for the copy: encrypted with this key (none: stored without SSE-C).
  std::optional<SseCustomerKey> sse_c;
};

struct ListOptions {
  std::string prefix;
  std::string delimiter;
  std::string continuation_token;  // from a previous ListPage
  std::uint32_t max_keys = 1000;
};

struct ListEntry {
  std::string key;
  std::uint64_t size = 0;
  std::string etag;
  std::string last_modified;  // ISO 8601, as in the XML
};

struct ListPage {
  std::vector<ListEntry> objects;
  std::vector<std::string> common_prefixes;
  bool is_truncated = false;
  std::string next_continuation_token;  // pass in ListOptions to get the next page
};

// A registered memory range. Registration makes RDMA transfers into or out of the range skip the
// per-call registration; calls on any sub-span of it find it. Ownership: the handle does not own
// the memory, which must outlive the handle. Copies share the registration; it is released when
// the last copy goes (and in-flight transfers keep it alive until they end).
// Thread safety: immutable; safe to share.
class OBJDIRECT_API MemoryHandle {
 public:
  MemoryHandle() = default;
  void* data() const noexcept { return ptr_; }
  std::size_t size() const noexcept { return size_; }
  bool valid() const noexcept { return ptr_ != nullptr; }
  std::span<std::byte> span() const noexcept { return {static_cast<std::byte*>(ptr_), size_}; }
  // Fabrics the range is registered with ("libfabric:shm", ...); empty when RDMA is off.
  std::vector<std::string> fabrics() const;

  struct Pin;  // implementation detail

 private:
  friend class Client;
  void* ptr_ = nullptr;
  std::size_t size_ = 0;
  std::shared_ptr<Pin> pin_;
};

struct GetRequest {
  std::string bucket;
  std::string key;
  std::span<std::byte> dst;
  std::optional<ByteRange> range;
  // Not empty: the object's ETag (unquoted) this read is pinned to. Every request carries
  // If-Match with it, so an object replaced since fails with precondition_failed instead of
  // mixing versions (Python's get_ranges_into pins its ranges so). Host memory only: with CUDA
  // device memory it is invalid_argument.
  std::string if_match;
  // SSE-C: the object's key (GetOptions::sse_c). Host memory only.
  std::optional<SseCustomerKey> sse_c;
};

struct PutRequest {
  std::string bucket;
  std::string key;
  std::span<const std::byte> src;
  // SSE-C: encrypt with this key (PutOptions::sse_c). Host memory only.
  std::optional<SseCustomerKey> sse_c;
};

// What a server offers for RDMA (Client::rdma_offer): its x-amz-rdma-fabrics and
// x-amz-rdma-host-id headers (docs/token_format.md, "Fabric advertisement").
struct RdmaOffer {
  bool advertised = false;           // it sent x-amz-rdma-fabrics (servers without RDMA do not)
  std::vector<std::string> fabrics;  // the fabrics it serves, in its order
  // It runs on this client's kernel (shared-memory fabrics reach only such a server): both host
  // ids known and equal, or, from a server that sends none, a loopback endpoint.
  bool same_host = false;
  std::string error;  // why a malformed advertisement was refused; fabrics is then empty
};

// The client library's counters, from Client::stats(): a consistent snapshot of everything this
// Client did since create(). Counts only grow, except requests_in_flight.
struct OBJDIRECT_API ClientStats {
  // HTTP requests by S3 operation ("GetObject", "PutObject", "UploadPart", "HeadObject",
  // "ListObjectsV2", "CreateMultipartUpload", ...; "RdmaCapabilities" for the fabric probe) and
  // outcome class: "2xx", "3xx", "4xx", "5xx", or "failed" when no response arrived (connect
  // error, timeout, broken connection). A request re-sent on a new connection counts twice.
  std::map<std::string, std::map<std::string, std::uint64_t>> requests;
  // Payload bytes of successful data calls (get, put and their async and batch forms) by the
  // call's TransferResult::path: "rdma", "http", "http-fallback". A call whose parts took
  // different paths counts all its bytes under its overall path.
  std::map<std::string, std::uint64_t> bytes;
  // Successful data calls by path (same keys as bytes).
  std::map<std::string, std::uint64_t> transfers;
  // Data calls that proposed RDMA and fell back to HTTP, by reason: "token_refused" (400
  // InvalidRDMAToken and other refusals of the token), "server_declined" (x-amz-rdma-reply 501 or
  // an RDMA error status), "server_ignored_token" (no x-amz-rdma-reply: a server without the
  // protocol), "no_token" (the fabric could not make one), "other".
  std::map<std::string, std::uint64_t> rdma_declines;
  // Failed requests by objdirect error name (errc_name): S3 error responses mapped from their
  // XML <Code> ("no_such_key", "slow_down", ...) and requests with no response ("unavailable",
  // "timeout", "io_error").
  std::map<std::string, std::uint64_t> errors;
  // Requests sent again (the sum of retry_reasons).
  std::uint64_t retries = 0;
  // Retries by reason (common/retry.hpp): the S3 code of a retried error reply ("SlowDown",
  // "InternalError", "RequestTimeout", ...) or "http_NNN" without one (429, 500, 502, 503, 504);
  // "connection_refused", "connection_reset" (no answer), "timeout", "short_body" (the body ended
  // before its Content-Length, or a 206 body is not the length its Content-Range says),
  // "truncated_xml" (a 2xx XML reply that does not parse), "stale_connection" (a pooled keep-alive
  // connection the server had closed: re-sent at once on a new one). A token request refused by
  // RDMA admission (503 SlowDown) counts as "SlowDown".
  std::map<std::string, std::uint64_t> retry_reasons;
  // CompleteMultipartUploads whose answer was lost and that HEAD showed completed (the object's
  // ETag is the one these parts make): reported as success, never completed twice.
  std::uint64_t completes_confirmed = 0;
  // Registrations revoked after an RDMA request that did not succeed (error reply, decline,
  // connection error): the buffer's registration is dropped from the registration cache and
  // closed, and the fabric drained, before the call falls back to HTTP or returns, so that a
  // server write the provider still held cannot land in the buffer afterwards
  // (docs/RELIABILITY.md section 5).
  std::uint64_t rdma_revocations = 0;
  // Memory registrations made with a fabric: a buffer the registration cache did not already
  // cover (per request, or pinned by register_memory and by get_many / put_many for their
  // arenas). A buffer found in the cache, or inside a registered arena, adds nothing.
  std::uint64_t rdma_registrations = 0;
  // Per fabric: transfers the server failed over it (RDMATransferFailed), each of which makes
  // the fabric skipped against that server for fabric_failure_memory_ms; and requests that
  // skipped it because of such a recent failure (they went over the next fabric or HTTP).
  std::map<std::string, std::uint64_t> fabric_failures;
  std::map<std::string, std::uint64_t> fabric_skips;
  // HTTP requests in progress right now.
  std::uint64_t requests_in_flight = 0;
  // Data calls whose path auto's measurements chose (ClientConfig::rdma_learn), by why:
  // "learning_rdma" / "learning_http" (a size class still measuring both), "measured_rdma" /
  // "measured_http" (the faster one), "probe_rdma" / "probe_http" (the slower one, re-measured).
  std::map<std::string, std::uint64_t> auto_choices;

  // Sums over `requests` (all operations) for one class ("2xx", ..., "failed"), or all when empty.
  std::uint64_t requests_total(std::string_view status_class = {}) const;
};

class OBJDIRECT_API Client {
 public:
  // Validates the config and opens nothing yet: connections and fabrics open on first use.
  // Errors: invalid_argument (empty or non-http endpoint, zero concurrency or part size, token
  // lifetime outside 1..120, unknown fabric name, unknown rdma policy, rdma "required" with
  // fabric "none", max_attempts outside
  // 1..limits::retry_attempts_max, unknown retry_mode, back-off above the limit).
  static Result<std::unique_ptr<Client>> create(ClientConfig config);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const ClientConfig& config() const noexcept;

  // Registers [ptr, ptr+len) with the client's fabric (opening it if needed) through a bounded
  // LRU cache. With fabric "none" (or no fabric available) this succeeds and registers nothing.
  // CUDA device memory is accepted and registers nothing either (the staging buffers are
  // registered, and GPUDirect registers per call); the handle works with get as usual.
  // Errors: invalid_argument (null or empty), transport_error (the provider refused).
  Result<MemoryHandle> register_memory(void* ptr, std::size_t len);

  // Reads an object (or `range` of it) into dst. Without a range the object must fit in dst
  // (else invalid_argument, "buffer too small"); with a range, dst must hold range->length
  // bytes, and a range reaching past the end is cut at the end (bytes says how many landed).
  // Errors: no_such_bucket, no_such_key, invalid_range (range starts at or after the end),
  // precondition_failed (object replaced mid-download), access_denied, unavailable, timeout,
  // io_error, rdma_transfer_failed.
  Result<TransferResult> get(std::string_view bucket, std::string_view key,
                             std::span<std::byte> dst, std::optional<ByteRange> range = {});
  Result<TransferResult> get(std::string_view bucket, std::string_view key, const MemoryHandle& dst,
                             std::optional<ByteRange> range = {});
  // The same with GetOptions (if_match, SSE-C key). With an SSE-C key, CUDA device memory is
  // invalid_argument. Errors also: invalid_request (the object needs a key, or has none and one
  // was given), access_denied (another key), invalid_argument (the server refused the headers).
  Result<TransferResult> get(std::string_view bucket, std::string_view key,
                             std::span<std::byte> dst, std::optional<ByteRange> range,
                             const GetOptions& options);

  // Writes src as the object (replacing it). Single PUT up to part_size_bytes, multipart above.
  // Errors: no_such_bucket, access_denied, entity_too_large, unavailable, timeout, io_error,
  // rdma_transfer_failed; a failed multipart upload is aborted before returning.
  Result<TransferResult> put(std::string_view bucket, std::string_view key,
                             std::span<const std::byte> src);
  // The same with a Content-Type and user metadata (see PutOptions; on the PutObject, or on the
  // CreateMultipartUpload of a multipart upload). Host memory only: CUDA device memory with
  // non-empty options is invalid_argument.
  Result<TransferResult> put(std::string_view bucket, std::string_view key,
                             std::span<const std::byte> src, const PutOptions& options);

  // The same on a thread of their own; the buffers must stay valid until the future is ready.
  // Device buffers use the legacy default CUDA stream (as get/put do).
  std::future<Result<TransferResult>> get_async(std::string bucket, std::string key,
                                                std::span<std::byte> dst,
                                                std::optional<ByteRange> range = {});
  std::future<Result<TransferResult>> put_async(std::string bucket, std::string key,
                                                std::span<const std::byte> src);

  // The same with a CUDA stream (a cudaStream_t / CUstream, nullptr: the legacy default
  // stream), for device buffers. Stream semantics: the device copies are queued on
  // `cuda_stream` after the work already queued there, so a GET does not overwrite dst while an
  // earlier kernel on that stream still reads it, and a PUT reads what earlier work on that stream
  // wrote. When the future completes, every copy has completed: the data is visible to work on
  // that stream (and on any other stream, and to the host). The transfer runs on the caller's
  // current CUDA device (cudaGetDevice at the call). Host buffers ignore the stream.
  std::future<Result<TransferResult>> get_async(std::string bucket, std::string key,
                                                std::span<std::byte> dst,
                                                std::optional<ByteRange> range, void* cuda_stream);
  std::future<Result<TransferResult>> put_async(std::string bucket, std::string key,
                                                std::span<const std::byte> src, void* cuda_stream);

  // Many objects, up to `concurrency` requests in flight at once; one result per request, in
  // input order, each its own success or error (one missing key fails only its item). When the
  // batch may use RDMA, host buffers that touch or overlap in memory (slices of one arena, laid
  // end to end) are registered once for the whole batch, as one range, instead of once each;
  // ranges already registered (register_memory) are found as they are. Large objects are still
  // moved in parts, as get and put do.
  std::vector<Result<TransferResult>> get_many(std::span<const GetRequest> requests);
  std::vector<Result<TransferResult>> put_many(std::span<const PutRequest> requests);

  // ListBuckets: the names of the caller's buckets. Errors: access_denied, unavailable, io_error.
  Result<std::vector<std::string>> list_buckets();
  // HeadObject. Errors: no_such_key (also for a missing bucket: HEAD has no body to tell),
  // access_denied, unavailable, timeout.
  Result<ObjectInfo> head(std::string_view bucket, std::string_view key);
  // HeadObject of an SSE-C object, with its key. Errors also as get with GetOptions::sse_c.
  Result<ObjectInfo> head(std::string_view bucket, std::string_view key,
                          const SseCustomerKey& sse_c);
  // One page of ListObjectsV2. Errors: no_such_bucket, access_denied, unavailable, io_error.
  Result<ListPage> list(std::string_view bucket, const ListOptions& options = {});
  // DeleteObject (a missing key is not an error in S3).
  Status delete_object(std::string_view bucket, std::string_view key);
  // Errors: bucket_already_owned_by_you, bucket_already_exists, invalid_bucket_name.
  Status create_bucket(std::string_view bucket);
  // Errors: no_such_bucket, bucket_not_empty.
  Status delete_bucket(std::string_view bucket);

  // Asks the server what it offers for RDMA (one request, GET /?rdma-capabilities, counted as
  // "RdmaCapabilities"), whatever this client's fabric setting; opens no fabric. Errors: those of
  // any request (access_denied, unavailable, timeout, io_error).
  Result<RdmaOffer> rdma_offer();

  // A snapshot of this client's counters (see ClientStats). Cheap; safe from any thread.
  ClientStats stats() const;

  // --- Server-side copy, batch delete, explicit multipart uploads ----------------------------

  // Copies an object on the server (CopyObject): no object byte passes through the client.
  // Objects larger than config().copy_multipart_threshold_bytes are copied as a multipart upload
  // of UploadPartCopy parts (sized as plan_upload sizes upload parts), up to `concurrency` parts
  // at a time; a failed multipart copy is aborted. TransferResult::bytes is the object size,
  // path is http, requests counts the HTTP requests.
  // Errors: no_such_key / no_such_bucket (source or destination), access_denied,
  // precondition_failed (the source was replaced during a multipart copy), unavailable, timeout.
  Result<TransferResult> copy(std::string_view src_bucket, std::string_view src_key,
                              std::string_view dst_bucket, std::string_view dst_key);
  // The same with the SSE-C keys of the source and of the copy (CopyOptions): each CopyObject,
  // UploadPartCopy and the HEAD of the source carry the source's key in the copy-source headers;
  // the CopyObject, or the CreateMultipartUpload, UploadPartCopy parts and Complete, the copy's.
  Result<TransferResult> copy(std::string_view src_bucket, std::string_view src_key,
                              std::string_view dst_bucket, std::string_view dst_key,
                              const CopyOptions& options);

  // A presigned URL (SigV4 query authentication, docs/client.md "Presigned URLs") for `method`
  // ("GET", "HEAD", "PUT", "DELETE") on the object, valid for `expires` from now: the endpoint,
  // the target (path-style; with addressing_style "virtual" the bucket goes into the URL's host
  // as requests do, "http://bucket.HOST:PORT/key") and the X-Amz-* query, signed with this
  // client's credentials and region (a session token goes in as X-Amz-Security-Token). Anyone
  // holding it may do that one operation until it expires. Makes no request. Errors:
  // invalid_argument (empty bucket or key, another method, expires
  // outside 1..limits::presign_expires_max_s, 604800 s as AWS).
  Result<std::string> presign(std::string_view method, std::string_view bucket,
                              std::string_view key, std::chrono::seconds expires);

  // A key DeleteObjects could not delete.
  struct DeleteFailure {
    std::string key;
    Status status;
  };
  // DeleteObjects in batches of limits::delete_keys_max (1000) keys, up to `concurrency` batches
  // at a time. Returns the keys the server reported as not deleted (empty: all gone; missing keys
  // count as deleted, as in S3). Errors (the whole call): no_such_bucket, access_denied,
  // unavailable, timeout, io_error.
  Result<std::vector<DeleteFailure>> delete_objects(std::string_view bucket,
                                                    std::span<const std::string> keys);

  // Explicit multipart uploads, for writers that do not know the size up front (streams).
  // CreateMultipartUpload: returns the upload id.
  Result<std::string> create_multipart_upload(std::string_view bucket, std::string_view key);
  // The same with the Content-Type and user metadata the completed object gets (PutOptions).
  Result<std::string> create_multipart_upload(std::string_view bucket, std::string_view key,
                                              const PutOptions& options);
  // UploadPart `part_number` (1..limits::parts_max) from src, over RDMA when it can (as put).
  // TransferResult::etag is the part's ETag.
  Result<TransferResult> upload_part(std::string_view bucket, std::string_view key,
                                     std::string_view upload_id, std::uint32_t part_number,
                                     std::span<const std::byte> src);
  // The same for an upload created with PutOptions::sse_c: every part must carry the upload's key
  // (AWS: none is 400 invalid_request, another 400 invalid_argument).
  Result<TransferResult> upload_part(std::string_view bucket, std::string_view key,
                                     std::string_view upload_id, std::uint32_t part_number,
                                     std::span<const std::byte> src, const SseCustomerKey& sse_c);
  struct CompletedPart {
    std::uint32_t part_number = 0;
    std::string etag;  // as upload_part returned it
  };
  // CompleteMultipartUpload with `parts` in ascending part number order. TransferResult::etag is
  // the object's ETag ("...-N"). Errors: invalid_part, invalid_part_order, entity_too_small,
  // no_such_upload, and those of any request.
  Result<TransferResult> complete_multipart_upload(std::string_view bucket, std::string_view key,
                                                   std::string_view upload_id,
                                                   std::span<const CompletedPart> parts);
  // The same for an SSE-C upload: the Complete carries the key (AWS asks for it when the upload
  // has checksums), and so does the HEAD that confirms a Complete whose answer was lost.
  Result<TransferResult> complete_multipart_upload(std::string_view bucket, std::string_view key,
                                                   std::string_view upload_id,
                                                   std::span<const CompletedPart> parts,
                                                   const SseCustomerKey& sse_c);
  // AbortMultipartUpload: drops the parts. Errors: no_such_upload.
  Status abort_multipart_upload(std::string_view bucket, std::string_view key,
                                std::string_view upload_id);

 private:
  struct Impl;  // the implementation (src/client/client_impl.hpp, pimpl)
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace objdirect
