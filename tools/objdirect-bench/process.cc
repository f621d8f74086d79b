#include "process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace objdirect::bench {
namespace {

using Clock = std::chrono::steady_clock;

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

Result<Process> Process::spawn(const SpawnOptions& options) {
  // Everything exec needs is built before fork: the child only calls async-signal-safe functions.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    std::string_view s(*e);
    const std::string_view name = s.substr(0, s.find('='));
    bool overridden = false;
    for (const auto& [k, v] : options.env) overridden |= (k == name);
    if (!overridden) env_strings.emplace_back(s);
  }
  for (const auto& [k, v] : options.env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = options.argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);

  int in_pipe[2] = {-1, -1}, out_pipe[2] = {-1, -1};
  if (options.pipe_stdin && ::pipe2(in_pipe, O_CLOEXEC) != 0) {
    return Status(Errc::io_error, std::string("pipe: ") + std::strerror(errno));
  }
  if (options.pipe_stdout && ::pipe2(out_pipe, O_CLOEXEC) != 0) {
    close_fd(in_pipe[0]);
    close_fd(in_pipe[1]);
    return Status(Errc::io_error, std::string("pipe: ") + std::strerror(errno));
  }
  int err_fd = -1;
  if (!options.stderr_file.empty()) {
    err_fd = ::open(options.stderr_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    return Status(Errc::io_error, std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    if (in_pipe[0] >= 0) ::dup2(in_pipe[0], 0);
    if (out_pipe[1] >= 0) ::dup2(out_pipe[1], 1);
    if (err_fd >= 0) ::dup2(err_fd, 2);
    ::execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  Process p;
  p.pid_ = pid;
  if (in_pipe[0] >= 0) ::close(in_pipe[0]);
  if (out_pipe[1] >= 0) ::close(out_pipe[1]);
  if (err_fd >= 0) ::close(err_fd);
  p.in_fd_ = in_pipe[1];
  p.out_fd_ = out_pipe[0];
  return p;
}

Process& Process::operator=(Process&& other) noexcept {
  if (this != &other) {
    stop();
    pid_ = std::exchange(other.pid_, -1);
    in_fd_ = std::exchange(other.in_fd_, -1);
    out_fd_ = std::exchange(other.out_fd_, -1);
    pending_ = std::move(other.pending_);
  }
  return *this;
}

Process::~Process() {
  stop();
}

std::optional<std::string> Process::read_line(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (true) {
    const std::size_t nl = pending_.find('\n');
    if (nl != std::string::npos) {
      std::string line = pending_.substr(0, nl);
      pending_.erase(0, nl + 1);
      return line;
    }
    if (out_fd_ < 0) return std::nullopt;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd pfd{out_fd_, POLLIN, 0};
    const int n = ::poll(&pfd, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    char buf[65536];
    const ssize_t got = ::read(out_fd_, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      close_fd(out_fd_);
      if (pending_.empty()) return std::nullopt;
      return std::exchange(pending_, {});
    }
    pending_.append(buf, static_cast<std::size_t>(got));
  }
}

bool Process::write(const std::string& text) {
  if (in_fd_ < 0) return false;
  std::size_t off = 0;
  while (off < text.size()) {
    const ssize_t n = ::write(in_fd_, text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<std::size_t>(n);
  }
  return true;
}

int Process::wait(std::chrono::milliseconds timeout) {
  if (pid_ < 0) return -1;
  const auto deadline = Clock::now() + timeout;
  while (true) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      close_fd(in_fd_);
      close_fd(out_fd_);
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (r < 0) {
      pid_ = -1;
      return -1;
    }
    if (Clock::now() >= deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void Process::stop(std::chrono::milliseconds grace) {
  if (pid_ < 0) {
    close_fd(in_fd_);
    close_fd(out_fd_);
    return;
  }
  close_fd(in_fd_);  // a worker waiting for "go" sees EOF and leaves
  if (wait(std::chrono::milliseconds(0)) != -1 || pid_ < 0) return;
  ::kill(pid_, SIGTERM);
  if (wait(grace) != -1 || pid_ < 0) return;
  ::kill(pid_, SIGKILL);
  (void)wait(std::chrono::milliseconds(5000));
}

std::optional<double> process_cpu_s(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  // Field 2 (comm) may hold spaces; parse after its closing parenthesis. utime and stime are
  // fields 14 and 15, i.e. the 12th and 13th after the state field.
  const std::size_t rp = s.rfind(')');
  if (rp == std::string::npos) return std::nullopt;
  std::istringstream in(s.substr(rp + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15; ++i) {
    if (!(in >> field)) return std::nullopt;
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

}  // namespace objdirect::bench
