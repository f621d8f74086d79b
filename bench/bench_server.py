"""The objdirect-server the Python benchmarks (torch_bench.py, batch_bench.py) start: on a free
loopback port, its own data folder, no fsync; returns the process and its endpoint."""

import os
import re
import select
import subprocess
import time

ACCESS, SECRET = "benchaccesskey", "bench-secret-key"


def start_server(bin_dir, data_dir):
    proc = subprocess.Popen([os.path.join(bin_dir, "objdirect-server"), "--listen", "127.0.0.1:0",
                             "--data", data_dir, "--access-key", ACCESS, "--secret-key", SECRET,
                             "--no-fsync"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    line = b""
    deadline = time.monotonic() + 30
    while not line.endswith(b"\n") and time.monotonic() < deadline:
        if select.select([proc.stdout], [], [], 0.2)[0]:
            line += os.read(proc.stdout.fileno(), 1)
    m = re.match(rb"objdirect-server listening on (http://[0-9.:]+)", line)
    if not m:
        proc.kill()
        raise SystemExit(f"server did not start: {line!r}")
    return proc, m.group(1).decode()
