/*
 * STAND-IN for dlpack.h 1.1, written for napi-dlpack's tests (not a copy of
 * dmlc/dlpack's header, which no registry package here ships in this version):
 * it reproduces only what napi_dlpack.h's coexistence depends on, as the DLPack
 * 1.1 specification defines it: the include guard, the version macros, the
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
#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 1
#define DLPACK_DLL

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLOpenCL = 4, kDLVulkan = 7,
  kDLMetal = 8, kDLVPI = 9, kDLROCM = 10, kDLROCMHost = 11, kDLExtDev = 12,
  kDLCUDAManaged = 13, kDLOneAPI = 14, kDLWebGPU = 15, kDLHexagon = 16,
  kDLMAIA = 17
} DLDeviceType;
typedef struct { DLDeviceType device_type; int32_t device_id; } DLDevice;
typedef enum {
  kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLOpaqueHandle = 3, kDLBfloat = 4,
  kDLComplex = 5, kDLBool = 6,
  kDLFloat8_e3m4 = 7, kDLFloat8_e4m3 = 8, kDLFloat8_e4m3b11fnuz = 9,
  kDLFloat8_e4m3fn = 10, kDLFloat8_e4m3fnuz = 11, kDLFloat8_e5m2 = 12,
  kDLFloat8_e5m2fnuz = 13, kDLFloat8_e8m0fnu = 14, kDLFloat6_e2m3fn = 15,
  kDLFloat6_e3m2fn = 16, kDLFloat4_e2m1fn = 17
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
typedef struct { uint32_t major; uint32_t minor; } DLPackVersion;
typedef struct DLManagedTensorVersioned {
  DLPackVersion version; void* manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned* self);
  uint64_t flags; DLTensor dl_tensor;
} DLManagedTensorVersioned;
#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (1UL << 2UL)

#ifdef __cplusplus
}  /* extern "C" */
#endif
#endif /* DLPACK_DLPACK_H_ */
