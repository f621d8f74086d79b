// S3Store (see s3_store.hpp): an ObjectStore on an upstream S3 service through libcurl.
#include "storage/s3/s3_store.hpp"

#include <curl/curl.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <pugixml.hpp>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "auth/sigv4.hpp"
#include "common/checksum.hpp"
#include "common/limits.hpp"
#include "common/parallel.hpp"
#include "common/retry.hpp"
#include "common/time.hpp"
#include "common/uri.hpp"
#include "server/s3/conditional.hpp"
#include "server/s3/xml.hpp"

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
      multipart_commits{0}, retries{0};
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
    for (const auto& [k, val] : v.headers) list = curl_slist_append(list, (k + ": " + val).c_str());
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
  Result<Response> perform(Request r, Sink* sink = nullptr,
                           std::size_t body_max = s3_limits::xml_reply_bytes_max) {
    std::string reasons;
    for (std::uint32_t attempt = 1;; ++attempt) {
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
      pugi::xml_document doc;
      if (!doc.load_buffer(t.resp.body.data(), t.resp.body.size())) {
        reason = "truncated_xml";
      } else if (auto err = doc.child("Error")) {
        reason = retry::classify_status(0, err.child_value("Code"));
      }
    }
    return std::move(t.resp);
  }

  // perform() that also maps a non-2xx status to the upstream's error.
  Result<Response> call(Request r) {
    const std::string what = r.method + " " + target(r);
    auto resp = perform(std::move(r));
    if (!resp.ok()) return resp;
    if (resp->status < 200 || resp->status > 299) return upstream_error(*resp, what);
    return resp;
  }

  void remember_template(const std::string& id, UploadInfo info) {
    std::lock_guard lk(templates_mu);
    // The order deque may name ids already forgotten (completed, aborted): skip those.
    while (templates.size() >= opts.upload_templates && !template_order.empty()) {
      templates.erase(template_order.front());
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

void add_meta_headers(Headers& h, const ObjectMeta& m) {
  for (const auto& [name, field] : kMetaHeaders) {
    if (!(m.*field).empty()) h.emplace_back(std::string(name), m.*field);
  }
  for (const auto& [k, v] : m.user_meta) h.emplace_back("x-amz-meta-" + lower(k), v);
}

void add_checksum_headers(Headers& h, const ChecksumMap& sums) {
  for (const auto& [algo, v] : sums) {
    auto a = checksum_from_name(algo);
    if (a && v.find('-') == std::string::npos) h.emplace_back(checksum_header(*a), v);
  }
}

void add_condition(Headers& h, const WriteCondition& cond) {
  if (cond.kind == WriteCondition::Kind::must_be_absent) h.emplace_back("if-none-match", "*");
  if (cond.kind == WriteCondition::Kind::etag_must_match)
    h.emplace_back("if-match", quote(cond.etag));
}

ObjectMeta meta_from_head(std::string_view key, const Response& r) {
  ObjectMeta m;
  m.key = std::string(key);
  for (const auto& [k, v] : r.headers) {
    if (k == "content-length") {
      parse_uint(v, m.size);
    } else if (k == "etag") {
      m.etag = objdirect::s3::unquote_etag(v);
    } else if (k == "last-modified") {
      if (auto t = parse_http_date(v)) m.mtime_ns = ns_of(*t);
    } else if (auto it = std::ranges::find(kMetaHeaders, std::string_view(k), &MetaHeader::first);
               it != std::end(kMetaHeaders)) {
      m.*(it->second) = v;
    } else if (k.starts_with("x-amz-meta-")) {
      m.user_meta.emplace_back(k.substr(11), v);
    } else if (k.starts_with("x-amz-checksum-")) {
      if (auto a = checksum_from_name(k.substr(15)))
        m.checksums[std::string(checksum_name(*a))] = v;
    }
  }
  return m;
}

Result<pugi::xml_document> parse_xml(const Response& r, std::string_view what) {
  pugi::xml_document doc;
  if (!doc.load_buffer(r.body.data(), r.body.size()))
    return Status(Errc::io_error, "upstream " + std::string(what) + ": reply is not XML");
  if (doc.child("Error")) return upstream_error(r, what);
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
    auto doc = call_xml(Request{}, "ListBuckets");
    if (!doc.ok()) return doc.status();
    std::vector<BucketInfo> out;
    for (auto b : doc->child("ListAllMyBucketsResult").child("Buckets").children("Bucket")) {
      BucketInfo info;
      info.name = b.child_value("Name");
      if (auto t = parse_iso8601(b.child_value("CreationDate"))) info.ctime_ns = ns_of(*t);
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
    if (!w || w->core() != core_)
      return Status(Errc::internal, "commit_object: the writer is not from this store");
    if (meta.size != w->size()) return Status(Errc::internal, "commit_object: size mismatch");
    Result<std::string> etag = meta.size > core_->opts.multipart_threshold_bytes
                                   ? multipart_put(bucket, meta, *w, cond)
                                   : single_put(bucket, meta, *w, cond);
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
    auto doc = call_xml(std::move(r), "CopyObject");
    if (!doc.ok()) return doc.status();
    auto res = doc->child("CopyObjectResult");
    meta.etag = objdirect::s3::unquote_etag(res.child_value("ETag"));
    if (auto t = parse_iso8601(res.child_value("LastModified"))) meta.mtime_ns = ns_of(*t);
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
      auto doc = call_xml(std::move(r), "ListObjectsV2");
      if (!doc.ok()) return doc.status();
      auto root = doc->child("ListBucketResult");
      const bool url = std::string_view(root.child_value("EncodingType")) == "url";
      // Entries in key order: objects and common prefixes interleaved.
      std::vector<std::pair<std::string, std::optional<ObjectMeta>>> entries;
      for (auto c : root.children()) {
        const std::string_view name = c.name();
        if (name == "Contents") {
          ObjectMeta m;
          m.key = decoded(c.child_value("Key"), url);
          parse_uint(std::string_view(c.child_value("Size")), m.size);
          m.etag = objdirect::s3::unquote_etag(c.child_value("ETag"));
          if (auto t = parse_iso8601(c.child_value("LastModified"))) m.mtime_ns = ns_of(*t);
          std::string k = m.key;
          entries.emplace_back(std::move(k), std::move(m));
        } else if (name == "CommonPrefixes") {
          entries.emplace_back(decoded(c.child_value("Prefix"), url), std::nullopt);
        }
      }
      std::sort(entries.begin(), entries.end(),
                [](const auto& a, const auto& b) { return a.first < b.first; });
      const bool upstream_truncated = std::string_view(root.child_value("IsTruncated")) == "true";
      token = root.child_value("NextContinuationToken");
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
        auto pd = call_xml(std::move(peek), "ListObjectsV2");
        if (!pd.ok()) return pd.status();
        auto proot = pd->child("ListBucketResult");
        out.truncated = proot.child("Contents") || proot.child("CommonPrefixes");
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
    auto doc = call_xml(std::move(r), "CreateMultipartUpload");
    if (!doc.ok()) return doc.status();
    std::string id = doc->child("InitiateMultipartUploadResult").child_value("UploadId");
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
    auto doc = call_xml(std::move(r), "ListParts");
    if (!doc.ok()) return doc.status();
    auto root = doc->child("ListPartsResult");
    if (auto t = core_->find_template(std::string(upload_id)); t && t->key == key) return *t;
    UploadInfo u;
    u.key = std::string(key);
    u.upload_id = std::string(upload_id);
    u.checksum_algorithm = root.child_value("ChecksumAlgorithm");
    return u;
  }

  Result<PartInfo> commit_part(std::string_view bucket, std::string_view key,
                               std::string_view upload_id, PartInfo info,
                               std::unique_ptr<BlobWriter> data) override {
    auto* w = dynamic_cast<SpoolWriter*>(data.get());
    if (!w || w->core() != core_)
      return Status(Errc::internal, "commit_part: the writer is not from this store");
    Request r = part_request(bucket, key, upload_id, info.part_number);
    r.body = w->body(0, w->size());
    add_checksum_headers(r.headers, info.checksums);
    auto resp = core_->call(std::move(r));
    if (!resp.ok()) return resp.status();
    info.size = w->size();
    info.etag = objdirect::s3::unquote_etag(resp->header("etag").value_or(""));
    if (info.etag.empty()) return Status(Errc::io_error, "upstream UploadPart: no ETag");
    info.mtime_ns = now_ns();
    return info;
  }

  Result<std::vector<PartInfo>> list_parts(std::string_view bucket, std::string_view key,
                                           std::string_view upload_id,
                                           std::uint32_t part_number_marker,
                                           std::uint32_t max_parts) override {
    std::vector<PartInfo> out;
    std::uint32_t marker = part_number_marker;
    while (out.size() < max_parts) {
      Request r = object_request("GET", bucket, key);
      const std::uint32_t ask = std::min<std::uint32_t>(max_parts - out.size(), 1000);
      r.query = {{"max-parts", std::to_string(ask)},
                 {"part-number-marker", std::to_string(marker)},
                 {"uploadId", std::string(upload_id)}};
      auto doc = call_xml(std::move(r), "ListParts");
      if (!doc.ok()) return doc.status();
      auto root = doc->child("ListPartsResult");
      bool any = false;
      for (auto p : root.children("Part")) {
        any = true;
        PartInfo pi;
        parse_uint(std::string_view(p.child_value("PartNumber")), pi.part_number);
        parse_uint(std::string_view(p.child_value("Size")), pi.size);
        pi.etag = objdirect::s3::unquote_etag(p.child_value("ETag"));
        if (auto t = parse_iso8601(p.child_value("LastModified"))) pi.mtime_ns = ns_of(*t);
        for (ChecksumAlgo a : kAllChecksumAlgos) {
          const std::string el = "Checksum" + std::string(checksum_name(a));
          if (auto v = p.child(el.c_str()))
            pi.checksums[std::string(checksum_name(a))] = v.text().get();
        }
        marker = pi.part_number;
        if (out.size() < max_parts) out.push_back(std::move(pi));
      }
      if (!any || std::string_view(root.child_value("IsTruncated")) != "true") break;
      std::uint32_t next = 0;
      if (parse_uint(std::string_view(root.child_value("NextPartNumberMarker")), next) &&
          next > marker)
        marker = next;
    }
    return out;
  }

  Result<ObjectMeta> complete_upload(std::string_view bucket, std::string_view upload_id,
                                     ObjectMeta meta, const std::vector<CompletePartRef>& parts,
                                     const WriteCondition& cond) override {
    std::vector<std::pair<std::uint32_t, std::string>> named;
    for (const auto& p : parts) named.emplace_back(p.part_number, p.etag);
    auto etag = complete(bucket, meta.key, upload_id, named, meta.parts, cond);
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
    return st;
  }

  Result<ListUploadsResult> list_uploads(std::string_view bucket,
                                         const ListUploadsQuery& q) override {
    Request r;
    r.bucket = std::string(bucket);
    r.query = {{"uploads", ""}, {"encoding-type", "url"}};
    r.query.emplace_back("max-uploads",
                         std::to_string(std::min<std::uint32_t>(q.max_uploads, 1000)));
    if (!q.prefix.empty()) r.query.emplace_back("prefix", q.prefix);
    if (!q.delimiter.empty()) r.query.emplace_back("delimiter", q.delimiter);
    if (!q.key_marker.empty()) r.query.emplace_back("key-marker", q.key_marker);
    if (!q.upload_id_marker.empty()) r.query.emplace_back("upload-id-marker", q.upload_id_marker);
    auto doc = call_xml(std::move(r), "ListMultipartUploads");
    if (!doc.ok()) return doc.status();
    auto root = doc->child("ListMultipartUploadsResult");
    const bool url = std::string_view(root.child_value("EncodingType")) == "url";
    ListUploadsResult out;
    for (auto u : root.children("Upload")) {
      UploadInfo info;
      info.key = decoded(u.child_value("Key"), url);
      info.upload_id = u.child_value("UploadId");
      if (auto t = parse_iso8601(u.child_value("Initiated"))) info.initiated_ns = ns_of(*t);
      info.checksum_algorithm = u.child_value("ChecksumAlgorithm");
      if (auto t = core_->find_template(info.upload_id)) info.meta_template = t->meta_template;
      info.meta_template.owner = u.child("Initiator").child_value("ID");
      out.uploads.push_back(std::move(info));
    }
    for (auto p : root.children("CommonPrefixes"))
      out.common_prefixes.push_back(decoded(p.child_value("Prefix"), url));
    out.truncated = std::string_view(root.child_value("IsTruncated")) == "true";
    out.next_key_marker = decoded(root.child_value("NextKeyMarker"), url);
    out.next_upload_id_marker = root.child_value("NextUploadIdMarker");
    return out;
  }

 private:
  // One upstream call whose reply is an XML document; an <Error> reply becomes its Status.
  Result<pugi::xml_document> call_xml(Request r, std::string_view what) {
    r.xml_reply = true;
    auto resp = core_->call(std::move(r));
    if (!resp.ok()) return resp.status();
    return parse_xml(*resp, what);
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
    add_condition(r.headers, cond);
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
    pugi::xml_document doc;
    auto root = doc.append_child("CompleteMultipartUpload");
    root.append_attribute("xmlns") = "http://s3.amazonaws.com/doc/2006-03-01/";
    for (const auto& [n, etag] : named) {
      auto p = root.append_child("Part");
      p.append_child("PartNumber").text().set(n);
      p.append_child("ETag").text().set(quote(etag).c_str());
      for (const auto& info : infos) {
        if (info.part_number != n) continue;
        for (const auto& [algo, v] : info.checksums) {
          auto a = checksum_from_name(algo);
          if (!a) continue;
          const std::string el = "Checksum" + std::string(checksum_name(*a));
          p.append_child(el.c_str()).text().set(v.c_str());
        }
      }
    }
    std::ostringstream os;
    doc.save(os, "", pugi::format_raw | pugi::format_no_declaration);
    const std::string body = os.str();
    Request r = object_request("POST", bucket, key);
    r.query = {{"uploadId", std::string(upload_id)}};
    r.headers.emplace_back("content-type", "application/xml");
    add_condition(r.headers, cond);
    r.body = Body{body.data(), -1, 0, body.size(), 0, 0};
    r.idempotent = false;  // a lost answer may mean it completed: not re-sent
    auto reply = call_xml(std::move(r), "CompleteMultipartUpload");  // an <Error> inside a 200, too
    if (!reply.ok()) return reply.status();
    std::string etag = objdirect::s3::unquote_etag(
        reply->child("CompleteMultipartUploadResult").child_value("ETag"));
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
  return s;
}

}  // namespace objdirect::storage
