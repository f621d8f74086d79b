"""The multi-host test bed itself (tests/integration/netns.py): hosts made from network namespaces
reach each other on their link and nothing else, the real server runs in one and a client in
another moves bytes exactly, and teardown leaves no namespace behind, also after a failure."""

import os

import pytest

import netns
import objd


def test_hosts_reach_each_other_only_on_their_links(testbed):
    tb = testbed(3)
    assert [h.addr for h in tb] == ["10.201.0.1", "10.201.0.2", "10.201.0.3"]
    assert len(tb.namespaces()) == 4  # three hosts and the switch
    a, b = tb.link(1, 2, "10.202.0")
    probe = ("import socket, sys\n"
             "s = socket.socket(); s.settimeout(2)\n"
             "try:\n    s.connect((ADDR, 9)); print('open')\n"
             "except OSError as e:\n    print(type(e).__name__)\n")
    # a closed port on a reachable host is refused at once; an address off every link is unreachable
    assert tb[0].python(probe, ADDR=tb[2].addr).stdout.strip() == "ConnectionRefusedError"
    assert tb[1].python(probe, ADDR=b).stdout.strip() == "ConnectionRefusedError"
    assert tb[0].python(probe, ADDR=b).stdout.strip() == "OSError"  # ENETUNREACH


def test_server_in_one_host_client_in_another(testbed, tmp_path):
    tb = testbed(2)
    srv = tb[0].server(tmp_path / "data", tmp_path / "server.log", ["--fabric", "none"])
    assert srv.endpoint == f"http://{tb[0].addr}:{srv.port}"
    data = os.urandom(3 << 20)
    src = tmp_path / "src.bin"
    src.write_bytes(data)
    code = ("import hashlib, objd\n"
            "assert objd.request(HOST, 'PUT', '/nsb').status == 200\n"
            "body = open(SRC, 'rb').read()\n"
            "r = objd.request(HOST, 'PUT', '/nsb/k', body=body); assert r.status == 200, r\n"
            "r = objd.request(HOST, 'GET', '/nsb/k'); assert r.status == 200, r\n"
            "print(hashlib.sha256(r.body).hexdigest())\n")
    out = tb[1].python(code, HOST=srv.host, SRC=str(src))
    assert out.stdout.strip() == __import__("hashlib").sha256(data).hexdigest()
    # a server listening on every interface is reached at the host's address too
    srv2 = tb[0].server(tmp_path / "data2", tmp_path / "server2.log", ["--fabric", "none"], listen_host="0.0.0.0")
    assert srv2.host == f"{tb[0].addr}:{srv2.port}"
    out = tb[1].python("import objd; print(objd.request(HOST, 'GET', '/').status)", HOST=srv2.host)
    assert out.stdout.strip() == "200"
    assert tb.close() == [0, 0]
    assert tb.namespaces() == []


def test_teardown_after_a_failure_removes_everything(tmp_path):
    tb = netns.Testbed(2, tag="fail")
    with pytest.raises(RuntimeError):
        with tb:
            tb[0].server(tmp_path / "data", tmp_path / "server.log", ["--fabric", "none"])
            stray = tb[1].popen(["sleep", "600"])  # a process the test forgot
            raise RuntimeError("test body failed")
    assert tb.namespaces() == []
    assert stray.wait(10) != 0  # killed by the teardown
