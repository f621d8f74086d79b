#include "s3/policy.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "common/limits.hpp"
#include "s3/mutate_test_util.hpp"

namespace objdirect::s3 {
bool policy_fuzz_one(const std::uint8_t* data, std::size_t size);  // policy_fuzz.cc
namespace {

const std::string kShare = R"({
  "Version": "2012-10-17",
  "Statement": [
    {"Sid": "ReadForBob", "Effect": "Allow",
     "Principal": {"AWS": ["bob", "arn:aws:iam::123456789012:user/carol", "arn:aws:iam::dave:root"]},
     "Action": ["s3:GetObject", "s3:List*"],
     "Resource": ["arn:aws:s3:::data", "arn:aws:s3:::data/*"]},
    {"Effect": "Deny", "Principal": "*", "Action": "s3:*",
     "Resource": "arn:aws:s3:::data/secret/*"},
    {"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "s3:GetObject",
     "Resource": "arn:aws:s3:::data/public/*",
     "Condition": {"IpAddress": {"aws:SourceIp": ["127.0.0.0/8", "::1/128"]}}},
    {"Effect": "Deny", "Principal": "*", "Action": "s3:PutObject", "Resource": "arn:aws:s3:::data/*",
     "Condition": {"Bool": {"aws:SecureTransport": false}}},
    {"Effect": "Allow", "Principal": {"AWS": "erin"}, "Action": "s3:ListBucket",
     "Resource": "arn:aws:s3:::data", "Condition": {"StringLike": {"s3:prefix": ["home/erin/*"]}}}
  ]})";

PolicyRequest req(std::string who, std::string action, std::string key, std::string ip = "10.0.0.1",
                  bool tls = false) {
  return PolicyRequest{
      std::move(who), std::move(action), s3_arn("data", key), std::move(ip), tls, {}};
}

TEST(S3Policy, ParsesStatementsAndPrincipals) {
  auto p = parse_policy(kShare, "data");
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  ASSERT_EQ(p->statements.size(), 5u);
  EXPECT_EQ(p->statements[0].sid, "ReadForBob");
  EXPECT_EQ(p->statements[0].principals, (std::vector<std::string>{"bob", "carol", "dave"}));
  EXPECT_FALSE(p->statements[1].allow);
  EXPECT_EQ(p->statements[2].conditions.size(), 1u);
  EXPECT_EQ(p->statements[3].conditions[0].values, (std::vector<std::string>{"false"}));
}

TEST(S3Policy, RoundTrips) {
  auto p = parse_policy(kShare, "data");
  ASSERT_TRUE(p.ok());
  const std::string canon = policy_json(*p);
  auto back = parse_policy(canon, "data");
  ASSERT_TRUE(back.ok()) << back.status().to_string() << "\n" << canon;
  EXPECT_EQ(*back, *p);
  EXPECT_EQ(policy_json(*back), canon);
}

TEST(S3Policy, EvaluatesAllowDenyAndSilence) {
  auto p = parse_policy(kShare, "data");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(evaluate_policy(*p, req("bob", "s3:GetObject", "a/b")), PolicyDecision::allow);
  EXPECT_EQ(evaluate_policy(*p, req("carol", "s3:ListBucket", "")), PolicyDecision::allow);
  EXPECT_EQ(evaluate_policy(*p, req("dave", "s3:listbucketversions", "")), PolicyDecision::allow);
  EXPECT_EQ(evaluate_policy(*p, req("mallory", "s3:GetObject", "a/b")), PolicyDecision::none);
  EXPECT_EQ(evaluate_policy(*p, req("bob", "s3:DeleteObject", "a/b")), PolicyDecision::none);
  // Explicit deny wins over the allow.
  EXPECT_EQ(evaluate_policy(*p, req("bob", "s3:GetObject", "secret/x")), PolicyDecision::deny);
  // Anonymous reads only under public/ and only from loopback.
  EXPECT_EQ(evaluate_policy(*p, req("", "s3:GetObject", "public/x", "127.0.0.1")),
            PolicyDecision::allow);
  EXPECT_EQ(evaluate_policy(*p, req("", "s3:GetObject", "public/x", "::1")), PolicyDecision::allow);
  EXPECT_EQ(evaluate_policy(*p, req("", "s3:GetObject", "public/x", "::ffff:127.0.0.9")),
            PolicyDecision::allow);
  EXPECT_EQ(evaluate_policy(*p, req("", "s3:GetObject", "public/x", "10.0.0.1")),
            PolicyDecision::none);
  EXPECT_EQ(evaluate_policy(*p, req("", "s3:GetObject", "other", "127.0.0.1")),
            PolicyDecision::none);
  // PUT over plain HTTP is denied to everyone, over TLS not.
  EXPECT_EQ(evaluate_policy(*p, req("bob", "s3:PutObject", "k", "10.0.0.1", false)),
            PolicyDecision::deny);
  EXPECT_EQ(evaluate_policy(*p, req("bob", "s3:PutObject", "k", "10.0.0.1", true)),
            PolicyDecision::none);
  // s3:prefix.
  PolicyRequest list = req("erin", "s3:ListBucket", "");
  EXPECT_EQ(evaluate_policy(*p, list), PolicyDecision::none);  // no prefix: StringLike is false
  list.keys = {{"s3:prefix", "home/erin/photos/"}};
  EXPECT_EQ(evaluate_policy(*p, list), PolicyDecision::allow);
  list.keys = {{"s3:prefix", "home/bob/"}};
  EXPECT_EQ(evaluate_policy(*p, list), PolicyDecision::none);
}

TEST(S3Policy, ConditionOperators) {
  auto make = [](const std::string& cond) {
    return parse_policy(R"({"Statement":{"Effect":"Allow","Principal":"*","Action":"s3:ListBucket",
        "Resource":"arn:aws:s3:::data","Condition":)" +
                            cond + "}}",
                        "data");
  };
  PolicyRequest with = req("u", "s3:ListBucket", "");
  with.keys = {{"s3:prefix", "logs/"}};
  const PolicyRequest without = req("u", "s3:ListBucket", "");
  struct Case {
    std::string cond;
    PolicyDecision with, without;
  };
  const std::vector<Case> cases = {
      {R"({"StringEquals":{"s3:prefix":"logs/"}})", PolicyDecision::allow, PolicyDecision::none},
      {R"({"StringNotEquals":{"s3:prefix":"logs/"}})", PolicyDecision::none, PolicyDecision::allow},
      {R"({"StringNotLike":{"s3:prefix":"lo*"}})", PolicyDecision::none, PolicyDecision::allow},
      {R"({"StringEqualsIfExists":{"s3:prefix":"x"}})", PolicyDecision::none,
       PolicyDecision::allow},
      {R"({"StringEqualsIgnoreCase":{"s3:prefix":"LOGS/"}})", PolicyDecision::allow,
       PolicyDecision::none},
      {R"({"Null":{"s3:prefix":"true"}})", PolicyDecision::none, PolicyDecision::allow},
      {R"({"Null":{"s3:prefix":"false"}})", PolicyDecision::allow, PolicyDecision::none},
      {R"({"NotIpAddress":{"aws:SourceIp":"10.0.0.0/8"}})", PolicyDecision::none,
       PolicyDecision::none},
      {R"({"IpAddress":{"aws:SourceIp":"10.0.0.0/8"},"StringLike":{"s3:prefix":"l?gs/"}})",
       PolicyDecision::allow, PolicyDecision::none},
  };
  for (const Case& c : cases) {
    auto p = make(c.cond);
    ASSERT_TRUE(p.ok()) << c.cond << ": " << p.status().to_string();
    EXPECT_EQ(evaluate_policy(*p, with), c.with) << c.cond;
    EXPECT_EQ(evaluate_policy(*p, without), c.without) << c.cond;
  }
}

TEST(S3Policy, MalformedPolicies) {
  const std::string ok_stmt =
      R"("Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::data/*")";
  const std::vector<std::string> bad = {
      "",
      "not json",
      "[]",
      R"({"Version":"2012-10-17"})",
      R"({"Statement":[]})",
      R"({"Version":"2020-01-01","Statement":{)" + ok_stmt + "}}",
      R"({"Statement":{"Effect":"Maybe","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::data/*"}})",
      R"({"Statement":{"Effect":"Allow","Action":"s3:GetObject","Resource":"arn:aws:s3:::data/*"}})",
      R"({"Statement":{"Effect":"Allow","Principal":"*","Resource":"arn:aws:s3:::data/*"}})",
      R"({"Statement":{"Effect":"Allow","Principal":"*","Action":"s3:GetObject"}})",
      R"({"Statement":{"Effect":"Allow","Principal":"*","Action":"ec2:RunInstances","Resource":"arn:aws:s3:::data/*"}})",
      R"({"Statement":{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::other/*"}})",
      R"({"Statement":{"Effect":"Allow","Principal":"someone","Action":"s3:GetObject","Resource":"arn:aws:s3:::data/*"}})",
      R"({"Statement":{"Effect":"Allow","Principal":{"Service":"x"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::data/*"}})",
      R"({"Statement":{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::1:role/r"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::data/*"}})",
      R"({"Statement":{)" + ok_stmt + R"(,"Condition":{"DateLessThan":{"aws:CurrentTime":"x"}}}})",
      R"({"Statement":{)" + ok_stmt + R"(,"Condition":{"StringEquals":{"s3:nonsense":"x"}}}})",
      R"({"Statement":{)" + ok_stmt +
          R"(,"Condition":{"IpAddress":{"aws:SourceIp":"300.1.1.1/8"}}}})",
      R"({"Statement":{)" + ok_stmt + R"(,"Condition":{"Bool":{"aws:SecureTransport":"maybe"}}}})",
      R"({"Statement":{)" + ok_stmt + R"(,"Extra":1}})",
      R"({"Statement":{)" + ok_stmt + R"(,"NotPrincipal":"*"}})",
  };
  for (const auto& b : bad) {
    auto p = parse_policy(b, "data");
    EXPECT_EQ(p.code(), Errc::malformed_policy) << b;
    EXPECT_FALSE(p.status().message().empty());
  }
}

TEST(S3Policy, Limits) {
  EXPECT_EQ(limits::bucket_policy_bytes_max, 20u * 1024);
  const std::string stmt =
      R"({"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::data/*"})";
  std::string many = R"({"Statement":[)";
  for (std::size_t i = 0; i < limits::policy_statements_max; ++i) many += (i ? "," : "") + stmt;
  EXPECT_TRUE(parse_policy(many + "]}", "data").ok());
  EXPECT_EQ(parse_policy(many + "," + stmt + "]}", "data").code(), Errc::malformed_policy);
  std::string big = R"({"Id":")" + std::string(limits::bucket_policy_bytes_max, 'x') +
                    R"(","Statement":)" + stmt + "}";
  EXPECT_EQ(parse_policy(big, "data").code(), Errc::malformed_policy);
  std::string fits = R"({"Statement":)" + stmt + "}";
  fits += std::string(limits::bucket_policy_bytes_max - fits.size(), ' ');
  EXPECT_TRUE(parse_policy(fits, "data").ok());
}

TEST(S3Policy, GlobAndCidr) {
  EXPECT_TRUE(policy_glob("s3:Get*", "s3:getobject", true));
  EXPECT_FALSE(policy_glob("s3:Get*", "s3:getobject", false));
  EXPECT_TRUE(policy_glob("arn:aws:s3:::b/*/x?", "arn:aws:s3:::b/a/b/xy", false));
  EXPECT_FALSE(policy_glob("arn:aws:s3:::b/*/x?", "arn:aws:s3:::b/a/b/x", false));
  EXPECT_TRUE(policy_glob("*", "", false));
  EXPECT_TRUE(policy_glob("a*b*c", "aXXbYYbc", false));
  // Many stars against a long string stay fast (no exponential backtracking).
  EXPECT_FALSE(policy_glob(std::string(50, '*') + "b", std::string(20000, 'a'), false));
  EXPECT_TRUE(ip_in_cidr("192.168.1.7", "192.168.0.0/16"));
  EXPECT_FALSE(ip_in_cidr("192.169.1.7", "192.168.0.0/16"));
  EXPECT_TRUE(ip_in_cidr("10.1.2.3", "0.0.0.0/0"));
  EXPECT_TRUE(ip_in_cidr("10.1.2.3", "10.1.2.3"));
  EXPECT_TRUE(ip_in_cidr("2001:db8::1", "2001:db8::/32"));
  EXPECT_FALSE(ip_in_cidr("2001:db9::1", "2001:db8::/32"));
  EXPECT_FALSE(ip_in_cidr("10.0.0.1", "::/0"));  // families differ
  EXPECT_FALSE(ip_in_cidr("10.0.0.1", "10.0.0.0/33"));
  EXPECT_FALSE(ip_in_cidr("garbage", "10.0.0.0/8"));
}

TEST(S3PolicyFuzz, ReplayInvariants) {
  const std::vector<std::string> seeds = {
      kShare,
      R"({"Statement":{"Effect":"Deny","Principal":{"AWS":"x"},"NotAction":"s3:Get*",)"
      R"("NotResource":"arn:aws:s3:::b/k*","Condition":{"NullIfExists":{"s3:prefix":true}}}})"};
  const std::string alphabet = "{}[]\":,*?/ \\ab3sAllowDenyPrincipal\x01\xc3\xa9\xff";
  std::mt19937_64 rng(4);
  int checked = 0;
  for (std::string seed : seeds) {
    // kShare names bucket "data"; the fuzz body uses "b".
    for (std::size_t at = seed.find(":::data"); at != std::string::npos;
         at = seed.find(":::data", at)) {
      seed.replace(at, 7, ":::b");
    }
    ASSERT_TRUE(policy_fuzz_one(reinterpret_cast<const std::uint8_t*>(seed.data()), seed.size()));
    for (int m = 0; m < 500; ++m) {
      std::string s = testing_util::mutate(seed, alphabet, rng);
      ASSERT_TRUE(policy_fuzz_one(reinterpret_cast<const std::uint8_t*>(s.data()), s.size()))
          << testing::PrintToString(s);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2 * 500);
}

}  // namespace
}  // namespace objdirect::s3
