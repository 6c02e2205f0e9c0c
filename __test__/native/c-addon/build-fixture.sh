#!/usr/bin/env bash
# Builds one plain C test fixture (Node's headers and include/napi_dlpack.h only, never Rust):
#   build-fixture.sh NAME SOURCE OUTPUT   (SOURCE relative to the repository root; OUTPUT goes to
#   target/NAME/). Used by __test__/native/c-addon/build.sh and __test__/native/exchange-c/build.sh. Does
#   nothing if the output is newer than the source, the header and both build scripts.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
NAME="$1"
SRC="$ROOT/$2"
HDR="$ROOT/include/napi_dlpack.h"
OUT_DIR="$ROOT/target/$NAME"
OUT="$OUT_DIR/$3"
CALLER="${BASH_SOURCE[1]:-${BASH_SOURCE[0]}}"
NODE_INC="${NODE_INCLUDE_DIR:-/usr/include/node}"
CC="${CC:-cc}"

if [ -f "$OUT" ] && [ "$OUT" -nt "$SRC" ] && [ "$OUT" -nt "$HDR" ] &&
   [ "$OUT" -nt "${BASH_SOURCE[0]}" ] && [ "$OUT" -nt "$CALLER" ]; then
  echo "$NAME: up to date ($OUT)"
  exit 0
fi

if [ ! -f "$NODE_INC/node_api.h" ]; then
  echo "$NAME: node_api.h not found in $NODE_INC (set NODE_INCLUDE_DIR)" >&2
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
echo "$NAME: built $OUT"
