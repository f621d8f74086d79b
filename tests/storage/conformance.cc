// The ObjectStore conformance suite (see conformance.hpp).
#include "conformance.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/checksum.hpp"

namespace objdirect::storage::conformance {
namespace {

constexpr const char* kChildEnv = "OBJDIRECT_CONFORMANCE_CHILD";
constexpr const char* kChildFdEnv = "OBJDIRECT_CONFORMANCE_CHILD_FD";
constexpr std::string_view kBucket = "conf";

std::span<const std::byte> bytes_of(std::string_view s) {
  return std::as_bytes(std::span<const char>(s.data(), s.size()));
}

// Content that describes itself: 8-byte little-endian words (version << 32 | word index), so a
// reader can tell a complete version from a torn or mixed one. size is a multiple of 8.
std::string pattern(std::uint32_t version, std::size_t size) {
  std::string s(size, '\0');
  for (std::size_t i = 0; i + 8 <= size; i += 8) {
    const std::uint64_t w = (std::uint64_t(version) << 32) | (i / 8);
    std::memcpy(s.data() + i, &w, 8);
  }
  return s;
}

// The version the content was made with, or -1 if it is not one complete pattern().
std::int64_t pattern_version(std::string_view s) {
  if (s.empty() || s.size() % 8 != 0) return -1;
  std::uint64_t w0;
  std::memcpy(&w0, s.data(), 8);
  const std::uint32_t v = std::uint32_t(w0 >> 32);
  for (std::size_t i = 0; i < s.size(); i += 8) {
    std::uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    if (w != ((std::uint64_t(v) << 32) | (i / 8))) return -1;
  }
  return v;
}

std::string etag_of(std::string_view data) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016zx", std::hash<std::string_view>{}(data));
  return std::string(buf) + "-" + std::to_string(data.size());
}

// The backend under test (set in SetUp).
const BackendFactory* g_factory = nullptr;

// The ETag the backend reports for an object written by put() with `data`.
std::string want_etag(std::string_view data) {
  if (!g_factory || !g_factory->backend_etags) return etag_of(data);
  Md5 md5;
  md5.update(data.data(), data.size());
  return md5.hex();
}

// The ETag of a multipart object of these parts, written by complete() with n parts.
std::string want_multipart_etag(const std::vector<std::string>& parts_data) {
  if (!g_factory || !g_factory->backend_etags) return "mp-" + std::to_string(parts_data.size());
  std::vector<std::string> md5s;
  for (const auto& d : parts_data) md5s.push_back(want_etag(d));
  return multipart_etag(md5s).value_or("?");
}

// The size of part n (1..3) of a multipart test upload: small, unless the backend enforces a
// minimum part size (see BackendFactory::part_bytes_min). A multiple of 8.
std::size_t part_size(std::size_t small, std::uint32_t n) {
  const std::uint64_t min = g_factory ? g_factory->part_bytes_min : 0;
  return (min > small ? std::size_t(min) : small) + 8 * n;
}

// Writes data in uneven appends (1 byte .. 1 MiB) and commits it.
// Objects are written with the key hint (begin_write_for), parts without (begin_write), so both
// entry points are covered.
Result<ObjectMeta> put(ObjectStore& store, std::string_view bucket, std::string_view key,
                       std::string_view data, WriteCondition cond = {}) {
  auto w = store.begin_write_for(bucket, key);
  if (!w.ok()) return w.status();
  std::size_t at = 0, step = 1;
  while (at < data.size()) {
    const std::size_t n = std::min(data.size() - at, step);
    OBJDIRECT_RETURN_IF_ERROR((*w)->append(bytes_of(data.substr(at, n))));
    at += n;
    step = step >= (1u << 20) ? 7 : step * 5 + 3;
  }
  if ((*w)->size() != data.size()) return Status(Errc::internal, "writer size mismatch");
  ObjectMeta meta;
  meta.key = std::string(key);
  meta.size = data.size();
  meta.etag = etag_of(data);
  meta.content_type = "application/octet-stream";
  meta.user_meta = {{"origin", "conformance"}};
  meta.owner = "tester";
  return store.commit_object(bucket, std::move(meta), std::move(*w), cond);
}

Result<std::string> read_all(ObjectReader& r) {
  std::string out(r.meta().size, '\0');
  std::size_t at = 0;
  while (at < out.size()) {
    const std::size_t n = std::min<std::size_t>(out.size() - at, 3u << 20);
    auto got = r.pread(std::as_writable_bytes(std::span<char>(out.data() + at, n)), at);
    if (!got.ok()) return got.status();
    if (*got == 0) return Status(Errc::internal, "unexpected EOF at " + std::to_string(at));
    at += *got;
  }
  std::byte extra[1];
  auto eof = r.pread(extra, out.size());
  if (!eof.ok()) return eof.status();
  if (*eof != 0) return Status(Errc::internal, "bytes past the end");
  return out;
}

Result<std::string> get(ObjectStore& store, std::string_view bucket, std::string_view key) {
  auto r = store.open_object(bucket, key);
  if (!r.ok()) return r.status();
  return read_all(**r);
}

Result<PartInfo> put_part(ObjectStore& store, std::string_view key, std::string_view upload,
                          std::uint32_t number, std::string_view data) {
  auto w = store.begin_write(kBucket);
  if (!w.ok()) return w.status();
  OBJDIRECT_RETURN_IF_ERROR((*w)->append(bytes_of(data)));
  PartInfo p;
  p.part_number = number;
  p.size = data.size();
  p.etag = etag_of(data);
  return store.commit_part(kBucket, key, upload, p, std::move(*w));
}

Result<std::string> start_upload(ObjectStore& store, std::string_view key) {
  UploadInfo u;
  u.key = std::string(key);
  u.meta_template.content_type = "text/plain";
  u.meta_template.owner = "tester";
  return store.create_upload(kBucket, u);
}

Result<ObjectMeta> complete(ObjectStore& store, std::string_view key, std::string_view upload,
                            const std::vector<std::pair<PartInfo, std::string>>& parts,
                            WriteCondition cond = {}) {
  ObjectMeta meta;
  meta.key = std::string(key);
  std::vector<CompletePartRef> refs;
  for (const auto& [p, data] : parts) {
    meta.size += p.size;
    meta.parts.push_back(p);
    refs.push_back({p.part_number, p.etag});
  }
  meta.etag = "mp-" + std::to_string(parts.size());
  meta.owner = "tester";
  return store.complete_upload(kBucket, upload, std::move(meta), refs, cond);
}

}  // namespace

void Conformance::SetUp() {
  const BackendFactory& f = *GetParam();
  g_factory = &f;
  if (f.skip_reason) {
    if (auto why = f.skip_reason(); !why.empty()) GTEST_SKIP() << why;
  }
  const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  if (test.starts_with("KillWriterChild/") && std::getenv(kChildEnv) == nullptr) {
    GTEST_SKIP() << "runs only as the writer process of KillBetweenDataAndCommit";
  }
  if (const char* loc = std::getenv(kChildEnv)) {
    child_ = true;
    auto s = f.attach(loc);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    store_ = std::move(*s);
    return;
  }
  auto b = f.create();
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  backend_ = std::move(*b);
  reopen();
}

void Conformance::TearDown() {
  store_.reset();
  backend_.reset();
}

void Conformance::reopen() {
  store_.reset();
  auto s = backend_->open();
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  store_ = std::move(*s);
}

void Conformance::make_bucket(const std::string& name) {
  BucketInfo b;
  b.name = name;
  b.owner = "tester";
  b.region = "us-east-1";
  auto st = store_->create_bucket(b);
  ASSERT_TRUE(st.ok()) << st.to_string();
}

TEST_P(Conformance, Buckets) {
  if (child_) GTEST_SKIP();
  make_bucket("b-one");
  make_bucket("a-two");
  BucketInfo b;
  b.name = "b-one";
  b.owner = "tester";
  EXPECT_EQ(store_->create_bucket(b).code(), Errc::bucket_already_owned_by_you);
  b.owner = "someone-else";
  // Without owners (one upstream account) the same account asks again: owned by you.
  EXPECT_EQ(store_->create_bucket(b).code(), GetParam()->owners_and_parts
                                                 ? Errc::bucket_already_exists
                                                 : Errc::bucket_already_owned_by_you);
  auto all = store_->list_buckets();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].name, "a-two");
  EXPECT_EQ((*all)[1].name, "b-one");
  if (GetParam()->owners_and_parts) {
    EXPECT_EQ((*all)[1].owner, "tester");
  }
  EXPECT_EQ(store_->head_bucket("nope").code(), Errc::no_such_bucket);
  EXPECT_EQ(store_->begin_write("nope").code(), Errc::no_such_bucket);
  EXPECT_EQ(store_->head_object("nope", "k").code(), Errc::no_such_bucket);
  EXPECT_EQ(store_->list_objects("nope", {}).code(), Errc::no_such_bucket);

  ASSERT_TRUE(put(*store_, "b-one", "k", "data").ok());
  EXPECT_EQ(store_->delete_bucket("b-one").code(), Errc::bucket_not_empty);
  ASSERT_TRUE(store_->delete_object("b-one", "k").ok());
  // An in-progress upload does not keep the bucket alive.
  UploadInfo u;
  u.key = "up";
  ASSERT_TRUE(store_->create_upload("b-one", u).ok());
  EXPECT_TRUE(store_->delete_bucket("b-one").ok());
  EXPECT_EQ(store_->head_bucket("b-one").code(), Errc::no_such_bucket);
  EXPECT_EQ(store_->delete_bucket("b-one").code(), Errc::no_such_bucket);
  // Survives a reopen.
  reopen();
  auto again = store_->list_buckets();
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->size(), 1u);
  EXPECT_EQ((*again)[0].name, "a-two");
}

// Object and bucket tags: stored with the object by commit_object, replaced alone by
// set_object_tags (bytes, ETag and mtime stay), kept by uploads, durable across a reopen.
TEST_P(Conformance, Tags) {
  if (child_) GTEST_SKIP();
  make_bucket(std::string(kBucket));
  if (!GetParam()->tags) {
    // The gateway: object and bucket tags live upstream (set and read through the store, not in
    // the metadata of HEAD); CORS is not passed through.
    EXPECT_FALSE(store_->tags_in_meta());
    ASSERT_TRUE(put(*store_, kBucket, "k", "data").ok());
    EXPECT_TRUE(store_->get_object_version_tags(kBucket, "k", "")->tags.empty());
    const TagSet ab{{"a", "1"}, {"b", "two words"}};
    auto set = store_->set_object_tags(kBucket, "k", ab);
    ASSERT_TRUE(set.ok()) << set.status().to_string();
    auto got = store_->get_object_version_tags(kBucket, "k", "");
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    EXPECT_EQ(got->tags, ab);
    EXPECT_EQ(*get(*store_, kBucket, "k"), "data");
    ASSERT_TRUE(store_->set_object_tags(kBucket, "k", {}).ok());  // DeleteObjectTagging
    EXPECT_TRUE(store_->get_object_version_tags(kBucket, "k", "")->tags.empty());
    // commit_object sends meta.tags (x-amz-tagging).
    auto w = store_->begin_write_for(kBucket, "tagged");
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->append(bytes_of("abc")).ok());
    ObjectMeta meta;
    meta.key = "tagged";
    meta.size = 3;
    meta.etag = etag_of("abc");
    meta.tags = ab;
    ASSERT_TRUE(store_->commit_object(kBucket, meta, std::move(*w), {}).ok());
    EXPECT_EQ(store_->get_object_version_tags(kBucket, "tagged", "")->tags, ab);
    EXPECT_EQ(store_->set_object_tags(kBucket, "absent", ab).code(), Errc::no_such_key);
    EXPECT_EQ(store_->get_object_version_tags(kBucket, "absent", "").code(), Errc::no_such_key);
    // Bucket tags are passed through too; head_bucket carries none (get_bucket_tags asks).
    EXPECT_TRUE(store_->get_bucket_tags(kBucket)->empty());
    ASSERT_TRUE(store_->set_bucket_tags(kBucket, ab).ok());
    auto bt = store_->get_bucket_tags(kBucket);
    ASSERT_TRUE(bt.ok()) << bt.status().to_string();
    EXPECT_EQ(*bt, ab);
    ASSERT_TRUE(store_->set_bucket_tags(kBucket, {}).ok());  // DeleteBucketTagging
    EXPECT_TRUE(store_->get_bucket_tags(kBucket)->empty());
    EXPECT_EQ(store_->set_bucket_tags("nope", ab).code(), Errc::no_such_bucket);
    EXPECT_EQ(store_->get_bucket_tags("nope").code(), Errc::no_such_bucket);
    // CORS is passed through too (lifecycle likewise): the upstream keeps the rules, or says
    // NotImplemented for both calls. A policy needs the state bucket (none here).
    const std::string cors =
        "<CORSConfiguration><CORSRule><AllowedOrigin>https://a.example</AllowedOrigin>"
        "<AllowedMethod>GET</AllowedMethod></CORSRule></CORSConfiguration>";
    const Status put_cors = store_->set_bucket_config(kBucket, "cors", cors);
    if (put_cors.code() == Errc::not_implemented) {
      EXPECT_EQ(store_->bucket_config(kBucket, "cors").code(), Errc::not_implemented);
    } else {
      ASSERT_TRUE(put_cors.ok()) << put_cors.to_string();
      auto got = store_->bucket_config(kBucket, "cors");
      ASSERT_TRUE(got.ok() && got->has_value()) << got.status().to_string();
      EXPECT_NE((*got)->find("https://a.example"), std::string::npos) << **got;
      ASSERT_TRUE(store_->set_bucket_config(kBucket, "cors", "").ok());
      got = store_->bucket_config(kBucket, "cors");
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      EXPECT_FALSE(got->has_value()) << "deleted through this store: not served from the cache";
    }
    EXPECT_EQ(store_->set_bucket_config(kBucket, "policy", "{}").code(), Errc::not_implemented);
    return;
  }
  const TagSet tags{{"project", "blue"}, {"owner", "ml team"}};
  // commit_object stores meta.tags.
  {
    auto w = store_->begin_write_for(kBucket, "tagged");
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->append(bytes_of("abc")).ok());
    ObjectMeta meta;
    meta.key = "tagged";
    meta.size = 3;
    meta.etag = etag_of("abc");
    meta.tags = tags;
    ASSERT_TRUE(store_->commit_object(kBucket, meta, std::move(*w), {}).ok());
  }
  auto h = store_->head_object(kBucket, "tagged");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->tags, tags);

  auto plain = put(*store_, kBucket, "k", "data");
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(plain->tags.empty());
  const TagSet other{{"x", ""}};
  auto set = store_->set_object_tags(kBucket, "k", other);
  ASSERT_TRUE(set.ok()) << set.status().to_string();
  EXPECT_EQ(set->tags, other);
  auto after = store_->head_object(kBucket, "k");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->tags, other);
  EXPECT_EQ(after->etag, plain->etag);
  EXPECT_EQ(after->mtime_ns, plain->mtime_ns);
  EXPECT_EQ(after->user_meta, plain->user_meta);
  EXPECT_EQ(*get(*store_, kBucket, "k"), "data");
  // Removing all tags.
  ASSERT_TRUE(store_->set_object_tags(kBucket, "tagged", {}).ok());
  EXPECT_TRUE(store_->head_object(kBucket, "tagged")->tags.empty());
  EXPECT_EQ(store_->set_object_tags(kBucket, "absent", other).code(), Errc::no_such_key);
  EXPECT_EQ(store_->set_object_tags("nope", "k", other).code(), Errc::no_such_bucket);
  // An overwrite carries its own tags (none here).
  ASSERT_TRUE(put(*store_, kBucket, "k", "new").ok());
  EXPECT_TRUE(store_->head_object(kBucket, "k")->tags.empty());
  ASSERT_TRUE(store_->set_object_tags(kBucket, "k", tags).ok());

  // Uploads keep the tags of their template.
  UploadInfo u;
  u.key = "mp";
  u.meta_template.tags = tags;
  auto id = store_->create_upload(kBucket, u);
  ASSERT_TRUE(id.ok());
  auto got = store_->get_upload(kBucket, "mp", *id);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->meta_template.tags, tags);

  // Bucket tags.
  EXPECT_TRUE(store_->head_bucket(kBucket)->tags.empty());
  ASSERT_TRUE(store_->set_bucket_tags(kBucket, tags).ok());
  EXPECT_EQ(store_->head_bucket(kBucket)->tags, tags);
  EXPECT_EQ(*store_->get_bucket_tags(kBucket), tags);
  EXPECT_EQ(store_->get_bucket_tags("nope").code(), Errc::no_such_bucket);
  EXPECT_EQ(store_->set_bucket_tags("nope", tags).code(), Errc::no_such_bucket);

  // Configuration documents: set, replace, remove, independent of the tags.
  ASSERT_TRUE(store_->set_bucket_config(kBucket, "cors", "<CORSConfiguration/>").ok());
  ASSERT_TRUE(store_->set_bucket_config(kBucket, "policy", "{}").ok());
  ASSERT_TRUE(store_->set_bucket_config(kBucket, "policy", "{\"v\":1}").ok());
  EXPECT_EQ(store_->head_bucket(kBucket)->config,
            (std::map<std::string, std::string>{{"cors", "<CORSConfiguration/>"},
                                                {"policy", "{\"v\":1}"}}));
  ASSERT_TRUE(store_->set_bucket_config(kBucket, "cors", "").ok());
  EXPECT_EQ(store_->set_bucket_config("nope", "cors", "x").code(), Errc::no_such_bucket);

  reopen();
  EXPECT_EQ(store_->head_bucket(kBucket)->config,
            (std::map<std::string, std::string>{{"policy", "{\"v\":1}"}}));
  EXPECT_EQ(store_->head_object(kBucket, "k")->tags, tags);
  EXPECT_EQ(store_->head_bucket(kBucket)->tags, tags);
  auto listed = store_->list_buckets();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].tags, tags);
  ASSERT_TRUE(store_->set_bucket_tags(kBucket, {}).ok());
  EXPECT_TRUE(store_->head_bucket(kBucket)->tags.empty());
  ASSERT_TRUE(store_->abort_upload(kBucket, "mp", *id).ok());
}

TEST_P(Conformance, ObjectsRoundTrip) {
  if (child_) GTEST_SKIP();
  make_bucket(std::string(kBucket));
  std::mt19937_64 rng(7);
  // Sizes around the usual stripe, inline and buffer boundaries.
  const std::vector<std::size_t> sizes = {
      0, 1, 8, 65535, 65536, 65537, 1 << 20, (1 << 20) + 3, (3 << 20) + 5, 9 << 20};
  auto data_for = [&](std::size_t i) {
    std::mt19937_64 gen(i + 1);
    std::string data(sizes[i], '\0');
    for (auto& c : data) c = char(gen());
    return data;
  };
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const std::string data = data_for(i);
    const std::string key = "obj/" + std::to_string(i);
    auto m = put(*store_, kBucket, key, data);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    EXPECT_EQ(m->size, data.size());
    EXPECT_GT(m->mtime_ns, 0);
    auto h = store_->head_object(kBucket, key);
    ASSERT_TRUE(h.ok());
    EXPECT_EQ(h->etag, want_etag(data));
    EXPECT_EQ(m->etag, h->etag);
    EXPECT_EQ(h->size, data.size());
    EXPECT_EQ(h->content_type, "application/octet-stream");
    ASSERT_EQ(h->user_meta.size(), 1u);
    EXPECT_EQ(h->user_meta[0].second, "conformance");
    auto r = store_->open_object(kBucket, key);
    ASSERT_TRUE(r.ok());
    auto all = read_all(**r);
    ASSERT_TRUE(all.ok()) << all.status().to_string();
    EXPECT_TRUE(*all == data) << "size " << data.size();
    // Random ranges, including ones crossing internal boundaries and running past the end.
    for (int k = 0; k < 20 && !data.empty(); ++k) {
      const std::size_t off = rng() % data.size();
      const std::size_t len = 1 + rng() % std::min<std::size_t>(data.size(), 2 << 20);
      std::string buf(len, '\0');
      auto n = (*r)->pread(std::as_writable_bytes(std::span<char>(buf.data(), len)), off);
      ASSERT_TRUE(n.ok());
      const std::size_t want = std::min(len, data.size() - off);
      ASSERT_EQ(*n, want);
      EXPECT_TRUE(std::string_view(buf).substr(0, want) ==
                  std::string_view(data).substr(off, want));
    }
  }
  // A key hint that names another key than the one committed still works.
  for (const std::size_t size : {std::size_t(100), std::size_t(3 << 20)}) {
    auto w = store_->begin_write_for(kBucket, "hinted-elsewhere");
    ASSERT_TRUE(w.ok());
    const std::string data = pattern(77, size / 8 * 8);
    ASSERT_TRUE((*w)->append(bytes_of(data)).ok());
    ObjectMeta m;
    m.key = "obj/hinted";
    m.size = data.size();
    m.etag = etag_of(data);
    ASSERT_TRUE(store_->commit_object(kBucket, m, std::move(*w), {}).ok());
    auto got = get(*store_, kBucket, "obj/hinted");
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    EXPECT_TRUE(*got == data);
    ASSERT_TRUE(store_->delete_object(kBucket, "obj/hinted").ok());
  }
  EXPECT_EQ(store_->begin_write_for("nope", "k").code(), Errc::no_such_bucket);
  // Delete: the key is gone; deleting again succeeds (S3 semantics).
  ASSERT_TRUE(store_->delete_object(kBucket, "obj/3").ok());
  EXPECT_EQ(store_->head_object(kBucket, "obj/3").code(), Errc::no_such_key);
  EXPECT_EQ(store_->open_object(kBucket, "obj/3").code(), Errc::no_such_key);
  EXPECT_TRUE(store_->delete_object(kBucket, "obj/3").ok());
  // A writer dropped without commit leaves nothing visible.
  {
    auto w = store_->begin_write(kBucket);
    ASSERT_TRUE(w.ok());
    const std::string junk(2 << 20, 'j');
    ASSERT_TRUE((*w)->append(bytes_of(junk)).ok());
  }
  auto l = store_->list_objects(kBucket, {});
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->objects.size(), sizes.size() - 1);
  // Everything survives a reopen.
  reopen();
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const std::string data = data_for(i);
    auto got = get(*store_, kBucket, "obj/" + std::to_string(i));
    if (i == 3) {
      EXPECT_EQ(got.code(), Errc::no_such_key);
    } else {
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      EXPECT_TRUE(*got == data);
    }
  }
}

TEST_P(Conformance, ReadersAreSnapshots) {
  if (child_) GTEST_SKIP();
  make_bucket(std::string(kBucket));
  const std::string v1 = pattern(1, 3 << 20), v2 = pattern(2, 1 << 20);
  ASSERT_TRUE(put(*store_, kBucket, "k", v1).ok());
  auto r1 = store_->open_object(kBucket, "k");
  ASSERT_TRUE(r1.ok());
  ASSERT_TRUE(put(*store_, kBucket, "k", v2).ok());
  auto r2 = store_->open_object(kBucket, "k");
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ((*r1)->meta().etag, want_etag(v1));
  if (!GetParam()->snapshot_readers) {
    // The weaker promise: a reader of a replaced object fails, it never mixes versions; one of
    // a deleted object fails too; one of an unchanged object reads it whole.
    auto a = read_all(**r1);
    EXPECT_EQ(a.code(), Errc::precondition_failed) << a.status().to_string();
    auto b = read_all(**r2);
    ASSERT_TRUE(b.ok()) << b.status().to_string();
    EXPECT_EQ(pattern_version(*b), 2);
    auto r3 = store_->open_object(kBucket, "k");
    ASSERT_TRUE(r3.ok());
    ASSERT_TRUE(store_->delete_object(kBucket, "k").ok());
    auto c = read_all(**r3);
    EXPECT_TRUE(c.code() == Errc::no_such_key || c.code() == Errc::precondition_failed)
        << c.status().to_string();
    return;
  }
  ASSERT_TRUE(store_->delete_object(kBucket, "k").ok());
  auto a = read_all(**r1);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(pattern_version(*a), 1);
  EXPECT_EQ(a->size(), v1.size());
  auto b = read_all(**r2);
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_EQ(pattern_version(*b), 2);
}

TEST_P(Conformance, ConcurrentOverwritersOfOneKey) {
  if (child_) GTEST_SKIP();
  make_bucket(std::string(kBucket));
  constexpr int kThreads = 6, kRounds = 6;
  std::atomic<bool> done{false};
  std::atomic<int> failures{0}, reads{0};
  std::mutex first_mu;
  std::string first_failure;  // the first failure's reason, for the message
  // moto 5.2 answers some PUTs and GETs of a key being replaced concurrently with a bare 500
  // (its own "ValueError: I/O operation on closed file", also with boto3 alone), and radosgw 16
  // sometimes a GET of such a key with 500 UnknownError (seen once in four runs); the gateway
  // retries what it may and then answers unavailable. Counted apart: never mixed bytes.
  std::atomic<int> upstream_500s{0};
  auto fail = [&](const std::string& why) {
    if (!GetParam()->upstream_kind.empty() && why.find("unavailable") != std::string::npos &&
        why.find("HTTP 500") != std::string::npos) {
      upstream_500s++;
      return;
    }
    if (failures++ == 0) {
      std::lock_guard lock(first_mu);
      first_failure = why;
    }
  };
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        const std::uint32_t v = std::uint32_t(t * 1000 + r + 1);
        // Sizes differ per writer so a mixed version would also show as a size mismatch.
        const std::string data = pattern(v, 8 * (4096 + 977 * std::size_t(t) + 13 * r) * 8);
        if (auto p = put(*store_, kBucket, "hot", data); !p.ok()) {
          fail("put: " + p.status().to_string());
        }
      }
    });
  }
  // Readers running meanwhile only ever see complete versions that match their metadata.
  std::thread reader([&] {
    // Until the writers are done, and at least one read in any case: on a loaded machine the
    // writers may finish before this thread first runs (seen: reads == 0).
    while (!done || (reads == 0 && failures == 0)) {
      auto r = store_->open_object(kBucket, "hot");
      if (!r.ok()) {
        if (r.code() != Errc::no_such_key) fail("open: " + r.status().to_string());
        continue;
      }
      auto all = read_all(**r);
      // Without snapshot readers, a version replaced mid-read fails the read (never mixes).
      if (!all.ok() && !GetParam()->snapshot_readers &&
          (all.code() == Errc::precondition_failed || all.code() == Errc::no_such_key)) {
        continue;
      }
      if (!all.ok()) {
        fail("read: " + all.status().to_string());
      } else if (pattern_version(*all) < 0) {
        fail("read: a torn or mixed version of " + std::to_string(all->size()) + " bytes");
      } else if (want_etag(*all) != (*r)->meta().etag) {
        fail("read: ETag " + (*r)->meta().etag + " for the bytes of " + want_etag(*all));
      }
      reads++;
    }
  });
  for (auto& t : ts) t.join();
  done = true;
  reader.join();
  EXPECT_EQ(failures.load(), 0) << "first: " << first_failure;
  EXPECT_GT(reads.load(), 0);
  auto h = store_->head_object(kBucket, "hot");
  ASSERT_TRUE(h.ok());
  auto all = get(*store_, kBucket, "hot");
  ASSERT_TRUE(all.ok());
  const auto v = pattern_version(*all);
  ASSERT_GE(v, 0);
  // A writer whose last PUT failed upstream (moto's 500s) may leave an earlier version last.
  if (upstream_500s == 0) {
    EXPECT_EQ(v % 1000, kRounds) << "the winner is some writer's last version";
  }
  EXPECT_EQ(h->etag, want_etag(*all));
  auto l = store_->list_objects(kBucket, {});
  ASSERT_TRUE(l.ok());
  ASSERT_EQ(l->objects.size(), 1u);
  EXPECT_EQ(l->objects[0].etag, h->etag);
  EXPECT_EQ(l->objects[0].size, h->size);
}

TEST_P(Conformance, ConditionalWrites) {
  if (child_) GTEST_SKIP();
  make_bucket(std::string(kBucket));
  WriteCondition absent{WriteCondition::Kind::must_be_absent, ""};
  auto a = put(*store_, kBucket, "c", "first", absent);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(put(*store_, kBucket, "c", "second", absent).code(), Errc::precondition_failed);
  WriteCondition match{WriteCondition::Kind::etag_must_match, "not-the-etag"};
  EXPECT_EQ(put(*store_, kBucket, "c", "third", match).code(), Errc::precondition_failed);
  auto cur = get(*store_, kBucket, "c");
  ASSERT_TRUE(cur.ok());
  EXPECT_EQ(*cur, "first");
  match.etag = a->etag;
  auto b = put(*store_, kBucket, "c", pattern(9, 300000), match);
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_EQ(store_->head_object(kBucket, "c")->etag, b->etag);
  // If-Match on an absent key: NoSuchKey, as S3 answers.
  match.etag = b->etag;
  EXPECT_EQ(put(*store_, kBucket, "absent", "x", match).code(), Errc::no_such_key);
  EXPECT_EQ(store_->head_object(kBucket, "absent").code(), Errc::no_such_key);
  // After a delete the key is absent again.
  ASSERT_TRUE(store_->delete_object(kBucket, "c").ok());
  EXPECT_TRUE(put(*store_, kBucket, "c", "again", absent).ok());

  // Racing creators: exactly one wins per round; racing compare-and-swaps: exactly one wins.
  // moto 5.2 checks If-None-Match and If-Match before it stores, without a lock, so two racing
  // conditional PUTs can both succeed there (seen once: 2 of 6 compare-and-swaps in a round).
  // The gateway passes the conditions through, so in front of moto this asserts moto's answer:
  // at least one winner, every other writer refused, and the object one winner's.
  const bool racy_upstream = GetParam()->upstream_kind == "moto";
  auto expect_one_winner = [&](int won, int lost) {
    if (racy_upstream) {
      EXPECT_GE(won, 1);
      EXPECT_EQ(won + lost, 6);
    } else {
      EXPECT_EQ(won, 1);
      EXPECT_EQ(lost, 5);
    }
  };
  for (int round = 0; round < 5; ++round) {
    const std::string key = "race-" + std::to_string(round);
    std::atomic<int> won{0}, lost{0}, other{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < 6; ++t) {
      ts.emplace_back([&, t] {
        auto r = put(*store_, kBucket, key, pattern(std::uint32_t(t + 1), 8192 * (t + 1)), absent);
        (r.ok() ? won : r.code() == Errc::precondition_failed ? lost : other)++;
      });
    }
    for (auto& t : ts) t.join();
    expect_one_winner(won.load(), lost.load());
    EXPECT_EQ(other.load(), 0);
    const auto base = store_->head_object(kBucket, key);
    ASSERT_TRUE(base.ok());
    std::atomic<int> cas_won{0}, cas_lost{0};
    ts.clear();
    for (int t = 0; t < 6; ++t) {
      ts.emplace_back([&, t] {
        WriteCondition m{WriteCondition::Kind::etag_must_match, base->etag};
        auto r = put(*store_, kBucket, key, pattern(std::uint32_t(100 + t), 4096), m);
        (r.ok() ? cas_won : r.code() == Errc::precondition_failed ? cas_lost : other)++;
      });
    }
    for (auto& t : ts) t.join();
    expect_one_winner(cas_won.load(), cas_lost.load());
    EXPECT_EQ(other.load(), 0);
    auto final_data = get(*store_, kBucket, key);
    ASSERT_TRUE(final_data.ok());
    EXPECT_GE(pattern_version(*final_data), 100);
  }
}

TEST_P(Conformance, Multipart) {
  if (child_) GTEST_SKIP();
  make_bucket(std::string(kBucket));
  auto up = start_upload(*store_, "big");
  ASSERT_TRUE(up.ok()) << up.status().to_string();
  auto info = store_->get_upload(kBucket, "big", *up);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->key, "big");
  EXPECT_EQ(info->meta_template.content_type, "text/plain");
  EXPECT_EQ(store_->get_upload(kBucket, "big", "no-such-upload").code(), Errc::no_such_upload);

  // Parts out of order, one replaced, one never used; sizes cross stripe boundaries.
  std::map<std::uint32_t, std::string> data;
  std::map<std::uint32_t, PartInfo> parts;
  for (std::uint32_t n : {3u, 1u, 2u, 5u, 2u}) {
    data[n] = pattern(n * 10 + (parts.count(n) ? 1 : 0), n == 5 ? 4096 : part_size(1 << 20, n));
    auto p = put_part(*store_, "big", *up, n, data[n]);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    EXPECT_EQ(p->part_number, n);
    parts[n] = *p;
  }
  auto listed = store_->list_parts(kBucket, "big", *up, 0, 1000);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 4u);
  EXPECT_EQ((*listed)[0].part_number, 1u);
  EXPECT_EQ((*listed)[1].etag, want_etag(data[2]));  // the replacement
  EXPECT_EQ((*listed)[3].part_number, 5u);
  auto page = store_->list_parts(kBucket, "big", *up, 2, 1);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->size(), 1u);
  EXPECT_EQ((*page)[0].part_number, 3u);

  auto uploads = store_->list_uploads(kBucket, {});
  ASSERT_TRUE(uploads.ok());
  ASSERT_EQ(uploads->uploads.size(), 1u);
  EXPECT_EQ(uploads->uploads[0].upload_id, *up);

  // A wrong ETag or a missing part: invalid_part, nothing changes.
  PartInfo wrong = parts[2];
  wrong.etag = "bad";
  EXPECT_EQ(complete(*store_, "big", *up, {{parts[1], data[1]}, {wrong, data[2]}}).code(),
            Errc::invalid_part);
  PartInfo missing = parts[1];
  missing.part_number = 4;
  EXPECT_EQ(complete(*store_, "big", *up, {{parts[1], data[1]}, {missing, data[1]}}).code(),
            Errc::invalid_part);
  // An existing object and If-None-Match: * -> precondition_failed, upload kept.
  ASSERT_TRUE(put(*store_, kBucket, "big", "old").ok());
  EXPECT_EQ(complete(*store_, "big", *up, {{parts[1], data[1]}},
                     {WriteCondition::Kind::must_be_absent, ""})
                .code(),
            Errc::precondition_failed);
  EXPECT_TRUE(store_->get_upload(kBucket, "big", *up).ok());

  // Complete with 1, 2, 3 (5 unused).
  std::vector<std::pair<PartInfo, std::string>> used = {
      {parts[1], data[1]}, {parts[2], data[2]}, {parts[3], data[3]}};
  if (GetParam()->upstream_kind == "radosgw") {
    // radosgw 16 refuses a Complete that leaves an uploaded part out (InvalidPart), where S3
    // drops the unused part; S3 has no call to delete one part, so the gateway cannot hide it.
    // The upload is kept: completed with part 5 too.
    EXPECT_EQ(complete(*store_, "big", *up, used).code(), Errc::invalid_part);
    used.emplace_back(parts[5], data[5]);
  }
  std::string whole;
  std::vector<std::string> used_data;
  for (const auto& [p, d] : used) {
    whole += d;
    used_data.push_back(d);
  }
  auto m = complete(*store_, "big", *up, used);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->size, whole.size());
  EXPECT_EQ(store_->get_upload(kBucket, "big", *up).code(), Errc::no_such_upload);
  EXPECT_EQ(store_->list_parts(kBucket, "big", *up, 0, 10).code(), Errc::no_such_upload);
  auto h = store_->head_object(kBucket, "big");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->etag, want_multipart_etag(used_data));
  EXPECT_EQ(m->etag, h->etag);
  ASSERT_EQ(m->parts.size(), used.size());
  EXPECT_EQ(m->parts[1].etag, want_etag(data[2]));
  if (GetParam()->owners_and_parts) {
    ASSERT_EQ(h->parts.size(), 3u);
    EXPECT_EQ(h->parts[1].etag, want_etag(data[2]));
  }
  auto all = get(*store_, kBucket, "big");
  ASSERT_TRUE(all.ok()) << all.status().to_string();
  EXPECT_TRUE(*all == whole);
  // Reads across part boundaries.
  auto r = store_->open_object(kBucket, "big");
  ASSERT_TRUE(r.ok());
  std::string buf(100, '\0');
  const std::size_t off = data[1].size() - 50;
  auto n = (*r)->pread(std::as_writable_bytes(std::span<char>(buf.data(), buf.size())), off);
  ASSERT_TRUE(n.ok());
  ASSERT_EQ(*n, 100u);
  EXPECT_EQ(buf, all->substr(off, 100));

  // Abort: the upload and its parts are gone.
  auto up2 = start_upload(*store_, "aborted");
  ASSERT_TRUE(up2.ok());
  ASSERT_TRUE(put_part(*store_, "aborted", *up2, 1, "part").ok());
  ASSERT_TRUE(store_->abort_upload(kBucket, "aborted", *up2).ok());
  EXPECT_EQ(store_->get_upload(kBucket, "aborted", *up2).code(), Errc::no_such_upload);
  EXPECT_EQ(put_part(*store_, "aborted", *up2, 2, "late").code(), Errc::no_such_upload);
  EXPECT_EQ(store_->head_object(kBucket, "aborted").code(), Errc::no_such_key);
  auto none = store_->list_uploads(kBucket, {});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->uploads.empty());

  // Overwriting the multipart object with a plain PUT and back.
  ASSERT_TRUE(put(*store_, kBucket, "big", "small now").ok());
  EXPECT_EQ(*get(*store_, kBucket, "big"), "small now");
  EXPECT_TRUE(store_->head_object(kBucket, "big")->parts.empty());
}

namespace {

struct Model {
  std::set<std::string> keys;

  ListResult list(const ListQuery& q) const {
    ListResult r;
    std::uint32_t n = 0;
    std::string last_cp;
    for (auto it = keys.lower_bound(q.prefix); it != keys.end(); ++it) {
      const std::string& k = *it;
      if (k.compare(0, q.prefix.size(), q.prefix) != 0) break;
      std::string entry = k;
      bool is_cp = false;
      if (!q.delimiter.empty()) {
        auto d = k.find(q.delimiter, q.prefix.size());
        if (d != std::string::npos) {
          entry = k.substr(0, d + q.delimiter.size());
          is_cp = true;
        }
      }
      if (entry <= q.start_after) continue;
      if (is_cp && entry == last_cp) continue;
      if (n == q.max_keys) {
        r.truncated = true;
        break;
      }
      ++n;
      if (is_cp) {
        r.common_prefixes.push_back(entry);
        last_cp = entry;
        r.next_marker = entry;
      } else {
        ObjectMeta m;
        m.key = k;
        r.objects.push_back(m);
        r.next_marker = k;
      }
    }
    if (!r.truncated) r.next_marker.clear();
    return r;
  }
};

std::vector<std::string> keys_of(const ListResult& r) {
  std::vector<std::string> out;
  for (const auto& o : r.objects) out.push_back(o.key);
  return out;
}

}  // namespace

TEST_P(Conformance, ListingPrefixDelimiterContinuation) {
  if (child_) GTEST_SKIP();
  make_bucket(std::string(kBucket));
  Model model;
  // 1,300 keys: more than one 1,024-entry omap page, spread over directories, plus awkward ones.
  std::vector<std::string> keys;
  for (int d = 0; d < 13; ++d) {
    for (int f = 0; f < 95; ++f) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "dir%02d/file%03d", d, f);
      keys.push_back(buf);
    }
  }
  for (int i = 0; i < 60; ++i) keys.push_back("flat" + std::to_string(i));
  keys.push_back("dir05/sub/deeper/x");
  keys.push_back("dir05/sub/y");
  // The highest bytes a key may hold (0xff is not UTF-8; U+10FFFF is the highest that is).
  const std::string high = GetParam()->utf8_keys_only ? "\xf4\x8f\xbf\xbf" : "\xff\xfe";
  keys.push_back(high + "-high");
  keys.push_back("with space/and..dots");
  keys.push_back("a");
  keys.push_back("a/");
  keys.push_back("a//b");
  keys.push_back(std::string(1024, 'L'));
  std::vector<std::thread> ts;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&, t] {
      for (std::size_t i = t; i < keys.size(); i += 4) {
        if (auto r = put(*store_, kBucket, keys[i], ""); !r.ok()) {
          ADD_FAILURE() << "put '" << keys[i].substr(0, 40) << "': " << r.status().to_string();
          failures++;
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  ASSERT_EQ(failures.load(), 0);
  model.keys.insert(keys.begin(), keys.end());
  ASSERT_GT(model.keys.size(), 1024u);

  std::mt19937 rng(11);
  const std::vector<std::string> prefixes = {"",     "dir0", "dir05/", "dir05/sub/",
                                             "flat", "a",    "zzz",    high.substr(0, 1)};
  const std::vector<std::string> delims = {"", "/", "sub", "e"};
  for (int i = 0; i < 60; ++i) {
    ListQuery q;
    q.prefix = prefixes[rng() % prefixes.size()];
    q.delimiter = delims[rng() % delims.size()];
    q.max_keys = std::vector<std::uint32_t>{1, 7, 100, 1000, 1000}[rng() % 5];
    if (rng() % 3 == 0) q.start_after = keys[rng() % keys.size()];
    auto got = store_->list_objects(kBucket, q);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    if (GetParam()->upstream_kind == "moto" && GetParam()->utf8_keys_only &&
        q.prefix == high.substr(0, 1)) {
      // A prefix that is not UTF-8 (the first byte of U+10FFFF): moto 5.2 decodes the query
      // string as UTF-8 with replacement characters and lists nothing, where a byte-wise
      // backend lists the high key. The gateway sends the prefix byte-exact (%F4).
      EXPECT_TRUE(got->objects.empty() && got->common_prefixes.empty()) << "moto changed";
      continue;
    }
    const auto want = model.list(q);
    EXPECT_EQ(keys_of(*got), keys_of(want)) << "prefix '" << q.prefix << "' delim '" << q.delimiter
                                            << "' max " << q.max_keys << " after " << q.start_after;
    EXPECT_EQ(got->common_prefixes, want.common_prefixes);
    EXPECT_EQ(got->truncated, want.truncated);
    if (want.truncated) {
      EXPECT_EQ(got->next_marker, want.next_marker);
    }
  }
  // Paging to the end visits every entry exactly once, with and without a delimiter.
  for (const std::string delim : {"", "/"}) {
    for (std::uint32_t page : {1000u, 333u}) {
      ListQuery q;
      q.delimiter = delim;
      q.max_keys = page;
      std::vector<std::string> seen, seen_cp;
      for (int guard = 0; guard < 100; ++guard) {
        auto got = store_->list_objects(kBucket, q);
        ASSERT_TRUE(got.ok());
        ASSERT_LE(got->objects.size() + got->common_prefixes.size(), page);
        for (const auto& o : got->objects) seen.push_back(o.key);
        seen_cp.insert(seen_cp.end(), got->common_prefixes.begin(), got->common_prefixes.end());
        if (!got->truncated) break;
        q.start_after = got->next_marker;
      }
      ListQuery all;
      all.delimiter = delim;
      all.max_keys = 100000;
      const auto want = model.list(all);
      EXPECT_EQ(seen, keys_of(want)) << "delimiter '" << delim << "' page " << page;
      EXPECT_EQ(seen_cp, want.common_prefixes);
    }
  }
  // Listed metadata matches head_object.
  ListQuery q;
  q.prefix = "dir03/file01";
  auto got = store_->list_objects(kBucket, q);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->objects.size(), 10u);
  EXPECT_EQ(got->objects[0].etag, want_etag(""));
  EXPECT_EQ(got->objects[0].size, 0u);
  EXPECT_GT(got->objects[0].mtime_ns, 0);
}

// The writer process of KillBetweenDataAndCommit: overwrites "obj" (1-3 MiB, many appends),
// runs multipart uploads into "mp" and writes/deletes "small", reporting each commit on a pipe.
TEST_P(Conformance, KillWriterChild) {
  if (!child_) GTEST_SKIP() << "runs only as the writer process of KillBetweenDataAndCommit";
  const int fd = std::atoi(std::getenv(kChildFdEnv));
  std::uint32_t v = 0;
  if (auto cur = get(*store_, kBucket, "obj"); cur.ok()) v = std::uint32_t(pattern_version(*cur));
  std::mt19937 rng(static_cast<std::uint32_t>(::getpid()));
  for (;;) {
    ++v;
    const std::size_t size = 8 * ((1 << 17) + rng() % (1 << 18));
    auto m = put(*store_, kBucket, "obj", pattern(v, size));
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    if (v % 3 == 0) {
      auto up = start_upload(*store_, "mp");
      ASSERT_TRUE(up.ok());
      std::vector<std::pair<PartInfo, std::string>> parts;
      for (std::uint32_t n = 1; n <= 3; ++n) {
        std::string d = pattern(v * 4 + n, part_size(8 * 32768, n));
        auto p = put_part(*store_, "mp", *up, n, d);
        ASSERT_TRUE(p.ok());
        parts.push_back({*p, std::move(d)});
      }
      ASSERT_TRUE(complete(*store_, "mp", *up, parts).ok());
    }
    if (v % 2 == 0) {
      ASSERT_TRUE(put(*store_, kBucket, "small", pattern(v, 64)).ok());
    } else {
      ASSERT_TRUE(store_->delete_object(kBucket, "small").ok());
    }
    const char c = 'c';
    if (::write(fd, &c, 1) != 1) return;
  }
}

TEST_P(Conformance, KillBetweenDataAndCommit) {
  if (child_) GTEST_SKIP();
  make_bucket(std::string(kBucket));
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string filter = std::string("--gtest_filter=") + info->test_suite_name() +
                             ".KillWriterChild/" + GetParam()->name;
  std::int64_t last_version = 0;
  std::mt19937 rng(5);
  for (int round = 0; round < 5; ++round) {
    store_.reset();  // the child owns the data while it runs (one owner for some backends)
    int p[2];
    ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::dup2(p[1], 100);
      ::setenv(kChildEnv, backend_->location().c_str(), 1);
      ::setenv(kChildFdEnv, "100", 1);
      ::execl("/proc/self/exe", "conformance-child", filter.c_str(), "--gtest_brief=1",
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(p[1]);
    // Wait for a first commit, then let it run into the middle of later writes.
    char c;
    const auto got = ::read(p[0], &c, 1);
    if (got != 1) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      ::close(p[0]);
      FAIL() << "the writer process exited before its first commit";
    }
    ::usleep(useconds_t(20000 + rng() % 200000));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ::close(p[0]);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the writer ended on its own: " << status;

    reopen();
    if (!GetParam()->snapshot_readers) {
      // A gateway's writer talks to an upstream server, which completes a request it had
      // received whole even after the writer died (as any S3 server does): let such in-flight
      // requests land before checking, or the checks race with them.
      ::usleep(300000);
    }
    // "obj": one complete version, never older than what was seen before.
    auto h = store_->head_object(kBucket, "obj");
    ASSERT_TRUE(h.ok()) << h.status().to_string();
    auto obj = get(*store_, kBucket, "obj");
    ASSERT_TRUE(obj.ok()) << obj.status().to_string();
    const auto v = pattern_version(*obj);
    ASSERT_GE(v, 1) << "partial or mixed object after SIGKILL (round " << round << ")";
    EXPECT_EQ(h->etag, want_etag(*obj));
    EXPECT_GE(v, last_version);
    last_version = v;
    // "mp": absent or the three parts of one upload, complete.
    if (auto mp = get(*store_, kBucket, "mp"); mp.ok()) {
      const auto first = pattern_version(std::string_view(*mp).substr(0, part_size(8 * 32768, 1)));
      ASSERT_GE(first, 0);
      const std::uint32_t base = std::uint32_t(first) - 1;
      EXPECT_TRUE(*mp == pattern(base + 1, part_size(8 * 32768, 1)) +
                             pattern(base + 2, part_size(8 * 32768, 2)) +
                             pattern(base + 3, part_size(8 * 32768, 3)));
    } else {
      EXPECT_EQ(mp.code(), Errc::no_such_key);
    }
    if (auto s = get(*store_, kBucket, "small"); s.ok()) {
      EXPECT_GE(pattern_version(*s), 0);
      EXPECT_EQ(s->size(), 64u);
    } else {
      EXPECT_EQ(s.code(), Errc::no_such_key);
    }
    // Only committed keys are listed, each readable and complete.
    auto l = store_->list_objects(kBucket, {});
    ASSERT_TRUE(l.ok());
    for (const auto& o : l->objects) {
      EXPECT_TRUE(o.key == "obj" || o.key == "mp" || o.key == "small") << o.key;
      auto d = get(*store_, kBucket, o.key);
      ASSERT_TRUE(d.ok()) << o.key << ": " << d.status().to_string();
      EXPECT_EQ(d->size(), o.size);
    }
    // The key stays writable: nothing the dead writer left behind blocks a conditional write.
    WriteCondition m{WriteCondition::Kind::etag_must_match, h->etag};
    auto w = put(*store_, kBucket, "obj", pattern(std::uint32_t(v + 1), 4096), m);
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    last_version = v + 1;
  }
}

// Versioning (docs/versioning.md), on backends that keep versions: ids on PUT, Complete and a
// copy onto itself; delete markers hide the key from GET and listings; versions survive a
// reopen; removal by id; suspension replaces only the null version; ListObjectVersions pages
// inside a key and rolls up common prefixes.
TEST_P(Conformance, Versions) {
  if (!store_->supports_versioning()) GTEST_SKIP() << "this backend keeps no versions";
  if (GetParam()->name.starts_with("gateway")) {
    // The gateway passes versioning through to its upstream, which keeps the versions; the
    // bookkeeping checked here (noncurrent_since, tags on a version) is the keeper's, and the
    // gateway's pass-through is tested by gateway*.integration_s3_versioning on each upstream.
    GTEST_SKIP() << "the gateway keeps no versions itself (it passes them through)";
  }
  make_bucket(std::string(kBucket));
  ASSERT_TRUE(put(*store_, kBucket, "k", "plain").ok());  // before versioning: the null version
  auto m0 = store_->head_object(kBucket, "k");
  ASSERT_TRUE(m0.ok());
  EXPECT_EQ(m0->version_id, "");  // a never-versioned bucket has no version ids
  ASSERT_TRUE(store_->set_bucket_config(kBucket, versioning_config_name, "Enabled").ok());
  m0 = store_->head_object(kBucket, "k");
  ASSERT_TRUE(m0.ok());
  EXPECT_EQ(m0->version_id, "null");
  std::vector<std::string> ids;
  const std::string big = pattern(7, 300'000);  // a blob, not inline
  for (std::string_view body : {std::string_view("one"), std::string_view(big)}) {
    auto m = put(*store_, kBucket, "k", body);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    EXPECT_EQ(m->version_id.size(), 32u);
    ids.push_back(m->version_id);
  }
  EXPECT_NE(ids[0], ids[1]);
  auto del = store_->delete_object_version(kBucket, "k", "");
  ASSERT_TRUE(del.ok());
  EXPECT_TRUE(del->delete_marker);
  EXPECT_EQ(del->version_id.size(), 32u);
  EXPECT_EQ(store_->head_object(kBucket, "k").code(), Errc::no_such_key);
  EXPECT_EQ(store_->open_object(kBucket, "k").code(), Errc::no_such_key);
  EXPECT_EQ(store_->open_object_version(kBucket, "k", del->version_id).code(),
            Errc::method_not_allowed);
  auto marker = store_->head_object_version(kBucket, "k", "");
  ASSERT_TRUE(marker.ok());
  EXPECT_TRUE(marker->delete_marker);
  EXPECT_EQ(marker->version_id, del->version_id);
  auto listed = store_->list_objects(kBucket, ListQuery{});
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->objects.empty());
  EXPECT_EQ(store_->delete_bucket(kBucket).code(), Errc::bucket_not_empty);

  reopen();
  auto r = store_->open_object_version(kBucket, "k", ids[0]);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(*read_all(**r), "one");
  EXPECT_EQ((*r)->meta().version_id, ids[0]);
  r->reset();
  r = store_->open_object_version(kBucket, "k", ids[1]);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(*read_all(**r), big);
  r->reset();
  r = store_->open_object_version(kBucket, "k", "null");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(*read_all(**r), "plain");
  r->reset();
  auto vs = store_->list_object_versions(kBucket, ListVersionsQuery{});
  ASSERT_TRUE(vs.ok());
  ASSERT_EQ(vs->versions.size(), 4u);
  EXPECT_TRUE(vs->versions[0].meta.delete_marker && vs->versions[0].is_latest);
  EXPECT_EQ(vs->versions[1].meta.version_id, ids[1]);
  EXPECT_FALSE(vs->versions[1].is_latest);
  EXPECT_EQ(vs->versions[1].noncurrent_since_ns, vs->versions[0].meta.mtime_ns);
  EXPECT_EQ(vs->versions[1].meta.size, big.size());
  EXPECT_EQ(vs->versions[3].meta.version_id, "null");

  // Removing the marker by id brings the newest version back; then remove that one.
  ASSERT_TRUE(store_->delete_object_version(kBucket, "k", del->version_id).ok());
  EXPECT_EQ(*get(*store_, kBucket, "k"), big);
  auto gone = store_->delete_object_version(kBucket, "k", ids[1]);
  ASSERT_TRUE(gone.ok());
  EXPECT_FALSE(gone->delete_marker);
  EXPECT_EQ(*get(*store_, kBucket, "k"), "one");
  EXPECT_EQ(store_->head_object_version(kBucket, "k", ids[1]).code(), Errc::no_such_version);
  EXPECT_EQ(store_->head_object_version(kBucket, "k", "NULL").code(), Errc::invalid_argument);
  EXPECT_EQ(store_->head_object_version(kBucket, "nokey", "").code(), Errc::no_such_key);
  EXPECT_EQ(store_->head_object_version(kBucket, "nokey", ids[0]).code(), Errc::no_such_version);
  // An unknown well-formed id removes nothing.
  ASSERT_TRUE(store_->delete_object_version(kBucket, "k", std::string(32, 'a')).ok());
  EXPECT_EQ(*get(*store_, kBucket, "k"), "one");

  // Suspended: a PUT replaces the null version, the others stay.
  ASSERT_TRUE(store_->set_bucket_config(kBucket, versioning_config_name, "Suspended").ok());
  auto s = put(*store_, kBucket, "k", "suspended");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->version_id, "null");
  auto null_version = store_->open_object_version(kBucket, "k", "null");
  ASSERT_TRUE(null_version.ok());
  EXPECT_EQ(*read_all(**null_version), "suspended");
  null_version->reset();
  auto sm = store_->delete_object_version(kBucket, "k", "");  // a null marker replaces it
  ASSERT_TRUE(sm.ok());
  EXPECT_EQ(sm->version_id, "null");
  EXPECT_TRUE(sm->delete_marker);
  ASSERT_TRUE(store_->delete_object_version(kBucket, "k", "null").ok());
  EXPECT_EQ(*get(*store_, kBucket, "k"), "one");

  // Enabled again: Complete and a copy onto itself make versions; the copy shares the bytes.
  ASSERT_TRUE(store_->set_bucket_config(kBucket, versioning_config_name, "Enabled").ok());
  auto upload = start_upload(*store_, "k");
  ASSERT_TRUE(upload.ok());
  const std::string p1 = pattern(1, part_size(64 << 10, 1)), p2 = pattern(2, 1000);
  auto pi1 = put_part(*store_, "k", *upload, 1, p1);
  auto pi2 = put_part(*store_, "k", *upload, 2, p2);
  ASSERT_TRUE(pi1.ok() && pi2.ok());
  auto mp = complete(*store_, "k", *upload, {{*pi1, p1}, {*pi2, p2}});
  ASSERT_TRUE(mp.ok()) << mp.status().to_string();
  EXPECT_EQ(mp->version_id.size(), 32u);
  EXPECT_EQ(*get(*store_, kBucket, "k"), p1 + p2);
  ObjectMeta copy = *mp;
  copy.content_type = "changed";
  auto replaced = store_->replace_meta(kBucket, copy, copy.etag);
  ASSERT_TRUE(replaced.ok()) << replaced.status().to_string();
  EXPECT_EQ(replaced->version_id.size(), 32u);
  EXPECT_NE(replaced->version_id, mp->version_id);
  ASSERT_TRUE(store_->delete_object_version(kBucket, "k", mp->version_id).ok());
  EXPECT_EQ(*get(*store_, kBucket, "k"), p1 + p2);  // still referenced by the copy
  auto tagged = store_->set_object_tags(kBucket, "k", TagSet{{"t", "v"}});
  ASSERT_TRUE(tagged.ok()) << tagged.status().to_string();
  EXPECT_EQ(tagged->version_id, replaced->version_id);  // tags change no version
  auto all = store_->list_object_versions(kBucket, ListVersionsQuery{});
  ASSERT_TRUE(all.ok());
  for (const ObjectVersion& v : all->versions) {
    ASSERT_TRUE(store_->delete_object_version(kBucket, "k", v.meta.version_id).ok());
  }
  EXPECT_EQ(store_->head_object_version(kBucket, "k", "").code(), Errc::no_such_key);

  // Racing writers of one key: every acknowledged version is kept (a write never loses an older
  // one), each under its own id, and exactly one is the latest.
  constexpr int writers = 4, rounds = 4;
  std::vector<std::vector<std::string>> acked(writers);
  std::vector<std::thread> ts;
  for (int t = 0; t < writers; ++t) {
    ts.emplace_back([&, t] {
      for (int i = 0; i < rounds; ++i) {
        auto m = put(*store_, kBucket, "race", pattern(std::uint32_t(t * 100 + i), 64));
        if (m.ok()) acked[std::size_t(t)].push_back(m->version_id);
      }
    });
  }
  for (auto& t : ts) t.join();
  std::set<std::string> want;
  for (const auto& ids_of : acked) want.insert(ids_of.begin(), ids_of.end());
  EXPECT_EQ(want.size(), std::size_t(writers * rounds));
  auto raced = store_->list_object_versions(kBucket, ListVersionsQuery{});
  ASSERT_TRUE(raced.ok());
  std::set<std::string> got;
  int latest = 0;
  for (const ObjectVersion& v : raced->versions) {
    got.insert(v.meta.version_id);
    latest += v.is_latest ? 1 : 0;
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(latest, 1);
  for (const std::string& id : got) {
    ASSERT_TRUE(store_->delete_object_version(kBucket, "race", id).ok());
  }
  EXPECT_TRUE(store_->delete_bucket(kBucket).ok());
}

// set_object_version_tags: one version's tags by id, "" for the latest, the null version by
// "null"; unknown / malformed ids and delete markers refused; no version changes otherwise.
TEST_P(Conformance, VersionTags) {
  if (!store_->supports_versioning()) GTEST_SKIP() << "this backend keeps no versions";
  if (!GetParam()->tags) GTEST_SKIP() << "this backend stores no object tags";
  make_bucket(std::string(kBucket));
  ASSERT_TRUE(put(*store_, kBucket, "k", "null one").ok());
  auto plain = store_->set_object_version_tags(kBucket, "k", "", TagSet{{"p", "1"}});
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  EXPECT_EQ(plain->version_id, "");  // never versioned: no version ids
  ASSERT_TRUE(store_->set_bucket_config(kBucket, versioning_config_name, "Enabled").ok());
  auto v1 = put(*store_, kBucket, "k", "one");
  auto v2 = put(*store_, kBucket, "k", "two");
  ASSERT_TRUE(v1.ok() && v2.ok());
  auto t1 = store_->set_object_version_tags(kBucket, "k", v1->version_id, TagSet{{"a", "1"}});
  ASSERT_TRUE(t1.ok()) << t1.status().to_string();
  EXPECT_EQ(t1->version_id, v1->version_id);
  EXPECT_EQ(t1->etag, v1->etag);
  EXPECT_EQ(t1->mtime_ns, v1->mtime_ns);
  auto tn = store_->set_object_version_tags(kBucket, "k", "null", TagSet{{"n", "2"}});
  ASSERT_TRUE(tn.ok()) << tn.status().to_string();
  EXPECT_EQ(tn->version_id, "null");
  auto latest = store_->set_object_version_tags(kBucket, "k", "", TagSet{{"l", "3"}});
  ASSERT_TRUE(latest.ok()) << latest.status().to_string();
  EXPECT_EQ(latest->version_id, v2->version_id);
  const std::pair<std::string, TagSet> want[] = {{v1->version_id, TagSet{{"a", "1"}}},
                                                 {"null", TagSet{{"n", "2"}}},
                                                 {v2->version_id, TagSet{{"l", "3"}}}};
  for (const auto& [id, tags] : want) {
    auto h = store_->head_object_version(kBucket, "k", id);
    ASSERT_TRUE(h.ok()) << id;
    EXPECT_EQ(h->tags, tags) << id;
  }
  EXPECT_EQ(*get(*store_, kBucket, "k"), "two");  // tagging made no version the latest
  EXPECT_EQ(store_->set_object_version_tags(kBucket, "k", std::string(32, '0'), {}).code(),
            Errc::no_such_version);
  EXPECT_EQ(store_->set_object_version_tags(kBucket, "k", "bad", {}).code(),
            Errc::invalid_argument);
  EXPECT_EQ(store_->set_object_version_tags(kBucket, "absent", "", {}).code(), Errc::no_such_key);
  EXPECT_EQ(store_->set_object_version_tags(kBucket, "absent", v1->version_id, {}).code(),
            Errc::no_such_version);
  auto marker = store_->delete_object_version(kBucket, "k", "");
  ASSERT_TRUE(marker.ok() && marker->delete_marker);
  EXPECT_EQ(store_->set_object_version_tags(kBucket, "k", marker->version_id, {}).code(),
            Errc::method_not_allowed);
  EXPECT_EQ(store_->set_object_version_tags(kBucket, "k", "", {}).code(), Errc::no_such_key);
  EXPECT_EQ(store_->set_object_tags(kBucket, "k", {}).code(), Errc::no_such_key);
  auto again = store_->set_object_version_tags(kBucket, "k", v1->version_id, {});
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_TRUE(again->tags.empty());
}

TEST_P(Conformance, ListObjectVersionsPagesInsideKeys) {
  if (!store_->supports_versioning()) GTEST_SKIP() << "this backend keeps no versions";
  make_bucket(std::string(kBucket));
  ASSERT_TRUE(put(*store_, kBucket, "0plain", "x").ok());  // never versioned: one null version
  ASSERT_TRUE(store_->set_bucket_config(kBucket, versioning_config_name, "Enabled").ok());
  std::vector<std::pair<std::string, std::string>> want{{"0plain", "null"}};
  for (const char* key : {"a", "ab", "b/x", "c"}) {
    std::vector<std::string> ids;
    for (int i = 0; i < 3; ++i) {
      auto m = put(*store_, kBucket, key, "x");
      ASSERT_TRUE(m.ok()) << m.status().to_string();
      ids.push_back(m->version_id);
    }
    if (std::string_view(key) == "c") {  // a delete marker is the latest version of "c"
      auto d = store_->delete_object_version(kBucket, key, "");
      ASSERT_TRUE(d.ok());
      ids.push_back(d->version_id);
    }
    for (auto it = ids.rbegin(); it != ids.rend(); ++it) want.emplace_back(key, *it);
  }
  for (std::uint32_t page : {1u, 2u, 4u, 13u, 14u}) {
    ListVersionsQuery q;
    q.max_keys = page;
    std::vector<std::pair<std::string, std::string>> got;
    for (int guard = 0; guard < 40; ++guard) {
      auto r = store_->list_object_versions(kBucket, q);
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
  auto r = store_->list_object_versions(kBucket, d);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->common_prefixes, std::vector<std::string>{"b/"});
  EXPECT_EQ(r->versions.size(), 11u);
  ListVersionsQuery bad;
  bad.key_marker = "a";
  bad.version_id_marker = "zz";
  // radosgw and moto treat version ids as opaque: a malformed marker is simply not found (the
  // listing starts after the key), where ObjDirect's ids have a form to check.
  const bool opaque_ids =
      GetParam()->upstream_kind == "radosgw" || GetParam()->upstream_kind == "moto";
  EXPECT_EQ(store_->list_object_versions(kBucket, bad).code(),
            opaque_ids ? Errc::ok : Errc::invalid_argument);
  // ListObjects hides "c", whose latest version is a delete marker.
  auto listed = store_->list_objects(kBucket, ListQuery{});
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(keys_of(*listed), (std::vector<std::string>{"0plain", "a", "ab", "b/x"}));
  // ... and, as AWS, a common prefix all of whose keys have a marker as latest ("d/"); "e/" has
  // one live key after a hidden one.
  for (const char* key : {"d/x", "d/y", "e/x", "e/y"})
    ASSERT_TRUE(put(*store_, kBucket, key, "x").ok());
  for (const char* key : {"d/x", "d/y", "e/x"}) {
    ASSERT_TRUE(store_->delete_object_version(kBucket, key, "").ok());
  }
  ListQuery lq;
  lq.delimiter = "/";
  auto rolled = store_->list_objects(kBucket, lq);
  ASSERT_TRUE(rolled.ok());
  EXPECT_EQ(keys_of(*rolled), (std::vector<std::string>{"0plain", "a", "ab"}));
  // moto 5.2 rolls a prefix up whatever its keys' latest versions are, as ListObjectVersions
  // does ("d/" too); hiding it in the gateway would cost a listing per common prefix.
  const bool moto = GetParam()->upstream_kind == "moto";
  EXPECT_EQ(rolled->common_prefixes, moto ? (std::vector<std::string>{"b/", "d/", "e/"})
                                          : (std::vector<std::string>{"b/", "e/"}));
  lq.max_keys = 4;
  auto first = store_->list_objects(kBucket, lq);
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(first->truncated);
  EXPECT_EQ(first->common_prefixes, std::vector<std::string>{"b/"});
  lq.start_after = first->next_marker;
  auto rest = store_->list_objects(kBucket, lq);
  ASSERT_TRUE(rest.ok());
  EXPECT_FALSE(rest->truncated);
  EXPECT_TRUE(rest->objects.empty());
  EXPECT_EQ(rest->common_prefixes,
            moto ? (std::vector<std::string>{"d/", "e/"}) : (std::vector<std::string>{"e/"}));
  // ListObjectVersions still rolls "d/" up: its markers are versions.
  ListVersionsQuery vq;
  vq.delimiter = "/";
  auto vr = store_->list_object_versions(kBucket, vq);
  ASSERT_TRUE(vr.ok());
  EXPECT_EQ(vr->common_prefixes, (std::vector<std::string>{"b/", "d/", "e/"}));
}

}  // namespace objdirect::storage::conformance
