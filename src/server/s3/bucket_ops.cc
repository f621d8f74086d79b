// Bucket operations: ListBuckets, Create/Delete/HeadBucket, GetBucketLocation/Versioning,
// ListObjects (v1, v2, versions), ListMultipartUploads and DeleteObjects.
#include <algorithm>
#include <charconv>
#include <chrono>

#include "common/checksum.hpp"
#include "common/limits.hpp"
#include "common/time.hpp"
#include "common/uri.hpp"
#include "s3/documents.hpp"
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

}  // namespace

Task<void> S3Service::Impl::list_buckets(Ctx& c) {
  auto all = store->list_buckets();
  if (!all.ok()) co_return co_await send_error(c, all.status());
  // AWS pagination: max-buckets (1..limits::list_buckets_max), an opaque continuation-token (here
  // the base64url of the last name returned), and prefix, echoed as <Prefix> when given.
  std::uint32_t max_buckets = limits::list_buckets_max;
  if (auto m = c.query_value("max-buckets")) {
    std::uint64_t n = 0;
    auto [p, ec] = std::from_chars(m->data(), m->data() + m->size(), n);
    if (ec != std::errc() || p != m->data() + m->size() || n < 1 || n > limits::list_buckets_max) {
      co_return co_await send_error(
          c, Status(Errc::invalid_argument, "max-buckets must be an integer between 1 and " +
                                                std::to_string(limits::list_buckets_max)));
    }
    max_buckets = static_cast<std::uint32_t>(n);
  }
  std::string after;
  if (auto t = c.query_value("continuation-token")) {
    auto decoded = base64url_decode(*t);
    if (!decoded || decoded->empty()) {
      co_return co_await send_error(
          c, Status(Errc::invalid_argument, "The continuation token provided is incorrect"));
    }
    after = std::move(*decoded);
  }
  const std::optional<std::string> prefix = c.query_value("prefix");
  std::vector<const storage::BucketInfo*> mine;
  for (const auto& b : *all) {
    if (!b.owner.empty() && b.owner != c.auth.access_key) continue;
    if (!after.empty() && b.name <= after) continue;
    if (prefix && !b.name.starts_with(*prefix)) continue;
    mine.push_back(&b);
  }
  std::sort(mine.begin(), mine.end(), [](auto* x, auto* y) { return x->name < y->name; });
  ListBucketsResult doc;
  doc.owner = {c.auth.access_key, c.auth.access_key};
  doc.prefix = prefix;
  for (const storage::BucketInfo* b : mine) {
    if (doc.buckets.size() == max_buckets) {
      doc.continuation_token = base64url_encode(doc.buckets.back().name);
      break;
    }
    doc.buckets.push_back({b->name, iso8601_ms(from_ns(b->ctime_ns))});
  }
  co_await send_xml(c, bhttp::status::ok, encode_list_buckets(doc));
}

Task<void> S3Service::Impl::create_bucket(Ctx& c) {
  if (c.auth.anonymous)
    co_return co_await send_error(c, Status(Errc::access_denied, "Access Denied"));
  if (auto st = validate_bucket_name(c.bucket); !st.ok()) co_return co_await send_error(c, st);
  auto body = co_await c.ex.read_body_string(limits::xml_body_bytes_max);
  if (!body.ok()) co_return co_await send_error(c, body.status());
  auto location = parse_create_bucket(*body);
  if (!location.ok()) co_return co_await send_error(c, location.status());
  // AWS: us-east-1 is the region of a bucket created without a constraint, so naming it is
  // refused; any other constraint must be this endpoint's region ("US" is the legacy spelling of
  // us-east-1 that older clients send). Both answer 400 InvalidLocationConstraint.
  if (*location == "us-east-1") {
    co_return co_await send_error(
        c, Status(Errc::invalid_location_constraint,
                  "The specified location-constraint is not valid (us-east-1 is the default: "
                  "send no LocationConstraint)"));
  }
  if (!location->empty() && *location != opts.region &&
      !(opts.region == "us-east-1" && *location == "US")) {
    co_return co_await send_error(
        c, Status(Errc::invalid_location_constraint,
                  "The specified location-constraint is not valid: '" + *location +
                      "' is not this endpoint's region '" + opts.region + "'"));
  }
  storage::BucketInfo info;
  info.name = c.bucket;
  info.ctime_ns = now_ns();
  info.owner = c.auth.access_key;
  info.region = opts.region;
  auto st = store->create_bucket(info);
  // AWS keeps its legacy answer in us-east-1: the owner re-creating its bucket gets 200 and the
  // bucket, contents included, stays as it was. Every other region answers 409
  // BucketAlreadyOwnedByYou.
  if (st.code() == Errc::bucket_already_owned_by_you && opts.region == "us-east-1") {
    st = Status::Ok();
  }
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
  (void)co_await c.ex.send_header(bhttp::status::ok, std::move(f), 0);
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
  auto doc = store->bucket_config(c.bucket, storage::versioning_config_name);
  if (!doc.ok()) co_return co_await send_error(c, doc.status());
  // A bucket never versioned answers an empty configuration, as AWS does.
  VersioningConfiguration v;
  if (*doc) v.status = **doc;
  co_await send_xml(c, bhttp::status::ok, encode_versioning(v));
}

Task<void> S3Service::Impl::put_bucket_versioning(Ctx& c) {
  if (auto st = check_bucket_access(c); !st.ok()) co_return co_await send_error(c, st);
  auto body = co_await c.ex.read_body_string(limits::xml_body_bytes_max);
  if (!body.ok()) co_return co_await send_error(c, body.status());
  auto v = decode_versioning(*body);
  if (!v.ok()) co_return co_await send_error(c, v.status());
  if (!store->supports_versioning()) {
    co_return co_await send_error(
        c, Status(Errc::not_implemented, "This server's storage backend does not keep versions"));
  }
  // MFA Delete needs the root account's MFA device (x-amz-mfa), which this server has none of:
  // refused as AWS refuses a request without a valid x-amz-mfa. Disabled is what it is anyway.
  if (v->mfa_delete == "Enabled" || c.header("x-amz-mfa")) {
    co_return co_await send_error(
        c, Status(Errc::invalid_request, "MFA Delete is not supported by this server"));
  }
  // An empty configuration changes nothing (AWS: a bucket never goes back to unversioned).
  if (v->status.empty()) co_return co_await send_empty(c, bhttp::status::ok);
  auto st = store->set_bucket_config(c.bucket, storage::versioning_config_name, v->status);
  if (!st.ok()) co_return co_await send_error(c, st);
  co_await send_empty(c, bhttp::status::ok);
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

  if (version == 0 && store->supports_versioning()) {
    co_return co_await list_versions(c, q, key_marker, url);
  }
  storage::ListResult res;
  if (q.max_keys > 0) {
    auto r = store->list_objects(c.bucket, q);
    if (!r.ok()) co_return co_await send_error(c, r.status());
    res = std::move(*r);
  }

  const bool fetch_owner = version != 2 || c.query_value("fetch-owner") == "true";
  ListObjectsResult doc;
  doc.kind = version == 0 ? ListKind::versions : version == 1 ? ListKind::v1 : ListKind::v2;
  doc.name = c.bucket;
  // AWS echoes a v1 listing's Prefix unencoded even with encoding-type=url; v2 and
  // ListObjectVersions encode it.
  doc.prefix = version == 1 ? q.prefix : enc(q.prefix);
  doc.continuation_token = continuation;
  doc.start_after = enc(start_after);
  doc.key_count = res.objects.size() + res.common_prefixes.size();
  doc.marker = enc(marker);
  doc.key_marker = enc(key_marker);
  doc.max_keys = q.max_keys;
  doc.delimiter = enc(q.delimiter);
  if (url) doc.encoding_type = "url";
  doc.is_truncated = res.truncated;
  if (res.truncated) {
    if (version == 2) {
      doc.next_continuation_token = base64url_encode(res.next_marker);
    } else if (version == 1) {
      // AWS returns NextMarker only with a delimiter; returning it always is allowed and helps.
      doc.next_marker = enc(res.next_marker);
    } else {
      doc.next_key_marker = enc(res.next_marker);
      doc.next_version_id_marker = "null";
    }
  }
  doc.objects.reserve(res.objects.size());
  for (const auto& o : res.objects) {
    ObjectEntry e;
    e.key = enc(o.key);
    if (version == 0) {
      e.version_id = "null";
      e.is_latest = true;
    }
    e.last_modified = iso8601_ms(from_ns(o.mtime_ns));
    e.etag = o.etag;
    for (const auto& [algo, value] : o.checksums) e.checksum_algorithms.push_back(algo);
    e.size = o.size;
    e.storage_class = "STANDARD";
    if (fetch_owner) {
      const std::string& owner = o.owner.empty() ? c.auth.access_key : o.owner;
      e.owner = Owner{owner, owner};
    }
    doc.objects.push_back(std::move(e));
  }
  for (const auto& p : res.common_prefixes) doc.common_prefixes.push_back(enc(p));
  co_await send_xml(c, bhttp::status::ok, encode_list_objects(doc));
}

Task<void> S3Service::Impl::list_versions(Ctx& c, const storage::ListQuery& lq,
                                          const std::string& key_marker, bool url) {
  auto enc = [url](std::string_view s) { return url ? uri_encode(s, false) : std::string(s); };
  storage::ListVersionsQuery q;
  q.prefix = lq.prefix;
  q.delimiter = lq.delimiter;
  q.max_keys = lq.max_keys;
  q.key_marker = key_marker;
  q.version_id_marker = c.query_value("version-id-marker").value_or("");
  // AWS: a version-id-marker needs a key-marker.
  if (!q.version_id_marker.empty() && q.key_marker.empty()) {
    co_return co_await send_error(
        c, Status(Errc::invalid_argument,
                  "A version-id marker cannot be specified without a key marker."));
  }
  storage::ListVersionsResult res;
  if (q.max_keys > 0) {
    auto r = store->list_object_versions(c.bucket, q);
    if (!r.ok()) co_return co_await send_error(c, r.status());
    res = std::move(*r);
  }
  ListObjectsResult doc;
  doc.kind = ListKind::versions;
  doc.name = c.bucket;
  doc.prefix = enc(q.prefix);
  doc.key_marker = enc(q.key_marker);
  doc.version_id_marker = q.version_id_marker;
  doc.max_keys = q.max_keys;
  doc.delimiter = enc(q.delimiter);
  if (url) doc.encoding_type = "url";
  doc.is_truncated = res.truncated;
  if (res.truncated) {
    doc.next_key_marker = enc(res.next_key_marker);
    doc.next_version_id_marker = res.next_version_id_marker;
  }
  doc.objects.reserve(res.versions.size());
  for (const auto& v : res.versions) {
    const storage::ObjectMeta& o = v.meta;
    ObjectEntry e;
    e.key = enc(o.key);
    e.version_id = o.version_id;
    e.is_latest = v.is_latest;
    e.delete_marker = o.delete_marker;
    e.last_modified = iso8601_ms(from_ns(o.mtime_ns));
    if (!o.delete_marker) {
      e.etag = o.etag;
      for (const auto& [algo, value] : o.checksums) e.checksum_algorithms.push_back(algo);
      e.size = o.size;
      e.storage_class = "STANDARD";
    }
    const std::string& owner = o.owner.empty() ? c.auth.access_key : o.owner;
    e.owner = Owner{owner, owner};
    doc.objects.push_back(std::move(e));
  }
  for (const auto& p : res.common_prefixes) doc.common_prefixes.push_back(enc(p));
  co_await send_xml(c, bhttp::status::ok, encode_list_objects(doc));
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
  ListUploadsResult doc;
  doc.bucket = c.bucket;
  doc.key_marker = enc(q.key_marker);
  doc.upload_id_marker = q.upload_id_marker;
  if (res.truncated) {
    doc.next_key_marker = enc(res.next_key_marker);
    doc.next_upload_id_marker = res.next_upload_id_marker;
  }
  doc.prefix = enc(q.prefix);
  doc.delimiter = enc(q.delimiter);
  doc.max_uploads = q.max_uploads;
  if (url) doc.encoding_type = "url";
  doc.is_truncated = res.truncated;
  for (const auto& u : res.uploads) {
    const std::string& owner = u.meta_template.owner;
    doc.uploads.push_back({enc(u.key),
                           u.upload_id,
                           {owner, owner},
                           {owner, owner},
                           "STANDARD",
                           iso8601_ms(from_ns(u.initiated_ns)),
                           u.checksum_algorithm});
  }
  for (const auto& p : res.common_prefixes) doc.common_prefixes.push_back(enc(p));
  co_await send_xml(c, bhttp::status::ok, encode_list_uploads(doc));
}

Task<void> S3Service::Impl::delete_objects(Ctx& c) {
  // The bucket must exist; each key is authorised below (policies name keys, not the bucket).
  if (auto b = store->head_bucket(c.bucket); !b.ok()) co_return co_await send_error(c, b.status());
  auto body = co_await c.ex.read_body_string(limits::xml_body_bytes_max);
  if (!body.ok()) co_return co_await send_error(c, body.status());
  if (auto st = check_content_md5(c, *body); !st.ok()) co_return co_await send_error(c, st);
  auto parsed = parse_delete_objects(*body);
  if (!parsed.ok()) co_return co_await send_error(c, parsed.status());
  auto bucket_info = store->head_bucket(c.bucket);
  if (!bucket_info.ok()) co_return co_await send_error(c, bucket_info.status());
  DeleteResult doc;
  for (const auto& e : parsed->objects) {
    Status st = validate_object_key(e.key);
    // Each key is authorised on its own (a policy may allow or deny some of them).
    const bool by_version = !e.version_id.empty();
    if (st.ok()) {
      st = authorize(c, *bucket_info, e.key,
                     by_version ? "s3:DeleteObjectVersion" : "s3:DeleteObject");
    }
    storage::DeleteOutcome out;
    if (st.ok() && store->supports_versioning()) {
      auto r = store->delete_object_version(c.bucket, e.key, e.version_id);
      if (r.ok()) {
        out = std::move(*r);
      } else {
        st = r.status();
      }
    } else if (st.ok()) {
      if (by_version && e.version_id != "null") {
        st = Status(Errc::not_implemented, "This server's storage backend does not keep versions");
      } else {
        st = store->delete_object(c.bucket, e.key);
      }
      out.version_id = e.version_id;
    }
    if (st.ok()) {
      // AWS: a marker written says DeleteMarker and DeleteMarkerVersionId; a version removed
      // by id says its VersionId (and DeleteMarker when it was one).
      DeletedEntry d{e.key, e.version_id, out.delete_marker, ""};
      if (!by_version && out.delete_marker) d.delete_marker_version_id = out.version_id;
      if (!parsed->quiet) doc.deleted.push_back(std::move(d));
    } else {
      doc.errors.push_back({e.key, std::string(s3_code(st.code())), st.message()});
    }
  }
  co_await send_xml(c, bhttp::status::ok, encode_delete_result(doc));
}

}  // namespace objdirect::s3
