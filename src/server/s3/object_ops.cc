// Object operations: PutObject, GetObject/HeadObject (ranges, conditionals, checksums, sendfile),
// DeleteObject and CopyObject.
#include <algorithm>
#include <charconv>
#include <chrono>

#include "common/checksum.hpp"
#include "common/limits.hpp"
#include "common/scratch_buffer.hpp"
#include "common/time.hpp"
#include "common/uri.hpp"
#include "s3/conditional.hpp"
#include "s3/documents.hpp"
#include "s3/encoded_words.hpp"
#include "s3/names.hpp"
#include "s3/range.hpp"
#include "s3/tagging.hpp"
#include "s3/xml.hpp"
#include "server/s3/s3_internal.hpp"

namespace objdirect::s3 {

namespace {

// Strips "aws-chunked" from a Content-Encoding list ("gzip, aws-chunked" -> "gzip").
std::string strip_aws_chunked(std::string_view enc) {
  std::string out;
  std::size_t pos = 0;
  while (pos <= enc.size()) {
    auto comma = enc.find(',', pos);
    std::string_view part =
        enc.substr(pos, comma == std::string_view::npos ? enc.npos : comma - pos);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    while (!part.empty() && part.back() == ' ') part.remove_suffix(1);
    if (!part.empty() && part != "aws-chunked") {
      if (!out.empty()) out += ", ";
      out += part;
    }
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return out;
}

}  // namespace

Task<Status> send_object_body(Ctx& c, storage::ObjectReader& reader, std::uint64_t offset,
                              std::uint64_t length, std::size_t buf_bytes) {
  auto extents = reader.extents(offset, length);
  if (extents.ok() && !extents->empty()) {
    for (const auto& e : *extents) {
      auto st = co_await c.ex.send_file(http::FileRegion{e.fd, e.file_offset, e.length});
      if (!st.ok()) co_return st;
    }
    co_return Status::Ok();
  }
  ScratchBuffer buf(std::min<std::uint64_t>(buf_bytes, std::max<std::uint64_t>(length, 1)));
  while (length > 0) {
    auto want = static_cast<std::size_t>(std::min<std::uint64_t>(length, buf.size()));
    auto n = reader.pread(std::span(buf.data(), want), offset);
    if (!n.ok()) co_return n.status();
    if (*n == 0) co_return Status(Errc::io_error, "object data shorter than its metadata");
    auto st = co_await c.ex.send_raw(std::span<const std::byte>(buf.data(), *n));
    if (!st.ok()) co_return st;
    offset += *n;
    length -= *n;
  }
  co_return Status::Ok();
}

std::string quote_etag(std::string_view etag) {
  std::string q = "\"";
  q += etag;
  q += '"';
  return q;
}

Result<storage::ObjectMeta> meta_from_headers(const Ctx& c) {
  storage::ObjectMeta m;
  m.key = c.key;
  m.owner = c.auth.access_key;
  m.content_type = c.header("content-type").value_or("");
  m.content_encoding = strip_aws_chunked(c.header("content-encoding").value_or(""));
  m.content_disposition = c.header("content-disposition").value_or("");
  m.content_language = c.header("content-language").value_or("");
  m.cache_control = c.header("cache-control").value_or("");
  m.expires = c.header("expires").value_or("");
  std::size_t meta_bytes = 0;
  for (const auto& f : c.req) {
    std::string name(f.name_string());
    for (auto& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    constexpr std::string_view kPrefix = "x-amz-meta-";
    if (!name.starts_with(kPrefix)) continue;
    std::string k = name.substr(kPrefix.size());
    meta_bytes += k.size() + f.value().size();
    // Stored decoded: a value sent as RFC 2047 encoded words (docs/s3-compatibility.md).
    m.user_meta.emplace_back(std::move(k), decode_metadata_value(f.value()));
  }
  if (meta_bytes > limits::user_metadata_bytes_max) {
    return Status(Errc::invalid_argument /* MetadataTooLarge */,
                  "Your metadata headers exceed the maximum allowed metadata size of " +
                      std::to_string(limits::user_metadata_bytes_max) + " bytes");
  }
  if (auto t = c.header("x-amz-tagging")) {
    auto tags = parse_tagging_header(*t);
    if (!tags.ok()) return tags.status();
    m.tags = std::move(*tags);
  }
  OBJDIRECT_RETURN_IF_ERROR(check_sse_exclusive(c));
  if (auto sse = c.header("x-amz-server-side-encryption"); sse && *sse != "AES256") {
    return Status(Errc::not_implemented, "Server-side encryption '" + *sse + "' is not supported");
  }
  return m;
}

void add_object_headers(http::Fields& f, const storage::ObjectMeta& m) {
  f.set(bhttp::field::etag, quote_etag(m.etag));
  f.set(bhttp::field::last_modified, http_date(from_ns(m.mtime_ns)));
  f.set(bhttp::field::content_type,
        m.content_type.empty() ? "binary/octet-stream" : m.content_type);
  f.set(bhttp::field::accept_ranges, "bytes");
  if (!m.content_encoding.empty()) f.set(bhttp::field::content_encoding, m.content_encoding);
  if (!m.content_disposition.empty())
    f.set(bhttp::field::content_disposition, m.content_disposition);
  if (!m.content_language.empty()) f.set(bhttp::field::content_language, m.content_language);
  if (!m.cache_control.empty()) f.set(bhttp::field::cache_control, m.cache_control);
  if (!m.expires.empty()) f.set(bhttp::field::expires, m.expires);
  // Non-ASCII values go out RFC 2047-encoded, as from S3.
  for (const auto& [k, v] : m.user_meta) f.insert("x-amz-meta-" + k, encode_metadata_value(v));
  if (!m.version_id.empty()) f.set("x-amz-version-id", m.version_id);
}

Result<std::optional<std::string>> version_id_param(const Ctx& c) {
  auto v = c.query_value("versionId");
  if (v && v->empty()) {
    return Status(Errc::invalid_argument, "Version id cannot be the empty string");
  }
  return v;
}

Result<std::unique_ptr<storage::ObjectReader>> S3Service::Impl::open_version(
    Ctx& c, std::string_view bucket, std::string_view key,
    const std::optional<std::string>& version_id, bool copy_source) {
  // The SSE-C headers are checked before the store is asked (a backend without SSE-C: 501 at
  // once). Passed through (passes_sse_c()): the key goes with the open; the service behind
  // checks it.
  auto sse = passed_sse_c(c, copy_source);
  if (!sse.ok()) return sse.status();
  if (sse->present()) {
    auto id = store_version_id(version_id);
    if (!id.ok()) return id.status();
    auto reader = store->open_object_sse(bucket, key, *id, *sse);
    if (!reader.ok()) note_delete_marker(c, bucket, key, version_id, reader.code());
    return reader;
  }
  if (!store->supports_versioning()) {
    if (version_id && *version_id != "null") {
      return Status(Errc::not_implemented, "This server's storage backend does not keep versions");
    }
    return store->open_object(bucket, key);
  }
  auto reader = version_id ? store->open_object_version(bucket, key, *version_id)
                           : store->open_object(bucket, key);
  if (!reader.ok()) note_delete_marker(c, bucket, key, version_id, reader.code());
  return reader;
}

void S3Service::Impl::note_delete_marker(Ctx& c, std::string_view bucket, std::string_view key,
                                         const std::optional<std::string>& version_id, Errc code) {
  // A delete marker: AWS says so in x-amz-delete-marker, with the marker's id.
  const bool marker_by_id = version_id && code == Errc::method_not_allowed;
  const bool maybe_marker = !version_id && code == Errc::no_such_key;
  if (!store->supports_versioning() || !(marker_by_id || maybe_marker)) return;
  auto m = store->head_object_version(bucket, key, version_id.value_or(""));
  if (!m.ok() || !m->delete_marker) return;
  c.version_headers = {{"x-amz-delete-marker", "true"}, {"x-amz-version-id", m->version_id}};
  if (marker_by_id) {
    c.version_headers.emplace_back("Last-Modified", http_date(from_ns(m->mtime_ns)));
    c.version_headers.emplace_back("Allow", "DELETE");
  }
}

Result<std::string> S3Service::Impl::store_version_id(
    const std::optional<std::string>& version_id) const {
  if (!version_id) return std::string();
  if (store->supports_versioning()) return *version_id;
  if (*version_id != "null") {
    return Status(Errc::not_implemented, "This server's storage backend does not keep versions");
  }
  return std::string();
}

Result<storage::ObjectMeta> S3Service::Impl::head_version(
    Ctx& c, std::string_view bucket, std::string_view key,
    const std::optional<std::string>& version_id, bool with_sse_c) {
  auto id = store_version_id(version_id);
  if (!id.ok()) return id.status();
  if (with_sse_c) {
    auto sse = passed_sse_c(c, false);
    if (!sse.ok()) return sse.status();
    if (sse->present()) {
      auto m = store->head_object_sse(bucket, key, *id, *sse);
      if (!m.ok()) note_delete_marker(c, bucket, key, version_id, m.code());
      return m;
    }
  }
  if (id->empty()) {
    auto m = store->head_object(bucket, key);
    if (!m.ok()) note_delete_marker(c, bucket, key, std::nullopt, m.code());
    return m;
  }
  auto m = store->head_object_version(bucket, key, *id);
  if (!m.ok() || !m->delete_marker) return m;
  note_delete_marker(c, bucket, key, version_id, Errc::method_not_allowed);
  return Status(Errc::method_not_allowed,
                "The specified method is not allowed against this resource.");
}

Task<void> S3Service::Impl::put_object(Ctx& c) {
  if (auto st = validate_object_key(c.key); !st.ok()) co_return co_await send_error(c, st);
  if (auto st = check_bucket_access(c); !st.ok()) co_return co_await send_error(c, st);
  auto cond = parse_write_conditions(c.header("if-match"), c.header("if-none-match"));
  if (!cond.ok()) co_return co_await send_error(c, cond.status());
  auto meta = meta_from_headers(c);
  if (!meta.ok()) co_return co_await send_error(c, meta.status());
  auto key = request_customer_key(c, false);
  if (!key.ok()) co_return co_await send_error(c, key.status());
  // SSE-C passed through (passes_sse_c()): the plaintext goes to the store with the key's headers
  // and the service behind encrypts; nothing is encrypted here.
  auto pass = passed_sse_c(c, false);
  if (!pass.ok()) co_return co_await send_error(c, pass.status());
  if (pass->present()) key->reset();
  if (*key) meta->sse = new_sse_params(**key, true);

  auto writer = store->begin_write_for(c.bucket, c.key);
  if (!writer.ok()) co_return co_await send_error(c, writer.status());
  // SSE-C: the body (HTTP or RDMA) is hashed as plaintext and stored encrypted.
  std::optional<EncryptingWriter> enc;
  if (*key) enc.emplace(**writer, **key, meta->sse.iv, opts.io_buffer_bytes);
  auto payload = co_await receive(c, enc ? static_cast<storage::BlobWriter&>(*enc) : **writer,
                                  limits::put_bytes_max, std::nullopt);
  if (!payload.ok()) {
    enc.reset();
    writer->reset();  // unlink the temporary file (and free its space) before answering
    co_return co_await send_put_error(c, payload.status());
  }
  enc.reset();

  meta->size = payload->size;
  meta->etag = *key ? sse_c_etag(**key, payload->md5_raw) : payload->md5_hex;
  meta->checksums = payload->checksums;
  auto committed = store->commit_object_sse(c.bucket, std::move(*meta), std::move(*writer),
                                            to_storage(*cond), *pass);
  if (!committed.ok()) co_return co_await send_error(c, committed.status());
  http::Fields f;
  f.set(bhttp::field::etag, quote_etag(committed->etag));
  for (const auto& [algo, v] : committed->checksums) {
    auto a = checksum_from_name(algo);
    if (a) f.set(checksum_header(*a), v);
  }
  if (!committed->version_id.empty()) f.set("x-amz-version-id", committed->version_id);
  add_sse_c_headers(f, committed->sse);
  co_await send_empty(c, bhttp::status::ok, std::move(f));
}

Task<void> S3Service::Impl::get_object(Ctx& c) {
  if (auto st = validate_object_key(c.key); !st.ok()) co_return co_await send_error(c, st);
  auto version_id = version_id_param(c);
  if (!version_id.ok()) co_return co_await send_error(c, version_id.status());
  if (*version_id) c.op = c.is_head ? "HeadObjectVersion" : "GetObjectVersion";
  if (auto st = check_bucket_access(c); !st.ok()) co_return co_await send_error(c, st);
  auto reader = open_version(c, c.bucket, c.key, *version_id);
  if (!reader.ok()) co_return co_await send_error(c, reader.status());
  // SSE-C: GET and HEAD need the object's key (docs/sse-c.md); the bytes are then decrypted on
  // their way out, over HTTP and RDMA alike.
  auto key = key_for_read(c, (*reader)->meta(), false);
  if (!key.ok()) co_return co_await send_error(c, key.status());
  if (*key) *reader = decrypting_reader(std::move(*reader), **key);
  const storage::ObjectMeta& m = (*reader)->meta();

  // Conditionals come before Range: an If-Match mismatch is 412 even when the range is bad.
  Conditions cond{c.header("if-match"), c.header("if-none-match"), c.header("if-modified-since"),
                  c.header("if-unmodified-since")};
  if (auto st = evaluate_read(cond, m.etag, m.mtime_ns); !st.ok()) {
    http::Fields f = base_headers(c);
    if (st.code() == Errc::not_modified) {
      f.set(bhttp::field::etag, quote_etag(m.etag));
      f.set(bhttp::field::last_modified, http_date(from_ns(m.mtime_ns)));
      (void)co_await c.ex.send_header(bhttp::status::not_modified, std::move(f), 0);
      co_return;
    }
    co_return co_await send_error(c, st);
  }

  std::optional<ByteRange> range;
  std::optional<std::uint32_t> part_number;
  if (auto pn = c.query_value("partNumber")) {
    std::uint32_t n = 0;
    auto [p, ec] = std::from_chars(pn->data(), pn->data() + pn->size(), n);
    if (ec != std::errc() || p != pn->data() + pn->size() || n < 1 || n > limits::parts_max) {
      co_return co_await send_error(
          c, Status(Errc::invalid_argument,
                    "Part number must be an integer between 1 and 10000, inclusive"));
    }
    if (c.header("range")) {
      co_return co_await send_error(
          c, Status(Errc::invalid_request,
                    "Cannot specify both Range header and partNumber query parameter"));
    }
    part_number = n;
    // A part beyond the object's: 416 InvalidPartNumber naming both counts (AWS); a single-PUT
    // object has one part.
    const std::size_t actual = m.parts.empty() ? 1 : m.parts.size();
    if (n > actual) {
      // A named vector: GCC 12 rejects the braced list as a co_await operand.
      std::vector<std::pair<std::string, std::string>> counts;
      counts.emplace_back("PartNumberRequested", std::to_string(n));
      counts.emplace_back("ActualPartCount", std::to_string(actual));
      co_return co_await send_error(
          c, Status(Errc::invalid_part_number, "The requested partnumber is not satisfiable"),
          std::move(counts));
    }
    if (m.parts.empty()) {
      if (m.size > 0) range = ByteRange{0, m.size - 1};
    } else {
      std::uint64_t off = 0;
      for (std::uint32_t i = 0; i + 1 < n; ++i) off += m.parts[i].size;
      if (m.parts[n - 1].size > 0) range = ByteRange{off, off + m.parts[n - 1].size - 1};
    }
  } else if (auto rh = c.header("range")) {
    auto r = parse_range(*rh, m.size);
    if (!r.ok()) {
      http::Fields f = base_headers(c);
      f.set(bhttp::field::content_range, "bytes */" + std::to_string(m.size));
      if (c.is_head) {
        (void)co_await c.ex.send_header(bhttp::status::range_not_satisfiable, std::move(f), 0);
        co_return;
      }
      f.set(bhttp::field::content_type, "application/xml");
      (void)co_await c.ex.send(bhttp::status::range_not_satisfiable, std::move(f),
                               error_xml("InvalidRange", "The requested range is not satisfiable",
                                         c.resource(), c.request_id));
      co_return;
    }
    range = *r;
  }

  http::Fields f = base_headers(c);
  add_object_headers(f, m);
  add_sse_c_headers(f, m.sse);
  // GetObject's response-* query parameters override the stored headers (presigned downloads).
  static const std::pair<std::string_view, bhttp::field> kOverrides[] = {
      {"response-content-type", bhttp::field::content_type},
      {"response-content-language", bhttp::field::content_language},
      {"response-expires", bhttp::field::expires},
      {"response-cache-control", bhttp::field::cache_control},
      {"response-content-disposition", bhttp::field::content_disposition},
      {"response-content-encoding", bhttp::field::content_encoding}};
  for (const auto& [name, field] : kOverrides) {
    if (auto v = c.query_value(name)) f.set(field, *v);
  }
  if (!c.is_head && !m.tags.empty()) f.set("x-amz-tagging-count", std::to_string(m.tags.size()));
  if (part_number && !m.parts.empty())
    f.set("x-amz-mp-parts-count", std::to_string(m.parts.size()));
  // Whole-object checksums only for whole-object responses, and only when asked for.
  const bool whole = !range || (range->first == 0 && range->last + 1 == m.size && !part_number);
  if (c.header("x-amz-checksum-mode") == "ENABLED" && whole) {
    for (const auto& [algo, v] : m.checksums) {
      if (auto a = checksum_from_name(algo)) f.set(checksum_header(*a), v);
    }
    if (!m.checksums.empty())
      f.set("x-amz-checksum-type", m.parts.empty() ? "FULL_OBJECT" : "COMPOSITE");
  }
  bhttp::status status = bhttp::status::ok;
  std::uint64_t offset = 0, length = m.size;
  if (range &&
      !(part_number && m.parts.empty() && range->first == 0 && range->last + 1 == m.size)) {
    status = bhttp::status::partial_content;
    offset = range->first;
    length = range->length();
    f.set(bhttp::field::content_range, content_range(*range, m.size));
  }
  // RDMA GET: handled by server/rdma when a token is present (see rdma_ops.cc).
  if (c.header("x-amz-rdma-token") && !c.is_head) {
    co_return co_await rdma_get(c, **reader, status, std::move(f), offset, length);
  }
  if (c.is_head) {
    (void)co_await c.ex.send_header(status, std::move(f), length);
    co_return;
  }
  auto st = co_await c.ex.send_header(status, std::move(f), length);
  if (!st.ok()) co_return;
  st = co_await send_object_body(c, **reader, offset, length, opts.io_buffer_bytes);
  if (!st.ok()) c.ex.close_after_response();  // the client sees a short body and retries
}

Task<void> S3Service::Impl::delete_object(Ctx& c) {
  if (auto st = validate_object_key(c.key); !st.ok()) co_return co_await send_error(c, st);
  auto version_id = version_id_param(c);
  if (!version_id.ok()) co_return co_await send_error(c, version_id.status());
  if (*version_id) c.op = "DeleteObjectVersion";
  if (auto st = check_bucket_access(c); !st.ok()) co_return co_await send_error(c, st);
  http::Fields f;
  if (store->supports_versioning()) {
    auto out = store->delete_object_version(c.bucket, c.key, version_id->value_or(""));
    if (!out.ok()) co_return co_await send_error(c, out.status());
    if (out->delete_marker) f.set("x-amz-delete-marker", "true");
    if (!out->version_id.empty()) f.set("x-amz-version-id", out->version_id);
  } else {
    if (*version_id && **version_id != "null") {
      co_return co_await send_error(
          c, Status(Errc::not_implemented, "This server's storage backend does not keep versions"));
    }
    if (auto st = store->delete_object(c.bucket, c.key); !st.ok())
      co_return co_await send_error(c, st);
  }
  co_await send_empty(c, bhttp::status::no_content, std::move(f));
}

// Parses x-amz-copy-source ("/bucket/key" or "bucket/key", URL-encoded, optional ?versionId=).
Result<std::pair<std::string, std::string>> parse_copy_source(std::string_view src) {
  auto q = src.find('?');
  if (q != std::string_view::npos) {
    if (auto v = copy_source_version(src); !v.ok()) return v.status();
    src = src.substr(0, q);
  }
  auto decoded = uri_decode(src);
  if (!decoded) return Status(Errc::invalid_argument, "Invalid copy source encoding");
  std::string_view s = *decoded;
  if (!s.empty() && s.front() == '/') s.remove_prefix(1);
  auto slash = s.find('/');
  if (slash == std::string_view::npos || slash == 0 || slash + 1 == s.size()) {
    return Status(Errc::invalid_argument,
                  "Copy Source must mention the source bucket and key: sourcebucket/sourcekey");
  }
  return std::make_pair(std::string(s.substr(0, slash)), std::string(s.substr(slash + 1)));
}

Result<std::optional<std::string>> copy_source_version(std::string_view src) {
  auto q = src.find('?');
  if (q == std::string_view::npos) return std::optional<std::string>();
  std::string_view query = src.substr(q + 1);
  if (query.empty()) return std::optional<std::string>();
  constexpr std::string_view kVersion = "versionId=";
  if (!query.starts_with(kVersion) || query.find('&') != std::string_view::npos) {
    return Status(Errc::invalid_argument, "Unsupported copy source parameter");
  }
  auto id = uri_decode(query.substr(kVersion.size()));
  if (!id || id->empty()) return Status(Errc::invalid_argument, "Invalid version id specified");
  return std::optional<std::string>(std::move(*id));
}

Status evaluate_copy_conditions(const Ctx& c, const storage::ObjectMeta& m) {
  Conditions cond{c.header("x-amz-copy-source-if-match"),
                  c.header("x-amz-copy-source-if-none-match"),
                  c.header("x-amz-copy-source-if-modified-since"),
                  c.header("x-amz-copy-source-if-unmodified-since")};
  Status st = evaluate_read(cond, m.etag, m.mtime_ns);
  // For copies every failed condition is 412 (there is no 304).
  if (st.code() == Errc::not_modified)
    return Status(Errc::precondition_failed,
                  "At least one of the pre-conditions you specified did not hold");
  return st;
}

// Streams [offset, offset+length) of `reader` into `w`, computing MD5 and optional checksums.
Result<PayloadResult> copy_data(storage::ObjectReader& reader, std::uint64_t offset,
                                std::uint64_t length, storage::BlobWriter& w,
                                const std::vector<ChecksumAlgo>& algos, std::size_t buf_bytes) {
  Md5 md5;
  std::vector<Checksummer> sums;
  for (auto a : algos) sums.emplace_back(a);
  ScratchBuffer buf(std::min<std::uint64_t>(buf_bytes, std::max<std::uint64_t>(length, 1)));
  std::uint64_t done = 0;
  while (done < length) {
    auto want = static_cast<std::size_t>(std::min<std::uint64_t>(length - done, buf.size()));
    auto n = reader.pread(std::span(buf.data(), want), offset + done);
    if (!n.ok()) return n.status();
    if (*n == 0) return Status(Errc::io_error, "source object shorter than its metadata");
    std::span<const std::byte> chunk(buf.data(), *n);
    md5.update(chunk.data(), chunk.size());
    for (auto& s : sums) s.update(chunk.data(), chunk.size());
    OBJDIRECT_RETURN_IF_ERROR(w.append(chunk));
    done += *n;
  }
  PayloadResult out;
  out.size = length;
  out.md5_raw = md5.raw();
  out.md5_hex = hex_encode(out.md5_raw);
  for (auto& s : sums) {
    std::string raw = s.digest_raw();
    out.checksums[std::string(checksum_name(s.algo()))] = base64_encode(raw);
    out.checksums_raw[std::string(checksum_name(s.algo()))] = raw;
  }
  return out;
}

Task<void> S3Service::Impl::copy_object(Ctx& c) {
  if (auto st = validate_object_key(c.key); !st.ok()) co_return co_await send_error(c, st);
  if (auto st = check_bucket_access(c); !st.ok()) co_return co_await send_error(c, st);
  auto src = parse_copy_source(*c.header("x-amz-copy-source"));
  if (!src.ok()) co_return co_await send_error(c, src.status());
  auto src_version = copy_source_version(*c.header("x-amz-copy-source"));
  if (!src_version.ok()) co_return co_await send_error(c, src_version.status());
  Ctx src_ctx{c.ex, c.req, c.request_id, src->first, src->second, {}, c.auth, false};
  // Reading the source needs s3:GetObject on it (s3:GetObjectVersion for a version).
  src_ctx.op = *src_version ? "GetObjectVersion" : "GetObject";
  if (auto st = check_bucket_access(src_ctx); !st.ok()) co_return co_await send_error(c, st);
  auto reader = open_version(src_ctx, src->first, src->second, *src_version, true);
  if (!reader.ok()) {
    // A delete marker as the source is the client's error (400 InvalidRequest with AWS).
    if (!src_ctx.version_headers.empty() && reader.code() == Errc::method_not_allowed) {
      co_return co_await send_error(
          c, Status(Errc::invalid_request,
                    "The source of a copy request may not specifically refer to a delete "
                    "marker by version id."));
    }
    co_return co_await send_error(c, reader.status());
  }
  // SSE-C: the source needs its key in x-amz-copy-source-server-side-encryption-customer-*; the
  // copy may use another key, or none (x-amz-server-side-encryption-customer-*): decrypted and
  // encrypted again.
  auto src_key = key_for_read(c, (*reader)->meta(), true);
  if (!src_key.ok()) co_return co_await send_error(c, src_key.status());
  if (*src_key) *reader = decrypting_reader(std::move(*reader), **src_key);
  auto dst_key = request_customer_key(c, false);
  if (!dst_key.ok()) co_return co_await send_error(c, dst_key.status());
  // Passed through: the copy's key goes with the write, the service encrypts.
  auto dst_pass = passed_sse_c(c, false);
  if (!dst_pass.ok()) co_return co_await send_error(c, dst_pass.status());
  const bool dst_passed = dst_pass->present();
  if (dst_passed) dst_key->reset();
  const storage::ObjectMeta& sm = (*reader)->meta();
  const bool sse_involved = sm.sse.enabled() || dst_key->has_value() || dst_passed;
  if (auto st = evaluate_copy_conditions(c, sm); !st.ok()) co_return co_await send_error(c, st);
  auto cond = parse_write_conditions(c.header("if-match"), c.header("if-none-match"));
  if (!cond.ok()) co_return co_await send_error(c, cond.status());

  std::string directive = c.header("x-amz-metadata-directive").value_or("COPY");
  if (directive != "COPY" && directive != "REPLACE") {
    co_return co_await send_error(c, Status(Errc::invalid_argument, "Unknown metadata directive."));
  }
  std::string tagging_directive = c.header("x-amz-tagging-directive").value_or("COPY");
  if (tagging_directive != "COPY" && tagging_directive != "REPLACE") {
    co_return co_await send_error(c, Status(Errc::invalid_argument, "Unknown tagging directive."));
  }
  // An older version copied onto its own key is a restore, not a copy onto itself.
  bool same = src->first == c.bucket && src->second == c.key;
  if (same && *src_version) {
    auto latest = store->head_object(c.bucket, c.key);
    same = latest.ok() && latest->version_id == sm.version_id;
  }
  if (same && directive == "COPY" && !sse_involved) {
    co_return co_await send_error(
        c, Status(Errc::invalid_request,
                  "This copy request is illegal because it is trying to copy an object to itself "
                  "without changing the object's metadata, storage class, website redirect "
                  "location or encryption attributes."));
  }
  storage::ObjectMeta meta;
  if (directive == "REPLACE") {
    auto m = meta_from_headers(c);
    if (!m.ok()) co_return co_await send_error(c, m.status());
    meta = std::move(*m);
  } else {
    meta = sm;
    meta.key = c.key;
    meta.owner = c.auth.access_key;
  }
  // Tags follow x-amz-tagging-directive alone: COPY keeps the source's, REPLACE takes
  // x-amz-tagging (none when absent), whatever the metadata directive says.
  if (tagging_directive == "COPY" && !store->tags_in_meta()) {
    // The source's metadata does not carry its tags (the gateway): ask for them.
    auto id = store_version_id(*src_version);
    if (!id.ok()) co_return co_await send_error(c, id.status());
    auto st = store->get_object_version_tags(src->first, src->second, *id);
    if (st.ok()) {
      meta.tags = std::move(st->tags);
    } else if (st.code() != Errc::not_implemented) {
      co_return co_await send_error(c, st.status());
    }
  } else if (tagging_directive == "COPY") {
    meta.tags = sm.tags;
  } else if (auto t = c.header("x-amz-tagging")) {
    auto tags = parse_tagging_header(*t);
    if (!tags.ok()) co_return co_await send_error(c, tags.status());
    meta.tags = std::move(*tags);
  } else {
    meta.tags.clear();
  }
  meta.size = sm.size;
  meta.sse = *dst_key ? new_sse_params(**dst_key, true) : storage::SseCustomer{};
  if (dst_passed) {
    meta.sse.algorithm = dst_pass->algorithm;
    meta.sse.key_md5 = dst_pass->key_md5;
  }

  Result<storage::ObjectMeta> committed = Status(Errc::internal, "unset");
  if (same && cond->kind == WriteConditionSpec::Kind::none && !sse_involved) {
    // Metadata-only change: no data moves.
    meta.etag = sm.etag;
    meta.checksums = sm.checksums;
    meta.parts = sm.parts;
    committed = store->replace_meta(c.bucket, std::move(meta), sm.etag);
  } else {
    auto writer = store->begin_write_for(c.bucket, c.key);
    if (!writer.ok()) co_return co_await send_error(c, writer.status());
    std::vector<ChecksumAlgo> algos;
    for (const auto& [name, v] : sm.checksums) {
      if (auto a = checksum_from_name(name)) algos.push_back(*a);
    }
    if (auto a = c.header("x-amz-checksum-algorithm")) {
      auto algo = checksum_from_name(*a);
      if (!algo)
        co_return co_await send_error(
            c, Status(Errc::invalid_request, "Unsupported checksum algorithm"));
      algos = {*algo};
    }
    std::optional<EncryptingWriter> enc;
    if (*dst_key) enc.emplace(**writer, **dst_key, meta.sse.iv, opts.io_buffer_bytes);
    auto data =
        copy_data(**reader, 0, sm.size, enc ? static_cast<storage::BlobWriter&>(*enc) : **writer,
                  algos, opts.io_buffer_bytes);
    enc.reset();
    if (!data.ok()) {
      writer->reset();  // unlink the temporary file (and free its space) before answering
      co_return co_await send_error(c, data.status());
    }
    // A copy is a single-part object: its ETag is the MD5 of the bytes (keyed under SSE-C), its
    // checksums full-object.
    meta.etag = *dst_key ? sse_c_etag(**dst_key, data->md5_raw) : data->md5_hex;
    meta.checksums = data->checksums;
    meta.parts.clear();
    committed = store->commit_object_sse(c.bucket, std::move(meta), std::move(*writer),
                                         to_storage(*cond), *dst_pass);
  }
  if (!committed.ok()) co_return co_await send_error(c, committed.status());
  http::Fields f;
  if (!committed->version_id.empty()) f.set("x-amz-version-id", committed->version_id);
  if (!sm.version_id.empty()) f.set("x-amz-copy-source-version-id", sm.version_id);
  add_sse_c_headers(f, committed->sse);
  // Built before the co_await (GCC 12 destroys braced temporaries in a co_await twice).
  const CopyResult copied{false,
                          iso8601_ms(from_ns(committed->mtime_ns)),
                          committed->etag,
                          {committed->checksums.begin(), committed->checksums.end()}};
  std::string xml = encode_copy_result(copied);
  co_await send_xml(c, bhttp::status::ok, std::move(xml), std::move(f));
}

}  // namespace objdirect::s3
