// Request bodies and reply parsing shared by the client's multipart and batch-delete calls
// (client.cc's internal multipart upload and client_ops.cc's public calls), on the shared S3
// document codecs (s3/documents.hpp).
// Thread safety: free functions without shared state.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "common/status.hpp"
#include "s3/conditional.hpp"  // s3::unquote_etag, for the ETags these replies carry
#include "s3/documents.hpp"

namespace objdirect::client {

// A reply decoder's refusal (Errc::malformed_xml) as the client reports it: io_error naming the
// operation ("ListObjectsV2 reply is not valid: ..."); other codes pass through.
Status reply_error(const Status& decoded, std::string_view what);

// A CompleteMultipartUpload body listing (part number, ETag) in the given order; quotes are added
// around each ETag. crc32c: empty, or each part's base64 CRC32C in the same order (an upload
// created with x-amz-checksum-algorithm CRC32C must list them).
std::string complete_multipart_body(std::span<const std::pair<std::uint32_t, std::string>> parts,
                                    std::span<const std::string> crc32c = {});

// The object's ETag (unquoted) from a CompleteMultipartUpload reply. S3 may report a failed
// completion inside a 200 reply: that <Error> becomes the returned Status.
// Errors: io_error (not XML), or the code of the embedded <Error>.
Result<std::string> parse_complete_reply(std::string_view body);

// A quiet DeleteObjects body for these keys.
std::string delete_objects_body(std::span<const std::string> keys);

}  // namespace objdirect::client
