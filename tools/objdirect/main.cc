// objdirect: the command-line client (cp, sync, mv, ls, mb, rb, rm, stat, cat, presign, bench) over
// libobjdirect, with the `aws s3` names for commands and flags (docs/client.md, "The CLI").
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
#include <fnmatch.h>
#include <openssl/crypto.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cmath>
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
#include <tuple>
#include <vector>

#include "common/checksum.hpp"
#include "common/limits.hpp"
#include "common/time.hpp"
#include "objdirect/client.hpp"
#include "objdirect/plan.hpp"
#include "transport/transport.hpp"
#include "upload_options.hpp"

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

std::string s3_str(const S3Url& u) {
  return "s3://" + u.bucket + "/" + u.key;
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
  std::uint64_t multipart_threshold = 0;  // --multipart-threshold; 0: the config's
  std::uint32_t concurrency = 0;
  bool json = false;
  bool no_progress = false;
  bool recursive = false;
  bool quiet = false;   // --quiet: no progress bar, no per-file lines, no summary line
  bool dryrun = false;  // --dryrun: print "(dryrun) upload: A to B" lines, change nothing
  PutOptions put;       // --content-type, --metadata, --sse-c-key (uploads)
  GetOptions read;      // --sse-c-key (downloads, stat, cat)
  CopyOptions copy;     // --sse-c-copy-source-key (the source), --sse-c-key (the copy)
  // --exclude / --include, in command-line order: the last pattern that matches a file's path
  // relative to the source (or destination) root decides; no match: included (as aws-cli).
  struct Filter {
    bool include = false;
    std::string pattern;
  };
  std::vector<Filter> filters;
};

// Whether `rel` (a path relative to the command's root, '/'-separated) passes the filters.
// Patterns are fnmatch(3) without flags: '*' and '?' also match '/', [...] a set, and '\' is an
// ordinary character (as Python's fnmatch, which aws-cli uses).
bool included(const Options& o, const std::string& rel) {
  bool in = true;
  for (const auto& f : o.filters) {
    if (fnmatch(f.pattern.c_str(), rel.c_str(), FNM_NOESCAPE) == 0) in = f.include;
  }
  return in;
}

// A line of --dryrun (stdout, as aws-cli: "(dryrun) upload: a.txt to s3://b/a.txt"); nothing
// under --quiet.
int dryrun_line(const Options& o, const std::string& what) {
  if (!o.quiet) std::printf("(dryrun) %s\n", what.c_str());
  return 0;
}

Result<std::unique_ptr<Client>> make_client(const Options& o) {
  auto cfg = ClientConfig::load(o.profile);
  if (!cfg.ok()) return cfg.status();
  if (!o.endpoint.empty()) cfg->endpoint = o.endpoint;
  if (!o.fabric.empty()) cfg->fabric = o.fabric;
  if (!o.rdma.empty()) cfg->rdma = o.rdma;
  if (o.part_size) cfg->part_size_bytes = o.part_size;
  if (o.multipart_threshold) cfg->multipart_threshold_bytes = o.multipart_threshold;
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
      : enabled_(!o.no_progress && !o.quiet && !o.json && isatty(STDERR_FILENO) == 1),
        multi_(o.recursive),
        total_(total_bytes),
        files_(total_files) {
    if (enabled_) thread_ = std::thread([this] { run(); });
  }
  ~Progress() { finish(); }
  bool enabled() const noexcept { return enabled_; }

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
  if (o.quiet && !o.json) return;
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

// SSE-C (--sse-c-key): the calls that take the key when it is given. The upload's key is
// PutOptions::sse_c (on the PutObject or the CreateMultipartUpload, every part, the Complete).
Result<TransferResult> upload_part(Client& c, const PutOptions& put, const S3Url& dst,
                                   const std::string& upload_id, std::uint32_t number,
                                   std::span<const std::byte> src) {
  if (put.sse_c) return c.upload_part(dst.bucket, dst.key, upload_id, number, src, *put.sse_c);
  return c.upload_part(dst.bucket, dst.key, upload_id, number, src);
}

Result<TransferResult> complete_upload(Client& c, const PutOptions& put, const S3Url& dst,
                                       const std::string& upload_id,
                                       std::span<const Client::CompletedPart> parts) {
  if (put.sse_c)
    return c.complete_multipart_upload(dst.bucket, dst.key, upload_id, parts, *put.sse_c);
  return c.complete_multipart_upload(dst.bucket, dst.key, upload_id, parts);
}

Result<ObjectInfo> head(Client& c, const std::optional<SseCustomerKey>& key,
                        const std::string& bucket, const std::string& name) {
  return key ? c.head(bucket, name, *key) : c.head(bucket, name);
}

// Uploads a local file: one PutObject up to part_size, else a multipart upload whose parts go up
// `width` at a time (aborted on failure).
int upload_file(Client& c, const std::string& src, const S3Url& dst, std::size_t width,
                Progress& prog, Summary& sum, const PutOptions& put) {
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
  auto plan = plan_upload(m.len, c.config().part_size_bytes, c.config().multipart_threshold_bytes);
  if (!plan.ok()) return report(plan.status());
  // No --content-type: guessed from the file's extension, as aws s3 cp does.
  PutOptions guessed;
  const PutOptions* opts = &put;
  if (put.content_type.empty()) {
    if (auto type = cli::guess_content_type(src); !type.empty()) {
      guessed = put;
      guessed.content_type = std::move(type);
      opts = &guessed;
    }
  }
  if (!plan->multipart) {
    auto r = c.put(dst.bucket, dst.key, data, *opts);
    if (!r.ok()) return report(r.status());
    prog.add(m.len);
    sum.add(*r, true);
    std::lock_guard lk(sum.mu);
    sum.etag = r->etag;
    return kOk;
  }
  auto uid = c.create_multipart_upload(dst.bucket, dst.key, *opts);
  if (!uid.ok()) return report(uid.status());
  UploadGuard guard(c, dst.bucket, dst.key, *uid);
  std::vector<Client::CompletedPart> parts(plan->parts.size());
  int rc = run_parallel(parts.size(), width, [&](std::size_t i) {
    const auto& p = plan->parts[i];
    auto r = upload_part(c, put, dst, *uid, p.part_number, data.subspan(p.offset, p.length));
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
  auto done = complete_upload(c, put, dst, *uid, parts);
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
                  const fs::path& final_path, std::size_t width, Progress& prog, Summary& sum,
                  const GetOptions& read) {
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
  auto pieces = split_range(0, size, c.config().part_size_bytes);
  int rc = run_parallel(pieces.size(), width, [&](std::size_t i) {
    const auto& p = pieces[i];
    auto r = c.get(src.bucket, src.key, data.subspan(p.offset, p.length),
                   ByteRange{p.offset, p.length}, read);
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
    if (o.dryrun) return dryrun_line(o, "upload: " + src + " to " + s3_str(dst));
    Progress prog(o, fs::file_size(src, ec), 1);
    auto t0 = Clock::now();
    int rc = upload_file(c, src, dst, width, prog, sum, o.put);
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
    if (!included(o, rel)) continue;
    items.push_back({it->path(), prefix + rel, it->file_size(ec)});
    total += items.back().size;
  }
  if (ec) return fail_msg(kGeneric, "cannot walk " + src + ": " + ec.message());
  if (o.dryrun) {
    for (const auto& it : items) {
      (void)dryrun_line(o, "upload: " + it.path.string() + " to " + s3_str({dst.bucket, it.key}));
    }
    return kOk;
  }
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
    return upload_file(c, it.path.string(), S3Url{dst.bucket, it.key}, 1, prog, sum, o.put);
  });
  for (std::size_t i = 0; rc == kOk && i < large.size(); ++i) {
    const Item& it = items[large[i]];
    rc = upload_file(c, it.path.string(), S3Url{dst.bucket, it.key}, width, prog, sum, o.put);
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
    auto info = head(c, o.read.sse_c, src.bucket, src.key);
    if (!info.ok()) return report(info.status());
    if (o.dryrun) return dryrun_line(o, "download: " + s3_str(src) + " to " + final_path.string());
    Progress prog(o, info->size, 1);
    auto t0 = Clock::now();
    int rc = download_file(c, src, info->size, info->etag, final_path, width, prog, sum, o.read);
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
    if (!included(o, std::string(rel))) continue;
    auto p = safe_local_path(root, rel);
    if (!p.ok()) return report(p.status());
    items.push_back({i, std::move(*p)});
    total += e.size;
  }
  if (o.dryrun) {
    for (const auto& it : items) {
      (void)dryrun_line(o, "download: " + s3_str({src.bucket, (*entries)[it.entry].key}) + " to " +
                               it.path.string());
    }
    return kOk;
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
    return download_file(c, S3Url{src.bucket, e.key}, e.size, e.etag, it.path, 1, prog, sum,
                         o.read);
  });
  for (std::size_t i = 0; rc == kOk && i < large.size(); ++i) {
    const Item& it = items[large[i]];
    const auto& e = (*entries)[it.entry];
    rc = download_file(c, S3Url{src.bucket, e.key}, e.size, e.etag, it.path, width, prog, sum,
                       o.read);
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
    auto r = c.copy(src.bucket, skey, dst.bucket, dkey, o.copy);
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
    if (o.dryrun) return dryrun_line(o, "copy: " + s3_str(src) + " to " + s3_str(dst));
    Progress prog(o, 0, 1);
    int rc = copy_one(src.key, dst.key, prog);
    prog.finish();
    if (rc != kOk) return rc;
  } else {
    const std::string sprefix = as_prefix(src.key), dprefix = as_prefix(dst.key);
    auto entries = list_all(c, src.bucket, sprefix);
    if (!entries.ok()) return report(entries.status());
    std::erase_if(*entries,
                  [&](const ListEntry& e) { return !included(o, e.key.substr(sprefix.size())); });
    if (o.dryrun) {
      for (const auto& e : *entries) {
        (void)dryrun_line(o, "copy: " + s3_str({src.bucket, e.key}) + " to " +
                                 s3_str({dst.bucket, dprefix + e.key.substr(sprefix.size())}));
      }
      return kOk;
    }
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
    auto r = c.put(dst.bucket, dst.key, std::span(cur.data(), static_cast<std::size_t>(n)), o.put);
    if (!r.ok()) return report(r.status());
    sum.add(*r, true);
    sum.etag = r->etag;
  } else {
    auto uid = c.create_multipart_upload(dst.bucket, dst.key, o.put);
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
        return upload_part(c, o.put, dst, *uid, number,
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
    auto done = complete_upload(c, o.put, dst, *uid, parts);
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

// aws-cli's --human-readable size: "1 Byte", "N Bytes" below 1 KiB, else one decimal and the
// largest binary unit that keeps the value below 1024 ("1.5 KiB", "12.0 MiB").
std::string aws_human_size(std::uint64_t bytes) {
  if (bytes == 1) return "1 Byte";
  if (bytes < 1024) return std::to_string(bytes) + " Bytes";
  const char* suffixes[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  const double b = static_cast<double>(bytes);
  char buf[32];
  for (int i = 0; i < 6; ++i) {
    const double unit = std::pow(1024.0, i + 2);
    if (std::round(b / unit * 1024) < 1024 || i == 5) {
      std::snprintf(buf, sizeof(buf), "%.1f %s", 1024 * b / unit, suffixes[i]);
      break;
    }
  }
  return buf;
}

int cmd_ls(const Options& o, const std::string& url, bool recursive, bool human, bool summarize) {
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
  std::uint64_t objects = 0, total = 0;
  for (;;) {
    auto page = (*c)->list(u->bucket, lo);
    if (!page.ok()) return report(page.status());
    for (const auto& p : page->common_prefixes) std::printf("%30s PRE %s\n", "", p.c_str());
    for (const auto& e : page->objects) {
      const std::string size = human ? aws_human_size(e.size) : std::to_string(e.size);
      std::printf("%24s %12s %s\n", e.last_modified.c_str(), size.c_str(), e.key.c_str());
      ++objects;
      total += e.size;
    }
    if (!page->is_truncated || page->next_continuation_token.empty()) break;
    lo.continuation_token = page->next_continuation_token;
  }
  if (summarize) {  // as aws-cli: a blank line, then the two totals right-aligned on the colon
    std::printf("\nTotal Objects: %llu\n   Total Size: %s\n",
                static_cast<unsigned long long>(objects),
                human ? aws_human_size(total).c_str() : std::to_string(total).c_str());
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
    const std::string prefix = as_prefix(u->key);
    auto entries = list_all(**c, u->bucket, prefix);
    if (!entries.ok()) return report(entries.status());
    std::vector<std::string> keys;
    for (auto& e : *entries) {
      if (included(o, e.key.substr(prefix.size()))) keys.push_back(std::move(e.key));
    }
    if (o.dryrun) {
      for (const auto& k : keys) (void)dryrun_line(o, "delete: " + s3_str({u->bucket, k}));
      return kOk;
    }
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
    } else if (!o.quiet) {
      std::printf("delete: %zu objects under %s\n", keys.size() - failed->size(), url.c_str());
    }
    return failed->empty() ? kOk : exit_code(failed->front().status);
  }
  auto u = object_url(url);
  if (!u.ok()) return report(u.status());
  if (o.dryrun) return dryrun_line(o, "delete: " + url);
  auto c = make_client(o);
  if (!c.ok()) return report(c.status());
  if (Status st = (*c)->delete_object(u->bucket, u->key); !st.ok()) return report(st);
  if (!o.quiet && !o.json) std::printf("delete: %s\n", url.c_str());
  return kOk;
}

int cmd_stat(const Options& o, const std::string& url) {
  auto u = object_url(url);
  if (!u.ok()) return report(u.status());
  auto c = make_client(o);
  if (!c.ok()) return report(c.status());
  auto info = head(**c, o.read.sse_c, u->bucket, u->key);
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
    auto r = (*c)->get(u->bucket, u->key, buf, ByteRange{offset, window}, o.read);
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

// --- sync, mv: a list of operations, then run --------------------------------------------------

// One step of sync or mv. Transfers (upload, download, copy) run as cp runs them: small objects
// `concurrency` at a time, large ones one at a time with `concurrency` parts in flight; deletions
// run after every transfer succeeded.
struct Op {
  enum Kind : std::uint8_t { upload, download, copy, delete_s3, delete_local };
  Kind kind = upload;
  fs::path local;  // upload: the source; download: the destination; delete_local: the file
  S3Url src;       // download, copy: the source object
  S3Url dst;       // upload, copy: the destination; delete_s3: the object
  std::uint64_t size = 0;
  std::string etag;                     // download: the source's ETag (pins the version)
  std::optional<std::int64_t> mtime_s;  // download: the file's mtime afterwards (the object's)
  bool move = false;                    // delete the source once the transfer succeeded
};

// The aws-cli line of an operation: "upload: a to s3://b/a", "move: ...", "delete: s3://b/a".
std::string op_line(const Op& op) {
  const std::string verb = op.move ? "move" : "";
  switch (op.kind) {
    case Op::upload:
      return (op.move ? verb : "upload") + ": " + op.local.string() + " to " + s3_str(op.dst);
    case Op::download:
      return (op.move ? verb : "download") + ": " + s3_str(op.src) + " to " + op.local.string();
    case Op::copy:
      return (op.move ? verb : "copy") + ": " + s3_str(op.src) + " to " + s3_str(op.dst);
    case Op::delete_s3:
      return "delete: " + s3_str(op.dst);
    case Op::delete_local:
      return "delete: " + op.local.string();
  }
  return {};
}

// A per-file line on stdout (none under --quiet or --json), clearing the progress bar's line first.
void file_line(const Options& o, const Progress& prog, const std::string& line) {
  if (o.quiet || o.json) return;
  std::lock_guard lk(g_err_mu);
  if (prog.enabled()) std::fputs("\r\033[K", stderr);
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

int run_ops(Client& c, const Options& o, std::vector<Op>& ops, const char* what) {
  if (o.dryrun) {
    for (const auto& op : ops) (void)dryrun_line(o, op_line(op));
    return kOk;
  }
  const std::size_t width = c.config().concurrency;
  std::vector<std::size_t> small, large, deletes;
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    if (op.kind == Op::delete_s3 || op.kind == Op::delete_local) {
      deletes.push_back(i);
      continue;
    }
    total += op.size;
    (op.kind == Op::copy || op.size <= c.config().part_size_bytes ? small : large).push_back(i);
  }
  Summary sum;
  Progress prog(o, total, small.size() + large.size());
  const auto t0 = Clock::now();
  auto one = [&](std::size_t i, std::size_t w) -> int {
    const Op& op = ops[i];
    int rc = kOk;
    if (op.kind == Op::upload) {
      rc = upload_file(c, op.local.string(), op.dst, w, prog, sum, o.put);
    } else if (op.kind == Op::download) {
      std::error_code ec;
      if (op.local.has_parent_path()) fs::create_directories(op.local.parent_path(), ec);
      if (ec) {
        return fail_msg(kGeneric,
                        "cannot create " + op.local.parent_path().string() + ": " + ec.message());
      }
      rc = download_file(c, op.src, op.size, op.etag, op.local, w, prog, sum, o.read);
      if (rc == kOk && op.mtime_s) {
        // As aws-cli: the file gets the object's time, so that the next sync finds it current.
        const struct timespec ts[2] = {{static_cast<time_t>(*op.mtime_s), 0},
                                       {static_cast<time_t>(*op.mtime_s), 0}};
        if (utimensat(AT_FDCWD, op.local.c_str(), ts, 0) != 0) {
          rc = fail_msg(kGeneric, "cannot set the time of " + op.local.string() + ": " +
                                      std::strerror(errno));
        }
      }
    } else {
      auto r = c.copy(op.src.bucket, op.src.key, op.dst.bucket, op.dst.key, o.copy);
      if (!r.ok()) return report(r.status());
      prog.add(r->bytes, false);
      sum.add(*r, true);
    }
    if (rc != kOk) return rc;
    if (op.move) {
      if (op.kind == Op::upload) {
        if (unlink(op.local.c_str()) != 0) {
          return fail_msg(kGeneric, "uploaded, but cannot remove " + op.local.string() + ": " +
                                        std::strerror(errno));
        }
      } else if (Status st = c.delete_object(op.src.bucket, op.src.key); !st.ok()) {
        return report(st);
      }
    }
    file_line(o, prog, op_line(op));
    return kOk;
  };
  int rc = run_parallel(small.size(), width, [&](std::size_t i) { return one(small[i], 1); });
  for (std::size_t i = 0; rc == kOk && i < large.size(); ++i) rc = one(large[i], width);
  if (rc == kOk && !deletes.empty()) {
    std::map<std::string, std::vector<std::size_t>> by_bucket;  // DeleteObjects per bucket
    for (std::size_t i : deletes) {
      const Op& op = ops[i];
      if (op.kind == Op::delete_s3) {
        by_bucket[op.dst.bucket].push_back(i);
        continue;
      }
      std::error_code ec;
      fs::remove(op.local, ec);
      if (ec) {
        rc = fail_msg(kGeneric, "cannot delete " + op.local.string() + ": " + ec.message());
        break;
      }
      file_line(o, prog, op_line(op));
    }
    for (const auto& [bucket, idx] : by_bucket) {
      if (rc != kOk) break;
      std::vector<std::string> keys;
      for (std::size_t i : idx) keys.push_back(ops[i].dst.key);
      auto failed = c.delete_objects(bucket, keys);
      if (!failed.ok()) {
        rc = report(failed.status());
        break;
      }
      std::set<std::string> bad;
      for (const auto& f : *failed) {
        bad.insert(f.key);
        std::lock_guard lk(g_err_mu);
        std::cerr << "objdirect: cannot delete s3://" << bucket << "/" << f.key << ": "
                  << f.status.message() << " (" << errc_name(f.status.code()) << ")\n";
      }
      for (std::size_t i : idx) {
        if (!bad.count(ops[i].dst.key)) file_line(o, prog, op_line(ops[i]));
      }
      if (!failed->empty()) rc = exit_code(failed->front().status);
    }
  }
  prog.finish();
  if (rc != kOk) return rc;
  if (sum.files != 1) sum.etag.clear();
  print_summary(o, what, sum, std::chrono::duration<double>(Clock::now() - t0).count());
  return kOk;
}

// A file or object below a sync root, by its path relative to the root.
struct TreeEntry {
  std::uint64_t size = 0;
  std::int64_t mtime_s = 0;  // local: st_mtime; S3: LastModified (whole seconds)
  std::string etag;          // S3 only
  fs::path local;            // local only
  std::string key;           // S3 only
};
using Tree = std::map<std::string, TreeEntry>;

// The regular files below `root` that pass the filters. A missing root is an empty tree unless
// `must_exist`.
Result<Tree> local_tree(const Options& o, const std::string& root, bool must_exist) {
  std::error_code ec;
  Tree out;
  if (!fs::exists(root, ec)) {
    if (!must_exist) return out;
    return Status(Errc::no_such_key, root + " does not exist");
  }
  if (!fs::is_directory(root, ec)) {
    return Status(Errc::invalid_argument, root + " is not a directory");
  }
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    std::string rel = fs::relative(it->path(), root, ec).generic_string();
    if (ec) break;
    if (!included(o, rel)) continue;
    struct stat st {};
    if (::stat(it->path().c_str(), &st) != 0) continue;  // vanished since the walk saw it
    out[rel] = {static_cast<std::uint64_t>(st.st_size),
                static_cast<std::int64_t>(st.st_mtime),
                {},
                it->path(),
                {}};
  }
  if (ec) return Status(Errc::io_error, "cannot walk " + root + ": " + ec.message());
  return out;
}

// The objects below s3://bucket/prefix/ that pass the filters (directory markers left out).
Result<Tree> s3_tree(Client& c, const Options& o, const S3Url& u) {
  const std::string prefix = as_prefix(u.key);
  auto entries = list_all(c, u.bucket, prefix);
  if (!entries.ok()) return entries.status();
  Tree out;
  for (auto& e : *entries) {
    std::string rel = e.key.substr(prefix.size());
    if (rel.empty() || (rel.back() == '/' && e.size == 0)) continue;
    if (!included(o, rel)) continue;
    auto t = parse_iso8601(e.last_modified);
    const std::int64_t secs =
        t ? std::chrono::duration_cast<std::chrono::seconds>(t->time_since_epoch()).count() : 0;
    out[rel] = {e.size, secs, std::move(e.etag), {}, std::move(e.key)};
  }
  return out;
}

// The ETag this client's upload of the local file would get: hex MD5, or, when `like` is a
// multipart ETag ("...-N"), the multipart ETag of the parts plan_upload cuts with this client's
// part size (empty when that plan has not N parts: the object was uploaded with other parts).
Result<std::string> local_etag(Client& c, const fs::path& path, std::uint64_t size,
                               std::string_view like) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Status(Errc::io_error, "cannot open " + path.string() + ": " + strerror(errno));
  std::vector<std::uint64_t> part_ends{size};
  if (const auto dash = like.find('-'); dash != std::string_view::npos) {
    auto plan = plan_upload(size, c.config().part_size_bytes, c.config().multipart_threshold_bytes);
    if (!plan.ok() || !plan->multipart ||
        std::to_string(plan->parts.size()) != like.substr(dash + 1)) {
      close(fd);
      return std::string();
    }
    part_ends.clear();
    for (const auto& p : plan->parts) part_ends.push_back(p.offset + p.length);
  }
  std::vector<std::string> part_md5s;
  std::vector<char> buf(1 << 20);
  std::uint64_t off = 0;
  for (std::uint64_t end : part_ends) {
    Md5 md5;
    while (off < end) {
      const ssize_t n = read(
          fd, buf.data(), static_cast<std::size_t>(std::min<std::uint64_t>(buf.size(), end - off)));
      if (n <= 0) {
        close(fd);
        return Status(Errc::io_error, "cannot read " + path.string());
      }
      md5.update(buf.data(), static_cast<std::size_t>(n));
      off += static_cast<std::uint64_t>(n);
    }
    part_md5s.push_back(md5.hex());
  }
  close(fd);
  if (part_ends.size() == 1 && like.find('-') == std::string_view::npos) return part_md5s[0];
  auto etag = multipart_etag(part_md5s);
  return etag ? *etag : std::string();
}

enum class SyncDir : std::uint8_t { upload, download, copy };

// The transfer of source entry `s` (relative path `rel`) in direction `dir`, for sync and mv:
// an upload to, a download into (under local root `dst`) or a copy to dst_bucket/dprefix + rel.
Result<Op> transfer_op(SyncDir dir, const std::string& rel, const TreeEntry& s,
                       const std::optional<S3Url>& s3src, const std::optional<S3Url>& s3dst,
                       const std::string& dprefix, const std::string& dst) {
  Op op;
  op.size = s.size;
  if (dir == SyncDir::upload) {
    op.kind = Op::upload;
    op.local = s.local;
    op.dst = {s3dst->bucket, dprefix + rel};
  } else if (dir == SyncDir::download) {
    auto p = safe_local_path(fs::path(dst), rel);
    if (!p.ok()) return p.status();
    op.kind = Op::download;
    op.src = {s3src->bucket, s.key};
    op.local = std::move(*p);
    op.etag = s.etag;
  } else {
    op.kind = Op::copy;
    op.src = {s3src->bucket, s.key};
    op.dst = {s3dst->bucket, dprefix + rel};
  }
  return op;
}

// Whether the source entry must be transferred over the destination's (aws-cli's rules):
// different sizes always; with --checksum, different ETags (the local file's MD5 or multipart
// ETag, see local_etag); else by time: an upload or copy when the source is newer than the
// destination, a download when the local file is newer than the object (any other time with
// --exact-timestamps), since a download gives the file the object's time.
Result<bool> needs_transfer(Client& c, SyncDir dir, bool checksum, bool exact, const TreeEntry& s,
                            const TreeEntry& d) {
  if (s.size != d.size) return true;
  if (checksum) {
    if (dir == SyncDir::copy) return s.etag != d.etag;
    const TreeEntry& local = dir == SyncDir::upload ? s : d;
    const TreeEntry& remote = dir == SyncDir::upload ? d : s;
    auto e = local_etag(c, local.local, local.size, remote.etag);
    if (!e.ok()) return e.status();
    return *e != remote.etag;
  }
  if (dir == SyncDir::download) return exact ? d.mtime_s != s.mtime_s : d.mtime_s > s.mtime_s;
  return d.mtime_s < s.mtime_s;
}

struct SyncFlags {
  bool del = false;
  bool checksum = false;
  bool exact_timestamps = false;
};

// sync SRC DST: local -> S3, S3 -> local or S3 -> S3 (always the whole tree below SRC).
int cmd_sync(const Options& opts, const std::string& src, const std::string& dst,
             const SyncFlags& f) {
  Options o = opts;
  o.recursive = true;
  auto s3src = parse_s3(src);
  auto s3dst = parse_s3(dst);
  if (!s3src && !s3dst) {
    return fail_msg(kBadArgs,
                    "sync needs at least one s3://BUCKET[/PREFIX] (local to local: rsync)");
  }
  if ((s3src && s3src->bucket.empty()) || (s3dst && s3dst->bucket.empty())) {
    return fail_msg(kBadArgs, "s3:// URL without a bucket");
  }
  auto c = make_client(o);
  if (!c.ok()) return report(c.status());
  const SyncDir dir = !s3src ? SyncDir::upload : !s3dst ? SyncDir::download : SyncDir::copy;
  auto stree = s3src ? s3_tree(**c, o, *s3src) : local_tree(o, src, true);
  if (!stree.ok()) return report(stree.status());
  auto dtree = s3dst ? s3_tree(**c, o, *s3dst) : local_tree(o, dst, false);
  if (!dtree.ok()) return report(dtree.status());
  std::vector<Op> ops;
  const std::string dprefix = s3dst ? as_prefix(s3dst->key) : std::string();
  for (const auto& [rel, s] : *stree) {
    auto it = dtree->find(rel);
    if (it != dtree->end()) {
      auto need = needs_transfer(**c, dir, f.checksum, f.exact_timestamps, s, it->second);
      if (!need.ok()) return report(need.status());
      if (!*need) continue;
    }
    auto op = transfer_op(dir, rel, s, s3src, s3dst, dprefix, dst);
    if (!op.ok()) return report(op.status());
    // A sync download keeps the object's time, so that the next sync skips it.
    if (dir == SyncDir::download) op->mtime_s = s.mtime_s;
    ops.push_back(std::move(*op));
  }
  if (f.del) {
    for (const auto& [rel, d] : *dtree) {
      if (stree->count(rel)) continue;
      Op op;
      if (s3dst) {
        op.kind = Op::delete_s3;
        op.dst = {s3dst->bucket, d.key};
      } else {
        op.kind = Op::delete_local;
        op.local = d.local;
      }
      ops.push_back(std::move(op));
    }
  }
  return run_ops(**c, o, ops, "sync");
}

// mv SRC DST: cp, then the source is deleted (each file once its copy succeeded).
int cmd_mv(const Options& o, const std::string& src, std::string dst) {
  auto s3src = parse_s3(src);
  auto s3dst = parse_s3(dst);
  if (!s3src && !s3dst) {
    return fail_msg(kBadArgs, "mv needs at least one s3://BUCKET[/KEY] (local to local: mv(1))");
  }
  if ((s3src && s3src->bucket.empty()) || (s3dst && s3dst->bucket.empty())) {
    return fail_msg(kBadArgs, "s3:// URL without a bucket");
  }
  auto c = make_client(o);
  if (!c.ok()) return report(c.status());
  std::error_code ec;
  std::vector<Op> ops;
  if (!o.recursive) {
    Op op;
    op.move = true;
    if (!s3src) {
      if (fs::is_directory(src, ec))
        return fail_msg(kBadArgs, src + " is a directory (use --recursive)");
      struct stat st {};
      if (::stat(src.c_str(), &st) != 0) {
        return fail_msg(errno == ENOENT ? kNotFound : kGeneric,
                        "cannot open " + src + ": " + std::strerror(errno));
      }
      op.kind = Op::upload;
      op.local = src;
      op.size = static_cast<std::uint64_t>(st.st_size);
      op.dst = *s3dst;
      if (op.dst.key.empty() || op.dst.key.back() == '/')
        op.dst.key += fs::path(src).filename().string();
    } else {
      if (s3src->key.empty() || s3src->key.back() == '/') {
        return fail_msg(kBadArgs,
                        "source " + src + " names no object (use --recursive for a prefix)");
      }
      auto info = head(**c, s3dst ? o.copy.source_sse_c : o.read.sse_c, s3src->bucket, s3src->key);
      if (!info.ok()) return report(info.status());
      op.src = *s3src;
      op.size = info->size;
      op.etag = info->etag;
      if (s3dst) {
        op.kind = Op::copy;
        op.dst = *s3dst;
        if (op.dst.key.empty() || op.dst.key.back() == '/') {
          op.dst.key += fs::path(s3src->key).filename().string();
        }
        if (op.dst.bucket == op.src.bucket && op.dst.key == op.src.key) {
          return fail_msg(kBadArgs, "cannot move " + src + " onto itself");
        }
      } else {
        op.kind = Op::download;
        op.local = dst;
        if (dst.ends_with('/') || fs::is_directory(dst, ec)) {
          op.local = fs::path(dst) / fs::path(s3src->key).filename();
        }
      }
    }
    ops.push_back(std::move(op));
    return run_ops(**c, o, ops, "move");
  }
  // --recursive: every file (object) below SRC that passes the filters.
  const SyncDir dir = !s3src ? SyncDir::upload : !s3dst ? SyncDir::download : SyncDir::copy;
  auto stree = s3src ? s3_tree(**c, o, *s3src) : local_tree(o, src, true);
  if (!stree.ok()) return report(stree.status());
  const std::string dprefix = s3dst ? as_prefix(s3dst->key) : std::string();
  if (dir == SyncDir::copy && s3src->bucket == s3dst->bucket && as_prefix(s3src->key) == dprefix) {
    return fail_msg(kBadArgs, "cannot move " + src + " onto itself");
  }
  for (const auto& [rel, s] : *stree) {
    auto op = transfer_op(dir, rel, s, s3src, s3dst, dprefix, dst);
    if (!op.ok()) return report(op.status());
    op->move = true;
    ops.push_back(std::move(*op));
  }
  return run_ops(**c, o, ops, "move");
}

// presign s3://BUCKET/KEY: a SigV4 query-signed GET URL (Client::presign).
int cmd_presign(const Options& o, const std::string& url, std::int64_t expires_s) {
  auto u = object_url(url);
  if (!u.ok()) return report(u.status());
  auto c = make_client(o);
  if (!c.ok()) return report(c.status());
  auto signed_url = (*c)->presign("GET", u->bucket, u->key, std::chrono::seconds(expires_s));
  if (!signed_url.ok()) return report(signed_url.status());
  if (o.json) {
    std::printf("{\"url\":\"%s\",\"expires_in\":%lld}\n", json_escape(*signed_url).c_str(),
                static_cast<long long>(expires_s));
  } else {
    std::printf("%s\n", signed_url->c_str());
  }
  return kOk;
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
  // The --fabric choices: auto, every fabric this build knows (transport::fabric_table), none.
  std::vector<std::string> fabric_choices{"auto"};
  std::string fabric_help = "auto";
  for (const auto& f : transport::fabric_table()) {
    fabric_choices.emplace_back(f.name);
    fabric_help += " | ";
    fabric_help += f.name;
  }
  fabric_choices.emplace_back("none");
  fabric_help += " | none (auto's order: OBJDIRECT_FABRIC_ORDER)";
  auto add_common = [&o, &kPositive, &kUnsigned, &fabric_choices, &fabric_help](CLI::App* sub) {
    sub->add_option("--endpoint-url", o.endpoint, "S3 endpoint (default: AWS_ENDPOINT_URL)");
    sub->add_option("--profile", o.profile, "AWS profile (default: AWS_PROFILE or default)");
    sub->add_option("--fabric", o.fabric, fabric_help)->check(CLI::IsMember(fabric_choices));
    sub->add_option("--rdma", o.rdma,
                    "auto (RDMA from OBJDIRECT_RDMA_MIN_BYTES up, uploads from "
                    "OBJDIRECT_RDMA_PUT_MIN_BYTES, else HTTP; fall back to HTTP) "
                    "| required (fail instead of falling back) | off")
        ->check(CLI::IsMember({"auto", "required", "off"}));
    sub->add_option(
           "--part-size", o.part_size,
           "Part size: bytes, or with a unit (8MiB, 8MB and 8M are all 8 MiB; default 8 MiB)")
        ->check(kUnsigned)
        ->transform(CLI::AsSizeValue(false))
        ->check(kPositive);
    sub->add_option("--multipart-threshold", o.multipart_threshold,
                    "Upload files larger than this as multipart uploads (s3transfer's "
                    "multipart_threshold; default: larger than the part size)")
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
  // The flags of the commands that move or delete files (aws-cli's names). --exclude/--include
  // are registered for parsing and --help; their order is read from argv below.
  std::vector<std::string> filter_values;
  std::string metadata;
  auto add_transfer = [&](CLI::App* sub, bool uploads) {
    sub->add_flag("--quiet", o.quiet, "No progress bar, no per-file lines, no summary line");
    sub->add_flag("--dryrun", o.dryrun,
                  "Print what would be done ((dryrun) upload: A to B), change nothing");
    sub->add_option("--exclude", filter_values,
                    "Leave out paths (relative to the source) matching this pattern (* ? [...]; "
                    "* also matches /); repeatable, with --recursive")
        ->allow_extra_args(false);
    sub->add_option("--include", filter_values,
                    "Take back paths matching this pattern; filters apply in order, the last "
                    "match wins (as aws-cli)")
        ->allow_extra_args(false);
    if (!uploads) return;
    sub->add_option("--content-type", o.put.content_type,
                    "Content-Type of uploaded objects (default: guessed from the file's "
                    "extension)");
    sub->add_option("--metadata", metadata,
                    "User metadata of uploaded objects (x-amz-meta-KEY): KEY=VALUE[,KEY=VALUE...] "
                    "or a JSON object {\"KEY\":\"VALUE\",...}");
  };

  // SSE-C, with aws-cli's names (docs/sse-c.md): the algorithm (AES256, the only one) and the key
  // as given or fileb://PATH; for a copy's source the --sse-c-copy-source pair.
  std::string sse_c, sse_c_key, sse_c_source, sse_c_source_key;
  auto add_sse_c = [&](CLI::App* sub, bool copies) {
    sub->add_option("--sse-c", sse_c,
                    "SSE-C with a customer key: AES256 (needs --sse-c-key); uploads are encrypted, "
                    "downloads decrypted with it")
        ->check(CLI::IsMember({"AES256"}));
    sub->add_option("--sse-c-key", sse_c_key,
                    "The SSE-C key: 32 bytes as given, or fileb://PATH of a 32-byte file");
    if (!copies) return;
    sub->add_option("--sse-c-copy-source", sse_c_source,
                    "The S3 source of a copy is SSE-C encrypted: AES256 (needs "
                    "--sse-c-copy-source-key)")
        ->check(CLI::IsMember({"AES256"}));
    sub->add_option("--sse-c-copy-source-key", sse_c_source_key,
                    "The copy source's SSE-C key: 32 bytes as given, or fileb://PATH");
  };

  auto* cp = app.add_subcommand(
      "cp", "Copy local -> S3, S3 -> local, or S3 -> S3 (server-side); --recursive for trees");
  add_common(cp);
  add_sse_c(cp, true);
  cp->add_option("SRC", a, "local path or s3://BUCKET/KEY (a directory or prefix with -r)")
      ->required();
  cp->add_option("DST", b, "local path or s3://BUCKET/KEY (a directory or prefix with -r)")
      ->required();
  cp->add_flag("--recursive,-r", o.recursive, "Copy every file below SRC (or key below prefix)");
  cp->add_flag("--no-progress", o.no_progress,
               "No progress bar (there is none unless stderr is "
               "a terminal)");
  add_transfer(cp, true);
  SyncFlags sync_flags;
  auto* sync = app.add_subcommand(
      "sync",
      "Make DST hold what SRC holds (local -> S3, S3 -> local, S3 -> S3): copies files that are "
      "missing, of another size or newer (by time; by ETag with --checksum)");
  add_common(sync);
  add_sse_c(sync, true);
  sync->add_option("SRC", a, "local directory or s3://BUCKET[/PREFIX]")->required();
  sync->add_option("DST", b, "local directory or s3://BUCKET[/PREFIX]")->required();
  sync->add_flag("--delete", sync_flags.del,
                 "Delete files in DST that are not in SRC (excluded files are kept)");
  sync->add_flag("--checksum", sync_flags.checksum,
                 "Compare same-sized files by ETag (local: MD5, or the multipart ETag of this "
                 "--part-size) instead of by time");
  sync->add_flag("--exact-timestamps", sync_flags.exact_timestamps,
                 "S3 -> local: same-sized files are current only when the times are equal "
                 "(default: unless the local file is newer)");
  sync->add_flag("--no-progress", o.no_progress, "No progress bar");
  add_transfer(sync, true);
  auto* mv = app.add_subcommand(
      "mv", "Move: cp, then delete the source (local -> S3, S3 -> local, S3 -> S3)");
  add_common(mv);
  add_sse_c(mv, true);
  mv->add_option("SRC", a, "local path or s3://BUCKET/KEY (a directory or prefix with -r)")
      ->required();
  mv->add_option("DST", b, "local path or s3://BUCKET/KEY (a directory or prefix with -r)")
      ->required();
  mv->add_flag("--recursive,-r", o.recursive, "Move every file below SRC (or key below prefix)");
  mv->add_flag("--no-progress", o.no_progress, "No progress bar");
  add_transfer(mv, true);
  std::int64_t expires_in = 3600;
  auto* presign = app.add_subcommand(
      "presign", "Print a presigned GET URL (SigV4 query) that anyone may fetch until it expires");
  add_common(presign);
  presign->add_option("URL", a, "s3://BUCKET/KEY")->required();
  presign->add_option("--expires-in", expires_in,
                      "Seconds the URL stays valid: 1..604800 (7 days; default 3600)");
  auto* ls = app.add_subcommand("ls", "List buckets, or objects under s3://BUCKET[/PREFIX]");
  add_common(ls);
  ls->add_option("URL", a, "s3://BUCKET[/PREFIX]");
  ls->add_flag("--recursive,-r", recursive, "No '/' grouping");
  bool human = false, summarize = false;
  ls->set_help_flag("--help", "Print this help message and exit");  // -h is --human-readable
  ls->add_flag("--human-readable,-h", human, "Sizes as 1.5 KiB, 12.0 MiB (as aws-cli)");
  ls->add_flag("--summarize", summarize, "End with Total Objects and Total Size lines");
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
  add_transfer(rm, false);
  auto* st = app.add_subcommand("stat", "Show an object's size, ETag and date");
  add_common(st);
  add_sse_c(st, false);
  st->add_option("URL", a, "s3://BUCKET/KEY")->required();
  auto* cat = app.add_subcommand("cat", "Write an object to stdout");
  add_common(cat);
  add_sse_c(cat, false);
  cat->add_option("URL", a, "s3://BUCKET/KEY")->required();
  app.add_subcommand("bench",
                     "Run objdirect-bench (beside this binary) with the arguments that follow; "
                     "`objdirect bench --help` lists them");

  // aws-cli applies --exclude and --include in the order given, which CLI11 does not keep.
  for (int i = 2; i < argc; ++i) {
    const std::string_view arg = argv[i];
    for (const auto& [name, include] : {std::pair{std::string_view("--exclude"), false},
                                        std::pair{std::string_view("--include"), true}}) {
      if (arg == name && i + 1 < argc) {
        o.filters.push_back({include, argv[i + 1]});
      } else if (arg.size() > name.size() && arg.starts_with(name) && arg[name.size()] == '=') {
        o.filters.push_back({include, std::string(arg.substr(name.size() + 1))});
      }
    }
  }
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
  if (!metadata.empty()) {
    if (Status st = cli::parse_metadata(metadata, o.put); !st.ok()) {
      return fail_msg(kBadArgs, st.message());
    }
  }
  // SSE-C: each key needs its algorithm and the other way round, as aws-cli checks. The key's
  // text is wiped from the option's string once it is parsed (argv itself is the caller's:
  // fileb:// keeps the key off the command line).
  for (auto [alg, alg_name, key, key_name] :
       {std::tuple{&sse_c, "--sse-c", &sse_c_key, "--sse-c-key"},
        std::tuple{&sse_c_source, "--sse-c-copy-source", &sse_c_source_key,
                   "--sse-c-copy-source-key"}}) {
    if (alg->empty() != key->empty()) {
      return fail_msg(kBadArgs, std::string(alg->empty() ? alg_name : key_name) + " needs " +
                                    (alg->empty() ? key_name : alg_name));
    }
    if (key->empty()) continue;
    auto k = cli::parse_sse_c_key(key_name, *key);
    OPENSSL_cleanse(key->data(), key->size());
    if (!k.ok()) return fail_msg(kBadArgs, k.status().message());
    if (alg == &sse_c) {
      o.put.sse_c = *k;
      o.read.sse_c = *k;
      o.copy.sse_c = *k;
    } else {
      o.copy.source_sse_c = *k;
    }
  }
  if (cp->parsed()) return cmd_cp(o, a, b);
  if (sync->parsed()) return cmd_sync(o, a, b, sync_flags);
  if (mv->parsed()) return cmd_mv(o, a, b);
  if (presign->parsed()) return cmd_presign(o, a, expires_in);
  if (ls->parsed()) return cmd_ls(o, a, recursive, human, summarize);
  if (mb->parsed()) return cmd_bucket(o, a, true);
  if (rb->parsed()) return cmd_bucket(o, a, false);
  if (rm->parsed()) return cmd_rm(o, a);
  if (st->parsed()) return cmd_stat(o, a);
  if (cat->parsed()) return cmd_cat(o, a);
  return kBadArgs;
}
