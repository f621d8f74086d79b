"""RDMA tokens bound to their requester and used once (docs/rdma_protocol.md, "Threat model"),
across a real network boundary: the server, the victim (alice) and the attacker (mallory) on three
hosts made from network namespaces (tests/integration/netns.py), tcp fabrics only (shm would cross
the namespaces through the shared /dev/shm). The processes are tests/rdma/rdma_binding_probe: the
victim binds and moves real bytes by RDMA, the attacker uses its leaked PUT and GET tokens, tokens
forged from their fields, a bind of the victim's endpoint and verbatim replays of its requests;
each is refused, the victim's buffer and mailbox stay byte-for-byte untouched, the attacker's
objects never exist, and a second process of alice's on the attacker's host still works.
(The same attacks on one host per fabric: tests/rdma/rdma_binding_test.sh.)"""

import os
import pathlib
import re
import time
import urllib.request

import pytest

PROBE = os.environ.get("OBJDIRECT_BINDING_PROBE") or str(
    pathlib.Path(os.environ.get("OBJDIRECT_BIN_DIR", "build/bin")).parent / "tests" / "rdma_binding_probe")
CREDS = "alice alice-secret-key\nmallory mallory-secret-key\n"
# No interface is named: the server serves its --listen address's interface and each probe the
# interface of its HTTP connection to the server (docs/client.md, "Choosing a fabric"). UCX is
# held to tcp so that its shared-memory transports cannot cross the namespaces.
FABRIC_ENV = {"UCX_TLS": "tcp"}


def refusals(tb, srv):
    code = ("import urllib.request\n"
            "print(urllib.request.urlopen(URL + '/metrics', timeout=10).read().decode())\n")
    text = tb[0].python(code, URL=srv.endpoint).stdout
    return {m.group(1): float(m.group(2)) for m in
            re.finditer(r'^objdirect_rdma_token_refusals_total\{reason="([^"]+)"\} (\S+)$', text, re.M)}


@pytest.mark.parametrize("fabric", ["libfabric:tcp", "ucx"])
def test_attacks_across_three_hosts_are_refused(testbed, tmp_path, fabric):
    if not os.path.exists(PROBE):
        pytest.skip(f"{PROBE} not built")
    tb = testbed(3, tag="bind")
    creds = tmp_path / "creds"
    creds.write_text(CREDS)
    srv = tb[0].server(tmp_path / "data", tmp_path / "server.log",
                       ["--credentials", str(creds), "--fabric", fabric, "--no-fsync",
                        "--metrics-allow", "10.0.0.0/8", "--rdma-op-timeout-ms", "5000"],
                       env=FABRIC_ENV)
    shared = tmp_path / "x"
    shared.mkdir()
    victim_log = open(tmp_path / "victim.log", "w")
    victim = tb[1].popen([PROBE, "victim", srv.endpoint, fabric, "alice", "alice-secret-key", shared],
                         env=FABRIC_ENV, stdout=victim_log, stderr=victim_log)
    try:
        deadline = time.monotonic() + 120
        while not (shared / "ready").exists():
            assert victim.poll() is None, (tmp_path / "victim.log").read_text()
            assert time.monotonic() < deadline, "victim never became ready"
            time.sleep(0.1)
        attack = tb[2].run([PROBE, "attack", srv.endpoint, fabric, "mallory", "mallory-secret-key", shared],
                           env=FABRIC_ENV, universal_newlines=True, timeout=180)
        print(attack.stdout, attack.stderr)
        second = tb[2].run([PROBE, "second", srv.endpoint, fabric, "alice", "alice-secret-key", shared],
                           env=FABRIC_ENV, universal_newlines=True, timeout=180)
        print(second.stdout, second.stderr)
    finally:
        (shared / "check").write_text("1")
        rc = victim.wait(180)
        victim_log.close()
    victim_out = (tmp_path / "victim.log").read_text()
    print(victim_out)
    assert attack.returncode == 0 and "FAIL" not in attack.stdout, attack.stdout
    assert attack.stdout.count("PASS") >= 16, attack.stdout
    assert second.returncode == 0, second.stdout
    assert rc == 0 and "victim buffer byte-for-byte untouched" in victim_out, victim_out
    r = refusals(tb, srv)
    assert r.get("replayed-nonce", 0) >= 4, r
    assert r.get("bound-to-other-principal", 0) >= 6, r
    assert r.get("expired", 0) >= 1, r
