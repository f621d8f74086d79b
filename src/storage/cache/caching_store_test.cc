// CachingStore in front of a real LocalStore, through a thin wrapper that counts the calls the
// cache makes to its inner store (and can slow down data reads, to make misses overlap).
#include "storage/cache/caching_store.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "storage/local/local_store.hpp"
#include "storage/local/local_store_test_util.hpp"

namespace objdirect::storage::cache {
namespace {

namespace fs = std::filesystem;
using storage::testing::bytes_of;
using storage::testing::put;
using storage::testing::read_all;

constexpr std::uint64_t kBlock = cache_limits::block_bytes_min;  // 64 KiB
constexpr const char* kBucket = "bkt";

struct Counts {
  std::atomic<int> head{0}, open{0}, revalidate{0}, pread{0}, other{0};
  // The SSE-C calls (sse_*: the inner store's *_sse calls with headers) and whether the inner
  // store says it passes SSE-C through.
  std::atomic<int> sse_open{0}, sse_head{0}, sse_write{0};
  std::atomic<bool> passes_sse_c{false};
  // Objects under this key read as SSE-C (their metadata names the algorithm), as an upstream
  // that serves them without a key would answer.
  std::string sse_key;
  std::atomic<int> pread_delay_ms{0};
  // Preads fail as the gateway's reader does once the object changed upstream (If-Match: 412).
  std::atomic<bool> pread_precondition_failed{false};
  int total() const { return head + open + revalidate + pread + other; }
};

class CountingReader : public ObjectReader {
 public:
  CountingReader(std::unique_ptr<ObjectReader> r, std::shared_ptr<Counts> c)
      : r_(std::move(r)), c_(std::move(c)), meta_(r_->meta()) {
    if (!c_->sse_key.empty() && meta_.key == c_->sse_key) meta_.sse.algorithm = "AES256";
  }
  const ObjectMeta& meta() const override { return meta_; }
  Result<std::size_t> pread(std::span<std::byte> dst, std::uint64_t offset) override {
    c_->pread++;
    if (int ms = c_->pread_delay_ms; ms > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    if (c_->pread_precondition_failed)
      return Status(Errc::precondition_failed, "the object changed upstream after it was opened");
    return r_->pread(dst, offset);
  }
  Result<std::vector<Extent>> extents(std::uint64_t o, std::uint64_t l) override {
    return r_->extents(o, l);
  }

 private:
  std::unique_ptr<ObjectReader> r_;
  std::shared_ptr<Counts> c_;
  ObjectMeta meta_;
};

// Counts calls per method and forwards them to a shared inner store (which tests may also write
// directly, behind the cache's back).
class CountingStore : public ObjectStore {
 public:
  CountingStore(std::shared_ptr<ObjectStore> s, std::shared_ptr<Counts> c)
      : s_(std::move(s)), c_(std::move(c)) {}
  Status create_bucket(const BucketInfo& i) override { return c_->other++, s_->create_bucket(i); }
  Status delete_bucket(std::string_view b) override { return c_->other++, s_->delete_bucket(b); }
  Result<BucketInfo> head_bucket(std::string_view b) override {
    return c_->other++, s_->head_bucket(b);
  }
  Result<std::vector<BucketInfo>> list_buckets() override {
    return c_->other++, s_->list_buckets();
  }
  Result<std::unique_ptr<BlobWriter>> begin_write(std::string_view b) override {
    return c_->other++, s_->begin_write(b);
  }
  Result<ObjectMeta> commit_object(std::string_view b, ObjectMeta m, std::unique_ptr<BlobWriter> d,
                                   const WriteCondition& cond) override {
    return c_->other++, s_->commit_object(b, std::move(m), std::move(d), cond);
  }
  Result<ObjectMeta> replace_meta(std::string_view b, ObjectMeta m, std::string_view e) override {
    return c_->other++, s_->replace_meta(b, std::move(m), e);
  }
  Result<ObjectMeta> head_object(std::string_view b, std::string_view k) override {
    c_->head++;
    auto m = s_->head_object(b, k);
    if (m.ok() && !c_->sse_key.empty() && k == c_->sse_key) m->sse.algorithm = "AES256";
    return m;
  }
  Result<std::unique_ptr<ObjectReader>> open_object(std::string_view b,
                                                    std::string_view k) override {
    c_->open++;
    auto r = s_->open_object(b, k);
    if (!r.ok()) return r.status();
    return std::unique_ptr<ObjectReader>(new CountingReader(std::move(*r), c_));
  }
  Result<std::optional<ObjectMeta>> revalidate(std::string_view b, std::string_view k,
                                               std::string_view e) override {
    return c_->revalidate++, s_->revalidate(b, k, e);
  }
  Status delete_object(std::string_view b, std::string_view k) override {
    return c_->other++, s_->delete_object(b, k);
  }
  Result<ListResult> list_objects(std::string_view b, const ListQuery& q) override {
    return c_->other++, s_->list_objects(b, q);
  }
  Result<std::string> create_upload(std::string_view b, const UploadInfo& i) override {
    return c_->other++, s_->create_upload(b, i);
  }
  Result<UploadInfo> get_upload(std::string_view b, std::string_view k,
                                std::string_view u) override {
    return c_->other++, s_->get_upload(b, k, u);
  }
  Result<PartInfo> commit_part(std::string_view b, std::string_view k, std::string_view u,
                               PartInfo i, std::unique_ptr<BlobWriter> d) override {
    return c_->other++, s_->commit_part(b, k, u, std::move(i), std::move(d));
  }
  Result<std::vector<PartInfo>> list_parts(std::string_view b, std::string_view k,
                                           std::string_view u, std::uint32_t m,
                                           std::uint32_t n) override {
    return c_->other++, s_->list_parts(b, k, u, m, n);
  }
  Result<ObjectMeta> complete_upload(std::string_view b, std::string_view u, ObjectMeta m,
                                     const std::vector<CompletePartRef>& p,
                                     const WriteCondition& cond) override {
    return c_->other++, s_->complete_upload(b, u, std::move(m), p, cond);
  }
  Status abort_upload(std::string_view b, std::string_view k, std::string_view u) override {
    return c_->other++, s_->abort_upload(b, k, u);
  }
  Result<ListUploadsResult> list_uploads(std::string_view b, const ListUploadsQuery& q) override {
    return c_->other++, s_->list_uploads(b, q);
  }
  // A stand-in for the gateway: says it passes SSE-C through when told, counts the calls with
  // headers and serves them from the shared store (which does no key checks of its own).
  bool passes_sse_c() const override { return c_->passes_sse_c; }
  Result<std::unique_ptr<ObjectReader>> open_object_sse(std::string_view b, std::string_view k,
                                                        std::string_view v,
                                                        const SseCKeyHeaders& h) override {
    EXPECT_TRUE(h.present());
    EXPECT_TRUE(v.empty());
    c_->sse_open++;
    auto r = s_->open_object(b, k);
    if (!r.ok()) return r.status();
    return std::unique_ptr<ObjectReader>(new CountingReader(std::move(*r), c_));
  }
  Result<ObjectMeta> head_object_sse(std::string_view b, std::string_view k, std::string_view v,
                                     const SseCKeyHeaders& h) override {
    EXPECT_TRUE(h.present());
    EXPECT_TRUE(v.empty());
    return c_->sse_head++, s_->head_object(b, k);
  }
  Result<ObjectMeta> commit_object_sse(std::string_view b, ObjectMeta m,
                                       std::unique_ptr<BlobWriter> d, const WriteCondition& cond,
                                       const SseCKeyHeaders& h) override {
    EXPECT_TRUE(h.present());
    m.sse = SseCustomer();  // the stand-in keeps no SSE-C parameters (a gateway's upstream does)
    return c_->sse_write++, s_->commit_object(b, std::move(m), std::move(d), cond);
  }

 private:
  std::shared_ptr<ObjectStore> s_;
  std::shared_ptr<Counts> c_;
};

std::string pattern(int version, std::size_t n) {
  std::string s(n, '\0');
  std::uint32_t x = 2654435761u * std::uint32_t(version + 1);
  for (std::size_t i = 0; i < n; ++i) {
    x = x * 1103515245u + 12345u;
    s[i] = static_cast<char>(x >> 24);
  }
  return s;
}

Result<std::string> read_range(ObjectReader& r, std::uint64_t off, std::size_t n) {
  std::string out(n, '\0');
  auto got = r.pread(std::as_writable_bytes(std::span<char>(out.data(), n)), off);
  if (!got.ok()) return got.status();
  out.resize(*got);
  return out;
}

std::uint64_t dir_bytes(const std::string& dir) {
  std::uint64_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().filename() != "LOCK") n += e.file_size();
  }
  return n;
}

class CachingStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/objdirect-cache-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    LocalStoreOptions lo;
    lo.data_dir = root_ + "/data";
    lo.fsync = false;
    lo.lmdb_map_size_bytes = 1ull << 30;
    auto l = open_local_store(lo);
    ASSERT_TRUE(l.ok()) << l.status().to_string();
    local_ = std::move(*l);
    BucketInfo b;
    b.name = kBucket;
    b.owner = "tester";
    ASSERT_TRUE(local_->create_bucket(b).ok());
    opt_.dir = root_ + "/cache";
    opt_.block_bytes = kBlock;
    opt_.bytes_max = 64 * kBlock;
    opt_.ttl_s = 60;
  }
  void TearDown() override {
    cache_.reset();
    local_.reset();
    fs::remove_all(root_);
  }
  void open_cache() {
    cache_.reset();
    auto c = CachingStore::open(std::make_unique<CountingStore>(local_, counts_), opt_);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    cache_ = std::move(*c);
  }
  // Opens key through the cache and reads it all in chunks of `chunk` bytes.
  std::string get(const std::string& key, std::size_t chunk = 50000) {
    auto r = cache_->open_object(kBucket, key);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    if (!r.ok()) return "";
    auto all = read_all(**r, chunk);
    EXPECT_TRUE(all.ok()) << all.status().to_string();
    return all.ok() ? *all : "";
  }
  std::string block_file(const std::string& key, std::uint64_t index) {
    auto h = local_->head_object(kBucket, key);
    EXPECT_TRUE(h.ok());
    return cache_->block_path(kBucket, key, h->etag, h->size, index);
  }

  std::string root_;
  std::shared_ptr<ObjectStore> local_;
  std::shared_ptr<Counts> counts_ = std::make_shared<Counts>();
  CacheOptions opt_;
  std::unique_ptr<CachingStore> cache_;
};

TEST_F(CachingStoreTest, SecondReadOfSameRangeMakesNoInnerDataRead) {
  open_cache();
  const std::string v = pattern(1, 3 * kBlock + 1000);
  ASSERT_TRUE(put(*cache_, kBucket, "k", v).ok());
  auto r1 = cache_->open_object(kBucket, "k");
  ASSERT_TRUE(r1.ok());
  auto a = read_range(**r1, kBlock + 5, 70000);  // spans blocks 1 and 2
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, v.substr(kBlock + 5, 70000));
  const int preads = counts_->pread;
  EXPECT_GT(preads, 0);
  EXPECT_EQ(cache_->stats().misses, 2u);
  auto r2 = cache_->open_object(kBucket, "k");
  ASSERT_TRUE(r2.ok());
  auto b = read_range(**r2, kBlock + 5, 70000);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, *a);
  EXPECT_EQ(counts_->pread, preads) << "the second read of the range went to the inner store";
  EXPECT_EQ(cache_->stats().hits, 2u);
  EXPECT_EQ(cache_->stats().bytes_served, 70000u);
  // The last, partial block.
  auto c = read_range(**r2, 3 * kBlock + 900, 5000);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, v.substr(3 * kBlock + 900, 100));
  auto eof = read_range(**r2, v.size(), 10);
  ASSERT_TRUE(eof.ok());
  EXPECT_EQ(eof->size(), 0u);
}

TEST_F(CachingStoreTest, WithinTtlACachedObjectCostsNoInnerCallAtAll) {
  open_cache();
  const std::string v = pattern(2, 2 * kBlock + 7);
  ASSERT_TRUE(put(*cache_, kBucket, "k", v).ok());
  EXPECT_EQ(get("k"), v);
  const int before = counts_->total();
  EXPECT_EQ(get("k"), v);
  auto h = cache_->head_object(kBucket, "k");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->size, v.size());
  EXPECT_EQ(counts_->total(), before) << "no head, open or read within the TTL";
  ASSERT_TRUE(cache_->head_bucket(kBucket).ok());
  ASSERT_TRUE(cache_->head_bucket(kBucket).ok());
  EXPECT_EQ(counts_->total(), before + 1) << "the second bucket head is answered from memory";
  EXPECT_GE(cache_->stats().meta_hits, 2u);
}

TEST_F(CachingStoreTest, TtlZeroRevalidatesEveryOpenButFetchesNoDataWhenUnchanged) {
  opt_.ttl_s = 0;
  open_cache();
  const std::string v = pattern(3, 2 * kBlock + 99);
  ASSERT_TRUE(put(*cache_, kBucket, "k", v).ok());
  EXPECT_EQ(get("k"), v);
  const int opens = counts_->open, preads = counts_->pread, heads = counts_->head;
  const int revals = counts_->revalidate;
  for (int i = 0; i < 3; ++i) EXPECT_EQ(get("k"), v);
  EXPECT_EQ(counts_->revalidate, revals + 3);
  EXPECT_EQ(counts_->open, opens);
  EXPECT_EQ(counts_->pread, preads);
  EXPECT_EQ(counts_->head, heads);
  EXPECT_EQ(cache_->stats().revalidations_unchanged, 3u);
}

// A fill whose inner reader answers 412 (the gateway's If-Match pin: the object changed upstream
// after it was opened) fails the read, and the cache forgets the key's metadata: the next
// head/open asks the inner store instead of trusting the old ETag for the rest of the TTL.
TEST_F(CachingStoreTest, APreconditionFailedFillForgetsTheMetadata) {
  open_cache();  // ttl_s 60
  const std::string v = pattern(5, 3 * kBlock);
  ASSERT_TRUE(put(*cache_, kBucket, "k", v).ok());
  ASSERT_TRUE(cache_->head_object(kBucket, "k").ok());
  const int heads = counts_->head;
  ASSERT_TRUE(cache_->head_object(kBucket, "k").ok());
  ASSERT_EQ(counts_->head, heads) << "within the TTL the metadata comes from memory";
  auto r = cache_->open_object(kBucket, "k");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  counts_->pread_precondition_failed = true;
  std::string buf(kBlock, '\0');
  auto n = (*r)->pread(std::as_writable_bytes(std::span<char>(buf)), 0);
  EXPECT_EQ(n.code(), Errc::precondition_failed) << n.status().to_string();
  counts_->pread_precondition_failed = false;
  ASSERT_TRUE(cache_->head_object(kBucket, "k").ok());
  EXPECT_EQ(counts_->head, heads + 1) << "the 412 did not make the cache forget the metadata";
  EXPECT_EQ(get("k"), v);
}

// With ttl_s 0 the object is revalidated on every open, but the bucket check every S3 request
// makes (head_bucket) is trusted for bucket_ttl_s: a GET costs one revalidation, nothing else.
TEST_F(CachingStoreTest, TtlZeroStillTrustsBucketAnswersForBucketTtl) {
  opt_.ttl_s = 0;
  opt_.bucket_ttl_s = 60;
  open_cache();
  ASSERT_TRUE(cache_->head_bucket(kBucket).ok());
  const int before = counts_->total();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(cache_->head_bucket(kBucket).ok());
  EXPECT_EQ(counts_->total(), before) << "bucket answers within bucket_ttl_s come from memory";
  // A bucket deleted through the cache is forgotten at once.
  ASSERT_TRUE(cache_->delete_bucket(kBucket).ok());
  EXPECT_EQ(cache_->head_bucket(kBucket).code(), Errc::no_such_bucket);
  // bucket_ttl_s 0 (and ttl_s 0): every bucket check goes to the inner store.
  cache_.reset();
  opt_.bucket_ttl_s = 0;
  open_cache();
  BucketInfo b;
  b.name = kBucket;
  ASSERT_TRUE(cache_->create_bucket(b).ok());
  const int before2 = counts_->total();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(cache_->head_bucket(kBucket).ok());
  EXPECT_EQ(counts_->total(), before2 + 3);
}

TEST_F(CachingStoreTest, OverwriteBehindTheCacheIsSeenAfterTheTtlAndNeverMixed) {
  opt_.ttl_s = 1;
  open_cache();
  const std::string v1 = pattern(10, 3 * kBlock + 10), v2 = pattern(20, 2 * kBlock + 333);
  ASSERT_TRUE(put(*local_, kBucket, "k", v1).ok());
  EXPECT_EQ(get("k"), v1);
  ASSERT_TRUE(put(*local_, kBucket, "k", v2).ok());  // behind the cache's back
  EXPECT_EQ(get("k"), v1) << "within the TTL the cached version is served whole";
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_EQ(get("k"), v2) << "after the TTL the revalidation finds the new ETag";
  EXPECT_EQ(cache_->stats().revalidations_changed, 1u);

  // Partly cached: the open finds uncached blocks, opens the inner reader, sees the new ETag and
  // serves the new version only (never the old version's cached block 0).
  ASSERT_TRUE(put(*local_, kBucket, "p", v1).ok());
  {
    auto r = cache_->open_object(kBucket, "p");
    ASSERT_TRUE(r.ok());
    ASSERT_TRUE(read_range(**r, 0, 100).ok());
  }
  ASSERT_TRUE(put(*local_, kBucket, "p", v2).ok());
  EXPECT_EQ(get("p"), v2);

  // Fully cached, then a block vanishes (evicted) after an overwrite behind the cache: the lazy
  // inner open finds another ETag and the read fails instead of mixing versions.
  ASSERT_TRUE(put(*local_, kBucket, "f", v1).ok());
  EXPECT_EQ(get("f"), v1);
  const std::string block1 = block_file("f", 1);
  ASSERT_TRUE(put(*local_, kBucket, "f", v2).ok());
  auto r = cache_->open_object(kBucket, "f");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)->meta().size, v1.size());
  ASSERT_TRUE(fs::remove(block1));
  auto b0 = read_range(**r, 0, 1000);
  ASSERT_TRUE(b0.ok());
  EXPECT_EQ(*b0, v1.substr(0, 1000));
  auto b1 = read_range(**r, kBlock, 1000);
  ASSERT_FALSE(b1.ok());
  EXPECT_EQ(b1.code(), Errc::precondition_failed);
  EXPECT_EQ(get("f"), v2) << "the failed read invalidated the key";
}

TEST_F(CachingStoreTest, ConcurrentMissesOfOneBlockMakeOneInnerRead) {
  open_cache();
  const std::string v = pattern(4, 2 * kBlock);
  ASSERT_TRUE(put(*local_, kBucket, "k", v).ok());
  counts_->pread_delay_ms = 300;  // the first filler holds the block long enough to overlap
  constexpr int kThreads = 8;
  std::vector<std::unique_ptr<ObjectReader>> readers;
  for (int i = 0; i < kThreads; ++i) {
    auto r = cache_->open_object(kBucket, "k");
    ASSERT_TRUE(r.ok());
    readers.push_back(std::move(*r));
  }
  std::barrier sync(kThreads);
  std::atomic<int> bad{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < kThreads; ++i) {
    ts.emplace_back([&, i] {
      sync.arrive_and_wait();
      auto got = read_range(*readers[i], 1000 + std::uint64_t(i), 4000);
      if (!got.ok() || *got != v.substr(1000 + std::size_t(i), 4000)) bad++;
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(counts_->pread, 1) << "one inner read fills block 0 for every thread";
  const auto s = cache_->stats();
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.coalesced_waits + s.hits, std::uint64_t(kThreads - 1));
  EXPECT_GE(s.coalesced_waits, 1u);
}

TEST_F(CachingStoreTest, LruEvictionKeepsTheDirectoryUnderBytesMax) {
  // Room for three one-block objects (a block file is 64 KiB plus a header of ~60 bytes).
  opt_.bytes_max = 3 * kBlock + 3 * 200;
  open_cache();
  std::vector<std::string> v;
  for (int i = 0; i < 5; ++i) {
    v.push_back(pattern(100 + i, kBlock));
    ASSERT_TRUE(put(*local_, kBucket, "o" + std::to_string(i), v.back()).ok());
  }
  for (int i : {0, 1, 2}) EXPECT_EQ(get("o" + std::to_string(i)), v[i]);
  EXPECT_EQ(cache_->stats().blocks, 3u);
  EXPECT_EQ(get("o0"), v[0]);  // o0 becomes the most recently used; o1 the least
  EXPECT_EQ(get("o3"), v[3]);
  EXPECT_EQ(cache_->stats().evictions, 1u);
  EXPECT_FALSE(fs::exists(block_file("o1", 0))) << "the least recently used block goes first";
  for (const char* k : {"o0", "o2", "o3"}) EXPECT_TRUE(fs::exists(block_file(k, 0))) << k;
  EXPECT_LE(dir_bytes(opt_.dir), opt_.bytes_max);

  // An object larger than the whole cache still reads correctly, in one pread or in pieces.
  const std::string big = pattern(7, 5 * kBlock + 17);
  ASSERT_TRUE(put(*local_, kBucket, "big", big).ok());
  EXPECT_EQ(get("big", big.size()), big);
  EXPECT_LE(dir_bytes(opt_.dir), opt_.bytes_max);
  EXPECT_EQ(get("big", 12345), big);
  EXPECT_LE(dir_bytes(opt_.dir), opt_.bytes_max);
  EXPECT_EQ(cache_->stats().bytes, dir_bytes(opt_.dir));
}

TEST_F(CachingStoreTest, AReaderOfAFullyCachedObjectIsASnapshot) {
  // Room for two blocks: the pinned version's.
  opt_.bytes_max = 2 * kBlock + 2 * 200;
  open_cache();
  const std::string v1 = pattern(30, kBlock + 50), v2 = pattern(31, kBlock + 60);
  ASSERT_TRUE(put(*cache_, kBucket, "k", v1).ok());
  EXPECT_EQ(get("k"), v1);
  auto r = cache_->open_object(kBucket, "k");  // every block cached: no inner reader, pinned
  ASSERT_TRUE(r.ok());
  const int opens = counts_->open;
  ASSERT_TRUE(put(*cache_, kBucket, "k", v2).ok());  // invalidates the key...
  const std::string other = pattern(32, kBlock);
  ASSERT_TRUE(put(*local_, kBucket, "other", other).ok());
  EXPECT_EQ(get("other"), other);  // ...and eviction pressure: neither deletes pinned blocks
  auto all = read_all(**r);
  ASSERT_TRUE(all.ok()) << all.status().to_string();
  EXPECT_EQ(*all, v1);
  EXPECT_EQ(counts_->open, opens + 1) << "only the open of 'other'";
  EXPECT_LE(dir_bytes(opt_.dir), opt_.bytes_max);
  r->reset();
  EXPECT_EQ(get("k"), v2);
  EXPECT_LE(dir_bytes(opt_.dir), opt_.bytes_max);
}

TEST_F(CachingStoreTest, BytesMaxZeroPassesThrough) {
  opt_.bytes_max = 0;
  open_cache();
  const std::string v = pattern(5, 2 * kBlock + 5);
  ASSERT_TRUE(put(*cache_, kBucket, "k", v).ok());
  EXPECT_EQ(get("k"), v);
  EXPECT_EQ(get("k"), v);
  EXPECT_EQ(dir_bytes(opt_.dir), 0u);
  const auto s = cache_->stats();
  EXPECT_EQ(s.bytes_bypassed, 2 * v.size());
  EXPECT_EQ(s.hits, 0u);
}

TEST_F(CachingStoreTest, EtagOverEtagBytesMaxPassesThrough) {
  open_cache();
  const std::string v = pattern(6, kBlock + 1);
  ASSERT_TRUE(
      put(*cache_, kBucket, "k", v, {}, std::string(cache_limits::etag_bytes_max + 1, 'e')).ok());
  EXPECT_EQ(get("k"), v);
  EXPECT_EQ(cache_->stats().blocks, 0u);
  EXPECT_EQ(cache_->stats().bytes_bypassed, v.size());
  ASSERT_TRUE(
      put(*cache_, kBucket, "k", v, {}, std::string(cache_limits::etag_bytes_max, 'e')).ok());
  EXPECT_EQ(get("k"), v);
  EXPECT_EQ(cache_->stats().blocks, 2u);
}

TEST_F(CachingStoreTest, CorruptOrTornBlockFilesAreMisses) {
  open_cache();
  const std::string v = pattern(8, 3 * kBlock);
  ASSERT_TRUE(put(*local_, kBucket, "k", v).ok());
  EXPECT_EQ(get("k"), v);
  const std::string b0 = block_file("k", 0), b1 = block_file("k", 1), b2 = block_file("k", 2);
  // While running: a flipped header byte is caught by the header CRC on the next read.
  {
    std::fstream f(b0, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(10);
    f.put('\x7f');
  }
  const int preads = counts_->pread;
  EXPECT_EQ(get("k"), v);
  EXPECT_GT(counts_->pread, preads) << "the corrupt block was filled again";
  EXPECT_EQ(cache_->stats().invalid_blocks, 1u);
  // Across a restart: a flipped data byte (the data CRC is checked on the first read of a block
  // found on disk), a torn file (truncated), a garbage file and a leftover temp file.
  cache_.reset();
  {
    std::fstream f(b1, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-5, std::ios::end);
    const char c = static_cast<char>(f.peek());
    f.put(static_cast<char>(c ^ 1));
  }
  fs::resize_file(b2, fs::file_size(b2) - 100);
  { std::ofstream(opt_.dir + "/blocks/0123456789abcdef0123456789abcdef") << "not a block"; }
  { std::ofstream(opt_.dir + "/tmp/x.tmp") << "half a block"; }
  open_cache();
  EXPECT_EQ(cache_->stats().invalid_blocks, 2u) << "torn and garbage files dropped by the scan";
  EXPECT_FALSE(fs::exists(opt_.dir + "/tmp/x.tmp"));
  EXPECT_EQ(get("k", kBlock), v);
  EXPECT_EQ(cache_->stats().invalid_blocks, 3u) << "the data CRC caught the flipped byte";
  EXPECT_EQ(cache_->stats().hits, 1u);  // block 0, refilled before the restart
  EXPECT_EQ(get("k"), v);
}

TEST_F(CachingStoreTest, RestartReusesTheBlocksOnDisk) {
  open_cache();
  const std::string v = pattern(9, 4 * kBlock + 3);
  ASSERT_TRUE(put(*local_, kBucket, "k", v).ok());
  EXPECT_EQ(get("k"), v);
  const auto before = cache_->stats();
  EXPECT_EQ(before.blocks, 5u);
  cache_.reset();
  open_cache();
  EXPECT_EQ(cache_->stats().blocks, 5u);
  EXPECT_EQ(cache_->stats().bytes, before.bytes);
  const int preads = counts_->pread;
  EXPECT_EQ(get("k", kBlock), v);
  EXPECT_EQ(counts_->pread, preads) << "every block came from the restarted cache";
  EXPECT_EQ(cache_->stats().hits, 5u);
  // A smaller bytes_max at restart evicts down to it.
  cache_.reset();
  opt_.bytes_max = 2 * kBlock + 400;
  open_cache();
  EXPECT_LT(cache_->stats().blocks, 5u);
  EXPECT_GT(cache_->stats().evictions, 0u);
  EXPECT_LE(dir_bytes(opt_.dir), opt_.bytes_max);
  // A different block size makes the old blocks unreachable: the scan drops them.
  cache_.reset();
  opt_.block_bytes = 2 * kBlock;
  open_cache();
  EXPECT_EQ(cache_->stats().blocks, 0u);
  EXPECT_EQ(get("k"), v);
}

TEST_F(CachingStoreTest, WritesThroughTheCacheInvalidateAtOnce) {
  open_cache();
  const std::string v1 = pattern(11, kBlock + 1), v2 = pattern(12, kBlock + 2);
  ASSERT_TRUE(put(*cache_, kBucket, "k", v1).ok());
  EXPECT_EQ(get("k"), v1);
  ASSERT_TRUE(put(*cache_, kBucket, "k", v2).ok());
  EXPECT_EQ(get("k"), v2) << "within the TTL, but written through the cache";
  ObjectMeta m;
  m.key = "k";
  m.content_type = "application/x-new";
  ASSERT_TRUE(cache_->replace_meta(kBucket, m, local_->head_object(kBucket, "k")->etag).ok());
  EXPECT_EQ(cache_->head_object(kBucket, "k")->content_type, "application/x-new");
  ASSERT_TRUE(cache_->delete_object(kBucket, "k").ok());
  EXPECT_EQ(cache_->head_object(kBucket, "k").code(), Errc::no_such_key);
  EXPECT_EQ(cache_->open_object(kBucket, "k").code(), Errc::no_such_key);
  EXPECT_EQ(cache_->stats().blocks, 0u);
  // delete_bucket drops the bucket's keys.
  ASSERT_TRUE(put(*cache_, kBucket, "h", v1).ok());
  EXPECT_EQ(get("h"), v1);
  EXPECT_EQ(cache_->delete_bucket(kBucket).code(), Errc::bucket_not_empty);
  ASSERT_TRUE(cache_->delete_object(kBucket, "h").ok());
  ASSERT_TRUE(cache_->delete_bucket(kBucket).ok());
  EXPECT_EQ(cache_->stats().blocks, 0u);
}

TEST_F(CachingStoreTest, DeletedBehindTheCacheIsSeenAtRevalidation) {
  opt_.ttl_s = 0;
  open_cache();
  const std::string v = pattern(14, kBlock + 1);
  ASSERT_TRUE(put(*cache_, kBucket, "g", v).ok());
  EXPECT_EQ(get("g"), v);
  EXPECT_EQ(cache_->stats().blocks, 2u);
  ASSERT_TRUE(local_->delete_object(kBucket, "g").ok());
  EXPECT_EQ(cache_->open_object(kBucket, "g").code(), Errc::no_such_key);
  EXPECT_EQ(cache_->stats().revalidations_changed, 1u);
  EXPECT_EQ(cache_->stats().blocks, 0u) << "the gone object's blocks are dropped";
}

TEST_F(CachingStoreTest, MetaEntriesMaxBoundsTheMetadataCache) {
  opt_.meta_entries_max = 2;
  open_cache();
  for (const char* k : {"a", "b", "c"}) ASSERT_TRUE(put(*local_, kBucket, k, k).ok());
  for (const char* k : {"a", "b", "c"}) ASSERT_TRUE(cache_->head_object(kBucket, k).ok());
  const int heads = counts_->head;
  ASSERT_TRUE(cache_->head_object(kBucket, "c").ok());
  EXPECT_EQ(counts_->head, heads) << "c is cached";
  ASSERT_TRUE(cache_->head_object(kBucket, "a").ok());
  EXPECT_EQ(counts_->head, heads + 1) << "a was evicted by the third entry";
}

TEST_F(CachingStoreTest, BadOptionsAndASecondOwnerAreRefused) {
  auto try_open = [&](CacheOptions o) {
    return CachingStore::open(std::make_unique<CountingStore>(local_, counts_), o).code();
  };
  CacheOptions o = opt_;
  o.block_bytes = cache_limits::block_bytes_min - 1;
  EXPECT_EQ(try_open(o), Errc::invalid_argument);
  o.block_bytes = cache_limits::block_bytes_max + 1;
  EXPECT_EQ(try_open(o), Errc::invalid_argument);
  o.block_bytes = cache_limits::block_bytes_max;
  EXPECT_EQ(try_open(o), Errc::ok);
  o = opt_;
  o.ttl_s = cache_limits::ttl_s_max + 1;
  EXPECT_EQ(try_open(o), Errc::invalid_argument);
  o.ttl_s = cache_limits::ttl_s_max;
  EXPECT_EQ(try_open(o), Errc::ok);
  o = opt_;
  o.bucket_ttl_s = cache_limits::ttl_s_max + 1;
  EXPECT_EQ(try_open(o), Errc::invalid_argument);
  o.bucket_ttl_s = cache_limits::ttl_s_max;
  EXPECT_EQ(try_open(o), Errc::ok);
  o = opt_;
  o.meta_entries_max = 0;
  EXPECT_EQ(try_open(o), Errc::invalid_argument);
  o = opt_;
  o.dir = "";
  EXPECT_EQ(try_open(o), Errc::invalid_argument);
  open_cache();
  EXPECT_EQ(try_open(opt_), Errc::unavailable);
}

TEST_F(CachingStoreTest, ListingAndMultipartPassThrough) {
  open_cache();
  ASSERT_TRUE(put(*cache_, kBucket, "x/1", "one").ok());
  auto l = cache_->list_objects(kBucket, {});
  ASSERT_TRUE(l.ok());
  ASSERT_EQ(l->objects.size(), 1u);
  UploadInfo u;
  u.key = "mp";
  auto id = cache_->create_upload(kBucket, u);
  ASSERT_TRUE(id.ok());
  auto w = cache_->begin_write_for(kBucket, "mp");
  ASSERT_TRUE(w.ok());
  const std::string part = pattern(13, kBlock + 9);
  ASSERT_TRUE((*w)->append(bytes_of(part)).ok());
  PartInfo p;
  p.part_number = 1;
  p.size = part.size();
  p.etag = "p1";
  ASSERT_TRUE(cache_->commit_part(kBucket, "mp", *id, p, std::move(*w)).ok());
  ASSERT_EQ(cache_->list_parts(kBucket, "mp", *id, 0, 100)->size(), 1u);
  ObjectMeta m;
  m.key = "mp";
  m.size = part.size();
  m.etag = "mp-1";
  m.parts = {p};
  ASSERT_TRUE(cache_->complete_upload(kBucket, *id, m, {{1, "p1"}}, {}).ok());
  EXPECT_EQ(get("mp"), part);
}

// SSE-C (docs/sse-c.md): in front of a store that passes SSE-C through, calls with the headers
// go to the inner store's *_sse calls every time and leave nothing cached; a write drops what the
// cache held for the key; an object whose metadata names SSE-C is never cached, so a read
// without the key always reaches the inner store (which refuses it where it checks keys).
TEST_F(CachingStoreTest, SseCHeadersBypassTheCacheInBothDirections) {
  open_cache();
  EXPECT_FALSE(cache_->passes_sse_c());
  counts_->passes_sse_c = true;
  EXPECT_TRUE(cache_->passes_sse_c());
  const SseCKeyHeaders h("AES256", "a2V5LWJ5dGVzLWJhc2U2NA==", "bWQ1LWJhc2U2NA==");
  const std::string v1 = pattern(41, 2 * kBlock + 3), v2 = pattern(42, kBlock + 9);
  ASSERT_TRUE(put(*cache_, kBucket, "k", v1).ok());
  EXPECT_EQ(get("k"), v1);
  EXPECT_EQ(get("k"), v1);  // a hit
  const auto hits = cache_->stats().hits;
  EXPECT_GT(hits, 0u);
  // Written with SSE-C headers through the cache: the cached v1 is dropped.
  auto w = cache_->begin_write(kBucket);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->append(std::as_bytes(std::span(v2.data(), v2.size()))).ok());
  ObjectMeta m;
  m.key = "k";
  m.size = v2.size();
  m.etag = "0123456789abcdef0123456789abcdef";
  m.sse.algorithm = "AES256";  // as the S3 layer fills it when passing SSE-C through
  m.sse.key_md5 = h.key_md5;
  ASSERT_TRUE(cache_->commit_object_sse(kBucket, m, std::move(*w), {}, h).ok());
  EXPECT_EQ(counts_->sse_write, 1);
  // Reads with the headers: the inner store each time, nothing cached.
  const auto blocks = cache_->stats().blocks;
  for (int i = 0; i < 2; ++i) {
    const int preads = counts_->pread;
    auto r = cache_->open_object_sse(kBucket, "k", "", h);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    auto all = read_all(**r, 50000);
    ASSERT_TRUE(all.ok());
    EXPECT_EQ(*all, v2);
    EXPECT_GT(counts_->pread, preads);
    ASSERT_TRUE(cache_->head_object_sse(kBucket, "k", "", h).ok());
  }
  EXPECT_EQ(counts_->sse_open, 2);
  EXPECT_EQ(counts_->sse_head, 2);
  EXPECT_EQ(cache_->stats().hits, hits);
  EXPECT_LE(cache_->stats().blocks, blocks);
  // Without headers the calls are the plain ones.
  const SseCKeyHeaders none;
  const int opens = counts_->open;
  EXPECT_FALSE(none.present());
  ASSERT_TRUE(cache_->open_object_sse(kBucket, "k", "", none).ok());
  EXPECT_EQ(counts_->sse_open, 2);
  EXPECT_EQ(counts_->open, opens + 1);

  // An object whose metadata names SSE-C, read without headers: never cached, every open and
  // head asks the inner store.
  counts_->sse_key = "s";
  ASSERT_TRUE(put(*local_, kBucket, "s", v1).ok());
  for (int i = 0; i < 2; ++i) {
    const int o = counts_->open, hd = counts_->head;
    EXPECT_EQ(get("s"), v1);
    EXPECT_EQ(counts_->open, o + 1) << "an SSE-C object was served from the cache";
    ASSERT_TRUE(cache_->head_object(kBucket, "s").ok());
    EXPECT_EQ(counts_->head, hd + 1);
  }
  EXPECT_EQ(cache_->stats().hits, hits);
}

}  // namespace
}  // namespace objdirect::storage::cache
