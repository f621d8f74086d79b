// The HMACs of endpoint binding (token/binding.hpp): the server's challenge and the client's proof.
#include <openssl/crypto.h>

#include <cstring>

#include "common/checksum.hpp"
#include "token/binding.hpp"

namespace objdirect::token {

namespace {

template <std::size_t N>
std::array<std::uint8_t, N> to_array(const std::string& bytes) {
  std::array<std::uint8_t, N> out{};
  std::memcpy(out.data(), bytes.data(), std::min(N, bytes.size()));
  return out;
}

}  // namespace

Challenge server_challenge(std::string_view server_key, std::uint64_t window,
                           std::string_view binding_key, std::string_view principal) {
  std::string msg = "objdirect-rdma-challenge-v1";
  msg += '\0';
  for (int i = 0; i < 8; ++i) msg += static_cast<char>((window >> (8 * i)) & 0xff);
  // Lengths first, so that no two (key, principal) pairs give the same message.
  const std::uint32_t klen = static_cast<std::uint32_t>(binding_key.size());
  for (int i = 0; i < 4; ++i) msg += static_cast<char>((klen >> (8 * i)) & 0xff);
  msg += binding_key;
  msg += principal;
  return to_array<challenge_bytes>(hmac_sha256(server_key, msg));
}

Proof bind_proof(std::string_view secret_key, const Challenge& challenge,
                 std::string_view endpoint) {
  const std::string key = hmac_sha256(secret_key, "objdirect-rdma-bind-v1");
  std::string msg(reinterpret_cast<const char*>(challenge.data()), challenge.size());
  msg += endpoint;
  return to_array<proof_bytes>(hmac_sha256(key, msg));
}

bool proof_equal(const Proof& a, const Proof& b) {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace objdirect::token
