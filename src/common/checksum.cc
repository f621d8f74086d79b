#include "common/checksum.hpp"

#include <isa-l/crc.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstdlib>
#include <cstring>

#include "common/ascii.hpp"

namespace objdirect {

namespace {

char ascii_lower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

// --- CRC-64/NVME -------------------------------------------------------------------------------
// ISA-L 2.30 (Debian 12) ships CRC64 ECMA, ISO and Jones but not the NVMe (Rocksoft) polynomial
// that S3's CRC64NVME uses, so it is computed here: reflected polynomial 0x9A6C9329AC4BC9B5,
// init and xorout all-ones. Slicing-by-8 processes a 64-bit word per step through eight 256-entry
// tables (16 KiB, built at compile time), several times faster than the byte-wise loop.
constexpr std::uint64_t kCrc64NvmePolyReflected = 0x9A6C9329AC4BC9B5ull;

using Crc64Tables = std::array<std::array<std::uint64_t, 256>, 8>;

constexpr Crc64Tables make_crc64_tables() {
  Crc64Tables t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint64_t crc = i;
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc & 1) ? (crc >> 1) ^ kCrc64NvmePolyReflected : (crc >> 1);
    }
    t[0][i] = crc;
  }
  for (std::size_t k = 1; k < 8; ++k) {
    for (std::size_t i = 0; i < 256; ++i) {
      t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xff];
    }
  }
  return t;
}

constexpr Crc64Tables kCrc64Tables = make_crc64_tables();

// Advances the (non-inverted) CRC register over n bytes, eight bytes per table step.
std::uint64_t crc64nvme_slice8(std::uint64_t crc, const unsigned char* p, std::size_t n) {
  const auto& t = kCrc64Tables;
  while (n >= 8) {
    std::uint64_t word;
    std::memcpy(&word, p, 8);
    if constexpr (std::endian::native == std::endian::big) word = __builtin_bswap64(word);
    crc ^= word;
    crc = t[7][crc & 0xff] ^ t[6][(crc >> 8) & 0xff] ^ t[5][(crc >> 16) & 0xff] ^
          t[4][(crc >> 24) & 0xff] ^ t[3][(crc >> 32) & 0xff] ^ t[2][(crc >> 40) & 0xff] ^
          t[1][(crc >> 48) & 0xff] ^ t[0][crc >> 56];
    p += 8;
    n -= 8;
  }
  while (n-- > 0) crc = t[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
  return crc;
}

#if defined(__x86_64__)
// Carry-less multiplication folding (PCLMULQDQ), about ten times the table speed. In the reflected
// domain a 64-bit value v stands for sum(v_i * x^(63-i)), a 128-bit block loaded little-endian for
// LO*x^64 + HI, and clmul(a, b) yields A*B*x. Folding a block D bits further along the message is
// a multiplication by x^D (mod P), done per half: LO * (x^(D+63) mod P) and HI * (x^(D-1) mod P),
// the "-1" absorbing clmul's extra factor x. The folded 128 bits are finally run through the table
// code as 16 message bytes, which reduces them without a Barrett step.

// x^k mod P in the reflected representation.
constexpr std::uint64_t xpow_mod_reflected(unsigned k) {
  std::uint64_t v = std::uint64_t{1} << 63;  // x^0
  for (unsigned i = 0; i < k; ++i) v = (v & 1) ? (v >> 1) ^ kCrc64NvmePolyReflected : v >> 1;
  return v;
}

struct FoldConstants {
  std::uint64_t lo, hi;
};
constexpr FoldConstants fold_constants(unsigned distance_bits) {
  return {xpow_mod_reflected(distance_bits + 63), xpow_mod_reflected(distance_bits - 1)};
}
constexpr FoldConstants kFold128 = fold_constants(128);
constexpr FoldConstants kFold256 = fold_constants(256);
constexpr FoldConstants kFold384 = fold_constants(384);
constexpr FoldConstants kFold512 = fold_constants(512);

__attribute__((target("pclmul,sse4.1"))) inline __m128i fold(__m128i x, __m128i k) {
  return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

__attribute__((target("pclmul,sse4.1"))) inline __m128i constants(FoldConstants c) {
  return _mm_set_epi64x(static_cast<long long>(c.hi), static_cast<long long>(c.lo));
}

__attribute__((target("pclmul,sse4.1"))) std::uint64_t crc64nvme_clmul(std::uint64_t crc,
                                                                       const unsigned char* p,
                                                                       std::size_t n) {
  if (n < 128) return crc64nvme_slice8(crc, p, n);
  auto load = [](const unsigned char* q) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
  };
  // The running register is XORed into the first eight message bytes; from there on the fold
  // works on a zero register.
  __m128i x0 = _mm_xor_si128(load(p), _mm_cvtsi64_si128(static_cast<long long>(crc)));
  __m128i x1 = load(p + 16), x2 = load(p + 32), x3 = load(p + 48);
  p += 64;
  n -= 64;
  const __m128i k512 = constants(kFold512);
  while (n >= 64) {
    x0 = _mm_xor_si128(fold(x0, k512), load(p));
    x1 = _mm_xor_si128(fold(x1, k512), load(p + 16));
    x2 = _mm_xor_si128(fold(x2, k512), load(p + 32));
    x3 = _mm_xor_si128(fold(x3, k512), load(p + 48));
    p += 64;
    n -= 64;
  }
  __m128i x =
      _mm_xor_si128(_mm_xor_si128(fold(x0, constants(kFold384)), fold(x1, constants(kFold256))),
                    _mm_xor_si128(fold(x2, constants(kFold128)), x3));
  const __m128i k128 = constants(kFold128);
  while (n >= 16) {
    x = _mm_xor_si128(fold(x, k128), load(p));
    p += 16;
    n -= 16;
  }
  unsigned char folded[16];
  _mm_storeu_si128(reinterpret_cast<__m128i*>(folded), x);
  return crc64nvme_slice8(crc64nvme_slice8(0, folded, 16), p, n);
}

bool cpu_has_clmul() {
  static const bool has = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
  return has;
}
#endif

std::uint64_t crc64nvme_update(std::uint64_t crc, const unsigned char* p, std::size_t n) {
#if defined(__x86_64__)
  if (cpu_has_clmul()) return crc64nvme_clmul(crc, p, n);
#endif
  return crc64nvme_slice8(crc, p, n);
}

std::string big_endian_bytes(std::uint64_t v, std::size_t width) {
  std::string out(width, '\0');
  for (std::size_t i = 0; i < width; ++i) {
    out[width - 1 - i] = static_cast<char>(v & 0xff);
    v >>= 8;
  }
  return out;
}

// OpenSSL 3 looks an implicit algorithm (EVP_sha256()) up in its provider store, under a
// process-wide lock, at every EVP_DigestInit_ex; an algorithm fetched once is used as it is.
// Signing and verifying a small S3 request spent most of its crypto time in those look-ups
// (docs/BENCHMARKS.md, get_many). Fetched once per process and kept for its life; the implicit
// algorithm where the fetch fails.
const EVP_MD* fetched_md(const char* name, const EVP_MD* implicit) {
  const EVP_MD* md = EVP_MD_fetch(nullptr, name, nullptr);
  return md != nullptr ? md : implicit;
}

const EVP_MD* evp_md(EvpDigest::Kind kind) {
  switch (kind) {
    case EvpDigest::Kind::md5: {
      static const EVP_MD* const md = fetched_md("MD5", EVP_md5());
      return md;
    }
    case EvpDigest::Kind::sha1: {
      static const EVP_MD* const md = fetched_md("SHA1", EVP_sha1());
      return md;
    }
    case EvpDigest::Kind::sha256: {
      static const EVP_MD* const md = fetched_md("SHA256", EVP_sha256());
      return md;
    }
  }
  std::abort();
}

constexpr char kHexDigits[] = "0123456789abcdef";
constexpr char kB64Std[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
constexpr char kB64Url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string b64_encode(std::string_view raw, const char* alphabet, bool pad) {
  std::string out;
  out.reserve((raw.size() + 2) / 3 * 4);
  const auto* p = reinterpret_cast<const unsigned char*>(raw.data());
  std::size_t n = raw.size();
  std::size_t i = 0;
  for (; i + 3 <= n; i += 3) {
    std::uint32_t v = (std::uint32_t{p[i]} << 16) | (std::uint32_t{p[i + 1]} << 8) | p[i + 2];
    out.push_back(alphabet[(v >> 18) & 63]);
    out.push_back(alphabet[(v >> 12) & 63]);
    out.push_back(alphabet[(v >> 6) & 63]);
    out.push_back(alphabet[v & 63]);
  }
  if (n - i == 1) {
    std::uint32_t v = std::uint32_t{p[i]} << 16;
    out.push_back(alphabet[(v >> 18) & 63]);
    out.push_back(alphabet[(v >> 12) & 63]);
    if (pad) out.append("==");
  } else if (n - i == 2) {
    std::uint32_t v = (std::uint32_t{p[i]} << 16) | (std::uint32_t{p[i + 1]} << 8);
    out.push_back(alphabet[(v >> 18) & 63]);
    out.push_back(alphabet[(v >> 12) & 63]);
    out.push_back(alphabet[(v >> 6) & 63]);
    if (pad) out.push_back('=');
  }
  return out;
}

int b64_value(char c, bool url) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == (url ? '-' : '+')) return 62;
  if (c == (url ? '_' : '/')) return 63;
  return -1;
}

// Decodes unpadded symbols (the caller strips/validates padding). Rejects a dangling single symbol
// and non-zero unused low bits, so each byte string has exactly one accepted encoding.
std::optional<std::string> b64_decode_symbols(std::string_view text, bool url) {
  if (text.size() % 4 == 1) return std::nullopt;
  std::string out;
  out.reserve(text.size() / 4 * 3 + 2);
  std::uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    int v = b64_value(c, url);
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  if ((acc & ((1u << bits) - 1)) != 0) return std::nullopt;
  return out;
}

}  // namespace

namespace detail {
std::uint64_t crc64nvme_table(std::uint64_t reg, const void* data, std::size_t n) {
  return crc64nvme_slice8(reg, static_cast<const unsigned char*>(data), n);
}
std::uint64_t crc64nvme_fast(std::uint64_t reg, const void* data, std::size_t n) {
  return crc64nvme_update(reg, static_cast<const unsigned char*>(data), n);
}
bool crc64nvme_uses_clmul() {
#if defined(__x86_64__)
  return cpu_has_clmul();
#else
  return false;
#endif
}
}  // namespace detail

// --- names -----------------------------------------------------------------------------------

std::string_view checksum_name(ChecksumAlgo algo) noexcept {
  switch (algo) {
    case ChecksumAlgo::crc32:
      return "CRC32";
    case ChecksumAlgo::crc32c:
      return "CRC32C";
    case ChecksumAlgo::crc64nvme:
      return "CRC64NVME";
    case ChecksumAlgo::sha1:
      return "SHA1";
    case ChecksumAlgo::sha256:
      return "SHA256";
  }
  return "UNKNOWN";
}

std::optional<ChecksumAlgo> checksum_from_name(std::string_view name) noexcept {
  for (ChecksumAlgo a : kAllChecksumAlgos) {
    if (ascii_iequals(name, checksum_name(a))) return a;
  }
  return std::nullopt;
}

std::string checksum_header(ChecksumAlgo algo) {
  std::string h = "x-amz-checksum-";
  for (char c : checksum_name(algo)) h.push_back(ascii_lower(c));
  return h;
}

std::size_t checksum_raw_size(ChecksumAlgo algo) noexcept {
  switch (algo) {
    case ChecksumAlgo::crc32:
    case ChecksumAlgo::crc32c:
      return 4;
    case ChecksumAlgo::crc64nvme:
      return 8;
    case ChecksumAlgo::sha1:
      return 20;
    case ChecksumAlgo::sha256:
      return 32;
  }
  return 0;
}

// --- EvpDigest ---------------------------------------------------------------------------------

void EvpDigest::CtxFree::operator()(evp_md_ctx_st* ctx) const noexcept {
  EVP_MD_CTX_free(ctx);
}

EvpDigest::EvpDigest(Kind kind) : ctx_(EVP_MD_CTX_new()) {
  if (!ctx_ || EVP_DigestInit_ex(ctx_.get(), evp_md(kind), nullptr) != 1) std::abort();
}

EvpDigest::EvpDigest(const EvpDigest& other) : ctx_(EVP_MD_CTX_new()) {
  if (!ctx_ || EVP_MD_CTX_copy_ex(ctx_.get(), other.ctx_.get()) != 1) std::abort();
}

EvpDigest& EvpDigest::operator=(const EvpDigest& other) {
  if (this != &other) {
    EvpDigest copy(other);
    *this = std::move(copy);
  }
  return *this;
}

EvpDigest::~EvpDigest() = default;

void EvpDigest::update(const void* data, std::size_t n) {
  if (n == 0) return;
  if (EVP_DigestUpdate(ctx_.get(), data, n) != 1) std::abort();
}

std::string EvpDigest::raw() const {
  // Finalise a copy so the running state stays usable (S3 handlers read a digest and may continue).
  EVP_MD_CTX* tmp = EVP_MD_CTX_new();
  if (tmp == nullptr || EVP_MD_CTX_copy_ex(tmp, ctx_.get()) != 1) std::abort();
  unsigned char buf[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(tmp, buf, &len) != 1) std::abort();
  EVP_MD_CTX_free(tmp);
  return std::string(reinterpret_cast<const char*>(buf), len);
}

// --- Checksummer -------------------------------------------------------------------------------

Checksummer::Checksummer(ChecksumAlgo algo) : algo_(algo) {
  switch (algo) {
    case ChecksumAlgo::crc32:
      crc_ = 0;  // crc32_gzip_refl inverts on entry and exit itself (zlib convention)
      break;
    case ChecksumAlgo::crc32c:
      crc_ = 0xFFFFFFFFu;  // crc32_iscsi takes and returns the raw register: we invert at the end
      break;
    case ChecksumAlgo::crc64nvme:
      crc_ = ~std::uint64_t{0};
      break;
    case ChecksumAlgo::sha1:
      evp_.emplace(EvpDigest::Kind::sha1);
      break;
    case ChecksumAlgo::sha256:
      evp_.emplace(EvpDigest::Kind::sha256);
      break;
  }
}

void Checksummer::update(const void* data, std::size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  switch (algo_) {
    case ChecksumAlgo::crc32:
      crc_ = crc32_gzip_refl(static_cast<std::uint32_t>(crc_), p, n);
      break;
    case ChecksumAlgo::crc32c: {
      // crc32_iscsi takes an int length: feed at most 1 GiB per call.
      constexpr std::size_t kStep = std::size_t{1} << 30;
      while (n > 0) {
        std::size_t step = std::min(n, kStep);
        crc_ = crc32_iscsi(const_cast<unsigned char*>(p), static_cast<int>(step),
                           static_cast<unsigned int>(crc_));
        p += step;
        n -= step;
      }
      break;
    }
    case ChecksumAlgo::crc64nvme:
      crc_ = crc64nvme_update(crc_, p, n);
      break;
    case ChecksumAlgo::sha1:
    case ChecksumAlgo::sha256:
      evp_->update(p, n);
      break;
  }
}

std::string Checksummer::digest_raw() const {
  switch (algo_) {
    case ChecksumAlgo::crc32:
      return big_endian_bytes(crc_ & 0xFFFFFFFFu, 4);
    case ChecksumAlgo::crc32c:
      return big_endian_bytes(~crc_ & 0xFFFFFFFFu, 4);
    case ChecksumAlgo::crc64nvme:
      return big_endian_bytes(~crc_, 8);
    case ChecksumAlgo::sha1:
    case ChecksumAlgo::sha256:
      return evp_->raw();
  }
  return {};
}

std::string Checksummer::digest_base64() const {
  return base64_encode(digest_raw());
}

// --- Md5 / Sha256 ------------------------------------------------------------------------------

Md5::Md5() : d_(EvpDigest::Kind::md5) {}
std::string Md5::hex() const {
  return hex_encode(d_.raw());
}

Sha256::Sha256() : d_(EvpDigest::Kind::sha256) {}
std::string Sha256::hex() const {
  return hex_encode(d_.raw());
}

std::string sha256_hex(std::string_view data) {
  Sha256 h;
  h.update(data.data(), data.size());
  return h.hex();
}

namespace {
// One HMAC context per thread and digest, its digest set once and re-keyed per call: OpenSSL's
// one-shot HMAC() fetches the MAC and the digest from the provider store (under a lock) every
// time, 2-4x the cost of the MAC itself for a SigV4 string to sign (see evp_md above).
class ThreadHmac {
 public:
  explicit ThreadHmac(const char* digest) {
    EVP_MAC* mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
    if (mac == nullptr) std::abort();
    ctx_ = EVP_MAC_CTX_new(mac);
    EVP_MAC_free(mac);  // the context holds its own reference
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, const_cast<char*>(digest), 0),
        OSSL_PARAM_construct_end()};
    if (ctx_ == nullptr || EVP_MAC_CTX_set_params(ctx_, params) != 1) std::abort();
  }
  ~ThreadHmac() { EVP_MAC_CTX_free(ctx_); }
  ThreadHmac(const ThreadHmac&) = delete;
  ThreadHmac& operator=(const ThreadHmac&) = delete;

  std::string mac(std::string_view key, std::string_view data) {
    // A null key would mean "the previous key": an empty key needs a non-null pointer.
    static const unsigned char kEmpty = 0;
    const auto* k = key.empty() ? &kEmpty : reinterpret_cast<const unsigned char*>(key.data());
    unsigned char out[EVP_MAX_MD_SIZE];
    std::size_t len = 0;
    if (EVP_MAC_init(ctx_, k, key.size(), nullptr) != 1 ||
        EVP_MAC_update(ctx_, reinterpret_cast<const unsigned char*>(data.data()), data.size()) !=
            1 ||
        EVP_MAC_final(ctx_, out, &len, sizeof(out)) != 1) {
      std::abort();
    }
    return std::string(reinterpret_cast<const char*>(out), len);
  }

 private:
  EVP_MAC_CTX* ctx_ = nullptr;
};
}  // namespace

std::string hmac_sha256(std::string_view key, std::string_view data) {
  thread_local ThreadHmac h("SHA256");
  return h.mac(key, data);
}

std::string hmac_sha1(std::string_view key, std::string_view data) {
  thread_local ThreadHmac h("SHA1");
  return h.mac(key, data);
}

// --- encodings ---------------------------------------------------------------------------------

std::string hex_encode(std::string_view raw) {
  std::string out;
  out.resize(raw.size() * 2);
  for (std::size_t i = 0; i < raw.size(); ++i) {
    auto b = static_cast<unsigned char>(raw[i]);
    out[2 * i] = kHexDigits[b >> 4];
    out[2 * i + 1] = kHexDigits[b & 0xf];
  }
  return out;
}

std::optional<std::string> hex_decode(std::string_view text) {
  if (text.size() % 2 != 0) return std::nullopt;
  std::string out(text.size() / 2, '\0');
  for (std::size_t i = 0; i < out.size(); ++i) {
    int hi = hex_value(text[2 * i]);
    int lo = hex_value(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out[i] = static_cast<char>((hi << 4) | lo);
  }
  return out;
}

std::string base64_encode(std::string_view raw) {
  return b64_encode(raw, kB64Std, true);
}

std::optional<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::size_t pad = 0;
  if (!text.empty() && text.back() == '=') ++pad;
  if (text.size() >= 2 && text[text.size() - 2] == '=') {
    if (pad == 0) return std::nullopt;  // "xx=x"
    ++pad;
  }
  return b64_decode_symbols(text.substr(0, text.size() - pad), false);
}

std::string base64url_encode(std::string_view raw) {
  return b64_encode(raw, kB64Url, false);
}

std::optional<std::string> base64url_decode(std::string_view text) {
  return b64_decode_symbols(text, true);
}

// --- S3 multipart --------------------------------------------------------------------------------

std::string composite_checksum(ChecksumAlgo algo,
                               const std::vector<std::string>& part_raw_digests) {
  Checksummer c(algo);
  for (const auto& d : part_raw_digests) c.update(d.data(), d.size());
  return c.digest_base64() + "-" + std::to_string(part_raw_digests.size());
}

std::optional<std::string> multipart_etag(const std::vector<std::string>& part_md5_hex) {
  if (part_md5_hex.empty()) return std::nullopt;
  Md5 md5;
  for (std::string_view etag : part_md5_hex) {
    if (etag.size() == 34 && etag.front() == '"' && etag.back() == '"') {
      etag = etag.substr(1, 32);
    }
    if (etag.size() != 32) return std::nullopt;
    auto raw = hex_decode(etag);
    if (!raw) return std::nullopt;
    md5.update(raw->data(), raw->size());
  }
  return md5.hex() + "-" + std::to_string(part_md5_hex.size());
}

bool constant_time_equal(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  if (a.empty()) return true;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace objdirect
