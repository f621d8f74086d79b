#!/usr/bin/env python3
"""The layering check must refuse an include against the direction and accept one along it, and
refuse a backend header or a fabric-name literal outside the transport seam while accepting them
where they belong: run scripts/check-layering.py on small trees built here."""
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
        (base / name).parent.mkdir(parents=True, exist_ok=True)
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

        # The transport seam: where names and backend headers are allowed...
        seam_ok = run(tree(pathlib.Path(d) / "seam_ok", {
            "src/transport/libfabric/lf.cc": '#include <rdma/fi_rma.h>\n'
                                             'bool shm(const char* p) { return p == "shm"; }\n'
                                             'const char* n = "libfabric:shm";\n',
            "src/transport/ucx/u.cc": '#include <ucp/api/ucp.h>\nconst char* n = "ucx";\n',
            "src/transport/transport.cc": '#include "transport/ucx/ucx_transport.hpp"\n'
                                          'const char* t[] = {"libfabric:tcp", "ucx"};\n',
            "src/transport/transport_test.cc": '#include "transport/libfabric/shm_region.hpp"\n'
                                               'const char* f = "libfabric:shm";\n',
            "src/client/rdma_test.cc": 'const char* f = "libfabric:tcp";\n',
            # Mentions in comments, other literals, digit separators, a raw string with quotes.
            "src/server/e.cc": '// "libfabric:shm" in a comment\n/* and "ucx" here */\n'
                               'const char* u = "http://x/ucx"; int k = 20\'000;\n'
                               'const char* r = R"x(a "quoted" ")x"; char q = \'"\';\n'
                               'const char* m = "libfabric shm";\n',
            "tools/t/main.cc": 'const char* h = "libfabric:tcp or ucx";\n',
        }))
        assert seam_ok.returncode == 0, seam_ok.stdout + seam_ok.stderr
        # ...and where they are not.
        seam_bad = run(tree(pathlib.Path(d) / "seam_bad", {
            "src/server/rdma.cc": '#include <string>\n#include "transport/libfabric/shm_region.hpp"\n'
                                  'bool f(const std::string& n) { return n == "libfabric:shm"; }\n',
            "src/client/c.cc": 'int k = 1\'000;\nconst char* v[] = {"x", "ucx"};\n',
            "src/client/d.cc": '  #include <rdma/fi_domain.h>\n',
            "src/transport/e.cc": '#include <ucp/api/ucp.h>\nconst char* p = "libfabric:";\n',
            "src/client/f.cc": 'const char* r = R"(libfabric:efa)";\n',
            "tools/t/main.cc": '#include <ucs/type/status.h>\n',
        }))
        assert seam_bad.returncode == 1, seam_bad.stdout
        for where in ("src/server/rdma.cc:2: backend header", "src/server/rdma.cc:3: fabric name",
                      "src/client/c.cc:2: fabric name \"ucx\"", "src/client/d.cc:1: backend",
                      "src/transport/e.cc:1: backend", "src/transport/e.cc:2: fabric name",
                      "src/client/f.cc:1: fabric name", "tools/t/main.cc:1: backend"):
            assert where in seam_bad.stdout, (where, seam_bad.stdout)
        lines = [l for l in seam_bad.stdout.splitlines() if l.startswith(("src/", "tools/"))]
        assert len(lines) == 8, seam_bad.stdout

        # The public API includes itself and system headers only.
        api_ok = run(tree(pathlib.Path(d) / "api_ok", {
            "include/objdirect/client.hpp": '#include <string>\n#include "objdirect/status.hpp"\n',
            "include/objdirect/objdirect.h": '#include <stdint.h>\n',
        }))
        assert api_ok.returncode == 0, api_ok.stdout + api_ok.stderr
        api_bad = run(tree(pathlib.Path(d) / "api_bad", {
            "include/objdirect/client.hpp": '#include <string>\n#include "common/status.hpp"\n',
            "include/objdirect/config.hpp": '#include "client/planner.hpp"\n',
        }))
        assert api_bad.returncode == 1, api_bad.stdout
        for where in ("include/objdirect/client.hpp:2: the public API includes \"common/status.hpp\"",
                      "include/objdirect/config.hpp:1: the public API includes"):
            assert where in api_bad.stdout, (where, api_bad.stdout)
        # The storage seam: backend headers in their folder, the factory and tests only.
        store_ok = run(tree(pathlib.Path(d) / "store_ok", {
            "src/storage/open_store.cc": '#include "storage/local/local_store.hpp"\n'
                                         '#include "storage/cache/caching_store.hpp"\n',
            "src/storage/s3/s3_store.cc": '#include "storage/s3/s3_store.hpp"\n',
            "src/storage/rados/index_codec.hpp": '#include "storage/local/meta_codec.hpp"\n',
            "src/server/http/http_request_fuzz.cc": '#include "storage/local/local_store.hpp"\n',
            "src/storage/open_store_test.cc": '#include "storage/s3/s3_store.hpp"\n',
            "tools/t/main.cc": '#include "storage/open_store.hpp"\n',
        }))
        assert store_ok.returncode == 0, store_ok.stdout + store_ok.stderr
        store_bad = run(tree(pathlib.Path(d) / "store_bad", {
            "tools/t/main.cc": '#include "storage/local/local_store.hpp"\n',
            "src/server/s.cc": '// x\n#include "storage/cache/caching_store.hpp"\n',
            "src/storage/s3/s3_store.cc": '#include "storage/rados/rados_store.hpp"\n',
        }))
        assert store_bad.returncode == 1, store_bad.stdout
        for where in ("tools/t/main.cc:1: storage backend header", "src/server/s.cc:2: storage",
                      "src/storage/s3/s3_store.cc:1: storage"):
            assert where in store_bad.stdout, (where, store_bad.stdout)
        # The tools, the micro-benchmarks and the Python module use the public API, never the
        # client library's private headers; src/ (the library, its tests) and tests/ may.
        cli_ok = run(tree(pathlib.Path(d) / "cli_ok", {
            "tools/objdirect/main.cc": '#include "objdirect/plan.hpp"\n#include "common/time.hpp"\n',
            "tools/objdirect-bench/main.cc": '#include "objdirect/client.hpp"\n',
            "bench/planner_bench.cc": '#include "objdirect/plan.hpp"\n',
            "python/src/objdirect_module.cc": '#include "objdirect/client.hpp"\n',
            "src/client/cuda/gpu_check.cc": '#include "client/cuda/cuda_api.hpp"\n',
            "python/tests/helper.cc": '#include "client/http_client.hpp"\n',
        }))
        assert cli_ok.returncode == 0, cli_ok.stdout + cli_ok.stderr
        cli_bad = run(tree(pathlib.Path(d) / "cli_bad", {
            "tools/objdirect/main.cc": '#include <string>\n#include "client/planner.hpp"\n',
            "tools/objdirect/x.hpp": '#include "client/cuda/cuda_api.hpp"\n',
            "tools/objdirect-bench/main.cc": '// x\n#include "client/http_client.hpp"\n',
            "bench/planner_bench.cc": '  #  include "client/planner.hpp"\n',
            "python/src/objdirect_module.cc": '#include "client/cuda/cuda_api.hpp"\n',
        }))
        assert cli_bad.returncode == 1, cli_bad.stdout
        for where in ("tools/objdirect/main.cc:2: includes the client library's private",
                      "tools/objdirect/x.hpp:1: includes", "tools/objdirect-bench/main.cc:2: includes",
                      "bench/planner_bench.cc:1: includes", "python/src/objdirect_module.cc:1: includes"):
            assert where in cli_bad.stdout, (where, cli_bad.stdout)
        lines = [l for l in cli_bad.stdout.splitlines() if "private" in l]
        assert len(lines) == 5, cli_bad.stdout
    print("layering check: refuses 5 of 5 bad includes, 8 of 8 seam violations, 2 of 2 private "
          "includes of the public API, 3 of 3 storage-seam violations and 5 of 5 private client "
          "includes of tools/, bench/ and python/src/, accepts the allowed ones")
    return 0


if __name__ == "__main__":
    sys.exit(main())
