// SSE-C from libobjdirect (docs/sse-c.md): objdirect::SseCustomerKey on put, get (ranges and
// parts), head, multipart uploads, copies, the batch calls and the C API, against the real
// objdirect-server (--sse-c-over-http) on a loopback port, over HTTP and over libfabric tcp and
// shm. Every byte is compared; the key appears in neither the server's output nor its access log.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "client/http_client.hpp"
#include "common/checksum.hpp"
#include "objdirect/client.hpp"
#include "objdirect/objdirect.h"
#include "test_server.hpp"

namespace objdirect {
namespace {

namespace fs = std::filesystem;

constexpr const char* kAccessKey = "sseAK";
constexpr const char* kSecretKey = "sseSecretKey1234";

std::vector<std::byte> pattern(std::size_t n, std::uint32_t seed) {
  std::vector<std::byte> v(n);
  std::mt19937_64 rng(seed);
  for (auto& b : v) b = static_cast<std::byte>(rng());
  return v;
}

SseCustomerKey make_key(char fill) {
  std::string raw(SseCustomerKey::size_bytes, fill);
  raw[0] = 'k';
  return *SseCustomerKey::from_bytes(raw);
}

std::string key_b64(const SseCustomerKey& k) {
  return base64_encode(
      std::string_view(reinterpret_cast<const char*>(k.bytes().data()), k.bytes().size()));
}

using test_server::Server;
using test_server::stop_server;

// objdirect-server on a free loopback port (test_server.hpp); everything it prints, stderr
// included, is kept (output()), and so is its access log (access_log()).
Server* start_server(const std::string& name, std::vector<std::string> extra) {
  return test_server::start_server({.dir_prefix = "od-sse-c",
                                    .access_key = kAccessKey,
                                    .secret_key = kSecretKey,
                                    .with_stderr = true,
                                    .with_access_log = true},
                                   name, std::move(extra));
}

Server* g_server = nullptr;   // --sse-c-over-http
Server* g_plain = nullptr;    // without it: SSE-C only over TLS
Server* g_nodrain = nullptr;  // --sse-c-over-http --unread-body-drain-bytes-max 0

class Environment : public ::testing::Environment {
 public:
  void SetUp() override {
    g_server = start_server("main", {"--sse-c-over-http"});
    g_plain = start_server("plain", {"--fabric", "none"});
    g_nodrain = start_server(
        "nodrain", {"--fabric", "none", "--sse-c-over-http", "--unread-body-drain-bytes-max", "0"});
  }
  void TearDown() override {
    stop_server(g_server);
    stop_server(g_plain);
    stop_server(g_nodrain);
  }
};
[[maybe_unused]] auto* const g_env = ::testing::AddGlobalTestEnvironment(new Environment);

std::unique_ptr<Client> make(const ClientConfig& cfg) {
  auto c = Client::create(cfg);
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  return c.ok() ? std::move(c.value()) : nullptr;
}

ClientConfig config(const Server& s, std::string fabric = "none") {
  ClientConfig c;
  c.endpoint = s.endpoint;
  c.access_key = kAccessKey;
  c.secret_key = kSecretKey;
  c.fabric = std::move(fabric);
  c.max_attempts = 1;
  return c;
}

class SseC : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    ASSERT_NE(g_server, nullptr);
    fabric_ = GetParam();
    auto cfg = config(*g_server, fabric_);
    cfg.rdma_min_bytes = 0;
    if (fabric_ != "none") cfg.rdma = "required";  // the bytes must go over the fabric
    auto c = Client::create(cfg);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    client_ = std::move(*c);
    bucket_ = "ssec-" + std::to_string(counter_++) + "-" + std::to_string(getpid());
    ASSERT_TRUE(client_->create_bucket(bucket_).ok());
  }
  void TearDown() override {
    if (!g_server) return;
    // The key never reaches a log line.
    for (const SseCustomerKey* k : {&key_, &other_}) {
      const std::string b64 = key_b64(*k);
      EXPECT_EQ(g_server->output().find(b64), std::string::npos) << "key in the server's output";
      EXPECT_EQ(g_server->access_log().find(b64), std::string::npos) << "key in the access log";
    }
  }
  TransferPath expected_path() const {
    return fabric_ == "none" ? TransferPath::http : TransferPath::rdma;
  }

  static inline int counter_ = 0;
  std::string fabric_;
  std::unique_ptr<Client> client_;
  std::string bucket_;
  SseCustomerKey key_ = make_key('a');
  SseCustomerKey other_ = make_key('b');
};

TEST_P(SseC, PutGetHeadAndRanges) {
  const std::size_t n = (1 << 20) + 37;
  auto src = pattern(n, 1);
  PutOptions po;
  po.sse_c = key_;
  po.content_type = "text/x-ssec";
  auto p = client_->put(bucket_, "obj", src, po);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(p->path, expected_path()) << p->reason;
  // The server stored ciphertext: the ETag is not the MD5 of the bytes.
  Md5 md5;
  md5.update(src.data(), src.size());
  EXPECT_NE(p->etag, md5.hex());

  GetOptions go;
  go.sse_c = key_;
  std::vector<std::byte> dst(n);
  auto g = client_->get(bucket_, "obj", dst, std::nullopt, go);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(g->path, expected_path()) << g->reason;
  EXPECT_EQ(g->bytes, n);
  EXPECT_EQ(g->etag, p->etag);
  EXPECT_TRUE(dst == src) << "content differs";

  // Ranges that start and end off the 16-byte cipher blocks.
  for (auto [off, len] : {std::pair<std::uint64_t, std::uint64_t>{0, 1},
                          {15, 17},
                          {4097, 65'000},
                          {n - 5, 5},
                          {n - 3, 100}}) {
    std::vector<std::byte> part(len, std::byte{0x5a});
    auto r = client_->get(bucket_, "obj", part, ByteRange{off, len}, go);
    ASSERT_TRUE(r.ok()) << off << ": " << r.status().to_string();
    const std::uint64_t want = std::min<std::uint64_t>(len, n - off);
    EXPECT_EQ(r->bytes, want);
    EXPECT_TRUE(std::equal(part.begin(), part.begin() + static_cast<std::ptrdiff_t>(want),
                           src.begin() + static_cast<std::ptrdiff_t>(off)))
        << "range at " << off;
  }

  auto h = client_->head(bucket_, "obj", key_);
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  EXPECT_EQ(h->size, n);
  EXPECT_EQ(h->content_type, "text/x-ssec");

  // No key: 400 InvalidRequest; another key: 403 AccessDenied. Nothing lands in the buffer.
  std::vector<std::byte> none(n, std::byte{0x11});
  auto miss = client_->get(bucket_, "obj", none);
  EXPECT_EQ(miss.code(), Errc::invalid_request) << miss.status().to_string();
  GetOptions wrong;
  wrong.sse_c = other_;
  auto bad = client_->get(bucket_, "obj", none, std::nullopt, wrong);
  EXPECT_EQ(bad.code(), Errc::access_denied) << bad.status().to_string();
  auto bad_range = client_->get(bucket_, "obj", none, ByteRange{3, 100}, wrong);
  EXPECT_EQ(bad_range.code(), Errc::access_denied) << bad_range.status().to_string();
  EXPECT_TRUE(std::all_of(none.begin(), none.end(), [](std::byte b) {
    return b == std::byte{0x11};
  })) << "a refused read wrote into the buffer";
  EXPECT_FALSE(client_->head(bucket_, "obj").ok());
  EXPECT_EQ(client_->head(bucket_, "obj", other_).code(), Errc::access_denied);

  // A key for an object stored without SSE-C: 400.
  ASSERT_TRUE(client_->put(bucket_, "plain", src).ok());
  auto not_applicable = client_->get(bucket_, "plain", dst, std::nullopt, go);
  EXPECT_EQ(not_applicable.code(), Errc::invalid_request) << not_applicable.status().to_string();

  // An empty SSE-C object (the empty-buffer GET asks HEAD, with the key).
  ASSERT_TRUE(client_->put(bucket_, "empty", {}, po).ok());
  auto e = client_->get(bucket_, "empty", std::span<std::byte>(), std::nullopt, go);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  EXPECT_EQ(e->bytes, 0u);
  EXPECT_EQ(client_->get(bucket_, "empty", std::span<std::byte>()).code(), Errc::invalid_request);
}

TEST_P(SseC, MultipartPutAndPinnedParts) {
  auto cfg = config(*g_server, fabric_);
  cfg.rdma_min_bytes = 0;
  if (fabric_ != "none") cfg.rdma = "required";
  cfg.part_size_bytes = 5u << 20;
  cfg.concurrency = 3;
  auto c = make(cfg);
  const std::size_t n = (12u << 20) + 5;
  auto src = pattern(n, 2);
  PutOptions po;
  po.sse_c = key_;
  auto p = c->put(bucket_, "big", src, po);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_TRUE(p->etag.ends_with("-3")) << p->etag;
  EXPECT_EQ(p->path, expected_path()) << p->reason;

  GetOptions go;
  go.sse_c = key_;
  std::vector<std::byte> dst(n);
  auto g = c->get(bucket_, "big", dst, std::nullopt, go);  // 3 If-Match-pinned ranged GETs
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(g->requests, 3u);
  EXPECT_TRUE(dst == src);
  // A range across the first part boundary.
  const std::uint64_t off = (5u << 20) - 9;
  std::vector<std::byte> part(1000);
  auto r = c->get(bucket_, "big", part, ByteRange{off, part.size()}, go);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(std::equal(part.begin(), part.end(), src.begin() + static_cast<std::ptrdiff_t>(off)));
  EXPECT_EQ(c->get(bucket_, "big", dst).code(), Errc::invalid_request);
}

TEST_P(SseC, ExplicitMultipartUploadNeedsTheKeyOnEveryPart) {
  PutOptions po;
  po.sse_c = key_;
  auto id = client_->create_multipart_upload(bucket_, "mp", po);
  ASSERT_TRUE(id.ok()) << id.status().to_string();
  auto a = pattern(5u << 20, 3);
  auto b = pattern(1000, 4);
  // A full 5 MiB part refused on its header alone: the server answers before it reads the body,
  // and the client, still sending, gets that S3 error (not "Broken pipe").
  auto miss = client_->upload_part(bucket_, "mp", *id, 1, a);
  EXPECT_EQ(miss.code(), Errc::invalid_request) << miss.status().to_string();
  auto wrong = client_->upload_part(bucket_, "mp", *id, 1, a, other_);
  EXPECT_EQ(wrong.code(), Errc::invalid_argument) << wrong.status().to_string();
  auto p1 = client_->upload_part(bucket_, "mp", *id, 1, a, key_);
  ASSERT_TRUE(p1.ok()) << p1.status().to_string();
  EXPECT_EQ(p1->path, expected_path()) << p1->reason;
  auto p2 = client_->upload_part(bucket_, "mp", *id, 2, b, key_);
  ASSERT_TRUE(p2.ok()) << p2.status().to_string();
  std::vector<Client::CompletedPart> parts = {{1, p1->etag}, {2, p2->etag}};
  auto done = client_->complete_multipart_upload(bucket_, "mp", *id, parts, key_);
  ASSERT_TRUE(done.ok()) << done.status().to_string();
  EXPECT_TRUE(done->etag.ends_with("-2")) << done->etag;

  GetOptions go;
  go.sse_c = key_;
  std::vector<std::byte> dst(a.size() + b.size());
  auto g = client_->get(bucket_, "mp", dst, std::nullopt, go);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_TRUE(std::equal(a.begin(), a.end(), dst.begin()));
  EXPECT_TRUE(std::equal(b.begin(), b.end(), dst.begin() + static_cast<std::ptrdiff_t>(a.size())));
  EXPECT_EQ(client_->head(bucket_, "mp", key_)->etag, done->etag);
}

TEST_P(SseC, BatchCalls) {
  std::vector<std::vector<std::byte>> srcs = {pattern(100, 5), pattern(70'000, 6)};
  std::vector<PutRequest> puts = {{bucket_, "b0", srcs[0], key_}, {bucket_, "b1", srcs[1], other_}};
  for (const auto& r : client_->put_many(puts)) ASSERT_TRUE(r.ok()) << r.status().to_string();
  std::vector<std::vector<std::byte>> dsts = {std::vector<std::byte>(100),
                                              std::vector<std::byte>(70'000)};
  std::vector<GetRequest> gets = {{bucket_, "b0", dsts[0], {}, {}, key_},
                                  {bucket_, "b1", dsts[1], ByteRange{10, 60'000}, {}, other_},
                                  {bucket_, "b1", dsts[0], {}, {}, key_}};
  auto got = client_->get_many(gets);
  ASSERT_TRUE(got[0].ok()) << got[0].status().to_string();
  ASSERT_TRUE(got[1].ok()) << got[1].status().to_string();
  EXPECT_EQ(got[2].code(), Errc::access_denied) << "b1 was written with the other key";
  EXPECT_TRUE(std::equal(srcs[1].begin() + 10, srcs[1].begin() + 60'010, dsts[1].begin()));
}

TEST_P(SseC, CopyWithSourceAndDestinationKeys) {
  const std::size_t n = 300'001;
  auto src = pattern(n, 7);
  PutOptions po;
  po.sse_c = key_;
  ASSERT_TRUE(client_->put(bucket_, "src", src, po).ok());

  // Without the source's key the copy is refused (the HEAD of the source already is).
  EXPECT_EQ(client_->copy(bucket_, "src", bucket_, "dst").code(), Errc::invalid_request);
  CopyOptions wrong;
  wrong.source_sse_c = other_;
  EXPECT_EQ(client_->copy(bucket_, "src", bucket_, "dst", wrong).code(), Errc::access_denied);

  // Re-encrypted under another key; and decrypted into a plain object.
  CopyOptions to_other;
  to_other.source_sse_c = key_;
  to_other.sse_c = other_;
  auto c1 = client_->copy(bucket_, "src", bucket_, "other", to_other);
  ASSERT_TRUE(c1.ok()) << c1.status().to_string();
  CopyOptions to_plain;
  to_plain.source_sse_c = key_;
  ASSERT_TRUE(client_->copy(bucket_, "src", bucket_, "plain", to_plain).ok());

  std::vector<std::byte> dst(n);
  GetOptions go;
  go.sse_c = other_;
  ASSERT_TRUE(client_->get(bucket_, "other", dst, std::nullopt, go).ok());
  EXPECT_TRUE(dst == src);
  std::fill(dst.begin(), dst.end(), std::byte{0});
  ASSERT_TRUE(client_->get(bucket_, "plain", dst).ok());
  EXPECT_TRUE(dst == src);
  go.sse_c = key_;
  EXPECT_EQ(client_->get(bucket_, "other", dst, std::nullopt, go).code(), Errc::access_denied);

  // A multipart copy (UploadPartCopy parts with both keys, Complete with the copy's).
  auto cfg = config(*g_server);
  cfg.copy_multipart_threshold_bytes = 5u << 20;
  auto small = make(cfg);
  const std::size_t big = (11u << 20) + 1;
  auto big_src = pattern(big, 8);
  ASSERT_TRUE(small->put(bucket_, "bigsrc", big_src, po).ok());
  auto c2 = small->copy(bucket_, "bigsrc", bucket_, "bigdst", to_other);
  ASSERT_TRUE(c2.ok()) << c2.status().to_string();
  EXPECT_TRUE(c2->etag.ends_with("-2") || c2->etag.ends_with("-3")) << c2->etag;
  std::vector<std::byte> big_dst(big);
  go.sse_c = other_;
  ASSERT_TRUE(small->get(bucket_, "bigdst", big_dst, std::nullopt, go).ok());
  EXPECT_TRUE(big_dst == big_src);
}

TEST_P(SseC, CApi) {
  od_config cfg{};
  cfg.endpoint = g_server->endpoint.c_str();
  cfg.access_key = kAccessKey;
  cfg.secret_key = kSecretKey;
  cfg.fabric = fabric_.c_str();
  od_client* c = nullptr;
  ASSERT_EQ(od_client_create(&cfg, &c), OD_OK) << od_last_error_message();
  unsigned char k[OD_SSE_C_KEY_BYTES];
  std::memcpy(k, key_.bytes().data(), sizeof k);
  unsigned char k2[OD_SSE_C_KEY_BYTES];
  std::memcpy(k2, other_.bytes().data(), sizeof k2);
  auto src = pattern(5000, 9);
  od_result res{};
  ASSERT_EQ(od_put_sse_c(c, bucket_.c_str(), "c", src.data(), src.size(), nullptr, k, &res), OD_OK)
      << od_last_error_message();
  std::vector<std::byte> dst(src.size());
  ASSERT_EQ(od_get_sse_c(c, bucket_.c_str(), "c", dst.data(), dst.size(), 0, 0, k, &res), OD_OK)
      << od_last_error_message();
  EXPECT_TRUE(dst == src);
  std::vector<std::byte> part(10);
  ASSERT_EQ(od_get_sse_c(c, bucket_.c_str(), "c", part.data(), part.size(), 4990, 10, k, &res),
            OD_OK);
  EXPECT_TRUE(std::equal(part.begin(), part.end(), src.begin() + 4990));
  od_object_info info{};
  ASSERT_EQ(od_head_sse_c(c, bucket_.c_str(), "c", k, &info), OD_OK) << od_last_error_message();
  EXPECT_EQ(info.size, src.size());
  EXPECT_EQ(od_get_sse_c(c, bucket_.c_str(), "c", dst.data(), dst.size(), 0, 0, k2, &res),
            OD_EACCESS);
  EXPECT_EQ(od_get(c, bucket_.c_str(), "c", dst.data(), dst.size(), 0, 0, &res), OD_EINVAL);
  EXPECT_EQ(od_get_sse_c(c, bucket_.c_str(), "c", dst.data(), dst.size(), 0, 0, nullptr, &res),
            OD_EINVAL);
  od_client_destroy(c);
}

INSTANTIATE_TEST_SUITE_P(Paths, SseC, ::testing::Values("none", "libfabric:tcp", "libfabric:shm"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), ':', '_');
                           return n;
                         });

// Over plain HTTP a server without --sse-c-over-http refuses the key, as AWS does.
TEST(SseCPlainHttp, RefusedWithoutSseCOverHttp) {
  ASSERT_NE(g_plain, nullptr);
  auto c = make(config(*g_plain));
  ASSERT_TRUE(c->create_bucket("plainhttp").ok());
  PutOptions po;
  po.sse_c = make_key('z');
  auto p = c->put("plainhttp", "k", pattern(10, 1), po);
  EXPECT_EQ(p.code(), Errc::invalid_request) << p.status().to_string();
  EXPECT_NE(p.status().message().find("secure connection"), std::string::npos)
      << p.status().message();
}

// A server that closes right after its early answer, reading none of the body (no lingering
// close): the client's write of a 32 MiB part fails (EPIPE/ECONNRESET), and the client still
// reads the answer already in its socket, so the caller gets the S3 error, not "Broken pipe".
// The next request on the same client gets a fresh connection and succeeds.
TEST(SseCEarlyAnswer, ClientReadsTheAnswerAfterABrokenPipe) {
  ASSERT_NE(g_nodrain, nullptr);
  auto c = make(config(*g_nodrain));
  ASSERT_TRUE(c->create_bucket("early").ok());
  const SseCustomerKey key = make_key('k'), other = make_key('o');
  PutOptions po;
  po.sse_c = key;
  auto id = c->create_multipart_upload("early", "mp", po);
  ASSERT_TRUE(id.ok()) << id.status().to_string();
  const auto big = pattern(32u << 20, 7);
  for (int i = 0; i < 3; ++i) {
    auto miss = c->upload_part("early", "mp", *id, 1, big);
    EXPECT_EQ(miss.code(), Errc::invalid_request) << miss.status().to_string();
    auto wrong = c->upload_part("early", "mp", *id, 1, big, other);
    EXPECT_EQ(wrong.code(), Errc::invalid_argument) << wrong.status().to_string();
  }
  auto ok = c->upload_part("early", "mp", *id, 1, big, key);
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  auto put = c->put("early", "plain-after", pattern(5u << 20, 8));  // no key: an unencrypted PUT
  EXPECT_TRUE(put.ok()) << put.status().to_string();
}

TEST(SseCKey, FromBytesChecksTheLength) {
  EXPECT_EQ(SseCustomerKey::from_bytes(std::string(31, 'x')).code(), Errc::invalid_argument);
  EXPECT_EQ(SseCustomerKey::from_bytes(std::string(33, 'x')).code(), Errc::invalid_argument);
  auto k = SseCustomerKey::from_bytes(std::string(32, 'x'));
  ASSERT_TRUE(k.ok());
  // The headers AWS expects: AES256, base64 of the key, base64 of its MD5.
  auto h = client::sse_c_headers(*k);
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h[0], (std::pair<std::string, std::string>{
                      "x-amz-server-side-encryption-customer-algorithm", "AES256"}));
  EXPECT_EQ(h[1].second, base64_encode(std::string(32, 'x')));
  Md5 md5;
  md5.update(std::string(32, 'x').data(), 32);
  EXPECT_EQ(h[2].second, base64_encode(md5.raw()));
  EXPECT_EQ(client::sse_c_headers(*k, true)[1].first,
            "x-amz-copy-source-server-side-encryption-customer-key");
  // Wiping empties the key values and only those.
  client::wipe_secret_headers(h);
  EXPECT_TRUE(h[1].second.empty());
  EXPECT_EQ(h[0].second, "AES256");
  EXPECT_FALSE(h[2].second.empty());
}

}  // namespace
}  // namespace objdirect
