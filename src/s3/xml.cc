#include "s3/xml.hpp"

#include <optional>
#include <pugixml.hpp>

#include "common/ascii.hpp"
#include "common/assert.hpp"
#include "common/limits.hpp"
#include "s3/conditional.hpp"
#include "s3/xml_internal.hpp"

namespace objdirect::s3 {
namespace {
constexpr std::string_view kDeclaration = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
}  // namespace

namespace detail {

Status malformed(std::string why) {
  return Status(Errc::malformed_xml,
                "The XML you provided was not well-formed or did not validate against our "
                "published schema: " +
                    std::move(why));
}

// "<name> rest". Built with append: GCC 12 gives a false -Wrestrict on "<" + std::string(...).
std::string about(std::string_view name, std::string_view rest) {
  std::string s;
  s.reserve(name.size() + rest.size() + 3);
  s += '<';
  s += name;
  s += "> ";
  s += rest;
  return s;
}

bool is_xml_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_xml_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_xml_space(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace detail

namespace {
using detail::about;
using detail::is_xml_space;
using detail::malformed;
using detail::trim;

bool is_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// The part of an entity reference between '&' and ';' is one XML 1.0 allows without a DTD.
bool is_known_entity(std::string_view name) {
  if (name == "amp" || name == "lt" || name == "gt" || name == "quot" || name == "apos") {
    return true;
  }
  if (name.size() < 2 || name[0] != '#') return false;
  std::string_view digits = name.substr(1);
  bool hex = false;
  if (digits.front() == 'x') {
    hex = true;
    digits.remove_prefix(1);
  }
  // Bounded length keeps the value below 2^32; zero-valued references (NUL) are not XML.
  if (digits.empty() || digits.size() > 8) return false;
  bool nonzero = false;
  for (char c : digits) {
    if (hex ? !is_hex(c) : !(c >= '0' && c <= '9')) return false;
    if (c != '0') nonzero = true;
  }
  return nonzero;
}

bool is_valid_entity_at(std::string_view body, std::size_t amp, std::size_t& next) {
  const std::size_t semi = body.find(';', amp + 1);
  if (semi == std::string_view::npos || semi - amp > 12 ||
      !is_known_entity(body.substr(amp + 1, semi - amp - 1))) {
    return false;
  }
  next = semi + 1;
  return true;
}

// A byte-level pass before pugixml, because pugixml is lenient where S3 is not: it keeps unknown
// entity references as literal text (so "&lol;" would silently become a key), stops at a NUL byte
// (ignoring whatever follows), skips a DOCTYPE, and drops text outside the root element. This scan
// tracks just enough structure for that: tags (with quoted attribute values), CDATA sections,
// comments and processing instructions, where '&' is literal. pugixml checks everything else.
Status prescan(std::string_view body) {
  const std::size_t n = body.size();
  std::size_t i = body.starts_with("\xEF\xBB\xBF") ? 3 : 0;  // UTF-8 byte order mark
  std::size_t depth = 0;
  while (i < n) {
    const char c = body[i];
    if (c == '\0') return malformed("NUL byte in the document");
    if (c == '<') {
      const std::string_view rest = body.substr(i);
      std::string_view end;
      if (rest.starts_with("<![CDATA[")) {
        if (depth == 0) return malformed("text outside the root element");
        end = "]]>";
      } else if (rest.starts_with("<!--")) {
        end = "-->";
      } else if (rest.starts_with("<?")) {
        end = "?>";
      } else if (rest.starts_with("<!")) {
        return malformed("DOCTYPE and other markup declarations are not allowed");
      }
      if (!end.empty()) {
        const std::size_t close = body.find(end, i + 2);
        if (close == std::string_view::npos) return malformed("unterminated section");
        if (body.substr(i, close - i).find('\0') != std::string_view::npos) {
          return malformed("NUL byte in the document");
        }
        i = close + end.size();
        continue;
      }
      // A start, end or empty-element tag; quoted attribute values may hold '>' and entities.
      const bool end_tag = rest.starts_with("</");
      char quote = 0;
      std::size_t j = i + 1;
      for (; j < n; ++j) {
        const char t = body[j];
        if (t == '\0') return malformed("NUL byte in the document");
        if (quote != 0) {
          if (t == quote) {
            quote = 0;
          } else if (t == '&') {
            std::size_t next;
            if (!is_valid_entity_at(body, j, next)) return malformed("undefined entity reference");
            j = next - 1;
          }
        } else if (t == '"' || t == '\'') {
          quote = t;
        } else if (t == '>') {
          break;
        }
      }
      if (j == n) return malformed("unterminated tag");
      if (end_tag) {
        if (depth == 0) return malformed("unbalanced end tag");
        --depth;
      } else if (body[j - 1] != '/') {
        ++depth;
      }
      i = j + 1;
      continue;
    }
    if (depth == 0 && !is_xml_space(c)) return malformed("text outside the root element");
    if (c == '&') {
      std::size_t next;
      if (!is_valid_entity_at(body, i, next)) return malformed("undefined entity reference");
      i = next;
      continue;
    }
    ++i;
  }
  return Status::Ok();
}

}  // namespace

namespace detail {

std::string_view local_name(const pugi::xml_node& n) {
  std::string_view s = n.name();
  const std::size_t colon = s.find(':');
  return colon == std::string_view::npos ? s : s.substr(colon + 1);
}

// Parses `body` into `doc` and returns its single root element, which must be named `root_name`.
Result<pugi::xml_node> load(pugi::xml_document& doc, std::string_view body,
                            std::string_view root_name, std::size_t max_bytes) {
  if (body.size() > max_bytes) {
    return malformed("the body is larger than " + std::to_string(max_bytes) + " bytes");
  }
  if (trim(body).empty()) return malformed("the body is empty");
  OBJDIRECT_RETURN_IF_ERROR(prescan(body));
  // parse_ws_pcdata keeps whitespace-only text nodes: without it a key of " " would read as "",
  // and "  <![CDATA[x]]>  " as "x". parse_doctype makes a DOCTYPE visible so it can be refused
  // even if the prescan missed it.
  const unsigned options = pugi::parse_default | pugi::parse_ws_pcdata | pugi::parse_doctype;
  const pugi::xml_parse_result r =
      doc.load_buffer(body.data(), body.size(), options, pugi::encoding_utf8);
  if (!r) {
    return malformed(std::string(r.description()) + " at offset " + std::to_string(r.offset));
  }
  pugi::xml_node root;
  for (pugi::xml_node child : doc.children()) {
    switch (child.type()) {
      case pugi::node_element:
        if (root) return malformed("more than one root element");
        root = child;
        break;
      case pugi::node_pcdata:
      case pugi::node_cdata:
        if (!trim(child.value()).empty()) return malformed("text outside the root element");
        break;
      case pugi::node_doctype:
        return malformed("DOCTYPE is not allowed");
      default:
        break;
    }
  }
  if (!root) return malformed("no root element");
  if (local_name(root) != root_name) {
    return malformed(about(root_name, "expected as the root element"));
  }
  return root;
}

// The character data of an element (text and CDATA, concatenated); nullopt when it contains
// elements, since every field we read is a leaf.
std::optional<std::string> text_of(const pugi::xml_node& node) {
  std::string s;
  for (pugi::xml_node c : node.children()) {
    switch (c.type()) {
      case pugi::node_pcdata:
      case pugi::node_cdata:
        s += c.value();
        break;
      case pugi::node_element:
        return std::nullopt;
      default:
        break;
    }
  }
  return s;
}

// The text of the only child element of `parent` named `name`: nullopt if absent; an error if it
// appears twice or is not a leaf.
Result<std::optional<std::string>> unique_child_text(const pugi::xml_node& parent,
                                                     std::string_view name) {
  std::optional<std::string> out;
  for (pugi::xml_node c : parent.children()) {
    if (c.type() != pugi::node_element || local_name(c) != name) continue;
    if (out) return malformed(about(name, "appears more than once"));
    out = text_of(c);
    if (!out) return malformed(about(name, "must contain only text"));
  }
  return out;
}

}  // namespace detail

namespace {
using detail::load;
using detail::local_name;
using detail::text_of;
using detail::unique_child_text;

std::optional<std::uint32_t> parse_part_number(std::string_view s) {
  s = trim(s);
  if (s.empty()) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
    if (v > limits::parts_max) return std::nullopt;  // also stops overflow
  }
  if (v < 1) return std::nullopt;
  return static_cast<std::uint32_t>(v);
}

}  // namespace

Result<std::vector<CompletePart>> parse_complete_multipart(std::string_view body) {
  pugi::xml_document doc;
  Result<pugi::xml_node> root = load(doc, body, "CompleteMultipartUpload");
  if (!root.ok()) return root.status();
  std::vector<CompletePart> parts;
  for (pugi::xml_node p : root->children()) {
    if (p.type() != pugi::node_element || local_name(p) != "Part") continue;
    if (parts.size() == limits::parts_max) {
      return malformed("a multipart upload has at most " + std::to_string(limits::parts_max) +
                       " parts");
    }
    CompletePart part;
    auto number = unique_child_text(p, "PartNumber");
    if (!number.ok()) return number.status();
    if (!*number) return malformed("<Part> without <PartNumber>");
    const std::optional<std::uint32_t> n = parse_part_number(**number);
    if (!n) {
      return malformed("<PartNumber> must be an integer between 1 and " +
                       std::to_string(limits::parts_max));
    }
    part.part_number = *n;
    auto etag = unique_child_text(p, "ETag");
    if (!etag.ok()) return etag.status();
    if (!*etag) return malformed("<Part> without <ETag>");
    part.etag = unquote_etag(trim(**etag));
    for (pugi::xml_node c : p.children()) {
      if (c.type() != pugi::node_element) continue;
      const std::string_view name = local_name(c);
      if (!name.starts_with("Checksum") || name.size() == 8) continue;
      std::optional<std::string> value = text_of(c);
      if (!value) return malformed(about(name, "must contain only text"));
      part.checksums.emplace_back(std::string(name.substr(8)), std::string(trim(*value)));
    }
    parts.push_back(std::move(part));
  }
  if (parts.empty()) return malformed("<CompleteMultipartUpload> lists no <Part>");
  return parts;
}

Result<DeleteRequest> parse_delete_objects(std::string_view body) {
  pugi::xml_document doc;
  Result<pugi::xml_node> root = load(doc, body, "Delete");
  if (!root.ok()) return root.status();
  DeleteRequest req;
  auto quiet = unique_child_text(*root, "Quiet");
  if (!quiet.ok()) return quiet.status();
  if (*quiet) {
    const std::string_view q = trim(**quiet);
    if (ascii_iequals(q, "true")) {
      req.quiet = true;
    } else if (!ascii_iequals(q, "false")) {
      return malformed("<Quiet> must be true or false");
    }
  }
  for (pugi::xml_node o : root->children()) {
    if (o.type() != pugi::node_element || local_name(o) != "Object") continue;
    if (req.objects.size() == limits::delete_keys_max) {
      return malformed("DeleteObjects accepts at most " + std::to_string(limits::delete_keys_max) +
                       " keys per request");
    }
    auto key = unique_child_text(o, "Key");
    if (!key.ok()) return key.status();
    if (!*key) return malformed("<Object> without <Key>");
    auto version = unique_child_text(o, "VersionId");
    if (!version.ok()) return version.status();
    req.objects.push_back(DeleteEntry{std::move(**key), version->value_or(std::string())});
  }
  if (req.objects.empty()) return malformed("<Delete> lists no <Object>");
  return req;
}

Result<std::string> parse_create_bucket(std::string_view body) {
  if (trim(body).empty() && body.size() <= limits::xml_body_bytes_max) return std::string();
  pugi::xml_document doc;
  Result<pugi::xml_node> root = load(doc, body, "CreateBucketConfiguration");
  if (!root.ok()) return root.status();
  auto location = unique_child_text(*root, "LocationConstraint");
  if (!location.ok()) return location.status();
  return std::string(trim(location->value_or(std::string())));
}

// ------------------------------------------------------------------------------------------------
// Writing

namespace {

void append_char_ref(std::string& out, std::uint32_t cp) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  char buf[8];
  int n = 0;
  do {
    buf[n++] = kHex[cp & 0xF];
    cp >>= 4;
  } while (cp != 0);
  out += "&#x";
  while (n > 0) out += buf[--n];
  out += ';';
}

// Length of the valid UTF-8 sequence starting at s[i] and its code point; 0 when invalid.
std::size_t decode_utf8(std::string_view s, std::size_t i, std::uint32_t& cp) {
  const auto c = static_cast<unsigned char>(s[i]);
  std::size_t len;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
    cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (s.size() - i < len) return 0;
  for (std::size_t k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3F);
  }
  if (len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) return 0;
  if (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) return 0;
  return len;
}

bool is_plain_name(std::string_view tag) {
  if (tag.empty()) return false;
  for (char c : tag) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.' || c == ':';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

void append_xml_escaped(std::string& out, std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      switch (c) {
        case '&':
          out += "&amp;";
          break;
        case '<':
          out += "&lt;";
          break;
        case '>':
          out += "&gt;";
          break;
        case '"':
          out += "&quot;";
          break;
        case '\0':
          out += "\xEF\xBF\xBD";  // U+FFFD: XML cannot carry NUL, not even as &#0;
          break;
        default:
          if (c < 0x20) {
            append_char_ref(out, c);
          } else {
            out += static_cast<char>(c);
          }
      }
      ++i;
      continue;
    }
    std::uint32_t cp = 0;
    const std::size_t len = decode_utf8(text, i, cp);
    if (len == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD for each byte that is not valid UTF-8
      ++i;
    } else {
      if (cp == 0xFFFE || cp == 0xFFFF) {
        append_char_ref(out, cp);
      } else {
        out.append(text.substr(i, len));
      }
      i += len;
    }
  }
}

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  append_xml_escaped(out, text);
  return out;
}

XmlWriter::XmlWriter() : out_(kDeclaration) {}

void XmlWriter::open(std::string_view tag, std::string_view xmlns) {
  OBJDIRECT_ASSERT(is_plain_name(tag), "XmlWriter tags are program constants: plain XML names");
  out_ += '<';
  out_ += tag;
  if (!xmlns.empty()) {
    out_ += " xmlns=\"";
    append_xml_escaped(out_, xmlns);
    out_ += '"';
  }
  out_ += '>';
  open_.emplace_back(tag);
}

void XmlWriter::open_with_attributes(
    std::string_view tag,
    std::initializer_list<std::pair<std::string_view, std::string_view>> attributes) {
  OBJDIRECT_ASSERT(is_plain_name(tag), "XmlWriter tags are program constants: plain XML names");
  out_ += '<';
  out_ += tag;
  for (const auto& [name, value] : attributes) {
    OBJDIRECT_ASSERT(is_plain_name(name), "XmlWriter attribute names are plain XML names");
    out_ += ' ';
    out_ += name;
    out_ += "=\"";
    append_xml_escaped(out_, value);
    out_ += '"';
  }
  out_ += '>';
  open_.emplace_back(tag);
}

void XmlWriter::close() {
  OBJDIRECT_ASSERT(!open_.empty(), "XmlWriter::close() without an open element");
  out_ += "</";
  out_ += open_.back();
  out_ += '>';
  open_.pop_back();
}

void XmlWriter::element(std::string_view tag, std::string_view text) {
  OBJDIRECT_ASSERT(is_plain_name(tag), "XmlWriter tags are program constants: plain XML names");
  out_ += '<';
  out_ += tag;
  out_ += '>';
  append_xml_escaped(out_, text);
  out_ += "</";
  out_ += tag;
  out_ += '>';
}

void XmlWriter::element(std::string_view tag, std::uint64_t value) {
  element(tag, std::string_view(std::to_string(value)));
}

std::string XmlWriter::finish() {
  while (!open_.empty()) close();
  std::string doc = std::move(out_);
  out_ = std::string(kDeclaration);
  return doc;
}

std::string error_xml(std::string_view code, std::string_view message, std::string_view resource,
                      std::string_view request_id) {
  XmlWriter w;
  w.open("Error");
  w.element("Code", code);
  // Never an empty <Message>: Debian's AWS CLI v2 crashes on one.
  if (message.empty()) message = code.empty() ? std::string_view("An error occurred") : code;
  w.element("Message", message);
  w.element("Resource", resource);
  w.element("RequestId", request_id);
  w.close();
  return w.finish();
}

ErrorReply parse_error_xml(std::string_view body) {
  ErrorReply out;
  pugi::xml_document doc;
  if (body.empty() || !doc.load_buffer(body.data(), body.size())) return out;
  auto e = doc.child("Error");
  out.code = e.child_value("Code");
  out.message = e.child_value("Message");
  out.request_id = e.child_value("RequestId");
  return out;
}

}  // namespace objdirect::s3
