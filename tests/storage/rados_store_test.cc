// storage/rados beyond the conformance suite: option limits, the GC (grace period, lease,
// abandoned writers) and the intent rule, on a single-node Ceph cluster this process starts.
#include "storage/rados/rados_store.hpp"

#include <gtest/gtest.h>

#include <rados/librados.hpp>
#include <string>

#include "ceph_cluster.hpp"
#include "storage/local/meta_codec.hpp"

namespace objdirect::storage {
namespace {

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
  EXPECT_EQ(bad([](auto& o) { o.conf_file.clear(); }), Errc::invalid_argument);
  // Within limits, the failure is the missing configuration file, not the options.
  EXPECT_EQ(bad([](auto& o) { o.stripe_bytes = rl::stripe_bytes_max; }), Errc::io_error);
  // The stripe bound keeps every write op below Ceph's 90 MB message limit and every stripe
  // object below its 128 MiB object limit.
  static_assert(rl::write_bytes_max < 90'000'000 && rl::stripe_bytes_max <= (128ull << 20));
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
    data_.close();
    rados_.shutdown();
  }
  std::unique_ptr<ObjectStore> open(std::uint32_t grace_s, std::uint32_t intent_expire_s) {
    RadosStoreOptions o;
    o.conf_file = conf_;
    o.pool_prefix = prefix_;
    o.stripe_bytes = 1 << 20;
    o.gc = false;
    o.gc_grace_s = grace_s;
    o.intent_expire_s = intent_expire_s;
    auto s = open_rados_store(o);
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    return s.ok() ? std::move(*s) : nullptr;
  }
  std::size_t data_objects() {
    std::size_t n = 0;
    for (auto it = data_.nobjects_begin(); it != data_.nobjects_end(); ++it) ++n;
    return n;
  }
  Status put(ObjectStore& s, const std::string& key, std::size_t size) {
    auto w = s.begin_write("gcb");
    if (!w.ok()) return w.status();
    const std::string data(size, 'x');
    OBJDIRECT_RETURN_IF_ERROR((*w)->append(bytes_of(data)));
    ObjectMeta m;
    m.key = key;
    m.size = size;
    m.etag = "e" + std::to_string(size);
    return s.commit_object("gcb", m, std::move(*w), {}).status();
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

}  // namespace
}  // namespace objdirect::storage
