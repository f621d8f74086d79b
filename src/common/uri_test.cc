#include "common/uri.hpp"

#include <gtest/gtest.h>

namespace objdirect {
namespace {

TEST(Uri, EncodeKeepsUnreserved) {
  EXPECT_EQ(uri_encode("AZaz09-._~", true), "AZaz09-._~");
  EXPECT_EQ(uri_encode("a b+c*d%e", true), "a%20b%2Bc%2Ad%25e");
  EXPECT_EQ(uri_encode("test$file.text", false), "test%24file.text");
  EXPECT_EQ(uri_encode("/a/b c", false), "/a/b%20c");
  EXPECT_EQ(uri_encode("/a/b c", true), "%2Fa%2Fb%20c");
  EXPECT_EQ(uri_encode("=&?", true), "%3D%26%3F");
  // UTF-8 bytes are encoded one by one, upper-case hex.
  EXPECT_EQ(uri_encode("\xc3\xa9", true), "%C3%A9");
  EXPECT_EQ(uri_encode("", true), "");
}

TEST(Uri, DecodeIsStrict) {
  EXPECT_EQ(uri_decode("a%20b"), "a b");
  EXPECT_EQ(uri_decode("a+b"), "a+b");
  EXPECT_EQ(uri_decode("%2f%2F"), "//");
  EXPECT_EQ(uri_decode("%C3%A9"), "\xc3\xa9");
  EXPECT_EQ(uri_decode("%00"), std::string(1, '\0'));
  EXPECT_FALSE(uri_decode("%").has_value());
  EXPECT_FALSE(uri_decode("%2").has_value());
  EXPECT_FALSE(uri_decode("a%zz").has_value());
  EXPECT_FALSE(uri_decode("a%2g").has_value());
}

TEST(Uri, RoundTripAllBytes) {
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
  EXPECT_EQ(uri_decode(uri_encode(all, true)), all);
  EXPECT_EQ(uri_decode(uri_encode(all, false)), all);
}

TEST(Uri, ParseQuery) {
  using P = std::pair<std::string, std::string>;
  EXPECT_EQ(parse_query("uploads"), (QueryPairs{P{"uploads", ""}}));
  EXPECT_EQ(parse_query("max-keys=2&prefix=J"), (QueryPairs{P{"max-keys", "2"}, P{"prefix", "J"}}));
  EXPECT_EQ(parse_query("partNumber=1&uploadId=a%2Bb%3D"),
            (QueryPairs{P{"partNumber", "1"}, P{"uploadId", "a+b="}}));
  EXPECT_EQ(parse_query("a=1&&a=2&=x&b="),
            (QueryPairs{P{"a", "1"}, P{"a", "2"}, P{"", "x"}, P{"b", ""}}));
  EXPECT_EQ(parse_query("k=v=w"), (QueryPairs{P{"k", "v=w"}}));
  EXPECT_TRUE(parse_query("").empty());
  EXPECT_EQ(parse_query("bad=%zz&ok=1"), (QueryPairs{P{"bad", "%zz"}, P{"ok", "1"}}));
  EXPECT_FALSE(try_parse_query("bad=%zz&ok=1").has_value());
  EXPECT_EQ(try_parse_query("x=%20"), (QueryPairs{P{"x", " "}}));
}

}  // namespace
}  // namespace objdirect
