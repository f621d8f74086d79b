// The gateway's ObjectReader (s3_internal.hpp): ranged, split and streamed upstream GETs.
#include <algorithm>
#include <cstring>
#include <thread>

#include "common/assert.hpp"
#include "s3/conditional.hpp"
#include "storage/s3/s3_internal.hpp"

namespace objdirect::storage::s3gw {

namespace {

// Pieces of a split pread are at least this large.
constexpr std::uint64_t get_piece_bytes_min = 1 << 20;
// The range of a reader's GET stream: the first covers 8 MiB past a sequential read, each next
// one twice as much, up to 1 GiB (a dropped reader wastes at most one window upstream).
constexpr std::uint64_t stream_window_bytes_min = 8ull << 20;
constexpr std::uint64_t stream_window_bytes_max = 1ull << 30;

// --- readers -------------------------------------------------------------------------------------

// A ranged GET's body written into a caller's span. Bytes beyond the span (the rest of a libcurl
// buffer) go to `carry`; once the span is full further data pauses the transfer.
struct RangeSink : Sink {
  std::string pinned_etag;
  std::uint64_t want_first = 0;  // the range's first byte
  bool whole_object = false;     // a 200 is acceptable (the range covers the object)
  std::byte* dst = nullptr;
  std::size_t cap = 0, filled = 0;
  std::string carry;
  bool paused = false;
  bool is_error = false;
  Status failure;
  Response head;  // status and headers (and the error body)

  bool start(const Response& r) override {
    head = r;
    is_error = false;  // a retry after an error reply starts afresh
    if (r.status == 206 || (r.status == 200 && whole_object)) {
      auto et = r.header("etag");
      if (et && objdirect::s3::unquote_etag(*et) != pinned_etag) {
        failure = Status(Errc::precondition_failed,
                         "the object changed upstream after it was opened (ETag " + pinned_etag +
                             " is no longer current); the read was stopped");
        return false;
      }
      if (r.status == 206) {
        auto cr = r.header("content-range").value_or("");
        std::uint64_t first = 0;
        const auto sp = cr.find(' '), dash = cr.find('-');
        if (sp == std::string::npos || dash == std::string::npos ||
            !parse_uint(std::string_view(cr).substr(sp + 1, dash - sp - 1), first) ||
            first != want_first) {
          failure = Status(Errc::io_error, "upstream answered range '" + cr +
                                               "' for bytes=" + std::to_string(want_first) + "-");
          return false;
        }
      }
      return true;
    }
    is_error = true;
    return true;
  }
  std::size_t data(const char* p, std::size_t n) override {
    if (is_error) {
      if (head.body.size() < s3_limits::error_body_bytes_max) head.body.append(p, n);
      return n;
    }
    if (filled == cap) {
      paused = true;
      return CURL_WRITEFUNC_PAUSE;
    }
    const std::size_t take = std::min(n, cap - filled);
    std::memcpy(dst + filled, p, take);
    filled += take;
    if (take < n) carry.assign(p + take, n - take);
    return n;
  }
};

class S3Reader final : public ObjectReader {
 public:
  S3Reader(std::shared_ptr<Core> core, std::string bucket, ObjectMeta meta,
           std::string version_query, SseCKeyHeaders sse)
      : core_(std::move(core)),
        bucket_(std::move(bucket)),
        meta_(std::move(meta)),
        version_query_(std::move(version_query)),
        sse_(std::move(sse)) {}
  ~S3Reader() override { close_stream(); }

  const ObjectMeta& meta() const override { return meta_; }

  // Reads [offset, offset+len) in one of three ways:
  //  - it continues the open GET stream (sequential reads): no new request;
  //  - large reads are split into parallel exact ranged GETs (RDMA staging buffers);
  //  - otherwise a read that does not follow the previous one is one exact ranged GET (random
  //    or single reads never open more than they need, and the connection stays reusable), and
  //    a read that follows the previous one opens a stream over a window past it (8 MiB, then
  //    doubling up to 1 GiB per stream) that the next sequential reads continue.
  // A stream that fails mid-body in a way the shared retry policy retries (a reset or cut
  // connection, a 5xx or throttling answer to the reopened range) resumes where it stopped:
  // the bytes that arrived stay (they are of the pinned ETag), and a new ranged GET with
  // If-Match starts at the first missing byte after the policy's back-off, within its
  // max_attempts per pread. An object changed meanwhile answers 412 there: never mixed bytes.
  Result<std::size_t> pread(std::span<std::byte> dst, std::uint64_t offset) override {
    if (offset >= meta_.size || dst.empty()) return std::size_t{0};
    const std::size_t len =
        static_cast<std::size_t>(std::min<std::uint64_t>(dst.size(), meta_.size - offset));
    dst = dst.first(len);
    const bool sequential = offset == last_end_;
    if (!(stream_ && stream_next_ == offset)) {
      close_stream();
      if ((len >= core_->opts.parallel_get_min_bytes && core_->opts.parallel_gets > 1) ||
          !sequential) {
        OBJDIRECT_RETURN_IF_ERROR(split_get(dst, offset));
        last_end_ = offset + len;
        return len;
      }
    }
    std::size_t total = 0;
    std::uint32_t attempt = 1;
    std::string reasons;
    while (total < len) {
      if (!stream_ || stream_next_ != offset + total) {
        close_stream();
        OBJDIRECT_RETURN_IF_ERROR(open_stream(offset + total, window_));
        window_ = std::min<std::uint64_t>(window_ * 2, stream_window_bytes_max);
      }
      auto got = continue_stream(dst.subspan(total));
      if (got.ok()) {
        total += *got;
        continue;
      }
      total += failed_got_;  // delivered before the failure: of the pinned ETag, kept
      retry::Retrier& retrier = core_->retrier();
      retrier.after_attempt(failed_reason_);
      if (!failed_reason_ || !retrier.may_retry(attempt)) {
        if (attempt == 1) return got.status();
        if (failed_reason_) reasons += ", " + *failed_reason_;
        return Status(got.code(), got.status().message() + retry::attempts_note(attempt, reasons));
      }
      reasons += (reasons.empty() ? "" : ", ") + *failed_reason_;
      core_->ctr.retries++;
      core_->ctr.stream_resumes++;
      retrier.sleep_before(attempt, std::nullopt);
      ++attempt;
    }
    last_end_ = offset + len;
    return len;
  }

  Result<std::vector<Extent>> extents(std::uint64_t, std::uint64_t) override {
    return std::vector<Extent>{};
  }

 private:
  struct Stream {
    std::unique_ptr<Conn> conn;
    curl_slist* list = nullptr;
    Transfer t;
    RangeSink sink;
    Request req;
    std::uint64_t end = 0;  // exclusive end of the stream's range
    bool done = false;
    CURLcode rc = CURLE_OK;
  };

  Request range_request(std::uint64_t first, std::uint64_t last) const {
    Request r = object_request("GET", bucket_, meta_.key);
    r.headers.emplace_back("range", "bytes=" + std::to_string(first) + "-" + std::to_string(last));
    r.headers.emplace_back("if-match", quote(meta_.etag));
    if (!version_query_.empty()) r.query = {{"versionId", version_query_}};
    add_sse_c_headers(r.headers, sse_);
    return r;
  }

  Status open_stream(std::uint64_t offset, std::uint64_t window) {
    core_->retrier().before_attempt();  // adaptive mode may wait for a token
    auto conn = core_->pool->acquire(true);
    if (!conn.ok()) return conn.status();
    stream_ = std::make_unique<Stream>();
    Stream& s = *stream_;
    s.conn = std::move(*conn);
    s.end = std::min<std::uint64_t>(meta_.size, offset + window);
    s.req = range_request(offset, s.end - 1);
    s.sink.pinned_etag = meta_.etag;
    s.sink.want_first = offset;
    s.sink.whole_object = offset == 0 && s.end == meta_.size;
    s.t.sink = &s.sink;
    const std::string tgt = core_->target(s.req);
    s.list = core_->prepare(*s.conn, s.req, s.t, tgt);
    core_->ctr.get_requests++;
    curl_multi_add_handle(s.conn->multi, s.conn->easy);
    stream_next_ = offset;
    return Status::Ok();
  }

  void close_stream() {
    if (!stream_) return;
    Stream& s = *stream_;
    curl_multi_remove_handle(s.conn->multi, s.conn->easy);
    curl_slist_free_all(s.list);
    // A stream stopped before its end cannot be reused (the rest of the body is on the wire).
    const bool clean = s.done && s.rc == CURLE_OK && s.sink.carry.empty() && stream_next_ == s.end;
    core_->pool->release(clean ? std::move(s.conn) : nullptr);
    stream_.reset();
  }

  Result<std::size_t> continue_stream(std::span<std::byte> dst) {
    Stream& s = *stream_;
    RangeSink& k = s.sink;
    k.dst = dst.data();
    k.cap = dst.size();
    k.filled = 0;
    if (!k.carry.empty()) {
      const std::size_t take = std::min(k.carry.size(), dst.size());
      std::memcpy(dst.data(), k.carry.data(), take);
      k.carry.erase(0, take);
      k.filled = take;
    }
    while (k.filled < k.cap && !s.done) {
      if (k.paused) {
        k.paused = false;
        curl_easy_pause(s.conn->easy, CURLPAUSE_CONT);  // may deliver the held data now
        continue;
      }
      int running = 0;
      if (curl_multi_perform(s.conn->multi, &running) != CURLM_OK) {
        s.done = true;
        s.rc = CURLE_FAILED_INIT;
        break;
      }
      if (!running) {
        s.done = true;
        int left = 0;
        while (CURLMsg* m = curl_multi_info_read(s.conn->multi, &left)) {
          if (m->msg == CURLMSG_DONE) s.rc = m->data.result;
        }
        break;
      }
      if (k.filled < k.cap && !k.paused) curl_multi_poll(s.conn->multi, nullptr, 0, 1000, nullptr);
    }
    const std::size_t got = k.filled;
    k.dst = nullptr;
    k.cap = k.filled = 0;
    failed_got_ = 0;
    failed_reason_.reset();
    if (s.done && (s.rc != CURLE_OK || !k.failure.ok() || k.is_error || !s.t.started)) {
      Status st = stream_failure(s);
      failed_reason_ = stream_retry_reason(s);
      // Bytes copied out before the failure passed the sink's checks (range start, pinned
      // ETag) and are kept by the caller's resume; a sink failure keeps none.
      failed_got_ = k.failure.ok() && !k.is_error ? got : 0;
      stream_next_ += failed_got_;
      close_stream();
      return st;
    }
    stream_next_ += got;
    if (got < dst.size() && stream_next_ != s.end) {  // short before the end of its range
      close_stream();
      failed_got_ = got;
      failed_reason_ = "short_body";
      return Status(Errc::io_error, "upstream object data ended early at byte " +
                                        std::to_string(stream_next_) + " of " +
                                        std::to_string(meta_.size));
    }
    if (s.done && k.carry.empty()) close_stream();  // the tail may still be in carry
    return got;
  }

  // Why a failed stream may be resumed (common/retry.hpp's reasons), or nullopt: an error
  // answer the policy retries (5xx, throttling; never 412, the object changed), a transport
  // failure it retries (reset, cut body, timeout). Not a sink failure (wrong range or ETag).
  std::optional<std::string> stream_retry_reason(const Stream& s) const {
    if (!s.sink.failure.ok()) return std::nullopt;
    if (s.sink.is_error) {
      auto [code, message, request_id] = objdirect::s3::parse_error_xml(s.sink.head.body);
      return retry::classify_status(static_cast<int>(s.sink.head.status), code);
    }
    if (s.rc != CURLE_OK) return Core::curl_retry_reason(s.rc);
    return std::nullopt;
  }

  Status stream_failure(Stream& s) {
    const std::string what = "GET " + core_->target(s.req);
    if (!s.t.started && s.t.resp.status != 0) {
      s.t.started = true;
      s.sink.start(s.t.resp);  // a reply without a body (a bare 412)
    }
    if (!s.sink.failure.ok()) return s.sink.failure;
    if (s.sink.is_error) {
      Status st = upstream_error(s.sink.head, what);
      if (st.code() == Errc::precondition_failed) {
        return Status(Errc::precondition_failed,
                      "the object changed upstream after it was opened (ETag " + meta_.etag +
                          " is no longer current); the read was stopped: " + st.message());
      }
      return st;
    }
    if (s.rc != CURLE_OK) return core_->transport_error(s.rc, what);
    return Status(Errc::io_error, "upstream " + what + ": no body");
  }

  // Reads dst (at offset) with up to parallel_gets concurrent ranged GETs, each straight into
  // its piece of dst.
  Status split_get(std::span<std::byte> dst, std::uint64_t offset) {
    std::uint64_t pieces = std::min<std::uint64_t>(
        core_->opts.parallel_gets, std::max<std::uint64_t>(1, dst.size() / get_piece_bytes_min));
    std::vector<std::unique_ptr<Conn>> conns;
    auto first = core_->pool->acquire(true);
    if (!first.ok()) return first.status();
    conns.push_back(std::move(*first));
    while (conns.size() < pieces) {
      auto more = core_->pool->acquire(false);  // never wait for extra pieces: no deadlock
      if (!more.ok()) break;
      conns.push_back(std::move(*more));
    }
    pieces = conns.size();
    const std::uint64_t piece = (dst.size() + pieces - 1) / pieces;
    std::vector<Status> results(pieces);
    auto run = [&](std::size_t i) {
      const std::uint64_t lo = i * piece;
      const std::uint64_t hi = std::min<std::uint64_t>(dst.size(), lo + piece);
      Conn& c = *conns[i];
      Request req = range_request(offset + lo, offset + hi - 1);
      RangeSink sink;
      sink.pinned_etag = meta_.etag;
      sink.want_first = offset + lo;
      sink.whole_object = offset + lo == 0 && offset + hi == meta_.size;
      sink.dst = dst.data() + lo;
      sink.cap = static_cast<std::size_t>(hi - lo);
      Transfer t;
      t.sink = &sink;
      const std::string tgt = core_->target(req);
      curl_slist* list = core_->prepare(c, req, t, tgt);
      core_->ctr.get_requests++;
      curl_multi_add_handle(c.multi, c.easy);
      CURLcode rc = Core::drive(c);
      curl_multi_remove_handle(c.multi, c.easy);
      curl_slist_free_all(list);
      if (!t.started && t.resp.status != 0) {
        t.started = true;
        sink.start(t.resp);  // a reply without a body (a bare 412)
      }
      const std::string what = "GET " + tgt;
      if (!sink.failure.ok()) {
        results[i] = sink.failure;
      } else if (sink.is_error) {
        Status st = upstream_error(sink.head, what);
        results[i] = st.code() == Errc::precondition_failed
                         ? Status(Errc::precondition_failed,
                                  "the object changed upstream after it was opened (ETag " +
                                      meta_.etag + " is no longer current): " + st.message())
                         : st;
      } else if (rc != CURLE_OK) {
        results[i] = core_->transport_error(rc, what);
      } else if (sink.filled != sink.cap || !sink.carry.empty() || sink.paused) {
        results[i] =
            Status(Errc::io_error, "upstream " + what + ": body of " + std::to_string(sink.filled) +
                                       " bytes, wanted " + std::to_string(sink.cap));
      }
      if (!results[i].ok() || rc != CURLE_OK) conns[i].reset();
    };
    std::vector<std::thread> threads;
    for (std::size_t i = 1; i < pieces; ++i) threads.emplace_back(run, i);
    run(0);
    for (auto& t : threads) t.join();
    for (auto& c : conns) {
      if (c) {
        core_->pool->release(std::move(c));
      } else {
        core_->pool->release(nullptr);
      }
    }
    for (auto& st : results)
      if (!st.ok()) return st;
    return Status::Ok();
  }

  std::shared_ptr<Core> core_;
  std::string bucket_;
  ObjectMeta meta_;
  std::string version_query_;  // the versionId of every GET ("": the latest)
  SseCKeyHeaders sse_;         // the SSE-C headers of every GET (none: not present)
  std::unique_ptr<Stream> stream_;
  std::uint64_t stream_next_ = 0;
  // Of the last failed continue_stream: bytes it delivered, and why it may be resumed.
  std::size_t failed_got_ = 0;
  std::optional<std::string> failed_reason_;
  std::uint64_t last_end_ = ~std::uint64_t{0};      // where the previous pread ended
  std::uint64_t window_ = stream_window_bytes_min;  // range of the next stream
};

}  // namespace

std::unique_ptr<ObjectReader> make_reader(std::shared_ptr<Core> core, std::string bucket,
                                          ObjectMeta meta, std::string version_id,
                                          SseCKeyHeaders sse) {
  return std::make_unique<S3Reader>(std::move(core), std::move(bucket), std::move(meta),
                                    std::move(version_id), std::move(sse));
}

}  // namespace objdirect::storage::s3gw
