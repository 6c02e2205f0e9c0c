/**
 * Recognisers for the tensors and images of the JS libraries people already use, so that
 * `fromDLPack` takes them as they are: ONNX Runtime and transformers.js tensors, sharp's raw
 * output, ImageData / RawImage pixels, Apache Arrow vectors and TensorFlow.js tensors. Each
 * reads only the library's public fields (nothing here imports those libraries) and wraps the
 * library's own TypedArray, so the result shares its memory. What would need a copy (several
 * Arrow chunks, bit-packed booleans, dropped nulls, a tfjs backend that copies on `dataSync`) is
 * refused with a stable code unless the caller passes `copy: true`.
 */
import { type DType, DTYPES, dtypeOfArray, isDType } from '../dtype'
import { BufferError, DLPackTypeError, TensorDisposedError, describe } from '../errors'
import { MAX_NDIM } from '../generated/facts'
import { createFromMemory, type Tensor } from '../tensor'

/** onnxruntime-common's `Tensor` (onnxruntime-node/-web) and transformers.js's `Tensor`. */
export interface OrtTensorLike {
  readonly type: string
  readonly dims: readonly number[]
  readonly data: unknown
  /** `'cpu'` or `'cpu-pinned'`; GPU locations are refused (`ERR_DLPACK_NOT_CPU`). */
  readonly location?: string
}

/** sharp's `toBuffer({ resolveWithObject: true })` of `.raw()` output: HWC pixels. */
export interface SharpRawLike {
  readonly data: ArrayBufferView
  readonly info: {
    readonly width: number
    readonly height: number
    readonly channels: number
    /** sharp's pixel depth (`'uchar'`, `'ushort'`, `'float'`, ...); default: the array's own type. */
    readonly depth?: string
  }
}

/** `ImageData` (canvas, @napi-rs/canvas) and transformers.js `RawImage`: HWC pixels. */
export interface ImageLike {
  readonly data: ArrayBufferView
  readonly width: number
  readonly height: number
  /** Default: `data.length / (width × height)` (4 for `ImageData`). */
  readonly channels?: number
}

/** An apache-arrow `Data` (one chunk): the fields read here. */
export interface ArrowDataLike {
  readonly type: ArrowTypeLike
  readonly length: number
  readonly offset: number
  readonly nullCount: number
  /** The leaf values (a TypedArray; bit-packed for Bool; absent for lists). */
  readonly values?: unknown
  readonly children: readonly ArrowDataLike[]
}

interface ArrowTypeLike {
  readonly typeId: number
  readonly bitWidth?: number
  readonly isSigned?: boolean
  readonly precision?: number
  readonly listSize?: number
  /** FixedSizeList: its one child field. */
  readonly children?: readonly { readonly type: ArrowTypeLike }[]
}

/** An apache-arrow `Vector` (a column): its chunks are `Data`s. */
export interface ArrowVectorLike {
  readonly type: ArrowTypeLike
  readonly data: readonly ArrowDataLike[]
}

/** A TensorFlow.js tensor (the CPU backend keeps its TypedArray, so `dataSync()` is the memory). */
export interface TfTensorLike {
  readonly dtype: string
  readonly shape: readonly number[]
  readonly isDisposed: boolean
  dataSync(): ArrayBufferView | readonly string[]
}

/** Every library object `fromDLPack` recognises (see docs/interop.md). */
export type AdaptedSource = OrtTensorLike | SharpRawLike | ImageLike | ArrowVectorLike | ArrowDataLike | TfTensorLike

/** The options the recognisers read (a subset of `FromDLPackOptions`). */
export interface AdaptOptions {
  copy?: boolean | null
  writable?: boolean
}

type Fields = Record<string, unknown>

const isObject = (value: unknown): value is Fields => typeof value === 'object' && value !== null

const isDim = (value: unknown): value is number => Number.isSafeInteger(value) && (value as number) >= 0

function invalid(message: string): DLPackTypeError {
  return new DLPackTypeError('ERR_DLPACK_INVALID_ARGUMENT', message)
}

function unsupported(message: string): DLPackTypeError {
  return new DLPackTypeError('ERR_DLPACK_UNSUPPORTED_DTYPE', message)
}

function copyRequired(message: string): BufferError {
  return new BufferError('ERR_DLPACK_COPY_REQUIRED', `${message}: pass { copy: true } for a copy`)
}

function checkDims(dims: readonly unknown[], what: string): number[] {
  if (!dims.every(isDim)) throw invalid(`${what} must hold non-negative integers, got [${dims.join(', ')}]`)
  return dims as number[]
}

const product = (dims: readonly number[]) => dims.reduce((n, d) => n * d, 1)

/**
 * A tensor over `array` with `dtype` and row-major `shape`, checking that the array holds
 * exactly that many elements (so no element of the result lies outside the library's data).
 */
function dense(array: ArrayBufferView, dtype: DType, shape: number[], what: string, readonly = false): Tensor {
  const spec = DTYPES[dtype]
  const expected = product(shape) * spec.itemsize
  if (array.byteLength !== expected) {
    throw invalid(`${what}: shape [${shape.join(', ')}] of ${dtype} is ${expected} bytes, but the data holds ${array.byteLength}`)
  }
  return createFromMemory(array, dtype, shape, undefined, 0, readonly)
}

// ---------------------------------------------------------------------------------------------
// ONNX Runtime / transformers.js

function isOrtTensor(value: Fields): boolean {
  return typeof value.type === 'string' && Array.isArray(value.dims)
}

/**
 * Whether `value` looks like an ONNX Runtime or transformers.js tensor (`type` and `dims`; its
 * `data` is not read: a getter that throws where the data is not on the CPU).
 */
export function isOrtTensorLike(value: object): boolean {
  return isOrtTensor(value as Fields)
}

function fromOrt(source: OrtTensorLike): Tensor {
  const location = source.location ?? 'cpu'
  if (location !== 'cpu' && location !== 'cpu-pinned') {
    throw new BufferError('ERR_DLPACK_NOT_CPU', `the ORT tensor's data is on '${location}': download it first (await tensor.getData())`)
  }
  const type = source.type
  if (!isDType(type)) {
    throw unsupported(`ORT type '${type}' has no DLPack dtype here (packed int4/uint4 and string tensors are not numeric arrays)`)
  }
  const data = source.data
  if (!ArrayBuffer.isView(data)) throw invalid(`ORT tensor of type '${type}' has no TypedArray data`)
  // 'bool' keeps its label over ORT's Uint8Array; float16 is a Uint16Array or a Float16Array.
  return dense(data, type, checkDims(source.dims, 'dims'), 'ORT tensor')
}

// ---------------------------------------------------------------------------------------------
// sharp raw output, ImageData, RawImage

/** sharp's `info.depth` names (libvips band formats); a Map, so no inherited name matches. */
const SHARP_DEPTHS: ReadonlyMap<unknown, DType> = new Map<string, DType>([
  ['uchar', 'uint8'],
  ['char', 'int8'],
  ['ushort', 'uint16'],
  ['short', 'int16'],
  ['uint', 'uint32'],
  ['int', 'int32'],
  ['float', 'float32'],
  ['double', 'float64'],
  ['complex', 'complex64'],
  ['dpcomplex', 'complex128'],
])

function isSharpRaw(value: Fields): boolean {
  const info = value.info
  return ArrayBuffer.isView(value.data) && isObject(info) && isDim(info.width) && isDim(info.height) && isDim(info.channels)
}

function fromSharp(source: SharpRawLike): Tensor {
  const { width, height, channels, depth } = source.info
  let dtype: DType | undefined
  if (depth !== undefined) {
    dtype = SHARP_DEPTHS.get(depth)
    if (dtype === undefined) throw unsupported(`sharp depth ${describe(depth)} has no DLPack dtype`)
  } else {
    dtype = dtypeOfArray(source.data) ?? 'uint8'
  }
  // sharp hands out Buffers whatever the depth: the bytes are reinterpreted as `dtype` in place.
  return dense(source.data, dtype, [height, width, channels], 'sharp raw image')
}

function isImage(value: Fields): boolean {
  return ArrayBuffer.isView(value.data) && isDim(value.width) && isDim(value.height)
}

function fromImage(source: ImageLike): Tensor {
  const { data, width, height } = source
  const dtype = dtypeOfArray(data)
  if (dtype === undefined) throw invalid('image data must be a TypedArray')
  const elements = data.byteLength / DTYPES[dtype].itemsize
  const channels = source.channels ?? (width * height === 0 ? 0 : elements / (width * height))
  if (!isDim(channels)) {
    throw invalid(`image data of ${elements} elements is not a whole number of channels for ${width}×${height} pixels`)
  }
  // A Uint8ClampedArray (ImageData, RawImage) gives a clamped tensor (see ClampedTensor).
  return dense(data, dtype, [height, width, channels], 'image')
}

// ---------------------------------------------------------------------------------------------
// Apache Arrow

/** apache-arrow's `Type` enum values used here. */
const ArrowType = { Int: 2, Float: 3, Bool: 6, FixedSizeList: 16 } as const

const ARROW_FLOATS: readonly DType[] = ['float16', 'float32', 'float64'] // Precision HALF, SINGLE, DOUBLE

function isArrowType(value: unknown): value is ArrowTypeLike {
  return isObject(value) && typeof value.typeId === 'number'
}

function isArrowData(value: Fields): boolean {
  return isArrowType(value.type) && Array.isArray(value.children) && typeof value.offset === 'number' && typeof value.length === 'number'
}

function isArrowVector(value: Fields): boolean {
  return isArrowType(value.type) && Array.isArray(value.data) && value.data.every((chunk) => isObject(chunk) && isArrowData(chunk))
}

/** The element dtype of an Arrow leaf type. */
function arrowDType(type: ArrowTypeLike): DType {
  if (type.typeId === ArrowType.Int && type.bitWidth !== undefined) {
    const name = `${type.isSigned ? 'int' : 'uint'}${type.bitWidth}`
    if (isDType(name)) return name
  }
  if (type.typeId === ArrowType.Float && Number.isInteger(type.precision)) {
    const name = ARROW_FLOATS[type.precision as number]
    if (name !== undefined) return name
  }
  if (type.typeId === ArrowType.Bool) return 'bool'
  throw unsupported(`Arrow type ${String(type)} is not a numeric array (Int, Float, Bool, FixedSizeList of them)`)
}

/** One chunk as a leaf: its values (first element first), their count, and any nulls on the way. */
interface ArrowLeaf {
  data: ArrowDataLike
  /** Rows × every list size: elements of the leaf this chunk covers. */
  elements: number
  hasNulls: boolean
}

/** The error for an Arrow type or chunk nested deeper than a tensor has dimensions (a cycle). */
function tooDeep(what: string): DLPackTypeError {
  return invalid(`Arrow ${what} nests FixedSizeLists deeper than ${MAX_NDIM - 1} levels (a tensor has at most ${MAX_NDIM} dimensions)`)
}

function arrowLeaf(chunk: ArrowDataLike): ArrowLeaf {
  let data = chunk
  if (!isDim(chunk.length)) throw invalid(`Arrow chunk length must be a non-negative integer, got ${describe(chunk.length)}`)
  let elements = chunk.length
  let hasNulls = chunk.nullCount > 0
  // Bounded: a hostile (or cyclic) chunk whose child is itself must not loop forever.
  for (let depth = 1; data.type.typeId === ArrowType.FixedSizeList; depth++) {
    if (depth >= MAX_NDIM) throw tooDeep('data')
    const child = data.children[0]
    if (child === undefined || !isDim(data.type.listSize)) throw invalid('Arrow FixedSizeList without a child or list size')
    elements *= data.type.listSize
    data = child
    if (!isObject(data) || !isArrowType(data.type)) throw invalid('Arrow FixedSizeList child without a type')
    hasNulls ||= data.nullCount > 0
  }
  if (!Number.isSafeInteger(elements)) throw invalid(`Arrow chunk of ${elements} elements`)
  return { data, elements, hasNulls }
}

/** `[rows, listSize, listSize, ...]` and the leaf type of a (nested) FixedSizeList type. */
function arrowLayout(type: ArrowTypeLike, rows: number): { shape: number[]; leafType: ArrowTypeLike } {
  const shape = [rows]
  let leafType = type
  while (leafType.typeId === ArrowType.FixedSizeList) {
    // Bounded: a cyclic type (its child's type is itself) would grow `shape` until V8 aborts.
    if (shape.length >= MAX_NDIM) throw tooDeep('type')
    const child = leafType.children?.[0]
    if (child === undefined || !isDim(leafType.listSize)) throw invalid('Arrow FixedSizeList type without a child or list size')
    shape.push(leafType.listSize)
    leafType = child.type
    if (!isArrowType(leafType)) throw invalid('Arrow FixedSizeList child without a type')
  }
  return { shape, leafType }
}

/** The leaf elements of one chunk, as a TypedArray over Arrow's memory (or bytes for booleans). */
function leafValues(leaf: ArrowLeaf, dtype: DType): ArrayBufferView {
  const values = leaf.data.values
  // A TypedArray (a DataView or anything else has no elements to count).
  if (!ArrayBuffer.isView(values) || dtypeOfArray(values) === undefined) throw invalid('Arrow data without a TypedArray of values')
  if (dtype === 'bool') {
    // Bit-packed, and arrow-js keeps the bit offset in `offset`: unpack to one byte per element.
    const bits = new Uint8Array(values.buffer, values.byteOffset, values.byteLength)
    const offset = leaf.data.offset
    // Checked against the bits there are first: a short buffer is not padded with false, and a
    // huge `length` is refused before anything is allocated.
    if (!isDim(offset) || offset + leaf.elements > bits.length * 8) {
      throw invalid(`Arrow booleans: ${bits.length * 8} bits hold no ${leaf.elements} values from bit ${describe(offset)}`)
    }
    const bytes = new Uint8Array(leaf.elements)
    for (let i = 0; i < leaf.elements; i++) {
      const bit = offset + i
      // Division, not `>> 3`: bit indices may pass 2^31.
      bytes[i] = ((bits[Math.floor(bit / 8)] as number) >> bit % 8) & 1
    }
    return bytes
  }
  // arrow-js has already applied `offset` to `values` (its slices are subarrays); `values` may
  // be longer than the chunk, so it is cut to the elements the chunk covers.
  const typed = values as Uint8Array
  if (typed.length < leaf.elements) throw invalid(`Arrow values hold ${typed.length} elements, the chunk needs ${leaf.elements}`)
  return typed.subarray(0, leaf.elements)
}

function fromArrow(chunks: readonly ArrowDataLike[], type: ArrowTypeLike, options: AdaptOptions): Tensor {
  const rows = chunks.reduce((n, chunk) => n + chunk.length, 0)
  const { shape, leafType } = arrowLayout(type, rows)
  const dtype = arrowDType(leafType)
  const leaves = chunks.map(arrowLeaf)
  const copy = options.copy === true
  if (!copy) {
    if (leaves.some((leaf) => leaf.hasNulls)) {
      throw new BufferError('ERR_DLPACK_NULLS', 'the Arrow column has nulls, which a tensor cannot hold: pass { copy: true } to copy the values without them')
    }
    if (dtype === 'bool') throw copyRequired('Arrow booleans are bit-packed; a tensor has a byte per element')
    if (chunks.length > 1) throw copyRequired(`the Arrow column has ${chunks.length} chunks; a tensor is one block of memory`)
  }
  if (chunks.length === 0) return createFromMemory(new (DTYPES[dtype].view())(0), dtype, shape, undefined, 0)
  const parts = leaves.map((leaf) => leafValues(leaf, dtype))
  if (parts.length === 1) return dense(parts[0] as ArrayBufferView, dtype, shape, 'Arrow column')
  const View = DTYPES[dtype].view()
  const joined = new View(parts.reduce((n, part) => n + part.byteLength, 0) / DTYPES[dtype].itemsize)
  let at = 0
  for (const part of parts) {
    ;(joined as Uint8Array).set(part as Uint8Array, at)
    at += part.byteLength / DTYPES[dtype].itemsize
  }
  return dense(joined, dtype, shape, 'Arrow column')
}

// ---------------------------------------------------------------------------------------------
// TensorFlow.js

function isTfTensor(value: Fields): boolean {
  return typeof value.dataSync === 'function' && Array.isArray(value.shape) && typeof value.dtype === 'string'
}

function fromTf(source: TfTensorLike, options: AdaptOptions): Tensor {
  if (source.isDisposed) throw new TensorDisposedError('ERR_TENSOR_DISPOSED', 'the tfjs tensor has been disposed')
  const dtype = source.dtype
  if (!isDType(dtype)) throw unsupported(`tfjs dtype '${dtype}' has no DLPack dtype`)
  const data = source.dataSync()
  // The CPU backend hands out the array it computes in; other backends (and the CPU backend
  // for bool and complex64) build a new one per call, which is a copy of the tensor.
  const shared = data === source.dataSync()
  if (!ArrayBuffer.isView(data)) throw unsupported(`tfjs dtype '${dtype}' has no TypedArray data`)
  if (!shared && options.copy !== true) {
    throw copyRequired(`this tfjs tensor (${dtype}) gives a new array on each dataSync(), so no zero-copy view of it exists`)
  }
  // tfjs treats tensors as immutable and shares one array between tensors (reshape, clone):
  // a write through ours would silently change all of them, so it is read-only unless asked.
  return dense(data, dtype, checkDims(source.shape, 'shape'), 'tfjs tensor', shared && options.writable !== true)
}

// ---------------------------------------------------------------------------------------------

/**
 * The tensor `source` holds, if it is one of the library objects above; `undefined` if not.
 * Throws a coded error for a recognised object that cannot be imported as asked.
 */
export function adapt(source: object, options: AdaptOptions): Tensor | undefined {
  const fields = source as Fields
  if (isArrowVector(fields)) {
    const vector = source as ArrowVectorLike
    return fromArrow(vector.data, vector.type, options)
  }
  if (isArrowData(fields)) return fromArrow([source as ArrowDataLike], (source as ArrowDataLike).type, options)
  if (isTfTensor(fields)) return fromTf(source as TfTensorLike, options)
  if (isOrtTensor(fields)) return fromOrt(source as OrtTensorLike)
  if (isSharpRaw(fields)) return fromSharp(source as SharpRawLike)
  if (isImage(fields)) return fromImage(source as ImageLike)
  return undefined
}
