// The client's side of the RDMA data plane: one opened fabric (a transport::Transport with its
// progress thread), its registration cache, and the x-amz-rdma-token it builds for a buffer.
//
// Built from rdma.cc when the transport library is part of the build, from rdma_stub.cc
// otherwise (every fabric is then "unavailable" and the client uses HTTP).
//
// Thread safety: Fabric is thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.hpp"

namespace objdirect::client {

struct FabricOptions {
  std::uint32_t registrations_max = 256;
  std::uint64_t registered_bytes_max = 64ull << 30;
};

class Fabric {
 public:
  virtual ~Fabric() = default;
  // "libfabric:tcp", "libfabric:shm", "ucx".
  virtual const std::string& name() const = 0;
  // The x-amz-rdma-token text for exactly `buf` (one segment), expiring lifetime_s from now,
  // with a random nonce. The buffer is registered through the cache (or found in it); `hold`
  // keeps that registration alive (and the fabric's progress thread polling at full rate) and must
  // live until the request's reply has been read.
  // Errors: invalid_argument (empty buffer), transport_error (registration refused).
  virtual Result<std::string> make_token(std::span<const std::byte> buf, std::uint32_t lifetime_s,
                                         std::shared_ptr<void>& hold) = 0;
  // Pins a registration of [ptr, ptr+len) until the returned object is destroyed.
  virtual Result<std::shared_ptr<void>> pin(void* ptr, std::size_t len) = 0;
  // Whether the transport registers CUDA device memory itself (caps().cuda_memory: FI_HMEM_CUDA,
  // UCS_MEMORY_TYPE_CUDA), i.e. GPUDirect RDMA into device memory is possible.
  virtual bool cuda_memory() const { return false; }
  // make_token for CUDA device memory, registered as MemoryType::cuda (not cached: `hold` keeps
  // the registration). Errors: rdma_declined (no cuda_memory()), invalid_argument (not device
  // memory), transport_error.
  virtual Result<std::string> make_device_token(std::span<const std::byte> buf,
                                                std::uint32_t lifetime_s,
                                                std::shared_ptr<void>& hold) {
    (void)buf;
    (void)lifetime_s;
    (void)hold;
    return Status(Errc::rdma_declined, name() + " cannot register CUDA memory");
  }
};

// Whether this build has the transport library (false: open_fabric always fails).
bool fabrics_built_in() noexcept;

// Opens `name` ("libfabric:tcp" | "libfabric:shm" | "ucx") with a progress thread.
// Errors: invalid_argument (unknown name), unavailable (not built in, or the provider does not
// initialise here, with its message).
Result<std::unique_ptr<Fabric>> open_fabric(std::string_view name, const FabricOptions& options);

}  // namespace objdirect::client
