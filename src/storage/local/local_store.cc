#include "storage/local/local_store.hpp"

#include <dirent.h>
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
#include <functional>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "common/assert.hpp"
#include "common/blocking.hpp"
#include "common/limits.hpp"
#include "storage/local/meta_codec.hpp"
#include "storage/local/meta_db.hpp"
#include "storage/upload_paging.hpp"
#include "storage/version_errors.hpp"
#include "storage/version_paging.hpp"

namespace objdirect::storage {
namespace local {
namespace {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Status errno_status(int err, std::string_view what) {
  std::string msg = std::string(what) + ": " + std::strerror(err);
  if (err == ENOSPC || err == EDQUOT) return Status(Errc::no_space, std::move(msg));
  return Status(Errc::io_error, std::move(msg));
}

Status fsync_dir(const std::string& dir) {
  const BlockingScope blocking(/*certain=*/true);
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno_status(errno, "open " + dir);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return errno_status(err, "fsync " + dir);
  return Status();
}

Status make_dir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return errno_status(errno, "mkdir " + dir);
  }
  return Status();
}

// The names of the entries of a directory, without "." and "..".
Result<std::vector<std::string>> list_dir(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return errno_status(errno, "opendir " + dir);
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    const std::string_view n = e->d_name;
    if (n != "." && n != "..") names.emplace_back(n);
  }
  ::closedir(d);
  return names;
}

std::string bucket_prefix(std::string_view bucket) {
  std::string s(bucket);
  s.push_back('\0');
  return s;
}

std::string upload_key(std::string_view bucket, std::string_view upload_id) {
  return bucket_prefix(bucket).append(upload_id);
}

// Part keys sort by part number: upload id followed by the number big-endian.
std::string part_key(std::string_view upload_id, std::uint32_t part_number) {
  std::string k(upload_id);
  for (int i = 3; i >= 0; --i) k.push_back(static_cast<char>(part_number >> (8 * i)));
  return k;
}

std::string_view blob_key(const BlobId& id) {
  return std::string_view(reinterpret_cast<const char*>(id.bytes.data()), id.bytes.size());
}

// The smallest string greater than every string that starts with p; empty if none exists
// (p is all 0xff bytes).
std::string prefix_successor(std::string p) {
  while (!p.empty() && static_cast<unsigned char>(p.back()) == 0xff) p.pop_back();
  if (!p.empty()) p.back() = static_cast<char>(static_cast<unsigned char>(p.back()) + 1);
  return p;
}

Status validate_bucket(std::string_view bucket) {
  if (bucket.empty() || bucket.size() > limits::bucket_name_max ||
      bucket.find('\0') != std::string_view::npos) {
    return Status(Errc::invalid_bucket_name, "The specified bucket is not valid.");
  }
  return Status();
}

Status validate_key(std::string_view key) {
  if (key.empty()) return Status(Errc::invalid_argument, "Object key must not be empty.");
  if (key.size() > limits::key_bytes_max) {
    return Status(Errc::key_too_long, "Your key is too long.");
  }
  return Status();
}

Status no_such_bucket() {
  return Status(Errc::no_such_bucket, "The specified bucket does not exist.");
}
Status no_such_key() {
  return Status(Errc::no_such_key, "The specified key does not exist.");
}
Status no_such_upload() {
  return Status(Errc::no_such_upload, "The specified multipart upload does not exist.");
}

// Checks a write precondition against the current record (nullopt when the key is absent).
Status check_condition(const WriteCondition& cond, const ObjectRecord* current) {
  switch (cond.kind) {
    case WriteCondition::Kind::none:
      return Status();
    case WriteCondition::Kind::must_be_absent:
      if (current != nullptr) {
        return Status(Errc::precondition_failed,
                      "At least one of the pre-conditions you specified did not hold");
      }
      return Status();
    case WriteCondition::Kind::etag_must_match:
      // S3 answers If-Match on an absent key with 404 NoSuchKey, not 412.
      if (current == nullptr) return no_such_key();
      if (current->meta.etag != cond.etag) {
        return Status(Errc::precondition_failed,
                      "At least one of the pre-conditions you specified did not hold");
      }
      return Status();
  }
  return Status(Errc::invalid_argument, "unknown write condition");
}

// The bucket's versioning state, from its config document (docs/versioning.md).
enum class Versioning { off, enabled, suspended };

Versioning versioning_of(const BucketInfo& b) {
  auto it = b.config.find(std::string(versioning_config_name));
  if (it == b.config.end()) return Versioning::off;
  return it->second == versioning_enabled ? Versioning::enabled : Versioning::suspended;
}

// The blobs of `removed` that no entry of `kept` still references (versions made by CopyObject
// onto itself share their segments).
void collect_unreferenced(const std::vector<Segment>& removed,
                          const std::vector<VersionEntry>& kept, std::vector<BlobId>& doomed) {
  for (const Segment& s : removed) {
    bool used = false;
    for (const VersionEntry& v : kept) {
      for (const Segment& k : v.rec.segments) used = used || k.blob == s.blob;
    }
    if (!used) doomed.push_back(s.blob);
  }
}

}  // namespace

// --- blob files and reader pins -----------------------------------------------------------------

// The blob directory tree plus the registry of blobs that open readers still use. A blob
// replaced or deleted by a commit is unlinked at once unless a reader pinned it; then it is
// unlinked when the last such reader closes. Its `gc` entry in LMDB (which makes the deletion
// survive a crash) is dropped by the next write transaction (take_unlinked()).
//
// Thread safety: all members are safe to call concurrently.
class BlobFiles {
 public:
  BlobFiles(std::string root, bool fsync) : root_(std::move(root)), fsync_(fsync) {}

  const std::string& root() const { return root_; }
  bool fsync() const { return fsync_; }
  std::string blob_dir(const BlobId& id) const { return root_ + "/blobs/" + id.hex().substr(0, 2); }
  std::string blob_path(const BlobId& id) const {
    const std::string hex = id.hex();
    return root_ + "/blobs/" + hex.substr(0, 2) + "/" + hex;
  }
  std::string tmp_path(const BlobId& id) const { return root_ + "/tmp/" + id.hex(); }

  // Readers pin their blobs while holding this mutex around the metadata read, so a commit's
  // release() (which takes it after the commit) either sees the pin or the reader sees the
  // new metadata.
  std::mutex& pin_mutex() { return mu_; }
  void pin_locked(const std::vector<Segment>& segs) {
    for (const Segment& s : segs) ++pins_[s.blob];
  }
  void unpin(const std::vector<Segment>& segs) {
    std::vector<BlobId> doomed;
    {
      std::lock_guard lock(mu_);
      for (const Segment& s : segs) {
        auto it = pins_.find(s.blob);
        if (it == pins_.end()) continue;
        if (--it->second == 0) {
          pins_.erase(it);
          if (deferred_.erase(s.blob) != 0) doomed.push_back(s.blob);
        }
      }
    }
    unlink_all(doomed);
  }

  // Deletes blobs that committed metadata no longer references (their gc entries are durable).
  void release(const std::vector<BlobId>& ids) {
    std::vector<BlobId> now;
    {
      std::lock_guard lock(mu_);
      for (const BlobId& id : ids) {
        if (pins_.contains(id)) {
          deferred_.insert(id);
        } else {
          now.push_back(id);
        }
      }
    }
    unlink_all(now);
  }

  // Blobs whose files are gone and whose gc entries a write transaction should drop.
  std::vector<BlobId> take_unlinked() {
    std::lock_guard lock(mu_);
    return std::exchange(unlinked_, {});
  }
  void return_unlinked(const std::vector<BlobId>& ids) {
    std::lock_guard lock(mu_);
    unlinked_.insert(unlinked_.end(), ids.begin(), ids.end());
  }

  // Removes a blob that no metadata ever referenced (a commit that failed after the rename).
  void discard(const BlobId& id) { ::unlink(blob_path(id).c_str()); }

 private:
  void unlink_all(const std::vector<BlobId>& ids) {
    if (ids.empty()) return;
    // A failed unlink leaves the gc entry for startup recovery; only ENOENT means "gone".
    std::vector<BlobId> gone;
    for (const BlobId& id : ids) {
      if (::unlink(blob_path(id).c_str()) == 0 || errno == ENOENT) gone.push_back(id);
    }
    return_unlinked(gone);
  }

  const std::string root_;
  const bool fsync_;
  std::mutex mu_;
  std::unordered_map<BlobId, int, BlobIdHash> pins_;
  std::unordered_set<BlobId, BlobIdHash> deferred_;
  std::vector<BlobId> unlinked_;
};

// --- writer -------------------------------------------------------------------------------------

class LocalBlobWriter final : public BlobWriter {
 public:
  explicit LocalBlobWriter(std::shared_ptr<BlobFiles> files)
      : files_(std::move(files)), id_(BlobId::random()) {}
  ~LocalBlobWriter() override {
    if (fd_ >= 0) ::close(fd_);
    if (created_ && !renamed_) ::unlink(files_->tmp_path(id_).c_str());
  }

  Status append(std::span<const std::byte> data) override {
    if (failed_ || renamed_) {
      return Status(Errc::io_error, "blob writer is unusable after an earlier error");
    }
    if (data.empty()) return Status();
    if (fd_ < 0) {
      fd_ = ::open(files_->tmp_path(id_).c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
      if (fd_ < 0) return fail(errno, "create temporary blob");
      created_ = true;
    }
    const auto* p = reinterpret_cast<const char*>(data.data());
    std::size_t left = data.size();
    const BlockingScope blocking;  // dirty-page throttling can stall a write
    while (left > 0) {
      const ssize_t n = ::write(fd_, p, left);
      if (n < 0) {
        if (errno == EINTR) continue;
        return fail(errno, "write blob");
      }
      p += n;
      left -= static_cast<std::size_t>(n);
      size_ += static_cast<std::uint64_t>(n);
    }
    return Status();
  }

  std::uint64_t size() const override { return size_; }

  const BlobFiles* files() const { return files_.get(); }

  // Makes the data durable under blobs/: fsync the file, rename it out of tmp/, fsync the blob
  // directory. Returns the segment, or nullopt for an empty blob (which has no file).
  Result<std::optional<Segment>> finalize() {
    if (failed_ || renamed_) return Status(Errc::io_error, "blob writer is unusable");
    if (size_ == 0) return std::optional<Segment>();
    const BlockingScope blocking(/*certain=*/files_->fsync());
    if (files_->fsync() && ::fsync(fd_) != 0) return fail(errno, "fsync blob");
    ::close(fd_);
    fd_ = -1;
    const std::string tmp = files_->tmp_path(id_);
    const std::string dst = files_->blob_path(id_);
    if (::rename(tmp.c_str(), dst.c_str()) != 0) {
      // The fan-out directory blobs/xx is created on first use; its entry in blobs/ must be
      // durable before the blob's entry in it is.
      if (errno != ENOENT) return fail(errno, "rename blob");
      if (Status st = make_dir(files_->blob_dir(id_)); !st.ok()) return fail_with(st);
      if (files_->fsync()) {
        if (Status st = fsync_dir(files_->root() + "/blobs"); !st.ok()) return fail_with(st);
      }
      if (::rename(tmp.c_str(), dst.c_str()) != 0) return fail(errno, "rename blob");
    }
    renamed_ = true;
    if (files_->fsync()) {
      Status st = fsync_dir(files_->blob_dir(id_));
      if (!st.ok()) {
        files_->discard(id_);
        return st;
      }
    }
    return std::optional<Segment>(Segment{id_, size_});
  }

 private:
  Status fail(int err, std::string_view what) {
    failed_ = true;
    return errno_status(err, what);
  }
  Status fail_with(Status st) {
    failed_ = true;
    return st;
  }

  std::shared_ptr<BlobFiles> files_;
  BlobId id_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
  bool created_ = false;
  bool renamed_ = false;
  bool failed_ = false;
};

// --- reader -------------------------------------------------------------------------------------

class LocalObjectReader final : public ObjectReader {
 public:
  // Takes over pins already taken on rec's segments.
  LocalObjectReader(std::shared_ptr<BlobFiles> files, ObjectRecord rec)
      : files_(std::move(files)), rec_(std::move(rec)), fds_(rec_.segments.size(), -1) {
    starts_.reserve(rec_.segments.size());
    std::uint64_t at = 0;
    for (const Segment& s : rec_.segments) {
      starts_.push_back(at);
      at += s.size;
    }
  }
  ~LocalObjectReader() override {
    for (int fd : fds_) {
      if (fd >= 0) ::close(fd);
    }
    files_->unpin(rec_.segments);
  }

  const ObjectMeta& meta() const override { return rec_.meta; }

  // Opens segment i's file if not yet open. Files are opened lazily so a 10,000-part object
  // costs one fd per segment actually read.
  Result<int> fd(std::size_t i) {
    if (fds_[i] < 0) {
      const std::string path = files_->blob_path(rec_.segments[i].blob);
      const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        const int err = errno;
        if (err == ENOENT) return Status(Errc::corrupt, "blob file missing: " + path);
        return errno_status(err, "open " + path);
      }
      fds_[i] = fd;
    }
    return fds_[i];
  }

  Result<std::size_t> pread(std::span<std::byte> dst, std::uint64_t offset) override {
    const std::uint64_t size = rec_.meta.size;
    if (offset >= size || dst.empty()) return std::size_t{0};
    const BlockingScope blocking;  // a page-cache miss waits for the disk
    std::size_t done = 0;
    std::size_t i = segment_at(offset);
    while (done < dst.size() && offset < size) {
      const Segment& s = rec_.segments[i];
      const std::uint64_t in_seg = offset - starts_[i];
      if (in_seg >= s.size) {
        ++i;
        continue;
      }
      auto f = fd(i);
      if (!f.ok()) return f.status();
      const std::size_t want =
          static_cast<std::size_t>(std::min<std::uint64_t>(dst.size() - done, s.size - in_seg));
      const ssize_t n = ::pread(*f, dst.data() + done, want, static_cast<off_t>(in_seg));
      if (n < 0) {
        if (errno == EINTR) continue;
        return errno_status(errno, "pread blob");
      }
      if (n == 0) return Status(Errc::corrupt, "blob file shorter than its metadata");
      done += static_cast<std::size_t>(n);
      offset += static_cast<std::uint64_t>(n);
    }
    return done;
  }

  Result<std::vector<Extent>> extents(std::uint64_t offset, std::uint64_t length) override {
    const std::uint64_t size = rec_.meta.size;
    if (offset > size || length > size - offset) {
      return Status(Errc::invalid_range, "The requested range is not satisfiable");
    }
    std::vector<Extent> out;
    if (length == 0) return out;
    std::size_t i = segment_at(offset);
    while (length > 0) {
      const Segment& s = rec_.segments[i];
      const std::uint64_t in_seg = offset - starts_[i];
      if (in_seg < s.size) {
        auto f = fd(i);
        if (!f.ok()) return f.status();
        const std::uint64_t n = std::min(length, s.size - in_seg);
        out.push_back(Extent{*f, in_seg, n});
        offset += n;
        length -= n;
      }
      ++i;
    }
    return out;
  }

 private:
  // The index of the segment holding byte `offset` (< size).
  std::size_t segment_at(std::uint64_t offset) const {
    auto it = std::upper_bound(starts_.begin(), starts_.end(), offset);
    return static_cast<std::size_t>(it - starts_.begin()) - 1;
  }

  std::shared_ptr<BlobFiles> files_;
  ObjectRecord rec_;
  std::vector<std::uint64_t> starts_;
  std::vector<int> fds_;
};

// --- store --------------------------------------------------------------------------------------

class LocalStore final : public ObjectStore {
 public:
  static Result<std::unique_ptr<ObjectStore>> open(const LocalStoreOptions& options);
  ~LocalStore() override {
    db_.reset();
    if (lock_fd_ >= 0) ::close(lock_fd_);
  }

  Status create_bucket(const BucketInfo& info) override;
  Status delete_bucket(std::string_view bucket) override;
  Result<BucketInfo> head_bucket(std::string_view bucket) override;
  Result<std::vector<BucketInfo>> list_buckets() override;

  Result<std::unique_ptr<BlobWriter>> begin_write(std::string_view bucket) override;
  Result<ObjectMeta> commit_object(std::string_view bucket, ObjectMeta meta,
                                   std::unique_ptr<BlobWriter> data,
                                   const WriteCondition& cond) override;
  Result<ObjectMeta> set_object_tags(std::string_view bucket, std::string_view key,
                                     TagSet tags) override;
  Result<ObjectMeta> set_object_version_tags(std::string_view bucket, std::string_view key,
                                             std::string_view version_id, TagSet tags) override;
  Status set_bucket_tags(std::string_view bucket, TagSet tags) override;
  Status set_bucket_config(std::string_view bucket, std::string_view name,
                           std::string document) override;
  // Reads the bucket record, applies `change` and writes it back in one transaction.
  Status update_bucket(std::string_view bucket, const std::function<void(BucketInfo&)>& change);
  Result<ObjectMeta> replace_meta(std::string_view bucket, ObjectMeta meta,
                                  std::string_view expected_etag) override;
  Result<ObjectMeta> head_object(std::string_view bucket, std::string_view key) override;
  Result<std::unique_ptr<ObjectReader>> open_object(std::string_view bucket,
                                                    std::string_view key) override;
  Status delete_object(std::string_view bucket, std::string_view key) override;
  Result<ListResult> list_objects(std::string_view bucket, const ListQuery& q) override;

  Result<std::string> create_upload(std::string_view bucket, const UploadInfo& info) override;
  Result<UploadInfo> get_upload(std::string_view bucket, std::string_view key,
                                std::string_view upload_id) override;
  Result<PartInfo> commit_part(std::string_view bucket, std::string_view key,
                               std::string_view upload_id, PartInfo info,
                               std::unique_ptr<BlobWriter> data) override;
  Result<std::vector<PartInfo>> list_parts(std::string_view bucket, std::string_view key,
                                           std::string_view upload_id,
                                           std::uint32_t part_number_marker,
                                           std::uint32_t max_parts) override;
  Result<ObjectMeta> complete_upload(std::string_view bucket, std::string_view upload_id,
                                     ObjectMeta meta, const std::vector<CompletePartRef>& parts,
                                     const WriteCondition& cond) override;
  Status abort_upload(std::string_view bucket, std::string_view key,
                      std::string_view upload_id) override;
  Result<ListUploadsResult> list_uploads(std::string_view bucket,
                                         const ListUploadsQuery& q) override;

  bool supports_versioning() const override { return true; }
  bool stores_sse_c() const override { return true; }
  Result<ObjectMeta> head_object_version(std::string_view bucket, std::string_view key,
                                         std::string_view version_id) override;
  Result<std::unique_ptr<ObjectReader>> open_object_version(std::string_view bucket,
                                                            std::string_view key,
                                                            std::string_view version_id) override;
  Result<DeleteOutcome> delete_object_version(std::string_view bucket, std::string_view key,
                                              std::string_view version_id) override;
  Result<ListVersionsResult> list_object_versions(std::string_view bucket,
                                                  const ListVersionsQuery& q) override;

 private:
  // A write transaction that also drops the gc entries of blobs already unlinked. If it is not
  // committed, those ids go back to the queue for the next one.
  class WriteTxn {
   public:
    WriteTxn(Txn txn, std::shared_ptr<BlobFiles> files, std::vector<BlobId> dropped)
        : txn(std::move(txn)), files_(std::move(files)), dropped_(std::move(dropped)) {}
    WriteTxn(WriteTxn&&) = default;
    ~WriteTxn() {
      if (!committed_ && files_) files_->return_unlinked(dropped_);
    }
    Status commit() {
      Status st = txn.commit();
      committed_ = st.ok();
      return st;
    }
    Txn txn;

   private:
    std::shared_ptr<BlobFiles> files_;
    std::vector<BlobId> dropped_;
    bool committed_ = false;
  };

  LocalStore(LocalStoreOptions options, int lock_fd, std::unique_ptr<MetaDb> db,
             std::shared_ptr<BlobFiles> files)
      : options_(std::move(options)),
        lock_fd_(lock_fd),
        db_(std::move(db)),
        files_(std::move(files)) {}

  Result<WriteTxn> begin_write_txn();
  // Group commit: runs `apply` in a child transaction of a write transaction shared with other
  // concurrent callers, committed (and synced) once for the whole group. A failing `apply` rolls
  // back only its own child. Returns apply's status, or the group commit's failure.
  Status group_commit(const std::function<Status(Txn&)>& apply);
  Status recover();
  Status require_bucket(const Txn& txn, std::string_view bucket) const;
  // The latest version of key unless it is a delete marker; nullopt when there is none.
  Result<std::optional<ObjectRecord>> get_object(const Txn& txn, std::string_view bucket,
                                                 std::string_view key) const;
  // The bucket's versioning state; no_such_bucket.
  Result<Versioning> bucket_versioning(const Txn& txn, std::string_view bucket) const;
  // All versions of key, newest first (a never-versioned object is one "null" version); empty
  // when the key is absent. *plain tells whether the stored record is a plain object record.
  Result<std::vector<VersionEntry>> get_versions(const Txn& txn, std::string_view bucket,
                                                 std::string_view key, bool* plain) const;
  // Writes rec as the newest version of rec.meta.key as the bucket's versioning state says, if
  // `cond` holds against the latest version; appends to doomed the blobs no version references
  // any more. Fills rec.meta.mtime_ns and rec.meta.version_id.
  Status put_version(Txn& txn, std::string_view bucket, ObjectRecord& rec,
                     const WriteCondition& cond, std::vector<BlobId>& doomed);
  // Opens a version ("" = latest; then a delete marker is no_such_key, else method_not_allowed).
  Result<std::unique_ptr<ObjectReader>> open_impl(std::string_view bucket, std::string_view key,
                                                  std::string_view version_id);
  Result<UploadInfo> get_upload_in(const Txn& txn, std::string_view bucket, std::string_view key,
                                   std::string_view upload_id) const;
  // Removes the upload and its parts inside txn; appends the parts' blobs to doomed (except
  // those in keep).
  Status drop_upload(WriteTxn& w, std::string_view bucket, std::string_view upload_id,
                     const std::unordered_set<BlobId, BlobIdHash>& keep,
                     std::vector<BlobId>& doomed);
  Status mark_gc(WriteTxn& w, const std::vector<BlobId>& ids);
  Result<LocalBlobWriter*> own_writer(BlobWriter* w) const;

  struct GroupOp {
    const std::function<Status(Txn&)>* apply;
    Status status;
    bool done = false;
  };
  void run_group(const std::vector<GroupOp*>& ops);

  std::mutex group_mu_;
  std::condition_variable group_cv_;
  std::vector<GroupOp*> group_queue_;
  bool group_leader_active_ = false;

  LocalStoreOptions options_;
  int lock_fd_ = -1;
  std::unique_ptr<MetaDb> db_;
  std::shared_ptr<BlobFiles> files_;
};

Result<std::unique_ptr<ObjectStore>> LocalStore::open(const LocalStoreOptions& options) {
  if (options.data_dir.empty()) return Status(Errc::invalid_argument, "data_dir is empty");
  const std::string& root = options.data_dir;
  {
    std::error_code ec;
    std::filesystem::create_directories(root, ec);
    if (ec) return errno_status(ec.value(), "create " + root);
  }
  const std::string lock_path = root + "/LOCK";
  const int lock_fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd < 0) return errno_status(errno, "open " + lock_path);
  if (::flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(lock_fd);
    if (err == EWOULDBLOCK) {
      return Status(Errc::unavailable, "data directory is in use by another process: " + root);
    }
    return errno_status(err, "flock " + lock_path);
  }
  auto fail = [&](Status st) -> Result<std::unique_ptr<ObjectStore>> {
    ::close(lock_fd);
    return st;
  };
  for (const std::string& d : {root + "/blobs", root + "/tmp"}) {
    if (Status st = make_dir(d); !st.ok()) return fail(st);
  }
  auto db = MetaDb::open({root + "/meta", options.lmdb_map_size_bytes, options.fsync});
  if (!db.ok()) return fail(db.status());
  if (options.fsync) {
    // Make the directory skeleton itself durable (a no-op cost after the first start).
    if (Status st = fsync_dir(root); !st.ok()) return fail(st);
  }
  auto files = std::make_shared<BlobFiles>(root, options.fsync);
  std::unique_ptr<LocalStore> store(
      new LocalStore(options, lock_fd, std::move(*db), std::move(files)));
  OBJDIRECT_RETURN_IF_ERROR(store->recover());  // the store owns lock_fd now
  return std::unique_ptr<ObjectStore>(std::move(store));
}

// Startup recovery (no reader or writer exists yet):
//  1. tmp/ holds only data of writes that never committed: delete it all.
//  2. Blobs named in `gc` were replaced or deleted by committed transactions: delete them.
//  3. Blobs no object or part references were renamed into blobs/ by a commit that crashed
//     before its LMDB transaction: delete them.
//  4. Drop all gc entries in one transaction.
Status LocalStore::recover() {
  const std::string tmp = options_.data_dir + "/tmp";
  auto tmp_names = list_dir(tmp);
  if (!tmp_names.ok()) return tmp_names.status();
  for (const std::string& n : *tmp_names) ::unlink((tmp + "/" + n).c_str());

  std::unordered_set<BlobId, BlobIdHash> live;
  std::vector<BlobId> gc_ids;
  {
    auto txn = Txn::begin(*db_, false);
    if (!txn.ok()) return txn.status();
    for (MDB_dbi dbi : {db_->objects, db_->object_groups}) {
      auto c = Cursor::open(*txn, dbi);
      if (!c.ok()) return c.status();
      std::string_view k, v;
      for (auto r = c->seek("", "", &k, &v);; r = c->next("", &k, &v)) {
        if (!r.ok()) return r.status();
        if (!*r) break;
        if (v.empty()) continue;  // group marker
        if (record_kind(v) == RecordKind::versions) {
          auto vs = decode_versions(v);
          if (!vs.ok()) return vs.status();
          for (const VersionEntry& e : *vs) {
            for (const Segment& s : e.rec.segments) live.insert(s.blob);
          }
          continue;
        }
        auto rec = decode_object(v);
        if (!rec.ok()) return rec.status();
        for (const Segment& s : rec->segments) live.insert(s.blob);
      }
    }
    auto c = Cursor::open(*txn, db_->parts);
    if (!c.ok()) return c.status();
    std::string_view k, v;
    for (auto r = c->seek("", "", &k, &v);; r = c->next("", &k, &v)) {
      if (!r.ok()) return r.status();
      if (!*r) break;
      auto part = decode_part(v);
      if (!part.ok()) return part.status();
      if (part->info.size > 0) live.insert(part->blob);
    }
    auto g = Cursor::open(*txn, db_->gc);
    if (!g.ok()) return g.status();
    for (auto r = g->seek("", "", &k, &v);; r = g->next("", &k, &v)) {
      if (!r.ok()) return r.status();
      if (!*r) break;
      BlobId id;
      if (k.size() == id.bytes.size()) {
        std::memcpy(id.bytes.data(), k.data(), k.size());
        gc_ids.push_back(id);
      }
    }
  }
  auto fanout = list_dir(options_.data_dir + "/blobs");
  if (!fanout.ok()) return fanout.status();
  for (const std::string& sub : *fanout) {
    const std::string d = options_.data_dir + "/blobs/" + sub;
    struct stat st;
    if (::lstat(d.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
      ::unlink(d.c_str());  // a stray file where only fan-out directories belong
      continue;
    }
    auto names = list_dir(d);
    if (!names.ok()) return names.status();
    for (const std::string& n : *names) {
      auto id = BlobId::from_hex(n);
      if (id.ok() && live.contains(*id)) continue;
      // Unreferenced blob (or a stray file): nothing can reach it.
      if (::unlink((d + "/" + n).c_str()) != 0 && errno != ENOENT) {
        return errno_status(errno, "unlink orphan blob " + n);
      }
    }
  }
  if (!gc_ids.empty()) {
    auto txn = Txn::begin(*db_, true);
    if (!txn.ok()) return txn.status();
    for (const BlobId& id : gc_ids) {
      auto d = txn->del(db_->gc, blob_key(id));
      if (!d.ok()) return d.status();
    }
    OBJDIRECT_RETURN_IF_ERROR(txn->commit());
  }
  return Status();
}

Result<LocalStore::WriteTxn> LocalStore::begin_write_txn() {
  auto txn = Txn::begin(*db_, true);
  if (!txn.ok()) return txn.status();
  WriteTxn w(std::move(*txn), files_, files_->take_unlinked());
  return w;
}

// One caller at a time becomes the leader: it takes every queued operation, applies each in its
// own child transaction and commits the parent once, so N concurrent commits cost one LMDB sync
// instead of N. Others wait; when the leader finishes, a waiter whose operation is still queued
// becomes the next leader.
Status LocalStore::group_commit(const std::function<Status(Txn&)>& apply) {
  GroupOp op{&apply, Status(), false};
  std::unique_lock lock(group_mu_);
  group_queue_.push_back(&op);
  while (!op.done) {
    if (group_leader_active_) {
      group_cv_.wait(lock);
      continue;
    }
    group_leader_active_ = true;
    std::vector<GroupOp*> batch = std::exchange(group_queue_, {});
    lock.unlock();
    run_group(batch);
    lock.lock();
    for (GroupOp* o : batch) o->done = true;
    group_leader_active_ = false;
    group_cv_.notify_all();
  }
  return op.status;
}

void LocalStore::run_group(const std::vector<GroupOp*>& ops) {
  auto w = begin_write_txn();
  if (!w.ok()) {
    for (GroupOp* o : ops) o->status = w.status();
    return;
  }
  for (GroupOp* o : ops) {
    auto child = Txn::begin_nested(*db_, w->txn);
    if (!child.ok()) {
      o->status = child.status();
      continue;
    }
    o->status = (*o->apply)(*child);
    if (o->status.ok()) o->status = child->commit();
  }
  const Status committed = w->commit();
  if (!committed.ok()) {
    for (GroupOp* o : ops) {
      if (o->status.ok()) o->status = committed;
    }
  }
}

Status LocalStore::mark_gc(WriteTxn& w, const std::vector<BlobId>& ids) {
  for (const BlobId& id : ids) OBJDIRECT_RETURN_IF_ERROR(w.txn.put(db_->gc, blob_key(id), ""));
  return Status();
}

Status LocalStore::require_bucket(const Txn& txn, std::string_view bucket) const {
  auto b = txn.get(db_->buckets, bucket);
  if (!b.ok()) return b.status();
  if (!b->has_value()) return no_such_bucket();
  return Status();
}

Result<std::optional<ObjectRecord>> LocalStore::get_object(const Txn& txn, std::string_view bucket,
                                                           std::string_view key) const {
  auto v = key_tree::get(txn, *db_, bucket, key);
  if (!v.ok()) return v.status();
  if (!v->has_value()) return std::optional<ObjectRecord>();
  if (record_kind(**v) == RecordKind::versions) {
    auto vs = decode_versions(**v);
    if (!vs.ok()) return vs.status();
    if (vs->front().delete_marker) return std::optional<ObjectRecord>();
    return std::optional<ObjectRecord>(std::move(vs->front().rec));
  }
  auto rec = decode_object(**v);
  if (!rec.ok()) return rec.status();
  return std::optional<ObjectRecord>(std::move(*rec));
}

Result<Versioning> LocalStore::bucket_versioning(const Txn& txn, std::string_view bucket) const {
  auto b = txn.get(db_->buckets, bucket);
  if (!b.ok()) return b.status();
  if (!b->has_value()) return no_such_bucket();
  auto info = decode_bucket(**b);
  if (!info.ok()) return info.status();
  return versioning_of(*info);
}

Result<std::vector<VersionEntry>> LocalStore::get_versions(const Txn& txn, std::string_view bucket,
                                                           std::string_view key,
                                                           bool* plain) const {
  *plain = false;
  auto v = key_tree::get(txn, *db_, bucket, key);
  if (!v.ok()) return v.status();
  if (!v->has_value()) return std::vector<VersionEntry>();
  if (record_kind(**v) == RecordKind::versions) return decode_versions(**v);
  auto rec = decode_object(**v);
  if (!rec.ok()) return rec.status();
  *plain = true;
  std::vector<VersionEntry> out(1);
  out[0].version_id = "null";
  out[0].rec = std::move(*rec);
  return out;
}

Status LocalStore::put_version(Txn& txn, std::string_view bucket, ObjectRecord& rec,
                               const WriteCondition& cond, std::vector<BlobId>& doomed) {
  auto state = bucket_versioning(txn, bucket);
  if (!state.ok()) return state.status();
  const std::string& key = rec.meta.key;
  bool plain = false;
  auto stack = get_versions(txn, bucket, key, &plain);
  if (!stack.ok()) return stack.status();
  const ObjectRecord* latest =
      stack->empty() || stack->front().delete_marker ? nullptr : &stack->front().rec;
  OBJDIRECT_RETURN_IF_ERROR(check_condition(cond, latest));
  rec.meta.mtime_ns = now_ns();
  rec.meta.delete_marker = false;
  if (*state == Versioning::off && (stack->empty() || plain)) {
    // Never versioned: the object is replaced, as before versioning existed.
    rec.meta.version_id.clear();
    std::vector<VersionEntry> kept(1);
    kept[0].rec.segments = rec.segments;
    if (!stack->empty()) collect_unreferenced(stack->front().rec.segments, kept, doomed);
    OBJDIRECT_RETURN_IF_ERROR(key_tree::put(txn, *db_, bucket, key, encode_object(rec)));
  } else {
    // Enabled: a new version. Suspended: the new version is the null one, replacing any.
    const bool enabled = *state == Versioning::enabled;
    std::vector<Segment> removed;
    if (!enabled) {
      auto it = std::find_if(stack->begin(), stack->end(),
                             [](const VersionEntry& v) { return v.version_id == "null"; });
      if (it != stack->end()) {
        removed = it->rec.segments;
        stack->erase(it);
      }
    }
    if (stack->size() >= options_.versions_per_key_max) {
      return Status(Errc::slow_down, "This key has too many versions (at most " +
                                         std::to_string(options_.versions_per_key_max) +
                                         "); delete some first");
    }
    rec.meta.version_id = enabled ? BlobId::random().hex() : "null";
    VersionEntry entry;
    entry.version_id = rec.meta.version_id;
    entry.rec = rec;
    stack->insert(stack->begin(), std::move(entry));
    collect_unreferenced(removed, *stack, doomed);
    OBJDIRECT_RETURN_IF_ERROR(key_tree::put(txn, *db_, bucket, key, encode_versions(*stack)));
  }
  for (const BlobId& id : doomed) OBJDIRECT_RETURN_IF_ERROR(txn.put(db_->gc, blob_key(id), ""));
  return Status();
}

Result<LocalBlobWriter*> LocalStore::own_writer(BlobWriter* w) const {
  // Callers commit the writer this store's begin_write gave them (CachingStore passes its inner
  // store's writer back to that store): anything else is a programmer error.
  auto* lw = dynamic_cast<LocalBlobWriter*>(w);
  OBJDIRECT_ASSERT(lw != nullptr && lw->files() == files_.get(),
                   "a blob writer is committed to the store that began it");
  return lw;
}

// --- buckets ---

Status LocalStore::create_bucket(const BucketInfo& info) {
  OBJDIRECT_RETURN_IF_ERROR(validate_bucket(info.name));
  auto w = begin_write_txn();
  if (!w.ok()) return w.status();
  auto cur = w->txn.get(db_->buckets, info.name);
  if (!cur.ok()) return cur.status();
  if (cur->has_value()) {
    auto existing = decode_bucket(**cur);
    if (!existing.ok()) return existing.status();
    if (existing->owner == info.owner) {
      return Status(Errc::bucket_already_owned_by_you,
                    "Your previous request to create the named bucket succeeded and you "
                    "already own it.");
    }
    return Status(Errc::bucket_already_exists, "The requested bucket name is not available.");
  }
  BucketInfo stored = info;
  if (stored.ctime_ns == 0) stored.ctime_ns = now_ns();
  OBJDIRECT_RETURN_IF_ERROR(w->txn.put(db_->buckets, info.name, encode_bucket(stored)));
  return w->commit();
}

Status LocalStore::delete_bucket(std::string_view bucket) {
  auto w = begin_write_txn();
  if (!w.ok()) return w.status();
  OBJDIRECT_RETURN_IF_ERROR(require_bucket(w->txn, bucket));
  auto empty = key_tree::empty(w->txn, *db_, bucket);
  if (!empty.ok()) return empty.status();
  if (!*empty) {
    return Status(Errc::bucket_not_empty, "The bucket you tried to delete is not empty.");
  }
  // Abort leftover multipart uploads.
  std::vector<std::string> ids;
  {
    auto c = Cursor::open(w->txn, db_->uploads);
    if (!c.ok()) return c.status();
    const std::string prefix = bucket_prefix(bucket);
    std::string_view k;
    for (auto r = c->seek(prefix, prefix, &k, nullptr);; r = c->next(prefix, &k, nullptr)) {
      if (!r.ok()) return r.status();
      if (!*r) break;
      ids.emplace_back(k.substr(prefix.size()));
    }
  }
  std::vector<BlobId> doomed;
  for (const std::string& id : ids) {
    OBJDIRECT_RETURN_IF_ERROR(drop_upload(*w, bucket, id, {}, doomed));
  }
  OBJDIRECT_RETURN_IF_ERROR(mark_gc(*w, doomed));
  auto d = w->txn.del(db_->buckets, bucket);
  if (!d.ok()) return d.status();
  OBJDIRECT_RETURN_IF_ERROR(w->commit());
  files_->release(doomed);
  return Status();
}

Result<BucketInfo> LocalStore::head_bucket(std::string_view bucket) {
  auto txn = Txn::begin(*db_, false);
  if (!txn.ok()) return txn.status();
  auto b = txn->get(db_->buckets, bucket);
  if (!b.ok()) return b.status();
  if (!b->has_value()) return no_such_bucket();
  return decode_bucket(**b);
}

Result<std::vector<BucketInfo>> LocalStore::list_buckets() {
  auto txn = Txn::begin(*db_, false);
  if (!txn.ok()) return txn.status();
  auto c = Cursor::open(*txn, db_->buckets);
  if (!c.ok()) return c.status();
  std::vector<BucketInfo> out;
  std::string_view v;
  for (auto r = c->seek("", "", nullptr, &v);; r = c->next("", nullptr, &v)) {
    if (!r.ok()) return r.status();
    if (!*r) break;
    auto b = decode_bucket(v);
    if (!b.ok()) return b.status();
    out.push_back(std::move(*b));
  }
  return out;
}

// --- objects ---

Result<std::unique_ptr<BlobWriter>> LocalStore::begin_write(std::string_view bucket) {
  {
    auto txn = Txn::begin(*db_, false);
    if (!txn.ok()) return txn.status();
    OBJDIRECT_RETURN_IF_ERROR(require_bucket(*txn, bucket));
  }
  return std::unique_ptr<BlobWriter>(std::make_unique<LocalBlobWriter>(files_));
}

Result<ObjectMeta> LocalStore::commit_object(std::string_view bucket, ObjectMeta meta,
                                             std::unique_ptr<BlobWriter> data,
                                             const WriteCondition& cond) {
  OBJDIRECT_RETURN_IF_ERROR(validate_key(meta.key));
  auto writer = own_writer(data.get());
  if (!writer.ok()) return writer.status();
  if (meta.size != (*writer)->size()) {
    return Status(Errc::invalid_argument, "object size does not match the bytes written");
  }
  auto seg = (*writer)->finalize();
  if (!seg.ok()) return seg.status();
  ObjectRecord rec;
  if (seg->has_value()) rec.segments.push_back(**seg);
  // From here the blob sits in blobs/; unless the transaction commits, remove it again.
  auto discard_new = [&] {
    for (const Segment& s : rec.segments) files_->discard(s.blob);
  };

  std::vector<BlobId> doomed;
  const std::function<Status(Txn&)> apply = [&](Txn& txn) -> Status {
    doomed.clear();  // a retried group starts afresh
    rec.meta = meta;
    return put_version(txn, bucket, rec, cond, doomed);
  };
  Status st = group_commit(apply);
  if (!st.ok()) {
    discard_new();
    return st;
  }
  files_->release(doomed);
  return std::move(rec.meta);
}

Result<ObjectMeta> LocalStore::replace_meta(std::string_view bucket, ObjectMeta meta,
                                            std::string_view expected_etag) {
  OBJDIRECT_RETURN_IF_ERROR(validate_key(meta.key));
  auto w = begin_write_txn();
  if (!w.ok()) return w.status();
  OBJDIRECT_RETURN_IF_ERROR(require_bucket(w->txn, bucket));
  auto cur = get_object(w->txn, bucket, meta.key);
  if (!cur.ok()) return cur.status();
  if (!cur->has_value()) return no_such_key();
  ObjectRecord rec = std::move(**cur);
  if (rec.meta.etag != expected_etag) {
    return Status(Errc::precondition_failed,
                  "At least one of the pre-conditions you specified did not hold");
  }
  // The bytes do not change: size and segments stay; parts and ETag stay unless given.
  meta.size = rec.meta.size;
  if (meta.parts.empty()) meta.parts = std::move(rec.meta.parts);
  if (meta.etag.empty()) meta.etag = rec.meta.etag;
  // In a versioned bucket this is a new version sharing the bytes of the one it copies.
  rec.meta = std::move(meta);
  std::vector<BlobId> doomed;
  OBJDIRECT_RETURN_IF_ERROR(put_version(w->txn, bucket, rec, WriteCondition{}, doomed));
  OBJDIRECT_RETURN_IF_ERROR(w->commit());
  files_->release(doomed);
  return std::move(rec.meta);
}

Result<ObjectMeta> LocalStore::set_object_tags(std::string_view bucket, std::string_view key,
                                               TagSet tags) {
  return set_object_version_tags(bucket, key, "", std::move(tags));
}

// One version's tags ("" = the latest); the version stays what it is otherwise.
Result<ObjectMeta> LocalStore::set_object_version_tags(std::string_view bucket,
                                                       std::string_view key,
                                                       std::string_view version_id, TagSet tags) {
  OBJDIRECT_RETURN_IF_ERROR(validate_key(key));
  if (!version_id.empty() && !valid_version_id(version_id)) return invalid_version_id();
  auto w = begin_write_txn();
  if (!w.ok()) return w.status();
  auto state = bucket_versioning(w->txn, bucket);
  if (!state.ok()) return state.status();
  bool plain = false;
  auto stack = get_versions(w->txn, bucket, key, &plain);
  if (!stack.ok()) return stack.status();
  auto it = std::find_if(stack->begin(), stack->end(), [&](const VersionEntry& v) {
    return version_id.empty() || v.version_id == version_id;
  });
  if (it == stack->end()) return version_id.empty() ? no_such_key() : no_such_version();
  // A delete marker has no tags to set.
  if (it->delete_marker) return version_id.empty() ? no_such_key() : delete_marker_not_allowed();
  ObjectRecord& rec = it->rec;
  rec.meta.tags = std::move(tags);
  OBJDIRECT_RETURN_IF_ERROR(key_tree::put(w->txn, *db_, bucket, key,
                                          plain ? encode_object(rec) : encode_versions(*stack)));
  OBJDIRECT_RETURN_IF_ERROR(w->commit());
  // A never-versioned object is the null version once the bucket is versioned.
  if (plain) rec.meta.version_id = *state == Versioning::off ? "" : "null";
  return std::move(rec.meta);
}

Status LocalStore::update_bucket(std::string_view bucket,
                                 const std::function<void(BucketInfo&)>& change) {
  auto w = begin_write_txn();
  if (!w.ok()) return w.status();
  auto cur = w->txn.get(db_->buckets, bucket);
  if (!cur.ok()) return cur.status();
  if (!cur->has_value()) return no_such_bucket();
  auto info = decode_bucket(**cur);
  if (!info.ok()) return info.status();
  change(*info);
  OBJDIRECT_RETURN_IF_ERROR(w->txn.put(db_->buckets, bucket, encode_bucket(*info)));
  return w->commit();
}

Status LocalStore::set_bucket_tags(std::string_view bucket, TagSet tags) {
  return update_bucket(bucket, [&](BucketInfo& b) { b.tags = std::move(tags); });
}

Status LocalStore::set_bucket_config(std::string_view bucket, std::string_view name,
                                     std::string document) {
  return update_bucket(bucket, [&](BucketInfo& b) {
    if (document.empty()) {
      b.config.erase(std::string(name));
    } else {
      b.config[std::string(name)] = std::move(document);
    }
  });
}

Result<ObjectMeta> LocalStore::head_object(std::string_view bucket, std::string_view key) {
  auto m = head_object_version(bucket, key, "");
  if (m.ok() && m->delete_marker) return no_such_key();
  return m;
}

Result<ObjectMeta> LocalStore::head_object_version(std::string_view bucket, std::string_view key,
                                                   std::string_view version_id) {
  if (!version_id.empty() && !valid_version_id(version_id)) return invalid_version_id();
  auto txn = Txn::begin(*db_, false);
  if (!txn.ok()) return txn.status();
  auto state = bucket_versioning(*txn, bucket);
  if (!state.ok()) return state.status();
  bool plain = false;
  auto stack = get_versions(*txn, bucket, key, &plain);
  if (!stack.ok()) return stack.status();
  if (stack->empty()) return version_id.empty() ? no_such_key() : no_such_version();
  for (VersionEntry& v : *stack) {
    if (!version_id.empty() && v.version_id != version_id) continue;
    ObjectMeta m = std::move(v.rec.meta);
    // A never-versioned object is the null version once the bucket is versioned.
    if (plain) m.version_id = *state == Versioning::off ? "" : "null";
    return m;
  }
  return no_such_version();
}

Result<std::unique_ptr<ObjectReader>> LocalStore::open_object(std::string_view bucket,
                                                              std::string_view key) {
  return open_impl(bucket, key, "");
}

Result<std::unique_ptr<ObjectReader>> LocalStore::open_object_version(std::string_view bucket,
                                                                      std::string_view key,
                                                                      std::string_view version_id) {
  return open_impl(bucket, key, version_id);
}

Result<std::unique_ptr<ObjectReader>> LocalStore::open_impl(std::string_view bucket,
                                                            std::string_view key,
                                                            std::string_view version_id) {
  if (!version_id.empty() && !valid_version_id(version_id)) return invalid_version_id();
  // Pins make a blob outlive any commit that replaces it while this reader exists. The retry
  // covers a blob unlinked between the metadata read and the first open(), which pins rule out
  // in this process but a damaged directory might not.
  constexpr int blob_open_attempts_max = 3;
  for (int attempt = 0; attempt < blob_open_attempts_max; ++attempt) {
    ObjectRecord rec;
    {
      std::lock_guard lock(files_->pin_mutex());
      auto txn = Txn::begin(*db_, false);
      if (!txn.ok()) return txn.status();
      auto state = bucket_versioning(*txn, bucket);
      if (!state.ok()) return state.status();
      bool plain = false;
      auto stack = get_versions(*txn, bucket, key, &plain);
      if (!stack.ok()) return stack.status();
      VersionEntry* found = nullptr;
      for (VersionEntry& v : *stack) {
        if (version_id.empty() || v.version_id == version_id) {
          found = &v;
          break;
        }
      }
      if (found == nullptr) return version_id.empty() ? no_such_key() : no_such_version();
      if (found->delete_marker) {
        if (version_id.empty()) return no_such_key();
        return delete_marker_not_allowed();
      }
      rec = std::move(found->rec);
      if (plain) rec.meta.version_id = *state == Versioning::off ? "" : "null";
      files_->pin_locked(rec.segments);
    }
    auto reader = std::make_unique<LocalObjectReader>(files_, std::move(rec));
    if (reader->meta().size > 0) {
      auto fd = reader->fd(0);
      if (!fd.ok()) {
        if (fd.code() == Errc::corrupt) continue;  // ENOENT: re-read the metadata
        return fd.status();
      }
    }
    return std::unique_ptr<ObjectReader>(std::move(reader));
  }
  return Status(Errc::io_error, "object data vanished while opening it");
}

Status LocalStore::delete_object(std::string_view bucket, std::string_view key) {
  return delete_object_version(bucket, key, "").status();
}

Result<DeleteOutcome> LocalStore::delete_object_version(std::string_view bucket,
                                                        std::string_view key,
                                                        std::string_view version_id) {
  if (!version_id.empty() && !valid_version_id(version_id)) return invalid_version_id();
  std::vector<BlobId> doomed;
  DeleteOutcome out;
  const std::function<Status(Txn&)> apply = [&](Txn& txn) -> Status {
    doomed.clear();
    out = DeleteOutcome{};
    auto state = bucket_versioning(txn, bucket);
    if (!state.ok()) return state.status();
    bool plain = false;
    auto stack = get_versions(txn, bucket, key, &plain);
    if (!stack.ok()) return stack.status();
    std::vector<Segment> removed;
    if (version_id.empty() && *state == Versioning::off && (stack->empty() || plain)) {
      if (stack->empty()) return Status();
      removed = std::move(stack->front().rec.segments);
      stack->clear();
    } else if (version_id.empty()) {
      // A delete marker becomes the latest version (Suspended: the null one, replacing any).
      const bool enabled = *state == Versioning::enabled;
      if (!enabled) {
        auto it = std::find_if(stack->begin(), stack->end(),
                               [](const VersionEntry& v) { return v.version_id == "null"; });
        if (it != stack->end()) {
          removed = it->rec.segments;
          stack->erase(it);
        }
      }
      if (stack->size() >= options_.versions_per_key_max) {
        return Status(Errc::slow_down, "This key has too many versions (at most " +
                                           std::to_string(options_.versions_per_key_max) +
                                           "); delete some first");
      }
      VersionEntry marker;
      marker.version_id = enabled ? BlobId::random().hex() : "null";
      marker.delete_marker = true;
      marker.rec.meta.key = std::string(key);
      marker.rec.meta.mtime_ns = now_ns();
      stack->insert(stack->begin(), marker);
      out = DeleteOutcome{marker.version_id, true};
    } else {
      // That version goes for good; an unknown id removes nothing.
      auto it = std::find_if(stack->begin(), stack->end(),
                             [&](const VersionEntry& v) { return v.version_id == version_id; });
      out.version_id = std::string(version_id);
      if (it == stack->end()) return Status();
      out.delete_marker = it->delete_marker;
      removed = it->rec.segments;
      stack->erase(it);
    }
    collect_unreferenced(removed, *stack, doomed);
    if (stack->empty()) {
      auto e = key_tree::erase(txn, *db_, bucket, key);
      if (!e.ok()) return e.status();
    } else {
      OBJDIRECT_RETURN_IF_ERROR(key_tree::put(txn, *db_, bucket, key, encode_versions(*stack)));
    }
    for (const BlobId& id : doomed) OBJDIRECT_RETURN_IF_ERROR(txn.put(db_->gc, blob_key(id), ""));
    return Status();
  };
  OBJDIRECT_RETURN_IF_ERROR(group_commit(apply));
  files_->release(doomed);
  return out;
}

// Listing model: the entries are the keys under the prefix without a delimiter after it, plus
// the distinct common prefixes (prefix .. first delimiter, inclusive); entries are in byte order
// and those <= start_after are skipped. A common prefix is skipped as a whole by seeking to its
// successor, so a listing costs O(entries returned) seeks, not O(keys below them).
Result<ListResult> LocalStore::list_objects(std::string_view bucket, const ListQuery& q) {
  auto txn = Txn::begin(*db_, false);
  if (!txn.ok()) return txn.status();
  OBJDIRECT_RETURN_IF_ERROR(require_bucket(*txn, bucket));
  ListResult out;
  const std::uint32_t max_keys = std::min(q.max_keys, limits::list_keys_max);
  if (max_keys == 0) return out;
  KeyTreeIterator it(*txn, *db_, std::string(bucket));
  OBJDIRECT_RETURN_IF_ERROR(it.seek(std::max<std::string_view>(q.prefix, q.start_after)));
  std::uint32_t count = 0;
  while (it.valid()) {
    const std::string& key = it.key();
    if (!key.starts_with(q.prefix)) break;
    std::size_t cut = std::string::npos;
    if (!q.delimiter.empty()) cut = key.find(q.delimiter, q.prefix.size());
    if (cut != std::string::npos) {
      std::string cp = key.substr(0, cut + q.delimiter.size());
      if (cp > q.start_after) {
        // As AWS: a common prefix is listed only when some key below it has a latest version
        // that is not a delete marker (the walk stops at the first such key).
        bool live = false;
        while (!live && it.valid() && it.key().starts_with(cp)) {
          if (record_kind(it.value()) == RecordKind::versions) {
            auto v = decode_latest_version(it.value());
            if (!v.ok()) return v.status();
            live = !v->delete_marker;
          } else {
            live = true;
          }
          if (!live) OBJDIRECT_RETURN_IF_ERROR(it.next());
        }
        if (live) {
          if (count == max_keys) {
            out.truncated = true;
            break;
          }
          out.common_prefixes.push_back(cp);
          out.next_marker = cp;
          ++count;
        }
      }
      const std::string next = prefix_successor(std::move(cp));
      if (next.empty()) break;
      OBJDIRECT_RETURN_IF_ERROR(it.seek(next));
      continue;
    }
    if (key > q.start_after) {
      std::optional<ObjectMeta> meta;
      if (record_kind(it.value()) == RecordKind::versions) {
        // A key whose latest version is a delete marker is not listed.
        auto v = decode_latest_version(it.value());
        if (!v.ok()) return v.status();
        if (!v->delete_marker) meta = std::move(v->rec.meta);
      } else {
        auto rec = decode_object_without_parts(it.value());
        if (!rec.ok()) return rec.status();
        meta = std::move(rec->meta);
      }
      if (meta) {
        if (count == max_keys) {
          out.truncated = true;
          break;
        }
        out.objects.push_back(std::move(*meta));
        out.next_marker = key;
        ++count;
      }
    }
    OBJDIRECT_RETURN_IF_ERROR(it.next());
  }
  if (!out.truncated) out.next_marker.clear();
  return out;
}

// The same walk as list_objects, each key giving its versions newest first. key_marker (with
// version_id_marker) resumes inside a key, as AWS's NextKeyMarker / NextVersionIdMarker do.
Result<ListVersionsResult> LocalStore::list_object_versions(std::string_view bucket,
                                                            const ListVersionsQuery& q) {
  if (!q.version_id_marker.empty() && !valid_version_id(q.version_id_marker)) {
    return invalid_version_id();
  }
  auto txn = Txn::begin(*db_, false);
  if (!txn.ok()) return txn.status();
  auto state = bucket_versioning(*txn, bucket);
  if (!state.ok()) return state.status();
  ListVersionsResult out;
  const std::uint32_t max_keys = std::min(q.max_keys, limits::list_keys_max);
  if (max_keys == 0) return out;
  KeyTreeIterator it(*txn, *db_, std::string(bucket));
  OBJDIRECT_RETURN_IF_ERROR(it.seek(std::max<std::string_view>(q.prefix, q.key_marker)));
  std::uint32_t count = 0;
  while (it.valid() && !out.truncated) {
    const std::string& key = it.key();
    if (!key.starts_with(q.prefix)) break;
    if (auto cp = roll_up_version_key(key, q, max_keys, count, out)) {
      if (out.truncated) break;
      const std::string next = prefix_successor(std::move(*cp));
      if (next.empty()) break;
      OBJDIRECT_RETURN_IF_ERROR(it.seek(next));
      continue;
    }
    if (key > q.key_marker || (key == q.key_marker && !q.version_id_marker.empty())) {
      std::vector<VersionEntry> stack;
      if (record_kind(it.value()) == RecordKind::versions) {
        auto vs = decode_versions(it.value());
        if (!vs.ok()) return vs.status();
        stack = std::move(*vs);
      } else {
        auto rec = decode_object_without_parts(it.value());
        if (!rec.ok()) return rec.status();
        stack.resize(1);
        stack[0].version_id = "null";
        stack[0].rec = std::move(*rec);
        stack[0].rec.meta.version_id = "null";
      }
      std::size_t first = 0;
      if (key == q.key_marker) {
        first = stack.size();  // an unknown marker id: nothing more of this key
        for (std::size_t i = 0; i < stack.size(); ++i) {
          if (stack[i].version_id == q.version_id_marker) first = i + 1;
        }
      }
      for (std::size_t i = first; i < stack.size(); ++i) {
        if (count == max_keys) {
          out.truncated = true;
          break;
        }
        ObjectVersion v;
        v.meta = std::move(stack[i].rec.meta);
        v.meta.parts.clear();
        v.is_latest = i == 0;
        v.noncurrent_since_ns = i == 0 ? 0 : stack[i - 1].rec.meta.mtime_ns;
        out.next_key_marker = key;
        out.next_version_id_marker = v.meta.version_id;
        out.versions.push_back(std::move(v));
        ++count;
      }
    }
    if (out.truncated) break;
    OBJDIRECT_RETURN_IF_ERROR(it.next());
  }
  if (!out.truncated) {
    out.next_key_marker.clear();
    out.next_version_id_marker.clear();
  }
  return out;
}

// --- multipart ---

Result<UploadInfo> LocalStore::get_upload_in(const Txn& txn, std::string_view bucket,
                                             std::string_view key,
                                             std::string_view upload_id) const {
  OBJDIRECT_RETURN_IF_ERROR(require_bucket(txn, bucket));
  auto v = txn.get(db_->uploads, upload_key(bucket, upload_id));
  if (!v.ok()) return v.status();
  if (!v->has_value()) return no_such_upload();
  auto info = decode_upload(**v);
  if (!info.ok()) return info.status();
  if (info->key != key) return no_such_upload();
  return info;
}

Result<std::string> LocalStore::create_upload(std::string_view bucket, const UploadInfo& info) {
  OBJDIRECT_RETURN_IF_ERROR(validate_key(info.key));
  auto w = begin_write_txn();
  if (!w.ok()) return w.status();
  OBJDIRECT_RETURN_IF_ERROR(require_bucket(w->txn, bucket));
  UploadInfo stored = info;
  stored.upload_id = BlobId::random().hex();
  if (stored.initiated_ns == 0) stored.initiated_ns = now_ns();
  OBJDIRECT_RETURN_IF_ERROR(
      w->txn.put(db_->uploads, upload_key(bucket, stored.upload_id), encode_upload(stored)));
  OBJDIRECT_RETURN_IF_ERROR(w->commit());
  return stored.upload_id;
}

Result<UploadInfo> LocalStore::get_upload(std::string_view bucket, std::string_view key,
                                          std::string_view upload_id) {
  auto txn = Txn::begin(*db_, false);
  if (!txn.ok()) return txn.status();
  return get_upload_in(*txn, bucket, key, upload_id);
}

Result<PartInfo> LocalStore::commit_part(std::string_view bucket, std::string_view key,
                                         std::string_view upload_id, PartInfo info,
                                         std::unique_ptr<BlobWriter> data) {
  if (info.part_number < 1 || info.part_number > limits::parts_max) {
    return Status(Errc::invalid_argument, "Part number must be an integer between 1 and 10000");
  }
  auto writer = own_writer(data.get());
  if (!writer.ok()) return writer.status();
  if (info.size != (*writer)->size()) {
    return Status(Errc::invalid_argument, "part size does not match the bytes written");
  }
  auto seg = (*writer)->finalize();
  if (!seg.ok()) return seg.status();
  PartRecord rec;
  if (seg->has_value()) rec.blob = (*seg)->blob;

  std::vector<BlobId> doomed;
  const std::function<Status(Txn&)> apply = [&](Txn& txn) -> Status {
    auto up = get_upload_in(txn, bucket, key, upload_id);
    if (!up.ok()) return up.status();
    const std::string pk = part_key(upload_id, info.part_number);
    auto old = txn.get(db_->parts, pk);
    if (!old.ok()) return old.status();
    if (old->has_value()) {
      auto prev = decode_part(**old);
      if (!prev.ok()) return prev.status();
      if (prev->info.size > 0) doomed.push_back(prev->blob);
    }
    info.mtime_ns = now_ns();
    rec.info = info;
    OBJDIRECT_RETURN_IF_ERROR(txn.put(db_->parts, pk, encode_part(rec)));
    for (const BlobId& id : doomed) OBJDIRECT_RETURN_IF_ERROR(txn.put(db_->gc, blob_key(id), ""));
    return Status();
  };
  Status st = group_commit(apply);
  if (!st.ok()) {
    if (seg->has_value()) files_->discard(rec.blob);
    return st;
  }
  files_->release(doomed);
  return info;
}

Result<std::vector<PartInfo>> LocalStore::list_parts(std::string_view bucket, std::string_view key,
                                                     std::string_view upload_id,
                                                     std::uint32_t part_number_marker,
                                                     std::uint32_t max_parts) {
  auto txn = Txn::begin(*db_, false);
  if (!txn.ok()) return txn.status();
  auto up = get_upload_in(*txn, bucket, key, upload_id);
  if (!up.ok()) return up.status();
  std::vector<PartInfo> out;
  if (part_number_marker >= limits::parts_max || max_parts == 0) return out;
  auto c = Cursor::open(*txn, db_->parts);
  if (!c.ok()) return c.status();
  std::string_view v;
  for (auto r = c->seek(part_key(upload_id, part_number_marker + 1), upload_id, nullptr, &v);;
       r = c->next(upload_id, nullptr, &v)) {
    if (!r.ok()) return r.status();
    if (!*r || out.size() >= max_parts) break;
    auto p = decode_part(v);
    if (!p.ok()) return p.status();
    out.push_back(std::move(p->info));
  }
  return out;
}

Status LocalStore::drop_upload(WriteTxn& w, std::string_view bucket, std::string_view upload_id,
                               const std::unordered_set<BlobId, BlobIdHash>& keep,
                               std::vector<BlobId>& doomed) {
  std::vector<std::string> keys;
  {
    auto c = Cursor::open(w.txn, db_->parts);
    if (!c.ok()) return c.status();
    std::string_view k, v;
    for (auto r = c->seek(upload_id, upload_id, &k, &v);; r = c->next(upload_id, &k, &v)) {
      if (!r.ok()) return r.status();
      if (!*r) break;
      auto p = decode_part(v);
      if (!p.ok()) return p.status();
      if (p->info.size > 0 && !keep.contains(p->blob)) doomed.push_back(p->blob);
      keys.emplace_back(k);
    }
  }
  for (const std::string& k : keys) {
    auto d = w.txn.del(db_->parts, k);
    if (!d.ok()) return d.status();
  }
  auto d = w.txn.del(db_->uploads, upload_key(bucket, upload_id));
  if (!d.ok()) return d.status();
  return Status();
}

Result<ObjectMeta> LocalStore::complete_upload(std::string_view bucket, std::string_view upload_id,
                                               ObjectMeta meta,
                                               const std::vector<CompletePartRef>& parts,
                                               const WriteCondition& cond) {
  OBJDIRECT_RETURN_IF_ERROR(validate_key(meta.key));
  if (parts.empty()) {
    return Status(Errc::invalid_request, "You must specify at least one part");
  }
  std::vector<BlobId> doomed;
  auto w = begin_write_txn();
  if (!w.ok()) return w.status();
  auto up = get_upload_in(w->txn, bucket, meta.key, upload_id);
  if (!up.ok()) return up.status();
  auto cur = get_object(w->txn, bucket, meta.key);
  if (!cur.ok()) return cur.status();
  OBJDIRECT_RETURN_IF_ERROR(check_condition(cond, cur->has_value() ? &**cur : nullptr));

  ObjectRecord rec;
  std::unordered_set<BlobId, BlobIdHash> keep;
  std::uint64_t total = 0;
  std::uint32_t prev = 0;
  for (const CompletePartRef& ref : parts) {
    if (ref.part_number <= prev) {
      return Status(Errc::invalid_part_order,
                    "The list of parts was not in ascending order. Parts must be ordered by "
                    "part number.");
    }
    prev = ref.part_number;
    auto v = w->txn.get(db_->parts, part_key(upload_id, ref.part_number));
    if (!v.ok()) return v.status();
    if (!v->has_value()) {
      return Status(Errc::invalid_part, "One or more of the specified parts could not be found: " +
                                            std::to_string(ref.part_number));
    }
    auto p = decode_part(**v);
    if (!p.ok()) return p.status();
    if (p->info.etag != ref.etag) {
      return Status(Errc::invalid_part,
                    "The ETag of part " + std::to_string(ref.part_number) + " does not match");
    }
    total += p->info.size;
    if (p->info.size > 0) {
      rec.segments.push_back(Segment{p->blob, p->info.size});
      keep.insert(p->blob);
    }
  }
  if (meta.size != total) {
    return Status(Errc::invalid_argument, "object size does not match the sum of its parts");
  }
  OBJDIRECT_RETURN_IF_ERROR(drop_upload(*w, bucket, upload_id, keep, doomed));
  OBJDIRECT_RETURN_IF_ERROR(mark_gc(*w, doomed));
  rec.meta = std::move(meta);
  OBJDIRECT_RETURN_IF_ERROR(put_version(w->txn, bucket, rec, cond, doomed));
  OBJDIRECT_RETURN_IF_ERROR(w->commit());
  files_->release(doomed);
  return std::move(rec.meta);
}

Status LocalStore::abort_upload(std::string_view bucket, std::string_view key,
                                std::string_view upload_id) {
  auto w = begin_write_txn();
  if (!w.ok()) return w.status();
  auto up = get_upload_in(w->txn, bucket, key, upload_id);
  if (!up.ok()) return up.status();
  std::vector<BlobId> doomed;
  OBJDIRECT_RETURN_IF_ERROR(drop_upload(*w, bucket, upload_id, {}, doomed));
  OBJDIRECT_RETURN_IF_ERROR(mark_gc(*w, doomed));
  OBJDIRECT_RETURN_IF_ERROR(w->commit());
  files_->release(doomed);
  return Status();
}

// In-progress uploads are few, so this reads all of the bucket's uploads and sorts them in
// memory (O(uploads in bucket)); see docs/storage.md.
Result<ListUploadsResult> LocalStore::list_uploads(std::string_view bucket,
                                                   const ListUploadsQuery& q) {
  std::vector<UploadInfo> all;
  {
    auto txn = Txn::begin(*db_, false);
    if (!txn.ok()) return txn.status();
    OBJDIRECT_RETURN_IF_ERROR(require_bucket(*txn, bucket));
    auto c = Cursor::open(*txn, db_->uploads);
    if (!c.ok()) return c.status();
    const std::string prefix = bucket_prefix(bucket);
    std::string_view v;
    for (auto r = c->seek(prefix, prefix, nullptr, &v);; r = c->next(prefix, nullptr, &v)) {
      if (!r.ok()) return r.status();
      if (!*r) break;
      auto u = decode_upload(v);
      if (!u.ok()) return u.status();
      if (u->key.starts_with(q.prefix)) all.push_back(std::move(*u));
    }
  }
  return page_uploads(std::move(all), q);
}

}  // namespace local

Result<std::unique_ptr<ObjectStore>> open_local_store(const LocalStoreOptions& options) {
  return local::LocalStore::open(options);
}

}  // namespace objdirect::storage
