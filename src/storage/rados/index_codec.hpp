// The values of a RADOS index shard's "o" entries (docs/scale-out.md, "Layout"; versions:
// docs/versioning.md, "RADOS layout"), without librados so that a fuzz target can link it.
//
// An object value (a never-versioned key): u32 inline length | inline bytes | object record.
// A versions value (a key written while its bucket is versioned):
//   u32 0xffffffff | u32 n | n x (u32 length | inline bytes) | versions record (kind 5)
// with the inline bytes of the versions in the order of the versions record.
//
// Thread safety: stateless.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.hpp"
#include "storage/local/meta_codec.hpp"

namespace objdirect::storage::rados_impl {

// The first u32 of a versions value; an object value's inline length is at most
// rados_limits::inline_bytes_max, so the two never collide.
inline constexpr std::uint32_t versions_tag = 0xffffffffu;

// A segment whose blob id is all zeros holds the inline bytes.
struct ObjectVal {
  local::ObjectRecord rec;
  std::string inline_data;

  bool operator==(const ObjectVal&) const = default;
};
// Checked in every build (OBJDIRECT_ASSERT, as local::encode_object): inline_data is at most
// rados_limits::inline_bytes_max and is exactly the record's inline (all-zero blob) segment, then
// the bytes decode and encode back to themselves. A failure aborts before anything is stored.
std::string encode_object_val(const ObjectVal& o);
// The same bytes without the checks: tests that need a value the decoder refuses.
std::string encode_object_val_unchecked(const ObjectVal& o);
// Errc::corrupt for a value that is not an object value (a versions value included), or whose
// inline bytes differ from its record's inline segment.
Result<ObjectVal> decode_object_val(std::string_view v, bool with_parts = true);

// One version of a key: its entry in the versions record and its inline bytes.
struct Version {
  local::VersionEntry entry;
  std::string inline_data;

  bool operator==(const Version&) const = default;
};
// Newest first, at least one. Checked in every build: at least one version, each version's inline
// bytes exactly its record's inline segment, local::encode_versions' own checks (valid distinct
// ids, one key, ...), then the round trip.
std::string encode_versions_val(const std::vector<Version>& versions);
std::string encode_versions_val_unchecked(const std::vector<Version>& versions);
// Errc::corrupt for anything else: a wrong tag, a count that differs from the record's, inline
// bytes on a version whose record has no inline segment (or a length that differs from it),
// truncation, trailing bytes, or a versions record that local::decode_versions refuses.
Result<std::vector<Version>> decode_versions_val(std::string_view v);
bool is_versions_val(std::string_view v);

// A key's index entry decoded either way: `plain` for an object value, which reads as the one
// "null" version; empty `versions` when the key has no entry.
struct KeyEntry {
  bool plain = false;
  std::vector<Version> versions;
};
Result<KeyEntry> decode_key_entry(const std::optional<std::string>& raw);
// The value to store (precondition, asserted: versions not empty; plain: exactly one version).
std::string encode_key_entry(const KeyEntry& e);
// The newest version only, without parts (listings). Checks what it decodes.
Result<Version> decode_latest(std::string_view v);
// Inline bytes of all versions together.
std::uint64_t inline_bytes(const std::vector<Version>& versions);

}  // namespace objdirect::storage::rados_impl
