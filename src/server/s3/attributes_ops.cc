// GetObjectAttributes (GET /bucket/key?attributes): ETag, Checksum, ObjectParts (paged with
// x-amz-max-parts / x-amz-part-number-marker), StorageClass and ObjectSize, as the
// x-amz-object-attributes header asks (docs/s3-compatibility.md, "GetObjectAttributes").
#include <algorithm>
#include <charconv>
#include <limits>

#include "common/checksum.hpp"
#include "common/limits.hpp"
#include "common/time.hpp"
#include "s3/names.hpp"
#include "s3/xml.hpp"
#include "server/s3/s3_internal.hpp"

namespace objdirect::s3 {

namespace {

struct AttributeSet {
  bool etag = false, checksum = false, parts = false, storage_class = false, size = false;
};

// "ETag, ObjectParts,ObjectSize": names are matched exactly (AWS is case-sensitive), surrounding
// spaces ignored; repeats are harmless. Every header line counts (the SDKs send one
// comma-separated line; the protocol also allows repeated headers).
Result<AttributeSet> parse_attributes(const Ctx& c) {
  AttributeSet a;
  bool any = false;
  for (const auto& f : c.req) {
    if (!boost::beast::iequals(f.name_string(), "x-amz-object-attributes")) continue;
    std::string_view v = f.value();
    while (!v.empty()) {
      const std::size_t comma = v.find(',');
      std::string_view name = v.substr(0, comma);
      v = comma == std::string_view::npos ? std::string_view() : v.substr(comma + 1);
      while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
      while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
      if (name.empty()) continue;
      if (name == "ETag") {
        a.etag = true;
      } else if (name == "Checksum") {
        a.checksum = true;
      } else if (name == "ObjectParts") {
        a.parts = true;
      } else if (name == "StorageClass") {
        a.storage_class = true;
      } else if (name == "ObjectSize") {
        a.size = true;
      } else {
        return Status(Errc::invalid_argument, "Invalid attribute name specified.");
      }
      any = true;
    }
  }
  if (!any) {
    return Status(Errc::invalid_argument,
                  "The x-amz-object-attributes header specifying the attributes to be retrieved "
                  "is either missing or empty");
  }
  return a;
}

// A decimal header in [lo, hi]; `dflt` when absent.
Result<std::uint32_t> uint_header(const Ctx& c, std::string_view name, std::uint32_t dflt,
                                  std::uint32_t lo, std::uint32_t hi) {
  auto v = c.header(name);
  if (!v) return dflt;
  std::uint32_t n = 0;
  auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
  if (ec != std::errc() || p != v->data() + v->size() || v->empty() || n < lo || n > hi) {
    return Status(Errc::invalid_argument, "Invalid value for header " + std::string(name) +
                                              ": must be an integer between " + std::to_string(lo) +
                                              " and " + std::to_string(hi));
  }
  return n;
}

}  // namespace

Task<void> S3Service::Impl::get_object_attributes(Ctx& c) {
  if (auto st = validate_object_key(c.key); !st.ok()) co_return co_await send_error(c, st);
  if (auto st = check_bucket_access(c); !st.ok()) co_return co_await send_error(c, st);
  auto want = parse_attributes(c);
  if (!want.ok()) co_return co_await send_error(c, want.status());
  auto max_parts = uint_header(c, "x-amz-max-parts", limits::list_parts_max, 0,
                               std::numeric_limits<std::int32_t>::max());
  if (!max_parts.ok()) co_return co_await send_error(c, max_parts.status());
  auto marker = uint_header(c, "x-amz-part-number-marker", 0, 0, limits::parts_max);
  if (!marker.ok()) co_return co_await send_error(c, marker.status());
  auto version_id = version_id_param(c);
  if (!version_id.ok()) co_return co_await send_error(c, version_id.status());
  auto m = head_version(c, c.bucket, c.key, *version_id, true);
  if (!m.ok()) co_return co_await send_error(c, m.status());
  // SSE-C: as AWS, the attributes of an encrypted object need its key.
  if (auto key = key_for_read(c, *m, false); !key.ok())
    co_return co_await send_error(c, key.status());

  XmlWriter w;
  w.open("GetObjectAttributesResponse", kS3Xmlns);
  if (want->etag) w.element("ETag", m->etag);  // unquoted, as AWS answers here
  if (want->checksum && !m->checksums.empty()) {
    w.open("Checksum");
    for (const auto& [algo, v] : m->checksums) w.element("Checksum" + algo, v);
    w.element("ChecksumType", m->parts.empty() ? "FULL_OBJECT" : "COMPOSITE");
    w.close();
  }
  // Only multipart objects have parts. As on AWS (general purpose buckets), the <Part> entries
  // are listed only when the object has additional checksums; the count and paging fields are
  // always there.
  if (want->parts && !m->parts.empty()) {
    const bool list_parts = !m->checksums.empty();
    const std::uint32_t limit = std::min<std::uint32_t>(*max_parts, limits::list_parts_max);
    w.open("ObjectParts");
    w.element("PartsCount", static_cast<std::uint64_t>(m->parts.size()));
    w.element("PartNumberMarker", static_cast<std::uint64_t>(*marker));
    w.element("MaxParts", static_cast<std::uint64_t>(limit));
    std::uint32_t listed = 0, last = 0;
    bool truncated = false;
    for (const storage::PartInfo& p : m->parts) {
      if (p.part_number <= *marker) continue;
      if (listed == limit) {
        truncated = true;
        break;
      }
      ++listed;
      last = p.part_number;
      if (!list_parts) continue;
      w.open("Part");
      w.element("PartNumber", static_cast<std::uint64_t>(p.part_number));
      w.element("Size", p.size);
      for (const auto& [algo, v] : p.checksums) w.element("Checksum" + algo, v);
      w.close();
    }
    w.element("IsTruncated", truncated ? "true" : "false");
    if (truncated) w.element("NextPartNumberMarker", static_cast<std::uint64_t>(last));
    w.close();
  }
  if (want->storage_class) w.element("StorageClass", "STANDARD");
  if (want->size) w.element("ObjectSize", m->size);
  w.close();
  http::Fields f;
  f.set(bhttp::field::last_modified, http_date(from_ns(m->mtime_ns)));
  if (!m->version_id.empty()) f.set("x-amz-version-id", m->version_id);
  co_await send_xml(c, bhttp::status::ok, w.finish(), std::move(f));
}

}  // namespace objdirect::s3
