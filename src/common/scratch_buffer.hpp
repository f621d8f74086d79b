// ScratchBuffer: a heap byte buffer that is not zero-filled.
//
// Request paths stage up to 1 MiB per request between the socket, the store and the hashes; a
// std::vector<std::byte> would zero every byte first, for data that is always overwritten before
// it is read.
//
// Thread safety: a plain value; one owner at a time.
#pragma once

#include <cstddef>
#include <memory>
#include <span>

namespace objdirect {

class ScratchBuffer {
 public:
  explicit ScratchBuffer(std::size_t size)
      : data_(std::make_unique_for_overwrite<std::byte[]>(size)), size_(size) {}

  std::byte* data() noexcept { return data_.get(); }
  std::size_t size() const noexcept { return size_; }
  std::span<std::byte> span() noexcept { return {data_.get(), size_}; }

 private:
  std::unique_ptr<std::byte[]> data_;
  std::size_t size_;
};

}  // namespace objdirect
