// PathLearner (path_learner.hpp): learning takes RDMA then HTTP samples_min times each,
// then the faster way by the estimate (HTTP only past the margin), a probe of probe_calls calls
// (the first a warmup, not recorded) every probe_every calls, classes and directions apart, an
// outlier ignored, a change in the machine followed.
#include "client/path_learner.hpp"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace objdirect::client {
namespace {

using Way = PathLearner::Way;
using Dir = PathLearner::Dir;
constexpr std::uint64_t kMiB = 1ull << 20;

// Runs `calls` calls of `bytes` in `dir`, each taking the time `rate` gives its way (asked for
// every call, warmups included), recorded as the client does (warmups not); returns how many
// went over HTTP.
template <class Rate>
int run(PathLearner& l, Dir dir, std::uint64_t bytes, int calls, Rate rate) {
  int http = 0;
  for (int i = 0; i < calls; ++i) {
    auto p = l.pick(dir, bytes);
    if (p.way == Way::http) ++http;
    const double seconds = static_cast<double>(bytes) / rate(p.way);
    if (!p.warmup) l.record(dir, bytes, p.way, bytes, seconds);
  }
  return http;
}

TEST(PathLearner, SizeClassIsTheLog2Floor) {
  EXPECT_EQ(PathLearner::size_class(1), 0);
  EXPECT_EQ(PathLearner::size_class(2), 1);
  EXPECT_EQ(PathLearner::size_class(3), 1);
  EXPECT_EQ(PathLearner::size_class(64 * kMiB), 26);
  EXPECT_EQ(PathLearner::size_class(64 * kMiB + 1), 26);
  EXPECT_EQ(PathLearner::size_class(~0ull), PathLearner::classes - 1);
}

TEST(PathLearner, LearningTakesRdmaThenHttpThenTheFaster) {
  PathLearner l;
  std::vector<Way> seen;
  for (std::uint32_t i = 0; i < 2 * PathLearner::samples_min; ++i) {
    auto p = l.pick(Dir::download, 64 * kMiB);
    EXPECT_TRUE(p.learning);
    seen.push_back(p.way);
    EXPECT_EQ(p.reason.empty(), p.way == Way::rdma);
    // HTTP at 2.4 GB/s, RDMA at 1.5 GB/s (the shm GETs of 2026-12-06).
    l.record(Dir::download, 64 * kMiB, p.way, 64 * kMiB,
             64.0 * kMiB / (p.way == Way::http ? 2.4e9 : 1.5e9));
  }
  EXPECT_EQ(seen,
            (std::vector<Way>{Way::rdma, Way::rdma, Way::rdma, Way::http, Way::http, Way::http}));
  auto p = l.pick(Dir::download, 64 * kMiB);
  EXPECT_FALSE(p.learning);
  EXPECT_FALSE(p.probe);
  EXPECT_EQ(p.way, Way::http);
  EXPECT_EQ(p.reason, "auto: HTTP measured faster at this size (2.40 GB/s against RDMA's 1.50)");
  EXPECT_NEAR(l.rate(Dir::download, 64 * kMiB, Way::rdma), 1.5e9, 1);
}

TEST(PathLearner, OneProbeOfTheOtherWayInEveryProbeEvery) {
  PathLearner l;
  // HTTP 4 % slower than RDMA: a probe costs little, so one starts in every probe_every calls,
  // and takes probe_calls calls in a row, of which only the first is a warmup.
  auto rates = [](Way w) { return w == Way::http ? 1.0e9 : 1.04e9; };
  run(l, Dir::upload, 8 * kMiB, 2 * PathLearner::samples_min, rates);
  int http = 0, probes = 0, warmups = 0;
  bool last_probe = false;
  std::vector<std::uint32_t> starts;
  for (std::uint32_t i = 0; i < 10 * PathLearner::probe_every + PathLearner::probe_calls - 1; ++i) {
    auto p = l.pick(Dir::upload, 8 * kMiB);
    if (p.probe) {
      ++probes;
      EXPECT_EQ(p.way, Way::http);
      EXPECT_TRUE(p.reason.starts_with("auto: probing HTTP at this size (RDMA measured 1.04 GB/s"))
          << p.reason;
      EXPECT_EQ(p.warmup, !last_probe) << i;
    } else {
      EXPECT_FALSE(p.warmup);
    }
    if (p.warmup) {
      ++warmups;
      starts.push_back(i);
    }
    last_probe = p.probe;
    if (p.way == Way::http) ++http;
    if (!p.warmup) l.record(Dir::upload, 8 * kMiB, p.way, 8 * kMiB, 8.0 * kMiB / rates(p.way));
  }
  EXPECT_EQ(warmups, 10);
  EXPECT_EQ(probes, 10 * static_cast<int>(PathLearner::probe_calls));
  EXPECT_EQ(http, probes);
  for (std::size_t i = 1; i < starts.size(); ++i) {
    EXPECT_EQ(starts[i] - starts[i - 1], PathLearner::probe_every) << i;
  }
}

TEST(PathLearner, AProbesWarmupIsNotRecordedSoAColdFirstCallDoesNotHoldTheWayDown) {
  // The first HTTP GET of 4 MiB after a spell of RDMA calls ran 11 % below HTTP's steady calls
  // (docs/BENCHMARKS.md). Here HTTP runs at 6.0 GB/s, 5.34 when cold, and RDMA at 5.4: HTTP is
  // faster by more than the margin, its cold calls are not. Two of HTTP's learning calls meet a
  // busy machine (3.0), so RDMA is decided first. A learner that recorded the probes' cold
  // calls would see only them while RDMA is decided, and keep RDMA; with each probe's first
  // call a warmup, the second is warm, and within a few probes HTTP leads.
  PathLearner l;
  Way last = Way::rdma;
  int http_learning = 0;
  auto one = [&] {
    auto p = l.pick(Dir::download, 4 * kMiB);
    double rate = 5.4e9;
    if (p.way == Way::http) {
      rate = last == Way::rdma ? 5.34e9 : 6.0e9;
      if (p.learning && ++http_learning >= 2) rate = 3.0e9;
    }
    last = p.way;
    if (!p.warmup) l.record(Dir::download, 4 * kMiB, p.way, 4 * kMiB, 4.0 * kMiB / rate);
    return p;
  };
  for (std::uint32_t i = 0; i < 2 * PathLearner::samples_min; ++i) one();
  EXPECT_EQ(one().way, Way::rdma);
  int http = 0;
  const int calls = 2000;
  for (int i = 0; i < calls; ++i) http += one().way == Way::http;
  EXPECT_GT(http, calls * 9 / 10);
  EXPECT_NEAR(l.rate(Dir::download, 4 * kMiB, Way::http), 6.0e9, 1e3);
}

TEST(PathLearner, ProbesOfAMuchSlowerWayAreSpacedByTheirCost) {
  // The interval keeps the probes' extra time at 1/probe_cost_inverse of the class's: a way
  // 3.5x slower costs 2.5 calls per probe call, 5 per probe of 2 calls, so one starts in 320;
  // never more often than probe_every, never rarer than probe_every_max, and at probe_every
  // while the slower way's estimate is short of samples_kept calls.
  static_assert(PathLearner::probe_calls == 2, "the figures below are for probes of 2 calls");
  EXPECT_EQ(PathLearner::probe_interval(3.5, 1, PathLearner::samples_kept), 320u);
  EXPECT_EQ(PathLearner::probe_interval(1.2, 1, PathLearner::samples_kept),
            PathLearner::probe_every);
  EXPECT_EQ(PathLearner::probe_interval(100, 1, PathLearner::samples_kept),
            PathLearner::probe_every_max);
  // Fewer samples: the first gap a quarter of the full one (at least probe_every), each next
  // one at most twice the one before.
  EXPECT_EQ(PathLearner::probe_interval(3.5, 1, PathLearner::samples_min), 80u);
  EXPECT_EQ(PathLearner::probe_interval(3.5, 1, PathLearner::samples_min + 1), 160u);
  EXPECT_EQ(PathLearner::probe_interval(3.5, 1, PathLearner::samples_min + 2), 320u);
  EXPECT_EQ(PathLearner::probe_interval(1.2, 1, PathLearner::samples_min),
            PathLearner::probe_every);
  EXPECT_EQ(PathLearner::probe_interval(100, 1, PathLearner::samples_min), 256u);
  EXPECT_EQ(PathLearner::probe_interval(1, 1, PathLearner::samples_kept), PathLearner::probe_every);

  // In use: HTTP at 6.5 GB/s against RDMA's 1.86 (GET 4 MiB over libfabric shm on the 2-core
  // VM, docs/BENCHMARKS.md): once RDMA's estimate is full, its probes start one in 320 calls,
  // and the probes cost under 2 % of the time where one call in 32 cost 7 %.
  PathLearner l;
  auto rates = [](Way w) { return w == Way::http ? 6.5e9 : 1.86e9; };
  run(l, Dir::download, 4 * kMiB, 2 * PathLearner::samples_min, rates);
  std::vector<std::uint32_t> gaps;
  std::uint32_t since = 0;
  double seconds = 0, http_only = 0;
  for (int i = 0; i < 3000; ++i) {
    auto p = l.pick(Dir::download, 4 * kMiB);
    ++since;
    if (p.probe) {
      EXPECT_EQ(p.way, Way::rdma);
    }
    if (p.warmup) {
      gaps.push_back(since);
      since = 0;
    }
    seconds += 4.0 * kMiB / rates(p.way);
    http_only += 4.0 * kMiB / rates(Way::http);
    if (!p.warmup) l.record(Dir::download, 4 * kMiB, p.way, 4 * kMiB, 4.0 * kMiB / rates(p.way));
  }
  // Learning left RDMA 3 samples: the gaps grow 80, 160, then 1 in 320.
  ASSERT_GT(gaps.size(), 8u);
  for (std::size_t i = 0; i < gaps.size(); ++i) {
    EXPECT_EQ(gaps[i], i < 2 ? 80u << i : 320u) << "gap " << i;
  }
  EXPECT_LT(seconds / http_only, 1.03);
}

TEST(PathLearner, HttpOnlyPastTheMargin) {
  const int calls = 100;
  const int learning = 2 * static_cast<int>(PathLearner::samples_min);
  const int probes = (calls - learning) / static_cast<int>(PathLearner::probe_every) *
                     static_cast<int>(PathLearner::probe_calls);
  PathLearner l;
  // HTTP 4 % faster: within the margin, RDMA stays (it spends less CPU); HTTP only while
  // learning and in the probes.
  EXPECT_EQ(run(l, Dir::download, kMiB, calls, [](Way w) { return w == Way::http ? 1.04e9 : 1e9; }),
            learning / 2 + probes);
  PathLearner m;
  // 10 % faster: HTTP, with RDMA probed.
  EXPECT_EQ(run(m, Dir::download, kMiB, calls, [](Way w) { return w == Way::http ? 1.10e9 : 1e9; }),
            learning / 2 + (calls - learning - probes));
}

TEST(PathLearner, ATurnNeedsTheMarginToHttpAndATieBackToRdma) {
  // HTTP 10 % faster: the class turns to HTTP. HTTP then slows to 3 % above RDMA, within the
  // margin: it stays HTTP (turning back would cost a cold call on each way for nothing). Only
  // when HTTP falls below RDMA does it turn back.
  PathLearner l;
  double http_rate = 1.10e9;
  auto rates = [&](Way w) { return w == Way::http ? http_rate : 1e9; };
  run(l, Dir::download, kMiB, 2 * PathLearner::samples_min, rates);
  EXPECT_EQ(l.pick(Dir::download, kMiB).way, Way::http);
  http_rate = 1.03e9;
  const int calls = 500;
  const int probe_calls = calls / static_cast<int>(PathLearner::probe_every) *
                          static_cast<int>(PathLearner::probe_calls);
  EXPECT_GE(run(l, Dir::download, kMiB, calls, rates), calls - probe_calls - 1);
  http_rate = 0.97e9;
  // Within samples_kept HTTP calls its estimate is below RDMA's.
  run(l, Dir::download, kMiB, static_cast<int>(PathLearner::samples_kept), rates);
  EXPECT_EQ(run(l, Dir::download, kMiB, 20, rates), 0);
}

TEST(PathLearner, ATurnMadeInASlowSpellIsUndoneWithinAFewProbes) {
  // HTTP 20 % faster than RDMA, then a spell of samples_kept HTTP calls at 0.8 of RDMA (the
  // machine busy): the class turns to RDMA. When HTTP is fast again, only probes measure it;
  // HTTP's estimate rests on the calls of the class's last sample_age_max calls, so the spell's
  // samples age out and within a few probes HTTP leads again (without that, samples_kept
  // probes would have to replace them).
  PathLearner l;
  double http_rate = 1.2e9;
  auto rates = [&](Way w) { return w == Way::http ? http_rate : 1e9; };
  run(l, Dir::download, kMiB, 2 * PathLearner::samples_min + 100, rates);
  EXPECT_EQ(l.pick(Dir::download, kMiB).way, Way::http);
  http_rate = 0.8e9;
  run(l, Dir::download, kMiB, static_cast<int>(PathLearner::samples_kept), rates);
  EXPECT_EQ(l.pick(Dir::download, kMiB).way, Way::rdma);
  http_rate = 1.2e9;
  int calls = 0;
  for (;; ++calls) {
    auto p = l.pick(Dir::download, kMiB);
    if ((p.way == Way::http && !p.probe) || calls > 2000) break;
    if (!p.warmup) l.record(Dir::download, kMiB, p.way, kMiB, kMiB / rates(p.way));
  }
  EXPECT_LE(calls, static_cast<int>(3 * PathLearner::probe_every));
}

TEST(PathLearner, ClassesAndDirectionsLearnApart) {
  PathLearner l;
  run(l, Dir::download, 256 * kMiB, 20, [](Way w) { return w == Way::http ? 2e9 : 1e9; });
  EXPECT_EQ(l.pick(Dir::download, 256 * kMiB).way, Way::http);
  // Another class, and the other direction, start learning with RDMA.
  auto small = l.pick(Dir::download, 2 * kMiB);
  EXPECT_TRUE(small.learning);
  EXPECT_EQ(small.way, Way::rdma);
  auto up = l.pick(Dir::upload, 256 * kMiB);
  EXPECT_TRUE(up.learning);
  EXPECT_EQ(up.way, Way::rdma);
  // The same class: 300 MiB is in 256 MiB's.
  EXPECT_EQ(l.pick(Dir::download, 300 * kMiB).way, Way::http);
}

TEST(PathLearner, OneSlowFirstCallDoesNotDecide) {
  // The first RDMA call of a fresh client connects the peer and binds the endpoint (35-117 ms
  // for a 512 KiB GET that then takes 0.3-0.5 ms, 2026-12-06): the slowest call is left out.
  PathLearner l;
  bool first = true;
  run(l, Dir::download, kMiB, 2 * PathLearner::samples_min, [&](Way w) {
    if (w == Way::rdma && first) {
      first = false;
      return 1e7;  // 100 ms for 1 MiB
    }
    return w == Way::http ? 1.6e9 : 2.2e9;
  });
  EXPECT_EQ(l.pick(Dir::download, kMiB).way, Way::rdma);
  EXPECT_NEAR(l.rate(Dir::download, kMiB, Way::rdma), 2.2e9, 1);
}

TEST(PathLearner, AWrongStartIsCorrectedByTheProbes) {
  // Two slow RDMA calls of three (a warming client) send the class to HTTP, as 80 times slower;
  // one probe later (starting at the 256th call: a quarter of probe_every_max; its second call
  // recorded) RDMA's newest samples_min samples are one slow and two fast, the slow one is the
  // quarter left out, and RDMA leads.
  PathLearner l;
  int slow = 2;
  auto rates = [&](Way w) {
    if (w == Way::rdma && slow > 0) {
      --slow;
      return 1e7;
    }
    return w == Way::http ? 1.6e9 : 2.2e9;
  };
  run(l, Dir::download, kMiB, 2 * PathLearner::samples_min, rates);
  EXPECT_EQ(l.pick(Dir::download, kMiB).way, Way::http);
  // The pick above was the first decided call; the 256th and 257th are the first probe.
  run(l, Dir::download, kMiB, 254, rates);
  EXPECT_LT(l.rate(Dir::download, kMiB, Way::rdma), l.rate(Dir::download, kMiB, Way::http));
  auto warmup = l.pick(Dir::download, kMiB);
  EXPECT_TRUE(warmup.probe && warmup.warmup);
  EXPECT_EQ(warmup.way, Way::rdma);
  run(l, Dir::download, kMiB, 1, rates);  // the probe's recorded call
  EXPECT_NEAR(l.rate(Dir::download, kMiB, Way::rdma), 2.2e9, 1);
  auto p = l.pick(Dir::download, kMiB);
  EXPECT_FALSE(p.probe);
  EXPECT_EQ(p.way, Way::rdma);
}

TEST(PathLearner, TheEstimateIsTheThroughputWithoutTheSlowestQuarter) {
  PathLearner l;
  // 8 calls: the 2 slowest are left out; the rest move 1 MiB each in 1, 1, 1, 1, 2 and 2 ms.
  for (double ms : {1.0, 100.0, 1.0, 2.0, 1.0, 50.0, 1.0, 2.0}) {
    l.record(Dir::download, kMiB, Way::http, kMiB, ms / 1e3);
  }
  EXPECT_NEAR(l.rate(Dir::download, kMiB, Way::http), 6.0 * kMiB / 8e-3, 1);
  // One lucky call among slow ones does not make a way fast: 5 GB/s once, 1 GB/s twice.
  PathLearner m;
  for (double r : {5e9, 1e9, 1e9}) m.record(Dir::download, kMiB, Way::http, kMiB, kMiB / r);
  EXPECT_NEAR(m.rate(Dir::download, kMiB, Way::http), 2 / (1 / 5e9 + 1 / 1e9), 1);
}

TEST(PathLearner, FollowsAChangeThroughTheProbes) {
  PathLearner l;
  run(l, Dir::download, 64 * kMiB, 50, [](Way w) { return w == Way::http ? 2e9 : 1e9; });
  EXPECT_EQ(l.pick(Dir::download, 64 * kMiB).way, Way::http);
  // The fabric gets 3x faster: the probes see it, and within samples_kept probes RDMA leads.
  const int calls = static_cast<int>(PathLearner::probe_every * PathLearner::samples_kept);
  run(l, Dir::download, 64 * kMiB, calls, [](Way w) { return w == Way::http ? 2e9 : 3e9; });
  EXPECT_EQ(l.pick(Dir::download, 64 * kMiB).way, Way::rdma);
}

TEST(PathLearner, CallsInFlightAtOnceMeasureBothWays) {
  // Eight threads start together, before any call has recorded: samples_min measure each way
  // and the rest take RDMA.
  PathLearner l;
  std::vector<PathLearner::Pick> picks(8);
  std::vector<std::thread> ts;
  for (int i = 0; i < 8; ++i) ts.emplace_back([&, i] { picks[i] = l.pick(Dir::download, kMiB); });
  for (auto& t : ts) t.join();
  int http = 0;
  for (const auto& p : picks) {
    EXPECT_TRUE(p.learning);
    http += p.way == Way::http;
  }
  EXPECT_EQ(http, static_cast<int>(PathLearner::samples_min));
}

TEST(PathLearner, AFewCallsOfASizeAllGoOverRdma) {
  PathLearner l;
  for (std::uint32_t i = 0; i < PathLearner::samples_min; ++i) {
    auto p = l.pick(Dir::upload, 24 * kMiB);
    EXPECT_EQ(p.way, Way::rdma);
    l.record(Dir::upload, 24 * kMiB, p.way, 24 * kMiB, 0.01);
  }
}

TEST(PathLearner, ARecordCountsInTheClassOfItsPick) {
  // A 64 MiB buffer that received a 1 MiB object: the sample is of the 64 MiB class, at the
  // rate of the bytes moved.
  PathLearner l;
  l.record(Dir::download, 64 * kMiB, Way::rdma, kMiB, 0.001);
  EXPECT_NEAR(l.rate(Dir::download, 64 * kMiB, Way::rdma), kMiB / 0.001, 1);
  EXPECT_EQ(l.rate(Dir::download, kMiB, Way::rdma), 0);
}

}  // namespace
}  // namespace objdirect::client
