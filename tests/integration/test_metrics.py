"""GET /metrics (Prometheus text format 0.0.4): each series is declared once, and every *_total
series is a counter (Prometheus: a _total suffix names a counter)."""
import re

import objd


def metrics(server):
    r = objd.request(server, "GET", "/metrics", sign=False, timeout_s=10)
    assert r.status == 200, r
    return r.body.decode()


def test_every_series_declared_once_and_totals_are_counters(server, s3, bucket):
    s3.put_object(Bucket=bucket, Key="m", Body=b"x")  # a request, so request series exist
    text = metrics(server)
    types = re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M)
    names = [n for n, _ in types]
    assert len(types) > 20, text[:2000]
    dup = sorted({n for n in names if names.count(n) > 1})
    assert not dup, f"declared more than once: {dup}"
    helps = re.findall(r"^# HELP (\S+) ", text, re.M)
    assert sorted(helps) == sorted(names), "every series has exactly one HELP and one TYPE"
    wrong = [(n, t) for n, t in types if n.endswith("_total") and t != "counter"]
    assert not wrong, f"*_total series not typed counter: {wrong}"
    assert ("objdirect_rdma_transport_resets_total", "counter") in types
