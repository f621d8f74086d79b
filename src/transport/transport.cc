#include "transport/transport.hpp"

#include <openssl/rand.h>
#include <sys/prctl.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <utility>

#include "common/assert.hpp"
#include "common/checksum.hpp"
#include "transport/detail.hpp"
#include "transport/libfabric/libfabric_transport.hpp"
#include "transport/ucx/ucx_transport.hpp"

namespace objdirect::transport {

std::uint64_t MemoryRegion::remote_address(std::size_t offset) const noexcept {
  if (addressing_ == Addressing::offset) return offset;
  return reinterpret_cast<std::uintptr_t>(ptr_) + offset;
}

token::Segment MemoryRegion::remote_segment(std::size_t offset, std::size_t length) const {
  return token::Segment{remote_address(offset), length, key_, packed_rkey_};
}

token::Token make_token(const Transport& transport, std::vector<RemoteSegment> segments,
                        MemoryType type, std::uint64_t expires_unix_s) {
  const Capabilities& caps = transport.caps();
  token::Token t;
  t.backend = caps.backend;
  t.provider = caps.provider.substr(0, limits::token_provider_bytes_max);
  t.addressing = caps.addressing;
  t.memory_type = type;
  t.expires_unix_s = expires_unix_s;
  t.endpoint = transport.local_address();
  // The nonce only has to be unpredictable enough to tell tokens apart and to refuse replays;
  // it protects nothing by itself (SigV4 authenticates the request that carries the token).
  // OpenSSL's DRBG, not a std::random_device per token: constructing one costs ~15 us on this VM
  // (CPUID and RDRAND trap to the hypervisor), a tenth of a client core at 8,000 GETs/s
  // (docs/BENCHMARKS.md "get_many against a loop"); RAND_bytes costs ~1 us and reseeds after fork.
  OBJDIRECT_ASSERT(RAND_bytes(t.nonce.data(), static_cast<int>(t.nonce.size())) == 1,
                   "RAND_bytes failed: OpenSSL has no entropy source");
  for (const RemoteSegment& s : segments) t.total_length += s.length;
  t.segments = std::move(segments);
  return t;
}

Status check_token(const Transport& transport, const token::Token& token, bool need_write) {
  const Capabilities& caps = transport.caps();
  auto decline = [&](const std::string& why) {
    return Status(Errc::rdma_declined, caps.name + " cannot serve this token: " + why);
  };
  if (token.backend != caps.backend) {
    return decline(token.backend == Backend::ucx ? "it is a UCX token" : "it is a libfabric token");
  }
  if (caps.backend == Backend::libfabric && token.provider != caps.provider) {
    return decline("provider \"" + token.provider + "\" differs");
  }
  if (token.addressing != caps.addressing) return decline("addressing mode differs");
  if (token.memory_type == MemoryType::cuda && !caps.cuda_memory) {
    return decline("CUDA memory is not supported");
  }
  if (need_write && !caps.can_write) return decline("no RMA write");
  if (!need_write && !caps.can_read) return decline("no RMA read");
  return Status::Ok();
}

namespace {

// The one table of fabric names. Row order: the server's --fabric auto (rdma_engine.cc opens
// them in this order and advertises them so). The client's auto order (client/fabric_choice.cc)
// does not depend on it: same-host first, then NIC fabrics, then software ones, each group by
// `preference`. libfabric tcp runs at 4.5-6 GB/s on loopback here, UCX's software RMA at 0.75
// (docs/BENCHMARKS.md), hence tcp before software UCX.
constexpr FabricTraits kFabrics[] = {
    {"libfabric:shm", true, FabricTraits::Nic::never, 0},
    {"libfabric:tcp", false, FabricTraits::Nic::never, 3},
    {"ucx", false, FabricTraits::Nic::when_present, 4},  // after tcp when both are software
    {"libfabric:verbs", false, FabricTraits::Nic::always, 0},
    {"libfabric:efa", false, FabricTraits::Nic::always, 1},
};

}  // namespace

std::span<const FabricTraits> fabric_table() {
  return kFabrics;
}

const FabricTraits* find_fabric(std::string_view name) {
  for (const auto& f : kFabrics) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

bool uses_nic(std::string_view name) {
  const FabricTraits* f = find_fabric(name);
  if (f == nullptr) return false;
  switch (f->nic) {
    case FabricTraits::Nic::never:
      return false;
    case FabricTraits::Nic::always:
      return true;
    case FabricTraits::Nic::when_present:
      return ucx::ucx_uses_nic();
  }
  return false;
}

ProviderStats provider_stats() {
  const auto shm = libfabric::shm_lock_recovery_stats();
  ProviderStats s;
  s.dead_peer_lock_releases = shm.lock_releases;
  s.dead_peer_locks_left_alone = shm.left_alone;
  return s;
}

const std::string& host_identity() {
  static const std::string id = [] {
    std::ifstream in("/proc/sys/kernel/random/boot_id");
    std::string boot;
    if (!std::getline(in, boot) || boot.empty()) return std::string();
    return sha256_hex(boot).substr(0, 16);
  }();
  return id;
}

unsigned long progress_thread_switches() {
  namespace fs = std::filesystem;
  unsigned long total = 0;
  std::error_code ec;
  for (const auto& task : fs::directory_iterator("/proc/self/task", ec)) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    if (!std::getline(comm, name) || name != detail::ProgressThread::progress_thread_name) continue;
    std::ifstream status(task.path() / "status");
    for (std::string line; std::getline(status, line);) {
      constexpr std::string_view key = "voluntary_ctxt_switches:";
      if (line.starts_with(key)) total += std::strtoul(line.c_str() + key.size(), nullptr, 10);
    }
  }
  return total;
}

Result<std::unique_ptr<Transport>> create_transport(const Config& config) {
  constexpr std::string_view lf = "libfabric:";
  if (config.fabric.starts_with(lf)) {
    return libfabric::create_libfabric_transport(config, config.fabric.substr(lf.size()));
  }
  if (config.fabric == "ucx") return ucx::create_ucx_transport(config);
  std::string known;
  for (const auto& f : kFabrics) known += (known.empty() ? "" : ", ") + std::string(f.name);
  return Status(Errc::invalid_argument,
                "unknown fabric \"" + config.fabric + "\" (expected one of " + known + ")");
}

namespace detail {

Status transport_error(const std::string& what, const std::string& detail) {
  return Status(Errc::transport_error, what + ": " + detail);
}

Result<std::vector<Chunk>> plan_chunks(std::span<const LocalSegment> local,
                                       std::span<const RemoteSegment> remote,
                                       std::uint64_t chunk_bytes_max) {
  if (local.size() + remote.size() > limits::transport_segments_max) {
    return Status(Errc::invalid_argument,
                  "too many segments: " + std::to_string(local.size() + remote.size()) + " > " +
                      std::to_string(limits::transport_segments_max));
  }
  if (chunk_bytes_max == 0) chunk_bytes_max = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t local_total = 0;
  for (std::size_t i = 0; i < local.size(); ++i) {
    const LocalSegment& s = local[i];
    if (s.mr == nullptr) {
      return Status(Errc::invalid_argument,
                    "local segment " + std::to_string(i) + " has no region");
    }
    if (s.offset > s.mr->length() || s.length > s.mr->length() - s.offset) {
      return Status(Errc::invalid_argument, "local segment " + std::to_string(i) + " [" +
                                                std::to_string(s.offset) + ", +" +
                                                std::to_string(s.length) + ") lies outside its " +
                                                std::to_string(s.mr->length()) + "-byte region");
    }
    local_total += s.length;
  }
  std::uint64_t remote_total = 0;
  for (std::size_t i = 0; i < remote.size(); ++i) {
    const RemoteSegment& s = remote[i];
    if (s.addr > std::numeric_limits<std::uint64_t>::max() - s.length ||
        s.length > std::numeric_limits<std::uint64_t>::max() - remote_total) {
      return Status(Errc::invalid_argument,
                    "remote segment " + std::to_string(i) + " overflows 64 bits");
    }
    remote_total += s.length;
  }
  if (local_total != remote_total) {
    return Status(Errc::invalid_argument,
                  "local segments hold " + std::to_string(local_total) +
                      " bytes but remote segments hold " + std::to_string(remote_total) +
                      (remote_total < local_total ? " (remote range shorter than asked)"
                                                  : " (local buffer shorter than remote range)"));
  }
  std::vector<Chunk> chunks;
  std::size_t li = 0, ri = 0;
  std::uint64_t lpos = 0, rpos = 0;  // bytes consumed within local[li] / remote[ri]
  while (li < local.size() && ri < remote.size()) {
    if (lpos == local[li].length) {
      ++li;
      lpos = 0;
      continue;
    }
    if (rpos == remote[ri].length) {
      ++ri;
      rpos = 0;
      continue;
    }
    std::uint64_t n =
        std::min({local[li].length - lpos, remote[ri].length - rpos, chunk_bytes_max});
    chunks.push_back(Chunk{local[li].mr, static_cast<std::size_t>(local[li].offset + lpos), ri,
                           remote[ri].addr + rpos, remote[ri].key, n});
    lpos += n;
    rpos += n;
  }
  return chunks;
}

void Backoff::pause(std::chrono::microseconds max_sleep) {
  ++idle_;
  if (idle_ < 64) {
    std::this_thread::yield();
    return;
  }
  unsigned shift = std::min(idle_ - 64, 16u);
  auto sleep = std::min(std::chrono::microseconds(1) * (1u << shift), max_sleep);
  std::this_thread::sleep_for(sleep);
}

FineTimerSlack::FineTimerSlack() : previous_ns_(::prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0)) {
  ::prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
}
FineTimerSlack::~FineTimerSlack() {
  if (previous_ns_ > 0)
    ::prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(previous_ns_), 0, 0, 0);
}

ProgressThread::ProgressThread(std::function<bool()> poll, std::chrono::microseconds sleep_max,
                               std::chrono::microseconds idle_poll,
                               std::chrono::microseconds sleep_max_relaxed) {
  if (sleep_max_relaxed < sleep_max) sleep_max_relaxed = sleep_max;
  // Test-only (Config::progress_thread): a slowed progress thread, as on a loaded host.
  std::chrono::milliseconds test_delay{0};
  if (const char* d = std::getenv("OBJDIRECT_TEST_PROGRESS_DELAY_MS")) {
    test_delay = std::chrono::milliseconds(std::min(std::strtoul(d, nullptr, 10), 10'000ul));
  }
  thread_ = std::thread(
      [this, poll = std::move(poll), sleep_max, sleep_max_relaxed, idle_poll, test_delay] {
        // Default timer slack (50 us) would stretch every short back-off sleep to ~50 us.
        ::prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
        // Named for top -H, perf and the tests that count its wake-ups (progress_thread_name).
        ::prctl(PR_SET_NAME, progress_thread_name, 0, 0, 0);
        Backoff backoff(sleep_max);
        // Polls that found nothing since the last one that did work (saturating); a thread that
        // was cold starts as long idle, so a relaxed hold does not begin with a spinning ramp.
        unsigned idle_polls = relaxed_ramp_polls_max;
        while (!stop_.load(std::memory_order_acquire)) {
          if (test_delay.count() > 0) std::this_thread::sleep_for(test_delay);
          if (poll()) {
            backoff.reset();
            idle_polls = 0;
          } else if (counts_->holds.load(std::memory_order_acquire) > 0) {
            if (idle_polls < relaxed_ramp_polls_max) ++idle_polls;
            if (counts_->strict.load(std::memory_order_acquire) > 0 ||
                sleep_max_relaxed == sleep_max || idle_polls < relaxed_ramp_polls_max) {
              // Strict, or relaxed while the provider did work a moment ago (a protocol that
              // does need this side's polls): the hot back-off.
              backoff.pause(sleep_max);
            } else {
              // Relaxed only and quiet: the fabric moves these transfers without our polls.
              // Sleep long, but wake at once for a strict hold (hold() notifies) or stop.
              std::unique_lock lock(mu_);
              cv_.wait_for(lock, sleep_max_relaxed, [this] {
                return stop_.load(std::memory_order_acquire) ||
                       counts_->strict.load(std::memory_order_acquire) > 0;
              });
            }
          } else {
            // Cold: nobody expects traffic. Poll rarely (connection upkeep) until a hold() or stop.
            backoff.reset();
            idle_polls = relaxed_ramp_polls_max;
            std::unique_lock lock(mu_);
            cold_ = true;
            cv_.wait_for(lock, idle_poll, [this] {
              return stop_.load(std::memory_order_acquire) ||
                     counts_->holds.load(std::memory_order_acquire) > 0;
            });
            cold_ = false;
          }
        }
      });
}

ProgressThread::~ProgressThread() {
  {
    std::lock_guard lock(mu_);
    stop_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<void> ProgressThread::hold(bool relaxed) {
  bool wake = true;
  {
    std::lock_guard lock(mu_);
    // strict first: the poller never sees a strict handle as only a relaxed one.
    if (!relaxed) counts_->strict.fetch_add(1, std::memory_order_acq_rel);
    counts_->holds.fetch_add(1, std::memory_order_acq_rel);
    // A relaxed hold changes nothing for a thread that is polling, or sleeping long for other
    // relaxed holds (that wait looks only at strict ones): a wake-up would cost it a context
    // switch per request for nothing. Only a cold thread starts polling for it.
    wake = !relaxed || cold_;
  }
  if (wake) cv_.notify_all();
  // The handle owns the shared counts, not the thread; its deleter ends the hold.
  auto counts = counts_;
  return std::shared_ptr<void>(static_cast<void*>(counts.get()), [counts, relaxed](void*) {
    counts->holds.fetch_sub(1, std::memory_order_acq_rel);
    if (!relaxed) counts->strict.fetch_sub(1, std::memory_order_acq_rel);
  });
}

}  // namespace detail
}  // namespace objdirect::transport
