// CRC32C for device data, host side: the kernel's per-segment code and the fold (crc32c_core.hpp)
// run on the CPU and must match ISA-L (common/checksum.hpp). The kernel itself runs in
// gpu_test.cc on a GPU machine.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "client/cuda/crc32c_core.hpp"
#include "client/cuda/crc32c_device.hpp"
#include "client/cuda/cuda_api.hpp"
#include "common/checksum.hpp"

namespace objdirect::cuda {
namespace {

std::uint32_t isal_crc32c(const std::vector<std::byte>& data) {
  Checksummer sum(ChecksumAlgo::crc32c);
  sum.update(data.data(), data.size());
  std::string raw = sum.digest_raw();
  std::uint32_t v = 0;
  for (char c : raw) v = (v << 8) | static_cast<std::uint8_t>(c);
  return v;
}

TEST(Crc32cCoreTest, KnownVector) {
  // The CRC32C check value: "123456789" -> 0xE3069283.
  std::string s = "123456789";
  std::vector<std::byte> v(s.size());
  std::memcpy(v.data(), s.data(), s.size());
  EXPECT_EQ(crc32c_segmented_host(v), 0xE3069283u);
  EXPECT_EQ(isal_crc32c(v), 0xE3069283u);
}

TEST(Crc32cCoreTest, SegmentedMatchesIsalForRaggedSizes) {
  std::mt19937 rng(7);
  // Around the segment size (4 KiB minimum) and across several segments, plus sizes large enough
  // that segments grow past the minimum (k_segments_max * 4 KiB is 256 MiB: too slow here, so the
  // growth rule is checked separately below).
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{15}, std::size_t{4095},
                        std::size_t{4096}, std::size_t{4097}, std::size_t{3 * 4096 + 5},
                        std::size_t{1 << 20}, std::size_t{(1 << 20) + 3}}) {
    std::vector<std::byte> v(n);
    for (auto& b : v) b = static_cast<std::byte>(rng());
    EXPECT_EQ(crc32c_segmented_host(v), isal_crc32c(v)) << "n=" << n;
  }
}

TEST(Crc32cCoreTest, FoldMatchesIsalForOddSegmentSizes) {
  std::mt19937 rng(8);
  std::vector<std::byte> v(100'003);
  for (auto& b : v) b = static_cast<std::byte>(rng());
  std::uint32_t table[256];
  for (std::uint32_t i = 0; i < 256; ++i) table[i] = crc32c::table_entry(i);
  for (std::uint64_t seg : {1ull, 7ull, 4096ull, 33'333ull, 100'003ull, 200'000ull}) {
    std::vector<std::uint32_t> raw;
    for (std::uint64_t b = 0; b < v.size(); b += seg) {
      raw.push_back(crc32c::update(table, 0, reinterpret_cast<const std::uint8_t*>(v.data()) + b,
                                   std::min<std::uint64_t>(seg, v.size() - b)));
    }
    EXPECT_EQ(crc32c_fold(raw, v.size(), seg), isal_crc32c(v)) << "seg=" << seg;
  }
}

TEST(Crc32cCoreTest, SegmentSizeBoundsTheSegmentCount) {
  for (std::uint64_t n : {1ull, 4096ull, 1ull << 28, (1ull << 32) + 5, 1ull << 40}) {
    std::uint64_t seg = crc32c::segment_bytes(n);
    EXPECT_EQ(seg % 16, 0u);
    EXPECT_GE(seg, 4096u);
    EXPECT_LE((n + seg - 1) / seg, crc32c::k_segments_max) << n;
  }
}

TEST(Crc32cDeviceTest, UnavailableWithoutCudaElseComputes) {
  auto api = CudaApi::get();
  if (api.ok()) GTEST_SKIP() << "CUDA present: gpu_test.cc covers crc32c_device";
  auto r = crc32c_device(reinterpret_cast<const void*>(0x1000), 16, nullptr);
  EXPECT_EQ(r.code(), Errc::unavailable);
  EXPECT_FALSE(r.status().message().empty());
}

}  // namespace
}  // namespace objdirect::cuda
