#include "baselines.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <thread>
#include <vector>

namespace objdirect::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Mapping {
  std::byte* ptr = nullptr;
  std::size_t size = 0;
  explicit Mapping(std::size_t n, bool huge_pages = false) : size(n) {
    void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ptr = p == MAP_FAILED ? nullptr : static_cast<std::byte*>(p);
    if (ptr && huge_pages) ::madvise(ptr, n, MADV_HUGEPAGE);  // before the first touch
    if (ptr) std::memset(ptr, 0x3c, n);
  }
  ~Mapping() {
    if (ptr) munmap(ptr, size);
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
};

sockaddr_in loopback(std::uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

}  // namespace

double memcpy_gbps(std::uint64_t size, std::chrono::milliseconds duration, bool huge_pages) {
  Mapping src(size, huge_pages), dst(size, huge_pages);
  if (!src.ptr || !dst.ptr) return 0;
  double best = 0;
  for (int slice = 0; slice < 3; ++slice) {
    const auto t0 = Clock::now();
    const auto end = t0 + duration / 3;
    std::uint64_t bytes = 0;
    do {
      std::memcpy(dst.ptr, src.ptr, size);
      bytes += size;
      // Keep the copy from being optimised away.
      asm volatile("" : : "r"(dst.ptr) : "memory");
    } while (Clock::now() < end);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::max(best, static_cast<double>(bytes) / s / 1e9);
  }
  return best;
}

double tcp_loopback_gbps(std::uint64_t size, std::chrono::milliseconds duration) {
  const int ls = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (ls < 0) return 0;
  sockaddr_in a = loopback(0);
  socklen_t alen = sizeof a;
  if (::bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(ls, 1) != 0 ||
      ::getsockname(ls, reinterpret_cast<sockaddr*>(&a), &alen) != 0) {
    ::close(ls);
    return 0;
  }
  const int buf_bytes = 4 << 20;
  const std::uint64_t chunk = std::min<std::uint64_t>(size, 64ull << 20);
  std::atomic<bool> stop{false};
  std::thread sender([&] {
    const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ::setsockopt(s, SOL_SOCKET, SO_SNDBUF, &buf_bytes, sizeof buf_bytes);
    int one = 1;
    ::setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    // A send blocked on a full window must not outlive the measurement (see the close below).
    timeval tv{1, 0};
    ::setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(s);
      return;
    }
    Mapping src(chunk);
    while (!stop.load(std::memory_order_relaxed)) {
      // One message of `size` bytes, written from a chunk-sized buffer.
      for (std::uint64_t left = size; left > 0 && !stop.load(std::memory_order_relaxed);) {
        const std::size_t n = static_cast<std::size_t>(std::min(left, chunk));
        const ssize_t w = ::send(s, src.ptr, n, MSG_NOSIGNAL);
        if (w <= 0) {
          stop = true;
          break;
        }
        left -= static_cast<std::uint64_t>(w);
      }
    }
    ::close(s);
  });
  const int c = ::accept4(ls, nullptr, nullptr, SOCK_CLOEXEC);
  ::close(ls);
  if (c < 0) {
    stop = true;
    sender.join();
    return 0;
  }
  ::setsockopt(c, SOL_SOCKET, SO_RCVBUF, &buf_bytes, sizeof buf_bytes);
  Mapping dst(chunk);
  // Warm-up of 50 ms (slow start, buffer auto-tuning) outside the measurement.
  auto warm_end = Clock::now() + std::chrono::milliseconds(50);
  while (Clock::now() < warm_end) {
    if (::recv(c, dst.ptr, chunk, 0) <= 0) break;
  }
  const auto t0 = Clock::now();
  const auto end = t0 + duration;
  std::uint64_t bytes = 0;
  while (Clock::now() < end) {
    const ssize_t r = ::recv(c, dst.ptr, chunk, 0);
    if (r <= 0) break;
    bytes += static_cast<std::uint64_t>(r);
  }
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  stop = true;
  // close() with unread bytes queued sends a RST, which fails the sender's blocked send at
  // once; shutdown() would only send a FIN and leave it waiting for window space forever.
  ::close(c);
  sender.join();
  return static_cast<double>(bytes) / s / 1e9;
}

std::uint16_t free_loopback_port() {
  const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a = loopback(0);
  socklen_t alen = sizeof a;
  std::uint16_t port = 0;
  if (::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &alen) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(s);
  return port;
}

bool can_connect(std::uint16_t port) {
  const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a = loopback(port);
  const bool ok = ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(s);
  return ok;
}

Result<Nginx> Nginx::start(const std::string& root, const std::string& work_dir) {
  const char* candidates[] = {"/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/bin/nginx"};
  std::string bin;
  for (const char* c : candidates) {
    if (::access(c, X_OK) == 0) {
      bin = c;
      break;
    }
  }
  if (bin.empty()) return Status(Errc::unavailable, "nginx not installed (scripts/bootstrap)");
  Nginx n;
  n.port_ = free_loopback_port();
  const std::string conf = work_dir + "/nginx.conf";
  {
    std::ofstream f(conf);
    // Tuned as a fair static-file server: sendfile, keep-alive, as many workers as cores, logs
    // off; WebDAV PUT enabled (http_dav_module, in Debian's nginx). `user` only matters when run as
    // root (workers would otherwise drop to nobody and could not read a private temporary
    // directory).
    f << (::geteuid() == 0 ? "user root;\n" : "") << "worker_processes auto;\n"
      << "pid " << work_dir << "/nginx.pid;\n"
      << "error_log " << work_dir << "/nginx-error.log warn;\n"
      << "events { worker_connections 1024; }\n"
      << "http {\n"
      << "  access_log off;\n  sendfile on;\n  tcp_nopush on;\n  tcp_nodelay on;\n"
      << "  keepalive_requests 1000000;\n  keepalive_timeout 120s;\n"
      << "  default_type application/octet-stream;\n"
      << "  client_body_temp_path " << work_dir << "/nginx-body;\n"
      << "  proxy_temp_path " << work_dir << "/nginx-proxy;\n"
      << "  fastcgi_temp_path " << work_dir << "/nginx-fastcgi;\n"
      << "  uwsgi_temp_path " << work_dir << "/nginx-uwsgi;\n"
      << "  scgi_temp_path " << work_dir << "/nginx-scgi;\n"
      << "  server {\n    listen 127.0.0.1:" << n.port_ << ";\n    root " << root
      << ";\n"
      // WebDAV PUT (and the DELETE a PUT worker sends at its end) for the PUT baseline: the
      // body is received into client_body_temp_path (same file system) and renamed into place.
      << "    dav_methods PUT DELETE;\n    client_max_body_size 0;\n"
      << "  }\n}\n";
  }
  SpawnOptions so;
  so.argv = {bin,  "-p", work_dir, "-e",         work_dir + "/nginx-error.log",
             "-c", conf, "-g",     "daemon off;"};
  so.stderr_file = work_dir + "/nginx-stderr.log";
  auto p = Process::spawn(so);
  if (!p.ok()) return p.status();
  n.proc_ = std::move(*p);
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!can_connect(n.port_)) {
    if (Clock::now() > deadline || n.proc_.wait(std::chrono::milliseconds(0)) != -1) {
      n.proc_.stop();
      return Status(Errc::unavailable,
                    "nginx did not start (see " + work_dir + "/nginx-error.log)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return n;
}

}  // namespace objdirect::bench
