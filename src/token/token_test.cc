#include "token/token.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <string>

#include "token/token_fuzz.hpp"

namespace objdirect::token {
namespace {

constexpr std::uint64_t now = 1'700'000'000;

Token sample_libfabric() {
  Token t;
  t.backend = Backend::libfabric;
  t.provider = "tcp";
  t.addressing = Addressing::offset;
  t.memory_type = MemoryType::host;
  t.expires_unix_s = now + 100;
  for (std::size_t i = 0; i < t.nonce.size(); ++i) t.nonce[i] = static_cast<std::uint8_t>(i * 17);
  t.endpoint = std::string("\x02\x00\x1f\x90\x7f\x00\x00\x01", 8) + std::string(8, '\0');
  t.segments = {{0, 4096, 0xdeadbeefcafef00dull, ""}, {8192, 1, 7, ""}};
  t.total_length = 4097;
  t.mailbox = Segment{65536, limits::token_mailbox_bytes, 42, ""};
  t.proof_ready = true;
  return t;
}

Token sample_ucx() {
  Token t;
  t.backend = Backend::ucx;
  t.provider = "tcp";
  t.addressing = Addressing::virtual_address;
  t.memory_type = MemoryType::cuda;
  t.expires_unix_s = now + 1;
  t.nonce.fill(0xab);
  t.endpoint = std::string(108, '\x5a');
  t.segments = {{0x7f0000001000ull, 1ull << 40, 0, std::string(11, '\x01')}};
  t.total_length = 1ull << 40;
  return t;
}

// Decodes the binary form of an encoded token, for byte-level tampering.
std::string binary_of(const Token& t) {
  auto b = base64url_decode(encode(t).substr(text_prefix.size()));
  EXPECT_TRUE(b.ok());
  return *b;
}
std::string text_of(const std::string& binary) {
  return std::string(text_prefix) + base64url_encode(binary);
}

void expect_invalid(std::string_view text, std::string_view message_part) {
  auto r = decode(text, now);
  ASSERT_FALSE(r.ok()) << "accepted: " << text;
  EXPECT_EQ(r.code(), Errc::invalid_rdma_token);
  EXPECT_NE(r.status().message().find(message_part), std::string::npos)
      << "message was: " << r.status().message();
}

TEST(Base64Url, RoundTripsAllLengths) {
  std::string bytes;
  for (int n = 0; n < 300; ++n) {
    auto back = base64url_decode(base64url_encode(bytes));
    ASSERT_TRUE(back.ok()) << n;
    EXPECT_EQ(*back, bytes);
    bytes += static_cast<char>(n * 31 + 7);
  }
}

TEST(Base64Url, KnownVectorsAndStrictness) {
  EXPECT_EQ(base64url_encode("\xfb\xff"), "-_8");
  EXPECT_EQ(base64url_encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base64url_encode("fo"), "Zm8");
  EXPECT_FALSE(base64url_decode("Zm8=").ok());   // padding
  EXPECT_FALSE(base64url_decode("Zm+v").ok());   // standard alphabet
  EXPECT_FALSE(base64url_decode("Zm9vY").ok());  // 1 mod 4
  EXPECT_FALSE(base64url_decode("Zm9").ok());    // non-zero trailing bits ("Zm8" is canonical)
  EXPECT_TRUE(base64url_decode("").ok());
}

TEST(Token, RoundTripLibfabric) {
  Token t = sample_libfabric();
  ASSERT_TRUE(validate(t).ok()) << validate(t).to_string();
  std::string text = encode(t);
  EXPECT_EQ(text.rfind("OD1.", 0), 0u);
  EXPECT_EQ(text.find('='), std::string::npos);
  auto back = decode(text, now);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, t);
}

TEST(Token, RoundTripUcxAndSize) {
  Token t = sample_ucx();
  auto back = decode(encode(t), now);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, t);
  // 48 header + 3 provider + 108 endpoint + 26 + 11 segment = 196 bytes -> 4 + 262 chars.
  EXPECT_EQ(encode(t).size(), 4u + 262u);
}

TEST(Token, MailboxRoundTripsAndIsChecked) {
  Token t = sample_libfabric();
  for (bool ready : {false, true}) {
    t.proof_ready = ready;
    auto back = decode(encode(t), now);
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    EXPECT_EQ(*back, t);
  }
  Token none = t;
  none.mailbox.reset();
  none.proof_ready = false;
  auto back = decode(encode(none), now);
  ASSERT_TRUE(back.ok());
  EXPECT_FALSE(back->mailbox);
  // The mailbox adds exactly one segment to the binary form.
  EXPECT_EQ(binary_of(t).size(), binary_of(none).size() + 26);
  none.proof_ready = true;
  EXPECT_EQ(validate(none).code(), Errc::invalid_rdma_token);
  Token wrong = t;
  wrong.mailbox->length = 33;
  EXPECT_NE(validate(wrong).message().find("mailbox"), std::string::npos);
  wrong.mailbox->length = limits::token_mailbox_bytes;
  wrong.mailbox->rkey = "x";  // libfabric carries no packed rkey
  EXPECT_EQ(validate(wrong).code(), Errc::invalid_rdma_token);
  Token ucx = sample_ucx();
  ucx.mailbox = Segment{0x7f0000002000ull, limits::token_mailbox_bytes, 0, ""};
  EXPECT_NE(validate(ucx).message().find("UCX mailbox"), std::string::npos);
  ucx.mailbox->rkey = std::string(11, '\x02');
  back = decode(encode(ucx), now);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, ucx);
}

TEST(Token, ForeignFormatsAreNotOurs) {
  // cuObject's DC_V1 descriptor (81 hex characters) has no "OD1." prefix.
  const std::string dc_v1 = std::string(16, 'a') + ":" + std::string(8, '0') + ":" +
                            std::string(8, '1') + ":" + std::string(4, '2') + ":" +
                            std::string(6, '3') + ":1:" + std::string(32, 'f');
  EXPECT_EQ(decode(dc_v1, now).code(), Errc::invalid_rdma_token);
}

TEST(Token, ZeroLengthTokenHasNoSegments) {
  Token t = sample_libfabric();
  t.segments.clear();
  t.total_length = 0;
  auto back = decode(encode(t), now);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, t);
}

TEST(Token, MaxSegmentsFitTheHeaderLimit) {
  Token t = sample_libfabric();
  t.segments.clear();
  t.total_length = 0;
  for (std::size_t i = 0; i < limits::token_segments_max; ++i) {
    t.segments.push_back({i << 20, 1 << 20, i, ""});
    t.total_length += 1 << 20;
  }
  std::string text = encode(t);
  EXPECT_LE(text.size(), limits::token_bytes_max);
  auto back = decode(text, now);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->segments.size(), limits::token_segments_max);
}

TEST(Token, RejectsWrongPrefixAndCuObjectDescriptor) {
  std::string body = encode(sample_libfabric()).substr(4);
  expect_invalid("OD2." + body, "prefix");
  expect_invalid(body, "prefix");
  expect_invalid("", "prefix");
  // A cuObject DC_V1 descriptor is 81 hex characters.
  expect_invalid(std::string(81, 'a'), "prefix");
}

TEST(Token, RejectsBadBase64) {
  std::string text = encode(sample_libfabric());
  expect_invalid(text + "=", "base64");
  std::string bad = text;
  bad[10] = '+';
  expect_invalid(bad, "base64");
  bad[10] = '\0';
  expect_invalid(bad, "base64");
}

TEST(Token, RejectsOverlongText) {
  expect_invalid("OD1." + std::string(limits::token_bytes_max, 'A'), "exceeds");
}

TEST(Token, RejectsEveryTruncation) {
  std::string bin = binary_of(sample_ucx());
  for (std::size_t n = 0; n < bin.size(); ++n) {
    auto r = decode(text_of(bin.substr(0, n)), now);
    ASSERT_FALSE(r.ok()) << "accepted truncation to " << n;
    EXPECT_EQ(r.code(), Errc::invalid_rdma_token);
  }
  expect_invalid(text_of(bin.substr(0, 47)), "truncated");
  expect_invalid(text_of(bin.substr(0, bin.size() - 1)), "truncated");
}

TEST(Token, RejectsTrailingBytes) {
  expect_invalid(text_of(binary_of(sample_libfabric()) + "x"), "trailing");
}

TEST(Token, RejectsBadMagicVersionAndEnums) {
  std::string bin = binary_of(sample_libfabric());
  auto tamper = [&](std::size_t at, char v) {
    std::string b = bin;
    b[at] = v;
    return text_of(b);
  };
  expect_invalid(tamper(0, 'X'), "magic");
  // Another version of our own format is declined (served over HTTP), not refused as garbage.
  for (char v : {char{1}, char{3}}) {
    auto r = decode(tamper(4, v), now);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.code(), Errc::rdma_declined);
    EXPECT_NE(r.status().message().find("version"), std::string::npos);
  }
  expect_invalid(tamper(5, 9), "backend");
  expect_invalid(tamper(6, 0), "addressing");
  expect_invalid(tamper(7, 3), "memory type");
  expect_invalid(tamper(41, 4), "reserved");
  // The mailbox flag cleared: the mailbox's bytes are left over.
  expect_invalid(tamper(41, 2), "trailing");
  expect_invalid(tamper(47, 1), "reserved");
}

TEST(Token, RejectsTooManySegments) {
  std::string bin = binary_of(sample_libfabric());
  bin[44] = static_cast<char>(limits::token_segments_max + 1);
  bin[45] = 0;
  expect_invalid(text_of(bin), "too many segments");
  Token t = sample_libfabric();
  t.segments.assign(limits::token_segments_max + 1, {0, 1, 0, ""});
  t.total_length = t.segments.size();
  EXPECT_EQ(validate(t).code(), Errc::invalid_rdma_token);
}

TEST(Token, RejectsAddressOverflow) {
  Token t = sample_libfabric();
  t.segments = {{std::numeric_limits<std::uint64_t>::max() - 10, 11, 1, ""}};
  t.total_length = 11;
  expect_invalid(encode(t), "overflow");
  t.segments[0].length = 10;  // ends exactly at 2^64 - 1: fine
  t.total_length = 10;
  EXPECT_TRUE(decode(encode(t), now).ok());
}

TEST(Token, RejectsLengthSumOverflowAndMismatch) {
  Token t = sample_libfabric();
  t.segments = {{0, std::numeric_limits<std::uint64_t>::max(), 1, ""}, {0, 2, 1, ""}};
  t.total_length = 1;
  expect_invalid(encode(t), "overflows");
  t = sample_libfabric();
  t.total_length += 1;
  expect_invalid(encode(t), "!= total_length");
  t.total_length -= 2;
  expect_invalid(encode(t), "!= total_length");
}

TEST(Token, RejectsZeroLengthSegmentAndEmptyEndpoint) {
  Token t = sample_libfabric();
  t.segments.push_back({0, 0, 0, ""});
  expect_invalid(encode(t), "zero length");
  t = sample_libfabric();
  t.endpoint.clear();
  expect_invalid(encode(t), "endpoint");
}

TEST(Token, RejectsRkeyMismatchWithBackend) {
  Token t = sample_ucx();
  t.segments[0].rkey.clear();
  expect_invalid(encode(t), "without rkey");
  t = sample_libfabric();
  t.segments[0].rkey = "k";
  expect_invalid(encode(t), "packed rkey");
}

TEST(Token, RejectsOversizedFields) {
  Token t = sample_ucx();
  t.endpoint.assign(limits::token_endpoint_bytes_max + 1, 'e');
  EXPECT_EQ(validate(t).code(), Errc::invalid_rdma_token);
  expect_invalid(encode(t), "endpoint address");
  t = sample_ucx();
  t.segments[0].rkey.assign(limits::token_rkey_bytes_max + 1, 'r');
  expect_invalid(encode(t), "rkey");
  t = sample_ucx();
  t.provider.assign(limits::token_provider_bytes_max + 1, 'p');
  expect_invalid(encode(t), "provider");
  // Within each field limit but over the encoded-text limit.
  t = sample_ucx();
  t.segments.assign(20, {0x1000, 1, 0, std::string(limits::token_rkey_bytes_max, 'r')});
  t.total_length = 20;
  EXPECT_EQ(validate(t).code(), Errc::invalid_rdma_token);
  EXPECT_NE(validate(t).message().find("encoded token"), std::string::npos);
}

TEST(Token, Expiry) {
  Token t = sample_libfabric();
  t.expires_unix_s = now + 1;
  EXPECT_TRUE(decode(encode(t), now).ok());
  for (std::uint64_t e : {now, std::uint64_t{0}}) {
    t.expires_unix_s = e;
    auto r = decode(encode(t), now);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.code(), Errc::rdma_token_expired);
    EXPECT_EQ(s3_code(r.code()), "InvalidRDMAToken");
    EXPECT_NE(r.status().message().find("expired"), std::string::npos);
  }
  t.expires_unix_s = now + limits::token_lifetime_max_s + limits::token_clock_skew_max_s;
  EXPECT_TRUE(decode(encode(t), now).ok());
  t.expires_unix_s += 1;
  expect_invalid(encode(t), "ahead of server time");
  t.expires_unix_s = std::numeric_limits<std::uint64_t>::max();
  expect_invalid(encode(t), "ahead of server time");
}

TEST(Token, CheckScope) {
  Token t = sample_libfabric();  // 4097 bytes
  EXPECT_TRUE(check_scope(t, 4097).ok());
  EXPECT_TRUE(check_scope(t, 0).ok());
  EXPECT_TRUE(check_scope(t, 1).ok());
  Status s = check_scope(t, 4098);
  EXPECT_EQ(s.code(), Errc::invalid_rdma_token);
  EXPECT_NE(s.message().find("4097"), std::string::npos);
}

// Runs the libFuzzer body over seeds: valid tokens, every truncation and every single-bit flip of
// their binary form, and a few hand-picked inputs.
TEST(TokenFuzz, BodyHoldsOnSeeds) {
  auto run = [](const std::string& s) {
    return fuzz_one(reinterpret_cast<const std::uint8_t*>(s.data()), s.size());
  };
  EXPECT_TRUE(run(""));
  EXPECT_TRUE(run("OD1."));
  EXPECT_TRUE(run("OD1.===="));
  EXPECT_TRUE(run(std::string(5000, 'A')));
  int accepted = 0;
  for (const Token& t : {sample_libfabric(), sample_ucx()}) {
    EXPECT_TRUE(run(encode(t)));
    std::string bin = binary_of(t);
    for (std::size_t n = 0; n <= bin.size(); ++n) ASSERT_TRUE(run(bin.substr(0, n))) << n;
    for (std::size_t i = 0; i < bin.size() * 8; ++i) {
      std::string b = bin;
      b[i / 8] = static_cast<char>(b[i / 8] ^ (1 << (i % 8)));
      ASSERT_TRUE(run(b)) << "bit " << i;
      accepted += decode(text_of(b), now).ok();
    }
  }
  // Flips inside addresses, keys, nonce and endpoint keep a token valid: the body must have
  // exercised its accept path, not only its reject path.
  EXPECT_GT(accepted, 100);
}

}  // namespace
}  // namespace objdirect::token
