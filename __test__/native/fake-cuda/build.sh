#!/usr/bin/env bash
# Builds the fake CUDA driver (a TEST DOUBLE, not a driver) and its Node
# control addon:
#   target/fake-cuda/libcuda.so      (+ libcuda.so.1 symlink)
#   target/fake-cuda/control.node
# Usage: __test__/native/fake-cuda/build.sh [--test] [--force]
#   --test   also build and run selftest.c (C API) and a control.node smoke test
#   --force  rebuild even if the outputs are newer than the sources
# Works from any directory. Needs gcc; control.node needs the Node-API headers
# (NODE_INCLUDE_DIR, else /usr/include/node, else <node prefix>/include/node).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
out="$root/target/fake-cuda"
run_tests=0
force=0
for arg in "$@"; do
  case "$arg" in
    --test) run_tests=1 ;;
    --force) force=1 ;;
    -h|--help) sed -n '2,10p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "build.sh: unknown argument: $arg" >&2; exit 2 ;;
  esac
done

CC=gcc
CFLAGS=(-std=c11 -O2 -g -Wall -Wextra -Werror -pthread -fPIC)
mkdir -p "$out"

# up_to_date OUTPUT SOURCES...: true when OUTPUT exists and is newer than all.
up_to_date() {
  local target="$1"; shift
  [[ $force -eq 0 && -e "$target" ]] || return 1
  local src
  for src in "$@"; do
    [[ "$target" -nt "$src" ]] || return 1
  done
}

# Build into a temporary file, then rename: concurrent builds never see a
# half-written library.
lib="$out/libcuda.so"
if up_to_date "$lib" "$here/fake_cuda.c" "$here/fake_cuda.h" "$here/build.sh"; then
  echo "fake-cuda: $lib is up to date"
else
  "$CC" "${CFLAGS[@]}" -fvisibility=hidden -shared \
    -Wl,-soname,libcuda.so -Wl,-z,nodelete \
    -o "$lib.tmp.$$" "$here/fake_cuda.c"
  mv -f "$lib.tmp.$$" "$lib"
  echo "fake-cuda: built $lib"
fi
ln -sfn libcuda.so "$out/libcuda.so.1"

node_include="${NODE_INCLUDE_DIR:-}"
if [[ -z "$node_include" ]]; then
  if [[ -f /usr/include/node/node_api.h ]]; then
    node_include=/usr/include/node
  elif command -v node >/dev/null 2>&1; then
    node_include="$(cd "$(dirname "$(command -v node)")/.." && pwd)/include/node"
  fi
fi
if [[ -z "$node_include" || ! -f "$node_include/node_api.h" ]]; then
  echo "fake-cuda: node_api.h not found; set NODE_INCLUDE_DIR" >&2
  exit 1
fi

addon="$out/control.node"
if up_to_date "$addon" "$here/control.c" "$here/fake_cuda.h" "$here/build.sh"; then
  echo "fake-cuda: $addon is up to date"
else
  "$CC" "${CFLAGS[@]}" -shared -DNAPI_VERSION=8 -I"$node_include" -I"$here" \
    -o "$addon.tmp.$$" "$here/control.c" -ldl
  mv -f "$addon.tmp.$$" "$addon"
  echo "fake-cuda: built $addon"
fi

if [[ $run_tests -eq 1 ]]; then
  st="$out/selftest"
  if ! up_to_date "$st" "$here/selftest.c" "$here/fake_cuda.h" "$lib"; then
    "$CC" "${CFLAGS[@]}" -I"$here" -o "$st.tmp.$$" "$here/selftest.c" \
      -L"$out" -lcuda -Wl,-rpath,"$out"
    mv -f "$st.tmp.$$" "$st"
  fi
  # Each run sees only the fake (LD_LIBRARY_PATH first, rpath as backup) and a
  # clean FAKE_CUDA_* environment.
  run() { env -u FAKE_CUDA_DEFERRED -u FAKE_CUDA_FAULTS -u FAKE_CUDA_DEVICE_COUNT \
            LD_LIBRARY_PATH="$out${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"; }
  run "$st" main
  run FAKE_CUDA_DEVICE_COUNT=0 "$st" nodevice
  run FAKE_CUDA_DEFERRED=1 "$st" envdeferred
  run FAKE_CUDA_FAULTS=cuInit:1:34 "$st" envfault
  run FAKE_CUDA_DEVICE_COUNT=2 "$st" twodev
  if command -v node >/dev/null 2>&1; then
    run node "$here/control-smoke.cjs" "$addon" "$lib"
  else
    echo "fake-cuda: node not found, control.node smoke test skipped"
  fi
  echo "fake-cuda: all self-tests passed"
fi
