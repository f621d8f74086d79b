#!/usr/bin/env python3
"""The layering check must refuse an include against the direction and accept one along it: run
scripts/check-layering.py on two small trees built here."""
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHECK = ROOT / "scripts" / "check-layering.py"


def tree(base: pathlib.Path, files: dict) -> pathlib.Path:
    for layer in ("common", "auth", "token", "s3", "transport", "storage", "server", "client"):
        (base / "src" / layer).mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (base / name).write_text(text)
    return base


def run(base: pathlib.Path):
    return subprocess.run([sys.executable, str(CHECK), str(base)], capture_output=True, text=True)


def main() -> int:
    with tempfile.TemporaryDirectory() as d:
        ok = run(tree(pathlib.Path(d) / "ok", {
            "src/client/a.cc": '#include "s3/xml.hpp"\n#include "objdirect/client.hpp"\n',
            "src/s3/x.cc": '#include <pugixml.hpp>\nvoid f(pugi::xml_node);\n',
            "src/server/b.cc": '#include "storage/object_store.hpp"\n',
        }))
        assert ok.returncode == 0, ok.stdout + ok.stderr
        bad = run(tree(pathlib.Path(d) / "bad", {
            "src/client/a.cc": '// x\n#include "server/s3/xml.hpp"\n',
            "src/storage/c.cc": '#include "server/http/http_server.hpp"\n',
            "src/common/d.hpp": '#include "auth/sigv4.hpp"\n',
            "src/s3/e.cc": '  #  include "storage/object_store.hpp"\n',
            "src/client/f.cc": '#include <pugixml.hpp>\n',
        }))
        assert bad.returncode == 1, bad.stdout
        for where in ("src/client/a.cc:2:", "src/storage/c.cc:1:", "src/common/d.hpp:1:",
                      "src/s3/e.cc:1:", "src/client/f.cc:1: pugixml"):
            assert where in bad.stdout, (where, bad.stdout)
        unknown = run(tree(pathlib.Path(d) / "unknown", {}))
        (pathlib.Path(d) / "unknown" / "src" / "newlayer").mkdir()
        unknown = run(pathlib.Path(d) / "unknown")
        assert unknown.returncode == 1 and "src/newlayer" in unknown.stdout, unknown.stdout
    print("layering check: refuses 5 of 5 bad includes, accepts the allowed ones")
    return 0


if __name__ == "__main__":
    sys.exit(main())
