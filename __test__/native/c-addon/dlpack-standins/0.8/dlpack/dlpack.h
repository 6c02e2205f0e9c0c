/*
 * STAND-IN for dlpack.h 0.8, written for napi-dlpack's tests (not a copy of
 * dmlc/dlpack's header, which no registry package here ships in this version):
 * it reproduces only what napi_dlpack.h's coexistence depends on, as the DLPack
 * 0.8 specification defines it: the include guard, the version macros, the
 * declared type names and enumerators, and the standard layout. The real
 * headers of 0.6, 1.2 and 1.3 are tested as shipped (__test__/native/c-addon/
 * dlpack-coexist.sh).
 */
#ifndef DLPACK_DLPACK_H_
#define DLPACK_DLPACK_H_

#ifdef __cplusplus
#define DLPACK_EXTERN_C extern "C"
#else
#define DLPACK_EXTERN_C
#endif
#define DLPACK_VERSION 80
#define DLPACK_ABI_VERSION 1
#define DLPACK_DLL

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLOpenCL = 4, kDLVulkan = 7,
  kDLMetal = 8, kDLVPI = 9, kDLROCM = 10, kDLROCMHost = 11, kDLExtDev = 12,
  kDLCUDAManaged = 13, kDLOneAPI = 14, kDLWebGPU = 15, kDLHexagon = 16
} DLDeviceType;
typedef struct { DLDeviceType device_type; int32_t device_id; } DLDevice;
typedef enum {
  kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLOpaqueHandle = 3, kDLBfloat = 4,
  kDLComplex = 5, kDLBool = 6
} DLDataTypeCode;
typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } DLDataType;
typedef struct {
  void* data; DLDevice device; int32_t ndim; DLDataType dtype;
  int64_t* shape; int64_t* strides; uint64_t byte_offset;
} DLTensor;
typedef struct DLManagedTensor {
  DLTensor dl_tensor; void* manager_ctx;
  void (*deleter)(struct DLManagedTensor* self);
} DLManagedTensor;

#ifdef __cplusplus
}  /* extern "C" */
#endif
#endif /* DLPACK_DLPACK_H_ */
