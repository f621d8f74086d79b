// RadosStore: buckets, bucket configuration and the bucket record cache (docs/scale-out.md).
#include <cerrno>
#include <chrono>
#include <thread>

#include "storage/rados/rados_store_impl.hpp"

namespace objdirect::storage::rados_impl {

Status RadosStore::create_bucket(const BucketInfo& info) {
  BucketRec b;
  b.info = info;
  if (b.info.ctime_ns == 0) b.info.ctime_ns = now_ns();
  b.shards = c_->opts.index_shards;
  b.instance = BlobId::random().hex();
  // The index shards exist, live, before the bucket does: omap_cmp fails with ENOENT on a
  // missing object, which commits read as "no such bucket".
  for (std::uint32_t s = 0; s < b.shards; ++s) {
    librados::ObjectWriteOperation op;
    op.create(false);
    op.omap_set({{state_key, to_bl(state_live)}});
    const int r = c_->meta.operate(c_->shard_oid(b, s), &op);
    if (r < 0) return rados_error(r, "index shard creation");
  }
  librados::ObjectWriteOperation op;
  int rv = 0;
  op.omap_cmp(cmp_eq(info.name, std::nullopt), &rv);
  op.omap_set({{info.name, to_bl(encode_bucket_rec(b))}});
  const int r = c_->meta.operate(buckets_oid, &op);
  if (r == -ECANCELED) {
    for (std::uint32_t s = 0; s < b.shards; ++s) c_->meta.remove(c_->shard_oid(b, s));
    auto cur = c_->bucket(info.name);
    if (!cur.ok()) return cur.status();
    if (cur->info.owner == info.owner) {
      return Status(Errc::bucket_already_owned_by_you,
                    "Your previous request to create the named bucket succeeded and you "
                    "already own it.");
    }
    return Status(Errc::bucket_already_exists, "The requested bucket name is not available.");
  }
  if (r < 0) return rados_error(r, "bucket creation");
  remember_bucket(b);
  return Status();
}

// DeleteBucket (docs/scale-out.md, "Bucket deletion"): mark the record deleting (token t),
// fence every shard ("fenced:t": commits assert "live"), check emptiness once nothing can be
// added, then abort the uploads and remove the record if it is still ours; a non-empty bucket
// rolls back (the shards still fenced by t, then the record). A DeleteBucket finding a record
// already deleting takes it over (the first one may have died half-way).
Status RadosStore::delete_bucket(std::string_view bucket) {
  const std::string name(bucket);
  const std::string token = BlobId::random().hex();
  BucketRec b;
  for (int attempt = 0;; ++attempt) {
    if (attempt == commit_attempts_max) {
      return Status(Errc::slow_down, "Too many concurrent changes of this bucket; retry");
    }
    auto raw = c_->omap_get1(buckets_oid, name);
    if (!raw.ok()) return raw.status();
    if (!raw->has_value()) return no_such_bucket();
    auto rec = decode_bucket_rec(**raw);
    if (!rec.ok()) return rec.status();
    b = std::move(*rec);
    b.deleting = token;
    librados::ObjectWriteOperation op;
    int rv = 0;
    op.omap_cmp(cmp_eq(name, **raw), &rv);
    op.omap_set({{name, to_bl(encode_bucket_rec(b))}});
    const int r = c_->meta.operate(buckets_oid, &op);
    if (r == 0) break;
    if (r != -ECANCELED) return rados_error(r, "bucket deletion mark");
  }
  const std::string marked = encode_bucket_rec(b);
  const std::string fenced = "fenced:" + token;
  for (std::uint32_t s = 0; s < b.shards; ++s) {
    librados::ObjectWriteOperation op;
    op.omap_set({{state_key, to_bl(fenced)}});
    const int r = c_->meta.operate(c_->shard_oid(b, s), &op);
    // On failure the record stays "deleting": commits wait, then fail; a retried
    // DeleteBucket takes over.
    if (r < 0) return rados_error(r, "index shard fence");
  }
  bool empty = true;
  for (std::uint32_t s = 0; s < b.shards && empty; ++s) {
    std::map<std::string, bufferlist> page;
    bool more = false;
    OBJDIRECT_RETURN_IF_ERROR(c_->omap_page(c_->shard_oid(b, s), "", "o", 1, page, more));
    empty = page.empty();
  }
  if (!empty) {
    // Roll back: the shards this deletion fenced (not those a later one re-fenced), then the
    // record if it is still ours.
    for (std::uint32_t s = 0; s < b.shards; ++s) {
      librados::ObjectWriteOperation op;
      int rv = 0;
      op.omap_cmp(cmp_eq(state_key, fenced), &rv);
      op.omap_set({{state_key, to_bl(state_live)}});
      c_->meta.operate(c_->shard_oid(b, s), &op);
    }
    BucketRec live = b;
    live.deleting.clear();
    librados::ObjectWriteOperation op;
    int rv = 0;
    op.omap_cmp(cmp_eq(name, marked), &rv);
    op.omap_set({{name, to_bl(encode_bucket_rec(live))}});
    c_->meta.operate(buckets_oid, &op);
    forget_bucket(name);
    return Status(Errc::bucket_not_empty, "The bucket you tried to delete is not empty");
  }
  // No upload can be created or grow any more: abort them (their parts go to GC).
  for (std::uint32_t s = 0; s < b.shards; ++s) {
    auto ups = c_->omap_all(c_->shard_oid(b, s), "u");
    if (!ups.ok()) return ups.status();
    for (const auto& [k, v] : *ups) {
      auto u = local::decode_upload(v);
      if (!u.ok()) return u.status();
      Status st = abort_upload(b, u->key, u->upload_id);
      if (!st.ok() && st.code() != Errc::no_such_upload) return st;
    }
  }
  librados::ObjectWriteOperation op;
  int rv = 0;
  op.omap_cmp(cmp_eq(name, marked), &rv);
  op.omap_rm_keys({name});
  const int r = c_->meta.operate(buckets_oid, &op);
  forget_bucket(name);
  if (r == -ECANCELED) {
    return Status(Errc::operation_aborted,
                  "A conflicting DeleteBucket took over this one; try again.");
  }
  if (r < 0) return rados_error(r, "bucket deletion");
  // The index shards stay, fenced: they may hold GC records and intents, which the GC
  // processes, and a late commit into them fails on the fence.
  return Status();
}

// From the cache while the entry is younger than bucket_cache_ttl_ms: the one answer that is
// not validated by an index access, so HeadBucket may say 200 for that long after another
// server deleted the bucket. The S3 layer's ownership check uses it too; an op that then finds
// the bucket re-created by another owner fails with 503 (see recheck).
Result<BucketInfo> RadosStore::head_bucket(std::string_view bucket) {
  if (c_->opts.bucket_cache_entries > 0) {
    std::lock_guard lk(cache_mu_);
    auto it = cache_.find(bucket);
    if (it != cache_.end() && std::chrono::steady_clock::now() - it->second.fetched <
                                  std::chrono::milliseconds(c_->opts.bucket_cache_ttl_ms)) {
      return it->second.rec.info;
    }
  }
  auto b = fresh_bucket(bucket);
  if (!b.ok()) return b.status();
  return b->info;
}

Result<std::vector<BucketInfo>> RadosStore::list_buckets() {
  auto all = c_->omap_all(buckets_oid, "");
  if (!all.ok()) return all.status();
  std::vector<BucketInfo> out;
  for (const auto& [k, v] : *all) {
    auto b = decode_bucket_rec(v);
    if (!b.ok()) return b.status();
    out.push_back(std::move(b->info));
  }
  return out;
}

Status RadosStore::set_bucket_tags(std::string_view bucket, TagSet tags) {
  return update_bucket(bucket, [&](BucketInfo& b) { b.tags = tags; });
}

Status RadosStore::set_bucket_config(std::string_view bucket, std::string_view name,
                                     std::string document) {
  if (name == versioning_config_name) {
    OBJDIRECT_RETURN_IF_ERROR(update_bucket(bucket, [&](BucketInfo& b) {
      if (!document.empty()) b.config[std::string(name)] = document;
    }));
    return propagate_versioning(bucket);
  }
  return update_bucket(bucket, [&](BucketInfo& b) {
    if (document.empty()) {
      b.config.erase(std::string(name));
    } else {
      b.config[std::string(name)] = document;
    }
  });
}

// Applies `change` to the bucket record. The record is replaced under omap_cmp against the
// value read, so a concurrent DeleteBucket mark or another update makes this one retry on the
// fresh record; a bucket being deleted answers operation_aborted.
Status RadosStore::update_bucket(std::string_view bucket,
                                 const std::function<void(BucketInfo&)>& change) {
  const std::string name(bucket);
  for (int attempt = 0; attempt < commit_attempts_max; ++attempt) {
    auto raw = c_->omap_get1(buckets_oid, name);
    if (!raw.ok()) return raw.status();
    if (!raw->has_value()) {
      forget_bucket(name);
      return no_such_bucket();
    }
    auto rec = decode_bucket_rec(**raw);
    if (!rec.ok()) return rec.status();
    if (!rec->deleting.empty()) {
      return Status(Errc::operation_aborted,
                    "A conflicting operation (DeleteBucket) is in progress on this bucket; "
                    "retry");
    }
    change(rec->info);
    librados::ObjectWriteOperation op;
    int rv = 0;
    op.omap_cmp(cmp_eq(name, **raw), &rv);
    op.omap_set({{name, to_bl(encode_bucket_rec(*rec))}});
    const int r = c_->meta.operate(buckets_oid, &op);
    if (r == 0) {
      remember_bucket(*rec);
      return Status();
    }
    if (r != -ECANCELED) return rados_error(r, "bucket record update");
  }
  return Status(Errc::slow_down, "Too many concurrent changes of this bucket; retry");
}

// The cached record, or a read one (then cached).
Result<BucketRec> RadosStore::bucket_rec(std::string_view name) {
  if (c_->opts.bucket_cache_entries == 0) return c_->bucket(name);
  {
    std::lock_guard lk(cache_mu_);
    auto it = cache_.find(name);
    if (it != cache_.end()) return it->second.rec;
  }
  return fresh_bucket(name);
}

// The record as stored now; updates the cache.
Result<BucketRec> RadosStore::fresh_bucket(std::string_view name) {
  auto b = c_->bucket(name);
  if (b.ok()) {
    remember_bucket(*b);
  } else if (b.code() == Errc::no_such_bucket) {
    forget_bucket(name);
  }
  return b;
}

void RadosStore::remember_bucket(const BucketRec& b) {
  if (c_->opts.bucket_cache_entries == 0) return;
  std::lock_guard lk(cache_mu_);
  // Bounded: when full, start over (records are re-read on demand).
  if (cache_.size() >= c_->opts.bucket_cache_entries && !cache_.count(b.info.name)) {
    cache_.clear();
  }
  cache_.insert_or_assign(b.info.name, Cached{b, std::chrono::steady_clock::now()});
}

void RadosStore::forget_bucket(std::string_view name) {
  std::lock_guard lk(cache_mu_);
  auto it = cache_.find(name);
  if (it != cache_.end()) cache_.erase(it);
}

// A shard's state is not "live" as read through a possibly stale record `b`: the fresh record
// decides. nullopt: b stands (same instance: being deleted, or a shard that predates fences);
// otherwise the fresh record of another instance, or no_such_bucket. A bucket re-created by
// another owner is `unavailable` (503, retried by clients): the caller's ownership check was
// made on the cached record and must be made again.
Result<std::optional<BucketRec>> RadosStore::recheck(const BucketRec& b) {
  auto fresh = fresh_bucket(b.info.name);
  if (!fresh.ok()) return fresh.status();
  if (fresh->instance == b.instance) return std::optional<BucketRec>();
  if (fresh->info.owner != b.info.owner) return recreated_by_another_owner();
  return std::optional<BucketRec>(std::move(*fresh));
}

bool RadosStore::live(const std::map<std::string, bufferlist>& m) {
  auto it = m.find(state_key);
  return it != m.end() && to_str(it->second) == state_live;
}

// The bucket record, validated (one op on the key's shard, or shard 0, when cached).
Result<BucketRec> RadosStore::valid_bucket(std::string_view name,
                                           std::optional<std::string_view> key) {
  if (c_->opts.bucket_cache_entries == 0) return c_->bucket(name);
  auto b = bucket_rec(name);
  if (!b.ok()) return b.status();
  auto m = c_->omap_get(key ? c_->key_shard(*b, *key) : c_->shard_oid(*b, 0), {state_key});
  if (!m.ok()) return m.status();
  if (live(*m)) return b;
  auto other = recheck(*b);
  if (!other.ok()) return other.status();
  if (*other) return std::move(**other);
  return b;
}

// An op on shard `oid` of bucket instance `b` failed a compare. Returns the bucket record to
// retry with: `b` after a concurrent change of the entries compared, or while a DeleteBucket
// of b's instance is in progress (after a short wait: it either completes or rolls back), or
// after repairing a stale fence (the record is live but a superseded DeleteBucket left its
// fence, or the shard predates fences); a record of another instance when the bucket was
// deleted and re-created (callers bound to b's instance fail). no_such_bucket when it is
// gone; io_error when the writer's intent `ikey` (when not empty) expired.
Result<BucketRec> RadosStore::after_conflict(const BucketRec& b, const std::string& oid,
                                             const std::string& ikey, int attempt) {
  std::set<std::string> keys{state_key};
  if (!ikey.empty()) keys.insert(ikey);
  auto m = c_->omap_get(oid, keys);
  if (!m.ok()) return m.status();
  if (!ikey.empty() && !m->count(ikey)) {
    return Status(Errc::io_error,
                  "the write took longer than intent_expire_s and its data was collected");
  }
  auto st = m->find(state_key);
  const std::optional<std::string> state =
      st == m->end() ? std::nullopt : std::optional<std::string>(to_str(st->second));
  if (state == state_live) return b;
  auto fresh = fresh_bucket(b.info.name);
  if (!fresh.ok()) return fresh.status();
  if (fresh->instance != b.instance && fresh->info.owner != b.info.owner) {
    return recreated_by_another_owner();
  }
  if (fresh->instance != b.instance) return fresh;
  if (!fresh->deleting.empty()) {
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::min(2 << std::min(attempt, 6), 100)));
    return fresh;
  }
  librados::ObjectWriteOperation op;
  int rv = 0;
  op.omap_cmp(cmp_eq(state_key, state), &rv);
  op.omap_set({{state_key, to_bl(state_live)}});
  const int r = c_->meta.operate(oid, &op);
  if (r < 0 && r != -ECANCELED) return rados_error(r, "index shard repair");
  return fresh;
}

}  // namespace objdirect::storage::rados_impl
