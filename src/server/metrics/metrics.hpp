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

#include "common/metrics_sink.hpp"

namespace objdirect::metrics {

// The S3 layer's own series (requests, latency, payload bytes, RDMA declines, errors, refusals)
// are recorded here directly; every other component registers its series through the Sink
// interface (common/metrics_sink.hpp). The list of all series is docs/metrics.md.
class Registry final : public Sink {
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

  // Values that live in other components, sampled at render time (Sink). Each name once, and
  // not one of the series above; a counter's name ends in _total, a gauge's does not. Breaking
  // either rule is a programmer error (OBJDIRECT_ASSERT).
  void add_counter(const std::string& name, const std::string& help, ValueFn fn) override;
  void add_gauge(const std::string& name, const std::string& help, ValueFn fn) override;

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
  struct Sampled {
    const char* type;  // "counter" or "gauge"
    std::string help;
    ValueFn fn;
  };
  void add_sampled(const std::string& name, const char* type, const std::string& help, ValueFn fn);
  std::map<std::string, Sampled> sampled_;
};

// Whether `addr` may read /metrics: loopback always, plus addresses matching any entry of
// `allow` (comma list of exact addresses, "*" for any, or CIDR prefixes like "10.0.0.0/8").
bool metrics_allowed(const std::string& addr, const std::string& allow);

}  // namespace objdirect::metrics
