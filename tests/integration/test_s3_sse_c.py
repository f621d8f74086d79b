"""SSE-C (server-side encryption with customer-provided keys, docs/sse-c.md) as AWS documents it:
PutObject, GetObject with Range and partNumber, HeadObject, CopyObject (CopySourceSSECustomerKey,
another key or none for the copy), multipart uploads (each part with the upload's key,
UploadPartCopy), GetObjectAttributes; the errors for a missing, wrong, malformed or superfluous
key; the refusal over plain HTTP without --sse-c-over-http; ciphertext on disk; tagging and
versions of encrypted objects; `aws s3 cp --sse-c`; the objdirect CLI's RDMA GET of an encrypted
object refused without the key; and the gateway passing SSE-C through. With boto3, raw signed HTTP
and Debian's AWS CLI v2. Runs on the local and the RADOS backend, and through the gateway in front
of an ObjDirect upstream with --sse-c-over-http (gateway.integration_s3_sse_c: the upstream
encrypts and checks the keys, the gateway gives its answers back; where the gateway cannot be
ObjDirect, the test says why). test_gateway_sse_c.py has the gateway's own cases (the cache, RDMA,
an upstream without SSE-C)."""

import base64
import hashlib
import os
import subprocess

import botocore.exceptions
import pytest

import objd

KEY_A = bytes(range(32))
KEY_B = bytes(range(100, 132))
MARKER = b"SSE-C plaintext marker 7f3a9c "


def key_headers(key, prefix="x-amz-server-side-encryption-customer-"):
    return {prefix + "algorithm": "AES256", prefix + "key": base64.b64encode(key).decode(),
            prefix + "key-MD5": base64.b64encode(hashlib.md5(key).digest()).decode()}


def sse(key):
    return {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": key}


def copy_sse(key):
    return {"CopySourceSSECustomerAlgorithm": "AES256", "CopySourceSSECustomerKey": key}


def err(excinfo):
    r = excinfo.value.response
    return r["ResponseMetadata"]["HTTPStatusCode"], r["Error"].get("Code"), r["Error"].get("Message", "")


# Through the gateway in front of radosgw (gateway_radosgw.integration_s3_sse_c): the upstream
# encrypts and answers, so where radosgw 16 answers otherwise than ObjDirect (and AWS) the test
# asserts radosgw's answer, which the gateway gives back unchanged (docs/scale-out.md):
RGW = objd.gateway_mode() and os.environ.get("OBJDIRECT_UPSTREAM_KIND") == "radosgw"
# radosgw answers a wrong key 400 (its key-MD5 mismatch), not 403 AccessDenied, and a request
# without the key of an SSE-C object 400 InvalidArgument ("...must provide a valid encryption
# algorithm."), not 400 InvalidRequest.
WRONG_KEY_STATUS = 400 if RGW else 403
MISSING_KEY = (400, "InvalidArgument") if RGW else (400, "InvalidRequest")


def backend():
    args = os.environ.get("OBJDIRECT_SERVER_ARGS", "").split()
    return args[args.index("--backend") + 1] if "--backend" in args[:-1] else "local"


@pytest.fixture(scope="module")
def ssrv(tmp_path_factory):
    """A server that accepts SSE-C over plain HTTP (loopback), on the entry's backend, with RDMA
    over libfabric tcp for the CLI case."""
    root = tmp_path_factory.mktemp("ssec")
    old = os.environ.get("FI_TCP_IFACE")
    os.environ["FI_TCP_IFACE"] = "lo"
    s = objd.Server(str(root / "data"), str(root / "server.log"),
                    extra_args=os.environ.get("OBJDIRECT_SERVER_ARGS", "").split() +
                    ["--sse-c-over-http", "--fabric", "libfabric:tcp"])
    s.start()
    yield s
    crashed = not s.alive()
    rc = s.stop()
    if old is None:
        os.environ.pop("FI_TCP_IFACE", None)
    assert not crashed and rc == 0, f"server rc={rc}; log:\n{s.log_tail()}"


@pytest.fixture(scope="module")
def es3(ssrv):
    return objd.boto3_client(ssrv)


_n = [0]


@pytest.fixture
def eb(es3):
    _n[0] += 1
    name = f"ssec-{os.getpid()}-{_n[0]}"
    es3.create_bucket(Bucket=name)
    yield name
    try:
        for v in es3.list_object_versions(Bucket=name).get("Versions", []):
            es3.delete_object(Bucket=name, Key=v["Key"], VersionId=v["VersionId"])
        for v in es3.list_object_versions(Bucket=name).get("DeleteMarkers", []):
            es3.delete_object(Bucket=name, Key=v["Key"], VersionId=v["VersionId"])
        for u in es3.list_multipart_uploads(Bucket=name).get("Uploads", []):
            es3.abort_multipart_upload(Bucket=name, Key=u["Key"], UploadId=u["UploadId"])
        es3.delete_bucket(Bucket=name)
    except botocore.exceptions.ClientError:
        pass


def test_put_get_head_and_ranges(es3, eb):
    body = MARKER + os.urandom(100_000) + MARKER
    r = es3.put_object(Bucket=eb, Key="k", Body=body, **sse(KEY_A))
    md5_a = base64.b64encode(hashlib.md5(KEY_A).digest()).decode()
    assert r["SSECustomerAlgorithm"] == "AES256" and r["SSECustomerKeyMD5"] == md5_a
    # The ETag is not the MD5 of the plaintext (as with AWS), but 32 hex digits. (radosgw's is the
    # MD5 of the plaintext.)
    etag = r["ETag"].strip('"')
    assert len(etag) == 32 and (etag == hashlib.md5(body).hexdigest()) == RGW
    g = es3.get_object(Bucket=eb, Key="k", **sse(KEY_A))
    assert g["Body"].read() == body
    assert g["SSECustomerAlgorithm"] == "AES256" and g["SSECustomerKeyMD5"] == md5_a
    assert g["ETag"] == r["ETag"]
    h = es3.head_object(Bucket=eb, Key="k", **sse(KEY_A))
    assert h["ContentLength"] == len(body) and h["SSECustomerKeyMD5"] == md5_a
    # Ranges starting and ending anywhere in a 16-byte block, suffix and open-ended ones.
    for first, last in [(0, 0), (1, 15), (15, 16), (16, 31), (17, 65_552), (99_999, len(body) - 1)]:
        g = es3.get_object(Bucket=eb, Key="k", Range=f"bytes={first}-{last}", **sse(KEY_A))
        assert g["Body"].read() == body[first:last + 1], (first, last)
    g = es3.get_object(Bucket=eb, Key="k", Range="bytes=-7", **sse(KEY_A))
    assert g["Body"].read() == body[-7:]
    g = es3.get_object(Bucket=eb, Key="k", Range="bytes=50000-", **sse(KEY_A))
    assert g["Body"].read() == body[50000:]
    # Conditionals use the stored ETag.
    g = es3.get_object(Bucket=eb, Key="k", IfMatch=r["ETag"], **sse(KEY_A))
    assert g["Body"].read() == body
    # Checksums are of the plaintext.
    c = es3.put_object(Bucket=eb, Key="c", Body=b"hello", ChecksumAlgorithm="SHA256", **sse(KEY_A))
    assert c["ChecksumSHA256"] == base64.b64encode(hashlib.sha256(b"hello").digest()).decode()
    # An empty object.
    es3.put_object(Bucket=eb, Key="empty", Body=b"", **sse(KEY_A))
    assert es3.get_object(Bucket=eb, Key="empty", **sse(KEY_A))["Body"].read() == b""


def test_missing_wrong_and_superfluous_keys(es3, eb, ssrv):
    es3.put_object(Bucket=eb, Key="k", Body=b"secret bytes", **sse(KEY_A))
    es3.put_object(Bucket=eb, Key="plain", Body=b"plain bytes")
    with pytest.raises(botocore.exceptions.ClientError) as e:
        es3.get_object(Bucket=eb, Key="k")
    status, code, msg = err(e)
    assert (status, code) == MISSING_KEY, err(e)
    assert RGW or "stored using a form of Server Side Encryption" in msg
    with pytest.raises(botocore.exceptions.ClientError) as e:
        es3.get_object(Bucket=eb, Key="k", **sse(KEY_B))
    assert err(e)[:2] == ((400, "InvalidArgument") if RGW else (403, "AccessDenied")), err(e)
    with pytest.raises(botocore.exceptions.ClientError) as e:
        es3.head_object(Bucket=eb, Key="k")
    assert err(e)[0] == 400
    with pytest.raises(botocore.exceptions.ClientError) as e:
        es3.head_object(Bucket=eb, Key="k", **sse(KEY_B))
    assert err(e)[0] == WRONG_KEY_STATUS
    if RGW:  # radosgw serves an unencrypted object to a request with a key
        assert es3.get_object(Bucket=eb, Key="plain", **sse(KEY_A))["Body"].read() == b"plain bytes"
    else:
        with pytest.raises(botocore.exceptions.ClientError) as e:
            es3.get_object(Bucket=eb, Key="plain", **sse(KEY_A))
        assert err(e)[:2] == (400, "InvalidRequest")
    # Malformed headers (raw signed HTTP: boto3 computes the MD5 itself).
    path = objd.opath(eb, "k")
    h = key_headers(KEY_A)
    h["x-amz-server-side-encryption-customer-key-MD5"] = base64.b64encode(b"0" * 16).decode()
    f = objd.assert_error(objd.request(ssrv, "GET", path, headers=h), 400, "InvalidArgument")
    assert f["Message"] == "The calculated MD5 hash of the key did not match the hash that was provided."
    h = key_headers(KEY_A)
    h["x-amz-server-side-encryption-customer-algorithm"] = "AES128"
    f = objd.assert_error(objd.request(ssrv, "PUT", objd.opath(eb, "x"), headers=h, body=b"x"),
                          400, "InvalidArgument")
    assert "valid encryption algorithm" in f["Message"]
    h = key_headers(KEY_A)
    h["x-amz-server-side-encryption-customer-key"] = base64.b64encode(b"short").decode()
    f = objd.assert_error(objd.request(ssrv, "PUT", objd.opath(eb, "x"), headers=h, body=b"x"),
                          400, "InvalidArgument")
    assert f["Message"] == "The secret key was invalid for the specified algorithm."
    h = key_headers(KEY_A)
    del h["x-amz-server-side-encryption-customer-key-MD5"]
    objd.assert_error(objd.request(ssrv, "PUT", objd.opath(eb, "x"), headers=h, body=b"x"),
                      400, "InvalidArgument")
    # Nothing was written by the refused PUTs.
    with pytest.raises(botocore.exceptions.ClientError):
        es3.head_object(Bucket=eb, Key="x")


def test_sse_s3_or_kms_with_sse_c_is_refused(es3, eb, ssrv):
    """SSE-C and x-amz-server-side-encryption (AES256 or aws:kms) or a KMS key id together: 400
    InvalidArgument with AWS's message, on PutObject, CreateMultipartUpload and CopyObject, and
    nothing written; SSE-S3 alone and SSE-C alone still work."""
    incompatible = ("Server Side Encryption with Customer provided key is incompatible with the "
                    "encryption method specified.")
    for extra in ({"x-amz-server-side-encryption": "AES256"},
                  {"x-amz-server-side-encryption": "aws:kms"},
                  {"x-amz-server-side-encryption-aws-kms-key-id": "some-key"}):
        h = dict(key_headers(KEY_A), **extra)
        f = objd.assert_error(objd.request(ssrv, "PUT", objd.opath(eb, "both"), headers=h, body=b"x"),
                              400, "InvalidArgument")
        assert f["Message"] == incompatible
        f = objd.assert_error(objd.request(ssrv, "POST", objd.opath(eb, "both"), query={"uploads": None},
                                           headers=h),
                              400, "InvalidArgument")
        assert f["Message"] == incompatible
    with pytest.raises(botocore.exceptions.ClientError) as e:
        es3.put_object(Bucket=eb, Key="both", Body=b"x", ServerSideEncryption="AES256", **sse(KEY_A))
    assert err(e) == (400, "InvalidArgument", incompatible)
    assert "Uploads" not in es3.list_multipart_uploads(Bucket=eb)
    with pytest.raises(botocore.exceptions.ClientError):
        es3.head_object(Bucket=eb, Key="both")
    # A copy: SSE-C for the destination with SSE-S3 is refused; the source's SSE-C key (copy-source
    # headers) with SSE-S3 for the destination is not a conflict.
    es3.put_object(Bucket=eb, Key="src", Body=b"source", **sse(KEY_A))
    with pytest.raises(botocore.exceptions.ClientError) as e:
        es3.copy_object(Bucket=eb, Key="dst", CopySource={"Bucket": eb, "Key": "src"},
                        ServerSideEncryption="AES256", **copy_sse(KEY_A), **sse(KEY_B))
    assert err(e) == (400, "InvalidArgument", incompatible)
    es3.copy_object(Bucket=eb, Key="dst", CopySource={"Bucket": eb, "Key": "src"},
                    ServerSideEncryption="AES256", **copy_sse(KEY_A))
    assert es3.get_object(Bucket=eb, Key="dst")["Body"].read() == b"source"
    es3.put_object(Bucket=eb, Key="s3only", Body=b"y", ServerSideEncryption="AES256")
    assert es3.get_object(Bucket=eb, Key="s3only")["Body"].read() == b"y"


def test_ciphertext_on_disk(es3, eb, ssrv):
    if backend() != "local":
        pytest.skip("reads the local backend's data files")
    body = MARKER * 4000
    es3.put_object(Bucket=eb, Key="disk", Body=body, **sse(KEY_A))
    es3.put_object(Bucket=eb, Key="disk-plain", Body=MARKER + b"unencrypted")
    found_plain = found_marker = False
    for path in objd.files_under(ssrv.data_dir):
        with open(path, "rb") as f:
            data = f.read()
        found_marker = found_marker or MARKER in data
        found_plain = found_plain or (MARKER + b"unencrypted") in data
        assert KEY_A not in data, f"the key is in {path}"
        assert MARKER * 2 not in data, f"plaintext of the SSE-C object in {path}"
    assert found_plain and found_marker  # the check can find plaintext where there is some
    assert es3.get_object(Bucket=eb, Key="disk", **sse(KEY_A))["Body"].read() == body


def test_copy_object(es3, eb):
    body = os.urandom(300_000)
    es3.put_object(Bucket=eb, Key="src", Body=body, **sse(KEY_A))
    src = {"Bucket": eb, "Key": "src"}
    # Without the source key: refused.
    with pytest.raises(botocore.exceptions.ClientError) as e:
        es3.copy_object(Bucket=eb, Key="d0", CopySource=src)
    assert err(e)[:2] == MISSING_KEY
    with pytest.raises(botocore.exceptions.ClientError) as e:
        es3.copy_object(Bucket=eb, Key="d0", CopySource=src, **copy_sse(KEY_B))
    assert err(e)[0] == WRONG_KEY_STATUS
    # To another key, to none, and from none to a key.
    r = es3.copy_object(Bucket=eb, Key="d1", CopySource=src, **copy_sse(KEY_A), **sse(KEY_B))
    assert r["SSECustomerKeyMD5"] == base64.b64encode(hashlib.md5(KEY_B).digest()).decode()
    assert es3.get_object(Bucket=eb, Key="d1", **sse(KEY_B))["Body"].read() == body
    with pytest.raises(botocore.exceptions.ClientError):
        es3.get_object(Bucket=eb, Key="d1", **sse(KEY_A))
    es3.copy_object(Bucket=eb, Key="d2", CopySource=src, **copy_sse(KEY_A))
    g = es3.get_object(Bucket=eb, Key="d2")
    assert g["Body"].read() == body and "SSECustomerAlgorithm" not in g
    es3.copy_object(Bucket=eb, Key="d3", CopySource={"Bucket": eb, "Key": "d2"}, **sse(KEY_A))
    assert es3.get_object(Bucket=eb, Key="d3", **sse(KEY_A))["Body"].read() == body
    # Onto itself: re-encrypted with a new key (allowed, as AWS allows changing encryption).
    es3.copy_object(Bucket=eb, Key="src", CopySource=src, **copy_sse(KEY_A), **sse(KEY_B))
    assert es3.get_object(Bucket=eb, Key="src", **sse(KEY_B))["Body"].read() == body


def test_multipart(es3, eb):
    parts = [os.urandom(5 << 20), os.urandom(100_003)]
    up = es3.create_multipart_upload(Bucket=eb, Key="mp", **sse(KEY_A))
    assert up["SSECustomerAlgorithm"] == "AES256"
    uid = up["UploadId"]
    with pytest.raises(botocore.exceptions.ClientError) as e:
        es3.upload_part(Bucket=eb, Key="mp", UploadId=uid, PartNumber=1, Body=b"x")
    status, code, msg = err(e)
    if RGW:  # radosgw: 400 InvalidArgument for a part without the upload's key
        assert (status, code) == (400, "InvalidArgument"), (status, code, msg)
    else:
        assert (status, code) == (400, "InvalidRequest") and "Subsequent part requests" in msg
    with pytest.raises(botocore.exceptions.ClientError) as e:
        es3.upload_part(Bucket=eb, Key="mp", UploadId=uid, PartNumber=1, Body=b"x", **sse(KEY_B))
    assert err(e)[:2] == (400, "InvalidArgument")
    done = []
    for i, p in enumerate(parts, 1):
        r = es3.upload_part(Bucket=eb, Key="mp", UploadId=uid, PartNumber=i, Body=p, **sse(KEY_A))
        assert r["SSECustomerAlgorithm"] == "AES256"
        done.append({"PartNumber": i, "ETag": r["ETag"]})
    # A third part copied from an SSE-C object (its own key) into this upload.
    es3.put_object(Bucket=eb, Key="psrc", Body=parts[1][:77_777], **sse(KEY_B))
    # (it replaces part 2 first with the same bytes as a copy, checking UploadPartCopy's path)
    r = es3.upload_part_copy(Bucket=eb, Key="mp", UploadId=uid, PartNumber=2,
                             CopySource={"Bucket": eb, "Key": "psrc"},
                             CopySourceRange="bytes=0-77776", **copy_sse(KEY_B), **sse(KEY_A))
    done[1]["ETag"] = r["CopyPartResult"]["ETag"]
    whole = parts[0] + parts[1][:77_777]
    c = es3.complete_multipart_upload(Bucket=eb, Key="mp", UploadId=uid,
                                      MultipartUpload={"Parts": done})
    assert c["ETag"].strip('"').endswith("-2")
    g = es3.get_object(Bucket=eb, Key="mp", **sse(KEY_A))
    assert g["Body"].read() == whole
    # Ranges across the part boundary, inside part 2, and partNumber GETs.
    b = len(parts[0])
    for first, last in [(b - 5, b + 20), (b - 1, b), (b + 3, len(whole) - 1), (12345, 12345)]:
        g = es3.get_object(Bucket=eb, Key="mp", Range=f"bytes={first}-{last}", **sse(KEY_A))
        assert g["Body"].read() == whole[first:last + 1], (first, last)
    if not objd.gateway_mode():  # the gateway does not learn an upstream object's part list
        g = es3.get_object(Bucket=eb, Key="mp", PartNumber=2, **sse(KEY_A))
        assert g["Body"].read() == parts[1][:77_777]
    with pytest.raises(botocore.exceptions.ClientError) as e:
        es3.get_object(Bucket=eb, Key="mp")
    assert err(e)[0] == 400
    # A copy of the multipart object is a single-part SSE-C object.
    es3.copy_object(Bucket=eb, Key="mpc", CopySource={"Bucket": eb, "Key": "mp"},
                    **copy_sse(KEY_A), **sse(KEY_B))
    assert es3.get_object(Bucket=eb, Key="mpc", Range="bytes=5242870-5242890",
                          **sse(KEY_B))["Body"].read() == whole[5242870:5242891]


def test_attributes_tagging_and_versions(es3, eb, ssrv):
    es3.put_object(Bucket=eb, Key="k", Body=b"attr bytes", **sse(KEY_A))
    with pytest.raises(botocore.exceptions.ClientError) as e:
        es3.get_object_attributes(Bucket=eb, Key="k", ObjectAttributes=["ObjectSize"])
    assert err(e)[:2] == MISSING_KEY
    # (raw signed HTTP: this botocore does not encode the key of GetObjectAttributes)
    h = dict(key_headers(KEY_A), **{"x-amz-object-attributes": "ObjectSize,ETag"})
    r = objd.request(ssrv, "GET", objd.opath(eb, "k"), query={"attributes": ""}, headers=h)
    assert r.status == 200, r
    assert r.xml().find(objd.S3_NS + "ObjectSize").text == str(len(b"attr bytes"))
    # Tagging needs no key (as with AWS) and keeps the object readable.
    es3.put_object_tagging(Bucket=eb, Key="k", Tagging={"TagSet": [{"Key": "t", "Value": "1"}]})
    assert es3.get_object_tagging(Bucket=eb, Key="k")["TagSet"] == [{"Key": "t", "Value": "1"}]
    assert es3.get_object(Bucket=eb, Key="k", **sse(KEY_A))["Body"].read() == b"attr bytes"
    # Versions, each with its own key.
    es3.put_bucket_versioning(Bucket=eb, VersioningConfiguration={"Status": "Enabled"})
    v1 = es3.put_object(Bucket=eb, Key="v", Body=b"one", **sse(KEY_A))["VersionId"]
    v2 = es3.put_object(Bucket=eb, Key="v", Body=b"two", **sse(KEY_B))["VersionId"]
    assert es3.get_object(Bucket=eb, Key="v", VersionId=v1, **sse(KEY_A))["Body"].read() == b"one"
    assert es3.get_object(Bucket=eb, Key="v", VersionId=v2, **sse(KEY_B))["Body"].read() == b"two"
    with pytest.raises(botocore.exceptions.ClientError) as e:
        es3.get_object(Bucket=eb, Key="v", VersionId=v1, **sse(KEY_B))
    assert err(e)[0] == WRONG_KEY_STATUS


def test_refused_over_plain_http_without_the_flag(s3, bucket):
    """The suite's default server has no --sse-c-over-http: AWS's refusal, nothing stored."""
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.put_object(Bucket=bucket, Key="k", Body=b"x", **sse(KEY_A))
    status, code, msg = err(e)
    assert (status, code) == (400, "InvalidRequest")
    assert msg == ("Requests specifying Server Side Encryption with Customer provided keys must be "
                   "made over a secure connection.")
    with pytest.raises(botocore.exceptions.ClientError):
        s3.head_object(Bucket=bucket, Key="k")
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.create_multipart_upload(Bucket=bucket, Key="k", **sse(KEY_A))
    assert err(e)[:2] == (400, "InvalidRequest")


def aws_env(srv, tmp_path):
    env = dict(os.environ, AWS_ACCESS_KEY_ID=objd.ACCESS_KEY, AWS_SECRET_ACCESS_KEY=objd.SECRET_KEY,
               AWS_DEFAULT_REGION=objd.REGION, AWS_CONFIG_FILE=str(tmp_path / "none"),
               AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"))
    env.pop("AWS_PROFILE", None)
    env.pop("AWS_CA_BUNDLE", None)
    return env


def test_awscli_s3_cp_sse_c(ssrv, es3, eb, tmp_path):
    aws = objd.which("aws")
    if not aws:
        pytest.skip("aws CLI not installed")
    if backend() != "local":
        pytest.skip("the CLI's requests are the boto3 ones above; once, in the local entry (5 s)")
    keyfile = tmp_path / "key.bin"
    keyfile.write_bytes(KEY_A)
    src = tmp_path / "in.bin"
    src.write_bytes(os.urandom(1 << 20))
    env = aws_env(ssrv, tmp_path)
    base = [aws, "--endpoint-url", ssrv.endpoint, "s3", "cp", "--sse-c", "AES256",
            "--sse-c-key", f"fileb://{keyfile}"]
    p = subprocess.run(base + [str(src), f"s3://{eb}/cli.bin"], env=env, capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr.decode()
    assert es3.get_object(Bucket=eb, Key="cli.bin", **sse(KEY_A))["Body"].read() == src.read_bytes()
    out = tmp_path / "out.bin"
    p = subprocess.run(base + [f"s3://{eb}/cli.bin", str(out)], env=env, capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr.decode()
    assert out.read_bytes() == src.read_bytes()


def test_objdirect_cli_sse_c(ssrv, es3, eb, tmp_path):
    """`objdirect cp/stat/cat --sse-c AES256 --sse-c-key KEY|fileb://PATH` and the copy-source
    pair, as `aws s3 cp` spells them: uploads (one PutObject, a multipart upload, stdin) that
    boto3 reads back with the key, downloads over RDMA (libfabric tcp) and HTTP, S3 -> S3 copies
    re-encrypting under another key, and the refusals of a wrong key or a malformed option."""
    exe = os.path.join(os.environ["OBJDIRECT_BIN_DIR"], "objdirect")
    env = objd.cli_env(ssrv)
    keyfile = tmp_path / "key.bin"
    keyfile.write_bytes(KEY_A)
    text_key = "0123456789abcdef0123456789ABCDEF"  # 32 characters: the key as given
    a = ["--sse-c", "AES256", "--sse-c-key", f"fileb://{keyfile}"]
    b = ["--sse-c", "AES256", "--sse-c-key", text_key]

    def run(*args, stdin=None):
        return subprocess.run([exe, *args], env=env, capture_output=True, timeout=120, input=stdin)

    small = tmp_path / "small.bin"
    small.write_bytes(MARKER * 100)
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom((11 << 20) + 7))
    p = run("cp", *a, str(small), f"s3://{eb}/small")
    assert p.returncode == 0, p.stderr.decode()
    p = run("cp", *a, "--part-size", "5MiB", str(big), f"s3://{eb}/big")
    assert p.returncode == 0, p.stderr.decode()
    assert es3.get_object(Bucket=eb, Key="small", **sse(KEY_A))["Body"].read() == small.read_bytes()
    got = es3.get_object(Bucket=eb, Key="big", **sse(KEY_A))
    assert got["ETag"].strip('"').endswith("-3") and got["Body"].read() == big.read_bytes()
    p = run("cp", *b, "-", f"s3://{eb}/stdin", stdin=MARKER * 3)
    assert p.returncode == 0, p.stderr.decode()
    assert es3.get_object(Bucket=eb, Key="stdin", **sse(text_key.encode()))["Body"].read() == MARKER * 3

    # Downloads: over RDMA with the key, in 5 MiB ranged parts.
    p = run("cp", *a, "--json", "--fabric", "libfabric:tcp", "--rdma", "required", "--part-size",
            "5MiB", f"s3://{eb}/big", str(tmp_path / "big.out"))
    assert p.returncode == 0, p.stderr.decode()
    assert b'"rdma"' in p.stdout and (tmp_path / "big.out").read_bytes() == big.read_bytes()
    p = run("cat", *a, f"s3://{eb}/small")
    assert p.returncode == 0 and p.stdout == small.read_bytes(), p.stderr.decode()
    p = run("stat", *a, "--json", f"s3://{eb}/big")
    assert p.returncode == 0 and b'"size":%d' % big.stat().st_size in p.stdout, p.stderr.decode()
    # A wrong key (403) and none (400) fail and write nothing.
    for args in (b, []):
        p = run("cp", *args, "--fabric", "libfabric:tcp", f"s3://{eb}/small", str(tmp_path / "no"))
        assert p.returncode != 0 and not (tmp_path / "no").exists(), p.stdout

    # S3 -> S3: the source's key in the copy-source pair, the copy under another key.
    p = run("cp", "--sse-c-copy-source", "AES256", "--sse-c-copy-source-key", f"fileb://{keyfile}",
            *b, f"s3://{eb}/small", f"s3://{eb}/copied")
    assert p.returncode == 0, p.stderr.decode()
    assert es3.get_object(Bucket=eb, Key="copied", **sse(text_key.encode()))["Body"].read() == \
        small.read_bytes()
    p = run("cp", *b, f"s3://{eb}/small", f"s3://{eb}/copied2")  # no source key
    assert p.returncode != 0

    # Malformed options: exit 2 (bad arguments), naming the option, never the key.
    short = tmp_path / "short.bin"
    short.write_bytes(b"x" * 31)
    for args, words in ((["--sse-c", "AES256"], "--sse-c-key"),
                        (["--sse-c-key", text_key], "--sse-c"),
                        (["--sse-c", "AES128", "--sse-c-key", text_key], "--sse-c"),
                        (["--sse-c", "AES256", "--sse-c-key", "tooshort"], "32 bytes"),
                        (["--sse-c", "AES256", "--sse-c-key", f"fileb://{short}"], "31 bytes")):
        p = run("cp", *args, str(small), f"s3://{eb}/bad")
        assert p.returncode == 2, (args, p.stderr.decode())
        assert words in p.stderr.decode() and text_key not in p.stderr.decode(), p.stderr.decode()


def test_rdma_get_without_key_moves_nothing(ssrv, es3, eb, tmp_path):
    """The objdirect CLI's RDMA GET of an SSE-C object without the key: refused before any byte
    moves, as a plain GET is; an unencrypted object beside it comes by RDMA."""
    body = MARKER * 40000
    es3.put_object(Bucket=eb, Key="r", Body=body, **sse(KEY_A))
    es3.put_object(Bucket=eb, Key="p", Body=body)
    env = dict(os.environ, AWS_ENDPOINT_URL=ssrv.endpoint, AWS_ACCESS_KEY_ID=objd.ACCESS_KEY,
               AWS_SECRET_ACCESS_KEY=objd.SECRET_KEY, AWS_REGION=objd.REGION, FI_TCP_IFACE="lo")
    env.pop("AWS_PROFILE", None)
    env.pop("AWS_CA_BUNDLE", None)
    exe = os.path.join(os.environ["OBJDIRECT_BIN_DIR"], "objdirect")
    ok = subprocess.run([exe, "cp", "--json", "--fabric", "libfabric:tcp", f"s3://{eb}/p", str(tmp_path / "p")],
                        env=env, capture_output=True, timeout=120)
    assert ok.returncode == 0, ok.stderr.decode()
    assert b'"rdma"' in ok.stdout and (tmp_path / "p").read_bytes() == body
    p = subprocess.run([exe, "cp", "--fabric", "libfabric:tcp", f"s3://{eb}/r", str(tmp_path / "r")],
                       env=env, capture_output=True, timeout=120)
    assert p.returncode != 0
    assert not (tmp_path / "r").exists() or MARKER not in (tmp_path / "r").read_bytes()


def test_gateway_gives_back_the_upstreams_refusal(tmp_path, monkeypatch):
    """A gateway (with --sse-c-over-http) in front of an ObjDirect without it: the SSE-C request
    goes upstream and its refusal (400 InvalidRequest, over plain HTTP) is the gateway's answer,
    nothing stored; plain requests work. (The pass-through itself: gateway.integration_s3_sse_c,
    and test_gateway_sse_c.py.)"""
    if backend() != "local":
        pytest.skip("runs its own pair of servers; once, in the local entry")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", objd.ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", objd.SECRET_KEY)
    for k in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE"):
        monkeypatch.delenv(k, raising=False)
    up = objd.Server(str(tmp_path / "up"), str(tmp_path / "up.log"), extra_args=["--fabric", "none"])
    up.start()
    gw = objd.Server(str(tmp_path / "gw"), str(tmp_path / "gw.log"),
                     extra_args=["--backend", "s3", "--upstream", up.endpoint, "--fabric", "none",
                                 "--sse-c-over-http"])
    try:
        gw.start()
        s3 = objd.boto3_client(gw)
        s3.create_bucket(Bucket="gwsse")
        with pytest.raises(botocore.exceptions.ClientError) as e:
            s3.put_object(Bucket="gwsse", Key="k", Body=b"x", **sse(KEY_A))
        status, code, msg = err(e)
        assert (status, code) == (400, "InvalidRequest") and "secure connection" in msg, msg
        with pytest.raises(botocore.exceptions.ClientError):
            s3.head_object(Bucket="gwsse", Key="k")
        s3.put_object(Bucket="gwsse", Key="k", Body=b"x")
        s3.delete_object(Bucket="gwsse", Key="k")
        s3.delete_bucket(Bucket="gwsse")
    finally:
        gw.stop()
        up.stop()


def test_cli_big_put_refused_on_its_header_reports_the_s3_error(server, bucket, tmp_path):
    """A 32 MiB single PutObject with a key, over plain HTTP to the default server (no
    --sse-c-over-http): refused on its header before the body is read; the CLI reports the
    server's 400 InvalidRequest, not a broken pipe, and stores nothing."""
    exe = os.path.join(os.environ["OBJDIRECT_BIN_DIR"], "objdirect")
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(32 << 20))
    p = subprocess.run([exe, "cp", "--sse-c", "AES256", "--sse-c-key", "0123456789abcdef" * 2,
                        "--fabric", "none", "--multipart-threshold", "64MiB", str(big),
                        f"s3://{bucket}/k"], env=objd.cli_env(server), capture_output=True, timeout=120)
    err_text = p.stderr.decode()
    assert p.returncode != 0
    assert "secure connection" in err_text and "Broken pipe" not in err_text, err_text
    assert objd.request(server, "HEAD", objd.opath(bucket, "k")).status == 404
