// libobjdirect_fake_cuda.so: a test-only stand-in for libcuda + libcudart, so that the Client's
// device-memory paths run on machines without a GPU (docs/gpu.md, "Testing without a GPU").
//
// It exports the driver and runtime symbols that objdirect::cuda::CudaApi resolves; tests point
// CudaApi at it with OBJDIRECT_CUDA_LIBRARY and OBJDIRECT_CUDART_LIBRARY.
//
// "Device memory" (cudaMalloc) is a memfd mapped TWICE: the address handed to the caller is
// mapped PROT_NONE, and the copy functions use a second, read-write alias of the same pages. Any
// CPU access to a device pointer therefore dies with SIGSEGV, which is how the tests prove that
// libobjdirect never touches device memory from the CPU. fake_cuda_alias() gives tests the
// read-write alias to check bytes.
//
// Streams are real FIFOs: each stream (and the legacy default stream) has a worker thread that
// runs its copies in order, after the call that queued them has returned; events record a
// position in a stream and cudaEventSynchronize waits for it. A scheduler that reused a staging
// slot before its copy ended would corrupt data here, as on a GPU.
//
// Thread safety: every exported function is thread-safe.
#include <sys/mman.h>
#include <unistd.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

namespace {

constexpr int kSuccess = 0;
constexpr int kInvalidValue = 1;      // cudaErrorInvalidValue / CUDA_ERROR_INVALID_VALUE
constexpr int kMemoryAllocation = 2;  // cudaErrorMemoryAllocation / CUDA_ERROR_OUT_OF_MEMORY
constexpr int kInvalidImage = 200;    // CUDA_ERROR_INVALID_IMAGE: no kernels here
constexpr int kNotSupported = 801;    // CUDA_ERROR_NOT_SUPPORTED
constexpr int kMemcpyHostToDevice = 1;
constexpr int kMemcpyDeviceToHost = 2;
constexpr int kMemcpyDeviceToDevice = 3;
constexpr int kAttrMemoryType = 2;
constexpr int kAttrIsManaged = 8;
constexpr unsigned kMemoryTypeHost = 1;
constexpr unsigned kMemoryTypeDevice = 2;

struct DeviceAlloc {
  std::byte* user = nullptr;   // PROT_NONE: what the caller sees
  std::byte* alias = nullptr;  // read-write view of the same pages
  std::size_t size = 0;        // requested size
  std::size_t mapped = 0;      // page-rounded
  int fd = -1;
};

std::mutex g_mu;
std::map<std::uintptr_t, DeviceAlloc> g_device;  // by user address
std::map<std::uintptr_t, std::size_t> g_pinned;  // cudaMallocHost / cudaHostRegister
thread_local int t_device = 0;

// The device allocation containing [p, p+n), or nullptr.
const DeviceAlloc* find_device(const void* p, std::size_t n) {
  auto a = reinterpret_cast<std::uintptr_t>(p);
  auto it = g_device.upper_bound(a);
  if (it == g_device.begin()) return nullptr;
  --it;
  const DeviceAlloc& d = it->second;
  if (a < it->first || a + n > it->first + d.size) return nullptr;
  return &d;
}

bool is_pinned(const void* p) {
  auto a = reinterpret_cast<std::uintptr_t>(p);
  auto it = g_pinned.upper_bound(a);
  if (it == g_pinned.begin()) return false;
  --it;
  return a < it->first + it->second;
}

// The read-write address for device pointer p (n bytes), or nullptr when it is no device memory.
std::byte* alias_of(const void* p, std::size_t n) {
  std::lock_guard lk(g_mu);
  const DeviceAlloc* d = find_device(p, n);
  if (d == nullptr) return nullptr;
  return d->alias + (static_cast<const std::byte*>(p) - d->user);
}

class Stream {
 public:
  Stream() : worker_([this] { run(); }) {}
  ~Stream() {
    {
      std::lock_guard lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }
  std::uint64_t push(std::function<void()> fn) {
    std::uint64_t ticket = 0;
    {
      std::lock_guard lk(mu_);
      queue_.push_back(std::move(fn));
      ticket = ++queued_;
    }
    cv_.notify_all();
    return ticket;
  }
  std::uint64_t position() {
    std::lock_guard lk(mu_);
    return queued_;
  }
  void wait(std::uint64_t ticket) {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return done_ >= ticket; });
  }

 private:
  void run() {
    std::unique_lock lk(mu_);
    for (;;) {
      cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      auto fn = std::move(queue_.front());
      queue_.pop_front();
      lk.unlock();
      fn();
      lk.lock();
      ++done_;
      cv_.notify_all();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  std::uint64_t queued_ = 0;
  std::uint64_t done_ = 0;
  bool stop_ = false;
  std::thread worker_;
};

Stream& default_stream() {
  static Stream* s = new Stream();  // never destroyed: may be used until exit
  return *s;
}

Stream& stream_of(void* s) {
  return s == nullptr ? default_stream() : *static_cast<Stream*>(s);
}

struct Event {
  Stream* stream = nullptr;
  std::uint64_t ticket = 0;
};

// Resolves the two sides of a copy; returns kInvalidValue when a side is not of the kind given.
int resolve(void*& dst, const void*& src, std::size_t n, int kind) {
  if (n == 0) return kSuccess;
  if (kind == kMemcpyHostToDevice || kind == kMemcpyDeviceToDevice) {
    dst = alias_of(dst, n);
    if (dst == nullptr) return kInvalidValue;
  }
  if (kind == kMemcpyDeviceToHost || kind == kMemcpyDeviceToDevice) {
    src = alias_of(src, n);
    if (src == nullptr) return kInvalidValue;
  }
  if (kind == kMemcpyHostToDevice && alias_of(src, n) != nullptr) return kInvalidValue;
  if (kind == kMemcpyDeviceToHost && alias_of(dst, n) != nullptr) return kInvalidValue;
  if (kind < kMemcpyHostToDevice || kind > kMemcpyDeviceToDevice) return kInvalidValue;
  return kSuccess;
}

}  // namespace

extern "C" {

// ---- test helpers (not CUDA) ----

// The read-write alias of device pointer p (valid for the rest of its allocation), or nullptr.
void* fake_cuda_alias(const void* p) {
  return alias_of(p, 1);
}

// ---- runtime ----

int cudaGetDeviceCount(int* count) {
  *count = 1;
  return kSuccess;
}
int cudaSetDevice(int device) {
  if (device != 0) return kInvalidValue;
  t_device = device;
  return kSuccess;
}
int cudaGetDevice(int* device) {
  *device = t_device;
  return kSuccess;
}

int cudaMalloc(void** out, std::size_t n) {
  if (n == 0) n = 1;
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  DeviceAlloc d;
  d.size = n;
  d.mapped = (n + page - 1) / page * page;
  d.fd = memfd_create("fake-cuda-device", MFD_CLOEXEC);
  if (d.fd < 0) return kMemoryAllocation;
  if (ftruncate(d.fd, static_cast<off_t>(d.mapped)) != 0) {
    close(d.fd);
    return kMemoryAllocation;
  }
  void* user = mmap(nullptr, d.mapped, PROT_NONE, MAP_SHARED, d.fd, 0);
  void* alias = mmap(nullptr, d.mapped, PROT_READ | PROT_WRITE, MAP_SHARED, d.fd, 0);
  if (user == MAP_FAILED || alias == MAP_FAILED) {
    if (user != MAP_FAILED) munmap(user, d.mapped);
    if (alias != MAP_FAILED) munmap(alias, d.mapped);
    close(d.fd);
    return kMemoryAllocation;
  }
  d.user = static_cast<std::byte*>(user);
  d.alias = static_cast<std::byte*>(alias);
  std::lock_guard lk(g_mu);
  g_device[reinterpret_cast<std::uintptr_t>(user)] = d;
  *out = user;
  return kSuccess;
}

int cudaFree(void* p) {
  if (p == nullptr) return kSuccess;
  default_stream().wait(default_stream().position());
  std::lock_guard lk(g_mu);
  auto it = g_device.find(reinterpret_cast<std::uintptr_t>(p));
  if (it == g_device.end()) return kInvalidValue;
  munmap(it->second.user, it->second.mapped);
  munmap(it->second.alias, it->second.mapped);
  close(it->second.fd);
  g_device.erase(it);
  return kSuccess;
}

int cudaMallocHost(void** out, std::size_t n) {
  void* p = std::aligned_alloc(4096, (n + 4095) / 4096 * 4096);
  if (p == nullptr) return kMemoryAllocation;
  std::lock_guard lk(g_mu);
  g_pinned[reinterpret_cast<std::uintptr_t>(p)] = n;
  *out = p;
  return kSuccess;
}
int cudaFreeHost(void* p) {
  std::lock_guard lk(g_mu);
  if (g_pinned.erase(reinterpret_cast<std::uintptr_t>(p)) == 0) return kInvalidValue;
  std::free(p);
  return kSuccess;
}
int cudaHostRegister(void* p, std::size_t n, unsigned) {
  std::lock_guard lk(g_mu);
  g_pinned[reinterpret_cast<std::uintptr_t>(p)] = n;
  return kSuccess;
}
int cudaHostUnregister(void* p) {
  std::lock_guard lk(g_mu);
  return g_pinned.erase(reinterpret_cast<std::uintptr_t>(p)) == 0 ? kInvalidValue : kSuccess;
}

int cudaMemcpyAsync(void* dst, const void* src, std::size_t n, int kind, void* stream) {
  if (int e = resolve(dst, src, n, kind); e != kSuccess) return e;
  if (n == 0) return kSuccess;
  stream_of(stream).push([dst, src, n] { std::memcpy(dst, src, n); });
  return kSuccess;
}
int cudaMemcpy(void* dst, const void* src, std::size_t n, int kind) {
  if (int e = cudaMemcpyAsync(dst, src, n, kind, nullptr); e != kSuccess) return e;
  default_stream().wait(default_stream().position());
  return kSuccess;
}
int cudaMemset(void* p, int value, std::size_t n) {
  auto* a = alias_of(p, n);
  if (a == nullptr) return kInvalidValue;
  default_stream().wait(default_stream().position());
  std::memset(a, value, n);
  return kSuccess;
}

int cudaStreamCreate(void** out) {
  *out = new Stream();
  return kSuccess;
}
int cudaStreamDestroy(void* s) {
  if (s == nullptr) return kInvalidValue;
  delete static_cast<Stream*>(s);  // the destructor runs what is queued first
  return kSuccess;
}
int cudaStreamSynchronize(void* s) {
  Stream& st = stream_of(s);
  st.wait(st.position());
  return kSuccess;
}
int cudaDeviceSynchronize() {
  return cudaStreamSynchronize(nullptr);
}

int cudaEventCreateWithFlags(void** out, unsigned) {
  *out = new Event();
  return kSuccess;
}
int cudaEventDestroy(void* e) {
  delete static_cast<Event*>(e);
  return kSuccess;
}
int cudaEventRecord(void* e, void* s) {
  auto* ev = static_cast<Event*>(e);
  ev->stream = &stream_of(s);
  ev->ticket = ev->stream->position();
  return kSuccess;
}
int cudaEventSynchronize(void* e) {
  auto* ev = static_cast<Event*>(e);
  if (ev->stream != nullptr) ev->stream->wait(ev->ticket);  // never recorded: complete
  return kSuccess;
}

const char* cudaGetErrorString(int e) {
  switch (e) {
    case kSuccess:
      return "no error (fake CUDA)";
    case kInvalidValue:
      return "invalid argument (fake CUDA)";
    case kMemoryAllocation:
      return "out of memory (fake CUDA)";
    default:
      return "error (fake CUDA)";
  }
}

// ---- driver ----

int cuInit(unsigned) {
  return kSuccess;
}

int cuPointerGetAttribute(void* data, int attribute, unsigned long long ptr) {  // NOLINT
  const void* p = reinterpret_cast<const void*>(static_cast<std::uintptr_t>(ptr));
  std::lock_guard lk(g_mu);
  bool device = find_device(p, 1) != nullptr;
  if (!device && !is_pinned(p)) return kInvalidValue;  // memory CUDA never saw
  if (attribute == kAttrMemoryType) {
    *static_cast<unsigned*>(data) = device ? kMemoryTypeDevice : kMemoryTypeHost;
    return kSuccess;
  }
  if (attribute == kAttrIsManaged) {
    *static_cast<unsigned*>(data) = 0;
    return kSuccess;
  }
  return kInvalidValue;
}

int cuCtxGetCurrent(void** ctx) {
  static int fake_context;
  *ctx = &fake_context;
  return kSuccess;
}
int cuModuleLoadData(void**, const void*) {
  return kInvalidImage;  // no GPU to run kernels: device CRC32C takes its host fallback
}
int cuModuleGetFunction(void**, void*, const char*) {
  return kInvalidImage;
}
int cuLaunchKernel(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                   void*, void**, void**) {
  return kInvalidImage;
}
int cuGetErrorString(int e, const char** out) {
  *out = cudaGetErrorString(e);
  return kSuccess;
}
int cuMemGetHandleForAddressRange(void*, unsigned long long, std::size_t, int,  // NOLINT
                                  unsigned long long) {                         // NOLINT
  return kNotSupported;
}

}  // extern "C"
