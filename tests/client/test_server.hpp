// objdirect-server for the client tests (client_integration_test, client_device_memory_test,
// client_sse_c_test): started in its own process on a free loopback port with a fresh data
// directory, ready once it printed its "listening on" line, stopped with SIGTERM. It never
// outlives the test process (PR_SET_PDEATHSIG), and its output is read until it exits, so that it
// never blocks on a full pipe. Each test binary defines OBJDIRECT_SERVER_BIN.
//
// Thread safety: start_server and stop_server are called from one thread (a test environment's
// or suite's SetUp and TearDown); Server::output() from any thread.
#pragma once

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace objdirect::test_server {

struct ServerOptions {
  std::string dir_prefix;  // the data directory is $TMPDIR/<dir_prefix>-<name>-<pid>
  std::string access_key, secret_key;
  // OBJDIRECT_TEST_SERVER_BIN replaces the binary and OBJDIRECT_TEST_SERVER_ARGS adds arguments
  // (scripts/with-upstream.sh runs the tests against a gateway that way).
  bool from_environment = false;
  bool with_stderr = false;      // stderr goes to output() too (otherwise to the test's stderr)
  bool with_access_log = false;  // --access-log <dir>/access.log (Server::access_log())
};

struct Server {
  pid_t pid = -1;
  std::string endpoint;  // the address it printed
  std::filesystem::path dir;

  // Everything the server printed so far.
  std::string output() {
    std::lock_guard lk(mu);
    return text;
  }

  // The access log (with_access_log; empty otherwise).
  std::string access_log() const {
    std::ifstream in(dir / "access.log");
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  std::mutex mu;
  std::string text;
  std::thread drain;  // reads the server's output until it exits (joined by stop_server)
};

inline void stop_server(Server*& s) {
  if (!s) return;
  if (s->pid > 0) {
    kill(s->pid, SIGTERM);
    waitpid(s->pid, nullptr, 0);
  }
  // The server has exited, so its end of the pipe is closed and the drain thread ends.
  if (s->drain.joinable()) s->drain.join();
  std::filesystem::remove_all(s->dir);
  delete s;
  s = nullptr;
}

// Starts the server with `extra` arguments appended; nullptr (and a test failure) when it did not
// print its address within 30 s.
inline Server* start_server(const ServerOptions& o, const std::string& name,
                            std::vector<std::string> extra) {
  auto* s = new Server;
  s->dir = std::filesystem::temp_directory_path() /
           (o.dir_prefix + "-" + name + "-" + std::to_string(getpid()));
  std::filesystem::remove_all(s->dir);
  std::filesystem::create_directories(s->dir / "data");
  const char* bin = o.from_environment ? std::getenv("OBJDIRECT_TEST_SERVER_BIN") : nullptr;
  if (!bin || !*bin) bin = OBJDIRECT_SERVER_BIN;
  std::vector<std::string> args = {bin,
                                   "--listen",
                                   "127.0.0.1:0",
                                   "--data",
                                   (s->dir / "data").string(),
                                   "--access-key",
                                   o.access_key,
                                   "--secret-key",
                                   o.secret_key,
                                   "--no-fsync"};
  if (o.with_access_log) {
    args.push_back("--access-log");
    args.push_back((s->dir / "access.log").string());
  }
  args.insert(args.end(), extra.begin(), extra.end());
  if (const char* more = o.from_environment ? std::getenv("OBJDIRECT_TEST_SERVER_ARGS") : nullptr) {
    std::istringstream in(more);
    for (std::string a; in >> a;) args.push_back(a);
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int out[2];
  if (pipe(out) != 0) {
    ADD_FAILURE() << "pipe failed";
    stop_server(s);
    return nullptr;
  }
  s->pid = fork();
  if (s->pid < 0) {
    ADD_FAILURE() << "fork failed";
    close(out[0]);
    close(out[1]);
    stop_server(s);
    return nullptr;
  }
  if (s->pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlives a test killed by its timeout
    dup2(out[1], 1);
    if (o.with_stderr) dup2(out[1], 2);
    close(out[0]);
    close(out[1]);
    execv(bin, argv.data());
    _exit(127);
  }
  close(out[1]);
  const std::string marker = "listening on ";
  std::string text;
  auto line_done = [&] {
    auto at = text.find(marker);
    return at != std::string::npos && text.find('\n', at) != std::string::npos;
  };
  for (int waited_ms = 0; waited_ms < 30'000 && !line_done(); waited_ms += 100) {
    pollfd p{out[0], POLLIN, 0};
    if (poll(&p, 1, 100) > 0) {
      char buf[512];
      const ssize_t n = read(out[0], buf, sizeof buf);
      if (n <= 0) break;
      text.append(buf, static_cast<std::size_t>(n));
    }
  }
  if (!line_done()) {
    ADD_FAILURE() << "server did not start; said: " << text;
    kill(s->pid, SIGKILL);
    waitpid(s->pid, nullptr, 0);
    s->pid = -1;
    close(out[0]);
    stop_server(s);
    return nullptr;
  }
  const auto at = text.find(marker);
  s->endpoint = text.substr(at + marker.size(), text.find('\n', at) - at - marker.size());
  while (!s->endpoint.empty() && (s->endpoint.back() == '\r' || s->endpoint.back() == ' ')) {
    s->endpoint.pop_back();
  }
  s->text = std::move(text);
  s->drain = std::thread([s, fd = out[0]] {
    char buf[4096];
    for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) {
      std::lock_guard lk(s->mu);
      s->text.append(buf, static_cast<std::size_t>(n));
    }
    close(fd);
  });
  return s;
}

}  // namespace objdirect::test_server
