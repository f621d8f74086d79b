// GPU tests (label "gpu"): the bounce path against real device memory, pointer classification,
// the CRC32C kernel against ISA-L, stream ordering. Every test that needs a GPU skips with the
// loader's message when there is none (cuInit fails, no device, no libcuda).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "client/cuda/bounce.hpp"
#include "client/cuda/crc32c_device.hpp"
#include "client/cuda/cuda_api.hpp"
#include "client/cuda/device_path.hpp"
#include "common/checksum.hpp"

namespace objdirect::cuda {
namespace {

std::vector<std::byte> pattern(std::size_t n, unsigned seed) {
  std::vector<std::byte> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<std::byte>(rng());
  return v;
}

std::uint32_t isal_crc32c(const std::byte* p, std::size_t n) {
  Checksummer sum(ChecksumAlgo::crc32c);
  sum.update(p, n);
  std::string raw = sum.digest_raw();
  std::uint32_t v = 0;
  for (char c : raw) v = (v << 8) | static_cast<std::uint8_t>(c);
  return v;
}

TEST(DevicePathTest, QueriesTheTransportNeverAssumes) {
  transport::Capabilities caps;
  caps.cuda_memory = false;
  EXPECT_EQ(choose_path(PointerKind::device, caps), DevicePath::bounce);
  EXPECT_EQ(choose_path(PointerKind::managed, caps), DevicePath::bounce);
  EXPECT_EQ(choose_path(PointerKind::host, caps), DevicePath::host);
  EXPECT_EQ(choose_path(PointerKind::unknown, caps), DevicePath::host);
  caps.cuda_memory = true;
  EXPECT_EQ(choose_path(PointerKind::device, caps), DevicePath::direct);
  EXPECT_EQ(choose_path(PointerKind::managed, caps), DevicePath::bounce);
  EXPECT_STREQ(device_path_name(DevicePath::direct), "direct");
}

TEST(CudaLoaderTest, ReportsWhyCudaIsMissing) {
  auto api = CudaApi::get();
  if (api.ok()) GTEST_SKIP() << "CUDA is available here";
  EXPECT_EQ(api.code(), Errc::unavailable);
  EXPECT_FALSE(api.status().message().empty());
  int x = 0;
  EXPECT_EQ(classify_pointer(&x), PointerKind::unknown);
  EXPECT_EQ(export_dmabuf(&x, 4096).code(), Errc::unavailable);
  EXPECT_EQ(StagingPool::create_pinned(2, 4096).code(), Errc::unavailable);
  EXPECT_EQ(BounceContext::create({}, {}).code(), Errc::unavailable);
}

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto a = CudaApi::get();
    if (!a.ok()) GTEST_SKIP() << "no GPU: " << a.status().message();
    api = *a;
  }
  void* device_alloc(std::size_t n) {
    void* p = nullptr;
    EXPECT_EQ(api->malloc_device(&p, n), k_success);
    allocations.push_back(p);
    return p;
  }
  void TearDown() override {
    for (void* p : allocations) api->free_device(p);
  }
  void to_device(void* d, const void* h, std::size_t n) {
    ASSERT_EQ(api->memcpy_sync(d, h, n, k_memcpy_host_to_device), k_success);
  }
  void to_host(void* h, const void* d, std::size_t n) {
    ASSERT_EQ(api->memcpy_sync(h, d, n, k_memcpy_device_to_host), k_success);
  }
  const CudaApi* api = nullptr;
  std::vector<void*> allocations;
};

TEST_F(GpuTest, ClassifiesPointers) {
  std::vector<char> plain(64);
  EXPECT_EQ(classify_pointer(plain.data()), PointerKind::host);
  void* d = device_alloc(4096);
  EXPECT_EQ(classify_pointer(d), PointerKind::device);
  EXPECT_EQ(classify_pointer(static_cast<char*>(d) + 100), PointerKind::device);
  void* pinned = nullptr;
  ASSERT_EQ(api->malloc_host(&pinned, 4096), k_success);
  EXPECT_EQ(classify_pointer(pinned), PointerKind::host);
  api->free_host(pinned);
}

TEST_F(GpuTest, BounceRoundTripRaggedSizesAndOffsets) {
  BounceConfig config{64 * 1024, 3};
  auto ctx = BounceContext::create(config, {});
  ASSERT_TRUE(ctx.ok()) << ctx.status().to_string();
  const std::size_t chunk = config.chunk_bytes;
  for (std::size_t n : {std::size_t{1}, chunk - 1, chunk, chunk + 1, chunk * 7 + 4321}) {
    for (std::size_t offset : {std::size_t{0}, std::size_t{3}, std::size_t{4096}}) {
      auto object = pattern(n, static_cast<unsigned>(n + offset));
      auto* dev = static_cast<std::byte*>(device_alloc(n + offset));
      auto got = (*ctx)->get(
          dev + offset, n, nullptr,
          [&](const Chunk& c, std::span<std::byte> s, std::size_t) -> Result<std::size_t> {
            std::memcpy(s.data(), object.data() + c.offset, c.length);
            return c.length;
          },
          {true});
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      EXPECT_EQ(got->bytes, n);
      EXPECT_EQ(*got->crc32c, isal_crc32c(object.data(), n));
      std::vector<std::byte> back(n);
      to_host(back.data(), dev + offset, n);
      ASSERT_EQ(0, std::memcmp(back.data(), object.data(), n)) << "n=" << n << " off=" << offset;
      // And out again through the PUT direction.
      std::vector<std::byte> stored;
      auto put = (*ctx)->put(dev + offset, n, nullptr,
                             [&](const Chunk&, std::span<const std::byte> s, std::size_t) {
                               stored.insert(stored.end(), s.begin(), s.end());
                               return Status::Ok();
                             });
      ASSERT_TRUE(put.ok()) << put.status().to_string();
      ASSERT_EQ(stored, object);
    }
  }
}

TEST_F(GpuTest, AsyncGetOnAStreamIsVisibleToLaterWorkOnIt) {
  cudaStream_t stream = nullptr;
  ASSERT_EQ(api->stream_create(&stream), k_success);
  auto ctx = BounceContext::create({1 << 20, 4}, {});
  ASSERT_TRUE(ctx.ok());
  const std::size_t n = (9 << 20) + 17;
  auto object = pattern(n, 9);
  auto* dev = static_cast<std::byte*>(device_alloc(n));
  // Earlier work on the stream: a memset the GET must not be overtaken by.
  ASSERT_EQ(api->memset_sync(dev, 0, n), k_success);
  auto fut = (*ctx)->get_async(
      dev, n, stream,
      [&](const Chunk& c, std::span<std::byte> s, std::size_t) -> Result<std::size_t> {
        std::memcpy(s.data(), object.data() + c.offset, c.length);
        return c.length;
      });
  auto r = fut.get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  std::vector<std::byte> back(n);
  ASSERT_EQ(api->memcpy_async(back.data(), dev, n, k_memcpy_device_to_host, stream), k_success);
  ASSERT_EQ(api->stream_synchronize(stream), k_success);
  EXPECT_EQ(0, std::memcmp(back.data(), object.data(), n));
  api->stream_destroy(stream);
}

TEST_F(GpuTest, Crc32cKernelMatchesIsal) {
  if (!crc32c_kernel_built()) GTEST_SKIP() << "built without nvcc: no kernel (host fallback only)";
  Status loaded = crc32c_kernel_status();
  ASSERT_TRUE(loaded.ok()) << loaded.to_string();
  for (std::size_t n : {std::size_t{1}, std::size_t{4095}, std::size_t{4096}, std::size_t{100'003},
                        std::size_t{(64 << 20) + 3}}) {
    for (std::size_t offset : {std::size_t{0}, std::size_t{1}, std::size_t{8}}) {
      auto data = pattern(n, static_cast<unsigned>(n ^ offset));
      auto* dev = static_cast<std::byte*>(device_alloc(n + offset));
      to_device(dev + offset, data.data(), n);
      auto gpu = crc32c_device(dev + offset, n, nullptr);
      ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
      EXPECT_TRUE(gpu->on_gpu);
      EXPECT_EQ(gpu->crc32c, isal_crc32c(data.data(), n)) << "n=" << n << " off=" << offset;
    }
  }
}

TEST_F(GpuTest, Crc32cHostFallbackMatchesIsal) {
  const std::size_t n = (9 << 20) + 5;
  auto data = pattern(n, 11);
  void* dev = device_alloc(n);
  to_device(dev, data.data(), n);
  auto host = crc32c_device(dev, n, nullptr, /*prefer_gpu=*/false);
  ASSERT_TRUE(host.ok()) << host.status().to_string();
  EXPECT_FALSE(host->on_gpu);
  EXPECT_EQ(host->crc32c, isal_crc32c(data.data(), n));
}

TEST_F(GpuTest, DmabufExportAnswersClearly) {
  void* dev = device_alloc(2 << 20);
  auto fd = export_dmabuf(dev, 2 << 20);
  // Depends on the kernel module (open driver + dmabuf); either an fd or a clear error.
  if (fd.ok()) {
    EXPECT_GE(*fd, 0);
    close(*fd);
  } else {
    EXPECT_FALSE(fd.status().message().empty());
    std::printf("dmabuf export unavailable: %s\n", fd.status().message().c_str());
  }
}

}  // namespace
}  // namespace objdirect::cuda
