// Bucket CORS: the CORSConfiguration document (PutBucketCors, GetBucketCors), and the matching of
// a browser's request against its rules (preflight OPTIONS and actual requests).
//
// <CORSConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
//   <CORSRule>
//     <ID>optional</ID>
//     <AllowedOrigin>https://*.example.com</AllowedOrigin>...   one or more
//     <AllowedMethod>GET</AllowedMethod>...                      one or more: GET PUT POST DELETE
//     HEAD <AllowedHeader>x-amz-*</AllowedHeader>...                  zero or more
//     <ExposeHeader>ETag</ExposeHeader>...                       zero or more
//     <MaxAgeSeconds>3000</MaxAgeSeconds>                        optional
//   </CORSRule>...
// </CORSConfiguration>
//
// Parsing follows xml.hpp (namespace-agnostic, no DOCTYPE, size limit). As AWS answers:
//   - MalformedXML: not a <CORSConfiguration>, no <CORSRule>, more than limits::cors_rules_max
//     (100) rules, a rule without an AllowedOrigin or an AllowedMethod, an ID longer than
//     limits::cors_rule_id_bytes_max (255), two IDs or MaxAgeSeconds in a rule, a MaxAgeSeconds
//     that is not a non-negative decimal below 2^31, a body above limits::cors_body_bytes_max;
//   - InvalidRequest: a method other than GET, PUT, POST, DELETE, HEAD (case-sensitive), an
//     AllowedOrigin or AllowedHeader with more than one '*', an ExposeHeader with a '*'.
// Values are trimmed of XML whitespace.
//
// Matching (AWS's rules): the first rule wins whose AllowedOrigin matches the Origin (one '*'
// matches any run of characters, case-sensitive), whose AllowedMethod holds the method (for a
// preflight, Access-Control-Request-Method), and whose AllowedHeaders cover every header named in
// Access-Control-Request-Headers (case-insensitive, '*' wildcard).
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.hpp"

namespace objdirect::s3 {

struct CorsRule {
  std::string id;
  std::vector<std::string> allowed_origins;
  std::vector<std::string> allowed_methods;
  std::vector<std::string> allowed_headers;
  std::vector<std::string> expose_headers;
  std::optional<std::uint32_t> max_age_seconds;

  bool operator==(const CorsRule&) const = default;
};

Result<std::vector<CorsRule>> parse_cors(std::string_view body);
// The document for `rules` (GetBucketCors answers it; the store keeps it), which parse_cors
// reads back to the same rules.
std::string cors_xml(const std::vector<CorsRule>& rules);

// `pattern` with at most one '*' against `s`.
bool cors_wildcard_match(std::string_view pattern, std::string_view s, bool case_insensitive);

// The first rule allowing `origin` to use `method` with the request headers `headers` (the
// comma-separated Access-Control-Request-Headers value; empty for none); nullptr when none does.
const CorsRule* match_cors(const std::vector<CorsRule>& rules, std::string_view origin,
                           std::string_view method, std::string_view headers);

}  // namespace objdirect::s3
