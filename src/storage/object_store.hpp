// ObjectStore: the storage boundary of objdirect-server.
//
// The S3 layer parses and validates requests, computes ETags and checksums, and then calls this
// interface. A backend stores bytes and metadata atomically and durably; it never sees HTTP.
// The embedded default is storage/local (LMDB metadata + one file per blob); RADOS and an
// upstream-S3 gateway slot in behind the same interface.
//
// Contract shared by every backend:
//  - Atomicity: an object (or part) becomes visible only in commit_*(), all at once, after its data
//    and metadata are durable. A writer dropped without commit leaves no trace.
//  - Strong consistency: once commit_*() returns, every later head/open/list sees the result.
//  - Readers are snapshots: an open ObjectReader keeps returning the version it opened, even if
//    the key is overwritten or deleted meanwhile.
//  - Keys are opaque byte strings (up to limits::key_bytes_max). A backend must never derive a
//    filesystem path from a key.
//
// Thread safety: ObjectStore implementations are fully thread-safe. BlobWriter and ObjectReader
// objects are used by one thread at a time.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.hpp"

namespace objdirect::storage {

// Checksums are stored as the S3 wire form: algorithm name ("CRC32", "CRC32C", "CRC64NVME",
// "SHA1", "SHA256") -> base64 value. Multipart objects store the composite "base64-N" form.
using ChecksumMap = std::map<std::string, std::string>;

// Tags of an object or bucket (x-amz-tagging, PutObjectTagging, PutBucketTagging): key -> value
// pairs in the order the client gave them, keys unique (the S3 layer validates them).
using TagSet = std::vector<std::pair<std::string, std::string>>;

// One part of a multipart upload, as committed.
struct PartInfo {
  std::uint32_t part_number = 0;
  std::uint64_t size = 0;
  std::string etag;  // hex MD5, unquoted
  std::int64_t mtime_ns = 0;
  ChecksumMap checksums;
  // SSE-C (docs/sse-c.md): the part's 16-byte random AES-CTR IV when its upload is encrypted
  // with a customer key; empty otherwise. Never the key.
  std::string sse_iv;

  bool operator==(const PartInfo&) const = default;
};

// SSE-C parameters of an object or upload (docs/sse-c.md). The S3 layer encrypts and decrypts;
// a store only persists these fields. They never hold the customer's key: only the MD5 the
// client sent (returned as AWS returns it) and a salted HMAC-SHA256 that verifies later keys.
struct SseCustomer {
  std::string algorithm;  // "AES256"; empty: the object is not SSE-C encrypted
  std::string key_md5;    // base64 of the key's MD5, as the client sent it
  std::string salt;       // 16 random bytes
  std::string key_hmac;   // HMAC-SHA256(salt, key): 32 bytes
  // 16-byte AES-CTR IV of a single-part object; empty for an upload's template and for a
  // multipart object, whose parts carry their own (PartInfo::sse_iv).
  std::string iv;

  bool enabled() const { return !algorithm.empty(); }
  bool operator==(const SseCustomer&) const = default;
};

// The SSE-C headers of one request, for a backend that passes SSE-C through to another S3
// service (ObjectStore::passes_sse_c(), the gateway): the three values of
// x-amz-server-side-encryption-customer-{algorithm,key,key-MD5}, or of the
// x-amz-copy-source-server-side-encryption-customer-* ones for the source of a copy. The S3 layer
// fills it only after its own checks (a well-formed key whose MD5 matches, a secure transport or
// --sse-c-over-http, no other server-side encryption) and only for such a backend.
// Request-scoped: a store sends it with the request it was given for and keeps it no longer than
// the call (an ObjectReader that it opens with one keeps a copy for its own GETs, until it is
// destroyed); it never persists, logs, caches or puts it into an error message. Destruction
// wipes the three values.
struct SseCKeyHeaders {
  std::string algorithm;  // "AES256"
  std::string key;        // base64 of the 32 key bytes
  std::string key_md5;    // base64 of the key's MD5

  SseCKeyHeaders() = default;
  SseCKeyHeaders(std::string a, std::string k, std::string m)
      : algorithm(std::move(a)), key(std::move(k)), key_md5(std::move(m)) {}
  SseCKeyHeaders(const SseCKeyHeaders&) = default;
  SseCKeyHeaders& operator=(const SseCKeyHeaders& o) {
    if (this != &o) {
      wipe();
      algorithm = o.algorithm;
      key = o.key;
      key_md5 = o.key_md5;
    }
    return *this;
  }
  ~SseCKeyHeaders() { wipe(); }
  // Whether the request carried them (then all three are set).
  bool present() const { return !key.empty(); }

 private:
  void wipe() {
    for (std::string* s : {&algorithm, &key, &key_md5}) {
      volatile char* p = s->data();
      for (std::size_t i = 0; i < s->size(); ++i) p[i] = 0;
    }
  }
};

// Everything S3 returns about an object besides its bytes.
struct ObjectMeta {
  std::string key;
  std::uint64_t size = 0;
  std::string etag;  // unquoted: "hex-md5" or "hex-md5-N" for multipart
  std::int64_t mtime_ns = 0;
  std::string content_type;
  std::string content_encoding;
  std::string content_disposition;
  std::string content_language;
  std::string cache_control;
  std::string expires;
  // x-amz-meta-* with the prefix stripped and the name lower-cased; values kept byte-exact.
  std::vector<std::pair<std::string, std::string>> user_meta;
  ChecksumMap checksums;
  // For multipart objects: the parts in order (size, etag, checksums; used for partNumber GETs
  // and composite checksums). Empty for single-PUT objects.
  std::vector<PartInfo> parts;
  std::string owner;  // access key of the writer
  TagSet tags;        // object tags; an upload's meta_template carries those of x-amz-tagging
  SseCustomer sse;    // SSE-C parameters (docs/sse-c.md); an upload's meta_template has them too
  // Versioning (docs/versioning.md), filled in by the store, never stored in meta_fields: the
  // version's id ("null" for the null version of a versioned bucket; empty in a bucket that was
  // never versioned and from backends without versioning), and whether it is a delete marker
  // (then size is 0 and only key, mtime_ns and owner are meaningful).
  std::string version_id;
  bool delete_marker = false;

  bool operator==(const ObjectMeta&) const = default;
};

// The bucket config document (BucketInfo::config) that holds the versioning state, and its two
// values. Absent: the bucket was never versioned. (AWS never returns a bucket to that state.)
inline constexpr std::string_view versioning_config_name = "versioning";
inline constexpr std::string_view versioning_enabled = "Enabled";
inline constexpr std::string_view versioning_suspended = "Suspended";

// What DeleteObject did (x-amz-version-id, x-amz-delete-marker).
struct DeleteOutcome {
  std::string version_id;      // the version removed or the marker written; empty if neither
  bool delete_marker = false;  // a marker was written, or the version removed was one
};

// One entry of ListObjectVersions.
struct ObjectVersion {
  ObjectMeta meta;  // without parts; meta.version_id and meta.delete_marker set
  bool is_latest = false;
  // When the next newer version was written (the moment this one became noncurrent); 0 for the
  // latest. Lifecycle's NoncurrentVersionExpiration counts from here.
  std::int64_t noncurrent_since_ns = 0;
};

struct ListVersionsQuery {
  std::string prefix;
  std::string delimiter;
  std::string key_marker;         // keys <= key_marker are skipped, unless version_id_marker
  std::string version_id_marker;  // then: the versions of key_marker up to this one are skipped
  std::uint32_t max_keys = 1000;
};

struct ListVersionsResult {
  std::vector<ObjectVersion> versions;  // key ascending, then newest first
  std::vector<std::string> common_prefixes;
  bool truncated = false;
  std::string next_key_marker;         // when truncated
  std::string next_version_id_marker;  // when truncated after a version (not a common prefix)
};

struct BucketInfo {
  std::string name;
  std::int64_t ctime_ns = 0;
  std::string owner;
  std::string region;
  TagSet tags;  // bucket tags (PutBucketTagging)
  // The bucket's stored configuration documents by subresource name ("cors", ...), each as the
  // S3 layer encodes it; absent names are unset. Set with set_bucket_config.
  std::map<std::string, std::string> config;

  bool operator==(const BucketInfo&) const = default;
};

// Preconditions applied atomically at commit time (conditional writes).
struct WriteCondition {
  enum class Kind { none, must_be_absent, etag_must_match };
  Kind kind = Kind::none;
  std::string etag;  // unquoted, for etag_must_match
};

// In-progress data of one object or part. Appends are sequential. Dropping the writer without
// committing it discards the data (temporary file removed).
class BlobWriter {
 public:
  virtual ~BlobWriter() = default;
  // Appends bytes. Fails with no_space / io_error; after an error the writer is unusable.
  // `data` is often a registered RDMA staging buffer: a backend may hand it to its I/O layer
  // without copying (storage/rados wraps it as a static bufferlist), but must be done with it
  // when append returns, since the caller then reuses the buffer.
  virtual Status append(std::span<const std::byte> data) = 0;
  // Bytes appended so far.
  virtual std::uint64_t size() const = 0;
};

// A contiguous file region that backs part of an object, for zero-copy sendfile. The fd stays
// valid for the reader's lifetime.
struct Extent {
  int fd = -1;
  std::uint64_t file_offset = 0;
  std::uint64_t length = 0;
};

// A snapshot of one object version, open for reading.
class ObjectReader {
 public:
  virtual ~ObjectReader() = default;
  virtual const ObjectMeta& meta() const = 0;
  // Reads up to dst.size() bytes at `offset` into dst; returns bytes read (short only at EOF).
  // dst may be a registered staging buffer that the server then RDMA-writes to the client.
  virtual Result<std::size_t> pread(std::span<std::byte> dst, std::uint64_t offset) = 0;
  // The file regions that hold [offset, offset+length), for sendfile. Empty when the backend
  // has no file descriptors (then use pread).
  virtual Result<std::vector<Extent>> extents(std::uint64_t offset, std::uint64_t length) = 0;
};

struct ListQuery {
  std::string prefix;
  std::string delimiter;    // empty: no grouping
  std::string start_after;  // exclusive; also used for marker / continuation token
  std::uint32_t max_keys = 1000;
};

struct ListResult {
  std::vector<ObjectMeta> objects;           // in lexicographic (byte) order of key
  std::vector<std::string> common_prefixes;  // in order, each ends with the delimiter
  bool truncated = false;
  // When truncated: the last key or common prefix returned; pass it back as start_after.
  std::string next_marker;
};

struct UploadInfo {
  std::string key;
  std::string upload_id;
  std::int64_t initiated_ns = 0;
  ObjectMeta meta_template;        // content-type, user metadata, checksum algorithm, owner
  std::string checksum_algorithm;  // "" or e.g. "CRC32C" (from x-amz-checksum-algorithm)

  bool operator==(const UploadInfo&) const = default;
};

struct ListUploadsQuery {
  std::string prefix;
  std::string delimiter;
  std::string key_marker;
  std::string upload_id_marker;
  std::uint32_t max_uploads = 1000;
};

struct ListUploadsResult {
  std::vector<UploadInfo> uploads;  // ordered by (key, initiated time, upload id)
  std::vector<std::string> common_prefixes;
  bool truncated = false;
  std::string next_key_marker;
  std::string next_upload_id_marker;
};

// Which parts a CompleteMultipartUpload assembles, in order, with the ETags the client named.
struct CompletePartRef {
  std::uint32_t part_number = 0;
  std::string etag;  // unquoted
};

class ObjectStore {
 public:
  virtual ~ObjectStore() = default;

  // --- buckets ---
  // bucket_already_owned_by_you if it exists with the same owner, bucket_already_exists otherwise.
  virtual Status create_bucket(const BucketInfo& info) = 0;
  // no_such_bucket, or bucket_not_empty while objects exist. Aborts leftover multipart uploads.
  virtual Status delete_bucket(std::string_view bucket) = 0;
  virtual Result<BucketInfo> head_bucket(std::string_view bucket) = 0;
  // All buckets in name order.
  virtual Result<std::vector<BucketInfo>> list_buckets() = 0;

  // --- objects ---
  // Starts writing data for a new object in `bucket` (no_such_bucket if absent).
  virtual Result<std::unique_ptr<BlobWriter>> begin_write(std::string_view bucket) = 0;
  // The same, for data that will most likely be committed under `key` (the object's key, or the
  // upload's key for a part). A backend may use the hint to place its bookkeeping next to the
  // key's metadata (storage/rados: the intent record on the key's index shard, saving two
  // operations at commit); committing under another key still works.
  virtual Result<std::unique_ptr<BlobWriter>> begin_write_for(std::string_view bucket,
                                                              std::string_view key) {
    (void)key;
    return begin_write(bucket);
  }
  // Atomically makes `data` the new version of meta.key, if `cond` holds (precondition_failed
  // otherwise, or no_such_key for etag_must_match on an absent key, as AWS answers; nothing
  // changes). meta.size must equal data->size(). Returns the stored meta (mtime filled in).
  // Precondition (OBJDIRECT_ASSERT): `data` came from this store's begin_write for `bucket`.
  virtual Result<ObjectMeta> commit_object(std::string_view bucket, ObjectMeta meta,
                                           std::unique_ptr<BlobWriter> data,
                                           const WriteCondition& cond) = 0;
  // Atomically replaces only the metadata of an existing object (CopyObject onto itself with
  // REPLACE). precondition_failed if the current ETag differs from expected_etag.
  virtual Result<ObjectMeta> replace_meta(std::string_view bucket, ObjectMeta meta,
                                          std::string_view expected_etag) = 0;
  // no_such_bucket / no_such_key.
  virtual Result<ObjectMeta> head_object(std::string_view bucket, std::string_view key) = 0;
  virtual Result<std::unique_ptr<ObjectReader>> open_object(std::string_view bucket,
                                                            std::string_view key) = 0;
  // Conditional HEAD for caches in front of this store (storage/cache): std::nullopt while the
  // object's current ETag is still `etag`, its new metadata when the ETag differs, and
  // no_such_bucket / no_such_key once it is gone. Only the ETag is compared: a metadata-only
  // change that keeps the ETag reads as unchanged. The default asks head_object; the gateway
  // backend overrides it with one HEAD carrying If-None-Match, answered 304 when unchanged.
  virtual Result<std::optional<ObjectMeta>> revalidate(std::string_view bucket,
                                                       std::string_view key,
                                                       std::string_view etag) {
    auto m = head_object(bucket, key);
    if (!m.ok()) return m.status();
    if (m->etag == etag) return std::optional<ObjectMeta>();
    return std::optional<ObjectMeta>(std::move(*m));
  }
  // Replaces the tag set of the object `key` (PutObjectTagging / DeleteObjectTagging with an
  // empty set), atomically; its bytes, other metadata, ETag and mtime stay. no_such_bucket /
  // no_such_key. Returns the stored meta. Backends that cannot store tags say not_implemented.
  virtual Result<ObjectMeta> set_object_tags(std::string_view bucket, std::string_view key,
                                             TagSet tags) {
    (void)bucket, (void)key, (void)tags;
    return Status(Errc::not_implemented, "This backend does not store object tags");
  }
  // As set_object_tags, for one version of the key (Put/DeleteObjectTagging ?versionId=):
  // version_id "" is exactly set_object_tags (the latest; no_such_key when it is a delete
  // marker). Otherwise that version's tags: no_such_version for an unknown id, invalid_argument
  // for a malformed one, method_not_allowed for a delete marker (it has no tags; AWS answers
  // 405). Returns the version's stored meta, meta.version_id set ("null" for the null version,
  // "" in a never-versioned bucket). The default serves "" only (backends without versions).
  virtual Result<ObjectMeta> set_object_version_tags(std::string_view bucket, std::string_view key,
                                                     std::string_view version_id, TagSet tags) {
    if (version_id.empty()) return set_object_tags(bucket, key, std::move(tags));
    return Status(Errc::not_implemented, "This backend does not keep object versions");
  }
  // Whether head_object's metadata carries the object's tags (GetObjectTagging reads them there).
  // False where another service keeps them (the gateway's upstream): GetObjectTagging then asks
  // get_object_version_tags.
  virtual bool tags_in_meta() const { return true; }
  // GetObjectTagging on a backend whose tags_in_meta() is false: the tags of `key` (version_id ""
  // the latest, else that version, as set_object_version_tags) in an ObjectMeta that carries the
  // key, the version read and the tags. Errors: no_such_key, no_such_version, not_implemented
  // (the backend cannot keep tags).
  virtual Result<ObjectMeta> get_object_version_tags(std::string_view bucket, std::string_view key,
                                                     std::string_view version_id) {
    (void)bucket, (void)key, (void)version_id;
    return Status(Errc::not_implemented, "This backend does not store object tags");
  }
  // Replaces the bucket's tag set (PutBucketTagging; empty for DeleteBucketTagging), atomically.
  // no_such_bucket. Backends that cannot store tags say not_implemented.
  virtual Status set_bucket_tags(std::string_view bucket, TagSet tags) {
    (void)bucket, (void)tags;
    return Status(Errc::not_implemented, "This backend does not store bucket tags");
  }
  // The bucket's tag set (GetBucketTagging), empty when it has none. no_such_bucket. The default
  // reads head_bucket; a backend whose head_bucket leaves the tags out (the gateway, where they
  // are one more upstream request) answers it directly, not_implemented where it keeps none.
  virtual Result<TagSet> get_bucket_tags(std::string_view bucket) {
    auto b = head_bucket(bucket);
    if (!b.ok()) return b.status();
    return std::move(b->tags);
  }
  // Sets (non-empty `document`) or removes (empty) one of the bucket's configuration documents
  // (BucketInfo::config), atomically. no_such_bucket. Backends that cannot store them say
  // not_implemented.
  virtual Status set_bucket_config(std::string_view bucket, std::string_view name,
                                   std::string document) {
    (void)bucket, (void)name, (void)document;
    return Status(Errc::not_implemented, "This backend does not store bucket configuration");
  }
  // One of the bucket's configuration documents (BucketInfo::config[name]); nullopt when unset.
  // no_such_bucket. The default reads head_bucket; a backend whose head_bucket leaves documents
  // out (the gateway, where each is one more upstream request) answers it directly.
  virtual Result<std::optional<std::string>> bucket_config(std::string_view bucket,
                                                           std::string_view name) {
    auto b = head_bucket(bucket);
    if (!b.ok()) return b.status();
    auto it = b->config.find(std::string(name));
    if (it == b->config.end()) return std::optional<std::string>();
    return std::optional<std::string>(it->second);
  }
  // Deleting an absent key succeeds (S3 semantics); no_such_bucket if the bucket is absent.
  // In a versioned bucket (backends with supports_versioning()) it writes a delete marker, as
  // delete_object_version with an empty version id does.
  virtual Status delete_object(std::string_view bucket, std::string_view key) = 0;

  // --- versioning (docs/versioning.md) ---
  // Whether this backend keeps versions. When true, the bucket config document
  // versioning_config_name decides, read atomically with each write: Enabled keeps every version
  // under a new id, Suspended replaces the "null" version, absent replaces the object. Then
  // commit_object / complete_upload / replace_meta return the written version's id in
  // meta.version_id, head_object / open_object serve the latest version unless it is a delete
  // marker (no_such_key), and list_objects skips keys whose latest version is a marker. Backends
  // without it answer not_implemented to the calls below.
  virtual bool supports_versioning() const { return false; }
  // Whether this backend persists ObjectMeta::sse and PartInfo::sse_iv (docs/sse-c.md): the S3
  // layer encrypts and decrypts and the store keeps the parameters. The S3 layer refuses SSE-C
  // requests (NotImplemented) on a backend that neither stores nor passes SSE-C
  // (passes_sse_c()).
  virtual bool stores_sse_c() const { return false; }
  // Whether this backend passes SSE-C through to a service that does the encryption itself
  // (docs/sse-c.md, "One implementation for every backend"): then the S3 layer neither encrypts
  // nor checks keys, but hands the request's headers (SseCKeyHeaders, after its own checks) to
  // the *_sse calls below, which send them on, and gives the service's answers (its errors
  // included) back to the client. It may turn false once the store learns that its service keeps
  // no SSE-C (then every SSE-C request answers 501 NotImplemented without reaching it). A store
  // never both stores and passes SSE-C.
  virtual bool passes_sse_c() const { return false; }
  // The calls that carry SSE-C headers through a backend with passes_sse_c(). Each is exactly the
  // call it names when `sse` is not present(); the defaults (backends that do not pass SSE-C
  // through, and ignore `sse`) are that call. open/head: `version_id` "" is the latest
  // (open_object / head_object), else as open_object_version / head_object_version; `sse` is the
  // key of the object read (the copy-source headers for the source of a copy). A reader keeps
  // `sse` for its reads. commit_object_sse / create_upload_sse / commit_part_sse /
  // complete_upload_sse: `sse` is the key of the object or upload written; the meta returned
  // carries in meta.sse the algorithm and key MD5 the service answered (nothing else of
  // SseCustomer). Errors: the service's (a missing key 400 invalid_request, a wrong one 403
  // access_denied, ...), not_implemented where it keeps no SSE-C.
  virtual Result<std::unique_ptr<ObjectReader>> open_object_sse(std::string_view bucket,
                                                                std::string_view key,
                                                                std::string_view version_id,
                                                                const SseCKeyHeaders& sse) {
    (void)sse;
    if (version_id.empty()) return open_object(bucket, key);
    return open_object_version(bucket, key, version_id);
  }
  virtual Result<ObjectMeta> head_object_sse(std::string_view bucket, std::string_view key,
                                             std::string_view version_id,
                                             const SseCKeyHeaders& sse) {
    (void)sse;
    if (version_id.empty()) return head_object(bucket, key);
    return head_object_version(bucket, key, version_id);
  }
  virtual Result<ObjectMeta> commit_object_sse(std::string_view bucket, ObjectMeta meta,
                                               std::unique_ptr<BlobWriter> data,
                                               const WriteCondition& cond,
                                               const SseCKeyHeaders& sse) {
    (void)sse;
    return commit_object(bucket, std::move(meta), std::move(data), cond);
  }
  virtual Result<std::string> create_upload_sse(std::string_view bucket, const UploadInfo& info,
                                                const SseCKeyHeaders& sse) {
    (void)sse;
    return create_upload(bucket, info);
  }
  virtual Result<PartInfo> commit_part_sse(std::string_view bucket, std::string_view key,
                                           std::string_view upload_id, PartInfo info,
                                           std::unique_ptr<BlobWriter> data,
                                           const SseCKeyHeaders& sse) {
    (void)sse;
    return commit_part(bucket, key, upload_id, std::move(info), std::move(data));
  }
  virtual Result<ObjectMeta> complete_upload_sse(std::string_view bucket,
                                                 std::string_view upload_id, ObjectMeta meta,
                                                 const std::vector<CompletePartRef>& parts,
                                                 const WriteCondition& cond,
                                                 const SseCKeyHeaders& sse) {
    (void)sse;
    return complete_upload(bucket, upload_id, std::move(meta), parts, cond);
  }
  // One version ("" = the latest), a delete marker included (meta.delete_marker). no_such_key when
  // the key has no version, no_such_version for an unknown id, invalid_argument for a malformed
  // one.
  virtual Result<ObjectMeta> head_object_version(std::string_view bucket, std::string_view key,
                                                 std::string_view version_id) {
    (void)bucket, (void)key, (void)version_id;
    return Status(Errc::not_implemented, "This backend does not keep object versions");
  }
  // As head_object_version, open for reading; method_not_allowed for a delete marker.
  virtual Result<std::unique_ptr<ObjectReader>> open_object_version(std::string_view bucket,
                                                                    std::string_view key,
                                                                    std::string_view version_id) {
    (void)bucket, (void)key, (void)version_id;
    return Status(Errc::not_implemented, "This backend does not keep object versions");
  }
  // version_id "": as delete_object, saying what it wrote. Otherwise removes that version for
  // good (an unknown well-formed id succeeds and removes nothing, as AWS answers 204);
  // invalid_argument for a malformed id.
  virtual Result<DeleteOutcome> delete_object_version(std::string_view bucket, std::string_view key,
                                                      std::string_view version_id) {
    (void)bucket, (void)key, (void)version_id;
    return Status(Errc::not_implemented, "This backend does not keep object versions");
  }
  // ListObjectVersions; in a never-versioned bucket every object is one "null" version.
  virtual Result<ListVersionsResult> list_object_versions(std::string_view bucket,
                                                          const ListVersionsQuery& q) {
    (void)bucket, (void)q;
    return Status(Errc::not_implemented, "This backend does not keep object versions");
  }

  virtual Result<ListResult> list_objects(std::string_view bucket, const ListQuery& q) = 0;

  // --- multipart ---
  // Returns a new upload id (URL-safe, unique).
  virtual Result<std::string> create_upload(std::string_view bucket, const UploadInfo& info) = 0;
  virtual Result<UploadInfo> get_upload(std::string_view bucket, std::string_view key,
                                        std::string_view upload_id) = 0;
  // Stores (or replaces) one part. no_such_upload if the upload is gone. Precondition
  // (OBJDIRECT_ASSERT): `data` came from this store's begin_write for `bucket`.
  virtual Result<PartInfo> commit_part(std::string_view bucket, std::string_view key,
                                       std::string_view upload_id, PartInfo info,
                                       std::unique_ptr<BlobWriter> data) = 0;
  // Parts in part-number order, starting after part_number_marker, at most max_parts.
  virtual Result<std::vector<PartInfo>> list_parts(std::string_view bucket, std::string_view key,
                                                   std::string_view upload_id,
                                                   std::uint32_t part_number_marker,
                                                   std::uint32_t max_parts) = 0;
  // Atomically turns the named parts into the object meta.key (meta carries size, etag,
  // checksums and parts computed by the caller), if `cond` holds, and removes the upload.
  // invalid_part if a named part is missing or its ETag differs. Copies no data.
  virtual Result<ObjectMeta> complete_upload(std::string_view bucket, std::string_view upload_id,
                                             ObjectMeta meta,
                                             const std::vector<CompletePartRef>& parts,
                                             const WriteCondition& cond) = 0;
  virtual Status abort_upload(std::string_view bucket, std::string_view key,
                              std::string_view upload_id) = 0;
  virtual Result<ListUploadsResult> list_uploads(std::string_view bucket,
                                                 const ListUploadsQuery& q) = 0;
};

}  // namespace objdirect::storage
