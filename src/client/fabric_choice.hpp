// Which fabric the client uses against a server: the one place where that is decided
// (docs/client.md, "Choosing a fabric").
//  - what the server offers: x-amz-rdma-fabrics and x-amz-rdma-host-id (token_format.md);
//  - the order `auto` tries fabrics in: same-host fabrics first (only when the server runs on
//    this kernel), then those that move bytes by an RDMA NIC, then software ones; or the
//    caller's own order (ClientConfig::fabric_order);
//  - what failed recently: a fabric that failed against a server is skipped for that server for
//    a bounded time (ClientConfig::fabric_failure_memory_ms), then tried again.
// Whether to use RDMA at all for a request (size, policy) is decided elsewhere (client.cc).
//
// Thread safety: free functions are pure; FabricFailures is thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace objdirect::limits {
// Upper bound of ClientConfig::fabric_failure_memory_ms (one hour).
inline constexpr std::uint32_t client_fabric_failure_memory_ms_max = 3'600'000;
// Most 307 redirects one request may follow (ClientConfig::redirects_max).
inline constexpr std::uint32_t client_redirects_max = 10;
// (server, fabric) failures one process remembers; past it the entry that expires first goes.
inline constexpr std::size_t client_fabric_failures_remembered_max = 1024;
// Fabrics named in ClientConfig::fabric_order.
inline constexpr std::size_t client_fabric_order_entries_max = 16;
}  // namespace objdirect::limits

namespace objdirect::client {

// What the server said about its data plane (GET /?rdma-capabilities, or any reply).
struct ServerFabrics {
  bool known = false;                // it sent x-amz-rdma-fabrics
  std::vector<std::string> offered;  // in its order
  std::string host_id;               // x-amz-rdma-host-id; empty from servers without it
  std::string fabrics_error;         // why x-amz-rdma-fabrics was refused; offered is then empty
  std::string host_id_error;         // why x-amz-rdma-host-id was refused; host_id is then empty
};
// Parses the two headers (either may be absent) with token::parse_fabric_advert and
// token::parse_host_id (docs/token_format.md, "Fabric advertisement"). A malformed
// x-amz-rdma-fabrics offers nothing (known, empty: the client uses HTTP and says why); a
// malformed x-amz-rdma-host-id counts as another kernel (same_host is false).
ServerFabrics parse_server_fabrics(std::optional<std::string_view> fabrics,
                                   std::optional<std::string_view> host_id);

// One fabric this build can open, as the choice needs to know it (from transport::fabric_table
// and transport::uses_nic; client/rdma.hpp fabric_rows()).
struct FabricRow {
  std::string name;
  bool same_host_only = false;  // shared memory: only towards a server on this kernel
  bool nic = false;             // moves bytes by an RDMA NIC on this machine
  int preference = 0;           // order within its kind, lowest first
};

// The default order of `auto`: same-host fabrics, then NIC fabrics, then software fabrics, each
// group by preference (with this machine's table: libfabric:shm, libfabric:verbs, libfabric:efa,
// ucx when it has an RDMA device, libfabric:tcp, ucx otherwise).
std::vector<std::string> default_fabric_order(std::span<const FabricRow> rows);

// Parses ClientConfig::fabric_order: a comma list of names from `rows`, no repeats, at most
// client_fabric_order_entries_max. Empty text: the default order. Error text in `error`.
std::optional<std::vector<std::string>> parse_fabric_order(std::string_view text,
                                                           std::span<const FabricRow> rows,
                                                           std::string& error);

// The fabrics `auto` tries against this server, in order: `order` filtered to what the server
// offers (every name of `order` when it did not say) and, for same_host_only fabrics, to a
// server on this kernel: same_host is true when both host ids are known and equal, or, from a
// server that publishes none, when the endpoint is a loopback address.
std::vector<std::string> auto_candidates(const ServerFabrics& server, bool same_host,
                                         std::span<const std::string> order,
                                         std::span<const FabricRow> rows);

// Whether the server shares this client's kernel (see auto_candidates); never when its host id
// was malformed.
bool same_host(const ServerFabrics& server, const std::string& own_host_id, bool loopback_endpoint);

// Recent failures, per (server, fabric), shared by every Client of the process.
class FabricFailures {
 public:
  using Clock = std::chrono::steady_clock;
  static FabricFailures& process();

  // `fabric` failed against `server` ("host:port"): skip it there until now + hold.
  void record(const std::string& server, const std::string& fabric, std::string reason,
              std::chrono::milliseconds hold, Clock::time_point now = Clock::now());
  // It worked again: forget the failure.
  void clear(const std::string& server, const std::string& fabric);
  // Why `fabric` is skipped against `server` now ("libfabric:tcp failed 0.4 s ago: ...; next
  // try in 29.6 s"), or nullopt when it may be tried.
  std::optional<std::string> skipped(const std::string& server, const std::string& fabric,
                                     Clock::time_point now = Clock::now()) const;
  std::size_t size() const;
  void reset();  // tests

 private:
  struct Entry {
    Clock::time_point failed_at;
    Clock::time_point until;
    std::string reason;
  };
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, Entry> entries_;
};

}  // namespace objdirect::client
