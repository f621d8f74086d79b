#include "transport/libfabric/shm_region.hpp"

#include <pthread.h>
#include <rdma/fabric.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>
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

std::optional<ShmEndpointName> parse_shm_endpoint(std::string_view address) {
  constexpr std::string_view scheme = "fi_shm://";
  constexpr std::string_view prefix = "objdirect-";
  std::string_view a = address.substr(0, address.find('\0'));
  if (!a.starts_with(scheme)) return std::nullopt;
  a.remove_prefix(scheme.size());
  if (!a.starts_with(prefix) || a.size() > 64) return std::nullopt;
  std::string_view rest = a.substr(prefix.size());
  long long p = 0;
  std::size_t i = 0;
  for (; i < rest.size() && rest[i] >= '0' && rest[i] <= '9' && i < 8; ++i)
    p = p * 10 + (rest[i] - '0');
  if (i == 0 || i >= rest.size() || rest[i] != '-' || p <= 0 || p > 4'194'304) return std::nullopt;
  std::string_view hex = rest.substr(i + 1);
  if (hex.empty() || !std::all_of(hex.begin(), hex.end(), [](char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
      })) {
    return std::nullopt;
  }
  return ShmEndpointName{std::string(a), static_cast<pid_t>(p)};
}

bool process_gone(pid_t pid) {
  if (pid <= 0) return false;
  if (::kill(pid, 0) != 0) return errno == ESRCH;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;  // exited between the two looks
  auto paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() &&
         (line[paren + 2] == 'Z' || line[paren + 2] == 'X');
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

const unsigned char* find_region_header(std::string_view region_name, int expected_pid) {
  if (!smr_layout_known()) return nullptr;
  auto maps = find_region_mappings(region_name);
  if (maps.empty()) return nullptr;
  const auto* bytes = reinterpret_cast<const unsigned char*>(maps.front().start);
  int pid = 0;
  std::memcpy(&pid, bytes + smr_region_pid_offset, sizeof(pid));
  if (bytes[0] != smr_region_version_1_17 || pid != expected_pid) return nullptr;
  return bytes;
}

const int* find_region_lock(std::string_view region_name, int expected_pid) {
  const unsigned char* header = find_region_header(region_name, expected_pid);
  return header ? region_lock_word(header) : nullptr;
}

}  // namespace objdirect::transport::libfabric
