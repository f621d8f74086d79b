// The pure parts of endpoint binding and single use: challenge text, binding key, BindingTable and
// ReplayCache. The HMACs are in bind_proof.cc (they need the crypto library; this file is also
// compiled into the stand-alone libFuzzer target binding_fuzz).
#include "token/binding.hpp"

#include <algorithm>
#include <cstring>

namespace objdirect::token {

std::string encode_challenge(const Challenge& c) {
  std::string text(challenge_prefix);
  text += base64url_encode(std::string_view(reinterpret_cast<const char*>(c.data()), c.size()));
  return text;
}

Result<Challenge> decode_challenge(std::string_view text) {
  // 32 bytes are 43 base64url characters; anything else is refused before decoding.
  constexpr std::size_t body = (challenge_bytes * 4 + 2) / 3;
  if (text.size() != challenge_prefix.size() + body ||
      text.substr(0, challenge_prefix.size()) != challenge_prefix) {
    return Status(Errc::invalid_argument, "x-amz-rdma-challenge is not \"OD1C.\" + 43 characters");
  }
  auto bin = base64url_decode(text.substr(challenge_prefix.size()));
  if (!bin.ok()) return Status(Errc::invalid_argument, "x-amz-rdma-challenge: bad base64url");
  Challenge c{};
  std::memcpy(c.data(), bin->data(), c.size());
  return c;
}

std::string binding_key(const Token& t) {
  std::string k;
  k.reserve(2 + t.provider.size() + t.endpoint.size());
  k += static_cast<char>(t.backend);
  k += t.provider;
  k += '\0';  // provider names are ASCII without NUL, so the key is unambiguous
  k += t.endpoint;
  return k;
}

BindingTable::State BindingTable::find(const std::string& key, std::string_view principal,
                                       Clock::time_point now) {
  std::lock_guard lk(mu_);
  auto it = map_.find(key);
  if (it == map_.end()) return State::unbound;
  if (now - it->second.bound_at >= lifetime_) {
    lru_.erase(it->second.lru);
    map_.erase(it);
    return State::unbound;
  }
  if (it->second.principal != principal) return State::other_principal;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return State::bound;
}

void BindingTable::bind(const std::string& key, std::string_view principal, Clock::time_point now) {
  std::lock_guard lk(mu_);
  auto it = map_.find(key);
  if (it != map_.end()) {
    it->second.principal = std::string(principal);
    it->second.bound_at = now;
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    return;
  }
  while (map_.size() >= max_) {
    map_.erase(lru_.back());
    lru_.pop_back();
    ++evictions_;
  }
  lru_.push_front(key);
  map_.emplace(key, Entry{std::string(principal), now, lru_.begin()});
}

void BindingTable::drop(const std::string& key) {
  std::lock_guard lk(mu_);
  auto it = map_.find(key);
  if (it == map_.end()) return;
  lru_.erase(it->second.lru);
  map_.erase(it);
}

std::size_t BindingTable::size() const {
  std::lock_guard lk(mu_);
  return map_.size();
}

std::uint64_t BindingTable::evictions() const {
  std::lock_guard lk(mu_);
  return evictions_;
}

std::size_t ReplayCache::NonceHash::operator()(const Nonce& n) const noexcept {
  // Nonces are random: their first 8 bytes are a good hash. (A client choosing colliding nonces
  // only slows its own lookups' bucket; the set stays bounded by nonces_max.)
  std::uint64_t h = 0;
  std::memcpy(&h, n.data(), sizeof(h));
  std::uint64_t l = 0;
  std::memcpy(&l, n.data() + 8, sizeof(l));
  return static_cast<std::size_t>(h ^ (l * 0x9E3779B97F4A7C15ull));
}

void ReplayCache::expire(std::uint64_t now) {
  const std::uint64_t n = buckets_.size();
  if (cleaned_until_ == 0 || now - cleaned_until_ >= n) {
    // First call, or a long pause: every bucket may hold expired nonces; check them all.
    for (auto& b : buckets_) {
      if (b.empty()) continue;
      // A bucket holds one expiry second; the nonces' own expiry is not stored, so a full
      // sweep is only safe when all of them are expired: true after a pause of >= n seconds
      // (every stored expiry is < cleaned_until_ + n <= now), and trivially on the first call.
      for (const auto& nonce : b) seen_.erase(nonce);
      b.clear();
    }
    cleaned_until_ = now;
    return;
  }
  for (std::uint64_t s = cleaned_until_ + 1; s <= now; ++s) {
    auto& b = buckets_[s % n];
    for (const auto& nonce : b) seen_.erase(nonce);
    b.clear();
  }
  cleaned_until_ = std::max(cleaned_until_, now);
}

ReplayCache::Result ReplayCache::admit(const Nonce& nonce, std::uint64_t expires,
                                       std::uint64_t now) {
  std::lock_guard lk(mu_);
  expire(now);
  // Stored expiries lie in (cleaned_until_, cleaned_until_ + buckets - 2], so no two seconds
  // share a bucket; clamp what the precondition promises anyway.
  const std::uint64_t window = buckets_.size() - 2;
  expires = std::clamp<std::uint64_t>(expires, now + 1, now + window);
  if (seen_.contains(nonce)) return Result::replayed;
  if (seen_.size() >= max_) return Result::full;
  seen_.insert(nonce);
  buckets_[expires % buckets_.size()].push_back(nonce);
  return Result::accepted;
}

std::size_t ReplayCache::size() const {
  std::lock_guard lk(mu_);
  return seen_.size();
}

}  // namespace objdirect::token
