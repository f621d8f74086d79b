// The CUDA driver and runtime, loaded at run time.
//
// libobjdirect has no link-time dependency on CUDA: the first call to CudaApi::get() dlopens
// libcudart (libcudart.so, .so.13, .so.12, .so.11) and libcuda.so.1 (or, for tests, the files
// named by OBJDIRECT_CUDART_LIBRARY and OBJDIRECT_CUDA_LIBRARY) and resolves the handful of
// functions ObjDirect uses (copies, events, pinned host memory, pointer attributes, module
// loading for the CRC32C kernel, dmabuf export). Without them every entry point reports
// Errc::unavailable and host memory keeps working as before.
//
// Types: when CMake's find_package(CUDAToolkit) finds the headers (OBJDIRECT_HAVE_CUDA_HEADERS),
// cuda_types.hpp checks our constants against them; the functions themselves are always
// declared here (only types come from the toolkit), so both configurations compile the same code.
//
// Thread safety: CudaApi::get() is thread-safe (loads once); the function pointers are immutable
// afterwards. The CUDA functions keep CUDA's own thread-safety rules.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "client/cuda/cuda_types.hpp"
#include "common/status.hpp"

namespace objdirect::cuda {

// Where a pointer lives, as the driver reports it.
enum class PointerKind : std::uint8_t {
  host,     // pageable or pinned host memory, or memory CUDA does not know (plain malloc)
  device,   // cudaMalloc / cuMemAlloc / cuMemCreate memory: never touch it from the CPU
  managed,  // cudaMallocManaged: CPU-accessible, but copies go through CUDA for speed
  unknown,  // CUDA is not available, or the driver refused the query
};
// "host", "device", "managed", "unknown".
const char* pointer_kind_name(PointerKind kind) noexcept;

class CudaApi {
 public:
  // The process-wide loaded API, or unavailable (with the dlopen/dlsym/cuInit message) when the
  // libraries or a GPU are missing. The result is computed once and cached.
  // Errors: unavailable ("libcudart not found: ...", "cuInit failed: ... (no GPU?)",
  // "no CUDA device").
  static Result<const CudaApi*> get();

  // Runtime API (libcudart). Signatures as documented by NVIDIA; handles are opaque pointers.
  cudaError_t (*get_device_count)(int*) = nullptr;
  cudaError_t (*set_device)(int) = nullptr;
  cudaError_t (*get_device)(int*) = nullptr;
  cudaError_t (*malloc_device)(void**, std::size_t) = nullptr;
  cudaError_t (*free_device)(void*) = nullptr;
  cudaError_t (*malloc_host)(void**, std::size_t) = nullptr;
  cudaError_t (*free_host)(void*) = nullptr;
  cudaError_t (*host_register)(void*, std::size_t, unsigned) = nullptr;
  cudaError_t (*host_unregister)(void*) = nullptr;
  cudaError_t (*memcpy_sync)(void*, const void*, std::size_t, int kind) = nullptr;
  cudaError_t (*memcpy_async)(void*, const void*, std::size_t, int kind, cudaStream_t) = nullptr;
  cudaError_t (*memset_sync)(void*, int, std::size_t) = nullptr;
  cudaError_t (*stream_create)(cudaStream_t*) = nullptr;
  cudaError_t (*stream_destroy)(cudaStream_t) = nullptr;
  cudaError_t (*stream_synchronize)(cudaStream_t) = nullptr;
  cudaError_t (*event_create_with_flags)(cudaEvent_t*, unsigned) = nullptr;
  cudaError_t (*event_destroy)(cudaEvent_t) = nullptr;
  cudaError_t (*event_record)(cudaEvent_t, cudaStream_t) = nullptr;
  cudaError_t (*event_synchronize)(cudaEvent_t) = nullptr;
  cudaError_t (*device_synchronize)() = nullptr;
  const char* (*get_error_string)(cudaError_t) = nullptr;

  // Driver API (libcuda.so.1).
  CUresult (*cu_init)(unsigned) = nullptr;
  CUresult (*cu_pointer_get_attribute)(void*, int attribute, CUdeviceptr) = nullptr;
  CUresult (*cu_ctx_get_current)(CUcontext*) = nullptr;
  CUresult (*cu_module_load_data)(CUmodule*, const void*) = nullptr;
  CUresult (*cu_module_get_function)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*cu_launch_kernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                               unsigned, unsigned, CUstream, void**, void**) = nullptr;
  CUresult (*cu_get_error_string)(CUresult, const char**) = nullptr;
  // Present from CUDA 11.7 on; nullptr otherwise (dmabuf export is then unavailable).
  CUresult (*cu_mem_get_handle_for_address_range)(void*, CUdeviceptr, std::size_t, int,
                                                  unsigned long long) = nullptr;

  // A Status for a failed runtime/driver call: Errc::io_error, "<what>: <CUDA message> (<code>)".
  Status runtime_error(const char* what, cudaError_t err) const;
  Status driver_error(const char* what, CUresult err) const;

  // Makes the runtime's primary context current on this thread (cudaSetDevice on the current
  // device), so that driver calls made from ObjDirect's threads see the caller's context.
  Status bind_current_device(int device) const;

 private:
  CudaApi() = default;
};

// Whether CUDA is usable here (CudaApi::get() succeeds). Cheap after the first call.
bool cuda_available() noexcept;

// Classifies ptr via cuPointerGetAttribute(MEMORY_TYPE, IS_MANAGED). Returns host for memory the
// driver does not know (CUDA_ERROR_INVALID_VALUE: plain malloc), unknown for nullptr, when CUDA
// is unavailable (the first call pays for one dlopen attempt, later calls are cheap), or when the
// driver refuses the query.
PointerKind classify_pointer(const void* ptr) noexcept;

// Whether the CUDA driver is already loaded in this process (by the application, PyTorch, CuPy,
// ...) and usable. Never loads it: a process that has not loaded CUDA cannot hold device pointers,
// so host-only programs never pay for (or depend on) CUDA. Once true, stays true.
bool cuda_loaded_in_process() noexcept;

// What libobjdirect's Client asks for every data buffer: host when CUDA is not loaded in the
// process (cuda_loaded_in_process()) or the driver does not know the pointer, else
// classify_pointer()'s answer (unknown is reported as host: the driver refused the query, so the
// pointer is no device memory it could copy either).
PointerKind classify_buffer(const void* ptr) noexcept;

// Exports [ptr, ptr+len) of device memory as a dmabuf file descriptor
// (cuMemGetHandleForAddressRange, for ibv_reg_dmabuf_mr / FI_HMEM dmabuf registration). The
// caller owns the fd and closes it. ptr and len should be page (64 KiB GPU page) aligned.
// Errors: unavailable (no CUDA, or a driver older than 11.7), io_error (the driver refused:
// no dmabuf support in the kernel module, unaligned range).
Result<int> export_dmabuf(void* ptr, std::size_t len);

}  // namespace objdirect::cuda
