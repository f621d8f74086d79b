#include "client/http_client.hpp"

#include <openssl/crypto.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <tuple>

#include "client/planner.hpp"
#include "client/stats.hpp"
#include "common/checksum.hpp"
#include "common/time.hpp"
#include "common/uri.hpp"
#include "s3/documents.hpp"
#include "s3/xml.hpp"

namespace objdirect::client {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = asio::ip::tcp;

// One keep-alive connection. Each has its own single-threaded io_context: the owning thread runs
// it for the duration of one operation, which gives synchronous calls with deadlines
// (beast::tcp_stream closes the socket when expires_after passes).
// https: TLS over the TCP stream (the plain `stream` is moved into it once connected).
struct HttpClient::Connection {
  asio::io_context ioc{1};
  beast::tcp_stream stream{ioc};
  std::optional<beast::ssl_stream<beast::tcp_stream>> tls;
  beast::flat_buffer buffer;
  bool reused = false;

  beast::tcp_stream& tcp() { return tls ? beast::get_lowest_layer(*tls) : stream; }
  // f(the stream requests are read from and written to).
  template <class F>
  void visit(F&& f) {
    if (tls) {
      f(*tls);
    } else {
      f(stream);
    }
  }
};

// The client's TLS context: TLS 1.2 and up, peers verified against the CA bundle (or the
// system store). Made once per HttpClient; `error` says why it could not be.
struct HttpClient::Tls {
  asio::ssl::context ctx{asio::ssl::context::tls_client};
  std::string error;

  explicit Tls(const std::string& ca_bundle) {
    ctx.set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                    asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                    asio::ssl::context::no_tlsv1_1);
    ctx.set_verify_mode(asio::ssl::verify_peer);
    beast::error_code ec;
    if (ca_bundle.empty()) {
      ctx.set_default_verify_paths(ec);
      if (ec) error = "cannot load the system's CA certificates: " + ec.message();
    } else {
      ctx.load_verify_file(ca_bundle, ec);
      if (ec) error = "cannot load the CA bundle " + ca_bundle + ": " + ec.message();
    }
  }
};

namespace {

// Runs one asynchronous operation to completion on the connection's io_context.
template <class Start>
beast::error_code run_op(HttpClient::Connection& c, std::chrono::milliseconds timeout,
                         std::size_t& n, Start&& start) {
  beast::error_code ec = asio::error::would_block;
  n = 0;
  c.tcp().expires_after(timeout);
  start([&](beast::error_code e, std::size_t k) {
    ec = e;
    n = k;
  });
  c.ioc.restart();
  c.ioc.run();
  return ec;
}

// A plain TCP connection's socket as a synchronous Beast stream: the socket blocks, and its
// SO_RCVTIMEO / SO_SNDTIMEO (set_socket_timeouts: the client's io_timeout) bound each wait: a
// read or write that makes no progress for that long fails with beast::error::timeout. The TLS
// path runs run_op instead. A small GET costs 2-3 system calls this way (send, recv, at most one
// more recv); run_op's deadlines and io_context cost about 12 (a timerfd re-armed per
// operation, two epoll_waits per operation): docs/BENCHMARKS.md, get_many. Asio's own
// synchronous calls cannot stand in: after the socket timeout's EAGAIN they poll without a bound.
class SocketStream {
 public:
  explicit SocketStream(int fd) : fd_(fd) {}

  template <class MutableBuffers>
  std::size_t read_some(const MutableBuffers& buffers, beast::error_code& ec) {
    // The first non-empty buffer only (a short read is allowed): Beast passes one here.
    asio::mutable_buffer b;
    for (asio::mutable_buffer x : beast::buffers_range_ref(buffers)) {
      if (x.size() > 0) {
        b = x;
        break;
      }
    }
    if (b.size() == 0) {
      ec = {};
      return 0;
    }
    return result(no_eintr([&] { return ::recv(fd_, b.data(), b.size(), 0); }), true, ec);
  }
  template <class ConstBuffers>
  std::size_t write_some(const ConstBuffers& buffers, beast::error_code& ec) {
    std::array<iovec, iovecs_max> iov{};
    msghdr msg{};
    msg.msg_iov = iov.data();
    for (asio::const_buffer b : beast::buffers_range_ref(buffers)) {
      if (b.size() == 0) continue;
      if (msg.msg_iovlen == iov.size()) break;  // a short write: the caller sends the rest
      iov[msg.msg_iovlen++] = iovec{const_cast<void*>(b.data()), b.size()};
    }
    if (msg.msg_iovlen == 0) {
      ec = {};
      return 0;
    }
    return result(no_eintr([&] { return ::sendmsg(fd_, &msg, MSG_NOSIGNAL); }), false, ec);
  }
  // The throwing forms Beast's stream concepts name (unused here).
  template <class MutableBuffers>
  std::size_t read_some(const MutableBuffers& b) {
    beast::error_code ec;
    const std::size_t n = read_some(b, ec);
    if (ec) throw beast::system_error(ec);
    return n;
  }
  template <class ConstBuffers>
  std::size_t write_some(const ConstBuffers& b) {
    beast::error_code ec;
    const std::size_t n = write_some(b, ec);
    if (ec) throw beast::system_error(ec);
    return n;
  }

 private:
  // Buffers one sendmsg takes (Beast serializes a request into fewer); the rest goes in the next.
  static constexpr std::size_t iovecs_max = 16;

  template <class Call>
  static ssize_t no_eintr(Call call) {
    ssize_t n;
    do {
      n = call();
    } while (n < 0 && errno == EINTR);
    return n;
  }
  // A call's outcome as Beast wants it: 0 bytes read is the peer's end (eof); a failure is its
  // errno, the socket's timeout (EAGAIN) being beast::error::timeout.
  static std::size_t result(ssize_t n, bool reading, beast::error_code& ec) {
    if (n > 0 || (n == 0 && !reading)) {
      ec = {};
      return static_cast<std::size_t>(n);
    }
    if (n == 0) {
      ec = asio::error::eof;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      ec = beast::error::timeout;
    } else {
      ec = beast::error_code(errno, beast::system_category());
    }
    return 0;
  }

  int fd_;
};
static_assert(beast::is_sync_read_stream<SocketStream>::value);
static_assert(beast::is_sync_write_stream<SocketStream>::value);

// Makes a plain connection's socket ready for SocketStream: blocking (async_connect left it
// non-blocking), each read and write bounded by `timeout` (at least 1 ms: 0 would mean no bound).
beast::error_code set_socket_timeouts(tcp::socket& s, std::chrono::milliseconds timeout) {
  beast::error_code ec;
  s.native_non_blocking(false, ec);
  if (ec) return ec;
  const std::int64_t ms = std::max<std::int64_t>(timeout.count(), 1);
  const timeval tv{static_cast<time_t>(ms / 1000), static_cast<suseconds_t>((ms % 1000) * 1000)};
  for (int opt : {SO_RCVTIMEO, SO_SNDTIMEO}) {
    if (::setsockopt(s.native_handle(), SOL_SOCKET, opt, &tv, sizeof(tv)) != 0) {
      return beast::error_code(errno, beast::system_category());
    }
  }
  return ec;
}

// The client's read buffer holds at least this much while a response header is read.
constexpr std::size_t kHeaderReadBytes = 16 * 1024;

// The phases an I/O failure names (io_status); retry_reason reads them back.
constexpr std::string_view kSending = "sending request";
constexpr std::string_view kReadingHeader = "reading response header";
constexpr std::string_view kReadingBody = "reading response body";

Status io_status(const beast::error_code& ec, std::string_view what) {
  if (ec == beast::error::timeout) {
    return Status(Errc::timeout, std::string(what) + ": no progress within the I/O timeout");
  }
  return Status(Errc::io_error, std::string(what) + ": " + ec.message());
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& ch : out) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

// A 206 whose body is shorter (or longer) than its Content-Range says: well framed (its
// Content-Length matched), but not the range it claims, as when a middlebox cut the body and
// fixed up Content-Length. Retried as "short_body" like a body cut before its Content-Length,
// on every path that reads a range (get_one, the parallel parts, execute_rdma's fallback body,
// the device staging chunks), instead of surfacing as "reply carried N bytes for a range of M".
// An RDMA reply (x-amz-rdma-reply 200/206/204) carries no body: the fabric moved the bytes.
bool short_range_body(const HttpResponse& r) {
  if (auto reply = r.header("x-amz-rdma-reply");
      reply && (*reply == "200" || *reply == "206" || *reply == "204")) {
    return false;
  }
  auto cr = parse_content_range(r.header("content-range").value_or(""));
  if (!cr) return false;  // a malformed Content-Range is the caller's io_error, not a retry
  const std::uint64_t body = r.sink_bytes > 0 ? r.sink_bytes : r.body.size();
  return cr->last - cr->first + 1 != body;
}

}  // namespace

Result<Endpoint> parse_endpoint(std::string_view url) {
  const bool tls = url.starts_with("https://");
  if (!tls && !url.starts_with("http://")) {
    return Status(Errc::invalid_argument,
                  "endpoint must be http://HOST[:PORT] or https://HOST[:PORT], got '" +
                      std::string(url) + "'");
  }
  std::string_view rest = url.substr(tls ? 8 : 7);
  while (rest.ends_with('/')) rest.remove_suffix(1);
  if (rest.empty() || rest.find('/') != std::string_view::npos) {
    return Status(
        Errc::invalid_argument,
        "endpoint must be http(s)://HOST[:PORT] without a path, got '" + std::string(url) + "'");
  }
  Endpoint e;
  e.tls = tls;
  e.host_header = std::string(rest);
  std::string_view host = rest;
  std::string_view port = tls ? "443" : "80";
  if (rest.front() == '[') {
    auto close = rest.find(']');
    if (close == std::string_view::npos) {
      return Status(Errc::invalid_argument, "bad IPv6 endpoint '" + std::string(url) + "'");
    }
    host = rest.substr(1, close - 1);
    if (close + 1 < rest.size()) {
      if (rest[close + 1] != ':') return Status(Errc::invalid_argument, "bad endpoint port");
      port = rest.substr(close + 2);
    }
  } else if (auto colon = rest.rfind(':'); colon != std::string_view::npos) {
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  }
  if (host.empty() || port.empty() ||
      !std::all_of(port.begin(), port.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
    return Status(Errc::invalid_argument, "bad endpoint '" + std::string(url) + "'");
  }
  e.host = std::string(host);
  e.port = std::string(port);
  return e;
}

std::optional<std::string_view> HttpResponse::header(std::string_view lower_name) const {
  for (const auto& [k, v] : headers) {
    if (k == lower_name) return std::string_view(v);
  }
  return std::nullopt;
}

std::string object_target(std::string_view bucket, std::string_view key) {
  std::string t = "/" + uri_encode(bucket, true);
  if (!key.empty()) t += "/" + uri_encode(key, false);
  return t;
}

HttpClient::HttpClient(HttpOptions options)
    : opts_(std::move(options)), retrier_(opts_.retry_policy) {
  if (opts_.connections_max == 0) opts_.connections_max = 1;
  // Also for http endpoints: a 307 may redirect to https.
  tls_ = std::make_shared<Tls>(opts_.ca_bundle);
}

HttpClient::~HttpClient() = default;

Result<std::string> HttpClient::local_address() {
  {
    std::lock_guard lk(mu_);
    if (!local_address_.empty()) return local_address_;
  }
  auto c = acquire(false);
  if (!c.ok()) return c.status();
  release(std::move(*c), true);
  std::lock_guard lk(mu_);
  return local_address_;
}

std::size_t HttpClient::connections_open() const {
  std::lock_guard lk(mu_);
  return open_;
}

Result<std::unique_ptr<HttpClient::Connection>> HttpClient::acquire(bool fresh) {
  {
    std::unique_lock lk(mu_);
    for (;;) {
      if (!fresh && !idle_.empty()) {
        auto c = std::move(idle_.back());
        idle_.pop_back();
        return c;
      }
      if (fresh && !idle_.empty() && open_ >= opts_.connections_max) {
        idle_.pop_back();  // make room for a new one
        --open_;
      }
      if (open_ < opts_.connections_max) {
        ++open_;
        break;
      }
      cv_.wait(lk);
    }
  }
  auto c = connect(opts_.endpoint);
  if (!c.ok()) {
    std::lock_guard lk(mu_);
    --open_;
    cv_.notify_one();
  }
  return c;
}

Result<std::unique_ptr<HttpClient::Connection>> HttpClient::connect(const Endpoint& ep) {
  auto c = std::make_unique<Connection>();
  auto fail = [](Status st) -> Result<std::unique_ptr<Connection>> { return st; };
  beast::error_code ec;
  tcp::resolver resolver(c->ioc);
  auto results = resolver.resolve(ep.host, ep.port, ec);
  if (ec) {
    return fail(Status(Errc::unavailable, "cannot resolve " + ep.host + ": " + ec.message()));
  }
  ec = asio::error::would_block;
  c->stream.expires_after(opts_.connect_timeout);
  c->stream.async_connect(results, [&](beast::error_code e, const tcp::endpoint&) { ec = e; });
  c->ioc.restart();
  c->ioc.run();
  if (ec) {
    return fail(
        Status(Errc::unavailable, "cannot connect to " + ep.host_header + ": " + ec.message()));
  }
  c->stream.socket().set_option(tcp::no_delay(true), ec);
  if (!ep.tls) {
    // Plain TCP requests run on SocketStream.
    if (auto tec = set_socket_timeouts(c->stream.socket(), opts_.io_timeout); tec) {
      return fail(Status(Errc::unavailable, "cannot set the socket's timeouts: " + tec.message()));
    }
  }
  if (auto local = c->stream.socket().local_endpoint(ec); !ec && &ep == &opts_.endpoint) {
    std::lock_guard lk(mu_);
    local_address_ = local.address().to_string();
  }
  if (ep.tls) {
    if (!tls_->error.empty()) return fail(Status(Errc::invalid_argument, tls_->error));
    c->tls.emplace(std::move(c->stream), tls_->ctx);
    const std::string& host = ep.host;
    beast::error_code addr_ec;
    (void)asio::ip::make_address(host, addr_ec);
    // SNI for names (not for IP literals, RFC 6066). The certificate must name the host either
    // way (DNS or IP subjectAltName): OpenSSL's own check, so that a mismatch is reported as one.
    SSL* ssl = c->tls->native_handle();
    const bool named = addr_ec
                           ? SSL_set_tlsext_host_name(ssl, host.c_str()) == 1 &&
                                 SSL_set1_host(ssl, host.c_str()) == 1
                           : X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host.c_str()) == 1;
    if (!named)
      return fail(Status(Errc::invalid_argument, "cannot set the TLS server name " + host));
    ec = asio::error::would_block;
    c->tcp().expires_after(opts_.connect_timeout);
    c->tls->async_handshake(asio::ssl::stream_base::client, [&](beast::error_code e) { ec = e; });
    c->ioc.restart();
    c->ioc.run();
    if (ec) {
      const long verify = SSL_get_verify_result(c->tls->native_handle());
      if (verify != X509_V_OK) {
        std::string why = X509_verify_cert_error_string(verify);
        if (verify == X509_V_ERR_HOSTNAME_MISMATCH || verify == X509_V_ERR_IP_ADDRESS_MISMATCH) {
          why = "the certificate does not name " + host;
        }
        return fail(
            Status(Errc::access_denied,
                   "TLS: the certificate of " + ep.host_header + " was refused: " + why +
                       (opts_.ca_bundle.empty() ? " (checked against the system's CA "
                                                  "store; set ca_bundle / AWS_CA_BUNDLE)"
                                                : " (checked against " + opts_.ca_bundle + ")")));
      }
      return fail(Status(Errc::unavailable,
                         "TLS handshake with " + ep.host_header + " failed: " + ec.message()));
    }
  }
  return c;
}

void HttpClient::release(std::unique_ptr<Connection> c, bool reusable) {
  std::lock_guard lk(mu_);
  if (reusable) {
    c->reused = true;
    idle_.push_back(std::move(c));
  } else {
    --open_;
  }
  cv_.notify_one();
}

Result<HttpResponse> HttpClient::execute(const HttpRequest& req,
                                         std::optional<std::span<std::byte>> sink) {
  std::optional<ClientCounters::InFlight> in_flight;
  if (opts_.stats) in_flight.emplace(*opts_.stats);
  std::string reasons;
  // A request that carries an RDMA token is never sent twice, whatever req.retry says: each
  // token is accepted once (docs/rdma_protocol.md), so a retry needs a fresh one (the client's
  // own RDMA loop makes it).
  const bool retry =
      req.retry && std::none_of(req.headers.begin(), req.headers.end(),
                                [](const auto& h) { return h.first == "x-amz-rdma-token"; });
  for (std::uint32_t attempt = 1;; ++attempt) {
    if (retry) retrier_.before_attempt();
    auto r = execute_attempt(req, sink);
    auto reason = retry ? retry_reason(req, r) : std::nullopt;
    if (retry) retrier_.after_attempt(reason);
    if (!reason || !retrier_.may_retry(attempt)) {
      if (attempt == 1) return r;
      if (reason) reasons += (reasons.empty() ? "" : ", ") + *reason;
      const std::string note = retry::attempts_note(attempt, reasons);
      if (!r.ok()) return Status(r.code(), r.status().message() + note);
      if (reason && *reason == "truncated_xml") {
        return Status(Errc::io_error,
                      "reply to " + req.method + " " + req.target + " is not complete XML" + note);
      }
      if (reason && *reason == "short_body" && r.ok()) {
        return Status(Errc::io_error, "reply to " + req.method + " " + req.target +
                                          ": body does not match its Content-Range " +
                                          std::string(r->header("content-range").value_or("")) +
                                          note);
      }
      r->attempts = attempt;
      r->retry_note = note;
      return r;
    }
    count_retry(*reason);
    reasons += (reasons.empty() ? "" : ", ") + *reason;
    retrier_.sleep_before(attempt, retry_after(r));
  }
}

Result<HttpResponse> HttpClient::execute_attempt(const HttpRequest& req,
                                                 std::optional<std::span<std::byte>> sink) {
  for (int attempt = 0;; ++attempt) {
    auto conn = acquire(attempt > 0);
    if (!conn.ok()) {
      if (opts_.stats) opts_.stats->on_response(req, conn.status());
      return conn.status();
    }
    bool reply_started = false, reusable = false;
    bool was_reused = (*conn)->reused;
    auto r = execute_once(**conn, req, sink, reply_started, reusable, opts_.endpoint, true);
    release(std::move(*conn), r.ok() && reusable);
    if (opts_.stats) opts_.stats->on_response(req, r);
    if (r.ok() && r->status == 307 && opts_.redirects_max > 0) {
      return follow_redirects(req, sink, std::move(r));
    }
    if (r.ok() || reply_started || !was_reused || attempt > 0 || !req.retry) return r;
    count_retry("stale_connection");
  }
}

Result<HttpResponse> HttpClient::follow_redirects(const HttpRequest& req,
                                                  std::optional<std::span<std::byte>> sink,
                                                  Result<HttpResponse> r) {
  for (std::uint32_t hops = 0; r.ok() && r->status == 307; ++hops) {
    auto location = r->header("location");
    if (!location) return r;  // nowhere to go: the caller sees the 307
    if (hops == opts_.redirects_max) {
      return Status(Errc::io_error, "too many redirects: " + req.method + " " + req.target +
                                        " was redirected more than redirects_max (" +
                                        std::to_string(opts_.redirects_max) + ") times, last to " +
                                        std::string(*location));
    }
    auto to = parse_location(*location, opts_.endpoint);
    if (!to.ok()) {
      return Status(Errc::io_error, "cannot follow the redirect of " + req.method + " " +
                                        req.target + ": " + to.status().message());
    }
    auto conn = connect(to->first);
    if (!conn.ok()) return conn.status();
    HttpRequest next = req;
    next.target = to->second;
    bool started = false, reusable = false;
    r = execute_once(**conn, next, sink, started, reusable, to->first, false);
    if (opts_.stats) opts_.stats->on_response(next, r);
  }
  return r;
}

std::optional<std::pair<std::string, std::string>> virtual_host_target(std::string_view host_header,
                                                                       std::string_view target) {
  if (!target.starts_with('/')) return std::nullopt;
  std::string_view rest = target.substr(1);
  const std::size_t end = rest.find_first_of("/?");
  const std::string_view bucket = rest.substr(0, end);
  const bool label = bucket.size() >= 3 && bucket.size() <= 63 &&
                     bucket.find("..") == std::string_view::npos &&
                     std::all_of(bucket.begin(), bucket.end(),
                                 [](char ch) {
                                   return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
                                          ch == '-' || ch == '.';
                                 }) &&
                     std::isalnum(static_cast<unsigned char>(bucket.front())) &&
                     std::isalnum(static_cast<unsigned char>(bucket.back()));
  if (!label) return std::nullopt;
  std::string path = end == std::string_view::npos ? "/" : std::string(rest.substr(end));
  if (path.starts_with('?')) path.insert(0, "/");
  return std::make_pair(std::string(bucket) + "." + std::string(host_header), std::move(path));
}

Result<std::pair<Endpoint, std::string>> parse_location(std::string_view location,
                                                        const Endpoint& current) {
  if (location.starts_with('/')) return std::make_pair(current, std::string(location));
  const std::size_t scheme_end = location.find("://");
  if (scheme_end == std::string_view::npos) {
    return Status(Errc::invalid_argument,
                  "Location '" + std::string(location) + "' is neither a URL nor an absolute path");
  }
  const std::size_t path = location.find('/', scheme_end + 3);
  auto ep = parse_endpoint(location.substr(0, path));
  if (!ep.ok()) return ep.status();
  return std::make_pair(
      *ep, path == std::string_view::npos ? std::string("/") : std::string(location.substr(path)));
}

void HttpClient::count_retry(const std::string& reason) {
  if (opts_.stats) opts_.stats->on_retry(reason);
}

void HttpClient::count_complete_confirmed() {
  if (opts_.stats) opts_.stats->on_complete_confirmed();
}

std::optional<std::string> HttpClient::retry_reason(const HttpRequest& req,
                                                    const Result<HttpResponse>& r) {
  if (!r.ok()) {
    const std::string m = r.status().message();
    switch (r.code()) {
      case Errc::unavailable:
        return std::string("connection_refused");
      case Errc::timeout:
        return std::string("timeout");
      case Errc::io_error:
        if (m.starts_with(kReadingBody)) return std::string("short_body");
        if (m.starts_with(kSending) || m.starts_with(kReadingHeader)) {
          return std::string("connection_reset");
        }
        return std::nullopt;
      default:
        return std::nullopt;
    }
  }
  if (!r->ok()) {
    auto [code, message, request_id] = s3::parse_error_xml(r->body);
    return retry::classify_status(r->status, code);
  }
  if (r->status == 206 && req.method != "HEAD" && short_range_body(*r)) {
    return std::string("short_body");
  }
  if (req.xml_reply && !r->body.empty()) {
    const auto shape = s3::reply_shape(r->body);
    if (!shape.well_formed) return std::string("truncated_xml");
    // S3 answers some calls (CompleteMultipartUpload, copies) 200 with an <Error> inside.
    if (!shape.error_code.empty()) return retry::classify_status(0, shape.error_code);
  }
  return std::nullopt;
}

std::optional<std::chrono::milliseconds> HttpClient::retry_after(const Result<HttpResponse>& r) {
  if (!r.ok()) return std::nullopt;
  auto h = r->header("retry-after");
  if (!h) return std::nullopt;
  return retry::parse_retry_after(*h, std::chrono::system_clock::now());
}

namespace {

// The allocator of the request's header fields: what it frees is wiped first (OPENSSL_cleanse),
// so that an SSE-C key's header value does not stay behind in freed memory (docs/sse-c.md).
template <class T>
struct WipingAllocator {
  using value_type = T;
  WipingAllocator() = default;
  template <class U>
  WipingAllocator(const WipingAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) { return std::allocator<T>().allocate(n); }
  void deallocate(T* p, std::size_t n) noexcept {
    OPENSSL_cleanse(p, n * sizeof(T));
    std::allocator<T>().deallocate(p, n);
  }
  template <class U>
  bool operator==(const WipingAllocator<U>&) const noexcept {
    return true;
  }
};

using RequestFields = bhttp::basic_fields<WipingAllocator<char>>;

}  // namespace

Result<HttpResponse> HttpClient::execute_once(Connection& c, const HttpRequest& req,
                                              std::optional<std::span<std::byte>> sink,
                                              bool& reply_started, bool& reusable,
                                              const Endpoint& ep, bool pooled) {
  reply_started = false;
  reusable = false;
  const auto now = std::chrono::system_clock::now();

  // --- address: path-style, or the bucket in the Host ---
  std::string host = ep.host_header;
  std::string target = req.target;
  if (pooled && opts_.virtual_hosted) {
    if (auto v = virtual_host_target(host, target)) std::tie(host, target) = std::move(*v);
  }

  // --- sign ---
  sigv4::RequestView view;
  HeadersWiper wipe_view{view.headers};
  view.method = req.method;
  view.target = target;
  view.headers.reserve(req.headers.size() + 5);
  view.headers.emplace_back("host", host);
  view.headers.emplace_back("x-amz-date", amz_date(now));
  bool has_hash = false;
  for (const auto& h : req.headers) has_hash = has_hash || h.first == "x-amz-content-sha256";
  if (!has_hash) {
    std::string hash;
    if (req.body.size() <= limits::client_hashed_body_bytes_max) {
      hash = sha256_hex(
          std::string_view(reinterpret_cast<const char*>(req.body.data()), req.body.size()));
    } else {
      hash = std::string(sigv4::kUnsignedPayload);
    }
    view.headers.emplace_back("x-amz-content-sha256", std::move(hash));
  }
  if (!opts_.session_token.empty()) {
    view.headers.emplace_back("x-amz-security-token", opts_.session_token);
  }
  for (const auto& h : req.headers) view.headers.push_back(h);
  std::string authorization =
      sigv4::sign(view, opts_.credentials, opts_.region, "s3", now, &signing_keys_);

  // --- write ---
  bhttp::request<bhttp::buffer_body, RequestFields> msg;
  msg.method_string(req.method);
  msg.target(target);
  msg.version(11);
  for (const auto& [k, v] : view.headers) msg.set(k, v);
  msg.set(bhttp::field::authorization, authorization);
  msg.keep_alive(true);
  if (!req.body.empty() || req.send_content_length) msg.content_length(req.body.size());
  msg.body().data =
      req.body.empty() ? nullptr : const_cast<void*>(static_cast<const void*>(req.body.data()));
  msg.body().size = req.body.size();
  msg.body().more = false;

  bhttp::request_serializer<bhttp::buffer_body, RequestFields> sr(msg);
  std::size_t n = 0;
  // A server that answers before it has read the body (a 403 or 400 on the header alone) may
  // close the connection while the body is still being sent: the write then fails with EPIPE or
  // ECONNRESET, but the answer is already in the socket's receive queue. Read it: the caller
  // gets the server's S3 error (a 4xx is not retried) instead of "Broken pipe".
  beast::error_code send_ec;
  std::optional<SocketStream> plain;  // plain TCP: SocketStream; https: run_op
  if (!c.tls) plain.emplace(c.stream.socket().native_handle());
  while (!sr.is_done()) {
    beast::error_code ec;
    if (plain) {
      bhttp::write_some(*plain, sr, ec);
    } else {
      ec = run_op(c, opts_.io_timeout, n, [&](auto h) {
        c.visit([&](auto& s) { bhttp::async_write_some(s, sr, std::move(h)); });
      });
    }
    if (ec == asio::error::broken_pipe || ec == asio::error::connection_reset) {
      send_ec = ec;
      break;
    }
    if (ec) return io_status(ec, kSending);
  }

  // --- read the header ---
  bhttp::response_parser<bhttp::buffer_body> p;
  p.header_limit(static_cast<std::uint32_t>(limits::client_response_header_bytes_max));
  p.body_limit(boost::none);
  if (req.method == "HEAD") p.skip(true);
  beast::error_code ec;
  if (plain) {
    // Room for a small body beside the header: one recv takes the whole answer of a small GET
    // (Beast reads at most the buffer's free capacity), and the copy out of it is cheaper than a
    // second system call. A larger body is read straight into its destination below.
    if (c.buffer.capacity() < kHeaderReadBytes) c.buffer.reserve(kHeaderReadBytes);
    bhttp::read_header(*plain, c.buffer, p, ec);
  } else {
    ec = run_op(c, opts_.io_timeout, n, [&](auto h) {
      c.visit([&](auto& s) { bhttp::async_read_header(s, c.buffer, p, std::move(h)); });
    });
  }
  reply_started = p.got_some();
  if (ec) return send_ec ? io_status(send_ec, kSending) : io_status(ec, kReadingHeader);
  if (send_ec && p.get().result_int() < 400) {
    // Only an error explains a request that could not be sent whole.
    reply_started = false;
    return io_status(send_ec, kSending);
  }

  HttpResponse r;
  r.status = static_cast<int>(p.get().result_int());
  for (const auto& f : p.get())
    r.headers.emplace_back(lower(f.name_string()), std::string(f.value()));
  const bool to_sink = sink.has_value() && r.ok();

  // --- read the body ---
  if (!p.is_done() && p.content_length() && !p.chunked()) {
    // Known length: take what the header read already buffered, then read from the socket
    // straight into the destination.
    const std::uint64_t len = *p.content_length();
    std::byte* dest = nullptr;
    if (to_sink) {
      if (len > sink->size()) {
        return Status(Errc::invalid_argument, "response body of " + std::to_string(len) +
                                                  " bytes is larger than the " +
                                                  std::to_string(sink->size()) + "-byte buffer");
      }
      dest = sink->data();
    } else {
      if (len > limits::client_response_body_bytes_max) {
        return Status(Errc::io_error, "response body of " + std::to_string(len) +
                                          " bytes exceeds the client's limit");
      }
      r.body.resize(len);
      dest = reinterpret_cast<std::byte*>(r.body.data());
    }
    std::uint64_t got = std::min<std::uint64_t>(c.buffer.size(), len);
    if (got > 0) {
      std::memcpy(dest, c.buffer.data().data(), got);
      c.buffer.consume(got);
    }
    while (got < len) {
      const std::size_t want =
          static_cast<std::size_t>(std::min<std::uint64_t>(len - got, 64u << 20));
      if (plain) {
        n = plain->read_some(asio::buffer(dest + got, want), ec);
      } else {
        ec = run_op(c, opts_.io_timeout, n, [&](auto h) {
          c.visit(
              [&](auto& s) { s.async_read_some(asio::buffer(dest + got, want), std::move(h)); });
        });
      }
      if (ec) return io_status(ec, kReadingBody);
      got += n;
    }
    if (to_sink) r.sink_bytes = len;
    reusable = !send_ec && p.get().keep_alive() && c.buffer.size() == 0;
    return r;
  }

  // Chunked or delimited by close: let the parser frame it.
  std::vector<std::byte> chunk;
  std::uint64_t got = 0;
  while (!p.is_done()) {
    std::byte* dest;
    std::size_t room;
    if (to_sink) {
      if (got == sink->size()) {
        return Status(Errc::invalid_argument, "response body is larger than the " +
                                                  std::to_string(sink->size()) + "-byte buffer");
      }
      dest = sink->data() + got;
      room = static_cast<std::size_t>(std::min<std::uint64_t>(sink->size() - got, 64u << 20));
    } else {
      if (chunk.empty()) chunk.resize(64 * 1024);
      dest = chunk.data();
      room = chunk.size();
    }
    p.get().body().data = dest;
    p.get().body().size = room;
    if (plain) {
      bhttp::read(*plain, c.buffer, p, ec);
    } else {
      ec = run_op(c, opts_.io_timeout, n, [&](auto h) {
        c.visit([&](auto& s) { bhttp::async_read(s, c.buffer, p, std::move(h)); });
      });
    }
    if (ec == bhttp::error::need_buffer) ec = {};
    if (ec == bhttp::error::end_of_stream && p.is_done()) ec = {};
    if (ec) return io_status(ec, kReadingBody);
    const std::size_t wrote = room - p.get().body().size;
    if (!to_sink) {
      if (r.body.size() + wrote > limits::client_response_body_bytes_max) {
        return Status(Errc::io_error, "response body exceeds the client's limit");
      }
      r.body.append(reinterpret_cast<const char*>(dest), wrote);
    }
    got += wrote;
  }
  if (to_sink) r.sink_bytes = got;
  reusable = !send_ec && p.get().keep_alive();
  return r;
}

Status status_from_response(const HttpResponse& r) {
  auto [code, message, request_id] = s3::parse_error_xml(r.body);
  Errc errc = code.empty() ? from_http_status(r.status) : from_s3_code(code);
  if (message.empty()) {
    message = "HTTP " + std::to_string(r.status);
    if (!code.empty()) message += " " + code;
  }
  if (request_id.empty()) request_id = std::string(r.header("x-amz-request-id").value_or(""));
  return Status(errc, std::move(message) + request_id_note(request_id) + r.retry_note);
}

std::string request_id_note(std::string_view request_id) {
  if (request_id.empty()) return {};
  return " (RequestId: " + std::string(request_id) + ")";
}

std::string request_id_note(const HttpResponse& r) {
  return request_id_note(r.header("x-amz-request-id").value_or(""));
}

}  // namespace objdirect::client
