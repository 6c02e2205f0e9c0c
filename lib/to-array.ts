/**
 * `Tensor#toArray()`: a tensor's elements as nested JS arrays, refused past what the JS heap
 * holds safely.
 */
import { type DType, DTYPES } from './dtype'
import { BufferError } from './errors'

/**
 * Most values `toArray()` builds: elements, the nested arrays holding them, and one more per
 * complex element (its `[re, im]` array). Each value costs V8 up to ~64 bytes of heap (an empty
 * nested array ~43, a complex pair ~64, measured), so 2^24 values peak at ~1 GiB: within the
 * default heap limit of every runtime we test (about 4 GiB here, 2 GiB on a machine with 8 GiB
 * of memory). Past it V8 ran out of heap and aborted the process (`[2 ** 27, 0]`, 2^27 empty
 * arrays, did on Node 20/22/24; see docs/api.md for the measurements).
 */
const MAX_TO_ARRAY_VALUES = 2 ** 24

/** What `toArray` reads of a tensor (`Tensor` passes itself). */
export interface ArraySource {
  readonly shape: readonly number[]
  readonly dtype: DType
  readonly numel: number
  toTypedArray(): unknown
}

/** Nested arrays of the elements (bool as booleans, 64-bit integers as bigints, complex as [re, im]). */
export function toNestedArray(tensor: ArraySource): unknown[] | unknown {
  // Every value toArray() makes counts: the elements and the nested arrays holding them (a
  // shape like [2 ** 31, 0] has no elements but would be 2 ** 31 empty arrays), and complex
  // elements twice (each is an array of two numbers).
  const shape = tensor.shape
  const dtype = tensor.dtype
  const lanes = DTYPES[dtype].lanes
  let values = lanes === 2 ? 2 * tensor.numel : tensor.numel
  let arrays = 1
  for (let axis = 0; axis + 1 < shape.length; axis++) {
    arrays *= shape[axis] as number
    values += arrays
  }
  if (values > MAX_TO_ARRAY_VALUES) {
    throw new BufferError(
      'ERR_DLPACK_TOO_LARGE',
      `toArray() of shape [${shape.join(', ')}] makes ${values} values (elements and nested arrays): more than toArray() builds (2^24, what the JS heap holds safely); read it with toTypedArray() or in windows with getData({ offset, length })`,
    )
  }
  const flat = tensor.toTypedArray() as ArrayLike<number | bigint>
  const element = (index: number): unknown => {
    if (lanes === 2) return [flat[index * 2], flat[index * 2 + 1]]
    const value = flat[index]
    return dtype === 'bool' ? value !== 0 : value
  }
  let next = 0
  const build = (axis: number): unknown => {
    if (axis === shape.length) return element(next++)
    const out: unknown[] = []
    for (let i = 0; i < (shape[axis] as number); i++) out.push(build(axis + 1))
    return out
  }
  return build(0)
}
