#!/usr/bin/env bash
# Builds examples/consumer-addon (a standalone napi-rs addon using the napi-dlpack crate, with
# its own Cargo.lock) in release mode into target/consumer-addon/, and copies the cdylib to
# target/consumer-addon/consumer_addon.node. Works from any cwd. Cargo is incremental; the
# .node file is only replaced when the library changed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
EXAMPLE="$ROOT/examples/consumer-addon"
export CARGO_TARGET_DIR="$ROOT/target/consumer-addon"
OUT="$CARGO_TARGET_DIR/consumer_addon.node"

case "$(uname -s)" in
  Darwin) LIB="libconsumer_addon.dylib" ;;
  MINGW* | MSYS* | CYGWIN*) LIB="consumer_addon.dll" ;;
  *) LIB="libconsumer_addon.so" ;;
esac

cargo build --release --quiet --manifest-path "$EXAMPLE/Cargo.toml"
BUILT="$CARGO_TARGET_DIR/release/$LIB"

if [ -f "$OUT" ] && cmp -s "$BUILT" "$OUT"; then
  echo "consumer-addon: up to date ($OUT)"
  exit 0
fi
# Copy to a temporary name and rename, so a half-written addon never looks up to date.
cp -f "$BUILT" "$OUT.tmp"
mv -f "$OUT.tmp" "$OUT"
echo "consumer-addon: built $OUT"
