// Child processes of objdirect-bench: the server, nginx and the workers.
//
// spawn() fork/execs with an explicit environment (the parent's plus overrides) and optional
// pipes to the child's stdin and stdout; stderr goes to a file (or is inherited). The Process
// object owns the child: its destructor sends SIGTERM, waits up to 5 s, then SIGKILLs.
//
// Errors: spawn returns Errc::io_error when a pipe or fork fails; exec failures show up as the
// child exiting with status 127.
// Thread safety: a Process is thread-compatible; spawn() must not race with setenv().
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.hpp"

namespace objdirect::bench {

struct SpawnOptions {
  std::vector<std::string> argv;                         // argv[0] is the executable path
  std::vector<std::pair<std::string, std::string>> env;  // overrides of the parent's env
  bool pipe_stdin = false;
  bool pipe_stdout = false;
  std::string stderr_file;  // empty: inherit
};

class Process {
 public:
  static Result<Process> spawn(const SpawnOptions& options);
  Process() = default;
  Process(Process&& other) noexcept { *this = std::move(other); }
  Process& operator=(Process&& other) noexcept;
  ~Process();

  pid_t pid() const noexcept { return pid_; }
  // Reads one line from the child's stdout (without the newline). nullopt at EOF, on error, or
  // when nothing arrived within timeout.
  std::optional<std::string> read_line(std::chrono::milliseconds timeout);
  // Writes text to the child's stdin. false when the pipe is closed.
  bool write(const std::string& text);
  // Terminates (SIGTERM, then SIGKILL after grace) and reaps. Idempotent.
  void stop(std::chrono::milliseconds grace = std::chrono::milliseconds(5000));
  // Waits for exit without signalling; the exit status, or -1 on timeout.
  int wait(std::chrono::milliseconds timeout);

 private:
  pid_t pid_ = -1;
  int in_fd_ = -1;
  int out_fd_ = -1;
  std::string pending_;  // stdout bytes read past the last returned line
};

// user+system CPU seconds of a process from /proc/<pid>/stat; nullopt if unreadable.
std::optional<double> process_cpu_s(pid_t pid);

}  // namespace objdirect::bench
