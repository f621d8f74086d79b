// LMDB plumbing for storage/local: the environment with its named tables, RAII transactions,
// and the object key tree that orders (bucket, key) pairs although LMDB keys are limited to
// 511 bytes while S3 keys may have 1024.
//
// Key tree. Table `objects` holds `bucket \0 key` for keys of at most key_chunk_bytes bytes. A
// longer key K is split: `objects` holds a marker `bucket \0 K[0:C] \0` (C = key_chunk_bytes),
// and the rest K[C:] lives in table `object_groups` under a 16-byte namespace
// SHA-256(parent namespace + K[0:C])[0:16], recursively (at most three levels for 1024 bytes).
// A marker sorts right after the key K[0:C] itself and before every other key of that level, so
// an in-order walk that descends into each group at its marker visits all keys in byte order.
// Markers are created by put() and removed by erase() when their group becomes empty.
//
// Errors: LMDB failures map to Errc (MDB_MAP_FULL and ENOSPC -> no_space, MDB_CORRUPTED and
// friends -> corrupt, anything else -> io_error), see mdb_status().
//
// Thread safety: MetaDb is thread-safe (LMDB serialises write transactions and lets readers run
// concurrently; MDB_NOTLS lets a read transaction move between threads). Txn, KeyTreeIterator
// are used by one thread at a time and must not outlive their MetaDb / Txn.
#pragma once

#include <lmdb.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.hpp"

namespace objdirect::limits {
// Bytes of an object key stored per level of the key tree (see meta_db.hpp).
inline constexpr std::size_t key_chunk_bytes_max = 400;
// Concurrent LMDB read transactions (one per in-flight head/open/list).
inline constexpr unsigned lmdb_readers_max = 1024;
}  // namespace objdirect::limits

namespace objdirect::storage::local {

// Maps an LMDB (or errno) return code to a Status; `what` names the operation.
Status mdb_status(int rc, std::string_view what);

inline MDB_val to_val(std::string_view s) {
  return MDB_val{s.size(), const_cast<char*>(s.data())};
}
inline std::string_view from_val(const MDB_val& v) {
  return std::string_view(static_cast<const char*>(v.mv_data), v.mv_size);
}

class MetaDb {
 public:
  struct Options {
    std::string dir;  // created if missing
    std::uint64_t map_size_bytes = 0;
    bool fsync = true;  // false: MDB_NOSYNC (crash of the process is still safe)
  };
  // Opens (creating if needed) the environment and its tables. io_error/corrupt on failure.
  static Result<std::unique_ptr<MetaDb>> open(const Options& options);
  ~MetaDb();
  MetaDb(const MetaDb&) = delete;
  MetaDb& operator=(const MetaDb&) = delete;

  MDB_env* env() const { return env_; }

  // Tables (see docs/storage.md for their keys and values).
  MDB_dbi buckets = 0;        // bucket name -> bucket record
  MDB_dbi objects = 0;        // bucket \0 key-chunk -> object record or group marker
  MDB_dbi object_groups = 0;  // 16-byte group namespace + key-chunk -> object record or marker
  MDB_dbi uploads = 0;        // bucket \0 upload id -> upload record
  MDB_dbi parts = 0;          // upload id + u32 BE part number -> part record
  MDB_dbi gc = 0;             // 16-byte blob id -> "" : blobs to delete

 private:
  MetaDb() = default;
  MDB_env* env_ = nullptr;
};

// One LMDB transaction; aborted on destruction unless committed.
class Txn {
 public:
  static Result<Txn> begin(const MetaDb& db, bool write);
  // A child of a write transaction: its changes join the parent on commit() and vanish on abort.
  // The parent must not be used while the child is open.
  static Result<Txn> begin_nested(const MetaDb& db, Txn& parent);
  Txn(Txn&& other) noexcept : txn_(other.txn_), write_(other.write_) { other.txn_ = nullptr; }
  Txn& operator=(Txn&&) = delete;
  ~Txn();

  MDB_txn* get() const { return txn_; }
  Status commit();

  // The value under key, or nullopt. The view stays valid until the next write in this txn.
  Result<std::optional<std::string_view>> get(MDB_dbi dbi, std::string_view key) const;
  Status put(MDB_dbi dbi, std::string_view key, std::string_view value);
  // Deletes key; absent keys are fine. Returns whether it existed.
  Result<bool> del(MDB_dbi dbi, std::string_view key);

 private:
  Txn(MDB_txn* t, bool write) : txn_(t), write_(write) {}
  MDB_txn* txn_ = nullptr;
  bool write_ = false;  // a top-level write transaction (its commit may fsync)
};

// RAII cursor. Must be destroyed before its transaction ends.
class Cursor {
 public:
  static Result<Cursor> open(const Txn& txn, MDB_dbi dbi);
  Cursor(Cursor&& o) noexcept : c_(o.c_) { o.c_ = nullptr; }
  Cursor& operator=(Cursor&& o) noexcept;
  ~Cursor();
  MDB_cursor* get() const { return c_; }

  // Positions at the first key >= key that starts with `prefix`; false when there is none.
  // k/v receive the entry.
  Result<bool> seek(std::string_view key, std::string_view prefix, std::string_view* k,
                    std::string_view* v);
  // Moves to the next key if it starts with `prefix`; false at the end.
  Result<bool> next(std::string_view prefix, std::string_view* k, std::string_view* v);

 private:
  explicit Cursor(MDB_cursor* c) : c_(c) {}
  Result<bool> load(int rc, MDB_val& k, MDB_val& v, std::string_view prefix, std::string_view* ko,
                    std::string_view* vo);
  MDB_cursor* c_ = nullptr;
};

// Point operations on the object key tree of one bucket.
namespace key_tree {
Result<std::optional<std::string_view>> get(const Txn& txn, const MetaDb& db,
                                            std::string_view bucket, std::string_view key);
Status put(Txn& txn, const MetaDb& db, std::string_view bucket, std::string_view key,
           std::string_view value);
// Removes key (and any group markers left empty). Returns whether it existed.
Result<bool> erase(Txn& txn, const MetaDb& db, std::string_view bucket, std::string_view key);
// Whether the bucket holds no object.
Result<bool> empty(const Txn& txn, const MetaDb& db, std::string_view bucket);
}  // namespace key_tree

// In-order walk over the object keys of one bucket. Invalid until seek() succeeds.
class KeyTreeIterator {
 public:
  KeyTreeIterator(const Txn& txn, const MetaDb& db, std::string bucket);
  // Positions at the first key >= target.
  Status seek(std::string_view target);
  Status next();
  bool valid() const { return valid_; }
  // The full object key and its record (valid while positioned; the value view lives as long
  // as the read transaction).
  const std::string& key() const { return key_; }
  std::string_view value() const { return frames_.back().val; }

 private:
  struct Frame {
    Cursor cursor;
    MDB_dbi dbi;
    std::string ns;    // key prefix of this level in its table
    std::string base;  // the object-key bytes this level stands for
    std::string_view rel;
    std::string_view val;
    bool valid = false;
  };
  Status push(MDB_dbi dbi, std::string ns, std::string base);
  Status settle();

  const Txn& txn_;
  const MetaDb& db_;
  std::string bucket_;
  std::vector<Frame> frames_;
  std::string key_;
  bool valid_ = false;
};

}  // namespace objdirect::storage::local
