#!/usr/bin/env python3
"""objdirect.torch.load of one checkpoint over each path side by side (a benchmark, not a test):
fabric "none" (HTTP), a named fabric (RDMA at every size), "auto" with its measured choice
(rdma_learn, docs/client.md "The fastest path") and "auto" without it. One Client per path,
kept across passes, so auto's learning happens in its first pass; the passes alternate the
paths. Each line gives the pass's GB/s, the process CPU of the load, and the client's transfer
and auto_choices counters so far. Figures go to docs/BENCHMARKS.md.

    PYTHONPATH=build/python /usr/bin/python3 bench/checkpoint_paths.py --mib 1024 --passes 3

The server is build/bin/objdirect-server (--no-fsync, data in a temporary directory under
/dev/shm, and any --server-arg), started here.
"""

import argparse
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python", "tests"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mib", type=int, default=1024, help="checkpoint size (tensors of 64 MiB)")
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--fabric", default="libfabric:shm", help="the named fabric")
    ap.add_argument("--bin-dir", default=os.path.join(HERE, "..", "build", "bin"))
    ap.add_argument("--server-arg", action="append", default=[],
                    help="extra objdirect-server argument (repeatable), e.g. --server-arg=--tcp-congestion=cubic")
    args = ap.parse_args()
    os.environ.setdefault("OBJDIRECT_BIN_DIR", args.bin_dir)
    import torch
    import objdirect
    import objdirect.torch as odt
    from conftest import Server, ACCESS_KEY, SECRET_KEY

    data = tempfile.mkdtemp(prefix="od-ckpt-paths-", dir="/dev/shm")
    srv = Server(os.path.join(data, "data"), os.path.join(data, "server.log"),
                 ["--no-fsync"] + args.server_arg).start()
    try:
        kw = dict(endpoint=srv.endpoint, access_key=ACCESS_KEY, secret_key=SECRET_KEY)
        objdirect.Client(fabric="none", **kw).create_bucket("ckpt")
        state = {f"layer{i}": torch.randn(16 << 20) for i in range(max(1, args.mib // 64))}
        nbytes = sum(t.numel() * 4 for t in state.values())
        odt.save(state, "s3://ckpt/c.pt", client=objdirect.Client(fabric="none", **kw))
        paths = [("none", {}), (args.fabric, {}), ("auto", {}), ("auto", {"rdma_learn": False})]
        clients = [objdirect.Client(fabric=f, **kw, **extra) for f, extra in paths]
        for p in range(args.passes):
            for (f, extra), c in zip(paths, clients):
                name = f + (" rdma_learn=False" if extra else "")
                w, cpu = time.monotonic(), time.process_time()
                out = odt.load("s3://ckpt/c.pt", client=c)
                w, cpu = time.monotonic() - w, time.process_time() - cpu
                assert all(torch.equal(out[k], v) for k, v in state.items())
                del out
                s = c.stats()
                print(f"pass {p} {name:24s} {nbytes / w / 1e9:5.2f} GB/s "
                      f"{cpu / (nbytes / (1 << 30)):5.2f} CPU-s/GiB  transfers {s['transfers']} "
                      f"auto_choices {s['auto_choices']}", flush=True)
    finally:
        srv.stop()
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
