#include "client/stats.hpp"

namespace objdirect {

std::uint64_t ClientStats::requests_total(std::string_view status_class) const {
  std::uint64_t n = 0;
  for (const auto& [op, by_class] : requests) {
    for (const auto& [cls, count] : by_class) {
      if (status_class.empty() || cls == status_class) n += count;
    }
  }
  return n;
}

namespace client {
namespace {

bool has_param(std::string_view query, std::string_view name) {
  while (!query.empty()) {
    auto amp = query.find('&');
    std::string_view item = query.substr(0, amp);
    if (item.substr(0, item.find('=')) == name) return true;
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return false;
}

}  // namespace

std::string_view ClientCounters::op_name(std::string_view method, std::string_view target,
                                         bool copy) {
  auto qpos = target.find('?');
  std::string_view path = target.substr(0, qpos);
  std::string_view query = qpos == std::string_view::npos ? "" : target.substr(qpos + 1);
  if (path.starts_with('/')) path.remove_prefix(1);
  const bool has_key = path.find('/') != std::string_view::npos;
  if (path.empty())
    return has_param(query, "rdma-capabilities") ? "RdmaCapabilities" : "ListBuckets";
  if (!has_key) {
    if (method == "GET") {
      if (has_param(query, "uploads")) return "ListMultipartUploads";
      return has_param(query, "list-type") ? "ListObjectsV2" : "ListObjects";
    }
    if (method == "PUT") return "CreateBucket";
    if (method == "DELETE") return "DeleteBucket";
    if (method == "HEAD") return "HeadBucket";
    if (method == "POST" && has_param(query, "delete")) return "DeleteObjects";
    return "Other";
  }
  const bool upload = has_param(query, "uploadId");
  if (method == "GET") return upload ? "ListParts" : "GetObject";
  if (method == "HEAD") return "HeadObject";
  if (method == "PUT") {
    if (upload || has_param(query, "partNumber")) return copy ? "UploadPartCopy" : "UploadPart";
    return copy ? "CopyObject" : "PutObject";
  }
  if (method == "DELETE") return upload ? "AbortMultipartUpload" : "DeleteObject";
  if (method == "POST") {
    if (has_param(query, "uploads")) return "CreateMultipartUpload";
    if (upload) return "CompleteMultipartUpload";
  }
  return "Other";
}

std::string_view ClientCounters::decline_class(std::string_view reason) {
  if (reason.starts_with("server refused the token")) return "token_refused";
  if (reason.starts_with("server ignored")) return "server_ignored_token";
  if (reason.starts_with("server declined") || reason.starts_with("server answered"))
    return "server_declined";
  if (reason.starts_with("no token")) return "no_token";
  return "other";
}

void ClientCounters::on_response(const HttpRequest& req, const Result<HttpResponse>& r) {
  bool copy = false;
  for (const auto& [name, value] : req.headers) {
    if (name == "x-amz-copy-source") copy = true;
  }
  const std::string op(op_name(req.method, req.target, copy));
  std::string cls = "failed";
  std::string error;
  if (!r.ok()) {
    error = std::string(errc_name(r.code()));
  } else {
    cls = std::to_string(r->status / 100) + "xx";
    if (r->status >= 400) error = std::string(errc_name(status_from_response(*r).code()));
  }
  std::lock_guard lk(mu_);
  ++s_.requests[op][cls];
  if (!error.empty()) ++s_.errors[error];
}

void ClientCounters::on_auto_choice(std::string_view why) {
  std::lock_guard lk(mu_);
  ++s_.auto_choices[std::string(why)];
}

void ClientCounters::on_retry(std::string_view reason) {
  std::lock_guard lk(mu_);
  ++s_.retries;
  ++s_.retry_reasons[std::string(reason)];
}

void ClientCounters::on_complete_confirmed() {
  std::lock_guard lk(mu_);
  ++s_.completes_confirmed;
}

void ClientCounters::on_rdma_revocation() {
  std::lock_guard lk(mu_);
  ++s_.rdma_revocations;
}

void ClientCounters::on_rdma_registration() {
  std::lock_guard lk(mu_);
  ++s_.rdma_registrations;
}

void ClientCounters::on_fabric_failure(const std::string& fabric) {
  std::lock_guard lk(mu_);
  ++s_.fabric_failures[fabric];
}

void ClientCounters::on_fabric_skipped(const std::string& fabric) {
  std::lock_guard lk(mu_);
  ++s_.fabric_skips[fabric];
}

void ClientCounters::on_transfer(const TransferResult& res) {
  const std::string path(path_name(res.path));
  std::lock_guard lk(mu_);
  s_.bytes[path] += res.bytes;
  ++s_.transfers[path];
  if (res.path == TransferPath::http_fallback)
    ++s_.rdma_declines[std::string(decline_class(res.reason))];
}

ClientStats ClientCounters::snapshot() const {
  std::lock_guard lk(mu_);
  ClientStats out = s_;
  out.requests_in_flight = in_flight_.load();
  return out;
}

}  // namespace client
}  // namespace objdirect
