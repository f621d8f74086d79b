// OBJDIRECT_ASSERT(cond, "why"): a check for programmer errors that stays on in every build
// (Release included), unlike assert(). When `cond` is false it prints the condition, the reason
// and the source location to stderr and aborts: a broken invariant must stop the process, not
// corrupt data or answer a client with something wrong. Use it for what no input can cause (a
// caller breaking a contract, an internal table out of step); bad input gets a Status instead.
// Conditions are evaluated exactly once and should be cheap.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace objdirect::detail {

[[noreturn]] inline void assert_failed(const char* cond, const char* why, const char* file,
                                       int line) noexcept {
  std::fprintf(stderr, "%s:%d: OBJDIRECT_ASSERT(%s) failed: %s\n", file, line, cond, why);
  std::fflush(stderr);
  std::abort();
}

}  // namespace objdirect::detail

#define OBJDIRECT_ASSERT(cond, why)                                       \
  do {                                                                    \
    if (!(cond)) [[unlikely]] {                                           \
      ::objdirect::detail::assert_failed(#cond, why, __FILE__, __LINE__); \
    }                                                                     \
  } while (false)
