// ClientConfig: the settings of one objdirect::Client (client.hpp), and how load() fills them
// from the environment and the AWS shared files (docs/client.md).
//
// Thread safety: a plain value; distinct objects may be used concurrently.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "objdirect/export.hpp"
#include "objdirect/status.hpp"

namespace objdirect {

struct OBJDIRECT_API ClientConfig {
  // "http://host[:port]" or "https://host[:port]" (TLS 1.2+, the server's certificate verified
  // against ca_bundle or the system's store, and checked to name the host).
  std::string endpoint;
  std::string region = "us-east-1";
  std::string access_key;
  std::string secret_key;
  std::string session_token;  // sent as x-amz-security-token when not empty
  std::string profile;        // the profile that load() used ("default" when none named)
  // "auto" | "libfabric:tcp" | "libfabric:shm" | "libfabric:verbs" | "libfabric:efa" | "ucx" |
  // "none". auto tries, in fabric_order, each fabric the server offers (x-amz-rdma-fabrics) and
  // keeps the first that opens here and has not failed against this server recently
  // (docs/client.md, "Choosing a fabric").
  std::string fabric = "auto";
  // auto's order: a comma list of fabric names, only those are tried. Empty: the default,
  // libfabric:shm (only towards a server on this kernel: x-amz-rdma-host-id), then fabrics that
  // move bytes by an RDMA NIC (libfabric:verbs, libfabric:efa, ucx where UCX finds rc/dc), then
  // libfabric:tcp, then ucx over tcp/sm. At most limits::client_fabric_order_entries_max names.
  std::string fabric_order;
  // A fabric whose transfer failed against this server (RDMATransferFailed: e.g. the server
  // cannot reach the address the fabric advertised) is skipped for that server this long, by
  // every Client of the process: auto moves to the next fabric, a named fabric to HTTP. Then it
  // is tried again. 0: never skipped. At most limits::client_fabric_failure_memory_ms_max.
  std::uint32_t fabric_failure_memory_ms = 30'000;
  // Whether RDMA is used (docs/client.md, "The fastest path"): "auto" proposes it and falls back
  // to HTTP when it cannot (path http-fallback, with the reason); with fabric "auto", a download
  // (GET) moving fewer than rdma_min_bytes, or an upload (PUT, UploadPart) moving fewer than
  // min(rdma_min_bytes, rdma_put_min_bytes), goes over plain HTTP (path http, reason "below
  // rdma_min_bytes" / "below rdma_put_min_bytes"), which is faster there (a fabric named
  // explicitly is used at every size). Uploads cross over lower: the defaults are measured
  // (docs/client.md, "The fastest path"); rdma_min_bytes 0 sends every size over RDMA.
  // "required": every request proposes it, whatever its size, and anything but RDMA fails with
  // Errc::rdma_declined instead of falling back. "off": never (as fabric "none", but the fabric may
  // still be opened for register_memory).
  std::string rdma = "auto";
  std::uint64_t rdma_min_bytes = 512ull << 10;
  std::uint64_t rdma_put_min_bytes = 64ull << 10;
  // With rdma "auto" and fabric "auto", from the crossover up: each get / put (and their batch
  // forms) of host memory goes the path measured faster for its direction and size class
  // (a power of two), learnt from this Client's own calls: a class's first 3 calls go over RDMA
  // and the next 3 over HTTP, then the faster one is taken (HTTP only when more than 5 % faster),
  // with one call in 32 probing the other (docs/client.md, "The fastest path"). A call sent over
  // HTTP this way has path http and a reason starting "auto:". false: RDMA at every size from
  // the crossover up. Environment OBJDIRECT_RDMA_LEARN (0 or 1).
  bool rdma_learn = true;
  std::uint64_t part_size_bytes = 8ull << 20;  // 8 MiB; uploads use at least 5 MiB parts
  std::uint32_t concurrency = 8;               // parts in flight per call (and batch width)
  std::uint32_t connections_max = 64;          // bound of the keep-alive HTTP connection pool
  std::uint32_t connect_timeout_ms = 10'000;
  // Longest wait for any progress on a connection (a header, a body chunk, an RDMA reply).
  std::uint32_t io_timeout_ms = 120'000;
  // Retries (docs/client.md, "Retries"), as boto3 names them: attempts in all for one request,
  // 1..limits::retry_attempts_max (20); "standard" (exponential back-off with full jitter,
  // Retry-After honoured) or "adaptive" (standard plus a client-side rate limiter that slows
  // down on throttling replies); "legacy" is accepted and behaves as standard. The first retry
  // waits up to retry_base_delay_ms, each next one up to twice as long, never above
  // retry_max_backoff_ms (at most limits::retry_backoff_ms_max, 20 s).
  std::uint32_t max_attempts = 3;
  std::string retry_mode = "standard";
  std::uint32_t retry_base_delay_ms = 100;
  std::uint32_t retry_max_backoff_ms = 20'000;
  // Expiry of each x-amz-rdma-token, 1..120 s (limits::token_lifetime_max_s; a short lifetime
  // bounds the server's replay cache, docs/rdma_protocol.md).
  std::uint32_t token_lifetime_s = 60;
  // Registration cache bounds (per fabric): least recently used unpinned entries are dropped.
  std::uint32_t registrations_max = 256;
  std::uint64_t registered_bytes_max = 64ull << 30;
  // copy() uses one CopyObject up to this size and UploadPartCopy parts above it. At most
  // limits::put_bytes_max (5 GiB, also S3's CopyObject limit); lower it to test or to copy
  // big objects in parallel parts.
  std::uint64_t copy_multipart_threshold_bytes = 5ull << 30;
  // Uploads (put) from this size up go as a multipart upload, smaller ones as one PutObject
  // (s3transfer's multipart_threshold). 0: those larger than part_size_bytes go multipart.
  std::uint64_t multipart_threshold_bytes = 0;
  // "path": https://host/bucket/key (always works against ObjDirect); "virtual":
  // https://bucket.host/key, for a server whose --domain is the endpoint's host. The connection
  // goes to the endpoint's address either way (no DNS entry per bucket is needed); bucket names
  // that cannot be a DNS label, and calls without a bucket, stay path-style.
  std::string addressing_style = "path";
  // https: a PEM file of the certificate authorities the server's certificate must chain to;
  // empty: the system's store. There is no switch to skip verification.
  std::string ca_bundle;
  // 307 Temporary Redirects followed per request, 0..limits::client_redirects_max (each to its
  // Location, re-signed for that host, on a connection of its own); past it the call fails
  // with io_error "too many redirects". 0: none followed (the 307 is the call's error).
  std::uint32_t redirects_max = 3;

  // Defaults from the environment and the AWS shared files:
  //  - endpoint: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, else endpoint_url in the profile's config
  //  section;
  //  - credentials: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, else the
  //    profile in the credentials file (AWS_SHARED_CREDENTIALS_FILE, default
  //    ~/.aws/credentials, section [name]), else the config file (AWS_CONFIG_FILE, default
  //    ~/.aws/config, section [profile name] or [default]). When `profile` is given explicitly
  //    the profile's keys win over the environment's (as with `aws --profile`);
  //  - region: AWS_REGION, AWS_DEFAULT_REGION, the profile's region, else "us-east-1";
  //  - profile: `profile` if not empty, else AWS_PROFILE, else "default".
  //  - retries: AWS_MAX_ATTEMPTS and AWS_RETRY_MODE, else max_attempts and retry_mode in the
  //    profile's config section (as boto3).
  //  - ca_bundle: AWS_CA_BUNDLE, else ca_bundle in the profile's config section (as boto3).
  // Also honoured: OBJDIRECT_FABRIC (fabric), OBJDIRECT_FABRIC_ORDER (fabric_order),
  // OBJDIRECT_FABRIC_FAILURE_MEMORY_MS (fabric_failure_memory_ms), OBJDIRECT_RDMA (rdma),
  // OBJDIRECT_RDMA_MIN_BYTES (rdma_min_bytes), OBJDIRECT_RDMA_PUT_MIN_BYTES (rdma_put_min_bytes),
  // OBJDIRECT_RDMA_LEARN (rdma_learn).
  // Missing files are fine. Errors: invalid_argument when `profile` (or AWS_PROFILE) names a
  // profile other than "default" that neither file holds, when a file cannot be parsed (the message
  // names the file and line), or when a retry setting is invalid (the message names the variable or
  // key).
  static Result<ClientConfig> load(std::string_view profile = {});
};

}  // namespace objdirect
