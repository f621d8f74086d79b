#include "transport/ucx/peer_address.hpp"

#include <sys/stat.h>

#include "common/assert.hpp"

namespace objdirect::transport::ucx {
namespace {

constexpr std::uint8_t peer_address_version = 1;

void put_u64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::uint64_t get_u64(std::string_view in) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<std::uint8_t>(in[i]);
  return v;
}

}  // namespace

std::string encode_peer_address(const NetNamespace& ns, std::string_view worker) {
  OBJDIRECT_ASSERT(!worker.empty(), "a UCX worker address is never empty");
  std::string out;
  out.reserve(peer_address_header_bytes + worker.size());
  out.append(peer_address_magic);
  out.push_back(static_cast<char>(peer_address_version));
  put_u64(out, ns.dev);
  put_u64(out, ns.ino);
  out.append(worker);
  return out;
}

PeerAddress decode_peer_address(std::string_view bytes) {
  if (bytes.size() <= peer_address_header_bytes || !bytes.starts_with(peer_address_magic) ||
      static_cast<std::uint8_t>(bytes[4]) != peer_address_version) {
    return PeerAddress{std::nullopt, std::string(bytes)};
  }
  NetNamespace ns{get_u64(bytes.substr(5, 8)), get_u64(bytes.substr(13, 8))};
  return PeerAddress{ns, std::string(bytes.substr(peer_address_header_bytes))};
}

std::optional<NetNamespace> own_net_namespace() {
  struct stat st {};
  if (::stat("/proc/self/ns/net", &st) != 0) return std::nullopt;
  return NetNamespace{static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino)};
}

}  // namespace objdirect::transport::ucx
