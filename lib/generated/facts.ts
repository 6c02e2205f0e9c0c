// Generated from the Rust definitions by `typescript()` in src/facts.rs: do not edit.
// `cargo test -p napi-dlpack-node` fails when this file is out of date; rewrite it with
// NAPI_DLPACK_WRITE_GENERATED=1 cargo test -p napi-dlpack-node generated

/** The DLPack version napi-dlpack implements and writes (`DLPackVersion::CURRENT`). */
export const DLPACK_VERSION = Object.freeze([1, 3] as const)

/** The most dimensions a tensor may have (`napi_dlpack::MAX_NDIM`). */
export const MAX_NDIM = 64

/** The name of the registered symbol (`Symbol.for`) under which producers expose their exchange table (`NAPI_DLPACK_EXCHANGE_API_PROPERTY`). */
export const EXCHANGE_API_SYMBOL_NAME = '__dlpack_napi_exchange_api__'

/** The name of the registered symbol (`Symbol.for`) under which napi-dlpack puts its library adapter on `globalThis` (`NAPI_DLPACK_ADAPTER_PROPERTY`). */
export const ADAPTER_SYMBOL_NAME = '__dlpack_napi_adapter__'

/** DLPack device types (`DLDeviceType`, DLPack 1.3). */
export enum DLDeviceType {
  CPU = 1,
  CUDA = 2,
  CUDAHost = 3,
  OpenCL = 4,
  Vulkan = 7,
  Metal = 8,
  VPI = 9,
  ROCM = 10,
  ROCMHost = 11,
  ExtDev = 12,
  CUDAManaged = 13,
  OneAPI = 14,
  WebGPU = 15,
  Hexagon = 16,
  MAIA = 17,
  Trn = 18,
}

/** The name of each device type in device strings (`'cuda'` in `'cuda:0'`). */
export const DEVICE_NAMES: Readonly<Record<DLDeviceType, string>> = Object.freeze({
  [DLDeviceType.CPU]: 'cpu',
  [DLDeviceType.CUDA]: 'cuda',
  [DLDeviceType.CUDAHost]: 'cuda_host',
  [DLDeviceType.OpenCL]: 'opencl',
  [DLDeviceType.Vulkan]: 'vulkan',
  [DLDeviceType.Metal]: 'metal',
  [DLDeviceType.VPI]: 'vpi',
  [DLDeviceType.ROCM]: 'rocm',
  [DLDeviceType.ROCMHost]: 'rocm_host',
  [DLDeviceType.ExtDev]: 'ext_dev',
  [DLDeviceType.CUDAManaged]: 'cuda_managed',
  [DLDeviceType.OneAPI]: 'oneapi',
  [DLDeviceType.WebGPU]: 'webgpu',
  [DLDeviceType.Hexagon]: 'hexagon',
  [DLDeviceType.MAIA]: 'maia',
  [DLDeviceType.Trn]: 'trn',
})

/** Device types whose memory the CPU reads and writes directly (`DeviceType::is_host_accessible`). */
export const HOST_ACCESSIBLE_DEVICE_TYPES: readonly DLDeviceType[] = Object.freeze([DLDeviceType.CPU, DLDeviceType.CUDAHost, DLDeviceType.ROCMHost])

/** DLPack element type codes (`DLDataTypeCode`, DLPack 1.3). */
export enum DLDataTypeCode {
  Int = 0,
  UInt = 1,
  Float = 2,
  OpaqueHandle = 3,
  Bfloat = 4,
  Complex = 5,
  Bool = 6,
  Float8_e3m4 = 7,
  Float8_e4m3 = 8,
  Float8_e4m3b11fnuz = 9,
  Float8_e4m3fn = 10,
  Float8_e4m3fnuz = 11,
  Float8_e5m2 = 12,
  Float8_e5m2fnuz = 13,
  Float8_e8m0fnu = 14,
  Float6_e2m3fn = 15,
  Float6_e3m2fn = 16,
  Float4_e2m1fn = 17,
}

/** Every dtype: its DLPack code and bits, and the bytes one element occupies. */
export const DTYPE_FACTS = Object.freeze({
  bool: Object.freeze({ code: DLDataTypeCode.Bool, bits: 8, itemsize: 1 }),
  int8: Object.freeze({ code: DLDataTypeCode.Int, bits: 8, itemsize: 1 }),
  int16: Object.freeze({ code: DLDataTypeCode.Int, bits: 16, itemsize: 2 }),
  int32: Object.freeze({ code: DLDataTypeCode.Int, bits: 32, itemsize: 4 }),
  int64: Object.freeze({ code: DLDataTypeCode.Int, bits: 64, itemsize: 8 }),
  uint8: Object.freeze({ code: DLDataTypeCode.UInt, bits: 8, itemsize: 1 }),
  uint16: Object.freeze({ code: DLDataTypeCode.UInt, bits: 16, itemsize: 2 }),
  uint32: Object.freeze({ code: DLDataTypeCode.UInt, bits: 32, itemsize: 4 }),
  uint64: Object.freeze({ code: DLDataTypeCode.UInt, bits: 64, itemsize: 8 }),
  float16: Object.freeze({ code: DLDataTypeCode.Float, bits: 16, itemsize: 2 }),
  bfloat16: Object.freeze({ code: DLDataTypeCode.Bfloat, bits: 16, itemsize: 2 }),
  float32: Object.freeze({ code: DLDataTypeCode.Float, bits: 32, itemsize: 4 }),
  float64: Object.freeze({ code: DLDataTypeCode.Float, bits: 64, itemsize: 8 }),
  complex64: Object.freeze({ code: DLDataTypeCode.Complex, bits: 64, itemsize: 8 }),
  complex128: Object.freeze({ code: DLDataTypeCode.Complex, bits: 128, itemsize: 16 }),
  float8_e3m4: Object.freeze({ code: DLDataTypeCode.Float8_e3m4, bits: 8, itemsize: 1 }),
  float8_e4m3: Object.freeze({ code: DLDataTypeCode.Float8_e4m3, bits: 8, itemsize: 1 }),
  float8_e4m3b11fnuz: Object.freeze({ code: DLDataTypeCode.Float8_e4m3b11fnuz, bits: 8, itemsize: 1 }),
  float8_e4m3fn: Object.freeze({ code: DLDataTypeCode.Float8_e4m3fn, bits: 8, itemsize: 1 }),
  float8_e4m3fnuz: Object.freeze({ code: DLDataTypeCode.Float8_e4m3fnuz, bits: 8, itemsize: 1 }),
  float8_e5m2: Object.freeze({ code: DLDataTypeCode.Float8_e5m2, bits: 8, itemsize: 1 }),
  float8_e5m2fnuz: Object.freeze({ code: DLDataTypeCode.Float8_e5m2fnuz, bits: 8, itemsize: 1 }),
  float8_e8m0fnu: Object.freeze({ code: DLDataTypeCode.Float8_e8m0fnu, bits: 8, itemsize: 1 }),
  float6_e2m3fn: Object.freeze({ code: DLDataTypeCode.Float6_e2m3fn, bits: 6, itemsize: 1 }),
  float6_e3m2fn: Object.freeze({ code: DLDataTypeCode.Float6_e3m2fn, bits: 6, itemsize: 1 }),
  float4_e2m1fn: Object.freeze({ code: DLDataTypeCode.Float4_e2m1fn, bits: 4, itemsize: 1 }),
})

/** A dtype name. */
export type DTypeName = keyof typeof DTYPE_FACTS

/** The dtypes in the addon's order (`DType::ALL`): the dtype slot of `handleInfoInto` indexes it. */
export const DTYPE_ORDER: readonly DTypeName[] = Object.freeze(['bool', 'int8', 'int16', 'int32', 'int64', 'uint8', 'uint16', 'uint32', 'uint64', 'float16', 'bfloat16', 'float32', 'float64', 'complex64', 'complex128', 'float8_e3m4', 'float8_e4m3', 'float8_e4m3b11fnuz', 'float8_e4m3fn', 'float8_e4m3fnuz', 'float8_e5m2', 'float8_e5m2fnuz', 'float8_e8m0fnu', 'float6_e2m3fn', 'float6_e3m2fn', 'float4_e2m1fn'])

/** `copyMode` of the addon's `importCapsule`. */
export const COPY_MODE = Object.freeze({
  IF_NEEDED: 0,
  ALWAYS: 1,
  NEVER: 2,
} as const)

/** Slots of the Float64Array `handleInfoInto` fills; shape then strides start at `SHAPE`. */
export const INFO_SLOT = Object.freeze({
  DTYPE: 0,
  DEVICE_TYPE: 1,
  DEVICE_ID: 2,
  BYTE_OFFSET: 3,
  BITS: 4,
  NUMEL: 5,
  VIEW_OFFSET: 6,
  VIEW_LENGTH: 7,
  VERSION_MAJOR: 8,
  VERSION_MINOR: 9,
  FLAGS: 10,
  NDIM: 11,
  SHAPE: 12,
} as const)

/** Bits of the `BITS` slot. */
export const INFO_BIT = Object.freeze({
  READ_ONLY: 1,
  IS_COPY: 2,
  CONTIGUOUS: 4,
  HAS_VERSION: 8,
} as const)

/** Length of the Float64Array `handleInfoInto` needs (fixed slots, shape and strides of `MAX_NDIM` dimensions). */
export const INFO_SLOTS = 140

/** The error class of every code the addon throws (`ErrorKind::class`). */
export const ERROR_CLASS_BY_CODE = Object.freeze({
  ERR_DLPACK_NULL_TENSOR: 'InvalidTensorError',
  ERR_DLPACK_VERSION: 'InvalidTensorError',
  ERR_DLPACK_NDIM: 'InvalidTensorError',
  ERR_DLPACK_NULL_SHAPE: 'InvalidTensorError',
  ERR_DLPACK_SHAPE: 'InvalidTensorError',
  ERR_DLPACK_OVERFLOW: 'InvalidTensorError',
  ERR_DLPACK_NULL_DATA: 'InvalidTensorError',
  ERR_DLPACK_BYTE_OFFSET: 'InvalidTensorError',
  ERR_DLPACK_DTYPE: 'InvalidTensorError',
  ERR_DLPACK_DEVICE: 'BufferError',
  ERR_DLPACK_DTYPE_MISMATCH: 'DLPackTypeError',
  ERR_DLPACK_NOT_CONTIGUOUS: 'DLPackTypeError',
  ERR_DLPACK_READ_ONLY: 'ReadOnlyError',
  ERR_DLPACK_NOT_CPU: 'BufferError',
  ERR_DLPACK_MISALIGNED: 'InvalidTensorError',
  ERR_DLPACK_INVALID_BOOL: 'InvalidTensorError',
  ERR_DLPACK_INVALID_LAYOUT: 'InvalidTensorError',
  ERR_DLPACK_NOT_A_CAPSULE: 'CapsuleError',
  ERR_DLPACK_CAPSULE_CONSUMED: 'CapsuleError',
  ERR_DLPACK_CAPSULE_ABI: 'CapsuleError',
  ERR_DLPACK_NAPI: 'NodeApiError',
  ERR_DLPACK_NO_MEMORY: 'BufferError',
  ERR_DLPACK_INVALID_ARGUMENT: 'DLPackTypeError',
  ERR_DLPACK_COPY_REQUIRED: 'BufferError',
  ERR_TENSOR_DISPOSED: 'TensorDisposedError',
  ERR_TENSOR_DETACHED: 'TensorDisposedError',
  ERR_TENSOR_STALE_ID: 'TensorDisposedError',
  ERR_CUDA_UNAVAILABLE: 'CudaError',
  ERR_CUDA: 'CudaError',
  ERR_DLPACK_STREAM: 'BufferError',
  ERR_DLPACK_TOO_LARGE: 'BufferError',
  ERR_DLPACK_TRANSFER_CLAIMED: 'CapsuleError',
  ERR_DLPACK_NULLS: 'BufferError',
  ERR_DLPACK_UNSUPPORTED_DTYPE: 'DLPackTypeError',
  ERR_DLPACK_ALIASED: 'DLPackTypeError',
} as const)

/** The name of every error class a code maps to. */
export type ErrorClassName = 'BufferError' | 'CapsuleError' | 'InvalidTensorError' | 'TensorDisposedError' | 'ReadOnlyError' | 'DLPackTypeError' | 'CudaError' | 'NodeApiError'

/** A code the addon throws. */
export type NativeErrorCode = keyof typeof ERROR_CLASS_BY_CODE
