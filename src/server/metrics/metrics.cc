#include "server/metrics/metrics.hpp"

#include <arpa/inet.h>

#include <cstdio>
#include <set>
#include <sstream>

#include "common/assert.hpp"

namespace objdirect::metrics {

namespace {

std::string escape_label(const std::string& v) {
  std::string out;
  for (char ch : v) {
    if (ch == '\\' || ch == '"') out += '\\';
    if (ch == '\n') {
      out += "\\n";
      continue;
    }
    out += ch;
  }
  return out;
}

std::string fmt_double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

// The series render() writes itself (recorded by the S3 layer), which no component may sample.
const std::set<std::string, std::less<>>& own_series() {
  static const std::set<std::string, std::less<>> names = {
      "objdirect_requests_total",      "objdirect_request_duration_seconds",
      "objdirect_payload_bytes_total", "objdirect_rdma_declines_total",
      "objdirect_rdma_errors_total",   "objdirect_rdma_token_refusals_total"};
  return names;
}

bool in_cidr(const std::string& addr, const std::string& cidr) {
  auto slash = cidr.find('/');
  if (slash == std::string::npos) return addr == cidr;
  int bits = std::atoi(cidr.c_str() + slash + 1);
  in_addr a{}, net{};
  if (inet_pton(AF_INET, addr.c_str(), &a) != 1) return false;
  if (inet_pton(AF_INET, cidr.substr(0, slash).c_str(), &net) != 1) return false;
  if (bits <= 0) return true;
  if (bits > 32) return false;
  std::uint32_t mask = bits == 32 ? 0xFFFFFFFFu : ~((1u << (32 - bits)) - 1);
  return (ntohl(a.s_addr) & mask) == (ntohl(net.s_addr) & mask);
}

}  // namespace

void Registry::record_request(const std::string& op, int status, std::chrono::nanoseconds latency) {
  double s = std::chrono::duration<double>(latency).count();
  std::lock_guard lock(mu_);
  ++requests_[{op, status}];
  Histogram& h = latency_[op];
  for (std::size_t i = 0; i < kLatencyBuckets.size(); ++i) {
    if (s <= kLatencyBuckets[i]) ++h.buckets[i];
  }
  ++h.count;
  h.sum_s += s;
}

void Registry::add_bytes(const std::string& direction, const std::string& path,
                         std::uint64_t bytes) {
  std::lock_guard lock(mu_);
  bytes_[{direction, path}] += bytes;
}

void Registry::rdma_decline(const std::string& reason) {
  std::lock_guard lock(mu_);
  ++rdma_declines_[reason];
}

void Registry::rdma_error(const std::string& reason) {
  std::lock_guard lock(mu_);
  ++rdma_errors_[reason];
}

void Registry::rdma_refusal(const std::string& reason) {
  std::lock_guard lock(mu_);
  ++rdma_refusals_[reason];
}

void Registry::add_counter(const std::string& name, const std::string& help, ValueFn fn) {
  OBJDIRECT_ASSERT(name.ends_with("_total"), "a counter's name ends in _total (Prometheus)");
  add_sampled(name, "counter", help, std::move(fn));
}

void Registry::add_gauge(const std::string& name, const std::string& help, ValueFn fn) {
  OBJDIRECT_ASSERT(!name.ends_with("_total"), "a gauge's name does not end in _total");
  add_sampled(name, "gauge", help, std::move(fn));
}

void Registry::add_sampled(const std::string& name, const char* type, const std::string& help,
                           ValueFn fn) {
  OBJDIRECT_ASSERT(name.starts_with("objdirect_"), "every series is named objdirect_*");
  OBJDIRECT_ASSERT(!own_series().contains(name), "the registry's own series are not sampled");
  std::lock_guard lock(mu_);
  const bool added = sampled_.try_emplace(name, Sampled{type, help, std::move(fn)}).second;
  OBJDIRECT_ASSERT(added,
                   "a metric series is registered once (the second would replace the first)");
}

std::string Registry::render() const {
  std::ostringstream o;
  std::lock_guard lock(mu_);
  o << "# HELP objdirect_requests_total S3 requests by operation and HTTP status.\n"
       "# TYPE objdirect_requests_total counter\n";
  for (const auto& [k, v] : requests_) {
    o << "objdirect_requests_total{op=\"" << escape_label(k.first) << "\",status=\"" << k.second
      << "\"} " << v << "\n";
  }
  o << "# HELP objdirect_request_duration_seconds S3 request latency by operation.\n"
       "# TYPE objdirect_request_duration_seconds histogram\n";
  for (const auto& [op, h] : latency_) {
    std::string l = escape_label(op);
    for (std::size_t i = 0; i < kLatencyBuckets.size(); ++i) {
      o << "objdirect_request_duration_seconds_bucket{op=\"" << l << "\",le=\""
        << fmt_double(kLatencyBuckets[i]) << "\"} " << h.buckets[i] << "\n";
    }
    o << "objdirect_request_duration_seconds_bucket{op=\"" << l << "\",le=\"+Inf\"} " << h.count
      << "\n";
    o << "objdirect_request_duration_seconds_sum{op=\"" << l << "\"} " << fmt_double(h.sum_s)
      << "\n";
    o << "objdirect_request_duration_seconds_count{op=\"" << l << "\"} " << h.count << "\n";
  }
  o << "# HELP objdirect_payload_bytes_total Object payload bytes by direction and data path.\n"
       "# TYPE objdirect_payload_bytes_total counter\n";
  for (const auto& [k, v] : bytes_) {
    o << "objdirect_payload_bytes_total{direction=\"" << k.first << "\",path=\"" << k.second
      << "\"} " << v << "\n";
  }
  o << "# HELP objdirect_rdma_declines_total RDMA requests served or refused without RDMA.\n"
       "# TYPE objdirect_rdma_declines_total counter\n";
  for (const auto& [k, v] : rdma_declines_) {
    o << "objdirect_rdma_declines_total{reason=\"" << escape_label(k) << "\"} " << v << "\n";
  }
  o << "# HELP objdirect_rdma_errors_total RDMA requests that failed, by S3 error code.\n"
       "# TYPE objdirect_rdma_errors_total counter\n";
  for (const auto& [k, v] : rdma_errors_) {
    o << "objdirect_rdma_errors_total{reason=\"" << escape_label(k) << "\"} " << v << "\n";
  }
  o << "# HELP objdirect_rdma_token_refusals_total RDMA tokens refused before any byte moved, "
       "by reason (docs/rdma_protocol.md).\n"
       "# TYPE objdirect_rdma_token_refusals_total counter\n";
  for (const auto& [k, v] : rdma_refusals_) {
    o << "objdirect_rdma_token_refusals_total{reason=\"" << escape_label(k) << "\"} " << v << "\n";
  }
  for (const auto& [name, g] : sampled_) {
    o << "# HELP " << name << " " << g.help << "\n# TYPE " << name << " " << g.type << "\n"
      << name << " " << fmt_double(g.fn()) << "\n";
  }
  return o.str();
}

bool metrics_allowed(const std::string& addr, const std::string& allow) {
  if (addr == "127.0.0.1" || addr == "::1" || addr.starts_with("127.") ||
      addr == "::ffff:127.0.0.1") {
    return true;
  }
  std::stringstream ss(allow);
  std::string item;
  while (std::getline(ss, item, ',')) {
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (item == "*") return true;
    if (!item.empty() && in_cidr(addr, item)) return true;
  }
  return false;
}

}  // namespace objdirect::metrics
