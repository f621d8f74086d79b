#include "transport/libfabric/shm_region.hpp"

#include <pthread.h>
#include <rdma/fabric.h>

#include <cstdio>
#include <cstring>
#include <fstream>

namespace objdirect::transport::libfabric {

static_assert(sizeof(pthread_spinlock_t) == sizeof(int), "a spinlock is one int here");

bool smr_layout_known() {
#if FI_MAJOR_VERSION == 1 && FI_MINOR_VERSION == 17
  return fi_version() == FI_VERSION(1, 17);
#else
  return false;
#endif
}

int spinlock_unlocked_value() {
  static const int value = [] {
    pthread_spinlock_t lock;
    ::pthread_spin_init(&lock, PTHREAD_PROCESS_SHARED);
    ::pthread_spin_lock(&lock);
    ::pthread_spin_unlock(&lock);
    const int v = lock;  // pthread_spinlock_t is a volatile int in glibc
    ::pthread_spin_destroy(&lock);
    return v;
  }();
  return value;
}

std::vector<RegionMapping> find_region_mappings(std::string_view region_name) {
  std::vector<RegionMapping> out;
  if (region_name.empty() || region_name.find('/') != std::string_view::npos) return out;
  std::ifstream maps("/proc/self/maps");
  const std::string path = "/dev/shm/" + std::string(region_name);
  std::string line;
  while (std::getline(maps, line)) {
    unsigned long start = 0, end = 0, off = 0;
    unsigned long long inode = 0;
    char perms[8] = {};
    int pos = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx %7s %lx %*s %llu %n", &start, &end, perms, &off, &inode,
                    &pos) != 5 ||
        pos <= 0) {
      continue;
    }
    std::string_view name(line.c_str() + pos);
    const bool deleted = name == path + " (deleted)";
    if (!deleted && name != path) continue;
    if (off != 0 || std::strncmp(perms, "rw", 2) != 0 || perms[3] != 's' ||
        end - start < smr_region_header_bytes) {
      continue;
    }
    out.push_back(RegionMapping{start, end, inode, deleted});
  }
  return out;
}

const int* find_region_lock(std::string_view region_name, int expected_pid) {
  if (!smr_layout_known()) return nullptr;
  auto maps = find_region_mappings(region_name);
  if (maps.empty()) return nullptr;
  const auto* bytes = reinterpret_cast<const unsigned char*>(maps.front().start);
  int pid = 0;
  std::memcpy(&pid, bytes + smr_region_pid_offset, sizeof(pid));
  if (bytes[0] != smr_region_version_1_17 || pid != expected_pid) return nullptr;
  return reinterpret_cast<const int*>(bytes + smr_region_lock_offset);
}

}  // namespace objdirect::transport::libfabric
