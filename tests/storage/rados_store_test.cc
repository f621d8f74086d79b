// storage/rados beyond the conformance suite: option limits, the GC (grace period, lease,
// abandoned writers) and the intent rule, on a single-node Ceph cluster this process starts.
#include "storage/rados/rados_store.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <functional>
#include <rados/librados.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ceph_cluster.hpp"
#include "common/limits.hpp"
#include "storage/local/meta_codec.hpp"
#include "storage/rados/index_codec.hpp"
#include "storage/rados/index_codec_fuzz_body.hpp"

namespace objdirect::storage {
namespace {

// tag + n by appending: GCC 12 reports a false -Wrestrict for "k" + std::to_string(n) once
// inlined.
std::string numbered(const char* tag, std::uint64_t n) {
  std::string out(tag);
  out += std::to_string(n);
  return out;
}

std::span<const std::byte> bytes_of(std::string_view s) {
  return std::as_bytes(std::span<const char>(s.data(), s.size()));
}

TEST(RadosOptions, LimitsAreEnforced) {
  auto bad = [](auto mutate) {
    RadosStoreOptions o;
    o.conf_file = "/nonexistent/ceph.conf";  // validation comes before any connection
    mutate(o);
    return open_rados_store(o).code();
  };
  namespace rl = rados_limits;
  EXPECT_EQ(bad([](auto& o) { o.stripe_bytes = rl::stripe_bytes_max + 1; }),
            Errc::invalid_argument);
  EXPECT_EQ(bad([](auto& o) { o.stripe_bytes = rl::stripe_bytes_min - 1; }),
            Errc::invalid_argument);
  EXPECT_EQ(bad([](auto& o) { o.index_shards = 3; }), Errc::invalid_argument);
  EXPECT_EQ(bad([](auto& o) { o.index_shards = rl::index_shards_max * 2; }),
            Errc::invalid_argument);
  EXPECT_EQ(bad([](auto& o) { o.index_shards = 0; }), Errc::invalid_argument);
  EXPECT_EQ(bad([](auto& o) { o.inline_bytes = rl::inline_bytes_max + 1; }),
            Errc::invalid_argument);
  EXPECT_EQ(bad([](auto& o) { o.inflight_writes = rl::inflight_writes_max + 1; }),
            Errc::invalid_argument);
  EXPECT_EQ(bad([](auto& o) { o.inflight_writes = 0; }), Errc::invalid_argument);
  EXPECT_EQ(bad([](auto& o) { o.bucket_cache_entries = rl::bucket_cache_entries_max + 1; }),
            Errc::invalid_argument);
  EXPECT_EQ(bad([](auto& o) { o.bucket_cache_ttl_ms = rl::bucket_cache_ttl_ms_max + 1; }),
            Errc::invalid_argument);
  EXPECT_EQ(bad([](auto& o) { o.gc_interval_s = 0; }), Errc::invalid_argument);
  EXPECT_EQ(bad([](auto& o) { o.gc_interval_s = rl::gc_interval_s_max + 1; }),
            Errc::invalid_argument);
  EXPECT_EQ(bad([](auto& o) { o.intent_expire_s = rl::intent_expire_s_max + 1; }),
            Errc::invalid_argument);
  EXPECT_EQ(bad([](auto& o) { o.conf_file.clear(); }), Errc::invalid_argument);
  EXPECT_EQ(bad([](auto& o) { o.versions_per_key_max = 0; }), Errc::invalid_argument);
  EXPECT_EQ(bad([](auto& o) { o.versions_per_key_max = limits::versions_per_key_max + 1; }),
            Errc::invalid_argument);
  EXPECT_EQ(bad([](auto& o) { o.versions_value_bytes = rl::versions_value_bytes_max + 1; }),
            Errc::invalid_argument);
  EXPECT_EQ(bad([](auto& o) { o.versions_value_bytes = (64 << 10) - 1; }), Errc::invalid_argument);
  // Within limits, the failure is the missing configuration file, not the options.
  EXPECT_EQ(bad([](auto& o) { o.stripe_bytes = rl::stripe_bytes_max; }), Errc::io_error);
  // The stripe bound keeps every write op below Ceph's 90 MB message limit and every stripe
  // object below its 128 MiB object limit.
  static_assert(rl::write_bytes_max < 90'000'000 && rl::stripe_bytes_max <= (128ull << 20));
}

// --- the RADOS index values (storage/rados/index_codec.hpp, docs/versioning.md) ---

std::vector<rados_impl::Version> sample_versions() {
  using rados_impl::Version;
  std::vector<Version> vs(3);
  vs[0].entry.version_id = std::string(32, 'a');
  vs[0].entry.rec.meta.key = "k";
  vs[0].entry.rec.meta.size = 5;
  vs[0].entry.rec.meta.etag = "e5";
  vs[0].entry.rec.meta.mtime_ns = 3000;
  vs[0].entry.rec.segments = {{local::BlobId{}, 5}};  // inline
  vs[0].inline_data = "hello";
  vs[1].entry.version_id = "null";
  vs[1].entry.delete_marker = true;
  vs[1].entry.rec.meta.key = "k";
  vs[1].entry.rec.meta.mtime_ns = 2000;
  vs[2].entry.version_id = std::string(32, 'b');
  vs[2].entry.rec.meta.key = "k";
  vs[2].entry.rec.meta.size = 100;
  vs[2].entry.rec.meta.etag = "e100";
  vs[2].entry.rec.meta.mtime_ns = 1000;
  vs[2].entry.rec.segments = {{*local::BlobId::from_hex(std::string(32, 'c')), 100}};
  return vs;
}

std::string corpus_file(const std::string& name) {
  std::ifstream f(std::string(OBJDIRECT_RADOS_CORPUS_DIR) + "/" + name, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(RadosCodec, VersionsValueRoundTripAndRefusals) {
  using namespace rados_impl;
  const auto vs = sample_versions();
  const std::string bytes = encode_versions_val(vs);
  ASSERT_TRUE(is_versions_val(bytes));
  auto back = decode_versions_val(bytes);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  ASSERT_EQ(back->size(), 3u);
  EXPECT_EQ((*back)[0].inline_data, "hello");
  EXPECT_EQ((*back)[1].entry.version_id, "null");
  EXPECT_TRUE((*back)[1].entry.delete_marker);
  EXPECT_EQ((*back)[2].entry.rec.segments, vs[2].entry.rec.segments);
  EXPECT_EQ(encode_versions_val(*back), bytes);  // canonical
  auto latest = decode_latest(bytes);
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(latest->entry.version_id, vs[0].entry.version_id);
  EXPECT_EQ(latest->inline_data, "hello");
  auto entry = decode_key_entry(bytes);
  ASSERT_TRUE(entry.ok());
  EXPECT_FALSE(entry->plain);
  EXPECT_EQ(encode_key_entry(*entry), bytes);
  // The checked-in seed pins the bytes (src/storage/rados/fuzz_corpus).
  EXPECT_EQ(corpus_file("versions_value"), bytes);
  // An object value is the one null version of a never-versioned key, and no versions value.
  ObjectVal o{vs[0].entry.rec, "hello"};
  o.rec.meta.version_id.clear();
  const std::string plain = encode_object_val(o);
  EXPECT_EQ(corpus_file("object_value_inline"), plain);
  EXPECT_FALSE(is_versions_val(plain));
  EXPECT_EQ(decode_versions_val(plain).code(), Errc::corrupt);
  auto pe = decode_key_entry(plain);
  ASSERT_TRUE(pe.ok());
  EXPECT_TRUE(pe->plain);
  ASSERT_EQ(pe->versions.size(), 1u);
  EXPECT_EQ(pe->versions[0].entry.version_id, "null");
  EXPECT_EQ(encode_key_entry(*pe), plain);
  // Refusals: every truncation, a trailing byte, a count that differs from the record's, inline
  // bytes that differ from the inline segment, and an unknown tag.
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_EQ(decode_versions_val(bytes.substr(0, n)).code(), Errc::corrupt) << n;
  }
  EXPECT_EQ(decode_versions_val(bytes + "x").code(), Errc::corrupt);
  std::string count = bytes;
  count[4] = 2;
  EXPECT_EQ(decode_versions_val(count).code(), Errc::corrupt);
  auto short_inline = vs;
  short_inline[0].inline_data = "hell";
  EXPECT_EQ(decode_versions_val(encode_versions_val_unchecked(short_inline)).code(), Errc::corrupt);
  auto stray_inline = vs;
  stray_inline[2].inline_data = "x";
  EXPECT_EQ(decode_versions_val(encode_versions_val_unchecked(stray_inline)).code(), Errc::corrupt);
  std::string tag = bytes;
  tag[0] = char(0xfe);
  EXPECT_EQ(decode_versions_val(tag).code(), Errc::corrupt);
  // An object value's inline bytes are its inline segment, as a version's are.
  ObjectVal short_object{vs[0].entry.rec, "hell"};
  short_object.rec.meta.version_id.clear();
  EXPECT_EQ(decode_object_val(encode_object_val_unchecked(short_object)).code(), Errc::corrupt);
}

// The checked encoders (every build, OBJDIRECT_ASSERT): a value the decoder would refuse, or one
// breaking the key entry's shape, aborts before anything is written to the index.
TEST(RadosCodecDeathTest, EncodersAssertTheirPreconditions) {
  using namespace rados_impl;
  auto vs = sample_versions();
  vs[0].inline_data = "hell";
  EXPECT_DEATH((void)encode_versions_val(vs), "inline bytes are its record's inline segment");
  vs = sample_versions();
  vs[2].inline_data = "x";
  EXPECT_DEATH((void)encode_versions_val(vs), "inline bytes are its record's inline segment");
  EXPECT_DEATH((void)encode_versions_val({}), "at least one version");
  vs = sample_versions();
  vs[1].entry.version_id = std::string(32, 'a');  // a duplicate id: local::encode_versions refuses
  EXPECT_DEATH((void)encode_versions_val(vs), "decodes back to itself");
  ObjectVal o{sample_versions()[0].entry.rec, "hello!"};
  EXPECT_DEATH((void)encode_object_val(o), "inline bytes are its record's inline segment");
  ObjectVal big;
  big.rec.meta.key = "k";
  big.rec.meta.size = rados_limits::inline_bytes_max + 1;
  big.rec.segments = {{local::BlobId{}, big.rec.meta.size}};
  big.inline_data.assign(big.rec.meta.size, 'x');
  EXPECT_DEATH((void)encode_object_val(big), "at most inline_bytes_max inline");
  KeyEntry none;
  EXPECT_DEATH((void)encode_key_entry(none), "holds a version");
  KeyEntry two;
  two.plain = true;
  two.versions = {sample_versions()[0], sample_versions()[2]};
  EXPECT_DEATH((void)encode_key_entry(two), "one null version");
  // Valid values: the same bytes as without the checks.
  EXPECT_EQ(encode_versions_val(sample_versions()),
            encode_versions_val_unchecked(sample_versions()));
  ObjectVal ok{sample_versions()[0].entry.rec, "hello"};
  ok.rec.meta.version_id.clear();
  EXPECT_EQ(encode_object_val(ok), encode_object_val_unchecked(ok));
}

// The seeds hold the fuzz properties (index_codec_fuzz_body.hpp; the libFuzzer target
// meta_codec_fuzz runs the same body over them with OBJDIRECT_FUZZ=ON).
TEST(RadosCodec, CorpusSeedsHoldTheFuzzProperties) {
  int n = 0;
  for (const char* name : {"versions_value", "object_value_inline"}) {
    const std::string seed = corpus_file(name);
    ASSERT_FALSE(seed.empty()) << name;
    rados_impl::fuzz_index_codec_one(reinterpret_cast<const std::uint8_t*>(seed.data()),
                                     seed.size());
    ++n;
  }
  EXPECT_EQ(n, 2);
}

class RadosStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = testing_ceph::missing_binaries(); !why.empty()) GTEST_SKIP() << why;
    auto conf = testing_ceph::cluster_conf();
    ASSERT_TRUE(conf.ok()) << conf.status().to_string();
    conf_ = *conf;
    prefix_ = local::BlobId::random().hex();
    prefix_.resize(12);
    prefix_.insert(prefix_.begin(), 'g');
    store_ = open(3600, 86400);
    ASSERT_NE(store_, nullptr);
    BucketInfo b;
    b.name = "gcb";
    b.owner = "tester";
    ASSERT_TRUE(store_->create_bucket(b).ok());
    ASSERT_EQ(rados_.init2("client.admin", "ceph", 0), 0);
    ASSERT_EQ(rados_.conf_read_file(conf_.c_str()), 0);
    ASSERT_EQ(rados_.connect(), 0);
    ASSERT_EQ(rados_.ioctx_create((prefix_ + ".data").c_str(), data_), 0);
  }
  void TearDown() override {
    store_.reset();
    data_.close();
    rados_.shutdown();
    testing_ceph::remove_pools(conf_, prefix_ + ".");
  }
  std::unique_ptr<ObjectStore> open(std::uint32_t grace_s, std::uint32_t intent_expire_s,
                                    std::uint32_t bucket_cache_entries = 4096,
                                    const std::function<void(RadosStoreOptions&)>& tweak = {}) {
    RadosStoreOptions o;
    o.bucket_cache_entries = bucket_cache_entries;
    o.conf_file = conf_;
    o.pool_prefix = prefix_;
    o.stripe_bytes = 1 << 20;
    o.gc = false;
    o.gc_grace_s = grace_s;
    o.intent_expire_s = intent_expire_s;
    if (tweak) tweak(o);
    auto s = open_rados_store(o);
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    return s.ok() ? std::move(*s) : nullptr;
  }
  std::size_t data_objects() {
    std::size_t n = 0;
    for (auto it = data_.nobjects_begin(); it != data_.nobjects_end(); ++it) ++n;
    return n;
  }
  Status put(ObjectStore& s, const std::string& key, std::size_t size,
             const std::string& bucket = "gcb") {
    return put_meta(s, key, size, bucket).status();
  }
  Result<ObjectMeta> put_meta(ObjectStore& s, const std::string& key, std::size_t size,
                              const std::string& bucket = "gcb", char fill = 'x',
                              std::size_t user_meta_bytes = 0) {
    auto w = s.begin_write(bucket);
    if (!w.ok()) return w.status();
    const std::string data(size, fill);
    OBJDIRECT_RETURN_IF_ERROR((*w)->append(bytes_of(data)));
    ObjectMeta m;
    m.key = key;
    m.size = size;
    m.etag = numbered("e", size);
    if (user_meta_bytes > 0) m.user_meta = {{"m", std::string(user_meta_bytes, 'u')}};
    return s.commit_object(bucket, m, std::move(*w), {});
  }
  Result<std::string> read(ObjectStore& s, const std::string& key, const std::string& version) {
    auto r = s.open_object_version("gcb", key, version);
    if (!r.ok()) return r.status();
    std::string buf((*r)->meta().size, '\0');
    auto got = (*r)->pread(std::as_writable_bytes(std::span<char>(buf.data(), buf.size())), 0);
    if (!got.ok()) return got.status();
    buf.resize(*got);
    return buf;
  }

  std::string conf_, prefix_;
  std::unique_ptr<ObjectStore> store_;
  librados::Rados rados_;
  librados::IoCtx data_;
};

TEST_F(RadosStoreTest, SmallObjectsAreInlineLargeOnesStriped) {
  ASSERT_TRUE(put(*store_, "small", 64 << 10).ok());
  EXPECT_EQ(data_objects(), 0u) << "64 KiB lives in the index";
  ASSERT_TRUE(put(*store_, "big", (3 << 20) + 1).ok());
  EXPECT_EQ(data_objects(), 4u) << "3 MiB + 1 in 1 MiB stripes";
}

TEST_F(RadosStoreTest, GcDeletesReplacedBlobsOnlyAfterTheGracePeriod) {
  ASSERT_TRUE(put(*store_, "k", 3 << 20).ok());
  ASSERT_TRUE(put(*store_, "k", 2 << 20).ok());
  ASSERT_TRUE(put(*store_, "gone", 1 << 20).ok());
  ASSERT_TRUE(store_->delete_object("gcb", "gone").ok());
  EXPECT_EQ(data_objects(), 6u);
  // Within the grace period nothing is deleted.
  auto n = rados_gc_pass(*store_);
  ASSERT_TRUE(n.ok()) << n.status().to_string();
  EXPECT_EQ(*n, 0u);
  EXPECT_EQ(data_objects(), 6u);
  // While another worker holds the lease, a pass does nothing.
  auto eager = open(0, 86400);
  ASSERT_NE(eager, nullptr);
  librados::IoCtx meta;
  ASSERT_EQ(rados_.ioctx_create((prefix_ + ".meta").c_str(), meta), 0);
  timeval dur{60, 0};
  ASSERT_EQ(meta.lock_exclusive("gc.lock", "gc", "other-worker", "test", &dur, 0), 0);
  EXPECT_EQ(rados_gc_pass(*eager).code(), Errc::unavailable);
  ASSERT_EQ(meta.unlock("gc.lock", "gc", "other-worker"), 0);
  // Past the grace period (0 here), the replaced and the deleted blob go; the live one stays.
  n = rados_gc_pass(*eager);
  ASSERT_TRUE(n.ok()) << n.status().to_string();
  EXPECT_EQ(*n, 2u);
  EXPECT_EQ(data_objects(), 2u);
  meta.close();
  auto r = eager->open_object("gcb", "k");
  ASSERT_TRUE(r.ok());
  std::string buf(2 << 20, '\0');
  auto got = (*r)->pread(std::as_writable_bytes(std::span<char>(buf.data(), buf.size())), 0);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(buf, std::string(2 << 20, 'x'));
}

TEST_F(RadosStoreTest, AbandonedWritersAreCollected) {
  // A writer dropped without commit deletes its stripes at once.
  {
    auto w = store_->begin_write("gcb");
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->append(bytes_of(std::string(3 << 20, 'a'))).ok());
    EXPECT_EQ(data_objects(), 3u);
  }
  EXPECT_EQ(data_objects(), 0u);
  // A writer that never finishes (as if its process died): its intent lets the GC collect it
  // once expired, and it can no longer commit.
  auto w = store_->begin_write("gcb");
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->append(bytes_of(std::string(2 << 20, 'a'))).ok());
  EXPECT_EQ(data_objects(), 2u);
  store_.reset();
  auto gc = open(3600, 0);
  ASSERT_NE(gc, nullptr);
  auto n = rados_gc_pass(*gc);
  ASSERT_TRUE(n.ok()) << n.status().to_string();
  EXPECT_EQ(*n, 1u);
  EXPECT_EQ(data_objects(), 0u);
  ObjectMeta m;
  m.key = "late";
  m.size = 2 << 20;
  m.etag = "e";
  auto c = gc->commit_object("gcb", m, std::move(*w), {});
  EXPECT_EQ(c.code(), Errc::io_error) << "a commit needs its intent";
  EXPECT_EQ(gc->head_object("gcb", "late").code(), Errc::no_such_key);
}

// DeleteBucket + CreateBucket racing PUTs whose data is already written: a commit that would
// land in the deleted instance is refused (and its blob deleted), nothing appears in the new
// instance that was not written to it, a DeleteBucket that loses the race rolls back without
// failing the PUTs, and no blob leaks (a GC pass with no grace leaves no data object).
TEST_F(RadosStoreTest, DeleteBucketFencesRacingCommits) {
  constexpr int writers = 8, rounds = 18;
  const std::string body(100 << 10, 'r');  // above inline_bytes: a striped blob
  int deleted_rounds = 0, refused = 0, committed = 0;
  for (int round = 0; round < rounds; ++round) {
    std::vector<std::unique_ptr<BlobWriter>> ws;
    for (int i = 0; i < writers; ++i) {
      auto w = store_->begin_write_for("gcb", numbered("k", i));
      ASSERT_TRUE(w.ok()) << w.status().to_string();
      ASSERT_TRUE((*w)->append(bytes_of(body)).ok());
      ws.push_back(std::move(*w));
    }
    std::atomic<bool> go{false};
    std::vector<Status> results(writers);
    std::vector<std::thread> threads;
    for (int i = 0; i < writers; ++i) {
      threads.emplace_back([&, i] {
        while (!go.load()) std::this_thread::yield();
        // Rounds start the commits at different points of the DeleteBucket, spread over 4 ms.
        std::this_thread::sleep_for(std::chrono::microseconds((round % 6) * 1500 + i * 500));
        ObjectMeta m;
        m.key = numbered("k", i);
        m.size = body.size();
        m.etag = numbered("r", round);
        results[i] = store_->commit_object("gcb", m, std::move(ws[i]), {}).status();
      });
    }
    go = true;
    const Status del = store_->delete_bucket("gcb");
    Status created;
    if (del.ok()) {
      BucketInfo b;
      b.name = "gcb";
      b.owner = "tester";
      created = store_->create_bucket(b);
    }
    for (auto& t : threads) t.join();
    ASSERT_TRUE(created.ok()) << created.to_string();
    auto listed = store_->list_objects("gcb", {});
    ASSERT_TRUE(listed.ok()) << listed.status().to_string();
    std::set<std::string> keys;
    for (const ObjectMeta& m : listed->objects) keys.insert(m.key);
    if (del.ok()) {
      ++deleted_rounds;
      for (const Status& r : results) EXPECT_EQ(r.code(), Errc::no_such_bucket) << r.to_string();
      EXPECT_TRUE(keys.empty()) << "the re-created bucket holds an object never written to it";
      refused += writers;
    } else {
      EXPECT_EQ(del.code(), Errc::bucket_not_empty) << del.to_string();
      std::set<std::string> ok;
      for (int i = 0; i < writers; ++i) {
        EXPECT_TRUE(results[i].ok())
            << "a DeleteBucket that rolled back failed a PUT: " << results[i].to_string();
        if (results[i].ok()) ok.insert(numbered("k", i));
      }
      EXPECT_EQ(keys, ok);
      committed += int(ok.size());
      for (const std::string& k : keys) ASSERT_TRUE(store_->delete_object("gcb", k).ok());
    }
  }
  std::printf("%d rounds: %d deleted the bucket (%d commits refused), %d commits landed first\n",
              rounds, deleted_rounds, refused, committed);
  // Every data object is referenced or collectable: with no grace and no writer left, one GC
  // pass deletes all of them (a commit into a dead instance would keep its blob forever).
  auto gc = open(0, 0);
  ASSERT_NE(gc, nullptr);
  auto n = rados_gc_pass(*gc);
  ASSERT_TRUE(n.ok()) << n.status().to_string();
  EXPECT_EQ(data_objects(), 0u);
}

// Two servers on one cluster, each with its bucket record cache: what one does to a bucket the
// other sees at once, though its cache holds the old record.
TEST_F(RadosStoreTest, BucketCacheFollowsAnotherServersDeleteAndRecreate) {
  auto other = open(3600, 86400);
  ASSERT_NE(other, nullptr);
  BucketInfo info;
  info.name = "gcb";
  info.owner = "tester";
  ASSERT_TRUE(put(*store_, "a", 10).ok());  // store_ caches gcb's record
  ASSERT_TRUE(store_->head_object("gcb", "a").ok());
  ASSERT_TRUE(other->delete_object("gcb", "a").ok());
  EXPECT_EQ(store_->head_object("gcb", "a").code(), Errc::no_such_key);
  // A PUT whose data was written before the other server deleted and re-created the bucket is
  // refused; one begun after it goes to the new bucket.
  auto early = store_->begin_write_for("gcb", "early");
  ASSERT_TRUE(early.ok());
  ASSERT_TRUE((*early)->append(bytes_of(std::string(200 << 10, 'e'))).ok());
  ASSERT_TRUE(other->delete_bucket("gcb").ok());
  // HeadBucket may answer from the cache for bucket_cache_ttl_ms (1 s), not longer; requests
  // that touch the index know at once.
  EXPECT_EQ(store_->head_object("gcb", "a").code(), Errc::no_such_bucket);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_EQ(store_->head_bucket("gcb").code(), Errc::no_such_bucket);
  EXPECT_EQ(put(*store_, "x", 10).code(), Errc::no_such_bucket);
  ASSERT_TRUE(other->create_bucket(info).ok());
  ASSERT_TRUE(put(*store_, "warm", 10).ok());  // store_ has the new record again
  ASSERT_TRUE(other->delete_object("gcb", "warm").ok());
  ASSERT_TRUE(other->delete_bucket("gcb").ok());
  ASSERT_TRUE(other->create_bucket(info).ok());
  // store_'s cache now holds a dead instance: every kind of request still sees the new one.
  ASSERT_TRUE(put(*other, "b", 100 << 10).ok());
  auto got = store_->head_object("gcb", "b");
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(got->size, 100u << 10);
  ObjectMeta m;
  m.key = "early";
  m.size = 200 << 10;
  m.etag = "e";
  EXPECT_EQ(store_->commit_object("gcb", m, std::move(*early), {}).code(), Errc::no_such_bucket);
  ASSERT_TRUE(put(*store_, "c", 100 << 10).ok());
  auto listed = other->list_objects("gcb", {});
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->objects.size(), 2u);
  EXPECT_EQ(listed->objects[0].key, "b");
  EXPECT_EQ(listed->objects[1].key, "c");
  // Deletes and uploads through a stale cache act on the new bucket too.
  for (const char* k : {"b", "c"}) ASSERT_TRUE(other->delete_object("gcb", k).ok());
  ASSERT_TRUE(other->delete_bucket("gcb").ok());
  ASSERT_TRUE(other->create_bucket(info).ok());
  ASSERT_TRUE(put(*other, "d", 10).ok());
  ASSERT_TRUE(store_->delete_object("gcb", "d").ok());
  EXPECT_EQ(other->head_object("gcb", "d").code(), Errc::no_such_key) << "deleted on a dead index";
  ASSERT_TRUE(other->delete_bucket("gcb").ok());
  ASSERT_TRUE(other->create_bucket(info).ok());
  UploadInfo u;
  u.key = "mp";
  auto id = store_->create_upload("gcb", u);
  ASSERT_TRUE(id.ok()) << id.status().to_string();
  EXPECT_TRUE(other->get_upload("gcb", "mp", *id).ok()) << "upload created on a dead index";
  auto lb = store_->list_objects("gcb", {});
  ASSERT_TRUE(lb.ok());
  EXPECT_TRUE(lb->objects.empty());
  // Re-created by another owner: a request checked against the cached owner fails with 503
  // (the S3 layer's ownership check must be redone), and the next HeadBucket shows the owner.
  ASSERT_TRUE(other->abort_upload("gcb", "mp", *id).ok());
  ASSERT_TRUE(other->delete_bucket("gcb").ok());
  info.owner = "intruder";
  ASSERT_TRUE(other->create_bucket(info).ok());
  ASSERT_TRUE(put(*other, "theirs", 10).ok());
  EXPECT_EQ(store_->head_object("gcb", "theirs").code(), Errc::unavailable);
  // That refreshed the cache: the (re-checked) next request goes through.
  EXPECT_TRUE(store_->head_object("gcb", "theirs").ok());
  auto hb = store_->head_bucket("gcb");
  ASSERT_TRUE(hb.ok());
  EXPECT_EQ(hb->owner, "intruder");
}

// The cache is bounded (bucket_cache_entries): more buckets than entries still work.
TEST_F(RadosStoreTest, BucketCacheIsBounded) {
  auto small = open(3600, 86400, 1);
  ASSERT_NE(small, nullptr);
  BucketInfo info;
  info.owner = "tester";
  for (const char* name : {"c1", "c2", "c3"}) {
    info.name = name;
    ASSERT_TRUE(small->create_bucket(info).ok());
  }
  for (int round = 0; round < 2; ++round) {
    for (const char* name : {"c1", "c2", "c3", "gcb"}) {
      ASSERT_TRUE(put(*small, numbered("k", round), 10, name).ok()) << name;
      EXPECT_TRUE(small->head_object(name, "k0").ok()) << name;
    }
  }
}

// A shard whose "!state" is not "live" while the bucket record is live and not deleting: a fence
// left by a superseded DeleteBucket, or a shard created before fences existed (no key). Writes
// repair it (compare-and-set to "live") and succeed; a DeleteBucket still works afterwards.
TEST_F(RadosStoreTest, StaleFencesAndShardsWithoutStateAreRepaired) {
  librados::IoCtx meta;
  ASSERT_EQ(rados_.ioctx_create((prefix_ + ".meta").c_str(), meta), 0);
  std::vector<std::string> shards;
  for (auto it = meta.nobjects_begin(); it != meta.nobjects_end(); ++it) {
    if (it->get_oid().starts_with("idx.gcb.")) shards.push_back(it->get_oid());
  }
  ASSERT_EQ(shards.size(), 8u);
  for (std::size_t i = 0; i < shards.size(); ++i) {
    librados::ObjectWriteOperation op;
    if (i % 2 == 0) {
      librados::bufferlist bl;
      bl.append("fenced:00000000000000000000000000000000");
      op.omap_set({{"!state", bl}});
    } else {
      op.omap_rm_keys({"!state"});
    }
    ASSERT_EQ(meta.operate(shards[i], &op), 0);
  }
  for (int i = 0; i < 64; ++i) {
    ASSERT_TRUE(put(*store_, numbered("k", i), 10).ok()) << i;
  }
  for (const std::string& oid : shards) {
    std::map<std::string, librados::bufferlist> vals;
    ASSERT_EQ(meta.omap_get_vals_by_keys(oid, {"!state"}, &vals), 0);
    ASSERT_EQ(vals.count("!state"), 1u) << oid;
    EXPECT_EQ(vals["!state"].to_str(), "live") << oid;
  }
  for (int i = 0; i < 64; ++i) {
    ASSERT_TRUE(store_->delete_object("gcb", numbered("k", i)).ok());
  }
  EXPECT_TRUE(store_->delete_bucket("gcb").ok());
  meta.close();
}

// Versions (docs/versioning.md, "RADOS layout"): each keeps its blob until it is removed by id
// (a copy onto its own key shares it), versions_per_key_max bounds a key, and a second server
// whose bucket record is cached from before PutBucketVersioning writes versions at once (the
// state lives on the index shards, compared by each commit).
TEST_F(RadosStoreTest, VersionsKeepTheirBlobsUntilRemoved) {
  auto other = open(0, 86400);  // another server; caches the record before versioning
  ASSERT_NE(other, nullptr);
  ASSERT_TRUE(other->head_bucket("gcb").ok());
  store_ = open(0, 86400, 4096, [](RadosStoreOptions& o) { o.versions_per_key_max = 3; });
  ASSERT_NE(store_, nullptr);
  ASSERT_TRUE(store_->set_bucket_config("gcb", versioning_config_name, "Enabled").ok());
  std::vector<std::string> ids;
  for (char fill : {'a', 'b'}) {
    auto m = put_meta(*store_, "k", 200 << 10, "gcb", fill);  // one 1 MiB stripe each
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    ids.push_back(m->version_id);
  }
  auto third = put_meta(*other, "k", 200 << 10, "gcb", 'c');
  ASSERT_TRUE(third.ok()) << third.status().to_string();
  EXPECT_EQ(third->version_id.size(), 32u) << "the other server saw the versioning state";
  ids.push_back(third->version_id);
  EXPECT_EQ(data_objects(), 3u);
  EXPECT_EQ(put(*store_, "k", 200 << 10).code(), Errc::slow_down) << "versions_per_key_max";
  EXPECT_EQ(store_->delete_object_version("gcb", "k", "").code(), Errc::slow_down);
  EXPECT_EQ(data_objects(), 3u) << "the refused write left no stripe";
  ASSERT_TRUE(store_->delete_object_version("gcb", "k", ids[0]).ok());
  ASSERT_TRUE(rados_gc_pass(*store_).ok());
  EXPECT_EQ(data_objects(), 2u);
  EXPECT_EQ(*read(*store_, "k", ids[1]), std::string(200 << 10, 'b'));
  // A copy onto itself is a new version sharing the blob: removing the original keeps it.
  auto head = store_->head_object("gcb", "k");
  ASSERT_TRUE(head.ok());
  ObjectMeta copy = *head;
  copy.content_type = "changed";
  auto replaced = store_->replace_meta("gcb", copy, copy.etag);
  ASSERT_TRUE(replaced.ok()) << replaced.status().to_string();
  ASSERT_TRUE(store_->delete_object_version("gcb", "k", ids[2]).ok());
  ASSERT_TRUE(rados_gc_pass(*store_).ok());
  EXPECT_EQ(data_objects(), 2u);
  EXPECT_EQ(*read(*store_, "k", replaced->version_id), std::string(200 << 10, 'c'));
  ASSERT_TRUE(store_->delete_object_version("gcb", "k", replaced->version_id).ok());
  ASSERT_TRUE(store_->delete_object_version("gcb", "k", ids[1]).ok());
  ASSERT_TRUE(rados_gc_pass(*store_).ok());
  EXPECT_EQ(data_objects(), 0u);
  EXPECT_TRUE(store_->delete_bucket("gcb").ok());
}

// A key's versions keep at most versions_inline_bytes_max inline (later small versions get a
// blob), and a write that would take the key's versions value past versions_value_bytes is
// refused with slow_down, leaving the key as it was.
TEST_F(RadosStoreTest, VersionsValueStaysBounded) {
  store_ = open(3600, 86400, 4096, [](RadosStoreOptions& o) { o.versions_value_bytes = 64 << 10; });
  ASSERT_NE(store_, nullptr);
  ASSERT_TRUE(store_->set_bucket_config("gcb", versioning_config_name, "Enabled").ok());
  int written = 0;
  Status refused;
  for (; written < 20 && refused.ok(); ++written) {
    auto m = put_meta(*store_, "meta", 0, "gcb", 'x', 8 << 10);
    if (!m.ok()) refused = m.status();
  }
  --written;
  EXPECT_EQ(refused.code(), Errc::slow_down);
  EXPECT_GE(written, 5);
  EXPECT_LT(written, 8);
  ListVersionsQuery q;
  q.prefix = "meta";
  auto vs = store_->list_object_versions("gcb", q);
  ASSERT_TRUE(vs.ok());
  EXPECT_EQ(vs->versions.size(), std::size_t(written));

  store_ = open(3600, 86400);
  ASSERT_NE(store_, nullptr);
  std::vector<std::string> ids;
  constexpr std::size_t size = 60 << 10;  // inline alone (inline_bytes 64 KiB)
  for (int i = 0; i < 20; ++i) {
    auto m = put_meta(*store_, "small", size, "gcb", char('a' + i));
    ASSERT_TRUE(m.ok()) << i << " " << m.status().to_string();
    ids.push_back(m->version_id);
  }
  const std::size_t inline_versions = rados_limits::versions_inline_bytes_max / size;  // 17
  EXPECT_EQ(data_objects(), 20 - inline_versions);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(*read(*store_, "small", ids[std::size_t(i)]), std::string(size, char('a' + i))) << i;
  }
}

}  // namespace
}  // namespace objdirect::storage
