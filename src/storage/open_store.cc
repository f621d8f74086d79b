#include "storage/open_store.hpp"

#include <chrono>
#include <utility>

#include "objdirect/config.hpp"
#include "storage/cache/caching_store.hpp"
#include "storage/local/local_store.hpp"
#include "storage/s3/s3_store.hpp"
#ifdef OBJDIRECT_WITH_RADOS
#include "storage/rados/rados_store.hpp"
#endif

namespace objdirect::storage {

namespace {

// Keeps the code of a failure and prefixes its message with what was being opened.
Status named(std::string what, const Status& st) {
  return Status(st.code(), std::move(what) + st.message());
}

Result<std::unique_ptr<ObjectStore>> open_local(const StoreConfig& c) {
  LocalStoreOptions o;
  o.data_dir = c.data_dir;
  o.fsync = c.fsync;
  o.lmdb_map_size_bytes = c.lmdb_map_bytes;
  auto store = open_local_store(o);
  if (!store.ok()) return named("cannot open data directory " + c.data_dir + ": ", store.status());
  return store;
}

Result<std::unique_ptr<ObjectStore>> open_rados(const StoreConfig& c) {
#ifdef OBJDIRECT_WITH_RADOS
  RadosStoreOptions o;
  o.conf_file = c.rados.conf_file;
  o.pool_prefix = c.rados.pool_prefix;
  o.stripe_bytes = c.rados.stripe_bytes;
  o.index_shards = c.rados.index_shards;
  o.gc_grace_s = c.rados.gc_grace_s;
  o.gc_interval_s = c.rados.gc_interval_s;
  o.intent_expire_s = c.rados.intent_expire_s;
  o.bucket_cache_entries = c.rados.bucket_cache_entries;
  auto store = open_rados_store(o);
  if (!store.ok()) {
    return named("cannot open the RADOS backend (" + c.rados.conf_file + "): ", store.status());
  }
  return store;
#else
  (void)c;
  return Status(Errc::invalid_argument, "built without RADOS support (OBJDIRECT_WITH_RADOS=OFF)");
#endif
}

Result<std::unique_ptr<ObjectStore>> open_gateway(const StoreConfig& c) {
  const auto& g = c.gateway;
  if (g.upstream.empty()) {
    return Status(Errc::invalid_argument, "--backend s3 needs --upstream http(s)://HOST[:PORT]");
  }
  // The upstream's credentials: the standard AWS environment / shared files / profile, separate
  // from the gateway's own users.
  auto cfg = ClientConfig::load(g.profile);
  if (!cfg.ok()) {
    return Status(Errc::invalid_argument, "upstream credentials: " + cfg.status().message());
  }
  S3StoreOptions o;
  o.upstream = g.upstream;
  o.region = g.region.empty() ? cfg->region : g.region;
  o.access_key = cfg->access_key;
  o.secret_key = cfg->secret_key;
  o.session_token = cfg->session_token;
  o.connections = g.connections;
  o.connect_timeout_ms = g.connect_timeout_ms;
  o.low_speed_time_s = g.low_speed_time_s;
  o.multipart_threshold_bytes = g.multipart_threshold_bytes;
  o.multipart_part_bytes = g.part_bytes;
  o.parallel_parts = g.parallel_parts;
  o.parallel_gets = g.parallel_gets;
  o.conditional_writes = g.conditional_writes;
  o.spool_dir = g.spool_dir;
  o.spool_memory_bytes = g.spool_memory_bytes;
  o.spool_bytes_max = g.spool_bytes_max;
  o.state_bucket = g.state_bucket;
  o.document_cache_ttl_ms = g.document_cache_ttl_ms;
  o.document_cache_entries = g.document_cache_entries;
  // Upstream retries: the client library's policy and settings (AWS_MAX_ATTEMPTS,
  // AWS_RETRY_MODE, or max_attempts / retry_mode in the upstream profile);
  // --upstream-retry-attempts, when given, wins.
  o.retry.max_attempts = g.retry_attempts_given ? g.retry_attempts : cfg->max_attempts;
  if (auto m = retry::parse_mode(cfg->retry_mode)) o.retry.mode = *m;
  o.retry.base_delay = std::chrono::milliseconds(cfg->retry_base_delay_ms);
  o.retry.max_backoff = std::chrono::milliseconds(cfg->retry_max_backoff_ms);
  auto store = open_s3_store(o);
  if (!store.ok()) return named("cannot use the upstream " + g.upstream + ": ", store.status());
  return store;
}

}  // namespace

Result<std::shared_ptr<ObjectStore>> open_store(const StoreConfig& config, metrics::Sink* sink) {
  Result<std::unique_ptr<ObjectStore>> backend =
      Status(Errc::invalid_argument, "unknown backend '" + config.backend + "'");
  if (config.backend == "local") {
    backend = open_local(config);
  } else if (config.backend == "rados") {
    backend = open_rados(config);
  } else if (config.backend == "s3") {
    backend = open_gateway(config);
  }
  if (!backend.ok()) return backend.status();
  // Series are registered once every part is open, so that none outlives a failed open. The
  // local and RADOS backends export no series of their own.
  const ObjectStore* inner = backend->get();
  std::shared_ptr<ObjectStore> store;
  if (config.cache.dir.empty()) {
    store = std::move(*backend);
  } else {
    cache::CacheOptions o;
    o.dir = config.cache.dir;
    o.bytes_max = config.cache.bytes_max;
    o.ttl_s = config.cache.ttl_s;
    o.block_bytes = config.cache.block_bytes;
    auto cached = cache::CachingStore::open(std::move(*backend), o);
    if (!cached.ok()) return named("--cache-dir " + config.cache.dir + ": ", cached.status());
    if (sink != nullptr) (*cached)->register_metrics(*sink);
    store = std::move(*cached);
  }
  if (sink != nullptr) register_s3_store_metrics(*inner, *sink);
  return store;
}

}  // namespace objdirect::storage
