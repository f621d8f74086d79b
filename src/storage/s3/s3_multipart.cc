// The gateway's multipart uploads (s3_internal.hpp): the upstream's upload id is ours; the
// templates and part checksums the gateway keeps for upstreams that do not return them.
#include <algorithm>

#include "common/assert.hpp"
#include "common/checksum.hpp"
#include "common/limits.hpp"
#include "common/parallel.hpp"
#include "s3/conditional.hpp"
#include "s3/tagging.hpp"
#include "storage/s3/s3_internal.hpp"
#include "storage/s3/s3_spool.hpp"

namespace objdirect::storage::s3gw {

void Core::remember_template(const std::string& id, UploadInfo info) {
  std::lock_guard lk(templates_mu);
  // The order deque may name ids already forgotten (completed, aborted): skip those.
  while (templates.size() >= opts.upload_templates && !template_order.empty()) {
    templates.erase(template_order.front());
    drop_kept_parts(template_order.front());
    template_order.pop_front();
  }
  if (template_order.size() > 2 * opts.upload_templates) {
    std::erase_if(template_order, [&](const std::string& k) { return !templates.count(k); });
  }
  templates[id] = std::move(info);
  template_order.push_back(id);
}

std::optional<UploadInfo> Core::find_template(const std::string& id) {
  std::lock_guard lk(templates_mu);
  auto it = templates.find(id);
  if (it == templates.end()) return std::nullopt;
  return it->second;
}

void Core::forget_template(const std::string& id) {
  std::lock_guard lk(templates_mu);
  templates.erase(id);  // the order deque keeps the id until it ages out; erase() tolerates it
  drop_kept_parts(id);
}

void Core::drop_kept_parts(const std::string& id) {  // under templates_mu
  auto it = kept_parts.find(id);
  if (it == kept_parts.end()) return;
  kept_parts_count -= it->second.size();
  kept_parts.erase(it);
}

// Keeps a committed part's checksums (only for an upload this process created).
bool Core::may_keep_part(const std::string& id, std::uint32_t number, const ChecksumMap& sums) {
  if (sums.empty()) return true;
  std::lock_guard lk(templates_mu);
  if (!templates.count(id)) return true;
  if (kept_parts_count < opts.kept_parts) return true;
  auto u = kept_parts.find(id);
  return u != kept_parts.end() && u->second.count(number) > 0;  // a part sent again
}

void Core::keep_part(const std::string& id, std::uint32_t number, const std::string& etag,
                     const ChecksumMap& sums) {
  if (sums.empty()) return;
  std::lock_guard lk(templates_mu);
  if (!templates.count(id)) return;
  auto& parts = kept_parts[id];
  auto it = parts.find(number);
  if (it == parts.end()) {
    if (kept_parts_count >= opts.kept_parts) return;
    ++kept_parts_count;
    it = parts.emplace(number, KeptPart{}).first;
  }
  it->second = KeptPart{etag, sums};
}

// The kept checksums of a part, if its ETag is still the one they were kept for.
std::optional<ChecksumMap> Core::kept_part(const std::string& id, std::uint32_t number,
                                           const std::string& etag) {
  std::lock_guard lk(templates_mu);
  auto u = kept_parts.find(id);
  if (u == kept_parts.end()) return std::nullopt;
  auto p = u->second.find(number);
  if (p == u->second.end() || p->second.etag != etag) return std::nullopt;
  return p->second.sums;
}

Result<std::string> S3Store::create_upload(std::string_view bucket, const UploadInfo& info) {
  return create_upload_sse(bucket, info, SseCKeyHeaders());
}

Result<std::string> S3Store::create_upload_sse(std::string_view bucket, const UploadInfo& info,
                                               const SseCKeyHeaders& sse) {
  OBJDIRECT_RETURN_IF_ERROR(sse_c_known_missing(sse));
  Request r = object_request("POST", bucket, info.key);
  add_sse_c_headers(r.headers, sse);
  r.query = {{"uploads", ""}};
  add_meta_headers(r.headers, info.meta_template);
  if (!info.meta_template.tags.empty()) {
    OBJDIRECT_RETURN_IF_ERROR(tagging_available(bucket));
    r.headers.emplace_back("x-amz-tagging", objdirect::s3::tagging_header(info.meta_template.tags));
  }
  if (!info.checksum_algorithm.empty())
    r.headers.emplace_back("x-amz-checksum-algorithm", info.checksum_algorithm);
  r.xml_reply = true;
  auto resp = core_->call(std::move(r));
  if (!resp.ok()) return note_sse_c(sse, resp.status());
  auto doc = decode_reply(*resp, "CreateMultipartUpload", objdirect::s3::decode_initiate_multipart);
  if (!doc.ok()) return doc.status();
  std::string id = std::move(doc->upload_id);
  if (id.empty()) return Status(Errc::io_error, "upstream CreateMultipartUpload: no UploadId");
  if (Status st = sse_c_confirmed(sse, *resp, "CreateMultipartUpload"); !st.ok()) {
    Request a = object_request("DELETE", bucket, info.key);  // best effort
    a.query = {{"uploadId", id}};
    (void)core_->call(std::move(a));
    return st;
  }
  UploadInfo kept = info;
  kept.upload_id = id;
  if (kept.initiated_ns == 0) kept.initiated_ns = now_ns();
  core_->remember_template(id, std::move(kept));
  return id;
}

Result<UploadInfo> S3Store::get_upload(std::string_view bucket, std::string_view key,
                                       std::string_view upload_id) {
  Request r = object_request("GET", bucket, key);
  r.query = {{"max-parts", "1"}, {"uploadId", std::string(upload_id)}};
  auto doc = call_xml(std::move(r), "ListParts", objdirect::s3::decode_list_parts);
  if (!doc.ok()) return upload_error(bucket, doc.status());
  if (auto t = core_->find_template(std::string(upload_id)); t && t->key == key) return *t;
  UploadInfo u;
  u.key = std::string(key);
  u.upload_id = std::string(upload_id);
  u.checksum_algorithm = std::move(doc->checksum_algorithm);
  return u;
}

Result<PartInfo> S3Store::commit_part(std::string_view bucket, std::string_view key,
                                      std::string_view upload_id, PartInfo info,
                                      std::unique_ptr<BlobWriter> data) {
  return commit_part_sse(bucket, key, upload_id, std::move(info), std::move(data),
                         SseCKeyHeaders());
}

Result<PartInfo> S3Store::commit_part_sse(std::string_view bucket, std::string_view key,
                                          std::string_view upload_id, PartInfo info,
                                          std::unique_ptr<BlobWriter> data,
                                          const SseCKeyHeaders& sse) {
  OBJDIRECT_RETURN_IF_ERROR(sse_c_known_missing(sse));
  auto* w = dynamic_cast<SpoolWriter*>(data.get());
  OBJDIRECT_ASSERT(w != nullptr && w->core() == core_,
                   "commit_part: a writer is committed to the store that began it");
  if (!core_->may_keep_part(std::string(upload_id), info.part_number, info.checksums)) {
    // Sent on, the part's checksum would be lost to an upstream whose ListParts does not return
    // it, and the Complete would then fail there: refused before anything is sent.
    return Status(Errc::slow_down,
                  "the gateway keeps the checksums of at most " +
                      std::to_string(core_->opts.kept_parts) +
                      " parts of in-progress uploads (kept_parts); complete or abort uploads, "
                      "then retry");
  }
  Request r = part_request(bucket, key, upload_id, info.part_number);
  r.body = w->body(0, w->size());
  add_checksum_headers(r.headers, info.checksums);
  add_sse_c_headers(r.headers, sse);
  auto resp = core_->call(std::move(r));
  if (!resp.ok()) {
    (void)note_sse_c(sse, resp.status());
    // moto 5.2 answers an UploadPart to an aborted or completed upload with a bare 500 (retried,
    // then unavailable here) where S3 says 404 NoSuchUpload: on that error path only, ask
    // ListParts whether the upload still exists (docs/scale-out.md, "Verified upstreams").
    const Errc e = resp.code();
    if (e == Errc::internal || e == Errc::unavailable) {
      if (auto u = get_upload(bucket, key, upload_id); u.code() == Errc::no_such_upload) {
        return u.status();
      }
    }
    return resp.status();
  }
  info.size = w->size();
  info.etag = objdirect::s3::unquote_etag(resp->header("etag").value_or(""));
  if (info.etag.empty()) return Status(Errc::io_error, "upstream UploadPart: no ETag");
  info.mtime_ns = now_ns();
  core_->keep_part(std::string(upload_id), info.part_number, info.etag, info.checksums);
  return info;
}

Result<std::vector<PartInfo>> S3Store::list_parts(std::string_view bucket, std::string_view key,
                                                  std::string_view upload_id,
                                                  std::uint32_t part_number_marker,
                                                  std::uint32_t max_parts) {
  // The upstream is listed from the first part and the gateway skips to the marker itself:
  // moto 5.2 reads part-number-marker as an index into the part list, not as a part number
  // (with parts 1, 2, 3, 5, 8 a marker of 5 returns nothing). At most 10,000 parts per upload,
  // so a page costs at most 10 upstream pages.
  std::vector<PartInfo> out;
  std::uint32_t marker = 0;
  while (out.size() < max_parts) {
    Request r = object_request("GET", bucket, key);
    const std::uint32_t ask = 1000;
    r.query = {{"max-parts", std::to_string(ask)},
               {"part-number-marker", std::to_string(marker)},
               {"uploadId", std::string(upload_id)}};
    auto doc = call_xml(std::move(r), "ListParts", objdirect::s3::decode_list_parts);
    if (!doc.ok()) return upload_error(bucket, doc.status());
    bool any = false;
    for (auto& p : doc->parts) {
      any = true;
      PartInfo pi;
      pi.part_number = p.part_number;
      pi.size = p.size;
      pi.etag = std::move(p.etag);
      if (auto t = parse_iso8601(p.last_modified)) pi.mtime_ns = ns_of(*t);
      for (auto& [algo, value] : p.checksums) {
        if (auto a = checksum_from_name(algo)) {
          pi.checksums[std::string(checksum_name(*a))] = std::move(value);
        }
      }
      if (pi.checksums.empty()) {
        // An upstream without part checksums in ListParts (or none at all): the ones the
        // gateway kept when the part was committed, if the part is still that one.
        if (auto kept = core_->kept_part(std::string(upload_id), pi.part_number, pi.etag)) {
          pi.checksums = std::move(*kept);
          core_->ctr.kept_part_checksums_used++;
        }
      }
      marker = pi.part_number;
      if (pi.part_number > part_number_marker && out.size() < max_parts)
        out.push_back(std::move(pi));
    }
    if (!any || !doc->is_truncated) break;
    if (doc->next_part_number_marker && *doc->next_part_number_marker > marker)
      marker = *doc->next_part_number_marker;
  }
  return out;
}

Result<ObjectMeta> S3Store::complete_upload(std::string_view bucket, std::string_view upload_id,
                                            ObjectMeta meta,
                                            const std::vector<CompletePartRef>& parts,
                                            const WriteCondition& cond) {
  return complete_upload_sse(bucket, upload_id, std::move(meta), parts, cond, SseCKeyHeaders());
}

Result<ObjectMeta> S3Store::complete_upload_sse(std::string_view bucket, std::string_view upload_id,
                                                ObjectMeta meta,
                                                const std::vector<CompletePartRef>& parts,
                                                const WriteCondition& cond,
                                                const SseCKeyHeaders& sse) {
  OBJDIRECT_RETURN_IF_ERROR(sse_c_known_missing(sse));
  std::vector<std::pair<std::uint32_t, std::string>> named;
  for (const auto& p : parts) named.emplace_back(p.part_number, p.etag);
  std::unique_lock<std::mutex> key_lock;
  if (cond.kind != WriteCondition::Kind::none && !upstream_checks(bucket, true)) {
    key_lock = std::unique_lock(core_->key_lock(bucket, meta.key));
    OBJDIRECT_RETURN_IF_ERROR(check_condition(bucket, meta.key, cond));
  }
  // The parts' checksums go into the Complete (S3 requires them for an upload created with a
  // checksum algorithm); a caller that passes no part list gets them from ListParts.
  std::vector<PartInfo> infos = meta.parts;
  if (infos.empty()) {
    auto listed = list_parts(bucket, meta.key, upload_id, 0, limits::parts_max);
    if (listed.ok()) infos = std::move(*listed);
  }
  std::string version_id;
  auto etag = complete(bucket, meta.key, upload_id, named, infos, cond, &version_id, sse);
  if (!etag.ok()) return note_sse_c(sse, etag.status());
  core_->forget_template(std::string(upload_id));
  meta.etag = *etag;
  meta.version_id = std::move(version_id);
  meta.delete_marker = false;
  meta.mtime_ns = now_ns();
  return meta;
}

Status S3Store::abort_upload(std::string_view bucket, std::string_view key,
                             std::string_view upload_id) {
  Request r = object_request("DELETE", bucket, key);
  r.query = {{"uploadId", std::string(upload_id)}};
  auto st = core_->call(std::move(r)).status();
  if (st.ok()) core_->forget_template(std::string(upload_id));
  return st.ok() ? st : upload_error(bucket, st);
}

Result<ListUploadsResult> S3Store::list_uploads(std::string_view bucket,
                                                const ListUploadsQuery& q) {
  Request r;
  r.bucket = std::string(bucket);
  r.query = {{"uploads", ""}, {"encoding-type", "url"}};
  r.query.emplace_back("max-uploads", std::to_string(std::min<std::uint32_t>(q.max_uploads, 1000)));
  // No delimiter upstream: radosgw 16 answers one with an empty listing and moto 5.2 ignores
  // it, so the gateway rolls uploads up into common prefixes itself (below).
  if (!q.prefix.empty()) r.query.emplace_back("prefix", q.prefix);
  if (!q.key_marker.empty()) r.query.emplace_back("key-marker", q.key_marker);
  if (!q.upload_id_marker.empty()) r.query.emplace_back("upload-id-marker", q.upload_id_marker);
  auto doc = call_xml(std::move(r), "ListMultipartUploads", objdirect::s3::decode_list_uploads);
  if (!doc.ok()) return doc.status();
  const bool url = doc->encoding_type == "url";
  ListUploadsResult out;
  for (auto& u : doc->uploads) {
    UploadInfo info;
    info.key = decoded(u.key, url);
    info.upload_id = std::move(u.upload_id);
    if (auto t = parse_iso8601(u.initiated)) info.initiated_ns = ns_of(*t);
    info.checksum_algorithm = std::move(u.checksum_algorithm);
    if (auto t = core_->find_template(info.upload_id)) info.meta_template = t->meta_template;
    info.meta_template.owner = std::move(u.initiator.id);
    out.uploads.push_back(std::move(info));
  }
  for (const auto& p : doc->common_prefixes) out.common_prefixes.push_back(decoded(p, url));
  out.truncated = doc->is_truncated;
  out.next_key_marker = decoded(doc->next_key_marker.value_or(""), url);
  out.next_upload_id_marker = doc->next_upload_id_marker.value_or("");
  if (!q.delimiter.empty()) {
    // Uploads below the delimiter roll up into common prefixes (within the upstream's page).
    std::vector<UploadInfo> kept;
    for (auto& u : out.uploads) {
      const auto at = u.key.find(q.delimiter, q.prefix.size());
      if (!u.key.starts_with(q.prefix) || at == std::string::npos) {
        kept.push_back(std::move(u));
        continue;
      }
      std::string cp = u.key.substr(0, at + q.delimiter.size());
      if (cp != q.key_marker &&
          std::ranges::find(out.common_prefixes, cp) == out.common_prefixes.end())
        out.common_prefixes.push_back(std::move(cp));
    }
    out.uploads = std::move(kept);
    std::sort(out.common_prefixes.begin(), out.common_prefixes.end());
  }
  const std::uint32_t want = std::min<std::uint32_t>(q.max_uploads, 1000);
  if (out.uploads.size() + out.common_prefixes.size() > want && out.common_prefixes.empty()) {
    // An upstream that ignores max-uploads (moto 5.2): the page is cut here.
    out.uploads.resize(want);
    out.truncated = true;
    if (!out.uploads.empty()) {
      out.next_key_marker = out.uploads.back().key;
      out.next_upload_id_marker = out.uploads.back().upload_id;
    }
  }
  return out;
}

// An upload call's error: radosgw answers an unknown upload id on ListParts with NoSuchKey,
// which S3 spells NoSuchUpload (the bucket's existence is checked, so a missing bucket stays
// NoSuchBucket).
Status S3Store::upload_error(std::string_view bucket, Status st) {
  if (st.code() != Errc::no_such_key) return st;
  auto b = head_bucket(bucket);
  if (!b.ok()) return b.status();
  return Status(Errc::no_such_upload,
                "The specified upload does not exist. The upload ID may be invalid, or the "
                "upload may have been aborted or completed. (" +
                    st.message() + ")");
}

Request S3Store::part_request(std::string_view bucket, std::string_view key,
                              std::string_view upload_id, std::uint32_t number) const {
  Request r = object_request("PUT", bucket, key);
  r.query = {{"partNumber", std::to_string(number)}, {"uploadId", std::string(upload_id)}};
  return r;
}

// A parallel multipart upload of the spooled data; aborted upstream on any failure.
Result<std::string> S3Store::multipart_put(std::string_view bucket, const ObjectMeta& meta,
                                           const SpoolWriter& w, const WriteCondition& cond,
                                           std::string* version_id, const SseCKeyHeaders& sse) {
  core_->ctr.multipart_commits++;
  // A full-object checksum cannot be forwarded through a multipart upload: each part carries
  // its own checksum of the same algorithm instead (the upstream verifies every part).
  std::optional<ChecksumAlgo> algo;
  for (const auto& [name, v] : meta.checksums) {
    if ((algo = checksum_from_name(name))) break;
  }
  UploadInfo info;
  info.key = meta.key;
  info.meta_template = meta;
  if (algo) info.checksum_algorithm = std::string(checksum_name(*algo));
  auto id = create_upload_sse(bucket, info, sse);
  if (!id.ok()) return id.status();
  const std::uint64_t size = w.size();
  const std::uint64_t part = std::max<std::uint64_t>(
      core_->opts.multipart_part_bytes, (size + limits::parts_max - 1) / limits::parts_max);
  const std::uint32_t count = static_cast<std::uint32_t>((size + part - 1) / part);
  std::vector<PartInfo> done(count);
  Status failure = run_parallel(count, core_->opts.parallel_parts, [&](std::size_t i) -> Status {
    const std::uint64_t off = std::uint64_t(i) * part;
    const std::uint64_t len = std::min(part, size - off);
    const auto number = static_cast<std::uint32_t>(i + 1);
    Request r = part_request(bucket, meta.key, *id, number);
    r.body = w.body(off, len);
    add_sse_c_headers(r.headers, sse);
    PartInfo pi;
    pi.part_number = number;
    pi.size = len;
    if (algo) {
      Checksummer ck(*algo);
      Status st = w.read(off, len, [&](const char* p, std::size_t n) { ck.update(p, n); });
      if (!st.ok()) return st;
      pi.checksums[std::string(checksum_name(*algo))] = ck.digest_base64();
      r.headers.emplace_back(checksum_header(*algo), ck.digest_base64());
    }
    auto resp = core_->call(std::move(r));
    if (!resp.ok()) return resp.status();
    if (!resp->header("etag")) return Status(Errc::io_error, "upstream UploadPart: no ETag");
    pi.etag = objdirect::s3::unquote_etag(*resp->header("etag"));
    done[i] = std::move(pi);
    return Status::Ok();
  });
  Result<std::string> etag = failure;
  if (failure.ok()) {
    std::vector<std::pair<std::uint32_t, std::string>> named;
    for (const auto& p : done) named.emplace_back(p.part_number, p.etag);
    etag = complete(bucket, meta.key, *id, named, done, cond, version_id, sse);
  }
  if (!etag.ok()) {
    (void)abort_upload(bucket, meta.key, *id);  // best effort; the upstream's lifecycle rules
    return etag.status();                       // clean up what this misses
  }
  core_->forget_template(*id);
  return etag;
}

// CompleteMultipartUpload with the named parts (checksums from `infos` where known).
Result<std::string> S3Store::complete(
    std::string_view bucket, std::string_view key, std::string_view upload_id,
    const std::vector<std::pair<std::uint32_t, std::string>>& named,
    const std::vector<PartInfo>& infos, const WriteCondition& cond, std::string* version_id,
    const SseCKeyHeaders& sse) {
  std::vector<objdirect::s3::CompletePart> list;
  list.reserve(named.size());
  for (const auto& [n, etag] : named) {
    objdirect::s3::CompletePart part{n, etag, {}};
    for (const auto& info : infos) {
      if (info.part_number != n) continue;
      for (const auto& [algo, v] : info.checksums) {
        if (auto a = checksum_from_name(algo)) part.checksums.emplace_back(checksum_name(*a), v);
      }
    }
    list.push_back(std::move(part));
  }
  const std::string body = objdirect::s3::encode_complete_multipart(list);
  Request r = object_request("POST", bucket, key);
  r.query = {{"uploadId", std::string(upload_id)}};
  r.headers.emplace_back("content-type", "application/xml");
  add_condition(r.headers, cond);
  add_sse_c_headers(r.headers, sse);
  r.body = Body{body.data(), -1, 0, body.size(), 0, 0};
  r.idempotent = false;  // a lost answer may mean it completed: not re-sent, confirmed below
  std::uint32_t attempts = 1;
  auto resp = core_->call(std::move(r), &attempts);
  // An <Error> inside a 200, too.
  Result<objdirect::s3::CompleteMultipartResult> reply =
      resp.ok()
          ? decode_reply(*resp, "CompleteMultipartUpload", objdirect::s3::decode_complete_result)
          : Result<objdirect::s3::CompleteMultipartResult>(resp.status());
  std::string multipart_suffix = "-";
  multipart_suffix += std::to_string(named.size());
  if (!reply.ok()) {
    Status st = upload_error(bucket, reply.status());
    // No answer at all (the call's transport failures are `unavailable`), or a retried
    // Complete that finds the upload gone.
    const bool lost = !resp.ok() && resp.code() == Errc::unavailable;
    if (lost || (attempts > 1 && st.code() == Errc::no_such_upload)) {
      // A Complete whose answer was lost (or a retried one that finds the upload gone): the
      // upload may have completed. The object's ETag says so (a multipart ETag of this many
      // parts).
      auto h = head_object(bucket, key);
      if (h.ok() && h->etag.ends_with(multipart_suffix)) {
        if (version_id) *version_id = h->version_id;
        return h->etag;
      }
    }
    return st;
  }
  if (version_id) *version_id = resp->header("x-amz-version-id").value_or("");
  std::string etag = std::move(reply->etag);
  if (etag.empty()) {
    // radosgw 16 answers an empty <ETag/>: the object's HEAD has it (with the SSE-C headers of
    // the Complete, when it had them).
    auto h = head_call(bucket, key, "", sse);
    if (h.ok()) {
      etag = objdirect::s3::unquote_etag(h->header("etag").value_or(""));
    } else {
      // An SSE-C object completed without the key (its HEAD needs the key), or a HEAD that
      // failed: the ETag as S3 (and radosgw) compute a multipart ETag, from the parts named.
      std::vector<std::string> md5s;
      for (const auto& [n, part_etag] : named) md5s.push_back(part_etag);
      auto computed = multipart_etag(md5s);
      if (!computed) return h.status();
      etag = std::move(*computed);
    }
  }
  if (etag.empty()) return Status(Errc::io_error, "upstream CompleteMultipartUpload: no ETag");
  return etag;
}

}  // namespace objdirect::storage::s3gw
