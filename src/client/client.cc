// objdirect::Client: creation (every ClientConfig check), registration, counters, and the helpers
// the Client::Impl files share (client/client_impl.hpp says which file holds what).
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

#include "client/client_impl.hpp"
#include "client/cuda/device_path.hpp"
#include "client/fabric_choice.hpp"
#include "common/limits.hpp"
#include "common/retry.hpp"

namespace objdirect {

using client::HttpClient;

std::string_view path_name(TransferPath path) noexcept {
  switch (path) {
    case TransferPath::rdma:
      return "rdma";
    case TransferPath::http:
      return "http";
    case TransferPath::http_fallback:
      return "http-fallback";
  }
  return "http";
}

// Client::Impl and MemoryHandle::Pin are nested in exported classes, whose visibility they would
// inherit: marked hidden, so that libobjdirect.so does not export them (docs/architecture.md,

std::vector<std::string> MemoryHandle::fabrics() const {
  return pin_ ? pin_->fabrics : std::vector<std::string>{};
}

namespace client {

bool parse_u64(std::string_view s, std::uint64_t& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

bool is_loopback(std::string_view host) {
  return host == "localhost" || host.starts_with("127.") || host == "::1";
}

bool is_device_memory(const void* p) {
  auto kind = cuda::classify_buffer(p);
  return kind == cuda::PointerKind::device || kind == cuda::PointerKind::managed;
}

int caller_device() {
  int device = 0;
  if (cuda::cuda_loaded_in_process()) {
    if (auto api = cuda::CudaApi::get(); api.ok()) (*api)->get_device(&device);
  }
  return device;
}

Status bind_device(int device) {
  if (!cuda::cuda_loaded_in_process()) return Status::Ok();
  auto api = cuda::CudaApi::get();
  if (!api.ok()) return api.status();
  return (*api)->bind_current_device(device);
}

}  // namespace client

using client::is_device_memory;

Result<std::unique_ptr<Client>> Client::create(ClientConfig config) {
  if (config.endpoint.empty()) {
    return Status(Errc::invalid_argument,
                  "no endpoint: set AWS_ENDPOINT_URL, endpoint_url in ~/.aws/config, or pass one");
  }
  auto ep = client::parse_endpoint(config.endpoint);
  if (!ep.ok()) return ep.status();
  if (config.part_size_bytes == 0) return Status(Errc::invalid_argument, "part size must be > 0");
  if (config.concurrency == 0) return Status(Errc::invalid_argument, "concurrency must be > 0");
  if (config.token_lifetime_s == 0 || config.token_lifetime_s > limits::token_lifetime_max_s) {
    return Status(Errc::invalid_argument, "token lifetime must be 1.." +
                                              std::to_string(limits::token_lifetime_max_s) + " s");
  }
  const std::string& f = config.fabric;
  const auto rows = client::fabric_rows();
  if (f != "auto" && f != "none" && client::fabrics_built_in() &&
      std::none_of(rows.begin(), rows.end(), [&](const auto& r) { return r.name == f; })) {
    std::string known = "auto, none";
    for (const auto& r : rows) known += ", " + r.name;
    return Status(Errc::invalid_argument, "unknown fabric '" + f + "' (" + known + ")");
  }
  std::string order_error;
  if (!client::parse_fabric_order(config.fabric_order, rows, order_error)) {
    return Status(Errc::invalid_argument, order_error);
  }
  if (config.fabric_failure_memory_ms > limits::client_fabric_failure_memory_ms_max) {
    return Status(Errc::invalid_argument,
                  "fabric failure memory must be at most " +
                      std::to_string(limits::client_fabric_failure_memory_ms_max) + " ms");
  }
  if (config.rdma != "auto" && config.rdma != "required" && config.rdma != "off") {
    return Status(Errc::invalid_argument,
                  "unknown rdma policy '" + config.rdma + "' (auto, required, off)");
  }
  if (config.rdma == "required" && f == "none") {
    return Status(Errc::invalid_argument, "rdma \"required\" needs a fabric (fabric is none)");
  }
  if (config.addressing_style != "path" && config.addressing_style != "virtual") {
    return Status(Errc::invalid_argument,
                  "unknown addressing_style '" + config.addressing_style + "' (path, virtual)");
  }
  if (config.redirects_max > limits::client_redirects_max) {
    return Status(Errc::invalid_argument,
                  "redirects_max must be at most " + std::to_string(limits::client_redirects_max));
  }
  if (!config.ca_bundle.empty() && ::access(config.ca_bundle.c_str(), R_OK) != 0) {
    return Status(Errc::invalid_argument,
                  "ca_bundle " + config.ca_bundle + " cannot be read: " + std::strerror(errno));
  }
  retry::Policy policy;
  if (auto m = retry::parse_mode(config.retry_mode)) {
    policy.mode = *m;
  } else {
    return Status(Errc::invalid_argument,
                  "unknown retry_mode '" + config.retry_mode + "' (standard, adaptive, legacy)");
  }
  policy.max_attempts = config.max_attempts;
  policy.base_delay = std::chrono::milliseconds(config.retry_base_delay_ms);
  policy.max_backoff = std::chrono::milliseconds(config.retry_max_backoff_ms);
  OBJDIRECT_RETURN_IF_ERROR(policy.validate());
  auto impl = std::make_unique<Impl>();
  impl->cfg = std::move(config);
  impl->endpoint = std::move(*ep);
  client::HttpOptions ho;
  ho.endpoint = impl->endpoint;
  ho.credentials = {impl->cfg.access_key, impl->cfg.secret_key};
  ho.session_token = impl->cfg.session_token;
  ho.region = impl->cfg.region;
  ho.connections_max = std::max<std::uint32_t>(impl->cfg.connections_max, 1);
  ho.connect_timeout = std::chrono::milliseconds(impl->cfg.connect_timeout_ms);
  ho.io_timeout = std::chrono::milliseconds(impl->cfg.io_timeout_ms);
  ho.stats = &impl->stats;
  ho.retry_policy = policy;
  ho.ca_bundle = impl->cfg.ca_bundle;
  ho.virtual_hosted = impl->cfg.addressing_style == "virtual";
  ho.redirects_max = impl->cfg.redirects_max;
  impl->http = std::make_unique<HttpClient>(std::move(ho));
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

const ClientConfig& Client::config() const noexcept {
  return impl_->cfg;
}

Result<MemoryHandle> Client::register_memory(void* ptr, std::size_t len) {
  if (ptr == nullptr || len == 0) {
    return Status(Errc::invalid_argument, "register_memory needs a non-empty buffer");
  }
  MemoryHandle h;
  h.ptr_ = ptr;
  h.size_ = len;
  h.pin_ = std::make_shared<MemoryHandle::Pin>();
  if (is_device_memory(ptr)) {
    // The bounce path moves device memory through the client's own staging buffers, which are
    // registered once; the device range itself is never handed to a fabric that cannot
    // register CUDA memory (nor touched by the CPU). The handle is still valid for get/put.
    return h;
  }
  std::string reason;
  if (auto f = impl_->current_fabric(reason)) {
    auto pinned = f->pin(ptr, len);
    if (!pinned.ok()) return pinned.status();
    h.pin_->hold = std::move(*pinned);
    h.pin_->fabrics.push_back(f->name());
  }
  return h;
}

ClientStats Client::stats() const {
  return impl_->stats.snapshot();
}
}  // namespace objdirect
