// The fabric advertisement: the two response headers in which a server says which data-plane
// fabrics it serves (`x-amz-rdma-fabrics`) and which kernel serves them (`x-amz-rdma-host-id`).
// The server formats them (server/s3, server/rdma), the client parses them before it makes a
// token (client/fabric_choice.hpp). Grammar, limits and compatibility: docs/token_format.md,
// "Fabric advertisement".
//
//   x-amz-rdma-fabrics = item *( "," item )         at most fabric_advert_bytes_max bytes
//   item               = OWS [ name ] OWS            empty items are skipped
//   name               = 1*name-char                 at most fabric_name_bytes_max bytes
//   name-char          = ALPHA / DIGIT / ":" / "_" / "-" / "." / "+" / "/"
//   x-amz-rdma-host-id = OWS 16( DIGIT / %x61-66 ) OWS   (16 lower-case hex digits)
//   OWS                = *( SP / HTAB )
//
// At most fabric_advert_names_max names, none twice. Names a client does not know are its
// business (it skips them); the codec only checks the grammar.
//
// Thread safety: all functions are pure.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.hpp"

namespace objdirect::limits {
// One fabric name in x-amz-rdma-fabrics ("libfabric:verbs" is 15).
inline constexpr std::size_t fabric_name_bytes_max = 64;
// Names in one x-amz-rdma-fabrics value (a server enables at most five today).
inline constexpr std::size_t fabric_advert_names_max = 32;
// The whole x-amz-rdma-fabrics value, blanks and empty items included.
inline constexpr std::size_t fabric_advert_bytes_max = 1024;
}  // namespace objdirect::limits

namespace objdirect::token {

// Hex digits of x-amz-rdma-host-id (64 bits).
inline constexpr std::size_t host_id_chars = 16;

// Whether `name` is a name of the grammar above (non-empty, at most fabric_name_bytes_max bytes
// of name-char).
bool valid_fabric_name(std::string_view name) noexcept;

// The x-amz-rdma-fabrics value for `names`, in order: "libfabric:shm,libfabric:tcp,ucx" (no
// blanks). Precondition: every name is valid_fabric_name, none repeats, at most
// fabric_advert_names_max (the server's own fixed list); parse_fabric_advert gives them back.
std::string format_fabric_advert(std::span<const std::string> names);

// Parses an x-amz-rdma-fabrics value into its names, in order (blanks trimmed, empty items
// dropped; "" is a valid, empty list). Errors (Errc::invalid_argument, the message says what and
// where): longer than fabric_advert_bytes_max, a byte outside name-char / blank / comma, a blank
// inside a name, a name longer than fabric_name_bytes_max, more than fabric_advert_names_max
// names, a name twice.
Result<std::vector<std::string>> parse_fabric_advert(std::string_view value);

// Parses an x-amz-rdma-host-id value: exactly host_id_chars lower-case hex digits, blanks around
// them trimmed. Anything else is Errc::invalid_argument. transport::host_identity() produces it.
Result<std::string> parse_host_id(std::string_view value);

}  // namespace objdirect::token
