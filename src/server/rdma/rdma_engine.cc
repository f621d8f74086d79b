#include "server/rdma/rdma_engine.hpp"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/assert.hpp"
#include "server/rdma/chunk_plan.hpp"
#include "server/rdma/reap_schedule.hpp"
#include "token/fabric_advert.hpp"

namespace objdirect::rdma {

namespace {

constexpr std::size_t kBufferAlign = 4096;

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// The token segments covering bytes [start, start+len) of the token's concatenated segments.
std::vector<token::Segment> remote_pieces(const std::vector<token::Segment>& segs,
                                          std::uint64_t start, std::uint64_t len) {
  std::vector<token::Segment> out;
  std::uint64_t pos = 0;
  for (const auto& s : segs) {
    if (len == 0) break;
    std::uint64_t seg_end = pos + s.length;
    if (start < seg_end) {
      std::uint64_t skip = start - pos;
      std::uint64_t take = std::min(len, s.length - skip);
      token::Segment piece = s;
      piece.addr = s.addr + skip;
      piece.length = take;
      out.push_back(std::move(piece));
      start += take;
      len -= take;
    }
    pos = seg_end;
  }
  return out;
}

// How long a failed transfer still waits for its other in-flight operations: one deadline shared
// by all of them (it was 2 s each, so a dead client held its lease for op_timeout + 2 s per extra
// pipeline slot: 7.5 s with the default depth 4 and a 1.5 s op timeout). After an RDMA failure
// (dead or stalled peer) the rest would fail the same way: poll once and retire. After another
// failure (storage, sink) the peer is fine: give the operations one op_timeout in all.
class DrainDeadline {
 public:
  DrainDeadline(const Status& failure, std::chrono::milliseconds op_timeout)
      : end_(std::chrono::steady_clock::now() + (failure.code() == Errc::rdma_transfer_failed
                                                     ? std::chrono::milliseconds(0)
                                                     : op_timeout)) {}
  std::chrono::milliseconds left() const {
    auto d = std::chrono::duration_cast<std::chrono::milliseconds>(
        end_ - std::chrono::steady_clock::now());
    return std::max(d, std::chrono::milliseconds(0));
  }

 private:
  std::chrono::steady_clock::time_point end_;
};

}  // namespace

struct RdmaEngine::Buffer {
  std::byte* data = nullptr;
  std::size_t size = 0;
  std::vector<std::shared_ptr<transport::MemoryRegion>> mrs;  // one per transport
  bool retired = false;  // an operation on it timed out: never reused, never re-registered
};

// One extent of an object's file, mapped read-only and registered with one transport. Blob files
// are immutable once committed and never truncated; a concurrent overwrite or delete renames or
// unlinks the file, which leaves this mapping valid.
struct RdmaEngine::Mapping {
  void* base = MAP_FAILED;
  std::size_t len = 0;
  std::size_t delta = 0;    // offset of the extent's first byte in the mapping
  std::uint64_t start = 0;  // the extent's first byte, relative to the transfer
  std::uint64_t length = 0;
  std::shared_ptr<transport::MemoryRegion> mr;
  ~Mapping() {
    mr.reset();
    if (base != MAP_FAILED) ::munmap(base, len);
  }
};

struct RdmaEngine::Lease {
  std::vector<Buffer*> buffers;
  std::string client;
  std::uint64_t bytes = 0;
  // What the transfer runs on, taken when the lease is: a transport reset does not pull them
  // from under it.
  std::shared_ptr<transport::Transport> transport;
  std::vector<std::shared_ptr<transport::MemoryRegion>> mrs;  // one per buffer
};

// The buffers (and zero-copy mappings) of one failed transfer, kept until nothing can touch them.
// Immutable once in retired_, except that the reaper drops live_peer_hold and removes it.
struct RdmaEngine::RetiredSet {
  std::vector<Buffer*> buffers;                // still owned by buffers_
  std::vector<std::shared_ptr<Mapping>> maps;  // unmapped when the set is freed
  std::weak_ptr<transport::Transport> transport;
  std::vector<transport::OpId> ops;  // operations whose wait() failed: the provider may run them
  // Keeps the transport's progress thread at full rate until the set is freed: what the
  // provider still sends for these operations (UCX over sm/tcp cannot cancel requests on an
  // endpoint without peer error handling) goes out at once, while the client drains after its
  // failed request (client/rdma.hpp, Fabric::revoke), not in dribs at the idle poll rate after
  // the client has stopped listening. A ProgressThread hold may outlive its transport (a shm
  // reset): it then only drops a count.
  std::shared_ptr<void> hot;
  // caps().peer_copies (libfabric shm): the peer process copies into our memory itself.
  bool peer_copies = false;
  std::function<bool()> peer_gone;  // Transport::peer_gone_check of that peer (peer_copies only)
  // peer_copies: the transport, kept open while the peer process lives. A reset
  // (reset_after_peer_failure) replaces the transport after a failure; closing the old shm
  // endpoint while a live (slow) client still has commands from it in its queue crashed that
  // client (SIGSEGV in its shm progress, libfabric 1.17), so the old endpoint stays until the
  // operations settle or the peer is gone.
  std::shared_ptr<transport::Transport> live_peer_hold;
  std::chrono::steady_clock::time_point since = std::chrono::steady_clock::now();
};

Result<std::shared_ptr<RdmaEngine>> RdmaEngine::create(const RdmaOptions& opts) {
  if (opts.chunk_bytes == 0 || opts.chunk_bytes > limits::rdma_chunk_bytes_max ||
      opts.chunk_bytes % kBufferAlign != 0) {
    return Status(Errc::invalid_argument, "RDMA chunk size must be a multiple of 4096 up to " +
                                              std::to_string(limits::rdma_chunk_bytes_max));
  }
  if (opts.retired_buffers_max == 0) {
    return Status(Errc::invalid_argument, "--rdma-retired-buffers-max must be at least 1");
  }
  if (opts.buffer_pool_bytes < opts.chunk_bytes ||
      opts.buffer_pool_bytes > limits::rdma_buffer_pool_bytes_max) {
    return Status(Errc::invalid_argument, "--rdma-buffer-pool-bytes must be between one chunk (" +
                                              std::to_string(opts.chunk_bytes) + ") and " +
                                              std::to_string(limits::rdma_buffer_pool_bytes_max));
  }
  std::shared_ptr<RdmaEngine> e(new RdmaEngine());
  e->opts_ = opts;
  e->opts_.pipeline_depth = std::max(1u, opts.pipeline_depth);
  std::vector<std::string> names;
  bool strict = true;
  if (opts.fabrics == "none" || opts.fabrics.empty()) return e;
  if (opts.fabrics == "auto") {
    for (const auto& f : transport::fabric_table()) names.emplace_back(f.name);
    strict = false;
  } else {
    names = split_list(opts.fabrics);
    // Each fabric once: the advertisement names each once (token/fabric_advert.hpp).
    for (auto it = names.begin(); it != names.end(); ++it) {
      if (std::find(names.begin(), it, *it) != it) {
        return Status(Errc::invalid_argument, "--fabric names '" + *it + "' twice");
      }
    }
  }
  for (const auto& name : names) {
    transport::Config cfg;
    cfg.fabric = name;
    cfg.progress_thread = true;
    cfg.local_host = opts.local_host;
    auto t = transport::create_transport(cfg);
    if (!t.ok()) {
      e->init_log_.push_back(name + ": unavailable (" + t.status().message() + ")");
      if (strict) return Status(t.code(), name + ": " + t.status().message());
      continue;
    }
    e->init_log_.push_back(name + ": enabled");
    e->transports_.push_back(std::move(*t));
    e->transport_names_.push_back(name);
  }
  e->offered_ = token::format_fabric_advert(e->transport_names_);
  if (e->transports_.empty()) return e;

  std::size_t count = static_cast<std::size_t>(opts.buffer_pool_bytes / opts.chunk_bytes);
  for (std::size_t i = 0; i < count; ++i) {
    auto b = std::make_unique<Buffer>();
    b->size = opts.chunk_bytes;
    b->data = static_cast<std::byte*>(std::aligned_alloc(kBufferAlign, b->size));
    if (!b->data) return Status(Errc::no_space, "cannot allocate the RDMA buffer pool");
    for (auto& t : e->transports_) {
      auto mr = t->register_memory(b->data, b->size, token::MemoryType::host);
      if (!mr.ok()) {
        std::free(b->data);
        return Status(mr.code(), "registering the RDMA buffer pool with " + t->caps().name + ": " +
                                     mr.status().message());
      }
      b->mrs.push_back(std::move(*mr));
    }
    e->free_.push_back(b.get());
    e->buffers_.push_back(std::move(b));
  }
  e->stats_.buffers_total = count;
  e->reaper_ = std::thread([raw = e.get()] { raw->reaper_loop(); });
  return e;
}

RdmaEngine::~RdmaEngine() {
  shutdown();  // callers of send()/receive() hold the engine, so no waiter is left here
  if (reaper_.joinable()) {
    {
      std::lock_guard lock(reaper_mu_);
      reaper_stop_ = true;
    }
    reaper_cv_.notify_all();
    reaper_.join();
  }
  // Regions first (they reference the transports), then the transports, then the memory.
  for (auto& r : retired_) {
    for (auto& m : r->maps) m->mr.reset();
  }
  for (auto& b : buffers_) b->mrs.clear();
  transports_.clear();
  retired_.clear();
  for (auto& b : buffers_) std::free(b->data);
}

void RdmaEngine::reaper_loop() {
  std::unique_lock lock(reaper_mu_);
  auto next = std::chrono::steady_clock::now() + opts_.reap_interval;
  while (!reaper_stop_) {
    reaper_cv_.wait_until(lock, next);
    if (reaper_stop_) break;
    if (std::chrono::steady_clock::now() < next) continue;  // spurious wake-up
    lock.unlock();
    next = reclaim_retired();
    lock.lock();
  }
}

std::chrono::steady_clock::time_point RdmaEngine::reclaim_retired() {
  const auto now = std::chrono::steady_clock::now();
  std::vector<RetiredSet*> sets;
  {
    std::lock_guard lock(mu_);
    for (auto& r : retired_) sets.push_back(r.get());  // only this thread removes from retired_
  }
  std::vector<RetiredSet*> done;
  std::vector<std::chrono::steady_clock::time_point> young_since;
  bool unsafe_of_age = false;
  // Transports looked at here: if one was dropped everywhere else meanwhile, it is destroyed
  // at the end of this function, outside mu_.
  std::vector<std::shared_ptr<transport::Transport>> seen;
  const auto young = now - opts_.reap_interval;
  for (RetiredSet* r : sets) {
    if (r->since > young) {  // every set stays retired at least one reap_interval
      young_since.push_back(r->since);
      continue;
    }
    if (r->live_peer_hold && r->peer_gone()) {
      seen.push_back(std::move(r->live_peer_hold));  // destroyed below, outside mu_, if last
      r->live_peer_hold.reset();
    }
    bool safe = false;
    if (auto tr = r->transport.lock()) {
      // The transport lives: only the provider's own word that each timed-out operation has
      // ended makes the memory safe (a completion, or an error completion after the peer died).
      safe = std::all_of(r->ops.begin(), r->ops.end(),
                         [&](transport::OpId op) { return tr->op_settled(op); });
      seen.push_back(std::move(tr));
    } else {
      // Destroyed: its endpoint is closed, so this process moves no data for it any more. On
      // shm the peer copies into our memory itself (CMA): it must be gone too.
      safe = !r->peer_copies || r->peer_gone();
    }
    if (safe) {
      done.push_back(r);
    } else {
      unsafe_of_age = true;
    }
  }
  const auto next = next_reap(now, young_since, unsafe_of_age, opts_.reap_interval);
  if (done.empty()) return next;
  std::vector<std::unique_ptr<RetiredSet>> freed_sets;
  std::vector<std::unique_ptr<Buffer>> freed;
  {
    std::lock_guard lock(mu_);
    for (RetiredSet* r : done) {
      auto it = std::find_if(retired_.begin(), retired_.end(),
                             [r](const std::unique_ptr<RetiredSet>& p) { return p.get() == r; });
      for (Buffer* b : r->buffers) {
        auto bit = std::find_if(buffers_.begin(), buffers_.end(),
                                [b](const std::unique_ptr<Buffer>& p) { return p.get() == b; });
        freed.push_back(std::move(*bit));
        buffers_.erase(bit);
      }
      stats_.buffers_retired -= std::min<std::uint64_t>(stats_.buffers_retired, r->buffers.size());
      stats_.buffers_reclaimed += r->buffers.size();
      freed_sets.push_back(std::move(*it));
      retired_.erase(it);
    }
  }
  // Outside mu_: deregistering takes each transport's own lock.
  for (auto& b : freed) {
    b->mrs.clear();
    std::free(b->data);
  }
  return next;
}

bool RdmaEngine::retired_buffers_full() const {
  std::lock_guard lock(mu_);
  return stats_.buffers_retired >= opts_.retired_buffers_max;
}

std::vector<std::shared_ptr<transport::Transport>> RdmaEngine::transports_snapshot() const {
  std::lock_guard lock(mu_);
  return transports_;
}

std::size_t RdmaEngine::transport_index(const token::Token& t, bool need_write) const {
  auto trs = transports_snapshot();
  for (std::size_t i = 0; i < trs.size(); ++i) {
    if (transport::check_token(*trs[i], t, need_write).ok()) return i;
  }
  return trs.size();
}

Status RdmaEngine::can_serve(const token::Token& t, bool need_write) const {
  auto trs = transports_snapshot();
  if (trs.empty()) {
    return Status(Errc::rdma_declined, "This server has no RDMA transport enabled");
  }
  if (retired_buffers_full()) {
    return Status(Errc::rdma_declined,
                  "Too many RDMA staging buffers are retired after failed transfers "
                  "(retired_buffers_max " +
                      std::to_string(opts_.retired_buffers_max) + "); use HTTP");
  }
  std::string why;
  for (const auto& tr : trs) {
    Status st = transport::check_token(*tr, t, need_write);
    if (st.ok()) return st;
    if (!why.empty()) why += "; ";
    why += tr->caps().name + ": " + st.message();
  }
  return Status(Errc::rdma_declined, "No enabled transport serves this token (" + why + ")");
}

// A transfer waiting for admission: lives on its thread's stack while queued in waiters_.
struct RdmaEngine::Waiter {
  std::string client;
};

std::uint64_t RdmaEngine::chunks_available(const std::string& endpoint, std::uint64_t want) const {
  const std::uint64_t chunk = opts_.chunk_bytes;
  auto it = per_client_.find(endpoint);
  const std::uint64_t client_bytes = it == per_client_.end() ? 0 : it->second;
  const std::uint64_t budget_server = opts_.inflight_bytes_max > stats_.inflight_bytes
                                          ? opts_.inflight_bytes_max - stats_.inflight_bytes
                                          : 0;
  const std::uint64_t budget_client = opts_.per_client_inflight_bytes_max > client_bytes
                                          ? opts_.per_client_inflight_bytes_max - client_bytes
                                          : 0;
  return std::min({want, static_cast<std::uint64_t>(free_.size()), budget_server / chunk,
                   budget_client / chunk});
}

bool RdmaEngine::admissible(const Waiter& w) const {
  if (chunks_available(w.client, 1) == 0) return false;
  // The server-wide budget is the same for everyone, so a waiter ahead that cannot go now is
  // held back by its own client's limit only: it must not block the queue (head-of-line).
  for (const Waiter* o : waiters_) {
    if (o == &w) return true;
    if (chunks_available(o->client, 1) > 0) return false;
  }
  return true;  // not queued yet (a new arrival): it goes behind every waiter that could go
}

Result<RdmaEngine::Lease> RdmaEngine::acquire(const token::Token& t, std::uint64_t bytes,
                                              std::size_t ti) {
  const std::uint64_t chunk = opts_.chunk_bytes;
  std::uint64_t want = std::min<std::uint64_t>(opts_.pipeline_depth, (bytes + chunk - 1) / chunk);
  want = std::max<std::uint64_t>(want, 1);
  std::unique_lock lock(mu_);
  auto refuse = [&](const std::string& why) -> Status {
    ++stats_.admissions_refused;
    return Status(Errc::slow_down, "RDMA staging buffers are exhausted (in flight " +
                                       std::to_string(stats_.inflight_bytes) + " bytes; " + why +
                                       "); retry later");
  };
  if (opts_.inflight_bytes_max < chunk || opts_.per_client_inflight_bytes_max < chunk) {
    return refuse("the in-flight limits are below one chunk");  // waiting could never help
  }
  Waiter me{t.endpoint};
  bool waited = false;
  if (!admissible(me)) {
    if (closing_) return refuse("the server is shutting down");
    if (opts_.admission_wait_max.count() <= 0) return refuse("no admission wait configured");
    if (waiters_.size() >= opts_.admission_waiters_max) {
      return refuse(std::to_string(waiters_.size()) +
                    " transfers already waiting, admission_waiters_max");
    }
    auto pos = waiters_.insert(waiters_.end(), &me);
    ++stats_.admission_waiters;
    const auto began = std::chrono::steady_clock::now();
    const bool admitted = admit_cv_.wait_until(lock, began + opts_.admission_wait_max, [&] {
      return closing_ || admissible(me);
    }) && !closing_;
    waiters_.erase(pos);
    --stats_.admission_waiters;
    stats_.admission_wait_ns_total +=
        static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                       std::chrono::steady_clock::now() - began)
                                       .count());
    if (!admitted) {
      ++stats_.admissions_refused_after_wait;
      return refuse(closing_ ? "the server is shutting down"
                             : "waited " + std::to_string(opts_.admission_wait_max.count()) +
                                   " ms, admission_wait_max");
    }
    waited = true;
    ++stats_.admissions_waited;
  }
  const std::uint64_t n = chunks_available(t.endpoint, want);  // >= 1: admissible
  Lease lease;
  lease.client = t.endpoint;
  lease.bytes = n * chunk;
  lease.transport = transports_[ti];
  for (std::uint64_t i = 0; i < n; ++i) {
    lease.buffers.push_back(free_.back());
    lease.mrs.push_back(free_.back()->mrs[ti]);
    free_.pop_back();
  }
  per_client_[t.endpoint] += lease.bytes;
  stats_.inflight_bytes += lease.bytes;
  stats_.buffers_in_use += n;
  ++stats_.transfers_active;
  // A waiter that looked while this one was still ahead of it went back to sleep: if buffers
  // remain, let the queue look again.
  if (waited && !waiters_.empty() && !free_.empty()) admit_cv_.notify_all();
  return lease;
}

void RdmaEngine::shutdown() {
  {
    std::lock_guard lock(mu_);
    closing_ = true;
  }
  admit_cv_.notify_all();
}

void RdmaEngine::release(Lease& lease, std::unique_ptr<RetiredSet> retired) {
  // acquire() hands out at least one buffer and release() empties the lease: an empty lease here
  // is one released twice.
  OBJDIRECT_ASSERT(
      !lease.buffers.empty() && lease.bytes == lease.buffers.size() * opts_.chunk_bytes,
      "an RDMA lease is released exactly once, as acquired");
  const bool retire_all = retired != nullptr;
  std::vector<std::unique_ptr<Buffer>> replacements;
  std::lock_guard lock(mu_);  // registration is cheap (no pinning on tcp/shm; a pool on verbs)
  // Every count below includes this lease (acquire added it under mu_): none goes negative.
  OBJDIRECT_ASSERT(stats_.inflight_bytes >= lease.bytes, "in-flight bytes count this lease");
  OBJDIRECT_ASSERT(stats_.buffers_in_use >= lease.buffers.size(),
                   "buffers in use count this lease");
  OBJDIRECT_ASSERT(stats_.transfers_active > 0, "active transfers count this lease");
  if (retire_all) {
    // The provider may still touch these buffers (an operation timed out): never reuse them.
    // Replace each with a fresh registered buffer so the pool keeps its size.
    for (std::size_t i = 0; i < lease.buffers.size(); ++i) {
      auto b = std::make_unique<Buffer>();
      b->size = opts_.chunk_bytes;
      b->data = static_cast<std::byte*>(std::aligned_alloc(kBufferAlign, b->size));
      bool ok = b->data != nullptr;
      for (auto& t : transports_) {
        if (!ok) break;
        auto mr = t->register_memory(b->data, b->size, token::MemoryType::host);
        if (!mr.ok()) {
          ok = false;
          break;
        }
        b->mrs.push_back(std::move(*mr));
      }
      if (ok) {
        replacements.push_back(std::move(b));
      } else if (b->data) {
        b->mrs.clear();
        std::free(b->data);
      }
    }
  }
  if (retire_all) {
    for (Buffer* b : lease.buffers) b->retired = true;
    stats_.buffers_retired += lease.buffers.size();
    stats_.buffers_retired_total += lease.buffers.size();
    retired->buffers = lease.buffers;
    retired_.push_back(std::move(retired));
    for (auto& b : replacements) {
      free_.push_back(b.get());
      buffers_.push_back(std::move(b));
    }
    stats_.buffers_total = stats_.buffers_total - lease.buffers.size() + replacements.size();
  } else {
    for (Buffer* b : lease.buffers) free_.push_back(b);
  }
  auto it = per_client_.find(lease.client);
  OBJDIRECT_ASSERT(it != per_client_.end() && it->second >= lease.bytes,
                   "the client's in-flight bytes count this lease");
  it->second -= lease.bytes;
  if (it->second == 0) per_client_.erase(it);
  stats_.inflight_bytes -= lease.bytes;
  stats_.buffers_in_use -= lease.buffers.size();
  --stats_.transfers_active;
  lease.buffers.clear();
  lease.mrs.clear();
  lease.transport.reset();
  lease.bytes = 0;
  if (!waiters_.empty()) admit_cv_.notify_all();  // buffers and budget came back
}

std::vector<std::shared_ptr<RdmaEngine::Mapping>> RdmaEngine::map_extents(
    transport::Transport& tr, storage::ObjectReader& reader, std::uint64_t offset,
    std::uint64_t length) {
  std::vector<std::shared_ptr<Mapping>> maps;
  // Only where the transport may write from a registered read-only file mapping (libfabric tcp
  // and shm: registration pins nothing; on verbs/efa it would pin page-cache pages). (On shm it
  // was withdrawn once: a client SIGKILLed while holding its region lock left the server's next
  // fi_writemsg spinning for ever, with a mapped source or not; the shm transport's watchdog now
  // releases a dead peer's lock, docs/RELIABILITY.md section 6.)
  if (!opts_.zero_copy_get || length < opts_.zero_copy_get_min_bytes ||
      !tr.caps().mapped_source_write) {
    return maps;
  }
  auto extents = reader.extents(offset, length);
  if (!extents.ok() || extents->empty()) return maps;
  static const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  std::uint64_t at = 0;
  for (const storage::Extent& e : *extents) {
    struct stat sb {};
    // A file shorter than its extent would fault (SIGBUS) on access: copy through staging,
    // whose pread reports the error.
    if (e.fd < 0 || ::fstat(e.fd, &sb) != 0 ||
        static_cast<std::uint64_t>(sb.st_size) < e.file_offset + e.length) {
      return {};
    }
    auto m = std::make_shared<Mapping>();
    const std::uint64_t aligned = e.file_offset - e.file_offset % page;
    m->delta = static_cast<std::size_t>(e.file_offset - aligned);
    m->len = static_cast<std::size_t>(m->delta + e.length);
    m->start = at;
    m->length = e.length;
    // MAP_POPULATE: one pass over the page tables instead of a fault per 64 KiB in the provider.
    m->base = ::mmap(nullptr, m->len, PROT_READ, MAP_SHARED | MAP_POPULATE, e.fd,
                     static_cast<off_t>(aligned));
    if (m->base == MAP_FAILED) return {};
    auto mr = tr.register_memory(m->base, m->len, token::MemoryType::host);
    if (!mr.ok()) return {};
    m->mr = std::move(*mr);
    at += e.length;
    maps.push_back(std::move(m));
  }
  if (at != length) return {};
  return maps;
}

void RdmaEngine::maybe_reset_transport(std::size_t ti,
                                       const std::shared_ptr<transport::Transport>& failed) {
  // A provider that does not recover from a peer that died with operations in flight
  // (libfabric 1.17's shm processes its response queue in order and stops at the first entry
  // still busy, so one dead peer stalls every later completion of the endpoint).
  if (!failed->caps().reset_after_peer_failure) return;
  std::lock_guard reset_lock(reset_mu_);
  {
    std::lock_guard lock(mu_);
    if (transports_[ti] != failed) return;  // another failed transfer already replaced it
  }
  transport::Config cfg;
  cfg.fabric = transport_names_[ti];
  cfg.progress_thread = true;
  cfg.local_host = opts_.local_host;
  auto fresh = transport::create_transport(cfg);
  if (!fresh.ok()) return;  // keep the stalled one; the next failure tries again
  std::shared_ptr<transport::Transport> tr(std::move(*fresh));
  std::lock_guard lock(mu_);
  std::vector<std::shared_ptr<transport::MemoryRegion>> mrs;
  for (auto& b : buffers_) {
    if (b->retired) {
      mrs.emplace_back();
      continue;
    }
    auto mr = tr->register_memory(b->data, b->size, token::MemoryType::host);
    if (!mr.ok()) return;  // keep the stalled one
    mrs.push_back(std::move(*mr));
  }
  // Buffers now held by transfers on the old transport keep their old regions through their
  // leases; they come back registered with the new one.
  for (std::size_t i = 0; i < buffers_.size(); ++i) {
    if (!buffers_[i]->retired) buffers_[i]->mrs[ti] = std::move(mrs[i]);
  }
  transports_[ti] = std::move(tr);
  ++stats_.transport_resets;
}

void RdmaEngine::await_settled(const transport::Transport& tr, const Abandoned& abandoned) {
  // The transports end what they abandon: UCX force-closes the peer's endpoint (its requests
  // complete, cancelled), libfabric tcp removes the peer from the AV (rxm closes the connection
  // and fails what is queued on it); see wait() in each. This waits for those completions, so
  // the answer leaves only after nothing of ours can still be sent to the client. Bounded: one
  // op_timeout (a stuck provider, a dead shm peer); the reply then goes out anyway, counted.
  const auto end = std::chrono::steady_clock::now() + opts_.op_timeout;
  for (;;) {
    const bool settled = std::all_of(abandoned.ops.begin(), abandoned.ops.end(),
                                     [&](transport::OpId op) { return tr.op_settled(op); });
    if (settled) return;
    if (std::chrono::steady_clock::now() >= end) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::lock_guard lock(mu_);
  ++stats_.failures_answered_unsettled;
}

std::unique_ptr<RdmaEngine::RetiredSet> RdmaEngine::retired_set(
    const token::Token& t, const std::shared_ptr<transport::Transport>& tr, Abandoned abandoned,
    std::vector<std::shared_ptr<Mapping>> maps) {
  auto r = std::make_unique<RetiredSet>();
  r->maps = std::move(maps);
  r->transport = tr;
  r->ops = std::move(abandoned.ops);
  r->hot = tr->keep_progress_hot(0, false);  // full rate: what the provider still sends goes out
  r->peer_copies = tr->caps().peer_copies;
  if (r->peer_copies) {
    r->peer_gone = tr->peer_gone_check(t.endpoint);
    r->live_peer_hold = tr;
  }
  return r;
}

Status RdmaEngine::read_mailbox(const token::Token& t, std::span<std::byte> out) {
  if (!t.mailbox || out.size() < t.mailbox->length) {
    return Status(Errc::invalid_argument, "read_mailbox: no mailbox, or a short buffer");
  }
  const std::size_t ti = transport_index(t, false);
  if (ti == transports_.size()) return can_serve(t, false);
  std::shared_ptr<transport::Transport> tr;
  {
    std::lock_guard lk(mu_);
    tr = transports_[ti];
  }
  // The buffer and its registration live together; both are kept if the provider may still
  // write the buffer after a failure.
  struct Landing {
    std::vector<std::byte> bytes;
    std::shared_ptr<transport::MemoryRegion> mr;
  };
  auto landing = std::make_shared<Landing>();
  landing->bytes.resize(static_cast<std::size_t>(t.mailbox->length));
  auto mr = tr->register_memory(landing->bytes.data(), landing->bytes.size(),
                                transport::MemoryType::host);
  if (!mr.ok()) return mr.status();
  landing->mr = *mr;
  const transport::LocalSegment local{landing->mr.get(), 0, landing->bytes.size()};
  const transport::RemoteSegment remote = *t.mailbox;
  auto op = tr->post_read(t.endpoint, std::span(&local, 1), std::span(&remote, 1));
  if (!op.ok()) {
    std::lock_guard lk(mu_);
    ++stats_.transfers_refused_by_transport;  // the peer is unreachable: nothing was posted
    return op.status();
  }
  {
    std::lock_guard lk(mu_);
    ++stats_.mailbox_reads;
  }
  // The proof read is a client endpoint's first contact (a lazy connection, then one poll of the
  // client's progress): it gets at least mailbox_read_timeout_min, so a short
  // --rdma-op-timeout-ms does not refuse a slow but live client its binding.
  constexpr std::chrono::milliseconds mailbox_read_timeout_min{2000};
  Status st = tr->wait(*op, std::max(opts_.op_timeout, mailbox_read_timeout_min));
  if (!st.ok()) {
    Abandoned abandoned;
    abandoned.ops.push_back(*op);
    await_settled(*tr, abandoned);
    if (!tr->op_settled(*op)) {
      std::lock_guard lk(mu_);
      kept_mailbox_buffers_.push_back(landing);
      ++stats_.mailbox_buffers_kept;
    }
    maybe_reset_transport(ti, tr);
    return st;
  }
  landing->mr->synchronize();
  std::memcpy(out.data(), landing->bytes.data(), landing->bytes.size());
  return Status::Ok();
}

Status RdmaEngine::send(const token::Token& t, storage::ObjectReader& reader, std::uint64_t offset,
                        std::uint64_t length, bool* no_client_polls) {
  OBJDIRECT_RETURN_IF_ERROR(token::check_scope(t, length));
  auto ti = transport_index(t, true);
  if (ti == transports_.size()) return can_serve(t, true);
  if (length == 0) return Status::Ok();
  auto lease = acquire(t, length, ti);
  if (!lease.ok()) return lease.status();
  const std::shared_ptr<transport::Transport> tr_ref = lease->transport;
  transport::Transport& tr = *tr_ref;
  if (no_client_polls) *no_client_polls = tr.rma_lands_without_target_progress();
  const std::uint64_t chunk = opts_.chunk_bytes;
  const std::uint64_t chunks = chunk_count(length, chunk);
  // wait() polls only while this thread waits; the progress thread keeps the other chunks in
  // flight moving while it reads from storage. One chunk has no others: this thread's wait()
  // is all the progress it needs, and a hold would wake the progress thread for nothing (a
  // context switch per small GET; docs/BENCHMARKS.md, optimisation 12).
  auto hot = chunks > 1 ? tr.keep_progress_hot(0, false) : nullptr;

  struct Slot {
    Buffer* buf;
    transport::MemoryRegion* mr;
    std::optional<transport::OpId> op;
  };
  std::vector<Slot> slots;
  for (std::size_t k = 0; k < lease->buffers.size(); ++k) {
    slots.push_back({lease->buffers[k], lease->mrs[k].get(), std::nullopt});
  }
  // Zero copy when the object's files can be mapped; the staging buffers then only count.
  const auto maps = map_extents(tr, reader, offset, length);
  Status failure;
  // A post the transport refused handed nothing to the provider (an unreachable peer fails
  // there, at once): alone it does not make the buffers suspect.
  bool post_refused = false;
  Abandoned abandoned;  // what the provider may still be doing with our memory
  for (std::uint64_t i = 0; i < chunks && failure.ok(); ++i) {
    Slot& s = slots[i % slots.size()];
    if (s.op) {
      failure = tr.wait(*s.op, opts_.op_timeout);
      if (!failure.ok()) abandoned.ops.push_back(*s.op);
      s.op.reset();
      if (!failure.ok()) break;
    }
    const ChunkSpan span = chunk_span(length, chunk, i);
    const std::uint64_t pos = span.pos;
    const auto n = static_cast<std::size_t>(span.len);
    auto pieces = remote_pieces(t.segments, pos, n);
    if (!maps.empty()) {
      // The mapped extents covering [pos, pos+n): usually one, two across a part boundary.
      std::vector<transport::LocalSegment> local;
      for (const auto& m : maps) {
        const std::uint64_t lo = std::max(pos, m->start);
        const std::uint64_t hi = std::min(pos + n, m->start + m->length);
        if (lo >= hi) continue;
        local.push_back({m->mr.get(), static_cast<std::size_t>(m->delta + (lo - m->start)),
                         static_cast<std::size_t>(hi - lo)});
      }
      auto op = tr.post_write(t.endpoint, local, pieces);
      if (!op.ok()) {
        failure = Status(Errc::rdma_transfer_failed, op.status().message());
        post_refused = true;
        break;
      }
      s.op = *op;
      continue;
    }
    std::size_t got = 0;
    while (got < n) {
      auto r = reader.pread(std::span(s.buf->data + got, n - got), offset + pos + got);
      if (!r.ok()) {
        failure = r.status();
        break;
      }
      if (*r == 0) {
        failure = Status(Errc::io_error, "object data shorter than its metadata");
        break;
      }
      got += *r;
    }
    if (!failure.ok()) break;
    transport::LocalSegment local{s.mr, 0, n};
    auto op = tr.post_write(t.endpoint, std::span(&local, 1), pieces);
    if (!op.ok()) {
      failure = Status(Errc::rdma_transfer_failed, op.status().message());
      post_refused = true;
      break;
    }
    s.op = *op;
  }
  // A failed or timed-out operation may leave the provider holding a buffer: retire the lease.
  bool retire =
      failure.code() == Errc::rdma_transfer_failed && !(post_refused && abandoned.ops.empty());
  DrainDeadline drain(failure, opts_.op_timeout);
  for (auto& s : slots) {
    if (!s.op) continue;
    Status st = tr.wait(*s.op, failure.ok() ? opts_.op_timeout : drain.left());
    if (!st.ok()) {
      retire = true;
      abandoned.ops.push_back(*s.op);
      if (failure.ok()) failure = st;
    }
  }
  if (retire) await_settled(tr, abandoned);
  release(*lease, retire ? retired_set(t, tr_ref, std::move(abandoned), maps) : nullptr);
  if (retire) maybe_reset_transport(ti, tr_ref);
  std::lock_guard lock(mu_);
  if (failure.ok()) {
    ++stats_.transfers_ok;
    stats_.bytes_written += length;
    if (!maps.empty()) stats_.bytes_written_mapped += length;
  } else {
    ++stats_.transfers_failed;
    if (post_refused && !retire) ++stats_.transfers_refused_by_transport;
  }
  return failure;
}

bool RdmaEngine::one_chunk(std::uint64_t length) const {
  return chunk_count(length, opts_.chunk_bytes) <= 1;
}

Status RdmaEngine::receive(const token::Token& t,
                           const std::function<Status(std::span<const std::byte>)>& sink,
                           bool* no_client_polls) {
  auto ti = transport_index(t, false);
  if (ti == transports_.size()) return can_serve(t, false);
  const std::uint64_t length = t.total_length;
  if (length == 0) return Status::Ok();
  auto lease = acquire(t, length, ti);
  if (!lease.ok()) return lease.status();
  const std::shared_ptr<transport::Transport> tr_ref = lease->transport;
  transport::Transport& tr = *tr_ref;
  if (no_client_polls) *no_client_polls = tr.rma_lands_without_target_progress();
  const std::uint64_t chunk = opts_.chunk_bytes;
  const std::uint64_t chunks = chunk_count(length, chunk);
  // The chunks in flight keep moving (progress thread) while the sink hashes and writes one;
  // one chunk moves while this thread waits for it (as in send()).
  auto hot = chunks > 1 ? tr.keep_progress_hot(0, false) : nullptr;
  struct Slot {
    Buffer* buf;
    transport::MemoryRegion* mr;
    std::optional<transport::OpId> op;
    std::uint64_t index = 0;
  };
  std::vector<Slot> slots;
  for (std::size_t k = 0; k < lease->buffers.size(); ++k) {
    slots.push_back({lease->buffers[k], lease->mrs[k].get(), std::nullopt, 0});
  }
  Status failure;
  bool post_refused = false;  // as in send()
  Abandoned abandoned;        // what the provider may still be doing with our memory
  auto post = [&](Slot& s, std::uint64_t i) -> Status {
    const ChunkSpan span = chunk_span(length, chunk, i);
    const auto n = static_cast<std::size_t>(span.len);
    transport::LocalSegment local{s.mr, 0, n};
    auto pieces = remote_pieces(t.segments, span.pos, n);
    auto op = tr.post_read(t.endpoint, std::span(&local, 1), pieces);
    if (!op.ok()) {
      post_refused = true;
      return Status(Errc::rdma_transfer_failed, op.status().message());
    }
    s.op = *op;
    s.index = i;
    return Status::Ok();
  };
  // Prime the pipeline, then consume chunks in order, reposting each freed buffer.
  for (std::uint64_t i = 0; i < std::min<std::uint64_t>(chunks, slots.size()) && failure.ok();
       ++i) {
    failure = post(slots[i], i);
  }
  for (std::uint64_t i = 0; i < chunks && failure.ok(); ++i) {
    Slot& s = slots[i % slots.size()];
    failure = tr.wait(*s.op, opts_.op_timeout);
    if (!failure.ok()) abandoned.ops.push_back(*s.op);
    s.op.reset();
    if (!failure.ok()) break;
    const auto n = static_cast<std::size_t>(chunk_span(length, chunk, i).len);
    failure = sink(std::span<const std::byte>(s.buf->data, n));
    if (!failure.ok()) break;
    if (i + slots.size() < chunks) failure = post(s, i + slots.size());
  }
  bool retire =
      failure.code() == Errc::rdma_transfer_failed && !(post_refused && abandoned.ops.empty());
  DrainDeadline drain(failure, opts_.op_timeout);
  for (auto& s : slots) {
    if (!s.op) continue;
    Status st = tr.wait(*s.op, drain.left());
    if (!st.ok()) {
      retire = true;
      abandoned.ops.push_back(*s.op);
    }
  }
  if (retire) await_settled(tr, abandoned);
  release(*lease, retire ? retired_set(t, tr_ref, std::move(abandoned), {}) : nullptr);
  if (retire) maybe_reset_transport(ti, tr_ref);
  std::lock_guard lock(mu_);
  if (failure.ok()) {
    ++stats_.transfers_ok;
    stats_.bytes_read += length;
  } else {
    ++stats_.transfers_failed;
    if (post_refused && !retire) ++stats_.transfers_refused_by_transport;
  }
  return failure;
}

RdmaStats RdmaEngine::stats() const {
  RdmaStats s;
  {
    std::lock_guard lock(mu_);
    s = stats_;
  }
  const auto provider = transport::provider_stats();
  s.shm_dead_peer_lock_releases = provider.dead_peer_lock_releases;
  s.shm_dead_peer_locks_left_alone = provider.dead_peer_locks_left_alone;
  return s;
}

void RdmaEngine::register_metrics(metrics::Sink& sink) const {
  auto stat = [this](std::uint64_t RdmaStats::*field) {
    return [this, field] { return static_cast<double>(stats().*field); };
  };
  struct Series {
    const char* name;
    std::uint64_t RdmaStats::*field;
    const char* help;
  };
  // Counters. objdirect_rdma_buffers_total is the pool's size, not a running total: it stays put
  // (retired buffers are replaced) and drops only when a replacement cannot be registered.
  const Series counters[] = {
      {"objdirect_rdma_buffers_total", &RdmaStats::buffers_total,
       "Registered RDMA staging buffers."},
      {"objdirect_rdma_buffers_retired_total", &RdmaStats::buffers_retired_total,
       "Staging buffers ever retired after a timed-out operation."},
      {"objdirect_rdma_buffers_reclaimed_total", &RdmaStats::buffers_reclaimed,
       "Retired staging buffers freed once no transfer could touch them any more."},
      {"objdirect_rdma_transfers_ok_total", &RdmaStats::transfers_ok, "RDMA transfers completed."},
      {"objdirect_rdma_transfers_failed_total", &RdmaStats::transfers_failed,
       "RDMA transfers failed."},
      {"objdirect_rdma_transfers_unreachable_total", &RdmaStats::transfers_refused_by_transport,
       "Failed RDMA transfers whose first post the transport refused before any byte moved "
       "(libfabric tcp: the client's fabric address cannot be reached from here)."},
      {"objdirect_rdma_get_bytes_mapped_total", &RdmaStats::bytes_written_mapped,
       "GET bytes RDMA-written straight from a mapping of the object's files."},
      {"objdirect_rdma_admissions_refused_total", &RdmaStats::admissions_refused,
       "RDMA transfers refused with SlowDown (at once or after waiting)."},
      {"objdirect_rdma_transport_resets_total", &RdmaStats::transport_resets,
       "Transports replaced after a dead peer stalled them (libfabric shm)."},
      {"objdirect_rdma_shm_dead_peer_lock_releases_total", &RdmaStats::shm_dead_peer_lock_releases,
       "libfabric shm posts freed by releasing the region lock of a dead client."},
      {"objdirect_rdma_shm_dead_peer_locks_left_alone_total",
       &RdmaStats::shm_dead_peer_locks_left_alone,
       "libfabric shm posts stuck on a dead client's lock that was not released (libfabric other "
       "than 1.17, region not readable)."},
      {"objdirect_rdma_admissions_refused_after_wait_total",
       &RdmaStats::admissions_refused_after_wait,
       "RDMA transfers refused with SlowDown after waiting --rdma-admission-wait-ms (or woken by "
       "shutdown)."},
      {"objdirect_rdma_admissions_waited_total", &RdmaStats::admissions_waited,
       "RDMA transfers admitted after waiting for a staging buffer."},
      {"objdirect_rdma_failures_answered_unsettled_total", &RdmaStats::failures_answered_unsettled,
       "Failed RDMA transfers answered while the provider still held some of their operations "
       "(the wait for them, one --rdma-op-timeout-ms, expired)."},
  };
  const Series gauges[] = {
      {"objdirect_rdma_buffers_in_use", &RdmaStats::buffers_in_use,
       "Staging buffers held by transfers."},
      {"objdirect_rdma_buffers_retired", &RdmaStats::buffers_retired,
       "Staging buffers retired after a timed-out operation and not yet freed."},
      {"objdirect_rdma_inflight_bytes", &RdmaStats::inflight_bytes,
       "Staging bytes held by RDMA transfers."},
      {"objdirect_rdma_transfers_active", &RdmaStats::transfers_active,
       "RDMA transfers in progress."},
      {"objdirect_rdma_admission_waiters", &RdmaStats::admission_waiters,
       "RDMA transfers waiting for admission now."},
  };
  for (const auto& c : counters) sink.add_counter(c.name, c.help, stat(c.field));
  for (const auto& g : gauges) sink.add_gauge(g.name, g.help, stat(g.field));
  sink.add_counter("objdirect_rdma_admission_wait_seconds_total",
                   "Time RDMA transfers spent waiting for admission (admitted or refused).",
                   [this] { return static_cast<double>(stats().admission_wait_ns_total) / 1e9; });
}

}  // namespace objdirect::rdma
