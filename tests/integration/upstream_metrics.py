"""What the gateway tests share about the upstream behind a gateway objdirect-server and about
both servers' /metrics (test_gateway_cache.py, test_gateway_sse_c.py).

- EXTERNAL: the upstream scripts/with-upstream.sh started when it is not ObjDirect (radosgw,
  moto), else None (the test starts its own ObjDirect upstream);
- ExternalUpstream: such an upstream as a test's `up` (no /metrics, its own credentials);
- direct_client(up): boto3 on the upstream itself, bypassing the gateway;
- scrape / gauge / request_counts: /metrics text, one gauge, objdirect_requests_total by (op,
  status);
- settled_scrapes(servers): the /metrics of each server once their request counts stop moving;
- stop_all(servers): stops the servers a test started, last first, and fails if one crashed or
  exited non-zero;
- upstream_env: a fixture, the environment a gateway started by the test reads its upstream's
  credentials from (the standard AWS variables), FI_TCP_IFACE=lo, no AWS profile.
"""

import os
import re
import time
import urllib.request

import pytest

import objd

EXTERNAL = None
if os.environ.get("OBJDIRECT_UPSTREAM_URL") and os.environ.get("OBJDIRECT_UPSTREAM_KIND", "objdirect") != "objdirect":
    EXTERNAL = {"url": os.environ["OBJDIRECT_UPSTREAM_URL"], "kind": os.environ["OBJDIRECT_UPSTREAM_KIND"],
                "ak": os.environ["AWS_ACCESS_KEY_ID"], "sk": os.environ["AWS_SECRET_ACCESS_KEY"]}


class ExternalUpstream:
    """radosgw or moto_server as the upstream: no /metrics, its own credentials."""

    def __init__(self, info):
        self.endpoint, self.kind, self.ak, self.sk = info["url"], info["kind"], info["ak"], info["sk"]

    def alive(self):
        return True

    def stop(self):
        return 0


def direct_client(srv):
    """boto3 on the upstream directly (bypassing the gateway), or on any ObjDirect server."""
    if isinstance(srv, ExternalUpstream):
        from botocore.config import Config
        import boto3
        cfg = Config(signature_version="s3v4", s3={"addressing_style": "path"},
                     retries={"total_max_attempts": 1}, connect_timeout=10, read_timeout=120)
        return boto3.client("s3", endpoint_url=srv.endpoint, aws_access_key_id=srv.ak,
                            aws_secret_access_key=srv.sk, region_name=objd.REGION, config=cfg)
    return objd.boto3_client(srv)


def scrape(srv):
    with urllib.request.urlopen(srv.endpoint + "/metrics", timeout=15) as r:
        return r.read().decode()


def gauge(text, name):
    m = re.search(r"^" + re.escape(name) + r" ([0-9.e+]+)$", text, re.M)
    assert m, f"{name} not in /metrics"
    return float(m.group(1))


def request_counts(text):
    """A server's own count of the S3 requests it answered: {(op, status): n}."""
    out = {}
    for m in re.finditer(r'^objdirect_requests_total\{op="([^"]+)",status="(\d+)"\} (\d+)$', text, re.M):
        out[(m.group(1), m.group(2))] = int(m.group(3))
    return out


def settled_scrapes(servers):
    """The /metrics text of each server (None for an ExternalUpstream), taken once every one's
    request counts have stopped moving.

    A server counts a request after its response went out, so a client (or the gateway, for
    its upstream) can have its answer before the count moves; a snapshot taken right then would
    put that request in the next window. Two rounds 0.1 s apart that agree close that gap (10 s
    at most)."""
    def once():
        return [None if isinstance(s, ExternalUpstream) else scrape(s) for s in servers]

    texts = once()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        time.sleep(0.1)
        again = once()
        if [t and request_counts(t) for t in again] == [t and request_counts(t) for t in texts]:
            return again
        texts = again
    return texts


@pytest.fixture
def upstream_env(monkeypatch):
    """The gateway reads the upstream's credentials from the standard AWS environment."""
    if EXTERNAL is None:
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", objd.ACCESS_KEY)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", objd.SECRET_KEY)
    monkeypatch.setenv("FI_TCP_IFACE", "lo")
    for k in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE"):
        monkeypatch.delenv(k, raising=False)


def stop_all(servers):
    """Stops each server (ExternalUpstream: nothing to stop), the last started first; a server that
    had crashed, or exits non-zero, fails the test with its log."""
    for srv in reversed(servers):
        crashed = not srv.alive()
        rc = srv.stop()
        assert not crashed and rc == 0, f"server rc={rc}; log:\n{srv.log_tail()}"
