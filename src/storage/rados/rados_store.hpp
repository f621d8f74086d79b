// RadosStore: an ObjectStore on a Ceph cluster through plain librados (no RGW object classes).
// See docs/scale-out.md for the layout, the commit protocol, why it is atomic, and the GC rules.
//
// Layout (pools "<prefix>.meta" and "<prefix>.data", created when missing):
//  - meta "buckets": omap name -> bucket record (instance id, shard count, deleting token,
//    BucketInfo).
//  - meta "idx.<bucket>.<instance>.<shard>": a power-of-two number of index shards per bucket;
//    a key lives on shard fnv1a(key) & (shards - 1). Omap namespaces on a shard:
//      "!state"                    -> "live", or "fenced:<token>" by a DeleteBucket
//      "o" key                     -> object record (metadata + segments, or inline bytes)
//      "u" upload id               -> upload record (uploads live on their key's shard)
//      "p" upload id "." part(BE)  -> part record
//      "i" blob id                 -> intent: a blob being written, not yet committed
//      "g" blob id                 -> GC record: a blob no longer referenced
//  - data "<blob id>.<n>": stripe n of a blob (stripe_bytes each, the last one shorter), written
//    once under a random 128-bit blob id and never modified.
//  - Every commit (object, part, delete, complete, abort) is ONE compound write operation on ONE
//    index shard: omap_cmp preconditions + set the entry + remove the intent + add GC records.
//
// Behaviour beyond the ObjectStore contract:
//  - Objects of at most inline_bytes_max bytes are stored inline in their omap value.
//  - Versioning (docs/versioning.md, "RADOS layout"): the "o" entry of a key written while its
//    bucket is versioned holds all its versions (newest first); each index shard holds the
//    bucket's versioning state ("!versioning"), which every commit compares in its op.
//  - Readers are snapshots for gc_grace_s seconds: a reader older than that may fail with
//    io_error once the GC deleted the blobs it reads.
//  - One GC worker per cluster at a time (rados lock "gc" on the meta object "gc.lock"); it
//    deletes blobs gc_grace_s after they were replaced, and blobs of intents older than
//    intent_expire_s (a writer that never committed). A commit whose intent expired fails.
//  - DeleteBucket fences every index shard before it checks emptiness; every op that adds an
//    entry asserts the shard is live, so a commit racing a deletion either makes it fail with
//    bucket_not_empty or fails with no_such_bucket (its blob is deleted). A commit waits while a
//    deletion of its bucket is in progress (it may roll back). See docs/scale-out.md.
//  - Bucket records are cached per store (bucket_cache_entries) and validated in the same op as
//    each request's first index shard access, so object and upload requests never act on a
//    bucket deleted or re-created by another server. HeadBucket answers from the cache for up to
//    bucket_cache_ttl_ms; an op finding its bucket re-created by another owner fails with
//    unavailable (the caller's ownership check used the old record). ListBuckets reads.
//  - Errors: no_space (ENOSPC/EDQUOT), timeout (ETIMEDOUT: rados_osd_op_timeout expired, e.g.
//    a full cluster), io_error (other librados failures), corrupt (undecodable records).
//
// Thread safety: the store is fully thread-safe (librados handles are). Writers and readers are
// used by one thread at a time; both keep the store's cluster handle alive.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/limits.hpp"
#include "common/status.hpp"
#include "storage/object_store.hpp"

namespace objdirect::storage {

namespace rados_limits {
// Ceph 16.2 limits, measured: a write op over 90 MB fails with EMSGSIZE, an object over
// 128 MiB with EFBIG, and omap_get_vals returns at most 1024 entries per call.
inline constexpr std::uint64_t stripe_bytes_max = 64ull << 20;
inline constexpr std::uint64_t stripe_bytes_min = 64ull << 10;
inline constexpr std::uint64_t write_bytes_max = 16ull << 20;  // one write op
inline constexpr std::uint32_t omap_page_max = 1024;
inline constexpr std::uint64_t inline_bytes_max = 64ull << 10;
inline constexpr std::uint32_t index_shards_max = 1024;
inline constexpr std::uint32_t inflight_writes_max = 64;             // per writer
inline constexpr std::uint32_t bucket_cache_entries_max = 1u << 20;  // bucket records cached
inline constexpr std::uint32_t bucket_cache_ttl_ms_max = 60'000;     // HeadBucket staleness
inline constexpr std::uint32_t gc_interval_s_max = 86'400;           // a GC pass at least daily
inline constexpr std::uint32_t intent_expire_s_max = 30u * 86'400;   // a writer's longest write
// A key's versions value (all its versions, docs/versioning.md) is written by one op.
inline constexpr std::uint64_t versions_value_bytes_max = write_bytes_max;
// Inline bytes all versions of one key keep together; a version past it gets a blob.
inline constexpr std::uint64_t versions_inline_bytes_max = 1ull << 20;
}  // namespace rados_limits

struct RadosStoreOptions {
  std::string conf_file;                  // ceph.conf of the cluster
  std::string pool_prefix = "objdirect";  // pools <prefix>.meta and <prefix>.data
  std::string client_name = "client.admin";
  std::uint64_t stripe_bytes = 16ull << 20;   // used when the pools are created; stored there
  std::uint32_t index_shards = 8;             // for new buckets; a power of two
  std::uint64_t inline_bytes = 64ull << 10;   // objects up to this size live in the index
  std::uint32_t inflight_writes = 8;          // parallel stripe writes per writer
  std::uint32_t bucket_cache_entries = 4096;  // bucket records cached per store; 0: no cache
  std::uint32_t bucket_cache_ttl_ms = 1000;   // HeadBucket answers from the cache this long
  std::uint32_t osd_op_timeout_s = 60;        // rados_osd_op_timeout (a full memstore hangs)
  std::uint32_t mon_op_timeout_s = 30;        // rados_mon_op_timeout
  bool gc = true;                             // run a GC worker thread
  std::uint32_t gc_interval_s = 60;
  std::uint32_t gc_grace_s = 900;         // keep replaced blobs this long (long reads)
  std::uint32_t intent_expire_s = 86400;  // uncommitted blobs older than this are garbage
  // Versions one key may hold, markers included (<= limits::versions_per_key_max; tests lower
  // it), and the bytes of its versions value (<= rados_limits::versions_value_bytes_max). A
  // write past either gets slow_down.
  std::uint32_t versions_per_key_max = limits::versions_per_key_max;
  std::uint64_t versions_value_bytes = 8ull << 20;
};

// Connects to the cluster, creates the pools when missing and starts the GC worker.
// Errors: invalid_argument for bad options, unavailable if the cluster cannot be reached,
// io_error for other failures.
Result<std::unique_ptr<ObjectStore>> open_rados_store(const RadosStoreOptions& options);

// Runs one GC pass now (for tests): returns the number of blobs deleted, or unavailable when
// another GC worker holds the lease. `store` must come from open_rados_store.
Result<std::uint64_t> rados_gc_pass(ObjectStore& store);

}  // namespace objdirect::storage
