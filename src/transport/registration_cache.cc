#include "transport/registration_cache.hpp"

#include <algorithm>

namespace objdirect::transport {

RegistrationCache::RegistrationCache(Transport& transport, std::size_t entries_max,
                                     std::size_t bytes_max)
    : transport_(transport),
      entries_max_(std::clamp<std::size_t>(entries_max, 1, limits::registration_cache_entries_max)),
      bytes_max_(bytes_max) {}

Result<std::shared_ptr<MemoryRegion>> RegistrationCache::get(void* ptr, std::size_t len,
                                                             MemoryType type) {
  const Key key{reinterpret_cast<std::uintptr_t>(ptr), len, type};
  {
    std::lock_guard lock(mu_);
    auto it = map_.find(key);
    if (it != map_.end()) {
      ++hits_;
      order_.splice(order_.begin(), order_, it->second.order);
      return it->second.region;
    }
    ++misses_;
  }
  // Register outside the lock: on verbs/EFA it pins pages and can take milliseconds.
  auto region = transport_.register_memory(ptr, len, type);
  if (!region.ok()) return region.status();
  std::lock_guard lock(mu_);
  auto it = map_.find(key);
  if (it != map_.end()) return it->second.region;  // another thread won the race
  order_.push_front(key);
  map_.emplace(key, Entry{*region, order_.begin()});
  bytes_ += len;
  evict_locked();
  return *region;
}

void RegistrationCache::evict_locked() {
  // Never evict the entry just inserted (front), even if it alone exceeds bytes_max.
  while (order_.size() > 1 &&
         (map_.size() > entries_max_ || (bytes_max_ != 0 && bytes_ > bytes_max_))) {
    auto it = map_.find(order_.back());
    bytes_ -= std::get<1>(it->first);
    map_.erase(it);
    order_.pop_back();
  }
}

std::size_t RegistrationCache::invalidate(const void* ptr, std::size_t len) {
  const auto lo = reinterpret_cast<std::uintptr_t>(ptr);
  const auto hi = lo + len;
  std::lock_guard lock(mu_);
  std::size_t dropped = 0;
  for (auto it = map_.begin(); it != map_.end();) {
    const auto start = std::get<0>(it->first);
    const auto end = start + std::get<1>(it->first);
    if (start < hi && lo < end) {
      bytes_ -= std::get<1>(it->first);
      order_.erase(it->second.order);
      it = map_.erase(it);
      ++dropped;
    } else {
      ++it;
    }
  }
  return dropped;
}

void RegistrationCache::clear() {
  std::lock_guard lock(mu_);
  map_.clear();
  order_.clear();
  bytes_ = 0;
}

std::size_t RegistrationCache::size() const {
  std::lock_guard lock(mu_);
  return map_.size();
}
std::size_t RegistrationCache::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}
std::size_t RegistrationCache::hits() const {
  std::lock_guard lock(mu_);
  return hits_;
}
std::size_t RegistrationCache::misses() const {
  std::lock_guard lock(mu_);
  return misses_;
}

}  // namespace objdirect::transport
