#include "common/status.hpp"

#include <gtest/gtest.h>

namespace objdirect {
namespace {

TEST(Status, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.to_string(), "ok");
}

TEST(Status, MapsToS3) {
  EXPECT_EQ(s3_code(Errc::no_such_key), "NoSuchKey");
  EXPECT_EQ(http_status(Errc::no_such_key), 404);
  EXPECT_EQ(http_status(Errc::invalid_range), 416);
  EXPECT_EQ(s3_code(Errc::invalid_rdma_token), "InvalidRDMAToken");
  EXPECT_EQ(from_s3_code("NoSuchBucket"), Errc::no_such_bucket);
  EXPECT_EQ(from_s3_code("SomethingElse"), Errc::internal);
  EXPECT_EQ(from_http_status(404), Errc::no_such_key);
  EXPECT_EQ(from_http_status(412), Errc::precondition_failed);
  EXPECT_EQ(from_http_status(503), Errc::unavailable);
  EXPECT_EQ(from_http_status(418), Errc::internal);
  EXPECT_EQ(from_http_status(500), Errc::internal);
  EXPECT_EQ(errc_name(Errc::bucket_not_empty), "bucket_not_empty");
}

TEST(Result, HoldsValueOrError) {
  Result<int> a = 7;
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, 7);
  Result<int> b(Errc::no_such_bucket, "nope");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.code(), Errc::no_such_bucket);
  EXPECT_EQ(b.status().message(), "nope");
}

}  // namespace
}  // namespace objdirect
