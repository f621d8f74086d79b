// The endpoint address a UCX transport publishes in its tokens: UCX's worker address, prefixed
// with the network namespace the worker lives in, so that a peer can tell a worker it reaches
// only over shared memory across a network namespace boundary (where UCX's shared-memory
// transports never complete) before it posts anything. Byte layout: docs/token_format.md,
// "UCX endpoint address".
//
// Thread safety: pure functions, except own_net_namespace (reads /proc, safe from any thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace objdirect::transport::ucx {

// A network namespace of this kernel: the device and inode of its nsfs file
// (/proc/<pid>/ns/net). Two processes share a network namespace exactly when both are equal.
struct NetNamespace {
  std::uint64_t dev = 0;
  std::uint64_t ino = 0;
  friend bool operator==(const NetNamespace&, const NetNamespace&) = default;
};

// "ODNS", version 1, dev and ino (little-endian u64 each): 21 bytes before the worker address.
inline constexpr std::string_view peer_address_magic = "ODNS";
inline constexpr std::size_t peer_address_header_bytes = 4 + 1 + 8 + 8;

struct PeerAddress {
  std::optional<NetNamespace> net_namespace;  // absent: a bare worker address (older peers)
  std::string worker;                         // what ucp_ep_create gets
};

// The published form. `worker` must not be empty (asserted).
std::string encode_peer_address(const NetNamespace& ns, std::string_view worker);

// Never fails: bytes that do not start with the magic and version 1 followed by at least one
// worker byte are a bare worker address (what this transport published before the prefix), and
// are returned whole as `worker` with no namespace. Decoding an encoded address gives back its
// namespace and worker address exactly.
PeerAddress decode_peer_address(std::string_view bytes);

// This process's network namespace; nullopt when /proc/self/ns/net cannot be read (no /proc),
// in which case the transport publishes a bare worker address.
std::optional<NetNamespace> own_net_namespace();

}  // namespace objdirect::transport::ucx
