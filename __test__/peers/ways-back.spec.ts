// The ways back from a Tensor to a library (lib/interop/to-library.ts): each gives the library dense
// row-major data, so a strided view (a transpose, a slice, a negative stride) comes out with the
// right elements or is refused with a code, never read as the wrong ones. Each test below failed
// before its fix: `tf.tensor(t.data, t.shape)` (the old way back) read a transposed tensor's
// memory order; `toImageData()` of RGB gave 3-channel data ImageData refuses; a non-dense
// `fetches` output made ORT write into a copy, losing the results.
import { createRequire } from 'node:module'

import test from 'ava'
import * as ort from 'onnxruntime-node'
import sharp from 'sharp'

import { BufferError, DLPackTypeError, ReadOnlyError, Tensor } from '../../dist/index.js'
import { addressOf, throwsCode } from '../harness/helpers.js'
import { onnxModel } from '../harness/onnx-model.mjs'

type Tf = typeof import('@tensorflow/tfjs')
type Canvas = typeof import('@napi-rs/canvas')
const require = createRequire(import.meta.url)
const tf = require('@tensorflow/tfjs') as Tf
const { ImageData } = require('@napi-rs/canvas') as Canvas

test.before(async () => {
  await tf.setBackend('cpu')
})

// ---------------------------------------------------------------------------------------------
// tfjs

test('toTf: tf.tensor(...t.toTf()) of a strided view has the view\'s elements (t.data would not)', (t) => {
  const x = Tensor.from(new Float32Array([0, 1, 2, 3, 4, 5]), [2, 3])
  const xt = x.transpose(0, 1) // [[0, 3], [1, 4], [2, 5]]
  const wrong = tf.tensor(xt.data, xt.shape as number[])
  t.notDeepEqual(wrong.arraySync(), xt.toArray(), 'the old way back reads memory order')
  const back = tf.tensor(...xt.toTf())
  t.deepEqual(back.arraySync(), xt.toArray())
  t.is(back.dtype, 'float32')
  const reversed = x.slice(1, null, null, -1)
  t.deepEqual(tf.tensor(...reversed.toTf()).arraySync(), reversed.toArray())
})

test('toTf: dense float32/int32/bool keep the memory; small integers widen to int32; others are refused', (t) => {
  const dense = Tensor.from(new Int32Array([1, -2, 3]))
  const [values, shape, dtype] = dense.toTf()
  t.is(addressOf(values), dense.dataPointer, 'zero-copy for a dense tensor')
  t.deepEqual([shape, dtype], [[3], 'int32'])
  const bytes = Tensor.from(new Uint8Array([0, 200, 255]), [3])
  const widened = tf.tensor(...bytes.toTf())
  t.deepEqual([widened.dtype, widened.arraySync()], ['int32', [0, 200, 255]])
  const flags = Tensor.from(new Uint8Array([1, 0]), [2], { dtype: 'bool' })
  t.deepEqual(tf.tensor(...flags.toTf()).arraySync(), [1, 0])
  for (const dtype of ['float64', 'int64', 'uint32', 'float16'] as const) {
    throwsCode(t, () => Tensor.zeros([2], dtype).toTf(), 'ERR_DLPACK_UNSUPPORTED_DTYPE', DLPackTypeError, dtype)
  }
})

// ---------------------------------------------------------------------------------------------
// sharp

test('toSharp: sharp(...t.toSharp()) of a permuted or flipped view encodes the view\'s pixels', async (t) => {
  // A 2x3 RGB image stored CHW, viewed as HWC and flipped left-right.
  const chw = Tensor.from(new Uint8Array(18).map((_, i) => i * 10), [3, 2, 3])
  const view = chw.permute(1, 2, 0).slice(1, null, null, -1)
  const { data, info } = await sharp(...view.toSharp()).raw().toBuffer({ resolveWithObject: true })
  t.deepEqual([info.width, info.height, info.channels], [3, 2, 3])
  t.deepEqual([...data], [...view.toTypedArray()])
  // Dense: sharp gets this tensor's memory.
  const dense = Tensor.from(new Uint8Array(2 * 2 * 4), [2, 2, 4])
  t.is(addressOf(dense.toSharp()[0]), dense.dataPointer)
  t.deepEqual(dense.toSharp()[1], { raw: { width: 2, height: 2, channels: 4 } })
  throwsCode(t, () => Tensor.zeros([2, 2, 5], 'uint8').toSharp(), 'ERR_DLPACK_INVALID_ARGUMENT', DLPackTypeError)
  throwsCode(t, () => Tensor.zeros([2, 2, 3], 'bool').toSharp(), 'ERR_DLPACK_UNSUPPORTED_DTYPE', DLPackTypeError)
})

test('toSharp: 16-bit pixels keep their depth (the TypedArray type tells sharp)', async (t) => {
  const grey = Tensor.from(new Uint16Array([0, 1000, 65535, 7, 9, 9]), [2, 3]).slice(1, 0, 2)
  const { data, info } = await sharp(...grey.toSharp()).toColourspace('grey16').raw({ depth: 'ushort' }).toBuffer({ resolveWithObject: true })
  t.deepEqual([info.width, info.height, info.channels], [2, 2, 1])
  t.deepEqual([...new Uint16Array(data.buffer, data.byteOffset, data.length / 2)], [0, 1000, 7, 9])
})

// ---------------------------------------------------------------------------------------------
// ImageData

test('toImageData of RGB adds an opaque alpha channel: new ImageData accepts it', (t) => {
  const rgb = Tensor.from(new Uint8Array([1, 2, 3, 4, 5, 6]), [1, 2, 3])
  const args = rgb.toImageData()
  t.is(args.channels, 4)
  const image = new ImageData(args.data, args.width, args.height)
  t.deepEqual([...image.data], [1, 2, 3, 255, 4, 5, 6, 255])
  // Grey and grey + alpha widen the same way; RGBA stays zero-copy.
  t.deepEqual([...Tensor.from(new Uint8Array([7, 8]), [1, 2]).toImageData().data], [7, 7, 7, 255, 8, 8, 8, 255])
  t.deepEqual([...Tensor.from(new Uint8Array([7, 100]), [1, 1, 2]).toImageData().data], [7, 7, 7, 100])
  const rgba = Tensor.from(new Uint8Array(8), [1, 2, 4])
  t.is(addressOf(rgba.toImageData().data), rgba.dataPointer)
  // A strided RGB view widens from the view's own pixels.
  const bgr = rgb.slice(2, null, null, -1)
  t.deepEqual([...bgr.toImageData().data], [3, 2, 1, 255, 6, 5, 4, 255])
  throwsCode(t, () => Tensor.zeros([1, 1, 5], 'uint8').toImageData(), 'ERR_DLPACK_INVALID_ARGUMENT', DLPackTypeError)
})

// ---------------------------------------------------------------------------------------------
// ONNX Runtime fetches

// z = x * y + x   (element-wise, any length n)
const mulAdd = onnxModel(
  [
    { op: 'Mul', inputs: ['x', 'y'], outputs: ['xy'] },
    { op: 'Add', inputs: ['xy', 'x'], outputs: ['z'] },
  ],
  [
    ['x', ['n']],
    ['y', ['n']],
  ],
  [['z', ['n']]],
)

test('toOrt({ output: true }): a fetches output ORT cannot write in place is refused with a code', async (t) => {
  const session = await ort.InferenceSession.create(mulAdd)
  const x = Tensor.from(new Float32Array([1, 2, 3]))
  const feeds = { x: new ort.Tensor(...x.toOrt()), y: new ort.Tensor(...x.toOrt()) }
  // A dense output: ORT writes into our memory.
  const z = Tensor.empty([3], 'float32')
  await session.run(feeds, { z: new ort.Tensor(...z.toOrt({ output: true })) })
  t.deepEqual([...z.data], [2, 6, 12])
  // Every other element of a buffer: without `output`, toOrt hands ORT a copy and the results
  // never reach the tensor; with it, the call is refused.
  const strided = Tensor.zeros([6], 'float32').slice(0, null, null, 2)
  await session.run(feeds, { z: new ort.Tensor(...strided.toOrt()) })
  t.deepEqual(strided.toArray(), [0, 0, 0], 'the copy took the results')
  throwsCode(t, () => strided.toOrt({ output: true }), 'ERR_DLPACK_NOT_CONTIGUOUS', BufferError)
  const frozen = Tensor.from(new Float32Array(3), [3], { readonly: true })
  throwsCode(t, () => frozen.toOrt({ output: true, allowReadOnly: true }), 'ERR_DLPACK_READ_ONLY', ReadOnlyError)
  // A contiguous view is dense: accepted, and written.
  const rows = Tensor.zeros([2, 3], 'float32')
  await session.run(feeds, { z: new ort.Tensor(...rows.select(0, 1).toOrt({ output: true })) })
  t.deepEqual(rows.toArray(), [
    [0, 0, 0],
    [2, 6, 12],
  ])
})
