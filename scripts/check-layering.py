#!/usr/bin/env python3
"""Refuses an #include against the allowed direction between the layers of src/ (docs/architecture.md,
"Layers"). Each folder under src/ may include only the folders listed for it; include/objdirect/
(the public API) is open to every layer. tools/, bench/, python/ and tests/ may use any layer.
pugixml belongs to the S3 wire-format library: <pugixml.hpp> and pugi:: appear only in src/s3/.

Usage: scripts/check-layering.py [REPO_ROOT]   (exit 1 and one line per violation when refused)
"""
import pathlib
import re
import sys

# layer -> the layers its files may include (itself always allowed).
ALLOWED = {
    "common": set(),
    "auth": {"common"},
    "token": {"common"},
    "s3": {"common", "auth"},
    "transport": {"common", "token"},
    "storage": {"common", "auth", "s3"},
    "server": {"common", "auth", "token", "transport", "s3", "storage"},
    "client": {"common", "auth", "token", "transport", "s3"},
}
# Known violations, to be removed (not added to): each is (file, included header).
# src/s3 tagging/lifecycle use storage's ObjectMeta/tag types (merged from the S3-features branch);
# the types they need belong in src/s3 or common.
KNOWN_EXCEPTIONS = {
    ("src/s3/lifecycle.hpp", "storage/object_store.hpp"),
    ("src/s3/tagging.hpp", "storage/object_store.hpp"),
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
PUGI = re.compile(r'^\s*#\s*include\s+[<"]pugixml\.hpp[>"]|\bpugi::', re.M)
SOURCES = {".cc", ".hpp", ".h", ".cpp", ".cu"}


def violations(root: pathlib.Path):
    src = root / "src"
    layers = {p.name for p in src.iterdir() if p.is_dir()}
    unknown = layers - ALLOWED.keys()
    for layer in sorted(unknown):
        yield f"src/{layer}: a folder with no entry in scripts/check-layering.py ALLOWED"
    for path in sorted(src.rglob("*")):
        if path.suffix not in SOURCES or not path.is_file():
            continue
        layer = path.relative_to(src).parts[0]
        if layer not in ALLOWED:
            continue
        text = path.read_text(errors="replace")
        for m in INCLUDE.finditer(text):
            target = m.group(1)
            first = target.split("/", 1)[0]
            if "/" not in target or first == "objdirect" or first == layer:
                continue
            rel = str(path.relative_to(root))
            if (rel, target) in KNOWN_EXCEPTIONS:
                continue
            if first in layers and first not in ALLOWED[layer]:
                line = text.count("\n", 0, m.start()) + 1
                yield (f"{path.relative_to(root)}:{line}: {layer}/ may not include \"{target}\" "
                       f"({layer} may use: {', '.join(sorted(ALLOWED[layer])) or 'nothing'})")
    for top in ("src", "include", "tools", "bench", "python"):
        if not (root / top).is_dir():
            continue
        for path in sorted((root / top).rglob("*")):
            if path.suffix not in SOURCES or not path.is_file():
                continue
            rel = path.relative_to(root)
            if rel.parts[:2] == ("src", "s3"):
                continue
            text = path.read_text(errors="replace")
            m = PUGI.search(text)
            if m:
                line = text.count("\n", 0, m.start()) + 1
                yield f"{rel}:{line}: pugixml outside src/s3/ (use the codecs of s3/documents.hpp)"


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent)
    bad = list(violations(root.resolve()))
    for v in bad:
        print(v)
    if bad:
        print(f"layering: {len(bad)} include(s) against the allowed direction")
        return 1
    print("layering: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
