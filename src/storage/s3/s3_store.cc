// S3Store (see s3_store.hpp): an ObjectStore on an upstream S3 service through libcurl.
#include "storage/s3/s3_store.hpp"

#include <curl/curl.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "auth/sigv4.hpp"
#include "common/assert.hpp"
#include "common/checksum.hpp"
#include "common/limits.hpp"
#include "common/parallel.hpp"
#include "common/retry.hpp"
#include "common/time.hpp"
#include "common/uri.hpp"
#include "s3/conditional.hpp"
#include "s3/documents.hpp"
#include "s3/encoded_words.hpp"
#include "s3/xml.hpp"

namespace objdirect::storage {
namespace {

using Clock = std::chrono::steady_clock;
using Headers = std::vector<std::pair<std::string, std::string>>;  // lower-case names

// Bodies up to this size are signed with their SHA-256; larger ones go as UNSIGNED-PAYLOAD
// (hashing 8 MiB costs more than the loopback transfer itself).
constexpr std::size_t kSignedPayloadBytesMax = 256 * 1024;
constexpr long kRecvBufferBytes = 512 * 1024;
constexpr long kUploadBufferBytes = 1 << 20;
// Pieces of a split pread are at least this large.
constexpr std::uint64_t kGetPieceBytesMin = 1 << 20;
// The range of a reader's GET stream: the first covers 8 MiB past a sequential read, each next
// one twice as much, up to 1 GiB (a dropped reader wastes at most one window upstream).
constexpr std::uint64_t kStreamWindowMin = 8ull << 20;
constexpr std::uint64_t kStreamWindowMax = 1ull << 30;

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n'))
    s.remove_suffix(1);
  return std::string(s);
}

std::string quote(std::string_view s) {
  return "\"" + std::string(s) + "\"";
}

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::int64_t ns_of(SysTime t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

template <class T>
bool parse_uint(std::string_view s, T& out) {
  s = std::string_view(s.data(), s.size());
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

struct CurlGlobal {
  CurlGlobal() { curl_global_init(CURL_GLOBAL_ALL); }
};

// --- counters --------------------------------------------------------------------------------

struct Counters {
  std::atomic<std::uint64_t> requests{0}, get_requests{0}, connections_created{0},
      connections_in_use{0}, connections_peak{0}, pool_waits_timed_out{0}, spooled_to_file{0},
      multipart_commits{0}, retries{0}, capability_probes{0}, gateway_checked_conditions{0},
      kept_part_checksums_used{0};
};

// --- connection pool ---------------------------------------------------------------------------

// One pooled upstream connection: an easy handle driven through its own multi handle, which owns
// the keep-alive connection cache (so the connection survives between requests, and a reader can
// leave a GET half-read and continue it later).
struct Conn {
  CURL* easy = nullptr;
  CURLM* multi = nullptr;
  ~Conn() {
    if (easy) curl_easy_cleanup(easy);
    if (multi) curl_multi_cleanup(multi);
  }
};

// A bounded pool of Conns. Thread-safe.
class Pool {
 public:
  Pool(std::uint32_t max, std::chrono::milliseconds wait, Counters& ctr)
      : max_(max), wait_(wait), ctr_(ctr) {}

  // A free connection; waits up to the pool wait (wait=true) or not at all. slow_down when none.
  Result<std::unique_ptr<Conn>> acquire(bool wait) {
    std::unique_lock lk(mu_);
    auto ready = [&] { return !idle_.empty() || created_ < max_; };
    if (!ready()) {
      if (!wait || !cv_.wait_for(lk, wait_, ready)) {
        if (wait) ctr_.pool_waits_timed_out++;
        return Status(Errc::slow_down, "all " + std::to_string(max_) +
                                           " upstream connections are busy; retry later");
      }
    }
    ctr_.connections_in_use++;
    if (!idle_.empty()) {
      auto c = std::move(idle_.back());
      idle_.pop_back();
      return c;
    }
    ++created_;
    if (created_ > ctr_.connections_peak) ctr_.connections_peak = created_;
    lk.unlock();
    auto c = std::make_unique<Conn>();
    c->easy = curl_easy_init();
    c->multi = curl_multi_init();
    ctr_.connections_created++;
    if (!c->easy || !c->multi) {
      release(nullptr);
      return Status(Errc::internal, "curl_easy_init failed");
    }
    return c;
  }

  // Returns a connection (nullptr: drop it, freeing its slot).
  void release(std::unique_ptr<Conn> c) {
    std::lock_guard lk(mu_);
    ctr_.connections_in_use--;
    if (c) {
      idle_.push_back(std::move(c));
    } else {
      --created_;
    }
    cv_.notify_one();
  }

 private:
  const std::uint32_t max_;
  const std::chrono::milliseconds wait_;
  Counters& ctr_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Conn>> idle_;
  std::uint32_t created_ = 0;
};

// --- requests ----------------------------------------------------------------------------------

// The bytes of a request body: memory, or a range of a file.
struct Body {
  const char* mem = nullptr;
  int fd = -1;
  std::uint64_t offset = 0, length = 0;
  std::uint64_t pos = 0;  // read position within [0, length)
  int error = 0;
};

struct Request {
  std::string method = "GET";
  std::string bucket, key;  // bucket empty: the service; key empty: the bucket
  bool has_key = false;
  Headers query;  // decoded names and values
  Headers headers;
  std::optional<Body> body;
  std::string payload_hash;  // empty: computed from a memory body, or UNSIGNED-PAYLOAD
  // Retry policy (common/retry.hpp) for this request: `retry` off sends it once; `idempotent`
  // off (CompleteMultipartUpload) retries it only after an error answer, never after a lost
  // one (the upstream may have completed it). xml_reply: a 2xx body that does not parse as XML
  // (truncated) is retried.
  bool retry = true;
  bool idempotent = true;
  bool xml_reply = false;
};

// A request on the object `key` of `bucket` (has_key: the target is /bucket/key).
Request object_request(std::string method, std::string_view bucket, std::string_view key) {
  Request r;
  r.method = std::move(method);
  r.bucket = std::string(bucket);
  r.key = std::string(key);
  r.has_key = true;
  return r;
}

struct Response {
  long status = 0;
  Headers headers;
  std::string body;
  std::string retry_note;  // after retries: retry::attempts_note, appended to the error
  std::optional<std::string> header(std::string_view name) const {
    for (const auto& [k, v] : headers)
      if (k == name) return v;
    return std::nullopt;
  }
};

// How a transfer's response body is consumed.
struct Sink {
  virtual ~Sink() = default;
  // Called once when the first body byte (or the end) arrives, with the status and headers.
  // Returning false aborts the transfer.
  virtual bool start(const Response& head) = 0;
  // Body bytes; returns n, or CURL_WRITEFUNC_PAUSE, or 0 to abort.
  virtual std::size_t data(const char* p, std::size_t n) = 0;
};

// Bounded collection into Response::body.
struct StringSink : Sink {
  Response* r;
  std::size_t max;
  bool overflow = false;
  StringSink(Response* resp, std::size_t m) : r(resp), max(m) {}
  bool start(const Response&) override { return true; }
  std::size_t data(const char* p, std::size_t n) override {
    if (r->body.size() + n > max) {
      overflow = true;
      return 0;
    }
    r->body.append(p, n);
    return n;
  }
};

// The state libcurl's callbacks see during one transfer.
struct Transfer {
  Response resp;
  Sink* sink = nullptr;
  bool started = false;
  bool aborted_by_sink = false;
  Body* body = nullptr;
};

size_t header_cb(char* p, size_t size, size_t n, void* ud) {
  auto* t = static_cast<Transfer*>(ud);
  std::string_view line(p, size * n);
  if (line.starts_with("HTTP/")) {
    t->resp.headers.clear();  // a 100 Continue before the real status
    auto sp = line.find(' ');
    if (sp != std::string_view::npos) {
      long s = 0;
      std::from_chars(line.data() + sp + 1, line.data() + line.size(), s);
      t->resp.status = s;
    }
    return size * n;
  }
  auto colon = line.find(':');
  if (colon != std::string_view::npos) {
    t->resp.headers.emplace_back(lower(trim(line.substr(0, colon))), trim(line.substr(colon + 1)));
  }
  return size * n;
}

size_t write_cb(char* p, size_t size, size_t n, void* ud) {
  auto* t = static_cast<Transfer*>(ud);
  if (!t->started) {
    t->started = true;
    if (!t->sink->start(t->resp)) {
      t->aborted_by_sink = true;
      return 0;
    }
  }
  auto r = t->sink->data(p, size * n);
  if (r == 0 && size * n != 0) t->aborted_by_sink = true;
  return r;
}

size_t read_cb(char* dst, size_t size, size_t n, void* ud) {
  auto* b = static_cast<Body*>(ud);
  const std::size_t want =
      static_cast<std::size_t>(std::min<std::uint64_t>(size * n, b->length - b->pos));
  if (want == 0) return 0;
  if (b->mem) {
    std::memcpy(dst, b->mem + b->pos, want);
    b->pos += want;
    return want;
  }
  const ssize_t got = ::pread(b->fd, dst, want, static_cast<off_t>(b->offset + b->pos));
  if (got <= 0) {
    b->error = got < 0 ? errno : EIO;
    return CURL_READFUNC_ABORT;
  }
  b->pos += static_cast<std::uint64_t>(got);
  return static_cast<size_t>(got);
}

int seek_cb(void* ud, curl_off_t offset, int origin) {
  auto* b = static_cast<Body*>(ud);
  if (origin != SEEK_SET || offset < 0 || static_cast<std::uint64_t>(offset) > b->length)
    return CURL_SEEKFUNC_CANTSEEK;
  b->pos = static_cast<std::uint64_t>(offset);
  return CURL_SEEKFUNC_OK;
}

// The upstream's <Error> body (or its status, for bodiless replies) as a Status.
Status upstream_error(const Response& r, std::string_view what) {
  auto [code, message, request_id] = s3::parse_error_xml(r.body);
  if (request_id.empty()) request_id = r.header("x-amz-request-id").value_or("");
  Errc errc = Errc::internal;
  if (!code.empty()) errc = from_s3_code(code);
  if (code.empty() || (errc == Errc::internal && code != "InternalError")) {
    // A busy upstream (503) makes our client back off and retry; other upstream 5xx mean the
    // upstream is not serving.
    errc = r.status == 503 ? Errc::slow_down : from_http_status(r.status);
    if (errc == Errc::internal && r.status >= 500) errc = Errc::unavailable;
  }
  std::string msg = "upstream " + std::string(what) + ": HTTP " + std::to_string(r.status);
  if (!code.empty()) msg += " " + code;
  if (!message.empty()) msg += ": " + message;
  if (!request_id.empty()) msg += " (upstream request id " + request_id + ")";
  return Status(errc, std::move(msg) + r.retry_note);
}

// --- the shared core ---------------------------------------------------------------------------

struct Core {
  S3StoreOptions opts;
  std::string base;       // "http://host:port"
  std::string authority;  // "host:port" as the Host header
  Counters ctr;
  std::unique_ptr<Pool> pool;
  std::unique_ptr<retry::Retrier> retrier_ptr;  // from opts.retry, set by open_s3_store
  retry::Retrier& retrier() { return *retrier_ptr; }
  std::mutex templates_mu;
  std::unordered_map<std::string, UploadInfo> templates;  // upload id -> create_upload's info
  std::deque<std::string> template_order;
  // Part checksums the gateway keeps itself (upload id -> part number -> upstream ETag and the
  // checksums the S3 layer computed), for upstreams whose ListParts does not return them. Only
  // for uploads with a template; at most kept_parts_max parts in all (under templates_mu).
  struct KeptPart {
    std::string etag;
    ChecksumMap sums;
  };
  std::unordered_map<std::string, std::map<std::uint32_t, KeptPart>> kept_parts;
  std::size_t kept_parts_count = 0;

  // What the upstream was found to do (probed once, at the first conditional write; see
  // conditions_checked_upstream). nullopt: not known yet.
  std::mutex caps_mu;
  std::optional<bool> put_conditions, complete_conditions;
  bool put_if_match_unquoted = false;  // found by the PutObject probe
  // Striped per-key locks: while the gateway checks a write condition itself, the check and the
  // write of one key through this gateway do not interleave with another such write.
  static constexpr std::size_t kKeyLockStripes = 4096;
  std::array<std::mutex, kKeyLockStripes> key_locks;
  std::mutex& key_lock(std::string_view bucket, std::string_view key) {
    const std::size_t h = std::hash<std::string>{}(std::string(bucket) + '/' + std::string(key));
    return key_locks[h % kKeyLockStripes];
  }

  std::string target(const Request& r) const {
    std::string t = "/";
    if (!r.bucket.empty()) {
      t += uri_encode(r.bucket, true);
      if (r.has_key) t += "/" + uri_encode(r.key, false);
    }
    for (std::size_t i = 0; i < r.query.size(); ++i) {
      t += i == 0 ? '?' : '&';
      t += uri_encode(r.query[i].first, true);
      if (!r.query[i].second.empty() || r.query[i].first != "uploads")
        t += "=" + uri_encode(r.query[i].second, true);
    }
    return t;
  }

  // Sets up conn for `r` (method, URL, signed headers, body) and returns the curl header list.
  curl_slist* prepare(Conn& c, Request& r, Transfer& t, const std::string& tgt) {
    CURL* e = c.easy;
    curl_easy_reset(e);
    const std::string url = base + tgt;
    curl_easy_setopt(e, CURLOPT_URL, url.c_str());
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(opts.connect_timeout_ms));
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, static_cast<long>(opts.low_speed_time_s));
    curl_easy_setopt(e, CURLOPT_BUFFERSIZE, kRecvBufferBytes);
    curl_easy_setopt(e, CURLOPT_UPLOAD_BUFFERSIZE, kUploadBufferBytes);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, header_cb);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, &t);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, write_cb);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L);
    const bool body = r.body.has_value();
    if (r.method == "HEAD") {
      curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    } else if (r.method == "PUT" || r.method == "POST") {
      if (!body) r.body = Body{"", -1, 0, 0, 0, 0};
      curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
      curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(r.body->length));
      curl_easy_setopt(e, CURLOPT_READFUNCTION, read_cb);
      curl_easy_setopt(e, CURLOPT_READDATA, &*r.body);
      curl_easy_setopt(e, CURLOPT_SEEKFUNCTION, seek_cb);
      curl_easy_setopt(e, CURLOPT_SEEKDATA, &*r.body);
      if (r.method == "POST") curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "POST");
      t.body = &*r.body;
    } else if (r.method != "GET") {
      curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, r.method.c_str());
    }
    std::string hash = r.payload_hash;
    if (hash.empty()) {
      if (!r.body || r.body->length == 0) {
        hash = std::string(sigv4::kEmptySha256);
      } else if (r.body->mem && r.body->length <= kSignedPayloadBytesMax) {
        hash = sha256_hex(std::string_view(r.body->mem, r.body->length));
      } else {
        hash = std::string(sigv4::kUnsignedPayload);
      }
    }
    sigv4::RequestView v;
    v.method = r.method;
    v.target = tgt;
    v.headers = r.headers;
    v.headers.emplace_back("host", authority);
    const auto now = std::chrono::system_clock::now();
    v.headers.emplace_back("x-amz-date", amz_date(now));
    v.headers.emplace_back("x-amz-content-sha256", hash);
    if (!opts.session_token.empty())
      v.headers.emplace_back("x-amz-security-token", opts.session_token);
    const std::string auth =
        sigv4::sign(v, {opts.access_key, opts.secret_key}, opts.region, "s3", now);
    curl_slist* list = nullptr;
    // libcurl drops a "name:" header with an empty value, which then fails the signature
    // (radosgw: 403 for x-amz-meta-empty ""); "name;" sends it empty.
    for (const auto& [k, val] : v.headers)
      list = curl_slist_append(list, (val.empty() ? k + ";" : k + ": " + val).c_str());
    list = curl_slist_append(list, ("authorization: " + auth).c_str());
    list = curl_slist_append(list, "Expect:");  // no 100-continue round trip
    list = curl_slist_append(list, "Accept:");
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, list);
    ctr.requests++;
    return list;
  }

  // Drives conn's transfer until it ends; returns the curl result.
  static CURLcode drive(Conn& c) {
    int running = 1;
    while (running) {
      CURLMcode mc = curl_multi_perform(c.multi, &running);
      if (mc != CURLM_OK) return CURLE_FAILED_INIT;
      if (!running) break;
      curl_multi_poll(c.multi, nullptr, 0, 1000, nullptr);
    }
    int left = 0;
    CURLcode rc = CURLE_OK;
    while (CURLMsg* m = curl_multi_info_read(c.multi, &left)) {
      if (m->msg == CURLMSG_DONE) rc = m->data.result;
    }
    return rc;
  }

  Status transport_error(CURLcode rc, std::string_view what) const {
    const std::string msg =
        "upstream " + base + " " + std::string(what) + ": " + curl_easy_strerror(rc);
    switch (rc) {
      case CURLE_COULDNT_CONNECT:
      case CURLE_COULDNT_RESOLVE_HOST:
      case CURLE_COULDNT_RESOLVE_PROXY:
      case CURLE_OPERATION_TIMEDOUT:
      case CURLE_SEND_ERROR:
      case CURLE_RECV_ERROR:
      case CURLE_GOT_NOTHING:
      case CURLE_SSL_CONNECT_ERROR:
      case CURLE_PARTIAL_FILE:
        return Status(Errc::unavailable, msg + " (upstream unreachable or stalled)");
      default:
        return Status(Errc::io_error, msg);
    }
  }

  // One complete request on a pooled connection, under the retry policy shared with the client
  // library (common/retry.hpp; AWS_MAX_ATTEMPTS / AWS_RETRY_MODE or the upstream profile's
  // max_attempts / retry_mode): a retryable failure (retry::classify_status, a refused or reset
  // connection, a cut body, a truncated XML reply) is sent again after the back-off (Retry-After
  // honoured) while attempts remain. With a caller's sink, only error replies and failures
  // before any body byte reached the sink are retried (a body cut after data reached the sink
  // is returned: the caller's reader fails and the gateway's client retries). The final error
  // names the attempts.
  // `attempts_out`, when given, receives the number of attempts made.
  Result<Response> perform(Request r, Sink* sink = nullptr,
                           std::size_t body_max = s3_limits::xml_reply_bytes_max,
                           std::uint32_t* attempts_out = nullptr) {
    std::string reasons;
    for (std::uint32_t attempt = 1;; ++attempt) {
      if (attempts_out) *attempts_out = attempt;
      if (r.body) r.body->pos = 0;
      bool started = false;
      std::optional<std::string> reason;
      if (r.retry) retrier().before_attempt();
      auto resp = perform_once(r, sink, body_max, started, reason);
      // With a sink, only an error reply (the sink saw no data) or a failure before the first
      // body byte may be retried.
      const bool error_reply = resp.ok() && (resp->status < 200 || resp->status > 299);
      if (!r.retry || (sink && started && !error_reply)) reason.reset();
      if (reason && !r.idempotent && !(resp.ok() && resp->status >= 400)) reason.reset();
      if (r.retry) retrier().after_attempt(reason);
      if (!reason || !retrier().may_retry(attempt)) {
        if (attempt == 1) return resp;
        if (reason) reasons += ", " + *reason;
        const std::string note = retry::attempts_note(attempt, reasons);
        if (!resp.ok()) return Status(resp.code(), resp.status().message() + note);
        resp->retry_note = note;
        return resp;
      }
      ctr.retries++;
      reasons += (reasons.empty() ? "" : ", ") + *reason;
      std::optional<std::chrono::milliseconds> after;
      if (resp.ok()) {
        if (auto h = resp->header("retry-after")) {
          after = retry::parse_retry_after(*h, std::chrono::system_clock::now());
        }
      }
      retrier().sleep_before(attempt, after);
    }
  }

  // The retry reason of a transport failure (the names of common/retry.hpp).
  static std::optional<std::string> curl_retry_reason(CURLcode rc) {
    switch (rc) {
      case CURLE_COULDNT_CONNECT:
        return std::string("connection_refused");
      case CURLE_OPERATION_TIMEDOUT:
        return std::string("timeout");
      case CURLE_PARTIAL_FILE:
        return std::string("short_body");
      case CURLE_SEND_ERROR:
      case CURLE_RECV_ERROR:
      case CURLE_GOT_NOTHING:
        return std::string("connection_reset");
      default:
        return std::nullopt;
    }
  }

  Result<Response> perform_once(Request& r, Sink* sink, std::size_t body_max, bool& started,
                                std::optional<std::string>& reason) {
    auto conn = pool->acquire(true);
    if (!conn.ok()) return conn.status();
    Transfer t;
    StringSink def(&t.resp, body_max);
    t.sink = sink ? sink : &def;
    const std::string tgt = target(r);
    curl_slist* list = prepare(**conn, r, t, tgt);
    curl_multi_add_handle((*conn)->multi, (*conn)->easy);
    CURLcode rc = drive(**conn);
    curl_multi_remove_handle((*conn)->multi, (*conn)->easy);
    curl_slist_free_all(list);
    const bool reusable = rc == CURLE_OK;
    pool->release(reusable ? std::move(*conn) : nullptr);
    started = t.started;
    const std::string what = r.method + " " + tgt;
    if (t.body && t.body->error != 0)
      return Status(Errc::io_error,
                    "reading the spool file: " + std::string(strerror(t.body->error)));
    if (rc != CURLE_OK && !(rc == CURLE_WRITE_ERROR && t.aborted_by_sink && sink)) {
      if (rc == CURLE_WRITE_ERROR && def.overflow)
        return Status(Errc::io_error, "upstream " + what + ": reply larger than " +
                                          std::to_string(body_max) + " bytes");
      reason = curl_retry_reason(rc);
      return transport_error(rc, what);
    }
    if (!t.started && t.sink != &def) t.sink->start(t.resp);
    if (t.resp.status < 200 || t.resp.status > 299) {
      auto [code, message, request_id] = s3::parse_error_xml(t.resp.body);
      reason = retry::classify_status(static_cast<int>(t.resp.status), code);
    } else if (r.xml_reply && !sink && !t.resp.body.empty()) {
      const auto shape = objdirect::s3::reply_shape(t.resp.body);
      if (!shape.well_formed) {
        reason = "truncated_xml";
      } else if (!shape.error_code.empty()) {
        reason = retry::classify_status(0, shape.error_code);
      }
    }
    return std::move(t.resp);
  }

  // perform() that also maps a non-2xx status to the upstream's error (perform retries under the
  // shared policy; the final error names the attempts). `attempts_out`,
  // when given, receives the number of attempts made.
  Result<Response> call(Request r, std::uint32_t* attempts_out = nullptr) {
    const std::string what = r.method + " " + target(r);
    auto resp = perform(std::move(r), nullptr, s3_limits::xml_reply_bytes_max, attempts_out);
    if (!resp.ok()) return resp.status();
    if (resp->status < 200 || resp->status > 299) {
      Status st = upstream_error(*resp, what);
      return Status(st.code(), st.message() + resp->retry_note);
    }
    return resp;
  }

  void remember_template(const std::string& id, UploadInfo info) {
    std::lock_guard lk(templates_mu);
    // The order deque may name ids already forgotten (completed, aborted): skip those.
    while (templates.size() >= opts.upload_templates && !template_order.empty()) {
      templates.erase(template_order.front());
      drop_kept_parts(template_order.front());
      template_order.pop_front();
    }
    if (template_order.size() > 2 * opts.upload_templates) {
      std::erase_if(template_order, [&](const std::string& k) { return !templates.count(k); });
    }
    templates[id] = std::move(info);
    template_order.push_back(id);
  }
  std::optional<UploadInfo> find_template(const std::string& id) {
    std::lock_guard lk(templates_mu);
    auto it = templates.find(id);
    if (it == templates.end()) return std::nullopt;
    return it->second;
  }
  void forget_template(const std::string& id) {
    std::lock_guard lk(templates_mu);
    templates.erase(id);  // the order deque keeps the id until it ages out; erase() tolerates it
    drop_kept_parts(id);
  }
  void drop_kept_parts(const std::string& id) {  // under templates_mu
    auto it = kept_parts.find(id);
    if (it == kept_parts.end()) return;
    kept_parts_count -= it->second.size();
    kept_parts.erase(it);
  }
  // Keeps a committed part's checksums (only for an upload this process created).
  void keep_part(const std::string& id, std::uint32_t number, const std::string& etag,
                 const ChecksumMap& sums) {
    if (sums.empty()) return;
    std::lock_guard lk(templates_mu);
    if (!templates.count(id)) return;
    auto& parts = kept_parts[id];
    auto it = parts.find(number);
    if (it == parts.end()) {
      if (kept_parts_count >= s3_limits::kept_parts_max) return;
      ++kept_parts_count;
      it = parts.emplace(number, KeptPart{}).first;
    }
    it->second = KeptPart{etag, sums};
  }
  // The kept checksums of a part, if its ETag is still the one they were kept for.
  std::optional<ChecksumMap> kept_part(const std::string& id, std::uint32_t number,
                                       const std::string& etag) {
    std::lock_guard lk(templates_mu);
    auto u = kept_parts.find(id);
    if (u == kept_parts.end()) return std::nullopt;
    auto p = u->second.find(number);
    if (p == u->second.end() || p->second.etag != etag) return std::nullopt;
    return p->second.sums;
  }
};

// Headers that carry an object's metadata on PutObject / CreateMultipartUpload / CopyObject.
// The standard headers stored with an object, and the ObjectMeta field that keeps each: what a
// write sends upstream and a HEAD reads back.
using MetaHeader = std::pair<std::string_view, std::string ObjectMeta::*>;
constexpr MetaHeader kMetaHeaders[] = {
    {"content-type", &ObjectMeta::content_type},
    {"content-encoding", &ObjectMeta::content_encoding},
    {"content-disposition", &ObjectMeta::content_disposition},
    {"content-language", &ObjectMeta::content_language},
    {"cache-control", &ObjectMeta::cache_control},
    {"expires", &ObjectMeta::expires},
};

// The object's full checksums, kept by the gateway in upstream user metadata under this prefix
// (for upstreams that store no checksums, or only with headers the gateway does not send:
// radosgw 16, moto 5.2). Read back when the upstream's HEAD has no native checksum; never shown
// to clients as metadata.
constexpr std::string_view kKeptChecksumMeta = "x-amz-meta-objdirect-checksum-";

void add_meta_headers(Headers& h, const ObjectMeta& m) {
  for (const auto& [name, field] : kMetaHeaders) {
    if (!(m.*field).empty()) h.emplace_back(std::string(name), m.*field);
  }
  // Non-ASCII values travel RFC 2047-encoded, as S3 expects them.
  for (const auto& [k, v] : m.user_meta)
    h.emplace_back("x-amz-meta-" + lower(k), objdirect::s3::encode_metadata_value(v));
  for (const auto& [algo, v] : m.checksums) {
    auto a = checksum_from_name(algo);
    if (a && v.find('-') == std::string::npos)
      h.emplace_back(std::string(kKeptChecksumMeta) + lower(checksum_name(*a)), v);
  }
}

void add_checksum_headers(Headers& h, const ChecksumMap& sums) {
  for (const auto& [algo, v] : sums) {
    auto a = checksum_from_name(algo);
    if (a && v.find('-') == std::string::npos) h.emplace_back(checksum_header(*a), v);
  }
}

// `unquoted`: the ETag of If-Match without its quotes (radosgw 16 compares PutObject's If-Match
// with the bare ETag and answers 412 to the quoted form that S3 specifies).
void add_condition(Headers& h, const WriteCondition& cond, bool unquoted = false) {
  if (cond.kind == WriteCondition::Kind::must_be_absent) h.emplace_back("if-none-match", "*");
  if (cond.kind == WriteCondition::Kind::etag_must_match)
    h.emplace_back("if-match", unquoted ? cond.etag : quote(cond.etag));
}

ObjectMeta meta_from_head(std::string_view key, const Response& r) {
  ObjectMeta m;
  m.key = std::string(key);
  ChecksumMap kept;
  for (const auto& [k, v] : r.headers) {
    if (k.starts_with(kKeptChecksumMeta)) {
      if (auto a = checksum_from_name(std::string_view(k).substr(kKeptChecksumMeta.size())))
        kept[std::string(checksum_name(*a))] = v;
    } else if (k == "content-length") {
      parse_uint(v, m.size);
    } else if (k == "etag") {
      m.etag = objdirect::s3::unquote_etag(v);
    } else if (k == "last-modified") {
      if (auto t = parse_http_date(v)) m.mtime_ns = ns_of(*t);
    } else if (auto it = std::ranges::find(kMetaHeaders, std::string_view(k), &MetaHeader::first);
               it != std::end(kMetaHeaders)) {
      m.*(it->second) = v;
    } else if (k.starts_with("x-amz-meta-")) {
      m.user_meta.emplace_back(k.substr(11), objdirect::s3::decode_metadata_value(v));
    } else if (k.starts_with("x-amz-checksum-")) {
      if (auto a = checksum_from_name(k.substr(15)))
        m.checksums[std::string(checksum_name(*a))] = v;
    }
  }
  // A multipart object's composite checksum without its "-N" (moto 5.2 drops it): AWS marks a
  // full-object checksum of a multipart object with x-amz-checksum-type: FULL_OBJECT, so any
  // other is composite and gets the part count of the ETag back.
  const auto dash = m.etag.rfind('-');
  if (dash != std::string::npos && r.header("x-amz-checksum-type").value_or("") != "FULL_OBJECT") {
    for (auto& [algo, v] : m.checksums) {
      if (v.find('-') == std::string::npos) v += m.etag.substr(dash);
    }
  }
  // The upstream's own checksums win; kept ones are full-object checksums, never composite.
  if (m.checksums.empty()) m.checksums = std::move(kept);
  return m;
}

// A reply document decoded with the shared codecs (s3/documents.hpp). An <Error> document (S3
// may send one inside a 200) becomes the upstream's Status; a reply the decoder refuses is an
// io_error naming the call.
template <typename T>
Result<T> decode_reply(const Response& r, std::string_view what,
                       Result<T> (*decode)(std::string_view)) {
  if (r.body.find("<Error") != std::string::npos && objdirect::s3::decode_error(r.body).ok()) {
    return upstream_error(r, what);
  }
  Result<T> doc = decode(r.body);
  if (!doc.ok()) {
    return Status(Errc::io_error, "upstream " + std::string(what) +
                                      ": reply is not valid: " + doc.status().message());
  }
  return doc;
}

std::string decoded(std::string_view s, bool url) {
  if (!url) return std::string(s);
  auto d = uri_decode(s);
  return d ? *d : std::string(s);
}

// --- writers -------------------------------------------------------------------------------------

// Spools appended bytes: memory up to spool_memory_bytes, then an unlinked temporary file.
class SpoolWriter final : public BlobWriter {
 public:
  explicit SpoolWriter(std::shared_ptr<Core> core) : core_(std::move(core)) {}
  ~SpoolWriter() override {
    if (fd_ >= 0) ::close(fd_);
  }

  Status append(std::span<const std::byte> data) override {
    if (!failed_.ok()) return failed_;
    if (size_ + data.size() > core_->opts.spool_bytes_max) {
      failed_ = Status(Errc::entity_too_large,
                       "the gateway spools at most " + std::to_string(core_->opts.spool_bytes_max) +
                           " bytes per object or part (--gateway-spool-bytes-max)");
      return failed_;
    }
    const char* p = reinterpret_cast<const char*>(data.data());
    if (fd_ < 0 && mem_.size() + data.size() <= core_->opts.spool_memory_bytes) {
      mem_.append(p, data.size());
      size_ += data.size();
      return Status::Ok();
    }
    if (fd_ < 0) {
      if (auto st = spill(); !st.ok()) return failed_ = st;
    }
    if (auto st = write_all(p, data.size()); !st.ok()) return failed_ = st;
    size_ += data.size();
    return Status::Ok();
  }
  std::uint64_t size() const override { return size_; }

  // The bytes [offset, offset+length) as a request body.
  Body body(std::uint64_t offset, std::uint64_t length) const {
    Body b;
    if (fd_ < 0) {
      b.mem = mem_.data() + offset;
    } else {
      b.fd = fd_;
    }
    b.offset = fd_ < 0 ? 0 : offset;
    b.length = length;
    return b;
  }
  // Reads [offset, offset+length) back (per-part checksums).
  Status read(std::uint64_t offset, std::uint64_t length,
              const std::function<void(const char*, std::size_t)>& fn) const {
    if (fd_ < 0) {
      fn(mem_.data() + offset, length);
      return Status::Ok();
    }
    std::vector<char> buf(1 << 20);
    while (length > 0) {
      const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(length, buf.size()));
      const ssize_t got = ::pread(fd_, buf.data(), n, static_cast<off_t>(offset));
      if (got <= 0) return Status(Errc::io_error, "reading the spool file failed");
      fn(buf.data(), static_cast<std::size_t>(got));
      offset += static_cast<std::uint64_t>(got);
      length -= static_cast<std::uint64_t>(got);
    }
    return Status::Ok();
  }
  const std::shared_ptr<Core>& core() const { return core_; }

 private:
  Status spill() {
    std::string dir = core_->opts.spool_dir;
    if (dir.empty()) {
      const char* t = std::getenv("TMPDIR");
      dir = t && *t ? t : "/tmp";
    }
    fd_ = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd_ < 0) {
      std::string path = dir + "/objdirect-spool-XXXXXX";
      fd_ = ::mkostemp(path.data(), O_CLOEXEC);
      if (fd_ >= 0) ::unlink(path.c_str());
    }
    if (fd_ < 0) {
      return Status(errno == ENOSPC ? Errc::no_space : Errc::io_error,
                    "cannot create a spool file in " + dir + ": " + strerror(errno));
    }
    core_->ctr.spooled_to_file++;
    OBJDIRECT_RETURN_IF_ERROR(write_all(mem_.data(), mem_.size()));
    std::string().swap(mem_);
    return Status::Ok();
  }
  Status write_all(const char* p, std::size_t n) {
    while (n > 0) {
      const ssize_t w = ::write(fd_, p, n);
      if (w < 0) {
        if (errno == EINTR) continue;
        return Status(errno == ENOSPC || errno == EDQUOT ? Errc::no_space : Errc::io_error,
                      std::string("writing the gateway spool file: ") + strerror(errno));
      }
      p += w;
      n -= static_cast<std::size_t>(w);
    }
    return Status::Ok();
  }

  std::shared_ptr<Core> core_;
  std::string mem_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
  Status failed_;
};

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
  S3Reader(std::shared_ptr<Core> core, std::string bucket, ObjectMeta meta)
      : core_(std::move(core)), bucket_(std::move(bucket)), meta_(std::move(meta)) {}
  ~S3Reader() override { close_stream(); }

  const ObjectMeta& meta() const override { return meta_; }

  // Reads [offset, offset+len) in one of three ways:
  //  - it continues the open GET stream (sequential reads): no new request;
  //  - large reads are split into parallel exact ranged GETs (RDMA staging buffers);
  //  - otherwise a read that does not follow the previous one is one exact ranged GET (random
  //    or single reads never open more than they need, and the connection stays reusable), and
  //    a read that follows the previous one opens a stream over a window past it (8 MiB, then
  //    doubling up to 1 GiB per stream) that the next sequential reads continue.
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
    while (total < len) {
      if (!stream_ || stream_next_ != offset + total) {
        close_stream();
        OBJDIRECT_RETURN_IF_ERROR(open_stream(offset + total, window_));
        window_ = std::min<std::uint64_t>(window_ * 2, kStreamWindowMax);
      }
      auto got = continue_stream(dst.subspan(total));
      if (!got.ok()) return got;
      total += *got;
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
    return r;
  }

  Status open_stream(std::uint64_t offset, std::uint64_t window) {
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
    if (s.done && (s.rc != CURLE_OK || !k.failure.ok() || k.is_error || !s.t.started)) {
      Status st = stream_failure(s);
      close_stream();
      return st;
    }
    stream_next_ += got;
    if (got < dst.size() && stream_next_ != s.end) {  // short before the end of its range
      close_stream();
      return Status(Errc::io_error, "upstream object data ended early at byte " +
                                        std::to_string(stream_next_) + " of " +
                                        std::to_string(meta_.size));
    }
    if (s.done && k.carry.empty()) close_stream();  // the tail may still be in carry
    return got;
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
        core_->opts.parallel_gets, std::max<std::uint64_t>(1, dst.size() / kGetPieceBytesMin));
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
  std::unique_ptr<Stream> stream_;
  std::uint64_t stream_next_ = 0;
  std::uint64_t last_end_ = ~std::uint64_t{0};  // where the previous pread ended
  std::uint64_t window_ = kStreamWindowMin;     // range of the next stream
};

// --- the store
// -------------------------------------------------------------------------------------

class S3Store final : public ObjectStore {
 public:
  explicit S3Store(std::shared_ptr<Core> core) : core_(std::move(core)) {}

  const Counters& counters() const { return core_->ctr; }

  Status create_bucket(const BucketInfo& info) override {
    if (core_->opts.region.empty() || core_->opts.region == "us-east-1") {
      // S3 answers a re-create of one's own bucket in us-east-1 with 200; the store contract
      // says bucket_already_owned_by_you, so ask first (another's bucket answers HEAD 403 and
      // the PUT then says BucketAlreadyExists).
      if (head_bucket(info.name).ok()) {
        return Status(Errc::bucket_already_owned_by_you,
                      "Your previous request to create the named bucket succeeded and you "
                      "already own it.");
      }
    }
    Request r;
    r.method = "PUT";
    r.bucket = info.name;
    std::string body;
    if (!core_->opts.region.empty() && core_->opts.region != "us-east-1") {
      body =
          "<CreateBucketConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
          "<LocationConstraint>" +
          core_->opts.region + "</LocationConstraint></CreateBucketConfiguration>";
      r.body = Body{body.data(), -1, 0, body.size(), 0, 0};
    }
    return core_->call(std::move(r)).status();
  }

  Status delete_bucket(std::string_view bucket) override {
    Request r;
    r.method = "DELETE";
    r.bucket = std::string(bucket);
    auto resp = core_->call(r);
    if (resp.code() != Errc::bucket_not_empty) return resp.status();
    // In-progress uploads do not keep a bucket alive (ObjectStore contract): abort them, retry.
    bool aborted = false;
    ListUploadsQuery q;
    for (int guard = 0; guard < 10000; ++guard) {
      auto l = list_uploads(bucket, q);
      if (!l.ok()) return l.status();
      for (const auto& u : l->uploads) {
        OBJDIRECT_RETURN_IF_ERROR(abort_upload(bucket, u.key, u.upload_id));
        aborted = true;
      }
      if (!l->truncated) break;
      q.key_marker = l->next_key_marker;
      q.upload_id_marker = l->next_upload_id_marker;
    }
    if (!aborted) return resp.status();
    return core_->call(std::move(r)).status();
  }

  Result<BucketInfo> head_bucket(std::string_view bucket) override {
    Request r;
    r.method = "HEAD";
    r.bucket = std::string(bucket);
    auto resp = core_->call(std::move(r));
    if (!resp.ok()) {
      if (resp.code() == Errc::no_such_key)
        return Status(Errc::no_such_bucket, "The specified bucket does not exist (upstream)");
      return resp.status();
    }
    BucketInfo b;
    b.name = std::string(bucket);
    b.region = resp->header("x-amz-bucket-region").value_or(core_->opts.region);
    return b;
  }

  Result<std::vector<BucketInfo>> list_buckets() override {
    auto doc = call_xml(Request{}, "ListBuckets", objdirect::s3::decode_list_buckets);
    if (!doc.ok()) return doc.status();
    std::vector<BucketInfo> out;
    for (auto& b : doc->buckets) {
      BucketInfo info;
      info.name = std::move(b.name);
      if (auto t = parse_iso8601(b.creation_date)) info.ctime_ns = ns_of(*t);
      info.region = core_->opts.region;
      out.push_back(std::move(info));
    }
    std::sort(out.begin(), out.end(),
              [](const BucketInfo& a, const BucketInfo& b) { return a.name < b.name; });
    return out;
  }

  Result<std::unique_ptr<BlobWriter>> begin_write(std::string_view bucket) override {
    auto b = head_bucket(bucket);
    if (!b.ok()) return b.status();
    return std::unique_ptr<BlobWriter>(new SpoolWriter(core_));
  }

  Result<ObjectMeta> commit_object(std::string_view bucket, ObjectMeta meta,
                                   std::unique_ptr<BlobWriter> data,
                                   const WriteCondition& cond) override {
    auto* w = dynamic_cast<SpoolWriter*>(data.get());
    OBJDIRECT_ASSERT(w != nullptr && w->core() == core_,
                     "commit_object: a writer is committed to the store that began it");
    if (meta.size != w->size()) return Status(Errc::internal, "commit_object: size mismatch");
    const bool large = meta.size > core_->opts.multipart_threshold_bytes;
    // The condition is always forwarded; where the upstream ignores it, the gateway checks it
    // first, holding the key's lock across the check and the write.
    std::unique_lock<std::mutex> key_lock;
    if (cond.kind != WriteCondition::Kind::none && !upstream_checks(bucket, large)) {
      key_lock = std::unique_lock(core_->key_lock(bucket, meta.key));
      OBJDIRECT_RETURN_IF_ERROR(check_condition(bucket, meta.key, cond));
    }
    Result<std::string> etag =
        large ? multipart_put(bucket, meta, *w, cond) : single_put(bucket, meta, *w, cond);
    if (!etag.ok()) return etag.status();
    meta.etag = *etag;
    meta.mtime_ns = now_ns();
    meta.parts.clear();
    return meta;
  }

  Result<ObjectMeta> replace_meta(std::string_view bucket, ObjectMeta meta,
                                  std::string_view expected_etag) override {
    Request r = object_request("PUT", bucket, meta.key);
    r.headers.emplace_back("x-amz-copy-source",
                           "/" + uri_encode(bucket, true) + "/" + uri_encode(meta.key, false));
    r.headers.emplace_back("x-amz-metadata-directive", "REPLACE");
    r.headers.emplace_back("x-amz-copy-source-if-match", quote(expected_etag));
    add_meta_headers(r.headers, meta);
    auto doc = call_xml(std::move(r), "CopyObject", objdirect::s3::decode_copy_result);
    if (!doc.ok()) return doc.status();
    meta.etag = std::move(doc->etag);
    if (auto t = parse_iso8601(doc->last_modified)) meta.mtime_ns = ns_of(*t);
    if (meta.etag.empty()) return Status(Errc::io_error, "upstream CopyObject: no ETag");
    return meta;
  }

  // HEAD of one object (with If-None-Match: "etag" when `if_none_match` is set). A bodiless 404
  // is a missing key or a missing bucket: head_bucket tells them apart.
  Result<Response> head_call(std::string_view bucket, std::string_view key,
                             std::string_view if_none_match) {
    Request r = object_request("HEAD", bucket, key);
    r.headers.emplace_back("x-amz-checksum-mode", "ENABLED");
    if (!if_none_match.empty()) r.headers.emplace_back("if-none-match", quote(if_none_match));
    auto resp = core_->call(std::move(r));
    if (!resp.ok() && resp.code() == Errc::no_such_key) {
      auto b = head_bucket(bucket);
      if (!b.ok()) return b.status();
      return Status(Errc::no_such_key, "The specified key does not exist (upstream)");
    }
    return resp;
  }

  Result<ObjectMeta> head_object(std::string_view bucket, std::string_view key) override {
    auto resp = head_call(bucket, key, "");
    if (!resp.ok()) return resp.status();
    return meta_from_head(key, *resp);
  }

  // One HEAD with If-None-Match: "etag". 304: unchanged (nullopt); 200: the new metadata; a
  // 404 is no_such_key or no_such_bucket (as head_object tells them apart). An upstream that
  // ignores the condition and answers 200 with the same ETag still reads as unchanged.
  Result<std::optional<ObjectMeta>> revalidate(std::string_view bucket, std::string_view key,
                                               std::string_view etag) override {
    auto resp = head_call(bucket, key, etag);
    if (!resp.ok()) {
      if (resp.code() == Errc::not_modified) return std::optional<ObjectMeta>();
      return resp.status();
    }
    ObjectMeta m = meta_from_head(key, *resp);
    if (m.etag == etag) return std::optional<ObjectMeta>();
    return std::optional<ObjectMeta>(std::move(m));
  }

  Result<std::unique_ptr<ObjectReader>> open_object(std::string_view bucket,
                                                    std::string_view key) override {
    auto m = head_object(bucket, key);
    if (!m.ok()) return m.status();
    return std::unique_ptr<ObjectReader>(new S3Reader(core_, std::string(bucket), std::move(*m)));
  }

  Status delete_object(std::string_view bucket, std::string_view key) override {
    Request r = object_request("DELETE", bucket, key);
    return core_->call(std::move(r)).status();
  }

  Result<ListResult> list_objects(std::string_view bucket, const ListQuery& q) override {
    ListResult out;
    std::string token;
    const std::uint32_t want = q.max_keys;
    std::uint32_t have = 0;
    for (int guard = 0; guard < 100000; ++guard) {
      Request r;
      r.bucket = std::string(bucket);
      r.query = {{"list-type", "2"}, {"encoding-type", "url"}};
      const std::uint32_t ask = std::clamp<std::uint32_t>(want - have, 1, limits::list_keys_max);
      r.query.emplace_back("max-keys", std::to_string(ask));
      if (!q.prefix.empty()) r.query.emplace_back("prefix", q.prefix);
      if (!q.delimiter.empty()) r.query.emplace_back("delimiter", q.delimiter);
      if (!token.empty()) {
        r.query.emplace_back("continuation-token", token);
      } else if (!q.start_after.empty()) {
        r.query.emplace_back("start-after", q.start_after);
      }
      auto doc = call_xml(std::move(r), "ListObjectsV2", objdirect::s3::decode_list_objects);
      if (!doc.ok()) return doc.status();
      const bool url = doc->encoding_type == "url";
      // Entries in key order: objects and common prefixes interleaved.
      std::vector<std::pair<std::string, std::optional<ObjectMeta>>> entries;
      for (auto& c : doc->objects) {
        ObjectMeta m;
        m.key = decoded(c.key, url);
        m.size = c.size;
        m.etag = std::move(c.etag);
        if (auto t = parse_iso8601(c.last_modified)) m.mtime_ns = ns_of(*t);
        std::string k = m.key;
        entries.emplace_back(std::move(k), std::move(m));
      }
      for (const auto& p : doc->common_prefixes)
        entries.emplace_back(decoded(p, url), std::nullopt);
      std::sort(entries.begin(), entries.end(),
                [](const auto& a, const auto& b) { return a.first < b.first; });
      const bool upstream_truncated = doc->is_truncated;
      token = std::move(doc->next_continuation_token);
      bool more_in_page = false;
      for (auto& [name, m] : entries) {
        // An upstream may repeat a common prefix that start_after already covered.
        const std::string& last = out.next_marker.empty() ? q.start_after : out.next_marker;
        if (!last.empty() && name <= last) continue;
        if (have == want) {
          more_in_page = true;
          break;
        }
        ++have;
        out.next_marker = name;
        if (m) {
          out.objects.push_back(std::move(*m));
        } else {
          out.common_prefixes.push_back(name);
        }
      }
      if (more_in_page) {
        out.truncated = true;
        break;
      }
      if (!upstream_truncated || token.empty()) break;
      if (have == want) {
        // Is there anything after what we return? The next page answers.
        if (want == 0) {
          out.truncated = true;
          break;
        }
        Request peek;
        peek.bucket = std::string(bucket);
        peek.query = {{"list-type", "2"}, {"max-keys", "1"}, {"continuation-token", token}};
        if (!q.prefix.empty()) peek.query.emplace_back("prefix", q.prefix);
        if (!q.delimiter.empty()) peek.query.emplace_back("delimiter", q.delimiter);
        auto pd = call_xml(std::move(peek), "ListObjectsV2", objdirect::s3::decode_list_objects);
        if (!pd.ok()) return pd.status();
        out.truncated = !pd->objects.empty() || !pd->common_prefixes.empty();
        break;
      }
    }
    if (!out.truncated) out.next_marker.clear();
    return out;
  }

  Result<std::string> create_upload(std::string_view bucket, const UploadInfo& info) override {
    Request r = object_request("POST", bucket, info.key);
    r.query = {{"uploads", ""}};
    add_meta_headers(r.headers, info.meta_template);
    if (!info.checksum_algorithm.empty())
      r.headers.emplace_back("x-amz-checksum-algorithm", info.checksum_algorithm);
    auto doc =
        call_xml(std::move(r), "CreateMultipartUpload", objdirect::s3::decode_initiate_multipart);
    if (!doc.ok()) return doc.status();
    std::string id = std::move(doc->upload_id);
    if (id.empty()) return Status(Errc::io_error, "upstream CreateMultipartUpload: no UploadId");
    UploadInfo kept = info;
    kept.upload_id = id;
    if (kept.initiated_ns == 0) kept.initiated_ns = now_ns();
    core_->remember_template(id, std::move(kept));
    return id;
  }

  Result<UploadInfo> get_upload(std::string_view bucket, std::string_view key,
                                std::string_view upload_id) override {
    Request r = object_request("GET", bucket, key);
    r.query = {{"max-parts", "1"}, {"uploadId", std::string(upload_id)}};
    auto doc = call_xml(std::move(r), "ListParts", objdirect::s3::decode_list_parts);
    if (!doc.ok()) return upload_error(bucket, doc.status());
    if (auto t = core_->find_template(std::string(upload_id)); t && t->key == key) return *t;
    UploadInfo u;
    u.key = std::string(key);
    u.upload_id = std::string(upload_id);
    u.checksum_algorithm = std::move(doc->checksum_algorithm);
    return u;
  }

  Result<PartInfo> commit_part(std::string_view bucket, std::string_view key,
                               std::string_view upload_id, PartInfo info,
                               std::unique_ptr<BlobWriter> data) override {
    auto* w = dynamic_cast<SpoolWriter*>(data.get());
    OBJDIRECT_ASSERT(w != nullptr && w->core() == core_,
                     "commit_part: a writer is committed to the store that began it");
    Request r = part_request(bucket, key, upload_id, info.part_number);
    r.body = w->body(0, w->size());
    add_checksum_headers(r.headers, info.checksums);
    auto resp = core_->call(std::move(r));
    if (!resp.ok()) return resp.status();
    info.size = w->size();
    info.etag = objdirect::s3::unquote_etag(resp->header("etag").value_or(""));
    if (info.etag.empty()) return Status(Errc::io_error, "upstream UploadPart: no ETag");
    info.mtime_ns = now_ns();
    core_->keep_part(std::string(upload_id), info.part_number, info.etag, info.checksums);
    return info;
  }

  Result<std::vector<PartInfo>> list_parts(std::string_view bucket, std::string_view key,
                                           std::string_view upload_id,
                                           std::uint32_t part_number_marker,
                                           std::uint32_t max_parts) override {
    // The upstream is listed from the first part and the gateway skips to the marker itself:
    // moto 5.2 reads part-number-marker as an index into the part list, not as a part number
    // (with parts 1, 2, 3, 5, 8 a marker of 5 returns nothing). At most 10,000 parts per upload,
    // so a page costs at most 10 upstream pages.
    std::vector<PartInfo> out;
    std::uint32_t marker = 0;
    while (out.size() < max_parts) {
      Request r = object_request("GET", bucket, key);
      const std::uint32_t ask = 1000;
      r.query = {{"max-parts", std::to_string(ask)},
                 {"part-number-marker", std::to_string(marker)},
                 {"uploadId", std::string(upload_id)}};
      auto doc = call_xml(std::move(r), "ListParts", objdirect::s3::decode_list_parts);
      if (!doc.ok()) return upload_error(bucket, doc.status());
      bool any = false;
      for (auto& p : doc->parts) {
        any = true;
        PartInfo pi;
        pi.part_number = p.part_number;
        pi.size = p.size;
        pi.etag = std::move(p.etag);
        if (auto t = parse_iso8601(p.last_modified)) pi.mtime_ns = ns_of(*t);
        for (auto& [algo, value] : p.checksums) {
          if (auto a = checksum_from_name(algo)) {
            pi.checksums[std::string(checksum_name(*a))] = std::move(value);
          }
        }
        if (pi.checksums.empty()) {
          // An upstream without part checksums in ListParts (or none at all): the ones the
          // gateway kept when the part was committed, if the part is still that one.
          if (auto kept = core_->kept_part(std::string(upload_id), pi.part_number, pi.etag)) {
            pi.checksums = std::move(*kept);
            core_->ctr.kept_part_checksums_used++;
          }
        }
        marker = pi.part_number;
        if (pi.part_number > part_number_marker && out.size() < max_parts)
          out.push_back(std::move(pi));
      }
      if (!any || !doc->is_truncated) break;
      if (doc->next_part_number_marker && *doc->next_part_number_marker > marker)
        marker = *doc->next_part_number_marker;
    }
    return out;
  }

  Result<ObjectMeta> complete_upload(std::string_view bucket, std::string_view upload_id,
                                     ObjectMeta meta, const std::vector<CompletePartRef>& parts,
                                     const WriteCondition& cond) override {
    std::vector<std::pair<std::uint32_t, std::string>> named;
    for (const auto& p : parts) named.emplace_back(p.part_number, p.etag);
    std::unique_lock<std::mutex> key_lock;
    if (cond.kind != WriteCondition::Kind::none && !upstream_checks(bucket, true)) {
      key_lock = std::unique_lock(core_->key_lock(bucket, meta.key));
      OBJDIRECT_RETURN_IF_ERROR(check_condition(bucket, meta.key, cond));
    }
    // The parts' checksums go into the Complete (S3 requires them for an upload created with a
    // checksum algorithm); a caller that passes no part list gets them from ListParts.
    std::vector<PartInfo> infos = meta.parts;
    if (infos.empty()) {
      auto listed = list_parts(bucket, meta.key, upload_id, 0, limits::parts_max);
      if (listed.ok()) infos = std::move(*listed);
    }
    auto etag = complete(bucket, meta.key, upload_id, named, infos, cond);
    if (!etag.ok()) return etag.status();
    core_->forget_template(std::string(upload_id));
    meta.etag = *etag;
    meta.mtime_ns = now_ns();
    return meta;
  }

  Status abort_upload(std::string_view bucket, std::string_view key,
                      std::string_view upload_id) override {
    Request r = object_request("DELETE", bucket, key);
    r.query = {{"uploadId", std::string(upload_id)}};
    auto st = core_->call(std::move(r)).status();
    if (st.ok()) core_->forget_template(std::string(upload_id));
    return st.ok() ? st : upload_error(bucket, st);
  }

  Result<ListUploadsResult> list_uploads(std::string_view bucket,
                                         const ListUploadsQuery& q) override {
    Request r;
    r.bucket = std::string(bucket);
    r.query = {{"uploads", ""}, {"encoding-type", "url"}};
    r.query.emplace_back("max-uploads",
                         std::to_string(std::min<std::uint32_t>(q.max_uploads, 1000)));
    // No delimiter upstream: radosgw 16 answers one with an empty listing and moto 5.2 ignores
    // it, so the gateway rolls uploads up into common prefixes itself (below).
    if (!q.prefix.empty()) r.query.emplace_back("prefix", q.prefix);
    if (!q.key_marker.empty()) r.query.emplace_back("key-marker", q.key_marker);
    if (!q.upload_id_marker.empty()) r.query.emplace_back("upload-id-marker", q.upload_id_marker);
    auto doc = call_xml(std::move(r), "ListMultipartUploads", objdirect::s3::decode_list_uploads);
    if (!doc.ok()) return doc.status();
    const bool url = doc->encoding_type == "url";
    ListUploadsResult out;
    for (auto& u : doc->uploads) {
      UploadInfo info;
      info.key = decoded(u.key, url);
      info.upload_id = std::move(u.upload_id);
      if (auto t = parse_iso8601(u.initiated)) info.initiated_ns = ns_of(*t);
      info.checksum_algorithm = std::move(u.checksum_algorithm);
      if (auto t = core_->find_template(info.upload_id)) info.meta_template = t->meta_template;
      info.meta_template.owner = std::move(u.initiator.id);
      out.uploads.push_back(std::move(info));
    }
    for (const auto& p : doc->common_prefixes) out.common_prefixes.push_back(decoded(p, url));
    out.truncated = doc->is_truncated;
    out.next_key_marker = decoded(doc->next_key_marker.value_or(""), url);
    out.next_upload_id_marker = doc->next_upload_id_marker.value_or("");
    if (!q.delimiter.empty()) {
      // Uploads below the delimiter roll up into common prefixes (within the upstream's page).
      std::vector<UploadInfo> kept;
      for (auto& u : out.uploads) {
        const auto at = u.key.find(q.delimiter, q.prefix.size());
        if (!u.key.starts_with(q.prefix) || at == std::string::npos) {
          kept.push_back(std::move(u));
          continue;
        }
        std::string cp = u.key.substr(0, at + q.delimiter.size());
        if (cp != q.key_marker &&
            std::ranges::find(out.common_prefixes, cp) == out.common_prefixes.end())
          out.common_prefixes.push_back(std::move(cp));
      }
      out.uploads = std::move(kept);
      std::sort(out.common_prefixes.begin(), out.common_prefixes.end());
    }
    const std::uint32_t want = std::min<std::uint32_t>(q.max_uploads, 1000);
    if (out.uploads.size() + out.common_prefixes.size() > want && out.common_prefixes.empty()) {
      // An upstream that ignores max-uploads (moto 5.2): the page is cut here.
      out.uploads.resize(want);
      out.truncated = true;
      if (!out.uploads.empty()) {
        out.next_key_marker = out.uploads.back().key;
        out.next_upload_id_marker = out.uploads.back().upload_id;
      }
    }
    return out;
  }

 private:
  // One upstream call whose reply is an XML document, decoded by `decode`; an <Error> reply
  // becomes its Status.
  template <typename T>
  Result<T> call_xml(Request r, std::string_view what, Result<T> (*decode)(std::string_view)) {
    r.xml_reply = true;
    auto resp = core_->call(std::move(r));
    if (!resp.ok()) return resp.status();
    return decode_reply(*resp, what, decode);
  }

  // An upload call's error: radosgw answers an unknown upload id on ListParts with NoSuchKey,
  // which S3 spells NoSuchUpload (the bucket's existence is checked, so a missing bucket stays
  // NoSuchBucket).
  Status upload_error(std::string_view bucket, Status st) {
    if (st.code() != Errc::no_such_key) return st;
    auto b = head_bucket(bucket);
    if (!b.ok()) return b.status();
    return Status(Errc::no_such_upload,
                  "The specified upload does not exist. The upload ID may be invalid, or the "
                  "upload may have been aborted or completed. (" +
                      st.message() + ")");
  }

  // Whether the upstream enforces write conditions on PutObject (complete = false) or
  // CompleteMultipartUpload (true). In "auto" mode the first call probes the upstream in
  // `bucket` and remembers the answer; a failed probe answers false (the gateway checks: safe)
  // and is repeated next time.
  bool upstream_checks(std::string_view bucket, bool complete) {
    const std::string& mode = core_->opts.conditional_writes;
    if (mode == "upstream") return true;
    if (mode == "gateway") return false;
    {
      std::lock_guard lk(core_->caps_mu);
      const auto& known = complete ? core_->complete_conditions : core_->put_conditions;
      if (known) return *known;
    }
    auto probed = complete ? probe_complete_conditions(bucket) : probe_put_conditions(bucket);
    if (!probed.ok()) return false;
    std::lock_guard lk(core_->caps_mu);
    (complete ? core_->complete_conditions : core_->put_conditions) = *probed;
    return *probed;
  }

  static std::string probe_key() {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(rng()));
    return ".objdirect-gateway-probe/" + std::string(buf);
  }

  // PUT a scratch key, then PUT it again with If-None-Match: * and with a wrong If-Match (an
  // upstream that enforces conditions answers 412 to both) and with its right If-Match (200;
  // radosgw 16 answers 412 to the quoted ETag and 200 to the bare one, which is then used). The
  // key is deleted afterwards.
  Result<bool> probe_put_conditions(std::string_view bucket) {
    core_->ctr.capability_probes++;
    const std::string key = probe_key();
    auto first = core_->call(object_request("PUT", bucket, key));
    if (!first.ok()) return first.status();
    const std::string etag = objdirect::s3::unquote_etag(first->header("etag").value_or(""));
    auto put_with = [&](std::string name, std::string value) {
      Request r = object_request("PUT", bucket, key);
      r.headers.emplace_back(std::move(name), std::move(value));
      return core_->perform(std::move(r));
    };
    auto a = put_with("if-none-match", "*");
    auto b = put_with("if-match", quote("00000000000000000000000000000000"));
    auto c = put_with("if-match", quote(etag));
    bool unquoted = false;
    if (c.ok() && c->status == 412) {
      auto d = put_with("if-match", etag);
      unquoted = d.ok() && d->status == 200;
      if (!unquoted) c = std::move(d);
    }
    (void)core_->call(object_request("DELETE", bucket, key));
    for (const auto* r : {&a, &b, &c})
      if (!r->ok()) return r->status();
    const bool enforced = a->status == 412 && b->status == 412 && (unquoted || c->status == 200);
    if (enforced) {
      std::lock_guard lk(core_->caps_mu);
      core_->put_if_match_unquoted = unquoted;
    }
    return enforced;
  }

  // PUT a scratch key, then complete a one-part upload of it with If-None-Match: *: an upstream
  // that enforces conditions on Complete answers 412 (radosgw 16 overwrites). Cleaned up after.
  Result<bool> probe_complete_conditions(std::string_view bucket) {
    core_->ctr.capability_probes++;
    const std::string key = probe_key();
    auto first = core_->call(object_request("PUT", bucket, key));
    if (!first.ok()) return first.status();
    UploadInfo info;
    info.key = key;
    Result<bool> out = Status(Errc::internal, "probe not run");
    auto id = create_upload(bucket, info);
    if (id.ok()) {
      const std::string byte = "p";
      Request part = part_request(bucket, key, *id, 1);
      part.body = Body{byte.data(), -1, 0, byte.size(), 0, 0};
      auto pr = core_->call(std::move(part));
      if (!pr.ok()) {
        out = pr.status();
      } else {
        const std::string etag = objdirect::s3::unquote_etag(pr->header("etag").value_or(""));
        auto done =
            complete(bucket, key, *id, {{1, etag}}, {}, {WriteCondition::Kind::must_be_absent, ""});
        if (done.ok()) {
          out = false;
        } else if (done.code() == Errc::precondition_failed) {
          out = true;
        } else {
          out = done.status();
        }
      }
      (void)abort_upload(bucket, key, *id);  // completed already where the upstream overwrote
      core_->forget_template(*id);
    } else {
      out = id.status();
    }
    (void)core_->call(object_request("DELETE", bucket, key));
    return out;
  }

  // A write condition checked by the gateway (the caller holds the key's lock): a HEAD. S3's
  // answers: If-None-Match: * on an existing key and a different ETag are 412; If-Match on a
  // missing key is 404 NoSuchKey.
  Status check_condition(std::string_view bucket, std::string_view key,
                         const WriteCondition& cond) {
    core_->ctr.gateway_checked_conditions++;
    auto h = head_object(bucket, key);
    if (cond.kind == WriteCondition::Kind::must_be_absent) {
      if (h.ok())
        return Status(Errc::precondition_failed,
                      "At least one of the pre-conditions you specified did not hold (the key "
                      "exists; checked by the gateway)");
      return h.code() == Errc::no_such_key ? Status::Ok() : h.status();
    }
    if (!h.ok()) return h.status();
    if (h->etag != cond.etag)
      return Status(Errc::precondition_failed,
                    "At least one of the pre-conditions you specified did not hold (ETag is " +
                        h->etag + "; checked by the gateway)");
    return Status::Ok();
  }

  Request part_request(std::string_view bucket, std::string_view key, std::string_view upload_id,
                       std::uint32_t number) const {
    Request r = object_request("PUT", bucket, key);
    r.query = {{"partNumber", std::to_string(number)}, {"uploadId", std::string(upload_id)}};
    return r;
  }

  Result<std::string> single_put(std::string_view bucket, const ObjectMeta& meta,
                                 const SpoolWriter& w, const WriteCondition& cond) {
    Request r = object_request("PUT", bucket, meta.key);
    r.body = w.body(0, w.size());
    add_meta_headers(r.headers, meta);
    add_checksum_headers(r.headers, meta.checksums);
    bool unquoted = false;
    {
      std::lock_guard lk(core_->caps_mu);
      unquoted = core_->put_if_match_unquoted;
    }
    add_condition(r.headers, cond, unquoted);
    auto resp = core_->call(std::move(r));
    if (!resp.ok()) return resp.status();
    auto etag = objdirect::s3::unquote_etag(resp->header("etag").value_or(""));
    if (etag.empty()) return Status(Errc::io_error, "upstream PutObject: no ETag");
    return etag;
  }

  // A parallel multipart upload of the spooled data; aborted upstream on any failure.
  Result<std::string> multipart_put(std::string_view bucket, const ObjectMeta& meta,
                                    const SpoolWriter& w, const WriteCondition& cond) {
    core_->ctr.multipart_commits++;
    // A full-object checksum cannot be forwarded through a multipart upload: each part carries
    // its own checksum of the same algorithm instead (the upstream verifies every part).
    std::optional<ChecksumAlgo> algo;
    for (const auto& [name, v] : meta.checksums) {
      if ((algo = checksum_from_name(name))) break;
    }
    UploadInfo info;
    info.key = meta.key;
    info.meta_template = meta;
    if (algo) info.checksum_algorithm = std::string(checksum_name(*algo));
    auto id = create_upload(bucket, info);
    if (!id.ok()) return id.status();
    const std::uint64_t size = w.size();
    const std::uint64_t part = std::max<std::uint64_t>(
        core_->opts.multipart_part_bytes, (size + limits::parts_max - 1) / limits::parts_max);
    const std::uint32_t count = static_cast<std::uint32_t>((size + part - 1) / part);
    std::vector<PartInfo> done(count);
    Status failure = run_parallel(count, core_->opts.parallel_parts, [&](std::size_t i) -> Status {
      const std::uint64_t off = std::uint64_t(i) * part;
      const std::uint64_t len = std::min(part, size - off);
      const auto number = static_cast<std::uint32_t>(i + 1);
      Request r = part_request(bucket, meta.key, *id, number);
      r.body = w.body(off, len);
      PartInfo pi;
      pi.part_number = number;
      pi.size = len;
      if (algo) {
        Checksummer ck(*algo);
        Status st = w.read(off, len, [&](const char* p, std::size_t n) { ck.update(p, n); });
        if (!st.ok()) return st;
        pi.checksums[std::string(checksum_name(*algo))] = ck.digest_base64();
        r.headers.emplace_back(checksum_header(*algo), ck.digest_base64());
      }
      auto resp = core_->call(std::move(r));
      if (!resp.ok()) return resp.status();
      if (!resp->header("etag")) return Status(Errc::io_error, "upstream UploadPart: no ETag");
      pi.etag = objdirect::s3::unquote_etag(*resp->header("etag"));
      done[i] = std::move(pi);
      return Status::Ok();
    });
    Result<std::string> etag = failure;
    if (failure.ok()) {
      std::vector<std::pair<std::uint32_t, std::string>> named;
      for (const auto& p : done) named.emplace_back(p.part_number, p.etag);
      etag = complete(bucket, meta.key, *id, named, done, cond);
    }
    if (!etag.ok()) {
      (void)abort_upload(bucket, meta.key, *id);  // best effort; the upstream's lifecycle rules
      return etag.status();                       // clean up what this misses
    }
    core_->forget_template(*id);
    return etag;
  }

  // CompleteMultipartUpload with the named parts (checksums from `infos` where known).
  Result<std::string> complete(std::string_view bucket, std::string_view key,
                               std::string_view upload_id,
                               const std::vector<std::pair<std::uint32_t, std::string>>& named,
                               const std::vector<PartInfo>& infos, const WriteCondition& cond) {
    std::vector<objdirect::s3::CompletePart> list;
    list.reserve(named.size());
    for (const auto& [n, etag] : named) {
      objdirect::s3::CompletePart part{n, etag, {}};
      for (const auto& info : infos) {
        if (info.part_number != n) continue;
        for (const auto& [algo, v] : info.checksums) {
          if (auto a = checksum_from_name(algo)) part.checksums.emplace_back(checksum_name(*a), v);
        }
      }
      list.push_back(std::move(part));
    }
    const std::string body = objdirect::s3::encode_complete_multipart(list);
    Request r = object_request("POST", bucket, key);
    r.query = {{"uploadId", std::string(upload_id)}};
    r.headers.emplace_back("content-type", "application/xml");
    add_condition(r.headers, cond);
    r.body = Body{body.data(), -1, 0, body.size(), 0, 0};
    r.idempotent = false;  // a lost answer may mean it completed: not re-sent, confirmed below
    std::uint32_t attempts = 1;
    auto resp = core_->call(std::move(r), &attempts);
    // An <Error> inside a 200, too.
    Result<objdirect::s3::CompleteMultipartResult> reply =
        resp.ok()
            ? decode_reply(*resp, "CompleteMultipartUpload", objdirect::s3::decode_complete_result)
            : Result<objdirect::s3::CompleteMultipartResult>(resp.status());
    const std::string multipart_suffix = "-" + std::to_string(named.size());
    if (!reply.ok()) {
      Status st = upload_error(bucket, reply.status());
      // No answer at all (the call's transport failures are `unavailable`), or a retried
      // Complete that finds the upload gone.
      const bool lost = !resp.ok() && resp.code() == Errc::unavailable;
      if (lost || (attempts > 1 && st.code() == Errc::no_such_upload)) {
        // A Complete whose answer was lost (or a retried one that finds the upload gone): the
        // upload may have completed. The object's ETag says so (a multipart ETag of this many
        // parts).
        auto h = head_object(bucket, key);
        if (h.ok() && h->etag.ends_with(multipart_suffix)) return h->etag;
      }
      return st;
    }
    std::string etag = std::move(reply->etag);
    if (etag.empty()) {
      // radosgw 16 answers an empty <ETag/>: the object's HEAD has it.
      auto h = head_object(bucket, key);
      if (!h.ok()) return h.status();
      etag = h->etag;
    }
    if (etag.empty()) return Status(Errc::io_error, "upstream CompleteMultipartUpload: no ETag");
    return etag;
  }

  std::shared_ptr<Core> core_;
};

}  // namespace

Result<std::unique_ptr<ObjectStore>> open_s3_store(const S3StoreOptions& options) {
  static CurlGlobal curl_global;
  const auto& o = options;
  auto bad = [](std::string m) { return Status(Errc::invalid_argument, std::move(m)); };
  std::string base = o.upstream;
  while (!base.empty() && base.back() == '/') base.pop_back();
  std::string_view rest;
  if (base.starts_with("http://")) {
    rest = std::string_view(base).substr(7);
  } else if (base.starts_with("https://")) {
    rest = std::string_view(base).substr(8);
  } else {
    return bad("--upstream must be http://HOST[:PORT] or https://HOST[:PORT], got '" + o.upstream +
               "'");
  }
  if (rest.empty() || rest.find('/') != std::string_view::npos)
    return bad("--upstream must have a host and no path (path-style addressing), got '" +
               o.upstream + "'");
  if (o.access_key.empty() || o.secret_key.empty())
    return bad(
        "no upstream credentials: set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or give "
        "--upstream-profile naming a profile in ~/.aws/credentials");
  if (o.connections == 0 || o.connections > s3_limits::connections_max)
    return bad("upstream connections must be 1.." + std::to_string(s3_limits::connections_max));
  if (o.parallel_parts == 0 || o.parallel_parts > s3_limits::parallel_parts_max)
    return bad("parallel parts must be 1.." + std::to_string(s3_limits::parallel_parts_max));
  if (o.parallel_gets == 0 || o.parallel_gets > s3_limits::parallel_gets_max)
    return bad("parallel GETs must be 1.." + std::to_string(s3_limits::parallel_gets_max));
  if (o.spool_memory_bytes > s3_limits::spool_memory_bytes_max)
    return bad("spool memory must be at most " + std::to_string(s3_limits::spool_memory_bytes_max));
  if (o.spool_bytes_max == 0 || o.spool_bytes_max > limits::part_bytes_max)
    return bad("spool bytes max must be 1.." + std::to_string(limits::part_bytes_max));
  if (o.multipart_part_bytes < limits::part_bytes_min ||
      o.multipart_part_bytes > limits::part_bytes_max)
    return bad("multipart part bytes must be " + std::to_string(limits::part_bytes_min) + ".." +
               std::to_string(limits::part_bytes_max));
  if (o.multipart_threshold_bytes < o.multipart_part_bytes ||
      o.multipart_threshold_bytes > limits::put_bytes_max)
    return bad("multipart threshold must be between the part size and " +
               std::to_string(limits::put_bytes_max));
  if (o.upload_templates == 0 || o.upload_templates > s3_limits::upload_templates_max)
    return bad("upload templates must be 1.." + std::to_string(s3_limits::upload_templates_max));
  if (o.low_speed_time_s == 0 || o.connect_timeout_ms == 0)
    return bad("upstream timeouts must be positive");
  if (o.conditional_writes != "auto" && o.conditional_writes != "upstream" &&
      o.conditional_writes != "gateway")
    return bad("upstream conditional writes must be auto, upstream or gateway, got '" +
               o.conditional_writes + "'");
  if (auto st = o.retry.validate(); !st.ok()) return bad("upstream retries: " + st.message());

  auto core = std::make_shared<Core>();
  core->opts = o;
  core->retrier_ptr = std::make_unique<retry::Retrier>(o.retry);
  core->base = base;
  core->authority = std::string(rest);
  core->pool =
      std::make_unique<Pool>(o.connections, std::chrono::milliseconds(o.pool_wait_ms), core->ctr);
  auto store = std::make_unique<S3Store>(core);
  if (o.probe) {
    auto b = store->list_buckets();
    if (!b.ok()) {
      return Status(b.code(),
                    "upstream " + base + " check (ListBuckets) failed: " + b.status().message());
    }
  }
  return std::unique_ptr<ObjectStore>(std::move(store));
}

S3StoreStats s3_store_stats(const ObjectStore& store) {
  S3StoreStats s;
  auto* st = dynamic_cast<const S3Store*>(&store);
  if (!st) return s;
  const Counters& c = st->counters();
  s.requests = c.requests;
  s.get_requests = c.get_requests;
  s.connections_created = c.connections_created;
  s.connections_in_use = c.connections_in_use;
  s.connections_peak = c.connections_peak;
  s.pool_waits_timed_out = c.pool_waits_timed_out;
  s.spooled_to_file = c.spooled_to_file;
  s.multipart_commits = c.multipart_commits;
  s.retries = c.retries;
  s.capability_probes = c.capability_probes;
  s.gateway_checked_conditions = c.gateway_checked_conditions;
  s.kept_part_checksums_used = c.kept_part_checksums_used;
  return s;
}

void register_s3_store_metrics(const ObjectStore& store, metrics::Sink& sink) {
  if (dynamic_cast<const S3Store*>(&store) == nullptr) return;
  const ObjectStore* st = &store;
  auto stat = [st](std::uint64_t S3StoreStats::*field) {
    return [st, field] { return static_cast<double>(s3_store_stats(*st).*field); };
  };
  sink.add_counter("objdirect_upstream_requests_total", "HTTP requests sent to the upstream S3.",
                   stat(&S3StoreStats::requests));
  sink.add_counter("objdirect_upstream_get_requests_total",
                   "Ranged GETs of object data sent to the upstream.",
                   stat(&S3StoreStats::get_requests));
  sink.add_gauge("objdirect_upstream_connections_in_use", "Upstream connections in use.",
                 stat(&S3StoreStats::connections_in_use));
  sink.add_counter("objdirect_upstream_pool_waits_timed_out_total",
                   "Requests refused with SlowDown: no free upstream connection in time.",
                   stat(&S3StoreStats::pool_waits_timed_out));
  sink.add_counter("objdirect_upstream_multipart_commits_total",
                   "Objects written through as a multipart upload.",
                   stat(&S3StoreStats::multipart_commits));
}

}  // namespace objdirect::storage
