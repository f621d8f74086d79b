// RadosStore: versions (docs/versioning.md, "RADOS layout"): the bucket's versioning state on
// every index shard, writing a version or a delete marker, reading and removing one by id.
#include <algorithm>
#include <cerrno>

#include "storage/rados/rados_store_impl.hpp"
#include "storage/version_errors.hpp"

namespace objdirect::storage::rados_impl {
namespace {

Versioning versioning_of(std::string_view doc) {
  return doc == versioning_enabled ? Versioning::enabled : Versioning::suspended;
}

}  // namespace

Result<RadosStore::KeyState> RadosStore::key_state(const BucketRec& b,
                                                   std::optional<std::string> raw,
                                                   std::optional<std::string> vraw) {
  KeyState ks;
  auto entry = decode_key_entry(raw);
  if (!entry.ok()) return entry.status();
  ks.entry = std::move(*entry);
  ks.raw = std::move(raw);
  ks.vraw = std::move(vraw);
  if (ks.vraw) {
    ks.state = versioning_of(*ks.vraw);
  } else if (auto it = b.info.config.find(std::string(versioning_config_name));
             it != b.info.config.end()) {
    // The record says versioned but this shard does not know yet: a PutBucketVersioning is still
    // propagating (or died half-way). The state never returns to "off", so the record is right.
    ks.state = versioning_of(it->second);
  }
  return ks;
}

Result<ObjectMeta> RadosStore::put_version(KeyState& ks, Version nv) {
  KeyEntry& e = ks.entry;
  nv.entry.delete_marker = nv.entry.rec.meta.delete_marker;
  ks.removed.clear();
  if (ks.state == Versioning::off && (e.versions.empty() || e.plain)) {
    // Never versioned: the object is replaced, as before versioning existed.
    if (!e.versions.empty()) ks.removed = e.versions.front().entry.rec.segments;
    nv.entry.version_id = "null";
    nv.entry.rec.meta.version_id.clear();
    e.plain = true;
    e.versions.assign(1, std::move(nv));
    return e.versions.front().entry.rec.meta;
  }
  // Enabled: a new version. Suspended: the new version is the null one, replacing any. An
  // object written before versioning is the null version from now on.
  const bool enabled = ks.state == Versioning::enabled;
  e.plain = false;
  if (!enabled) {
    auto it = std::find_if(e.versions.begin(), e.versions.end(),
                           [](const Version& v) { return v.entry.version_id == "null"; });
    if (it != e.versions.end()) {
      ks.removed = it->entry.rec.segments;
      e.versions.erase(it);
    }
  }
  if (e.versions.size() >= c_->opts.versions_per_key_max) {
    return Status(Errc::slow_down, "This key has too many versions (at most " +
                                       std::to_string(c_->opts.versions_per_key_max) +
                                       "); delete some first");
  }
  nv.entry.version_id = enabled ? BlobId::random().hex() : "null";
  nv.entry.rec.meta.version_id = nv.entry.version_id;
  e.versions.insert(e.versions.begin(), std::move(nv));
  return e.versions.front().entry.rec.meta;
}

Status RadosStore::stage_key(const std::string& okey, const KeyState& ks, KeyCommit& kc) {
  kc.asserts[okey] = {to_bl(ks.raw.value_or("")), LIBRADOS_CMPXATTR_OP_EQ};
  kc.asserts[versioning_key] = {to_bl(ks.vraw.value_or("")), LIBRADOS_CMPXATTR_OP_EQ};
  assert_live(kc.asserts);
  if (ks.entry.versions.empty()) {
    kc.rm.insert(okey);
  } else {
    std::string value = encode_key_entry(ks.entry);
    if (value.size() > c_->opts.versions_value_bytes) {
      return Status(Errc::slow_down, "This key's versions take too much metadata (at most " +
                                         std::to_string(c_->opts.versions_value_bytes) +
                                         " bytes); delete some first");
    }
    kc.set[okey] = to_bl(value);
  }
  // Blobs no version references any more (versions made by CopyObject onto their own key share
  // them) go to GC.
  for (const Segment& s : ks.removed) {
    if (is_inline(s.blob)) continue;
    bool used = false;
    for (const Version& v : ks.entry.versions) {
      for (const Segment& k : v.entry.rec.segments) used = used || k.blob == s.blob;
    }
    if (!used) kc.set[tagged("g", s.blob.hex())] = to_bl(encode_gc(s.size));
  }
  return Status();
}

int RadosStore::run(const std::string& oid, const KeyCommit& kc) {
  librados::ObjectWriteOperation op;
  int rv = 0;
  op.omap_cmp(kc.asserts, &rv);
  if (!kc.set.empty()) op.omap_set(kc.set);
  if (!kc.rm.empty()) op.omap_rm_keys(kc.rm);
  return c_->meta.operate(oid, &op);
}

Result<bool> RadosStore::commit_key(const Entry& e, const std::string& okey, const KeyState& ks,
                                    int attempt, std::string_view what) {
  KeyCommit kc;
  OBJDIRECT_RETURN_IF_ERROR(stage_key(okey, ks, kc));
  const int r = run(e.oid, kc);
  if (r == 0) return true;
  if (r == -ENOENT) return no_such_bucket();
  if (r != -ECANCELED) return rados_error(r, what);
  OBJDIRECT_RETURN_IF_ERROR(after_conflict(e.b, e.oid, "", attempt).status());
  return false;
}

Result<Version> RadosStore::find_version(std::string_view bucket, std::string_view key,
                                         std::string_view version_id) {
  if (!version_id.empty() && !local::valid_version_id(version_id)) return invalid_version_id();
  auto read = read_key(bucket, key, tagged("o", key));
  if (!read.ok()) return read.status();
  auto& [e, ks] = *read;
  auto& vs = ks.entry.versions;
  if (vs.empty()) return version_id.empty() ? no_such_key() : no_such_version();
  for (Version& v : vs) {
    if (!version_id.empty() && v.entry.version_id != version_id) continue;
    v.entry.rec.meta.version_id = v.entry.version_id;
    v.entry.rec.meta.delete_marker = v.entry.delete_marker;
    // A never-versioned object is the null version once the bucket is versioned.
    if (ks.entry.plain) v.entry.rec.meta.version_id = ks.state == Versioning::off ? "" : "null";
    return std::move(v);
  }
  return no_such_version();
}

Result<ObjectMeta> RadosStore::head_object_version(std::string_view bucket, std::string_view key,
                                                   std::string_view version_id) {
  auto v = find_version(bucket, key, version_id);
  if (!v.ok()) return v.status();
  return std::move(v->entry.rec.meta);
}

Result<std::unique_ptr<ObjectReader>> RadosStore::open_object_version(std::string_view bucket,
                                                                      std::string_view key,
                                                                      std::string_view version_id) {
  auto v = find_version(bucket, key, version_id);
  if (!v.ok()) return v.status();
  if (v->entry.delete_marker) {
    if (version_id.empty()) return no_such_key();
    return delete_marker_not_allowed();
  }
  ObjectVal o{std::move(v->entry.rec), std::move(v->inline_data)};
  return std::unique_ptr<ObjectReader>(new RadosReader(c_, std::move(o)));
}

// One version's tags ("" = the latest); the version stays what it is otherwise.
Result<ObjectMeta> RadosStore::set_object_version_tags(std::string_view bucket,
                                                       std::string_view key,
                                                       std::string_view version_id, TagSet tags) {
  OBJDIRECT_RETURN_IF_ERROR(validate_key(key));
  if (!version_id.empty() && !local::valid_version_id(version_id)) return invalid_version_id();
  const std::string okey = tagged("o", key);
  for (int attempt = 0; attempt < commit_attempts_max; ++attempt) {
    auto read = read_key(bucket, key, okey);
    if (!read.ok()) return read.status();
    auto& [e, ks] = *read;
    auto& vs = ks.entry.versions;
    auto it = std::find_if(vs.begin(), vs.end(), [&](const Version& v) {
      return version_id.empty() || v.entry.version_id == version_id;
    });
    if (it == vs.end()) return version_id.empty() ? no_such_key() : no_such_version();
    // A delete marker has no tags to set.
    if (it->entry.delete_marker) {
      return version_id.empty() ? no_such_key() : delete_marker_not_allowed();
    }
    ObjectMeta& m = it->entry.rec.meta;
    m.tags = tags;  // a copy: a conflict reads the entry and sets them again
    ObjectMeta out = m;
    out.version_id = it->entry.version_id;
    // A never-versioned object is the null version once the bucket is versioned.
    if (ks.entry.plain) out.version_id = ks.state == Versioning::off ? "" : "null";
    auto committed = commit_key(e, okey, ks, attempt, "tag update");
    if (!committed.ok()) return committed.status();
    if (*committed) return out;
  }
  return Status(Errc::slow_down, "Too many concurrent writers of this key; retry");
}

// Asserts "live" too: with a stale cached record, removing the key from a dead instance would
// leave the re-created bucket's key in place.
Result<DeleteOutcome> RadosStore::delete_object_version(std::string_view bucket,
                                                        std::string_view key,
                                                        std::string_view version_id) {
  if (!version_id.empty() && !local::valid_version_id(version_id)) return invalid_version_id();
  const std::string okey = tagged("o", key);
  for (int attempt = 0; attempt < commit_attempts_max; ++attempt) {
    auto read = read_key(bucket, key, okey);
    if (!read.ok()) return read.status();
    auto& [e, ks] = *read;
    auto& vs = ks.entry.versions;
    DeleteOutcome out;
    if (version_id.empty() && ks.state == Versioning::off && (vs.empty() || ks.entry.plain)) {
      if (vs.empty()) return out;
      ks.removed = vs.front().entry.rec.segments;
      vs.clear();
    } else if (version_id.empty()) {
      // A delete marker becomes the latest version (Suspended: the null one, replacing any).
      Version marker;
      marker.entry.rec.meta.key = std::string(key);
      marker.entry.rec.meta.mtime_ns = now_ns();
      marker.entry.rec.meta.delete_marker = true;
      auto written = put_version(ks, std::move(marker));
      if (!written.ok()) return written.status();
      out = DeleteOutcome{written->version_id, true};
    } else {
      // That version goes for good; an unknown id removes nothing.
      auto it = std::find_if(vs.begin(), vs.end(),
                             [&](const Version& v) { return v.entry.version_id == version_id; });
      out.version_id = std::string(version_id);
      if (it == vs.end()) return out;
      out.delete_marker = it->entry.delete_marker;
      ks.removed = it->entry.rec.segments;
      vs.erase(it);
    }
    auto committed = commit_key(e, okey, ks, attempt, "object delete");
    if (!committed.ok()) return committed.status();
    if (*committed) return out;
  }
  return Status(Errc::slow_down, "Too many concurrent writers of this key; retry");
}

// After the record (the state GetBucketVersioning answers) every shard gets the state, which
// commits read and compare in their own op. Two racing PutBucketVersioning calls may write the
// shards in either order; each re-reads the record at the end and writes the shards again until
// they agree with it, so the shards end with the record's last state.
Status RadosStore::propagate_versioning(std::string_view bucket) {
  for (int attempt = 0; attempt < commit_attempts_max; ++attempt) {
    auto b = fresh_bucket(bucket);
    if (!b.ok()) return b.status();
    auto it = b->info.config.find(std::string(versioning_config_name));
    if (it == b->info.config.end()) return Status();
    const std::string state = it->second;
    for (std::uint32_t s = 0; s < b->shards; ++s) {
      librados::ObjectWriteOperation op;
      op.assert_exists();  // never re-creates the shard of a deleted bucket
      op.omap_set({{versioning_key, to_bl(state)}});
      const int r = c_->meta.operate(c_->shard_oid(*b, s), &op);
      if (r == -ENOENT) return no_such_bucket();
      if (r < 0) return rados_error(r, "versioning state of an index shard");
    }
    auto again = fresh_bucket(bucket);
    if (!again.ok()) return again.status();
    if (again->instance != b->instance) return Status();  // deleted and re-created meanwhile
    auto now = again->info.config.find(std::string(versioning_config_name));
    if (now != again->info.config.end() && now->second == state) return Status();
  }
  return Status(Errc::slow_down, "Too many concurrent changes of this bucket; retry");
}

}  // namespace objdirect::storage::rados_impl
