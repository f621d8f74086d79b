#include "s3/names.hpp"

#include <gtest/gtest.h>

#include <string>

namespace objdirect::s3 {
namespace {

TEST(S3BucketName, AcceptsValidNames) {
  for (const char* n :
       {"abc", "my-bucket", "my.bucket.name", "a1b2c3", "123", "0-0",
        "bucket-with-63-chars-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "1.2.3", "1.2.3.4.5",
        "1.2.3.a", "1234.1.1.1", "a-.b", "xn-a", "demo-s3alias-x", "s3alias"}) {
    EXPECT_TRUE(validate_bucket_name(n).ok()) << n << ": " << validate_bucket_name(n).message();
  }
  EXPECT_EQ(std::string("bucket-with-63-chars-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa").size(),
            63u);
}

TEST(S3BucketName, RejectsLength) {
  EXPECT_EQ(validate_bucket_name("").code(), Errc::invalid_bucket_name);
  EXPECT_EQ(validate_bucket_name("ab").code(), Errc::invalid_bucket_name);
  EXPECT_EQ(validate_bucket_name(std::string(64, 'a')).code(), Errc::invalid_bucket_name);
  EXPECT_TRUE(validate_bucket_name(std::string(63, 'a')).ok());
  EXPECT_NE(validate_bucket_name("ab").message().find("between 3 and 63"), std::string::npos);
}

TEST(S3BucketName, RejectsCharacters) {
  for (const char* n :
       {"MyBucket", "my_bucket", "my bucket", "bucket!", "b\xc3\xa9\x63", "a/b", "abc\n"}) {
    EXPECT_EQ(validate_bucket_name(n).code(), Errc::invalid_bucket_name) << n;
  }
  EXPECT_EQ(validate_bucket_name(std::string("ab\0c", 4)).code(), Errc::invalid_bucket_name);
}

TEST(S3BucketName, RejectsBadEnds) {
  for (const char* n : {"-abc", "abc-", ".abc", "abc.", "-a-"}) {
    const Status st = validate_bucket_name(n);
    EXPECT_EQ(st.code(), Errc::invalid_bucket_name) << n;
    EXPECT_NE(st.message().find("begin and end"), std::string::npos) << st.message();
  }
}

TEST(S3BucketName, RejectsAdjacentDots) {
  EXPECT_EQ(validate_bucket_name("my..bucket").code(), Errc::invalid_bucket_name);
  EXPECT_NE(validate_bucket_name("my..bucket").message().find("adjacent dots"), std::string::npos);
}

TEST(S3BucketName, RejectsIpAddresses) {
  for (const char* n : {"192.168.5.4", "1.2.3.4", "999.999.999.999", "0.0.0.0"}) {
    const Status st = validate_bucket_name(n);
    EXPECT_EQ(st.code(), Errc::invalid_bucket_name) << n;
    EXPECT_NE(st.message().find("IP address"), std::string::npos) << st.message();
  }
}

TEST(S3BucketName, RejectsReservedPrefixesAndSuffixes) {
  for (const char* n : {"xn--bucket", "sthree-bucket", "amzn-s3-demo-bucket"}) {
    EXPECT_EQ(validate_bucket_name(n).code(), Errc::invalid_bucket_name) << n;
  }
  for (const char* n :
       {"bucket-s3alias", "bucket--ol-s3", "bucket.mrap", "bucket--x-s3", "bucket--table-s3"}) {
    EXPECT_EQ(validate_bucket_name(n).code(), Errc::invalid_bucket_name) << n;
  }
}

TEST(S3BucketName, MessageEchoIsBounded) {
  const Status st = validate_bucket_name(std::string(100000, 'A'));
  EXPECT_EQ(st.code(), Errc::invalid_bucket_name);
  EXPECT_LT(st.message().size(), 300u);
}

TEST(S3ObjectKey, AcceptsValidKeys) {
  for (const char* k :
       {"a", "0", "1e3", " ", "dir/sub/file.txt", "a b+c%20d", "//", "..", "\xc3\xa9t\xc3\xa9",
        "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\x01\x7f", "tab\there"}) {
    EXPECT_TRUE(validate_object_key(k).ok()) << k;
  }
  EXPECT_TRUE(validate_object_key(std::string(1024, 'k')).ok());
  // 1024 bytes of multi-byte characters: the limit is bytes.
  std::string euro;
  for (int i = 0; i < 341; ++i) euro += "\xe2\x82\xac";
  euro += "x";
  ASSERT_EQ(euro.size(), 1024u);
  EXPECT_TRUE(validate_object_key(euro).ok());
  EXPECT_EQ(validate_object_key(euro + "x").code(), Errc::key_too_long);
}

TEST(S3ObjectKey, RejectsEmptyAndTooLong) {
  EXPECT_EQ(validate_object_key("").code(), Errc::invalid_argument);
  const Status st = validate_object_key(std::string(1025, 'k'));
  EXPECT_EQ(st.code(), Errc::key_too_long);
  EXPECT_NE(st.message().find("1025"), std::string::npos);
  EXPECT_EQ(validate_object_key(std::string(1 << 20, 'k')).code(), Errc::key_too_long);
}

TEST(S3ObjectKey, RejectsNul) {
  const Status st = validate_object_key(std::string("a\0b", 3));
  EXPECT_EQ(st.code(), Errc::invalid_argument);
  EXPECT_NE(st.message().find("NUL"), std::string::npos);
  EXPECT_EQ(validate_object_key(std::string(1, '\0')).code(), Errc::invalid_argument);
}

TEST(S3ObjectKey, RejectsInvalidUtf8) {
  for (const char* k : {
           "\x80",              // lone continuation byte
           "a\xc3",             // truncated 2-byte sequence
           "\xc0\xaf",          // overlong '/'
           "\xc1\xbf",          // overlong
           "\xe0\x80\xaf",      // overlong 3-byte
           "\xed\xa0\x80",      // UTF-16 surrogate D800
           "\xed\xbf\xbf",      // surrogate DFFF
           "\xf0\x80\x80\xaf",  // overlong 4-byte
           "\xf4\x90\x80\x80",  // > U+10FFFF
           "\xf5\x80\x80\x80",  // invalid lead
           "\xff",              // invalid byte
           "\xe2\x82",          // truncated
           "\xe2\x28\xa1",      // bad continuation
       }) {
    const Status st = validate_object_key(k);
    EXPECT_EQ(st.code(), Errc::invalid_argument) << testing::PrintToString(std::string(k));
    EXPECT_NE(st.message().find("UTF-8"), std::string::npos);
  }
}

TEST(S3Utf8, Boundaries) {
  EXPECT_TRUE(is_valid_utf8(""));
  EXPECT_TRUE(is_valid_utf8("\xc2\x80"));          // U+0080
  EXPECT_TRUE(is_valid_utf8("\xdf\xbf"));          // U+07FF
  EXPECT_TRUE(is_valid_utf8("\xe0\xa0\x80"));      // U+0800
  EXPECT_TRUE(is_valid_utf8("\xed\x9f\xbf"));      // U+D7FF
  EXPECT_TRUE(is_valid_utf8("\xee\x80\x80"));      // U+E000
  EXPECT_TRUE(is_valid_utf8("\xef\xbf\xbf"));      // U+FFFF
  EXPECT_TRUE(is_valid_utf8("\xf0\x90\x80\x80"));  // U+10000
  EXPECT_TRUE(is_valid_utf8("\xf4\x8f\xbf\xbf"));  // U+10FFFF
  EXPECT_FALSE(is_valid_utf8("\xf0\x90\x80"));     // truncated 4-byte
}

}  // namespace
}  // namespace objdirect::s3
