// Metrics: the server's counters and histograms, rendered in the Prometheus text format at
// GET /metrics (unauthenticated requests only; loopback by default, see --metrics-allow).
//
// Every failure path of the server increments something here, so that no failure is silent:
// requests by operation and status, bytes by data path (rdma, http, http-fallback), RDMA
// declines and errors by reason, in-flight transfers, buffer-pool use and request latency.
//
// Thread safety: all methods are thread-safe. Recording takes one short mutex per request; the
// hot per-byte paths record totals once per request, never per chunk.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

namespace objdirect::metrics {

class Registry {
 public:
  // Latency buckets in seconds (Prometheus "le" bounds); +Inf is implicit.
  static constexpr std::array<double, 12> kLatencyBuckets = {
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0, 30.0};

  // One finished S3 request.
  void record_request(const std::string& op, int status, std::chrono::nanoseconds latency);
  // Payload bytes moved, by direction ("in"/"out") and path ("http", "rdma", "http-fallback").
  void add_bytes(const std::string& direction, const std::string& path, std::uint64_t bytes);
  // An RDMA decline (reason: "no-transport", "disabled", ...) or failure (reason: S3 code).
  void rdma_decline(const std::string& reason);
  void rdma_error(const std::string& reason);
  // A token refused before any byte moved (docs/rdma_protocol.md, "Refusals"): unbound-endpoint,
  // bound-to-other-principal, replayed-nonce, expired, replay-cache-full.
  void rdma_refusal(const std::string& reason);

  // Gauges that live elsewhere are sampled at render time.
  using GaugeFn = std::function<double()>;
  void add_gauge(const std::string& name, const std::string& help, GaugeFn fn);

  // The Prometheus text exposition (version 0.0.4).
  std::string render() const;

 private:
  struct Histogram {
    std::array<std::uint64_t, kLatencyBuckets.size()> buckets{};
    std::uint64_t count = 0;
    double sum_s = 0;
  };
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, std::uint64_t> requests_;
  std::map<std::string, Histogram> latency_;  // by operation
  std::map<std::pair<std::string, std::string>, std::uint64_t> bytes_;
  std::map<std::string, std::uint64_t> rdma_declines_;
  std::map<std::string, std::uint64_t> rdma_errors_;
  std::map<std::string, std::uint64_t> rdma_refusals_;
  std::map<std::string, std::pair<std::string, GaugeFn>> gauges_;
};

// Whether `addr` may read /metrics: loopback always, plus addresses matching any entry of
// `allow` (comma list of exact addresses, "*" for any, or CIDR prefixes like "10.0.0.0/8").
bool metrics_allowed(const std::string& addr, const std::string& allow);

}  // namespace objdirect::metrics
