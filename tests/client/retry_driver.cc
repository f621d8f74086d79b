// retry_driver: libobjdirect's C++ API through a flaky path (tests/integration/fault_proxy.py in
// front of objdirect-server), for integration_client_retries. Every byte is verified.
//
//   retry_driver ENDPOINT BUCKET OBJECTS FABRIC
//
// Credentials from the AWS environment (ClientConfig::load). Runs OBJECTS PUT+GET round trips of
// 0..300 KiB, a ranged GET every 5th object, and 2 multipart uploads of 12 MiB (5 MiB parts)
// read back whole (pinned ranged parts) and by a range across parts. Prints "ops N", "failures
// N", then "retry REASON N", "completes_confirmed N", "transfers PATH N", "revocations N", one
// per line, and each failure on stderr. Exit status 0 when no operation failed.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "objdirect/client.hpp"

namespace {

std::vector<std::byte> pattern(std::uint64_t seed, std::size_t n) {
  std::vector<std::byte> out(n);
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (std::size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    out[i] = static_cast<std::byte>(x);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: retry_driver ENDPOINT BUCKET OBJECTS FABRIC\n");
    return 2;
  }
  auto cfg = objdirect::ClientConfig::load();
  if (!cfg.ok()) {
    std::fprintf(stderr, "config: %s\n", cfg.status().message().c_str());
    return 2;
  }
  cfg->endpoint = argv[1];
  cfg->fabric = argv[4];
  cfg->part_size_bytes = 5ull << 20;
  const std::string bucket = argv[2];
  const int objects = std::atoi(argv[3]);
  auto client = objdirect::Client::create(*cfg);
  if (!client.ok()) {
    std::fprintf(stderr, "create: %s\n", client.status().message().c_str());
    return 2;
  }
  auto& c = **client;
  int ops = 0, failures = 0;
  auto check = [&](bool ok, const std::string& what) {
    ++ops;
    if (!ok) {
      ++failures;
      std::fprintf(stderr, "FAILED %s\n", what.c_str());
    }
  };

  for (int i = 0; i < objects; ++i) {
    const std::size_t size = static_cast<std::size_t>((i * 7919) % (300 * 1024));
    const std::string key = "cxx/" + std::to_string(i);
    auto data = pattern(static_cast<std::uint64_t>(i), size);
    auto put = c.put(bucket, key, data);
    check(put.ok(), "put " + key + ": " + (put.ok() ? "" : put.status().message()));
    std::vector<std::byte> back(size);
    auto got = c.get(bucket, key, back);
    check(got.ok() && got->bytes == size && back == data,
          "get " + key + ": " + (got.ok() ? "bytes differ" : got.status().message()));
    if (i % 5 == 0 && size > 100) {
      const std::uint64_t off = size / 3, len = size / 3;
      std::vector<std::byte> part(len);
      auto r = c.get(bucket, key, part, objdirect::ByteRange{off, len});
      check(r.ok() && r->bytes == len && std::memcmp(part.data(), data.data() + off, len) == 0,
            "ranged get " + key + ": " + (r.ok() ? "bytes differ" : r.status().message()));
    }
  }
  for (int m = 0; m < 2; ++m) {
    const std::size_t size = 12u << 20;
    const std::string key = "cxx/multipart-" + std::to_string(m);
    auto data = pattern(1000 + static_cast<std::uint64_t>(m), size);
    auto put = c.put(bucket, key, data);
    check(put.ok() && put->etag.ends_with("-3"),
          "multipart put " + key + ": " + (put.ok() ? put->etag : put.status().message()));
    std::vector<std::byte> back(size);
    auto got = c.get(bucket, key, back);
    check(got.ok() && got->bytes == size && back == data,
          "multipart get " + key + ": " + (got.ok() ? "bytes differ" : got.status().message()));
    const std::uint64_t off = (4u << 20) + 17, len = 7u << 20;
    std::vector<std::byte> part(len);
    auto r = c.get(bucket, key, part, objdirect::ByteRange{off, len});
    check(r.ok() && r->bytes == len && std::memcmp(part.data(), data.data() + off, len) == 0,
          "ranged multipart get " + key + ": " + (r.ok() ? "bytes differ" : r.status().message()));
  }

  auto s = c.stats();
  std::printf("ops %d\nfailures %d\n", ops, failures);
  for (const auto& [reason, n] : s.retry_reasons) {
    std::printf("retry %s %llu\n", reason.c_str(), static_cast<unsigned long long>(n));
  }
  std::printf("completes_confirmed %llu\n", static_cast<unsigned long long>(s.completes_confirmed));
  for (const auto& [path, n] : s.transfers) {
    std::printf("transfers %s %llu\n", path.c_str(), static_cast<unsigned long long>(n));
  }
  std::printf("revocations %llu\n", static_cast<unsigned long long>(s.rdma_revocations));
  return failures == 0 ? 0 : 1;
}
