import test from 'ava'

import { BufferError, DLPackTypeError, DTYPES, type DType, ReadOnlyError, Tensor, TensorDisposedError } from '../../dist/index.js'
import { random, throwsCode } from '../harness/helpers.js'


type Layout = { shape: number[]; strides: number[]; offset: number; span: number }

/**
 * A random strided layout over a buffer of `span` elements: a row-major block with every axis
 * stepped by 1 or 2, permuted, some axes flipped (negative strides, starting at `offset`).
 */
function randomLayout(next: () => number): Layout {
  const ndim = 1 + Math.floor(next() * 4)
  const base = Array.from({ length: ndim }, () => 1 + Math.floor(next() * 5))
  const steps = base.map(() => (next() < 0.3 ? 2 : 1))
  const full = base.map((dim, i) => dim * steps[i])
  const rowMajor: number[] = []
  let step = 1
  for (let i = ndim - 1; i >= 0; i--) {
    rowMajor[i] = step * steps[i]
    step *= full[i]
  }
  const order = base.map((_, i) => i).sort(() => next() - 0.5)
  const shape = order.map((i) => base[i])
  const strides = order.map((i) => rowMajor[i])
  let offset = 0
  for (let i = 0; i < ndim; i++) {
    if (next() < 0.3) {
      offset += (shape[i] - 1) * strides[i]
      strides[i] = -strides[i]
    }
  }
  return { shape, strides, offset, span: step }
}

/** Flat offsets (from `layout.offset`) of the elements in row-major order: the JS reference walk. */
function rowMajorOffsets({ shape, strides, offset }: { shape: readonly number[]; strides: readonly number[]; offset: number }): number[] {
  const numel = shape.reduce((a, b) => a * b, 1)
  const out: number[] = []
  for (let linear = 0; linear < numel; linear++) {
    let rest = linear
    let at = offset
    for (let axis = shape.length - 1; axis >= 0; axis--) {
      at += (rest % shape[axis]) * strides[axis]
      rest = Math.floor(rest / shape[axis])
    }
    out.push(at)
  }
  return out
}

/** The index along `axis` of each element, in row-major order. */
function channelOf(shape: readonly number[], axis: number): number[] {
  const numel = shape.reduce((a, b) => a * b, 1)
  const inner = shape.slice(axis + 1).reduce((a, b) => a * b, 1)
  return Array.from({ length: numel }, (_, i) => Math.floor(i / inner) % shape[axis])
}

const bytesOf = (view: ArrayBufferView) => Buffer.from(view.buffer, view.byteOffset, view.byteLength)

const INTEGER = new Set<DType>(['bool', 'int8', 'int16', 'int32', 'int64', 'uint8', 'uint16', 'uint32', 'uint64'])
const RANGE: Partial<Record<DType, [bigint, bigint]>> = {
  bool: [0n, 1n],
  int8: [-128n, 127n],
  int16: [-32768n, 32767n],
  int32: [-(2n ** 31n), 2n ** 31n - 1n],
  int64: [-(2n ** 63n), 2n ** 63n - 1n],
  uint8: [0n, 255n],
  uint16: [0n, 65535n],
  uint32: [0n, 2n ** 32n - 1n],
  uint64: [0n, 2n ** 64n - 1n],
}

/** Round to nearest, ties to even (what a Uint8ClampedArray store does). */
function roundHalfEven(v: number): number {
  const floor = Math.floor(v)
  const diff = v - floor
  if (diff < 0.5) return floor
  if (diff > 0.5) return floor + 1
  return floor % 2 === 0 ? floor : floor + 1
}

type Steps = { scale?: number[]; offset?: number[]; mean?: number[]; std?: number[] }

/**
 * The plain JS loop `astype` must match bit for bit: integers to integers exactly (saturated)
 * when no step is given; otherwise x as a JS number, `* scale + offset - mean) / std`, stored
 * with round-half-even and saturation for integer targets.
 */
function referenceAstype(values: (number | bigint)[], channels: number[], source: DType, target: DType, steps: Steps): ArrayBufferView {
  const Out = DTYPES[target].view()
  const out = new Out(values.length) as unknown as { [i: number]: number | bigint } & ArrayBufferView
  const exact = INTEGER.has(source) && INTEGER.has(target) && Object.values(steps).every((s) => s === undefined)
  values.forEach((x, i) => {
    const c = channels[i]
    if (exact) {
      const [low, high] = RANGE[target]!
      let v = BigInt(x)
      if (target === 'bool') v = v !== 0n ? 1n : 0n
      v = v < low ? low : v > high ? high : v
      out[i] = typeof out[i] === 'bigint' ? v : Number(v)
      return
    }
    let v = Number(x)
    const pick = (list: number[]) => list[list.length === 1 ? 0 : c]
    if (steps.scale) v = v * pick(steps.scale)
    if (steps.offset) v = v + pick(steps.offset)
    if (steps.mean) v = v - pick(steps.mean)
    if (steps.std) v = v / pick(steps.std)
    if (target === 'bool') {
      out[i] = v !== 0 ? 1 : 0
    } else if (INTEGER.has(target)) {
      const [low, high] = RANGE[target]!
      let r = Number.isNaN(v) ? 0n : v === Infinity ? high : v === -Infinity ? low : BigInt(roundHalfEven(v))
      r = r < low ? low : r > high ? high : r
      out[i] = typeof out[i] === 'bigint' ? r : Number(r)
    } else {
      out[i] = v
    }
  })
  return out
}

/** Random values of `dtype` (integers across and beyond small ranges, finite floats). */
function randomValues(dtype: DType, count: number, next: () => number): ArrayBufferView {
  const View = DTYPES[dtype].view()
  const array = new View(count) as unknown as { [i: number]: number | bigint } & ArrayBufferView
  for (let i = 0; i < count; i++) {
    if (dtype === 'int64' || dtype === 'uint64') {
      const big = BigInt(Math.floor(next() * 2 ** 32)) * 2n ** 31n + BigInt(Math.floor(next() * 1000))
      array[i] = dtype === 'int64' && next() < 0.5 ? -big : big
    } else if (dtype === 'bool') {
      array[i] = next() < 0.5 ? 1 : 0
    } else if (dtype === 'float32' || dtype === 'float64') {
      array[i] = (next() - 0.5) * 10 ** Math.floor(next() * 12 - 2)
    } else {
      array[i] = Math.floor((next() - 0.5) * 2 ** (DTYPES[dtype].itemsize * 8 + 1))
    }
  }
  return array
}

test('permute and transpose are zero-copy views: same memory, permuted shape and strides', (t) => {
  const array = new Float32Array(24).map((_, i) => i)
  const hwc = Tensor.from(array, [2, 3, 4])
  const chw = hwc.permute(2, 0, 1)
  t.deepEqual(chw.shape, [4, 2, 3])
  t.deepEqual(chw.strides, [1, 12, 4])
  t.is(chw.dataPointer, hwc.dataPointer)
  t.false(chw.isContiguous)
  t.false(chw.isCopy)
  t.is(chw.dtype, 'float32')
  // Writes are seen both ways.
  chw.data[chw.offset + 1 * 1 + 1 * 12 + 2 * 4] = -7
  t.is(array[1 * 12 + 2 * 4 + 1], -7)
  array[5] = 99
  t.is(chw.toTypedArray()[1 * 6 + 0 * 3 + 1], 99)
  // Array form, negative axes, transpose, and back to the original.
  t.deepEqual(hwc.permute([-1, 0, -2]).strides, [1, 12, 4])
  const swapped = hwc.transpose(0, -1)
  t.deepEqual(swapped.shape, [4, 3, 2])
  t.deepEqual(swapped.strides, [1, 4, 12])
  t.is(swapped.dataPointer, hwc.dataPointer)
  const back = chw.permute(1, 2, 0)
  t.deepEqual(back.strides, [12, 4, 1])
  t.true(back.isContiguous)
  // Each view is its own Tensor: disposing one leaves the others usable.
  hwc.dispose()
  t.is(chw.toTypedArray()[0], 0)
  chw.dispose()
  t.is(back.toTypedArray()[5], 99)
})

test('permute keeps negative strides, offsets and the read-only flag', (t) => {
  const array = new Int16Array(12).map((_, i) => i)
  const flipped = Tensor.from(array, [3, 4], { strides: [-4, 1], offset: 8, readonly: true })
  const view = flipped.permute(1, 0)
  t.deepEqual(view.strides, [1, -4])
  t.is(view.dataPointer, flipped.dataPointer)
  t.true(view.readonly)
  t.is(view.offset, flipped.offset)
  t.deepEqual(Array.from(view.toTypedArray()), [8, 4, 0, 9, 5, 1, 10, 6, 2, 11, 7, 3])
})

test('permute and transpose refuse bad axes with ERR_DLPACK_INVALID_ARGUMENT', (t) => {
  const tensor = Tensor.zeros([2, 3, 4])
  for (const axes of [[0, 1], [0, 1, 1], [0, 1, 3], [0, 1, -4], [0, 1, 2, 3], [0, 1.5, 2]]) {
    throwsCode(t, () => tensor.permute(axes), 'ERR_DLPACK_INVALID_ARGUMENT', DLPackTypeError, JSON.stringify(axes))
  }
  throwsCode(t, () => tensor.transpose(0, 3), 'ERR_DLPACK_INVALID_ARGUMENT', DLPackTypeError)
  throwsCode(t, () => tensor.transpose(0, Number.NaN), 'ERR_DLPACK_INVALID_ARGUMENT', DLPackTypeError)
  tensor.dispose()
  throwsCode(t, () => tensor.permute(0, 1, 2), 'ERR_TENSOR_DISPOSED', TensorDisposedError)
})

test('contiguous(): the same memory when already dense, else a dense copy equal to the JS loop', (t) => {
  const dense = Tensor.from(new Uint8Array([1, 2, 3, 4, 5, 6]), [2, 3])
  const same = dense.contiguous()
  t.not(same, dense)
  t.is(same.dataPointer, dense.dataPointer)
  same.dispose()
  t.is(dense.data[0], 1, 'disposing the result leaves the source usable')

  const next = random(1)
  for (let round = 0; round < 200; round++) {
    const layout = randomLayout(next)
    for (const dtype of ['uint8', 'float64', 'int16'] as const) {
      const base = randomValues(dtype, layout.span, next) as Uint8Array
      const source = Tensor.from(base, layout.shape, { strides: layout.strides, offset: layout.offset, dtype })
      const copy = source.contiguous()
      t.true(copy.isContiguous)
      t.deepEqual(copy.shape, layout.shape)
      const want = rowMajorOffsets(layout).map((at) => (base as unknown as ArrayLike<unknown>)[at])
      t.deepEqual(Array.from(copy.data as ArrayLike<unknown>), want, JSON.stringify(layout))
      if (!source.isContiguous && source.numel > 1) t.not(copy.dataPointer, source.dataPointer)
      source.dispose()
      copy.dispose()
    }
  }
})

test('astype: every supported dtype pair on random strided layouts equals the JS loop bit for bit', (t) => {
  const dtypes: DType[] = ['bool', 'int8', 'int16', 'int32', 'int64', 'uint8', 'uint16', 'uint32', 'uint64', 'float32', 'float64']
  const next = random(2)
  for (const source of dtypes) {
    for (const target of dtypes) {
      for (let round = 0; round < 6; round++) {
        const layout = randomLayout(next)
        const base = randomValues(source, layout.span, next)
        const tensor = Tensor.from(base as Uint8Array, layout.shape, { strides: layout.strides, offset: layout.offset, dtype: source })
        const values = rowMajorOffsets(layout).map((at) => (base as unknown as ArrayLike<number | bigint>)[at])
        const axis = Math.floor(next() * layout.shape.length)
        const channels = layout.shape[axis]
        const perChannel = () => Array.from({ length: channels }, () => (next() - 0.5) * 4)
        const stepChoices: Steps[] = [{}, { scale: [next() * 3] }, { scale: perChannel(), offset: [1.5] }, { mean: perChannel(), std: perChannel() }]
        const steps = stepChoices[round % stepChoices.length]
        const label = `${source} -> ${target} ${JSON.stringify(layout)} ${JSON.stringify(steps)} axis ${axis}`
        const result = tensor.astype(target, { ...steps, axis })
        t.is(result.dtype, target)
        t.true(result.isContiguous)
        t.deepEqual(result.shape, layout.shape)
        const want = referenceAstype(values, channelOf(layout.shape, axis), source, target, steps)
        t.true(bytesOf(result.data).equals(bytesOf(want)), label)
        tensor.dispose()
        result.dispose()
      }
    }
  }
})

test('astype: HWC uint8 -> CHW float32 ImageNet normalisation equals the JS loop bit for bit', (t) => {
  const [h, w] = [37, 53]
  const next = random(3)
  const pixels = new Uint8Array(h * w * 3).map(() => Math.floor(next() * 256))
  const image = Tensor.from(pixels, [h, w, 3])
  const mean = [0.485, 0.456, 0.406]
  const std = [0.229, 0.224, 0.225]
  const chw = image.permute(2, 0, 1).astype('float32', { scale: 1 / 255, mean, std, axis: 0 })
  const want = new Float32Array(3 * h * w)
  for (let c = 0; c < 3; c++) {
    for (let y = 0; y < h; y++) {
      for (let x = 0; x < w; x++) want[c * h * w + y * w + x] = (pixels[(y * w + x) * 3 + c] * (1 / 255) - mean[c]) / std[c]
    }
  }
  t.deepEqual(chw.shape, [3, h, w])
  t.true(bytesOf(chw.data).equals(bytesOf(want)))
  // The same normalisation on the HWC layout, channels last.
  const hwc = image.astype('float32', { scale: 1 / 255, mean, std, axis: -1 })
  const wantHwc = Float32Array.from(pixels, (p, i) => (p * (1 / 255) - mean[i % 3]) / std[i % 3])
  t.true(bytesOf(hwc.data).equals(bytesOf(wantHwc)))
})

test('astype: integer targets round half to even and saturate like Uint8ClampedArray; -0 and NaN', (t) => {
  const values = new Float64Array([-1.5, -0.5, 0.5, 1.5, 2.5, 127.5, 254.5, 255.5, 300, Number.NaN, Infinity, -Infinity, -0, 3.4999])
  const clamped = Uint8ClampedArray.from(values)
  t.deepEqual(Array.from(Tensor.from(values).astype('uint8').data), Array.from(clamped))
  t.deepEqual(Array.from(Tensor.from(values).astype('int8').data), [-2, 0, 0, 2, 2, 127, 127, 127, 127, 0, 127, -128, 0, 3])
  const floats = Tensor.from(new Float64Array([-0, Number.NaN, 1e300])).astype('float32').data
  t.true(Object.is(floats[0], -0))
  t.true(Number.isNaN(floats[1]))
  t.is(floats[2], Infinity)
  t.deepEqual(Array.from(Tensor.from(new Float64Array([0, -0, Number.NaN, 2])).astype('bool').data), [0, 0, 1, 1])
  // Integer to integer with no step: exact, even past 2^53.
  const big = Tensor.from(new BigInt64Array([2n ** 62n + 1n, -5n])).astype('uint64').data
  t.deepEqual(Array.from(big), [2n ** 62n + 1n, 0n])
  t.deepEqual(Array.from(Tensor.from(new Int32Array([-40000, 40000, 7])).astype('int16').data), [-32768, 32767, 7])
})

test('astype({ out }) writes into an existing tensor without allocating, and returns it', (t) => {
  const pixels = new Uint8Array([0, 51, 102, 153, 204, 255])
  const image = Tensor.from(pixels, [1, 2, 3])
  const out = Tensor.empty([3, 1, 2], 'float32')
  const pointer = out.dataPointer
  const result = image.permute(2, 0, 1).astype('float32', { scale: 1 / 255, out })
  t.is(result, out)
  t.is(out.dataPointer, pointer)
  t.deepEqual(Array.from(out.data), [0, 153, 51, 204, 102, 255].map((v) => Math.fround(v * (1 / 255))))
  // A view of user memory as the destination: writes land there.
  const target = new Float32Array(6)
  image.astype('float32', { out: Tensor.from(target, [1, 2, 3]) })
  t.deepEqual(Array.from(target), [0, 51, 102, 153, 204, 255])
})

test('astype and contiguous refuse bad input with stable codes', (t) => {
  const image = Tensor.from(new Uint8Array(12), [2, 2, 3])
  throwsCode(t, () => image.astype('nope' as DType), 'ERR_DLPACK_INVALID_ARGUMENT', DLPackTypeError)
  throwsCode(t, () => image.astype('complex64'), 'ERR_DLPACK_INVALID_ARGUMENT', DLPackTypeError)
  throwsCode(t, () => Tensor.zeros([2], 'complex64').astype('float32'), 'ERR_DLPACK_INVALID_ARGUMENT', DLPackTypeError)
  throwsCode(t, () => Tensor.zeros([2], 'float8_e4m3fn').astype('float32'), 'ERR_DLPACK_INVALID_ARGUMENT', DLPackTypeError)
  throwsCode(t, () => image.astype('float32', { mean: [1, 2, 3] }), 'ERR_DLPACK_INVALID_ARGUMENT', DLPackTypeError, 'no axis')
  throwsCode(t, () => image.astype('float32', { mean: [1, 2, 3], axis: 0 }), 'ERR_DLPACK_INVALID_ARGUMENT', DLPackTypeError, 'wrong axis')
  throwsCode(t, () => image.astype('float32', { mean: [1, 2, 3], axis: 3 }), 'ERR_DLPACK_INVALID_ARGUMENT', DLPackTypeError, 'axis range')
  throwsCode(t, () => image.astype('float32', { scale: [] }), 'ERR_DLPACK_INVALID_ARGUMENT', DLPackTypeError, 'empty')
  throwsCode(t, () => image.astype('float32', { scale: '2' as never }), 'ERR_DLPACK_INVALID_ARGUMENT', DLPackTypeError, 'string')
  throwsCode(t, () => image.astype('float32', { out: Tensor.empty([12], 'float32') }), 'ERR_DLPACK_INVALID_ARGUMENT', DLPackTypeError, 'out shape')
  throwsCode(t, () => image.astype('float32', { out: Tensor.empty([2, 2, 3], 'float64') }), 'ERR_DLPACK_INVALID_ARGUMENT', DLPackTypeError, 'out dtype')
  throwsCode(t, () => image.astype('float32', { out: {} as never }), 'ERR_DLPACK_INVALID_ARGUMENT', DLPackTypeError, 'out type')
  const readonly = Tensor.from(new Float32Array(12), [2, 2, 3], { readonly: true })
  throwsCode(t, () => image.astype('float32', { out: readonly }), 'ERR_DLPACK_READ_ONLY', ReadOnlyError)
  const strided = Tensor.empty([3, 2, 2], 'float32').permute(1, 2, 0)
  throwsCode(t, () => image.astype('float32', { out: strided }), 'ERR_DLPACK_NOT_CONTIGUOUS')
  // The destination overlapping the source (same memory, uint8 to uint8 reversed).
  const bytes = new Uint8Array(8)
  const forward = Tensor.from(bytes, [8])
  const backward = Tensor.from(bytes, [8], { strides: [-1], offset: 7 })
  throwsCode(t, () => backward.astype('uint8', { out: forward }), 'ERR_DLPACK_INVALID_ARGUMENT', DLPackTypeError, 'overlap')
  image.dispose()
  throwsCode(t, () => image.astype('float32'), 'ERR_TENSOR_DISPOSED', TensorDisposedError)
  throwsCode(t, () => image.contiguous(), 'ERR_TENSOR_DISPOSED', TensorDisposedError)
  t.true(BufferError !== undefined)
})

test('astype and contiguous work on zero-size and 0-d tensors', (t) => {
  const empty = Tensor.zeros([0, 3], 'uint8').permute(1, 0)
  t.deepEqual(empty.contiguous().shape, [3, 0])
  t.deepEqual(empty.astype('float32', { mean: [1, 2, 3], axis: 0 }).shape, [3, 0])
  const scalar = Tensor.from(new Int8Array([-3]), [])
  t.deepEqual(Array.from(scalar.astype('uint8').data), [0])
  t.deepEqual(Array.from(scalar.astype('float32', { scale: 0.5 }).data), [-1.5])
})

// New outputs are not zero-filled first, and the kernels' loops are unrolled: every byte must
// still come out as the JS loop's, at an odd size (the unrolled steps end mid-row) large enough
// for the lookup tables and the allocator's fresh (not zeroed) pages.
test('large conversions (not zero-filled first, unrolled) equal the JS loops byte for byte', (t) => {
  const [H, W, C] = [517, 1031, 3]
  const HW = H * W
  const next = random(15)
  const pixels = Uint8Array.from({ length: H * W * C }, () => Math.floor(next() * 256))
  const image = Tensor.from(pixels, [H, W, C])
  const mean = [0.485, 0.456, 0.406]
  const std = [0.229, 0.224, 0.225]
  const scale = 1 / 255
  const normalised = new Float32Array(C * HW)
  const planar = new Uint8Array(C * HW)
  for (let c = 0; c < C; c++) {
    for (let p = 0; p < HW; p++) {
      normalised[c * HW + p] = (pixels[p * C + c] * scale - mean[c]) / std[c]
      planar[c * HW + p] = pixels[p * C + c]
    }
  }
  const bytes = (view: ArrayBufferView) => Buffer.from(view.buffer, view.byteOffset, view.byteLength)
  const chw = image.permute(2, 0, 1)
  t.true(bytes(chw.astype('float32', { scale, mean, std, axis: 0 }).data).equals(bytes(normalised)))
  t.true(bytes(chw.contiguous().data).equals(bytes(planar)))
  t.true(bytes(image.astype('float32').data).equals(bytes(new Float32Array(pixels))))
  t.true(bytes(image.astype('float64', { scale }).data).equals(bytes(Float64Array.from(pixels, (x) => x * scale))))
})
