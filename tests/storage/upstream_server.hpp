// A real objdirect-server (local backend, its own temporary data dir, port 0) for the gateway
// tests: storage/s3 needs an S3 service to stand in front of. The binary is
// OBJDIRECT_SERVER_BIN (set by CMake), or $OBJDIRECT_TEST_SERVER_BIN.
//
// Thread safety: one UpstreamServer per test, used from one thread.
#pragma once

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <string_view>
#include <thread>

#include "common/status.hpp"
#include "storage/s3/s3_store.hpp"

namespace objdirect::testing_upstream {

inline constexpr const char* kAccessKey = "upstreamkey";
inline constexpr const char* kSecretKey = "upstream-secret/0123456789";

class UpstreamServer {
 public:
  UpstreamServer() = default;
  UpstreamServer(const UpstreamServer&) = delete;
  UpstreamServer& operator=(const UpstreamServer&) = delete;
  ~UpstreamServer() { stop(); }

  // Starts the server and waits for its "listening on" line.
  Status start() {
    char tmpl[] = "/tmp/objdirect-upstream-XXXXXX";
    if (!::mkdtemp(tmpl)) return Status(Errc::io_error, "mkdtemp failed");
    dir_ = tmpl;
    const char* bin = std::getenv("OBJDIRECT_TEST_SERVER_BIN");
    if (!bin || !*bin) bin = OBJDIRECT_SERVER_BIN;
    int out[2];
    if (::pipe(out) != 0) return Status(Errc::io_error, "pipe failed");
    const std::string data = dir_ + "/data", log = dir_ + "/server.log",
                      access = dir_ + "/access.log";
    pid_ = ::fork();
    if (pid_ < 0) return Status(Errc::io_error, "fork failed");
    if (pid_ == 0) {
      ::dup2(out[1], 1);
      FILE* f = std::fopen(log.c_str(), "w");
      if (f) ::dup2(::fileno(f), 2);
      ::close(out[0]);
      ::execl(bin, "objdirect-server", "--listen", "127.0.0.1:0", "--data", data.c_str(),
              "--access-key", kAccessKey, "--secret-key", kSecretKey, "--fabric", "none",
              "--no-fsync", "--access-log", access.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(out[1]);
    std::string line;
    char c;
    while (::read(out[0], &c, 1) == 1 && c != '\n') line += c;
    ::close(out[0]);  // the server prints one line; later writes to stdout are dropped
    const auto colon = line.rfind(':');
    if (line.find("listening on") == std::string::npos || colon == std::string::npos) {
      stop();
      return Status(Errc::io_error, "upstream objdirect-server did not start (" + line + ")");
    }
    port_ = std::stoi(line.substr(colon + 1));
    return Status::Ok();
  }

  void stop() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
    if (!dir_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
      dir_.clear();
    }
  }

  int port() const { return port_; }

  // Lines of the server's JSON access log (one per S3 request answered so far) that contain
  // every one of `needles`, e.g. {"\"op\":\"HeadObject\"", "\"status\":304"}.
  int access_log_count(std::initializer_list<std::string_view> needles) const {
    std::ifstream in(dir_ + "/access.log");
    int n = 0;
    for (std::string line; std::getline(in, line);) {
      bool all = true;
      for (auto nd : needles) all = all && line.find(nd) != std::string::npos;
      n += all ? 1 : 0;
    }
    return n;
  }
  // access_log_count once it reaches `want` (the server logs a request just after answering it),
  // or whatever it is after timeout_ms.
  int wait_access_log_count(std::initializer_list<std::string_view> needles, int want,
                            int timeout_ms = 5000) const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    int n = access_log_count(needles);
    while (n < want && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      n = access_log_count(needles);
    }
    return n;
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // Options for an S3Store in front of this server.
  storage::S3StoreOptions options() const {
    storage::S3StoreOptions o;
    o.upstream = url();
    o.access_key = kAccessKey;
    o.secret_key = kSecretKey;
    return o;
  }

 private:
  std::string dir_;
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace objdirect::testing_upstream
