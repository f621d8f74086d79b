#include "s3/cors.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "common/limits.hpp"
#include "s3/mutate_test_util.hpp"

namespace objdirect::s3 {
bool cors_fuzz_one(const std::uint8_t* data, std::size_t size);  // cors_fuzz.cc
namespace {

std::string doc(const std::string& rules) {
  return "<CORSConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">" + rules +
         "</CORSConfiguration>";
}

const std::string kRule =
    "<CORSRule><ID> web </ID><AllowedOrigin>https://*.example.com</AllowedOrigin>"
    "<AllowedOrigin>http://localhost:8080</AllowedOrigin><AllowedMethod>GET</AllowedMethod>"
    "<AllowedMethod>PUT</AllowedMethod><AllowedHeader>x-amz-*</AllowedHeader>"
    "<AllowedHeader>Content-Type</AllowedHeader><ExposeHeader>ETag</ExposeHeader>"
    "<MaxAgeSeconds>3000</MaxAgeSeconds></CORSRule>";

TEST(S3Cors, ParsesAndRoundTrips) {
  auto r = parse_cors(doc(kRule + "<CORSRule><AllowedOrigin>*</AllowedOrigin>"
                                  "<AllowedMethod>HEAD</AllowedMethod></CORSRule>"));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->size(), 2u);
  const CorsRule& a = (*r)[0];
  EXPECT_EQ(a.id, "web");
  EXPECT_EQ(a.allowed_origins,
            (std::vector<std::string>{"https://*.example.com", "http://localhost:8080"}));
  EXPECT_EQ(a.allowed_methods, (std::vector<std::string>{"GET", "PUT"}));
  EXPECT_EQ(a.allowed_headers, (std::vector<std::string>{"x-amz-*", "Content-Type"}));
  EXPECT_EQ(a.expose_headers, (std::vector<std::string>{"ETag"}));
  EXPECT_EQ(a.max_age_seconds, 3000u);
  EXPECT_FALSE((*r)[1].max_age_seconds.has_value());
  auto back = parse_cors(cors_xml(*r));
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, *r);
}

TEST(S3Cors, RefusesAsAwsDoes) {
  const std::vector<std::pair<std::string, Errc>> cases = {
      {"", Errc::malformed_xml},
      {doc(""), Errc::malformed_xml},
      {"<CORSRule/>", Errc::malformed_xml},
      {doc("<CORSRule><AllowedMethod>GET</AllowedMethod></CORSRule>"), Errc::malformed_xml},
      {doc("<CORSRule><AllowedOrigin>*</AllowedOrigin></CORSRule>"), Errc::malformed_xml},
      {doc("<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>PATCH</AllowedMethod>"
           "</CORSRule>"),
       Errc::invalid_request},
      {doc("<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>get</AllowedMethod>"
           "</CORSRule>"),
       Errc::invalid_request},
      {doc("<CORSRule><AllowedOrigin>*.a.*</AllowedOrigin><AllowedMethod>GET</AllowedMethod>"
           "</CORSRule>"),
       Errc::invalid_request},
      {doc("<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod>"
           "<AllowedHeader>**</AllowedHeader></CORSRule>"),
       Errc::invalid_request},
      {doc("<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod>"
           "<ExposeHeader>*</ExposeHeader></CORSRule>"),
       Errc::invalid_request},
      {doc("<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod>"
           "<MaxAgeSeconds>-1</MaxAgeSeconds></CORSRule>"),
       Errc::malformed_xml},
      {doc("<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod>"
           "<MaxAgeSeconds>2147483648</MaxAgeSeconds></CORSRule>"),
       Errc::malformed_xml},
      {doc("<CORSRule><ID>" + std::string(limits::cors_rule_id_bytes_max + 1, 'i') +
           "</ID><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod></CORSRule>"),
       Errc::malformed_xml},
  };
  for (const auto& [body, code] : cases) {
    auto r = parse_cors(body);
    EXPECT_EQ(r.code(), code) << body;
    EXPECT_FALSE(r.status().message().empty());
  }
}

TEST(S3Cors, RulesMaxIsOneHundred) {
  EXPECT_EQ(limits::cors_rules_max, 100u);
  const std::string one =
      "<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod></CORSRule>";
  std::string hundred;
  for (std::size_t i = 0; i < limits::cors_rules_max; ++i) hundred += one;
  EXPECT_TRUE(parse_cors(doc(hundred)).ok());
  EXPECT_EQ(parse_cors(doc(hundred + one)).code(), Errc::malformed_xml);
}

TEST(S3Cors, BodyBytesMax) {
  const std::string pad(limits::cors_body_bytes_max, ' ');
  const std::string rule =
      "<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod></CORSRule>";
  std::string fits = doc(rule);
  fits += std::string(limits::cors_body_bytes_max - fits.size(), ' ');
  EXPECT_TRUE(parse_cors(fits).ok());
  EXPECT_EQ(parse_cors(fits + " ").code(), Errc::malformed_xml);
}

TEST(S3Cors, WildcardMatch) {
  EXPECT_TRUE(cors_wildcard_match("*", "", false));
  EXPECT_TRUE(cors_wildcard_match("https://*.example.com", "https://a.b.example.com", false));
  EXPECT_FALSE(cors_wildcard_match("https://*.example.com", "https://example.com", false));
  EXPECT_FALSE(cors_wildcard_match("https://*.example.com", "HTTPS://a.example.com", false));
  EXPECT_TRUE(cors_wildcard_match("X-Amz-*", "x-amz-date", true));
  EXPECT_FALSE(cors_wildcard_match("ab*ba", "aba", false));  // head and tail may not overlap
  EXPECT_TRUE(cors_wildcard_match("exact", "exact", false));
}

TEST(S3Cors, MatchPicksTheFirstRuleThatAllowsEverything) {
  auto rules = parse_cors(doc(kRule + "<CORSRule><ID>any</ID><AllowedOrigin>*</AllowedOrigin>"
                                      "<AllowedMethod>GET</AllowedMethod></CORSRule>"));
  ASSERT_TRUE(rules.ok());
  const CorsRule* m = match_cors(*rules, "https://app.example.com", "PUT",
                                 "x-amz-date, content-type,X-Amz-Content-Sha256");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->id, "web");
  // A header the first rule does not allow: the second has no AllowedHeader at all.
  EXPECT_EQ(match_cors(*rules, "https://app.example.com", "PUT", "authorization"), nullptr);
  m = match_cors(*rules, "https://app.example.com", "GET", "authorization");
  EXPECT_EQ(m, nullptr);
  m = match_cors(*rules, "https://other.org", "GET", "");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->id, "any");
  EXPECT_EQ(match_cors(*rules, "https://other.org", "DELETE", ""), nullptr);
}

TEST(S3CorsFuzz, ReplayInvariants) {
  const std::vector<std::string> seeds = {
      doc(kRule), doc("<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET"
                      "</AllowedMethod></CORSRule>")};
  const std::string alphabet =
      "<>/&;*#\"' ![]-?:\n\x01\xc3\xa9\xff"
      "CORSRuleAllowedGETPUT0";
  std::mt19937_64 rng(3);
  int checked = 0;
  for (const std::string& seed : seeds) {
    ASSERT_TRUE(cors_fuzz_one(reinterpret_cast<const std::uint8_t*>(seed.data()), seed.size()));
    for (int m = 0; m < 500; ++m) {
      std::string s = testing_util::mutate(seed, alphabet, rng);
      ASSERT_TRUE(cors_fuzz_one(reinterpret_cast<const std::uint8_t*>(s.data()), s.size()))
          << testing::PrintToString(s);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2 * 500);
}

}  // namespace
}  // namespace objdirect::s3
