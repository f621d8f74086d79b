// UCX backend of Transport: one ucp context (UCP_FEATURE_RMA) and worker per transport;
// ucp_mem_map + ucp_rkey_pack to register, ucp_put_nbx / ucp_get_nbx + ucp_ep_flush_nbx to move
// data. UCX picks its transports (sm, tcp, rc, dc) and honours UCX_TLS. See README.md here.
//
// Thread safety: as Transport (transport.hpp).
#pragma once

#include <memory>
#include <string>

#include "transport/transport.hpp"

namespace objdirect::transport::ucx {

// Errors: unavailable (ucp_init / ucp_worker_create failed, with UCX's message).
Result<std::unique_ptr<Transport>> create_ucx_transport(const Config& config);

// Whether UCX would move bytes by an RDMA NIC here (rc/dc zero-copy RMA) rather than emulate RMA
// over tcp or sm: an RDMA device in /sys/class/infiniband, and UCX_TLS unset or naming one of
// all, rc, rc_x, rc_v, rc_verbs, rc_mlx5, dc, dc_x, dc_mlx5, ib. Opens nothing
// (transport::uses_nic).
bool ucx_uses_nic();
// The decision itself, on a given device directory and UCX_TLS value (null: unset); for tests.
bool ucx_uses_nic(const std::string& infiniband_class_dir, const char* ucx_tls);

}  // namespace objdirect::transport::ucx
