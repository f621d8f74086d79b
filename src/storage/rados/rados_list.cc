// RadosStore: ListObjects and ListObjectVersions, a k-way merge of the key's index shards
// (docs/scale-out.md, "Layout"; versions: docs/versioning.md, "RADOS layout").
#include <algorithm>
#include <deque>

#include "common/limits.hpp"
#include "storage/rados/rados_store_impl.hpp"
#include "storage/version_paging.hpp"

namespace objdirect::storage::rados_impl {
namespace {

// The "o" entries of all shards of a bucket instance under a prefix, in key order, each shard
// read a page (<= omap_page_max entries) at a time.
class ShardMerge {
 public:
  ShardMerge(Conn& c, const BucketRec& b, const std::string& prefix, const std::string& after)
      : c_(c), filter_(tagged("o", prefix)), shards_(b.shards) {
    for (std::uint32_t s = 0; s < b.shards; ++s) {
      shards_[s].oid = c.shard_oid(b, s);
      if (!after.empty()) shards_[s].after = tagged("o", after);
    }
  }
  // The smallest key left (without the "o"), or nullopt at the end.
  Result<std::optional<std::string>> next() {
    best_ = nullptr;
    for (Shard& s : shards_) {
      OBJDIRECT_RETURN_IF_ERROR(fill(s));
      if (!s.buf.empty() && (best_ == nullptr || s.buf.front().first < best_->buf.front().first)) {
        best_ = &s;
      }
    }
    if (best_ == nullptr) return std::optional<std::string>();
    return std::optional<std::string>(best_->buf.front().first.substr(1));
  }
  // The value of the key next() returned.
  std::string value() const { return to_str(best_->buf.front().second); }
  void pop() { best_->buf.pop_front(); }
  // Drops every key under common prefix cp; seeks past it without reading it.
  void skip_prefix(const std::string& cp) {
    const std::string ocp = tagged("o", cp);
    const std::string past = ocp + std::string(limits::key_bytes_max + 1, '\xff');
    for (Shard& s : shards_) {
      while (!s.buf.empty() && s.buf.front().first.starts_with(ocp)) s.buf.pop_front();
      if (s.buf.empty() && s.more && s.after < past) s.after = past;
    }
  }

 private:
  struct Shard {
    std::string oid, after;
    bool more = true;
    std::deque<std::pair<std::string, bufferlist>> buf;
  };
  Status fill(Shard& s) {
    if (!s.buf.empty() || !s.more) return Status();
    std::map<std::string, bufferlist> page;
    OBJDIRECT_RETURN_IF_ERROR(
        c_.omap_page(s.oid, s.after, filter_, rados_limits::omap_page_max, page, s.more));
    if (page.empty()) s.more = false;
    for (auto& kv : page) s.buf.emplace_back(kv.first, std::move(kv.second));
    if (!page.empty()) s.after = page.rbegin()->first;
    return Status();
  }

  Conn& c_;
  const std::string filter_;
  std::vector<Shard> shards_;
  Shard* best_ = nullptr;
};

}  // namespace

Result<ListResult> RadosStore::list_objects(std::string_view bucket, const ListQuery& q) {
  auto b = valid_bucket(bucket, std::nullopt);
  if (!b.ok()) return b.status();
  ShardMerge merge(*c_, *b, q.prefix, q.start_after);
  ListResult out;
  const std::uint32_t max = std::min(q.max_keys, limits::list_keys_max);
  std::uint32_t count = 0;
  for (;;) {
    auto next = merge.next();
    if (!next.ok()) return next.status();
    if (!*next) break;
    const std::string& key = **next;
    if (!q.delimiter.empty()) {
      const auto d = key.find(q.delimiter, q.prefix.size());
      if (d != std::string::npos) {
        const std::string cp = key.substr(0, d + q.delimiter.size());
        if (cp > q.start_after) {
          // As AWS: a common prefix is listed only when some key below it has a latest version
          // that is not a delete marker (the walk stops at the first such key).
          bool live = false;
          for (std::optional<std::string> k = key; !live && k && k->starts_with(cp);) {
            auto v = decode_latest(merge.value());
            if (!v.ok()) return v.status();
            live = !v->entry.delete_marker;
            if (live) break;
            merge.pop();
            auto n = merge.next();
            if (!n.ok()) return n.status();
            k = std::move(*n);
          }
          if (live) {
            if (count == max) {
              out.truncated = true;
              break;
            }
            out.common_prefixes.push_back(cp);
            out.next_marker = cp;
            ++count;
          }
        }
        merge.skip_prefix(cp);
        continue;
      }
    }
    if (key <= q.start_after) {
      merge.pop();
      continue;
    }
    // Only the newest version is decoded; a key whose newest version is a delete marker is not
    // listed.
    auto v = decode_latest(merge.value());
    if (!v.ok()) return v.status();
    if (!v->entry.delete_marker) {
      if (count == max) {
        out.truncated = true;
        break;
      }
      out.objects.push_back(std::move(v->entry.rec.meta));
      out.next_marker = key;
      ++count;
    }
    merge.pop();
  }
  if (!out.truncated) out.next_marker.clear();
  return out;
}

// The same walk as list_objects, each key giving its versions newest first. key_marker (with
// version_id_marker) resumes inside a key, as AWS's NextKeyMarker / NextVersionIdMarker do.
Result<ListVersionsResult> RadosStore::list_object_versions(std::string_view bucket,
                                                            const ListVersionsQuery& q) {
  if (!q.version_id_marker.empty() && !local::valid_version_id(q.version_id_marker)) {
    return Status(Errc::invalid_argument, "Invalid version id specified");
  }
  auto b = valid_bucket(bucket, std::nullopt);
  if (!b.ok()) return b.status();
  ListVersionsResult out;
  const std::uint32_t max = std::min(q.max_keys, limits::list_keys_max);
  if (max == 0) return out;
  // Resuming inside key_marker: start just before it.
  std::string after = q.key_marker;
  if (!q.version_id_marker.empty() && !after.empty()) after.pop_back();
  ShardMerge merge(*c_, *b, q.prefix, after);
  std::uint32_t count = 0;
  while (!out.truncated) {
    auto next = merge.next();
    if (!next.ok()) return next.status();
    if (!*next) break;
    const std::string key = **next;
    if (auto cp = roll_up_version_key(key, q, max, count, out)) {
      if (out.truncated) break;
      merge.skip_prefix(*cp);
      continue;
    }
    if (key > q.key_marker || (key == q.key_marker && !q.version_id_marker.empty())) {
      auto entry = decode_key_entry(merge.value());
      if (!entry.ok()) return entry.status();
      auto& vs = entry->versions;
      std::size_t first = 0;
      if (key == q.key_marker) {
        first = vs.size();  // an unknown marker id: nothing more of this key
        for (std::size_t i = 0; i < vs.size(); ++i) {
          if (vs[i].entry.version_id == q.version_id_marker) first = i + 1;
        }
      }
      std::int64_t newer_mtime = first == 0 ? 0 : vs[first - 1].entry.rec.meta.mtime_ns;
      for (std::size_t i = first; i < vs.size(); ++i) {
        if (count == max) {
          out.truncated = true;
          break;
        }
        ObjectVersion v;
        v.is_latest = i == 0;
        v.noncurrent_since_ns = newer_mtime;  // 0 for the latest
        newer_mtime = vs[i].entry.rec.meta.mtime_ns;
        v.meta = std::move(vs[i].entry.rec.meta);
        v.meta.version_id = vs[i].entry.version_id;
        v.meta.delete_marker = vs[i].entry.delete_marker;
        v.meta.parts.clear();
        out.next_key_marker = key;
        out.next_version_id_marker = v.meta.version_id;
        out.versions.push_back(std::move(v));
        ++count;
      }
    }
    if (out.truncated) break;
    merge.pop();
  }
  if (!out.truncated) {
    out.next_key_marker.clear();
    out.next_version_id_marker.clear();
  }
  return out;
}

}  // namespace objdirect::storage::rados_impl
