// Helpers shared by the storage/local tests: a temporary data directory, a store opened on it,
// and one-call put/read helpers.
//
// Thread safety: a StoreFixture is used from the test thread; put/read are as thread-safe as
// the store.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "storage/local/local_store.hpp"

namespace objdirect::storage::testing {

inline std::span<const std::byte> bytes_of(std::string_view s) {
  return std::as_bytes(std::span<const char>(s.data(), s.size()));
}

// Writes `data` as object `key` (etag = "e-" + data size + first bytes, good enough for tests).
inline Result<ObjectMeta> put(ObjectStore& store, std::string_view bucket, std::string_view key,
                              std::string_view data, WriteCondition cond = {},
                              std::string etag = "") {
  auto w = store.begin_write(bucket);
  if (!w.ok()) return w.status();
  // Append in uneven pieces so the writer's loop is exercised.
  std::size_t at = 0;
  while (at < data.size()) {
    const std::size_t n = std::min<std::size_t>(data.size() - at, 1 + at % 7919);
    OBJDIRECT_RETURN_IF_ERROR((*w)->append(bytes_of(data.substr(at, n))));
    at += n;
  }
  ObjectMeta meta;
  meta.key = std::string(key);
  meta.size = data.size();
  meta.etag = etag.empty() ? "etag-" + std::to_string(std::hash<std::string_view>{}(data)) : etag;
  meta.content_type = "text/plain";
  return store.commit_object(bucket, std::move(meta), std::move(*w), cond);
}

// Reads the whole object through pread in chunks of `chunk` bytes.
inline Result<std::string> read_all(ObjectReader& r, std::size_t chunk = 65536) {
  std::string out(r.meta().size, '\0');
  std::size_t at = 0;
  while (at < out.size()) {
    const std::size_t n = std::min(chunk, out.size() - at);
    auto got = r.pread(std::as_writable_bytes(std::span<char>(out.data() + at, n)), at);
    if (!got.ok()) return got.status();
    if (*got == 0) return Status(Errc::internal, "unexpected EOF");
    at += *got;
  }
  return out;
}

inline Result<std::string> get(ObjectStore& store, std::string_view bucket, std::string_view key) {
  auto r = store.open_object(bucket, key);
  if (!r.ok()) return r.status();
  return read_all(**r);
}

// Number of regular files below dir (recursively).
inline std::size_t count_files(const std::string& dir) {
  std::size_t n = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    n += e.is_regular_file();
  }
  return n;
}

class StoreFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/objdirect-store-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    reopen();
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  void reopen(bool fsync = false, std::uint32_t versions_per_key_max = 10'000) {
    store_.reset();
    LocalStoreOptions o;
    o.data_dir = dir_;
    o.fsync = fsync;
    o.versions_per_key_max = versions_per_key_max;
    o.lmdb_map_size_bytes = 1ull << 30;
    auto s = open_local_store(o);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    store_ = std::move(*s);
  }
  void make_bucket(const std::string& name, const std::string& owner = "owner") {
    BucketInfo b;
    b.name = name;
    b.owner = owner;
    ASSERT_TRUE(store_->create_bucket(b).ok());
  }
  std::size_t blob_files() const { return count_files(dir_ + "/blobs"); }
  std::size_t tmp_files() const { return count_files(dir_ + "/tmp"); }

  std::string dir_;
  std::unique_ptr<ObjectStore> store_;
};

}  // namespace objdirect::storage::testing
