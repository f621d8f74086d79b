// S3Service: the S3 REST API on top of an ObjectStore, plugged into the HTTP server.
//
// It routes path-style (/bucket/key) and virtual-hosted (bucket.DOMAIN) requests, authenticates
// them with SigV4 (header or presigned query), and runs one operation per request. Request bodies
// stream into the store while MD5, SHA-256 and the x-amz-checksum-* algorithms are computed on the
// fly; every checksum is verified before the object is committed, so a failed upload never
// becomes visible. Errors are rendered as S3 XML in exactly one place (errors.cc).
//
// Thread safety: thread-safe; one instance serves every connection.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "server/http/http_server.hpp"
#include "server/metrics/metrics.hpp"
#include "storage/object_store.hpp"

namespace objdirect::rdma {
class RdmaEngine;  // the RDMA data plane (server/rdma), optional
}  // namespace objdirect::rdma

namespace objdirect::s3 {

struct User {
  std::string access_key;
  std::string secret_key;
};

struct S3Options {
  std::string region = "us-east-1";
  // Virtual-hosted addressing: requests to BUCKET.domain address BUCKET. Empty: path-style only.
  std::string domain;
  // access key -> user.
  std::map<std::string, User> users;
  // Requests arrive over TLS (the aws:SecureTransport condition of bucket policies).
  bool secure_transport = false;
  // SSE-C requests (customer keys in headers) are refused unless they arrive over TLS, as AWS
  // refuses them (400 InvalidRequest); true accepts them over plain HTTP too (radosgw's
  // rgw_crypt_require_ssl=false; tests on loopback). docs/sse-c.md.
  bool sse_c_over_http = false;
  // Buffer size for streaming bodies between the socket and the store.
  std::size_t io_buffer_bytes = 1 << 20;
  // Worker threads for blocking RDMA transfers (each active transfer holds one).
  unsigned rdma_threads = 16;
  // Transfers of one chunk run on the I/O thread that received the request instead (in a
  // BlockingScope: a spare takes its place when one blocks), at most this many at once, so
  // that stalled clients cannot hold more I/O threads than that (rdma_ops.cc, run_transfer).
  // 0: every transfer on the worker pool.
  unsigned rdma_inline_transfers_max = 8;
  // Endpoint binding and single use of RDMA tokens (docs/rdma_protocol.md): bound client
  // endpoints kept (LRU beyond it), how long a binding lasts before the endpoint proves itself
  // again (at most limits::rdma_binding_lifetime_max_s), and token nonces remembered (each until
  // its token expires; past it new tokens get 503 SlowDown). 1 Mi nonces cover 5,825 tokens/s
  // for the 180 s a token can live, in at most ~60 MiB.
  std::size_t rdma_bindings_max = 65536;
  std::uint32_t rdma_binding_lifetime_s = 600;
  std::size_t rdma_replay_nonces_max = 1u << 20;
  // Threads that hash PUT bodies (MD5 of the ETag, checksums) while the request's own thread
  // receives and writes the bytes (one chunk in flight per request). 0: hash inline, in the
  // request's thread. objdirect-server defaults to one per core (single large PUTs 1.5x faster
  // with an idle core; no gain, 0.1-0.3 CPU-s/GiB more, on a host with none; docs/BENCHMARKS.md).
  // At most limits::put_digest_threads_max.
  unsigned put_digest_threads = 0;
  // Counters for /metrics (created if null) and who may read them besides loopback.
  std::shared_ptr<metrics::Registry> metrics;
  std::string metrics_allow;
  // JSON-lines access log: a file path, "-" for stderr, empty for none.
  std::string access_log;
  // Lifecycle worker: one pass every lifecycle_interval_ms (0: no worker); a lifecycle "day"
  // lasts lifecycle_day_seconds (tests shorten it); a pass deletes or aborts at most
  // lifecycle_actions_per_pass_max objects / uploads and lists ten times as many entries.
  std::uint32_t lifecycle_interval_ms = 0;
  std::uint64_t lifecycle_day_seconds = 86400;
  std::uint64_t lifecycle_actions_per_pass_max = 1000;
  // The clock that SigV4 dates and presigned expiries are checked against; empty: the system
  // clock. The HTTP fuzz target pins it so that its checked-in signed seeds stay valid.
  std::function<std::chrono::system_clock::time_point()> auth_clock;
};

// Loads "ACCESS_KEY SECRET_KEY" lines ('#' comments, blank lines allowed) from a file.
Result<std::map<std::string, User>> load_credentials_file(const std::string& path);

class S3Service final : public http::Handler {
 public:
  S3Service(S3Options opts, std::shared_ptr<storage::ObjectStore> store);
  ~S3Service() override;

  // Attaches the RDMA data plane; without it every x-amz-rdma-token is declined with 501.
  void set_rdma(std::shared_ptr<rdma::RdmaEngine> rdma);

  boost::asio::awaitable<void> handle(http::Exchange& ex) override;
  metrics::Registry& metrics();
  std::string error_body(Errc code, std::string_view message) override;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace objdirect::s3
