// Endpoint binding and single use of RDMA tokens (docs/rdma_protocol.md, "Endpoint binding" and
// "Single use"): the server moves bytes to or from a client endpoint only once that endpoint has
// shown, through the fabric, that it is controlled by the principal who signed the request, and
// accepts each token nonce once.
//
//  - Challenge: 32 bytes the server derives from its own random key, the endpoint, the principal
//    and a 30 s time window; sent in the x-amz-rdma-challenge response header as "OD1C." +
//    base64url (43 characters). Stateless: the server recomputes it to verify.
//  - Proof: HMAC-SHA256(HMAC-SHA256(secret_key, "objdirect-rdma-bind-v1"), challenge || endpoint),
//    32 bytes that the client writes into its registered mailbox (the token's mailbox segment) and
//    that the server reads by RDMA. An attacker who knows every byte of a victim's tokens and HTTP
//    cannot put the proof for *its own* key into the victim's memory.
//  - BindingTable: (backend, provider, endpoint) -> principal, bounded (bindings_max, LRU
//    eviction) and expiring (lifetime).
//  - ReplayCache: the nonces of accepted tokens until their expiry, bounded (nonces_max).
//
// Thread safety: the free functions are pure; BindingTable and ReplayCache are thread-safe.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/status.hpp"
#include "token/token.hpp"

namespace objdirect::limits {
// Bound endpoints a server remembers (objdirect-server --rdma-bindings-max).
inline constexpr std::size_t rdma_bindings_max = 1u << 20;
// Nonces a server remembers (--rdma-replay-nonces-max); see ReplayCache for the memory bound.
inline constexpr std::size_t rdma_replay_nonces_max = 1u << 26;
// A binding lasts at most this long before the endpoint proves itself again (--rdma-binding-
// lifetime-s; default rdma::RdmaBindingOptions).
inline constexpr std::uint32_t rdma_binding_lifetime_max_s = 3600;
// Length of one challenge window: a challenge is accepted in its window and the next one.
inline constexpr std::uint64_t rdma_challenge_window_s = 30;
}  // namespace objdirect::limits

namespace objdirect::token {

inline constexpr std::size_t challenge_bytes = 32;
inline constexpr std::size_t proof_bytes = limits::token_mailbox_bytes;
inline constexpr std::string_view challenge_prefix = "OD1C.";

using Challenge = std::array<std::uint8_t, challenge_bytes>;
using Proof = std::array<std::uint8_t, proof_bytes>;
using Nonce = std::array<std::uint8_t, 16>;

// "OD1C." + base64url(challenge), 48 characters.
std::string encode_challenge(const Challenge& c);
// Strict inverse of encode_challenge. Errors: invalid_argument saying why.
Result<Challenge> decode_challenge(std::string_view text);

// What identifies an endpoint to a server: backend, provider and endpoint address of a token.
std::string binding_key(const Token& t);

// The server's challenge for (binding key, principal) in time window `window`
// (unix seconds / rdma_challenge_window_s), keyed by the server's secret random key.
Challenge server_challenge(std::string_view server_key, std::uint64_t window,
                           std::string_view binding_key, std::string_view principal);

// The proof a client writes into its mailbox: HMAC-SHA256(HMAC-SHA256(secret_key,
// "objdirect-rdma-bind-v1"), challenge || endpoint). endpoint: the token's endpoint bytes.
Proof bind_proof(std::string_view secret_key, const Challenge& challenge,
                 std::string_view endpoint);

// Constant-time equality of two proofs.
bool proof_equal(const Proof& a, const Proof& b);

// Which principal a client endpoint is bound to. Entries expire `lifetime` after they were
// bound; at most `bindings_max` are kept, the least recently used one is evicted beyond that.
class BindingTable {
 public:
  using Clock = std::chrono::steady_clock;
  enum class State { bound, unbound, other_principal };

  BindingTable(std::size_t bindings_max, std::chrono::seconds lifetime)
      : max_(bindings_max == 0 ? 1 : bindings_max), lifetime_(lifetime) {}

  // bound: `key` is bound to `principal` and unexpired (marks it most recently used);
  // other_principal: bound, unexpired, to someone else; unbound otherwise (an expired entry is
  // dropped).
  State find(const std::string& key, std::string_view principal, Clock::time_point now);
  // Binds (or rebinds) key to principal from `now`, evicting the least recently used entry when
  // bindings_max are held.
  void bind(const std::string& key, std::string_view principal, Clock::time_point now);
  // Endpoint teardown: forgets key (no-op when unknown).
  void drop(const std::string& key);
  std::size_t size() const;
  std::uint64_t evictions() const;

 private:
  struct Entry {
    std::string principal;
    Clock::time_point bound_at;
    std::list<std::string>::iterator lru;  // position in lru_ (front: most recent)
  };
  mutable std::mutex mu_;
  std::size_t max_;
  std::chrono::seconds lifetime_;
  std::unordered_map<std::string, Entry> map_;
  std::list<std::string> lru_;
  std::uint64_t evictions_ = 0;
};

// The nonces of accepted tokens, each kept until its token's expiry (after which decode refuses
// the token anyway), so that every nonce is accepted once. Tokens expire at most `window_s`
// (token_lifetime_max_s + token_clock_skew_max_s = 180 s) after the server sees them, so at a
// steady rate of R tokens/s the cache holds R * window_s nonces. It never forgets an unexpired
// nonce: when nonces_max are held, new tokens are refused (full) until some expire.
// Memory: about 56 bytes per nonce (a 16-byte hash-set node with its bucket pointer, plus 16 bytes
// in its expiry bucket), i.e. at most ~56 * nonces_max bytes; docs/rdma_protocol.md gives the
// figure for the default limit.
class ReplayCache {
 public:
  enum class Result { accepted, replayed, full };

  ReplayCache(std::size_t nonces_max, std::uint64_t window_s)
      : max_(nonces_max), buckets_(window_s + 2) {}

  // Accepts `nonce` once. Precondition: now_unix_s < expires_unix_s <= now_unix_s + window_s
  // (what token::decode guarantees); an expiry outside that is clamped into it.
  Result admit(const Nonce& nonce, std::uint64_t expires_unix_s, std::uint64_t now_unix_s);
  std::size_t size() const;

 private:
  struct NonceHash {
    std::size_t operator()(const Nonce& n) const noexcept;
  };
  // Under mu_: forgets every nonce whose expiry is <= now.
  void expire(std::uint64_t now_unix_s);

  mutable std::mutex mu_;
  std::size_t max_;
  std::unordered_set<Nonce, NonceHash> seen_;
  // Bucket (expiry % size) holds the nonces expiring at one second (see expire()).
  std::vector<std::vector<Nonce>> buckets_;
  std::uint64_t cleaned_until_ = 0;  // every expiry <= this has been forgotten
};

}  // namespace objdirect::token
