// objdirect-delay-proxy: a TCP proxy that adds a fixed one-way delay to every byte in both
// directions, so that a round trip through it takes 2 x --delay-us longer, as across a network
// (this VM's kernel has no netem). A benchmark tool, never run by ctest
// (docs/BENCHMARKS.md, "Python batches").
//
//   build/bin/objdirect-delay-proxy --to 127.0.0.1:PORT --delay-us 250
//   # prints "objdirect-delay-proxy listening on http://127.0.0.1:LPORT" once it accepts
//
// Bytes keep their order and the delay does not limit the rate: each chunk read is written
// --delay-us after it arrived (a steady_timer per direction, so the delay holds to the
// scheduler's wake-up latency). One thread: its CPU lands on the cores of client and server, so
// compare only runs through the same proxy.
//
// Thread safety: single-threaded (one io_context run by main).
#include <CLI/CLI.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <cstdio>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;
constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);

// The most bytes one read takes; a chunk is written whole after its delay.
constexpr std::size_t chunk_bytes_max = 256 << 10;
// The most bytes queued in one direction: past it the reader stops reading (TCP flow control
// then holds the sender), so a receiver slower than its sender cannot grow the proxy's memory.
constexpr std::size_t queued_bytes_max = 64 << 20;

// One direction: what `from` sent, queued with the time it is due at `to`.
struct Direction {
  explicit Direction(const asio::any_io_executor& ex) : wake(ex), room(ex) {}
  std::deque<std::pair<Clock::time_point, std::vector<char>>> queue;
  std::size_t queued_bytes = 0;
  asio::steady_timer wake;  // the writer waits on it; the reader cancels it to wake it
  asio::steady_timer room;  // a full queue's reader waits on it; the writer cancels it
  bool eof = false;
};

asio::awaitable<void> read_side(std::shared_ptr<tcp::socket> from, std::shared_ptr<Direction> d,
                                Clock::duration delay) {
  std::vector<char> buf(chunk_bytes_max);
  for (;;) {
    while (d->queued_bytes >= queued_bytes_max && from->is_open()) {
      d->room.expires_at(Clock::time_point::max());
      co_await d->room.async_wait(tuple_awaitable);
    }
    auto [ec, n] = co_await from->async_read_some(asio::buffer(buf), tuple_awaitable);
    if (ec) break;
    d->queue.emplace_back(Clock::now() + delay, std::vector<char>(buf.begin(), buf.begin() + n));
    d->queued_bytes += n;
    d->wake.cancel();
  }
  d->eof = true;
  d->wake.cancel();
}

// Writes each chunk once due; on a write error closes `from` too, which ends its reader.
asio::awaitable<void> write_side(std::shared_ptr<tcp::socket> from, std::shared_ptr<tcp::socket> to,
                                 std::shared_ptr<Direction> d) {
  for (;;) {
    if (d->queue.empty()) {
      if (d->eof) break;
      d->wake.expires_at(Clock::time_point::max());
      co_await d->wake.async_wait(tuple_awaitable);
      continue;
    }
    auto& [due, bytes] = d->queue.front();
    if (Clock::now() < due) {
      d->wake.expires_at(due);
      co_await d->wake.async_wait(tuple_awaitable);
      continue;
    }
    auto [ec, n] = co_await asio::async_write(*to, asio::buffer(bytes), tuple_awaitable);
    if (ec) {
      boost::system::error_code ignored;
      from->close(ignored);
      d->room.cancel();
      co_return;
    }
    d->queued_bytes -= bytes.size();
    d->queue.pop_front();
    d->room.cancel();
  }
  boost::system::error_code ignored;
  to->shutdown(tcp::socket::shutdown_send, ignored);
}

asio::awaitable<void> serve(tcp::socket client, tcp::endpoint target, Clock::duration delay) {
  auto ex = client.get_executor();
  auto down = std::make_shared<tcp::socket>(std::move(client));
  auto up = std::make_shared<tcp::socket>(ex);
  auto [ec] = co_await up->async_connect(target, tuple_awaitable);
  if (ec) co_return;
  down->set_option(tcp::no_delay(true));
  up->set_option(tcp::no_delay(true));
  auto to_server = std::make_shared<Direction>(ex);
  auto to_client = std::make_shared<Direction>(ex);
  asio::co_spawn(ex, read_side(down, to_server, delay), asio::detached);
  asio::co_spawn(ex, write_side(down, up, to_server), asio::detached);
  asio::co_spawn(ex, read_side(up, to_client, delay), asio::detached);
  asio::co_spawn(ex, write_side(up, down, to_client), asio::detached);
}

asio::awaitable<void> accept_loop(tcp::acceptor& acceptor, tcp::endpoint target,
                                  Clock::duration delay) {
  for (;;) {
    auto [ec, socket] = co_await acceptor.async_accept(tuple_awaitable);
    if (ec) continue;
    asio::co_spawn(acceptor.get_executor(), serve(std::move(socket), target, delay),
                   asio::detached);
  }
}

tcp::endpoint parse_endpoint(const std::string& host_port) {
  const auto colon = host_port.rfind(':');
  if (colon == std::string::npos) throw CLI::ValidationError("expected HOST:PORT: " + host_port);
  return {asio::ip::make_address(host_port.substr(0, colon)),
          static_cast<unsigned short>(std::stoul(host_port.substr(colon + 1)))};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"A TCP proxy that adds a fixed one-way delay to every byte in both directions"};
  std::string to;
  std::string listen = "127.0.0.1:0";
  unsigned delay_us = 0;
  app.add_option("--to", to, "HOST:PORT to forward to")->required();
  app.add_option("--listen", listen, "HOST:PORT to accept on")->capture_default_str();
  app.add_option("--delay-us", delay_us, "One-way delay added, microseconds")
      ->required()
      ->check(CLI::Range(0u, 10'000'000u));
  CLI11_PARSE(app, argc, argv);
  try {
    asio::io_context ioc;
    tcp::acceptor acceptor(ioc, parse_endpoint(listen));
    std::printf("objdirect-delay-proxy listening on http://%s:%u\n",
                acceptor.local_endpoint().address().to_string().c_str(),
                acceptor.local_endpoint().port());
    std::fflush(stdout);
    asio::co_spawn(ioc,
                   accept_loop(acceptor, parse_endpoint(to), std::chrono::microseconds(delay_us)),
                   asio::detached);
    ioc.run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "objdirect-delay-proxy: %s\n", e.what());
    return 1;
  }
  return 0;
}
