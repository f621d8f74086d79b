// Pieces shared by the transport backends: transfer planning, the peer LRU, the back-off used by
// polling loops, and the progress thread. Private to src/transport.
//
// Thread safety: Chunk planning is pure. PeerLru is not thread-safe (the owning transport
// serialises it under its mutex). ProgressThread runs its poll function on its own thread; the
// function must do its own locking.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "transport/transport.hpp"

namespace objdirect::transport::detail {

// One contiguous piece of a transfer: `length` bytes at local (mr, offset) <-> remote
// (remote_index, addr, key).
struct Chunk {
  MemoryRegion* mr = nullptr;
  std::size_t local_offset = 0;
  std::size_t remote_index = 0;  // into the remote segment list (UCX unpacks its rkey)
  std::uint64_t remote_addr = 0;
  std::uint64_t key = 0;
  std::uint64_t length = 0;
};

// Walks both lists in step and cuts them into chunks no longer than chunk_bytes_max.
// Errors (invalid_argument): a null region, a local segment outside its region, too many
// segments, different byte totals (the message says which side is shorter), a remote range whose
// addr + length overflows.
Result<std::vector<Chunk>> plan_chunks(std::span<const LocalSegment> local,
                                       std::span<const RemoteSegment> remote,
                                       std::uint64_t chunk_bytes_max);

// Exponential back-off for polling loops: spins (yield) a little, then sleeps from 1 us doubling
// to max_sleep. reset() after useful work.
class Backoff {
 public:
  explicit Backoff(std::chrono::microseconds max_sleep = std::chrono::microseconds(200))
      : max_sleep_(max_sleep) {}
  void reset() noexcept { idle_ = 0; }
  void pause() { pause(max_sleep_); }
  // As pause(), with this call's longest sleep.
  void pause(std::chrono::microseconds max_sleep);

 private:
  std::chrono::microseconds max_sleep_;
  unsigned idle_ = 0;
};

// Sets this thread's timer slack to 1 us for its lifetime (restoring the old value), so that
// Backoff's microsecond sleeps are not stretched to the default 50 us slack.
class FineTimerSlack {
 public:
  FineTimerSlack();
  ~FineTimerSlack();
  FineTimerSlack(const FineTimerSlack&) = delete;
  FineTimerSlack& operator=(const FineTimerSlack&) = delete;

 private:
  long previous_ns_;
};

// Runs poll() until destroyed. poll returns whether it did work. While a hold() handle lives
// ("hot") it polls with Backoff (sleeps of at most sleep_max). While every live handle is a
// relaxed one and relaxed_ramp_polls_max polls in a row found nothing, it sleeps sleep_max_relaxed
// between polls instead, and a strict hold() wakes it at once (a relaxed one does not: that sleep
// is what it asks for). With no handle, after a poll that did nothing it sleeps idle_poll
// ("cold", ~0 CPU) unless a hold() wakes it first.
class ProgressThread {
 public:
  // The thread's name (/proc/<pid>/task/<tid>/comm).
  static constexpr const char* progress_thread_name = "od-progress";
  // Polls that find nothing, after one that did work, before relaxed holds alone sleep long
  // (a fallback protocol that needs this side's polls keeps the hot back-off while it works).
  static constexpr unsigned relaxed_ramp_polls_max = 128;
  ProgressThread(std::function<bool()> poll, std::chrono::microseconds sleep_max,
                 std::chrono::microseconds idle_poll,
                 std::chrono::microseconds sleep_max_relaxed = std::chrono::microseconds(0));
  ~ProgressThread();  // stops and joins
  ProgressThread(const ProgressThread&) = delete;
  ProgressThread& operator=(const ProgressThread&) = delete;

  // Keeps the thread hot until the handle is released. Never null. A handle may outlive the
  // thread (a client's token hold can outlive its transport): it then only drops a count.
  // relaxed: the poller may back off to sleep_max_relaxed while only relaxed handles live (the
  // transfer it is held for moves without this side's polls); 0 sleep_max_relaxed: as any.
  std::shared_ptr<void> hold(bool relaxed = false);
  // Handles alive (for tests).
  unsigned holds() const noexcept { return counts_->holds.load(std::memory_order_acquire); }

 private:
  std::mutex mu_;  // guards the cold wait against hold()'s wake-up
  std::condition_variable cv_;
  bool cold_ = false;  // the thread is in its cold wait (mu_)
  // Shared with the handles, so that releasing one after the thread is gone touches live memory.
  struct Counts {
    std::atomic<unsigned> holds{0};   // every live handle
    std::atomic<unsigned> strict{0};  // the live handles that are not relaxed
  };
  std::shared_ptr<Counts> counts_ = std::make_shared<Counts>();
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// A bounded LRU map from peer address bytes to a backend handle, with a count of operations in
// flight per peer so that busy peers are never evicted.
template <class Handle>
class PeerLru {
 public:
  struct Entry {
    Handle handle{};
    std::size_t inflight = 0;
    std::list<std::string>::iterator order;
  };

  explicit PeerLru(std::size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}

  // The entry for address, marked most recently used; nullptr when absent.
  Entry* find(const std::string& address) {
    auto it = map_.find(address);
    if (it == map_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second.order);
    return &it->second;
  }

  // The entry for address without touching the LRU order; nullptr when absent.
  Entry* peek(const std::string& address) {
    auto it = map_.find(address);
    return it == map_.end() ? nullptr : &it->second;
  }

  // Chooses the least recently used idle peer to make room, if the map is full. Returns false
  // with nothing chosen when full and every peer is busy; true otherwise (victim set when one
  // must go). The caller releases the victim's handle and then calls erase(victim).
  bool pick_victim(std::string& victim) const {
    victim.clear();
    if (map_.size() < capacity_) return true;
    for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
      if (map_.at(*it).inflight == 0) {
        victim = *it;
        return true;
      }
    }
    return false;
  }

  Entry& insert(const std::string& address, Handle handle) {
    order_.push_front(address);
    Entry& e = map_[address];
    e.handle = handle;
    e.inflight = 0;
    e.order = order_.begin();
    return e;
  }

  void erase(const std::string& address) {
    auto it = map_.find(address);
    if (it == map_.end()) return;
    order_.erase(it->second.order);
    map_.erase(it);
  }

  std::size_t size() const { return map_.size(); }
  template <class F>
  void for_each(F&& f) {
    for (auto& [addr, e] : map_) f(addr, e);
  }

 private:
  std::size_t capacity_;
  std::list<std::string> order_;  // front = most recently used
  std::unordered_map<std::string, Entry> map_;
};

// "<what>: <provider message>" as a transport_error Status.
Status transport_error(const std::string& what, const std::string& detail);

}  // namespace objdirect::transport::detail
