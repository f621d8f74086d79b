// Streaming decoder of "Content-Encoding: aws-chunked" request bodies: the SigV4 streaming upload
// formats STREAMING-AWS4-HMAC-SHA256-PAYLOAD, STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER and
// STREAMING-UNSIGNED-PAYLOAD-TRAILER (the 2025 SDK default).
//
// Wire format (every line ends in CRLF):
//   chunk      = hex-size [";chunk-signature=" 64hex] *(";" ext) CRLF data CRLF
//   last-chunk = "0" [";chunk-signature=" 64hex] CRLF
//   trailers   = *(name ":" value CRLF) ["x-amz-trailer-signature:" 64hex CRLF] CRLF
// Signed chunks chain: signature(n) = HMAC(signing key, chunk_string_to_sign(prev, sha256(data))),
// starting from the request's seed signature; the trailer signature continues the chain over the
// trailer lines as "name:value\n".
//
// Tolerated variants (seen from real clients): a blank line between the last chunk and the
// trailers, and a body that ends without the final blank line (done() is already true; the blank
// line, if it comes, is consumed).
//
// Security: chunk data is handed to the sink as it arrives, before that chunk's signature can be
// checked (the signature covers the whole chunk). A caller must treat everything the sink received
// as provisional until the body is fully fed and done() is true.
//
// Thread safety: thread-compatible (one decoder per request).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/checksum.hpp"
#include "common/limits.hpp"
#include "common/status.hpp"

namespace objdirect::s3 {

class AwsChunkedDecoder {
 public:
  struct Options {
    bool signed_chunks = false;  // STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER]: verify chunks
    bool trailer = false;        // *-TRAILER modes: at least one trailer header must follow
    // From sigv4::AuthContext, when signed_chunks.
    std::string signing_key, seed_signature, amz_date, scope;
  };

  explicit AwsChunkedDecoder(Options options);

  using Sink = std::function<Status(std::span<const std::byte>)>;

  // Feeds the next raw body bytes (any split, down to single bytes). Decoded payload goes to `sink`
  // as sub-spans of `in` (no copy). A sink error stops decoding and is returned as is.
  // Errors (sticky: every later call returns the same status):
  //  - invalid_request "malformed chunk ...": bad size line, missing CRLF after data, a chunk
  //    header longer than limits::chunk_header_bytes_max, a trailer section longer than
  //    limits::trailer_bytes_max, a malformed or unexpected trailer, bytes after the end.
  //  - signature_does_not_match "... chunk signature ...": missing or wrong chunk-signature or
  //    x-amz-trailer-signature in signed modes.
  //  - incomplete_body: only from finish().
  Status feed(std::span<const std::byte> in, const Sink& sink);

  // True when the input so far is a complete body: the final 0-size chunk was consumed (and
  // verified) and, in trailer modes, at least one trailer (and, when signed, a verified
  // x-amz-trailer-signature) followed.
  bool done() const;

  // Call at the end of the body: OK if done(), else incomplete_body (or the sticky error).
  Status finish() const;

  // Payload bytes handed to the sink so far.
  std::uint64_t decoded_bytes() const { return decoded_bytes_; }

  // Trailer headers received so far, lower-case names, trimmed values, in order
  // (x-amz-trailer-signature is verified and not listed).
  const std::vector<std::pair<std::string, std::string>>& trailers() const { return trailers_; }

 private:
  enum class State : std::uint8_t { chunk_header, chunk_data, chunk_crlf, trailer, done };

  Status fail(Status s);
  Status on_chunk_header(std::string_view line);
  Status on_chunk_end();
  Status on_trailer_line(std::string_view line);
  bool verify_chain(std::string_view string_to_sign, std::string_view given);

  Options opt_;
  State state_ = State::chunk_header;
  Status error_;
  std::string line_;              // partial header / trailer line
  std::uint64_t chunk_left_ = 0;  // data bytes left in the current chunk
  std::uint8_t crlf_seen_ = 0;    // bytes of the CRLF after chunk data seen
  bool final_chunk_ = false;
  std::string prev_signature_;   // chain state (hex)
  std::string chunk_signature_;  // signature announced for the current chunk (hex)
  Sha256 chunk_sha_;
  std::uint64_t decoded_bytes_ = 0;
  std::size_t trailer_bytes_ = 0;
  bool skipped_blank_ = false;
  bool trailer_signature_ok_ = false;
  std::string canonical_trailers_;
  std::vector<std::pair<std::string, std::string>> trailers_;
};

}  // namespace objdirect::s3
