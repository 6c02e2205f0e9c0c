/**
 * The other direction of lib/interop/from-library.ts: a Tensor handed to JS libraries in the
 * shapes they take, importing nothing from them. Zero-copy where the tensor is dense row-major
 * (the only layout ORT, ImageData and Arrow know); a dense copy otherwise, never silently a view
 * of other elements.
 */
import type { Device } from '../device'
import { DLDeviceType, type DataArray, type DType } from '../dtype'
import { BufferError, DLPackTypeError, ReadOnlyError } from '../errors'
import type { DataOptions, PeerViewOptions } from '../options'

export type { PeerViewOptions }

/**
 * What the conversions read of a tensor. `Tensor` has all of it and passes itself; typing it
 * structurally here keeps this module free of lib/tensor.ts, which imports it (no import cycle).
 */
export interface TensorFacts<D extends DType = DType> {
  readonly dtype: D
  readonly device: Device
  readonly shape: readonly number[]
  readonly ndim: number
  readonly isContiguous: boolean
  readonly offset: number
  readonly readonly: boolean
  getData(options?: DataOptions): DataArray<D>
  toTypedArray(): DataArray<D>
  astype(dtype: 'int32'): { readonly data: DataArray<'int32'> }
}

/** The element types onnxruntime-common's `Tensor` has a TypedArray for. */
export type OrtType = 'bool' | 'int8' | 'int16' | 'int32' | 'int64' | 'uint8' | 'uint16' | 'uint32' | 'uint64' | 'float16' | 'float32' | 'float64'

const ORT_TYPES: ReadonlySet<DType> = new Set<OrtType>([
  'bool',
  'int8',
  'int16',
  'int32',
  'int64',
  'uint8',
  'uint16',
  'uint32',
  'uint64',
  'float16',
  'float32',
  'float64',
])

/** `new ort.Tensor(...args)`: type, data, dims. */
export type OrtTensorArgs<D extends DType = DType> = [type: D & OrtType, data: DataArray<D>, dims: number[]]

/** Options of `toOrt`. */
export interface OrtOptions extends PeerViewOptions {
  /**
   * The tensor is a preallocated output ORT writes into (`session.run(feeds, fetches)`): it must
   * be dense row-major (`ERR_DLPACK_NOT_CONTIGUOUS` otherwise: ORT would write into a copy, and
   * the results would never reach the tensor) and writable (`ERR_DLPACK_READ_ONLY`).
   */
  output?: boolean
}

/**
 * What `toImageData` returns: RGBA pixels for `new ImageData(data, width, height)` (and
 * `new RawImage(data, width, height, channels)`); `channels` is always 4.
 */
export interface ImageDataArgs {
  data: Uint8ClampedArray
  width: number
  height: number
  channels: 4
}

/** The dtypes tfjs tensors have for numbers. */
export type TfDType = 'float32' | 'int32' | 'bool'

/** `tf.tensor(...args)`: values (dense row-major), shape, dtype. */
export type TfTensorArgs = [values: Float32Array | Int32Array | Uint8Array, shape: number[], dtype: TfDType]

/** The TypedArrays sharp takes as raw pixels (their type is the pixel depth). */
export type SharpPixels = Uint8Array | Uint8ClampedArray | Int8Array | Uint16Array | Int16Array | Uint32Array | Int32Array | Float32Array | Float64Array

/** `sharp(...args)`: the pixels, dense row-major, and their `raw` description. */
export type SharpArgs = [pixels: SharpPixels, options: { raw: { width: number; height: number; channels: 1 | 2 | 3 | 4 } }]

function checkHost(tensor: TensorFacts): void {
  const type = tensor.device.type
  if (type !== DLDeviceType.CPU && type !== DLDeviceType.CUDAHost && type !== DLDeviceType.ROCMHost) {
    throw new BufferError('ERR_DLPACK_NOT_CPU', `tensor memory is on ${String(tensor.device)}; call .to('cpu') first`)
  }
}

/**
 * The tensor's elements, dense row-major: its own memory when it is laid out so (`data`), else
 * a copy (`toTypedArray()`).
 */
export function denseData<D extends DType>(tensor: TensorFacts<D>, options: PeerViewOptions = {}): DataArray<D> {
  checkHost(tensor)
  if (tensor.isContiguous && tensor.offset === 0) {
    const dataOptions: DataOptions = options?.allowReadOnly === true ? { allowReadOnly: true } : {}
    // `data` spans the lowest to the highest element: for a dense tensor, exactly its elements.
    return tensor.getData(dataOptions)
  }
  return tensor.toTypedArray()
}

/** See `Tensor#toOrt`. */
export function toOrt<D extends DType>(tensor: TensorFacts<D>, options: OrtOptions = {}): OrtTensorArgs<D> {
  const dtype = tensor.dtype
  if (!ORT_TYPES.has(dtype)) {
    throw new DLPackTypeError('ERR_DLPACK_UNSUPPORTED_DTYPE', `ONNX Runtime's JS Tensor has no '${dtype}' type`)
  }
  if (options?.output === true) {
    checkHost(tensor)
    if (!isDense(tensor)) {
      throw new BufferError(
        'ERR_DLPACK_NOT_CONTIGUOUS',
        'an ORT output must be dense row-major: ORT would write its results into a copy, never into this tensor (allocate the output with Tensor.empty, or write into a contiguous tensor and view it)',
      )
    }
    if (tensor.readonly) throw new ReadOnlyError('ERR_DLPACK_READ_ONLY', 'an ORT output is written: this tensor is read-only')
  }
  let data: ArrayBufferView = denseData(tensor, options)
  // ORT checks the array's type: clamped bytes go as a Uint8Array over the same memory.
  if (data instanceof Uint8ClampedArray) data = new Uint8Array(data.buffer, data.byteOffset, data.length)
  return [dtype as D & OrtType, data as DataArray<D>, tensor.shape.slice()]
}

/** A tensor's elements are exactly its `data` (dense row-major from its first element). */
function isDense(tensor: TensorFacts): boolean {
  return tensor.isContiguous && tensor.offset === 0
}

/** `[height, width, channels]` of an image tensor (`[height, width]`: 1 channel). */
function imageShape(tensor: TensorFacts, what: string): [number, number, number] {
  const shape = tensor.shape
  const [height, width, channels = 1] = shape as [number, number, number?]
  if ((shape.length !== 2 && shape.length !== 3) || channels < 1 || channels > 4) {
    throw new DLPackTypeError(
      'ERR_DLPACK_INVALID_ARGUMENT',
      `${what} is [height, width] or [height, width, channels] with 1 to 4 channels, not [${shape.join(', ')}]`,
    )
  }
  return [height, width, channels]
}

/** See `Tensor#toImageData`. */
export function toImageData(tensor: TensorFacts, options: PeerViewOptions = {}): ImageDataArgs {
  const dtype = tensor.dtype
  if (dtype !== 'uint8') throw new DLPackTypeError('ERR_DLPACK_UNSUPPORTED_DTYPE', `image pixels are uint8, not ${dtype}`)
  const [height, width, channels] = imageShape(tensor, 'an image')
  const bytes = denseData(tensor, options) as Uint8Array
  if (channels === 4) return { data: new Uint8ClampedArray(bytes.buffer, bytes.byteOffset, bytes.length), width, height, channels: 4 }
  // ImageData holds RGBA: grey (1), grey + alpha (2) and RGB (3) pixels are widened into a new
  // array, opaque where the image has no alpha.
  const pixels = width * height
  const rgba = new Uint8ClampedArray(pixels * 4)
  for (let p = 0, i = 0, o = 0; p < pixels; p++, i += channels, o += 4) {
    const grey = channels < 3
    rgba[o] = bytes[i] as number
    rgba[o + 1] = bytes[grey ? i : i + 1] as number
    rgba[o + 2] = bytes[grey ? i : i + 2] as number
    rgba[o + 3] = channels === 2 ? (bytes[i + 1] as number) : 255
  }
  return { data: rgba, width, height, channels: 4 }
}

/** tfjs's dtype for each dtype it can hold exactly, and whether the values need widening. */
const TF_TYPES: Partial<Record<DType, TfDType>> = {
  float32: 'float32',
  int32: 'int32',
  bool: 'bool',
  int8: 'int32',
  uint8: 'int32',
  int16: 'int32',
  uint16: 'int32',
}

/** See `Tensor#toTf`. */
export function toTf(tensor: TensorFacts, options: PeerViewOptions = {}): TfTensorArgs {
  const dtype = tensor.dtype
  const tfType = TF_TYPES[dtype]
  if (tfType === undefined) {
    throw new DLPackTypeError(
      'ERR_DLPACK_UNSUPPORTED_DTYPE',
      `tfjs tensors hold float32, int32 and bool; ${dtype} would not keep its values: astype('float32') or astype('int32') first`,
    )
  }
  // int8/uint8/int16/uint16: widened exactly into an Int32Array (what tfjs would do itself).
  const values: ArrayBufferView =
    tfType === 'int32' && dtype !== 'int32' ? tensor.astype('int32').data : denseData(tensor, options)
  // tfjs checks the array's type: clamped bytes (bool cannot be clamped) go as a Uint8Array.
  const plain = values instanceof Uint8ClampedArray ? new Uint8Array(values.buffer, values.byteOffset, values.length) : values
  return [plain as TfTensorArgs[0], tensor.shape.slice(), tfType]
}

const SHARP_TYPES: ReadonlySet<DType> = new Set<DType>(['uint8', 'int8', 'uint16', 'int16', 'uint32', 'int32', 'float32', 'float64'])

/** See `Tensor#toSharp`. */
export function toSharp(tensor: TensorFacts, options: PeerViewOptions = {}): SharpArgs {
  const dtype = tensor.dtype
  if (!SHARP_TYPES.has(dtype)) {
    throw new DLPackTypeError('ERR_DLPACK_UNSUPPORTED_DTYPE', `sharp's raw pixels are 8, 16 or 32-bit integers or float32/float64, not ${dtype}`)
  }
  const [height, width, channels] = imageShape(tensor, 'an image for sharp')
  const pixels = denseData(tensor, options) as SharpPixels
  return [pixels, { raw: { width, height, channels: channels as 1 | 2 | 3 | 4 } }]
}

// ---------------------------------------------------------------------------------------------
// Apache Arrow

/** The apache-arrow type class names for each dtype a column can have. */
const ARROW_TYPE_NAMES = {
  int8: 'Int8',
  int16: 'Int16',
  int32: 'Int32',
  int64: 'Int64',
  uint8: 'Uint8',
  uint16: 'Uint16',
  uint32: 'Uint32',
  uint64: 'Uint64',
  float16: 'Float16',
  float32: 'Float32',
  float64: 'Float64',
} as const satisfies Partial<Record<DType, string>>

export type ArrowTypeName = (typeof ARROW_TYPE_NAMES)[keyof typeof ARROW_TYPE_NAMES]

/**
 * The building blocks of an Arrow column over a tensor of shape `[rows, ...listSizes]`: a leaf
 * of `type` over `values` (dense row-major; the tensor's own memory when it is laid out so),
 * nested in one FixedSizeList per entry of `listSizes`.
 */
export interface ArrowParts {
  type: ArrowTypeName
  /** The leaf values (float16: their bits as a Uint16Array, as apache-arrow stores them). */
  values: ArrayBufferView
  rows: number
  listSizes: number[]
}

export function arrowParts(tensor: TensorFacts, options: PeerViewOptions = {}): ArrowParts {
  const dtype = tensor.dtype
  const type = (ARROW_TYPE_NAMES as Partial<Record<DType, ArrowTypeName>>)[dtype]
  if (type === undefined) {
    throw new DLPackTypeError('ERR_DLPACK_UNSUPPORTED_DTYPE', `no Arrow column type holds '${dtype}' without conversion`)
  }
  if (tensor.ndim === 0) throw new DLPackTypeError('ERR_DLPACK_INVALID_ARGUMENT', 'an Arrow column needs at least one dimension (rows)')
  let values: ArrayBufferView = denseData(tensor, options)
  if (dtype === 'float16' && !(values instanceof Uint16Array)) {
    values = new Uint16Array(values.buffer, values.byteOffset, values.byteLength / 2)
  } else if (values instanceof Uint8ClampedArray) {
    values = new Uint8Array(values.buffer, values.byteOffset, values.length)
  }
  const [rows, ...listSizes] = tensor.shape as [number, ...number[]]
  return { type, values, rows, listSizes }
}

/**
 * The parts of the apache-arrow module `toArrow` calls (pass the module itself). Its overloads
 * are too precise to restate here, hence the `never` parameters: any apache-arrow version's
 * functions fit.
 */
export interface ArrowModule {
  makeData(props: never): unknown
  makeVector(data: never): unknown
  Field: new (name: never, type: never, nullable?: never) => unknown
  FixedSizeList: new (listSize: never, child: never) => unknown
}

/**
 * An apache-arrow `Vector` over the tensor: `toArrow(tensor, arrow)` with `arrow` the
 * apache-arrow module. Rows are the first dimension; further dimensions become nested
 * FixedSizeLists. Zero-copy for dense tensors. The result's type is the caller's own Arrow
 * `Vector` type (`as Vector<Float32>`).
 */
export function toArrow(tensor: TensorFacts, arrow: ArrowModule, options: PeerViewOptions = {}): unknown {
  const { type, values, rows, listSizes } = arrowParts(tensor, options)
  const classes = arrow as unknown as Record<string, new () => unknown>
  const Leaf = classes[type]
  if (typeof Leaf !== 'function') throw new DLPackTypeError('ERR_DLPACK_INVALID_ARGUMENT', `the arrow module has no ${type} type`)
  const shape = [rows, ...listSizes]
  const prefix = (end: number) => shape.slice(0, end).reduce((n, d) => n * d, 1)
  let childType: unknown = new Leaf()
  const makeData = (props: Record<string, unknown>) => arrow.makeData(props as never)
  let data = makeData({ type: childType, data: values, length: prefix(shape.length), nullCount: 0 })
  // Innermost list first: the list over axis `axis` has one row per element of the axes before it.
  for (let axis = shape.length - 1; axis >= 1; axis--) {
    const field = new arrow.Field('item' as never, childType as never, false as never)
    childType = new arrow.FixedSizeList(shape[axis] as never, field as never)
    data = makeData({ type: childType, length: prefix(axis), nullCount: 0, child: data })
  }
  return arrow.makeVector(data as never)
}
