// RadosStore (see rados_store.hpp and docs/scale-out.md): construction, opening a store and the
// GC worker. The other members are in rados_buckets.cc, rados_objects.cc and rados_multipart.cc.
#include "storage/rados/rados_store.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "common/limits.hpp"
#include "storage/rados/rados_store_impl.hpp"

namespace objdirect::storage::rados_impl {

RadosStore::RadosStore(std::shared_ptr<Conn> c) : c_(std::move(c)) {
  if (c_->opts.gc) gc_thread_ = std::thread([this] { gc_loop(); });
}

RadosStore::~RadosStore() {
  {
    std::lock_guard lk(gc_mu_);
    stop_ = true;
  }
  gc_cv_.notify_all();
  if (gc_thread_.joinable()) gc_thread_.join();
}

// One GC pass under the cluster-wide lease (held for the pass, renewed by the next one);
// returns the number of blobs deleted.
Result<std::uint64_t> RadosStore::gc_pass() {
  timeval dur{std::max<long>(30, 3l * c_->opts.gc_interval_s), 0};
  int r = c_->meta.lock_exclusive(gc_lock_oid, "gc", gc_cookie_, "objdirect gc", &dur,
                                  LIBRADOS_LOCK_FLAG_MAY_RENEW);
  if (r == -EBUSY || r == -EEXIST) {
    return Status(Errc::unavailable, "another GC worker holds the lease");
  }
  if (r < 0) return rados_error(r, "GC lease");
  std::vector<std::string> shards;
  try {
    for (auto it = c_->meta.nobjects_begin(); it != c_->meta.nobjects_end(); ++it) {
      if (it->get_oid().starts_with("idx.")) shards.push_back(it->get_oid());
    }
  } catch (const std::exception& e) {
    return Status(Errc::io_error, std::string("listing the index pool: ") + e.what());
  }
  const std::uint64_t now = std::uint64_t(now_ns());
  const std::uint64_t grace = std::uint64_t(c_->opts.gc_grace_s) * 1'000'000'000ull;
  const std::uint64_t expire = std::uint64_t(c_->opts.intent_expire_s) * 1'000'000'000ull;
  struct Unlock {
    Conn& c;
    const std::string& cookie;
    ~Unlock() { c.meta.unlock(gc_lock_oid, "gc", cookie); }
  } unlock{*c_, gc_cookie_};
  std::uint64_t deleted = 0;
  for (const std::string& oid : shards) {
    auto gcs = c_->omap_all(oid, "g");
    if (!gcs.ok()) return gcs.status();
    for (const auto& [k, v] : *gcs) {
      std::string_view in = v;
      std::uint64_t at = 0, size = 0;
      if (!get_u64(in, at) || !get_u64(in, size)) continue;
      if (at + grace > now) continue;
      auto id = BlobId::from_hex(std::string_view(k).substr(1));
      if (!id.ok()) continue;
      // Nothing references a GC'd blob any more: delete it, then its record.
      OBJDIRECT_RETURN_IF_ERROR(c_->delete_stripes(*id, c_->stripes_of(size)));
      librados::ObjectWriteOperation op;
      int rv = 0;
      op.omap_cmp(cmp_eq(k, v), &rv);
      op.omap_rm_keys({k});
      c_->meta.operate(oid, &op);
      ++deleted;
    }
    auto intents = c_->omap_all(oid, "i");
    if (!intents.ok()) return intents.status();
    for (const auto& [k, v] : *intents) {
      std::string_view in = v;
      std::uint64_t at = 0;
      if (!get_u64(in, at) || at + expire > now) continue;
      auto id = BlobId::from_hex(std::string_view(k).substr(1));
      if (!id.ok()) continue;
      // Remove the intent first (if unchanged): a commit needs it, so after this the blob can
      // never be committed, and deleting it is safe.
      librados::ObjectWriteOperation op;
      int rv = 0;
      op.omap_cmp(cmp_eq(k, v), &rv);
      op.omap_rm_keys({k});
      if (c_->meta.operate(oid, &op) != 0) continue;
      OBJDIRECT_RETURN_IF_ERROR(c_->delete_unknown_blob(*id));
      ++deleted;
    }
  }
  return deleted;
}

void RadosStore::gc_loop() {
  std::unique_lock lk(gc_mu_);
  while (!stop_) {
    gc_cv_.wait_for(lk, std::chrono::seconds(std::max<std::uint32_t>(1, c_->opts.gc_interval_s)),
                    [&] { return stop_; });
    if (stop_) break;
    lk.unlock();
    (void)gc_pass();
    lk.lock();
  }
}

namespace {

Status ensure_pool(librados::Rados& rados, const std::string& name) {
  if (rados.pool_lookup(name.c_str()) >= 0) return Status();
  const int r = rados.pool_create(name.c_str());
  if (r < 0 && r != -EEXIST) return rados_error(r, "creating pool " + name);
  return Status();
}

}  // namespace

Result<std::unique_ptr<ObjectStore>> open(const RadosStoreOptions& o) {
  namespace rl = rados_limits;
  if (o.conf_file.empty()) return Status(Errc::invalid_argument, "--rados-conf is required");
  if (o.pool_prefix.empty()) return Status(Errc::invalid_argument, "empty RADOS pool prefix");
  if (o.index_shards == 0 || o.index_shards > rl::index_shards_max ||
      (o.index_shards & (o.index_shards - 1)) != 0) {
    return Status(Errc::invalid_argument,
                  "index_shards must be a power of two <= " + std::to_string(rl::index_shards_max));
  }
  if (o.stripe_bytes < rl::stripe_bytes_min || o.stripe_bytes > rl::stripe_bytes_max) {
    return Status(Errc::invalid_argument, "stripe_bytes must be within [" +
                                              std::to_string(rl::stripe_bytes_min) + ", " +
                                              std::to_string(rl::stripe_bytes_max) + "]");
  }
  if (o.inline_bytes > rl::inline_bytes_max) {
    return Status(Errc::invalid_argument,
                  "inline_bytes must be <= " + std::to_string(rl::inline_bytes_max));
  }
  if (o.bucket_cache_ttl_ms > rl::bucket_cache_ttl_ms_max) {
    return Status(Errc::invalid_argument,
                  "bucket_cache_ttl_ms must be <= " + std::to_string(rl::bucket_cache_ttl_ms_max));
  }
  if (o.bucket_cache_entries > rl::bucket_cache_entries_max) {
    return Status(Errc::invalid_argument, "bucket_cache_entries must be <= " +
                                              std::to_string(rl::bucket_cache_entries_max));
  }
  if (o.versions_per_key_max == 0 || o.versions_per_key_max > limits::versions_per_key_max) {
    return Status(Errc::invalid_argument, "versions_per_key_max must be within [1, " +
                                              std::to_string(limits::versions_per_key_max) + "]");
  }
  if (o.versions_value_bytes < (64u << 10) ||
      o.versions_value_bytes > rl::versions_value_bytes_max) {
    return Status(Errc::invalid_argument, "versions_value_bytes must be within [65536, " +
                                              std::to_string(rl::versions_value_bytes_max) + "]");
  }
  if (o.gc_interval_s == 0 || o.gc_interval_s > rl::gc_interval_s_max) {
    return Status(Errc::invalid_argument, "gc_interval_s must be within [1, " +
                                              std::to_string(rl::gc_interval_s_max) + "]");
  }
  if (o.intent_expire_s > rl::intent_expire_s_max) {
    return Status(Errc::invalid_argument,
                  "intent_expire_s must be <= " + std::to_string(rl::intent_expire_s_max));
  }
  if (o.inflight_writes == 0 || o.inflight_writes > rl::inflight_writes_max) {
    return Status(Errc::invalid_argument, "inflight_writes must be within [1, " +
                                              std::to_string(rl::inflight_writes_max) + "]");
  }
  auto c = std::make_shared<Conn>();
  c->opts = o;
  int r = c->rados.init2(o.client_name.c_str(), "ceph", 0);
  if (r < 0) return rados_error(r, "rados init");
  r = c->rados.conf_read_file(o.conf_file.c_str());
  if (r < 0) return rados_error(r, "reading " + o.conf_file);
  const std::string osd_t = std::to_string(o.osd_op_timeout_s);
  const std::string mon_t = std::to_string(o.mon_op_timeout_s);
  c->rados.conf_set("rados_osd_op_timeout", osd_t.c_str());
  c->rados.conf_set("rados_mon_op_timeout", mon_t.c_str());
  c->rados.conf_set("client_mount_timeout", mon_t.c_str());
  // The default throttle (100 MiB, 1024 ops in flight per handle) would cap parallel PUTs.
  c->rados.conf_set("objecter_inflight_op_bytes", "4294967296");
  c->rados.conf_set("objecter_inflight_ops", "65536");
  r = c->rados.connect();
  if (r < 0) {
    return Status(Errc::unavailable, std::string("cannot reach the Ceph cluster of ") +
                                         o.conf_file + ": " + std::strerror(-r));
  }
  const std::string meta_pool = o.pool_prefix + ".meta", data_pool = o.pool_prefix + ".data";
  OBJDIRECT_RETURN_IF_ERROR(ensure_pool(c->rados, meta_pool));
  OBJDIRECT_RETURN_IF_ERROR(ensure_pool(c->rados, data_pool));
  r = c->rados.ioctx_create(meta_pool.c_str(), c->meta);
  if (r < 0) return rados_error(r, "opening pool " + meta_pool);
  r = c->rados.ioctx_create(data_pool.c_str(), c->data);
  if (r < 0) return rados_error(r, "opening pool " + data_pool);
  c->meta.application_enable("objdirect", true);
  c->data.application_enable("objdirect", true);
  // The stripe size is fixed when the pools are first used: records do not repeat it.
  {
    librados::ObjectWriteOperation op;
    int rv = 0;
    op.create(false);
    op.omap_cmp(cmp_eq("stripe_bytes", std::nullopt), &rv);
    op.omap_set({{"stripe_bytes", to_bl(std::to_string(o.stripe_bytes))}});
    r = c->meta.operate(config_oid, &op);
    if (r < 0 && r != -ECANCELED) return rados_error(r, "store config");
    auto v = c->omap_get1(config_oid, "stripe_bytes");
    if (!v.ok()) return v.status();
    if (!v->has_value()) return Status(Errc::corrupt, "store config lost");
    c->stripe = std::stoull(**v);
    librados::ObjectWriteOperation b;
    b.create(false);
    r = c->meta.operate(buckets_oid, &b);
    if (r < 0) return rados_error(r, "bucket table");
  }
  return std::unique_ptr<ObjectStore>(new RadosStore(std::move(c)));
}

Result<std::uint64_t> gc_pass(ObjectStore& store) {
  auto* s = dynamic_cast<RadosStore*>(&store);
  if (s == nullptr) return Status(Errc::invalid_argument, "not a RADOS store");
  return s->gc_pass();
}

}  // namespace objdirect::storage::rados_impl

namespace objdirect::storage {

Result<std::unique_ptr<ObjectStore>> open_rados_store(const RadosStoreOptions& options) {
  return rados_impl::open(options);
}

Result<std::uint64_t> rados_gc_pass(ObjectStore& store) {
  return rados_impl::gc_pass(store);
}

}  // namespace objdirect::storage
