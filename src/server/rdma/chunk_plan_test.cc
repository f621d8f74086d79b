#include "server/rdma/chunk_plan.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace objdirect::rdma {
namespace {

constexpr std::uint64_t kTailMin = limits::rdma_chunk_tail_bytes_min;

std::vector<ChunkSpan> plan(std::uint64_t length, std::uint64_t chunk) {
  std::vector<ChunkSpan> out;
  for (std::uint64_t i = 0; i < chunk_count(length, chunk); ++i) {
    out.push_back(chunk_span(length, chunk, i));
  }
  return out;
}

// Contiguous, in order, each 1 ... chunk bytes, covering [0, length) exactly.
void expect_covers(const std::vector<ChunkSpan>& p, std::uint64_t length, std::uint64_t chunk) {
  std::uint64_t pos = 0;
  for (const ChunkSpan& s : p) {
    ASSERT_EQ(s.pos, pos) << "length " << length;
    ASSERT_GE(s.len, 1u) << "length " << length;
    ASSERT_LE(s.len, chunk) << "length " << length;
    pos += s.len;
  }
  EXPECT_EQ(pos, length);
}

TEST(ChunkPlan, CoversEveryLengthAndNoLastChunkIsShortUnlessTheTransferIs) {
  const std::uint64_t chunk = 8ull << 20;
  std::vector<std::uint64_t> lengths = {1, 4096, kTailMin - 1, kTailMin, chunk - 1, chunk};
  for (std::uint64_t k : std::vector<std::uint64_t>{1, 2, 5}) {
    const std::vector<std::uint64_t> rests = {1,        100,          4096,     4097, kTailMin - 1,
                                              kTailMin, kTailMin + 1, chunk - 1};
    for (std::uint64_t d : rests) {
      lengths.push_back(k * chunk + d);
    }
    lengths.push_back((k + 1) * chunk);
  }
  for (std::uint64_t length : lengths) {
    const auto p = plan(length, chunk);
    ASSERT_EQ(p.size(), (length + chunk - 1) / chunk) << "length " << length;
    expect_covers(p, length, chunk);
    if (p.size() >= 2) {
      EXPECT_GE(p.back().len, kTailMin) << "length " << length;
      EXPECT_GE(p[p.size() - 2].len, kTailMin) << "length " << length;
    }
    for (std::size_t i = 0; i + 2 < p.size(); ++i) EXPECT_EQ(p[i].len, chunk);
  }
}

TEST(ChunkPlan, ATailOf100BytesBorrowsFromTheChunkBeforeIt) {
  const std::uint64_t chunk = 1ull << 20;
  const auto p = plan(2 * chunk + 100, chunk);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0].len, chunk);
  EXPECT_EQ(p[1].len, chunk + 100 - kTailMin);
  EXPECT_EQ(p[2].pos, 2 * chunk + 100 - kTailMin);
  EXPECT_EQ(p[2].len, kTailMin);
}

TEST(ChunkPlan, ChunksTooSmallToLendAreCutPlainly) {
  // Below two tail minimums a chunk cannot lend without becoming short itself.
  const std::uint64_t chunk = 4096;
  const auto p = plan(3 * chunk + 10, chunk);
  ASSERT_EQ(p.size(), 4u);
  expect_covers(p, 3 * chunk + 10, chunk);
  EXPECT_EQ(p.back().len, 10u);
  const std::uint64_t edge = 2 * kTailMin;  // the smallest chunk that lends
  const auto q = plan(edge + 1, edge);
  ASSERT_EQ(q.size(), 2u);
  EXPECT_EQ(q[0].len, edge + 1 - kTailMin);
  EXPECT_EQ(q[1].len, kTailMin);
  expect_covers(q, edge + 1, edge);
}

TEST(ChunkPlanDeathTest, AnIndexPastTheTransferIsAProgrammerError) {
  EXPECT_DEATH(chunk_span(10, 4096, 1), "chunk index past the transfer");
  EXPECT_DEATH(chunk_count(10, 0), "chunk_bytes must be positive");
}

}  // namespace
}  // namespace objdirect::rdma
