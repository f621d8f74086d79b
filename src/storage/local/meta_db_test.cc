#include "storage/local/meta_db.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <random>
#include <set>
#include <string>

namespace objdirect::storage::local {
namespace {

class MetaDbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/objdirect-metadb-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    auto db = MetaDb::open({dir_, 1ull << 30, false});
    ASSERT_TRUE(db.ok()) << db.status().to_string();
    db_ = std::move(*db);
  }
  void TearDown() override {
    db_.reset();
    std::filesystem::remove_all(dir_);
  }

  std::vector<std::string> walk(std::string_view bucket, std::string_view from) {
    auto txn = Txn::begin(*db_, false);
    EXPECT_TRUE(txn.ok());
    KeyTreeIterator it(*txn, *db_, std::string(bucket));
    EXPECT_TRUE(it.seek(from).ok());
    std::vector<std::string> keys;
    while (it.valid()) {
      keys.push_back(it.key());
      EXPECT_EQ(it.value(), "v:" + it.key());
      EXPECT_TRUE(it.next().ok());
    }
    return keys;
  }

  std::string dir_;
  std::unique_ptr<MetaDb> db_;
};

// Keys around the chunk boundary, sharing long prefixes, so the walk crosses group markers.
std::set<std::string> tricky_keys(std::mt19937_64& rng, int n) {
  const std::size_t c = limits::key_chunk_bytes_max;
  const std::string p1(c, 'a');
  const std::string p2 = p1 + std::string(c, 'b');
  const std::string alphabet(
      "\x00\x01"
      "a/b\xff",
      6);
  std::set<std::string> keys;
  for (int i = 0; i < n; ++i) {
    std::string base;
    switch (rng() % 5) {
      case 0:
        base = "";
        break;
      case 1:
        base = p1.substr(0, c - 1 - rng() % 3);
        break;
      case 2:
        base = p1;
        break;
      case 3:
        base = p2;
        break;
      default:
        base = p2.substr(0, 2 * c - rng() % 2);
        break;
    }
    std::string k = base;
    const std::size_t tail = rng() % 4;
    for (std::size_t j = 0; j < tail; ++j) k.push_back(alphabet[rng() % alphabet.size()]);
    if (k.empty()) k.assign(1, 'x');
    if (k.size() > 1024) k.resize(1024);
    keys.insert(k);
  }
  keys.insert(std::string(1024, '\xff'));
  keys.insert(p1);
  keys.insert(p1 + std::string(1, '\0'));
  return keys;
}

TEST_F(MetaDbTest, KeyTreeOrdersLongKeysLikeBytes) {
  std::mt19937_64 rng(7);
  const auto keys = tricky_keys(rng, 400);
  {
    auto txn = Txn::begin(*db_, true);
    ASSERT_TRUE(txn.ok());
    for (const auto& k : keys) ASSERT_TRUE(key_tree::put(*txn, *db_, "b", k, "v:" + k).ok());
    // A neighbouring bucket must not leak into the walk.
    ASSERT_TRUE(key_tree::put(*txn, *db_, "b2", std::string(500, 'a'), "v:x").ok());
    ASSERT_TRUE(key_tree::put(*txn, *db_, "a", "zzz", "v:x").ok());
    ASSERT_TRUE(txn->commit().ok());
  }
  const std::vector<std::string> expect(keys.begin(), keys.end());
  EXPECT_EQ(walk("b", ""), expect);
  // Seek from many targets, including ones that are not keys.
  for (int i = 0; i < 200; ++i) {
    std::string target = expect[rng() % expect.size()];
    if (rng() % 2) target.resize(rng() % (target.size() + 1));
    if (rng() % 3 == 0) target.push_back('\x01');
    std::vector<std::string> want(keys.lower_bound(target), keys.end());
    ASSERT_EQ(walk("b", target), want) << "target size " << target.size();
  }
  // Point lookups.
  auto txn = Txn::begin(*db_, false);
  ASSERT_TRUE(txn.ok());
  for (const auto& k : keys) {
    auto v = key_tree::get(*txn, *db_, "b", k);
    ASSERT_TRUE(v.ok());
    ASSERT_TRUE(v->has_value());
    EXPECT_EQ(**v, "v:" + k);
  }
  auto miss = key_tree::get(*txn, *db_, "b", std::string(900, 'q'));
  ASSERT_TRUE(miss.ok());
  EXPECT_FALSE(miss->has_value());
}

TEST_F(MetaDbTest, EraseRemovesEmptyGroups) {
  std::mt19937_64 rng(8);
  const auto keys = tricky_keys(rng, 200);
  {
    auto txn = Txn::begin(*db_, true);
    ASSERT_TRUE(txn.ok());
    for (const auto& k : keys) ASSERT_TRUE(key_tree::put(*txn, *db_, "b", k, "v:" + k).ok());
    ASSERT_TRUE(txn->commit().ok());
  }
  std::set<std::string> left = keys;
  std::vector<std::string> order(keys.begin(), keys.end());
  std::shuffle(order.begin(), order.end(), rng);
  for (std::size_t i = 0; i < order.size(); ++i) {
    auto txn = Txn::begin(*db_, true);
    ASSERT_TRUE(txn.ok());
    auto e = key_tree::erase(*txn, *db_, "b", order[i]);
    ASSERT_TRUE(e.ok());
    EXPECT_TRUE(*e);
    auto again = key_tree::erase(*txn, *db_, "b", order[i]);
    ASSERT_TRUE(again.ok());
    EXPECT_FALSE(*again);
    ASSERT_TRUE(txn->commit().ok());
    left.erase(order[i]);
    if (i % 37 == 0) {
      EXPECT_EQ(walk("b", ""), std::vector<std::string>(left.begin(), left.end()));
    }
  }
  auto txn = Txn::begin(*db_, false);
  ASSERT_TRUE(txn.ok());
  auto empty = key_tree::empty(*txn, *db_, "b");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(*empty);
  // No group entries are left behind.
  MDB_stat st;
  ASSERT_EQ(mdb_stat(txn->get(), db_->object_groups, &st), 0);
  EXPECT_EQ(st.ms_entries, 0u);
  ASSERT_EQ(mdb_stat(txn->get(), db_->objects, &st), 0);
  EXPECT_EQ(st.ms_entries, 0u);
}

}  // namespace
}  // namespace objdirect::storage::local
