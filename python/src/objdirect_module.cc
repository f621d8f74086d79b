// objdirect._objdirect: the thin pybind11 layer over libobjdirect (include/objdirect/client.hpp).
//
// What lives here and nowhere else:
//  - turning a Python buffer into a (pointer, size) span: the buffer protocol (bytes, bytearray,
//    memoryview, numpy), DLPack producers on the CPU (torch tensors), and CUDA device memory:
//    __cuda_array_interface__ (CuPy, Numba) and DLPack producers on CUDA or CUDA managed memory
//    (torch CUDA tensors). Device pointers are only handed to libobjdirect, whose Client moves
//    them through its staging pipeline (docs/gpu.md); they are never dereferenced here. A device
//    buffer is refused (DeviceBufferNotSupported) when this process has not loaded CUDA or the
//    driver does not know the pointer, and for other devices (ROCm, ...);
//  - releasing the GIL around every call that goes to the network;
//  - turning a failed Status into a Python exception: raise_status() hands (errc name, S3 code,
//    HTTP status, message) to objdirect.errors._from_native, the one place that picks the Python
//    class.
// The Pythonic API (objdirect.Client, generators, futures, torch datasets) is in the package's
// Python files.
//
// Thread safety: NativeClient is thread-safe (libobjdirect's Client is); the GIL is released only
// around libobjdirect calls, never while touching Python objects.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "objdirect/client.hpp"
#include "objdirect/status.hpp"

namespace py = pybind11;

namespace objdirect::python {
namespace {

// get_bytes without a length reads the object in a first GET of at most this many bytes (one
// request for objects that fit), then the rest in one more: the size comes from that reply, not
// from a HEAD. A bytes object of this size is allocated for every such call and shrunk to what
// arrived. It stays below the default rdma_min_bytes (512 KiB), so that a small object is not
// proposed RDMA (and a registration of the whole window) because the window is large; the rest
// of a large object goes over RDMA as usual.
constexpr std::uint64_t get_first_window_bytes_max = 256 << 10;
// get_bytes trusts a length up to this many bytes (allocates it, then shrinks to what arrived);
// a longer one is read as "up to length": the first window, then the rest the reply says exists.
constexpr std::uint64_t get_length_alloc_bytes_max = 64 << 20;

// ---- DLPack (the stable v0.x ABI: DLManagedTensor in a capsule named "dltensor") ----------------
struct DLDevice {
  std::int32_t device_type;
  std::int32_t device_id;
};
struct DLDataType {
  std::uint8_t code;
  std::uint8_t bits;
  std::uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  std::int32_t ndim;
  DLDataType dtype;
  std::int64_t* shape;
  std::int64_t* strides;
  std::uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};
static_assert(sizeof(DLDevice) == 8 && sizeof(DLDataType) == 4, "DLPack ABI layout");
static_assert(sizeof(DLTensor) == 48, "DLPack ABI layout");

constexpr std::int32_t kDLCPU = 1;
constexpr std::int32_t kDLCUDA = 2;
constexpr std::int32_t kDLCUDAHost = 3;  // pinned host memory: the CPU may touch it
constexpr std::int32_t kDLCUDAManaged = 13;

const char* dlpack_device_name(std::int32_t type) {
  switch (type) {
    case 2:
      return "CUDA";
    case 4:
      return "OpenCL";
    case 7:
      return "Vulkan";
    case 8:
      return "Metal";
    case 10:
      return "ROCm";
    case kDLCUDAManaged:
      return "CUDA managed";
    default:
      return "a non-CPU device";
  }
}

// ---- errors -------------------------------------------------------------------------------------

[[noreturn]] void raise_from(py::object exc) {
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
  throw py::error_already_set();
}

// The one conversion of a Status into a Python exception (the class is chosen in Python).
[[noreturn]] void raise_status(const Status& st) {
  py::object factory = py::module_::import("objdirect.errors").attr("_from_native");
  raise_from(factory(std::string(errc_name(st.code())), std::string(s3_code(st.code())),
                     http_status(st.code()), st.message()));
}

[[noreturn]] void raise_device_unsupported(const std::string& what, const std::string& why) {
  py::object cls = py::module_::import("objdirect.errors").attr("DeviceBufferNotSupported");
  raise_from(cls(what + ": " + why +
                 "; copy to a host buffer first (e.g. tensor.cpu() / "
                 "cupy.asnumpy)"));
}

// Why libobjdirect cannot take device memory here (CUDA not loaded), or empty when it can.
std::string cuda_unusable() {
  const Status st = cuda_memory_status();
  return st.ok() ? std::string() : "no GPU data path: " + st.message();
}

// Device memory as the CUDA driver sees it, or a refusal.
void check_device_pointer(const void* p, const std::string& what) {
  if (std::string why = cuda_unusable(); !why.empty()) raise_device_unsupported(what, why);
  if (memory_kind(p) == MemoryKind::host) {
    raise_device_unsupported(what, "the CUDA driver does not know this pointer as GPU memory");
  }
}

template <class T>
T value_or_raise(Result<T>&& r) {
  if (!r.ok()) raise_status(r.status());
  return std::move(r).value();
}

// ---- buffers ------------------------------------------------------------------------------------

// A contiguous byte range borrowed from a Python object, held until destruction (GIL held then).
class BorrowedBuffer {
 public:
  BorrowedBuffer() = default;
  BorrowedBuffer(const BorrowedBuffer&) = delete;
  BorrowedBuffer& operator=(const BorrowedBuffer&) = delete;
  ~BorrowedBuffer() {
    if (has_view_) PyBuffer_Release(&view_);
  }

  std::byte* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }

  // Borrows `obj`. Errors (raised): DeviceBufferNotSupported for device memory, TypeError for
  // objects that are no buffer, BufferError for read-only (when `writable`) or non-contiguous ones.
  static std::unique_ptr<BorrowedBuffer> acquire(py::handle obj, bool writable) {
    auto b = std::make_unique<BorrowedBuffer>();
    if (py::hasattr(obj, "__cuda_array_interface__")) {
      b->acquire_cuda_array_interface(obj, writable);
      return b;
    }
    bool has_dlpack = py::hasattr(obj, "__dlpack__") && py::hasattr(obj, "__dlpack_device__");
    if (has_dlpack) {
      auto dev = obj.attr("__dlpack_device__")().cast<std::pair<int, int>>();
      if (dev.first == kDLCUDA || dev.first == kDLCUDAManaged) {
        const std::string what = "a DLPack tensor on " +
                                 std::string(dlpack_device_name(dev.first)) + " (device type " +
                                 std::to_string(dev.first) + ")";
        // Before __dlpack__: without CUDA there is nothing to ask the producer for.
        if (std::string why = cuda_unusable(); !why.empty()) raise_device_unsupported(what, why);
        b->acquire_dlpack(obj);
        check_device_pointer(b->data_, what);
        return b;
      }
      if (dev.first != kDLCPU && dev.first != kDLCUDAHost) {
        raise_device_unsupported("a DLPack tensor on " +
                                     std::string(dlpack_device_name(dev.first)) + " (device type " +
                                     std::to_string(dev.first) + ")",
                                 "libobjdirect's GPU data path is CUDA only");
      }
    }
    if (PyObject_CheckBuffer(obj.ptr())) {
      int flags = PyBUF_ANY_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
      if (PyObject_GetBuffer(obj.ptr(), &b->view_, flags) != 0) {
        PyErr_Clear();
        // Say why in terms of the caller's object.
        Py_buffer probe;
        bool readable = PyObject_GetBuffer(obj.ptr(), &probe, PyBUF_ANY_CONTIGUOUS) == 0;
        if (readable) PyBuffer_Release(&probe);
        PyErr_Clear();
        std::string type = py::str(obj.get_type().attr("__name__"));
        if (readable) {
          throw py::buffer_error("the destination " + type +
                                 " is read-only; pass a writable buffer (bytearray, numpy array, "
                                 "torch tensor)");
        }
        throw py::buffer_error("the " + type +
                               " is not contiguous; pass a contiguous buffer (e.g. "
                               "numpy.ascontiguousarray)");
      }
      b->has_view_ = true;
      b->data_ = static_cast<std::byte*>(b->view_.buf);
      b->size_ = static_cast<std::size_t>(b->view_.len);
      return b;
    }
    if (has_dlpack) {
      b->acquire_dlpack(obj);
      return b;
    }
    throw py::type_error(
        "expected a buffer (bytes-like object, numpy array) or a DLPack tensor, got " +
        std::string(py::str(obj.get_type().attr("__name__"))));
  }

 private:
  // __cuda_array_interface__ (v2/v3): data = (pointer, read_only), shape, typestr, strides (None
  // or C-contiguous). The pointer is checked with the CUDA driver and never dereferenced.
  void acquire_cuda_array_interface(py::handle obj, bool writable) {
    const std::string what = std::string(py::str(obj.get_type().attr("__name__"))) +
                             " exposes __cuda_array_interface__ (device memory)";
    py::dict cai = obj.attr("__cuda_array_interface__");
    auto data = cai["data"].cast<py::tuple>();
    auto ptr = data[0].cast<std::uintptr_t>();
    bool read_only = data[1].cast<bool>();
    if (writable && read_only) {
      throw py::buffer_error("the destination " + what.substr(0, what.find(' ')) +
                             " is read-only; pass a writable device array");
    }
    auto typestr = cai["typestr"].cast<std::string>();
    std::size_t elem = 0;
    if (typestr.size() >= 3) elem = static_cast<std::size_t>(std::stoul(typestr.substr(2)));
    if (elem == 0) throw py::buffer_error("__cuda_array_interface__ with typestr " + typestr);
    auto shape = cai["shape"].cast<std::vector<std::int64_t>>();
    std::size_t numel = 1;
    for (auto d : shape) {
      if (d < 0) throw py::buffer_error("__cuda_array_interface__ with a negative dimension");
      numel *= static_cast<std::size_t>(d);
    }
    if (cai.contains("strides") && !cai["strides"].is_none() && numel > 0) {
      auto strides = cai["strides"].cast<std::vector<std::int64_t>>();
      std::int64_t expect = static_cast<std::int64_t>(elem);
      for (std::size_t i = shape.size(); i-- > 0;) {
        if (shape[i] != 1 && (i >= strides.size() || strides[i] != expect)) {
          throw py::buffer_error(
              "the device array is not contiguous; pass a contiguous one (cupy.ascontiguousarray)");
        }
        expect *= shape[i];
      }
    }
    data_ = reinterpret_cast<std::byte*>(ptr);
    size_ = numel * elem;
    if (size_ > 0) check_device_pointer(data_, what);
    owner_ = py::reinterpret_borrow<py::object>(obj);  // keeps the array alive
  }

  void acquire_dlpack(py::handle obj) {
    capsule_ = obj.attr("__dlpack__")();
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule_.ptr(), "dltensor"));
    if (m == nullptr) throw py::error_already_set();
    const DLTensor& t = m->dl_tensor;
    std::size_t bits = std::size_t{t.dtype.bits} * std::size_t{t.dtype.lanes};
    if (bits % 8 != 0) throw py::buffer_error("DLPack tensor with a sub-byte element type");
    std::size_t elem = bits / 8;
    std::size_t numel = 1;
    for (std::int32_t i = 0; i < t.ndim; ++i) {
      if (t.shape[i] < 0) throw py::buffer_error("DLPack tensor with a negative dimension");
      numel *= static_cast<std::size_t>(t.shape[i]);
    }
    // Row-major compact, ignoring strides of dimensions of extent 1 (their stride is arbitrary).
    if (t.strides != nullptr && numel > 0) {
      std::int64_t expect = 1;
      for (std::int32_t i = t.ndim - 1; i >= 0; --i) {
        if (t.shape[i] != 1 && t.strides[i] != expect) {
          throw py::buffer_error(
              "the DLPack tensor is not contiguous; pass a contiguous one (tensor.contiguous())");
        }
        expect *= t.shape[i];
      }
    }
    // The capsule stays named "dltensor" (not consumed), so its destructor returns the tensor to
    // the producer when capsule_ goes.
    data_ = static_cast<std::byte*>(t.data) + t.byte_offset;
    size_ = numel * elem;
  }

  Py_buffer view_{};
  bool has_view_ = false;
  py::object capsule_;
  py::object owner_;
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

// ---- results ------------------------------------------------------------------------------------

py::tuple to_tuple(const TransferResult& r) {
  return py::make_tuple(r.bytes, std::string(path_name(r.path)), r.etag, r.fabric, r.reason,
                        r.object_size, r.requests);
}

// A failed Status as the Python exception it would raise, without raising it (per-item errors of
// the batch calls).
py::object exception_of(const Status& st) {
  py::object factory = py::module_::import("objdirect.errors").attr("_from_native");
  return factory(std::string(errc_name(st.code())), std::string(s3_code(st.code())),
                 http_status(st.code()), st.message());
}

// (offset, length) of get_into's arguments as a range of `dst`, which it trims to the range:
// none for offset 0 and no length (the whole object). Errors (raised): ValueError.
std::optional<ByteRange> range_of(std::span<std::byte>& dst, std::uint64_t offset,
                                  std::optional<std::uint64_t> length) {
  if (offset == 0 && !length) return std::nullopt;
  std::uint64_t n = length.value_or(dst.size());
  if (n > dst.size()) {
    throw py::value_error("length " + std::to_string(n) + " exceeds the buffer's " +
                          std::to_string(dst.size()) + " bytes");
  }
  if (n == 0) throw py::value_error("cannot read 0 bytes: the buffer or length is empty");
  dst = dst.first(n);
  return ByteRange{offset, n};
}

// register(): a buffer pinned with the client's fabric (a MemoryHandle) and the Python buffer it
// borrows, both held until release() (or destruction).
class NativeRegistration {
 public:
  NativeRegistration(std::unique_ptr<BorrowedBuffer> buf, MemoryHandle h)
      : buf_(std::move(buf)), handle_(std::move(h)) {}
  // In a child of fork() the handle's client (its threads, its fabric) did not come along, and
  // deregistering would reach into it: the handle is left undestroyed there (NativeClient's
  // destructor says why).
  ~NativeRegistration() {
    if (::getpid() != owner_) new MemoryHandle(std::move(handle_));  // leaked on purpose
  }
  NativeRegistration(NativeRegistration&&) = default;
  NativeRegistration& operator=(NativeRegistration&&) = default;
  // Drops the registration (in-flight transfers keep it until they end) and the buffer.
  void release() {
    handle_ = MemoryHandle();
    buf_.reset();
  }
  bool active() const { return buf_ != nullptr; }
  std::uintptr_t address() const { return reinterpret_cast<std::uintptr_t>(handle_.data()); }
  std::size_t nbytes() const { return handle_.size(); }
  std::vector<std::string> fabrics() const { return handle_.fabrics(); }

 private:
  std::unique_ptr<BorrowedBuffer> buf_;
  MemoryHandle handle_;
  pid_t owner_ = ::getpid();
};

// ---- the client ---------------------------------------------------------------------------------

// sse_c_key= of the Python calls: None, or the 32 bytes of an SSE-C key as bytes, bytearray,
// memoryview or str (UTF-8, as boto3's SSECustomerKey), read in place: the only copy made is the
// SseCustomerKey, which wipes itself (the Python object is the caller's).
std::optional<SseCustomerKey> sse_key(py::handle k) {
  if (k.is_none()) return std::nullopt;
  std::string_view raw;
  py::buffer_info info;
  if (PyUnicode_Check(k.ptr())) {
    Py_ssize_t n = 0;
    const char* p = PyUnicode_AsUTF8AndSize(k.ptr(), &n);
    if (p == nullptr) throw py::error_already_set();
    raw = std::string_view(p, static_cast<std::size_t>(n));
  } else if (PyObject_CheckBuffer(k.ptr())) {
    info = py::reinterpret_borrow<py::buffer>(k).request();
    raw = std::string_view(static_cast<const char*>(info.ptr),
                           static_cast<std::size_t>(info.size * info.itemsize));
  } else {
    throw py::type_error("sse_c_key must be bytes (32 of them), a bytes-like object or str");
  }
  return value_or_raise(SseCustomerKey::from_bytes(raw));
}

class NativeClient {
 public:
  // In a child of fork() (a DataLoader worker, say) the Client's threads do not exist: its
  // destructor would join them and end the process (std::system_error, "No such process"). A
  // NativeClient the child inherited and drops (objdirect.Client abandons it on first use, but
  // the garbage collector may free one the child never used) is therefore left undestroyed.
  ~NativeClient() {
    if (::getpid() != owner_) (void)client_.release();  // leaked on purpose
  }
  NativeClient(const NativeClient&) = delete;
  NativeClient& operator=(const NativeClient&) = delete;
  // `overrides`: keys of ClientConfig with values to use instead of what load() found.
  // Errors (raised): InvalidArgument and friends from ClientConfig::load / Client::create.
  NativeClient(const std::string& profile, const py::dict& overrides) {
    ClientConfig config = value_or_raise(ClientConfig::load(profile));
    for (auto item : overrides) {
      std::string k = py::str(item.first);
      py::handle v = item.second;
      if (v.is_none()) continue;
      if (k == "endpoint") {
        config.endpoint = v.cast<std::string>();
      } else if (k == "region") {
        config.region = v.cast<std::string>();
      } else if (k == "access_key") {
        config.access_key = v.cast<std::string>();
      } else if (k == "secret_key") {
        config.secret_key = v.cast<std::string>();
      } else if (k == "session_token") {
        config.session_token = v.cast<std::string>();
      } else if (k == "fabric") {
        config.fabric = v.cast<std::string>();
      } else if (k == "fabric_order") {
        config.fabric_order = v.cast<std::string>();
      } else if (k == "fabric_failure_memory_ms") {
        config.fabric_failure_memory_ms = v.cast<std::uint32_t>();
      } else if (k == "part_size_bytes") {
        config.part_size_bytes = v.cast<std::uint64_t>();
      } else if (k == "concurrency") {
        config.concurrency = v.cast<std::uint32_t>();
      } else if (k == "connections_max") {
        config.connections_max = v.cast<std::uint32_t>();
      } else if (k == "connect_timeout_ms") {
        config.connect_timeout_ms = v.cast<std::uint32_t>();
      } else if (k == "io_timeout_ms") {
        config.io_timeout_ms = v.cast<std::uint32_t>();
      } else if (k == "token_lifetime_s") {
        config.token_lifetime_s = v.cast<std::uint32_t>();
      } else if (k == "registrations_max") {
        config.registrations_max = v.cast<std::uint32_t>();
      } else if (k == "registered_bytes_max") {
        config.registered_bytes_max = v.cast<std::uint64_t>();
      } else if (k == "rdma") {
        config.rdma = v.cast<std::string>();
      } else if (k == "rdma_min_bytes") {
        config.rdma_min_bytes = v.cast<std::uint64_t>();
      } else if (k == "rdma_put_min_bytes") {
        config.rdma_put_min_bytes = v.cast<std::uint64_t>();
      } else if (k == "rdma_learn") {
        config.rdma_learn = v.cast<bool>();
      } else if (k == "max_attempts") {
        config.max_attempts = v.cast<std::uint32_t>();
      } else if (k == "retry_mode") {
        config.retry_mode = v.cast<std::string>();
      } else if (k == "retry_base_delay_ms") {
        config.retry_base_delay_ms = v.cast<std::uint32_t>();
      } else if (k == "retry_max_backoff_ms") {
        config.retry_max_backoff_ms = v.cast<std::uint32_t>();
      } else if (k == "multipart_threshold_bytes") {
        config.multipart_threshold_bytes = v.cast<std::uint64_t>();
      } else if (k == "addressing_style") {
        config.addressing_style = v.cast<std::string>();
      } else if (k == "ca_bundle") {
        config.ca_bundle = v.cast<std::string>();
      } else if (k == "redirects_max") {
        config.redirects_max = v.cast<std::uint32_t>();
      } else {
        throw py::type_error("unknown client option '" + k + "'");
      }
    }
    client_ = value_or_raise(Client::create(std::move(config)));
  }

  py::dict config() const {
    const ClientConfig& c = client_->config();
    py::dict d;
    d["endpoint"] = c.endpoint;
    d["region"] = c.region;
    d["profile"] = c.profile;
    d["access_key"] = c.access_key;
    d["fabric"] = c.fabric;
    d["fabric_order"] = c.fabric_order;
    d["fabric_failure_memory_ms"] = c.fabric_failure_memory_ms;
    d["part_size_bytes"] = c.part_size_bytes;
    d["concurrency"] = c.concurrency;
    d["connections_max"] = c.connections_max;
    d["connect_timeout_ms"] = c.connect_timeout_ms;
    d["io_timeout_ms"] = c.io_timeout_ms;
    d["token_lifetime_s"] = c.token_lifetime_s;
    d["rdma"] = c.rdma;
    d["rdma_min_bytes"] = c.rdma_min_bytes;
    d["rdma_put_min_bytes"] = c.rdma_put_min_bytes;
    d["rdma_learn"] = c.rdma_learn;
    d["max_attempts"] = c.max_attempts;
    d["retry_mode"] = c.retry_mode;
    d["retry_base_delay_ms"] = c.retry_base_delay_ms;
    d["retry_max_backoff_ms"] = c.retry_max_backoff_ms;
    d["multipart_threshold_bytes"] = c.multipart_threshold_bytes;
    d["addressing_style"] = c.addressing_style;
    d["ca_bundle"] = c.ca_bundle;
    d["redirects_max"] = c.redirects_max;
    return d;
  }

  // Reads into `buf`. offset == 0 and no length: the whole object, which must fit. Otherwise the
  // range [offset, offset + length) with length defaulting to the buffer's size (cut at the end
  // of the object).
  py::tuple get_into(const std::string& bucket, const std::string& key, py::handle buf,
                     std::uint64_t offset, std::optional<std::uint64_t> length,
                     py::handle sse_c_key) {
    GetOptions o;
    o.sse_c = sse_key(sse_c_key);
    auto b = BorrowedBuffer::acquire(buf, /*writable=*/true);
    std::span<std::byte> dst(b->data(), b->size());
    std::optional<ByteRange> range = range_of(dst, offset, length);
    Result<TransferResult> r = Status(Errc::internal, "not run");
    {
      py::gil_scoped_release nogil;
      r = o.sse_c ? client_->get(bucket, key, dst, range, o)
                  : client_->get(bucket, key, dst, range);
    }
    return to_tuple(value_or_raise(std::move(r)));
  }

  // Client::get_many. items: [(bucket, key, buf, offset, length or None, if_match)], offset and
  // length as get_into's. One entry per item, in order: its TransferResult tuple, or the
  // exception it failed with (not raised). The GIL is released for the whole batch.
  py::list get_many(const py::list& items) {
    std::vector<std::unique_ptr<BorrowedBuffer>> held;
    std::vector<GetRequest> reqs;
    held.reserve(items.size());
    reqs.reserve(items.size());
    for (py::handle h : items) {
      auto t = h.cast<py::tuple>();
      if (t.size() != 6) throw py::type_error("get_many: malformed request");
      held.push_back(BorrowedBuffer::acquire(t[2], /*writable=*/true));
      GetRequest g;
      g.bucket = t[0].cast<std::string>();
      g.key = t[1].cast<std::string>();
      g.dst = {held.back()->data(), held.back()->size()};
      g.range =
          range_of(g.dst, t[3].cast<std::uint64_t>(), t[4].cast<std::optional<std::uint64_t>>());
      g.if_match = t[5].cast<std::string>();
      reqs.push_back(std::move(g));
    }
    std::vector<Result<TransferResult>> rs;
    {
      py::gil_scoped_release nogil;
      rs = client_->get_many(reqs);
    }
    return results_list(rs);
  }

  // Client::put_many. items: [(bucket, key, buf)]; entries as get_many's.
  py::list put_many(const py::list& items) {
    std::vector<std::unique_ptr<BorrowedBuffer>> held;
    std::vector<PutRequest> reqs;
    held.reserve(items.size());
    reqs.reserve(items.size());
    for (py::handle h : items) {
      auto t = h.cast<py::tuple>();
      if (t.size() != 3) throw py::type_error("put_many: malformed request");
      held.push_back(BorrowedBuffer::acquire(t[2], /*writable=*/false));
      reqs.push_back({t[0].cast<std::string>(), t[1].cast<std::string>(),
                      std::span<const std::byte>(held.back()->data(), held.back()->size())});
    }
    std::vector<Result<TransferResult>> rs;
    {
      py::gil_scoped_release nogil;
      rs = client_->put_many(reqs);
    }
    return results_list(rs);
  }

  // Ranges of one object version (get_ranges_into): groups [(offset, length, [(buf index,
  // offset in the group, length)])] as objdirect.ranges.coalesce made them, each one GET pinned
  // with If-Match on etag, all through get_many. A group of one member that fills it lands in
  // that member's buffer; a merged group goes through a scratch buffer and is copied out (GIL
  // released). Returns the bytes landed per buffer (fewer at the end of the object). Errors
  // (raised): the first failed GET's (PreconditionFailed when the object was replaced).
  std::vector<std::uint64_t> get_ranges(
      const std::string& bucket, const std::string& key, const std::string& etag,
      const std::vector<
          std::tuple<std::uint64_t, std::uint64_t,
                     std::vector<std::tuple<std::size_t, std::uint64_t, std::uint64_t>>>>& groups,
      const py::list& bufs) {
    std::vector<std::unique_ptr<BorrowedBuffer>> held;
    for (py::handle h : bufs) held.push_back(BorrowedBuffer::acquire(h, /*writable=*/true));
    std::vector<GetRequest> reqs;
    std::vector<std::vector<std::byte>> scratch(groups.size());
    for (std::size_t g = 0; g < groups.size(); ++g) {
      const auto& [offset, length, members] = groups[g];
      for (const auto& [i, lo, n] : members) {
        if (i >= held.size() || held[i]->size() < n || lo + n > length) {
          throw py::value_error("get_ranges: a member outside its group or buffer");
        }
      }
      GetRequest r{bucket, key, {}, ByteRange{offset, length}, etag};
      const auto& m0 = members.front();
      if (members.size() == 1 && std::get<1>(m0) == 0 && std::get<2>(m0) == length) {
        r.dst = {held[std::get<0>(m0)]->data(), length};
      } else {
        scratch[g].resize(length);
        r.dst = scratch[g];
      }
      reqs.push_back(std::move(r));
    }
    std::vector<std::uint64_t> landed(held.size(), 0);
    std::vector<Result<TransferResult>> rs;
    {
      py::gil_scoped_release nogil;
      rs = client_->get_many(reqs);
      for (std::size_t g = 0; g < groups.size() && rs[g].ok(); ++g) {
        const std::uint64_t got = rs[g]->bytes;
        for (const auto& [i, lo, n] : std::get<2>(groups[g])) {
          const std::uint64_t k = got > lo ? std::min(n, got - lo) : 0;
          if (!scratch[g].empty() && k > 0) std::memcpy(held[i]->data(), scratch[g].data() + lo, k);
          landed[i] = k;
        }
      }
    }
    for (auto& r : rs) {
      if (!r.ok()) raise_status(r.status());
    }
    return landed;
  }

  // Pins `buf` with the client's fabric (Client::register_memory) until release().
  NativeRegistration register_buffer(py::handle buf) {
    auto b = BorrowedBuffer::acquire(buf, /*writable=*/false);
    Result<MemoryHandle> h = Status(Errc::internal, "not run");
    {
      py::gil_scoped_release nogil;
      h = client_->register_memory(b->data(), b->size());
    }
    return NativeRegistration(std::move(b), value_or_raise(std::move(h)));
  }

  // The object (or a range of it) as a new bytes object, filled in place (no extra copy), with
  // no HEAD. With a `length` up to get_length_alloc_bytes_max: one ranged GET of [offset,
  // offset + length) into bytes of that length, cut at the object's end (the client splits it
  // into parts above part_size_bytes). Otherwise (no length, or a longer one, which may be "to
  // the end" written as a huge number): a first ranged GET of first_window_bytes() from
  // `offset` learns the object's size from its Content-Range (a range that fits is done in that
  // one request), then one GET of the rest, pinned with If-Match to the first reply's ETag; an
  // object replaced in between is read again from the start (a few times: a key rewritten
  // without pause never settles). S3 refuses (416) a range of a 0-byte object: at offset 0 that
  // means the object is empty, and the result is b"". Length 0 makes no request. Errors
  // (raised): NoSuchKey, InvalidRange (offset at or past the end of a non-empty object),
  // PreconditionFailed, ...
  py::bytes get_bytes(const std::string& bucket, const std::string& key, std::uint64_t offset,
                      std::optional<std::uint64_t> length, py::handle sse_c_key) {
    GetOptions o;
    o.sse_c = sse_key(sse_c_key);
    if (length && *length == 0) return py::bytes("", 0);
    constexpr std::uint64_t no_end = std::numeric_limits<std::uint64_t>::max();
    const std::uint64_t end = length && *length <= no_end - offset ? offset + *length : no_end;
    const std::uint64_t window = length && *length <= get_length_alloc_bytes_max
                                     ? *length
                                     : std::min(length.value_or(end), first_window_bytes());
    for (int attempt = 0;; ++attempt) {
      PyObject* raw = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(window));
      if (raw == nullptr) throw py::error_already_set();
      auto bytes_of = [&raw](std::uint64_t at, std::uint64_t n) {
        return std::span<std::byte>(reinterpret_cast<std::byte*>(PyBytes_AS_STRING(raw)) + at, n);
      };
      Result<TransferResult> r = Status(Errc::internal, "not run");
      {
        py::gil_scoped_release nogil;
        r = client_->get(bucket, key, bytes_of(0, window), ByteRange{offset, window}, o);
      }
      if (!r.ok()) {
        Py_DECREF(raw);
        if (r.code() == Errc::invalid_range && offset == 0) return py::bytes("", 0);
        raise_status(r.status());
      }
      std::uint64_t got = r->bytes;
      const std::uint64_t total = r->object_size;
      if (got == window && std::min(total, end) > offset + window) {
        const std::uint64_t rest = std::min(total, end) - offset - window;
        if (_PyBytes_Resize(&raw, static_cast<Py_ssize_t>(window + rest)) != 0) {
          throw py::error_already_set();
        }
        GetRequest g{bucket,  key,    bytes_of(window, rest), ByteRange{offset + window, rest},
                     r->etag, o.sse_c};
        std::vector<Result<TransferResult>> rs;
        {
          py::gil_scoped_release nogil;
          rs = client_->get_many(std::span<const GetRequest>(&g, 1));
        }
        if (!rs[0].ok()) {
          Py_DECREF(raw);
          if (rs[0].code() == Errc::precondition_failed && attempt < 3) continue;  // replaced
          raise_status(rs[0].status());
        }
        got += rs[0]->bytes;
      }
      if (got < static_cast<std::uint64_t>(PyBytes_GET_SIZE(raw)) &&
          _PyBytes_Resize(&raw, static_cast<Py_ssize_t>(got)) != 0) {
        throw py::error_already_set();
      }
      return py::reinterpret_steal<py::bytes>(raw);
    }
  }

  // The first GET of get_bytes without a length: at most get_first_window_bytes_max, and never
  // above part_size_bytes (so that it is one request).
  std::uint64_t first_window_bytes() const {
    return std::min<std::uint64_t>(get_first_window_bytes_max, client_->config().part_size_bytes);
  }

  // content_type / metadata: PutOptions (none given: the plain put, which also takes CUDA memory).
  py::tuple put(const std::string& bucket, const std::string& key, py::handle buf,
                const std::string& content_type,
                const std::vector<std::pair<std::string, std::string>>& metadata,
                py::handle sse_c_key) {
    PutOptions o;
    o.content_type = content_type;
    o.metadata = metadata;
    o.sse_c = sse_key(sse_c_key);
    auto b = BorrowedBuffer::acquire(buf, /*writable=*/false);
    std::span<const std::byte> src(b->data(), b->size());
    Result<TransferResult> r = Status(Errc::internal, "not run");
    {
      py::gil_scoped_release nogil;
      if (content_type.empty() && metadata.empty() && !o.sse_c) {
        r = client_->put(bucket, key, src);
      } else {
        r = client_->put(bucket, key, src, o);
      }
    }
    return to_tuple(value_or_raise(std::move(r)));
  }

  py::tuple head(const std::string& bucket, const std::string& key, py::handle sse_c_key) {
    const auto k = sse_key(sse_c_key);
    Result<ObjectInfo> r = Status(Errc::internal, "not run");
    {
      py::gil_scoped_release nogil;
      r = k ? client_->head(bucket, key, *k) : client_->head(bucket, key);
    }
    ObjectInfo i = value_or_raise(std::move(r));
    py::dict meta;
    for (const auto& [k, v] : i.metadata) meta[py::str(k)] = py::str(v);
    return py::make_tuple(i.size, i.etag, i.last_modified, i.content_type, meta);
  }

  // A presigned URL for `method` on the object (Client::presign; makes no request).
  std::string presign(const std::string& method, const std::string& bucket, const std::string& key,
                      std::int64_t expires_s) {
    return value_or_raise(client_->presign(method, bucket, key, std::chrono::seconds(expires_s)));
  }

  // One ListObjectsV2 page: (objects [(key, size, etag, last_modified)], prefixes, next token or
  // None).
  py::tuple list_page(const std::string& bucket, const std::string& prefix,
                      const std::string& delimiter, const std::string& token,
                      std::uint32_t max_keys) {
    ListOptions o;
    o.prefix = prefix;
    o.delimiter = delimiter;
    o.continuation_token = token;
    o.max_keys = max_keys;
    Result<ListPage> r = Status(Errc::internal, "not run");
    {
      py::gil_scoped_release nogil;
      r = client_->list(bucket, o);
    }
    ListPage page = value_or_raise(std::move(r));
    py::list objects;
    for (const ListEntry& e : page.objects) {
      objects.append(py::make_tuple(e.key, e.size, e.etag, e.last_modified));
    }
    py::object next = py::none();
    if (page.is_truncated) next = py::str(page.next_continuation_token);
    return py::make_tuple(objects, py::cast(page.common_prefixes), next);
  }

  void delete_object(const std::string& bucket, const std::string& key) {
    run_status([&] { return client_->delete_object(bucket, key); });
  }
  void create_bucket(const std::string& bucket) {
    run_status([&] { return client_->create_bucket(bucket); });
  }
  void delete_bucket(const std::string& bucket) {
    run_status([&] { return client_->delete_bucket(bucket); });
  }
  // Server-side copy (CopyObject, or UploadPartCopy parts): a TransferResult tuple.
  py::tuple copy(const std::string& src_bucket, const std::string& src_key,
                 const std::string& dst_bucket, const std::string& dst_key,
                 py::handle copy_source_sse_c_key, py::handle sse_c_key) {
    CopyOptions o;
    o.source_sse_c = sse_key(copy_source_sse_c_key);
    o.sse_c = sse_key(sse_c_key);
    Result<TransferResult> r = Status(Errc::internal, "not run");
    {
      py::gil_scoped_release nogil;
      r = client_->copy(src_bucket, src_key, dst_bucket, dst_key, o);
    }
    return to_tuple(value_or_raise(std::move(r)));
  }

  // DeleteObjects in batches: [(key, errc name, message)] of the keys that were not deleted.
  py::list delete_objects(const std::string& bucket, const std::vector<std::string>& keys) {
    Result<std::vector<Client::DeleteFailure>> r = Status(Errc::internal, "not run");
    {
      py::gil_scoped_release nogil;
      r = client_->delete_objects(bucket, keys);
    }
    py::list out;
    for (const auto& f : value_or_raise(std::move(r))) {
      out.append(
          py::make_tuple(f.key, std::string(errc_name(f.status.code())), f.status.message()));
    }
    return out;
  }

  std::string create_multipart_upload(const std::string& bucket, const std::string& key,
                                      py::handle sse_c_key) {
    PutOptions o;
    o.sse_c = sse_key(sse_c_key);
    Result<std::string> r = Status(Errc::internal, "not run");
    {
      py::gil_scoped_release nogil;
      r = client_->create_multipart_upload(bucket, key, o);
    }
    return value_or_raise(std::move(r));
  }

  py::tuple upload_part(const std::string& bucket, const std::string& key,
                        const std::string& upload_id, std::uint32_t part_number, py::handle buf,
                        py::handle sse_c_key) {
    const auto k = sse_key(sse_c_key);
    auto b = BorrowedBuffer::acquire(buf, /*writable=*/false);
    std::span<const std::byte> src(b->data(), b->size());
    Result<TransferResult> r = Status(Errc::internal, "not run");
    {
      py::gil_scoped_release nogil;
      r = k ? client_->upload_part(bucket, key, upload_id, part_number, src, *k)
            : client_->upload_part(bucket, key, upload_id, part_number, src);
    }
    return to_tuple(value_or_raise(std::move(r)));
  }

  // parts: [(part_number, etag)] in ascending order.
  py::tuple complete_multipart_upload(
      const std::string& bucket, const std::string& key, const std::string& upload_id,
      const std::vector<std::pair<std::uint32_t, std::string>>& parts, py::handle sse_c_key) {
    const auto k = sse_key(sse_c_key);
    std::vector<Client::CompletedPart> ps;
    for (const auto& [n, etag] : parts) ps.push_back({n, etag});
    Result<TransferResult> r = Status(Errc::internal, "not run");
    {
      py::gil_scoped_release nogil;
      r = k ? client_->complete_multipart_upload(bucket, key, upload_id, ps, *k)
            : client_->complete_multipart_upload(bucket, key, upload_id, ps);
    }
    return to_tuple(value_or_raise(std::move(r)));
  }

  void abort_multipart_upload(const std::string& bucket, const std::string& key,
                              const std::string& upload_id) {
    run_status([&] { return client_->abort_multipart_upload(bucket, key, upload_id); });
  }

  // Client::stats() as a dict (see ClientStats in client.hpp): requests {op: {class: n}}, bytes,
  // transfers and rdma_declines {key: n}, errors {errc name: n}, retries, rdma_revocations,
  // fabric_failures and fabric_skips {fabric: n}, requests_in_flight, auto_choices {why: n}.
  py::dict stats() const {
    ClientStats s = client_->stats();
    auto flat = [](const std::map<std::string, std::uint64_t>& m) {
      py::dict d;
      for (const auto& [k, v] : m) d[py::str(k)] = v;
      return d;
    };
    py::dict requests;
    for (const auto& [op, by_class] : s.requests) requests[py::str(op)] = flat(by_class);
    py::dict out;
    out["requests"] = requests;
    out["bytes"] = flat(s.bytes);
    out["transfers"] = flat(s.transfers);
    out["rdma_declines"] = flat(s.rdma_declines);
    out["errors"] = flat(s.errors);
    out["retries"] = s.retries;
    out["retry_reasons"] = flat(s.retry_reasons);
    out["completes_confirmed"] = s.completes_confirmed;
    out["rdma_revocations"] = s.rdma_revocations;
    out["rdma_registrations"] = s.rdma_registrations;
    out["fabric_failures"] = flat(s.fabric_failures);
    out["fabric_skips"] = flat(s.fabric_skips);
    out["requests_in_flight"] = s.requests_in_flight;
    out["auto_choices"] = flat(s.auto_choices);
    return out;
  }
  std::vector<std::string> list_buckets() {
    Result<std::vector<std::string>> r = Status(Errc::internal, "not run");
    {
      py::gil_scoped_release nogil;
      r = client_->list_buckets();
    }
    return value_or_raise(std::move(r));
  }

 private:
  template <class F>
  void run_status(F&& f) {
    Status st;
    {
      py::gil_scoped_release nogil;
      st = f();
    }
    if (!st.ok()) raise_status(st);
  }

  static py::list results_list(const std::vector<Result<TransferResult>>& rs) {
    py::list out;
    for (const auto& r : rs)
      out.append(r.ok() ? py::object(to_tuple(*r)) : exception_of(r.status()));
    return out;
  }

  std::unique_ptr<Client> client_;
  pid_t owner_ = ::getpid();
};

// Errc names with their S3 code and HTTP status, for objdirect.errors' tables and tests.
py::list errc_table() {
  py::list out;
#define OBJDIRECT_PY_ERRC(name, s3, http) out.append(py::make_tuple(#name, s3, http));
  OBJDIRECT_ERRC_TABLE(OBJDIRECT_PY_ERRC)
#undef OBJDIRECT_PY_ERRC
  return out;
}

}  // namespace
}  // namespace objdirect::python

PYBIND11_MODULE(_objdirect, m) {
  using objdirect::python::NativeClient;
  using objdirect::python::NativeRegistration;
  m.doc() = "libobjdirect binding; use the objdirect package, not this module";
  m.attr("get_first_window_bytes_max") = objdirect::python::get_first_window_bytes_max;
  m.attr("get_length_alloc_bytes_max") = objdirect::python::get_length_alloc_bytes_max;
  m.def("errc_table", &objdirect::python::errc_table,
        "[(errc name, S3 code, HTTP status)] of libobjdirect's error table");
  m.def(
      "buffer_info",
      [](py::handle obj, bool writable) {
        auto b = objdirect::python::BorrowedBuffer::acquire(obj, writable);
        return py::make_tuple(reinterpret_cast<std::uintptr_t>(b->data()), b->size());
      },
      py::arg("obj"), py::arg("writable") = false,
      "(address, nbytes) of a buffer as get_into/put would see it (for tests and diagnostics)");
  py::class_<NativeRegistration>(m, "NativeRegistration")
      .def("release", &NativeRegistration::release)
      .def_property_readonly("active", &NativeRegistration::active)
      .def_property_readonly("address", &NativeRegistration::address)
      .def_property_readonly("nbytes", &NativeRegistration::nbytes)
      .def_property_readonly("fabrics", &NativeRegistration::fabrics);
  py::class_<NativeClient>(m, "NativeClient")
      .def(py::init<const std::string&, const py::dict&>(), py::arg("profile"),
           py::arg("overrides"))
      .def("config", &NativeClient::config)
      .def("first_window_bytes", &NativeClient::first_window_bytes)
      .def("get_into", &NativeClient::get_into, py::arg("bucket"), py::arg("key"), py::arg("buf"),
           py::arg("offset") = 0, py::arg("length") = py::none(), py::arg("sse_c_key") = py::none())
      .def("get_bytes", &NativeClient::get_bytes, py::arg("bucket"), py::arg("key"),
           py::arg("offset") = 0, py::arg("length") = py::none(), py::arg("sse_c_key") = py::none())
      .def("put", &NativeClient::put, py::arg("bucket"), py::arg("key"), py::arg("buf"),
           py::arg("content_type") = std::string(),
           py::arg("metadata") = std::vector<std::pair<std::string, std::string>>(),
           py::arg("sse_c_key") = py::none())
      .def("head", &NativeClient::head, py::arg("bucket"), py::arg("key"),
           py::arg("sse_c_key") = py::none())
      .def("presign", &NativeClient::presign, py::arg("method"), py::arg("bucket"), py::arg("key"),
           py::arg("expires_s"))
      .def("list_page", &NativeClient::list_page)
      .def("delete_object", &NativeClient::delete_object)
      .def("create_bucket", &NativeClient::create_bucket)
      .def("delete_bucket", &NativeClient::delete_bucket)
      .def("list_buckets", &NativeClient::list_buckets)
      .def("copy", &NativeClient::copy, py::arg("src_bucket"), py::arg("src_key"),
           py::arg("dst_bucket"), py::arg("dst_key"), py::arg("copy_source_sse_c_key") = py::none(),
           py::arg("sse_c_key") = py::none())
      .def("delete_objects", &NativeClient::delete_objects)
      .def("create_multipart_upload", &NativeClient::create_multipart_upload, py::arg("bucket"),
           py::arg("key"), py::arg("sse_c_key") = py::none())
      .def("upload_part", &NativeClient::upload_part, py::arg("bucket"), py::arg("key"),
           py::arg("upload_id"), py::arg("part_number"), py::arg("buf"),
           py::arg("sse_c_key") = py::none())
      .def("complete_multipart_upload", &NativeClient::complete_multipart_upload, py::arg("bucket"),
           py::arg("key"), py::arg("upload_id"), py::arg("parts"),
           py::arg("sse_c_key") = py::none())
      .def("abort_multipart_upload", &NativeClient::abort_multipart_upload)
      .def("get_many", &NativeClient::get_many)
      .def("put_many", &NativeClient::put_many)
      .def("get_ranges", &NativeClient::get_ranges)
      .def("register", &NativeClient::register_buffer)
      .def("stats", &NativeClient::stats);
}
