// SSE-C (server-side encryption with customer-provided keys, docs/sse-c.md): the customer key
// from a request's three headers, the salted HMAC that verifies a later key (what a store
// persists instead of the key), and AES-256-CTR positioned at any byte offset, so that a ranged
// GET decrypts from where it starts. No store types: server/s3 fills storage::SseCustomer.
//
// Errors are AWS's (400 InvalidArgument, each with AWS's message): an algorithm other than
// AES256 or none, a missing key, a key that is not base64 of 32 bytes, a missing key MD5, or a
// key MD5 that does not match the key.
//
// Thread safety: CustomerKey is a value; an AesCtr is used by one thread at a time.
#pragma once

#include <openssl/evp.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.hpp"

namespace objdirect::s3 {

inline constexpr std::size_t sse_c_key_bytes = 32;
inline constexpr std::size_t sse_c_iv_bytes = 16;
inline constexpr std::size_t sse_c_salt_bytes = 16;
inline constexpr std::string_view sse_c_algorithm = "AES256";

// The values of x-amz-[copy-source-]server-side-encryption-customer-{algorithm,key,key-MD5}.
struct SseCHeaders {
  std::optional<std::string> algorithm;
  std::optional<std::string> key;
  std::optional<std::string> key_md5;

  bool any() const { return algorithm || key || key_md5; }
};

// A customer key presented with one request. Held only for that request; its bytes are wiped
// when it is destroyed.
class CustomerKey {
 public:
  // Checks the headers as AWS does (see the file comment). Precondition: h.any().
  static Result<CustomerKey> parse(const SseCHeaders& h);
  // A key from raw bytes (tests). Precondition: raw.size() == sse_c_key_bytes.
  static CustomerKey from_raw(std::string_view raw);

  CustomerKey(const CustomerKey& o) : key_(o.key_), key_md5_(o.key_md5_) {}
  CustomerKey& operator=(const CustomerKey& o);
  ~CustomerKey();

  std::string_view raw() const { return key_; }
  // base64 of the key's MD5 (what the client sent; echoed in responses).
  const std::string& key_md5() const { return key_md5_; }

 private:
  CustomerKey() = default;
  std::string key_;
  std::string key_md5_;
};

// n bytes from OpenSSL's CSPRNG (salts); random_iv(): 16 of them (an object's or a part's IV).
std::string random_bytes(std::size_t n);
std::string random_iv();
// HMAC-SHA256(salt, key): what is stored to recognise the key later (32 bytes).
std::string key_verifier(std::string_view salt, const CustomerKey& key);
// Whether `key` is the key whose verifier under `salt` is `verifier`, compared in constant time.
bool key_matches(std::string_view salt, std::string_view verifier, const CustomerKey& key);
// The ETag of SSE-C data whose plaintext MD5 is `md5_raw`: the hex of the first 16 bytes of
// HMAC-SHA256(key, md5_raw). Like AWS's, it is not the MD5 of the plaintext (which would let
// anyone who reads the ETag confirm a guessed plaintext); it is stable for the same key and bytes.
std::string sse_c_etag(const CustomerKey& key, std::string_view md5_raw);

// AES-256-CTR through OpenSSL EVP: the keystream of (key, iv) from any byte offset. Block i's
// counter is iv + i as a 128-bit big-endian integer, as OpenSSL's CTR mode counts.
class AesCtr {
 public:
  // Preconditions: key is 32 bytes, iv 16.
  AesCtr(std::string_view key, std::string_view iv);
  ~AesCtr();
  AesCtr(const AesCtr&) = delete;
  AesCtr& operator=(const AesCtr&) = delete;

  // Positions the keystream at byte `offset`.
  void seek(std::uint64_t offset);
  // out = in XOR keystream, advancing it by n; in == out is allowed (in-place).
  void apply(const std::byte* in, std::byte* out, std::size_t n);

 private:
  EVP_CIPHER_CTX* ctx_ = nullptr;
  unsigned char iv_[16];
};

}  // namespace objdirect::s3
