"""objdirect.torch into real CUDA memory: load(map_location="cuda"), load_safetensors(device=
"cuda") and device= datasets. Skipped without a GPU (this machine; the fake-CUDA tests in
test_torch_datasets.py cover the path without torch CUDA tensors); scripts/gpu-check.sh runs
them with OBJDIRECT_REQUIRE_GPU=1, which turns the skip into a failure."""

import os

import pytest
import torch

import objdirect.torch as odt
from conftest import ACCESS_KEY, SECRET_KEY

gpu = torch.cuda.is_available()
if not gpu and os.environ.get("OBJDIRECT_REQUIRE_GPU"):
    raise RuntimeError("OBJDIRECT_REQUIRE_GPU is set but torch sees no CUDA device")
pytestmark = pytest.mark.skipif(not gpu, reason="no CUDA device on this machine")


@pytest.fixture(params=["none", "libfabric:tcp"])
def settings(server, request):
    return dict(endpoint=server.endpoint, access_key=ACCESS_KEY, secret_key=SECRET_KEY,
                fabric=request.param)


def test_load_lands_storages_in_device_memory(settings, bucket):
    w = torch.randn(1 << 20)
    state = {"w": w, "view": w[10:20], "i": torch.arange(1000), "n": 3,
             "bf": torch.randn(77).to(torch.bfloat16)}
    odt.save(state, f"s3://{bucket}/g.pt", **settings)
    for loc in ("cuda", "cuda:0", torch.device("cuda"), {"cpu": "cuda:0"}):
        got = odt.load(f"s3://{bucket}/g.pt", map_location=loc, **settings)
        assert got["n"] == 3
        for k in ("w", "view", "i", "bf"):
            assert got[k].is_cuda and torch.equal(got[k].cpu(), state[k])
        assert got["view"].storage().data_ptr() == got["w"].storage().data_ptr()
    # Each storage's GET carried its local header in front (a slice of a device allocation):
    # no misprediction, storages 64-byte aligned, and an archive with gaps between records
    # (read exactly, header first) still lands right.
    st = {}
    got = odt.load(f"s3://{bucket}/g.pt", map_location="cuda", stats=st, **settings)
    assert st["mispredicted"] == 0 and got["w"].data_ptr() % 64 == 0, st
    import io
    import zipfile
    buf = io.BytesIO()
    torch.save(state, buf)
    src = zipfile.ZipFile(io.BytesIO(buf.getvalue()))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        for info in src.infolist():
            z.writestr(info.filename, src.read(info.filename))
            if "/data/" in info.filename:
                z.fp.write(b"gap" * 7)
                z.start_dir = z.fp.tell()
    import objdirect
    objdirect.Client(**settings).put(bucket, "gaps.pt", out.getvalue())
    st = {}
    got = odt.load(f"s3://{bucket}/gaps.pt", map_location="cuda", stats=st, **settings)
    assert st["mispredicted"] == 3, st
    for k in ("w", "view", "i", "bf"):
        assert got[k].is_cuda and torch.equal(got[k].cpu(), state[k])


def test_safetensors_and_datasets_into_device_memory(settings, client, bucket):
    t = {"a": torch.randn(3000, 7), "b": torch.arange(5, dtype=torch.int32)}
    odt.save_safetensors(t, f"s3://{bucket}/m.safetensors", **settings)
    got = odt.load_safetensors(f"s3://{bucket}/m.safetensors", device="cuda", **settings)
    assert all(got[k].is_cuda and torch.equal(got[k].cpu(), v) for k, v in t.items())
    for i in range(5):
        client.put(bucket, f"x/{i}", bytes([i]) * (4096 * (i + 1)))
    ds = odt.IterableDataset.from_prefix(f"s3://{bucket}/x/", device="cuda", **settings)
    items = list(ds)
    assert all(x.is_cuda for x in items)
    assert [bytes(x.cpu().numpy()) for x in items] == [bytes([i]) * (4096 * (i + 1))
                                                       for i in range(5)]
