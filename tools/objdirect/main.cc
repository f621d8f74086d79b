// objdirect: the command-line client (cp, ls, mb, rb, rm, stat, cat) over libobjdirect.
//
// Exit codes (docs/client.md): 0 ok, 1 other error, 2 bad arguments or configuration,
// 3 not found, 4 access denied, 5 endpoint unreachable (or service unavailable).
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "objdirect/client.hpp"

namespace {

using namespace objdirect;
namespace fs = std::filesystem;

enum Exit : int {
  kOk = 0,
  kGeneric = 1,
  kBadArgs = 2,
  kNotFound = 3,
  kAccessDenied = 4,
  kUnreachable = 5,
};

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
      return kUnreachable;
    default:
      return kGeneric;
  }
}

int report(const Status& st) {
  std::cerr << "objdirect: " << st.message() << " (" << errc_name(st.code()) << ")\n";
  return exit_code(st);
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

// The temporary file of a download in progress, removed if the process is interrupted so that
// neither a half-written destination nor litter stays behind.
char g_temp_path[4096] = {0};

void on_signal(int sig) {
  if (g_temp_path[0]) unlink(g_temp_path);
  signal(sig, SIG_DFL);
  raise(sig);
}

// A memory map of a file; unmapped on destruction.
struct Mapping {
  void* ptr = nullptr;
  std::size_t len = 0;
  ~Mapping() {
    if (ptr) munmap(ptr, len);
  }
};

struct Options {
  std::string endpoint;
  std::string profile;
  std::string fabric;
  std::uint64_t part_size = 0;
  std::uint32_t concurrency = 0;
  bool json = false;
};

Result<std::unique_ptr<Client>> make_client(const Options& o) {
  auto cfg = ClientConfig::load(o.profile);
  if (!cfg.ok()) return cfg.status();
  if (!o.endpoint.empty()) cfg->endpoint = o.endpoint;
  if (!o.fabric.empty()) cfg->fabric = o.fabric;
  if (o.part_size) cfg->part_size_bytes = o.part_size;
  if (o.concurrency) cfg->concurrency = o.concurrency;
  return Client::create(std::move(*cfg));
}

void print_transfer(const Options& o, const char* what, const TransferResult& r, double seconds) {
  const double gbytes_per_s = seconds > 0 ? static_cast<double>(r.bytes) / seconds / 1e9 : 0;
  const double gbits_per_s = gbytes_per_s * 8;
  if (o.json) {
    std::printf(
        "{\"bytes\":%llu,\"seconds\":%.6f,\"path\":\"%s\",\"fabric\":\"%s\",\"reason\":\"%s\","
        "\"gbps\":%.3f,\"gbytes_per_s\":%.3f,\"etag\":\"%s\",\"requests\":%u}\n",
        static_cast<unsigned long long>(r.bytes), seconds, std::string(path_name(r.path)).c_str(),
        json_escape(r.fabric).c_str(), json_escape(r.reason).c_str(), gbits_per_s, gbytes_per_s,
        json_escape(r.etag).c_str(), r.requests);
    return;
  }
  std::printf("%s: %llu bytes in %.3f s (%.2f GB/s, %.2f Gbit/s) via %s", what,
              static_cast<unsigned long long>(r.bytes), seconds, gbytes_per_s, gbits_per_s,
              std::string(path_name(r.path)).c_str());
  if (!r.fabric.empty()) std::printf(" [%s]", r.fabric.c_str());
  if (!r.reason.empty()) std::printf(" (%s)", r.reason.c_str());
  std::printf("\n");
}

int upload(Client& c, const Options& o, const std::string& src, S3Url dst) {
  if (dst.key.empty() || dst.key.back() == '/') dst.key += fs::path(src).filename().string();
  int fd = open(src.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    std::cerr << "objdirect: cannot open " << src << ": " << std::strerror(errno) << "\n";
    return errno == ENOENT ? kNotFound : kGeneric;
  }
  struct stat stbuf {};
  fstat(fd, &stbuf);
  if (!S_ISREG(stbuf.st_mode)) {
    close(fd);
    std::cerr << "objdirect: " << src << " is not a regular file\n";
    return kBadArgs;
  }
  Mapping m;
  m.len = static_cast<std::size_t>(stbuf.st_size);
  if (m.len > 0) {
    m.ptr = mmap(nullptr, m.len, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (m.ptr == MAP_FAILED) {
      m.ptr = nullptr;
      close(fd);
      std::cerr << "objdirect: cannot map " << src << ": " << std::strerror(errno) << "\n";
      return kGeneric;
    }
  }
  close(fd);
  MemoryHandle h;
  if (m.len > 0) {
    auto reg = c.register_memory(m.ptr, m.len);
    if (!reg.ok()) return report(reg.status());
    h = std::move(*reg);
  }
  auto t0 = std::chrono::steady_clock::now();
  auto r = c.put(dst.bucket, dst.key, std::span(static_cast<const std::byte*>(m.ptr), m.len));
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!r.ok()) return report(r.status());
  print_transfer(o, "upload", *r, secs);
  return kOk;
}

int download(Client& c, const Options& o, const S3Url& src, std::string dst) {
  if (src.key.empty()) {
    std::cerr << "objdirect: source s3://" << src.bucket << " names no object\n";
    return kBadArgs;
  }
  std::error_code ec;
  if (dst.ends_with('/') || fs::is_directory(dst, ec)) {
    dst = (fs::path(dst) / fs::path(src.key).filename()).string();
  }
  auto info = c.head(src.bucket, src.key);
  if (!info.ok()) return report(info.status());
  fs::path final_path(dst);
  fs::path dir = final_path.has_parent_path() ? final_path.parent_path() : fs::path(".");
  std::string tmpl = (dir / ("." + final_path.filename().string() + ".objdirect-XXXXXX")).string();
  if (tmpl.size() >= sizeof(g_temp_path)) {
    std::cerr << "objdirect: destination path too long\n";
    return kBadArgs;
  }
  std::vector<char> tmp(tmpl.begin(), tmpl.end());
  tmp.push_back('\0');
  // Signals wait while the file is created and its name published, so that the handler never
  // misses a file that exists.
  sigset_t block, old;
  sigemptyset(&block);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&block, sig);
  sigprocmask(SIG_BLOCK, &block, &old);
  int fd = mkstemp(tmp.data());
  if (fd >= 0) std::memcpy(g_temp_path, tmp.data(), tmp.size());
  sigprocmask(SIG_SETMASK, &old, nullptr);
  if (fd < 0) {
    std::cerr << "objdirect: cannot create a file in " << dir << ": " << std::strerror(errno)
              << "\n";
    return kGeneric;
  }
  auto fail = [&](int code) {
    close(fd);
    unlink(g_temp_path);
    g_temp_path[0] = 0;
    return code;
  };
  fchmod(
      fd, 0644 & ~[] {
        mode_t u = umask(0);
        umask(u);
        return u;
      }());
  Mapping m;
  m.len = static_cast<std::size_t>(info->size);
  if (m.len > 0) {
    if (ftruncate(fd, static_cast<off_t>(m.len)) != 0) {
      std::cerr << "objdirect: cannot size " << tmp.data() << ": " << std::strerror(errno) << "\n";
      return fail(kGeneric);
    }
    m.ptr = mmap(nullptr, m.len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m.ptr == MAP_FAILED) {
      m.ptr = nullptr;
      std::cerr << "objdirect: cannot map " << tmp.data() << ": " << std::strerror(errno) << "\n";
      return fail(kGeneric);
    }
  }
  MemoryHandle h;
  if (m.len > 0) {
    auto reg = c.register_memory(m.ptr, m.len);
    if (!reg.ok()) return fail(report(reg.status()));
    h = std::move(*reg);
  }
  auto t0 = std::chrono::steady_clock::now();
  auto r = c.get(src.bucket, src.key, std::span(static_cast<std::byte*>(m.ptr), m.len));
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!r.ok()) return fail(report(r.status()));
  if (r->bytes != m.len) {
    std::cerr << "objdirect: object changed size during the download (" << r->bytes << " of "
              << m.len << " bytes)\n";
    return fail(kGeneric);
  }
  h = MemoryHandle();
  if (m.ptr) {
    munmap(m.ptr, m.len);
    m.ptr = nullptr;
  }
  sigprocmask(SIG_BLOCK, &block, &old);
  const bool renamed = close(fd) == 0 && rename(g_temp_path, final_path.c_str()) == 0;
  const int err = errno;
  if (!renamed) unlink(g_temp_path);
  g_temp_path[0] = 0;
  sigprocmask(SIG_SETMASK, &old, nullptr);
  if (!renamed) {
    std::cerr << "objdirect: cannot write " << dst << ": " << std::strerror(err) << "\n";
    return kGeneric;
  }
  print_transfer(o, "download", *r, secs);
  return kOk;
}

int cmd_cp(const Options& o, const std::string& src, const std::string& dst) {
  auto s3src = parse_s3(src);
  auto s3dst = parse_s3(dst);
  if (s3src.has_value() == s3dst.has_value()) {
    std::cerr << "objdirect: cp copies between a local path and s3://BUCKET/KEY, one of each\n";
    return kBadArgs;
  }
  if ((s3src && s3src->bucket.empty()) || (s3dst && s3dst->bucket.empty())) {
    std::cerr << "objdirect: s3:// URL without a bucket\n";
    return kBadArgs;
  }
  auto c = make_client(o);
  if (!c.ok()) return report(c.status());
  return s3dst ? upload(**c, o, src, *s3dst) : download(**c, o, *s3src, dst);
}

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
  if (!u || u->bucket.empty()) {
    std::cerr << "objdirect: ls expects s3://BUCKET[/PREFIX]\n";
    return kBadArgs;
  }
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
  if (!u || u->bucket.empty() || !u->key.empty()) {
    std::cerr << "objdirect: expected s3://BUCKET\n";
    return kBadArgs;
  }
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
      std::cerr << "objdirect: write to stdout failed\n";
      return kGeneric;
    }
    offset += r->bytes;
    if (offset >= r->object_size) break;
  }
  return std::fflush(stdout) == 0 ? kOk : kGeneric;
}

}  // namespace

int main(int argc, char** argv) {
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  signal(SIGHUP, on_signal);
  signal(SIGPIPE, SIG_IGN);

  CLI::App app{"objdirect: S3 client with an RDMA data plane (libobjdirect)"};
  app.require_subcommand(1);
  Options o;
  auto add_common = [&o](CLI::App* sub) {
    sub->add_option("--endpoint-url", o.endpoint, "S3 endpoint (default: AWS_ENDPOINT_URL)");
    sub->add_option("--profile", o.profile, "AWS profile (default: AWS_PROFILE or default)");
    sub->add_option("--fabric", o.fabric, "auto | libfabric:tcp | libfabric:shm | ucx | none")
        ->check(CLI::IsMember({"auto", "libfabric:tcp", "libfabric:shm", "ucx", "none"}));
    sub->add_option("--part-size", o.part_size, "Part size in bytes (default 8 MiB)")
        ->check(CLI::PositiveNumber);
    sub->add_option("--concurrency", o.concurrency, "Parts in flight (default 8)")
        ->check(CLI::PositiveNumber);
    sub->add_flag("--json", o.json, "Print one JSON object");
  };
  std::string a, b;
  bool recursive = false;

  auto* cp = app.add_subcommand("cp", "Copy a local file to S3 or an S3 object to a local file");
  add_common(cp);
  cp->add_option("SRC", a, "local path or s3://BUCKET/KEY")->required();
  cp->add_option("DST", b, "local path or s3://BUCKET/KEY")->required();
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
  auto* rm = app.add_subcommand("rm", "Remove an object");
  add_common(rm);
  rm->add_option("URL", a, "s3://BUCKET/KEY")->required();
  auto* st = app.add_subcommand("stat", "Show an object's size, ETag and date");
  add_common(st);
  st->add_option("URL", a, "s3://BUCKET/KEY")->required();
  auto* cat = app.add_subcommand("cat", "Write an object to stdout");
  add_common(cat);
  cat->add_option("URL", a, "s3://BUCKET/KEY")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? kOk : kBadArgs;
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
