#!/usr/bin/env python3
# Drives an objdirect-server that runs under valgrind's callgrind: for each operation (HTTP PUT,
# HTTP GET, RDMA GET over libfabric tcp of one SIZE_MIB object) it zeroes the counters, runs the
# operation once and dumps them (callgrind.out.<pid>.<n>, "Trigger: dump <name>"), so each file
# holds the server's instructions for exactly one request. docs/BENCHMARKS.md shows how to run it.
# usage: callgrind-phases.py ENDPOINT SERVER_PID PYTHONPATH_OF_OBJDIRECT SIZE_MIB
import os, subprocess, sys, time
sys.path.insert(0, sys.argv[3])
import objdirect
ep, pid, size = sys.argv[1], sys.argv[2], int(sys.argv[4]) << 20
def ctl(*a):
    subprocess.run(["callgrind_control", *a, pid], check=True, stdout=subprocess.DEVNULL)
http = objdirect.Client(endpoint=ep, fabric="none", access_key="ak", secret_key="sk")
tcp = objdirect.Client(endpoint=ep, fabric="libfabric:tcp", access_key="ak", secret_key="sk")
http._native.create_bucket("bkt")
data = bytearray(os.urandom(1 << 20)) * (size >> 20)
buf = bytearray(size)
http.put("bkt", "warm", data[: 1 << 20]); http.get_into("bkt", "warm", buf); tcp.get_into("bkt", "warm", buf)
for name, fn in [("http-put", lambda: http.put("bkt", "obj", data)),
                 ("http-get", lambda: http.get_into("bkt", "obj", buf)),
                 ("rdma-get-lf-tcp", lambda: tcp.get_into("bkt", "obj", buf))]:
    ctl("-z")
    t = time.monotonic(); r = fn(); dt = time.monotonic() - t
    ctl("--dump=" + name)
    print(name, r, f"{dt:.1f} s under callgrind", flush=True)
