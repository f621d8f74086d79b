// CRC32C of device memory: one thread per segment (crc32c_core.hpp), raw registers out; the host
// folds them (crc32c_device.cc). Compiled to PTX and loaded with cuModuleLoadData at run time, so
// libobjdirect needs no CUDA at link time.
#include <cstdint>

#include "client/cuda/crc32c_core.hpp"

extern "C" __global__ void objdirect_crc32c_segments(const std::uint8_t* data, std::uint64_t n,
                                                     std::uint64_t seg_bytes,
                                                     std::uint32_t* out) {
  __shared__ std::uint32_t table[256];
  for (unsigned i = threadIdx.x; i < 256; i += blockDim.x) {
    table[i] = objdirect::cuda::crc32c::table_entry(i);
  }
  __syncthreads();
  const std::uint64_t segments = (n + seg_bytes - 1) / seg_bytes;
  const std::uint64_t seg = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (seg >= segments) return;
  const std::uint64_t begin = seg * seg_bytes;
  const std::uint64_t len = n - begin < seg_bytes ? n - begin : seg_bytes;
  const std::uint8_t* p = data + begin;
  std::uint32_t reg = 0;
  std::uint64_t i = 0;
  // 8-byte loads when aligned (segments are multiples of 16 bytes, so alignment follows data).
  if ((reinterpret_cast<std::uintptr_t>(p) & 7u) == 0) {
    for (; i + 8 <= len; i += 8) {
      std::uint64_t w = *reinterpret_cast<const std::uint64_t*>(p + i);
      for (int b = 0; b < 8; ++b) {
        reg = table[(reg ^ static_cast<std::uint32_t>(w >> (8 * b))) & 0xFFu] ^ (reg >> 8);
      }
    }
  }
  reg = objdirect::cuda::crc32c::update(table, reg, p + i, len - i);
  out[seg] = reg;
}
