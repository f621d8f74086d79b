#!/usr/bin/env python3
"""Client.get_many against a loop of Client.get_into (a benchmark, not a test): objects per second
for many small objects and fewer larger ones, over HTTP and over an RDMA fabric, side by side in
one run against one objdirect-server. Figures go to docs/BENCHMARKS.md.

    PYTHONPATH=build/python /usr/bin/python3 bench/batch_bench.py
    PYTHONPATH=build/python /usr/bin/python3 bench/batch_bench.py --sets 10000x4096,1000x262144 \\
        --fabrics none,libfabric:shm --repeat 3
    PYTHONPATH=build/python /usr/bin/python3 bench/batch_bench.py --sets 2000x4096 --delay-ms 0.25

For each set (COUNTxBYTES) the objects are written once with put_many, then read back by both
methods into slices of one preallocated numpy arena (laid end to end, so get_many registers it
once): the loop calls get_into once per object; get_many gets the whole list (client
concurrency --concurrency requests in flight). One warm-up pass of each, then --repeat passes of
each, alternated; the best pass of each is printed (objects/s, MB/s) with the ratio. Every byte
of the last pass of each method is compared with what was written.

With --delay-ms D the client's HTTP connections go through objdirect-delay-proxy
(bench/delay_proxy.cc), which adds D ms
each way, as a network would: a loop then pays a round trip per object, and get_many overlaps
them (the RDMA bytes themselves do not pass the proxy).

The fabric is named explicitly, so RDMA is used at every size (with fabric "auto" objects
below the crossover, 512 KiB for GETs and 64 KiB for PUTs by default, go over HTTP, which is faster there). The server is
started here (build/bin/objdirect-server, --no-fsync, data in a temporary directory) unless
--endpoint is given.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

from bench_server import ACCESS, SECRET, start_server  # bench/bench_server.py


def one_set(objdirect, endpoint, fabric, count, size, args):
    bucket = "batch-bench"
    with objdirect.Client(endpoint=endpoint, access_key=ACCESS, secret_key=SECRET, fabric=fabric,
                          concurrency=args.concurrency) as c:
        try:
            c.create_bucket(bucket)
        except objdirect.BucketAlreadyOwnedByYou:
            pass
        prefix = f"{count}x{size}/"
        src = np.random.default_rng(count ^ size).integers(0, 256, count * size, dtype=np.uint8)
        keys = [f"{prefix}{i:06d}" for i in range(count)]
        for r in c.put_many([(bucket, k, src[i * size:(i + 1) * size])
                             for i, k in enumerate(keys)]):
            assert r.nbytes == size
        arena = np.empty(count * size, dtype=np.uint8)
        slices = [arena[i * size:(i + 1) * size] for i in range(count)]

        def loop():
            path = None
            for k, s in zip(keys, slices):
                path = c.get_into(bucket, k, s).path
            return path

        def batch():
            return c.get_many([(bucket, k, s) for k, s in zip(keys, slices)])[-1].path

        best = {}
        paths = {}
        for name, fn in (("loop", loop), ("get_many", batch)):  # warm-up
            fn()
        for _ in range(args.repeat):
            for name, fn in (("loop", loop), ("get_many", batch)):
                arena[:] = 0
                t0 = time.perf_counter()
                paths[name] = fn()
                dt = time.perf_counter() - t0
                best[name] = min(best.get(name, dt), dt)
                if not np.array_equal(arena, src):
                    raise SystemExit(f"{name} {fabric} {count}x{size}: bytes differ")
        for k in keys:
            c.delete(bucket, k)
        return best, paths


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sets", default="10000x4096,1000x262144", help="COUNTxBYTES,...")
    p.add_argument("--fabrics", default="none,libfabric:shm",
                   help="client fabrics to compare (none: HTTP)")
    p.add_argument("--concurrency", type=int, default=8, help="get_many requests in flight")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--endpoint", help="an existing server (keys benchaccesskey/bench-secret-key)")
    p.add_argument("--delay-ms", type=float, default=0.0,
                   help="one-way delay added to the HTTP connections by objdirect-delay-proxy "
                        "(a round trip pays twice it; RDMA bytes do not pass the proxy)")
    p.add_argument("--bin-dir", default=os.path.join(os.path.dirname(__file__), "..", "build",
                                                     "bin"))
    args = p.parse_args()
    import objdirect

    sets = [tuple(int(x) for x in s.split("x")) for s in args.sets.split(",")]
    tmp = proc = None
    endpoint = args.endpoint
    if not endpoint:
        tmp = tempfile.mkdtemp(prefix="batch-bench-")
        proc, endpoint = start_server(args.bin_dir, os.path.join(tmp, "data"))
    delay = None
    if args.delay_ms > 0:
        delay = subprocess.Popen(
            [os.path.join(args.bin_dir, "objdirect-delay-proxy"), "--to",
             endpoint.split("//", 1)[1], "--delay-us", str(round(args.delay_ms * 1000))],
            stdout=subprocess.PIPE)
        endpoint = delay.stdout.readline().decode().split()[-1]
        print(f"through objdirect-delay-proxy: {args.delay_ms} ms each way, {endpoint}")
    try:
        print(f"{'objects':>14} {'fabric':>14} {'path':>6} {'loop obj/s':>11} "
              f"{'get_many obj/s':>15} {'loop MB/s':>10} {'many MB/s':>10} {'ratio':>6}")
        for count, size in sets:
            for fabric in args.fabrics.split(","):
                best, paths = one_set(objdirect, endpoint, fabric, count, size, args)
                lo, gm = count / best["loop"], count / best["get_many"]
                print(f"{count:>7} x {size // 1024:>3}K {fabric:>14} {paths['get_many']:>6} "
                      f"{lo:>11,.0f} {gm:>15,.0f} {lo * size / 1e6:>10,.0f} "
                      f"{gm * size / 1e6:>10,.0f} {gm / lo:>5.2f}x", flush=True)
    finally:
        if delay:
            delay.terminate()
            delay.wait()
        if proc:
            proc.terminate()
            proc.wait()
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
