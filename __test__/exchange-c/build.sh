#!/usr/bin/env bash
# Builds the plain C exchange-table fixture target/exchange-c/exchange_c.node
# from __test__/exchange-c/exchange_c.c and include/napi_dlpack.h (the header only). Works from any cwd;
# does nothing if the output is newer than both sources.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SRC="$ROOT/__test__/exchange-c/exchange_c.c"
HDR="$ROOT/include/napi_dlpack.h"
OUT_DIR="$ROOT/target/exchange-c"
OUT="$OUT_DIR/exchange_c.node"
NODE_INC="${NODE_INCLUDE_DIR:-/usr/include/node}"
CC="${CC:-cc}"

if [ -f "$OUT" ] && [ "$OUT" -nt "$SRC" ] && [ "$OUT" -nt "$HDR" ] &&
   [ "$OUT" -nt "${BASH_SOURCE[0]}" ]; then
  echo "exchange-c: up to date ($OUT)"
  exit 0
fi

if [ ! -f "$NODE_INC/node_api.h" ]; then
  echo "exchange-c: node_api.h not found in $NODE_INC (set NODE_INCLUDE_DIR)" >&2
  exit 1
fi

EXTRA=()
# macOS: Node-API symbols are resolved from the node binary at load time.
if [ "$(uname -s)" = "Darwin" ]; then EXTRA=(-undefined dynamic_lookup); fi

mkdir -p "$OUT_DIR"
# Build to a temporary name and rename, so a failed build never leaves a
# half-written addon that looks up to date.
"$CC" -O2 -fPIC -shared -Wall -Wextra -Werror -DNAPI_VERSION=8 \
  -I"$NODE_INC" -I"$ROOT/include" \
  ${EXTRA[@]+"${EXTRA[@]}"} -o "$OUT.tmp" "$SRC" -lm -pthread
mv -f "$OUT.tmp" "$OUT"
echo "exchange-c: built $OUT"
