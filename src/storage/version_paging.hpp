// ListObjectVersions paging, the step shared by the backends that walk their keys in order
// (local, RADOS): the delimiter roll-up of a key into its common prefix, counted against
// max-keys as AWS counts it.
//
// Thread safety: a pure function of its arguments (it changes only `count` and `out`).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "storage/object_store.hpp"

namespace objdirect::storage {

// `key` starts with q.prefix. When q.delimiter occurs in key after the prefix, returns the common
// prefix key rolls up into (q.prefix up to and including the first such delimiter), and lists it
// in `out` (its next markers set, `count` raised) unless it is at or before q.key_marker (an
// earlier page listed it) or the page already holds `max` entries (then out.truncated is set
// and the walk ends). The caller then skips every key below the prefix. nullopt: key is listed
// on its own (its versions).
inline std::optional<std::string> roll_up_version_key(const std::string& key,
                                                      const ListVersionsQuery& q, std::uint32_t max,
                                                      std::uint32_t& count,
                                                      ListVersionsResult& out) {
  if (q.delimiter.empty()) return std::nullopt;
  const std::size_t cut = key.find(q.delimiter, q.prefix.size());
  if (cut == std::string::npos) return std::nullopt;
  std::string cp = key.substr(0, cut + q.delimiter.size());
  if (cp > q.key_marker) {
    if (count == max) {
      out.truncated = true;
      return cp;
    }
    out.common_prefixes.push_back(cp);
    out.next_key_marker = cp;
    out.next_version_id_marker.clear();
    ++count;
  }
  return cp;
}

}  // namespace objdirect::storage
