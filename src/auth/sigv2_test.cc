#include "auth/sigv2.hpp"

#include <gtest/gtest.h>

#include "common/time.hpp"

namespace objdirect::sigv2 {
namespace {

using namespace std::chrono;
using sigv4::RequestView;

sigv4::SecretLookup secrets() {
  return [](std::string_view ak) -> std::optional<std::string> {
    if (ak == "objdirect") return std::string("objdirect-secret");
    return std::nullopt;
  };
}

struct Captured {
  std::string_view method, target;
  std::vector<std::pair<std::string, std::string>> headers;
};

// Requests exactly as botocore 1.43.11 sends them with signature_version="s3" (header auth) and
// its default generate_presigned_url() (query auth), captured at the wire: a path-style key with
// escapes, x-amz-meta-* with spaces, sub-resources with escaped values, response-* overrides, a
// virtual-hosted request and a presigned GET.
const std::vector<Captured>& botocore_captures() {
  static const std::vector<Captured> captured = {
      {"PUT",
       "/bkt/dir/a%20b%2Bc.txt",
       {{"host", "127.0.0.1:9000"},
        {"content-type", "text/plain"},
        {"x-amz-meta-note", " x  y "},
        {"x-amz-meta-a", "b"},
        {"expect", "100-continue"},
        {"x-amz-checksum-crc32", "2JMqrA=="},
        {"x-amz-sdk-checksum-algorithm", "CRC32"},
        {"date", "Sun, 29 Nov 2026 16:26:36 GMT"},
        {"authorization", "AWS objdirect:60FIqLyxZdzoiOwlSPhCndMJE98="},
        {"content-length", "2"}}},
      {"GET",
       "/bkt/k?versionId=v%2B1%2F2&response-content-type=text%2Fx%3B%20charset%3Dutf-8",
       {{"host", "127.0.0.1:9000"},
        {"x-amz-checksum-mode", "ENABLED"},
        {"date", "Sun, 29 Nov 2026 16:26:36 GMT"},
        {"authorization", "AWS objdirect:Jn1PIVJH5lfSJVWD8pp80T2ZXRs="}}},
      {"PUT",
       "/bkt/big?uploadId=u%252F&partNumber=2",
       {{"host", "127.0.0.1:9000"},
        {"expect", "100-continue"},
        {"x-amz-checksum-crc32", "+OEYDw=="},
        {"x-amz-sdk-checksum-algorithm", "CRC32"},
        {"date", "Sun, 29 Nov 2026 16:26:36 GMT"},
        {"authorization", "AWS objdirect:kZPJVMeW1E3qKevsDTAiW/K3CyM="},
        {"content-length", "2"}}},
      {"GET",
       "/bkt?prefix=a%20b&encoding-type=url",
       {{"host", "127.0.0.1:9000"},
        {"date", "Sun, 29 Nov 2026 16:26:36 GMT"},
        {"authorization", "AWS objdirect:AaunWFIExdepqqDeeJfC4Z8uM9Q="}}},
      {"GET",
       "/vh/key.txt",
       {{"host", "bkt.bkt.s3.example.com:9000"},
        {"x-amz-checksum-mode", "ENABLED"},
        {"date", "Sun, 29 Nov 2026 16:26:36 GMT"},
        {"authorization", "AWS objdirect:rkkvHWwAii0ZU7fhgtO6cvMB2V8="}}},
      {"GET",
       "/bkt/p%20q/"
       "r%2Bs.txt?AWSAccessKeyId=objdirect&Signature=MFFnoZlrW9eEXRuZ7JrpzG64%2FLM%3D&Expires="
       "1795973196",
       {{"host", "127.0.0.1:9000"}}},
  };
  return captured;
}

const SysTime kSent = *parse_http_date("Sun, 29 Nov 2026 16:26:36 GMT");

TEST(Sigv2, BotocoreCapturedRequestsVerifyThroughSigv4Verify) {
  for (const auto& c : botocore_captures()) {
    RequestView req{c.method, c.target, c.headers};
    auto r = sigv4::verify(req, secrets(), "us-east-1", kSent + seconds{30});
    ASSERT_TRUE(r.ok()) << c.method << " " << c.target << ": " << r.status().to_string();
    EXPECT_TRUE(r->sigv2);
    EXPECT_EQ(r->access_key, "objdirect");
    EXPECT_EQ(r->presigned, c.target.find("AWSAccessKeyId=") != std::string_view::npos);
    // Another secret fails: the vectors are not vacuous.
    auto wrong = sigv4::verify(
        req, [](std::string_view) { return std::optional<std::string>("x"); }, "us-east-1", kSent);
    EXPECT_EQ(wrong.code(), Errc::signature_does_not_match) << c.target;
  }
  // The PUT covers its x-amz-* and content-type headers.
  const auto& put = botocore_captures()[0];
  auto r = sigv4::verify({put.method, put.target, put.headers}, secrets(), "", kSent);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->signed_headers, (std::vector<std::string>{
                                   "content-type", "date", "x-amz-checksum-crc32", "x-amz-meta-a",
                                   "x-amz-meta-note", "x-amz-sdk-checksum-algorithm"}));
}

TEST(Sigv2, TamperingFails) {
  const auto& put = botocore_captures()[0];
  const std::pair<std::string, std::string> changes[] = {
      {"x-amz-meta-a", "c"}, {"content-type", "text/html"}, {"x-amz-checksum-crc32", "AAAAAA=="}};
  for (const auto& [name, value] : changes) {
    RequestView req{put.method, put.target, put.headers};
    for (auto& [k, v] : req.headers) {
      if (k == name) v = value;
    }
    EXPECT_EQ(sigv4::verify(req, secrets(), "", kSent).code(), Errc::signature_does_not_match)
        << name;
  }
  // An added x-amz-* header is covered too; an added other header is not.
  RequestView extra{put.method, put.target, put.headers};
  extra.headers.emplace_back("x-amz-meta-new", "1");
  EXPECT_EQ(sigv4::verify(extra, secrets(), "", kSent).code(), Errc::signature_does_not_match);
  RequestView ua{put.method, put.target, put.headers};
  ua.headers.emplace_back("user-agent", "curl");
  EXPECT_TRUE(sigv4::verify(ua, secrets(), "", kSent).ok());
  // Method, path and sub-resource values are covered; other query parameters are not.
  EXPECT_EQ(sigv4::verify({"POST", put.target, put.headers}, secrets(), "", kSent).code(),
            Errc::signature_does_not_match);
  EXPECT_EQ(sigv4::verify({put.method, "/bkt/dir/a%20b%2Bc.txu", put.headers}, secrets(), "", kSent)
                .code(),
            Errc::signature_does_not_match);
  const auto& part = botocore_captures()[2];
  EXPECT_EQ(sigv4::verify({part.method, "/bkt/big?uploadId=u%252F&partNumber=3", part.headers},
                          secrets(), "", kSent)
                .code(),
            Errc::signature_does_not_match);
  const auto& list = botocore_captures()[3];
  EXPECT_TRUE(sigv4::verify({list.method, "/bkt?prefix=other&encoding-type=url", list.headers},
                            secrets(), "", kSent)
                  .ok());
}

TEST(Sigv2, ClockAndExpiry) {
  const auto& get = botocore_captures()[1];
  RequestView req{get.method, get.target, get.headers};
  EXPECT_TRUE(sigv4::verify(req, secrets(), "", kSent + minutes{15}).ok());
  EXPECT_EQ(sigv4::verify(req, secrets(), "", kSent + minutes{16}).code(),
            Errc::request_time_too_skewed);
  EXPECT_EQ(sigv4::verify(req, secrets(), "", kSent - minutes{16}).code(),
            Errc::request_time_too_skewed);

  const auto& pre = botocore_captures()[5];
  RequestView p{pre.method, pre.target, pre.headers};
  const SysTime expires = SysTime{} + seconds{1795973196};
  EXPECT_TRUE(sigv4::verify(p, secrets(), "", expires).ok());
  auto late = sigv4::verify(p, secrets(), "", expires + seconds{1});
  EXPECT_EQ(late.code(), Errc::access_denied);
  EXPECT_EQ(late.status().message(), "Request has expired");
  EXPECT_EQ(sigv4::verify(p, secrets(), "", expires - days{8}).code(),
            Errc::authorization_header_malformed);
}

TEST(Sigv2, MalformedAndUnknown) {
  RequestView base{"GET", "/b/k", {{"host", "h"}, {"date", http_date(kSent)}}};
  for (std::string_view a : {"AWS ", "AWS objdirect", "AWS :sig", "AWS objdirect:"}) {
    RequestView r = base;
    r.headers.emplace_back("authorization", std::string(a));
    EXPECT_EQ(sigv4::verify(r, secrets(), "", kSent).code(), Errc::authorization_header_malformed)
        << a;
  }
  RequestView unknown = base;
  unknown.headers.emplace_back("authorization", "AWS nobody:AAAA");
  EXPECT_EQ(sigv4::verify(unknown, secrets(), "", kSent).code(), Errc::invalid_access_key_id);
  RequestView nodate{"GET", "/b/k", {{"host", "h"}, {"authorization", "AWS objdirect:AAAA"}}};
  EXPECT_EQ(sigv4::verify(nodate, secrets(), "", kSent).code(), Errc::access_denied);
  for (std::string_view t : {"/b/k?AWSAccessKeyId=objdirect&Signature=x",
                             "/b/k?AWSAccessKeyId=objdirect&Signature=x&Expires=soon",
                             "/b/k?AWSAccessKeyId=objdirect&Signature=x&Expires=1&Expires=2"}) {
    EXPECT_EQ(sigv4::verify({"GET", t, {{"host", "h"}}}, secrets(), "", kSent).code(),
              Errc::authorization_header_malformed)
        << t;
  }
  // Both mechanisms at once.
  RequestView both{"GET",
                   "/b/k?AWSAccessKeyId=objdirect&Signature=x&Expires=1",
                   {{"host", "h"}, {"authorization", "AWS objdirect:AAAA"}}};
  EXPECT_EQ(sigv4::verify(both, secrets(), "", kSent).code(), Errc::invalid_argument);
}

// The documented S3 SigV2 examples (RESTAuthentication, "Object GET" and "Object PUT").
TEST(Sigv2, AwsDocumentedStringToSign) {
  RequestView get{"GET",
                  "/photos/puppy.jpg",
                  {{"host", "awsexamplebucket1.us-west-1.s3.amazonaws.com"},
                   {"date", "Tue, 27 Mar 2007 19:36:42 +0000"}}};
  EXPECT_EQ(canonical_resource(get.target, "awsexamplebucket1"),
            "/awsexamplebucket1/photos/puppy.jpg");
  std::string sts = string_to_sign(get, "Tue, 27 Mar 2007 19:36:42 +0000",
                                   "/awsexamplebucket1/photos/puppy.jpg", false);
  EXPECT_EQ(sts, "GET\n\n\nTue, 27 Mar 2007 19:36:42 +0000\n/awsexamplebucket1/photos/puppy.jpg");
  EXPECT_EQ(signature("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", sts),
            "qgk2+6Sv9/oM7G3qLEjTH1a1l1g=");
  EXPECT_EQ(canonical_resource("/b/k?versionId=1&acl&x=y&uploads=", ""),
            "/b/k?acl&uploads=&versionId=1");
}

}  // namespace
}  // namespace objdirect::sigv2
