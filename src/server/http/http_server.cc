#include "server/http/http_server.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/sendfile.h>
#include <sys/socket.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/version.hpp>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <type_traits>

#include "common/assert.hpp"
#include "common/blocking.hpp"
#include "common/scratch_buffer.hpp"
#include "common/time.hpp"

namespace objdirect::http {

namespace bhttp = beast::http;
using asio::use_awaitable;
constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);

asio::awaitable<Result<std::string>> Exchange::read_body_string(std::size_t max_bytes) {
  std::string out;
  std::byte chunk[16384];
  for (;;) {
    auto n = co_await read_body(chunk);
    if (!n.ok()) co_return n.status();
    if (*n == 0) break;
    if (out.size() + *n > max_bytes) {
      co_return Status(Errc::entity_too_large,
                       "Request body exceeds the limit of " + std::to_string(max_bytes) + " bytes");
    }
    out.append(reinterpret_cast<const char*>(chunk), *n);
  }
  co_return out;
}

namespace {

std::string available_congestion_controls() {
  std::string names;
  std::ifstream in("/proc/sys/net/ipv4/tcp_available_congestion_control");
  return std::getline(in, names) && !names.empty() ? names : "unknown";
}

Status set_tcp_congestion(int fd, const std::string& name) {
  if (name.size() > limits::tcp_congestion_name_bytes_max) {
    return Status(Errc::invalid_argument,
                  "TCP congestion control name longer than " +
                      std::to_string(limits::tcp_congestion_name_bytes_max) + " bytes");
  }
  if (::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(),
                   static_cast<socklen_t>(name.size())) != 0) {
    const int err = errno;
    std::string why = err == ENOENT ? "not available in this kernel"
                      : err == EPERM
                          ? "not in net.ipv4.tcp_allowed_congestion_control (root may set any)"
                          : std::strerror(err);
    return Status(Errc::invalid_argument, "TCP congestion control '" + name + "': " + why +
                                              " (available: " + available_congestion_controls() +
                                              ")");
  }
  return Status::Ok();
}

// Room kept in the connection's read buffer while a body is read (Beast's largest single read).
constexpr std::size_t kBodyReadBytes = 65536;
// A connection's read buffer above this is shrunk after each request.
constexpr std::size_t kIdleReadBufferBytes = 16384;

// The per-request Exchange over a Beast parser whose body is read in caller-provided buffers.
// Stream is beast::tcp_stream (plain HTTP, bodies leave by sendfile) or an ssl_stream over it.
template <class Stream>
class BeastExchange final : public Exchange {
 public:
  BeastExchange(Stream& stream, beast::flat_buffer& buffer,
                bhttp::request_parser<bhttp::buffer_body>& parser, const ServerOptions& opts,
                std::string remote)
      : stream_(stream),
        buffer_(buffer),
        parser_(parser),
        opts_(opts),
        remote_(std::move(remote)) {}

  const RequestHeader& request() const override { return parser_.get().base(); }
  const std::string& remote_address() const override { return remote_; }

  asio::awaitable<Result<std::size_t>> read_body(std::span<std::byte> dst) override {
    if (parser_.is_done() || dst.empty()) co_return std::size_t{0};
    // Clients that ask before sending a body (boto3, awscli, the AWS SDKs) wait for this.
    if (auto st = co_await send_continue(); !st.ok()) {
      co_return Status(Errc::incomplete_body, st.message());
    }
    // Beast reads min(64 KiB, free capacity, at least 512 bytes) per recv into buffer_, which the
    // header left at about 1 KiB: without room, a 256 MiB body took ~250k recv calls and
    // 10 server CPU-s/GiB (docs/BENCHMARKS.md). Make room for full 64 KiB reads.
    if (buffer_.capacity() - buffer_.size() < kBodyReadBytes) {
      buffer_.reserve(buffer_.size() + kBodyReadBytes);
    }
    auto& body = parser_.get().body();
    body.data = dst.data();
    body.size = dst.size();
    tcp().expires_after(opts_.idle_timeout);
    auto [ec, n] = co_await bhttp::async_read(stream_, buffer_, parser_, tuple_awaitable);
    if (ec == bhttp::error::need_buffer) ec = {};
    std::size_t got = dst.size() - body.size;
    bytes_read_ += got;
    body.data = nullptr;
    body.size = 0;
    if (ec) {
      close_ = true;
      body_failed_ = true;
      if (got > 0) co_return got;  // report what arrived; the next call reports the error
      co_return Status(Errc::incomplete_body,
                       "The request body ended before its declared length: " + ec.message());
    }
    if (got == 0 && !parser_.is_done()) {
      co_return Status(Errc::incomplete_body, "The request body could not be read");
    }
    co_return got;
  }

  bool body_done() const override { return parser_.is_done(); }

  asio::awaitable<Status> send(bhttp::status status, Fields headers, std::string body) override {
    OBJDIRECT_ASSERT(!started_, "a handler sends exactly one response per request");
    bhttp::response<bhttp::string_body> res(status, 11);
    copy_headers(headers, res);
    bytes_sent_ += body.size();
    res.body() = std::move(body);
    res.prepare_payload();
    finish_headers(res);
    started_ = true;
    status_ = static_cast<int>(status);
    if (auto st = co_await send_owed_continue(); !st.ok()) co_return st;
    tcp().expires_after(opts_.request_timeout);
    auto [ec, n] = co_await bhttp::async_write(stream_, res, tuple_awaitable);
    if (ec) {
      close_ = true;
      co_return Status(Errc::io_error, "write failed: " + ec.message());
    }
    co_return Status::Ok();
  }

  asio::awaitable<Status> send_header(bhttp::status status, Fields headers,
                                      std::uint64_t content_length) override {
    OBJDIRECT_ASSERT(!started_, "a handler sends exactly one response per request");
    bhttp::response<bhttp::empty_body> res(status, 11);
    copy_headers(headers, res);
    res.content_length(content_length);
    finish_headers(res);
    started_ = true;
    header_only_ = true;
    const bool is_head = parser_.get().method() == bhttp::verb::head;
    body_owed_ = is_head ? 0 : content_length;
    status_ = static_cast<int>(status);
    if (auto st = co_await send_owed_continue(); !st.ok()) co_return st;
    bhttp::response_serializer<bhttp::empty_body> sr(res);
    tcp().expires_after(opts_.request_timeout);
    if constexpr (std::is_same_v<Stream, beast::tcp_stream>) {
      if (body_owed_ > 0) co_return co_await send_header_more(sr);
    }
    auto [ec, n] = co_await bhttp::async_write_header(stream_, sr, tuple_awaitable);
    if (ec) {
      close_ = true;
      co_return Status(Errc::io_error, "write failed: " + ec.message());
    }
    co_return Status::Ok();
  }

  // Plain TCP, a body to follow: the header goes with MSG_MORE, so the kernel holds it and sends
  // it in one segment with the body's first bytes (send_raw's write or sendfile's last pages
  // push it). Sent as two segments, a small GET cost the loopback path (and the client's wakeups)
  // twice: docs/BENCHMARKS.md, get_many. A handler that sends no body after this closes the
  // connection (serve_http checks body_owed), and the close sends what is held.
  asio::awaitable<Status> send_header_more(bhttp::response_serializer<bhttp::empty_body>& sr) {
    std::string head;
    sr.split(true);
    beast::error_code ec;
    while (!sr.is_header_done() && !ec) {
      std::size_t n = 0;
      sr.next(ec, [&](beast::error_code&, const auto& buffers) {
        n = beast::buffer_bytes(buffers);
        const std::size_t at = head.size();
        head.resize(at + n);
        asio::buffer_copy(asio::buffer(head.data() + at, n), buffers);
      });
      sr.consume(n);
    }
    OBJDIRECT_ASSERT(!ec, "serializing a response header cannot fail");
    std::size_t sent = 0;
    while (sent < head.size()) {
      const ssize_t n = ::send(tcp().socket().native_handle(), head.data() + sent,
                               head.size() - sent, MSG_MORE | MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n > 0) {
        sent += static_cast<std::size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;  // the rest waits below
      close_ = true;
      co_return Status(Errc::io_error,
                       std::string("write failed: ") + (n < 0 ? std::strerror(errno) : "closed"));
    }
    if (sent < head.size()) {
      auto [wec, n] = co_await asio::async_write(
          stream_, asio::buffer(head.data() + sent, head.size() - sent), tuple_awaitable);
      if (wec) {
        close_ = true;
        co_return Status(Errc::io_error, "write failed: " + wec.message());
      }
    }
    co_return Status::Ok();
  }

  asio::awaitable<Status> send_raw(std::span<const std::byte> data) override {
    OBJDIRECT_ASSERT(header_only_, "send_raw before send_header");
    OBJDIRECT_ASSERT(data.size() <= body_owed_, "send_raw past send_header's Content-Length");
    body_owed_ -= data.size();
    tcp().expires_after(opts_.request_timeout);
    auto [ec, n] = co_await asio::async_write(stream_, asio::buffer(data.data(), data.size()),
                                              tuple_awaitable);
    bytes_sent_ += n;
    if (ec) {
      close_ = true;
      co_return Status(Errc::io_error, "write failed: " + ec.message());
    }
    co_return Status::Ok();
  }

  asio::awaitable<Status> send_file(const FileRegion& region) override {
    OBJDIRECT_ASSERT(header_only_, "send_file before send_header");
    OBJDIRECT_ASSERT(region.length <= body_owed_, "send_file past send_header's Content-Length");
    if constexpr (!std::is_same_v<Stream, beast::tcp_stream>) {
      // TLS encrypts in user space: read the file and write through the stream.
      co_return co_await send_file_copy(region);
    }
    using namespace asio::experimental::awaitable_operators;
    auto& sock = tcp().socket();
    if (!sock.native_non_blocking()) sock.native_non_blocking(true);  // an ioctl each time
    off_t off = static_cast<off_t>(region.offset);
    std::uint64_t remaining = region.length;
    asio::steady_timer timer(sock.get_executor());
    while (remaining > 0) {
      std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(remaining, 1u << 30));
      ssize_t n = 0;
      {
        // A page-cache miss waits for the disk inside sendfile. (Never across a co_await.)
        const BlockingScope blocking;
        n = ::sendfile(sock.native_handle(), region.fd, &off, want);
      }
      if (n > 0) {
        remaining -= static_cast<std::uint64_t>(n);
        body_owed_ -= static_cast<std::uint64_t>(n);
        bytes_sent_ += static_cast<std::uint64_t>(n);
        continue;
      }
      if (n == 0) {
        close_ = true;
        co_return Status(Errc::io_error, "object file shorter than its metadata");
      }
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        close_ = true;
        co_return Status(Errc::io_error, std::string("sendfile: ") + std::strerror(errno));
      }
      // The socket buffer is full: wait until the peer drains it, at most the idle timeout.
      timer.expires_after(opts_.idle_timeout);
      auto which = co_await (sock.async_wait(tcp::socket::wait_write, tuple_awaitable) ||
                             timer.async_wait(tuple_awaitable));
      if (which.index() == 1) {
        close_ = true;
        co_return Status(Errc::timeout, "client stopped reading");
      }
    }
    co_return Status::Ok();
  }

  asio::awaitable<Status> send_file_copy(const FileRegion& region) {
    ScratchBuffer buf(std::min<std::uint64_t>(region.length, 1u << 20));
    std::uint64_t off = region.offset, left = region.length;
    while (left > 0) {
      std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(left, buf.size()));
      ssize_t n = 0;
      {
        const BlockingScope blocking;
        n = ::pread(region.fd, buf.data(), want, static_cast<off_t>(off));
      }
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        close_ = true;
        co_return Status(Errc::io_error, "object file shorter than its metadata");
      }
      auto st =
          co_await send_raw(std::span<const std::byte>(buf.data(), static_cast<std::size_t>(n)));
      if (!st.ok()) co_return st;
      off += static_cast<std::uint64_t>(n);
      left -= static_cast<std::uint64_t>(n);
    }
    co_return Status::Ok();
  }

  // The lingering close: after a response that closes the connection before the request body
  // was read to its end, read and discard the rest of it, at most bytes_max within time_max, so
  // that a client still sending (most clients read no answer before their body is out) reads the
  // answer instead of a reset. Nothing to do when the body is complete, when reading it already
  // failed (the client stopped or left), or when the client waits for a "100 Continue" that was
  // never sent (it sends no body). A longer body is cut: the caller closes with the rest unread.
  asio::awaitable<void> drain_unread_body(std::uint64_t bytes_max,
                                          std::chrono::milliseconds time_max) {
    if (!started_ || parser_.is_done() || body_failed_ || bytes_max == 0) co_return;
    if (expects_continue() && !continue_sent_) co_return;
    std::vector<std::byte> sink(
        static_cast<std::size_t>(std::min<std::uint64_t>(bytes_max, kBodyReadBytes)));
    if (buffer_.capacity() - buffer_.size() < kBodyReadBytes) {
      buffer_.reserve(buffer_.size() + kBodyReadBytes);
    }
    tcp().expires_after(time_max);  // one bound for the whole drain, not per read
    std::uint64_t drained = 0;
    while (!parser_.is_done() && drained < bytes_max) {
      auto& body = parser_.get().body();
      const std::size_t want =
          static_cast<std::size_t>(std::min<std::uint64_t>(sink.size(), bytes_max - drained));
      body.data = sink.data();
      body.size = want;
      auto [ec, n] = co_await bhttp::async_read(stream_, buffer_, parser_, tuple_awaitable);
      if (ec == bhttp::error::need_buffer) ec = {};
      drained += want - body.size;
      body.data = nullptr;
      body.size = 0;
      if (ec) break;
    }
  }

  void close_after_response() override { close_ = true; }
  bool response_started() const override { return started_; }
  int response_status() const override { return status_; }
  std::uint64_t body_bytes_read() const override { return bytes_read_; }
  std::uint64_t body_bytes_sent() const override { return bytes_sent_; }
  bool wants_close() const { return close_; }
  // Bytes of send_header's Content-Length the handler did not send (0 for HEAD).
  std::uint64_t body_owed() const { return body_owed_; }

 private:
  bool expects_continue() const {
    return beast::iequals(parser_.get()[bhttp::field::expect], "100-continue");
  }

  // Writes "100 Continue" once per request, if the request asked for it.
  asio::awaitable<Status> send_continue() {
    if (continue_sent_ || !expects_continue()) co_return Status::Ok();
    continue_sent_ = true;
    static constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
    tcp().expires_after(opts_.idle_timeout);
    auto [ec, n] = co_await asio::async_write(
        stream_, asio::buffer(kContinue, sizeof(kContinue) - 1), tuple_awaitable);
    if (ec) {
      close_ = true;
      co_return Status(Errc::io_error, "connection lost: " + ec.message());
    }
    co_return Status::Ok();
  }

  // Called before a final response that keeps the connection open: a request with
  // "Expect: 100-continue" whose body was complete without a 100 (Content-Length: 0, or a body
  // that arrived with the header) still gets "100 Continue" first. botocore (boto3, awscli v1)
  // remembers the status line of a final answer that came instead of a 100 and reports it for the
  // next Expect request on the same connection without reading that request's own status line:
  // after an empty PutObject, a later PutObject whose connection died (server killed) came back
  // as 200 although nothing was stored, and an error answer (400 BadDigest) came back as 200.
  // A connection that closes after the response needs nothing: the client resets on close.
  asio::awaitable<Status> send_owed_continue() {
    if (close_) co_return Status::Ok();
    co_return co_await send_continue();
  }

  template <class Res>
  static void copy_headers(const Fields& from, Res& res) {
    for (const auto& f : from) res.insert(f.name_string(), f.value());
  }
  template <class Res>
  void finish_headers(Res& res) {
    res.set(bhttp::field::server, "ObjDirect");
    res.set(bhttp::field::date, http_date(std::chrono::system_clock::now()));
    bool keep = parser_.get().keep_alive() && !close_;
    // A request whose body was not consumed leaves unread bytes on the wire: close.
    if (!parser_.is_done()) keep = false;
    res.keep_alive(keep);
    if (!keep) close_ = true;
  }

  Stream& stream_;
  beast::tcp_stream& tcp() { return beast::get_lowest_layer(stream_); }
  beast::flat_buffer& buffer_;
  bhttp::request_parser<bhttp::buffer_body>& parser_;
  const ServerOptions& opts_;
  std::string remote_;
  bool continue_sent_ = false;
  bool started_ = false;
  bool header_only_ = false;     // the response began with send_header: send_raw/send_file follow
  std::uint64_t body_owed_ = 0;  // of send_header's Content-Length, bytes not yet sent
  int status_ = 0;
  std::uint64_t bytes_read_ = 0;
  std::uint64_t bytes_sent_ = 0;
  bool close_ = false;
  bool body_failed_ = false;  // a read of the request body failed or timed out
};

}  // namespace

void configure_parser(bhttp::request_parser<bhttp::buffer_body>& parser,
                      const ServerOptions& opts) {
  parser.header_limit(static_cast<std::uint32_t>(
      std::min<std::size_t>(opts.header_bytes_max, std::numeric_limits<std::uint32_t>::max())));
  parser.body_limit(boost::none);  // the S3 layer bounds bodies per operation
}

bhttp::response<bhttp::string_body> header_error_response(Handler& handler,
                                                          const boost::system::error_code& ec,
                                                          const ServerOptions& opts) {
  bool too_big = ec == bhttp::error::header_limit || ec == bhttp::error::buffer_overflow;
  bhttp::response<bhttp::string_body> res(
      too_big ? bhttp::status::request_header_fields_too_large : bhttp::status::bad_request, 11);
  res.set(bhttp::field::content_type, "application/xml");
  res.body() = handler.error_body(too_big ? Errc::header_too_large : Errc::invalid_request,
                                  too_big ? "The request header section exceeds " +
                                                std::to_string(opts.header_bytes_max) + " bytes"
                                          : "Malformed HTTP request: " + ec.message());
  res.keep_alive(false);
  res.prepare_payload();
  return res;
}

HttpServer::HttpServer(ServerOptions opts, std::shared_ptr<Handler> handler)
    : opts_(std::move(opts)), handler_(std::move(handler)) {
  if (opts_.threads == 0) {
    // The S3 operations run the store's blocking calls (fsync of the blob and its directory, the
    // LMDB commit) on these threads: with 4 of them, four slow fsyncs froze every request, reads
    // too, for seconds (docs/RELIABILITY.md section 4). More threads than cores keep the others
    // serving while some wait for the disk.
    opts_.threads = std::max(32u, 2 * std::max(1u, std::thread::hardware_concurrency()));
  }
  if (opts_.io_threads == 0) {
    // About one runner per core: more cost a context switch per handler (io_runners.hpp).
    opts_.io_threads = std::max(4u, std::thread::hardware_concurrency());
  }
  opts_.io_threads = std::min(opts_.io_threads, opts_.threads);
  const unsigned contexts = opts_.io_context_per_thread ? opts_.io_threads : 1;
  std::vector<asio::io_context*> raw;
  for (unsigned i = 0; i < contexts; ++i) {
    iocs_.push_back(std::make_unique<asio::io_context>());
    work_.push_back(asio::make_work_guard(*iocs_.back()));
    raw.push_back(iocs_.back().get());
  }
  runners_ = std::make_unique<IoRunners>(
      std::move(raw), IoRunners::Options{opts_.io_threads, opts_.threads, opts_.io_handoff_after});
}

void HttpServer::register_metrics(metrics::Sink& sink) const {
  const ServerCounters* c = &counters_;
  sink.add_gauge("objdirect_http_connections_open", "Open HTTP connections.",
                 [c] { return static_cast<double>(c->connections_open.load()); });
  sink.add_counter("objdirect_http_connections_rejected_total",
                   "Connections refused over --connections-max.",
                   [c] { return static_cast<double>(c->connections_rejected.load()); });
  const IoRunners* r = runners_.get();
  sink.add_gauge("objdirect_http_io_threads",
                 "I/O threads started (runners and spares, parked ones included).",
                 [r] { return static_cast<double>(r->stats().threads); });
  sink.add_gauge("objdirect_http_io_threads_running", "I/O threads not parked now.",
                 [r] { return static_cast<double>(r->stats().running); });
  sink.add_counter("objdirect_http_io_handoffs_total",
                   "Spares woken or started in place of an I/O thread blocked in a store call "
                   "or an RDMA transfer for longer than the hand-off delay.",
                   [r] { return static_cast<double>(r->stats().handoffs); });
}

HttpServer::~HttpServer() {
  stop();
}

Status HttpServer::start() {
  boost::system::error_code ec;
  if (!opts_.tls_cert_file.empty() || !opts_.tls_key_file.empty()) {
    if (opts_.tls_cert_file.empty() || opts_.tls_key_file.empty()) {
      return Status(Errc::invalid_argument, "TLS needs both a certificate and a key");
    }
    ssl_ctx_ = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
    ssl_ctx_->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                          asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                          asio::ssl::context::no_tlsv1_1);
    ssl_ctx_->use_certificate_chain_file(opts_.tls_cert_file, ec);
    if (ec)
      return Status(Errc::invalid_argument,
                    "TLS certificate " + opts_.tls_cert_file + ": " + ec.message());
    ssl_ctx_->use_private_key_file(opts_.tls_key_file, asio::ssl::context::pem, ec);
    if (ec)
      return Status(Errc::invalid_argument, "TLS key " + opts_.tls_key_file + ": " + ec.message());
  }
  auto addr = asio::ip::make_address(opts_.host, ec);
  if (ec) return Status(Errc::invalid_argument, "bad listen address '" + opts_.host + "'");
  tcp::endpoint ep(addr, opts_.port);
  acceptor_.emplace(*iocs_.front());
  acceptor_->open(ep.protocol(), ec);
  if (!ec) acceptor_->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_->bind(ep, ec);
  if (!ec) acceptor_->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return Status(Errc::unavailable, "cannot listen on " + opts_.host + ":" +
                                         std::to_string(opts_.port) + ": " + ec.message());
  }
  if (!opts_.tcp_congestion.empty()) {
    // Set on the listener before any connection arrives: accepted sockets inherit it.
    if (auto st = set_tcp_congestion(acceptor_->native_handle(), opts_.tcp_congestion); !st.ok())
      return st;
  }
  {
    char name[limits::tcp_congestion_name_bytes_max + 1] = {};
    socklen_t len = sizeof name - 1;
    if (::getsockopt(acceptor_->native_handle(), IPPROTO_TCP, TCP_CONGESTION, name, &len) == 0)
      tcp_congestion_.assign(name, ::strnlen(name, len));
  }
  bound_port_ = acceptor_->local_endpoint().port();
  asio::co_spawn(*iocs_.front(), accept_loop(), asio::detached);
  return Status::Ok();
}

void HttpServer::run() {
  runners_->run();
}

void HttpServer::stop() {
  for (auto& ioc : iocs_) ioc->stop();
}

asio::awaitable<void> HttpServer::accept_loop() {
  for (;;) {
    // The next context takes the connection: all its requests run there.
    asio::io_context& ioc = *iocs_[next_ioc_];
    next_ioc_ = (next_ioc_ + 1) % iocs_.size();
    auto [ec, socket] = co_await acceptor_->async_accept(asio::make_strand(ioc), tuple_awaitable);
    if (ec) {
      if (ec == asio::error::operation_aborted) co_return;
      continue;  // EMFILE and friends: keep serving the connections we have
    }
    // Counted here, in the order of arrival, not when serve() starts on its context (which
    // may be after a later connection's on another context): the connections past
    // connections_max are the last ones to arrive. serve() gives the slot back.
    counters_.connections_total.fetch_add(1, std::memory_order_relaxed);
    const std::uint64_t open =
        counters_.connections_open.fetch_add(1, std::memory_order_relaxed) + 1;
    auto ex = socket.get_executor();
    asio::co_spawn(ex, serve(std::move(socket), open > opts_.connections_max), asio::detached);
  }
}

asio::awaitable<void> HttpServer::serve(tcp::socket socket, bool over_limit) {
  struct Release {
    ServerCounters& c;
    ~Release() { c.connections_open.fetch_sub(1, std::memory_order_relaxed); }
  } release{counters_};

  boost::system::error_code ec;
  socket.set_option(tcp::no_delay(true), ec);  // small GETs stall ~40 ms without it
  std::string remote;
  if (auto rep = socket.remote_endpoint(ec); !ec) remote = rep.address().to_string();
  beast::tcp_stream stream(std::move(socket));

  if (over_limit) {
    counters_.connections_rejected.fetch_add(1, std::memory_order_relaxed);
    if (ssl_ctx_) co_return;  // a TLS client cannot read a plain answer: just close
    bhttp::response<bhttp::string_body> res(bhttp::status::service_unavailable, 11);
    res.set(bhttp::field::content_type, "application/xml");
    res.set(bhttp::field::retry_after, "1");
    res.body() = handler_->error_body(Errc::slow_down, "Too many connections; retry later");
    res.keep_alive(false);
    res.prepare_payload();
    stream.expires_after(std::chrono::seconds(5));
    co_await bhttp::async_write(stream, res, tuple_awaitable);
    stream.socket().shutdown(tcp::socket::shutdown_both, ec);
    co_return;
  }
  if (!ssl_ctx_) {
    co_await serve_http(stream, remote);
    stream.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream.close();
    co_return;
  }
  beast::ssl_stream<beast::tcp_stream> tls(std::move(stream), *ssl_ctx_);
  beast::get_lowest_layer(tls).expires_after(opts_.header_timeout);
  auto [hec] = co_await tls.async_handshake(asio::ssl::stream_base::server, tuple_awaitable);
  if (hec) co_return;
  co_await serve_http(tls, remote);
  beast::get_lowest_layer(tls).expires_after(std::chrono::seconds(2));
  co_await tls.async_shutdown(tuple_awaitable);
}

// A lingering close after an answer to a request the server did not read to its end (the
// rest of an oversized header and whatever follows): the client may still be sending, and a
// close with unread bytes resets the connection, which can destroy the answer in the client's
// receive buffer before it is read. On plain TCP the answer is followed by a FIN first. Reads
// and discards until the client closes, or unread_body_drain_bytes_max, or
// unread_body_drain_time_max.
template <class Stream>
asio::awaitable<void> HttpServer::linger(Stream& stream, beast::flat_buffer& buffer) {
  if (opts_.unread_body_drain_bytes_max == 0) co_return;
  auto& tcp = beast::get_lowest_layer(stream);
  if constexpr (std::is_same_v<Stream, beast::tcp_stream>) {
    boost::system::error_code ec;
    tcp.socket().shutdown(tcp::socket::shutdown_send, ec);
  }
  buffer.consume(buffer.size());
  tcp.expires_after(opts_.unread_body_drain_time_max);  // one bound for the whole drain
  std::uint64_t drained = 0;
  while (drained < opts_.unread_body_drain_bytes_max) {
    auto [ec, n] = co_await stream.async_read_some(buffer.prepare(kBodyReadBytes), tuple_awaitable);
    if (ec) break;
    drained += n;
  }
}

template <class Stream>
asio::awaitable<void> HttpServer::serve_http(Stream& stream, const std::string& remote) {
  beast::flat_buffer buffer;
  bool first = true;
  for (;;) {
    bhttp::request_parser<bhttp::buffer_body> parser;
    configure_parser(parser, opts_);
    beast::get_lowest_layer(stream).expires_after(first ? opts_.header_timeout
                                                        : opts_.idle_timeout);
    first = false;
    auto [rec, n] = co_await bhttp::async_read_header(stream, buffer, parser, tuple_awaitable);
    if (rec) {
      if (rec == bhttp::error::end_of_stream || rec == asio::error::eof ||
          rec == beast::error::timeout || rec == asio::error::connection_reset ||
          rec == asio::error::operation_aborted) {
        break;
      }
      // Oversized or unparsable header: answer once, then close.
      auto res = header_error_response(*handler_, rec, opts_);
      beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(5));
      auto [wec, wn] = co_await bhttp::async_write(stream, res, tuple_awaitable);
      if (!wec) co_await linger(stream, buffer);
      break;
    }
    counters_.requests_total.fetch_add(1, std::memory_order_relaxed);
    BeastExchange<Stream> exch(stream, buffer, parser, opts_, remote);
    co_await handler_->handle(exch);
    if (!exch.response_started()) break;  // the handler lost the connection
    // A body cut short leaves the client waiting for the rest: close (which also sends a header
    // that send_header_more held back).
    if (exch.wants_close() || exch.body_owed() > 0) {
      co_await exch.drain_unread_body(opts_.unread_body_drain_bytes_max,
                                      opts_.unread_body_drain_time_max);
      break;
    }
    // An idle keep-alive connection keeps no body-sized buffer.
    if (buffer.capacity() > kIdleReadBufferBytes) buffer.shrink_to_fit();
  }
}

}  // namespace objdirect::http
