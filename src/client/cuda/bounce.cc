#include "client/cuda/bounce.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "client/cuda/cuda_api.hpp"
#include "common/checksum.hpp"

namespace objdirect::cuda {
namespace {

constexpr std::size_t k_staging_alignment = 4096;

// Streaming CRC32C over staging memory (host bytes only).
class Crc32c {
 public:
  void update(const std::byte* p, std::size_t n) { sum_.update(p, n); }
  std::uint32_t value() const {
    std::string raw = sum_.digest_raw();  // big-endian
    std::uint32_t v = 0;
    for (char c : raw) v = (v << 8) | static_cast<std::uint8_t>(c);
    return v;
  }

 private:
  Checksummer sum_{ChecksumAlgo::crc32c};
};

Status check_geometry(std::size_t slots, std::size_t chunk_bytes) {
  if (slots == 0 || slots > limits::bounce_slots_max) {
    return {Errc::invalid_argument,
            "staging slots must be 1.." + std::to_string(limits::bounce_slots_max)};
  }
  if (chunk_bytes == 0 || chunk_bytes > limits::bounce_chunk_bytes_max) {
    return {Errc::invalid_argument, "staging chunk must be 1.." +
                                        std::to_string(limits::bounce_chunk_bytes_max) + " bytes"};
  }
  return Status::Ok();
}

}  // namespace

// ---- engines ----

Status HostCopyEngine::start_copy(std::size_t, void* dst, const void* src, std::size_t n,
                                  CopyDirection) {
  std::memcpy(dst, src, n);
  return Status::Ok();
}

Status HostCopyEngine::wait_slot(std::size_t) {
  return Status::Ok();
}

Result<std::unique_ptr<CudaCopyEngine>> CudaCopyEngine::create(cudaStream_t stream,
                                                               std::size_t slots) {
  auto api = CudaApi::get();
  if (!api.ok()) return api.status();
  std::unique_ptr<CudaCopyEngine> engine(new CudaCopyEngine());
  engine->stream_ = stream;
  for (std::size_t i = 0; i < slots; ++i) {
    cudaEvent_t ev = nullptr;
    // No timing: cheaper to record and to wait for.
    if (cudaError_t e = (*api)->event_create_with_flags(&ev, k_event_disable_timing);
        e != k_success) {
      return (*api)->runtime_error("cudaEventCreateWithFlags", e);
    }
    engine->events_.push_back(ev);
  }
  return engine;
}

CudaCopyEngine::~CudaCopyEngine() {
  auto api = CudaApi::get();
  if (!api.ok()) return;
  for (cudaEvent_t ev : events_) (*api)->event_destroy(ev);
}

Status CudaCopyEngine::start_copy(std::size_t slot, void* dst, const void* src, std::size_t n,
                                  CopyDirection direction) {
  const CudaApi& api = **CudaApi::get();  // create() succeeded, so the API is loaded
  int kind =
      direction == CopyDirection::to_device ? k_memcpy_host_to_device : k_memcpy_device_to_host;
  if (cudaError_t e = api.memcpy_async(dst, src, n, kind, stream_); e != k_success) {
    return api.runtime_error("cudaMemcpyAsync", e);
  }
  if (cudaError_t e = api.event_record(events_.at(slot), stream_); e != k_success) {
    return api.runtime_error("cudaEventRecord", e);
  }
  return Status::Ok();
}

Status CudaCopyEngine::wait_slot(std::size_t slot) {
  const CudaApi& api = **CudaApi::get();
  // An event never recorded counts as complete, so waiting on a fresh slot is fine.
  if (cudaError_t e = api.event_synchronize(events_.at(slot)); e != k_success) {
    return api.runtime_error("cudaEventSynchronize", e);
  }
  return Status::Ok();
}

// ---- staging ----

StagingPool::~StagingPool() {
  registration_.reset();  // deregister before the memory goes
  if (base_ == nullptr) return;
  if (pinned_) {
    if (auto api = CudaApi::get(); api.ok()) (*api)->free_host(base_);
  } else {
    std::free(base_);
  }
}

Result<std::unique_ptr<StagingPool>> StagingPool::finish(std::unique_ptr<StagingPool> pool,
                                                         const RegisterFn& register_fn) {
  if (register_fn) {
    auto reg = register_fn(pool->all());
    if (!reg.ok()) return reg.status();
    pool->registration_ = std::move(*reg);
  }
  return pool;
}

Result<std::unique_ptr<StagingPool>> StagingPool::create_pinned(std::size_t slots,
                                                                std::size_t chunk_bytes,
                                                                const RegisterFn& register_fn) {
  OBJDIRECT_RETURN_IF_ERROR(check_geometry(slots, chunk_bytes));
  auto api = CudaApi::get();
  if (!api.ok()) return api.status();
  std::unique_ptr<StagingPool> pool(new StagingPool());
  void* p = nullptr;
  if (cudaError_t e = (*api)->malloc_host(&p, slots * chunk_bytes); e != k_success) {
    return Status(Errc::no_space, (*api)->runtime_error("cudaMallocHost", e).message());
  }
  pool->base_ = static_cast<std::byte*>(p);
  pool->pinned_ = true;
  pool->slots_ = slots;
  pool->chunk_bytes_ = chunk_bytes;
  return finish(std::move(pool), register_fn);
}

Result<std::unique_ptr<StagingPool>> StagingPool::create_host(std::size_t slots,
                                                              std::size_t chunk_bytes,
                                                              const RegisterFn& register_fn) {
  OBJDIRECT_RETURN_IF_ERROR(check_geometry(slots, chunk_bytes));
  std::size_t bytes = slots * chunk_bytes;
  bytes = (bytes + k_staging_alignment - 1) / k_staging_alignment * k_staging_alignment;
  void* p = std::aligned_alloc(k_staging_alignment, bytes);
  if (p == nullptr) return Status(Errc::no_space, "staging allocation failed");
  std::unique_ptr<StagingPool> pool(new StagingPool());
  pool->base_ = static_cast<std::byte*>(p);
  pool->slots_ = slots;
  pool->chunk_bytes_ = chunk_bytes;
  return finish(std::move(pool), register_fn);
}

// ---- scheduler ----

Status BouncePipeline::drain(std::vector<bool>& busy, Status first) {
  // Wait for every copy still using a slot, so that the staging memory may be reused (or freed)
  // when we return; keep the first error.
  for (std::size_t s = 0; s < busy.size(); ++s) {
    if (!busy[s]) continue;
    busy[s] = false;
    Status st = engine_.wait_slot(s);
    if (first.ok() && !st.ok()) first = std::move(st);
  }
  return first;
}

Result<BounceResult> BouncePipeline::get(void* device_dst, std::size_t size,
                                         const FetchChunk& fetch, const BounceOptions& options) {
  BounceResult result;
  if (size == 0) {
    if (options.crc32c) result.crc32c = Crc32c().value();
    return result;
  }
  const std::size_t slots = pool_.slots();
  const std::size_t chunk_bytes = pool_.chunk_bytes();
  std::vector<bool> busy(slots, false);
  std::optional<Crc32c> crc;
  if (options.crc32c) crc.emplace();
  auto* dst = static_cast<std::byte*>(device_dst);  // arithmetic only: never dereferenced here

  const std::size_t batch_max = std::clamp<std::size_t>(options.fetch_concurrency, 1, slots);
  const std::size_t chunks = (size + chunk_bytes - 1) / chunk_bytes;
  for (std::size_t first = 0; first < chunks; first += batch_max) {
    const std::size_t batch = std::min(batch_max, chunks - first);
    std::vector<Chunk> batch_chunks;
    for (std::size_t i = first; i < first + batch; ++i) {
      const std::size_t s = i % slots;
      if (busy[s]) {
        // The copy of chunk i-slots must have left the slot before the network overwrites it.
        busy[s] = false;
        if (Status st = engine_.wait_slot(s); !st.ok()) return drain(busy, std::move(st));
      }
      const std::size_t offset = i * chunk_bytes;
      batch_chunks.push_back(Chunk{i, offset, std::min(chunk_bytes, size - offset)});
    }
    auto fetch_one = [&](const Chunk& c) {
      const std::size_t s = c.index % slots;
      return fetch(c, pool_.slot(s).first(c.length), s);
    };
    std::vector<Result<std::size_t>> got;
    got.reserve(batch);
    if (batch == 1) {
      got.push_back(fetch_one(batch_chunks[0]));
    } else {
      std::vector<std::future<Result<std::size_t>>> others;
      for (std::size_t j = 1; j < batch; ++j) {
        others.push_back(std::async(std::launch::async, fetch_one, std::cref(batch_chunks[j])));
      }
      got.push_back(fetch_one(batch_chunks[0]));
      for (auto& f : others) got.push_back(f.get());
    }
    for (std::size_t j = 0; j < batch; ++j) {
      const Chunk& chunk = batch_chunks[j];
      const std::size_t s = chunk.index % slots;
      if (!got[j].ok()) return drain(busy, got[j].status());
      const std::size_t n = *got[j];
      if (n > chunk.length) {
        return drain(busy, Status(Errc::internal, "fetch returned " + std::to_string(n) +
                                                      " bytes for a chunk of " +
                                                      std::to_string(chunk.length)));
      }
      std::span<std::byte> staging = pool_.slot(s).first(n);
      if (n > 0) {
        if (crc) crc->update(staging.data(), n);
        busy[s] = true;
        Status st =
            engine_.start_copy(s, dst + chunk.offset, staging.data(), n, CopyDirection::to_device);
        if (!st.ok()) return drain(busy, std::move(st));
      }
      result.bytes += n;
      result.chunks = chunk.index + 1;
      if (n < chunk.length) {  // the data ended early (range cut at the object's end)
        if (Status st = drain(busy, Status::Ok()); !st.ok()) return st;
        if (crc) result.crc32c = crc->value();
        return result;
      }
    }
  }
  if (Status st = drain(busy, Status::Ok()); !st.ok()) return st;
  if (crc) result.crc32c = crc->value();
  return result;
}

Result<BounceResult> BouncePipeline::put(const void* device_src, std::size_t size,
                                         const StoreChunk& store, const BounceOptions& options) {
  BounceResult result;
  if (size == 0) {
    if (options.crc32c) result.crc32c = Crc32c().value();
    return result;
  }
  const std::size_t slots = pool_.slots();
  const std::size_t chunk_bytes = pool_.chunk_bytes();
  const std::size_t chunks = (size + chunk_bytes - 1) / chunk_bytes;
  std::vector<bool> busy(slots, false);
  std::optional<Crc32c> crc;
  if (options.crc32c) crc.emplace();
  const auto* src = static_cast<const std::byte*>(device_src);  // never dereferenced here

  auto chunk_at = [&](std::size_t i) {
    std::size_t offset = i * chunk_bytes;
    return Chunk{i, offset, std::min(chunk_bytes, size - offset)};
  };
  auto start = [&](std::size_t i) -> Status {
    Chunk c = chunk_at(i);
    std::size_t s = i % slots;
    busy[s] = true;
    return engine_.start_copy(s, pool_.slot(s).data(), src + c.offset, c.length,
                              CopyDirection::to_host);
  };
  // Fill the pipeline: the device copies of the first `slots` chunks run while chunk 0 is sent.
  for (std::size_t i = 0; i < std::min(slots, chunks); ++i) {
    if (Status st = start(i); !st.ok()) return drain(busy, std::move(st));
  }
  for (std::size_t i = 0; i < chunks; ++i) {
    const std::size_t s = i % slots;
    busy[s] = false;
    if (Status st = engine_.wait_slot(s); !st.ok()) return drain(busy, std::move(st));
    Chunk chunk = chunk_at(i);
    std::span<const std::byte> staging = pool_.slot(s).first(chunk.length);
    if (crc) crc->update(staging.data(), staging.size());
    if (Status st = store(chunk, staging, s); !st.ok()) return drain(busy, std::move(st));
    result.bytes += chunk.length;
    result.chunks = i + 1;
    if (i + slots < chunks) {
      if (Status st = start(i + slots); !st.ok()) return drain(busy, std::move(st));
    }
  }
  if (Status st = drain(busy, Status::Ok()); !st.ok()) return st;
  if (crc) result.crc32c = crc->value();
  return result;
}

// ---- context ----

Result<std::unique_ptr<BounceContext>> BounceContext::create(
    const BounceConfig& config, const StagingPool::RegisterFn& register_fn) {
  auto pool = StagingPool::create_pinned(config.slots, config.chunk_bytes, register_fn);
  if (!pool.ok()) return pool.status();
  std::unique_ptr<BounceContext> ctx(new BounceContext());
  ctx->pool_ = std::move(*pool);
  return ctx;
}

Result<BounceResult> BounceContext::get(void* device_dst, std::size_t size, cudaStream_t stream,
                                        const FetchChunk& fetch, const BounceOptions& options) {
  if (device_dst == nullptr && size > 0) return Status(Errc::invalid_argument, "null buffer");
  std::lock_guard lock(mu_);
  auto engine = CudaCopyEngine::create(stream, pool_->slots());
  if (!engine.ok()) return engine.status();
  return BouncePipeline(*pool_, **engine).get(device_dst, size, fetch, options);
}

Result<BounceResult> BounceContext::put(const void* device_src, std::size_t size,
                                        cudaStream_t stream, const StoreChunk& store,
                                        const BounceOptions& options) {
  if (device_src == nullptr && size > 0) return Status(Errc::invalid_argument, "null buffer");
  std::lock_guard lock(mu_);
  auto engine = CudaCopyEngine::create(stream, pool_->slots());
  if (!engine.ok()) return engine.status();
  return BouncePipeline(*pool_, **engine).put(device_src, size, store, options);
}

namespace {
int current_device() {
  int device = 0;
  if (auto api = CudaApi::get(); api.ok()) (*api)->get_device(&device);
  return device;
}
}  // namespace

std::future<Result<BounceResult>> BounceContext::get_async(void* device_dst, std::size_t size,
                                                           cudaStream_t stream, FetchChunk fetch,
                                                           BounceOptions options) {
  int device = current_device();
  return std::async(std::launch::async,
                    [=, this, fetch = std::move(fetch)]() -> Result<BounceResult> {
                      if (auto api = CudaApi::get(); api.ok()) {
                        OBJDIRECT_RETURN_IF_ERROR((*api)->bind_current_device(device));
                      }
                      return get(device_dst, size, stream, fetch, options);
                    });
}

std::future<Result<BounceResult>> BounceContext::put_async(const void* device_src, std::size_t size,
                                                           cudaStream_t stream, StoreChunk store,
                                                           BounceOptions options) {
  int device = current_device();
  return std::async(std::launch::async,
                    [=, this, store = std::move(store)]() -> Result<BounceResult> {
                      if (auto api = CudaApi::get(); api.ok()) {
                        OBJDIRECT_RETURN_IF_ERROR((*api)->bind_current_device(device));
                      }
                      return put(device_src, size, stream, store, options);
                    });
}

}  // namespace objdirect::cuda
