#!/usr/bin/env bash
# Builds target/cuda-peer/cuda_peer.node from __test__/native/cuda-peer/cuda_peer.c and
# include/napi_dlpack.h: an independent CUDA producer/consumer for
# __test__/cuda/*.spec.ts. It reaches the CUDA driver through dlopen at run
# time, so it builds without CUDA. Works from any cwd; does nothing if the
# output is newer than its sources.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
SRC="$ROOT/__test__/native/cuda-peer/cuda_peer.c"
HDR="$ROOT/include/napi_dlpack.h"
OUT_DIR="$ROOT/target/cuda-peer"
OUT="$OUT_DIR/cuda_peer.node"
CC="${CC:-cc}"

if [ -f "$OUT" ] && [ "$OUT" -nt "$SRC" ] && [ "$OUT" -nt "$HDR" ] &&
   [ "$OUT" -nt "${BASH_SOURCE[0]}" ]; then
  echo "cuda-peer: up to date ($OUT)"
  exit 0
fi

NODE_INC="${NODE_INCLUDE_DIR:-}"
if [ -z "$NODE_INC" ]; then
  if [ -f /usr/include/node/node_api.h ]; then
    NODE_INC=/usr/include/node
  elif command -v node >/dev/null 2>&1; then
    NODE_INC="$(cd "$(dirname "$(command -v node)")/.." && pwd)/include/node"
  fi
fi
if [ -z "$NODE_INC" ] || [ ! -f "$NODE_INC/node_api.h" ]; then
  echo "cuda-peer: node_api.h not found (set NODE_INCLUDE_DIR)" >&2
  exit 1
fi

mkdir -p "$OUT_DIR"
"$CC" -std=c11 -O2 -fPIC -shared -Wall -Wextra -Werror -DNAPI_VERSION=8 -D_GNU_SOURCE -pthread \
  -I"$NODE_INC" -I"$ROOT/include" -o "$OUT.tmp.$$" "$SRC" -ldl
mv -f "$OUT.tmp.$$" "$OUT"
echo "cuda-peer: built $OUT"
