// First-GET and steady-state GET latency of one fresh objdirect::Client per fabric and size.
// Usage: binding_latency ENDPOINT AK SK FABRIC SIZE ROUNDS (driver: bench/binding_latency.sh;
// docs/BENCHMARKS.md, "Endpoint binding")
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "objdirect/client.hpp"
using namespace objdirect;
using Clock = std::chrono::steady_clock;
int main(int argc, char** argv) {
  if (argc != 7) return 2;
  const std::size_t size = std::strtoull(argv[5], nullptr, 10);
  const int rounds = std::atoi(argv[6]);
  ClientConfig admin;
  admin.endpoint = argv[1];
  admin.access_key = argv[2];
  admin.secret_key = argv[3];
  admin.fabric = "none";
  auto a = Client::create(admin);
  if (!a.ok()) {
    std::printf("create: %s\n", a.status().to_string().c_str());
    return 1;
  }
  (void)(*a)->create_bucket("lat");
  std::vector<std::byte> data(size, std::byte{7});
  const std::string key = "o" + std::to_string(size);
  if (!(*a)->put("lat", key, data).ok()) {
    std::printf("put failed\n");
    return 1;
  }
  std::vector<double> firsts, steady;
  std::string path;
  for (int r = 0; r < rounds; ++r) {
    ClientConfig cfg = admin;
    cfg.fabric = argv[4];
    auto c = Client::create(cfg);
    std::vector<std::byte> buf(size);
    auto h = (*c)->register_memory(buf.data(), buf.size());  // opens the fabric: not timed
    if (!h.ok()) {
      std::printf("register: %s\n", h.status().to_string().c_str());
      return 1;
    }
    auto t0 = Clock::now();
    auto g = (*c)->get("lat", key, *h);
    auto t1 = Clock::now();
    if (!g.ok()) {
      std::printf("get: %s\n", g.status().to_string().c_str());
      return 1;
    }
    path = std::string(path_name(g->path));
    firsts.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    for (int i = 0; i < 50; ++i) {
      auto s0 = Clock::now();
      auto gg = (*c)->get("lat", key, *h);
      auto s1 = Clock::now();
      if (!gg.ok() || gg->path != TransferPath::rdma) {
        std::printf("steady get not rdma\n");
        return 1;
      }
      steady.push_back(std::chrono::duration<double, std::milli>(s1 - s0).count());
    }
  }
  auto med = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::printf(
      "fabric=%s size=%zu path=%s first_median_ms=%.3f (n=%zu) steady_median_ms=%.3f (n=%zu)\n",
      argv[4], size, path.c_str(), med(firsts), firsts.size(), med(steady), steady.size());
  return 0;
}
