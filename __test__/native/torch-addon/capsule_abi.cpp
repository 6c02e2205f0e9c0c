// The capsule-ABI half of the torch test addon: include/napi_dlpack.h with its
// own DLPack 1.3 declarations, and no libtorch (see capsule_bridge.h for why the
// two are kept in separate translation units).
#include "capsule_bridge.h"

#include <napi_dlpack.h>

// The legacy struct whose pointer crosses the bridge has the layout ATen's
// DLPack 0.6 header gives it (torch_addon.cpp asserts the same numbers there).
static_assert(sizeof(DLTensor) == 48, "DLTensor layout");
static_assert(offsetof(DLManagedTensor, manager_ctx) == 48, "DLManagedTensor.manager_ctx");
static_assert(offsetof(DLManagedTensor, deleter) == 56, "DLManagedTensor.deleter");
static_assert(sizeof(DLManagedTensor) == 64, "DLManagedTensor size");

extern "C" int torch_addon_capsule_create_legacy(napi_env env, void* legacy_tensor, napi_value* result) {
  return napi_dlpack_capsule_create(env, NAPI_DLPACK_KIND_LEGACY, legacy_tensor, result);
}

extern "C" int torch_addon_capsule_consume(napi_env env, napi_value capsule, int* is_versioned, void** tensor) {
  uint32_t kind = 0;
  napi_dlpack_status status = napi_dlpack_capsule_consume(env, capsule, &kind, tensor);
  if (status == NAPI_DLPACK_OK) *is_versioned = kind == NAPI_DLPACK_KIND_VERSIONED ? 1 : 0;
  return status;
}

extern "C" void torch_addon_tensor_release(int is_versioned, void* tensor) {
  napi_dlpack_tensor_release(is_versioned ? NAPI_DLPACK_KIND_VERSIONED : NAPI_DLPACK_KIND_LEGACY, tensor);
}

extern "C" const char* torch_addon_status_code(int status) {
  return napi_dlpack_status_code(static_cast<napi_dlpack_status>(status));
}
