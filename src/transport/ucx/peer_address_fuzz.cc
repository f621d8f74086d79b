#include "transport/ucx/peer_address_fuzz.hpp"

#include <cstdlib>
#include <string>
#include <string_view>

#include "transport/ucx/peer_address.hpp"

namespace objdirect::transport::ucx {

bool peer_address_fuzz_one(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const PeerAddress got = decode_peer_address(in);
  // An independent reading of the layout: magic, version 1, 16 bytes, at least one more.
  const bool prefixed = size > 21 && in.substr(0, 4) == "ODNS" && data[4] == 1;
  if (prefixed) {
    if (!got.net_namespace || got.worker != in.substr(21)) return false;
    std::uint64_t dev = 0, ino = 0;
    for (int i = 0; i < 8; ++i) {
      dev |= std::uint64_t{data[5 + i]} << (8 * i);
      ino |= std::uint64_t{data[13 + i]} << (8 * i);
    }
    if (got.net_namespace->dev != dev || got.net_namespace->ino != ino) return false;
    if (encode_peer_address(*got.net_namespace, got.worker) != in) return false;
  } else if (got.net_namespace || got.worker != in) {
    return false;
  }
  if (size > 0) {
    const NetNamespace ns{size, std::uint64_t{data[0]} << 56 | size};
    const PeerAddress again = decode_peer_address(encode_peer_address(ns, in));
    if (again.net_namespace != ns || again.worker != in) return false;
  }
  return true;
}

}  // namespace objdirect::transport::ucx

#ifdef OBJDIRECT_FUZZ_MAIN
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (!objdirect::transport::ucx::peer_address_fuzz_one(data, size)) std::abort();
  return 0;
}
#endif
