#!/usr/bin/env python3
"""scripts/check-limits.py refuses what it should: a limit missing from docs/limits.md and a
limit spelled another way, each planted in a scratch tree, in C++ and in the Python package (there
also a limit no test names, and a `*_max_default` whose option is not indexed); and passes each
tree once fixed."""
import pathlib
import subprocess
import sys
import tempfile

CHECK = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "check-limits.py"


def run(root):
    return subprocess.run([sys.executable, str(CHECK), str(root)], capture_output=True, text=True)


def tree(root, header, index):
    (root / "src/x").mkdir(parents=True, exist_ok=True)
    (root / "include").mkdir(exist_ok=True)
    (root / "docs").mkdir(exist_ok=True)
    (root / "src/x/x.hpp").write_text(header)
    (root / "docs/limits.md").write_text(index)


def py_tree(root, module, ext, index, test):
    """A scratch tree with a Python package module, an extension source and a test."""
    tree(root, "", index)
    for d in ("python/objdirect", "python/src", "python/tests"):
        (root / d).mkdir(parents=True, exist_ok=True)
    (root / "python/objdirect/m.py").write_text(module)
    (root / "python/src/ext.cc").write_text(ext)
    (root / "python/tests/test_m.py").write_text(test)


def main():
    with tempfile.TemporaryDirectory() as d:
        root = pathlib.Path(d)
        cases = [
            ("inline constexpr int widgets_max = 4;\n", "nothing here\n", "not indexed"),
            ("constexpr int kMaxWidgets = 4;\n", "", "names a limit"),
            ("static constexpr int max_widgets = 4;\n", "", "names a limit"),
            ("constexpr int widget_limit = 4;\n", "", "names a limit"),
            ("constexpr int widget_bytes_min = 4;\nconstexpr int widget_bytes_max{8};\n",
             "`widget_bytes_min`\n", "widget_bytes_max"),
        ]
        for header, index, expect in cases:
            tree(root, header, index)
            r = run(root)
            assert r.returncode == 1 and expect in r.stdout, (header, r.stdout)
        tree(root, "constexpr int widget_bytes_min = 4;\nconstexpr int widget_bytes_max{8};\n",
             "`widget_bytes_min` / `_max`\n")
        r = run(root)
        assert r.returncode == 0, r.stdout
    py_cases = [
        ("widgets_max = 4\n", "", "", "use(widgets_max)\n", "`widgets_max` is not indexed"),
        ("widgets_max: int = 4\n", "", "", "", "`widgets_max` is named by no test"),
        ("", "constexpr int gizmo_bytes_max = 4;\n", "", "", "`gizmo_bytes_max` is not indexed"),
        ("", "constexpr int gizmo_bytes_max = 4;\n", "`gizmo_bytes_max`\n", "",
         "`gizmo_bytes_max` is named by no test"),
        ("pool_bytes_max_default = 4\n", "", "", "pool_bytes_max\n", "`pool_bytes_max` is not"),
        ("MAX_WIDGETS = 4\n", "", "", "", "names a limit"),
        ("widget_limit = 4\n", "", "", "", "names a limit"),
        ("def f(x):\n    widgets_max = 4\n", "", "", "", None),  # a local: not a constant
        ("class W:\n    widgets_max = 4\n", "", "", "W.widgets_max\n", "is not indexed"),
        ("class W:\n    max_widgets = 4\n", "", "", "", "names a limit"),
        ("class W:\n    max_widgets: int = 4\n", "", "", "", None),  # a field: an option
    ]
    for module, ext, index, test, expect in py_cases:
        with tempfile.TemporaryDirectory() as d:
            root = pathlib.Path(d)
            py_tree(root, module, ext, index, test)
            r = run(root)
            if expect is None:
                assert r.returncode == 0, (module, r.stdout)
            else:
                assert r.returncode == 1 and expect in r.stdout, (module, ext, r.stdout)
    with tempfile.TemporaryDirectory() as d:
        root = pathlib.Path(d)
        py_tree(root, "widgets_max = 4\npool_bytes_max_default = 8\n",
                "constexpr int gizmo_bytes_max = 4;\n",
                "`widgets_max`, `pool_bytes_max`, `gizmo_bytes_max`\n",
                "assert m.widgets_max and m.f(pool_bytes_max=1)\n")
        (root / "tests").mkdir()
        (root / "tests/check_ext.py").write_text("ext.gizmo_bytes_max\n")  # tests/ counts too
        r = run(root)
        assert r.returncode == 0 and "3 in the Python package" in r.stdout, r.stdout
    print("limits_refuses: ok")


if __name__ == "__main__":
    main()
