// How the RDMA engine cuts one transfer into chunks of at most its chunk size.
//
// Every chunk is chunk_bytes long except at the end: there the last two chunks share their bytes
// so that the last one is never shorter than limits::rdma_chunk_tail_bytes_min when the transfer
// spans more than one chunk. A fabric may carry a short write differently from a long one
// (libfabric shm copies a write of at most 4 KiB through its command queue, which completes
// only at the target's next poll, while longer ones the initiator copies itself): a tail of a
// few bytes would otherwise hold the whole transfer until the client's progress thread polls.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>

#include "common/assert.hpp"

namespace objdirect::limits {
// The shortest last chunk of a transfer longer than one chunk (docs/limits.md).
inline constexpr std::uint64_t rdma_chunk_tail_bytes_min = 64ull << 10;
}  // namespace objdirect::limits

namespace objdirect::rdma {

struct ChunkSpan {
  std::uint64_t pos = 0;  // offset in the transfer
  std::uint64_t len = 0;  // bytes, 1 ... chunk_bytes
};

// Chunks of a transfer of `length` bytes (0: none).
inline std::uint64_t chunk_count(std::uint64_t length, std::uint64_t chunk_bytes) {
  OBJDIRECT_ASSERT(chunk_bytes > 0, "chunk_bytes must be positive");
  return length / chunk_bytes + (length % chunk_bytes != 0 ? 1 : 0);
}

// Chunk i (< chunk_count) of a transfer of `length` bytes. The chunks are contiguous, in order,
// and cover the transfer exactly.
inline ChunkSpan chunk_span(std::uint64_t length, std::uint64_t chunk_bytes, std::uint64_t i) {
  const std::uint64_t n = chunk_count(length, chunk_bytes);
  OBJDIRECT_ASSERT(i < n, "chunk index past the transfer");
  const std::uint64_t tail = length - (n - 1) * chunk_bytes;
  const std::uint64_t tail_min = limits::rdma_chunk_tail_bytes_min;
  // The last chunk borrows from the one before it; only where that one stays long as well.
  const std::uint64_t borrow =
      n >= 2 && tail < tail_min && chunk_bytes >= 2 * tail_min ? tail_min - tail : 0;
  if (i + 2 < n || borrow == 0) {
    return {i * chunk_bytes, i + 1 < n ? chunk_bytes : tail};
  }
  if (i + 2 == n) return {i * chunk_bytes, chunk_bytes - borrow};
  return {i * chunk_bytes - borrow, tail + borrow};
}

}  // namespace objdirect::rdma
