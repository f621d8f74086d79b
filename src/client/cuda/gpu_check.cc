// objdirect-gpu-check: the GPU machine's end-to-end check (run by scripts/gpu-check.sh).
//
// Starts its own objdirect-server (and a second one with RDMA off), then for each fabric
// (by default every fabric of the transport table that opens here, and none = HTTP; --fabric
// names them) and each size moves data between CUDA
// device memory and the server through libobjdirect's Client, handing it the DEVICE pointers:
// Client::put from a device buffer, Client::get into an odd offset of another, a Range GET into
// an offset of a device buffer, and (row "fallback") the same against the server that declines
// RDMA, so that the HTTP fallback lands in device memory. Each result is verified by CRC32C of
// the device bytes (the CRC32C kernel, or its host fallback) against the host pattern. Prints a
// table with PUT/GET throughput next to a pinned cudaMemcpy H2D/D2H baseline measured in the same
// run.
//
// Without a GPU it runs the same code against the fake CUDA library of the tests
// (OBJDIRECT_CUDA_LIBRARY / OBJDIRECT_CUDART_LIBRARY = tests/libobjdirect_fake_cuda.so), whose
// device memory the CPU cannot touch; --host-memory instead passes host buffers (the host path).
//
// Exit status: 0 when every check passed, 1 when any failed, 2 when no GPU or no server.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "client/cuda/crc32c_device.hpp"
#include "client/cuda/cuda_api.hpp"
#include "client/cuda/device_path.hpp"
#include "client/rdma.hpp"
#include "common/checksum.hpp"
#include "objdirect/client.hpp"

namespace {

using namespace objdirect;
using namespace objdirect::cuda;
using Clock = std::chrono::steady_clock;

int failures = 0;

void check(bool ok, const std::string& what) {
  if (!ok) {
    ++failures;
    std::printf("FAIL: %s\n", what.c_str());
  }
}

std::uint32_t crc_value(const Checksummer& sum) {
  std::string raw = sum.digest_raw();
  std::uint32_t v = 0;
  for (char c : raw) v = (v << 8) | static_cast<std::uint8_t>(c);
  return v;
}

double gbps(std::size_t bytes, Clock::duration d) {
  double s = std::chrono::duration<double>(d).count();
  return s > 0 ? static_cast<double>(bytes) / s / 1e9 : 0;
}

std::string size_name(std::size_t n) {
  if (n >= (1ull << 30) && n % (1ull << 30) == 0) return std::to_string(n >> 30) + " GiB";
  if (n >= (1ull << 20) && n % (1ull << 20) == 0) return std::to_string(n >> 20) + " MiB";
  if (n >= 1024 && n % 1024 == 0) return std::to_string(n >> 10) + " KiB";
  return std::to_string(n) + " B";
}

// The server child process.
struct Server {
  pid_t pid = -1;
  std::string endpoint;
  ~Server() {
    if (pid > 0) {
      kill(pid, SIGTERM);
      int status = 0;
      waitpid(pid, &status, 0);
    }
  }
};

bool start_server(Server& s, const std::string& binary, const std::string& data_dir,
                  const char* fabric = "auto") {
  int fds[2];
  if (pipe(fds) != 0) return false;
  s.pid = fork();
  if (s.pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    execl(binary.c_str(), binary.c_str(), "--listen", "127.0.0.1:0", "--data", data_dir.c_str(),
          "--access-key", "AK", "--secret-key", "SK", "--fabric", fabric, "--no-fsync",
          static_cast<char*>(nullptr));
    std::perror("exec objdirect-server");
    _exit(127);
  }
  close(fds[1]);
  FILE* out = fdopen(fds[0], "r");
  char line[512];
  const std::string prefix = "objdirect-server listening on ";
  while (std::fgets(line, sizeof line, out) != nullptr) {
    std::string l(line);
    if (l.rfind(prefix, 0) == 0) {
      s.endpoint = l.substr(prefix.size());
      while (!s.endpoint.empty() && std::isspace(static_cast<unsigned char>(s.endpoint.back()))) {
        s.endpoint.pop_back();
      }
      return true;  // the pipe stays open (the server's later stdout goes nowhere harmful)
    }
  }
  return false;
}

// Device memory, or host memory standing in for it (--host-memory: checks this tool and the
// client integration on a machine without a GPU; no baseline, no kernel).
struct Memory {
  const CudaApi* api = nullptr;  // nullptr: host emulation
  void* alloc(std::size_t n) {
    void* p = nullptr;
    if (api == nullptr) return std::malloc(n);
    return api->malloc_device(&p, n) == k_success ? p : nullptr;
  }
  void release(void* p) {
    if (api == nullptr) {
      std::free(p);
    } else {
      api->free_device(p);
    }
  }
  void h2d(void* d, const void* h, std::size_t n) {
    if (api == nullptr) {
      std::memcpy(d, h, n);
    } else {
      api->memcpy_sync(d, h, n, k_memcpy_host_to_device);
    }
  }
  void zero(void* d, std::size_t n) {
    if (api == nullptr) {
      std::memset(d, 0, n);
    } else {
      api->memset_sync(d, 0, n);
    }
  }
  Result<std::uint32_t> crc(const void* d, std::size_t n, cudaStream_t stream) {
    if (api == nullptr) {
      Checksummer sum(ChecksumAlgo::crc32c);
      sum.update(d, n);
      return crc_value(sum);
    }
    auto r = crc32c_device(d, n, stream);
    if (!r.ok()) return r.status();
    return r->crc32c;
  }
};

// Fills device memory with a pattern whose every 8 MiB piece differs (a misplaced chunk shows),
// returning its CRC32C.
std::uint32_t fill_device(Memory& mem, std::byte* dev, std::size_t n,
                          std::vector<std::byte>& host_piece) {
  Checksummer sum(ChecksumAlgo::crc32c);
  for (std::size_t off = 0, i = 0; off < n; off += host_piece.size(), ++i) {
    std::size_t len = std::min(host_piece.size(), n - off);
    std::memcpy(host_piece.data(), &i, std::min(len, sizeof i));
    mem.h2d(dev + off, host_piece.data(), len);
    sum.update(host_piece.data(), len);
  }
  return crc_value(sum);
}

// CRC32C of bytes [off, off+len) of the pattern fill_device writes for an object.
std::uint32_t pattern_crc(std::size_t off, std::size_t len, std::vector<std::byte> piece) {
  Checksummer sum(ChecksumAlgo::crc32c);
  const std::size_t p = piece.size();
  for (std::size_t at = off; at < off + len;) {
    std::size_t i = at / p, in = at % p;
    std::memcpy(piece.data(), &i, std::min(p, sizeof i));
    std::size_t n = std::min(p - in, off + len - at);
    sum.update(piece.data() + in, n);
    at += n;
  }
  return crc_value(sum);
}

struct Row {
  std::string fabric;
  std::size_t size = 0;
  double put_gbps = 0, get_gbps = 0, h2d_gbps = 0, d2h_gbps = 0;
  std::string path;
  bool ok = false;
};

// Pinned cudaMemcpy baseline: best of 3 over min(n, 1 GiB) bytes.
void baseline(const CudaApi& api, std::byte* dev, std::size_t n, void* pinned, Row& row) {
  std::size_t len = std::min<std::size_t>(n, 1ull << 30);
  for (int rep = 0; rep < 3; ++rep) {
    auto t0 = Clock::now();
    api.memcpy_sync(dev, pinned, len, k_memcpy_host_to_device);
    auto t1 = Clock::now();
    api.memcpy_sync(pinned, dev, len, k_memcpy_device_to_host);
    auto t2 = Clock::now();
    row.h2d_gbps = std::max(row.h2d_gbps, gbps(len, t1 - t0));
    row.d2h_gbps = std::max(row.d2h_gbps, gbps(len, t2 - t1));
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"objdirect-gpu-check: device-memory GET/PUT through libobjdirect"};
  std::string server_bin = "bin/objdirect-server";
  std::string data_dir;
  std::vector<std::string> fabrics;  // default: every table fabric that opens here, and none
  std::vector<std::size_t> sizes = {4096, 1 << 20, 64 << 20, 1ull << 30, 4ull << 30};
  std::size_t part_size = 8 << 20;
  std::size_t fallback_size_max = 256 << 20;
  app.add_option("--server", server_bin, "objdirect-server binary")->capture_default_str();
  app.add_option("--data", data_dir, "server data directory (default: a temporary one)");
  app.add_option("--fabric", fabrics,
                 "fabrics to test (default: each of the transport table's that opens here, and "
                 "none = HTTP)");
  app.add_option("--size", sizes, "object sizes in bytes")->capture_default_str();
  app.add_option("--part-size", part_size, "ClientConfig::part_size_bytes (staging chunk)")
      ->capture_default_str();
  app.add_option("--fallback-size-max", fallback_size_max,
                 "largest size of the HTTP-fallback row (server with RDMA off; 0: no such row)")
      ->capture_default_str();
  bool host_memory = false;
  app.add_flag("--host-memory", host_memory,
               "host memory instead of device memory (checks the tool without CUDA)");
  CLI11_PARSE(app, argc, argv);
  if (fabrics.empty()) {
    for (const auto& row : client::fabric_rows()) {
      if (client::open_fabric(row.name, {}).ok()) fabrics.push_back(row.name);
    }
    fabrics.emplace_back("none");
  }
  // The fallback row's fabric: any fabric shows the decline, since the server with RDMA off
  // declines every token; the first RDMA fabric tested.
  std::string fallback_fabric;
  for (const auto& f : fabrics) {
    const auto rows = client::fabric_rows();
    if (std::any_of(rows.begin(), rows.end(), [&](const auto& r) { return r.name == f; })) {
      fallback_fabric = f;
      break;
    }
  }
  if (fallback_fabric.empty()) fallback_size_max = 0;  // no RDMA fabric: no fallback row

  Memory mem;
  if (!host_memory) {
    auto api_r = CudaApi::get();
    if (!api_r.ok()) {
      std::printf("no GPU: %s\n", api_r.status().message().c_str());
      return 2;
    }
    mem.api = *api_r;
    Status kernel = crc32c_kernel_status();
    std::printf("CRC32C kernel: %s\n", kernel.ok() ? "loaded" : kernel.to_string().c_str());
    if (const char* fake = std::getenv("OBJDIRECT_CUDA_LIBRARY")) {
      std::printf("CUDA from OBJDIRECT_CUDA_LIBRARY=%s (not a GPU: figures mean nothing)\n", fake);
    }
  }

  std::filesystem::path tmp;
  struct RemoveTmp {  // declared before the servers: removed after they have stopped
    std::filesystem::path& p;
    ~RemoveTmp() {
      std::error_code ec;
      if (!p.empty()) std::filesystem::remove_all(p, ec);
    }
  } remove_tmp{tmp};
  if (data_dir.empty()) {
    char templ[] = "/tmp/objdirect-gpu-check-XXXXXX";
    tmp = mkdtemp(templ);
    data_dir = tmp.string();
  }
  std::filesystem::create_directories(data_dir + "/rdma");
  std::filesystem::create_directories(data_dir + "/nordma");
  Server server, no_rdma;
  if (!start_server(server, server_bin, data_dir + "/rdma")) {
    std::printf("could not start %s\n", server_bin.c_str());
    return 2;
  }
  std::printf("server: %s (data %s)\n", server.endpoint.c_str(), data_dir.c_str());
  if (fallback_size_max > 0) {
    if (!start_server(no_rdma, server_bin, data_dir + "/nordma", "none")) {
      std::printf("could not start %s --fabric none\n", server_bin.c_str());
      return 2;
    }
    fabrics.emplace_back("fallback");  // fallback_fabric against the server with RDMA off
  }

  std::size_t size_max = 0;
  for (auto s : sizes) size_max = std::max(size_max, s);
  const std::size_t dst_offset = 4096 + 3;  // GETs land at an odd offset into the device buffer
  void* src_v = mem.alloc(size_max);
  void* dst_v = mem.alloc(size_max + dst_offset);
  if (src_v == nullptr || dst_v == nullptr) {
    std::printf("cudaMalloc of %zu bytes failed\n", size_max);
    return 2;
  }
  auto* src = static_cast<std::byte*>(src_v);
  auto* dst = static_cast<std::byte*>(dst_v);
  void* pinned = nullptr;
  if (mem.api != nullptr)
    mem.api->malloc_host(&pinned, std::min<std::size_t>(size_max, 1ull << 30));
  std::vector<std::byte> piece(8 << 20);
  std::mt19937_64 rng(42);
  for (auto& b : piece) b = static_cast<std::byte>(rng());
  cudaStream_t stream = nullptr;
  if (mem.api != nullptr) mem.api->stream_create(&stream);

  std::vector<Row> rows;
  for (const std::string& fabric : fabrics) {
    const bool fallback = fabric == "fallback";
    ClientConfig cfg;
    cfg.endpoint = fallback ? no_rdma.endpoint : server.endpoint;
    cfg.access_key = "AK";
    cfg.secret_key = "SK";
    cfg.fabric = fallback ? fallback_fabric : fabric;
    cfg.part_size_bytes = part_size;
    auto client_r = Client::create(cfg);
    if (!client_r.ok()) {
      check(false, fabric + ": Client::create: " + client_r.status().to_string());
      continue;
    }
    Client& client = **client_r;
    std::string bucket = "gpu-" + std::string(fabric == "none" ? "http" : fabric);
    for (char& c : bucket) {
      if (c == ':') c = '-';
    }
    if (Status st = client.create_bucket(bucket); !st.ok()) {
      check(false, fabric + ": create_bucket: " + st.to_string());
      continue;
    }
    const std::string want_memory = mem.api != nullptr ? "cuda-bounce" : "host";

    for (std::size_t n : sizes) {
      if (fallback && n > fallback_size_max) continue;
      Row row;
      row.fabric = fabric;
      row.size = n;
      const std::string key = "obj-" + std::to_string(n);
      const std::uint32_t expected = fill_device(mem, src, n, piece);
      const std::string what = fabric + " " + size_name(n);

      auto t0 = Clock::now();
      auto put = client.put(bucket, key, {src, n});  // the device pointer itself
      auto t1 = Clock::now();
      check(put.ok(), what + " PUT: " + put.status().to_string());
      if (!put.ok()) continue;
      row.put_gbps = gbps(n, t1 - t0);
      check(put->memory == want_memory, what + " PUT went through " + put->memory);

      mem.zero(dst, n + dst_offset);
      t0 = Clock::now();
      auto get = client.get(bucket, key, {dst + dst_offset, n});
      t1 = Clock::now();
      check(get.ok(), what + " GET: " + get.status().to_string());
      if (!get.ok()) continue;
      row.get_gbps = gbps(n, t1 - t0);
      auto dev_crc = mem.crc(dst + dst_offset, n, stream);
      bool ok = get->bytes == n && dev_crc.ok() && *dev_crc == expected;
      check(ok, what + " GET: data differs (bytes " + std::to_string(get->bytes) + ", device CRC " +
                    (dev_crc.ok() ? std::to_string(*dev_crc) : dev_crc.status().to_string()) +
                    ", expected " + std::to_string(expected) + ")");
      if (get->path == TransferPath::http_fallback || put->path == TransferPath::http_fallback) {
        std::printf("  %s: fallback reason: %s\n", what.c_str(),
                    (get->reason.empty() ? put->reason : get->reason).c_str());
      }
      if (fallback) {
        check(get->path == TransferPath::http_fallback && put->path == TransferPath::http_fallback,
              what + ": expected http-fallback, got " + std::string(path_name(put->path)) + "/" +
                  std::string(path_name(get->path)));
      }

      // Range GET into an odd offset of the device buffer (across parts when large).
      if (n > 3000) {
        const std::uint64_t r_off = 1234, r_len = n - 2000;
        auto ranged = client.get(bucket, key, {dst + 777, r_len}, ByteRange{r_off, r_len});
        auto rc = mem.crc(dst + 777, r_len, stream);
        bool r_ok = ranged.ok() && ranged->bytes == r_len && rc.ok() &&
                    *rc == pattern_crc(r_off, r_len, piece);
        check(r_ok, what + " Range GET into a device offset: " +
                        (ranged.ok() ? "data differs" : ranged.status().to_string()));
        ok = ok && r_ok;
      }
      (void)client.delete_object(bucket, key);
      if (mem.api != nullptr) baseline(*mem.api, src, n, pinned, row);
      row.path = std::string(path_name(put->path)) + "/" + std::string(path_name(get->path)) + " " +
                 get->memory;
      row.ok = ok;
      rows.push_back(row);
      std::printf("  %-14s %8s  PUT %7.3f GB/s  GET %7.3f GB/s  %s\n", fabric.c_str(),
                  size_name(n).c_str(), row.put_gbps, row.get_gbps, ok ? "ok" : "FAILED");
      std::fflush(stdout);
    }
  }

  std::printf(
      "\n| fabric | size | PUT GB/s | GET GB/s | H2D pinned GB/s | D2H pinned GB/s | GET/H2D | "
      "path (put/get) | ok |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  for (const Row& r : rows) {
    std::printf("| %s | %s | %.3f | %.3f | %.2f | %.2f | %.2f | %s | %s |\n", r.fabric.c_str(),
                size_name(r.size).c_str(), r.put_gbps, r.get_gbps, r.h2d_gbps, r.d2h_gbps,
                r.h2d_gbps > 0 ? r.get_gbps / r.h2d_gbps : 0.0, r.path.c_str(),
                r.ok ? "yes" : "NO");
  }
  if (mem.api != nullptr) {
    transport::Capabilities none;
    std::printf("\ndevice path with Debian's fabrics: %s (direct needs caps().cuda_memory)\n",
                device_path_name(choose_path(classify_pointer(src), none)));
    auto dmabuf = export_dmabuf(src, 2 << 20);
    std::printf("dmabuf export: %s\n", dmabuf.ok() ? "ok" : dmabuf.status().to_string().c_str());
    if (dmabuf.ok()) close(*dmabuf);
    mem.api->stream_destroy(stream);
    mem.api->free_host(pinned);
  }
  mem.release(src);
  mem.release(dst);
  std::printf("\n%s (%d failure%s)\n", failures == 0 ? "PASS" : "FAIL", failures,
              failures == 1 ? "" : "s");
  return failures == 0 ? 0 : 1;
}
