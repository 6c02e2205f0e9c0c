/*
 * capsule_bridge.h - the seam between the two translation units of the torch
 * test addon.
 *
 * Why two translation units: libtorch 1.13 ships its own <ATen/dlpack.h>
 * (DLPack 0.6, DLPACK_VERSION 60). It declares DLTensor, DLManagedTensor,
 * DLDevice, DLDataType and the kDL* enumerators, but NOT
 * DLManagedTensorVersioned, DLPackVersion, kDLBool or the later device types.
 * include/napi_dlpack.h needs DLManagedTensorVersioned (napi_dlpack_tensor_release
 * dereferences it), so defining NAPI_DLPACK_NO_DLPACK_TYPES on top of ATen's
 * 0.6 header does not compile; and including both without it redefines every
 * DLPack type and enumerator. So:
 *   - capsule_abi.cpp includes only node_api.h + napi_dlpack.h (our DLPack 1.3
 *     types) and implements the capsule ABI calls declared here;
 *   - torch_addon.cpp includes only node_api.h + libtorch (ATen's DLPack 0.6
 *     types) and talks to the other file through these functions, passing the
 *     managed tensor as void*.
 * This is sound because the legacy DLManagedTensor has the same layout in
 * DLPack 0.6 and 1.x (64 bytes on 64-bit: DLTensor at 0, manager_ctx at 48,
 * deleter at 56); both files static_assert that layout.
 */
#ifndef TORCH_ADDON_CAPSULE_BRIDGE_H_
#define TORCH_ADDON_CAPSULE_BRIDGE_H_

#include <node_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Wraps a legacy DLManagedTensor* in a new capsule (kind LEGACY). Returns a
 * napi_dlpack_status; on failure the caller still owns the tensor. */
int torch_addon_capsule_create_legacy(napi_env env, void* legacy_tensor, napi_value* result);

/* Takes ownership of a capsule's tensor. Returns a napi_dlpack_status; on
 * success *is_versioned says which struct *tensor is (1: DLManagedTensorVersioned,
 * 0: DLManagedTensor) and the caller must release it exactly once. */
int torch_addon_capsule_consume(napi_env env, napi_value capsule, int* is_versioned, void** tensor);

/* Calls the deleter of a tensor taken with torch_addon_capsule_consume. */
void torch_addon_tensor_release(int is_versioned, void* tensor);

/* The stable error code (ERR_DLPACK_...) of a napi_dlpack_status. */
const char* torch_addon_status_code(int status);

#ifdef __cplusplus
}
#endif

#endif /* TORCH_ADDON_CAPSULE_BRIDGE_H_ */
