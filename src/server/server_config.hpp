// ServerConfig: everything objdirect-server's flags say, in one struct, and the one function that
// fills it from the command line (CLI11; each flag also reads its OBJDIRECT_* environment
// variable). The flags, their defaults and help texts are listed by `objdirect-server --help` and
// described in README ("Using the server").
//
// parse_server_config() checks what can be checked without opening anything: flag syntax and
// ranges (CLI11's messages, e.g. "--put-digest-threads: Value 257 not in range 0 to 256"),
// --listen's HOST:PORT, the credentials (--access-key with --secret-key, or --credentials, whose
// file it reads), the cache flags (each needs --cache-dir; --cache-dir needs --cache-bytes-max
// and, with the local backend, must not contain --data or lie inside it), --backend s3's
// --upstream, and --rdma-admission-waiters-max against --threads. Storage is opened later by
// storage::open_store(config.store), which reports its own errors.
#pragma once

#include <optional>
#include <string>

#include "server/http/http_server.hpp"
#include "server/rdma/rdma_engine.hpp"
#include "server/s3/s3_service.hpp"
#include "storage/open_store.hpp"

namespace objdirect::server {

struct ServerConfig {
  http::ServerOptions http;    // --listen, --threads, limits, timeouts, --tls-*
  s3::S3Options s3;            // users, --region, --domain, digests, bindings, lifecycle, logs
  rdma::RdmaOptions rdma;      // --fabric, --rdma-*
  storage::StoreConfig store;  // --backend, --data, --rados-*, --upstream*, --gateway-*, --cache-*
};

// What parse_server_config() decided: run with `config`, or exit with `exit_code` after printing
// `out` to stdout (--help) and `err` to stderr (the error, one or more full lines).
struct ParsedConfig {
  std::optional<ServerConfig> config;
  int exit_code = 0;
  std::string out;
  std::string err;
};

// Exit codes: 0 after --help; CLI11's own for a flag it refuses (105 a value out of range or not
// a member, 109 an unknown flag, ...); 2 for the checks above. argv[0] is the program name.
ParsedConfig parse_server_config(int argc, const char* const* argv);

}  // namespace objdirect::server
