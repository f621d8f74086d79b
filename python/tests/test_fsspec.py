"""objdirect.fs, the fsspec filesystem, against the real objdirect-server: every operation the
issue names, the objdirect:// protocol through fsspec.open and pandas read_csv / to_csv."""

import os

import fsspec
import pandas as pd
import pytest

import objdirect
from objdirect.fs import ObjDirectFileSystem
from conftest import ACCESS_KEY, SECRET_KEY


def options(server):
    return dict(endpoint=server.endpoint, access_key=ACCESS_KEY, secret_key=SECRET_KEY,
                fabric="none", skip_instance_cache=True)


@pytest.fixture
def fs(server):
    return fsspec.filesystem("objdirect", **options(server))


def test_protocol_is_registered(fs):
    assert isinstance(fs, ObjDirectFileSystem)
    assert fsspec.get_filesystem_class("objdirect") is ObjDirectFileSystem


def test_pipe_cat_info_ls_rm(fs, bucket):
    fs.pipe_file(f"{bucket}/a/x.bin", b"0123456789")
    fs.pipe_file(f"objdirect://{bucket}/a/b/y.bin", b"yy")
    fs.pipe_file(f"s3://{bucket}/top", b"t")
    assert fs.cat_file(f"{bucket}/a/x.bin") == b"0123456789"
    assert fs.cat_file(f"{bucket}/a/x.bin", start=2, end=5) == b"234"
    assert fs.cat_file(f"{bucket}/a/x.bin", start=-3) == b"789"
    assert fs.cat_file(f"{bucket}/a/x.bin", start=8, end=100) == b"89"
    assert fs.cat_file(f"{bucket}/a/x.bin", start=10) == b""
    info = fs.info(f"{bucket}/a/x.bin")
    assert info["size"] == 10 and info["type"] == "file" and info["name"] == f"{bucket}/a/x.bin"
    assert fs.info(f"{bucket}/a")["type"] == "directory"
    assert fs.info(bucket)["type"] == "directory"
    assert fs.ls(f"{bucket}", detail=False) == [f"{bucket}/a", f"{bucket}/top"]
    assert fs.ls(f"{bucket}/a", detail=False) == [f"{bucket}/a/b", f"{bucket}/a/x.bin"]
    assert fs.ls(f"{bucket}/a/x.bin", detail=False) == [f"{bucket}/a/x.bin"]
    assert sorted(fs.find(bucket)) == [f"{bucket}/a/b/y.bin", f"{bucket}/a/x.bin",
                                       f"{bucket}/top"]
    assert fs.exists(f"{bucket}/a/x.bin") and not fs.exists(f"{bucket}/nope")
    with pytest.raises(FileNotFoundError):
        fs.info(f"{bucket}/nope")
    with pytest.raises(FileNotFoundError):
        fs.cat_file(f"{bucket}/nope")
    with pytest.raises(FileNotFoundError):
        fs.ls("no-such-bucket-here/x")
    fs.rm(f"{bucket}/top")
    assert not fs.exists(f"{bucket}/top")
    fs.rm(f"{bucket}/a", recursive=True)
    assert fs.find(bucket) == []


def test_cat_ranges_coalesces_and_runs_concurrently(fs, bucket):
    data = bytes(range(256)) * 400  # 100 KiB
    fs.pipe_file(f"{bucket}/r", data)
    fs.pipe_file(f"{bucket}/s", data[::-1])
    starts = [0, 10, 50000, 50010, 99000, 5]
    ends = [5, 20, 50005, 50020, 200000, 5]
    paths = [f"{bucket}/r"] * 4 + [f"{bucket}/r", f"{bucket}/s"]
    got = fs.cat_ranges(paths + [f"{bucket}/s"], starts + [100], ends + [110], max_gap=64)
    want = [data[s:e] for s, e in zip(starts, ends)][:5] + [b"", data[::-1][100:110]]
    assert got == want
    # r: {0-5,10-20}, {50000-50020}, {99000-...}; s: {5-5}, {100-110} -> 5 GETs, not 7.
    assert fs.last_cat_ranges_gets == 5
    fs.cat_ranges([f"{bucket}/r"] * 3, [0, 1000, 90000], [10, 1010, 90010], max_gap=1 << 20)
    assert fs.last_cat_ranges_gets == 1
    out = fs.cat_ranges([f"{bucket}/missing", f"{bucket}/r"], [0, 0], [5, 5])
    assert isinstance(out[0], FileNotFoundError) and out[1] == data[:5]
    with pytest.raises(FileNotFoundError):
        fs.cat_ranges([f"{bucket}/missing"], [0], [5], on_error="raise")


def test_ranged_reads_are_one_get_each_without_a_head(fs, bucket):
    import objdirect.objects
    data = os.urandom(300000)
    fs.pipe_file(f"{bucket}/g", data)

    def counts():
        req = fs.client.stats()["requests"]
        return tuple(sum(req.get(op, {}).values()) for op in ("GetObject", "HeadObject"))

    g0, h0 = counts()
    assert fs.cat_file(f"{bucket}/g", 10, 1010) == data[10:1010]
    assert fs.cat_file(f"{bucket}/g", 299000, 300500) == data[299000:]  # cut at the end
    assert fs.cat_file(f"{bucket}/g", 300000, 300010) == b""  # at the end: empty, as in s3fs
    assert fs.cat_ranges([f"{bucket}/g"] * 3, [0, 100000, 200000], [5, 100005, 200005],
                         max_gap=0) == [data[0:5], data[100000:100005], data[200000:200005]]
    assert counts() == (g0 + 6, h0), (counts(), g0, h0)
    # A huge end is not allocated: Client.get learns the size from its first GET (256 KiB of
    # this 300,000-byte object) and fetches the rest with a second; no HEAD either way.
    assert fs.cat_file(f"{bucket}/g", 5, 1 << 40) == data[5:]
    assert fs.cat_file(f"{bucket}/g", 5, 290005) == data[5:290005]
    assert counts() == (g0 + 9, h0)


def test_open_read_and_write(fs, bucket):
    big = os.urandom((11 << 20) + 17)  # above the 5 MiB part size: a multipart upload
    with fs.open(f"{bucket}/w.bin", "wb") as f:
        for i in range(0, len(big), 1 << 20):
            f.write(big[i:i + (1 << 20)])
    assert fs.info(f"{bucket}/w.bin")["size"] == len(big)
    assert fs.info(f"{bucket}/w.bin")["ETag"].endswith("-2") or fs.info(
        f"{bucket}/w.bin")["ETag"].endswith("-3")
    with fs.open(f"{bucket}/w.bin", "rb", block_size=1 << 20) as f:
        assert f.read(10) == big[:10]
        f.seek(7 << 20)
        assert f.read(100) == big[(7 << 20):(7 << 20) + 100]
        f.seek(-5, 2)
        assert f.read() == big[-5:]
    with fs.open(f"{bucket}/t.txt", "w") as f:
        f.write("hello\nworld\n")
    with fs.open(f"{bucket}/t.txt", "r") as f:
        assert f.readlines() == ["hello\n", "world\n"]
    with fsspec.open(f"objdirect://{bucket}/t.txt", "rb", **options(fs_server(fs))) as f:
        assert f.read() == b"hello\nworld\n"


def fs_server(fs):
    class S:
        endpoint = fs.client.config["endpoint"]
    return S


def test_get_file_and_put_file(fs, bucket, tmp_path):
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom((6 << 20) + 3))
    fs.put_file(str(src), f"{bucket}/up.bin")
    (tmp_path / "empty").write_bytes(b"")
    fs.put_file(str(tmp_path / "empty"), f"{bucket}/empty")
    assert fs.info(f"{bucket}/empty")["size"] == 0
    dst = tmp_path / "dst.bin"
    fs.get_file(f"{bucket}/up.bin", str(dst))
    assert dst.read_bytes() == src.read_bytes()
    fs.get_file(f"{bucket}/empty", str(tmp_path / "empty2"))
    assert (tmp_path / "empty2").read_bytes() == b""
    fs.get(f"{bucket}/up.bin", str(tmp_path / "again.bin"))
    assert (tmp_path / "again.bin").read_bytes() == src.read_bytes()
    with pytest.raises(FileNotFoundError):
        fs.get_file(f"{bucket}/nope", str(tmp_path / "x"))


def test_pandas_read_csv_and_to_csv(server, bucket):
    df = pd.DataFrame({"a": range(1000), "b": [f"row{i}" for i in range(1000)],
                       "c": [i / 7 for i in range(1000)]})
    uri = f"objdirect://{bucket}/tables/t.csv"
    df.to_csv(uri, index=False, storage_options=options(server))
    back = pd.read_csv(uri, storage_options=options(server))
    pd.testing.assert_frame_equal(df, back)
    # The bytes really are in the object store.
    c = objdirect.Client(endpoint=server.endpoint, access_key=ACCESS_KEY, secret_key=SECRET_KEY,
                         fabric="none")
    assert c.get(bucket, "tables/t.csv").startswith(b"a,b,c\n0,row0,0.0\n")


S3_CHILD = r"""
import sys
import fsspec
import objdirect, objdirect.fs as odfs
endpoint, ak, sk, bucket = sys.argv[1:5]
opts = dict(endpoint=endpoint, access_key=ak, secret_key=sk, fabric="none")
# Importing objdirect (and objdirect.fs) leaves fsspec's s3 protocol alone.
assert "s3" not in fsspec.registry, dict(fsspec.registry)
try:
    cls = fsspec.get_filesystem_class("s3")
    assert not issubclass(cls, odfs.ObjDirectFileSystem), cls
    print("s3 is", cls.__module__)
except (ImportError, ValueError) as e:  # s3fs is not installed here
    print("s3 unavailable:", type(e).__name__)
odfs.register_s3()
fs = fsspec.filesystem("s3", **opts)
assert type(fs) is odfs.ObjDirectS3FileSystem
fs.pipe_file(f"{bucket}/s3/a.txt", b"through s3://")
with fsspec.open(f"s3://{bucket}/s3/a.txt", "rb", **opts) as f:
    assert f.read() == b"through s3://"
assert fs.unstrip_protocol(f"{bucket}/s3/a.txt") == f"s3://{bucket}/s3/a.txt"
assert fs.ls(f"s3a://{bucket}/s3/", detail=False) == [f"{bucket}/s3/a.txt"]
odfs.register_s3()  # again: idempotent
# Another s3 implementation already in use is not replaced unless asked.
class Other(fsspec.AbstractFileSystem):
    protocol = "s3"
fsspec.register_implementation("s3", Other, clobber=True)
try:
    odfs.register_s3()
    raise SystemExit("register_s3 replaced an s3 implementation in use")
except ValueError as e:
    assert "clobber=True" in str(e), e
assert fsspec.get_filesystem_class("s3") is Other
odfs.register_s3(clobber=True)
assert fsspec.get_filesystem_class("s3") is odfs.ObjDirectS3FileSystem
fs.rm(f"{bucket}/s3/a.txt")
print("s3 registration ok")
"""


def test_s3_protocol_only_when_explicitly_registered(server, bucket):
    import subprocess
    import sys
    p = subprocess.run([sys.executable, "-c", S3_CHILD, server.endpoint, ACCESS_KEY, SECRET_KEY,
                        bucket], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "s3 registration ok" in p.stdout
