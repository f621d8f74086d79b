#!/usr/bin/env python3
"""Reproduces the libfabric 1.17 shm hang after a SIGKILLed client (docs/RELIABILITY.md section 6)
and captures its evidence. Not a test: it may leave the server spinning until it kills it.

A --fabric libfabric:tcp,libfabric:shm,ucx server (test_retired_buffers.start_server) serves
`objdirect cp --fabric libfabric:shm` of a 256 MiB object, killed mid-GET / mid-PUT in turn (up to
30 times). When RDMA transfers stay active 6 s after a kill, it writes every thread's stack and
the rdi register of each (gdb) to /tmp/shm-hang-gdb.txt and the server's /proc/PID/maps to
/tmp/shm-hang-maps.txt: the spinning thread's rdi lies in the killed client's
/dev/shm/objdirect-<pid>-* region. Since the transport's watchdog releases a dead peer's lock
(objdirect_rdma_shm_dead_peer_lock_releases_total, printed after each kill), no kill should stick.

Usage: cd tests/integration && OBJDIRECT_BIN_DIR=../../build/bin python3 shm_hang_repro.py
"""
import os
import pathlib
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_retired_buffers as T
root = pathlib.Path(tempfile.mkdtemp(prefix="relhang"))
srv, src = T.start_server(root)
exe, env = T.cli(srv)
fab = "libfabric:shm"
for k in range(30):
    args = [exe, "cp", "--fabric", fab, "s3://ret/big", str(root / "o")] if k % 2 == 0 else \
           [exe, "cp", "--fabric", fab, src, f"s3://ret/v{k}"]
    seen = T.kill_mid_transfer(srv, args, env)
    t0 = time.monotonic(); idle = False
    while time.monotonic() - t0 < 6:
        m = T.metrics(srv)
        if m["objdirect_rdma_transfers_active"] == 0: idle = True; break
        time.sleep(0.1)
    print(k, "idle" if idle else "STUCK", m["objdirect_rdma_transfers_active"],
          "lock releases", m.get("objdirect_rdma_shm_dead_peer_lock_releases_total"), flush=True)
    if not idle:
        pid = srv.proc.pid
        print("server pid", pid, flush=True)
        subprocess.run(["gdb", "-p", str(pid), "-batch", "-ex", "set pagination off",
                        "-ex", "thread apply all bt 12", "-ex", "thread apply all info registers rdi"],
                       stdout=open("/tmp/shm-hang-gdb.txt", "w"), stderr=subprocess.STDOUT, timeout=120)
        open("/tmp/shm-hang-maps.txt", "w").write(open(f"/proc/{pid}/maps").read())
        break
srv.proc.kill(); srv.proc.wait()
