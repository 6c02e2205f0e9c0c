/**
 * The native handles behind `Tensor`'s constructors: over JS memory (`Tensor.from`,
 * `Tensor.fromTransfer`, `createFromMemory`) or over new memory (`Tensor.empty`, `Tensor.zeros`),
 * every argument checked first. A handle is all they make: lib/tensor.ts wraps it in a `Tensor`
 * (this module knows nothing of the class, which imports it).
 */
import { MAX_VIEW_BYTES, native } from './native.js'
import { Device, toDevice } from './device'
import { DLDeviceType, type DType, DTYPES, dtypeOfArray } from './dtype'
import { canShrink, isBuffer, isClampedArray, isDetached } from './buffers'
import { checkDType, checkFlag, checkOptions, checkShape } from './checks'
import { BufferError, DLPackTypeError, TensorDisposedError, callNative as call, describe } from './errors'
import type { CreateOptions, FromArrayOptions } from './options'

/**
 * Wraps JS memory as a native handle, without copying if the memory is aligned to the
 * elements' size; misaligned memory is copied (the handle says `isCopy`). `offset` is in
 * elements of `dtype` from the start of `view`.
 */
export function wrapMemory(
  memory: ArrayBuffer | SharedArrayBuffer | ArrayBufferView,
  dtype: DType,
  shape: readonly number[],
  strides: readonly number[] | undefined,
  offset: number,
  readonly: boolean,
): unknown {
  const buffer = ArrayBuffer.isView(memory) ? memory.buffer : memory
  if (!isBuffer(buffer)) {
    throw new DLPackTypeError('ERR_DLPACK_INVALID_ARGUMENT', 'expected an ArrayBuffer, SharedArrayBuffer or TypedArray')
  }
  if (isDetached(buffer)) {
    throw new TensorDisposedError('ERR_TENSOR_DETACHED', 'the ArrayBuffer has been detached (transferred)')
  }
  const byteLength = ArrayBuffer.isView(memory) ? memory.byteLength : buffer.byteLength
  if (byteLength > MAX_VIEW_BYTES) throw tooLarge(byteLength)
  const bytes = ArrayBuffer.isView(memory)
    ? new Uint8Array(memory.buffer, memory.byteOffset, memory.byteLength)
    : new Uint8Array(buffer)
  if (!Number.isSafeInteger(offset) || offset < 0) {
    throw new DLPackTypeError('ERR_DLPACK_INVALID_ARGUMENT', `offset must be a non-negative integer, got ${describe(offset)}`)
  }
  const dims = checkShape(shape)
  const steps = strides ? checkShape(strides, 'strides') : null
  return call(() => native.wrapBuffer(bytes, dtype, dims, steps, offset, readonly, canShrink(buffer)))
}

/** The error for JS memory (a view, or a new buffer) larger than the runtime can view. */
function tooLarge(bytes: number): BufferError {
  return new BufferError(
    'ERR_DLPACK_TOO_LARGE',
    `${bytes} bytes is more than this runtime's largest ArrayBuffer view (${MAX_VIEW_BYTES} bytes)`,
  )
}

/**
 * What `Tensor.from` makes of `array`: the handle over its memory (see `wrapMemory`), and whether
 * JS views of it are `Uint8ClampedArray`s (see `ClampedTensor`).
 */
export function wrapArray(
  array: ArrayBufferView | ArrayBuffer | SharedArrayBuffer,
  shape: readonly number[] | undefined,
  options: FromArrayOptions,
): { handle: unknown; clamped: boolean } {
  const opts = checkOptions(options, 'Tensor.from')
  const isView = ArrayBuffer.isView(array)
  if (!isView && !isBuffer(array)) {
    throw new DLPackTypeError('ERR_DLPACK_INVALID_ARGUMENT', `expected an ArrayBuffer, SharedArrayBuffer or ArrayBufferView, got ${describe(array)}`)
  }
  const natural = isView ? (dtypeOfArray(array) ?? 'uint8') : 'uint8'
  const dtype = checkDType(opts.dtype ?? natural)
  const offset = opts.offset ?? 0
  if (!Number.isSafeInteger(offset) || offset < 0) {
    throw new DLPackTypeError('ERR_DLPACK_INVALID_ARGUMENT', `offset must be a non-negative integer, got ${describe(offset)}`)
  }
  const readonly = checkFlag(opts.readonly, 'readonly')
  const byteLength = array.byteLength
  const itemsize = DTYPES[dtype].itemsize
  if (shape === undefined) {
    if (byteLength % itemsize !== 0) {
      throw new DLPackTypeError('ERR_DLPACK_INVALID_ARGUMENT', `${byteLength} bytes is not a whole number of ${dtype}`)
    }
    shape = [byteLength / itemsize - offset]
  }
  // A Uint8ClampedArray reinterpreted as another dtype (e.g. 'bool') is not clamped.
  const clamped = checkFlag(opts.clamped, 'clamped', dtype === 'uint8' && isClampedArray(array))
  if (clamped && dtype !== 'uint8') {
    throw new DLPackTypeError('ERR_DLPACK_INVALID_ARGUMENT', `clamped views are uint8 only, not ${dtype}`)
  }
  const handle = wrapMemory(array, dtype, shape, opts.strides, offset, readonly)
  return { handle, clamped }
}

/**
 * The handle of a new tensor (`Tensor.empty`; `Tensor.zeros` with `zeroed`): V8 memory on the
 * CPU, device memory on `cuda:N`, pinned host memory on `cuda_host`.
 */
export function allocate(shapeArg: readonly number[], dtype: DType, optionsArg: CreateOptions, zeroed: boolean): unknown {
  const shape = checkShape(shapeArg)
  const options = checkOptions(optionsArg, 'Tensor.empty/zeros')
  const { itemsize } = DTYPES[checkDType(dtype)]
  const shared = checkFlag(options.shared, 'shared')
  const device = toDevice(options.device ?? Device.CPU)
  let numel = 1
  for (const dim of shape) numel *= dim
  const negative = numel < 0 || shape.some((dim) => dim < 0)
  if (!negative && device.type === DLDeviceType.CPU && !(numel * itemsize <= MAX_VIEW_BYTES)) {
    throw tooLarge(numel * itemsize)
  }
  if (!Number.isSafeInteger(numel * itemsize) || negative) {
    throw new DLPackTypeError('ERR_DLPACK_INVALID_ARGUMENT', `shape [${shape.join(', ')}] is too large or negative`)
  }
  if (shared && device.type !== DLDeviceType.CPU) {
    throw new DLPackTypeError('ERR_DLPACK_INVALID_ARGUMENT', `shared: true allocates CPU memory, not ${String(device)}`)
  }
  if (device.type === DLDeviceType.CUDA) {
    return call(() => native.cudaEmpty(dtype, shape, device.id, zeroed))
  }
  if (device.type === DLDeviceType.CUDAHost) {
    return call(() => native.pinnedEmpty(dtype, shape, device.id, zeroed))
  }
  if (device.type !== DLDeviceType.CPU) {
    throw new BufferError('ERR_DLPACK_DEVICE', `cannot allocate tensors on ${String(device)} (cpu, cuda and cuda_host are supported)`)
  }
  const buffer = shared ? new SharedArrayBuffer(numel * itemsize) : new ArrayBuffer(numel * itemsize)
  return wrapMemory(buffer, dtype, shape, undefined, 0, false)
}
