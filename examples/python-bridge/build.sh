#!/usr/bin/env bash
# Builds the Python bridge example in place (everything it makes stays in this folder, ignored
# by git): node-calls-python from npm (node_modules/), compiled by node-gyp, and the native glue
# bridge.c (build/napi_dlpack_bridge.node), both against ONE Python: Debian's by default.
#
#   NAPI_DLPACK_PYTHON         the interpreter (default /usr/bin/python3, Debian's python3)
#   NAPI_DLPACK_PYTHON_CONFIG  its python3-config (default "$NAPI_DLPACK_PYTHON-config",
#                              from python3-dev)
#   NAPI_DLPACK_NODEDIR        Node's install prefix, holding include/node (default: the prefix
#                              of the running `node`, e.g. /usr for Debian/NodeSource packages)
#
# Why one Python, chosen here: node-calls-python runs `python3-config` and `python3` from PATH
# at build time (include and link flags) AND when it loads (it dlopens the libpython found by
# `python3-config --configdir`). On a machine where pyenv's shims come first in PATH, that mixes
# pyenv's libpython with Debian's and the process crashes in the GIL. So this script puts
# wrappers for the chosen interpreter in build/bin, builds with them first in PATH, and records
# the choice in build/config.json for index.js to do the same at load time.
#
# node-gyp gets --nodedir (through npm_config_nodedir) so it never downloads Node's headers.
# numpy is not installed here: install-deps.sh does that (pip --target .python-packages).
# Idempotent: does nothing when the outputs are newer than their inputs.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
PYTHON="${NAPI_DLPACK_PYTHON:-/usr/bin/python3}"
PYTHON_CONFIG="${NAPI_DLPACK_PYTHON_CONFIG:-$PYTHON-config}"
NODEDIR="${NAPI_DLPACK_NODEDIR:-$(node -p 'require("path").resolve(process.execPath, "..", "..")')}"
BUILD="$HERE/build"
OUT="$BUILD/napi_dlpack_bridge.node"
CC="${CC:-cc}"

# Exit status 77: a missing prerequisite (scripts/test.mjs reports it as a skip, which fails CI).
if [ ! -x "$PYTHON" ]; then echo "python-bridge: $PYTHON not found (NAPI_DLPACK_PYTHON)" >&2; exit 77; fi
if [ ! -x "$PYTHON_CONFIG" ]; then
  echo "python-bridge: $PYTHON_CONFIG not found: install python3-dev (bash $HERE/install-deps.sh)" >&2
  exit 77
fi
if [ ! -f "$NODEDIR/include/node/node_api.h" ] || [ ! -f "$NODEDIR/include/node/common.gypi" ]; then
  echo "python-bridge: Node's headers are not in $NODEDIR/include/node (set NAPI_DLPACK_NODEDIR)" >&2
  exit 77
fi

mkdir -p "$BUILD/bin"
# Wrappers, not symlinks: Debian's python3-config finds its prefix from its own path.
printf '#!/bin/sh\nexec "%s" "$@"\n' "$PYTHON" >"$BUILD/bin/python3"
printf '#!/bin/sh\nexec "%s" "$@"\n' "$PYTHON_CONFIG" >"$BUILD/bin/python3-config"
chmod +x "$BUILD/bin/python3" "$BUILD/bin/python3-config"
export PATH="$BUILD/bin:$PATH"

CONFIG_JSON="$(printf '{ "python": "%s", "pythonConfig": "%s", "nodedir": "%s" }' "$PYTHON" "$PYTHON_CONFIG" "$NODEDIR")"
if [ -f "$BUILD/config.json" ] && [ "$(cat "$BUILD/config.json")" != "$CONFIG_JSON" ]; then
  # Another interpreter than last time: rebuild everything against it.
  rm -rf "$HERE/node_modules" "$OUT"
fi

NCP="$HERE/node_modules/node-calls-python/build/Release/nodecallspython.node"
if [ ! -f "$NCP" ] || [ "$HERE/package-lock.json" -nt "$NCP" ]; then
  echo "python-bridge: npm ci (node-calls-python, built by node-gyp against $PYTHON_CONFIG)"
  (cd "$HERE" && npm_config_nodedir="$NODEDIR" npm ci --no-audit --no-fund)
fi

if [ -f "$OUT" ] && [ "$OUT" -nt "$HERE/bridge.c" ] && [ "$OUT" -nt "$ROOT/include/napi_dlpack.h" ] &&
   [ "$OUT" -nt "${BASH_SOURCE[0]}" ]; then
  echo "python-bridge: up to date ($OUT)"
else
  LDFLAGS_PY="$("$PYTHON_CONFIG" --ldflags --embed)"
  # An rpath for each library folder, as node-calls-python does (a libpython outside the
  # loader's default path, e.g. pyenv's, is then found at load time).
  RPATHS=()
  for flag in $LDFLAGS_PY; do
    case "$flag" in -L*) RPATHS+=("-Wl,-rpath,${flag#-L}") ;; esac
  done
  # shellcheck disable=SC2046,SC2086 # python3-config prints several flags
  "$CC" -O2 -fPIC -shared -Wall -Wextra -Werror -DNAPI_VERSION=8 \
    $("$PYTHON_CONFIG" --includes) -I"$NODEDIR/include/node" -I"$ROOT/include" \
    -o "$OUT.tmp" "$HERE/bridge.c" \
    $LDFLAGS_PY "${RPATHS[@]}" -pthread
  mv -f "$OUT.tmp" "$OUT"
  echo "python-bridge: built $OUT"
fi
printf '%s\n' "$CONFIG_JSON" >"$BUILD/config.json"
