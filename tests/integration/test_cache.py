"""The read-through cache (--cache-dir, storage/cache) in the real server, in front of the local
backend (or, under scripts/with-upstream.sh, the gateway backend in front of radosgw or moto): real boto3 GETs and an RDMA GET through the objdirect CLI (libfabric tcp on loopback),
with /metrics showing that repeated reads are served from the cache without asking the backend,
and bad flag combinations refused with a clear message."""

import json
import os
import re
import subprocess
import urllib.request

import pytest

import objd

BLOCK = 1 << 20


def metrics(server):
    with urllib.request.urlopen(server.endpoint + "/metrics", timeout=15) as r:
        text = r.read().decode()
    out = {}
    for m in re.finditer(r"^objdirect_cache_([a-z_]+) ([0-9.e+]+)$", text, re.M):
        out[m.group(1)] = float(m.group(2))
    assert "hits_total" in out, f"no objdirect_cache_* metrics:\n{text[-3000:]}"
    return out


def delta(after, before, name):
    return after[name] - before[name]


@pytest.fixture
def cached_server(tmp_path, monkeypatch):
    monkeypatch.setenv("FI_TCP_IFACE", "lo")
    srv = objd.Server(str(tmp_path / "data"), str(tmp_path / "server.log"), extra_args=[
        "--cache-dir", str(tmp_path / "cache"), "--cache-bytes-max", str(64 * BLOCK),
        "--cache-block-bytes", str(BLOCK), "--cache-ttl-s", "600", "--fabric", "libfabric:tcp"]
        # the gateway_radosgw / gateway_moto entries: the same cache in front of the gateway backend
        + os.environ.get("OBJDIRECT_SERVER_ARGS", "").split())
    srv.start()
    yield srv
    crashed = not srv.alive()
    rc = srv.stop()
    assert not crashed and rc == 0, f"server rc={rc}; log:\n{srv.log_tail()}"


def test_second_get_is_a_cache_hit_over_http_and_rdma(cached_server, tmp_path):
    s3 = objd.boto3_client(cached_server)
    s3.create_bucket(Bucket="cached")
    body = os.urandom(3 * BLOCK + 12345)  # four blocks, the last one partial
    s3.put_object(Bucket="cached", Key="obj", Body=body)

    m0 = metrics(cached_server)
    assert s3.get_object(Bucket="cached", Key="obj")["Body"].read() == body
    m1 = metrics(cached_server)
    assert delta(m1, m0, "misses_total") == 4, (m0, m1)
    assert delta(m1, m0, "bytes_filled_total") == len(body)
    assert m1["blocks"] == 4

    assert s3.get_object(Bucket="cached", Key="obj")["Body"].read() == body
    m2 = metrics(cached_server)
    assert delta(m2, m1, "misses_total") == 0, (m1, m2)
    assert delta(m2, m1, "hits_total") >= 4
    assert delta(m2, m1, "bytes_served_total") == len(body)
    assert delta(m2, m1, "inner_requests_total") == 0, "the second GET asked the backend"

    # A ranged GET inside one cached block.
    r = s3.get_object(Bucket="cached", Key="obj", Range=f"bytes={BLOCK + 10}-{BLOCK + 1009}")
    assert r["Body"].read() == body[BLOCK + 10:BLOCK + 1010]

    # RDMA GET with the objdirect CLI, a separate process; bytes compared, served from the cache.
    env = dict(os.environ, AWS_ENDPOINT_URL=cached_server.endpoint,
               AWS_ACCESS_KEY_ID=objd.ACCESS_KEY, AWS_SECRET_ACCESS_KEY=objd.SECRET_KEY,
               AWS_REGION=objd.REGION, FI_TCP_IFACE="lo")
    env.pop("AWS_PROFILE", None)
    cli = os.path.join(os.environ["OBJDIRECT_BIN_DIR"], "objdirect")
    out = tmp_path / "rdma.out"
    m3 = metrics(cached_server)
    p = subprocess.run([cli, "cp", "--json", "--fabric", "libfabric:tcp", "s3://cached/obj", str(out)],
                       env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    assert p.returncode == 0, p.stderr.decode()
    report = json.loads(p.stdout.decode().strip().splitlines()[-1])
    assert report.get("path") == "rdma", report
    assert out.read_bytes() == body
    m4 = metrics(cached_server)
    assert delta(m4, m3, "misses_total") == 0, (m3, m4)
    assert delta(m4, m3, "bytes_served_total") == len(body), (m3, m4)
    assert delta(m4, m3, "inner_requests_total") == 0

    # A PUT through the server invalidates at once, within the TTL.
    body2 = os.urandom(BLOCK + 7)
    s3.put_object(Bucket="cached", Key="obj", Body=body2)
    assert s3.get_object(Bucket="cached", Key="obj")["Body"].read() == body2
    s3.delete_object(Bucket="cached", Key="obj")
    assert s3.list_objects_v2(Bucket="cached").get("KeyCount") == 0
    with pytest.raises(s3.exceptions.NoSuchKey):
        s3.get_object(Bucket="cached", Key="obj")


@pytest.mark.parametrize("args, message", [
    (["--cache-bytes-max", "1000"], "--cache-bytes-max needs --cache-dir"),
    (["--cache-ttl-s", "5"], "--cache-ttl-s needs --cache-dir"),
    (["--cache-dir", "{tmp}/c"], "--cache-dir needs --cache-bytes-max"),
    (["--cache-dir", "{tmp}/data/c", "--cache-bytes-max", "1000"], "must not contain each other"),
    (["--cache-dir", "{tmp}/c", "--cache-bytes-max", "1000", "--cache-block-bytes", "4096"],
     "block size must be between"),
    (["--cache-dir", "{tmp}/c", "--cache-bytes-max", "1000", "--cache-ttl-s", "86401"], "TTL over"),
])
def test_bad_cache_flags_are_refused(tmp_path, args, message):
    cmd = [objd.server_binary(), "--listen", "127.0.0.1:0", "--data", str(tmp_path / "data"),
           "--access-key", objd.ACCESS_KEY, "--secret-key", objd.SECRET_KEY]
    cmd += [a.replace("{tmp}", str(tmp_path)) for a in args]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert message in p.stderr.decode(), p.stderr.decode()
