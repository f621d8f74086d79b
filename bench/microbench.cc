// objdirect-microbench: the CPU cost of the per-request work on ObjDirect's data path.
//
// Token encode/decode (every RDMA request), SigV4 sign (client) and verify (server) of a typical
// RDMA GET, and CRC32/CRC32C/CRC64NVME throughput (x-amz-checksum-* over the bytes RDMA moves).
// The transfer planner lives in planner_bench.cc. See docs/BENCHMARKS.md for figures.
#include <benchmark/benchmark.h>

#include <chrono>
#include <string>
#include <vector>

#include "auth/sigv4.hpp"
#include "common/checksum.hpp"
#include "token/token.hpp"

namespace objdirect {
namespace {

constexpr std::uint64_t kNow = 1'700'000'000;

token::Token libfabric_token(int segments) {
  token::Token t;
  t.backend = token::Backend::libfabric;
  t.provider = "shm";
  t.addressing = token::Addressing::virtual_address;
  t.expires_unix_s = kNow + 300;
  t.nonce.fill(0x42);
  t.endpoint = std::string(32, '\x11');  // an shm fi_getname() is a short path-like name
  for (int i = 0; i < segments; ++i) {
    t.segments.push_back({0x7f0000000000ull + (static_cast<std::uint64_t>(i) << 24), 8u << 20,
                          0x1234 + static_cast<std::uint64_t>(i), ""});
    t.total_length += 8u << 20;
  }
  return t;
}

token::Token ucx_token() {
  token::Token t;
  t.backend = token::Backend::ucx;
  t.provider = "tcp";
  t.addressing = token::Addressing::virtual_address;
  t.expires_unix_s = kNow + 300;
  t.nonce.fill(0x24);
  t.endpoint = std::string(108, '\x5a');  // a UCX tcp worker address is ~108 bytes
  t.segments = {{0x7f0000001000ull, 256u << 20, 0, std::string(11, '\x01')}};
  t.total_length = 256u << 20;
  return t;
}

void BM_TokenEncode(benchmark::State& state) {
  const auto t =
      state.range(0) == 0 ? ucx_token() : libfabric_token(static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(token::encode(t));
  state.SetLabel(state.range(0) == 0 ? "ucx" : "libfabric");
}
BENCHMARK(BM_TokenEncode)->Arg(0)->Arg(1)->Arg(4);

void BM_TokenDecode(benchmark::State& state) {
  const auto t =
      state.range(0) == 0 ? ucx_token() : libfabric_token(static_cast<int>(state.range(0)));
  const std::string text = token::encode(t);
  for (auto _ : state) {
    auto r = token::decode(text, kNow);
    if (!r.ok()) state.SkipWithError("decode failed");
    benchmark::DoNotOptimize(r);
  }
  state.SetLabel((state.range(0) == 0 ? "ucx, " : "libfabric, ") + std::to_string(text.size()) +
                 " chars");
}
BENCHMARK(BM_TokenDecode)->Arg(0)->Arg(1)->Arg(4);

// A GET with an RDMA token, as the client signs it and the server verifies it.
struct SignedGet {
  std::vector<std::pair<std::string, std::string>> headers;
  std::chrono::system_clock::time_point now =
      std::chrono::system_clock::time_point{} + std::chrono::seconds(kNow);
  sigv4::Credentials creds{"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"};
  SignedGet() {
    headers = {{"host", "127.0.0.1:9000"},
               {"x-amz-date", "20231114T221320Z"},
               {"x-amz-content-sha256", std::string(sigv4::kEmptySha256)},
               {"x-amz-rdma-token", token::encode(libfabric_token(1))}};
  }
  sigv4::RequestView view() const { return {"GET", "/bench/obj-256MiB", headers}; }
};

void BM_SigV4Sign(benchmark::State& state) {
  SignedGet g;
  for (auto _ : state) {
    benchmark::DoNotOptimize(sigv4::sign(g.view(), g.creds, "us-east-1", "s3", g.now));
  }
}
BENCHMARK(BM_SigV4Sign);

void BM_SigV4Verify(benchmark::State& state) {
  SignedGet g;
  auto req = g.view();
  req.headers.emplace_back("authorization",
                           sigv4::sign(g.view(), g.creds, "us-east-1", "s3", g.now));
  const sigv4::SecretLookup secrets = [&](std::string_view ak) -> std::optional<std::string> {
    if (ak == g.creds.access_key) return g.creds.secret_key;
    return std::nullopt;
  };
  for (auto _ : state) {
    auto r = sigv4::verify(req, secrets, "us-east-1", g.now);
    if (!r.ok()) state.SkipWithError(("verify failed: " + r.status().message()).c_str());
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_SigV4Verify);

void crc_throughput(benchmark::State& state, ChecksumAlgo algo) {
  std::vector<unsigned char> data(static_cast<std::size_t>(state.range(0)));
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<unsigned char>(i * 131 + 7);
  for (auto _ : state) {
    Checksummer c(algo);
    c.update(data.data(), data.size());
    benchmark::DoNotOptimize(c.digest_raw());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * state.range(0));
}
void BM_Crc32(benchmark::State& s) {
  crc_throughput(s, ChecksumAlgo::crc32);
}
void BM_Crc32c(benchmark::State& s) {
  crc_throughput(s, ChecksumAlgo::crc32c);
}
void BM_Crc64Nvme(benchmark::State& s) {
  crc_throughput(s, ChecksumAlgo::crc64nvme);
  s.SetLabel(detail::crc64nvme_uses_clmul() ? "pclmulqdq" : "tables");
}
void BM_Crc64NvmeTables(benchmark::State& state) {
  std::vector<unsigned char> data(static_cast<std::size_t>(state.range(0)), 0x5a);
  for (auto _ : state)
    benchmark::DoNotOptimize(detail::crc64nvme_table(0, data.data(), data.size()));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK(BM_Crc32)->Arg(4 << 10)->Arg(64 << 10)->Arg(1 << 20)->Arg(16 << 20);
BENCHMARK(BM_Crc32c)->Arg(4 << 10)->Arg(64 << 10)->Arg(1 << 20)->Arg(16 << 20);
BENCHMARK(BM_Crc64Nvme)->Arg(4 << 10)->Arg(64 << 10)->Arg(1 << 20)->Arg(16 << 20);
BENCHMARK(BM_Crc64NvmeTables)->Arg(64 << 10)->Arg(1 << 20);

}  // namespace
}  // namespace objdirect

BENCHMARK_MAIN();
