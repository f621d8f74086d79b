#!/usr/bin/env python3
"""scripts/check-limits.py refuses what it should: a limit missing from docs/limits.md and a
limit spelled another way, each planted in a scratch tree; and passes that tree once fixed."""
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
    print("limits_refuses: ok")


if __name__ == "__main__":
    main()
