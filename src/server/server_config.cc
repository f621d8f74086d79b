#include "server/server_config.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <sstream>
#include <thread>

#include "common/limits.hpp"
#include "token/binding.hpp"
#include "transport/transport.hpp"

namespace objdirect::server {

namespace {

// The default of --put-digest-threads is one per core, at most this many.
constexpr unsigned put_digest_threads_default_max = 16;
// Store calls of the gateway block on the upstream: its default of --threads (0: automatic).
constexpr unsigned gateway_threads_default = 16;

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

ParsedConfig refuse(std::string message) {
  ParsedConfig r;
  r.exit_code = 2;
  r.err = "objdirect-server: " + message + "\n";
  return r;
}

}  // namespace

ParsedConfig parse_server_config(int argc, const char* const* argv) {
  ServerConfig c;
  CLI::App app{"objdirect-server: S3 over HTTP with an RDMA data plane"};
  std::string listen = "127.0.0.1:9000";
  std::string access_key, secret_key, credentials_file;
  std::uint32_t header_timeout_ms = limits::header_timeout_ms;
  std::uint32_t idle_timeout_ms = limits::idle_timeout_ms;
  std::uint32_t request_timeout_ms = limits::request_timeout_ms;
  bool no_fsync = false;
  auto& g = c.store.gateway;
  auto& r = c.store.rados;

  app.add_option("--listen", listen, "HOST:PORT to listen on (port 0 picks a free one)")
      ->envname("OBJDIRECT_LISTEN")
      ->capture_default_str();
  app.add_option("--data", c.store.data_dir, "Data directory")
      ->envname("OBJDIRECT_DATA")
      ->capture_default_str();
  app.add_option("--backend", c.store.backend,
                 "Object store: local (--data), rados (--rados-conf) or s3 (gateway: --upstream)")
      ->envname("OBJDIRECT_BACKEND")
      ->check(CLI::IsMember({"local", "rados", "s3"}))
      ->capture_default_str();
  // Gateway mode (--backend s3): the objects live in an upstream S3 service.
  app.add_option("--upstream", g.upstream,
                 "Upstream S3 endpoint http(s)://HOST[:PORT] (--backend s3; path-style)")
      ->envname("OBJDIRECT_UPSTREAM");
  app.add_option("--upstream-region", g.region,
                 "Signing region of the upstream (default: AWS_REGION / the profile's / us-east-1)")
      ->envname("OBJDIRECT_UPSTREAM_REGION");
  app.add_option("--upstream-profile", g.profile,
                 "AWS profile with the upstream credentials (default: AWS_* environment, then "
                 "AWS_PROFILE / default)")
      ->envname("OBJDIRECT_UPSTREAM_PROFILE");
  app.add_option("--upstream-connections-max", g.connections, "Upstream connection pool size")
      ->envname("OBJDIRECT_UPSTREAM_CONNECTIONS_MAX")
      ->capture_default_str();
  app.add_option("--upstream-connect-timeout-ms", g.connect_timeout_ms,
                 "Upstream connect timeout (then 503 ServiceUnavailable)")
      ->envname("OBJDIRECT_UPSTREAM_CONNECT_TIMEOUT_MS")
      ->capture_default_str();
  app.add_option("--upstream-low-speed-time-s", g.low_speed_time_s,
                 "An upstream transfer moving no byte this long fails (503)")
      ->envname("OBJDIRECT_UPSTREAM_LOW_SPEED_TIME_S")
      ->capture_default_str();
  app.add_option("--upstream-multipart-threshold-bytes", g.multipart_threshold_bytes,
                 "Objects above this size go upstream as a parallel multipart upload")
      ->envname("OBJDIRECT_UPSTREAM_MULTIPART_THRESHOLD_BYTES")
      ->capture_default_str();
  app.add_option("--upstream-part-bytes", g.part_bytes, "Part size of those multipart uploads")
      ->envname("OBJDIRECT_UPSTREAM_PART_BYTES")
      ->capture_default_str();
  app.add_option("--upstream-parallel-parts", g.parallel_parts, "UploadParts in flight per object")
      ->envname("OBJDIRECT_UPSTREAM_PARALLEL_PARTS")
      ->capture_default_str();
  app.add_option("--upstream-parallel-gets", g.parallel_gets,
                 "Ranged GETs in flight per large read (an RDMA staging buffer)")
      ->envname("OBJDIRECT_UPSTREAM_PARALLEL_GETS")
      ->capture_default_str();
  auto* retry_attempts_opt =
      app.add_option("--upstream-retry-attempts", g.retry_attempts,
                     "Attempts per upstream request: 5xx, 429 and refused or reset connections are "
                     "retried with exponential backoff and full jitter (1: no retry)")
          ->envname("OBJDIRECT_UPSTREAM_RETRY_ATTEMPTS")
          ->capture_default_str();
  app.add_option("--upstream-conditional-writes", g.conditional_writes,
                 "Who checks If-None-Match: * / If-Match on PutObject and "
                 "CompleteMultipartUpload: auto (probe the upstream once per bucket), upstream, "
                 "or gateway (a HEAD first, under a per-key lock; docs/scale-out.md)")
      ->envname("OBJDIRECT_UPSTREAM_CONDITIONAL_WRITES")
      ->check(CLI::IsMember({"auto", "upstream", "gateway"}))
      ->capture_default_str();
  app.add_option("--gateway-spool-dir", g.spool_dir,
                 "Where uploads are spooled before the write-through (default: $TMPDIR or /tmp)")
      ->envname("OBJDIRECT_GATEWAY_SPOOL_DIR");
  app.add_option("--gateway-spool-memory-bytes", g.spool_memory_bytes,
                 "Bytes of one upload kept in memory before spilling to the spool dir")
      ->envname("OBJDIRECT_GATEWAY_SPOOL_MEMORY_BYTES")
      ->capture_default_str();
  app.add_option("--gateway-spool-bytes-max", g.spool_bytes_max,
                 "Largest object or part the gateway spools")
      ->envname("OBJDIRECT_GATEWAY_SPOOL_BYTES_MAX")
      ->capture_default_str();
  app.add_option("--gateway-state-bucket", g.state_bucket,
                 "Upstream bucket where the gateway keeps bucket owners and policies, hidden "
                 "from its clients (created when missing; without it bucket policies answer "
                 "NotImplemented; docs/scale-out.md)")
      ->envname("OBJDIRECT_GATEWAY_STATE_BUCKET");
  app.add_option("--gateway-document-cache-ttl-ms", g.document_cache_ttl_ms,
                 "How long the gateway serves a bucket's CORS rules, owner and policy before "
                 "reading them from the upstream again (0: every time)")
      ->envname("OBJDIRECT_GATEWAY_DOCUMENT_CACHE_TTL_MS")
      ->capture_default_str();
  app.add_option("--gateway-document-cache-entries", g.document_cache_entries,
                 "Bucket documents the gateway caches (least recently used dropped first)")
      ->envname("OBJDIRECT_GATEWAY_DOCUMENT_CACHE_ENTRIES")
      ->capture_default_str();
  app.add_option("--rados-conf", r.conf_file, "ceph.conf of the cluster (--backend rados)")
      ->envname("OBJDIRECT_RADOS_CONF");
  app.add_option("--rados-pool-prefix", r.pool_prefix,
                 "Pools PREFIX.meta and PREFIX.data (created when missing)")
      ->envname("OBJDIRECT_RADOS_POOL_PREFIX")
      ->capture_default_str();
  app.add_option("--rados-stripe-bytes", r.stripe_bytes,
                 "Stripe object size for new pools (64 KiB..64 MiB)")
      ->envname("OBJDIRECT_RADOS_STRIPE_BYTES")
      ->capture_default_str();
  app.add_option("--rados-index-shards", r.index_shards,
                 "Index shards of new buckets (a power of two)")
      ->envname("OBJDIRECT_RADOS_INDEX_SHARDS")
      ->capture_default_str();
  app.add_option("--rados-gc-grace-s", r.gc_grace_s,
                 "Seconds a replaced object's data stays readable (open readers)")
      ->envname("OBJDIRECT_RADOS_GC_GRACE_S")
      ->capture_default_str();
  app.add_option("--rados-gc-interval-s", r.gc_interval_s, "Seconds between GC passes")
      ->envname("OBJDIRECT_RADOS_GC_INTERVAL_S")
      ->capture_default_str();
  app.add_option("--rados-intent-expire-s", r.intent_expire_s,
                 "Seconds after which an uncommitted write's data is garbage")
      ->envname("OBJDIRECT_RADOS_INTENT_EXPIRE_S")
      ->capture_default_str();
  app.add_option("--rados-bucket-cache", r.bucket_cache_entries,
                 "Bucket records cached per server (0: read the record on every request)")
      ->envname("OBJDIRECT_RADOS_BUCKET_CACHE")
      ->capture_default_str();
  // The read-through cache (storage/cache): meant for the gateway backend, where every backend
  // call is a request to a remote S3; harmless (but of little use) in front of the others.
  auto* cache_dir_opt =
      app.add_option("--cache-dir", c.store.cache.dir,
                     "Read-through block cache on local disk in front of the backend (meant for "
                     "the gateway backend); needs --cache-bytes-max")
          ->envname("OBJDIRECT_CACHE_DIR");
  auto* cache_bytes_opt =
      app.add_option("--cache-bytes-max", c.store.cache.bytes_max,
                     "Disk bytes the cache may use (0: metadata only, data passes through)")
          ->envname("OBJDIRECT_CACHE_BYTES_MAX");
  auto* cache_ttl_opt =
      app.add_option("--cache-ttl-s", c.store.cache.ttl_s,
                     "Seconds cached metadata is trusted before revalidation (0: every GET)")
          ->envname("OBJDIRECT_CACHE_TTL_S")
          ->capture_default_str();
  auto* cache_block_opt = app.add_option("--cache-block-bytes", c.store.cache.block_bytes,
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
  app.add_option("--region", c.s3.region, "Region name")
      ->envname("OBJDIRECT_REGION")
      ->capture_default_str();
  app.add_option("--domain", c.s3.domain, "Domain for virtual-hosted addressing (BUCKET.DOMAIN)")
      ->envname("OBJDIRECT_DOMAIN");
  app.add_option("--threads", c.http.threads,
                 "The most I/O threads, spares in place of blocked ones included (0: automatic)")
      ->envname("OBJDIRECT_THREADS");
  app.add_option("--io-threads", c.http.io_threads,
                 "I/O threads that run requests while none blocks (0: automatic: one per core, "
                 "at least 4; with --backend s3 or rados every one of --threads)")
      ->envname("OBJDIRECT_IO_THREADS");
  bool shared_io_context = false;
  app.add_flag("--shared-io-context", shared_io_context,
               "One io_context shared by every I/O thread, instead of one per thread with the "
               "connections spread over them (always so with --backend s3 or rados)")
      ->envname("OBJDIRECT_SHARED_IO_CONTEXT");
  app.add_option("--tcp-congestion", c.http.tcp_congestion,
                 "TCP congestion control of the accepted connections, e.g. cubic (default: the "
                 "kernel's; docs/BENCHMARKS.md, \"TCP congestion control\")")
      ->envname("OBJDIRECT_TCP_CONGESTION");
  app.add_option("--header-bytes-max", c.http.header_bytes_max, "Largest request header section")
      ->envname("OBJDIRECT_HEADER_BYTES_MAX")
      ->capture_default_str();
  app.add_option("--connections-max", c.http.connections_max, "Most concurrent connections")
      ->envname("OBJDIRECT_CONNECTIONS_MAX")
      ->capture_default_str();
  app.add_option("--unread-body-drain-bytes-max", c.http.unread_body_drain_bytes_max,
                 "Most of a request body read and discarded after an early answer, before closing")
      ->envname("OBJDIRECT_UNREAD_BODY_DRAIN_BYTES_MAX")
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
  c.s3.put_digest_threads =
      std::clamp(std::thread::hardware_concurrency(), 1u, put_digest_threads_default_max);
  app.add_option("--put-digest-threads", c.s3.put_digest_threads,
                 "Threads that hash PUT bodies (MD5, checksums) while the request's thread "
                 "receives and writes them (default: one per core, at most 16); 0 hashes inline")
      ->envname("OBJDIRECT_PUT_DIGEST_THREADS")
      ->check(CLI::Range(0u, limits::put_digest_threads_max))
      ->capture_default_str();
  c.s3.lifecycle_interval_ms = 60'000;
  app.add_option("--lifecycle-interval-ms", c.s3.lifecycle_interval_ms,
                 "Pause between passes of the bucket lifecycle worker; 0 runs no worker")
      ->envname("OBJDIRECT_LIFECYCLE_INTERVAL_MS")
      ->capture_default_str();
  app.add_option("--lifecycle-day-seconds", c.s3.lifecycle_day_seconds,
                 "Length of a lifecycle day (Expiration Days, DaysAfterInitiation); tests "
                 "shorten it")
      ->envname("OBJDIRECT_LIFECYCLE_DAY_SECONDS")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{86400}))
      ->capture_default_str();
  app.add_option("--lifecycle-actions-per-pass-max", c.s3.lifecycle_actions_per_pass_max,
                 "Most objects deleted plus uploads aborted by one lifecycle pass")
      ->envname("OBJDIRECT_LIFECYCLE_ACTIONS_PER_PASS_MAX")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1'000'000}))
      ->capture_default_str();
  app.add_option("--lmdb-map-bytes", c.store.lmdb_map_bytes,
                 "Largest size of the local backend's metadata (LMDB map, sparse); smaller for "
                 "valgrind, which cannot map the default")
      ->check(CLI::Range(std::uint64_t{1} << 20, std::uint64_t{1} << 40))
      ->capture_default_str();
  // The names come from the one fabric table, in the order --fabric auto tries them.
  std::string fabric_help = "RDMA transports: auto, none, or a comma list of ";
  for (const auto& f : transport::fabric_table()) {
    if (&f != transport::fabric_table().data()) fabric_help += ", ";
    fabric_help += f.name;
  }
  app.add_option("--fabric", c.rdma.fabrics, fabric_help)
      ->envname("OBJDIRECT_FABRIC")
      ->capture_default_str();
  app.add_option("--rdma-buffer-pool-bytes", c.rdma.buffer_pool_bytes, "Registered staging memory")
      ->envname("OBJDIRECT_RDMA_BUFFER_POOL_BYTES")
      ->capture_default_str();
  app.add_option("--rdma-chunk-bytes", c.rdma.chunk_bytes, "Size of one staging buffer")
      ->envname("OBJDIRECT_RDMA_CHUNK_BYTES")
      ->capture_default_str();
  bool staged_get = false;
  app.add_flag("--rdma-staged-get", staged_get,
               "GET over libfabric tcp/shm copies through staging buffers instead of writing "
               "from a mapping of the object's files")
      ->envname("OBJDIRECT_RDMA_STAGED_GET");
  auto* inline_opt =
      app.add_option(
             "--rdma-inline-transfers-max", c.s3.rdma_inline_transfers_max,
             "RDMA transfers of one chunk run on the I/O thread of their request (no hand-off "
             "to the RDMA worker pool), at most this many at once; 0: all on the pool")
          ->envname("OBJDIRECT_RDMA_INLINE_TRANSFERS_MAX")
          ->check(CLI::Range(0u, limits::rdma_inline_transfers_max))
          ->capture_default_str();
  app.add_option("--rdma-zero-copy-min-bytes", c.rdma.zero_copy_get_min_bytes,
                 "GETs of fewer bytes copy through staging buffers even without --rdma-staged-get "
                 "(mapping a small range costs more than the copy)")
      ->envname("OBJDIRECT_RDMA_ZERO_COPY_MIN_BYTES")
      ->capture_default_str();
  app.add_flag("--sse-c-over-http", c.s3.sse_c_over_http,
               "Accept SSE-C (customer-key) requests over plain HTTP; by default they must come "
               "over TLS, as AWS requires (docs/sse-c.md)")
      ->envname("OBJDIRECT_SSE_C_OVER_HTTP");
  app.add_option("--rdma-inflight-bytes-max", c.rdma.inflight_bytes_max,
                 "Staging bytes all RDMA transfers may hold at once")
      ->envname("OBJDIRECT_RDMA_INFLIGHT_BYTES_MAX")
      ->capture_default_str();
  app.add_option("--rdma-client-inflight-bytes-max", c.rdma.per_client_inflight_bytes_max,
                 "Staging bytes one client's transfers may hold at once")
      ->envname("OBJDIRECT_RDMA_CLIENT_INFLIGHT_BYTES_MAX")
      ->capture_default_str();
  std::uint32_t rdma_op_timeout_ms = static_cast<std::uint32_t>(c.rdma.op_timeout.count());
  app.add_option("--rdma-op-timeout-ms", rdma_op_timeout_ms,
                 "Longest wait for one RDMA operation (a dead or stalled client)")
      ->envname("OBJDIRECT_RDMA_OP_TIMEOUT_MS")
      ->capture_default_str();
  app.add_option("--rdma-retired-buffers-max", c.rdma.retired_buffers_max,
                 "Staging buffers retired after timed-out operations (a dead client) held at most "
                 "before new RDMA transfers are declined (clients then use HTTP)")
      ->envname("OBJDIRECT_RDMA_RETIRED_BUFFERS_MAX")
      ->capture_default_str();
  std::uint32_t rdma_reap_interval_ms = static_cast<std::uint32_t>(c.rdma.reap_interval.count());
  app.add_option("--rdma-reap-interval-ms", rdma_reap_interval_ms,
                 "How long a retired staging buffer stays retired at least; it is freed once safe "
                 "after that (looked at again every 100 ms while not yet known safe)")
      ->envname("OBJDIRECT_RDMA_REAP_INTERVAL_MS")
      ->check(CLI::Range(1u, 3'600'000u))
      ->capture_default_str();
  std::uint32_t rdma_admission_wait_ms =
      static_cast<std::uint32_t>(c.rdma.admission_wait_max.count());
  app.add_option("--rdma-admission-wait-ms", rdma_admission_wait_ms,
                 "Longest an RDMA transfer waits (FIFO) for a staging buffer before it is refused "
                 "with SlowDown (0: refuse at once)")
      ->envname("OBJDIRECT_RDMA_ADMISSION_WAIT_MS")
      ->check(CLI::Range(0u, 600'000u))
      ->capture_default_str();
  auto* waiters_opt =
      app.add_option("--rdma-admission-waiters-max", c.rdma.admission_waiters_max,
                     "RDMA transfers waiting for a staging buffer at most (each holds an I/O "
                     "thread; past it, SlowDown at once); at most half of --threads")
          ->envname("OBJDIRECT_RDMA_ADMISSION_WAITERS_MAX")
          ->capture_default_str();
  app.add_option("--rdma-bindings-max", c.s3.rdma_bindings_max,
                 "Client endpoints remembered as bound to their access key (least recently used "
                 "evicted beyond it; docs/rdma_protocol.md)")
      ->envname("OBJDIRECT_RDMA_BINDINGS_MAX")
      ->check(CLI::Range(std::size_t{1}, limits::rdma_bindings_max))
      ->capture_default_str();
  app.add_option("--rdma-binding-lifetime-s", c.s3.rdma_binding_lifetime_s,
                 "Seconds a client endpoint stays bound before it proves itself again")
      ->envname("OBJDIRECT_RDMA_BINDING_LIFETIME_S")
      ->check(CLI::Range(1u, limits::rdma_binding_lifetime_max_s))
      ->capture_default_str();
  app.add_option("--rdma-replay-nonces-max", c.s3.rdma_replay_nonces_max,
                 "RDMA token nonces remembered, each until its token expires (single use; past "
                 "it new tokens get SlowDown); about 56 bytes each")
      ->envname("OBJDIRECT_RDMA_REPLAY_NONCES_MAX")
      ->check(CLI::Range(std::size_t{1}, limits::rdma_replay_nonces_max))
      ->capture_default_str();
  app.add_option("--tls-cert", c.http.tls_cert_file, "PEM certificate chain: serve HTTPS")
      ->envname("OBJDIRECT_TLS_CERT");
  app.add_option("--tls-key", c.http.tls_key_file, "PEM private key for --tls-cert")
      ->envname("OBJDIRECT_TLS_KEY");
  app.add_option("--metrics-allow", c.s3.metrics_allow,
                 "Besides loopback, who may GET /metrics: comma list of addresses or CIDRs, or *")
      ->envname("OBJDIRECT_METRICS_ALLOW");
  app.add_option("--access-log", c.s3.access_log, "JSON-lines access log: a file, or - for stderr")
      ->envname("OBJDIRECT_ACCESS_LOG");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    ParsedConfig p;
    std::ostringstream out, err;
    p.exit_code = app.exit(e, out, err);
    p.out = out.str();
    p.err = err.str();
    return p;
  }

  if (!split_listen(listen, c.http.host, c.http.port)) {
    return refuse("--listen must be HOST:PORT, got '" + listen + "'");
  }
  c.http.header_timeout = std::chrono::milliseconds(header_timeout_ms);
  c.http.idle_timeout = std::chrono::milliseconds(idle_timeout_ms);
  c.http.request_timeout = std::chrono::milliseconds(request_timeout_ms);
  c.rdma.local_host = c.http.host;
  c.rdma.op_timeout = std::chrono::milliseconds(rdma_op_timeout_ms);
  c.rdma.reap_interval = std::chrono::milliseconds(rdma_reap_interval_ms);
  c.rdma.admission_wait_max = std::chrono::milliseconds(rdma_admission_wait_ms);
  c.rdma.zero_copy_get = !staged_get;
  c.store.fsync = !no_fsync;
  g.retry_attempts_given = retry_attempts_opt->count() > 0;
  if (!credentials_file.empty()) {
    auto users = s3::load_credentials_file(credentials_file);
    if (!users.ok()) return refuse(users.status().message());
    c.s3.users = *users;
  }
  if (!access_key.empty() || !secret_key.empty()) {
    if (access_key.empty() || secret_key.empty()) {
      return refuse("--access-key and --secret-key go together");
    }
    c.s3.users[access_key] = s3::User{access_key, secret_key};
  }
  c.s3.secure_transport = !c.http.tls_cert_file.empty();
  if (c.s3.users.empty()) {
    return refuse("no credentials: give --access-key/--secret-key or --credentials");
  }

  if (cache_dir_opt->count() == 0) {
    for (const auto* o : {cache_bytes_opt, cache_ttl_opt, cache_block_opt}) {
      if (o->count() > 0) return refuse(o->get_name() + " needs --cache-dir");
    }
  } else {
    if (cache_bytes_opt->count() == 0) {
      return refuse("--cache-dir needs --cache-bytes-max (the disk bytes the cache may use)");
    }
    if (c.store.backend == "local") {
      // The cache deletes files it does not recognise: it must not share the data directory.
      std::error_code ec;
      const auto cd = std::filesystem::weakly_canonical(c.store.cache.dir, ec).string() + "/";
      const auto dd = std::filesystem::weakly_canonical(c.store.data_dir, ec).string() + "/";
      if (cd.starts_with(dd) || dd.starts_with(cd)) {
        return refuse("--cache-dir and --data must not contain each other");
      }
    }
  }
  if (c.store.backend == "s3") {
    if (g.upstream.empty()) return refuse("--backend s3 needs --upstream http(s)://HOST[:PORT]");
    if (c.http.threads == 0) c.http.threads = gateway_threads_default;
  }
  c.http.io_context_per_thread = !shared_io_context;
  if (c.store.backend != "local") {
    // Every call of these backends waits on the network, and only the local backend's blocking
    // calls are marked for the hand-off (common/blocking.hpp): run every thread, always, on one
    // shared io_context, so that a thread waiting on the network holds up only its own request.
    if (c.http.io_threads == 0) {
      c.http.io_threads = std::numeric_limits<unsigned>::max();  // HttpServer clamps to threads
    }
    c.http.io_context_per_thread = false;
  }
  // Admission waiters block the I/O threads that run send()/receive(): keep at least half of
  // them free for everything else (threads 0: the server picks at least 32, above the default).
  if (c.http.threads != 0 && c.rdma.admission_waiters_max > c.http.threads / 2) {
    if (waiters_opt->count() > 0) {
      return refuse("--rdma-admission-waiters-max must be at most half of --threads (" +
                    std::to_string(c.http.threads / 2) + ")");
    }
    c.rdma.admission_waiters_max = c.http.threads / 2;
  }
  // The same for transfers that run on an I/O thread (a stalled client holds one).
  if (c.http.threads != 0 && c.s3.rdma_inline_transfers_max > c.http.threads / 2) {
    if (inline_opt->count() > 0) {
      return refuse("--rdma-inline-transfers-max must be at most half of --threads (" +
                    std::to_string(c.http.threads / 2) + ")");
    }
    c.s3.rdma_inline_transfers_max = c.http.threads / 2;
  }
  ParsedConfig p;
  p.config = std::move(c);
  return p;
}

}  // namespace objdirect::server
