// The client's fabric choice (fabric_choice.hpp): auto's order, with servers that offer fabrics
// this machine lacks (verbs, efa), the same-host rule for shm, the order override, and the
// bounded failure memory.
#include "client/fabric_choice.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "client/rdma.hpp"

namespace objdirect::client {
namespace {

using namespace std::chrono_literals;

// This machine's rows as the transport table gives them, with UCX's NIC flag chosen by the test.
std::vector<FabricRow> rows(bool ucx_nic) {
  auto r = fabric_rows();
  for (auto& row : r) {
    if (row.name == "ucx") row.nic = ucx_nic;
  }
  return r;
}

ServerFabrics offering(std::string list, std::string host_id = "") {
  return parse_server_fabrics(
      list, host_id.empty() ? std::nullopt : std::optional<std::string_view>(host_id));
}

TEST(FabricChoice, TableKnowsEveryFabricTheServerCanOffer) {
  auto r = fabric_rows();
  std::vector<std::string> names;
  for (const auto& row : r) names.push_back(row.name);
  EXPECT_EQ(names.size(), 5u);
  for (const char* n :
       {"libfabric:shm", "libfabric:tcp", "libfabric:verbs", "libfabric:efa", "ucx"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  }
}

TEST(FabricChoice, DefaultOrderPrefersNicFabricsToSoftwareTcp) {
  EXPECT_EQ(default_fabric_order(rows(false)),
            (std::vector<std::string>{"libfabric:shm", "libfabric:verbs", "libfabric:efa",
                                      "libfabric:tcp", "ucx"}));
  // UCX over rc/dc (an InfiniBand host) moves ahead of libfabric tcp.
  EXPECT_EQ(default_fabric_order(rows(true)),
            (std::vector<std::string>{"libfabric:shm", "libfabric:verbs", "libfabric:efa", "ucx",
                                      "libfabric:tcp"}));
}

TEST(FabricChoice, ServerOfferingFabricsThisMachineLacks) {
  // An InfiniBand / EFA server lists tcp first; auto still tries the NIC fabrics before it.
  auto s = offering("libfabric:tcp, ucx,libfabric:verbs,libfabric:efa");
  auto r = rows(false);
  auto order = default_fabric_order(r);
  EXPECT_EQ(auto_candidates(s, false, order, r),
            (std::vector<std::string>{"libfabric:verbs", "libfabric:efa", "libfabric:tcp", "ucx"}));
  // Names no backend knows are ignored, as is a fabric the server does not offer.
  auto s2 = offering("libfabric:psm3,libfabric:efa");
  EXPECT_EQ(auto_candidates(s2, false, order, r), (std::vector<std::string>{"libfabric:efa"}));
  // A server that says nothing: every fabric in order.
  ServerFabrics silent;
  EXPECT_EQ(auto_candidates(silent, true, order, r), order);
}

TEST(FabricChoice, SharedMemoryOnlyOnTheSameKernel) {
  auto r = rows(false);
  auto order = default_fabric_order(r);
  const std::string me = "0123456789abcdef";
  auto same = offering("libfabric:shm,libfabric:tcp", me);
  auto other = offering("libfabric:shm,libfabric:tcp", "fedcba9876543210");
  auto old = offering("libfabric:shm,libfabric:tcp");
  // Another network namespace of this machine: same host id, shm allowed even off loopback.
  EXPECT_TRUE(same_host(same, me, false));
  EXPECT_FALSE(same_host(other, me, true));  // another machine, even through a loopback tunnel
  EXPECT_TRUE(same_host(old, me, true));     // a server without a host id: loopback decides
  EXPECT_FALSE(same_host(old, me, false));
  EXPECT_EQ(auto_candidates(same, same_host(same, me, false), order, r),
            (std::vector<std::string>{"libfabric:shm", "libfabric:tcp"}));
  EXPECT_EQ(auto_candidates(other, same_host(other, me, false), order, r),
            (std::vector<std::string>{"libfabric:tcp"}));
  EXPECT_EQ(own_host_id().size(), 16u);
  EXPECT_EQ(own_host_id(), own_host_id());
}

// A malformed advertisement (token::parse_fabric_advert refuses it) offers nothing, so the
// client goes over HTTP; a malformed host id counts as another kernel, so shm is not proposed.
TEST(FabricChoice, MalformedAdvertisementOffersNothing) {
  auto r = rows(false);
  auto order = default_fabric_order(r);
  const std::string me = own_host_id();
  auto bad = parse_server_fabrics("libfabric:tcp\r\nx-evil: 1", me);
  EXPECT_TRUE(bad.known);
  EXPECT_TRUE(bad.offered.empty());
  EXPECT_NE(bad.fabrics_error.find("byte 0x0d"), std::string::npos) << bad.fabrics_error;
  EXPECT_TRUE(auto_candidates(bad, true, order, r).empty());
  auto twice = parse_server_fabrics("ucx,ucx", std::nullopt);
  EXPECT_NE(twice.fabrics_error.find("named twice"), std::string::npos) << twice.fabrics_error;
  EXPECT_TRUE(auto_candidates(twice, false, order, r).empty());
  for (std::string id : {me, std::string("0123456789ABCDEF"), std::string("xyz"), std::string()}) {
    auto s = parse_server_fabrics("libfabric:shm,libfabric:tcp", id);
    EXPECT_TRUE(s.fabrics_error.empty());
    if (id == me) {
      EXPECT_TRUE(s.host_id_error.empty());
      EXPECT_TRUE(same_host(s, me, false));
      continue;
    }
    EXPECT_TRUE(s.host_id.empty());
    EXPECT_TRUE(s.host_id_error.starts_with("x-amz-rdma-host-id: ")) << s.host_id_error;
    // Even through a loopback endpoint: the server said something, and it was not our kernel.
    EXPECT_FALSE(same_host(s, me, true)) << id;
    EXPECT_EQ(auto_candidates(s, same_host(s, me, true), order, r),
              (std::vector<std::string>{"libfabric:tcp"}));
  }
}

TEST(FabricChoice, OrderOverride) {
  auto r = rows(false);
  std::string err;
  auto o = parse_fabric_order("ucx, libfabric:tcp", r, err);
  ASSERT_TRUE(o) << err;
  EXPECT_EQ(*o, (std::vector<std::string>{"ucx", "libfabric:tcp"}));
  // Only the named fabrics are tried, in that order.
  auto s = offering("libfabric:tcp,ucx,libfabric:verbs");
  EXPECT_EQ(auto_candidates(s, false, *o, r), (std::vector<std::string>{"ucx", "libfabric:tcp"}));
  auto d = parse_fabric_order("  ", r, err);
  ASSERT_TRUE(d);
  EXPECT_EQ(*d, default_fabric_order(r));
  EXPECT_FALSE(parse_fabric_order("libfabric:tcp,nope", r, err));
  EXPECT_NE(err.find("unknown fabric 'nope'"), std::string::npos) << err;
  EXPECT_FALSE(parse_fabric_order("ucx,ucx", r, err));
  EXPECT_NE(err.find("twice"), std::string::npos) << err;
  std::string many;
  for (std::size_t i = 0; i <= limits::client_fabric_order_entries_max; ++i) many += "ucx,";
  EXPECT_FALSE(parse_fabric_order(many, r, err));
  EXPECT_NE(err.find("at most"), std::string::npos) << err;
}

TEST(FabricChoice, FailuresAreRememberedForABoundedTime) {
  FabricFailures f;
  auto t0 = FabricFailures::Clock::now();
  f.record("10.0.0.1:9000", "libfabric:tcp", "connect refused", 30s, t0);
  auto why = f.skipped("10.0.0.1:9000", "libfabric:tcp", t0 + 1s);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("connect refused"), std::string::npos) << *why;
  EXPECT_NE(why->find("next try in 29.0 s"), std::string::npos) << *why;
  // Per server and per fabric.
  EXPECT_FALSE(f.skipped("10.0.0.2:9000", "libfabric:tcp", t0 + 1s));
  EXPECT_FALSE(f.skipped("10.0.0.1:9000", "ucx", t0 + 1s));
  // Then probed again.
  EXPECT_FALSE(f.skipped("10.0.0.1:9000", "libfabric:tcp", t0 + 30s));
  f.record("10.0.0.1:9000", "ucx", "x", 30s, t0);
  f.clear("10.0.0.1:9000", "ucx");
  EXPECT_FALSE(f.skipped("10.0.0.1:9000", "ucx", t0));
}

// (Appending, not "s" + to_string(): GCC 12's -Wrestrict misfires on that here.)
std::string server_name(std::size_t i) {
  std::string s = "server-";
  s.append(std::to_string(i));
  return s;
}

TEST(FabricChoice, FailureMemoryIsBounded) {
  FabricFailures f;
  auto t0 = FabricFailures::Clock::now();
  const std::size_t n = limits::client_fabric_failures_remembered_max;
  for (std::size_t i = 0; i < n + 10; ++i) {
    // Later entries expire later; the earliest-expiring ones make room.
    f.record(server_name(i), "libfabric:tcp", "x", std::chrono::milliseconds(1000 + i), t0);
  }
  EXPECT_EQ(f.size(), n);
  EXPECT_FALSE(f.skipped(server_name(0), "libfabric:tcp", t0));
  EXPECT_TRUE(f.skipped(server_name(n + 9), "libfabric:tcp", t0));
}

}  // namespace
}  // namespace objdirect::client
