"""A tensor whose storage is over 4 GiB, through write_tensor_blob and the real server.

Its own ctest entry (python_zip64_blob, not in python_pytest): it moves about 13 GiB through
memory, the disk and loopback (about 2 minutes here) and holds one 4 GiB tensor at a time (the
peak RSS is checked). The blob's storage record needs zip64 sizes and the record after it a
zip64 offset, as torch's own writer does them.

1. The blob equals torch.save's of the same tensor byte for byte (torch 1.13 is deterministic;
   on a torch that writes a serialization id, every record but that one), compared piece by
   piece against torch.save's file on disk, while it streams into a multipart upload.
2. torch.load through Checkpoint.reader, objdirect.torch.load, and read_items (a box past the
   first 4 GiB, planned from the blob's first and last 4 KiB) read it back: sampled slices
   against the fill pattern and a CRC32 of everything.
"""

import gc
import io
import os
import random
import resource
import zlib

import pytest
import torch

import objdirect.dcp as odd
import objdirect.torch as odt
from objdirect.objects import ObjectReader, ObjectWriter
from conftest import make_client
from test_dcp import Info, _tensor_item

N = (4 << 30) + (3 << 20) + 5  # bytes: the storage record and the offsets after it need zip64
PATTERN_BYTES = 1_000_003      # a prime: the fill repeats at no power-of-two period
PEAK_RSS_BYTES = 6 << 30       # one 4 GiB tensor at a time, plus the part buffers and torch


def _pattern():
    return random.Random(16).randbytes(PATTERN_BYTES)


def _filled(n: int, pattern: bytes):
    """A uint8 tensor of n bytes holding pattern repeated, filled by doubling copies."""
    t = torch.empty(n, dtype=torch.uint8)
    t[:len(pattern)] = torch.frombuffer(bytearray(pattern), dtype=torch.uint8)
    k = len(pattern)
    while k < n:
        m = min(k, n - k)
        t[k:k + m] = t[:m]
        k += m
    return t


def _expected(pattern: bytes, start: int, length: int) -> bytes:
    p = len(pattern)
    out = bytearray()
    while len(out) < length:
        i = (start + len(out)) % p
        out += pattern[i:i + length - len(out)]
    return bytes(out)


def _samples():
    """(offset, length) slices to compare: both ends, both sides of 4 GiB, random places."""
    rng = random.Random(5)
    fixed = [(0, 4096), ((1 << 32) - 4096, 8192), (0xFFFFFFFF - 100, 200), (N - 4096, 4096)]
    return fixed + [(rng.randrange(0, N - 65536), 65536) for _ in range(12)]


def _check(t, pattern: bytes, crc: int):
    assert t.dtype == torch.uint8 and tuple(t.shape) == (N,)
    a = t.numpy()
    for off, n in _samples():
        assert a[off:off + n].tobytes() == _expected(pattern, off, n), off
    assert zlib.crc32(memoryview(a)) == crc


class _Tee(io.RawIOBase):
    """Writes to w and compares every byte with the file ref, 64 MiB at a time."""

    def __init__(self, w, ref):
        super().__init__()
        self.w, self.ref, self.pos = w, ref, 0

    def writable(self):
        return True

    def write(self, b):
        mv = memoryview(b).cast("B")
        k = 0
        while k < len(mv):
            m = min(64 << 20, len(mv) - k)
            assert self.ref.read(m) == mv[k:k + m], f"differs from torch.save at {self.pos + k}"
            k += m
        self.w.write(mv)
        self.pos += len(mv)
        return len(mv)


def _deterministic_torch_save() -> bool:
    a, b = io.BytesIO(), io.BytesIO()
    torch.save(torch.ones(3), a)
    torch.save(torch.ones(3), b)
    return a.getvalue() == b.getvalue()


def test_a_storage_over_4_gib_streams_as_torch_save_and_reads_back(server, tmp_path):
    if not _deterministic_torch_save():
        pytest.skip("this torch writes a serialization id per save: test_dcp.py compares "
                    "records; this test needs torch.save's bytes")
    client = make_client(server)
    bucket = "py-zip64-blob"
    client.create_bucket(bucket)
    try:
        pattern = _pattern()
        t = _filled(N, pattern)
        crc = zlib.crc32(memoryview(t.numpy()))
        ref_path = tmp_path / "archive.pt"  # torch names the archive after the file: "archive"
        torch.save(t, str(ref_path))
        ref_size = os.path.getsize(ref_path)
        with open(ref_path, "rb") as ref:
            with ObjectWriter(client, bucket, "big.pt", part_size=16 << 20,
                              parts_in_flight=2) as w:
                tee = _Tee(w, ref)
                assert odd.write_tensor_blob(tee, t) == "streamed"
            assert ref.read(1) == b""  # as long as torch.save's, and equal throughout
        assert tee.pos == ref_size == client.head(bucket, "big.pt").size
        assert w.buffers_allocated <= 3
        os.remove(ref_path)
        del t
        gc.collect()

        with ObjectReader(client, bucket, "big.pt", mode="ranged") as f:
            got = torch.load(f)
        _check(got, pattern, crc)
        del got
        gc.collect()

        stats = {}
        got = odt.load(f"s3://{bucket}/big.pt", client=client, stats=stats)
        _check(got, pattern, crc)
        del got
        gc.collect()
        # First bytes, tail, the storage (its zip64 descriptor predicted right), the version
        # record (at a zip64 offset, in the tail): no record read twice.
        assert stats["mispredicted"] == 0 and stats["storage_bytes"] == N, stats

        box_at, box_len = (1 << 32) + 12345, 2 << 20  # a box wholly past the first 4 GiB
        dest = torch.zeros(box_len, dtype=torch.uint8)
        md = {"t": Info("big.pt", 0, ref_size)}
        gets = []

        def get(p, o, n):
            gets.append((o, n))
            return client.get(bucket, p, offset=o, length=n)

        st = odd.read_items(
            [_tensor_item("t", (box_len,), "t", offsets=(box_at,))], md, gap_bytes=0, get=get,
            get_into=lambda p, buf, o, n: client.get_into(bucket, p, buf, offset=o,
                                                          length=n).nbytes,
            resolve_tensor=lambda req: dest, commit_tensor=lambda req, x: None, load_bytes=None)
        assert sorted(gets) == [(0, odd.blob_head_bytes),
                                (ref_size - odd.blob_tail_bytes, odd.blob_tail_bytes)]
        assert (st["index_gets"], st["direct_gets"], st["fallback"]) == (2, 1, 0), st
        assert dest.numpy().tobytes() == _expected(pattern, box_at, box_len)
    finally:
        client.delete(bucket, "big.pt")
        client.delete_bucket(bucket)
        client.close()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss << 10
    print(f"zip64 blob: {ref_size} bytes, peak RSS {peak / (1 << 30):.2f} GiB")
    assert peak < PEAK_RSS_BYTES
