#!/usr/bin/env bash
# Compiles small translation units against include/napi_dlpack.h as C99, C11
# and C++17 with strict warnings, plus a TU that brings its own DLPack types
# (NAPI_DLPACK_NO_DLPACK_TYPES), one with NAPI_EXPERIMENTAL, and a negative
# check that NAPI_VERSION < 8 is refused. Exits non-zero on any failure.
set -u

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
NODE_INC="${NODE_INCLUDE_DIR:-/usr/include/node}"
CC="${CC:-gcc}"
CXX="${CXX:-g++}"
WARN=(-Wall -Wextra -Werror -pedantic)
INC=(-I"$NODE_INC" -I"$ROOT/include")

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

# --- TU 1: the header's own DLPack types, every helper referenced ----------
cat >"$TMP/uses_header.c" <<'EOF'
#define NAPI_VERSION 8
#include "napi_dlpack.h"
#include "napi_dlpack.h" /* include guard */

static void del_v(DLManagedTensorVersioned* t) { (void)t; }
static void del_l(DLManagedTensor* t) { (void)t; }

int napi_dlpack_header_check(napi_env env, napi_value v);
int napi_dlpack_header_check(napi_env env, napi_value v) {
  DLManagedTensorVersioned mv;
  DLManagedTensor ml;
  napi_value cap = NULL;
  uint32_t kind = 0;
  void* tensor = NULL;
  int consumed = 0;
  int acc = 0;
  mv.version.major = DLPACK_MAJOR_VERSION;
  mv.version.minor = DLPACK_MINOR_VERSION;
  mv.deleter = del_v;
  mv.flags = DLPACK_FLAG_BITMASK_READ_ONLY | DLPACK_FLAG_BITMASK_IS_COPIED |
             DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED;
  mv.dl_tensor.device.device_type = kDLCPU;
  mv.dl_tensor.dtype.code = kDLFloat;
  ml.deleter = del_l;
  ml.dl_tensor.device.device_type = kDLTrn;
  ml.dl_tensor.dtype.code = kDLFloat4_e2m1fn;
  acc += (int)napi_dlpack_capsule_create(env, NAPI_DLPACK_KIND_VERSIONED, &mv,
                                         &cap);
  acc += (int)napi_dlpack_capsule_create(env, NAPI_DLPACK_KIND_LEGACY, &ml,
                                         &cap);
  acc += (int)napi_dlpack_capsule_check(env, v);
  acc += (int)napi_dlpack_capsule_consume(env, v, &kind, &tensor);
  acc += (int)napi_dlpack_capsule_is_consumed(env, v, &consumed);
  napi_dlpack_tensor_release(kind, tensor);
  acc += napi_dlpack_status_code(NAPI_DLPACK_ERR_CONSUMED)[0];
  acc += (int)(NAPI_DLPACK_CAPSULE_TAG_LOWER ^ NAPI_DLPACK_CAPSULE_TAG_UPPER);
  acc += (int)NAPI_DLPACK_CAPSULE_ABI_VERSION;
  return acc + consumed + (int)sizeof(napi_dlpack_capsule);
}
EOF

# --- TU 2: the user supplies the DLPack types (as if from dlpack.h) ---------
cat >"$TMP/own_types.c" <<'EOF'
#define NAPI_VERSION 8
#include <stdint.h>
/* Stand-ins for a real dlpack.h, written here to the same layout. */
typedef struct { uint32_t major, minor; } DLPackVersion;
typedef struct { int32_t device_type; int32_t device_id; } DLDevice;
typedef struct { uint8_t code, bits; uint16_t lanes; } DLDataType;
typedef struct {
  void* data; DLDevice device; int32_t ndim; DLDataType dtype;
  int64_t* shape; int64_t* strides; uint64_t byte_offset;
} DLTensor;
typedef struct DLManagedTensor {
  DLTensor dl_tensor; void* manager_ctx;
  void (*deleter)(struct DLManagedTensor*);
} DLManagedTensor;
typedef struct DLManagedTensorVersioned {
  DLPackVersion version; void* manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned*);
  uint64_t flags; DLTensor dl_tensor;
} DLManagedTensorVersioned;
#define DLPACK_MAJOR_VERSION 1
#define NAPI_DLPACK_NO_DLPACK_TYPES
#include "napi_dlpack.h"

int napi_dlpack_own_types_check(napi_env env, napi_value v);
int napi_dlpack_own_types_check(napi_env env, napi_value v) {
  uint32_t kind = 0;
  void* tensor = NULL;
  int r = (int)napi_dlpack_capsule_consume(env, v, &kind, &tensor);
  napi_dlpack_tensor_release(kind, tensor);
  return r;
}
EOF

# --- TU 3: NAPI_VERSION 7 must be refused by the header --------------------
cat >"$TMP/too_old.c" <<'EOF'
#define NAPI_VERSION 7
#include "napi_dlpack.h"
int napi_dlpack_too_old;
EOF

fail=0
pass=0
run() {
  local label="$1"
  shift
  if "$@" 2>"$TMP/err.txt"; then
    pass=$((pass + 1))
    echo "ok   - $label"
  else
    fail=$((fail + 1))
    echo "FAIL - $label"
    sed 's/^/     /' "$TMP/err.txt"
  fi
}
compile_c() { "$CC" -x c "$@" "${WARN[@]}" "${INC[@]}" -c -o "$TMP/out.o"; }
compile_cxx() { "$CXX" -x c++ "$@" "${WARN[@]}" "${INC[@]}" -c -o "$TMP/out.o"; }

for f in uses_header own_types; do
  run "$f: gcc -std=c99" compile_c -std=c99 "$TMP/$f.c"
  run "$f: gcc -std=c11" compile_c -std=c11 "$TMP/$f.c"
  run "$f: g++ -std=c++17" compile_cxx -std=c++17 "$TMP/$f.c"
done
run "uses_header: gcc -std=c11 -DNAPI_EXPERIMENTAL" \
  compile_c -std=c11 -DNAPI_EXPERIMENTAL "$TMP/uses_header.c"
run "uses_header: g++ -std=c++11 -O2" compile_cxx -std=c++11 -O2 "$TMP/uses_header.c"

# 32-bit layout assertions, only where a multilib toolchain is installed.
if echo 'int main(void){return 0;}' | "$CC" -m32 -x c - -o "$TMP/m32" >/dev/null 2>&1; then
  run "uses_header: gcc -m32 -std=c11" compile_c -m32 -std=c11 "$TMP/uses_header.c"
else
  echo "skip - gcc -m32 (no 32-bit toolchain)"
fi

if compile_c -std=c11 "$TMP/too_old.c" 2>"$TMP/err.txt"; then
  fail=$((fail + 1))
  echo "FAIL - NAPI_VERSION 7 was accepted"
elif grep -q "NAPI_VERSION 8" "$TMP/err.txt"; then
  pass=$((pass + 1))
  echo "ok   - NAPI_VERSION 7 refused with a helpful #error"
else
  fail=$((fail + 1))
  echo "FAIL - NAPI_VERSION 7 failed for an unexpected reason:"
  sed 's/^/     /' "$TMP/err.txt"
fi

echo "header-check: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
