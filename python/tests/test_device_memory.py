"""CUDA device memory through the Python API (__cuda_array_interface__, DLPack on CUDA), on a
machine without a GPU.

libobjdirect_fake_cuda.so (tests/client/fake_cuda) stands in for libcuda/libcudart: its "device
memory" is mapped PROT_NONE, so any CPU access by the bindings or libobjdirect kills the process
with SIGSEGV; its read-write alias lets the test check bytes. The fake is loaded in a child
interpreter (CUDA stays loaded once a process has it, and the other tests of this suite check
what happens without CUDA). Real torch CUDA tensors are tested when a GPU is present.
"""

import os
import pathlib
import signal
import subprocess
import sys
import textwrap

import pytest

from conftest import ACCESS_KEY, SECRET_KEY

FAKE_CUDA = pathlib.Path(os.environ.get("OBJDIRECT_BIN_DIR", "")).parent / "tests" / \
    "libobjdirect_fake_cuda.so"

CHILD = textwrap.dedent("""
    import ctypes, os, sys
    lib = ctypes.CDLL(os.environ["OBJDIRECT_CUDA_LIBRARY"])  # loaded before libobjdirect asks
    lib.fake_cuda_alias.restype = ctypes.c_void_p
    lib.fake_cuda_alias.argtypes = [ctypes.c_void_p]
    import objdirect

    def malloc(n):
        p = ctypes.c_void_p()
        assert lib.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(n)) == 0
        return p.value

    class DeviceArray:
        # What CuPy exposes: a device pointer the CPU must never touch.
        def __init__(self, ptr, n, read_only=False):
            self.__cuda_array_interface__ = {"shape": (n,), "typestr": "|u1",
                                             "data": (ptr, read_only), "strides": None,
                                             "version": 3}

    class DLDevice(ctypes.Structure):
        _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]

    class DLDataType(ctypes.Structure):
        _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]

    class DLTensor(ctypes.Structure):
        _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                    ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                    ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]

    class DLManagedTensor(ctypes.Structure):
        _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                    ("deleter", ctypes.c_void_p)]

    capsule_new = ctypes.pythonapi.PyCapsule_New
    capsule_new.restype = ctypes.py_object
    capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]

    class DLPackCuda:
        # What a torch CUDA tensor exposes: a DLPack capsule on device type 2 (kDLCUDA).
        def __init__(self, ptr, n):
            self.shape = (ctypes.c_int64 * 1)(n)
            self.mt = DLManagedTensor()
            t = self.mt.dl_tensor
            t.data, t.device, t.ndim = ptr, DLDevice(2, 0), 1
            t.dtype, t.shape, t.byte_offset = DLDataType(1, 8, 1), self.shape, 0

        def __dlpack_device__(self):
            return (2, 0)

        def __dlpack__(self, stream=None):
            return capsule_new(ctypes.addressof(self.mt), b"dltensor", None)

    endpoint, ak, sk, bucket, fabric = sys.argv[1:6]
    c = objdirect.Client(endpoint=endpoint, access_key=ak, secret_key=sk, fabric=fabric,
                         part_size_bytes=5 << 20)
    c.create_bucket(bucket)
    for n in (4096, (11 << 20) + 3):
        want = os.urandom(n)
        src, dst = malloc(n), malloc(n + 64)
        ctypes.memmove(lib.fake_cuda_alias(src), want, n)
        r = c.put(bucket, "dev", DeviceArray(src, n, read_only=True))
        assert r.nbytes == n, r
        assert c.get(bucket, "dev") == want, "stored bytes differ"
        r = c.get_into(bucket, "dev", DeviceArray(dst, n + 64))
        assert r.nbytes == n, r
        assert ctypes.string_at(lib.fake_cuda_alias(dst), n) == want, "device bytes differ"
        r = c.get_into(bucket, "dev", DeviceArray(dst + 7, 1000), offset=n - 1000)
        assert ctypes.string_at(lib.fake_cuda_alias(dst) + 7, 1000) == want[-1000:]
        try:
            c.get_into(bucket, "dev", DeviceArray(dst, n, read_only=True))
            raise AssertionError("a read-only device array was written")
        except BufferError:
            pass
        # DLPack on CUDA (torch's way): the same device path.
        r = c.put(bucket, "dl", DLPackCuda(src, n))
        assert r.nbytes == n and c.get(bucket, "dl") == want
        ctypes.memset(lib.fake_cuda_alias(dst), 0, n)
        assert c.get_into(bucket, "dl", DLPackCuda(dst, n)).nbytes == n
        assert ctypes.string_at(lib.fake_cuda_alias(dst), n) == want, "DLPack device bytes differ"
    # A pointer CUDA does not know is refused, never dereferenced.
    try:
        c.get_into(bucket, "dev", DeviceArray(0xDEAD0000, 4096))
        raise AssertionError("an unknown pointer was accepted")
    except objdirect.DeviceBufferNotSupported as e:
        assert "does not know" in str(e), e
    print("device round trips ok")
""")


@pytest.mark.skipif(not FAKE_CUDA.exists(), reason=f"{FAKE_CUDA} not built")
@pytest.mark.parametrize("fabric", ["none", "libfabric:tcp"])
def test_cuda_array_interface_round_trip_with_fake_cuda(server, fabric, tmp_path):
    env = dict(os.environ, OBJDIRECT_CUDA_LIBRARY=str(FAKE_CUDA),
               OBJDIRECT_CUDART_LIBRARY=str(FAKE_CUDA))
    bucket = "devpy-" + fabric.replace(":", "-")
    p = subprocess.run([sys.executable, "-c", CHILD, server.endpoint, ACCESS_KEY, SECRET_KEY,
                        bucket, fabric], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode != -signal.SIGSEGV, "the CPU touched device memory:\n" + p.stderr
    assert p.returncode == 0, p.stdout + p.stderr
    assert "device round trips ok" in p.stdout


def test_cuda_tensor_round_trip(client, bucket):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device on this machine (the fake-CUDA test above covers the path)")
    src = torch.randint(0, 255, ((9 << 20) + 5,), dtype=torch.uint8, device="cuda")
    assert client.put(bucket, "t", src).nbytes == src.numel()
    dst = torch.zeros_like(src)
    assert client.get_into(bucket, "t", dst).nbytes == src.numel()
    assert torch.equal(src, dst)
