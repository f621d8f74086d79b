#!/usr/bin/env python3
"""Client and server CPU per GET of dataset-sized objects (not a test). Figures go to
docs/BENCHMARKS.md (optimisation 12).

    PYTHONPATH=build/python /usr/bin/python3 bench/get_cost.py
    PYTHONPATH=build/python /usr/bin/python3 bench/get_cost.py --server-bin OLD/objdirect-server \
        --server-bin build/bin/objdirect-server --rounds 2

Writes --objects objects of 4-300 KiB (uniform, fixed seed), then reads them all with
Client.get_many in batches of --batch into one fresh arena per batch, once per fabric per round
(rounds alternate the fabrics, and each --server-bin in turn gets a fresh server). Prints GETs/s,
the client's CPU per GET (time.process_time: every thread) and the server's (utime + stime from
/proc/PID/stat). RDMA fabrics are used with rdma="required", HTTP ("none") with rdma="off".
"""

import argparse
import os
import random
import shutil
import sys
import tempfile
import time

from bench_server import ACCESS, SECRET, start_server  # bench/bench_server.py

import objdirect


def server_cpu_s(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(binary, args, sizes, rnd):
    data = tempfile.mkdtemp(prefix="objdirect-get-cost-")
    proc, endpoint = start_server(os.path.dirname(binary), data)
    try:
        common = dict(endpoint=endpoint, access_key=ACCESS, secret_key=SECRET)
        writer = objdirect.Client(fabric="none", **common)
        writer.create_bucket("get-cost")
        blob = os.urandom(max(sizes))
        for i, n in enumerate(sizes):
            writer.put("get-cost", f"d/{i:06d}", memoryview(blob)[:n])
        for fabric in args.fabrics.split(","):
            c = objdirect.Client(fabric=fabric, rdma="off" if fabric == "none" else "required",
                                 **common)
            wall, cpu, srv = time.monotonic(), time.process_time(), server_cpu_s(proc.pid)
            for j in range(0, len(sizes), args.batch):
                idx = range(j, min(len(sizes), j + args.batch))
                arena = memoryview(bytearray(sum(sizes[k] for k in idx)))
                reqs, off = [], 0
                for k in idx:
                    reqs.append(("get-cost", f"d/{k:06d}", arena[off:off + sizes[k]]))
                    off += sizes[k]
                for (_, key, buf), r in zip(reqs, c.get_many(reqs)):
                    want = "http" if fabric == "none" else "rdma"
                    assert r.nbytes == len(buf) and r.path == want, (key, r)
            wall = time.monotonic() - wall
            cpu = time.process_time() - cpu
            srv = server_cpu_s(proc.pid) - srv
            n = len(sizes)
            print(f"round {rnd} {binary}  {fabric:14s} {n / wall:7.0f} GET/s  client {cpu / n * 1e6:5.0f} us/GET  "
                  f"server {srv / n * 1e6:5.0f} us/GET", flush=True)
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(data, ignore_errors=True)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server-bin", action="append",
                    help="objdirect-server binary (repeatable: alternated each round)")
    ap.add_argument("--objects", type=int, default=3000)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--fabrics", default="none,libfabric:shm")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    bins = args.server_bin or [os.path.join(here, "..", "build", "bin", "objdirect-server")]
    rng = random.Random(0)
    sizes = [rng.randint(4 << 10, 300 << 10) for _ in range(args.objects)]
    for rnd in range(args.rounds):
        for b in bins:
            measure(os.path.abspath(b), args, sizes, rnd)


if __name__ == "__main__":
    sys.exit(main())
