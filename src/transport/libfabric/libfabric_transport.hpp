// libfabric backend of Transport: FI_EP_RDM endpoints with FI_RMA on tcp;ofi_rxm, shm,
// verbs;ofi_rxm and efa. See README.md in this folder for what each provider supports.
//
// Thread safety: as Transport (transport.hpp).
#pragma once

#include <memory>
#include <string_view>

#include "transport/transport.hpp"

namespace objdirect::transport::libfabric {

// provider: "tcp", "shm", "verbs" or "efa" (the part after "libfabric:").
// Errors: invalid_argument (unknown provider), unavailable (fi_getinfo found no matching
// provider or opening it failed, with libfabric's message).
Result<std::unique_ptr<Transport>> create_libfabric_transport(const Config& config,
                                                              std::string_view provider);

}  // namespace objdirect::transport::libfabric
