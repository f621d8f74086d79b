// RadosStore (see rados_store.hpp and docs/scale-out.md).
#include "storage/rados/rados_store.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <rados/librados.hpp>
#include <set>
#include <thread>
#include <tuple>

#include "common/assert.hpp"
#include "common/limits.hpp"
#include "storage/local/meta_codec.hpp"

namespace objdirect::storage {
namespace rados_impl {
namespace {

using librados::bufferlist;
using local::BlobId;
using local::ObjectRecord;
using local::PartRecord;
using local::Segment;

constexpr std::uint64_t zero_copy_min = 256 << 10;  // appends this large are not copied
constexpr std::uint64_t write_chunk = 4 << 20;      // copied appends are sent in these
constexpr int commit_attempts_max = 64;             // compare-and-swap retries under contention
constexpr const char* buckets_oid = "buckets";
constexpr const char* config_oid = "config";
constexpr const char* gc_lock_oid = "gc.lock";
// Every index shard holds state_key: "live", or "fenced:<token>" once a DeleteBucket with that
// token fenced it. Every op that adds an entry asserts "live" in its own compound op.
constexpr const char* state_key = "!state";
constexpr const char* state_live = "live";
constexpr std::uint32_t deleting_flag = 0x80000000u;  // in the bucket record's shard count

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Status rados_error(int r, std::string_view what) {
  const int e = r < 0 ? -r : r;
  std::string msg = std::string(what) + ": " + std::strerror(e);
  if (e == ENOSPC || e == EDQUOT) return Status(Errc::no_space, std::move(msg));
  if (e == ETIMEDOUT) return Status(Errc::unavailable, std::move(msg) + " (RADOS op timeout)");
  return Status(Errc::io_error, std::move(msg));
}
Status no_such_bucket() {
  return Status(Errc::no_such_bucket, "The specified bucket does not exist.");
}
Status no_such_key() {
  return Status(Errc::no_such_key, "The specified key does not exist.");
}
Status no_such_upload() {
  return Status(Errc::no_such_upload, "The specified multipart upload does not exist.");
}
Status recreated_by_another_owner() {
  return Status(Errc::unavailable,
                "The bucket was deleted and re-created by another owner during the request; "
                "retry.");
}
Status precondition_failed() {
  return Status(Errc::precondition_failed,
                "At least one of the pre-conditions you specified did not hold");
}
Status validate_key(std::string_view key) {
  if (key.empty()) return Status(Errc::invalid_argument, "Object key must not be empty.");
  if (key.size() > limits::key_bytes_max)
    return Status(Errc::key_too_long, "Your key is too long.");
  return Status();
}

bufferlist to_bl(std::string_view s) {
  bufferlist bl;
  bl.append(s.data(), unsigned(s.size()));
  return bl;
}
std::string to_str(const bufferlist& bl) {
  return bl.to_str();
}

void put_u32(std::string& out, std::uint32_t v) {
  out.append(reinterpret_cast<char*>(&v), 4);
}
void put_u64(std::string& out, std::uint64_t v) {
  out.append(reinterpret_cast<char*>(&v), 8);
}
bool get_u32(std::string_view& in, std::uint32_t& v) {
  if (in.size() < 4) return false;
  std::memcpy(&v, in.data(), 4);
  in.remove_prefix(4);
  return true;
}
bool get_u64(std::string_view& in, std::uint64_t& v) {
  if (in.size() < 8) return false;
  std::memcpy(&v, in.data(), 8);
  in.remove_prefix(8);
  return true;
}

std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

bool is_inline(const BlobId& id) {
  return id == BlobId{};
}

std::string stripe_oid(const BlobId& blob, std::uint64_t n) {
  return blob.hex() + "." + std::to_string(n);
}
std::string part_key(std::string_view upload_id, std::uint32_t n) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08x", n);
  return "p" + std::string(upload_id) + "." + buf;
}

// --- records ---

// u32 shards (| deleting_flag) | instance (32 hex) | [deleting token (32 hex)] | BucketInfo.
struct BucketRec {
  std::uint32_t shards = 0;
  std::string instance;  // 32 hex
  std::string deleting;  // token of the DeleteBucket in progress; empty: live
  BucketInfo info;
};
std::string encode_bucket_rec(const BucketRec& b) {
  std::string out;
  put_u32(out, b.shards | (b.deleting.empty() ? 0 : deleting_flag));
  out += b.instance;
  out += b.deleting;
  out += local::encode_bucket(b.info);
  return out;
}
Result<BucketRec> decode_bucket_rec(std::string_view v) {
  BucketRec b;
  if (!get_u32(v, b.shards) || v.size() < 32) return Status(Errc::corrupt, "bad bucket record");
  b.instance = std::string(v.substr(0, 32));
  v.remove_prefix(32);
  if ((b.shards & deleting_flag) != 0) {
    b.shards &= ~deleting_flag;
    if (v.size() < 32) return Status(Errc::corrupt, "bad bucket record");
    b.deleting = std::string(v.substr(0, 32));
    v.remove_prefix(32);
  }
  auto info = local::decode_bucket(v);
  if (!info.ok()) return info.status();
  b.info = std::move(*info);
  return b;
}

// An object value: u32 inline length | inline bytes | encode_object(record). A segment whose
// blob id is all zeros holds the inline bytes.
struct ObjectVal {
  ObjectRecord rec;
  std::string inline_data;
};
std::string encode_object_val(const ObjectVal& o) {
  std::string out;
  put_u32(out, std::uint32_t(o.inline_data.size()));
  out += o.inline_data;
  out += local::encode_object(o.rec);
  return out;
}
Result<ObjectVal> decode_object_val(std::string_view v, bool with_parts = true) {
  ObjectVal o;
  std::uint32_t n = 0;
  if (!get_u32(v, n) || v.size() < n) return Status(Errc::corrupt, "bad object value");
  o.inline_data = std::string(v.substr(0, n));
  v.remove_prefix(n);
  auto rec = with_parts ? local::decode_object(v) : local::decode_object_without_parts(v);
  if (!rec.ok()) return rec.status();
  o.rec = std::move(*rec);
  return o;
}

std::string encode_gc(std::uint64_t size) {
  std::string out;
  put_u64(out, std::uint64_t(now_ns()));
  put_u64(out, size);
  return out;
}
std::string encode_intent() {
  std::string out;
  put_u64(out, std::uint64_t(now_ns()));
  return out;
}

// --- the connection shared by the store, its writers and readers ---

struct Conn {
  RadosStoreOptions opts;
  librados::Rados rados;
  librados::IoCtx meta, data;
  std::uint64_t stripe = 0;

  ~Conn() {
    meta.close();
    data.close();
    rados.shutdown();
  }

  std::string shard_oid(const BucketRec& b, std::uint32_t shard) const {
    return "idx." + b.info.name + "." + b.instance + "." + std::to_string(shard);
  }
  std::string key_shard(const BucketRec& b, std::string_view key) const {
    return shard_oid(b, std::uint32_t(fnv1a(key) & (b.shards - 1)));
  }
  std::string blob_shard(const BucketRec& b, const BlobId& blob) const {
    return shard_oid(b, std::uint32_t(fnv1a(blob.hex()) & (b.shards - 1)));
  }

  // Values of `keys` in oid's omap (absent keys and a missing object give no entry).
  Result<std::map<std::string, bufferlist>> omap_get(const std::string& oid,
                                                     const std::set<std::string>& keys) {
    librados::ObjectReadOperation op;
    std::map<std::string, bufferlist> out;
    int rv = 0;
    op.omap_get_vals_by_keys(keys, &out, &rv);
    const int r = meta.operate(oid, &op, nullptr);
    if (r == -ENOENT) return std::map<std::string, bufferlist>{};
    if (r < 0) return rados_error(r, "omap read of " + oid);
    return out;
  }
  Result<std::optional<std::string>> omap_get1(const std::string& oid, const std::string& key) {
    auto m = omap_get(oid, {key});
    if (!m.ok()) return m.status();
    auto it = m->find(key);
    if (it == m->end()) return std::optional<std::string>();
    return std::optional<std::string>(to_str(it->second));
  }
  // One page (at most omap_page_max) of keys > after that start with prefix.
  Status omap_page(const std::string& oid, const std::string& after, const std::string& prefix,
                   std::uint32_t max, std::map<std::string, bufferlist>& out, bool& more) {
    librados::ObjectReadOperation op;
    int rv = 0;
    more = false;
    out.clear();
    op.omap_get_vals2(after, prefix, std::min(max, rados_limits::omap_page_max), &out, &more, &rv);
    const int r = meta.operate(oid, &op, nullptr);
    if (r == -ENOENT) {
      out.clear();
      more = false;
      return Status();
    }
    if (r < 0) return rados_error(r, "omap listing of " + oid);
    return Status();
  }
  // Every entry of oid's omap with the prefix, page by page.
  Result<std::vector<std::pair<std::string, std::string>>> omap_all(const std::string& oid,
                                                                    const std::string& prefix) {
    std::vector<std::pair<std::string, std::string>> all;
    std::string after;
    for (;;) {
      std::map<std::string, bufferlist> page;
      bool more = false;
      OBJDIRECT_RETURN_IF_ERROR(
          omap_page(oid, after, prefix, rados_limits::omap_page_max, page, more));
      for (auto& [k, v] : page) all.emplace_back(k, to_str(v));
      if (!more || page.empty()) break;
      after = page.rbegin()->first;
    }
    return all;
  }

  Result<BucketRec> bucket(std::string_view name) {
    auto v = omap_get1(buckets_oid, std::string(name));
    if (!v.ok()) return v.status();
    if (!v->has_value()) return no_such_bucket();
    return decode_bucket_rec(**v);
  }

  // Deletes stripes [0, count) of a blob (missing ones are fine).
  Status delete_stripes(const BlobId& blob, std::uint64_t count) {
    std::deque<librados::AioCompletion*> q;
    Status st;
    auto drain_one = [&] {
      auto* c = q.front();
      q.pop_front();
      c->wait_for_complete();
      const int r = c->get_return_value();
      c->release();
      if (r < 0 && r != -ENOENT && st.ok()) st = rados_error(r, "delete of a stripe");
    };
    for (std::uint64_t n = 0; n < count; ++n) {
      auto* c = librados::Rados::aio_create_completion();
      const int r = data.aio_remove(stripe_oid(blob, n), c);
      if (r < 0) {
        c->release();
        if (st.ok()) st = rados_error(r, "delete of a stripe");
        continue;
      }
      q.push_back(c);
      if (q.size() >= 16) drain_one();
    }
    while (!q.empty()) drain_one();
    return st;
  }
  std::uint64_t stripes_of(std::uint64_t size) const { return (size + stripe - 1) / stripe; }
  // Deletes the stripes of a blob of unknown size: until inflight_writes_max + 1 consecutive
  // stripes are missing (a writer leaves at most that many holes).
  Status delete_unknown_blob(const BlobId& blob) {
    std::uint64_t misses = 0;
    for (std::uint64_t n = 0; misses <= rados_limits::inflight_writes_max; ++n) {
      const int r = data.remove(stripe_oid(blob, n));
      if (r == -ENOENT) {
        ++misses;
      } else if (r < 0) {
        return rados_error(r, "delete of a stripe");
      } else {
        misses = 0;
      }
    }
    return Status();
  }
};

// Adds GC records for the non-inline segments of a replaced value.
void add_gc(const ObjectVal& old, std::map<std::string, bufferlist>& set) {
  for (const Segment& s : old.rec.segments) {
    if (!is_inline(s.blob)) set["g" + s.blob.hex()] = to_bl(encode_gc(s.size));
  }
}

std::map<std::string, std::pair<bufferlist, int>> cmp_eq(const std::string& key,
                                                         const std::optional<std::string>& v) {
  return {{key, {to_bl(v ? *v : std::string()), LIBRADOS_CMPXATTR_OP_EQ}}};
}

// Adds the assertion that the shard's bucket instance is live (not fenced by a DeleteBucket).
void assert_live(std::map<std::string, std::pair<bufferlist, int>>& asserts) {
  asserts[state_key] = {to_bl(state_live), LIBRADOS_CMPXATTR_OP_EQ};
}

// --- writer ---

class RadosWriter : public BlobWriter {
 public:
  // intent_oid: the index shard for the intent record (the key's shard when known).
  RadosWriter(std::shared_ptr<Conn> c, BucketRec b, std::string intent_oid)
      : c_(std::move(c)),
        bucket_(std::move(b)),
        blob_(BlobId::random()),
        intent_target_(std::move(intent_oid)) {
    if (intent_target_.empty()) intent_target_ = c_->blob_shard(bucket_, blob_);
  }
  ~RadosWriter() override {
    // Not committed: delete what was written, then the intent (best effort; a crash leaves the
    // intent, and the GC deletes the blob once it expires).
    (void)wait_all();
    if (committed_ || !intent_oid_) return;
    if (c_->delete_stripes(blob_, c_->stripes_of(flushed_)).ok()) {
      librados::ObjectWriteOperation op;
      op.omap_rm_keys({"i" + blob_.hex()});
      c_->meta.operate(*intent_oid_, &op);
    }
  }

  Status append(std::span<const std::byte> data) override {
    if (!error_.ok()) return error_;
    if (data.size() >= zero_copy_min) {
      // Registered staging memory goes to the OSDs as is; wait before the caller reuses it.
      OBJDIRECT_RETURN_IF_ERROR(flush_pending());
      bufferlist bl;
      bl.push_back(ceph::buffer::create_static(
          unsigned(data.size()), const_cast<char*>(reinterpret_cast<const char*>(data.data()))));
      size_ += data.size();
      OBJDIRECT_RETURN_IF_ERROR(issue(std::move(bl)));
      return wait_all();
    }
    pending_.append(reinterpret_cast<const char*>(data.data()), unsigned(data.size()));
    size_ += data.size();
    if (pending_.length() >= write_chunk) return flush_pending();
    return Status();
  }
  std::uint64_t size() const override { return size_; }

  // Everything written and acknowledged (for a striped commit).
  Status finish() {
    OBJDIRECT_RETURN_IF_ERROR(flush_pending());
    return wait_all();
  }
  bool can_inline(std::uint64_t inline_max) const { return flushed_ == 0 && size_ <= inline_max; }
  std::string take_inline() { return pending_.to_str(); }
  const BlobId& blob() const { return blob_; }
  const BucketRec& bucket() const { return bucket_; }
  bool has_intent() const { return intent_oid_.has_value(); }
  void set_committed() { committed_ = true; }

  // Puts the intent on `oid` (the shard of the key being committed), so that one compound op
  // there can drop it. Order: add the new one, then remove the old one if it still exists; a
  // crash in between only leaves two intents for the same uncommitted blob. If the old one is
  // gone, the GC expired it and may be deleting the data: fail.
  Status move_intent(const std::string& oid) {
    if (!intent_oid_ || *intent_oid_ == oid) return Status();
    const std::string ikey = "i" + blob_.hex();
    librados::ObjectWriteOperation add;
    add.create(false);
    add.omap_set({{ikey, to_bl(encode_intent())}});
    int r = c_->meta.operate(oid, &add);
    if (r < 0) return rados_error(r, "intent record");
    librados::ObjectWriteOperation rm;
    int rv = 0;
    rm.omap_cmp({{ikey, {bufferlist(), LIBRADOS_CMPXATTR_OP_GT}}}, &rv);
    rm.omap_rm_keys({ikey});
    r = c_->meta.operate(*intent_oid_, &rm);
    if (r == -ECANCELED || r == -ENOENT) {
      librados::ObjectWriteOperation undo;
      undo.omap_rm_keys({ikey});
      c_->meta.operate(oid, &undo);
      intent_oid_.reset();
      return error_ = Status(Errc::io_error,
                             "the write took longer than intent_expire_s and its data was "
                             "collected");
    }
    if (r < 0) return rados_error(r, "intent record");
    intent_oid_ = oid;
    return Status();
  }

 private:
  Status flush_pending() {
    if (pending_.length() == 0) return Status();
    bufferlist bl;
    bl.swap(pending_);
    return issue(std::move(bl));
  }

  // Sends bl (the bytes at offset flushed_) as writes split at stripe and write-size bounds.
  Status issue(bufferlist bl) {
    if (!intent_oid_) {
      // Before the first byte reaches the data pool: the intent makes the blob collectable if
      // this process dies before committing.
      const std::string oid = intent_target_;
      librados::ObjectWriteOperation op;
      op.create(false);
      op.omap_set({{"i" + blob_.hex(), to_bl(encode_intent())}});
      const int r = c_->meta.operate(oid, &op);
      if (r < 0) return error_ = rados_error(r, "intent record");
      intent_oid_ = oid;
    }
    std::uint64_t done = 0;
    const std::uint64_t total = bl.length();
    while (done < total) {
      const std::uint64_t off = flushed_;
      const std::uint64_t in_stripe = off % c_->stripe;
      const std::uint64_t n =
          std::min({total - done, c_->stripe - in_stripe, rados_limits::write_bytes_max});
      auto piece = std::make_unique<bufferlist>();
      piece->substr_of(bl, unsigned(done), unsigned(n));
      auto* comp = librados::Rados::aio_create_completion();
      const int r =
          c_->data.aio_write(stripe_oid(blob_, off / c_->stripe), comp, *piece, n, in_stripe);
      if (r < 0) {
        comp->release();
        return error_ = rados_error(r, "stripe write");
      }
      inflight_.push_back({comp, std::move(piece)});
      done += n;
      flushed_ += n;
      if (inflight_.size() >= std::max<std::uint32_t>(1, c_->opts.inflight_writes)) {
        OBJDIRECT_RETURN_IF_ERROR(wait_one());
      }
    }
    return Status();
  }
  Status wait_one() {
    auto [comp, bl] = std::move(inflight_.front());
    inflight_.pop_front();
    comp->wait_for_complete();
    const int r = comp->get_return_value();
    comp->release();
    if (r < 0 && error_.ok()) error_ = rados_error(r, "stripe write");
    return error_;
  }
  Status wait_all() {
    while (!inflight_.empty()) (void)wait_one();
    return error_;
  }

  std::shared_ptr<Conn> c_;
  BucketRec bucket_;
  BlobId blob_;
  std::uint64_t size_ = 0;
  std::uint64_t flushed_ = 0;  // bytes handed to librados
  bufferlist pending_;         // copied small appends, not yet sent
  std::deque<std::pair<librados::AioCompletion*, std::unique_ptr<bufferlist>>> inflight_;
  std::string intent_target_;              // where the intent goes when first needed
  std::optional<std::string> intent_oid_;  // where it is
  Status error_;
  bool committed_ = false;
};

// --- reader ---

// Sequential reads overlap: when a pread continues where the previous one ended, the reads for
// the next range of the same length are issued before this one's data is copied out, so the
// next RADOS round trip runs while the caller sends this chunk to the client.
class RadosReader : public ObjectReader {
 public:
  RadosReader(std::shared_ptr<Conn> c, ObjectVal v) : c_(std::move(c)), v_(std::move(v)) {
    std::uint64_t at = 0;
    for (const Segment& s : v_.rec.segments) {
      starts_.push_back(at);
      at += s.size;
    }
  }
  ~RadosReader() override { discard(ahead_); }
  const ObjectMeta& meta() const override { return v_.rec.meta; }

  Result<std::size_t> pread(std::span<std::byte> dst, std::uint64_t offset) override {
    const std::uint64_t size = v_.rec.meta.size;
    if (offset >= size || dst.empty()) return std::size_t{0};
    const std::uint64_t len = std::min<std::uint64_t>(dst.size(), size - offset);
    Batch cur;
    if (ahead_.len > 0 && ahead_.off == offset && ahead_.len == len) {
      cur = std::move(ahead_);
      ahead_ = Batch{};
    } else {
      discard(ahead_);
      cur = issue(offset, len);
    }
    const bool sequential = offset == last_end_;
    last_end_ = offset + len;
    if (sequential && len >= prefetch_min && offset + len < size && cur.st.ok()) {
      ahead_ = issue(offset + len, std::min(len, size - (offset + len)));
    }
    Status st = collect(cur, reinterpret_cast<char*>(dst.data()));
    if (!st.ok()) {
      discard(ahead_);
      last_end_ = UINT64_MAX;
      return st;
    }
    return std::size_t(len);
  }

  Result<std::vector<Extent>> extents(std::uint64_t, std::uint64_t) override {
    return std::vector<Extent>{};
  }

 private:
  static constexpr std::uint64_t prefetch_min = 64 << 10;

  struct Piece {
    librados::AioCompletion* comp = nullptr;  // null: inline bytes at src
    bufferlist bl;
    const char* src = nullptr;
    std::uint64_t rel_off = 0, len = 0;
  };
  struct Batch {
    std::uint64_t off = 0, len = 0;
    std::deque<Piece> pieces;  // a deque keeps each bufferlist in place while librados fills it
    Status st;
  };

  // Issues the reads of [off, off + len) (within the object).
  Batch issue(std::uint64_t off, std::uint64_t len) {
    Batch b;
    b.off = off;
    b.len = len;
    std::size_t seg = std::upper_bound(starts_.begin(), starts_.end(), off) - starts_.begin() - 1;
    std::uint64_t pos = off;
    while (pos < off + len && b.st.ok()) {
      const Segment& s = v_.rec.segments[seg];
      const std::uint64_t in_seg = pos - starts_[seg];
      if (in_seg == s.size) {
        ++seg;
        continue;
      }
      std::uint64_t n = std::min(s.size - in_seg, off + len - pos);
      Piece& p = b.pieces.emplace_back();
      p.rel_off = pos - off;
      if (is_inline(s.blob)) {
        p.src = v_.inline_data.data() + in_seg;
      } else {
        const std::uint64_t in_stripe = in_seg % c_->stripe;
        n = std::min(n, c_->stripe - in_stripe);
        p.comp = librados::Rados::aio_create_completion();
        const int r =
            c_->data.aio_read(stripe_oid(s.blob, in_seg / c_->stripe), p.comp, &p.bl, n, in_stripe);
        if (r < 0) {
          p.comp->release();
          b.pieces.pop_back();
          b.st = rados_error(r, "stripe read");
          break;
        }
      }
      p.len = n;
      pos += n;
    }
    return b;
  }

  // Waits for a batch and copies it to dst (the one copy on the read path: librados owns the
  // receive buffers).
  Status collect(Batch& b, char* dst) {
    Status st = b.st;
    for (Piece& p : b.pieces) {
      int r = 0;
      if (p.comp != nullptr) {
        p.comp->wait_for_complete();
        r = p.comp->get_return_value();
        p.comp->release();
        p.comp = nullptr;
      }
      if (!st.ok()) continue;
      if (r < 0) {
        st = r == -ENOENT ? Status(Errc::io_error,
                                   "object data is gone (replaced longer ago than the GC grace "
                                   "period, or lost)")
                          : rados_error(r, "stripe read");
      } else if (p.src != nullptr) {
        std::memcpy(dst + p.rel_off, p.src, p.len);
      } else if (p.bl.length() != p.len) {
        st = Status(Errc::corrupt, "short stripe read");
      } else {
        p.bl.begin().copy(unsigned(p.len), dst + p.rel_off);
      }
    }
    b = Batch{};
    return st;
  }

  // Waits for a batch's reads (librados writes into its bufferlists) and drops them.
  static void discard(Batch& b) {
    for (Piece& p : b.pieces) {
      if (p.comp != nullptr) {
        p.comp->wait_for_complete();
        p.comp->release();
      }
    }
    b = Batch{};
  }

  std::shared_ptr<Conn> c_;
  ObjectVal v_;
  std::vector<std::uint64_t> starts_;
  Batch ahead_;
  std::uint64_t last_end_ = UINT64_MAX;
};

// --- store ---

class RadosStore : public ObjectStore {
 public:
  explicit RadosStore(std::shared_ptr<Conn> c) : c_(std::move(c)) {
    if (c_->opts.gc) gc_thread_ = std::thread([this] { gc_loop(); });
  }
  ~RadosStore() override {
    {
      std::lock_guard lk(gc_mu_);
      stop_ = true;
    }
    gc_cv_.notify_all();
    if (gc_thread_.joinable()) gc_thread_.join();
  }

  Status create_bucket(const BucketInfo& info) override {
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
  Status delete_bucket(std::string_view bucket) override {
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
  Result<BucketInfo> head_bucket(std::string_view bucket) override {
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

  Result<std::vector<BucketInfo>> list_buckets() override {
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

  Result<std::unique_ptr<BlobWriter>> begin_write(std::string_view bucket) override {
    auto b = valid_bucket(bucket, std::nullopt);
    if (!b.ok()) return b.status();
    return std::unique_ptr<BlobWriter>(new RadosWriter(c_, std::move(*b), ""));
  }

  Result<std::unique_ptr<BlobWriter>> begin_write_for(std::string_view bucket,
                                                      std::string_view key) override {
    auto b = valid_bucket(bucket, key);
    if (!b.ok()) return b.status();
    std::string oid = c_->key_shard(*b, key);
    return std::unique_ptr<BlobWriter>(new RadosWriter(c_, std::move(*b), std::move(oid)));
  }

  Result<ObjectMeta> commit_object(std::string_view bucket, ObjectMeta meta,
                                   std::unique_ptr<BlobWriter> data,
                                   const WriteCondition& cond) override {
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
    const std::string okey = "o" + meta.key;
    const std::string ikey = "i" + w->blob().hex();
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

  Result<ObjectMeta> set_object_tags(std::string_view bucket, std::string_view key,
                                     TagSet tags) override {
    OBJDIRECT_RETURN_IF_ERROR(validate_key(key));
    const std::string okey = "o" + std::string(key);
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

  Status set_bucket_tags(std::string_view bucket, TagSet tags) override {
    return update_bucket(bucket, [&](BucketInfo& b) { b.tags = tags; });
  }

  Status set_bucket_config(std::string_view bucket, std::string_view name,
                           std::string document) override {
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
  Status update_bucket(std::string_view bucket, const std::function<void(BucketInfo&)>& change) {
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

  Result<ObjectMeta> replace_meta(std::string_view bucket, ObjectMeta meta,
                                  std::string_view expected_etag) override {
    OBJDIRECT_RETURN_IF_ERROR(validate_key(meta.key));
    const std::string okey = "o" + meta.key;
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

  Result<ObjectMeta> head_object(std::string_view bucket, std::string_view key) override {
    auto v = get_object(bucket, key, true);
    if (!v.ok()) return v.status();
    return std::move(v->rec.meta);
  }

  Result<std::unique_ptr<ObjectReader>> open_object(std::string_view bucket,
                                                    std::string_view key) override {
    auto v = get_object(bucket, key, true);
    if (!v.ok()) return v.status();
    return std::unique_ptr<ObjectReader>(new RadosReader(c_, std::move(*v)));
  }

  // Asserts "live" too: with a stale cached record, removing the key from a dead instance would
  // leave the re-created bucket's key in place.
  Status delete_object(std::string_view bucket, std::string_view key) override {
    const std::string okey = "o" + std::string(key);
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

  Result<ListResult> list_objects(std::string_view bucket, const ListQuery& q) override {
    auto b = valid_bucket(bucket, std::nullopt);
    if (!b.ok()) return b.status();
    // A k-way merge over the shards, each read a page (<= 1024 entries) at a time.
    struct Shard {
      std::string oid, after;
      bool more = true;
      std::deque<std::pair<std::string, bufferlist>> buf;
    };
    const std::string filter = "o" + q.prefix;
    std::vector<Shard> shards(b->shards);
    for (std::uint32_t s = 0; s < b->shards; ++s) {
      shards[s].oid = c_->shard_oid(*b, s);
      if (!q.start_after.empty()) shards[s].after = "o" + q.start_after;
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
      const std::string ocp = "o" + cp;
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

  Result<std::string> create_upload(std::string_view bucket, const UploadInfo& info) override {
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
      auto asserts = cmp_eq("u" + u.upload_id, std::nullopt);  // fails on ENOENT: no bucket
      assert_live(asserts);
      op.omap_cmp(asserts, &rv);
      op.omap_set({{"u" + u.upload_id, to_bl(local::encode_upload(u))}});
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

  Result<UploadInfo> get_upload(std::string_view bucket, std::string_view key,
                                std::string_view upload_id) override {
    auto b = valid_bucket(bucket, key);
    if (!b.ok()) return b.status();
    auto u = read_upload(*b, key, upload_id);
    if (!u.ok()) return u.status();
    return std::move(u->first);
  }

  Result<PartInfo> commit_part(std::string_view bucket, std::string_view key,
                               std::string_view upload_id, PartInfo info,
                               std::unique_ptr<BlobWriter> data) override {
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
    const std::string ukey = "u" + std::string(upload_id);
    const std::string ikey = "i" + w->blob().hex();
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
        if (!is_inline(old->blob)) set["g" + old->blob.hex()] = to_bl(encode_gc(old->info.size));
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

  Result<std::vector<PartInfo>> list_parts(std::string_view bucket, std::string_view key,
                                           std::string_view upload_id,
                                           std::uint32_t part_number_marker,
                                           std::uint32_t max_parts) override {
    auto b = valid_bucket(bucket, key);
    if (!b.ok()) return b.status();
    auto u = read_upload(*b, key, upload_id);
    if (!u.ok()) return u.status();
    std::vector<PartInfo> out;
    std::string after = part_key(upload_id, part_number_marker);
    const std::string prefix = "p" + std::string(upload_id) + ".";
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

  Result<ObjectMeta> complete_upload(std::string_view bucket, std::string_view upload_id,
                                     ObjectMeta meta, const std::vector<CompletePartRef>& parts,
                                     const WriteCondition& cond) override {
    OBJDIRECT_RETURN_IF_ERROR(validate_key(meta.key));
    auto b = valid_bucket(bucket, meta.key);
    if (!b.ok()) return b.status();
    const std::string oid = c_->key_shard(*b, meta.key);
    const std::string okey = "o" + meta.key;
    const std::string ukey = "u" + std::string(upload_id);
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
      auto stored = c_->omap_all(oid, "p" + std::string(upload_id) + ".");
      if (!stored.ok()) return stored.status();
      std::map<std::uint32_t, std::pair<std::string, PartRecord>> by_number;
      for (auto& [k, v] : *stored) {
        auto p = local::decode_part(v);
        if (!p.ok()) return p.status();
        by_number[p->info.part_number] = {k, std::move(*p)};
      }
      ObjectVal nv;
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
        if (p.info.size > 0) nv.rec.segments.push_back({p.blob, p.info.size});
        total += p.info.size;
        chosen.insert(ref.part_number);
      }
      if (total != meta.size) {
        return Status(Errc::invalid_argument, "object size differs from the sum of its parts");
      }
      auto current = current_entry(oid, okey, cond);
      if (!current.ok()) return current.status();
      std::optional<ObjectVal>& old = current->old;
      meta.mtime_ns = now_ns();
      nv.rec.meta = meta;
      // One op: the upload and every part are unchanged, the object is as read; then the object
      // points at the chosen parts' blobs, the upload and parts go, the rest goes to GC.
      librados::ObjectWriteOperation op;
      int rv = 0;
      auto asserts = cmp_eq(okey, current->raw);
      asserts[ukey] = {to_bl(u->second), LIBRADOS_CMPXATTR_OP_EQ};
      assert_live(asserts);
      std::set<std::string> rm{ukey};
      std::map<std::string, bufferlist> set{{okey, to_bl(encode_object_val(nv))}};
      for (auto& [n, kp] : by_number) {
        asserts[kp.first] = {to_bl(local::encode_part(kp.second)), LIBRADOS_CMPXATTR_OP_EQ};
        rm.insert(kp.first);
        if (!chosen.count(n) && !is_inline(kp.second.blob)) {
          set["g" + kp.second.blob.hex()] = to_bl(encode_gc(kp.second.info.size));
        }
      }
      if (old) add_gc(*old, set);
      op.omap_cmp(asserts, &rv);
      op.omap_set(set);
      op.omap_rm_keys(rm);
      const int r = c_->meta.operate(oid, &op);
      if (r == 0) return meta;
      if (r == -ENOENT) return no_such_bucket();
      if (r != -ECANCELED) return rados_error(r, "multipart completion");
      auto next = after_conflict(*b, oid, "", attempt);
      if (!next.ok()) return next.status();
      if (next->instance != b->instance) return no_such_upload();
    }
    return Status(Errc::slow_down, "Too many concurrent writers of this key; retry");
  }

  Status abort_upload(std::string_view bucket, std::string_view key,
                      std::string_view upload_id) override {
    auto b = valid_bucket(bucket, key);
    if (!b.ok()) return b.status();
    return abort_upload(*b, key, upload_id);
  }
  // Removals need no "live" assertion: DeleteBucket aborts uploads on fenced shards.
  Status abort_upload(const BucketRec& b, std::string_view key, std::string_view upload_id) {
    const std::string oid = c_->key_shard(b, key);
    const std::string ukey = "u" + std::string(upload_id);
    for (int attempt = 0; attempt < commit_attempts_max; ++attempt) {
      auto u = read_upload(b, key, upload_id);
      if (!u.ok()) return u.status();
      auto stored = c_->omap_all(oid, "p" + std::string(upload_id) + ".");
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
        if (!is_inline(p->blob)) set["g" + p->blob.hex()] = to_bl(encode_gc(p->info.size));
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

  Result<ListUploadsResult> list_uploads(std::string_view bucket,
                                         const ListUploadsQuery& q) override {
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
    return page_uploads(std::move(all), q);
  }

  // One GC pass under the cluster-wide lease (held for the pass, renewed by the next one);
  // returns the number of blobs deleted.
  Result<std::uint64_t> gc_pass() {
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

 private:
  // The index entry of `okey` in shard `oid`: its raw value (for the commit's omap_cmp) and
  // decoded (both nullopt when absent), checked against the write condition: must_be_absent
  // fails on an entry, etag_must_match on none or another ETag.
  struct Current {
    std::optional<std::string> raw;
    std::optional<ObjectVal> old;
  };
  Result<Current> current_entry(const std::string& oid, const std::string& okey,
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

  Result<ObjectVal> get_object(std::string_view bucket, std::string_view key, bool parts) {
    auto e = read_entry(bucket, key, "o" + std::string(key));
    if (!e.ok()) return e.status();
    if (!e->raw.has_value()) return no_such_key();
    return decode_object_val(*e->raw, parts);
  }

  // --- the bucket record cache ---
  // Bucket name -> record, per server. A cached record may be stale: another server may have
  // deleted the bucket, maybe re-created it under a new instance. Every use validates it no later
  // than its first access to an index shard, in the same RADOS op: reads fetch the shard's
  // "!state" with their keys (read_entry, valid_bucket), writes assert it is "live". Shards of a
  // deleted instance are fenced forever, so a stale record is always detected; the fresh record
  // then replaces it (fresh_bucket) and the op is redone on it, or fails with NoSuchBucket, or,
  // for a PUT whose data went to the old instance, is refused. HeadBucket and ListBuckets read
  // the record itself. Deleting and re-creating a bucket thus never serves stale answers; the
  // cache only saves the record read of each request.

  // The cached record, or a read one (then cached).
  Result<BucketRec> bucket_rec(std::string_view name) {
    if (c_->opts.bucket_cache_entries == 0) return c_->bucket(name);
    {
      std::lock_guard lk(cache_mu_);
      auto it = cache_.find(name);
      if (it != cache_.end()) return it->second.rec;
    }
    return fresh_bucket(name);
  }
  // The record as stored now; updates the cache.
  Result<BucketRec> fresh_bucket(std::string_view name) {
    auto b = c_->bucket(name);
    if (b.ok()) {
      remember_bucket(*b);
    } else if (b.code() == Errc::no_such_bucket) {
      forget_bucket(name);
    }
    return b;
  }
  void remember_bucket(const BucketRec& b) {
    if (c_->opts.bucket_cache_entries == 0) return;
    std::lock_guard lk(cache_mu_);
    // Bounded: when full, start over (records are re-read on demand).
    if (cache_.size() >= c_->opts.bucket_cache_entries && !cache_.count(b.info.name)) {
      cache_.clear();
    }
    cache_.insert_or_assign(b.info.name, Cached{b, std::chrono::steady_clock::now()});
  }
  void forget_bucket(std::string_view name) {
    std::lock_guard lk(cache_mu_);
    auto it = cache_.find(name);
    if (it != cache_.end()) cache_.erase(it);
  }

  // A shard's state is not "live" as read through a possibly stale record `b`: the fresh record
  // decides. nullopt: b stands (same instance: being deleted, or a shard that predates fences);
  // otherwise the fresh record of another instance, or no_such_bucket. A bucket re-created by
  // another owner is `unavailable` (503, retried by clients): the caller's ownership check was
  // made on the cached record and must be made again.
  Result<std::optional<BucketRec>> recheck(const BucketRec& b) {
    auto fresh = fresh_bucket(b.info.name);
    if (!fresh.ok()) return fresh.status();
    if (fresh->instance == b.instance) return std::optional<BucketRec>();
    if (fresh->info.owner != b.info.owner) return recreated_by_another_owner();
    return std::optional<BucketRec>(std::move(*fresh));
  }
  static bool live(const std::map<std::string, bufferlist>& m) {
    auto it = m.find(state_key);
    return it != m.end() && to_str(it->second) == state_live;
  }

  // The bucket record, validated (one op on the key's shard, or shard 0, when cached).
  Result<BucketRec> valid_bucket(std::string_view name, std::optional<std::string_view> key) {
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

  // The index entry `okey` of `key` (nullopt when absent), read with the shard's state in one op,
  // on the current instance of the bucket.
  struct Entry {
    BucketRec b;
    std::string oid;
    std::optional<std::string> raw;
  };
  Result<Entry> read_entry(std::string_view name, std::string_view key, const std::string& okey) {
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

  // The upload and its raw value (for compare-and-swap).
  Result<std::pair<UploadInfo, std::string>> read_upload(const BucketRec& b, std::string_view key,
                                                         std::string_view upload_id) {
    auto v = c_->omap_get1(c_->key_shard(b, key), "u" + std::string(upload_id));
    if (!v.ok()) return v.status();
    if (!v->has_value()) return no_such_upload();
    auto u = local::decode_upload(**v);
    if (!u.ok()) return u.status();
    if (u->key != key) return no_such_upload();
    return std::make_pair(std::move(*u), std::move(**v));
  }

  // An op on shard `oid` of bucket instance `b` failed a compare. Returns the bucket record to
  // retry with: `b` after a concurrent change of the entries compared, or while a DeleteBucket
  // of b's instance is in progress (after a short wait: it either completes or rolls back), or
  // after repairing a stale fence (the record is live but a superseded DeleteBucket left its
  // fence, or the shard predates fences); a record of another instance when the bucket was
  // deleted and re-created (callers bound to b's instance fail). no_such_bucket when it is
  // gone; io_error when the writer's intent `ikey` (when not empty) expired.
  Result<BucketRec> after_conflict(const BucketRec& b, const std::string& oid,
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

  static ListUploadsResult page_uploads(std::vector<UploadInfo> all, const ListUploadsQuery& q) {
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

  void gc_loop() {
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

  std::shared_ptr<Conn> c_;
  struct Cached {
    BucketRec rec;
    std::chrono::steady_clock::time_point fetched;
  };
  std::mutex cache_mu_;
  std::map<std::string, Cached, std::less<>> cache_;  // at most bucket_cache_entries
  const std::string gc_cookie_ = BlobId::random().hex();
  std::mutex gc_mu_;
  std::condition_variable gc_cv_;
  bool stop_ = false;
  std::thread gc_thread_;
};

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

}  // namespace rados_impl

Result<std::unique_ptr<ObjectStore>> open_rados_store(const RadosStoreOptions& options) {
  return rados_impl::open(options);
}

Result<std::uint64_t> rados_gc_pass(ObjectStore& store) {
  return rados_impl::gc_pass(store);
}

}  // namespace objdirect::storage
