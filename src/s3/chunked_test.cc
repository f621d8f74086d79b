#include "s3/chunked.hpp"

#include <gtest/gtest.h>

#include <random>

#include "auth/sigv4.hpp"
#include "common/checksum.hpp"
#include "s3/chunked_fuzz.hpp"

namespace objdirect::s3 {
namespace {

constexpr std::string_view kSecret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
constexpr std::string_view kDate = "20130524T000000Z";
constexpr std::string_view kScope = "20130524/us-east-1/s3/aws4_request";
// Seed signatures of the AWS S3 API reference chunked-upload examples.
constexpr std::string_view kSeed =
    "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9";
constexpr std::string_view kTrailerSeed =
    "106e2a8a18243abcf37539882f36619c00e2dfc72633413f02d3b74544bfeb8e";

AwsChunkedDecoder::Options signed_options(std::string_view seed, bool trailer) {
  AwsChunkedDecoder::Options o;
  o.signed_chunks = true;
  o.trailer = trailer;
  o.signing_key = sigv4::signing_key(kSecret, "20130524", "us-east-1", "s3");
  o.seed_signature = std::string(seed);
  o.amz_date = std::string(kDate);
  o.scope = std::string(kScope);
  return o;
}

AwsChunkedDecoder::Options unsigned_trailer_options() {
  AwsChunkedDecoder::Options o;
  o.trailer = true;
  return o;
}

std::string chunk(std::size_t size, std::string_view sig) {
  char hex[32];
  std::snprintf(hex, sizeof hex, "%zx", size);
  std::string s = hex;
  if (!sig.empty()) s += ";chunk-signature=" + std::string(sig);
  s += "\r\n" + std::string(size, 'a');
  if (size) s += "\r\n";
  return s;
}

// The published example body: 64 KiB + 1 KiB of 'a' and the final chunk.
std::string aws_signed_body() {
  return chunk(65536, "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648") +
         chunk(1024, "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497") +
         chunk(0, "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9") + "\r\n";
}

// The published trailer example: same data, CRC32C trailer, signed trailer.
std::string aws_trailer_body(bool blank_line_before_trailers) {
  return chunk(65536, "b474d8862b1487a5145d686f57f013e54db672cee1c953b3010fb58501ef5aa2") +
         chunk(1024, "1c1344b170168f8e65b41376b44b20fe354e373826ccbbe2c1d40a8cae51e5c7") +
         chunk(0, "2ca2aba2005185cf7159c6277faf83795951dd77a3a99e6e65d5c9f85863f992") +
         (blank_line_before_trailers ? "\r\n" : "") +
         "x-amz-checksum-crc32c:sOO8/Q==\r\n"
         "x-amz-trailer-signature:d81f82fc3505edab99d459891051a732e8730629a2e4a59689829ca17fe2e435"
         "\r\n\r\n";
}

struct Decoded {
  Status status;
  std::string out;
  bool done = false;
  std::vector<std::pair<std::string, std::string>> trailers;
  std::uint64_t decoded_bytes = 0;
};

// Feeds `body` in pieces whose sizes come from `next_size`.
template <class NextSize>
Decoded decode(const AwsChunkedDecoder::Options& o, std::string_view body, NextSize next_size) {
  AwsChunkedDecoder d(o);
  Decoded r;
  auto sink = [&](std::span<const std::byte> s) {
    r.out.append(reinterpret_cast<const char*>(s.data()), s.size());
    return Status::Ok();
  };
  std::size_t pos = 0;
  while (pos < body.size()) {
    std::size_t n = std::min(body.size() - pos, next_size());
    std::string_view piece = body.substr(pos, n);
    pos += n;
    r.status = d.feed(std::as_bytes(std::span(piece.data(), piece.size())), sink);
    if (!r.status.ok()) break;
  }
  r.done = d.done();
  r.trailers = d.trailers();
  r.decoded_bytes = d.decoded_bytes();
  return r;
}

Decoded decode_whole(const AwsChunkedDecoder::Options& o, std::string_view body) {
  return decode(o, body, [&] { return body.size(); });
}

// Whole, byte by byte and 20 random splits must all decode identically.
void expect_all_splits(const AwsChunkedDecoder::Options& o, std::string_view body,
                       std::string_view want_out,
                       const std::vector<std::pair<std::string, std::string>>& want_trailers) {
  std::mt19937 rng(1234);
  std::vector<Decoded> runs;
  runs.push_back(decode_whole(o, body));
  runs.push_back(decode(o, body, [] { return std::size_t{1}; }));
  for (int i = 0; i < 20; ++i) {
    std::size_t max = 1 + rng() % 5000;
    runs.push_back(decode(o, body, [&] { return 1 + rng() % max; }));
  }
  for (const auto& r : runs) {
    ASSERT_TRUE(r.status.ok()) << r.status.to_string();
    EXPECT_TRUE(r.done);
    EXPECT_EQ(r.out, want_out);
    EXPECT_EQ(r.decoded_bytes, want_out.size());
    EXPECT_EQ(r.trailers, want_trailers);
  }
}

TEST(AwsChunked, AwsExampleSignedPayload) {
  expect_all_splits(signed_options(kSeed, false), aws_signed_body(), std::string(66560, 'a'), {});
}

TEST(AwsChunked, AwsExampleSignedTrailer) {
  std::vector<std::pair<std::string, std::string>> want = {{"x-amz-checksum-crc32c", "sOO8/Q=="}};
  expect_all_splits(signed_options(kTrailerSeed, true), aws_trailer_body(false),
                    std::string(66560, 'a'), want);
  // The variant with a blank line between the final chunk and the trailers.
  expect_all_splits(signed_options(kTrailerSeed, true), aws_trailer_body(true),
                    std::string(66560, 'a'), want);
}

// STREAMING-UNSIGNED-PAYLOAD-TRAILER as botocore / the AWS CLI send it.
TEST(AwsChunked, UnsignedTrailer) {
  std::mt19937_64 rng(5);
  std::string payload(200'000, '\0');
  for (auto& c : payload) c = static_cast<char>(rng());
  Checksummer crc(ChecksumAlgo::crc64nvme);
  crc.update(payload.data(), payload.size());
  std::string body;
  for (std::size_t pos = 0; pos < payload.size(); pos += 65536) {
    std::size_t n = std::min<std::size_t>(65536, payload.size() - pos);
    char hex[32];
    std::snprintf(hex, sizeof hex, "%zX", n);  // upper-case hex is accepted too
    body += hex;
    body += "\r\n" + payload.substr(pos, n) + "\r\n";
  }
  body += "0\r\nx-amz-checksum-crc64nvme:" + crc.digest_base64() + "\r\n\r\n";
  expect_all_splits(unsigned_trailer_options(), body, payload,
                    {{"x-amz-checksum-crc64nvme", crc.digest_base64()}});
}

// Bodies exactly as botocore 1.43.11 sends them over HTTPS (captured at the wire), with the CRC32
// botocore computed: the trailer must come out and match our own CRC32 of the payload.
TEST(AwsChunked, BotocoreCapturedBodies) {
  struct Case {
    std::size_t size;
    char fill;
    std::string_view hex_size, crc32;
  } cases[] = {{1000, 'y', "3e8", "IKoeIg=="}, {70000, 'z', "11170", "VZtM0w=="}};
  for (const auto& c : cases) {
    std::string payload(c.size, c.fill);
    std::string body = std::string(c.hex_size) + "\r\n" + payload +
                       "\r\n0\r\nx-amz-checksum-crc32:" + std::string(c.crc32) + "\r\n\r\n";
    expect_all_splits(unsigned_trailer_options(), body, payload,
                      {{"x-amz-checksum-crc32", std::string(c.crc32)}});
    Checksummer crc(ChecksumAlgo::crc32);
    crc.update(payload.data(), payload.size());
    EXPECT_EQ(crc.digest_base64(), c.crc32);
  }
}

// Signing the chain ourselves, with several chunk sizes, must verify.
TEST(AwsChunked, SignedChainBuiltWithSigv4Helpers) {
  auto o = signed_options(kSeed, true);
  std::string prev(kSeed);
  std::string body, payload;
  for (std::size_t size : {8192u, 1u, 17u, 0u}) {
    std::string data(size, 'x');
    payload += data;
    prev = sigv4::signature_hex(o.signing_key,
                                sigv4::chunk_string_to_sign(kDate, kScope, prev, sha256_hex(data)));
    body += chunk(size, prev);
    if (size) {
      body.replace(body.size() - size - 2, size, data);
    }
  }
  std::string trailers = "x-amz-checksum-sha256:abc=\nx-amz-meta-x:y\n";
  std::string tsig = sigv4::signature_hex(
      o.signing_key, sigv4::trailer_string_to_sign(kDate, kScope, prev, sha256_hex(trailers)));
  body += "x-amz-checksum-sha256: abc=\r\nX-Amz-Meta-X:y\r\nx-amz-trailer-signature:" + tsig +
          "\r\n\r\n";
  expect_all_splits(o, body, payload, {{"x-amz-checksum-sha256", "abc="}, {"x-amz-meta-x", "y"}});
}

TEST(AwsChunked, BadSignatures) {
  // Data tampered.
  std::string body = aws_signed_body();
  body[5000] = 'b';
  auto r = decode_whole(signed_options(kSeed, false), body);
  EXPECT_EQ(r.status.code(), Errc::signature_does_not_match);
  EXPECT_FALSE(r.done);
  // Signature tampered (second chunk), wrong seed, wrong key.
  body = aws_signed_body();
  body[body.find("0055627c")] = '1';
  EXPECT_EQ(decode_whole(signed_options(kSeed, false), body).status.code(),
            Errc::signature_does_not_match);
  EXPECT_EQ(decode_whole(signed_options(kTrailerSeed, false), aws_signed_body()).status.code(),
            Errc::signature_does_not_match);
  auto wrong_key = signed_options(kSeed, false);
  wrong_key.signing_key = sigv4::signing_key("other", "20130524", "us-east-1", "s3");
  EXPECT_EQ(decode_whole(wrong_key, aws_signed_body()).status.code(),
            Errc::signature_does_not_match);
  // Chunks reordered: swapping the two data chunks breaks the chain.
  std::string c1 = chunk(65536, "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648");
  std::string c2 = chunk(1024, "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497");
  EXPECT_EQ(decode_whole(signed_options(kSeed, false), c2 + c1).status.code(),
            Errc::signature_does_not_match);
  // Missing chunk-signature in a signed upload.
  EXPECT_EQ(decode_whole(signed_options(kSeed, false), "400\r\n").status.code(),
            Errc::signature_does_not_match);
  // Trailer value tampered, trailer signature tampered, trailer signature missing.
  body = aws_trailer_body(false);
  body.replace(body.find("sOO8"), 4, "sOO9");
  EXPECT_EQ(decode_whole(signed_options(kTrailerSeed, true), body).status.code(),
            Errc::signature_does_not_match);
  body = aws_trailer_body(false);
  body[body.find("d81f82fc")] = 'e';
  EXPECT_EQ(decode_whole(signed_options(kTrailerSeed, true), body).status.code(),
            Errc::signature_does_not_match);
  body = aws_trailer_body(false);
  std::size_t sig_line = body.find("x-amz-trailer-signature");
  body.erase(sig_line, body.size() - sig_line - 2);
  auto missing = decode_whole(signed_options(kTrailerSeed, true), body);
  EXPECT_EQ(missing.status.code(), Errc::signature_does_not_match);
  // Without the closing blank line, the body is simply not done.
  body.resize(body.size() - 2);
  missing = decode_whole(signed_options(kTrailerSeed, true), body);
  EXPECT_TRUE(missing.status.ok());
  EXPECT_FALSE(missing.done);
}

TEST(AwsChunked, TruncatedBodyIsNeverDone) {
  const std::string body = aws_signed_body();
  // Every cut before the final chunk's line is complete is incomplete; sample positions densely
  // around the chunk boundaries and sparsely inside the data.
  std::vector<std::size_t> cuts;
  for (std::size_t i = 0; i < body.size() - 2; i += (i < 100 || body.size() - i < 300) ? 1 : 997) {
    cuts.push_back(i);
  }
  for (std::size_t cut : cuts) {
    AwsChunkedDecoder d(signed_options(kSeed, false));
    Status st = d.feed(std::as_bytes(std::span(body.data(), cut)),
                       [](std::span<const std::byte>) { return Status::Ok(); });
    ASSERT_TRUE(st.ok()) << cut << ": " << st.to_string();
    ASSERT_FALSE(d.done()) << cut;
    EXPECT_EQ(d.finish().code(), Errc::incomplete_body) << cut;
  }
  // The final blank line is optional.
  auto r = decode_whole(signed_options(kSeed, false), body.substr(0, body.size() - 2));
  EXPECT_TRUE(r.status.ok());
  EXPECT_TRUE(r.done);
  // A trailer upload without any trailer is incomplete.
  std::string no_trailer = "3\r\nabc\r\n0\r\n";
  auto t = decode_whole(unsigned_trailer_options(), no_trailer);
  EXPECT_TRUE(t.status.ok());
  EXPECT_FALSE(t.done);
  EXPECT_EQ(decode_whole(unsigned_trailer_options(), no_trailer + "\r\n\r\n").status.code(),
            Errc::invalid_request);
}

TEST(AwsChunked, BytesAfterTheEnd) {
  AwsChunkedDecoder d(signed_options(kSeed, false));
  auto sink = [](std::span<const std::byte>) { return Status::Ok(); };
  std::string body = aws_signed_body();
  ASSERT_TRUE(d.feed(std::as_bytes(std::span(body.data(), body.size())), sink).ok());
  ASSERT_TRUE(d.done());
  std::string extra = "x";
  Status st = d.feed(std::as_bytes(std::span(extra.data(), extra.size())), sink);
  EXPECT_EQ(st.code(), Errc::invalid_request);
  EXPECT_FALSE(d.done());
  // Sticky.
  EXPECT_EQ(d.feed({}, sink).code(), Errc::invalid_request);
  EXPECT_EQ(d.finish().code(), Errc::invalid_request);
  // Another chunk after the last one is not a trailer either.
  EXPECT_EQ(decode_whole(unsigned_trailer_options(), "0\r\nx:1\r\n\r\n3\r\nabc\r\n").status.code(),
            Errc::invalid_request);
}

TEST(AwsChunked, ChunkHeaderAndTrailerLimits) {
  auto o = unsigned_trailer_options();
  // A header line of exactly chunk_header_bytes_max bytes (CRLF included) is accepted...
  std::string pad(limits::chunk_header_bytes_max - std::string("3;x=\r\n").size(), 'p');
  std::string ok = "3;x=" + pad + "\r\nabc\r\n0\r\nx-amz-checksum-crc32:AAAAAA==\r\n\r\n";
  auto r = decode_whole(o, ok);
  EXPECT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(r.out, "abc");
  // ...one byte more is not, even fed byte by byte (the line is never buffered unbounded).
  std::string too_long = "3;x=" + pad + "p\r\nabc\r\n";
  EXPECT_EQ(decode_whole(o, too_long).status.code(), Errc::invalid_request);
  EXPECT_EQ(decode(o, too_long, [] { return std::size_t{1}; }).status.code(),
            Errc::invalid_request);
  std::string endless(limits::chunk_header_bytes_max * 4, '1');
  EXPECT_EQ(decode(o, endless, [] { return std::size_t{7}; }).status.code(), Errc::invalid_request);
  // Trailer section bound.
  std::string big_trailer = "0\r\n";
  while (big_trailer.size() < limits::trailer_bytes_max + 100) big_trailer += "x-amz-meta-a:b\r\n";
  big_trailer += "\r\n";
  EXPECT_EQ(decode_whole(o, big_trailer).status.code(), Errc::invalid_request);
}

TEST(AwsChunked, MalformedInputs) {
  auto u = unsigned_trailer_options();
  AwsChunkedDecoder::Options plain;  // unsigned, no trailer
  const std::pair<AwsChunkedDecoder::Options, std::string> cases[] = {
      {u, "zz\r\n"},                                          // not hex
      {u, ";x\r\n"},                                          // no size
      {u, "5 \r\nabcde\r\n"},                                 // space after size
      {u, "11111111111111111\r\n"},                           // 17 hex digits
      {u, "5\nabcde\r\n"},                                    // bare LF
      {u, "5\r\nabcdeXY"},                                    // no CRLF after data
      {u, "5\r\nabcde\n\r"},                                  // CRLF reversed
      {u, "2\r\nabc\r\n"},                                    // more data than the size
      {u, "0\r\nno-colon\r\n\r\n"},                           // bad trailer line
      {u, "0\r\n:v\r\n\r\n"},                                 // empty trailer name
      {u, "0\r\nbad name:v\r\n\r\n"},                         // space in trailer name
      {u, "0\r\nx:a\rb\r\n\r\n"},                             // CR inside a trailer
      {plain, "0\r\nx-amz-checksum-crc32:AAAAAA==\r\n\r\n"},  // trailer not announced
      {u, "3;chunk-signature=abc\r\nabc\r\n"},                // short signature
      {u, "0;chunk-signature=" + std::string(64, 'a') + ";chunk-signature=" + std::string(64, 'a') +
              "\r\n"},  // repeated signature
  };
  for (const auto& [o, body] : cases) {
    auto r = decode_whole(o, body);
    EXPECT_EQ(r.status.code(), Errc::invalid_request) << body;
    EXPECT_FALSE(r.status.message().empty());
    EXPECT_FALSE(r.done) << body;
  }
  // Unsigned mode ignores a chunk-signature extension and other extensions.
  auto r = decode_whole(
      plain, "3;chunk-signature=" + std::string(64, 'a') + ";foo=bar\r\nabc\r\n0\r\n\r\n");
  EXPECT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(r.out, "abc");
  EXPECT_TRUE(r.done);
}

TEST(AwsChunked, SinkErrorsStopDecodingAndSpansAreZeroCopy) {
  std::string body = "5\r\nhello\r\n5\r\nworld\r\n0\r\n\r\n";
  AwsChunkedDecoder d(AwsChunkedDecoder::Options{});
  const char* base = body.data();
  int calls = 0;
  Status st =
      d.feed(std::as_bytes(std::span(body.data(), body.size())), [&](std::span<const std::byte> s) {
        ++calls;
        EXPECT_GE(reinterpret_cast<const char*>(s.data()), base);
        EXPECT_LE(reinterpret_cast<const char*>(s.data()) + s.size(), base + body.size());
        if (calls == 2) return Status(Errc::no_space, "disk full");
        return Status::Ok();
      });
  EXPECT_EQ(st.code(), Errc::no_space);
  EXPECT_EQ(calls, 2);
  EXPECT_FALSE(d.done());
  EXPECT_EQ(d.finish().code(), Errc::no_space);
}

TEST(AwsChunked, FuzzBodySeeds) {
  std::vector<std::string> seeds = {
      std::string(1, '\x00') + "5\r\nhello\r\n0\r\n\r\n",
      std::string(1, '\x02') + "5\r\nhello\r\n0\r\nx-amz-checksum-crc32:AAAAAA==\r\n\r\n",
      std::string(1, '\x03') + aws_trailer_body(false),
      std::string(1, '\x11') + "3;chunk-signature=" + std::string(64, 'f') + "\r\nabc\r\n",
      std::string(1, '\x7e') + "0\r\n\r\n\r\nx:y\r\n\r\nz",
  };
  std::mt19937 rng(99);
  for (const auto& s : seeds) {
    ASSERT_TRUE(chunked_fuzz_one(reinterpret_cast<const std::uint8_t*>(s.data()), s.size()));
    for (int i = 0; i < 30; ++i) {
      std::string m = s.substr(0, std::min<std::size_t>(s.size(), 2000));
      m[rng() % m.size()] = static_cast<char>(rng());
      ASSERT_TRUE(chunked_fuzz_one(reinterpret_cast<const std::uint8_t*>(m.data()), m.size()));
    }
  }
}

}  // namespace
}  // namespace objdirect::s3
