// Byte encoding of the records that storage/local keeps in LMDB (objects, buckets, uploads,
// parts). The format is documented in docs/metadata_format.md: every record is
//   u8 version | u8 kind | u32 body_bytes (LE) | body
// with little-endian fixed-width integers and u32-length-prefixed strings.
//
// Encoding is canonical: decode(b) succeeding implies encode(decode(b)) == b. Decoding is total:
// any byte string yields either a record or Errc::corrupt, never a crash, an over-read, or an
// allocation larger than the input allows.
//
// Thread safety: stateless free functions; safe to call concurrently.
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.hpp"
#include "storage/object_store.hpp"

namespace objdirect::storage::local {

// The name of one data file: 128 random bits, spelled as 32 lowercase hex digits on disk.
struct BlobId {
  std::array<std::uint8_t, 16> bytes{};

  // "0123...ef" (32 characters).
  std::string hex() const;
  // Parses exactly 32 lowercase hex digits; invalid_argument otherwise.
  static Result<BlobId> from_hex(std::string_view hex);
  // 128 bits from the kernel's CSPRNG (getrandom).
  static BlobId random();

  auto operator<=>(const BlobId&) const = default;
};

struct BlobIdHash {
  std::size_t operator()(const BlobId& id) const noexcept;
};

// One contiguous piece of an object's bytes: the whole of one blob file.
struct Segment {
  BlobId blob;
  std::uint64_t size = 0;

  bool operator==(const Segment&) const = default;
};

// The value stored for an object: its metadata plus where its bytes are. A single-PUT object has
// one segment (none when empty); a multipart object has one segment per part, in order.
struct ObjectRecord {
  ObjectMeta meta;
  std::vector<Segment> segments;

  bool operator==(const ObjectRecord&) const = default;
};

// The value stored for one uploaded part.
struct PartRecord {
  PartInfo info;
  BlobId blob;

  bool operator==(const PartRecord&) const = default;
};

// One version of a key in a versioned bucket (docs/versioning.md).
struct VersionEntry {
  std::string version_id;  // "null" or 32 lowercase hex digits
  bool delete_marker = false;
  // The version's metadata and bytes; a marker has size 0 and no parts or segments. Decoding
  // copies version_id and delete_marker into rec.meta (encoding ignores rec.meta's copies).
  ObjectRecord rec;

  bool operator==(const VersionEntry&) const = default;
};

// Whether `id` can name a version: "null", or 32 lowercase hex digits (the ids this store makes).
bool valid_version_id(std::string_view id);

// Record kinds (the second byte of every record).
enum class RecordKind : std::uint8_t { object = 1, bucket = 2, upload = 3, part = 4, versions = 5 };

// The newest record version: 1, 2 for object and upload records that carry tags and bucket
// records with tags or configuration documents, 3 for object, upload and part records that carry
// SSE-C parameters (docs/metadata_format.md, docs/sse-c.md). Other records are still written as
// version 1.
inline constexpr std::uint8_t meta_format_version = 3;

// The encoders check, in every build (OBJDIRECT_ASSERT: a failure is a programmer error), that
// the record is one the decoder accepts and that the bytes decode back to themselves
// (decode, then encode again, gives the same bytes: every field written is read back).
// Preconditions of encode_object: the segments' sizes add up to meta.size. meta.version_id and
// meta.delete_marker are not written (a versions entry supplies them).
std::string encode_object(const ObjectRecord& rec);
std::string encode_bucket(const BucketInfo& info);
std::string encode_upload(const UploadInfo& info);
std::string encode_part(const PartRecord& rec);
// A key's versions (kind 5, version 1), newest first. Preconditions: at least one entry; ids
// valid (valid_version_id) and distinct; every entry of the same key (rec.meta.key); a delete
// marker without bytes, segments or parts; each nested record as encode_object's.
std::string encode_versions(const std::vector<VersionEntry>& versions);
// Tests only: the same bytes without the checks above, to build records the decoder must refuse
// (meta_codec_test's "Rejects..." cases). Storage code uses the checked encoders.
std::string encode_object_unchecked(const ObjectRecord& rec);
std::string encode_versions_unchecked(const std::vector<VersionEntry>& versions);
// The kind byte of a record (0 when shorter than a header): the value under a key in the
// objects table is an object record (never-versioned) or a versions record.
RecordKind record_kind(std::string_view bytes);

// Each returns Errc::corrupt (with a message naming the problem) for any malformed input:
// wrong version or kind, truncated field, length or count beyond the input, trailing bytes, or
// segment sizes that do not add up to meta.size.
Result<ObjectRecord> decode_object(std::string_view bytes);
// As decode_object (same validation) but leaves meta.parts empty: listings need no per-part
// data, and a 10,000-part object would otherwise cost 10,000 allocations per listed entry.
Result<ObjectRecord> decode_object_without_parts(std::string_view bytes);
Result<BucketInfo> decode_bucket(std::string_view bytes);
Result<UploadInfo> decode_upload(std::string_view bytes);
Result<PartRecord> decode_part(std::string_view bytes);
// Errc::corrupt also for no entry, an invalid or repeated version id, flags other than 0 / 1,
// entries naming different keys, or a marker with bytes, parts or segments.
Result<std::vector<VersionEntry>> decode_versions(std::string_view bytes);
// The newest entry only, without parts (listings): checks the header and that entry alone.
Result<VersionEntry> decode_latest_version(std::string_view bytes);

}  // namespace objdirect::storage::local
