// napi-dlpack with @huggingface/transformers (transformers.js; no model is downloaded: only its
// Tensor and RawImage classes are used). Its Tensor wraps an onnxruntime-common tensor ({ data,
// dims, type, location }), so fromDLPack takes it as it is, zero-copy; `new Tensor(...t.toOrt())`
// goes back without a copy. RawImage ({ data, width, height, channels }) comes in as a clamped HWC
// tensor, and takes our bytes as they are.
import test from 'ava'
import { RawImage, Tensor as HfTensor } from '@huggingface/transformers'

import { Tensor, fromDLPack } from '../../dist/index.js'
import { addressOf } from '../harness/helpers.js'

test('a transformers.js Tensor is imported zero-copy; writes are seen both ways', (t) => {
  const values = new Float32Array([1, 2, 3, 4, 5, 6])
  const hf = new HfTensor('float32', values, [2, 3])
  const tensor = fromDLPack(hf)
  t.deepEqual(tensor.shape, [2, 3])
  t.is(tensor.dtype, 'float32')
  t.is(tensor.dataPointer, addressOf(values))
  tensor.data[0] = 10
  t.is((hf.data as Float32Array)[0], 10)
  ;(hf.data as Float32Array)[5] = 60
  t.is(tensor.data[5], 60)
})

test('int64 and bool transformers.js tensors keep their dtype', (t) => {
  const ids = new HfTensor('int64', new BigInt64Array([101n, 2023n, 102n]), [1, 3])
  const tensor = fromDLPack(ids)
  t.is(tensor.dtype, 'int64')
  t.deepEqual(tensor.toArray(), [[101n, 2023n, 102n]])
  const mask = new HfTensor('bool', new Uint8Array([1, 0]), [2])
  t.is(fromDLPack(mask).dtype, 'bool', 'not uint8: the label comes from the tensor type')
})

test('back: new Tensor(...t.toOrt()) holds our memory and computes on it', (t) => {
  const tensor = Tensor.from(new Float32Array([3, 1, 2]), [1, 3])
  const hf = new HfTensor(...tensor.toOrt())
  t.is(hf.data, tensor.data, 'the same TypedArray')
  t.deepEqual(hf.dims, [1, 3])
  tensor.data[1] = 9
  t.deepEqual(hf.tolist(), [[3, 9, 2]])
  // a bool tensor goes back labelled bool
  const flags = Tensor.from(new Uint8Array([1, 0]), [2], { dtype: 'bool' })
  t.is(new HfTensor(...flags.toOrt()).type, 'bool')
})

test('RawImage comes in as a clamped [height, width, channels] tensor over its pixels', (t) => {
  const image = new RawImage(new Uint8ClampedArray(2 * 3 * 3).fill(5), 3, 2, 3)
  const tensor = fromDLPack(image)
  t.deepEqual(tensor.shape, [2, 3, 3])
  t.true(tensor.clamped)
  t.is(tensor.dataPointer, addressOf(image.data))
  tensor.data[0] = 1000
  t.is(image.data[0], 255)
})

test('RawImage accepts our bytes as they are, zero-copy (toImageData gives RGBA)', (t) => {
  const tensor = Tensor.from(new Uint8Array(2 * 2 * 3).map((_, i) => i * 10), [2, 2, 3])
  const image = new RawImage(tensor.data, 2, 2, 3)
  t.is(addressOf(image.data), tensor.dataPointer)
  t.is(image.channels, 3)
  const grey = image.grayscale()
  t.deepEqual(grey.size, [2, 2])
  // toImageData widens RGB to RGBA (what ImageData holds): a 4-channel RawImage of a copy.
  const args = tensor.toImageData()
  const rgba = new RawImage(args.data, args.width, args.height, args.channels)
  t.is(rgba.channels, 4)
  t.deepEqual([...rgba.data.slice(0, 4)], [0, 10, 20, 255])
})
