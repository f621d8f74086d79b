"""The data plane across hosts (docs/client.md, "Choosing a fabric"; docs/architecture.md):
three hosts made from network namespaces (netns.py), the real server in one, clients in the
others, default flags on both sides unless a test says otherwise.

- every fabric the hosts share carries PUT and GET, 4 KiB to 256 MiB, byte-exact, with auto and
  with each fabric named (libfabric tcp, UCX; auto here takes libfabric shm: the namespaces share
  one kernel, as the server's x-amz-rdma-host-id tells the client);
- a server on 0.0.0.0 serves libfabric tcp on every interface;
- a client whose fabric cannot reach the server falls back within a second, and its next
  requests skip that fabric (named: HTTP; auto: the next fabric), over libfabric tcp and UCX;
- the CLI, and the gateway with its upstream on the third host.
Sizes: OBJDIRECT_XHOST_SIZES (comma list of bytes) overrides the sweep.
"""

import json
import os
import re
import subprocess
import sys
import types

import pytest

import netns
import objd

HERE = os.path.dirname(os.path.abspath(__file__))
MiB = 1 << 20
# These tests are about which fabric carries a transfer, at every size: the client's size
# crossover (small transfers over plain HTTP under fabric auto; docs/client.md, "The fastest
# path") and auto's measured choice above it are switched off for every client process they
# start.
os.environ["OBJDIRECT_RDMA_MIN_BYTES"] = "0"
os.environ["OBJDIRECT_RDMA_LEARN"] = "0"
SIZES = [int(s) for s in os.environ.get("OBJDIRECT_XHOST_SIZES", "").split(",") if s] or \
    [4096, MiB + 3, 32 * MiB, 256 * MiB]
FAST_S = 1.0  # "well under a second" for a fallback, generous for a loaded 2-core host


def python_path():
    bin_dir = os.environ.get("OBJDIRECT_BIN_DIR", "")
    pkg = os.path.join(os.path.dirname(bin_dir), "python")
    assert os.path.isdir(os.path.join(pkg, "objdirect")), \
        f"{pkg}/objdirect missing: build the objdirect_python target"
    return pkg


@pytest.fixture(scope="module")
def bed():
    tb = netns.Testbed(3, tag="xh")
    with tb:
        tb.link(1, 2, "10.202.0")  # a private link: h0 has no route to it
        yield tb


@pytest.fixture(scope="module")
def server(bed, tmp_path_factory):
    d = tmp_path_factory.mktemp("xhost")
    srv = bed[0].server(d / "data", d / "server.log", ["--no-fsync", "--metrics-allow", "*"])
    yield srv
    assert srv.alive(), f"server died; log:\n{srv.log_tail()}"


def run_client(host, srv, fabric, sizes, bucket, env=None, order=None, memory_ms=None, create=False,
               timeout=600):
    e = {"PYTHONPATH": HERE + os.pathsep + python_path()}
    e.update(env or {})
    argv = [sys.executable, os.path.join(HERE, "xhost_client.py"), srv.endpoint, bucket, fabric,
            ",".join(map(str, sizes))]
    if order is not None:
        argv += ["--order", order]
    if memory_ms is not None:
        argv += ["--memory-ms", str(memory_ms)]
    if create:
        argv.append("--create-bucket")
    p = host.run(argv, env=e, timeout=timeout, universal_newlines=True)
    assert p.returncode == 0, f"client in {host.ns} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}"
    lines = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    stats = lines[-1]["stats"]
    return lines[:-1], stats


def metric(srv, host, name):
    code = ("import http.client\n"
            "c = http.client.HTTPConnection(H, P, timeout=10); c.request('GET', '/metrics')\n"
            "print(c.getresponse().read().decode())\n")
    out = host.python(code, H=srv.connect_host, P=srv.port).stdout
    m = re.search(r"^" + re.escape(name) + r"(?:\{[^}]*\})? (\d+)", out, re.M)
    return int(m.group(1)) if m else None


def assert_failed_fast_then_skipped(lines, stats, fabric):
    """A PUT then a GET against a server that `fabric` cannot reach: the PUT fell back to HTTP
    within FAST_S saying the peer is unreachable, the GET went straight to HTTP because that
    fabric failed against this server, and the client counted one failure of it."""
    put, get = lines
    assert put["ok"] and get["ok"], lines
    assert put["path"] == "http-fallback" and put["s"] < FAST_S, put
    assert "unreachable" in put["reason"], put
    assert get["path"] == "http" and "failed against this server" in get["reason"], get
    assert stats["fabric_failures"] == {fabric: 1}, stats


def make_bucket(srv, host, name):
    out = host.python("import objd; print(objd.request(H, 'PUT', '/' + B).status)", H=srv.host, B=name)
    assert out.stdout.strip() == "200", out


@pytest.mark.parametrize("fabric,expect", [
    ("libfabric:tcp", "libfabric:tcp"),
    ("ucx", "ucx"),
    ("auto", "libfabric:shm"),  # one kernel: shm is proposed across the namespaces
])
def test_every_fabric_across_hosts(bed, server, fabric, expect):
    bucket = f"x-{fabric.replace(':', '-')}"
    make_bucket(server, bed[1], bucket)
    lines, stats = run_client(bed[1], server, fabric, SIZES, bucket)
    assert len(lines) == 2 * len(SIZES)
    for l in lines:
        assert l["ok"], json.dumps(l)
        assert l["path"] == "rdma" and l["fabric"] == expect, json.dumps(l)
    assert stats["fabric_failures"] == {}, stats


def test_auto_without_shm_takes_tcp_then_ucx(bed, server):
    """auto's order is overridable; without shm the software fabrics follow the default order
    (libfabric tcp before UCX over tcp on a host without RDMA devices)."""
    make_bucket(server, bed[2], "x-order")
    lines, _ = run_client(bed[2], server, "auto", [MiB], "x-order", order="libfabric:tcp,ucx")
    assert {(l["path"], l["fabric"]) for l in lines} == {("rdma", "libfabric:tcp")}, lines
    lines, _ = run_client(bed[2], server, "auto", [MiB], "x-order", order="ucx,libfabric:tcp")
    assert {(l["path"], l["fabric"]) for l in lines} == {("rdma", "ucx")}, lines


def test_server_on_every_interface(bed, tmp_path):
    srv = bed[0].server(tmp_path / "data", tmp_path / "server.log",
                        ["--no-fsync", "--fabric", "libfabric:tcp"], listen_host="0.0.0.0")
    try:
        make_bucket(srv, bed[1], "x-any")
        lines, _ = run_client(bed[1], srv, "libfabric:tcp", [4096, 8 * MiB], "x-any")
        assert all(l["ok"] and l["path"] == "rdma" for l in lines), lines
        # the same server over loopback, from its own host
        local = types.SimpleNamespace(endpoint=f"http://127.0.0.1:{srv.port}")
        lines, _ = run_client(bed[0], local, "libfabric:tcp", [8 * MiB], "x-any")
        assert all(l["ok"] and l["path"] == "rdma" for l in lines), lines
    finally:
        assert srv.stop() == 0


@pytest.mark.parametrize("iface", ["lo", "p2"])
def test_unreachable_fabric_falls_back_fast_and_is_remembered(bed, tmp_path, iface):
    """The client pins libfabric tcp to an interface the server cannot reach (FI_TCP_IFACE, which
    wins over the HTTP connection's address): loopback (the server's connect is refused) or the
    private link to the third host (no route). The first transfer falls back within a second;
    the next ones skip libfabric tcp against that server."""
    srv = bed[0].server(tmp_path / "data", tmp_path / "server.log",
                        ["--no-fsync", "--metrics-allow", "*"])
    try:
        make_bucket(srv, bed[1], "x-unreach")
        env = {"FI_TCP_IFACE": iface}
        lines, stats = run_client(bed[1], srv, "libfabric:tcp", [MiB], "x-unreach", env=env)
        assert_failed_fast_then_skipped(lines, stats, "libfabric:tcp")
        assert stats["fabric_skips"].get("libfabric:tcp", 0) >= 1, stats
        assert metric(srv, bed[1], "objdirect_rdma_transfers_unreachable_total") == 1
        # auto moves on to the next fabric for the rest of the run
        lines, stats = run_client(bed[1], srv, "auto", [MiB, 2 * MiB], "x-unreach", env=env,
                                  order="libfabric:tcp,ucx")
        first, rest = lines[0], lines[1:]
        assert first["path"] == "http-fallback" and first["s"] < FAST_S, first
        assert all(l["path"] == "rdma" and l["fabric"] == "ucx" and l["ok"] for l in rest), rest
        assert metric(srv, bed[1], "objdirect_rdma_transfers_unreachable_total") == 2
        # without memory (0) every request tries again, and each still fails fast
        lines, stats = run_client(bed[1], srv, "libfabric:tcp", [MiB], "x-unreach", env=env,
                                  memory_ms=0)
        assert all(l["path"] == "http-fallback" and l["s"] < FAST_S for l in lines), json.dumps(lines)
        assert metric(srv, bed[1], "objdirect_rdma_transfers_unreachable_total") == 4
    finally:
        assert srv.stop() == 0


def test_unreachable_ucx_falls_back_fast_and_is_remembered(bed, tmp_path):
    """The same for UCX over tcp, pinned (UCX_NET_DEVICES) to the private link to the third host:
    the server's ucp_ep_create reports the peer unreachable at once. Without UCX_TLS=tcp the
    client's worker address also offers UCX's shared-memory transports, which UCX deems
    reachable between namespaces of one kernel but which never complete there: the client's
    published address names its network namespace, and the server refuses a peer it reaches only
    over shared memory from another namespace at once (src/transport/ucx/README.md), instead of
    the mailbox read waiting twice the op timeout (the server here keeps the default 30 s)."""
    srv = bed[0].server(tmp_path / "data", tmp_path / "server.log", ["--no-fsync", "--fabric", "ucx"])
    try:
        make_bucket(srv, bed[1], "x-unreach-ucx")
        env = {"UCX_NET_DEVICES": "p2", "UCX_TLS": "tcp"}
        lines, stats = run_client(bed[1], srv, "ucx", [MiB], "x-unreach-ucx", env=env)
        assert_failed_fast_then_skipped(lines, stats, "ucx")
        # Shared memory offered too: the client's address says it is in another network
        # namespace, so the server refuses it before posting anything (no probe wait); the
        # reason names the cause; the next request skips ucx.
        lines, stats = run_client(bed[1], srv, "ucx", [MiB], "x-unreach-ucx",
                                  env={"UCX_NET_DEVICES": "p2"})
        put, get = lines
        assert put["ok"] and put["path"] == "http-fallback", put
        assert "another network namespace" in put["reason"], put
        assert "does not cross" in put["reason"], put
        assert put["s"] < FAST_S, put  # the probe took 2 s; the op timeout alone 60 s and more
        assert get["path"] == "http" and stats["fabric_failures"] == {"ucx": 1}, (get, stats)
    finally:
        assert srv.stop() == 0


def test_cli_across_hosts(bed, server, tmp_path):
    cli = os.path.join(os.environ["OBJDIRECT_BIN_DIR"], "objdirect")
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(24 * MiB + 5))
    env = {"AWS_ENDPOINT_URL": server.endpoint, "AWS_ACCESS_KEY_ID": objd.ACCESS_KEY,
           "AWS_SECRET_ACCESS_KEY": objd.SECRET_KEY, "AWS_DEFAULT_REGION": objd.REGION}
    bed[2].run([cli, "mb", "s3://x-cli"], env=env, check=True)
    for fabric in ("auto", "libfabric:tcp", "ucx"):
        up = bed[2].run([cli, "cp", "--json", "--fabric", fabric, src, f"s3://x-cli/{fabric}"],
                        env=env, check=True, universal_newlines=True)
        dst = tmp_path / f"dst-{fabric.replace(':', '-')}.bin"
        down = bed[2].run([cli, "cp", "--json", "--fabric", fabric, f"s3://x-cli/{fabric}", dst],
                          env=env, check=True, universal_newlines=True)
        for out in (up.stdout, down.stdout):
            j = json.loads(out.strip().splitlines()[-1])
            assert j["path"] == "rdma", j
            assert j["fabric"] == ("libfabric:shm" if fabric == "auto" else fabric), j
        assert dst.read_bytes() == src.read_bytes()


def test_gateway_with_upstream_on_third_host(bed, tmp_path):
    up = bed[2].server(tmp_path / "up", tmp_path / "upstream.log", ["--fabric", "none", "--no-fsync"])
    creds = {"AWS_ACCESS_KEY_ID": objd.ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": objd.SECRET_KEY,
             "AWS_DEFAULT_REGION": objd.REGION}
    gw = bed[0].server(tmp_path / "gw", tmp_path / "gateway.log",
                       ["--backend", "s3", "--upstream", up.endpoint], env=creds)
    try:
        make_bucket(gw, bed[1], "x-gw")
        for fabric in ("libfabric:tcp", "ucx", "auto"):
            lines, _ = run_client(bed[1], gw, fabric, [4096, 16 * MiB], "x-gw")
            want = "libfabric:shm" if fabric == "auto" else fabric
            assert all(l["ok"] and l["path"] == "rdma" and l["fabric"] == want for l in lines), lines
        # the bytes are in the upstream, on the third host
        out = bed[1].python("import objd; r = objd.request(H, 'GET', '/x-gw/ucx-16777216-0');"
                            "print(r.status, len(r.body))", H=up.host)
        assert out.stdout.split() == ["200", str(16 * MiB)], out
    finally:
        assert gw.stop() == 0
        assert up.stop() == 0
