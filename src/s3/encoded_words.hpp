// RFC 2047 encoded words in user metadata (x-amz-meta-*), as S3 uses them: a value that is not
// plain printable ASCII goes out as one `=?UTF-8?Q?...?=` word, and a value that arrives as
// encoded words is stored decoded. The format: docs/s3-compatibility.md, "User metadata".
//
// Thread safety: pure functions, safe from any thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace objdirect::s3 {

// Longest value the decoder looks at (longer ones are kept as sent): the 2 KiB that S3 allows for
// all user metadata together.
inline constexpr std::size_t encoded_words_bytes_max = 2048;

// `value` when it is printable US-ASCII (0x20-0x7E) without "=?"; otherwise the single Q-encoded
// word "=?UTF-8?Q?<text>?=" of its bytes (space as '_', '=', '?', '_' and every byte outside
// 0x21-0x7E as =XX). The output is always printable ASCII.
std::string encode_metadata_value(std::string_view value);

// The decoded text when `value` is one or more encoded words (charset UTF-8 or US-ASCII, any
// case; encoding Q or B) separated only by spaces or tabs, and the result is valid UTF-8 without
// control characters other than tab; otherwise `value` unchanged. Never fails.
std::string decode_metadata_value(std::string_view value);

}  // namespace objdirect::s3
