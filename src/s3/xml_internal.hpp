// Private to src/s3: the hardened pugixml loader and leaf readers behind the request parsers
// (xml.cc) and the document decoders (documents.cc). Described in xml.hpp.
#pragma once

#include <cstddef>
#include <optional>
#include <pugixml.hpp>
#include <string>
#include <string_view>

#include "common/limits.hpp"
#include "common/status.hpp"

namespace objdirect::s3::detail {

// Errc::malformed_xml with S3's message and `why` appended.
Status malformed(std::string why);
// "<name> rest".
std::string about(std::string_view name, std::string_view rest);
bool is_xml_space(char c);
std::string_view trim(std::string_view s);
// The element name without a namespace prefix.
std::string_view local_name(const pugi::xml_node& n);
// Parses `body` into `doc` and returns its single root element, which must be named `root_name`
// (any prefix): refuses bodies over max_bytes, DOCTYPE, undefined entities, NUL bytes and text
// outside the root.
Result<pugi::xml_node> load(pugi::xml_document& doc, std::string_view body,
                            std::string_view root_name,
                            std::size_t max_bytes = limits::xml_body_bytes_max);
// The character data of a leaf element; nullopt when it contains elements.
std::optional<std::string> text_of(const pugi::xml_node& node);
// The text of the only child element named `name`: nullopt if absent; an error if it appears
// twice or is not a leaf.
Result<std::optional<std::string>> unique_child_text(const pugi::xml_node& parent,
                                                     std::string_view name);

}  // namespace objdirect::s3::detail
