// A bounded LRU cache of memory registrations, so that repeated transfers into the same buffer
// skip registration (free on tcp/shm here, but it pins pages on verbs and EFA).
//
// Entries cover [base, base+len). acquire() returns an entry covering the asked range, or makes
// one with the RegisterFn. Two kinds of use:
//  - pinned: held by a user's MemoryHandle (pin()/unpin()); never evicted while pinned, and
//    dropped as soon as the last pin goes unless it is also `cached`;
//  - cached: made for a buffer the user did not register; kept for reuse and evicted least
//    recently used first when there are more than entries_max entries or bytes_max bytes.
//    The owner decides whether unregistered buffers may be cached at all: a registration that
//    pins physical pages goes stale when the memory is freed and reused, which the cache cannot
//    see (the client caches them only on fabrics whose registrations pin nothing).
// Evicting an entry drops the cache's reference only: a transfer still holding the registration
// (a shared_ptr) keeps it valid until it ends.
//
// Thread safety: thread-safe (one mutex); RegisterFn runs under it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>

#include "common/status.hpp"

namespace objdirect::client {

template <class Reg>
class RegistrationCache {
 public:
  using RegisterFn = std::function<Result<std::shared_ptr<Reg>>(void* ptr, std::size_t len)>;

  struct Hit {
    std::shared_ptr<Reg> reg;
    std::uintptr_t base = 0;  // start of the registration (offsets into it count from here)
  };

  RegistrationCache(RegisterFn fn, std::size_t entries_max, std::uint64_t bytes_max)
      : fn_(std::move(fn)), entries_max_(entries_max), bytes_max_(bytes_max) {}

  // A registration covering [ptr, ptr+len), moved to most recently used. A new one is kept
  // (`cache`) or handed out only to the caller (!cache and nothing covers the range).
  // Errors: those of RegisterFn.
  Result<Hit> acquire(void* ptr, std::size_t len, bool cache) {
    std::lock_guard lk(mu_);
    if (auto it = find(ptr, len); it != lru_.end()) {
      lru_.splice(lru_.begin(), lru_, it);
      ++hits_;
      return Hit{it->reg, it->base};
    }
    ++misses_;
    auto reg = fn_(ptr, len);
    if (!reg.ok()) return reg.status();
    Hit hit{*reg, reinterpret_cast<std::uintptr_t>(ptr)};
    if (cache) {
      lru_.push_front(Entry{hit.base, len, hit.reg, 0, true});
      bytes_ += len;
      evict();
    }
    return hit;
  }

  // Registers [ptr, ptr+len) (or finds a covering entry) and pins it until unpin(ptr, len).
  Result<Hit> pin(void* ptr, std::size_t len) {
    std::lock_guard lk(mu_);
    auto it = find(ptr, len);
    if (it == lru_.end()) {
      auto reg = fn_(ptr, len);
      if (!reg.ok()) return reg.status();
      lru_.push_front(Entry{reinterpret_cast<std::uintptr_t>(ptr), len, *reg, 0, false});
      bytes_ += len;
      it = lru_.begin();
    } else {
      lru_.splice(lru_.begin(), lru_, it);
    }
    ++it->pins;
    Hit hit{it->reg, it->base};
    evict();
    return hit;
  }

  // Undoes one pin() of the entry that pin(ptr, len) returned.
  void unpin(std::uintptr_t base) {
    std::lock_guard lk(mu_);
    for (auto it = lru_.begin(); it != lru_.end(); ++it) {
      if (it->base == base && it->pins > 0) {
        if (--it->pins == 0 && !it->cached) {
          bytes_ -= it->len;
          lru_.erase(it);
        }
        break;
      }
    }
    evict();
  }

  // Drops every unpinned entry that overlaps [ptr, ptr+len), whatever its kind, so that the next
  // acquire() registers afresh (the client revokes a buffer's registration after a failed RDMA
  // request: once the last holder lets go, the registration is closed and its key admits no
  // more writes). Pinned entries stay (the user's MemoryHandle owns them). Returns the number
  // of entries dropped.
  std::size_t revoke(const void* ptr, std::size_t len) {
    std::lock_guard lk(mu_);
    const auto p = reinterpret_cast<std::uintptr_t>(ptr);
    std::size_t dropped = 0;
    for (auto it = lru_.begin(); it != lru_.end();) {
      const bool overlaps = p < it->base + it->len && it->base < p + len;
      if (overlaps && it->pins == 0) {
        bytes_ -= it->len;
        it = lru_.erase(it);
        ++dropped;
      } else {
        ++it;
      }
    }
    return dropped;
  }

  std::size_t entries() const {
    std::lock_guard lk(mu_);
    return lru_.size();
  }
  std::uint64_t bytes() const {
    std::lock_guard lk(mu_);
    return bytes_;
  }
  std::uint64_t hits() const {
    std::lock_guard lk(mu_);
    return hits_;
  }
  std::uint64_t misses() const {
    std::lock_guard lk(mu_);
    return misses_;
  }

 private:
  struct Entry {
    std::uintptr_t base;
    std::size_t len;
    std::shared_ptr<Reg> reg;
    std::uint32_t pins;
    bool cached;
  };

  typename std::list<Entry>::iterator find(void* ptr, std::size_t len) {
    auto p = reinterpret_cast<std::uintptr_t>(ptr);
    for (auto it = lru_.begin(); it != lru_.end(); ++it) {
      if (p >= it->base && len <= it->len && p - it->base <= it->len - len) return it;
    }
    return lru_.end();
  }

  // Drops least recently used unpinned entries until within both bounds (pinned entries may
  // keep the cache above them: the user asked for those registrations).
  void evict() {
    auto it = lru_.end();
    while ((lru_.size() > entries_max_ || bytes_ > bytes_max_) && it != lru_.begin()) {
      --it;
      if (it->pins == 0) {
        bytes_ -= it->len;
        it = lru_.erase(it);
      }
    }
  }

  RegisterFn fn_;
  const std::size_t entries_max_;
  const std::uint64_t bytes_max_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recently used first
  std::uint64_t bytes_ = 0;
  std::uint64_t hits_ = 0;
  std::uint64_t misses_ = 0;
};

}  // namespace objdirect::client
