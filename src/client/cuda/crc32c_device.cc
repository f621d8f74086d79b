#include "client/cuda/crc32c_device.hpp"

#include <array>
#include <cstring>
#include <mutex>
#include <string>

#include "client/cuda/crc32c_core.hpp"
#include "client/cuda/cuda_api.hpp"
#include "common/checksum.hpp"

// The kernel's PTX, NUL-terminated; empty when the build had no nvcc (crc32c_ptx_none.cc).
extern "C" const char objdirect_crc32c_ptx[];

namespace objdirect::cuda {
namespace {

constexpr std::size_t k_fallback_chunk_bytes = 8u << 20;
constexpr unsigned k_threads_per_block = 256;

const std::array<std::uint32_t, 256>& host_table() {
  static const std::array<std::uint32_t, 256> table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t i = 0; i < 256; ++i) t[i] = crc32c::table_entry(i);
    return t;
  }();
  return table;
}

struct Kernel {
  Status status{Errc::unavailable, "not loaded"};
  CUfunction function = nullptr;
};

// Loads the module once per process, in the context current on the first caller's thread (the
// runtime's primary context for the current device).
const Kernel& kernel(const CudaApi& api) {
  static Kernel* k = [&api] {
    auto* kk = new Kernel();  // never freed: the module lives until exit
    if (!crc32c_kernel_built()) {
      kk->status = Status(Errc::unavailable, "built without nvcc: no CRC32C kernel");
      return kk;
    }
    // Make sure the runtime has made its primary context current on this thread.
    api.free_device(nullptr);
    CUmodule module = nullptr;
    if (CUresult r = api.cu_module_load_data(&module, objdirect_crc32c_ptx); r != k_success) {
      kk->status = api.driver_error("cuModuleLoadData(crc32c)", r);
      return kk;
    }
    if (CUresult r = api.cu_module_get_function(&kk->function, module, "objdirect_crc32c_segments");
        r != k_success) {
      kk->status = api.driver_error("cuModuleGetFunction(crc32c)", r);
      return kk;
    }
    kk->status = Status::Ok();
    return kk;
  }();
  return *k;
}

std::uint32_t crc_value(const Checksummer& sum) {
  std::string raw = sum.digest_raw();
  std::uint32_t v = 0;
  for (char c : raw) v = (v << 8) | static_cast<std::uint8_t>(c);
  return v;
}

Result<DeviceCrc> crc_on_gpu(const CudaApi& api, const Kernel& k, const void* device_ptr,
                             std::size_t n, cudaStream_t stream) {
  const std::uint64_t seg = crc32c::segment_bytes(n);
  const std::uint64_t segments = (n + seg - 1) / seg;
  void* out = nullptr;
  if (cudaError_t e = api.malloc_device(&out, segments * sizeof(std::uint32_t)); e != k_success) {
    return api.runtime_error("cudaMalloc(crc32c segments)", e);
  }
  struct Free {
    const CudaApi& api;
    void* p;
    ~Free() { api.free_device(p); }
  } free_out{api, out};
  const void* data = device_ptr;
  std::uint64_t n64 = n;
  void* args[] = {&data, &n64, const_cast<std::uint64_t*>(&seg), &out};
  unsigned blocks =
      static_cast<unsigned>((segments + k_threads_per_block - 1) / k_threads_per_block);
  if (CUresult r = api.cu_launch_kernel(k.function, blocks, 1, 1, k_threads_per_block, 1, 1, 0,
                                        reinterpret_cast<CUstream>(stream), args, nullptr);
      r != k_success) {
    return api.driver_error("cuLaunchKernel(crc32c)", r);
  }
  std::vector<std::uint32_t> raw(segments);
  if (cudaError_t e = api.memcpy_async(raw.data(), out, segments * sizeof(std::uint32_t),
                                       k_memcpy_device_to_host, stream);
      e != k_success) {
    return api.runtime_error("cudaMemcpyAsync(crc32c segments)", e);
  }
  if (cudaError_t e = api.stream_synchronize(stream); e != k_success) {
    return api.runtime_error("cudaStreamSynchronize(crc32c)", e);
  }
  return DeviceCrc{crc32c_fold(raw, n, seg), true};
}

Result<DeviceCrc> crc_on_host(const CudaApi& api, const void* device_ptr, std::size_t n,
                              cudaStream_t stream) {
  void* staging = nullptr;
  std::size_t chunk = std::min(n, k_fallback_chunk_bytes);
  if (chunk == 0) return DeviceCrc{crc_value(Checksummer(ChecksumAlgo::crc32c)), false};
  if (cudaError_t e = api.malloc_host(&staging, chunk); e != k_success) {
    return api.runtime_error("cudaMallocHost(crc32c staging)", e);
  }
  struct Free {
    const CudaApi& api;
    void* p;
    ~Free() { api.free_host(p); }
  } free_staging{api, staging};
  Checksummer sum(ChecksumAlgo::crc32c);
  const auto* src = static_cast<const std::byte*>(device_ptr);
  for (std::size_t off = 0; off < n; off += chunk) {
    std::size_t len = std::min(chunk, n - off);
    if (cudaError_t e = api.memcpy_async(staging, src + off, len, k_memcpy_device_to_host, stream);
        e != k_success) {
      return api.runtime_error("cudaMemcpyAsync(crc32c)", e);
    }
    if (cudaError_t e = api.stream_synchronize(stream); e != k_success) {
      return api.runtime_error("cudaStreamSynchronize(crc32c)", e);
    }
    sum.update(staging, len);
  }
  return DeviceCrc{crc_value(sum), false};
}

}  // namespace

bool crc32c_kernel_built() noexcept {
  return objdirect_crc32c_ptx[0] != '\0';
}

Status crc32c_kernel_status() {
  auto api = CudaApi::get();
  if (!api.ok()) return api.status();
  return kernel(**api).status;
}

std::uint32_t crc32c_fold(std::span<const std::uint32_t> raw, std::uint64_t n,
                          std::uint64_t seg_bytes) {
  std::uint32_t reg = 0xFFFFFFFFu;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    std::uint64_t begin = i * seg_bytes;
    std::uint64_t len = std::min<std::uint64_t>(seg_bytes, n - begin);
    reg = crc32c::extend(reg, raw[i], len);
  }
  return ~reg;
}

std::uint32_t crc32c_segmented_host(std::span<const std::byte> data) {
  const std::uint64_t n = data.size();
  const std::uint64_t seg = crc32c::segment_bytes(n);
  std::vector<std::uint32_t> raw;
  for (std::uint64_t begin = 0; begin < n; begin += seg) {
    std::uint64_t len = std::min<std::uint64_t>(seg, n - begin);
    raw.push_back(crc32c::update(host_table().data(), 0,
                                 reinterpret_cast<const std::uint8_t*>(data.data()) + begin, len));
  }
  return crc32c_fold(raw, n, seg);
}

Result<DeviceCrc> crc32c_device(const void* device_ptr, std::size_t n, cudaStream_t stream,
                                bool prefer_gpu) {
  auto api = CudaApi::get();
  if (!api.ok()) return api.status();
  if (n == 0) return DeviceCrc{0, false};  // CRC32C of nothing
  // Binds the runtime's primary context to this thread (a no-op once bound): the driver calls
  // below (module load, launch) use the calling thread's current context.
  if (cudaError_t e = (*api)->free_device(nullptr); e != k_success) {
    return (*api)->runtime_error("cudaFree(0)", e);
  }
  if (prefer_gpu) {
    const Kernel& k = kernel(**api);
    if (k.status.ok()) return crc_on_gpu(**api, k, device_ptr, n, stream);
  }
  return crc_on_host(**api, device_ptr, n, stream);
}

}  // namespace objdirect::cuda
