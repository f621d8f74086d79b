// libobjdirect's Client with CUDA device memory, on a machine without a GPU: the fake CUDA
// library (fake_cuda/fake_cuda.cc) hands out "device memory" that the CPU cannot touch (mapped
// PROT_NONE; a CPU access is SIGSEGV), and the real objdirect-server runs on loopback. Every
// GET into and PUT out of device memory goes through the Client's real staging pipeline and is
// checked byte for byte through the fake's read-write alias, over libfabric shm, libfabric tcp,
// UCX and HTTP, plus Range GETs into device offsets and the HTTP fallback of a server that
// declines RDMA.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "objdirect/client.hpp"
#include "objdirect/objdirect.h"
#include "test_server.hpp"

// The fake CUDA library (linked; CudaApi finds the same file through OBJDIRECT_CUDA_LIBRARY).
// Declared here, not from the toolkit's headers, with the fake's own (ABI-equal) types.
extern "C" {
int cudaMalloc(void** out, std::size_t n);
int cudaFree(void* p);
int cudaMemcpy(void* dst, const void* src, std::size_t n, int kind);
int cudaStreamCreate(void** out);
int cudaStreamDestroy(void* s);
void* fake_cuda_alias(const void* p);
}

namespace objdirect {
namespace {

namespace fs = std::filesystem;

constexpr const char* kAccessKey = "devAK";
constexpr const char* kSecretKey = "devSecretKey123";
constexpr std::size_t kPart = 5u << 20;  // the smallest upload part: many parts per object

using test_server::Server;
using test_server::stop_server;
Server* g_rdma = nullptr;     // every fabric that opens here
Server* g_no_rdma = nullptr;  // --fabric none: declines every token

std::vector<std::byte> pattern(std::size_t n, std::uint32_t seed) {
  std::vector<std::byte> v(n);
  std::mt19937_64 rng(seed);
  for (std::size_t i = 0; i < n; i += 8) {
    std::uint64_t x = rng();
    std::memcpy(v.data() + i, &x, std::min<std::size_t>(8, n - i));
  }
  return v;
}

Server* start_server(const std::string& name, std::vector<std::string> extra) {
  return test_server::start_server(
      {.dir_prefix = "od-device", .access_key = kAccessKey, .secret_key = kSecretKey}, name,
      std::move(extra));
}

class Environment : public ::testing::Environment {
 public:
  void SetUp() override {
    // CudaApi loads the fake instead of the system's CUDA (which this machine does not have).
    setenv("OBJDIRECT_CUDA_LIBRARY", OBJDIRECT_FAKE_CUDA, 1);
    setenv("OBJDIRECT_CUDART_LIBRARY", OBJDIRECT_FAKE_CUDA, 1);
    g_rdma = start_server("rdma", {});
    g_no_rdma = start_server("nordma", {"--fabric", "none"});
  }
  void TearDown() override {
    stop_server(g_rdma);
    stop_server(g_no_rdma);
  }
};

// Fake device memory: `size` bytes, the CPU-visible alias for checks.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t size) : size_(size) {
    EXPECT_EQ(cudaMalloc(&ptr_, size), 0);
    alias_ = static_cast<std::byte*>(fake_cuda_alias(ptr_));
    EXPECT_NE(alias_, nullptr);
  }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  std::byte* data() const { return static_cast<std::byte*>(ptr_); }
  std::span<std::byte> span(std::size_t offset, std::size_t n) const {
    return {data() + offset, n};
  }
  std::byte* alias() const { return alias_; }  // read-write view for the test only
  void fill(std::byte b) { std::memset(alias_, static_cast<int>(b), size_); }

 private:
  void* ptr_ = nullptr;
  std::size_t size_;
  std::byte* alias_ = nullptr;
};

ClientConfig config(const std::string& fabric, const Server* server) {
  ClientConfig c;
  c.endpoint = server->endpoint;
  c.access_key = kAccessKey;
  c.secret_key = kSecretKey;
  c.fabric = fabric;
  c.part_size_bytes = kPart;
  return c;
}

std::unique_ptr<Client> make(const std::string& fabric, const Server* server = nullptr) {
  auto r = Client::create(config(fabric, server ? server : g_rdma));
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? std::move(*r) : nullptr;
}

int g_bucket_counter = 0;
std::string new_bucket(Client& c) {
  std::string b = "dev-" + std::to_string(g_bucket_counter++) + "-" + std::to_string(getpid());
  EXPECT_TRUE(c.create_bucket(b).ok());
  return b;
}

bool server_offers(const std::string& fabric) {
  if (fabric == "none") return false;
  // A host-memory PUT tells whether this fabric reaches the server here.
  auto c = make(fabric);
  std::string b = new_bucket(*c);
  std::vector<std::byte> one(4096, std::byte{1});
  auto r = c->put(b, "probe", one);
  return r.ok() && r->path == TransferPath::rdma;
}

TEST(FakeCuda, DeviceMemoryIsNotCpuAccessible) {
  // The guard the other tests rely on: a CPU access to fake device memory crashes.
  DeviceBuffer buf(4096);
  EXPECT_EXIT(
      {
        signal(SIGSEGV, SIG_DFL);  // a fabric library's crash reporter would exit differently
        volatile std::byte* p = buf.data();
        p[0] = std::byte{1};
      },
      ::testing::KilledBySignal(SIGSEGV), "");
}

// The public memory-kind query (what the Python module asks before it hands a buffer on): the
// fake's device memory, anywhere inside it, is cuda_device; host memory and nullptr are host. The
// fake is loaded in this process, so the GPU data path is usable.
TEST(DeviceApi, MemoryKindOfDeviceAndHostBuffers) {
  ASSERT_TRUE(cuda_memory_status().ok()) << cuda_memory_status().to_string();
  DeviceBuffer dev(1 << 16);
  EXPECT_EQ(memory_kind(dev.data()), MemoryKind::cuda_device);
  EXPECT_EQ(memory_kind(dev.data() + 12345), MemoryKind::cuda_device);
  std::vector<std::byte> host(4096);
  EXPECT_EQ(memory_kind(host.data()), MemoryKind::host);
  EXPECT_EQ(memory_kind(nullptr), MemoryKind::host);
  EXPECT_EQ(memory_kind_name(MemoryKind::cuda_device), "cuda-device");
  EXPECT_EQ(memory_kind_name(MemoryKind::cuda_managed), "cuda-managed");
  EXPECT_EQ(memory_kind_name(MemoryKind::host), "host");
}

// Client::rdma_offer: what each server advertises, asked by a client whose own fabric is
// "none"; the server with --fabric none advertises nothing it serves.
TEST(DeviceApi, RdmaOfferOfEachServer) {
  auto c = make("none");
  ASSERT_TRUE(c);
  auto offer = c->rdma_offer();
  ASSERT_TRUE(offer.ok()) << offer.status().to_string();
  EXPECT_TRUE(offer->advertised);
  EXPECT_TRUE(offer->same_host);  // loopback, and the same kernel's host id
  EXPECT_TRUE(offer->error.empty()) << offer->error;
  EXPECT_FALSE(offer->fabrics.empty());
  auto none = make("none", g_no_rdma);
  ASSERT_TRUE(none);
  auto nothing = none->rdma_offer();
  ASSERT_TRUE(nothing.ok()) << nothing.status().to_string();
  EXPECT_TRUE(nothing->fabrics.empty());
  // A server that cannot be reached is an error, not an empty offer.
  ClientConfig gone = config("none", g_rdma);
  gone.endpoint = "http://127.0.0.1:1";
  gone.max_attempts = 1;
  auto unreachable = Client::create(gone);
  ASSERT_TRUE(unreachable.ok());
  auto err = (*unreachable)->rdma_offer();
  EXPECT_FALSE(err.ok());
  EXPECT_EQ(err.status().code(), Errc::unavailable) << err.status().to_string();
}

class DeviceRoundTrip : public ::testing::TestWithParam<std::string> {};

// PUT from device memory, checked with a host GET; GET into an odd offset of device memory,
// checked through the alias (and the bytes around it untouched); Range GETs into device offsets.
TEST_P(DeviceRoundTrip, SizesAndRanges) {
  const std::string fabric = GetParam();
  const bool rdma = server_offers(fabric);
  auto c = make(fabric);
  ASSERT_TRUE(c);
  const std::string bucket = new_bucket(*c);
  const std::size_t sizes[] = {4096, (3u << 20) + 7, 64u << 20};
  const std::size_t off = 4096 + 3;  // GETs land at an odd offset of the device buffer
  for (std::size_t n : sizes) {
    SCOPED_TRACE(fabric + " " + std::to_string(n) + " bytes");
    auto want = pattern(n, static_cast<std::uint32_t>(n));
    DeviceBuffer src(n);
    std::memcpy(src.alias(), want.data(), n);
    const std::string key = "obj-" + std::to_string(n);
    auto p = c->put(bucket, key, src.span(0, n));
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    EXPECT_EQ(p->bytes, n);
    EXPECT_EQ(p->memory, "cuda-bounce");
    EXPECT_EQ(p->path, rdma ? TransferPath::rdma : TransferPath::http) << p->reason;
    if (n > kPart) {
      EXPECT_NE(p->etag.find('-'), std::string::npos) << "expected a multipart upload";
    }

    std::vector<std::byte> host(n);
    auto hg = c->get(bucket, key, host);
    ASSERT_TRUE(hg.ok()) << hg.status().to_string();
    ASSERT_EQ(hg->bytes, n);
    EXPECT_TRUE(host == want) << "the object stored from device memory differs";

    DeviceBuffer dst(n + off + 64);
    dst.fill(std::byte{0x5a});
    auto g = c->get(bucket, key, dst.span(off, n + 64));  // larger than the object
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    EXPECT_EQ(g->bytes, n);
    EXPECT_EQ(g->object_size, n);
    EXPECT_EQ(g->etag, p->etag);
    EXPECT_EQ(g->memory, "cuda-bounce");
    EXPECT_EQ(g->path, rdma ? TransferPath::rdma : TransferPath::http) << g->reason;
    EXPECT_EQ(std::memcmp(dst.alias() + off, want.data(), n), 0) << "device bytes differ";
    EXPECT_EQ(dst.alias()[off - 1], std::byte{0x5a}) << "wrote before the buffer";
    EXPECT_EQ(dst.alias()[off + n], std::byte{0x5a}) << "wrote past the object";

    // Range GET into an odd offset of a device buffer (crossing part boundaries when large).
    const std::uint64_t r_off = n / 3 + 1, r_len = n / 2;
    dst.fill(std::byte{0x5a});
    auto r = c->get(bucket, key, dst.span(777, r_len), ByteRange{r_off, r_len});
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->bytes, r_len);
    EXPECT_EQ(r->object_size, n);
    EXPECT_EQ(std::memcmp(dst.alias() + 777, want.data() + r_off, r_len), 0);
    EXPECT_EQ(dst.alias()[777 + r_len], std::byte{0x5a});

    // A range reaching past the end is cut there.
    auto cut = c->get(bucket, key, dst.span(1, n), ByteRange{n - 100, n});
    ASSERT_TRUE(cut.ok()) << cut.status().to_string();
    EXPECT_EQ(cut->bytes, 100u);
    EXPECT_EQ(std::memcmp(dst.alias() + 1, want.data() + n - 100, 100), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Fabrics, DeviceRoundTrip,
                         ::testing::Values("libfabric:shm", "libfabric:tcp", "ucx", "none"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& ch : s) {
                             if (ch == ':') ch = '_';
                           }
                           return s;
                         });

// A server that declines RDMA: GETs into and PUTs from device memory fall back to HTTP through
// the staging buffers (the CPU still never touches device memory).
TEST(DeviceFallback, ServerDeclinesRdma) {
  auto c = make("libfabric:tcp", g_no_rdma);
  ASSERT_TRUE(c);
  const std::string bucket = new_bucket(*c);
  for (std::size_t n : {std::size_t{4096}, std::size_t{(12u << 20) + 5}}) {
    SCOPED_TRACE(n);
    auto want = pattern(n, 7);
    DeviceBuffer src(n);
    std::memcpy(src.alias(), want.data(), n);
    auto p = c->put(bucket, "fb", src.span(0, n));
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    EXPECT_EQ(p->path, TransferPath::http_fallback);
    DeviceBuffer dst(n);
    auto g = c->get(bucket, "fb", dst.span(0, n));
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    EXPECT_EQ(g->path, TransferPath::http_fallback) << g->reason;
    EXPECT_FALSE(g->reason.empty());
    EXPECT_EQ(g->bytes, n);
    EXPECT_EQ(std::memcmp(dst.alias(), want.data(), n), 0);
    DeviceBuffer part(4096);
    auto r = c->get(bucket, "fb", part.span(5, 1000), ByteRange{100, 1000});
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(std::memcmp(part.alias() + 5, want.data() + 100, 1000), 0);
  }
}

// get_async / put_async on a caller's stream, get_many / put_many with more device buffers than
// the client has staging pools (limits::client_staging_pools_max), register_memory, the C API.
TEST(DeviceApi, AsyncManyRegisterAndC) {
  auto c = make("libfabric:tcp");
  ASSERT_TRUE(c);
  const std::string bucket = new_bucket(*c);
  void* stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), 0);
  const std::size_t n = (6u << 20) + 11;
  auto want = pattern(n, 3);
  DeviceBuffer src(n), dst(n);
  std::memcpy(src.alias(), want.data(), n);
  auto pf = c->put_async(bucket, "async", src.span(0, n), stream);
  auto p = pf.get();
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  auto gf = c->get_async(bucket, "async", dst.span(0, n), std::nullopt, stream);
  auto g = gf.get();
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  // The future is ready: every copy on the stream has completed.
  EXPECT_EQ(std::memcmp(dst.alias(), want.data(), n), 0);
  cudaStreamDestroy(stream);

  const std::size_t count = 6;  // more than client_staging_pools_max (4)
  std::vector<std::unique_ptr<DeviceBuffer>> bufs;
  std::vector<std::vector<std::byte>> wants;
  std::vector<PutRequest> puts;
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t len = 100'000 * (i + 1);
    wants.push_back(pattern(len, static_cast<std::uint32_t>(i + 100)));
    bufs.push_back(std::make_unique<DeviceBuffer>(len));
    std::memcpy(bufs.back()->alias(), wants.back().data(), len);
    puts.push_back({bucket, "many-" + std::to_string(i), bufs.back()->span(0, len)});
  }
  for (auto& r : c->put_many(puts)) ASSERT_TRUE(r.ok()) << r.status().to_string();
  std::vector<GetRequest> gets;
  for (std::size_t i = 0; i < count; ++i) {
    bufs[i]->fill(std::byte{0});
    gets.push_back({bucket, "many-" + std::to_string(i), bufs[i]->span(0, wants[i].size()), {}});
  }
  auto results = c->get_many(gets);
  for (std::size_t i = 0; i < count; ++i) {
    ASSERT_TRUE(results[i].ok()) << results[i].status().to_string();
    EXPECT_EQ(results[i]->bytes, wants[i].size());
    EXPECT_EQ(std::memcmp(bufs[i]->alias(), wants[i].data(), wants[i].size()), 0) << i;
  }

  // register_memory accepts device memory (nothing is handed to the fabric: the staging is).
  auto h = c->register_memory(dst.data(), n);
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  EXPECT_TRUE(h->fabrics().empty());
  dst.fill(std::byte{0});
  auto hg = c->get(bucket, "async", *h);
  ASSERT_TRUE(hg.ok()) << hg.status().to_string();
  EXPECT_EQ(std::memcmp(dst.alias(), want.data(), n), 0);

  // Errors come back as errors, never as a crash or a partial write past the buffer.
  DeviceBuffer small(1000);
  auto too_small = c->get(bucket, "async", small.span(0, 1000));
  EXPECT_EQ(too_small.code(), Errc::invalid_argument);
  EXPECT_EQ(c->get(bucket, "missing", small.span(0, 1000)).code(), Errc::no_such_key);
  std::vector<std::byte> nothing;
  ASSERT_TRUE(c->put(bucket, "empty", nothing).ok());
  auto empty = c->get(bucket, "empty", small.span(0, 1000));
  ASSERT_TRUE(empty.ok()) << empty.status().to_string();
  EXPECT_EQ(empty->bytes, 0u);

  // The C API takes the same device pointers.
  od_config cfg{};
  cfg.endpoint = g_rdma->endpoint.c_str();
  cfg.access_key = kAccessKey;
  cfg.secret_key = kSecretKey;
  cfg.fabric = "libfabric:tcp";
  od_client* oc = nullptr;
  ASSERT_EQ(od_client_create(&cfg, &oc), OD_OK) << od_last_error_message();
  dst.fill(std::byte{0});
  od_result res{};
  ASSERT_EQ(od_put(oc, bucket.c_str(), "c-api", src.data(), n, &res), OD_OK)
      << od_last_error_message();
  ASSERT_EQ(od_get(oc, bucket.c_str(), "c-api", dst.data(), n, 0, 0, &res), OD_OK)
      << od_last_error_message();
  EXPECT_EQ(res.bytes, n);
  EXPECT_EQ(std::memcmp(dst.alias(), want.data(), n), 0);
  od_client_destroy(oc);
}

}  // namespace
}  // namespace objdirect

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new objdirect::Environment);
  return RUN_ALL_TESTS();
}
