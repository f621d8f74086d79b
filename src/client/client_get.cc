// Client::get and Client::Impl's GET path: one GET request (a token first when RDMA is proposed,
// the body over HTTP otherwise or after a decline), the host flow (the first request learns the
// size and the ETag, the rest go as parallel Range GETs pinned with If-Match), and the dispatch
// of device memory to GPUDirect or the staging pipeline (client_device.cc).
#include <algorithm>
#include <atomic>

#include "client/client_impl.hpp"
#include "client/s3_xml.hpp"
#include "common/parallel.hpp"

namespace objdirect {

using client::HttpClient;
using client::HttpRequest;
using client::HttpResponse;
using client::Piece;

using client::is_device_memory;
using client::parse_u64;

Result<Client::Impl::GetOutcome> Client::Impl::get_one(const std::string& target,
                                                       std::optional<Piece> range,
                                                       std::span<std::byte> dst,
                                                       const std::string& if_match, bool direct,
                                                       const client::Headers& sse, CallRoute call) {
  GetOutcome out;
  HttpRequest req;
  client::HeadersWiper wipe{req.headers};
  req.method = "GET";
  req.target = target;
  if (range) req.headers.emplace_back("range", client::range_header(range->offset, range->length));
  if (!if_match.empty()) req.headers.emplace_back("if-match", "\"" + if_match + "\"");
  req.headers.insert(req.headers.end(), sse.begin(), sse.end());
  std::shared_ptr<void> hold;
  std::shared_ptr<client::Fabric> fabric_used;
  std::string token =
      try_token(dst, Direction::download, out.info, hold, fabric_used, direct, call);
  if (rdma_required(direct) && token.empty() && !dst.empty()) {
    return Status(Errc::rdma_declined, out.info.reason);
  }
  if (!token.empty()) {
    auto r = execute_rdma(req, direct ? std::nullopt : std::optional(dst), dst, std::move(token),
                          out.info, hold, fabric_used, direct);
    req.retry = true;  // a fallback below is a plain request
    if (!r.ok()) return r.status();
    if (!r->ok()) {
      Status st = client::status_from_response(*r);
      if (st.code() != Errc::invalid_rdma_token && st.code() != Errc::rdma_transfer_failed &&
          st.code() != Errc::rdma_declined && st.code() != Errc::slow_down &&
          st.code() != Errc::rdma_endpoint_unbound && st.code() != Errc::rdma_token_replayed) {
        return st;
      }
      // The server refused the token itself: ask again without one.
      out.info.fell_back = true;
      out.info.reason = "server refused the token: " + st.message();
      if (st.code() == Errc::rdma_transfer_failed) fabric_failed(fabric_used, st.message());
      if (rdma_required(direct)) return Status(Errc::rdma_declined, out.info.reason);
    } else {
      auto reply = r->header("x-amz-rdma-reply");
      if (reply && (*reply == "200" || *reply == "206" || *reply == "204")) {
        auto moved = r->header("x-amz-rdma-bytes-transferred");
        std::uint64_t n = 0;
        if (*reply != "204" && (!moved || !parse_u64(*moved, n))) {
          return Status(Errc::io_error, "RDMA reply without a valid x-amz-rdma-bytes-transferred");
        }
        if (n > dst.size()) {
          return Status(Errc::io_error, "server reports more RDMA bytes than the buffer holds");
        }
        out.bytes = n;
        out.resp = std::move(*r);
        return out;
      }
      out.info.fell_back = true;
      out.info.reason = reply
                            ? "server declined RDMA (x-amz-rdma-reply: " + std::string(*reply) + ")"
                            : "server ignored x-amz-rdma-token (no x-amz-rdma-reply)";
      if (rdma_required(direct)) return Status(Errc::rdma_declined, out.info.reason);
      out.bytes = r->sink_bytes;
      out.resp = std::move(*r);
      return out;
    }
  } else {
    out.info.plain = true;
  }
  auto r = http->execute(req, dst);
  if (!r.ok()) return r.status();
  if (!r->ok()) return client::status_from_response(*r);
  out.bytes = r->sink_bytes;
  out.resp = std::move(*r);
  return out;
}

Result<TransferResult> Client::get(std::string_view bucket, std::string_view key,
                                   const MemoryHandle& dst, std::optional<ByteRange> range) {
  return get(bucket, key, dst.span(), range);
}

Result<TransferResult> Client::get(std::string_view bucket, std::string_view key,
                                   std::span<std::byte> dst, std::optional<ByteRange> range) {
  if (!dst.empty() && is_device_memory(dst.data()))
    return impl_->get_device(bucket, key, dst, range, {});
  return impl_->get_host(bucket, key, dst, range, false);
}

Result<TransferResult> Client::get(std::string_view bucket, std::string_view key,
                                   std::span<std::byte> dst, std::optional<ByteRange> range,
                                   const GetOptions& options) {
  if (!options.sse_c && options.if_match.empty()) return get(bucket, key, dst, range);
  if (!dst.empty() && is_device_memory(dst.data())) {
    return Status(Errc::invalid_argument,
                  "GetOptions (if_match, SSE-C key) need host memory, not CUDA device memory");
  }
  client::SecretHeaders sse;
  if (options.sse_c) sse.h = client::sse_c_headers(*options.sse_c);
  return impl_->get_host(bucket, key, dst, range, false, options.if_match, sse.h);
}

Result<TransferResult> Client::Impl::get_device(std::string_view bucket, std::string_view key,
                                                std::span<std::byte> dst,
                                                std::optional<ByteRange> range, void* cuda_stream) {
  std::string declined;
  if (direct_capable(dst.data())) {
    // GPUDirect RDMA: the host flow with the device range registered by the fabric.
    auto r = get_host(bucket, key, dst, range, true);
    if (r.ok()) r->memory = "cuda-direct";
    if (r.ok() || r.code() != Errc::rdma_declined) return r;
    declined = "GPUDirect declined (" + r.status().message() + "), bytes moved through staging";
  }
  // The staging pipeline (the CPU never touches dst).
  auto r = device_get_call(bucket, key, dst, range, cuda_stream);
  if (r.ok() && !declined.empty()) {
    r->reason = r->reason.empty() ? declined : declined + "; " + r->reason;
  }
  return r;
}

Result<TransferResult> Client::Impl::get_host(std::string_view bucket, std::string_view key,
                                              std::span<std::byte> dst,
                                              std::optional<ByteRange> range, bool direct,
                                              std::string_view if_match,
                                              const client::Headers& sse) {
  const std::string target = client::object_target(bucket, key);
  const std::uint64_t part = cfg.part_size_bytes;
  TransferResult res;
  PathInfo info;

  std::optional<Piece> first;
  if (range) {
    if (range->length == 0) {
      res.reason = "empty range";
      return res;
    }
    if (dst.size() < range->length) {
      return Status(Errc::invalid_argument,
                    "buffer of " + std::to_string(dst.size()) + " bytes is smaller than the range");
    }
    first = Piece{range->offset, std::min(range->length, part), 0, 0};
  } else if (dst.empty()) {
    // Nothing to read into: HEAD tells whether the object is empty. Never ask for a body the
    // buffer cannot hold (dropping a connection mid-body wastes the server's work).
    auto h = head(bucket, key, sse);
    ++res.requests;
    if (!h.ok()) return h.status();
    if (h->size > 0) {
      return Status(Errc::invalid_argument,
                    "empty buffer for a " + std::to_string(h->size) + "-byte object");
    }
    res.etag = h->etag;
    res.reason = "empty transfer";
    return res;
  } else {
    // At most what the buffer holds: a larger object shows in Content-Range and is refused
    // without receiving bytes that have nowhere to go.
    first = Piece{0, std::min<std::uint64_t>(dst.size(), part), 0, 0};
  }

  // Which path: auto's measurements for this size, when they decide (auto_choice).
  const std::uint64_t call_bytes = range ? range->length : dst.size();
  const auto choice = auto_choice(call_bytes, Direction::download, direct);
  const CallRoute via = route(call_bytes, choice);

  // First request: learns the size and the ETag that pins the remaining parts.
  const std::string pin(if_match);
  auto o =
      get_one(target, first, first ? dst.subspan(0, first->length) : dst, pin, direct, sse, via);
  ++res.requests;
  if (!o.ok() && o.code() == Errc::invalid_range && !range) {
    // A ranged GET of an empty object: fetch it whole.
    first.reset();
    o = get_one(target, std::nullopt, dst, pin, direct, sse, via);
    ++res.requests;
  }
  if (!o.ok()) {
    if (o.code() == Errc::invalid_argument && !first) {
      return Status(Errc::invalid_argument, "buffer of " + std::to_string(dst.size()) +
                                                " bytes is too small for the object");
    }
    return o.status();
  }
  if (!range && o->resp.status == 200 && first) {
    // The server ignored Range and sent the whole object, which fitted (the sink refuses more).
    first.reset();
  }
  info.merge(o->info);
  res.etag = s3::unquote_etag(o->resp.header("etag").value_or(""));
  std::uint64_t got = o->bytes;
  std::uint64_t total = 0;
  if (o->resp.status == 206) {
    auto cr = client::parse_content_range(o->resp.header("content-range").value_or(""));
    if (!cr) return Status(Errc::io_error, "206 reply without a valid Content-Range");
    total = cr->total;
    if (cr->last - cr->first + 1 != got) {
      return Status(Errc::io_error, "reply carried " + std::to_string(got) +
                                        " bytes for a range of " +
                                        std::to_string(cr->last - cr->first + 1));
    }
  } else {
    // 200: the whole object arrived (the server may ignore Range).
    total = got;
    if (range && range->offset > 0) {
      return Status(Errc::io_error, "server ignored the Range header");
    }
  }
  res.object_size = total;

  std::uint64_t start = first ? first->offset + got : got;
  std::uint64_t end;
  if (range) {
    end = std::min(range->offset + range->length, total);
  } else {
    end = total;
    if (total > dst.size()) {
      return Status(Errc::invalid_argument, "buffer of " + std::to_string(dst.size()) +
                                                " bytes is too small for the " +
                                                std::to_string(total) + "-byte object");
    }
  }
  if (start < end) {
    if (res.etag.empty()) return Status(Errc::io_error, "no ETag to pin a multi-part download");
    const std::uint64_t base = range ? range->offset : 0;
    auto pieces = client::split_range(start, end - start, part, start - base);
    std::vector<PathInfo> infos(pieces.size());
    std::atomic<std::uint64_t> bytes{0};
    Status st = run_parallel(
        pieces.size(), cfg.concurrency,
        [&](std::size_t i) -> Status {
          const Piece& p = pieces[i];
          auto r = get_one(target, p, dst.subspan(p.buffer_offset, p.length), res.etag, direct, sse,
                           via);
          if (!r.ok()) return r.status();
          if (r->bytes != p.length) {
            return Status(Errc::io_error, "part at " + std::to_string(p.offset) + " carried " +
                                              std::to_string(r->bytes) + " of " +
                                              std::to_string(p.length) + " bytes");
          }
          infos[i] = std::move(r->info);
          bytes += r->bytes;
          return Status::Ok();
        },
        &helpers);
    if (!st.ok()) return st;
    for (const auto& i : infos) info.merge(i);
    got += bytes.load();
    res.requests += static_cast<std::uint32_t>(pieces.size());
  }
  res.bytes = got;
  info.fill(res);
  stats.on_transfer(res);
  auto_learned(choice, res);
  return res;
}
}  // namespace objdirect
