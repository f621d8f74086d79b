// open_store: StoreConfig's defaults are the backends' own, each backend opens through it with
// its errors named, and the cache registers its series (only once everything is open).
#include "storage/open_store.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>

#include "storage/cache/caching_store.hpp"
#include "storage/local/local_store.hpp"
#include "storage/local/local_store_test_util.hpp"
#include "storage/s3/s3_store.hpp"

namespace objdirect::storage {
namespace {

namespace fs = std::filesystem;

// A Sink that keeps what was registered, by name: "counter" or "gauge", and the value function.
struct RecordingSink : metrics::Sink {
  std::map<std::string, std::pair<std::string, ValueFn>> series;
  void add_counter(const std::string& name, const std::string&, ValueFn fn) override {
    ASSERT_TRUE(series.try_emplace(name, "counter", std::move(fn)).second) << name;
  }
  void add_gauge(const std::string& name, const std::string&, ValueFn fn) override {
    ASSERT_TRUE(series.try_emplace(name, "gauge", std::move(fn)).second) << name;
  }
};

BucketInfo bucket() {
  BucketInfo b;
  b.name = "b";
  b.owner = "u";
  return b;
}

class OpenStore : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("open_store_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  StoreConfig local() const {
    StoreConfig c;
    c.data_dir = (dir_ / "data").string();
    c.fsync = false;
    c.lmdb_map_bytes = 64ull << 20;
    return c;
  }
  fs::path dir_;
};

// objdirect-server's --help shows StoreConfig's defaults: they must be what the backends use.
TEST(StoreConfigDefaults, AreTheBackendsOwn) {
  const StoreConfig c;
  const LocalStoreOptions l;
  EXPECT_EQ(c.fsync, l.fsync);
  EXPECT_EQ(c.lmdb_map_bytes, l.lmdb_map_size_bytes);
  const S3StoreOptions s;
  const auto& g = c.gateway;
  EXPECT_EQ(g.connections, s.connections);
  EXPECT_EQ(g.connect_timeout_ms, s.connect_timeout_ms);
  EXPECT_EQ(g.low_speed_time_s, s.low_speed_time_s);
  EXPECT_EQ(g.multipart_threshold_bytes, s.multipart_threshold_bytes);
  EXPECT_EQ(g.part_bytes, s.multipart_part_bytes);
  EXPECT_EQ(g.parallel_parts, s.parallel_parts);
  EXPECT_EQ(g.parallel_gets, s.parallel_gets);
  EXPECT_EQ(g.retry_attempts, s.retry.max_attempts);
  EXPECT_EQ(g.conditional_writes, s.conditional_writes);
  EXPECT_EQ(g.spool_dir, s.spool_dir);
  EXPECT_EQ(g.spool_memory_bytes, s.spool_memory_bytes);
  EXPECT_EQ(g.spool_bytes_max, s.spool_bytes_max);
  const cache::CacheOptions k;
  EXPECT_EQ(c.cache.bytes_max, k.bytes_max);
  EXPECT_EQ(c.cache.ttl_s, k.ttl_s);
  EXPECT_EQ(c.cache.block_bytes, k.block_bytes);
}

TEST_F(OpenStore, LocalBackendRegistersNoSeries) {
  RecordingSink sink;
  auto store = open_store(local(), &sink);
  ASSERT_TRUE(store.ok()) << store.status().message();
  ASSERT_TRUE((*store)->create_bucket(bucket()).ok());
  EXPECT_TRUE(sink.series.empty());
}

TEST_F(OpenStore, CacheInFrontRegistersItsSeriesAndCounts) {
  auto c = local();
  c.cache.dir = (dir_ / "cache").string();
  c.cache.bytes_max = 16ull << 20;
  c.cache.block_bytes = cache::cache_limits::block_bytes_min;
  RecordingSink sink;
  auto store = open_store(c, &sink);
  ASSERT_TRUE(store.ok()) << store.status().message();
  ASSERT_NE(dynamic_cast<cache::CachingStore*>(store->get()), nullptr);
  int counters = 0, gauges = 0;
  for (const auto& [name, s] : sink.series) {
    EXPECT_TRUE(name.starts_with("objdirect_cache_")) << name;
    EXPECT_EQ(s.first == "counter", name.ends_with("_total")) << name;
    (s.first == "counter" ? counters : gauges)++;
  }
  EXPECT_EQ(counters, 13);
  EXPECT_EQ(gauges, 2);
  ASSERT_TRUE((*store)->create_bucket(bucket()).ok());
  ASSERT_TRUE(testing::put(**store, "b", "k", std::string(100'000, 'x')).ok());
  EXPECT_EQ(sink.series.at("objdirect_cache_misses_total").second(), 0);
  ASSERT_TRUE(testing::get(**store, "b", "k").ok());
  EXPECT_GT(sink.series.at("objdirect_cache_misses_total").second(), 0);
  EXPECT_GT(sink.series.at("objdirect_cache_bytes").second(), 0);
  ASSERT_TRUE(testing::get(**store, "b", "k").ok());
  EXPECT_GT(sink.series.at("objdirect_cache_hits_total").second(), 0);
}

TEST_F(OpenStore, ErrorsNameWhatFailedAndRegisterNothing) {
  RecordingSink sink;
  auto c = local();
  c.backend = "nfs";
  auto r = open_store(c, &sink);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), Errc::invalid_argument);
  EXPECT_NE(r.status().message().find("unknown backend 'nfs'"), std::string::npos);

  c = local();
  c.data_dir.clear();
  r = open_store(c, &sink);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("cannot open data directory"), std::string::npos)
      << r.status().message();

  // A cache whose options are refused: the backend was open, but nothing stays registered.
  c = local();
  c.cache.dir = (dir_ / "cache").string();
  c.cache.bytes_max = 1;
  c.cache.block_bytes = 4096;
  r = open_store(c, &sink);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), Errc::invalid_argument);
  EXPECT_TRUE(r.status().message().starts_with("--cache-dir " + c.cache.dir + ": "))
      << r.status().message();
  EXPECT_TRUE(sink.series.empty());

  c = local();
  c.backend = "s3";
  r = open_store(c, &sink);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), Errc::invalid_argument);
  EXPECT_NE(r.status().message().find("needs --upstream"), std::string::npos);
#ifndef OBJDIRECT_WITH_RADOS
  c = local();
  c.backend = "rados";
  r = open_store(c, &sink);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), Errc::invalid_argument);
#endif
}

// The gateway's upstream credentials come from the AWS environment; an upstream nobody listens
// on is refused at open, named.
TEST_F(OpenStore, GatewayNamesAnUnreachableUpstream) {
  ::setenv("AWS_ACCESS_KEY_ID", "ak", 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", "sk", 1);
  auto c = local();
  c.backend = "s3";
  c.gateway.upstream = "http://127.0.0.1:9";  // discard: nothing listens
  c.gateway.retry_attempts = 1;
  c.gateway.retry_attempts_given = true;
  RecordingSink sink;
  auto r = open_store(c, &sink);
  ::unsetenv("AWS_ACCESS_KEY_ID");
  ::unsetenv("AWS_SECRET_ACCESS_KEY");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.code(), Errc::invalid_argument) << r.status().message();
  EXPECT_TRUE(r.status().message().starts_with("cannot use the upstream http://127.0.0.1:9: "))
      << r.status().message();
  EXPECT_TRUE(sink.series.empty());
}

}  // namespace
}  // namespace objdirect::storage
