// RadosStore internals: helpers, record codecs and the connection (see rados_common.hpp).
#include "storage/rados/rados_common.hpp"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "common/limits.hpp"

namespace objdirect::storage::rados_impl {

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
std::string tagged(std::string_view tag, std::string_view s) {
  std::string out;
  out.reserve(tag.size() + s.size());
  out.append(tag);
  out.append(s);
  return out;
}
std::string intent_key(const BlobId& blob) {
  return tagged("i", blob.hex());
}
std::string part_key(std::string_view upload_id, std::uint32_t n) {
  char buf[16];
  std::snprintf(buf, sizeof buf, ".%08x", n);
  return tagged(tagged("p", upload_id), buf);
}

// --- records ---

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

Conn::~Conn() {
  meta.close();
  data.close();
  rados.shutdown();
}

std::string Conn::shard_oid(const BucketRec& b, std::uint32_t shard) const {
  return "idx." + b.info.name + "." + b.instance + "." + std::to_string(shard);
}

std::string Conn::key_shard(const BucketRec& b, std::string_view key) const {
  return shard_oid(b, std::uint32_t(fnv1a(key) & (b.shards - 1)));
}

std::string Conn::blob_shard(const BucketRec& b, const BlobId& blob) const {
  return shard_oid(b, std::uint32_t(fnv1a(blob.hex()) & (b.shards - 1)));
}

// Values of `keys` in oid's omap (absent keys and a missing object give no entry).
Result<std::map<std::string, bufferlist>> Conn::omap_get(const std::string& oid,
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

Result<std::optional<std::string>> Conn::omap_get1(const std::string& oid, const std::string& key) {
  auto m = omap_get(oid, {key});
  if (!m.ok()) return m.status();
  auto it = m->find(key);
  if (it == m->end()) return std::optional<std::string>();
  return std::optional<std::string>(to_str(it->second));
}

// One page (at most omap_page_max) of keys > after that start with prefix.
Status Conn::omap_page(const std::string& oid, const std::string& after, const std::string& prefix,
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
Result<std::vector<std::pair<std::string, std::string>>> Conn::omap_all(const std::string& oid,
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

Result<BucketRec> Conn::bucket(std::string_view name) {
  auto v = omap_get1(buckets_oid, std::string(name));
  if (!v.ok()) return v.status();
  if (!v->has_value()) return no_such_bucket();
  return decode_bucket_rec(**v);
}

// Deletes stripes [0, count) of a blob (missing ones are fine).
Status Conn::delete_stripes(const BlobId& blob, std::uint64_t count) {
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

// Deletes the stripes of a blob of unknown size: until inflight_writes_max + 1 consecutive
// stripes are missing (a writer leaves at most that many holes).
Status Conn::delete_unknown_blob(const BlobId& blob) {
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

std::map<std::string, std::pair<bufferlist, int>> cmp_eq(const std::string& key,
                                                         const std::optional<std::string>& v) {
  return {{key, {to_bl(v ? *v : std::string()), LIBRADOS_CMPXATTR_OP_EQ}}};
}

// Adds the assertion that the shard's bucket instance is live (not fenced by a DeleteBucket).
void assert_live(std::map<std::string, std::pair<bufferlist, int>>& asserts) {
  asserts[state_key] = {to_bl(state_live), LIBRADOS_CMPXATTR_OP_EQ};
}

}  // namespace objdirect::storage::rados_impl
