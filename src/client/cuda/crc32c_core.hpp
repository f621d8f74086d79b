// CRC32C (Castagnoli, reflected polynomial 0x82F63B78) arithmetic shared by the CUDA kernel
// (crc32c_kernel.cu) and the host: the same inline functions compute each segment's CRC on the
// GPU and, in the unit tests, on the CPU, where the result is checked against ISA-L.
//
// Scheme: the buffer is cut into equal segments; each GPU thread computes the raw CRC register of
// its segment starting from 0 (no inversion), and the host folds them in order:
//   reg = 0xFFFFFFFF; for each segment: reg = reg * x^(8*len) mod P  xor  raw(segment); crc = ~reg
// which is exact because a CRC register is linear over GF(2) (zlib's crc32_combine argument).
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define OBJDIRECT_HOST_DEVICE __host__ __device__
#else
#define OBJDIRECT_HOST_DEVICE
#endif

namespace objdirect::cuda::crc32c {

inline constexpr std::uint32_t k_poly_reflected = 0x82F63B78u;

// Table entry i: the register after feeding byte i into a zero register.
OBJDIRECT_HOST_DEVICE inline std::uint32_t table_entry(std::uint32_t i) {
  std::uint32_t c = i;
  for (int k = 0; k < 8; ++k) c = (c & 1u) != 0 ? (c >> 1) ^ k_poly_reflected : c >> 1;
  return c;
}

// Feeds n bytes into the raw register `reg` with a 256-entry table (table_entry values).
OBJDIRECT_HOST_DEVICE inline std::uint32_t update(const std::uint32_t* table, std::uint32_t reg,
                                                  const std::uint8_t* p, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) reg = table[(reg ^ p[i]) & 0xFFu] ^ (reg >> 8);
  return reg;
}

// a(x) * b(x) mod P in the reflected representation (x^0 is bit 31).
OBJDIRECT_HOST_DEVICE inline std::uint32_t multiply_mod_p(std::uint32_t a, std::uint32_t b) {
  std::uint32_t m = 1u << 31;
  std::uint32_t p = 0;
  for (;;) {
    if ((a & m) != 0) {
      p ^= b;
      if ((a & (m - 1)) == 0) break;
    }
    m >>= 1;
    b = (b & 1u) != 0 ? (b >> 1) ^ k_poly_reflected : b >> 1;
  }
  return p;
}

// x^(8*n) mod P: the factor that shifts a register past n zero bytes.
OBJDIRECT_HOST_DEVICE inline std::uint32_t x_pow_8n(std::uint64_t n) {
  std::uint32_t result = 1u << 31;  // x^0
  std::uint32_t square = 1u << 23;  // x^8
  while (n != 0) {
    if ((n & 1u) != 0) result = multiply_mod_p(square, result);
    square = multiply_mod_p(square, square);
    n >>= 1;
  }
  return result;
}

// The register for A||B from the register after A (`reg_a`, any start value) and B's raw
// register from 0 (`raw_b`) over len_b bytes.
OBJDIRECT_HOST_DEVICE inline std::uint32_t extend(std::uint32_t reg_a, std::uint32_t raw_b,
                                                  std::uint64_t len_b) {
  return multiply_mod_p(x_pow_8n(len_b), reg_a) ^ raw_b;
}

// The segment size used for n bytes: a multiple of 16, at least 4 KiB, at most segments_max
// segments.
inline constexpr std::uint64_t k_segments_max = 65536;
OBJDIRECT_HOST_DEVICE inline std::uint64_t segment_bytes(std::uint64_t n) {
  std::uint64_t s = (n + k_segments_max - 1) / k_segments_max;
  s = (s + 15) / 16 * 16;
  return s < 4096 ? 4096 : s;
}

}  // namespace objdirect::cuda::crc32c
