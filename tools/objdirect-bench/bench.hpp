// objdirect-bench: shared pieces of the coordinator and its worker processes.
//
// The coordinator (main.cc) starts objdirect-server and nginx, runs the baselines and forks/execs
// itself as workers (worker.cc), one per client process of a measured point. A worker prints
// "ready ..." once its client is warm, waits for "go" on stdin, runs the workload for the
// requested time and prints one "result ..." line (WorkerResult::encode). Latencies cross the
// pipe as a LatencyHistogram so that percentiles of several processes can be merged.
//
// Errors: parse functions return std::nullopt on malformed input; nothing here throws.
// Thread safety: LatencyHistogram is thread-compatible (one per thread, merge afterwards); the
// free functions are pure.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/limits.hpp"

namespace objdirect::limits {
// Client buffer memory one measured point may allocate across all its threads and processes
// (threads are cut to fit: a 1 GiB point runs at most two transfers at once).
inline constexpr std::uint64_t bench_buffer_bytes_max = 2ull << 30;
// Worker processes per point and threads per worker.
inline constexpr std::uint32_t bench_processes_max = 64;
inline constexpr std::uint32_t bench_threads_max = 256;
// Passes of the size sweep (--rounds).
inline constexpr std::uint32_t bench_rounds_max = 32;
// One --interleave burst: the time a path runs before the next path takes its turn.
inline constexpr std::uint64_t bench_burst_ms_max = 60'000;
// Paths one --interleave point runs together (objdirect-bench knows 7; interleave_order is at
// most interleave_block_cycles x paths x (paths - 1) bursts long).
inline constexpr std::uint32_t bench_interleave_paths_max = 8;
// Warm-up calls of path auto that may still be learning which path is faster (the client
// learns in 2 x 3 calls per size class; a worker that has not finished by then reports the
// window anyway).
inline constexpr std::uint32_t bench_learn_calls_max = 32;
}  // namespace objdirect::limits

namespace objdirect::bench {

// "4KiB", "64KiB", "1MiB", "1GiB", "1G", "512k", "4096" -> bytes (binary multiples; k/M/G and
// KB/MB/GB are binary too). nullopt for anything else, 0, or overflow.
std::optional<std::uint64_t> parse_size(std::string_view text);
// Comma list of sizes ("4KiB,1MiB"). nullopt if any element fails.
std::optional<std::vector<std::uint64_t>> parse_size_list(std::string_view text);
// Inverse for exact binary multiples: 65536 -> "64KiB"; otherwise the decimal byte count.
std::string format_size(std::uint64_t bytes);

// Log-bucketed latency histogram: bucket i holds values in [2^(i/16), 2^((i+1)/16)) ns, so a
// percentile is exact to about 4.4 %. Values 0 and 1 ns land in bucket 0.
class LatencyHistogram {
 public:
  static constexpr std::size_t kSubBuckets = 16;
  static constexpr std::size_t kBuckets = 48 * kSubBuckets;  // up to 2^48 ns (~3 days)

  void add(std::uint64_t ns);
  void merge(const LatencyHistogram& other);
  std::uint64_t count() const noexcept { return count_; }
  // Value at quantile q in [0, 1] (geometric middle of its bucket); 0 when empty.
  double quantile_ns(double q) const;
  // "i:c,i:c,..." of the non-empty buckets; "-" when empty.
  std::string encode() const;
  static std::optional<LatencyHistogram> decode(std::string_view text);

 private:
  std::array<std::uint64_t, kBuckets> counts_{};
  std::uint64_t count_ = 0;
};

// What one worker process measured between "go" and the end of its last transfer.
struct WorkerResult {
  std::uint64_t ops = 0;     // transfers that succeeded
  std::uint64_t bytes = 0;   // bytes they moved
  std::uint64_t errors = 0;  // transfers that failed
  std::uint64_t rdma_ops = 0;
  std::uint64_t fallback_ops = 0;  // RDMA attempted, bytes went over HTTP
  double cpu_s = 0;                // getrusage user+system of the whole process in the window
  double wall_s = 0;
  LatencyHistogram latency;
  std::string note;  // first error or fallback reason (spaces allowed, no newline)

  // Adds other's counts, latencies and CPU, and keeps the first note; wall_s is left alone (the
  // caller knows whether the windows ran side by side or one after the other).
  void merge(const WorkerResult& other);
  // One line: "result ops=.. bytes=.. ... lat=<histogram> note=<rest of line>".
  std::string encode() const;
  static std::optional<WorkerResult> decode(std::string_view line);
};

// "burst MS" (the --interleave command) -> MS, in 1..bench_burst_ms_max; nullopt otherwise.
std::optional<std::uint64_t> parse_burst_command(std::string_view line);

// Cycles each block of interleave_order repeats before it steps by the next s.
inline constexpr std::uint32_t interleave_block_cycles = 4;

// The order in which --interleave hands bursts to `paths` workers (1..bench_interleave_paths_max;
// more is a programmer error), repeated until every path has run its time. Two properties
// matter, each measured at GET 4 MiB on the 2-core VM (docs/BENCHMARKS.md, "Method"):
//  - each path right after each other path equally often: a burst leaves the machine in a state
//    the next one pays for (a rotation by one per cycle put auto after lf-shm in 2 cycles of 3,
//    and cost it 3-7 %);
//  - each path's bursts evenly spaced: in an order where one path's bursts came evenly and the
//    others' did not, that path ran 6-13 % faster.
// For a prime number of paths (2, 3, 5, 7) the order has both: the cycles that step through the
// paths by s = 1 .. paths - 1 (0, s, 2s, ... mod paths), each repeated interleave_block_cycles
// times. Each ordered pair of distinct paths is consecutive once per cycle family (counting the
// step from each block into the next, and from the last back to the first), and within a block
// every path runs once every `paths` bursts. For 4, 6 or 8 paths no such set of cycles exists
// (Tillson: 4 and 6) or it is not built here (8): the order is then an Eulerian circuit of the
// complete directed graph from 0 (each ordered pair once, the spacing uneven). {0} for one path.
std::vector<std::uint32_t> interleave_order(std::uint32_t paths);

// Path auto's learning calls in a worker's warm-up (docs/client.md, "The fastest path"): calls
// `transfer` (true: it succeeded) while `learning_calls` (the client's learning choices so far)
// grows, at most limits::bench_learn_calls_max times. Returns the calls that were learning ones,
// or nullopt when a transfer failed.
std::optional<std::uint32_t> learn_auto(const std::function<bool()>& transfer,
                                        const std::function<std::uint64_t()>& learning_calls);

// One measured point as the P figures see it (only points that ran).
struct GoalPoint {
  std::string sweep;       // "size", "conc", "procs", "single"
  std::string op;          // "get", "put"
  std::string path;        // "http", "lf-shm", ..., "nginx"
  bool rdma_path = false;  // the path's client fabric is not "none"
  std::uint64_t size = 0;
  std::uint32_t procs = 1;
  std::uint32_t threads = 1;
  double gbps = 0;
  std::uint64_t ops = 0;
  std::uint64_t rdma_ops = 0;
  std::optional<double> cli_cpu_gib;
};

// Everything the P figures are computed from.
struct GoalInputs {
  std::vector<std::uint64_t> sizes;             // measured sizes, ascending, not empty
  std::map<std::uint64_t, double> memcpy_gbps;  // baseline per size
  std::vector<std::uint32_t> procs;             // the process sweep's process counts
  std::uint32_t total_concurrency = 8;
  std::uint64_t procs_size = 0;  // object size of the process sweep
  std::vector<GoalPoint> points;
};

// The --json object: P1..P6 for GET (keys unchanged since they were defined) and the same
// figures for PUT (P1_put, P2_put, P2_put_by_path, P2_put_best, P3_put, P4_put, P6_put), each
// null where its points did not run or an RDMA point did not go over RDMA, plus "basis" naming
// the points each figure used. See docs/BENCHMARKS.md for the definitions.
std::string goals_json(const GoalInputs& in);

// One round of the size sweep at one (op, size): the GB/s of the three passes that ran one after
// the other in that round.
struct AutoRound {
  double auto_gbps = 0, http_gbps = 0, shm_gbps = 0;
};

// auto / max(http, lf-shm) of each round, and their median (the lower middle one of an even
// count). Rounds where neither http nor lf-shm moved a byte are left out; nullopt when none is
// left. A round's three passes share the machine's state of that moment, so the paired ratio
// does not carry the drift between rounds that a ratio of separate medians does.
struct PairedRatio {
  std::vector<double> per_round;
  double median = 0;
};
std::optional<PairedRatio> paired_auto_ratio(const std::vector<AutoRound>& rounds);

// Worker mode entry point (argv after "--worker"); returns the process exit code. After "ready" a
// worker reads commands on stdin: "go" runs one window of --duration-ms, prints its result and
// exits; "burst MS" runs a window of MS milliseconds (at least one transfer per thread), prints
// its result and waits for the next command (--interleave); "end" or EOF exits.
// Both windows print a WorkerResult line whose wall_s is the window's own length.
int worker_main(int argc, char** argv);

}  // namespace objdirect::bench
