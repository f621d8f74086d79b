// Percent-encoding as S3 and SigV4 use it, and query-string parsing.
//
// uri_encode follows the SigV4 "UriEncode" rules: the unreserved bytes A-Z a-z 0-9 - . _ ~ are
// kept, every other byte (UTF-8 bytes included) becomes %XX with upper-case hex; '/' is kept or
// encoded as the caller asks (kept in object-key paths, encoded everywhere else). uri_decode is
// strict: a '%' must be followed by two hex digits. '+' is a literal plus (S3 and SigV4 clients
// send a space as %20), never a space.
//
// Thread safety: all functions are pure and thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace objdirect {

using QueryPairs = std::vector<std::pair<std::string, std::string>>;

// SigV4 UriEncode of `s` (see above). encode_slash=false keeps '/' (canonical URI of S3 paths).
std::string uri_encode(std::string_view s, bool encode_slash);

// Percent-decodes `s`; nullopt if a '%' is not followed by two hex digits. Decoded bytes are not
// required to be valid UTF-8 (S3 keys are byte strings at this layer).
std::optional<std::string> uri_decode(std::string_view s);

// Splits a raw query string (without the '?') on '&' and each piece at its first '=', then
// percent-decodes names and values. Order is kept, repeats are kept, empty pieces are skipped, and
// a piece without '=' has an empty value ("uploads" -> {"uploads", ""}). A piece with a malformed
// escape is kept undecoded (use try_parse_query to reject it instead).
QueryPairs parse_query(std::string_view raw_query);

// As parse_query, but nullopt if any name or value holds a malformed '%' escape.
std::optional<QueryPairs> try_parse_query(std::string_view raw_query);

}  // namespace objdirect
