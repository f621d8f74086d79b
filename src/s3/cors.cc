#include "s3/cors.hpp"

#include "common/limits.hpp"
#include "s3/names.hpp"
#include "s3/xml.hpp"
#include "s3/xml_internal.hpp"

namespace objdirect::s3 {
namespace {

using detail::local_name;
using detail::malformed;
using detail::trim;

// Trimmed character data of a leaf element; nullopt when it holds elements.
std::optional<std::string> text_of(const pugi::xml_node& node) {
  auto s = detail::text_of(node);
  if (!s) return s;
  return std::string(trim(*s));
}

char lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

bool equal(std::string_view a, std::string_view b, bool ci) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (ci ? lower(a[i]) != lower(b[i]) : a[i] != b[i]) return false;
  }
  return true;
}

std::size_t stars(std::string_view s) {
  std::size_t n = 0;
  for (char c : s) n += c == '*';
  return n;
}

Result<std::uint32_t> parse_max_age(std::string_view s) {
  if (s.empty() || s.size() > 10) return malformed("<MaxAgeSeconds> must be a decimal integer");
  std::uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return malformed("<MaxAgeSeconds> must be a decimal integer");
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (v > 0x7fffffffu) return malformed("<MaxAgeSeconds> is too large");
  return static_cast<std::uint32_t>(v);
}

Result<CorsRule> parse_rule(const pugi::xml_node& r) {
  CorsRule rule;
  bool have_id = false;
  for (pugi::xml_node f : r.children()) {
    if (f.type() != pugi::node_element) continue;
    const std::string_view name = local_name(f);
    auto v = text_of(f);
    if (!v) return malformed(detail::about(name, "must contain only text"));
    if (!is_valid_utf8(*v)) return malformed(detail::about(name, "is not UTF-8"));
    if (name == "ID") {
      if (have_id) return malformed("<ID> appears more than once in a <CORSRule>");
      if (v->size() > limits::cors_rule_id_bytes_max) {
        return malformed("<ID> is longer than " + std::to_string(limits::cors_rule_id_bytes_max) +
                         " bytes");
      }
      have_id = true;
      rule.id = std::move(*v);
    } else if (name == "AllowedOrigin") {
      if (stars(*v) > 1) {
        return Status(Errc::invalid_request,
                      "AllowedOrigin \"" + *v + "\" can not have more than one wildcard.");
      }
      rule.allowed_origins.push_back(std::move(*v));
    } else if (name == "AllowedMethod") {
      if (*v != "GET" && *v != "PUT" && *v != "POST" && *v != "DELETE" && *v != "HEAD") {
        return Status(Errc::invalid_request,
                      "Found unsupported HTTP method in CORS config. Unsupported method is " + *v);
      }
      rule.allowed_methods.push_back(std::move(*v));
    } else if (name == "AllowedHeader") {
      if (stars(*v) > 1) {
        return Status(Errc::invalid_request,
                      "AllowedHeader \"" + *v + "\" can not have more than one wildcard.");
      }
      rule.allowed_headers.push_back(std::move(*v));
    } else if (name == "ExposeHeader") {
      if (stars(*v) > 0) {
        return Status(Errc::invalid_request,
                      "ExposeHeader \"" + *v +
                          "\" contains wildcard. We currently do not support wildcard for "
                          "ExposeHeader.");
      }
      rule.expose_headers.push_back(std::move(*v));
    } else if (name == "MaxAgeSeconds") {
      if (rule.max_age_seconds) return malformed("<MaxAgeSeconds> appears more than once");
      auto age = parse_max_age(*v);
      if (!age.ok()) return age.status();
      rule.max_age_seconds = *age;
    }
  }
  if (rule.allowed_origins.empty()) return malformed("a <CORSRule> needs an <AllowedOrigin>");
  if (rule.allowed_methods.empty()) return malformed("a <CORSRule> needs an <AllowedMethod>");
  return rule;
}

}  // namespace

Result<std::vector<CorsRule>> parse_cors(std::string_view body) {
  pugi::xml_document doc;
  auto root = detail::load(doc, body, "CORSConfiguration", limits::cors_body_bytes_max);
  if (!root.ok()) return root.status();
  std::vector<CorsRule> rules;
  for (pugi::xml_node c : root->children()) {
    if (c.type() != pugi::node_element || local_name(c) != "CORSRule") continue;
    if (rules.size() == limits::cors_rules_max) {
      return malformed("more than " + std::to_string(limits::cors_rules_max) + " <CORSRule>s");
    }
    auto rule = parse_rule(c);
    if (!rule.ok()) return rule.status();
    rules.push_back(std::move(*rule));
  }
  if (rules.empty()) return malformed("no <CORSRule>");
  return rules;
}

std::string cors_xml(const std::vector<CorsRule>& rules) {
  XmlWriter w;
  w.open("CORSConfiguration", "http://s3.amazonaws.com/doc/2006-03-01/");
  for (const CorsRule& r : rules) {
    w.open("CORSRule");
    if (!r.id.empty()) w.element("ID", r.id);
    for (const auto& v : r.allowed_origins) w.element("AllowedOrigin", v);
    for (const auto& v : r.allowed_methods) w.element("AllowedMethod", v);
    for (const auto& v : r.allowed_headers) w.element("AllowedHeader", v);
    for (const auto& v : r.expose_headers) w.element("ExposeHeader", v);
    if (r.max_age_seconds) {
      w.element("MaxAgeSeconds", static_cast<std::uint64_t>(*r.max_age_seconds));
    }
    w.close();
  }
  w.close();
  return w.finish();
}

bool cors_wildcard_match(std::string_view pattern, std::string_view s, bool case_insensitive) {
  const std::size_t star = pattern.find('*');
  if (star == std::string_view::npos) return equal(pattern, s, case_insensitive);
  const std::string_view head = pattern.substr(0, star);
  const std::string_view tail = pattern.substr(star + 1);
  if (s.size() < head.size() + tail.size()) return false;
  return equal(head, s.substr(0, head.size()), case_insensitive) &&
         equal(tail, s.substr(s.size() - tail.size()), case_insensitive);
}

const CorsRule* match_cors(const std::vector<CorsRule>& rules, std::string_view origin,
                           std::string_view method, std::string_view headers) {
  for (const CorsRule& r : rules) {
    bool origin_ok = false;
    for (const auto& o : r.allowed_origins) {
      if (cors_wildcard_match(o, origin, false)) {
        origin_ok = true;
        break;
      }
    }
    if (!origin_ok) continue;
    bool method_ok = false;
    for (const auto& m : r.allowed_methods) method_ok = method_ok || m == method;
    if (!method_ok) continue;
    bool headers_ok = true;
    std::string_view rest = headers;
    while (headers_ok && !rest.empty()) {
      const std::size_t comma = rest.find(',');
      const std::string_view h = trim(rest.substr(0, comma));
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      if (h.empty()) continue;
      bool one = false;
      for (const auto& a : r.allowed_headers) one = one || cors_wildcard_match(a, h, true);
      headers_ok = one;
    }
    if (headers_ok) return &r;
  }
  return nullptr;
}

}  // namespace objdirect::s3
