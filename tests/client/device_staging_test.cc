// DeviceStaging (src/client/device_transfer.hpp): the Client's bounded, reused staging pools.
// Part of client_device_memory_test, whose environment points CudaApi at the fake CUDA (pinned
// memory comes from cudaMallocHost).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "client/device_transfer.hpp"

namespace objdirect::client {
namespace {

TEST(DeviceStaging, PoolsAreBoundedAndReused) {
  DeviceStaging staging;
  std::atomic<int> registrations{0};
  auto reg = [&](std::span<std::byte> all) -> Result<std::shared_ptr<void>> {
    EXPECT_EQ(all.size(), limits::client_staging_slots * (1u << 20));
    ++registrations;
    return std::shared_ptr<void>();
  };
  std::vector<DeviceStaging::Lease> leases;
  for (std::size_t i = 0; i < limits::client_staging_pools_max; ++i) {
    auto l = staging.acquire(1 << 20, reg);
    ASSERT_TRUE(l.ok()) << l.status().to_string();
    leases.push_back(std::move(*l));
  }
  EXPECT_EQ(staging.pools(), limits::client_staging_pools_max);

  // At the bound the next transfer waits for a pool to come back, then reuses it.
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    auto l = staging.acquire(1 << 20, reg);
    got = l.ok();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(got.load()) << "a pool beyond client_staging_pools_max was created";
  leases.pop_back();
  waiter.join();
  EXPECT_TRUE(got.load());
  EXPECT_EQ(registrations.load(), static_cast<int>(limits::client_staging_pools_max))
      << "a returned pool was registered again instead of reused";

  // Another chunk size at the bound replaces a free pool.
  leases.clear();
  auto other = staging.acquire(2 << 20, [&](std::span<std::byte>) -> Result<std::shared_ptr<void>> {
    ++registrations;
    return std::shared_ptr<void>();
  });
  ASSERT_TRUE(other.ok()) << other.status().to_string();
  EXPECT_EQ(staging.pools(), limits::client_staging_pools_max);
  EXPECT_EQ((*other)->pool().chunk_bytes(), 2u << 20);
}

TEST(DeviceStaging, RegistrationFailureIsReturnedAndFreesTheSlot) {
  DeviceStaging staging(1);
  auto bad = staging.acquire(1 << 20, [](std::span<std::byte>) -> Result<std::shared_ptr<void>> {
    return Status(Errc::transport_error, "refused");
  });
  EXPECT_EQ(bad.code(), Errc::transport_error);
  EXPECT_EQ(staging.pools(), 0u);
  auto good = staging.acquire(1 << 20, {});
  EXPECT_TRUE(good.ok()) << good.status().to_string();
}

}  // namespace
}  // namespace objdirect::client
