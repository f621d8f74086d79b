// RadosStore: objects and listing (docs/scale-out.md, "Commit protocol").
#include <algorithm>
#include <cerrno>
#include <deque>

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
  ObjectVal nv;
  const bool inline_data = w->can_inline(c_->opts.inline_bytes);
  if (inline_data) {
    nv.inline_data = w->take_inline();
    if (meta.size > 0) nv.rec.segments.push_back({BlobId{}, meta.size});
  } else {
    OBJDIRECT_RETURN_IF_ERROR(w->finish());
    OBJDIRECT_RETURN_IF_ERROR(w->move_intent(oid));
    nv.rec.segments.push_back({w->blob(), meta.size});
  }
  meta.mtime_ns = now_ns();
  nv.rec.meta = meta;
  const std::string value = encode_object_val(nv);
  const std::string okey = tagged("o", meta.key);
  const std::string ikey = tagged("i", w->blob().hex());
  for (int attempt = 0; attempt < commit_attempts_max; ++attempt) {
    auto current = current_entry(oid, okey, cond);
    if (!current.ok()) return current.status();
    std::optional<ObjectVal>& old = current->old;
    librados::ObjectWriteOperation op;
    int rv = 0;
    auto asserts = cmp_eq(okey, current->raw);
    assert_live(asserts);
    if (!inline_data) asserts[ikey] = {bufferlist(), LIBRADOS_CMPXATTR_OP_GT};
    op.omap_cmp(asserts, &rv);
    std::map<std::string, bufferlist> set{{okey, to_bl(value)}};
    if (old) add_gc(*old, set);
    op.omap_set(set);
    if (!inline_data) op.omap_rm_keys({ikey});
    const int r = c_->meta.operate(oid, &op);
    if (r == 0) {
      w->set_committed();
      return meta;
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
  OBJDIRECT_RETURN_IF_ERROR(validate_key(key));
  const std::string okey = tagged("o", key);
  for (int attempt = 0; attempt < commit_attempts_max; ++attempt) {
    auto e = read_entry(bucket, key, okey);
    if (!e.ok()) return e.status();
    const BucketRec* b = &e->b;
    const std::string& oid = e->oid;
    const std::optional<std::string>* cur = &e->raw;
    if (!cur->has_value()) return no_such_key();
    auto o = decode_object_val(**cur);
    if (!o.ok()) return o.status();
    o->rec.meta.tags = tags;
    librados::ObjectWriteOperation op;
    int rv = 0;
    auto asserts = cmp_eq(okey, *cur);
    assert_live(asserts);
    op.omap_cmp(asserts, &rv);
    op.omap_set({{okey, to_bl(encode_object_val(*o))}});
    const int r = c_->meta.operate(oid, &op);
    if (r == 0) return std::move(o->rec.meta);
    if (r == -ENOENT) return no_such_bucket();
    if (r != -ECANCELED) return rados_error(r, "tag update");
    OBJDIRECT_RETURN_IF_ERROR(after_conflict(*b, oid, "", attempt).status());
  }
  return Status(Errc::slow_down, "Too many concurrent writers of this key; retry");
}

Result<ObjectMeta> RadosStore::replace_meta(std::string_view bucket, ObjectMeta meta,
                                            std::string_view expected_etag) {
  OBJDIRECT_RETURN_IF_ERROR(validate_key(meta.key));
  const std::string okey = tagged("o", meta.key);
  for (int attempt = 0; attempt < commit_attempts_max; ++attempt) {
    auto e = read_entry(bucket, meta.key, okey);
    if (!e.ok()) return e.status();
    const BucketRec* b = &e->b;
    const std::string& oid = e->oid;
    const std::optional<std::string>* cur = &e->raw;
    if (!cur->has_value()) return no_such_key();
    auto o = decode_object_val(**cur);
    if (!o.ok()) return o.status();
    if (o->rec.meta.etag != expected_etag) return precondition_failed();
    ObjectMeta m = meta;
    m.size = o->rec.meta.size;
    if (m.parts.empty()) m.parts = o->rec.meta.parts;
    if (m.etag.empty()) m.etag = o->rec.meta.etag;
    m.mtime_ns = now_ns();
    o->rec.meta = m;
    librados::ObjectWriteOperation op;
    int rv = 0;
    auto asserts = cmp_eq(okey, *cur);
    assert_live(asserts);
    op.omap_cmp(asserts, &rv);
    op.omap_set({{okey, to_bl(encode_object_val(*o))}});
    const int r = c_->meta.operate(oid, &op);
    if (r == 0) return m;
    if (r == -ENOENT) return no_such_bucket();
    if (r != -ECANCELED) return rados_error(r, "metadata replace");
    // Retried on the fresh record (after_conflict refreshed the cache).
    OBJDIRECT_RETURN_IF_ERROR(after_conflict(*b, oid, "", attempt).status());
  }
  return Status(Errc::slow_down, "Too many concurrent writers of this key; retry");
}

Result<ObjectMeta> RadosStore::head_object(std::string_view bucket, std::string_view key) {
  auto v = get_object(bucket, key, true);
  if (!v.ok()) return v.status();
  return std::move(v->rec.meta);
}

Result<std::unique_ptr<ObjectReader>> RadosStore::open_object(std::string_view bucket,
                                                              std::string_view key) {
  auto v = get_object(bucket, key, true);
  if (!v.ok()) return v.status();
  return std::unique_ptr<ObjectReader>(new RadosReader(c_, std::move(*v)));
}

// Asserts "live" too: with a stale cached record, removing the key from a dead instance would
// leave the re-created bucket's key in place.
Status RadosStore::delete_object(std::string_view bucket, std::string_view key) {
  const std::string okey = tagged("o", key);
  for (int attempt = 0; attempt < commit_attempts_max; ++attempt) {
    auto e = read_entry(bucket, key, okey);
    if (!e.ok()) return e.status();
    const std::string& oid = e->oid;
    if (!e->raw.has_value()) return Status();
    auto o = decode_object_val(*e->raw);
    if (!o.ok()) return o.status();
    librados::ObjectWriteOperation op;
    int rv = 0;
    auto asserts = cmp_eq(okey, e->raw);
    assert_live(asserts);
    op.omap_cmp(asserts, &rv);
    std::map<std::string, bufferlist> set;
    add_gc(*o, set);
    if (!set.empty()) op.omap_set(set);
    op.omap_rm_keys({okey});
    const int r = c_->meta.operate(oid, &op);
    if (r == 0) return Status();
    if (r == -ENOENT) return no_such_bucket();
    if (r != -ECANCELED) return rados_error(r, "object delete");
    OBJDIRECT_RETURN_IF_ERROR(after_conflict(e->b, oid, "", attempt).status());
  }
  return Status(Errc::slow_down, "Too many concurrent writers of this key; retry");
}

Result<ListResult> RadosStore::list_objects(std::string_view bucket, const ListQuery& q) {
  auto b = valid_bucket(bucket, std::nullopt);
  if (!b.ok()) return b.status();
  // A k-way merge over the shards, each read a page (<= 1024 entries) at a time.
  struct Shard {
    std::string oid, after;
    bool more = true;
    std::deque<std::pair<std::string, bufferlist>> buf;
  };
  const std::string filter = tagged("o", q.prefix);
  std::vector<Shard> shards(b->shards);
  for (std::uint32_t s = 0; s < b->shards; ++s) {
    shards[s].oid = c_->shard_oid(*b, s);
    if (!q.start_after.empty()) shards[s].after = tagged("o", q.start_after);
  }
  auto fill = [&](Shard& s) -> Status {
    if (!s.buf.empty() || !s.more) return Status();
    std::map<std::string, bufferlist> page;
    OBJDIRECT_RETURN_IF_ERROR(
        c_->omap_page(s.oid, s.after, filter, rados_limits::omap_page_max, page, s.more));
    if (page.empty()) s.more = false;
    for (auto& kv : page) s.buf.emplace_back(kv.first, std::move(kv.second));
    if (!page.empty()) s.after = page.rbegin()->first;
    return Status();
  };
  // Drops every key under common prefix cp; seeks past it without reading it.
  auto skip_prefix = [&](const std::string& cp) {
    const std::string ocp = tagged("o", cp);
    const std::string past = ocp + std::string(limits::key_bytes_max + 1, '\xff');
    for (Shard& s : shards) {
      while (!s.buf.empty() && s.buf.front().first.starts_with(ocp)) s.buf.pop_front();
      if (s.buf.empty() && s.more && s.after < past) s.after = past;
    }
  };
  ListResult out;
  const std::uint32_t max = std::min(q.max_keys, limits::list_keys_max);
  std::uint32_t count = 0;
  for (;;) {
    Shard* best = nullptr;
    for (Shard& s : shards) {
      OBJDIRECT_RETURN_IF_ERROR(fill(s));
      if (!s.buf.empty() && (best == nullptr || s.buf.front().first < best->buf.front().first)) {
        best = &s;
      }
    }
    if (best == nullptr) break;
    const std::string key = best->buf.front().first.substr(1);
    if (!q.delimiter.empty()) {
      const auto d = key.find(q.delimiter, q.prefix.size());
      if (d != std::string::npos) {
        const std::string cp = key.substr(0, d + q.delimiter.size());
        if (cp > q.start_after) {
          if (count == max) {
            out.truncated = true;
            break;
          }
          out.common_prefixes.push_back(cp);
          out.next_marker = cp;
          ++count;
        }
        skip_prefix(cp);
        continue;
      }
    }
    if (key <= q.start_after) {
      best->buf.pop_front();
      continue;
    }
    if (count == max) {
      out.truncated = true;
      break;
    }
    auto o = decode_object_val(to_str(best->buf.front().second), false);
    if (!o.ok()) return o.status();
    out.objects.push_back(std::move(o->rec.meta));
    out.next_marker = key;
    ++count;
    best->buf.pop_front();
  }
  if (!out.truncated) out.next_marker.clear();
  return out;
}

Result<RadosStore::Current> RadosStore::current_entry(const std::string& oid,
                                                      const std::string& okey,
                                                      const WriteCondition& cond) {
  auto cur = c_->omap_get1(oid, okey);
  if (!cur.ok()) return cur.status();
  Current c{std::move(*cur), std::nullopt};
  if (c.raw) {
    auto o = decode_object_val(*c.raw);
    if (!o.ok()) return o.status();
    c.old = std::move(*o);
  }
  if (cond.kind == WriteCondition::Kind::must_be_absent && c.old) return precondition_failed();
  if (cond.kind == WriteCondition::Kind::etag_must_match) {
    if (!c.old) return no_such_key();
    if (c.old->rec.meta.etag != cond.etag) return precondition_failed();
  }
  return c;
}

Result<ObjectVal> RadosStore::get_object(std::string_view bucket, std::string_view key,
                                         bool parts) {
  auto e = read_entry(bucket, key, tagged("o", key));
  if (!e.ok()) return e.status();
  if (!e->raw.has_value()) return no_such_key();
  return decode_object_val(*e->raw, parts);
}

Result<RadosStore::Entry> RadosStore::read_entry(std::string_view name, std::string_view key,
                                                 const std::string& okey) {
  auto b = bucket_rec(name);
  if (!b.ok()) return b.status();
  for (int round = 0;; ++round) {
    Entry e{std::move(*b), "", std::nullopt};
    e.oid = c_->key_shard(e.b, key);
    auto m = c_->omap_get(e.oid, {okey, state_key});
    if (!m.ok()) return m.status();
    if (auto it = m->find(okey); it != m->end()) e.raw = to_str(it->second);
    if (c_->opts.bucket_cache_entries == 0 || live(*m) || round == 2) return e;
    auto other = recheck(e.b);
    if (!other.ok()) return other.status();
    if (!*other) return e;
    b = std::move(**other);
  }
}

}  // namespace objdirect::storage::rados_impl
