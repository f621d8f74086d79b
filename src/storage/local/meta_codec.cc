#include "storage/local/meta_codec.hpp"

#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <set>

#include "common/assert.hpp"

namespace objdirect::storage::local {
namespace {

constexpr std::size_t header_bytes = 6;  // version, kind, u32 body length

// Appends little-endian fixed-width integers and length-prefixed strings.
class Encoder {
 public:
  void u8(std::uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u32(std::uint32_t v) {
    for (int i = 0; i < 4; ++i) u8(static_cast<std::uint8_t>(v >> (8 * i)));
  }
  void u64(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) u8(static_cast<std::uint8_t>(v >> (8 * i)));
  }
  void i64(std::int64_t v) { u64(static_cast<std::uint64_t>(v)); }
  void str(std::string_view s) {
    u32(static_cast<std::uint32_t>(s.size()));
    out_.append(s);
  }
  void raw(const std::uint8_t* p, std::size_t n) {
    out_.append(reinterpret_cast<const char*>(p), n);
  }
  void checksums(const ChecksumMap& m) {
    u32(static_cast<std::uint32_t>(m.size()));
    for (const auto& [k, v] : m) {
      str(k);
      str(v);
    }
  }
  void config(const std::map<std::string, std::string>& m) { checksums(m); }
  void tags(const TagSet& t) {
    u32(static_cast<std::uint32_t>(t.size()));
    for (const auto& [k, v] : t) {
      str(k);
      str(v);
    }
  }
  // Fields of ObjectMeta other than `parts`, shared by object and upload records. Version 2
  // records (those with tags) append the tag set; version 3 (SSE-C) the tag set and the SSE-C
  // parameters.
  void meta_fields(const ObjectMeta& m, std::uint8_t version) {
    str(m.key);
    u64(m.size);
    str(m.etag);
    i64(m.mtime_ns);
    str(m.content_type);
    str(m.content_encoding);
    str(m.content_disposition);
    str(m.content_language);
    str(m.cache_control);
    str(m.expires);
    str(m.owner);
    u32(static_cast<std::uint32_t>(m.user_meta.size()));
    for (const auto& [k, v] : m.user_meta) {
      str(k);
      str(v);
    }
    checksums(m.checksums);
    if (version >= 2) tags(m.tags);
    if (version >= 3) {
      str(m.sse.algorithm);
      str(m.sse.key_md5);
      str(m.sse.salt);
      str(m.sse.key_hmac);
      str(m.sse.iv);
    }
  }
  void part_info(const PartInfo& p, std::uint8_t version) {
    u32(p.part_number);
    u64(p.size);
    str(p.etag);
    i64(p.mtime_ns);
    checksums(p.checksums);
    if (version >= 3) str(p.sse_iv);
  }

  // Prepends the record header once the body is complete.
  std::string finish(RecordKind kind, std::uint8_t version = 1) {
    std::string rec;
    rec.reserve(header_bytes + out_.size());
    rec.push_back(static_cast<char>(version));
    rec.push_back(static_cast<char>(kind));
    const auto n = static_cast<std::uint32_t>(out_.size());
    for (int i = 0; i < 4; ++i) rec.push_back(static_cast<char>(n >> (8 * i)));
    rec.append(out_);
    return rec;
  }

 private:
  std::string out_;
};

// Bounds-checked reader. The first failure is sticky: later reads return zero values, and
// status() reports the first problem, so parsing code stays linear without early returns.
class Decoder {
 public:
  explicit Decoder(std::string_view in) : in_(in) {}

  bool ok() const { return error_ == nullptr; }
  std::size_t remaining() const { return in_.size() - pos_; }

  void fail(const char* what) {
    if (error_ == nullptr) error_ = what;
    pos_ = in_.size();
  }
  Status status() const {
    if (error_ == nullptr) return Status();
    return Status(Errc::corrupt, std::string("metadata record: ") + error_);
  }

  std::uint8_t u8() {
    if (remaining() < 1) {
      fail("truncated integer");
      return 0;
    }
    return static_cast<std::uint8_t>(in_[pos_++]);
  }
  std::uint32_t u32() {
    if (remaining() < 4) {
      fail("truncated integer");
      return 0;
    }
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i)
      v |= std::uint32_t{static_cast<std::uint8_t>(in_[pos_++])} << (8 * i);
    return v;
  }
  std::uint64_t u64() {
    if (remaining() < 8) {
      fail("truncated integer");
      return 0;
    }
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i)
      v |= std::uint64_t{static_cast<std::uint8_t>(in_[pos_++])} << (8 * i);
    return v;
  }
  std::int64_t i64() { return static_cast<std::int64_t>(u64()); }
  std::string str() {
    const std::uint32_t n = u32();
    if (n > remaining()) {
      fail("string length beyond record");
      return {};
    }
    std::string s(in_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  // A count of elements that each take at least min_bytes; rejects counts the remaining input
  // cannot hold, so a hostile count never drives a large allocation.
  std::uint32_t count(std::size_t min_bytes) {
    const std::uint32_t n = u32();
    if (n > remaining() / min_bytes) {
      fail("element count beyond record");
      return 0;
    }
    return n;
  }
  void raw(std::uint8_t* dst, std::size_t n) {
    if (remaining() < n) {
      fail("truncated bytes");
      std::memset(dst, 0, n);
      return;
    }
    std::memcpy(dst, in_.data() + pos_, n);
    pos_ += n;
  }
  // The same layout as checksums: names strictly ascending.
  std::map<std::string, std::string> config() { return checksums(); }
  ChecksumMap checksums() {
    ChecksumMap m;
    const std::uint32_t n = count(8);
    for (std::uint32_t i = 0; i < n && ok(); ++i) {
      std::string k = str();
      std::string v = str();
      // Strictly ascending names keep the encoding canonical (a map cannot hold duplicates).
      if (!m.empty() && !(m.rbegin()->first < k)) {
        fail("names not strictly ascending");
        break;
      }
      m.emplace_hint(m.end(), std::move(k), std::move(v));
    }
    return m;
  }
  // Version 2: u32 n, then n pairs of str key, str value. Object and upload records need n >= 1
  // (a record without tags is written as version 1, which keeps the encoding canonical).
  TagSet tags(bool allow_empty = false) {
    TagSet t;
    const std::uint32_t n = count(8);
    if (ok() && n == 0 && !allow_empty) {
      fail("version 2 record without tags (canonical form is version 1)");
    }
    t.reserve(n);
    for (std::uint32_t i = 0; i < n && ok(); ++i) {
      std::string k = str();
      std::string v = str();
      t.emplace_back(std::move(k), std::move(v));
    }
    return t;
  }
  void meta_fields(ObjectMeta& m) {
    m.key = str();
    m.size = u64();
    m.etag = str();
    m.mtime_ns = i64();
    m.content_type = str();
    m.content_encoding = str();
    m.content_disposition = str();
    m.content_language = str();
    m.cache_control = str();
    m.expires = str();
    m.owner = str();
    const std::uint32_t n = count(8);
    m.user_meta.reserve(n);
    for (std::uint32_t i = 0; i < n && ok(); ++i) {
      std::string k = str();
      std::string v = str();
      m.user_meta.emplace_back(std::move(k), std::move(v));
    }
    m.checksums = checksums();
    // Version 3 (SSE-C) may have an empty tag set: the version is chosen by the SSE-C fields.
    if (version_ >= 2) m.tags = tags(version_ >= 3);
    if (version_ >= 3) {
      m.sse.algorithm = str();
      m.sse.key_md5 = str();
      m.sse.salt = str();
      m.sse.key_hmac = str();
      m.sse.iv = str();
      if (!ok()) return;
      if (m.sse.enabled()) {
        if (m.sse.salt.size() != 16 || m.sse.key_hmac.size() != 32 ||
            (!m.sse.iv.empty() && m.sse.iv.size() != 16)) {
          fail("SSE-C field of the wrong size");
        }
      } else if (!m.sse.key_md5.empty() || !m.sse.salt.empty() || !m.sse.key_hmac.empty() ||
                 !m.sse.iv.empty()) {
        fail("SSE-C fields without an algorithm");
      }
    }
  }
  PartInfo part_info() {
    PartInfo p;
    p.part_number = u32();
    p.size = u64();
    p.etag = str();
    p.mtime_ns = i64();
    p.checksums = checksums();
    if (version_ >= 3) {
      p.sse_iv = str();
      if (ok() && !p.sse_iv.empty() && p.sse_iv.size() != 16) fail("SSE-C part IV not 16 bytes");
    }
    return p;
  }

  // Checks the header and narrows the decoder to the body. Versions records exist only in
  // version 1, part records in versions 1 and 3 (an SSE-C IV), buckets in 1 and 2, objects and
  // uploads in 1, 2 and 3 (SSE-C).
  void header(RecordKind kind) {
    if (in_.size() < header_bytes) return fail("shorter than the record header");
    version_ = u8();
    const bool allowed =
        version_ == 1 ||
        (version_ == 2 && (kind == RecordKind::object || kind == RecordKind::upload ||
                           kind == RecordKind::bucket)) ||
        (version_ == 3 &&
         (kind == RecordKind::object || kind == RecordKind::upload || kind == RecordKind::part));
    if (!allowed || version_ > meta_format_version) return fail("unsupported format version");
    if (u8() != static_cast<std::uint8_t>(kind)) return fail("unexpected record kind");
    if (u32() != remaining()) return fail("body length does not match record size");
  }
  void end() {
    if (ok() && remaining() != 0) fail("trailing bytes");
  }
  // A length-prefixed string as a view into the input (nested records).
  std::string_view view() {
    const std::uint32_t n = u32();
    if (n > remaining()) {
      fail("string length beyond record");
      return {};
    }
    std::string_view s = in_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  std::uint8_t version() const { return version_; }

 private:
  std::string_view in_;
  std::size_t pos_ = 0;
  const char* error_ = nullptr;
  std::uint8_t version_ = 1;
};

// The version a record is written in: 3 when it carries SSE-C parameters (or a part with an
// SSE-C IV), 2 when it carries tags (or, for a bucket, configuration), else 1 (readable by older
// code).
std::uint8_t version_for(const ObjectMeta& m) {
  if (m.sse.enabled()) return 3;
  for (const PartInfo& p : m.parts) {
    if (!p.sse_iv.empty()) return 3;
  }
  return m.tags.empty() ? 1 : 2;
}
std::uint8_t version_for(const BucketInfo& b) {
  return b.tags.empty() && b.config.empty() ? 1 : 2;
}

constexpr std::size_t part_record_bytes_min = 4 + 8 + 4 + 8 + 4;
constexpr std::size_t segment_bytes = 16 + 8;

}  // namespace

std::string BlobId::hex() const {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s(32, '0');
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    s[2 * i] = digits[bytes[i] >> 4];
    s[2 * i + 1] = digits[bytes[i] & 0xf];
  }
  return s;
}

Result<BlobId> BlobId::from_hex(std::string_view hex) {
  if (hex.size() != 32) return Status(Errc::invalid_argument, "blob id must be 32 hex digits");
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  BlobId id;
  for (std::size_t i = 0; i < 16; ++i) {
    const int hi = nibble(hex[2 * i]);
    const int lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return Status(Errc::invalid_argument, "blob id must be lowercase hex");
    id.bytes[i] = static_cast<std::uint8_t>(hi << 4 | lo);
  }
  return id;
}

BlobId BlobId::random() {
  BlobId id;
  std::size_t got = 0;
  while (got < id.bytes.size()) {
    const ssize_t n = getrandom(id.bytes.data() + got, id.bytes.size() - got, 0);
    if (n < 0) {
      // getrandom only fails before the pool is initialised or on EINTR; both are transient.
      if (errno == EINTR || errno == EAGAIN) continue;
      std::abort();
    }
    got += static_cast<std::size_t>(n);
  }
  return id;
}

std::size_t BlobIdHash::operator()(const BlobId& id) const noexcept {
  std::uint64_t h;
  std::memcpy(&h, id.bytes.data(), sizeof h);  // already uniformly random
  return static_cast<std::size_t>(h);
}

std::string encode_object_unchecked(const ObjectRecord& rec) {
  Encoder e;
  const std::uint8_t version = version_for(rec.meta);
  e.meta_fields(rec.meta, version);
  e.u32(static_cast<std::uint32_t>(rec.meta.parts.size()));
  for (const PartInfo& p : rec.meta.parts) e.part_info(p, version);
  e.u32(static_cast<std::uint32_t>(rec.segments.size()));
  for (const Segment& s : rec.segments) {
    e.raw(s.blob.bytes.data(), s.blob.bytes.size());
    e.u64(s.size);
  }
  return e.finish(RecordKind::object, version);
}

namespace {

Result<ObjectRecord> decode_object_impl(std::string_view bytes, bool keep_parts) {
  Decoder d(bytes);
  d.header(RecordKind::object);
  ObjectRecord rec;
  d.meta_fields(rec.meta);
  const std::uint32_t n_parts = d.count(part_record_bytes_min);
  if (keep_parts) rec.meta.parts.reserve(n_parts);
  bool part_iv = false;
  for (std::uint32_t i = 0; i < n_parts && d.ok(); ++i) {
    PartInfo p = d.part_info();  // parsed (and validated) either way
    part_iv = part_iv || !p.sse_iv.empty();
    if (keep_parts) rec.meta.parts.push_back(std::move(p));
  }
  if (d.ok() && d.version() == 3 && !rec.meta.sse.enabled() && !part_iv) {
    d.fail("version 3 record without SSE-C fields (canonical form is version 1 or 2)");
  }
  const std::uint32_t n_segments = d.count(segment_bytes);
  rec.segments.resize(n_segments);
  std::uint64_t total = 0;
  for (Segment& s : rec.segments) {
    d.raw(s.blob.bytes.data(), s.blob.bytes.size());
    s.size = d.u64();
    if (s.size > std::numeric_limits<std::uint64_t>::max() - total)
      d.fail("segment sizes overflow");
    total += s.size;
  }
  d.end();
  if (d.ok() && total != rec.meta.size) d.fail("segment sizes do not add up to the object size");
  if (!d.ok()) return d.status();
  return rec;
}

}  // namespace

Result<ObjectRecord> decode_object(std::string_view bytes) {
  return decode_object_impl(bytes, true);
}

namespace {

std::uint64_t segments_total(const ObjectRecord& rec) {
  std::uint64_t total = 0;
  for (const Segment& s : rec.segments) total += s.size;
  return total;
}

// decode(bytes) is accepted and encodes back to `bytes` (the canonical encoding).
template <typename Decode, typename Encode>
bool round_trips(const std::string& bytes, Decode decode, Encode encode) {
  auto back = decode(bytes);
  return back.ok() && encode(*back) == bytes;
}

}  // namespace

std::string encode_object(const ObjectRecord& rec) {
  OBJDIRECT_ASSERT(segments_total(rec) == rec.meta.size,
                   "an object record's segments add up to its size");
  std::string bytes = encode_object_unchecked(rec);
  OBJDIRECT_ASSERT(round_trips(bytes, decode_object, encode_object_unchecked),
                   "an object record decodes back to itself");
  return bytes;
}

Result<ObjectRecord> decode_object_without_parts(std::string_view bytes) {
  return decode_object_impl(bytes, false);
}

std::string encode_bucket(const BucketInfo& info) {
  Encoder e;
  e.str(info.name);
  e.i64(info.ctime_ns);
  e.str(info.owner);
  e.str(info.region);
  const std::uint8_t version = version_for(info);
  if (version >= 2) {
    e.tags(info.tags);
    e.config(info.config);
  }
  return e.finish(RecordKind::bucket, version);
}

Result<BucketInfo> decode_bucket(std::string_view bytes) {
  Decoder d(bytes);
  d.header(RecordKind::bucket);
  BucketInfo info;
  info.name = d.str();
  info.ctime_ns = d.i64();
  info.owner = d.str();
  info.region = d.str();
  if (d.version() >= 2) {
    info.tags = d.tags(true);
    info.config = d.config();
    if (d.ok() && info.tags.empty() && info.config.empty()) {
      d.fail("version 2 bucket record without tags or configuration (canonical form is version 1)");
    }
  }
  d.end();
  if (!d.ok()) return d.status();
  return info;
}

std::string encode_upload(const UploadInfo& info) {
  Encoder e;
  e.str(info.key);
  e.str(info.upload_id);
  e.i64(info.initiated_ns);
  e.str(info.checksum_algorithm);
  const std::uint8_t version = version_for(info.meta_template);
  e.meta_fields(info.meta_template, version);
  e.u32(static_cast<std::uint32_t>(info.meta_template.parts.size()));
  for (const PartInfo& p : info.meta_template.parts) e.part_info(p, version);
  return e.finish(RecordKind::upload, version);
}

Result<UploadInfo> decode_upload(std::string_view bytes) {
  Decoder d(bytes);
  d.header(RecordKind::upload);
  UploadInfo info;
  info.key = d.str();
  info.upload_id = d.str();
  info.initiated_ns = d.i64();
  info.checksum_algorithm = d.str();
  d.meta_fields(info.meta_template);
  const std::uint32_t n_parts = d.count(part_record_bytes_min);
  info.meta_template.parts.reserve(n_parts);
  bool part_iv = false;
  for (std::uint32_t i = 0; i < n_parts && d.ok(); ++i) {
    info.meta_template.parts.push_back(d.part_info());
    part_iv = part_iv || !info.meta_template.parts.back().sse_iv.empty();
  }
  if (d.ok() && d.version() == 3 && !info.meta_template.sse.enabled() && !part_iv) {
    d.fail("version 3 record without SSE-C fields (canonical form is version 1 or 2)");
  }
  d.end();
  if (!d.ok()) return d.status();
  return info;
}

std::string encode_part(const PartRecord& rec) {
  Encoder e;
  const std::uint8_t version = rec.info.sse_iv.empty() ? 1 : 3;
  e.part_info(rec.info, version);
  e.raw(rec.blob.bytes.data(), rec.blob.bytes.size());
  return e.finish(RecordKind::part, version);
}

Result<PartRecord> decode_part(std::string_view bytes) {
  Decoder d(bytes);
  d.header(RecordKind::part);
  PartRecord rec;
  rec.info = d.part_info();
  if (d.ok() && d.version() == 3 && rec.info.sse_iv.empty()) {
    d.fail("version 3 part record without an SSE-C IV (canonical form is version 1)");
  }
  d.raw(rec.blob.bytes.data(), rec.blob.bytes.size());
  d.end();
  if (!d.ok()) return d.status();
  return rec;
}

}  // namespace objdirect::storage::local

namespace objdirect::storage::local {

bool valid_version_id(std::string_view id) {
  if (id == "null") return true;
  if (id.size() != 32) return false;
  return std::all_of(id.begin(), id.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

RecordKind record_kind(std::string_view bytes) {
  if (bytes.size() < header_bytes) return RecordKind{0};
  return static_cast<RecordKind>(static_cast<std::uint8_t>(bytes[1]));
}

std::string encode_versions_unchecked(const std::vector<VersionEntry>& versions) {
  Encoder e;
  e.u32(static_cast<std::uint32_t>(versions.size()));
  for (const VersionEntry& v : versions) {
    e.str(v.version_id);
    e.u8(v.delete_marker ? 1 : 0);
    e.str(encode_object_unchecked(v.rec));
  }
  return e.finish(RecordKind::versions, 1);
}

std::string encode_versions(const std::vector<VersionEntry>& versions) {
  OBJDIRECT_ASSERT(!versions.empty(), "a versions record holds at least one version");
  std::set<std::string_view> ids;
  for (const VersionEntry& v : versions) {
    OBJDIRECT_ASSERT(valid_version_id(v.version_id) && ids.insert(v.version_id).second,
                     "a versions record's ids are valid and distinct");
    OBJDIRECT_ASSERT(v.rec.meta.key == versions.front().rec.meta.key,
                     "a versions record holds the versions of one key");
    OBJDIRECT_ASSERT(!v.delete_marker || (v.rec.meta.size == 0 && v.rec.segments.empty() &&
                                          v.rec.meta.parts.empty()),
                     "a delete marker has no bytes");
    OBJDIRECT_ASSERT(segments_total(v.rec) == v.rec.meta.size,
                     "an object record's segments add up to its size");
  }
  std::string bytes = encode_versions_unchecked(versions);
  OBJDIRECT_ASSERT(round_trips(bytes, decode_versions, encode_versions_unchecked),
                   "a versions record decodes back to itself");
  return bytes;
}

namespace {

// str id (>= 4 bytes), u8 flags, str record (>= 4 + header_bytes).
constexpr std::size_t version_entry_bytes_min = 4 + 4 + 1 + 4 + header_bytes;

// Decodes one entry at d's position; keep_parts as decode_object.
VersionEntry decode_version_entry(Decoder& d, bool keep_parts, Status& inner) {
  VersionEntry v;
  v.version_id = d.str();
  const std::uint8_t flags = d.u8();
  const std::string_view rec = d.view();
  if (!d.ok()) return v;
  if (!valid_version_id(v.version_id)) {
    d.fail("invalid version id");
    return v;
  }
  if (flags > 1) {
    d.fail("unknown version flags");
    return v;
  }
  v.delete_marker = flags == 1;
  auto r = keep_parts ? decode_object(rec) : decode_object_without_parts(rec);
  if (!r.ok()) {
    inner = r.status();
    d.fail("undecodable version");
    return v;
  }
  v.rec = std::move(*r);
  if (v.delete_marker && (v.rec.meta.size != 0 || !v.rec.segments.empty() ||
                          (keep_parts && !v.rec.meta.parts.empty()))) {
    d.fail("delete marker with data");
    return v;
  }
  v.rec.meta.version_id = v.version_id;
  v.rec.meta.delete_marker = v.delete_marker;
  return v;
}

}  // namespace

Result<std::vector<VersionEntry>> decode_versions(std::string_view bytes) {
  Decoder d(bytes);
  d.header(RecordKind::versions);
  const std::uint32_t n = d.count(version_entry_bytes_min);
  if (d.ok() && n == 0) d.fail("versions record without a version");
  std::vector<VersionEntry> out;
  out.reserve(n);
  std::set<std::string_view> ids;
  Status inner;
  for (std::uint32_t i = 0; i < n && d.ok(); ++i) {
    out.push_back(decode_version_entry(d, true, inner));
    if (!d.ok()) break;
    if (out.back().rec.meta.key != out.front().rec.meta.key) d.fail("versions of different keys");
  }
  // Ids are checked once every entry sits in its final place (the views point into `out`).
  if (d.ok()) {
    for (const VersionEntry& v : out) {
      if (!ids.insert(v.version_id).second) {
        d.fail("repeated version id");
        break;
      }
    }
  }
  d.end();
  if (!inner.ok()) return inner;
  if (!d.ok()) return d.status();
  return out;
}

Result<VersionEntry> decode_latest_version(std::string_view bytes) {
  Decoder d(bytes);
  d.header(RecordKind::versions);
  const std::uint32_t n = d.count(version_entry_bytes_min);
  if (d.ok() && n == 0) d.fail("versions record without a version");
  Status inner;
  VersionEntry v = decode_version_entry(d, false, inner);
  if (!inner.ok()) return inner;
  if (!d.ok()) return d.status();
  return v;
}

}  // namespace objdirect::storage::local
