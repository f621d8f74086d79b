// The retry policy shared by every ObjDirect S3 client: libobjdirect (C++, C, Python, the CLI)
// and the gateway backend's upstream calls (storage/s3). One definition of what is retried, how
// long to wait and how many attempts are made, so that the two never drift apart.
//
// Modes, as boto3 and the AWS SDKs name them (docs/client.md, "Retries"):
//  - standard: up to max_attempts attempts (default 3, boto3's standard mode); before retry n
//    (1-based) the caller sleeps a delay drawn uniformly from [0, min(max_backoff, base * 2^(n-1))]
//    ("full jitter"), but at least the server's Retry-After (capped at max_backoff);
//  - adaptive: standard, plus a client-side token bucket whose rate is cut multiplicatively on
//    every throttling reply (429, 503, SlowDown, Throttling...) and grows back as a cubic function
//    of the time since the last cut (boto3's adaptive mode); every attempt takes a token first;
//  - "legacy" is accepted as a name and behaves as standard.
//
// What is retried (classify_*): HTTP 429, 500, 502, 503, 504; the S3 codes SlowDown, Throttling,
// ThrottlingException, RequestLimitExceeded, TooManyRequestsException, RequestTimeout,
// InternalError, ServiceUnavailable (RequestTimeTooSkewed is not: the clock stays wrong);
// connections refused or
// reset; a body shorter than its Content-Length; a truncated XML reply. Which requests may be
// retried at all is the caller's decision (per operation; see client.cc and s3_store.cc).
//
// Thread safety: Policy is a value. Retrier is thread-safe (its limiter and random source are
// guarded).
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>

#include "common/status.hpp"

namespace objdirect::limits {
// Largest max_attempts a configuration may ask for (AWS_MAX_ATTEMPTS, max_attempts).
inline constexpr std::uint32_t retry_attempts_max = 20;
// Longest single back-off delay, also the cap on an honoured Retry-After (boto3: 20 s).
inline constexpr std::uint32_t retry_backoff_ms_max = 20'000;
}  // namespace objdirect::limits

namespace objdirect::retry {

enum class Mode : std::uint8_t { standard, adaptive };

// "standard", "adaptive"; "legacy" -> standard. nullopt for anything else.
std::optional<Mode> parse_mode(std::string_view name);
std::string_view mode_name(Mode m) noexcept;

struct Policy {
  Mode mode = Mode::standard;
  std::uint32_t max_attempts = 3;             // attempts in all, 1..limits::retry_attempts_max
  std::chrono::milliseconds base_delay{100};  // cap of the first retry's jittered delay
  std::chrono::milliseconds max_backoff{limits::retry_backoff_ms_max};

  // Applies textual settings (AWS_MAX_ATTEMPTS / max_attempts, AWS_RETRY_MODE / retry_mode);
  // empty strings leave the field alone. `source` names where they came from, for the message.
  // Errors: invalid_argument (not a number, 0, above retry_attempts_max, unknown mode).
  Status apply(std::string_view max_attempts, std::string_view mode, std::string_view source);
  // Errors: invalid_argument (max_attempts 0 or above the limit, base_delay above max_backoff,
  // max_backoff above limits::retry_backoff_ms_max).
  Status validate() const;
};

// Why one attempt failed in a way that may be retried, or nullopt when it must not be retried.
// The names are the keys of ClientStats::retry_reasons: the S3 error code when the reply had one
// ("SlowDown", "InternalError", "RequestTimeout", ...), else "http_NNN"; for requests without an
// answer "connection_refused", "connection_reset", "timeout", "short_body" (each HTTP layer maps
// its own failures to these: client/http_client.hpp, storage/s3); "truncated_xml" for a 2xx XML
// reply that does not parse.
std::optional<std::string> classify_status(int http_status, std::string_view s3_code);
// Whether a reason is a throttling signal (adaptive mode cuts its rate on these).
bool is_throttle(std::string_view reason);

// Retry-After: delta-seconds or an HTTP-date (now: the current time for the latter).
std::optional<std::chrono::milliseconds> parse_retry_after(
    std::string_view value, std::chrono::system_clock::time_point now);

// The delay before retry `retry` (1 = first retry) given a uniform random u in [0, 1).
std::chrono::milliseconds backoff_delay(const Policy& p, std::uint32_t retry, double u,
                                        std::optional<std::chrono::milliseconds> retry_after);

// adaptive mode's client-side rate limiter (a CUBIC-shaped token bucket, as boto3's).
class RateLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  // Waits until a token is available (returns at once until the first throttle).
  void acquire();
  // After each answer: throttled cuts the rate, else it grows.
  void on_answer(bool throttled);
  // Tokens per second, 0 while the bucket is not engaged (no throttle seen yet). For tests.
  double rate() const;

 private:
  void refill(Clock::time_point now);
  mutable std::mutex mu_;
  bool enabled_ = false;
  double fill_rate_ = 0;  // tokens/s
  double capacity_ = 1;   // tokens
  double tokens_ = 1;
  double w_max_ = 0;          // rate at the last throttle
  double measured_rate_ = 0;  // answers/s over the last half second
  Clock::time_point last_refill_{};
  Clock::time_point last_throttle_{};
  Clock::time_point rate_window_start_{};
  std::uint64_t rate_window_count_ = 0;
};

// A Policy with its random source and (adaptive) limiter; one per client.
class Retrier {
 public:
  explicit Retrier(Policy p);
  const Policy& policy() const noexcept { return policy_; }
  // Call before each attempt (adaptive mode may wait for a token).
  void before_attempt();
  // Call after each answered or failed attempt with the retry reason (nullopt: success or a
  // final error that is not retried).
  void after_attempt(const std::optional<std::string>& reason);
  // Whether another attempt may follow attempt `attempts_made` (1-based).
  bool may_retry(std::uint32_t attempts_made) const noexcept {
    return attempts_made < policy_.max_attempts;
  }
  // Sleeps the back-off before retry `retry` (1-based).
  void sleep_before(std::uint32_t retry, std::optional<std::chrono::milliseconds> retry_after);
  // Draws the delay without sleeping (tests, callers that wait elsewhere).
  std::chrono::milliseconds delay(std::uint32_t retry,
                                  std::optional<std::chrono::milliseconds> retry_after);

 private:
  Policy policy_;
  RateLimiter limiter_;
  std::mutex rng_mu_;
  std::mt19937_64 rng_;
};

// "after 3 attempts (SlowDown, connection_reset, SlowDown)": appended to a final error.
std::string attempts_note(std::uint32_t attempts, std::string_view reasons);

}  // namespace objdirect::retry
