// libobjdirect and the objdirect CLI against a real objdirect-server on a loopback port, each in
// its own process. Every transferred byte is compared.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "client/fabric_choice.hpp"
#include "client/http_client.hpp"
#include "client/rdma.hpp"
#include "objdirect/client.hpp"
#include "test_server.hpp"
#include "token/fabric_advert.hpp"

namespace objdirect {
namespace {

namespace fs = std::filesystem;

constexpr const char* kAccessKey = "clientAK";
constexpr const char* kSecretKey = "clientSecretKey123";

using test_server::Server;
using test_server::stop_server;

// The server process, shared by every test of the binary.
Server* g_server = nullptr;

std::vector<std::byte> pattern(std::size_t n, std::uint32_t seed) {
  std::vector<std::byte> v(n);
  std::mt19937_64 rng(seed);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t x = rng();
    std::memcpy(v.data() + i, &x, 8);
  }
  for (; i < n; ++i) v[i] = static_cast<std::byte>(rng());
  return v;
}

// objdirect-server on a free loopback port (extra arguments appended; test_server.hpp);
// OBJDIRECT_TEST_SERVER_BIN / OBJDIRECT_TEST_SERVER_ARGS replace the binary and add arguments.
Server* start_server(const std::string& name, std::vector<std::string> extra) {
  return test_server::start_server({.dir_prefix = "od-client-it",
                                    .access_key = kAccessKey,
                                    .secret_key = kSecretKey,
                                    .from_environment = true},
                                   name, std::move(extra));
}

// The server with its default data plane (every fabric that opens here), shared by all tests.
class ServerEnvironment : public ::testing::Environment {
 public:
  void SetUp() override { g_server = start_server("main", {}); }
  void TearDown() override { stop_server(g_server); }
};

ClientConfig base_config(std::string fabric = "none", const Server* server = nullptr) {
  ClientConfig c;
  c.endpoint = (server ? server : g_server)->endpoint;
  c.access_key = kAccessKey;
  c.secret_key = kSecretKey;
  c.fabric = std::move(fabric);
  return c;
}

std::unique_ptr<Client> make(ClientConfig c) {
  auto r = Client::create(std::move(c));
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? std::move(*r) : nullptr;
}

class ClientIT : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(g_server, nullptr);
    client_ = make(base_config());
    ASSERT_TRUE(client_);
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    bucket_ = "it-" + std::to_string(counter_++) + "-" + std::to_string(getpid());
    (void)info;
    ASSERT_TRUE(client_->create_bucket(bucket_).ok());
  }

  // Round trip through put and get, every byte compared; returns the results.
  void round_trip(Client& c, std::size_t n, TransferResult* put_out = nullptr,
                  TransferResult* get_out = nullptr) {
    auto src = pattern(n, static_cast<std::uint32_t>(n + 1));
    std::string key = "obj/" + std::to_string(n);
    auto p = c.put(bucket_, key, src);
    ASSERT_TRUE(p.ok()) << n << ": " << p.status().to_string();
    EXPECT_EQ(p->bytes, n);
    EXPECT_FALSE(p->etag.empty());
    auto h = c.head(bucket_, key);
    ASSERT_TRUE(h.ok()) << h.status().to_string();
    EXPECT_EQ(h->size, n) << "the stored object has the wrong size";
    EXPECT_EQ(h->etag, p->etag);
    std::vector<std::byte> dst(n + 3, std::byte{0x5a});
    auto g = c.get(bucket_, key, dst);
    ASSERT_TRUE(g.ok()) << n << ": " << g.status().to_string();
    EXPECT_EQ(g->bytes, n);
    EXPECT_EQ(g->object_size, n);
    EXPECT_EQ(g->etag, p->etag);
    EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin())) << "content differs at size " << n;
    EXPECT_EQ(dst[n], std::byte{0x5a}) << "wrote past the object";
    if (put_out) *put_out = *p;
    if (get_out) *get_out = *g;
  }

  static inline int counter_ = 0;
  std::unique_ptr<Client> client_;
  std::string bucket_;
};

TEST_F(ClientIT, RoundTripSizesOverHttp) {
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{4096},
                        std::size_t{(1 << 20) + 1}, std::size_t{64u << 20}}) {
    TransferResult p, g;
    round_trip(*client_, n, &p, &g);
    EXPECT_EQ(p.path, TransferPath::http);
    EXPECT_EQ(g.path, TransferPath::http);
    EXPECT_EQ(g.reason, n == 0 ? g.reason : std::string("fabric none"));
  }
}

TEST_F(ClientIT, MultipartAndRangedPartsWithSmallPartSize) {
  auto cfg = base_config();
  cfg.part_size_bytes = 1 << 20;  // uploads raise this to 5 MiB; downloads use 1 MiB ranges
  cfg.concurrency = 4;
  auto c = make(cfg);
  TransferResult p, g;
  round_trip(*c, (11u << 20) + 5, &p, &g);
  EXPECT_NE(p.etag.find("-3"), std::string::npos) << "expected a 3-part upload, etag " << p.etag;
  EXPECT_EQ(g.requests, 12u);             // first range + 11 pinned ranges
  round_trip(*c, (1 << 20) + 1, &p, &g);  // boundary: part_size + 1
  EXPECT_EQ(g.requests, 2u);
  round_trip(*c, 1 << 20, &p, &g);  // boundary: exactly part_size
  EXPECT_EQ(g.requests, 1u);
  EXPECT_EQ(p.etag.find('-'), std::string::npos);
}

// PutOptions: the Content-Type and x-amz-meta-* reach the object by a single PUT and by a
// multipart upload (on its CreateMultipartUpload), and HEAD returns them; an object put without
// options has neither.
TEST_F(ClientIT, PutOptionsSetContentTypeAndMetadata) {
  auto cfg = base_config();
  cfg.part_size_bytes = 5u << 20;
  auto c = make(cfg);
  PutOptions o;
  o.content_type = "text/x-objdirect";
  o.metadata = {{"Owner", "alice"}, {"note", "a=b, c"}};
  const auto small = pattern(100, 1), big = pattern((6u << 20) + 1, 2);
  ASSERT_TRUE(c->put(bucket_, "small", small, o).ok());
  auto p = c->put(bucket_, "big", big, o);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_NE(p->etag.find("-2"), std::string::npos) << p->etag;
  for (const char* key : {"small", "big"}) {
    auto h = c->head(bucket_, key);
    ASSERT_TRUE(h.ok()) << h.status().to_string();
    EXPECT_EQ(h->content_type, "text/x-objdirect") << key;
    EXPECT_EQ(h->metadata,
              (std::map<std::string, std::string>{{"owner", "alice"}, {"note", "a=b, c"}}))
        << key;
  }
  ASSERT_TRUE(c->put(bucket_, "plain", small).ok());
  auto h = c->head(bucket_, "plain");
  ASSERT_TRUE(h.ok());
  EXPECT_TRUE(h->metadata.empty());
  o.metadata = {{"bad name", "x"}};
  EXPECT_EQ(c->put(bucket_, "refused", small, o).code(), Errc::invalid_argument);
  EXPECT_EQ(c->head(bucket_, "refused").code(), Errc::no_such_key);
}

// Server-side copies: one CopyObject below the threshold, UploadPartCopy parts above it (the
// threshold lowered so that a small object takes the multipart path); no byte through the client.
TEST_F(ClientIT, CopyObjectAndUploadPartCopy) {
  auto src = pattern((11u << 20) + 7, 5);
  ASSERT_TRUE(client_->put(bucket_, "copy-src", src).ok());
  auto one = client_->copy(bucket_, "copy-src", bucket_, "copy-one");
  ASSERT_TRUE(one.ok()) << one.status().to_string();
  EXPECT_EQ(one->bytes, src.size());
  EXPECT_EQ(one->requests, 2u);  // HEAD + CopyObject
  EXPECT_EQ(one->etag.find('-'), std::string::npos) << one->etag;

  auto cfg = base_config();
  cfg.copy_multipart_threshold_bytes = 5u << 20;
  cfg.part_size_bytes = 5u << 20;
  auto c = make(cfg);
  auto parts = c->copy(bucket_, "copy-src", bucket_, "copy-parts");
  ASSERT_TRUE(parts.ok()) << parts.status().to_string();
  EXPECT_EQ(parts->etag.substr(parts->etag.size() - 2), "-3") << parts->etag;
  EXPECT_EQ(parts->requests, 1u + 1 + 3 + 1);  // HEAD, create, 3 UploadPartCopy, complete
  for (const char* key : {"copy-one", "copy-parts"}) {
    std::vector<std::byte> got(src.size());
    auto r = client_->get(bucket_, key, got);
    ASSERT_TRUE(r.ok()) << key;
    EXPECT_EQ(r->bytes, src.size());
    EXPECT_TRUE(got == src) << key;
  }
  EXPECT_EQ(c->copy(bucket_, "missing", bucket_, "x").code(), Errc::no_such_key);
  EXPECT_EQ(c->copy(bucket_, "copy-src", "no-such-bucket-copy", "x").code(), Errc::no_such_bucket);
  cfg.copy_multipart_threshold_bytes = (5ull << 30) + 1;  // above S3's CopyObject limit
  EXPECT_EQ(make(cfg)->copy(bucket_, "copy-src", bucket_, "x").code(), Errc::invalid_argument);
  std::vector<std::string> keys = {"copy-src", "copy-one", "copy-parts", "never-was"};
  auto del = client_->delete_objects(bucket_, keys);
  ASSERT_TRUE(del.ok());
  EXPECT_TRUE(del->empty());
  EXPECT_EQ(client_->head(bucket_, "copy-parts").code(), Errc::no_such_key);
}

TEST_F(ClientIT, RangeGets) {
  const std::size_t n = (3u << 20) + 11;
  auto src = pattern(n, 7);
  ASSERT_TRUE(client_->put(bucket_, "r", src).ok());
  auto cfg = base_config();
  cfg.part_size_bytes = 1 << 20;
  auto c = make(cfg);
  struct Case {
    std::uint64_t off, len, want;
  } cases[] = {{0, 1, 1},         {5, 100, 100}, {1 << 20, (2u << 20) + 3, (2u << 20) + 3},
               {n - 10, 100, 10}, {n - 1, 1, 1}, {17, n, n - 17}};
  for (const auto& k : cases) {
    std::vector<std::byte> dst(k.len);
    auto g = c->get(bucket_, "r", dst, ByteRange{k.off, k.len});
    ASSERT_TRUE(g.ok()) << k.off << "+" << k.len << ": " << g.status().to_string();
    EXPECT_EQ(g->bytes, k.want);
    EXPECT_EQ(g->object_size, n);
    EXPECT_TRUE(std::equal(dst.begin(), dst.begin() + static_cast<std::ptrdiff_t>(k.want),
                           src.begin() + static_cast<std::ptrdiff_t>(k.off)))
        << k.off << "+" << k.len;
  }
  std::vector<std::byte> dst(10);
  EXPECT_EQ(c->get(bucket_, "r", dst, ByteRange{n, 10}).code(), Errc::invalid_range);
  EXPECT_EQ(c->get(bucket_, "r", dst, ByteRange{0, 11}).code(), Errc::invalid_argument);
}

TEST_F(ClientIT, ErrorsMapToCodes) {
  std::vector<std::byte> dst(16);
  EXPECT_EQ(client_->get(bucket_, "missing", dst).code(), Errc::no_such_key);
  EXPECT_EQ(client_->get("no-such-bucket-x", "k", dst).code(), Errc::no_such_bucket);
  EXPECT_EQ(client_->head(bucket_, "missing").code(), Errc::no_such_key);
  auto src = pattern(100, 1);
  ASSERT_TRUE(client_->put(bucket_, "k", src).ok());
  EXPECT_EQ(client_->get(bucket_, "k", std::span(dst)).code(), Errc::invalid_argument);
  EXPECT_EQ(client_->delete_bucket(bucket_).code(), Errc::bucket_not_empty);
  // us-east-1 (the test server's region): AWS answers the owner's re-create with 200 and keeps
  // the bucket as it is (test_s3_buckets.py covers the 409 of other regions).
  EXPECT_TRUE(client_->create_bucket(bucket_).ok());

  auto bad = base_config();
  bad.secret_key = "wrong";
  auto b = make(bad);
  EXPECT_EQ(b->head(bucket_, "k").code(), Errc::access_denied);
  EXPECT_EQ(b->put(bucket_, "k2", src).code(), Errc::signature_does_not_match);

  auto off = base_config();
  off.endpoint = "http://127.0.0.1:1";
  EXPECT_EQ(make(off)->head(bucket_, "k").code(), Errc::unavailable);
}

TEST_F(ClientIT, ListDeleteAndBuckets) {
  auto src = pattern(10, 2);
  for (const char* k : {"a/1", "a/2", "a/b/3", "c", "d e+f"}) {
    ASSERT_TRUE(client_->put(bucket_, k, src).ok()) << k;
  }
  ListOptions lo;
  lo.delimiter = "/";
  auto page = client_->list(bucket_, lo);
  ASSERT_TRUE(page.ok()) << page.status().to_string();
  ASSERT_EQ(page->common_prefixes, std::vector<std::string>{"a/"});
  ASSERT_EQ(page->objects.size(), 2u);
  EXPECT_EQ(page->objects[0].key, "c");
  EXPECT_EQ(page->objects[1].key, "d e+f");
  EXPECT_EQ(page->objects[1].size, 10u);

  ListOptions paged;
  paged.prefix = "a/";
  paged.max_keys = 2;
  std::vector<std::string> keys;
  for (int guard = 0; guard < 10; ++guard) {
    auto p = client_->list(bucket_, paged);
    ASSERT_TRUE(p.ok());
    for (const auto& e : p->objects) keys.push_back(e.key);
    if (!p->is_truncated) break;
    paged.continuation_token = p->next_continuation_token;
  }
  EXPECT_EQ(keys, (std::vector<std::string>{"a/1", "a/2", "a/b/3"}));

  auto buckets = client_->list_buckets();
  ASSERT_TRUE(buckets.ok());
  EXPECT_NE(std::find(buckets->begin(), buckets->end(), bucket_), buckets->end());

  for (const char* k : {"a/1", "a/2", "a/b/3", "c", "d e+f"}) {
    ASSERT_TRUE(client_->delete_object(bucket_, k).ok()) << k;
  }
  EXPECT_TRUE(client_->delete_object(bucket_, "never-existed").ok());
  EXPECT_TRUE(client_->delete_bucket(bucket_).ok());
  EXPECT_EQ(client_->delete_bucket(bucket_).code(), Errc::no_such_bucket);
  ASSERT_TRUE(client_->create_bucket(bucket_).ok());
}

TEST_F(ClientIT, AsyncBatchAndRegisteredMemory) {
  const std::size_t n = 300'000;
  std::vector<std::vector<std::byte>> srcs;
  std::vector<PutRequest> puts;
  for (int i = 0; i < 6; ++i)
    srcs.push_back(pattern(n + static_cast<std::size_t>(i), static_cast<std::uint32_t>(i)));
  for (int i = 0; i < 6; ++i)
    puts.push_back({bucket_, "batch/" + std::to_string(i), srcs[static_cast<std::size_t>(i)]});
  auto pr = client_->put_many(puts);
  for (auto& r : pr) ASSERT_TRUE(r.ok()) << r.status().to_string();

  std::vector<std::byte> big(6 * (n + 8));
  auto h = client_->register_memory(big.data(), big.size());
  ASSERT_TRUE(h.ok());
  std::vector<GetRequest> gets;
  for (int i = 0; i < 6; ++i) {
    gets.push_back({bucket_, "batch/" + std::to_string(i),
                    h->span().subspan(static_cast<std::size_t>(i) * (n + 8), n + 8), std::nullopt});
  }
  auto gr = client_->get_many(gets);
  for (int i = 0; i < 6; ++i) {
    const auto& s = srcs[static_cast<std::size_t>(i)];
    ASSERT_TRUE(gr[static_cast<std::size_t>(i)].ok());
    EXPECT_EQ(gr[static_cast<std::size_t>(i)]->bytes, s.size());
    EXPECT_TRUE(
        std::equal(s.begin(), s.end(), big.begin() + i * static_cast<std::ptrdiff_t>(n + 8)));
  }
  // if_match pins an item to one ETag: the right one reads, a stale one is precondition_failed,
  // and a missing key fails only its own item.
  std::vector<std::byte> a(100), b(100), c(100);
  std::vector<GetRequest> pinned = {
      {bucket_, "batch/1", a, ByteRange{10, 100}, gr[1]->etag},
      {bucket_, "batch/1", b, ByteRange{10, 100}, "0123456789abcdef0123456789abcdef"},
      {bucket_, "batch/absent", c, std::nullopt, ""}};
  auto pr2 = client_->get_many(pinned);
  ASSERT_TRUE(pr2[0].ok()) << pr2[0].status().to_string();
  EXPECT_TRUE(std::equal(a.begin(), a.end(), srcs[1].begin() + 10));
  EXPECT_EQ(pr2[1].code(), Errc::precondition_failed);
  EXPECT_EQ(pr2[2].code(), Errc::no_such_key);
  std::vector<std::byte> one(n + 2);
  auto f = client_->get_async(bucket_, "batch/2", one);
  auto r = f.get();
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(std::equal(srcs[2].begin(), srcs[2].end(), one.begin()));
  auto fp = client_->put_async(bucket_, "async", srcs[0]);
  ASSERT_TRUE(fp.get().ok());
  EXPECT_EQ(client_->head(bucket_, "async")->size, srcs[0].size());
}

// What the server advertises in x-amz-rdma-fabrics (empty when it sends nothing).
std::string offered_fabrics(const Server& server) {
  client::HttpOptions o;
  o.endpoint = *client::parse_endpoint(server.endpoint);
  o.credentials = {kAccessKey, kSecretKey};
  o.region = "us-east-1";
  client::HttpClient http(o);
  auto r = http.execute(client::HttpRequest{"GET", "/?rdma-capabilities", {}, {}, false});
  if (!r.ok()) return {};
  return std::string(r->header("x-amz-rdma-fabrics").value_or(""));
}

// The advertisement the real server formats is what the client's parser accepts: every fabric it
// names, and its kernel's id, which is this process's (token/fabric_advert.hpp).
TEST_F(ClientIT, ServerFabricAdvertisementParses) {
  client::HttpOptions o;
  o.endpoint = *client::parse_endpoint(g_server->endpoint);
  o.credentials = {kAccessKey, kSecretKey};
  o.region = "us-east-1";
  client::HttpClient http(o);
  auto r = http.execute(client::HttpRequest{"GET", "/?rdma-capabilities", {}, {}, false});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  auto fabrics = r->header("x-amz-rdma-fabrics");
  ASSERT_TRUE(fabrics.has_value()) << "the default server offers no fabric";
  auto names = token::parse_fabric_advert(*fabrics);
  ASSERT_TRUE(names.ok()) << names.status().to_string();
  EXPECT_FALSE(names->empty());
  EXPECT_EQ(token::format_fabric_advert(*names), *fabrics);  // the server sends canonical form
  auto parsed = client::parse_server_fabrics(fabrics, r->header("x-amz-rdma-host-id"));
  EXPECT_TRUE(parsed.fabrics_error.empty() && parsed.host_id_error.empty())
      << parsed.fabrics_error << parsed.host_id_error;
  EXPECT_EQ(parsed.offered, *names);
  ASSERT_FALSE(client::own_host_id().empty());
  EXPECT_EQ(parsed.host_id, client::own_host_id());
  EXPECT_TRUE(client::same_host(parsed, client::own_host_id(), false));
}

// Each fabric against the server's default data plane: the bytes arrive intact, a PUT never
// leaves a 0-byte object, and the path says what happened. Where the server offers the fabric
// the transfer must be RDMA; otherwise it must fall back with a reason.
class ClientFabricIT : public ClientIT, public ::testing::WithParamInterface<const char*> {};

TEST_P(ClientFabricIT, RoundTripOverFabric) {
  const std::string offered = offered_fabrics(*g_server);
  const std::string fabric = GetParam();
  const bool expect_rdma =
      fabric == "auto" ? !offered.empty() : offered.find(fabric) != std::string::npos;
  auto c = make(base_config(fabric));
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{4096},
                        std::size_t{(1 << 20) + 1}, std::size_t{64u << 20}}) {
    TransferResult p, g;
    round_trip(*c, n, &p, &g);
    if (n == 0) {
      EXPECT_EQ(p.path, TransferPath::http);  // nothing to move: no token
      EXPECT_EQ(p.reason, "empty transfer");
    }
    // fabric "auto" sends requests below the crossover over plain HTTP (uploads cross over
    // lower); a fabric named explicitly is used at every size.
    const ClientConfig d;
    for (const auto* r : {&p, &g}) {
      const std::uint64_t min =
          r == &p ? std::min(d.rdma_min_bytes, d.rdma_put_min_bytes) : d.rdma_min_bytes;
      const bool below = fabric == "auto" && n < min;
      if (expect_rdma && n > 0 && !below) {
        EXPECT_EQ(r->path, TransferPath::rdma) << fabric << " " << n << ": " << r->reason;
      }
      if (below && n > 0) {
        EXPECT_EQ(r->path, TransferPath::http) << n;
        EXPECT_TRUE(
            r->reason.starts_with(r == &p ? "below rdma_put_min_bytes" : "below rdma_min_bytes"))
            << r->reason;
      }
      if (r->path == TransferPath::rdma) {
        EXPECT_TRUE(r->reason.empty()) << r->reason;
        EXPECT_FALSE(r->fabric.empty());
      } else {
        EXPECT_FALSE(r->reason.empty()) << "a non-RDMA transfer must say why";
      }
    }
    std::printf("[fabric %s, server offers '%s'] %zu bytes: put %s %s (%s) get %s %s (%s)\n",
                fabric.c_str(), offered.c_str(), n, std::string(path_name(p.path)).c_str(),
                p.fabric.c_str(), p.reason.c_str(), std::string(path_name(g.path)).c_str(),
                g.fabric.c_str(), g.reason.c_str());
  }
  // Ranged parts into one registered buffer.
  const std::size_t n = (5u << 20) + 3;
  auto src = pattern(n, 5);
  ASSERT_TRUE(c->put(bucket_, "ranged", src).ok());
  std::vector<std::byte> dst(n);
  auto h = c->register_memory(dst.data(), dst.size());
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  auto cfg = base_config(fabric);
  cfg.part_size_bytes = 1 << 20;
  cfg.rdma_min_bytes = 0;  // the last, short part over the fabric too (not the crossover here)
  auto small = make(cfg);
  auto g = small->get(bucket_, "ranged", dst, ByteRange{7, n - 7});
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(g->bytes, n - 7);
  EXPECT_TRUE(std::equal(src.begin() + 7, src.end(), dst.begin()));
  if (expect_rdma) {
    EXPECT_EQ(g->path, TransferPath::rdma) << g->reason;
  }
}

INSTANTIATE_TEST_SUITE_P(Fabrics, ClientFabricIT,
                         ::testing::Values("auto", "libfabric:tcp", "libfabric:shm", "ucx"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (auto& ch : s) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return s;
                         });

// A server started with --fabric none declines every token: GETs must come back over the body,
// PUTs must be re-sent with the body (never a 0-byte object), and the path is http-fallback.
class ServerFallbackIT : public ::testing::TestWithParam<const char*> {
 protected:
  static void SetUpTestSuite() { server_ = start_server("norma", {"--fabric", "none"}); }
  static void TearDownTestSuite() { stop_server(server_); }
  static inline Server* server_ = nullptr;
  static inline int buckets_ = 0;
};

TEST_P(ServerFallbackIT, DeclinedTokensFallBackToBodies) {
  ASSERT_NE(server_, nullptr);
  auto c = make(base_config(GetParam(), server_));
  const std::string bucket = "fb-" + std::to_string(buckets_++) + "-" + std::to_string(getpid());
  ASSERT_TRUE(c->create_bucket(bucket).ok());
  for (std::size_t n : {std::size_t{1}, std::size_t{(1 << 20) + 1}, std::size_t{9u << 20}}) {
    auto src = pattern(n, 3);
    auto p = c->put(bucket, "k", src);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    auto h = c->head(bucket, "k");
    ASSERT_TRUE(h.ok());
    EXPECT_EQ(h->size, n) << "a declined RDMA PUT must not leave a short object";
    std::vector<std::byte> dst(n);
    auto g = c->get(bucket, "k", dst);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin()));
    for (const auto* r : {&*p, &*g}) {
      EXPECT_NE(r->path, TransferPath::rdma);
      EXPECT_FALSE(r->reason.empty());
    }
    std::printf("[server none, client %s] %zu bytes: put %s (%s) get %s (%s)\n", GetParam(), n,
                std::string(path_name(p->path)).c_str(), p->reason.c_str(),
                std::string(path_name(g->path)).c_str(), g->reason.c_str());
  }
}

// rdma "required": a server that declines RDMA makes the call fail with rdma_declined instead
// of falling back, and a declined PUT leaves no object.
TEST_F(ServerFallbackIT, RequiredRaisesInsteadOfFallingBack) {
  ASSERT_NE(server_, nullptr);
  auto cfg = base_config("auto", server_);
  cfg.rdma = "required";
  auto c = make(cfg);
  const std::string bucket = "req-" + std::to_string(getpid());
  ASSERT_TRUE(c->create_bucket(bucket).ok());
  auto src = pattern(4096, 9);
  auto p = c->put(bucket, "k", src);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.code(), Errc::rdma_declined) << p.status().to_string();
  EXPECT_EQ(c->head(bucket, "k").code(), Errc::no_such_key) << "a declined required PUT stored";
  auto plain = make(base_config("none", server_));
  ASSERT_TRUE(plain->put(bucket, "k", src).ok());
  std::vector<std::byte> dst(4096);
  auto g = c->get(bucket, "k", dst);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.code(), Errc::rdma_declined) << g.status().to_string();
  // An empty object moves no bytes: nothing to require.
  ASSERT_TRUE(plain->put(bucket, "empty", {}).ok());
  EXPECT_TRUE(c->get(bucket, "empty", std::span<std::byte>()).ok());
  auto bad = base_config("none", server_);
  bad.rdma = "required";
  EXPECT_EQ(Client::create(bad).code(), Errc::invalid_argument);
  bad.rdma = "sometimes";
  EXPECT_EQ(Client::create(bad).code(), Errc::invalid_argument);
}

INSTANTIATE_TEST_SUITE_P(Fabrics, ServerFallbackIT,
                         ::testing::Values("auto", "libfabric:tcp", "libfabric:shm", "ucx"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (auto& ch : s) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return s;
                         });

// Client::stats() against what real transfers did: the RDMA path on the default server, the
// HTTP fallback on a --fabric none server, plain HTTP with fabric "none".
std::uint64_t at(const std::map<std::string, std::uint64_t>& m, const std::string& k) {
  auto it = m.find(k);
  return it == m.end() ? 0 : it->second;
}

std::uint64_t requests_of(const ClientStats& s, const std::string& op, const std::string& cls) {
  auto it = s.requests.find(op);
  return it == s.requests.end() ? 0 : at(it->second, cls);
}

TEST_F(ClientIT, StatsCountRdmaTransfersAndErrors) {
  ASSERT_FALSE(offered_fabrics(*g_server).empty()) << "the default server offers no fabric";
  auto c = make(base_config("auto"));
  const std::size_t n = (1 << 20) + 1;
  auto src = pattern(n, 11);
  auto p = c->put(bucket_, "stats/rdma", src);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  std::vector<std::byte> dst(n);
  auto g = c->get(bucket_, "stats/rdma", dst);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  ASSERT_EQ(p->path, TransferPath::rdma) << p->reason;
  ASSERT_EQ(g->path, TransferPath::rdma) << g->reason;
  EXPECT_EQ(c->head(bucket_, "stats/missing").code(), Errc::no_such_key);

  const ClientStats s = c->stats();
  EXPECT_EQ(at(s.transfers, "rdma"), 2u);
  EXPECT_EQ(at(s.bytes, "rdma"), 2u * n);
  EXPECT_EQ(at(s.bytes, "http") + at(s.bytes, "http-fallback"), 0u);
  EXPECT_TRUE(s.rdma_declines.empty());
  EXPECT_EQ(requests_of(s, "PutObject", "2xx"), 1u);
  // The first RDMA request of a new endpoint is refused until the endpoint proves whose it is,
  // then sent once more (docs/rdma_protocol.md, "Endpoint binding"); the GET then finds it bound.
  EXPECT_EQ(requests_of(s, "PutObject", "4xx"), 1u);
  EXPECT_EQ(at(s.errors, "rdma_endpoint_unbound"), 1u);
  EXPECT_EQ(requests_of(s, "GetObject", "2xx"), 1u);
  EXPECT_EQ(requests_of(s, "GetObject", "4xx"), 0u);
  EXPECT_EQ(requests_of(s, "HeadObject", "4xx"), 1u);
  EXPECT_EQ(requests_of(s, "RdmaCapabilities", "2xx"), 1u);  // the fabric probe of "auto"
  EXPECT_EQ(at(s.errors, "no_such_key"), 1u);
  EXPECT_EQ(s.requests_total(), 5u);
  EXPECT_EQ(s.requests_in_flight, 0u);
}

// The crossover and the rdma policy on a server that offers RDMA: "auto" below the crossover is
// plain HTTP and at it RDMA, GETs at rdma_min_bytes and uploads at the smaller of it and
// rdma_put_min_bytes; "required" is RDMA at every size; "off" never.
TEST_F(ClientIT, RdmaPolicyAndCrossover) {
  ASSERT_FALSE(offered_fabrics(*g_server).empty()) << "the default server offers no fabric";
  auto cfg = base_config("auto");
  cfg.rdma_min_bytes = 64 * 1024;
  cfg.rdma_put_min_bytes = 16 * 1024;
  auto c = make(cfg);
  for (std::size_t n : {std::size_t{4096}, std::size_t{16 * 1024 - 1}, std::size_t{16 * 1024},
                        std::size_t{64 * 1024 - 1}, std::size_t{64 * 1024}}) {
    auto src = pattern(n, 21);
    auto p = c->put(bucket_, "xover", src);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    std::vector<std::byte> dst(n);
    auto g = c->get(bucket_, "xover", dst);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    EXPECT_EQ(dst, src);
    const bool put_below = n < cfg.rdma_put_min_bytes;
    const bool get_below = n < cfg.rdma_min_bytes;
    EXPECT_EQ(p->path, put_below ? TransferPath::http : TransferPath::rdma)
        << n << ": " << p->reason;
    EXPECT_EQ(g->path, get_below ? TransferPath::http : TransferPath::rdma)
        << n << ": " << g->reason;
    if (put_below) {
      EXPECT_EQ(p->reason, "below rdma_put_min_bytes (16384): HTTP is faster");
    }
    if (get_below) {
      EXPECT_EQ(g->reason, "below rdma_min_bytes (65536): HTTP is faster");
    }
  }
  // An upload crosses over at the smaller of the two: rdma_min_bytes 0 is RDMA at every size,
  // and a PUT crossover above rdma_min_bytes does not hold uploads back.
  for (auto [min, put_min] : {std::pair<std::uint64_t, std::uint64_t>{0, 64 * 1024},
                              std::pair<std::uint64_t, std::uint64_t>{4096, 1u << 20}}) {
    auto cfg2 = base_config("auto");
    cfg2.rdma_min_bytes = min;
    cfg2.rdma_put_min_bytes = put_min;
    auto c2 = make(cfg2);
    auto src = pattern(8192, 23);
    auto p = c2->put(bucket_, "xover2", src);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    EXPECT_EQ(p->path, TransferPath::rdma) << min << "/" << put_min << ": " << p->reason;
  }
  cfg.rdma = "required";
  auto req = make(cfg);
  auto src = pattern(100, 22);
  auto p = req->put(bucket_, "req", src);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(p->path, TransferPath::rdma) << p->reason;
  cfg.rdma = "off";
  auto off = make(cfg);
  std::vector<std::byte> big(2u << 20);
  ASSERT_TRUE(req->put(bucket_, "big", big).ok());
  auto g = off->get(bucket_, "big", big);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(g->path, TransferPath::http);
  EXPECT_EQ(g->reason, "rdma off");
}

// The crossover is decided on the call, not on its parts: under fabric auto, a multipart PUT or
// a multi-part GET at or above it proposes RDMA for its short last part too (1,000 bytes here,
// below both crossovers), so the call is rdma, not http-fallback, and declines nothing.
TEST_F(ClientIT, AShortLastPartFollowsItsCall) {
  ASSERT_FALSE(offered_fabrics(*g_server).empty()) << "the default server offers no fabric";
  auto cfg = base_config("auto");
  cfg.part_size_bytes = 5u << 20;
  cfg.rdma_learn = false;
  auto c = make(cfg);
  const std::size_t n = (5u << 20) + 1000;
  auto src = pattern(n, 41);
  auto p = c->put(bucket_, "short-tail", src);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(p->path, TransferPath::rdma) << p->reason;
  EXPECT_EQ(p->etag.substr(p->etag.size() - 2), "-2");
  std::vector<std::byte> dst(n);
  auto g = c->get(bucket_, "short-tail", dst);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(g->path, TransferPath::rdma) << g->reason;
  EXPECT_EQ(g->requests, 2u);
  EXPECT_EQ(dst, src);
  // A range one part and 1,000 bytes long, as objdirect.torch.load reads a storage with its
  // local header.
  std::vector<std::byte> part((5u << 20) + 1000);
  auto r = c->get(bucket_, "short-tail", part, ByteRange{0, part.size()});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->path, TransferPath::rdma) << r->reason;
  EXPECT_TRUE(c->stats().rdma_declines.empty());
}

// auto's measured choice above the crossover (rdma_learn; docs/client.md, "The fastest path"),
// wired into get and put, single and multipart: the first calls of a size take RDMA then HTTP
// (reason "auto: measuring ..."), the rest the faster one with a probe of the other now and
// then (PathLearner's spacing); every call's path agrees with ClientStats::auto_choices and
// every byte arrives. Which path wins depends on the machine, so the test checks the counts,
// not the winner. rdma_learn false: RDMA at every call.
TEST_F(ClientIT, AutoLearnsPerSizeAndCountsItsChoices) {
  ASSERT_FALSE(offered_fabrics(*g_server).empty()) << "the default server offers no fabric";
  auto cfg = base_config("auto");
  cfg.part_size_bytes = 5u << 20;  // a 6 MiB PUT is a multipart upload of two parts
  auto c = make(cfg);
  constexpr int kCalls = 40;
  std::map<TransferPath, int> puts, gets;
  for (int i = 0; i < kCalls; ++i) {
    const std::size_t n = (6u << 20) + static_cast<std::size_t>(i);  // one size class
    auto src = pattern(n, 30 + i);
    auto p = c->put(bucket_, "learn", src);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    std::vector<std::byte> dst(n);
    auto g = c->get(bucket_, "learn", dst);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    ASSERT_EQ(dst, src) << i;
    for (auto* r : {&*p, &*g}) {
      ASSERT_NE(r->path, TransferPath::http_fallback) << i << ": " << r->reason;
      if (i < 3) {
        EXPECT_EQ(r->path, TransferPath::rdma) << i << ": " << r->reason;
      }
      if (i >= 3 && i < 6) {
        EXPECT_EQ(r->path, TransferPath::http) << i;
        EXPECT_EQ(r->reason, "auto: measuring HTTP at this size against RDMA");
      }
      if (r->path == TransferPath::http) {
        EXPECT_TRUE(r->reason.starts_with("auto: ")) << r->reason;
      }
    }
    ++puts[p->path];
    ++gets[g->path];
  }
  const auto s = c->stats();
  auto choices = s.auto_choices;
  EXPECT_EQ(choices["learning_rdma"], 2u * 3);
  EXPECT_EQ(choices["learning_http"], 2u * 3);
  // 34 decided calls per direction: at most one probe of 2 calls (the 32nd and 33rd, or none
  // where the slower way is so much slower that the first probe waits longer;
  // client_path_learner_test).
  const std::uint64_t probes = choices["probe_rdma"] + choices["probe_http"];
  EXPECT_LE(probes, 2u * 2);
  EXPECT_EQ(choices["measured_rdma"] + choices["measured_http"] + probes, 2u * (kCalls - 6));
  EXPECT_EQ(static_cast<std::uint64_t>(puts[TransferPath::rdma] + gets[TransferPath::rdma]),
            choices["learning_rdma"] + choices["probe_rdma"] + choices["measured_rdma"]);
  EXPECT_EQ(s.transfers.at("rdma") + s.transfers.at("http"), 2u * kCalls);

  cfg.rdma_learn = false;
  auto fixed = make(cfg);
  std::vector<std::byte> dst(1u << 20);
  ASSERT_TRUE(c->put(bucket_, "fixed", dst).ok());
  for (int i = 0; i < 8; ++i) {
    auto g = fixed->get(bucket_, "fixed", dst);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    EXPECT_EQ(g->path, TransferPath::rdma) << i << ": " << g->reason;
  }
  EXPECT_TRUE(fixed->stats().auto_choices.empty());
}

TEST_F(ClientIT, StatsCountPlainHttp) {
  auto c = make(base_config("none"));
  auto src = pattern(4096, 12);
  ASSERT_TRUE(c->put(bucket_, "stats/plain", src).ok());
  std::vector<std::byte> dst(4096);
  ASSERT_TRUE(c->get(bucket_, "stats/plain", dst).ok());
  const ClientStats s = c->stats();
  EXPECT_EQ(at(s.bytes, "http"), 8192u);
  EXPECT_EQ(at(s.transfers, "http"), 2u);
  EXPECT_EQ(at(s.bytes, "rdma") + at(s.bytes, "http-fallback"), 0u);
  EXPECT_TRUE(s.rdma_declines.empty());
  EXPECT_EQ(s.requests_total("2xx"), 2u);
}

TEST_F(ServerFallbackIT, StatsCountFallbacksAndDeclines) {
  ASSERT_NE(server_, nullptr);
  auto c = make(base_config("libfabric:tcp", server_));
  const std::string bucket = "fbstats-" + std::to_string(getpid());
  ASSERT_TRUE(c->create_bucket(bucket).ok());
  const std::size_t n = 70000;
  auto src = pattern(n, 13);
  auto p = c->put(bucket, "k", src);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  std::vector<std::byte> dst(n);
  auto g = c->get(bucket, "k", dst);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  ASSERT_EQ(p->path, TransferPath::http_fallback) << p->reason;
  ASSERT_EQ(g->path, TransferPath::http_fallback) << g->reason;
  const ClientStats s = c->stats();
  EXPECT_EQ(at(s.transfers, "http-fallback"), 2u);
  EXPECT_EQ(at(s.bytes, "http-fallback"), 2u * n);
  EXPECT_EQ(at(s.bytes, "rdma"), 0u);
  std::uint64_t declines = 0;
  for (const auto& [reason, count] : s.rdma_declines) {
    std::printf("[stats] decline %s: %llu\n", reason.c_str(),
                static_cast<unsigned long long>(count));
    declines += count;
  }
  EXPECT_EQ(declines, 2u);
  EXPECT_EQ(at(s.rdma_declines, "other"), 0u) << "declines must be classified";
  // The declined PUT is an error response (501) followed by the body PUT.
  EXPECT_GE(requests_of(s, "PutObject", "2xx"), 1u);
  EXPECT_EQ(s.requests_in_flight, 0u);
}

// --- the CLI as a separate process --------------------------------------------------------------

struct CliRun {
  int code = -1;
  std::string out;
};

CliRun run_cli(const std::string& args, const std::string& endpoint = "",
               const std::string& secret = kSecretKey) {
  std::string cmd =
      "env -u AWS_PROFILE HOME=/nonexistent AWS_ACCESS_KEY_ID=" + std::string(kAccessKey) +
      " AWS_SECRET_ACCESS_KEY=" + secret +
      " AWS_ENDPOINT_URL=" + (endpoint.empty() ? g_server->endpoint : endpoint) +
      " " OBJDIRECT_CLI_BIN " " + args + " 2>&1";
  CliRun r;
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return r;
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) r.out.append(buf, n);
  int st = pclose(f);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

TEST_F(ClientIT, CliCopyBothWaysAndExitCodes) {
  fs::path dir = g_server->dir / ("cli-" + bucket_);
  fs::create_directories(dir);
  for (std::size_t n : {std::size_t{0}, std::size_t{4096}, std::size_t{(9u << 20) + 3}}) {
    auto data = pattern(n, 99);
    fs::path in = dir / ("in-" + std::to_string(n));
    std::ofstream(in, std::ios::binary)
        .write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(n));
    std::string url = "s3://" + bucket_ + "/cli/" + std::to_string(n);
    CliRun up = run_cli("cp --fabric none --json " + in.string() + " " + url);
    ASSERT_EQ(up.code, 0) << up.out;
    EXPECT_NE(up.out.find("\"bytes\":" + std::to_string(n)), std::string::npos) << up.out;
    EXPECT_NE(up.out.find("\"path\":\"http\""), std::string::npos) << up.out;
    EXPECT_NE(up.out.find("\"gbps\":"), std::string::npos) << up.out;

    fs::path out = dir / ("out-" + std::to_string(n));
    CliRun down = run_cli("cp --part-size 2097152 --concurrency 3 " + url + " " + out.string());
    ASSERT_EQ(down.code, 0) << down.out;
    EXPECT_NE(down.out.find("download:"), std::string::npos) << down.out;
    std::ifstream got(out, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(got)), {});
    ASSERT_EQ(bytes.size(), n);
    EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), data.begin(),
                           [](char a, std::byte b) { return static_cast<std::byte>(a) == b; }));
  }
  // Downloading into a directory keeps the key's base name; no temporary file is left.
  CliRun into_dir = run_cli("cp s3://" + bucket_ + "/cli/4096 " + dir.string() + "/");
  ASSERT_EQ(into_dir.code, 0) << into_dir.out;
  EXPECT_TRUE(fs::exists(dir / "4096"));
  for (const auto& e : fs::directory_iterator(dir)) {
    EXPECT_EQ(e.path().filename().string().find(".objdirect-"), std::string::npos) << e.path();
  }

  CliRun stat = run_cli("stat --json s3://" + bucket_ + "/cli/4096");
  EXPECT_EQ(stat.code, 0) << stat.out;
  EXPECT_NE(stat.out.find("\"size\":4096"), std::string::npos) << stat.out;
  CliRun ls = run_cli("ls s3://" + bucket_ + "/cli/");
  EXPECT_EQ(ls.code, 0) << ls.out;
  EXPECT_NE(ls.out.find("cli/4096"), std::string::npos) << ls.out;
  CliRun cat = run_cli("cat s3://" + bucket_ + "/cli/4096");
  EXPECT_EQ(cat.code, 0);
  auto want = pattern(4096, 99);
  EXPECT_EQ(cat.out.size(), 4096u);
  EXPECT_EQ(std::memcmp(cat.out.data(), want.data(), std::min<std::size_t>(4096, cat.out.size())),
            0);

  // Exit codes: 3 not found (and no destination file), 4 access denied, 5 unreachable, 2 usage.
  CliRun missing = run_cli("cp s3://" + bucket_ + "/nope " + (dir / "nope").string());
  EXPECT_EQ(missing.code, 3) << missing.out;
  EXPECT_FALSE(fs::exists(dir / "nope"));
  EXPECT_EQ(run_cli("stat s3://" + bucket_ + "/cli/4096", "", "wrong-secret").code, 4);
  EXPECT_EQ(run_cli("stat s3://" + bucket_ + "/cli/4096", "http://127.0.0.1:1").code, 5);
  EXPECT_EQ(run_cli("cp a b").code, 2);
  EXPECT_EQ(run_cli("cp --fabric bogus a s3://x/y").code, 2);
  EXPECT_EQ(run_cli("frobnicate").code, 2);
  CliRun rm = run_cli("rm s3://" + bucket_ + "/cli/0");
  EXPECT_EQ(rm.code, 0) << rm.out;
  EXPECT_EQ(client_->head(bucket_, "cli/0").code(), Errc::no_such_key);
  CliRun mb = run_cli("mb s3://" + bucket_ + "-cli");
  EXPECT_EQ(mb.code, 0) << mb.out;
  CliRun rb = run_cli("rb s3://" + bucket_ + "-cli");
  EXPECT_EQ(rb.code, 0) << rb.out;
}

// SIGINT in the middle of a download: neither the destination nor the temporary file remains.
TEST_F(ClientIT, CliInterruptedDownloadLeavesNothing) {
  const std::size_t n = 128u << 20;
  auto src = pattern(n, 11);
  ASSERT_TRUE(client_->put(bucket_, "big", src).ok());
  fs::path dir = g_server->dir / ("int-" + bucket_);
  fs::create_directories(dir);
  fs::path dst = dir / "big";
  const std::string ak = std::string("AWS_ACCESS_KEY_ID=") + kAccessKey;
  const std::string sk = std::string("AWS_SECRET_ACCESS_KEY=") + kSecretKey;
  const std::string ep = "AWS_ENDPOINT_URL=" + g_server->endpoint;
  const std::string url = "s3://" + bucket_ + "/big";
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    dup2(devnull, 2);
    const char* env[] = {ak.c_str(), sk.c_str(), ep.c_str(), "HOME=/nonexistent", nullptr};
    execle(OBJDIRECT_CLI_BIN, OBJDIRECT_CLI_BIN, "cp", "--fabric", "none", "--concurrency", "1",
           "--part-size", "5242880", url.c_str(), dst.c_str(), static_cast<char*>(nullptr), env);
    _exit(127);
  }
  // Wait for the temporary file to appear, then interrupt.
  bool seen = false;
  for (int i = 0; i < 20'000 && !seen; ++i) {
    for (const auto& e : fs::directory_iterator(dir)) {
      seen = seen || e.path().filename().string().find(".objdirect-") != std::string::npos;
    }
    if (!seen) usleep(500);
  }
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(seen) << "the download never created its temporary file";
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    GTEST_SKIP() << "the download finished before the signal arrived";
  }
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT) << status;
  EXPECT_FALSE(fs::exists(dst)) << "a half-written destination was left";
  for (const auto& e : fs::directory_iterator(dir)) ADD_FAILURE() << "left behind: " << e.path();
}

// One HTTP/1.1 request to an http://HOST:PORT/... URL on a connection of its own (a presigned
// URL, fetched as any HTTP client would); returns the whole reply (status line, headers, body).
std::string fetch_url(const std::string& method, const std::string& url) {
  const std::string rest = url.substr(url.find("://") + 3);
  const std::string hostport = rest.substr(0, rest.find('/'));
  const std::string target = rest.substr(hostport.size());
  const std::string host = hostport.substr(0, hostport.rfind(':'));
  const int port = std::stoi(hostport.substr(hostport.rfind(':') + 1));
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  inet_pton(AF_INET, host == "localhost" ? "127.0.0.1" : host.c_str(), &addr.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return {};
  }
  const std::string req =
      method + " " + target + " HTTP/1.1\r\nHost: " + hostport + "\r\nConnection: close\r\n\r\n";
  (void)!write(fd, req.data(), req.size());
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) out.append(buf, static_cast<size_t>(n));
  close(fd);
  return out;
}

TEST_F(ClientIT, CApiProgram) {
  std::string cmd =
      "env -u AWS_PROFILE HOME=/nonexistent AWS_ACCESS_KEY_ID=" + std::string(kAccessKey) +
      " AWS_SECRET_ACCESS_KEY=" + kSecretKey + " AWS_ENDPOINT_URL=" + g_server->endpoint +
      " " OBJDIRECT_C_PROGRAM_BIN " " + bucket_ + " 2>&1";
  FILE* f = popen(cmd.c_str(), "r");
  ASSERT_NE(f, nullptr);
  std::string out;
  char buf[1024];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  int st = pclose(f);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << out;
  EXPECT_NE(out.find("c api ok"), std::string::npos) << out;
  // od_put_with_options stored the type and metadata; od_presign's URLs work from anywhere.
  auto info = client_->head(bucket_, "c/typed");
  ASSERT_TRUE(info.ok()) << info.status().message();
  EXPECT_EQ(info->content_type, "text/x-c-api");
  EXPECT_EQ(info->metadata,
            (std::map<std::string, std::string>{{"owner", "alice"}, {"tag", "a=b"}}));
  EXPECT_EQ(client_->head(bucket_, "c/plain")->content_type, "binary/octet-stream");
  for (const std::string method : {"GET", "HEAD"}) {
    const std::string tag = "presigned-" + std::string(method == "GET" ? "get" : "head") + " ";
    const auto at = out.find(tag);
    ASSERT_NE(at, std::string::npos) << out;
    const std::string url = out.substr(at + tag.size(), out.find('\n', at) - at - tag.size());
    const std::string reply = fetch_url(method, url);
    EXPECT_EQ(reply.rfind("HTTP/1.1 200", 0), 0u) << method << " " << url << "\n" << reply;
    if (method == "GET") {
      EXPECT_EQ(reply.size() >= 10 ? reply.substr(reply.size() - 10) : "",
                std::string("\x07\x8a\x0d\x90\x13\x96\x19\x9c\x1f\xa2", 10));
    }
  }
}

}  // namespace
}  // namespace objdirect

// gtest_main runs the tests; the server starts once, before the first.
[[maybe_unused]] static ::testing::Environment* const g_env =
    ::testing::AddGlobalTestEnvironment(new objdirect::ServerEnvironment);
