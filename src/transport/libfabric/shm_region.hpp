// What ObjDirect knows of libfabric 1.17's shm region (struct smr_region, a file in /dev/shm
// mapped by every process that talks to its owner), and how to find one in this process's maps.
// Three users: the client's progress skips polling while a peer copies into it under its own
// region lock; the shm watchdog releases the lock of a dead peer (libfabric README,
// docs/RELIABILITY.md section 6); and the initiator leaves FI_DELIVERY_COMPLETE off a small
// write only while its region's cma_cap_peer byte proves the provider copies it at once. The
// layout is private to the provider and changed in 1.18, so every caller must treat "not found"
// / "layout unknown" as "do nothing" (for the small write: keep the flag).
//
// Thread safety: free functions without shared state; safe from any thread.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace objdirect::transport::libfabric {

// libfabric 1.17 (prov/shm/src/smr.h): struct smr_region { uint8_t version; uint8_t resv;
// uint16_t flags; int pid; uint8_t cma_cap_peer; uint8_t cma_cap_self; uint32_t
// max_sar_buf_per_peer; void* base_addr; pthread_spinlock_t lock; ... }.
inline constexpr std::size_t smr_region_pid_offset = 4;
inline constexpr std::size_t smr_region_cma_cap_peer_offset = 8;
inline constexpr std::size_t smr_region_lock_offset = 0x18;
inline constexpr std::size_t smr_region_header_bytes = smr_region_lock_offset + sizeof(int);
// cma_cap_peer's values (1.17's SMR_CMA_CAP_NA / _ON / _OFF): whether process_vm_writev to a
// peer worked when the provider last checked one. The provider sets it per region, and its RMA
// takes the fast path (the initiator copies with CMA) only while its own region's byte is ON.
inline constexpr std::uint8_t smr_cma_cap_na = 0;
inline constexpr std::uint8_t smr_cma_cap_on = 1;
inline constexpr std::uint8_t smr_cma_cap_off = 2;
// Byte 0 of a region created by libfabric 1.17 (read from a live region: 04 00 01 00 <pid>).
inline constexpr std::uint8_t smr_region_version_1_17 = 4;

// True when both the headers this was compiled against and the library loaded at run time are
// libfabric 1.17, the only release whose layout the constants above describe.
bool smr_layout_known();

// The word pthread_spin_unlock leaves, read from a lock initialised by this C library: 1 with
// glibc on x86-64 (its lock decrements the word, so a held lock reads 0 or below), 0 with the
// generic implementation. A lock word holding anything else is held.
int spinlock_unlocked_value();

// Whether the lock word read now is held by someone. A read never takes or alters the lock.
inline bool region_lock_held(const int* word) {
  return __atomic_load_n(word, __ATOMIC_RELAXED) != spinlock_unlocked_value();
}

// An ObjDirect shm endpoint address, "fi_shm://objdirect-<pid>-<hex>" (our fi_setname; maybe
// NUL-terminated): the region's name in /dev/shm and the process that created it.
struct ShmEndpointName {
  std::string region;  // "objdirect-<pid>-<hex>"
  pid_t pid = 0;
};
// nullopt for any other name (another provider's address, a foreign shm name, a pid beyond
// Linux's pid_max, a name over 64 bytes).
std::optional<ShmEndpointName> parse_shm_endpoint(std::string_view address);

// Whether process `pid` can never run again: it does not exist, or it is a zombie. A reused pid
// reads as alive.
bool process_gone(pid_t pid);

struct RegionMapping {
  std::uintptr_t start = 0, end = 0;
  unsigned long long inode = 0;
  bool deleted = false;  // the file was unlinked ("(deleted)" in the maps)
};

// This process's shared, writable mappings of /dev/shm/<region_name> from offset 0, at least
// smr_region_header_bytes long. region_name is the endpoint name without "fi_shm://"; a name
// with '/' or an empty one finds nothing.
std::vector<RegionMapping> find_region_mappings(std::string_view region_name);

// The start of the region (struct smr_region), if region_name is mapped here, the layout is
// known and the region's version byte and pid field hold 1.17's version and expected_pid (a
// check that the offsets really describe this mapping); else nullptr.
const unsigned char* find_region_header(std::string_view region_name, int expected_pid);

// The lock word and the cma_cap_peer byte of a region found by find_region_header.
inline const int* region_lock_word(const unsigned char* header) {
  return reinterpret_cast<const int*>(header + smr_region_lock_offset);
}
inline const std::uint8_t* region_cma_cap_peer(const unsigned char* header) {
  return header + smr_region_cma_cap_peer_offset;
}

// find_region_header's region's lock word; nullptr where that finds nothing.
const int* find_region_lock(std::string_view region_name, int expected_pid);

// Whether a cma_cap_peer byte read now says ON. A read never alters the byte.
inline bool region_cma_on(const std::uint8_t* byte) {
  return __atomic_load_n(byte, __ATOMIC_RELAXED) == smr_cma_cap_on;
}

}  // namespace objdirect::transport::libfabric
