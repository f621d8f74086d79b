// CRC32C of bytes in CUDA device memory, matching objdirect::Checksummer(ChecksumAlgo::crc32c)
// (ISA-L) bit for bit, so x-amz-checksum-crc32c can be computed or verified without copying the
// object back to the host.
//
// Two implementations:
//  - the kernel (crc32c_kernel.cu, built into the library as PTX when CMake finds nvcc, loaded
//    with cuModuleLoadData on first use): one thread per segment, host folds the segments;
//  - the host fallback (no PTX in this build, or the module does not load): the device bytes are
//    copied in 8 MiB chunks through a pinned buffer and summed with ISA-L on the CPU.
// The bounce path has a third, cheaper option: BounceOptions::crc32c sums the staging chunks as
// they pass (bounce.hpp).
//
// Thread safety: thread-safe (the module loads once).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "client/cuda/cuda_types.hpp"
#include "common/status.hpp"

namespace objdirect::cuda {

struct DeviceCrc {
  std::uint32_t crc32c = 0;  // standard (inverted) CRC32C
  bool on_gpu = false;       // true: computed by the kernel; false: by the host fallback
};

// Whether this build embeds the kernel's PTX.
bool crc32c_kernel_built() noexcept;
// Whether the kernel loads here (loads it on first call): OK, or why crc32c_device falls back to
// the host (unavailable: no CUDA or no PTX; io_error: cuModuleLoadData refused it, e.g. a driver
// older than the toolkit that wrote the PTX).
Status crc32c_kernel_status();

// CRC32C of [device_ptr, device_ptr+n), ordered after work queued on `stream`; returns once the
// result is known (the stream is synchronised). prefer_gpu=false forces the host fallback.
// Errors: unavailable (no CUDA), io_error (a CUDA call failed, with its message).
Result<DeviceCrc> crc32c_device(const void* device_ptr, std::size_t n, cudaStream_t stream,
                                bool prefer_gpu = true);

// Host twin of the kernel, for tests: per-segment raw registers with the kernel's segmentation
// and code (crc32c_core.hpp), then the same fold.
std::uint32_t crc32c_segmented_host(std::span<const std::byte> data);
// The fold: standard CRC32C from the segments' raw registers (all segments seg_bytes long except
// the last, total n bytes).
std::uint32_t crc32c_fold(std::span<const std::uint32_t> raw, std::uint64_t n,
                          std::uint64_t seg_bytes);

}  // namespace objdirect::cuda
