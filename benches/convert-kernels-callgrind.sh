#!/usr/bin/env bash
# Instructions per element of the conversion kernels alone (crates/napi-dlpack/examples/
# convert_kernels.rs: no JS, no allocation, 1920x1080x3 uint8), counted by callgrind: each case
# runs with 1 and 3 calls and the difference is divided by 2 calls and the element count.
# Deterministic (unlike the whole-process counts of convert-callgrind.mjs, which move with V8's
# background threads and GC). Needs valgrind.
#
#   bash benches/convert-kernels-callgrind.sh [case ...]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p napi-dlpack --example convert_kernels
bin=target/release/examples/convert_kernels
elements=$((1080 * 1920 * 3))
count() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" "$1" "$2" 2>&1 |
    sed -n 's/.*refs: *//p' | tr -d ,
}
echo '| case | instructions per element |'
echo '|---|---:|'
for case in "${@:-normalise chw_u8 contiguous scale plain}"; do
  for name in $case; do
    low=$(count "$name" 1)
    high=$(count "$name" 3)
    echo "| $name | $(awk -v a="$low" -v b="$high" -v n="$elements" 'BEGIN { printf "%.2f", (b - a) / 2 / n }') |"
  done
done
