// The UCX endpoint address prefix (peer_address.hpp): encode -> decode round trips, bare and
// malformed addresses read as bare worker addresses, this process's namespace, a child in a new
// network namespace seen as another one, and the fuzz body over the checked-in seeds
// (peer_address_corpus/) and mutations of them.
#include "transport/ucx/peer_address.hpp"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "transport/ucx/peer_address_fuzz.hpp"

namespace objdirect::transport::ucx {
namespace {

bool fuzz(const std::string& s) {
  return peer_address_fuzz_one(reinterpret_cast<const std::uint8_t*>(s.data()), s.size());
}

TEST(UcxPeerAddress, EncodeThenDecodeGivesBackNamespaceAndWorker) {
  const std::string worker("\x96\x00\x11\xff worker bytes", 17);
  const NetNamespace ns{0x04, 0xf00000d8};
  const std::string enc = encode_peer_address(ns, worker);
  EXPECT_EQ(enc.size(), peer_address_header_bytes + worker.size());
  EXPECT_EQ(enc.substr(0, 5), std::string("ODNS\x01"));
  // Little-endian dev then ino (docs/token_format.md, "UCX endpoint address").
  EXPECT_EQ(enc.substr(5, 8), std::string("\x04\0\0\0\0\0\0\0", 8));
  EXPECT_EQ(enc.substr(13, 8), std::string("\xd8\0\0\xf0\0\0\0\0", 8));
  const PeerAddress back = decode_peer_address(enc);
  ASSERT_TRUE(back.net_namespace.has_value());
  EXPECT_EQ(*back.net_namespace, ns);
  EXPECT_EQ(back.worker, worker);
}

TEST(UcxPeerAddress, AnythingElseIsABareWorkerAddress) {
  const std::string prefix("ODNS\x01", 5);
  const std::string sixteen(16, '\x07');
  for (const std::string& bare :
       {std::string(), std::string("\x96\x11", 2), std::string("ODNS"), prefix + sixteen,
        std::string("ODNS\x02", 5) + sixteen + "w", std::string("odns\x01", 5) + sixteen + "w",
        std::string("XDNS\x01", 5) + sixteen + "w"}) {
    const PeerAddress got = decode_peer_address(bare);
    EXPECT_FALSE(got.net_namespace.has_value()) << bare.size();
    EXPECT_EQ(got.worker, bare);
  }
  // The smallest prefixed address: one worker byte.
  const PeerAddress one = decode_peer_address(prefix + sixteen + "w");
  ASSERT_TRUE(one.net_namespace.has_value());
  EXPECT_EQ(one.worker, "w");
}

TEST(UcxPeerAddressDeathTest, EmptyWorkerAddressIsAProgrammerError) {
  EXPECT_DEATH(encode_peer_address(NetNamespace{1, 2}, ""), "never empty");
}

// Another network namespace is another NetNamespace; the same one compares equal. Needs
// CAP_SYS_ADMIN for unshare(CLONE_NEWNET) (root here); skipped otherwise.
TEST(UcxPeerAddress, OwnNamespaceDiffersInAChildWithANewNetworkNamespace) {
  const auto own = own_net_namespace();
  ASSERT_TRUE(own.has_value());
  EXPECT_EQ(own, own_net_namespace());
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(fds[0]);
    char verdict = 's';  // skipped: not allowed to unshare
    if (::unshare(CLONE_NEWNET) == 0) {
      const auto mine = own_net_namespace();
      verdict = mine && !(*mine == *own) ? 'd' : 'e';
    }
    (void)!::write(fds[1], &verdict, 1);
    ::_exit(0);
  }
  ::close(fds[1]);
  char verdict = 0;
  ASSERT_EQ(::read(fds[0], &verdict, 1), 1);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (verdict == 's') GTEST_SKIP() << "unshare(CLONE_NEWNET) not permitted";
  EXPECT_EQ(verdict, 'd') << "the child's new network namespace read as the parent's";
}

std::vector<std::string> load_corpus() {
  std::vector<std::string> seeds;
  for (const auto& e : std::filesystem::directory_iterator(OBJDIRECT_PEER_ADDRESS_CORPUS_DIR)) {
    std::ifstream in(e.path(), std::ios::binary);
    seeds.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return seeds;
}

TEST(UcxPeerAddressFuzz, BodyHoldsOnSeedsAndTheirMutations) {
  const auto seeds = load_corpus();
  ASSERT_GE(seeds.size(), 4u);
  std::mt19937_64 rng(21);
  int prefixed = 0, bare = 0;
  for (const std::string& seed : seeds) {
    EXPECT_TRUE(fuzz(seed)) << seed.size();
    for (int round = 0; round < 2000; ++round) {
      std::string s = seed;
      const int edits = 1 + static_cast<int>(rng() % 3);
      for (int e = 0; e < edits; ++e) {
        const std::size_t pos = s.empty() ? 0 : rng() % s.size();
        const char ch = static_cast<char>(rng() % 256);
        switch (rng() % 4) {
          case 0:
          case 1:
            if (!s.empty() && pos > 4) s[pos] = ch;  // mostly keep the magic intact
            break;
          case 2:
            s.insert(s.begin() + static_cast<std::ptrdiff_t>(pos), ch);
            break;
          default:
            if (!s.empty()) s.erase(pos, 1);
        }
      }
      ASSERT_TRUE(fuzz(s)) << "mutation of a seed of " << seed.size() << " bytes";
      (decode_peer_address(s).net_namespace ? prefixed : bare)++;
    }
  }
  // The mutations reach both readings.
  EXPECT_GT(prefixed, 1000);
  EXPECT_GT(bare, 1000);
}

}  // namespace
}  // namespace objdirect::transport::ucx
