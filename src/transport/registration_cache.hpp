// RegistrationCache: a bounded LRU of memory registrations keyed by (ptr, len, memory type), so
// that a client re-using the same buffers registers each once. Registration is nearly free on
// tcp and shm but pins pages on verbs and EFA.
//
// Entries hold a shared_ptr to the region; evicting an entry only drops the cache's reference,
// so regions still used by a transfer stay registered until that transfer lets go.
// A buffer that is freed must be invalidate()d first: otherwise a later buffer at the same
// address could be served a stale registration.
//
// Thread safety: thread-safe (one internal mutex); registration happens outside the lock.
#pragma once

#include <cstddef>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "transport/transport.hpp"

namespace objdirect::limits {
inline constexpr std::size_t registration_cache_entries_max = 1024;
}  // namespace objdirect::limits

namespace objdirect::transport {

class RegistrationCache {
 public:
  // transport must outlive the cache. entries_max is clamped to
  // [1, limits::registration_cache_entries_max]; bytes_max (0 = unbounded) caps the total
  // registered length held by the cache.
  RegistrationCache(Transport& transport, std::size_t entries_max, std::size_t bytes_max = 0);

  // The cached region for exactly (ptr, len, type), or a fresh registration that is then cached
  // (evicting least recently used entries beyond the bounds).
  // Errors: those of Transport::register_memory.
  Result<std::shared_ptr<MemoryRegion>> get(void* ptr, std::size_t len, MemoryType type);

  // Drops every entry overlapping [ptr, ptr+len). Returns how many were dropped.
  std::size_t invalidate(const void* ptr, std::size_t len);
  void clear();

  std::size_t size() const;
  std::size_t bytes() const;
  std::size_t hits() const;
  std::size_t misses() const;

 private:
  using Key = std::tuple<std::uintptr_t, std::size_t, MemoryType>;
  struct Entry {
    std::shared_ptr<MemoryRegion> region;
    std::list<Key>::iterator order;
  };
  void evict_locked();

  Transport& transport_;
  const std::size_t entries_max_;
  const std::size_t bytes_max_;
  mutable std::mutex mu_;
  std::list<Key> order_;  // front = most recently used
  std::map<Key, Entry> map_;
  std::size_t bytes_ = 0;
  std::size_t hits_ = 0;
  std::size_t misses_ = 0;
};

}  // namespace objdirect::transport
