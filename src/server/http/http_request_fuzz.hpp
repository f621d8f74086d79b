// The whole-HTTP-request fuzz target: raw bytes of one connection -> serve_buffer() -> the real
// S3Service (SigV4 auth as the server does it) over a LocalStore in a temporary directory.
// Shared by the libFuzzer binary (http_request_fuzz, built with -DOBJDIRECT_FUZZ=ON) and by
// http_request_fuzz_test, which replays the checked-in seeds and the crash regressions.
//
// Thread safety: not thread-safe; one fuzzing thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "server/http/http_server.hpp"

namespace objdirect::http {

// The credentials, region and pinned clock the seeds are signed with
// (scripts/gen-http-fuzz-seeds.py): seeds stay valid because the service's auth clock is pinned.
inline constexpr char kFuzzAccessKey[] = "fuzzaccesskey";
inline constexpr char kFuzzSecretKey[] = "fuzz-secret-key/0123456789+abcdef";
inline constexpr std::int64_t kFuzzClockUnix = 1767225660;  // 2026-01-01T00:01:00Z
// The bucket every seed uses; it exists before the first input.
inline constexpr char kFuzzBucket[] = "fuzz";

// Runs one input. Returns the responses; aborts (via the returned false of check) never here.
std::vector<BufferedResponse> http_request_fuzz_run(const std::uint8_t* data, std::size_t size);

// Runs one input and checks the invariants: every response has a status in 100..599; every
// error response with a body is S3 XML with a <Code>; a 431 only when the header section really
// exceeds header_bytes_max. Returns false on a violation (the fuzzer then aborts).
bool http_request_fuzz_one(const std::uint8_t* data, std::size_t size);

}  // namespace objdirect::http
