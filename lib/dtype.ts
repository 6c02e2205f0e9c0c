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

/**
 * `Float16Array` where the consumer's TypeScript lib declares it (TS ≥ 5.7 with
 * `ESNext.Float16`), `never` otherwise: read from `globalThis` so the published declarations
 * compile against any lib (TS ≥ 5.0, `lib: ["es2022"]`, `skipLibCheck: false`).
 */
type Float16ArrayIfDeclared = typeof globalThis extends { Float16Array: { prototype: infer View } } ? View : never
/** The constructor of {@link Float16ArrayIfDeclared}, under the same rule. */
type Float16ArrayConstructorIfDeclared = typeof globalThis extends { Float16Array: infer Constructor } ? Constructor : never

/** The JS view type of float16 data: `Float16Array` where the runtime has it (Node ≥ 24). */
export type Float16View = Uint16Array | Float16ArrayIfDeclared

/** Maps each dtype to the TypedArray its zero-copy `data` view has. */
export interface DTypeArrayMap {
  bool: Uint8Array
  int8: Int8Array
  int16: Int16Array
  int32: Int32Array
  int64: BigInt64Array
  uint8: Uint8Array
  uint16: Uint16Array
  uint32: Uint32Array
  uint64: BigUint64Array
  float16: Float16View
  bfloat16: Uint16Array
  float32: Float32Array
  float64: Float64Array
  complex64: Float32Array
  complex128: Float64Array
  float8_e3m4: Uint8Array
  float8_e4m3: Uint8Array
  float8_e4m3b11fnuz: Uint8Array
  float8_e4m3fn: Uint8Array
  float8_e4m3fnuz: Uint8Array
  float8_e5m2: Uint8Array
  float8_e5m2fnuz: Uint8Array
  float8_e8m0fnu: Uint8Array
  float6_e2m3fn: Uint8Array
  float6_e3m2fn: Uint8Array
  float4_e2m1fn: Uint8Array
}

/** Every dtype name. */
export type DType = keyof DTypeArrayMap

/** The TypedArray type of a dtype's data: `DataArray<'float32'>` is `Float32Array`. */
export type DataArray<D extends DType> = DTypeArrayMap[D]

type TypedArrayConstructor =
  | Int8ArrayConstructor
  | Uint8ArrayConstructor
  | Int16ArrayConstructor
  | Uint16ArrayConstructor
  | Int32ArrayConstructor
  | Uint32ArrayConstructor
  | Float32ArrayConstructor
  | Float64ArrayConstructor
  | BigInt64ArrayConstructor
  | BigUint64ArrayConstructor
  | Float16ArrayConstructorIfDeclared

interface DTypeSpec {
  code: DLDataTypeCode
  bits: number
  /** Bytes per element in memory. */
  itemsize: number
  /** JS values per element (2 for complex: interleaved real and imaginary parts). */
  lanes: number
  view: () => TypedArrayConstructor
}

const float16View = (): TypedArrayConstructor =>
  (globalThis as { Float16Array?: Float16ArrayConstructor }).Float16Array ?? Uint16Array

const spec = (code: DLDataTypeCode, bits: number, view: () => TypedArrayConstructor, lanes = 1): DTypeSpec => ({
  code,
  bits,
  itemsize: Math.max(1, bits / 8),
  lanes,
  view,
})

const u8 = () => Uint8Array

/** Facts about every dtype. */
export const DTYPES: Readonly<Record<DType, Readonly<DTypeSpec>>> = {
  bool: spec(DLDataTypeCode.Bool, 8, u8),
  int8: spec(DLDataTypeCode.Int, 8, () => Int8Array),
  int16: spec(DLDataTypeCode.Int, 16, () => Int16Array),
  int32: spec(DLDataTypeCode.Int, 32, () => Int32Array),
  int64: spec(DLDataTypeCode.Int, 64, () => BigInt64Array),
  uint8: spec(DLDataTypeCode.UInt, 8, u8),
  uint16: spec(DLDataTypeCode.UInt, 16, () => Uint16Array),
  uint32: spec(DLDataTypeCode.UInt, 32, () => Uint32Array),
  uint64: spec(DLDataTypeCode.UInt, 64, () => BigUint64Array),
  float16: spec(DLDataTypeCode.Float, 16, float16View),
  bfloat16: spec(DLDataTypeCode.Bfloat, 16, () => Uint16Array),
  float32: spec(DLDataTypeCode.Float, 32, () => Float32Array),
  float64: spec(DLDataTypeCode.Float, 64, () => Float64Array),
  complex64: spec(DLDataTypeCode.Complex, 64, () => Float32Array, 2),
  complex128: spec(DLDataTypeCode.Complex, 128, () => Float64Array, 2),
  float8_e3m4: spec(DLDataTypeCode.Float8_e3m4, 8, u8),
  float8_e4m3: spec(DLDataTypeCode.Float8_e4m3, 8, u8),
  float8_e4m3b11fnuz: spec(DLDataTypeCode.Float8_e4m3b11fnuz, 8, u8),
  float8_e4m3fn: spec(DLDataTypeCode.Float8_e4m3fn, 8, u8),
  float8_e4m3fnuz: spec(DLDataTypeCode.Float8_e4m3fnuz, 8, u8),
  float8_e5m2: spec(DLDataTypeCode.Float8_e5m2, 8, u8),
  float8_e5m2fnuz: spec(DLDataTypeCode.Float8_e5m2fnuz, 8, u8),
  float8_e8m0fnu: spec(DLDataTypeCode.Float8_e8m0fnu, 8, u8),
  float6_e2m3fn: spec(DLDataTypeCode.Float6_e2m3fn, 6, u8),
  float6_e3m2fn: spec(DLDataTypeCode.Float6_e3m2fn, 6, u8),
  float4_e2m1fn: spec(DLDataTypeCode.Float4_e2m1fn, 4, u8),
}

export const DTYPE_NAMES = Object.freeze(Object.keys(DTYPES) as DType[])

export function isDType(value: unknown): value is DType {
  return typeof value === 'string' && Object.prototype.hasOwnProperty.call(DTYPES, value)
}

/** The dtype a TypedArray's elements have (Uint8ClampedArray counts as uint8). */
export function dtypeOfArray(array: ArrayBufferView): DType | undefined {
  const tag = Object.prototype.toString.call(array).slice(8, -1)
  switch (tag) {
    case 'Int8Array':
      return 'int8'
    case 'Uint8Array':
    case 'Uint8ClampedArray':
      return 'uint8'
    case 'Int16Array':
      return 'int16'
    case 'Uint16Array':
      return 'uint16'
    case 'Int32Array':
      return 'int32'
    case 'Uint32Array':
      return 'uint32'
    case 'Float16Array':
      return 'float16'
    case 'Float32Array':
      return 'float32'
    case 'Float64Array':
      return 'float64'
    case 'BigInt64Array':
      return 'int64'
    case 'BigUint64Array':
      return 'uint64'
    default:
      return undefined
  }
}
