// The baselines objdirect-bench measures in the same run as the data paths: one-thread memcpy
// bandwidth (the physical limit of a copy here), raw loopback TCP throughput (what a socket data
// path can reach), and nginx serving the same bytes over HTTP (what a mature static HTTP server
// reaches with the same client code).
//
// Errors: the measurements cannot fail short of resource exhaustion and report 0 GB/s when a
// socket cannot be set up; Nginx::start returns Errc::unavailable when nginx is missing or does
// not come up within 10 s.
// Thread safety: the functions may be called from any one thread at a time (they spawn their own
// threads); an Nginx object is thread-compatible.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "common/status.hpp"
#include "process.hpp"

namespace objdirect::bench {

// GB/s (10^9 bytes/s) of std::memcpy of `size` bytes between two touched buffers, one thread,
// repeated for about `duration`. Best of three equal slices, as the raw transports table in
// docs/BENCHMARKS.md.
// huge_pages: both buffers advised MADV_HUGEPAGE (objdirect-bench --buffer-pages).
double memcpy_gbps(std::uint64_t size, std::chrono::milliseconds duration, bool huge_pages);

// GB/s of one TCP connection over 127.0.0.1: a sender thread writes messages of `size` bytes,
// a receiver thread reads them into a buffer of min(size, 64 MiB); both with 4 MiB socket
// buffers requested.
double tcp_loopback_gbps(std::uint64_t size, std::chrono::milliseconds duration);

// nginx as a non-daemon child serving `root` on 127.0.0.1:<free port>, with a temporary
// configuration, logs and pid file under `work_dir`. It also accepts WebDAV PUT and DELETE of
// files under `root` (`dav_methods PUT DELETE`, no body size limit, bodies received into a
// temporary directory under `work_dir`).
class Nginx {
 public:
  static Result<Nginx> start(const std::string& root, const std::string& work_dir);
  std::uint16_t port() const noexcept { return port_; }
  pid_t pid() const noexcept { return proc_.pid(); }
  void stop() { proc_.stop(); }

 private:
  Process proc_;
  std::uint16_t port_ = 0;
};

// A free TCP port on 127.0.0.1 (bound, then released: a small race that loopback tolerates).
std::uint16_t free_loopback_port();
// true once a TCP connection to 127.0.0.1:port succeeds.
bool can_connect(std::uint16_t port);

}  // namespace objdirect::bench
