#include "client/complete.hpp"

#include <vector>

#include "client/s3_xml.hpp"
#include "client/stats.hpp"
#include "common/checksum.hpp"
#include "common/uri.hpp"

namespace objdirect::client {
namespace {

// Whether HEAD shows the object this Complete makes (expected: the multipart ETag, or empty when
// the parts' ETags are not MD5s and only the "-N" suffix can be checked).
std::optional<std::string> completed_etag(HttpClient& http, const std::string& target,
                                          const std::string& expected, std::size_t n_parts,
                                          const Headers& sse) {
  HttpRequest head;
  HeadersWiper wipe{head.headers};
  head.method = "HEAD";
  head.target = target;
  head.headers = sse;
  auto r = http.execute(head);
  if (!r.ok() || !r->ok()) return std::nullopt;
  std::string etag = s3::unquote_etag(r->header("etag").value_or(""));
  if (!expected.empty()) {
    if (etag == expected) return etag;
    return std::nullopt;
  }
  std::string suffix(1, '-');
  suffix += std::to_string(n_parts);
  if (etag.ends_with(suffix)) return etag;
  return std::nullopt;
}

}  // namespace

Result<std::string> complete_upload_confirmed(
    HttpClient& http, const std::string& target, const std::string& upload_id,
    std::span<const std::pair<std::uint32_t, std::string>> parts,
    std::span<const std::string> crc32c, const Headers& sse) {
  std::vector<std::string> md5s;
  md5s.reserve(parts.size());
  for (const auto& p : parts) md5s.push_back(p.second);
  const std::string expected = multipart_etag(md5s).value_or("");

  const std::string body = complete_multipart_body(parts, crc32c);
  HttpRequest req;
  HeadersWiper wipe{req.headers};
  req.method = "POST";
  req.target = target + "?uploadId=" + uri_encode(upload_id, true);
  req.send_content_length = true;
  req.body = std::as_bytes(std::span(body.data(), body.size()));
  req.headers.emplace_back("content-type", "application/xml");
  req.headers.insert(req.headers.end(), sse.begin(), sse.end());
  req.retry = false;  // the loop is here
  req.xml_reply = true;

  retry::Retrier& retrier = http.retrier();
  std::string reasons;
  bool maybe_done = false;  // an earlier attempt may have completed the upload
  for (std::uint32_t attempt = 1;; ++attempt) {
    retrier.before_attempt();
    auto r = http.execute(req);
    auto reason = HttpClient::retry_reason(req, r);
    retrier.after_attempt(reason);
    if (!reason) {
      if (!r->ok()) {
        Status st = status_from_response(*r);
        if (maybe_done && st.code() == Errc::no_such_upload) {
          if (auto etag = completed_etag(http, target, expected, parts.size(), sse)) {
            http.count_complete_confirmed();
            return *etag;
          }
        }
        if (attempt > 1)
          return Status(st.code(), st.message() + retry::attempts_note(attempt, reasons));
        return st;
      }
      auto etag = parse_complete_reply(r->body);
      if (!etag.ok() && maybe_done && etag.code() == Errc::no_such_upload) {
        if (auto done = completed_etag(http, target, expected, parts.size(), sse)) {
          http.count_complete_confirmed();
          return *done;
        }
      }
      return etag;
    }
    // A 4xx/5xx error reply came from a server that did not complete; anything else (no answer,
    // a cut or truncated reply) may have completed it.
    const bool answered_error = r.ok() && !r->ok();
    maybe_done = maybe_done || !answered_error;
    reasons += (reasons.empty() ? "" : ", ") + *reason;
    if (maybe_done) {
      if (auto etag = completed_etag(http, target, expected, parts.size(), sse)) {
        http.count_retry(*reason);
        http.count_complete_confirmed();
        return *etag;
      }
    }
    if (!retrier.may_retry(attempt)) {
      const std::string note = retry::attempts_note(attempt, reasons);
      if (!r.ok()) return Status(r.code(), r.status().message() + note);
      if (!r->ok()) {
        Status st = status_from_response(*r);
        return Status(st.code(), st.message() + note);
      }
      return Status(Errc::io_error, "CompleteMultipartUpload reply is not complete XML" + note);
    }
    http.count_retry(*reason);
    retrier.sleep_before(attempt, r.ok() ? HttpClient::retry_after(r) : std::nullopt);
  }
}

}  // namespace objdirect::client
