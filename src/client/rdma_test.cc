// The client's fabric end to end without the server: the token the client builds for a buffer
// slice must let another transport (the initiator, as the server would be) write exactly that
// slice (GET) and read exactly it (PUT). Two transports in one process, real providers.
#include "client/rdma.hpp"

#include <gtest/gtest.h>
#include <time.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "token/token.hpp"
#include "transport/transport.hpp"

namespace objdirect::client {
namespace {

class ClientFabricTest : public ::testing::TestWithParam<const char*> {};

std::uint64_t now_s() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

TEST_P(ClientFabricTest, TokenCoversExactlyTheSliceAndCarriesData) {
  auto fabric = open_fabric(GetParam(), FabricOptions{});
  if (!fabric.ok()) GTEST_SKIP() << GetParam() << ": " << fabric.status().message();
  EXPECT_EQ((*fabric)->name(), GetParam());
  transport::Config ic;
  ic.fabric = GetParam();
  auto initiator = transport::create_transport(ic);
  ASSERT_TRUE(initiator.ok()) << initiator.status().to_string();

  // The client's buffer; the request covers [off, off+len) of it.
  std::vector<std::byte> client_buf(1 << 20, std::byte{0xEE});
  const std::size_t off = 4096 + 3, len = 100'000;
  std::shared_ptr<void> hold;
  auto text = (*fabric)->make_token(std::span(client_buf).subspan(off, len), 60, hold);
  ASSERT_TRUE(text.ok()) << text.status().to_string();
  ASSERT_TRUE(hold);
  EXPECT_TRUE(text->starts_with("OD1."));
  auto tok = token::decode(*text, now_s());
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  EXPECT_EQ(tok->total_length, len);
  ASSERT_EQ(tok->segments.size(), 1u);
  EXPECT_GT(tok->expires_unix_s, now_s() + 50);
  EXPECT_LE(tok->expires_unix_s, now_s() + 61);
  ASSERT_TRUE(transport::check_token(**initiator, *tok, true).ok());

  // GET direction: the initiator writes into the client's slice.
  std::vector<std::byte> server_buf(len);
  for (std::size_t i = 0; i < len; ++i) server_buf[i] = static_cast<std::byte>(i * 7 + 1);
  auto mr = (*initiator)->register_memory(server_buf.data(), len, transport::MemoryType::host);
  ASSERT_TRUE(mr.ok());
  transport::LocalSegment ls{mr->get(), 0, len};
  auto op = (*initiator)->post_write(tok->endpoint, std::span(&ls, 1), tok->segments);
  ASSERT_TRUE(op.ok()) << op.status().to_string();
  ASSERT_TRUE((*initiator)->wait(*op, std::chrono::seconds(20)).ok());
  EXPECT_EQ(std::memcmp(client_buf.data() + off, server_buf.data(), len), 0);
  EXPECT_EQ(client_buf[off - 1], std::byte{0xEE}) << "wrote before the slice";
  EXPECT_EQ(client_buf[off + len], std::byte{0xEE}) << "wrote past the slice";

  // PUT direction: the initiator reads the client's slice (a fresh token for the same slice
  // comes from the registration cache on tcp/shm).
  for (std::size_t i = 0; i < len; ++i) client_buf[off + i] = static_cast<std::byte>(i * 3 + 5);
  std::memset(server_buf.data(), 0, len);
  std::shared_ptr<void> hold2;
  auto text2 = (*fabric)->make_token(std::span(client_buf).subspan(off, len), 60, hold2);
  ASSERT_TRUE(text2.ok());
  EXPECT_NE(*text2, *text) << "every token has its own nonce";
  auto tok2 = token::decode(*text2, now_s());
  ASSERT_TRUE(tok2.ok());
  auto rop = (*initiator)->post_read(tok2->endpoint, std::span(&ls, 1), tok2->segments);
  ASSERT_TRUE(rop.ok()) << rop.status().to_string();
  ASSERT_TRUE((*initiator)->wait(*rop, std::chrono::seconds(20)).ok());
  EXPECT_EQ(std::memcmp(client_buf.data() + off, server_buf.data(), len), 0);
}

TEST_P(ClientFabricTest, PinnedRegistrationServesSubSpans) {
  auto fabric = open_fabric(GetParam(), FabricOptions{});
  if (!fabric.ok()) GTEST_SKIP() << GetParam() << ": " << fabric.status().message();
  std::vector<std::byte> buf(1 << 16);
  auto pin = (*fabric)->pin(buf.data(), buf.size());
  ASSERT_TRUE(pin.ok()) << pin.status().to_string();
  std::shared_ptr<void> h1, h2;
  ASSERT_TRUE((*fabric)->make_token(std::span(buf).subspan(0, 100), 60, h1).ok());
  ASSERT_TRUE((*fabric)->make_token(std::span(buf).subspan(1000, 5000), 60, h2).ok());
  // A hold points at its registration (and also keeps the progress thread hot).
  EXPECT_EQ(h1.get(), h2.get()) << "both slices should use the pinned registration";
  // Once the pin and the holders go, an unregistered buffer on a fabric that pins pages (UCX)
  // is registered per request; on tcp/shm the registration stays cached.
  pin = Status(Errc::internal, "released");
  h1.reset();
  h2.reset();
  std::shared_ptr<void> h3;
  ASSERT_TRUE((*fabric)->make_token(std::span(buf).subspan(0, 100), 60, h3).ok());
  const void* reg3 = h3.get();
  h3.reset();
  const std::string name = GetParam();
  if (name != "ucx") {
    std::shared_ptr<void> h4;
    ASSERT_TRUE((*fabric)->make_token(std::span(buf).subspan(0, 100), 60, h4).ok());
    EXPECT_EQ(h4.get(), reg3) << name << ": the cached registration serves the next request";
  }
}

TEST_P(ClientFabricTest, TokenHoldKeepsTheProgressThreadHot) {
  auto fabric = open_fabric(GetParam(), FabricOptions{});
  if (!fabric.ok()) GTEST_SKIP() << GetParam() << ": " << fabric.status().message();
  std::vector<std::byte> buf(4096);
  std::shared_ptr<void> h;
  ASSERT_TRUE((*fabric)->make_token(std::span(buf), 60, h).ok());
  ASSERT_NE(h, nullptr);
  // Observed through the process's CPU time: hot, the progress thread polls (yields, sleeps of
  // at most 100 us: about 5 % of a core here); released, it polls once per 20 ms (~0).
  auto cpu = [] {
    timespec ts{};
    ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
  };
  h.reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const double c0 = cpu();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const double cold_ms = cpu() - c0;
  EXPECT_LT(cold_ms, 10.0) << GetParam() << ": a released token leaves the progress thread idle";
}

// While a token is out the server may move its bytes. At 4 KiB or less a server may leave a
// shm write for this process's progress to carry out, so such a token keeps the progress thread
// at full rate (sleeps of at most 100 us) unless the server said, in its last RDMA reply, that
// its operations land without our polls (x-amz-rdma-target-progress: none), and another token
// is out: a lone small request keeps the thread polling, which shortens its wait for the reply.
// Larger ranges always move without our polls. Relaxed, the thread sleeps 20 ms at a time.
// Seen through the progress thread's voluntary context switches, one per sleep.
TEST(ClientFabric, SmallShmTokensKeepPollingUnlessTheServerSaysItNeedsNoPolls) {
  auto fabric = open_fabric("libfabric:shm", FabricOptions{});
  if (!fabric.ok()) GTEST_SKIP() << fabric.status().message();
  std::vector<std::byte> buf(1 << 17);
  // Switches over 300 ms while tokens for these sizes (distinct ranges of buf) are out.
  auto switches_while_held = [&](std::vector<std::size_t> sizes) {
    std::vector<std::shared_ptr<void>> holds(sizes.size());
    std::size_t at = 0;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      EXPECT_TRUE((*fabric)->make_token(std::span(buf).subspan(at, sizes[i]), 60, holds[i]).ok());
      at += sizes[i];
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const unsigned long before = transport::progress_thread_switches();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    return transport::progress_thread_switches() - before;
  };
  const std::size_t small = 4096, large = 4097;
  const unsigned long small_alone = switches_while_held({small});
  const unsigned long large_alone = switches_while_held({large});
  const unsigned long small_beside_large = switches_while_held({large, small});
  (*fabric)->note_server_needs_no_polls(true);
  const unsigned long told_alone = switches_while_held({small});
  const unsigned long told_beside_large = switches_while_held({large, small});
  const unsigned long told_beside_small = switches_while_held({small, small});
  (*fabric)->note_server_needs_no_polls(false);
  const unsigned long untold_again = switches_while_held({large, small});
  // Hot: about 3,000 sleeps in 300 ms on an idle machine; relaxed: about 15.
  EXPECT_GE(small_alone, 150u);
  EXPECT_LE(large_alone, 40u);
  EXPECT_GE(small_beside_large, 150u) << "a small token needs our polls unless the server says not";
  EXPECT_GE(told_alone, 150u) << "a lone small request keeps the thread polling";
  EXPECT_LE(told_beside_large, 40u);
  EXPECT_GE(told_beside_small, 150u) << "the first small token (alone when made) is strict";
  EXPECT_GE(untold_again, 150u) << "a later reply without the word restores polling";
}

TEST(ClientFabric, UnknownNameAndEmptyBuffer) {
  EXPECT_EQ(open_fabric("rdma:nope", FabricOptions{}).code(), Errc::invalid_argument);
  auto f = open_fabric("libfabric:tcp", FabricOptions{});
  if (!f.ok()) GTEST_SKIP() << f.status().message();
  std::shared_ptr<void> h;
  EXPECT_EQ((*f)->make_token({}, 60, h).code(), Errc::invalid_argument);
}

INSTANTIATE_TEST_SUITE_P(Fabrics, ClientFabricTest,
                         ::testing::Values("libfabric:tcp", "libfabric:shm", "ucx"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (auto& ch : s) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return s;
                         });

}  // namespace
}  // namespace objdirect::client
