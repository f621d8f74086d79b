// Regression guard for the protocol's worst trap: a server that does not know x-amz-rdma-token
// answers an empty-body PUT with 200 and stores a 0-byte object. The client must never take
// that for success: it re-sends the body at once and stops proposing RDMA to that server.
// The "server" here is a minimal S3 stand-in on a loopback port that ignores the token.
#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "client/rdma.hpp"
#include "objdirect/client.hpp"

namespace objdirect {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = asio::ip::tcp;

struct Seen {
  std::string method;
  bool token = false;
  std::size_t body_bytes = 0;
};

// Stores PUT bodies under the target, serves GET (with Range) from them, knows nothing of RDMA.
class LegacyServer {
 public:
  LegacyServer() : acceptor_(ioc_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {
    thread_ = std::thread([this] { run(); });
  }
  ~LegacyServer() {
    stop_ = true;
    beast::error_code ec;
    tcp::socket s(ioc_);
    s.connect(acceptor_.local_endpoint(), ec);  // wakes accept()
    thread_.join();
    for (auto& t : conns_) t.join();
  }
  std::string endpoint() const {
    return "http://127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port());
  }
  std::vector<Seen> seen() {
    std::lock_guard lk(mu_);
    return seen_;
  }
  std::size_t stored_size(const std::string& target) {
    std::lock_guard lk(mu_);
    return objects_[target].size();
  }

 private:
  void run() {
    while (!stop_) {
      tcp::socket s(ioc_);
      beast::error_code ec;
      acceptor_.accept(s, ec);
      if (ec || stop_) break;
      conns_.emplace_back([this, s = std::move(s)]() mutable { serve(std::move(s)); });
    }
  }

  void serve(tcp::socket s) {
    beast::flat_buffer buf;
    for (;;) {
      bhttp::request_parser<bhttp::string_body> p;
      p.body_limit(1ull << 30);
      beast::error_code ec;
      bhttp::read(s, buf, p, ec);
      if (ec) return;
      auto& req = p.get();
      std::string target(req.target());
      bhttp::response<bhttp::string_body> res{bhttp::status::ok, 11};
      res.set(bhttp::field::etag, "\"0123456789abcdef0123456789abcdef\"");
      {
        std::lock_guard lk(mu_);
        seen_.push_back({std::string(req.method_string()), req.count("x-amz-rdma-token") > 0,
                         req.body().size()});
        if (req.method() == bhttp::verb::put) {
          objects_[target] = req.body();
        } else if (req.method() == bhttp::verb::get) {
          const std::string& obj = objects_[target];
          std::uint64_t first = 0, last = obj.empty() ? 0 : obj.size() - 1;
          if (auto r = req.find(bhttp::field::range); r != req.end()) {
            std::string v(r->value());  // bytes=A-B
            first = std::stoull(v.substr(6));
            last = std::min<std::uint64_t>(std::stoull(v.substr(v.find('-') + 1)), last);
            res.result(bhttp::status::partial_content);
            res.set(bhttp::field::content_range, "bytes " + std::to_string(first) + "-" +
                                                     std::to_string(last) + "/" +
                                                     std::to_string(obj.size()));
          }
          res.body() = obj.substr(first, last - first + 1);
        }
      }
      res.prepare_payload();
      bhttp::write(s, res, ec);
      if (ec) return;
    }
  }

  asio::io_context ioc_;
  tcp::acceptor acceptor_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::vector<std::thread> conns_;
  std::mutex mu_;
  std::vector<Seen> seen_;
  std::map<std::string, std::string> objects_;
};

TEST(LegacyServer, IgnoredTokenOnPutIsNeverSuccessAndDisablesRdma) {
  if (!client::fabrics_built_in()) GTEST_SKIP() << "built without the transport";
  if (!client::open_fabric("libfabric:tcp", {}).ok()) GTEST_SKIP() << "libfabric:tcp unavailable";
  LegacyServer server;
  ClientConfig cfg;
  cfg.endpoint = server.endpoint();
  cfg.access_key = "AK";
  cfg.secret_key = "SK";
  cfg.fabric = "libfabric:tcp";
  auto c = Client::create(cfg);
  ASSERT_TRUE(c.ok());

  std::vector<std::byte> src(10'000, std::byte{7});
  auto p = (*c)->put("bucket", "key", src);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(p->path, TransferPath::http_fallback);
  EXPECT_NE(p->reason.find("ignored"), std::string::npos) << p->reason;
  EXPECT_EQ(server.stored_size("/bucket/key"), src.size()) << "left a short object";
  auto seen = server.seen();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_TRUE(seen[0].token);
  EXPECT_EQ(seen[0].body_bytes, 0u);
  EXPECT_FALSE(seen[1].token);
  EXPECT_EQ(seen[1].body_bytes, src.size());

  // No more tokens to this server: the next PUT and GET go straight over HTTP, saying why.
  auto p2 = (*c)->put("bucket", "key2", src);
  ASSERT_TRUE(p2.ok());
  EXPECT_EQ(p2->path, TransferPath::http);
  EXPECT_NE(p2->reason.find("RDMA disabled"), std::string::npos) << p2->reason;
  std::vector<std::byte> dst(src.size());
  auto g = (*c)->get("bucket", "key2", dst);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(g->bytes, src.size());
  EXPECT_EQ(dst, src);
  seen = server.seen();
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_FALSE(seen[2].token);
  EXPECT_FALSE(seen[3].token);
}

TEST(LegacyServer, GetWithoutRdmaReplyTakesTheBody) {
  if (!client::fabrics_built_in()) GTEST_SKIP() << "built without the transport";
  if (!client::open_fabric("libfabric:tcp", {}).ok()) GTEST_SKIP() << "libfabric:tcp unavailable";
  LegacyServer server;
  ClientConfig cfg;
  cfg.endpoint = server.endpoint();
  cfg.access_key = "AK";
  cfg.secret_key = "SK";
  cfg.fabric = "none";
  std::vector<std::byte> src(5000);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::byte>(i);
  ASSERT_TRUE((*Client::create(cfg))->put("b", "k", src).ok());
  cfg.fabric = "libfabric:tcp";
  auto c = Client::create(cfg);
  std::vector<std::byte> dst(src.size());
  auto g = (*c)->get("b", "k", dst);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(g->path, TransferPath::http_fallback);
  EXPECT_NE(g->reason.find("no x-amz-rdma-reply"), std::string::npos) << g->reason;
  EXPECT_EQ(dst, src);
  EXPECT_TRUE(server.seen().back().token);
}

}  // namespace
}  // namespace objdirect
