// Single-process tests: transfer planning, the peer LRU, create_transport's argument checks, the
// capabilities each backend reports and the fabric table. The two-process data path is in
// transport_test.cc.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "transport/detail.hpp"
#include "transport/transport.hpp"
#include "transport/ucx/ucx_transport.hpp"

namespace objdirect::transport {
namespace {

// A region that registers nothing: planning only reads ptr/length.
class FakeRegion final : public MemoryRegion {
 public:
  FakeRegion(void* p, std::size_t n, Addressing a) : MemoryRegion(p, n, MemoryType::host, a) {
    key_ = 77;
  }
  void synchronize() const override {}
};

TEST(PlanChunks, SplitsAtEveryBoundaryOfEitherSide) {
  char buf[100];
  FakeRegion mr(buf, sizeof buf, Addressing::virtual_address);
  std::vector<LocalSegment> local = {{&mr, 0, 30}, {&mr, 50, 20}};
  std::vector<RemoteSegment> remote = {{1000, 10, 1, ""}, {2000, 35, 2, ""}, {3000, 5, 3, ""}};
  auto chunks = detail::plan_chunks(local, remote, 0);
  ASSERT_TRUE(chunks.ok()) << chunks.status().to_string();
  // local: [0,30) [50,70); remote: 10 | 35 | 5  -> 10, 20 (rest of local 0 / remote 1), 15, 5
  ASSERT_EQ(chunks->size(), 4u);
  auto expect = [&](std::size_t i, std::size_t loff, std::uint64_t raddr, std::uint64_t key,
                    std::uint64_t len, std::size_t rindex) {
    const auto& c = (*chunks)[i];
    EXPECT_EQ(c.local_offset, loff) << i;
    EXPECT_EQ(c.remote_addr, raddr) << i;
    EXPECT_EQ(c.key, key) << i;
    EXPECT_EQ(c.length, len) << i;
    EXPECT_EQ(c.remote_index, rindex) << i;
  };
  expect(0, 0, 1000, 1, 10, 0);
  expect(1, 10, 2000, 2, 20, 1);
  expect(2, 50, 2020, 2, 15, 1);
  expect(3, 65, 3000, 3, 5, 2);
}

TEST(PlanChunks, RespectsChunkBytesMaxAndSkipsEmptySegments) {
  char buf[100];
  FakeRegion mr(buf, sizeof buf, Addressing::offset);
  std::vector<LocalSegment> local = {{&mr, 0, 0}, {&mr, 0, 25}};
  std::vector<RemoteSegment> remote = {{0, 0, 1, ""}, {500, 25, 9, ""}};
  auto chunks = detail::plan_chunks(local, remote, 10);
  ASSERT_TRUE(chunks.ok());
  ASSERT_EQ(chunks->size(), 3u);
  EXPECT_EQ((*chunks)[2].remote_addr, 520u);
  EXPECT_EQ((*chunks)[2].length, 5u);
}

TEST(PlanChunks, RefusesMismatchAndOutOfRegion) {
  char buf[100];
  FakeRegion mr(buf, sizeof buf, Addressing::virtual_address);
  std::vector<LocalSegment> local = {{&mr, 0, 100}};
  std::vector<RemoteSegment> shorter = {{0, 99, 1, ""}};
  auto r = detail::plan_chunks(local, shorter, 0);
  EXPECT_EQ(r.code(), Errc::invalid_argument);
  EXPECT_NE(r.status().message().find("remote range shorter"), std::string::npos);
  std::vector<RemoteSegment> longer = {{0, 101, 1, ""}};
  EXPECT_EQ(detail::plan_chunks(local, longer, 0).code(), Errc::invalid_argument);
  std::vector<LocalSegment> outside = {{&mr, 1, 100}};
  std::vector<RemoteSegment> exact = {{0, 100, 1, ""}};
  EXPECT_EQ(detail::plan_chunks(outside, exact, 0).code(), Errc::invalid_argument);
  std::vector<LocalSegment> null_mr = {{nullptr, 0, 100}};
  EXPECT_EQ(detail::plan_chunks(null_mr, exact, 0).code(), Errc::invalid_argument);
  std::vector<RemoteSegment> wraps = {{~0ull - 10, 100, 1, ""}};
  EXPECT_EQ(detail::plan_chunks(local, wraps, 0).code(), Errc::invalid_argument);
  std::vector<LocalSegment> many(limits::transport_segments_max + 1, {&mr, 0, 0});
  EXPECT_EQ(detail::plan_chunks(many, {}, 0).code(), Errc::invalid_argument);
}

TEST(MemoryRegion, RemoteAddressFollowsAddressingMode) {
  char buf[64];
  FakeRegion va(buf, sizeof buf, Addressing::virtual_address);
  FakeRegion off(buf, sizeof buf, Addressing::offset);
  EXPECT_EQ(va.remote_address(8), reinterpret_cast<std::uintptr_t>(buf) + 8);
  EXPECT_EQ(off.remote_address(8), 8u);
  token::Segment s = off.remote_segment(4, 16);
  EXPECT_EQ(s.addr, 4u);
  EXPECT_EQ(s.length, 16u);
  EXPECT_EQ(s.key, 77u);
}

TEST(PeerLru, EvictsLeastRecentlyUsedIdlePeer) {
  detail::PeerLru<int> lru(2);
  std::string victim;
  ASSERT_TRUE(lru.pick_victim(victim));
  EXPECT_TRUE(victim.empty());
  lru.insert("a", 1);
  lru.insert("b", 2);
  ASSERT_NE(lru.find("a"), nullptr);  // a is now most recent
  ASSERT_TRUE(lru.pick_victim(victim));
  EXPECT_EQ(victim, "b");
  lru.peek("b")->inflight = 1;  // busy peers are never chosen
  ASSERT_TRUE(lru.pick_victim(victim));
  EXPECT_EQ(victim, "a");
  lru.peek("a")->inflight = 1;
  EXPECT_FALSE(lru.pick_victim(victim));
  lru.peek("a")->inflight = 0;
  ASSERT_TRUE(lru.pick_victim(victim));
  lru.erase(victim);
  lru.insert("c", 3);
  EXPECT_EQ(lru.size(), 2u);
  EXPECT_EQ(lru.find("a"), nullptr);
  EXPECT_EQ(lru.find("c")->handle, 3);
}

// Waits up to `limit` for pred(); true when it held.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return pred();
}

TEST(ProgressThread, IdlesColdAndPollsHotOnlyWhileHeld) {
  std::atomic<unsigned> polls{0};
  // Cold polls every 10 s: beyond the first poll, every poll below comes from a hold.
  detail::ProgressThread pt([&] { return polls.fetch_add(1), false; },
                            std::chrono::microseconds(100), std::chrono::seconds(10));
  ASSERT_TRUE(eventually([&] { return polls.load() >= 1; }, std::chrono::seconds(5)));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_LE(polls.load(), 2u) << "a cold progress thread must not spin";
  EXPECT_EQ(pt.holds(), 0u);
  {
    auto h1 = pt.hold();
    auto h2 = pt.hold();
    ASSERT_NE(h1, nullptr);
    EXPECT_EQ(pt.holds(), 2u);
    // hold() wakes the sleeper at once (not after the 10 s idle poll) and it keeps polling.
    const unsigned before = polls.load();
    EXPECT_TRUE(eventually([&] { return polls.load() >= before + 50; }, std::chrono::seconds(5)));
    h1.reset();
    EXPECT_EQ(pt.holds(), 1u);
    const unsigned mid = polls.load();
    EXPECT_TRUE(eventually([&] { return polls.load() >= mid + 50; }, std::chrono::seconds(5)));
  }
  EXPECT_EQ(pt.holds(), 0u);
  // Released: back to cold within one back-off sleep; then (almost) no polls.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const unsigned after = polls.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_LE(polls.load(), after + 1);
  // The destructor wakes the cold thread and joins it well before the 10 s idle poll.
}

TEST(ProgressThread, RelaxedHoldsAloneBackOffFurtherAndAStrictOneRestoresFullRate) {
  std::atomic<unsigned> polls{0};
  // Hot sleeps of at most 100 us, relaxed ones of at most 20 ms; cold polls every 10 s.
  detail::ProgressThread pt([&] { return polls.fetch_add(1), false; },
                            std::chrono::microseconds(100), std::chrono::seconds(10),
                            std::chrono::milliseconds(20));
  // Polls per relaxed maximum (20 ms) over `window`, once the back-off has ramped up. Both parts
  // hold on a loaded machine: the ramp (64 sched_yield rounds, then growing sleeps) is waited
  // out, not assumed done after a fixed time, since under load each yield can last a time
  // slice; and the rate is taken over the time that really passed, since this thread's own
  // sleep can overrun. A sleep is never shorter than asked, so load can only lower the rate.
  auto polls_per_relaxed_sleep = [&](std::chrono::milliseconds window) {
    const auto ramp_end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    for (;;) {  // ramped: a 50 ms spell with at most 3 polls (a 20 ms sleep allows 2 or 3)
      const unsigned b = polls.load();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      if (polls.load() - b <= 3 || std::chrono::steady_clock::now() > ramp_end) break;
    }
    const auto t0 = std::chrono::steady_clock::now();
    const unsigned before = polls.load();
    std::this_thread::sleep_for(window);
    const unsigned n = polls.load() - before;
    const std::chrono::duration<double, std::milli> elapsed = std::chrono::steady_clock::now() - t0;
    return n / (elapsed.count() / 20.0);
  };
  auto relaxed = pt.hold(true);
  EXPECT_EQ(pt.holds(), 1u);
  EXPECT_LE(polls_per_relaxed_sleep(std::chrono::milliseconds(200)), 1.3)
      << "with only relaxed holds the sleeps grow to the relaxed maximum (20 ms)";
  {
    auto strict = pt.hold();
    EXPECT_EQ(pt.holds(), 2u);
    // Within one relaxed sleep the thread is back at full rate: 50 polls of at most 100 us.
    const unsigned before = polls.load();
    EXPECT_TRUE(eventually([&] { return polls.load() >= before + 50; }, std::chrono::seconds(5)));
  }
  EXPECT_EQ(pt.holds(), 1u);
  EXPECT_LE(polls_per_relaxed_sleep(std::chrono::milliseconds(200)), 1.3)
      << "the strict hold is gone";
  relaxed.reset();
  EXPECT_EQ(pt.holds(), 0u);
}

TEST(ProgressThread, AStrictHoldWakesALongRelaxedSleepAtOnce) {
  std::atomic<unsigned> polls{0};
  std::atomic<bool> work{false};
  // Relaxed sleeps of up to 60 s: only a wake-up can bring polls back within the test.
  detail::ProgressThread pt([&] { return polls.fetch_add(1), work.load(); },
                            std::chrono::microseconds(100), std::chrono::seconds(60),
                            std::chrono::seconds(60));
  auto relaxed = pt.hold(true);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  unsigned before = polls.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_LE(polls.load(), before + 1) << "a relaxed hold after a cold spell starts sleeping long";
  {
    auto strict = pt.hold();
    before = polls.load();
    EXPECT_TRUE(eventually([&] { return polls.load() >= before + 50; }, std::chrono::seconds(5)))
        << "the strict hold did not wake the relaxed sleep";
    work = true;
    EXPECT_TRUE(eventually([&] { return polls.load() >= before + 100; }, std::chrono::seconds(5)));
    work = false;
  }
  // Relaxed after work: a ramp of hot polls (a few ms), then the long sleeps.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  before = polls.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_LE(polls.load(), before + 1) << "and then the long sleeps";
  relaxed.reset();
  // The destructor wakes the sleeping thread and joins it well before 60 s.
}

TEST(ProgressThread, RelaxedHoldsDoNotWakeALongRelaxedSleep) {
  // A client takes a relaxed hold per small request while its server copies by itself
  // (keep_progress_hot): each wake-up of the thread's long sleep would be a context switch per
  // request for nothing, since that sleep waits for strict holds only.
  std::atomic<unsigned> polls{0};
  detail::ProgressThread pt([&] { return polls.fetch_add(1), false; },
                            std::chrono::microseconds(100), std::chrono::seconds(60),
                            std::chrono::seconds(60));
  auto first = pt.hold(true);  // from cold: one poll, then the long sleep
  ASSERT_TRUE(eventually([&] { return polls.load() >= 1; }, std::chrono::seconds(5)));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const unsigned long before = progress_thread_switches();
  ASSERT_GT(before, 0u) << "the progress thread is not found by its name";
  for (int i = 0; i < 200; ++i) {  // apart, as requests are: each would find the thread asleep
    auto h = pt.hold(true);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_LE(progress_thread_switches() - before, 10u) << "relaxed holds woke the long sleep";
  {
    auto strict = pt.hold();  // and a strict one still does, at once
    const unsigned p = polls.load();
    EXPECT_TRUE(eventually([&] { return polls.load() >= p + 50; }, std::chrono::seconds(5)));
  }
}

TEST(ProgressThread, ARelaxedMaximumBelowTheHotOneIsTheHotOne) {
  std::atomic<unsigned> polls{0};
  detail::ProgressThread pt([&] { return polls.fetch_add(1), false; },
                            std::chrono::microseconds(100), std::chrono::seconds(10),
                            std::chrono::microseconds(0));
  auto relaxed = pt.hold(true);
  const unsigned before = polls.load();
  EXPECT_TRUE(eventually([&] { return polls.load() >= before + 50; }, std::chrono::seconds(5)));
}

TEST(CreateTransport, RefusesUnknownFabric) {
  EXPECT_EQ(create_transport(Config{"infiniband"}).code(), Errc::invalid_argument);
  EXPECT_EQ(create_transport(Config{"libfabric:nope"}).code(), Errc::invalid_argument);
}

TEST(CreateTransport, ReportsCapabilities) {
  auto tcp = create_transport(Config{"libfabric:tcp", false});
  if (!tcp.ok()) GTEST_SKIP() << tcp.status().to_string();
  EXPECT_EQ((*tcp)->caps().name, "libfabric:tcp");
  EXPECT_EQ((*tcp)->caps().provider, "tcp");
  EXPECT_EQ((*tcp)->caps().addressing, Addressing::offset);  // tcp;ofi_rxm has no VIRT_ADDR
  EXPECT_GE((*tcp)->caps().rma_iov_max, 1u);
  EXPECT_FALSE((*tcp)->local_address().empty());
  auto shm = create_transport(Config{"libfabric:shm", false});
  if (shm.ok()) {
    EXPECT_EQ((*shm)->caps().addressing, Addressing::virtual_address);
  }
  auto ucx = create_transport(Config{"ucx", false});
  if (ucx.ok()) {
    EXPECT_EQ((*ucx)->caps().addressing, Addressing::virtual_address);
    EXPECT_LE((*ucx)->local_address().size(), limits::token_endpoint_bytes_max);
  }
}

// The facts the engine and the client ask instead of comparing fabric names (transport.hpp,
// Capabilities): each backend fills them in.
TEST(CreateTransport, ReportsSeamFacts) {
  struct Want {
    const char* fabric;
    bool pins, mapped_source, peer_copies, reset;
  };
  for (const Want& w :
       {Want{"libfabric:tcp", false, true, false, false},
        Want{"libfabric:shm", false, true, true, true}, Want{"ucx", true, false, false, false}}) {
    SCOPED_TRACE(w.fabric);
    auto t = create_transport(Config{w.fabric, false});
    if (!t.ok()) continue;  // not on this machine
    const Capabilities& c = (*t)->caps();
    EXPECT_EQ(c.registration_pins, w.pins);
    EXPECT_EQ(c.mapped_source_write, w.mapped_source);
    EXPECT_EQ(c.peer_copies, w.peer_copies);
    EXPECT_EQ(c.reset_after_peer_failure, w.reset);
    if (!c.peer_copies) {
      EXPECT_FALSE((*t)->peer_gone_check((*t)->local_address())());
    }
  }
}

// shm's peer_gone_check reads the pid out of an ObjDirect shm address: a live process (this one)
// is not gone, an exited one is, even after the transport that made the check is destroyed; an
// address naming no process is never "gone".
TEST(CreateTransport, ShmPeerGoneCheckFollowsThePeerProcess) {
  auto shm = create_transport(Config{"libfabric:shm", false});
  if (!shm.ok()) GTEST_SKIP() << shm.status().to_string();
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  auto self = (*shm)->peer_gone_check((*shm)->local_address());
  auto dead =
      (*shm)->peer_gone_check("fi_shm://objdirect-" + std::to_string(child) + "-0123456789abcdef");
  auto foreign = (*shm)->peer_gone_check("fi_shm://someone-else");
  shm->reset();
  EXPECT_FALSE(self());
  EXPECT_TRUE(dead());
  EXPECT_FALSE(foreign());
}

// The one table of fabric names: every row opens by its name or fails as unavailable (never as
// an unknown name), and create_transport's error for an unknown name lists the table.
TEST(FabricTable, EveryRowIsAFabricCreateTransportKnows) {
  ASSERT_FALSE(fabric_table().empty());
  for (const auto& f : fabric_table()) {
    SCOPED_TRACE(std::string(f.name));
    EXPECT_EQ(find_fabric(f.name), &f);
    auto t = create_transport(Config{std::string(f.name), false});
    if (t.ok()) {
      EXPECT_EQ((*t)->caps().name, f.name);
    } else {
      EXPECT_EQ(t.code(), Errc::unavailable) << t.status().to_string();
    }
  }
  EXPECT_EQ(find_fabric("libfabric:nope"), nullptr);
  auto bad = create_transport(Config{"infiniband"});
  ASSERT_FALSE(bad.ok());
  for (const auto& f : fabric_table()) {
    EXPECT_NE(bad.status().message().find(std::string(f.name)), std::string::npos) << f.name;
  }
}

TEST(Transport, EmptyTransferCompletesWithoutContactingAndOpsAreConsumedOnce) {
  for (const char* fabric : {"libfabric:tcp", "ucx"}) {
    SCOPED_TRACE(fabric);
    auto t = create_transport(Config{fabric, false});
    if (!t.ok()) continue;
    auto op = (*t)->post_write("no such peer", {}, {});
    ASSERT_TRUE(op.ok()) << op.status().to_string();
    EXPECT_TRUE((*t)->wait(*op, std::chrono::milliseconds(100)).ok());
    EXPECT_EQ((*t)->wait(*op, std::chrono::milliseconds(100)).code(), Errc::invalid_argument);
    EXPECT_EQ((*t)->wait(OpId{12345}, std::chrono::milliseconds(100)).code(),
              Errc::invalid_argument);
    EXPECT_EQ((*t)->peers_cached(), 0u);
  }
}

TEST(TransportToken, MadeByTransportRoundTripsAndIsCheckedByServer) {
  auto t = create_transport(Config{"libfabric:tcp", false});
  if (!t.ok()) GTEST_SKIP() << t.status().to_string();
  std::vector<char> buf(8192);
  auto mr = (*t)->register_memory(buf.data(), buf.size(), MemoryType::host);
  ASSERT_TRUE(mr.ok());
  const std::uint64_t now = 1'700'000'000;
  token::Token tok =
      make_token(**t, {(*mr)->remote_segment(0, 4096), (*mr)->remote_segment(6000, 100)},
                 MemoryType::host, now + 60);
  EXPECT_EQ(tok.total_length, 4196u);
  EXPECT_EQ(tok.provider, "tcp");
  EXPECT_EQ(tok.addressing, Addressing::offset);
  EXPECT_EQ(tok.segments[1].addr, 6000u);
  EXPECT_EQ(tok.segments[1].key, (*mr)->key());
  EXPECT_EQ(tok.endpoint, (*t)->local_address());
  token::Token other = make_token(**t, {(*mr)->remote_segment(0, 1)}, MemoryType::host, now + 60);
  EXPECT_NE(tok.nonce, other.nonce);
  auto back = token::decode(token::encode(tok), now);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, tok);
  EXPECT_TRUE(check_token(**t, *back, true).ok());
  EXPECT_TRUE(check_token(**t, *back, false).ok());

  token::Token wrong = tok;
  wrong.backend = Backend::ucx;
  EXPECT_EQ(check_token(**t, wrong, true).code(), Errc::rdma_declined);
  wrong = tok;
  wrong.provider = "shm";
  EXPECT_EQ(check_token(**t, wrong, true).code(), Errc::rdma_declined);
  wrong = tok;
  wrong.addressing = Addressing::virtual_address;
  EXPECT_EQ(check_token(**t, wrong, true).code(), Errc::rdma_declined);
  wrong = tok;
  wrong.memory_type = MemoryType::cuda;
  EXPECT_EQ(check_token(**t, wrong, true).code(), Errc::rdma_declined);
}

}  // namespace
}  // namespace objdirect::transport

namespace objdirect::transport {
namespace {

// A SIGKILLed process leaves its shm region behind; the next shm transport removes it, and
// never a region of a process that is still alive.
TEST(ShmRegions, RegionsOfDeadProcessesAreReclaimed) {
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);  // `child` is now a pid with no process
  std::string dead = "/dev/shm/objdirect-" + std::to_string(child) + "-deadbeefdeadbeef";
  std::string live = "/dev/shm/objdirect-" + std::to_string(::getpid()) + "-0123456789abcdef";
  for (const auto& p : {dead, live}) {
    FILE* f = std::fopen(p.c_str(), "w");
    ASSERT_NE(f, nullptr) << p;
    std::fclose(f);
  }
  auto shm = create_transport(Config{"libfabric:shm", false});
  ASSERT_TRUE(shm.ok()) << shm.status().to_string();
  EXPECT_NE(::access(dead.c_str(), F_OK), 0) << "the dead process's region is still there";
  EXPECT_EQ(::access(live.c_str(), F_OK), 0) << "a live process's region was removed";
  ::unlink(live.c_str());
}

// UCX counts as a NIC fabric only with an RDMA device in the sysfs class directory and UCX_TLS
// letting rc/dc in (this host has no device, so only the decision can be checked here).
TEST(UcxUsesNic, NeedsADeviceAndTransportsThatUseIt) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("objdirect-ib-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  EXPECT_FALSE(ucx::ucx_uses_nic(dir.string(), nullptr));  // no directory
  std::filesystem::create_directories(dir);
  EXPECT_FALSE(ucx::ucx_uses_nic(dir.string(), nullptr));  // no device in it
  std::filesystem::create_directories(dir / "mlx5_0");
  EXPECT_TRUE(ucx::ucx_uses_nic(dir.string(), nullptr));  // UCX_TLS unset: UCX picks rc/dc
  EXPECT_TRUE(ucx::ucx_uses_nic(dir.string(), ""));
  for (const char* tls : {"rc", "dc_x", "rc_verbs", "tcp,rc_mlx5", "sm,ib", "all", "^tcp"}) {
    EXPECT_TRUE(ucx::ucx_uses_nic(dir.string(), tls)) << tls;
  }
  for (const char* tls : {"tcp", "sm", "tcp,sm,self", "cma,posix", "rcx", "xrc"}) {
    EXPECT_FALSE(ucx::ucx_uses_nic(dir.string(), tls)) << tls;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace objdirect::transport
