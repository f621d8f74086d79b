#include "client/http_client.hpp"

#include <gtest/gtest.h>

namespace objdirect::client {
namespace {

TEST(ParseEndpoint, HostPortAndDefaults) {
  auto e = parse_endpoint("http://127.0.0.1:9000");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->host, "127.0.0.1");
  EXPECT_EQ(e->port, "9000");
  EXPECT_EQ(e->host_header, "127.0.0.1:9000");
  auto d = parse_endpoint("http://example.com/");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->port, "80");
  EXPECT_EQ(d->host_header, "example.com");
  auto v6 = parse_endpoint("http://[::1]:9000");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, "9000");
}

TEST(ParseEndpoint, Rejects) {
  EXPECT_EQ(parse_endpoint("https://h:1").code(), Errc::invalid_argument);
  EXPECT_EQ(parse_endpoint("h:1").code(), Errc::invalid_argument);
  EXPECT_EQ(parse_endpoint("http://h:1/prefix").code(), Errc::invalid_argument);
  EXPECT_EQ(parse_endpoint("http://h:x").code(), Errc::invalid_argument);
  EXPECT_EQ(parse_endpoint("http://").code(), Errc::invalid_argument);
}

TEST(ObjectTarget, EncodesKeyKeepsSlashes) {
  EXPECT_EQ(object_target("b", "a b/c+d"), "/b/a%20b/c%2Bd");
  EXPECT_EQ(object_target("b", ""), "/b");
}

TEST(StatusFromResponse, XmlCodeWins) {
  HttpResponse r;
  r.status = 404;
  r.body = "<?xml version=\"1.0\"?><Error><Code>NoSuchBucket</Code><Message>gone</Message></Error>";
  Status st = status_from_response(r);
  EXPECT_EQ(st.code(), Errc::no_such_bucket);
  EXPECT_EQ(st.message(), "gone");
}

TEST(StatusFromResponse, CarriesTheRequestId) {
  HttpResponse r;
  r.status = 404;
  r.headers.emplace_back("x-amz-request-id", "HDR123");
  EXPECT_EQ(status_from_response(r).message(), "HTTP 404 (RequestId: HDR123)");
  r.body =
      "<Error><Code>NoSuchKey</Code><Message>nope</Message><RequestId>XML9</RequestId></Error>";
  EXPECT_EQ(status_from_response(r).message(), "nope (RequestId: XML9)");
  r.body = "<Error><Code>NoSuchKey</Code><Message>nope</Message></Error>";
  EXPECT_EQ(status_from_response(r).message(), "nope (RequestId: HDR123)");
}

TEST(StatusFromResponse, StatusOnlyForBodylessReplies) {
  HttpResponse r;
  r.status = 404;
  EXPECT_EQ(status_from_response(r).code(), Errc::no_such_key);
  r.status = 403;
  EXPECT_EQ(status_from_response(r).code(), Errc::access_denied);
  r.status = 412;
  EXPECT_EQ(status_from_response(r).code(), Errc::precondition_failed);
  EXPECT_FALSE(status_from_response(r).message().empty());
}

TEST(HttpClient, UnreachableEndpointIsUnavailable) {
  // Port 1 on loopback: nothing listens there, the connect is refused at once.
  HttpOptions o;
  o.endpoint = *parse_endpoint("http://127.0.0.1:1");
  o.connect_timeout = std::chrono::milliseconds(2000);
  HttpClient c(o);
  HttpRequest req{"GET", "/", {}, {}, false};
  auto r = c.execute(req);
  EXPECT_EQ(r.code(), Errc::unavailable);
  EXPECT_EQ(c.connections_open(), 0u);
}

}  // namespace
}  // namespace objdirect::client
