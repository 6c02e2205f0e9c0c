/**
 * The `Tensor` class and the types of its public face (`ClampedTensor`, `TensorViews`,
 * `ToOptions`). The class holds a tensor's state (its shared native handle, the cached layout
 * and `data` view, disposal) and states every method's contract; the work behind the methods
 * lives in the modules it imports, none of which imports the class: argument checks
 * (lib/checks.ts, lib/convert.ts), making handles (lib/create.ts), TypedArrays over the memory
 * (lib/data.ts), the export's options (lib/export.ts), the exchange slots
 * (lib/exchange-slots.ts), nested arrays (lib/to-array.ts), other libraries' shapes
 * (lib/interop/to-library.ts) and worker transfers (lib/transfer.ts).
 */
import { native } from './native.js'
import { Device, type DeviceLike, toDevice } from './device'
import {
  type AstypeOptions,
  astypeArgs,
  permuteAxes,
  transposeAxes,
  type ViewRequest,
  viewInt,
  viewShape,
} from './convert'
import { type ArrayDType, type DataArray, DLDeviceType, type DType, DTYPES } from './dtype'
import {
  type ArrowModule,
  type ArrowParts,
  arrowParts,
  type ImageDataArgs,
  type OrtOptions,
  type OrtTensorArgs,
  type SharpArgs,
  type TfTensorArgs,
  toArrow,
  toImageData,
  toOrt,
  toSharp,
  toTf,
} from './interop/to-library'
import { isClampedArray, isSharedArrayBuffer } from './buffers'
import { checkExpectedDType, checkFlag, checkOptions, streamValue } from './checks'
import { allocate, wrapArray, wrapMemory } from './create'
import { denseCopy, spanView, windowView } from './data'
import { clearSlots, exchangeHandle, fillSlots } from './exchange-slots'
import { exportCapsule } from './export'
import { readInfo, type TensorLayout } from './layout'
import type { DLPackCapsule, TensorHandle } from './opaque'
import type { CopyOptions, CreateOptions, DataOptions, DLPackOptions, FromArrayOptions, PeerViewOptions } from './options'
import { BufferError, DLPackTypeError, ReadOnlyError, TensorDisposedError, callNative as call, describe } from './errors'
import { toNestedArray } from './to-array'
import { checkTransfer, claimToken, makeTransfer, type TensorTransfer } from './transfer'

// `Tensor` has a `[Symbol.dispose]` method (for `using`). Its key is declared here for
// consumers whose TypeScript lib predates it (TS < 5.2, or `lib: ["es2022"]`), exactly as
// lib.esnext.disposable and @types/node declare it, so the declarations merge with theirs.
declare global {
  interface SymbolConstructor {
    readonly dispose: unique symbol
  }
}

/** Options of `Tensor#to`. */
export interface ToOptions {
  /** Copy even when the tensor is already on the requested device (default: share it). */
  copy?: boolean
  /**
   * Write into this existing tensor instead of new memory, and return it (`dst.copy_(this)`):
   * it must be on the requested device, of the same dtype and shape, contiguous and writable.
   * Repeated transfers then reuse memory whose pages are already in place.
   */
  out?: Tensor
  /** With `out`: the CUDA stream that orders the copy (see {@link CopyOptions.stream}). */
  stream?: bigint | number | null
}

/**
 * A uint8 tensor made from a `Uint8ClampedArray` (an `ImageData`, a canvas or RawImage's
 * pixels, or `Tensor.from(x, shape, { clamped: true })`): its `data` and `toTypedArray()` are
 * `Uint8ClampedArray`s, so writes clamp as they did in the source. Exports carry plain DLPack
 * uint8 (DLPack has no clamped type); `fromDLPack(tensor)` keeps the flag. At runtime it is a
 * `Tensor` (`instanceof` holds); its type is not assignable to `Tensor<'uint8'>`, whose views
 * are `Uint8Array`s.
 */
export type ClampedTensor = Omit<Tensor<'uint8'>, 'clamped' | 'data' | 'getData' | 'toTypedArray' | keyof TensorViews<unknown>> &
  TensorViews<ClampedTensor> & {
    readonly clamped: true
    readonly data: Uint8ClampedArray
    getData(options?: DataOptions): Uint8ClampedArray
    toTypedArray(): Uint8ClampedArray
  }

/**
 * The methods that give a tensor of the same kind: views (zero-copy, same memory, any device)
 * and `contiguous()`. `T` is `Tensor<D>` for a `Tensor<D>` and `ClampedTensor` for a clamped one
 * (views and dense copies of a clamped tensor are clamped too). See docs/views.md.
 */
export interface TensorViews<T> {
  permute(...axes: number[]): T
  permute(axes: readonly number[]): T
  transpose(dim0: number, dim1: number): T
  contiguous(): T
  reshape(...shape: number[]): T
  reshape(shape: readonly number[]): T
  view(...shape: number[]): T
  view(shape: readonly number[]): T
  unsqueeze(dim: number): T
  squeeze(dim?: number): T
  flatten(startDim?: number, endDim?: number): T
  slice(dim: number, start?: number | null, end?: number | null, step?: number): T
  narrow(dim: number, start: number, length: number): T
  select(dim: number, index: number): T
  expand(...shape: number[]): T
  expand(shape: readonly number[]): T
}

/** A native handle shared by every `Tensor` object that views the same data. */
interface SharedHandle {
  readonly handle: unknown
  refs: number
  /**
   * Whether the handle is a handle external, which native consumers borrow directly under
   * `EXCHANGE_API_PROPERTY` (false for an adopted capsule serving as the handle).
   */
  readonly lendable: boolean
  /** Layout and flags, read from native once per handle and shared by its tensors. */
  info?: TensorLayout
  /** The handle's id (`Tensor#id`) and id external (`Tensor#native`), made on first use. */
  id?: number
  idExternal?: TensorHandle
  /** JS views are `Uint8ClampedArray`s (uint8 only; see `ClampedTensor`). */
  readonly clamped: boolean
}

const internal = Symbol('napi-dlpack.internal')

/**
 * A tensor: shape, strides, dtype and device over memory that may be shared, without copies,
 * with native addons through DLPack. Create one with `Tensor.from`, `Tensor.empty`,
 * `Tensor.zeros` or `fromDLPack`.
 */
export class Tensor<D extends DType = DType> implements TensorViews<Tensor<D>> {
  #shared: SharedHandle | null
  #data: DataArray<D> | undefined
  #dataWritable = false
  #device: Device | undefined

  /** Use `Tensor.from`, `Tensor.empty`, `Tensor.zeros` or `fromDLPack`. */
  private constructor(token: symbol, shared: SharedHandle) {
    if (token !== internal) {
      throw new DLPackTypeError(
        'ERR_DLPACK_INVALID_ARGUMENT',
        'use Tensor.from, Tensor.empty, Tensor.zeros or fromDLPack to create tensors',
      )
    }
    this.#shared = shared
    fillSlots(this, shared.handle, shared.lendable)
  }

  /**
   * @internal The handle the exchange table reads under `exchangeHandle` (src/exchange.rs
   * `tensor_handle`). A getter on the prototype, not an own slot per tensor: an own
   * non-enumerable slot took an `Object.defineProperty` per tensor, about 2,400 instructions of
   * V8's runtime (a plain store is about 25, but enumerable: spreads would copy it). A getter is
   * no own property (nothing to copy) and has no setter (nothing to overwrite); it reads the live
   * handle, so it is undefined once the tensor is disposed, and for any other receiver (an
   * object merely inheriting the prototype) it answers undefined instead of throwing.
   */
  get [exchangeHandle](): unknown {
    return #shared in this ? this.#shared?.handle : undefined
  }

  /**
   * @internal A new tensor over a fresh native handle; `lendable` is false for a capsule that
   * the addon adopted as the handle (`importCapsule` returned the capsule itself); `clamped`:
   * see `ClampedTensor`.
   */
  static _fromHandle(handle: unknown, lendable = true, clamped = false): Tensor {
    return new Tensor(internal, { handle, refs: 1, lendable, clamped })
  }

  /** @internal A new tensor object sharing this tensor's native handle (no capsule). */
  _share(): Tensor<D> {
    const shared = this.#live()
    shared.refs += 1
    return new Tensor<D>(internal, shared)
  }

  /**
   * The cheapest value to pass to a native function taking a tensor (a `TensorArg` or hot
   * function of an addon built on the Rust crate, or a C consumer of the exchange table's
   * "borrow by handle id", docs/protocol.md §5.6): an opaque `napi_external` carrying this
   * tensor's handle id, which the addon borrows with one read and a table lookup (no type tag,
   * no property, no validation: see docs/benchmarks.md). Worth it in hot loops of small native
   * calls: `addon.add(a.native, b.native, out.native)`. JS cannot make one, so, unlike
   * {@link Tensor.id}, it cannot be forged. Tensors sharing a handle (`fromDLPack(t)`) share it.
   * It does not keep the tensor alive: once the tensor is disposed or collected, a native
   * function given it throws `ERR_TENSOR_STALE_ID`, and so does another JS thread. Only native
   * code can use it; JS functions of this package take the tensor.
   */
  get native(): TensorHandle {
    const shared = this.#live()
    return (shared.idExternal ??= call(() => native.handleId(shared.handle, true)) as TensorHandle)
  }

  /**
   * This tensor's handle id: an exact integer below 2^53 that native functions taking a tensor
   * accept in its place, as they accept {@link Tensor.native} (the same id as a number: handy
   * in an `Int32Array`-free argument list, a `Map`, or across an API that takes numbers).
   * Refused (`ERR_TENSOR_STALE_ID`) once the tensor is disposed or collected, and on another JS
   * thread. Any JS code of the realm can write any number, so a number can name a tensor the
   * caller never saw (a guessed id of a live tensor of this thread): pass `native` where the
   * code calling the addon is not trusted with every tensor of its thread.
   */
  get id(): number {
    const shared = this.#live()
    return (shared.id ??= call(() => native.handleId(shared.handle, false)) as number)
  }

  /** @internal The native handle, for the protocol functions. */
  _handle(): unknown {
    return this.#live().handle
  }

  #live(): SharedHandle {
    const shared = this.#shared
    if (shared === null) {
      throw new TensorDisposedError('ERR_TENSOR_DISPOSED', 'the tensor has been disposed')
    }
    return shared
  }

  #meta(): TensorLayout {
    const shared = this.#live()
    return (shared.info ??= readInfo(shared.handle))
  }

  /**
   * Zero-copy view of `array` (any TypedArray, DataView or Buffer), keeping its memory alive.
   * Memory not aligned to the elements' size (e.g. `uint16` over a Buffer at an odd byte
   * offset) cannot be viewed by a TypedArray or handed to typed consumers: the tensor is then a
   * copy of it, `isCopy === true` (later writes to `array` are not seen), as for foreign memory.
   * So is memory of a resizable `ArrayBuffer` (`resizable === true`): `resize()` can take it
   * away under any pointer kept into it, and nothing can pin its length (a growable
   * `SharedArrayBuffer` cannot shrink, and is shared zero-copy).
   */
  static from(
    array: Uint8ClampedArray,
    shape?: readonly number[],
    options?: Omit<FromArrayOptions, 'dtype' | 'clamped'> & { dtype?: 'uint8'; clamped?: true },
  ): ClampedTensor
  static from<D extends DType>(
    array: ArrayBufferView | ArrayBuffer | SharedArrayBuffer,
    shape: readonly number[] | undefined,
    options: FromArrayOptions<D> & { dtype: D },
  ): Tensor<D>
  static from<A extends ArrayBufferView>(
    array: A,
    shape?: readonly number[],
    options?: Omit<FromArrayOptions, 'dtype'>,
  ): Tensor<ArrayDType<A>>
  static from(
    array: ArrayBuffer | SharedArrayBuffer,
    shape?: readonly number[],
    options?: Omit<FromArrayOptions, 'dtype'>,
  ): Tensor<'uint8'>
  static from(
    array: ArrayBufferView | ArrayBuffer | SharedArrayBuffer,
    shape?: readonly number[],
    options: FromArrayOptions = {},
  ): Tensor | ClampedTensor {
    const { handle, clamped } = wrapArray(array, shape, options)
    return Tensor._fromHandle(handle, true, clamped)
  }

  /**
   * A new tensor. On the CPU (default) it lives in V8 memory (zero-filled, since ArrayBuffers
   * are) and is zero-copy to export everywhere, Electron included. With `{ device: 'cuda:N' }`
   * it is device memory with undefined contents (use `zeros` for zeros). With
   * `{ device: 'cuda_host' }` it is pinned (page-locked) host memory from the CUDA driver, with
   * undefined contents: readable and writable from JS like CPU memory, exported as `kDLCUDAHost`,
   * and copied to and from CUDA devices by DMA (see docs/cuda.md, "Pinned host tensors").
   */
  static empty<D extends DType = 'float32'>(
    shape: readonly number[],
    dtype: D = 'float32' as D,
    options: CreateOptions = {},
  ): Tensor<D> {
    return Tensor._fromHandle(allocate(shape, dtype, options, false)) as Tensor<D>
  }

  /** A new zero-filled tensor (on a CUDA device with `{ device: 'cuda:N' }`, in pinned host memory with `{ device: 'cuda_host' }`). */
  static zeros<D extends DType = 'float32'>(
    shape: readonly number[],
    dtype: D = 'float32' as D,
    options: CreateOptions = {},
  ): Tensor<D> {
    return Tensor._fromHandle(allocate(shape, dtype, options, true)) as Tensor<D>
  }

  /**
   * This tensor on `device` (`'cpu'`, `'cuda:0'`, `'cuda_host'`, ...), as a new Tensor: host →
   * device, device → host and device → device copies (`'cuda_host'`, pinned host memory, counts
   * as host memory: see `pin()`). Already there: a new Tensor sharing the same memory, or a copy
   * with `{ copy: true }`. CUDA copies are enqueued on the device's legacy default stream; a copy
   * to the host waits for it, and so does an upload from memory that is not V8's (pinned
   * memory is read by DMA after the call), so the source may change once `to()` returns.
   */
  to(device: DeviceLike, options: ToOptions = {}): Tensor<D> {
    const handle = this.#live().handle
    const target = toDevice(device)
    const checked = checkOptions(options, 'to')
    const copy = checkFlag(checked.copy, 'copy')
    if (checked.out !== undefined) {
      const out = checked.out
      if (!(out instanceof Tensor)) {
        throw new DLPackTypeError('ERR_DLPACK_INVALID_ARGUMENT', `to(): out must be a Tensor, got ${describe(out)}`)
      }
      if (!out.device.equals(target)) {
        throw new BufferError('ERR_DLPACK_DEVICE', `to(${String(target)}): out is on ${String(out.device)}`)
      }
      return out.copy_(this, { stream: checked.stream }) as Tensor<D>
    }
    if (target.equals(this.device) && !copy) return this._share()
    return Tensor._fromHandle(call(() => native.toDevice(handle, target.type, target.id))) as Tensor<D>
  }

  /**
   * This tensor in pinned (page-locked) host memory: `to('cuda_host')`, PyTorch's
   * `pin_memory()`. Already pinned (`cuda_host`): a new Tensor sharing the memory. Otherwise a
   * row-major copy (from a CUDA tensor: its span, strides kept, as for `to('cpu')`), which then
   * uploads to and downloads from CUDA devices by DMA, without a staging copy. Throws
   * `ERR_CUDA_UNAVAILABLE` without a CUDA driver.
   */
  pin(): Tensor<D> {
    return this.to(Device.CUDA_HOST)
  }

  /**
   * Copies the elements of `src` into this tensor, in place, and returns this tensor: same
   * dtype (`ERR_DLPACK_DTYPE_MISMATCH`) and shape (`ERR_DLPACK_SHAPE`); this tensor contiguous
   * (`ERR_DLPACK_NOT_CONTIGUOUS`) and writable (`ERR_DLPACK_READ_ONLY`); the two not
   * overlapping (`ERR_DLPACK_INVALID_ARGUMENT`); host ↔ CUDA, CUDA ↔ CUDA or host ↔ host
   * (`ERR_DLPACK_DEVICE` otherwise). `src` may be strided. A copy into host memory has completed
   * when this returns; a copy into device memory is enqueued on the device's stream (or after
   * `options.stream`'s work, and before its later work).
   */
  copy_(src: Tensor, options: CopyOptions = {}): this {
    const handle = this.#live().handle
    if (!(src instanceof Tensor)) {
      throw new DLPackTypeError('ERR_DLPACK_INVALID_ARGUMENT', `copy_(): the source must be a Tensor, got ${describe(src)}`)
    }
    const stream = streamValue(checkOptions(options, 'copy_').stream)
    const source = src._handle()
    call(() => native.copyBetween(handle, source, stream))
    return this
  }

  /**
   * A view with dimension `i` being dimension `axes[i]` of this tensor (`permute(2, 0, 1)`
   * turns HWC into CHW): zero-copy on any device, same memory and data pointer, only shape and
   * strides change. `axes` name every dimension once; negative axes count from the end.
   * `ERR_DLPACK_INVALID_ARGUMENT` otherwise. The view is a new Tensor: dispose it and this one
   * independently.
   */
  permute(...axes: number[]): Tensor<D>
  permute(axes: readonly number[]): Tensor<D>
  permute(...args: (number | readonly number[])[]): Tensor<D> {
    const handle = this.#live().handle
    const axes = permuteAxes(args)
    return Tensor._fromHandle(call(() => native.permuteHandle(handle, axes)), true, this.clamped) as Tensor<D>
  }

  /** A zero-copy view with dimensions `dim0` and `dim1` swapped (see `permute`). */
  transpose(dim0: number, dim1: number): Tensor<D> {
    return this.permute(transposeAxes(this.ndim, dim0, dim1))
  }

  /** A view made natively (`viewHandle`): same storage, new layout, clamped if this is. */
  #view(request: ViewRequest): Tensor<D> {
    const handle = this.#live().handle
    return Tensor._fromHandle(call(() => native.viewHandle(handle, request)), true, this.clamped) as Tensor<D>
  }

  /**
   * The same elements, in row-major order, under a new shape (one size may be `-1`, inferred
   * from the others): a zero-copy view, same memory and data pointer, on any device. Never a
   * copy: where the strides cannot express the new shape (merging dimensions of a permuted or
   * sliced tensor), it throws `ERR_DLPACK_NOT_CONTIGUOUS`; `contiguous().reshape(...)` is then
   * the one copy. A size mismatch, two `-1`s or a non-integer throw
   * `ERR_DLPACK_INVALID_ARGUMENT`. See docs/views.md.
   */
  reshape(...shape: number[]): Tensor<D>
  reshape(shape: readonly number[]): Tensor<D>
  reshape(...args: (number | readonly number[])[]): Tensor<D> {
    return this.#view({ op: 'reshape', shape: viewShape('reshape', args) })
  }

  /** `reshape` under PyTorch's other name: the same zero-copy view, the same errors. */
  view(...shape: number[]): Tensor<D>
  view(shape: readonly number[]): Tensor<D>
  view(...args: (number | readonly number[])[]): Tensor<D> {
    return this.#view({ op: 'reshape', shape: viewShape('view', args) })
  }

  /** A zero-copy view with a new dimension of size 1 at `dim` (`-1`: last; `0 ≤ dim ≤ ndim` after wrapping). */
  unsqueeze(dim: number): Tensor<D> {
    return this.#view({ op: 'unsqueeze', dim: viewInt(dim, 'unsqueeze dimension') })
  }

  /**
   * A zero-copy view without the size-1 dimension `dim`, or without every size-1 dimension when
   * `dim` is omitted. `dim` of another size throws `ERR_DLPACK_INVALID_ARGUMENT` (PyTorch
   * ignores it; here a wrong index is not silent).
   */
  squeeze(dim?: number): Tensor<D> {
    return this.#view({ op: 'squeeze', dim: viewInt(dim, 'squeeze dimension', true) })
  }

  /**
   * Dimensions `startDim..endDim` (inclusive, negative from the end) merged into one, as a
   * zero-copy view; `ERR_DLPACK_NOT_CONTIGUOUS` where they are not one contiguous run (see
   * `reshape`). A 0-d tensor becomes `[1]`.
   */
  flatten(startDim = 0, endDim = -1): Tensor<D> {
    return this.#view({
      op: 'flatten',
      start: viewInt(startDim, 'flatten start dimension'),
      end: viewInt(endDim, 'flatten end dimension'),
    })
  }

  /**
   * Elements `start, start + step, ...` before `end` along `dim`, as a zero-copy view (a Python
   * slice `t[start:end:step]` along one dimension): bounds are optional (`undefined` or `null`:
   * the whole dimension in the step's direction), negative bounds count from the end, bounds
   * past the ends are clamped; `step` is any non-zero integer (negative: reversed, through a
   * negative stride). `ERR_DLPACK_INVALID_ARGUMENT` for a bad `dim`, step 0 or a non-integer.
   */
  slice(dim: number, start?: number | null, end?: number | null, step = 1): Tensor<D> {
    return this.#view({
      op: 'slice',
      dim: viewInt(dim, 'slice dimension'),
      start: viewInt(start, 'slice start', true),
      end: viewInt(end, 'slice end', true),
      step: viewInt(step, 'slice step'),
    })
  }

  /**
   * Elements `start..start + length` along `dim` as a zero-copy view (`start` may be negative,
   * from the end). Unlike `slice`, out-of-range arguments throw `ERR_DLPACK_INVALID_ARGUMENT`.
   */
  narrow(dim: number, start: number, length: number): Tensor<D> {
    return this.#view({
      op: 'narrow',
      dim: viewInt(dim, 'narrow dimension'),
      start: viewInt(start, 'narrow start'),
      length: viewInt(length, 'narrow length'),
    })
  }

  /**
   * Index `index` of dimension `dim`, without that dimension, as a zero-copy view (`t[i]` is
   * `t.select(0, i)`; negative indices count from the end; out of range throws
   * `ERR_DLPACK_INVALID_ARGUMENT`).
   */
  select(dim: number, index: number): Tensor<D> {
    return this.#view({ op: 'select', dim: viewInt(dim, 'select dimension'), start: viewInt(index, 'select index') })
  }

  /**
   * Size-1 dimensions repeated to `shape` (new leading dimensions too; `-1` keeps a size)
   * through stride 0, as a zero-copy view: no element is copied. A dimension of another size
   * than 1 cannot change (`ERR_DLPACK_INVALID_ARGUMENT`). A view that repeats elements is
   * read-only (`readonly`, exported with DLPack's READ_ONLY flag): writing through it would
   * write one element from several indices. `contiguous()` gives a writable dense copy.
   */
  expand(...shape: number[]): Tensor<D>
  expand(shape: readonly number[]): Tensor<D>
  expand(...args: (number | readonly number[])[]): Tensor<D> {
    return this.#view({ op: 'expand', shape: viewShape('expand', args) })
  }

  /**
   * This tensor in row-major order. Already contiguous: a new Tensor over the same memory (no
   * copy, same data pointer, same read-only flag). Otherwise: a dense copy in V8 memory
   * (zero-copy to export in every runtime, Electron included), writable. Host tensors only for
   * the copy (`ERR_DLPACK_NOT_CPU`: call `.to('cpu')` first).
   */
  contiguous(): Tensor<D> {
    const handle = this.#live().handle
    if (this.isContiguous) return this._share()
    return Tensor._fromHandle(call(() => native.contiguousHandle(handle)), true, this.clamped) as Tensor<D>
  }

  /**
   * The elements converted to `dtype`, in a new dense row-major CPU tensor of the same shape
   * (always a new tensor, even for the same dtype), or written into `options.out` (returned).
   * Runs natively on host tensors (`ERR_DLPACK_NOT_CPU` for device memory) of bool, integer and
   * real float dtypes (others: `ERR_DLPACK_INVALID_ARGUMENT`).
   *
   * The result is the plain JS loop's, bit for bit:
   * - integer (or bool) to integer (or bool) with no options: the exact value, saturated to the
   *   target's range (`int16` -3 → `uint8` 0, 300 → 255); bool targets get `value !== 0`;
   * - otherwise each value as a JS number (float64; 64-bit integers past 2^53 round), then the
   *   options given, in the order `* scale`, `+ offset`, `- mean`, `/ std` (each one float64
   *   operation), then stored: float targets round to nearest, ties to even (as a
   *   `Float32Array` store does); integer targets map NaN to 0, round to nearest with ties to
   *   even and saturate (as a `Uint8ClampedArray` store does); bool targets get `v !== 0`.
   *
   * HWC uint8 image to normalised CHW float32:
   * `img.permute(2, 0, 1).astype('float32', { scale: 1 / 255, mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225], axis: 0 })`.
   */
  astype<T extends DType>(dtype: T, options: AstypeOptions<Tensor<T>> = {}): Tensor<T> {
    const handle = this.#live().handle
    const { args } = astypeArgs(dtype, options)
    const out = options.out
    if (out !== undefined && !(out instanceof Tensor)) {
      throw new DLPackTypeError('ERR_DLPACK_INVALID_ARGUMENT', 'out must be a Tensor')
    }
    args.out = out?._handle()
    const result = call(() => native.astypeHandle(handle, dtype, args))
    return out ?? (Tensor._fromHandle(result) as Tensor<T>)
  }

  /** Dimensions. */
  get shape(): readonly number[] {
    return this.#meta().shape
  }

  /** Strides in elements (never null, even for producers that sent NULL). */
  get strides(): readonly number[] {
    return this.#meta().strides
  }

  get dtype(): D {
    return this.#meta().dtype as D
  }

  get device(): Device {
    this.#live()
    if (this.#device === undefined) {
      const meta = this.#meta()
      this.#device = toDevice([meta.deviceType, meta.deviceId])
    }
    return this.#device
  }

  /** DLPack `byte_offset` an export of this tensor carries. */
  get byteOffset(): number {
    return this.#meta().byteOffset
  }

  get ndim(): number {
    return this.shape.length
  }

  get numel(): number {
    return this.#meta().numel
  }

  /** Bytes of the elements (`numel × itemsize`). */
  get nbytes(): number {
    return this.numel * DTYPES[this.dtype].itemsize
  }

  /** Row-major contiguous (size-1 dimensions ignored). */
  get isContiguous(): boolean {
    return this.#meta().contiguous
  }

  /** The producer marked the memory read-only. */
  get readonly(): boolean {
    return this.#meta().readonly
  }

  /** This tensor's memory is a copy (made by the producer, or by us where zero-copy was impossible). */
  get isCopy(): boolean {
    return this.#meta().isCopy
  }

  /** Index of the first element within `data` (in elements; non-zero with negative strides). */
  get offset(): number {
    return this.#meta().viewOffset
  }

  /**
   * Whether this tensor's dtype is `dtype`, as a type guard: inside `if (t.is('float32'))`, `t`
   * is a `Tensor<'float32'>` and `t.data` a `Float32Array`. For a checked conversion that throws
   * instead, `fromDLPack(t, { dtype: 'float32' })`.
   */
  is<T extends DType>(dtype: T): this is Tensor<T> {
    return this.#meta().dtype === dtype
  }

  /** Whether JS views of this uint8 tensor are `Uint8ClampedArray`s (see `ClampedTensor`). */
  get clamped(): boolean {
    return this.#live().clamped
  }

  /** Whether the tensor has been disposed. */
  get disposed(): boolean {
    return this.#shared === null
  }

  /** Address of the first element (diagnostics, and zero-copy checks). */
  get dataPointer(): bigint {
    return call(() => native.dataPointer(this.#live().handle))
  }

  /**
   * Zero-copy TypedArray over the tensor's memory, created on first access and cached. It spans
   * from the lowest- to the highest-addressed element; index it with `offset` and `strides`
   * (both equal `0` and row-major for contiguous tensors). Throws `ReadOnlyError` for read-only
   * tensors: use `getData({ allowReadOnly: true })` or `toTypedArray()`. Throws `BufferError`
   * `ERR_DLPACK_TOO_LARGE` when the span is larger than the runtime's largest ArrayBuffer
   * (`buffer.constants.MAX_LENGTH`): read such tensors in windows with
   * `getData({ offset, length })`.
   */
  get data(): DataArray<D> {
    const data = this.#data
    // An empty cached view may be one whose buffer was detached since: `getData` checks.
    if (data !== undefined && this.#dataWritable && this.#shared !== null && data.byteLength !== 0) return data
    return this.getData()
  }

  /**
   * Like `data`; `allowReadOnly` returns the zero-copy view of a read-only tensor too (do not
   * write to it). With `offset` and/or `length` (in elements of the span `data` covers), a new
   * view of that window only: `getData({ offset: i, length: n })` is
   * `data.subarray(i, i + n)` where `data` works, and still works past the runtime's ArrayBuffer
   * limit, where each window is its own zero-copy view (it keeps the memory alive until it is
   * collected; `dispose()` cannot empty it). Where external buffers are refused (Electron),
   * windows of such tensors are copies.
   */
  getData(optionsArg: DataOptions = {}): DataArray<D> {
    const options = checkOptions(optionsArg, 'getData')
    const meta = this.#meta()
    if (meta.readonly && options.allowReadOnly !== true) {
      throw new ReadOnlyError(
        'ERR_DLPACK_READ_ONLY',
        'the tensor is read-only: use getData({ allowReadOnly: true }) for a view you will not write to, or toTypedArray() for a copy',
      )
    }
    if (options.offset !== undefined || options.length !== undefined) {
      const shared = this.#live()
      return windowView(shared.handle, meta, shared.clamped, options) as DataArray<D>
    }
    if (this.#data !== undefined && this.#data.byteLength === 0 && meta.viewLength !== 0) {
      // The buffer was detached (transferred away) after the view was cached: the native view
      // below reports it (ERR_TENSOR_DETACHED) instead of serving the emptied view.
      this.#data = undefined
    }
    if (this.#data === undefined) {
      const shared = this.#live()
      this.#data = spanView(shared.handle, meta, shared.clamped) as DataArray<D>
      this.#dataWritable = !meta.readonly
    }
    return this.#data
  }

  /**
   * A row-major copy of the elements (complex: interleaved real, imaginary). Host tensors only;
   * `ERR_DLPACK_TOO_LARGE` past the runtime's largest ArrayBuffer.
   */
  toTypedArray(): DataArray<D> {
    const shared = this.#live()
    return denseCopy(shared.handle, this.#meta(), shared.clamped) as DataArray<D>
  }

  /**
   * The arguments of ONNX Runtime's (and transformers.js's) Tensor constructor:
   * `new ort.Tensor(...t.toOrt())`. `data` is this tensor's memory when it is dense row-major,
   * else a dense copy (ORT has no strides); `bool` keeps its label. Read-only tensors need
   * `{ allowReadOnly: true }` (ORT must then not write to it). For a preallocated output
   * (`fetches`), pass `{ output: true }`: a tensor ORT cannot write in place (not dense, or
   * read-only) is then refused with a code instead of handing ORT a copy whose results are lost.
   */
  toOrt(options?: OrtOptions): OrtTensorArgs<D> {
    return toOrt(this, options)
  }

  /**
   * A uint8 `[height, width, channels]` (or `[height, width]`) tensor as RGBA pixels for
   * `new ImageData(data, width, height)` (or `new RawImage(data, width, height, channels)`):
   * 4 channels give a `Uint8ClampedArray` over this tensor's memory (a dense copy if it is not
   * dense row-major); 3 (RGB), 2 (grey + alpha) and 1 (grey) are widened into a new RGBA array,
   * opaque where there was no alpha. `channels` is always 4. Other shapes:
   * `ERR_DLPACK_INVALID_ARGUMENT`; other dtypes: `ERR_DLPACK_UNSUPPORTED_DTYPE`.
   */
  toImageData(options?: PeerViewOptions): ImageDataArgs {
    return toImageData(this, options)
  }

  /**
   * The arguments of TensorFlow.js's `tf.tensor(values, shape, dtype)`: `tf.tensor(...t.toTf())`.
   * The values are dense row-major in every case (a strided view is copied: `tf.tensor(t.data,
   * t.shape)` would read the wrong elements of one); float32, int32 and bool keep this tensor's
   * memory when it is dense (tfjs keeps the array: do not write to the tensor while tfjs uses
   * it); int8, uint8, int16 and uint16 are widened to int32 exactly. Other dtypes, which tfjs
   * cannot hold exactly, throw `ERR_DLPACK_UNSUPPORTED_DTYPE` (convert with `astype` first).
   */
  toTf(options?: PeerViewOptions): TfTensorArgs {
    return toTf(this, options)
  }

  /**
   * The arguments of `sharp(pixels, { raw: { width, height, channels } })` for a
   * `[height, width, channels]` (1 to 4 channels) or `[height, width]` tensor: `sharp(...t.toSharp())`.
   * The pixels are this tensor's memory when it is dense row-major, else a dense copy (a
   * `permute`d or sliced view comes out right); their TypedArray type tells sharp the depth
   * (uint8, int8, uint16, int16, uint32, int32, float32, float64; others:
   * `ERR_DLPACK_UNSUPPORTED_DTYPE`).
   */
  toSharp(options?: PeerViewOptions): SharpArgs {
    return toSharp(this, options)
  }

  /**
   * An apache-arrow Vector over this tensor (`arrow`: the apache-arrow module): rows are the
   * first dimension, further dimensions nested FixedSizeLists. Zero-copy when dense row-major.
   */
  toArrow(arrow: ArrowModule, options?: PeerViewOptions): unknown {
    return toArrow(this, arrow, options)
  }

  /** The parts `toArrow` assembles (leaf type name, dense values, rows, list sizes). */
  arrowParts(options?: PeerViewOptions): ArrowParts {
    return arrowParts(this, options)
  }

  /** Nested arrays of the elements (bool as booleans, 64-bit integers as bigints, complex as [re, im]). */
  toArray(): unknown[] | unknown {
    return toNestedArray(this)
  }

  /**
   * Exports the tensor as a consume-once DLPack capsule. Each call gives a new capsule that
   * keeps the memory alive by itself until its consumer calls the deleter.
   */
  __dlpack__(options: DLPackOptions = {}): DLPackCapsule {
    const handle = this.#live().handle
    return exportCapsule(handle, options)
  }

  /**
   * A plain object to `postMessage` to another thread (a `worker_threads` Worker), where
   * `Tensor.fromTransfer()` rebuilds this tensor over the same memory: no copy. A tensor over a
   * `SharedArrayBuffer` travels with its buffer; memory no JS thread owns (a native producer's,
   * CUDA) travels as a token that one thread claims, once. This tensor stays usable; the memory
   * is released when the last tensor on any thread lets go. A tensor over an `ArrayBuffer`
   * throws `ERR_DLPACK_COPY_REQUIRED`: use `toShared()`. See docs/guide.md, "Worker threads".
   */
  transfer(): TensorTransfer<D> {
    const shared = this.#live()
    const meta = this.#meta()
    return makeTransfer({
      handle: shared.handle,
      dtype: meta.dtype,
      shape: meta.shape,
      strides: meta.strides,
      viewOffset: meta.viewOffset,
      viewLength: meta.viewLength,
      readonly: meta.readonly,
      device: [meta.deviceType, meta.deviceId],
      view: () => this.getData({ allowReadOnly: true }),
    }) as TensorTransfer<D>
  }

  /**
   * This tensor over a `SharedArrayBuffer`, ready for `transfer()`: a new tensor sharing the
   * memory when it is already shared, else a row-major copy into a new `SharedArrayBuffer` (the
   * one copy; later writes to either are not seen by the other). Host tensors only.
   */
  toShared(): Tensor<D> {
    const meta = this.#meta()
    // Only CPU tensors can be over a SharedArrayBuffer: other host memory (pinned, a
    // producer's) is never V8's, and may have no JS view at all (pinned memory in Electron).
    if (meta.deviceType === DLDeviceType.CPU && isSharedArrayBuffer(this.getData({ allowReadOnly: true }).buffer)) return this._share()
    const copy = Tensor.empty(meta.shape, meta.dtype as D, { shared: true })
    const target = copy.getData()
    call(() => native.copyHandleInto(this.#live().handle, new Uint8Array(target.buffer, target.byteOffset, target.byteLength)))
    return copy
  }

  /**
   * Rebuilds a tensor that another thread (or this one) sent with `transfer()`. Zero-copy: the
   * same memory, at the same address. A token is claimed once: a second claim, a released token,
   * or one whose sending thread ended first throws `ERR_DLPACK_TRANSFER_CLAIMED`.
   */
  static fromTransfer<D extends DType>(transfer: TensorTransfer<D>): Tensor<D>
  /**
   * A message as it arrives (`unknown`), checked to be a transfer of `options.dtype`: a
   * `Tensor<D>`, or `ERR_DLPACK_DTYPE_MISMATCH` before anything is claimed (the token stays
   * claimable).
   */
  static fromTransfer<D extends DType>(transfer: unknown, options: { dtype: D }): Tensor<D>
  static fromTransfer(transfer: unknown, options?: { dtype?: DType }): Tensor {
    const checked = checkTransfer(transfer)
    if (options?.dtype !== undefined) checkExpectedDType(checked.dtype, options.dtype, 'the transfer')
    if (checked.kind === 'token') return Tensor._fromHandle(claimToken(checked))
    const bytes = new Uint8Array(checked.buffer, checked.byteOffset, checked.byteLength)
    return Tensor._fromHandle(wrapMemory(bytes, checked.dtype, checked.shape, checked.strides, checked.offset, checked.readonly))
  }

  /** `[deviceType, deviceId]`, without exporting anything. */
  __dlpack_device__(): [DLDeviceType, number] {
    return this.device.toDLPack()
  }

  /**
   * Releases this tensor's hold on its memory now. Tensors sharing the same data through
   * `fromDLPack` keep it; exported capsules keep it until consumed and deleted. Zero-copy views
   * of foreign memory become empty. Later use of this tensor throws `TensorDisposedError`.
   */
  dispose(): void {
    const shared = this.#shared
    if (shared === null) return
    this.#shared = null
    this.#data = undefined
    clearSlots(this, shared.lendable)
    shared.refs -= 1
    if (shared.refs === 0) call(() => native.releaseHandle(shared.handle))
  }

  [Symbol.dispose](): void {
    this.dispose()
  }

  toString(): string {
    if (this.#shared === null) return 'Tensor(disposed)'
    return `Tensor(shape=[${this.shape.join(', ')}], dtype=${this.dtype}, device=${String(this.device)})`
  }

  [Symbol.for('nodejs.util.inspect.custom')](): string {
    return this.toString()
  }
}

/** @internal */
export function createFromMemory(
  memory: ArrayBuffer | SharedArrayBuffer | ArrayBufferView,
  dtype: DType,
  shape: readonly number[],
  strides: readonly number[] | undefined,
  offset: number,
  readonly = false,
): Tensor {
  // A Uint8ClampedArray keeps clamping through the tensor (see `ClampedTensor`).
  const clamped = dtype === 'uint8' && isClampedArray(memory)
  return Tensor._fromHandle(wrapMemory(memory, dtype, shape, strides, offset, readonly), true, clamped)
}
