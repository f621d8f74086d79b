// The client built without src/transport: no fabric ever opens, every transfer uses HTTP.
#include "client/rdma.hpp"

namespace objdirect::client {

bool fabrics_built_in() noexcept {
  return false;
}

std::vector<FabricRow> fabric_rows() {
  return {};
}

std::string own_host_id() {
  return {};
}

Result<std::unique_ptr<Fabric>> open_fabric(std::string_view name, const FabricOptions&) {
  return Status(Errc::unavailable,
                "fabric " + std::string(name) + " unavailable: built without the RDMA transport");
}

}  // namespace objdirect::client
