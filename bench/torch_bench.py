#!/usr/bin/env python3
"""objdirect.torch benchmark (not a test): datasets and checkpoints against boto3 on the same
objdirect-server, each measure in the same run as its baseline. Figures go to docs/BENCHMARKS.md.

    PYTHONPATH=build/python /usr/bin/python3 bench/torch_bench.py dataset --objects 5000,20000
    PYTHONPATH=build/python /usr/bin/python3 bench/torch_bench.py checkpoint --mib 1024
    PYTHONPATH=build/python /usr/bin/python3 bench/torch_bench.py gpu-load --mib 4096   # needs a GPU
    PYTHONPATH=build/python /usr/bin/python3 bench/torch_bench.py dcp-write-memory --mib 256

dataset: N objects of 4-300 KiB (uniform, fixed seed) under one prefix, read through a
DataLoader with 2 workers (batch 32) by: objdirect IterableDataset over RDMA (fabric, default
libfabric:shm) with each --prefetch setting (default 32, 8 and 0; prefetch goes through
Client.get_many batches), the non-zero ones over HTTP (0 too with --http-prefetch-off), and a
boto3 dataset (one GetObject per
sample, a boto3 client per worker). --objects 5000,20000 runs the first 5000 and all 20000 of
the same objects in one run. The datasets take turns, a pass each per round (one warm-up round,
then --repeat rounds), so that the machine's noise falls on all alike. Prints samples/s and MB/s
of each (its best pass), then a table of samples/s and the ratio to boto3 per size.

checkpoint: a state dict of --mib MiB (float32 tensors of 64 MiB): objdirect.torch.save / load
against torch.save into a BytesIO + boto3 upload_fileobj, and boto3 download_fileobj + torch.load.
Rounds of the four in turn (--repeat); prints the fastest pass of each: GB/s and client CPU
seconds per GiB (time.process_time of this process: every thread).

gpu-load: torch and safetensors checkpoints of --mib MiB loaded with map_location="cuda" /
device="cuda", against a pinned-host cudaMemcpy (torch .to("cuda") of a pinned tensor) of the
same bytes.

dcp-write-memory: the host memory one DCP tensor item of --mib MiB (float32) takes to write
into an ObjectWriter (StorageWriter's defaults: part_size 8 MiB, 4 parts in flight), by
objdirect.dcp.write_tensor_blob against the former path (t.cpu(), a contiguous clone of a view,
torch.save), for a contiguous tensor, a transposed view and a row slice of a tensor twice as
large: each in a fresh process, peak RSS (VmHWM, reset after the tensor is allocated) minus the
RSS before the write.

The server is started here (build/bin/objdirect-server, --no-fsync, data in a temporary
directory) unless --endpoint is given.
"""

import argparse
import io
import os
import random
import shutil
import sys
import tempfile
import time

from bench_server import ACCESS, SECRET, start_server  # bench/bench_server.py


def boto3_client(endpoint):
    import boto3
    import botocore.config
    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=ACCESS,
                        aws_secret_access_key=SECRET, region_name="us-east-1",
                        config=botocore.config.Config(s3={"addressing_style": "path"},
                                                      max_pool_connections=16))


# -- dataset ------------------------------------------------------------------------------------


def nbytes_of(reader):
    return len(reader.read())


class Boto3Dataset:
    """What a boto3 user writes: keys listed once, one GetObject per sample, a client per
    worker (boto3 clients do not survive fork)."""

    def __init__(self, endpoint, bucket, keys):
        self.endpoint, self.bucket, self.keys = endpoint, bucket, keys
        self._s3 = None
        self._pid = None

    def __iter__(self):
        import torch.utils.data
        if self._pid != os.getpid():
            self._s3, self._pid = boto3_client(self.endpoint), os.getpid()
        info = torch.utils.data.get_worker_info()
        w, n = (info.id, info.num_workers) if info else (0, 1)
        for k in self.keys[w::n]:
            yield len(self._s3.get_object(Bucket=self.bucket, Key=k)["Body"].read())


def bench_dataset(endpoint, args):
    import torch.utils.data
    import objdirect
    import objdirect.torch as odt

    class BotoIterable(Boto3Dataset, torch.utils.data.IterableDataset):
        pass

    c = objdirect.Client(endpoint=endpoint, access_key=ACCESS, secret_key=SECRET, fabric="none")
    bucket = "bench-dataset"
    counts = sorted({int(x) for x in str(args.objects).split(",")})
    prefetches = [int(x) for x in str(args.prefetch).split(",")]
    most = counts[-1]
    rng = random.Random(0)
    sizes = [rng.randint(4 << 10, 300 << 10) for _ in range(most)]
    try:
        c.create_bucket(bucket)
    except objdirect.BucketAlreadyOwnedByYou:
        pass
    have = {o.key: o.size for o in c.list(bucket, "d/")}
    blob = os.urandom(300 << 10)
    t0 = time.monotonic()
    for i, n in enumerate(sizes):
        k = f"d/{i:06d}"
        if have.get(k) != n:
            c.put(bucket, k, memoryview(blob)[:n])
    print(f"dataset: {most} objects written, {sum(sizes) / 1e9:.2f} GB, mean "
          f"{sum(sizes) / len(sizes) / 1024:.0f} KiB ({time.monotonic() - t0:.0f} s); runs over "
          f"the first {', '.join(map(str, counts))}", flush=True)

    def cpu_ticks():
        # The machine's busy and total CPU ticks (/proc/stat): the server, the loader and its
        # workers all run here, so a pass that keeps every core busy is CPU-bound.
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v) - v[3] - v[4], sum(v)

    def run(named, n, total):
        """Passes of every (name, dataset) in turn, so that the machine's noise falls on all of
        them alike: one warm-up round, then --repeat rounds; the best pass of each, with the
        share of the machine's CPU that was busy during it."""
        loaders = [(name, torch.utils.data.DataLoader(ds, batch_size=32, num_workers=2,
                                                      collate_fn=lambda b: sum(b),
                                                      persistent_workers=True))
                   for name, ds in named]
        best, busy = {}, {}
        for rep in range(args.repeat + 1):
            for name, loader in loaders:
                b0, a0 = cpu_ticks()
                t = time.monotonic()
                got = sum(loader)
                dt = time.monotonic() - t
                b1, a1 = cpu_ticks()
                assert got == total, (name, got, total)
                if rep and (name not in best or dt < best[name]):
                    best[name] = dt
                    busy[name] = (b1 - b0) / max(1, a1 - a0)
        for name, _ in loaders:
            print(f"  {n:6d} {name:38s} {n / best[name]:8.0f} samples/s "
                  f"{total / best[name] / 1e6:8.0f} MB/s  CPU {100 * busy[name]:3.0f} % busy "
                  f"({os.cpu_count()} cores)", flush=True)
        return {name: n / best[name] for name, _ in loaders}

    common = dict(endpoint=endpoint, access_key=ACCESS, secret_key=SECRET)
    configs = [(args.fabric, p) for p in prefetches] + [("none", p) for p in prefetches
                                                         if p or args.http_prefetch_off]
    table = {}
    for n in counts:
        keys = [f"d/{i:06d}" for i in range(n)]
        total = sum(sizes[:n])
        manifest = [(f"s3://{bucket}/{k}", s) for k, s in zip(keys, sizes)]
        named = [(f"objdirect {fabric} prefetch={prefetch}",
                  odt.IterableDataset.from_manifest(manifest, transform=nbytes_of,
                                                    prefetch=prefetch, fabric=fabric, **common))
                 for fabric, prefetch in configs]
        named.append(("boto3 GetObject per sample", BotoIterable(endpoint, bucket, keys)))
        got = run(named, n, total)
        res = {cfg: got[name] for cfg, (name, _) in zip(configs, named)}
        res["boto3"] = got["boto3 GetObject per sample"]
        table[n] = res
    print("\n  samples/s and ratio to boto3 (same run)")
    print("  " + f"{'':34s}" + "".join(f"{n:>22d}" for n in counts))
    for cfg in configs + ["boto3"]:
        name = "boto3" if cfg == "boto3" else f"objdirect {cfg[0]} prefetch={cfg[1]}"
        cells = "".join(f"{table[n][cfg]:>12.0f} ({table[n][cfg] / table[n]['boto3']:5.2f}x)"
                        for n in counts)
        print(f"  {name:34s}{cells}")


# -- checkpoint ---------------------------------------------------------------------------------


def bench_checkpoint(endpoint, args):
    import torch
    import objdirect
    import objdirect.torch as odt
    mib = args.mib
    state = {f"layer{i}": torch.randn(16 << 20) for i in range(mib // 64)}
    nbytes = sum(t.numel() * 4 for t in state.values())
    gib = nbytes / (1 << 30)
    bucket = "bench-ckpt"
    c = objdirect.Client(endpoint=endpoint, access_key=ACCESS, secret_key=SECRET,
                         fabric=args.fabric)
    try:
        c.create_bucket(bucket)
    except objdirect.BucketAlreadyOwnedByYou:
        pass
    s3 = boto3_client(endpoint)
    print(f"checkpoint: {len(state)} tensors, {nbytes / 1e9:.2f} GB, fabric {args.fabric}",
          flush=True)

    def measure(fn):
        w, p = time.monotonic(), time.process_time()
        out = fn()
        cur = (time.monotonic() - w, time.process_time() - p)
        del out
        return cur

    def od_save():
        return odt.save(state, f"s3://{bucket}/od.pt", client=c)

    def od_load():
        return odt.load(f"s3://{bucket}/od.pt", client=c)

    def boto_save():
        buf = io.BytesIO()
        torch.save(state, buf)
        buf.seek(0)
        s3.upload_fileobj(buf, bucket, "boto.pt")

    def boto_load():
        buf = io.BytesIO()
        s3.download_fileobj(bucket, "boto.pt", buf)
        buf.seek(0)
        return torch.load(buf)

    rows = [("objdirect save", od_save), ("boto3 save (torch.save+BytesIO+upload_fileobj)",
                                          boto_save),
            ("objdirect load", od_load), ("boto3 load (download_fileobj+torch.load)", boto_load)]
    got = {}
    for _ in range(args.repeat):  # rounds of every row in turn; the fastest pass of each
        for name, fn in rows:
            cur = measure(fn)
            if name not in got or cur[0] < got[name][0]:
                got[name] = cur
    for name, _ in rows:
        wall, cpu = got[name]
        print(f"  {name:48s} {nbytes / wall / 1e9:6.2f} GB/s  {cpu / gib:6.2f} CPU-s/GiB",
              flush=True)
    loaded = od_load()
    assert all(torch.equal(loaded[k], v) for k, v in state.items())
    ow, oc = got["objdirect load"]
    bw, bc = got["boto3 load (download_fileobj+torch.load)"]
    print(f"  load: objdirect {bw / ow:.2f}x boto3's speed at {oc / bc:.2f}x its CPU")


# -- GPU ----------------------------------------------------------------------------------------


def bench_gpu_load(endpoint, args):
    import torch
    import objdirect
    import objdirect.torch as odt
    assert torch.cuda.is_available(), "gpu-load needs a CUDA device"
    n = args.mib << 20
    state = {f"t{i}": torch.randn(16 << 20) for i in range(args.mib // 64)}
    c = objdirect.Client(endpoint=endpoint, access_key=ACCESS, secret_key=SECRET,
                         fabric=args.fabric)
    try:
        c.create_bucket("bench-gpu")
    except objdirect.BucketAlreadyOwnedByYou:
        pass
    odt.save(state, "s3://bench-gpu/m.pt", client=c)
    odt.save_safetensors(state, "s3://bench-gpu/m.safetensors", client=c)
    pinned = torch.empty(n, dtype=torch.uint8).pin_memory()
    torch.cuda.synchronize()

    def timed(fn):
        best = None
        for _ in range(args.repeat):
            torch.cuda.synchronize()
            t = time.monotonic()
            out = fn()
            torch.cuda.synchronize()
            dt = time.monotonic() - t
            best = dt if best is None else min(best, dt)
            del out
            torch.cuda.empty_cache()
        return best

    h2d = timed(lambda: pinned.to("cuda", non_blocking=True))
    pt = timed(lambda: odt.load("s3://bench-gpu/m.pt", map_location="cuda", client=c))
    st = timed(lambda: odt.load_safetensors("s3://bench-gpu/m.safetensors", device="cuda",
                                            client=c))
    got = odt.load("s3://bench-gpu/m.pt", map_location="cuda", client=c)
    assert all(got[k].is_cuda and torch.equal(got[k].cpu(), v) for k, v in state.items())
    got = odt.load_safetensors("s3://bench-gpu/m.safetensors", device="cuda", client=c)
    assert all(got[k].is_cuda and torch.equal(got[k].cpu(), v) for k, v in state.items())
    print(f"gpu-load {n / 1e9:.2f} GB over {args.fabric}: pinned H2D {n / h2d / 1e9:.2f} GB/s, "
          f"objdirect.torch.load(map_location='cuda') {n / pt / 1e9:.2f} GB/s, "
          f"load_safetensors(device='cuda') {n / st / 1e9:.2f} GB/s")


def _rss_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(field)


def dcp_write_memory_case(endpoint, args):
    """One case of dcp-write-memory, in this process: prints 'extra_mib seconds'."""
    import torch
    import objdirect
    import objdirect.dcp as odd
    from objdirect.objects import ObjectWriter
    method, shape = args.case.split(":")
    n = args.mib << 18  # float32 elements
    if shape == "contiguous":
        t = torch.randn(n)
    elif shape == "transposed":
        t = torch.randn(1024, n // 1024).t()
    else:  # a row slice, half of a tensor twice as large
        t = torch.randn(2 * n // 1024, 1024)[n // 1024 // 2:n // 1024 // 2 + n // 1024]
    c = objdirect.Client(endpoint=endpoint, access_key=ACCESS, secret_key=SECRET,
                         fabric="none")
    if "mem" not in c.list_buckets():
        c.create_bucket("mem")
    w = ObjectWriter(c, "mem", f"{args.case}.distcp", part_size=8 << 20, parts_in_flight=4)
    pool = odd.HostChunkPool(pin=False)
    before = _rss_kib("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to the current RSS
    t0 = time.perf_counter()
    with w:
        if method == "new":
            odd.write_tensor_blob(w, t, pool=pool)
        else:
            x = t.detach().cpu()
            if not x.is_contiguous() or x.storage().nbytes() != x.numel() * x.element_size():
                x = x.clone(memory_format=torch.contiguous_format)
            torch.save(x, w)
    dt = time.perf_counter() - t0
    print(f"{(_rss_kib('VmHWM') - before) / 1024:.1f} {dt:.3f}")


def bench_dcp_write_memory(endpoint, args):
    import subprocess
    print(f"dcp-write-memory: one {args.mib} MiB float32 tensor item into an ObjectWriter "
          f"(part_size 8 MiB, 4 parts in flight): extra peak RSS, MiB (seconds)")
    for shape in ("contiguous", "transposed", "row_slice"):
        row = []
        for method in ("old", "new"):
            out = subprocess.run([sys.executable, __file__, "dcp-write-memory", "--endpoint",
                                  endpoint, "--mib", str(args.mib), "--case",
                                  f"{method}:{shape}"], check=True, capture_output=True,
                                 text=True).stdout.split()
            row.append(f"{method} {out[0]} MiB ({out[1]} s)")
        print(f"  {shape:10s}  " + ", ".join(row))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=["dataset", "checkpoint", "gpu-load", "dcp-write-memory"])
    ap.add_argument("--case", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--objects", default="20000",
                    help="dataset sizes, comma-separated (e.g. 5000,20000: the first 5000 of the "
                         "same objects, in the same run)")
    ap.add_argument("--prefetch", default="32,8,0",
                    help="dataset prefetch settings to run over the RDMA fabric (the non-zero "
                         "ones over HTTP too), comma-separated")
    ap.add_argument("--http-prefetch-off", action="store_true",
                    help="dataset: run prefetch=0 over HTTP too (by default only the RDMA "
                         "fabric runs it)")
    ap.add_argument("--mib", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--fabric", default="libfabric:shm")
    ap.add_argument("--endpoint", default=None)
    ap.add_argument("--bin-dir", default=os.path.join(os.path.dirname(__file__), "..", "build",
                                                      "bin"))
    args = ap.parse_args()
    os.environ.setdefault("FI_TCP_IFACE", "lo")
    proc = tmp = None
    endpoint = args.endpoint
    if endpoint is None:
        tmp = tempfile.mkdtemp(prefix="objdirect-torch-bench-")
        proc, endpoint = start_server(args.bin_dir, os.path.join(tmp, "data"))
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    try:
        if args.case:
            dcp_write_memory_case(endpoint, args)
        else:
            {"dataset": bench_dataset, "checkpoint": bench_checkpoint, "gpu-load": bench_gpu_load,
             "dcp-write-memory": bench_dcp_write_memory}[args.what](endpoint, args)
    finally:
        print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
              flush=True)
        if proc is not None:
            proc.terminate()
            proc.wait()
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
