// S3Store (see s3_store.hpp): an ObjectStore on an upstream S3 service through libcurl. The
// pieces are listed in s3_internal.hpp; this file opens the store and exports its counters.
#include "storage/s3/s3_store.hpp"

#include <curl/curl.h>

#include "common/limits.hpp"
#include "s3/names.hpp"
#include "storage/s3/s3_internal.hpp"

namespace objdirect::storage {

using namespace s3gw;  // NOLINT: the internals of this backend

namespace {
struct CurlGlobal {
  CurlGlobal() { curl_global_init(CURL_GLOBAL_ALL); }
};

}  // namespace

Result<std::unique_ptr<ObjectStore>> open_s3_store(const S3StoreOptions& options) {
  static CurlGlobal curl_global;
  const auto& o = options;
  auto bad = [](std::string m) { return Status(Errc::invalid_argument, std::move(m)); };
  std::string base = o.upstream;
  while (!base.empty() && base.back() == '/') base.pop_back();
  std::string_view rest;
  if (base.starts_with("http://")) {
    rest = std::string_view(base).substr(7);
  } else if (base.starts_with("https://")) {
    rest = std::string_view(base).substr(8);
  } else {
    return bad("--upstream must be http://HOST[:PORT] or https://HOST[:PORT], got '" + o.upstream +
               "'");
  }
  if (rest.empty() || rest.find('/') != std::string_view::npos)
    return bad("--upstream must have a host and no path (path-style addressing), got '" +
               o.upstream + "'");
  if (o.access_key.empty() || o.secret_key.empty())
    return bad(
        "no upstream credentials: set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or give "
        "--upstream-profile naming a profile in ~/.aws/credentials");
  if (o.connections == 0 || o.connections > s3_limits::connections_max)
    return bad("upstream connections must be 1.." + std::to_string(s3_limits::connections_max));
  if (o.parallel_parts == 0 || o.parallel_parts > s3_limits::parallel_parts_max)
    return bad("parallel parts must be 1.." + std::to_string(s3_limits::parallel_parts_max));
  if (o.parallel_gets == 0 || o.parallel_gets > s3_limits::parallel_gets_max)
    return bad("parallel GETs must be 1.." + std::to_string(s3_limits::parallel_gets_max));
  if (o.spool_memory_bytes > s3_limits::spool_memory_bytes_max)
    return bad("spool memory must be at most " + std::to_string(s3_limits::spool_memory_bytes_max));
  if (o.spool_bytes_max == 0 || o.spool_bytes_max > limits::part_bytes_max)
    return bad("spool bytes max must be 1.." + std::to_string(limits::part_bytes_max));
  if (o.multipart_part_bytes < limits::part_bytes_min ||
      o.multipart_part_bytes > limits::part_bytes_max)
    return bad("multipart part bytes must be " + std::to_string(limits::part_bytes_min) + ".." +
               std::to_string(limits::part_bytes_max));
  if (o.multipart_threshold_bytes < o.multipart_part_bytes ||
      o.multipart_threshold_bytes > limits::put_bytes_max)
    return bad("multipart threshold must be between the part size and " +
               std::to_string(limits::put_bytes_max));
  if (o.upload_templates == 0 || o.upload_templates > s3_limits::upload_templates_max)
    return bad("upload templates must be 1.." + std::to_string(s3_limits::upload_templates_max));
  if (o.kept_parts == 0 || o.kept_parts > s3_limits::kept_parts_max)
    return bad("kept parts must be 1.." + std::to_string(s3_limits::kept_parts_max));
  if (o.low_speed_time_s == 0 || o.connect_timeout_ms == 0)
    return bad("upstream timeouts must be positive");
  if (o.conditional_writes != "auto" && o.conditional_writes != "upstream" &&
      o.conditional_writes != "gateway")
    return bad("upstream conditional writes must be auto, upstream or gateway, got '" +
               o.conditional_writes + "'");
  if (auto st = o.retry.validate(); !st.ok()) return bad("upstream retries: " + st.message());
  if (o.document_cache_entries == 0 ||
      o.document_cache_entries > s3_limits::document_cache_entries_max)
    return bad("document cache entries must be 1.." +
               std::to_string(s3_limits::document_cache_entries_max));
  if (o.document_cache_ttl_ms > s3_limits::document_cache_ttl_ms_max)
    return bad("document cache TTL must be at most " +
               std::to_string(s3_limits::document_cache_ttl_ms_max) + " ms");
  if (!o.state_bucket.empty()) {
    if (auto st = objdirect::s3::validate_bucket_name(o.state_bucket); !st.ok())
      return bad("--gateway-state-bucket '" + o.state_bucket + "': " + st.message());
  }

  auto core = std::make_shared<Core>();
  core->opts = o;
  core->retrier_ptr = std::make_unique<retry::Retrier>(o.retry);
  core->base = base;
  core->authority = std::string(rest);
  core->pool =
      std::make_unique<Pool>(o.connections, std::chrono::milliseconds(o.pool_wait_ms), core->ctr);
  auto store = std::make_unique<S3Store>(core);
  if (o.probe) {
    auto b = store->upstream_buckets();
    if (!b.ok()) {
      return Status(b.code(),
                    "upstream " + base + " check (ListBuckets) failed: " + b.status().message());
    }
  }
  if (!o.state_bucket.empty()) {
    if (auto st = store->ensure_state_bucket(); !st.ok()) {
      return Status(st.code(), "--gateway-state-bucket " + o.state_bucket + ": " + st.message());
    }
  }
  return std::unique_ptr<ObjectStore>(std::move(store));
}

S3StoreStats s3_store_stats(const ObjectStore& store) {
  S3StoreStats s;
  auto* st = dynamic_cast<const S3Store*>(&store);
  if (!st) return s;
  const Counters& c = st->counters();
  s.requests = c.requests;
  s.get_requests = c.get_requests;
  s.connections_created = c.connections_created;
  s.connections_in_use = c.connections_in_use;
  s.connections_peak = c.connections_peak;
  s.pool_waits_timed_out = c.pool_waits_timed_out;
  s.spooled_to_file = c.spooled_to_file;
  s.multipart_commits = c.multipart_commits;
  s.retries = c.retries;
  s.stream_resumes = c.stream_resumes;
  s.capability_probes = c.capability_probes;
  s.gateway_checked_conditions = c.gateway_checked_conditions;
  s.kept_part_checksums_used = c.kept_part_checksums_used;
  s.signing_key_derivations = st->signing_key_derivations();
  s.document_cache_hits = c.document_cache_hits;
  s.document_reads = c.document_reads;
  s.state_errors = c.state_errors;
  s.state_list_pages = c.state_list_pages;
  return s;
}

void register_s3_store_metrics(const ObjectStore& store, metrics::Sink& sink) {
  if (dynamic_cast<const S3Store*>(&store) == nullptr) return;
  const ObjectStore* st = &store;
  auto stat = [st](std::uint64_t S3StoreStats::*field) {
    return [st, field] { return static_cast<double>(s3_store_stats(*st).*field); };
  };
  sink.add_counter("objdirect_upstream_requests_total", "HTTP requests sent to the upstream S3.",
                   stat(&S3StoreStats::requests));
  sink.add_counter("objdirect_upstream_get_requests_total",
                   "Ranged GETs of object data sent to the upstream.",
                   stat(&S3StoreStats::get_requests));
  sink.add_gauge("objdirect_upstream_connections_in_use", "Upstream connections in use.",
                 stat(&S3StoreStats::connections_in_use));
  sink.add_counter("objdirect_upstream_pool_waits_timed_out_total",
                   "Requests refused with SlowDown: no free upstream connection in time.",
                   stat(&S3StoreStats::pool_waits_timed_out));
  sink.add_counter("objdirect_upstream_multipart_commits_total",
                   "Objects written through as a multipart upload.",
                   stat(&S3StoreStats::multipart_commits));
  sink.add_counter("objdirect_upstream_document_cache_hits_total",
                   "Bucket documents (CORS, owner, policy) served from the gateway's cache.",
                   stat(&S3StoreStats::document_cache_hits));
  sink.add_counter("objdirect_upstream_document_reads_total",
                   "Bucket documents (CORS, owner, policy) read from the upstream.",
                   stat(&S3StoreStats::document_reads));
  sink.add_counter("objdirect_upstream_state_errors_total",
                   "Failed reads and writes of the gateway state bucket.",
                   stat(&S3StoreStats::state_errors));
}

}  // namespace objdirect::storage
