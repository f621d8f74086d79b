#include "s3/lifecycle.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "common/limits.hpp"
#include "s3/mutate_test_util.hpp"

namespace objdirect::s3 {
bool lifecycle_fuzz_one(const std::uint8_t* data, std::size_t size);  // lifecycle_fuzz.cc
namespace {

std::string doc(const std::string& rules) {
  return "<LifecycleConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">" + rules +
         "</LifecycleConfiguration>";
}

const std::string kRules =
    "<Rule><ID>tmp</ID><Filter><Prefix>tmp/</Prefix></Filter><Status>Enabled</Status>"
    "<Expiration><Days>7</Days></Expiration>"
    "<AbortIncompleteMultipartUpload><DaysAfterInitiation>2</DaysAfterInitiation>"
    "</AbortIncompleteMultipartUpload></Rule>"
    "<Rule><ID>tagged</ID><Filter><And><Prefix>logs/</Prefix><Tag><Key>keep</Key>"
    "<Value>no</Value></Tag><Tag><Key>team</Key><Value>ml</Value></Tag>"
    "<ObjectSizeGreaterThan>10</ObjectSizeGreaterThan></And></Filter><Status>Disabled</Status>"
    "<Expiration><Date>2030-01-01T00:00:00Z</Date></Expiration>"
    "<NoncurrentVersionExpiration><NoncurrentDays>3</NoncurrentDays>"
    "<NewerNoncurrentVersions>2</NewerNoncurrentVersions></NoncurrentVersionExpiration></Rule>"
    "<Rule><Prefix>old/</Prefix><Status>Enabled</Status><Expiration>"
    "<ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration></Rule>";

TEST(S3Lifecycle, ParsesAndRoundTrips) {
  auto r = parse_lifecycle(doc(kRules));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->size(), 3u);
  const LifecycleRule& a = (*r)[0];
  EXPECT_EQ(a.id, "tmp");
  EXPECT_TRUE(a.enabled);
  EXPECT_EQ(a.prefix, "tmp/");
  EXPECT_EQ(a.expiration_days, 7u);
  EXPECT_EQ(a.abort_days, 2u);
  const LifecycleRule& b = (*r)[1];
  EXPECT_FALSE(b.enabled);
  EXPECT_EQ(b.tags, (storage::TagSet{{"keep", "no"}, {"team", "ml"}}));
  EXPECT_EQ(b.size_greater_than, 10u);
  EXPECT_EQ(b.expiration_date_s, 1893456000);
  EXPECT_EQ(b.noncurrent_days, 3u);
  EXPECT_EQ(b.newer_noncurrent_versions, 2u);
  EXPECT_TRUE((*r)[2].legacy_prefix);
  EXPECT_TRUE((*r)[2].expired_object_delete_marker);
  auto back = parse_lifecycle(lifecycle_xml(*r));
  ASSERT_TRUE(back.ok()) << back.status().to_string() << "\n" << lifecycle_xml(*r);
  EXPECT_EQ(*back, *r);
}

TEST(S3Lifecycle, Matching) {
  auto r = parse_lifecycle(doc(kRules));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(lifecycle_matches((*r)[0], "tmp/x", 0, {}));
  EXPECT_FALSE(lifecycle_matches((*r)[0], "tm/x", 0, {}));
  const storage::TagSet tags{{"team", "ml"}, {"keep", "no"}, {"x", "y"}};
  EXPECT_TRUE(lifecycle_matches((*r)[1], "logs/a", 11, tags));
  EXPECT_FALSE(lifecycle_matches((*r)[1], "logs/a", 10, tags));  // size must be greater
  EXPECT_FALSE(lifecycle_matches((*r)[1], "logs/a", 11, {{"team", "ml"}}));
  EXPECT_FALSE(lifecycle_matches((*r)[1], "logs/a", 11, {{"team", "ml"}, {"keep", "yes"}}));
}

TEST(S3Lifecycle, RefusesAsAwsDoes) {
  const std::string ok_action = "<Expiration><Days>1</Days></Expiration>";
  const std::vector<std::pair<std::string, Errc>> cases = {
      {"", Errc::malformed_xml},
      {doc(""), Errc::malformed_xml},
      {doc("<Rule>" + ok_action + "</Rule>"), Errc::malformed_xml},  // no Status
      {doc("<Rule><Status>On</Status>" + ok_action + "</Rule>"), Errc::malformed_xml},
      {doc("<Rule><Status>Enabled</Status></Rule>"), Errc::invalid_request},
      {doc("<Rule><Status>Enabled</Status><Expiration><Days>0</Days></Expiration></Rule>"),
       Errc::invalid_argument},
      {doc("<Rule><Status>Enabled</Status><Expiration><Days>x</Days></Expiration></Rule>"),
       Errc::malformed_xml},
      {doc("<Rule><Status>Enabled</Status><Expiration><Days>1</Days><Date>2030-01-01T00:00:00Z"
           "</Date></Expiration></Rule>"),
       Errc::malformed_xml},
      {doc("<Rule><Status>Enabled</Status><Expiration><Date>2030-01-01T10:00:00Z</Date>"
           "</Expiration></Rule>"),
       Errc::invalid_argument},
      {doc("<Rule><Prefix>a</Prefix><Filter><Prefix>b</Prefix></Filter><Status>Enabled</Status>" +
           ok_action + "</Rule>"),
       Errc::malformed_xml},
      {doc("<Rule><ID>a</ID><Status>Enabled</Status>" + ok_action +
           "</Rule><Rule><ID>a</ID><Status>Enabled</Status>" + ok_action + "</Rule>"),
       Errc::invalid_argument},
      {doc("<Rule><ID>" + std::string(256, 'i') + "</ID><Status>Enabled</Status>" + ok_action +
           "</Rule>"),
       Errc::invalid_argument},
      {doc("<Rule><Filter><Tag><Key>k</Key><Value>v</Value></Tag></Filter><Status>Enabled"
           "</Status><AbortIncompleteMultipartUpload><DaysAfterInitiation>1"
           "</DaysAfterInitiation></AbortIncompleteMultipartUpload></Rule>"),
       Errc::invalid_request},
      {doc("<Rule><Status>Enabled</Status><Transition><Days>1</Days><StorageClass>GLACIER"
           "</StorageClass></Transition></Rule>"),
       Errc::not_implemented},
      {doc("<Rule><Filter><And><ObjectSizeGreaterThan>5</ObjectSizeGreaterThan>"
           "<ObjectSizeLessThan>5</ObjectSizeLessThan></And></Filter><Status>Enabled</Status>" +
           ok_action + "</Rule>"),
       Errc::invalid_argument},
  };
  for (const auto& [body, code] : cases) {
    auto r = parse_lifecycle(body);
    EXPECT_EQ(r.code(), code) << body;
    EXPECT_FALSE(r.status().message().empty());
  }
}

TEST(S3Lifecycle, RulesMax) {
  EXPECT_EQ(limits::lifecycle_rules_max, 1000u);
  const std::string rule =
      "<Rule><Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule>";
  std::string many;
  for (std::size_t i = 0; i < limits::lifecycle_rules_max; ++i) many += rule;
  EXPECT_TRUE(parse_lifecycle(doc(many)).ok());
  EXPECT_EQ(parse_lifecycle(doc(many + rule)).code(), Errc::malformed_xml);
}

TEST(S3LifecycleFuzz, ReplayInvariants) {
  const std::vector<std::string> seeds = {doc(kRules)};
  const std::string alphabet =
      "<>/&;#\"' ![]-?:0123\n\x01\xc3\xa9\xff"
      "RuleAndTagDays";
  std::mt19937_64 rng(6);
  int checked = 0;
  for (const std::string& seed : seeds) {
    ASSERT_TRUE(
        lifecycle_fuzz_one(reinterpret_cast<const std::uint8_t*>(seed.data()), seed.size()));
    for (int m = 0; m < 1500; ++m) {
      std::string s = testing_util::mutate(seed, alphabet, rng);
      ASSERT_TRUE(lifecycle_fuzz_one(reinterpret_cast<const std::uint8_t*>(s.data()), s.size()))
          << testing::PrintToString(s);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 1500);
}

}  // namespace
}  // namespace objdirect::s3
