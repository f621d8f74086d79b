// ListMultipartUploads paging over a backend's uploads of one bucket, shared by the backends
// that read them all (local, RADOS): AWS's order (key, then initiation time, then id), the key
// and upload-id markers, delimiter roll-up into common prefixes (each counted against
// max-uploads), at most limits::list_keys_max per page, next markers only when truncated.
//
// Thread safety: a pure function.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "common/limits.hpp"
#include "storage/object_store.hpp"

namespace objdirect::storage {

// `all`: the bucket's uploads whose key starts with q.prefix, in any order.
inline ListUploadsResult page_uploads(std::vector<UploadInfo> all, const ListUploadsQuery& q) {
  auto order = [](const UploadInfo& u) { return std::tie(u.key, u.initiated_ns, u.upload_id); };
  std::sort(all.begin(), all.end(),
            [&](const UploadInfo& a, const UploadInfo& b) { return order(a) < order(b); });
  std::int64_t marker_ns = 0;
  for (const UploadInfo& u : all) {
    if (u.key == q.key_marker && u.upload_id == q.upload_id_marker) marker_ns = u.initiated_ns;
  }
  auto after_marker = [&](const UploadInfo& u) {
    if (q.key_marker.empty()) return true;
    if (u.key != q.key_marker) return u.key > q.key_marker;
    if (q.upload_id_marker.empty()) return false;
    return std::tie(u.initiated_ns, u.upload_id) > std::tie(marker_ns, q.upload_id_marker);
  };
  ListUploadsResult out;
  const std::uint32_t max = std::min(q.max_uploads, limits::list_keys_max);
  if (max == 0) return out;
  std::uint32_t count = 0;
  for (const UploadInfo& u : all) {
    std::size_t cut = std::string::npos;
    if (!q.delimiter.empty()) cut = u.key.find(q.delimiter, q.prefix.size());
    if (cut != std::string::npos) {
      std::string cp = u.key.substr(0, cut + q.delimiter.size());
      if (cp <= q.key_marker ||
          (!out.common_prefixes.empty() && out.common_prefixes.back() == cp)) {
        continue;
      }
      if (count == max) {
        out.truncated = true;
        break;
      }
      out.next_key_marker = cp;
      out.next_upload_id_marker.clear();
      out.common_prefixes.push_back(std::move(cp));
      ++count;
      continue;
    }
    if (!after_marker(u)) continue;
    if (count == max) {
      out.truncated = true;
      break;
    }
    out.next_key_marker = u.key;
    out.next_upload_id_marker = u.upload_id;
    out.uploads.push_back(u);
    ++count;
  }
  if (!out.truncated) {
    out.next_key_marker.clear();
    out.next_upload_id_marker.clear();
  }
  return out;
}

}  // namespace objdirect::storage
