// objdirect-bench: measures every ObjDirect data path side by side, with baselines, in one run.
//
// Paths (all through objdirect::Client): http (fabric none), lf-shm (libfabric:shm), lf-tcp
// (libfabric:tcp, FI_TCP_IFACE=lo), ucx-sm (ucx, UCX_TLS=sm,self), ucx-tcp (ucx, UCX_TLS=tcp),
// and nginx (the same HTTP client code against nginx serving the same bytes, and accepting
// WebDAV PUT).
// Baselines: one-thread memcpy and one loopback TCP connection, per size.
// Sweeps: size (GET and PUT, 1 process x 1 thread), concurrency (GET, 1 process x N threads),
// processes (GET and PUT, P processes x C/P threads at a fixed total concurrency C), single
// (http and nginx PUT at the P4 size as one request: nginx has no multipart upload).
// --interleave runs the size sweep's paths of each (op, size, round) together, a warm worker per
// path taking turns in short bursts, so that the machine's drift hits every path alike
// (docs/BENCHMARKS.md, "Method").
//
// Output: a Markdown table on stdout, --csv FILE, --plot FILE.png (gnuplot), and with --json a
// last line holding {"P1".."P6", "P1_put".."P6_put"} (see docs/BENCHMARKS.md). Exit status: 0 when
// every point ran without transfer errors, 1 otherwise, 2 on bad arguments.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "baselines.hpp"
#include "bench.hpp"
#include "common/assert.hpp"
#include "objdirect/client.hpp"
#include "process.hpp"

#ifndef OBJDIRECT_SOURCE_DIR
#define OBJDIRECT_SOURCE_DIR "."
#endif

namespace objdirect::bench {
namespace {

// Children to end when the coordinator is interrupted (the Process destructors do not run then).
volatile sig_atomic_t g_server_pid = 0;
volatile sig_atomic_t g_nginx_pid = 0;

// --netns: the test bed to remove when interrupted (scripts/netns.sh down PREFIX).
char g_netns_script[4096] = {};
char g_netns_prefix[64] = {};

extern "C" void on_signal(int sig) {
  if (g_server_pid > 0) ::kill(g_server_pid, SIGTERM);
  if (g_nginx_pid > 0) ::kill(g_nginx_pid, SIGTERM);
  if (g_netns_prefix[0] != '\0') {
    // execve is async-signal-safe: this process becomes the teardown and exits with it.
    ::execl("/bin/bash", "bash", g_netns_script, "down", g_netns_prefix,
            static_cast<char*>(nullptr));
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

struct PathSpec {
  std::string name;
  std::string fabric;  // ClientConfig::fabric
  std::vector<std::pair<std::string, std::string>> env;
  bool nginx = false;
};

const std::vector<PathSpec>& all_paths() {
  static const std::vector<PathSpec> paths = {
      {"http", "none", {}, false},
      {"lf-shm", "libfabric:shm", {}, false},
      // What a user gets by default: fabric auto with the rdma_min_bytes crossover.
      {"auto", "auto", {}, false},
      {"lf-tcp", "libfabric:tcp", {{"FI_TCP_IFACE", "lo"}}, false},
      {"ucx-sm", "ucx", {{"UCX_TLS", "sm,self"}}, false},
      {"ucx-tcp", "ucx", {{"UCX_TLS", "tcp"}}, false},
      {"nginx", "none", {}, true},
  };
  return paths;
}

struct Point {
  std::string sweep;  // "size", "conc", "procs", "single" (a PUT as one request, for nginx)
  std::string op;     // "get", "put"
  const PathSpec* path = nullptr;
  std::uint64_t size = 0;
  std::uint32_t procs = 1;
  std::uint32_t threads = 1;
  std::uint64_t part_size = 0;  // the client's part size; 0: its default (8 MiB)
  std::uint32_t round = 0;      // size sweep with --rounds: which pass over the paths
};

struct Row {
  Point p;
  bool ran = false;
  double gbps = 0, ops_s = 0, p50_ms = 0, p99_ms = 0;
  std::optional<double> cli_cpu_gib, srv_cpu_gib, x_memcpy, x_tcp, x_nginx;
  std::uint64_t ops = 0, errors = 0, rdma_ops = 0, fallback_ops = 0;
  std::string note;
};

struct Options {
  std::string endpoint, access_key = "AK", secret_key = "SK", server_bin, csv, plot, plot_script;
  std::string sizes_text, paths_text, ops_text = "get,put", conc_text, procs_text;
  std::string tmp_parent = "/tmp";
  std::vector<std::string> server_args;  // appended to objdirect-server's command line
  std::uint64_t duration_ms = 0;
  std::uint32_t total_concurrency = 8;
  bool quick = false, json = false, keep_tmp = false, no_nginx = false;
  // The client buffers' (and memcpy's) pages: "huge" (MADV_HUGEPAGE, what numpy gives every
  // array of 4 MiB or more) or "base" (4 KiB pages, a plain malloc/mmap without THP=always).
  std::string buffer_pages = "huge";
  // Passes of the size sweep: each size runs every path once per round, the rounds one after
  // the other (so that drift in the machine's load hits every path alike) and each round's path
  // order rotated by one, and the row kept is each point's median-GB/s round.
  std::uint32_t rounds = 1;
  // The size sweep's paths of one (op, size, round) run in one interleaved point: a worker per
  // path, burst_ms bursts in turn, so that the machine's drift hits every path alike.
  bool interleave = false;
  std::uint64_t burst_ms = 20;
  // Two hosts from network namespaces (scripts/netns.sh): the server in one, this process and
  // its workers in the other, default fabric flags on both sides (no FI_TCP_IFACE).
  bool netns = false;
};

// --netns: hosts PREFIX-h0 (server, 10.201.0.1) and PREFIX-h1 (clients, 10.201.0.2).
constexpr const char* kNetnsServerAddr = "10.201.0.1";

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

std::string self_exe() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : p.string();
}

std::string fmt(double v, int prec = 2) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", prec, v);
  return b;
}
std::string fmt_opt(const std::optional<double>& v, int prec = 2) {
  return v ? fmt(*v, prec) : "";
}

// Progress bar on stderr: a line redrawn in place on a terminal, one line per step otherwise.
class Progress {
 public:
  explicit Progress(std::size_t total) : total_(total), tty_(::isatty(2) != 0) {}
  void step(const std::string& what) {
    ++done_;
    const std::size_t width = 30;
    const std::size_t filled = total_ ? width * (done_ - 1) / total_ : width;
    const double el = std::chrono::duration<double>(Clock::now() - t0_).count();
    std::string bar(filled, '#');
    bar.resize(width, '.');
    std::fprintf(stderr, "%s[%s] %zu/%zu %5.0fs  %-40s%s", tty_ ? "\r" : "", bar.c_str(), done_,
                 total_, el, what.c_str(), tty_ ? "" : "\n");
    std::fflush(stderr);
  }
  void finish() {
    if (tty_) std::fprintf(stderr, "\n");
  }

 private:
  std::size_t total_, done_ = 0;
  bool tty_;
  Clock::time_point t0_ = Clock::now();
};

class Bench {
 public:
  explicit Bench(Options o) : o_(std::move(o)) {}
  ~Bench() { netns_down(); }  // also on an early return of run()
  Bench(const Bench&) = delete;
  Bench& operator=(const Bench&) = delete;
  int run();

 private:
  Status setup_dirs();
  Status netns_up();
  void netns_down();
  Status start_server();
  Status ensure_object(std::uint64_t size);
  // Starts a point's worker processes and waits until each is warm ("ready"); first_note gets
  // the first one's ready line (the path it took, its first transfer's time).
  Status start_workers(const Point& p, std::vector<Process>& workers, std::string& first_note);
  // A row from a point's merged worker results over wall_s seconds of measured time.
  void fill_row(Row& row, const WorkerResult& total, double wall_s,
                std::optional<double> srv_cpu_s) const;
  Row run_point(const Point& p);
  // --interleave: the 1x1 points of one (op, size, round), one worker each, run burst by burst
  // in turn; each row's GB/s is its bytes over its own bursts' time.
  std::vector<Row> run_interleaved(const std::vector<Point>& pts);
  void compute_ratios();
  // --rounds: replaces each size-sweep point's rows by its median-GB/s round.
  void keep_median_rounds();
  // auto / max(http, lf-shm) at every size of the size sweep, when all three ran.
  void print_auto_check(std::ostream& out) const;
  void print_markdown(std::ostream& out) const;
  void write_csv(const std::string& file) const;
  void plot() const;
  std::string json() const;
  const Row* find(const std::string& sweep, const std::string& op, const std::string& path,
                  std::uint64_t size, std::uint32_t procs, std::uint32_t threads) const;

  Options o_;
  std::vector<std::uint64_t> sizes_;
  std::vector<const PathSpec*> paths_;
  std::vector<std::string> ops_;
  std::vector<std::uint32_t> conc_, procs_;
  std::uint64_t conc_size_ = 0, procs_size_ = 0;
  std::string tmp_, endpoint_, fabrics_offered_ = "(unknown)";
  std::string netns_prefix_;  // --netns: the bed's namespaces, empty otherwise
  Process server_;
  std::optional<Nginx> nginx_;
  std::string nginx_note_;
  std::unique_ptr<Client> admin_;
  std::set<std::uint64_t> uploaded_;
  std::map<std::uint64_t, double> memcpy_, tcp_;
  std::vector<Row> rows_;
  // The size sweep's rounds of auto, http and lf-shm per (op, size), kept by keep_median_rounds
  // for print_auto_check's paired ratio.
  std::map<std::pair<std::string, std::uint64_t>, std::vector<AutoRound>> auto_rounds_;
};

Status Bench::setup_dirs() {
  std::string tmpl = o_.tmp_parent + "/objdirect-bench-XXXXXX";
  if (!::mkdtemp(tmpl.data())) {
    return Status(Errc::io_error, "mkdtemp in " + o_.tmp_parent + ": " + std::strerror(errno));
  }
  tmp_ = tmpl;
  // nginx workers may run as another user: let them read the served files.
  ::chmod(tmp_.c_str(), 0755);
  std::filesystem::create_directories(tmp_ + "/www/bench");
  std::filesystem::create_directories(tmp_ + "/data");
  return Status::Ok();
}

std::string netns_script() {
  return std::string(OBJDIRECT_SOURCE_DIR) + "/scripts/netns.sh";
}

Status run_netns_script(const std::vector<std::string>& args, const std::string& log) {
  SpawnOptions so;
  so.argv = {"/bin/bash", netns_script()};
  so.argv.insert(so.argv.end(), args.begin(), args.end());
  so.stderr_file = log;
  auto p = Process::spawn(so);
  if (!p.ok()) return p.status();
  if (p->wait(milliseconds(60'000)) != 0) {
    return Status(Errc::unavailable, "scripts/netns.sh " + args.front() + " failed (see " + log +
                                         "; --netns needs root and iproute2)");
  }
  return Status::Ok();
}

// Makes the two hosts and moves this process (and so every worker it spawns later) into the
// client's one; the server is started in the other by start_server().
Status Bench::netns_up() {
  netns_prefix_ = "odbench" + std::to_string(::getpid());
  std::snprintf(g_netns_script, sizeof g_netns_script, "%s", netns_script().c_str());
  std::snprintf(g_netns_prefix, sizeof g_netns_prefix, "%s", netns_prefix_.c_str());
  OBJDIRECT_RETURN_IF_ERROR(run_netns_script({"up", netns_prefix_, "2"}, tmp_ + "/netns.log"));
  const std::string path = "/var/run/netns/" + netns_prefix_ + "-h1";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    return Status(Errc::unavailable, "setns " + path + ": " + std::strerror(err));
  }
  ::close(fd);
  return Status::Ok();
}

void Bench::netns_down() {
  if (netns_prefix_.empty()) return;
  if (server_.pid() > 0) server_.stop();  // before its namespace goes
  (void)run_netns_script({"down", netns_prefix_}, "/dev/null");
  g_netns_prefix[0] = '\0';
  netns_prefix_.clear();
}

Status Bench::start_server() {
  std::string bin = o_.server_bin;
  if (bin.empty()) {
    bin = std::filesystem::path(self_exe()).parent_path().string() + "/objdirect-server";
  }
  if (::access(bin.c_str(), X_OK) != 0) {
    return Status(Errc::unavailable, "objdirect-server not found at " + bin + " (--server-bin)");
  }
  SpawnOptions so;
  const std::string listen =
      netns_prefix_.empty() ? std::string("127.0.0.1:0") : std::string(kNetnsServerAddr) + ":0";
  so.argv = {
      bin,           "--listen",     listen,        "--data",   tmp_ + "/data", "--access-key",
      o_.access_key, "--secret-key", o_.secret_key, "--fabric", "auto",         "--no-fsync"};
  so.argv.insert(so.argv.end(), o_.server_args.begin(), o_.server_args.end());
  so.env = {{"UCX_WARN_UNUSED_ENV_VARS", "n"}};
  if (netns_prefix_.empty()) {
    so.env.emplace_back("FI_TCP_IFACE", "lo");  // the loopback figures as they always ran
  } else {
    // ip execs the server in its host: the pid is the server's (CPU accounting, SIGTERM).
    so.argv.insert(so.argv.begin(), {"/usr/sbin/ip", "netns", "exec", netns_prefix_ + "-h0"});
  }
  so.pipe_stdout = true;
  so.stderr_file = tmp_ + "/server.log";
  auto p = Process::spawn(so);
  if (!p.ok()) return p.status();
  server_ = std::move(*p);
  auto line = server_.read_line(milliseconds(30'000));
  constexpr std::string_view kListening = "objdirect-server listening on ";
  if (!line || line->rfind(kListening, 0) != 0) {
    return Status(Errc::unavailable,
                  "objdirect-server did not start (see " + tmp_ + "/server.log)");
  }
  endpoint_ = line->substr(kListening.size());
  g_server_pid = server_.pid();
  return Status::Ok();
}

// Uploads bench/obj-<size> over HTTP and writes the same bytes where nginx serves them.
Status Bench::ensure_object(std::uint64_t size) {
  if (uploaded_.count(size)) return Status::Ok();
  std::vector<std::byte> data(size);
  for (std::uint64_t i = 0; i < size; i += 8) {
    const std::uint64_t v = i * 0x9e3779b97f4a7c15ull;
    std::memcpy(data.data() + i, &v, std::min<std::uint64_t>(8, size - i));
  }
  const std::string key = "obj-" + format_size(size);
  auto r = admin_->put("bench", key, data);
  if (!r.ok()) return r.status();
  if (nginx_) {
    std::ofstream f(tmp_ + "/www/bench/" + key, std::ios::binary);
    f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(size));
    if (!f) return Status(Errc::io_error, "cannot write the nginx copy of " + key);
  }
  uploaded_.insert(size);
  return Status::Ok();
}

Status Bench::start_workers(const Point& p, std::vector<Process>& workers,
                            std::string& first_note) {
  const std::string self = self_exe();
  const std::string endpoint =
      p.path->nginx ? "http://127.0.0.1:" + std::to_string(nginx_->port()) : endpoint_;
  for (std::uint32_t i = 0; i < p.procs; ++i) {
    SpawnOptions so;
    so.argv = {self,
               "--worker",
               "--endpoint",
               endpoint,
               "--access-key",
               o_.access_key,
               "--secret-key",
               o_.secret_key,
               "--fabric",
               p.path->fabric,
               "--op",
               p.op,
               "--bucket",
               "bench",
               "--key",
               p.op == "get" ? "obj-" + format_size(p.size) : "put-" + p.path->name,
               "--size",
               std::to_string(p.size),
               "--threads",
               std::to_string(p.threads),
               "--duration-ms",
               std::to_string(o_.duration_ms),
               "--id",
               "p" + std::to_string(i),
               "--buffer-pages",
               o_.buffer_pages};
    if (p.part_size > 0) {
      so.argv.push_back("--part-size");
      so.argv.push_back(std::to_string(p.part_size));
    }
    so.env = p.path->env;
    if (!netns_prefix_.empty()) {
      // Across hosts with default flags: libfabric tcp finds the interface by itself.
      std::erase_if(so.env, [](const auto& kv) { return kv.first == "FI_TCP_IFACE"; });
    }
    so.env.emplace_back("UCX_WARN_UNUSED_ENV_VARS", "n");
    so.pipe_stdin = so.pipe_stdout = true;
    so.stderr_file = tmp_ + "/workers.log";
    auto w = Process::spawn(so);
    if (!w.ok()) return w.status();
    workers.push_back(std::move(*w));
  }
  for (auto& w : workers) {
    auto line = w.read_line(milliseconds(120'000));
    if (!line || line->rfind("ready", 0) != 0) {
      return Status(Errc::unavailable,
                    line ? *line : "worker did not become ready (see " + tmp_ + "/workers.log)");
    }
    if (first_note.empty()) first_note = line->substr(std::min<std::size_t>(6, line->size()));
  }
  return Status();
}

void Bench::fill_row(Row& row, const WorkerResult& total, double wall_s,
                     std::optional<double> srv_cpu_s) const {
  row.ran = true;
  row.ops = total.ops;
  row.errors = total.errors;
  row.rdma_ops = total.rdma_ops;
  row.fallback_ops = total.fallback_ops;
  row.gbps = wall_s > 0 ? static_cast<double>(total.bytes) / wall_s / 1e9 : 0;
  row.ops_s = wall_s > 0 ? static_cast<double>(total.ops) / wall_s : 0;
  row.p50_ms = total.latency.quantile_ns(0.50) / 1e6;
  row.p99_ms = total.latency.quantile_ns(0.99) / 1e6;
  if (total.bytes > 0) {
    const double gib = static_cast<double>(total.bytes) / kGiB;
    row.cli_cpu_gib = total.cpu_s / gib;
    if (srv_cpu_s) row.srv_cpu_gib = *srv_cpu_s / gib;
  }
  if (!total.note.empty()) row.note = total.note;
}

Row Bench::run_point(const Point& p) {
  Row row;
  row.p = p;
  std::vector<Process> workers;
  if (auto st = start_workers(p, workers, row.note); !st.ok()) {
    row.note = st.message();
    return row;
  }
  // nginx's CPU is spread over its workers; only ObjDirect's server CPU is reported.
  std::optional<double> srv0;
  if (server_.pid() > 0 && !p.path->nginx) srv0 = process_cpu_s(server_.pid());
  const auto t0 = Clock::now();
  for (auto& w : workers) w.write("go\n");
  WorkerResult total;
  for (auto& w : workers) {
    auto line = w.read_line(milliseconds(o_.duration_ms + 600'000));
    auto r = line ? WorkerResult::decode(*line) : std::nullopt;
    if (!r) {
      row.note = "worker result missing or malformed: " + line.value_or("(none)");
      return row;
    }
    total.merge(*r);
  }
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  std::optional<double> srv_cpu;
  if (srv0) {
    if (auto srv1 = process_cpu_s(server_.pid())) srv_cpu = *srv1 - *srv0;
  }
  for (auto& w : workers) (void)w.wait(milliseconds(30'000));
  fill_row(row, total, wall, srv_cpu);
  return row;
}

std::vector<Row> Bench::run_interleaved(const std::vector<Point>& pts) {
  std::vector<Row> rows(pts.size());
  // None runs when one fails: a comparison needs every path.
  auto fail = [&](std::size_t i, std::string why) {
    for (std::size_t j = 0; j < rows.size(); ++j) {
      rows[j].note = j == i ? why : "not run: " + pts[i].path->name + " failed";
    }
    return rows;
  };
  std::vector<std::vector<Process>> workers(pts.size());
  // The server CPU each path's bursts cost (ObjDirect's own server only; nginx spreads its CPU
  // over its workers).
  std::vector<std::optional<double>> srv_cpu(pts.size());
  for (std::size_t i = 0; i < pts.size(); ++i) {
    rows[i].p = pts[i];
    OBJDIRECT_ASSERT(pts[i].procs == 1 && pts[i].threads == 1,
                     "--interleave runs the 1x1 size sweep");
    if (server_.pid() > 0 && !pts[i].path->nginx) srv_cpu[i] = 0;
    if (auto st = start_workers(pts[i], workers[i], rows[i].note); !st.ok()) {
      return fail(i, st.message());
    }
  }
  // Burst after burst, one path at a time, in interleave_order (bench.hpp), until every path has
  // run --duration-ms in all. Each burst lasts at least one transfer, so the loop ends.
  const auto order = interleave_order(static_cast<std::uint32_t>(pts.size()));
  std::vector<WorkerResult> acc(pts.size());
  std::vector<double> busy(pts.size(), 0);
  std::vector<std::uint64_t> bursts(pts.size(), 0);
  const double want_s = static_cast<double>(o_.duration_ms) / 1e3;
  auto short_of_time = [&] {
    return std::any_of(busy.begin(), busy.end(), [&](double b) { return b < want_s; });
  };
  const std::string burst = "burst " + std::to_string(o_.burst_ms) + "\n";
  while (short_of_time()) {
    for (const std::uint32_t i : order) {
      Process& w = workers[i].front();
      const auto srv0 = srv_cpu[i] ? process_cpu_s(server_.pid()) : std::nullopt;
      w.write(burst);
      auto line = w.read_line(milliseconds(o_.burst_ms + 600'000));
      auto r = line ? WorkerResult::decode(*line) : std::nullopt;
      if (!r) {
        for (auto& ws : workers) (void)ws.front().write("end\n");
        return fail(i, "worker result missing or malformed: " + line.value_or("(none)"));
      }
      if (srv0) {
        if (auto srv1 = process_cpu_s(server_.pid())) *srv_cpu[i] += *srv1 - *srv0;
      }
      acc[i].merge(*r);
      busy[i] += r->wall_s;
      ++bursts[i];
    }
  }
  for (auto& ws : workers) (void)ws.front().write("end\n");
  for (auto& ws : workers) (void)ws.front().wait(milliseconds(30'000));
  for (std::size_t i = 0; i < pts.size(); ++i) {
    fill_row(rows[i], acc[i], busy[i], srv_cpu[i]);
    rows[i].note += (rows[i].note.empty() ? "" : "; ") + std::string("interleaved, ") +
                    std::to_string(bursts[i]) + " bursts";
  }
  return rows;
}

const Row* Bench::find(const std::string& sweep, const std::string& op, const std::string& path,
                       std::uint64_t size, std::uint32_t procs, std::uint32_t threads) const {
  for (const auto& r : rows_) {
    if (r.ran && r.p.sweep == sweep && r.p.op == op && r.p.path->name == path && r.p.size == size &&
        r.p.procs == procs && r.p.threads == threads) {
      return &r;
    }
  }
  return nullptr;
}

void Bench::keep_median_rounds() {
  if (o_.rounds <= 1) return;
  // auto, http and lf-shm of each (op, size, round); the map keeps the rounds in order.
  std::map<std::tuple<std::string, std::uint64_t, std::uint32_t>, std::array<const Row*, 3>> trio;
  for (const auto& r : rows_) {
    if (!r.ran || r.p.sweep != "size") continue;
    const auto& name = r.p.path->name;
    const int slot = name == "auto" ? 0 : name == "http" ? 1 : name == "lf-shm" ? 2 : -1;
    if (slot >= 0) trio[{r.p.op, r.p.size, r.p.round}][static_cast<std::size_t>(slot)] = &r;
  }
  for (const auto& [k, t] : trio) {
    if (t[0] && t[1] && t[2]) {
      auto_rounds_[{std::get<0>(k), std::get<1>(k)}].push_back(
          {t[0]->gbps, t[1]->gbps, t[2]->gbps});
    }
  }
  std::vector<Row> kept;
  std::map<std::tuple<std::string, std::string, std::uint64_t>, std::vector<Row>> groups;
  std::vector<std::tuple<std::string, std::string, std::uint64_t>> order;
  for (auto& r : rows_) {
    if (r.p.sweep != "size") {
      kept.push_back(std::move(r));
      continue;
    }
    auto k = std::make_tuple(r.p.op, r.p.path->name, r.p.size);
    if (!groups.count(k)) order.push_back(k);
    groups[k].push_back(std::move(r));
  }
  std::vector<Row> size_rows;
  for (const auto& k : order) {
    auto& g = groups[k];
    std::vector<Row*> ran;
    for (auto& r : g) {
      if (r.ran) ran.push_back(&r);
    }
    if (ran.empty()) {
      size_rows.push_back(std::move(g.front()));
      continue;
    }
    std::sort(ran.begin(), ran.end(), [](const Row* a, const Row* b) { return a->gbps < b->gbps; });
    Row m = *ran[(ran.size() - 1) / 2];
    std::string all;
    for (const auto& r : g) all += (all.empty() ? "" : "/") + (r.ran ? fmt(r.gbps) : "-");
    m.note += (m.note.empty() ? "" : "; ") + std::string("median of ") + all + " GB/s";
    size_rows.push_back(std::move(m));
  }
  size_rows.insert(size_rows.end(), std::make_move_iterator(kept.begin()),
                   std::make_move_iterator(kept.end()));
  rows_ = std::move(size_rows);
}

namespace {
// The path auto's measured transfers took: "rdma", "http", or both with RDMA's share (auto's
// probes, or a size where the two are close; docs/client.md, "The fastest path").
std::string auto_went(const Row& a) {
  if (a.rdma_ops == 0) return "http";
  if (a.rdma_ops >= a.ops) return "rdma";
  return "mixed, rdma " + std::to_string(a.rdma_ops) + "/" + std::to_string(a.ops);
}
}  // namespace

void Bench::print_auto_check(std::ostream& out) const {
  // Issue 15's criterion: auto at least 0.95x the better of http and lf-shm at every size.
  bool any = false;
  int points = 0, below = 0, paired_points = 0, paired_below = 0;
  for (const auto& op : ops_) {
    for (auto s : sizes_) {
      const Row* a = find("size", op, "auto", s, 1, 1);
      const Row* h = find("size", op, "http", s, 1, 1);
      const Row* l = find("size", op, "lf-shm", s, 1, 1);
      if (!a || !h || !l) continue;
      if (!any) {
        out << "\n### auto against the better of http and lf-shm (size sweep, 1x1)\n\n"
            << "\"auto / better\" divides the medians of the rounds; \"paired\" is the median of "
               "each round's auto / max(http, lf-shm), its three passes "
            << (o_.interleave ? "interleaved burst by burst" : "run one after the other")
            << " (with --rounds).\n\n"
            << "| op | size | http GB/s | lf-shm GB/s | auto GB/s | auto went | auto / better | "
               "paired | paired per round |\n"
            << "|---|---:|---:|---:|---:|---|---:|---:|---|\n";
        any = true;
      }
      const double best = std::max(h->gbps, l->gbps);
      std::string paired = "-", per_round = "-";
      if (auto it = auto_rounds_.find({op, s}); it != auto_rounds_.end()) {
        if (auto p = paired_auto_ratio(it->second)) {
          paired = fmt(p->median, 3);
          per_round.clear();
          for (double v : p->per_round) per_round += (per_round.empty() ? "" : " ") + fmt(v);
          ++paired_points;
          if (p->median < 0.95) ++paired_below;
        }
      }
      ++points;
      if (best > 0 && a->gbps / best < 0.95) ++below;
      out << "| " << op << " | " << format_size(s) << " | " << fmt(h->gbps) << " | " << fmt(l->gbps)
          << " | " << fmt(a->gbps) << " | " << auto_went(*a) << " | "
          << (best > 0 ? fmt(a->gbps / best) : std::string("-")) << " | " << paired << " | "
          << per_round << " |\n";
    }
  }
  if (any) {
    out << "\nBelow 0.95: " << below << " of " << points << " (auto / better)";
    if (paired_points > 0) out << ", " << paired_below << " of " << paired_points << " (paired)";
    out << ".\n";
  }
}

void Bench::compute_ratios() {
  for (auto& r : rows_) {
    if (!r.ran) continue;
    if (auto it = memcpy_.find(r.p.size); it != memcpy_.end() && it->second > 0) {
      r.x_memcpy = r.gbps / it->second;
    }
    if (auto it = tcp_.find(r.p.size); it != tcp_.end() && it->second > 0) {
      r.x_tcp = r.gbps / it->second;
    }
    if (!r.p.path->nginx) {
      const Row* n = find(r.p.sweep, r.p.op, "nginx", r.p.size, r.p.procs, r.p.threads);
      if (n && n->gbps > 0) r.x_nginx = r.gbps / n->gbps;
    }
  }
}

void Bench::print_markdown(std::ostream& out) const {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  // The kernel's default congestion control is what the server's GETs run unless a
  // --server-arg=--tcp-congestion says otherwise; it moves HTTP GETs of MiBs by up to 3x
  // (docs/BENCHMARKS.md, "TCP congestion control").
  std::string congestion = "unknown";
  if (std::ifstream f("/proc/sys/net/ipv4/tcp_congestion_control"); f) std::getline(f, congestion);
  out << "## objdirect-bench\n\n"
      << "Host " << host << ", " << std::thread::hardware_concurrency() << " CPUs"
      << (netns_prefix_.empty()
              ? ""
              : "; across two network namespaces (server " + std::string(kNetnsServerAddr) +
                    ", clients 10.201.0.2, one veth link)")
      << "; server " << endpoint_ << " offers RDMA fabrics: " << fabrics_offered_
      << "; nginx: " << (nginx_ ? "yes" : nginx_note_) << "; client buffers and memcpy on "
      << (o_.buffer_pages == "huge" ? "huge pages (MADV_HUGEPAGE, as numpy's)" : "4 KiB pages")
      << "; " << o_.duration_ms << " ms per point; kernel TCP congestion control " << congestion
      << (o_.server_args.empty() ? "" : "; extra server arguments:");
  for (const auto& a : o_.server_args) out << " " << a;
  out << ".\n\n"
      << "### Baselines\n\n| size | memcpy GB/s (1 thread) | loopback TCP GB/s (1 conn) |\n"
      << "|---:|---:|---:|\n";
  for (auto s : sizes_) {
    out << "| " << format_size(s) << " | " << fmt(memcpy_.count(s) ? memcpy_.at(s) : 0) << " | "
        << fmt(tcp_.count(s) ? tcp_.at(s) : 0) << " |\n";
  }
  out << "\n### Data paths\n\n"
      << "| sweep | op | path | size | procs x threads | GB/s | ops/s | p50 ms | p99 ms "
         "| client CPU-s/GiB | server CPU-s/GiB | x memcpy | x TCP | x nginx | rdma/fallback "
         "ops | note |\n"
      << "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n";
  for (const auto& r : rows_) {
    out << "| " << r.p.sweep << " | " << r.p.op << " | " << r.p.path->name << " | "
        << format_size(r.p.size) << " | " << r.p.procs << "x" << r.p.threads << " | ";
    if (!r.ran) {
      out << "failed | | | | | | | | | | |";
    } else {
      out << fmt(r.gbps) << " | " << fmt(r.ops_s, 0) << " | " << fmt(r.p50_ms, 3) << " | "
          << fmt(r.p99_ms, 3) << " | " << fmt_opt(r.cli_cpu_gib, 3) << " | "
          << fmt_opt(r.srv_cpu_gib, 3) << " | " << fmt_opt(r.x_memcpy) << " | " << fmt_opt(r.x_tcp)
          << " | " << fmt_opt(r.x_nginx) << " | " << r.rdma_ops << "/" << r.fallback_ops
          << (r.errors ? " (" + std::to_string(r.errors) + " errors)" : "") << " |";
    }
    std::string note = r.note;
    std::replace(note.begin(), note.end(), '|', '/');
    out << " " << note << " |\n";
  }
}

void Bench::write_csv(const std::string& file) const {
  std::ofstream f(file);
  f << "sweep,op,path,size_bytes,procs,threads,gbps,ops_s,p50_ms,p99_ms,client_cpu_s_per_gib,"
       "server_cpu_s_per_gib,x_memcpy,x_tcp,x_nginx,ops,rdma_ops,fallback_ops,errors,note\n";
  for (auto s : sizes_) {
    for (const auto& [name, m] : {std::pair{"memcpy", &memcpy_}, std::pair{"tcp", &tcp_}}) {
      if (!m->count(s)) continue;
      f << "baseline,copy," << name << "," << s << ",1,1," << fmt(m->at(s), 4) << ",,,,,,,,,,,,,\n";
    }
  }
  for (const auto& r : rows_) {
    std::string note = r.note;
    std::replace(note.begin(), note.end(), ',', ';');
    std::replace(note.begin(), note.end(), '"', '\'');
    f << r.p.sweep << "," << r.p.op << "," << r.p.path->name << "," << r.p.size << "," << r.p.procs
      << "," << r.p.threads << ",";
    if (r.ran) {
      f << fmt(r.gbps, 4) << "," << fmt(r.ops_s, 1) << "," << fmt(r.p50_ms, 4) << ","
        << fmt(r.p99_ms, 4) << "," << fmt_opt(r.cli_cpu_gib, 4) << "," << fmt_opt(r.srv_cpu_gib, 4)
        << "," << fmt_opt(r.x_memcpy, 4) << "," << fmt_opt(r.x_tcp, 4) << ","
        << fmt_opt(r.x_nginx, 4) << "," << r.ops << "," << r.rdma_ops << "," << r.fallback_ops
        << "," << r.errors << ",";
    } else {
      f << ",,,,,,,,,,,,,";
    }
    f << "\"" << note << "\"\n";
  }
}

void Bench::plot() const {
  std::string csv = o_.csv;
  if (csv.empty()) {
    csv = tmp_ + "/plot.csv";
    write_csv(csv);
  }
  std::string script = o_.plot_script.empty()
                           ? std::string(OBJDIRECT_SOURCE_DIR) + "/scripts/bench-plot.gp"
                           : o_.plot_script;
  SpawnOptions so;
  so.argv = {"/usr/bin/gnuplot", "-e", "csv='" + csv + "'; png='" + o_.plot + "'", script};
  so.stderr_file = tmp_ + "/gnuplot.log";
  auto p = Process::spawn(so);
  if (!p.ok() || p->wait(milliseconds(60'000)) != 0) {
    std::cerr << "objdirect-bench: gnuplot failed (is gnuplot installed? see " << tmp_
              << "/gnuplot.log)\n";
  }
}

std::string Bench::json() const {
  GoalInputs in;
  in.sizes = sizes_;
  in.memcpy_gbps = memcpy_;
  in.procs = procs_;
  in.total_concurrency = o_.total_concurrency;
  in.procs_size = procs_size_;
  for (const auto& r : rows_) {
    if (!r.ran) continue;
    GoalPoint g;
    g.sweep = r.p.sweep;
    g.op = r.p.op;
    g.path = r.p.path->name;
    g.rdma_path = r.p.path->fabric != "none" && r.p.path->name != "auto";
    g.size = r.p.size;
    g.procs = r.p.procs;
    g.threads = r.p.threads;
    g.gbps = r.gbps;
    g.ops = r.ops;
    g.rdma_ops = r.rdma_ops;
    g.cli_cpu_gib = r.cli_cpu_gib;
    in.points.push_back(std::move(g));
  }
  return goals_json(in);
}

int Bench::run() {
  // Defaults for --quick and the full run.
  if (o_.sizes_text.empty())
    o_.sizes_text = o_.quick ? "64KiB,16MiB" : "4KiB,64KiB,1MiB,16MiB,256MiB,1GiB";
  if (o_.conc_text.empty()) o_.conc_text = o_.quick ? "1,8" : "1,4,16,64";
  if (o_.procs_text.empty()) o_.procs_text = o_.quick ? "1,2" : "1,2,4,8";
  if (o_.duration_ms == 0) o_.duration_ms = o_.quick ? 300 : 2000;
  auto sizes = parse_size_list(o_.sizes_text);
  if (!sizes) {
    std::cerr << "objdirect-bench: bad --sizes\n";
    return 2;
  }
  sizes_ = *sizes;
  std::sort(sizes_.begin(), sizes_.end());
  sizes_.erase(std::unique(sizes_.begin(), sizes_.end()), sizes_.end());
  for (const auto& c : split(o_.conc_text))
    conc_.push_back(static_cast<std::uint32_t>(std::stoul(c)));
  for (const auto& c : split(o_.procs_text))
    procs_.push_back(static_cast<std::uint32_t>(std::stoul(c)));
  for (auto c : conc_) {
    if (c < 1 || c > limits::bench_threads_max) {
      std::cerr << "objdirect-bench: --concurrency values must be 1.." << limits::bench_threads_max
                << "\n";
      return 2;
    }
  }
  for (auto p : procs_) {
    if (p < 1 || p > limits::bench_processes_max) {
      std::cerr << "objdirect-bench: --procs values must be 1.." << limits::bench_processes_max
                << "\n";
      return 2;
    }
  }
  ops_ = split(o_.ops_text);
  std::set<std::string> wanted;
  for (const auto& n :
       split(o_.paths_text.empty() ? "http,lf-shm,lf-tcp,ucx-sm,ucx-tcp,nginx" : o_.paths_text)) {
    wanted.insert(n);
  }
  for (const auto& p : all_paths()) {
    if (!wanted.erase(p.name)) continue;
    if (!o_.endpoint.empty() && p.fabric != "none") continue;  // HTTP only on other servers
    if (p.nginx && o_.no_nginx) continue;
    paths_.push_back(&p);
  }
  if (!wanted.empty()) {
    std::cerr << "objdirect-bench: unknown path " << *wanted.begin()
              << " (http, lf-shm, auto, lf-tcp, ucx-sm, ucx-tcp, nginx)\n";
    return 2;
  }
  // The concurrency sweep runs at 1 MiB (or the size nearest below), the process sweep at
  // 16 MiB: big enough for bandwidth, small enough for 64 buffers.
  conc_size_ = sizes_.front();
  procs_size_ = sizes_.front();
  for (auto s : sizes_) {
    if (s <= (1ull << 20)) conc_size_ = s;
    if (s <= (16ull << 20)) procs_size_ = s;
  }

  if (auto st = setup_dirs(); !st.ok()) {
    std::cerr << "objdirect-bench: " << st.message() << "\n";
    return 1;
  }
  if (o_.netns) {
    if (!o_.endpoint.empty()) {
      std::cerr << "objdirect-bench: --netns starts its own server (no --endpoint)\n";
      return 2;
    }
    // nginx would run beside the clients, not on the server's host.
    std::erase_if(paths_, [](const PathSpec* p) { return p->nginx; });
    if (auto st = netns_up(); !st.ok()) {
      std::cerr << "objdirect-bench: " << st.message() << "\n";
      netns_down();
      return 1;
    }
  }
  if (o_.endpoint.empty()) {
    if (auto st = start_server(); !st.ok()) {
      std::cerr << "objdirect-bench: " << st.message() << "\n";
      return 1;
    }
  } else {
    endpoint_ = o_.endpoint;
  }
  ClientConfig cfg;
  cfg.endpoint = endpoint_;
  cfg.access_key = o_.access_key;
  cfg.secret_key = o_.secret_key;
  cfg.fabric = "none";
  auto admin = Client::create(cfg);
  if (!admin.ok()) {
    std::cerr << "objdirect-bench: " << admin.status().message() << "\n";
    return 1;
  }
  admin_ = std::move(*admin);
  if (auto st = admin_->create_bucket("bench");
      !st.ok() && st.code() != Errc::bucket_already_owned_by_you) {
    std::cerr << "objdirect-bench: create bucket: " << st.message() << "\n";
    return 1;
  }
  // What the server advertises (x-amz-rdma-fabrics).
  if (auto offer = admin_->rdma_offer(); offer.ok()) {
    std::string names;
    for (const auto& f : offer->fabrics) names += (names.empty() ? "" : ",") + f;
    fabrics_offered_ = names.empty() ? "none" : names;
  }
  bool want_nginx = false;
  for (auto* p : paths_) want_nginx |= p->nginx;
  if (want_nginx) {
    auto n = Nginx::start(tmp_ + "/www", tmp_);
    if (n.ok()) {
      nginx_ = std::move(*n);
      g_nginx_pid = nginx_->pid();
    } else {
      nginx_note_ = n.status().message();
      std::erase_if(paths_, [](const PathSpec* p) { return p->nginx; });
    }
  }

  // The plan, so that the progress bar knows its length.
  std::vector<Point> plan;
  for (auto s : sizes_) {
    for (std::uint32_t round = 0; round < o_.rounds; ++round) {
      for (const auto& op : ops_) {
        // Each round starts one path later, so that no path is always the first (or the last)
        // pass after the previous size's uploads.
        for (std::size_t k = 0; k < paths_.size(); ++k) {
          auto* path = paths_[(k + round) % paths_.size()];
          if (path->nginx && op != "get") continue;
          Point pt{"size", op, path, s, 1, 1};
          pt.round = round;
          plan.push_back(pt);
        }
      }
    }
  }
  const bool has_get = std::find(ops_.begin(), ops_.end(), "get") != ops_.end();
  if (has_get) {
    for (auto* path : paths_) {
      for (auto c : conc_) {
        if (c == 1) continue;  // already in the size sweep
        const auto fit = std::max<std::uint64_t>(1, limits::bench_buffer_bytes_max / conc_size_);
        plan.push_back({"conc", "get", path, conc_size_, 1,
                        static_cast<std::uint32_t>(std::min<std::uint64_t>(c, fit))});
      }
    }
  }
  // The process sweep, for GET and PUT (P6, P6_put).
  for (const auto& op : ops_) {
    if (op != "get" && op != "put") continue;
    for (auto* path : paths_) {
      if (path->name != "http" && path->name != "lf-shm") continue;
      for (auto pr : procs_) {
        plan.push_back(
            {"procs", op, path, procs_size_, pr, std::max(1u, o_.total_concurrency / pr)});
      }
    }
  }
  // nginx has no multipart upload, so its PUT is compared with ObjDirect's at the P4 size as
  // one request each (the client's part size set to the object size): P4_put.
  const bool has_put = std::find(ops_.begin(), ops_.end(), "put") != ops_.end();
  const PathSpec* http_path = nullptr;
  const PathSpec* nginx_path = nullptr;
  for (auto* path : paths_) {
    if (path->name == "http") http_path = path;
    if (path->nginx) nginx_path = path;
  }
  if (has_put && http_path && nginx_path) {
    std::uint64_t s1g = 0;
    for (auto s : sizes_) {
      if (s <= (1ull << 30)) s1g = s;
    }
    if (s1g == 0) s1g = sizes_.back();
    // Above S3's single-PUT limit the client would fall back to a multipart upload.
    for (const PathSpec* path : {http_path, nginx_path}) {
      if (s1g > limits::put_bytes_max) break;
      Point pt{"single", "put", path, s1g, 1, 1};
      pt.part_size = std::max<std::uint64_t>(s1g, 8ull << 20);
      plan.push_back(pt);
    }
  }
  std::set<std::uint64_t> get_sizes;
  for (const auto& p : plan) {
    if (p.op == "get") get_sizes.insert(p.size);
  }
  Progress progress(sizes_.size() + get_sizes.size() + plan.size());
  for (auto s : sizes_) {
    progress.step("baseline memcpy/tcp " + format_size(s));
    const auto d = milliseconds(std::max<std::uint64_t>(150, o_.duration_ms / 2));
    memcpy_[s] = memcpy_gbps(s, d, o_.buffer_pages == "huge");
    tcp_[s] = tcp_loopback_gbps(s, d);
  }
  for (std::size_t i = 0; i < plan.size();) {
    const Point& p = plan[i];
    if (p.op == "get" && !uploaded_.count(p.size)) {
      progress.step("upload " + format_size(p.size));
      if (auto st = ensure_object(p.size); !st.ok()) {
        Row r;
        r.p = p;
        r.note = "upload failed: " + st.message();
        rows_.push_back(r);
        ++i;
        continue;
      }
    }
    // --interleave: the size sweep's paths of one (op, size, round) run together.
    std::size_t n = 1;
    while (o_.interleave && p.sweep == "size" && i + n < plan.size() &&
           plan[i + n].sweep == "size" && plan[i + n].op == p.op && plan[i + n].size == p.size &&
           plan[i + n].round == p.round) {
      ++n;
    }
    for (std::size_t j = i; j < i + n; ++j) {
      progress.step(plan[j].op + " " + plan[j].path->name + " " + format_size(plan[j].size) + " " +
                    std::to_string(plan[j].procs) + "x" + std::to_string(plan[j].threads) +
                    (n > 1 ? " (interleaved)" : ""));
    }
    if (n > 1) {
      auto rows = run_interleaved({plan.begin() + static_cast<std::ptrdiff_t>(i),
                                   plan.begin() + static_cast<std::ptrdiff_t>(i + n)});
      rows_.insert(rows_.end(), rows.begin(), rows.end());
    } else {
      rows_.push_back(run_point(p));
    }
    i += n;
  }
  progress.finish();
  keep_median_rounds();
  compute_ratios();
  print_markdown(std::cout);
  print_auto_check(std::cout);
  if (!o_.csv.empty()) write_csv(o_.csv);
  if (!o_.plot.empty()) plot();
  if (o_.json) std::cout << "\n" << json() << std::endl;

  g_nginx_pid = 0;
  g_server_pid = 0;
  if (nginx_) nginx_->stop();
  server_.stop();
  netns_down();
  if (!o_.keep_tmp) {
    std::error_code ec;
    std::filesystem::remove_all(tmp_, ec);
  } else {
    std::cerr << "objdirect-bench: kept " << tmp_ << "\n";
  }
  for (const auto& r : rows_) {
    if (!r.ran || r.errors > 0) return 1;
  }
  return 0;
}

}  // namespace
}  // namespace objdirect::bench

int main(int argc, char** argv) {
  if (argc > 1 && std::string_view(argv[1]) == "--worker") {
    return objdirect::bench::worker_main(argc - 1, argv + 1);
  }
  objdirect::bench::Options o;
  CLI::App app{
      "objdirect-bench: GET/PUT throughput, latency and CPU of every ObjDirect data path (HTTP, "
      "libfabric shm/tcp, UCX sm/tcp) beside memcpy, loopback TCP and nginx baselines"};
  app.add_option("--endpoint", o.endpoint,
                 "Measure an existing S3 server (HTTP path only) instead of starting one");
  app.add_option("--access-key", o.access_key, "Access key")->capture_default_str();
  app.add_option("--secret-key", o.secret_key, "Secret key")->capture_default_str();
  app.add_option("--server-bin", o.server_bin,
                 "objdirect-server binary (default: beside this one)");
  app.add_option("--server-arg", o.server_args,
                 "Extra objdirect-server argument (repeatable), e.g. "
                 "--server-arg=--rdma-buffer-pool-bytes=1073741824")
      ->allow_extra_args(false);
  app.add_flag("--quick", o.quick, "Small run (< 60 s): sizes 64KiB,16MiB; 300 ms per point");
  app.add_option("--sizes", o.sizes_text, "Object sizes, e.g. 4KiB,64KiB,1MiB,16MiB,256MiB,1GiB");
  app.add_option(
      "--paths", o.paths_text,
      "Comma list of http,lf-shm,lf-tcp,ucx-sm,ucx-tcp,nginx, and auto (fabric auto with the "
      "client's rdma_min_bytes crossover; not in the default list)");
  app.add_option("--ops", o.ops_text, "get,put")->capture_default_str();
  app.add_option("--concurrency", o.conc_text, "Threads of the concurrency sweep (1,4,16,64)");
  app.add_option("--procs", o.procs_text, "Processes of the process sweep (1,2,4,8)");
  app.add_option("--total-concurrency", o.total_concurrency,
                 "Transfers in flight across processes in the process sweep")
      ->capture_default_str()
      ->check(CLI::Range(1u, objdirect::limits::bench_threads_max));
  app.add_option("--duration-ms", o.duration_ms, "Measured time per point (2000; quick 300)");
  app.add_option("--csv", o.csv, "Write every point as CSV");
  app.add_option("--plot", o.plot, "Write a PNG of GB/s vs size per path (gnuplot)");
  app.add_option("--plot-script", o.plot_script, "gnuplot script (default scripts/bench-plot.gp)");
  app.add_option("--tmp-dir", o.tmp_parent, "Parent of the temporary directory")
      ->capture_default_str();
  app.add_flag("--json", o.json, "End the output with one JSON object of the P1..P6 figures");
  app.add_flag("--keep-tmp", o.keep_tmp, "Keep the temporary directory (logs, data)");
  app.add_flag("--no-nginx", o.no_nginx, "Skip the nginx baseline");
  app.add_option("--rounds", o.rounds,
                 "Passes of the size sweep, each over every path in turn (the order rotated by one "
                 "each round); each point keeps its "
                 "median-GB/s pass (the note lists all)")
      ->check(CLI::Range(1u, objdirect::limits::bench_rounds_max))
      ->capture_default_str();
  app.add_flag(
      "--interleave", o.interleave,
      "Size sweep: run the paths of each size together, a worker per path taking turns "
      "in bursts of --burst-ms (each path right after each other path equally often) "
      "until each has run --duration-ms; GB/s is each path's bytes over its own bursts' time");
  app.add_option("--burst-ms", o.burst_ms, "Length of one --interleave burst")
      ->check(CLI::Range(std::uint64_t{1}, objdirect::limits::bench_burst_ms_max))
      ->capture_default_str();
  app.add_option("--buffer-pages", o.buffer_pages,
                 "Pages of the client buffers and of memcpy: huge (MADV_HUGEPAGE, as numpy's "
                 "arrays of 4 MiB or more) or base (4 KiB)")
      ->check(CLI::IsMember({"huge", "base"}))
      ->capture_default_str();
  app.add_flag("--netns", o.netns,
               "Across two hosts made from network namespaces (scripts/netns.sh; root): the "
               "server on 10.201.0.1, the clients on 10.201.0.2, no FI_TCP_IFACE; no nginx");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  ::signal(SIGINT, objdirect::bench::on_signal);
  ::signal(SIGTERM, objdirect::bench::on_signal);
  objdirect::bench::Bench bench(std::move(o));
  return bench.run();
}
