"""Disk full: the real server's data dir on a small real filesystem (a 64 MiB ext4 image mounted
loop; a 48 MiB tmpfs if loop mounts are refused). PutObject, UploadPart and CopyObject that run out
of space answer 507 InsufficientStorage with a proper S3 error body; the old version of the key
stays readable, no partial object or part appears, nothing is left under DATA/tmp, and once space
is freed (DeleteObject, AbortMultipartUpload) the same requests succeed.

Mounting needs root (CAP_SYS_ADMIN): without it the test skips and says why. The mount is removed
in the fixture's teardown whatever happens.
"""

import hashlib
import os
import shutil
import socket
import subprocess

import pytest

import objd

MIB = 1 << 20


def _run(cmd):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)


@pytest.fixture
def small_fs(tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    img = tmp_path / "fs.img"
    kind = None
    why = []
    if os.geteuid() != 0:
        pytest.skip("disk-full test needs root to mount a small filesystem (loop ext4 or tmpfs)")
    with open(img, "wb") as f:
        f.truncate(64 * MIB)
    r = _run(["mkfs.ext4", "-q", "-F", str(img)])
    if r.returncode == 0:
        r = _run(["mount", "-o", "loop", str(img), str(mnt)])
        if r.returncode == 0:
            kind = "ext4 (loop, 64 MiB)"
        else:
            why.append(f"mount -o loop: {r.stdout.decode().strip()}")
    else:
        why.append(f"mkfs.ext4: {r.stdout.decode().strip()}")
    if kind is None:
        r = _run(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(mnt)])
        if r.returncode == 0:
            kind = "tmpfs (48 MiB)"
        else:
            why.append(f"mount -t tmpfs: {r.stdout.decode().strip()}")
    if kind is None:
        pytest.skip("cannot mount a small filesystem here: " + "; ".join(why))
    try:
        yield {"mnt": str(mnt), "kind": kind, "log": str(tmp_path / "server.log")}
    finally:
        r = _run(["umount", str(mnt)])
        if r.returncode != 0:
            _run(["umount", "-l", str(mnt)])
        img.unlink(missing_ok=True)


def send_body(srv, path, body, query=None):
    """A signed PUT whose body is sent as far as the server takes it. The server answers an
    out-of-space PUT as soon as the write fails, mid-body, and then closes: http.client would
    raise BrokenPipeError and drop that answer, so this reads whatever came back."""
    target, hdrs = objd.sign_headers(srv.host, "PUT", path, query=query, payload_hash="UNSIGNED-PAYLOAD",
                                     headers={"Content-Length": str(len(body))})
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=60)
    raw = b""
    try:
        s.sendall(("PUT " + target + " HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hdrs.items()) +
                   "Connection: close\r\n\r\n").encode())
        view = memoryview(body)
        try:
            while view:
                n = s.send(view[:MIB])
                view = view[n:]
        except (BrokenPipeError, ConnectionResetError):
            pass
        try:
            while True:
                c = s.recv(65536)
                if not c:
                    break
                raw += c
        except ConnectionResetError:
            pass
    finally:
        s.close()
    head, _, rest = raw.partition(b"\r\n\r\n")
    lines = head.decode(errors="replace").split("\r\n")
    assert lines[0].startswith("HTTP/1.1 "), f"no HTTP answer to PUT {path}: {raw[:300]!r}"
    headers = [tuple(x.strip() for x in l.split(":", 1)) for l in lines[1:] if ":" in l]
    return objd.Response(int(lines[0].split()[1]), headers, rest)


def put(srv, key, body):
    return send_body(srv, objd.opath("full", key), body)


def get_sha(srv, key):
    r = objd.request(srv, "GET", objd.opath("full", key), timeout_s=120)
    assert r.status == 200, r
    return hashlib.sha256(r.body).hexdigest()


def free_bytes(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def tmp_files(data):
    return objd.files_under(os.path.join(data, "tmp"))


def test_disk_full_gives_clean_error_and_recovers(small_fs):
    data = os.path.join(small_fs["mnt"], "data")
    srv = objd.Server(data, small_fs["log"], extra_args=["--fabric", "none"]).start()
    try:
        print("filesystem:", small_fs["kind"], "free", free_bytes(small_fs["mnt"]) // MIB, "MiB")
        assert objd.request(srv, "PUT", "/full").status == 200
        a = os.urandom(4 * MIB)
        assert put(srv, "keep", a).status == 200
        big = os.urandom(12 * MIB)
        assert put(srv, "big", big).status == 200

        # Fill the filesystem with objects until one no longer fits.
        fillers = []
        chunk = os.urandom(8 * MIB)
        for i in range(20):
            r = put(srv, f"fill-{i}", chunk)
            if r.status != 200:
                objd.assert_error(r, 507, "InsufficientStorage")
                break
            fillers.append(f"fill-{i}")
        else:
            pytest.fail(f"the filesystem never filled ({free_bytes(small_fs['mnt'])} bytes free)")
        assert tmp_files(data) == []
        print("filled with", len(fillers), "x 8 MiB; free now", free_bytes(small_fs["mnt"]) // 1024, "KiB")

        # PutObject over an existing key: 507, the old version intact.
        r = put(srv, "keep", os.urandom(16 * MIB))
        objd.assert_error(r, 507, "InsufficientStorage")
        assert get_sha(srv, "keep") == hashlib.sha256(a).hexdigest()
        # PutObject of a new key: 507, no object.
        r = put(srv, "new", os.urandom(16 * MIB))
        objd.assert_error(r, 507, "InsufficientStorage")
        assert objd.request(srv, "HEAD", objd.opath("full", "new")).status == 404

        # CopyObject of the 12 MiB object: 507, destination unchanged.
        r = objd.request(srv, "PUT", objd.opath("full", "keep"), headers={"x-amz-copy-source": "/full/big"})
        objd.assert_error(r, 507, "InsufficientStorage")
        assert get_sha(srv, "keep") == hashlib.sha256(a).hexdigest()

        # Multipart: UploadPart runs out of space: 507, the part does not exist, the upload lives.
        r = objd.request(srv, "POST", objd.opath("full", "mp"), query=[("uploads", None)])
        assert r.status == 200, r
        uid = r.xml().find(objd.S3_NS + "UploadId").text
        r = send_body(srv, objd.opath("full", "mp"), os.urandom(16 * MIB), query=[("partNumber", 1), ("uploadId", uid)])
        objd.assert_error(r, 507, "InsufficientStorage")
        r = objd.request(srv, "GET", objd.opath("full", "mp"), query=[("uploadId", uid)])
        assert r.status == 200 and b"<Part>" not in r.body, r
        assert tmp_files(data) == [], tmp_files(data)

        # The server is still fine for reads and small writes need no more than what is free.
        assert get_sha(srv, "big") == hashlib.sha256(big).hexdigest()
        objd.health(srv)

        # Free space; the same operations now succeed.
        for k in fillers:
            assert objd.request(srv, "DELETE", objd.opath("full", k)).status == 204
        print("after deletes: free", free_bytes(small_fs["mnt"]) // MIB, "MiB")
        b = os.urandom(16 * MIB)
        assert put(srv, "keep", b).status == 200
        assert get_sha(srv, "keep") == hashlib.sha256(b).hexdigest()
        r = objd.request(srv, "PUT", objd.opath("full", "copy"), headers={"x-amz-copy-source": "/full/big"})
        assert r.status == 200, r
        assert get_sha(srv, "copy") == hashlib.sha256(big).hexdigest()
        p1, p2 = os.urandom(5 * MIB), os.urandom(MIB)
        etags = []
        for n, p in ((1, p1), (2, p2)):
            r = objd.request(srv, "PUT", objd.opath("full", "mp"), query=[("partNumber", n), ("uploadId", uid)], body=p)
            assert r.status == 200, r
            etags.append(r.header("etag"))
        xml = ("<CompleteMultipartUpload>" + "".join(
            f"<Part><PartNumber>{n}</PartNumber><ETag>{e}</ETag></Part>" for n, e in enumerate(etags, 1)) +
            "</CompleteMultipartUpload>").encode()
        r = objd.request(srv, "POST", objd.opath("full", "mp"), query=[("uploadId", uid)], body=xml)
        assert r.status == 200 and b"<Error>" not in r.body, r
        assert get_sha(srv, "mp") == hashlib.sha256(p1 + p2).hexdigest()
        assert tmp_files(data) == []
    finally:
        alive = srv.alive()
        rc = srv.stop()
    assert alive and rc == 0, f"server died or exited {rc}; log:\n{srv.log_tail()}"

    # And after a restart everything is as acknowledged.
    srv = objd.Server(data, small_fs["log"], extra_args=["--fabric", "none"]).start()
    try:
        assert get_sha(srv, "keep") == hashlib.sha256(b).hexdigest()
        assert get_sha(srv, "mp") == hashlib.sha256(p1 + p2).hexdigest()
        assert tmp_files(data) == []
    finally:
        srv.stop()
    shutil.rmtree(data, ignore_errors=True)
