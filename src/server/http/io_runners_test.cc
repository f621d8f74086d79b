// IoRunners against real io_contexts: a handler blocked in a BlockingScope is replaced by a
// spare, within threads_max; the spare parks once the blocked one is back; an unmarked block
// is not handed off; stop() joins parked spares. With a context per runner, each context runs
// on its own thread, and a blocked one gets a spare for itself.
#include "server/http/io_runners.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "common/blocking.hpp"

namespace objdirect::http {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(1ms);
  }
  return pred();
}

// How a blocking handler of the tests marks its block.
enum class Scope { none, marked, certain };

// Posts a handler that sits in `scope` until `release` is set, and waits until it has begun.
::testing::AssertionResult block_in(asio::io_context& ioc, Scope scope,
                                    std::atomic<bool>& release) {
  auto started = std::make_shared<std::atomic<bool>>(false);
  asio::post(ioc, [scope, &release, started] {
    std::optional<BlockingScope> blocking;
    if (scope != Scope::none) blocking.emplace(/*certain=*/scope == Scope::certain);
    *started = true;
    while (!release) std::this_thread::sleep_for(1ms);
  });
  if (eventually([&] { return started->load(); }, 5s)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "the blocking handler never began";
}

// Sets `flag` when the test's scope ends, before the Running declared ahead of it stops: a handler
// still looping on it (an ASSERT returned early) then ends, and join() cannot hang.
struct SetAtExit {
  std::atomic<bool>& flag;
  ~SetAtExit() { flag = true; }
};

// IoRunners over `contexts` io_contexts (1: one shared by every runner; one per runner is the
// server's default). The handlers the tests post reference the test's locals: declare those
// before the Running, so that its destructor (a stopped context ends run() and stops the
// others; join) has waited for every handler before they go.
struct Running {
  std::vector<std::unique_ptr<asio::io_context>> contexts;
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::optional<IoRunners> runners;
  std::thread thread;
  explicit Running(IoRunners::Options o, std::size_t n = 1) {
    std::vector<asio::io_context*> raw;
    for (std::size_t i = 0; i < n; ++i) {
      contexts.push_back(std::make_unique<asio::io_context>());
      work.push_back(asio::make_work_guard(*contexts.back()));
      raw.push_back(contexts.back().get());
    }
    runners.emplace(std::move(raw), o);
    thread = std::thread([this] { runners->run(); });
  }
  ~Running() {
    contexts.front()->stop();
    thread.join();
  }
  asio::io_context& ioc(std::size_t i = 0) { return *contexts.at(i); }
  IoRunners::Stats stats() const { return runners->stats(); }
};

TEST(IoRunners, ABlockedRunnerIsReplacedAndTheSpareParksAfterwards) {
  std::atomic<bool> release{false};
  std::atomic<bool> ran{false};
  Running r({/*threads_base=*/1, /*threads_max=*/4, 1000us, 5ms});
  const SetAtExit release_at_exit{release};
  ASSERT_TRUE(block_in(r.ioc(), Scope::marked, release));
  // With one runner, only a spare can run this while the first is blocked.
  asio::post(r.ioc(), [&] { ran = true; });
  EXPECT_TRUE(eventually([&] { return ran.load(); }, 5s)) << "no spare took the blocked place";
  EXPECT_GE(r.stats().handoffs, 1u);
  EXPECT_EQ(r.stats().threads, 2u);
  release = true;
  // Back from the block: one runner too many, the spare parks.
  EXPECT_TRUE(eventually([&] { return r.stats().running == 1; }, 5s));
  // A parked spare is woken, not a new thread started, on the next block.
  release = false;
  ASSERT_TRUE(block_in(r.ioc(), Scope::marked, release));
  ran = false;
  asio::post(r.ioc(), [&] { ran = true; });
  EXPECT_TRUE(eventually([&] { return ran.load(); }, 5s));
  EXPECT_EQ(r.stats().threads, 2u);
  EXPECT_GE(r.stats().handoffs, 2u);
  release = true;
}

TEST(IoRunners, ThreadsMaxBoundsTheSpares) {
  std::atomic<bool> release{false};
  std::atomic<bool> ran{false};
  Running r({1, 2, 1000us, 5ms});
  const SetAtExit release_at_exit{release};
  ASSERT_TRUE(block_in(r.ioc(), Scope::marked, release));
  ASSERT_TRUE(block_in(r.ioc(), Scope::marked, release));  // on the spare
  asio::post(r.ioc(), [&] { ran = true; });
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(ran.load()) << "a third thread ran beyond threads_max 2";
  EXPECT_EQ(r.stats().threads, 2u);
  release = true;
  EXPECT_TRUE(eventually([&] { return ran.load(); }, 5s));
}

TEST(IoRunners, ABlockOutsideAScopeIsNotHandedOff) {
  std::atomic<bool> release{false};
  std::atomic<bool> ran{false};
  Running r({1, 4, 1000us, 5ms});
  const SetAtExit release_at_exit{release};
  ASSERT_TRUE(block_in(r.ioc(), Scope::none, release));  // unmarked: the contract's failure mode
  asio::post(r.ioc(), [&] { ran = true; });
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(ran.load());
  EXPECT_EQ(r.stats().handoffs, 0u);
  release = true;
  EXPECT_TRUE(eventually([&] { return ran.load(); }, 5s));
}

TEST(IoRunners, ACertainScopeIsHandedOffWithoutWaitingForTheDelay) {
  // A hand-off delay and idle tick of 10 s: only the certain scope's poke can bring a spare in
  // time.
  std::atomic<bool> release{false};
  std::atomic<bool> ran{false};
  Running r({1, 4, std::chrono::microseconds(10'000'000), 10s});
  const SetAtExit release_at_exit{release};
  ASSERT_TRUE(block_in(r.ioc(), Scope::certain, release));
  asio::post(r.ioc(), [&] { ran = true; });
  EXPECT_TRUE(eventually([&] { return ran.load(); }, 2s)) << "the certain scope was not handed off";
  EXPECT_GE(r.stats().handoffs, 1u);
  release = true;
  EXPECT_TRUE(eventually([&] { return r.stats().running == 1; }, 5s));
}

TEST(IoRunners, AShortScopeCostsNoHandoff) {
  std::atomic<int> done{0};
  Running r({2, 8, 1000us, 5ms});
  for (int i = 0; i < 2000; ++i) {
    asio::post(r.ioc(), [&] {
      const BlockingScope blocking;  // returns at once, as a page-cache hit does
      ++done;
    });
  }
  ASSERT_TRUE(eventually([&] { return done.load() == 2000; }, 10s));
  EXPECT_EQ(r.stats().handoffs, 0u);
  EXPECT_EQ(r.stats().threads, 2u);
}

TEST(IoRunners, StopJoinsParkedSpares) {
  std::atomic<bool> release{false};
  auto r = std::make_unique<Running>(IoRunners::Options{1, 3, 1000us, 5ms});
  const SetAtExit release_at_exit{release};
  ASSERT_TRUE(block_in(r->ioc(), Scope::marked, release));
  ASSERT_TRUE(eventually([&] { return r->stats().threads == 2; }, 5s));
  release = true;
  ASSERT_TRUE(eventually([&] { return r->stats().running == 1; }, 5s));
  r.reset();  // stops the io_context and joins the parked spare
}

// Two runners with an io_context each (the server's default): what runs where, and a spare
// for the context whose runner blocks.
TEST(IoRunners, EachContextRunsOnItsOwnThread) {
  std::atomic<int> done{0};
  std::mutex mu;
  std::set<std::thread::id> on_a, on_b;
  Running r({2, 4, 1000us, 5ms}, 2);
  asio::io_context& a = r.ioc(0);
  asio::io_context& b = r.ioc(1);
  for (int i = 0; i < 200; ++i) {
    asio::post(a, [&] {
      std::lock_guard lock(mu);
      on_a.insert(std::this_thread::get_id());
      ++done;
    });
    asio::post(b, [&] {
      std::lock_guard lock(mu);
      on_b.insert(std::this_thread::get_id());
      ++done;
    });
  }
  ASSERT_TRUE(eventually([&] { return done.load() == 400; }, 10s));
  std::lock_guard lock(mu);
  ASSERT_EQ(on_a.size(), 1u);
  ASSERT_EQ(on_b.size(), 1u);
  EXPECT_NE(*on_a.begin(), *on_b.begin());
  EXPECT_EQ(r.stats().threads, 2u);
}

TEST(IoRunners, ABlockedContextGetsASpareOfItsOwnAndTheOtherIsUntouched) {
  std::atomic<bool> release{false};
  std::atomic<bool> ran_a{false}, ran_b{false};
  Running r({2, 4, 1000us, 5ms}, 2);
  asio::io_context& a = r.ioc(0);
  asio::io_context& b = r.ioc(1);
  const SetAtExit release_at_exit{release};
  ASSERT_TRUE(block_in(a, Scope::marked, release));
  // b's runner is free, yet only a spare for a can run a's next handler.
  asio::post(a, [&] { ran_a = true; });
  asio::post(b, [&] { ran_b = true; });
  EXPECT_TRUE(eventually([&] { return ran_a.load(); }, 5s)) << "a got no spare";
  EXPECT_TRUE(eventually([&] { return ran_b.load(); }, 5s));
  EXPECT_EQ(r.stats().threads, 3u);
  release = true;
  EXPECT_TRUE(eventually([&] { return r.stats().running == 2; }, 5s));
  // The parked spare is woken for whichever context blocks next: b now.
  release = false;
  ran_b = false;
  ASSERT_TRUE(block_in(b, Scope::marked, release));
  asio::post(b, [&] { ran_b = true; });
  EXPECT_TRUE(eventually([&] { return ran_b.load(); }, 5s)) << "b got no spare";
  EXPECT_EQ(r.stats().threads, 3u);
  EXPECT_GE(r.stats().handoffs, 2u);
  release = true;
}

TEST(IoRunners, AnUnmarkedBlockHoldsOnlyItsOwnContext) {
  // The reason the RADOS and gateway backends share one context (io_runners.hpp).
  std::atomic<bool> release{false};
  std::atomic<bool> ran_a{false}, ran_b{false};
  Running r({2, 4, 1000us, 5ms}, 2);
  asio::io_context& a = r.ioc(0);
  asio::io_context& b = r.ioc(1);
  const SetAtExit release_at_exit{release};
  ASSERT_TRUE(block_in(a, Scope::none, release));
  asio::post(a, [&] { ran_a = true; });
  asio::post(b, [&] { ran_b = true; });
  EXPECT_TRUE(eventually([&] { return ran_b.load(); }, 5s));
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(ran_a.load());
  release = true;
  EXPECT_TRUE(eventually([&] { return ran_a.load(); }, 5s));
}

TEST(BlockingScope, IsANoOpOffARunnerAndNests) {
  BlockingSlot slot;
  { const BlockingScope off_runner; }
  EXPECT_EQ(slot.entered.load(), 0u);
  set_thread_blocking_slot(&slot);
  {
    const BlockingScope outer;
    const std::int64_t since = slot.blocked_since_ns.load();
    EXPECT_NE(since, 0);
    {
      const BlockingScope inner;
      EXPECT_EQ(slot.blocked_since_ns.load(), since) << "an inner scope must not restart it";
    }
    EXPECT_EQ(slot.blocked_since_ns.load(), since) << "the inner scope ended the outer one";
  }
  EXPECT_EQ(slot.blocked_since_ns.load(), 0);
  EXPECT_EQ(slot.entered.load(), 1u);
  set_thread_blocking_slot(nullptr);
}

}  // namespace
}  // namespace objdirect::http
