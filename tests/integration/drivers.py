"""Drivers that run each real S3 client as a subprocess (see clientsuite.py for the contract).

Client lookup (a client that is absent fails its suite, except the pyenv ones, which skip when the
pyenv python itself is absent):
  awscli2   /usr/bin/aws (Debian awscli 2.9)
  awscli1   the pyenv 'aws' (awscli 1.x on botocore 1.4x): $OBJDIRECT_AWSCLI1, the pyenv shim, or
            ~/.pyenv/versions/*/bin/aws reporting aws-cli/1.
  boto3     /usr/bin/python3 (Debian boto3 1.26)
  boto3new  the pyenv python3 with boto3 >= 1.36: $OBJDIRECT_PYENV_PYTHON, the shim or
            ~/.pyenv/versions/*/bin/python3
  rclone    rclone on PATH (Debian 1.60)
  s3cmd     s3cmd on PATH (Debian 2.3)
  node      node + @aws-sdk/client-s3 in $OBJDIRECT_NODE_MODULES or <repo>/build/node/node_modules
"""

import glob
import json
import os
import shutil
import subprocess

import objd
from clientsuite import PART_MB, NotSupported, client_env, run

HERE = os.path.dirname(os.path.abspath(__file__))


def _version_of(cmd):
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
        return p.stdout.decode(errors="replace").strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def pyenv_roots():
    roots = []
    if os.environ.get("PYENV_ROOT"):
        roots.append(os.environ["PYENV_ROOT"])
    roots += [os.path.expanduser("~/.pyenv"), "/root/.pyenv"]
    return [r for i, r in enumerate(roots) if os.path.isdir(r) and r not in roots[:i]]


def find_pyenv_python():
    """A non-Debian python3 whose boto3 is >= 1.36 (2025 checksum defaults), or None."""
    cands = [os.environ.get("OBJDIRECT_PYENV_PYTHON")]
    for r in pyenv_roots():
        cands.append(os.path.join(r, "shims", "python3"))
        cands += sorted(glob.glob(os.path.join(r, "versions", "*", "bin", "python3")), reverse=True)
    for c in cands:
        if not c or not os.access(c, os.X_OK):
            continue
        v = _version_of([c, "-c", "import boto3; print(boto3.__version__)"])
        try:
            major, minor = (int(x) for x in v.splitlines()[-1].split(".")[:2])
        except (ValueError, IndexError):
            continue
        if (major, minor) >= (1, 36):
            return c
    return None


def find_awscli1():
    cands = [os.environ.get("OBJDIRECT_AWSCLI1")]
    for r in pyenv_roots():
        cands.append(os.path.join(r, "shims", "aws"))
        cands += sorted(glob.glob(os.path.join(r, "versions", "*", "bin", "aws")), reverse=True)
    w = shutil.which("aws")
    if w and os.path.realpath(w) != "/usr/bin/aws":
        cands.append(w)
    for c in cands:
        if c and os.access(c, os.X_OK) and _version_of([c, "--version"]).startswith("aws-cli/1."):
            return c
    return None


def pyenv_present():
    return any(glob.glob(os.path.join(r, "versions", "*", "bin", "python3")) for r in pyenv_roots())


# ------------------------------------------------------------------------------------------------
class AwsCli:
    def __init__(self, server, workdir, aws):
        assert aws and os.access(aws, os.X_OK), f"aws CLI not found ({aws})"
        self.aws = aws
        self.version = _version_of([aws, "--version"])
        self.v1 = self.version.startswith("aws-cli/1.")
        cfg = os.path.join(workdir, "aws.cfg")
        with open(cfg, "w") as f:
            f.write("[default]\nregion = us-east-1\ns3 =\n  addressing_style = path\n  signature_version = s3v4\n"
                    f"  multipart_threshold = {PART_MB}MB\n  multipart_chunksize = {PART_MB}MB\n"
                    "  max_concurrent_requests = 4\n")
        self.env = client_env({"AWS_ACCESS_KEY_ID": objd.ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": objd.SECRET_KEY,
                               "AWS_DEFAULT_REGION": "us-east-1", "AWS_CONFIG_FILE": cfg,
                               "AWS_SHARED_CREDENTIALS_FILE": "/dev/null", "AWS_PAGER": "",
                               "AWS_EC2_METADATA_DISABLED": "true", "AWS_MAX_ATTEMPTS": "1",
                               "AWS_RETRY_MODE": "standard"})
        self.base = [aws, "--endpoint-url", server.endpoint]

    def _run(self, *args, check=True):
        return run(self.base + list(args), env=self.env, check=check)

    def create_bucket(self, b):
        self._run("s3api", "create-bucket", "--bucket", b)

    def put_file(self, src, b, k):
        self._run("s3", "cp", "--only-show-errors", src, f"s3://{b}/{k}")

    def get_file(self, b, k, dst):
        self._run("s3", "cp", "--only-show-errors", f"s3://{b}/{k}", dst)

    def list_sizes(self, b):
        _, out, _ = self._run("s3api", "list-objects-v2", "--bucket", b, "--output", "json")
        return {o["Key"]: o["Size"] for o in json.loads(out or "{}").get("Contents", [])}

    def get_range(self, b, k, first, last, dst):
        self._run("s3api", "get-object", "--bucket", b, "--key", k, "--range", f"bytes={first}-{last}", dst)
        with open(dst, "rb") as f:
            return f.read()

    def presign_get(self, b, k):
        _, out, _ = self._run("s3", "presign", f"s3://{b}/{k}", "--expires-in", "600")
        return out.strip()

    def presign_put(self, b, k):
        raise NotSupported(f"{self.version.split()[0]}: 'aws s3 presign' signs GET only")

    def put_if_none_match(self, src, b, k):
        if not self.v1:
            raise NotSupported(f"{self.version.split()[0]}: put-object has no --if-none-match")
        rc, out, err = self._run("s3api", "put-object", "--bucket", b, "--key", k, "--body", src,
                                 "--if-none-match", "*", check=False)
        return rc == 0, out + err

    def delete_many(self, b, keys):
        spec = json.dumps({"Objects": [{"Key": k} for k in keys], "Quiet": False})
        _, out, _ = self._run("s3api", "delete-objects", "--bucket", b, "--delete", spec, "--output", "json")
        r = json.loads(out)
        assert not r.get("Errors"), r
        assert sorted(d["Key"] for d in r.get("Deleted", [])) == sorted(keys), r

    def copy(self, b, src_key, dst_key):
        self._run("s3", "cp", "--only-show-errors", f"s3://{b}/{src_key}", f"s3://{b}/{dst_key}")

    def delete_object(self, b, k):
        self._run("s3", "rm", "--only-show-errors", f"s3://{b}/{k}")

    def delete_bucket(self, b):
        self._run("s3api", "delete-bucket", "--bucket", b)


# ------------------------------------------------------------------------------------------------
class ScriptDriver:
    """A driver script that speaks the subcommands of boto3_driver.py and node_driver.cjs (one
    process per call: create-bucket, upload, download, list, range, presign, put-if-none-match,
    delete-objects, copy, delete, delete-bucket). Subclasses set `base` (the command line before
    the subcommand), `env`, and PRESIGN, the script's names for a presigned GET and PUT."""

    PRESIGN: tuple
    base: list
    env: dict

    def _run(self, *args, check=True):
        return run(self.base + list(args), env=self.env, check=check)

    def create_bucket(self, b):
        self._run("create-bucket", b)

    def put_file(self, src, b, k):
        self._run("upload", src, b, k)

    def get_file(self, b, k, dst):
        self._run("download", b, k, dst)

    def list_sizes(self, b):
        return json.loads(self._run("list", b)[1])

    def get_range(self, b, k, first, last, dst):
        self._run("range", b, k, str(first), str(last), dst)
        with open(dst, "rb") as f:
            return f.read()

    def presign_get(self, b, k):
        return self._run("presign", self.PRESIGN[0], b, k)[1].strip()

    def presign_put(self, b, k):
        return self._run("presign", self.PRESIGN[1], b, k)[1].strip()

    def put_if_none_match(self, src, b, k):
        rc, out, err = self._run("put-if-none-match", src, b, k, check=False)
        return rc == 0, out + err

    def delete_many(self, b, keys):
        self._run("delete-objects", b, *keys)

    def copy(self, b, src_key, dst_key):
        self._run("copy", b, src_key, dst_key)

    def delete_object(self, b, k):
        self._run("delete", b, k)

    def delete_bucket(self, b):
        self._run("delete-bucket", b)


# ------------------------------------------------------------------------------------------------
class Boto3Script(ScriptDriver):
    """boto3_driver.py under a given interpreter (Debian boto3 1.26 or pyenv boto3 1.4x)."""

    PRESIGN = ("get_object", "put_object")

    def __init__(self, server, workdir, python):
        assert python and os.access(python, os.X_OK), f"python not found ({python})"
        self.base = [python, os.path.join(HERE, "boto3_driver.py"), server.endpoint, objd.ACCESS_KEY,
                     objd.SECRET_KEY, str(PART_MB)]
        self.env = client_env()


# ------------------------------------------------------------------------------------------------
class Rclone:
    def __init__(self, server, workdir):
        exe = shutil.which("rclone")
        assert exe, "rclone is not installed (scripts/bootstrap installs it)"
        self.env = client_env({
            "RCLONE_CONFIG": "/dev/null", "RCLONE_CONFIG_IT_TYPE": "s3", "RCLONE_CONFIG_IT_PROVIDER": "Other",
            "RCLONE_CONFIG_IT_ENDPOINT": server.endpoint, "RCLONE_CONFIG_IT_ACCESS_KEY_ID": objd.ACCESS_KEY,
            "RCLONE_CONFIG_IT_SECRET_ACCESS_KEY": objd.SECRET_KEY, "RCLONE_CONFIG_IT_FORCE_PATH_STYLE": "true",
            "RCLONE_CONFIG_IT_REGION": "us-east-1"})
        self.base = [exe, "--retries", "1", "--low-level-retries", "1", "--s3-upload-cutoff", f"{PART_MB}M",
                     "--s3-chunk-size", f"{PART_MB}M", "--s3-upload-concurrency", "4"]

    def _run(self, *args, check=True):
        return run(self.base + list(args), env=self.env, check=check)

    def create_bucket(self, b):
        self._run("mkdir", f"it:{b}")

    def put_file(self, src, b, k):
        self._run("copyto", src, f"it:{b}/{k}")

    def get_file(self, b, k, dst):
        self._run("copyto", f"it:{b}/{k}", dst)

    def list_sizes(self, b):
        _, out, _ = self._run("lsjson", "-R", f"it:{b}")
        return {o["Path"]: o["Size"] for o in json.loads(out) if not o.get("IsDir")}

    def get_range(self, b, k, first, last, dst):
        p = subprocess.run(self.base + ["cat", "--offset", str(first), "--count", str(last - first + 1),
                                        f"it:{b}/{k}"], env=self.env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=300)
        assert p.returncode == 0, p.stderr.decode(errors="replace")[-2000:]
        return p.stdout

    def presign_get(self, b, k):
        _, out, _ = self._run("link", "--expire", "1h", f"it:{b}/{k}")
        return out.strip().splitlines()[-1]

    def presign_put(self, b, k):
        raise NotSupported("rclone link presigns GET only")

    def put_if_none_match(self, src, b, k):
        raise NotSupported("rclone 1.60 cannot send If-None-Match on upload (--header-upload accepts "
                           "only Cache-Control/Content-*/X-Amz-Meta-*)")

    def delete_many(self, b, keys):
        # rclone deletes object by object (DeleteObject), not with DeleteObjects
        self._run("delete", f"it:{b}/multi")

    def copy(self, b, src_key, dst_key):
        self._run("copyto", f"it:{b}/{src_key}", f"it:{b}/{dst_key}")

    def delete_object(self, b, k):
        self._run("deletefile", f"it:{b}/{k}")

    def delete_bucket(self, b):
        self._run("rmdir", f"it:{b}")


# ------------------------------------------------------------------------------------------------
class S3cmd:
    def __init__(self, server, workdir):
        exe = shutil.which("s3cmd")
        assert exe, "s3cmd is not installed (scripts/bootstrap installs it)"
        cfg = os.path.join(workdir, "s3cmd.cfg")
        with open(cfg, "w") as f:
            f.write(f"[default]\naccess_key = {objd.ACCESS_KEY}\nsecret_key = {objd.SECRET_KEY}\n"
                    f"host_base = {server.host}\nhost_bucket = {server.host}\nuse_https = False\n"
                    "bucket_location = us-east-1\nsignature_v2 = False\n"
                    f"multipart_chunk_size_mb = {PART_MB}\ncheck_ssl_certificate = False\n")
        self.base = [exe, "-c", cfg, "--no-progress"]
        self.env = client_env()

    def _run(self, *args, check=True):
        return run(self.base + list(args), env=self.env, check=check)

    def create_bucket(self, b):
        self._run("mb", f"s3://{b}")

    def put_file(self, src, b, k):
        self._run("put", src, f"s3://{b}/{k}")

    def get_file(self, b, k, dst):
        self._run("get", "--force", f"s3://{b}/{k}", dst)

    def list_sizes(self, b):
        _, out, _ = self._run("ls", "--recursive", f"s3://{b}")
        sizes = {}
        prefix = f"s3://{b}/"
        for line in out.splitlines():
            parts = line.split(None, 3)
            if len(parts) == 4 and parts[3].startswith(prefix):
                sizes[parts[3][len(prefix):]] = int(parts[2])
        return sizes

    def get_range(self, b, k, first, last, dst):
        # s3cmd's only ranged read: 'get --continue' on a partial file -> Range: bytes=<size>-
        with open(dst, "wb") as f:
            f.write(b"\0" * first)
        self._run("get", "--continue", f"s3://{b}/{k}", dst)
        with open(dst, "rb") as f:
            f.seek(first)
            return f.read(last - first + 1)

    def presign_get(self, b, k):
        raise NotSupported("s3cmd signurl produces SigV2 URLs only")

    def presign_put(self, b, k):
        raise NotSupported("s3cmd cannot presign PUT")

    def put_if_none_match(self, src, b, k):
        rc, out, err = self._run("put", "--add-header=If-None-Match:*", src, f"s3://{b}/{k}", check=False)
        return rc == 0, out + err

    def delete_many(self, b, keys):
        # a recursive delete is one DeleteObjects (multi-object delete) request
        self._run("del", "--recursive", "--force", f"s3://{b}/multi/")

    def copy(self, b, src_key, dst_key):
        self._run("cp", f"s3://{b}/{src_key}", f"s3://{b}/{dst_key}")

    def delete_object(self, b, k):
        self._run("del", f"s3://{b}/{k}")

    def delete_bucket(self, b):
        self._run("rb", f"s3://{b}")


# ------------------------------------------------------------------------------------------------
def node_modules_dir():
    d = os.environ.get("OBJDIRECT_NODE_MODULES") or os.path.join(objd.REPO, "build", "node", "node_modules")
    return d


class Node(ScriptDriver):
    """node_driver.cjs (the AWS SDK for JavaScript v3) under node."""

    PRESIGN = ("GET", "PUT")

    def __init__(self, server, workdir):
        exe = shutil.which("node")
        assert exe, "node is not installed"
        nm = node_modules_dir()
        assert os.path.isdir(os.path.join(nm, "@aws-sdk", "client-s3")), \
            f"@aws-sdk/client-s3 not found under {nm} (scripts/bootstrap installs it)"
        assert os.path.isdir(os.path.join(nm, "@aws-sdk", "lib-storage")), f"@aws-sdk/lib-storage not under {nm}"
        self.base = [exe, os.path.join(HERE, "node_driver.cjs"), server.endpoint, objd.ACCESS_KEY,
                     objd.SECRET_KEY, str(PART_MB)]
        self.env = client_env({"OBJDIRECT_NODE_MODULES": nm})
