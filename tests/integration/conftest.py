"""pytest fixtures of the objdirect-server integration suite.

server  (session): the real objdirect-server on 127.0.0.1:<free port>, fresh data dir, SIGTERM at
                   the end; the teardown fails the run if the server died during the session or
                   did not exit with status 0.
s3      (session): Debian boto3 client on that server.
bucket  (function): a fresh, created bucket name; emptied and deleted afterwards (best effort).
source_file (session): the 100 MiB random file of the client suites.
testbed (function): testbed(n=2, tag="t") -> a started netns.Testbed of n hosts made from network
                   namespaces (tests/integration/netns.py); torn down after the test, pass or fail.
"""

import hashlib
import itertools
import os
import shutil
import time

import pytest

import objd

_counter = itertools.count()
_servers = []


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("objd")
    srv = objd.Server(str(root / "data"), str(root / "server.log"),
                      extra_args=os.environ.get("OBJDIRECT_SERVER_ARGS", "").split())
    srv.start()
    _servers.append(srv)
    yield srv
    crashed = not srv.alive()
    rc = srv.stop()
    _servers.remove(srv)
    assert not crashed, f"objdirect-server died during the session (rc={rc}); log:\n{srv.log_tail()}"
    # a clean SIGTERM exit; in a sanitizer build LeakSanitizer turns leaks into a non-zero status
    assert rc == 0, f"objdirect-server exited with {rc} on SIGTERM; log:\n{srv.log_tail()}"


@pytest.fixture(scope="session")
def source_file(tmp_path_factory):
    """The clients' test file: SIZE_MB of random bytes, its sha256 and the sha256 of the range."""
    from clientsuite import RANGE_FIRST, RANGE_LAST, SIZE_MB
    d = tmp_path_factory.mktemp("src")
    path = d / "src.bin"
    h = hashlib.sha256()
    with open(path, "wb") as f:
        for _ in range(SIZE_MB):
            c = os.urandom(1 << 20)
            h.update(c)
            f.write(c)
    with open(path, "rb") as f:
        f.seek(RANGE_FIRST)
        rsha = hashlib.sha256(f.read(RANGE_LAST - RANGE_FIRST + 1)).hexdigest()
    return {"path": str(path), "sha": h.hexdigest(), "range_sha": rsha, "dir": str(d)}


@pytest.fixture(scope="session")
def s3(server):
    return objd.boto3_client(server)


def unique_bucket(prefix="it"):
    return f"{prefix}-{os.getpid()}-{int(time.time()) % 100000}-{next(_counter)}"


def empty_and_delete(s3, name):
    try:
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=name):
            for o in page.get("Contents", []):
                s3.delete_object(Bucket=name, Key=o["Key"])
        for u in s3.list_multipart_uploads(Bucket=name).get("Uploads", []):
            s3.abort_multipart_upload(Bucket=name, Key=u["Key"], UploadId=u["UploadId"])
        s3.delete_bucket(Bucket=name)
    except Exception:  # cleanup only; the server is thrown away at the end anyway
        pass


@pytest.fixture
def bucket(s3):
    name = unique_bucket()
    s3.create_bucket(Bucket=name)
    yield name
    empty_and_delete(s3, name)


@pytest.fixture
def testbed():
    import netns
    made = []

    def make(n=2, tag="t", net="10.201.0"):
        tb = netns.Testbed(n, tag=f"{tag}{len(made)}", net=net)
        made.append(tb)
        return tb.start()

    yield make
    for tb in made:
        tb.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.failed and _servers:
        rep.sections.append(("objdirect-server log (tail)", _servers[-1].log_tail(3000)))


def pytest_sessionfinish(session, exitstatus):
    # The temp dir holds 100 MiB files and data dirs: keep it only when something failed (or
    # OBJDIRECT_ITEST_KEEP=1).
    if exitstatus == 0 and os.environ.get("OBJDIRECT_ITEST_KEEP") != "1":
        base = session.config.option.basetemp
        if base:
            shutil.rmtree(base, ignore_errors=True)


def pytest_configure(config):
    # pytest 7 creates --basetemp but not its parent
    base = config.option.basetemp
    if base:
        os.makedirs(os.path.dirname(os.path.abspath(str(base))), exist_ok=True)
