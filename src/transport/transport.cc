#include "transport/transport.hpp"

#include <sys/prctl.h>

#include <algorithm>
#include <limits>
#include <utility>

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

Result<std::unique_ptr<Transport>> create_transport(const Config& config) {
  constexpr std::string_view lf = "libfabric:";
  if (config.fabric.starts_with(lf)) {
    return libfabric::create_libfabric_transport(config, config.fabric.substr(lf.size()));
  }
  if (config.fabric == "ucx") return ucx::create_ucx_transport(config);
  return Status(Errc::invalid_argument,
                "unknown fabric \"" + config.fabric +
                    "\" (expected libfabric:tcp, libfabric:shm, libfabric:verbs, libfabric:efa "
                    "or ucx)");
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

void Backoff::pause() {
  ++idle_;
  if (idle_ < 64) {
    std::this_thread::yield();
    return;
  }
  unsigned shift = std::min(idle_ - 64, 16u);
  auto sleep = std::min(std::chrono::microseconds(1) * (1u << shift), max_sleep_);
  std::this_thread::sleep_for(sleep);
}

ProgressThread::ProgressThread(std::function<bool()> poll, std::chrono::microseconds sleep_max) {
  thread_ = std::thread([this, poll = std::move(poll), sleep_max] {
    // Default timer slack (50 us) would stretch every short back-off sleep to ~50 us.
    ::prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    Backoff backoff(sleep_max);
    while (!stop_.load(std::memory_order_acquire)) {
      if (poll()) {
        backoff.reset();
      } else {
        backoff.pause();
      }
    }
  });
}

ProgressThread::~ProgressThread() {
  stop_.store(true, std::memory_order_release);
  if (thread_.joinable()) thread_.join();
}

}  // namespace detail
}  // namespace objdirect::transport
