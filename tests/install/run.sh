#!/usr/bin/env bash
# ctest install_package: `cmake --install` of this build into a temporary prefix; the installed
# libobjdirect.so exports nothing but the public API (scripts/check-exports.py); each installed
# header compiles on its own; then two programs built only from what was installed, each running
# a PUT and a GET against the real objdirect-server on a loopback port:
#   1. a separate CMake project using find_package(objdirect) (tests/install/consumer);
#   2. the same source compiled with `pkg-config --cflags --libs objdirect`.
# Usage: run.sh BUILD_DIR SOURCE_DIR
# OBJDIRECT_CONSUMER_FLAGS (set by ctest in sanitizer builds): extra compile and link flags for the
# two consumers, which must link the sanitizer runtime the installed library was built with.
set -euo pipefail
cflags=${OBJDIRECT_CONSUMER_FLAGS:-}
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/objdirect-install.XXXXXX")
server_pid=
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
for f in include/objdirect/client.hpp include/objdirect/config.hpp include/objdirect/status.hpp include/objdirect/plan.hpp \
         include/objdirect/export.hpp include/objdirect/objdirect.h \
         lib*/cmake/objdirect/objdirectConfig.cmake \
         lib*/pkgconfig/objdirect.pc; do
  compgen -G "$work/prefix/$f" > /dev/null || { echo "install: $f missing"; cat "$work/install.log"; exit 1; }
done
so=$(find "$work/prefix" -name 'libobjdirect.so.*.*' | head -1)
[ -n "$so" ] || { echo "install: no versioned libobjdirect.so"; exit 1; }
soname=$(objdump -p "$so" | awk '$1 == "SONAME" {print $2}')
[ "$soname" = libobjdirect.so.0 ] || { echo "install: SONAME is '$soname', not libobjdirect.so.0"; exit 1; }

# Only the public API is exported (hidden default visibility; docs/architecture.md, "The public
# API"), and the check itself refuses an internal symbol.
python3 "$src/scripts/check-exports.py" "$so" || exit 1
if printf '0000000000001000 T objdirect::client::HttpClient::close()\n' \
    | python3 "$src/scripts/check-exports.py" --stdin > /dev/null; then
  echo "install: check-exports.py accepted an internal symbol"; exit 1
fi

# Each installed header compiles on its own, with the install prefix as the only include folder
# (C++20 with the project's warnings; objdirect.h also as C11).
inc="-I$work/prefix/include"
warn="-Wall -Wextra -Wpedantic -Werror"
for h in client.hpp config.hpp status.hpp export.hpp plan.hpp objdirect.h; do
  # shellcheck disable=SC2086
  echo "#include <objdirect/$h>" | c++ -std=c++20 -fsyntax-only $warn $inc -x c++ - \
    || { echo "install: objdirect/$h does not compile on its own"; exit 1; }
done
# shellcheck disable=SC2086
echo "#include <objdirect/objdirect.h>" | cc -std=c11 -fsyntax-only $warn $inc -x c - \
  || { echo "install: objdirect/objdirect.h does not compile as C"; exit 1; }

# 1. find_package
cmake -S "$src/tests/install/consumer" -B "$work/consumer" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_CXX_FLAGS="$cflags" -DCMAKE_EXE_LINKER_FLAGS="$cflags" > "$work/configure.log" || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/consumer" > "$work/build.log" || { cat "$work/build.log"; exit 1; }
# 2. pkg-config
pcdir=$(dirname "$(find "$work/prefix" -name objdirect.pc | head -1)")
# shellcheck disable=SC2046
# shellcheck disable=SC2086
c++ -O1 $cflags -o "$work/consumer-pc" "$src/tests/install/consumer/main.cc" \
  $(PKG_CONFIG_PATH="$pcdir" pkg-config --cflags --libs objdirect)
libdir=$(dirname "$so")

mkdir -p "$work/data"
"$build/bin/objdirect-server" --listen 127.0.0.1:0 --data "$work/data" --access-key installtest \
  --secret-key installtest-secret --fabric none > "$work/server.out" 2> "$work/server.log" &
server_pid=$!
for _ in $(seq 100); do
  grep -q 'listening on' "$work/server.out" && break
  sleep 0.1
done
endpoint=$(grep -o 'http://127.0.0.1:[0-9]*' "$work/server.out" | head -1)
[ -n "$endpoint" ] || { echo "server did not start"; cat "$work/server.log"; exit 1; }

# Neither program may find the build tree's library: only the installed one.
LD_LIBRARY_PATH= "$work/consumer/consumer" "$endpoint" installtest installtest-secret cmake-pkg
LD_LIBRARY_PATH="$libdir" "$work/consumer-pc" "$endpoint" installtest installtest-secret pc-pkg
echo "install_package: find_package and pkg-config consumers both ran PUT+GET against the server"
