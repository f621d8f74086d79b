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

// --- S3 object model -----------------------------------------------------------------------------
inline constexpr std::size_t key_bytes_max = 1024;
inline constexpr std::size_t bucket_name_min = 3;
inline constexpr std::size_t bucket_name_max = 63;
inline constexpr std::uint64_t object_bytes_max = 5ull << 40;  // 5 TiB
inline constexpr std::uint64_t put_bytes_max = 5ull << 30;     // single PutObject: 5 GiB
inline constexpr std::uint64_t part_bytes_min = 5ull << 20;    // all but the last part
inline constexpr std::uint64_t part_bytes_max = 5ull << 30;
inline constexpr std::uint32_t parts_max = 10'000;
inline constexpr std::uint32_t list_keys_max = 1000;
inline constexpr std::uint32_t list_parts_max = 1000;  // GetObjectAttributes' MaxParts ceiling
inline constexpr std::uint32_t delete_keys_max = 1000;
// Versions (delete markers included) one key may hold in a versioned bucket of the local
// backend, which keeps them in one record (docs/versioning.md); a write past it gets 503
// SlowDown, as AWS throttles keys with very many versions.
inline constexpr std::uint32_t versions_per_key_max = 10'000;
inline constexpr std::size_t user_metadata_bytes_max = 2 * 1024;  // x-amz-meta-* total
// Tags (x-amz-tagging, PutObjectTagging, PutBucketTagging), as AWS bounds them; lengths count
// Unicode code points.
inline constexpr std::size_t object_tags_max = 10;
inline constexpr std::size_t bucket_tags_max = 50;
inline constexpr std::size_t tag_key_chars_max = 128;
inline constexpr std::size_t tag_value_chars_max = 256;
// Bucket CORS (PutBucketCors), as AWS bounds it.
inline constexpr std::size_t cors_rules_max = 100;
inline constexpr std::size_t cors_body_bytes_max = 64 * 1024;
inline constexpr std::size_t cors_rule_id_bytes_max = 255;
// Bucket policies (PutBucketPolicy), as AWS bounds them.
inline constexpr std::size_t bucket_policy_bytes_max = 20 * 1024;
inline constexpr std::size_t policy_statements_max = 100;
// Bucket lifecycle (PutBucketLifecycleConfiguration), as AWS bounds it.
inline constexpr std::size_t lifecycle_rules_max = 1000;
inline constexpr std::int64_t clock_skew_max_s = 15 * 60;
inline constexpr std::int64_t presign_expires_max_s = 7 * 24 * 3600;

// --- aws-chunked
// ----------------------------------------------------------------------------------
inline constexpr std::size_t chunk_header_bytes_max = 4096;  // "<hex-size>;chunk-signature=...\r\n"
inline constexpr std::size_t trailer_bytes_max = 4096;
// Threads that hash PUT bodies beside the I/O threads (objdirect-server --put-digest-threads).
inline constexpr unsigned put_digest_threads_max = 256;
// RDMA transfers of one chunk run on I/O threads at once (objdirect-server
// --rdma-inline-transfers-max; also at most half of --threads).
inline constexpr unsigned rdma_inline_transfers_max = 256;

// --- RDMA data plane -----------------------------------------------------------------------------
inline constexpr std::size_t token_bytes_max = 4096;  // encoded x-amz-rdma-token header value
inline constexpr std::size_t token_segments_max = 64;
// A token's nonce is remembered until its expiry (single use, docs/rdma_protocol.md), so the
// replay cache holds at most (token rate) x (token_lifetime_max_s + token_clock_skew_max_s)
// nonces: 120 s lets a token wait out a full admission queue and several retries while keeping
// that window (180 s) short.
inline constexpr std::uint32_t token_lifetime_max_s = 120;

// --- How the limits relate ----------------------------------------------------------------------
// The code relies on these; a change to one limit that breaks a relation fails the build here.

// A multipart part may be as large as a part is allowed to be (the planner raises a part to
// part_bytes_min, then clamps it to part_bytes_max: with min > max the clamp would undercut the
// floor). Every part is a body the server receives like a PutObject (multipart_ops.cc bounds it
// by part_bytes_max, object_ops.cc a PUT by put_bytes_max), and a single PUT is an object.
static_assert(part_bytes_min <= part_bytes_max);
static_assert(part_bytes_max <= put_bytes_max);
static_assert(put_bytes_max <= object_bytes_max);
// Every object up to object_bytes_max can be uploaded in parts_max parts of at most
// part_bytes_max: client::plan_upload clamps the part size to part_bytes_max after raising it to
// ceil(size / parts_max), so it never needs more than parts_max parts.
static_assert(static_cast<std::uint64_t>(parts_max) * part_bytes_max >= object_bytes_max);
// GetObjectAttributes pages through at most parts_max parts; a page larger than all parts
// would be meaningless (attributes_ops.cc clamps MaxParts to list_parts_max).
static_assert(list_parts_max <= parts_max);
// A CompleteMultipartUpload body naming parts_max parts, each
// <Part><PartNumber>10000</PartNumber><ETag>"<32 hex>"</ETag></Part> plus room for one
// <ChecksumSHA256> (44 base64 characters) per part, fits in xml_body_bytes_max: the largest
// upload S3 allows can be completed.
static_assert(static_cast<std::size_t>(parts_max) *
                  (sizeof("<Part><PartNumber>10000</PartNumber><ETag>\"\"</ETag></Part>") - 1 + 32 +
                   sizeof("<ChecksumSHA256></ChecksumSHA256>") - 1 + 44) <=
              xml_body_bytes_max);
// Bounds that arrive in request headers must fit in the header section that carries them:
// an x-amz-rdma-token of token_bytes_max, and x-amz-meta-* of user_metadata_bytes_max.
static_assert(token_bytes_max < header_bytes_max);
static_assert(user_metadata_bytes_max < header_bytes_max);
// A bucket name's bounds are ordered (s3/names.cc checks min <= length <= max).
static_assert(bucket_name_min <= bucket_name_max);

}  // namespace objdirect::limits
