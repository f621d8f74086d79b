// serve_buffer(): one connection's bytes through the HTTP layer and the Handler, without a socket.
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <cerrno>

#include "common/assert.hpp"
#include "server/http/http_server.hpp"

namespace objdirect::http {

namespace bhttp = beast::http;

namespace {

// An Exchange over a parser fed from a byte string; responses are captured, not written.
class MemoryExchange final : public Exchange {
 public:
  MemoryExchange(bhttp::request_parser<bhttp::buffer_body>& parser, std::string_view& input,
                 const std::string& remote, std::vector<BufferedResponse>& out)
      : parser_(parser), input_(input), remote_(remote), out_(out) {}

  const RequestHeader& request() const override { return parser_.get().base(); }
  const std::string& remote_address() const override { return remote_; }

  asio::awaitable<Result<std::size_t>> read_body(std::span<std::byte> dst) override {
    if (parser_.is_done() || dst.empty()) co_return std::size_t{0};
    auto& body = parser_.get().body();
    body.data = dst.data();
    body.size = dst.size();
    // Feed until the buffer is full, the body ends, or the input runs out (a client that stopped).
    parser_.eager(true);
    while (!parser_.is_done() && body.size > 0 && !input_.empty()) {
      boost::system::error_code ec;
      std::size_t used = parser_.put(asio::buffer(input_.data(), input_.size()), ec);
      input_.remove_prefix(used);
      if (ec == bhttp::error::need_buffer) break;
      if (ec == bhttp::error::need_more) break;  // the input ends inside a chunk header
      if (ec) {
        close_ = true;
        break;
      }
      if (used == 0) break;
    }
    std::size_t got = dst.size() - body.size;
    bytes_read_ += got;
    body.data = nullptr;
    body.size = 0;
    if (got == 0 && !parser_.is_done()) {
      close_ = true;
      co_return Status(Errc::incomplete_body,
                       "The request body ended before its declared length: end of input");
    }
    co_return got;
  }

  bool body_done() const override { return parser_.is_done(); }

  asio::awaitable<Status> send(bhttp::status status, Fields headers, std::string body) override {
    OBJDIRECT_ASSERT(!started_, "a handler sends exactly one response per request");
    bytes_sent_ += body.size();
    start(status, std::move(headers)).body = std::move(body);
    co_return Status::Ok();
  }

  asio::awaitable<Status> send_header(bhttp::status status, Fields headers,
                                      std::uint64_t content_length) override {
    OBJDIRECT_ASSERT(!started_, "a handler sends exactly one response per request");
    header_only_ = true;
    start(status, std::move(headers))
        .headers.set(bhttp::field::content_length, std::to_string(content_length));
    co_return Status::Ok();
  }

  asio::awaitable<Status> send_raw(std::span<const std::byte> data) override {
    OBJDIRECT_ASSERT(header_only_, "send_raw before send_header");
    out_.back().body.append(reinterpret_cast<const char*>(data.data()), data.size());
    bytes_sent_ += data.size();
    co_return Status::Ok();
  }

  asio::awaitable<Status> send_file(const FileRegion& region) override {
    OBJDIRECT_ASSERT(header_only_, "send_file before send_header");
    std::string& body = out_.back().body;
    std::uint64_t off = region.offset, left = region.length;
    char buf[65536];
    while (left > 0) {
      std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(left, sizeof(buf)));
      ssize_t n = ::pread(region.fd, buf, want, static_cast<off_t>(off));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        close_ = true;
        co_return Status(Errc::io_error, "object file shorter than its metadata");
      }
      body.append(buf, static_cast<std::size_t>(n));
      bytes_sent_ += static_cast<std::uint64_t>(n);
      off += static_cast<std::uint64_t>(n);
      left -= static_cast<std::uint64_t>(n);
    }
    co_return Status::Ok();
  }

  void close_after_response() override {
    close_ = true;
    if (started_) out_.back().close = true;
  }
  bool response_started() const override { return started_; }
  int response_status() const override { return status_; }
  std::uint64_t body_bytes_read() const override { return bytes_read_; }
  std::uint64_t body_bytes_sent() const override { return bytes_sent_; }
  bool wants_close() const { return close_; }

 private:
  BufferedResponse& start(bhttp::status status, Fields headers) {
    started_ = true;
    status_ = static_cast<int>(status);
    // The same rule as a socket: close when asked, on Connection: close, or when the body was not
    // consumed (its unread bytes would be parsed as the next request).
    if (!parser_.get().keep_alive() || !parser_.is_done()) close_ = true;
    BufferedResponse r;
    r.status = status_;
    r.headers = std::move(headers);
    r.close = close_;
    out_.push_back(std::move(r));
    return out_.back();
  }

  bhttp::request_parser<bhttp::buffer_body>& parser_;
  std::string_view& input_;
  const std::string& remote_;
  std::vector<BufferedResponse>& out_;
  bool started_ = false;
  bool header_only_ = false;  // the response began with send_header: send_raw/send_file follow
  int status_ = 0;
  std::uint64_t bytes_read_ = 0;
  std::uint64_t bytes_sent_ = 0;
  bool close_ = false;
};

asio::awaitable<void> serve_all(Handler& handler, std::string_view input, const ServerOptions& opts,
                                const std::string& remote, std::vector<BufferedResponse>& out) {
  while (!input.empty()) {
    bhttp::request_parser<bhttp::buffer_body> parser;
    configure_parser(parser, opts);
    boost::system::error_code ec;
    std::size_t used = parser.put(asio::buffer(input.data(), input.size()), ec);
    input.remove_prefix(used);
    while (!ec && !parser.is_header_done() && used > 0 && !input.empty()) {
      used = parser.put(asio::buffer(input.data(), input.size()), ec);
      input.remove_prefix(used);
    }
    if (ec == bhttp::error::need_more || (!ec && !parser.is_header_done())) {
      co_return;  // the input ended inside a header section: a socket would time out and close
    }
    if (ec) {
      auto res = header_error_response(handler, ec, opts);
      BufferedResponse r;
      r.status = static_cast<int>(res.result());
      for (const auto& f : res.base()) r.headers.insert(f.name_string(), f.value());
      r.body = std::move(res.body());
      r.close = true;
      out.push_back(std::move(r));
      co_return;
    }
    MemoryExchange exch(parser, input, remote, out);
    co_await handler.handle(exch);
    if (!exch.response_started() || exch.wants_close()) co_return;
  }
}

}  // namespace

std::vector<BufferedResponse> serve_buffer(Handler& handler, std::string_view raw,
                                           const ServerOptions& opts, std::string remote) {
  std::vector<BufferedResponse> out;
  asio::io_context ioc;
  std::exception_ptr failure;
  asio::co_spawn(ioc, serve_all(handler, raw, opts, remote, out),
                 [&failure](std::exception_ptr e) { failure = e; });
  ioc.run();
  if (failure) std::rethrow_exception(failure);
  return out;
}

}  // namespace objdirect::http
