"""Gateway mode (--backend s3 --upstream URL) failure handling, against real servers: an upstream
objdirect-server and a gateway objdirect-server in front of it, both started here.

- an upstream that goes away after the gateway started: requests get a clean 503 quickly;
- startup refuses an unreachable upstream, missing credentials and a missing --upstream, with a
  clear message and quickly.
"""

import os
import socket
import subprocess
import time

import pytest

import objd


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture
def upstream_env(monkeypatch):
    """The gateway reads the upstream's credentials the standard AWS way (here: environment)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", objd.ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", objd.SECRET_KEY)
    for k in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE"):
        monkeypatch.delenv(k, raising=False)


def start_pair(tmp_path, extra=()):
    up = objd.Server(str(tmp_path / "up"), str(tmp_path / "up.log"), extra_args=["--fabric", "none"])
    up.start()
    gw = objd.Server(str(tmp_path / "gw"), str(tmp_path / "gw.log"),
                     extra_args=["--backend", "s3", "--upstream", up.endpoint, "--fabric", "none",
                                 "--upstream-connect-timeout-ms", "1000"] + list(extra))
    gw.start()
    return up, gw


def metric(srv, name):
    r = objd.request(srv, "GET", "/metrics", sign=False, timeout_s=10)
    assert r.status == 200, r
    for line in r.body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in /metrics")


def test_sequential_http_get_is_two_upstream_gets(tmp_path, upstream_env):
    """An HTTP GET reads the object in 1 MiB preads: an exact GET for the first, then one
    upstream GET stream (an 8 MiB window) serves all the others."""
    up, gw = start_pair(tmp_path)
    try:
        s3 = objd.boto3_client(gw)
        s3.create_bucket(Bucket="gwm")
        body = os.urandom((6 << 20) + 5)
        s3.put_object(Bucket="gwm", Key="k", Body=body)
        before = metric(gw, "objdirect_upstream_get_requests_total")
        assert s3.get_object(Bucket="gwm", Key="k")["Body"].read() == body
        assert metric(gw, "objdirect_upstream_get_requests_total") - before == 2
        assert metric(gw, "objdirect_upstream_requests_total") > 0
        assert metric(gw, "objdirect_upstream_connections_in_use") == 0
    finally:
        gw.stop()
        up.stop()


def test_upstream_gone_gives_503_quickly(tmp_path, upstream_env):
    up, gw = start_pair(tmp_path)
    try:
        s3 = objd.boto3_client(gw)
        s3.create_bucket(Bucket="gwb")
        s3.put_object(Bucket="gwb", Key="k", Body=b"through the gateway")
        assert s3.get_object(Bucket="gwb", Key="k")["Body"].read() == b"through the gateway"
        # The object is in the upstream, not in the gateway.
        assert objd.boto3_client(up).get_object(Bucket="gwb", Key="k")["Body"].read() == b"through the gateway"
        assert up.stop() == 0
        for method, path, body in (("GET", objd.opath("gwb", "k"), b""), ("PUT", objd.opath("gwb", "k2"), b"x"),
                                   ("GET", "/gwb", b"")):
            t0 = time.monotonic()
            r = objd.request(gw, method, path, body=body)
            took = time.monotonic() - t0
            objd.assert_error(r, 503, "ServiceUnavailable")
            assert b"upstream" in r.body, r.body
            assert took < 5, f"{method} {path} took {took:.1f}s"
        assert gw.alive()
    finally:
        gw.stop()
        up.stop()


def run_gateway(args, env, timeout=20):
    t0 = time.monotonic()
    p = subprocess.run([objd.server_binary(), "--listen", "127.0.0.1:0", "--access-key", "a" * 8,
                        "--secret-key", "s" * 16, "--fabric", "none"] + args,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=timeout)
    return p.returncode, p.stderr.decode(errors="replace"), time.monotonic() - t0


def test_startup_refuses_unreachable_upstream(upstream_env):
    url = f"http://127.0.0.1:{free_port()}"
    rc, err, took = run_gateway(["--backend", "s3", "--upstream", url], dict(os.environ))
    assert rc == 1, err
    assert f"cannot use the upstream {url}" in err and "unreachable" in err, err
    assert took < 10


def test_startup_refuses_missing_credentials(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["HOME"] = str(tmp_path)  # no ~/.aws
    rc, err, _ = run_gateway(["--backend", "s3", "--upstream", "http://127.0.0.1:9"], env)
    assert rc == 2, err
    assert "no upstream credentials" in err, err
    rc, err, _ = run_gateway(["--backend", "s3"], env)
    assert rc == 2 and "--upstream" in err, err


def test_startup_refuses_wrong_credentials(tmp_path, upstream_env, monkeypatch):
    up = objd.Server(str(tmp_path / "up"), str(tmp_path / "up.log"), extra_args=["--fabric", "none"])
    up.start()
    try:
        env = dict(os.environ, AWS_SECRET_ACCESS_KEY="wrong-secret")
        rc, err, _ = run_gateway(["--backend", "s3", "--upstream", up.endpoint], env)
        assert rc == 1, err
        assert "SignatureDoesNotMatch" in err, err
    finally:
        up.stop()
