#include "client/s3_xml.hpp"

#include <pugixml.hpp>
#include <sstream>

namespace objdirect::client {
namespace {

std::string to_string(const pugi::xml_document& doc) {
  std::ostringstream out;
  doc.save(out, "", pugi::format_raw | pugi::format_no_declaration);
  return out.str();
}

}  // namespace

std::string complete_multipart_body(std::span<const std::pair<std::uint32_t, std::string>> parts) {
  pugi::xml_document doc;
  auto root = doc.append_child("CompleteMultipartUpload");
  for (const auto& [number, etag] : parts) {
    auto part = root.append_child("Part");
    part.append_child("PartNumber").text().set(number);
    part.append_child("ETag").text().set(("\"" + etag + "\"").c_str());
  }
  return to_string(doc);
}

Result<std::string> parse_complete_reply(std::string_view body) {
  pugi::xml_document doc;
  if (!doc.load_buffer(body.data(), body.size())) {
    return Status(Errc::io_error, "CompleteMultipartUpload reply is not XML");
  }
  if (auto err = doc.child("Error")) {
    return Status(from_s3_code(err.child_value("Code")), err.child_value("Message"));
  }
  return s3::unquote_etag(doc.child("CompleteMultipartUploadResult").child_value("ETag"));
}

std::string delete_objects_body(std::span<const std::string> keys) {
  pugi::xml_document doc;
  auto root = doc.append_child("Delete");
  root.append_child("Quiet").text().set("true");
  for (const auto& k : keys) root.append_child("Object").append_child("Key").text().set(k.c_str());
  return to_string(doc);
}

}  // namespace objdirect::client
