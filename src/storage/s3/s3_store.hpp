// S3Store: an ObjectStore whose objects live in another S3 service (gateway mode:
// `objdirect-server --backend s3 --upstream URL`). The upstream may be another ObjDirect, MinIO,
// Ceph RGW or AWS; the gateway serves S3 and RDMA to its own clients. See docs/scale-out.md,
// "Gateway mode", for the data flow, the consistency rules and the caveats.
//
// Upstream protocol: libcurl (HTTP/1.1 keep-alive, path-style addressing), every request signed
// with our own SigV4 (auth/sigv4.hpp). Bodies up to spool_memory_bytes are signed with their
// SHA-256; larger bodies (read back from the spool file) go as UNSIGNED-PAYLOAD, which is fine
// over loopback or TLS; x-amz-checksum-* headers, when the client sent them, still let the
// upstream verify those bytes.
//
// How the ObjectStore calls map onto the upstream:
//  - buckets: CreateBucket / DeleteBucket (leftover multipart uploads aborted first) / HeadBucket
//    / ListBuckets. Every bucket is owned by the upstream account; BucketInfo::owner is the
//    gateway user recorded in the state bucket (written before the upstream CreateBucket,
//    removed after its DeleteBucket), empty without a state bucket or a record (then every
//    gateway user sees and owns every bucket the upstream credentials see).
//  - begin_write: HeadBucket, then a writer that spools the data (memory up to
//    spool_memory_bytes, then an unlinked temporary file in spool_dir, at most spool_bytes_max).
//  - commit_object: write-through. One PutObject up to multipart_threshold_bytes, a parallel
//    multipart upload above it (parts of multipart_part_bytes, parallel_parts_max in flight,
//    aborted on any failure). The condition is forwarded: must_be_absent -> If-None-Match: *,
//    etag_must_match -> If-Match. Returns only once the upstream answered 200; the meta returned
//    carries the upstream's ETag (which replaces the caller's).
//  - open_object: HeadObject; the reader pins that ETag. pread() is a ranged GetObject with
//    If-Match: ETag whose body goes straight into the caller's span. A pread of at least
//    parallel_get_min_bytes is split into up to parallel_gets concurrent exact ranged GETs; a
//    smaller one that does not follow the previous pread is one exact ranged GET; one that
//    follows it opens a GET stream over a window (8 MiB, doubling up to 1 GiB) that the next
//    sequential preads continue (one open stream per reader). An
//    object overwritten upstream after open fails the read with precondition_failed: readers are
//    NOT snapshots (the ObjectStore contract's snapshot rule is relaxed here), but never return
//    bytes of two versions. extents() is always empty (no file descriptors).
//  - revalidate (the read-through cache's freshness check): one HeadObject carrying
//    If-None-Match: "ETag"; 304 -> unchanged, 200 -> the new metadata, 404 -> no_such_key.
//  - list_objects: ListObjectsV2 (start-after, continuation pages, encoding-type=url).
//  - multipart: the upstream's upload id is ours; UploadPart data is spooled like objects;
//    Complete forwards the condition. get_upload asks the upstream (ListParts) and adds the
//    template this process remembers from create_upload (content-type etc. are not readable from
//    S3 before completion).
//  - replace_meta: CopyObject onto itself with x-amz-metadata-directive: REPLACE and
//    x-amz-copy-source-if-match.
//  - bucket documents (set_bucket_config / bucket_config): versioning, lifecycle and CORS go to
//    the upstream's own calls (it keeps them and executes the lifecycle rules; head_bucket and
//    list_buckets never carry a lifecycle document, so the S3 layer's worker leaves gateway
//    buckets alone). Owners and policies live in the state bucket (options.state_bucket, objects
//    buckets/<bucket>/owner, buckets/<bucket>/owned-by/<owner> and buckets/<bucket>/policy);
//    head_bucket fills BucketInfo::owner and config["policy"] from there, and
//    bucket_config("cors") reads the upstream's rules, both through the document cache (bounded,
//    with a TTL); list_buckets fills the owners from the cache, or else from one paged LIST of
//    the state bucket (at most s3_limits::state_list_pages_max pages; the owner is in the
//    owned-by/ key), which fills the cache. A NotImplemented answer to a lifecycle or CORS call
//    is remembered (then not_implemented, nothing sent).
//
// Errors: upstream S3 errors map to our Errc by their code (NoSuchKey, NoSuchBucket,
// PreconditionFailed, BucketNotEmpty, ...), the message naming the upstream's message and request
// id. An unreachable upstream, a connect timeout (connect_timeout_ms) or a stalled transfer (no
// byte for low_speed_time_s) is `unavailable` (503 ServiceUnavailable); no free upstream
// connection within pool_wait_ms is `slow_down` (503 SlowDown).
//
// What the gateway cannot carry (upstream S3 has no place for it): ObjectMeta::owner and
// ObjectMeta::parts of stored objects (head/open return them empty; complete_upload returns the
// parts it was given); mtime has the upstream's one-second resolution.
//
// Thread safety: the store is fully thread-safe (a bounded pool of libcurl handles behind a
// mutex). Writers and readers are used by one thread at a time; both keep the store alive.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/metrics_sink.hpp"
#include "common/retry.hpp"
#include "common/status.hpp"
#include "storage/object_store.hpp"

namespace objdirect::storage {

namespace s3_limits {
// Upstream connections (libcurl easy handles, each keeping its keep-alive connection).
inline constexpr std::uint32_t connections_max = 1024;
// Parallel UploadPart requests of one commit, and parallel ranged GETs of one pread.
inline constexpr std::uint32_t parallel_parts_max = 64;
inline constexpr std::uint32_t parallel_gets_max = 64;
// A writer's in-memory spool before it spills to a temporary file.
inline constexpr std::uint64_t spool_memory_bytes_max = 64ull << 20;
// Error bodies read from the upstream (the rest is dropped).
inline constexpr std::size_t error_body_bytes_max = 64 * 1024;
// Replies parsed whole (listings, CompleteMultipartUpload results).
inline constexpr std::size_t xml_reply_bytes_max = 16ull << 20;
// Upload templates remembered between create_upload and complete (oldest dropped first).
inline constexpr std::size_t upload_templates_max = 1'000'000;
// Part checksums the gateway keeps for upstreams whose ListParts does not return them (all uploads
// together): the bound of S3StoreOptions::kept_parts.
inline constexpr std::size_t kept_parts_max = 1'000'000;
// Bucket documents (CORS rules, owner records, policies) kept by the document cache, and how
// long one is served before it is read again (S3StoreOptions::document_cache_*).
inline constexpr std::size_t document_cache_entries_max = 1'000'000;
inline constexpr std::uint32_t document_cache_ttl_ms_max = 3'600'000;
// Largest state object or CORS document read back from the upstream (what the S3 layer stores
// is at most limits::cors_body_bytes_max; a policy at most limits::bucket_policy_bytes_max).
inline constexpr std::size_t document_bytes_max = 64 * 1024;
// Pages (of limits::list_keys_max keys) of the state bucket's LIST that one ListBuckets reads
// for the owners of its buckets (about 330 buckets a page); the owners of buckets past them are
// read one record each.
inline constexpr std::uint32_t state_list_pages_max = 1000;
}  // namespace s3_limits

struct S3StoreOptions {
  // "http://host:port" or "https://host[:port]"; no path (path-style addressing).
  std::string upstream;
  std::string region = "us-east-1";  // signing region of the upstream
  // Upstream credentials (the gateway's own users are separate). open_s3_store does not read
  // the environment: callers fill these (objdirect-server uses ClientConfig::load).
  std::string access_key, secret_key, session_token;
  std::string spool_dir;  // empty: $TMPDIR or /tmp
  // Per writer: bytes held in memory, then in the spool file; append fails past spool_bytes_max.
  std::uint64_t spool_memory_bytes = 8ull << 20;  // <= s3_limits::spool_memory_bytes_max
  std::uint64_t spool_bytes_max = 5ull << 30;     // limits::put_bytes_max
  std::uint32_t connections = 64;                 // pool size, <= s3_limits::connections_max
  std::uint32_t pool_wait_ms = 30'000;            // wait for a free connection, then slow_down
  std::uint32_t connect_timeout_ms = 3'000;
  std::uint32_t low_speed_time_s = 30;  // a transfer moving no byte this long fails
  // PutObject up to this size; a parallel multipart upload above it.
  std::uint64_t multipart_threshold_bytes = 64ull << 20;
  std::uint64_t multipart_part_bytes = 16ull << 20;   // >= limits::part_bytes_min
  std::uint32_t parallel_parts = 8;                   // <= s3_limits::parallel_parts_max
  std::uint64_t parallel_get_min_bytes = 2ull << 20;  // preads this large are split
  std::uint32_t parallel_gets = 4;                    // <= s3_limits::parallel_gets_max
  // Upload templates remembered (create_upload -> get_upload / list_uploads), oldest dropped.
  std::size_t upload_templates = 100'000;  // <= s3_limits::upload_templates_max
  // Part checksums kept (all in-progress uploads together, 1..s3_limits::kept_parts_max). Once
  // they are all in use, an UploadPart that carries a checksum of an upload this gateway created
  // answers 503 SlowDown naming the bound, before anything is sent upstream.
  std::size_t kept_parts = s3_limits::kept_parts_max;
  // Probe the upstream at open (ListBuckets): unreachable -> unavailable, bad credentials ->
  // the upstream's error. Tests that start without an upstream turn it off.
  bool probe = true;
  // The gateway state bucket at the upstream (docs/scale-out.md, "Bucket owners and policies"):
  // where the gateway keeps each bucket's owner and policy as objects, so that several gateways
  // in front of one upstream share them. Hidden from the gateway's clients (ListBuckets leaves it
  // out, every request naming it answers NoSuchBucket). Created at open when missing. Empty:
  // none; then bucket policies answer not_implemented and every gateway user owns every bucket.
  std::string state_bucket;
  // The document cache: CORS rules (read on every preflight and every request with an Origin),
  // owners and policies (read on every request) are served from it for up to
  // document_cache_ttl_ms (0: read every time; <= s3_limits::document_cache_ttl_ms_max) after
  // they were read; at most document_cache_entries (1..s3_limits::document_cache_entries_max)
  // documents, the least recently used dropped first. A write through this gateway replaces its
  // entry at once; a change made at the upstream or through another gateway is seen within the
  // TTL.
  std::uint32_t document_cache_ttl_ms = 5'000;
  std::size_t document_cache_entries = 10'000;
  // Retries of upstream requests: the policy the client library uses (common/retry.hpp);
  // objdirect-server fills it from AWS_MAX_ATTEMPTS / AWS_RETRY_MODE or the upstream profile.
  retry::Policy retry;
  // Who checks write conditions (If-None-Match: *, If-Match) on PutObject and Complete: "auto"
  // probes the upstream once (at the first conditional write of each kind, with a scratch key
  // in that bucket) and checks them in the gateway where the upstream ignores them; "upstream"
  // trusts the upstream; "gateway" always checks them in the gateway (a HEAD before the write,
  // under a per-key lock: atomic against other writes through this gateway, racy against
  // writers that bypass it).
  std::string conditional_writes = "auto";
};

// Upstream traffic of one store, for tests and metrics.
struct S3StoreStats {
  std::uint64_t requests = 0;             // HTTP requests sent upstream
  std::uint64_t get_requests = 0;         // ranged GETs (object data)
  std::uint64_t connections_created = 0;  // curl handles created (<= options.connections)
  std::uint64_t connections_in_use = 0;
  std::uint64_t connections_peak = 0;  // most connections open at once (<= connections)
  std::uint64_t pool_waits_timed_out = 0;
  std::uint64_t spooled_to_file = 0;    // writers that spilled to a temporary file
  std::uint64_t multipart_commits = 0;  // commit_object calls that used a multipart upload
  std::uint64_t retries = 0;            // upstream requests sent again after a transient failure
  std::uint64_t stream_resumes = 0;     // GET streams resumed mid-body (also counted in retries)
  std::uint64_t capability_probes = 0;  // probes of the upstream's conditional writes
  std::uint64_t gateway_checked_conditions = 0;  // write conditions checked by the gateway itself
  std::uint64_t kept_part_checksums_used = 0;    // ListParts entries completed from kept checksums
  // SigV4 signing keys derived for upstream requests: one per (date, region, service) in use,
  // however many requests are signed with it.
  std::uint64_t signing_key_derivations = 0;
  std::uint64_t document_cache_hits = 0;  // bucket documents served from the document cache
  std::uint64_t document_reads = 0;       // bucket documents read from the upstream
  std::uint64_t state_errors = 0;         // failed reads and writes of the state bucket
  std::uint64_t state_list_pages = 0;     // pages of the state bucket listed for owners
};

// Opens the store (and probes the upstream, see S3StoreOptions::probe).
// Errors: invalid_argument for bad options (the message names the option), unavailable if the
// upstream cannot be reached, the upstream's mapped error otherwise (e.g. invalid_access_key_id).
Result<std::unique_ptr<ObjectStore>> open_s3_store(const S3StoreOptions& options);

// The counters of a store from open_s3_store (zeros for any other store).
S3StoreStats s3_store_stats(const ObjectStore& store);

// Registers the upstream series objdirect_upstream_* of a store from open_s3_store
// (docs/metrics.md; nothing for any other store); the store must outlive every render of `sink`.
// Once per store.
void register_s3_store_metrics(const ObjectStore& store, metrics::Sink& sink);

}  // namespace objdirect::storage
