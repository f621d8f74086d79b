// Listing: LocalStore::list_objects against a brute-force model on random keys, pagination,
// and the 100,000-key delimiter listing figure quoted in docs/storage.md.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "storage/local/local_store.hpp"
#include "storage/local/local_store_test_util.hpp"

namespace objdirect::storage {
namespace {

using testing::put;

class ListTest : public testing::StoreFixture {};

// The S3 listing model, computed the slow and obvious way.
ListResult model_list(const std::set<std::string>& keys, const ListQuery& q) {
  std::set<std::string> cps;
  std::vector<std::pair<std::string, bool>> entries;  // (name, is common prefix), sorted
  for (const std::string& k : keys) {
    if (!k.starts_with(q.prefix)) continue;
    const std::size_t cut =
        q.delimiter.empty() ? std::string::npos : k.find(q.delimiter, q.prefix.size());
    if (cut != std::string::npos) {
      std::string cp = k.substr(0, cut + q.delimiter.size());
      if (cps.insert(cp).second) entries.emplace_back(cp, true);
    } else {
      entries.emplace_back(k, false);
    }
  }
  std::sort(entries.begin(), entries.end());
  ListResult out;
  std::uint32_t n = 0;
  for (const auto& [name, is_cp] : entries) {
    if (name <= q.start_after) continue;
    if (n == q.max_keys) {
      out.truncated = true;
      break;
    }
    if (is_cp) {
      out.common_prefixes.push_back(name);
    } else {
      ObjectMeta m;
      m.key = name;
      out.objects.push_back(m);
    }
    out.next_marker = name;
    ++n;
  }
  if (!out.truncated) out.next_marker.clear();
  return out;
}

std::vector<std::string> keys_of(const ListResult& r) {
  std::vector<std::string> v;
  for (const auto& m : r.objects) v.push_back(m.key);
  return v;
}

std::string random_key(std::mt19937_64& rng) {
  static const std::vector<std::string> atoms = {"a",
                                                 "b",
                                                 "z",
                                                 "/",
                                                 "/",
                                                 "..",
                                                 " ",
                                                 ".",
                                                 "\xc3\xa9" /* é */,
                                                 "\xe2\x82\xac" /* € */,
                                                 "\xff",
                                                 "\xff\xff",
                                                 "0",
                                                 "9",
                                                 "-",
                                                 "_",
                                                 "\x01"};
  std::string k;
  const int n = 1 + static_cast<int>(rng() % 8);
  for (int i = 0; i < n; ++i) k += atoms[rng() % atoms.size()];
  // Some keys longer than one LMDB key chunk, sharing long prefixes (exercises the key tree).
  if (rng() % 10 == 0) k = std::string(410, 'L') + (rng() % 2 ? "/" : "") + k;
  return k;
}

TEST_F(ListTest, MatchesModelOnRandomKeys) {
  make_bucket("b");
  make_bucket("c");  // a neighbour bucket whose keys must never show up
  ASSERT_TRUE(put(*store_, "c", "a", "").ok());
  std::mt19937_64 rng(2024);
  std::set<std::string> keys;
  while (keys.size() < 700) {
    const std::string k = random_key(rng);
    if (keys.insert(k).second) {
      ASSERT_TRUE(put(*store_, "b", k, "").ok());
    }
  }
  // Delete a few so the tree has holes (and some emptied key groups).
  for (int i = 0; i < 60; ++i) {
    auto it = keys.begin();
    std::advance(it, static_cast<long>(rng() % keys.size()));
    ASSERT_TRUE(store_->delete_object("b", *it).ok());
    keys.erase(it);
  }
  const std::vector<std::string> delims = {"", "/", "/", "..", "\xc3\xa9", "\xff", "a", " "};
  const std::vector<std::string> pool(keys.begin(), keys.end());
  auto some_string = [&]() -> std::string {
    switch (rng() % 4) {
      case 0:
        return "";
      case 1:
        return random_key(rng);
      default: {
        const std::string& k = pool[rng() % pool.size()];
        return k.substr(0, rng() % (k.size() + 1));
      }
    }
  };
  int with_prefixes = 0;
  int truncated = 0;
  int with_long_keys = 0;
  for (int i = 0; i < 1500; ++i) {
    ListQuery q;
    q.prefix = rng() % 3 == 0 ? "" : some_string();
    q.delimiter = delims[rng() % delims.size()];
    q.start_after = rng() % 2 == 0 ? "" : some_string();
    q.max_keys = rng() % 4 == 0 ? 1000 : static_cast<std::uint32_t>(1 + rng() % 40);
    auto got = store_->list_objects("b", q);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    const ListResult want = model_list(keys, q);
    ASSERT_EQ(keys_of(*got), keys_of(want)) << "query " << i;
    ASSERT_EQ(got->common_prefixes, want.common_prefixes) << "query " << i;
    ASSERT_EQ(got->truncated, want.truncated) << "query " << i;
    ASSERT_EQ(got->next_marker, want.next_marker) << "query " << i;
    with_prefixes += !want.common_prefixes.empty();
    truncated += want.truncated;
    for (const auto& m : want.objects) {
      if (m.key.size() > 400) {
        ++with_long_keys;
        break;
      }
    }
  }
  // The random queries really cover grouping, truncation and the long-key tree.
  EXPECT_GT(with_prefixes, 200);
  EXPECT_GT(truncated, 200);
  EXPECT_GT(with_long_keys, 50);
}

TEST_F(ListTest, PaginationVisitsEverythingOnce) {
  make_bucket("b");
  std::mt19937_64 rng(99);
  std::set<std::string> keys;
  while (keys.size() < 400) {
    const std::string k = random_key(rng);
    if (keys.insert(k).second) {
      ASSERT_TRUE(put(*store_, "b", k, "").ok());
    }
  }
  for (const std::string delim : {"", "/"}) {
    ListQuery q;
    q.delimiter = delim;
    q.max_keys = 7;
    std::vector<std::string> seen;
    for (int page = 0; page < 1000; ++page) {
      auto r = store_->list_objects("b", q);
      ASSERT_TRUE(r.ok());
      // Merge this page's keys and prefixes in order.
      std::vector<std::string> names = keys_of(*r);
      names.insert(names.end(), r->common_prefixes.begin(), r->common_prefixes.end());
      std::sort(names.begin(), names.end());
      seen.insert(seen.end(), names.begin(), names.end());
      if (!r->truncated) break;
      ASSERT_FALSE(r->next_marker.empty());
      q.start_after = r->next_marker;
    }
    ListQuery all;
    all.delimiter = delim;
    all.max_keys = 100000;
    const ListResult want = model_list(keys, all);
    std::vector<std::string> expect = keys_of(want);
    expect.insert(expect.end(), want.common_prefixes.begin(), want.common_prefixes.end());
    std::sort(expect.begin(), expect.end());
    EXPECT_EQ(seen, expect) << "delimiter '" << delim << "'";
  }
}

TEST_F(ListTest, MetadataComesBackInListings) {
  make_bucket("b");
  auto m = put(*store_, "b", "x/y", "12345", {}, "etag-x");
  ASSERT_TRUE(m.ok());
  ListQuery q;
  q.prefix = "x/";
  auto r = store_->list_objects("b", q);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->objects.size(), 1u);
  EXPECT_EQ(r->objects[0], *m);
  EXPECT_EQ(store_->list_objects("nope", q).code(), Errc::no_such_bucket);
  q.max_keys = 0;
  r = store_->list_objects("b", q);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->objects.empty());
  EXPECT_FALSE(r->truncated);
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// 100 directories x 1,000 files. Prints the figures; asserts only correctness.
TEST_F(ListTest, HundredThousandKeysWithDelimiter) {
  make_bucket("b");
  constexpr int dirs = 100;
  constexpr int files = 1000;
  auto t0 = std::chrono::steady_clock::now();
  char key[64];
  for (int d = 0; d < dirs; ++d) {
    for (int f = 0; f < files; ++f) {
      std::snprintf(key, sizeof key, "data/dir%03d/file%05d", d, f);
      ASSERT_TRUE(put(*store_, "b", key, "").ok());
    }
  }
  const double insert_ms = ms_since(t0);

  // Root listing with delimiter: 100 common prefixes, each skipped by one seek.
  ListQuery q;
  q.prefix = "data/";
  q.delimiter = "/";
  constexpr int reps = 20;
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) {
    auto r = store_->list_objects("b", q);
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->common_prefixes.size(), static_cast<std::size_t>(dirs));
    ASSERT_TRUE(r->objects.empty());
    ASSERT_FALSE(r->truncated);
  }
  const double cp_page_ms = ms_since(t0) / reps;

  // One directory: a full page of 1,000 keys.
  q.prefix = "data/dir050/";
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) {
    auto r = store_->list_objects("b", q);
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->objects.size(), static_cast<std::size_t>(files));
  }
  const double key_page_ms = ms_since(t0) / reps;

  // Common prefixes paged 10 at a time (each page seeks past 10 x 1,000 keys).
  q.prefix = "data/";
  q.max_keys = 10;
  q.start_after.clear();
  int pages = 0;
  std::size_t prefixes = 0;
  t0 = std::chrono::steady_clock::now();
  while (true) {
    auto r = store_->list_objects("b", q);
    ASSERT_TRUE(r.ok());
    ++pages;
    prefixes += r->common_prefixes.size();
    if (!r->truncated) break;
    q.start_after = r->next_marker;
  }
  const double small_page_ms = ms_since(t0) / pages;
  EXPECT_EQ(prefixes, static_cast<std::size_t>(dirs));

  // Every key, no delimiter, pages of 1,000.
  ListQuery flat;
  std::size_t total = 0;
  int flat_pages = 0;
  t0 = std::chrono::steady_clock::now();
  while (true) {
    auto r = store_->list_objects("b", flat);
    ASSERT_TRUE(r.ok());
    total += r->objects.size();
    ++flat_pages;
    if (!r->truncated) break;
    flat.start_after = r->next_marker;
  }
  const double flat_page_ms = ms_since(t0) / flat_pages;
  EXPECT_EQ(total, static_cast<std::size_t>(dirs * files));

  std::printf(
      "[figures] 100k keys: insert %.0f ms (%.1f us/object, fsync off)\n"
      "[figures] delimiter listing, 100 common prefixes over 100k keys: %.3f ms/page\n"
      "[figures] delimiter listing, 10 prefixes per page: %.3f ms/page\n"
      "[figures] delimiter listing, 1000 keys in one dir: %.3f ms/page\n"
      "[figures] flat listing of 100k keys, 1000 per page: %.3f ms/page\n",
      insert_ms, insert_ms * 1000.0 / (dirs * files), cp_page_ms, small_page_ms, key_page_ms,
      flat_page_ms);
  RecordProperty("delimiter_100_prefixes_ms_per_page", std::to_string(cp_page_ms));
  RecordProperty("delimiter_1000_keys_ms_per_page", std::to_string(key_page_ms));
}

}  // namespace
}  // namespace objdirect::storage
