// CachingStore: a read-through cache on local disk in front of any ObjectStore (a decorator).
// Meant for the gateway backend (--backend s3 --upstream URL), where every inner call is a request
// to a remote S3; it works in front of any backend. See docs/scale-out.md, "Read-through cache",
// for the rules, and docs/cache_block_format.md for the block file format.
//
// Data: objects are cut into blocks of block_bytes. A block is keyed by (bucket, key, ETag,
// object size, block size, index) and stored as one file <dir>/blocks/<32 hex>, named by a
// SHA-256 of that identity, never by the key. The file starts with a header (block_header.hpp)
// that repeats the identity and carries CRC32Cs of itself and of the data; a read checks the
// identity and the header CRC every time and the data CRC on the first read of a block found on
// disk at startup, so a collision, a torn or a corrupted file is a miss, never wrong bytes.
// A block is written under <dir>/tmp/ and renamed into blocks/ once complete; tmp/ is emptied at
// startup, which scans blocks/ to rebuild the index (LRU order: file modification time).
//
// Metadata: head/open of a key whose metadata was validated less than ttl_s ago is answered from
// memory without asking the inner store. Otherwise the cache revalidates (ObjectStore::revalidate,
// a conditional HEAD for the gateway); a changed ETag drops the key's blocks. ttl_s 0 revalidates
// on every head/open. Metadata is kept in memory only (meta_entries_max entries, LRU).
// head_bucket answers (every S3 request checks its bucket) are trusted for
// max(ttl_s, bucket_ttl_s): even with ttl_s 0 a GET costs one conditional HEAD, not a HeadBucket
// too. A bucket deleted behind the cache is still seen at once by object calls (the inner store
// answers no_such_bucket); writes and deletes of buckets through the cache invalidate at once.
//
// Readers: open_object returns a reader that serves pread from blocks. When every block of the
// object is cached at open time, no inner call is made (beyond revalidation) and the version's
// blocks are pinned while the reader lives: neither eviction nor invalidation deletes them, so the
// reader is a snapshot. Otherwise the inner reader is opened at once and is the reader's snapshot
// (missing blocks are filled from it). If a pinned block still turns out to be unreadable
// (deleted or corrupted on disk), the reader opens the inner reader lazily, pinned to its ETag:
// if the inner object changed meanwhile, the key is invalidated and the read fails with
// precondition_failed instead of mixing versions. extents() is always empty (pread).
// Concurrent misses of one block are coalesced: one caller fills it, the others wait and copy.
//
// Eviction: LRU by bytes (file sizes, headers included), so that blocks/ plus blocks being
// written never exceed bytes_max; pinned blocks are skipped (when only pinned blocks are left, a
// new block is served without being cached). A block is read through an open fd, so an unlink
// never cuts a read. bytes_max 0, or a block (with header) larger than bytes_max, passes reads
// straight through to the inner store.
//
// Writes are write-through: commit_object, complete_upload, replace_meta, set_object_tags,
// set_object_version_tags, set_bucket_tags, set_bucket_config, delete_object and delete_bucket go
// to the inner store and, once it succeeded, invalidate the key (or bucket) here; commit_object and
// complete_upload also drop the key's blocks before the call, so that a crash between the inner
// commit and the invalidation leaves no blocks of the old version of a key (ETags reused by another
// version would otherwise match them). Listing, buckets and multipart pass through. One process
// owns a cache directory (flock on <dir>/LOCK).
//
// Versions: the cache keeps versions only as far as its inner store does (supports_versioning()
// and bucket_config are the inner store's, read past the cached head_bucket, whose answer may
// leave the documents out). Only the latest version is cached, as above; a version named by its
// id (head_object_version / open_object_version with a non-empty id) is always read from the
// inner store, never from blocks, so a version deleted there is never served from here (caching
// them would cost a HEAD per read all the same). A read of the latest version through the
// version calls ("" id) goes to the inner store too (it may answer a delete marker).
// delete_object_version invalidates the key (the latest version may change), as a write does.
// What the TTL allows for the latest version still holds: an overwrite made behind the cache is
// seen within ttl_s; one with the same ETag (the same bytes) keeps the cached metadata, version
// id included, until a write through the cache or the metadata's eviction.
//
// Thread safety: fully thread-safe (one mutex guards the index, the metadata and the fills; file
// I/O runs outside it). Readers are used by one thread at a time and may outlive the store.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/metrics_sink.hpp"
#include "common/status.hpp"
#include "storage/cache/block_header.hpp"
#include "storage/object_store.hpp"

namespace objdirect::storage::cache {

namespace cache_limits {
// Longest metadata TTL (--cache-ttl-s): one day.
inline constexpr std::uint32_t ttl_s_max = 86400;
// Default bound on cached metadata entries (CacheOptions::meta_entries_max).
inline constexpr std::size_t meta_entries_max = 1u << 20;
}  // namespace cache_limits

struct CacheOptions {
  std::string dir;              // created if missing; owned by one process
  std::uint64_t bytes_max = 0;  // disk bytes for blocks; 0: no data cached (pass-through)
  std::uint64_t block_bytes = 4ull << 20;  // cache_limits::block_bytes_min..block_bytes_max
  std::uint32_t ttl_s = 60;                // metadata freshness; 0 revalidates every head/open
  std::uint32_t bucket_ttl_s = 60;  // head_bucket answers: trusted max(ttl_s, this); <= ttl_s_max
  std::size_t meta_entries_max = cache_limits::meta_entries_max;  // in-memory metadata entries
  bool fsync = false;  // fsync block files before rename (the CRCs make it unnecessary for safety)
};

// Counters, all monotonic since open (evictions and revalidations included).
struct CacheStats {
  std::uint64_t hits = 0;             // block reads served from a cache file
  std::uint64_t misses = 0;           // block reads that filled the block from the inner store
  std::uint64_t coalesced_waits = 0;  // block reads that waited for another caller's fill
  std::uint64_t bytes_served = 0;     // bytes returned from cache files or shared fills
  std::uint64_t bytes_filled = 0;     // bytes read from the inner store into blocks
  std::uint64_t bytes_bypassed = 0;   // bytes read from the inner store, not cached
  std::uint64_t evictions = 0;        // blocks deleted to stay under bytes_max
  std::uint64_t invalid_blocks = 0;   // block files found torn, corrupt or foreign
  std::uint64_t fill_errors = 0;      // blocks that could not be written (disk full, ...)
  std::uint64_t meta_hits = 0;        // head/open answered within the TTL
  std::uint64_t revalidations_unchanged = 0;  // revalidations that found the same ETag (304)
  std::uint64_t revalidations_changed = 0;    // revalidations that found another ETag or none
  std::uint64_t inner_requests = 0;           // calls made to the inner store and its readers
  std::uint64_t blocks = 0;                   // blocks now in the index (gauge)
  std::uint64_t bytes = 0;                    // bytes now used, including fills in progress (gauge)
};

class CachingStore : public ObjectStore {
 public:
  // Validates the options (invalid_argument: empty dir, block_bytes out of bounds, ttl_s or
  // bucket_ttl_s over ttl_s_max, meta_entries_max 0), creates <dir>/blocks and <dir>/tmp, takes
  // <dir>/LOCK (unavailable if another process holds it), empties tmp/, and scans blocks/: valid
  // block files enter the index, others are deleted; then evicts down to bytes_max.
  static Result<std::unique_ptr<CachingStore>> open(std::unique_ptr<ObjectStore> inner,
                                                    const CacheOptions& options);
  ~CachingStore() override;

  CacheStats stats() const;
  // Registers objdirect_cache_* from stats() (docs/metrics.md), not the inner store's series;
  // the cache must outlive every render of `sink`. Once per cache.
  void register_metrics(metrics::Sink& sink) const;
  // The block file that holds block `index` of the given object version (for tests and tools).
  std::string block_path(std::string_view bucket, std::string_view key, std::string_view etag,
                         std::uint64_t object_size, std::uint64_t index) const;

  Status create_bucket(const BucketInfo& info) override;
  Status delete_bucket(std::string_view bucket) override;
  Result<BucketInfo> head_bucket(std::string_view bucket) override;
  Result<std::vector<BucketInfo>> list_buckets() override;
  Result<std::unique_ptr<BlobWriter>> begin_write(std::string_view bucket) override;
  Result<std::unique_ptr<BlobWriter>> begin_write_for(std::string_view bucket,
                                                      std::string_view key) override;
  Result<ObjectMeta> commit_object(std::string_view bucket, ObjectMeta meta,
                                   std::unique_ptr<BlobWriter> data,
                                   const WriteCondition& cond) override;
  Result<ObjectMeta> replace_meta(std::string_view bucket, ObjectMeta meta,
                                  std::string_view expected_etag) override;
  Result<ObjectMeta> set_object_tags(std::string_view bucket, std::string_view key,
                                     TagSet tags) override;
  Result<ObjectMeta> set_object_version_tags(std::string_view bucket, std::string_view key,
                                             std::string_view version_id, TagSet tags) override;
  Status set_bucket_tags(std::string_view bucket, TagSet tags) override;
  // Forwarded (GetBucketTagging is rare; the inner store's head_bucket or its own call answers).
  Result<TagSet> get_bucket_tags(std::string_view bucket) override;
  // Forwarded: the cache keeps the inner store's metadata, tags included where it has them.
  bool tags_in_meta() const override;
  Result<ObjectMeta> get_object_version_tags(std::string_view bucket, std::string_view key,
                                             std::string_view version_id) override;
  Status set_bucket_config(std::string_view bucket, std::string_view name,
                           std::string document) override;
  Result<ObjectMeta> head_object(std::string_view bucket, std::string_view key) override;
  Result<std::unique_ptr<ObjectReader>> open_object(std::string_view bucket,
                                                    std::string_view key) override;
  Result<std::optional<ObjectMeta>> revalidate(std::string_view bucket, std::string_view key,
                                               std::string_view etag) override;
  Status delete_object(std::string_view bucket, std::string_view key) override;
  // Versioning is the inner store's (see "Versions" above).
  Result<std::optional<std::string>> bucket_config(std::string_view bucket,
                                                   std::string_view name) override;
  bool supports_versioning() const override;
  Result<ObjectMeta> head_object_version(std::string_view bucket, std::string_view key,
                                         std::string_view version_id) override;
  Result<std::unique_ptr<ObjectReader>> open_object_version(std::string_view bucket,
                                                            std::string_view key,
                                                            std::string_view version_id) override;
  Result<DeleteOutcome> delete_object_version(std::string_view bucket, std::string_view key,
                                              std::string_view version_id) override;
  Result<ListVersionsResult> list_object_versions(std::string_view bucket,
                                                  const ListVersionsQuery& q) override;
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

  // SSE-C (docs/sse-c.md): the inner store's passes_sse_c(). A call with SSE-C headers
  // (sse.present()) bypasses the cache in both directions: it goes to the inner store's *_sse
  // call, and nothing it reads or writes is cached (a write, and a read of the latest, also
  // drop the key's cached metadata and blocks). The cache never holds an object whose metadata
  // names SSE-C, so a GET without the key is never served from here. Without headers, each is
  // the plain call.
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

  struct Core;  // shared with readers (implementation detail)

 private:
  explicit CachingStore(std::shared_ptr<Core> core);
  std::shared_ptr<Core> core_;
};

}  // namespace objdirect::storage::cache
