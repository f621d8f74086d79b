// The gateway's object versions (s3_internal.hpp), passed through to the upstream: versionId on
// HEAD, GET and DELETE, the version ids and delete markers the upstream answers, and
// ListObjectVersions. The upstream keeps the versions and names them; the gateway keeps nothing.
#include <algorithm>

#include "common/limits.hpp"
#include "s3/conditional.hpp"
#include "storage/s3/s3_internal.hpp"

namespace objdirect::storage::s3gw {

namespace {

// A version-addressed request ("" = the latest: no versionId).
Request version_request(std::string method, std::string_view bucket, std::string_view key,
                        std::string_view version_id) {
  Request r = object_request(std::move(method), bucket, key);
  if (!version_id.empty()) r.query = {{"versionId", std::string(version_id)}};
  return r;
}

}  // namespace

Result<ObjectMeta> S3Store::head_object_version(std::string_view bucket, std::string_view key,
                                                std::string_view version_id) {
  return head_version(bucket, key, version_id, nullptr);
}

Result<ObjectMeta> S3Store::head_version(std::string_view bucket, std::string_view key,
                                         std::string_view version_id, bool* latest_is_null,
                                         const SseCKeyHeaders& sse) {
  OBJDIRECT_RETURN_IF_ERROR(versioning_known_missing());
  OBJDIRECT_RETURN_IF_ERROR(sse_c_known_missing(sse));
  Request r = version_request("HEAD", bucket, key, version_id);
  r.headers.emplace_back("x-amz-checksum-mode", "ENABLED");
  add_sse_c_headers(r.headers, sse);
  const std::string what = "HEAD " + core_->target(r);
  auto resp = core_->perform(std::move(r));
  if (!resp.ok()) return resp.status();
  if (resp->status >= 200 && resp->status <= 299) return meta_from_head(key, *resp);
  // A delete marker: S3 answers 404 (the latest) or 405 (by id) with x-amz-delete-marker.
  if ((resp->status == 404 || resp->status == 405) &&
      resp->header("x-amz-delete-marker").value_or("") == "true") {
    ObjectMeta m;
    m.key = std::string(key);
    m.delete_marker = true;
    m.version_id = resp->header("x-amz-version-id").value_or(std::string(version_id));
    if (auto lm = resp->header("last-modified")) {
      if (auto t = parse_http_date(*lm)) m.mtime_ns = ns_of(*t);
    }
    return m;
  }
  Status st = upstream_error(*resp, what);
  if (resp->status == 404) {
    // A HEAD has no error body: a missing bucket, key or version reads alike.
    auto b = head_bucket(bucket);
    if (!b.ok()) return b.status();
    // radosgw 16 answers the HEAD of a delete marker named by id with a plain 404: the key's
    // entries in ListObjectVersions say whether it is one (one page, on this error path only).
    // Not for the latest: every GET or HEAD of a missing key would pay a listing (a backup tool
    // through the gateway in front of moto ran 4.7x longer), so there the gateway answers as
    // radosgw does, 404 NoSuchKey without x-amz-delete-marker (docs/scale-out.md).
    ListVersionsQuery q;
    q.prefix = std::string(key);
    q.max_keys = limits::list_keys_max;
    if (version_id.empty()) {
      return Status(Errc::no_such_key, "The specified key does not exist (upstream)");
    }
    if (auto l = list_object_versions(bucket, q); l.ok()) {
      for (auto& v : l->versions) {
        if (v.meta.key != key || !v.meta.delete_marker) continue;
        if (version_id.empty() ? v.is_latest : v.meta.version_id == version_id)
          return std::move(v.meta);
      }
    }
    if (!version_id.empty())
      return Status(Errc::no_such_version,
                    "The specified version does not exist (upstream: " + st.message() + ")");
    return Status(Errc::no_such_key, "The specified key does not exist (upstream)");
  }
  if (resp->status == 400 && version_id != "null") {
    // A HEAD's 400 has no body: an SSE-C version without its key (or a key for a version without
    // SSE-C) reads as a bad version id. A GET of the first byte brings the upstream's error
    // document (InvalidRequest there), on this error path only.
    Request g = version_request("GET", bucket, key, version_id);
    g.headers.emplace_back("range", "bytes=0-0");
    add_sse_c_headers(g.headers, sse);
    auto detail = core_->call(std::move(g));
    if (!detail.ok() && detail.code() == Errc::invalid_request) return detail.status();
  }
  if (resp->status == 400 && version_id == "null") {
    // moto 5.2 refuses versionId=null (400) on a key written while versioning was off, whose
    // only version is the null one (clients such as rclone ask for it by that id after an
    // upload). The latest version, when it carries no version id, is the null version.
    auto latest = head_version(bucket, key, "", nullptr, sse);
    if (latest.ok() && !latest->delete_marker &&
        (latest->version_id.empty() || latest->version_id == "null")) {
      latest->version_id = "null";
      if (latest_is_null != nullptr) *latest_is_null = true;
      return latest;
    }
    return Status(Errc::no_such_version,
                  "The specified version does not exist (upstream: " + st.message() + ")");
  }
  if (resp->status == 400 && !version_id.empty())
    return Status(Errc::invalid_argument,
                  "Invalid version id specified (upstream: " + st.message() + ")");
  return note_sse_c(sse, note_versioning(st));
}

Result<std::unique_ptr<ObjectReader>> S3Store::open_object_version(std::string_view bucket,
                                                                   std::string_view key,
                                                                   std::string_view version_id) {
  return open_object_sse(bucket, key, version_id, SseCKeyHeaders());
}

Result<DeleteOutcome> S3Store::delete_object_version(std::string_view bucket, std::string_view key,
                                                     std::string_view version_id) {
  if (!version_id.empty()) OBJDIRECT_RETURN_IF_ERROR(versioning_known_missing());
  auto resp = core_->call(version_request("DELETE", bucket, key, version_id));
  if (!resp.ok()) return version_id.empty() ? resp.status() : note_versioning(resp.status());
  DeleteOutcome out;
  out.version_id = resp->header("x-amz-version-id").value_or("");
  out.delete_marker = resp->header("x-amz-delete-marker").value_or("") == "true";
  return out;
}

Result<ListVersionsResult> S3Store::list_object_versions(std::string_view bucket,
                                                         const ListVersionsQuery& q) {
  OBJDIRECT_RETURN_IF_ERROR(versioning_known_missing());
  Request r;
  r.bucket = std::string(bucket);
  r.query = {{"versions", ""}, {"encoding-type", "url"}};
  r.query.emplace_back("max-keys",
                       std::to_string(std::min<std::uint32_t>(q.max_keys, limits::list_keys_max)));
  if (!q.prefix.empty()) r.query.emplace_back("prefix", q.prefix);
  if (!q.delimiter.empty()) r.query.emplace_back("delimiter", q.delimiter);
  if (!q.key_marker.empty()) r.query.emplace_back("key-marker", q.key_marker);
  if (!q.version_id_marker.empty()) r.query.emplace_back("version-id-marker", q.version_id_marker);
  // radosgw 16 starts a key-marker-only listing at that key, not after it: its entries are
  // dropped here (a page may then hold fewer entries, which S3 allows).
  const bool skip_marker_key = !q.key_marker.empty() && q.version_id_marker.empty();
  r.xml_reply = true;
  auto resp = core_->call(std::move(r));
  if (!resp.ok()) return note_versioning(resp.status());
  auto doc = decode_reply(*resp, "ListObjectVersions", objdirect::s3::decode_list_objects);
  if (!doc.ok()) return doc.status();
  (void)note_versioning(Status::Ok());
  const bool url = doc->encoding_type == "url";
  ListVersionsResult out;
  for (auto& e : doc->objects) {
    ObjectVersion v;
    v.meta.key = decoded(e.key, url);
    if (skip_marker_key && v.meta.key <= q.key_marker) continue;
    v.meta.size = e.size;
    v.meta.etag = std::move(e.etag);
    v.meta.version_id = std::move(e.version_id);
    v.meta.delete_marker = e.delete_marker;
    if (auto t = parse_iso8601(e.last_modified)) v.meta.mtime_ns = ns_of(*t);
    v.is_latest = e.is_latest;
    out.versions.push_back(std::move(v));
  }
  // Key ascending, then newest first, markers among versions (S3's order). moto 5.2 lists a
  // page's versions first and its delete markers after them: each key's entries are put back in
  // order by time (the latest first); an upstream already in order keeps it (stable).
  std::stable_sort(out.versions.begin(), out.versions.end(),
                   [](const ObjectVersion& a, const ObjectVersion& b) {
                     if (a.meta.key != b.meta.key) return a.meta.key < b.meta.key;
                     if (a.is_latest != b.is_latest) return a.is_latest;
                     return a.meta.mtime_ns > b.meta.mtime_ns;
                   });
  for (const auto& p : doc->common_prefixes) out.common_prefixes.push_back(decoded(p, url));
  out.truncated = doc->is_truncated;
  if (out.truncated) {
    out.next_key_marker = decoded(doc->next_key_marker, url);
    out.next_version_id_marker = doc->next_version_id_marker;
  }
  return out;
}

}  // namespace objdirect::storage::s3gw
