/**
 * The TypedArrays over a tensor's memory that `Tensor#data`, `getData` and `toTypedArray` hand
 * out, made from its handle and layout (the class keeps the cache of the whole-span view). Their
 * type is the dtype's, or `Uint8ClampedArray` for a clamped tensor (see `ClampedTensor`).
 */
import { native } from './native.js'
import { toDevice } from './device'
import { type DataArray, type DType, DTYPES } from './dtype'
import { isDetached } from './buffers'
import { BufferError, DLPackTypeError, TensorDisposedError, callNative as call, describe } from './errors'
import { HOST_ACCESSIBLE_DEVICE_TYPES } from './generated/facts'
import type { TensorLayout } from './layout'
import type { DataOptions } from './options'

type ViewConstructor = ReturnType<(typeof DTYPES)[DType]['view']> | Uint8ClampedArrayConstructor

/** The TypedArray type of JS views: the dtype's, or `Uint8ClampedArray` for clamped tensors. */
function viewType(clamped: boolean, dtype: DType): ViewConstructor {
  return clamped ? Uint8ClampedArray : DTYPES[dtype].view()
}

/** The zero-copy view of the whole span of the tensor behind `handle` (what `data` caches). */
export function spanView(handle: unknown, meta: TensorLayout, clamped: boolean): DataArray<DType> {
  const view = call(() => native.handleView(handle))
  if (isDetached(view.buffer as ArrayBuffer)) {
    // A view of foreign memory kept by the handle, whose ArrayBuffer was transferred away.
    throw new TensorDisposedError('ERR_TENSOR_DETACHED', "the tensor's view was detached (transferred)")
  }
  const spec = DTYPES[meta.dtype as DType]
  const View = viewType(clamped, meta.dtype)
  return new View(view.buffer as ArrayBuffer, view.byteOffset, meta.viewLength * spec.lanes) as DataArray<DType>
}

/** A new view of the window `options.offset`, `options.length` of the span (see `getData`). */
export function windowView(handle: unknown, meta: TensorLayout, clamped: boolean, options: DataOptions): DataArray<DType> {
  const offset = options.offset ?? 0
  if (!Number.isSafeInteger(offset) || offset < 0) {
    throw new DLPackTypeError('ERR_DLPACK_INVALID_ARGUMENT', `offset must be a non-negative integer, got ${describe(offset)}`)
  }
  const length = options.length ?? meta.viewLength - offset
  if (!Number.isSafeInteger(length) || length < 0) {
    throw new DLPackTypeError('ERR_DLPACK_INVALID_ARGUMENT', `length must be a non-negative integer, got ${describe(length)}`)
  }
  const window = call(() => native.handleWindow(handle, offset, length))
  const spec = DTYPES[meta.dtype as DType]
  return new (viewType(clamped, meta.dtype))(window.buffer as ArrayBuffer, window.byteOffset, length * spec.lanes) as DataArray<DType>
}

/** A row-major copy of the elements (`toTypedArray`); host tensors only. */
export function denseCopy(handle: unknown, meta: TensorLayout, clamped: boolean): DataArray<DType> {
  if (!HOST_ACCESSIBLE_DEVICE_TYPES.includes(meta.deviceType)) {
    const device = toDevice([meta.deviceType, meta.deviceId])
    throw new BufferError('ERR_DLPACK_NOT_CPU', `tensor memory is on ${String(device)}; call .to('cpu') first`)
  }
  const copy = call(() => native.copyHandle(handle))
  try {
    const view = call(() => native.handleView(copy))
    const spec = DTYPES[meta.dtype as DType]
    return new (viewType(clamped, meta.dtype))(view.buffer as ArrayBuffer, view.byteOffset, meta.numel * spec.lanes) as DataArray<DType>
  } finally {
    call(() => native.releaseHandle(copy))
  }
}
