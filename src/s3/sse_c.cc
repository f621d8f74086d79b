#include "s3/sse_c.hpp"

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include <cstring>

#include "common/assert.hpp"
#include "common/checksum.hpp"

namespace objdirect::s3 {

namespace {

void wipe(std::string& s) {
  if (!s.empty()) OPENSSL_cleanse(s.data(), s.size());
}

}  // namespace

std::string random_bytes(std::size_t n) {
  std::string out(n, '\0');
  OBJDIRECT_ASSERT(
      RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(n)) == 1,
      "the CSPRNG failed");
  return out;
}

namespace {

Status invalid(std::string_view message) {
  return Status(Errc::invalid_argument, std::string(message));
}

}  // namespace

Result<CustomerKey> CustomerKey::parse(const SseCHeaders& h) {
  if (!h.algorithm || *h.algorithm != sse_c_algorithm) {
    return invalid(
        "Requests specifying Server Side Encryption with Customer provided keys must provide a "
        "valid encryption algorithm.");
  }
  if (!h.key || h.key->empty()) {
    return invalid(
        "Requests specifying Server Side Encryption with Customer provided keys must provide an "
        "appropriate secret key.");
  }
  CustomerKey k;
  auto raw = base64_decode(*h.key);
  if (!raw || raw->size() != sse_c_key_bytes) {
    if (raw) wipe(*raw);
    return invalid("The secret key was invalid for the specified algorithm.");
  }
  k.key_ = std::move(*raw);
  if (!h.key_md5 || h.key_md5->empty()) {
    return invalid(
        "Requests specifying Server Side Encryption with Customer provided keys must provide the "
        "client calculated MD5 of the secret key.");
  }
  Md5 md5;
  md5.update(k.key_.data(), k.key_.size());
  if (base64_encode(md5.raw()) != *h.key_md5) {
    return invalid("The calculated MD5 hash of the key did not match the hash that was provided.");
  }
  k.key_md5_ = *h.key_md5;
  return k;
}

CustomerKey CustomerKey::from_raw(std::string_view raw) {
  OBJDIRECT_ASSERT(raw.size() == sse_c_key_bytes, "an SSE-C key is 32 bytes");
  CustomerKey k;
  k.key_ = std::string(raw);
  Md5 md5;
  md5.update(raw.data(), raw.size());
  k.key_md5_ = base64_encode(md5.raw());
  return k;
}

CustomerKey& CustomerKey::operator=(const CustomerKey& o) {
  if (this != &o) {
    wipe(key_);
    key_ = o.key_;
    key_md5_ = o.key_md5_;
  }
  return *this;
}

CustomerKey::~CustomerKey() {
  wipe(key_);
}

std::string random_iv() {
  return random_bytes(sse_c_iv_bytes);
}

std::string key_verifier(std::string_view salt, const CustomerKey& key) {
  return hmac_sha256(salt, key.raw());
}

bool key_matches(std::string_view salt, std::string_view verifier, const CustomerKey& key) {
  const std::string mac = key_verifier(salt, key);
  return mac.size() == verifier.size() &&
         CRYPTO_memcmp(mac.data(), verifier.data(), mac.size()) == 0;
}

std::string sse_c_etag(const CustomerKey& key, std::string_view md5_raw) {
  return hex_encode(hmac_sha256(key.raw(), md5_raw).substr(0, 16));
}

AesCtr::AesCtr(std::string_view key, std::string_view iv) {
  OBJDIRECT_ASSERT(key.size() == sse_c_key_bytes && iv.size() == sse_c_iv_bytes,
                   "AES-256-CTR takes a 32-byte key and a 16-byte IV");
  std::memcpy(iv_, iv.data(), sizeof iv_);
  ctx_ = EVP_CIPHER_CTX_new();
  OBJDIRECT_ASSERT(ctx_ != nullptr, "EVP_CIPHER_CTX_new failed");
  OBJDIRECT_ASSERT(EVP_EncryptInit_ex(ctx_, EVP_aes_256_ctr(), nullptr,
                                      reinterpret_cast<const unsigned char*>(key.data()), iv_) == 1,
                   "EVP_EncryptInit_ex(aes-256-ctr) failed");
}

AesCtr::~AesCtr() {
  EVP_CIPHER_CTX_free(ctx_);
}  // the context wipes the key schedule

void AesCtr::seek(std::uint64_t offset) {
  // counter = iv + offset / 16, 128-bit big-endian with carry.
  unsigned char counter[16];
  std::memcpy(counter, iv_, sizeof counter);
  std::uint64_t add = offset / 16;
  unsigned carry = 0;
  for (int i = 15; i >= 0; --i) {
    const unsigned sum = unsigned{counter[i]} + static_cast<unsigned>(add & 0xff) + carry;
    counter[i] = static_cast<unsigned char>(sum);
    carry = sum >> 8;
    add >>= 8;
    if (add == 0 && carry == 0) break;
  }
  // A new IV with the key schedule kept; then skip offset % 16 bytes of the first block.
  OBJDIRECT_ASSERT(EVP_EncryptInit_ex(ctx_, nullptr, nullptr, nullptr, counter) == 1,
                   "EVP_EncryptInit_ex(iv) failed");
  if (const auto skip = static_cast<int>(offset % 16); skip > 0) {
    unsigned char scratch[16] = {};
    int n = 0;
    OBJDIRECT_ASSERT(EVP_EncryptUpdate(ctx_, scratch, &n, scratch, skip) == 1 && n == skip,
                     "EVP_EncryptUpdate failed");
  }
}

void AesCtr::apply(const std::byte* in, std::byte* out, std::size_t n) {
  constexpr std::size_t evp_step_bytes = std::size_t{1} << 30;  // EVP lengths are ints
  while (n > 0) {
    const std::size_t step = n < evp_step_bytes ? n : evp_step_bytes;
    int got = 0;
    OBJDIRECT_ASSERT(EVP_EncryptUpdate(ctx_, reinterpret_cast<unsigned char*>(out), &got,
                                       reinterpret_cast<const unsigned char*>(in),
                                       static_cast<int>(step)) == 1 &&
                         static_cast<std::size_t>(got) == step,
                     "EVP_EncryptUpdate failed");
    in += step;
    out += step;
    n -= step;
  }
}

}  // namespace objdirect::s3
