// Object metadata <-> upstream headers (s3_internal.hpp).
#include <algorithm>

#include "common/checksum.hpp"
#include "common/uri.hpp"
#include "s3/conditional.hpp"
#include "s3/encoded_words.hpp"
#include "storage/s3/s3_internal.hpp"

namespace objdirect::storage::s3gw {

// Headers that carry an object's metadata on PutObject / CreateMultipartUpload / CopyObject.
// The standard headers stored with an object, and the ObjectMeta field that keeps each: what a
// write sends upstream and a HEAD reads back.
using MetaHeader = std::pair<std::string_view, std::string ObjectMeta::*>;
constexpr MetaHeader kMetaHeaders[] = {
    {"content-type", &ObjectMeta::content_type},
    {"content-encoding", &ObjectMeta::content_encoding},
    {"content-disposition", &ObjectMeta::content_disposition},
    {"content-language", &ObjectMeta::content_language},
    {"cache-control", &ObjectMeta::cache_control},
    {"expires", &ObjectMeta::expires},
};

// The object's full checksums, kept by the gateway in upstream user metadata under this prefix
// (for upstreams that store no checksums, or only with headers the gateway does not send:
// radosgw 16, moto 5.2). Read back when the upstream's HEAD has no native checksum; never shown
// to clients as metadata.
constexpr std::string_view kKeptChecksumMeta = "x-amz-meta-objdirect-checksum-";

void add_meta_headers(Headers& h, const ObjectMeta& m) {
  for (const auto& [name, field] : kMetaHeaders) {
    if (!(m.*field).empty()) h.emplace_back(std::string(name), m.*field);
  }
  // Non-ASCII values travel RFC 2047-encoded, as S3 expects them.
  for (const auto& [k, v] : m.user_meta)
    h.emplace_back("x-amz-meta-" + lower(k), objdirect::s3::encode_metadata_value(v));
  for (const auto& [algo, v] : m.checksums) {
    auto a = checksum_from_name(algo);
    if (a && v.find('-') == std::string::npos)
      h.emplace_back(std::string(kKeptChecksumMeta) + lower(checksum_name(*a)), v);
  }
}

void add_checksum_headers(Headers& h, const ChecksumMap& sums) {
  for (const auto& [algo, v] : sums) {
    auto a = checksum_from_name(algo);
    if (a && v.find('-') == std::string::npos) h.emplace_back(checksum_header(*a), v);
  }
}

// `unquoted`: the ETag of If-Match without its quotes (radosgw 16 compares PutObject's If-Match
// with the bare ETag and answers 412 to the quoted form that S3 specifies).
void add_condition(Headers& h, const WriteCondition& cond, bool unquoted) {
  if (cond.kind == WriteCondition::Kind::must_be_absent) h.emplace_back("if-none-match", "*");
  if (cond.kind == WriteCondition::Kind::etag_must_match)
    h.emplace_back("if-match", unquoted ? cond.etag : quote(cond.etag));
}

void add_sse_c_headers(Headers& h, const SseCKeyHeaders& sse, bool copy_source) {
  if (!sse.present()) return;
  const std::string p = copy_source ? "x-amz-copy-source-server-side-encryption-customer-"
                                    : "x-amz-server-side-encryption-customer-";
  h.emplace_back(p + "algorithm", sse.algorithm);
  h.emplace_back(p + "key", sse.key);
  h.emplace_back(p + "key-md5", sse.key_md5);
}

SseCustomer sse_c_of_reply(const Response& r) {
  SseCustomer s;
  s.algorithm = r.header("x-amz-server-side-encryption-customer-algorithm").value_or("");
  if (s.enabled())
    s.key_md5 = r.header("x-amz-server-side-encryption-customer-key-md5").value_or("");
  return s;
}

ObjectMeta meta_from_head(std::string_view key, const Response& r) {
  ObjectMeta m;
  m.key = std::string(key);
  ChecksumMap kept;
  for (const auto& [k, v] : r.headers) {
    if (k.starts_with(kKeptChecksumMeta)) {
      if (auto a = checksum_from_name(std::string_view(k).substr(kKeptChecksumMeta.size())))
        kept[std::string(checksum_name(*a))] = v;
    } else if (k == "content-length") {
      parse_uint(v, m.size);
    } else if (k == "x-amz-version-id") {
      m.version_id = v;
    } else if (k == "x-amz-delete-marker") {
      m.delete_marker = v == "true";
    } else if (k == "etag") {
      m.etag = objdirect::s3::unquote_etag(v);
    } else if (k == "last-modified") {
      if (auto t = parse_http_date(v)) m.mtime_ns = ns_of(*t);
    } else if (auto it = std::ranges::find(kMetaHeaders, std::string_view(k), &MetaHeader::first);
               it != std::end(kMetaHeaders)) {
      m.*(it->second) = v;
    } else if (k.starts_with("x-amz-meta-")) {
      m.user_meta.emplace_back(k.substr(11), objdirect::s3::decode_metadata_value(v));
    } else if (k.starts_with("x-amz-checksum-")) {
      if (auto a = checksum_from_name(k.substr(15)))
        m.checksums[std::string(checksum_name(*a))] = v;
    }
  }
  m.sse = sse_c_of_reply(r);
  // A multipart object's composite checksum without its "-N" (moto 5.2 drops it): AWS marks a
  // full-object checksum of a multipart object with x-amz-checksum-type: FULL_OBJECT, so any
  // other is composite and gets the part count of the ETag back.
  const auto dash = m.etag.rfind('-');
  if (dash != std::string::npos && r.header("x-amz-checksum-type").value_or("") != "FULL_OBJECT") {
    for (auto& [algo, v] : m.checksums) {
      if (v.find('-') == std::string::npos) v += m.etag.substr(dash);
    }
  }
  // The upstream's own checksums win; kept ones are full-object checksums, never composite.
  if (m.checksums.empty()) m.checksums = std::move(kept);
  return m;
}

std::string decoded(std::string_view s, bool url) {
  if (!url) return std::string(s);
  auto d = uri_decode(s);
  return d ? *d : std::string(s);
}

std::string copy_source(std::string_view bucket, std::string_view key,
                        std::string_view version_id) {
  std::string s = "/";
  s += uri_encode(bucket, true);
  s += '/';
  s += uri_encode(key, false);
  if (!version_id.empty()) {
    s += "?versionId=";
    s += uri_encode(version_id, true);
  }
  return s;
}

}  // namespace objdirect::storage::s3gw
