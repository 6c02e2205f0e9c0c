import { native } from './native.js'
import { type Device, type DeviceLike, toDevice } from './device'
import { type ArrayDType, DLDeviceType, type DType, DTYPES, dtypeOfArray, isDType } from './dtype'
import { type AdaptedSource, type AdaptOptions, adapt, isOrtTensorLike } from './interop/from-library'
import { BufferError, CapsuleError, DLPackTypeError, callNative, describe } from './errors'
import { COPY_MODE, DLPACK_VERSION } from './generated/facts'
import { type ClampedTensor, createFromMemory, Tensor } from './tensor'
import { checkExpectedDType, streamValue } from './checks'
import { EXCHANGE_API_PROPERTY } from './exchange-slots'
import type { DLPackCapsule } from './opaque'
import { isSharedArrayBuffer } from './buffers'
import type { DLPackOptions } from './options'

/** An object that exports itself through DLPack (the JS `__dlpack__` protocol). */
export interface CanDLPack<T extends DLDeviceType = DLDeviceType, I extends number = number> {
  __dlpack__(options?: DLPackOptions): DLPackCapsule
  /** Phantom, for typing only: the device the capsule will be on. */
  readonly __dlpackDeviceType__?: T
  readonly __dlpackDeviceId__?: I
}

/** An object that reports its DLPack device without exporting. */
export interface CanDLPackDevice<T extends DLDeviceType = DLDeviceType, I extends number = number> {
  __dlpack_device__(): readonly [T, I]
}

/**
 * An object exposing a DLPack exchange table under `EXCHANGE_API_PROPERTY`, own or inherited
 * (napi-dlpack's `Tensor`, or another addon's tensor class). Declared here beside the other
 * source shapes rather than in lib/exchange.ts, which imports this module (no import cycle).
 */
export interface HasExchangeApi {
  readonly [EXCHANGE_API_PROPERTY]: unknown
}

/** scijs `ndarray` and `@stdlib/ndarray` style arrays: a TypedArray plus layout, in elements. */
export interface NDArrayLike {
  readonly data: ArrayBufferView
  readonly shape: readonly number[]
  readonly stride?: readonly number[]
  readonly strides?: readonly number[]
  readonly offset?: number
  readonly dtype?: string
}

/** Everything `fromDLPack` accepts. */
export type DLPackSource =
  | Tensor
  | ClampedTensor
  | DLPackCapsule
  | CanDLPack
  | HasExchangeApi
  | ArrayBuffer
  | SharedArrayBuffer
  | ArrayBufferView
  | NDArrayLike
  | AdaptedSource

export interface FromDLPackOptions<D extends DType = DType> {
  /**
   * The dtype the result must have: the result is typed `Tensor<D>`, and a source of another
   * dtype throws `ERR_DLPACK_DTYPE_MISMATCH` (a `Tensor` or a library object before anything
   * is shared; a capsule, whose dtype is only known once it is consumed, is consumed and
   * released).
   */
  dtype?: D
  /** The device the result must be on (default: where the data is). */
  device?: DeviceLike
  /** `true`: always copy; `false`: never copy (throw if impossible); default: copy only if needed. */
  copy?: boolean | null
  /**
   * The consumer's stream (CUDA): passed to the producer's `__dlpack__`, which makes it wait for
   * the producer's work; napi-dlpack's own stream (the legacy default stream) then waits on it
   * too. Unset: the legacy default stream. `-1n`: no synchronisation. `0` is refused.
   */
  stream?: bigint | number | null
  /**
   * TensorFlow.js tensors only: share the tfjs tensor's memory writable. By default the result
   * is read-only, because tfjs treats tensors as immutable and shares one array between
   * several of them (reshape, clone): a write would silently change them all.
   */
  writable?: boolean
}

/** The newest DLPack version we understand, as announced to producers. */
export const MAX_VERSION: readonly [number, number] = DLPACK_VERSION

function copyMode(copy: boolean | null | undefined): number {
  if (copy === undefined || copy === null) return COPY_MODE.IF_NEEDED
  if (copy === true) return COPY_MODE.ALWAYS
  if (copy === false) return COPY_MODE.NEVER
  throw new DLPackTypeError('ERR_DLPACK_INVALID_ARGUMENT', 'copy must be a boolean, null or undefined')
}

function isNDArrayLike(value: unknown): value is NDArrayLike {
  if (typeof value !== 'object' || value === null) return false
  const candidate = value as Partial<NDArrayLike>
  return ArrayBuffer.isView(candidate.data) && Array.isArray(candidate.shape)
}

/** The options of `fromDLPack`, checked before anything is exported or consumed. */
interface CheckedOptions {
  mode: number
  stream: bigint | null
  device: Device | undefined
  dtype: DType | undefined
}

function checkOptions(options: FromDLPackOptions): CheckedOptions {
  if (typeof options !== 'object' || options === null) {
    throw new DLPackTypeError('ERR_DLPACK_INVALID_ARGUMENT', `fromDLPack options must be an object, got ${describe(options)}`)
  }
  if (options.dtype !== undefined && !isDType(options.dtype)) {
    throw new DLPackTypeError('ERR_DLPACK_INVALID_ARGUMENT', `unknown dtype ${JSON.stringify(options.dtype)}`)
  }
  return {
    mode: copyMode(options.copy),
    stream: streamValue(options.stream),
    device: options.device === undefined ? undefined : toDevice(options.device),
    dtype: options.dtype,
  }
}

/** The result of an import, refused (and released) when it is not of the dtype asked for. */
function withDType<T extends Tensor | ClampedTensor>(tensor: T, checked: CheckedOptions): T {
  if (checked.dtype === undefined) return tensor
  try {
    checkExpectedDType(tensor.dtype, checked.dtype, 'the source')
  } catch (error) {
    tensor.dispose()
    throw error
  }
  return tensor
}

/**
 * Refuses a source on another device than the requested one (only same-device results so far):
 * the rule of src/ops/negotiation.rs, which capsule imports apply natively.
 */
function checkDevice(checked: CheckedOptions, actual: readonly [number, number]): void {
  const wanted = checked.device
  if (wanted === undefined) return
  callNative(() => native.checkImportDevice(wanted.type, wanted.id, checked.mode, actual[0], actual[1]))
}

/**
 * Consumes `capsule` into a Tensor, as the checked options ask (negotiated natively: see
 * src/ops/negotiation.rs). A capsule the caller handed us is refused before it is consumed
 * whenever that can be decided without consuming it (docs/protocol.md §1.3): its device is
 * read in place, so a capsule on another device, or on a device that cannot be used, stays
 * usable. A capsule `fromDLPack` obtained itself from `__dlpack__` (`obtained`) is consumed
 * and, if refused, released at once.
 */
function fromCapsule(capsule: unknown, checked: CheckedOptions, obtained: boolean): Tensor {
  const device = checked.device
  // No stream and no device (the hot path): those arguments are left out, so the native side
  // type-checks neither.
  const handle =
    device === undefined
      ? checked.stream === null
        ? callNative(() => native.importCapsule(capsule, checked.mode))
        : callNative(() => native.importCapsule(capsule, checked.mode, checked.stream))
      : callNative(() => native.importCapsule(capsule, checked.mode, checked.stream, device.type, device.id, !obtained))
  // Our own capsule straight back is adopted as the handle: not lendable by its own property.
  return Tensor._fromHandle(handle, handle !== capsule)
}

/**
 * Imports `source` as a Tensor, zero-copy whenever the layout and runtime allow:
 * - a `Tensor`: shares its memory (no capsule is made);
 * - a capsule from `__dlpack__` (ours or any addon's);
 * - any object with `__dlpack__` (and optionally `__dlpack_device__`);
 * - an ArrayBuffer, SharedArrayBuffer, TypedArray, DataView or Buffer (keeps it alive);
 * - an ndarray-like `{ data, shape, stride | strides, offset }` (scijs ndarray, @stdlib/ndarray);
 * - a library's tensor or image as it is (lib/interop/from-library.ts): ONNX Runtime / transformers.js
 *   tensors, sharp raw output, ImageData / RawImage, Arrow vectors, tfjs tensors.
 */
export function fromDLPack<D extends DType>(source: Tensor<D>, options?: FromDLPackOptions<D>): Tensor<D>
export function fromDLPack(
  source: ClampedTensor | Uint8ClampedArray | { readonly data: Uint8ClampedArray; readonly width: number; readonly height: number },
  options?: FromDLPackOptions<'uint8'>,
): ClampedTensor
export function fromDLPack<D extends DType>(source: DLPackSource, options: FromDLPackOptions<D> & { dtype: D }): Tensor<D>
export function fromDLPack<A extends ArrayBufferView>(source: A, options?: FromDLPackOptions): Tensor<ArrayDType<A>>
export function fromDLPack(source: DLPackSource, options?: FromDLPackOptions): Tensor
export function fromDLPack(source: DLPackSource, optionsArg: FromDLPackOptions | null = {}): Tensor | ClampedTensor {
  const options = optionsArg ?? {}
  // Every option is checked first: a bad one leaves a capsule unconsumed and asks no producer.
  const checked = checkOptions(options)
  return withDType(importSource(source, options, checked), checked)
}

function importSource(source: DLPackSource, options: FromDLPackOptions, checked: CheckedOptions): Tensor | ClampedTensor {
  if (source instanceof Tensor) {
    if (checked.dtype !== undefined) checkExpectedDType(source.dtype, checked.dtype, 'the source')
    checkDevice(checked, source.__dlpack_device__())
    if (checked.stream !== null && source.device.type === DLDeviceType.CUDA) {
      // The consumer's stream must wait for the data: go through a capsule (which still
      // shares the memory).
      const viaCapsule = { ...options, copy: options.copy === true ? null : options.copy }
      return fromCapsule(source.__dlpack__({ stream: checked.stream, copy: options.copy ?? null }), checkOptions(viaCapsule), true)
    }
    if (options.copy === true) return Tensor._fromHandle(callNative(() => native.copyHandle(source._handle())), true, source.clamped)
    return source._share()
  }
  if (typeof source !== 'object' || source === null) {
    throw new DLPackTypeError('ERR_DLPACK_INVALID_ARGUMENT', `cannot import ${source === null ? 'null' : typeof source} through DLPack`)
  }
  const producer = source as Partial<CanDLPack & CanDLPackDevice>
  const exportFn = userCode(() => producer.__dlpack__, 'reading __dlpack__')
  if (typeof exportFn === 'function') {
    const deviceFn = userCode(() => producer.__dlpack_device__, 'reading __dlpack_device__')
    const device = typeof deviceFn === 'function' ? reportedDevice(userCode(() => deviceFn.call(producer), '__dlpack_device__()')) : undefined
    const request: DLPackOptions = { maxVersion: MAX_VERSION, copy: options.copy ?? null }
    if (checked.device !== undefined) request.dlDevice = checked.device.toDLPack()
    if (options.stream !== undefined) request.stream = options.stream
    const capsule = userCode(() => exportFn.call(producer, request), '__dlpack__()')
    // The native import checks the capsule type tag itself: whatever `__dlpack__` returned,
    // anything but a capsule is ERR_DLPACK_NOT_A_CAPSULE.
    const tensor = fromCapsule(capsule, checked, true)
    if (device !== undefined) {
      const actual = tensor.__dlpack_device__()
      if (!options.device && (actual[0] !== device[0] || actual[1] !== device[1])) {
        tensor.dispose()
        throw new BufferError('ERR_DLPACK_DEVICE', `__dlpack_device__ said ${String(device)} but the capsule is on ${String(actual)}`)
      }
    }
    return tensor
  }
  if (EXCHANGE_API_PROPERTY in source) {
    // A producer that lends only through an exchange table (another addon's tensor class,
    // docs/protocol.md §5): its owning export, in a capsule imported like any other.
    const capsule: unknown = callNative(() => native.exchangeCapsule(source))
    if (capsule !== undefined) return fromCapsule(capsule, checked, true)
  }
  let tensor: Tensor
  if (ArrayBuffer.isView(source) || source instanceof ArrayBuffer || isSharedArrayBuffer(source)) {
    checkDevice(checked, [DLDeviceType.CPU, 0])
    const dtype = ArrayBuffer.isView(source) ? (dtypeOfArray(source) ?? 'uint8') : 'uint8'
    // Zero-copy unless the memory cannot be kept (a resizable ArrayBuffer: see Tensor.from).
    tensor = refuseCopy(Tensor.from(source as ArrayBufferView, undefined, { dtype }), options)
  } else {
    const adapted = fromLibraryObject(source, options)
    if (adapted === undefined) {
      // Anything else must be a capsule; the native import checks its type tag, so capsules
      // (the hot path) cost one native call. An External that is no capsule stays
      // ERR_DLPACK_NOT_A_CAPSULE (an External can only be meant as one); any other value is
      // none of the inputs fromDLPack accepts.
      try {
        return fromCapsule(source, checked, false)
      } catch (error) {
        if (!(error instanceof CapsuleError) || error.code !== 'ERR_DLPACK_NOT_A_CAPSULE' || native.isExternal(source)) {
          throw error
        }
        throw new DLPackTypeError(
          'ERR_DLPACK_INVALID_ARGUMENT',
          'expected a Tensor, a DLPack capsule, an object with __dlpack__, an ArrayBuffer, a TypedArray, an ndarray-like object or a supported library tensor (docs/interop.md)',
        )
      }
    }
    tensor = adapted
    try {
      checkDevice(checked, [DLDeviceType.CPU, 0])
    } catch (error) {
      tensor.dispose()
      throw error
    }
  }
  if (options.copy === true) {
    const copy = Tensor._fromHandle(callNative(() => native.copyHandle(tensor._handle())), true, tensor.clamped)
    tensor.dispose()
    return copy
  }
  return tensor
}

/**
 * `fn()`, which runs code of the caller's object (a getter, `__dlpack__`): an exception with a
 * string `code` (napi-dlpack's own errors, a producer's coded ones) passes as it is; any other
 * becomes the `cause` of an `ERR_DLPACK_INVALID_ARGUMENT` error, so every failure has a code.
 */
function userCode<T>(fn: () => T, what: string): T {
  try {
    return fn()
  } catch (error) {
    const code = typeof error === 'object' && error !== null ? codeOf(error) : undefined
    if (typeof code === 'string') throw error
    throw new DLPackTypeError('ERR_DLPACK_INVALID_ARGUMENT', `${what} threw (the exception is this error's cause)`, { cause: error })
  }
}

/** `error.code`, or undefined where reading it throws. */
function codeOf(error: object): unknown {
  try {
    return (error as { code?: unknown }).code
  } catch {
    return undefined
  }
}

/**
 * The `[deviceType, deviceId]` a producer's `__dlpack_device__` returned, checked (a coded
 * error for anything else, not a TypeError from reading it).
 */
function reportedDevice(value: unknown): readonly [number, number] {
  if (Array.isArray(value)) {
    const [type, id] = [value[0] as unknown, value[1] as unknown]
    if (Number.isSafeInteger(type) && Number.isSafeInteger(id)) return [type as number, id as number]
  }
  throw new DLPackTypeError('ERR_DLPACK_INVALID_ARGUMENT', `__dlpack_device__ returned ${describe(value)}, not [deviceType, deviceId]`)
}

/**
 * `tensor`, unless `copy: false` was asked and it is a copy (memory that cannot be shared in
 * place: misaligned, or of a resizable ArrayBuffer): then it is released and
 * `ERR_DLPACK_COPY_REQUIRED` thrown, as for every other source.
 */
function refuseCopy(tensor: Tensor, options: AdaptOptions): Tensor {
  if (options.copy === false && tensor.isCopy) {
    tensor.dispose()
    throw new BufferError('ERR_DLPACK_COPY_REQUIRED', 'copy: false, but this memory cannot be shared in place (misaligned, or a resizable ArrayBuffer)')
  }
  return tensor
}

/** A tensor over an ndarray-like's data, with its strides and offset. */
function fromNDArray(source: NDArrayLike): Tensor {
  const natural = dtypeOfArray(source.data) ?? 'uint8'
  let dtype: DType = natural
  if (isDType(source.dtype) && source.dtype !== natural) {
    // A label is only trusted when it describes elements of the array's own size (e.g.
    // 'bool' over a Uint8Array); otherwise offsets and strides would address other bytes.
    const bytesPerElement = (source.data as { BYTES_PER_ELEMENT?: number }).BYTES_PER_ELEMENT ?? 1
    if (DTYPES[source.dtype].itemsize !== bytesPerElement) {
      throw new DLPackTypeError(
        'ERR_DLPACK_INVALID_ARGUMENT',
        `dtype '${source.dtype}' does not match the ${bytesPerElement}-byte elements of the data array`,
      )
    }
    dtype = source.dtype
  }
  // 0-d arrays: stdlib reports strides [0] for shape []; there is nothing to stride.
  const strides = source.shape.length === 0 ? undefined : (source.strides ?? source.stride)
  return createFromMemory(source.data, dtype, source.shape, strides, source.offset ?? 0)
}

/**
 * A CPU tensor over the memory of a library's array, tensor or image as it is: an ndarray-like,
 * or one of lib/interop/from-library.ts (ONNX Runtime / transformers.js, sharp, ImageData / RawImage, Arrow,
 * tfjs). `undefined` for an object that is none of them; a coded error for one that cannot be
 * imported as `options` ask. Shared by `fromDLPack` and the adapter typed arguments of native
 * addons call (lib/interop/native-adapter.ts), so both accept the same objects by the same rules.
 */
export function fromLibraryObject(source: object, options: AdaptOptions): Tensor | undefined {
  const tensor = userCode(() => libraryTensor(source, options), 'reading the library object')
  return tensor === undefined ? undefined : refuseCopy(tensor, options)
}

function libraryTensor(source: object, options: AdaptOptions): Tensor | undefined {
  // An ONNX Runtime / transformers.js tensor is never read as an ndarray-like: its `data` is a
  // getter that throws for GPU locations, and `adapt` checks the location before reading it.
  if (!isOrtTensorLike(source) && isNDArrayLike(source)) return fromNDArray(source)
  // Library tensors and images (lib/interop/from-library.ts) have a prototype; capsules (Externals) have
  // none in Node and Deno, so the capsule hot path pays one prototype read and a library
  // object no failed capsule import. (Bun gives Externals a bare prototype: there a capsule
  // is first read as a library object, which costs a few property misses.)
  return Object.getPrototypeOf(source) === null ? undefined : adapt(source, options)
}

/**
 * Whether `value` is a DLPack capsule (consumed or not, of any capsule ABI version): an External
 * with the capsule type tag and a non-NULL payload, as `napi_dlpack_capsule_check` decides.
 */
export function isCapsule(value: unknown): value is DLPackCapsule {
  return native.isCapsule(value)
}

/**
 * Whether a capsule has already been consumed. Throws `ERR_DLPACK_NOT_A_CAPSULE` for anything
 * else, and `ERR_DLPACK_CAPSULE_ABI` for a capsule of an unknown ABI version or kind (whose
 * tensor it does not read), as `napi_dlpack_capsule_is_consumed` does.
 */
export function isCapsuleConsumed(capsule: DLPackCapsule): boolean {
  return callNative(() => native.capsuleIsConsumed(capsule))
}

/** Whether zero-copy views of foreign memory are possible in this runtime (false in Electron). */
export function externalBuffersAllowed(): boolean {
  return native.externalBuffersAllowed()
}
