// RadosStore: objects (docs/scale-out.md, "Commit protocol"; versions: docs/versioning.md,
// "RADOS layout"). Every change of a key is one compound op on its index shard (commit_key).
#include <algorithm>
#include <cerrno>

#include "common/assert.hpp"
#include "common/limits.hpp"
#include "storage/rados/rados_store_impl.hpp"

namespace objdirect::storage::rados_impl {

Result<std::unique_ptr<BlobWriter>> RadosStore::begin_write(std::string_view bucket) {
  auto b = valid_bucket(bucket, std::nullopt);
  if (!b.ok()) return b.status();
  return std::unique_ptr<BlobWriter>(new RadosWriter(c_, std::move(*b), ""));
}

Result<std::unique_ptr<BlobWriter>> RadosStore::begin_write_for(std::string_view bucket,
                                                                std::string_view key) {
  auto b = valid_bucket(bucket, key);
  if (!b.ok()) return b.status();
  std::string oid = c_->key_shard(*b, key);
  return std::unique_ptr<BlobWriter>(new RadosWriter(c_, std::move(*b), std::move(oid)));
}

Result<ObjectMeta> RadosStore::commit_object(std::string_view bucket, ObjectMeta meta,
                                             std::unique_ptr<BlobWriter> data,
                                             const WriteCondition& cond) {
  OBJDIRECT_RETURN_IF_ERROR(validate_key(meta.key));
  auto* w = dynamic_cast<RadosWriter*>(data.get());
  OBJDIRECT_ASSERT(w != nullptr && w->bucket().info.name == bucket,
                   "a writer is committed to the store and bucket that began it");
  if (meta.size != w->size()) return Status(Errc::invalid_argument, "size mismatch");
  // The writer's bucket instance: if it was deleted since, the "live" assertion fails.
  const BucketRec* b = &w->bucket();
  const std::string oid = c_->key_shard(*b, meta.key);
  Version nv;
  bool inline_data = w->can_inline(c_->opts.inline_bytes);
  auto to_blob = [&]() -> Status {
    OBJDIRECT_RETURN_IF_ERROR(w->finish());
    OBJDIRECT_RETURN_IF_ERROR(w->move_intent(oid));
    nv.inline_data.clear();
    nv.entry.rec.segments = {{w->blob(), meta.size}};
    inline_data = false;
    return Status();
  };
  if (inline_data) {
    nv.inline_data = w->take_inline();
    if (meta.size > 0) nv.entry.rec.segments.push_back({BlobId{}, meta.size});
  } else {
    OBJDIRECT_RETURN_IF_ERROR(to_blob());
  }
  const std::string okey = tagged("o", meta.key);
  const std::string ikey = tagged("i", w->blob().hex());
  for (int attempt = 0; attempt < commit_attempts_max; ++attempt) {
    auto ks = current_key(*b, oid, okey, cond);
    if (!ks.ok()) return ks.status();
    nv.entry.rec.meta = meta;
    nv.entry.rec.meta.mtime_ns = now_ns();
    Version v = nv;
    auto written = put_version(*ks, std::move(v));
    if (!written.ok()) return written.status();
    if (inline_data && !ks->entry.plain &&
        inline_bytes(ks->entry.versions) > rados_limits::versions_inline_bytes_max) {
      // The key's versions keep at most versions_inline_bytes_max inline: this one gets a blob.
      OBJDIRECT_RETURN_IF_ERROR(to_blob());
      continue;
    }
    KeyCommit kc;
    OBJDIRECT_RETURN_IF_ERROR(stage_key(okey, *ks, kc));
    if (!inline_data) {
      kc.asserts[ikey] = {bufferlist(), LIBRADOS_CMPXATTR_OP_GT};
      kc.rm.insert(ikey);
    }
    const int r = run(oid, kc);
    if (r == 0) {
      w->set_committed();
      return std::move(*written);
    }
    if (r == -ENOENT) return no_such_bucket();
    if (r != -ECANCELED) return rados_error(r, "object commit");
    auto next = after_conflict(*b, oid, inline_data ? std::string() : ikey, attempt);
    if (!next.ok()) return next.status();
    if (next->instance != b->instance) return no_such_bucket();
  }
  return Status(Errc::slow_down, "Too many concurrent writers of this key; retry");
}

Result<ObjectMeta> RadosStore::set_object_tags(std::string_view bucket, std::string_view key,
                                               TagSet tags) {
  return set_object_version_tags(bucket, key, "", std::move(tags));
}

// CopyObject onto itself: in a versioned bucket a new version sharing the bytes (and blobs) of
// the latest one, else the metadata replaced in place.
Result<ObjectMeta> RadosStore::replace_meta(std::string_view bucket, ObjectMeta meta,
                                            std::string_view expected_etag) {
  OBJDIRECT_RETURN_IF_ERROR(validate_key(meta.key));
  const std::string okey = tagged("o", meta.key);
  for (int attempt = 0; attempt < commit_attempts_max; ++attempt) {
    auto read = read_key(bucket, meta.key, okey);
    if (!read.ok()) return read.status();
    auto& [e, ks] = *read;
    if (ks.entry.versions.empty() || ks.entry.versions.front().entry.delete_marker) {
      return no_such_key();
    }
    Version nv = ks.entry.versions.front();
    const ObjectMeta& old = nv.entry.rec.meta;
    if (old.etag != expected_etag) return precondition_failed();
    ObjectMeta m = meta;
    m.size = old.size;
    if (m.parts.empty()) m.parts = old.parts;
    if (m.etag.empty()) m.etag = old.etag;
    m.mtime_ns = now_ns();
    nv.entry.rec.meta = std::move(m);
    auto written = put_version(ks, std::move(nv));
    if (!written.ok()) return written.status();
    // On a conflict, retried on the fresh record (commit_key refreshed the cache).
    auto committed = commit_key(e, okey, ks, attempt, "metadata replace");
    if (!committed.ok()) return committed.status();
    if (*committed) return std::move(*written);
  }
  return Status(Errc::slow_down, "Too many concurrent writers of this key; retry");
}

Result<ObjectMeta> RadosStore::head_object(std::string_view bucket, std::string_view key) {
  auto m = head_object_version(bucket, key, "");
  if (m.ok() && m->delete_marker) return no_such_key();
  return m;
}

Result<std::unique_ptr<ObjectReader>> RadosStore::open_object(std::string_view bucket,
                                                              std::string_view key) {
  return open_object_version(bucket, key, "");
}

Status RadosStore::delete_object(std::string_view bucket, std::string_view key) {
  return delete_object_version(bucket, key, "").status();
}

Result<RadosStore::KeyState> RadosStore::current_key(const BucketRec& b, const std::string& oid,
                                                     const std::string& okey,
                                                     const WriteCondition& cond) {
  auto m = c_->omap_get(oid, {okey, versioning_key});
  if (!m.ok()) return m.status();
  std::optional<std::string> raw, vraw;
  if (auto it = m->find(okey); it != m->end()) raw = to_str(it->second);
  if (auto it = m->find(versioning_key); it != m->end()) vraw = to_str(it->second);
  auto ks = key_state(b, std::move(raw), std::move(vraw));
  if (!ks.ok()) return ks.status();
  const auto& vs = ks->entry.versions;
  const ObjectMeta* latest =
      vs.empty() || vs.front().entry.delete_marker ? nullptr : &vs.front().entry.rec.meta;
  if (cond.kind == WriteCondition::Kind::must_be_absent && latest) return precondition_failed();
  if (cond.kind == WriteCondition::Kind::etag_must_match) {
    if (!latest) return no_such_key();
    if (latest->etag != cond.etag) return precondition_failed();
  }
  return ks;
}

Result<RadosStore::KeyRead> RadosStore::read_key(std::string_view name, std::string_view key,
                                                 const std::string& okey) {
  auto e = read_entry(name, key, okey);
  if (!e.ok()) return e.status();
  auto ks = key_state(e->b, e->raw, e->vraw);
  if (!ks.ok()) return ks.status();
  return KeyRead{std::move(*e), std::move(*ks)};
}

Result<RadosStore::Entry> RadosStore::read_entry(std::string_view name, std::string_view key,
                                                 const std::string& okey) {
  auto b = bucket_rec(name);
  if (!b.ok()) return b.status();
  for (int round = 0;; ++round) {
    Entry e{std::move(*b), "", std::nullopt, std::nullopt};
    e.oid = c_->key_shard(e.b, key);
    auto m = c_->omap_get(e.oid, {okey, state_key, versioning_key});
    if (!m.ok()) return m.status();
    if (auto it = m->find(okey); it != m->end()) e.raw = to_str(it->second);
    if (auto it = m->find(versioning_key); it != m->end()) e.vraw = to_str(it->second);
    if (c_->opts.bucket_cache_entries == 0 || live(*m) || round == 2) return e;
    auto other = recheck(e.b);
    if (!other.ok()) return other.status();
    if (!*other) return e;
    b = std::move(**other);
  }
}

}  // namespace objdirect::storage::rados_impl
