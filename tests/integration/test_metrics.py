"""GET /metrics (Prometheus text format 0.0.4) from the real server: each series is declared once,
every *_total series is a counter and no gauge is named *_total, and the series a server declares
are exactly the rows of docs/metrics.md that apply to its flags (the table is the checked list:
names, types and label sets). Two configurations: the local backend with the lifecycle worker,
and a gateway (--backend s3) with the read-through cache and no lifecycle worker."""
import os
import re

import objd

DOC = os.path.join(objd.REPO, "docs", "metrics.md")
ROW = re.compile(r"^\| `(objdirect_[a-z0-9_]+)` \| (counter|gauge|histogram) \|([a-z, ]*)\| ([^|]+) \|", re.M)
SAMPLE = re.compile(r"^([a-z_:][a-z0-9_:]*)(?:\{([^}]*)\})? \S+$", re.M)


def documented():
    """name -> (type, label names, when) from docs/metrics.md's table."""
    text = open(DOC, encoding="utf-8").read()
    rows = {}
    for name, kind, labels, when in ROW.findall(text):
        assert name not in rows, f"docs/metrics.md lists {name} twice"
        rows[name] = (kind, frozenset(l.strip() for l in labels.split(",") if l.strip()), when.strip())
    assert len(rows) > 40, f"docs/metrics.md: the table was not found ({len(rows)} rows)"
    return rows


def applies(when, args):
    """Whether a row's "when" holds for a server started with `args`."""
    joined = " ".join(args)
    if when == "always":
        return True
    if when == "`--cache-dir`":
        return "--cache-dir" in args
    if when == "`--backend s3`":
        return "--backend s3" in joined
    if when == "`--lifecycle-interval-ms` > 0":
        return "--lifecycle-interval-ms 0" not in joined
    raise AssertionError(f"docs/metrics.md: unknown condition {when!r}")


def scrape(server):
    r = objd.request(server, "GET", "/metrics", sign=False, timeout_s=10)
    assert r.status == 200, r
    return r.body.decode()


def declared(text):
    """name -> (type, label names seen on its samples); checks one HELP and one TYPE per name."""
    types = re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M)
    names = [n for n, _ in types]
    dup = sorted({n for n in names if names.count(n) > 1})
    assert not dup, f"declared more than once: {dup}"
    helps = re.findall(r"^# HELP (\S+) ", text, re.M)
    assert sorted(helps) == sorted(names), "every series has exactly one HELP and one TYPE"
    out = {n: (t, set()) for n, t in types}
    for sample, labels in SAMPLE.findall(text):
        family = sample
        if family not in out:
            family = re.sub(r"_(bucket|sum|count)$", "", sample)
        assert family in out, f"sample {sample} of no declared series"
        if labels:
            out[family][1].update(k for k in re.findall(r'([a-z_]+)="', labels) if k != "le")
    return out


def check_against_doc(server, args):
    objd.request(server, "PUT", "/metrics-b")
    assert objd.request(server, "PUT", "/metrics-b/m", body=b"x").status == 200
    assert objd.request(server, "GET", "/metrics-b/m").status == 200
    got = declared(scrape(server))
    wrong = sorted((n, t) for n, (t, _) in got.items() if n.endswith("_total") != (t == "counter"))
    assert not wrong, f"*_total series not typed counter, or counters not named *_total: {wrong}"
    rows = documented()
    want = {n: row for n, row in rows.items() if applies(row[2], args)}
    assert sorted(set(got) - set(want)) == [], "declared but not in docs/metrics.md (or not for these flags)"
    assert sorted(set(want) - set(got)) == [], "in docs/metrics.md for these flags but not declared"
    for name, (kind, labels, _) in want.items():
        assert got[name][0] == kind, f"{name}: {got[name][0]}, docs/metrics.md says {kind}"
        seen = got[name][1]
        if seen or not labels:  # labelled series with no sample yet show no labels
            assert seen == labels, f"{name}: labels {sorted(seen)}, docs/metrics.md says {sorted(labels)}"
    return got


def test_local_server_declares_the_documented_series(server):
    args = os.environ.get("OBJDIRECT_SERVER_ARGS", "").split()
    got = check_against_doc(server, args)
    assert ("counter", {"op", "status"}) == got["objdirect_requests_total"]
    assert got["objdirect_rdma_transport_resets_total"][0] == "counter"


def test_gateway_with_cache_declares_the_documented_series(server, tmp_path, monkeypatch):
    """The gateway's store and the cache register their own series; no lifecycle worker here."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", objd.ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", objd.SECRET_KEY)
    for k in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE"):
        monkeypatch.delenv(k, raising=False)
    args = ["--backend", "s3", "--upstream", server.endpoint, "--fabric", "none",
            "--cache-dir", str(tmp_path / "cache"), "--cache-bytes-max", str(8 << 20),
            "--lifecycle-interval-ms", "0"]
    gw = objd.Server(str(tmp_path / "gw"), str(tmp_path / "gw.log"), extra_args=args)
    gw.start()
    try:
        got = check_against_doc(gw, args)
        assert "objdirect_lifecycle_passes_total" not in got
        assert got["objdirect_cache_hits_total"][0] == "counter"
        assert got["objdirect_upstream_connections_in_use"][0] == "gauge"
        assert gw.alive()
    finally:
        assert gw.stop() == 0, gw.log_tail()
