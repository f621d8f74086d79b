#include "s3/chunked.hpp"

#include <algorithm>
#include <cstring>

#include "auth/sigv4.hpp"

namespace objdirect::s3 {

namespace {

Status malformed(std::string what) {
  return Status(Errc::invalid_request, "malformed chunk: " + std::move(what));
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool is_hex64(std::string_view s) {
  return s.size() == 64 &&
         std::all_of(s.begin(), s.end(), [](char c) { return hex_value(c) >= 0; });
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// RFC 9110 token characters, for trailer field names.
bool is_token(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              std::strchr("!#$%&'*+-.^_`|~", c) != nullptr;
    if (!ok || c == '\0') return false;
  }
  return true;
}

}  // namespace

AwsChunkedDecoder::AwsChunkedDecoder(Options options)
    : opt_(std::move(options)), prev_signature_(opt_.seed_signature) {}

Status AwsChunkedDecoder::fail(Status s) {
  error_ = s;
  return s;
}

bool AwsChunkedDecoder::verify_chain(std::string_view string_to_sign, std::string_view given) {
  std::string expected = sigv4::signature_hex(opt_.signing_key, string_to_sign);
  if (!constant_time_equal(expected, lower(given))) return false;
  prev_signature_ = std::move(expected);
  return true;
}

Status AwsChunkedDecoder::on_chunk_header(std::string_view line) {
  std::size_t i = 0;
  std::uint64_t size = 0;
  while (i < line.size() && hex_value(line[i]) >= 0) {
    if (i == 16) return malformed("chunk size has more than 16 hex digits");
    size = (size << 4) | static_cast<std::uint64_t>(hex_value(line[i]));
    ++i;
  }
  if (i == 0) return malformed("chunk size is not hexadecimal");
  std::string_view rest = line.substr(i);
  if (!rest.empty() && rest.front() != ';') return malformed("unexpected text after chunk size");
  chunk_signature_.clear();
  bool have_signature = false;
  while (!rest.empty()) {
    rest.remove_prefix(1);  // ';'
    std::size_t semi = rest.find(';');
    std::string_view ext = rest.substr(0, semi);
    rest = semi == std::string_view::npos ? std::string_view{} : rest.substr(semi);
    std::size_t eq = ext.find('=');
    std::string_view name = ext.substr(0, eq);
    if (!is_token(name)) return malformed("bad chunk extension");
    if (name != "chunk-signature") continue;  // other extensions are ignored (RFC 9112)
    std::string_view value = eq == std::string_view::npos ? std::string_view{} : ext.substr(eq + 1);
    if (have_signature) return malformed("repeated chunk-signature");
    if (!is_hex64(value)) return malformed("chunk-signature is not 64 hex digits");
    chunk_signature_ = std::string(value);
    have_signature = true;
  }
  if (opt_.signed_chunks && !have_signature) {
    return Status(Errc::signature_does_not_match, "missing chunk signature in a signed upload");
  }
  chunk_sha_ = Sha256();
  if (size == 0) {
    final_chunk_ = true;
    state_ = State::trailer;
    if (opt_.signed_chunks) return on_chunk_end();
    return Status::Ok();
  }
  chunk_left_ = size;
  state_ = State::chunk_data;
  return Status::Ok();
}

Status AwsChunkedDecoder::on_chunk_end() {
  if (opt_.signed_chunks) {
    std::string sts =
        sigv4::chunk_string_to_sign(opt_.amz_date, opt_.scope, prev_signature_, chunk_sha_.hex());
    if (!verify_chain(sts, chunk_signature_)) {
      return Status(Errc::signature_does_not_match,
                    "The chunk signature we calculated does not match the signature you provided");
    }
  }
  if (!final_chunk_) state_ = State::chunk_crlf;
  return Status::Ok();
}

Status AwsChunkedDecoder::on_trailer_line(std::string_view line) {
  if (line.empty()) {
    if (opt_.trailer && trailers_.empty() && !skipped_blank_) {
      skipped_blank_ = true;  // "0;...\r\n\r\n<trailers>\r\n\r\n" as some clients send it
      return Status::Ok();
    }
    if (opt_.trailer && trailers_.empty()) {
      return malformed("x-amz-trailer announced a trailer but none was sent");
    }
    if (opt_.trailer && opt_.signed_chunks && !trailer_signature_ok_) {
      return Status(Errc::signature_does_not_match, "missing x-amz-trailer-signature");
    }
    state_ = State::done;
    return Status::Ok();
  }
  if (!opt_.trailer) return malformed("trailer headers in an upload without x-amz-trailer");
  if (trailer_signature_ok_) return malformed("trailer after x-amz-trailer-signature");
  std::size_t colon = line.find(':');
  if (colon == std::string_view::npos || !is_token(line.substr(0, colon))) {
    return malformed("bad trailer line");
  }
  std::string name = lower(line.substr(0, colon));
  std::string_view value = trim(line.substr(colon + 1));
  if (name == "x-amz-trailer-signature") {
    if (!opt_.signed_chunks) return Status::Ok();  // nothing to verify it against
    if (!is_hex64(value)) return malformed("x-amz-trailer-signature is not 64 hex digits");
    std::string sts = sigv4::trailer_string_to_sign(opt_.amz_date, opt_.scope, prev_signature_,
                                                    sha256_hex(canonical_trailers_));
    if (!verify_chain(sts, value)) {
      return Status(
          Errc::signature_does_not_match,
          "The trailer signature we calculated does not match the signature you provided");
    }
    trailer_signature_ok_ = true;
    return Status::Ok();
  }
  canonical_trailers_ += name;
  canonical_trailers_.push_back(':');
  canonical_trailers_ += value;
  canonical_trailers_.push_back('\n');
  trailers_.emplace_back(std::move(name), std::string(value));
  return Status::Ok();
}

Status AwsChunkedDecoder::feed(std::span<const std::byte> in, const Sink& sink) {
  if (!error_.ok()) return error_;
  const auto* p = reinterpret_cast<const char*>(in.data());
  const std::size_t n = in.size();
  std::size_t i = 0;
  while (i < n) {
    switch (state_) {
      case State::chunk_header:
      case State::trailer: {
        const bool header = state_ == State::chunk_header;
        const void* nl = std::memchr(p + i, '\n', n - i);
        std::size_t take =
            nl ? static_cast<std::size_t>(static_cast<const char*>(nl) - (p + i)) + 1 : n - i;
        if (header && line_.size() + take > limits::chunk_header_bytes_max) {
          return fail(malformed("chunk header line longer than " +
                                std::to_string(limits::chunk_header_bytes_max) + " bytes"));
        }
        if (!header && trailer_bytes_ + line_.size() + take > limits::trailer_bytes_max) {
          return fail(malformed("trailer section longer than " +
                                std::to_string(limits::trailer_bytes_max) + " bytes"));
        }
        line_.append(p + i, take);
        i += take;
        if (nl == nullptr) break;
        if (line_.size() < 2 || line_[line_.size() - 2] != '\r') {
          return fail(malformed("line not terminated by CRLF"));
        }
        std::string_view l(line_.data(), line_.size() - 2);
        if (l.find('\r') != std::string_view::npos || l.find('\0') != std::string_view::npos) {
          return fail(malformed("control character in a chunk header or trailer"));
        }
        if (!header) trailer_bytes_ += line_.size();
        Status st = header ? on_chunk_header(l) : on_trailer_line(l);
        line_.clear();
        if (!st.ok()) return fail(std::move(st));
        break;
      }
      case State::chunk_data: {
        std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(n - i, chunk_left_));
        if (opt_.signed_chunks) chunk_sha_.update(p + i, take);
        chunk_left_ -= take;
        decoded_bytes_ += take;
        Status st = sink(in.subspan(i, take));
        i += take;
        if (!st.ok()) return fail(std::move(st));
        if (chunk_left_ == 0) {
          st = on_chunk_end();
          if (!st.ok()) return fail(std::move(st));
        }
        break;
      }
      case State::chunk_crlf: {
        char want = crlf_seen_ == 0 ? '\r' : '\n';
        if (p[i] != want) return fail(malformed("chunk data not followed by CRLF"));
        ++i;
        if (++crlf_seen_ == 2) {
          crlf_seen_ = 0;
          state_ = State::chunk_header;
        }
        break;
      }
      case State::done:
        return fail(malformed("bytes after the end of the aws-chunked body"));
    }
  }
  return Status::Ok();
}

bool AwsChunkedDecoder::done() const {
  if (!error_.ok()) return false;
  if (state_ == State::done) return true;
  if (state_ != State::trailer || !line_.empty()) return false;
  if (!opt_.trailer) return true;  // final chunk consumed; its closing blank line may not come
  if (trailers_.empty()) return false;
  return !opt_.signed_chunks || trailer_signature_ok_;
}

Status AwsChunkedDecoder::finish() const {
  if (!error_.ok()) return error_;
  if (done()) return Status::Ok();
  if (final_chunk_) {
    return Status(Errc::incomplete_body, "The aws-chunked body ended before its trailers");
  }
  return Status(Errc::incomplete_body, "The aws-chunked body ended before its final chunk");
}

}  // namespace objdirect::s3
