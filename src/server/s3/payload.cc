// Streaming request bodies into the store, with every integrity check S3 defines.
#include <boost/asio/post.hpp>
#include <charconv>
#include <memory>

#include "common/checksum.hpp"
#include "common/scratch_buffer.hpp"
#include "s3/chunked.hpp"
#include "server/s3/s3_internal.hpp"

namespace objdirect::s3 {

namespace {

std::optional<std::uint64_t> parse_u64(std::string_view s) {
  std::uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

bool is_hex_sha256(std::string_view s) {
  if (s.size() != 64) return false;
  for (char ch : s) {
    if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) return false;
  }
  return true;
}

Status checksum_mismatch(ChecksumAlgo algo) {
  return Status(Errc::bad_digest, "The " + std::string(checksum_name(algo)) +
                                      " you specified did not match the calculated checksum.");
}

}  // namespace

Result<DeclaredChecksums> declared_checksums(const Ctx& c) {
  DeclaredChecksums d;
  for (ChecksumAlgo algo : kAllChecksumAlgos) {
    if (auto v = c.header(checksum_header(algo))) {
      auto raw = base64_decode(*v);
      if (!raw) {
        return Status(Errc::invalid_request,
                      "Value for " + checksum_header(algo) + " header is invalid.");
      }
      d.header_values.emplace_back(algo, *v);
    }
  }
  if (d.header_values.size() > 1) {
    return Status(
        Errc::invalid_request,
        "Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed.");
  }
  if (auto t = c.header("x-amz-trailer")) {
    std::string name = *t;
    while (!name.empty() && name.back() == ' ') name.pop_back();
    constexpr std::string_view kPrefix = "x-amz-checksum-";
    if (name.starts_with(kPrefix)) {
      auto algo = checksum_from_name(std::string_view(name).substr(kPrefix.size()));
      if (!algo) return Status(Errc::invalid_request, "Unsupported x-amz-trailer: " + *t);
      d.trailer_algo = *algo;
    } else if (!name.empty()) {
      return Status(Errc::invalid_request, "Unsupported x-amz-trailer: " + *t);
    }
  }
  for (const char* h : {"x-amz-sdk-checksum-algorithm", "x-amz-checksum-algorithm"}) {
    if (auto a = c.header(h)) {
      auto algo = checksum_from_name(*a);
      if (!algo)
        return Status(Errc::invalid_request, "Checksum algorithm '" + *a + "' is not supported");
      d.requested_algo = *algo;
    }
  }
  return d;
}

PayloadDigest::PayloadDigest(const DeclaredChecksums& declared,
                             std::optional<ChecksumAlgo> extra_algo, bool want_sha256) {
  auto want = [this](ChecksumAlgo a) {
    for (auto& s : sums_) {
      if (s.algo() == a) return;
    }
    sums_.emplace_back(a);
  };
  for (const auto& [algo, v] : declared.header_values) want(algo);
  if (declared.trailer_algo) want(*declared.trailer_algo);
  if (declared.requested_algo) want(*declared.requested_algo);
  if (extra_algo) want(*extra_algo);
  if (want_sha256) sha256_.emplace();
}

void PayloadDigest::update(std::span<const std::byte> data) {
  md5_.update(data.data(), data.size());
  if (sha256_) sha256_->update(data.data(), data.size());
  for (auto& s : sums_) s.update(data.data(), data.size());
}

Result<PayloadResult> PayloadDigest::finish(
    std::uint64_t size, std::string_view sha256_hex, const std::optional<std::string>& content_md5,
    const std::vector<std::pair<ChecksumAlgo, std::string>>& expected) {
  PayloadResult out;
  out.size = size;
  out.md5_raw = md5_.raw();
  out.md5_hex = hex_encode(out.md5_raw);
  if (sha256_ && !sha256_hex.empty() && sha256_->hex() != sha256_hex) {
    return Status(Errc::xamz_content_sha256_mismatch,
                  "The provided 'x-amz-content-sha256' header does not match what was computed.");
  }
  if (content_md5 && base64_encode(out.md5_raw) != *content_md5) {
    return Status(Errc::bad_digest,
                  "The Content-MD5 you specified did not match what we received.");
  }
  for (auto& s : sums_) {
    std::string raw = s.digest_raw();
    std::string b64 = base64_encode(raw);
    for (const auto& [algo, value] : expected) {
      if (algo == s.algo() && value != b64) return checksum_mismatch(algo);
    }
    out.checksums[std::string(checksum_name(s.algo()))] = b64;
    out.checksums_raw[std::string(checksum_name(s.algo()))] = std::move(raw);
  }
  return out;
}

void OverlappedDigest::start(std::span<const std::byte> data) {
  wait();
  if (!pool_) {
    digest_.update(data);
    return;
  }
  {
    std::lock_guard lock(mu_);
    busy_ = true;
  }
  boost::asio::post(*pool_, [this, data] {
    digest_.update(data);
    // Notified under the lock: once wait() sees busy_ == false this job touches nothing more.
    std::lock_guard lock(mu_);
    busy_ = false;
    cv_.notify_all();
  });
}

void OverlappedDigest::wait() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [this] { return !busy_; });
}

Task<Result<PayloadResult>> receive_payload(Ctx& c, std::size_t io_buffer_bytes,
                                            storage::BlobWriter& dst, std::uint64_t max_bytes,
                                            std::optional<ChecksumAlgo> extra_algo,
                                            boost::asio::thread_pool* digest_pool) {
  const std::string& sha_mode = c.auth.payload_hash;
  const bool streaming = sha_mode.starts_with("STREAMING-");
  const bool verify_sha = is_hex_sha256(sha_mode);
  if (!streaming && !verify_sha && sha_mode != "UNSIGNED-PAYLOAD" && !sha_mode.empty()) {
    co_return Status(Errc::invalid_argument, "Unsupported x-amz-content-sha256 value: " + sha_mode);
  }

  // Declared size: x-amz-decoded-content-length for aws-chunked, else Content-Length (absent with
  // Transfer-Encoding: chunked, which we accept).
  std::optional<std::uint64_t> declared;
  if (streaming) {
    auto dl = c.header("x-amz-decoded-content-length");
    if (!dl || !(declared = parse_u64(*dl))) {
      co_return Status(Errc::missing_content_length,
                       "x-amz-decoded-content-length is required with " + sha_mode);
    }
  } else if (auto cl = c.header("content-length")) {
    declared = parse_u64(*cl);
    if (!declared) co_return Status(Errc::invalid_argument, "Invalid Content-Length");
  } else if (!c.chunked()) {
    co_return Status(Errc::missing_content_length,
                     "You must provide the Content-Length HTTP header.");
  }
  if (declared && *declared > max_bytes) {
    co_return Status(Errc::entity_too_large,
                     "Your proposed upload exceeds the maximum allowed size of " +
                         std::to_string(max_bytes) + " bytes");
  }

  auto declared_sums = declared_checksums(c);
  if (!declared_sums.ok()) co_return declared_sums.status();
  std::optional<std::string> content_md5 = c.header("content-md5");
  if (content_md5) {
    auto raw = base64_decode(*content_md5);
    if (!raw || raw->size() != 16) {
      co_return Status(Errc::invalid_digest, "The Content-MD5 you specified is not valid.");
    }
  }
  PayloadDigest digest(*declared_sums, extra_algo, verify_sha);
  std::uint64_t received = 0;

  std::unique_ptr<AwsChunkedDecoder> decoder;
  if (streaming) {
    if (sha_mode != "STREAMING-AWS4-HMAC-SHA256-PAYLOAD" &&
        sha_mode != "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER" &&
        sha_mode != "STREAMING-UNSIGNED-PAYLOAD-TRAILER") {
      co_return Status(Errc::not_implemented, "Unsupported streaming mode " + sha_mode);
    }
    AwsChunkedDecoder::Options o;
    o.signed_chunks = sha_mode.starts_with("STREAMING-AWS4-HMAC-SHA256-PAYLOAD");
    o.trailer = sha_mode.ends_with("-TRAILER");
    o.signing_key = c.auth.signing_key;
    o.seed_signature = c.auth.seed_signature;
    o.amz_date = c.auth.amz_date;
    o.scope = c.auth.scope;
    decoder = std::make_unique<AwsChunkedDecoder>(std::move(o));
  }

  auto sink = [&](std::span<const std::byte> data) -> Status {
    received += data.size();
    if (received > max_bytes || (declared && received > *declared)) {
      return Status(Errc::invalid_request, "The request body is longer than its declared length");
    }
    digest.update(data);
    return dst.append(data);
  };

  if (decoder || !digest_pool) {
    ScratchBuffer buf(io_buffer_bytes);
    for (;;) {
      auto n = co_await c.ex.read_body(buf.span());
      if (!n.ok()) co_return n.status();
      if (*n == 0) break;
      std::span<const std::byte> chunk(buf.data(), *n);
      Status st = decoder ? decoder->feed(chunk, sink) : sink(chunk);
      if (!st.ok()) co_return st;
    }
  } else {
    // Two buffers: chunk i is hashed on the pool while it is written here and chunk i+1 is
    // received into the other buffer. `overlap` is declared after the buffers and the digest,
    // so it is destroyed first and waits for its job on every return path.
    ScratchBuffer bufs[2] = {ScratchBuffer(io_buffer_bytes), ScratchBuffer(io_buffer_bytes)};
    OverlappedDigest overlap(digest, digest_pool);
    for (int cur = 0;; cur ^= 1) {
      auto n = co_await c.ex.read_body(bufs[cur].span());
      if (!n.ok()) co_return n.status();
      if (*n == 0) break;
      std::span<const std::byte> chunk(bufs[cur].data(), *n);
      received += chunk.size();
      if (received > max_bytes || (declared && received > *declared)) {
        co_return Status(Errc::invalid_request,
                         "The request body is longer than its declared length");
      }
      overlap.start(chunk);  // waits for chunk i-1's hash: bufs[cur ^ 1] is free after this
      if (Status st = dst.append(chunk); !st.ok()) co_return st;
    }
    overlap.wait();
  }
  if (decoder && !decoder->done()) {
    co_return Status(Errc::incomplete_body, "The aws-chunked body ended before its final chunk");
  }
  if (declared && received != *declared) {
    co_return Status(Errc::incomplete_body,
                     "You did not provide the number of bytes specified by the Content-Length "
                     "HTTP header (" +
                         std::to_string(received) + " of " + std::to_string(*declared) + ")");
  }

  std::vector<std::pair<ChecksumAlgo, std::string>> expected = declared_sums->header_values;
  if (declared_sums->trailer_algo) {
    std::string name = checksum_header(*declared_sums->trailer_algo);
    bool found = false;
    if (decoder) {
      for (const auto& [k, v] : decoder->trailers()) {
        if (k == name) {
          expected.emplace_back(*declared_sums->trailer_algo, v);
          found = true;
        }
      }
    }
    if (!found) {
      co_return Status(Errc::invalid_request,
                       "The trailer " + name + " declared in x-amz-trailer is missing");
    }
  }
  co_return digest.finish(received, verify_sha ? std::string_view(sha_mode) : std::string_view(),
                          content_md5, expected);
}

}  // namespace objdirect::s3
