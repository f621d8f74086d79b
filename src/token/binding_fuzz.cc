#include "token/binding_fuzz.hpp"

#include <algorithm>
#include <cstdlib>
#include <list>
#include <map>
#include <string>

#include "token/binding.hpp"

namespace objdirect::token {

namespace {

bool check_challenge_text(std::string_view text) {
  auto c = decode_challenge(text);
  if (!c.ok()) return c.code() == Errc::invalid_argument && !c.status().message().empty();
  return encode_challenge(*c) == text;
}

// Operations: 4 bytes each. ReplayCache(max 6, window 5 s) against a map nonce -> expiry.
bool check_replay(const std::uint8_t* d, std::size_t n) {
  constexpr std::size_t max = 6;
  constexpr std::uint64_t window = 5;
  ReplayCache cache(max, window);
  std::map<int, std::uint64_t> model;  // nonce id -> expiry
  std::uint64_t now = 1'700'000'000;
  for (std::size_t i = 0; i + 4 <= n; i += 4) {
    // Time only moves forward, sometimes by a lot (the cache's full sweep).
    now += d[i] % 4 == 3 ? d[i] : d[i] % 3;
    const int id = d[i + 1] % 16;
    std::uint64_t expires = now + d[i + 2] % (window + 3);  // sometimes outside (now, now+window]
    Nonce nonce{};
    nonce[0] = static_cast<std::uint8_t>(id);
    nonce[15] = d[i + 3] & 1;  // colliding hash prefixes with different nonces
    const int key = id * 2 + (d[i + 3] & 1);
    for (auto it = model.begin(); it != model.end();) {
      it = it->second <= now ? model.erase(it) : std::next(it);
    }
    expires = std::clamp<std::uint64_t>(expires, now + 1, now + window);
    ReplayCache::Result want;
    if (model.contains(key)) {
      want = ReplayCache::Result::replayed;
    } else if (model.size() >= max) {
      want = ReplayCache::Result::full;
    } else {
      want = ReplayCache::Result::accepted;
      model[key] = expires;
    }
    if (cache.admit(nonce, expires, now) != want) return false;
    if (cache.size() != model.size() || cache.size() > max) return false;
  }
  return true;
}

// BindingTable(max 3, lifetime 10 s) against a list in LRU order.
bool check_bindings(const std::uint8_t* d, std::size_t n) {
  constexpr std::size_t max = 3;
  using Clock = BindingTable::Clock;
  BindingTable table(max, std::chrono::seconds(10));
  struct E {
    std::string key, principal;
    Clock::time_point at;
  };
  std::list<E> lru;  // front: most recent
  Clock::time_point now{};
  for (std::size_t i = 0; i + 3 <= n; i += 3) {
    now += std::chrono::seconds(d[i] % 6);
    const std::string key(1, static_cast<char>('a' + d[i + 1] % 5));
    const std::string principal(1, static_cast<char>('A' + d[i + 2] % 2));
    auto it = std::find_if(lru.begin(), lru.end(), [&](const E& e) { return e.key == key; });
    switch ((d[i + 2] >> 1) % 3) {
      case 0: {  // find
        BindingTable::State want = BindingTable::State::unbound;
        if (it != lru.end()) {
          if (now - it->at >= std::chrono::seconds(10)) {
            lru.erase(it);
          } else if (it->principal != principal) {
            want = BindingTable::State::other_principal;
          } else {
            want = BindingTable::State::bound;
            lru.splice(lru.begin(), lru, it);
          }
        }
        if (table.find(key, principal, now) != want) return false;
        break;
      }
      case 1:  // bind
        if (it != lru.end()) {
          it->principal = principal;
          it->at = now;
          lru.splice(lru.begin(), lru, it);
        } else {
          if (lru.size() >= max) lru.pop_back();
          lru.push_front({key, principal, now});
        }
        table.bind(key, principal, now);
        break;
      default:  // endpoint teardown
        if (it != lru.end()) lru.erase(it);
        table.drop(key);
        break;
    }
    if (table.size() != lru.size() || table.size() > max) return false;
  }
  return true;
}

}  // namespace

bool binding_fuzz_one(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (!check_challenge_text(text)) return false;
  std::string prefixed(challenge_prefix);
  prefixed += text;
  if (!check_challenge_text(prefixed)) return false;
  return check_replay(data, size) && check_bindings(data, size);
}

}  // namespace objdirect::token

#ifdef OBJDIRECT_FUZZ_MAIN
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (!objdirect::token::binding_fuzz_one(data, size)) std::abort();
  return 0;
}
#endif
