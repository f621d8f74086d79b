// Internals of the gateway backend (S3Store, s3_store.hpp), shared by its source files:
//  - s3_http.cc         the upstream requests: libcurl, SigV4 signing, the shared retry policy;
//  - s3_meta.cc         object metadata <-> upstream headers, reply decoding;
//  - s3_spool.hpp       the writers' spool (memory, then a temporary file);
//  - s3_reader.cc       ranged, split and streamed GETs behind ObjectReader;
//  - s3_buckets.cc      buckets and their configuration (versioning passed through);
//  - s3_objects.cc      PutObject, HEAD, DELETE, CopyObject onto itself, ListObjectsV2;
//  - s3_versions.cc     object versions (versionId, delete markers, ListObjectVersions);
//  - s3_multipart.cc    multipart uploads and the upload bookkeeping (templates, kept parts);
//  - s3_tagging.cc      object and bucket tagging, passed through;
//  - s3_capabilities.cc what the upstream was found to do (conditional writes, versioning);
//  - s3_documents.cc    lifecycle and CORS passed through, bucket owners and policies in the
//                       state bucket, and the bounded TTL cache those are read through;
//  - s3_store.cc        open_s3_store, the counters and the metrics.
// Not an interface: only storage/s3 includes it.
#pragma once

#include <curl/curl.h>

#include <array>
#include <atomic>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "auth/sigv4.hpp"
#include "common/retry.hpp"
#include "common/status.hpp"
#include "common/time.hpp"
#include "common/uri.hpp"
#include "s3/documents.hpp"
#include "storage/object_store.hpp"
#include "storage/s3/s3_store.hpp"

namespace objdirect::storage::s3gw {

using Clock = std::chrono::steady_clock;
using Headers = std::vector<std::pair<std::string, std::string>>;  // lower-case names

inline std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

inline std::string trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n'))
    s.remove_suffix(1);
  return std::string(s);
}

inline std::string quote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  out += s;
  out += '"';
  return out;
}

inline std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

inline std::int64_t ns_of(SysTime t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

template <class T>
bool parse_uint(std::string_view s, T& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

// --- counters --------------------------------------------------------------------------------

struct Counters {
  std::atomic<std::uint64_t> requests{0}, get_requests{0}, connections_created{0},
      connections_in_use{0}, connections_peak{0}, pool_waits_timed_out{0}, spooled_to_file{0},
      multipart_commits{0}, retries{0}, capability_probes{0}, gateway_checked_conditions{0},
      kept_part_checksums_used{0}, stream_resumes{0}, document_cache_hits{0}, document_reads{0},
      state_errors{0}, state_list_pages{0};
};

// --- connection pool ---------------------------------------------------------------------------

// One pooled upstream connection: an easy handle driven through its own multi handle, which owns
// the keep-alive connection cache (so the connection survives between requests, and a reader can
// leave a GET half-read and continue it later).
struct Conn {
  CURL* easy = nullptr;
  CURLM* multi = nullptr;
  ~Conn() {
    if (easy) curl_easy_cleanup(easy);
    if (multi) curl_multi_cleanup(multi);
  }
};

// A bounded pool of Conns. Thread-safe.
class Pool {
 public:
  Pool(std::uint32_t max, std::chrono::milliseconds wait, Counters& ctr)
      : max_(max), wait_(wait), ctr_(ctr) {}

  // A free connection; waits up to the pool wait (wait=true) or not at all. slow_down when none.
  Result<std::unique_ptr<Conn>> acquire(bool wait) {
    std::unique_lock lk(mu_);
    auto ready = [&] { return !idle_.empty() || created_ < max_; };
    if (!ready()) {
      if (!wait || !cv_.wait_for(lk, wait_, ready)) {
        if (wait) ctr_.pool_waits_timed_out++;
        return Status(Errc::slow_down, "all " + std::to_string(max_) +
                                           " upstream connections are busy; retry later");
      }
    }
    ctr_.connections_in_use++;
    if (!idle_.empty()) {
      auto c = std::move(idle_.back());
      idle_.pop_back();
      return c;
    }
    ++created_;
    if (created_ > ctr_.connections_peak) ctr_.connections_peak = created_;
    lk.unlock();
    auto c = std::make_unique<Conn>();
    c->easy = curl_easy_init();
    c->multi = curl_multi_init();
    ctr_.connections_created++;
    if (!c->easy || !c->multi) {
      release(nullptr);
      return Status(Errc::internal, "curl_easy_init failed");
    }
    return c;
  }

  // Returns a connection (nullptr: drop it, freeing its slot).
  void release(std::unique_ptr<Conn> c) {
    std::lock_guard lk(mu_);
    ctr_.connections_in_use--;
    if (c) {
      idle_.push_back(std::move(c));
    } else {
      --created_;
    }
    cv_.notify_one();
  }

 private:
  const std::uint32_t max_;
  const std::chrono::milliseconds wait_;
  Counters& ctr_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Conn>> idle_;
  std::uint32_t created_ = 0;
};

// --- requests ----------------------------------------------------------------------------------

// The bytes of a request body: memory, or a range of a file.
struct Body {
  const char* mem = nullptr;
  int fd = -1;
  std::uint64_t offset = 0, length = 0;
  std::uint64_t pos = 0;  // read position within [0, length)
  int error = 0;
};

struct Request {
  std::string method = "GET";
  std::string bucket, key;  // bucket empty: the service; key empty: the bucket
  bool has_key = false;
  Headers query;  // decoded names and values
  Headers headers;
  std::optional<Body> body;
  std::string payload_hash;  // empty: computed from a memory body, or UNSIGNED-PAYLOAD
  // Retry policy (common/retry.hpp) for this request: `retry` off sends it once; `idempotent`
  // off (CompleteMultipartUpload) retries it only after an error answer, never after a lost
  // one (the upstream may have completed it). xml_reply: a 2xx body that does not parse as XML
  // (truncated) is retried.
  bool retry = true;
  bool idempotent = true;
  bool xml_reply = false;
  // A request on the gateway's state bucket (S3StoreOptions::state_bucket): only the gateway's
  // own bookkeeping sets it; any other request naming that bucket is refused before it is sent.
  bool state = false;
};

// A request on the object `key` of `bucket` (has_key: the target is /bucket/key).
inline Request object_request(std::string method, std::string_view bucket, std::string_view key) {
  Request r;
  r.method = std::move(method);
  r.bucket = std::string(bucket);
  r.key = std::string(key);
  r.has_key = true;
  return r;
}

// Makes `xml` (non-empty; it must outlive the call) the request's body, with its Content-MD5
// (which the bucket documents' Put calls require) and Content-Type application/xml.
void set_xml_body(Request& r, const std::string& xml);

// The CreateBucket body naming `region` as LocationConstraint: empty for us-east-1 or no
// region (AWS refuses a LocationConstraint of us-east-1). Set with r.body when non-empty.
std::string create_bucket_configuration(const std::string& region);

struct Response {
  long status = 0;
  Headers headers;
  std::string body;
  std::string retry_note;  // after retries: retry::attempts_note, appended to the error
  std::optional<std::string> header(std::string_view name) const {
    for (const auto& [k, v] : headers)
      if (k == name) return v;
    return std::nullopt;
  }
};

// How a transfer's response body is consumed.
struct Sink {
  virtual ~Sink() = default;
  // Called once when the first body byte (or the end) arrives, with the status and headers.
  // Returning false aborts the transfer.
  virtual bool start(const Response& head) = 0;
  // Body bytes; returns n, or CURL_WRITEFUNC_PAUSE, or 0 to abort.
  virtual std::size_t data(const char* p, std::size_t n) = 0;
};

// Bounded collection into Response::body.
struct StringSink : Sink {
  Response* r;
  std::size_t max;
  bool overflow = false;
  StringSink(Response* resp, std::size_t m) : r(resp), max(m) {}
  bool start(const Response&) override { return true; }
  std::size_t data(const char* p, std::size_t n) override {
    if (r->body.size() + n > max) {
      overflow = true;
      return 0;
    }
    r->body.append(p, n);
    return n;
  }
};

// The state libcurl's callbacks see during one transfer.
struct Transfer {
  Response resp;
  Sink* sink = nullptr;
  bool started = false;
  bool aborted_by_sink = false;
  Body* body = nullptr;
};
// The upstream's <Error> body (or its status, for bodiless replies) as a Status.
Status upstream_error(const Response& r, std::string_view what);

// --- the shared core ---------------------------------------------------------------------------

struct Core {
  S3StoreOptions opts;
  std::string base;       // "http://host:port"
  std::string authority;  // "host:port" as the Host header
  Counters ctr;
  // The upstream signing keys: derived once per (date, region, service), not per request (the
  // four HMACs of the chain cost more than signing one request). Thread-safe, bounded.
  sigv4::SigningKeyCache signing_keys;
  std::unique_ptr<Pool> pool;
  std::unique_ptr<retry::Retrier> retrier_ptr;  // from opts.retry, set by open_s3_store
  retry::Retrier& retrier() { return *retrier_ptr; }
  std::mutex templates_mu;
  std::unordered_map<std::string, UploadInfo> templates;  // upload id -> create_upload's info
  std::deque<std::string> template_order;
  // Part checksums the gateway keeps itself (upload id -> part number -> upstream ETag and the
  // checksums the S3 layer computed), for upstreams whose ListParts does not return them. Only
  // for uploads with a template; at most kept_parts_max parts in all (under templates_mu).
  struct KeptPart {
    std::string etag;
    ChecksumMap sums;
  };
  std::unordered_map<std::string, std::map<std::uint32_t, KeptPart>> kept_parts;
  std::size_t kept_parts_count = 0;
  // What the upstream was found to do (probed once, at the first conditional write; see
  // conditions_checked_upstream). nullopt: not known yet.
  std::mutex caps_mu;
  std::optional<bool> put_conditions, complete_conditions;
  bool put_if_match_unquoted = false;  // found by the PutObject probe
  // Whether the upstream keeps versions: learnt from its answers to the versioning calls
  // (NotImplemented: no); nullopt until one answered.
  std::optional<bool> versioning;
  // Whether the upstream keeps object tags: learnt from its answers to the tagging calls, or
  // asked with one GetBucketTagging before the first write that carries tags; nullopt until then.
  std::optional<bool> tagging;
  // Whether the upstream keeps bucket tags: learnt from its answers to the bucket tagging calls
  // (the tagging probe is one); nullopt until one answered.
  std::optional<bool> bucket_tagging;
  // Whether the upstream keeps lifecycle configurations / CORS configurations: learnt from its
  // answers to those calls (NotImplemented: no); nullopt until one answered.
  std::optional<bool> lifecycle, cors;
  // Whether the upstream keeps SSE-C: learnt from its answers to requests with SSE-C headers
  // (NotImplemented, or a write answered without x-amz-server-side-encryption-customer-algorithm:
  // no; a write that names it: yes); nullopt until one answered. Once no, passes_sse_c() is false.
  std::optional<bool> sse_c;
  // The bucket documents read through the cache (s3_documents.cc): bucket '\n' name -> the
  // document (nullopt: the bucket has none) and when it was read. At most
  // opts.document_cache_entries, the least recently used dropped first; an entry older than
  // opts.document_cache_ttl_ms is read again. docs_generation moves on every write through this
  // gateway, so that a read that raced with the write does not cache what it read.
  struct CachedDoc {
    std::optional<std::string> doc;
    Clock::time_point read_at;
    std::list<std::string>::iterator lru;
  };
  std::mutex docs_mu;
  std::unordered_map<std::string, CachedDoc> docs;
  std::list<std::string> docs_lru;  // most recently used first
  std::uint64_t docs_generation = 0;
  // Striped per-key locks: while the gateway checks a write condition itself, the check and the
  // write of one key through this gateway do not interleave with another such write.
  static constexpr std::size_t kKeyLockStripes = 4096;
  std::array<std::mutex, kKeyLockStripes> key_locks;
  std::mutex& key_lock(std::string_view bucket, std::string_view key) {
    const std::size_t h = std::hash<std::string>{}(std::string(bucket) + '/' + std::string(key));
    return key_locks[h % kKeyLockStripes];
  }
  std::string target(const Request& r) const {
    std::string t = "/";
    if (!r.bucket.empty()) {
      t += uri_encode(r.bucket, true);
      if (r.has_key) {
        t += '/';
        t += uri_encode(r.key, false);
      }
    }
    for (std::size_t i = 0; i < r.query.size(); ++i) {
      t += i == 0 ? '?' : '&';
      t += uri_encode(r.query[i].first, true);
      if (!r.query[i].second.empty() || r.query[i].first != "uploads") {
        t += '=';
        t += uri_encode(r.query[i].second, true);
      }
    }
    return t;
  }
  // Sets up conn for `r` (method, URL, signed headers, body) and returns the curl header list.
  curl_slist* prepare(Conn& c, Request& r, Transfer& t, const std::string& tgt);
  // Drives conn's transfer until it ends; returns the curl result.
  static CURLcode drive(Conn& c);
  Status transport_error(CURLcode rc, std::string_view what) const;
  // One complete request on a pooled connection, under the retry policy shared with the client
  // library (common/retry.hpp; AWS_MAX_ATTEMPTS / AWS_RETRY_MODE or the upstream profile's
  // max_attempts / retry_mode): a retryable failure (retry::classify_status, a refused or reset
  // connection, a cut body, a truncated XML reply) is sent again after the back-off (Retry-After
  // honoured) while attempts remain. With a caller's sink, only error replies and failures
  // before any body byte reached the sink are retried (a body cut after data reached the sink
  // is returned: the caller's reader fails and the gateway's client retries). The final error
  // names the attempts.
  // `attempts_out`, when given, receives the number of attempts made.
  Result<Response> perform(Request r, Sink* sink = nullptr,
                           std::size_t body_max = s3_limits::xml_reply_bytes_max,
                           std::uint32_t* attempts_out = nullptr);
  // The retry reason of a transport failure (the names of common/retry.hpp).
  static std::optional<std::string> curl_retry_reason(CURLcode rc);
  Result<Response> perform_once(Request& r, Sink* sink, std::size_t body_max, bool& started,
                                std::optional<std::string>& reason);
  // perform() that also maps a non-2xx status to the upstream's error (perform retries under the
  // shared policy; the final error names the attempts). `attempts_out`,
  // when given, receives the number of attempts made.
  Result<Response> call(Request r, std::uint32_t* attempts_out = nullptr);
  void remember_template(const std::string& id, UploadInfo info);
  std::optional<UploadInfo> find_template(const std::string& id);
  void forget_template(const std::string& id);
  void drop_kept_parts(const std::string& id);
  // Keeps a committed part's checksums (only for an upload this process created).
  void keep_part(const std::string& id, std::uint32_t number, const std::string& etag,
                 const ChecksumMap& sums);
  // Whether a part's checksums can be kept (true when there is nothing to keep, no template, a
  // free slot, or the part is kept already and is being replaced).
  bool may_keep_part(const std::string& id, std::uint32_t number, const ChecksumMap& sums);
  // The kept checksums of a part, if its ETag is still the one they were kept for.
  std::optional<ChecksumMap> kept_part(const std::string& id, std::uint32_t number,
                                       const std::string& etag);
};

// --- metadata and replies (s3_meta.cc) ---------------------------------------------------------

void add_meta_headers(Headers& h, const ObjectMeta& m);
void add_checksum_headers(Headers& h, const ChecksumMap& sums);
// `unquoted`: the ETag of If-Match without its quotes (radosgw 16 compares PutObject's If-Match
// with the bare ETag and answers 412 to the quoted form that S3 specifies).
void add_condition(Headers& h, const WriteCondition& cond, bool unquoted = false);
// The object's metadata from a HEAD or GET reply (meta.sse: the algorithm and key MD5 of the
// reply's x-amz-server-side-encryption-customer-* headers, nothing else).
ObjectMeta meta_from_head(std::string_view key, const Response& r);
// The SSE-C headers `sse` on a request (x-amz-copy-source-server-side-encryption-customer-* when
// `copy_source`); nothing when it is not present. They are signed as any header and never
// logged.
void add_sse_c_headers(Headers& h, const SseCKeyHeaders& sse, bool copy_source = false);
// The algorithm and key MD5 of a write's reply (PutObject, CreateMultipartUpload, Complete).
SseCustomer sse_c_of_reply(const Response& r);

// A reply document decoded with the shared codecs (s3/documents.hpp). An <Error> document (S3
// may send one inside a 200) becomes the upstream's Status; a reply the decoder refuses is an
// io_error naming the call.
template <typename T>
Result<T> decode_reply(const Response& r, std::string_view what,
                       Result<T> (*decode)(std::string_view)) {
  if (r.body.find("<Error") != std::string::npos && objdirect::s3::decode_error(r.body).ok()) {
    return upstream_error(r, what);
  }
  Result<T> doc = decode(r.body);
  if (!doc.ok()) {
    return Status(Errc::io_error, "upstream " + std::string(what) +
                                      ": reply is not valid: " + doc.status().message());
  }
  return doc;
}

// The x-amz-copy-source of CopyObject: "/bucket/key", "?versionId=ID" added when not empty.
std::string copy_source(std::string_view bucket, std::string_view key, std::string_view version_id);
// `s` URL-decoded when `url` (encoding-type=url listings).
std::string decoded(std::string_view s, bool url);

class SpoolWriter;

// An ObjectReader over one upstream object (s3_reader.cc); `meta` comes from its HEAD. Every GET
// names `version_id` when it is not empty (a version opened by id), the latest otherwise.
// `sse`: the SSE-C headers every GET carries (the reader keeps them until it is destroyed).
std::unique_ptr<ObjectReader> make_reader(std::shared_ptr<Core> core, std::string bucket,
                                          ObjectMeta meta, std::string version_id = "",
                                          SseCKeyHeaders sse = SseCKeyHeaders());

// --- the store ---------------------------------------------------------------------------------

class S3Store final : public ObjectStore {
 public:
  explicit S3Store(std::shared_ptr<Core> core) : core_(std::move(core)) {}
  const Counters& counters() const { return core_->ctr; }
  std::uint64_t signing_key_derivations() const { return core_->signing_keys.derivations(); }
  Status create_bucket(const BucketInfo& info) override;
  Status delete_bucket(std::string_view bucket) override;
  Result<BucketInfo> head_bucket(std::string_view bucket) override;
  Result<std::vector<BucketInfo>> list_buckets() override;
  Result<std::unique_ptr<BlobWriter>> begin_write(std::string_view bucket) override;
  Result<ObjectMeta> commit_object(std::string_view bucket, ObjectMeta meta,
                                   std::unique_ptr<BlobWriter> data,
                                   const WriteCondition& cond) override;
  Result<ObjectMeta> replace_meta(std::string_view bucket, ObjectMeta meta,
                                  std::string_view expected_etag) override;
  Result<Response> head_call(std::string_view bucket, std::string_view key,
                             std::string_view if_none_match,
                             const SseCKeyHeaders& sse = SseCKeyHeaders());
  Result<ObjectMeta> head_object(std::string_view bucket, std::string_view key) override;
  Result<std::optional<ObjectMeta>> revalidate(std::string_view bucket, std::string_view key,
                                               std::string_view etag) override;
  Result<std::unique_ptr<ObjectReader>> open_object(std::string_view bucket,
                                                    std::string_view key) override;
  Status delete_object(std::string_view bucket, std::string_view key) override;
  Result<ListResult> list_objects(std::string_view bucket, const ListQuery& q) override;
  Result<std::string> create_upload(std::string_view bucket, const UploadInfo& info) override;
  Result<UploadInfo> get_upload(std::string_view bucket, std::string_view key,
                                std::string_view upload_id) override;
  Result<PartInfo> commit_part(std::string_view bucket, std::string_view key,
                               std::string_view upload_id, PartInfo info,
                               std::unique_ptr<BlobWriter> data) override;
  Result<std::vector<PartInfo>> list_parts(std::string_view bucket, std::string_view key,
                                           std::string_view upload_id,
                                           std::uint32_t part_number_marker,
                                           std::uint32_t max_parts) override;
  Result<ObjectMeta> complete_upload(std::string_view bucket, std::string_view upload_id,
                                     ObjectMeta meta, const std::vector<CompletePartRef>& parts,
                                     const WriteCondition& cond) override;
  Status abort_upload(std::string_view bucket, std::string_view key,
                      std::string_view upload_id) override;
  Result<ListUploadsResult> list_uploads(std::string_view bucket,
                                         const ListUploadsQuery& q) override;

  // SSE-C, passed through (s3_objects.cc, s3_multipart.cc, s3_versions.cc): the headers go with
  // the upstream requests of each call (HEAD, every ranged GET of the reader, PutObject or each
  // request of the parallel multipart upload, CreateMultipartUpload, UploadPart, Complete) and
  // the upstream's answers come back as it gave them. The plain calls are these with no headers.
  // An open without a key of an object whose HEAD names SSE-C is refused here too (400
  // InvalidRequest, as AWS), for upstreams that would serve it. A write whose reply does not
  // confirm the encryption is removed again and not_implemented; that, or a NotImplemented
  // answer, is remembered (Core::sse_c), and then passes_sse_c() is false.
  bool passes_sse_c() const override;
  Result<std::unique_ptr<ObjectReader>> open_object_sse(std::string_view bucket,
                                                        std::string_view key,
                                                        std::string_view version_id,
                                                        const SseCKeyHeaders& sse) override;
  Result<ObjectMeta> head_object_sse(std::string_view bucket, std::string_view key,
                                     std::string_view version_id,
                                     const SseCKeyHeaders& sse) override;
  Result<ObjectMeta> commit_object_sse(std::string_view bucket, ObjectMeta meta,
                                       std::unique_ptr<BlobWriter> data, const WriteCondition& cond,
                                       const SseCKeyHeaders& sse) override;
  Result<std::string> create_upload_sse(std::string_view bucket, const UploadInfo& info,
                                        const SseCKeyHeaders& sse) override;
  Result<PartInfo> commit_part_sse(std::string_view bucket, std::string_view key,
                                   std::string_view upload_id, PartInfo info,
                                   std::unique_ptr<BlobWriter> data,
                                   const SseCKeyHeaders& sse) override;
  Result<ObjectMeta> complete_upload_sse(std::string_view bucket, std::string_view upload_id,
                                         ObjectMeta meta, const std::vector<CompletePartRef>& parts,
                                         const WriteCondition& cond,
                                         const SseCKeyHeaders& sse) override;

  // Versioning, passed through (s3_versions.cc): the upstream keeps the versions; where it
  // answers NotImplemented the gateway remembers that and answers not_implemented itself.
  bool supports_versioning() const override { return true; }
  Result<ObjectMeta> head_object_version(std::string_view bucket, std::string_view key,
                                         std::string_view version_id) override;
  // head_object_version's body; *latest_is_null is set when the upstream refused versionId=null
  // and the latest version, which carries no version id, was returned as the null version.
  Result<ObjectMeta> head_version(std::string_view bucket, std::string_view key,
                                  std::string_view version_id, bool* latest_is_null,
                                  const SseCKeyHeaders& sse = SseCKeyHeaders());
  Result<std::unique_ptr<ObjectReader>> open_object_version(std::string_view bucket,
                                                            std::string_view key,
                                                            std::string_view version_id) override;
  Result<DeleteOutcome> delete_object_version(std::string_view bucket, std::string_view key,
                                              std::string_view version_id) override;
  Result<ListVersionsResult> list_object_versions(std::string_view bucket,
                                                  const ListVersionsQuery& q) override;
  // Bucket configuration (s3_buckets.cc, s3_documents.cc): "versioning" goes to
  // Put/GetBucketVersioning, "lifecycle" and "cors" to the upstream's lifecycle and CORS calls
  // (the upstream keeps them; lifecycle is never in head_bucket's config, so the S3 layer's
  // lifecycle worker leaves gateway buckets to the upstream), "policy" to an object in the state
  // bucket (not_implemented without one). bucket_config reads "cors" and "policy" through the
  // document cache; head_bucket carries the owner and "policy" from it.
  Status set_bucket_config(std::string_view bucket, std::string_view name,
                           std::string document) override;
  Result<std::optional<std::string>> bucket_config(std::string_view bucket,
                                                   std::string_view name) override;
  // Object tagging, passed through (s3_tagging.cc): Put/Get/DeleteObjectTagging (versionId
  // included) and x-amz-tagging on PutObject and CreateMultipartUpload go to the upstream, which
  // keeps the tags; HEAD does not carry them (tags_in_meta false). Where the upstream answers
  // NotImplemented the gateway remembers it and answers not_implemented itself.
  bool tags_in_meta() const override { return false; }
  Result<ObjectMeta> set_object_tags(std::string_view bucket, std::string_view key,
                                     TagSet tags) override;
  Result<ObjectMeta> set_object_version_tags(std::string_view bucket, std::string_view key,
                                             std::string_view version_id, TagSet tags) override;
  Result<ObjectMeta> get_object_version_tags(std::string_view bucket, std::string_view key,
                                             std::string_view version_id) override;
  // Bucket tagging, passed through the same way (s3_tagging.cc): Put/Get/DeleteBucketTagging go
  // to the upstream; head_bucket carries no tags, so get_bucket_tags asks (NoSuchTagSet: none).
  Status set_bucket_tags(std::string_view bucket, TagSet tags) override;
  Result<TagSet> get_bucket_tags(std::string_view bucket) override;

 private:
  // One upstream call whose reply is an XML document, decoded by `decode`; an <Error> reply
  // becomes its Status.
  template <typename T>
  Result<T> call_xml(Request r, std::string_view what, Result<T> (*decode)(std::string_view)) {
    r.xml_reply = true;
    auto resp = core_->call(std::move(r));
    if (!resp.ok()) return resp.status();
    return decode_reply(*resp, what, decode);
  }
  Status upload_error(std::string_view bucket, Status st);
  bool upstream_checks(std::string_view bucket, bool complete);
  static std::string probe_key();
  Result<bool> probe_put_conditions(std::string_view bucket);
  Result<bool> probe_complete_conditions(std::string_view bucket);
  Status check_condition(std::string_view bucket, std::string_view key, const WriteCondition& cond);
  Request part_request(std::string_view bucket, std::string_view key, std::string_view upload_id,
                       std::uint32_t number) const;
  // PutObject / a parallel multipart upload of the spooled data: the upstream's ETag, and in
  // *version_id the x-amz-version-id it answered (empty without one).
  // With SSE-C headers (`sse` present), every request carries them.
  Result<std::string> single_put(std::string_view bucket, const ObjectMeta& meta,
                                 const SpoolWriter& w, const WriteCondition& cond,
                                 std::string* version_id, const SseCKeyHeaders& sse);
  Result<std::string> multipart_put(std::string_view bucket, const ObjectMeta& meta,
                                    const SpoolWriter& w, const WriteCondition& cond,
                                    std::string* version_id, const SseCKeyHeaders& sse);
  Result<std::string> complete(std::string_view bucket, std::string_view key,
                               std::string_view upload_id,
                               const std::vector<std::pair<std::uint32_t, std::string>>& named,
                               const std::vector<PartInfo>& infos, const WriteCondition& cond,
                               std::string* version_id = nullptr,
                               const SseCKeyHeaders& sse = SseCKeyHeaders());
  // SSE-C capability (s3_capabilities.cc): not_implemented once the upstream was found to keep
  // no SSE-C and `sse` is present (ok otherwise); note_sse_c remembers a NotImplemented answer
  // to a request with `sse` and returns `st`; sse_c_confirmed checks that a write's reply
  // confirms the encryption (remembering yes or no) and is not_implemented when it does not.
  Status sse_c_known_missing(const SseCKeyHeaders& sse) const;
  Status note_sse_c(const SseCKeyHeaders& sse, Status st);
  Status sse_c_confirmed(const SseCKeyHeaders& sse, const Response& r, std::string_view what);
  // not_implemented once the upstream was found to keep no versions (ok otherwise).
  Status versioning_known_missing() const;
  // Remembers what a versioning call's answer says about the upstream: not_implemented means
  // it keeps no versions, success that it does. Returns `st`.
  Status note_versioning(Status st);
  // Before a write that carries tags (x-amz-tagging): not_implemented when the upstream is known
  // to keep no tags; when that is not known yet, one GetBucketTagging of `bucket` asks it
  // (NotImplemented: no; a tag set or NoSuchTagSet: yes; anything else: not known, the write goes
  // on).
  Status tagging_available(std::string_view bucket);
  // As note_versioning, for the tagging calls; tagging_known_missing answers not_implemented
  // without an upstream call once the upstream said it keeps no object tags.
  Status note_tagging(Status st);
  Status tagging_known_missing();
  // As note_tagging, for the bucket tagging calls; bucket_tagging_known_missing answers
  // not_implemented without an upstream call once the upstream said it keeps no bucket tags.
  Status note_bucket_tagging(Status st);
  Status bucket_tagging_known_missing();
  // The mechanism under the three above, for one of Core's learnt flags (`cap`): note_capability
  // remembers what an answer says (not_implemented: no; success: yes) and returns `st`;
  // capability_known_missing is not_implemented ("The gateway's upstream does not keep " +
  // `what`) once the upstream said no.
  Status note_capability(std::optional<bool> Core::*cap, Status st);
  Status capability_known_missing(std::optional<bool> Core::*cap, std::string_view what) const;

 public:
  // --- documents (s3_documents.cc) ---
  // At open, with a state bucket: HEAD it, create it when missing.
  Status ensure_state_bucket();
  // ListBuckets at the upstream, the state bucket left out, owners not filled in.
  Result<std::vector<BucketInfo>> upstream_buckets();

 private:
  // The upstream's lifecycle / CORS document of `bucket` (nullopt: none), re-encoded canonical.
  Result<std::optional<std::string>> fetch_lifecycle(std::string_view bucket);
  Result<std::optional<std::string>> fetch_cors(std::string_view bucket);
  Status store_lifecycle(std::string_view bucket, const std::string& document);
  Status store_cors(std::string_view bucket, const std::string& document);
  // The state object `name` ("owner", "policy") of `bucket` (nullopt: absent), and its write
  // (empty: delete).
  Result<std::optional<std::string>> fetch_state(std::string_view bucket, std::string_view name);
  Status store_state(std::string_view bucket, std::string_view name, const std::string& document,
                     bool if_absent = false);
  // Document `name` of `bucket` through the cache: a fresh entry, or read (fresh: always read)
  // and remembered.
  Result<std::optional<std::string>> cached_document(std::string_view bucket, std::string_view name,
                                                     bool fresh = false);
  // Drops the cached documents of `bucket` (after a write through this gateway).
  void forget_documents(std::string_view bucket);
  // Puts a read document into the cache (docs_mu held; nothing with a TTL of 0).
  void remember_document(const std::string& key, std::optional<std::string> doc);
  // list_buckets' owners: from the cache, else from a paged LIST of the state bucket.
  Status fill_owners(std::vector<BucketInfo>& buckets);
  Status drop_owner_index(std::string_view bucket);
  // create_bucket / delete_bucket with a state bucket: the owner record around the upstream call.
  Status create_owned_bucket(const BucketInfo& info);
  void drop_bucket_state(std::string_view bucket);
  Status create_upstream_bucket(const BucketInfo& info);

  std::shared_ptr<Core> core_;
};

}  // namespace objdirect::storage::s3gw
