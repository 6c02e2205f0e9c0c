/**
 * What a JS buffer is, asked without trusting it: the brand checks that a Proxy or a
 * look-alike object cannot pass, and whether an ArrayBuffer can shrink under a pointer into it
 * or was detached. Used where JS memory enters (`Tensor.from`, `fromDLPack`) and by the views.
 */

/** `ArrayBuffer.prototype.resizable`'s getter, kept at load (undefined where the runtime has none). */
const resizableGetter = Object.getOwnPropertyDescriptor(ArrayBuffer.prototype, 'resizable')?.get

/**
 * Whether `buffer` can shrink under a pointer into it: a resizable ArrayBuffer. The addon then
 * copies the span (`isCopy`) instead of keeping a pointer into memory that `resize()` may take
 * away (docs/guide.md, "Resizable and growable buffers"). A growable SharedArrayBuffer cannot shrink, and grows in
 * place, so it is shared zero-copy like any other.
 */
export function canShrink(buffer: ArrayBuffer | SharedArrayBuffer): boolean {
  return resizableGetter !== undefined && !isSharedArrayBuffer(buffer) && resizableGetter.call(buffer) === true
}

/** Whether an ArrayBuffer was detached (transferred); SharedArrayBuffers never are. */
export function isDetached(buffer: ArrayBuffer | SharedArrayBuffer): boolean {
  if (isSharedArrayBuffer(buffer)) return false
  const flag = (buffer as { detached?: boolean }).detached // Node ≥ 22
  if (typeof flag === 'boolean') return flag
  try {
    new Uint8Array(buffer, 0, 0)
    return false
  } catch {
    return true
  }
}

export function isClampedArray(value: unknown): value is Uint8ClampedArray {
  return Object.prototype.toString.call(value) === '[object Uint8ClampedArray]'
}

/** The `byteLength` getters, kept at load: calling one is the brand check of its buffer type. */
const arrayBufferLength = Object.getOwnPropertyDescriptor(ArrayBuffer.prototype, 'byteLength')?.get
const sharedBufferLength =
  typeof SharedArrayBuffer === 'function' ? Object.getOwnPropertyDescriptor(SharedArrayBuffer.prototype, 'byteLength')?.get : undefined

/** Whether `getter` accepts `value` as its receiver (the internal-slot check `instanceof` is not). */
function hasBrand(getter: (() => unknown) | undefined, value: unknown): boolean {
  if (getter === undefined || typeof value !== 'object' || value === null) return false
  try {
    getter.call(value)
    return true
  } catch {
    return false
  }
}

/**
 * Whether `value` is a real SharedArrayBuffer. A Proxy of one, or an object inheriting from its
 * prototype, passes `instanceof` but is none: reading it as one throws TypeErrors of the runtime.
 */
export function isSharedArrayBuffer(value: unknown): value is SharedArrayBuffer {
  return typeof SharedArrayBuffer === 'function' && value instanceof SharedArrayBuffer && hasBrand(sharedBufferLength, value)
}

/** Whether `value` is a real ArrayBuffer (see `isSharedArrayBuffer`). */
export function isArrayBuffer(value: unknown): value is ArrayBuffer {
  return value instanceof ArrayBuffer && hasBrand(arrayBufferLength, value)
}

/** Whether `value` is a real ArrayBuffer or SharedArrayBuffer. */
export function isBuffer(value: unknown): value is ArrayBuffer | SharedArrayBuffer {
  return isArrayBuffer(value) || isSharedArrayBuffer(value)
}
