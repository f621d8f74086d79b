// The few CUDA types and constants ObjDirect needs, with or without the toolkit's headers.
//
// With OBJDIRECT_HAVE_CUDA_HEADERS (CMake found the CUDA toolkit) the types come from <cuda.h>
// and <cuda_runtime_api.h> and every constant below is checked against the toolkit's value at
// compile time. Without them the same names are declared here as opaque handles and integers,
// matching the CUDA ABI (stable since CUDA 10). No function is declared here: cuda_api.hpp
// resolves them with dlsym.
//
// Thread safety: declarations only.
#pragma once

#include <cstdint>

#if defined(OBJDIRECT_HAVE_CUDA_HEADERS)
#include <cuda.h>
#include <cuda_runtime_api.h>
#else
extern "C" {
using cudaError_t = int;
using CUresult = int;
using CUdeviceptr = unsigned long long;  // NOLINT(google-runtime-int): the CUDA ABI's type
struct CUstream_st;
struct CUevent_st;
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
using cudaStream_t = CUstream_st*;
using cudaEvent_t = CUevent_st*;
using CUstream = CUstream_st*;
using CUcontext = CUctx_st*;
using CUmodule = CUmod_st*;
using CUfunction = CUfunc_st*;
}
#endif

namespace objdirect::cuda {

inline constexpr int k_success = 0;              // cudaSuccess, CUDA_SUCCESS
inline constexpr int k_error_invalid_value = 1;  // cudaErrorInvalidValue, CUDA_ERROR_INVALID_VALUE
inline constexpr int k_memcpy_host_to_device = 1;
inline constexpr int k_memcpy_device_to_host = 2;
inline constexpr int k_memcpy_device_to_device = 3;
inline constexpr unsigned k_host_register_default = 0;
inline constexpr unsigned k_event_disable_timing = 2;
inline constexpr int k_pointer_attribute_memory_type = 2;  // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
inline constexpr int k_pointer_attribute_is_managed = 8;   // CU_POINTER_ATTRIBUTE_IS_MANAGED
inline constexpr unsigned k_memorytype_host = 1;
inline constexpr unsigned k_memorytype_device = 2;
inline constexpr unsigned k_memorytype_array = 3;
inline constexpr unsigned k_memorytype_unified = 4;
inline constexpr int k_mem_range_handle_type_dma_buf_fd = 1;

#if defined(OBJDIRECT_HAVE_CUDA_HEADERS)
static_assert(k_success == cudaSuccess && k_success == CUDA_SUCCESS);
static_assert(k_error_invalid_value == cudaErrorInvalidValue);
static_assert(k_error_invalid_value == CUDA_ERROR_INVALID_VALUE);
static_assert(k_memcpy_host_to_device == cudaMemcpyHostToDevice);
static_assert(k_memcpy_device_to_host == cudaMemcpyDeviceToHost);
static_assert(k_memcpy_device_to_device == cudaMemcpyDeviceToDevice);
static_assert(k_host_register_default == cudaHostRegisterDefault);
static_assert(k_event_disable_timing == cudaEventDisableTiming);
static_assert(k_pointer_attribute_memory_type == CU_POINTER_ATTRIBUTE_MEMORY_TYPE);
static_assert(k_pointer_attribute_is_managed == CU_POINTER_ATTRIBUTE_IS_MANAGED);
static_assert(k_memorytype_host == CU_MEMORYTYPE_HOST);
static_assert(k_memorytype_device == CU_MEMORYTYPE_DEVICE);
static_assert(k_memorytype_array == CU_MEMORYTYPE_ARRAY);
static_assert(k_memorytype_unified == CU_MEMORYTYPE_UNIFIED);
static_assert(k_mem_range_handle_type_dma_buf_fd == CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD);
static_assert(sizeof(CUdeviceptr) == 8);
#endif

}  // namespace objdirect::cuda
