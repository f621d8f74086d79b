// The ObjDirect RDMA token: what a client puts in `x-amz-rdma-token` so that a server can move
// bytes into (GET) or out of (PUT) the client's registered memory.
//
// Text form: "OD1." + base64url(binary), no padding. The "OD1." prefix keeps it apart from
// cuObject's DC_V1 descriptor (81 hex characters, which never contain '.'), so one server can tell
// the two formats apart. The binary layout is in docs/token_format.md: a fixed 48-byte header,
// the provider name, the client's endpoint address, then the segment list. All integers are
// little-endian.
//
// A token names the backend (libfabric or UCX) and provider that produced it, how remote
// addresses are to be read (virtual address or offset into the registration), the memory type,
// the exact total length, an expiry, a random nonce, and one entry per remote segment.
//
// Thread safety: all functions are pure; Token is a plain value.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/limits.hpp"
#include "common/status.hpp"

namespace objdirect::limits {
// Provider name in a token ("tcp", "shm", "verbs", "efa", or a UCX transport hint).
inline constexpr std::size_t token_provider_bytes_max = 32;
// Client endpoint address: fi_getname() output or a UCX worker address (~108 B on tcp, a few
// hundred on InfiniBand).
inline constexpr std::size_t token_endpoint_bytes_max = 1024;
// One packed UCX rkey (~11 B on tcp, larger on InfiniBand).
inline constexpr std::size_t token_rkey_bytes_max = 256;
// Tolerated clock difference between client and server when judging a token's expiry.
inline constexpr std::uint64_t token_clock_skew_max_s = 60;
// The mailbox a token names: the client's registered bytes that hold its endpoint-binding proof
// (docs/rdma_protocol.md, "Endpoint binding").
inline constexpr std::size_t token_mailbox_bytes = 32;
}  // namespace objdirect::limits

namespace objdirect::token {

// "OD1." - the text prefix; the version digit changes with an incompatible binary layout.
inline constexpr std::string_view text_prefix = "OD1.";
// First four binary bytes ("ODTK") and the binary layout version.
inline constexpr std::array<std::uint8_t, 4> magic = {'O', 'D', 'T', 'K'};
// 2: the header's flags carry has_mailbox / proof_ready and a mailbox segment follows the segments.
inline constexpr std::uint8_t version = 2;
// Header flag bits.
inline constexpr std::uint8_t flag_has_mailbox = 1;
inline constexpr std::uint8_t flag_proof_ready = 2;

enum class Backend : std::uint8_t { libfabric = 1, ucx = 2 };

// How RemoteSegment::addr is interpreted by the target: an absolute virtual address (libfabric
// FI_MR_VIRT_ADDR providers such as shm, verbs, efa; UCX always) or an offset from the start of
// the registration (libfabric tcp;ofi_rxm).
enum class Addressing : std::uint8_t { virtual_address = 1, offset = 2 };

enum class MemoryType : std::uint8_t { host = 1, cuda = 2 };

// One remote memory range.
struct Segment {
  std::uint64_t addr = 0;    // virtual address or offset, per Token::addressing
  std::uint64_t length = 0;  // bytes, > 0
  std::uint64_t key = 0;     // libfabric fi_mr_key(); 0 for UCX
  std::string rkey;          // UCX packed rkey bytes (ucp_rkey_pack); empty for libfabric

  friend bool operator==(const Segment&, const Segment&) = default;
};

struct Token {
  Backend backend = Backend::libfabric;
  std::string provider;  // "tcp", "shm", "verbs", "efa"; UCX: transport hint, may be empty
  Addressing addressing = Addressing::virtual_address;
  MemoryType memory_type = MemoryType::host;
  std::uint64_t total_length = 0;    // == sum of segment lengths
  std::uint64_t expires_unix_s = 0;  // the token is refused at or after this time
  std::array<std::uint8_t, 16> nonce{};
  std::string endpoint;  // client endpoint address bytes (fi_getname / ucp worker address)
  std::vector<Segment> segments;
  // The client's binding mailbox (token_mailbox_bytes long, same backend rules as a segment),
  // where the server reads the endpoint-binding proof; absent in a token that cannot bind.
  std::optional<Segment> mailbox;
  // The mailbox holds a proof for the server's current challenge: the server may read it.
  bool proof_ready = false;

  friend bool operator==(const Token&, const Token&) = default;
};

// Structural checks that do not depend on the clock: enum values known, provider/endpoint/rkey
// sizes within limits, endpoint non-empty, 1..token_segments_max segments (0 only when
// total_length is 0), every segment length > 0, addr + length does not overflow, sum of lengths
// == total_length, UCX segments carry an rkey and libfabric segments do not, and the encoded text
// fits in token_bytes_max.
// Errors: Errc::invalid_rdma_token naming the first violated rule.
Status validate(const Token& token);

// The text form ("OD1." + base64url). Precondition: validate(token).ok(); a token that violates
// it encodes to text that decode() refuses (never to a different valid token).
std::string encode(const Token& token);

// Parses and validates text. A well-formed ObjDirect token of another binary version (1 had no
// mailbox) is Errc::rdma_declined, so that the server serves it over HTTP; an expired one is
// Errc::rdma_token_expired (S3 code InvalidRDMAToken). Otherwise total: every input yields a Token
// or Errc::invalid_rdma_token with a message saying why (bad prefix, bad base64, truncated,
// trailing bytes, unknown version, too many segments, overflow of addr+len, sum of lengths !=
// total_length, expired, expiry too far in the future). Work is bounded by token_bytes_max: longer
// input is refused before parsing. A token is expired when now_unix_s >= expires_unix_s; it is
// refused as implausible when expires_unix_s > now_unix_s + token_lifetime_max_s +
// token_clock_skew_max_s.
Result<Token> decode(std::string_view text, std::uint64_t now_unix_s);

// Checks that the token's segments cover at least needed_bytes (a GET of needed_bytes may land
// in a larger buffer; a PUT reads exactly total_length, which the caller compares itself).
// Errors: Errc::invalid_rdma_token when total_length < needed_bytes.
Status check_scope(const Token& token, std::uint64_t needed_bytes);

// base64url without padding (RFC 4648 section 5). decode is strict: it refuses '=', characters
// outside the alphabet, a length of 1 mod 4, and non-zero unused bits (so each byte string has
// exactly one text form). Errors: Errc::invalid_rdma_token.
std::string base64url_encode(std::string_view bytes);
Result<std::string> base64url_decode(std::string_view text);

}  // namespace objdirect::token
