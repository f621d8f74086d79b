// objdirect-server: an S3 server over HTTP on a local directory, with an RDMA data plane.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <boost/asio/signal_set.hpp>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <thread>

#include "objdirect/client.hpp"
#include "server/http/http_server.hpp"
#include "server/rdma/rdma_engine.hpp"
#include "server/s3/s3_service.hpp"
#include "storage/cache/caching_store.hpp"
#include "storage/local/local_store.hpp"
#include "storage/s3/s3_store.hpp"
#include "token/binding.hpp"
#ifdef OBJDIRECT_WITH_RADOS
#include "storage/rados/rados_store.hpp"
#endif

namespace {

// The default of --put-digest-threads is one per core, at most this many.
constexpr unsigned put_digest_threads_default_max = 16;

// Splits "HOST:PORT" or "[V6]:PORT".
bool split_listen(const std::string& s, std::string& host, std::uint16_t& port) {
  auto colon = s.rfind(':');
  if (colon == std::string::npos) return false;
  host = s.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  try {
    int p = std::stoi(s.substr(colon + 1));
    if (p < 0 || p > 65535) return false;
    port = static_cast<std::uint16_t>(p);
  } catch (...) {
    return false;
  }
  return !host.empty();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace objdirect;
  // A client that closes mid-response must cost one connection, not the server: sendfile(2) and
  // write(2) to a closed socket raise SIGPIPE, whose default action kills the process.
  std::signal(SIGPIPE, SIG_IGN);
  CLI::App app{"objdirect-server: S3 over HTTP with an RDMA data plane"};
  std::string listen = "127.0.0.1:9000";
  std::string data_dir = "./var/data";
  std::string access_key, secret_key, credentials_file;
  s3::S3Options s3opts;
  http::ServerOptions hopts;
  std::uint32_t header_timeout_ms = limits::header_timeout_ms;
  std::uint32_t idle_timeout_ms = limits::idle_timeout_ms;
  std::uint32_t request_timeout_ms = limits::request_timeout_ms;
  bool no_fsync = false;
  std::string metrics_allow, access_log;
  rdma::RdmaOptions ropts;
  std::string backend = "local";
  std::string rados_conf, rados_pool_prefix = "objdirect";
  std::uint64_t rados_stripe_bytes = 16ull << 20;
  std::uint32_t rados_index_shards = 8, rados_gc_grace_s = 900, rados_bucket_cache = 4096;
  storage::cache::CacheOptions cache_opts;
  storage::S3StoreOptions gw;
  std::string upstream_profile;
  gw.region.clear();  // default: the profile's / environment's region

  app.add_option("--listen", listen, "HOST:PORT to listen on (port 0 picks a free one)")
      ->envname("OBJDIRECT_LISTEN")
      ->capture_default_str();
  app.add_option("--data", data_dir, "Data directory")
      ->envname("OBJDIRECT_DATA")
      ->capture_default_str();
  app.add_option("--backend", backend,
                 "Object store: local (--data), rados (--rados-conf) or s3 (gateway: --upstream)")
      ->envname("OBJDIRECT_BACKEND")
      ->check(CLI::IsMember({"local", "rados", "s3"}))
      ->capture_default_str();
  // Gateway mode (--backend s3): the objects live in an upstream S3 service.
  app.add_option("--upstream", gw.upstream,
                 "Upstream S3 endpoint http(s)://HOST[:PORT] (--backend s3; path-style)")
      ->envname("OBJDIRECT_UPSTREAM");
  app.add_option("--upstream-region", gw.region,
                 "Signing region of the upstream (default: AWS_REGION / the profile's / us-east-1)")
      ->envname("OBJDIRECT_UPSTREAM_REGION");
  app.add_option("--upstream-profile", upstream_profile,
                 "AWS profile with the upstream credentials (default: AWS_* environment, then "
                 "AWS_PROFILE / default)")
      ->envname("OBJDIRECT_UPSTREAM_PROFILE");
  app.add_option("--upstream-connections-max", gw.connections, "Upstream connection pool size")
      ->envname("OBJDIRECT_UPSTREAM_CONNECTIONS_MAX")
      ->capture_default_str();
  app.add_option("--upstream-connect-timeout-ms", gw.connect_timeout_ms,
                 "Upstream connect timeout (then 503 ServiceUnavailable)")
      ->envname("OBJDIRECT_UPSTREAM_CONNECT_TIMEOUT_MS")
      ->capture_default_str();
  app.add_option("--upstream-low-speed-time-s", gw.low_speed_time_s,
                 "An upstream transfer moving no byte this long fails (503)")
      ->envname("OBJDIRECT_UPSTREAM_LOW_SPEED_TIME_S")
      ->capture_default_str();
  app.add_option("--upstream-multipart-threshold-bytes", gw.multipart_threshold_bytes,
                 "Objects above this size go upstream as a parallel multipart upload")
      ->envname("OBJDIRECT_UPSTREAM_MULTIPART_THRESHOLD_BYTES")
      ->capture_default_str();
  app.add_option("--upstream-part-bytes", gw.multipart_part_bytes,
                 "Part size of those multipart uploads")
      ->envname("OBJDIRECT_UPSTREAM_PART_BYTES")
      ->capture_default_str();
  app.add_option("--upstream-parallel-parts", gw.parallel_parts, "UploadParts in flight per object")
      ->envname("OBJDIRECT_UPSTREAM_PARALLEL_PARTS")
      ->capture_default_str();
  app.add_option("--upstream-parallel-gets", gw.parallel_gets,
                 "Ranged GETs in flight per large read (an RDMA staging buffer)")
      ->envname("OBJDIRECT_UPSTREAM_PARALLEL_GETS")
      ->capture_default_str();
  auto* retry_attempts_opt =
      app.add_option("--upstream-retry-attempts", gw.retry.max_attempts,
                     "Attempts per upstream request: 5xx, 429 and refused or reset connections are "
                     "retried with exponential backoff and full jitter (1: no retry)")
          ->envname("OBJDIRECT_UPSTREAM_RETRY_ATTEMPTS")
          ->capture_default_str();
  app.add_option("--upstream-conditional-writes", gw.conditional_writes,
                 "Who checks If-None-Match: * / If-Match on PutObject and "
                 "CompleteMultipartUpload: auto (probe the upstream once per bucket), upstream, "
                 "or gateway (a HEAD first, under a per-key lock; docs/scale-out.md)")
      ->envname("OBJDIRECT_UPSTREAM_CONDITIONAL_WRITES")
      ->check(CLI::IsMember({"auto", "upstream", "gateway"}))
      ->capture_default_str();
  app.add_option("--gateway-spool-dir", gw.spool_dir,
                 "Where uploads are spooled before the write-through (default: $TMPDIR or /tmp)")
      ->envname("OBJDIRECT_GATEWAY_SPOOL_DIR");
  app.add_option("--gateway-spool-memory-bytes", gw.spool_memory_bytes,
                 "Bytes of one upload kept in memory before spilling to the spool dir")
      ->envname("OBJDIRECT_GATEWAY_SPOOL_MEMORY_BYTES")
      ->capture_default_str();
  app.add_option("--gateway-spool-bytes-max", gw.spool_bytes_max,
                 "Largest object or part the gateway spools")
      ->envname("OBJDIRECT_GATEWAY_SPOOL_BYTES_MAX")
      ->capture_default_str();
  app.add_option("--rados-conf", rados_conf, "ceph.conf of the cluster (--backend rados)")
      ->envname("OBJDIRECT_RADOS_CONF");
  app.add_option("--rados-pool-prefix", rados_pool_prefix,
                 "Pools PREFIX.meta and PREFIX.data (created when missing)")
      ->envname("OBJDIRECT_RADOS_POOL_PREFIX")
      ->capture_default_str();
  app.add_option("--rados-stripe-bytes", rados_stripe_bytes,
                 "Stripe object size for new pools (64 KiB..64 MiB)")
      ->envname("OBJDIRECT_RADOS_STRIPE_BYTES")
      ->capture_default_str();
  app.add_option("--rados-index-shards", rados_index_shards,
                 "Index shards of new buckets (a power of two)")
      ->envname("OBJDIRECT_RADOS_INDEX_SHARDS")
      ->capture_default_str();
  app.add_option("--rados-gc-grace-s", rados_gc_grace_s,
                 "Seconds a replaced object's data stays readable (open readers)")
      ->envname("OBJDIRECT_RADOS_GC_GRACE_S")
      ->capture_default_str();
  app.add_option("--rados-bucket-cache", rados_bucket_cache,
                 "Bucket records cached per server (0: read the record on every request)")
      ->envname("OBJDIRECT_RADOS_BUCKET_CACHE")
      ->capture_default_str();
  // The read-through cache (storage/cache): meant for the gateway backend, where every backend
  // call is a request to a remote S3; harmless (but of little use) in front of the others.
  auto* cache_dir_opt =
      app.add_option("--cache-dir", cache_opts.dir,
                     "Read-through block cache on local disk in front of the backend (meant for "
                     "the gateway backend); needs --cache-bytes-max")
          ->envname("OBJDIRECT_CACHE_DIR");
  auto* cache_bytes_opt =
      app.add_option("--cache-bytes-max", cache_opts.bytes_max,
                     "Disk bytes the cache may use (0: metadata only, data passes through)")
          ->envname("OBJDIRECT_CACHE_BYTES_MAX");
  auto* cache_ttl_opt =
      app.add_option("--cache-ttl-s", cache_opts.ttl_s,
                     "Seconds cached metadata is trusted before revalidation (0: every GET)")
          ->envname("OBJDIRECT_CACHE_TTL_S")
          ->capture_default_str();
  auto* cache_block_opt = app.add_option("--cache-block-bytes", cache_opts.block_bytes,
                                         "Cache block size (64 KiB..64 MiB)")
                              ->envname("OBJDIRECT_CACHE_BLOCK_BYTES")
                              ->capture_default_str();
  app.add_option("--access-key", access_key, "Access key of the single user")
      ->envname("OBJDIRECT_ACCESS_KEY");
  app.add_option("--secret-key", secret_key, "Secret key of the single user")
      ->envname("OBJDIRECT_SECRET_KEY");
  app.add_option("--credentials", credentials_file,
                 "File of 'ACCESS_KEY SECRET_KEY' lines (several users)")
      ->envname("OBJDIRECT_CREDENTIALS");
  app.add_option("--region", s3opts.region, "Region name")
      ->envname("OBJDIRECT_REGION")
      ->capture_default_str();
  app.add_option("--domain", s3opts.domain, "Domain for virtual-hosted addressing (BUCKET.DOMAIN)")
      ->envname("OBJDIRECT_DOMAIN");
  app.add_option("--threads", hopts.threads, "I/O threads (0: automatic)")
      ->envname("OBJDIRECT_THREADS");
  app.add_option("--header-bytes-max", hopts.header_bytes_max, "Largest request header section")
      ->envname("OBJDIRECT_HEADER_BYTES_MAX")
      ->capture_default_str();
  app.add_option("--connections-max", hopts.connections_max, "Most concurrent connections")
      ->envname("OBJDIRECT_CONNECTIONS_MAX")
      ->capture_default_str();
  app.add_option("--header-timeout-ms", header_timeout_ms, "Time allowed to send a request header")
      ->envname("OBJDIRECT_HEADER_TIMEOUT_MS")
      ->capture_default_str();
  app.add_option("--idle-timeout-ms", idle_timeout_ms, "Idle time allowed on a connection or body")
      ->envname("OBJDIRECT_IDLE_TIMEOUT_MS")
      ->capture_default_str();
  app.add_option("--request-timeout-ms", request_timeout_ms, "Time allowed to write one response")
      ->envname("OBJDIRECT_REQUEST_TIMEOUT_MS")
      ->capture_default_str();
  app.add_flag("--no-fsync", no_fsync, "Skip fsync (benchmarks only: not crash-safe)")
      ->envname("OBJDIRECT_NO_FSYNC");
  // One per core by default: each PUT keeps one chunk in flight on the pool, and on a host with
  // an idle core the overlap made single large PUTs 1.5x faster (docs/BENCHMARKS.md).
  s3opts.put_digest_threads =
      std::clamp(std::thread::hardware_concurrency(), 1u, put_digest_threads_default_max);
  app.add_option("--put-digest-threads", s3opts.put_digest_threads,
                 "Threads that hash PUT bodies (MD5, checksums) while the request's thread "
                 "receives and writes them (default: one per core, at most 16); 0 hashes inline")
      ->envname("OBJDIRECT_PUT_DIGEST_THREADS")
      ->check(CLI::Range(0u, objdirect::limits::put_digest_threads_max))
      ->capture_default_str();
  s3opts.lifecycle_interval_ms = 60'000;
  app.add_option("--lifecycle-interval-ms", s3opts.lifecycle_interval_ms,
                 "Pause between passes of the bucket lifecycle worker; 0 runs no worker")
      ->envname("OBJDIRECT_LIFECYCLE_INTERVAL_MS")
      ->capture_default_str();
  app.add_option("--lifecycle-day-seconds", s3opts.lifecycle_day_seconds,
                 "Length of a lifecycle day (Expiration Days, DaysAfterInitiation); tests "
                 "shorten it")
      ->envname("OBJDIRECT_LIFECYCLE_DAY_SECONDS")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{86400}))
      ->capture_default_str();
  app.add_option("--lifecycle-actions-per-pass-max", s3opts.lifecycle_actions_per_pass_max,
                 "Most objects deleted plus uploads aborted by one lifecycle pass")
      ->envname("OBJDIRECT_LIFECYCLE_ACTIONS_PER_PASS_MAX")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1'000'000}))
      ->capture_default_str();
  std::uint64_t lmdb_map_bytes = storage::LocalStoreOptions{}.lmdb_map_size_bytes;
  app.add_option("--lmdb-map-bytes", lmdb_map_bytes,
                 "Largest size of the local backend's metadata (LMDB map, sparse); smaller for "
                 "valgrind, which cannot map the default")
      ->check(CLI::Range(std::uint64_t{1} << 20, std::uint64_t{1} << 40))
      ->capture_default_str();
  app.add_option("--fabric", ropts.fabrics,
                 "RDMA transports: auto, none, or a comma list of libfabric:tcp, libfabric:shm, "
                 "libfabric:verbs, libfabric:efa, ucx")
      ->envname("OBJDIRECT_FABRIC")
      ->capture_default_str();
  app.add_option("--rdma-buffer-pool-bytes", ropts.buffer_pool_bytes, "Registered staging memory")
      ->envname("OBJDIRECT_RDMA_BUFFER_POOL_BYTES")
      ->capture_default_str();
  app.add_option("--rdma-chunk-bytes", ropts.chunk_bytes, "Size of one staging buffer")
      ->envname("OBJDIRECT_RDMA_CHUNK_BYTES")
      ->capture_default_str();
  bool staged_get = false;
  app.add_flag("--rdma-staged-get", staged_get,
               "GET over libfabric tcp/shm copies through staging buffers instead of writing "
               "from a mapping of the object's files")
      ->envname("OBJDIRECT_RDMA_STAGED_GET");
  app.add_option("--rdma-inflight-bytes-max", ropts.inflight_bytes_max,
                 "Staging bytes all RDMA transfers may hold at once")
      ->envname("OBJDIRECT_RDMA_INFLIGHT_BYTES_MAX")
      ->capture_default_str();
  app.add_option("--rdma-client-inflight-bytes-max", ropts.per_client_inflight_bytes_max,
                 "Staging bytes one client's transfers may hold at once")
      ->envname("OBJDIRECT_RDMA_CLIENT_INFLIGHT_BYTES_MAX")
      ->capture_default_str();
  std::uint32_t rdma_op_timeout_ms = static_cast<std::uint32_t>(ropts.op_timeout.count());
  app.add_option("--rdma-op-timeout-ms", rdma_op_timeout_ms,
                 "Longest wait for one RDMA operation (a dead or stalled client)")
      ->envname("OBJDIRECT_RDMA_OP_TIMEOUT_MS")
      ->capture_default_str();
  app.add_option("--rdma-retired-buffers-max", ropts.retired_buffers_max,
                 "Staging buffers retired after timed-out operations (a dead client) held at most "
                 "before new RDMA transfers are declined (clients then use HTTP)")
      ->envname("OBJDIRECT_RDMA_RETIRED_BUFFERS_MAX")
      ->capture_default_str();
  std::uint32_t rdma_reap_interval_ms = static_cast<std::uint32_t>(ropts.reap_interval.count());
  app.add_option("--rdma-reap-interval-ms", rdma_reap_interval_ms,
                 "How often retired staging buffers are checked and freed once safe (and how long "
                 "one stays retired at least)")
      ->envname("OBJDIRECT_RDMA_REAP_INTERVAL_MS")
      ->check(CLI::Range(1u, 3'600'000u))
      ->capture_default_str();
  std::uint32_t rdma_admission_wait_ms =
      static_cast<std::uint32_t>(ropts.admission_wait_max.count());
  app.add_option("--rdma-admission-wait-ms", rdma_admission_wait_ms,
                 "Longest an RDMA transfer waits (FIFO) for a staging buffer before it is refused "
                 "with SlowDown (0: refuse at once)")
      ->envname("OBJDIRECT_RDMA_ADMISSION_WAIT_MS")
      ->check(CLI::Range(0u, 600'000u))
      ->capture_default_str();
  auto* waiters_opt =
      app.add_option("--rdma-admission-waiters-max", ropts.admission_waiters_max,
                     "RDMA transfers waiting for a staging buffer at most (each holds an I/O "
                     "thread; past it, SlowDown at once); at most half of --threads")
          ->envname("OBJDIRECT_RDMA_ADMISSION_WAITERS_MAX")
          ->capture_default_str();
  app.add_option("--rdma-bindings-max", s3opts.rdma_bindings_max,
                 "Client endpoints remembered as bound to their access key (least recently used "
                 "evicted beyond it; docs/rdma_protocol.md)")
      ->envname("OBJDIRECT_RDMA_BINDINGS_MAX")
      ->check(CLI::Range(std::size_t{1}, limits::rdma_bindings_max))
      ->capture_default_str();
  app.add_option("--rdma-binding-lifetime-s", s3opts.rdma_binding_lifetime_s,
                 "Seconds a client endpoint stays bound before it proves itself again")
      ->envname("OBJDIRECT_RDMA_BINDING_LIFETIME_S")
      ->check(CLI::Range(1u, limits::rdma_binding_lifetime_max_s))
      ->capture_default_str();
  app.add_option("--rdma-replay-nonces-max", s3opts.rdma_replay_nonces_max,
                 "RDMA token nonces remembered, each until its token expires (single use; past "
                 "it new tokens get SlowDown); about 56 bytes each")
      ->envname("OBJDIRECT_RDMA_REPLAY_NONCES_MAX")
      ->check(CLI::Range(std::size_t{1}, limits::rdma_replay_nonces_max))
      ->capture_default_str();
  app.add_option("--tls-cert", hopts.tls_cert_file, "PEM certificate chain: serve HTTPS")
      ->envname("OBJDIRECT_TLS_CERT");
  app.add_option("--tls-key", hopts.tls_key_file, "PEM private key for --tls-cert")
      ->envname("OBJDIRECT_TLS_KEY");
  app.add_option("--metrics-allow", s3opts.metrics_allow,
                 "Besides loopback, who may GET /metrics: comma list of addresses or CIDRs, or *")
      ->envname("OBJDIRECT_METRICS_ALLOW");
  app.add_option("--access-log", s3opts.access_log,
                 "JSON-lines access log: a file, or - for stderr")
      ->envname("OBJDIRECT_ACCESS_LOG");
  CLI11_PARSE(app, argc, argv);

  if (!split_listen(listen, hopts.host, hopts.port)) {
    std::cerr << "objdirect-server: --listen must be HOST:PORT, got '" << listen << "'\n";
    return 2;
  }
  hopts.header_timeout = std::chrono::milliseconds(header_timeout_ms);
  ropts.local_host = hopts.host;
  ropts.op_timeout = std::chrono::milliseconds(rdma_op_timeout_ms);
  ropts.reap_interval = std::chrono::milliseconds(rdma_reap_interval_ms);
  ropts.admission_wait_max = std::chrono::milliseconds(rdma_admission_wait_ms);
  ropts.zero_copy_get = !staged_get;
  hopts.idle_timeout = std::chrono::milliseconds(idle_timeout_ms);
  hopts.request_timeout = std::chrono::milliseconds(request_timeout_ms);
  if (!credentials_file.empty()) {
    auto users = s3::load_credentials_file(credentials_file);
    if (!users.ok()) {
      std::cerr << "objdirect-server: " << users.status().message() << "\n";
      return 2;
    }
    s3opts.users = *users;
  }
  if (!access_key.empty() || !secret_key.empty()) {
    if (access_key.empty() || secret_key.empty()) {
      std::cerr << "objdirect-server: --access-key and --secret-key go together\n";
      return 2;
    }
    s3opts.users[access_key] = s3::User{access_key, secret_key};
  }
  s3opts.secure_transport = !hopts.tls_cert_file.empty();
  if (s3opts.users.empty()) {
    std::cerr
        << "objdirect-server: no credentials: give --access-key/--secret-key or --credentials\n";
    return 2;
  }

  if (cache_dir_opt->count() == 0) {
    for (const auto* o : {cache_bytes_opt, cache_ttl_opt, cache_block_opt}) {
      if (o->count() > 0) {
        std::cerr << "objdirect-server: " << o->get_name() << " needs --cache-dir\n";
        return 2;
      }
    }
  } else {
    if (cache_bytes_opt->count() == 0) {
      std::cerr << "objdirect-server: --cache-dir needs --cache-bytes-max (the disk bytes the "
                   "cache may use)\n";
      return 2;
    }
    if (backend == "local") {
      // The cache deletes files it does not recognise: it must not share the data directory.
      std::error_code ec;
      const auto c = std::filesystem::weakly_canonical(cache_opts.dir, ec).string() + "/";
      const auto d = std::filesystem::weakly_canonical(data_dir, ec).string() + "/";
      if (c.starts_with(d) || d.starts_with(c)) {
        std::cerr << "objdirect-server: --cache-dir and --data must not contain each other\n";
        return 2;
      }
    }
  }

  Result<std::unique_ptr<storage::ObjectStore>> store =
      Status(Errc::invalid_argument, "unknown backend");
  if (backend == "rados") {
#ifdef OBJDIRECT_WITH_RADOS
    storage::RadosStoreOptions ro;
    ro.conf_file = rados_conf;
    ro.pool_prefix = rados_pool_prefix;
    ro.stripe_bytes = rados_stripe_bytes;
    ro.index_shards = rados_index_shards;
    ro.gc_grace_s = rados_gc_grace_s;
    ro.bucket_cache_entries = rados_bucket_cache;
    store = storage::open_rados_store(ro);
    if (!store.ok()) {
      std::cerr << "objdirect-server: cannot open the RADOS backend (" << rados_conf
                << "): " << store.status().message() << "\n";
      return 1;
    }
#else
    std::cerr << "objdirect-server: built without RADOS support (OBJDIRECT_WITH_RADOS=OFF)\n";
    return 2;
#endif
  } else if (backend == "s3") {
    if (gw.upstream.empty()) {
      std::cerr << "objdirect-server: --backend s3 needs --upstream http(s)://HOST[:PORT]\n";
      return 2;
    }
    // The upstream's credentials: the standard AWS environment / shared files / profile,
    // separate from the gateway's own users above.
    auto cfg = ClientConfig::load(upstream_profile);
    if (!cfg.ok()) {
      std::cerr << "objdirect-server: upstream credentials: " << cfg.status().message() << "\n";
      return 2;
    }
    gw.access_key = cfg->access_key;
    gw.secret_key = cfg->secret_key;
    gw.session_token = cfg->session_token;
    if (gw.region.empty()) gw.region = cfg->region;
    // Upstream retries: the client library's policy and settings (AWS_MAX_ATTEMPTS,
    // AWS_RETRY_MODE, or max_attempts / retry_mode in the upstream profile).
    // --upstream-retry-attempts, when given, wins.
    if (retry_attempts_opt->count() == 0) gw.retry.max_attempts = cfg->max_attempts;
    if (auto m = retry::parse_mode(cfg->retry_mode)) gw.retry.mode = *m;
    gw.retry.base_delay = std::chrono::milliseconds(cfg->retry_base_delay_ms);
    gw.retry.max_backoff = std::chrono::milliseconds(cfg->retry_max_backoff_ms);
    // Store calls block on the upstream: more I/O threads than for a local disk.
    if (hopts.threads == 0) hopts.threads = 16;
    store = storage::open_s3_store(gw);
    if (!store.ok()) {
      std::cerr << "objdirect-server: cannot use the upstream " << gw.upstream << ": "
                << store.status().message() << "\n";
      return store.code() == Errc::invalid_argument ? 2 : 1;
    }
  } else {
    storage::LocalStoreOptions sopts;
    sopts.data_dir = data_dir;
    sopts.fsync = !no_fsync;
    sopts.lmdb_map_size_bytes = lmdb_map_bytes;
    store = storage::open_local_store(sopts);
    if (!store.ok()) {
      std::cerr << "objdirect-server: cannot open data directory " << data_dir << ": "
                << store.status().message() << "\n";
      return 1;
    }
  }
  // The backend itself, for its own counters; owned by the cache when there is one.
  storage::ObjectStore* backend_store = store->get();
  std::shared_ptr<storage::cache::CachingStore> cache;
  if (!cache_opts.dir.empty()) {
    auto c = storage::cache::CachingStore::open(std::move(*store), cache_opts);
    if (!c.ok()) {
      std::cerr << "objdirect-server: --cache-dir " << cache_opts.dir << ": "
                << c.status().message() << "\n";
      return c.code() == Errc::invalid_argument ? 2 : 1;
    }
    cache = std::move(*c);
  }
  std::shared_ptr<storage::ObjectStore> shared_store =
      cache ? std::shared_ptr<storage::ObjectStore>(cache)
            : std::shared_ptr<storage::ObjectStore>(std::move(*store));
  auto service = std::make_shared<s3::S3Service>(s3opts, shared_store);
  // Admission waiters block the I/O threads that run send()/receive(): keep at least half of
  // them free for everything else (threads 0: the server picks at least 32, above the default).
  if (hopts.threads != 0 && ropts.admission_waiters_max > hopts.threads / 2) {
    if (waiters_opt->count() > 0) {
      std::cerr << "objdirect-server: --rdma-admission-waiters-max must be at most half of "
                   "--threads ("
                << hopts.threads / 2 << ")\n";
      return 2;
    }
    ropts.admission_waiters_max = hopts.threads / 2;
  }
  auto engine = rdma::RdmaEngine::create(ropts);
  if (!engine.ok()) {
    std::cerr << "objdirect-server: --fabric " << ropts.fabrics << ": " << engine.status().message()
              << "\n";
    return 1;
  }
  for (const auto& line : (*engine)->init_log())
    std::cerr << "objdirect-server: rdma " << line << "\n";
  service->set_rdma(*engine);
  http::HttpServer server(hopts, service);
  {
    auto& m = service->metrics();
    const auto* counters = &server.counters();
    m.add_gauge("objdirect_http_connections_open", "Open HTTP connections.",
                [counters] { return static_cast<double>(counters->connections_open.load()); });
    m.add_gauge("objdirect_http_connections_rejected_total",
                "Connections refused over --connections-max.",
                [counters] { return static_cast<double>(counters->connections_rejected.load()); });
    std::shared_ptr<rdma::RdmaEngine> eng = *engine;
    auto stat = [eng](auto field) {
      return [eng, field] { return static_cast<double>(eng->stats().*field); };
    };
    m.add_gauge("objdirect_rdma_buffers_total", "Registered RDMA staging buffers.",
                stat(&rdma::RdmaStats::buffers_total));
    m.add_gauge("objdirect_rdma_buffers_in_use", "Staging buffers held by transfers.",
                stat(&rdma::RdmaStats::buffers_in_use));
    m.add_gauge("objdirect_rdma_buffers_retired",
                "Staging buffers retired after a timed-out operation and not yet freed.",
                stat(&rdma::RdmaStats::buffers_retired));
    m.add_gauge("objdirect_rdma_buffers_retired_total",
                "Staging buffers ever retired after a timed-out operation.",
                stat(&rdma::RdmaStats::buffers_retired_total));
    m.add_gauge("objdirect_rdma_buffers_reclaimed_total",
                "Retired staging buffers freed once no transfer could touch them any more.",
                stat(&rdma::RdmaStats::buffers_reclaimed));
    m.add_gauge("objdirect_rdma_inflight_bytes", "Staging bytes held by RDMA transfers.",
                stat(&rdma::RdmaStats::inflight_bytes));
    m.add_gauge("objdirect_rdma_transfers_active", "RDMA transfers in progress.",
                stat(&rdma::RdmaStats::transfers_active));
    m.add_gauge("objdirect_rdma_transfers_ok_total", "RDMA transfers completed.",
                stat(&rdma::RdmaStats::transfers_ok));
    m.add_gauge("objdirect_rdma_transfers_failed_total", "RDMA transfers failed.",
                stat(&rdma::RdmaStats::transfers_failed));
    m.add_gauge("objdirect_rdma_transfers_unreachable_total",
                "Failed RDMA transfers whose first post the transport refused before any byte "
                "moved (libfabric tcp: the client's fabric address cannot be reached from here).",
                stat(&rdma::RdmaStats::transfers_refused_by_transport));
    m.add_gauge("objdirect_rdma_get_bytes_mapped_total",
                "GET bytes RDMA-written straight from a mapping of the object's files.",
                stat(&rdma::RdmaStats::bytes_written_mapped));
    m.add_gauge("objdirect_rdma_admissions_refused_total",
                "RDMA transfers refused with SlowDown (at once or after waiting).",
                stat(&rdma::RdmaStats::admissions_refused));
    m.add_gauge("objdirect_rdma_transport_resets_total",
                "Transports replaced after a dead peer stalled them (libfabric shm).",
                stat(&rdma::RdmaStats::transport_resets));
    m.add_gauge("objdirect_rdma_shm_dead_peer_lock_releases_total",
                "libfabric shm posts freed by releasing the region lock of a dead client.",
                stat(&rdma::RdmaStats::shm_dead_peer_lock_releases));
    m.add_gauge("objdirect_rdma_shm_dead_peer_locks_left_alone_total",
                "libfabric shm posts stuck on a dead client's lock that was not released "
                "(libfabric other than 1.17, region not readable).",
                stat(&rdma::RdmaStats::shm_dead_peer_locks_left_alone));
    m.add_gauge("objdirect_rdma_admissions_refused_after_wait_total",
                "RDMA transfers refused with SlowDown after waiting --rdma-admission-wait-ms "
                "(or woken by shutdown).",
                stat(&rdma::RdmaStats::admissions_refused_after_wait));
    m.add_gauge("objdirect_rdma_admissions_waited_total",
                "RDMA transfers admitted after waiting for a staging buffer.",
                stat(&rdma::RdmaStats::admissions_waited));
    m.add_gauge("objdirect_rdma_admission_waiters", "RDMA transfers waiting for admission now.",
                stat(&rdma::RdmaStats::admission_waiters));
    m.add_gauge("objdirect_rdma_admission_wait_seconds_total",
                "Time RDMA transfers spent waiting for admission (admitted or refused).",
                [eng] { return static_cast<double>(eng->stats().admission_wait_ns_total) / 1e9; });
    if (cache) {
      using storage::cache::CacheStats;
      auto cstat = [cache](std::uint64_t CacheStats::*field) {
        return [cache, field] { return static_cast<double>(cache->stats().*field); };
      };
      const std::pair<const char*, std::pair<std::uint64_t CacheStats::*, const char*>> gauges[] = {
          {"hits_total", {&CacheStats::hits, "Block reads served from the cache."}},
          {"misses_total", {&CacheStats::misses, "Block reads filled from the backend."}},
          {"coalesced_waits_total",
           {&CacheStats::coalesced_waits, "Block reads that waited for another read's fill."}},
          {"bytes_served_total", {&CacheStats::bytes_served, "Bytes served from the cache."}},
          {"bytes_filled_total",
           {&CacheStats::bytes_filled, "Bytes read from the backend into blocks."}},
          {"bytes_bypassed_total",
           {&CacheStats::bytes_bypassed, "Bytes read from the backend without caching them."}},
          {"evictions_total",
           {&CacheStats::evictions, "Blocks evicted to stay under --cache-bytes-max."}},
          {"invalid_blocks_total",
           {&CacheStats::invalid_blocks, "Block files found torn, corrupt or foreign (dropped)."}},
          {"fill_errors_total", {&CacheStats::fill_errors, "Blocks that could not be written."}},
          {"meta_hits_total",
           {&CacheStats::meta_hits, "Metadata lookups answered within the TTL."}},
          {"revalidations_unchanged_total",
           {&CacheStats::revalidations_unchanged, "Revalidations that found the same ETag (304)."}},
          {"revalidations_changed_total",
           {&CacheStats::revalidations_changed, "Revalidations that found another ETag or none."}},
          {"inner_requests_total",
           {&CacheStats::inner_requests, "Calls the cache made to the backend and its readers."}},
          {"blocks", {&CacheStats::blocks, "Blocks in the cache."}},
          {"bytes", {&CacheStats::bytes, "Disk bytes used by the cache."}},
      };
      for (const auto& [name, g] : gauges) {
        m.add_gauge(std::string("objdirect_cache_") + name, g.second, cstat(g.first));
      }
    }
    if (backend == "s3") {
      // Gateway mode: the upstream traffic (storage/s3 counters).
      // shared_store keeps backend_store alive (directly or through the cache).
      auto up = [shared_store, backend_store](auto field) {
        return [shared_store, backend_store, field] {
          return static_cast<double>(storage::s3_store_stats(*backend_store).*field);
        };
      };
      m.add_gauge("objdirect_upstream_requests_total", "HTTP requests sent to the upstream S3.",
                  up(&storage::S3StoreStats::requests));
      m.add_gauge("objdirect_upstream_get_requests_total",
                  "Ranged GETs of object data sent to the upstream.",
                  up(&storage::S3StoreStats::get_requests));
      m.add_gauge("objdirect_upstream_connections_in_use", "Upstream connections in use.",
                  up(&storage::S3StoreStats::connections_in_use));
      m.add_gauge("objdirect_upstream_pool_waits_timed_out_total",
                  "Requests refused with SlowDown: no free upstream connection in time.",
                  up(&storage::S3StoreStats::pool_waits_timed_out));
      m.add_gauge("objdirect_upstream_multipart_commits_total",
                  "Objects written through as a multipart upload.",
                  up(&storage::S3StoreStats::multipart_commits));
    }
    m.add_gauge("objdirect_rdma_failures_answered_unsettled_total",
                "Failed RDMA transfers answered while the provider still held some of their "
                "operations (the wait for them, one --rdma-op-timeout-ms, expired).",
                stat(&rdma::RdmaStats::failures_answered_unsettled));
  }
  if (auto st = server.start(); !st.ok()) {
    std::cerr << "objdirect-server: " << st.message() << "\n";
    return 1;
  }
  boost::asio::signal_set signals(server.io_context(), SIGINT, SIGTERM);
  // Waiters for RDMA admission hold I/O threads: refuse them first so that stop() joins at once.
  signals.async_wait([&server, eng = *engine](const boost::system::error_code&, int) {
    eng->shutdown();
    server.stop();
  });
  std::string shown_host =
      hopts.host.find(':') != std::string::npos ? "[" + hopts.host + "]" : hopts.host;
  std::printf("objdirect-server listening on %s://%s:%u\n",
              hopts.tls_cert_file.empty() ? "http" : "https", shown_host.c_str(), server.port());
  std::fflush(stdout);
  server.run();
  return 0;
}
