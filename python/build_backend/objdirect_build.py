"""PEP 517 build backend for `pip install ./python`: runs CMake, writes the wheel. Offline.

Why not setuptools or scikit-build: pip's build isolation would download them from PyPI, and
this must install with no index reachable. This backend needs only the standard library, CMake,
a C++ compiler and the Debian packages of the ObjDirect build (pybind11-dev among them); so
pyproject.toml says `requires = []`.

What build_wheel does:
 1. configures the ObjDirect source tree (the parent of python/) into a build directory with
    OBJDIRECT_PYTHON set to the interpreter running pip (so the extension's ABI matches it), then
    builds the one target objdirect_python: the extension linked statically against
    libobjdirect, plus the package's .py files, under <build>/python/objdirect/;
 2. zips that directory with a .dist-info (METADATA, WHEEL, RECORD) into a wheel tagged for this
    interpreter and platform.

Config settings (pip --config-settings KEY=VALUE):
  build-dir=DIR  build there and keep it (incremental rebuilds); default: a temporary directory,
                 removed afterwards. An already configured ObjDirect build tree may be named: its
                 cache is kept (only OBJDIRECT_PYTHON is set) and only objdirect_python is built.
  jobs=N         parallel compile jobs (default: CMAKE_BUILD_PARALLEL_LEVEL, else 2).
  build-type=T   CMAKE_BUILD_TYPE for a new build directory (default Release).
Environment: OBJDIRECT_CMAKE (the cmake binary, default "cmake").

Errors: a failed configure or build raises RuntimeError naming the command; its output is on
pip's log (pip -v shows it).
"""

from __future__ import annotations

import base64
import hashlib
import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile

NAME = "objdirect"
VERSION = "0.1.0"
SUMMARY = "S3 over RDMA: the ObjDirect client for Python"

_PY_DIR = pathlib.Path(__file__).resolve().parent.parent  # python/
_SOURCE_DIR = _PY_DIR.parent  # the ObjDirect tree


def _metadata() -> str:
    readme = (_PY_DIR / "README.md").read_text(encoding="utf-8") if (_PY_DIR / "README.md").exists() else ""
    return (f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\nSummary: {SUMMARY}\n"
            "License: Apache-2.0\nRequires-Python: >=3.9\n"
            "Provides-Extra: torch\nRequires-Dist: torch; extra == \"torch\"\n"
            "Description-Content-Type: text/markdown\n\n" + readme)


def _tag() -> str:
    impl = f"cp{sys.version_info.major}{sys.version_info.minor}"
    abi = impl + getattr(sys, "abiflags", "")
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"{impl}-{abi}-{plat}"


def _wheel_file() -> str:
    return (f"Wheel-Version: 1.0\nGenerator: objdirect_build {VERSION}\nRoot-Is-Purelib: false\n"
            f"Tag: {_tag()}\n")


# -- PEP 517 hooks -------------------------------------------------------------------------------


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


# fsspec finds the "objdirect" protocol through this entry point (objdirect/fs.py).
ENTRY_POINTS = "[fsspec.specs]\nobjdirect = objdirect.fs:ObjDirectFileSystem\n"


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    info = pathlib.Path(metadata_directory) / f"{NAME}-{VERSION}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(_metadata(), encoding="utf-8")
    (info / "WHEEL").write_text(_wheel_file(), encoding="utf-8")
    (info / "entry_points.txt").write_text(ENTRY_POINTS, encoding="utf-8")
    return info.name


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    settings = dict(config_settings or {})
    build_dir = settings.get("build-dir")
    temp = None
    if not build_dir:
        temp = tempfile.mkdtemp(prefix="objdirect-wheel-")
        build_dir = temp
    try:
        pkg = _cmake_build(pathlib.Path(build_dir).resolve(), settings)
        return _write_wheel(pathlib.Path(wheel_directory), pkg)
    finally:
        if temp:
            shutil.rmtree(temp, ignore_errors=True)


# -- the build ---------------------------------------------------------------------------------


def _run(cmd, **kwargs):
    print("objdirect_build: " + " ".join(str(c) for c in cmd), file=sys.stderr, flush=True)
    r = subprocess.run([str(c) for c in cmd], **kwargs)
    if r.returncode != 0:
        raise RuntimeError(f"objdirect_build: {' '.join(str(c) for c in cmd)} failed (rc={r.returncode})")


def _cmake_build(build_dir: pathlib.Path, settings: dict) -> pathlib.Path:
    if not (_SOURCE_DIR / "CMakeLists.txt").exists() or not (_SOURCE_DIR / "src" / "client").is_dir():
        raise RuntimeError(f"objdirect_build: {_SOURCE_DIR} is not the ObjDirect source tree; "
                           "build from a checkout (pip install ./python)")
    cmake = os.environ.get("OBJDIRECT_CMAKE", "cmake")
    jobs = settings.get("jobs") or os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or "2"
    configure = [cmake, "-S", _SOURCE_DIR, "-B", build_dir, f"-DOBJDIRECT_PYTHON={sys.executable}"]
    if not (build_dir / "CMakeCache.txt").exists():
        configure += [f"-DCMAKE_BUILD_TYPE={settings.get('build-type', 'Release')}"]
        if shutil.which("ninja"):
            configure += ["-G", "Ninja"]
    # The build tree's output goes to stderr: pip shows it with -v and on failure.
    _run(configure, stdout=sys.stderr)
    _run([cmake, "--build", build_dir, "--target", "objdirect_python", "-j", jobs], stdout=sys.stderr)
    pkg = build_dir / "python" / NAME
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    if not (pkg / f"_objdirect{suffix}").exists():
        found = sorted(p.name for p in pkg.glob("_objdirect*")) if pkg.is_dir() else []
        raise RuntimeError(f"objdirect_build: no _objdirect{suffix} for this interpreter in {pkg} "
                           f"(found {found}); is the build directory configured for another python?")
    return pkg


def _write_wheel(wheel_directory: pathlib.Path, pkg: pathlib.Path) -> str:
    wheel_directory.mkdir(parents=True, exist_ok=True)
    name = f"{NAME}-{VERSION}-{_tag()}.whl"
    info = f"{NAME}-{VERSION}.dist-info"
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    files = []
    for p in sorted(pkg.iterdir()):
        if p.suffix == ".py" or p.name == f"_objdirect{suffix}":
            files.append((f"{NAME}/{p.name}", p.read_bytes()))
    files.append((f"{info}/METADATA", _metadata().encode()))
    files.append((f"{info}/WHEEL", _wheel_file().encode()))
    files.append((f"{info}/top_level.txt", f"{NAME}\n".encode()))
    files.append((f"{info}/entry_points.txt", ENTRY_POINTS.encode()))
    record = []
    path = wheel_directory / name
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for arc, data in files:
            z.writestr(_zipinfo(arc, 0o755 if arc.endswith(suffix) else 0o644), data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{arc},sha256={digest},{len(data)}")
        record.append(f"{info}/RECORD,,")
        z.writestr(_zipinfo(f"{info}/RECORD", 0o644), "\n".join(record) + "\n")
    return name


def _zipinfo(arcname: str, mode: int) -> zipfile.ZipInfo:
    zi = zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0))  # reproducible
    zi.external_attr = (0o100000 | mode) << 16
    zi.compress_type = zipfile.ZIP_DEFLATED
    return zi
