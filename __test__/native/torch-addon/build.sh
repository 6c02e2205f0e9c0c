#!/usr/bin/env bash
# Builds the libtorch test addon target/torch-addon/torch_addon.node from
# __test__/native/torch-addon/torch_addon.cpp (one translation unit with ATen's dlpack.h) against Debian's
# libtorch-dev (torch 1.13, CPU) and include/napi_dlpack.h. Works from any cwd;
# does nothing when the output is newer than every input.
#
# Needs libtorch-dev: run __test__/native/torch-addon/install-deps.sh first (as root).
# NAPI_DLPACK_SKIP_TORCH=1 skips the build; __test__/peers/torch.spec.ts then reports
# its tests as skipped (visibly), instead of failing.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
OUT_DIR="$ROOT/target/torch-addon"
OUT="$OUT_DIR/torch_addon.node"
NODE_INC="${NODE_INCLUDE_DIR:-/usr/include/node}"
TORCH_INC="${TORCH_INCLUDE_DIR:-/usr/include}"
TORCH_LIB="${TORCH_LIB_DIR:-/usr/lib/$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)}"
CXX="${CXX:-g++}"

if [ "${NAPI_DLPACK_SKIP_TORCH:-}" = "1" ]; then
  echo "torch-addon: SKIPPED (NAPI_DLPACK_SKIP_TORCH=1); the torch interop tests will be skipped"
  exit 0
fi

INPUTS=("$HERE/torch_addon.cpp" "$ROOT/include/napi_dlpack.h" "${BASH_SOURCE[0]}")
up_to_date=1
[ -f "$OUT" ] || up_to_date=0
for input in "${INPUTS[@]}"; do
  [ "$up_to_date" = 1 ] && [ "$OUT" -nt "$input" ] || up_to_date=0
done
if [ "$up_to_date" = 1 ]; then
  echo "torch-addon: up to date ($OUT)"
  exit 0
fi

if [ ! -f "$TORCH_INC/ATen/dlpack.h" ] || [ ! -e "$TORCH_LIB/libtorch_cpu.so" ]; then
  echo "torch-addon: libtorch not found (ATen/dlpack.h in $TORCH_INC, libtorch_cpu.so in $TORCH_LIB)." >&2
  echo "torch-addon: install it with: sudo bash __test__/native/torch-addon/install-deps.sh" >&2
  echo "torch-addon: (or set NAPI_DLPACK_SKIP_TORCH=1 to skip the torch tests explicitly)" >&2
  exit 1
fi
if [ ! -f "$NODE_INC/node_api.h" ]; then
  echo "torch-addon: node_api.h not found in $NODE_INC (set NODE_INCLUDE_DIR)" >&2
  exit 1
fi

mkdir -p "$OUT_DIR"
FLAGS=(-std=c++17 -O1 -fPIC -Wall -Wextra -DNAPI_VERSION=8 -I"$NODE_INC" -I"$ROOT/include")
TORCH_FLAGS=()
# /usr/include is searched already (and -isystem on it breaks #include_next).
if [ "$TORCH_INC" != "/usr/include" ]; then TORCH_FLAGS=(-isystem "$TORCH_INC"); fi
# One translation unit: libtorch's ATen/dlpack.h and include/napi_dlpack.h together.
"$CXX" "${FLAGS[@]}" ${TORCH_FLAGS[@]+"${TORCH_FLAGS[@]}"} -c "$HERE/torch_addon.cpp" -o "$OUT_DIR/torch_addon.o"
# Link to a temporary name and rename, so a failed build never leaves a
# half-written addon that looks up to date.
"$CXX" -shared -o "$OUT.tmp" "$OUT_DIR/torch_addon.o" \
  -L"$TORCH_LIB" -Wl,--no-as-needed -ltorch_cpu -lc10 -Wl,--as-needed
mv -f "$OUT.tmp" "$OUT"
echo "torch-addon: built $OUT"
