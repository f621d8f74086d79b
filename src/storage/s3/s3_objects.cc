// The gateway's objects (s3_internal.hpp): PutObject (or a parallel multipart upload), HEAD,
// DELETE, CopyObject onto itself, ListObjectsV2.
#include <algorithm>

#include "common/assert.hpp"
#include "common/limits.hpp"
#include "common/uri.hpp"
#include "s3/conditional.hpp"
#include "s3/tagging.hpp"
#include "storage/s3/s3_internal.hpp"
#include "storage/s3/s3_spool.hpp"

namespace objdirect::storage::s3gw {

Result<ObjectMeta> S3Store::commit_object(std::string_view bucket, ObjectMeta meta,
                                          std::unique_ptr<BlobWriter> data,
                                          const WriteCondition& cond) {
  return commit_object_sse(bucket, std::move(meta), std::move(data), cond, SseCKeyHeaders());
}

Result<ObjectMeta> S3Store::commit_object_sse(std::string_view bucket, ObjectMeta meta,
                                              std::unique_ptr<BlobWriter> data,
                                              const WriteCondition& cond,
                                              const SseCKeyHeaders& sse) {
  OBJDIRECT_RETURN_IF_ERROR(sse_c_known_missing(sse));
  auto* w = dynamic_cast<SpoolWriter*>(data.get());
  OBJDIRECT_ASSERT(w != nullptr && w->core() == core_,
                   "commit_object: a writer is committed to the store that began it");
  if (meta.size != w->size()) return Status(Errc::internal, "commit_object: size mismatch");
  const bool large = meta.size > core_->opts.multipart_threshold_bytes;
  // The condition is always forwarded; where the upstream ignores it, the gateway checks it
  // first, holding the key's lock across the check and the write.
  std::unique_lock<std::mutex> key_lock;
  if (cond.kind != WriteCondition::Kind::none && !upstream_checks(bucket, large)) {
    key_lock = std::unique_lock(core_->key_lock(bucket, meta.key));
    OBJDIRECT_RETURN_IF_ERROR(check_condition(bucket, meta.key, cond));
  }
  if (!meta.tags.empty()) OBJDIRECT_RETURN_IF_ERROR(tagging_available(bucket));
  std::string version_id;
  Result<std::string> etag = large ? multipart_put(bucket, meta, *w, cond, &version_id, sse)
                                   : single_put(bucket, meta, *w, cond, &version_id, sse);
  if (etag.code() == Errc::precondition_failed &&
      cond.kind == WriteCondition::Kind::etag_must_match) {
    // S3 answers If-Match on a missing key 404 NoSuchKey; radosgw 16 answers 412. On that error
    // path only, a HEAD tells the two apart (docs/scale-out.md, "Verified upstreams").
    if (auto h = head_object(bucket, meta.key); h.code() == Errc::no_such_key) return h.status();
  }
  if (!etag.ok()) return etag.status();
  meta.version_id = std::move(version_id);
  meta.delete_marker = false;
  meta.etag = *etag;
  meta.mtime_ns = now_ns();
  meta.parts.clear();
  meta.sse = SseCustomer();
  if (sse.present()) {
    meta.sse.algorithm = sse.algorithm;  // the upstream confirmed them (sse_c_confirmed)
    meta.sse.key_md5 = sse.key_md5;
  }
  return meta;
}

Result<std::string> S3Store::single_put(std::string_view bucket, const ObjectMeta& meta,
                                        const SpoolWriter& w, const WriteCondition& cond,
                                        std::string* version_id, const SseCKeyHeaders& sse) {
  Request r = object_request("PUT", bucket, meta.key);
  r.body = w.body(0, w.size());
  add_meta_headers(r.headers, meta);
  add_sse_c_headers(r.headers, sse);
  add_checksum_headers(r.headers, meta.checksums);
  if (!meta.tags.empty())
    r.headers.emplace_back("x-amz-tagging", objdirect::s3::tagging_header(meta.tags));
  bool unquoted = false;
  {
    std::lock_guard lk(core_->caps_mu);
    unquoted = core_->put_if_match_unquoted;
  }
  add_condition(r.headers, cond, unquoted);
  auto resp = core_->call(std::move(r));
  if (!resp.ok()) return note_sse_c(sse, resp.status());
  auto etag = objdirect::s3::unquote_etag(resp->header("etag").value_or(""));
  *version_id = resp->header("x-amz-version-id").value_or("");
  if (Status st = sse_c_confirmed(sse, *resp, "PutObject"); !st.ok()) {
    // Stored without the encryption asked for: removed again (best effort), never left readable
    // as plaintext for a client that asked for SSE-C.
    Request d = object_request("DELETE", bucket, meta.key);
    if (!version_id->empty()) d.query = {{"versionId", *version_id}};
    (void)core_->call(std::move(d));
    return st;
  }
  if (etag.empty()) return Status(Errc::io_error, "upstream PutObject: no ETag");
  return etag;
}

Result<ObjectMeta> S3Store::replace_meta(std::string_view bucket, ObjectMeta meta,
                                         std::string_view expected_etag) {
  Request r = object_request("PUT", bucket, meta.key);
  r.headers.emplace_back("x-amz-copy-source", copy_source(bucket, meta.key, ""));
  r.headers.emplace_back("x-amz-metadata-directive", "REPLACE");
  r.headers.emplace_back("x-amz-copy-source-if-match", quote(expected_etag));
  add_meta_headers(r.headers, meta);
  r.xml_reply = true;
  auto resp = core_->call(std::move(r));
  if (!resp.ok()) return resp.status();
  auto doc = decode_reply(*resp, "CopyObject", objdirect::s3::decode_copy_result);
  if (!doc.ok()) return doc.status();
  meta.etag = std::move(doc->etag);
  meta.version_id = resp->header("x-amz-version-id").value_or("");
  if (meta.version_id.empty()) {
    // radosgw 16 leaves x-amz-version-id out of CopyObject's answer: the HEAD after it has the
    // new latest version's (empty in a bucket never versioned).
    if (auto h = head_object(bucket, meta.key); h.ok() && h->etag == meta.etag)
      meta.version_id = h->version_id;
  }
  if (auto t = parse_iso8601(doc->last_modified)) meta.mtime_ns = ns_of(*t);
  if (meta.etag.empty()) return Status(Errc::io_error, "upstream CopyObject: no ETag");
  return meta;
}

// HEAD of one object (with If-None-Match: "etag" when `if_none_match` is set). A bodiless 404
// is a missing key or a missing bucket: head_bucket tells them apart.
Result<Response> S3Store::head_call(std::string_view bucket, std::string_view key,
                                    std::string_view if_none_match, const SseCKeyHeaders& sse) {
  OBJDIRECT_RETURN_IF_ERROR(sse_c_known_missing(sse));
  Request r = object_request("HEAD", bucket, key);
  r.headers.emplace_back("x-amz-checksum-mode", "ENABLED");
  if (!if_none_match.empty()) r.headers.emplace_back("if-none-match", quote(if_none_match));
  add_sse_c_headers(r.headers, sse);
  auto resp = core_->call(std::move(r));
  if (!resp.ok() && resp.code() == Errc::no_such_key) {
    auto b = head_bucket(bucket);
    if (!b.ok()) return b.status();
    return Status(Errc::no_such_key, "The specified key does not exist (upstream)");
  }
  if (!resp.ok() && resp.code() == Errc::invalid_request) {
    // A HEAD's 400 has no body (an SSE-C object without its key, a key for an object without
    // SSE-C, ...): the same request as a GET of its first byte brings the upstream's error
    // document, code and message, on this error path only.
    Request g = object_request("GET", bucket, key);
    g.headers.emplace_back("range", "bytes=0-0");
    add_sse_c_headers(g.headers, sse);
    auto detail = core_->call(std::move(g));
    if (!detail.ok() && detail.code() != Errc::no_such_key && detail.code() != Errc::invalid_range)
      return detail.status();
  }
  if (!resp.ok()) return note_sse_c(sse, resp.status());
  return resp;
}

namespace {

// An object whose HEAD names SSE-C, opened without a key: AWS's refusal, made by the gateway
// too, for upstreams that would serve it (and so that no cache in front ever holds it).
Status refuse_keyless(const ObjectMeta& m, const SseCKeyHeaders& sse) {
  if (!m.sse.enabled() || sse.present()) return Status::Ok();
  return Status(Errc::invalid_request,
                "The object was stored using a form of Server Side Encryption. The correct "
                "parameters must be provided to retrieve the object.");
}

}  // namespace

Result<ObjectMeta> S3Store::head_object(std::string_view bucket, std::string_view key) {
  auto resp = head_call(bucket, key, "");
  if (!resp.ok()) return resp.status();
  return meta_from_head(key, *resp);
}

// One HEAD with If-None-Match: "etag". 304: unchanged (nullopt); 200: the new metadata; a
// 404 is no_such_key or no_such_bucket (as head_object tells them apart). An upstream that
// ignores the condition and answers 200 with the same ETag still reads as unchanged.
Result<std::optional<ObjectMeta>> S3Store::revalidate(std::string_view bucket, std::string_view key,
                                                      std::string_view etag) {
  auto resp = head_call(bucket, key, etag);
  if (!resp.ok()) {
    if (resp.code() == Errc::not_modified) return std::optional<ObjectMeta>();
    return resp.status();
  }
  ObjectMeta m = meta_from_head(key, *resp);
  if (m.etag == etag) return std::optional<ObjectMeta>();
  return std::optional<ObjectMeta>(std::move(m));
}

Result<std::unique_ptr<ObjectReader>> S3Store::open_object(std::string_view bucket,
                                                           std::string_view key) {
  return open_object_sse(bucket, key, "", SseCKeyHeaders());
}

Result<ObjectMeta> S3Store::head_object_sse(std::string_view bucket, std::string_view key,
                                            std::string_view version_id,
                                            const SseCKeyHeaders& sse) {
  Result<ObjectMeta> m = Status(Errc::internal, "unset");
  if (version_id.empty()) {
    auto resp = head_call(bucket, key, "", sse);
    if (!resp.ok()) return resp.status();
    m = meta_from_head(key, *resp);
  } else {
    m = head_version(bucket, key, version_id, nullptr, sse);
    if (!m.ok()) return m.status();
  }
  if (!m->delete_marker) OBJDIRECT_RETURN_IF_ERROR(refuse_keyless(*m, sse));
  return m;
}

Result<std::unique_ptr<ObjectReader>> S3Store::open_object_sse(std::string_view bucket,
                                                               std::string_view key,
                                                               std::string_view version_id,
                                                               const SseCKeyHeaders& sse) {
  if (!version_id.empty()) {
    bool latest_is_null = false;
    auto m = head_version(bucket, key, version_id, &latest_is_null, sse);
    if (!m.ok()) return m.status();
    if (m->delete_marker)
      return Status(Errc::method_not_allowed,
                    "The specified method is not allowed against this resource (a delete marker)");
    OBJDIRECT_RETURN_IF_ERROR(refuse_keyless(*m, sse));
    // The null version that the upstream will not name: read the latest, pinned to its ETag.
    return make_reader(core_, std::string(bucket), std::move(*m),
                       latest_is_null ? std::string() : std::string(version_id), sse);
  }
  auto resp = head_call(bucket, key, "", sse);
  if (!resp.ok()) return resp.status();
  ObjectMeta m = meta_from_head(key, *resp);
  OBJDIRECT_RETURN_IF_ERROR(refuse_keyless(m, sse));
  return make_reader(core_, std::string(bucket), std::move(m), "", sse);
}

Status S3Store::delete_object(std::string_view bucket, std::string_view key) {
  Request r = object_request("DELETE", bucket, key);
  return core_->call(std::move(r)).status();
}

Result<ListResult> S3Store::list_objects(std::string_view bucket, const ListQuery& q) {
  ListResult out;
  std::string token;
  const std::uint32_t want = q.max_keys;
  std::uint32_t have = 0;
  for (int guard = 0; guard < 100000; ++guard) {
    Request r;
    r.bucket = std::string(bucket);
    r.query = {{"list-type", "2"}, {"encoding-type", "url"}};
    const std::uint32_t ask = std::clamp<std::uint32_t>(want - have, 1, limits::list_keys_max);
    r.query.emplace_back("max-keys", std::to_string(ask));
    if (!q.prefix.empty()) r.query.emplace_back("prefix", q.prefix);
    if (!q.delimiter.empty()) r.query.emplace_back("delimiter", q.delimiter);
    if (!token.empty()) {
      r.query.emplace_back("continuation-token", token);
    } else if (!q.start_after.empty()) {
      r.query.emplace_back("start-after", q.start_after);
    }
    auto doc = call_xml(std::move(r), "ListObjectsV2", objdirect::s3::decode_list_objects);
    if (!doc.ok()) return doc.status();
    const bool url = doc->encoding_type == "url";
    // Entries in key order: objects and common prefixes interleaved.
    std::vector<std::pair<std::string, std::optional<ObjectMeta>>> entries;
    for (auto& c : doc->objects) {
      ObjectMeta m;
      m.key = decoded(c.key, url);
      m.size = c.size;
      m.etag = std::move(c.etag);
      if (auto t = parse_iso8601(c.last_modified)) m.mtime_ns = ns_of(*t);
      std::string k = m.key;
      entries.emplace_back(std::move(k), std::move(m));
    }
    for (const auto& p : doc->common_prefixes) entries.emplace_back(decoded(p, url), std::nullopt);
    std::sort(entries.begin(), entries.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    const bool upstream_truncated = doc->is_truncated;
    token = std::move(doc->next_continuation_token);
    bool more_in_page = false;
    for (auto& [name, m] : entries) {
      // An upstream may repeat a common prefix that start_after already covered.
      const std::string& last = out.next_marker.empty() ? q.start_after : out.next_marker;
      if (!last.empty() && name <= last) continue;
      if (have == want) {
        more_in_page = true;
        break;
      }
      ++have;
      out.next_marker = name;
      if (m) {
        out.objects.push_back(std::move(*m));
      } else {
        out.common_prefixes.push_back(name);
      }
    }
    if (more_in_page) {
      out.truncated = true;
      break;
    }
    if (!upstream_truncated || token.empty()) break;
    if (have == want) {
      // Is there anything after what we return? The next page answers.
      if (want == 0) {
        out.truncated = true;
        break;
      }
      Request peek;
      peek.bucket = std::string(bucket);
      peek.query = {{"list-type", "2"}, {"max-keys", "1"}, {"continuation-token", token}};
      if (!q.prefix.empty()) peek.query.emplace_back("prefix", q.prefix);
      if (!q.delimiter.empty()) peek.query.emplace_back("delimiter", q.delimiter);
      auto pd = call_xml(std::move(peek), "ListObjectsV2", objdirect::s3::decode_list_objects);
      if (!pd.ok()) return pd.status();
      out.truncated = !pd->objects.empty() || !pd->common_prefixes.empty();
      break;
    }
  }
  if (!out.truncated) out.next_marker.clear();
  return out;
}

}  // namespace objdirect::storage::s3gw
