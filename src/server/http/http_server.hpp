// HttpServer: the control-plane listener of objdirect-server.
//
// Boost.Beast over Asio with C++20 coroutines. One coroutine per connection on its own strand,
// on one of the io_contexts (one per I/O thread, handed out round-robin at accept, or one shared;
// io_runners.hpp); requests on a connection are handled one at a time (HTTP/1.1 keep-alive, no
// pipelining of handlers). Every read and write is bounded by a timeout, the header section by
// header_bytes_max and the number of live connections by connections_max, so slow or hostile
// clients cannot pin memory or threads.
//
// The S3 layer plugs in through Handler and talks to the wire through Exchange: it reads the
// request body in chunks (so uploads stream to storage) and writes either a whole response or a
// header followed by raw bytes / sendfile extents (so downloads skip user space).
//
// Thread safety: HttpServer's public methods are thread-safe. An Exchange belongs to one request
// and is used from that request's coroutine only.
#pragma once

#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/limits.hpp"
#include "common/metrics_sink.hpp"
#include "common/status.hpp"
#include "server/http/io_runners.hpp"

namespace objdirect::limits {

// A request answered before its body was read (an early 403 or 400) closes its connection; the
// server first reads and discards at most this much of the rest of the body, for at most this
// long (a lingering close, as nginx's), so that a client still sending the body gets to read the
// answer instead of a reset. A longer body is cut: the connection closes with the rest unread.
inline constexpr std::uint64_t unread_body_drain_bytes_max = 64ull << 20;
inline constexpr std::uint32_t unread_body_drain_time_max_ms = 5'000;

// The longest TCP congestion control name (the kernel's TCP_CA_NAME_MAX, 16, less its NUL).
inline constexpr std::size_t tcp_congestion_name_bytes_max = 15;

}  // namespace objdirect::limits

namespace objdirect::http {

namespace beast = boost::beast;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

using RequestHeader = beast::http::request_header<>;
using Fields = beast::http::fields;

struct ServerOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 9000;  // 0 picks a free port; see HttpServer::port()
  // The most I/O threads, spares included (0: max(32, 2 * hardware threads)). Of those,
  // io_threads run the handlers while none blocks (0: max(4, hardware threads), at most
  // threads); a handler that blocks in a BlockingScope for longer than io_handoff_after is
  // replaced by a spare (io_runners.hpp). io_threads == threads runs them all, always.
  unsigned threads = 0;
  unsigned io_threads = 0;
  // Each io thread runs an io_context of its own, with the connections spread over them
  // round-robin, so that a request runs start to end on one thread (io_runners.hpp). Off: one
  // io_context shared by all, which blocking calls that are not marked with a BlockingScope (a
  // gateway's upstream requests) need.
  bool io_context_per_thread = true;
  std::chrono::microseconds io_handoff_after{1000};
  std::size_t header_bytes_max = limits::header_bytes_max;
  std::size_t connections_max = limits::connections_max;
  std::chrono::milliseconds header_timeout{limits::header_timeout_ms};
  std::chrono::milliseconds idle_timeout{limits::idle_timeout_ms};
  std::chrono::milliseconds request_timeout{limits::request_timeout_ms};
  // The lingering close after an early answer (limits.hpp): 0 bytes closes at once.
  std::uint64_t unread_body_drain_bytes_max = limits::unread_body_drain_bytes_max;
  std::chrono::milliseconds unread_body_drain_time_max{limits::unread_body_drain_time_max_ms};
  // TCP congestion control of the accepted connections, set on the listening socket, which they
  // inherit (TCP_CONGESTION, tcp(7)); empty: the kernel's default. The name is the kernel's,
  // at most tcp_congestion_name_bytes_max bytes; start() fails on one the kernel refuses.
  std::string tcp_congestion;
  // TLS on the control plane: PEM certificate chain and private key. Both empty: plain HTTP.
  std::string tls_cert_file;
  std::string tls_key_file;
};

// A region of a file to send with sendfile(2).
struct FileRegion {
  int fd = -1;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
};

// One request/response exchange on a connection.
class Exchange {
 public:
  virtual ~Exchange() = default;

  virtual const RequestHeader& request() const = 0;
  // The peer's IP address, e.g. "127.0.0.1".
  virtual const std::string& remote_address() const = 0;

  // Reads the next piece of the (de-chunked, if Transfer-Encoding: chunked) request body into
  // dst. Returns 0 at the end of the body. Errors: incomplete_body when the client closes or stalls
  // past the timeout before the declared length arrived.
  virtual asio::awaitable<Result<std::size_t>> read_body(std::span<std::byte> dst) = 0;
  // True once the whole body has been read.
  virtual bool body_done() const = 0;
  // Reads the whole body into a string, failing with `too_large_code` past max_bytes.
  asio::awaitable<Result<std::string>> read_body_string(std::size_t max_bytes);

  // Sends a complete response (Content-Length set from body, Server and Date added).
  virtual asio::awaitable<Status> send(beast::http::status status, Fields headers,
                                       std::string body) = 0;
  // Sends only a header with the given Content-Length (HEAD, or before send_raw/send_file).
  virtual asio::awaitable<Status> send_header(beast::http::status status, Fields headers,
                                              std::uint64_t content_length) = 0;
  // After send_header: raw body bytes, and file regions via sendfile(2).
  virtual asio::awaitable<Status> send_raw(std::span<const std::byte> data) = 0;
  virtual asio::awaitable<Status> send_file(const FileRegion& region) = 0;

  // Ask the connection to close after this response (e.g. after an error mid-body).
  virtual void close_after_response() = 0;
  virtual bool response_started() const = 0;
  // The status of the response sent (0 before), and body bytes moved so far: for metrics.
  virtual int response_status() const = 0;
  virtual std::uint64_t body_bytes_read() const = 0;
  virtual std::uint64_t body_bytes_sent() const = 0;
};

// The request handler: the S3 service.
class Handler {
 public:
  virtual ~Handler() = default;
  // Handles one request. It must send exactly one response unless the connection breaks.
  virtual asio::awaitable<void> handle(Exchange& ex) = 0;
  // Called for requests that fail before the handler runs (bad request line, oversized header).
  virtual std::string error_body(Errc code, std::string_view message) = 0;
};

// The parser settings every request gets, on a socket or in serve_buffer(): the header section is
// bounded by header_bytes_max; bodies are unbounded here (the S3 layer bounds them per operation).
void configure_parser(beast::http::request_parser<beast::http::buffer_body>& parser,
                      const ServerOptions& opts);

// The one answer to a request whose header section failed to parse (431 over header_bytes_max,
// 400 otherwise); the connection closes after it.
beast::http::response<beast::http::string_body> header_error_response(
    Handler& handler, const boost::system::error_code& ec, const ServerOptions& opts);

// A response captured in memory by serve_buffer().
struct BufferedResponse {
  int status = 0;
  Fields headers;
  std::string body;    // for send_header + send_raw/send_file: the bytes that followed the header
  bool close = false;  // the connection would have closed after this response
};

// Serves the raw bytes of one connection (request line, header, body; pipelined requests too)
// without a socket: the same parser settings, the same header-error answers and the same Handler
// as a connection, with the body read from `raw`. Stops at the first response that closes the
// connection, or when `raw` ends. For the in-process HTTP fuzz target (http_request_fuzz) and
// tests. Runs the handler on a private io_context in the calling thread.
std::vector<BufferedResponse> serve_buffer(Handler& handler, std::string_view raw,
                                           const ServerOptions& opts,
                                           std::string remote = "127.0.0.1");

struct ServerCounters {
  std::atomic<std::uint64_t> connections_open{0};
  std::atomic<std::uint64_t> connections_total{0};
  std::atomic<std::uint64_t> connections_rejected{0};
  std::atomic<std::uint64_t> requests_total{0};
};

class HttpServer {
 public:
  HttpServer(ServerOptions opts, std::shared_ptr<Handler> handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Loads the TLS certificate and key if configured, binds and listens; returns an error if the
  // address is unusable or the certificate cannot be loaded.
  Status start();
  // The bound port (useful with port 0).
  std::uint16_t port() const { return bound_port_; }
  // The TCP congestion control that accepted connections get (ServerOptions::tcp_congestion or
  // the kernel's default); empty before start().
  const std::string& tcp_congestion() const { return tcp_congestion_; }
  // Runs the io threads until stop(); blocks the caller.
  void run();
  // Stops accepting and closes all connections; safe from a signal-handling thread.
  void stop();

  const ServerCounters& counters() const { return counters_; }
  // Registers objdirect_http_connections_open and objdirect_http_connections_rejected_total
  // (docs/metrics.md); the server must outlive every render of `sink`. Once per server.
  void register_metrics(metrics::Sink& sink) const;
  // The io_context that accepts connections (for the caller's signal_set).
  asio::io_context& io_context() { return *iocs_.front(); }

 private:
  asio::awaitable<void> accept_loop();
  // over_limit: the connection is past connections_max (counted at accept): answered 503.
  asio::awaitable<void> serve(tcp::socket socket, bool over_limit);
  template <class Stream>
  asio::awaitable<void> linger(Stream& stream, beast::flat_buffer& buffer);
  template <class Stream>
  asio::awaitable<void> serve_http(Stream& stream, const std::string& remote);

  ServerOptions opts_;
  std::shared_ptr<Handler> handler_;
  // One per io thread, or one (io_context_per_thread off); each kept from running out of work
  // until stop().
  std::vector<std::unique_ptr<asio::io_context>> iocs_;
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  std::size_t next_ioc_ = 0;  // the accept loop's round-robin (its coroutine only)
  std::unique_ptr<IoRunners> runners_;
  std::optional<tcp::acceptor> acceptor_;
  std::unique_ptr<asio::ssl::context> ssl_ctx_;  // set when TLS is configured
  std::uint16_t bound_port_ = 0;
  std::string tcp_congestion_;
  ServerCounters counters_;
};

}  // namespace objdirect::http
