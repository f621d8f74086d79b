#include "common/parallel.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <thread>
#include <vector>

namespace objdirect {
namespace {

// Every index runs once, on at most `width` threads, with and without a pool; a pool's threads
// are reused from call to call instead of started per call.
TEST(RunParallel, EachIndexOnceOnAtMostWidthThreads) {
  HelperPool pool(64);
  for (HelperPool* p : {static_cast<HelperPool*>(nullptr), &pool}) {
    for (int call = 0; call < 20; ++call) {
      std::vector<std::atomic<int>> hits(100);
      std::mutex mu;
      std::set<std::thread::id> ids;
      std::atomic<int> now{0}, most{0};
      Status st = run_parallel(
          hits.size(), 4,
          [&](std::size_t i) {
            int in = ++now;
            for (int m = most.load(); in > m && !most.compare_exchange_weak(m, in);) {
            }
            {
              std::lock_guard lk(mu);
              ids.insert(std::this_thread::get_id());
            }
            std::this_thread::sleep_for(std::chrono::microseconds(200));
            ++hits[i];
            --now;
            return Status::Ok();
          },
          p);
      ASSERT_TRUE(st.ok());
      for (auto& h : hits) EXPECT_EQ(h.load(), 1);
      EXPECT_LE(ids.size(), 4u);
      EXPECT_LE(most.load(), 4);
    }
  }
  // 20 calls of width 4 took up to 3 helpers each (60 in all) from the pool: its threads were
  // reused. (A helper that has just left a call is not idle yet for the next one, so a few more
  // than 3 may be started, never one per call.)
  EXPECT_GE(pool.threads(), 1u);
  EXPECT_LT(pool.threads(), 20u);
}

TEST(RunParallel, FirstErrorStopsNewIndicesAndIsReturned) {
  HelperPool pool(4);
  std::atomic<int> ran{0};
  Status st = run_parallel(
      1000, 2,
      [&](std::size_t i) {
        ++ran;
        if (i == 10) return Status(Errc::io_error, "item 10");
        return Status::Ok();
      },
      &pool);
  EXPECT_EQ(st.code(), Errc::io_error);
  EXPECT_EQ(st.message(), "item 10");
  EXPECT_LT(ran.load(), 1000);
}

// helper_threads_max: a full pool refuses a task (the caller does the work itself), and a
// run_parallel nested in a helper completes even when no helper is free: nothing waits in a
// queue for a thread that never comes.
TEST(HelperPool, RefusesPastItsBoundAndNestingCannotDeadlock) {
  // Declared before the pool, so that the pool's destructor joins the holders before these
  // end: a holder may still be between its last sleep and its last look at release when the
  // test body returns.
  std::atomic<bool> release{false};
  std::atomic<int> started{0};
  HelperPool pool(2);
  auto hold = [&] {
    ++started;
    while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  ASSERT_TRUE(pool.try_run(hold));
  ASSERT_TRUE(pool.try_run(hold));
  EXPECT_FALSE(pool.try_run([] {}));
  EXPECT_EQ(pool.threads(), 2u);
  // With both threads held, run_parallel runs everything on the caller.
  std::atomic<int> sum{0};
  ASSERT_TRUE(run_parallel(
                  50, 8,
                  [&](std::size_t i) {
                    sum += static_cast<int>(i);
                    return Status::Ok();
                  },
                  &pool)
                  .ok());
  EXPECT_EQ(sum.load(), 50 * 49 / 2);
  release = true;
  while (started.load() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));

  // Nested: each outer index runs an inner run_parallel on the same (small) pool.
  std::atomic<int> inner{0};
  ASSERT_TRUE(run_parallel(
                  8, 4,
                  [&](std::size_t) {
                    return run_parallel(
                        16, 4,
                        [&](std::size_t) {
                          ++inner;
                          return Status::Ok();
                        },
                        &pool);
                  },
                  &pool)
                  .ok());
  EXPECT_EQ(inner.load(), 8 * 16);
  EXPECT_LE(pool.threads(), 2u);
}

}  // namespace
}  // namespace objdirect
