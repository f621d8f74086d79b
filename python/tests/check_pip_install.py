"""Proves `pip install ./python` works offline: for each interpreter given, installs the package
with pip (no index, default build isolation, the in-tree PEP 517 backend) into a fresh --target
directory, then runs a round trip against the real objdirect-server with only that directory on
the path. Exit status 0 when every interpreter passed.

    check_pip_install.py --bin-dir <build>/bin --build-prefix <build>-pip- --tmp DIR PYTHON...

Each interpreter builds in <build-prefix><tag>, the tag a hash of its path (kept: later runs only
relink). Beside <build> and as deep below the tree, it gets the Release build's objects from
ccache, whose base_dir is the tree (CMakeLists.txt).
"""

import argparse
import hashlib
import os
import pathlib
import shutil
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
PY_DIR = HERE.parent

SMOKE = r"""
import os, re, select, subprocess, sys, time
import objdirect
target = os.environ["CHECK_TARGET"]
assert objdirect.__file__.startswith(target), (objdirect.__file__, target)
ext = [f for f in os.listdir(os.path.dirname(objdirect.__file__)) if f.startswith("_objdirect")]
assert ext, "no extension installed"
srv = subprocess.Popen([os.environ["CHECK_SERVER"], "--listen", "127.0.0.1:0", "--data",
                        os.environ["CHECK_DATA"], "--access-key", "ak", "--secret-key", "sk",
                        "--no-fsync", "--fabric", "none"],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
try:
    line, deadline = b"", time.monotonic() + 30
    while not line.endswith(b"\n") and time.monotonic() < deadline:
        if select.select([srv.stdout], [], [], 0.2)[0]:
            line += os.read(srv.stdout.fileno(), 1)
    endpoint = re.search(r"http://127\.0\.0\.1:\d+", line.decode()).group(0)
    with objdirect.Client(endpoint=endpoint, access_key="ak", secret_key="sk", fabric="none") as c:
        c.create_bucket("pip")
        data = bytes(range(256)) * 1000
        assert c.put("pip", "k", data).nbytes == len(data)
        buf = bytearray(len(data))
        nbytes, path = c.get_into("pip", "k", buf)
        assert (nbytes, path, bytes(buf)) == (len(data), "http", data)
        try:
            c.get("pip", "missing")
            raise AssertionError("no exception")
        except objdirect.NoSuchKey:
            pass
    print(f"smoke ok: {sys.executable} {sys.version.split()[0]} objdirect {objdirect.__version__}")
finally:
    srv.terminate()
    srv.wait(15)
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--build-prefix", required=True)
    ap.add_argument("--tmp", required=True)
    ap.add_argument("pythons", nargs="+")
    args = ap.parse_args()
    server = os.path.join(args.bin_dir, "objdirect-server")
    assert os.access(server, os.X_OK), f"{server} missing (build objdirect-server)"
    failures = []
    for py in args.pythons:
        tag = hashlib.sha256(os.path.realpath(py).encode()).hexdigest()[:8]
        build_dir = pathlib.Path(args.build_prefix + tag)
        work = pathlib.Path(args.tmp) / tag
        shutil.rmtree(work, ignore_errors=True)
        target = work / "site"
        work.mkdir(parents=True)
        env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
        env.pop("PYTHONPATH", None)
        cmd = [py, "-m", "pip", "install", "--no-index", "--no-deps", "--target", str(target),
               "--config-settings", f"build-dir={build_dir}", str(PY_DIR)]
        print("+", " ".join(cmd), flush=True)
        t0 = time.monotonic()
        r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        print(f"pip install: rc={r.returncode} in {time.monotonic() - t0:.1f} s", flush=True)
        if r.returncode != 0:
            print(r.stdout[-6000:])
            failures.append(f"{py}: pip install failed")
            continue
        env.update(PYTHONPATH=str(target), CHECK_TARGET=str(target), CHECK_SERVER=server,
                   CHECK_DATA=str(work / "data"))
        r = subprocess.run([py, "-c", SMOKE], env=env, cwd=str(work), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=120)
        print(r.stdout, flush=True)
        if r.returncode != 0:
            failures.append(f"{py}: the installed package failed its round trip")
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        return 1
    print(f"pip install ok for {len(args.pythons)} interpreter(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
