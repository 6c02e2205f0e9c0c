import { DLDataTypeCode, DLDeviceType, DTYPE_FACTS, type DTypeName } from './generated/facts'

// The DLPack enums and the dtype table are defined in Rust (lib/generated/facts.ts); this file
// adds what only JS has: the TypedArray each dtype is viewed through.
export { DLDataTypeCode, DLDeviceType }

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

/** The dtype of a TypedArray type. */
export type ArrayDType<A> = A extends Float32Array
  ? 'float32'
  : A extends Float64Array
    ? 'float64'
    : A extends Int8Array
      ? 'int8'
      : A extends Int16Array
        ? 'int16'
        : A extends Int32Array
          ? 'int32'
          : A extends Uint16Array
            ? 'uint16'
            : A extends Uint32Array
              ? 'uint32'
              : A extends BigInt64Array
                ? 'int64'
                : A extends BigUint64Array
                  ? 'uint64'
                  : A extends Uint8Array | Uint8ClampedArray
                    ? 'uint8'
                    : DType

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

const u8 = () => Uint8Array

/** The TypedArray constructor each dtype's data is viewed through (the one JS-only fact). */
const VIEWS: Readonly<Record<DType, () => TypedArrayConstructor>> = {
  bool: u8,
  int8: () => Int8Array,
  int16: () => Int16Array,
  int32: () => Int32Array,
  int64: () => BigInt64Array,
  uint8: u8,
  uint16: () => Uint16Array,
  uint32: () => Uint32Array,
  uint64: () => BigUint64Array,
  float16: float16View,
  bfloat16: () => Uint16Array,
  float32: () => Float32Array,
  float64: () => Float64Array,
  complex64: () => Float32Array,
  complex128: () => Float64Array,
  float8_e3m4: u8,
  float8_e4m3: u8,
  float8_e4m3b11fnuz: u8,
  float8_e4m3fn: u8,
  float8_e4m3fnuz: u8,
  float8_e5m2: u8,
  float8_e5m2fnuz: u8,
  float8_e8m0fnu: u8,
  float6_e2m3fn: u8,
  float6_e3m2fn: u8,
  float4_e2m1fn: u8,
}

// The dtype names of the public types are exactly the Rust table's: a dtype added in Rust fails
// to compile here until it has a view type.
type SameKeys<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false
const dtypeNamesMatchRust: SameKeys<DType, DTypeName> = true
void dtypeNamesMatchRust

/** Facts about every dtype. */
export const DTYPES: Readonly<Record<DType, Readonly<DTypeSpec>>> = Object.fromEntries(
  Object.entries(DTYPE_FACTS).map(([name, { code, bits, itemsize }]) => [
    name,
    Object.freeze({
      code,
      bits,
      itemsize,
      // Complex elements are two JS values (interleaved real and imaginary parts).
      lanes: code === DLDataTypeCode.Complex ? 2 : 1,
      view: VIEWS[name as DType],
    }),
  ]),
) as Record<DType, Readonly<DTypeSpec>>

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
