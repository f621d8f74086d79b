// SSE-C on the client side (docs/sse-c.md): objdirect::SseCustomerKey, the request headers made
// from it, and the wiping of every copy of the key's header value the client makes.
#include <openssl/crypto.h>

#include <cstring>

#include "client/http_client.hpp"
#include "common/checksum.hpp"
#include "objdirect/client.hpp"

namespace objdirect {

Result<SseCustomerKey> SseCustomerKey::from_bytes(std::string_view raw) {
  if (raw.size() != size_bytes) {
    return Status(Errc::invalid_argument, "an SSE-C key is " + std::to_string(size_bytes) +
                                              " bytes (AES256), got " + std::to_string(raw.size()));
  }
  SseCustomerKey k;
  std::memcpy(k.key_.data(), raw.data(), size_bytes);
  return k;
}

SseCustomerKey::SseCustomerKey(const SseCustomerKey& o) noexcept : key_(o.key_) {}

SseCustomerKey& SseCustomerKey::operator=(const SseCustomerKey& o) noexcept {
  if (this != &o) {
    OPENSSL_cleanse(key_.data(), key_.size());
    key_ = o.key_;
  }
  return *this;
}

SseCustomerKey::~SseCustomerKey() {
  OPENSSL_cleanse(key_.data(), key_.size());
}

namespace client {

namespace {

void wipe(std::string& s) {
  if (!s.empty()) OPENSSL_cleanse(s.data(), s.size());
  s.clear();
}

}  // namespace

Headers sse_c_headers(const SseCustomerKey& key, bool copy_source) {
  const std::string prefix = copy_source ? "x-amz-copy-source-server-side-encryption-customer-"
                                         : "x-amz-server-side-encryption-customer-";
  std::string raw(reinterpret_cast<const char*>(key.bytes().data()), key.bytes().size());
  Md5 md5;
  md5.update(raw.data(), raw.size());
  Headers h;
  h.reserve(3);
  h.emplace_back(prefix + "algorithm", "AES256");
  h.emplace_back(prefix + "key", base64_encode(raw));
  h.emplace_back(prefix + "key-md5", base64_encode(md5.raw()));
  wipe(raw);
  return h;
}

bool is_secret_header(std::string_view name) {
  return name == "x-amz-server-side-encryption-customer-key" ||
         name == "x-amz-copy-source-server-side-encryption-customer-key";
}

void wipe_secret_headers(Headers& h) {
  for (auto& [name, value] : h) {
    if (is_secret_header(name)) wipe(value);
  }
}

}  // namespace client
}  // namespace objdirect
