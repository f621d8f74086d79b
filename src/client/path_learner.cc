// PathLearner (path_learner.hpp): per direction and size class, the estimate of each way from
// its last clean calls, the learning order, and the probes.
#include "client/path_learner.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>

#include "common/assert.hpp"

namespace objdirect::client {

int PathLearner::size_class(std::uint64_t bytes) {
  OBJDIRECT_ASSERT(bytes > 0, "a size class needs at least one byte");
  return std::bit_width(bytes) - 1;
}

double PathLearner::Samples::estimate(std::uint64_t calls) const {
  // The throughput of the kept calls (the harmonic mean of their rates: the classes' calls move
  // about the same bytes) without the slowest quarter, at least one from 2 samples: a call that
  // connected the client's RDMA peer (30-120 ms for a 1 MiB GET that then takes 0.4 ms) or met a
  // busy machine says little about the next ones. Of the kept calls, those of the class's last
  // sample_age_max calls, and the newest samples_min in any case.
  const std::uint32_t kept = std::min(count, samples_kept);
  std::array<double, samples_kept> s{};
  std::uint32_t n = 0;
  for (std::uint32_t j = 0; j < kept; ++j) {  // newest first
    const std::uint32_t i = (count - 1 - j) % samples_kept;
    if (j < samples_min || calls - at[i] <= sample_age_max) s[n++] = rates[i];
  }
  if (n == 0) return 0;
  std::sort(s.begin(), s.begin() + n);
  const std::uint32_t drop = n >= 2 ? (n + 3) / 4 : 0;
  double inverse = 0;
  for (std::uint32_t i = drop; i < n; ++i) inverse += 1 / s[i];
  return static_cast<double>(n - drop) / inverse;
}

void PathLearner::Samples::add(double r, std::uint64_t calls) {
  rates[count % samples_kept] = r;
  at[count % samples_kept] = calls;
  ++count;
}

PathLearner::Class& PathLearner::at(Dir dir, std::uint64_t bytes) {
  return classes_[static_cast<int>(dir)][static_cast<std::size_t>(size_class(bytes))];
}

const PathLearner::Class& PathLearner::at(Dir dir, std::uint64_t bytes) const {
  return classes_[static_cast<int>(dir)][static_cast<std::size_t>(size_class(bytes))];
}

namespace {
std::string gbps(double bytes_per_s) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.2f", bytes_per_s / 1e9);
  return b;
}
}  // namespace

PathLearner::Pick PathLearner::pick(Dir dir, std::uint64_t bytes) {
  std::lock_guard lk(mu_);
  Class& c = at(dir, bytes);
  ++c.calls;
  Samples& rdma = c.way[0];
  Samples& http = c.way[1];
  Pick p;
  if (rdma.count < samples_min || http.count < samples_min) {
    // Learning: RDMA's samples_min calls first (so a process that makes only a few calls of a
    // size, the CLI copying one file, moves them all over RDMA as before), then HTTP's. Counted
    // by picks, so that calls in flight at once do not all measure the same way; once both have
    // been picked enough but not all have recorded, RDMA.
    p.learning = true;
    const bool take_http = rdma.picked >= samples_min && http.picked < samples_min;
    p.way = take_http ? Way::http : Way::rdma;
    ++(take_http ? http : rdma).picked;
    if (take_http) p.reason = "auto: measuring HTTP at this size against RDMA";
    return p;
  }
  const double r = rdma.estimate(c.calls);
  const double h = http.estimate(c.calls);
  const bool http_faster = c.decided == Way::rdma ? h > r * margin : h > r;
  c.decided = http_faster ? Way::http : Way::rdma;
  if (c.probe_left > 0) {
    // The probe's next call, on the way its first took (a record in between may have turned
    // the estimates).
    --c.probe_left;
    ++c.since_probe;
    p.probe = true;
    p.way = c.probe_way;
  } else {
    const std::uint64_t every =
        http_faster ? probe_interval(h, r, rdma.count) : probe_interval(r, h, http.count);
    p.probe = ++c.since_probe >= every;
    p.way = http_faster != p.probe ? Way::http : Way::rdma;
    if (p.probe) {
      c.since_probe = 0;
      c.probe_left = probe_calls - 1;
      c.probe_way = p.way;
      p.warmup = true;
    }
  }
  if (p.way == Way::http) {
    p.reason = p.probe ? "auto: probing HTTP at this size (RDMA measured " + gbps(r) +
                             " GB/s, HTTP " + gbps(h) + ")"
                       : "auto: HTTP measured faster at this size (" + gbps(h) +
                             " GB/s against RDMA's " + gbps(r) + ")";
  }
  return p;
}

std::uint64_t PathLearner::probe_interval(double faster, double slower,
                                          std::uint32_t slower_count) {
  if (slower <= 0 || faster <= slower || slower_count < samples_min) return probe_every;
  const double spaced = std::ceil(probe_calls * (faster / slower - 1) * probe_cost_inverse);
  auto every = static_cast<std::uint64_t>(std::clamp<double>(spaced, probe_every, probe_every_max));
  // Until the slower way's estimate rests on samples_kept calls it may be a warming client's
  // (AWrongStartIsCorrectedByTheProbes): the first probe may cost 4 times the share, and each
  // gap after it is at most twice the one before, so that such a start is corrected within a
  // few gaps while a true one costs a few probes, not samples_kept of them.
  if (slower_count < samples_kept) {
    const std::uint64_t first = std::max<std::uint64_t>(probe_every, every / 4);
    every = std::min(every, first << (slower_count - samples_min));
  }
  return every;
}

void PathLearner::record(Dir dir, std::uint64_t bytes, Way way, std::uint64_t moved,
                         double seconds) {
  OBJDIRECT_ASSERT(seconds > 0, "a call takes some time");
  std::lock_guard lk(mu_);
  Class& c = at(dir, bytes);
  c.way[way == Way::rdma ? 0 : 1].add(static_cast<double>(moved) / seconds, c.calls);
}

double PathLearner::rate(Dir dir, std::uint64_t bytes, Way way) const {
  std::lock_guard lk(mu_);
  const Class& c = at(dir, bytes);
  return c.way[way == Way::rdma ? 0 : 1].estimate(c.calls);
}

}  // namespace objdirect::client
