#include "client/http_client.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/limits.hpp"
#include "objdirect/client.hpp"

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
  EXPECT_FALSE(v6->tls);
  auto tls = parse_endpoint("https://s3.example.com");
  ASSERT_TRUE(tls.ok());
  EXPECT_TRUE(tls->tls);
  EXPECT_EQ(tls->port, "443");
  EXPECT_EQ(tls->host_header, "s3.example.com");
  auto tls_port = parse_endpoint("https://127.0.0.1:9443/");
  ASSERT_TRUE(tls_port.ok());
  EXPECT_EQ(tls_port->port, "9443");
}

TEST(ParseEndpoint, Rejects) {
  EXPECT_EQ(parse_endpoint("ftp://h:1").code(), Errc::invalid_argument);
  EXPECT_EQ(parse_endpoint("https://h:1/prefix").code(), Errc::invalid_argument);
  EXPECT_EQ(parse_endpoint("h:1").code(), Errc::invalid_argument);
  EXPECT_EQ(parse_endpoint("http://h:1/prefix").code(), Errc::invalid_argument);
  EXPECT_EQ(parse_endpoint("http://h:x").code(), Errc::invalid_argument);
  EXPECT_EQ(parse_endpoint("http://").code(), Errc::invalid_argument);
}

TEST(VirtualHostTarget, MovesTheBucketIntoTheHost) {
  auto v = virtual_host_target("localhost:9000", "/my-bkt/a%20b/c?uploads");
  ASSERT_TRUE(v);
  EXPECT_EQ(v->first, "my-bkt.localhost:9000");
  EXPECT_EQ(v->second, "/a%20b/c?uploads");
  v = virtual_host_target("h", "/bkt1?list-type=2");
  ASSERT_TRUE(v);
  EXPECT_EQ(v->first, "bkt1.h");
  EXPECT_EQ(v->second, "/?list-type=2");
  v = virtual_host_target("h", "/bkt1");
  ASSERT_TRUE(v);
  EXPECT_EQ(v->second, "/");
  // No bucket, or one that cannot be a DNS label: path-style stays.
  for (const char* t : {"/", "/?x", "/ab/k", "/Upper/k", "/a..b/k", "/-ab/k", "/ab-/k", "/a_b/k"}) {
    EXPECT_FALSE(virtual_host_target("h", t)) << t;
  }
}

TEST(ParseLocation, AbsoluteUrlsAndPaths) {
  Endpoint cur = *parse_endpoint("http://127.0.0.1:9000");
  auto a = parse_location("https://other.example:8443/b/k?x=1", cur);
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->first.tls);
  EXPECT_EQ(a->first.host, "other.example");
  EXPECT_EQ(a->first.port, "8443");
  EXPECT_EQ(a->second, "/b/k?x=1");
  auto b = parse_location("http://10.0.0.1", cur);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->second, "/");
  auto c = parse_location("/b/k", cur);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->first.host_header, "127.0.0.1:9000");
  EXPECT_EQ(c->second, "/b/k");
  EXPECT_FALSE(parse_location("b/k", cur).ok());
  EXPECT_FALSE(parse_location("ftp://h/x", cur).ok());
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

// A loopback listener for the deadline tests: it accepts one connection and runs `peer` on it
// (what it reads and writes), then keeps the socket open until the test ends.
class SilentPeer {
 public:
  explicit SilentPeer(std::function<void(int fd)> peer) {
    listen_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (listen_ < 0 || ::bind(listen_, reinterpret_cast<sockaddr*>(&a), len) != 0 ||
        ::listen(listen_, 4) != 0 ||
        ::getsockname(listen_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      std::abort();
    }
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this, peer = std::move(peer)] {
      fd_ = ::accept(listen_, nullptr, nullptr);
      if (fd_ >= 0) peer(fd_);
      std::unique_lock lk(mu_);
      cv_.wait(lk, [this] { return done_; });
    });
  }
  ~SilentPeer() {
    {
      std::lock_guard lk(mu_);
      done_ = true;
    }
    cv_.notify_all();
    ::shutdown(listen_, SHUT_RDWR);  // an accept that never came returns
    thread_.join();
    if (fd_ >= 0) ::close(fd_);
    ::close(listen_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  int listen_ = -1;
  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

// Reads a request header from fd (up to its blank line); false when the peer left.
bool read_request_header(int fd) {
  std::string got;
  char ch;
  while (got.find("\r\n\r\n") == std::string::npos) {
    if (::read(fd, &ch, 1) != 1) return false;
    got.push_back(ch);
  }
  return true;
}

HttpOptions deadline_options(const std::string& url) {
  HttpOptions o;
  o.endpoint = *parse_endpoint(url);
  o.io_timeout = std::chrono::milliseconds(300);
  o.retry_policy.max_attempts = 1;
  return o;
}

// Plain TCP reads wait on the socket's own timeout (SO_RCVTIMEO): a server that never answers,
// or stops in the middle of a body, fails the request with timeout after io_timeout, not never.
TEST(HttpClient, NoAnswerTimesOut) {
  SilentPeer peer([](int fd) { (void)read_request_header(fd); });
  HttpClient c(deadline_options(peer.url()));
  const auto t0 = std::chrono::steady_clock::now();
  auto r = c.execute(HttpRequest{"GET", "/b/k", {}, {}, false});
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(r.code(), Errc::timeout) << r.status().message();
  EXPECT_NE(r.status().message().find("reading response header"), std::string::npos);
  EXPECT_GE(took, std::chrono::milliseconds(250));
  EXPECT_LT(took, std::chrono::seconds(5));
  EXPECT_EQ(c.connections_open(), 0u);  // a timed-out connection is not kept
}

TEST(HttpClient, BodyThatStopsTimesOut) {
  SilentPeer peer([](int fd) {
    if (!read_request_header(fd)) return;
    const std::string head =
        "HTTP/1.1 200 OK\r\nContent-Length: 10000\r\n\r\n" + std::string(100, 'x');
    (void)!::write(fd, head.data(), head.size());
  });
  HttpClient c(deadline_options(peer.url()));
  std::vector<std::byte> sink(10000);
  const auto t0 = std::chrono::steady_clock::now();
  auto r = c.execute(HttpRequest{"GET", "/b/k", {}, {}, false}, std::span<std::byte>(sink));
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(r.code(), Errc::timeout) << r.status().message();
  EXPECT_NE(r.status().message().find("reading response body"), std::string::npos);
  EXPECT_LT(took, std::chrono::seconds(5));
}

// Writes wait on SO_SNDTIMEO: a server that reads nothing of a large body fails the request
// once the socket buffers are full and io_timeout passes.
TEST(HttpClient, PeerThatReadsNothingTimesOutTheWrite) {
  SilentPeer peer([](int) {});
  HttpClient c(deadline_options(peer.url()));
  std::vector<std::byte> body(64 << 20);
  HttpRequest req{"PUT", "/b/k", {}, std::span<const std::byte>(body), true};
  const auto t0 = std::chrono::steady_clock::now();
  auto r = c.execute(req);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(r.code(), Errc::timeout) << r.status().message();
  EXPECT_NE(r.status().message().find("sending request"), std::string::npos);
  EXPECT_LT(took, std::chrono::seconds(10));
}

}  // namespace
}  // namespace objdirect::client

// --- PutOptions' headers and Client::presign (no server needed) ---------------------------------

TEST(PutOptionHeaders, LowerCasesNamesAndChecksThem) {
  objdirect::PutOptions o;
  o.content_type = "text/plain; charset=utf-8";
  o.metadata = {{"Owner", "alice"}, {"tag", "a=b, c"}};
  auto h = objdirect::client::put_option_headers(o);
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_EQ(*h, (objdirect::client::Headers{{"content-type", "text/plain; charset=utf-8"},
                                            {"x-amz-meta-owner", "alice"},
                                            {"x-amz-meta-tag", "a=b, c"}}));
  for (const auto& bad : std::vector<objdirect::PutOptions>{{"", {{"", "v"}}},
                                                            {"", {{"two words", "v"}}},
                                                            {"", {{"k", "line\r\nx-evil: 1"}}},
                                                            {"text/plain\r\nx-evil: 1", {}}}) {
    EXPECT_EQ(objdirect::client::put_option_headers(bad).code(), objdirect::Errc::invalid_argument);
  }
  // limits::user_metadata_bytes_max counts names and values: 2048 is taken, 2049 refused.
  objdirect::PutOptions edge{
      "", {{"k", std::string(objdirect::limits::user_metadata_bytes_max - 1, 'v')}}};
  EXPECT_TRUE(objdirect::client::put_option_headers(edge).ok());
  edge.metadata[0].second += 'v';
  EXPECT_EQ(objdirect::client::put_option_headers(edge).code(), objdirect::Errc::invalid_argument);
}

TEST(ClientPresign, VerifiesWithTheServersSigV4AndExpires) {
  objdirect::ClientConfig cfg;
  cfg.endpoint = "http://127.0.0.1:9";
  cfg.access_key = "AKPRESIGN";
  cfg.secret_key = "secret/presign";
  cfg.session_token = "tok+en/1";
  auto c = objdirect::Client::create(cfg);
  ASSERT_TRUE(c.ok()) << c.status().message();
  const auto t0 = std::chrono::system_clock::now();
  auto url = (*c)->presign("GET", "bkt", "dir/a b.bin", std::chrono::seconds(60));
  ASSERT_TRUE(url.ok()) << url.status().message();
  const std::string base = "http://127.0.0.1:9";
  ASSERT_EQ(url->rfind(base + "/bkt/dir/a%20b.bin?", 0), 0u) << *url;
  EXPECT_NE(url->find("X-Amz-Expires=60&"), std::string::npos) << *url;
  EXPECT_NE(url->find("X-Amz-Security-Token=tok%2Ben%2F1"), std::string::npos) << *url;
  auto secrets = [](std::string_view key) -> std::optional<std::string> {
    if (key == "AKPRESIGN") return std::string("secret/presign");
    return std::nullopt;
  };
  auto check = [&](const std::string& target, std::chrono::system_clock::time_point now) {
    objdirect::sigv4::RequestView req;
    req.method = "GET";
    req.target = target;
    req.headers = {{"host", "127.0.0.1:9"}};
    return objdirect::sigv4::verify(req, secrets, "us-east-1", now);
  };
  const std::string target = url->substr(base.size());
  auto ok = check(target, t0);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_TRUE(ok->presigned);
  EXPECT_EQ(ok->access_key, "AKPRESIGN");
  std::string tampered = target;
  tampered.back() = tampered.back() == '0' ? '1' : '0';
  EXPECT_EQ(check(tampered, t0).code(), objdirect::Errc::signature_does_not_match);
  EXPECT_EQ(check(target, t0 + std::chrono::seconds(62)).code(), objdirect::Errc::access_denied);
  for (auto bad : {0, -1, 604801}) {
    EXPECT_EQ((*c)->presign("GET", "bkt", "k", std::chrono::seconds(bad)).code(),
              objdirect::Errc::invalid_argument);
  }
  EXPECT_TRUE((*c)->presign("GET", "bkt", "k", std::chrono::seconds(604800)).ok());
  EXPECT_EQ((*c)->presign("POST", "bkt", "k", std::chrono::seconds(1)).code(),
            objdirect::Errc::invalid_argument);
  EXPECT_EQ((*c)->presign("GET", "bkt", "", std::chrono::seconds(1)).code(),
            objdirect::Errc::invalid_argument);
}

// addressing_style "virtual": the bucket goes into the URL's host, signed for that host (as the
// requests of such a client go); a bucket that is not a DNS label stays path-style.
TEST(ClientPresign, VirtualAddressingPutsTheBucketInTheHost) {
  objdirect::ClientConfig cfg;
  cfg.endpoint = "http://localhost:9";
  cfg.access_key = "AKPRESIGN";
  cfg.secret_key = "secret/presign";
  cfg.addressing_style = "virtual";
  auto c = objdirect::Client::create(cfg);
  ASSERT_TRUE(c.ok()) << c.status().message();
  const auto t0 = std::chrono::system_clock::now();
  auto url = (*c)->presign("GET", "bkt", "dir/a b.bin", std::chrono::seconds(60));
  ASSERT_TRUE(url.ok()) << url.status().message();
  const std::string base = "http://bkt.localhost:9";
  ASSERT_EQ(url->rfind(base + "/dir/a%20b.bin?X-Amz-Algorithm=", 0), 0u) << *url;
  auto secrets = [](std::string_view key) -> std::optional<std::string> {
    if (key == "AKPRESIGN") return std::string("secret/presign");
    return std::nullopt;
  };
  const std::string target = url->substr(base.size());  // RequestView keeps a view of it
  objdirect::sigv4::RequestView req;
  req.method = "GET";
  req.target = target;
  req.headers = {{"host", "bkt.localhost:9"}};
  auto ok = objdirect::sigv4::verify(req, secrets, "us-east-1", t0);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  req.headers = {{"host", "localhost:9"}};  // signed for the bucket's host, not the endpoint's
  EXPECT_EQ(objdirect::sigv4::verify(req, secrets, "us-east-1", t0).code(),
            objdirect::Errc::signature_does_not_match);
  auto path_style = (*c)->presign("GET", "Not_A_Label", "k", std::chrono::seconds(60));
  ASSERT_TRUE(path_style.ok());
  EXPECT_EQ(path_style->rfind("http://localhost:9/Not_A_Label/k?", 0), 0u) << *path_style;
}
