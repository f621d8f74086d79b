// Crash safety: a forked child writes, overwrites, deletes and assembles multipart objects in a
// loop (fsync on) and is killed with SIGKILL at a random moment; the parent then reopens the
// store (running recovery) and checks that every object is a complete committed version, that
// no committed state went backwards, and that no temporary or orphaned blob file remains.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <thread>

#include "storage/local/local_store.hpp"
#include "storage/local/local_store_test_util.hpp"

namespace objdirect::storage {
namespace {

using testing::bytes_of;
using testing::count_files;
using testing::read_all;

constexpr int key_count = 12;

std::string key_name(int i) {
  return std::string("obj/").append(std::to_string(i));
}

// A self-describing body: "<key>|<version>|" followed by bytes derived from both, so a reader
// can tell a complete version from a torn or mixed one.
std::string body(const std::string& key, std::uint64_t version) {
  std::string s = key + "|" + std::to_string(version) + "|";
  std::mt19937_64 rng(std::hash<std::string>{}(s));
  const std::size_t n = 1000 + rng() % 40'000;
  s.reserve(s.size() + n);
  for (std::size_t i = 0; i < n; ++i) s.push_back(static_cast<char>('a' + rng() % 26));
  return s;
}

std::string etag_of(const std::string& data) {
  return std::string("h").append(std::to_string(std::hash<std::string>{}(data)));
}

// Parses "<key>|<version>|"; returns false if the body is not an intact version of key.
bool intact(const std::string& key, const std::string& data, std::uint64_t* version) {
  const std::string head = key + "|";
  if (!data.starts_with(head)) return false;
  const std::size_t bar = data.find('|', head.size());
  if (bar == std::string::npos) return false;
  *version = std::stoull(data.substr(head.size(), bar - head.size()));
  return data == body(key, *version);
}

Status put_version(ObjectStore& s, const std::string& key, std::uint64_t version) {
  const std::string data = body(key, version);
  auto w = s.begin_write("b");
  if (!w.ok()) return w.status();
  for (std::size_t at = 0; at < data.size(); at += 4096) {
    OBJDIRECT_RETURN_IF_ERROR((*w)->append(bytes_of(std::string_view(data).substr(at, 4096))));
  }
  ObjectMeta m;
  m.key = key;
  m.size = data.size();
  m.etag = etag_of(data);
  auto r = s.commit_object("b", m, std::move(*w), {});
  return r.status();
}

// Uploads body(key, version) in three parts; completes it unless `leave_open`.
Status multipart_version(ObjectStore& s, const std::string& key, std::uint64_t version,
                         bool leave_open) {
  const std::string data = body(key, version);
  UploadInfo u;
  u.key = key;
  auto id = s.create_upload("b", u);
  if (!id.ok()) return id.status();
  const std::size_t cut1 = data.size() / 3;
  const std::size_t cut2 = 2 * data.size() / 3;
  const std::string pieces[3] = {data.substr(0, cut1), data.substr(cut1, cut2 - cut1),
                                 data.substr(cut2)};
  std::vector<CompletePartRef> refs;
  std::vector<PartInfo> infos;
  for (std::uint32_t n = 1; n <= 3; ++n) {
    auto w = s.begin_write("b");
    if (!w.ok()) return w.status();
    OBJDIRECT_RETURN_IF_ERROR((*w)->append(bytes_of(pieces[n - 1])));
    PartInfo p;
    p.part_number = n;
    p.size = pieces[n - 1].size();
    p.etag = etag_of(pieces[n - 1]);
    auto c = s.commit_part("b", key, *id, p, std::move(*w));
    if (!c.ok()) return c.status();
    refs.push_back({n, p.etag});
    infos.push_back(*c);
  }
  if (leave_open) return Status();
  ObjectMeta m;
  m.key = key;
  m.size = data.size();
  m.etag = etag_of(data) + "-3";
  m.parts = infos;
  return s.complete_upload("b", *id, m, refs, {}).status();
}

[[noreturn]] void child_main(const std::string& dir, std::uint64_t seed) {
  LocalStoreOptions o;
  o.data_dir = dir;
  o.fsync = true;
  o.lmdb_map_size_bytes = 1ull << 30;
  auto s = open_local_store(o);
  if (!s.ok()) _exit(2);
  std::mt19937_64 rng(seed);
  std::uint64_t version = seed * 1'000'000;
  while (true) {
    const std::string key = key_name(static_cast<int>(rng() % key_count));
    Status st;
    switch (rng() % 10) {
      case 0:
        st = (*s)->delete_object("b", key);
        break;
      case 1:
      case 2:
        st = multipart_version(**s, key, ++version, false);
        break;
      case 3: {
        st = multipart_version(**s, key, ++version, true);
        // Abort most open uploads again so they do not pile up.
        auto ups = (*s)->list_uploads("b", {});
        if (st.ok() && ups.ok() && ups->uploads.size() > 3) {
          const UploadInfo& u = ups->uploads[rng() % ups->uploads.size()];
          st = (*s)->abort_upload("b", u.key, u.upload_id);
        }
        break;
      }
      default:
        st = put_version(**s, key, ++version);
        break;
    }
    if (!st.ok()) _exit(3);
  }
}

class CrashTest : public testing::StoreFixture {};

TEST_F(CrashTest, KilledWritersLeaveOldOrNewAndNoOrphans) {
  make_bucket("b");
  for (int i = 0; i < key_count; ++i) ASSERT_TRUE(put_version(*store_, key_name(i), i).ok());
  std::map<std::string, std::uint64_t> floor;  // version seen after the previous crash
  std::mt19937_64 rng(77);
  constexpr int rounds = 12;
  int changed = 0;            // objects whose version moved between crashes
  std::size_t leftovers = 0;  // tmp files plus blobs recovery removed
  for (int round = 1; round <= rounds; ++round) {
    store_.reset();  // LMDB environments must not cross fork()
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) child_main(dir_, static_cast<std::uint64_t>(round));
    std::this_thread::sleep_for(std::chrono::milliseconds(5 + rng() % 120));
    ASSERT_EQ(::kill(pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "child exited early with " << WEXITSTATUS(status);

    const std::size_t tmp_before = count_files(dir_ + "/tmp");
    const std::size_t blobs_before = blob_files();
    reopen();  // recovery runs here
    leftovers += tmp_before + (blobs_before - blob_files());
    EXPECT_EQ(count_files(dir_ + "/tmp"), 0u) << "round " << round;
    std::size_t expected_blobs = 0;
    for (int i = 0; i < key_count; ++i) {
      const std::string key = key_name(i);
      auto r = store_->open_object("b", key);
      if (r.code() == Errc::no_such_key) continue;  // deleted: also a committed state
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      auto data = read_all(**r);
      ASSERT_TRUE(data.ok()) << data.status().to_string();
      std::uint64_t version = 0;
      ASSERT_TRUE(intact(key, *data, &version)) << key << " round " << round;
      const ObjectMeta& m = (*r)->meta();
      EXPECT_EQ(m.size, data->size());
      if (m.parts.empty()) {
        EXPECT_EQ(m.etag, etag_of(*data));
        expected_blobs += 1;
      } else {
        EXPECT_EQ(m.etag, etag_of(*data) + "-3");
        EXPECT_EQ(m.parts.size(), 3u);
        expected_blobs += 3;  // one blob per part, no copy
      }
      // Deletes reset the floor: a later version may legitimately be absent, but never older.
      auto it = floor.find(key);
      if (it != floor.end()) {
        EXPECT_GE(version, it->second) << key << " went back in time";
      }
      changed += version != floor[key];
      floor[key] = version;
    }
    auto ups = store_->list_uploads("b", {});
    ASSERT_TRUE(ups.ok());
    for (const UploadInfo& u : ups->uploads) {
      auto parts = store_->list_parts("b", u.key, u.upload_id, 0, 1000);
      ASSERT_TRUE(parts.ok());
      expected_blobs += parts->size();
    }
    EXPECT_EQ(blob_files(), expected_blobs) << "orphaned or missing blobs after round " << round;
  }
  // The children got real work done between kills, so the checks above had something to check.
  EXPECT_GT(changed, rounds);
  std::printf("[figures] %d object versions changed across %d kills; recovery removed %zu files\n",
              changed, rounds, leftovers);
}

}  // namespace
}  // namespace objdirect::storage
