#include "bench.hpp"

#include <algorithm>
#include <boost/beast/core/string.hpp>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "common/assert.hpp"

namespace objdirect::bench {
namespace {

template <typename T>
bool parse_number(std::string_view s, T& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

std::optional<std::uint64_t> parse_size(std::string_view text) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0) return std::nullopt;
  std::uint64_t n = 0;
  if (!parse_number(text.substr(0, digits), n) || n == 0) return std::nullopt;
  std::string_view unit = text.substr(digits);
  unsigned shift = 0;
  if (unit.empty() || boost::beast::iequals(unit, "b")) {
    shift = 0;
  } else {
    const char c = unit[0];
    if (c == 'k' || c == 'K') {
      shift = 10;
    } else if (c == 'm' || c == 'M') {
      shift = 20;
    } else if (c == 'g' || c == 'G') {
      shift = 30;
    } else if (c == 't' || c == 'T') {
      shift = 40;
    } else {
      return std::nullopt;
    }
    std::string_view rest = unit.substr(1);
    if (!rest.empty() && !boost::beast::iequals(rest, "ib") && !boost::beast::iequals(rest, "b")) {
      return std::nullopt;
    }
  }
  if (shift > 0 && n > (UINT64_MAX >> shift)) return std::nullopt;
  return n << shift;
}

std::optional<std::vector<std::uint64_t>> parse_size_list(std::string_view text) {
  std::vector<std::uint64_t> out;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    auto one = parse_size(text.substr(0, comma));
    if (!one) return std::nullopt;
    out.push_back(*one);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  if (out.empty()) return std::nullopt;
  return out;
}

std::string format_size(std::uint64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  for (int i = 3; i >= 0; --i) {
    const unsigned shift = 10u * static_cast<unsigned>(i + 1);
    if (bytes >= (1ull << shift) && bytes % (1ull << shift) == 0) {
      return std::to_string(bytes >> shift) + kUnits[i];
    }
  }
  return std::to_string(bytes);
}

void LatencyHistogram::add(std::uint64_t ns) {
  std::size_t i = 0;
  if (ns > 1) {
    i = static_cast<std::size_t>(std::log2(static_cast<double>(ns)) * kSubBuckets);
    if (i >= kBuckets) i = kBuckets - 1;
  }
  ++counts_[i];
  ++count_;
}

void LatencyHistogram::merge(const LatencyHistogram& other) {
  for (std::size_t i = 0; i < kBuckets; ++i) counts_[i] += other.counts_[i];
  count_ += other.count_;
}

double LatencyHistogram::quantile_ns(double q) const {
  if (count_ == 0) return 0;
  if (q < 0) q = 0;
  if (q > 1) q = 1;
  // The smallest bucket whose cumulative count reaches ceil(q * count) (at least the first
  // sample), i.e. the nearest-rank percentile.
  auto rank = static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(count_)));
  if (rank == 0) rank = 1;
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < kBuckets; ++i) {
    seen += counts_[i];
    if (seen >= rank) return std::exp2((static_cast<double>(i) + 0.5) / kSubBuckets);
  }
  return std::exp2(static_cast<double>(kBuckets) / kSubBuckets);
}

std::string LatencyHistogram::encode() const {
  std::string out;
  for (std::size_t i = 0; i < kBuckets; ++i) {
    if (counts_[i] == 0) continue;
    if (!out.empty()) out += ',';
    out += std::to_string(i) + ':' + std::to_string(counts_[i]);
  }
  return out.empty() ? "-" : out;
}

std::optional<LatencyHistogram> LatencyHistogram::decode(std::string_view text) {
  LatencyHistogram h;
  if (text == "-") return h;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    const std::size_t colon = item.find(':');
    if (colon == std::string_view::npos) return std::nullopt;
    std::size_t i = 0;
    std::uint64_t c = 0;
    if (!parse_number(item.substr(0, colon), i) || !parse_number(item.substr(colon + 1), c) ||
        i >= kBuckets) {
      return std::nullopt;
    }
    h.counts_[i] += c;
    h.count_ += c;
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return h;
}

std::optional<std::uint64_t> parse_burst_command(std::string_view line) {
  constexpr std::string_view kPrefix = "burst ";
  if (line.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  std::uint64_t ms = 0;
  if (!parse_number(line.substr(kPrefix.size()), ms) || ms == 0 ||
      ms > limits::bench_burst_ms_max) {
    return std::nullopt;
  }
  return ms;
}

std::vector<std::uint32_t> interleave_order(std::uint32_t paths) {
  OBJDIRECT_ASSERT(paths >= 1 && paths <= limits::bench_interleave_paths_max,
                   "interleave_order: 1 to bench_interleave_paths_max paths");
  if (paths == 1) return {0};
  if (paths == 2 || paths == 3 || paths == 5 || paths == 7) {
    // Prime: stepping by s visits every path, and the steps s = 1 .. paths - 1 give each ordered
    // pair (a, a + s) to exactly one of them. Every cycle starts at 0 and ends at -s, so the
    // step into the next block (or from the last back to the first) is the cycle's own wrap.
    std::vector<std::uint32_t> order;
    order.reserve(static_cast<std::size_t>(paths - 1) * interleave_block_cycles * paths);
    for (std::uint32_t s = 1; s < paths; ++s) {
      for (std::uint32_t c = 0; c < interleave_block_cycles; ++c) {
        for (std::uint32_t k = 0; k < paths; ++k) order.push_back(k * s % paths);
      }
    }
    return order;
  }
  // Hierholzer's algorithm: walk unused edges from the stack's top; a vertex with none left is
  // the circuit's next vertex from the end.
  std::vector<std::vector<std::uint32_t>> unused(paths);
  for (std::uint32_t v = 0; v < paths; ++v) {
    for (std::uint32_t u = paths; u-- > 0;) {
      if (u != v) unused[v].push_back(u);  // popped from the back: the lowest first
    }
  }
  std::vector<std::uint32_t> stack{0}, circuit;
  while (!stack.empty()) {
    const std::uint32_t v = stack.back();
    if (unused[v].empty()) {
      circuit.push_back(v);
      stack.pop_back();
    } else {
      stack.push_back(unused[v].back());
      unused[v].pop_back();
    }
  }
  std::reverse(circuit.begin(), circuit.end());
  circuit.pop_back();  // the walk ends where it began
  return circuit;
}

std::optional<std::uint32_t> learn_auto(const std::function<bool()>& transfer,
                                        const std::function<std::uint64_t()>& learning_calls) {
  std::uint32_t learnt = 0;
  for (std::uint32_t i = 0; i < limits::bench_learn_calls_max; ++i) {
    const auto before = learning_calls();
    if (!transfer()) return std::nullopt;
    if (learning_calls() == before) break;
    ++learnt;
  }
  return learnt;
}

void WorkerResult::merge(const WorkerResult& other) {
  ops += other.ops;
  bytes += other.bytes;
  errors += other.errors;
  rdma_ops += other.rdma_ops;
  fallback_ops += other.fallback_ops;
  cpu_s += other.cpu_s;
  latency.merge(other.latency);
  if (note.empty()) note = other.note;
}

std::string WorkerResult::encode() const {
  std::ostringstream o;
  o.precision(9);
  o << "result ops=" << ops << " bytes=" << bytes << " errors=" << errors << " rdma=" << rdma_ops
    << " fallback=" << fallback_ops << " cpu_s=" << cpu_s << " wall_s=" << wall_s
    << " lat=" << latency.encode() << " note=";
  for (char c : note) o << (c == '\n' || c == '\r' ? ' ' : c);
  return o.str();
}

std::optional<WorkerResult> WorkerResult::decode(std::string_view line) {
  constexpr std::string_view kPrefix = "result ";
  if (line.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  line.remove_prefix(kPrefix.size());
  WorkerResult r;
  bool have_lat = false, have_ops = false;
  while (!line.empty()) {
    const std::size_t eq = line.find('=');
    if (eq == std::string_view::npos) return std::nullopt;
    const std::string_view name = line.substr(0, eq);
    line.remove_prefix(eq + 1);
    if (name == "note") {  // always last: the rest of the line
      r.note = std::string(line);
      break;
    }
    const std::size_t sp = line.find(' ');
    const std::string_view value = line.substr(0, sp);
    line.remove_prefix(sp == std::string_view::npos ? line.size() : sp + 1);
    bool ok = true;
    if (name == "ops") {
      ok = parse_number(value, r.ops);
      have_ops = true;
    } else if (name == "bytes") {
      ok = parse_number(value, r.bytes);
    } else if (name == "errors") {
      ok = parse_number(value, r.errors);
    } else if (name == "rdma") {
      ok = parse_number(value, r.rdma_ops);
    } else if (name == "fallback") {
      ok = parse_number(value, r.fallback_ops);
    } else if (name == "cpu_s" || name == "wall_s") {
      // from_chars for double is in libstdc++ 11+; strtod would accept trailing junk.
      double d = 0;
      ok = parse_number(value, d);
      (name == "cpu_s" ? r.cpu_s : r.wall_s) = d;
    } else if (name == "lat") {
      auto h = LatencyHistogram::decode(value);
      ok = h.has_value();
      if (ok) r.latency = *h;
      have_lat = true;
    }
    if (!ok) return std::nullopt;
  }
  if (!have_lat || !have_ops) return std::nullopt;
  return r;
}

namespace {

std::string json_number(const std::optional<double>& v) {
  if (!v || !std::isfinite(*v)) return "null";
  char b[64];
  std::snprintf(b, sizeof b, "%.4f", *v);
  return b;
}

}  // namespace

std::optional<PairedRatio> paired_auto_ratio(const std::vector<AutoRound>& rounds) {
  PairedRatio out;
  for (const auto& r : rounds) {
    const double best = std::max(r.http_gbps, r.shm_gbps);
    if (best > 0) out.per_round.push_back(r.auto_gbps / best);
  }
  if (out.per_round.empty()) return std::nullopt;
  std::vector<double> sorted = out.per_round;
  std::sort(sorted.begin(), sorted.end());
  out.median = sorted[(sorted.size() - 1) / 2];
  return out;
}

std::string goals_json(const GoalInputs& in) {
  auto find = [&](const std::string& sweep, const std::string& op, const std::string& path,
                  std::uint64_t size, std::uint32_t procs,
                  std::uint32_t threads) -> const GoalPoint* {
    for (const auto& p : in.points) {
      if (p.sweep == sweep && p.op == op && p.path == path && p.size == size && p.procs == procs &&
          p.threads == threads) {
        return &p;
      }
    }
    return nullptr;
  };
  auto pick = [&](std::uint64_t want) {
    // The requested size if measured, else the largest measured size below it.
    std::uint64_t best = 0;
    for (auto s : in.sizes) {
      if (s <= want) best = std::max(best, s);
    }
    return best ? best : (in.sizes.empty() ? 0 : in.sizes.back());
  };
  // A point's GB/s, if it moved anything and, on an RDMA path, really went over RDMA.
  auto gbps = [](const GoalPoint* r) -> std::optional<double> {
    return r && r->ops > 0 && r->rdma_ops + (r->rdma_path ? 0 : r->ops) > 0
               ? std::optional<double>(r->gbps)
               : std::nullopt;
  };
  auto ratio = [](std::optional<double> a, std::optional<double> b) -> std::optional<double> {
    if (!a || !b || *b <= 0) return std::nullopt;
    return *a / *b;
  };
  const std::uint64_t s256 = pick(256ull << 20), s1g = pick(1ull << 30);
  std::optional<double> mc;
  if (auto it = in.memcpy_gbps.find(s256); it != in.memcpy_gbps.end()) mc = it->second;

  struct Figures {
    std::optional<double> p1, p2, p3, p4, p6;
    std::string p2_paths, p2_best = "none", p6_basis = "none";
  };
  // The same figures for one operation; `nginx_sweep` is the sweep holding the P4 pair.
  auto figures = [&](const std::string& op, const std::string& nginx_sweep) {
    Figures f;
    const GoalPoint* shm = find("size", op, "lf-shm", s256, 1, 1);
    const GoalPoint* tcp = find("size", op, "lf-tcp", s256, 1, 1);
    const GoalPoint* http = find("size", op, "http", s256, 1, 1);
    const GoalPoint* http1g = find(nginx_sweep, op, "http", s1g, 1, 1);
    const GoalPoint* nginx1g = find(nginx_sweep, op, "nginx", s1g, 1, 1);
    f.p1 = ratio(gbps(shm), mc);
    f.p2 = ratio(shm && shm->rdma_ops ? shm->cli_cpu_gib : std::nullopt,
                 http ? http->cli_cpu_gib : std::nullopt);
    // P2 for every RDMA path that really went over RDMA, so that the path whose target pays
    // least is named; P2 itself stays on lf-shm, the basis the goal was defined on.
    std::ostringstream paths;
    std::optional<double> best;
    for (const char* path : {"lf-shm", "lf-tcp", "ucx-sm", "ucx-tcp"}) {
      const GoalPoint* r = find("size", op, path, s256, 1, 1);
      const auto v = ratio(r && r->rdma_ops ? r->cli_cpu_gib : std::nullopt,
                           http ? http->cli_cpu_gib : std::nullopt);
      paths << (paths.tellp() > 0 ? ", " : "") << "\"" << path << "\": " << json_number(v);
      if (v && (!best || *v < *best)) {
        best = v;
        f.p2_best = path;
      }
    }
    f.p2_paths = paths.str();
    f.p3 = ratio(gbps(tcp), gbps(http));
    f.p4 = ratio(gbps(http1g), gbps(nginx1g));
    if (!in.procs.empty()) {
      const std::uint32_t pmax = *std::max_element(in.procs.begin(), in.procs.end());
      for (const char* path : {"lf-shm", "http"}) {
        const GoalPoint* one = find("procs", op, path, in.procs_size, 1, in.total_concurrency);
        const GoalPoint* many =
            find("procs", op, path, in.procs_size, pmax, std::max(1u, in.total_concurrency / pmax));
        if (one && many && pmax > 1) {
          f.p6 = ratio(gbps(many), gbps(one));
          std::string upper = op;
          for (auto& ch : upper) ch = static_cast<char>(std::toupper(ch));
          f.p6_basis = std::string(path) + " " + upper + " " + format_size(in.procs_size) + ", " +
                       std::to_string(pmax) + " procs vs 1 at total concurrency " +
                       std::to_string(in.total_concurrency);
          break;
        }
      }
    }
    return f;
  };
  const Figures get = figures("get", "size");
  const Figures put = figures("put", "single");
  const std::string z256 = format_size(s256), z1g = format_size(s1g);

  std::ostringstream j;
  j << "{\"P1\": " << json_number(get.p1) << ", \"P2\": " << json_number(get.p2)
    << ", \"P3\": " << json_number(get.p3) << ", \"P4\": " << json_number(get.p4)
    << ", \"P5\": null, \"P6\": " << json_number(get.p6) << ", \"P2_by_path\": {" << get.p2_paths
    << "}, \"P2_best\": \"" << get.p2_best << "\"";
  j << ", \"P1_put\": " << json_number(put.p1) << ", \"P2_put\": " << json_number(put.p2)
    << ", \"P3_put\": " << json_number(put.p3) << ", \"P4_put\": " << json_number(put.p4)
    << ", \"P6_put\": " << json_number(put.p6) << ", \"P2_put_by_path\": {" << put.p2_paths
    << "}, \"P2_put_best\": \"" << put.p2_best << "\"";
  j << ", \"basis\": {\"P1\": \"lf-shm GET " << z256 << " / memcpy\", \"P2\": "
    << "\"client CPU-s/GiB lf-shm GET / http GET " << z256 << "\", \"P3\": "
    << "\"lf-tcp GET / http GET " << z256 << "\", \"P4\": \"http GET " << z1g
    << " objdirect / nginx\", \"P6\": \"" << get.p6_basis << "\"";
  j << ", \"P1_put\": \"lf-shm PUT " << z256 << " / memcpy\", \"P2_put\": "
    << "\"client CPU-s/GiB lf-shm PUT / http PUT " << z256 << "\", \"P3_put\": "
    << "\"lf-tcp PUT / http PUT " << z256 << "\", \"P4_put\": \"http PUT " << z1g
    << " as one request, objdirect / nginx (WebDAV)\", \"P6_put\": \"" << put.p6_basis << "\"}}";
  return j.str();
}

}  // namespace objdirect::bench
