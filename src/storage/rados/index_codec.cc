// Codecs of the RADOS index's object and versions values (see index_codec.hpp).
#include "storage/rados/index_codec.hpp"

#include <cstring>

#include "common/assert.hpp"
#include "storage/rados/rados_store.hpp"

namespace objdirect::storage::rados_impl {
namespace {

void put_u32(std::string& out, std::uint32_t v) {
  char b[4];
  for (int i = 0; i < 4; ++i) b[i] = char((v >> (8 * i)) & 0xff);
  out.append(b, 4);
}
bool get_u32(std::string_view& in, std::uint32_t& v) {
  if (in.size() < 4) return false;
  v = 0;
  for (int i = 0; i < 4; ++i) v |= std::uint32_t(static_cast<unsigned char>(in[i])) << (8 * i);
  in.remove_prefix(4);
  return true;
}
Status corrupt(const char* what) {
  return Status(Errc::corrupt, std::string("bad RADOS index value: ") + what);
}
bool is_zero(const local::BlobId& id) {
  return id == local::BlobId{};
}
// The bytes a record keeps inline (the sizes of its all-zero-blob segments).
std::uint64_t inline_size(const local::ObjectRecord& rec) {
  std::uint64_t n = 0;
  for (const local::Segment& s : rec.segments) {
    if (is_zero(s.blob)) n += s.size;
  }
  return n;
}
// Skips the tag and the inline bytes; `inl` gets the first version's.
Result<std::string_view> versions_record(std::string_view v, std::uint32_t& n,
                                         std::vector<std::string_view>* inl) {
  std::uint32_t tag = 0;
  if (!get_u32(v, tag) || tag != versions_tag) return corrupt("not a versions value");
  if (!get_u32(v, n) || n == 0) return corrupt("no version");
  // Each version needs at least 4 bytes here: a count beyond the input is refused before any
  // allocation.
  if (n > v.size() / 4) return corrupt("version count beyond the input");
  for (std::uint32_t i = 0; i < n; ++i) {
    std::uint32_t len = 0;
    if (!get_u32(v, len) || v.size() < len) return corrupt("truncated inline bytes");
    if (inl != nullptr) inl->push_back(v.substr(0, len));
    v.remove_prefix(len);
  }
  return v;
}

}  // namespace

std::string encode_object_val_unchecked(const ObjectVal& o) {
  std::string out;
  put_u32(out, std::uint32_t(o.inline_data.size()));
  out += o.inline_data;
  out += local::encode_object_unchecked(o.rec);
  return out;
}

Result<ObjectVal> decode_object_val(std::string_view v, bool with_parts) {
  ObjectVal o;
  std::uint32_t n = 0;
  if (!get_u32(v, n) || v.size() < n) return Status(Errc::corrupt, "bad object value");
  o.inline_data = std::string(v.substr(0, n));
  v.remove_prefix(n);
  auto rec = with_parts ? local::decode_object(v) : local::decode_object_without_parts(v);
  if (!rec.ok()) return rec.status();
  o.rec = std::move(*rec);
  if (inline_size(o.rec) != o.inline_data.size()) {
    return corrupt("inline bytes differ from the object's inline segment");
  }
  return o;
}

bool is_versions_val(std::string_view v) {
  std::uint32_t tag = 0;
  return get_u32(v, tag) && tag == versions_tag;
}

std::string encode_versions_val_unchecked(const std::vector<Version>& versions) {
  std::string out;
  put_u32(out, versions_tag);
  put_u32(out, std::uint32_t(versions.size()));
  std::vector<local::VersionEntry> entries;
  entries.reserve(versions.size());
  for (const Version& v : versions) {
    put_u32(out, std::uint32_t(v.inline_data.size()));
    out += v.inline_data;
    entries.push_back(v.entry);
  }
  out += local::encode_versions_unchecked(entries);
  return out;
}

namespace {

// decode(bytes) is accepted and encodes back to `bytes` (the canonical encoding).
template <typename Decode, typename Encode>
bool round_trips(const std::string& bytes, Decode decode, Encode encode) {
  auto back = decode(bytes);
  return back.ok() && encode(*back) == bytes;
}

Result<ObjectVal> decode_object_val_with_parts(std::string_view v) {
  return decode_object_val(v, true);
}

}  // namespace

std::string encode_object_val(const ObjectVal& o) {
  OBJDIRECT_ASSERT(o.inline_data.size() <= rados_limits::inline_bytes_max,
                   "an object value keeps at most inline_bytes_max inline");
  OBJDIRECT_ASSERT(inline_size(o.rec) == o.inline_data.size(),
                   "an object value's inline bytes are its record's inline segment");
  std::string bytes = encode_object_val_unchecked(o);
  OBJDIRECT_ASSERT(round_trips(bytes, decode_object_val_with_parts, encode_object_val_unchecked),
                   "an object value decodes back to itself");
  return bytes;
}

std::string encode_versions_val(const std::vector<Version>& versions) {
  OBJDIRECT_ASSERT(!versions.empty(), "a versions value holds at least one version");
  for (const Version& v : versions) {
    OBJDIRECT_ASSERT(inline_size(v.entry.rec) == v.inline_data.size(),
                     "a version's inline bytes are its record's inline segment");
  }
  std::string bytes = encode_versions_val_unchecked(versions);
  OBJDIRECT_ASSERT(round_trips(bytes, decode_versions_val, encode_versions_val_unchecked),
                   "a versions value decodes back to itself");
  return bytes;
}

Result<std::vector<Version>> decode_versions_val(std::string_view v) {
  std::uint32_t n = 0;
  std::vector<std::string_view> inl;
  auto rest = versions_record(v, n, &inl);
  if (!rest.ok()) return rest.status();
  auto entries = local::decode_versions(*rest);
  if (!entries.ok()) return entries.status();
  if (entries->size() != n) return corrupt("version count differs from the versions record");
  std::vector<Version> out(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    if (inline_size((*entries)[i].rec) != inl[i].size()) {
      return corrupt("inline bytes differ from the version's inline segment");
    }
    out[i].entry = std::move((*entries)[i]);
    out[i].inline_data = std::string(inl[i]);
  }
  return out;
}

Result<KeyEntry> decode_key_entry(const std::optional<std::string>& raw) {
  KeyEntry e;
  if (!raw) return e;
  if (is_versions_val(*raw)) {
    auto vs = decode_versions_val(*raw);
    if (!vs.ok()) return vs.status();
    e.versions = std::move(*vs);
    return e;
  }
  auto o = decode_object_val(*raw);
  if (!o.ok()) return o.status();
  e.plain = true;
  Version v;
  v.entry.version_id = "null";
  v.entry.rec = std::move(o->rec);
  v.inline_data = std::move(o->inline_data);
  e.versions.push_back(std::move(v));
  return e;
}

std::string encode_key_entry(const KeyEntry& e) {
  OBJDIRECT_ASSERT(!e.versions.empty(), "a key entry to store holds a version");
  OBJDIRECT_ASSERT(!e.plain || e.versions.size() == 1, "a plain key entry is one null version");
  if (e.plain) {
    ObjectVal o;
    o.rec = e.versions.front().entry.rec;
    o.rec.meta.version_id.clear();
    o.rec.meta.delete_marker = false;
    o.inline_data = e.versions.front().inline_data;
    return encode_object_val(o);
  }
  return encode_versions_val(e.versions);
}

Result<Version> decode_latest(std::string_view v) {
  Version out;
  if (!is_versions_val(v)) {
    auto o = decode_object_val(v, false);
    if (!o.ok()) return o.status();
    out.entry.version_id = "null";
    out.entry.rec = std::move(o->rec);
    out.inline_data = std::move(o->inline_data);
    return out;
  }
  std::uint32_t n = 0;
  std::vector<std::string_view> inl;
  auto rest = versions_record(v, n, &inl);
  if (!rest.ok()) return rest.status();
  auto e = local::decode_latest_version(*rest);
  if (!e.ok()) return e.status();
  if (inline_size(e->rec) != inl[0].size()) {
    return corrupt("inline bytes differ from the version's inline segment");
  }
  out.entry = std::move(*e);
  out.inline_data = std::string(inl[0]);
  return out;
}

std::uint64_t inline_bytes(const std::vector<Version>& versions) {
  std::uint64_t n = 0;
  for (const Version& v : versions) n += v.inline_data.size();
  return n;
}

}  // namespace objdirect::storage::rados_impl
