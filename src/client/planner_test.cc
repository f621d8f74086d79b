#include "client/planner.hpp"

#include <gtest/gtest.h>

#include "common/limits.hpp"

namespace objdirect::client {
namespace {

constexpr std::uint64_t kPart = 8ull << 20;

TEST(SplitRange, EdgeSizes) {
  EXPECT_TRUE(split_range(0, 0, kPart).empty());

  auto one = split_range(0, 1, kPart);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].offset, 0u);
  EXPECT_EQ(one[0].length, 1u);

  auto exact = split_range(0, kPart, kPart);
  ASSERT_EQ(exact.size(), 1u);
  EXPECT_EQ(exact[0].length, kPart);

  auto plus = split_range(0, kPart + 1, kPart);
  ASSERT_EQ(plus.size(), 2u);
  EXPECT_EQ(plus[0].length, kPart);
  EXPECT_EQ(plus[1].offset, kPart);
  EXPECT_EQ(plus[1].length, 1u);
  EXPECT_EQ(plus[1].buffer_offset, kPart);
}

TEST(SplitRange, OffsetsAndBufferOffsetsAreContiguous) {
  auto p = split_range(100, 25, 10, 7);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0].offset, 100u);
  EXPECT_EQ(p[0].buffer_offset, 7u);
  EXPECT_EQ(p[1].offset, 110u);
  EXPECT_EQ(p[1].buffer_offset, 17u);
  EXPECT_EQ(p[2].offset, 120u);
  EXPECT_EQ(p[2].length, 5u);
  EXPECT_EQ(p[2].buffer_offset, 27u);
}

TEST(PlanUpload, SinglePutUpToPartSize) {
  for (std::uint64_t size : {std::uint64_t{0}, std::uint64_t{1}, kPart}) {
    auto plan = plan_upload(size, kPart);
    ASSERT_TRUE(plan.ok());
    EXPECT_FALSE(plan->multipart) << size;
    ASSERT_EQ(plan->parts.size(), 1u);
    EXPECT_EQ(plan->parts[0].length, size);
  }
}

TEST(PlanUpload, MultipartAbovePartSize) {
  auto plan = plan_upload(kPart + 1, kPart);
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->multipart);
  ASSERT_EQ(plan->parts.size(), 2u);
  EXPECT_EQ(plan->parts[0].part_number, 1u);
  EXPECT_EQ(plan->parts[1].part_number, 2u);
  EXPECT_EQ(plan->parts[1].length, 1u);
  EXPECT_EQ(plan->parts[1].offset, kPart);
}

// multipart_threshold (s3transfer's): multipart from the threshold up, whatever the part size.
TEST(PlanUpload, ThresholdDecidesMultipart) {
  auto below = plan_upload(kPart * 3 - 1, kPart, kPart * 3);
  ASSERT_TRUE(below.ok());
  EXPECT_FALSE(below->multipart);
  auto at = plan_upload(kPart * 3, kPart, kPart * 3);
  ASSERT_TRUE(at.ok());
  EXPECT_TRUE(at->multipart);
  EXPECT_EQ(at->parts.size(), 3u);
  // A threshold below the part size: one small part.
  auto small = plan_upload(2 << 20, kPart, 1 << 20);
  ASSERT_TRUE(small.ok());
  EXPECT_TRUE(small->multipart);
  EXPECT_EQ(small->parts.size(), 1u);
  // Never one PUT beyond S3's single PUT limit.
  auto huge = plan_upload(limits::put_bytes_max + 1, kPart, limits::object_bytes_max);
  ASSERT_TRUE(huge.ok());
  EXPECT_TRUE(huge->multipart);
}

TEST(PlanUpload, SmallPartSizeRaisedToS3Minimum) {
  // 1 MiB parts are below S3's 5 MiB floor: the plan uses 5 MiB.
  auto plan = plan_upload(12ull << 20, 1ull << 20);
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->multipart);
  EXPECT_EQ(plan->part_size, limits::part_bytes_min);
  ASSERT_EQ(plan->parts.size(), 3u);
  EXPECT_EQ(plan->parts[2].length, 2ull << 20);
}

TEST(PlanUpload, PartCountStaysWithinLimit) {
  const std::uint64_t size = 100ull << 30;  // 100 GiB at 8 MiB would be 12800 parts
  auto plan = plan_upload(size, kPart);
  ASSERT_TRUE(plan.ok());
  EXPECT_LE(plan->parts.size(), limits::parts_max);
  std::uint64_t sum = 0;
  for (const auto& p : plan->parts) sum += p.length;
  EXPECT_EQ(sum, size);
}

TEST(PlanUpload, Errors) {
  EXPECT_EQ(plan_upload(1, 0).code(), Errc::invalid_argument);
  EXPECT_EQ(plan_upload(limits::object_bytes_max + 1, kPart).code(), Errc::entity_too_large);
}

TEST(RangeHeader, Inclusive) {
  EXPECT_EQ(range_header(0, 1), "bytes=0-0");
  EXPECT_EQ(range_header(10, 5), "bytes=10-14");
}

TEST(ContentRange, ParsesAndRejects) {
  auto cr = parse_content_range("bytes 0-99/1000");
  ASSERT_TRUE(cr);
  EXPECT_EQ(cr->first, 0u);
  EXPECT_EQ(cr->last, 99u);
  EXPECT_EQ(cr->total, 1000u);
  EXPECT_FALSE(parse_content_range("bytes 0-99/*"));
  EXPECT_FALSE(parse_content_range("bytes 5-4/10"));
  EXPECT_FALSE(parse_content_range("bytes 0-10/10"));
  EXPECT_FALSE(parse_content_range("items 0-1/10"));
  EXPECT_FALSE(parse_content_range("bytes 0-1/1x"));
}

}  // namespace
}  // namespace objdirect::client
