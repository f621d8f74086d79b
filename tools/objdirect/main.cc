// objdirect: the command-line client (cp, ls, mb, rb, rm, stat, cat, bench) over libobjdirect.
//
// Exit codes (docs/client.md, `objdirect --help`): 0 ok, 1 other error, 2 bad arguments or
// configuration, 3 not found, 4 access denied, 5 endpoint unreachable (or timed out, or service
// unavailable), 130/143 interrupted by SIGINT/SIGTERM.
//
// Transfers are cut into parts here (part_size bytes, `concurrency` at a time) so that the
// progress bar moves part by part; each part is one libobjdirect get/upload_part into (or out
// of) a memory map of the file that is registered once, so RDMA lands straight in the page
// cache. Downloads write to a hidden temporary file beside the destination (.NAME.objdirect-XXXXXX)
// and rename it over the destination only once every byte arrived; SIGINT, SIGTERM and SIGHUP go
// to one thread that removes those files and aborts the multipart uploads in flight.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <future>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "client/planner.hpp"
#include "common/limits.hpp"
#include "objdirect/client.hpp"

namespace objdirect::limits {
// How long a command killed by SIGINT/SIGTERM/SIGHUP waits for the AbortMultipartUpload of its
// uploads in flight before it dies anyway.
inline constexpr std::uint32_t cli_abort_wait_ms = 2000;
}  // namespace objdirect::limits

namespace {

using namespace objdirect;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

enum Exit : int {
  kOk = 0,
  kGeneric = 1,
  kBadArgs = 2,
  kNotFound = 3,
  kAccessDenied = 4,
  kUnreachable = 5,
};

constexpr const char* kExitCodesHelp =
    "Exit codes: 0 ok, 1 other error, 2 bad arguments or configuration, 3 not found (bucket,\n"
    "key or local file), 4 access denied (also bad credentials), 5 endpoint unreachable, timed\n"
    "out or unavailable, 130/143 interrupted (SIGINT/SIGTERM). Errors are one line on stderr.";

int exit_code(const Status& st) {
  switch (st.code()) {
    case Errc::ok:
      return kOk;
    case Errc::invalid_argument:
      return kBadArgs;
    case Errc::no_such_bucket:
    case Errc::no_such_key:
    case Errc::no_such_upload:
      return kNotFound;
    case Errc::access_denied:
    case Errc::signature_does_not_match:
    case Errc::invalid_access_key_id:
    case Errc::request_time_too_skewed:
    case Errc::expired_token:
      return kAccessDenied;
    case Errc::unavailable:
    case Errc::timeout:
      return kUnreachable;
    default:
      return kGeneric;
  }
}

// Serialises stderr lines with the progress bar.
std::mutex g_err_mu;

int report(const Status& st) {
  std::lock_guard lk(g_err_mu);
  std::cerr << "objdirect: " << st.message() << " (" << errc_name(st.code()) << ")\n";
  return exit_code(st);
}

int fail_msg(int code, const std::string& msg) {
  std::lock_guard lk(g_err_mu);
  std::cerr << "objdirect: " << msg << "\n";
  return code;
}

struct S3Url {
  std::string bucket;
  std::string key;
};

std::optional<S3Url> parse_s3(std::string_view s) {
  if (!s.starts_with("s3://")) return std::nullopt;
  s.remove_prefix(5);
  auto slash = s.find('/');
  S3Url u;
  u.bucket = std::string(s.substr(0, slash));
  if (slash != std::string_view::npos) u.key = std::string(s.substr(slash + 1));
  return u;
}

std::string json_escape(std::string_view s) {
  std::string out;
  for (char ch : s) {
    switch (ch) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", ch);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  return out;
}

// --- interruption
// --------------------------------------------------------------------------------- SIGINT, SIGTERM
// and SIGHUP are blocked in every thread and taken by one thread (sigwait), which removes the
// temporary files of downloads in flight, aborts the multipart uploads in flight (waiting at most
// limits::cli_abort_wait_ms), and then dies of the same signal. Temporary files and uploads are
// registered under g_inflight_mu, which the signal thread keeps once it has taken it: no file is
// created or renamed into place after it removed the others.
std::mutex g_inflight_mu;
std::set<std::string> g_temp_files;  // hidden .NAME.objdirect-XXXXXX files being written
struct InflightUpload {
  Client* client;
  std::string bucket, key, upload_id;
};
std::map<std::uint64_t, InflightUpload> g_uploads;
std::uint64_t g_upload_seq = 0;

sigset_t termination_signals() {
  sigset_t s;
  sigemptyset(&s);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&s, sig);
  return s;
}

// Called first in main, before any other thread exists (threads inherit the blocked mask).
void start_signal_thread() {
  sigset_t set = termination_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set] {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) return;
    g_inflight_mu.lock();  // never released: nothing new starts or lands
    for (const auto& f : g_temp_files) unlink(f.c_str());
    std::vector<InflightUpload> uploads;
    for (const auto& [id, u] : g_uploads) uploads.push_back(u);
    if (!uploads.empty()) {
      auto done = std::make_shared<std::atomic<bool>>(false);
      std::thread([uploads, done] {
        for (const auto& u : uploads) {
          (void)u.client->abort_multipart_upload(u.bucket, u.key, u.upload_id);
        }
        *done = true;
      }).detach();
      const auto deadline = Clock::now() + std::chrono::milliseconds(limits::cli_abort_wait_ms);
      while (!*done && Clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
    signal(sig, SIG_DFL);
    pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
    raise(sig);
  }).detach();
}

// Registers a multipart upload in flight, to be aborted if a signal ends the command.
// Thread safety: construction and destruction lock g_inflight_mu.
struct UploadGuard {
  std::uint64_t id;
  UploadGuard(Client& c, std::string_view bucket, std::string_view key, std::string_view uid) {
    std::lock_guard lk(g_inflight_mu);
    id = ++g_upload_seq;
    g_uploads[id] = {&c, std::string(bucket), std::string(key), std::string(uid)};
  }
  ~UploadGuard() {
    std::lock_guard lk(g_inflight_mu);
    g_uploads.erase(id);
  }
  UploadGuard(const UploadGuard&) = delete;
  UploadGuard& operator=(const UploadGuard&) = delete;
};

// A memory map of a file; unmapped on destruction.
struct Mapping {
  void* ptr = nullptr;
  std::size_t len = 0;
  Mapping() = default;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() { reset(); }
  void reset() {
    if (ptr) munmap(ptr, len);
    ptr = nullptr;
  }
};

struct Options {
  std::string endpoint;
  std::string profile;
  std::string fabric;
  std::string rdma;
  std::uint64_t part_size = 0;
  std::uint32_t concurrency = 0;
  bool json = false;
  bool no_progress = false;
  bool recursive = false;
};

Result<std::unique_ptr<Client>> make_client(const Options& o) {
  auto cfg = ClientConfig::load(o.profile);
  if (!cfg.ok()) return cfg.status();
  if (!o.endpoint.empty()) cfg->endpoint = o.endpoint;
  if (!o.fabric.empty()) cfg->fabric = o.fabric;
  if (!o.rdma.empty()) cfg->rdma = o.rdma;
  if (o.part_size) cfg->part_size_bytes = o.part_size;
  if (o.concurrency) cfg->concurrency = o.concurrency;
  return Client::create(std::move(*cfg));
}

// --- progress ------------------------------------------------------------------------------------

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u ? "%.1f %s" : "%.0f %s", b, units[u]);
  return buf;
}

// A one-line progress bar on stderr, redrawn every 200 ms by its own thread: the current file
// (bytes and percent) and the whole command (bytes, percent, rate, ETA). Disabled (every call a
// no-op) unless stderr is a terminal and neither --no-progress nor --json was given.
// Thread safety: add() and file() may be called from any thread.
class Progress {
 public:
  Progress(const Options& o, std::uint64_t total_bytes, std::size_t total_files)
      : enabled_(!o.no_progress && !o.json && isatty(STDERR_FILENO) == 1),
        multi_(o.recursive),
        total_(total_bytes),
        files_(total_files) {
    if (enabled_) thread_ = std::thread([this] { run(); });
  }
  ~Progress() { finish(); }

  void add_total(std::uint64_t bytes, std::size_t files) {
    total_ += bytes;
    files_ += files;
  }
  void file(const std::string& name, std::uint64_t size) {
    if (!enabled_) return;
    std::lock_guard lk(mu_);
    name_ = name;
    file_size_ = size;
    file_done_ = 0;
    ++file_index_;
    dirty_ = true;
    cv_.notify_all();
  }
  void add(std::uint64_t bytes, bool current_file = true) {
    done_ += bytes;
    if (current_file && enabled_) {
      std::lock_guard lk(mu_);
      file_done_ += bytes;
    }
  }
  // Stops the redraw thread and clears the line.
  void finish() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    std::lock_guard elk(g_err_mu);
    std::fputs("\r\033[K", stderr);
    std::fflush(stderr);
  }

 private:
  // Draws at once, then every 200 ms and whenever a new file starts.
  void run() {
    std::unique_lock lk(mu_);
    draw(lk);
    while (!cv_.wait_for(lk, std::chrono::milliseconds(200), [this] { return stop_ || dirty_; }) ||
           !stop_) {
      dirty_ = false;
      draw(lk);
    }
  }
  void draw(std::unique_lock<std::mutex>&) {
    const double secs = std::chrono::duration<double>(Clock::now() - start_).count();
    const double done = static_cast<double>(done_.load());
    const double total = static_cast<double>(total_.load());
    const double rate = secs > 0 ? done / secs : 0;
    // No ETA until the rate means something (half a second in, some bytes moved).
    char eta[32] = "--:--";
    if (secs >= 0.5 && rate > 0 && total >= done) {
      const double left = (total - done) / rate;
      const auto l = static_cast<long>(left);
      if (left < 3600) {
        std::snprintf(eta, sizeof(eta), "%02ld:%02ld", l / 60, l % 60);
      } else if (left < 100 * 3600) {
        std::snprintf(eta, sizeof(eta), "%ld:%02ld:%02ld", l / 3600, l / 60 % 60, l % 60);
      }
    }
    std::string name = name_;
    if (name.size() > 32) name = "..." + name.substr(name.size() - 29);
    char line[512];
    const std::size_t files = files_.load();
    std::snprintf(
        line, sizeof(line), "\r\033[K%s%s %3.0f%% %s/%s | total %3.0f%% %s/%s %s/s ETA %s%s",
        multi_ ? ("[" + std::to_string(file_index_) + "/" + std::to_string(files) + "] ").c_str()
               : "",
        name.c_str(), file_size_ ? 100.0 * file_done_ / file_size_ : 100.0,
        human_bytes(file_done_).c_str(), human_bytes(file_size_).c_str(),
        total > 0 ? 100.0 * done / total : 100.0, human_bytes(done).c_str(),
        human_bytes(total).c_str(), human_bytes(rate).c_str(), eta, "");
    std::lock_guard elk(g_err_mu);
    std::fputs(line, stderr);
    std::fflush(stderr);
  }

  const bool enabled_;
  const bool multi_;
  std::atomic<std::uint64_t> total_;
  std::atomic<std::size_t> files_;
  std::atomic<std::uint64_t> done_{0};
  const Clock::time_point start_ = Clock::now();
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool dirty_ = false;
  std::string name_;
  std::uint64_t file_size_ = 0, file_done_ = 0;
  std::size_t file_index_ = 0;
  std::thread thread_;
};

// --- the result of a command's transfers ------------------------------------------------------

// Merges the TransferResults of many parts or files into the one path the final line names:
// rdma only if every byte went over RDMA; http-fallback if any part fell back.
struct Summary {
  std::mutex mu;
  std::uint64_t bytes = 0;
  std::size_t files = 0;
  std::uint32_t requests = 0;
  bool any_rdma = false, any_http = false, any_fallback = false;
  std::string fabric, reason, etag;

  void add(const TransferResult& r, bool count_file) {
    std::lock_guard lk(mu);
    bytes += r.bytes;
    requests += r.requests;
    if (count_file) ++files;
    if (r.bytes == 0 && r.path == TransferPath::http && r.reason == "empty transfer") return;
    any_rdma = any_rdma || r.path == TransferPath::rdma;
    any_http = any_http || r.path == TransferPath::http;
    any_fallback = any_fallback || r.path == TransferPath::http_fallback;
    if (fabric.empty()) fabric = r.fabric;
    if (reason.empty()) reason = r.reason;
  }
  std::string path() const {
    if (any_fallback || (any_rdma && any_http)) return "http-fallback";
    return any_rdma ? "rdma" : "http";
  }
};

void print_summary(const Options& o, const char* what, Summary& s, double seconds) {
  const double gbytes_per_s = seconds > 0 ? static_cast<double>(s.bytes) / seconds / 1e9 : 0;
  const double gbits_per_s = gbytes_per_s * 8;
  const std::string path = s.path();
  const std::string& fabric = s.fabric;
  if (o.json) {
    std::printf(
        "{\"bytes\":%llu,\"seconds\":%.6f,\"path\":\"%s\",\"fabric\":\"%s\",\"reason\":\"%s\","
        "\"gbps\":%.3f,\"gbytes_per_s\":%.3f,\"etag\":\"%s\",\"requests\":%u",
        static_cast<unsigned long long>(s.bytes), seconds, path.c_str(),
        json_escape(fabric).c_str(), json_escape(path == "rdma" ? "" : s.reason).c_str(),
        gbits_per_s, gbytes_per_s, json_escape(s.etag).c_str(), s.requests);
    if (o.recursive) std::printf(",\"files\":%zu", s.files);
    std::printf("}\n");
    return;
  }
  std::printf("%s: ", what);
  if (o.recursive) std::printf("%zu files, ", s.files);
  std::printf("%llu bytes in %.3f s (%.2f GB/s, %.2f Gbit/s) via %s",
              static_cast<unsigned long long>(s.bytes), seconds, gbytes_per_s, gbits_per_s,
              path.c_str());
  if (!fabric.empty()) std::printf(" [%s]", fabric.c_str());
  if (path != "rdma" && !s.reason.empty()) std::printf(" (%s)", s.reason.c_str());
  std::printf("\n");
}

// Runs fn(0..n-1) on up to `width` threads; after the first error no new index starts and the
// first error's exit code is returned (its message was already printed by fn).
template <class Fn>
int run_parallel(std::size_t n, std::size_t width, Fn&& fn) {
  std::atomic<std::size_t> next{0};
  std::atomic<int> rc{kOk};
  auto worker = [&] {
    for (std::size_t i; rc.load() == kOk && (i = next.fetch_add(1)) < n;) {
      int r = fn(i);
      if (r != kOk) {
        int expected = kOk;
        rc.compare_exchange_strong(expected, r);
      }
    }
  };
  std::vector<std::thread> pool;
  const std::size_t threads = std::min(n, std::max<std::size_t>(width, 1));
  for (std::size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  if (n > 0) worker();
  for (auto& th : pool) th.join();
  return rc.load();
}

// --- one file -------------------------------------------------------------------------------

// Uploads a local file: one PutObject up to part_size, else a multipart upload whose parts go up
// `width` at a time (aborted on failure).
int upload_file(Client& c, const std::string& src, const S3Url& dst, std::size_t width,
                Progress& prog, Summary& sum) {
  int fd = open(src.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    return fail_msg(err == ENOENT ? kNotFound : kGeneric,
                    "cannot open " + src + ": " + std::strerror(err));
  }
  struct stat stbuf {};
  fstat(fd, &stbuf);
  if (!S_ISREG(stbuf.st_mode)) {
    close(fd);
    return fail_msg(kBadArgs, src + " is not a regular file (use --recursive for a directory)");
  }
  Mapping m;
  m.len = static_cast<std::size_t>(stbuf.st_size);
  if (m.len > 0) {
    m.ptr = mmap(nullptr, m.len, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (m.ptr == MAP_FAILED) {
      m.ptr = nullptr;
      close(fd);
      return fail_msg(kGeneric, "cannot map " + src + ": " + std::strerror(errno));
    }
  }
  close(fd);
  prog.file(src, m.len);
  const std::span<const std::byte> data(static_cast<const std::byte*>(m.ptr), m.len);
  MemoryHandle h;
  if (m.len > 0) {
    auto reg = c.register_memory(m.ptr, m.len);
    if (!reg.ok()) return report(reg.status());
    h = std::move(*reg);
  }
  auto plan = client::plan_upload(m.len, c.config().part_size_bytes);
  if (!plan.ok()) return report(plan.status());
  if (!plan->multipart) {
    auto r = c.put(dst.bucket, dst.key, data);
    if (!r.ok()) return report(r.status());
    prog.add(m.len);
    sum.add(*r, true);
    std::lock_guard lk(sum.mu);
    sum.etag = r->etag;
    return kOk;
  }
  auto uid = c.create_multipart_upload(dst.bucket, dst.key);
  if (!uid.ok()) return report(uid.status());
  UploadGuard guard(c, dst.bucket, dst.key, *uid);
  std::vector<Client::CompletedPart> parts(plan->parts.size());
  int rc = run_parallel(parts.size(), width, [&](std::size_t i) {
    const auto& p = plan->parts[i];
    auto r =
        c.upload_part(dst.bucket, dst.key, *uid, p.part_number, data.subspan(p.offset, p.length));
    if (!r.ok()) return report(r.status());
    parts[i] = {p.part_number, r->etag};
    prog.add(p.length);
    sum.add(*r, false);
    return static_cast<int>(kOk);
  });
  if (rc != kOk) {
    (void)c.abort_multipart_upload(dst.bucket, dst.key, *uid);
    return rc;
  }
  auto done = c.complete_multipart_upload(dst.bucket, dst.key, *uid, parts);
  if (!done.ok()) {
    (void)c.abort_multipart_upload(dst.bucket, dst.key, *uid);
    return report(done.status());
  }
  std::lock_guard lk(sum.mu);
  ++sum.files;
  ++sum.requests;
  sum.etag = done->etag;
  return kOk;
}

// Downloads an object of known size and ETag into `dst` (a file path) through a temporary file
// in the same directory, parts `width` at a time. Every part must come from the same version of
// the object (its ETag); else the download fails with nothing written.
int download_file(Client& c, const S3Url& src, std::uint64_t size, const std::string& etag,
                  const fs::path& final_path, std::size_t width, Progress& prog, Summary& sum) {
  fs::path dir = final_path.has_parent_path() ? final_path.parent_path() : fs::path(".");
  std::string tmpl = (dir / ("." + final_path.filename().string() + ".objdirect-XXXXXX")).string();
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  int fd;
  {
    std::lock_guard lk(g_inflight_mu);
    fd = mkstemp(name.data());
    if (fd >= 0) g_temp_files.insert(name.data());
  }
  if (fd < 0) {
    return fail_msg(kGeneric,
                    "cannot create a file in " + dir.string() + ": " + std::strerror(errno));
  }
  const std::string tmp = name.data();
  auto release_temp = [&](bool remove) {
    std::lock_guard lk(g_inflight_mu);
    if (remove) unlink(tmp.c_str());
    g_temp_files.erase(tmp);
  };
  Mapping m;
  auto fail = [&](int code) {
    m.reset();
    close(fd);
    release_temp(true);
    return code;
  };
  const mode_t mask = umask(0);
  umask(mask);
  fchmod(fd, 0644 & ~mask);
  m.len = static_cast<std::size_t>(size);
  if (m.len > 0) {
    if (ftruncate(fd, static_cast<off_t>(m.len)) != 0) {
      return fail(fail_msg(kGeneric, "cannot size " + tmp + ": " + std::strerror(errno)));
    }
    m.ptr = mmap(nullptr, m.len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m.ptr == MAP_FAILED) {
      m.ptr = nullptr;
      return fail(fail_msg(kGeneric, "cannot map " + tmp + ": " + std::strerror(errno)));
    }
  }
  prog.file(src.key, size);
  MemoryHandle h;
  if (m.len > 0) {
    auto reg = c.register_memory(m.ptr, m.len);
    if (!reg.ok()) return fail(report(reg.status()));
    h = std::move(*reg);
  }
  const std::span<std::byte> data(static_cast<std::byte*>(m.ptr), m.len);
  auto pieces = client::split_range(0, size, c.config().part_size_bytes);
  int rc = run_parallel(pieces.size(), width, [&](std::size_t i) {
    const auto& p = pieces[i];
    auto r =
        c.get(src.bucket, src.key, data.subspan(p.offset, p.length), ByteRange{p.offset, p.length});
    if (!r.ok()) return report(r.status());
    if (r->bytes != p.length || r->object_size != size || (!etag.empty() && r->etag != etag)) {
      return fail_msg(kGeneric, "s3://" + src.bucket + "/" + src.key +
                                    " changed during the download; nothing was written");
    }
    prog.add(p.length);
    sum.add(*r, false);
    return static_cast<int>(kOk);
  });
  if (rc != kOk) return fail(rc);
  h = MemoryHandle();
  m.reset();
  bool renamed = close(fd) == 0;
  int err = errno;
  {
    std::lock_guard lk(g_inflight_mu);
    renamed = renamed && rename(tmp.c_str(), final_path.c_str()) == 0;
    if (!renamed) err = errno;
  }
  release_temp(!renamed);
  if (!renamed) {
    return fail_msg(kGeneric, "cannot write " + final_path.string() + ": " + std::strerror(err));
  }
  std::lock_guard lk(sum.mu);
  ++sum.files;
  if (size == 0) ++sum.requests;
  sum.etag = etag;
  return kOk;
}

// --- listings
// -------------------------------------------------------------------------------------

Result<std::vector<ListEntry>> list_all(Client& c, const std::string& bucket,
                                        const std::string& prefix) {
  std::vector<ListEntry> out;
  ListOptions lo;
  lo.prefix = prefix;
  for (;;) {
    auto page = c.list(bucket, lo);
    if (!page.ok()) return page.status();
    for (auto& e : page->objects) out.push_back(std::move(e));
    if (!page->is_truncated || page->next_continuation_token.empty()) break;
    lo.continuation_token = page->next_continuation_token;
  }
  return out;
}

// "p" -> "p/"; "" stays "" (the whole bucket).
std::string as_prefix(std::string p) {
  if (!p.empty() && p.back() != '/') p += '/';
  return p;
}

// The local path of `rel` (a key below the source prefix) under `root`, or an error when the key
// would leave `root`: an absolute key, an empty, "." or ".." component, or a NUL byte.
Result<fs::path> safe_local_path(const fs::path& root, std::string_view rel) {
  auto bad = [&](const char* why) {
    return Status(Errc::invalid_argument, "refusing key '" + std::string(rel) + "': " + why +
                                              " (it would not stay under " + root.string() + ")");
  };
  if (rel.empty()) return bad("empty name");
  if (rel.front() == '/') return bad("absolute path");
  if (rel.find('\0') != std::string_view::npos) return bad("NUL byte");
  fs::path out = root;
  std::string_view r = rel;
  while (!r.empty()) {
    auto slash = r.find('/');
    std::string_view part = r.substr(0, slash);
    if (part.empty()) return bad("empty path component");
    if (part == "." || part == "..") return bad("'.' or '..' path component");
    out /= std::string(part);
    if (slash == std::string_view::npos) break;
    r.remove_prefix(slash + 1);
  }
  return out;
}

// --- cp ---------------------------------------------------------------------------------------

int cmd_cp_upload(Client& c, const Options& o, const std::string& src, S3Url dst) {
  std::error_code ec;
  const std::size_t width = c.config().concurrency;
  Summary sum;
  if (!o.recursive) {
    if (fs::is_directory(src, ec)) {
      return fail_msg(kBadArgs, src + " is a directory (use --recursive)");
    }
    if (dst.key.empty() || dst.key.back() == '/') dst.key += fs::path(src).filename().string();
    Progress prog(o, fs::file_size(src, ec), 1);
    auto t0 = Clock::now();
    int rc = upload_file(c, src, dst, width, prog, sum);
    prog.finish();
    if (rc != kOk) return rc;
    print_summary(o, "upload", sum, std::chrono::duration<double>(Clock::now() - t0).count());
    return kOk;
  }
  if (!fs::is_directory(src, ec)) {
    return fail_msg(fs::exists(src, ec) ? kBadArgs : kNotFound,
                    src + " is not a directory (--recursive copies a directory)");
  }
  struct Item {
    fs::path path;
    std::string key;
    std::uint64_t size;
  };
  std::vector<Item> items;
  const std::string prefix = as_prefix(dst.key);
  std::uint64_t total = 0;
  for (auto it = fs::recursive_directory_iterator(src, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    std::string rel = fs::relative(it->path(), src, ec).generic_string();
    if (ec) break;
    items.push_back({it->path(), prefix + rel, it->file_size(ec)});
    total += items.back().size;
  }
  if (ec) return fail_msg(kGeneric, "cannot walk " + src + ": " + ec.message());
  Progress prog(o, total, items.size());
  auto t0 = Clock::now();
  // Small files go `width` at a time, each one request; large files one at a time, each with
  // `width` parts in flight.
  std::vector<std::size_t> small, large;
  for (std::size_t i = 0; i < items.size(); ++i) {
    (items[i].size <= c.config().part_size_bytes ? small : large).push_back(i);
  }
  int rc = run_parallel(small.size(), width, [&](std::size_t i) {
    const Item& it = items[small[i]];
    return upload_file(c, it.path.string(), S3Url{dst.bucket, it.key}, 1, prog, sum);
  });
  for (std::size_t i = 0; rc == kOk && i < large.size(); ++i) {
    const Item& it = items[large[i]];
    rc = upload_file(c, it.path.string(), S3Url{dst.bucket, it.key}, width, prog, sum);
  }
  prog.finish();
  if (rc != kOk) return rc;
  sum.etag.clear();
  print_summary(o, "upload", sum, std::chrono::duration<double>(Clock::now() - t0).count());
  return kOk;
}

int cmd_cp_download(Client& c, const Options& o, const S3Url& src, const std::string& dst) {
  std::error_code ec;
  const std::size_t width = c.config().concurrency;
  Summary sum;
  if (!o.recursive) {
    if (src.key.empty() || src.key.back() == '/') {
      return fail_msg(kBadArgs, "source s3://" + src.bucket + "/" + src.key +
                                    " names no object (use --recursive for a prefix)");
    }
    fs::path final_path(dst);
    if (dst.ends_with('/') || fs::is_directory(dst, ec)) {
      final_path = fs::path(dst) / fs::path(src.key).filename();
    }
    auto info = c.head(src.bucket, src.key);
    if (!info.ok()) return report(info.status());
    Progress prog(o, info->size, 1);
    auto t0 = Clock::now();
    int rc = download_file(c, src, info->size, info->etag, final_path, width, prog, sum);
    prog.finish();
    if (rc != kOk) return rc;
    print_summary(o, "download", sum, std::chrono::duration<double>(Clock::now() - t0).count());
    return kOk;
  }
  const std::string prefix = as_prefix(src.key);
  auto entries = list_all(c, src.bucket, prefix);
  if (!entries.ok()) return report(entries.status());
  const fs::path root(dst);
  struct Item {
    std::size_t entry;
    fs::path path;
  };
  std::vector<Item> items;
  std::uint64_t total = 0;
  // Every key is checked before anything is written.
  for (std::size_t i = 0; i < entries->size(); ++i) {
    const auto& e = (*entries)[i];
    std::string_view rel = std::string_view(e.key).substr(prefix.size());
    if (rel.empty() || (rel.back() == '/' && e.size == 0)) continue;  // directory marker
    auto p = safe_local_path(root, rel);
    if (!p.ok()) return report(p.status());
    items.push_back({i, std::move(*p)});
    total += e.size;
  }
  for (const auto& it : items) {
    fs::create_directories(it.path.parent_path(), ec);
    if (ec) {
      return fail_msg(kGeneric,
                      "cannot create " + it.path.parent_path().string() + ": " + ec.message());
    }
  }
  Progress prog(o, total, items.size());
  auto t0 = Clock::now();
  std::vector<std::size_t> small, large;
  for (std::size_t i = 0; i < items.size(); ++i) {
    ((*entries)[items[i].entry].size <= c.config().part_size_bytes ? small : large).push_back(i);
  }
  int rc = run_parallel(small.size(), width, [&](std::size_t i) {
    const Item& it = items[small[i]];
    const auto& e = (*entries)[it.entry];
    return download_file(c, S3Url{src.bucket, e.key}, e.size, e.etag, it.path, 1, prog, sum);
  });
  for (std::size_t i = 0; rc == kOk && i < large.size(); ++i) {
    const Item& it = items[large[i]];
    const auto& e = (*entries)[it.entry];
    rc = download_file(c, S3Url{src.bucket, e.key}, e.size, e.etag, it.path, width, prog, sum);
  }
  prog.finish();
  if (rc != kOk) return rc;
  sum.etag.clear();
  print_summary(o, "download", sum, std::chrono::duration<double>(Clock::now() - t0).count());
  return kOk;
}

// S3 -> S3 on the one endpoint: server-side copies, no object byte through this process.
int cmd_cp_copy(Client& c, const Options& o, const S3Url& src, S3Url dst) {
  Summary sum;
  auto t0 = Clock::now();
  auto copy_one = [&](const std::string& skey, const std::string& dkey, Progress& prog) {
    auto r = c.copy(src.bucket, skey, dst.bucket, dkey);
    if (!r.ok()) return report(r.status());
    prog.add(r->bytes, false);
    sum.add(*r, true);
    std::lock_guard lk(sum.mu);
    sum.etag = r->etag;
    return static_cast<int>(kOk);
  };
  if (!o.recursive) {
    if (src.key.empty() || src.key.back() == '/') {
      return fail_msg(kBadArgs, "source s3://" + src.bucket + "/" + src.key +
                                    " names no object (use --recursive for a prefix)");
    }
    if (dst.key.empty() || dst.key.back() == '/') dst.key += fs::path(src.key).filename().string();
    Progress prog(o, 0, 1);
    int rc = copy_one(src.key, dst.key, prog);
    prog.finish();
    if (rc != kOk) return rc;
  } else {
    const std::string sprefix = as_prefix(src.key), dprefix = as_prefix(dst.key);
    auto entries = list_all(c, src.bucket, sprefix);
    if (!entries.ok()) return report(entries.status());
    std::uint64_t total = 0;
    for (const auto& e : *entries) total += e.size;
    Progress prog(o, total, entries->size());
    int rc = run_parallel(entries->size(), c.config().concurrency, [&](std::size_t i) {
      const auto& e = (*entries)[i];
      return copy_one(e.key, dprefix + e.key.substr(sprefix.size()), prog);
    });
    prog.finish();
    if (rc != kOk) return rc;
    sum.etag.clear();
  }
  print_summary(o, "copy", sum, std::chrono::duration<double>(Clock::now() - t0).count());
  return kOk;
}

// Reads until `buf` is full or the input ends; the bytes read, or -1 on an error (errno).
ssize_t read_full(int fd, std::span<std::byte> buf) {
  std::size_t got = 0;
  while (got < buf.size()) {
    ssize_t n = read(fd, buf.data() + got, buf.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  return static_cast<ssize_t>(got);
}

// `cp - s3://B/K`: standard input of unknown length. Up to one part it is one PutObject; beyond,
// a multipart upload of part_size parts (at least 5 MiB) sent one after the other while the next
// part is read, with two part buffers in memory whatever the stream's length.
int upload_stdin(Client& c, const Options& o, const S3Url& dst) {
  if (dst.key.empty() || dst.key.back() == '/') {
    return fail_msg(kBadArgs, "cp - needs a destination key, not a prefix");
  }
  const std::size_t part = static_cast<std::size_t>(
      std::max<std::uint64_t>(c.config().part_size_bytes, limits::part_bytes_min));
  std::vector<std::byte> cur(part), next(part);
  Summary sum;
  auto t0 = Clock::now();
  auto read_error = [] {
    return fail_msg(kGeneric, std::string("cannot read stdin: ") + std::strerror(errno));
  };
  ssize_t n = read_full(STDIN_FILENO, cur);
  if (n < 0) return read_error();
  if (static_cast<std::size_t>(n) < part) {  // the input ended within one part
    auto r = c.put(dst.bucket, dst.key, std::span(cur.data(), static_cast<std::size_t>(n)));
    if (!r.ok()) return report(r.status());
    sum.add(*r, true);
    sum.etag = r->etag;
  } else {
    auto uid = c.create_multipart_upload(dst.bucket, dst.key);
    if (!uid.ok()) return report(uid.status());
    UploadGuard guard(c, dst.bucket, dst.key, *uid);
    std::vector<Client::CompletedPart> parts;
    auto fail = [&](int code) {
      (void)c.abort_multipart_upload(dst.bucket, dst.key, *uid);
      return code;
    };
    for (std::uint32_t number = 1;; ++number) {
      if (number > limits::parts_max) {
        return fail(fail_msg(kGeneric, "stdin is longer than " + std::to_string(limits::parts_max) +
                                           " parts of " + std::to_string(part) +
                                           " bytes: raise --part-size"));
      }
      // The next part is read while this one is uploaded.
      auto up = std::async(std::launch::async, [&, number, len = n] {
        return c.upload_part(dst.bucket, dst.key, *uid, number,
                             std::span(cur.data(), static_cast<std::size_t>(len)));
      });
      const ssize_t m = read_full(STDIN_FILENO, next);
      const int read_errno = errno;
      auto r = up.get();
      if (!r.ok()) return fail(report(r.status()));
      parts.push_back({number, r->etag});
      sum.add(*r, false);
      if (m < 0) {
        errno = read_errno;
        return fail(read_error());
      }
      if (m == 0) break;  // that was the last part
      std::swap(cur, next);
      n = m;
    }
    auto done = c.complete_multipart_upload(dst.bucket, dst.key, *uid, parts);
    if (!done.ok()) return fail(report(done.status()));
    ++sum.files;
    ++sum.requests;
    sum.etag = done->etag;
  }
  print_summary(o, "upload", sum, std::chrono::duration<double>(Clock::now() - t0).count());
  return kOk;
}

int cmd_cat(const Options& o, const std::string& url);

int cmd_cp(const Options& o, const std::string& src, const std::string& dst) {
  if (src == "-" || dst == "-") {
    if (o.recursive)
      return fail_msg(kBadArgs, "cp - (standard input or output) takes no --recursive");
    if (dst == "-" && parse_s3(src)) return cmd_cat(o, src);
    auto u = parse_s3(dst);
    if (src != "-" || !u || u->bucket.empty()) {
      return fail_msg(kBadArgs,
                      "cp - s3://BUCKET/KEY uploads stdin; cp s3://BUCKET/KEY - writes stdout");
    }
    auto c = make_client(o);
    if (!c.ok()) return report(c.status());
    return upload_stdin(**c, o, *u);
  }
  auto s3src = parse_s3(src);
  auto s3dst = parse_s3(dst);
  if (!s3src && !s3dst) {
    return fail_msg(kBadArgs,
                    "cp needs at least one s3://BUCKET[/KEY] (local to local: use cp(1))");
  }
  if ((s3src && s3src->bucket.empty()) || (s3dst && s3dst->bucket.empty())) {
    return fail_msg(kBadArgs, "s3:// URL without a bucket");
  }
  auto c = make_client(o);
  if (!c.ok()) return report(c.status());
  if (s3src && s3dst) return cmd_cp_copy(**c, o, *s3src, *s3dst);
  return s3dst ? cmd_cp_upload(**c, o, src, *s3dst) : cmd_cp_download(**c, o, *s3src, dst);
}

// --- the other commands
// ---------------------------------------------------------------------------

int cmd_ls(const Options& o, const std::string& url, bool recursive) {
  auto c = make_client(o);
  if (!c.ok()) return report(c.status());
  if (url.empty() || url == "s3://") {
    auto b = (*c)->list_buckets();
    if (!b.ok()) return report(b.status());
    for (const auto& name : *b) std::printf("%s\n", name.c_str());
    return kOk;
  }
  auto u = parse_s3(url);
  if (!u || u->bucket.empty()) return fail_msg(kBadArgs, "ls expects s3://BUCKET[/PREFIX]");
  ListOptions lo;
  lo.prefix = u->key;
  if (!recursive) lo.delimiter = "/";
  for (;;) {
    auto page = (*c)->list(u->bucket, lo);
    if (!page.ok()) return report(page.status());
    for (const auto& p : page->common_prefixes) std::printf("%30s PRE %s\n", "", p.c_str());
    for (const auto& e : page->objects) {
      std::printf("%24s %12llu %s\n", e.last_modified.c_str(),
                  static_cast<unsigned long long>(e.size), e.key.c_str());
    }
    if (!page->is_truncated || page->next_continuation_token.empty()) break;
    lo.continuation_token = page->next_continuation_token;
  }
  return kOk;
}

int cmd_bucket(const Options& o, const std::string& url, bool make) {
  auto u = parse_s3(url);
  if (!u || u->bucket.empty() || !u->key.empty()) return fail_msg(kBadArgs, "expected s3://BUCKET");
  auto c = make_client(o);
  if (!c.ok()) return report(c.status());
  Status st = make ? (*c)->create_bucket(u->bucket) : (*c)->delete_bucket(u->bucket);
  if (!st.ok()) return report(st);
  std::printf("%s: s3://%s\n", make ? "make_bucket" : "remove_bucket", u->bucket.c_str());
  return kOk;
}

Result<S3Url> object_url(const std::string& url) {
  auto u = parse_s3(url);
  if (!u || u->bucket.empty() || u->key.empty()) {
    return Status(Errc::invalid_argument, "expected s3://BUCKET/KEY, got '" + url + "'");
  }
  return *u;
}

int cmd_rm(const Options& o, const std::string& url) {
  if (o.recursive) {
    auto u = parse_s3(url);
    if (!u || u->bucket.empty()) {
      return fail_msg(kBadArgs, "rm --recursive expects s3://BUCKET[/PREFIX], got '" + url + "'");
    }
    auto c = make_client(o);
    if (!c.ok()) return report(c.status());
    auto entries = list_all(**c, u->bucket, as_prefix(u->key));
    if (!entries.ok()) return report(entries.status());
    std::vector<std::string> keys;
    for (auto& e : *entries) keys.push_back(std::move(e.key));
    auto failed = (*c)->delete_objects(u->bucket, keys);
    if (!failed.ok()) return report(failed.status());
    for (const auto& f : *failed) {
      std::lock_guard lk(g_err_mu);
      std::cerr << "objdirect: cannot delete s3://" << u->bucket << "/" << f.key << ": "
                << f.status.message() << " (" << errc_name(f.status.code()) << ")\n";
    }
    if (o.json) {
      std::printf("{\"deleted\":%zu,\"failed\":%zu}\n", keys.size() - failed->size(),
                  failed->size());
    } else {
      std::printf("delete: %zu objects under %s\n", keys.size() - failed->size(), url.c_str());
    }
    return failed->empty() ? kOk : exit_code(failed->front().status);
  }
  auto u = object_url(url);
  if (!u.ok()) return report(u.status());
  auto c = make_client(o);
  if (!c.ok()) return report(c.status());
  if (Status st = (*c)->delete_object(u->bucket, u->key); !st.ok()) return report(st);
  std::printf("delete: %s\n", url.c_str());
  return kOk;
}

int cmd_stat(const Options& o, const std::string& url) {
  auto u = object_url(url);
  if (!u.ok()) return report(u.status());
  auto c = make_client(o);
  if (!c.ok()) return report(c.status());
  auto info = (*c)->head(u->bucket, u->key);
  if (!info.ok()) return report(info.status());
  if (o.json) {
    std::printf(
        "{\"size\":%llu,\"etag\":\"%s\",\"last_modified\":\"%s\",\"content_type\":\"%s\"}\n",
        static_cast<unsigned long long>(info->size), json_escape(info->etag).c_str(),
        json_escape(info->last_modified).c_str(), json_escape(info->content_type).c_str());
  } else {
    std::printf("size: %llu\netag: %s\nlast-modified: %s\ncontent-type: %s\n",
                static_cast<unsigned long long>(info->size), info->etag.c_str(),
                info->last_modified.c_str(), info->content_type.c_str());
  }
  return kOk;
}

int cmd_cat(const Options& o, const std::string& url) {
  auto u = object_url(url);
  if (!u.ok()) return report(u.status());
  auto c = make_client(o);
  if (!c.ok()) return report(c.status());
  // Streams in part-size windows so that memory stays bounded whatever the object size.
  const std::uint64_t window =
      (*c)->config().part_size_bytes * std::max<std::uint32_t>((*c)->config().concurrency, 1);
  std::vector<std::byte> buf;
  std::uint64_t offset = 0;
  for (;;) {
    buf.resize(window);
    auto r = (*c)->get(u->bucket, u->key, buf, ByteRange{offset, window});
    if (!r.ok()) {
      if (r.code() == Errc::invalid_range && offset > 0) break;   // ended on a window boundary
      if (r.code() == Errc::invalid_range && offset == 0) break;  // empty object
      return report(r.status());
    }
    if (r->bytes && std::fwrite(buf.data(), 1, r->bytes, stdout) != r->bytes) {
      return fail_msg(kGeneric, "write to stdout failed");
    }
    offset += r->bytes;
    if (offset >= r->object_size) break;
  }
  return std::fflush(stdout) == 0 ? kOk : kGeneric;
}

// `objdirect bench ARGS...`: replaces this process with the objdirect-bench beside it.
int cmd_bench(int argc, char** argv) {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return fail_msg(kGeneric, "cannot find this program's directory: " + ec.message());
  const std::string bench = (self.parent_path() / "objdirect-bench").string();
  std::vector<char*> args;
  args.push_back(const_cast<char*>(bench.c_str()));
  for (int i = 2; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  execv(bench.c_str(), args.data());
  return fail_msg(errno == ENOENT ? kNotFound : kGeneric,
                  "cannot run " + bench + ": " + std::strerror(errno));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string_view(argv[1]) == "bench") return cmd_bench(argc, argv);
  start_signal_thread();
  signal(SIGPIPE, SIG_IGN);

  CLI::App app{"objdirect: S3 client with an RDMA data plane (libobjdirect)"};
  app.require_subcommand(1);
  app.footer(kExitCodesHelp);
  Options o;
  const CLI::Validator kPositive(
      [](const std::string& v) {
        return v.find_first_not_of('0') == std::string::npos ? std::string("must be at least 1")
                                                             : std::string();
      },
      "POSITIVE");
  const CLI::Validator kUnsigned(
      [](const std::string& v) {
        return v.find_first_of("-+") == std::string::npos ? std::string()
                                                          : std::string("must be a plain size");
      },
      "");
  auto add_common = [&o, &kPositive, &kUnsigned](CLI::App* sub) {
    sub->add_option("--endpoint-url", o.endpoint, "S3 endpoint (default: AWS_ENDPOINT_URL)");
    sub->add_option("--profile", o.profile, "AWS profile (default: AWS_PROFILE or default)");
    sub->add_option("--fabric", o.fabric,
                    "auto | libfabric:tcp | libfabric:shm | libfabric:verbs | libfabric:efa | "
                    "ucx | none (auto's order: OBJDIRECT_FABRIC_ORDER)")
        ->check(CLI::IsMember({"auto", "libfabric:tcp", "libfabric:shm", "libfabric:verbs",
                               "libfabric:efa", "ucx", "none"}));
    sub->add_option("--rdma", o.rdma,
                    "auto (RDMA from OBJDIRECT_RDMA_MIN_BYTES up, else HTTP; fall back to HTTP) "
                    "| required (fail instead of falling back) | off")
        ->check(CLI::IsMember({"auto", "required", "off"}));
    sub->add_option(
           "--part-size", o.part_size,
           "Part size: bytes, or with a unit (8MiB, 8MB and 8M are all 8 MiB; default 8 MiB)")
        ->check(kUnsigned)
        ->transform(CLI::AsSizeValue(false))
        ->check(kPositive);
    sub->add_option("--concurrency", o.concurrency, "Parts (or files) in flight (default 8)")
        ->check(kPositive);
    sub->add_flag("--json", o.json, "Print one JSON object");
    sub->footer(kExitCodesHelp);
  };
  std::string a, b;
  bool recursive = false;

  auto* cp = app.add_subcommand(
      "cp", "Copy local -> S3, S3 -> local, or S3 -> S3 (server-side); --recursive for trees");
  add_common(cp);
  cp->add_option("SRC", a, "local path or s3://BUCKET/KEY (a directory or prefix with -r)")
      ->required();
  cp->add_option("DST", b, "local path or s3://BUCKET/KEY (a directory or prefix with -r)")
      ->required();
  cp->add_flag("--recursive,-r", o.recursive, "Copy every file below SRC (or key below prefix)");
  cp->add_flag("--no-progress", o.no_progress,
               "No progress bar (there is none unless stderr is "
               "a terminal)");
  auto* ls = app.add_subcommand("ls", "List buckets, or objects under s3://BUCKET[/PREFIX]");
  add_common(ls);
  ls->add_option("URL", a, "s3://BUCKET[/PREFIX]");
  ls->add_flag("--recursive,-r", recursive, "No '/' grouping");
  auto* mb = app.add_subcommand("mb", "Make a bucket");
  add_common(mb);
  mb->add_option("URL", a, "s3://BUCKET")->required();
  auto* rb = app.add_subcommand("rb", "Remove an empty bucket");
  add_common(rb);
  rb->add_option("URL", a, "s3://BUCKET")->required();
  auto* rm = app.add_subcommand("rm", "Remove an object, or every object under a prefix with -r");
  add_common(rm);
  rm->add_option("URL", a, "s3://BUCKET/KEY (s3://BUCKET[/PREFIX] with --recursive)")->required();
  rm->add_flag("--recursive,-r", o.recursive, "Delete every key under the prefix (DeleteObjects)");
  auto* st = app.add_subcommand("stat", "Show an object's size, ETag and date");
  add_common(st);
  st->add_option("URL", a, "s3://BUCKET/KEY")->required();
  auto* cat = app.add_subcommand("cat", "Write an object to stdout");
  add_common(cat);
  cat->add_option("URL", a, "s3://BUCKET/KEY")->required();
  app.add_subcommand("bench",
                     "Run objdirect-bench (beside this binary) with the arguments that follow; "
                     "`objdirect bench --help` lists them");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return fail_msg(kBadArgs, std::string(e.what()) + " (objdirect --help lists the commands)");
  }
  if (cp->parsed()) return cmd_cp(o, a, b);
  if (ls->parsed()) return cmd_ls(o, a, recursive);
  if (mb->parsed()) return cmd_bucket(o, a, true);
  if (rb->parsed()) return cmd_bucket(o, a, false);
  if (rm->parsed()) return cmd_rm(o, a);
  if (st->parsed()) return cmd_stat(o, a);
  if (cat->parsed()) return cmd_cat(o, a);
  return kBadArgs;
}
