"""objdirect: S3 over RDMA for Python (the ObjDirect client).

    import numpy as np, objdirect
    client = objdirect.Client(endpoint="http://127.0.0.1:9000")   # keys from AWS_* / ~/.aws
    client.put("bucket", "weights.bin", np.arange(1 << 20, dtype=np.float32))
    buf = np.empty(1 << 20, dtype=np.float32)
    nbytes, path = client.get_into("bucket", "weights.bin", buf)   # path: "rdma" | "http" | ...

See objdirect.Client for the calls, objdirect.errors for the exceptions and objdirect.torch for
PyTorch datasets and checkpoints, objdirect.fs for the fsspec filesystem (protocol
"objdirect", found by fsspec through the package's entry point) and objdirect.dcp for
torch.distributed.checkpoint. Thread safety: see objdirect.Client.
"""

from . import errors
from .client import (Client, ClientConfig, GetRequest, ObjectInfo, ObjectSummary, PutRequest,
                     Registration, TransferResult)
from .errors import *  # noqa: F401,F403  (the exception classes at top level, like boto3's)
from .errors import __all__ as _errors_all

__version__ = "0.1.0"

__all__ = ["Client", "ClientConfig", "GetRequest", "ObjectInfo", "ObjectSummary", "PutRequest",
           "Registration", "TransferResult", "errors"] + list(_errors_all)


def parse_uri(uri: str):
    """("bucket", "key") of "s3://bucket/key". Raises ValueError for anything else."""
    if not isinstance(uri, str) or not uri.startswith("s3://"):
        raise ValueError(f"expected s3://bucket/key, got {uri!r}")
    bucket, _, key = uri[5:].partition("/")
    if not bucket:
        raise ValueError(f"no bucket in {uri!r}")
    return bucket, key


def _register_fsspec():
    """The ``objdirect`` fsspec protocol. fsspec finds it through the package's fsspec.specs
    entry point when it is imported; when it already was (before objdirect), register now. Not
    imported here: fsspec's import costs more than objdirect's."""
    import sys
    fsspec = sys.modules.get("fsspec")
    if fsspec is not None and "objdirect" not in fsspec.registry:
        fsspec.register_implementation("objdirect", "objdirect.fs.ObjDirectFileSystem")


_register_fsspec()
