#include "transport/libfabric/shm_region.hpp"

#include <pthread.h>
#include <rdma/fabric.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>

namespace objdirect::transport::libfabric {

bool smr_layout_known() {
  static_assert(FI_MAJOR_VERSION >= 1);
#if FI_MAJOR_VERSION == 1 && FI_MINOR_VERSION == 17
  const std::uint32_t v = fi_version();
  return FI_MAJOR(v) == 1 && FI_MINOR(v) == 17;
#else
  return false;
#endif
}

std::optional<std::uintptr_t> find_mapped_region(std::string_view region_name) {
  if (region_name.empty() || region_name.find('/') != std::string_view::npos) return std::nullopt;
  std::FILE* maps = std::fopen("/proc/self/maps", "re");
  if (maps == nullptr) return std::nullopt;
  const std::string want = "/dev/shm/" + std::string(region_name);
  std::optional<std::uintptr_t> found;
  char line[4096];
  while (std::fgets(line, sizeof(line), maps) != nullptr) {
    std::uintptr_t start = 0, end = 0;
    std::uint64_t offset = 0;
    int path_at = 0;
    if (std::sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %*s %" SCNx64 " %*s %*s %n", &start, &end,
                    &offset, &path_at) < 3 ||
        path_at == 0) {
      continue;
    }
    std::string_view path(line + path_at);
    while (!path.empty() && (path.back() == '\n' || path.back() == ' ')) path.remove_suffix(1);
    if (path.ends_with(" (deleted)")) path.remove_suffix(std::strlen(" (deleted)"));
    if (offset == 0 && path == want && end - start > smr_region_lock_offset + sizeof(int)) {
      found = start;
      break;
    }
  }
  std::fclose(maps);
  return found;
}

int spinlock_unlocked_value() {
  static const int value = [] {
    pthread_spinlock_t lock;
    ::pthread_spin_init(&lock, PTHREAD_PROCESS_SHARED);
    static_assert(sizeof(lock) == sizeof(int));
    const int v = lock;  // pthread_spinlock_t is a volatile int in glibc
    ::pthread_spin_destroy(&lock);
    return v;
  }();
  return value;
}

const int* find_region_lock(std::string_view region_name, int expected_pid) {
  if (!smr_layout_known()) return nullptr;
  auto base = find_mapped_region(region_name);
  if (!base) return nullptr;
  const auto* bytes = reinterpret_cast<const unsigned char*>(*base);
  int pid = 0;
  std::memcpy(&pid, bytes + smr_region_pid_offset, sizeof(pid));
  if (pid != expected_pid) return nullptr;
  return reinterpret_cast<const int*>(bytes + smr_region_lock_offset);
}

}  // namespace objdirect::transport::libfabric
