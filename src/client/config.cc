// ClientConfig::load: the environment and the AWS shared config/credentials files.
#include <pwd.h>
#include <unistd.h>

#include <cctype>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "common/retry.hpp"
#include "objdirect/client.hpp"

namespace objdirect {

namespace {

using Section = std::map<std::string, std::string>;
using IniFile = std::map<std::string, Section>;

std::string trim(std::string_view s) {
  auto b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return {};
  auto e = s.find_last_not_of(" \t\r");
  return std::string(s.substr(b, e - b + 1));
}

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return (v && *v) ? v : nullptr;
}

std::string home_dir() {
  if (const char* h = env("HOME")) return h;
  if (const passwd* pw = getpwuid(getuid()); pw && pw->pw_dir) return pw->pw_dir;
  return ".";
}

// The INI dialect of the AWS files: [section], key = value, '#' or ';' comment lines. Indented
// lines after a key with an empty value are that key's nested block, as awscli reads them
// ("s3 =\n    addressing_style = virtual"): stored as "s3.addressing_style". Other indented
// lines (continuations) are skipped. Missing file -> found=false, no error.
Result<IniFile> read_ini(const std::string& path, bool& found) {
  IniFile ini;
  std::ifstream in(path);
  found = static_cast<bool>(in);
  if (!found) return ini;
  std::string line;
  std::string section;
  bool in_section = false;
  std::string nested;  // the key whose nested block the indented lines are in, if any
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && (line[0] == ' ' || line[0] == '\t')) {
      std::string t = trim(line);
      if (t.empty() || t[0] == '#' || t[0] == ';' || nested.empty()) continue;
      if (auto eq = t.find('='); eq != std::string::npos) {
        ini[section][nested + "." + trim(std::string_view(t).substr(0, eq))] =
            trim(std::string_view(t).substr(eq + 1));
      }
      continue;
    }
    nested.clear();
    std::string t = trim(line);
    if (t.empty() || t[0] == '#' || t[0] == ';') continue;
    if (t[0] == '[') {
      if (t.back() != ']') {
        return Status(Errc::invalid_argument,
                      path + ":" + std::to_string(lineno) + ": unterminated section header");
      }
      section = trim(std::string_view(t).substr(1, t.size() - 2));
      ini[section];
      in_section = true;
      continue;
    }
    auto eq = t.find('=');
    if (eq == std::string::npos || !in_section) {
      return Status(Errc::invalid_argument,
                    path + ":" + std::to_string(lineno) + ": expected 'key = value'");
    }
    std::string key = trim(std::string_view(t).substr(0, eq));
    std::string value = trim(std::string_view(t).substr(eq + 1));
    if (value.empty()) nested = key;
    ini[section][std::move(key)] = std::move(value);
  }
  return ini;
}

const Section* find_section(const IniFile& f, const std::string& name) {
  auto it = f.find(name);
  return it == f.end() ? nullptr : &it->second;
}

std::string value_of(const Section* s, const char* key) {
  if (!s) return {};
  auto it = s->find(key);
  return it == s->end() ? std::string() : it->second;
}

// A size as awscli reads multipart_threshold and multipart_chunksize
// (awscli.customizations.s3.utils.human_readable_to_bytes): a whole number of bytes, or one with a
// case-insensitive suffix KB, MB, GB, TB or KiB, MiB, GiB, TiB, all 1024-based ("8MB" is 8 MiB);
// blanks around the number are allowed (Python's int()), fractions are not.
std::optional<std::uint64_t> awscli_size(std::string_view text) {
  std::string v = trim(text);
  for (auto& ch : v) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  std::uint64_t mult = 1;
  static constexpr std::pair<std::string_view, std::uint64_t> kSuffixes[] = {
      {"kib", 1ull << 10}, {"mib", 1ull << 20}, {"gib", 1ull << 30}, {"tib", 1ull << 40},
      {"kb", 1ull << 10},  {"mb", 1ull << 20},  {"gb", 1ull << 30},  {"tb", 1ull << 40}};
  for (const auto& [suffix, m] : kSuffixes) {
    if (v.size() >= suffix.size() && v.ends_with(suffix)) {
      v = trim(std::string_view(v).substr(0, v.size() - suffix.size()));
      mult = m;
      break;
    }
  }
  if (!v.empty() && v[0] == '+') v.erase(0, 1);
  std::uint64_t n = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (v.empty() || ec != std::errc() || p != v.data() + v.size() || n > UINT64_MAX / mult) {
    return std::nullopt;
  }
  return n * mult;
}

// The keys of the profile's nested "s3 =" block that awscli's s3 commands read, as ClientConfig
// settings: addressing_style, max_concurrent_requests (concurrency), multipart_threshold and
// multipart_chunksize (multipart_threshold_bytes, part_size_bytes; sizes as awscli_size);
// use_accelerate_endpoint = true is refused (S3 Transfer Acceleration is an AWS endpoint, and
// objdirect talks to the configured one). Other keys (max_bandwidth: the client has no bandwidth
// limiter; max_queue_size, payload_signing_enabled, preferred_transfer_client, ...) are not read.
Status apply_s3_block(const Section* fs, const std::string& source, ClientConfig& c) {
  auto bad = [&](const char* key, const std::string& value, std::string_view want) {
    return Status(Errc::invalid_argument,
                  source + ": s3." + key + " = '" + value + "': " + std::string(want));
  };
  if (std::string a = value_of(fs, "s3.addressing_style"); !a.empty()) c.addressing_style = a;
  if (std::string v = value_of(fs, "s3.max_concurrent_requests"); !v.empty()) {
    std::uint32_t n = 0;
    const std::string t = trim(v);
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), n);
    if (t.empty() || ec != std::errc() || p != t.data() + t.size() || n == 0) {
      return bad("max_concurrent_requests", v, "a whole number of at least 1");
    }
    c.concurrency = n;
  }
  if (std::string v = value_of(fs, "s3.multipart_threshold"); !v.empty()) {
    auto n = awscli_size(v);
    if (!n || *n == 0) return bad("multipart_threshold", v, "a size such as 8MB or 8388608");
    c.multipart_threshold_bytes = *n;
  }
  if (std::string v = value_of(fs, "s3.multipart_chunksize"); !v.empty()) {
    auto n = awscli_size(v);
    if (!n || *n == 0) return bad("multipart_chunksize", v, "a size such as 8MB or 8388608");
    c.part_size_bytes = *n;
  }
  if (std::string v = value_of(fs, "s3.use_accelerate_endpoint"); !v.empty()) {
    std::string t = trim(v);
    for (auto& ch : t) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (t == "true") {
      return bad("use_accelerate_endpoint", v,
                 "S3 Transfer Acceleration is not supported: objdirect sends every request to "
                 "the profile's endpoint (endpoint_url / AWS_ENDPOINT_URL); remove the key or "
                 "set it to false");
    }
    if (t != "false") return bad("use_accelerate_endpoint", v, "true or false");
  }
  return Status::Ok();
}

}  // namespace

Result<ClientConfig> ClientConfig::load(std::string_view profile_arg) {
  ClientConfig c;
  bool explicit_profile = !profile_arg.empty();
  std::string profile(profile_arg);
  if (profile.empty()) {
    if (const char* p = env("AWS_PROFILE")) {
      profile = p;
      explicit_profile = true;
    } else {
      profile = "default";
    }
  }
  c.profile = profile;

  std::string home = home_dir();
  std::string cred_path = env("AWS_SHARED_CREDENTIALS_FILE") ? env("AWS_SHARED_CREDENTIALS_FILE")
                                                             : home + "/.aws/credentials";
  std::string conf_path = env("AWS_CONFIG_FILE") ? env("AWS_CONFIG_FILE") : home + "/.aws/config";
  bool cred_found = false, conf_found = false;
  auto creds = read_ini(cred_path, cred_found);
  if (!creds.ok()) return creds.status();
  auto conf = read_ini(conf_path, conf_found);
  if (!conf.ok()) return conf.status();

  const Section* cs = find_section(*creds, profile);
  const Section* fs = profile == "default" ? find_section(*conf, "default")
                                           : find_section(*conf, "profile " + profile);
  if (!fs && profile != "default") fs = find_section(*conf, profile);  // tolerated spelling
  if (explicit_profile && profile != "default" && !cs && !fs) {
    return Status(Errc::invalid_argument,
                  "profile '" + profile + "' not found in " + cred_path + " or " + conf_path);
  }

  // Profile keys: the credentials file first, then the config file.
  std::string p_ak = value_of(cs, "aws_access_key_id");
  std::string p_sk = value_of(cs, "aws_secret_access_key");
  std::string p_st = value_of(cs, "aws_session_token");
  if (p_ak.empty()) {
    p_ak = value_of(fs, "aws_access_key_id");
    p_sk = value_of(fs, "aws_secret_access_key");
    p_st = value_of(fs, "aws_session_token");
  }
  const char* e_ak = env("AWS_ACCESS_KEY_ID");
  const char* e_sk = env("AWS_SECRET_ACCESS_KEY");
  bool env_keys = e_ak && e_sk;
  if (env_keys && !(explicit_profile && !p_ak.empty())) {
    c.access_key = e_ak;
    c.secret_key = e_sk;
    if (const char* st = env("AWS_SESSION_TOKEN")) c.session_token = st;
  } else {
    c.access_key = p_ak;
    c.secret_key = p_sk;
    c.session_token = p_st;
  }

  if (const char* r = env("AWS_REGION")) {
    c.region = r;
  } else if (const char* r2 = env("AWS_DEFAULT_REGION")) {
    c.region = r2;
  } else if (std::string r3 = value_of(fs, "region"); !r3.empty()) {
    c.region = r3;
  }

  if (const char* e3 = env("AWS_ENDPOINT_URL_S3")) {
    c.endpoint = e3;
  } else if (const char* e = env("AWS_ENDPOINT_URL")) {
    c.endpoint = e;
  } else {
    c.endpoint = value_of(fs, "endpoint_url");
  }
  if (const char* ca = env("AWS_CA_BUNDLE")) {
    c.ca_bundle = ca;
  } else {
    c.ca_bundle = value_of(fs, "ca_bundle");
  }
  // The profile's nested "s3 =" block (awscli's S3 settings); Client::create checks the values.
  if (auto st = apply_s3_block(fs, conf_path + " [" + profile + "]", c); !st.ok()) return st;
  if (const char* f = env("OBJDIRECT_FABRIC")) c.fabric = f;
  if (const char* o = env("OBJDIRECT_FABRIC_ORDER")) c.fabric_order = o;
  if (const char* m = env("OBJDIRECT_FABRIC_FAILURE_MEMORY_MS")) {
    std::string_view v(m);
    std::uint32_t ms = 0;
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), ms);
    if (ec != std::errc() || p != v.data() + v.size()) {
      return Status(
          Errc::invalid_argument,
          "OBJDIRECT_FABRIC_FAILURE_MEMORY_MS: not a number of milliseconds: " + std::string(v));
    }
    c.fabric_failure_memory_ms = ms;
  }
  if (const char* r = env("OBJDIRECT_RDMA")) c.rdma = r;
  for (auto [name, field] : {std::pair{"OBJDIRECT_RDMA_MIN_BYTES", &c.rdma_min_bytes},
                             std::pair{"OBJDIRECT_RDMA_PUT_MIN_BYTES", &c.rdma_put_min_bytes}}) {
    const char* m = env(name);
    if (!m) continue;
    std::uint64_t n = 0;
    std::string_view v(m);
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec != std::errc() || p != v.data() + v.size()) {
      return Status(Errc::invalid_argument,
                    std::string(name) + " must be a byte count, got '" + std::string(v) + "'");
    }
    *field = n;
  }

  if (const char* l = env("OBJDIRECT_RDMA_LEARN")) {
    std::string_view v(l);
    if (v != "0" && v != "1") {
      return Status(Errc::invalid_argument,
                    "OBJDIRECT_RDMA_LEARN must be 0 or 1, got '" + std::string(v) + "'");
    }
    c.rdma_learn = v == "1";
  }

  // Retries: the environment wins over the profile (boto3's order).
  retry::Policy policy;
  const std::string conf_source = conf_path + " [" + profile + "]";
  if (auto st = policy.apply(value_of(fs, "max_attempts"), value_of(fs, "retry_mode"), conf_source);
      !st.ok()) {
    return st;
  }
  const char* e_attempts = env("AWS_MAX_ATTEMPTS");
  if (auto st = policy.apply(e_attempts ? e_attempts : "", "", "AWS_MAX_ATTEMPTS"); !st.ok()) {
    return st;
  }
  const char* e_mode = env("AWS_RETRY_MODE");
  if (auto st = policy.apply("", e_mode ? e_mode : "", "AWS_RETRY_MODE"); !st.ok()) return st;
  c.max_attempts = policy.max_attempts;
  if (e_mode) {
    c.retry_mode = e_mode;
  } else if (std::string m = value_of(fs, "retry_mode"); !m.empty()) {
    c.retry_mode = m;
  }
  return c;
}

}  // namespace objdirect
