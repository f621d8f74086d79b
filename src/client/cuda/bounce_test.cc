// The bounce scheduler (BouncePipeline) with host memory standing in for device memory: the same
// scheduler code that drives cudaMemcpyAsync in production, driven here by a memcpy engine that
// records every call and can fail on demand.
#include "client/cuda/bounce.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/checksum.hpp"

namespace objdirect::cuda {
namespace {

constexpr std::size_t k_chunk = 1000;  // deliberately not a power of two
constexpr std::size_t k_slots = 3;

std::vector<std::byte> pattern(std::size_t n, unsigned seed) {
  std::vector<std::byte> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<std::byte>(rng());
  return v;
}

std::uint32_t isal_crc32c(std::span<const std::byte> data) {
  Checksummer sum(ChecksumAlgo::crc32c);
  sum.update(data.data(), data.size());
  std::string raw = sum.digest_raw();
  std::uint32_t v = 0;
  for (char c : raw) v = (v << 8) | static_cast<std::uint8_t>(c);
  return v;
}

// memcpy engine that checks the scheduler's promises: a slot is never reused before it was
// waited for, copies stay inside the staging pool, and it can fail the Nth start or wait.
class RecordingEngine : public CopyEngine {
 public:
  explicit RecordingEngine(const StagingPool& pool) : pool_(pool), pending_(pool.slots(), false) {}

  Status start_copy(std::size_t slot, void* dst, const void* src, std::size_t n,
                    CopyDirection direction) override {
    ++starts;
    if (fail_start_at != 0 && starts == fail_start_at) {
      return {Errc::io_error, "injected copy failure"};
    }
    EXPECT_FALSE(pending_.at(slot)) << "slot " << slot << " reused before wait_slot";
    auto staging = pool_.slot(slot);
    const void* host_side = direction == CopyDirection::to_device ? src : dst;
    EXPECT_GE(static_cast<const std::byte*>(host_side), staging.data());
    EXPECT_LE(static_cast<const std::byte*>(host_side) + n, staging.data() + staging.size());
    std::memcpy(dst, src, n);
    pending_[slot] = true;
    copied_bytes += n;
    return Status::Ok();
  }
  Status wait_slot(std::size_t slot) override {
    ++waits;
    pending_.at(slot) = false;
    if (fail_wait_at != 0 && waits == fail_wait_at)
      return {Errc::io_error, "injected wait failure"};
    return Status::Ok();
  }
  bool any_pending() const {
    for (bool p : pending_) {
      if (p) return true;
    }
    return false;
  }

  std::size_t starts = 0, waits = 0, copied_bytes = 0;
  std::size_t fail_start_at = 0, fail_wait_at = 0;  // 1-based; 0: never

 private:
  const StagingPool& pool_;
  std::vector<bool> pending_;
};

class BounceTest : public ::testing::TestWithParam<std::size_t> {
 protected:
  void SetUp() override {
    auto p = StagingPool::create_host(k_slots, k_chunk);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    pool = std::move(*p);
  }
  std::unique_ptr<StagingPool> pool;
};

// Ragged sizes: 0, 1, chunk-1, chunk, chunk+1, exactly slots chunks, many chunks plus a tail.
INSTANTIATE_TEST_SUITE_P(Sizes, BounceTest,
                         ::testing::Values(0, 1, k_chunk - 1, k_chunk, k_chunk + 1,
                                           k_chunk* k_slots, k_chunk* k_slots + 1,
                                           k_chunk * 17 + 333),
                         [](const auto& info) { return std::to_string(info.param) + "bytes"; });

TEST_P(BounceTest, GetCopiesEveryChunkIntoAnOffsetOfTheDeviceBuffer) {
  const std::size_t n = GetParam();
  const std::size_t device_offset = 37;  // into the "device" buffer
  const std::size_t object_offset = 5;   // e.g. a Range start the fetch callback adds
  auto object = pattern(n + object_offset, 1);
  std::vector<std::byte> device(n + device_offset + 11, std::byte{0xEE});
  RecordingEngine engine(*pool);
  std::vector<Chunk> fetched;
  auto fetch = [&](const Chunk& c, std::span<std::byte> staging,
                   std::size_t slot) -> Result<std::size_t> {
    EXPECT_EQ(staging.size(), c.length);
    EXPECT_EQ(slot, c.index % k_slots);
    EXPECT_EQ(staging.data(), pool->slot(slot).data());
    std::memcpy(staging.data(), object.data() + object_offset + c.offset, c.length);
    fetched.push_back(c);
    return c.length;
  };
  auto r = BouncePipeline(*pool, engine).get(device.data() + device_offset, n, fetch, {true});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->bytes, n);
  const std::size_t chunks = (n + k_chunk - 1) / k_chunk;
  EXPECT_EQ(r->chunks, chunks);
  ASSERT_EQ(fetched.size(), chunks);
  for (std::size_t i = 0; i < chunks; ++i) {
    EXPECT_EQ(fetched[i].index, i);
    EXPECT_EQ(fetched[i].offset, i * k_chunk);
    EXPECT_EQ(fetched[i].length, std::min(k_chunk, n - i * k_chunk));
  }
  EXPECT_EQ(engine.starts, chunks);
  EXPECT_EQ(engine.copied_bytes, n);
  EXPECT_FALSE(engine.any_pending()) << "returned with copies not waited for";
  EXPECT_TRUE(std::equal(object.begin() + object_offset, object.begin() + object_offset + n,
                         device.begin() + device_offset));
  for (std::size_t i = 0; i < device_offset; ++i) ASSERT_EQ(device[i], std::byte{0xEE});
  for (std::size_t i = device_offset + n; i < device.size(); ++i)
    ASSERT_EQ(device[i], std::byte{0xEE});
  ASSERT_TRUE(r->crc32c.has_value());
  EXPECT_EQ(*r->crc32c, isal_crc32c({object.data() + object_offset, n}));
}

TEST_P(BounceTest, PutStoresEveryChunkInOrderFromAnOffset) {
  const std::size_t n = GetParam();
  const std::size_t device_offset = 13;
  auto device = pattern(n + device_offset, 2);
  std::vector<std::byte> stored;
  RecordingEngine engine(*pool);
  std::size_t next_index = 0;
  auto store = [&](const Chunk& c, std::span<const std::byte> staging, std::size_t slot) {
    EXPECT_EQ(c.index, next_index++);
    EXPECT_EQ(c.offset, stored.size());
    EXPECT_EQ(staging.size(), c.length);
    EXPECT_EQ(staging.data(), pool->slot(slot).data());
    stored.insert(stored.end(), staging.begin(), staging.end());
    return Status::Ok();
  };
  auto r = BouncePipeline(*pool, engine).put(device.data() + device_offset, n, store, {true});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->bytes, n);
  ASSERT_EQ(stored.size(), n);
  EXPECT_TRUE(std::equal(stored.begin(), stored.end(), device.begin() + device_offset));
  EXPECT_EQ(engine.starts, (n + k_chunk - 1) / k_chunk);
  EXPECT_FALSE(engine.any_pending());
  EXPECT_EQ(*r->crc32c, isal_crc32c({device.data() + device_offset, n}));
}

TEST_P(BounceTest, ConcurrentFetchesLandInOrder) {
  const std::size_t n = GetParam();
  auto object = pattern(n, 4);
  for (std::size_t concurrency : {std::size_t{2}, k_slots, k_slots + 5}) {
    std::vector<std::byte> device(n + 1, std::byte{0xEE});
    RecordingEngine engine(*pool);
    std::mutex mu;
    std::vector<std::size_t> fetched;
    auto fetch = [&](const Chunk& c, std::span<std::byte> staging,
                     std::size_t slot) -> Result<std::size_t> {
      EXPECT_EQ(slot, c.index % k_slots);
      std::memcpy(staging.data(), object.data() + c.offset, c.length);
      std::lock_guard lock(mu);
      fetched.push_back(c.index);
      return c.length;
    };
    BounceOptions options;
    options.crc32c = true;
    options.fetch_concurrency = concurrency;
    auto r = BouncePipeline(*pool, engine).get(device.data() + 1, n, fetch, options);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->bytes, n);
    EXPECT_EQ(fetched.size(), (n + k_chunk - 1) / k_chunk);
    EXPECT_TRUE(std::equal(object.begin(), object.begin() + n, device.begin() + 1)) << concurrency;
    EXPECT_EQ(*r->crc32c, isal_crc32c(object));
    EXPECT_FALSE(engine.any_pending());
  }
}

class BounceFailureTest : public ::testing::Test {
 protected:
  void SetUp() override { pool = StagingPool::create_host(k_slots, k_chunk).value(); }
  std::unique_ptr<StagingPool> pool;
  const std::size_t n = k_chunk * 10 + 7;
  std::vector<std::byte> object = pattern(n, 3);
  std::vector<std::byte> device = std::vector<std::byte>(n);
};

TEST_F(BounceFailureTest, FetchFailureStopsFetchingAndCopying) {
  RecordingEngine engine(*pool);
  std::size_t calls = 0;
  auto fetch = [&](const Chunk& c, std::span<std::byte> staging,
                   std::size_t) -> Result<std::size_t> {
    ++calls;
    if (c.index == 4) return Status(Errc::timeout, "network stalled at chunk 4");
    std::memcpy(staging.data(), object.data() + c.offset, c.length);
    return c.length;
  };
  auto r = BouncePipeline(*pool, engine).get(device.data(), n, fetch);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), Errc::timeout);
  EXPECT_EQ(calls, 5u);
  EXPECT_EQ(engine.starts, 4u) << "no copy after the failed chunk";
  EXPECT_FALSE(engine.any_pending()) << "in-flight copies must be waited for before returning";
}

TEST_F(BounceFailureTest, ConcurrentFetchFailureStartsNoCopyFromItOn) {
  RecordingEngine engine(*pool);
  std::atomic<std::size_t> calls{0};
  auto fetch = [&](const Chunk& c, std::span<std::byte> staging,
                   std::size_t) -> Result<std::size_t> {
    ++calls;
    if (c.index == 4) return Status(Errc::timeout, "network stalled at chunk 4");
    std::memcpy(staging.data(), object.data() + c.offset, c.length);
    return c.length;
  };
  BounceOptions options;
  options.fetch_concurrency = k_slots;  // batches {0,1,2} {3,4,5}
  auto r = BouncePipeline(*pool, engine).get(device.data(), n, fetch, options);
  EXPECT_EQ(r.code(), Errc::timeout);
  EXPECT_EQ(calls.load(), 6u) << "the failing batch ran, no later one";
  EXPECT_EQ(engine.starts, 4u) << "chunks 0-3 copied; nothing from chunk 4 on";
  EXPECT_FALSE(engine.any_pending());
}

TEST_F(BounceFailureTest, CopyStartFailureStopsTheGet) {
  RecordingEngine engine(*pool);
  engine.fail_start_at = 3;
  std::size_t calls = 0;
  auto fetch = [&](const Chunk& c, std::span<std::byte> staging,
                   std::size_t) -> Result<std::size_t> {
    ++calls;
    std::memcpy(staging.data(), object.data() + c.offset, c.length);
    return c.length;
  };
  auto r = BouncePipeline(*pool, engine).get(device.data(), n, fetch);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), Errc::io_error);
  EXPECT_NE(r.status().message().find("injected copy failure"), std::string::npos);
  EXPECT_EQ(calls, 3u) << "no fetch after the failed copy";
  EXPECT_EQ(engine.starts, 3u);
  EXPECT_FALSE(engine.any_pending());
}

TEST_F(BounceFailureTest, CopyWaitFailureStopsThePut) {
  RecordingEngine engine(*pool);
  engine.fail_wait_at = 2;  // the copy of chunk 1 failed
  std::size_t stores = 0;
  auto store = [&](const Chunk&, std::span<const std::byte>, std::size_t) {
    ++stores;
    return Status::Ok();
  };
  auto r = BouncePipeline(*pool, engine).put(object.data(), n, store);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), Errc::io_error);
  EXPECT_EQ(stores, 1u) << "chunk 1 failed to copy: nothing from it on may be stored";
  EXPECT_EQ(engine.starts, k_slots + 1) << "only the priming copies and the refill after chunk 0";
  EXPECT_FALSE(engine.any_pending());
}

TEST_F(BounceFailureTest, StoreFailureStopsThePut) {
  RecordingEngine engine(*pool);
  std::size_t stores = 0;
  auto store = [&](const Chunk& c, std::span<const std::byte>, std::size_t) {
    ++stores;
    if (c.index == 5) return Status(Errc::access_denied, "denied at part 6");
    return Status::Ok();
  };
  auto r = BouncePipeline(*pool, engine).put(object.data(), n, store);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), Errc::access_denied);
  EXPECT_EQ(stores, 6u);
  EXPECT_EQ(engine.starts, 5 + k_slots) << "copies up to chunk 5+slots-1, none after the failure";
  EXPECT_FALSE(engine.any_pending());
}

TEST_F(BounceFailureTest, ShortFetchEndsTheTransferEarly) {
  RecordingEngine engine(*pool);
  const std::size_t available = k_chunk * 2 + 100;  // a range cut at the end of the object
  auto fetch = [&](const Chunk& c, std::span<std::byte> staging,
                   std::size_t) -> Result<std::size_t> {
    std::size_t len = c.offset >= available ? 0 : std::min(c.length, available - c.offset);
    std::memcpy(staging.data(), object.data() + c.offset, len);
    return len;
  };
  auto r = BouncePipeline(*pool, engine).get(device.data(), n, fetch);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->bytes, available);
  EXPECT_EQ(r->chunks, 3u);
  EXPECT_EQ(0, std::memcmp(device.data(), object.data(), available));
}

TEST_F(BounceFailureTest, FetchClaimingTooManyBytesIsAnError) {
  RecordingEngine engine(*pool);
  auto fetch = [&](const Chunk& c, std::span<std::byte>, std::size_t) -> Result<std::size_t> {
    return c.length + 1;
  };
  auto r = BouncePipeline(*pool, engine).get(device.data(), n, fetch);
  EXPECT_EQ(r.code(), Errc::internal);
  EXPECT_EQ(engine.starts, 0u);
}

TEST(StagingPoolTest, RegistersOnceAndRejectsBadGeometry) {
  int registrations = 0;
  std::span<std::byte> seen;
  auto reg = [&](std::span<std::byte> all) -> Result<std::shared_ptr<void>> {
    ++registrations;
    seen = all;
    return std::shared_ptr<void>(nullptr);
  };
  auto pool = StagingPool::create_host(4, 4096, reg);
  ASSERT_TRUE(pool.ok());
  EXPECT_EQ(registrations, 1);
  EXPECT_EQ(seen.size(), 4u * 4096);
  EXPECT_EQ((*pool)->slot(3).data(), seen.data() + 3 * 4096);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(seen.data()) % 4096, 0u);
  EXPECT_EQ(StagingPool::create_host(0, 4096).code(), Errc::invalid_argument);
  EXPECT_EQ(StagingPool::create_host(limits::bounce_slots_max + 1, 4096).code(),
            Errc::invalid_argument);
  EXPECT_EQ(StagingPool::create_host(2, 0).code(), Errc::invalid_argument);
  auto refused = [](std::span<std::byte>) -> Result<std::shared_ptr<void>> {
    return Status(Errc::transport_error, "provider refused");
  };
  EXPECT_EQ(StagingPool::create_host(2, 4096, refused).code(), Errc::transport_error);
}

}  // namespace
}  // namespace objdirect::cuda
