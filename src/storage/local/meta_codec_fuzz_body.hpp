// The one fuzz body for the metadata decoders, shared by the libFuzzer target
// (meta_codec_fuzz.cc, built with OBJDIRECT_FUZZ=ON) and the seed-corpus gtest
// (meta_codec_corpus_test.cc), so CI runs the same checks the fuzzer does.
//
// Properties checked for every input: no decoder crashes or reads out of bounds (the sanitizers
// and the fuzzer catch that), and whatever decodes re-encodes to exactly the input bytes
// (the encoding is canonical). A violated property aborts.
//
// Thread safety: stateless.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "storage/local/meta_codec.hpp"

namespace objdirect::storage::local {

inline void fuzz_meta_codec_one(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  auto full = decode_object(in);
  if (full.ok() && encode_object(*full) != in) std::abort();
  // The listing decoder accepts exactly the same inputs and differs only in dropping parts.
  auto lean = decode_object_without_parts(in);
  if (lean.ok() != full.ok()) std::abort();
  if (lean.ok() && (lean->meta.parts.size() != 0 || lean->segments != full->segments ||
                    lean->meta.key != full->meta.key || lean->meta.size != full->meta.size)) {
    std::abort();
  }
  if (auto r = decode_bucket(in); r.ok() && encode_bucket(*r) != in) std::abort();
  if (auto r = decode_upload(in); r.ok() && encode_upload(*r) != in) std::abort();
  if (auto r = decode_part(in); r.ok() && encode_part(*r) != in) std::abort();
  // A key's versions (docs/versioning.md): canonical, and the listing decoder agrees with the
  // full one on the newest entry whenever the full one accepts the record.
  auto versions = decode_versions(in);
  if (versions.ok()) {
    if (encode_versions(*versions) != in) std::abort();
    auto latest = decode_latest_version(in);
    if (!latest.ok() || latest->version_id != versions->front().version_id ||
        latest->delete_marker != versions->front().delete_marker ||
        latest->rec.segments != versions->front().rec.segments) {
      std::abort();
    }
  }
}

}  // namespace objdirect::storage::local
