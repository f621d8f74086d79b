#!/usr/bin/env bash
# GPU memory check for a machine with an NVIDIA GPU, in one go (about 2-5 minutes):
#   1. scripts/bootstrap (skipped with a warning when apt cannot reach a mirror),
#   2. configures and builds build-gpu-check/ (Release) with the CUDA toolkit's headers and nvcc,
#   3. runs the objdirect_cuda unit tests, the GPU tests (which must not skip here) and the
#      Client's device-memory test (client_device_memory_test, against the fake CUDA library),
#   4. runs objdirect-gpu-check: its own objdirect-server (and one with RDMA off), then
#      Client::put from and Client::get into DEVICE pointers (the Client's staging pipeline),
#      4 KiB to 4 GiB over libfabric shm, libfabric tcp, UCX and HTTP, Range GET into an offset
#      of a device buffer, and the HTTP fallback into device memory (row "fallback"), each
#      verified by CRC32C of the device bytes, next to a pinned cudaMemcpy H2D/D2H baseline;
#      prints a table,
#   5. the Python checks, with $PYTHON (default python3) when it has torch >= 2.0 with CUDA:
#      builds objdirect_python for it, runs python/tests/test_torch_gpu.py (load into GPU
#      memory, safetensors, device datasets; OBJDIRECT_REQUIRE_GPU=1: no skipping) and
#      python/tests/test_dcp.py (DCP save/load/async_save, FileSystemWriter's layout both ways,
#      a CUDA model's tensors written through the bounded pinned pool (its high-water mark
#      within pinned_pool_bytes_max, no torch.save), loads landing in CUDA destination tensors
#      by get_into with no torch.load fallback; OBJDIRECT_REQUIRE_DCP=1), then bench/torch_bench.py gpu-load (GPU_LOAD_MIB, default 4096:
#      torch and safetensors checkpoints loaded into device memory next to a pinned H2D copy).
#      Without such a torch the step says the Python checks did NOT run (exit status unchanged).
# Usage: scripts/gpu-check.sh [extra objdirect-gpu-check options]
# Environment: BUILD_DIR (default build-gpu-check), SIZES (bytes, space-separated; default 4 KiB
# 1 MiB 64 MiB 1 GiB 4 GiB), FABRICS (default "libfabric:shm libfabric:tcp ucx none"),
# CHECK_TIMEOUT_S (the objdirect-gpu-check run, default 240), CUDA_HOME (default /usr/local/cuda).
# Without a GPU (the script's own test, ctest gpu_check_script_fake_cuda):
#   FAKE_CUDA=<path of libobjdirect_fake_cuda.so>  CUDA comes from the tests' fake library
#       (device memory the CPU cannot touch); the GPU-only tests are skipped, the rest runs;
#   SKIP_BUILD=1  no bootstrap, configure or build: BUILD_DIR must hold the built targets.
# Exit status: 0 all passed; non-zero otherwise (the failing step is printed).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build-gpu-check}"
CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
SIZES="${SIZES:-4096 1048576 67108864 1073741824 4294967296}"
FABRICS="${FABRICS:-libfabric:shm libfabric:tcp ucx none}"
CHECK_TIMEOUT_S="${CHECK_TIMEOUT_S:-240}"
FAKE_CUDA="${FAKE_CUDA:-}"
SKIP_BUILD="${SKIP_BUILD:-0}"
JOBS="$(nproc)"
start=$(date +%s)
step() { echo; echo "== gpu-check: $* ($(( $(date +%s) - start )) s)"; }

step "machine"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
else
  echo "nvidia-smi not found (the tests will say whether libcuda loads)"
fi
[ -x "$CUDA_HOME/bin/nvcc" ] && "$CUDA_HOME/bin/nvcc" --version | tail -1 || \
  echo "no nvcc at $CUDA_HOME: the CRC32C kernel and objdirect-gpu-check are not built"
export PATH="$CUDA_HOME/bin:$PATH"
# libcudart is dlopened: let the loader find the toolkit's copy.
export LD_LIBRARY_PATH="$CUDA_HOME/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

if [ -n "$FAKE_CUDA" ]; then
  [ -f "$FAKE_CUDA" ] || { echo "gpu-check: FAKE_CUDA=$FAKE_CUDA does not exist"; exit 1; }
  echo "FAKE_CUDA: CUDA comes from $FAKE_CUDA (no GPU: the figures mean nothing)"
  export OBJDIRECT_CUDA_LIBRARY="$FAKE_CUDA" OBJDIRECT_CUDART_LIBRARY="$FAKE_CUDA"
fi

if [ "$SKIP_BUILD" = 1 ]; then
  step "build skipped (SKIP_BUILD=1): using $BUILD_DIR"
else
  step "bootstrap"
  "$ROOT/scripts/bootstrap" || echo "WARNING: bootstrap failed (no apt mirror?); continuing with what is installed"

  step "configure $BUILD_DIR"
  export CUDA_HOME
  cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null

  step "build"
  targets=(objdirect-server cuda_bounce_test cuda_crc32c_test cuda_gpu_test objdirect_fake_cuda
    client_device_memory_test)
  if ninja -C "$BUILD_DIR" -t targets all | grep -q '^objdirect-gpu-check:'; then
    targets+=(objdirect-gpu-check)
  fi
  ninja -C "$BUILD_DIR" -j"$JOBS" "${targets[@]}"
fi

step "unit tests (bounce scheduler with host memory, CRC32C host code)"
"$BUILD_DIR/tests/cuda_bounce_test" --gtest_brief=1
"$BUILD_DIR/tests/cuda_crc32c_test" --gtest_brief=1

step "Client with device memory (fake CUDA: proves no CPU access to device pointers)"
OBJDIRECT_CUDA_LIBRARY="$BUILD_DIR/tests/libobjdirect_fake_cuda.so" \
OBJDIRECT_CUDART_LIBRARY="$BUILD_DIR/tests/libobjdirect_fake_cuda.so" \
  "$BUILD_DIR/tests/client_device_memory_test" --gtest_brief=1

if [ -n "$FAKE_CUDA" ]; then
  step "GPU tests skipped (FAKE_CUDA: they need a real GPU)"
else
  step "GPU tests (must not skip on this machine)"
  out="$("$BUILD_DIR/tests/cuda_gpu_test" 2>&1)" || { echo "$out"; echo "gpu-check: GPU tests FAILED"; exit 1; }
  echo "$out" | grep -E '^\[ *(OK|FAILED|PASSED) *\]|dmabuf' || true
  if echo "$out" | grep -q '^\[  SKIPPED \] GpuTest'; then
    echo "$out" | grep -A1 'Skipped' | head -4
    echo "gpu-check: GPU tests SKIPPED: no usable GPU here"
    exit 1
  fi
fi

if [ ! -x "$BUILD_DIR/bin/objdirect-gpu-check" ]; then
  echo "gpu-check: objdirect-gpu-check was not built (no CUDA toolkit headers); stopping"
  exit 1
fi
step "objdirect-gpu-check (device memory through libobjdirect, timeout ${CHECK_TIMEOUT_S} s)"
# shellcheck disable=SC2086 # sizes and fabrics are word lists
timeout "$CHECK_TIMEOUT_S" "$BUILD_DIR/bin/objdirect-gpu-check" \
  --server "$BUILD_DIR/bin/objdirect-server" --fabric $FABRICS --size $SIZES "$@"
PY="${PYTHON:-python3}"
python_note=""
if [ -n "$FAKE_CUDA" ]; then
  step "Python GPU and DCP checks skipped (FAKE_CUDA: they need torch with a real GPU)"
elif ! "$PY" -c 'import sys, torch, pytest; sys.exit(0 if torch.cuda.is_available() and int(torch.__version__.split(".")[0]) >= 2 else 1)' 2>/dev/null; then
  step "Python GPU and DCP checks NOT RUN: $PY has no torch >= 2.0 with CUDA (or no pytest)"
  python_note=" (Python GPU and DCP checks not run)"
else
  step "Python: objdirect.torch into GPU memory and DCP ($PY, $("$PY" -c 'import torch; print("torch", torch.__version__)'))"
  cmake -S "$ROOT" -B "$BUILD_DIR" -DOBJDIRECT_PYTHON="$(command -v "$PY")" >/dev/null
  ninja -C "$BUILD_DIR" -j"$JOBS" objdirect_python objdirect-server
  (cd "$ROOT/python/tests" && OBJDIRECT_REQUIRE_GPU=1 OBJDIRECT_REQUIRE_DCP=1 \
     OBJDIRECT_BIN_DIR="$BUILD_DIR/bin" PYTHONPATH="$BUILD_DIR/python" \
     "$PY" -m pytest -q -rs -p no:cacheprovider test_torch_gpu.py test_dcp.py)
  PYTHONPATH="$BUILD_DIR/python" "$PY" "$ROOT/bench/torch_bench.py" gpu-load \
    --mib "${GPU_LOAD_MIB:-4096}" --bin-dir "$BUILD_DIR/bin" --fabric "${GPU_LOAD_FABRIC:-libfabric:shm}"
fi
step "done: PASS$python_note"
