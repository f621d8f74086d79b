// Client::Impl, the RDMA decision: which fabric (client/fabric_choice.hpp decides the candidates),
// whether a request proposes a token (the crossover and the rdma policy), token requests under
// the retry policy with a fresh token per attempt and a revocation after an attempt that may
// have left an operation on the buffer, and the registration of a batch's arenas.
#include <algorithm>

#include "client/client_impl.hpp"
#include "client/fabric_choice.hpp"

namespace objdirect {

using client::HttpClient;
using client::HttpRequest;
using client::HttpResponse;
using client::Piece;

using client::is_device_memory;
using client::is_loopback;

Result<client::ServerFabrics> Client::Impl::ask_server_fabrics() {
  HttpRequest req{"GET", "/?rdma-capabilities", {}, {}, false};
  req.xml_reply = true;  // the body is a ListBuckets document: a truncated one is retried
  auto r = http->execute(req);
  if (!r.ok()) return r.status();
  auto s = client::parse_server_fabrics(r->header("x-amz-rdma-fabrics"),
                                        r->header("x-amz-rdma-host-id"));
  // Every S3 reply carries the advertisement, an error reply too (wrong credentials included).
  if (!s.known && !r->ok()) return client::status_from_response(*r);
  return s;
}

client::ServerFabrics Client::Impl::server_fabrics() {
  auto r = ask_server_fabrics();
  return r.ok() ? std::move(*r) : client::ServerFabrics{};
}

Result<RdmaOffer> Client::rdma_offer() {
  auto s = impl_->ask_server_fabrics();
  if (!s.ok()) return s.status();
  RdmaOffer o;
  o.advertised = s->known;
  o.fabrics = std::move(s->offered);
  o.same_host = client::same_host(*s, client::own_host_id(), is_loopback(impl_->endpoint.host));
  o.error = std::move(s->fabrics_error);
  return o;
}

void Client::Impl::settle_fabric() {
  fabric_settled = true;
  if (cfg.fabric == "none") {
    no_rdma_reason = "fabric none";
    return;
  }
  if (!client::fabrics_built_in()) {
    no_rdma_reason = "built without the RDMA transport";
    return;
  }
  if (cfg.fabric != "auto") {
    fabric_candidates.push_back(cfg.fabric);
  } else {
    choose_auto_candidates();
  }
  // The interface that reaches the server, for fabrics that serve one address (libfabric tcp).
  if (auto local = http->local_address(); local.ok()) local_host = *local;
}

void Client::Impl::choose_auto_candidates() {
  auto offered = server_fabrics();
  const auto rows = client::fabric_rows();
  std::string unused;
  auto order = client::parse_fabric_order(cfg.fabric_order, rows, unused);  // checked in create
  const bool same = client::same_host(offered, client::own_host_id(), is_loopback(endpoint.host));
  fabric_candidates =
      client::auto_candidates(offered, same, order.value_or(std::vector<std::string>{}), rows);
  if (fabric_candidates.empty()) {
    no_rdma_reason =
        offered.fabrics_error.empty()
            ? "server offers no fabric this client can use"
            : "server's fabric advertisement is malformed (" + offered.fabrics_error + ")";
  }
}

std::shared_ptr<client::Fabric> Client::Impl::current_fabric(std::string& reason) {
  std::lock_guard lk(fabric_mu);
  if (!fabric_settled) settle_fabric();
  if (rdma_disabled || fabric_candidates.empty()) {
    reason = no_rdma_reason;
    return nullptr;
  }
  std::string why;
  auto& failures = client::FabricFailures::process();
  for (const auto& name : fabric_candidates) {
    std::string skip;
    if (auto e = fabric_open_errors.find(name); e != fabric_open_errors.end()) {
      skip = e->second;
    } else if (auto recent = failures.skipped(endpoint.host_header, name)) {
      skip = *recent;
      stats.on_fabric_skipped(name);
    } else if (auto it = fabrics_open.find(name); it != fabrics_open.end()) {
      return it->second;
    } else {
      client::FabricOptions fo{cfg.registrations_max, cfg.registered_bytes_max, local_host,
                               [this] { stats.on_rdma_registration(); }};
      auto f = client::open_fabric(name, fo);
      if (f.ok()) {
        std::shared_ptr<client::Fabric> opened = std::move(*f);
        fabrics_open.emplace(name, opened);
        return opened;
      }
      skip = f.status().message();
      fabric_open_errors.emplace(name, skip);
    }
    if (!why.empty()) why += "; ";
    why += skip;
  }
  reason = fabric_candidates.size() == fabric_open_errors.size() ? "no fabric opened: " + why : why;
  return nullptr;
}

void Client::Impl::fabric_failed(const std::shared_ptr<client::Fabric>& f,
                                 const std::string& reason) {
  if (!f || cfg.fabric_failure_memory_ms == 0) return;
  client::FabricFailures::process().record(endpoint.host_header, f->name(), reason,
                                           std::chrono::milliseconds(cfg.fabric_failure_memory_ms));
  stats.on_fabric_failure(f->name());
}

void Client::Impl::disable_rdma(std::string reason) {
  std::lock_guard lk(fabric_mu);
  rdma_disabled = true;
  fabrics_open.clear();
  no_rdma_reason = "RDMA disabled: " + std::move(reason);
}

bool Client::Impl::put_bound(Direction dir) const {
  // An upload crosses over at the smaller of the two, so that rdma_min_bytes 0 still makes
  // every size eligible.
  return dir == Direction::upload && cfg.rdma_put_min_bytes < cfg.rdma_min_bytes;
}

std::uint64_t Client::Impl::crossover(Direction dir) const {
  return put_bound(dir) ? cfg.rdma_put_min_bytes : cfg.rdma_min_bytes;
}

std::string Client::Impl::rdma_skip_reason(std::size_t bytes, Direction dir, bool direct) const {
  if (direct || cfg.rdma == "required") return {};
  if (cfg.rdma == "off") return "rdma off";
  if (cfg.fabric != "auto") return {};
  const std::uint64_t min = crossover(dir);
  if (bytes >= min) return {};
  return std::string(put_bound(dir) ? "below rdma_put_min_bytes (" : "below rdma_min_bytes (") +
         std::to_string(min) + "): HTTP is faster";
}

std::optional<Client::Impl::AutoChoice> Client::Impl::auto_choice(std::uint64_t bytes,
                                                                  Direction dir, bool direct) {
  // (rdma and fabric "auto": of rdma_skip_reason's conditions only the size is left, checked
  // without building its message, as every small call passes here.)
  if (!cfg.rdma_learn || direct || cfg.rdma != "auto" || cfg.fabric != "auto" || bytes == 0 ||
      bytes < crossover(dir)) {
    return std::nullopt;
  }
  {
    std::lock_guard lk(fabric_mu);
    if (!fabric_settled) settle_fabric();
    if (rdma_disabled || fabric_candidates.empty()) return std::nullopt;
  }
  using client::PathLearner;
  const auto d = dir == Direction::download ? PathLearner::Dir::download : PathLearner::Dir::upload;
  AutoChoice c{learner.pick(d, bytes), d, bytes, std::chrono::steady_clock::now()};
  const bool http = c.pick.way == PathLearner::Way::http;
  stats.on_auto_choice(c.pick.learning ? (http ? "learning_http" : "learning_rdma")
                       : c.pick.probe  ? (http ? "probe_http" : "probe_rdma")
                                       : (http ? "measured_http" : "measured_rdma"));
  return c;
}

void Client::Impl::auto_learned(const std::optional<AutoChoice>& c, const TransferResult& res) {
  if (!c || c->pick.warmup || res.bytes == 0) return;
  using client::PathLearner;
  const bool clean = c->pick.way == PathLearner::Way::http ? res.path == TransferPath::http
                                                           : res.path == TransferPath::rdma;
  if (!clean) return;
  const double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - c->start).count();
  learner.record(c->dir, c->bytes, c->pick.way, res.bytes, std::max(s, 1e-9));
}

std::string Client::Impl::try_token(std::span<const std::byte> buf, Direction dir, PathInfo& info,
                                    std::shared_ptr<void>& hold,
                                    std::shared_ptr<client::Fabric>& used, bool direct,
                                    CallRoute call) {
  if (call.call_bytes > 0) info.call_bytes = call.call_bytes;  // re-tokens keep the first's
  if (buf.empty()) {
    info.reason = "empty transfer";
    return {};
  }
  if (!call.via_http.empty()) {
    info.reason = call.via_http;
    return {};
  }
  const std::uint64_t call_bytes = info.call_bytes > 0 ? info.call_bytes : buf.size();
  if (auto why = rdma_skip_reason(call_bytes, dir, direct); !why.empty()) {
    info.reason = std::move(why);
    return {};
  }
  auto f = current_fabric(info.reason);
  if (!f) return {};
  used = f;
  auto t = direct ? f->make_device_token(buf, cfg.token_lifetime_s, hold)
                  : f->make_token(buf, cfg.token_lifetime_s, hold);
  info.fabric = f->name();
  if (!t.ok()) {
    info.reason = "no token: " + t.status().message();
    return {};
  }
  info.attempted = true;
  return std::move(*t);
}

std::string Client::Impl::prove_and_retoken(const Result<HttpResponse>& r,
                                            std::span<const std::byte> buf, Direction dir,
                                            PathInfo& info, std::shared_ptr<void>& hold,
                                            std::shared_ptr<client::Fabric>& used, bool direct) {
  if (!r.ok() || r->status != 403 || !used) return {};
  auto challenge = r->header("x-amz-rdma-challenge");
  if (!challenge) return {};
  if (!used->prove_binding(*challenge, cfg.secret_key).ok()) return {};
  hold.reset();  // a refusal moved nothing: the old token's registration hold may go
  return try_token(buf, dir, info, hold, used, direct);
}

void Client::Impl::revoke(const std::shared_ptr<client::Fabric>& f, std::span<const std::byte> buf,
                          std::shared_ptr<void>& hold, bool transfer_failed) {
  if (f) {
    f->revoke(buf, hold, transfer_failed);
  } else {
    hold.reset();
  }
  stats.on_rdma_revocation();
}

Result<HttpResponse> Client::Impl::execute_rdma(HttpRequest& req,
                                                std::optional<std::span<std::byte>> sink,
                                                std::span<const std::byte> buf, std::string token,
                                                PathInfo& info, std::shared_ptr<void>& hold,
                                                std::shared_ptr<client::Fabric>& fabric_used,
                                                bool direct, std::uint32_t* requests) {
  req.retry = false;  // the loop is here: a fresh token per attempt
  const Direction dir = req.method == "GET" ? Direction::download : Direction::upload;
  retry::Retrier& retrier = http->retrier();
  std::string reasons;
  bool proved = false;
  for (std::uint32_t attempt = 1;; ++attempt) {
    req.headers.emplace_back("x-amz-rdma-token", std::move(token));
    retrier.before_attempt();
    auto r = http->execute(req, sink);
    req.headers.pop_back();
    // The server's word on this transfer (docs/rdma_protocol.md, "Success"), for the next
    // tokens; a decline, refusal or failure leaves the last word as it was.
    if (const auto reply = r.ok() && r->ok() ? r->header("x-amz-rdma-reply") : std::nullopt;
        fabric_used && (reply == "200" || reply == "206")) {
      fabric_used->note_server_needs_no_polls(r->header("x-amz-rdma-target-progress") == "none");
    }
    if (!proved) {
      // A binding challenge is answered once, with a new token; it is not a retry.
      proved = true;
      token = prove_and_retoken(r, buf, dir, info, hold, fabric_used, direct);
      if (!token.empty()) {
        if (requests) ++*requests;
        --attempt;
        continue;
      }
    }
    // The server's own word that its RDMA transfer failed (read once, from a 5xx body).
    const bool transfer_failed =
        r.ok() && r->status >= 500 &&
        client::status_from_response(*r).code() == Errc::rdma_transfer_failed;
    // With no answer either, the server may still be sending: the longer drain.
    if (transfer_may_linger(r)) revoke(fabric_used, buf, hold, !r.ok() || transfer_failed);
    auto reason = HttpClient::retry_reason(req, r);
    if (transfer_failed) {
      // The fabric failed, not the server: the caller falls back to HTTP and remembers the
      // fabric as failed against this server (docs/client.md, "Choosing a fabric").
      reason.reset();
    }
    retrier.after_attempt(reason);
    if (!reason || !retrier.may_retry(attempt)) {
      if (attempt == 1) return r;
      if (reason) reasons += ", " + *reason;
      const std::string note = retry::attempts_note(attempt, reasons);
      if (!r.ok()) return Status(r.code(), r.status().message() + note);
      r->attempts = attempt;
      r->retry_note = note;
      return r;
    }
    http->count_retry(*reason);
    reasons += (reasons.empty() ? "" : ", ") + *reason;
    retrier.sleep_before(attempt, std::nullopt);
    token = try_token(buf, dir, info, hold, fabric_used, direct);
    if (token.empty()) return r;
  }
}

namespace {

// The address ranges of a batch's host buffers, merged where buffers touch or overlap: every
// byte of a merged range belongs to some buffer, so it is memory the caller owns and may be
// registered as one (an arena sliced end to end becomes one registration).
std::vector<std::span<std::byte>> batch_arenas(std::vector<std::span<std::byte>> bufs) {
  std::erase_if(bufs,
                [](std::span<std::byte> b) { return b.empty() || is_device_memory(b.data()); });
  std::sort(bufs.begin(), bufs.end(), [](auto a, auto b) { return a.data() < b.data(); });
  std::vector<std::span<std::byte>> out;
  for (auto b : bufs) {
    if (!out.empty() && b.data() <= out.back().data() + out.back().size()) {
      std::byte* end = std::max(out.back().data() + out.back().size(), b.data() + b.size());
      out.back() = {out.back().data(), static_cast<std::size_t>(end - out.back().data())};
    } else {
      out.push_back(b);
    }
  }
  return out;
}

}  // namespace

std::vector<std::shared_ptr<void>> Client::Impl::pin_batch(std::vector<std::span<std::byte>> bufs,
                                                           const std::vector<std::uint64_t>& sizes,
                                                           Direction dir) {
  std::vector<std::shared_ptr<void>> pins;
  // Only when some request of the batch would propose a token (the crossover and the policy).
  const bool any = std::any_of(sizes.begin(), sizes.end(), [&](std::uint64_t n) {
    return rdma_skip_reason(n, dir, false).empty();
  });
  if (!any) return pins;
  std::string reason;
  auto f = current_fabric(reason);
  if (!f) return pins;
  for (auto a : batch_arenas(std::move(bufs))) {
    // A refused pin costs nothing more: each request then registers its own buffer as usual.
    if (auto p = f->pin(a.data(), a.size()); p.ok()) pins.push_back(std::move(*p));
  }
  return pins;
}
}  // namespace objdirect
