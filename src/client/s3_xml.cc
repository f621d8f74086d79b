#include "client/s3_xml.hpp"

#include "common/assert.hpp"
#include "s3/documents.hpp"

namespace objdirect::client {

Status reply_error(const Status& decoded, std::string_view what) {
  if (decoded.code() != Errc::malformed_xml) return decoded;
  return Status(Errc::io_error, std::string(what) + " reply is not valid: " + decoded.message());
}

std::string complete_multipart_body(std::span<const std::pair<std::uint32_t, std::string>> parts,
                                    std::span<const std::string> crc32c) {
  OBJDIRECT_ASSERT(crc32c.empty() || crc32c.size() == parts.size(),
                   "one CRC32C per listed part, or none");
  std::vector<s3::CompletePart> list;
  list.reserve(parts.size());
  for (std::size_t i = 0; i < parts.size(); ++i) {
    s3::CompletePart p{parts[i].first, parts[i].second, {}};
    if (!crc32c.empty()) p.checksums.emplace_back("CRC32C", crc32c[i]);
    list.push_back(std::move(p));
  }
  return s3::encode_complete_multipart(list);
}

Result<std::string> parse_complete_reply(std::string_view body) {
  auto done = s3::decode_complete_result(body);
  if (!done.ok()) return reply_error(done.status(), "CompleteMultipartUpload");
  return std::move(done->etag);
}

std::string delete_objects_body(std::span<const std::string> keys) {
  s3::DeleteRequest req;
  req.quiet = true;
  req.objects.reserve(keys.size());
  for (const auto& k : keys) req.objects.push_back({k, {}});
  return s3::encode_delete_objects(req);
}

}  // namespace objdirect::client
