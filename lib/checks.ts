/**
 * The argument checks shared by `Tensor`'s constructors and methods and by `fromDLPack`: shapes,
 * flags, options objects, dtypes and streams, each turned into a coded error
 * (`ERR_DLPACK_INVALID_ARGUMENT`, ...) before anything reaches the addon. The view and
 * conversion arguments have their own checks (lib/convert.ts).
 */
import { readList } from './convert'
import { type DType, isDType } from './dtype'
import { DLPackTypeError, describe, dlpackError } from './errors'
import { MAX_NDIM } from './generated/facts'

/**
 * `shape` (or strides) read once, by index, into a plain array of checked integers: what is
 * checked is what the addon gets, whatever the array's own iterator or getters do.
 */
export function checkShape(shape: readonly number[], what = 'shape'): number[] {
  if (!Array.isArray(shape)) {
    throw new DLPackTypeError('ERR_DLPACK_INVALID_ARGUMENT', `${what} must be an array of integers`)
  }
  if (shape.length > MAX_NDIM) {
    throw dlpackError('ERR_DLPACK_NDIM', `${what} has ${shape.length} entries, more than ${MAX_NDIM}`)
  }
  const dims = readList(shape, MAX_NDIM, what)
  for (const dim of dims) {
    if (!Number.isSafeInteger(dim)) {
      throw new DLPackTypeError('ERR_DLPACK_INVALID_ARGUMENT', `${what} must hold integers, got ${describe(dim)}`)
    }
  }
  return dims as number[]
}

/** `value` if it is a boolean or absent (`fallback`), else a coded error naming `what`. */
export function checkFlag(value: unknown, what: string, fallback = false): boolean {
  if (value === undefined) return fallback
  if (typeof value !== 'boolean') {
    throw new DLPackTypeError('ERR_DLPACK_INVALID_ARGUMENT', `${what} must be a boolean, got ${describe(value)}`)
  }
  return value
}

/** The options object of a method: `{}` when absent (undefined or null), else an object. */
export function checkOptions<T extends object>(options: T | null | undefined, what: string): Partial<T> {
  if (options === undefined || options === null) return {}
  if (typeof options !== 'object') {
    throw new DLPackTypeError('ERR_DLPACK_INVALID_ARGUMENT', `${what} options must be an object, got ${describe(options)}`)
  }
  return options
}

/** A DLPack stream value as a bigint (`null` when unset). */
export function streamValue(stream: unknown): bigint | null {
  if (stream === undefined || stream === null) return null
  if (typeof stream === 'bigint') return stream
  if (typeof stream === 'number' && Number.isSafeInteger(stream)) return BigInt(stream)
  throw new DLPackTypeError(
    'ERR_DLPACK_INVALID_ARGUMENT',
    `stream must be a bigint, a safe integer, null or undefined, got ${describe(stream)}`,
  )
}

/** `dtype` if it is a dtype name, else `ERR_DLPACK_INVALID_ARGUMENT`. */
export function checkDType(dtype: unknown): DType {
  if (!isDType(dtype)) {
    throw new DLPackTypeError('ERR_DLPACK_INVALID_ARGUMENT', `unknown dtype ${describe(dtype)}`)
  }
  return dtype
}

/**
 * @internal Throws `ERR_DLPACK_DTYPE_MISMATCH` unless `actual` is `expected` (a dtype the
 * caller asked for: `fromDLPack(x, { dtype })`, `Tensor.fromTransfer(x, { dtype })`).
 */
export function checkExpectedDType(actual: DType, expected: unknown, what: string): void {
  if (!isDType(expected)) {
    throw new DLPackTypeError('ERR_DLPACK_INVALID_ARGUMENT', `unknown dtype ${JSON.stringify(expected)}`)
  }
  if (actual !== expected) {
    throw new DLPackTypeError('ERR_DLPACK_DTYPE_MISMATCH', `expected ${expected}, but ${what} is ${actual}`)
  }
}
