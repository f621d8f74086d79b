// PathLearner: auto's measured choice between RDMA and HTTP above the crossover (docs/client.md,
// "The fastest path"). The fixed crossover (rdma_min_bytes, rdma_put_min_bytes) decides below
// it; above it, which path is faster depends on the machine: over an RDMA NIC RDMA wins at every
// large size, but where the fabric copies through the CPU (shm's cross-memory copy on a VM whose
// process_vm_writev runs at a third of memcpy) HTTP can win large GETs. So each data call of
// size class floor(log2(bytes)), per direction, goes the way whose recent calls of that class
// moved more bytes per second:
//  - learning: the first samples_min calls of a class go over RDMA, the next samples_min over
//    HTTP (a process that makes only a few calls of a size, as the CLI copying one file, moves
//    them all over RDMA);
//  - then the faster way by each way's estimate: the throughput of its last samples_kept calls
//    without the slowest quarter of them (a slow call says little: the machine was busy, or the
//    client's first RDMA call connected its peer), of those recorded within the class's last
//    sample_age_max calls (at least its newest samples_min): the way not taken, measured only
//    by probes, is judged by its latest ones, so that a turn made in a slow spell of the other
//    way is undone within a few probes, not samples_kept of them. The class turns to HTTP only
//    when HTTP's estimate beats RDMA's by margin (RDMA spends less CPU, so a tie goes to it),
//    and back to RDMA only when RDMA's is at least HTTP's: between the two it stays where it
//    is, since every turn costs a cold call on each way and estimates within the margin of
//    each other would turn it often (GET 4 MiB on the 2-core VM, HTTP 10-20 % faster:
//    docs/BENCHMARKS.md);
//  - a probe now and then takes the other way for probe_calls calls in a row, so that a change
//    in the machine or the load is seen; only its last call is recorded, since the first call
//    on a way after a spell on the other pays for waking it (GET 4 MiB: a probe's second call
//    3-32 % faster than its first, docs/client.md), and a probe that measured that would hold
//    the way's estimate down. The probes are spaced so that they cost at most
//    1/probe_cost_inverse of the class's time (a probe of a way 3.5 times slower costs
//    2 x 2.5 calls of the faster one: one starts in 320 calls), at least probe_every and at
//    most probe_every_max calls apart; while the slower way has fewer than samples_kept
//    samples, its first probe may cost 4 times that share and each next gap is at most twice
//    the one before (a start misjudged by warming calls is soon corrected).
// Only clean calls are recorded (an RDMA call that fell back, or failed, teaches nothing).
//
// Thread safety: thread-safe; every method may be called from any thread at once.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>

namespace objdirect::client {

class PathLearner {
 public:
  enum class Way { rdma, http };
  enum class Dir { download, upload };

  struct Pick {
    Way way = Way::rdma;
    bool learning = false;  // a way of this class has fewer than samples_min samples yet
    bool probe = false;     // the slower way, taken to refresh its estimate
    // A probe's first call, which warms the way: the caller does not record() it.
    bool warmup = false;
    // Why HTTP (TransferResult::reason); empty for RDMA.
    std::string reason;
  };

  // Clean calls per way before the class's faster way is taken.
  static constexpr std::uint32_t samples_min = 3;
  // Rates each way of each class keeps for its estimate (16, not 8: two ways 10 % apart, each
  // call's rate varying by 15-20 %, need that many to be told apart).
  static constexpr std::uint32_t samples_kept = 16;
  // A decided class's probe starts once in this many calls at the most often.
  static constexpr std::uint32_t probe_every = 32;
  // A sample counts in its way's estimate while it is one of the class's last this many calls
  // (and always among the way's newest samples_min).
  static constexpr std::uint64_t sample_age_max = 64;
  // Calls in a row a probe takes the other way; the last one is recorded.
  static constexpr std::uint32_t probe_calls = 2;
  // The probes' share of a decided class's time, once the slower way's estimate is full: calls
  // between the starts of probes >= probe_calls * (faster rate / slower rate - 1) *
  // probe_cost_inverse.
  static constexpr std::uint32_t probe_cost_inverse = 64;
  // The most calls between the starts of two probes, however slow the other way.
  static constexpr std::uint32_t probe_every_max = 1024;
  static_assert(probe_calls >= 1 && probe_calls < probe_every, "a probe ends before the next");
  // A class turns to HTTP only when HTTP's estimate is above RDMA's times this (and back to
  // RDMA when RDMA's is at least HTTP's).
  static constexpr double margin = 1.05;
  // Size classes: floor(log2(bytes)) for bytes >= 1.
  static constexpr int classes = 64;

  // The way for the next call moving `bytes` (> 0) in `dir`.
  Pick pick(Dir dir, std::uint64_t bytes);
  // A call picked for `way` by pick(dir, bytes), not a warmup, moved `moved` bytes over it,
  // cleanly, in `seconds` (> 0). It counts in the class it was picked in (a buffer larger than its
  // object is classed by the buffer, both when picked and when recorded).
  void record(Dir dir, std::uint64_t bytes, Way way, std::uint64_t moved, double seconds);

  // The class's current estimate of `way` in bytes per second (0 without samples), for tests.
  double rate(Dir dir, std::uint64_t bytes, Way way) const;
  // Calls between the starts of two probes of the slower way, given the two estimates and how
  // many samples the slower way has recorded (pick's spacing; public for tests).
  static std::uint64_t probe_interval(double faster, double slower, std::uint32_t slower_count);

  static int size_class(std::uint64_t bytes);

 private:
  struct Samples {
    std::array<double, samples_kept> rates{};
    std::array<std::uint64_t, samples_kept> at{};  // the class's calls when each was recorded
    std::uint32_t count = 0;   // recorded in all (the ring holds the last samples_kept)
    std::uint32_t picked = 0;  // learning's picks (calls may overlap before they record)
    // `calls`: the class's picks so far.
    double estimate(std::uint64_t calls) const;
    void add(double r, std::uint64_t calls);
  };
  struct Class {
    Samples way[2];
    std::uint64_t calls = 0;        // picks in all
    Way decided = Way::rdma;        // the faster way, once learnt (with the margin's hysteresis)
    std::uint64_t since_probe = 0;  // picks since the last probe started, once decided
    std::uint32_t probe_left = 0;   // calls the probe in progress still takes
    Way probe_way = Way::rdma;      // ... and their way
  };

  Class& at(Dir dir, std::uint64_t bytes);
  const Class& at(Dir dir, std::uint64_t bytes) const;

  mutable std::mutex mu_;
  std::array<std::array<Class, classes>, 2> classes_{};
};

}  // namespace objdirect::client
