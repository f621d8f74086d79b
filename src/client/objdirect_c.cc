// The C API (include/objdirect/objdirect.h) over objdirect::Client. Status -> OD_E* happens here
// and nowhere else.
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <string>

#include "common/limits.hpp"
#include "objdirect/client.hpp"
#include "objdirect/objdirect.h"

struct od_client {
  std::unique_ptr<objdirect::Client> client;
};

struct od_memory {
  objdirect::MemoryHandle handle;
};

namespace {

thread_local int g_last_code = OD_OK;
thread_local std::string g_last_message;

int code_of(objdirect::Errc e) {
  using objdirect::Errc;
  switch (e) {
    case Errc::ok:
      return OD_OK;
    case Errc::invalid_argument:
    case Errc::invalid_bucket_name:
    case Errc::key_too_long:
    case Errc::entity_too_large:
    case Errc::invalid_request:
      return OD_EINVAL;
    case Errc::no_such_bucket:
    case Errc::no_such_key:
    case Errc::no_such_upload:
      return OD_ENOTFOUND;
    case Errc::access_denied:
    case Errc::signature_does_not_match:
    case Errc::invalid_access_key_id:
    case Errc::request_time_too_skewed:
    case Errc::expired_token:
      return OD_EACCESS;
    case Errc::unavailable:
      return OD_EUNREACHABLE;
    case Errc::timeout:
      return OD_ETIMEDOUT;
    case Errc::bucket_already_exists:
    case Errc::bucket_already_owned_by_you:
    case Errc::bucket_not_empty:
    case Errc::operation_aborted:
    case Errc::precondition_failed:
    case Errc::conditional_conflict:
      return OD_ECONFLICT;
    case Errc::invalid_range:
      return OD_ERANGE;
    default:
      return OD_EIO;
  }
}

int fail(const objdirect::Status& st) {
  g_last_code = code_of(st.code());
  g_last_message = st.message();
  return g_last_code;
}

int fail(int code, std::string message) {
  g_last_code = code;
  g_last_message = std::move(message);
  return code;
}

int ok() {
  g_last_code = OD_OK;
  g_last_message.clear();
  return OD_OK;
}

void copy_str(char* dst, std::size_t cap, std::string_view s) {
  std::size_t n = std::min(cap - 1, s.size());
  std::memcpy(dst, s.data(), n);
  dst[n] = '\0';
}

void fill(od_result* out, const objdirect::TransferResult& r) {
  if (!out) return;
  std::memset(out, 0, sizeof(*out));
  out->bytes = r.bytes;
  out->object_size = r.object_size;
  out->path = r.path == objdirect::TransferPath::rdma   ? OD_PATH_RDMA
              : r.path == objdirect::TransferPath::http ? OD_PATH_HTTP
                                                        : OD_PATH_HTTP_FALLBACK;
  copy_str(out->etag, sizeof(out->etag), r.etag);
  copy_str(out->fabric, sizeof(out->fabric), r.fabric);
  copy_str(out->reason, sizeof(out->reason), r.reason);
}

std::optional<objdirect::SseCustomerKey> c_key(const uint8_t* sse_c_key) {
  auto k = objdirect::SseCustomerKey::from_bytes(
      std::string_view(reinterpret_cast<const char*>(sse_c_key), OD_SSE_C_KEY_BYTES));
  return std::move(*k);  // 32 bytes: always valid
}

int put_with(const char* fn, od_client* client, const char* bucket, const char* key,
             const void* buf, size_t len, const od_put_options* options, const uint8_t* sse_c_key,
             od_result* result) {
  if (!client || !bucket || !key || (!buf && len)) {
    return fail(OD_EINVAL, std::string(fn) + ": NULL argument");
  }
  objdirect::PutOptions o;
  if (sse_c_key) o.sse_c = c_key(sse_c_key);
  if (options) {
    if (options->metadata_count > 0 && !options->metadata) {
      return fail(OD_EINVAL, std::string(fn) + ": metadata is NULL with metadata_count > 0");
    }
    if (options->content_type) o.content_type = options->content_type;
    for (size_t i = 0; i < options->metadata_count; ++i) {
      const od_metadata& m = options->metadata[i];
      if (!m.name || !m.value) {
        return fail(OD_EINVAL, std::string(fn) + ": metadata entry " + std::to_string(i) +
                                   " has a NULL name or value");
      }
      o.metadata.emplace_back(m.name, m.value);
    }
  }
  auto r = client->client->put(bucket, key, std::span(static_cast<const std::byte*>(buf), len), o);
  if (!r.ok()) return fail(r.status());
  fill(result, *r);
  return ok();
}

int head_with(const char* fn, od_client* client, const char* bucket, const char* key,
              const uint8_t* sse_c_key, od_object_info* info) {
  if (!client || !bucket || !key) return fail(OD_EINVAL, std::string(fn) + ": NULL argument");
  auto r = sse_c_key ? client->client->head(bucket, key, *c_key(sse_c_key))
                     : client->client->head(bucket, key);
  if (!r.ok()) return fail(r.status());
  if (info) {
    std::memset(info, 0, sizeof(*info));
    info->size = r->size;
    copy_str(info->etag, sizeof(info->etag), r->etag);
    copy_str(info->last_modified, sizeof(info->last_modified), r->last_modified);
  }
  return ok();
}

}  // namespace

extern "C" {

int od_client_create(const od_config* cfg, od_client** out) {
  if (!out) return fail(OD_EINVAL, "od_client_create: out is NULL");
  *out = nullptr;
  auto loaded = objdirect::ClientConfig::load(cfg && cfg->profile ? cfg->profile : "");
  if (!loaded.ok()) return fail(loaded.status());
  objdirect::ClientConfig c = std::move(*loaded);
  if (cfg) {
    if (cfg->endpoint) c.endpoint = cfg->endpoint;
    if (cfg->region) c.region = cfg->region;
    if (cfg->access_key) c.access_key = cfg->access_key;
    if (cfg->secret_key) c.secret_key = cfg->secret_key;
    if (cfg->session_token) c.session_token = cfg->session_token;
    if (cfg->fabric) c.fabric = cfg->fabric;
    if (cfg->part_size_bytes) c.part_size_bytes = cfg->part_size_bytes;
    if (cfg->concurrency) c.concurrency = cfg->concurrency;
  }
  auto client = objdirect::Client::create(std::move(c));
  if (!client.ok()) return fail(client.status());
  auto* h = new (std::nothrow) od_client{std::move(*client)};
  if (!h) return fail(OD_EIO, "out of memory");
  *out = h;
  return ok();
}

void od_client_destroy(od_client* client) {
  delete client;
}

int od_register(od_client* client, void* ptr, size_t len, od_memory** out) {
  if (!client || !out) return fail(OD_EINVAL, "od_register: NULL argument");
  *out = nullptr;
  auto h = client->client->register_memory(ptr, len);
  if (!h.ok()) return fail(h.status());
  *out = new od_memory{std::move(*h)};
  return ok();
}

void od_deregister(od_memory* mem) {
  delete mem;
}

int od_get(od_client* client, const char* bucket, const char* key, void* buf, size_t len,
           uint64_t offset, uint64_t length, od_result* result) {
  if (!client || !bucket || !key || (!buf && len)) return fail(OD_EINVAL, "od_get: NULL argument");
  std::optional<objdirect::ByteRange> range;
  if (length) range = objdirect::ByteRange{offset, length};
  auto r = client->client->get(bucket, key, std::span(static_cast<std::byte*>(buf), len), range);
  if (!r.ok()) return fail(r.status());
  fill(result, *r);
  return ok();
}

int od_put(od_client* client, const char* bucket, const char* key, const void* buf, size_t len,
           od_result* result) {
  if (!client || !bucket || !key || (!buf && len)) return fail(OD_EINVAL, "od_put: NULL argument");
  auto r = client->client->put(bucket, key, std::span(static_cast<const std::byte*>(buf), len));
  if (!r.ok()) return fail(r.status());
  fill(result, *r);
  return ok();
}

int od_put_with_options(od_client* client, const char* bucket, const char* key, const void* buf,
                        size_t len, const od_put_options* options, od_result* result) {
  return put_with("od_put_with_options", client, bucket, key, buf, len, options, nullptr, result);
}

int od_put_sse_c(od_client* client, const char* bucket, const char* key, const void* buf,
                 size_t len, const od_put_options* options, const uint8_t* sse_c_key,
                 od_result* result) {
  if (!sse_c_key) return fail(OD_EINVAL, "od_put_sse_c: NULL key");
  return put_with("od_put_sse_c", client, bucket, key, buf, len, options, sse_c_key, result);
}

int od_get_sse_c(od_client* client, const char* bucket, const char* key, void* buf, size_t len,
                 uint64_t offset, uint64_t length, const uint8_t* sse_c_key, od_result* result) {
  if (!client || !bucket || !key || (!buf && len) || !sse_c_key) {
    return fail(OD_EINVAL, "od_get_sse_c: NULL argument");
  }
  std::optional<objdirect::ByteRange> range;
  if (length) range = objdirect::ByteRange{offset, length};
  objdirect::GetOptions o;
  o.sse_c = c_key(sse_c_key);
  auto r = client->client->get(bucket, key, std::span(static_cast<std::byte*>(buf), len), range, o);
  if (!r.ok()) return fail(r.status());
  fill(result, *r);
  return ok();
}

int od_presign(od_client* client, const char* method, const char* bucket, const char* key,
               uint64_t expires_s, char* url, size_t url_size, size_t* url_len) {
  if (!client || !method || !bucket || !key || (!url && url_size)) {
    return fail(OD_EINVAL, "od_presign: NULL argument");
  }
  if (expires_s > static_cast<uint64_t>(objdirect::limits::presign_expires_max_s)) {
    return fail(OD_EINVAL, "od_presign: expires_s must be 1.." +
                               std::to_string(objdirect::limits::presign_expires_max_s));
  }
  auto r = client->client->presign(method, bucket, key,
                                   std::chrono::seconds(static_cast<std::int64_t>(expires_s)));
  if (!r.ok()) return fail(r.status());
  if (url_len) *url_len = r->size();
  if (url_size <= r->size()) {
    return fail(OD_EINVAL, "od_presign: the URL needs " + std::to_string(r->size() + 1) +
                               " bytes, url_size is " + std::to_string(url_size));
  }
  std::memcpy(url, r->c_str(), r->size() + 1);
  return ok();
}

int od_head(od_client* client, const char* bucket, const char* key, od_object_info* info) {
  return head_with("od_head", client, bucket, key, nullptr, info);
}

int od_head_sse_c(od_client* client, const char* bucket, const char* key, const uint8_t* sse_c_key,
                  od_object_info* info) {
  if (!sse_c_key) return fail(OD_EINVAL, "od_head_sse_c: NULL key");
  return head_with("od_head_sse_c", client, bucket, key, sse_c_key, info);
}

int od_client_stats(od_client* client, od_stats* out) {
  if (!client || !out) return fail(OD_EINVAL, "od_client_stats: NULL argument");
  const objdirect::ClientStats s = client->client->stats();
  auto at = [](const std::map<std::string, std::uint64_t>& m, const char* k) -> std::uint64_t {
    auto it = m.find(k);
    return it == m.end() ? 0 : it->second;
  };
  std::memset(out, 0, sizeof(*out));
  out->requests_total = s.requests_total();
  out->requests_2xx = s.requests_total("2xx");
  out->requests_3xx = s.requests_total("3xx");
  out->requests_4xx = s.requests_total("4xx");
  out->requests_5xx = s.requests_total("5xx");
  out->requests_failed = s.requests_total("failed");
  out->bytes_rdma = at(s.bytes, "rdma");
  out->bytes_http = at(s.bytes, "http");
  out->bytes_http_fallback = at(s.bytes, "http-fallback");
  out->transfers_rdma = at(s.transfers, "rdma");
  out->transfers_http = at(s.transfers, "http");
  out->transfers_http_fallback = at(s.transfers, "http-fallback");
  for (const auto& [reason, n] : s.rdma_declines) out->rdma_declines += n;
  for (const auto& [code, n] : s.errors) out->errors += n;
  out->retries = s.retries;
  out->requests_in_flight = s.requests_in_flight;
  return ok();
}

int od_delete(od_client* client, const char* bucket, const char* key) {
  if (!client || !bucket || !key) return fail(OD_EINVAL, "od_delete: NULL argument");
  auto st = client->client->delete_object(bucket, key);
  return st.ok() ? ok() : fail(st);
}

int od_create_bucket(od_client* client, const char* bucket) {
  if (!client || !bucket) return fail(OD_EINVAL, "od_create_bucket: NULL argument");
  auto st = client->client->create_bucket(bucket);
  return st.ok() ? ok() : fail(st);
}

int od_delete_bucket(od_client* client, const char* bucket) {
  if (!client || !bucket) return fail(OD_EINVAL, "od_delete_bucket: NULL argument");
  auto st = client->client->delete_bucket(bucket);
  return st.ok() ? ok() : fail(st);
}

int od_last_error(void) {
  return g_last_code;
}

const char* od_last_error_message(void) {
  return g_last_message.c_str();
}

}  // extern "C"
