#include "transport/libfabric/libfabric_transport.hpp"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>
#include <vector>

#include "transport/detail.hpp"
#include "transport/libfabric/shm_region.hpp"

namespace objdirect::transport::libfabric {
namespace {

// Regions of shm endpoints are files /dev/shm/objdirect-<pid>-<random> (see fi_setname below). A
// process killed with SIGKILL leaves its 16 MiB region behind and nothing else ever removes it, so
// every new shm transport deletes the regions of processes that no longer exist. A live pid's
// files are never touched (even if the pid was reused, its owner may still be using them).
void reclaim_dead_shm_regions() {
  DIR* dir = ::opendir("/dev/shm");
  if (!dir) return;
  while (dirent* e = ::readdir(dir)) {
    int pid = 0;
    char rest[64];
    if (std::sscanf(e->d_name, "objdirect-%d-%63s", &pid, rest) != 2 || pid <= 0) continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;
    ::unlinkat(::dirfd(dir), e->d_name, 0);
  }
  ::closedir(dir);
}

using Clock = std::chrono::steady_clock;

// ---- Dead-peer lock recovery on shm (docs/RELIABILITY.md section 6) ----------------------------
//
// libfabric 1.17's shm provider keeps a pthread spinlock in every endpoint's shared-memory region
// (struct smr_region::lock). The owner takes its own region's lock in its progress; an initiator
// takes the *peer's* region lock in fi_writemsg/fi_readmsg (smr_generic_rma). A client SIGKILLed
// while its progress held its own lock leaves that lock held for ever, and the server's next post
// to it spins in pthread_spin_lock, under Core::mu, for ever. The watchdog below releases such a
// lock, and nothing else, when all of these hold:
//  - a provider call of this transport has been in progress longer than shm_stuck_post;
//  - the peer's process is gone (kill(pid, 0) == ESRCH, or a zombie that cannot run again), with
//    the pid taken from the peer's region name (objdirect-<pid>-<random>, our fi_setname) and read
//    from the region itself (smr_region::pid), and the two agree;
//  - libfabric is 1.17 at compile time and at run time (fi_version()), and byte 0 of the region is
//    1.17's region version: the layout below is that release's;
//  - the lock word is not the unlocked value.
// fi_cq_read is watched too: its progress returns inject/SAR buffers to the peer's pool under the
// peer's lock (smr_release_txbuf), and a stuck read gets every dead mapped region's lock released.
// Why it is safe: the region belongs to the dead process; the only other users of its lock are
// initiators posting to that peer (this server; another server the client also used), which
// write commands into a queue that nobody will ever read again, and whose own completions for
// that peer fail (CMA to a dead pid fails with ESRCH) or never come (the op timeout; the engine
// then replaces the shm endpoint). The stuck post proceeds against a dead pid, fails, and the
// engine treats it as any failed transfer. Limits: a lock is released once per post; a peer
// whose pid was reused by a new process reads as alive (the post stays stuck, as before); a
// region this process cannot find or read is left alone (counted).
std::atomic<std::uint64_t> g_shm_lock_releases{0};
std::atomic<std::uint64_t> g_shm_locks_left_alone{0};

// Opens the file behind `m` (through /proc/self/map_files, which works for a deleted file but
// needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE, else by its name) and checks it is that inode.
int open_region(const std::string& region, const RegionMapping& m) {
  char path[96];
  std::snprintf(path, sizeof(path), "/proc/self/map_files/%lx-%lx",
                static_cast<unsigned long>(m.start), static_cast<unsigned long>(m.end));
  int fd = ::open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0 && !m.deleted) fd = ::open(("/dev/shm/" + region).c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat sb {};
  if (::fstat(fd, &sb) != 0 || static_cast<unsigned long long>(sb.st_ino) != m.inode ||
      static_cast<std::uint64_t>(sb.st_size) < smr_region_header_bytes) {
    ::close(fd);
    return -1;
  }
  return fd;
}

enum class LockRecovery { released, peer_alive, not_held, left_alone };

// One attempt to release the region lock of the dead shm peer `address` (see the block comment
// above). `why` says what was found, for the log.
// `provider_mapping_ok`: whether the provider's mapping may be used when it is the only one (see
// below); only when the stuck call is a post to this very peer.
LockRecovery release_region_lock(const std::string& region, pid_t pid, bool provider_mapping_ok,
                                 std::string& why) {
  if (!process_gone(pid)) {
    why = "peer pid " + std::to_string(pid) + " is alive";
    return LockRecovery::peer_alive;
  }
  if (!smr_layout_known()) {
    why = "libfabric " + std::to_string(FI_MAJOR(fi_version())) + "." +
          std::to_string(FI_MINOR(fi_version())) + " (the region layout is known for 1.17 only)";
    return LockRecovery::left_alone;
  }
  auto maps = find_region_mappings(region);
  if (maps.empty()) {
    why = "no mapping of /dev/shm/" + region + " in this process";
    return LockRecovery::left_alone;
  }
  // Our own view of the region, which nothing else can unmap. Without one (no capability to open
  // a deleted file), the provider's mapping, but only when it is the only one: then it belongs to
  // the stuck transport, which unmaps peers only under the lock its stuck call holds.
  void* view = nullptr;
  char* base = nullptr;
  const long page = ::sysconf(_SC_PAGESIZE);
  if (int fd = open_region(region, maps.front()); fd >= 0) {
    view =
        ::mmap(nullptr, static_cast<std::size_t>(page), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (view == MAP_FAILED) view = nullptr;
    base = static_cast<char*>(view);
  }
  if (base == nullptr && provider_mapping_ok && maps.size() == 1) {
    base = reinterpret_cast<char*>(maps.front().start);
  }
  if (base == nullptr) {
    why = "cannot open /dev/shm/" + region + " and it is mapped " + std::to_string(maps.size()) +
          " times";
    return LockRecovery::left_alone;
  }
  LockRecovery result = LockRecovery::left_alone;
  const std::uint8_t version = *reinterpret_cast<volatile std::uint8_t*>(base);
  int region_pid = 0;
  std::memcpy(&region_pid, base + smr_region_pid_offset, sizeof(region_pid));
  int* lock = reinterpret_cast<int*>(base + smr_region_lock_offset);
  const int unlocked = spinlock_unlocked_value();
  int word = __atomic_load_n(lock, __ATOMIC_ACQUIRE);
  if (version != smr_region_version_1_17) {
    why = "region version " + std::to_string(version) + ", expected " +
          std::to_string(smr_region_version_1_17);
  } else if (region_pid != pid) {
    why = "region pid " + std::to_string(region_pid) + " differs from its name's " +
          std::to_string(pid);
  } else if (word == unlocked) {
    why = "the region lock is free";
    result = LockRecovery::not_held;
  } else if (__atomic_compare_exchange_n(lock, &word, unlocked, false, __ATOMIC_RELEASE,
                                         __ATOMIC_RELAXED)) {
    why = "released the region lock of dead pid " + std::to_string(pid) + " (word " +
          std::to_string(word) + " -> " + std::to_string(unlocked) + ", /dev/shm/" + region +
          (maps.front().deleted ? " (deleted)" : "") + ")";
    result = LockRecovery::released;
  } else {
    why = "the region lock changed under the watchdog";
    result = LockRecovery::not_held;
  }
  if (view != nullptr) ::munmap(view, static_cast<std::size_t>(page));
  return result;
}

// A post stuck on the peer `address`.
LockRecovery release_dead_peer_lock(const std::string& address, std::string& why) {
  const auto peer = parse_shm_endpoint(address);
  if (!peer) {
    why = "peer address is not an ObjDirect shm name";
    return LockRecovery::left_alone;
  }
  return release_region_lock(peer->region, peer->pid, true, why);
}

// A stuck fi_cq_read: its progress can take a peer's lock too (libfabric 1.17's
// smr_progress_resp_entry returns an inject or SAR buffer to the peer's pool under the peer's
// lock), and it does not say which peer. Every region of a gone process mapped here is a
// candidate; the same checks apply to each, through our own view only.
LockRecovery release_any_dead_peer_lock(std::string& why) {
  std::vector<std::string> regions;
  {
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line)) {
      auto at = line.find("/dev/shm/objdirect-");
      if (at == std::string::npos) continue;
      std::string name = line.substr(at + 9);
      if (auto sp = name.find(' '); sp != std::string::npos) name.resize(sp);
      if (std::find(regions.begin(), regions.end(), name) == regions.end()) {
        regions.push_back(name);
      }
    }
  }
  LockRecovery result = LockRecovery::not_held;
  why = "no mapped region of a gone process has its lock held";
  for (const std::string& region : regions) {
    const auto peer = parse_shm_endpoint("fi_shm://" + region);
    const pid_t pid = peer ? peer->pid : 0;
    if (!peer || pid == ::getpid() || !process_gone(pid)) {
      continue;
    }
    std::string one;
    const LockRecovery got = release_region_lock(region, pid, false, one);
    if (got == LockRecovery::released ||
        (got == LockRecovery::left_alone && result != LockRecovery::released)) {
      result = got;
      why = one;
    }
    if (got == LockRecovery::released) break;
  }
  return result;
}

constexpr std::uint64_t rma_caps =
    FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_MSG;

// libfabric 1.17 shm carries a write of at most this many bytes inside its command queue
// ("inline"/"inject") when it does not take its fast path: without FI_DELIVERY_COMPLETE such a
// write completes before the target has copied it out. Every larger write completes only after
// the bytes are in the target's memory (see LibfabricTransport::shm_fast_write_).
constexpr std::size_t shm_inject_bytes = 4096;

// How long progress() sleeps when it finds its own shm region locked by a peer's copy.
constexpr auto shm_held_lock_pause = std::chrono::microseconds(50);

// Ordering bits whose presence in tx_attr->msg_order turns libfabric shm's fast RMA path off.
constexpr std::uint64_t rma_order_bits = FI_ORDER_RAR | FI_ORDER_RAW | FI_ORDER_RAS | FI_ORDER_WAR |
                                         FI_ORDER_WAW | FI_ORDER_WAS | FI_ORDER_SAR | FI_ORDER_SAW;

std::string fi_error(long rc) {
  return std::string(fi_strerror(static_cast<int>(rc < 0 ? -rc : rc))) + " (" + std::to_string(rc) +
         ")";
}

struct Op;

// The per-provider-operation context. fi_context2 must come first: providers that ask for
// FI_CONTEXT/FI_CONTEXT2 use that space, and the completion hands back this address.
// It also keeps the operation's iovecs until the provider has taken them.
struct SubOp {
  fi_context2 ctx;
  Op* op = nullptr;
  std::vector<iovec> iov;
  std::vector<void*> desc;
  std::vector<fi_rma_iov> rma;
};

// One post_write/post_read: n_subs provider operations, posted in order. Those the transmit
// queue cannot take yet (-FI_EAGAIN) wait in the backlog and are posted by later polls, so
// posting never blocks; wait()'s timeout bounds the whole operation.
struct Op {
  OpId id = 0;
  std::string peer;
  bool write = false;
  fi_addr_t dest = FI_ADDR_UNSPEC;
  std::unique_ptr<SubOp[]> subs;
  std::size_t n_subs = 0;
  std::size_t next_post = 0;  // subs[next_post..n_subs) not yet handed to the provider
  std::size_t pending = 0;    // handed to the provider, not yet completed
  Status status;
  bool abandoned = false;  // wait() gave up; erase when the provider is done with it
  bool finished = false;   // peer in-flight count already released
  std::vector<std::shared_ptr<MemoryRegion>> regions;  // keep registrations alive while in flight

  bool done() const { return pending == 0 && next_post == n_subs; }
};

// Everything that must outlive the Transport object while memory regions are still held:
// regions close their fid_mr under mu and need the domain open.
struct Core {
  // Recursive: an Op erased under the lock may drop the last reference to a region, whose
  // destructor takes the lock again to fi_close its fid_mr.
  std::recursive_mutex mu;
  fi_info* info = nullptr;
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  fid_cq* cq = nullptr;
  fid_av* av = nullptr;
  fid_ep* ep = nullptr;
  std::atomic<std::uint64_t> next_key{1};

  ~Core() {
    if (ep) fi_close(&ep->fid);
    if (av) fi_close(&av->fid);
    if (cq) fi_close(&cq->fid);
    if (domain) fi_close(&domain->fid);
    if (fabric) fi_close(&fabric->fid);
    if (info) fi_freeinfo(info);
  }
};

class FabricRegion final : public MemoryRegion {
 public:
  FabricRegion(void* ptr, std::size_t len, MemoryType type, Addressing addressing,
               std::shared_ptr<Core> core, fid_mr* mr)
      : MemoryRegion(ptr, len, type, addressing), core_(std::move(core)), mr_(mr) {
    key_ = fi_mr_key(mr_);
  }
  ~FabricRegion() override {
    std::lock_guard lock(core_->mu);
    fi_close(&mr_->fid);
  }
  void* desc() const { return fi_mr_desc(mr_); }
  void synchronize() const override { std::lock_guard lock(core_->mu); }

 private:
  std::shared_ptr<Core> core_;
  fid_mr* mr_;
};

// "10.0.0.1:4567" / "[fe80::1]:4567" for an IPv4/IPv6 socket address, "?" otherwise.
std::string sockaddr_text(const void* addr, std::size_t len) {
  char host[INET6_ADDRSTRLEN] = "?";
  sockaddr_storage ss{};
  if (len > sizeof(ss) || len < sizeof(sa_family_t)) return "?";
  std::memcpy(&ss, addr, len);
  if (ss.ss_family == AF_INET && len >= sizeof(sockaddr_in)) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&ss);
    ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    return std::string(host) + ":" + std::to_string(ntohs(in->sin_port));
  }
  if (ss.ss_family == AF_INET6 && len >= sizeof(sockaddr_in6)) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&ss);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    return "[" + std::string(host) + "]:" + std::to_string(ntohs(in6->sin6_port));
  }
  return "?";
}

bool is_any_address(const sockaddr* a) {
  if (a->sa_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr == htonl(INADDR_ANY);
  }
  if (a->sa_family == AF_INET6) {
    return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr);
  }
  return false;
}

class LibfabricTransport final : public Transport {
 public:
  LibfabricTransport(std::shared_ptr<Core> core, Capabilities caps, std::string local_address,
                     const Config& config, std::size_t av_count, const unsigned char* own_region)
      : core_(std::move(core)),
        caps_(std::move(caps)),
        local_address_(std::move(local_address)),
        peers_(std::min(config.peers_max, av_count)),
        park_evicted_(caps_.provider == "shm"),
        shm_fast_write_(caps_.provider == "shm" &&
                        (core_->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) != 0 &&
                        (core_->info->tx_attr->msg_order & rma_order_bits) == 0),
        av_count_(av_count),
        own_region_lock_(own_region ? region_lock_word(own_region) : nullptr),
        own_cma_cap_peer_(own_region ? region_cma_cap_peer(own_region) : nullptr) {
    probe_new_peers_ = caps_.provider == "tcp";
    local_text_ = core_->info->src_addr != nullptr
                      ? sockaddr_text(core_->info->src_addr, core_->info->src_addrlen)
                      : std::string("?");
    if (config.progress_thread) {
      progress_thread_ = std::make_unique<detail::ProgressThread>(
          [this] { return progress(); }, config.progress_sleep_max, config.progress_idle_poll,
          config.progress_sleep_max_relaxed);
    }
    if (caps_.provider == "shm") watchdog_ = std::thread([this] { watchdog_loop(); });
  }

  ~LibfabricTransport() override {
    if (watchdog_.joinable()) {
      {
        std::lock_guard lock(watchdog_mu_);
        watchdog_stop_ = true;
      }
      watchdog_cv_.notify_all();
      watchdog_.join();
    }
    progress_thread_.reset();
    std::lock_guard lock(core_->mu);
    // Closing the endpoint first cancels what is still in flight, so no completion can name an
    // Op after the table is cleared.
    if (core_->ep) fi_close(&core_->ep->fid);
    core_->ep = nullptr;
    ops_.clear();
  }

  const Capabilities& caps() const noexcept override { return caps_; }
  std::string local_address() const override { return local_address_; }

  Result<std::shared_ptr<MemoryRegion>> register_memory(void* ptr, std::size_t len,
                                                        MemoryType type) override {
    if (ptr == nullptr || len == 0) {
      return Status(Errc::invalid_argument, "register_memory: null pointer or zero length");
    }
    if (type == MemoryType::cuda && !caps_.cuda_memory) {
      return Status(Errc::invalid_argument,
                    caps_.name + " does not support CUDA memory (provider lacks FI_HMEM)");
    }
    const std::uint64_t access = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
    // Without FI_MR_PROV_KEY the application chooses keys; they must be unique in the domain.
    const std::uint64_t requested_key = core_->next_key.fetch_add(1);
    std::lock_guard lock(core_->mu);
    fid_mr* mr = nullptr;
    int rc = 0;
    if (type == MemoryType::cuda) {
      iovec iov{ptr, len};
      fi_mr_attr attr{};
      attr.mr_iov = &iov;
      attr.iov_count = 1;
      attr.access = access;
      attr.requested_key = requested_key;
      attr.iface = FI_HMEM_CUDA;
      rc = fi_mr_regattr(core_->domain, &attr, 0, &mr);
    } else {
      rc = fi_mr_reg(core_->domain, ptr, len, access, 0, requested_key, 0, &mr, nullptr);
    }
    if (rc != 0) return detail::transport_error("fi_mr_reg", fi_error(rc));
    if (core_->info->domain_attr->mr_mode & FI_MR_ENDPOINT) {
      rc = fi_mr_bind(mr, &core_->ep->fid, 0);
      if (rc == 0) rc = fi_mr_enable(mr);
      if (rc != 0) {
        fi_close(&mr->fid);
        return detail::transport_error("fi_mr_bind/fi_mr_enable", fi_error(rc));
      }
    }
    if (fi_mr_key(mr) == FI_KEY_NOTAVAIL) {
      fi_close(&mr->fid);
      return detail::transport_error("fi_mr_key", "key not available (FI_MR_RAW unsupported)");
    }
    return std::shared_ptr<MemoryRegion>(
        std::make_shared<FabricRegion>(ptr, len, type, caps_.addressing, core_, mr));
  }

  Result<OpId> post_write(std::string_view peer, std::span<const LocalSegment> local,
                          std::span<const RemoteSegment> remote) override {
    if (!caps_.can_write) {
      return Status(Errc::invalid_argument, caps_.name + " offers no RMA write");
    }
    return post(true, peer, local, remote);
  }

  Result<OpId> post_read(std::string_view peer, std::span<const LocalSegment> local,
                         std::span<const RemoteSegment> remote) override {
    if (!caps_.can_read) return Status(Errc::invalid_argument, caps_.name + " offers no RMA read");
    return post(false, peer, local, remote);
  }

  Status wait(OpId id, std::chrono::milliseconds timeout) override {
    const auto deadline = Clock::now() + timeout;
    detail::FineTimerSlack slack;
    detail::Backoff backoff(std::chrono::microseconds(50));
    for (;;) {
      bool did = false;
      {
        std::lock_guard lock(core_->mu);
        auto it = ops_.find(id);
        if (it == ops_.end() || it->second->abandoned) {
          return Status(Errc::invalid_argument, "wait: unknown operation " + std::to_string(id));
        }
        Op* op = it->second.get();
        if (op->done()) {
          Status st = std::move(op->status);
          ops_.erase(it);
          return st;
        }
        did = poll_locked();
        if (op->done()) continue;
        // The deadline holds even while other operations keep the CQ busy.
        if (Clock::now() >= deadline) {
          op->n_subs = op->next_post;  // never post the rest
          op->abandoned = true;
          std::string why = op->status.ok() ? "" : " (" + op->status.message() + ")";
          const std::string peer = op->peer;
          if (op->done()) {
            finish(op);
            ops_.erase(id);
          }
          tear_down_peer_locked(peer);
          return Status(Errc::rdma_transfer_failed,
                        caps_.name + ": transfer to peer timed out after " +
                            std::to_string(timeout.count()) + " ms" + why);
        }
      }
      if (did) {
        backoff.reset();
      } else {
        backoff.pause();
      }
    }
  }

  bool progress() override {
    // While a peer holds our shm region's lock (it is copying into our memory, see
    // own_region_lock_), polling would only spin on that lock until the copy ends.
    // Sleep rather than return at once: the copy under the lock takes hundreds of microseconds
    // (4 MiB chunks), and the caller's back-off would otherwise spend its first 64 rounds on
    // sched_yield for every chunk.
    if (own_region_lock_ != nullptr && region_lock_held(own_region_lock_)) {
      std::this_thread::sleep_for(shm_held_lock_pause);
      return false;
    }
    std::lock_guard lock(core_->mu);
    return poll_locked();
  }

  bool op_settled(OpId id) const override {
    // An abandoned Op is erased once its last provider operation completes (settle(),
    // drain_backlog_locked()), whether that completion reports success or an error.
    std::unique_lock lock(core_->mu, std::try_to_lock);
    if (!lock.owns_lock()) return false;
    return ops_.find(id) == ops_.end();
  }

  std::shared_ptr<void> keep_progress_hot(std::uint64_t transfer_bytes,
                                          bool peer_needs_no_polls) override {
    // shm's fast path (shm_fast_write_) moves one range above the inject size with the peer's
    // process_vm_writev / readv: this side's polls only cost CPU then. Its fallback protocols
    // (no CMA) do need them, but a poll that finds work resets the back-off, so a relaxed hold
    // delays those by at most one long sleep after a quiet spell. At or below the inject size
    // the peer keeps FI_DELIVERY_COMPLETE (a command this side must carry out) unless it takes
    // the fast path, which only the peer knows and says (peer_needs_no_polls). Even then a lone
    // small request keeps a strict hold: it waits on its own reply, and a polling thread beside
    // it cut that wait (4 KiB GETs one at a time, median 229-286 us strict against 269-353
    // relaxed, src/transport/libfabric/README.md); with others in flight the process is busy
    // and the polls only take CPU from them.
    if (progress_thread_) {
      const bool small_relaxed = peer_needs_no_polls && progress_thread_->holds() > 0;
      return progress_thread_->hold(shm_fast_write_ &&
                                    (transfer_bytes > shm_inject_bytes || small_relaxed));
    }
    return std::make_shared<int>(0);
  }

  // ON: the provider takes its fast path for every write (small ones: small_fast_write_locked)
  // and read of one remote segment. A lone byte read: no lock needed.
  bool rma_lands_without_target_progress() const override {
    return shm_fast_write_ && own_cma_cap_peer_ != nullptr && region_cma_on(own_cma_cap_peer_);
  }

  // shm: the peer is the process named in its endpoint address (parse_shm_endpoint), which
  // copies into our memory itself on the fast path.
  std::function<bool()> peer_gone_check(std::string_view peer_address) const override {
    if (!caps_.peer_copies) return [] { return false; };
    const auto peer = parse_shm_endpoint(peer_address);
    if (!peer) return [] { return false; };
    return [pid = peer->pid] { return process_gone(pid); };
  }

  std::size_t peers_cached() const override {
    std::lock_guard lock(core_->mu);
    return peers_.size();
  }

 private:
  // Reads completions and settles their Ops, then posts backlogged operations. mu held.
  bool poll_locked() {
    if (core_->cq == nullptr || core_->ep == nullptr) return false;
    bool did = read_cq_locked();
    if (!backlog_.empty()) did |= drain_backlog_locked();
    return did;
  }

  bool read_cq_locked() {
    fi_cq_entry entries[16];
    const bool stamped = watchdog_.joinable();
    if (stamped) stamp_.cq_since_ns.store(now_ns(), std::memory_order_release);
    ssize_t n = fi_cq_read(core_->cq, entries, 16);
    if (stamped) stamp_.cq_since_ns.store(0, std::memory_order_release);
    if (n > 0) {
      for (ssize_t i = 0; i < n; ++i) {
        settle(static_cast<SubOp*>(entries[i].op_context), Status::Ok());
      }
      return true;
    }
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      if (fi_cq_readerr(core_->cq, &err, 0) < 0) return false;
      char buf[256] = {};
      const char* msg = fi_cq_strerror(core_->cq, err.prov_errno, err.err_data, buf, sizeof(buf));
      std::string detail = std::string(fi_strerror(err.err)) + " / provider: " + (msg ? msg : "?");
      if (err.op_context != nullptr) {
        settle(static_cast<SubOp*>(err.op_context),
               Status(Errc::rdma_transfer_failed, caps_.name + " RMA failed: " + detail));
      }
      return true;
    }
    return false;
  }

  void settle(SubOp* sub, Status st) {
    Op* op = sub->op;
    if (!st.ok() && op->status.ok()) op->status = std::move(st);
    if (!op->status.ok()) op->n_subs = op->next_post;  // a failed op posts nothing more
    --op->pending;
    if (op->done()) {
      finish(op);
      if (op->abandoned) ops_.erase(op->id);
    }
  }

  // Releases the op's hold on its peer, once, when the provider is done with it.
  void finish(Op* op) {
    if (op->finished) return;
    op->finished = true;
    if (auto* peer = peers_.peek(op->peer)) --peer->inflight;
  }

  // Hands subs[next_post..) to the provider until the queue is full (-FI_EAGAIN: Ok, the rest
  // stays for later) or an error (returned; the rest is dropped). mu held.
  Status post_some_locked(Op* op) {
    while (op->next_post < op->n_subs) {
      SubOp& sub = op->subs[op->next_post];
      fi_msg_rma msg{};
      msg.msg_iov = sub.iov.data();
      msg.desc = sub.desc.data();
      msg.iov_count = sub.iov.size();
      msg.addr = op->dest;
      msg.rma_iov = sub.rma.data();
      msg.rma_iov_count = sub.rma.size();
      msg.context = &sub.ctx;
      // FI_DELIVERY_COMPLETE: the completion means the bytes are visible in the target's
      // memory, not merely that our buffer may be reused (tcp;ofi_rxm, libfabric#9651).
      // Except shm_fast_write_ for one remote segment: there leaving the flag off is what lets
      // shm copy, and the completion already implies delivery above the inject size. At or
      // below it, only while the provider takes its fast path (small_fast_write_locked).
      std::uint64_t write_flags = FI_COMPLETION | FI_DELIVERY_COMPLETE;
      bool small_fast = false;
      if (op->write && shm_fast_write_ && sub.rma.size() == 1) {
        const bool small = sub.rma[0].len <= shm_inject_bytes;
        small_fast = small && small_fast_write_locked();
        if (!small || small_fast) write_flags = FI_COMPLETION;
      }
      const bool stamped = watchdog_.joinable();
      if (stamped) stamp_post(op->peer);
      ssize_t rc = op->write ? fi_writemsg(core_->ep, &msg, write_flags)
                             : fi_readmsg(core_->ep, &msg, FI_COMPLETION);
      if (stamped) stamp_.since_ns.store(0, std::memory_order_release);
      if (rc == -FI_EAGAIN) return Status::Ok();
      if (rc != 0) {
        op->n_subs = op->next_post;
        return detail::transport_error(caps_.name + (op->write ? ": fi_writemsg" : ": fi_readmsg"),
                                       fi_error(rc));
      }
      ++op->next_post;
      ++op->pending;
      if (small_fast && !small_fast_write_locked()) {
        // The provider's check of a new peer turned CMA off inside this very post, so it may
        // have queued the bytes for the target to copy: the completion would not mean delivery.
        // The write fails (the caller drains and falls back); later small writes keep
        // FI_DELIVERY_COMPLETE while the byte says off.
        op->n_subs = op->next_post;
        return Status(Errc::rdma_transfer_failed,
                      caps_.name +
                          ": CMA to peers turned off while a small write was posted; "
                          "its delivery is unconfirmed");
      }
    }
    return Status::Ok();
  }

  static std::int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
        .count();
  }

  // Whether a write of at most shm_inject_bytes posted now without FI_DELIVERY_COMPLETE takes
  // libfabric 1.17 shm's fast path, whose completion implies delivery. The provider takes it
  // while its own region's cma_cap_peer byte reads ON (smr_cma_enabled), and else carries the
  // bytes inline, completing before the target copies them. The byte changes only in the
  // provider's check of a newly mapped peer, which runs inside our provider calls, all made
  // under mu; so ON before a post and ON after it means ON when the provider looked (one check
  // per call). Layout unknown: false, and the flag stays. mu held.
  bool small_fast_write_locked() const {
    return own_cma_cap_peer_ != nullptr && region_cma_on(own_cma_cap_peer_);
  }

  // Marks the start of a provider post to `peer` for the watchdog. mu held (posts are serial).
  void stamp_post(const std::string& peer) {
    {
      std::lock_guard lock(stamp_.mu);
      if (stamp_.peer != peer) stamp_.peer = peer;
      ++stamp_.seq;
    }
    stamp_.since_ns.store(now_ns(), std::memory_order_release);
  }

  // shm only: every shm_watchdog_period, looks at the post in progress (never taking Core::mu,
  // which the stuck post holds) and releases a dead peer's region lock it is stuck on (see
  // release_dead_peer_lock). One release (or one decision to leave it) per post.
  void watchdog_loop() {
    std::uint64_t handled_post = 0;     // the post last released or left alone
    std::int64_t handled_cq = 0;        // the CQ read (its stamp) last released or left alone
    std::int64_t logged_untouched = 0;  // the stamp of the call last logged as not touched
    std::unique_lock wlock(watchdog_mu_);
    while (!watchdog_cv_.wait_for(wlock, shm_watchdog_period, [this] { return watchdog_stop_; })) {
      const std::int64_t now = now_ns();
      std::int64_t since = stamp_.since_ns.load(std::memory_order_acquire);
      std::uint64_t seq = 0;
      std::string peer;
      if (since != 0 && std::chrono::nanoseconds(now - since) >= shm_stuck_post) {
        {
          std::lock_guard lock(stamp_.mu);
          seq = stamp_.seq;
          peer = stamp_.peer;
        }
        // Still the same post: its stamp never went back to 0 in between (stamps are unique).
        if (stamp_.since_ns.load(std::memory_order_acquire) != since || seq == handled_post) {
          continue;
        }
      } else {
        since = stamp_.cq_since_ns.load(std::memory_order_acquire);
        if (since == 0 || since == handled_cq ||
            std::chrono::nanoseconds(now - since) < shm_stuck_post) {
          continue;
        }
      }
      const bool post = !peer.empty();
      std::string why;
      const LockRecovery r =
          post ? release_dead_peer_lock(peer, why) : release_any_dead_peer_lock(why);
      const long long ms = (now - since) / 1'000'000;
      const char* what = post ? "post" : "CQ read";
      switch (r) {
        case LockRecovery::released:
        case LockRecovery::left_alone:
          if (post) {
            handled_post = seq;
          } else {
            handled_cq = since;
          }
          if (r == LockRecovery::released) {
            g_shm_lock_releases.fetch_add(1, std::memory_order_relaxed);
            std::fprintf(stderr, "objdirect: %s: %s stuck %lld ms: %s\n", caps_.name.c_str(), what,
                         ms, why.c_str());
          } else {
            g_shm_locks_left_alone.fetch_add(1, std::memory_order_relaxed);
            std::fprintf(stderr, "objdirect: %s: %s stuck %lld ms, lock left alone: %s\n",
                         caps_.name.c_str(), what, ms, why.c_str());
          }
          break;
        case LockRecovery::peer_alive:
        case LockRecovery::not_held:
          if (logged_untouched != since) {  // retried every period: the peer may still die
            logged_untouched = since;
            std::fprintf(stderr, "objdirect: %s: %s stuck %lld ms, not touched: %s\n",
                         caps_.name.c_str(), what, ms, why.c_str());
          }
          break;
      }
    }
  }

  // Posts what the backlog holds, oldest first, until the queue is full again. mu held.
  bool drain_backlog_locked() {
    bool did = false;
    while (!backlog_.empty()) {
      auto it = ops_.find(backlog_.front());
      if (it == ops_.end() || it->second->next_post == it->second->n_subs) {
        backlog_.pop_front();
        continue;
      }
      Op* op = it->second.get();
      const std::size_t before = op->next_post;
      Status st = post_some_locked(op);
      did |= op->next_post != before;
      if (!st.ok() && op->status.ok()) op->status = std::move(st);
      if (op->next_post < op->n_subs) break;  // queue full: keep the order
      backlog_.pop_front();
      if (op->done()) {
        finish(op);
        if (op->abandoned) ops_.erase(op->id);
      }
    }
    return did;
  }

  // A peer that did not finish an operation within its timeout is treated as failed, so that
  // what the provider still holds for it cannot reach its memory after the caller has answered
  // (a server's 500; the client then reuses the buffer): every operation to it posts nothing
  // more, and on tcp;ofi_rxm (and the other connection-based providers) the peer leaves the AV,
  // which closes rxm's connection to it and ends the operations queued on it (they complete
  // with errors, so op_settled() becomes true). The next post to that address inserts it afresh
  // (a new connection). Not on shm: removing an AV entry there crashes the target when the slot
  // is reused (park_evicted_), and shm has no queue of ours that outlives the post: its writes
  // are copied synchronously (fast path) or are commands in the *peer's* queue, which the
  // peer's key check refuses once it has revoked the registration (client/rdma.hpp). mu held.
  void tear_down_peer_locked(const std::string& address) {
    if (park_evicted_) return;
    auto* e = peers_.peek(address);
    if (e == nullptr) return;
    fi_addr_t fa = e->handle;
    std::erase_if(ops_, [&](auto& kv) {
      Op* op = kv.second.get();
      if (op->dest != fa) return false;
      op->n_subs = op->next_post;  // post nothing more to it
      if (op->status.ok()) {
        op->status = Status(Errc::rdma_transfer_failed,
                            caps_.name + ": peer dropped after another operation timed out");
      }
      // Its count on the peer goes with the entry below (a later entry for the same address,
      // possibly with the same fi_addr_t, starts from zero and must not be decremented).
      op->finished = true;
      return op->done() && op->abandoned;  // a waited-for op stays until wait() consumes it
    });
    peers_.erase(address);
    fi_av_remove(core_->av, &fa, 1, 0);
  }

  // The peer's fi_addr, inserting (and evicting an idle peer) on first contact. mu held.
  Result<detail::PeerLru<fi_addr_t>::Entry*> peer_locked(const std::string& address) {
    if (auto* e = peers_.find(address)) return e;
    std::string buf = address;  // std::string keeps a NUL after the bytes (FI_ADDR_STR)
    if (core_->info->addr_format != FI_ADDR_STR && address.size() != local_address_.size()) {
      return Status(Errc::transport_error,
                    caps_.name + ": peer address of " + std::to_string(address.size()) +
                        " bytes, expected " + std::to_string(local_address_.size()));
    }
    if (address.empty()) return Status(Errc::transport_error, caps_.name + ": empty peer address");
    std::string victim;
    if (!peers_.pick_victim(victim)) {
      return Status(Errc::unavailable,
                    caps_.name + ": all peers_max peers have transfers in flight");
    }
    if (!victim.empty()) {
      fi_addr_t old = peers_.peek(victim)->handle;
      peers_.erase(victim);
      if (park_evicted_) {
        parked_.emplace(victim, old);
      } else {
        fi_av_remove(core_->av, &old, 1, 0);
      }
    }
    if (auto it = parked_.find(address); it != parked_.end()) {
      fi_addr_t fa = it->second;
      parked_.erase(it);
      return &peers_.insert(address, fa);
    }
    if (!parked_.empty() && parked_.size() + peers_.size() >= av_count_) {
      auto it = parked_.begin();  // the AV is full: a parked entry must really go
      fi_av_remove(core_->av, &it->second, 1, 0);
      parked_.erase(it);
    }
    fi_addr_t fa = FI_ADDR_UNSPEC;
    int rc = fi_av_insert(core_->av, buf.c_str(), 1, &fa, 0, nullptr);
    if (rc != 1) return detail::transport_error(caps_.name + ": fi_av_insert", fi_error(rc));
    return &peers_.insert(address, fa);
  }

  Result<OpId> post(bool write, std::string_view peer_view, std::span<const LocalSegment> local,
                    std::span<const RemoteSegment> remote) {
    auto chunks_or = detail::plan_chunks(local, remote, caps_.message_bytes_max);
    if (!chunks_or.ok()) return chunks_or.status();
    const std::vector<detail::Chunk>& chunks = *chunks_or;
    const std::string peer(peer_view);
    if (probe_new_peers_ && !chunks.empty()) {
      bool known = false;
      {
        std::lock_guard lock(core_->mu);
        known = peers_.peek(peer) != nullptr;
      }
      // Outside the lock: a peer that drops our SYN holds only this caller.
      if (!known) OBJDIRECT_RETURN_IF_ERROR(probe_peer(peer));
    }

    std::lock_guard lock(core_->mu);
    if (core_->ep == nullptr) return Status(Errc::transport_error, "transport is shut down");
    auto op = std::make_unique<Op>();
    op->id = next_op_++;
    op->peer = peer;
    op->write = write;
    op->finished = true;  // holds no peer until it has one
    Op* raw = op.get();
    if (chunks.empty()) {
      ops_.emplace(raw->id, std::move(op));
      return raw->id;
    }
    auto entry_or = peer_locked(peer);
    if (!entry_or.ok()) return entry_or.status();
    op->dest = (*entry_or)->handle;
    ++(*entry_or)->inflight;  // not evictable while any part of the op may still be posted
    op->finished = false;

    // shm's fast write takes one remote segment per operation.
    const std::size_t per_op =
        write && shm_fast_write_ ? 1 : std::max<std::size_t>(1, caps_.rma_iov_max);
    op->n_subs = (chunks.size() + per_op - 1) / per_op;
    op->subs = std::make_unique<SubOp[]>(op->n_subs);
    for (std::size_t s = 0; s < op->n_subs; ++s) {
      SubOp& sub = op->subs[s];
      sub.op = raw;
      const std::size_t first = s * per_op;
      const std::size_t count = std::min(per_op, chunks.size() - first);
      for (std::size_t k = 0; k < count; ++k) {
        const detail::Chunk& c = chunks[first + k];
        auto* region = static_cast<FabricRegion*>(c.mr);
        sub.iov.push_back(iovec{static_cast<char*>(region->ptr()) + c.local_offset,
                                static_cast<std::size_t>(c.length)});
        sub.desc.push_back(region->desc());
        sub.rma.push_back(fi_rma_iov{c.remote_addr, static_cast<std::size_t>(c.length), c.key});
      }
    }
    for (const LocalSegment& s : local) op->regions.push_back(s.mr->shared_from_this());
    ops_.emplace(raw->id, std::move(op));

    // Older backlogged operations go first; this one joins the queue behind them.
    Status st = backlog_.empty() ? post_some_locked(raw) : Status::Ok();
    if (!st.ok()) {
      if (raw->pending == 0) {
        finish(raw);
        ops_.erase(raw->id);
        return st;
      }
      // Parts are with the provider: the caller learns the failure from wait(), which also
      // tells it when the provider is done with the buffers (see post_write's contract).
      raw->status = st;
    }
    if (raw->next_post < raw->n_subs) backlog_.push_back(raw->id);
    return raw->id;
  }

  // tcp only: whether a new peer's listening address accepts a TCP connection from our source
  // address, within tcp_connect_probe_ms_max. ofi_rxm connects lazily and, when it cannot (a
  // peer that advertised an address we cannot reach, a source address bound to another
  // interface), keeps answering -FI_EAGAIN until wait()'s op timeout (30 s): the probe turns
  // that into an immediate transport_error. Reachable peers pay one extra connect on first
  // contact (peers are cached).
  Status probe_peer(const std::string& peer) const {
    const std::string what = caps_.name + ": peer " + sockaddr_text(peer.data(), peer.size());
    sockaddr_storage dst{};
    if (peer.size() > sizeof(dst) ||
        (peer.size() != sizeof(sockaddr_in) && peer.size() != sizeof(sockaddr_in6))) {
      return Status(Errc::transport_error, what + ": not an IP socket address");
    }
    std::memcpy(&dst, peer.data(), peer.size());
    int fd = ::socket(dst.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return Status(Errc::transport_error, what + ": socket: " + std::strerror(errno));
    auto fail = [&](const char* step, int err) {
      ::close(fd);
      return Status(Errc::transport_error, what + " unreachable from " + local_text_ + ": " + step +
                                               ": " + std::strerror(err));
    };
    const auto* src = static_cast<const sockaddr*>(core_->info->src_addr);
    if (src != nullptr && src->sa_family == dst.ss_family && !is_any_address(src)) {
      sockaddr_storage from{};
      std::memcpy(&from, src, core_->info->src_addrlen);
      if (from.ss_family == AF_INET) reinterpret_cast<sockaddr_in*>(&from)->sin_port = 0;
      if (from.ss_family == AF_INET6) reinterpret_cast<sockaddr_in6*>(&from)->sin6_port = 0;
      if (::bind(fd, reinterpret_cast<sockaddr*>(&from), core_->info->src_addrlen) != 0) {
        return fail("bind", errno);
      }
    }
    if (::connect(fd, reinterpret_cast<sockaddr*>(&dst), static_cast<socklen_t>(peer.size())) !=
        0) {
      if (errno != EINPROGRESS) return fail("connect", errno);
      pollfd p{fd, POLLOUT, 0};
      int n = ::poll(&p, 1, static_cast<int>(tcp_connect_probe_ms_max.count()));
      if (n == 0) return fail("connect", ETIMEDOUT);
      int err = 0;
      socklen_t len = sizeof(err);
      if (n < 0) err = errno;
      if (n > 0 && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      if (err != 0) return fail("connect", err);
    }
    ::close(fd);
    return Status::Ok();
  }

  std::shared_ptr<Core> core_;
  Capabilities caps_;
  std::string local_address_;
  std::string local_text_;  // our source address, for messages
  bool probe_new_peers_ = false;
  detail::PeerLru<fi_addr_t> peers_;
  // libfabric 1.17 shm crashes the *target* process (SIGSEGV in its progress) when the
  // initiator fi_av_remove()s a peer and then inserts another (measured: the freed AV slot is
  // reused). So on shm an evicted peer stays in the AV, "parked", and is reused if it comes
  // back; parked entries are removed for real only when the AV (av_count_, 256 on shm) is full.
  bool park_evicted_ = false;
  // libfabric 1.17 shm has a "fast RMA" path: for an operation without FI_DELIVERY_COMPLETE and
  // with one remote segment, on a domain with FI_MR_VIRT_ADDR and no RMA ordering, while CMA
  // works between the two processes, the *initiator* moves the bytes itself with
  // process_vm_writev inside fi_writemsg, and the target's CPU does nothing (with the flag, the
  // target's progress pulls them with process_vm_readv: the client paid for every GET's copy).
  // Completion then implies delivery. Where CMA is refused the provider falls back to its
  // iov/SAR/mmap protocols, whose completions also wait for the target's copy; only the
  // inline/inject protocol (<= shm_inject_bytes) completes early, so a small write keeps the
  // flag unless small_fast_write_locked() shows the provider will take the fast path.
  bool shm_fast_write_ = false;
  std::size_t av_count_ = 0;
  // libfabric 1.17 shm only (null elsewhere): the lock word of this endpoint's own region. shm's
  // fast write (above) holds the *target's* region lock for the whole process_vm_writev, and
  // every poll of the target (fi_cq_read -> shm progress) takes that same lock: a client whose
  // progress thread polled during a GET spun in pthread_spin_lock until each copy ended (perf,
  // docs/BENCHMARKS.md "Who copies a GET under shm"). progress() reads the word first and skips
  // the poll while it is held; a read never takes or alters the lock.
  const int* own_region_lock_ = nullptr;
  // libfabric 1.17 shm only (null elsewhere): this endpoint's region's cma_cap_peer byte, read by
  // small_fast_write_locked(); never written.
  const std::uint8_t* own_cma_cap_peer_ = nullptr;
  std::unordered_map<std::string, fi_addr_t> parked_;
  std::unordered_map<OpId, std::unique_ptr<Op>> ops_;
  std::deque<OpId> backlog_;  // ops with parts the transmit queue could not take yet
  OpId next_op_ = 1;
  std::unique_ptr<detail::ProgressThread> progress_thread_;
  // shm only: the provider post or CQ read in progress, read by the watchdog without Core::mu.
  struct PostStamp {
    std::atomic<std::int64_t> since_ns{0};     // steady-clock ns when the post began; 0: none
    std::atomic<std::int64_t> cq_since_ns{0};  // the same for an fi_cq_read
    std::mutex mu;                             // guards seq and peer; never held across a post
    std::uint64_t seq = 0;                     // which post
    std::string peer;
  };
  PostStamp stamp_;
  std::mutex watchdog_mu_;
  std::condition_variable watchdog_cv_;
  bool watchdog_stop_ = false;
  std::thread watchdog_;  // last member: started last in the constructor
};

// node: with FI_SOURCE, the local address the endpoint binds (tcp); null: the provider's choice.
Result<fi_info*> get_info(const char* prov_name, std::uint64_t caps, const char* node) {
  fi_info* hints = fi_allocinfo();
  if (hints == nullptr) return Status(Errc::unavailable, "fi_allocinfo failed");
  hints->caps = caps;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->ep_attr->type = FI_EP_RDM;
  hints->domain_attr->mr_mode =
      FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
  hints->domain_attr->threading = FI_THREAD_DOMAIN;  // we serialise every call under Core::mu
  hints->fabric_attr->prov_name = strdup(prov_name);
  fi_info* info = nullptr;
  int rc = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), node, nullptr,
                      node != nullptr ? FI_SOURCE : 0, hints, &info);
  fi_freeinfo(hints);
  if (rc != 0 || info == nullptr) {
    return Status(Errc::unavailable, std::string("fi_getinfo(") + prov_name +
                                         (node != nullptr ? std::string(", ") + node : "") +
                                         "): " + fi_error(rc));
  }
  return info;
}

}  // namespace

ShmLockRecoveryStats shm_lock_recovery_stats() {
  return ShmLockRecoveryStats{g_shm_lock_releases.load(std::memory_order_relaxed),
                              g_shm_locks_left_alone.load(std::memory_order_relaxed)};
}

Result<std::unique_ptr<Transport>> create_libfabric_transport(const Config& config,
                                                              std::string_view provider) {
  std::string prov_name;
  std::string node;  // tcp: the local address to serve (FI_SOURCE)
  if (provider == "tcp") {
    prov_name = "tcp;ofi_rxm";
    // tcp;ofi_rxm ignores the domain-name hint, and without an address it takes the first
    // interface it finds. So it binds the address the owner names (the interface that reaches
    // the peers; every one for 0.0.0.0), loopback when none; an operator's FI_TCP_IFACE wins.
    const char* iface = std::getenv("FI_TCP_IFACE");
    if (iface == nullptr || *iface == '\0') {
      node = config.local_host.empty() ? "127.0.0.1" : config.local_host;
    }
  } else if (provider == "verbs") {
    prov_name = "verbs;ofi_rxm";
  } else if (provider == "shm" || provider == "efa") {
    prov_name = std::string(provider);
  } else {
    return Status(Errc::invalid_argument, "unknown libfabric provider \"" + std::string(provider) +
                                              "\" (expected tcp, shm, verbs or efa)");
  }

  // Ask for write and read; a provider without RMA write (EFA before libfabric 1.18) still
  // serves reads, and caps() says so.
  const char* node_arg = node.empty() ? nullptr : node.c_str();
  auto info_or = get_info(prov_name.c_str(), rma_caps, node_arg);
  if (!info_or.ok()) {
    auto read_only =
        get_info(prov_name.c_str(), rma_caps & ~(FI_WRITE | FI_REMOTE_WRITE), node_arg);
    if (!read_only.ok()) return info_or.status();
    info_or = std::move(read_only);
  }
  auto core = std::make_shared<Core>();
  core->info = *info_or;
  fi_info* info = core->info;
  auto fail = [&](const char* what, int rc) {
    return Status(Errc::unavailable,
                  "libfabric:" + std::string(provider) + ": " + what + ": " + fi_error(rc));
  };

  int rc = fi_fabric(info->fabric_attr, &core->fabric, nullptr);
  if (rc != 0) return fail("fi_fabric", rc);
  rc = fi_domain(core->fabric, info, &core->domain, nullptr);
  if (rc != 0) return fail("fi_domain", rc);
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_CONTEXT;
  cq_attr.size = info->tx_attr->size + info->rx_attr->size;
  cq_attr.wait_obj = FI_WAIT_NONE;  // shm and efa have no FI_WAIT_FD: we poll
  rc = fi_cq_open(core->domain, &cq_attr, &core->cq, nullptr);
  if (rc != 0) return fail("fi_cq_open", rc);
  fi_av_attr av_attr{};
  av_attr.type =
      info->domain_attr->av_type != FI_AV_UNSPEC ? info->domain_attr->av_type : FI_AV_TABLE;
  // Some providers cap the AV (shm: 256 peers in 1.17) and refuse a larger count with
  // FI_ENOSYS; halve until accepted and cap the peer cache to what the AV holds.
  // The AV is sized independently of peers_max so that shm can park evicted peers (see
  // LibfabricTransport::parked_).
  std::size_t av_count = std::max<std::size_t>(1024, config.peers_max);
  for (;;) {
    av_attr.count = av_count;
    rc = fi_av_open(core->domain, &av_attr, &core->av, nullptr);
    if (rc == 0 || av_count <= 16) break;
    av_count /= 2;
  }
  if (rc != 0) return fail("fi_av_open", rc);

  rc = fi_endpoint(core->domain, info, &core->ep, nullptr);
  if (rc != 0) return fail("fi_endpoint", rc);
  rc = fi_ep_bind(core->ep, &core->cq->fid, FI_TRANSMIT | FI_RECV);
  if (rc != 0) return fail("fi_ep_bind(cq)", rc);
  rc = fi_ep_bind(core->ep, &core->av->fid, 0);
  if (rc != 0) return fail("fi_ep_bind(av)", rc);
  std::string region_name;
  if (provider == "shm") {
    reclaim_dead_shm_regions();
    // shm names its region in /dev/shm after the pid ("<pid>:0:0"). A process killed with
    // SIGKILL leaves that file behind, and a later process that reuses the pid then fails
    // fi_enable with EBUSY (measured). A random name per endpoint never collides.
    std::random_device rd;
    char name[64];
    std::snprintf(name, sizeof(name), "fi_shm://objdirect-%d-%08x%08x",
                  static_cast<int>(::getpid()), rd(), rd());
    rc = fi_setname(&core->ep->fid, name, std::strlen(name) + 1);
    if (rc != 0) return fail("fi_setname", rc);
    region_name = name + std::strlen("fi_shm://");
  }
  rc = fi_enable(core->ep);
  if (rc != 0) return fail("fi_enable", rc);

  std::string address(64, '\0');
  std::size_t len = address.size();
  rc = fi_getname(&core->ep->fid, address.data(), &len);
  if (rc == -FI_ETOOSMALL) {
    address.resize(len);
    rc = fi_getname(&core->ep->fid, address.data(), &len);
  }
  if (rc != 0) return fail("fi_getname", rc);
  address.resize(len);

  Capabilities caps;
  caps.name = "libfabric:" + std::string(provider);
  caps.backend = Backend::libfabric;
  caps.provider = std::string(provider);
  caps.addressing = (info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? Addressing::virtual_address
                                                                   : Addressing::offset;
  caps.rma_iov_max =
      std::max<std::size_t>(1, std::min(info->tx_attr->rma_iov_limit, info->tx_attr->iov_limit));
  caps.message_bytes_max = info->ep_attr->max_msg_size;
  caps.can_write = (info->caps & FI_WRITE) != 0;
  caps.can_read = (info->caps & FI_READ) != 0;
  caps.host_memory = true;
  caps.cuda_memory = (info->caps & FI_HMEM) != 0;
  // tcp and shm copy with the CPU and resolve the virtual range per transfer: registering pins
  // nothing, so file mappings may be registered and reused memory keeps a valid registration.
  // verbs and efa register with the NIC, which pins the pages.
  const bool software = provider == "tcp" || provider == "shm";
  caps.registration_pins = !software;
  caps.mapped_source_write = software;
  // shm's fast path: the peer copies with process_vm_readv/writev (CMA), and 1.17's endpoint
  // completes in order, so a peer that died with operations in flight stalls it for good.
  caps.peer_copies = provider == "shm";
  caps.reset_after_peer_failure = provider == "shm";
  // This endpoint's own region (libfabric 1.17 shm only): its lock word and cma_cap_peer byte.
  const unsigned char* own_region =
      region_name.empty() ? nullptr : find_region_header(region_name, static_cast<int>(::getpid()));
  return std::unique_ptr<Transport>(std::make_unique<LibfabricTransport>(
      std::move(core), std::move(caps), std::move(address), config, av_count, own_region));
}

}  // namespace objdirect::transport::libfabric
