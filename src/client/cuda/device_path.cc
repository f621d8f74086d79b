#include "client/cuda/device_path.hpp"

namespace objdirect::cuda {

const char* device_path_name(DevicePath path) noexcept {
  switch (path) {
    case DevicePath::host:
      return "host";
    case DevicePath::direct:
      return "direct";
    case DevicePath::bounce:
      break;
  }
  return "bounce";
}

DevicePath choose_path(PointerKind kind, const transport::Capabilities& caps) noexcept {
  switch (kind) {
    case PointerKind::host:
    case PointerKind::unknown:
      return DevicePath::host;
    case PointerKind::device:
      return caps.cuda_memory ? DevicePath::direct : DevicePath::bounce;
    case PointerKind::managed:
      break;
  }
  return DevicePath::bounce;
}

Result<std::shared_ptr<transport::MemoryRegion>> register_device_memory(
    transport::Transport& transport, void* ptr, std::size_t len) {
  if (!transport.caps().cuda_memory) {
    return Status(Errc::rdma_declined, transport.caps().name +
                                           " cannot register CUDA memory (no FI_HMEM_CUDA / "
                                           "UCS_MEMORY_TYPE_CUDA): use the bounce path");
  }
  if (classify_pointer(ptr) != PointerKind::device) {
    return Status(Errc::invalid_argument, "not CUDA device memory");
  }
  return transport.register_memory(ptr, len, transport::MemoryType::cuda);
}

}  // namespace objdirect::cuda
