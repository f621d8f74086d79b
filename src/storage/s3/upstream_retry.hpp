// The gateway's retry policy for upstream requests (docs/scale-out.md, "Errors and retries"):
// which failures are retried, and how long to wait before the next attempt. One place, used by
// every upstream call of storage/s3, so that the client core's shared retry policy can replace it
// without touching the callers: they ask only `retryable(...)` and `backoff(...)`.
//
// Retried: HTTP 500, 502, 503 (SlowDown) and 504 (the upstream's transient failures, as boto3's
// "standard" mode retries them), 429, and transport failures that mean the request did not reach
// a serving upstream (connection refused, reset, empty reply). Not retried: 501 and every 4xx
// other than 429 (answers, not failures), and stalls and connect timeouts (a stalled upstream
// already cost the stall time; the client retries the whole request if it wants to).
//
// Backoff: exponential with full jitter, a uniformly random wait in [0, min(cap, base * 2^n)]
// before attempt n + 1 (n >= 1), as the AWS SDKs do.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>

namespace objdirect::storage {

namespace s3_limits {
// Attempts per upstream request (1 = no retry).
inline constexpr std::uint32_t retry_attempts_max = 10;
}  // namespace s3_limits

struct UpstreamRetryPolicy {
  std::uint32_t max_attempts = 3;  // boto3 "standard"; 1..s3_limits::retry_attempts_max
  std::chrono::milliseconds base{50};
  std::chrono::milliseconds cap{2000};

  // Whether an attempt that got HTTP `status` (0: no response; then `transport_retryable` says
  // whether the transport failure is one that is retried) may be tried again.
  static bool retryable(long status, bool transport_retryable) {
    if (status == 0) return transport_retryable;
    return status == 429 || status == 500 || status == 502 || status == 503 || status == 504;
  }

  // The wait before attempt `attempt` + 1, after `attempt` (>= 1) failed attempts.
  std::chrono::milliseconds backoff(std::uint32_t attempt) const {
    const std::uint32_t shift = std::min<std::uint32_t>(attempt - 1, 20);
    const auto ceiling = std::min<std::int64_t>(cap.count(), base.count() << shift);
    thread_local std::mt19937_64 rng{std::random_device{}()};
    std::uniform_int_distribution<std::int64_t> d(0, std::max<std::int64_t>(ceiling, 0));
    return std::chrono::milliseconds(d(rng));
  }
};

}  // namespace objdirect::storage
