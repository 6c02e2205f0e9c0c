/**
 * Argument checking for the layout and dtype conversions of `Tensor` (`permute`, `transpose`,
 * `contiguous`, `astype`) and the views. The kernels are native (`napi_dlpack::convert`, bound in
 * src/binding/convert.rs and src/ops/convert.rs); the exact formula is documented on `Tensor#astype` and in docs/guide.md.
 */
import { type DType, isDType } from './dtype'
import { DLPackTypeError, describe, dlpackError } from './errors'
import { MAX_NDIM } from './generated/facts'
import type { AstypeArgs } from './binding/index.js'

/** One value for every element, or one per index along `axis`. */
export type PerChannel = number | readonly number[]

/**
 * Options of `Tensor#astype`. The steps given are applied in this order, each as one float64
 * operation: `v = x * scale`, `v = v + offset`, `v = v - mean`, `v = v / std`; then `v` is
 * stored in the target dtype (see `Tensor#astype` for rounding and saturation).
 */
export interface AstypeOptions<Out = unknown> {
  scale?: PerChannel
  offset?: PerChannel
  /** Subtracted after `scale` and `offset` (ImageNet-style normalisation). */
  mean?: PerChannel
  /** Divided by last. */
  std?: PerChannel
  /** The axis of the source that per-channel arrays follow (negative counts from the end). Required when one is an array of more than one value. */
  axis?: number
  /**
   * Write into this tensor instead of allocating one (contiguous, writable, on the host, of the
   * target dtype and the source's shape, not overlapping the source); `astype` returns it.
   */
  out?: Out
}

function invalid(message: string): DLPackTypeError {
  return new DLPackTypeError('ERR_DLPACK_INVALID_ARGUMENT', message)
}

export function checkInteger(value: unknown, what: string): number {
  if (!Number.isSafeInteger(value)) throw invalid(`${what} must be an integer, got ${describe(value)}`)
  return value as number
}

/**
 * The values of `list` (an array), each read once by index into a plain array: holes are
 * `undefined` (and refused by the caller's check), not skipped as `map` and `every` skip them,
 * and an own iterator or getter cannot show the checks one value and the addon another.
 */
export function readList(list: readonly unknown[], max = MAX_NDIM, what = 'the list', tooLong = 'ERR_DLPACK_INVALID_ARGUMENT'): unknown[] {
  const length = list.length
  if (length > max) throw dlpackError(tooLong, `${what} has ${length} entries, more than ${max}`)
  const values = new Array<unknown>(length)
  for (let i = 0; i < length; i++) values[i] = list[i]
  return values
}

/** The axes of `permute(...axes)` or `permute([...axes])`, checked to be integers. */
export function permuteAxes(args: readonly (number | readonly number[])[]): number[] {
  const axes = args.length === 1 && Array.isArray(args[0]) ? readList(args[0] as readonly number[], MAX_NDIM, 'axes') : readList(args, MAX_NDIM, 'axes')
  return axes.map((axis) => checkInteger(axis, 'an axis'))
}

/**
 * What `Tensor`'s view methods ask the addon for (`viewHandle`, src/binding/convert.rs). The
 * arguments are checked to be integers here (a JS number converts to an integer natively by
 * truncation, which would hide `1.5`); their ranges and the layout arithmetic are checked
 * natively (`napi_dlpack::view_layout`), where the view is also checked against the memory.
 */
export type ViewRequest = import('./binding/index.js').ViewRequest

/** The sizes of `reshape(...shape)` / `reshape([...shape])` (and `view`, `expand`). */
export function viewShape(op: string, args: readonly (number | readonly number[])[]): number[] {
  // Read once, by index (holes are refused, not skipped): see `readList`.
  const list = args.length === 1 && Array.isArray(args[0]) ? (args[0] as readonly unknown[]) : (args as readonly unknown[])
  return readList(list, MAX_NDIM, `the shape of ${op}`, 'ERR_DLPACK_NDIM').map((size) => checkInteger(size, `a size of ${op}`))
}

/** An integer argument of a view method; `undefined` (and `null`, for optional ones) stays. */
export function viewInt(value: unknown, what: string, optional = false): number | undefined {
  if (optional && (value === undefined || value === null)) return undefined
  return checkInteger(value, what)
}

/** The axes of `transpose(dim0, dim1)` as a permutation of `ndim` dimensions. */
export function transposeAxes(ndim: number, dim0: number, dim1: number): number[] {
  const resolve = (dim: unknown): number => {
    const axis = checkInteger(dim, 'a transpose dimension')
    const resolved = axis < 0 ? axis + ndim : axis
    if (resolved < 0 || resolved >= ndim) {
      throw invalid(`dimension ${axis} is out of range for a tensor of ${ndim} dimensions`)
    }
    return resolved
  }
  const [a, b] = [resolve(dim0), resolve(dim1)]
  const axes = Array.from({ length: ndim }, (_, i) => i)
  axes[a] = b
  axes[b] = a
  return axes
}

function perChannel(value: unknown, name: string): number[] | undefined {
  if (value === undefined) return undefined
  const values = typeof value === 'number' ? [value] : Array.isArray(value) ? readList(value, 2 ** 32 - 1, name) : undefined
  if (values === undefined || !values.every((v) => typeof v === 'number')) {
    throw invalid(`${name} must be a number or an array of numbers`)
  }
  return values as number[]
}

/** The native arguments of `astype`; `out` is passed separately as a handle. */
export function astypeArgs(dtype: unknown, options: AstypeOptions): { dtype: DType; args: AstypeArgs } {
  if (!isDType(dtype)) throw invalid(`unknown dtype ${describe(dtype)}`)
  if (typeof options !== 'object' || options === null) throw invalid('astype options must be an object')
  const args: AstypeArgs = {
    scale: perChannel(options.scale, 'scale'),
    offset: perChannel(options.offset, 'offset'),
    mean: perChannel(options.mean, 'mean'),
    std: perChannel(options.std, 'std'),
    axis: options.axis === undefined ? undefined : checkInteger(options.axis, 'axis'),
  }
  return { dtype, args }
}
