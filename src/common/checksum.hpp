// Checksums, digests and byte encodings used by S3: the x-amz-checksum-* family (CRC32, CRC32C,
// CRC64NVME, SHA1, SHA256), MD5 for ETags and Content-MD5, HMAC-SHA256 for SigV4, hex and base64.
//
// CRC32 and CRC32C run on ISA-L (SIMD, runtime dispatch); CRC64NVME is our own code because ISA-L
// 2.30 has no NVMe (Rocksoft) polynomial: PCLMULQDQ folding where the CPU has it, slicing-by-8
// tables otherwise; MD5/SHA1/SHA256/HMAC use OpenSSL EVP.
// Every CRC digest is the S3 wire form: the CRC value as big-endian bytes, then base64.
//
// Nothing here reports errors through Status: digests cannot fail short of memory exhaustion (which
// aborts, as everywhere in ObjDirect), and decoders return std::nullopt on malformed input.
//
// Thread safety: free functions are thread-safe; Checksummer, Md5 and Sha256 objects are
// thread-compatible (one object per thread, or external locking).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

struct evp_md_ctx_st;  // OpenSSL's EVP_MD_CTX

namespace objdirect {

enum class ChecksumAlgo : std::uint8_t { crc32, crc32c, crc64nvme, sha1, sha256 };

// Every algorithm, in the order S3 documents them; for scanning request headers.
inline constexpr ChecksumAlgo kAllChecksumAlgos[5] = {ChecksumAlgo::crc32, ChecksumAlgo::crc32c,
                                                      ChecksumAlgo::crc64nvme, ChecksumAlgo::sha1,
                                                      ChecksumAlgo::sha256};

// "CRC32", "CRC32C", "CRC64NVME", "SHA1", "SHA256" (the x-amz-checksum-algorithm spelling).
std::string_view checksum_name(ChecksumAlgo algo) noexcept;
// Inverse of checksum_name, case-insensitive ("crc32c" and "CRC32C"); nullopt for anything else.
std::optional<ChecksumAlgo> checksum_from_name(std::string_view name) noexcept;
// The header that carries the checksum: "x-amz-checksum-crc32c".
std::string checksum_header(ChecksumAlgo algo);
// Length in bytes of the raw digest: 4, 4, 8, 20, 32.
std::size_t checksum_raw_size(ChecksumAlgo algo) noexcept;

// Internal: an OpenSSL EVP digest context with value semantics (copying duplicates the state).
class EvpDigest {
 public:
  enum class Kind : std::uint8_t { md5, sha1, sha256 };
  explicit EvpDigest(Kind kind);
  EvpDigest(const EvpDigest& other);
  EvpDigest& operator=(const EvpDigest& other);
  EvpDigest(EvpDigest&&) noexcept = default;
  EvpDigest& operator=(EvpDigest&&) noexcept = default;
  ~EvpDigest();

  void update(const void* data, std::size_t n);
  // The digest of everything fed so far; does not disturb the running state.
  std::string raw() const;

 private:
  struct CtxFree {
    void operator()(evp_md_ctx_st* ctx) const noexcept;
  };
  std::unique_ptr<evp_md_ctx_st, CtxFree> ctx_;
};

// Streaming S3 checksum of one algorithm. digest_*() may be called at any time and any number of
// times: each reports the checksum of the bytes fed so far and leaves the state untouched.
// Copyable (the copy continues independently) and movable.
class Checksummer {
 public:
  explicit Checksummer(ChecksumAlgo algo);

  ChecksumAlgo algo() const noexcept { return algo_; }
  void update(const void* data, std::size_t n);
  // Raw digest bytes; CRCs as big-endian integers (the S3 wire form before base64).
  std::string digest_raw() const;
  // base64(digest_raw()): the value an x-amz-checksum-* header carries.
  std::string digest_base64() const;

 private:
  ChecksumAlgo algo_;
  std::uint64_t crc_ = 0;  // running CRC register (pre-inversion where the algorithm inverts)
  std::optional<EvpDigest> evp_;
};

// Streaming MD5 (ETags, Content-MD5). hex()/raw() do not disturb the running state.
class Md5 {
 public:
  Md5();
  void update(const void* data, std::size_t n) { d_.update(data, n); }
  std::string hex() const;
  std::string raw() const { return d_.raw(); }

 private:
  EvpDigest d_;
};

// Streaming SHA-256 (x-amz-content-sha256, SigV4). hex()/raw() do not disturb the running state.
class Sha256 {
 public:
  Sha256();
  void update(const void* data, std::size_t n) { d_.update(data, n); }
  std::string hex() const;
  std::string raw() const { return d_.raw(); }

 private:
  EvpDigest d_;
};

// Lower-case hex SHA-256 of `data`.
std::string sha256_hex(std::string_view data);
// HMAC-SHA256(key, data): the raw 32-byte MAC.
std::string hmac_sha256(std::string_view key, std::string_view data);
// HMAC-SHA1(key, data): the raw 20-byte MAC (SigV2 only).
std::string hmac_sha1(std::string_view key, std::string_view data);

// Lower-case hex of raw bytes.
std::string hex_encode(std::string_view raw);
// Strict hex decoding (either case, even length); nullopt otherwise.
std::optional<std::string> hex_decode(std::string_view text);

// Standard base64 (RFC 4648 section 4) with '=' padding.
std::string base64_encode(std::string_view raw);
// Strict: length a multiple of 4, padding only at the end, no whitespace, and the unused bits of
// the last symbol zero (so every value has exactly one accepted spelling). nullopt otherwise.
std::optional<std::string> base64_decode(std::string_view text);
// URL-safe base64 (RFC 4648 section 5: '-' and '_'), without padding.
std::string base64url_encode(std::string_view raw);
// Strict inverse of base64url_encode: rejects '=', standard-alphabet '+' and '/', a length that is
// 1 mod 4 and non-zero unused bits. nullopt otherwise.
std::optional<std::string> base64url_decode(std::string_view text);

// S3 composite (multipart) checksum: the algorithm over the concatenated raw part digests, as
// "base64-N" where N is the number of parts.
std::string composite_checksum(ChecksumAlgo algo, const std::vector<std::string>& part_raw_digests);

// Multipart ETag: hex(md5(concat(raw part md5s))) + "-" + N. Each part ETag is 32 hex digits of
// either case, optionally wrapped in double quotes (as clients echo them in
// CompleteMultipartUpload). nullopt if any part is malformed or the list is empty. Unquoted result.
std::optional<std::string> multipart_etag(const std::vector<std::string>& part_md5_hex);

// Equality whose running time depends only on the lengths, not the contents (for MACs).
bool constant_time_equal(std::string_view a, std::string_view b) noexcept;

namespace detail {
// Internal, for tests: the CRC-64/NVME register update through the portable slicing-by-8 tables
// and through the dispatched fast path (PCLMULQDQ folding where the CPU has it), and which one
// crc64nvme_fast uses here. `reg` is the raw (non-inverted) register.
std::uint64_t crc64nvme_table(std::uint64_t reg, const void* data, std::size_t n);
std::uint64_t crc64nvme_fast(std::uint64_t reg, const void* data, std::size_t n);
bool crc64nvme_uses_clmul();
}  // namespace detail

}  // namespace objdirect
