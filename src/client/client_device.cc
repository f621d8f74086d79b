// Client::Impl, CUDA device memory through the staging pipeline (docs/gpu.md): pinned host
// staging pools registered once with the fabric, chunks moved with cudaMemcpyAsync on the
// caller's stream while the next chunk is on the wire. The CPU touches only the staging memory,
// also when the server declines RDMA.
#include <algorithm>
#include <mutex>

#include "client/client_impl.hpp"
#include "client/cuda/bounce.hpp"
#include "client/cuda/device_path.hpp"
#include "client/s3_xml.hpp"
#include "common/checksum.hpp"
#include "common/limits.hpp"
#include "common/uri.hpp"

namespace objdirect {

using client::HttpClient;
using client::HttpRequest;
using client::HttpResponse;
using client::Piece;

std::string_view memory_kind_name(MemoryKind kind) noexcept {
  switch (kind) {
    case MemoryKind::host:
      return "host";
    case MemoryKind::cuda_device:
      return "cuda-device";
    case MemoryKind::cuda_managed:
      return "cuda-managed";
  }
  return "host";
}

MemoryKind memory_kind(const void* ptr) noexcept {
  switch (cuda::classify_buffer(ptr)) {
    case cuda::PointerKind::device:
      return MemoryKind::cuda_device;
    case cuda::PointerKind::managed:
      return MemoryKind::cuda_managed;
    case cuda::PointerKind::host:
    case cuda::PointerKind::unknown:
      break;
  }
  return MemoryKind::host;
}

Status cuda_memory_status() {
  if (cuda::cuda_loaded_in_process()) return Status::Ok();
  auto api = cuda::CudaApi::get();
  std::string why = "CUDA is not loaded in this process";
  if (!api.ok()) why += " (" + api.status().message() + ")";
  return Status(Errc::unavailable, std::move(why));
}

bool Client::Impl::direct_capable(const void* p) {
  std::string reason;
  auto f = current_fabric(reason);
  if (!f) return false;
  transport::Capabilities caps;
  caps.cuda_memory = f->cuda_memory();
  return cuda::choose_path(cuda::classify_buffer(p), caps) == cuda::DevicePath::direct;
}

Result<client::DeviceStaging::Lease> Client::Impl::lease_staging(std::size_t chunk_bytes) {
  return staging.acquire(chunk_bytes,
                         [this](std::span<std::byte> all) -> Result<std::shared_ptr<void>> {
                           std::string reason;
                           auto f = current_fabric(reason);
                           if (!f) return std::shared_ptr<void>();  // HTTP only: nothing
                           return f->pin(all.data(), all.size());
                         });
}

Result<TransferResult> Client::Impl::device_get_call(std::string_view bucket, std::string_view key,
                                                     std::span<std::byte> dst,
                                                     std::optional<ByteRange> range, void* stream) {
  if (range && range->length == 0) {
    TransferResult res;
    res.reason = "empty range";
    res.memory = "cuda-bounce";
    return res;
  }
  if (range && dst.size() < range->length) {
    return Status(Errc::invalid_argument,
                  "buffer of " + std::to_string(dst.size()) + " bytes is smaller than the range");
  }
  return device_get(client::object_target(bucket, key), dst, range,
                    static_cast<cudaStream_t>(stream));
}

Result<TransferResult> Client::Impl::device_get(const std::string& target, std::span<std::byte> dst,
                                                std::optional<ByteRange> range,
                                                cudaStream_t stream) {
  TransferResult res;
  res.memory = "cuda-bounce";
  const std::uint64_t base = range ? range->offset : 0;
  const std::uint64_t want = range ? range->length : dst.size();
  auto lease = lease_staging(cfg.part_size_bytes);
  if (!lease.ok()) return lease.status();
  cuda::BounceContext& ctx = **lease;
  const std::size_t chunk = ctx.pool().chunk_bytes();

  std::mutex mu;  // guards info and res.requests (chunks may be fetched on several threads)
  PathInfo info;
  std::uint64_t total = 0;

  // First chunk alone: it learns the object's size and the ETag that pins the other chunks.
  const std::size_t first_len = static_cast<std::size_t>(std::min<std::uint64_t>(want, chunk));
  auto first = ctx.get(
      dst.data(), first_len, stream,
      [&](const cuda::Chunk&, std::span<std::byte> staging_span,
          std::size_t) -> Result<std::size_t> {
        auto o = get_one(target, Piece{base, staging_span.size(), 0, 0}, staging_span, "");
        ++res.requests;
        if (!o.ok() && o.code() == Errc::invalid_range && !range) {
          // A ranged GET of an empty object: fetch it whole (it is empty or fits the slot).
          o = get_one(target, std::nullopt, staging_span, "");
          ++res.requests;
        }
        if (!o.ok()) return o.status();
        info.merge(o->info);
        res.etag = s3::unquote_etag(o->resp.header("etag").value_or(""));
        if (o->resp.status == 206) {
          auto cr = client::parse_content_range(o->resp.header("content-range").value_or(""));
          if (!cr) return Status(Errc::io_error, "206 reply without a valid Content-Range");
          if (cr->last - cr->first + 1 != o->bytes) {
            return Status(Errc::io_error, "reply carried " + std::to_string(o->bytes) +
                                              " bytes for a range of " +
                                              std::to_string(cr->last - cr->first + 1));
          }
          total = cr->total;
        } else {
          total = o->bytes;
          if (base > 0) return Status(Errc::io_error, "server ignored the Range header");
        }
        if (!range && total > dst.size()) {
          return Status(Errc::invalid_argument, "buffer of " + std::to_string(dst.size()) +
                                                    " bytes is too small for the " +
                                                    std::to_string(total) + "-byte object");
        }
        return static_cast<std::size_t>(o->bytes);
      });
  if (!first.ok()) return first.status();
  res.object_size = total;
  std::uint64_t got = first->bytes;
  const std::uint64_t end = range ? std::min(base + want, total) : total;
  if (got == first_len && base + got < end) {
    if (res.etag.empty()) return Status(Errc::io_error, "no ETag to pin a multi-part download");
    const std::uint64_t start = base + got;
    cuda::BounceOptions opts;
    opts.fetch_concurrency = std::max<std::size_t>(limits::client_staging_slots / 2, 1);
    auto rest = ctx.get(
        dst.data() + got, end - start, stream,
        [&](const cuda::Chunk& c, std::span<std::byte> staging_span,
            std::size_t) -> Result<std::size_t> {
          auto o = get_one(target, Piece{start + c.offset, c.length, 0, 0}, staging_span, res.etag);
          if (!o.ok()) return o.status();
          std::lock_guard lk(mu);
          ++res.requests;
          info.merge(o->info);
          if (o->bytes != c.length) {
            return Status(Errc::io_error, "part at " + std::to_string(start + c.offset) +
                                              " carried " + std::to_string(o->bytes) + " of " +
                                              std::to_string(c.length) + " bytes");
          }
          return static_cast<std::size_t>(o->bytes);
        },
        opts);
    if (!rest.ok()) return rest.status();
    got += rest->bytes;
  }
  res.bytes = got;
  info.fill(res);
  return res;
}

Result<TransferResult> Client::Impl::device_put(const std::string& target,
                                                std::span<const std::byte> src,
                                                cudaStream_t stream) {
  auto plan = client::plan_upload(src.size(), cfg.part_size_bytes, cfg.multipart_threshold_bytes);
  if (!plan.ok()) return plan.status();
  TransferResult res;
  res.memory = "cuda-bounce";
  res.object_size = src.size();
  const std::size_t chunk = plan->multipart ? plan->part_size : cfg.part_size_bytes;
  auto lease = lease_staging(chunk);
  if (!lease.ok()) return lease.status();
  cuda::BounceContext& ctx = **lease;
  PathInfo info;
  std::string upload_id;
  if (plan->multipart) {
    auto id = create_upload(target, "CRC32C");
    ++res.requests;
    if (!id.ok()) return id.status();
    upload_id = std::move(*id);
  }
  std::vector<std::string> etags, crc32c;
  auto put = ctx.put(
      src.data(), src.size(), stream,
      [&](const cuda::Chunk& c, std::span<const std::byte> staging_span, std::size_t) -> Status {
        Checksummer sum(ChecksumAlgo::crc32c);
        sum.update(staging_span.data(), staging_span.size());
        if (plan->multipart) crc32c.push_back(sum.digest_base64());
        std::string t = target;
        if (plan->multipart) {
          t += "?partNumber=" + std::to_string(c.index + 1) +
               "&uploadId=" + uri_encode(upload_id, true);
        }
        auto o = put_one(t, staging_span, sum.digest_base64());
        if (!o.ok()) return o.status();
        res.requests += o->requests;
        if (plan->multipart && o->etag.empty()) {
          return Status(Errc::io_error, "UploadPart reply has no ETag");
        }
        etags.push_back(std::move(o->etag));
        info.merge(o->info);
        return Status::Ok();
      });
  if (!put.ok()) {
    if (plan->multipart) abort_upload(target, upload_id);
    return put.status();
  }
  if (plan->multipart) {
    auto etag = complete_upload(target, upload_id, etags, crc32c);
    ++res.requests;
    if (!etag.ok()) return etag.status();
    res.etag = std::move(*etag);
  } else {
    res.etag = etags.empty() ? std::string() : etags.front();
  }
  res.bytes = put->bytes;
  info.fill(res);
  return res;
}
}  // namespace objdirect
