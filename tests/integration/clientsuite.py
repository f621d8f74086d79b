"""One real S3 client against objdirect-server, step by step.

A test file per client subclasses ClientSuite and supplies a driver (an object with the methods
below, each running the real client as a subprocess). The steps run in order on one bucket; each
step checks its effect with an independent oracle (Debian boto3, in process), so a client that
claims success without doing the work still fails. A step the client cannot express (no presign
for PUT, no conditional PUT) is skipped with the reason; everything else must pass.

Driver methods: create_bucket(b), put_file(src, b, k) [multipart, PART_MB parts],
get_file(b, k, dst), list_sizes(b) -> {key: size}, get_range(b, k, first, last, dst) -> bytes,
presign_get(b, k) -> url, presign_put(b, k) -> url, put_if_none_match(src, b, k) -> (ok, text),
delete_many(b, keys) [all keys under one prefix 'multi/'], copy(b, src_key, dst_key),
delete_object(b, k), delete_bucket(b).
"""

import hashlib
import os
import subprocess
import urllib.error
import urllib.request

import pytest

import objd

SIZE_MB = int(os.environ.get("OBJDIRECT_ITEST_SIZE_MB", "100"))
PART_MB = 8
SIZE = SIZE_MB << 20
PARTS = (SIZE + (PART_MB << 20) - 1) // (PART_MB << 20)
RANGE_FIRST = SIZE // 2 + 12345
RANGE_LAST = RANGE_FIRST + 1_000_000 - 1
MULTI_KEYS = ["multi/0", "multi/7", "multi/1e3", "multi/a b", "multi/ü/x"]


class NotSupported(Exception):
    """The client has no way to express this operation."""


def run(cmd, env=None, timeout_s=300, cwd=None, check=True):
    """Runs a client command; raises AssertionError with its output when it fails."""
    p = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout_s)
    out, err = p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")
    if check and p.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, cmd))[:300]} -> rc {p.returncode}\n"
                             f"stdout: {out[-2000:]}\nstderr: {err[-3000:]}")
    return p.returncode, out, err


def client_env(extra=None):
    env = dict(os.environ)
    for k in ("AWS_CA_BUNDLE", "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN",
              "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        env.pop(k, None)
    env.update(extra or {})
    return env


class ClientSuite:
    """Subclasses set make_driver(self, server, workdir) and NAME."""

    NAME = "client"

    def make_driver(self, server, workdir):
        raise NotImplementedError

    @pytest.fixture(scope="class")
    def ctx(self, server, s3, source_file, tmp_path_factory):
        work = tmp_path_factory.mktemp("work-" + self.NAME)
        drv = self.make_driver(server, str(work))
        return {"drv": drv, "s3": s3, "server": server, "src": source_file, "work": str(work),
                "bucket": f"cl-{self.NAME.lower()}-{os.getpid()}"}

    # ---------------------------------------------------------------------------------------------
    def test_01_create_bucket(self, ctx):
        ctx["drv"].create_bucket(ctx["bucket"])
        ctx["s3"].head_bucket(Bucket=ctx["bucket"])

    def test_02_put_multipart(self, ctx):
        ctx["drv"].put_file(ctx["src"]["path"], ctx["bucket"], "big.bin")
        h = ctx["s3"].head_object(Bucket=ctx["bucket"], Key="big.bin")
        assert h["ContentLength"] == SIZE
        assert h["ETag"].strip('"').endswith(f"-{PARTS}"), f"ETag {h['ETag']} is not a {PARTS}-part ETag"

    def test_03_get_sha256(self, ctx):
        dst = os.path.join(ctx["work"], "dl.bin")
        ctx["drv"].get_file(ctx["bucket"], "big.bin", dst)
        assert os.path.getsize(dst) == SIZE
        assert objd.sha256_file(dst) == ctx["src"]["sha"]
        os.remove(dst)

    def test_04_list(self, ctx):
        sizes = ctx["drv"].list_sizes(ctx["bucket"])
        assert sizes.get("big.bin") == SIZE, sizes

    def test_05_range_get(self, ctx):
        dst = os.path.join(ctx["work"], "range.bin")
        data = ctx["drv"].get_range(ctx["bucket"], "big.bin", RANGE_FIRST, RANGE_LAST, dst)
        assert len(data) == RANGE_LAST - RANGE_FIRST + 1
        assert hashlib.sha256(data).hexdigest() == ctx["src"]["range_sha"]

    def test_06_presigned_get(self, ctx):
        body = os.urandom(300_000)
        ctx["s3"].put_object(Bucket=ctx["bucket"], Key="small/presigned get.bin", Body=body)
        try:
            url = ctx["drv"].presign_get(ctx["bucket"], "small/presigned get.bin")
        except NotSupported as e:
            pytest.skip(str(e))
        assert "X-Amz-Signature=" in url, url
        with urllib.request.urlopen(url, timeout=30) as r:
            got = r.read()
        assert got == body
        # tampering with the signed URL must be refused
        i = url.index("X-Amz-Signature=") + len("X-Amz-Signature=")
        bad = url[:i] + ("0" if url[i] != "0" else "1") + url[i + 1:]
        with pytest.raises(urllib.error.HTTPError) as ei:
            urllib.request.urlopen(bad, timeout=30)
        assert ei.value.code == 403

    def test_07_presigned_put(self, ctx):
        try:
            url = ctx["drv"].presign_put(ctx["bucket"], "small/presigned-put.bin")
        except NotSupported as e:
            pytest.skip(str(e))
        body = os.urandom(1 << 20)
        if os.environ.get("OBJDIRECT_UPSTREAM_KIND") == "moto":
            # urllib sends Content-Type: application/x-www-form-urlencoded, which the gateway
            # forwards; moto_server 5.2 (werkzeug) then parses the body as a form and stores
            # other bytes (docs/scale-out.md, "Verified upstreams").
            pytest.skip("moto_server mangles form-urlencoded PUT bodies")
        req = urllib.request.Request(url, data=body, method="PUT")
        with urllib.request.urlopen(req, timeout=30) as r:
            assert r.status == 200
        got = ctx["s3"].get_object(Bucket=ctx["bucket"], Key="small/presigned-put.bin")["Body"].read()
        assert got == body

    def test_08_conditional_put_if_none_match(self, ctx):
        first = os.path.join(ctx["work"], "cond1.txt")
        second = os.path.join(ctx["work"], "cond2.txt")
        with open(first, "wb") as f:
            f.write(b"first version\n")
        with open(second, "wb") as f:
            f.write(b"second version, must not land\n")
        try:
            ok, text = ctx["drv"].put_if_none_match(first, ctx["bucket"], "small/cond.txt")
        except NotSupported as e:
            pytest.skip(str(e))
        assert ok, f"first If-None-Match: * PUT failed: {text}"
        ok, text = ctx["drv"].put_if_none_match(second, ctx["bucket"], "small/cond.txt")
        assert not ok, "second If-None-Match: * PUT succeeded"
        assert "412" in text or "PreconditionFailed" in text, text[-1500:]
        got = ctx["s3"].get_object(Bucket=ctx["bucket"], Key="small/cond.txt")["Body"].read()
        assert got == b"first version\n"

    def test_09_delete_objects(self, ctx):
        for k in MULTI_KEYS:
            ctx["s3"].put_object(Bucket=ctx["bucket"], Key=k, Body=k.encode())
        ctx["s3"].put_object(Bucket=ctx["bucket"], Key="keep/0", Body=b"keep")
        ctx["drv"].delete_many(ctx["bucket"], MULTI_KEYS)
        left = ctx["s3"].list_objects_v2(Bucket=ctx["bucket"], Prefix="multi/").get("KeyCount")
        assert left == 0
        ctx["s3"].head_object(Bucket=ctx["bucket"], Key="keep/0")

    def test_10_copy(self, ctx):
        ctx["drv"].copy(ctx["bucket"], "big.bin", "big-copy.bin")
        r = ctx["s3"].get_object(Bucket=ctx["bucket"], Key="big-copy.bin")
        h = hashlib.sha256()
        for c in iter(lambda: r["Body"].read(1 << 20), b""):
            h.update(c)
        assert h.hexdigest() == ctx["src"]["sha"]

    def test_11_delete_object(self, ctx):
        ctx["drv"].delete_object(ctx["bucket"], "big.bin")
        with pytest.raises(Exception) as ei:
            ctx["s3"].head_object(Bucket=ctx["bucket"], Key="big.bin")
        assert "404" in str(ei.value)

    def test_12_delete_bucket(self, ctx):
        b = ctx["bucket"]
        for page in ctx["s3"].get_paginator("list_objects_v2").paginate(Bucket=b):
            for o in page.get("Contents", []):
                ctx["s3"].delete_object(Bucket=b, Key=o["Key"])
        ctx["drv"].delete_bucket(b)
        with pytest.raises(Exception) as ei:
            ctx["s3"].head_bucket(Bucket=b)
        assert "404" in str(ei.value)
