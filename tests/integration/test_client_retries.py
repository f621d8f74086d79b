"""The client's retries through a flaky path (docs/client.md, "Retries"): the Python client, the
C++ API (tests/client/retry_driver.cc) and the objdirect CLI, over HTTP and over RDMA, against the
real objdirect-server behind tests/integration/fault_proxy.py (503 SlowDown, 500 InternalError,
connections cut before the request and mid-body, truncated XML, 206 bodies shorter than their
Content-Range). Every operation must succeed,
every byte is compared, and the client's retry counters must match what the proxy injected.
A CompleteMultipartUpload whose answer is lost must neither fail nor make a second object.

The clients run with their defaults (max_attempts 3, standard mode); the proxy never faults one
request more than twice in a row (fault_proxy.consecutive_max), so a client with boto3's
standard retries always gets through and a single lost retry shows as a failure.

Run by ctest (integration_client_retries) with OBJDIRECT_BIN_DIR=<build>/bin and
PYTHONPATH=<build>/python.
"""

import hashlib
import os
import random
import subprocess

import numpy as np
import pytest

for _k in list(os.environ):
    if _k.startswith("AWS_") or (_k.startswith("OBJDIRECT_") and _k != "OBJDIRECT_BIN_DIR"):
        del os.environ[_k]
os.environ["AWS_SHARED_CREDENTIALS_FILE"] = "/nonexistent/objdirect-retries/credentials"
os.environ["AWS_CONFIG_FILE"] = "/nonexistent/objdirect-retries/config"
os.environ.setdefault("FI_TCP_IFACE", "lo")

import objdirect  # noqa: E402
from fault_proxy import FaultProxy  # noqa: E402
import objd  # noqa: E402
from objd import ACCESS_KEY, SECRET_KEY, Server  # noqa: E402

MIB = 1 << 20
BIN = os.environ.get("OBJDIRECT_BIN_DIR", "")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    d = tmp_path_factory.mktemp("retries")
    s = Server(str(d / "data"), str(d / "server.log"),
               ["--no-fsync", "--fabric", "libfabric:shm,libfabric:tcp"]).start()
    yield s
    s.stop()


@pytest.fixture
def proxy(server):
    p = FaultProxy("127.0.0.1", server.port, seed=random.SystemRandom().randrange(1 << 30))
    yield p
    p.close()


def client(endpoint, fabric, **kw):
    # rdma_min_bytes 0 and rdma_learn off: every size over RDMA (the crossover would send small
    # objects over HTTP, and auto's measurements would send more over HTTP through the slow
    # proxy), so that faults land on token requests of every size
    return objdirect.Client(endpoint=endpoint, fabric=fabric, access_key=ACCESS_KEY,
                            secret_key=SECRET_KEY, part_size_bytes=5 * MIB, rdma_min_bytes=0,
                            rdma_learn=False, **kw)


def make_bucket(server, name):
    c = client(server.endpoint, "none")
    c.create_bucket(name)
    c.close()


def expected_reasons(counts):
    """The client's retry_reasons each injected fault must show up as."""
    return {
        "SlowDown": counts["slowdown"],
        "InternalError": counts["internal"],
        "truncated_xml": counts["truncated_xml"],
        # a body cut before its Content-Length, or a well-framed 206 shorter than its
        # Content-Range
        "short_body": counts["cut_mid_body"] + counts["short_range"],
        # no answer at all: a reset connection, or one the client took for a stale keep-alive
        # connection and re-sent at once on a new one
        "connection": counts["cut_before"] + counts["lost_answer"],
    }


def observed_reasons(reasons):
    r = dict(reasons)
    conn = r.pop("connection_reset", 0) + r.pop("stale_connection", 0)
    out = {k: r.pop(k, 0) for k in ("SlowDown", "InternalError", "truncated_xml", "short_body")}
    out["connection"] = conn
    # a reply to HEAD has no body to carry the S3 code: only its status tells
    out["SlowDown"] += r.pop("http_503", 0)
    out["InternalError"] += r.pop("http_500", 0)
    assert not r, f"retries for reasons the proxy did not inject: {r}"
    return out


def payload(seed, n):
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)


def python_workload(c, bucket, prefix, objects):
    """PUT+GET round trips, ranged GETs, HEAD, multipart uploads read back whole and by range,
    listing and DeleteObjects. Returns the number of operations (each one asserted)."""
    ops = 0
    rng = random.Random(7)
    keys = []
    for i in range(objects):
        n = rng.randrange(0, 300 * 1024)
        data = payload(i, n)
        key = f"{prefix}/small-{i}"
        keys.append(key)
        c.put(bucket, key, data)
        buf = np.zeros(n, dtype=np.uint8)
        got, _ = c.get_into(bucket, key, buf)
        assert got == n and np.array_equal(buf, data), key
        ops += 2
        if i % 5 == 0 and n > 100:
            off, ln = n // 3, n // 3
            part = np.zeros(ln, dtype=np.uint8)
            got, _ = c.get_into(bucket, key, part, offset=off, length=ln)
            assert got == ln and np.array_equal(part, data[off:off + ln]), key
            assert c.head(bucket, key).size == n
            ops += 2
    for m in range(2):
        data = payload(1000 + m, 12 * MIB)
        key = f"{prefix}/multipart-{m}"
        keys.append(key)
        r = c.put(bucket, key, data)
        assert r.etag.endswith("-3"), r
        buf = np.zeros(12 * MIB, dtype=np.uint8)
        got, _ = c.get_into(bucket, key, buf)
        assert got == 12 * MIB and np.array_equal(buf, data)
        off, ln = 4 * MIB + 17, 7 * MIB
        part = np.zeros(ln, dtype=np.uint8)
        got, _ = c.get_into(bucket, key, part, offset=off, length=ln)
        assert got == ln and np.array_equal(part, data[off:off + ln])
        ops += 3
    listed = sorted(o.key for o in c.list(bucket, prefix=prefix + "/"))
    assert listed == sorted(keys)
    assert c.delete_objects(bucket, keys) == []
    assert list(c.list(bucket, prefix=prefix + "/")) == []
    return ops + 3


@pytest.mark.parametrize("fabric", ["none", "auto"])
def test_python_client_survives_the_flaky_path(server, proxy, fabric):
    bucket = f"py-{fabric}"
    make_bucket(server, bucket)
    c = client(proxy.endpoint, fabric)
    ops = python_workload(c, bucket, "p", 100)
    st = c.stats()
    counts = proxy.snapshot()
    c.close()
    injected = sum(counts.values())
    print(f"fabric={fabric}: {ops} operations, {proxy.requests} requests, injected {counts}, "
          f"client retry_reasons {st['retry_reasons']}, transfers {st['transfers']}")
    assert ops >= 240
    assert injected >= 20, counts  # the path really was flaky
    assert observed_reasons(st["retry_reasons"]) == expected_reasons(counts)
    if fabric == "auto":
        assert st["transfers"].get("rdma", 0) > 200, st["transfers"]
        # every fault on a token request revoked the buffer before the retry's fresh token
        assert st["rdma_revocations"] > 0


@pytest.mark.parametrize("fabric", ["none", "auto"])
def test_cxx_client_survives_the_flaky_path(server, proxy, fabric):
    bucket = f"cxx-{fabric.replace(':', '-')}"
    make_bucket(server, bucket)
    driver = os.path.join(os.path.dirname(BIN), "tests", "retry_driver")
    assert os.access(driver, os.X_OK), f"{driver} missing (target client_retry_driver)"
    env = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY,
               OBJDIRECT_RDMA_MIN_BYTES="0", OBJDIRECT_RDMA_LEARN="0")
    p = subprocess.run([driver, proxy.endpoint, bucket, "100", fabric], env=env,
                       capture_output=True, text=True, timeout=300)
    print(p.stdout, p.stderr)
    assert p.returncode == 0, p.stderr
    lines = [ln.split() for ln in p.stdout.splitlines()]
    vals = {ln[0]: int(ln[-1]) for ln in lines if ln[0] in ("ops", "failures")}
    reasons = {ln[1]: int(ln[2]) for ln in lines if ln[0] == "retry"}
    assert vals["failures"] == 0 and vals["ops"] >= 200
    counts = proxy.snapshot()
    assert sum(counts.values()) >= 20, counts
    assert observed_reasons(reasons) == expected_reasons(counts)
    if fabric == "auto":
        assert any(ln[:2] == ["transfers", "rdma"] and int(ln[2]) > 0 for ln in lines), p.stdout


@pytest.mark.parametrize("fabric", ["none", "auto"])
def test_cli_survives_the_flaky_path(server, proxy, tmp_path, fabric):
    bucket = f"cli-{fabric}"
    make_bucket(server, bucket)
    env = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY,
               AWS_ENDPOINT_URL=proxy.endpoint, OBJDIRECT_FABRIC=fabric,
               OBJDIRECT_RDMA_MIN_BYTES="0", OBJDIRECT_RDMA_LEARN="0")
    cli = os.path.join(BIN, "objdirect")
    src = tmp_path / "src"
    src.mkdir()
    sums = {}
    for i in range(40):
        data = payload(i, (i * 7919) % (200 * 1024))
        (src / f"f{i}").write_bytes(data.tobytes())
        sums[f"f{i}"] = hashlib.sha256(data.tobytes()).hexdigest()
    big = payload(99, 12 * MIB).tobytes()
    (src / "big").write_bytes(big)
    sums["big"] = hashlib.sha256(big).hexdigest()
    # One command per direction for the tree (each process pays a fabric start-up; the requests
    # and their faults are the same), and the big object on its own as a single-file copy.
    ops = 0
    for args in (["-r", str(src), f"s3://{bucket}/"], [str(src / "big"), f"s3://{bucket}/big1"]):
        p = subprocess.run([cli, "cp", "--part-size", "5MiB", "--quiet", *args], env=env,
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, f"cp up {args}: {p.stderr}"
        ops += 1
    dst = tmp_path / "dst"
    dst.mkdir()
    for args in (["-r", f"s3://{bucket}/", str(dst)], [f"s3://{bucket}/big1", str(tmp_path / "big1")]):
        p = subprocess.run([cli, "cp", "--part-size", "5MiB", "--quiet", *args], env=env,
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, f"cp down {args}: {p.stderr}"
        ops += 1
    for name in sums:
        assert hashlib.sha256((dst / name).read_bytes()).hexdigest() == sums[name], name
    assert hashlib.sha256((tmp_path / "big1").read_bytes()).hexdigest() == sums["big"]
    p = subprocess.run([cli, "ls", f"s3://{bucket}/"], env=env, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    assert all(name in p.stdout for name in sums)
    counts = proxy.snapshot()
    print(f"CLI fabric={fabric}: {ops + 1} commands, injected {counts}")
    assert sum(counts.values()) >= 10, counts


@pytest.mark.parametrize("fault", ["cut_mid_body", "truncated_xml", "lost_answer"])
@pytest.mark.parametrize("fabric", ["none", "auto"])
def test_lost_complete_answer_is_confirmed_not_repeated(server, proxy, fault, fabric):
    """The Complete reaches the server and completes the upload; its answer is cut, truncated or
    never sent. The client must report success with the object's ETag, and there must be one
    object and no upload left (no error, no second completion)."""
    bucket = f"complete-{fault.replace('_', '-')}-{fabric}"
    make_bucket(server, bucket)
    proxy.set_rates({})
    proxy.force("POST", "uploadId=", fault)
    c = client(proxy.endpoint, fabric)
    data = payload(5, 11 * MIB)
    r = c.put(bucket, "obj", data)
    st = c.stats()
    assert r.etag.endswith("-3"), r
    assert st["completes_confirmed"] == 1, st
    counts = proxy.snapshot()
    assert sum(counts.values()) == 1, counts
    info = c.head(bucket, "obj")
    assert info.etag == r.etag and info.size == 11 * MIB
    buf = np.zeros(11 * MIB, dtype=np.uint8)
    c.get_into(bucket, "obj", buf)
    assert np.array_equal(buf, data)
    assert [o.key for o in c.list(bucket)] == ["obj"]
    c.close()
    # no upload left behind, and one version of the object (ListObjectVersions)
    r = objd.request(server, "GET", f"/{bucket}", query={"uploads": ""})
    assert r.status == 200 and b"<Upload>" not in r.body, r.body
    r = objd.request(server, "GET", f"/{bucket}", query={"versions": ""})
    assert r.status == 200 and r.body.count(b"<Version>") == 1, r.body


@pytest.mark.parametrize("where", ["range-first", "range-part", "whole-part"])
def test_range_reply_cut_short_is_retried(server, proxy, where):
    """Regression (seen once under load in the Python HTTP case): a 206 whose body is shorter
    than its Content-Range (the proxy cuts it in half and fixes Content-Length, so the reply is
    well framed) was reported as "reply carried 16459 bytes for a range of 32919" instead of
    being retried. Now it is retried as short_body, on the first request of a ranged GET and on
    the parallel parts of a ranged or whole-object GET."""
    bucket = f"shortrange-{where}"
    make_bucket(server, bucket)
    proxy.set_rates({})
    c = client(proxy.endpoint, "none")
    data = payload(11, 12 * MIB)
    c.put(bucket, "obj", data)
    off, ln = 4 * MIB + 17, 7 * MIB
    first_range = f"bytes={off}-"
    cut = {"range-first": first_range, "range-part": f"bytes={off + 5 * MIB}-",
           "whole-part": f"bytes={5 * MIB}-"}[where]
    proxy.force("GET", f"/{bucket}/obj", "short_range", range_part=cut)
    if where == "whole-part":
        buf = np.zeros(12 * MIB, dtype=np.uint8)
        got, _ = c.get_into(bucket, "obj", buf)
        assert got == 12 * MIB and np.array_equal(buf, data)
    else:
        part = np.zeros(ln, dtype=np.uint8)
        got, _ = c.get_into(bucket, "obj", part, offset=off, length=ln)
        assert got == ln and np.array_equal(part, data[off:off + ln])
    counts = proxy.snapshot()
    assert counts["short_range"] == 1 and sum(counts.values()) == 1, counts
    assert c.stats()["retry_reasons"] == {"short_body": 1}
    # the small-object case as it was seen: a ~32 KiB range of a small object
    small = payload(12, 98757)
    c.put(bucket, "small", small)
    proxy.force("GET", f"/{bucket}/small", "short_range")
    part = np.zeros(32919, dtype=np.uint8)
    got, _ = c.get_into(bucket, "small", part, offset=32919, length=32919)
    assert got == 32919 and np.array_equal(part, small[32919:65838])
    assert c.stats()["retry_reasons"] == {"short_body": 2}
    c.close()


def test_retry_settings_from_the_environment(server, proxy, monkeypatch):
    """AWS_MAX_ATTEMPTS=1 turns retries off: the first injected 503 reaches the caller, and the
    error names the attempts; AWS_RETRY_MODE=adaptive is accepted; bad values are refused."""
    bucket = "envcfg"
    make_bucket(server, bucket)
    proxy.set_rates({"slowdown": 1.0})
    proxy.consecutive_max = 100
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    c = client(proxy.endpoint, "none")
    assert c.config["max_attempts"] == 1
    with pytest.raises(objdirect.ObjDirectError) as e:
        c.put(bucket, "k", b"x")
    assert "SlowDown" in type(e.value).__name__ or "reduce your request rate" in str(e.value)
    assert c.stats()["retries"] == 0
    c.close()
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "4")
    monkeypatch.setenv("AWS_RETRY_MODE", "adaptive")
    c = client(proxy.endpoint, "none", retry_base_delay_s=0.01)
    assert c.config["retry_mode"] == "adaptive" and c.config["max_attempts"] == 4
    with pytest.raises(objdirect.ObjDirectError) as e:
        c.put(bucket, "k", b"x")
    assert "after 4 attempts" in str(e.value), str(e.value)
    assert c.stats()["retry_reasons"] == {"SlowDown": 3}
    c.close()
    for var, bad in (("AWS_MAX_ATTEMPTS", "0"), ("AWS_MAX_ATTEMPTS", "21"),
                     ("AWS_RETRY_MODE", "fast")):
        monkeypatch.setenv("AWS_MAX_ATTEMPTS", "3")
        monkeypatch.setenv("AWS_RETRY_MODE", "standard")
        monkeypatch.setenv(var, bad)
        with pytest.raises(objdirect.InvalidArgument) as e:
            client(proxy.endpoint, "none")
        assert var in str(e.value)


def test_retry_after_is_honoured(server, proxy):
    """A 503 with Retry-After: 1 makes the next attempt wait at least a second."""
    import time
    bucket = "retryafter"
    make_bucket(server, bucket)
    proxy.set_rates({})
    proxy.force("PUT", "/retryafter/k", "slowdown", retry_after="1")
    c = client(proxy.endpoint, "none", retry_base_delay_s=0.001)
    t0 = time.monotonic()
    c.put(bucket, "k", b"hello")
    waited = time.monotonic() - t0
    assert waited >= 1.0, waited
    assert c.stats()["retry_reasons"] == {"SlowDown": 1}
    assert c.get(bucket, "k") == b"hello"
    c.close()


def test_gateway_upstream_writes_survive_the_flaky_path(tmp_path, monkeypatch):
    """objdirect-server --backend s3 with the fault proxy between it and its upstream: the
    gateway's upstream calls (Core::perform in src/storage/s3) retry under the same policy
    (common/retry.hpp), so a client that does not retry at all (max_attempts 1) sees no
    failure for PUT, HEAD, listing and DeleteObjects; the bytes are read back from the upstream
    directly. GETs through the gateway are left out: its sequential GET stream (open_stream /
    continue_stream) is not under the retry loop yet (docs/client.md, "Retries")."""
    up = Server(str(tmp_path / "up"), str(tmp_path / "up.log"), ["--fabric", "none"]).start()
    px = FaultProxy("127.0.0.1", up.port, seed=random.SystemRandom().randrange(1 << 30),
                    rates={"slowdown": 0.10, "internal": 0.05, "cut_before": 0.05,
                           "truncated_xml": 0.20})
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    gw = Server(str(tmp_path / "gw"), str(tmp_path / "gw.log"),
                ["--backend", "s3", "--upstream", px.endpoint, "--fabric", "none"]).start()
    try:
        c = client(gw.endpoint, "none", max_attempts=1)
        direct = client(up.endpoint, "none")
        c.create_bucket("gwb")
        rng = random.Random(3)
        keys = []
        for i in range(40):
            data = payload(500 + i, rng.randrange(0, 300 * 1024))
            key = f"g/{i}"
            keys.append(key)
            c.put("gwb", key, data)
            assert c.head("gwb", key).size == data.size
            buf = np.zeros(data.size, dtype=np.uint8)
            got, _ = direct.get_into("gwb", key, buf)
            assert got == data.size and np.array_equal(buf, data), key
        assert sorted(o.key for o in c.list("gwb", prefix="g/")) == sorted(keys)
        assert c.delete_objects("gwb", keys) == []
        assert list(direct.list("gwb", prefix="g/")) == []
        st = c.stats()
        assert st["retries"] == 0 and not st["errors"], st
        counts = px.snapshot()
        print(f"gateway: injected upstream {counts}")
        assert sum(counts.values()) >= 15, counts
        c.close()
        direct.close()
    finally:
        gw.stop()
        px.close()
        up.stop()
