#include "bench.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <thread>

#include "baselines.hpp"
#include "process.hpp"

namespace objdirect::bench {
namespace {

TEST(ParseSize, UnitsAreBinary) {
  EXPECT_EQ(parse_size("4KiB"), 4096u);
  EXPECT_EQ(parse_size("64k"), 65536u);
  EXPECT_EQ(parse_size("1MiB"), 1u << 20);
  EXPECT_EQ(parse_size("16MB"), 16u << 20);
  EXPECT_EQ(parse_size("1GiB"), 1ull << 30);
  EXPECT_EQ(parse_size("1g"), 1ull << 30);
  EXPECT_EQ(parse_size("4096"), 4096u);
  EXPECT_EQ(parse_size("4096b"), 4096u);
}

TEST(ParseSize, RejectsJunk) {
  EXPECT_FALSE(parse_size(""));
  EXPECT_FALSE(parse_size("0"));
  EXPECT_FALSE(parse_size("KiB"));
  EXPECT_FALSE(parse_size("4XiB"));
  EXPECT_FALSE(parse_size("4KiBx"));
  EXPECT_FALSE(parse_size("-4"));
  EXPECT_FALSE(parse_size("99999999999999999999"));
  EXPECT_FALSE(parse_size("17179869184G"));  // 2^34 GiB overflows 64 bits
}

TEST(ParseSize, ListAndFormatRoundTrip) {
  auto l = parse_size_list("4KiB,64KiB,1MiB,16MiB,256MiB,1GiB");
  ASSERT_TRUE(l);
  ASSERT_EQ(l->size(), 6u);
  const char* names[] = {"4KiB", "64KiB", "1MiB", "16MiB", "256MiB", "1GiB"};
  for (std::size_t i = 0; i < 6; ++i) EXPECT_EQ(format_size((*l)[i]), names[i]);
  EXPECT_EQ(format_size(1000), "1000");
  EXPECT_EQ(format_size(1536), "1536");  // 1.5 KiB: not a whole multiple
  EXPECT_FALSE(parse_size_list("4KiB,,1MiB"));
  EXPECT_FALSE(parse_size_list(""));
}

TEST(LatencyHistogram, PercentilesWithinBucketError) {
  LatencyHistogram h;
  for (std::uint64_t i = 1; i <= 1000; ++i) h.add(i * 1000);  // 1 us .. 1 ms
  EXPECT_EQ(h.count(), 1000u);
  EXPECT_NEAR(h.quantile_ns(0.50), 500'000, 500'000 * 0.05);
  EXPECT_NEAR(h.quantile_ns(0.99), 990'000, 990'000 * 0.05);
  EXPECT_NEAR(h.quantile_ns(0.0), 1000, 1000 * 0.05);
  EXPECT_EQ(LatencyHistogram().quantile_ns(0.5), 0);
}

TEST(LatencyHistogram, MergeEqualsCombinedAndEncodingRoundTrips) {
  LatencyHistogram a, b, both;
  for (std::uint64_t i = 0; i < 100; ++i) {
    a.add(1000 + i);
    b.add(5'000'000 + i * 7);
    both.add(1000 + i);
    both.add(5'000'000 + i * 7);
  }
  a.merge(b);
  EXPECT_EQ(a.encode(), both.encode());
  auto d = LatencyHistogram::decode(a.encode());
  ASSERT_TRUE(d);
  EXPECT_EQ(d->encode(), a.encode());
  EXPECT_EQ(d->count(), 200u);
  EXPECT_DOUBLE_EQ(d->quantile_ns(0.99), a.quantile_ns(0.99));
  EXPECT_EQ(LatencyHistogram().encode(), "-");
  EXPECT_FALSE(LatencyHistogram::decode("3"));
  EXPECT_FALSE(LatencyHistogram::decode("99999:1"));
  EXPECT_FALSE(LatencyHistogram::decode("1:x"));
}

TEST(WorkerResult, MergeAddsCountsAndCpuKeepsTheFirstNoteAndLeavesWall) {
  WorkerResult a, b;
  a.ops = 3;
  a.bytes = 300;
  a.rdma_ops = 3;
  a.cpu_s = 0.5;
  a.wall_s = 2;
  a.latency.add(1000);
  b.ops = 2;
  b.bytes = 200;
  b.errors = 1;
  b.fallback_ops = 2;
  b.cpu_s = 0.25;
  b.wall_s = 7;
  b.latency.add(2000);
  b.latency.add(3000);
  b.note = "second";
  a.merge(b);
  EXPECT_EQ(a.ops, 5u);
  EXPECT_EQ(a.bytes, 500u);
  EXPECT_EQ(a.errors, 1u);
  EXPECT_EQ(a.rdma_ops, 3u);
  EXPECT_EQ(a.fallback_ops, 2u);
  EXPECT_DOUBLE_EQ(a.cpu_s, 0.75);
  EXPECT_DOUBLE_EQ(a.wall_s, 2);  // the caller's to set
  EXPECT_EQ(a.latency.count(), 3u);
  EXPECT_EQ(a.note, "second");  // a had none
  WorkerResult c;
  c.note = "third";
  a.merge(c);
  EXPECT_EQ(a.note, "second");
}

TEST(LearnAuto, StopsAtTheFirstDecidedCallOrTheLimit) {
  // The client learns in 6 calls: the 7th is decided and ends the warm-up.
  std::uint64_t learning = 0, calls = 0;
  auto six = learn_auto([&] { return ++calls <= 6 ? (++learning, true) : true; },
                        [&] { return learning; });
  EXPECT_EQ(six, 6u);
  EXPECT_EQ(calls, 7u);
  // Below the crossover nothing learns: one call.
  calls = 0;
  EXPECT_EQ(learn_auto([&] { return ++calls > 0; }, [] { return std::uint64_t{0}; }), 0u);
  EXPECT_EQ(calls, 1u);
  // A client that never stops learning: bench_learn_calls_max calls, then the window.
  learning = calls = 0;
  EXPECT_EQ(learn_auto([&] { return ++calls, ++learning, true; }, [&] { return learning; }),
            limits::bench_learn_calls_max);
  EXPECT_EQ(calls, limits::bench_learn_calls_max);
  // A failed transfer.
  EXPECT_FALSE(learn_auto([] { return false; }, [] { return std::uint64_t{0}; }));
}

TEST(ParseBurstCommand, MillisecondsWithinTheLimit) {
  EXPECT_EQ(parse_burst_command("burst 20"), 20u);
  EXPECT_EQ(parse_burst_command("burst 1"), 1u);
  EXPECT_EQ(parse_burst_command("burst " + std::to_string(limits::bench_burst_ms_max)),
            limits::bench_burst_ms_max);
  for (const char* bad : {"burst 0", "burst", "burst ", "burst -1", "burst 20ms", "burst  20",
                          "burst 60001", "Burst 20", "go", "end", "burst 99999999999999999999"}) {
    EXPECT_FALSE(parse_burst_command(bad)) << bad;
  }
}

TEST(InterleaveOrder, EveryPathFollowsEveryOtherEquallyOftenAndPrimeCountsSpaceEvenly) {
  constexpr std::uint32_t k = interleave_block_cycles;
  EXPECT_EQ(interleave_order(1), (std::vector<std::uint32_t>{0}));
  {
    std::vector<std::uint32_t> want;
    for (std::uint32_t c = 0; c < k; ++c) want.insert(want.end(), {0, 1});
    EXPECT_EQ(interleave_order(2), want);
  }
  {
    std::vector<std::uint32_t> want;
    for (std::uint32_t c = 0; c < k; ++c) want.insert(want.end(), {0, 1, 2});
    for (std::uint32_t c = 0; c < k; ++c) want.insert(want.end(), {0, 2, 1});
    EXPECT_EQ(interleave_order(3), want);
  }
  for (std::uint32_t n = 2; n <= limits::bench_interleave_paths_max; ++n) {
    const bool prime = n == 2 || n == 3 || n == 5 || n == 7;
    const auto order = interleave_order(n);
    const std::uint32_t each = prime ? k : 1;  // times each ordered pair is consecutive
    ASSERT_EQ(order.size(), each * n * (n - 1)) << n;
    EXPECT_EQ(order.front(), 0u);
    // Each ordered pair of distinct paths `each` times, counting the wrap from the last to the
    // first (the order repeats); so no path follows itself, and each runs as often.
    std::map<std::pair<std::uint32_t, std::uint32_t>, std::uint32_t> pairs;
    std::vector<std::uint32_t> runs(n, 0);
    for (std::size_t i = 0; i < order.size(); ++i) {
      ASSERT_LT(order[i], n);
      ++runs[order[i]];
      ++pairs[{order[i], order[(i + 1) % order.size()]}];
    }
    EXPECT_EQ(pairs.size(), n * (n - 1)) << n;
    for (const auto& [pair, count] : pairs) {
      EXPECT_NE(pair.first, pair.second) << n;
      EXPECT_EQ(count, each) << n;
    }
    for (auto r : runs) EXPECT_EQ(r, each * (n - 1)) << n;
    if (!prime) continue;
    // Within each block of k cycles every path runs once every n bursts.
    for (std::size_t b = 0; b < order.size(); b += static_cast<std::size_t>(k) * n) {
      for (std::size_t i = b + n; i < b + static_cast<std::size_t>(k) * n; ++i) {
        EXPECT_EQ(order[i], order[i - n]) << n << " at " << i;
      }
    }
  }
}

TEST(InterleaveOrderDeathTest, MorePathsThanTheLimitAreAProgrammerError) {
  EXPECT_DEATH(interleave_order(limits::bench_interleave_paths_max + 1),
               "bench_interleave_paths_max");
  EXPECT_DEATH(interleave_order(0), "bench_interleave_paths_max");
}

TEST(WorkerResult, EncodeDecodeRoundTrip) {
  WorkerResult r;
  r.ops = 12;
  r.bytes = 12u << 20;
  r.errors = 1;
  r.rdma_ops = 10;
  r.fallback_ops = 2;
  r.cpu_s = 0.125;
  r.wall_s = 1.5;
  r.latency.add(2'000'000);
  r.note = "fallback: server declined = 501";
  auto d = WorkerResult::decode(r.encode());
  ASSERT_TRUE(d);
  EXPECT_EQ(d->ops, 12u);
  EXPECT_EQ(d->bytes, 12u << 20);
  EXPECT_EQ(d->errors, 1u);
  EXPECT_EQ(d->rdma_ops, 10u);
  EXPECT_EQ(d->fallback_ops, 2u);
  EXPECT_DOUBLE_EQ(d->cpu_s, 0.125);
  EXPECT_DOUBLE_EQ(d->wall_s, 1.5);
  EXPECT_EQ(d->latency.count(), 1u);
  EXPECT_EQ(d->note, r.note);
  EXPECT_FALSE(WorkerResult::decode("ready http"));
  EXPECT_FALSE(WorkerResult::decode("result ops=1"));  // no latency
  EXPECT_FALSE(WorkerResult::decode("result ops=x lat=-"));
}

// A point of the goal computation.
GoalPoint point(const std::string& sweep, const std::string& op, const std::string& path,
                std::uint64_t size, double gbps, std::optional<double> cli_cpu_gib,
                std::uint32_t procs = 1, std::uint32_t threads = 1) {
  GoalPoint p;
  p.sweep = sweep;
  p.op = op;
  p.path = path;
  p.rdma_path = path != "http" && path != "nginx";
  p.size = size;
  p.procs = procs;
  p.threads = threads;
  p.gbps = gbps;
  p.ops = 4;
  p.rdma_ops = p.rdma_path ? 4 : 0;
  p.cli_cpu_gib = cli_cpu_gib;
  return p;
}

constexpr std::uint64_t k16M = 16ull << 20, k256M = 256ull << 20, k1G = 1ull << 30;

// GET and PUT points with distinct figures, so that a PUT key reading a GET point (or the
// reverse) gives a different number.
GoalInputs full_inputs() {
  GoalInputs in;
  in.sizes = {k16M, k256M, k1G};
  in.memcpy_gbps = {{k16M, 9.0}, {k256M, 10.0}, {k1G, 12.0}};
  in.procs = {1, 2, 8};
  in.total_concurrency = 8;
  in.procs_size = k16M;
  for (const char* op : {"get", "put"}) {
    const double f = std::string(op) == "get" ? 1.0 : 0.1;  // PUT: a tenth of GET
    in.points.push_back(point("size", op, "http", k256M, 2.0 * f, 0.4));
    in.points.push_back(
        point("size", op, "lf-shm", k256M, 5.0 * f, std::string(op) == "get" ? 0.2 : 0.3));
    in.points.push_back(point("size", op, "lf-tcp", k256M, 1.0 * f, 0.5));
    in.points.push_back(point("size", op, "ucx-sm", k256M, 3.0 * f, 0.1));
    in.points.push_back(point("procs", op, "lf-shm", k16M, 4.0 * f, 0.2, 1, 8));
    in.points.push_back(point("procs", op, "lf-shm", k16M, 3.0 * f, 0.2, 8, 1));
    in.points.push_back(point("procs", op, "lf-shm", k16M, 9.9, 0.2, 2, 4));  // not 8 procs
  }
  in.points.push_back(point("size", "get", "http", k1G, 3.0, 0.4));
  in.points.push_back(point("size", "get", "nginx", k1G, 4.0, 0.4));
  // PUT against nginx is measured in the "single" sweep only; a size-sweep PUT pair must not
  // be taken for it.
  in.points.push_back(point("size", "put", "http", k1G, 7.0, 0.4));
  in.points.push_back(point("single", "put", "http", k1G, 0.3, 0.4));
  in.points.push_back(point("single", "put", "nginx", k1G, 0.6, 0.4));
  return in;
}

TEST(GoalsJson, GetKeysKeepTheirDefinitionsAndFormat) {
  const std::string j = goals_json(full_inputs());
  EXPECT_EQ(j.rfind("{\"P1\": 0.5000, \"P2\": 0.5000, \"P3\": 0.5000, \"P4\": 0.7500, "
                    "\"P5\": null, \"P6\": 0.7500, \"P2_by_path\": {\"lf-shm\": 0.5000, "
                    "\"lf-tcp\": 1.2500, \"ucx-sm\": 0.2500, \"ucx-tcp\": null}, "
                    "\"P2_best\": \"ucx-sm\"",
                    0),
            0u)
      << j;
  EXPECT_NE(j.find("\"P6\": \"lf-shm GET 16MiB, 8 procs vs 1 at total concurrency 8\""),
            std::string::npos)
      << j;
}

TEST(GoalsJson, PutKeysUseThePutPointsOnTheSameBases) {
  const std::string j = goals_json(full_inputs());
  // P1_put 0.5/10, P2_put 0.3/0.4, P3_put 0.1/0.2, P4_put 0.3/0.6 (single PUT, not the
  // size-sweep 7.0), P6_put 0.3/0.4.
  EXPECT_NE(j.find("\"P1_put\": 0.0500, \"P2_put\": 0.7500, \"P3_put\": 0.5000, "
                   "\"P4_put\": 0.5000, \"P6_put\": 0.7500, \"P2_put_by_path\": "
                   "{\"lf-shm\": 0.7500, \"lf-tcp\": 1.2500, \"ucx-sm\": 0.2500, "
                   "\"ucx-tcp\": null}, \"P2_put_best\": \"ucx-sm\""),
            std::string::npos)
      << j;
  EXPECT_NE(j.find("\"P4_put\": \"http PUT 1GiB as one request, objdirect / nginx (WebDAV)\""),
            std::string::npos)
      << j;
  EXPECT_NE(j.find("\"P6_put\": \"lf-shm PUT 16MiB, 8 procs vs 1 at total concurrency 8\"}}"),
            std::string::npos)
      << j;
}

TEST(GoalsJson, UnmeasuredOrFallenBackPointsGiveNull) {
  GoalInputs in = full_inputs();
  // The PUT over lf-shm fell back to HTTP: no RDMA op, so P1_put/P2_put are not figures.
  for (auto& p : in.points) {
    if (p.op == "put" && p.path == "lf-shm" && p.sweep == "size") p.rdma_ops = 0;
  }
  // No nginx PUT and no PUT process sweep.
  std::erase_if(in.points, [](const GoalPoint& p) {
    return p.op == "put" && (p.path == "nginx" || p.sweep == "procs");
  });
  const std::string j = goals_json(in);
  EXPECT_NE(j.find("\"P1_put\": null, \"P2_put\": null, \"P3_put\": 0.5000, "
                   "\"P4_put\": null, \"P6_put\": null, \"P2_put_by_path\": "
                   "{\"lf-shm\": null,"),
            std::string::npos)
      << j;
  EXPECT_NE(j.find("\"P6_put\": \"none\""), std::string::npos) << j;
  // The GET figures do not move.
  EXPECT_EQ(j.rfind("{\"P1\": 0.5000, \"P2\": 0.5000, \"P3\": 0.5000, \"P4\": 0.7500", 0), 0u);
}

TEST(GoalsJson, MissingSizesFallBackToTheLargestBelowAndSayWhich) {
  GoalInputs in;
  in.sizes = {64u << 10, k16M};
  in.memcpy_gbps = {{k16M, 8.0}};
  in.points.push_back(point("size", "put", "lf-shm", k16M, 2.0, 0.2));
  in.points.push_back(point("size", "put", "http", k16M, 1.0, 0.4));
  in.points.push_back(point("single", "put", "http", k16M, 1.0, 0.4));
  in.points.push_back(point("single", "put", "nginx", k16M, 2.0, 0.4));
  const std::string j = goals_json(in);
  EXPECT_NE(j.find("\"P1_put\": 0.2500, \"P2_put\": 0.5000, \"P3_put\": null, "
                   "\"P4_put\": 0.5000, \"P6_put\": null"),
            std::string::npos)
      << j;
  EXPECT_NE(j.find("\"P1_put\": \"lf-shm PUT 16MiB / memcpy\""), std::string::npos) << j;
  EXPECT_NE(j.find("\"P1\": null, \"P2\": null"), std::string::npos) << j;
}

TEST(PairedAutoRatio, EachRoundAgainstItsOwnBetterPathThenTheMedian) {
  // Round 2 is a slow spell for every path: its own ratio is fine, and the median ignores it.
  auto r = paired_auto_ratio({{1.0, 1.0, 0.5}, {0.5, 0.25, 0.55}, {0.9, 1.0, 0.8}});
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->per_round.size(), 3u);
  EXPECT_DOUBLE_EQ(r->per_round[0], 1.0);
  EXPECT_NEAR(r->per_round[1], 0.5 / 0.55, 1e-12);
  EXPECT_DOUBLE_EQ(r->per_round[2], 0.9);
  EXPECT_NEAR(r->median, 0.5 / 0.55, 1e-12);
  // An even count takes the lower middle value: a check against 0.95 does not round up.
  auto even = paired_auto_ratio({{1.0, 1.0, 0}, {0.9, 1.0, 0}, {0.97, 1.0, 0}, {1.2, 1.0, 0}});
  ASSERT_TRUE(even.has_value());
  EXPECT_DOUBLE_EQ(even->median, 0.97);
}

TEST(PairedAutoRatio, RoundsWhereNeitherBaselineMovedAreLeftOut) {
  EXPECT_FALSE(paired_auto_ratio({}).has_value());
  EXPECT_FALSE(paired_auto_ratio({{1.0, 0, 0}}).has_value());
  auto r = paired_auto_ratio({{1.0, 0, 0}, {0.8, 0, 1.0}});
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->per_round.size(), 1u);
  EXPECT_DOUBLE_EQ(r->median, 0.8);
}

TEST(Process, LinesBothWaysAndExitStatus) {
  SpawnOptions so;
  so.argv = {"/bin/sh", "-c", "read x; echo \"got $x $BENCH_TEST_VAR\"; exit 3"};
  so.env = {{"BENCH_TEST_VAR", "v1"}};
  so.pipe_stdin = so.pipe_stdout = true;
  auto p = Process::spawn(so);
  ASSERT_TRUE(p.ok());
  EXPECT_GT(process_cpu_s(p->pid()).value_or(-1), -1);
  ASSERT_TRUE(p->write("hello\n"));
  EXPECT_EQ(p->read_line(std::chrono::seconds(10)), "got hello v1");
  EXPECT_EQ(p->wait(std::chrono::seconds(10)), 3);
}

TEST(Process, StopEndsAChildThatIgnoresStdin) {
  SpawnOptions so;
  so.argv = {"/bin/sleep", "30"};
  auto p = Process::spawn(so);
  ASSERT_TRUE(p.ok());
  const auto t0 = std::chrono::steady_clock::now();
  p->stop(std::chrono::milliseconds(2000));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_EQ(p->read_line(std::chrono::milliseconds(10)), std::nullopt);
}

TEST(Baselines, MemcpyAndTcpMeasureSomething) {
  EXPECT_GT(memcpy_gbps(1 << 20, std::chrono::milliseconds(30), false), 0.05);
  EXPECT_GT(memcpy_gbps(4 << 20, std::chrono::milliseconds(30), true), 0.05);
  EXPECT_GT(tcp_loopback_gbps(64 << 10, std::chrono::milliseconds(50)), 0.01);
}

}  // namespace
}  // namespace objdirect::bench
