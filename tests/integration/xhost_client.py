"""Client side of the cross-host tests (test_cross_host.py), run inside a test-bed host with the
objdirect Python package: PUTs and GETs every size over one client configuration and prints one
JSON line per transfer:

    {"op": "put"|"get", "size": N, "path": "rdma"|..., "fabric": ..., "reason": ..., "s": secs,
     "ok": bytes equal}

then one {"stats": Client.stats()} line. The fabric is opened before the first timed transfer.

    python3 xhost_client.py ENDPOINT BUCKET FABRIC SIZES [--order ORDER] [--memory-ms N] [--repeat N]

Credentials come from objd (ACCESS_KEY/SECRET_KEY). FABRIC "auto" or a fabric name; SIZES a comma
list of byte counts. Every GET lands in a fresh buffer, compared with what was PUT.
"""

import argparse
import json
import os
import sys
import time

import numpy as np

import objd
import objdirect


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("endpoint")
    ap.add_argument("bucket")
    ap.add_argument("fabric")
    ap.add_argument("sizes")
    ap.add_argument("--order", default=None)
    ap.add_argument("--memory-ms", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--create-bucket", action="store_true")
    a = ap.parse_args()
    c = objdirect.Client(endpoint=a.endpoint, fabric=a.fabric, access_key=objd.ACCESS_KEY,
                         secret_key=objd.SECRET_KEY, region=objd.REGION, fabric_order=a.order,
                         fabric_failure_memory_ms=a.memory_ms)
    if a.create_bucket:
        c.create_bucket(a.bucket)
    # Open the fabric (and the HTTP connection) before timing anything: a GET of a missing key
    # makes a token, and the server answers 404 before any RDMA.
    try:
        c.get_into(a.bucket, "xhost-missing-key", np.zeros(4096, dtype=np.uint8))
        raise AssertionError("xhost-missing-key exists")
    except objdirect.NoSuchKey:
        pass
    rng = np.random.default_rng(os.getpid())
    for size in (int(s) for s in a.sizes.split(",")):
        src = rng.integers(0, 255, size=size, dtype=np.uint8)
        for rep in range(a.repeat):
            key = f"{a.fabric}-{size}-{rep}"
            t = time.monotonic()
            r = c.put(a.bucket, key, src)
            line = dict(op="put", size=size, path=r.path, fabric=r.fabric, reason=r.reason,
                        s=round(time.monotonic() - t, 4), ok=r.nbytes == size)
            print(json.dumps(line), flush=True)
            dst = np.zeros(size, dtype=np.uint8)
            t = time.monotonic()
            r = c.get_into(a.bucket, key, dst)
            line = dict(op="get", size=size, path=r.path, fabric=r.fabric, reason=r.reason,
                        s=round(time.monotonic() - t, 4),
                        ok=bool(r.nbytes == size and np.array_equal(src, dst)))
            print(json.dumps(line), flush=True)
    print(json.dumps({"stats": c.stats()}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
