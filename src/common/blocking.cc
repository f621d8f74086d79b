#include "common/blocking.hpp"

#include <chrono>

namespace objdirect {
namespace {
thread_local BlockingSlot* tls_slot = nullptr;
thread_local unsigned tls_depth = 0;
}  // namespace

void set_thread_blocking_slot(BlockingSlot* slot) noexcept {
  tls_slot = slot;
  tls_depth = 0;
}

std::int64_t blocking_clock_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

BlockingScope::BlockingScope(bool certain) noexcept : slot_(nullptr) {
  if (tls_slot == nullptr) return;
  if (tls_depth++ > 0) return;
  slot_ = tls_slot;
  slot_->entered.store(slot_->entered.load(std::memory_order_relaxed) + 1,
                       std::memory_order_relaxed);
  if (certain) slot_->certain.store(true, std::memory_order_relaxed);
  // Never 0 (0 means "not blocked"): the steady clock counts from boot, well past 1 ns.
  slot_->blocked_since_ns.store(blocking_clock_ns() | 1, std::memory_order_release);
  if (certain && slot_->poke != nullptr) slot_->poke(slot_->poke_ctx);
}

BlockingScope::~BlockingScope() {
  if (tls_slot == nullptr) return;
  --tls_depth;
  if (slot_ == nullptr) return;
  slot_->blocked_since_ns.store(0, std::memory_order_release);
  slot_->certain.store(false, std::memory_order_relaxed);
}

}  // namespace objdirect
