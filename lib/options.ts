/**
 * The option and argument types of `Tensor`'s methods and constructors: plain data, kept apart
 * from lib/tensor.ts so that modules the class calls (lib/interop/to-library.ts) can name them
 * without importing the class. `ToOptions` names `Tensor` (its `out`), so it stays in
 * lib/tensor.ts.
 */
import type { DeviceLike } from './device'
import type { DType } from './dtype'

/** Options of `__dlpack__`, mirroring the Python array API's keywords. */
export interface DLPackOptions {
  /**
   * The consumer's stream (CUDA: a `cudaStream_t` as bigint, or `1n` legacy default, `2n`
   * per-thread default, `-1n` no synchronisation; unset means the legacy default stream; `0`
   * is refused with `ERR_DLPACK_STREAM`). Numbers are accepted when they are safe integers.
   * Must be `undefined`/`null` for CPU tensors.
   */
  stream?: bigint | number | null
  /** The newest DLPack version the consumer understands; below `[1, 0]` gives a legacy capsule. */
  maxVersion?: readonly [number, number] | null
  /** The device the consumer wants the data on. */
  dlDevice?: readonly [number, number] | null
  /** `true`: always copy; `false`: never copy (throw if needed); `null`/`undefined`: copy only if needed. */
  copy?: boolean | null
}

/** Options of `Tensor.empty` and `Tensor.zeros`. */
export interface CreateOptions {
  /**
   * Where to allocate: `'cpu'` (default, V8 memory), a CUDA device such as `'cuda:0'`, or
   * `'cuda_host'` (pinned host memory: see docs/cuda.md).
   */
  device?: DeviceLike
  /**
   * Allocate the CPU tensor in a `SharedArrayBuffer` (zero-filled) instead of an `ArrayBuffer`,
   * so that `transfer()` hands it to worker threads without a copy.
   */
  shared?: boolean
}

/** Options of `Tensor#getData`. */
export interface DataOptions {
  /** Return the zero-copy view of a read-only tensor too (do not write to it). */
  allowReadOnly?: boolean
  /**
   * A window: index of its first element within the span `data` covers (in elements, from the
   * lowest-addressed element; default 0). With `offset` or `length`, `getData` returns a new
   * view of that window only, which works for tensors larger than the runtime's largest
   * ArrayBuffer too.
   */
  offset?: number
  /** Elements in the window (default: to the end of the span `data` covers). */
  length?: number
}

/** Options of `Tensor#copy_`. */
export interface CopyOptions {
  /**
   * A CUDA stream (a `cudaStream_t` as bigint, or a DLPack stream value: `1n` legacy default,
   * `2n` per-thread default): the copy runs after the work already enqueued on it, and work
   * enqueued on it afterwards runs after the copy. Unset: the devices' legacy default streams.
   */
  stream?: bigint | number | null
}

/** Options of `Tensor.from`. */
export interface FromArrayOptions<D extends DType = DType> {
  /** Reinterpret the bytes as this dtype (e.g. `'bfloat16'` over a Uint16Array). */
  dtype?: D
  /** Strides in elements (default: row-major). */
  strides?: readonly number[]
  /** Offset of the first element, in elements from the start of the array. */
  offset?: number
  /** Mark the tensor read-only: exports carry READ_ONLY, `.data` refuses a writable view. */
  readonly?: boolean
  /**
   * uint8 only: JS views of the tensor are `Uint8ClampedArray`s (writes clamp to 0..255, as
   * `ImageData` and canvas pixels expect). Default: whether `array` is a `Uint8ClampedArray`.
   */
  clamped?: boolean
}

/** Options of `toOrt`, `toImageData`, `toTf`, `toSharp` and `toArrow`. */
export interface PeerViewOptions {
  /** Hand out the zero-copy view of a read-only tensor too (the library must not write to it). */
  allowReadOnly?: boolean
}
