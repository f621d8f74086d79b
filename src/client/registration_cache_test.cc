#include "client/registration_cache.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace objdirect::client {
namespace {

struct FakeReg {
  void* ptr;
  std::size_t len;
};

struct Fixture {
  int registered = 0;
  RegistrationCache<FakeReg> cache{
      [this](void* p, std::size_t n) -> Result<std::shared_ptr<FakeReg>> {
        ++registered;
        return std::make_shared<FakeReg>(FakeReg{p, n});
      },
      /*entries_max=*/2, /*bytes_max=*/1000};
};

TEST(RegistrationCache, RevokeDropsOverlappingUnpinnedEntriesOnly) {
  Fixture f;
  std::vector<char> buf(600);
  auto a = f.cache.acquire(buf.data(), 200, true);  // [0, 200)
  ASSERT_TRUE(a.ok());
  auto pinned = f.cache.pin(buf.data() + 300, 100);  // [300, 400), the user's
  ASSERT_TRUE(pinned.ok());
  EXPECT_EQ(f.cache.entries(), 2u);
  // [150, 350) overlaps both: the cached one goes, the pinned one stays.
  EXPECT_EQ(f.cache.revoke(buf.data() + 150, 200), 1u);
  EXPECT_EQ(f.cache.entries(), 1u);
  EXPECT_EQ(f.cache.bytes(), 100u);
  // The holder keeps its reference (the registration closes when it lets go).
  EXPECT_EQ(a->reg.use_count(), 1);
  // The next acquire registers afresh.
  auto b = f.cache.acquire(buf.data(), 200, true);
  ASSERT_TRUE(b.ok());
  EXPECT_NE(b->reg, a->reg);
  EXPECT_EQ(f.registered, 3);
  // Not overlapping (ends where the entry starts): nothing dropped.
  EXPECT_EQ(f.cache.revoke(buf.data() + 200, 100), 0u);
  EXPECT_EQ(f.cache.entries(), 2u);
  f.cache.unpin(pinned->base);
}

TEST(RegistrationCache, HitOnCoveredSubrange) {
  Fixture f;
  std::vector<char> buf(500);
  auto a = f.cache.acquire(buf.data(), 500, true);
  ASSERT_TRUE(a.ok());
  auto b = f.cache.acquire(buf.data() + 100, 200, true);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(f.registered, 1);
  EXPECT_EQ(b->reg, a->reg);
  EXPECT_EQ(b->base, reinterpret_cast<std::uintptr_t>(buf.data()));
  // Not covered: reaches past the end.
  auto c = f.cache.acquire(buf.data() + 400, 200, true);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(f.registered, 2);
}

TEST(RegistrationCache, EvictsLeastRecentlyUsedByCount) {
  Fixture f;
  std::vector<char> b1(10), b2(10), b3(10);
  ASSERT_TRUE(f.cache.acquire(b1.data(), 10, true).ok());
  ASSERT_TRUE(f.cache.acquire(b2.data(), 10, true).ok());
  ASSERT_TRUE(f.cache.acquire(b1.data(), 10, true).ok());  // b1 now most recent
  ASSERT_TRUE(f.cache.acquire(b3.data(), 10, true).ok());  // evicts b2
  EXPECT_EQ(f.cache.entries(), 2u);
  EXPECT_EQ(f.registered, 3);
  ASSERT_TRUE(f.cache.acquire(b1.data(), 10, true).ok());
  EXPECT_EQ(f.registered, 3);
  ASSERT_TRUE(f.cache.acquire(b2.data(), 10, true).ok());
  EXPECT_EQ(f.registered, 4);
}

TEST(RegistrationCache, EvictsByBytes) {
  Fixture f;
  std::vector<char> big(800), other(300);
  ASSERT_TRUE(f.cache.acquire(big.data(), 800, true).ok());
  ASSERT_TRUE(f.cache.acquire(other.data(), 300, true).ok());
  EXPECT_EQ(f.cache.entries(), 1u);
  EXPECT_EQ(f.cache.bytes(), 300u);
}

TEST(RegistrationCache, EvictedRegistrationStaysValidForHolder) {
  Fixture f;
  std::vector<char> b1(10), b2(10), b3(10);
  auto held = f.cache.acquire(b1.data(), 10, true);
  ASSERT_TRUE(held.ok());
  ASSERT_TRUE(f.cache.acquire(b2.data(), 10, true).ok());
  ASSERT_TRUE(f.cache.acquire(b3.data(), 10, true).ok());
  EXPECT_EQ(held->reg->ptr, b1.data());
  EXPECT_EQ(held->reg.use_count(), 1);  // only the holder
}

TEST(RegistrationCache, PinnedEntriesAreNotEvictedAndLeaveOnUnpin) {
  Fixture f;
  std::vector<char> b1(10), b2(10), b3(10);
  auto pinned = f.cache.pin(b1.data(), 10);
  ASSERT_TRUE(pinned.ok());
  ASSERT_TRUE(f.cache.acquire(b2.data(), 10, true).ok());
  ASSERT_TRUE(f.cache.acquire(b3.data(), 10, true).ok());
  EXPECT_EQ(f.cache.entries(), 2u);  // b1 (pinned) and b3
  ASSERT_TRUE(f.cache.acquire(b1.data() + 2, 5, true).ok());
  EXPECT_EQ(f.registered, 3);
  f.cache.unpin(pinned->base);
  EXPECT_EQ(f.cache.entries(), 1u);  // an uncached pin leaves with its last unpin
}

TEST(RegistrationCache, UncachedAcquireIsNotKept) {
  Fixture f;
  std::vector<char> b(10);
  ASSERT_TRUE(f.cache.acquire(b.data(), 10, false).ok());
  EXPECT_EQ(f.cache.entries(), 0u);
  ASSERT_TRUE(f.cache.acquire(b.data(), 10, false).ok());
  EXPECT_EQ(f.registered, 2);
}

TEST(RegistrationCache, RegisterErrorPropagates) {
  RegistrationCache<FakeReg> cache(
      [](void*, std::size_t) -> Result<std::shared_ptr<FakeReg>> {
        return Status(Errc::transport_error, "refused");
      },
      4, 1 << 20);
  char b[4];
  auto r = cache.acquire(b, 4, true);
  EXPECT_EQ(r.code(), Errc::transport_error);
  EXPECT_EQ(cache.entries(), 0u);
}

}  // namespace
}  // namespace objdirect::client
