#include "s3/tagging.hpp"

#include <optional>
#include <set>

#include "common/limits.hpp"
#include "common/uri.hpp"
#include "s3/names.hpp"
#include "s3/xml.hpp"
#include "s3/xml_internal.hpp"

namespace objdirect::s3 {
namespace {

using detail::local_name;
using detail::malformed;
using detail::text_of;

Status invalid_tag(std::string why) {
  return Status(Errc::invalid_tag, std::move(why));
}

// Code points in valid UTF-8 (the caller checked validity).
std::size_t code_points(std::string_view s) {
  std::size_t n = 0;
  for (char ch : s) {
    if ((static_cast<unsigned char>(ch) & 0xC0) != 0x80) ++n;
  }
  return n;
}

// Letters, digits, spaces and + - = . _ : / @ (AWS's tag character set). Every non-ASCII code
// point is accepted as a letter: telling Unicode letters from symbols needs tables we do not
// carry.
bool allowed_chars(std::string_view s) {
  for (char ch : s) {
    const auto u = static_cast<unsigned char>(ch);
    if (u >= 0x80) continue;
    if ((u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || (u >= '0' && u <= '9')) continue;
    if (std::string_view(" +-=._:/@").find(ch) != std::string_view::npos) continue;
    return false;
  }
  return true;
}

}  // namespace

Status validate_tags(const storage::TagSet& tags, std::size_t max_tags) {
  if (tags.size() > max_tags) {
    return invalid_tag(max_tags == limits::object_tags_max
                           ? "Object tags cannot be greater than " + std::to_string(max_tags)
                           : "Bucket tag count cannot be greater than " + std::to_string(max_tags));
  }
  std::set<std::string_view> seen;
  for (const auto& [k, v] : tags) {
    if (!is_valid_utf8(k) || !allowed_chars(k) || k.empty()) {
      return invalid_tag("The TagKey you have provided is invalid");
    }
    if (!is_valid_utf8(v) || !allowed_chars(v)) {
      return invalid_tag("The TagValue you have provided is invalid");
    }
    if (code_points(k) > limits::tag_key_chars_max) {
      return invalid_tag("The TagKey you have provided is too long, max " +
                         std::to_string(limits::tag_key_chars_max));
    }
    if (code_points(v) > limits::tag_value_chars_max) {
      return invalid_tag("The TagValue you have provided is too long, max " +
                         std::to_string(limits::tag_value_chars_max));
    }
    if (k.starts_with("aws:")) {
      return invalid_tag("Your TagKey cannot be prefixed with aws:");
    }
    if (!seen.insert(k).second) {
      return invalid_tag("Cannot provide multiple Tags with the same key");
    }
  }
  return Status::Ok();
}

Result<storage::TagSet> parse_tagging(std::string_view body, std::size_t max_tags) {
  pugi::xml_document doc;
  auto root = detail::load(doc, body, "Tagging");
  if (!root.ok()) return root.status();
  pugi::xml_node tag_set;
  for (pugi::xml_node c : root->children()) {
    if (c.type() != pugi::node_element || local_name(c) != "TagSet") continue;
    if (tag_set) return malformed("<TagSet> appears more than once");
    tag_set = c;
  }
  if (!tag_set) return malformed("<TagSet> is missing");
  storage::TagSet tags;
  for (pugi::xml_node t : tag_set.children()) {
    if (t.type() != pugi::node_element || local_name(t) != "Tag") continue;
    // Counted before the tags are read, so a huge body cannot build a huge set.
    if (tags.size() >= max_tags) {
      return validate_tags(storage::TagSet(max_tags + 1), max_tags);
    }
    std::optional<std::string> key, value;
    for (pugi::xml_node f : t.children()) {
      if (f.type() != pugi::node_element) continue;
      const std::string_view name = local_name(f);
      std::optional<std::string>* slot = name == "Key" ? &key : name == "Value" ? &value : nullptr;
      if (slot == nullptr) continue;
      if (*slot) return malformed(detail::about(name, "appears more than once in <Tag>"));
      *slot = text_of(f);
      if (!*slot) return malformed(detail::about(name, "must contain only text"));
    }
    if (!key) return malformed("<Tag> without <Key>");
    if (!value) return malformed("<Tag> without <Value>");
    tags.emplace_back(std::move(*key), std::move(*value));
  }
  OBJDIRECT_RETURN_IF_ERROR(validate_tags(tags, max_tags));
  return tags;
}

std::string tagging_xml(const storage::TagSet& tags) {
  XmlWriter w;
  w.open("Tagging", "http://s3.amazonaws.com/doc/2006-03-01/");
  w.open("TagSet");
  for (const auto& [k, v] : tags) {
    w.open("Tag");
    w.element("Key", k);
    w.element("Value", v);
    w.close();
  }
  w.close();
  w.close();
  return w.finish();
}

Result<storage::TagSet> parse_tagging_header(std::string_view value) {
  std::string raw(value);
  for (char& ch : raw) {
    if (ch == '+') ch = ' ';
  }
  auto pairs = try_parse_query(raw);
  if (!pairs) {
    return Status(Errc::invalid_argument,
                  "The header 'x-amz-tagging' shall be encoded as UTF-8 "
                  "then URLEncoded URL query parameters without tag "
                  "name duplicates.");
  }
  storage::TagSet tags(pairs->begin(), pairs->end());
  OBJDIRECT_RETURN_IF_ERROR(validate_tags(tags, limits::object_tags_max));
  return tags;
}

std::string tagging_header(const storage::TagSet& tags) {
  std::string out;
  for (const auto& [k, v] : tags) {
    if (!out.empty()) out += '&';
    out += uri_encode(k, true);
    out += '=';
    out += uri_encode(v, true);
  }
  return out;
}

}  // namespace objdirect::s3
