"""SSE-C passed through the gateway (docs/sse-c.md, "One implementation for every backend";
docs/scale-out.md, "What the gateway passes through"), through the real binaries: an upstream
objdirect-server with --sse-c-over-http and a gateway (--backend s3 --upstream URL) in front of
it, with the read-through cache (--cache-dir), both started here.

- an SSE-C object read twice with the key costs an upstream GET each time (never cached), a GET
  without the key after a keyed GET is refused by the upstream (never a cache hit), a plain
  object beside it is cached; the cache directory, the logs and /metrics hold neither the key nor
  the plaintext;
- an RDMA PUT and GET through the gateway (objdirect CLI, libfabric tcp) with the key move the
  plaintext; without the key the RDMA GET is refused and writes nothing;
- the upstream's refusal over plain HTTP (no --sse-c-over-http there) is the gateway's answer;
- an upstream that answers NotImplemented (an ObjDirect whose cached local backend keeps no SSE-C)
  is remembered: the next SSE-C requests answer 501 without an upstream request for the object
  (the bucket check every request makes, HeadBucket, still goes upstream).

Run by scripts/with-upstream.sh with OBJDIRECT_UPSTREAM_KIND=moto (gateway_moto.integration_
gateway_sse_c), the upstream is moto_server, which accepts SSE-C headers and ignores them (it
stores plaintext and serves it without a key): the gateway sees that its PutObject answer does not
confirm the encryption, removes the object again, answers 501 NotImplemented and remembers it.
"""

import base64
import hashlib
import os
import subprocess

import botocore.exceptions
import pytest

import objd
from upstream_metrics import (EXTERNAL, ExternalUpstream, direct_client, gauge, request_counts, scrape,
                              settled_scrapes, stop_all, upstream_env)  # noqa: F401 (a fixture)

KEY_A = bytes(range(32))
KEY_B = bytes(range(100, 132))
MARKER = b"gateway SSE-C plaintext 51c2e8 "
BLOCK = 1 << 20

only_objdirect = pytest.mark.skipif(EXTERNAL is not None, reason="needs an ObjDirect upstream "
                                    "(its /metrics, its flags); the external upstream has its own test")


def sse(key):
    return {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": key}


def b64(key):
    return base64.b64encode(key).decode()


def err(excinfo):
    r = excinfo.value.response
    return r["ResponseMetadata"]["HTTPStatusCode"], r["Error"].get("Code"), r["Error"].get("Message", "")


class Counts:
    """The gateway's upstream requests (and the upstream's own count, for an ObjDirect one) and
    the cache's hits between two snapshots."""

    def __init__(self, up, gw):
        self.up, self.gw = up, gw
        self.snap()

    def snap(self):
        g, u = settled_scrapes([self.gw, self.up])
        self.req = gauge(g, "objdirect_upstream_requests_total")
        self.get = gauge(g, "objdirect_upstream_get_requests_total")
        self.hits = gauge(g, "objdirect_cache_hits_total") if "objdirect_cache_hits_total" in g else 0
        self.ops = {} if u is None else request_counts(u)

    def delta(self):
        req, get, hits, ops = self.req, self.get, self.hits, self.ops
        self.snap()
        d_ops = {k: v - ops.get(k, 0) for k, v in self.ops.items() if v != ops.get(k, 0)}
        return self.req - req, self.get - get, self.hits - hits, d_ops


@pytest.fixture
def pair(tmp_path, upstream_env):
    started = []

    def start(upstream_args=("--sse-c-over-http",), cache=True, fabric="none", gateway_args=()):
        if EXTERNAL is not None:
            up = ExternalUpstream(EXTERNAL)
        else:
            up = objd.Server(str(tmp_path / "up"), str(tmp_path / "up.log"),
                             extra_args=["--fabric", "none", *upstream_args])
            up.start()
        started.append(up)
        args = ["--backend", "s3", "--upstream", up.endpoint, "--fabric", fabric, "--sse-c-over-http",
                "--access-log", str(tmp_path / "gw-access.log"), *gateway_args]
        if cache:
            args += ["--cache-dir", str(tmp_path / "cache"), "--cache-bytes-max", str(64 * BLOCK),
                     "--cache-block-bytes", str(BLOCK), "--cache-ttl-s", "600"]
        gw = objd.Server(str(tmp_path / "gw"), str(tmp_path / "gw.log"), extra_args=args)
        gw.start()
        started.append(gw)
        return up, gw

    yield start
    stop_all(started)


_n = [0]


def bucket_name():
    _n[0] += 1
    return f"gwssec-{os.getpid()}-{_n[0]}"


def no_secret_under(paths, what):
    """Neither key (raw or base64) nor the SSE-C plaintext marker in any file under `paths`."""
    for root in paths:
        files = objd.files_under(root) if os.path.isdir(root) else [root]
        for path in files:
            with open(path, "rb") as f:
                data = f.read()
            for key in (KEY_A, KEY_B):
                assert key not in data and b64(key).encode() not in data, f"a key in {path} ({what})"
            assert MARKER * 2 not in data, f"SSE-C plaintext in {path} ({what})"


@only_objdirect
def test_sse_c_reads_bypass_the_cache(pair, tmp_path):
    up, gw = pair()
    s3 = objd.boto3_client(gw)
    b = bucket_name()
    s3.create_bucket(Bucket=b)
    body = MARKER * (3 * BLOCK // len(MARKER))
    r = s3.put_object(Bucket=b, Key="k", Body=body, **sse(KEY_A))
    assert r["SSECustomerKeyMD5"] == b64(hashlib.md5(KEY_A).digest())
    s3.put_object(Bucket=b, Key="plain", Body=b"plain " * 1000)
    # Encrypted at the upstream: its own keyless GET is refused.
    with pytest.raises(botocore.exceptions.ClientError) as e:
        direct_client(up).get_object(Bucket=b, Key="k")
    assert err(e)[:2] == (400, "InvalidRequest")

    c = Counts(up, gw)
    for _ in range(2):  # each keyed GET is one more upstream GET: nothing of it is cached
        g = s3.get_object(Bucket=b, Key="k", **sse(KEY_A))
        assert g["Body"].read() == body and g["SSECustomerAlgorithm"] == "AES256"
        d_req, d_get, d_hits, ops = c.delta()
        assert d_get >= 1 and d_hits == 0, (d_req, d_get, d_hits)
        assert ops.get(("GetObject", "200"), 0) + ops.get(("GetObject", "206"), 0) >= 1, ops
    g = s3.get_object(Bucket=b, Key="k", Range="bytes=100-200", **sse(KEY_A))
    assert g["Body"].read() == body[100:201]
    c.delta()
    # Without the key, right after the keyed GETs: the upstream's refusal, never a cache hit.
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.get_object(Bucket=b, Key="k")
    status, code, msg = err(e)
    assert (status, code) == (400, "InvalidRequest") and "Server Side Encryption" in msg
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.head_object(Bucket=b, Key="k")
    assert err(e)[0] == 400
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.get_object(Bucket=b, Key="k", **sse(KEY_B))
    assert err(e)[:2] == (403, "AccessDenied")
    d_req, d_get, d_hits, ops = c.delta()
    assert d_req >= 3 and d_hits == 0, (d_req, d_hits)
    # The plain object beside it is cached as before: the second GET is a hit.
    for _ in range(2):
        assert s3.get_object(Bucket=b, Key="plain")["Body"].read() == b"plain " * 1000
    assert c.delta()[2] > 0
    # An overwrite with SSE-C through the gateway drops the cached plain object.
    s3.put_object(Bucket=b, Key="plain", Body=MARKER * 3, **sse(KEY_B))
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.get_object(Bucket=b, Key="plain")
    assert err(e)[:2] == (400, "InvalidRequest")
    assert s3.get_object(Bucket=b, Key="plain", **sse(KEY_B))["Body"].read() == MARKER * 3
    # Neither key nor plaintext in the cache, the logs (the access log included) or /metrics.
    no_secret_under([str(tmp_path / "cache"), gw.log_path, str(tmp_path / "gw-access.log"),
                     up.log_path], "gateway")
    text = scrape(gw)
    assert b64(KEY_A) not in text and b64(KEY_B) not in text


@only_objdirect
def test_rdma_put_and_get_through_the_gateway(pair, tmp_path):
    up, gw = pair(fabric="libfabric:tcp")
    s3 = objd.boto3_client(gw)
    b = bucket_name()
    s3.create_bucket(Bucket=b)
    exe = os.path.join(os.environ["OBJDIRECT_BIN_DIR"], "objdirect")
    keyfile = tmp_path / "key.bin"
    keyfile.write_bytes(KEY_A)
    a = ["--sse-c", "AES256", "--sse-c-key", f"fileb://{keyfile}"]
    src = tmp_path / "in.bin"
    src.write_bytes(MARKER * 2000 + os.urandom(3 << 20))

    def run(*args):
        return subprocess.run([exe, *args], env=objd.cli_env(gw), capture_output=True, timeout=120)

    p = run("cp", *a, "--json", "--fabric", "libfabric:tcp", "--rdma", "required", str(src), f"s3://{b}/r")
    assert p.returncode == 0, p.stderr.decode()
    assert b'"rdma"' in p.stdout, p.stdout
    # The upstream holds it under the key: readable there with it, refused without.
    assert direct_client(up).get_object(Bucket=b, Key="r", **sse(KEY_A))["Body"].read() == src.read_bytes()
    with pytest.raises(botocore.exceptions.ClientError):
        direct_client(up).get_object(Bucket=b, Key="r")
    # RDMA GET with the key, whole and in ranged parts.
    out = tmp_path / "out.bin"
    p = run("cp", *a, "--json", "--fabric", "libfabric:tcp", "--rdma", "required", "--part-size", "1MiB",
            f"s3://{b}/r", str(out))
    assert p.returncode == 0, p.stderr.decode()
    assert b'"rdma"' in p.stdout and out.read_bytes() == src.read_bytes()
    # Without the key, and with another: refused before any byte moves.
    for args in ([], ["--sse-c", "AES256", "--sse-c-key", "0123456789abcdef" * 2]):
        no = tmp_path / "no.bin"
        p = run("cp", *args, "--fabric", "libfabric:tcp", f"s3://{b}/r", str(no))
        assert p.returncode != 0, p.stdout
        assert not no.exists() or MARKER not in no.read_bytes()
    no_secret_under([str(tmp_path / "cache"), gw.log_path, str(tmp_path / "gw-access.log")], "rdma")


@only_objdirect
def test_large_put_is_an_encrypted_multipart_upload_upstream(pair):
    """A PutObject above --upstream-multipart-threshold-bytes becomes the gateway's own parallel
    multipart upload: CreateMultipartUpload, each UploadPart and the Complete carry the key."""
    up, gw = pair(cache=False, gateway_args=("--upstream-multipart-threshold-bytes", str(5 << 20),
                                             "--upstream-part-bytes", str(5 << 20)))
    s3 = objd.boto3_client(gw)
    b = bucket_name()
    s3.create_bucket(Bucket=b)
    body = os.urandom((12 << 20) + 5)
    c = Counts(up, gw)
    r = s3.put_object(Bucket=b, Key="big", Body=body, **sse(KEY_A))
    assert r["SSECustomerAlgorithm"] == "AES256"
    ops = c.delta()[3]
    assert ops.get(("UploadPart", "200"), 0) == 3 and ops.get(("CreateMultipartUpload", "200")) == 1, ops
    g = s3.get_object(Bucket=b, Key="big", **sse(KEY_A))
    assert g["ETag"].strip('"').endswith("-3") and g["Body"].read() == body
    direct = direct_client(up)
    assert direct.get_object(Bucket=b, Key="big", Range="bytes=5242870-5242890",
                             **sse(KEY_A))["Body"].read() == body[5242870:5242891]
    with pytest.raises(botocore.exceptions.ClientError) as e:
        direct.get_object(Bucket=b, Key="big")
    assert err(e)[:2] == (400, "InvalidRequest")


@only_objdirect
def test_upstream_refusal_over_plain_http_is_the_gateways(pair):
    up, gw = pair(upstream_args=(), cache=False)
    s3 = objd.boto3_client(gw)
    b = bucket_name()
    s3.create_bucket(Bucket=b)
    c = Counts(up, gw)
    for _ in range(2):  # not taken for "no SSE-C": each one asks the upstream again
        with pytest.raises(botocore.exceptions.ClientError) as e:
            s3.put_object(Bucket=b, Key="k", Body=b"x", **sse(KEY_A))
        status, code, msg = err(e)
        assert (status, code) == (400, "InvalidRequest") and "secure connection" in msg, msg
        assert c.delta()[0] >= 1
    with pytest.raises(botocore.exceptions.ClientError):
        s3.head_object(Bucket=b, Key="k")


@only_objdirect
def test_not_implemented_upstream_is_remembered(pair, tmp_path):
    # An ObjDirect whose local backend sits behind its read-through cache keeps no SSE-C (501).
    up, gw = pair(upstream_args=("--sse-c-over-http", "--cache-dir", str(tmp_path / "upcache"),
                                    "--cache-bytes-max", str(64 * BLOCK)), cache=False)
    s3 = objd.boto3_client(gw)
    b = bucket_name()
    s3.create_bucket(Bucket=b)
    c = Counts(up, gw)
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.put_object(Bucket=b, Key="k", Body=b"x", **sse(KEY_A))
    assert err(e)[:2] == (501, "NotImplemented")
    assert c.delta()[0] >= 1
    # Remembered: 501 at once, no upstream request, for every SSE-C call.
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.put_object(Bucket=b, Key="k", Body=b"x", **sse(KEY_A))
    assert err(e)[:2] == (501, "NotImplemented")
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.create_multipart_upload(Bucket=b, Key="m", **sse(KEY_A))
    assert err(e)[:2] == (501, "NotImplemented")
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.get_object(Bucket=b, Key="k", **sse(KEY_A))
    assert err(e)[:2] == (501, "NotImplemented")
    # Nothing reached the upstream but the bucket check every request makes (HeadBucket).
    d_req, _, _, ops = c.delta()
    assert set(ops) <= {("HeadBucket", "200")} and d_req == sum(ops.values()), (d_req, ops)
    s3.put_object(Bucket=b, Key="plain", Body=b"y")  # plain requests are unaffected
    assert s3.get_object(Bucket=b, Key="plain")["Body"].read() == b"y"


@pytest.mark.skipif(EXTERNAL is None or EXTERNAL["kind"] != "moto",
                    reason="the moto upstream's behaviour (gateway_moto.integration_gateway_sse_c)")
def test_moto_upstream_keeps_no_sse_c(pair):
    """moto_server takes the SSE-C headers, stores plaintext and serves it without a key: the
    gateway sees no x-amz-server-side-encryption-customer-algorithm in its PutObject answer,
    removes the object again and answers 501; then it answers 501 without asking."""
    up, gw = pair(cache=True)
    s3 = objd.boto3_client(gw)
    b = bucket_name()
    s3.create_bucket(Bucket=b)
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.put_object(Bucket=b, Key="k", Body=MARKER, **sse(KEY_A))
    status, code, msg = err(e)
    assert (status, code) == (501, "NotImplemented") and "did not confirm" in msg, msg
    with pytest.raises(botocore.exceptions.ClientError) as e:
        direct_client(up).head_object(Bucket=b, Key="k")
    assert err(e)[0] == 404  # not left behind as plaintext
    c = Counts(up, gw)
    for call in (lambda: s3.put_object(Bucket=b, Key="k", Body=MARKER, **sse(KEY_A)),
                 lambda: s3.get_object(Bucket=b, Key="k", **sse(KEY_A)),
                 lambda: s3.create_multipart_upload(Bucket=b, Key="m", **sse(KEY_A))):
        with pytest.raises(botocore.exceptions.ClientError) as e:
            call()
        assert err(e)[:2] == (501, "NotImplemented")
    # At most the bucket check each request makes (HeadBucket; moto has no /metrics to tell).
    assert c.delta()[0] <= 3
    s3.put_object(Bucket=b, Key="plain", Body=b"y")
    assert s3.get_object(Bucket=b, Key="plain")["Body"].read() == b"y"
    s3.delete_object(Bucket=b, Key="plain")
    s3.delete_bucket(Bucket=b)
