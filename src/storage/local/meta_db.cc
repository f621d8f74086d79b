#include "storage/local/meta_db.hpp"

#include <openssl/sha.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <string>

#include "common/blocking.hpp"

namespace objdirect::storage::local {
namespace {

constexpr std::size_t chunk = limits::key_chunk_bytes_max;
// Longest LMDB key we ever write: 63-byte bucket, \0, chunk, marker \0.
constexpr std::size_t lmdb_key_bytes_needed = 63 + 1 + chunk + 1;

// The namespace of the group below marker (parent_ns, x).
std::string group_ns(std::string_view parent_ns, std::string_view x) {
  std::string in;
  in.reserve(parent_ns.size() + x.size());
  in.append(parent_ns).append(x);
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(in.data()), in.size(), md);
  return std::string(reinterpret_cast<const char*>(md), 16);
}

std::string bucket_ns(std::string_view bucket) {
  std::string ns(bucket);
  ns.push_back('\0');
  return ns;
}

std::string marker(std::string_view ns, std::string_view x) {
  std::string m;
  m.reserve(ns.size() + x.size() + 1);
  m.append(ns).append(x).push_back('\0');
  return m;
}

std::string cat(std::string_view a, std::string_view b) {
  std::string s;
  s.reserve(a.size() + b.size());
  s.append(a).append(b);
  return s;
}

}  // namespace

Status mdb_status(int rc, std::string_view what) {
  if (rc == 0) return Status();
  std::string msg = std::string(what) + ": " + mdb_strerror(rc);
  switch (rc) {
    case MDB_MAP_FULL:
    case ENOSPC:
    case EDQUOT:
      return Status(Errc::no_space, std::move(msg));
    case MDB_CORRUPTED:
    case MDB_PAGE_NOTFOUND:
    case MDB_INVALID:
    case MDB_VERSION_MISMATCH:
    case MDB_BAD_VALSIZE:
      return Status(Errc::corrupt, std::move(msg));
    case MDB_READERS_FULL:
      return Status(Errc::slow_down, std::move(msg));
    default:
      return Status(Errc::io_error, std::move(msg));
  }
}

Result<std::unique_ptr<MetaDb>> MetaDb::open(const Options& options) {
  if (::mkdir(options.dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return mdb_status(errno, "mkdir " + options.dir);
  }
  std::unique_ptr<MetaDb> db(new MetaDb());
  int rc = mdb_env_create(&db->env_);
  if (rc != 0) return mdb_status(rc, "mdb_env_create");
  if (static_cast<std::size_t>(mdb_env_get_maxkeysize(db->env_)) < lmdb_key_bytes_needed) {
    return Status(Errc::internal, "liblmdb was built with MDB_MAXKEYSIZE below " +
                                      std::to_string(lmdb_key_bytes_needed));
  }
  if ((rc = mdb_env_set_mapsize(db->env_, options.map_size_bytes)) != 0) {
    return mdb_status(rc, "mdb_env_set_mapsize");
  }
  if ((rc = mdb_env_set_maxdbs(db->env_, 8)) != 0) return mdb_status(rc, "mdb_env_set_maxdbs");
  if ((rc = mdb_env_set_maxreaders(db->env_, limits::lmdb_readers_max)) != 0) {
    return mdb_status(rc, "mdb_env_set_maxreaders");
  }
  unsigned flags = MDB_NOTLS;
  if (!options.fsync) flags |= MDB_NOSYNC;
  if ((rc = mdb_env_open(db->env_, options.dir.c_str(), flags, 0600)) != 0) {
    return mdb_status(rc, "mdb_env_open " + options.dir);
  }
  int dead = 0;
  (void)mdb_reader_check(db->env_, &dead);  // clear slots of crashed readers

  auto txn = Txn::begin(*db, true);
  if (!txn.ok()) return txn.status();
  struct Table {
    const char* name;
    MDB_dbi* dbi;
  };
  for (Table t : {Table{"buckets", &db->buckets}, Table{"objects", &db->objects},
                  Table{"object_groups", &db->object_groups}, Table{"uploads", &db->uploads},
                  Table{"parts", &db->parts}, Table{"gc", &db->gc}}) {
    if ((rc = mdb_dbi_open(txn->get(), t.name, MDB_CREATE, t.dbi)) != 0) {
      return mdb_status(rc, std::string("mdb_dbi_open ") + t.name);
    }
  }
  OBJDIRECT_RETURN_IF_ERROR(txn->commit());
  return db;
}

MetaDb::~MetaDb() {
  if (env_ != nullptr) mdb_env_close(env_);
}

Result<Txn> Txn::begin(const MetaDb& db, bool write) {
  MDB_txn* t = nullptr;
  // A write transaction first waits for LMDB's writer lock, held by another commit's fsync.
  std::optional<BlockingScope> blocking;
  if (write) blocking.emplace();
  const int rc = mdb_txn_begin(db.env(), nullptr, write ? 0 : MDB_RDONLY, &t);
  if (rc != 0) return mdb_status(rc, "mdb_txn_begin");
  return Txn(t, write);
}

Result<Txn> Txn::begin_nested(const MetaDb& db, Txn& parent) {
  MDB_txn* t = nullptr;
  const int rc = mdb_txn_begin(db.env(), parent.get(), 0, &t);
  if (rc != 0) return mdb_status(rc, "mdb_txn_begin (nested)");
  return Txn(t, /*write=*/false);  // a child's commit joins its parent: no fsync
}

Txn::~Txn() {
  if (txn_ != nullptr) mdb_txn_abort(txn_);
}

Status Txn::commit() {
  MDB_txn* t = txn_;
  txn_ = nullptr;
  // A write transaction's commit fsyncs unless the environment is MDB_NOSYNC (--no-fsync).
  unsigned env_flags = 0;
  if (write_) mdb_env_get_flags(mdb_txn_env(t), &env_flags);
  const BlockingScope blocking(/*certain=*/write_ && (env_flags & MDB_NOSYNC) == 0);
  return mdb_status(mdb_txn_commit(t), "mdb_txn_commit");
}

Result<std::optional<std::string_view>> Txn::get(MDB_dbi dbi, std::string_view key) const {
  MDB_val k = to_val(key);
  MDB_val v;
  const int rc = mdb_get(txn_, dbi, &k, &v);
  if (rc == MDB_NOTFOUND) return std::optional<std::string_view>();
  if (rc != 0) return mdb_status(rc, "mdb_get");
  return std::optional<std::string_view>(from_val(v));
}

Status Txn::put(MDB_dbi dbi, std::string_view key, std::string_view value) {
  MDB_val k = to_val(key);
  MDB_val v = to_val(value);
  return mdb_status(mdb_put(txn_, dbi, &k, &v, 0), "mdb_put");
}

Result<bool> Txn::del(MDB_dbi dbi, std::string_view key) {
  MDB_val k = to_val(key);
  const int rc = mdb_del(txn_, dbi, &k, nullptr);
  if (rc == MDB_NOTFOUND) return false;
  if (rc != 0) return mdb_status(rc, "mdb_del");
  return true;
}

Result<Cursor> Cursor::open(const Txn& txn, MDB_dbi dbi) {
  MDB_cursor* c = nullptr;
  const int rc = mdb_cursor_open(txn.get(), dbi, &c);
  if (rc != 0) return mdb_status(rc, "mdb_cursor_open");
  return Cursor(c);
}

Cursor& Cursor::operator=(Cursor&& o) noexcept {
  if (this != &o) {
    if (c_ != nullptr) mdb_cursor_close(c_);
    c_ = o.c_;
    o.c_ = nullptr;
  }
  return *this;
}

Cursor::~Cursor() {
  if (c_ != nullptr) mdb_cursor_close(c_);
}

Result<bool> Cursor::load(int rc, MDB_val& k, MDB_val& v, std::string_view prefix,
                          std::string_view* ko, std::string_view* vo) {
  if (rc == MDB_NOTFOUND) return false;
  if (rc != 0) return mdb_status(rc, "mdb_cursor_get");
  const std::string_view key = from_val(k);
  if (!key.starts_with(prefix)) return false;
  if (ko != nullptr) *ko = key;
  if (vo != nullptr) *vo = from_val(v);
  return true;
}

Result<bool> Cursor::seek(std::string_view key, std::string_view prefix, std::string_view* k,
                          std::string_view* v) {
  MDB_val mk = to_val(key);
  MDB_val mv{0, nullptr};
  // LMDB rejects a zero-length key; the first entry is what an empty seek means.
  const int rc = mdb_cursor_get(c_, &mk, &mv, key.empty() ? MDB_FIRST : MDB_SET_RANGE);
  return load(rc, mk, mv, prefix, k, v);
}

Result<bool> Cursor::next(std::string_view prefix, std::string_view* k, std::string_view* v) {
  MDB_val mk{0, nullptr};
  MDB_val mv{0, nullptr};
  const int rc = mdb_cursor_get(c_, &mk, &mv, MDB_NEXT);
  return load(rc, mk, mv, prefix, k, v);
}

// --- key tree ---------------------------------------------------------------------------------

namespace key_tree {

Result<std::optional<std::string_view>> get(const Txn& txn, const MetaDb& db,
                                            std::string_view bucket, std::string_view key) {
  std::string ns = bucket_ns(bucket);
  MDB_dbi dbi = db.objects;
  std::string_view rel = key;
  while (rel.size() > chunk) {
    const std::string_view x = rel.substr(0, chunk);
    auto m = txn.get(dbi, marker(ns, x));
    if (!m.ok()) return m.status();
    if (!m->has_value()) return std::optional<std::string_view>();
    ns = group_ns(ns, x);
    dbi = db.object_groups;
    rel.remove_prefix(chunk);
  }
  return txn.get(dbi, cat(ns, rel));
}

Status put(Txn& txn, const MetaDb& db, std::string_view bucket, std::string_view key,
           std::string_view value) {
  std::string ns = bucket_ns(bucket);
  MDB_dbi dbi = db.objects;
  std::string_view rel = key;
  while (rel.size() > chunk) {
    const std::string_view x = rel.substr(0, chunk);
    OBJDIRECT_RETURN_IF_ERROR(txn.put(dbi, marker(ns, x), ""));
    ns = group_ns(ns, x);
    dbi = db.object_groups;
    rel.remove_prefix(chunk);
  }
  return txn.put(dbi, cat(ns, rel), value);
}

Result<bool> erase(Txn& txn, const MetaDb& db, std::string_view bucket, std::string_view key) {
  struct Level {
    MDB_dbi dbi;
    std::string ns;
    std::string_view x;  // the chunk whose marker leads to the next level
  };
  std::vector<Level> path;
  std::string ns = bucket_ns(bucket);
  MDB_dbi dbi = db.objects;
  std::string_view rel = key;
  while (rel.size() > chunk) {
    const std::string_view x = rel.substr(0, chunk);
    auto m = txn.get(dbi, marker(ns, x));
    if (!m.ok()) return m.status();
    if (!m->has_value()) return false;
    path.push_back(Level{dbi, ns, x});
    ns = group_ns(ns, x);
    dbi = db.object_groups;
    rel.remove_prefix(chunk);
  }
  auto existed = txn.del(dbi, cat(ns, rel));
  if (!existed.ok() || !*existed) return existed;
  // Remove markers whose group became empty, deepest first.
  while (!path.empty()) {
    auto c = Cursor::open(txn, db.object_groups);
    if (!c.ok()) return c.status();
    auto any = c->seek(ns, ns, nullptr, nullptr);
    if (!any.ok()) return any.status();
    if (*any) break;
    const Level& up = path.back();
    auto d = txn.del(up.dbi, marker(up.ns, up.x));
    if (!d.ok()) return d.status();
    ns = up.ns;
    path.pop_back();
  }
  return true;
}

Result<bool> empty(const Txn& txn, const MetaDb& db, std::string_view bucket) {
  auto c = Cursor::open(txn, db.objects);
  if (!c.ok()) return c.status();
  const std::string ns = bucket_ns(bucket);
  auto any = c->seek(ns, ns, nullptr, nullptr);
  if (!any.ok()) return any.status();
  return !*any;
}

}  // namespace key_tree

// --- iterator ---------------------------------------------------------------------------------

KeyTreeIterator::KeyTreeIterator(const Txn& txn, const MetaDb& db, std::string bucket)
    : txn_(txn), db_(db), bucket_(std::move(bucket)) {}

Status KeyTreeIterator::push(MDB_dbi dbi, std::string ns, std::string base) {
  auto c = Cursor::open(txn_, dbi);
  if (!c.ok()) return c.status();
  frames_.push_back(Frame{std::move(*c), dbi, std::move(ns), std::move(base), {}, {}, false});
  return Status();
}

// Makes the top frame point at an object: pops exhausted levels (advancing the parent past its
// marker) and descends into groups at their markers.
Status KeyTreeIterator::settle() {
  while (!frames_.empty()) {
    Frame& f = frames_.back();
    if (!f.valid) {
      frames_.pop_back();
      if (frames_.empty()) break;
      Frame& p = frames_.back();
      std::string_view k;
      auto r = p.cursor.next(p.ns, &k, &p.val);
      if (!r.ok()) return r.status();
      p.valid = *r;
      if (p.valid) p.rel = k.substr(p.ns.size());
      continue;
    }
    if (f.rel.size() == chunk + 1) {  // a group marker: descend to the group's first key
      const std::string_view x = f.rel.substr(0, chunk);
      std::string ns = group_ns(f.ns, x);
      std::string base = cat(f.base, x);
      OBJDIRECT_RETURN_IF_ERROR(push(db_.object_groups, std::move(ns), std::move(base)));
      Frame& g = frames_.back();
      std::string_view k;
      auto r = g.cursor.seek(g.ns, g.ns, &k, &g.val);
      if (!r.ok()) return r.status();
      g.valid = *r;
      if (g.valid) g.rel = k.substr(g.ns.size());
      continue;
    }
    break;
  }
  valid_ = !frames_.empty();
  if (valid_) key_ = cat(frames_.back().base, frames_.back().rel);
  return Status();
}

Status KeyTreeIterator::seek(std::string_view target) {
  frames_.clear();
  valid_ = false;
  OBJDIRECT_RETURN_IF_ERROR(push(db_.objects, bucket_ns(bucket_), ""));
  while (true) {
    Frame& f = frames_.back();
    const std::string_view rel = target.substr(f.base.size());
    std::string_view k;
    if (rel.size() <= chunk) {
      auto r = f.cursor.seek(cat(f.ns, rel), f.ns, &k, &f.val);
      if (!r.ok()) return r.status();
      f.valid = *r;
      if (f.valid) f.rel = k.substr(f.ns.size());
      break;
    }
    // Everything below this level's marker for rel[0:C] sorts after every key <= rel[0:C]; seek
    // to the marker and, if it exists, continue the seek inside its group.
    const std::string_view x = rel.substr(0, chunk);
    const std::string m = marker(f.ns, x);
    auto r = f.cursor.seek(m, f.ns, &k, &f.val);
    if (!r.ok()) return r.status();
    f.valid = *r;
    if (!f.valid) break;
    f.rel = k.substr(f.ns.size());
    if (k != m) break;
    std::string ns = group_ns(f.ns, x);
    std::string base = cat(f.base, x);
    OBJDIRECT_RETURN_IF_ERROR(push(db_.object_groups, std::move(ns), std::move(base)));
  }
  return settle();
}

Status KeyTreeIterator::next() {
  if (!valid_) return Status();
  Frame& f = frames_.back();
  std::string_view k;
  auto r = f.cursor.next(f.ns, &k, &f.val);
  if (!r.ok()) return r.status();
  f.valid = *r;
  if (f.valid) f.rel = k.substr(f.ns.size());
  return settle();
}

}  // namespace objdirect::storage::local
