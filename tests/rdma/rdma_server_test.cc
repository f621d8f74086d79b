// The server side of the RDMA protocol, driven with hand-made tokens over real transports against
// the real objdirect-server binary: success replies, declines, refusals of bad tokens before any
// byte moves, admission control, and a client that dies (or stalls) mid-transfer.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "auth/sigv4.hpp"
#include "client/http_client.hpp"
#include "common/checksum.hpp"
#include "common/time.hpp"
#include "common/uri.hpp"
#include "token/binding.hpp"
#include "token/token.hpp"
#include "transport/transport.hpp"

namespace objdirect {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr const char* kAk = "rdmaAK";
constexpr const char* kSk = "rdmaSecretKey";

std::uint64_t now_s() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

std::vector<std::byte> pattern(std::size_t n, std::uint32_t seed) {
  std::vector<std::byte> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<std::byte>(rng());
  return v;
}

// The real server binary on a free loopback port.
class ServerProcess {
 public:
  // env: variables set (or replaced) in the server's environment only.
  explicit ServerProcess(std::vector<std::string> extra,
                         const std::vector<std::pair<std::string, std::string>>& env = {}) {
    dir_ = fs::temp_directory_path() /
           ("od-rdma-test-" + std::to_string(getpid()) + "-" + std::to_string(counter_++));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    int out[2];
    if (pipe(out) != 0) return;
    // OBJDIRECT_TEST_SERVER_BIN overrides the binary (another build, or a debugger wrapper).
    const char* bin = std::getenv("OBJDIRECT_TEST_SERVER_BIN");
    if (!bin || !*bin) bin = OBJDIRECT_SERVER_BIN;
    std::vector<std::string> args = {bin,           "--listen",     "127.0.0.1:0", "--data",
                                     dir_.string(), "--access-key", kAk,           "--secret-key",
                                     kSk,           "--no-fsync"};
    args.insert(args.end(), extra.begin(), extra.end());
    // OBJDIRECT_TEST_SERVER_ARGS adds arguments (scripts/with-ceph.sh: the RADOS backend);
    // @UNIQUE@ becomes an id of this server, so that each gets its own pools.
    if (const char* more = std::getenv("OBJDIRECT_TEST_SERVER_ARGS")) {
      std::istringstream in(more);
      for (std::string a; in >> a;) {
        for (auto at = a.find("@UNIQUE@"); at != std::string::npos; at = a.find("@UNIQUE@")) {
          a.replace(at, 8, std::to_string(getpid()) + "x" + std::to_string(counter_ - 1));
        }
        args.push_back(a);
      }
    }
    std::vector<std::string> envs;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string_view kv(*e);
      const bool replaced = std::any_of(env.begin(), env.end(), [&](const auto& p) {
        return kv.starts_with(p.first) && kv.size() > p.first.size() && kv[p.first.size()] == '=';
      });
      if (!replaced) envs.emplace_back(kv);
    }
    for (const auto& [k, v] : env) envs.push_back(k + "=" + v);
    std::vector<char*> argv, envp;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : envs) envp.push_back(e.data());
    envp.push_back(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], 1);
      close(out[0]);
      close(out[1]);
      execve(argv[0], argv.data(), envp.data());
      _exit(127);
    }
    close(out[1]);
    FILE* f = fdopen(out[0], "r");
    char line[512];
    while (std::fgets(line, sizeof(line), f)) {
      std::string l(line);
      auto at = l.find("http://");
      if (at != std::string::npos) {
        endpoint_ = l.substr(at);
        while (!endpoint_.empty() && std::isspace(static_cast<unsigned char>(endpoint_.back()))) {
          endpoint_.pop_back();
        }
        break;
      }
    }
    std::fclose(f);
  }
  ~ServerProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  const std::string& endpoint() const { return endpoint_; }
  bool alive() const { return pid_ > 0 && kill(pid_, 0) == 0; }

  client::HttpClient& http() {
    if (!http_) {
      client::HttpOptions o;
      o.endpoint = *client::parse_endpoint(endpoint_);
      o.credentials = {kAk, kSk};
      o.region = "us-east-1";
      http_ = std::make_unique<client::HttpClient>(o);
    }
    return *http_;
  }

  // A gauge or counter from /metrics (unauthenticated, loopback), or -1 if absent.
  double metric(const std::string& name) {
    std::string cmd = "curl -s " + endpoint_ + "/metrics";
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) return -1;
    char line[1024];
    double v = -1;
    while (std::fgets(line, sizeof(line), p)) {
      std::string l(line);
      if (l.rfind(name + " ", 0) == 0) v = std::atof(l.c_str() + name.size() + 1);
    }
    pclose(p);
    return v;
  }

 private:
  static inline int counter_ = 0;
  fs::path dir_;
  pid_t pid_ = -1;
  std::string endpoint_;
  std::unique_ptr<client::HttpClient> http_;
};

client::HttpResponse request(ServerProcess& s, const std::string& method, const std::string& path,
                             std::vector<std::pair<std::string, std::string>> headers = {},
                             std::span<const std::byte> body = {},
                             std::optional<std::span<std::byte>> sink = std::nullopt) {
  client::HttpRequest r;
  r.method = method;
  r.target = path;
  r.headers = std::move(headers);
  r.body = body;
  r.send_content_length = method == "PUT" || method == "POST";
  auto res = s.http().execute(r, sink);
  EXPECT_TRUE(res.ok()) << res.status().to_string();
  return res.ok() ? *res : client::HttpResponse{};
}

std::string header(const client::HttpResponse& r, std::string_view name) {
  auto h = r.header(name);
  return h ? std::string(*h) : std::string();
}

std::string s3_code(const client::HttpResponse& r) {
  auto a = r.body.find("<Code>");
  auto b = r.body.find("</Code>");
  if (a == std::string::npos || b == std::string::npos) return {};
  return r.body.substr(a + 6, b - a - 6);
}

// A transport plus one registered buffer and a binding mailbox: the client side of a transfer.
// The server moves bytes only to or from an endpoint bound to the signer: bind() proves it
// (docs/rdma_protocol.md, "Endpoint binding").
struct ClientSide {
  std::unique_ptr<transport::Transport> tr;
  std::vector<std::byte> buf;
  std::shared_ptr<transport::MemoryRegion> mr;
  std::shared_ptr<void> hot;
  std::unique_ptr<std::array<std::byte, limits::token_mailbox_bytes>> mailbox =
      std::make_unique<std::array<std::byte, limits::token_mailbox_bytes>>();
  std::shared_ptr<transport::MemoryRegion> mailbox_mr;
  bool proof_ready = false;

  token::Token with_mailbox(token::Token t) const {
    t.mailbox = mailbox_mr->remote_segment(0, limits::token_mailbox_bytes);
    t.proof_ready = proof_ready;
    return t;
  }

  // The explicit bind call: POST /?rdma-bind is refused with a challenge, the proof goes into the
  // mailbox, and the second call binds. Returns whether the endpoint is bound.
  bool bind(ServerProcess& s, const std::string& secret = kSk) {
    return bind_via(
        [&](const std::string& tok) {
          return request(s, "POST", "/?rdma-bind", {{"x-amz-rdma-token", tok}});
        },
        secret);
  }
  // bind() through `post`, which sends POST /?rdma-bind with the given token.
  bool bind_via(const std::function<client::HttpResponse(const std::string&)>& post,
                const std::string& secret = kSk) {
    auto bind_token = [&] {
      return token::encode(
          with_mailbox(transport::make_token(*tr, {}, token::MemoryType::host, now_s() + 60)));
    };
    auto r = post(bind_token());
    if (r.status == 204) return true;
    auto challenge = token::decode_challenge(header(r, "x-amz-rdma-challenge"));
    EXPECT_EQ(r.status, 403) << r.body;
    EXPECT_EQ(s3_code(r), "RDMAEndpointNotBound");
    if (!challenge.ok()) return false;
    const token::Proof proof = token::bind_proof(secret, *challenge, tr->local_address());
    std::memcpy(mailbox->data(), proof.data(), proof.size());
    mailbox_mr->synchronize();
    proof_ready = true;
    r = post(bind_token());
    EXPECT_EQ(r.status, 204) << r.body;
    return r.status == 204;
  }

  static std::optional<ClientSide> open(const std::string& fabric, std::size_t bytes,
                                        bool progress_thread = true) {
    transport::Config cfg;
    cfg.fabric = fabric;
    cfg.progress_thread = progress_thread;
    auto t = transport::create_transport(cfg);
    if (!t.ok()) return std::nullopt;
    ClientSide c;
    c.tr = std::move(*t);
    c.hot =
        c.tr->keep_progress_hot(0, false);  // the server may move data at any time, as in a client
    c.buf.assign(std::max<std::size_t>(bytes, 1), std::byte{0xAA});
    auto mr = c.tr->register_memory(c.buf.data(), c.buf.size(), token::MemoryType::host);
    if (!mr.ok()) return std::nullopt;
    c.mr = *mr;
    auto mb = c.tr->register_memory(c.mailbox->data(), c.mailbox->size(), token::MemoryType::host);
    if (!mb.ok()) return std::nullopt;
    c.mailbox_mr = *mb;
    return c;
  }

  std::string token(std::size_t offset, std::size_t length, std::uint64_t expires) const {
    auto t = transport::make_token(*tr, {mr->remote_segment(offset, length)},
                                   token::MemoryType::host, expires);
    return token::encode(with_mailbox(std::move(t)));
  }
  std::string token(std::size_t length) const { return token(0, length, now_s() + 60); }
};

class RdmaServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<ServerProcess>(std::vector<std::string>{
        "--fabric", "libfabric:tcp,libfabric:shm", "--rdma-op-timeout-ms", "3000"});
    ASSERT_FALSE(server_->endpoint().empty()) << "server did not start";
    ASSERT_EQ(request(*server_, "PUT", "/bkt").status, 200);
  }
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(RdmaServerTest, GetAndPutMoveEveryByteOverLibfabricTcp) {
  constexpr std::size_t n = (4 << 20) + 12345;
  // The ETag is the MD5 of every byte, in order, although the server hashes each chunk on
  // another thread while it receives (HTTP: 1 MiB chunks) or writes (RDMA: 4 MiB chunks).
  auto md5_etag = [](const std::vector<std::byte>& bytes) {
    Md5 md5;
    md5.update(bytes.data(), bytes.size());
    return "\"" + md5.hex() + "\"";
  };
  auto data = pattern(n, 1);
  auto put = request(*server_, "PUT", "/bkt/obj", {}, data);
  ASSERT_EQ(put.status, 200);
  EXPECT_EQ(header(put, "etag"), md5_etag(data));
  auto c = ClientSide::open("libfabric:tcp", n);
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->bind(*server_));

  auto r = request(*server_, "GET", "/bkt/obj", {{"x-amz-rdma-token", c->token(n)}});
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(header(r, "x-amz-rdma-reply"), "200");
  EXPECT_EQ(header(r, "x-amz-rdma-bytes-transferred"), std::to_string(n));
  EXPECT_EQ(header(r, "content-length"), "0");
  EXPECT_FALSE(header(r, "etag").empty());
  EXPECT_TRUE(std::equal(data.begin(), data.end(), c->buf.begin()));

  // Range GET into an offset of the buffer: exactly the range's bytes, nothing around them.
  std::fill(c->buf.begin(), c->buf.end(), std::byte{0});
  r = request(
      *server_, "GET", "/bkt/obj",
      {{"range", "bytes=100-1099"}, {"x-amz-rdma-token", c->token(5000, 1000, now_s() + 60)}});
  EXPECT_EQ(r.status, 206);
  EXPECT_EQ(header(r, "x-amz-rdma-reply"), "206");
  EXPECT_EQ(header(r, "content-range"), "bytes 100-1099/" + std::to_string(n));
  EXPECT_TRUE(std::equal(data.begin() + 100, data.begin() + 1100, c->buf.begin() + 5000));
  EXPECT_EQ(c->buf[4999], std::byte{0});
  EXPECT_EQ(c->buf[6000], std::byte{0});
  // The whole GET was written from a mapping of the object's file, not through staging buffers
  // (the local backend's blob files; a backend without files, as RADOS, always stages); the
  // 1000-byte range is below --rdma-zero-copy-min-bytes (2 MiB) and was staged.
  const char* extra = std::getenv("OBJDIRECT_TEST_SERVER_ARGS");
  const bool file_backend = extra == nullptr ||
                            std::string(extra).find("--backend") == std::string::npos ||
                            std::string(extra).find("--backend local") != std::string::npos;
  EXPECT_EQ(server_->metric("objdirect_rdma_get_bytes_mapped_total"), file_backend ? n : 0);

  // PUT: the server reads the client's memory; an HTTP GET returns the same bytes.
  auto up = pattern(n, 2);
  std::copy(up.begin(), up.end(), c->buf.begin());
  r = request(*server_, "PUT", "/bkt/put",
              {{"x-amz-rdma-token", c->token(n)}, {"x-amz-content-sha256", "UNSIGNED-PAYLOAD"}});
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(header(r, "x-amz-rdma-reply"), "200");
  EXPECT_EQ(header(r, "etag"), md5_etag(up));
  std::vector<std::byte> back(n);
  r = request(*server_, "GET", "/bkt/put", {}, {}, std::span(back));
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(back == up);
  EXPECT_EQ(server_->metric("objdirect_rdma_buffers_in_use"), 0);
}

// With --put-digest-threads the MD5 of the ETag is computed on a pool beside the thread that
// receives (HTTP, 1 MiB chunks) or writes (RDMA, 4 MiB chunks): still every byte, in order.
TEST(RdmaServerDigestThreads, PutEtagsAreTheMd5OfTheBytesOverHttpAndRdma) {
  ServerProcess server(
      {"--fabric", "libfabric:tcp", "--rdma-op-timeout-ms", "3000", "--put-digest-threads", "2"});
  ASSERT_FALSE(server.endpoint().empty()) << "server did not start";
  ASSERT_EQ(request(server, "PUT", "/bkt").status, 200);
  constexpr std::size_t n = (9 << 20) + 4321;  // three RDMA chunks, ten HTTP chunks
  auto md5_etag = [](std::span<const std::byte> bytes) {
    Md5 md5;
    md5.update(bytes.data(), bytes.size());
    return "\"" + md5.hex() + "\"";
  };
  auto data = pattern(n, 7);
  auto r = request(server, "PUT", "/bkt/http", {}, data);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(header(r, "etag"), md5_etag(data));

  auto c = ClientSide::open("libfabric:tcp", n);
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->bind(server));
  auto up = pattern(n, 8);
  std::copy(up.begin(), up.end(), c->buf.begin());
  r = request(server, "PUT", "/bkt/rdma",
              {{"x-amz-rdma-token", c->token(n)}, {"x-amz-content-sha256", "UNSIGNED-PAYLOAD"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(header(r, "x-amz-rdma-reply"), "200");
  EXPECT_EQ(header(r, "etag"), md5_etag(up));
  std::vector<std::byte> back(n);
  r = request(server, "GET", "/bkt/rdma", {}, {}, std::span(back));
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(back == up);
}

std::string xml_value(const std::string& body, const std::string& tag) {
  auto a = body.find("<" + tag + ">");
  auto b = body.find("</" + tag + ">");
  if (a == std::string::npos || b == std::string::npos) return {};
  a += tag.size() + 2;
  return body.substr(a, b - a);
}

TEST_F(RdmaServerTest, MultipartMixesRdmaAndHttpParts) {
  constexpr std::size_t part = 5 << 20;
  auto p1 = pattern(part, 11), p2 = pattern(part, 12), p3 = pattern(1000, 13);
  auto r = request(*server_, "POST", "/bkt/mixed?uploads");
  ASSERT_EQ(r.status, 200) << r.body;
  std::string id = xml_value(r.body, "UploadId");
  ASSERT_FALSE(id.empty());
  auto c = ClientSide::open("libfabric:tcp", part);
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->bind(*server_));
  const std::vector<std::pair<std::string, std::string>> unsigned_payload = {
      {"x-amz-content-sha256", "UNSIGNED-PAYLOAD"}};
  std::vector<std::string> etags;
  // Part 1 by RDMA, part 2 in the body, part 3 (the short last one) by RDMA again.
  std::copy(p1.begin(), p1.end(), c->buf.begin());
  auto hdrs = unsigned_payload;
  hdrs.emplace_back("x-amz-rdma-token", c->token(part));
  r = request(*server_, "PUT", "/bkt/mixed?partNumber=1&uploadId=" + id, hdrs);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(header(r, "x-amz-rdma-reply"), "200");
  etags.push_back(header(r, "etag"));
  r = request(*server_, "PUT", "/bkt/mixed?partNumber=2&uploadId=" + id, {}, p2);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(header(r, "x-amz-rdma-reply"), "");
  etags.push_back(header(r, "etag"));
  std::copy(p3.begin(), p3.end(), c->buf.begin());
  hdrs = unsigned_payload;
  hdrs.emplace_back("x-amz-rdma-token", c->token(p3.size()));
  r = request(*server_, "PUT", "/bkt/mixed?partNumber=3&uploadId=" + id, hdrs);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(header(r, "x-amz-rdma-reply"), "200");
  etags.push_back(header(r, "etag"));
  std::string xml = "<CompleteMultipartUpload>";
  for (std::size_t i = 0; i < etags.size(); ++i) {
    xml += "<Part><PartNumber>" + std::to_string(i + 1) + "</PartNumber><ETag>" + etags[i] +
           "</ETag></Part>";
  }
  xml += "</CompleteMultipartUpload>";
  r = request(*server_, "POST", "/bkt/mixed?uploadId=" + id, {},
              std::span(reinterpret_cast<const std::byte*>(xml.data()), xml.size()));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_NE(xml_value(r.body, "ETag").find("-3"), std::string::npos) << r.body;
  std::vector<std::byte> back(2 * part + p3.size());
  r = request(*server_, "GET", "/bkt/mixed", {}, {}, std::span(back));
  ASSERT_EQ(r.status, 200);
  EXPECT_TRUE(std::equal(p1.begin(), p1.end(), back.begin()));
  EXPECT_TRUE(std::equal(p2.begin(), p2.end(), back.begin() + part));
  EXPECT_TRUE(std::equal(p3.begin(), p3.end(), back.begin() + 2 * part));
}

// GET from the mapped blob files: an object of several parts (several files), a range across
// their boundary, an overwrite (a new file) read right after; and the staged path when disabled.
// A range below --rdma-zero-copy-min-bytes is staged, unless that is 0. Over libfabric tcp and shm.
TEST(RdmaServerZeroCopy, GetSpansPartFilesFollowsOverwritesAndCanBeTurnedOff) {
  enum class Mode { by_default, staged, map_every_range };
  for (const std::string fabric : {"libfabric:tcp", "libfabric:shm"}) {
    for (Mode mode : {Mode::by_default, Mode::staged, Mode::map_every_range}) {
      const bool staged = mode == Mode::staged;
      SCOPED_TRACE(fabric + " mode " + std::to_string(static_cast<int>(mode)));
      std::vector<std::string> args = {"--fabric", fabric, "--rdma-op-timeout-ms", "3000"};
      if (staged) args.push_back("--rdma-staged-get");
      if (mode == Mode::map_every_range) {
        args.insert(args.end(), {"--rdma-zero-copy-min-bytes", "0"});
      }
      ServerProcess server(args);
      ASSERT_FALSE(server.endpoint().empty()) << "server did not start";
      ASSERT_EQ(request(server, "PUT", "/bkt").status, 200);
      constexpr std::size_t part = 5 << 20;
      auto p1 = pattern(part, 21), p2 = pattern(1000, 22);
      auto r = request(server, "POST", "/bkt/mp?uploads");
      ASSERT_EQ(r.status, 200) << r.body;
      const std::string id = xml_value(r.body, "UploadId");
      std::string xml = "<CompleteMultipartUpload>";
      int n = 0;
      for (const auto* p : {&p1, &p2}) {
        ++n;
        r = request(server, "PUT", "/bkt/mp?partNumber=" + std::to_string(n) + "&uploadId=" + id,
                    {}, *p);
        ASSERT_EQ(r.status, 200) << r.body;
        xml += "<Part><PartNumber>" + std::to_string(n) + "</PartNumber><ETag>" +
               header(r, "etag") + "</ETag></Part>";
      }
      xml += "</CompleteMultipartUpload>";
      r = request(server, "POST", "/bkt/mp?uploadId=" + id, {},
                  std::span(reinterpret_cast<const std::byte*>(xml.data()), xml.size()));
      ASSERT_EQ(r.status, 200) << r.body;

      const std::size_t total = part + p2.size();
      auto c = ClientSide::open(fabric, total);
      if (!c) GTEST_SKIP() << fabric << " unavailable";
      ASSERT_TRUE(c->bind(server));
      r = request(server, "GET", "/bkt/mp", {{"x-amz-rdma-token", c->token(total)}});
      ASSERT_EQ(r.status, 200) << r.body;
      EXPECT_EQ(header(r, "x-amz-rdma-reply"), "200");
      EXPECT_TRUE(std::equal(p1.begin(), p1.end(), c->buf.begin()));
      EXPECT_TRUE(std::equal(p2.begin(), p2.end(), c->buf.begin() + part));
      // 200 bytes across the boundary of the two part files.
      std::fill(c->buf.begin(), c->buf.end(), std::byte{0});
      r = request(
          server, "GET", "/bkt/mp",
          {{"range", "bytes=" + std::to_string(part - 100) + "-" + std::to_string(part + 99)},
           {"x-amz-rdma-token", c->token(0, 200, now_s() + 60)}});
      ASSERT_EQ(r.status, 206) << r.body;
      EXPECT_TRUE(std::equal(p1.end() - 100, p1.end(), c->buf.begin()));
      EXPECT_TRUE(std::equal(p2.begin(), p2.begin() + 100, c->buf.begin() + 100));
      // Overwritten: the next GET maps the new file.
      auto p3 = pattern(total, 23);
      ASSERT_EQ(request(server, "PUT", "/bkt/mp", {}, p3).status, 200);
      r = request(server, "GET", "/bkt/mp", {{"x-amz-rdma-token", c->token(total)}});
      ASSERT_EQ(r.status, 200) << r.body;
      EXPECT_TRUE(std::equal(p3.begin(), p3.end(), c->buf.begin()));
      // The 200-byte range is mapped only with --rdma-zero-copy-min-bytes 0.
      const double mapped = staged                     ? 0.0
                            : mode == Mode::by_default ? static_cast<double>(2 * total)
                                                       : static_cast<double>(2 * total + 200);
      EXPECT_EQ(server.metric("objdirect_rdma_get_bytes_mapped_total"), mapped);
      EXPECT_EQ(server.metric("objdirect_rdma_buffers_in_use"), 0);
    }
  }
}

// Transfers of one chunk (4 MiB by default) run on the request's I/O thread, counted in
// objdirect_rdma_transfers_inline_total; longer ones, and every one with
// --rdma-inline-transfers-max 0, on the RDMA pool. Every byte arrives either way.
TEST(RdmaServerInline, OneChunkTransfersRunInlineUpToTheLimit) {
  for (const std::string limit : {"8", "0"}) {
    SCOPED_TRACE("--rdma-inline-transfers-max " + limit);
    ServerProcess server({"--fabric", "libfabric:shm", "--rdma-op-timeout-ms", "3000",
                          "--rdma-inline-transfers-max", limit});
    ASSERT_FALSE(server.endpoint().empty()) << "server did not start";
    ASSERT_EQ(request(server, "PUT", "/bkt").status, 200);
    constexpr std::size_t small = 300 << 10, large = (9 << 20) + 7;
    auto c = ClientSide::open("libfabric:shm", large);
    if (!c) GTEST_SKIP() << "libfabric:shm unavailable";
    ASSERT_TRUE(c->bind(server));
    std::size_t expected_inline = 0;
    for (std::size_t n : {small, large}) {
      auto data = pattern(n, static_cast<int>(n % 251));
      std::copy(data.begin(), data.end(), c->buf.begin());
      auto r = request(
          server, "PUT", "/bkt/o" + std::to_string(n),
          {{"x-amz-rdma-token", c->token(n)}, {"x-amz-content-sha256", "UNSIGNED-PAYLOAD"}});
      ASSERT_EQ(r.status, 200) << r.body;
      EXPECT_EQ(header(r, "x-amz-rdma-reply"), "200");
      std::fill(c->buf.begin(), c->buf.end(), std::byte{0});
      r = request(server, "GET", "/bkt/o" + std::to_string(n), {{"x-amz-rdma-token", c->token(n)}});
      ASSERT_EQ(r.status, 200) << r.body;
      EXPECT_EQ(header(r, "x-amz-rdma-reply"), "200");
      EXPECT_TRUE(std::equal(data.begin(), data.end(), c->buf.begin()));
      if (n == small && limit != "0") expected_inline += 2;
      EXPECT_EQ(server.metric("objdirect_rdma_transfers_inline_total"),
                static_cast<double>(expected_inline))
          << n << " bytes";
    }
    EXPECT_EQ(server.metric("objdirect_rdma_buffers_in_use"), 0);
  }
}

// x-amz-rdma-target-progress: none (docs/rdma_protocol.md) is the server's word that its RDMA
// landed, and lands, without the client's polls: said over libfabric shm while CMA to peers works,
// on GETs and PUTs of every size; never over libfabric tcp, whose RMA the client's own progress
// carries out; and not over shm once the server's region says CMA is off (FI_SHM_DISABLE_CMA=1
// in the server's environment only), where its small writes wait for the client's poll.
TEST(RdmaServerTargetProgress, SaidOnlyWhereTheServersRmaNeedsNoClientPolls) {
  for (const bool cma_off : {false, true}) {
    SCOPED_TRACE(cma_off ? "server with FI_SHM_DISABLE_CMA=1" : "server with CMA");
    std::vector<std::pair<std::string, std::string>> env;
    if (cma_off) env.emplace_back("FI_SHM_DISABLE_CMA", "1");
    ServerProcess server(
        {"--fabric", "libfabric:tcp,libfabric:shm", "--rdma-op-timeout-ms", "3000"}, env);
    ASSERT_FALSE(server.endpoint().empty()) << "server did not start";
    ASSERT_EQ(request(server, "PUT", "/bkt").status, 200);
    for (const std::string fabric : {"libfabric:shm", "libfabric:tcp"}) {
      SCOPED_TRACE(fabric);
      constexpr std::size_t large = (1 << 20) + 3;
      auto c = ClientSide::open(fabric, large);
      if (!c) GTEST_SKIP() << fabric << " unavailable";
      ASSERT_TRUE(c->bind(server));
      const std::string expected = fabric == "libfabric:shm" && !cma_off ? "none" : "";
      for (const std::size_t n : {std::size_t{4096}, large}) {
        auto data = pattern(n, static_cast<std::uint32_t>(n));
        std::copy(data.begin(), data.end(), c->buf.begin());
        const std::string key = "/bkt/" + std::to_string(n);
        auto r = request(
            server, "PUT", key,
            {{"x-amz-rdma-token", c->token(n)}, {"x-amz-content-sha256", "UNSIGNED-PAYLOAD"}});
        ASSERT_EQ(r.status, 200) << r.body;
        EXPECT_EQ(header(r, "x-amz-rdma-reply"), "200");
        EXPECT_EQ(header(r, "x-amz-rdma-target-progress"), expected) << n << " bytes, PUT";
        std::fill(c->buf.begin(), c->buf.end(), std::byte{0});
        r = request(server, "GET", key, {{"x-amz-rdma-token", c->token(n)}});
        ASSERT_EQ(r.status, 200) << r.body;
        EXPECT_EQ(header(r, "x-amz-rdma-reply"), "200");
        EXPECT_EQ(header(r, "x-amz-rdma-target-progress"), expected) << n << " bytes, GET";
        EXPECT_TRUE(std::equal(data.begin(), data.end(), c->buf.begin()));
        // Never on a reply that moved nothing by RDMA.
        r = request(server, "GET", key);
        EXPECT_EQ(header(r, "x-amz-rdma-target-progress"), "");
      }
    }
  }
}

TEST_F(RdmaServerTest, PutChecksumIsVerifiedOverTheRdmaBytes) {
  auto c = ClientSide::open("libfabric:shm", 4096);
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->bind(*server_));
  auto r = request(*server_, "PUT", "/bkt/sum",
                   {{"x-amz-rdma-token", c->token(4096)},
                    {"x-amz-content-sha256", "UNSIGNED-PAYLOAD"},
                    {"x-amz-checksum-crc32c", "AAAAAA=="}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(s3_code(r), "BadDigest");
  EXPECT_EQ(request(*server_, "HEAD", "/bkt/sum").status, 404);
}

TEST_F(RdmaServerTest, ExpiredTokenIsRefusedAndNothingIsWritten) {
  auto c = ClientSide::open("libfabric:tcp", 4096);
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->bind(*server_));
  std::string expired = c->token(0, 4096, now_s() - 5);
  auto r = request(*server_, "PUT", "/bkt/exp",
                   {{"x-amz-rdma-token", expired}, {"x-amz-content-sha256", "UNSIGNED-PAYLOAD"}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(s3_code(r), "InvalidRDMAToken");
  EXPECT_EQ(header(r, "x-amz-rdma-reply"), "");
  EXPECT_EQ(request(*server_, "HEAD", "/bkt/exp").status, 404);
}

// A token that worked once is refused when replayed after its expiry, and moves nothing.
TEST_F(RdmaServerTest, TokenReplayAfterExpiryIsRefused) {
  auto data = pattern(4096, 21);
  ASSERT_EQ(request(*server_, "PUT", "/bkt/replay", {}, data).status, 200);
  auto c = ClientSide::open("libfabric:tcp", 4096);
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->bind(*server_));
  const std::string tok = c->token(0, 4096, now_s() + 2);
  auto r = request(*server_, "GET", "/bkt/replay", {{"x-amz-rdma-token", tok}});
  ASSERT_EQ(r.status, 200);
  ASSERT_EQ(header(r, "x-amz-rdma-reply"), "200");
  EXPECT_TRUE(c->buf == data);
  std::fill(c->buf.begin(), c->buf.end(), std::byte{0xAA});
  std::this_thread::sleep_for(3s);  // past expires_unix_s
  r = request(*server_, "GET", "/bkt/replay", {{"x-amz-rdma-token", tok}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(s3_code(r), "InvalidRDMAToken");
  for (auto b : c->buf) ASSERT_EQ(b, std::byte{0xAA}) << "a replayed expired token moved a byte";
  r = request(*server_, "PUT", "/bkt/replay2",
              {{"x-amz-rdma-token", tok}, {"x-amz-content-sha256", "UNSIGNED-PAYLOAD"}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(request(*server_, "HEAD", "/bkt/replay2").status, 404);
}

// Sends a GET of `target` signed over `signed_token` but carrying `sent_token`; returns the raw
// response (the request closes the connection).
std::string get_with_swapped_token(const ServerProcess& s, const std::string& target,
                                   const std::string& signed_token, const std::string& sent_token) {
  auto ep = client::parse_endpoint(s.endpoint());
  if (!ep.ok()) return {};
  const auto now = std::chrono::system_clock::now();
  const std::string date = amz_date(now);
  sigv4::RequestView v;
  v.method = "GET";
  v.target = target;
  v.headers = {{"host", ep->host_header},
               {"x-amz-content-sha256", std::string(sigv4::kEmptySha256)},
               {"x-amz-date", date},
               {"x-amz-rdma-token", signed_token}};
  const std::string auth = sigv4::sign(v, {kAk, kSk}, "us-east-1", "s3", now);
  const std::string req = "GET " + target + " HTTP/1.1\r\nhost: " + ep->host_header +
                          "\r\nx-amz-content-sha256: " + std::string(sigv4::kEmptySha256) +
                          "\r\nx-amz-date: " + date + "\r\nx-amz-rdma-token: " + sent_token +
                          "\r\nauthorization: " + auth + "\r\nconnection: close\r\n\r\n";
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(std::stoi(ep->port)));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size())) {
    char buf[4096];
    for (ssize_t n; (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;) out.append(buf, n);
  }
  ::close(fd);
  return out;
}

// The token is in SignedHeaders: widening its segment (a longer length, so more client memory
// would be exposed) after signing breaks the SigV4 signature, and no byte moves.
TEST_F(RdmaServerTest, WidenedTokenBreaksTheSignature) {
  auto data = pattern(8192, 22);
  ASSERT_EQ(request(*server_, "PUT", "/bkt/wide", {}, data).status, 200);
  auto c = ClientSide::open("libfabric:tcp", 8192);
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->bind(*server_));
  const std::string narrow = c->token(0, 4096, now_s() + 60);
  auto t = token::decode(narrow, now_s());
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  t->segments[0].length = 8192;
  t->total_length = 8192;
  const std::string wide = token::encode(*t);
  ASSERT_TRUE(token::decode(wide, now_s()).ok());
  ASSERT_NE(wide, narrow);

  std::string raw = get_with_swapped_token(*server_, "/bkt/wide", narrow, wide);
  EXPECT_EQ(raw.substr(0, 12), "HTTP/1.1 403") << raw.substr(0, 400);
  EXPECT_NE(raw.find("<Code>SignatureDoesNotMatch</Code>"), std::string::npos) << raw;
  for (auto b : c->buf) ASSERT_EQ(b, std::byte{0xAA}) << "a widened token moved a byte";

  // Control: the same request with the token it was signed over is served over RDMA, so the
  // refusal above is the signature's doing.
  raw = get_with_swapped_token(*server_, "/bkt/wide", wide, wide);
  EXPECT_EQ(raw.substr(0, 12), "HTTP/1.1 200") << raw.substr(0, 400);
  EXPECT_NE(raw.find("x-amz-rdma-reply: 200"), std::string::npos) << raw.substr(0, 600);
  EXPECT_TRUE(c->buf == data);
}

TEST_F(RdmaServerTest, TokenShorterThanTheObjectIsRefusedBeforeAnyByteMoves) {
  auto data = pattern(8192, 3);
  ASSERT_EQ(request(*server_, "PUT", "/bkt/big", {}, data).status, 200);
  auto c = ClientSide::open("libfabric:tcp", 8192);
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->bind(*server_));
  auto r = request(*server_, "GET", "/bkt/big", {{"x-amz-rdma-token", c->token(4096)}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(s3_code(r), "InvalidRDMAToken");
  for (auto b : c->buf) ASSERT_EQ(b, std::byte{0xAA}) << "a byte moved";
}

TEST_F(RdmaServerTest, OversizedTokenIsRefused) {
  std::string big = "OD1." + std::string(limits::token_bytes_max + 10, 'A');
  auto r = request(*server_, "PUT", "/bkt/x",
                   {{"x-amz-rdma-token", big}, {"x-amz-content-sha256", "UNSIGNED-PAYLOAD"}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(s3_code(r), "InvalidRDMAToken");
  EXPECT_EQ(request(*server_, "HEAD", "/bkt/x").status, 404);
}

TEST_F(RdmaServerTest, TokenForATransportTheServerLacksIsDeclined) {
  // The server runs libfabric tcp and shm only: a UCX token is declined with 501.
  auto c = ClientSide::open("ucx", 4096);
  ASSERT_TRUE(c);
  auto data = pattern(4096, 4);
  ASSERT_EQ(request(*server_, "PUT", "/bkt/d", {}, data).status, 200);
  std::vector<std::byte> body(4096);
  auto r = request(*server_, "GET", "/bkt/d", {{"x-amz-rdma-token", c->token(4096)}}, {},
                   std::span(body));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(header(r, "x-amz-rdma-reply"), "501");
  EXPECT_TRUE(body == data) << "a declined GET serves the body over HTTP";
  r = request(*server_, "PUT", "/bkt/d2",
              {{"x-amz-rdma-token", c->token(4096)}, {"x-amz-content-sha256", "UNSIGNED-PAYLOAD"}});
  EXPECT_EQ(r.status, 501);
  EXPECT_EQ(header(r, "x-amz-rdma-reply"), "501");
  EXPECT_EQ(request(*server_, "HEAD", "/bkt/d2").status, 404) << "never a 0-byte object";
  EXPECT_GE(server_->metric("objdirect_rdma_declines_total{reason=\"no-matching-transport\"}"), 2);
}

TEST(RdmaServerFallback, FabricNoneDeclinesGetWithBodyAndPutWithoutStoring) {
  ServerProcess s({"--fabric", "none"});
  ASSERT_FALSE(s.endpoint().empty());
  ASSERT_EQ(request(s, "PUT", "/bkt").status, 200);
  auto data = pattern(100000, 5);
  ASSERT_EQ(request(s, "PUT", "/bkt/o", {}, data).status, 200);
  auto c = ClientSide::open("libfabric:tcp", data.size());
  ASSERT_TRUE(c);
  std::vector<std::byte> body(data.size());
  auto r = request(s, "GET", "/bkt/o", {{"x-amz-rdma-token", c->token(data.size())}}, {},
                   std::span(body));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(header(r, "x-amz-rdma-reply"), "501");
  EXPECT_TRUE(body == data);
  r = request(
      s, "PUT", "/bkt/p",
      {{"x-amz-rdma-token", c->token(data.size())}, {"x-amz-content-sha256", "UNSIGNED-PAYLOAD"}});
  EXPECT_EQ(r.status, 501);
  EXPECT_EQ(header(r, "x-amz-rdma-reply"), "501");
  EXPECT_EQ(request(s, "HEAD", "/bkt/p").status, 404);
}

// Gateway mode only (scripts/with-upstream.sh sets OBJDIRECT_UPSTREAM_URL and the upstream's
// credentials): the object is replaced upstream, directly, while a long RDMA GET through the
// gateway is streaming it. The gateway pins the ETag it opened (If-Match on every ranged GET),
// so the GET fails with 412 PreconditionFailed; the client buffer never holds a byte of the new
// version (each 8-byte word is either the old version's or untouched).
TEST_F(RdmaServerTest, GatewayUpstreamOverwriteDuringGetFailsNeverMixes) {
  const char* up = std::getenv("OBJDIRECT_UPSTREAM_URL");
  const char* ak = std::getenv("AWS_ACCESS_KEY_ID");
  const char* sk = std::getenv("AWS_SECRET_ACCESS_KEY");
  if (!up || !ak || !sk) GTEST_SKIP() << "gateway mode only (scripts/with-upstream.sh)";
  client::HttpOptions uo;
  uo.endpoint = *client::parse_endpoint(up);
  uo.credentials = {ak, sk};
  uo.region = "us-east-1";
  client::HttpClient upstream(uo);
  auto up_request = [&](const std::string& method, const std::string& path,
                        std::span<const std::byte> body = {}) {
    client::HttpRequest r;
    r.method = method;
    r.target = path;
    r.body = body;
    r.send_content_length = method == "PUT" || method == "POST";
    auto res = upstream.execute(r, std::nullopt);
    EXPECT_TRUE(res.ok()) << res.status().to_string();
    return res.ok() ? *res : client::HttpResponse{};
  };
  constexpr std::size_t part = 32 << 20, parts = 4, n = part * parts;
  const auto v1 = pattern(n, 31), v2 = pattern(n, 32);
  // The new version is staged upstream as a multipart upload whose Complete (no data copied)
  // then lands in the middle of the GET.
  auto stage = [&](const std::vector<std::byte>& v) {
    auto r = up_request("POST", "/bkt/big?uploads");
    std::string id = xml_value(r.body, "UploadId");
    std::string xml = "<CompleteMultipartUpload>";
    for (std::size_t i = 0; i < parts; ++i) {
      r = up_request("PUT", "/bkt/big?partNumber=" + std::to_string(i + 1) + "&uploadId=" + id,
                     std::span(v).subspan(i * part, part));
      xml += "<Part><PartNumber>" + std::to_string(i + 1) + "</PartNumber><ETag>" +
             header(r, "etag") + "</ETag></Part>";
    }
    return std::make_pair(id, xml + "</CompleteMultipartUpload>");
  };
  // Completes a staged upload; returns the new object's ETag (unquoted).
  auto complete = [&](const std::pair<std::string, std::string>& staged) {
    auto r = up_request("POST", "/bkt/big?uploadId=" + staged.first,
                        std::as_bytes(std::span(staged.second)));
    EXPECT_EQ(r.status, 200) << r.body;
    std::string etag = xml_value(r.body, "ETag");
    std::erase(etag, '"');
    return etag;
  };
  auto c = ClientSide::open("libfabric:tcp", n);
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->bind(*server_));
  bool saw_412 = false;
  for (int attempt = 0; attempt < 3 && !saw_412; ++attempt) {
    const std::string e1 = complete(stage(v1));
    auto next = stage(v2);
    std::fill(c->buf.begin(), c->buf.end(), std::byte{0});
    client::HttpResponse got;
    const double gets_before = server_->metric("objdirect_upstream_get_requests_total");
    std::thread get([&] {
      got = request(*server_, "GET", "/bkt/big", {{"x-amz-rdma-token", c->token(n)}});
    });
    // Overwrite once the gateway has opened the object and started reading it.
    const auto give_up = std::chrono::steady_clock::now() + 5s;
    while (server_->metric("objdirect_upstream_get_requests_total") <= gets_before &&
           std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(1ms);
    }
    const std::string e2 = complete(next);
    get.join();
    std::string served = header(got, "etag");
    std::erase(served, '"');
    // Word by word: the old version's bytes or untouched zeros, never the new version's.
    auto foreign_words = [&](const std::vector<std::byte>& v) {
      std::size_t foreign = 0;
      static const std::byte zeros[8] = {};
      for (std::size_t i = 0; i + 8 <= n; i += 8) {
        if (std::memcmp(c->buf.data() + i, v.data() + i, 8) == 0) continue;
        if (std::memcmp(c->buf.data() + i, zeros, 8) != 0) ++foreign;
      }
      return foreign;
    };
    if (got.status == 412) {
      EXPECT_EQ(s3_code(got), "PreconditionFailed") << got.body;
      EXPECT_NE(got.body.find("changed upstream"), std::string::npos) << got.body;
      EXPECT_EQ(header(got, "x-amz-rdma-reply"), "");
      EXPECT_EQ(foreign_words(v1), 0u) << "bytes of the new version in a failed GET's buffer";
      saw_412 = true;
    } else if (got.status == 200) {
      // The GET ran entirely before or entirely after the overwrite: one whole version, the
      // one its ETag names.
      EXPECT_EQ(header(got, "x-amz-rdma-reply"), "200");
      ASSERT_TRUE(served == e1 || served == e2) << served << " is neither " << e1 << " nor " << e2;
      const auto& want = served == e1 ? v1 : v2;
      EXPECT_TRUE(std::equal(want.begin(), want.end(), c->buf.begin()))
          << "a 200 RDMA GET must deliver exactly the version its ETag names";
      std::printf("attempt %d: the GET served %s whole\n", attempt,
                  served == e1 ? "the old version" : "the new version");
    } else {
      // Any other failure (e.g. an RDMA operation timing out on an overloaded machine) is an
      // error reply too; try again.
      std::printf("attempt %d: HTTP %d %s\n", attempt, got.status, got.body.c_str());
      EXPECT_EQ(header(got, "x-amz-rdma-reply"), "");
    }
  }
  EXPECT_TRUE(saw_412) << "the overwrite never landed during a GET in 3 attempts";
  EXPECT_EQ(server_->metric("objdirect_rdma_buffers_in_use"), 0);
}

TEST(RdmaServerAdmission, NoStagingBudgetAnswersSlowDown) {
  ServerProcess s({"--fabric", "libfabric:tcp", "--rdma-inflight-bytes-max", "1"});
  ASSERT_FALSE(s.endpoint().empty());
  ASSERT_EQ(request(s, "PUT", "/bkt").status, 200);
  auto data = pattern(10000, 6);
  ASSERT_EQ(request(s, "PUT", "/bkt/o", {}, data).status, 200);
  auto c = ClientSide::open("libfabric:tcp", data.size());
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->bind(s));
  auto r = request(s, "GET", "/bkt/o", {{"x-amz-rdma-token", c->token(data.size())}});
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(s3_code(r), "SlowDown");
  EXPECT_EQ(header(r, "retry-after"), "1");
  EXPECT_GE(s.metric("objdirect_rdma_admissions_refused_total"), 1);
  EXPECT_EQ(s.metric("objdirect_rdma_buffers_in_use"), 0);
}

// A client that registers memory, sends an RDMA request and then neither progresses its
// transport nor reads the reply; the test kills it while the server's transfer is stalled on it.
void stalled_client(const std::string& endpoint, const std::string& method, std::size_t bytes) {
  auto c = ClientSide::open("libfabric:tcp", bytes, /*progress_thread=*/false);
  if (!c) _exit(3);
  client::HttpOptions o;
  o.endpoint = *client::parse_endpoint(endpoint);
  o.credentials = {kAk, kSk};
  o.region = "us-east-1";
  client::HttpClient http(o);
  {
    // Binding needs the server's read of our mailbox to progress: poll by hand meanwhile.
    std::atomic<bool> done{false};
    std::thread poll([&] {
      while (!done) c->tr->progress();
    });
    const bool bound = c->bind_via([&](const std::string& tok) {
      client::HttpRequest b{"POST", "/?rdma-bind", {{"x-amz-rdma-token", tok}}, {}, true};
      auto res = http.execute(b);
      return res.ok() ? *res : client::HttpResponse{};
    });
    done = true;
    poll.join();
    if (!bound) _exit(4);
  }
  client::HttpRequest r;
  r.method = method;
  r.target = method == "GET" ? "/bkt/victim" : "/bkt/uploaded";
  r.headers = {{"x-amz-rdma-token", c->token(bytes)}, {"x-amz-content-sha256", "UNSIGNED-PAYLOAD"}};
  r.send_content_length = method == "PUT";
  (void)http.execute(r);
  _exit(0);
}

class ClientDeathTest : public RdmaServerTest, public ::testing::WithParamInterface<const char*> {};

TEST_P(ClientDeathTest, KilledClientFreesServerBuffersAndServerKeepsServing) {
  const std::string method = GetParam();
  constexpr std::size_t n = 64 << 20;
  auto data = pattern(n, 7);
  ASSERT_EQ(request(*server_, "PUT", "/bkt/victim", {}, data).status, 200);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) stalled_client(server_->endpoint(), method, n);
  // Wait until the server is mid-transfer, then kill the client.
  bool active = false;
  for (int i = 0; i < 200 && !active; ++i) {
    active = server_->metric("objdirect_rdma_transfers_active") >= 1;
    if (!active) std::this_thread::sleep_for(50ms);
  }
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  EXPECT_TRUE(active) << "the transfer never started";
  // The server notices (connection loss or the 3 s operation timeout) and frees everything.
  bool freed = false;
  for (int i = 0; i < 300 && !freed; ++i) {
    freed = server_->metric("objdirect_rdma_transfers_active") == 0 &&
            server_->metric("objdirect_rdma_buffers_in_use") == 0 &&
            server_->metric("objdirect_rdma_inflight_bytes") == 0;
    if (!freed) std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(freed);
  EXPECT_GE(server_->metric("objdirect_rdma_transfers_failed_total"), 1);
  EXPECT_TRUE(server_->alive());
  // No partial object from the dead PUT; the old object is intact and the server still serves.
  if (method == "PUT") {
    EXPECT_EQ(request(*server_, "HEAD", "/bkt/uploaded").status, 404);
  }
  std::vector<std::byte> back(n);
  auto r = request(*server_, "GET", "/bkt/victim", {}, {}, std::span(back));
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(back == data);
  // And RDMA still works for a healthy client.
  auto c = ClientSide::open("libfabric:tcp", 4096);
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->bind(*server_));
  ASSERT_EQ(request(*server_, "PUT", "/bkt/small", {}, std::span(data.data(), 4096)).status, 200);
  r = request(*server_, "GET", "/bkt/small", {{"x-amz-rdma-token", c->token(4096)}});
  EXPECT_EQ(header(r, "x-amz-rdma-reply"), "200");
  EXPECT_TRUE(std::equal(data.begin(), data.begin() + 4096, c->buf.begin()));
}

INSTANTIATE_TEST_SUITE_P(Methods, ClientDeathTest, ::testing::Values("GET", "PUT"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace objdirect
