// RadosStore: multipart uploads (docs/scale-out.md, "Commit protocol").
#include <algorithm>
#include <cerrno>
#include <set>
#include <tuple>

#include "common/assert.hpp"
#include "common/limits.hpp"
#include "storage/rados/rados_store_impl.hpp"
#include "storage/upload_paging.hpp"

namespace objdirect::storage::rados_impl {

Result<std::string> RadosStore::create_upload(std::string_view bucket, const UploadInfo& info) {
  OBJDIRECT_RETURN_IF_ERROR(validate_key(info.key));
  auto b = bucket_rec(bucket);  // validated by the "live" assertion
  if (!b.ok()) return b.status();
  UploadInfo u = info;
  u.upload_id = BlobId::random().hex();
  if (u.initiated_ns == 0) u.initiated_ns = now_ns();
  for (int attempt = 0; attempt < commit_attempts_max; ++attempt) {
    const std::string oid = c_->key_shard(*b, u.key);
    librados::ObjectWriteOperation op;
    int rv = 0;
    auto asserts = cmp_eq(tagged("u", u.upload_id), std::nullopt);  // fails on ENOENT: no bucket
    assert_live(asserts);
    op.omap_cmp(asserts, &rv);
    op.omap_set({{tagged("u", u.upload_id), to_bl(local::encode_upload(u))}});
    const int r = c_->meta.operate(oid, &op);
    if (r == 0) return u.upload_id;
    if (r == -ENOENT) return no_such_bucket();
    if (r != -ECANCELED) return rados_error(r, "upload creation");
    auto next = after_conflict(*b, oid, "", attempt);
    if (!next.ok()) return next.status();
    b = std::move(*next);  // maybe a re-created bucket: the upload goes there
  }
  return Status(Errc::slow_down, "Too many concurrent changes of this bucket; retry");
}

Result<UploadInfo> RadosStore::get_upload(std::string_view bucket, std::string_view key,
                                          std::string_view upload_id) {
  auto b = valid_bucket(bucket, key);
  if (!b.ok()) return b.status();
  auto u = read_upload(*b, key, upload_id);
  if (!u.ok()) return u.status();
  return std::move(u->first);
}

Result<PartInfo> RadosStore::commit_part(std::string_view bucket, std::string_view key,
                                         std::string_view upload_id, PartInfo info,
                                         std::unique_ptr<BlobWriter> data) {
  auto* w = dynamic_cast<RadosWriter*>(data.get());
  OBJDIRECT_ASSERT(w != nullptr && w->bucket().info.name == bucket,
                   "a writer is committed to the store and bucket that began it");
  if (info.size != w->size()) return Status(Errc::invalid_argument, "size mismatch");
  const BucketRec* b = &w->bucket();
  const std::string oid = c_->key_shard(*b, key);
  const bool empty = w->size() == 0;
  PartRecord rec;
  rec.info = info;
  rec.info.mtime_ns = now_ns();
  if (!empty) {
    OBJDIRECT_RETURN_IF_ERROR(w->finish());
    OBJDIRECT_RETURN_IF_ERROR(w->move_intent(oid));
    rec.blob = w->blob();
  }
  const std::string pkey = part_key(upload_id, info.part_number);
  const std::string ukey = tagged("u", upload_id);
  const std::string ikey = tagged("i", w->blob().hex());
  for (int attempt = 0; attempt < commit_attempts_max; ++attempt) {
    auto u = read_upload(*b, key, upload_id);
    if (!u.ok()) return u.status();
    auto cur = c_->omap_get1(oid, pkey);
    if (!cur.ok()) return cur.status();
    librados::ObjectWriteOperation op;
    int rv = 0;
    auto asserts = cmp_eq(pkey, *cur);
    asserts[ukey] = {to_bl(u->second), LIBRADOS_CMPXATTR_OP_EQ};
    assert_live(asserts);
    if (!empty) asserts[ikey] = {bufferlist(), LIBRADOS_CMPXATTR_OP_GT};
    op.omap_cmp(asserts, &rv);
    std::map<std::string, bufferlist> set{{pkey, to_bl(local::encode_part(rec))}};
    if (cur->has_value()) {
      auto old = local::decode_part(**cur);
      if (!old.ok()) return old.status();
      if (!is_inline(old->blob))
        set[tagged("g", old->blob.hex())] = to_bl(encode_gc(old->info.size));
    }
    op.omap_set(set);
    if (!empty) op.omap_rm_keys({ikey});
    const int r = c_->meta.operate(oid, &op);
    if (r == 0) {
      w->set_committed();
      return rec.info;
    }
    if (r == -ENOENT) return no_such_upload();
    if (r != -ECANCELED) return rados_error(r, "part commit");
    auto next = after_conflict(*b, oid, empty ? std::string() : ikey, attempt);
    if (!next.ok()) return next.status();
    if (next->instance != b->instance) return no_such_upload();
  }
  return Status(Errc::slow_down, "Too many concurrent writers of this part; retry");
}

Result<std::vector<PartInfo>> RadosStore::list_parts(std::string_view bucket, std::string_view key,
                                                     std::string_view upload_id,
                                                     std::uint32_t part_number_marker,
                                                     std::uint32_t max_parts) {
  auto b = valid_bucket(bucket, key);
  if (!b.ok()) return b.status();
  auto u = read_upload(*b, key, upload_id);
  if (!u.ok()) return u.status();
  std::vector<PartInfo> out;
  std::string after = part_key(upload_id, part_number_marker);
  const std::string prefix = tagged("p", upload_id) + ".";
  while (out.size() < max_parts) {
    std::map<std::string, bufferlist> page;
    bool more = false;
    OBJDIRECT_RETURN_IF_ERROR(c_->omap_page(c_->key_shard(*b, key), after, prefix,
                                            std::uint32_t(max_parts - out.size()), page, more));
    for (auto& [k, v] : page) {
      auto p = local::decode_part(to_str(v));
      if (!p.ok()) return p.status();
      out.push_back(std::move(p->info));
    }
    if (!more || page.empty()) break;
    after = page.rbegin()->first;
  }
  return out;
}

Result<ObjectMeta> RadosStore::complete_upload(std::string_view bucket, std::string_view upload_id,
                                               ObjectMeta meta,
                                               const std::vector<CompletePartRef>& parts,
                                               const WriteCondition& cond) {
  OBJDIRECT_RETURN_IF_ERROR(validate_key(meta.key));
  auto b = valid_bucket(bucket, meta.key);
  if (!b.ok()) return b.status();
  const std::string oid = c_->key_shard(*b, meta.key);
  const std::string okey = tagged("o", meta.key);
  const std::string ukey = tagged("u", upload_id);
  for (std::size_t i = 1; i < parts.size(); ++i) {
    if (parts[i].part_number <= parts[i - 1].part_number) {
      return Status(Errc::invalid_part_order,
                    "The list of parts was not in ascending order. Parts must be ordered by "
                    "part number.");
    }
  }
  for (int attempt = 0; attempt < commit_attempts_max; ++attempt) {
    auto u = read_upload(*b, meta.key, upload_id);
    if (!u.ok()) return u.status();
    auto stored = c_->omap_all(oid, tagged("p", upload_id) + ".");
    if (!stored.ok()) return stored.status();
    std::map<std::uint32_t, std::pair<std::string, PartRecord>> by_number;
    for (auto& [k, v] : *stored) {
      auto p = local::decode_part(v);
      if (!p.ok()) return p.status();
      by_number[p->info.part_number] = {k, std::move(*p)};
    }
    Version nv;
    std::uint64_t total = 0;
    std::set<std::uint32_t> chosen;
    for (const CompletePartRef& ref : parts) {
      auto it = by_number.find(ref.part_number);
      if (it == by_number.end() || it->second.second.info.etag != ref.etag) {
        return Status(Errc::invalid_part,
                      "One or more of the specified parts could not be found. The part may "
                      "not have been uploaded, or the specified entity tag may not match the "
                      "part's entity tag.");
      }
      const PartRecord& p = it->second.second;
      if (p.info.size > 0) nv.entry.rec.segments.push_back({p.blob, p.info.size});
      total += p.info.size;
      chosen.insert(ref.part_number);
    }
    if (total != meta.size) {
      return Status(Errc::invalid_argument, "object size differs from the sum of its parts");
    }
    auto ks = current_key(*b, oid, okey, cond);
    if (!ks.ok()) return ks.status();
    nv.entry.rec.meta = meta;
    nv.entry.rec.meta.mtime_ns = now_ns();
    auto written = put_version(*ks, nv);
    if (!written.ok()) return written.status();
    // One op: the upload and every part are unchanged, the object is as read; then the object
    // points at the chosen parts' blobs, the upload and parts go, the rest goes to GC.
    KeyCommit kc;
    OBJDIRECT_RETURN_IF_ERROR(stage_key(okey, *ks, kc));
    kc.asserts[ukey] = {to_bl(u->second), LIBRADOS_CMPXATTR_OP_EQ};
    kc.rm.insert(ukey);
    for (auto& [n, kp] : by_number) {
      kc.asserts[kp.first] = {to_bl(local::encode_part(kp.second)), LIBRADOS_CMPXATTR_OP_EQ};
      kc.rm.insert(kp.first);
      if (!chosen.count(n) && !is_inline(kp.second.blob)) {
        kc.set[tagged("g", kp.second.blob.hex())] = to_bl(encode_gc(kp.second.info.size));
      }
    }
    const int r = run(oid, kc);
    if (r == 0) return std::move(*written);
    if (r == -ENOENT) return no_such_bucket();
    if (r != -ECANCELED) return rados_error(r, "multipart completion");
    auto next = after_conflict(*b, oid, "", attempt);
    if (!next.ok()) return next.status();
    if (next->instance != b->instance) return no_such_upload();
  }
  return Status(Errc::slow_down, "Too many concurrent writers of this key; retry");
}

Status RadosStore::abort_upload(std::string_view bucket, std::string_view key,
                                std::string_view upload_id) {
  auto b = valid_bucket(bucket, key);
  if (!b.ok()) return b.status();
  return abort_upload(*b, key, upload_id);
}

// Removals need no "live" assertion: DeleteBucket aborts uploads on fenced shards.
Status RadosStore::abort_upload(const BucketRec& b, std::string_view key,
                                std::string_view upload_id) {
  const std::string oid = c_->key_shard(b, key);
  const std::string ukey = tagged("u", upload_id);
  for (int attempt = 0; attempt < commit_attempts_max; ++attempt) {
    auto u = read_upload(b, key, upload_id);
    if (!u.ok()) return u.status();
    auto stored = c_->omap_all(oid, tagged("p", upload_id) + ".");
    if (!stored.ok()) return stored.status();
    librados::ObjectWriteOperation op;
    int rv = 0;
    std::map<std::string, std::pair<bufferlist, int>> asserts{
        {ukey, {to_bl(u->second), LIBRADOS_CMPXATTR_OP_EQ}}};
    std::set<std::string> rm{ukey};
    std::map<std::string, bufferlist> set;
    for (auto& [k, v] : *stored) {
      auto p = local::decode_part(v);
      if (!p.ok()) return p.status();
      asserts[k] = {to_bl(v), LIBRADOS_CMPXATTR_OP_EQ};
      rm.insert(k);
      if (!is_inline(p->blob)) set[tagged("g", p->blob.hex())] = to_bl(encode_gc(p->info.size));
    }
    op.omap_cmp(asserts, &rv);
    if (!set.empty()) op.omap_set(set);
    op.omap_rm_keys(rm);
    const int r = c_->meta.operate(oid, &op);
    if (r == 0) return Status();
    if (r == -ENOENT) return no_such_upload();
    if (r != -ECANCELED) return rados_error(r, "multipart abort");
  }
  return Status(Errc::slow_down, "Too many concurrent writers of this upload; retry");
}

Result<ListUploadsResult> RadosStore::list_uploads(std::string_view bucket,
                                                   const ListUploadsQuery& q) {
  auto b = valid_bucket(bucket, std::nullopt);
  if (!b.ok()) return b.status();
  std::vector<UploadInfo> all;
  for (std::uint32_t s = 0; s < b->shards; ++s) {
    auto ups = c_->omap_all(c_->shard_oid(*b, s), "u");
    if (!ups.ok()) return ups.status();
    for (const auto& [k, v] : *ups) {
      auto u = local::decode_upload(v);
      if (!u.ok()) return u.status();
      if (u->key.starts_with(q.prefix)) all.push_back(std::move(*u));
    }
  }
  return storage::page_uploads(std::move(all), q);
}

// The upload and its raw value (for compare-and-swap).
Result<std::pair<UploadInfo, std::string>> RadosStore::read_upload(const BucketRec& b,
                                                                   std::string_view key,
                                                                   std::string_view upload_id) {
  auto v = c_->omap_get1(c_->key_shard(b, key), tagged("u", upload_id));
  if (!v.ok()) return v.status();
  if (!v->has_value()) return no_such_upload();
  auto u = local::decode_upload(**v);
  if (!u.ok()) return u.status();
  if (u->key != key) return no_such_upload();
  return std::make_pair(std::move(*u), std::move(**v));
}

}  // namespace objdirect::storage::rados_impl
