"""The README's Python example runs as written (against the test server instead of :9000)."""

import os

import numpy as np

import objdirect
from conftest import ACCESS_KEY, SECRET_KEY


def test_readme_python_example(server, monkeypatch):
    readme = open(os.path.join(os.path.dirname(__file__), "..", "..", "README.md")).read()
    code = readme[readme.index("```python\n") + 10:]
    code = code[:code.index("```")]
    assert len([line for line in code.splitlines() if line.strip()]) == 5
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    with objdirect.Client(endpoint=server.endpoint, access_key=ACCESS_KEY,
                          secret_key=SECRET_KEY) as admin:
        admin.create_bucket("demo")
    ns = {}
    exec(code.replace("http://127.0.0.1:9000", server.endpoint), ns)
    assert ns["nbytes"] == 4 << 20 and ns["path"] in ("rdma", "http", "http-fallback")
    assert np.array_equal(ns["buf"], np.arange(1 << 20, dtype=np.float32))
    with objdirect.Client(endpoint=server.endpoint, access_key=ACCESS_KEY,
                          secret_key=SECRET_KEY) as admin:
        admin.delete("demo", "x.bin")
        admin.delete_bucket("demo")
