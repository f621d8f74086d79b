// objdirect-gpu-check: the GPU machine's end-to-end check (run by scripts/gpu-check.sh).
//
// Starts its own objdirect-server, then for each fabric (libfabric:shm, libfabric:tcp, ucx, and
// none = HTTP) and each size moves data between CUDA device memory and the server through
// libobjdirect's Client and the bounce pipeline (pinned staging registered with the client's
// fabric): PUT from a device buffer, GET into an offset of another, both verified by CRC32C
// three ways (the source pattern on the host, the staging bytes on the way, the CRC32C kernel
// over the device result). Also a Range GET into an offset of a device buffer. Prints a table with
// PUT/GET throughput next to a pinned cudaMemcpy H2D/D2H baseline measured in the same run.
//
// The Client does not take device pointers itself yet; the bounce pipeline's callbacks call
// Client::get/put on the staging slots, which is what the Client will do internally. PUT stores
// one object per chunk ("<key>.<index>") because the Client has no public UploadPart call.
//
// Exit status: 0 when every check passed, 1 when any failed, 2 when no GPU or no server.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
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

#include "client/cuda/bounce.hpp"
#include "client/cuda/crc32c_device.hpp"
#include "client/cuda/cuda_api.hpp"
#include "client/cuda/device_path.hpp"
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

bool start_server(Server& s, const std::string& binary, const std::string& data_dir) {
  int fds[2];
  if (pipe(fds) != 0) return false;
  s.pid = fork();
  if (s.pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    execl(binary.c_str(), binary.c_str(), "--listen", "127.0.0.1:0", "--data", data_dir.c_str(),
          "--access-key", "AK", "--secret-key", "SK", "--fabric", "auto", "--no-fsync",
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

// The bounce path: BounceContext on a GPU, the same BouncePipeline over host memory otherwise.
struct Mover {
  std::unique_ptr<BounceContext> ctx;
  std::unique_ptr<StagingPool> pool;
  HostCopyEngine engine;
  Result<BounceResult> get(void* d, std::size_t n, cudaStream_t stream, const FetchChunk& f,
                           BounceOptions o = {}) {
    if (ctx) return ctx->get(d, n, stream, f, o);
    return BouncePipeline(*pool, engine).get(d, n, f, o);
  }
  Result<BounceResult> put(const void* d, std::size_t n, cudaStream_t stream, const StoreChunk& f,
                           BounceOptions o = {}) {
    if (ctx) return ctx->put(d, n, stream, f, o);
    return BouncePipeline(*pool, engine).put(d, n, f, o);
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
  std::vector<std::string> fabrics = {"libfabric:shm", "libfabric:tcp", "ucx", "none"};
  std::vector<std::size_t> sizes = {4096, 1 << 20, 64 << 20, 1ull << 30, 4ull << 30};
  std::size_t chunk_bytes = 8 << 20;
  std::size_t slots = 4;
  std::size_t fetch_concurrency = 2;
  app.add_option("--server", server_bin, "objdirect-server binary")->capture_default_str();
  app.add_option("--data", data_dir, "server data directory (default: a temporary one)");
  app.add_option("--fabric", fabrics, "fabrics to test")->capture_default_str();
  app.add_option("--size", sizes, "object sizes in bytes")->capture_default_str();
  app.add_option("--chunk-bytes", chunk_bytes, "bounce chunk")->capture_default_str();
  app.add_option("--slots", slots, "bounce staging slots")->capture_default_str();
  app.add_option("--fetch-concurrency", fetch_concurrency, "GET chunks fetched at once")
      ->capture_default_str();
  bool host_memory = false;
  app.add_flag("--host-memory", host_memory,
               "host memory stands in for device memory (checks the tool without a GPU)");
  CLI11_PARSE(app, argc, argv);

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
  }

  std::filesystem::path tmp;
  struct RemoveTmp {  // declared before the server: removed after it has stopped
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
  Server server;
  if (!start_server(server, server_bin, data_dir)) {
    std::printf("could not start %s\n", server_bin.c_str());
    return 2;
  }
  std::printf("server: %s (data %s)\n", server.endpoint.c_str(), data_dir.c_str());

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
  std::vector<std::byte> piece(chunk_bytes);
  std::mt19937_64 rng(42);
  for (auto& b : piece) b = static_cast<std::byte>(rng());
  cudaStream_t stream = nullptr;
  if (mem.api != nullptr) mem.api->stream_create(&stream);

  std::vector<Row> rows;
  for (const std::string& fabric : fabrics) {
    ClientConfig cfg;
    cfg.endpoint = server.endpoint;
    cfg.access_key = "AK";
    cfg.secret_key = "SK";
    cfg.fabric = fabric;
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
    // Staging registered once with this client's fabric: RDMA lands in the slots.
    auto register_staging = [&](std::span<std::byte> all) -> Result<std::shared_ptr<void>> {
      auto h = client.register_memory(all.data(), all.size());
      if (!h.ok()) return h.status();
      return std::shared_ptr<void>(std::make_shared<MemoryHandle>(std::move(*h)));
    };
    Mover ctx;
    Status staging_status;
    if (mem.api != nullptr) {
      auto c = BounceContext::create({chunk_bytes, slots}, register_staging);
      if (c.ok()) ctx.ctx = std::move(c).value();
      staging_status = c.status();
    } else {
      auto p = StagingPool::create_host(slots, chunk_bytes, register_staging);
      if (p.ok()) ctx.pool = std::move(p).value();
      staging_status = p.status();
    }
    if (!staging_status.ok()) {
      check(false, fabric + ": staging: " + staging_status.to_string());
      continue;
    }

    for (std::size_t n : sizes) {
      Row row;
      row.fabric = fabric;
      row.size = n;
      const std::string key = "obj-" + std::to_string(n);
      const std::uint32_t expected = fill_device(mem, src, n, piece);
      std::string paths;
      std::mutex paths_mu;  // GET chunks may be fetched on several threads
      auto note_path = [&](const TransferResult& t) {
        std::lock_guard lock(paths_mu);
        std::string p(path_name(t.path));
        if (paths.find(p) == std::string::npos) paths += (paths.empty() ? "" : "+") + p;
        if (t.path == TransferPath::http_fallback && paths.find('(') == std::string::npos) {
          std::printf("  %s %s: fallback reason: %s\n", fabric.c_str(), size_name(n).c_str(),
                      t.reason.c_str());
        }
      };

      auto t0 = Clock::now();
      auto put =
          ctx.put(src, n, stream,
                  [&](const Chunk& c, std::span<const std::byte> staging, std::size_t) -> Status {
                    auto r = client.put(bucket, key + "." + std::to_string(c.index), staging);
                    if (!r.ok()) return r.status();
                    note_path(*r);
                    return Status::Ok();
                  },
                  {true});
      auto t1 = Clock::now();
      check(put.ok(), fabric + " PUT " + size_name(n) + ": " + put.status().to_string());
      if (!put.ok()) continue;
      row.put_gbps = gbps(n, t1 - t0);
      check(*put->crc32c == expected, fabric + " PUT " + size_name(n) + ": staging CRC differs");

      mem.zero(dst, n + dst_offset);
      t0 = Clock::now();
      auto get = ctx.get(
          dst + dst_offset, n, stream,
          [&](const Chunk& c, std::span<std::byte> staging, std::size_t) -> Result<std::size_t> {
            auto r = client.get(bucket, key + "." + std::to_string(c.index), staging);
            if (!r.ok()) return r.status();
            note_path(*r);
            return static_cast<std::size_t>(r->bytes);
          },
          BounceOptions{true, fetch_concurrency});
      t1 = Clock::now();
      check(get.ok(), fabric + " GET " + size_name(n) + ": " + get.status().to_string());
      if (!get.ok()) continue;
      row.get_gbps = gbps(n, t1 - t0);
      auto dev_crc = mem.crc(dst + dst_offset, n, stream);
      bool ok = get->bytes == n && *get->crc32c == expected && dev_crc.ok() && *dev_crc == expected;
      check(ok, fabric + " GET " + size_name(n) + ": data differs (bytes " +
                    std::to_string(get->bytes) + ", device CRC " +
                    (dev_crc.ok() ? std::to_string(*dev_crc) : dev_crc.status().to_string()) +
                    ", expected " + std::to_string(expected) + ")");

      // Range GET of object chunk 0 into an odd offset of the device buffer.
      if (n > 3000) {
        const std::uint64_t r_off = 1234, r_len = std::min<std::uint64_t>(n, chunk_bytes) - 2000;
        std::vector<std::byte> want(piece.begin(), piece.begin() + std::min(n, chunk_bytes));
        std::size_t zero = 0;
        std::memcpy(want.data(), &zero, std::min(want.size(), sizeof zero));
        Checksummer sum(ChecksumAlgo::crc32c);
        sum.update(want.data() + r_off, r_len);
        auto ranged = ctx.get(
            dst + 777, r_len, stream,
            [&](const Chunk& c, std::span<std::byte> staging, std::size_t) -> Result<std::size_t> {
              auto r =
                  client.get(bucket, key + ".0", staging, ByteRange{r_off + c.offset, c.length});
              if (!r.ok()) return r.status();
              return static_cast<std::size_t>(r->bytes);
            });
        auto rc = mem.crc(dst + 777, r_len, stream);
        check(ranged.ok() && rc.ok() && *rc == crc_value(sum),
              fabric + " Range GET " + size_name(n) + " into a device offset: " +
                  (ranged.ok() ? "data differs" : ranged.status().to_string()));
        ok = ok && ranged.ok() && rc.ok() && *rc == crc_value(sum);
      }
      for (std::size_t i = 0; i < put->chunks; ++i) {
        (void)client.delete_object(bucket, key + "." + std::to_string(i));
      }
      if (mem.api != nullptr) baseline(*mem.api, src, n, pinned, row);
      row.path = paths + (mem.api != nullptr ? " via bounce" : " via bounce (host emulation)");
      row.ok = ok;
      rows.push_back(row);
      std::printf("  %-14s %8s  PUT %7.3f GB/s  GET %7.3f GB/s  %s\n", fabric.c_str(),
                  size_name(n).c_str(), row.put_gbps, row.get_gbps, ok ? "ok" : "FAILED");
      std::fflush(stdout);
    }
  }

  std::printf(
      "\n| fabric | size | PUT GB/s | GET GB/s | H2D pinned GB/s | D2H pinned GB/s | path | ok "
      "|\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (const Row& r : rows) {
    std::printf("| %s | %s | %.3f | %.3f | %.2f | %.2f | %s | %s |\n", r.fabric.c_str(),
                size_name(r.size).c_str(), r.put_gbps, r.get_gbps, r.h2d_gbps, r.d2h_gbps,
                r.path.c_str(), r.ok ? "yes" : "NO");
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
