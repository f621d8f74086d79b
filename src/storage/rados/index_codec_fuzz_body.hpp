// The fuzz body for the RADOS index value decoders (index_codec.hpp), shared by the libFuzzer
// target (index_codec_fuzz.cc, built with OBJDIRECT_FUZZ=ON) and the seed replay in
// rados_store_test (RadosCodec.CorpusSeedsHoldTheFuzzProperties), so CI runs the checks the
// fuzzer does.
//
// Properties checked for every input: no decoder crashes or reads out of bounds, whatever
// decodes re-encodes to exactly the input bytes, and the listing decoder (decode_latest) agrees
// with the full one on the newest version. A violated property aborts.
//
// Thread safety: stateless.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "storage/rados/index_codec.hpp"

namespace objdirect::storage::rados_impl {

inline void fuzz_index_codec_one(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  auto object = decode_object_val(in);
  if (object.ok() && encode_object_val(*object) != in) std::abort();
  auto versions = decode_versions_val(in);
  if (versions.ok() && encode_versions_val(*versions) != in) std::abort();
  if (object.ok() && versions.ok()) std::abort();  // the two kinds of value never overlap
  auto entry = decode_key_entry(std::optional<std::string>(in));
  if (entry.ok() != (object.ok() || versions.ok())) std::abort();
  if (entry.ok() && encode_key_entry(*entry) != in) std::abort();
  if (entry.ok()) {
    auto latest = decode_latest(in);
    const Version& first = entry->versions.front();
    if (!latest.ok() || latest->entry.version_id != first.entry.version_id ||
        latest->entry.delete_marker != first.entry.delete_marker ||
        latest->entry.rec.segments != first.entry.rec.segments ||
        latest->inline_data != first.inline_data) {
      std::abort();
    }
  }
}

}  // namespace objdirect::storage::rados_impl
