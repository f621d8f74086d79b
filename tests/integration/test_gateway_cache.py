"""The read-through cache in front of the gateway backend, through the real binaries: an upstream
objdirect-server and a gateway objdirect-server (--backend s3 --upstream URL --cache-dir ...) in
front of it, both started here. Upstream traffic is counted twice: by the gateway
(objdirect_upstream_*_total) and by the upstream itself (its objdirect_requests_total by op).

Run by scripts/with-upstream.sh with OBJDIRECT_UPSTREAM_KIND radosgw or moto (the
gateway_radosgw.integration_gateway_cache entry), the upstream is that one instead (its URL and
credentials from the script); such an upstream has no /metrics, so only the gateway's count of
its upstream requests is checked there, and each test uses a bucket of its own (radosgw's bucket
names are shared by all its users).

- a cache hit skips the upstream (boto3 GETs and an RDMA GET with the objdirect CLI over
  libfabric tcp); with TTL 0 each GET costs exactly one conditional HEAD, answered 304;
- an overwrite made directly at the upstream is invisible at most for the TTL, never mixed;
- concurrent misses of one object coalesce into one upstream fetch per block;
- --cache-bytes-max bounds the cache (LRU evictions).
"""

import concurrent.futures
import json
import os
import subprocess
import time

import pytest

import objd
from upstream_metrics import (EXTERNAL, ExternalUpstream, direct_client, gauge, request_counts,
                              settled_scrapes, stop_all, upstream_env)  # noqa: F401 (a fixture)

BLOCK = 1 << 20
_seq = iter(range(1 << 30))


@pytest.fixture
def gwc():
    """A bucket name of the test's own (an external upstream is shared by the whole entry)."""
    return f"gwc-{os.getpid()}-{next(_seq)}"


class Counts:
    """Upstream traffic between two snapshots, seen from both sides."""

    def __init__(self, up, gw):
        self.up, self.gw = up, gw
        self.snap()

    def snap(self):
        g, u = settled_scrapes([self.gw, self.up])
        self.g_req = gauge(g, "objdirect_upstream_requests_total")
        self.g_get = gauge(g, "objdirect_upstream_get_requests_total")
        # An external upstream has no /metrics: its own count stays empty (ops == {} always;
        # the tests check the gateway's count of what it sent).
        self.u_ops = {} if u is None else request_counts(u)
        self.g_ops = request_counts(g)  # the S3 requests the gateway itself answered
        self.cache = {k: gauge(g, "objdirect_cache_" + k)
                      for k in ("hits_total", "misses_total", "bytes", "evictions_total")}

    def delta(self):
        before = (self.g_req, self.g_get, self.u_ops, self.g_ops)
        self.snap()
        ops = {k: v - before[2].get(k, 0) for k, v in self.u_ops.items() if v != before[2].get(k, 0)}
        self.gw_ops = {k: v - before[3].get(k, 0) for k, v in self.g_ops.items() if v != before[3].get(k, 0)}
        return self.g_req - before[0], self.g_get - before[1], ops


@pytest.fixture
def pair(tmp_path, upstream_env):
    started = []

    def start(ttl_s, bytes_max=64 * BLOCK, fabric="none"):
        if EXTERNAL is not None:
            up = ExternalUpstream(EXTERNAL)
        else:
            up = objd.Server(str(tmp_path / "up"), str(tmp_path / "up.log"), extra_args=["--fabric", "none"])
            up.start()
        started.append(up)
        gw = objd.Server(str(tmp_path / "gw"), str(tmp_path / "gw.log"), extra_args=[
            "--backend", "s3", "--upstream", up.endpoint, "--fabric", fabric,
            "--cache-dir", str(tmp_path / "cache"), "--cache-bytes-max", str(bytes_max),
            "--cache-block-bytes", str(BLOCK), "--cache-ttl-s", str(ttl_s)])
        gw.start()
        started.append(gw)
        return up, gw

    yield start
    stop_all(started)


def rdma_get(gw, bucket, key, out):
    env = objd.cli_env(gw)
    cli = os.path.join(os.environ["OBJDIRECT_BIN_DIR"], "objdirect")
    p = subprocess.run([cli, "cp", "--json", "--fabric", "libfabric:tcp", f"s3://{bucket}/{key}", str(out)],
                       env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    assert p.returncode == 0, p.stderr.decode()
    report = json.loads(p.stdout.decode().strip().splitlines()[-1])
    assert report.get("path") == "rdma", report
    return out.read_bytes()


def test_hit_skips_upstream_within_ttl_http_and_rdma(gwc, pair, tmp_path):
    up, gw = pair(ttl_s=600, fabric="libfabric:tcp")
    s3 = objd.boto3_client(gw)
    s3.create_bucket(Bucket=gwc)
    body = os.urandom(3 * BLOCK + 777)
    s3.put_object(Bucket=gwc, Key="k", Body=body)
    c = Counts(up, gw)
    assert s3.get_object(Bucket=gwc, Key="k")["Body"].read() == body  # the miss
    g_req, g_get, ops = c.delta()
    assert g_get >= 1
    if EXTERNAL is None:
        assert ops.get(("GetObject", "206"), 0) + ops.get(("GetObject", "200"), 0) >= 1, ops

    assert s3.get_object(Bucket=gwc, Key="k")["Body"].read() == body
    assert rdma_get(gw, gwc, "k", tmp_path / "rdma.out") == body
    g_req, g_get, ops = c.delta()
    assert (g_req, g_get) == (0, 0), "repeat GETs within the TTL asked the upstream"
    assert ops == {}, f"the upstream saw {ops}"
    assert c.cache["hits_total"] > 0


def test_ttl_zero_costs_one_304_head_per_get(gwc, pair, tmp_path):
    up, gw = pair(ttl_s=0, fabric="libfabric:tcp")
    s3 = objd.boto3_client(gw)
    s3.create_bucket(Bucket=gwc)
    body = os.urandom(2 * BLOCK + 5)
    s3.put_object(Bucket=gwc, Key="k", Body=body)
    etag = s3.head_object(Bucket=gwc, Key="k")["ETag"]
    # The upstream answers a HEAD with If-None-Match on the current ETag with 304.
    with pytest.raises(Exception) as e:
        direct_client(up).head_object(Bucket=gwc, Key="k", IfNoneMatch=etag)
    assert e.value.response["Error"]["Code"] == "304", e.value.response
    c = Counts(up, gw)
    assert s3.get_object(Bucket=gwc, Key="k")["Body"].read() == body  # the miss
    c.delta()
    for _ in range(2):
        assert s3.get_object(Bucket=gwc, Key="k")["Body"].read() == body
        g_req, g_get, ops = c.delta()
        assert (g_req, g_get) == (1, 0), (g_req, g_get, ops)
        if EXTERNAL is None:
            assert ops == {("HeadObject", "304"): 1}, ops
    # The objdirect CLI asks HeadObject, then GetObject over RDMA: one 304 HEAD for each. Its
    # fresh endpoint's first RDMA GET is answered 403 RDMAEndpointNotBound (the binding
    # challenge, docs/rdma_protocol.md) and sent again with the proof. A slow (sanitizer-built)
    # gateway can miss the RDMA op timeout; the CLI then fetches the bytes once more over HTTP
    # (seen under ASan: HeadObject 200, GetObject 403, 206 and 200), and that read too must cost
    # exactly one 304 HEAD and no upstream GET.
    assert rdma_get(gw, gwc, "k", tmp_path / "rdma.out") == body
    g_req, g_get, ops = c.delta()
    reads = sum(v for (op, _), v in c.gw_ops.items() if op in ("HeadObject", "GetObject"))
    assert reads in (2, 3, 4), c.gw_ops
    assert (g_req, g_get) == (reads, 0), (g_req, g_get, ops, c.gw_ops)
    if EXTERNAL is None:
        assert ops == {("HeadObject", "304"): reads}, ops


@pytest.mark.parametrize("ttl_s", [2, 0])
def test_upstream_overwrite_is_seen_within_ttl_never_mixed(gwc, pair, ttl_s):
    up, gw = pair(ttl_s=ttl_s)
    s3, direct = objd.boto3_client(gw), direct_client(up)
    s3.create_bucket(Bucket=gwc)
    v1, v2 = os.urandom(3 * BLOCK + 11), os.urandom(3 * BLOCK + 11)  # same size: no size hint
    s3.put_object(Bucket=gwc, Key="k", Body=v1)
    assert s3.get_object(Bucket=gwc, Key="k")["Body"].read() == v1  # cached
    t0 = time.monotonic()
    direct.put_object(Bucket=gwc, Key="k", Body=v2)  # not through the gateway
    got = s3.get_object(Bucket=gwc, Key="k")["Body"].read()
    if ttl_s == 0:
        assert got == v2, "TTL 0 served the old version after the upstream changed"
        return
    assert got in (v1, v2), "mixed or wrong bytes"
    while time.monotonic() - t0 < ttl_s + 5:
        got = s3.get_object(Bucket=gwc, Key="k")["Body"].read()
        assert got in (v1, v2), "mixed or wrong bytes"
        if got == v1:
            assert time.monotonic() - t0 <= ttl_s + 0.5, "old version served after the TTL"
        else:
            break
        time.sleep(0.2)
    assert got == v2, "the new version never appeared"
    t = time.monotonic()
    time.sleep(max(0.0, t0 + ttl_s + 0.1 - t))
    assert s3.get_object(Bucket=gwc, Key="k")["Body"].read() == v2


def test_upstream_overwrite_during_a_fill_recovers(gwc, pair):
    """An overwrite made upstream while the gateway is filling the cache from its If-Match-pinned
    reader: the GET in flight either completes with the old version whole or is cut (the next
    upstream GET answers 412), never mixed; the next GET returns the new version."""
    up, gw = pair(ttl_s=600)
    s3, direct = objd.boto3_client(gw), direct_client(up)
    s3.create_bucket(Bucket=gwc)
    v1, v2 = os.urandom(32 * BLOCK), os.urandom(32 * BLOCK)
    direct.put_object(Bucket=gwc, Key="k", Body=v1)
    stream = s3.get_object(Bucket=gwc, Key="k")["Body"]
    head = stream.read(BLOCK)  # the gateway is now filling blocks from the upstream
    direct.put_object(Bucket=gwc, Key="k", Body=v2)
    try:
        got = head + stream.read()
    except Exception as e:  # noqa: BLE001 - a cut body: the fill's If-Match GET got 412
        got = None
        print("GET in flight during the upstream overwrite was cut:", type(e).__name__)
    if got is not None:
        print("GET in flight during the upstream overwrite completed,", len(got), "bytes")
        assert len(got) < len(v1) or got == v1, "mixed bytes"
        # A short body is what a cut looks like to a reader that does not check Content-Length.
    got = s3.get_object(Bucket=gwc, Key="k")["Body"].read()
    assert got == v2, "the GET after an upstream overwrite did not return the new version"
    assert s3.get_object(Bucket=gwc, Key="k")["Body"].read() == v2


def test_concurrent_misses_coalesce(gwc, pair):
    up, gw = pair(ttl_s=600, bytes_max=256 * BLOCK)
    s3 = objd.boto3_client(gw, )
    s3.create_bucket(Bucket=gwc)
    body = os.urandom(32 * BLOCK)
    direct_client(up).put_object(Bucket=gwc, Key="big", Body=body)
    blocks = 32
    c = Counts(up, gw)
    n = 8

    def get(_):
        return objd.boto3_client(gw).get_object(Bucket=gwc, Key="big")["Body"].read() == body

    with concurrent.futures.ThreadPoolExecutor(n) as ex:
        assert all(ex.map(get, range(n)))
    g_req, g_get, ops = c.delta()
    up_gets = sum(v for (op, _), v in ops.items() if op == "GetObject")
    print(f"{n} parallel GETs of {blocks} blocks: gateway counted {g_get} upstream GETs, "
          f"upstream saw {ops}")
    if EXTERNAL is None:
        assert up_gets == g_get
    assert g_get <= blocks + 2 * n, f"{g_get} upstream GETs for {blocks} blocks: misses not coalesced"
    assert c.cache["misses_total"] == blocks, "each block filled once"


def test_lru_bound_holds_in_front_of_the_gateway(gwc, pair):
    bound = 6 * BLOCK
    up, gw = pair(ttl_s=600, bytes_max=bound)
    s3 = objd.boto3_client(gw)
    s3.create_bucket(Bucket=gwc)
    bodies = {f"o{i}": os.urandom(2 * BLOCK) for i in range(6)}
    for k, b in bodies.items():
        s3.put_object(Bucket=gwc, Key=k, Body=b)
    c = Counts(up, gw)
    for k, b in bodies.items():
        assert s3.get_object(Bucket=gwc, Key=k)["Body"].read() == b
        c.snap()
        assert c.cache["bytes"] <= bound, c.cache
    assert c.cache["evictions_total"] > 0, c.cache
    # The evicted first object comes back from the upstream, whole.
    assert s3.get_object(Bucket=gwc, Key="o0")["Body"].read() == bodies["o0"]
    g_req, g_get, _ = c.delta()
    assert g_get >= 1


def test_versioning_behind_the_cache(gwc, pair):
    """The cache forwards the version calls (docs/scale-out.md, "Read-through cache"): versioning
    is on behind --cache-dir, a versionId-addressed GET returns that version's bytes, and a plain
    GET never serves a cached older version after an overwrite or after the latest version is
    deleted by its id, however long the TTL."""
    up, gw = pair(ttl_s=600)
    s3 = objd.boto3_client(gw)
    s3.create_bucket(Bucket=gwc)
    s3.put_bucket_versioning(Bucket=gwc, VersioningConfiguration={"Status": "Enabled"})
    assert s3.get_bucket_versioning(Bucket=gwc).get("Status") == "Enabled"
    v1, v2 = os.urandom(2 * BLOCK + 3), os.urandom(2 * BLOCK + 3)  # same size: no size hint
    id1 = s3.put_object(Bucket=gwc, Key="k", Body=v1)["VersionId"]
    r = s3.get_object(Bucket=gwc, Key="k")
    assert (r["Body"].read(), r["VersionId"]) == (v1, id1)  # now cached
    assert s3.get_object(Bucket=gwc, Key="k")["Body"].read() == v1
    id2 = s3.put_object(Bucket=gwc, Key="k", Body=v2)["VersionId"]
    assert id2 and id2 != id1
    r = s3.get_object(Bucket=gwc, Key="k")
    assert (r["Body"].read(), r["VersionId"]) == (v2, id2), "a cached older version after an overwrite"
    c = Counts(up, gw)
    for vid, body in ((id1, v1), (id2, v2), (id1, v1)):
        r = s3.get_object(Bucket=gwc, Key="k", VersionId=vid)
        assert (r["Body"].read(), r["VersionId"]) == (body, vid)
        r = s3.get_object(Bucket=gwc, Key="k", VersionId=vid, Range="bytes=5-1048580")
        assert r["Body"].read() == body[5:1048581]
        assert s3.head_object(Bucket=gwc, Key="k", VersionId=vid)["VersionId"] == vid
    g_req, g_get, _ = c.delta()
    assert g_get >= 6, "versionId-addressed GETs are read from the upstream"
    # The latest version deleted by its id: the plain GET is the older version again, not v2.
    s3.delete_object(Bucket=gwc, Key="k", VersionId=id2)
    r = s3.get_object(Bucket=gwc, Key="k")
    assert (r["Body"].read(), r["VersionId"]) == (v1, id1), "the deleted latest version was served"
    with pytest.raises(Exception) as e:
        s3.get_object(Bucket=gwc, Key="k", VersionId=id2)["Body"].read()
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404, e.value.response
    # A delete marker hides the key from a plain GET; the version stays readable by id.
    s3.delete_object(Bucket=gwc, Key="k")
    with pytest.raises(Exception) as e:
        s3.get_object(Bucket=gwc, Key="k")
    assert e.value.response["Error"]["Code"] == "NoSuchKey", e.value.response
    assert s3.get_object(Bucket=gwc, Key="k", VersionId=id1)["Body"].read() == v1
    listed = s3.list_object_versions(Bucket=gwc)
    assert [v["VersionId"] for v in listed.get("Versions", [])] == [id1]
    assert len(listed.get("DeleteMarkers", [])) == 1
    # An overwrite after the marker is the latest again.
    id3 = s3.put_object(Bucket=gwc, Key="k", Body=v2)["VersionId"]
    r = s3.get_object(Bucket=gwc, Key="k")
    assert (r["Body"].read(), r["VersionId"]) == (v2, id3)
