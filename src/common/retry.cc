#include "common/retry.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <span>
#include <thread>

#include "common/time.hpp"

namespace objdirect::retry {

std::optional<Mode> parse_mode(std::string_view name) {
  if (name == "standard" || name == "legacy") return Mode::standard;
  if (name == "adaptive") return Mode::adaptive;
  return std::nullopt;
}

std::string_view mode_name(Mode m) noexcept {
  return m == Mode::adaptive ? "adaptive" : "standard";
}

Status Policy::apply(std::string_view attempts, std::string_view mode_text,
                     std::string_view source) {
  if (!attempts.empty()) {
    std::uint32_t n = 0;
    auto [p, ec] = std::from_chars(attempts.data(), attempts.data() + attempts.size(), n);
    if (ec != std::errc() || p != attempts.data() + attempts.size() || n == 0 ||
        n > limits::retry_attempts_max) {
      return Status(Errc::invalid_argument, std::string(source) + ": max_attempts must be 1.." +
                                                std::to_string(limits::retry_attempts_max) +
                                                ", got '" + std::string(attempts) + "'");
    }
    max_attempts = n;
  }
  if (!mode_text.empty()) {
    auto m = parse_mode(mode_text);
    if (!m) {
      return Status(Errc::invalid_argument, std::string(source) +
                                                ": retry_mode must be standard, adaptive or "
                                                "legacy, got '" +
                                                std::string(mode_text) + "'");
    }
    mode = *m;
  }
  return Status::Ok();
}

Status Policy::validate() const {
  if (max_attempts == 0 || max_attempts > limits::retry_attempts_max) {
    return Status(Errc::invalid_argument, "max_attempts must be 1.." +
                                              std::to_string(limits::retry_attempts_max) +
                                              ", got " + std::to_string(max_attempts));
  }
  if (max_backoff.count() < 0 || max_backoff.count() > limits::retry_backoff_ms_max) {
    return Status(Errc::invalid_argument, "retry max back-off must be 0.." +
                                              std::to_string(limits::retry_backoff_ms_max) +
                                              " ms, got " + std::to_string(max_backoff.count()));
  }
  if (base_delay.count() < 0 || base_delay > max_backoff) {
    return Status(Errc::invalid_argument, "retry base delay must be 0.." +
                                              std::to_string(max_backoff.count()) + " ms, got " +
                                              std::to_string(base_delay.count()));
  }
  return Status::Ok();
}

namespace {

constexpr std::string_view kThrottleCodes[] = {"SlowDown",
                                               "Throttling",
                                               "ThrottlingException",
                                               "ThrottledException",
                                               "RequestThrottled",
                                               "RequestLimitExceeded",
                                               "TooManyRequestsException",
                                               "BandwidthLimitExceeded",
                                               "ProvisionedThroughputExceededException",
                                               "RequestThrottledException"};
constexpr std::string_view kTransientCodes[] = {"RequestTimeout", "RequestTimeoutException",
                                                "InternalError", "ServiceUnavailable",
                                                "PriorRequestNotComplete"};

bool in(std::string_view s, std::span<const std::string_view> list) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

}  // namespace

std::optional<std::string> classify_status(int http_status, std::string_view s3_code) {
  if (!s3_code.empty() && (in(s3_code, kThrottleCodes) || in(s3_code, kTransientCodes))) {
    return std::string(s3_code);
  }
  switch (http_status) {
    case 429:
    case 500:
    case 502:
    case 503:
    case 504:
      return "http_" + std::to_string(http_status);
    default:
      return std::nullopt;
  }
}

bool is_throttle(std::string_view reason) {
  return in(reason, kThrottleCodes) || reason == "http_429" || reason == "http_503";
}

std::optional<std::chrono::milliseconds> parse_retry_after(
    std::string_view value, std::chrono::system_clock::time_point now) {
  while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  while (!value.empty() && value.back() == ' ') value.remove_suffix(1);
  if (value.empty()) return std::nullopt;
  std::uint64_t s = 0;
  auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), s);
  if (ec == std::errc() && p == value.data() + value.size()) {
    s = std::min<std::uint64_t>(s, limits::retry_backoff_ms_max / 1000 + 1);
    return std::chrono::milliseconds(s * 1000);
  }
  auto when = parse_http_date(value);
  if (!when) return std::nullopt;
  if (*when <= now) return std::chrono::milliseconds(0);
  auto d = std::chrono::duration_cast<std::chrono::milliseconds>(*when - now);
  return std::min(d, std::chrono::milliseconds(limits::retry_backoff_ms_max));
}

std::chrono::milliseconds backoff_delay(const Policy& p, std::uint32_t retry, double u,
                                        std::optional<std::chrono::milliseconds> retry_after) {
  const double cap_ms = static_cast<double>(p.max_backoff.count());
  const double exp = std::ldexp(static_cast<double>(p.base_delay.count()),
                                static_cast<int>(std::min<std::uint32_t>(retry, 40)) - 1);
  const double ceiling = std::min(cap_ms, exp);
  auto d = std::chrono::milliseconds(static_cast<std::int64_t>(std::clamp(u, 0.0, 1.0) * ceiling));
  if (retry_after) d = std::max(d, std::min(*retry_after, p.max_backoff));
  return d;
}

// --- RateLimiter (boto3's adaptive mode: CUBIC on the measured send rate) ----------------------

namespace {
constexpr double kBeta = 0.7;          // multiplicative decrease
constexpr double kScale = 0.4;         // CUBIC scale constant
constexpr double fill_rate_min = 0.5;  // tokens/s
constexpr double capacity_min = 1;
}  // namespace

void RateLimiter::refill(Clock::time_point now) {
  if (last_refill_ == Clock::time_point{}) {
    last_refill_ = now;
    return;
  }
  const double dt = std::chrono::duration<double>(now - last_refill_).count();
  tokens_ = std::min(capacity_, tokens_ + dt * fill_rate_);
  last_refill_ = now;
}

void RateLimiter::acquire() {
  std::unique_lock lk(mu_);
  if (!enabled_) return;
  for (;;) {
    const auto now = Clock::now();
    refill(now);
    if (tokens_ >= 1) {
      tokens_ -= 1;
      return;
    }
    const double wait_s = (1 - tokens_) / std::max(fill_rate_, fill_rate_min);
    lk.unlock();
    std::this_thread::sleep_for(std::chrono::duration<double>(wait_s));
    lk.lock();
  }
}

void RateLimiter::on_answer(bool throttled) {
  std::lock_guard lk(mu_);
  const auto now = Clock::now();
  // Measured rate of answers over half-second windows.
  if (rate_window_start_ == Clock::time_point{}) rate_window_start_ = now;
  ++rate_window_count_;
  const double window_s = std::chrono::duration<double>(now - rate_window_start_).count();
  if (window_s >= 0.5) {
    measured_rate_ = static_cast<double>(rate_window_count_) / window_s;
    rate_window_start_ = now;
    rate_window_count_ = 0;
  }
  double rate;
  if (throttled) {
    const double base = enabled_ ? std::min(measured_rate_, fill_rate_) : measured_rate_;
    w_max_ = std::max(base, fill_rate_min);
    last_throttle_ = now;
    rate = std::max(w_max_ * kBeta, fill_rate_min);
    enabled_ = true;
  } else {
    if (!enabled_) return;
    const double t = std::chrono::duration<double>(now - last_throttle_).count();
    const double k = std::cbrt(w_max_ * (1 - kBeta) / kScale);
    rate = kScale * std::pow(t - k, 3) + w_max_;
    rate = std::min(rate, 2 * std::max(measured_rate_, fill_rate_min));
    rate = std::max(rate, fill_rate_min);
  }
  refill(now);
  fill_rate_ = rate;
  capacity_ = std::max(rate, capacity_min);
  tokens_ = std::min(tokens_, capacity_);
}

double RateLimiter::rate() const {
  std::lock_guard lk(mu_);
  return enabled_ ? fill_rate_ : 0;
}

// --- Retrier
// --------------------------------------------------------------------------------------

Retrier::Retrier(Policy p) : policy_(p), rng_(std::random_device{}()) {}

void Retrier::before_attempt() {
  if (policy_.mode == Mode::adaptive) limiter_.acquire();
}

void Retrier::after_attempt(const std::optional<std::string>& reason) {
  if (policy_.mode == Mode::adaptive) limiter_.on_answer(reason && is_throttle(*reason));
}

std::chrono::milliseconds Retrier::delay(std::uint32_t retry,
                                         std::optional<std::chrono::milliseconds> retry_after) {
  double u;
  {
    std::lock_guard lk(rng_mu_);
    u = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
  }
  return backoff_delay(policy_, retry, u, retry_after);
}

void Retrier::sleep_before(std::uint32_t retry,
                           std::optional<std::chrono::milliseconds> retry_after) {
  auto d = delay(retry, retry_after);
  if (d.count() > 0) std::this_thread::sleep_for(d);
}

std::string attempts_note(std::uint32_t attempts, std::string_view reasons) {
  std::string s =
      " (after " + std::to_string(attempts) + (attempts == 1 ? " attempt" : " attempts");
  if (!reasons.empty()) s += "; retried on: " + std::string(reasons);
  return s + ")";
}

}  // namespace objdirect::retry
