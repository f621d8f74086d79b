// The client's HTTP layer: signed S3 requests over a bounded pool of keep-alive connections.
//
// Boost.Beast, synchronous from the caller's point of view, every read and write with a deadline:
// on plain TCP the socket's non-blocking calls wait in poll(2) (a few system calls per request);
// on https each connection runs its own io_context for the TLS stream. Response bodies with a
// Content-Length are read from the socket straight into the caller's buffer (no copy through a
// parser buffer); request bodies are written from the caller's buffer. TCP_NODELAY is set on
// every connection (without it a small request on a kept-alive connection stalls ~40 ms).
//
// Signing: the signing key comes from a sigv4::SigningKeyCache (derived once per day, not per
// request). Every header of the request (host, x-amz-date, x-amz-content-sha256,
// x-amz-security-token and whatever the caller adds, x-amz-rdma-token included) is in SigV4's
// SignedHeaders. The payload hash is the real SHA-256 for bodies up to
// limits::client_hashed_body_bytes_max, UNSIGNED-PAYLOAD above.
//
// Thread safety: HttpClient is thread-safe; each execute() holds one connection for its
// duration, and callers block in acquire when connections_max are busy.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "auth/sigv4.hpp"
#include "common/retry.hpp"
#include "common/status.hpp"

namespace objdirect::limits {
inline constexpr std::size_t client_hashed_body_bytes_max = 64 * 1024;
// Largest response header section and largest non-data body (XML, error) the client accepts.
inline constexpr std::size_t client_response_header_bytes_max = 64 * 1024;
inline constexpr std::size_t client_response_body_bytes_max = 16 * 1024 * 1024;
}  // namespace objdirect::limits

namespace objdirect {
struct PutOptions;     // objdirect/client.hpp
class SseCustomerKey;  // objdirect/client.hpp
}  // namespace objdirect

namespace objdirect::client {

class ClientCounters;  // client/stats.hpp

struct Endpoint {
  std::string host;         // "127.0.0.1", "[::1]" unbracketed: "::1"
  std::string port;         // "80" when absent ("443" for https)
  std::string host_header;  // as in the URL: "127.0.0.1:9000"
  bool tls = false;         // https: TLS, the server's certificate verified (HttpOptions)
};
// Parses "http://host[:port][/]" and "https://host[:port][/]". Errors: invalid_argument (other
// schemes, a path, a bad port).
Result<Endpoint> parse_endpoint(std::string_view url);

struct HttpRequest {
  std::string method;  // "GET", "PUT", ...
  std::string target;  // encoded path and query: "/bucket/key?partNumber=1&uploadId=x"
  std::vector<std::pair<std::string, std::string>> headers;  // lower-case names, all signed
  std::span<const std::byte> body;
  // Send Content-Length even when the body is empty (PUT/POST).
  bool send_content_length = false;
  // Retry under the client's retry policy (common/retry.hpp). Off for requests whose retry needs
  // more than sending the same bytes again: a token request (a fresh token after a revocation)
  // and CompleteMultipartUpload (a lost answer is confirmed with HEAD); their callers loop.
  // Off also turns off the re-send on a new connection after a stale keep-alive connection.
  bool retry = true;
  // The 2xx reply is XML: a body that does not parse (truncated) is retried, not returned.
  bool xml_reply = false;
};

struct HttpResponse {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;  // lower-case names
  std::string body;              // bodies that were not read into the sink (errors, XML)
  std::uint64_t sink_bytes = 0;  // body bytes placed into the sink
  // Attempts made for this answer (1 without retries) and, after retries, retry::attempts_note
  // (status_from_response appends it to the error message).
  std::uint32_t attempts = 1;
  std::string retry_note;
  bool ok() const noexcept { return status >= 200 && status < 300; }
  std::optional<std::string_view> header(std::string_view lower_name) const;
};

struct HttpOptions {
  Endpoint endpoint;
  sigv4::Credentials credentials;
  std::string session_token;
  std::string region;
  std::uint32_t connections_max = 64;
  std::chrono::milliseconds connect_timeout{10'000};
  std::chrono::milliseconds io_timeout{120'000};
  // Counters for Client::stats(); may be null. Must outlive the HttpClient.
  ClientCounters* stats = nullptr;
  // The retry policy (ClientConfig::max_attempts, retry_mode, ...).
  retry::Policy retry_policy;
  // https: the PEM file of the certificate authorities the server's certificate must chain to;
  // empty: the system's store (OpenSSL's default paths). The certificate must also name the
  // endpoint's host (DNS or IP subjectAltName). There is no way to turn verification off.
  std::string ca_bundle;
  // Virtual-hosted addressing: a request for "/bucket/key?q" goes as "/key?q" with the Host
  // "bucket.<endpoint host:port>" (the server's --domain must be the endpoint's host). The
  // connection still goes to the endpoint's own address (no DNS name per bucket is needed, as
  // curl's --connect-to), whose certificate is the one verified. Buckets that cannot be a DNS
  // label (virtual_host_target) and requests without a bucket stay path-style.
  bool virtual_hosted = false;
  // 307 Temporary Redirects followed per request (to the Location, re-signed for its host, on a
  // connection of its own that is not pooled); past it the request fails with io_error "too
  // many redirects". 0: a 307 is returned to the caller as it is.
  std::uint32_t redirects_max = 3;
};

// The virtual-hosted form of a path-style target: {"bucket.HOST_HEADER", "/key?query"}, or
// nullopt when the target names no bucket ("/", "/?query") or the bucket is not a DNS label
// (3..63 of a-z 0-9 . -, starting and ending with a letter or digit, no "..").
std::optional<std::pair<std::string, std::string>> virtual_host_target(std::string_view host_header,
                                                                       std::string_view target);

// A redirect's Location: "http(s)://host[:port]/path?query" (its endpoint and target) or a path
// "/path?query" on `current`. Errors: invalid_argument (anything else).
Result<std::pair<Endpoint, std::string>> parse_location(std::string_view location,
                                                        const Endpoint& current);

class HttpClient {
 public:
  explicit HttpClient(HttpOptions options);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Signs and sends `req`, then reads the reply. A 2xx body goes into `sink` when one is given
  // (a body longer than the sink is invalid_argument "... larger than the buffer"); every
  // other body goes into HttpResponse::body (at most client_response_body_bytes_max). A request
  // that fails on a reused keep-alive connection before any reply byte arrived is re-sent once
  // on a new connection (the server may have closed it while idle; "stale_connection").
  // With req.retry, a retryable failure (retry_reason) is retried under the retry policy, with
  // its back-off (Retry-After honoured) and a fresh signature; each retry is counted in
  // ClientStats::retry_reasons. The final error names the attempts (retry::attempts_note).
  // HTTP error statuses are not errors here: the caller reads HttpResponse::status.
  // Errors: unavailable (cannot resolve or connect), access_denied (https: the server's
  // certificate does not verify against the CA bundle or does not name the host; the message
  // says which, and it is not retried), timeout (no progress for io_timeout),
  // io_error (connection broken, body shorter than its Content-Length, malformed reply,
  // a truncated XML reply after the last attempt).
  Result<HttpResponse> execute(const HttpRequest& req,
                               std::optional<std::span<std::byte>> sink = std::nullopt);

  // Open connections (idle plus busy), for tests.
  std::size_t connections_open() const;

  // The local IP address of a connection to the server ("10.0.0.2", "::1"): the address of the
  // interface that reaches it. Opens a connection (kept in the pool, no request sent) when none
  // was made yet. Errors: as acquiring a connection (unavailable).
  Result<std::string> local_address();
  // The retry reason of one attempt's outcome (common/retry.hpp names), or nullopt when it is
  // final: success, or an error that is not retried. For callers that run their own loop.
  static std::optional<std::string> retry_reason(const HttpRequest& req,
                                                 const Result<HttpResponse>& r);
  // The Retry-After of a reply, if any.
  static std::optional<std::chrono::milliseconds> retry_after(const Result<HttpResponse>& r);
  retry::Retrier& retrier() noexcept { return retrier_; }
  // The signing keys of these credentials and region (presigned URLs use them too).
  sigv4::SigningKeyCache& signing_keys() noexcept { return signing_keys_; }
  // Counts one retry by reason in ClientStats (callers that run their own loop).
  void count_retry(const std::string& reason);
  // Counts a CompleteMultipartUpload whose lost answer HEAD confirmed (client/complete.hpp).
  void count_complete_confirmed();

  struct Connection;

 private:
  Result<std::unique_ptr<Connection>> acquire(bool fresh);
  // A new connection to `ep` (TLS handshake included for https), outside the pool's count.
  Result<std::unique_ptr<Connection>> connect(const Endpoint& ep);
  // Follows 307s from `r` (at most redirects_max), each on a connection of its own.
  Result<HttpResponse> follow_redirects(const HttpRequest& req,
                                        std::optional<std::span<std::byte>> sink,
                                        Result<HttpResponse> r);
  void release(std::unique_ptr<Connection> c, bool reusable);
  // One attempt, re-sent once on a fresh connection after a stale keep-alive connection.
  Result<HttpResponse> execute_attempt(const HttpRequest& req,
                                       std::optional<std::span<std::byte>> sink);
  // ep: the endpoint the connection goes to (its Host); pooled: the configured endpoint, where
  // virtual_hosted applies.
  Result<HttpResponse> execute_once(Connection& c, const HttpRequest& req,
                                    std::optional<std::span<std::byte>> sink, bool& reply_started,
                                    bool& reusable, const Endpoint& ep, bool pooled);

  struct Tls;  // the OpenSSL client context for https endpoints
  HttpOptions opts_;
  std::shared_ptr<Tls> tls_;
  retry::Retrier retrier_;
  // The SigV4 signing key, derived once a day per (secret, region) instead of per request.
  sigv4::SigningKeyCache signing_keys_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Connection>> idle_;
  std::size_t open_ = 0;
  std::string local_address_;
};

// The Status of a non-2xx reply: from the S3 XML <Code>/<Message> when present, else from the
// HTTP status (404 -> no_such_key, 403 -> access_denied, 412 -> precondition_failed, ...).
// The message ends in request_id_note() of the reply's request id (the XML <RequestId>, else the
// x-amz-request-id header) when there is one: "Not found. (RequestId: 0123ABCD)". Bindings
// (python/objdirect/errors.py) read it back from there.
Status status_from_response(const HttpResponse& r);
// " (RequestId: ID)", or empty for an empty id; the second form takes x-amz-request-id.
std::string request_id_note(std::string_view request_id);
std::string request_id_note(const HttpResponse& r);

// "/bucket/key" with the key percent-encoded (slashes kept); an empty key gives "/bucket".
std::string object_target(std::string_view bucket, std::string_view key);

// Request headers, lower-case names (as HttpRequest::headers).
using Headers = std::vector<std::pair<std::string, std::string>>;

// The content-type and x-amz-meta-* headers of an upload's PutOptions (client_ops.cc), after the
// checks PutOptions documents. Errors: invalid_argument naming the bad name or value.
Result<Headers> put_option_headers(const PutOptions& options);

// SSE-C (sse_c.cc, docs/sse-c.md): the three x-amz-server-side-encryption-customer-* headers of
// `key` (algorithm AES256, the key and its MD5 in base64); copy_source: the
// x-amz-copy-source-server-side-encryption-customer-* names of a copy's source. The key's value
// is a secret: hold the headers in SecretHeaders, and wipe each request that copied them
// (wipe_secret_headers) once it is sent.
Headers sse_c_headers(const SseCustomerKey& key, bool copy_source = false);
// Whether `name` (lower-case) is a header whose value is a secret (an SSE-C key).
bool is_secret_header(std::string_view name);
// Overwrites the values of the secret headers in h (OPENSSL_cleanse), leaving them empty.
void wipe_secret_headers(Headers& h);

// Headers that wipe their secret values when they go (not copyable, so no copy escapes).
struct SecretHeaders {
  Headers h;
  SecretHeaders() = default;
  explicit SecretHeaders(Headers v) : h(std::move(v)) {}
  SecretHeaders(const SecretHeaders&) = delete;
  SecretHeaders& operator=(const SecretHeaders&) = delete;
  ~SecretHeaders() { wipe_secret_headers(h); }
};

// Wipes the secret values of headers it does not own (a request's) when it goes.
struct HeadersWiper {
  Headers& h;
  ~HeadersWiper() { wipe_secret_headers(h); }
};

}  // namespace objdirect::client
