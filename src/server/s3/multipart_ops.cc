// Multipart uploads: Create, UploadPart, UploadPartCopy, Complete, Abort, ListParts.
#include <charconv>
#include <chrono>

#include "common/checksum.hpp"
#include "common/limits.hpp"
#include "common/time.hpp"
#include "s3/conditional.hpp"
#include "s3/documents.hpp"
#include "s3/names.hpp"
#include "s3/range.hpp"
#include "s3/xml.hpp"
#include "server/s3/s3_internal.hpp"

namespace objdirect::s3 {

namespace {

// x-amz-checksum-<algo> on a Complete: the composite checksum of the parts' checksums, as the
// reply reports it ("<base64>-<N>"; the "-<N>" may be left off). Only the upload's algorithm may
// be named. x-amz-checksum-type: FULL_OBJECT (a checksum of the whole object's bytes, which
// composite uploads do not compute) is not checked.
Status check_complete_checksum_headers(const Ctx& c, std::optional<ChecksumAlgo> algo,
                                       const storage::ChecksumMap& computed) {
  if (c.header("x-amz-checksum-type") == "FULL_OBJECT") return Status::Ok();
  for (ChecksumAlgo a : kAllChecksumAlgos) {
    const std::string header = checksum_header(a);
    auto given = c.header(header);
    if (!given) continue;
    if (algo != a) {
      return Status(Errc::invalid_request,
                    header + " does not match the upload's checksum algorithm");
    }
    const std::string& want = computed.at(std::string(checksum_name(a)));  // "<base64>-<N>"
    const std::string_view bare = std::string_view(want).substr(0, want.rfind('-'));
    if (*given != want && *given != bare) {
      return Status(Errc::bad_digest, "The " + header +
                                          " you specified did not match the checksum of the "
                                          "parts' checksums (" +
                                          want + ")");
    }
  }
  return Status::Ok();
}

// The CompleteMultipartUpload reply for the object a Complete made.
CompleteMultipartResult complete_result(const Ctx& c, const storage::ObjectMeta& m) {
  CompleteMultipartResult done;
  done.location = "/" + c.bucket + "/" + c.key;
  done.bucket = c.bucket;
  done.key = c.key;
  done.etag = m.etag;
  done.checksums = {m.checksums.begin(), m.checksums.end()};
  if (!m.checksums.empty()) done.checksum_type = "COMPOSITE";
  return done;
}

Result<std::uint32_t> parse_part_number(const Ctx& c) {
  auto v = c.query_value("partNumber");
  if (!v) return Status(Errc::invalid_argument, "partNumber is required");
  std::uint32_t n = 0;
  auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
  if (ec != std::errc() || p != v->data() + v->size() || n < 1 || n > limits::parts_max) {
    return Status(Errc::invalid_argument,
                  "Part number must be an integer between 1 and 10000, inclusive");
  }
  return n;
}

void add_part_checksum_headers(http::Fields& f, const storage::ChecksumMap& sums) {
  for (const auto& [algo, v] : sums) {
    if (auto a = checksum_from_name(algo)) f.set(checksum_header(*a), v);
  }
}

}  // namespace

Task<void> S3Service::Impl::create_upload(Ctx& c) {
  if (auto st = validate_object_key(c.key); !st.ok()) co_return co_await send_error(c, st);
  if (auto st = check_bucket_access(c); !st.ok()) co_return co_await send_error(c, st);
  auto meta = meta_from_headers(c);
  if (!meta.ok()) co_return co_await send_error(c, meta.status());
  // SSE-C is declared here; each part then presents the same key (docs/sse-c.md).
  auto key = request_customer_key(c, false);
  if (!key.ok()) co_return co_await send_error(c, key.status());
  auto pass = passed_sse_c(c, false);  // passed through: the service keeps the upload's key
  if (!pass.ok()) co_return co_await send_error(c, pass.status());
  if (pass->present()) {
    key->reset();
    meta->sse.algorithm = pass->algorithm;
    meta->sse.key_md5 = pass->key_md5;
  }
  if (*key) meta->sse = new_sse_params(**key, false);
  storage::UploadInfo info;
  info.key = c.key;
  info.initiated_ns = now_ns();
  info.meta_template = std::move(*meta);
  if (auto a = c.header("x-amz-checksum-algorithm")) {
    auto algo = checksum_from_name(*a);
    if (!algo)
      co_return co_await send_error(
          c, Status(Errc::invalid_request, "Checksum algorithm '" + *a + "' is not supported"));
    info.checksum_algorithm = std::string(checksum_name(*algo));
  }
  auto id = store->create_upload_sse(c.bucket, info, *pass);
  if (!id.ok()) co_return co_await send_error(c, id.status());
  http::Fields f;
  if (!info.checksum_algorithm.empty()) {
    f.set("x-amz-checksum-algorithm", info.checksum_algorithm);
    f.set("x-amz-checksum-type", "COMPOSITE");
  }
  add_sse_c_headers(f, info.meta_template.sse);
  // The document is built before the co_await: GCC 12 destroys a braced temporary inside a
  // co_await expression twice.
  std::string xml = encode_initiate_multipart({c.bucket, c.key, *id});
  co_await send_xml(c, bhttp::status::ok, std::move(xml), std::move(f));
}

Task<void> S3Service::Impl::upload_part(Ctx& c) {
  auto pn = parse_part_number(c);
  if (!pn.ok()) co_return co_await send_error(c, pn.status());
  auto upload_id = c.query_value("uploadId").value_or("");
  if (auto st = check_bucket_access(c); !st.ok()) co_return co_await send_error(c, st);
  auto upload = store->get_upload(c.bucket, c.key, upload_id);
  if (!upload.ok()) co_return co_await send_error(c, upload.status());
  std::optional<ChecksumAlgo> algo;
  if (!upload->checksum_algorithm.empty()) algo = checksum_from_name(upload->checksum_algorithm);

  auto key = key_for_part(c, *upload);
  if (!key.ok()) co_return co_await send_error(c, key.status());
  auto pass = passed_sse_c(c, false);
  if (!pass.ok()) co_return co_await send_error(c, pass.status());

  auto writer = store->begin_write_for(c.bucket, c.key);
  if (!writer.ok()) co_return co_await send_error(c, writer.status());
  // SSE-C: each part has its own random IV, its keystream counting from the part's first byte.
  storage::PartInfo part;
  std::optional<EncryptingWriter> enc;
  if (*key) {
    part.sse_iv = random_iv();
    enc.emplace(**writer, **key, part.sse_iv, opts.io_buffer_bytes);
  }
  auto payload = co_await receive(c, enc ? static_cast<storage::BlobWriter&>(*enc) : **writer,
                                  limits::part_bytes_max, algo);
  enc.reset();
  if (!payload.ok()) {
    writer->reset();  // unlink the temporary file (and free its space) before answering
    co_return co_await send_put_error(c, payload.status());
  }
  part.part_number = *pn;
  part.size = payload->size;
  part.etag = *key ? sse_c_etag(**key, payload->md5_raw) : payload->md5_hex;
  part.mtime_ns = now_ns();
  part.checksums = payload->checksums;
  auto committed =
      store->commit_part_sse(c.bucket, c.key, upload_id, part, std::move(*writer), *pass);
  if (!committed.ok()) co_return co_await send_error(c, committed.status());
  http::Fields f;
  f.set(bhttp::field::etag, quote_etag(committed->etag));
  add_part_checksum_headers(f, committed->checksums);
  add_sse_c_headers(f, upload->meta_template.sse);
  co_await send_empty(c, bhttp::status::ok, std::move(f));
}

Task<void> S3Service::Impl::upload_part_copy(Ctx& c) {
  auto pn = parse_part_number(c);
  if (!pn.ok()) co_return co_await send_error(c, pn.status());
  auto upload_id = c.query_value("uploadId").value_or("");
  if (auto st = check_bucket_access(c); !st.ok()) co_return co_await send_error(c, st);
  auto upload = store->get_upload(c.bucket, c.key, upload_id);
  if (!upload.ok()) co_return co_await send_error(c, upload.status());
  auto src = parse_copy_source(*c.header("x-amz-copy-source"));
  if (!src.ok()) co_return co_await send_error(c, src.status());
  auto src_version = copy_source_version(*c.header("x-amz-copy-source"));
  if (!src_version.ok()) co_return co_await send_error(c, src_version.status());
  Ctx src_ctx{c.ex, c.req, c.request_id, src->first, src->second, {}, c.auth, false, {}};
  // Reading the source needs s3:GetObject on it (s3:GetObjectVersion for a version).
  src_ctx.op = *src_version ? "GetObjectVersion" : "GetObject";
  if (auto st = check_bucket_access(src_ctx); !st.ok()) co_return co_await send_error(c, st);
  auto reader = open_version(src_ctx, src->first, src->second, *src_version, true);
  if (!reader.ok()) co_return co_await send_error(c, reader.status());
  // SSE-C: the source's key (x-amz-copy-source-server-side-encryption-customer-*) and the
  // upload's (x-amz-server-side-encryption-customer-*) are independent.
  auto src_key = key_for_read(c, (*reader)->meta(), true);
  if (!src_key.ok()) co_return co_await send_error(c, src_key.status());
  if (*src_key) *reader = decrypting_reader(std::move(*reader), **src_key);
  auto key = key_for_part(c, *upload);
  if (!key.ok()) co_return co_await send_error(c, key.status());
  auto pass = passed_sse_c(c, false);
  if (!pass.ok()) co_return co_await send_error(c, pass.status());
  const auto& sm = (*reader)->meta();
  if (auto st = evaluate_copy_conditions(c, sm); !st.ok()) co_return co_await send_error(c, st);
  std::uint64_t offset = 0, length = sm.size;
  if (auto r = c.header("x-amz-copy-source-range")) {
    auto range = parse_copy_source_range(*r, sm.size);
    if (!range.ok()) co_return co_await send_error(c, range.status());
    offset = range->first;
    length = range->length();
  }
  if (length > limits::part_bytes_max) {
    co_return co_await send_error(c, Status(Errc::entity_too_large, "The part exceeds 5 GiB"));
  }
  std::vector<ChecksumAlgo> algos;
  if (!upload->checksum_algorithm.empty()) {
    if (auto a = checksum_from_name(upload->checksum_algorithm)) algos.push_back(*a);
  }
  auto writer = store->begin_write_for(c.bucket, c.key);
  if (!writer.ok()) co_return co_await send_error(c, writer.status());
  storage::PartInfo part;
  std::optional<EncryptingWriter> enc;
  if (*key) {
    part.sse_iv = random_iv();
    enc.emplace(**writer, **key, part.sse_iv, opts.io_buffer_bytes);
  }
  auto data =
      copy_data(**reader, offset, length, enc ? static_cast<storage::BlobWriter&>(*enc) : **writer,
                algos, opts.io_buffer_bytes);
  enc.reset();
  if (!data.ok()) {
    writer->reset();  // unlink the temporary file (and free its space) before answering
    co_return co_await send_error(c, data.status());
  }
  part.part_number = *pn;
  part.size = data->size;
  part.etag = *key ? sse_c_etag(**key, data->md5_raw) : data->md5_hex;
  part.mtime_ns = now_ns();
  part.checksums = data->checksums;
  auto committed =
      store->commit_part_sse(c.bucket, c.key, upload_id, part, std::move(*writer), *pass);
  if (!committed.ok()) co_return co_await send_error(c, committed.status());
  // Built before the co_await (GCC 12 destroys braced temporaries in a co_await twice).
  const CopyResult copied{true,
                          iso8601_ms(from_ns(committed->mtime_ns)),
                          committed->etag,
                          {committed->checksums.begin(), committed->checksums.end()}};
  std::string xml = encode_copy_result(copied);
  co_await send_xml(c, bhttp::status::ok, std::move(xml));
}

Task<void> S3Service::Impl::complete_upload(Ctx& c) {
  auto upload_id = c.query_value("uploadId").value_or("");
  if (auto st = check_bucket_access(c); !st.ok()) co_return co_await send_error(c, st);
  auto cond = parse_write_conditions(c.header("if-match"), c.header("if-none-match"));
  if (!cond.ok()) co_return co_await send_error(c, cond.status());
  // SSE-C headers need not come with a Complete; passed through when they do (AWS wants them
  // there for an upload with a checksum algorithm). Elsewhere they are not needed and ignored.
  storage::SseCKeyHeaders pass;
  if (store->passes_sse_c()) {
    auto h = passed_sse_c(c, false);
    if (!h.ok()) co_return co_await send_error(c, h.status());
    pass = *h;
  }
  auto body = co_await c.ex.read_body_string(limits::xml_body_bytes_max);
  if (!body.ok()) co_return co_await send_error(c, body.status());
  auto upload = store->get_upload(c.bucket, c.key, upload_id);
  auto requested = parse_complete_multipart(*body);
  if (!upload.ok()) {
    // A Complete repeated after it succeeded (its answer was lost, or the client retries) gets
    // the same 200 result, as from AWS: the upload is gone, but the key holds the object that
    // exactly these parts made (same part numbers, part ETags and multipart ETag).
    if (upload.code() == Errc::no_such_upload && requested.ok()) {
      if (auto done = completed_by(c, *requested)) {
        co_return co_await send_xml(c, bhttp::status::ok, encode_complete_result(*done));
      }
    }
    co_return co_await send_error(c, upload.status());
  }
  if (!requested.ok()) co_return co_await send_error(c, requested.status());

  // Ascending part numbers are required.
  for (std::size_t i = 1; i < requested->size(); ++i) {
    if ((*requested)[i].part_number <= (*requested)[i - 1].part_number) {
      co_return co_await send_error(c, Status(Errc::invalid_part_order,
                                              "The list of parts was not in ascending order. Parts "
                                              "must be ordered by part number."));
    }
  }
  // Every named part must exist with the named ETag; all but the last must be >= 5 MiB.
  auto stored = store->list_parts(c.bucket, c.key, upload_id, 0, limits::parts_max);
  if (!stored.ok()) co_return co_await send_error(c, stored.status());
  std::map<std::uint32_t, const storage::PartInfo*> by_number;
  for (const auto& p : *stored) by_number[p.part_number] = &p;
  std::optional<ChecksumAlgo> algo;
  if (!upload->checksum_algorithm.empty()) algo = checksum_from_name(upload->checksum_algorithm);

  storage::ObjectMeta meta = upload->meta_template;
  meta.key = c.key;
  meta.size = 0;
  std::vector<std::string> md5s, raw_sums;
  std::vector<storage::CompletePartRef> refs;
  for (std::size_t i = 0; i < requested->size(); ++i) {
    const auto& r = (*requested)[i];
    auto it = by_number.find(r.part_number);
    if (it == by_number.end() || it->second->etag != r.etag) {
      co_return co_await send_error(
          c, Status(Errc::invalid_part,
                    "One or more of the specified parts could not be found. The part may not have "
                    "been uploaded, or the specified entity tag may not match the part's entity "
                    "tag. (part " +
                        std::to_string(r.part_number) + ")"));
    }
    const storage::PartInfo& p = *it->second;
    if (i + 1 < requested->size() && p.size < limits::part_bytes_min) {
      co_return co_await send_error(
          c, Status(Errc::entity_too_small,
                    "Your proposed upload is smaller than the minimum allowed object size. (part " +
                        std::to_string(p.part_number) + " is " + std::to_string(p.size) +
                        " bytes; parts but the last must be at least 5 MiB)"));
    }
    if (algo) {
      // AWS: an upload created with a checksum algorithm needs each part's checksum in the list.
      const bool listed = std::any_of(r.checksums.begin(), r.checksums.end(), [&](const auto& cs) {
        return checksum_from_name(cs.first) == algo;
      });
      if (!listed) {
        co_return co_await send_error(
            c, Status(Errc::invalid_request,
                      "The upload was created using a " + std::string(checksum_name(*algo)) +
                          " checksum. The complete request must include the checksum for each "
                          "part. It was missing for part " +
                          std::to_string(r.part_number) + " in the request."));
      }
      auto sum = p.checksums.find(std::string(checksum_name(*algo)));
      if (sum == p.checksums.end()) {
        co_return co_await send_error(
            c, Status(Errc::invalid_part, "Part " + std::to_string(p.part_number) + " has no " +
                                              std::string(checksum_name(*algo)) + " checksum"));
      }
      // A checksum named in the Complete body must match the stored one.
      for (const auto& [name, value] : r.checksums) {
        if (name == sum->first && value != sum->second) {
          co_return co_await send_error(
              c, Status(Errc::invalid_part, "The checksum of part " +
                                                std::to_string(p.part_number) + " does not match"));
        }
      }
      raw_sums.push_back(base64_decode(sum->second).value_or(""));
    }
    md5s.push_back(p.etag);
    meta.size += p.size;
    meta.parts.push_back(p);
    refs.push_back({p.part_number, p.etag});
  }
  if (meta.size > limits::object_bytes_max) {
    co_return co_await send_error(c, Status(Errc::entity_too_large, "The object exceeds 5 TiB"));
  }
  auto etag = multipart_etag(md5s);
  if (!etag)
    co_return co_await send_error(c, Status(Errc::internal, "stored part ETag is not an MD5"));
  meta.etag = *etag;
  meta.checksums.clear();
  if (algo) meta.checksums[std::string(checksum_name(*algo))] = composite_checksum(*algo, raw_sums);
  if (auto st = check_complete_checksum_headers(c, algo, meta.checksums); !st.ok())
    co_return co_await send_error(c, st);
  meta.mtime_ns = now_ns();

  auto committed = store->complete_upload_sse(c.bucket, upload_id, std::move(meta), refs,
                                              to_storage(*cond), pass);
  if (!committed.ok()) co_return co_await send_error(c, committed.status());
  http::Fields f;
  if (!committed->version_id.empty()) f.set("x-amz-version-id", committed->version_id);
  add_sse_c_headers(f, committed->sse);
  co_await send_xml(c, bhttp::status::ok, encode_complete_result(complete_result(c, *committed)),
                    std::move(f));
}

std::optional<CompleteMultipartResult> S3Service::Impl::completed_by(
    Ctx& c, const std::vector<CompletePart>& parts) {
  auto m = store->head_object(c.bucket, c.key);
  if (!m.ok() || m->parts.size() != parts.size() || parts.empty()) return std::nullopt;
  std::vector<std::string> md5s;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (m->parts[i].part_number != parts[i].part_number || m->parts[i].etag != parts[i].etag)
      return std::nullopt;
    md5s.push_back(parts[i].etag);
  }
  if (multipart_etag(md5s) != m->etag) return std::nullopt;
  return complete_result(c, *m);
}

Task<void> S3Service::Impl::abort_upload(Ctx& c) {
  if (auto st = check_bucket_access(c); !st.ok()) co_return co_await send_error(c, st);
  auto st = store->abort_upload(c.bucket, c.key, c.query_value("uploadId").value_or(""));
  if (!st.ok()) co_return co_await send_error(c, st);
  co_await send_empty(c, bhttp::status::no_content);
}

Task<void> S3Service::Impl::list_parts(Ctx& c) {
  auto upload_id = c.query_value("uploadId").value_or("");
  if (auto st = check_bucket_access(c); !st.ok()) co_return co_await send_error(c, st);
  auto upload = store->get_upload(c.bucket, c.key, upload_id);
  if (!upload.ok()) co_return co_await send_error(c, upload.status());
  std::uint32_t marker = 0, max_parts = 1000;
  if (auto m = c.query_value("part-number-marker")) {
    auto [p, ec] = std::from_chars(m->data(), m->data() + m->size(), marker);
    if (ec != std::errc())
      co_return co_await send_error(c,
                                    Status(Errc::invalid_argument, "Invalid part-number-marker"));
  }
  if (auto m = c.query_value("max-parts")) {
    std::int64_t v = 0;
    auto [p, ec] = std::from_chars(m->data(), m->data() + m->size(), v);
    if (ec != std::errc() || v < 0)
      co_return co_await send_error(c, Status(Errc::invalid_argument, "Invalid max-parts"));
    max_parts = static_cast<std::uint32_t>(std::min<std::int64_t>(v, 1000));
  }
  // Ask for one more than we return to learn whether the listing is truncated.
  auto parts = store->list_parts(c.bucket, c.key, upload_id, marker, max_parts + 1);
  if (!parts.ok()) co_return co_await send_error(c, parts.status());
  bool truncated = parts->size() > max_parts;
  if (truncated) parts->resize(max_parts);
  const std::string& owner = upload->meta_template.owner;
  ListPartsResult doc;
  doc.bucket = c.bucket;
  doc.key = c.key;
  doc.upload_id = upload_id;
  doc.initiator = {owner, owner};
  doc.owner = {owner, owner};
  doc.storage_class = "STANDARD";
  doc.part_number_marker = marker;
  if (!parts->empty()) doc.next_part_number_marker = parts->back().part_number;
  doc.max_parts = max_parts;
  doc.is_truncated = truncated;
  doc.checksum_algorithm = upload->checksum_algorithm;
  for (const auto& p : *parts) {
    doc.parts.push_back({p.part_number,
                         iso8601_ms(from_ns(p.mtime_ns)),
                         p.etag,
                         p.size,
                         {p.checksums.begin(), p.checksums.end()}});
  }
  co_await send_xml(c, bhttp::status::ok, encode_list_parts(doc));
}

}  // namespace objdirect::s3
