#include "bench.hpp"

#include <gtest/gtest.h>

#include <chrono>
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
  EXPECT_GT(memcpy_gbps(1 << 20, std::chrono::milliseconds(30)), 0.05);
  EXPECT_GT(tcp_loopback_gbps(64 << 10, std::chrono::milliseconds(50)), 0.01);
}

}  // namespace
}  // namespace objdirect::bench
