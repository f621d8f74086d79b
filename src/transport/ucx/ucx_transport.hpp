// UCX backend of Transport: one ucp context (UCP_FEATURE_RMA) and worker per transport;
// ucp_mem_map + ucp_rkey_pack to register, ucp_put_nbx / ucp_get_nbx + ucp_ep_flush_nbx to move
// data. UCX picks its transports (sm, tcp, rc, dc) and honours UCX_TLS. See README.md here.
//
// Thread safety: as Transport (transport.hpp).
#pragma once

#include <memory>

#include "transport/transport.hpp"

namespace objdirect::transport::ucx {

// Errors: unavailable (ucp_init / ucp_worker_create failed, with UCX's message).
Result<std::unique_ptr<Transport>> create_ucx_transport(const Config& config);

}  // namespace objdirect::transport::ucx
