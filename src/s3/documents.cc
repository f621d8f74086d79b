#include "s3/documents.hpp"

#include "common/assert.hpp"
#include "common/limits.hpp"
#include "s3/conditional.hpp"
#include "s3/xml_internal.hpp"

namespace objdirect::s3 {
namespace {

using detail::about;
using detail::load;
using detail::local_name;
using detail::malformed;
using detail::text_of;
using detail::trim;
using detail::unique_child_text;

std::string quoted(std::string_view etag) {
  std::string s;
  s.reserve(etag.size() + 2);
  s += '"';
  s += etag;
  s += '"';
  return s;
}

// Element names the writer accepts as tags (ASCII letters, digits, '-', '_', '.').
bool is_plain_tag(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
          c == '_' || c == '.')) {
      return false;
    }
  }
  return true;
}

const char* boolean(bool b) {
  return b ? "true" : "false";
}

void write_owner(XmlWriter& w, std::string_view tag, const Owner& o) {
  w.open(tag);
  w.element("ID", o.id);
  w.element("DisplayName", o.display_name);
  w.close();
}

void write_checksums(XmlWriter& w, const ChecksumList& checksums) {
  for (const auto& [algo, value] : checksums) w.element("Checksum" + algo, value);
}

// Child elements named `name`, in document order.
template <typename F>
Status each_child(const pugi::xml_node& parent, std::string_view name, F&& f) {
  for (pugi::xml_node c : parent.children()) {
    if (c.type() != pugi::node_element || local_name(c) != name) continue;
    OBJDIRECT_RETURN_IF_ERROR(f(c));
  }
  return Status::Ok();
}

// Readers: each sets `out` from the unique child `name` of `parent`, leaving it as is when the
// child is absent, and fails on a repeated or non-leaf child or a bad value.
Status read(const pugi::xml_node& parent, std::string_view name, std::string& out) {
  auto t = unique_child_text(parent, name);
  if (!t.ok()) return t.status();
  if (*t) out = std::move(**t);
  return Status::Ok();
}

Status read(const pugi::xml_node& parent, std::string_view name, std::optional<std::string>& out) {
  auto t = unique_child_text(parent, name);
  if (!t.ok()) return t.status();
  if (*t) out = std::move(**t);
  return Status::Ok();
}

Status read_etag(const pugi::xml_node& parent, std::string& out) {
  auto t = unique_child_text(parent, "ETag");
  if (!t.ok()) return t.status();
  if (*t) out = unquote_etag(**t);
  return Status::Ok();
}

template <typename T>
Status read_number(const pugi::xml_node& parent, std::string_view name, T& out) {
  auto t = unique_child_text(parent, name);
  if (!t.ok()) return t.status();
  if (!*t) return Status::Ok();
  const std::string_view s = trim(**t);
  if (s.empty() || s.size() > 20) return malformed(about(name, "must be a decimal number"));
  std::uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return malformed(about(name, "must be a decimal number"));
    const std::uint64_t d = static_cast<std::uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return malformed(about(name, "is out of range"));
    v = v * 10 + d;
  }
  if (v > static_cast<std::uint64_t>(static_cast<T>(-1))) {
    return malformed(about(name, "is out of range"));
  }
  out = static_cast<T>(v);
  return Status::Ok();
}

template <typename T>
Status read_number(const pugi::xml_node& parent, std::string_view name, std::optional<T>& out) {
  auto t = unique_child_text(parent, name);
  if (!t.ok()) return t.status();
  if (!*t) return Status::Ok();
  T v{};
  OBJDIRECT_RETURN_IF_ERROR(read_number(parent, name, v));
  out = v;
  return Status::Ok();
}

Status read_bool(const pugi::xml_node& parent, std::string_view name, bool& out) {
  auto t = unique_child_text(parent, name);
  if (!t.ok()) return t.status();
  if (!*t) return Status::Ok();
  const std::string_view s = trim(**t);
  if (s == "true") {
    out = true;
  } else if (s == "false") {
    out = false;
  } else {
    return malformed(about(name, "must be true or false"));
  }
  return Status::Ok();
}

Status read_owner(const pugi::xml_node& parent, std::string_view name, Owner& out) {
  return each_child(parent, name, [&](const pugi::xml_node& o) -> Status {
    OBJDIRECT_RETURN_IF_ERROR(read(o, "ID", out.id));
    return read(o, "DisplayName", out.display_name);
  });
}

// <ChecksumCRC32C>... children in document order ("ChecksumAlgorithm" and "ChecksumType" are
// other fields, not values).
Status read_checksums(const pugi::xml_node& parent, ChecksumList& out) {
  for (pugi::xml_node c : parent.children()) {
    if (c.type() != pugi::node_element) continue;
    const std::string_view name = local_name(c);
    if (!name.starts_with("Checksum") || name.size() == 8 || name == "ChecksumAlgorithm" ||
        name == "ChecksumType") {
      continue;
    }
    if (!is_plain_tag(name)) continue;
    std::optional<std::string> value = text_of(c);
    if (!value) return malformed(about(name, "must contain only text"));
    out.emplace_back(std::string(name.substr(8)), std::move(*value));
  }
  return Status::Ok();
}

Status read_prefixes(const pugi::xml_node& root, std::vector<std::string>& out) {
  return each_child(root, "CommonPrefixes", [&](const pugi::xml_node& p) -> Status {
    std::string prefix;
    OBJDIRECT_RETURN_IF_ERROR(read(p, "Prefix", prefix));
    out.push_back(std::move(prefix));
    return Status::Ok();
  });
}

void write_prefixes(XmlWriter& w, const std::vector<std::string>& prefixes) {
  for (const auto& p : prefixes) {
    w.open("CommonPrefixes");
    w.element("Prefix", p);
    w.close();
  }
}

// The root of a reply, which must be named `name` (any prefix); replies may be larger than
// request bodies.
Result<pugi::xml_node> load_reply(pugi::xml_document& doc, std::string_view body,
                                  std::string_view name) {
  auto root = load(doc, body, name, limits::xml_reply_bytes_max);
  if (!root.ok() && name.ends_with("Result")) {
    // moto 5.2 names some reply roots ...Response where S3 says ...Result (ListPartsResponse);
    // clients read replies whatever the root's name, so the gateway does too.
    std::string alias(name.substr(0, name.size() - 6));
    alias += "Response";
    auto again = load(doc, body, alias, limits::xml_reply_bytes_max);
    if (again.ok()) return again;
  }
  return root;
}

}  // namespace

// --- ListBuckets ---------------------------------------------------------------------------------

std::string encode_list_buckets_unchecked(const ListBucketsResult& r) {
  XmlWriter w;
  w.open("ListAllMyBucketsResult", kDocumentXmlns);
  write_owner(w, "Owner", r.owner);
  w.open("Buckets");
  for (const auto& b : r.buckets) {
    w.open("Bucket");
    w.element("Name", b.name);
    w.element("CreationDate", b.creation_date);
    w.close();
  }
  w.close();
  if (!r.continuation_token.empty()) w.element("ContinuationToken", r.continuation_token);
  if (r.prefix) w.element("Prefix", *r.prefix);
  return w.finish();
}

Result<ListBucketsResult> decode_list_buckets(std::string_view body) {
  pugi::xml_document doc;
  auto root = load_reply(doc, body, "ListAllMyBucketsResult");
  if (!root.ok()) return root.status();
  ListBucketsResult r;
  OBJDIRECT_RETURN_IF_ERROR(read_owner(*root, "Owner", r.owner));
  OBJDIRECT_RETURN_IF_ERROR(each_child(*root, "Buckets", [&](const pugi::xml_node& bs) {
    return each_child(bs, "Bucket", [&](const pugi::xml_node& b) -> Status {
      BucketEntry e;
      OBJDIRECT_RETURN_IF_ERROR(read(b, "Name", e.name));
      OBJDIRECT_RETURN_IF_ERROR(read(b, "CreationDate", e.creation_date));
      r.buckets.push_back(std::move(e));
      return Status::Ok();
    });
  }));
  OBJDIRECT_RETURN_IF_ERROR(read(*root, "ContinuationToken", r.continuation_token));
  OBJDIRECT_RETURN_IF_ERROR(read(*root, "Prefix", r.prefix));
  return r;
}

// --- ListObjects ---------------------------------------------------------------------------------

std::string encode_list_objects_unchecked(const ListObjectsResult& r) {
  const bool versions = r.kind == ListKind::versions;
  XmlWriter w;
  w.open(versions ? "ListVersionsResult" : "ListBucketResult", kDocumentXmlns);
  w.element("Name", r.name);
  w.element("Prefix", r.prefix);
  if (r.kind == ListKind::v2) {
    if (r.continuation_token) w.element("ContinuationToken", *r.continuation_token);
    if (!r.start_after.empty()) w.element("StartAfter", r.start_after);
    w.element("KeyCount", r.key_count);
  } else if (r.kind == ListKind::v1) {
    w.element("Marker", r.marker);
  } else {
    w.element("KeyMarker", r.key_marker);
    w.element("VersionIdMarker", r.version_id_marker);
  }
  w.element("MaxKeys", r.max_keys);
  if (!r.delimiter.empty()) w.element("Delimiter", r.delimiter);
  if (!r.encoding_type.empty()) w.element("EncodingType", r.encoding_type);
  w.element("IsTruncated", boolean(r.is_truncated));
  if (!r.next_continuation_token.empty()) {
    w.element("NextContinuationToken", r.next_continuation_token);
  }
  if (!r.next_marker.empty()) w.element("NextMarker", r.next_marker);
  if (!r.next_key_marker.empty()) w.element("NextKeyMarker", r.next_key_marker);
  if (!r.next_version_id_marker.empty()) {
    w.element("NextVersionIdMarker", r.next_version_id_marker);
  }
  for (const auto& o : r.objects) {
    if (versions && o.delete_marker) {
      w.open("DeleteMarker");
      w.element("Key", o.key);
      w.element("VersionId", o.version_id);
      w.element("IsLatest", boolean(o.is_latest));
      w.element("LastModified", o.last_modified);
      if (o.owner) write_owner(w, "Owner", *o.owner);
      w.close();
      continue;
    }
    w.open(versions ? "Version" : "Contents");
    w.element("Key", o.key);
    if (versions) {
      w.element("VersionId", o.version_id);
      w.element("IsLatest", boolean(o.is_latest));
    }
    w.element("LastModified", o.last_modified);
    w.element("ETag", quoted(o.etag));
    for (const auto& algo : o.checksum_algorithms) w.element("ChecksumAlgorithm", algo);
    w.element("Size", o.size);
    w.element("StorageClass", o.storage_class);
    if (o.owner) write_owner(w, "Owner", *o.owner);
    w.close();
  }
  write_prefixes(w, r.common_prefixes);
  return w.finish();
}

Result<ListObjectsResult> decode_list_objects(std::string_view body) {
  pugi::xml_document doc;
  ListObjectsResult r;
  auto root = load_reply(doc, body, "ListBucketResult");
  if (!root.ok()) {
    auto versions = load_reply(doc, body, "ListVersionsResult");
    if (!versions.ok()) return root.status();
    root = versions;
    r.kind = ListKind::versions;
  }
  const pugi::xml_node n = *root;
  OBJDIRECT_RETURN_IF_ERROR(read(n, "Name", r.name));
  OBJDIRECT_RETURN_IF_ERROR(read(n, "Prefix", r.prefix));
  if (r.kind != ListKind::versions) {
    std::optional<std::uint64_t> key_count;
    OBJDIRECT_RETURN_IF_ERROR(read_number(n, "KeyCount", key_count));
    OBJDIRECT_RETURN_IF_ERROR(read(n, "ContinuationToken", r.continuation_token));
    OBJDIRECT_RETURN_IF_ERROR(read(n, "NextContinuationToken", r.next_continuation_token));
    r.kind = key_count || r.continuation_token || !r.next_continuation_token.empty() ? ListKind::v2
                                                                                     : ListKind::v1;
    r.key_count = key_count.value_or(0);
    OBJDIRECT_RETURN_IF_ERROR(read(n, "StartAfter", r.start_after));
    OBJDIRECT_RETURN_IF_ERROR(read(n, "Marker", r.marker));
    OBJDIRECT_RETURN_IF_ERROR(read(n, "NextMarker", r.next_marker));
  } else {
    OBJDIRECT_RETURN_IF_ERROR(read(n, "KeyMarker", r.key_marker));
    OBJDIRECT_RETURN_IF_ERROR(read(n, "VersionIdMarker", r.version_id_marker));
    OBJDIRECT_RETURN_IF_ERROR(read(n, "NextKeyMarker", r.next_key_marker));
    OBJDIRECT_RETURN_IF_ERROR(read(n, "NextVersionIdMarker", r.next_version_id_marker));
  }
  OBJDIRECT_RETURN_IF_ERROR(read_number(n, "MaxKeys", r.max_keys));
  OBJDIRECT_RETURN_IF_ERROR(read(n, "Delimiter", r.delimiter));
  OBJDIRECT_RETURN_IF_ERROR(read(n, "EncodingType", r.encoding_type));
  OBJDIRECT_RETURN_IF_ERROR(read_bool(n, "IsTruncated", r.is_truncated));
  const bool versions = r.kind == ListKind::versions;
  auto read_entry = [&](const pugi::xml_node& c, bool marker) -> Status {
    ObjectEntry o;
    o.delete_marker = marker;
    OBJDIRECT_RETURN_IF_ERROR(read(c, "Key", o.key));
    if (versions) {
      OBJDIRECT_RETURN_IF_ERROR(read(c, "VersionId", o.version_id));
      OBJDIRECT_RETURN_IF_ERROR(read_bool(c, "IsLatest", o.is_latest));
    }
    OBJDIRECT_RETURN_IF_ERROR(read(c, "LastModified", o.last_modified));
    if (!marker) {
      OBJDIRECT_RETURN_IF_ERROR(read_etag(c, o.etag));
      OBJDIRECT_RETURN_IF_ERROR(each_child(c, "ChecksumAlgorithm", [&](const pugi::xml_node& a) {
        std::optional<std::string> t = text_of(a);
        if (!t) return malformed("<ChecksumAlgorithm> must contain only text");
        o.checksum_algorithms.push_back(std::move(*t));
        return Status::Ok();
      }));
      OBJDIRECT_RETURN_IF_ERROR(read_number(c, "Size", o.size));
      OBJDIRECT_RETURN_IF_ERROR(read(c, "StorageClass", o.storage_class));
    }
    bool has_owner = false;
    for (pugi::xml_node x : c.children()) {
      if (x.type() == pugi::node_element && local_name(x) == "Owner") has_owner = true;
    }
    if (has_owner) {
      o.owner.emplace();
      OBJDIRECT_RETURN_IF_ERROR(read_owner(c, "Owner", *o.owner));
    }
    r.objects.push_back(std::move(o));
    return Status::Ok();
  };
  // Versions and delete markers interleave in key order: read them in document order.
  for (pugi::xml_node c : n.children()) {
    if (c.type() != pugi::node_element) continue;
    const std::string_view name = local_name(c);
    if (name == (versions ? "Version" : "Contents")) {
      OBJDIRECT_RETURN_IF_ERROR(read_entry(c, false));
    } else if (versions && name == "DeleteMarker") {
      OBJDIRECT_RETURN_IF_ERROR(read_entry(c, true));
    }
  }
  OBJDIRECT_RETURN_IF_ERROR(read_prefixes(n, r.common_prefixes));
  return r;
}

// --- Multipart ----------------------------------------------------------------------------------

std::string encode_initiate_multipart_unchecked(const InitiateMultipartResult& r) {
  XmlWriter w;
  w.open("InitiateMultipartUploadResult", kDocumentXmlns);
  w.element("Bucket", r.bucket);
  w.element("Key", r.key);
  w.element("UploadId", r.upload_id);
  return w.finish();
}

Result<InitiateMultipartResult> decode_initiate_multipart(std::string_view body) {
  pugi::xml_document doc;
  auto root = load_reply(doc, body, "InitiateMultipartUploadResult");
  if (!root.ok()) return root.status();
  InitiateMultipartResult r;
  OBJDIRECT_RETURN_IF_ERROR(read(*root, "Bucket", r.bucket));
  OBJDIRECT_RETURN_IF_ERROR(read(*root, "Key", r.key));
  OBJDIRECT_RETURN_IF_ERROR(read(*root, "UploadId", r.upload_id));
  if (r.upload_id.empty()) return malformed("<InitiateMultipartUploadResult> has no <UploadId>");
  return r;
}

std::string encode_complete_multipart(const std::vector<CompletePart>& parts) {
  XmlWriter w;
  w.open("CompleteMultipartUpload", kDocumentXmlns);
  for (const auto& p : parts) {
    w.open("Part");
    w.element("PartNumber", p.part_number);
    w.element("ETag", quoted(p.etag));
    write_checksums(w, p.checksums);
    w.close();
  }
  return w.finish();
}

std::string encode_complete_result_unchecked(const CompleteMultipartResult& r) {
  XmlWriter w;
  w.open("CompleteMultipartUploadResult", kDocumentXmlns);
  w.element("Location", r.location);
  w.element("Bucket", r.bucket);
  w.element("Key", r.key);
  w.element("ETag", quoted(r.etag));
  write_checksums(w, r.checksums);
  if (!r.checksum_type.empty()) w.element("ChecksumType", r.checksum_type);
  return w.finish();
}

Result<CompleteMultipartResult> decode_complete_result(std::string_view body) {
  pugi::xml_document doc;
  auto root = load_reply(doc, body, "CompleteMultipartUploadResult");
  if (!root.ok()) {
    auto err = decode_error(body);
    if (!err.ok()) return root.status();
    if (err->message.empty()) err->message = "CompleteMultipartUpload failed: " + err->code;
    return Status(from_s3_code(err->code), std::move(err->message));
  }
  CompleteMultipartResult r;
  OBJDIRECT_RETURN_IF_ERROR(read(*root, "Location", r.location));
  OBJDIRECT_RETURN_IF_ERROR(read(*root, "Bucket", r.bucket));
  OBJDIRECT_RETURN_IF_ERROR(read(*root, "Key", r.key));
  OBJDIRECT_RETURN_IF_ERROR(read_etag(*root, r.etag));
  OBJDIRECT_RETURN_IF_ERROR(read_checksums(*root, r.checksums));
  OBJDIRECT_RETURN_IF_ERROR(read(*root, "ChecksumType", r.checksum_type));
  return r;
}

// --- DeleteObjects -------------------------------------------------------------------------------

std::string encode_delete_objects(const DeleteRequest& r) {
  XmlWriter w;
  w.open("Delete", kDocumentXmlns);
  if (r.quiet) w.element("Quiet", "true");
  for (const auto& o : r.objects) {
    w.open("Object");
    w.element("Key", o.key);
    if (!o.version_id.empty()) w.element("VersionId", o.version_id);
    w.close();
  }
  return w.finish();
}

std::string encode_delete_result_unchecked(const DeleteResult& r) {
  XmlWriter w;
  w.open("DeleteResult", kDocumentXmlns);
  for (const auto& d : r.deleted) {
    w.open("Deleted");
    w.element("Key", d.key);
    if (!d.version_id.empty()) w.element("VersionId", d.version_id);
    if (d.delete_marker) w.element("DeleteMarker", "true");
    if (!d.delete_marker_version_id.empty()) {
      w.element("DeleteMarkerVersionId", d.delete_marker_version_id);
    }
    w.close();
  }
  for (const auto& e : r.errors) {
    w.open("Error");
    w.element("Key", e.key);
    w.element("Code", e.code);
    w.element("Message", e.message);
    w.close();
  }
  return w.finish();
}

Result<DeleteResult> decode_delete_result(std::string_view body) {
  pugi::xml_document doc;
  auto root = load_reply(doc, body, "DeleteResult");
  if (!root.ok()) return root.status();
  DeleteResult r;
  OBJDIRECT_RETURN_IF_ERROR(each_child(*root, "Deleted", [&](const pugi::xml_node& d) -> Status {
    DeletedEntry e;
    OBJDIRECT_RETURN_IF_ERROR(read(d, "Key", e.key));
    OBJDIRECT_RETURN_IF_ERROR(read(d, "VersionId", e.version_id));
    OBJDIRECT_RETURN_IF_ERROR(read_bool(d, "DeleteMarker", e.delete_marker));
    OBJDIRECT_RETURN_IF_ERROR(read(d, "DeleteMarkerVersionId", e.delete_marker_version_id));
    r.deleted.push_back(std::move(e));
    return Status::Ok();
  }));
  OBJDIRECT_RETURN_IF_ERROR(each_child(*root, "Error", [&](const pugi::xml_node& d) -> Status {
    DeleteErrorEntry e;
    OBJDIRECT_RETURN_IF_ERROR(read(d, "Key", e.key));
    OBJDIRECT_RETURN_IF_ERROR(read(d, "Code", e.code));
    OBJDIRECT_RETURN_IF_ERROR(read(d, "Message", e.message));
    r.errors.push_back(std::move(e));
    return Status::Ok();
  }));
  return r;
}

// --- Put/GetBucketVersioning --------------------------------------------------------------------

std::string encode_versioning_unchecked(const VersioningConfiguration& v) {
  XmlWriter w;
  w.open("VersioningConfiguration", kDocumentXmlns);
  if (!v.status.empty()) w.element("Status", v.status);
  if (!v.mfa_delete.empty()) w.element("MfaDelete", v.mfa_delete);
  return w.finish();
}

Result<VersioningConfiguration> decode_versioning(std::string_view body) {
  pugi::xml_document doc;
  auto root = load(doc, body, "VersioningConfiguration");
  if (!root.ok()) return root.status();
  VersioningConfiguration v;
  auto status = unique_child_text(*root, "Status");
  if (!status.ok()) return status.status();
  auto mfa = unique_child_text(*root, "MfaDelete");
  if (!mfa.ok()) return mfa.status();
  if (*status) {
    v.status = std::string(trim(**status));
    if (v.status != "Enabled" && v.status != "Suspended") {
      return malformed("<Status> must be Enabled or Suspended");
    }
  }
  if (*mfa) {
    v.mfa_delete = std::string(trim(**mfa));
    if (v.mfa_delete != "Enabled" && v.mfa_delete != "Disabled") {
      return malformed("<MfaDelete> must be Enabled or Disabled");
    }
  }
  return v;
}

// --- CopyObject / UploadPartCopy -----------------------------------------------------------------

std::string encode_copy_result_unchecked(const CopyResult& r) {
  XmlWriter w;
  w.open(r.part ? "CopyPartResult" : "CopyObjectResult", kDocumentXmlns);
  w.element("LastModified", r.last_modified);
  w.element("ETag", quoted(r.etag));
  write_checksums(w, r.checksums);
  return w.finish();
}

Result<CopyResult> decode_copy_result(std::string_view body) {
  pugi::xml_document doc;
  CopyResult r;
  auto root = load_reply(doc, body, "CopyObjectResult");
  if (!root.ok()) {
    auto part = load_reply(doc, body, "CopyPartResult");
    if (!part.ok()) return root.status();
    root = part;
    r.part = true;
  }
  OBJDIRECT_RETURN_IF_ERROR(read(*root, "LastModified", r.last_modified));
  OBJDIRECT_RETURN_IF_ERROR(read_etag(*root, r.etag));
  OBJDIRECT_RETURN_IF_ERROR(read_checksums(*root, r.checksums));
  if (r.etag.empty()) return malformed("the copy result has no <ETag>");
  return r;
}

// --- ListParts
// ------------------------------------------------------------------------------------

std::string encode_list_parts_unchecked(const ListPartsResult& r) {
  XmlWriter w;
  w.open("ListPartsResult", kDocumentXmlns);
  w.element("Bucket", r.bucket);
  w.element("Key", r.key);
  w.element("UploadId", r.upload_id);
  write_owner(w, "Initiator", r.initiator);
  write_owner(w, "Owner", r.owner);
  w.element("StorageClass", r.storage_class);
  w.element("PartNumberMarker", r.part_number_marker);
  if (r.next_part_number_marker) w.element("NextPartNumberMarker", *r.next_part_number_marker);
  w.element("MaxParts", r.max_parts);
  w.element("IsTruncated", boolean(r.is_truncated));
  if (!r.checksum_algorithm.empty()) w.element("ChecksumAlgorithm", r.checksum_algorithm);
  for (const auto& p : r.parts) {
    w.open("Part");
    w.element("PartNumber", p.part_number);
    w.element("LastModified", p.last_modified);
    w.element("ETag", quoted(p.etag));
    w.element("Size", p.size);
    write_checksums(w, p.checksums);
    w.close();
  }
  return w.finish();
}

Result<ListPartsResult> decode_list_parts(std::string_view body) {
  pugi::xml_document doc;
  auto root = load_reply(doc, body, "ListPartsResult");
  if (!root.ok()) return root.status();
  const pugi::xml_node n = *root;
  ListPartsResult r;
  OBJDIRECT_RETURN_IF_ERROR(read(n, "Bucket", r.bucket));
  OBJDIRECT_RETURN_IF_ERROR(read(n, "Key", r.key));
  OBJDIRECT_RETURN_IF_ERROR(read(n, "UploadId", r.upload_id));
  OBJDIRECT_RETURN_IF_ERROR(read_owner(n, "Initiator", r.initiator));
  OBJDIRECT_RETURN_IF_ERROR(read_owner(n, "Owner", r.owner));
  OBJDIRECT_RETURN_IF_ERROR(read(n, "StorageClass", r.storage_class));
  OBJDIRECT_RETURN_IF_ERROR(read_number(n, "PartNumberMarker", r.part_number_marker));
  OBJDIRECT_RETURN_IF_ERROR(read_number(n, "NextPartNumberMarker", r.next_part_number_marker));
  OBJDIRECT_RETURN_IF_ERROR(read_number(n, "MaxParts", r.max_parts));
  OBJDIRECT_RETURN_IF_ERROR(read_bool(n, "IsTruncated", r.is_truncated));
  OBJDIRECT_RETURN_IF_ERROR(read(n, "ChecksumAlgorithm", r.checksum_algorithm));
  OBJDIRECT_RETURN_IF_ERROR(each_child(n, "Part", [&](const pugi::xml_node& p) -> Status {
    PartEntry e;
    OBJDIRECT_RETURN_IF_ERROR(read_number(p, "PartNumber", e.part_number));
    OBJDIRECT_RETURN_IF_ERROR(read(p, "LastModified", e.last_modified));
    OBJDIRECT_RETURN_IF_ERROR(read_etag(p, e.etag));
    OBJDIRECT_RETURN_IF_ERROR(read_number(p, "Size", e.size));
    OBJDIRECT_RETURN_IF_ERROR(read_checksums(p, e.checksums));
    r.parts.push_back(std::move(e));
    return Status::Ok();
  }));
  return r;
}

// --- ListMultipartUploads
// -------------------------------------------------------------------------

std::string encode_list_uploads_unchecked(const ListUploadsResult& r) {
  XmlWriter w;
  w.open("ListMultipartUploadsResult", kDocumentXmlns);
  w.element("Bucket", r.bucket);
  w.element("KeyMarker", r.key_marker);
  w.element("UploadIdMarker", r.upload_id_marker);
  if (r.next_key_marker) w.element("NextKeyMarker", *r.next_key_marker);
  if (r.next_upload_id_marker) w.element("NextUploadIdMarker", *r.next_upload_id_marker);
  if (!r.prefix.empty()) w.element("Prefix", r.prefix);
  if (!r.delimiter.empty()) w.element("Delimiter", r.delimiter);
  w.element("MaxUploads", r.max_uploads);
  if (!r.encoding_type.empty()) w.element("EncodingType", r.encoding_type);
  w.element("IsTruncated", boolean(r.is_truncated));
  for (const auto& u : r.uploads) {
    w.open("Upload");
    w.element("Key", u.key);
    w.element("UploadId", u.upload_id);
    write_owner(w, "Initiator", u.initiator);
    write_owner(w, "Owner", u.owner);
    w.element("StorageClass", u.storage_class);
    w.element("Initiated", u.initiated);
    if (!u.checksum_algorithm.empty()) w.element("ChecksumAlgorithm", u.checksum_algorithm);
    w.close();
  }
  write_prefixes(w, r.common_prefixes);
  return w.finish();
}

Result<ListUploadsResult> decode_list_uploads(std::string_view body) {
  pugi::xml_document doc;
  auto root = load_reply(doc, body, "ListMultipartUploadsResult");
  if (!root.ok()) return root.status();
  const pugi::xml_node n = *root;
  ListUploadsResult r;
  OBJDIRECT_RETURN_IF_ERROR(read(n, "Bucket", r.bucket));
  OBJDIRECT_RETURN_IF_ERROR(read(n, "KeyMarker", r.key_marker));
  OBJDIRECT_RETURN_IF_ERROR(read(n, "UploadIdMarker", r.upload_id_marker));
  OBJDIRECT_RETURN_IF_ERROR(read(n, "NextKeyMarker", r.next_key_marker));
  OBJDIRECT_RETURN_IF_ERROR(read(n, "NextUploadIdMarker", r.next_upload_id_marker));
  OBJDIRECT_RETURN_IF_ERROR(read(n, "Prefix", r.prefix));
  OBJDIRECT_RETURN_IF_ERROR(read(n, "Delimiter", r.delimiter));
  OBJDIRECT_RETURN_IF_ERROR(read_number(n, "MaxUploads", r.max_uploads));
  OBJDIRECT_RETURN_IF_ERROR(read(n, "EncodingType", r.encoding_type));
  OBJDIRECT_RETURN_IF_ERROR(read_bool(n, "IsTruncated", r.is_truncated));
  OBJDIRECT_RETURN_IF_ERROR(each_child(n, "Upload", [&](const pugi::xml_node& u) -> Status {
    UploadEntry e;
    OBJDIRECT_RETURN_IF_ERROR(read(u, "Key", e.key));
    OBJDIRECT_RETURN_IF_ERROR(read(u, "UploadId", e.upload_id));
    OBJDIRECT_RETURN_IF_ERROR(read_owner(u, "Initiator", e.initiator));
    OBJDIRECT_RETURN_IF_ERROR(read_owner(u, "Owner", e.owner));
    OBJDIRECT_RETURN_IF_ERROR(read(u, "StorageClass", e.storage_class));
    OBJDIRECT_RETURN_IF_ERROR(read(u, "Initiated", e.initiated));
    OBJDIRECT_RETURN_IF_ERROR(read(u, "ChecksumAlgorithm", e.checksum_algorithm));
    r.uploads.push_back(std::move(e));
    return Status::Ok();
  }));
  OBJDIRECT_RETURN_IF_ERROR(read_prefixes(n, r.common_prefixes));
  return r;
}

// --- Error ---------------------------------------------------------------------------------------

std::string encode_error_unchecked(const ErrorDocument& e) {
  XmlWriter w;
  w.open("Error");
  w.element("Code", e.code);
  // Never an empty <Message>: Debian's AWS CLI v2 crashes on one.
  std::string_view message = e.message;
  if (message.empty()) message = e.code.empty() ? std::string_view("An error occurred") : e.code;
  w.element("Message", message);
  for (const auto& [tag, value] : e.details) w.element(tag, value);
  w.element("Resource", e.resource);
  w.element("RequestId", e.request_id);
  return w.finish();
}

Result<ErrorDocument> decode_error(std::string_view body) {
  pugi::xml_document doc;
  auto root = load_reply(doc, body, "Error");
  if (!root.ok()) return root.status();
  ErrorDocument e;
  for (pugi::xml_node c : root->children()) {
    if (c.type() != pugi::node_element) continue;
    const std::string_view name = local_name(c);
    std::optional<std::string> text = text_of(c);
    if (!text) return malformed(about(name, "must contain only text"));
    std::string* field = nullptr;
    if (name == "Code") {
      field = &e.code;
    } else if (name == "Message") {
      field = &e.message;
    } else if (name == "Resource") {
      field = &e.resource;
    } else if (name == "RequestId") {
      field = &e.request_id;
    }
    if (field == nullptr) {
      if (is_plain_tag(name)) e.details.emplace_back(std::string(name), std::move(*text));
    } else {
      *field = std::move(*text);
    }
  }
  return e;
}

ReplyShape reply_shape(std::string_view body) {
  ReplyShape shape;
  pugi::xml_document doc;
  if (body.size() > limits::xml_reply_bytes_max || !doc.load_buffer(body.data(), body.size())) {
    return shape;
  }
  shape.well_formed = true;
  if (auto err = doc.child("Error")) shape.error_code = err.child_value("Code");
  return shape;
}

bool acl_is_owner_full_control(std::string_view body, std::string_view owner_id) {
  pugi::xml_document doc;
  if (body.size() > limits::xml_body_bytes_max || !doc.load_buffer(body.data(), body.size())) {
    return false;
  }
  auto local = [](const pugi::xml_node& n) {
    std::string_view name = n.name();
    const auto colon = name.find(':');
    return colon == std::string_view::npos ? name : name.substr(colon + 1);
  };
  auto child = [&](const pugi::xml_node& n, std::string_view name) {
    for (pugi::xml_node c : n.children()) {
      if (c.type() == pugi::node_element && local(c) == name) return c;
    }
    return pugi::xml_node();
  };
  pugi::xml_node root = doc.document_element();
  if (local(root) != "AccessControlPolicy") return false;
  pugi::xml_node list = child(root, "AccessControlList");
  if (!list) return false;
  for (pugi::xml_node g : list.children()) {
    if (g.type() != pugi::node_element) continue;
    if (local(g) != "Grant") return false;
    pugi::xml_node grantee = child(g, "Grantee");
    if (std::string_view(child(g, "Permission").child_value()) != "FULL_CONTROL") return false;
    if (std::string_view(child(grantee, "ID").child_value()) != owner_id) return false;
  }
  return true;
}

// --- The checked encoders ------------------------------------------------------------------------
//
// What the server (and the gateway, for PutBucketVersioning) sends is checked in every build
// (OBJDIRECT_ASSERT): each document's preconditions, then that the bytes decode and encode back to
// themselves (docs/s3-documents.md, "Checked encoders"). A failure is a programmer error (a
// document the peer's decoder would refuse or read differently) and aborts before it is sent.

namespace {

// decode(bytes) is accepted and is `v` itself (the usual case: one decode and a comparison), or
// else encodes back to `bytes`: the writer's lossy steps (U+FFFD for invalid UTF-8 and NUL, a
// <Message> for an empty one) and fields the document's kind does not carry (a v1 page has no
// continuation token) change the value but not the canonical bytes.
template <typename T, typename Decode, typename Encode>
bool round_trips(const T& v, const std::string& bytes, Decode decode, Encode encode) {
  auto back = decode(bytes);
  return back.ok() && (*back == v || encode(*back) == bytes);
}

// The decoders read <Checksum{ALGO}> back only for a plain tag that is neither
// ChecksumAlgorithm nor ChecksumType.
bool checksums_valid(const ChecksumList& checksums) {
  for (const auto& [algo, value] : checksums) {
    (void)value;
    if (!is_plain_tag(algo) || algo == "Algorithm" || algo == "Type") return false;
  }
  return true;
}

}  // namespace

std::string encode_list_buckets(const ListBucketsResult& r) {
  for (const auto& b : r.buckets) {
    OBJDIRECT_ASSERT(!b.name.empty(), "every listed bucket has a name");
  }
  std::string bytes = encode_list_buckets_unchecked(r);
  OBJDIRECT_ASSERT(round_trips(r, bytes, decode_list_buckets, encode_list_buckets_unchecked),
                   "a ListAllMyBucketsResult decodes back to itself");
  return bytes;
}

std::string encode_list_objects(const ListObjectsResult& r) {
  if (r.kind == ListKind::v2) {
    OBJDIRECT_ASSERT(r.key_count == r.objects.size() + r.common_prefixes.size(),
                     "a ListObjectsV2 page's KeyCount counts its keys and common prefixes");
  }
  if (r.kind != ListKind::versions) {
    for (const auto& o : r.objects) {
      OBJDIRECT_ASSERT(!o.delete_marker, "only ListObjectVersions lists delete markers");
    }
  }
  for (const auto& o : r.objects) {
    OBJDIRECT_ASSERT(!o.key.empty(), "every listed object has a key");
  }
  std::string bytes = encode_list_objects_unchecked(r);
  OBJDIRECT_ASSERT(round_trips(r, bytes, decode_list_objects, encode_list_objects_unchecked),
                   "a ListBucketResult / ListVersionsResult decodes back to itself");
  return bytes;
}

std::string encode_initiate_multipart(const InitiateMultipartResult& r) {
  OBJDIRECT_ASSERT(!r.upload_id.empty(), "an InitiateMultipartUploadResult names its upload");
  std::string bytes = encode_initiate_multipart_unchecked(r);
  OBJDIRECT_ASSERT(
      round_trips(r, bytes, decode_initiate_multipart, encode_initiate_multipart_unchecked),
      "an InitiateMultipartUploadResult decodes back to itself");
  return bytes;
}

std::string encode_complete_result(const CompleteMultipartResult& r) {
  OBJDIRECT_ASSERT(!r.etag.empty(), "a CompleteMultipartUploadResult carries the object's ETag");
  OBJDIRECT_ASSERT(checksums_valid(r.checksums), "checksum algorithms are plain element names");
  std::string bytes = encode_complete_result_unchecked(r);
  OBJDIRECT_ASSERT(round_trips(r, bytes, decode_complete_result, encode_complete_result_unchecked),
                   "a CompleteMultipartUploadResult decodes back to itself");
  return bytes;
}

std::string encode_delete_result(const DeleteResult& r) {
  for (const auto& e : r.errors) {
    OBJDIRECT_ASSERT(!e.code.empty(), "a DeleteObjects error entry carries its code");
  }
  std::string bytes = encode_delete_result_unchecked(r);
  OBJDIRECT_ASSERT(round_trips(r, bytes, decode_delete_result, encode_delete_result_unchecked),
                   "a DeleteResult decodes back to itself");
  return bytes;
}

std::string encode_copy_result(const CopyResult& r) {
  OBJDIRECT_ASSERT(!r.etag.empty(), "a copy result carries the copy's ETag");
  OBJDIRECT_ASSERT(checksums_valid(r.checksums), "checksum algorithms are plain element names");
  std::string bytes = encode_copy_result_unchecked(r);
  OBJDIRECT_ASSERT(round_trips(r, bytes, decode_copy_result, encode_copy_result_unchecked),
                   "a CopyObjectResult / CopyPartResult decodes back to itself");
  return bytes;
}

std::string encode_list_parts(const ListPartsResult& r) {
  std::uint32_t previous = 0;
  for (const auto& p : r.parts) {
    OBJDIRECT_ASSERT(p.part_number > previous && p.part_number <= limits::parts_max,
                     "ListParts lists part numbers 1..parts_max in ascending order");
    OBJDIRECT_ASSERT(checksums_valid(p.checksums), "checksum algorithms are plain element names");
    previous = p.part_number;
  }
  std::string bytes = encode_list_parts_unchecked(r);
  OBJDIRECT_ASSERT(round_trips(r, bytes, decode_list_parts, encode_list_parts_unchecked),
                   "a ListPartsResult decodes back to itself");
  return bytes;
}

std::string encode_list_uploads(const ListUploadsResult& r) {
  for (const auto& u : r.uploads) {
    OBJDIRECT_ASSERT(!u.key.empty() && !u.upload_id.empty(),
                     "every listed upload has a key and an upload id");
  }
  std::string bytes = encode_list_uploads_unchecked(r);
  OBJDIRECT_ASSERT(round_trips(r, bytes, decode_list_uploads, encode_list_uploads_unchecked),
                   "a ListMultipartUploadsResult decodes back to itself");
  return bytes;
}

std::string encode_versioning(const VersioningConfiguration& v) {
  OBJDIRECT_ASSERT(v.status.empty() || v.status == "Enabled" || v.status == "Suspended",
                   "a versioning status is Enabled or Suspended");
  OBJDIRECT_ASSERT(v.mfa_delete.empty() || v.mfa_delete == "Enabled" || v.mfa_delete == "Disabled",
                   "MfaDelete is Enabled or Disabled");
  std::string bytes = encode_versioning_unchecked(v);
  OBJDIRECT_ASSERT(round_trips(v, bytes, decode_versioning, encode_versioning_unchecked),
                   "a VersioningConfiguration decodes back to itself");
  return bytes;
}

std::string encode_error(const ErrorDocument& e) {
  OBJDIRECT_ASSERT(!e.code.empty(), "an error document carries its code");
  for (const auto& [tag, value] : e.details) {
    (void)value;
    OBJDIRECT_ASSERT(is_plain_tag(tag) && tag != "Code" && tag != "Message" && tag != "Resource" &&
                         tag != "RequestId",
                     "an error's details are further plain elements");
  }
  std::string bytes = encode_error_unchecked(e);
  OBJDIRECT_ASSERT(round_trips(e, bytes, decode_error, encode_error_unchecked),
                   "an Error document decodes back to itself");
  return bytes;
}

}  // namespace objdirect::s3
