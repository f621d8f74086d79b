// The gateway's upstream requests (s3_internal.hpp): libcurl on pooled connections, our SigV4,
// the retry policy shared with the client library (common/retry.hpp).
#include <curl/curl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "auth/sigv4.hpp"
#include "common/checksum.hpp"
#include "common/retry.hpp"
#include "common/time.hpp"
#include "common/uri.hpp"
#include "s3/documents.hpp"
#include "s3/xml.hpp"
#include "storage/s3/s3_internal.hpp"

namespace objdirect::storage::s3gw {

namespace {

// Bodies up to this size are signed with their SHA-256; larger ones go as UNSIGNED-PAYLOAD
// (hashing 8 MiB costs more than the loopback transfer itself).
constexpr std::size_t signed_payload_bytes_max = 256 * 1024;
constexpr long kRecvBufferBytes = 512 * 1024;
constexpr long kUploadBufferBytes = 1 << 20;

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

}  // namespace

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

// Sets up conn for `r` (method, URL, signed headers, body) and returns the curl header list.
curl_slist* Core::prepare(Conn& c, Request& r, Transfer& t, const std::string& tgt) {
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
    } else if (r.body->mem && r.body->length <= signed_payload_bytes_max) {
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
      sigv4::sign(v, {opts.access_key, opts.secret_key}, opts.region, "s3", now, &signing_keys);
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
CURLcode Core::drive(Conn& c) {
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

Status Core::transport_error(CURLcode rc, std::string_view what) const {
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
Result<Response> Core::perform(Request r, Sink* sink, std::size_t body_max,
                               std::uint32_t* attempts_out) {
  if (!r.state && !r.bucket.empty() && r.bucket == opts.state_bucket) {
    // The state bucket is the gateway's own (S3StoreOptions::state_bucket): no client request
    // reaches it. Creating it reads as a name taken by someone else, anything else as absent.
    if (r.method == "PUT" && !r.has_key && r.query.empty())
      return Status(Errc::bucket_already_exists,
                    "The requested bucket name is not available. The bucket namespace is shared "
                    "by all users of the system. Please select a different name and try again.");
    return Status(Errc::no_such_bucket, "The specified bucket does not exist");
  }
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
std::optional<std::string> Core::curl_retry_reason(CURLcode rc) {
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

Result<Response> Core::perform_once(Request& r, Sink* sink, std::size_t body_max, bool& started,
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
Result<Response> Core::call(Request r, std::uint32_t* attempts_out) {
  const std::string what = r.method + " " + target(r);
  auto resp = perform(std::move(r), nullptr, s3_limits::xml_reply_bytes_max, attempts_out);
  if (!resp.ok()) return resp.status();
  if (resp->status < 200 || resp->status > 299) {
    Status st = upstream_error(*resp, what);
    return Status(st.code(), st.message() + resp->retry_note);
  }
  return resp;
}

}  // namespace objdirect::storage::s3gw
