#include "storage/cache/caching_store.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <list>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

#include "common/blocking.hpp"
#include "common/checksum.hpp"

namespace objdirect::storage::cache {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// The index key of an object: bucket names never contain NUL, so this is unambiguous.
std::string object_key(std::string_view bucket, std::string_view key) {
  std::string s(bucket);
  s.push_back('\0');
  s += key;
  return s;
}

// The index key of one object version: its blocks are pinned together.
std::string version_key(std::string_view bucket, std::string_view key, std::string_view etag,
                        std::uint64_t size) {
  std::string s = object_key(bucket, key);
  s.push_back('\0');
  s += etag;
  s.push_back('\0');
  s += std::to_string(size);
  return s;
}

std::string hex(std::string_view raw) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : raw) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

Status sys_error(const std::string& what) {
  const int e = errno;
  return Status(e == ENOSPC || e == EDQUOT ? Errc::no_space : Errc::io_error,
                what + ": " + std::strerror(e));
}

// pread until `n` bytes or end of file; -1 on error.
ssize_t pread_full(int fd, void* buf, std::size_t n, std::uint64_t off) {
  std::size_t got = 0;
  while (got < n) {
    ssize_t r = ::pread(fd, static_cast<char*>(buf) + got, n - got, static_cast<off_t>(off + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) break;
    got += static_cast<std::size_t>(r);
  }
  return static_cast<ssize_t>(got);
}

bool write_full(int fd, const void* buf, std::size_t n) {
  std::size_t done = 0;
  while (done < n) {
    ssize_t r = ::write(fd, static_cast<const char*>(buf) + done, n - done);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    done += static_cast<std::size_t>(r);
  }
  return true;
}

// The identity of one block of one object version.
struct BlockId {
  std::string_view bucket, key, etag;
  std::uint64_t object_size = 0;
  std::uint64_t block_bytes = 0;
  std::uint64_t index = 0;
};

std::string block_name(const BlockId& id) {
  EvpDigest d(EvpDigest::Kind::sha256);
  auto feed_str = [&d](std::string_view s) {
    const std::uint64_t n = s.size();
    d.update(&n, sizeof n);
    d.update(s.data(), s.size());
  };
  feed_str(id.bucket);
  feed_str(id.key);
  feed_str(id.etag);
  const std::uint64_t nums[3] = {id.object_size, id.block_bytes, id.index};
  d.update(nums, sizeof nums);
  return hex(d.raw().substr(0, 16));
}

}  // namespace

struct CachingStore::Core {
  struct Entry {
    std::string okey;
    std::string vkey;
    std::uint64_t bytes = 0;  // file size, header included
    bool verified = false;    // data CRC checked (or written by this process)
    std::list<std::string>::iterator lru;
  };
  struct Fill {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    Status st;
    std::vector<std::byte> data;
  };
  struct MetaEntry {
    ObjectMeta meta;
    Clock::time_point validated;
    std::list<std::string>::iterator lru;
  };
  struct Counters {
    std::atomic<std::uint64_t> hits{0}, misses{0}, coalesced_waits{0}, bytes_served{0},
        bytes_filled{0}, bytes_bypassed{0}, evictions{0}, invalid_blocks{0}, fill_errors{0},
        meta_hits{0}, revalidations_unchanged{0}, revalidations_changed{0}, inner_requests{0};
  };
  struct Validated {
    std::optional<ObjectMeta> meta;
    std::uint64_t gen = 0;
  };

  std::shared_ptr<ObjectStore> inner;
  CacheOptions opt;
  std::string blocks_dir, tmp_dir;
  int lock_fd = -1;
  std::atomic<std::uint64_t> tmp_seq{0};
  Counters c;

  mutable std::mutex mu;
  std::unordered_map<std::string, Entry> blocks;            // file name -> entry
  std::list<std::string> lru;                               // front: most recently used
  std::map<std::string, std::set<std::string>> obj_blocks;  // object key -> file names
  std::unordered_map<std::string, std::shared_ptr<Fill>> fills;
  std::map<std::string, MetaEntry> metas;  // ordered: a bucket's keys are one range
  // Versions read by readers that hold no inner reader: their blocks are the readers' only copy
  // of that version, so neither eviction nor invalidation deletes them while pinned.
  std::unordered_map<std::string, int> pins;
  std::list<std::string> meta_lru;
  // head_bucket answers (every S3 request checks its bucket), trusted max(ttl_s, bucket_ttl_s).
  std::unordered_map<std::string, std::pair<BucketInfo, Clock::time_point>> buckets;
  std::uint64_t bytes_used = 0;  // indexed files plus reservations of fills in progress
  std::uint64_t gen = 0;         // bumped by every invalidation

  ~Core() {
    if (lock_fd >= 0) ::close(lock_fd);
  }

  std::string path_of(const std::string& name) const { return blocks_dir + "/" + name; }

  BlockId id_of(std::string_view bucket, std::string_view key, const ObjectMeta& m,
                std::uint64_t index) const {
    return BlockId{bucket, key, m.etag, m.size, opt.block_bytes, index};
  }

  // Whether blocks of this object version can be cached at all.
  bool cacheable(std::string_view bucket, std::string_view key, const ObjectMeta& m) const {
    if (opt.bytes_max == 0 || m.etag.size() > cache_limits::etag_bytes_max) return false;
    if (bucket.empty() || bucket.size() > limits::bucket_name_max) return false;
    if (key.empty() || key.size() > limits::key_bytes_max) return false;
    const std::uint64_t largest = std::min<std::uint64_t>(opt.block_bytes, m.size);
    return cache_limits::header_bytes_max + largest <= opt.bytes_max;
  }

  std::uint64_t block_count(std::uint64_t size) const {
    return size / opt.block_bytes + (size % opt.block_bytes != 0);
  }

  // Whether every block of the version is cached; if so, pins the version (atomically with the
  // check, so that no invalidation slips in between). The caller unpins.
  bool pin_if_all_cached(std::string_view bucket, std::string_view key, const ObjectMeta& m) {
    const std::uint64_t n = block_count(m.size);
    if (n > (1u << 16)) return false;  // not worth hashing every name of a huge object
    std::vector<std::string> names;
    names.reserve(n);
    for (std::uint64_t i = 0; i < n; ++i) names.push_back(block_name(id_of(bucket, key, m, i)));
    std::lock_guard lock(mu);
    for (const auto& name : names) {
      if (!blocks.contains(name)) return false;
    }
    ++pins[version_key(bucket, key, m.etag, m.size)];
    return true;
  }

  void unpin(const std::string& vkey) {
    std::lock_guard lock(mu);
    auto it = pins.find(vkey);
    if (it != pins.end() && --it->second == 0) pins.erase(it);
  }

  bool pinned_locked(const std::string& name) const {
    auto it = blocks.find(name);
    return it != blocks.end() && pins.contains(it->second.vkey);
  }

  void remove_locked(const std::string& name, bool unlink_file) {
    auto it = blocks.find(name);
    if (it == blocks.end()) return;
    if (unlink_file) ::unlink(path_of(name).c_str());
    bytes_used -= std::min(bytes_used, it->second.bytes);
    lru.erase(it->second.lru);
    if (auto ob = obj_blocks.find(it->second.okey); ob != obj_blocks.end()) {
      ob->second.erase(name);
      if (ob->second.empty()) obj_blocks.erase(ob);
    }
    blocks.erase(it);
  }

  // Evicts least recently used blocks until `bytes` more fit under bytes_max, then reserves them.
  bool reserve_locked(std::uint64_t bytes) {
    evict_locked(bytes);
    if (bytes_used + bytes > opt.bytes_max) return false;  // fills in progress hold the rest
    bytes_used += bytes;
    return true;
  }

  // Evicts least recently used unpinned blocks until `bytes` more fit under bytes_max.
  void evict_locked(std::uint64_t bytes) {
    auto it = lru.end();
    while (bytes_used + bytes > opt.bytes_max && it != lru.begin()) {
      --it;
      if (pinned_locked(*it)) continue;
      const std::string name = *it;
      it = std::next(it);  // remove_locked erases the element `it` pointed to
      remove_locked(name, true);
      c.evictions++;
    }
  }

  void drop_object_locked(const std::string& okey) {
    if (auto m = metas.find(okey); m != metas.end()) {
      meta_lru.erase(m->second.lru);
      metas.erase(m);
    }
    if (auto ob = obj_blocks.find(okey); ob != obj_blocks.end()) {
      const std::set<std::string> names = ob->second;
      for (const auto& name : names) {
        if (!pinned_locked(name)) remove_locked(name, true);
      }
    }
  }

  void invalidate(std::string_view bucket, std::string_view key) {
    std::lock_guard lock(mu);
    drop_object_locked(object_key(bucket, key));
    ++gen;
  }

  void invalidate_bucket(std::string_view bucket) {
    std::string lo(bucket);
    lo.push_back('\0');
    std::string hi(bucket);
    hi.push_back('\1');
    std::lock_guard lock(mu);
    std::set<std::string> okeys;
    for (auto it = metas.lower_bound(lo); it != metas.end() && it->first < hi; ++it) {
      okeys.insert(it->first);
    }
    for (auto it = obj_blocks.lower_bound(lo); it != obj_blocks.end() && it->first < hi; ++it) {
      okeys.insert(it->first);
    }
    for (const auto& k : okeys) drop_object_locked(k);
    buckets.erase(std::string(bucket));
    ++gen;
  }

  // Forgets the metadata of every key of the bucket (its blocks stay: the bytes did not change)
  // and the bucket's head_bucket answer: a change of the bucket's versioning state changes what
  // every key's metadata says (the version id of an object written before it, "" -> "null").
  void forget_bucket_metas(std::string_view bucket) {
    std::string lo(bucket);
    lo.push_back('\0');
    std::string hi(bucket);
    hi.push_back('\1');
    std::lock_guard lock(mu);
    for (auto it = metas.lower_bound(lo); it != metas.end() && it->first < hi;) {
      meta_lru.erase(it->second.lru);
      it = metas.erase(it);
    }
    buckets.erase(std::string(bucket));
    ++gen;
  }

  // Records meta as validated now, unless an invalidation happened since `seen_gen` (then the
  // meta may predate a write through this cache).
  void remember(std::string_view bucket, std::string_view key, const ObjectMeta& m,
                std::uint64_t seen_gen) {
    std::lock_guard lock(mu);
    if (gen != seen_gen) return;
    const std::string okey = object_key(bucket, key);
    auto it = metas.find(okey);
    if (it != metas.end()) {
      it->second.meta = m;
      it->second.validated = Clock::now();
      meta_lru.splice(meta_lru.begin(), meta_lru, it->second.lru);
      return;
    }
    meta_lru.push_front(okey);
    metas.emplace(okey, MetaEntry{m, Clock::now(), meta_lru.begin()});
    while (metas.size() > opt.meta_entries_max) {
      metas.erase(meta_lru.back());
      meta_lru.pop_back();
    }
  }

  // The key's metadata if this cache holds it and it is (re)validated; nullopt when the cache
  // knows nothing (the caller asks the inner store). Errors of the revalidation pass through.
  Result<Validated> validated_meta(std::string_view bucket, std::string_view key) {
    const std::string okey = object_key(bucket, key);
    std::string etag;
    std::uint64_t seen;
    {
      std::lock_guard lock(mu);
      seen = gen;
      auto it = metas.find(okey);
      if (it == metas.end()) return Validated{std::nullopt, seen};
      if (opt.ttl_s > 0 && Clock::now() - it->second.validated < std::chrono::seconds(opt.ttl_s)) {
        meta_lru.splice(meta_lru.begin(), meta_lru, it->second.lru);
        c.meta_hits++;
        return Validated{it->second.meta, seen};
      }
      etag = it->second.meta.etag;
    }
    c.inner_requests++;
    auto rv = inner->revalidate(bucket, key, etag);
    if (!rv.ok()) {
      if (rv.code() == Errc::no_such_key || rv.code() == Errc::no_such_bucket) {
        c.revalidations_changed++;
        invalidate(bucket, key);
      }
      return rv.status();
    }
    if (!rv->has_value()) {
      c.revalidations_unchanged++;
      std::lock_guard lock(mu);
      auto it = metas.find(okey);
      if (gen == seen && it != metas.end() && it->second.meta.etag == etag) {
        it->second.validated = Clock::now();
        meta_lru.splice(meta_lru.begin(), meta_lru, it->second.lru);
        return Validated{it->second.meta, seen};
      }
      return Validated{std::nullopt, gen};  // a write through the cache raced: ask again
    }
    c.revalidations_changed++;
    invalidate(bucket, key);  // the old version's blocks are of no further use
    std::uint64_t now_gen;
    {
      std::lock_guard lock(mu);
      now_gen = gen;
    }
    remember(bucket, key, **rv, now_gen);
    return Validated{std::move(**rv), now_gen};
  }

  // Reads [off, off+dst.size()) of a cached block into dst. false: not cached (or found invalid
  // and dropped), so the caller fills it.
  bool read_cached(const BlockId& id, const std::string& name, std::uint64_t off,
                   std::span<std::byte> dst) {
    bool verified;
    {
      std::lock_guard lock(mu);
      auto it = blocks.find(name);
      if (it == blocks.end()) return false;
      lru.splice(lru.begin(), lru, it->second.lru);
      verified = it->second.verified;
    }
    auto invalid = [&](bool unlink_file) {
      c.invalid_blocks++;
      std::lock_guard lock(mu);
      remove_locked(name, unlink_file);
      return false;
    };
    // Reading through an fd pins the file: an eviction that unlinks it meanwhile cuts nothing.
    const int fd = ::open(path_of(name).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return invalid(false);
    struct FdCloser {
      int fd;
      ~FdCloser() { ::close(fd); }
    } closer{fd};
    char hb[cache_limits::header_bytes_max];
    const ssize_t hn = pread_full(fd, hb, sizeof hb, 0);
    if (hn < 0) return invalid(true);
    std::size_t hlen = 0;
    auto h = decode_block_header(std::string_view(hb, static_cast<std::size_t>(hn)), &hlen);
    if (!h.ok() || h->bucket != id.bucket || h->key != id.key || h->etag != id.etag ||
        h->object_size != id.object_size || h->block_bytes != id.block_bytes ||
        h->block_index != id.index) {
      return invalid(true);
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 ||
        static_cast<std::uint64_t>(st.st_size) != hlen + std::uint64_t{h->data_bytes} ||
        off + dst.size() > h->data_bytes) {
      return invalid(true);
    }
    if (!verified) {
      std::vector<std::byte> all(h->data_bytes);
      if (pread_full(fd, all.data(), all.size(), hlen) != static_cast<ssize_t>(all.size()) ||
          block_crc32c(all.data(), all.size()) != h->data_crc32c) {
        return invalid(true);
      }
      std::memcpy(dst.data(), all.data() + off, dst.size());
      std::lock_guard lock(mu);
      if (auto it = blocks.find(name); it != blocks.end()) it->second.verified = true;
    } else if (pread_full(fd, dst.data(), dst.size(), hlen + off) !=
               static_cast<ssize_t>(dst.size())) {
      return invalid(true);
    }
    c.hits++;
    c.bytes_served += dst.size();
    return true;
  }

  // Writes a complete block file (temp name, then rename) and indexes it; failures only count.
  void store_block(const BlockId& id, const std::string& name, std::string_view okey,
                   const std::vector<std::byte>& data) {
    BlockHeader h;
    h.bucket = std::string(id.bucket);
    h.key = std::string(id.key);
    h.etag = std::string(id.etag);
    h.object_size = id.object_size;
    h.block_index = id.index;
    h.block_bytes = static_cast<std::uint32_t>(id.block_bytes);
    h.data_bytes = static_cast<std::uint32_t>(data.size());
    h.data_crc32c = block_crc32c(data.data(), data.size());
    const std::string hdr = encode_block_header(h);
    const std::uint64_t total = hdr.size() + data.size();
    {
      std::lock_guard lock(mu);
      if (!reserve_locked(total)) return;
    }
    const std::string tmp = tmp_dir + "/" + name + "." + std::to_string(::getpid()) + "." +
                            std::to_string(tmp_seq++) + ".tmp";
    bool ok = false;
    const BlockingScope blocking;
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ok = write_full(fd, hdr.data(), hdr.size()) && write_full(fd, data.data(), data.size()) &&
           (!opt.fsync || ::fsync(fd) == 0);
      ok = (::close(fd) == 0) && ok;
      ok = ok && ::rename(tmp.c_str(), path_of(name).c_str()) == 0;
      if (!ok) ::unlink(tmp.c_str());
    }
    std::lock_guard lock(mu);
    if (!ok) {
      c.fill_errors++;
      bytes_used -= std::min(bytes_used, total);
      return;
    }
    // The rename replaced any older file of this name (same identity, same bytes).
    remove_locked(name, false);
    lru.push_front(name);
    blocks.emplace(name,
                   Entry{std::string(okey), version_key(id.bucket, id.key, id.etag, id.object_size),
                         total, true, lru.begin()});
    obj_blocks[std::string(okey)].insert(name);
  }

  Status scan() {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(tmp_dir, ec)) fs::remove(e.path(), ec);
    struct Found {
      std::int64_t mtime_ns;
      std::string name, okey, vkey;
      std::uint64_t bytes;
    };
    std::vector<Found> found;
    for (const auto& e : fs::directory_iterator(blocks_dir, ec)) {
      const std::string name = e.path().filename().string();
      const std::string path = e.path().string();
      const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
      bool good = false;
      struct stat st {};
      std::size_t hlen = 0;
      Result<BlockHeader> h = Status(Errc::corrupt, "unreadable");
      if (fd >= 0) {
        char hb[cache_limits::header_bytes_max];
        const ssize_t hn = pread_full(fd, hb, sizeof hb, 0);
        if (hn > 0) h = decode_block_header(std::string_view(hb, std::size_t(hn)), &hlen);
        good = h.ok() && ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
               std::uint64_t(st.st_size) == hlen + h->data_bytes &&
               h->block_bytes == opt.block_bytes &&
               name == block_name(BlockId{h->bucket, h->key, h->etag, h->object_size,
                                          h->block_bytes, h->block_index});
        ::close(fd);
      }
      if (!good) {
        c.invalid_blocks++;
        fs::remove_all(e.path(), ec);
        continue;
      }
      found.push_back({std::int64_t(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec, name,
                       object_key(h->bucket, h->key),
                       version_key(h->bucket, h->key, h->etag, h->object_size),
                       std::uint64_t(st.st_size)});
    }
    if (ec) return Status(Errc::io_error, "scanning " + blocks_dir + ": " + ec.message());
    std::sort(found.begin(), found.end(),
              [](const Found& a, const Found& b) { return a.mtime_ns < b.mtime_ns; });
    std::lock_guard lock(mu);
    for (auto& f : found) {
      lru.push_front(f.name);
      obj_blocks[f.okey].insert(f.name);
      blocks.emplace(f.name,
                     Entry{std::move(f.okey), std::move(f.vkey), f.bytes, false, lru.begin()});
      bytes_used += f.bytes;
    }
    evict_locked(0);
    return Status::Ok();
  }
};

namespace {

// A reader over cache blocks, filling missing blocks from the inner store.
// Thread safety: one thread at a time (ObjectReader contract); shares the Core.
class CachedReader : public ObjectReader {
 public:
  CachedReader(std::shared_ptr<CachingStore::Core> core, std::string_view bucket,
               std::string_view key, ObjectMeta meta, std::unique_ptr<ObjectReader> inner)
      : pinned_(inner == nullptr),
        core_(std::move(core)),
        bucket_(bucket),
        key_(key),
        okey_(object_key(bucket, key)),
        meta_(std::move(meta)),
        inner_(std::move(inner)),
        cacheable_(core_->cacheable(bucket, key, meta_)) {}

  ~CachedReader() override {
    if (pinned_) core_->unpin(version_key(bucket_, key_, meta_.etag, meta_.size));
  }

  const ObjectMeta& meta() const override { return meta_; }

  Result<std::vector<Extent>> extents(std::uint64_t, std::uint64_t) override {
    return std::vector<Extent>{};
  }

  Result<std::size_t> pread(std::span<std::byte> dst, std::uint64_t offset) override {
    if (offset >= meta_.size || dst.empty()) return std::size_t{0};
    const std::size_t n =
        static_cast<std::size_t>(std::min<std::uint64_t>(dst.size(), meta_.size - offset));
    if (!cacheable_) {
      OBJDIRECT_RETURN_IF_ERROR(ensure_inner());
      auto r = inner_read(dst.first(n), offset);
      if (r.ok()) core_->c.bytes_bypassed += *r;
      return r;
    }
    const std::uint64_t bb = core_->opt.block_bytes;
    std::size_t done = 0;
    while (done < n) {
      const std::uint64_t pos = offset + done;
      const std::uint64_t index = pos / bb;
      const std::uint64_t in_block = pos % bb;
      const std::uint64_t blen = block_data_bytes(meta_.size, bb, index);
      const std::size_t want =
          static_cast<std::size_t>(std::min<std::uint64_t>(n - done, blen - in_block));
      OBJDIRECT_RETURN_IF_ERROR(read_block(index, in_block, blen, dst.subspan(done, want)));
      done += want;
    }
    return n;
  }

 private:
  using Core = CachingStore::Core;

  Status ensure_inner() {
    if (inner_) return Status::Ok();
    core_->c.inner_requests++;
    auto r = core_->inner->open_object(bucket_, key_);
    if (!r.ok() && r.code() != Errc::no_such_key) return r.status();
    if (!r.ok() || (*r)->meta().etag != meta_.etag || (*r)->meta().size != meta_.size) {
      core_->invalidate(bucket_, key_);
      return Status(Errc::precondition_failed,
                    "the object changed in the backing store while it was being read from the "
                    "cache; retry the request");
    }
    inner_ = std::move(*r);
    return Status::Ok();
  }

  // Inner preads until dst is full or the object ends.
  Result<std::size_t> inner_read(std::span<std::byte> dst, std::uint64_t offset) {
    std::size_t got = 0;
    while (got < dst.size()) {
      core_->c.inner_requests++;
      auto r = inner_->pread(dst.subspan(got), offset + got);
      if (!r.ok()) return r.status();
      if (*r == 0) break;
      got += *r;
    }
    return got;
  }

  Status read_block(std::uint64_t index, std::uint64_t in_block, std::uint64_t blen,
                    std::span<std::byte> dst) {
    const BlockId id = core_->id_of(bucket_, key_, meta_, index);
    const std::string name = block_name(id);
    for (;;) {
      if (core_->read_cached(id, name, in_block, dst)) return Status::Ok();
      std::shared_ptr<Core::Fill> fill;
      bool filler = false;
      {
        std::lock_guard lock(core_->mu);
        if (core_->blocks.contains(name)) continue;  // filled since we looked: read it
        auto it = core_->fills.find(name);
        if (it != core_->fills.end()) {
          fill = it->second;
        } else {
          fill = std::make_shared<Core::Fill>();
          core_->fills.emplace(name, fill);
          filler = true;
        }
      }
      if (!filler) {
        core_->c.coalesced_waits++;
        std::unique_lock fl(fill->mu);
        fill->cv.wait(fl, [&] { return fill->done; });
        if (!fill->st.ok()) return fill->st;
        std::memcpy(dst.data(), fill->data.data() + in_block, dst.size());
        core_->c.bytes_served += dst.size();
        return Status::Ok();
      }
      core_->c.misses++;
      std::vector<std::byte> data;
      Status st = ensure_inner();
      if (st.ok()) {
        data.resize(static_cast<std::size_t>(blen));
        auto r = inner_read(data, index * core_->opt.block_bytes);
        if (!r.ok()) {
          st = r.status();
        } else if (*r != blen) {
          st = Status(Errc::io_error, "the backing object is shorter than its metadata");
        }
      }
      if (st.ok()) {
        core_->c.bytes_filled += blen;
        core_->store_block(id, name, okey_, data);
        std::memcpy(dst.data(), data.data() + in_block, dst.size());
      }
      {
        std::lock_guard fl(fill->mu);
        fill->done = true;
        fill->st = st;
        if (st.ok()) fill->data = std::move(data);
      }
      fill->cv.notify_all();
      {
        std::lock_guard lock(core_->mu);
        core_->fills.erase(name);
      }
      // The inner reader found the object changed (the gateway's If-Match pin answered 412):
      // forget the cached meta so that the next open asks the backend and recovers.
      if (st.code() == Errc::precondition_failed) core_->invalidate(bucket_, key_);
      return st;
    }
  }

  const bool pinned_;  // opened without an inner reader: the version's blocks are pinned
  std::shared_ptr<Core> core_;
  std::string bucket_, key_, okey_;
  ObjectMeta meta_;
  std::unique_ptr<ObjectReader> inner_;
  bool cacheable_;
};

}  // namespace

Result<std::unique_ptr<CachingStore>> CachingStore::open(std::unique_ptr<ObjectStore> inner,
                                                         const CacheOptions& options) {
  if (!inner) return Status(Errc::invalid_argument, "cache: no inner store");
  if (options.dir.empty()) return Status(Errc::invalid_argument, "cache: empty directory name");
  if (options.block_bytes < cache_limits::block_bytes_min ||
      options.block_bytes > cache_limits::block_bytes_max) {
    return Status(Errc::invalid_argument,
                  "cache: block size must be between " +
                      std::to_string(cache_limits::block_bytes_min) + " and " +
                      std::to_string(cache_limits::block_bytes_max) + " bytes");
  }
  if (options.ttl_s > cache_limits::ttl_s_max || options.bucket_ttl_s > cache_limits::ttl_s_max) {
    return Status(Errc::invalid_argument,
                  "cache: TTL over " + std::to_string(cache_limits::ttl_s_max) + " s");
  }
  if (options.meta_entries_max == 0) {
    return Status(Errc::invalid_argument, "cache: meta_entries_max must be at least 1");
  }
  auto core = std::make_shared<Core>();
  core->inner = std::shared_ptr<ObjectStore>(std::move(inner));
  core->opt = options;
  core->blocks_dir = options.dir + "/blocks";
  core->tmp_dir = options.dir + "/tmp";
  std::error_code ec;
  fs::create_directories(core->blocks_dir, ec);
  if (!ec) fs::create_directories(core->tmp_dir, ec);
  if (ec) return Status(Errc::io_error, "cache: creating " + options.dir + ": " + ec.message());
  const std::string lock_path = options.dir + "/LOCK";
  core->lock_fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (core->lock_fd < 0) return sys_error("cache: opening " + lock_path);
  if (::flock(core->lock_fd, LOCK_EX | LOCK_NB) != 0) {
    return Status(Errc::unavailable,
                  "cache: directory " + options.dir + " is in use by another process");
  }
  OBJDIRECT_RETURN_IF_ERROR(core->scan());
  return std::unique_ptr<CachingStore>(new CachingStore(std::move(core)));
}

CachingStore::CachingStore(std::shared_ptr<Core> core) : core_(std::move(core)) {}
CachingStore::~CachingStore() = default;

void CachingStore::register_metrics(metrics::Sink& sink) const {
  struct Series {
    const char* name;
    std::uint64_t CacheStats::*field;
    const char* help;
  };
  const Series counters[] = {
      {"objdirect_cache_hits_total", &CacheStats::hits, "Block reads served from the cache."},
      {"objdirect_cache_misses_total", &CacheStats::misses, "Block reads filled from the backend."},
      {"objdirect_cache_coalesced_waits_total", &CacheStats::coalesced_waits,
       "Block reads that waited for another read's fill."},
      {"objdirect_cache_bytes_served_total", &CacheStats::bytes_served,
       "Bytes served from the cache."},
      {"objdirect_cache_bytes_filled_total", &CacheStats::bytes_filled,
       "Bytes read from the backend into blocks."},
      {"objdirect_cache_bytes_bypassed_total", &CacheStats::bytes_bypassed,
       "Bytes read from the backend without caching them."},
      {"objdirect_cache_evictions_total", &CacheStats::evictions,
       "Blocks evicted to stay under --cache-bytes-max."},
      {"objdirect_cache_invalid_blocks_total", &CacheStats::invalid_blocks,
       "Block files found torn, corrupt or foreign (dropped)."},
      {"objdirect_cache_fill_errors_total", &CacheStats::fill_errors,
       "Blocks that could not be written."},
      {"objdirect_cache_meta_hits_total", &CacheStats::meta_hits,
       "Metadata lookups answered within the TTL."},
      {"objdirect_cache_revalidations_unchanged_total", &CacheStats::revalidations_unchanged,
       "Revalidations that found the same ETag (304)."},
      {"objdirect_cache_revalidations_changed_total", &CacheStats::revalidations_changed,
       "Revalidations that found another ETag or none."},
      {"objdirect_cache_inner_requests_total", &CacheStats::inner_requests,
       "Calls the cache made to the backend and its readers."},
  };
  const Series gauges[] = {
      {"objdirect_cache_blocks", &CacheStats::blocks, "Blocks in the cache."},
      {"objdirect_cache_bytes", &CacheStats::bytes, "Disk bytes used by the cache."},
  };
  auto stat = [this](std::uint64_t CacheStats::*field) {
    return [this, field] { return static_cast<double>(stats().*field); };
  };
  for (const auto& c : counters) sink.add_counter(c.name, c.help, stat(c.field));
  for (const auto& g : gauges) sink.add_gauge(g.name, g.help, stat(g.field));
}

CacheStats CachingStore::stats() const {
  const auto& c = core_->c;
  CacheStats s;
  s.hits = c.hits;
  s.misses = c.misses;
  s.coalesced_waits = c.coalesced_waits;
  s.bytes_served = c.bytes_served;
  s.bytes_filled = c.bytes_filled;
  s.bytes_bypassed = c.bytes_bypassed;
  s.evictions = c.evictions;
  s.invalid_blocks = c.invalid_blocks;
  s.fill_errors = c.fill_errors;
  s.meta_hits = c.meta_hits;
  s.revalidations_unchanged = c.revalidations_unchanged;
  s.revalidations_changed = c.revalidations_changed;
  s.inner_requests = c.inner_requests;
  std::lock_guard lock(core_->mu);
  s.blocks = core_->blocks.size();
  s.bytes = core_->bytes_used;
  return s;
}

std::string CachingStore::block_path(std::string_view bucket, std::string_view key,
                                     std::string_view etag, std::uint64_t object_size,
                                     std::uint64_t index) const {
  return core_->path_of(
      block_name(BlockId{bucket, key, etag, object_size, core_->opt.block_bytes, index}));
}

// --- pass-through with invalidation --------------------------------------------------------------

Status CachingStore::create_bucket(const BucketInfo& info) {
  core_->c.inner_requests++;
  Status st = core_->inner->create_bucket(info);
  std::lock_guard lock(core_->mu);
  core_->buckets.erase(info.name);
  return st;
}

Status CachingStore::delete_bucket(std::string_view bucket) {
  core_->c.inner_requests++;
  Status st = core_->inner->delete_bucket(bucket);
  if (st.ok()) core_->invalidate_bucket(bucket);
  return st;
}

Result<BucketInfo> CachingStore::head_bucket(std::string_view bucket) {
  Core& k = *core_;
  std::uint64_t seen;
  {
    std::lock_guard lock(k.mu);
    seen = k.gen;
    auto it = k.buckets.find(std::string(bucket));
    const std::uint32_t ttl = std::max(k.opt.ttl_s, k.opt.bucket_ttl_s);
    if (ttl > 0 && it != k.buckets.end() &&
        Clock::now() - it->second.second < std::chrono::seconds(ttl)) {
      k.c.meta_hits++;
      return it->second.first;
    }
  }
  k.c.inner_requests++;
  auto b = k.inner->head_bucket(bucket);
  std::lock_guard lock(k.mu);
  if (b.ok() && std::max(k.opt.ttl_s, k.opt.bucket_ttl_s) > 0 && k.gen == seen) {
    if (k.buckets.size() >= k.opt.meta_entries_max) k.buckets.clear();
    k.buckets[std::string(bucket)] = {*b, Clock::now()};
  }
  return b;
}

Result<std::vector<BucketInfo>> CachingStore::list_buckets() {
  core_->c.inner_requests++;
  return core_->inner->list_buckets();
}

Result<std::unique_ptr<BlobWriter>> CachingStore::begin_write(std::string_view bucket) {
  core_->c.inner_requests++;
  return core_->inner->begin_write(bucket);
}

Result<std::unique_ptr<BlobWriter>> CachingStore::begin_write_for(std::string_view bucket,
                                                                  std::string_view key) {
  core_->c.inner_requests++;
  return core_->inner->begin_write_for(bucket, key);
}

Result<ObjectMeta> CachingStore::commit_object(std::string_view bucket, ObjectMeta meta,
                                               std::unique_ptr<BlobWriter> data,
                                               const WriteCondition& cond) {
  const std::string key = meta.key;
  core_->invalidate(bucket, key);
  core_->c.inner_requests++;
  auto r = core_->inner->commit_object(bucket, std::move(meta), std::move(data), cond);
  if (r.ok()) core_->invalidate(bucket, key);
  return r;
}

Result<ObjectMeta> CachingStore::replace_meta(std::string_view bucket, ObjectMeta meta,
                                              std::string_view expected_etag) {
  const std::string key = meta.key;
  core_->c.inner_requests++;
  auto r = core_->inner->replace_meta(bucket, std::move(meta), expected_etag);
  if (r.ok()) core_->invalidate(bucket, key);
  return r;
}

Result<ObjectMeta> CachingStore::set_object_tags(std::string_view bucket, std::string_view key,
                                                 TagSet tags) {
  core_->c.inner_requests++;
  auto r = core_->inner->set_object_tags(bucket, key, std::move(tags));
  if (r.ok()) core_->invalidate(bucket, key);
  return r;
}

// One version's tags (version ids are never served from the cache); the key's cached metadata
// is forgotten, since the version may be the latest.
Result<ObjectMeta> CachingStore::set_object_version_tags(std::string_view bucket,
                                                         std::string_view key,
                                                         std::string_view version_id, TagSet tags) {
  core_->c.inner_requests++;
  auto r = core_->inner->set_object_version_tags(bucket, key, version_id, std::move(tags));
  if (r.ok()) core_->invalidate(bucket, key);
  return r;
}

bool CachingStore::tags_in_meta() const {
  return core_->inner->tags_in_meta();
}

Result<ObjectMeta> CachingStore::get_object_version_tags(std::string_view bucket,
                                                         std::string_view key,
                                                         std::string_view version_id) {
  core_->c.inner_requests++;
  return core_->inner->get_object_version_tags(bucket, key, version_id);
}

Status CachingStore::set_bucket_tags(std::string_view bucket, TagSet tags) {
  core_->c.inner_requests++;
  Status st = core_->inner->set_bucket_tags(bucket, std::move(tags));
  std::lock_guard lock(core_->mu);
  core_->buckets.erase(std::string(bucket));
  return st;
}

Result<TagSet> CachingStore::get_bucket_tags(std::string_view bucket) {
  core_->c.inner_requests++;
  return core_->inner->get_bucket_tags(bucket);
}

Status CachingStore::set_bucket_config(std::string_view bucket, std::string_view name,
                                       std::string document) {
  core_->c.inner_requests++;
  Status st = core_->inner->set_bucket_config(bucket, name, std::move(document));
  if (name == versioning_config_name) {
    core_->forget_bucket_metas(bucket);
    return st;
  }
  std::lock_guard lock(core_->mu);
  core_->buckets.erase(std::string(bucket));
  return st;
}

Result<ObjectMeta> CachingStore::head_object(std::string_view bucket, std::string_view key) {
  auto v = core_->validated_meta(bucket, key);
  if (!v.ok()) return v.status();
  if (v->meta) return std::move(*v->meta);
  core_->c.inner_requests++;
  auto m = core_->inner->head_object(bucket, key);
  if (m.ok() && !m->sse.enabled()) core_->remember(bucket, key, *m, v->gen);
  return m;
}

Result<std::unique_ptr<ObjectReader>> CachingStore::open_object(std::string_view bucket,
                                                                std::string_view key) {
  auto v = core_->validated_meta(bucket, key);
  if (!v.ok()) return v.status();
  if (v->meta && !v->meta->sse.enabled() && core_->cacheable(bucket, key, *v->meta) &&
      core_->pin_if_all_cached(bucket, key, *v->meta)) {
    return std::unique_ptr<ObjectReader>(
        new CachedReader(core_, bucket, key, std::move(*v->meta), nullptr));
  }
  core_->c.inner_requests++;
  auto r = core_->inner->open_object(bucket, key);
  if (!r.ok()) {
    if (v->meta && r.code() == Errc::no_such_key) core_->invalidate(bucket, key);
    return r.status();
  }
  ObjectMeta m = (*r)->meta();
  if (m.sse.enabled()) {
    // SSE-C (an inner store that served it without a key): never cached.
    core_->invalidate(bucket, key);
    return r;
  }
  std::uint64_t gen = v->gen;
  if (v->meta && v->meta->etag != m.etag) {
    core_->invalidate(bucket, key);  // changed underneath within the TTL: drop the old version
    std::lock_guard lock(core_->mu);
    gen = core_->gen;
  }
  core_->remember(bucket, key, m, gen);
  return std::unique_ptr<ObjectReader>(
      new CachedReader(core_, bucket, key, std::move(m), std::move(*r)));
}

Result<std::optional<ObjectMeta>> CachingStore::revalidate(std::string_view bucket,
                                                           std::string_view key,
                                                           std::string_view etag) {
  core_->c.inner_requests++;
  return core_->inner->revalidate(bucket, key, etag);
}

Status CachingStore::delete_object(std::string_view bucket, std::string_view key) {
  core_->c.inner_requests++;
  Status st = core_->inner->delete_object(bucket, key);
  if (st.ok()) core_->invalidate(bucket, key);
  return st;
}

Result<std::optional<std::string>> CachingStore::bucket_config(std::string_view bucket,
                                                               std::string_view name) {
  core_->c.inner_requests++;
  return core_->inner->bucket_config(bucket, name);
}

bool CachingStore::supports_versioning() const {
  return core_->inner->supports_versioning();
}

Result<ObjectMeta> CachingStore::head_object_version(std::string_view bucket, std::string_view key,
                                                     std::string_view version_id) {
  core_->c.inner_requests++;
  return core_->inner->head_object_version(bucket, key, version_id);
}

Result<std::unique_ptr<ObjectReader>> CachingStore::open_object_version(
    std::string_view bucket, std::string_view key, std::string_view version_id) {
  core_->c.inner_requests++;
  return core_->inner->open_object_version(bucket, key, version_id);
}

Result<DeleteOutcome> CachingStore::delete_object_version(std::string_view bucket,
                                                          std::string_view key,
                                                          std::string_view version_id) {
  core_->c.inner_requests++;
  auto r = core_->inner->delete_object_version(bucket, key, version_id);
  // Also on failure: the inner store may have removed the version before failing to answer.
  core_->invalidate(bucket, key);
  return r;
}

Result<ListVersionsResult> CachingStore::list_object_versions(std::string_view bucket,
                                                              const ListVersionsQuery& q) {
  core_->c.inner_requests++;
  return core_->inner->list_object_versions(bucket, q);
}

Result<ListResult> CachingStore::list_objects(std::string_view bucket, const ListQuery& q) {
  core_->c.inner_requests++;
  return core_->inner->list_objects(bucket, q);
}

Result<std::string> CachingStore::create_upload(std::string_view bucket, const UploadInfo& info) {
  core_->c.inner_requests++;
  return core_->inner->create_upload(bucket, info);
}

Result<UploadInfo> CachingStore::get_upload(std::string_view bucket, std::string_view key,
                                            std::string_view upload_id) {
  core_->c.inner_requests++;
  return core_->inner->get_upload(bucket, key, upload_id);
}

Result<PartInfo> CachingStore::commit_part(std::string_view bucket, std::string_view key,
                                           std::string_view upload_id, PartInfo info,
                                           std::unique_ptr<BlobWriter> data) {
  core_->c.inner_requests++;
  return core_->inner->commit_part(bucket, key, upload_id, std::move(info), std::move(data));
}

Result<std::vector<PartInfo>> CachingStore::list_parts(std::string_view bucket,
                                                       std::string_view key,
                                                       std::string_view upload_id,
                                                       std::uint32_t part_number_marker,
                                                       std::uint32_t max_parts) {
  core_->c.inner_requests++;
  return core_->inner->list_parts(bucket, key, upload_id, part_number_marker, max_parts);
}

Result<ObjectMeta> CachingStore::complete_upload(std::string_view bucket,
                                                 std::string_view upload_id, ObjectMeta meta,
                                                 const std::vector<CompletePartRef>& parts,
                                                 const WriteCondition& cond) {
  const std::string key = meta.key;
  core_->invalidate(bucket, key);
  core_->c.inner_requests++;
  auto r = core_->inner->complete_upload(bucket, upload_id, std::move(meta), parts, cond);
  if (r.ok()) core_->invalidate(bucket, key);
  return r;
}

Status CachingStore::abort_upload(std::string_view bucket, std::string_view key,
                                  std::string_view upload_id) {
  core_->c.inner_requests++;
  return core_->inner->abort_upload(bucket, key, upload_id);
}

Result<ListUploadsResult> CachingStore::list_uploads(std::string_view bucket,
                                                     const ListUploadsQuery& q) {
  core_->c.inner_requests++;
  return core_->inner->list_uploads(bucket, q);
}

}  // namespace objdirect::storage::cache

namespace objdirect::storage::cache {

bool CachingStore::passes_sse_c() const {
  return core_->inner->passes_sse_c();
}

Result<std::unique_ptr<ObjectReader>> CachingStore::open_object_sse(std::string_view bucket,
                                                                    std::string_view key,
                                                                    std::string_view version_id,
                                                                    const SseCKeyHeaders& sse) {
  if (!sse.present()) {
    return version_id.empty() ? open_object(bucket, key)
                              : open_object_version(bucket, key, version_id);
  }
  core_->c.inner_requests++;
  auto r = core_->inner->open_object_sse(bucket, key, version_id, sse);
  // The latest is encrypted now: whatever the cache held for the key is of an older version.
  if (r.ok() && version_id.empty()) core_->invalidate(bucket, key);
  return r;
}

Result<ObjectMeta> CachingStore::head_object_sse(std::string_view bucket, std::string_view key,
                                                 std::string_view version_id,
                                                 const SseCKeyHeaders& sse) {
  if (!sse.present()) {
    return version_id.empty() ? head_object(bucket, key)
                              : head_object_version(bucket, key, version_id);
  }
  core_->c.inner_requests++;
  auto m = core_->inner->head_object_sse(bucket, key, version_id, sse);
  if (m.ok() && version_id.empty()) core_->invalidate(bucket, key);
  return m;
}

Result<ObjectMeta> CachingStore::commit_object_sse(std::string_view bucket, ObjectMeta meta,
                                                   std::unique_ptr<BlobWriter> data,
                                                   const WriteCondition& cond,
                                                   const SseCKeyHeaders& sse) {
  if (!sse.present()) return commit_object(bucket, std::move(meta), std::move(data), cond);
  const std::string key = meta.key;
  core_->invalidate(bucket, key);
  core_->c.inner_requests++;
  auto r = core_->inner->commit_object_sse(bucket, std::move(meta), std::move(data), cond, sse);
  core_->invalidate(bucket, key);
  return r;
}

Result<std::string> CachingStore::create_upload_sse(std::string_view bucket, const UploadInfo& info,
                                                    const SseCKeyHeaders& sse) {
  if (!sse.present()) return create_upload(bucket, info);
  core_->c.inner_requests++;
  return core_->inner->create_upload_sse(bucket, info, sse);
}

Result<PartInfo> CachingStore::commit_part_sse(std::string_view bucket, std::string_view key,
                                               std::string_view upload_id, PartInfo info,
                                               std::unique_ptr<BlobWriter> data,
                                               const SseCKeyHeaders& sse) {
  if (!sse.present()) return commit_part(bucket, key, upload_id, std::move(info), std::move(data));
  core_->c.inner_requests++;
  return core_->inner->commit_part_sse(bucket, key, upload_id, std::move(info), std::move(data),
                                       sse);
}

Result<ObjectMeta> CachingStore::complete_upload_sse(std::string_view bucket,
                                                     std::string_view upload_id, ObjectMeta meta,
                                                     const std::vector<CompletePartRef>& parts,
                                                     const WriteCondition& cond,
                                                     const SseCKeyHeaders& sse) {
  if (!sse.present()) return complete_upload(bucket, upload_id, std::move(meta), parts, cond);
  const std::string key = meta.key;
  core_->invalidate(bucket, key);
  core_->c.inner_requests++;
  auto r = core_->inner->complete_upload_sse(bucket, upload_id, std::move(meta), parts, cond, sse);
  core_->invalidate(bucket, key);
  return r;
}

}  // namespace objdirect::storage::cache
