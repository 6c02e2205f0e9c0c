#!/usr/bin/env bash
# include/napi_dlpack.h in one translation unit with official dlpack.h headers of several
# DLPack versions, in both include orders, as C99, C11 and C++17 with strict warnings (every
# helper referenced, so each declaration is used against the other header's types; the
# header's layout static_asserts check those types too). Headers:
#   - real ones, where installed or fetchable by package name: libtorch's ATen/dlpack.h
#     (Debian libtorch-dev: DLPack 0.6), Debian libdlpack-dev's dlpack/dlpack.h (0.6), and the
#     dlpack/dlpack.h shipped in PyPI's apache-tvm-ffi wheels 0.1.0 (1.2) and 0.1.15.post2
#     (1.3), downloaded once with `pip download` into target/dlpack-headers/ (nothing of them
#     is kept in the repository);
#   - stand-ins written for this project (dlpack-standins/: 0.8, 1.0, 1.1), for versions no
#     registry package here ships: the include guard, version macros and declarations only.
# A real header that is neither installed nor fetchable is reported as skipped. Set
# NAPI_DLPACK_REQUIRE_REAL_DLPACK=1 to fail instead. Exits non-zero on any failure.
set -u

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
NODE_INC="${NODE_INCLUDE_DIR:-/usr/include/node}"
CC="${CC:-gcc}"
CXX="${CXX:-g++}"
WARN=(-Wall -Wextra -Werror -pedantic)
CACHE="$ROOT/target/dlpack-headers"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

pass=0
fail=0
skip=0
# label|include directory|header name as included
headers=()
[ -f /usr/include/ATen/dlpack.h ] && headers+=("libtorch ATen/dlpack.h (DLPack 0.6)|/usr/include|ATen/dlpack.h")
[ -f /usr/include/dlpack/dlpack.h ] && headers+=("Debian libdlpack-dev (DLPack 0.6)|/usr/include|dlpack/dlpack.h")
[ -f /usr/include/ATen/dlpack.h ] || { echo "skip - libtorch ATen/dlpack.h (install: __test__/native/torch-addon/install-deps.sh)"; skip=$((skip + 1)); }
[ -f /usr/include/dlpack/dlpack.h ] || { echo "skip - Debian libdlpack-dev (apt-get install libdlpack-dev)"; skip=$((skip + 1)); }

# dlpack/dlpack.h from an apache-tvm-ffi wheel, fetched once.
tvm_ffi() {
  local version="$1" dir="$CACHE/apache-tvm-ffi-$1"
  if [ ! -f "$dir/dlpack/dlpack.h" ]; then
    mkdir -p "$TMP/wheel-$version"
    if python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$TMP/wheel-$version" \
         "apache-tvm-ffi==$version" >"$TMP/pip.txt" 2>&1 &&
       (cd "$TMP/wheel-$version" && python3 -m zipfile -e ./*.whl . >/dev/null 2>&1) &&
       [ -f "$TMP/wheel-$version/tvm_ffi/include/dlpack/dlpack.h" ]; then
      mkdir -p "$dir/dlpack"
      cp "$TMP/wheel-$version/tvm_ffi/include/dlpack/dlpack.h" "$dir/dlpack/dlpack.h"
    else
      echo "skip - apache-tvm-ffi $version (pip download failed: $(tail -1 "$TMP/pip.txt" 2>/dev/null))"
      skip=$((skip + 1))
      return
    fi
  fi
  local minor
  minor="$(sed -n 's/^#define DLPACK_MINOR_VERSION \([0-9]*\).*/\1/p' "$dir/dlpack/dlpack.h")"
  headers+=("apache-tvm-ffi $version dlpack.h (DLPack 1.$minor)|$dir|dlpack/dlpack.h")
}
tvm_ffi 0.1.0
tvm_ffi 0.1.15.post2
for version in 0.8 1.0 1.1; do
  headers+=("stand-in for DLPack $version|$HERE/dlpack-standins/$version|dlpack/dlpack.h")
done

cat >"$TMP/coexist.c" <<'EOF_TU'
#define NAPI_VERSION 8
#ifdef NAPI_DLPACK_FIRST
#include "napi_dlpack.h"
#include DLPACK_HEADER
#else
#include DLPACK_HEADER
#include "napi_dlpack.h"
#endif

static void del_v(DLManagedTensorVersioned* t) { (void)t; }
static void del_l(DLManagedTensor* t) { (void)t; }

int coexist_check(napi_env env, napi_value v);
int coexist_check(napi_env env, napi_value v) {
  DLManagedTensorVersioned mv;
  DLManagedTensor ml;
  DLTensor t;
  napi_dlpack_extent extent;
  napi_dlpack_borrow borrow;
  const napi_dlpack_exchange_api* api = NULL;
  DLManagedTensorVersioned* exported = NULL;
  int64_t shape[1] = {4};
  napi_value capsule = NULL, out = NULL;
  uint32_t kind = 0;
  void* tensor = NULL;
  int acc = 0;
  memset(&mv, 0, sizeof mv);
  memset(&ml, 0, sizeof ml);
  memset(&t, 0, sizeof t);
  mv.version.major = 1;
  mv.deleter = del_v;
  mv.flags = DLPACK_FLAG_BITMASK_READ_ONLY | DLPACK_FLAG_BITMASK_IS_COPIED |
             DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED;
  ml.deleter = del_l;
  t.data = &acc;
  t.device.device_type = kDLCPU;
  t.ndim = 1;
  t.dtype.code = (uint8_t)kDLFloat;
  t.dtype.bits = 32;
  t.dtype.lanes = 1;
  t.shape = shape;
  acc += napi_dlpack_tensor_extent(&t, mv.flags, &extent) == NULL;
  acc += (int)napi_dlpack_capsule_create(env, NAPI_DLPACK_KIND_VERSIONED, &mv, &capsule);
  acc += (int)napi_dlpack_capsule_create(env, NAPI_DLPACK_KIND_LEGACY, &ml, &capsule);
  acc += (int)napi_dlpack_capsule_consume(env, v, &kind, &tensor);
  napi_dlpack_tensor_release(kind, tensor);
  acc += (int)napi_dlpack_exchange_borrow(env, v, &borrow);
  napi_dlpack_exchange_release(env, &borrow);
  acc += (int)napi_dlpack_exchange_export(env, v, &exported);
  acc += (int)napi_dlpack_exchange_api_find(env, v, &api);
  acc += (int)napi_dlpack_exchange_to_value(env, &mv, &out);
  acc += (int)napi_dlpack_adapt(env, v, &out);
  return acc + (int)extent.itemsize;
}
EOF_TU

run() {
  local label="$1"
  shift
  if "$@" 2>"$TMP/err.txt"; then
    pass=$((pass + 1))
    echo "ok   - $label"
  else
    fail=$((fail + 1))
    echo "FAIL - $label"
    sed 's/^/     /' "$TMP/err.txt" | head -20
  fi
}

for entry in "${headers[@]}"; do
  IFS='|' read -r label dir name <<<"$entry"
  for order in dlpack-first napi-first; do
    define=()
    [ "$order" = napi-first ] && define=(-DNAPI_DLPACK_FIRST)
    inc=(-I"$NODE_INC" -I"$ROOT/include" -I"$dir" "-DDLPACK_HEADER=<$name>" ${define[@]+"${define[@]}"})
    run "$label, $order: gcc -std=c99" "$CC" -x c -std=c99 "${WARN[@]}" "${inc[@]}" -c -o "$TMP/out.o" "$TMP/coexist.c"
    run "$label, $order: gcc -std=c11" "$CC" -x c -std=c11 "${WARN[@]}" "${inc[@]}" -c -o "$TMP/out.o" "$TMP/coexist.c"
    run "$label, $order: g++ -std=c++17" "$CXX" -x c++ -std=c++17 "${WARN[@]}" "${inc[@]}" -c -o "$TMP/out.o" "$TMP/coexist.c"
  done
done

if [ "${NAPI_DLPACK_REQUIRE_REAL_DLPACK:-}" = 1 ] && [ "$skip" -gt 0 ]; then
  echo "dlpack-coexist: $skip real headers unavailable and NAPI_DLPACK_REQUIRE_REAL_DLPACK=1"
  fail=$((fail + 1))
fi
echo "dlpack-coexist: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
