// What ObjDirect knows of libfabric 1.17's shm region (struct smr_region, a file in /dev/shm
// mapped by every process that talks to its owner), and how to find one in this process's maps.
// Only facts checked against this one release are used, and only when the running library is
// that release (see docs/transports.md, "libfabric shm region"). The layout is private to the
// provider and changed in 1.18, so every caller must handle "not found" by doing nothing.
//
// Thread safety: free functions without shared state; safe from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace objdirect::transport::libfabric {

// Offsets in libfabric 1.17's struct smr_region: uint8 version, uint8 resv, uint16 flags, int pid,
// uint8 cma_cap_peer, uint8 cma_cap_self, void* base_addr, pthread_spinlock_t lock.
inline constexpr std::size_t smr_region_pid_offset = 4;
inline constexpr std::size_t smr_region_lock_offset = 0x18;

// True when both the headers this was compiled against and the library loaded at run time are
// libfabric 1.17, the only release whose layout the offsets above describe.
bool smr_layout_known();

// The start of the mapping of /dev/shm/<region_name> in this process (offset 0 of the file,
// "(deleted)" or not), if there is one. region_name is the endpoint name without "fi_shm://".
std::optional<std::uintptr_t> find_mapped_region(std::string_view region_name);

// The region's lock word, if region_name is mapped here, the layout is known and the pid field
// holds expected_pid (a check that the offsets really describe this mapping).
const int* find_region_lock(std::string_view region_name, int expected_pid);

// The value of an unlocked pthread_spinlock_t word in this C library (glibc on x86-64 writes 1
// and takes the lock by decrementing it; its generic version writes 0 and sets 1), read from a
// lock initialised here. A lock word holding anything else is held.
int spinlock_unlocked_value();

// Whether the lock word read now is held by someone (see spinlock_unlocked_value). A read
// never takes or alters the lock.
inline bool region_lock_held(const int* word) {
  return __atomic_load_n(word, __ATOMIC_RELAXED) != spinlock_unlocked_value();
}

}  // namespace objdirect::transport::libfabric
