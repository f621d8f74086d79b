// open_store: the one place that knows the backends' classes. It opens the backend a StoreConfig
// names (local/, rados/, s3/), puts the read-through cache (cache/) in front of it when asked,
// and lets each of them register its own /metrics series (docs/metrics.md).
//
// StoreConfig holds what objdirect-server's flags say about storage (README, "Using the
// server"); its defaults are those of the backends' own options (open_store_test checks that).
// Backend settings without a flag keep the backend's default.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/metrics_sink.hpp"
#include "common/retry.hpp"
#include "common/status.hpp"
#include "storage/object_store.hpp"

namespace objdirect::storage {

struct StoreConfig {
  std::string backend = "local";  // "local", "rados" or "s3" (the gateway)

  // --backend local (storage/local): LMDB metadata + blob files.
  std::string data_dir = "./var/data";
  bool fsync = true;                           // false: --no-fsync (benchmarks only)
  std::uint64_t lmdb_map_bytes = 64ull << 30;  // LMDB map size (sparse)

  // --backend rados (storage/rados): pools <pool_prefix>.meta and <pool_prefix>.data.
  struct Rados {
    std::string conf_file;
    std::string pool_prefix = "objdirect";
    std::uint64_t stripe_bytes = 16ull << 20;
    std::uint32_t index_shards = 8;
    std::uint32_t gc_grace_s = 900;
    std::uint32_t gc_interval_s = 60;
    std::uint32_t intent_expire_s = 86400;
    std::uint32_t bucket_cache_entries = 4096;
  } rados;

  // --backend s3 (storage/s3): the gateway in front of an upstream S3 service. The upstream's
  // credentials, region and retry settings come from ClientConfig::load(profile) (the AWS
  // environment and shared files); region and retry_attempts given here win.
  struct Gateway {
    std::string upstream;  // http(s)://HOST[:PORT]; required
    std::string region;    // empty: the profile's / AWS_REGION / us-east-1
    std::string profile;   // empty: AWS_* environment, then AWS_PROFILE / default
    std::uint32_t connections = 64;
    std::uint32_t connect_timeout_ms = 3'000;
    std::uint32_t low_speed_time_s = 30;
    std::uint64_t multipart_threshold_bytes = 64ull << 20;
    std::uint64_t part_bytes = 16ull << 20;
    std::uint32_t parallel_parts = 8;
    std::uint32_t parallel_gets = 4;
    std::uint32_t retry_attempts = retry::Policy{}.max_attempts;
    bool retry_attempts_given = false;  // false: the profile's max_attempts
    std::string conditional_writes = "auto";
    std::string spool_dir;  // empty: $TMPDIR or /tmp
    std::uint64_t spool_memory_bytes = 8ull << 20;
    std::uint64_t spool_bytes_max = 5ull << 30;
    std::string state_bucket;  // empty: none (bucket policies answer NotImplemented)
    std::uint32_t document_cache_ttl_ms = 5'000;
    std::size_t document_cache_entries = 10'000;
  } gateway;

  // The read-through block cache (storage/cache) in front of the backend; none when dir is
  // empty.
  struct Cache {
    std::string dir;
    std::uint64_t bytes_max = 0;
    std::uint32_t ttl_s = 60;
    std::uint64_t block_bytes = 4ull << 20;
  } cache;
};

// Opens the configured backend, then the cache in front of it, and registers the series of both
// with `sink` when given (the store must then outlive every render of it).
// Errors (each message names what failed, e.g. "cannot open data directory D: ..."):
// invalid_argument for bad settings, missing upstream credentials or a backend this build lacks
// (rados without OBJDIRECT_WITH_RADOS); otherwise the backend's or the cache's own error
// (unavailable: a locked directory, an unreachable cluster or upstream; io_error; ...).
Result<std::shared_ptr<ObjectStore>> open_store(const StoreConfig& config,
                                                metrics::Sink* sink = nullptr);

}  // namespace objdirect::storage
