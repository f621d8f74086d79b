// libfabric backend of Transport: FI_EP_RDM endpoints with FI_RMA on tcp;ofi_rxm, shm,
// verbs;ofi_rxm and efa. See README.md in this folder for what each provider supports.
//
// Thread safety: as Transport (transport.hpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string_view>

#include "transport/transport.hpp"

namespace objdirect::transport::libfabric {

// provider: "tcp", "shm", "verbs" or "efa" (the part after "libfabric:").
// Errors: invalid_argument (unknown provider), unavailable (fi_getinfo found no matching
// provider or opening it failed, with libfabric's message).
Result<std::unique_ptr<Transport>> create_libfabric_transport(const Config& config,
                                                              std::string_view provider);

// Dead-peer lock recovery on shm (libfabric 1.17 only; docs/RELIABILITY.md section 6): a shm
// transport's watchdog looks every shm_watchdog_period at the provider call in progress; one that
// has run longer than shm_stuck_post against a peer whose process is provably gone is stuck on the
// dead peer's region spinlock, which the watchdog then releases.
inline constexpr std::chrono::milliseconds shm_stuck_post{200};

// tcp: the longest the connect probe of a new peer waits (a peer that neither accepts nor refuses
// our SYN); refused and unreachable peers fail at once. README.md, "Reaching other hosts".
inline constexpr std::chrono::milliseconds tcp_connect_probe_ms_max{500};
inline constexpr std::chrono::milliseconds shm_watchdog_period{100};

// Process-wide counts of that recovery, over every shm transport ever created.
struct ShmLockRecoveryStats {
  std::uint64_t lock_releases = 0;  // dead peers' region locks released (stuck posts freed)
  std::uint64_t left_alone = 0;     // stuck posts to a dead peer whose lock was not touched
                                    // (libfabric other than 1.17, region unreadable or mismatched)
};
ShmLockRecoveryStats shm_lock_recovery_stats();

}  // namespace objdirect::transport::libfabric
