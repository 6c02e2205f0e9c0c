/**
 * Tensors handed to another JS thread (`worker_threads`) without copying their data: what
 * `Tensor#transfer()` makes, `postMessage` carries and `Tensor.fromTransfer()` rebuilds.
 *
 * Two kinds, chosen by where the memory lives (docs/guide.md, "Worker threads"):
 * - `'shared'`: a tensor over a `SharedArrayBuffer`. The message carries the buffer itself, which
 *   structured cloning shares between threads (V8 keeps the memory alive while any thread holds
 *   it). Rebuilt any number of times.
 * - `'token'`: memory no JS thread owns (a native producer's DLPack tensor, a CUDA allocation).
 *   The message carries a number naming an entry of a process-wide registry (src/transfer.rs);
 *   the receiver claims it exactly once. Released unclaimed by `releaseTransfer()` or when the
 *   sending thread ends.
 * A tensor over an ordinary `ArrayBuffer` cannot be shared without a copy (the buffer belongs to
 * one thread, and a transfer list would detach it under every export of it): `transfer()`
 * refuses it, and `toShared()` makes the one copy explicitly.
 */
import { native } from './native.js'
import { type DType, DTYPES, isDType } from './dtype'
import { BufferError, DLPackTypeError, callNative as call } from './errors'

/** Marks (and versions) the objects `Tensor#transfer()` makes. */
const MARK = 'napiDlpackTransfer'
const VERSION = 1

interface TransferBase<D extends DType> {
  readonly napiDlpackTransfer: 1
  readonly dtype: D
  readonly shape: readonly number[]
  /** Strides in elements. */
  readonly strides: readonly number[]
  readonly readonly: boolean
}

/** A tensor over a SharedArrayBuffer: zero-copy in every runtime that shares it (Electron too). */
export interface SharedTransfer<D extends DType = DType> extends TransferBase<D> {
  readonly kind: 'shared'
  readonly buffer: SharedArrayBuffer
  /** Byte offset of the tensor's lowest element in `buffer`. */
  readonly byteOffset: number
  /** Bytes from the lowest to the end of the highest element. */
  readonly byteLength: number
  /** Index of the first element from the lowest one, in elements (non-zero with negative strides). */
  readonly offset: number
}

/** Memory no JS thread owns, handed over by a process-wide token claimed exactly once. */
export interface TokenTransfer<D extends DType = DType> extends TransferBase<D> {
  readonly kind: 'token'
  /** Names this process: a token posted to another process is refused there. */
  readonly process: string
  readonly id: number
  /** `[deviceType, deviceId]` of the memory. */
  readonly device: readonly [number, number]
}

/** What `Tensor#transfer()` returns: a plain object to `postMessage` to another thread. */
export type TensorTransfer<D extends DType = DType> = SharedTransfer<D> | TokenTransfer<D>

/** @internal What `Tensor#transfer()` knows of its tensor. */
export interface TransferSource {
  readonly handle: unknown
  readonly dtype: DType
  readonly shape: readonly number[]
  readonly strides: readonly number[]
  readonly viewOffset: number
  readonly viewLength: number
  readonly readonly: boolean
  readonly device: readonly [number, number]
  /** The tensor's `.data` view, made only for JS memory. */
  view(): ArrayBufferView
}

/** @internal `Tensor#transfer()`. */
export function makeTransfer(source: TransferSource): TensorTransfer {
  const common = {
    [MARK]: VERSION,
    dtype: source.dtype,
    shape: [...source.shape],
    strides: [...source.strides],
    readonly: source.readonly,
  } as const
  const id = call(() => native.transferHandle(source.handle))
  if (id !== null && id !== undefined) {
    return { ...common, kind: 'token', process: native.transferProcessKey(), id, device: [...source.device] as [number, number] }
  }
  const view = source.view()
  if (!isShared(view.buffer)) {
    throw new BufferError(
      'ERR_DLPACK_COPY_REQUIRED',
      'the tensor is over an ArrayBuffer, which only its own thread can use: a worker can only get a copy. ' +
        'Make the copy once with toShared() (or create the tensor with { shared: true }) and transfer that',
    )
  }
  const itemsize = DTYPES[source.dtype].itemsize
  return {
    ...common,
    kind: 'shared',
    buffer: view.buffer,
    byteOffset: view.byteOffset,
    byteLength: source.viewLength * itemsize,
    offset: source.viewOffset,
  }
}

function isShared(buffer: ArrayBufferLike): buffer is SharedArrayBuffer {
  return typeof SharedArrayBuffer === 'function' && buffer instanceof SharedArrayBuffer
}

/** Whether `value` is what `Tensor#transfer()` made (after a trip through `postMessage`). */
export function isTransfer(value: unknown): value is TensorTransfer {
  return typeof value === 'object' && value !== null && (value as Record<string, unknown>)[MARK] === VERSION
}

const isIndexArray = (value: unknown): value is number[] =>
  Array.isArray(value) && value.every((item) => Number.isSafeInteger(item))

const isCount = (value: unknown): value is number => Number.isSafeInteger(value) && (value as number) >= 0

/** @internal Checks a received transfer object field by field (it came from another thread). */
export function checkTransfer(value: unknown): TensorTransfer {
  const bad = (why: string) => new DLPackTypeError('ERR_DLPACK_INVALID_ARGUMENT', `not a tensor transfer: ${why}`)
  if (!isTransfer(value)) throw bad(`expected the object Tensor#transfer() returns (${MARK}: ${VERSION})`)
  const transfer = value as TensorTransfer & Record<string, unknown>
  if (!isDType(transfer.dtype)) throw bad(`unknown dtype ${JSON.stringify(transfer.dtype)}`)
  if (!isIndexArray(transfer.shape) || !isIndexArray(transfer.strides)) throw bad('shape and strides must be arrays of integers')
  if (typeof transfer.readonly !== 'boolean') throw bad('readonly must be a boolean')
  if (transfer.kind === 'shared') {
    if (!isShared(transfer.buffer as ArrayBufferLike)) throw bad('buffer must be a SharedArrayBuffer')
    if (!isCount(transfer.byteOffset) || !isCount(transfer.byteLength) || !isCount(transfer.offset)) {
      throw bad('byteOffset, byteLength and offset must be non-negative integers')
    }
    if (transfer.byteOffset + transfer.byteLength > (transfer.buffer as SharedArrayBuffer).byteLength) {
      throw bad(`bytes ${transfer.byteOffset}..${transfer.byteOffset + transfer.byteLength} lie outside the buffer`)
    }
    return transfer
  }
  if (transfer.kind === 'token') {
    if (typeof transfer.process !== 'string' || !Number.isSafeInteger(transfer.id)) throw bad('a token needs process and id')
    if (transfer.process !== native.transferProcessKey()) {
      throw bad('the token was made in another process (tokens name memory of the process that made them)')
    }
    return transfer
  }
  throw bad(`unknown kind ${JSON.stringify((transfer as { kind?: unknown }).kind)}`)
}

/** @internal Claims a token transfer: the native handle of a new tensor over its memory. */
export function claimToken(transfer: TokenTransfer): unknown {
  return call(() => native.claimTransfer(transfer.id))
}

/**
 * Releases a token transfer nobody will claim (the message was never sent, or its receiver is
 * gone): the memory is freed now if no tensor holds it. Returns false when there is nothing to
 * release: the token was claimed or released already, its sending thread ended, or the transfer
 * is `'shared'` (a SharedArrayBuffer is freed by the garbage collector of every thread holding it).
 */
export function releaseTransfer(transfer: TensorTransfer): boolean {
  const checked = checkTransfer(transfer)
  return checked.kind === 'token' ? call(() => native.releaseTransfer(checked.id)) : false
}
