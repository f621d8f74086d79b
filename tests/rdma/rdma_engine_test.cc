// RdmaEngine admission control, driven in-process over a real libfabric tcp transport (loopback):
// a transfer that cannot get a staging buffer waits (FIFO, bounded) instead of being refused at
// once. A reader that blocks in pread() until the test opens its gate holds a transfer's staging
// buffers for as long as the test needs; the engine has a single buffer unless a test says not.
#include "server/rdma/rdma_engine.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "storage/object_store.hpp"
#include "token/fabric_advert.hpp"
#include "token/token.hpp"
#include "transport/transport.hpp"

namespace objdirect::rdma {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kChunk = 64 << 10;

std::uint64_t now_s() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

std::byte pattern_byte(int id, std::uint64_t pos) {
  return static_cast<std::byte>((id * 31 + pos * 7 + pos / 251) & 0xff);
}

// Opened once by the test; every pread() of a gated reader blocks until then.
class Gate {
 public:
  void open() {
    {
      std::lock_guard lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }
  void pass() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return open_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

// The order in which transfers were admitted: each reader logs its id at its first pread().
class AdmissionLog {
 public:
  void add(int id) {
    std::lock_guard lock(mu_);
    ids_.push_back(id);
  }
  std::vector<int> ids() {
    std::lock_guard lock(mu_);
    return ids_;
  }

 private:
  std::mutex mu_;
  std::vector<int> ids_;
};

// An object of `size` pattern bytes with no file descriptors (the engine stages through its
// buffers). Thread safety: used by one transfer at a time.
class TestReader : public storage::ObjectReader {
 public:
  explicit TestReader(int id, std::size_t size = kChunk, AdmissionLog* log = nullptr,
                      Gate* gate = nullptr)
      : id_(id), log_(log), gate_(gate) {
    meta_.key = std::to_string(id);
    meta_.size = size;
  }
  const storage::ObjectMeta& meta() const override { return meta_; }
  Result<std::size_t> pread(std::span<std::byte> dst, std::uint64_t offset) override {
    if (!logged_ && log_) log_->add(id_);
    logged_ = true;
    if (gate_) gate_->pass();
    const std::size_t n =
        static_cast<std::size_t>(std::min<std::uint64_t>(dst.size(), meta_.size - offset));
    for (std::size_t i = 0; i < n; ++i) dst[i] = pattern_byte(id_, offset + i);
    return n;
  }
  Result<std::vector<storage::Extent>> extents(std::uint64_t, std::uint64_t) override {
    return std::vector<storage::Extent>{};
  }

 private:
  int id_;
  AdmissionLog* log_;
  Gate* gate_;
  bool logged_ = false;
  storage::ObjectMeta meta_;
};

// The client side: a libfabric tcp endpoint (its own client identity for the per-client limit)
// and one registered buffer, one kChunk slot per transfer.
struct Client {
  std::unique_ptr<transport::Transport> tr;
  std::vector<std::byte> buf;
  std::shared_ptr<transport::MemoryRegion> mr;
  std::shared_ptr<void> hot;

  static std::unique_ptr<Client> open(std::size_t slots) {
    transport::Config cfg;
    cfg.fabric = "libfabric:tcp";
    cfg.progress_thread = true;
    auto t = transport::create_transport(cfg);
    if (!t.ok()) return nullptr;
    auto c = std::make_unique<Client>();
    c->tr = std::move(*t);
    c->hot = c->tr->keep_progress_hot(0, false);
    c->buf.assign(slots * kChunk, std::byte{0});
    auto mr = c->tr->register_memory(c->buf.data(), c->buf.size(), token::MemoryType::host);
    if (!mr.ok()) return nullptr;
    c->mr = *mr;
    return c;
  }
  token::Token token(std::size_t slot) const {
    return transport::make_token(*tr, {mr->remote_segment(slot * kChunk, kChunk)},
                                 token::MemoryType::host, now_s() + 300);
  }
  bool holds(std::size_t slot, int id) const {
    for (std::size_t i = 0; i < kChunk; ++i) {
      if (buf[slot * kChunk + i] != pattern_byte(id, i)) return false;
    }
    return true;
  }
};

// One send() on its own thread, as an S3 worker thread would run it.
struct Transfer {
  std::optional<Status> result;  // read after join()
  std::atomic<bool> done{false};
  Clock::duration took{};
  std::thread th;

  Transfer(RdmaEngine& e, const Client& c, std::size_t slot, TestReader& reader) {
    th = std::thread([this, &e, &c, slot, &reader] {
      const auto t0 = Clock::now();
      Status st = e.send(c.token(slot), reader, 0, kChunk);
      took = Clock::now() - t0;
      result = st;
      done = true;
    });
  }
  Status join() {
    th.join();
    return *result;
  }
};

// A GET whose reader blocks until release(): while it runs it holds one staging buffer (and one
// chunk of its client's budget), which is how each test below fills the engine.
struct Holder {
  Gate gate;
  TestReader reader;
  Transfer transfer;
  Holder(RdmaEngine& e, const Client& c, int id, std::size_t slot, AdmissionLog* log = nullptr)
      : reader(id, kChunk, log, &gate), transfer(e, c, slot, reader) {}
  Status release() {
    gate.open();
    return transfer.join();
  }
};

// Polls `pred` until true, at most 20 s.
bool eventually(const std::function<bool()>& pred) {
  const auto end = Clock::now() + 20s;
  while (Clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(1ms);
  }
  return pred();
}

class RdmaEngineAdmissionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ::setenv("FI_TCP_IFACE", "lo", 0); }

  // An engine over libfabric tcp with `buffers` staging buffers of kChunk, staging every GET.
  std::shared_ptr<RdmaEngine> engine(std::size_t buffers,
                                     const std::function<void(RdmaOptions&)>& tweak = {}) {
    RdmaOptions o;
    o.fabrics = "libfabric:tcp";
    o.chunk_bytes = kChunk;
    o.buffer_pool_bytes = buffers * kChunk;
    o.zero_copy_get = false;
    o.op_timeout = 10s;
    if (tweak) tweak(o);
    auto e = RdmaEngine::create(o);
    if (!e.ok()) {
      ADD_FAILURE() << e.status().to_string();
      return nullptr;
    }
    return *e;
  }
  static std::uint64_t waiters(const RdmaEngine& e) { return e.stats().admission_waiters; }
  // Whether, within 20 s, `n` staging buffers are in use / `n` transfers wait for admission.
  static bool in_use(const RdmaEngine& e, std::uint64_t n) {
    return eventually([&] { return e.stats().buffers_in_use == n; });
  }
  static bool queued(const RdmaEngine& e, std::uint64_t n) {
    return eventually([&] { return waiters(e) == n; });
  }
};

TEST_F(RdmaEngineAdmissionTest, WaiterIsAdmittedWhenALeaseIsReleased) {
  auto e = engine(1);
  ASSERT_TRUE(e);
  auto c = Client::open(2);
  ASSERT_TRUE(c) << "libfabric:tcp unavailable";
  TestReader rb(2);
  Holder a(*e, *c, 1, 0);
  ASSERT_TRUE(in_use(*e, 1));
  Transfer b(*e, *c, 1, rb);
  ASSERT_TRUE(queued(*e, 1));
  EXPECT_FALSE(b.done) << "b must wait while a holds the only buffer";
  EXPECT_TRUE(a.release().ok());
  Status sb = b.join();
  EXPECT_TRUE(sb.ok()) << sb.to_string();
  EXPECT_TRUE(c->holds(0, 1));
  EXPECT_TRUE(c->holds(1, 2));
  auto st = e->stats();
  EXPECT_EQ(st.admissions_waited, 1u);
  EXPECT_EQ(st.admissions_refused, 0u);
  EXPECT_EQ(st.admission_waiters, 0u);
  EXPECT_GT(st.admission_wait_ns_total, 0u);
  EXPECT_EQ(st.buffers_in_use, 0u);
  EXPECT_EQ(st.transfers_ok, 2u);
}

TEST_F(RdmaEngineAdmissionTest, WaitBoundRefusesWithSlowDown) {
  auto e = engine(1, [](RdmaOptions& o) { o.admission_wait_max = 300ms; });
  ASSERT_TRUE(e);
  auto c = Client::open(3);
  ASSERT_TRUE(c) << "libfabric:tcp unavailable";
  TestReader rb(2), rc(3);
  Holder a(*e, *c, 1, 0);
  ASSERT_TRUE(in_use(*e, 1));
  Transfer b(*e, *c, 1, rb);
  Status sb = b.join();
  EXPECT_EQ(sb.code(), Errc::slow_down) << sb.to_string();
  EXPECT_NE(sb.message().find("admission_wait_max"), std::string::npos) << sb.message();
  EXPECT_GE(b.took, 290ms);
  EXPECT_LT(b.took, 10s);
  auto st = e->stats();
  EXPECT_EQ(st.admissions_refused, 1u);
  EXPECT_EQ(st.admissions_refused_after_wait, 1u);
  EXPECT_EQ(st.admission_waiters, 0u);
  EXPECT_GE(st.admission_wait_ns_total, 290'000'000u);
  EXPECT_TRUE(a.release().ok());
  // The buffer is back: the next transfer goes at once.
  Transfer again(*e, *c, 2, rc);
  EXPECT_TRUE(again.join().ok());
  EXPECT_TRUE(c->holds(2, 3));
  EXPECT_EQ(e->stats().admissions_waited, 0u);
}

TEST_F(RdmaEngineAdmissionTest, ZeroWaitRefusesAtOnceAsBefore) {
  auto e = engine(1, [](RdmaOptions& o) { o.admission_wait_max = 0ms; });
  ASSERT_TRUE(e);
  auto c = Client::open(2);
  ASSERT_TRUE(c) << "libfabric:tcp unavailable";
  TestReader rb(2);
  Holder a(*e, *c, 1, 0);
  ASSERT_TRUE(in_use(*e, 1));
  Transfer b(*e, *c, 1, rb);
  EXPECT_EQ(b.join().code(), Errc::slow_down);
  EXPECT_EQ(e->stats().admissions_refused_after_wait, 0u);
  EXPECT_TRUE(a.release().ok());
}

TEST_F(RdmaEngineAdmissionTest, WaitersMaxRefusesAtOnce) {
  auto e = engine(1, [](RdmaOptions& o) {
    o.admission_wait_max = 30s;
    o.admission_waiters_max = 1;
  });
  ASSERT_TRUE(e);
  auto c = Client::open(3);
  ASSERT_TRUE(c) << "libfabric:tcp unavailable";
  TestReader rb(2), rc(3);
  Holder a(*e, *c, 1, 0);
  ASSERT_TRUE(in_use(*e, 1));
  Transfer b(*e, *c, 1, rb);
  ASSERT_TRUE(queued(*e, 1));
  Transfer cc(*e, *c, 2, rc);
  Status s3 = cc.join();
  EXPECT_EQ(s3.code(), Errc::slow_down) << s3.to_string();
  EXPECT_NE(s3.message().find("admission_waiters_max"), std::string::npos) << s3.message();
  EXPECT_LT(cc.took, 5s) << "past admission_waiters_max the refusal must not wait";
  auto st = e->stats();
  EXPECT_EQ(st.admissions_refused, 1u);
  EXPECT_EQ(st.admissions_refused_after_wait, 0u);
  EXPECT_EQ(st.admission_waiters, 1u);
  EXPECT_TRUE(a.release().ok());
  EXPECT_TRUE(b.join().ok());
  EXPECT_TRUE(c->holds(1, 2));
}

TEST_F(RdmaEngineAdmissionTest, WaitersAreAdmittedInArrivalOrder) {
  auto e = engine(1, [](RdmaOptions& o) { o.admission_wait_max = 30s; });
  ASSERT_TRUE(e);
  auto c = Client::open(6);
  ASSERT_TRUE(c) << "libfabric:tcp unavailable";
  AdmissionLog log;
  std::vector<std::unique_ptr<TestReader>> readers;
  for (int id = 1; id <= 5; ++id) {
    readers.push_back(std::make_unique<TestReader>(id, kChunk, &log));
  }
  Holder a(*e, *c, 0, 0, &log);
  ASSERT_TRUE(in_use(*e, 1));
  std::vector<std::unique_ptr<Transfer>> waiting;
  for (std::size_t i = 0; i < readers.size(); ++i) {
    waiting.push_back(std::make_unique<Transfer>(*e, *c, i + 1, *readers[i]));
    // The next one starts once this one is queued: arrival order is then known.
    ASSERT_TRUE(queued(*e, i + 1));
  }
  EXPECT_TRUE(a.release().ok());
  for (auto& w : waiting) EXPECT_TRUE(w->join().ok());
  EXPECT_EQ(log.ids(), (std::vector<int>{0, 1, 2, 3, 4, 5}));
  for (int id = 1; id <= 5; ++id) EXPECT_TRUE(c->holds(static_cast<std::size_t>(id), id));
  EXPECT_EQ(e->stats().admissions_waited, 5u);
}

TEST_F(RdmaEngineAdmissionTest, WaiterHeldByItsOwnClientLimitDoesNotBlockOtherClients) {
  // Two buffers, one chunk per client: client x's second transfer waits for x's own budget,
  // while client y, arriving after it, goes at once.
  auto e = engine(2, [](RdmaOptions& o) {
    o.per_client_inflight_bytes_max = kChunk;
    o.admission_wait_max = 30s;
  });
  ASSERT_TRUE(e);
  auto x = Client::open(2), y = Client::open(1);
  ASSERT_TRUE(x && y) << "libfabric:tcp unavailable";
  TestReader rb(2), rc(3);
  Holder a(*e, *x, 1, 0);
  ASSERT_TRUE(in_use(*e, 1));
  Transfer b(*e, *x, 1, rb);
  ASSERT_TRUE(queued(*e, 1));
  Transfer cy(*e, *y, 0, rc);
  Status sc = cy.join();  // returns while a still holds x's budget and b still waits
  EXPECT_TRUE(sc.ok()) << sc.to_string();
  EXPECT_TRUE(y->holds(0, 3));
  EXPECT_EQ(waiters(*e), 1u);
  EXPECT_FALSE(b.done) << "x's limit (one chunk) must hold b back";
  EXPECT_TRUE(a.release().ok());
  EXPECT_TRUE(b.join().ok());
  EXPECT_TRUE(x->holds(1, 2));
  auto st = e->stats();
  EXPECT_EQ(st.admissions_waited, 1u);
  EXPECT_EQ(st.admissions_refused, 0u);
}

TEST_F(RdmaEngineAdmissionTest, ShutdownRefusesEveryWaiter) {
  auto e = engine(1, [](RdmaOptions& o) { o.admission_wait_max = 60s; });
  ASSERT_TRUE(e);
  auto c = Client::open(4);
  ASSERT_TRUE(c) << "libfabric:tcp unavailable";
  TestReader rb(2), rc(3), rd(4);
  Holder a(*e, *c, 1, 0);
  ASSERT_TRUE(in_use(*e, 1));
  Transfer b(*e, *c, 1, rb);
  ASSERT_TRUE(queued(*e, 1));
  Transfer cc(*e, *c, 2, rc);
  ASSERT_TRUE(queued(*e, 2));
  e->shutdown();
  for (Transfer* t : {&b, &cc}) {
    Status s = t->join();
    EXPECT_EQ(s.code(), Errc::slow_down) << s.to_string();
    EXPECT_NE(s.message().find("shutting down"), std::string::npos) << s.message();
    EXPECT_LT(t->took, 30s);
  }
  // A later transfer that would have to wait is refused at once.
  Transfer d(*e, *c, 3, rd);
  EXPECT_EQ(d.join().code(), Errc::slow_down);
  EXPECT_LT(d.took, 5s);
  auto st = e->stats();
  EXPECT_EQ(st.admissions_refused_after_wait, 2u);
  EXPECT_EQ(st.admissions_refused, 3u);
  EXPECT_EQ(st.admission_waiters, 0u);
  // The admitted transfer runs on.
  EXPECT_TRUE(a.release().ok());
  EXPECT_TRUE(c->holds(0, 1));
}

// --fabric names each fabric once, and the engine advertises its fabrics in the canonical form of
// x-amz-rdma-fabrics (token/fabric_advert.hpp), which the client's parser gives back.
TEST_F(RdmaEngineAdmissionTest, FabricListNamesEachOnceAndIsAdvertisedCanonically) {
  RdmaOptions o;
  o.fabrics = "libfabric:tcp, libfabric:tcp";
  o.chunk_bytes = kChunk;
  o.buffer_pool_bytes = kChunk;
  auto twice = RdmaEngine::create(o);
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.code(), Errc::invalid_argument);
  EXPECT_EQ(twice.status().message(), "--fabric names 'libfabric:tcp' twice");
  auto e = engine(1, [](RdmaOptions& opts) { opts.fabrics = " libfabric:tcp ,"; });
  ASSERT_TRUE(e) << "libfabric:tcp unavailable";
  EXPECT_EQ(e->offered(), "libfabric:tcp");
  auto back = token::parse_fabric_advert(e->offered());
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, std::vector<std::string>{"libfabric:tcp"});
}

}  // namespace
}  // namespace objdirect::rdma
