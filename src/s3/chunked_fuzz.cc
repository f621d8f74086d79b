#include "s3/chunked_fuzz.hpp"

#include <cstdlib>
#include <string>

#include "auth/sigv4.hpp"
#include "s3/chunked.hpp"

namespace objdirect::s3 {
namespace {

struct Outcome {
  Errc code = Errc::ok;
  std::string out;
  bool done = false;
  std::vector<std::pair<std::string, std::string>> trailers;
  bool consistent = true;
};

Outcome run(const AwsChunkedDecoder::Options& o, std::string_view body, std::size_t step) {
  AwsChunkedDecoder d(o);
  Outcome r;
  auto sink = [&r](std::span<const std::byte> s) {
    r.out.append(reinterpret_cast<const char*>(s.data()), s.size());
    return Status::Ok();
  };
  for (std::size_t i = 0; i < body.size(); i += step) {
    std::string_view piece = body.substr(i, step);
    Status st = d.feed(std::as_bytes(std::span(piece.data(), piece.size())), sink);
    if (!st.ok()) {
      r.code = st.code();
      if (st.message().empty()) r.consistent = false;
      if (st.code() != Errc::invalid_request && st.code() != Errc::signature_does_not_match) {
        r.consistent = false;
      }
      // The error is sticky.
      if (d.feed({}, sink).code() != st.code() || d.done()) r.consistent = false;
      break;
    }
  }
  r.done = d.done();
  r.trailers = d.trailers();
  if (d.decoded_bytes() != r.out.size()) r.consistent = false;
  if (r.done != d.finish().ok()) r.consistent = false;
  return r;
}

}  // namespace

bool chunked_fuzz_one(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return true;
  std::uint8_t ctl = data[0];
  std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  AwsChunkedDecoder::Options o;
  o.signed_chunks = (ctl & 1) != 0;
  o.trailer = (ctl & 2) != 0;
  o.signing_key = sigv4::signing_key("secret", "20130524", "us-east-1", "s3");
  o.seed_signature = std::string(64, '0');
  o.amz_date = "20130524T000000Z";
  o.scope = "20130524/us-east-1/s3/aws4_request";
  std::size_t step = 1 + (ctl >> 2);
  Outcome whole = run(o, body, body.size() + 1);
  Outcome split = run(o, body, step);
  Outcome bytes = run(o, body, 1);
  for (const Outcome* r : {&whole, &split, &bytes}) {
    if (!r->consistent) return false;
    if (r->code != whole.code || r->out != whole.out || r->done != whole.done ||
        r->trailers != whole.trailers) {
      return false;
    }
  }
  return true;
}

}  // namespace objdirect::s3

#ifdef OBJDIRECT_FUZZ_MAIN
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (!objdirect::s3::chunked_fuzz_one(data, size)) std::abort();
  return 0;
}
#endif
