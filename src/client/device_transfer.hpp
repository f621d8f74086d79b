// The Client's staging for CUDA device memory (docs/gpu.md): reusable bounce contexts (pinned
// staging pools registered once with the client's fabric), leased one per device transfer.
//
// The transfer logic itself (which requests, If-Match pinning, multipart) is in client.cc next to
// the host paths; this file owns the pools and their bound (limits::client_staging_pools_max).
//
// Thread safety: DeviceStaging is thread-safe; a Lease is used by one thread at a time.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "client/cuda/bounce.hpp"
#include "common/status.hpp"

namespace objdirect::limits {
// Staging pools (BounceContexts) one Client keeps for device-memory transfers; that many device
// transfers run at once, further ones wait for a free pool. Each pool is
// client_staging_slots x the part size of pinned host memory.
inline constexpr std::size_t client_staging_pools_max = 4;
inline constexpr std::size_t client_staging_slots = 4;
}  // namespace objdirect::limits

namespace objdirect::client {

class DeviceStaging {
 public:
  // A pool taken for one transfer; given back when destroyed.
  class Lease {
   public:
    Lease(DeviceStaging* owner, std::unique_ptr<cuda::BounceContext> ctx)
        : owner_(owner), ctx_(std::move(ctx)) {}
    Lease(Lease&&) = default;
    Lease& operator=(Lease&&) = delete;
    Lease(const Lease&) = delete;
    ~Lease();
    cuda::BounceContext& operator*() const noexcept { return *ctx_; }
    cuda::BounceContext* operator->() const noexcept { return ctx_.get(); }

   private:
    DeviceStaging* owner_;
    std::unique_ptr<cuda::BounceContext> ctx_;
  };

  // pools_max: at most that many pools exist at once (clamped to 1..client_staging_pools_max).
  explicit DeviceStaging(std::size_t pools_max = limits::client_staging_pools_max);

  // A pool of `chunk_bytes` slots: a free one of that size, else a new one (registered through
  // register_fn; a free pool of another size is dropped first when at the bound), else waits.
  // Errors: those of BounceContext::create (unavailable without CUDA, no_space, the fabric's).
  Result<Lease> acquire(std::size_t chunk_bytes, const cuda::StagingPool::RegisterFn& register_fn);

  // Pools that exist now (free or leased).
  std::size_t pools() const;

 private:
  void give_back(std::unique_ptr<cuda::BounceContext> ctx);

  const std::size_t pools_max_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<cuda::BounceContext>> free_;
  std::size_t live_ = 0;
};

}  // namespace objdirect::client
