// Choosing how a buffer reaches the fabric: directly (GPUDirect RDMA: the transport registers
// device memory itself) or through the bounce path (bounce.hpp), and the direct registration.
//
// The transport is always asked (Capabilities::cuda_memory), never assumed: Debian's libfabric
// and UCX are built without CUDA, so here the answer is always "bounce"; a libfabric with
// FI_HMEM_CUDA or a UCX with UCS_MEMORY_TYPE_CUDA flips it without code changes.
//
// Thread safety: thread-safe (pure, or the transport's own thread safety).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "client/cuda/cuda_api.hpp"
#include "common/status.hpp"
#include "transport/transport.hpp"

namespace objdirect::cuda {

enum class DevicePath : std::uint8_t {
  host,    // not device memory: the normal host path (register and RDMA, or HTTP)
  direct,  // device memory, and the transport registers it (MemoryType::cuda)
  bounce,  // device or managed memory through pinned staging buffers
};
// "host", "direct", "bounce".
const char* device_path_name(DevicePath path) noexcept;

// host for PointerKind::host (and unknown: CUDA absent means the pointer cannot be device
// memory); direct for device memory when caps.cuda_memory; bounce otherwise (managed memory always
// bounces: RDMA into pages that may migrate needs ODP, which we do not assume).
DevicePath choose_path(PointerKind kind, const transport::Capabilities& caps) noexcept;

// Registers device memory with the transport as MemoryType::cuda (GPUDirect RDMA).
// Errors: rdma_declined (caps().cuda_memory is false: use the bounce path), invalid_argument
// (ptr is not device memory), transport_error (the provider refused).
Result<std::shared_ptr<transport::MemoryRegion>> register_device_memory(
    transport::Transport& transport, void* ptr, std::size_t len);

}  // namespace objdirect::cuda
