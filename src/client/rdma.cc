// The client's fabric: a transport::Transport (progress thread on), the registration cache, and
// the OD1 token for one request's buffer.
#include "client/rdma.hpp"

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <utility>

#include "client/cuda/device_path.hpp"
#include "client/registration_cache.hpp"
#include "token/binding.hpp"
#include "token/token.hpp"
#include "transport/transport.hpp"

namespace objdirect::client {

namespace {

class TransportFabric final : public Fabric {
 public:
  TransportFabric(std::string name, std::unique_ptr<transport::Transport> t, const FabricOptions& o)
      : name_(std::move(name)),
        transport_(std::move(t)),
        // Where registration pins nothing (libfabric tcp and shm: the provider resolves the
        // virtual range at transfer time) a cached one cannot go stale when the user frees and
        // reuses the memory; elsewhere only user registrations (pins) are kept.
        cache_unregistered_(!transport_->caps().registration_pins),
        cache_(std::make_shared<RegistrationCache<transport::MemoryRegion>>(
            [t = transport_.get(), counted = o.on_registration](void* p, std::size_t n) {
              auto mr = t->register_memory(p, n, transport::MemoryType::host);
              if (mr.ok() && counted) counted();
              return mr;
            },
            o.registrations_max, o.registered_bytes_max)) {
    // The binding mailbox: its own registration, never handed out as a data segment.
    auto mr = transport_->register_memory(mailbox_->data(), mailbox_->size(),
                                          transport::MemoryType::host);
    if (mr.ok()) mailbox_mr_ = *mr;
  }

  ~TransportFabric() override {
    mailbox_mr_.reset();  // before the transport (declared after it, destroyed first anyway)
  }

  const std::string& name() const override { return name_; }

  Result<std::string> make_token(std::span<const std::byte> buf, std::uint32_t lifetime_s,
                                 std::shared_ptr<void>& hold) override {
    if (buf.empty()) return Status(Errc::invalid_argument, "empty buffer");
    void* p = const_cast<std::byte*>(buf.data());
    auto hit = cache_->acquire(p, buf.size(), cache_unregistered_);
    if (!hit.ok()) return hit.status();
    auto now = std::chrono::duration_cast<std::chrono::seconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count();
    const std::size_t offset = reinterpret_cast<std::uintptr_t>(p) - hit->base;
    // Exactly the bytes of this request, not the whole registration.
    token::Token t = transport::make_token(
        *transport_, {hit->reg->remote_segment(offset, buf.size())}, transport::MemoryType::host,
        static_cast<std::uint64_t>(now) + lifetime_s);
    name_mailbox(t);
    OBJDIRECT_RETURN_IF_ERROR(token::validate(t));
    // Until the reply is read the server may move data into or out of buf: this process is the
    // target and must progress, at full rate unless the fabric moves these bytes without it
    // (keep_progress_hot: large shm ranges, or the server said so; the thread idles otherwise).
    // The provider reads and writes buf on the progress thread: order the caller's writes before
    // it (now) and its writes before the caller's reads (when the hold goes, after the reply).
    struct TokenHold {
      TokenHold(std::shared_ptr<transport::MemoryRegion> r, std::shared_ptr<void> h)
          : reg(std::move(r)), hot(std::move(h)) {
        reg->synchronize();
      }
      TokenHold(const TokenHold&) = delete;
      TokenHold& operator=(const TokenHold&) = delete;
      ~TokenHold() { reg->synchronize(); }
      std::shared_ptr<transport::MemoryRegion> reg;
      std::shared_ptr<void> hot;
    };
    // hold.get() is the registration (aliasing constructor); the TokenHold owns both.
    auto both = std::make_shared<TokenHold>(
        hit->reg, transport_->keep_progress_hot(
                      buf.size(), server_needs_no_polls_.load(std::memory_order_relaxed)));
    hold = std::shared_ptr<void>(both, hit->reg.get());
    return token::encode(t);
  }

  void note_server_needs_no_polls(bool says) override {
    server_needs_no_polls_.store(says, std::memory_order_relaxed);
  }

  void revoke(std::span<const std::byte> buf, std::shared_ptr<void>& hold,
              bool transfer_failed) override {
    cache_->revoke(buf.data(), buf.size());
    hold.reset();  // closes the registration when it held the last reference
    // Drain: see rdma.hpp. progress() on this thread is not slowed like the progress thread.
    using Clock = std::chrono::steady_clock;
    using ms = std::chrono::milliseconds;
    const auto [quiet, most] = transfer_failed
                                   ? std::pair(ms(limits::client_rdma_drain_failed_quiet_ms),
                                               ms(limits::client_rdma_drain_failed_ms_max))
                                   : std::pair(ms(limits::client_rdma_drain_quiet_ms),
                                               ms(limits::client_rdma_drain_ms_max));
    const auto start = Clock::now();
    const auto end = start + most;
    auto last_work = start;
    for (;;) {
      const bool did = transport_->progress();
      const auto now = Clock::now();
      if (did) last_work = now;
      if (now - last_work >= quiet || now >= end) break;
      if (!did) std::this_thread::yield();
    }
  }

  bool cuda_memory() const override { return transport_->caps().cuda_memory; }

  Result<std::string> make_device_token(std::span<const std::byte> buf, std::uint32_t lifetime_s,
                                        std::shared_ptr<void>& hold) override {
    if (buf.empty()) return Status(Errc::invalid_argument, "empty buffer");
    auto reg =
        cuda::register_device_memory(*transport_, const_cast<std::byte*>(buf.data()), buf.size());
    if (!reg.ok()) return reg.status();
    auto now = std::chrono::duration_cast<std::chrono::seconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count();
    token::Token t = transport::make_token(*transport_, {(*reg)->remote_segment(0, buf.size())},
                                           transport::MemoryType::cuda,
                                           static_cast<std::uint64_t>(now) + lifetime_s);
    name_mailbox(t);
    OBJDIRECT_RETURN_IF_ERROR(token::validate(t));
    hold = *reg;
    return token::encode(t);
  }

  Status prove_binding(std::string_view challenge_text, std::string_view secret_key) override {
    if (!mailbox_mr_) return Status(Errc::rdma_declined, name_ + ": mailbox not registered");
    auto challenge = token::decode_challenge(challenge_text);
    if (!challenge.ok()) return challenge.status();
    const token::Proof proof =
        token::bind_proof(secret_key, *challenge, transport_->local_address());
    {
      std::lock_guard lk(mailbox_mu_);
      std::memcpy(mailbox_->data(), proof.data(), proof.size());
      // The server's RDMA READ of the mailbox runs on the provider's thread: order this write
      // before it.
      mailbox_mr_->synchronize();
    }
    proof_ready_.store(true, std::memory_order_release);
    return Status::Ok();
  }

  Result<std::shared_ptr<void>> pin(void* ptr, std::size_t len) override {
    auto hit = cache_->pin(ptr, len);
    if (!hit.ok()) return hit.status();
    // Built in place: a temporary Pinned would unpin when it dies.
    struct Pinned {
      Pinned(std::shared_ptr<RegistrationCache<transport::MemoryRegion>> c, std::uintptr_t b,
             std::shared_ptr<transport::MemoryRegion> r)
          : cache(std::move(c)), base(b), reg(std::move(r)) {}
      Pinned(const Pinned&) = delete;
      Pinned& operator=(const Pinned&) = delete;
      ~Pinned() { cache->unpin(base); }
      std::shared_ptr<RegistrationCache<transport::MemoryRegion>> cache;
      std::uintptr_t base;
      std::shared_ptr<transport::MemoryRegion> reg;
    };
    return std::shared_ptr<void>(std::make_shared<Pinned>(cache_, hit->base, hit->reg));
  }

 private:
  // Names the binding mailbox in t (a token without one cannot bind; the server then refuses it
  // and the client falls back to HTTP).
  void name_mailbox(token::Token& t) const {
    if (!mailbox_mr_) return;
    t.mailbox = mailbox_mr_->remote_segment(0, limits::token_mailbox_bytes);
    t.proof_ready = proof_ready_.load(std::memory_order_acquire);
  }

  std::string name_;
  std::unique_ptr<transport::Transport> transport_;
  bool cache_unregistered_;
  std::shared_ptr<RegistrationCache<transport::MemoryRegion>> cache_;
  // The mailbox lives on the heap so that its address stays fixed for the registration.
  std::unique_ptr<std::array<std::byte, limits::token_mailbox_bytes>> mailbox_ =
      std::make_unique<std::array<std::byte, limits::token_mailbox_bytes>>();
  std::shared_ptr<transport::MemoryRegion> mailbox_mr_;
  std::mutex mailbox_mu_;
  std::atomic<bool> proof_ready_{false};
  // note_server_needs_no_polls(): the server's latest word.
  std::atomic<bool> server_needs_no_polls_{false};
};

}  // namespace

bool fabrics_built_in() noexcept {
  return true;
}

std::vector<FabricRow> fabric_rows() {
  std::vector<FabricRow> rows;
  for (const auto& f : transport::fabric_table()) {
    rows.push_back(FabricRow{std::string(f.name), f.same_host_only, transport::uses_nic(f.name),
                             f.preference});
  }
  return rows;
}

std::string own_host_id() {
  return transport::host_identity();
}

Result<std::unique_ptr<Fabric>> open_fabric(std::string_view name, const FabricOptions& options) {
  if (transport::find_fabric(name) == nullptr) {
    return Status(Errc::invalid_argument, "unknown fabric '" + std::string(name) + "'");
  }
  transport::Config tc;
  tc.fabric = std::string(name);
  tc.progress_thread = true;
  tc.local_host = options.local_host;
  auto t = transport::create_transport(tc);
  if (!t.ok()) {
    return Status(Errc::unavailable, std::string(name) + ": " + t.status().message());
  }
  return std::unique_ptr<Fabric>(new TransportFabric(std::string(name), std::move(*t), options));
}

}  // namespace objdirect::client
