// Client's async and batch calls: get_async / put_async on a thread of their own (bound to the
// caller's CUDA device), get_many / put_many with up to `concurrency` requests in flight and the
// batch's arenas registered once (Client::Impl::pin_batch, client_fabric.cc).
#include <future>

#include "client/client_impl.hpp"
#include "common/parallel.hpp"

namespace objdirect {

using client::HttpClient;
using client::HttpRequest;
using client::HttpResponse;
using client::Piece;

using client::bind_device;
using client::caller_device;
using client::is_device_memory;

std::future<Result<TransferResult>> Client::get_async(std::string bucket, std::string key,
                                                      std::span<std::byte> dst,
                                                      std::optional<ByteRange> range) {
  return get_async(std::move(bucket), std::move(key), dst, range, nullptr);
}

std::future<Result<TransferResult>> Client::put_async(std::string bucket, std::string key,
                                                      std::span<const std::byte> src) {
  return put_async(std::move(bucket), std::move(key), src, nullptr);
}

std::future<Result<TransferResult>> Client::get_async(std::string bucket, std::string key,
                                                      std::span<std::byte> dst,
                                                      std::optional<ByteRange> range,
                                                      void* cuda_stream) {
  const int device = caller_device();
  return std::async(std::launch::async,
                    [this, bucket = std::move(bucket), key = std::move(key), dst, range, device,
                     cuda_stream]() -> Result<TransferResult> {
                      if (dst.empty() || !is_device_memory(dst.data())) {
                        return get(bucket, key, dst, range);
                      }
                      OBJDIRECT_RETURN_IF_ERROR(bind_device(device));
                      return impl_->get_device(bucket, key, dst, range, cuda_stream);
                    });
}

std::future<Result<TransferResult>> Client::put_async(std::string bucket, std::string key,
                                                      std::span<const std::byte> src,
                                                      void* cuda_stream) {
  const int device = caller_device();
  return std::async(std::launch::async,
                    [this, bucket = std::move(bucket), key = std::move(key), src, device,
                     cuda_stream]() -> Result<TransferResult> {
                      if (src.empty() || !is_device_memory(src.data())) {
                        return put(bucket, key, src);
                      }
                      OBJDIRECT_RETURN_IF_ERROR(bind_device(device));
                      return impl_->put_device(bucket, key, src, cuda_stream);
                    });
}

std::vector<Result<TransferResult>> Client::get_many(std::span<const GetRequest> requests) {
  std::vector<Result<TransferResult>> out(requests.size(), Status(Errc::internal, "not started"));
  std::vector<std::span<std::byte>> bufs;
  std::vector<std::uint64_t> sizes;
  for (const auto& r : requests) {
    bufs.push_back(r.dst);
    sizes.push_back(r.range ? std::min<std::uint64_t>(r.range->length, r.dst.size())
                            : r.dst.size());
  }
  const auto pins = impl_->pin_batch(std::move(bufs), sizes, Client::Impl::Direction::download);
  (void)run_parallel(
      requests.size(), impl_->cfg.concurrency,
      [&](std::size_t i) -> Status {
        const auto& r = requests[i];
        if (r.if_match.empty() && !r.sse_c) {
          out[i] = get(r.bucket, r.key, r.dst, r.range);
        } else if (!r.dst.empty() && is_device_memory(r.dst.data())) {
          out[i] = Status(Errc::invalid_argument,
                          "if_match and SSE-C need host memory, not CUDA device memory");
        } else {
          client::SecretHeaders sse;
          if (r.sse_c) sse.h = client::sse_c_headers(*r.sse_c);
          out[i] = impl_->get_host(r.bucket, r.key, r.dst, r.range, false, r.if_match, sse.h);
        }
        return Status::Ok();
      },
      &impl_->helpers);
  return out;
}

std::vector<Result<TransferResult>> Client::put_many(std::span<const PutRequest> requests) {
  std::vector<Result<TransferResult>> out(requests.size(), Status(Errc::internal, "not started"));
  std::vector<std::span<std::byte>> bufs;
  std::vector<std::uint64_t> sizes;
  for (const auto& r : requests) {
    // Registered for the fabric's RDMA READ; never written through.
    bufs.push_back({const_cast<std::byte*>(r.src.data()), r.src.size()});
    sizes.push_back(r.src.size());
  }
  const auto pins = impl_->pin_batch(std::move(bufs), sizes, Client::Impl::Direction::upload);
  (void)run_parallel(
      requests.size(), impl_->cfg.concurrency,
      [&](std::size_t i) -> Status {
        const auto& r = requests[i];
        if (r.sse_c) {
          PutOptions o;
          o.sse_c = r.sse_c;
          out[i] = put(r.bucket, r.key, r.src, o);
        } else {
          out[i] = put(r.bucket, r.key, r.src);
        }
        return Status::Ok();
      },
      &impl_->helpers);
  return out;
}
}  // namespace objdirect
