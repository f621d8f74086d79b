// Bucket operations: ListBuckets, Create/Delete/HeadBucket, GetBucketLocation/Versioning,
// ListObjects (v1, v2, versions), ListMultipartUploads and DeleteObjects.
#include <algorithm>
#include <charconv>
#include <chrono>

#include "common/checksum.hpp"
#include "common/limits.hpp"
#include "common/time.hpp"
#include "common/uri.hpp"
#include "s3/names.hpp"
#include "s3/xml.hpp"
#include "server/s3/s3_internal.hpp"

namespace objdirect::s3 {

namespace {

// max-keys style parameter: absent -> def; negative or junk -> error; clamped to max.
Result<std::uint32_t> parse_max(const std::optional<std::string>& v, std::string_view name,
                                std::uint32_t max) {
  if (!v) return max;
  std::int64_t n = 0;
  auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
  if (ec != std::errc() || p != v->data() + v->size() || n < 0) {
    return Status(Errc::invalid_argument, std::string(name) + " must be a non-negative integer");
  }
  return static_cast<std::uint32_t>(std::min<std::int64_t>(n, max));
}

void owner_xml(XmlWriter& w, const std::string& owner) {
  w.open("Owner");
  w.element("ID", owner);
  w.element("DisplayName", owner);
  w.close();
}

}  // namespace

Status S3Service::Impl::check_bucket_access(const Ctx& c) {
  auto b = store->head_bucket(c.bucket);
  if (!b.ok()) return b.status();
  if (!b->owner.empty() && b->owner != c.auth.access_key) {
    return Status(Errc::access_denied, "Access Denied: the bucket belongs to another user");
  }
  return Status::Ok();
}

Task<void> S3Service::Impl::list_buckets(Ctx& c) {
  auto all = store->list_buckets();
  if (!all.ok()) co_return co_await send_error(c, all.status());
  XmlWriter w;
  w.open("ListAllMyBucketsResult", kS3Xmlns);
  owner_xml(w, c.auth.access_key);
  w.open("Buckets");
  for (const auto& b : *all) {
    if (!b.owner.empty() && b.owner != c.auth.access_key) continue;
    w.open("Bucket");
    w.element("Name", b.name);
    w.element("CreationDate", iso8601_ms(from_ns(b.ctime_ns)));
    w.close();
  }
  w.close();
  w.close();
  co_await send_xml(c, bhttp::status::ok, w.finish());
}

Task<void> S3Service::Impl::create_bucket(Ctx& c) {
  if (auto st = validate_bucket_name(c.bucket); !st.ok()) co_return co_await send_error(c, st);
  auto body = co_await c.ex.read_body_string(limits::xml_body_bytes_max);
  if (!body.ok()) co_return co_await send_error(c, body.status());
  auto location = parse_create_bucket(*body);
  if (!location.ok()) co_return co_await send_error(c, location.status());
  if (!location->empty() && *location != opts.region &&
      !(opts.region == "us-east-1" && *location == "US")) {
    co_return co_await send_error(
        c, Status(Errc::invalid_argument /* IllegalLocationConstraintException in AWS */,
                  "The location constraint '" + *location + "' does not match this region '" +
                      opts.region + "'"));
  }
  storage::BucketInfo info;
  info.name = c.bucket;
  info.ctime_ns = now_ns();
  info.owner = c.auth.access_key;
  info.region = opts.region;
  auto st = store->create_bucket(info);
  if (!st.ok()) co_return co_await send_error(c, st);
  http::Fields f;
  f.set(bhttp::field::location, "/" + c.bucket);
  co_await send_empty(c, bhttp::status::ok, std::move(f));
}

Task<void> S3Service::Impl::delete_bucket(Ctx& c) {
  if (auto st = check_bucket_access(c); !st.ok()) co_return co_await send_error(c, st);
  if (auto st = store->delete_bucket(c.bucket); !st.ok()) co_return co_await send_error(c, st);
  co_await send_empty(c, bhttp::status::no_content);
}

Task<void> S3Service::Impl::head_bucket(Ctx& c) {
  if (auto st = check_bucket_access(c); !st.ok()) co_return co_await send_error(c, st);
  http::Fields f = base_headers(c);
  f.set("x-amz-bucket-region", opts.region);
  co_await c.ex.send_header(bhttp::status::ok, std::move(f), 0);
}

Task<void> S3Service::Impl::get_bucket_location(Ctx& c) {
  if (auto st = check_bucket_access(c); !st.ok()) co_return co_await send_error(c, st);
  // AWS answers an empty constraint for us-east-1.
  std::string xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<LocationConstraint xmlns=\"";
  xml += kS3Xmlns;
  xml += "\">";
  xml += xml_escape(opts.region == "us-east-1" ? "" : opts.region);
  xml += "</LocationConstraint>";
  co_await send_xml(c, bhttp::status::ok, std::move(xml));
}

Task<void> S3Service::Impl::get_bucket_versioning(Ctx& c) {
  if (auto st = check_bucket_access(c); !st.ok()) co_return co_await send_error(c, st);
  XmlWriter w;
  w.open("VersioningConfiguration", kS3Xmlns);
  w.close();
  co_await send_xml(c, bhttp::status::ok, w.finish());
}

Task<void> S3Service::Impl::list_objects(Ctx& c, int version) {
  if (auto st = check_bucket_access(c); !st.ok()) co_return co_await send_error(c, st);
  storage::ListQuery q;
  q.prefix = c.query_value("prefix").value_or("");
  q.delimiter = c.query_value("delimiter").value_or("");
  auto max_keys = parse_max(c.query_value("max-keys"), "max-keys", limits::list_keys_max);
  if (!max_keys.ok()) co_return co_await send_error(c, max_keys.status());
  q.max_keys = *max_keys;
  auto encoding = c.query_value("encoding-type");
  if (encoding && *encoding != "url") {
    co_return co_await send_error(
        c, Status(Errc::invalid_argument, "Invalid Encoding Method specified in Request"));
  }
  const bool url = encoding.has_value();
  auto enc = [url](std::string_view s) { return url ? uri_encode(s, false) : std::string(s); };

  std::optional<std::string> continuation;
  std::string start_after, marker, key_marker;
  if (version == 2) {
    continuation = c.query_value("continuation-token");
    start_after = c.query_value("start-after").value_or("");
    if (continuation) {
      auto decoded = base64url_decode(*continuation);
      if (!decoded) {
        co_return co_await send_error(
            c, Status(Errc::invalid_argument, "The continuation token provided is incorrect"));
      }
      q.start_after = *decoded;
    } else {
      q.start_after = start_after;
    }
  } else if (version == 1) {
    marker = c.query_value("marker").value_or("");
    q.start_after = marker;
  } else {
    key_marker = c.query_value("key-marker").value_or("");
    q.start_after = key_marker;
  }

  storage::ListResult res;
  if (q.max_keys > 0) {
    auto r = store->list_objects(c.bucket, q);
    if (!r.ok()) co_return co_await send_error(c, r.status());
    res = std::move(*r);
  }

  XmlWriter w;
  const bool fetch_owner = version != 2 || c.query_value("fetch-owner") == "true";
  w.open(version == 0 ? "ListVersionsResult" : "ListBucketResult", kS3Xmlns);
  w.element("Name", c.bucket);
  w.element("Prefix", enc(q.prefix));
  if (version == 2) {
    if (continuation) w.element("ContinuationToken", *continuation);
    if (!start_after.empty()) w.element("StartAfter", enc(start_after));
    w.element("KeyCount", std::to_string(res.objects.size() + res.common_prefixes.size()));
  } else if (version == 1) {
    w.element("Marker", enc(marker));
  } else {
    w.element("KeyMarker", enc(key_marker));
    w.element("VersionIdMarker", "");
  }
  w.element("MaxKeys", std::to_string(q.max_keys));
  if (!q.delimiter.empty()) w.element("Delimiter", enc(q.delimiter));
  if (url) w.element("EncodingType", "url");
  w.element("IsTruncated", res.truncated ? "true" : "false");
  if (res.truncated) {
    if (version == 2) {
      w.element("NextContinuationToken", base64url_encode(res.next_marker));
    } else if (version == 1) {
      // AWS returns NextMarker only with a delimiter; returning it always is allowed and helps.
      w.element("NextMarker", enc(res.next_marker));
    } else {
      w.element("NextKeyMarker", enc(res.next_marker));
      w.element("NextVersionIdMarker", "null");
    }
  }
  for (const auto& o : res.objects) {
    w.open(version == 0 ? "Version" : "Contents");
    w.element("Key", enc(o.key));
    if (version == 0) {
      w.element("VersionId", "null");
      w.element("IsLatest", "true");
    }
    w.element("LastModified", iso8601_ms(from_ns(o.mtime_ns)));
    w.element("ETag", quote_etag(o.etag));
    for (const auto& [algo, value] : o.checksums) w.element("ChecksumAlgorithm", algo);
    w.element("Size", std::to_string(o.size));
    w.element("StorageClass", "STANDARD");
    if (fetch_owner) owner_xml(w, o.owner.empty() ? c.auth.access_key : o.owner);
    w.close();
  }
  for (const auto& p : res.common_prefixes) {
    w.open("CommonPrefixes");
    w.element("Prefix", enc(p));
    w.close();
  }
  w.close();
  co_await send_xml(c, bhttp::status::ok, w.finish());
}

Task<void> S3Service::Impl::list_uploads(Ctx& c) {
  if (auto st = check_bucket_access(c); !st.ok()) co_return co_await send_error(c, st);
  storage::ListUploadsQuery q;
  q.prefix = c.query_value("prefix").value_or("");
  q.delimiter = c.query_value("delimiter").value_or("");
  q.key_marker = c.query_value("key-marker").value_or("");
  q.upload_id_marker = c.query_value("upload-id-marker").value_or("");
  auto max = parse_max(c.query_value("max-uploads"), "max-uploads", limits::list_keys_max);
  if (!max.ok()) co_return co_await send_error(c, max.status());
  q.max_uploads = *max;
  const bool url = c.query_value("encoding-type") == "url";
  auto enc = [url](std::string_view s) { return url ? uri_encode(s, false) : std::string(s); };
  storage::ListUploadsResult res;
  if (q.max_uploads > 0) {
    auto r = store->list_uploads(c.bucket, q);
    if (!r.ok()) co_return co_await send_error(c, r.status());
    res = std::move(*r);
  }
  XmlWriter w;
  w.open("ListMultipartUploadsResult", kS3Xmlns);
  w.element("Bucket", c.bucket);
  w.element("KeyMarker", enc(q.key_marker));
  w.element("UploadIdMarker", q.upload_id_marker);
  if (res.truncated) {
    w.element("NextKeyMarker", enc(res.next_key_marker));
    w.element("NextUploadIdMarker", res.next_upload_id_marker);
  }
  if (!q.prefix.empty()) w.element("Prefix", enc(q.prefix));
  if (!q.delimiter.empty()) w.element("Delimiter", enc(q.delimiter));
  w.element("MaxUploads", std::to_string(q.max_uploads));
  if (url) w.element("EncodingType", "url");
  w.element("IsTruncated", res.truncated ? "true" : "false");
  for (const auto& u : res.uploads) {
    w.open("Upload");
    w.element("Key", enc(u.key));
    w.element("UploadId", u.upload_id);
    w.open("Initiator");
    w.element("ID", u.meta_template.owner);
    w.element("DisplayName", u.meta_template.owner);
    w.close();
    owner_xml(w, u.meta_template.owner);
    w.element("StorageClass", "STANDARD");
    w.element("Initiated", iso8601_ms(from_ns(u.initiated_ns)));
    if (!u.checksum_algorithm.empty()) w.element("ChecksumAlgorithm", u.checksum_algorithm);
    w.close();
  }
  for (const auto& p : res.common_prefixes) {
    w.open("CommonPrefixes");
    w.element("Prefix", enc(p));
    w.close();
  }
  w.close();
  co_await send_xml(c, bhttp::status::ok, w.finish());
}

Task<void> S3Service::Impl::delete_objects(Ctx& c) {
  if (auto st = check_bucket_access(c); !st.ok()) co_return co_await send_error(c, st);
  auto body = co_await c.ex.read_body_string(limits::xml_body_bytes_max);
  if (!body.ok()) co_return co_await send_error(c, body.status());
  // Content-MD5 (or an x-amz-checksum-*) is required by AWS; verify it when present.
  if (auto md5 = c.header("content-md5")) {
    Md5 h;
    h.update(body->data(), body->size());
    if (base64_encode(h.raw()) != *md5) {
      co_return co_await send_error(
          c, Status(Errc::bad_digest,
                    "The Content-MD5 you specified did not match what we received."));
    }
  }
  auto parsed = parse_delete_objects(*body);
  if (!parsed.ok()) co_return co_await send_error(c, parsed.status());
  XmlWriter w;
  w.open("DeleteResult", kS3Xmlns);
  for (const auto& e : parsed->objects) {
    Status st = validate_object_key(e.key);
    if (st.ok()) st = store->delete_object(c.bucket, e.key);
    if (st.ok()) {
      if (!parsed->quiet) {
        w.open("Deleted");
        w.element("Key", e.key);
        if (!e.version_id.empty()) w.element("VersionId", e.version_id);
        w.close();
      }
    } else {
      w.open("Error");
      w.element("Key", e.key);
      w.element("Code", s3_code(st.code()));
      w.element("Message", st.message());
      w.close();
    }
  }
  w.close();
  co_await send_xml(c, bhttp::status::ok, w.finish());
}

}  // namespace objdirect::s3
