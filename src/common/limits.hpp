// Every bound ObjDirect enforces, in one place. Each is named *_max (or *_min) and each has a test
// that exercises it. Limits that an operator may want to change are also server flags; the values
// here are the defaults.
#pragma once

#include <cstddef>
#include <cstdint>

namespace objdirect::limits {

// --- HTTP control plane -------------------------------------------------------------------------
inline constexpr std::size_t header_bytes_max = 16 * 1024;    // whole request header section
inline constexpr std::size_t connections_max = 8192;          // concurrent HTTP connections
inline constexpr std::uint32_t request_timeout_ms = 300'000;  // one request, header to last byte
inline constexpr std::uint32_t header_timeout_ms = 30'000;    // first byte to end of headers
inline constexpr std::uint32_t idle_timeout_ms = 60'000;      // keep-alive idle between requests
inline constexpr std::size_t xml_body_bytes_max = 2 * 1024 * 1024;  // CompleteMultipartUpload etc.

// --- S3 object model
// ------------------------------------------------------------------------------
inline constexpr std::size_t key_bytes_max = 1024;
inline constexpr std::size_t bucket_name_min = 3;
inline constexpr std::size_t bucket_name_max = 63;
inline constexpr std::uint64_t object_bytes_max = 5ull << 40;  // 5 TiB
inline constexpr std::uint64_t put_bytes_max = 5ull << 30;     // single PutObject: 5 GiB
inline constexpr std::uint64_t part_bytes_min = 5ull << 20;    // all but the last part
inline constexpr std::uint64_t part_bytes_max = 5ull << 30;
inline constexpr std::uint32_t parts_max = 10'000;
inline constexpr std::uint32_t list_keys_max = 1000;
inline constexpr std::uint32_t delete_keys_max = 1000;
inline constexpr std::size_t user_metadata_bytes_max = 2 * 1024;  // x-amz-meta-* total
inline constexpr std::int64_t clock_skew_max_s = 15 * 60;
inline constexpr std::int64_t presign_expires_max_s = 7 * 24 * 3600;

// --- aws-chunked
// ----------------------------------------------------------------------------------
inline constexpr std::size_t chunk_header_bytes_max = 4096;  // "<hex-size>;chunk-signature=...\r\n"
inline constexpr std::size_t trailer_bytes_max = 4096;
// Threads that hash PUT bodies beside the I/O threads (objdirect-server --put-digest-threads).
inline constexpr unsigned put_digest_threads_max = 256;

// --- RDMA data plane
// ------------------------------------------------------------------------------
inline constexpr std::size_t token_bytes_max = 4096;  // encoded x-amz-rdma-token header value
inline constexpr std::size_t token_segments_max = 64;
// A token's nonce is remembered until its expiry (single use, docs/rdma_protocol.md), so the
// replay cache holds at most (token rate) x (token_lifetime_max_s + token_clock_skew_max_s)
// nonces: 120 s lets a token wait out a full admission queue and several retries while keeping
// that window (180 s) short.
inline constexpr std::uint32_t token_lifetime_max_s = 120;

}  // namespace objdirect::limits
