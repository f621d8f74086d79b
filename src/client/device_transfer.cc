#include "client/device_transfer.hpp"

#include <algorithm>

namespace objdirect::client {

DeviceStaging::Lease::~Lease() {
  if (ctx_) owner_->give_back(std::move(ctx_));
}

DeviceStaging::DeviceStaging(std::size_t pools_max)
    : pools_max_(std::clamp<std::size_t>(pools_max, 1, limits::client_staging_pools_max)) {}

std::size_t DeviceStaging::pools() const {
  std::lock_guard lk(mu_);
  return live_;
}

void DeviceStaging::give_back(std::unique_ptr<cuda::BounceContext> ctx) {
  {
    std::lock_guard lk(mu_);
    free_.push_back(std::move(ctx));
  }
  cv_.notify_one();
}

Result<DeviceStaging::Lease> DeviceStaging::acquire(
    std::size_t chunk_bytes, const cuda::StagingPool::RegisterFn& register_fn) {
  std::unique_lock lk(mu_);
  for (;;) {
    auto same = std::find_if(free_.begin(), free_.end(),
                             [&](const auto& c) { return c->pool().chunk_bytes() == chunk_bytes; });
    if (same != free_.end()) {
      auto ctx = std::move(*same);
      free_.erase(same);
      return Lease(this, std::move(ctx));
    }
    if (live_ >= pools_max_ && !free_.empty()) {
      // At the bound with a free pool of another size: replace it.
      free_.erase(free_.begin());
      --live_;
    }
    if (live_ < pools_max_) break;
    cv_.wait(lk);
  }
  ++live_;
  lk.unlock();
  // Pinned allocation and fabric registration outside the lock (they may take milliseconds).
  auto ctx = cuda::BounceContext::create({chunk_bytes, limits::client_staging_slots}, register_fn);
  if (!ctx.ok()) {
    {
      std::lock_guard relock(mu_);
      --live_;
    }
    cv_.notify_one();
    return ctx.status();
  }
  return Lease(this, std::move(*ctx));
}

}  // namespace objdirect::client
