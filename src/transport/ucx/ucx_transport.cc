#include "transport/ucx/ucx_transport.hpp"

#include <dirent.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <ucp/api/ucp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "transport/detail.hpp"
#include "transport/ucx/peer_address.hpp"

namespace objdirect::transport::ucx {
namespace {

using Clock = std::chrono::steady_clock;

// Bound on how long the destructor drives endpoint closes before giving up on them.
constexpr auto close_drain_max = std::chrono::seconds(2);
// A peer reached only without failure detection (UCX shared memory) is first read one byte from
// (probe_locked): UCX deems shared memory reachable between network namespaces of one kernel,
// where it never completes and nothing reports it. The probe waits at most this long (a first
// contact may need a lazy connection and one poll of the peer's progress, as the engine's
// mailbox read allows), so such a peer fails in about 2 s instead of twice the op timeout.
constexpr auto probe_wait_max = std::chrono::milliseconds(2000);
// Probes that never completed keep their one-byte landing slot until UCX lets go of it (the
// worker's end at the latest); past this many, peers without failure detection are refused.
constexpr std::size_t stuck_probes_max = 64;

// The landing byte of one probe read and its outcome; UCX's callback names it.
struct ProbeSlot {
  std::byte landing{};
  bool done = false;
  ucs_status_t status = UCS_OK;
};

std::string ucs_error(ucs_status_t st) {
  return std::string(ucs_status_string(st)) + " (" + std::to_string(static_cast<int>(st)) + ")";
}

// Owns the ucp context, which must stay alive while any region is still mapped.
struct Core {
  // Recursive: an Op erased under the lock may drop the last reference to a region, whose
  // destructor takes the lock again to ucp_mem_unmap.
  std::recursive_mutex mu;
  ucp_context_h context = nullptr;
  ~Core() {
    if (context) ucp_cleanup(context);
  }
};

class UcxRegion final : public MemoryRegion {
 public:
  UcxRegion(void* ptr, std::size_t len, MemoryType type, std::shared_ptr<Core> core, ucp_mem_h memh,
            std::string packed_rkey)
      : MemoryRegion(ptr, len, type, Addressing::virtual_address),
        core_(std::move(core)),
        memh_(memh) {
    packed_rkey_ = std::move(packed_rkey);
  }
  ~UcxRegion() override {
    std::lock_guard lock(core_->mu);
    ucp_mem_unmap(core_->context, memh_);
  }
  ucp_mem_h memh() const { return memh_; }
  void synchronize() const override { std::lock_guard lock(core_->mu); }

 private:
  std::shared_ptr<Core> core_;
  ucp_mem_h memh_;
};

// One cached endpoint. Heap-allocated and never moved: the endpoint's error handler points at it.
struct Peer {
  ucp_ep_h ep = nullptr;
  bool failed = false;
  bool* any_failed = nullptr;  // the transport's flag: some peer failed, close its endpoint
  std::string failure;
  // Created in UCP_ERR_HANDLING_MODE_NONE (no transport with peer failure detection reaches the
  // peer: shared memory only). Nothing reports such a peer unreachable: its first operation is
  // preceded by a probe read (probe_locked), and a timeout says why.
  bool no_failure_detection = false;
  bool probed = false;  // a probe read completed
};

class UcxTransport;

// The user_data of one UCX request. It names the Op by id, not by pointer: UCX may complete a
// request after its Op is gone (ucp_worker_destroy purges what a dead peer never acknowledged).
struct Ticket {
  UcxTransport* owner;
  OpId id;
};

struct Op {
  OpId id = 0;
  std::string peer;
  std::size_t pending = 0;  // UCX requests not yet completed
  Status status;
  bool abandoned = false;
  std::vector<ucp_rkey_h> rkeys;
  std::vector<std::shared_ptr<MemoryRegion>> regions;
};

class UcxTransport final : public Transport {
 public:
  UcxTransport(std::shared_ptr<Core> core, ucp_worker_h worker, Capabilities caps,
               std::string local_address, const Config& config)
      : core_(std::move(core)),
        worker_(worker),
        caps_(std::move(caps)),
        local_address_(std::move(local_address)),
        peers_(config.peers_max) {
    if (config.progress_thread) {
      progress_thread_ = std::make_unique<detail::ProgressThread>(
          [this] { return progress(); }, config.progress_sleep_max, config.progress_idle_poll);
    }
  }

  ~UcxTransport() override {
    progress_thread_.reset();
    std::lock_guard lock(core_->mu);
    peers_.for_each([&](const std::string&, detail::PeerLru<std::shared_ptr<Peer>>::Entry& e) {
      close_endpoint_locked(e.handle);
    });
    // Force-closing endpoints completes their outstanding requests with errors; drive the worker
    // until that has happened so no callback can name a destroyed Op.
    const auto give_up = Clock::now() + close_drain_max;
    while ((!closing_.empty() || any_pending()) && Clock::now() < give_up) {
      ucp_worker_progress(worker_);
      reap_closing_locked();
    }
    for (auto& [id, op] : ops_) release_rkeys(*op);
    ops_.clear();
    ucp_worker_destroy(worker_);  // may still complete requests: their tickets find no Op
    for (Ticket* t : tickets_) delete t;
    stuck_probes_.clear();  // UCX holds none of them any more
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
                    "ucx: this UCX build does not support CUDA memory (no UCS_MEMORY_TYPE_CUDA)");
    }
    std::lock_guard lock(core_->mu);
    ucp_mem_map_params_t params{};
    params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                        UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
    params.address = ptr;
    params.length = len;
    params.memory_type = type == MemoryType::cuda ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST;
    ucp_mem_h memh = nullptr;
    ucs_status_t st = ucp_mem_map(core_->context, &params, &memh);
    if (st != UCS_OK) return detail::transport_error("ucp_mem_map", ucs_error(st));
    void* rkey_buf = nullptr;
    std::size_t rkey_len = 0;
    st = ucp_rkey_pack(core_->context, memh, &rkey_buf, &rkey_len);
    if (st != UCS_OK) {
      ucp_mem_unmap(core_->context, memh);
      return detail::transport_error("ucp_rkey_pack", ucs_error(st));
    }
    std::string packed(static_cast<const char*>(rkey_buf), rkey_len);
    ucp_rkey_buffer_release(rkey_buf);
    if (packed.size() > limits::token_rkey_bytes_max) {
      ucp_mem_unmap(core_->context, memh);
      return detail::transport_error("ucp_rkey_pack", "packed rkey of " +
                                                          std::to_string(packed.size()) +
                                                          " bytes exceeds token_rkey_bytes_max");
    }
    return std::shared_ptr<MemoryRegion>(
        std::make_shared<UcxRegion>(ptr, len, type, core_, memh, std::move(packed)));
  }

  Result<OpId> post_write(std::string_view peer, std::span<const LocalSegment> local,
                          std::span<const RemoteSegment> remote) override {
    return post(true, peer, local, remote);
  }

  Result<OpId> post_read(std::string_view peer, std::span<const LocalSegment> local,
                         std::span<const RemoteSegment> remote) override {
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
        if (it->second->pending == 0) {
          Status st = std::move(it->second->status);
          ops_.erase(it);
          return st;
        }
        did = poll_locked();
        if (it->second->pending == 0) continue;
        // The deadline holds even while other operations keep the worker busy.
        if (Clock::now() >= deadline) {
          it->second->abandoned = true;
          // A peer that did not finish an operation within its timeout is treated as failed:
          // force-closing its endpoint makes UCX complete (cancel) the outstanding requests, so
          // the abandoned Op settles and its buffers can be freed (op_settled()). Without that,
          // an endpoint to a peer that died before it connected (error mode NONE, no error
          // callback) held its requests, and the server's staging buffers, forever. Over sm
          // (error mode NONE: no peer failure handler there) the force close does not cancel
          // requests still queued for a live peer: they go out, and complete, as the peer takes
          // them (TransportTest.TimedOutPeerIsTornDownAndItsOperationSettles).
          std::string why;
          if (auto* e = peers_.peek(it->second->peer)) {
            if (!e->handle->failed) {
              e->handle->failed = true;
              e->handle->failure = "an operation timed out";
            }
            // Shared memory is the only way UCX found to this peer, and it never answered: a dead
            // peer, or one in another network namespace (README.md here).
            if (e->handle->no_failure_detection) {
              why =
                  " (the peer is reachable only over UCX shared memory, which has no peer "
                  "failure detection: a dead peer, or one in another network namespace, which "
                  "UCX shared memory does not cross)";
            }
            close_endpoint_locked(e->handle);
          }
          return Status(Errc::rdma_transfer_failed, "ucx: transfer to peer timed out after " +
                                                        std::to_string(timeout.count()) + " ms" +
                                                        why);
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
    std::lock_guard lock(core_->mu);
    return poll_locked();
  }

  bool op_settled(OpId id) const override {
    // An abandoned Op is erased once UCX has completed (or, for a failed or force-closed
    // endpoint, cancelled) its last request (settle()).
    std::unique_lock lock(core_->mu, std::try_to_lock);
    if (!lock.owns_lock()) return false;
    return ops_.find(id) == ops_.end();
  }

  std::shared_ptr<void> keep_progress_hot(std::uint64_t /*transfer_bytes*/,
                                          bool /*peer_needs_no_polls*/) override {
    // UCX picks its transport per peer (sm, tcp) and tcp's emulated RMA moves only while this
    // side polls: every hold is a full-rate one.
    if (progress_thread_) return progress_thread_->hold();
    return std::make_shared<int>(0);
  }

  // Which UCX transport carries an operation is UCX's choice per peer, and tcp's emulated RMA
  // needs the target's polls: never promised.
  bool rma_lands_without_target_progress() const override { return false; }

  std::size_t peers_cached() const override {
    std::lock_guard lock(core_->mu);
    return peers_.size();
  }

 private:
  static void on_request_done(void* request, ucs_status_t status, void* user_data) {
    auto* ticket = static_cast<Ticket*>(user_data);
    UcxTransport* self = ticket->owner;
    self->tickets_.erase(ticket);
    auto it = self->ops_.find(ticket->id);
    delete ticket;
    if (it != self->ops_.end()) self->settle(it->second.get(), status);
    ucp_request_free(request);
  }

  static void on_probe_done(void* request, ucs_status_t status, void* user_data) {
    auto* slot = static_cast<ProbeSlot*>(user_data);
    slot->done = true;
    slot->status = status;
    ucp_request_free(request);
  }

  // Reads one byte of the peer's first remote segment and waits for it (at most probe_wait_max,
  // driving the worker). On failure the peer is marked failed and its endpoint closed, so the
  // caller fails at once and the engine falls back (and the client remembers the fabric failed).
  Status probe_locked(Peer& peer, std::uint64_t remote_addr, ucp_rkey_h rkey) {
    std::erase_if(stuck_probes_, [](const std::unique_ptr<ProbeSlot>& p) { return p->done; });
    if (stuck_probes_.size() >= stuck_probes_max) {
      return Status(Errc::rdma_transfer_failed,
                    "ucx: " + std::to_string(stuck_probes_max) +
                        " probe reads of peers reached only over UCX shared memory never "
                        "completed; refusing more such peers");
    }
    auto slot = std::make_unique<ProbeSlot>();
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.send = &UcxTransport::on_probe_done;
    param.user_data = slot.get();
    ucs_status_ptr_t req = ucp_get_nbx(peer.ep, &slot->landing, 1, remote_addr, rkey, &param);
    if (req == nullptr) {
      peer.probed = true;
      return Status::Ok();
    }
    if (UCS_PTR_IS_ERR(req)) {
      return detail::transport_error("ucx: probe ucp_get_nbx", ucs_error(UCS_PTR_STATUS(req)));
    }
    const auto give_up = Clock::now() + probe_wait_max;
    detail::Backoff backoff(std::chrono::microseconds(50));
    while (!slot->done && Clock::now() < give_up) {
      if (poll_locked()) {
        backoff.reset();
      } else {
        backoff.pause();
      }
    }
    if (slot->done && slot->status == UCS_OK) {
      peer.probed = true;
      return Status::Ok();
    }
    std::string why =
        slot->done ? "failed: " + ucs_error(slot->status)
                   : "did not complete within " + std::to_string(probe_wait_max.count()) + " ms";
    if (!slot->done) stuck_probes_.push_back(std::move(slot));
    peer.failed = true;
    peer.failure = "a probe read " + why;
    return Status(Errc::rdma_transfer_failed,
                  "ucx: peer unreachable: a one-byte probe read " + why +
                      " (the peer is reachable only over UCX shared memory, which has no peer "
                      "failure detection: a dead peer, or one in another network namespace, "
                      "which UCX shared memory does not cross)");
  }

  static void on_endpoint_error(void* arg, ucp_ep_h, ucs_status_t status) {
    auto* peer = static_cast<Peer*>(arg);
    peer->failed = true;
    *peer->any_failed = true;
    peer->failure = ucs_error(status);
  }

  bool poll_locked() {
    bool did = ucp_worker_progress(worker_) != 0;
    if (peer_failed_) {
      // UCX completes a failed endpoint's outstanding requests (with an error) only once the
      // endpoint is closed; until then an operation abandoned by wait() would hold its buffers
      // for good. The entry stays (failed) until its in-flight count drops to 0.
      peer_failed_ = false;
      peers_.for_each([&](const std::string&, detail::PeerLru<std::shared_ptr<Peer>>::Entry& e) {
        if (e.handle->failed) close_endpoint_locked(e.handle);
      });
      did = true;
    }
    if (!closing_.empty()) reap_closing_locked();
    graveyard_.clear();  // unmap released regions here, not inside a UCX callback
    return did;
  }

  bool any_pending() const {
    return std::any_of(ops_.begin(), ops_.end(),
                       [](const auto& kv) { return kv.second->pending > 0; });
  }

  void release_rkeys(Op& op) {
    for (ucp_rkey_h rk : op.rkeys) ucp_rkey_destroy(rk);
    op.rkeys.clear();
  }

  // Called with mu held (from ucp_worker_progress or directly).
  void settle(Op* op, ucs_status_t status) {
    if (status != UCS_OK && op->status.ok()) {
      op->status = Status(Errc::rdma_transfer_failed, "ucx RMA failed: " + ucs_error(status));
    }
    if (auto* e = peers_.peek(op->peer)) --e->inflight;
    if (--op->pending == 0) {
      release_rkeys(*op);
      // We may be inside ucp_worker_progress: defer ucp_mem_unmap of a last reference.
      for (auto& r : op->regions) graveyard_.push_back(std::move(r));
      op->regions.clear();
      if (op->abandoned) ops_.erase(op->id);
    }
  }

  void close_endpoint_locked(const std::shared_ptr<Peer>& peer) {
    if (peer->ep == nullptr) return;
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_EP_CLOSE_FLAG_FORCE;
    ucs_status_ptr_t req = ucp_ep_close_nbx(peer->ep, &param);
    peer->ep = nullptr;
    if (UCS_PTR_IS_PTR(req)) closing_.push_back({req, peer});
  }

  void reap_closing_locked() {
    std::erase_if(closing_, [](const Closing& c) {
      if (ucp_request_check_status(c.request) == UCS_INPROGRESS) return false;
      ucp_request_free(c.request);
      return true;
    });
  }

  Result<detail::PeerLru<std::shared_ptr<Peer>>::Entry*> peer_locked(const std::string& address) {
    if (auto* e = peers_.find(address)) {
      if (!e->handle->failed) return e;
      if (e->inflight > 0) {
        return Status(Errc::rdma_transfer_failed, "ucx: peer failed: " + e->handle->failure);
      }
      // A failed idle peer may have restarted: drop the endpoint and connect afresh.
      close_endpoint_locked(e->handle);
      peers_.erase(address);
    }
    if (address.empty() || address.size() > limits::token_endpoint_bytes_max) {
      return Status(Errc::transport_error,
                    "ucx: peer worker address of " + std::to_string(address.size()) + " bytes");
    }
    std::string victim;
    if (!peers_.pick_victim(victim)) {
      return Status(Errc::unavailable, "ucx: all peers_max peers have transfers in flight");
    }
    if (!victim.empty()) {
      close_endpoint_locked(peers_.peek(victim)->handle);
      peers_.erase(victim);
    }
    auto peer = std::make_shared<Peer>();
    peer->any_failed = &peer_failed_;
    ucp_ep_params_t params{};
    params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                        UCP_EP_PARAM_FIELD_ERR_HANDLER;
    // PEER mode reports a dead peer through the error handler instead of hanging; fall back to
    // NONE where the selected transports cannot detect peer failure.
    params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    params.err_handler.cb = &UcxTransport::on_endpoint_error;
    params.err_handler.arg = peer.get();
    const PeerAddress parsed = decode_peer_address(address);
    params.address = reinterpret_cast<const ucp_address_t*>(parsed.worker.data());
    ucs_status_t st = ucp_ep_create(worker_, &params, &peer->ep);
    if (st != UCS_OK) {
      params.err_mode = UCP_ERR_HANDLING_MODE_NONE;
      st = ucp_ep_create(worker_, &params, &peer->ep);
      peer->no_failure_detection = true;
    }
    if (st != UCS_OK) return detail::transport_error("ucx: ucp_ep_create", ucs_error(st));
    // Shared memory only, and the peer says it lives in another network namespace: UCX's
    // shared-memory transports never complete across that boundary (README.md here), so the
    // peer is refused before anything is posted instead of after a probe's timeout.
    if (peer->no_failure_detection && parsed.net_namespace && own_net_namespace_ &&
        !(*parsed.net_namespace == *own_net_namespace_)) {
      close_endpoint_locked(peer);
      return Status(Errc::rdma_transfer_failed,
                    "ucx: peer unreachable: it is in another network namespace (net:[" +
                        std::to_string(parsed.net_namespace->ino) +
                        "]) and reachable only over UCX shared memory, which does not cross "
                        "network namespaces");
    }
    return &peers_.insert(address, std::move(peer));
  }

  Result<OpId> post(bool write, std::string_view peer_view, std::span<const LocalSegment> local,
                    std::span<const RemoteSegment> remote) {
    auto chunks_or = detail::plan_chunks(local, remote, caps_.message_bytes_max);
    if (!chunks_or.ok()) return chunks_or.status();
    const std::vector<detail::Chunk>& chunks = *chunks_or;
    const std::string peer_addr(peer_view);

    std::lock_guard lock(core_->mu);
    auto op = std::make_unique<Op>();
    op->id = next_op_++;
    op->peer = peer_addr;
    Op* raw = op.get();
    if (chunks.empty()) {
      ops_.emplace(raw->id, std::move(op));
      return raw->id;
    }
    auto entry_or = peer_locked(peer_addr);
    if (!entry_or.ok()) return entry_or.status();
    ucp_ep_h ep = (*entry_or)->handle->ep;

    for (const RemoteSegment& r : remote) {
      ucp_rkey_h rk = nullptr;
      ucs_status_t st =
          r.rkey.empty() ? UCS_ERR_INVALID_PARAM : ucp_ep_rkey_unpack(ep, r.rkey.data(), &rk);
      if (st != UCS_OK) {
        release_rkeys(*op);
        return detail::transport_error("ucx: ucp_ep_rkey_unpack", ucs_error(st));
      }
      op->rkeys.push_back(rk);
    }
    if (const std::shared_ptr<Peer> peer = (*entry_or)->handle;
        peer->no_failure_detection && !peer->probed) {
      if (Status probe = probe_locked(*peer, chunks.front().remote_addr,
                                      op->rkeys[chunks.front().remote_index]);
          !probe.ok()) {
        release_rkeys(*op);
        close_endpoint_locked(peer);
        return probe;
      }
    }
    for (const LocalSegment& s : local) op->regions.push_back(s.mr->shared_from_this());
    ops_.emplace(raw->id, std::move(op));

    // Each request gets a ticket; it is kept only when UCX keeps the request.
    auto account = [&](Ticket* t, ucs_status_ptr_t req, const char* what) -> Status {
      if (req == nullptr || UCS_PTR_IS_ERR(req)) delete t;
      if (req == nullptr) return Status::Ok();  // completed in place
      if (UCS_PTR_IS_ERR(req)) {
        return detail::transport_error(std::string("ucx: ") + what, ucs_error(UCS_PTR_STATUS(req)));
      }
      tickets_.insert(t);
      ++raw->pending;
      if (auto* e = peers_.peek(peer_addr)) ++e->inflight;
      return Status::Ok();
    };
    Status st;
    for (const detail::Chunk& c : chunks) {
      auto* region = static_cast<UcxRegion*>(c.mr);
      ucp_request_param_t param{};
      param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                           UCP_OP_ATTR_FIELD_MEMH | UCP_OP_ATTR_FIELD_MEMORY_TYPE;
      param.cb.send = &UcxTransport::on_request_done;
      auto* t = new Ticket{this, raw->id};
      param.user_data = t;
      param.memh = region->memh();
      param.memory_type =
          region->memory_type() == MemoryType::cuda ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST;
      void* buf = static_cast<char*>(region->ptr()) + c.local_offset;
      ucp_rkey_h rk = raw->rkeys[c.remote_index];
      st = write ? account(t, ucp_put_nbx(ep, buf, c.length, c.remote_addr, rk, &param),
                           "ucp_put_nbx")
                 : account(t, ucp_get_nbx(ep, buf, c.length, c.remote_addr, rk, &param),
                           "ucp_get_nbx");
      if (!st.ok()) break;
    }
    if (st.ok() && write) {
      // A put completes locally once the source may be reused; only the flush says the bytes
      // are in the target's memory.
      ucp_request_param_t param{};
      param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
      param.cb.send = &UcxTransport::on_request_done;
      auto* t = new Ticket{this, raw->id};
      param.user_data = t;
      st = account(t, ucp_ep_flush_nbx(ep, &param), "ucp_ep_flush_nbx");
    }
    if (!st.ok()) {
      if (raw->pending == 0) {
        release_rkeys(*raw);
        ops_.erase(raw->id);
        return st;
      }
      // Parts are with UCX: the caller learns the failure from wait(), which also tells it when
      // UCX is done with the buffers (see post_write's contract).
      raw->status = st;
    }
    if (raw->pending == 0) {
      release_rkeys(*raw);
      raw->regions.clear();
    }
    return raw->id;
  }

  struct Closing {
    ucs_status_ptr_t request;
    std::shared_ptr<Peer> peer;  // the error handler may still name it until the close ends
  };

  std::shared_ptr<Core> core_;
  ucp_worker_h worker_;
  Capabilities caps_;
  std::string local_address_;
  std::optional<NetNamespace> own_net_namespace_ = own_net_namespace();
  detail::PeerLru<std::shared_ptr<Peer>> peers_;
  std::vector<Closing> closing_;
  bool peer_failed_ = false;  // set by on_endpoint_error, handled by poll_locked
  std::unordered_map<OpId, std::unique_ptr<Op>> ops_;
  std::unordered_set<Ticket*> tickets_;                   // requests UCX still holds
  std::vector<std::shared_ptr<MemoryRegion>> graveyard_;  // released in callbacks, freed later
  std::vector<std::unique_ptr<ProbeSlot>> stuck_probes_;  // at most stuck_probes_max
  OpId next_op_ = 1;
  std::unique_ptr<detail::ProgressThread> progress_thread_;
};

}  // namespace

namespace {

// The name of the interface that owns `ip` ("eth0"), or empty.
std::string interface_of(const std::string& ip) {
  addrinfo hints{};
  hints.ai_flags = AI_NUMERICHOST;
  addrinfo* ai = nullptr;
  if (::getaddrinfo(ip.c_str(), nullptr, &hints, &ai) != 0 || ai == nullptr) return {};
  std::string name;
  ifaddrs* ifs = nullptr;
  if (::getifaddrs(&ifs) == 0) {
    for (ifaddrs* i = ifs; i != nullptr && name.empty(); i = i->ifa_next) {
      if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != ai->ai_family) continue;
      if (ai->ai_family == AF_INET &&
          reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr ==
              reinterpret_cast<sockaddr_in*>(ai->ai_addr)->sin_addr.s_addr) {
        name = i->ifa_name;
      }
      if (ai->ai_family == AF_INET6 &&
          std::memcmp(&reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr,
                      &reinterpret_cast<sockaddr_in6*>(ai->ai_addr)->sin6_addr,
                      sizeof(in6_addr)) == 0) {
        name = i->ifa_name;
      }
    }
    ::freeifaddrs(ifs);
  }
  ::freeaddrinfo(ai);
  return name;
}

bool loopback_or_any(const std::string& ip) {
  return ip.empty() || ip.starts_with("127.") || ip == "::1" || ip == "0.0.0.0" || ip == "::" ||
         ip == "localhost";
}

}  // namespace

Result<std::unique_ptr<Transport>> create_ucx_transport(const Config& config) {
  ucp_config_t* ucp_config = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &ucp_config);
  if (st != UCS_OK) return Status(Errc::unavailable, "ucx: ucp_config_read: " + ucs_error(st));
  // Without RDMA devices UCX moves bytes over tcp (or sm), and its worker address lists every
  // interface; a peer that cannot reach one of them (a private link) can stall on it (measured
  // across network namespaces: half the 4 KiB PUTs timed out). So there only the interface that
  // owns local_host is offered, as for libfabric tcp, unless the operator chose
  // (UCX_NET_DEVICES) or the address is loopback or the wildcard (README.md here).
  if (const char* nd = std::getenv("UCX_NET_DEVICES");
      (nd == nullptr || *nd == '\0') && !loopback_or_any(config.local_host) && !ucx_uses_nic()) {
    if (std::string ifname = interface_of(config.local_host); !ifname.empty()) {
      (void)ucp_config_modify(ucp_config, "NET_DEVICES", ifname.c_str());
    }
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_RMA;
  auto core = std::make_shared<Core>();
  st = ucp_init(&params, ucp_config, &core->context);
  ucp_config_release(ucp_config);
  if (st != UCS_OK) return Status(Errc::unavailable, "ucx: ucp_init: " + ucs_error(st));

  ucp_context_attr_t attr{};
  attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  bool cuda = ucp_context_query(core->context, &attr) == UCS_OK &&
              (attr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;

  ucp_worker_params_t wparams{};
  wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wparams.thread_mode = UCS_THREAD_MODE_SERIALIZED;  // every call is made under Core::mu
  ucp_worker_h worker = nullptr;
  st = ucp_worker_create(core->context, &wparams, &worker);
  if (st != UCS_OK) return Status(Errc::unavailable, "ucx: ucp_worker_create: " + ucs_error(st));
  ucp_address_t* address = nullptr;
  std::size_t address_len = 0;
  st = ucp_worker_get_address(worker, &address, &address_len);
  if (st != UCS_OK) {
    ucp_worker_destroy(worker);
    return Status(Errc::unavailable, "ucx: ucp_worker_get_address: " + ucs_error(st));
  }
  std::string local(reinterpret_cast<const char*>(address), address_len);
  ucp_worker_release_address(worker, address);
  // Published with this process's network namespace in front (peer_address.hpp), so that a
  // peer reaching it only over shared memory from another namespace refuses it at once.
  if (const auto ns = own_net_namespace(); ns && !local.empty()) {
    local = encode_peer_address(*ns, local);
  }
  if (local.size() > limits::token_endpoint_bytes_max) {
    ucp_worker_destroy(worker);
    return Status(Errc::unavailable, "ucx: worker address of " + std::to_string(local.size()) +
                                         " bytes exceeds token_endpoint_bytes_max");
  }

  Capabilities caps;
  caps.name = "ucx";
  caps.backend = Backend::ucx;
  const char* tls = std::getenv("UCX_TLS");
  caps.provider = std::string(tls ? tls : "").substr(0, limits::token_provider_bytes_max);
  caps.addressing = Addressing::virtual_address;
  caps.rma_iov_max = 1;  // one remote segment per ucp_put_nbx / ucp_get_nbx
  caps.message_bytes_max = 1ull << 30;
  caps.can_write = true;
  caps.can_read = true;
  caps.host_memory = true;
  caps.cuda_memory = cuda;
  // ucp_mem_map registers with every transport UCX may pick, RC/DC hardware included, where
  // registration pins; over tcp/sm RMA is emulated by this worker (no peer copies, and a peer
  // failure ends with the endpoint UCX force-closes, so the worker needs no replacing).
  caps.registration_pins = true;
  caps.mapped_source_write = false;
  caps.peer_copies = false;
  caps.reset_after_peer_failure = false;
  return std::unique_ptr<Transport>(std::make_unique<UcxTransport>(
      std::move(core), worker, std::move(caps), std::move(local), config));
}

bool ucx_uses_nic() {
  return ucx_uses_nic("/sys/class/infiniband", std::getenv("UCX_TLS"));
}

bool ucx_uses_nic(const std::string& infiniband_class_dir, const char* tls) {
  bool device = false;
  if (DIR* d = ::opendir(infiniband_class_dir.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      if (e->d_name[0] != '.') device = true;
    }
    ::closedir(d);
  }
  if (!device) return false;
  if (tls == nullptr || *tls == '\0') return true;
  std::string_view list(tls);
  if (list.starts_with('^')) return true;  // "all but ...": rc/dc stay unless named; assume so
  while (!list.empty()) {
    auto comma = list.find(',');
    std::string_view t = list.substr(0, comma);
    for (std::string_view hw :
         {"all", "rc", "rc_x", "rc_v", "rc_verbs", "rc_mlx5", "dc", "dc_x", "dc_mlx5", "ib"}) {
      if (t == hw) return true;
    }
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace objdirect::transport::ucx
