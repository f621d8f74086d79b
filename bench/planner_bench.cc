// The client transfer planner: how long cutting a download or an upload into parts takes.
#include <benchmark/benchmark.h>

#include "objdirect/plan.hpp"

namespace objdirect {
namespace {

// A download of state.range(0) GiB cut into 8 MiB Range GETs.
void BM_PlannerSplitRange(benchmark::State& state) {
  const std::uint64_t bytes = static_cast<std::uint64_t>(state.range(0)) << 30;
  for (auto _ : state) benchmark::DoNotOptimize(split_range(0, bytes, 8ull << 20));
  state.SetLabel(std::to_string(bytes / (8ull << 20)) + " parts");
}
BENCHMARK(BM_PlannerSplitRange)->Arg(1)->Arg(64);

// An upload of state.range(0) GiB: part size raised to keep within 10,000 parts.
void BM_PlannerPlanUpload(benchmark::State& state) {
  const std::uint64_t bytes = static_cast<std::uint64_t>(state.range(0)) << 30;
  for (auto _ : state) {
    auto p = plan_upload(bytes, 8ull << 20);
    if (!p.ok()) state.SkipWithError("plan_upload failed");
    benchmark::DoNotOptimize(p);
  }
}
BENCHMARK(BM_PlannerPlanUpload)->Arg(1)->Arg(1024);

}  // namespace
}  // namespace objdirect
