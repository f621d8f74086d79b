// The RadosStore class (see rados_store.hpp, docs/scale-out.md). Its members are defined in
// rados_store.cc (construction, GC), rados_buckets.cc (buckets, bucket configuration and the
// bucket record cache), rados_objects.cc (objects and listing) and rados_multipart.cc.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "storage/rados/rados_common.hpp"

namespace objdirect::storage::rados_impl {

class RadosStore : public ObjectStore {
 public:
  explicit RadosStore(std::shared_ptr<Conn> c);
  ~RadosStore() override;

  Status create_bucket(const BucketInfo& info) override;

  Status delete_bucket(std::string_view bucket) override;

  Result<BucketInfo> head_bucket(std::string_view bucket) override;

  Result<std::vector<BucketInfo>> list_buckets() override;

  Result<std::unique_ptr<BlobWriter>> begin_write(std::string_view bucket) override;

  Result<std::unique_ptr<BlobWriter>> begin_write_for(std::string_view bucket,
                                                      std::string_view key) override;

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

  Status update_bucket(std::string_view bucket, const std::function<void(BucketInfo&)>& change);

  Result<ObjectMeta> replace_meta(std::string_view bucket, ObjectMeta meta,
                                  std::string_view expected_etag) override;

  Result<ObjectMeta> head_object(std::string_view bucket, std::string_view key) override;

  Result<std::unique_ptr<ObjectReader>> open_object(std::string_view bucket,
                                                    std::string_view key) override;

  Status delete_object(std::string_view bucket, std::string_view key) override;

  Result<ListResult> list_objects(std::string_view bucket, const ListQuery& q) override;

  // --- versions (rados_versions.cc, rados_list.cc; docs/versioning.md) ---
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
  Status abort_upload(const BucketRec& b, std::string_view key, std::string_view upload_id);

  Result<ListUploadsResult> list_uploads(std::string_view bucket,
                                         const ListUploadsQuery& q) override;

  Result<std::uint64_t> gc_pass();

 private:
  // A key's entry as read ("o" key and the shard's versioning_key, raw for the commit's
  // omap_cmp), decoded, with the bucket's versioning state; `removed`: segments of versions a
  // change dropped (put_version, delete_object_version), for GC unless another version has them.
  struct KeyState {
    std::optional<std::string> raw, vraw;
    Versioning state = Versioning::off;
    KeyEntry entry;
    std::vector<Segment> removed;
  };
  Result<KeyState> key_state(const BucketRec& b, std::optional<std::string> raw,
                             std::optional<std::string> vraw);
  // Reads the key's entry and versioning state on shard `oid` of instance `b` (one op) and
  // checks the write condition against the latest version: must_be_absent fails on a version,
  // etag_must_match on none (or a delete marker) or another ETag.
  Result<KeyState> current_key(const BucketRec& b, const std::string& oid, const std::string& okey,
                               const WriteCondition& cond);
  // Makes nv (meta and mtime set, delete_marker for a marker) the newest version as ks.state
  // says: replaces the object (never versioned), adds a version with a new id (Enabled) or
  // replaces the null version (Suspended). Returns the stored meta with its version id;
  // slow_down past versions_per_key_max.
  Result<ObjectMeta> put_version(KeyState& ks, Version nv);
  // The parts of one commit op on the key's shard.
  struct KeyCommit {
    std::map<std::string, std::pair<bufferlist, int>> asserts;
    std::map<std::string, bufferlist> set;
    std::set<std::string> rm;
  };
  // Stages ks's change of `okey`: asserts the entry and versioning state are as read and the
  // shard is live; the new value (removed when no version is left); GC records for the blobs of
  // ks.removed no version references any more. slow_down past versions_value_bytes.
  Status stage_key(const std::string& okey, const KeyState& ks, KeyCommit& kc);
  // Runs the compound op (librados' return value: 0, -ECANCELED on a failed compare, ...).
  int run(const std::string& oid, const KeyCommit& kc);
  // One version ("" = latest) with meta.version_id / delete_marker set.
  Result<Version> find_version(std::string_view bucket, std::string_view key,
                               std::string_view version_id);
  // Writes the record's versioning state to every index shard (docs/versioning.md).
  Status propagate_versioning(std::string_view bucket);

  // --- the bucket record cache ---
  // Bucket name -> record, per server. A cached record may be stale: another server may have
  // deleted the bucket, maybe re-created it under a new instance. Every use validates it no later
  // than its first access to an index shard, in the same RADOS op: reads fetch the shard's
  // "!state" with their keys (read_entry, valid_bucket), writes assert it is "live". Shards of a
  // deleted instance are fenced forever, so a stale record is always detected; the fresh record
  // then replaces it (fresh_bucket) and the op is redone on it, or fails with NoSuchBucket, or,
  // for a PUT whose data went to the old instance, is refused. HeadBucket and ListBuckets read
  // the record itself. Deleting and re-creating a bucket thus never serves stale answers; the
  // cache only saves the record read of each request.

  Result<BucketRec> bucket_rec(std::string_view name);
  Result<BucketRec> fresh_bucket(std::string_view name);
  void remember_bucket(const BucketRec& b);
  void forget_bucket(std::string_view name);

  Result<std::optional<BucketRec>> recheck(const BucketRec& b);
  static bool live(const std::map<std::string, bufferlist>& m);

  Result<BucketRec> valid_bucket(std::string_view name, std::optional<std::string_view> key);

  // The index entry `okey` of `key` (nullopt when absent), read with the shard's state in one op,
  // on the current instance of the bucket.
  struct Entry {
    BucketRec b;
    std::string oid;
    std::optional<std::string> raw;
    std::optional<std::string> vraw;  // the shard's versioning_key
  };
  Result<Entry> read_entry(std::string_view name, std::string_view key, const std::string& okey);
  // read_entry, then key_state of what it read: the start of every read of a key's versions and
  // of every read-modify-commit of them (commit_key).
  struct KeyRead {
    Entry e;
    KeyState ks;
  };
  Result<KeyRead> read_key(std::string_view name, std::string_view key, const std::string& okey);

  Result<std::pair<UploadInfo, std::string>> read_upload(const BucketRec& b, std::string_view key,
                                                         std::string_view upload_id);

  Result<BucketRec> after_conflict(const BucketRec& b, const std::string& oid,
                                   const std::string& ikey, int attempt);
  // The commit of a read-modify-write of one key's entry (tag update, metadata replace, version
  // delete): stages ks's change of `okey` and runs it on e.oid. true: committed. false: a compare
  // failed (another writer came first, or e.b is stale); the bucket cache is refreshed
  // (after_conflict) and the caller reads the entry again. Errors: stage_key's, no_such_bucket
  // (the shard is gone), the RADOS error of `what` ("tag update", ...), after_conflict's.
  Result<bool> commit_key(const Entry& e, const std::string& okey, const KeyState& ks, int attempt,
                          std::string_view what);

  void gc_loop();

  std::shared_ptr<Conn> c_;
  struct Cached {
    BucketRec rec;
    std::chrono::steady_clock::time_point fetched;
  };
  std::mutex cache_mu_;
  std::map<std::string, Cached, std::less<>> cache_;  // at most bucket_cache_entries
  const std::string gc_cookie_ = BlobId::random().hex();
  std::mutex gc_mu_;
  std::condition_variable gc_cv_;
  bool stop_ = false;
  std::thread gc_thread_;
};

}  // namespace objdirect::storage::rados_impl
