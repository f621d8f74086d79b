// Private to server/s3: the per-request context and helpers shared by the operation files.
#pragma once

#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "auth/sigv4.hpp"
#include "common/checksum.hpp"
#include "common/scratch_buffer.hpp"
#include "s3/conditional.hpp"
#include "s3/documents.hpp"
#include "s3/sse_c.hpp"
#include "s3/xml.hpp"
#include "server/http/http_server.hpp"
#include "server/s3/s3_service.hpp"
#include "storage/object_store.hpp"
#include "token/binding.hpp"

namespace objdirect::s3 {

struct Policy;         // policy.hpp
struct LifecycleRule;  // lifecycle.hpp

namespace bhttp = boost::beast::http;
template <class T>
using Task = boost::asio::awaitable<T>;

inline constexpr std::string_view kS3Xmlns = "http://s3.amazonaws.com/doc/2006-03-01/";

// Everything a handler needs about one request.
struct Ctx {
  http::Exchange& ex;
  const http::RequestHeader& req;
  std::string request_id;
  std::string bucket;                                      // decoded
  std::string key;                                         // decoded, may be empty
  std::vector<std::pair<std::string, std::string>> query;  // decoded, in order
  sigv4::AuthContext auth;
  bool is_head = false;
  std::string op = "Unknown";      // S3 operation name, for metrics and the access log
  std::string data_path = "http";  // "http", "rdma" or "http-fallback"
  std::uint64_t rdma_bytes = 0;
  std::string error_code;  // S3 code of an error response
  // x-amz-rdma-reply to send with the response (set by the RDMA path on success or decline).
  std::string rdma_reply;
  // With rdma_reply: x-amz-rdma-target-progress: none (RdmaEngine::lands_without_client_progress).
  bool rdma_target_progress_none = false;
  // x-amz-rdma-challenge to send with an RDMAEndpointNotBound refusal.
  std::string rdma_challenge;
  // Access-Control-* headers for a request from an Origin the bucket's CORS rules allow (sent
  // with the response, errors included).
  std::vector<std::pair<std::string, std::string>> cors_headers;
  // x-amz-version-id / x-amz-delete-marker of the response, errors included (a GET of a key
  // whose latest version is a delete marker answers 404 with both).
  std::vector<std::pair<std::string, std::string>> version_headers;

  bool has_query(std::string_view name) const;
  std::optional<std::string> query_value(std::string_view name) const;
  // A request header, or nullopt when absent.
  std::optional<std::string> header(std::string_view name) const;
  std::string resource() const;
  // Transfer-Encoding: chunked (the body has no Content-Length).
  bool chunked() const;
};

struct PayloadResult {
  std::uint64_t size = 0;
  std::string md5_hex;
  std::string md5_raw;
  storage::ChecksumMap checksums;  // algorithm name -> base64 (verified when the client sent one)
  std::map<std::string, std::string> checksums_raw;  // algorithm name -> raw digest
};

struct S3Service::Impl {
  S3Options opts;
  std::shared_ptr<storage::ObjectStore> store;
  std::shared_ptr<rdma::RdmaEngine> rdma;
  std::FILE* access_log = nullptr;
  std::mutex access_log_mu;
  // The SigV4 signing keys of this server's users, derived once per (secret, date, region) and
  // shared by every request (bounded: limits::sigv4_signing_keys_max, LRU; thread-safe).
  sigv4::SigningKeyCache signing_keys;
  void finish_request(Ctx& c, std::chrono::steady_clock::time_point t0);
  Task<bool> serve_metrics(http::Exchange& ex);
  // Blocking RDMA transfers run here, off the HTTP event loop (but see rdma_inline_*).
  std::unique_ptr<boost::asio::thread_pool> rdma_pool;
  // One-chunk transfers running on an I/O thread now (at most opts.rdma_inline_transfers_max),
  // and ever (objdirect_rdma_transfers_inline_total).
  std::atomic<unsigned> rdma_inline_now{0};
  std::atomic<std::uint64_t> rdma_inline_total{0};
  // Endpoint binding and single use (rdma_ops.cc, docs/rdma_protocol.md): this process's random
  // challenge key, the bound endpoints and the nonces seen. Created with the service.
  std::string bind_key;
  std::unique_ptr<token::BindingTable> bindings;
  std::unique_ptr<token::ReplayCache> replay;
  // PUT bodies are hashed here (MD5 of the ETag, checksums) while the request's own thread
  // receives and writes them (OverlappedDigest); null (hash inline) unless
  // S3Options::put_digest_threads > 0.
  std::unique_ptr<boost::asio::thread_pool> digest_pool;
  // Parsed bucket policies by bucket, with the document they were parsed from (policy_ops.cc).
  std::mutex policy_mu;
  std::map<std::string, std::pair<std::string, std::shared_ptr<const Policy>>> policy_cache;

  Task<void> dispatch(Ctx& c);
  // Names the operation (metrics, access log) and runs it.
  Task<void> run(Ctx& c, const char* op, Task<void> (Impl::*fn)(Ctx&)) {
    c.op = op;
    co_await (this->*fn)(c);
  }

  // --- responses (errors.cc) ---
  Task<void> send_error(Ctx& c, const Status& st);
  // The same, with further elements after <Message> (InvalidPartNumber's ActualPartCount, ...).
  Task<void> send_error(Ctx& c, const Status& st,
                        std::vector<std::pair<std::string, std::string>> details);
  Task<void> send_xml(Ctx& c, bhttp::status status, std::string xml, http::Fields extra = {});
  Task<void> send_empty(Ctx& c, bhttp::status status, http::Fields extra = {});
  http::Fields base_headers(const Ctx& c) const;

  // --- buckets (bucket_ops.cc) ---
  Task<void> list_buckets(Ctx& c);
  Task<void> create_bucket(Ctx& c);
  Task<void> delete_bucket(Ctx& c);
  Task<void> head_bucket(Ctx& c);
  Task<void> get_bucket_location(Ctx& c);
  Task<void> get_bucket_versioning(Ctx& c);
  Task<void> put_bucket_versioning(Ctx& c);
  // Opens `key` at `version_id` (nullopt: the latest). A backend without versioning serves only
  // "null" (as the latest); another id is not_implemented there. When the open fails on a delete
  // marker, sets c.version_headers as AWS does (x-amz-delete-marker, x-amz-version-id).
  // On a backend that passes SSE-C through (passes_sse_c()), the request's SSE-C headers (the
  // copy-source ones when `copy_source`) go with the open, after request_customer_key's checks.
  Result<std::unique_ptr<storage::ObjectReader>> open_version(
      Ctx& c, std::string_view bucket, std::string_view key,
      const std::optional<std::string>& version_id, bool copy_source = false);
  // The metadata of `key` at `version_id` (nullopt: the latest), for the operations that read a
  // version without its bytes (GetObjectTagging, GetObjectAttributes), as open_version answers:
  // "null" only on a backend without versioning; a delete marker is no_such_key (the latest) or
  // method_not_allowed (by id), with c.version_headers set.
  // `with_sse_c`: the request's SSE-C headers go with it as with open_version (GetObjectAttributes;
  // GetObjectTagging needs no key).
  Result<storage::ObjectMeta> head_version(Ctx& c, std::string_view bucket, std::string_view key,
                                           const std::optional<std::string>& version_id,
                                           bool with_sse_c = false);
  // After an operation on a version failed with `code`: when the version is a delete marker
  // (method_not_allowed by id; no_such_key for the latest), sets c.version_headers as AWS does
  // (x-amz-delete-marker, x-amz-version-id; by id also Last-Modified and Allow: DELETE).
  void note_delete_marker(Ctx& c, std::string_view bucket, std::string_view key,
                          const std::optional<std::string>& version_id, Errc code);
  // The version id to pass to the store: "" for the latest, and for "null" on a backend without
  // versioning (where it is the latest); not_implemented for another id there.
  Result<std::string> store_version_id(const std::optional<std::string>& version_id) const;
  Task<void> list_objects(Ctx& c, int version);  // 1, 2, or 0 for ListObjectVersions
  // ListObjectVersions on a backend that keeps versions.
  Task<void> list_versions(Ctx& c, const storage::ListQuery& q, const std::string& key_marker,
                           bool url);
  Task<void> list_uploads(Ctx& c);
  Task<void> delete_objects(Ctx& c);
  // --- authorisation and policies (policy_ops.cc) ---
  // Checks that the bucket exists and that the caller may do c.op on it (and on c.key): the
  // owner may unless the bucket policy explicitly denies it; anyone else (the anonymous caller
  // included) only when the policy allows it. Called by every operation on a bucket.
  Status check_bucket_access(const Ctx& c);
  // The same decision for `action` on `key` of bucket `b` (DeleteObjects: per key).
  Status authorize(const Ctx& c, const storage::BucketInfo& b, std::string_view key,
                   std::string_view action);
  std::shared_ptr<const Policy> bucket_policy_of(const storage::BucketInfo& b);
  // x-amz-acl other than private / bucket-owner-full-control, or any x-amz-grant-*:
  // AccessControlListNotSupported (ACLs are disabled: BucketOwnerEnforced).
  Status check_acl_headers(const Ctx& c);
  Task<void> bucket_policy(Ctx& c);
  // The start shared by Get/Put/Delete of a bucket's configuration documents (?policy, ?cors,
  // ?lifecycle): names c.op after the method, refuses a key or another method
  // (MethodNotAllowed) and checks bucket access (check_bucket_access).
  Status begin_bucket_document(Ctx& c, const char* get_op, const char* put_op,
                               const char* delete_op);
  // GET's lookup: the bucket's stored document `name`, or `missing` when it has none.
  Result<std::string> stored_bucket_document(const Ctx& c, std::string_view name, Status missing);
  Task<void> acl(Ctx& c);
  Task<void> ownership_controls(Ctx& c);

  // --- objects (object_ops.cc) ---
  Task<void> put_object(Ctx& c);
  Task<void> get_object(Ctx& c);
  Task<void> delete_object(Ctx& c);
  Task<void> copy_object(Ctx& c);

  // --- tagging (tagging_ops.cc): ?tagging on an object or a bucket, GET / PUT / DELETE ---
  Task<void> tagging(Ctx& c);
  // --- CORS (cors_ops.cc) ---
  Task<void> bucket_cors(Ctx& c);
  // OPTIONS: the preflight request, answered without authentication.
  Task<void> preflight(Ctx& c);
  // Fills c.cors_headers for a request with an Origin the bucket's rules allow.
  void add_cors_headers(Ctx& c);

  // --- lifecycle (lifecycle_ops.cc) ---
  Task<void> bucket_lifecycle(Ctx& c);
  // The background worker (a thread when opts.lifecycle_interval_ms > 0) and one pass of it.
  void lifecycle_loop();
  void lifecycle_pass();
  // The versioned part of one rule's pass (noncurrent versions, expired delete markers).
  void lifecycle_versions(const std::string& bucket, const LifecycleRule& rule,
                          const std::string& cursor_key, std::int64_t now, std::int64_t day_ns,
                          std::uint64_t& actions_left, std::uint64_t& scan_left);
  std::thread lc_thread;
  std::mutex lc_mu;
  std::condition_variable lc_cv;
  bool lc_stop = false;
  std::map<std::string, std::string> lc_cursor;  // bucket '\n' rule index -> listing position
  std::atomic<std::uint64_t> lc_expired{0}, lc_aborted{0}, lc_passes{0};

  // --- SSE-C (sse_ops.cc, docs/sse-c.md) ---
  // The customer key of x-amz-server-side-encryption-customer-* (x-amz-copy-source-... when
  // copy_source), nullopt when the request names none. Refused: over plain HTTP unless
  // opts.sse_c_over_http (400 InvalidRequest, as AWS), on a backend that neither stores SSE-C
  // parameters nor passes SSE-C through (NotImplemented), and malformed headers
  // (CustomerKey::parse).
  Result<std::optional<CustomerKey>> request_customer_key(const Ctx& c, bool copy_source);
  // On a backend that passes SSE-C through (storage::ObjectStore::passes_sse_c()): the request's
  // SSE-C headers (copy-source ones when `copy_source`) for the store's *_sse calls, checked by
  // request_customer_key first; empty when the request has none. On any other backend: empty (the
  // S3 layer encrypts there), after the same checks.
  Result<storage::SseCKeyHeaders> passed_sse_c(const Ctx& c, bool copy_source);
  // The key to decrypt object `m` with (nullopt when it is not SSE-C), checked as AWS checks a
  // GET, HEAD or copy source: 400 InvalidRequest when the object needs a key and none came, or a
  // key came for an object without SSE-C; 403 AccessDenied for another key.
  // On a backend that passes SSE-C through: nullopt after request_customer_key's checks (the
  // service behind it checked the key when the object was opened).
  Result<std::optional<CustomerKey>> key_for_read(const Ctx& c, const storage::ObjectMeta& m,
                                                  bool copy_source);
  // The key of an UploadPart / UploadPartCopy into upload `u`: the one CreateMultipartUpload
  // declared (400 InvalidRequest when missing, 400 InvalidArgument when another), or nullopt for
  // an upload without SSE-C (a key for one: 400 InvalidRequest).
  // Passing SSE-C through: nullopt after the checks, as key_for_read.
  Result<std::optional<CustomerKey>> key_for_part(const Ctx& c, const storage::UploadInfo& u);

  // --- GetObjectAttributes (attributes_ops.cc) ---
  Task<void> get_object_attributes(Ctx& c);

  // --- multipart (multipart_ops.cc) ---
  Task<void> create_upload(Ctx& c);
  Task<void> upload_part(Ctx& c);
  Task<void> upload_part_copy(Ctx& c);
  Task<void> complete_upload(Ctx& c);
  // The result a Complete of exactly `parts` produced for c.key, when the key holds that object.
  std::optional<CompleteMultipartResult> completed_by(Ctx& c,
                                                      const std::vector<CompletePart>& parts);
  Task<void> abort_upload(Ctx& c);
  Task<void> list_parts(Ctx& c);

  // --- RDMA data plane (rdma_ops.cc) ---
  // GET/Range GET with x-amz-rdma-token: moves [offset, offset+length) into the client's memory
  // and answers with x-amz-rdma-reply, or declines (501) and serves the body over HTTP.
  Task<void> rdma_get(Ctx& c, storage::ObjectReader& reader, bhttp::status status,
                      http::Fields headers, std::uint64_t offset, std::uint64_t length);
  // The admission of a decoded token before any byte moves (docs/rdma_protocol.md): its nonce is
  // accepted once, and its endpoint is bound to the request's signer (reading the proof from the
  // token's mailbox when the token says it is there). Errors: rdma_token_replayed,
  // rdma_endpoint_unbound (c.rdma_challenge set), slow_down (replay cache full), access_denied.
  Task<Status> admit_token(Ctx& c, const token::Token& t);
  // POST /?rdma-bind with a token (no segments needed): admits it and answers 204, or refuses it
  // as a data request would be (RDMAEndpointNotBound with a challenge). An explicit bind call for
  // clients that prefer to prove before their first transfer.
  Task<void> rdma_bind(Ctx& c);
  // PUT/UploadPart with x-amz-rdma-token: pulls the payload from the client's memory into dst
  // with the same verification as receive_payload. A decline is returned as Errc::rdma_declined.
  Task<Result<PayloadResult>> rdma_receive(Ctx& c, storage::BlobWriter& dst,
                                           std::uint64_t max_bytes,
                                           std::optional<ChecksumAlgo> extra_algo);
  // The body of a request: over RDMA when a token is present, else over HTTP.
  Task<Result<PayloadResult>> receive(Ctx& c, storage::BlobWriter& dst, std::uint64_t max_bytes,
                                      std::optional<ChecksumAlgo> extra_algo);
  // Sends an RDMA decline/failure for a PUT (x-amz-rdma-reply: 501 when declined).
  Task<void> send_put_error(Ctx& c, const Status& st);
};

// --- payload.cc: streaming a request body into a BlobWriter with verification ---

// Checksums the client declared up front (x-amz-checksum-* headers, x-amz-trailer,
// x-amz-sdk-checksum-algorithm, x-amz-checksum-algorithm). Used by the RDMA path too.
struct DeclaredChecksums {
  std::vector<std::pair<ChecksumAlgo, std::string>> header_values;  // base64 values to verify
  std::optional<ChecksumAlgo> trailer_algo;
  std::optional<ChecksumAlgo> requested_algo;
};
Result<DeclaredChecksums> declared_checksums(const Ctx& c);

// Hashes a payload as it streams by (MD5 always, the declared/requested checksums, SHA-256 when
// the request signed a hex payload hash) and verifies everything at the end.
class PayloadDigest {
 public:
  PayloadDigest(const DeclaredChecksums& declared, std::optional<ChecksumAlgo> extra_algo,
                bool want_sha256);
  void update(std::span<const std::byte> data);
  // Verifies the SHA-256 (when `sha256_hex` is non-empty), Content-MD5 (when given) and the
  // expected x-amz-checksum-* values, and returns sizes and digests.
  Result<PayloadResult> finish(std::uint64_t size, std::string_view sha256_hex,
                               const std::optional<std::string>& content_md5,
                               const std::vector<std::pair<ChecksumAlgo, std::string>>& expected);

 private:
  Md5 md5_;
  std::optional<Sha256> sha256_;
  std::vector<Checksummer> sums_;
};

// Runs PayloadDigest::update on a pool thread while the caller writes the same bytes to storage
// (and, over HTTP, receives the next ones): at most one update in flight, so the digest sees
// the bytes in order, once. Without a pool, start() updates inline. The bytes given to start()
// must stay unchanged until wait() returns (reading them meanwhile is fine); the destructor
// waits, so an early return never leaves a job touching freed memory.
// Thread safety: one owner (the request); the pool thread touches only the digest and the bytes.
class OverlappedDigest {
 public:
  OverlappedDigest(PayloadDigest& digest, boost::asio::thread_pool* pool)
      : digest_(digest), pool_(pool) {}
  ~OverlappedDigest() { wait(); }
  OverlappedDigest(const OverlappedDigest&) = delete;
  OverlappedDigest& operator=(const OverlappedDigest&) = delete;
  // Waits for the previous update, then hands `data` to the pool.
  void start(std::span<const std::byte> data);
  // Blocks until the update in flight (if any) has finished.
  void wait();

 private:
  PayloadDigest& digest_;
  boost::asio::thread_pool* pool_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool busy_ = false;
};

// Reads the request body (plain, Transfer-Encoding: chunked, or aws-chunked in any of the
// streaming SigV4 modes) into `dst`, computing MD5 and checksums, and verifies
// x-amz-content-sha256, Content-MD5, chunk signatures and x-amz-checksum-* (header or trailer).
// `extra_algo` adds a checksum to compute even if the client sent none (multipart uploads created
// with an algorithm). With `digest_pool`, a plain body (not aws-chunked) is hashed there, one
// io_buffer_bytes chunk behind the socket (OverlappedDigest), while the next chunk is received
// and this one written.
Task<Result<PayloadResult>> receive_payload(Ctx& c, std::size_t io_buffer_bytes,
                                            storage::BlobWriter& dst, std::uint64_t max_bytes,
                                            std::optional<ChecksumAlgo> extra_algo,
                                            boost::asio::thread_pool* digest_pool = nullptr);

// Sends [offset, offset+length) of reader as the response body (sendfile where possible).
Task<Status> send_object_body(Ctx& c, storage::ObjectReader& reader, std::uint64_t offset,
                              std::uint64_t length, std::size_t buf_bytes);

// --- SSE-C data path (sse_ops.cc) ---
// Encrypts what is appended with AES-256-CTR (key, iv) from byte 0 and appends the ciphertext to
// `inner`, through a bounded buffer of buf_bytes; `data` itself is never modified (a digest may
// read it meanwhile). size() is inner's. Not a store's writer: commit `inner`.
class EncryptingWriter final : public storage::BlobWriter {
 public:
  EncryptingWriter(storage::BlobWriter& inner, const CustomerKey& key, std::string_view iv,
                   std::size_t buf_bytes);
  Status append(std::span<const std::byte> data) override;
  std::uint64_t size() const override { return inner_.size(); }

 private:
  storage::BlobWriter& inner_;
  AesCtr ctr_;
  ScratchBuffer buf_;
};
// A reader of `inner` (an SSE-C object) that decrypts what pread returns and offers no extents.
std::unique_ptr<storage::ObjectReader> decrypting_reader(
    std::unique_ptr<storage::ObjectReader> inner, const CustomerKey& key);
// Fresh SSE-C parameters for an object or upload written with `key`: algorithm, key MD5, a random
// salt and the salted HMAC of the key; a random IV when `with_iv` (single-part objects).
storage::SseCustomer new_sse_params(const CustomerKey& key, bool with_iv);
// Whether `key` is the one `sse` was written with (constant-time HMAC comparison).
inline bool key_matches(const storage::SseCustomer& sse, const CustomerKey& key) {
  return key_matches(sse.salt, sse.key_hmac, key);
}
// x-amz-server-side-encryption-customer-algorithm and -key-MD5 of an SSE-C object (none else).
void add_sse_c_headers(http::Fields& f, const storage::SseCustomer& sse);
// SSE-C and SSE-S3 / SSE-KMS are exclusive, as AWS has them: a request with any
// x-amz-server-side-encryption-customer-* header and x-amz-server-side-encryption (AES256 or
// aws:kms) or an -aws-kms-* header is 400 InvalidArgument "Server Side Encryption with Customer
// provided key is incompatible with the encryption method specified." (copy-source headers do
// not count: they describe the source). Checked before either is looked at.
Status check_sse_exclusive(const Ctx& c);

// The request's Content-MD5, when present, against the body read whole (the bucket documents:
// tagging, policy, CORS, lifecycle): 400 BadDigest, AWS's message, when it differs. AWS
// requires Content-MD5 (or an x-amz-checksum-*) on these calls; it is verified when present.
Status check_content_md5(const Ctx& c, std::string_view body);

// --- object headers (object_ops.cc) ---
// Builds ObjectMeta's user-controlled fields from request headers (Content-Type, x-amz-meta-*,
// ...).
Result<storage::ObjectMeta> meta_from_headers(const Ctx& c);
// Adds an object's standard response headers (ETag, Last-Modified, Content-Type, metadata...).
void add_object_headers(http::Fields& f, const storage::ObjectMeta& m);
std::string quote_etag(std::string_view etag);

// The IAM action ("s3:GetObject") of an S3 operation name ("HeadObject"); "s3:*" if unknown.
std::string_view s3_action_of(std::string_view op);

// --- small conversions shared by the operation files ---
inline std::chrono::system_clock::time_point from_ns(std::int64_t ns) {
  return std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::nanoseconds(ns)));
}
inline std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}
// The parsed If-Match / If-None-Match of a write, as the store's commit precondition.
inline storage::WriteCondition to_storage(const WriteConditionSpec& s) {
  storage::WriteCondition w;
  w.etag = s.etag;
  switch (s.kind) {
    case WriteConditionSpec::Kind::none:
      w.kind = storage::WriteCondition::Kind::none;
      break;
    case WriteConditionSpec::Kind::must_be_absent:
      w.kind = storage::WriteCondition::Kind::must_be_absent;
      break;
    case WriteConditionSpec::Kind::etag_must_match:
      w.kind = storage::WriteCondition::Kind::etag_must_match;
      break;
  }
  return w;
}

// --- copies (object_ops.cc) ---
// Parses x-amz-copy-source ("/bucket/key" or "bucket/key", URL-encoded) into (bucket, key).
Result<std::pair<std::string, std::string>> parse_copy_source(std::string_view src);
// The versionId of x-amz-copy-source ("...?versionId=ID"), nullopt when it names none.
// invalid_argument for another query or an empty id.
Result<std::optional<std::string>> copy_source_version(std::string_view src);
// The request's versionId query parameter: nullopt when absent, invalid_argument when empty.
Result<std::optional<std::string>> version_id_param(const Ctx& c);
// x-amz-copy-source-if-* against the source object; every failure is 412.
Status evaluate_copy_conditions(const Ctx& c, const storage::ObjectMeta& m);
// Copies [offset, offset+length) of reader into w, computing MD5 and the given checksums.
Result<PayloadResult> copy_data(storage::ObjectReader& reader, std::uint64_t offset,
                                std::uint64_t length, storage::BlobWriter& w,
                                const std::vector<ChecksumAlgo>& algos, std::size_t buf_bytes);

}  // namespace objdirect::s3
