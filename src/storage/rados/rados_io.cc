// RadosStore's blob writer and object reader (see rados_common.hpp, docs/scale-out.md).
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "storage/rados/rados_common.hpp"

namespace objdirect::storage::rados_impl {

// --- writer ---

// intent_oid: the index shard for the intent record (the key's shard when known).
RadosWriter::RadosWriter(std::shared_ptr<Conn> c, BucketRec b, std::string intent_oid)
    : c_(std::move(c)),
      bucket_(std::move(b)),
      blob_(BlobId::random()),
      intent_target_(std::move(intent_oid)) {
  if (intent_target_.empty()) intent_target_ = c_->blob_shard(bucket_, blob_);
}

RadosWriter::~RadosWriter() {
  // Not committed: delete what was written, then the intent (best effort; a crash leaves the
  // intent, and the GC deletes the blob once it expires).
  (void)wait_all();
  if (committed_ || !intent_oid_) return;
  if (c_->delete_stripes(blob_, c_->stripes_of(flushed_)).ok()) {
    librados::ObjectWriteOperation op;
    op.omap_rm_keys({intent_key(blob_)});
    c_->meta.operate(*intent_oid_, &op);
  }
}

Status RadosWriter::append(std::span<const std::byte> data) {
  if (!error_.ok()) return error_;
  if (data.size() >= zero_copy_min) {
    // Registered staging memory goes to the OSDs as is; wait before the caller reuses it.
    OBJDIRECT_RETURN_IF_ERROR(flush_pending());
    bufferlist bl;
    bl.push_back(ceph::buffer::create_static(
        unsigned(data.size()), const_cast<char*>(reinterpret_cast<const char*>(data.data()))));
    size_ += data.size();
    OBJDIRECT_RETURN_IF_ERROR(issue(std::move(bl)));
    return wait_all();
  }
  pending_.append(reinterpret_cast<const char*>(data.data()), unsigned(data.size()));
  size_ += data.size();
  if (pending_.length() >= write_chunk) return flush_pending();
  return Status();
}

// Everything written and acknowledged (for a striped commit).
Status RadosWriter::finish() {
  OBJDIRECT_RETURN_IF_ERROR(flush_pending());
  return wait_all();
}

// Puts the intent on `oid` (the shard of the key being committed), so that one compound op
// there can drop it. Order: add the new one, then remove the old one if it still exists; a
// crash in between only leaves two intents for the same uncommitted blob. If the old one is
// gone, the GC expired it and may be deleting the data: fail.
Status RadosWriter::move_intent(const std::string& oid) {
  if (!intent_oid_ || *intent_oid_ == oid) return Status();
  const std::string ikey = intent_key(blob_);
  librados::ObjectWriteOperation add;
  add.create(false);
  add.omap_set({{ikey, to_bl(encode_intent())}});
  int r = c_->meta.operate(oid, &add);
  if (r < 0) return rados_error(r, "intent record");
  librados::ObjectWriteOperation rm;
  int rv = 0;
  rm.omap_cmp({{ikey, {bufferlist(), LIBRADOS_CMPXATTR_OP_GT}}}, &rv);
  rm.omap_rm_keys({ikey});
  r = c_->meta.operate(*intent_oid_, &rm);
  if (r == -ECANCELED || r == -ENOENT) {
    librados::ObjectWriteOperation undo;
    undo.omap_rm_keys({ikey});
    c_->meta.operate(oid, &undo);
    intent_oid_.reset();
    return error_ = Status(Errc::io_error,
                           "the write took longer than intent_expire_s and its data was "
                           "collected");
  }
  if (r < 0) return rados_error(r, "intent record");
  intent_oid_ = oid;
  return Status();
}

Status RadosWriter::flush_pending() {
  if (pending_.length() == 0) return Status();
  bufferlist bl;
  bl.swap(pending_);
  return issue(std::move(bl));
}

// Sends bl (the bytes at offset flushed_) as writes split at stripe and write-size bounds.
Status RadosWriter::issue(bufferlist bl) {
  if (!intent_oid_) {
    // Before the first byte reaches the data pool: the intent makes the blob collectable if
    // this process dies before committing.
    const std::string oid = intent_target_;
    librados::ObjectWriteOperation op;
    op.create(false);
    op.omap_set({{intent_key(blob_), to_bl(encode_intent())}});
    const int r = c_->meta.operate(oid, &op);
    if (r < 0) return error_ = rados_error(r, "intent record");
    intent_oid_ = oid;
  }
  std::uint64_t done = 0;
  const std::uint64_t total = bl.length();
  while (done < total) {
    const std::uint64_t off = flushed_;
    const std::uint64_t in_stripe = off % c_->stripe;
    const std::uint64_t n =
        std::min({total - done, c_->stripe - in_stripe, rados_limits::write_bytes_max});
    auto piece = std::make_unique<bufferlist>();
    piece->substr_of(bl, unsigned(done), unsigned(n));
    auto* comp = librados::Rados::aio_create_completion();
    const int r =
        c_->data.aio_write(stripe_oid(blob_, off / c_->stripe), comp, *piece, n, in_stripe);
    if (r < 0) {
      comp->release();
      return error_ = rados_error(r, "stripe write");
    }
    inflight_.push_back({comp, std::move(piece)});
    done += n;
    flushed_ += n;
    if (inflight_.size() >= std::max<std::uint32_t>(1, c_->opts.inflight_writes)) {
      OBJDIRECT_RETURN_IF_ERROR(wait_one());
    }
  }
  return Status();
}

Status RadosWriter::wait_one() {
  auto [comp, bl] = std::move(inflight_.front());
  inflight_.pop_front();
  comp->wait_for_complete();
  const int r = comp->get_return_value();
  comp->release();
  if (r < 0 && error_.ok()) error_ = rados_error(r, "stripe write");
  return error_;
}

Status RadosWriter::wait_all() {
  while (!inflight_.empty()) (void)wait_one();
  return error_;
}

// --- reader ---

RadosReader::RadosReader(std::shared_ptr<Conn> c, ObjectVal v)
    : c_(std::move(c)), v_(std::move(v)) {
  std::uint64_t at = 0;
  for (const Segment& s : v_.rec.segments) {
    starts_.push_back(at);
    at += s.size;
  }
}

Result<std::size_t> RadosReader::pread(std::span<std::byte> dst, std::uint64_t offset) {
  const std::uint64_t size = v_.rec.meta.size;
  if (offset >= size || dst.empty()) return std::size_t{0};
  const std::uint64_t len = std::min<std::uint64_t>(dst.size(), size - offset);
  Batch cur;
  if (ahead_.len > 0 && ahead_.off == offset && ahead_.len == len) {
    cur = std::move(ahead_);
    ahead_ = Batch{};
  } else {
    discard(ahead_);
    cur = issue(offset, len);
  }
  const bool sequential = offset == last_end_;
  last_end_ = offset + len;
  if (sequential && len >= prefetch_min && offset + len < size && cur.st.ok()) {
    ahead_ = issue(offset + len, std::min(len, size - (offset + len)));
  }
  Status st = collect(cur, reinterpret_cast<char*>(dst.data()));
  if (!st.ok()) {
    discard(ahead_);
    last_end_ = UINT64_MAX;
    return st;
  }
  return std::size_t(len);
}

Result<std::vector<Extent>> RadosReader::extents(std::uint64_t, std::uint64_t) {
  return std::vector<Extent>{};
}

// Issues the reads of [off, off + len) (within the object).
RadosReader::Batch RadosReader::issue(std::uint64_t off, std::uint64_t len) {
  Batch b;
  b.off = off;
  b.len = len;
  std::size_t seg = std::upper_bound(starts_.begin(), starts_.end(), off) - starts_.begin() - 1;
  std::uint64_t pos = off;
  while (pos < off + len && b.st.ok()) {
    const Segment& s = v_.rec.segments[seg];
    const std::uint64_t in_seg = pos - starts_[seg];
    if (in_seg == s.size) {
      ++seg;
      continue;
    }
    std::uint64_t n = std::min(s.size - in_seg, off + len - pos);
    Piece& p = b.pieces.emplace_back();
    p.rel_off = pos - off;
    if (is_inline(s.blob)) {
      p.src = v_.inline_data.data() + in_seg;
    } else {
      const std::uint64_t in_stripe = in_seg % c_->stripe;
      n = std::min(n, c_->stripe - in_stripe);
      p.comp = librados::Rados::aio_create_completion();
      const int r =
          c_->data.aio_read(stripe_oid(s.blob, in_seg / c_->stripe), p.comp, &p.bl, n, in_stripe);
      if (r < 0) {
        p.comp->release();
        b.pieces.pop_back();
        b.st = rados_error(r, "stripe read");
        break;
      }
    }
    p.len = n;
    pos += n;
  }
  return b;
}

// Waits for a batch and copies it to dst (the one copy on the read path: librados owns the
// receive buffers).
Status RadosReader::collect(Batch& b, char* dst) {
  Status st = b.st;
  for (Piece& p : b.pieces) {
    int r = 0;
    if (p.comp != nullptr) {
      p.comp->wait_for_complete();
      r = p.comp->get_return_value();
      p.comp->release();
      p.comp = nullptr;
    }
    if (!st.ok()) continue;
    if (r < 0) {
      st = r == -ENOENT ? Status(Errc::io_error,
                                 "object data is gone (replaced longer ago than the GC grace "
                                 "period, or lost)")
                        : rados_error(r, "stripe read");
    } else if (p.src != nullptr) {
      std::memcpy(dst + p.rel_off, p.src, p.len);
    } else if (p.bl.length() != p.len) {
      st = Status(Errc::corrupt, "short stripe read");
    } else {
      p.bl.begin().copy(unsigned(p.len), dst + p.rel_off);
    }
  }
  b = Batch{};
  return st;
}

// Waits for a batch's reads (librados writes into its bufferlists) and drops them.
void RadosReader::discard(Batch& b) {
  for (Piece& p : b.pieces) {
    if (p.comp != nullptr) {
      p.comp->wait_for_complete();
      p.comp->release();
    }
  }
  b = Batch{};
}

}  // namespace objdirect::storage::rados_impl
