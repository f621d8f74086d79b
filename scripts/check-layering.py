#!/usr/bin/env python3
"""Refuses an #include against the allowed direction between the layers of src/ (docs/architecture.md,
"Layers"). Each folder under src/ may include only the folders listed for it; include/objdirect/
(the public API) is open to every layer. tools/, bench/, python/ and tests/ may use any layer
(but tools/, bench/ and python/src/ not the private headers of src/client/, below).
pugixml belongs to the S3 wire-format library: <pugixml.hpp> and pugi:: appear only in src/s3/.

The transport seam (docs/architecture.md, "The transport seam"): a backend's headers (libfabric's
<rdma/...>, UCX's <ucp/...>, <ucs/...>, <uct/...>, and "transport/libfabric/...",
"transport/ucx/...") are included only inside src/transport/<backend>/, by the factory
src/transport/transport.cc, and by the transport's own tests (src/transport/*_test.cc). A fabric
name ("libfabric:tcp", "ucx", ...) appears as a string literal in src/, include/ and python/ only
inside src/transport/<backend>/ and in transport.cc's one table; code elsewhere asks
transport::fabric_table() and caps(). Tests (*_test.*, *_fuzz.*) may name fabrics to open them.
Comments may mention names. tools/ and bench/ are outside this rule (help texts, bench setups).

The public API (docs/architecture.md, "The public API"): include/objdirect/ includes only
"objdirect/..." and system headers, never a header of src/.

The storage seam (docs/architecture.md, "The composition root"): a storage backend's headers
("storage/local/...", "storage/rados/...", "storage/s3/...", "storage/cache/...") are included
only inside that backend's folder, by the factory src/storage/open_store.cc, and by tests and
fuzz targets (*_test.*, *_fuzz.*; tests/ is not checked). Everything else opens a store with
storage::open_store() and talks to it through storage/object_store.hpp.

The client library's own users (docs/architecture.md, "The public API"): the CLI, the bench and
the other tools (tools/), the micro-benchmarks (bench/) and the Python module (python/src/) drive
the client library through its public API only: they include no "client/..." header (the
private headers of src/client/, such as client/planner.hpp, whose public part is
objdirect/plan.hpp).

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
BACKEND_INCLUDE = re.compile(
    r'^\s*#\s*include\s+(<(?:rdma|ucp|ucs|uct)/[^>]+>|"transport/(?:libfabric|ucx)/[^"]+")', re.M)
BACKENDS = ("libfabric", "ucx")
STORE_INCLUDE = re.compile(r'^\s*#\s*include\s+"storage/(local|rados|s3|cache)/[^"]+"', re.M)
STORE_FACTORY = "src/storage/open_store.cc"
# Known crossings between backends, to be removed (not added to): (file, included header).
# The RADOS store keeps object metadata in the local store's byte format (docs/metadata_format.md).
STORE_EXCEPTIONS = {
    ("src/storage/rados/index_codec.hpp", "storage/local/meta_codec.hpp"),
}
# A string literal that names a fabric: "ucx", or anything with "libfabric:" followed by a
# provider or ending there (a prefix to build names from).
FABRIC_NAME = re.compile(r'^ucx$|libfabric:(?:[A-Za-z]|$)')
TEST_FILE = re.compile(r'(_test|_fuzz)(_[A-Za-z0-9_]+)?\.[a-z]+$')


def in_backend(rel: pathlib.PurePath) -> bool:
    return rel.parts[:2] == ("src", "transport") and len(rel.parts) > 3 and rel.parts[2] in BACKENDS


def string_literals(text: str):
    """(offset, contents) of every string literal of C/C++ source `text`, comments skipped.
    Handles escapes, raw strings (R"d(...)d" and its u8/u/U/L forms), character literals and
    digit separators (1'000)."""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif c == '"':
            k = i - 1
            while k >= 0 and (text[k].isalnum() or text[k] == "_"):
                k -= 1
            prefix = text[k + 1:i]
            if prefix in ("R", "u8R", "uR", "UR", "LR"):
                paren = text.find("(", i + 1)
                if paren < 0:
                    return
                end = text.find(")" + text[i + 1:paren] + '"', paren)
                if end < 0:
                    return
                yield i, text[paren + 1:end]
                i = end + len(text[i + 1:paren]) + 2
                continue
            j = i + 1
            while j < n and text[j] != '"' and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            yield i, text[i + 1:j]
            i = j + 1
        elif c == "'":
            k = i - 1
            while k >= 0 and (text[k].isalnum() or text[k] == "_"):
                k -= 1
            prefix = text[k + 1:i]
            if prefix and prefix not in ("u8", "u", "U", "L"):
                i += 1  # a digit separator (1'000), not a character literal
                continue
            j = i + 1
            while j < n and text[j] != "'" and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
        else:
            i += 1


def all_sources(root: pathlib.Path):
    """(top folder, path relative to root, text) of every C/C++ source of the checked folders."""
    for top in ("src", "include", "tools", "bench", "python"):
        if not (root / top).is_dir():
            continue
        for path in sorted((root / top).rglob("*")):
            if path.suffix in SOURCES and path.is_file():
                yield top, path.relative_to(root), path.read_text(errors="replace")


def seam_violations(root: pathlib.Path):
    for top, rel, text in all_sources(root):
        if in_backend(rel):
            continue
        in_transport = rel.parts[:2] == ("src", "transport")
        is_test = TEST_FILE.search(rel.name) is not None
        factory = rel.as_posix() == "src/transport/transport.cc"
        if not (factory or (in_transport and is_test)):
            for m in BACKEND_INCLUDE.finditer(text):
                line = text.count("\n", 0, m.start()) + 1
                yield (f"{rel}:{line}: backend header {m.group(1)} outside "
                       f"src/transport/<backend>/ (use transport/transport.hpp)")
        if top in ("tools", "bench") or factory or is_test:
            continue
        for at, lit in string_literals(text):
            if FABRIC_NAME.search(lit):
                line = text.count("\n", 0, at) + 1
                yield (f"{rel}:{line}: fabric name \"{lit}\" outside the transport table "
                       f"(ask transport::fabric_table() or caps())")


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
    for _, rel, text in all_sources(root):
        if rel.parts[:2] == ("src", "s3"):
            continue
        m = PUGI.search(text)
        if m:
            line = text.count("\n", 0, m.start()) + 1
            yield f"{rel}:{line}: pugixml outside src/s3/ (use the codecs of s3/documents.hpp)"


def public_api_violations(root: pathlib.Path):
    """include/objdirect/ is installed alone (docs/architecture.md, "The public API"): its headers
    include system headers and each other ("objdirect/..."), never a header of src/."""
    for _, rel, text in all_sources(root):
        if rel.parts[0] != "include":
            continue
        for m in INCLUDE.finditer(text):
            if not m.group(1).startswith("objdirect/"):
                line = text.count("\n", 0, m.start()) + 1
                yield (f"{rel}:{line}: the public API includes \"{m.group(1)}\" (only "
                       f"\"objdirect/...\" and system headers: include/ is installed alone)")

def store_seam_violations(root: pathlib.Path):
    for _, rel, text in all_sources(root):
        if rel.as_posix() == STORE_FACTORY or TEST_FILE.search(rel.name):
            continue
        for m in STORE_INCLUDE.finditer(text):
            own = rel.parts[:3] == ("src", "storage", m.group(1))
            header = m.group(0).split('"')[1]
            if own or (rel.as_posix(), header) in STORE_EXCEPTIONS:
                continue
            line = text.count("\n", 0, m.start()) + 1
            yield (f"{rel}:{line}: storage backend header {header} outside "
                   f"src/storage/{m.group(1)}/ (open stores with storage/open_store.hpp)")


# Folders whose code uses the client library through include/objdirect/ only.
PUBLIC_API_USERS = (("tools",), ("bench",), ("python", "src"))


def client_user_violations(root: pathlib.Path):
    for _, rel, text in all_sources(root):
        if not any(rel.parts[:len(top)] == top for top in PUBLIC_API_USERS):
            continue
        for m in INCLUDE.finditer(text):
            if m.group(1).startswith("client/"):
                line = text.count("\n", 0, m.start()) + 1
                yield (f"{rel}:{line}: includes the client library's private "
                       f"\"{m.group(1)}\" (use the public API, include/objdirect/)")


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent)
    bad = (list(violations(root.resolve())) + list(seam_violations(root.resolve())) +
           list(public_api_violations(root.resolve())) +
           list(store_seam_violations(root.resolve())) +
           list(client_user_violations(root.resolve())))
    for v in bad:
        print(v)
    if bad:
        print(f"layering: {len(bad)} violation(s) of the allowed direction or the transport seam")
        return 1
    print("layering: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
