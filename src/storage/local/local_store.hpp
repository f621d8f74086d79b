// LocalStore: the embedded default ObjectStore. Metadata lives in LMDB (one environment under
// <data_dir>/meta), object bytes in one file per blob under <data_dir>/blobs/xx/<32 hex>, named
// by a random 128-bit id and never by a key. See docs/storage.md for the layout, the commit
// protocol, crash recovery and figures, and docs/metadata_format.md for the record encoding.
//
// Behaviour beyond the ObjectStore contract:
//  - One process owns a data directory at a time (flock on <data_dir>/LOCK); a second open fails
//    with Errc::unavailable.
//  - open_local_store() runs recovery before returning: it empties tmp/, finishes deletions
//    recorded before a crash and deletes blob files no metadata references.
//  - Concurrent commit_object / commit_part / delete_object calls share one LMDB commit and sync
//    (group commit); each is acknowledged only once that commit returned.
//  - Empty objects and parts have no blob file.
//  - Writers create their temporary file on the first non-empty append.
//  - A WriteCondition etag_must_match on an absent key fails with no_such_key (as S3 answers
//    If-Match on a missing object with 404), not precondition_failed.
//  - replace_meta keeps the object's bytes, size and segments; it keeps the stored ETag and parts
//    list when meta.etag / meta.parts are empty.
//  - complete_upload: invalid_part_order unless part numbers strictly ascend, invalid_argument if
//    meta.size differs from the sum of the chosen parts; unchosen parts are deleted.
//  - Versioning (docs/versioning.md): a key of a versioned bucket holds all its versions in one
//    record, newest first, rewritten in one transaction by every write, so a new version never
//    loses the older ones. A write past versions_per_key_max versions gets slow_down. Version
//    ids are 32 random lowercase hex digits, or "null".
//  - list_objects returns ObjectMeta without `parts` (listings need none; head_object and
//    open_object return them).
//  - Errors: no_space for ENOSPC/EDQUOT/MDB_MAP_FULL, io_error for other system failures,
//    corrupt for undecodable metadata or missing blob files, invalid_bucket_name,
//    invalid_argument for empty keys or writers from another store, key_too_long.
//
// Thread safety: the store is fully thread-safe. Writers and readers are used by one thread at a
// time; both may outlive the store (they share ownership of what they need and own their fds).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.hpp"
#include "storage/object_store.hpp"

namespace objdirect::storage {

struct LocalStoreOptions {
  std::string data_dir;                             // created if missing
  bool fsync = true;                                // fsync blobs, directories and LMDB commits
  std::uint64_t lmdb_map_size_bytes = 64ull << 30;  // LMDB's maximum metadata size (sparse)
  // Versions one key may hold (limits::versions_per_key_max; tests lower it).
  std::uint32_t versions_per_key_max = 10'000;
};

// Opens (creating if needed) the store in options.data_dir and runs crash recovery.
// Errors: unavailable if another process holds the directory, io_error/corrupt/no_space from
// the filesystem or LMDB.
Result<std::unique_ptr<ObjectStore>> open_local_store(const LocalStoreOptions& options);

}  // namespace objdirect::storage
