// Request bodies and reply parsing shared by the client's multipart and batch-delete calls
// (client.cc's internal multipart upload and client_ops.cc's public calls), built with pugixml so
// that keys and ETags are escaped in one place.
// Thread safety: free functions without shared state.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "common/status.hpp"
#include "s3/conditional.hpp"  // s3::unquote_etag, for the ETags these replies carry

namespace objdirect::client {

// A CompleteMultipartUpload body listing (part number, ETag) in the given order; quotes are added
// around each ETag.
std::string complete_multipart_body(std::span<const std::pair<std::uint32_t, std::string>> parts);

// The object's ETag (unquoted) from a CompleteMultipartUpload reply. S3 may report a failed
// completion inside a 200 reply: that <Error> becomes the returned Status.
// Errors: io_error (not XML), or the code of the embedded <Error>.
Result<std::string> parse_complete_reply(std::string_view body);

// A quiet DeleteObjects body for these keys.
std::string delete_objects_body(std::span<const std::string> keys);

}  // namespace objdirect::client
