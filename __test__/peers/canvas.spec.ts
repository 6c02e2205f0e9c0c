// napi-dlpack with @napi-rs/canvas: fromDLPack takes an ImageData as it is ({ data, width,
// height }): an HWC [height, width, 4] tensor over its Uint8ClampedArray (pointer identity),
// and a clamped one: writes through the tensor clamp to 0..255 as writes to the ImageData do.
// `t.toImageData()` gives the Uint8ClampedArray view ImageData's constructor insists on. The
// pitfalls are explicit cases: ImageData refuses a Uint8Array with a misleading error, and
// putImageData/getImageData round-trips translucent pixels lossily (premultiplied alpha).
import { createRequire } from 'node:module'

import test from 'ava'

import { DLPackTypeError, Tensor, fromDLPack, type ClampedTensor } from '../../dist/index.js'
import { addressOf, throwsCode } from '../harness/helpers.js'

type Canvas = typeof import('@napi-rs/canvas')
const require = createRequire(import.meta.url)
const { ImageData, createCanvas } = require('@napi-rs/canvas') as Canvas

test('an ImageData is a clamped [height, width, 4] tensor over its pixels', (t) => {
  const image = new ImageData(3, 2)
  const tensor: ClampedTensor = fromDLPack(image)
  t.is(tensor.dtype, 'uint8')
  t.true(tensor.clamped)
  t.deepEqual(tensor.shape, [2, 3, 4])
  t.is(tensor.dataPointer, addressOf(image.data))
  t.true(tensor.data instanceof Uint8ClampedArray)
  tensor.data[0] = 300
  t.is(image.data[0], 255, 'clamped, not wrapped to 44, and seen by the ImageData')
  tensor.data[1] = -5
  t.is(image.data[1], 0)
  image.data[2] = 77
  t.is(tensor.data[2], 77, 'writes to the ImageData are seen by the tensor')
  // the flag survives sharing and copies
  t.true(fromDLPack(tensor).clamped)
  t.true(fromDLPack(tensor, { copy: true }).toTypedArray() instanceof Uint8ClampedArray)
  // DLPack itself has no clamped type: a capsule carries plain uint8
  t.false(fromDLPack(tensor.__dlpack__()).clamped)
})

test('pixels read from a canvas come in the same way', (t) => {
  const canvas = createCanvas(4, 3)
  const context = canvas.getContext('2d')
  context.fillStyle = 'rgb(10, 20, 30)'
  context.fillRect(0, 0, 4, 3)
  const tensor = fromDLPack(context.getImageData(0, 0, 4, 3))
  t.deepEqual(tensor.shape, [3, 4, 4])
  t.deepEqual([...tensor.data.subarray(0, 4)], [10, 20, 30, 255])
})

test('toImageData: a Uint8ClampedArray view that ImageData keeps (zero-copy), drawn by the canvas', (t) => {
  const tensor = Tensor.zeros([2, 2, 4], 'uint8')
  tensor.data.set([255, 0, 0, 255, 0, 255, 0, 255, 0, 0, 255, 255, 9, 9, 9, 255])
  const args = tensor.toImageData()
  t.deepEqual([args.width, args.height, args.channels], [2, 2, 4])
  const image = new ImageData(args.data, args.width, args.height)
  t.is(image.data.buffer, tensor.data.buffer, 'ImageData holds the tensor memory')
  t.is(addressOf(image.data), tensor.dataPointer)
  const canvas = createCanvas(2, 2)
  const context = canvas.getContext('2d')
  context.putImageData(image, 0, 0)
  t.deepEqual([...context.getImageData(1, 1, 1, 1).data], [9, 9, 9, 255])
})

test('pitfall: ImageData refuses a Uint8Array (our plain uint8 data) with a misleading error', (t) => {
  const tensor = Tensor.zeros([1, 1, 4], 'uint8')
  t.throws(() => new ImageData(tensor.data as unknown as Uint8ClampedArray, 1, 1), { message: /ImageDataSettings/ })
  t.notThrows(() => new ImageData(tensor.toImageData().data, 1, 1))
})

test('toImageData of a strided view is a dense copy; non-uint8 is refused', (t) => {
  const tall = Tensor.from(new Uint8Array(4 * 4 * 4).map((_, i) => i), [4, 4, 4])
  const everyOtherRow = fromDLPack({ data: tall.data, shape: [2, 4, 4], strides: [32, 4, 1] })
  const args = everyOtherRow.toImageData()
  t.not(args.data.buffer, tall.data.buffer)
  t.deepEqual([...args.data.subarray(16, 20)], [32, 33, 34, 35], 'row 1 of the view is row 2 of the image')
  throwsCode(t, () => Tensor.zeros([2, 2, 4], 'float32').toImageData(), 'ERR_DLPACK_UNSUPPORTED_DTYPE', DLPackTypeError)
})

test('pitfall: translucent pixels round-trip lossily through the canvas (premultiplied alpha)', (t) => {
  const tensor = Tensor.from(new Uint8ClampedArray([100, 50, 20, 10]), [1, 1, 4])
  const canvas = createCanvas(1, 1)
  const context = canvas.getContext('2d')
  const args = tensor.toImageData()
  context.putImageData(new ImageData(args.data, args.width, args.height), 0, 0)
  const back = fromDLPack(context.getImageData(0, 0, 1, 1))
  t.is(back.data[3], 10, 'alpha is kept')
  t.notDeepEqual([...back.data.subarray(0, 3)], [100, 50, 20], 'colour is not: it was stored premultiplied')
})

test('Tensor.from: clamped follows the array, can be asked for, and is uint8 only', (t) => {
  const fromClamped = Tensor.from(new Uint8ClampedArray(4))
  t.true(fromClamped.clamped)
  t.true(fromClamped.data instanceof Uint8ClampedArray)
  const plain = Tensor.from(new Uint8ClampedArray(4), undefined, { clamped: false })
  t.false(plain.clamped, 'clamped: false gives Uint8Array views')
  t.true(plain.data instanceof Uint8Array)
  const asked = Tensor.from(new Uint8Array(4), [2, 2], { clamped: true })
  t.true(asked.clamped)
  asked.data[0] = 999
  t.is(asked.data[0], 255)
  t.false(Tensor.from(new Uint8Array(4)).clamped)
  throwsCode(t, () => Tensor.from(new Float32Array(4), undefined, { clamped: true }), 'ERR_DLPACK_INVALID_ARGUMENT', DLPackTypeError)
  // reinterpreted as another dtype, clamped bytes are just bytes
  const flags = Tensor.from(new Uint8ClampedArray([1, 0]), undefined, { dtype: 'bool' })
  t.false(flags.clamped)
  t.deepEqual(flags.toArray(), [true, false])
  // ndarray-like objects over a Uint8ClampedArray stay clamped too
  t.true(fromDLPack({ data: new Uint8ClampedArray(6), shape: [2, 3] }).clamped)
})

test('image-like objects whose data is not whole pixels are refused', (t) => {
  const partial = throwsCode(t, () => fromDLPack({ data: new Uint8ClampedArray(10), width: 2, height: 2 }), 'ERR_DLPACK_INVALID_ARGUMENT', DLPackTypeError)
  t.regex(partial.message, /not a whole number of channels/)
  throwsCode(t, () => fromDLPack({ data: new Uint8ClampedArray(12), width: 2, height: 2, channels: 4 }), 'ERR_DLPACK_INVALID_ARGUMENT', DLPackTypeError)
  t.deepEqual(fromDLPack({ data: new Uint8ClampedArray(12), width: 2, height: 2 }).shape, [2, 2, 3], 'channels inferred')
})

test('views and dense copies of a clamped tensor stay clamped (permute, transpose, contiguous)', (t) => {
  const image = fromDLPack(new ImageData(3, 2)) // [2, 3, 4]
  const chw = image.permute(2, 0, 1)
  t.true(chw.clamped)
  t.true(image.transpose(0, 1).clamped)
  const dense = chw.contiguous()
  t.true(dense.clamped)
  t.true(dense.data instanceof Uint8ClampedArray)
  const pixels: Uint8ClampedArray = dense.data
  pixels[0] = 400
  t.is(pixels[0], 255)
})
