// When the RDMA engine's reaper next looks at its retired staging buffers.
//
// A retired set stays retired at least `min_age` (RdmaOptions::reap_interval) from the failure.
// The reaper looks when the youngest set comes of age rather than on a fixed beat, so a set is
// freed min_age after its failure, not up to twice that. A set of age that a pass could not
// declare safe is looked at again within reap_recheck: Transport::op_settled() never blocks, so
// its "no" also means "the transport's lock was busy" (its progress thread polling, preempted on
// a loaded host), and one such answer must not cost a whole min_age (docs/RELIABILITY.md,
// "Retired buffers").
//
// Thread safety: pure functions.
#pragma once

#include <algorithm>
#include <chrono>
#include <span>

#include "common/assert.hpp"

namespace objdirect::rdma {

using ReapClock = std::chrono::steady_clock;

// The longest a retired set of age that was not known safe waits for its next look.
inline constexpr std::chrono::milliseconds reap_recheck{100};

// The reaper's next look after a pass at `now`. `young_since`: when each set still younger than
// `min_age` was retired. `unsafe_of_age`: the pass found a set of age not (yet) safe to free.
// With nothing retired, the next look is one min_age away (a set retired meanwhile is young
// then, and is looked at again when it comes of age).
inline ReapClock::time_point next_reap(ReapClock::time_point now,
                                       std::span<const ReapClock::time_point> young_since,
                                       bool unsafe_of_age, std::chrono::milliseconds min_age) {
  OBJDIRECT_ASSERT(min_age.count() > 0, "the reap interval must be positive");
  ReapClock::time_point next = now + min_age;
  for (const auto since : young_since) next = std::min(next, since + min_age);
  if (unsafe_of_age) next = std::min(next, now + std::min(min_age, reap_recheck));
  // A set that came of age between the pass and now is due at once, never in the past.
  return std::max(next, now);
}

}  // namespace objdirect::rdma
