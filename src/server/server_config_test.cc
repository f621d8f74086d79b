// parse_server_config: each flag fills its field, defaults are the option structs' own, and bad
// values are refused with the message and exit code objdirect-server prints.
#include "server/server_config.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/limits.hpp"
#include "token/binding.hpp"

namespace objdirect::server {
namespace {

const std::vector<std::string> kUser = {"--access-key", "ak", "--secret-key", "sk"};

ParsedConfig parse(std::vector<std::string> args, bool with_user = true) {
  if (with_user) args.insert(args.end(), kUser.begin(), kUser.end());
  std::vector<const char*> argv = {"objdirect-server"};
  for (const auto& a : args) argv.push_back(a.c_str());
  return parse_server_config(static_cast<int>(argv.size()), argv.data());
}

TEST(ServerConfig, DefaultsAreTheOptionStructsOwn) {
  auto p = parse({});
  ASSERT_TRUE(p.config) << p.err;
  const ServerConfig& c = *p.config;
  EXPECT_EQ(c.http.host, "127.0.0.1");
  EXPECT_EQ(c.http.port, 9000);
  EXPECT_EQ(c.http.threads, 0u);
  EXPECT_EQ(c.http.header_bytes_max, limits::header_bytes_max);
  EXPECT_EQ(c.http.connections_max, limits::connections_max);
  EXPECT_EQ(c.http.unread_body_drain_bytes_max, limits::unread_body_drain_bytes_max);
  EXPECT_EQ(c.http.unread_body_drain_time_max.count(), limits::unread_body_drain_time_max_ms);
  EXPECT_EQ(c.http.header_timeout.count(), limits::header_timeout_ms);
  EXPECT_EQ(c.store.backend, "local");
  EXPECT_EQ(c.store.data_dir, "./var/data");
  EXPECT_TRUE(c.store.fsync);
  EXPECT_TRUE(c.store.cache.dir.empty());
  EXPECT_FALSE(c.store.gateway.retry_attempts_given);
  EXPECT_EQ(c.rdma.fabrics, "auto");
  EXPECT_EQ(c.rdma.local_host, "127.0.0.1");
  EXPECT_TRUE(c.rdma.zero_copy_get);
  EXPECT_EQ(c.rdma.zero_copy_get_min_bytes, rdma::RdmaOptions{}.zero_copy_get_min_bytes);
  EXPECT_EQ(c.s3.rdma_inline_transfers_max, s3::S3Options{}.rdma_inline_transfers_max);
  EXPECT_FALSE(c.s3.sse_c_over_http);
  EXPECT_EQ(c.rdma.op_timeout, rdma::RdmaOptions{}.op_timeout);
  EXPECT_EQ(c.rdma.admission_wait_max, rdma::RdmaOptions{}.admission_wait_max);
  EXPECT_EQ(c.s3.region, "us-east-1");
  EXPECT_EQ(c.s3.lifecycle_interval_ms, 60'000u);
  EXPECT_GE(c.s3.put_digest_threads, 1u);
  EXPECT_LE(c.s3.put_digest_threads, 16u);
  ASSERT_EQ(c.s3.users.size(), 1u);
  EXPECT_EQ(c.s3.users.at("ak").secret_key, "sk");
  EXPECT_FALSE(c.s3.secure_transport);
}

TEST(ServerConfig, EachFlagFillsItsField) {
  auto p = parse({"--listen",
                  "[::1]:0",
                  "--data",
                  "/d",
                  "--backend",
                  "s3",
                  "--upstream",
                  "http://up:1",
                  "--upstream-region",
                  "eu-west-3",
                  "--upstream-profile",
                  "prof",
                  "--upstream-connections-max",
                  "7",
                  "--upstream-connect-timeout-ms",
                  "11",
                  "--upstream-low-speed-time-s",
                  "12",
                  "--upstream-multipart-threshold-bytes",
                  "13",
                  "--upstream-part-bytes",
                  "14",
                  "--upstream-parallel-parts",
                  "15",
                  "--upstream-parallel-gets",
                  "16",
                  "--upstream-retry-attempts",
                  "5",
                  "--upstream-conditional-writes",
                  "gateway",
                  "--gateway-spool-dir",
                  "/sp",
                  "--gateway-spool-memory-bytes",
                  "17",
                  "--gateway-spool-bytes-max",
                  "18",
                  "--cache-dir",
                  "/c",
                  "--cache-bytes-max",
                  "19",
                  "--cache-ttl-s",
                  "20",
                  "--cache-block-bytes",
                  "65536",
                  "--region",
                  "r1",
                  "--domain",
                  "example.test",
                  "--threads",
                  "40",
                  "--io-threads",
                  "6",
                  "--header-bytes-max",
                  "4096",
                  "--connections-max",
                  "9",
                  "--unread-body-drain-bytes-max",
                  "1234",
                  "--tcp-congestion",
                  "cubic",
                  "--header-timeout-ms",
                  "21",
                  "--idle-timeout-ms",
                  "22",
                  "--request-timeout-ms",
                  "23",
                  "--no-fsync",
                  "--put-digest-threads",
                  "0",
                  "--lifecycle-interval-ms",
                  "0",
                  "--lifecycle-day-seconds",
                  "2",
                  "--lifecycle-actions-per-pass-max",
                  "3",
                  "--lmdb-map-bytes",
                  "1048576",
                  "--fabric",
                  "none",
                  "--rdma-buffer-pool-bytes",
                  "1000000",
                  "--rdma-chunk-bytes",
                  "100000",
                  "--rdma-staged-get",
                  "--rdma-zero-copy-min-bytes",
                  "4097",
                  "--rdma-inline-transfers-max",
                  "3",
                  "--sse-c-over-http",
                  "--rdma-inflight-bytes-max",
                  "24",
                  "--rdma-client-inflight-bytes-max",
                  "25",
                  "--rdma-op-timeout-ms",
                  "26",
                  "--rdma-retired-buffers-max",
                  "27",
                  "--rdma-reap-interval-ms",
                  "28",
                  "--rdma-admission-wait-ms",
                  "29",
                  "--rdma-admission-waiters-max",
                  "20",
                  "--rdma-bindings-max",
                  "30",
                  "--rdma-binding-lifetime-s",
                  "31",
                  "--rdma-replay-nonces-max",
                  "32",
                  "--tls-cert",
                  "/cert",
                  "--tls-key",
                  "/key",
                  "--metrics-allow",
                  "10.0.0.0/8",
                  "--access-log",
                  "-"});
  ASSERT_TRUE(p.config) << p.err;
  const ServerConfig& c = *p.config;
  EXPECT_EQ(c.http.host, "::1");
  EXPECT_EQ(c.http.port, 0);
  EXPECT_EQ(c.rdma.local_host, "::1");
  EXPECT_EQ(c.store.data_dir, "/d");
  EXPECT_EQ(c.store.backend, "s3");
  const auto& g = c.store.gateway;
  EXPECT_EQ(g.upstream, "http://up:1");
  EXPECT_EQ(g.region, "eu-west-3");
  EXPECT_EQ(g.profile, "prof");
  EXPECT_EQ(g.connections, 7u);
  EXPECT_EQ(g.connect_timeout_ms, 11u);
  EXPECT_EQ(g.low_speed_time_s, 12u);
  EXPECT_EQ(g.multipart_threshold_bytes, 13u);
  EXPECT_EQ(g.part_bytes, 14u);
  EXPECT_EQ(g.parallel_parts, 15u);
  EXPECT_EQ(g.parallel_gets, 16u);
  EXPECT_EQ(g.retry_attempts, 5u);
  EXPECT_TRUE(g.retry_attempts_given);
  EXPECT_EQ(g.conditional_writes, "gateway");
  EXPECT_EQ(g.spool_dir, "/sp");
  EXPECT_EQ(g.spool_memory_bytes, 17u);
  EXPECT_EQ(g.spool_bytes_max, 18u);
  EXPECT_EQ(c.store.cache.dir, "/c");
  EXPECT_EQ(c.store.cache.bytes_max, 19u);
  EXPECT_EQ(c.store.cache.ttl_s, 20u);
  EXPECT_EQ(c.store.cache.block_bytes, 65536u);
  EXPECT_EQ(c.s3.region, "r1");
  EXPECT_EQ(c.s3.domain, "example.test");
  EXPECT_EQ(c.http.threads, 40u);
  EXPECT_EQ(c.http.io_threads, 6u);
  EXPECT_EQ(c.http.header_bytes_max, 4096u);
  EXPECT_EQ(c.http.connections_max, 9u);
  EXPECT_EQ(c.http.unread_body_drain_bytes_max, 1234u);
  EXPECT_EQ(c.http.tcp_congestion, "cubic");
  EXPECT_EQ(c.http.header_timeout.count(), 21);
  EXPECT_EQ(c.http.idle_timeout.count(), 22);
  EXPECT_EQ(c.http.request_timeout.count(), 23);
  EXPECT_FALSE(c.store.fsync);
  EXPECT_EQ(c.s3.put_digest_threads, 0u);
  EXPECT_EQ(c.s3.lifecycle_interval_ms, 0u);
  EXPECT_EQ(c.s3.lifecycle_day_seconds, 2u);
  EXPECT_EQ(c.s3.lifecycle_actions_per_pass_max, 3u);
  EXPECT_EQ(c.store.lmdb_map_bytes, 1u << 20);
  EXPECT_EQ(c.rdma.fabrics, "none");
  EXPECT_EQ(c.rdma.buffer_pool_bytes, 1'000'000u);
  EXPECT_EQ(c.rdma.chunk_bytes, 100'000u);
  EXPECT_FALSE(c.rdma.zero_copy_get);
  EXPECT_EQ(c.rdma.zero_copy_get_min_bytes, 4097u);
  EXPECT_EQ(c.s3.rdma_inline_transfers_max, 3u);
  EXPECT_TRUE(c.s3.sse_c_over_http);
  EXPECT_EQ(c.rdma.inflight_bytes_max, 24u);
  EXPECT_EQ(c.rdma.per_client_inflight_bytes_max, 25u);
  EXPECT_EQ(c.rdma.op_timeout.count(), 26);
  EXPECT_EQ(c.rdma.retired_buffers_max, 27u);
  EXPECT_EQ(c.rdma.reap_interval.count(), 28);
  EXPECT_EQ(c.rdma.admission_wait_max.count(), 29);
  EXPECT_EQ(c.rdma.admission_waiters_max, 20u);
  EXPECT_EQ(c.s3.rdma_bindings_max, 30u);
  EXPECT_EQ(c.s3.rdma_binding_lifetime_s, 31u);
  EXPECT_EQ(c.s3.rdma_replay_nonces_max, 32u);
  EXPECT_EQ(c.http.tls_cert_file, "/cert");
  EXPECT_EQ(c.http.tls_key_file, "/key");
  EXPECT_TRUE(c.s3.secure_transport);
  EXPECT_EQ(c.s3.metrics_allow, "10.0.0.0/8");
  EXPECT_EQ(c.s3.access_log, "-");
}

TEST(ServerConfig, EnvironmentVariablesFillFieldsAndFlagsWin) {
  ::setenv("OBJDIRECT_REGION", "env-region", 1);
  ::setenv("OBJDIRECT_RDMA_OP_TIMEOUT_MS", "1234", 1);
  auto p = parse({"--region", "flag-region"});
  auto q = parse({});
  ::unsetenv("OBJDIRECT_REGION");
  ::unsetenv("OBJDIRECT_RDMA_OP_TIMEOUT_MS");
  ASSERT_TRUE(p.config && q.config) << p.err << q.err;
  EXPECT_EQ(p.config->s3.region, "flag-region");
  EXPECT_EQ(q.config->s3.region, "env-region");
  EXPECT_EQ(q.config->rdma.op_timeout.count(), 1234);
}

TEST(ServerConfig, DerivedSettings) {
  // The gateway's store calls block on the upstream: 16 I/O threads unless --threads says.
  auto gw = parse({"--backend", "s3", "--upstream", "http://up:1"});
  ASSERT_TRUE(gw.config) << gw.err;
  EXPECT_EQ(gw.config->http.threads, 16u);
  // Its calls are not marked for the hand-off (common/blocking.hpp): every thread runs, always
  // (HttpServer clamps io_threads to threads); the local backend's runner count stays automatic.
  EXPECT_GE(gw.config->http.io_threads, gw.config->http.threads);
  // ... on one shared io_context, even with --io-threads given; the local backend's runners
  // each have their own unless --shared-io-context says otherwise.
  EXPECT_FALSE(gw.config->http.io_context_per_thread);
  auto gw6 = parse({"--backend", "s3", "--upstream", "http://up:1", "--io-threads", "6"});
  ASSERT_TRUE(gw6.config) << gw6.err;
  EXPECT_EQ(gw6.config->http.io_threads, 6u);
  EXPECT_FALSE(gw6.config->http.io_context_per_thread);
  auto local = parse({});
  ASSERT_TRUE(local.config) << local.err;
  EXPECT_EQ(local.config->http.io_threads, 0u);
  EXPECT_TRUE(local.config->http.io_context_per_thread);
  auto shared = parse({"--shared-io-context"});
  ASSERT_TRUE(shared.config) << shared.err;
  EXPECT_FALSE(shared.config->http.io_context_per_thread);
  // Admission waiters hold I/O threads: at most half of them unless asked for explicitly.
  auto t = parse({"--threads", "8"});
  ASSERT_TRUE(t.config) << t.err;
  EXPECT_EQ(t.config->rdma.admission_waiters_max, 4u);
  auto t6 = parse({"--threads", "6"});  // so are inline transfers (default 8)
  ASSERT_TRUE(t6.config) << t6.err;
  EXPECT_EQ(t6.config->s3.rdma_inline_transfers_max, 3u);
  // --credentials: one user per line, plus --access-key's.
  const auto file = std::filesystem::temp_directory_path() /
                    ("server_config_test_creds_" + std::to_string(::getpid()));
  std::ofstream(file) << "# users\nu1 s1\n\nu2 s2\n";
  auto cr = parse({"--credentials", file.string()});
  std::filesystem::remove(file);
  ASSERT_TRUE(cr.config) << cr.err;
  EXPECT_EQ(cr.config->s3.users.size(), 3u);
  EXPECT_EQ(cr.config->s3.users.at("u2").secret_key, "s2");
}

TEST(ServerConfig, BadValuesAreRefusedWithAClearMessage) {
  struct Case {
    std::vector<std::string> args;
    bool with_user;
    int exit_code;
    std::string message;
  };
  const std::string bindings_over = std::to_string(limits::rdma_bindings_max + 1);
  const std::string nonces_over = std::to_string(limits::rdma_replay_nonces_max + 1);
  const Case cases[] = {
      {{"--listen", "nohost"},
       true,
       2,
       "objdirect-server: --listen must be HOST:PORT, got 'nohost'"},
      {{"--listen", "h:70000"}, true, 2, "--listen must be HOST:PORT"},
      {{}, false, 2, "objdirect-server: no credentials: give --access-key/--secret-key or"},
      {{"--access-key", "a"}, false, 2, "--access-key and --secret-key go together"},
      {{"--credentials", "/nonexistent/creds"}, false, 2, "/nonexistent/creds"},
      {{"--cache-bytes-max", "1"}, true, 2, "--cache-bytes-max needs --cache-dir"},
      {{"--cache-ttl-s", "1"}, true, 2, "--cache-ttl-s needs --cache-dir"},
      {{"--cache-block-bytes", "65536"}, true, 2, "--cache-block-bytes needs --cache-dir"},
      {{"--cache-dir", "/c"}, true, 2, "--cache-dir needs --cache-bytes-max"},
      {{"--data", "/d", "--cache-dir", "/d/c", "--cache-bytes-max", "1"},
       true,
       2,
       "--cache-dir and --data must not contain each other"},
      {{"--data", "/d/x", "--cache-dir", "/d", "--cache-bytes-max", "1"},
       true,
       2,
       "must not contain each other"},
      {{"--backend", "s3"}, true, 2, "--backend s3 needs --upstream"},
      {{"--threads", "8", "--rdma-admission-waiters-max", "5"},
       true,
       2,
       "--rdma-admission-waiters-max must be at most half of --threads (4)"},
      {{"--threads", "8", "--rdma-inline-transfers-max", "5"},
       true,
       2,
       "--rdma-inline-transfers-max must be at most half of --threads (4)"},
      // CLI11's own checks: ranges (the *_max limits), members, numbers, unknown flags.
      {{"--put-digest-threads", "257"}, true, 105, "--put-digest-threads: Value 257 not in range"},
      {{"--rdma-inline-transfers-max", "257"},
       true,
       105,
       "--rdma-inline-transfers-max: Value 257 not in range"},
      {{"--rdma-bindings-max", "0"}, true, 105, "--rdma-bindings-max: Value 0 not in range"},
      {{"--rdma-bindings-max", bindings_over}, true, 105, "--rdma-bindings-max: Value"},
      {{"--rdma-replay-nonces-max", nonces_over}, true, 105, "--rdma-replay-nonces-max: Value"},
      {{"--rdma-binding-lifetime-s", "3601"}, true, 105, "--rdma-binding-lifetime-s: Value"},
      {{"--lifecycle-actions-per-pass-max", "0"}, true, 105, "not in range 1 to 1000000"},
      {{"--lifecycle-day-seconds", "86401"}, true, 105, "not in range 1 to 86400"},
      {{"--rdma-reap-interval-ms", "0"}, true, 105, "--rdma-reap-interval-ms"},
      {{"--rdma-admission-wait-ms", "600001"}, true, 105, "--rdma-admission-wait-ms"},
      {{"--lmdb-map-bytes", "1024"}, true, 105, "--lmdb-map-bytes"},
      {{"--backend", "nfs"}, true, 105, "--backend: nfs not in {local,rados,s3}"},
      {{"--upstream-conditional-writes", "maybe"}, true, 105, "--upstream-conditional-writes"},
      {{"--connections-max", "many"}, true, 104, "--connections-max"},
      {{"--bogus"}, true, 109, "--bogus"},
  };
  for (const auto& c : cases) {
    auto p = parse(c.args, c.with_user);
    std::string args;
    for (const auto& a : c.args) args += a + " ";
    EXPECT_FALSE(p.config) << args;
    EXPECT_EQ(p.exit_code, c.exit_code) << args << ": " << p.err;
    EXPECT_NE(p.err.find(c.message), std::string::npos) << args << ": " << p.err;
    EXPECT_TRUE(p.out.empty()) << args;
  }
}

std::string read_doc(const std::string& rel) {
  std::ifstream in(std::string(OBJDIRECT_SOURCE_DIR) + "/" + rel);
  EXPECT_TRUE(in) << rel;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every --flag inside a `code span` of text.
std::set<std::string> flags_in_code_spans(const std::string& text) {
  std::set<std::string> out;
  const std::regex span("`([^`\n]*)`"), flag("--[a-z][a-z0-9-]*");
  for (std::sregex_iterator s(text.begin(), text.end(), span), end; s != end; ++s) {
    const std::string code = (*s)[1];
    for (std::sregex_iterator f(code.begin(), code.end(), flag); f != end; ++f)
      out.insert(f->str());
  }
  return out;
}

// --help lists exactly the flags the docs describe: README's table ("Using the server") and the
// flag tables of docs/scale-out.md (rows starting with a flag). --help exits 0 on stdout.
TEST(ServerConfig, HelpListsExactlyTheDocumentedFlags) {
  auto p = parse({"--help"}, false);
  EXPECT_FALSE(p.config);
  EXPECT_EQ(p.exit_code, 0);
  EXPECT_TRUE(p.err.empty()) << p.err;
  std::set<std::string> help;
  const std::regex listed("^\\s+(--[a-z][a-z0-9-]*)");
  std::istringstream lines(p.out);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, listed)) help.insert(m[1]);
  }
  EXPECT_GT(help.size(), 60u) << p.out;
  help.erase("--help");

  const std::string readme = read_doc("README.md");
  const auto at = readme.find("## Using the server");
  ASSERT_NE(at, std::string::npos);
  const auto section = readme.substr(at, readme.find("\n## ", at + 1) - at);
  std::set<std::string> in_readme = flags_in_code_spans(section);
  in_readme.erase("--help");
  std::set<std::string> in_tables;
  std::istringstream rows(read_doc("docs/scale-out.md"));
  for (std::string row; std::getline(rows, row);) {
    if (row.starts_with("| `--")) {
      auto f = flags_in_code_spans(row.substr(0, row.find('|', 1)));
      in_tables.insert(f.begin(), f.end());
    }
  }
  EXPECT_GT(in_tables.size(), 10u);
  for (const auto& f : in_readme) EXPECT_TRUE(help.contains(f)) << "README names " << f;
  for (const auto& f : in_tables) EXPECT_TRUE(help.contains(f)) << "scale-out.md names " << f;
  for (const auto& f : help) {
    EXPECT_TRUE(in_readme.contains(f) || in_tables.contains(f)) << f << " is not documented";
  }
}

}  // namespace
}  // namespace objdirect::server
