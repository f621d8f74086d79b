// CompleteMultipartUpload with retries that never turn a lost answer into an error or a second
// object: shared by Client::put's multipart uploads and Client::complete_multipart_upload.
//
// A Complete whose answer was lost (no answer, a cut or truncated reply, a retryable error) may
// have completed the upload on the server. Before sending it again the client asks HEAD: when
// the object's ETag is the multipart ETag these parts make (hex(md5(part md5s))-N; "-N" alone
// when a part ETag is not an MD5), the upload is done and that ETag is the answer. A re-sent
// Complete answered NoSuchUpload is confirmed the same way. Each retry is counted by reason in
// ClientStats::retry_reasons, each confirmation in ClientStats::completes_confirmed.
//
// Thread safety: as HttpClient.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>

#include "client/http_client.hpp"
#include "common/status.hpp"

namespace objdirect::client {

// target: "/bucket/key"; parts: (part number, ETag unquoted) in ascending order. Returns the
// object's ETag (unquoted). Errors: those of the Complete (invalid_part, no_such_upload, ...),
// with the attempts named after retries. crc32c: as complete_multipart_body's. sse: the upload's
// SSE-C headers (sse_c_headers), sent on the Complete and on the confirming HEAD; empty for none.
Result<std::string> complete_upload_confirmed(
    HttpClient& http, const std::string& target, const std::string& upload_id,
    std::span<const std::pair<std::uint32_t, std::string>> parts,
    std::span<const std::string> crc32c = {}, const Headers& sse = {});

}  // namespace objdirect::client
