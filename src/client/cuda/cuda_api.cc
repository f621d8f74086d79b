#include "client/cuda/cuda_api.hpp"

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>

namespace objdirect::cuda {
namespace {

void* open_first(std::initializer_list<const char*> names, std::string& errors) {
  for (const char* name : names) {
    // RTLD_LOCAL: CUDA's symbols stay out of the global namespace of the host process.
    if (void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL)) return h;
    const char* e = dlerror();
    errors += std::string(e != nullptr ? e : name) + "; ";
  }
  return nullptr;
}

template <class Fn>
bool resolve(void* lib, const char* name, Fn& out, std::string& missing) {
  out = reinterpret_cast<Fn>(dlsym(lib, name));
  if (out == nullptr) missing += std::string(name) + " ";
  return out != nullptr;
}

struct Loaded {
  Result<const CudaApi*> result{Errc::unavailable, "not loaded"};
};

}  // namespace

const char* pointer_kind_name(PointerKind kind) noexcept {
  switch (kind) {
    case PointerKind::host:
      return "host";
    case PointerKind::device:
      return "device";
    case PointerKind::managed:
      return "managed";
    case PointerKind::unknown:
      break;
  }
  return "unknown";
}

Status CudaApi::runtime_error(const char* what, cudaError_t err) const {
  const char* msg = get_error_string != nullptr ? get_error_string(err) : nullptr;
  return {Errc::io_error, std::string(what) + ": " + (msg != nullptr ? msg : "CUDA runtime error") +
                              " (" + std::to_string(static_cast<int>(err)) + ")"};
}

Status CudaApi::driver_error(const char* what, CUresult err) const {
  const char* msg = nullptr;
  if (cu_get_error_string != nullptr) cu_get_error_string(err, &msg);
  return {Errc::io_error, std::string(what) + ": " + (msg != nullptr ? msg : "CUDA driver error") +
                              " (" + std::to_string(static_cast<int>(err)) + ")"};
}

Status CudaApi::bind_current_device(int device) const {
  cudaError_t err = set_device(device);
  if (err != k_success) return runtime_error("cudaSetDevice", err);
  return Status::Ok();
}

Result<const CudaApi*> CudaApi::get() {
  static Loaded* loaded = [] {
    auto* l = new Loaded();  // never freed: CUDA must stay loaded until exit
    std::string errors;
    // Test hooks (tests/client/fake_cuda): load these files instead of the system's libraries.
    const char* rt_env = std::getenv("OBJDIRECT_CUDART_LIBRARY");
    const char* drv_env = std::getenv("OBJDIRECT_CUDA_LIBRARY");
    void* rt = rt_env != nullptr && *rt_env != '\0'
                   ? open_first({rt_env}, errors)
                   : open_first({"libcudart.so", "libcudart.so.13", "libcudart.so.12",
                                 "libcudart.so.11.0"},
                                errors);
    if (rt == nullptr) {
      l->result = Status(Errc::unavailable, "libcudart not found: " + errors);
      return l;
    }
    void* drv = drv_env != nullptr && *drv_env != '\0'
                    ? open_first({drv_env}, errors)
                    : open_first({"libcuda.so.1", "libcuda.so"}, errors);
    if (drv == nullptr) {
      l->result = Status(Errc::unavailable, "libcuda.so.1 not found (no NVIDIA driver): " + errors);
      return l;
    }
    auto* api = new CudaApi();
    std::string missing;
    resolve(rt, "cudaGetDeviceCount", api->get_device_count, missing);
    resolve(rt, "cudaSetDevice", api->set_device, missing);
    resolve(rt, "cudaGetDevice", api->get_device, missing);
    resolve(rt, "cudaMalloc", api->malloc_device, missing);
    resolve(rt, "cudaFree", api->free_device, missing);
    resolve(rt, "cudaMallocHost", api->malloc_host, missing);
    resolve(rt, "cudaFreeHost", api->free_host, missing);
    resolve(rt, "cudaHostRegister", api->host_register, missing);
    resolve(rt, "cudaHostUnregister", api->host_unregister, missing);
    resolve(rt, "cudaMemcpy", api->memcpy_sync, missing);
    resolve(rt, "cudaMemcpyAsync", api->memcpy_async, missing);
    resolve(rt, "cudaMemset", api->memset_sync, missing);
    resolve(rt, "cudaStreamCreate", api->stream_create, missing);
    resolve(rt, "cudaStreamDestroy", api->stream_destroy, missing);
    resolve(rt, "cudaStreamSynchronize", api->stream_synchronize, missing);
    resolve(rt, "cudaEventCreateWithFlags", api->event_create_with_flags, missing);
    resolve(rt, "cudaEventDestroy", api->event_destroy, missing);
    resolve(rt, "cudaEventRecord", api->event_record, missing);
    resolve(rt, "cudaEventSynchronize", api->event_synchronize, missing);
    resolve(rt, "cudaDeviceSynchronize", api->device_synchronize, missing);
    resolve(rt, "cudaGetErrorString", api->get_error_string, missing);
    resolve(drv, "cuInit", api->cu_init, missing);
    resolve(drv, "cuPointerGetAttribute", api->cu_pointer_get_attribute, missing);
    resolve(drv, "cuCtxGetCurrent", api->cu_ctx_get_current, missing);
    resolve(drv, "cuModuleLoadData", api->cu_module_load_data, missing);
    resolve(drv, "cuModuleGetFunction", api->cu_module_get_function, missing);
    resolve(drv, "cuLaunchKernel", api->cu_launch_kernel, missing);
    resolve(drv, "cuGetErrorString", api->cu_get_error_string, missing);
    std::string optional_missing;  // dmabuf export: CUDA 11.7+ only
    resolve(drv, "cuMemGetHandleForAddressRange", api->cu_mem_get_handle_for_address_range,
            optional_missing);
    if (!missing.empty()) {
      l->result = Status(Errc::unavailable, "CUDA libraries lack: " + missing);
      return l;
    }
    if (CUresult r = api->cu_init(0); r != k_success) {
      Status st = api->driver_error("cuInit failed (no GPU or driver mismatch?)", r);
      l->result = Status(Errc::unavailable, st.message());
      return l;
    }
    int count = 0;
    if (cudaError_t e = api->get_device_count(&count); e != k_success || count == 0) {
      // e.g. "CUDA driver version is insufficient for CUDA runtime version (35)": a libcudart
      // newer than the driver.
      std::string why = e != k_success ? api->runtime_error("cudaGetDeviceCount", e).message()
                                       : std::string("cudaGetDeviceCount found 0 devices");
      l->result = Status(Errc::unavailable, "no CUDA device: " + why);
      return l;
    }
    l->result = static_cast<const CudaApi*>(api);
    return l;
  }();
  return loaded->result;
}

bool cuda_available() noexcept {
  return CudaApi::get().ok();
}

PointerKind classify_pointer(const void* ptr) noexcept {
  auto api = CudaApi::get();
  if (!api.ok() || ptr == nullptr) return PointerKind::unknown;
  const CudaApi& a = **api;
  unsigned memory_type = 0;
  CUresult r = a.cu_pointer_get_attribute(&memory_type, k_pointer_attribute_memory_type,
                                          reinterpret_cast<CUdeviceptr>(ptr));
  if (r == k_error_invalid_value) return PointerKind::host;  // CUDA never saw it: plain malloc
  if (r != k_success) return PointerKind::unknown;
  unsigned is_managed = 0;
  if (a.cu_pointer_get_attribute(&is_managed, k_pointer_attribute_is_managed,
                                 reinterpret_cast<CUdeviceptr>(ptr)) == k_success &&
      is_managed != 0) {
    return PointerKind::managed;
  }
  switch (memory_type) {
    case k_memorytype_host:
      return PointerKind::host;  // cudaMallocHost / cudaHostRegister
    case k_memorytype_device:
    case k_memorytype_array:
      return PointerKind::device;
    case k_memorytype_unified:
      return PointerKind::managed;
    default:
      return PointerKind::unknown;
  }
}

namespace {

// How many shared objects the process has loaded so far (glibc's dlpi_adds, which only grows),
// or 0 when the C library does not say.
std::uint64_t objects_loaded() noexcept {
  std::uint64_t adds = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t size, void* out) -> int {
        if (size >= offsetof(dl_phdr_info, dlpi_adds) + sizeof(info->dlpi_adds)) {
          *static_cast<std::uint64_t*>(out) = info->dlpi_adds;
        }
        return 1;  // every entry carries the counter: the first is enough
      },
      &adds);
  return adds;
}

}  // namespace

bool cuda_loaded_in_process() noexcept {
  static std::atomic<bool> loaded{false};
  // objects_loaded() at the last "no": while no library has been loaded since, it still holds.
  // Every data call asks (classify_buffer), and a dlopen(RTLD_NOLOAD) of a library that is not
  // loaded searches the library path: file opens under the loader's lock, which every thread
  // of a batch takes (perf of get_many of 4 KiB objects over HTTP: the dynamic loader 7.3% of
  // the client's samples before this cache, 0.2% after).
  static std::atomic<std::uint64_t> no_at{0};
  if (loaded.load(std::memory_order_acquire)) return true;
  const std::uint64_t adds = objects_loaded();
  if (adds != 0 && no_at.load(std::memory_order_acquire) == adds) return false;
  const char* drv_env = std::getenv("OBJDIRECT_CUDA_LIBRARY");
  std::initializer_list<const char*> names = {"libcuda.so.1", "libcuda.so"};
  std::initializer_list<const char*> env_names = {drv_env};
  bool found = false;
  for (const char* name : (drv_env != nullptr && *drv_env != '\0') ? env_names : names) {
    // RTLD_NOLOAD: only asks whether the library is already mapped; loads nothing.
    if (void* h = dlopen(name, RTLD_LAZY | RTLD_NOLOAD)) {
      dlclose(h);  // drops the reference dlopen just took
      found = true;
      break;
    }
  }
  if (found && CudaApi::get().ok()) {
    loaded.store(true, std::memory_order_release);
    return true;
  }
  no_at.store(adds, std::memory_order_release);
  return false;
}

PointerKind classify_buffer(const void* ptr) noexcept {
  if (ptr == nullptr || !cuda_loaded_in_process()) return PointerKind::host;
  PointerKind kind = classify_pointer(ptr);
  return kind == PointerKind::unknown ? PointerKind::host : kind;
}

Result<int> export_dmabuf(void* ptr, std::size_t len) {
  auto api = CudaApi::get();
  if (!api.ok()) return api.status();
  const CudaApi& a = **api;
  if (a.cu_mem_get_handle_for_address_range == nullptr) {
    return Status(Errc::unavailable, "driver has no cuMemGetHandleForAddressRange (CUDA < 11.7)");
  }
  int fd = -1;
  CUresult r = a.cu_mem_get_handle_for_address_range(&fd, reinterpret_cast<CUdeviceptr>(ptr), len,
                                                     k_mem_range_handle_type_dma_buf_fd, 0);
  if (r != k_success) return a.driver_error("cuMemGetHandleForAddressRange", r);
  return fd;
}

}  // namespace objdirect::cuda
