// Internals of RadosStore shared by its files (see rados_store.hpp, docs/scale-out.md): the
// constants, the record codecs, the connection shared by the store, its writers and readers, and
// the writer and reader classes.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <rados/librados.hpp>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.hpp"
#include "storage/object_store.hpp"
#include "storage/rados/index_codec.hpp"
#include "storage/rados/rados_store.hpp"

namespace objdirect::storage::rados_impl {

using librados::bufferlist;
using local::BlobId;
using local::ObjectRecord;
using local::PartRecord;
using local::Segment;

inline constexpr std::uint64_t zero_copy_min = 256 << 10;  // appends this large are not copied
inline constexpr std::uint64_t write_chunk = 4 << 20;      // copied appends are sent in these
inline constexpr int commit_attempts_max = 64;  // compare-and-swap retries under contention
inline constexpr const char* buckets_oid = "buckets";
inline constexpr const char* config_oid = "config";
inline constexpr const char* gc_lock_oid = "gc.lock";
// Every index shard holds state_key: "live", or "fenced:<token>" once a DeleteBucket with that
// token fenced it. Every op that adds an entry asserts "live" in its own compound op.
inline constexpr const char* state_key = "!state";
inline constexpr const char* state_live = "live";
inline constexpr std::uint32_t deleting_flag = 0x80000000u;  // in the bucket record's shard count
// Every index shard of a versioned bucket holds versioning_key: the bucket's versioning state
// ("Enabled" / "Suspended"; absent: never versioned), compared by every commit of a key.
inline constexpr const char* versioning_key = "!versioning";
enum class Versioning { off, enabled, suspended };

std::int64_t now_ns();
Status rados_error(int r, std::string_view what);
Status no_such_bucket();
Status no_such_key();
Status no_such_upload();
Status recreated_by_another_owner();
Status precondition_failed();
Status validate_key(std::string_view key);

bufferlist to_bl(std::string_view s);
std::string to_str(const bufferlist& bl);
void put_u32(std::string& out, std::uint32_t v);
void put_u64(std::string& out, std::uint64_t v);
bool get_u32(std::string_view& in, std::uint32_t& v);
bool get_u64(std::string_view& in, std::uint64_t& v);
std::uint64_t fnv1a(std::string_view s);
bool is_inline(const BlobId& id);
std::string stripe_oid(const BlobId& blob, std::uint64_t n);
// tag + s, built by appending (GCC 12 reports a false -Wrestrict for "literal" + std::string
// temporaries once inlined).
std::string tagged(std::string_view tag, std::string_view s);
std::string intent_key(const BlobId& blob);  // "i" blob
std::string part_key(std::string_view upload_id, std::uint32_t n);

// --- records ---

// u32 shards (| deleting_flag) | instance (32 hex) | [deleting token (32 hex)] | BucketInfo.
struct BucketRec {
  std::uint32_t shards = 0;
  std::string instance;  // 32 hex
  std::string deleting;  // token of the DeleteBucket in progress; empty: live
  BucketInfo info;
};
std::string encode_bucket_rec(const BucketRec& b);
Result<BucketRec> decode_bucket_rec(std::string_view v);

std::string encode_gc(std::uint64_t size);
std::string encode_intent();

// --- the connection shared by the store, its writers and readers ---

struct Conn {
  RadosStoreOptions opts;
  librados::Rados rados;
  librados::IoCtx meta, data;
  std::uint64_t stripe = 0;

  ~Conn();

  std::string shard_oid(const BucketRec& b, std::uint32_t shard) const;
  std::string key_shard(const BucketRec& b, std::string_view key) const;
  std::string blob_shard(const BucketRec& b, const BlobId& blob) const;

  Result<std::map<std::string, bufferlist>> omap_get(const std::string& oid,
                                                     const std::set<std::string>& keys);
  Result<std::optional<std::string>> omap_get1(const std::string& oid, const std::string& key);
  Status omap_page(const std::string& oid, const std::string& after, const std::string& prefix,
                   std::uint32_t max, std::map<std::string, bufferlist>& out, bool& more);
  Result<std::vector<std::pair<std::string, std::string>>> omap_all(const std::string& oid,
                                                                    const std::string& prefix);

  Result<BucketRec> bucket(std::string_view name);

  Status delete_stripes(const BlobId& blob, std::uint64_t count);
  std::uint64_t stripes_of(std::uint64_t size) const { return (size + stripe - 1) / stripe; }
  Status delete_unknown_blob(const BlobId& blob);
};

std::map<std::string, std::pair<bufferlist, int>> cmp_eq(const std::string& key,
                                                         const std::optional<std::string>& v);
// Adds the assertion that the shard's bucket instance is live (not fenced by a DeleteBucket).
void assert_live(std::map<std::string, std::pair<bufferlist, int>>& asserts);

// --- writer (rados_io.cc) ---

class RadosWriter : public BlobWriter {
 public:
  RadosWriter(std::shared_ptr<Conn> c, BucketRec b, std::string intent_oid);
  ~RadosWriter() override;

  Status append(std::span<const std::byte> data) override;
  std::uint64_t size() const override { return size_; }

  Status finish();
  bool can_inline(std::uint64_t inline_max) const { return flushed_ == 0 && size_ <= inline_max; }
  std::string take_inline() { return pending_.to_str(); }
  const BlobId& blob() const { return blob_; }
  const BucketRec& bucket() const { return bucket_; }
  bool has_intent() const { return intent_oid_.has_value(); }
  void set_committed() { committed_ = true; }

  Status move_intent(const std::string& oid);

 private:
  Status flush_pending();

  Status issue(bufferlist bl);
  Status wait_one();
  Status wait_all();

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

// --- reader (rados_io.cc) ---

// Sequential reads overlap: when a pread continues where the previous one ended, the reads for
// the next range of the same length are issued before this one's data is copied out, so the
// next RADOS round trip runs while the caller sends this chunk to the client.
class RadosReader : public ObjectReader {
 public:
  RadosReader(std::shared_ptr<Conn> c, ObjectVal v);
  ~RadosReader() override { discard(ahead_); }
  const ObjectMeta& meta() const override { return v_.rec.meta; }

  Result<std::size_t> pread(std::span<std::byte> dst, std::uint64_t offset) override;

  Result<std::vector<Extent>> extents(std::uint64_t, std::uint64_t) override;

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

  Batch issue(std::uint64_t off, std::uint64_t len);

  Status collect(Batch& b, char* dst);

  static void discard(Batch& b);

  std::shared_ptr<Conn> c_;
  ObjectVal v_;
  std::vector<std::uint64_t> starts_;
  Batch ahead_;
  std::uint64_t last_end_ = UINT64_MAX;
};

}  // namespace objdirect::storage::rados_impl
