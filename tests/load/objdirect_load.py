#!/usr/bin/env python3
"""Load generator: N concurrent clients against the real objdirect-server on loopback, for a bounded
time, mixing PUT, multipart PUT, GET, LIST and DELETE over both the HTTP and the RDMA data paths,
with every GET and every LIST verified against what was written.

Clients: --clients threads spread over --processes worker processes (separate OS processes, each
importing the objdirect Python package = libobjdirect). Each process holds two libobjdirect
Clients shared by its threads (the library is thread-safe and pools connections, with
connections_max = threads): one with fabric "none" (plain HTTP) and one with --rdma-fabric.
Each op picks one of the two at random, so both paths carry every operation kind; the path the
library actually took ("rdma", "http", "http-fallback") is counted.

Verification: client i owns the keys "c<i>/k<j>" (no other client writes them), and remembers the
sha256 and size of what it last wrote to each, or that it deleted it. A GET must return exactly
those bytes (a deleted key must be NoSuchKey); a LIST of "c<i>/" must name exactly the keys the
client believes exist, with their sizes. Anything else is a corruption. Any exception is an error.

Report (stdout, and --json FILE): ops by kind, errors, corruptions, p50/p99/max latency (overall
and per kind), bytes moved, paths taken, and the server's peak RSS (VmHWM from /proc, sampled RSS).
Exit status 1 if errors or corruptions are non-zero or no op completed.

Usage:
  tests/load/objdirect_load.py --bin-dir build/bin --clients 256 --duration 60          (quick)
  tests/load/objdirect_load.py --bin-dir build/bin --clients 256 --duration 600         (full)
  needs PYTHONPATH=<build>/python (the objdirect package built by target objdirect_python).
"""

import argparse
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))

KIB, MIB = 1 << 10, 1 << 20
BUCKET = "load"
KEYS_PER_CLIENT = 6
PART_BYTES = 5 * MIB
# op mix (weights); multipart objects are PART_BYTES + up to 1 MiB, so they go as 2 parts
MIX = {"get": 40, "put": 25, "multipart": 2, "list": 15, "delete": 8, "head": 10}


def payload(rnd, cid, seq, size):
    """size bytes that name their writer and version in the first 24 bytes."""
    head = f"c{cid:05d}s{seq:010d}v".encode()[:24].ljust(24, b"-")
    body = rnd.randbytes(max(0, size - len(head)))
    return (head + body)[:size]


def child_main(a):
    import objdirect

    common = dict(endpoint=a.endpoint, access_key=a.access_key, secret_key=a.secret_key,
                  part_size_bytes=PART_BYTES, connections_max=max(4, a.threads), concurrency=2,
                  io_timeout_s=120)
    clients = {"http": objdirect.Client(fabric="none", **common),
               "rdma": objdirect.Client(fabric=a.rdma_fabric, **common)}
    deadline = time.monotonic() + a.duration
    lock = threading.Lock()
    res = {"ops": {}, "lat": {}, "errors": 0, "error_samples": [], "corruptions": 0, "corruption_samples": [],
           "paths": {}, "bytes": 0}

    def record(kind, t, path=None, nbytes=0):
        with lock:
            res["ops"][kind] = res["ops"].get(kind, 0) + 1
            res["lat"].setdefault(kind, []).append(t)
            res["bytes"] += nbytes
            if path:
                res["paths"][path] = res["paths"].get(path, 0) + 1

    def error(msg):
        with lock:
            res["errors"] += 1
            if len(res["error_samples"]) < 10:
                res["error_samples"].append(msg[:400])

    def corrupt(msg):
        with lock:
            res["corruptions"] += 1
            if len(res["corruption_samples"]) < 10:
                res["corruption_samples"].append(msg[:400])

    def run(cid):
        rnd = random.Random(a.seed * 100003 + cid)
        keys = [f"c{cid}/k{j}" for j in range(KEYS_PER_CLIENT)]
        state = {}  # key -> (sha256, size); absent = not stored
        seq = 0
        kinds, weights = list(MIX), list(MIX.values())
        while time.monotonic() < deadline:
            kind = rnd.choices(kinds, weights)[0]
            via = rnd.choice(["http", "rdma"])
            c = clients[via]
            key = rnd.choice(keys)
            t0 = time.monotonic()
            try:
                if kind in ("put", "multipart"):
                    seq += 1
                    size = (rnd.choice([0, 1, 700, 4 * KIB, 64 * KIB, 256 * KIB, MIB]) if kind == "put"
                            else PART_BYTES + rnd.randrange(1, MIB))
                    data = payload(rnd, cid, seq, size)
                    r = c.put(BUCKET, key, data)
                    if r.nbytes != size:
                        raise RuntimeError(f"put {key}: {r.nbytes} bytes of {size}")
                    state[key] = (hashlib.sha256(data).hexdigest(), size)
                    record(kind, time.monotonic() - t0, r.path, size)
                elif kind == "get":
                    if key in state:
                        want_sha, size = state[key]
                        buf = bytearray(size + 1)  # one spare byte: a longer object shows
                        r = c.get_into(BUCKET, key, buf)
                        got = hashlib.sha256(memoryview(buf)[:r.nbytes]).hexdigest()
                        if r.nbytes != size or got != want_sha:
                            corrupt(f"GET {key} via {r.path}: {r.nbytes} bytes sha {got}, want {size} sha {want_sha}")
                        record(kind, time.monotonic() - t0, r.path, r.nbytes)
                    else:
                        try:
                            c.get(BUCKET, key)
                            corrupt(f"GET {key}: a deleted key returned data")
                        except objdirect.NoSuchKey:
                            pass
                        record(kind, time.monotonic() - t0)
                elif kind == "head":
                    try:
                        info = c.head(BUCKET, key)
                        if key not in state or info.size != state[key][1]:
                            corrupt(f"HEAD {key}: size {info.size}, want {state.get(key)}")
                    except objdirect.NoSuchKey:
                        if key in state:
                            corrupt(f"HEAD {key}: NoSuchKey for a stored key")
                    record(kind, time.monotonic() - t0)
                elif kind == "list":
                    got = {o.key: o.size for o in c.list(BUCKET, prefix=f"c{cid}/")}
                    want = {k: v[1] for k, v in state.items()}
                    if got != want:
                        corrupt(f"LIST c{cid}/: {sorted(got.items())} want {sorted(want.items())}")
                    record(kind, time.monotonic() - t0)
                else:
                    c.delete(BUCKET, key)
                    state.pop(key, None)
                    record(kind, time.monotonic() - t0)
            except Exception as e:  # noqa: BLE001 - every failure is counted and sampled
                error(f"{kind} {key} via {via}: {type(e).__name__}: {e}")
                # the outcome of a failed write is unknown: re-read it so later checks stay exact
                if kind in ("put", "multipart", "delete"):
                    try:
                        d = clients["http"].get(BUCKET, key)
                        state[key] = (hashlib.sha256(d).hexdigest(), len(d))
                    except objdirect.NoSuchKey:
                        state.pop(key, None)
                    except Exception:  # noqa: BLE001
                        pass

    threads = [threading.Thread(target=run, args=(cid,)) for cid in range(a.first_client, a.first_client + a.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for c in clients.values():
        c.close()
    json.dump(res, sys.stdout)
    return 0


def rss_kib(pid):
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    out[line.split(":")[0]] = int(line.split()[1])
    except OSError:
        pass
    return out


def pct(values, p):
    if not values:
        return 0.0
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", type=int, default=256)
    ap.add_argument("--processes", type=int, default=8)
    ap.add_argument("--duration", type=float, default=60, help="seconds of load (quick 60, full 600)")
    ap.add_argument("--bin-dir", help="directory with objdirect-server (started here on 127.0.0.1:0)")
    ap.add_argument("--rdma-fabric", default="libfabric:tcp")
    ap.add_argument("--server-fabric", default="libfabric:tcp,libfabric:shm")
    ap.add_argument("--server-arg", action="append", default=[], help="extra objdirect-server argument")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--json", help="write the report here too")
    # child mode
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--endpoint", help=argparse.SUPPRESS)
    ap.add_argument("--access-key", help=argparse.SUPPRESS)
    ap.add_argument("--secret-key", help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--first-client", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.seed is None:
        a.seed = int.from_bytes(os.urandom(4), "little")
    if a.child:
        return child_main(a)

    assert a.bin_dir, "--bin-dir is required"
    os.environ["OBJDIRECT_BIN_DIR"] = os.path.abspath(a.bin_dir)
    os.environ.setdefault("FI_TCP_IFACE", "lo")
    import objd

    work = tempfile.mkdtemp(prefix="objdirect-load.")
    srv = objd.Server(os.path.join(work, "data"), os.path.join(work, "server.log"),
                      extra_args=["--fabric", a.server_fabric] + a.server_arg).start()
    ok = False
    try:
        assert objd.request(srv, "PUT", f"/{BUCKET}").status == 200
        per = [a.clients // a.processes + (1 if i < a.clients % a.processes else 0) for i in range(a.processes)]
        procs = []
        first = 0
        t0 = time.monotonic()
        for n in per:
            if n == 0:
                continue
            cmd = [sys.executable, os.path.abspath(__file__), "--child", "--endpoint", srv.endpoint,
                   "--access-key", objd.ACCESS_KEY, "--secret-key", objd.SECRET_KEY, "--threads", str(n),
                   "--first-client", str(first), "--duration", str(a.duration), "--rdma-fabric", a.rdma_fabric,
                   "--seed", str(a.seed)]
            procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=open(os.path.join(work, "clients.err"), "ab")))
            first += n
        peak_rss = 0
        results = [None] * len(procs)

        def collect(i, p):
            results[i] = p.communicate()[0]
        collectors = [threading.Thread(target=collect, args=(i, p)) for i, p in enumerate(procs)]
        for c in collectors:
            c.start()
        while any(c.is_alive() for c in collectors):
            peak_rss = max(peak_rss, rss_kib(srv.proc.pid).get("VmRSS", 0))
            time.sleep(0.25)
        elapsed = time.monotonic() - t0
        hwm = rss_kib(srv.proc.pid).get("VmHWM", 0)
        tot = {"ops": {}, "lat": {}, "errors": 0, "error_samples": [], "corruptions": 0, "corruption_samples": [],
               "paths": {}, "bytes": 0}
        for p, out in zip(procs, results):
            if p.returncode != 0 or not out:
                tot["errors"] += 1
                tot["error_samples"].append(f"client process exited {p.returncode}")
                continue
            r = json.loads(out)
            for k in ("errors", "corruptions", "bytes"):
                tot[k] += r[k]
            tot["error_samples"] += r["error_samples"]
            tot["corruption_samples"] += r["corruption_samples"]
            for k, v in r["ops"].items():
                tot["ops"][k] = tot["ops"].get(k, 0) + v
            for k, v in r["paths"].items():
                tot["paths"][k] = tot["paths"].get(k, 0) + v
            for k, v in r["lat"].items():
                tot["lat"].setdefault(k, []).extend(v)
        all_lat = [x for v in tot["lat"].values() for x in v]
        n_ops = sum(tot["ops"].values())
        report = {
            "clients": a.clients, "processes": len(procs), "duration_s": a.duration, "elapsed_s": round(elapsed, 1),
            "rdma_fabric": a.rdma_fabric, "ops": n_ops, "ops_per_s": round(n_ops / elapsed, 1), "ops_by_kind": tot["ops"],
            "paths": tot["paths"], "bytes": tot["bytes"], "errors": tot["errors"], "corruptions": tot["corruptions"],
            "p50_ms": round(pct(all_lat, 50) * 1000, 2), "p99_ms": round(pct(all_lat, 99) * 1000, 2),
            "max_ms": round(max(all_lat, default=0) * 1000, 2),
            "p99_ms_by_kind": {k: round(pct(v, 99) * 1000, 2) for k, v in sorted(tot["lat"].items())},
            "server_peak_rss_mib": round(max(hwm, peak_rss) / 1024, 1),
            "server_alive": srv.alive(),
            "error_samples": tot["error_samples"][:10], "corruption_samples": tot["corruption_samples"][:10],
        }
        text = json.dumps(report, indent=1)
        print(text)
        if a.json:
            with open(a.json, "w") as f:
                f.write(text)
        print(f"clients={a.clients} ops={n_ops} errors={tot['errors']} corruptions={tot['corruptions']} "
              f"p99_ms={report['p99_ms']} peak_rss_mib={report['server_peak_rss_mib']}")
        ok = n_ops > 0 and tot["errors"] == 0 and tot["corruptions"] == 0 and srv.alive()
    finally:
        alive = srv.alive()
        rc = srv.stop()
        if not alive or rc != 0:
            print(f"server died or exited {rc}; log:\n{srv.log_tail()}")
            ok = False
        if ok:
            subprocess.run(["rm", "-rf", work])
        else:
            print(f"work dir kept: {work}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
