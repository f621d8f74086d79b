#include "s3/tagging.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "common/limits.hpp"
#include "s3/mutate_test_util.hpp"

namespace objdirect::s3 {
bool tagging_fuzz_one(const std::uint8_t* data, std::size_t size);  // tagging_fuzz.cc
namespace {

using storage::TagSet;

std::string doc(const std::string& tags_xml) {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Tagging "
         "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><TagSet>" +
         tags_xml + "</TagSet></Tagging>";
}
std::string tag(const std::string& k, const std::string& v) {
  return "<Tag><Key>" + k + "</Key><Value>" + v + "</Value></Tag>";
}
// "k<i>" (built with append: GCC 12 gives a false -Wrestrict on "k" + std::to_string(i)).
std::string key_of(std::size_t i) {
  std::string s = "k";
  s += std::to_string(i);
  return s;
}
TagSet n_tags(std::size_t n) {
  TagSet t;
  for (std::size_t i = 0; i < n; ++i) t.emplace_back(key_of(i), "v");
  return t;
}

TEST(S3Tagging, ParsesInDocumentOrderExactly) {
  auto r = parse_tagging(doc(tag(" b ", "x &#x2b; y") + tag("a", "") + tag("é", "1+2=3")),
                         limits::object_tags_max);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(*r, (TagSet{{" b ", "x + y"}, {"a", ""}, {"\xc3\xa9", "1+2=3"}}));
  auto empty = parse_tagging("<Tagging><TagSet/></Tagging>", limits::object_tags_max);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
  // A prefix on the elements and unknown elements are fine.
  auto pre = parse_tagging(
      "<s3:Tagging xmlns:s3=\"x\"><s3:TagSet><s3:Tag><s3:Key>k</s3:Key>"
      "<Extra/><s3:Value>v</s3:Value></s3:Tag></s3:TagSet></s3:Tagging>",
      limits::object_tags_max);
  ASSERT_TRUE(pre.ok()) << pre.status().to_string();
  EXPECT_EQ(*pre, (TagSet{{"k", "v"}}));
}

TEST(S3Tagging, RoundTripsXmlAndHeader) {
  const TagSet tags{{"project", "blue team"}, {"a/b:c", "x=y+z@w"}, {"\xe2\x82\xac", ""}};
  auto back = parse_tagging(tagging_xml(tags), limits::object_tags_max);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, tags);
  EXPECT_EQ(tagging_header(tags), "project=blue%20team&a%2Fb%3Ac=x%3Dy%2Bz%40w&%E2%82%AC=");
  auto h = parse_tagging_header(tagging_header(tags));
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  EXPECT_EQ(*h, tags);
}

TEST(S3Tagging, HeaderDecodesQueryForm) {
  auto h = parse_tagging_header("a=1&b=two+words&c&d%3D=%2B");
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  EXPECT_EQ(*h, (TagSet{{"a", "1"}, {"b", "two words"}, {"c", ""}, {"d=", "+"}}));
  auto none = parse_tagging_header("");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  EXPECT_EQ(parse_tagging_header("a=%zz").code(), Errc::invalid_argument);
  EXPECT_EQ(parse_tagging_header("a=1&a=2").code(), Errc::invalid_tag);
}

TEST(S3Tagging, MalformedDocuments) {
  for (const std::string& body :
       {std::string(""), std::string("<Tagging/>"), std::string("<TagSet></TagSet>"),
        std::string("<Tagging><TagSet><Tag><Value>v</Value></Tag></TagSet></Tagging>"),
        std::string("<Tagging><TagSet><Tag><Key>k</Key></Tag></TagSet></Tagging>"),
        doc("<Tag><Key>k</Key><Key>j</Key><Value>v</Value></Tag>"),
        doc("<Tag><Key><b/></Key><Value>v</Value></Tag>"),
        std::string("<Tagging><TagSet/><TagSet/></Tagging>"),
        std::string("<!DOCTYPE x><Tagging><TagSet/></Tagging>"), doc(tag("&lol;", "v")),
        std::string("<Tagging><TagSet>")}) {
    auto r = parse_tagging(body, limits::object_tags_max);
    EXPECT_EQ(r.code(), Errc::malformed_xml) << body;
    EXPECT_FALSE(r.status().message().empty());
  }
  EXPECT_EQ(parse_tagging(std::string(limits::xml_body_bytes_max + 1, ' '), 10).code(),
            Errc::malformed_xml);
}

TEST(S3Tagging, ObjectTagsMaxIsTen) {
  EXPECT_EQ(limits::object_tags_max, 10u);
  EXPECT_TRUE(validate_tags(n_tags(limits::object_tags_max), limits::object_tags_max).ok());
  auto st = validate_tags(n_tags(limits::object_tags_max + 1), limits::object_tags_max);
  EXPECT_EQ(st.code(), Errc::invalid_tag);
  EXPECT_EQ(st.message(), "Object tags cannot be greater than 10");
  std::string many;
  for (int i = 0; i < 11; ++i) many += tag(key_of(static_cast<std::size_t>(i)), "v");
  EXPECT_EQ(parse_tagging(doc(many), limits::object_tags_max).code(), Errc::invalid_tag);
  std::string hdr;
  for (std::size_t i = 0; i < 11; ++i) {
    if (i) hdr += '&';
    hdr += key_of(i);
    hdr += "=v";
  }
  EXPECT_EQ(parse_tagging_header(hdr).code(), Errc::invalid_tag);
}

TEST(S3Tagging, BucketTagsMaxIsFifty) {
  EXPECT_EQ(limits::bucket_tags_max, 50u);
  EXPECT_TRUE(validate_tags(n_tags(limits::bucket_tags_max), limits::bucket_tags_max).ok());
  auto st = validate_tags(n_tags(limits::bucket_tags_max + 1), limits::bucket_tags_max);
  EXPECT_EQ(st.code(), Errc::invalid_tag);
  EXPECT_EQ(st.message(), "Bucket tag count cannot be greater than 50");
  // A body with many thousands of tags is refused without building them all.
  std::string many;
  for (int i = 0; i < 5000; ++i) many += tag(key_of(static_cast<std::size_t>(i)), "v");
  EXPECT_EQ(parse_tagging(doc(many), limits::bucket_tags_max).code(), Errc::invalid_tag);
}

TEST(S3Tagging, KeyAndValueLengthsCountCharacters) {
  const std::string key_max(limits::tag_key_chars_max, 'k');
  const std::string value_max(limits::tag_value_chars_max, 'v');
  EXPECT_TRUE(validate_tags({{key_max, value_max}}, 10).ok());
  auto long_key = validate_tags({{key_max + "k", "v"}}, 10);
  EXPECT_EQ(long_key.code(), Errc::invalid_tag);
  EXPECT_EQ(long_key.message(), "The TagKey you have provided is too long, max 128");
  auto long_value = validate_tags({{"k", value_max + "v"}}, 10);
  EXPECT_EQ(long_value.code(), Errc::invalid_tag);
  EXPECT_EQ(long_value.message(), "The TagValue you have provided is too long, max 256");
  // 128 two-byte characters (256 bytes) are 128 characters: allowed.
  std::string wide;
  for (std::size_t i = 0; i < limits::tag_key_chars_max; ++i) wide += "\xc3\xa9";
  EXPECT_TRUE(validate_tags({{wide, wide}}, 10).ok());
  EXPECT_EQ(validate_tags({{wide + "\xc3\xa9", "v"}}, 10).code(), Errc::invalid_tag);
}

TEST(S3Tagging, RefusesWhatAwsRefuses) {
  EXPECT_EQ(validate_tags({{"", "v"}}, 10).code(), Errc::invalid_tag);
  EXPECT_EQ(validate_tags({{"a", "1"}, {"a", "2"}}, 10).message(),
            "Cannot provide multiple Tags with the same key");
  EXPECT_EQ(validate_tags({{"aws:x", "1"}}, 10).message(),
            "Your TagKey cannot be prefixed with aws:");
  EXPECT_EQ(validate_tags({{"a*b", "1"}}, 10).code(), Errc::invalid_tag);
  EXPECT_EQ(validate_tags({{"a", "x\ny"}}, 10).code(), Errc::invalid_tag);
  EXPECT_EQ(validate_tags({{"a", "\xff"}}, 10).code(), Errc::invalid_tag);
  EXPECT_TRUE(validate_tags({{"Aws:x", "1"}, {"a b+c-d=e.f_g:h/i@j", ""}}, 10).ok());
}

TEST(S3TaggingFuzz, ReplayInvariants) {
  const std::vector<std::string> seeds = {
      doc(tag("project", "blue") + tag("a", "")), "a=1&b=two+words&c&d%3D=%2B",
      "<Tagging><TagSet><Tag><Key>k</Key><Value><![CDATA[v]]></Value></Tag></TagSet></Tagging>",
      "k=\xc3\xa9&aws:x=1"};
  const std::string alphabet = "<>/&;=%+#\"' ![]CDATA-?:@\n\x01\xc3\xa9\xffKeyValueTag";
  std::mt19937_64 rng(20);
  int checked = 0;
  for (const std::string& seed : seeds) {
    ASSERT_TRUE(tagging_fuzz_one(reinterpret_cast<const std::uint8_t*>(seed.data()), seed.size()));
    for (int m = 0; m < 400; ++m) {
      std::string s = testing_util::mutate(seed, alphabet, rng);
      ASSERT_TRUE(tagging_fuzz_one(reinterpret_cast<const std::uint8_t*>(s.data()), s.size()))
          << testing::PrintToString(s);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 4 * 400);
}

}  // namespace
}  // namespace objdirect::s3
