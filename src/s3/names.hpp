// S3 bucket-name and object-key validation.
//
// Bucket names follow the AWS rules for general purpose buckets: 3..63 characters of lowercase
// letters, digits, hyphens and dots; first and last character a letter or digit; no two adjacent
// dots; not formatted as an IPv4 address ("192.168.5.4"); none of the reserved prefixes
// ("xn--", "sthree-", "amzn-s3-demo-") or suffixes ("-s3alias", "--ol-s3", ".mrap", "--x-s3",
// "--table-s3").
//
// Object keys are 1..1024 bytes of valid UTF-8 (no overlong forms, no surrogates, nothing above
// U+10FFFF). AWS accepts a NUL byte in a key; ObjDirect rejects it, because keys travel through
// C strings in the storage layer and the C API, and because no mainstream client produces one.
//
// Thread safety: pure functions; safe to call concurrently.
#pragma once

#include <string_view>

#include "common/status.hpp"

namespace objdirect::s3 {

// Ok, or Errc::invalid_bucket_name with a message naming the rule the name breaks.
Status validate_bucket_name(std::string_view name);

// Ok, or Errc::key_too_long (more than limits::key_bytes_max bytes), or Errc::invalid_argument
// (empty, not valid UTF-8, or contains a NUL byte), each with a message naming the rule.
Status validate_object_key(std::string_view key);

// True when `s` is well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, <= U+10FFFF).
bool is_valid_utf8(std::string_view s) noexcept;

}  // namespace objdirect::s3
