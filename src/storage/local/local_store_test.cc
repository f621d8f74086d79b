#include "storage/local/local_store.hpp"

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "storage/local/local_store_test_util.hpp"
#include "storage/local/meta_codec.hpp"
#include "storage/local/meta_db.hpp"

namespace objdirect::storage {
namespace {

using testing::bytes_of;
using testing::get;
using testing::put;
using testing::read_all;

class LocalStoreTest : public testing::StoreFixture {};

std::size_t open_fds() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

std::string pattern(std::size_t n, char seed) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>(seed + i * 7 + i / 251);
  return s;
}

TEST_F(LocalStoreTest, BucketLifecycle) {
  BucketInfo b;
  b.name = "alpha";
  b.owner = "me";
  b.region = "us-east-1";
  ASSERT_TRUE(store_->create_bucket(b).ok());
  EXPECT_EQ(store_->create_bucket(b).code(), Errc::bucket_already_owned_by_you);
  BucketInfo other = b;
  other.owner = "you";
  EXPECT_EQ(store_->create_bucket(other).code(), Errc::bucket_already_exists);
  make_bucket("zeta");
  make_bucket("beta");

  auto h = store_->head_bucket("alpha");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->owner, "me");
  EXPECT_EQ(h->region, "us-east-1");
  EXPECT_GT(h->ctime_ns, 0);
  EXPECT_EQ(store_->head_bucket("nope").code(), Errc::no_such_bucket);

  auto all = store_->list_buckets();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].name, "alpha");
  EXPECT_EQ((*all)[1].name, "beta");
  EXPECT_EQ((*all)[2].name, "zeta");

  ASSERT_TRUE(put(*store_, "beta", "k", "v").ok());
  EXPECT_EQ(store_->delete_bucket("beta").code(), Errc::bucket_not_empty);
  ASSERT_TRUE(store_->delete_object("beta", "k").ok());
  // Leftover uploads do not keep a bucket alive; deleting it aborts them and frees their parts.
  UploadInfo u;
  u.key = "mp";
  auto id = store_->create_upload("beta", u);
  ASSERT_TRUE(id.ok());
  auto w = store_->begin_write("beta");
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->append(bytes_of("part")).ok());
  ASSERT_TRUE(store_->commit_part("beta", "mp", *id, PartInfo{1, 4, "p1"}, std::move(*w)).ok());
  EXPECT_EQ(blob_files(), 1u);
  ASSERT_TRUE(store_->delete_bucket("beta").ok());
  EXPECT_EQ(blob_files(), 0u);
  EXPECT_EQ(store_->head_bucket("beta").code(), Errc::no_such_bucket);
  EXPECT_EQ(store_->delete_bucket("beta").code(), Errc::no_such_bucket);
  make_bucket("beta");  // the name is free again, with no uploads
  auto ups = store_->list_uploads("beta", {});
  ASSERT_TRUE(ups.ok());
  EXPECT_TRUE(ups->uploads.empty());

  b.name = "";
  EXPECT_EQ(store_->create_bucket(b).code(), Errc::invalid_bucket_name);
  b.name = std::string(64, 'a');
  EXPECT_EQ(store_->create_bucket(b).code(), Errc::invalid_bucket_name);
}

TEST_F(LocalStoreTest, PutHeadOpenOverwriteDelete) {
  make_bucket("b");
  const std::string data = pattern(300'000, 'a');
  ObjectMeta meta;
  meta.key = "dir/obj";
  meta.size = data.size();
  meta.etag = "abc";
  meta.content_type = "application/x";
  meta.cache_control = "max-age=1";
  meta.user_meta = {{"name", "\xe2\x82\xac value"}};
  meta.checksums = {{"CRC32C", "AAAA"}};
  meta.owner = "me";
  auto w = store_->begin_write("b");
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->append(bytes_of(data)).ok());
  EXPECT_EQ((*w)->size(), data.size());
  EXPECT_EQ(tmp_files(), 1u);
  auto stored = store_->commit_object("b", meta, std::move(*w), {});
  ASSERT_TRUE(stored.ok()) << stored.status().to_string();
  EXPECT_GT(stored->mtime_ns, 0);
  EXPECT_EQ(tmp_files(), 0u);
  EXPECT_EQ(blob_files(), 1u);

  auto h = store_->head_object("b", "dir/obj");
  ASSERT_TRUE(h.ok());
  meta.mtime_ns = stored->mtime_ns;
  EXPECT_EQ(*h, meta);

  auto r = store_->open_object("b", "dir/obj");
  ASSERT_TRUE(r.ok());
  auto all = read_all(**r, 4096);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(*all, data);
  // pread past the end and across it.
  std::string buf(100, '\0');
  auto n = (*r)->pread(std::as_writable_bytes(std::span<char>(buf)), data.size() - 10);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 10u);
  EXPECT_EQ(buf.substr(0, 10), data.substr(data.size() - 10));
  n = (*r)->pread(std::as_writable_bytes(std::span<char>(buf)), data.size() + 5);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0u);
  // extents: one region, readable through the fd.
  auto ex = (*r)->extents(1000, 5000);
  ASSERT_TRUE(ex.ok());
  ASSERT_EQ(ex->size(), 1u);
  EXPECT_EQ((*ex)[0].file_offset, 1000u);
  EXPECT_EQ((*ex)[0].length, 5000u);
  std::string via_fd(5000, '\0');
  ASSERT_EQ(::pread((*ex)[0].fd, via_fd.data(), 5000, 1000), 5000);
  EXPECT_EQ(via_fd, data.substr(1000, 5000));
  EXPECT_EQ((*r)->extents(data.size() - 1, 2).code(), Errc::invalid_range);
  r->reset();

  ASSERT_TRUE(put(*store_, "b", "dir/obj", "short").ok());
  EXPECT_EQ(*get(*store_, "b", "dir/obj"), "short");
  EXPECT_EQ(blob_files(), 1u);  // the old blob is gone
  ASSERT_TRUE(store_->delete_object("b", "dir/obj").ok());
  EXPECT_EQ(store_->head_object("b", "dir/obj").code(), Errc::no_such_key);
  EXPECT_EQ(store_->open_object("b", "dir/obj").code(), Errc::no_such_key);
  EXPECT_TRUE(store_->delete_object("b", "dir/obj").ok());  // absent: still fine
  EXPECT_EQ(blob_files(), 0u);

  EXPECT_EQ(store_->delete_object("nob", "k").code(), Errc::no_such_bucket);
  EXPECT_EQ(store_->head_object("nob", "k").code(), Errc::no_such_bucket);
  EXPECT_EQ(store_->begin_write("nob").code(), Errc::no_such_bucket);
}

// Versioning (docs/versioning.md): every version keeps its blob until removed by id; a delete
// marker hides the key; suspension replaces only the null version; all of it survives a reopen.
TEST_F(LocalStoreTest, VersionsMarkersAndNullVersions) {
  make_bucket("b");
  ASSERT_TRUE(put(*store_, "b", "k", "plain").ok());  // before versioning: the null version
  ASSERT_TRUE(store_->set_bucket_config("b", versioning_config_name, "Enabled").ok());
  auto m0 = store_->head_object("b", "k");
  ASSERT_TRUE(m0.ok());
  EXPECT_EQ(m0->version_id, "null");
  std::vector<std::string> ids;
  for (const char* body : {"one", "two"}) {
    auto m = put(*store_, "b", "k", body);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    EXPECT_EQ(m->version_id.size(), 32u);
    ids.push_back(m->version_id);
  }
  EXPECT_EQ(blob_files(), 3u);
  auto del = store_->delete_object_version("b", "k", "");
  ASSERT_TRUE(del.ok());
  EXPECT_TRUE(del->delete_marker);
  EXPECT_EQ(blob_files(), 3u);  // a marker removes no bytes
  EXPECT_EQ(store_->head_object("b", "k").code(), Errc::no_such_key);
  EXPECT_EQ(store_->open_object("b", "k").code(), Errc::no_such_key);
  EXPECT_EQ(store_->open_object_version("b", "k", del->version_id).code(),
            Errc::method_not_allowed);
  auto marker = store_->head_object_version("b", "k", "");
  ASSERT_TRUE(marker.ok());
  EXPECT_TRUE(marker->delete_marker);
  auto listed = store_->list_objects("b", ListQuery{});
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->objects.empty());
  EXPECT_EQ(store_->delete_bucket("b").code(), Errc::bucket_not_empty);

  reopen();  // recovery counts every version's blobs as live
  EXPECT_EQ(blob_files(), 3u);
  auto r = store_->open_object_version("b", "k", ids[0]);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(*read_all(**r), "one");
  r->reset();  // an open reader pins its blobs (readers are snapshots)
  EXPECT_EQ(get(*store_, "b", "k").code(), Errc::no_such_key);
  auto vs = store_->list_object_versions("b", ListVersionsQuery{});
  ASSERT_TRUE(vs.ok());
  ASSERT_EQ(vs->versions.size(), 4u);
  EXPECT_TRUE(vs->versions[0].meta.delete_marker && vs->versions[0].is_latest);
  EXPECT_EQ(vs->versions[1].meta.version_id, ids[1]);
  EXPECT_EQ(vs->versions[1].noncurrent_since_ns, vs->versions[0].meta.mtime_ns);
  EXPECT_EQ(vs->versions[3].meta.version_id, "null");

  // Removing the marker by id brings "two" back; removing a version frees its blob.
  ASSERT_TRUE(store_->delete_object_version("b", "k", del->version_id).ok());
  EXPECT_EQ(*get(*store_, "b", "k"), "two");
  auto gone = store_->delete_object_version("b", "k", ids[1]);
  ASSERT_TRUE(gone.ok());
  EXPECT_FALSE(gone->delete_marker);
  EXPECT_EQ(blob_files(), 2u);
  EXPECT_EQ(*get(*store_, "b", "k"), "one");
  EXPECT_EQ(store_->head_object_version("b", "k", ids[1]).code(), Errc::no_such_version);
  EXPECT_EQ(store_->head_object_version("b", "k", "NULL").code(), Errc::invalid_argument);
  // An unknown well-formed id removes nothing.
  ASSERT_TRUE(store_->delete_object_version("b", "k", std::string(32, 'a')).ok());
  EXPECT_EQ(blob_files(), 2u);

  // Suspended: a PUT replaces the null version (its blob goes), the others stay.
  ASSERT_TRUE(store_->set_bucket_config("b", versioning_config_name, "Suspended").ok());
  auto s = put(*store_, "b", "k", "suspended");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->version_id, "null");
  EXPECT_EQ(blob_files(), 2u);
  auto null_version = store_->open_object_version("b", "k", "null");
  ASSERT_TRUE(null_version.ok());
  EXPECT_EQ(*read_all(**null_version), "suspended");
  null_version->reset();
  // Versions of a multipart-free copy onto itself share blobs; removing one keeps the bytes.
  ASSERT_TRUE(store_->set_bucket_config("b", versioning_config_name, "Enabled").ok());
  auto head = store_->head_object("b", "k");
  ASSERT_TRUE(head.ok());
  ObjectMeta copy = *head;
  copy.content_type = "changed";
  auto replaced = store_->replace_meta("b", copy, copy.etag);
  ASSERT_TRUE(replaced.ok()) << replaced.status().to_string();
  EXPECT_NE(replaced->version_id, "null");
  EXPECT_EQ(blob_files(), 2u);
  ASSERT_TRUE(store_->delete_object_version("b", "k", "null").ok());
  EXPECT_EQ(blob_files(), 2u);  // still referenced by the copy
  EXPECT_EQ(*get(*store_, "b", "k"), "suspended");
  ASSERT_TRUE(store_->delete_object_version("b", "k", replaced->version_id).ok());
  ASSERT_TRUE(store_->delete_object_version("b", "k", ids[0]).ok());
  EXPECT_EQ(blob_files(), 0u);
  EXPECT_TRUE(store_->delete_bucket("b").ok());
}

TEST_F(LocalStoreTest, VersionsPerKeyMaxIsEnforced) {
  reopen(false, 3);
  make_bucket("b");
  ASSERT_TRUE(store_->set_bucket_config("b", versioning_config_name, "Enabled").ok());
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    const std::string body(static_cast<std::size_t>(i + 1), 'v');
    auto m = put(*store_, "b", "k", body);
    ASSERT_TRUE(m.ok());
    ids.push_back(m->version_id);
  }
  EXPECT_EQ(put(*store_, "b", "k", "one too many").code(), Errc::slow_down);
  EXPECT_EQ(store_->delete_object_version("b", "k", "").code(), Errc::slow_down);
  EXPECT_EQ(blob_files(), 3u);  // the refused write left no blob behind
  ASSERT_TRUE(store_->delete_object_version("b", "k", ids[0]).ok());
  EXPECT_TRUE(put(*store_, "b", "k", "fits again").ok());
  EXPECT_TRUE(put(*store_, "b", "other", "another key has its own budget").ok());
}

TEST_F(LocalStoreTest, ListObjectVersionsPagesInsideKeys) {
  make_bucket("b");
  ASSERT_TRUE(store_->set_bucket_config("b", versioning_config_name, "Enabled").ok());
  std::vector<std::pair<std::string, std::string>> want;  // (key, id), newest first per key
  for (const char* key : {"a", "b/x", "c"}) {
    std::vector<std::string> ids;
    for (int i = 0; i < 3; ++i) ids.push_back(put(*store_, "b", key, "x")->version_id);
    for (auto it = ids.rbegin(); it != ids.rend(); ++it) want.emplace_back(key, *it);
  }
  for (std::uint32_t page : {1u, 2u, 4u, 9u, 10u}) {
    ListVersionsQuery q;
    q.max_keys = page;
    std::vector<std::pair<std::string, std::string>> got;
    for (int guard = 0; guard < 20; ++guard) {
      auto r = store_->list_object_versions("b", q);
      ASSERT_TRUE(r.ok());
      EXPECT_LE(r->versions.size(), page);
      for (const auto& v : r->versions) got.emplace_back(v.meta.key, v.meta.version_id);
      if (!r->truncated) break;
      q.key_marker = r->next_key_marker;
      q.version_id_marker = r->next_version_id_marker;
    }
    EXPECT_EQ(got, want) << page;
  }
  ListVersionsQuery d;
  d.delimiter = "/";
  auto r = store_->list_object_versions("b", d);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->common_prefixes, std::vector<std::string>{"b/"});
  EXPECT_EQ(r->versions.size(), 6u);
}

TEST_F(LocalStoreTest, EmptyObjectsHaveNoFile) {
  make_bucket("b");
  auto m = put(*store_, "b", "empty", "");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(blob_files(), 0u);
  auto r = store_->open_object("b", "empty");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)->meta().size, 0u);
  auto ex = (*r)->extents(0, 0);
  ASSERT_TRUE(ex.ok());
  EXPECT_TRUE(ex->empty());
}

TEST_F(LocalStoreTest, KeyRulesAndLongKeys) {
  make_bucket("b");
  EXPECT_EQ(put(*store_, "b", std::string(1025, 'k'), "x").code(), Errc::key_too_long);
  EXPECT_EQ(put(*store_, "b", "", "x").code(), Errc::invalid_argument);
  EXPECT_EQ(tmp_files(), 0u);
  EXPECT_EQ(blob_files(), 0u);  // rejected writes leave nothing behind
  // Keys that would be dangerous as paths, and keys longer than an LMDB key.
  const std::vector<std::string> keys = {"../../etc/passwd",
                                         "/abs",
                                         "a/../../b",
                                         std::string(1024, '/'),
                                         std::string(1024, '\xff'),
                                         std::string("nul\0byte", 8)};
  for (const auto& k : keys) ASSERT_TRUE(put(*store_, "b", k, "v:" + k).ok()) << k.size();
  for (const auto& k : keys) EXPECT_EQ(*get(*store_, "b", k), "v:" + k);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/etc"));
  EXPECT_EQ(blob_files(), keys.size());
}

TEST_F(LocalStoreTest, ConditionalCommits) {
  make_bucket("b");
  const WriteCondition absent{WriteCondition::Kind::must_be_absent, ""};
  ASSERT_TRUE(put(*store_, "b", "k", "one", absent, "e1").ok());
  EXPECT_EQ(put(*store_, "b", "k", "two", absent, "e2").code(), Errc::precondition_failed);
  EXPECT_EQ(*get(*store_, "b", "k"), "one");
  EXPECT_EQ(blob_files(), 1u);  // the losing write's blob was removed

  const WriteCondition match_wrong{WriteCondition::Kind::etag_must_match, "nope"};
  EXPECT_EQ(put(*store_, "b", "k", "two", match_wrong, "e2").code(), Errc::precondition_failed);
  const WriteCondition match_right{WriteCondition::Kind::etag_must_match, "e1"};
  ASSERT_TRUE(put(*store_, "b", "k", "two", match_right, "e2").ok());
  EXPECT_EQ(*get(*store_, "b", "k"), "two");
  const WriteCondition match_absent{WriteCondition::Kind::etag_must_match, "e1"};
  EXPECT_EQ(put(*store_, "b", "missing", "x", match_absent).code(), Errc::no_such_key);
  EXPECT_EQ(blob_files(), 1u);
  EXPECT_EQ(put(*store_, "nob", "k", "x").code(), Errc::no_such_bucket);
}

TEST_F(LocalStoreTest, RacingMustBeAbsentHasOneWinner) {
  make_bucket("b");
  constexpr int threads = 8;
  constexpr int rounds = 20;
  for (int round = 0; round < rounds; ++round) {
    const std::string key = "race-" + std::to_string(round);
    std::atomic<int> wins{0};
    std::atomic<int> losses{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) {
      ts.emplace_back([&, t] {
        auto w = store_->begin_write("b");
        ASSERT_TRUE(w.ok());
        const std::string data = "writer-" + std::to_string(t);
        ASSERT_TRUE((*w)->append(bytes_of(data)).ok());
        ObjectMeta m;
        m.key = key;
        m.size = data.size();
        m.etag = data;
        while (!go.load()) std::this_thread::yield();
        auto r = store_->commit_object("b", m, std::move(*w),
                                       {WriteCondition::Kind::must_be_absent, ""});
        if (r.ok()) {
          ++wins;
        } else if (r.code() == Errc::precondition_failed) {
          ++losses;
        }
      });
    }
    go = true;
    for (auto& t : ts) t.join();
    EXPECT_EQ(wins.load(), 1) << key;
    EXPECT_EQ(losses.load(), threads - 1) << key;
    auto h = store_->head_object("b", key);
    ASSERT_TRUE(h.ok());
    EXPECT_EQ(*get(*store_, "b", key), h->etag);
  }
  EXPECT_EQ(blob_files(), static_cast<std::size_t>(rounds));
}

TEST_F(LocalStoreTest, ReadersAreSnapshots) {
  make_bucket("b");
  const std::string v1 = pattern(100'000, '1');
  ASSERT_TRUE(put(*store_, "b", "k", v1).ok());
  auto r1 = store_->open_object("b", "k");
  ASSERT_TRUE(r1.ok());
  ASSERT_TRUE(put(*store_, "b", "k", "version two").ok());
  auto r2 = store_->open_object("b", "k");
  ASSERT_TRUE(r2.ok());
  ASSERT_TRUE(store_->delete_object("b", "k").ok());
  EXPECT_EQ(store_->open_object("b", "k").code(), Errc::no_such_key);
  // Both old versions are still readable, and their files exist until the readers close.
  EXPECT_EQ(blob_files(), 2u);
  EXPECT_EQ(*read_all(**r1), v1);
  EXPECT_EQ(*read_all(**r2), "version two");
  EXPECT_EQ((*r1)->meta().size, v1.size());
  r1->reset();
  EXPECT_EQ(blob_files(), 1u);
  r2->reset();
  EXPECT_EQ(blob_files(), 0u);
  // The deferred deletions' gc entries are dropped by later transactions; a reopen (recovery)
  // finds nothing to do.
  ASSERT_TRUE(put(*store_, "b", "other", "x").ok());
  reopen();
  EXPECT_EQ(blob_files(), 1u);
  EXPECT_EQ(*get(*store_, "b", "other"), "x");
}

// Writers overwrite and delete a few keys while readers open and read them: every read returns
// one complete version (bodies are "<writer>:<n>:" repeated), and no blob leaks.
TEST_F(LocalStoreTest, ConcurrentReadersAndWritersSeeWholeVersions) {
  make_bucket("b");
  constexpr int keys = 3;
  constexpr int writes_per_writer = 80;
  std::atomic<int> writers_left{2};
  std::atomic<int> bad{0};
  std::atomic<int> reads{0};
  auto body = [](int writer, int n) {
    std::string unit = std::to_string(writer);
    unit.append(":").append(std::to_string(n)).append(";");
    std::string s;
    for (int i = 0; i < 200 + n % 50; ++i) s += unit;
    return s;
  };
  std::vector<std::thread> ts;
  for (int w = 0; w < 2; ++w) {
    ts.emplace_back([&, w] {
      for (int n = 0; n < writes_per_writer; ++n) {
        const std::string key = std::string("k").append(std::to_string(n % keys));
        if (n % 17 == 16) {
          if (!store_->delete_object("b", key).ok()) ++bad;
        } else if (!put(*store_, "b", key, body(w, n)).ok()) {
          ++bad;
        }
      }
      --writers_left;
    });
  }
  for (int r = 0; r < 2; ++r) {
    ts.emplace_back([&, r] {
      int i = r;
      while (writers_left.load() > 0) {
        const std::string key = std::string("k").append(std::to_string(i++ % keys));
        auto reader = store_->open_object("b", key);
        if (reader.code() == Errc::no_such_key) continue;
        if (!reader.ok()) {
          ++bad;
          continue;
        }
        auto data = read_all(**reader, 333);
        if (!data.ok() || data->empty()) {
          ++bad;
          continue;
        }
        const std::string unit = data->substr(0, data->find(';') + 1);
        bool whole = data->size() % unit.size() == 0;
        for (std::size_t at = 0; whole && at < data->size(); at += unit.size()) {
          whole = data->compare(at, unit.size(), unit) == 0;
        }
        if (!whole) ++bad;
        ++reads;
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(reads.load(), 0);
  std::size_t present = 0;
  for (int k = 0; k < keys; ++k)
    present += store_->head_object("b", std::string("k").append(std::to_string(k))).ok();
  EXPECT_EQ(blob_files(), present);  // replaced blobs were all deleted once readers closed
}

TEST_F(LocalStoreTest, ReplaceMetaKeepsBytes) {
  make_bucket("b");
  ASSERT_TRUE(put(*store_, "b", "k", "data", {}, "e1").ok());
  ObjectMeta m;
  m.key = "k";
  m.content_type = "image/png";
  m.user_meta = {{"x", "y"}};
  EXPECT_EQ(store_->replace_meta("b", m, "wrong").code(), Errc::precondition_failed);
  auto r = store_->replace_meta("b", m, "e1");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->etag, "e1");
  EXPECT_EQ(r->size, 4u);
  auto h = store_->head_object("b", "k");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->content_type, "image/png");
  EXPECT_EQ(h->user_meta, m.user_meta);
  EXPECT_EQ(*get(*store_, "b", "k"), "data");
  m.key = "absent";
  EXPECT_EQ(store_->replace_meta("b", m, "e1").code(), Errc::no_such_key);
}

Result<PartInfo> put_part(ObjectStore& s, const std::string& key, const std::string& id,
                          std::uint32_t n, const std::string& data) {
  auto w = s.begin_write("b");
  if (!w.ok()) return w.status();
  OBJDIRECT_RETURN_IF_ERROR((*w)->append(bytes_of(data)));
  PartInfo p;
  p.part_number = n;
  p.size = data.size();
  p.etag = "etag-" + std::to_string(n) + "-" + std::to_string(data.size());
  p.checksums = {{"CRC32C", "c" + std::to_string(n)}};
  return s.commit_part("b", key, id, p, std::move(*w));
}

TEST_F(LocalStoreTest, MultipartCompleteAcrossSegments) {
  make_bucket("b");
  UploadInfo u;
  u.key = "big";
  u.checksum_algorithm = "CRC32C";
  u.meta_template.content_type = "video/mp4";
  auto id = store_->create_upload("b", u);
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(id->size(), 32u);
  auto got = store_->get_upload("b", "big", *id);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->meta_template.content_type, "video/mp4");
  EXPECT_EQ(got->checksum_algorithm, "CRC32C");
  EXPECT_EQ(store_->get_upload("b", "other-key", *id).code(), Errc::no_such_upload);

  const std::string p1 = pattern(70'000, 'a');
  const std::string p2old = pattern(10, 'x');
  const std::string p2 = pattern(50'001, 'b');
  const std::string p3 = pattern(33'333, 'c');
  const std::string p4 = pattern(1000, 'd');
  ASSERT_TRUE(put_part(*store_, "big", *id, 1, p1).ok());
  ASSERT_TRUE(put_part(*store_, "big", *id, 2, p2old).ok());
  auto part2 = put_part(*store_, "big", *id, 2, p2);  // replaces
  ASSERT_TRUE(part2.ok());
  ASSERT_TRUE(put_part(*store_, "big", *id, 3, p3).ok());
  ASSERT_TRUE(put_part(*store_, "big", *id, 4, p4).ok());
  EXPECT_EQ(blob_files(), 4u);  // the replaced part 2 is gone
  EXPECT_EQ(put_part(*store_, "big", *id, 0, "x").code(), Errc::invalid_argument);
  EXPECT_EQ(put_part(*store_, "big", *id, 10001, "x").code(), Errc::invalid_argument);
  EXPECT_EQ(put_part(*store_, "big", "nope", 1, "x").code(), Errc::no_such_upload);
  EXPECT_EQ(blob_files(), 4u);

  auto parts = store_->list_parts("b", "big", *id, 0, 1000);
  ASSERT_TRUE(parts.ok());
  ASSERT_EQ(parts->size(), 4u);
  EXPECT_EQ((*parts)[1].size, p2.size());
  EXPECT_EQ((*parts)[1], *part2);
  auto page = store_->list_parts("b", "big", *id, 1, 2);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->size(), 2u);
  EXPECT_EQ((*page)[0].part_number, 2u);
  EXPECT_EQ((*page)[1].part_number, 3u);
  page = store_->list_parts("b", "big", *id, 4, 10);
  ASSERT_TRUE(page.ok());
  EXPECT_TRUE(page->empty());

  ObjectMeta meta;
  meta.key = "big";
  meta.size = p1.size() + p2.size() + p3.size();
  meta.etag = "combined-3";
  meta.parts = {(*parts)[0], (*parts)[1], (*parts)[2]};
  const std::string e1 = "etag-1-" + std::to_string(p1.size());
  const std::string e2 = part2->etag;
  const std::string e3 = "etag-3-" + std::to_string(p3.size());
  EXPECT_EQ(store_->complete_upload("b", *id, meta, {{1, e1}, {2, "stale"}, {3, e3}}, {}).code(),
            Errc::invalid_part);
  EXPECT_EQ(store_->complete_upload("b", *id, meta, {{1, e1}, {5, "x"}}, {}).code(),
            Errc::invalid_part);
  EXPECT_EQ(store_->complete_upload("b", *id, meta, {{2, e2}, {1, e1}, {3, e3}}, {}).code(),
            Errc::invalid_part_order);
  // A failed complete changes nothing.
  ASSERT_TRUE(store_->get_upload("b", "big", *id).ok());
  auto done = store_->complete_upload("b", *id, meta, {{1, e1}, {2, e2}, {3, e3}}, {});
  ASSERT_TRUE(done.ok()) << done.status().to_string();
  EXPECT_EQ(blob_files(), 3u);  // unchosen part 4 deleted; no data copied
  EXPECT_EQ(store_->get_upload("b", "big", *id).code(), Errc::no_such_upload);

  auto r = store_->open_object("b", "big");
  ASSERT_TRUE(r.ok());
  const std::string whole = p1 + p2 + p3;
  EXPECT_EQ(*read_all(**r, 4096), whole);
  EXPECT_EQ(*read_all(**r, 1 << 20), whole);
  // A pread spanning all three segments.
  std::string buf(p2.size() + 20, '\0');
  auto n = (*r)->pread(std::as_writable_bytes(std::span<char>(buf)), p1.size() - 10);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, buf.size());
  EXPECT_EQ(buf, whole.substr(p1.size() - 10, buf.size()));
  // Extents map a range onto per-segment file regions.
  auto ex = (*r)->extents(p1.size() - 10, p2.size() + 20);
  ASSERT_TRUE(ex.ok());
  ASSERT_EQ(ex->size(), 3u);
  EXPECT_EQ((*ex)[0].file_offset, p1.size() - 10);
  EXPECT_EQ((*ex)[0].length, 10u);
  EXPECT_EQ((*ex)[1].file_offset, 0u);
  EXPECT_EQ((*ex)[1].length, p2.size());
  EXPECT_EQ((*ex)[2].file_offset, 0u);
  EXPECT_EQ((*ex)[2].length, 10u);
  std::string joined;
  for (const Extent& e : *ex) {
    std::string part(e.length, '\0');
    ASSERT_EQ(::pread(e.fd, part.data(), e.length, static_cast<off_t>(e.file_offset)),
              static_cast<ssize_t>(e.length));
    joined += part;
  }
  EXPECT_EQ(joined, buf);
  EXPECT_EQ((*r)->meta().etag, "combined-3");
  EXPECT_EQ((*r)->meta().parts, meta.parts);
  auto head = store_->head_object("b", "big");
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head->parts.size(), 3u);
  auto listed = store_->list_objects("b", {});
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->objects.size(), 1u);
  EXPECT_EQ(listed->objects[0].etag, "combined-3");
  EXPECT_TRUE(listed->objects[0].parts.empty());  // listings skip the parts list

  // Overwriting the multipart object frees all its segments once the reader closes.
  ASSERT_TRUE(put(*store_, "b", "big", "small").ok());
  EXPECT_EQ(*read_all(**r), whole);
  r->reset();
  EXPECT_EQ(blob_files(), 1u);
}

TEST_F(LocalStoreTest, MultipartConditionAndSizeChecks) {
  make_bucket("b");
  ASSERT_TRUE(put(*store_, "b", "k", "existing").ok());
  UploadInfo u;
  u.key = "k";
  auto id = store_->create_upload("b", u);
  ASSERT_TRUE(id.ok());
  auto p = put_part(*store_, "k", *id, 1, "abc");
  ASSERT_TRUE(p.ok());
  ObjectMeta meta;
  meta.key = "k";
  meta.size = 3;
  meta.etag = "m-1";
  EXPECT_EQ(store_
                ->complete_upload("b", *id, meta, {{1, p->etag}},
                                  {WriteCondition::Kind::must_be_absent, ""})
                .code(),
            Errc::precondition_failed);
  meta.size = 4;
  EXPECT_EQ(store_->complete_upload("b", *id, meta, {{1, p->etag}}, {}).code(),
            Errc::invalid_argument);
  meta.size = 3;
  meta.key = "other";
  EXPECT_EQ(store_->complete_upload("b", *id, meta, {{1, p->etag}}, {}).code(),
            Errc::no_such_upload);
  meta.key = "k";
  ASSERT_TRUE(store_->complete_upload("b", *id, meta, {{1, p->etag}}, {}).ok());
  EXPECT_EQ(*get(*store_, "b", "k"), "abc");
  EXPECT_EQ(blob_files(), 1u);
}

TEST_F(LocalStoreTest, AbortAndListUploads) {
  make_bucket("b");
  std::vector<std::pair<std::string, std::string>> ups;  // key, id
  for (const std::string key : {"a/1", "a/2", "b", "b", "c/x/y", "d"}) {
    UploadInfo u;
    u.key = key;
    auto id = store_->create_upload("b", u);
    ASSERT_TRUE(id.ok());
    ups.emplace_back(key, *id);
    ASSERT_TRUE(put_part(*store_, key, *id, 1, "data-" + key).ok());
  }
  auto all = store_->list_uploads("b", {});
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->uploads.size(), 6u);
  EXPECT_FALSE(all->truncated);
  for (std::size_t i = 1; i < all->uploads.size(); ++i) {
    const auto& a = all->uploads[i - 1];
    const auto& b = all->uploads[i];
    EXPECT_LE(std::tie(a.key, a.initiated_ns, a.upload_id),
              std::tie(b.key, b.initiated_ns, b.upload_id));
  }

  ListUploadsQuery q;
  q.delimiter = "/";
  auto grouped = store_->list_uploads("b", q);
  ASSERT_TRUE(grouped.ok());
  EXPECT_EQ(grouped->common_prefixes, (std::vector<std::string>{"a/", "c/"}));
  ASSERT_EQ(grouped->uploads.size(), 3u);  // b, b, d

  // Paging two at a time visits every upload exactly once.
  ListUploadsQuery pq;
  pq.max_uploads = 2;
  std::vector<std::string> seen;
  for (int guard = 0; guard < 10; ++guard) {
    auto page = store_->list_uploads("b", pq);
    ASSERT_TRUE(page.ok());
    for (const auto& u : page->uploads) seen.push_back(u.upload_id);
    if (!page->truncated) break;
    pq.key_marker = page->next_key_marker;
    pq.upload_id_marker = page->next_upload_id_marker;
  }
  std::vector<std::string> expect;
  for (const auto& u : all->uploads) expect.push_back(u.upload_id);
  EXPECT_EQ(seen, expect);

  ListUploadsQuery pre;
  pre.prefix = "a/";
  auto a = store_->list_uploads("b", pre);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->uploads.size(), 2u);

  EXPECT_EQ(blob_files(), 6u);
  EXPECT_EQ(store_->abort_upload("b", "a/1", ups[1].second).code(), Errc::no_such_upload);
  ASSERT_TRUE(store_->abort_upload("b", "a/1", ups[0].second).ok());
  EXPECT_EQ(store_->abort_upload("b", "a/1", ups[0].second).code(), Errc::no_such_upload);
  EXPECT_EQ(blob_files(), 5u);
  EXPECT_EQ(store_->list_parts("b", "a/1", ups[0].second, 0, 10).code(), Errc::no_such_upload);
}

TEST_F(LocalStoreTest, ReadersOpenSegmentFilesLazily) {
  make_bucket("b");
  UploadInfo u;
  u.key = "many";
  auto id = store_->create_upload("b", u);
  ASSERT_TRUE(id.ok());
  constexpr int parts = 300;
  std::vector<CompletePartRef> refs;
  std::string whole;
  for (int i = 1; i <= parts; ++i) {
    const std::string data = pattern(100 + i, static_cast<char>(i));
    auto p = put_part(*store_, "many", *id, static_cast<std::uint32_t>(i), data);
    ASSERT_TRUE(p.ok());
    refs.push_back({p->part_number, p->etag});
    whole += data;
  }
  ObjectMeta meta;
  meta.key = "many";
  meta.size = whole.size();
  meta.etag = "m-300";
  ASSERT_TRUE(store_->complete_upload("b", *id, meta, refs, {}).ok());

  const std::size_t before = open_fds();
  auto r = store_->open_object("b", "many");
  ASSERT_TRUE(r.ok());
  EXPECT_LE(open_fds(), before + 1);
  std::string head(50, '\0');
  ASSERT_TRUE((*r)->pread(std::as_writable_bytes(std::span<char>(head)), 0).ok());
  EXPECT_LE(open_fds(), before + 1);
  EXPECT_EQ(*read_all(**r, 1000), whole);
  EXPECT_EQ(open_fds(), before + parts);
  r->reset();
  EXPECT_EQ(open_fds(), before);
}

TEST_F(LocalStoreTest, PersistsAcrossReopenAndLocksTheDirectory) {
  make_bucket("b");
  ASSERT_TRUE(put(*store_, "b", "k", "durable").ok());
  UploadInfo u;
  u.key = "up";
  auto id = store_->create_upload("b", u);
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(put_part(*store_, "up", *id, 1, "part").ok());

  LocalStoreOptions o;
  o.data_dir = dir_;
  o.lmdb_map_size_bytes = 1ull << 30;
  EXPECT_EQ(open_local_store(o).code(), Errc::unavailable);

  reopen(/*fsync=*/true);
  EXPECT_EQ(*get(*store_, "b", "k"), "durable");
  auto parts = store_->list_parts("b", "up", *id, 0, 10);
  ASSERT_TRUE(parts.ok());
  EXPECT_EQ(parts->size(), 1u);
  EXPECT_EQ(blob_files(), 2u);
  ASSERT_TRUE(put(*store_, "b", "k2", "with fsync").ok());  // the fsync path works
  EXPECT_EQ(*get(*store_, "b", "k2"), "with fsync");
}

TEST_F(LocalStoreTest, WriterDroppedWithoutCommitLeavesNothing) {
  make_bucket("b");
  {
    auto w = store_->begin_write("b");
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->append(bytes_of("abandoned")).ok());
    EXPECT_EQ(tmp_files(), 1u);
  }
  EXPECT_EQ(tmp_files(), 0u);
  EXPECT_EQ(blob_files(), 0u);
  // Size mismatch is rejected before anything is renamed.
  auto w = store_->begin_write("b");
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->append(bytes_of("abc")).ok());
  ObjectMeta m;
  m.key = "k";
  m.size = 4;
  EXPECT_EQ(store_->commit_object("b", m, std::move(*w), {}).code(), Errc::invalid_argument);
  EXPECT_EQ(tmp_files(), 0u);
  EXPECT_EQ(blob_files(), 0u);
}

// Each case recovery handles, staged by hand: a leftover temporary file, an orphan blob (crash
// between rename and commit), a stray file, and a blob whose deletion was recorded in `gc` but
// not carried out.
TEST_F(LocalStoreTest, RecoveryRemovesTmpOrphansAndPendingDeletions) {
  make_bucket("b");
  ASSERT_TRUE(put(*store_, "b", "keep", "kept data").ok());
  ASSERT_EQ(blob_files(), 1u);
  store_.reset();

  auto touch = [](const std::string& path) {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path) << "junk";
  };
  const local::BlobId orphan = local::BlobId::random();
  const local::BlobId pending = local::BlobId::random();
  touch(dir_ + "/tmp/" + local::BlobId::random().hex());
  touch(dir_ + "/blobs/" + orphan.hex().substr(0, 2) + "/" + orphan.hex());
  touch(dir_ + "/blobs/" + pending.hex().substr(0, 2) + "/" + pending.hex());
  touch(dir_ + "/blobs/zz/not-a-blob");
  {
    auto db = local::MetaDb::open({dir_ + "/meta", 1ull << 30, false});
    ASSERT_TRUE(db.ok());
    auto txn = local::Txn::begin(**db, true);
    ASSERT_TRUE(txn.ok());
    const std::string_view id(reinterpret_cast<const char*>(pending.bytes.data()), 16);
    ASSERT_TRUE(txn->put((*db)->gc, id, "").ok());
    ASSERT_TRUE(txn->commit().ok());
  }
  EXPECT_EQ(blob_files(), 4u);
  EXPECT_EQ(tmp_files(), 1u);

  reopen();
  EXPECT_EQ(tmp_files(), 0u);
  EXPECT_EQ(blob_files(), 1u);
  EXPECT_EQ(*get(*store_, "b", "keep"), "kept data");
  store_.reset();
  auto db = local::MetaDb::open({dir_ + "/meta", 1ull << 30, false});
  ASSERT_TRUE(db.ok());
  auto txn = local::Txn::begin(**db, false);
  ASSERT_TRUE(txn.ok());
  MDB_stat st;
  ASSERT_EQ(mdb_stat(txn->get(), (*db)->gc, &st), 0);
  EXPECT_EQ(st.ms_entries, 0u);  // pending deletions were carried out and forgotten
}

TEST_F(LocalStoreTest, CreatesNestedDataDirectory) {
  LocalStoreOptions o;
  o.data_dir = dir_ + "/nested/deeper/data";
  o.fsync = true;
  o.lmdb_map_size_bytes = 1ull << 30;
  auto s = open_local_store(o);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  BucketInfo b;
  b.name = "b";
  ASSERT_TRUE((*s)->create_bucket(b).ok());
  ASSERT_TRUE(put(**s, "b", "k", "v").ok());
  EXPECT_TRUE(std::filesystem::is_directory(o.data_dir + "/blobs"));
  ListUploadsQuery q;
  q.max_uploads = 0;
  UploadInfo u;
  u.key = "k";
  ASSERT_TRUE((*s)->create_upload("b", u).ok());
  auto ups = (*s)->list_uploads("b", q);
  ASSERT_TRUE(ups.ok());
  EXPECT_TRUE(ups->uploads.empty());
  EXPECT_FALSE(ups->truncated);
}

TEST_F(LocalStoreTest, FullMetadataMapIsNoSpace) {
  store_.reset();
  LocalStoreOptions o;
  o.data_dir = dir_ + "/small";
  o.fsync = false;
  o.lmdb_map_size_bytes = 256 * 1024;
  auto s = open_local_store(o);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  BucketInfo b;
  b.name = "b";
  ASSERT_TRUE((*s)->create_bucket(b).ok());
  Errc last = Errc::ok;
  for (int i = 0; i < 5000 && last == Errc::ok; ++i) {
    last = put(**s, "b", std::string(900, 'k') + std::to_string(i), "").code();
  }
  EXPECT_EQ(last, Errc::no_space);
}

// Fills a real filesystem: a 2 MiB tmpfs mounted for the test (needs CAP_SYS_ADMIN; skipped
// otherwise).
TEST(LocalStoreNoSpace, FullFilesystemIsNoSpace) {
  char tmpl[] = "/tmp/objdirect-enospc-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string mnt = tmpl;
  if (::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=2m") != 0) {
    ::rmdir(mnt.c_str());
    GTEST_SKIP() << "cannot mount a small tmpfs here (" << std::strerror(errno)
                 << "); run as root to exercise ENOSPC";
  }
  // Unmounts even when an assertion below returns early.
  struct Unmount {
    std::string dir;
    ~Unmount() {
      ::umount(dir.c_str());
      ::rmdir(dir.c_str());
    }
  } unmount{mnt};
  {
    LocalStoreOptions o;
    o.data_dir = mnt + "/data";
    o.fsync = false;
    o.lmdb_map_size_bytes = 64ull << 20;
    auto s = open_local_store(o);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    BucketInfo b;
    b.name = "b";
    ASSERT_TRUE((*s)->create_bucket(b).ok());
    ASSERT_TRUE(put(**s, "b", "small", "fits").ok());
    auto w = (*s)->begin_write("b");
    ASSERT_TRUE(w.ok());
    const std::string chunk(256 * 1024, 'x');
    Status st;
    for (int i = 0; i < 64 && st.ok(); ++i) st = (*w)->append(bytes_of(chunk));
    EXPECT_EQ(st.code(), Errc::no_space) << st.to_string();
    EXPECT_EQ((*w)->append(bytes_of("more")).code(), Errc::io_error);  // unusable after error
    w->reset();  // the temporary file goes away and frees the space
    EXPECT_EQ(testing::count_files(o.data_dir + "/tmp"), 0u);
    ASSERT_TRUE(put(**s, "b", "after", "still works").ok());
    EXPECT_EQ(*get(**s, "b", "after"), "still works");
    EXPECT_EQ(*get(**s, "b", "small"), "fits");
  }
}

}  // namespace
}  // namespace objdirect::storage
