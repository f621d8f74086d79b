// The bounce path: moving object bytes between the network and CUDA device memory through
// RDMA-registered pinned host staging buffers, in chunks, with the network transfer of one chunk
// overlapping the device copy of the previous one.
//
// Layers, each usable on its own:
//  - CopyEngine: starts a copy between a staging slot and device memory and waits for a slot's
//    copies. CudaCopyEngine uses cudaMemcpyAsync on the caller's stream plus one event per slot;
//    HostCopyEngine uses memcpy, so that the SAME scheduler runs in unit tests with host memory
//    standing in for device memory.
//  - StagingPool: `slots` buffers of `chunk_bytes` in one allocation (pinned with cudaMallocHost,
//    or plain aligned host memory for tests), registered once with the fabric through a caller
//    callback and reused for every transfer.
//  - BouncePipeline: the scheduler. GET: for chunk i, wait until slot i%slots is free (its last
//    copy done), fetch chunk i from the network into it, start its copy to the device. PUT runs
//    the other way: copies of the first `slots` chunks start at once; for chunk i, wait for its
//    copy, store it to the network, start the copy of chunk i+slots into the freed slot.
//  - BounceContext: a pool plus a CUDA engine per call, with sync and async entry points taking a
//    CUDA stream; what libobjdirect's Client calls for device pointers (see docs/gpu.md).
//
// Never is a device pointer dereferenced on the CPU: device memory is only ever an argument of
// CopyEngine::start_copy (docs/gpu.md: libfabric#7977, minio-cpp#239).
//
// Thread safety: CopyEngine, StagingPool and BouncePipeline are thread-compatible (one transfer at
// a time). BounceContext is thread-safe: calls are serialised on its pool.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "client/cuda/cuda_types.hpp"
#include "common/status.hpp"

namespace objdirect::limits {
// Largest staging chunk (one network request / one device copy).
inline constexpr std::size_t bounce_chunk_bytes_max = std::size_t{1} << 30;
// Most staging slots in one pool (chunks in flight between network and device).
inline constexpr std::size_t bounce_slots_max = 64;
}  // namespace objdirect::limits

namespace objdirect::cuda {

enum class CopyDirection : std::uint8_t { to_device, to_host };

// Moves bytes between host staging memory and device memory.
// Thread safety: thread-compatible; the pipeline drives one engine from one thread.
class CopyEngine {
 public:
  virtual ~CopyEngine() = default;
  // Starts copying n > 0 bytes from src to dst; one side is inside staging slot `slot`. May
  // return before the copy ends. Errors: io_error (the copy could not be queued).
  virtual Status start_copy(std::size_t slot, void* dst, const void* src, std::size_t n,
                            CopyDirection direction) = 0;
  // Blocks until every copy started on `slot` has ended. Errors: io_error (a copy failed).
  virtual Status wait_slot(std::size_t slot) = 0;
};

// memcpy: for tests and for managed/host memory. Copies complete inside start_copy.
class HostCopyEngine : public CopyEngine {
 public:
  Status start_copy(std::size_t slot, void* dst, const void* src, std::size_t n,
                    CopyDirection direction) override;
  Status wait_slot(std::size_t slot) override;
};

// cudaMemcpyAsync on `stream` (nullptr: the legacy default stream) and one event per slot.
// Copies are ordered after work already queued on the stream, so a GET never overwrites a buffer
// that an earlier kernel on the stream still reads, and a PUT reads what an earlier kernel wrote.
class CudaCopyEngine : public CopyEngine {
 public:
  // Errors: unavailable (no CUDA), io_error (event creation failed).
  static Result<std::unique_ptr<CudaCopyEngine>> create(cudaStream_t stream, std::size_t slots);
  ~CudaCopyEngine() override;
  Status start_copy(std::size_t slot, void* dst, const void* src, std::size_t n,
                    CopyDirection direction) override;
  Status wait_slot(std::size_t slot) override;

 private:
  CudaCopyEngine() = default;
  cudaStream_t stream_ = nullptr;
  std::vector<cudaEvent_t> events_;
};

// Staging buffers: `slots` x `chunk_bytes`, contiguous, 4 KiB aligned.
class StagingPool {
 public:
  // Registers the whole allocation once (e.g. with the client's fabric, so RDMA lands in the
  // slots); the returned object is kept alive as long as the pool. May be empty (no RDMA).
  using RegisterFn = std::function<Result<std::shared_ptr<void>>(std::span<std::byte>)>;

  // Pinned memory from cudaMallocHost. Errors: invalid_argument (0 or over the *_max limits),
  // unavailable (no CUDA), no_space (allocation failed), whatever `register_fn` returns.
  static Result<std::unique_ptr<StagingPool>> create_pinned(std::size_t slots,
                                                            std::size_t chunk_bytes,
                                                            const RegisterFn& register_fn = {});
  // Ordinary aligned host memory (tests, or hosts without CUDA). Same errors, less unavailable.
  static Result<std::unique_ptr<StagingPool>> create_host(std::size_t slots,
                                                          std::size_t chunk_bytes,
                                                          const RegisterFn& register_fn = {});
  ~StagingPool();
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  std::size_t slots() const noexcept { return slots_; }
  std::size_t chunk_bytes() const noexcept { return chunk_bytes_; }
  std::span<std::byte> slot(std::size_t i) const noexcept {
    return {base_ + i * chunk_bytes_, chunk_bytes_};
  }
  std::span<std::byte> all() const noexcept { return {base_, slots_ * chunk_bytes_}; }

 private:
  StagingPool() = default;
  static Result<std::unique_ptr<StagingPool>> finish(std::unique_ptr<StagingPool> pool,
                                                     const RegisterFn& register_fn);
  std::byte* base_ = nullptr;
  std::size_t slots_ = 0;
  std::size_t chunk_bytes_ = 0;
  bool pinned_ = false;
  std::shared_ptr<void> registration_;
};

// One chunk of a transfer: bytes [offset, offset+length) of it (offset relative to the start of
// the transfer: the caller adds a Range start or a part offset).
struct Chunk {
  std::size_t index = 0;
  std::size_t offset = 0;
  std::size_t length = 0;
};

// GET: fill staging[0, chunk.length) with the chunk's bytes (the staging span is exactly
// chunk.length long and lies in slot `slot` of the pool). Returns the bytes delivered: fewer than
// chunk.length means the data ended there (e.g. a range cut at the end of the object) and ends
// the transfer. Any error ends it too.
using FetchChunk = std::function<Result<std::size_t>(
    const Chunk& chunk, std::span<std::byte> staging, std::size_t slot)>;
// PUT: send staging (exactly chunk.length bytes of the device data) to the network.
using StoreChunk =
    std::function<Status(const Chunk& chunk, std::span<const std::byte> staging, std::size_t slot)>;

struct BounceResult {
  std::size_t bytes = 0;  // bytes that reached the device (GET) or the network (PUT)
  std::size_t chunks = 0;
  // CRC32C (standard, inverted) of those bytes, when asked for: computed on the CPU over each
  // staging chunk, in order (the host fallback of device checksums; see docs/gpu.md).
  std::optional<std::uint32_t> crc32c;
};

struct BounceOptions {
  bool crc32c = false;
  // GET only: chunks fetched at once (1..pool slots; 0 counts as 1). Above 1, the chunks of a
  // batch are fetched on that many threads (fetch must then be thread-safe) while the device
  // copies of the previous batch run; the copies still start in chunk order. A failure in a batch
  // starts no copy for it or any later chunk, but other fetches of the same batch may have run.
  std::size_t fetch_concurrency = 1;
};

// The chunk scheduler. Uses every slot of `pool`; `engine` must accept slot indexes below
// pool.slots().
// On any failure (fetch, store, start_copy, wait_slot) no further fetch, store or copy is started;
// copies already started are waited for (so the staging memory is free again on return) and the
// first error is returned.
class BouncePipeline {
 public:
  BouncePipeline(StagingPool& pool, CopyEngine& engine) : pool_(pool), engine_(engine) {}

  // Network -> device: size bytes into device_dst (any byte offset into a device buffer).
  // size 0 calls nothing. Errors: whatever fetch or the engine return; internal (fetch claimed
  // more bytes than asked).
  Result<BounceResult> get(void* device_dst, std::size_t size, const FetchChunk& fetch,
                           const BounceOptions& options = {});
  // Device -> network: size bytes from device_src, stored chunk by chunk in order.
  Result<BounceResult> put(const void* device_src, std::size_t size, const StoreChunk& store,
                           const BounceOptions& options = {});

 private:
  Status drain(std::vector<bool>& busy, Status first);
  StagingPool& pool_;
  CopyEngine& engine_;
};

struct BounceConfig {
  std::size_t chunk_bytes = 8u << 20;  // one network request per chunk
  std::size_t slots = 4;               // chunks in flight between network and device
};

// A reusable pinned staging pool (registered once) plus per-call CUDA copy engines.
//
// Stream semantics: every device copy is queued on `stream` (nullptr: the legacy default stream),
// after work already queued there. get/put return, and the async futures become ready, only once
// every copy has completed (each slot's event has been waited for), so the data is then in device
// memory (GET) or out of it (PUT), visible to work on `stream` and to any other stream or the host.
// Work queued on `stream` by another thread while the call runs is ordered between our copies.
class BounceContext {
 public:
  // Errors: as StagingPool::create_pinned.
  static Result<std::unique_ptr<BounceContext>> create(const BounceConfig& config,
                                                       const StagingPool::RegisterFn& register_fn);

  const StagingPool& pool() const noexcept { return *pool_; }

  // Errors: invalid_argument (device_dst null with size > 0), unavailable (no CUDA), io_error
  // (a CUDA copy failed), and whatever fetch/store return.
  Result<BounceResult> get(void* device_dst, std::size_t size, cudaStream_t stream,
                           const FetchChunk& fetch, const BounceOptions& options = {});
  Result<BounceResult> put(const void* device_src, std::size_t size, cudaStream_t stream,
                           const StoreChunk& store, const BounceOptions& options = {});
  // The same on a thread of their own (bound to the caller's current CUDA device). The buffers and
  // callbacks must stay valid until the future is ready.
  std::future<Result<BounceResult>> get_async(void* device_dst, std::size_t size,
                                              cudaStream_t stream, FetchChunk fetch,
                                              BounceOptions options = {});
  std::future<Result<BounceResult>> put_async(const void* device_src, std::size_t size,
                                              cudaStream_t stream, StoreChunk store,
                                              BounceOptions options = {});

 private:
  BounceContext() = default;
  std::mutex mu_;  // one transfer at a time per pool
  std::unique_ptr<StagingPool> pool_;
};

}  // namespace objdirect::cuda
