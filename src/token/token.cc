#include "token/token.hpp"

#include <cstddef>
#include <cstring>
#include <limits>
#include <type_traits>

#include "common/assert.hpp"

namespace objdirect::token {
namespace {

// The fixed header as it lies on the wire (little-endian). Encoding and decoding go field by
// field through the offsets of this struct, so the struct is the single statement of the layout
// and the static_asserts below pin it (docs/token_format.md repeats it).
struct TokenHeader {
  std::uint8_t magic[4];
  std::uint8_t version;
  std::uint8_t backend;
  std::uint8_t addressing;
  std::uint8_t memory_type;
  std::uint64_t total_length;
  std::uint64_t expires_unix_s;
  std::uint8_t nonce[16];
  std::uint8_t provider_len;
  std::uint8_t flags;  // flag_has_mailbox | flag_proof_ready; other bits must be 0
  std::uint16_t endpoint_len;
  std::uint16_t segment_count;
  std::uint16_t reserved;  // must be 0
};
static_assert(std::is_standard_layout_v<TokenHeader>);
static_assert(sizeof(TokenHeader) == 48);
static_assert(offsetof(TokenHeader, version) == 4);
static_assert(offsetof(TokenHeader, total_length) == 8);
static_assert(offsetof(TokenHeader, expires_unix_s) == 16);
static_assert(offsetof(TokenHeader, nonce) == 24);
static_assert(offsetof(TokenHeader, provider_len) == 40);
static_assert(offsetof(TokenHeader, endpoint_len) == 42);
static_assert(offsetof(TokenHeader, segment_count) == 44);
static_assert(offsetof(TokenHeader, reserved) == 46);

// Per segment: addr u64, length u64, key u64, rkey_len u16, then rkey_len bytes.
constexpr std::size_t segment_fixed_bytes = 8 + 8 + 8 + 2;

static_assert(limits::token_provider_bytes_max <= std::numeric_limits<std::uint8_t>::max());
static_assert(limits::token_endpoint_bytes_max <= std::numeric_limits<std::uint16_t>::max());
static_assert(limits::token_rkey_bytes_max <= std::numeric_limits<std::uint16_t>::max());
static_assert(limits::token_segments_max <= std::numeric_limits<std::uint16_t>::max());
// A libfabric token (no rkeys) at every field limit - longest provider and endpoint,
// token_segments_max segments and the mailbox - still fits in token_bytes_max as text, so
// validate()'s text-length rule only ever refuses UCX tokens with large rkeys, and a client can
// always use token_segments_max segments on libfabric.
static_assert(text_prefix.size() + ((sizeof(TokenHeader) + limits::token_provider_bytes_max +
                                     limits::token_endpoint_bytes_max +
                                     (limits::token_segments_max + 1) * segment_fixed_bytes) *
                                        4 +
                                    2) /
                                       3 <=
              limits::token_bytes_max);

Status invalid(std::string message) {
  return Status(Errc::invalid_rdma_token, "invalid RDMA token: " + std::move(message));
}

template <class T>
void put_le(std::string& out, std::size_t at, T v) {
  static_assert(std::is_unsigned_v<T>);
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    out[at + i] = static_cast<char>(static_cast<std::uint8_t>(v >> (8 * i)));
  }
}

template <class T>
void append_le(std::string& out, T v) {
  std::size_t at = out.size();
  out.resize(at + sizeof(T));
  put_le(out, at, v);
}

template <class T>
T get_le(std::string_view in, std::size_t at) {
  T v = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    v |= static_cast<T>(static_cast<T>(static_cast<std::uint8_t>(in[at + i])) << (8 * i));
  }
  return v;
}

std::size_t binary_size(const Token& t) {
  std::size_t n = sizeof(TokenHeader) + t.provider.size() + t.endpoint.size();
  for (const auto& s : t.segments) n += segment_fixed_bytes + s.rkey.size();
  if (t.mailbox) n += segment_fixed_bytes + t.mailbox->rkey.size();
  return n;
}

std::size_t base64_len(std::size_t n) {
  return (n * 4 + 2) / 3;
}

bool known_backend(std::uint8_t v) {
  return v == static_cast<std::uint8_t>(Backend::libfabric) ||
         v == static_cast<std::uint8_t>(Backend::ucx);
}
bool known_addressing(std::uint8_t v) {
  return v == static_cast<std::uint8_t>(Addressing::virtual_address) ||
         v == static_cast<std::uint8_t>(Addressing::offset);
}
bool known_memory_type(std::uint8_t v) {
  return v == static_cast<std::uint8_t>(MemoryType::host) ||
         v == static_cast<std::uint8_t>(MemoryType::cuda);
}

// Reads the body after the fixed header; every length is checked against what remains before use.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  std::size_t remaining() const { return in_.size() - pos_; }
  bool take(std::size_t n, std::string_view& out) {
    if (remaining() < n) return false;
    out = in_.substr(pos_, n);
    pos_ += n;
    return true;
  }
  template <class T>
  bool take_le(T& out) {
    if (remaining() < sizeof(T)) return false;
    out = get_le<T>(in_, pos_);
    pos_ += sizeof(T);
    return true;
  }

 private:
  std::string_view in_;
  std::size_t pos_ = 0;
};

constexpr char b64_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

int b64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '-') return 62;
  if (c == '_') return 63;
  return -1;
}

}  // namespace

std::string base64url_encode(std::string_view bytes) {
  std::string out;
  out.reserve(base64_len(bytes.size()));
  std::size_t i = 0;
  auto byte = [&](std::size_t k) {
    return static_cast<std::uint32_t>(static_cast<std::uint8_t>(bytes[k]));
  };
  for (; i + 3 <= bytes.size(); i += 3) {
    std::uint32_t v = byte(i) << 16 | byte(i + 1) << 8 | byte(i + 2);
    out += b64_alphabet[(v >> 18) & 63];
    out += b64_alphabet[(v >> 12) & 63];
    out += b64_alphabet[(v >> 6) & 63];
    out += b64_alphabet[v & 63];
  }
  std::size_t rest = bytes.size() - i;
  if (rest == 1) {
    std::uint32_t v = byte(i) << 16;
    out += b64_alphabet[(v >> 18) & 63];
    out += b64_alphabet[(v >> 12) & 63];
  } else if (rest == 2) {
    std::uint32_t v = byte(i) << 16 | byte(i + 1) << 8;
    out += b64_alphabet[(v >> 18) & 63];
    out += b64_alphabet[(v >> 12) & 63];
    out += b64_alphabet[(v >> 6) & 63];
  }
  return out;
}

Result<std::string> base64url_decode(std::string_view text) {
  if (text.size() % 4 == 1) return invalid("bad base64url: length " + std::to_string(text.size()));
  std::string out;
  out.reserve(text.size() / 4 * 3 + 2);
  std::uint32_t acc = 0;
  int bits = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    int v = b64_value(text[i]);
    if (v < 0) {
      return invalid("bad base64url: character " +
                     std::to_string(static_cast<unsigned char>(text[i])) + " at " +
                     std::to_string(i) + " (padding is not allowed)");
    }
    acc = (acc << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  // Leftover bits (2 or 4) must be zero, so that every byte string has one text form.
  if (bits > 0 && (acc & ((1u << bits) - 1)) != 0)
    return invalid("bad base64url: non-zero trailing bits");
  return out;
}

Status validate(const Token& t) {
  if (!known_backend(static_cast<std::uint8_t>(t.backend))) return invalid("unknown backend");
  if (!known_addressing(static_cast<std::uint8_t>(t.addressing))) {
    return invalid("unknown addressing mode");
  }
  if (!known_memory_type(static_cast<std::uint8_t>(t.memory_type))) {
    return invalid("unknown memory type");
  }
  if (t.provider.size() > limits::token_provider_bytes_max) {
    return invalid("provider name longer than " + std::to_string(limits::token_provider_bytes_max) +
                   " bytes");
  }
  if (t.endpoint.empty()) return invalid("empty endpoint address");
  if (t.endpoint.size() > limits::token_endpoint_bytes_max) {
    return invalid("endpoint address of " + std::to_string(t.endpoint.size()) + " bytes exceeds " +
                   std::to_string(limits::token_endpoint_bytes_max));
  }
  if (t.segments.size() > limits::token_segments_max) {
    return invalid("too many segments: " + std::to_string(t.segments.size()) + " > " +
                   std::to_string(limits::token_segments_max));
  }
  if (t.segments.empty() && t.total_length != 0) return invalid("no segments");
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < t.segments.size(); ++i) {
    const Segment& s = t.segments[i];
    std::string at = "segment " + std::to_string(i) + ": ";
    if (s.length == 0) return invalid(at + "zero length");
    if (s.addr > std::numeric_limits<std::uint64_t>::max() - s.length) {
      return invalid(at + "addr + length overflows 64 bits");
    }
    if (s.rkey.size() > limits::token_rkey_bytes_max) {
      return invalid(at + "packed rkey of " + std::to_string(s.rkey.size()) + " bytes exceeds " +
                     std::to_string(limits::token_rkey_bytes_max));
    }
    if (t.backend == Backend::ucx && s.rkey.empty())
      return invalid(at + "UCX segment without rkey");
    if (t.backend == Backend::libfabric && !s.rkey.empty()) {
      return invalid(at + "libfabric segment carries a packed rkey");
    }
    if (s.length > std::numeric_limits<std::uint64_t>::max() - sum) {
      return invalid("sum of segment lengths overflows 64 bits");
    }
    sum += s.length;
  }
  if (sum != t.total_length) {
    return invalid("sum of segment lengths " + std::to_string(sum) + " != total_length " +
                   std::to_string(t.total_length));
  }
  if (t.mailbox) {
    const Segment& m = *t.mailbox;
    if (m.length != limits::token_mailbox_bytes) {
      return invalid("mailbox of " + std::to_string(m.length) + " bytes, must be " +
                     std::to_string(limits::token_mailbox_bytes));
    }
    if (m.addr > std::numeric_limits<std::uint64_t>::max() - m.length) {
      return invalid("mailbox: addr + length overflows 64 bits");
    }
    if (m.rkey.size() > limits::token_rkey_bytes_max) return invalid("mailbox: rkey too long");
    if (t.backend == Backend::ucx && m.rkey.empty()) return invalid("UCX mailbox without rkey");
    if (t.backend == Backend::libfabric && !m.rkey.empty()) {
      return invalid("libfabric mailbox carries a packed rkey");
    }
  } else if (t.proof_ready) {
    return invalid("proof_ready without a mailbox");
  }
  std::size_t text_len = text_prefix.size() + base64_len(binary_size(t));
  if (text_len > limits::token_bytes_max) {
    return invalid("encoded token of " + std::to_string(text_len) + " bytes exceeds " +
                   std::to_string(limits::token_bytes_max));
  }
  return Status::Ok();
}

std::string encode(const Token& t) {
  std::string bin(sizeof(TokenHeader), '\0');
  std::memcpy(bin.data() + offsetof(TokenHeader, magic), magic.data(), magic.size());
  put_le<std::uint8_t>(bin, offsetof(TokenHeader, version), version);
  put_le<std::uint8_t>(bin, offsetof(TokenHeader, backend), static_cast<std::uint8_t>(t.backend));
  put_le<std::uint8_t>(bin, offsetof(TokenHeader, addressing),
                       static_cast<std::uint8_t>(t.addressing));
  put_le<std::uint8_t>(bin, offsetof(TokenHeader, memory_type),
                       static_cast<std::uint8_t>(t.memory_type));
  put_le<std::uint64_t>(bin, offsetof(TokenHeader, total_length), t.total_length);
  put_le<std::uint64_t>(bin, offsetof(TokenHeader, expires_unix_s), t.expires_unix_s);
  std::memcpy(bin.data() + offsetof(TokenHeader, nonce), t.nonce.data(), t.nonce.size());
  // Out-of-range sizes are precondition violations; they are clamped to the field width here and
  // the resulting token then fails decode's length checks instead of aliasing another token.
  put_le<std::uint8_t>(bin, offsetof(TokenHeader, provider_len),
                       static_cast<std::uint8_t>(t.provider.size()));
  put_le<std::uint16_t>(bin, offsetof(TokenHeader, endpoint_len),
                        static_cast<std::uint16_t>(t.endpoint.size()));
  put_le<std::uint16_t>(bin, offsetof(TokenHeader, segment_count),
                        static_cast<std::uint16_t>(t.segments.size()));
  put_le<std::uint8_t>(bin, offsetof(TokenHeader, flags),
                       static_cast<std::uint8_t>((t.mailbox ? flag_has_mailbox : 0) |
                                                 (t.proof_ready ? flag_proof_ready : 0)));
  bin += t.provider;
  bin += t.endpoint;
  auto append_segment = [&bin](const Segment& s) {
    append_le<std::uint64_t>(bin, s.addr);
    append_le<std::uint64_t>(bin, s.length);
    append_le<std::uint64_t>(bin, s.key);
    append_le<std::uint16_t>(bin, static_cast<std::uint16_t>(s.rkey.size()));
    bin += s.rkey;
  };
  for (const auto& s : t.segments) append_segment(s);
  if (t.mailbox) append_segment(*t.mailbox);
  std::string text(text_prefix);
  text += base64url_encode(bin);
  // Codec round trip, checked in every build: a token that meets the precondition decodes back
  // to itself (at a time before its expiry).
  if (t.expires_unix_s > 0 && validate(t).ok()) {
    auto back = decode(text, t.expires_unix_s - 1);
    OBJDIRECT_ASSERT(back.ok() && *back == t, "a valid token decodes back to itself");
  }
  return text;
}

Result<Token> decode(std::string_view text, std::uint64_t now_unix_s) {
  if (text.size() > limits::token_bytes_max) {
    return invalid("token of " + std::to_string(text.size()) + " bytes exceeds " +
                   std::to_string(limits::token_bytes_max));
  }
  if (text.substr(0, text_prefix.size()) != text_prefix) {
    return invalid("missing \"OD1.\" prefix (not an ObjDirect token)");
  }
  auto bin_or = base64url_decode(text.substr(text_prefix.size()));
  if (!bin_or.ok()) return bin_or.status();
  std::string_view bin = *bin_or;
  if (bin.size() < sizeof(TokenHeader)) {
    return invalid("truncated: " + std::to_string(bin.size()) + " bytes, header needs " +
                   std::to_string(sizeof(TokenHeader)));
  }
  if (std::memcmp(bin.data() + offsetof(TokenHeader, magic), magic.data(), magic.size()) != 0) {
    return invalid("bad magic");
  }
  auto u8 = [&](std::size_t at) { return get_le<std::uint8_t>(bin, at); };
  if (u8(offsetof(TokenHeader, version)) != version) {
    // Another version of our own format is no garbage: decline it (the body goes over HTTP).
    return Status(Errc::rdma_declined, "ObjDirect token version " +
                                           std::to_string(u8(offsetof(TokenHeader, version))) +
                                           " is not served here; this server needs version " +
                                           std::to_string(version) + " (docs/token_format.md)");
  }
  Token t;
  std::uint8_t backend = u8(offsetof(TokenHeader, backend));
  std::uint8_t addressing = u8(offsetof(TokenHeader, addressing));
  std::uint8_t memory_type = u8(offsetof(TokenHeader, memory_type));
  if (!known_backend(backend)) return invalid("unknown backend " + std::to_string(backend));
  if (!known_addressing(addressing)) {
    return invalid("unknown addressing mode " + std::to_string(addressing));
  }
  if (!known_memory_type(memory_type)) {
    return invalid("unknown memory type " + std::to_string(memory_type));
  }
  t.backend = static_cast<Backend>(backend);
  t.addressing = static_cast<Addressing>(addressing);
  t.memory_type = static_cast<MemoryType>(memory_type);
  t.total_length = get_le<std::uint64_t>(bin, offsetof(TokenHeader, total_length));
  t.expires_unix_s = get_le<std::uint64_t>(bin, offsetof(TokenHeader, expires_unix_s));
  std::memcpy(t.nonce.data(), bin.data() + offsetof(TokenHeader, nonce), t.nonce.size());
  std::size_t provider_len = u8(offsetof(TokenHeader, provider_len));
  std::size_t endpoint_len = get_le<std::uint16_t>(bin, offsetof(TokenHeader, endpoint_len));
  std::size_t segment_count = get_le<std::uint16_t>(bin, offsetof(TokenHeader, segment_count));
  const std::uint8_t flags = u8(offsetof(TokenHeader, flags));
  if ((flags & ~(flag_has_mailbox | flag_proof_ready)) != 0 ||
      get_le<std::uint16_t>(bin, offsetof(TokenHeader, reserved)) != 0) {
    return invalid("reserved header bits set");
  }
  t.proof_ready = (flags & flag_proof_ready) != 0;
  if (provider_len > limits::token_provider_bytes_max) return invalid("provider name too long");
  if (endpoint_len > limits::token_endpoint_bytes_max) return invalid("endpoint address too long");
  if (segment_count > limits::token_segments_max) {
    return invalid("too many segments: " + std::to_string(segment_count) + " > " +
                   std::to_string(limits::token_segments_max));
  }

  Reader r(bin.substr(sizeof(TokenHeader)));
  std::string_view piece;
  if (!r.take(provider_len, piece)) return invalid("truncated in provider name");
  t.provider = piece;
  if (!r.take(endpoint_len, piece)) return invalid("truncated in endpoint address");
  t.endpoint = piece;
  t.segments.reserve(segment_count);
  const bool has_mailbox = (flags & flag_has_mailbox) != 0;
  for (std::size_t i = 0; i < segment_count + (has_mailbox ? 1 : 0); ++i) {
    const std::string name = i < segment_count ? "segment " + std::to_string(i) : "mailbox";
    Segment s;
    std::uint16_t rkey_len = 0;
    if (!r.take_le(s.addr) || !r.take_le(s.length) || !r.take_le(s.key) || !r.take_le(rkey_len)) {
      return invalid("truncated in " + name);
    }
    if (rkey_len > limits::token_rkey_bytes_max) return invalid(name + ": packed rkey too long");
    if (!r.take(rkey_len, piece)) return invalid("truncated in rkey of " + name);
    s.rkey = piece;
    if (i < segment_count) {
      t.segments.push_back(std::move(s));
    } else {
      t.mailbox = std::move(s);
    }
  }
  if (r.remaining() != 0) {
    return invalid(std::to_string(r.remaining()) + " trailing bytes after the last segment");
  }
  OBJDIRECT_RETURN_IF_ERROR(validate(t));
  if (now_unix_s >= t.expires_unix_s) {
    return Status(Errc::rdma_token_expired,
                  "invalid RDMA token: expired at " + std::to_string(t.expires_unix_s) +
                      ", server time " + std::to_string(now_unix_s) +
                      "; build a new token for every request, and check this client's clock "
                      "against the server's (Date header)");
  }
  const std::uint64_t horizon = limits::token_lifetime_max_s + limits::token_clock_skew_max_s;
  if (t.expires_unix_s - now_unix_s > horizon) {
    return invalid("expiry " + std::to_string(t.expires_unix_s) + " is more than " +
                   std::to_string(horizon) + " s ahead of server time " +
                   std::to_string(now_unix_s) + " (token lifetime at most " +
                   std::to_string(limits::token_lifetime_max_s) + " s)");
  }
  return t;
}

Status check_scope(const Token& t, std::uint64_t needed_bytes) {
  if (t.total_length < needed_bytes) {
    return invalid("token covers " + std::to_string(t.total_length) + " bytes, the request needs " +
                   std::to_string(needed_bytes));
  }
  return Status::Ok();
}

}  // namespace objdirect::token
