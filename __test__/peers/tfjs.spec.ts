// napi-dlpack with TensorFlow.js (@tensorflow/tfjs, its pure-JS CPU backend): fromDLPack takes a
// tf.Tensor as it is. The CPU backend computes in, and hands out, one TypedArray per tensor, so
// the import is a view of it (pointer identity). tfjs treats tensors as immutable and shares that
// array between tensors (reshape, clone): the import is read-only unless `writable: true`, and
// the pitfall (a write silently changes every tf tensor over the memory) is a case below. Where
// dataSync() builds a new array each call (bool, complex64) no view exists: copy: true copies.
// The other direction, tf.tensor(t.data, t.shape), keeps our array for float32/int32.
import { createRequire } from 'node:module'

import test from 'ava'

import { BufferError, DLPackTypeError, ReadOnlyError, Tensor, TensorDisposedError, fromDLPack } from '../../dist/index.js'
import { addressOf, throwsCode } from '../harness/helpers.js'

type Tf = typeof import('@tensorflow/tfjs')
const require = createRequire(import.meta.url)
const tf = require('@tensorflow/tfjs') as Tf

test.before(async () => {
  await tf.setBackend('cpu')
})

test('a float32 tf.Tensor is imported zero-copy and read-only by default', (t) => {
  const values = new Float32Array([1, 2, 3, 4, 5, 6])
  const x = tf.tensor(values, [2, 3])
  t.is(x.dataSync(), values, 'the CPU backend keeps the caller array')
  const tensor = fromDLPack(x)
  t.is(tensor.dtype, 'float32')
  t.deepEqual(tensor.shape, [2, 3])
  t.is(tensor.dataPointer, addressOf(values))
  t.true(tensor.readonly)
  throwsCode(t, () => tensor.data, 'ERR_DLPACK_READ_ONLY', ReadOnlyError)
  const view = tensor.getData({ allowReadOnly: true })
  values[0] = 10
  t.is(view[0], 10, 'tf-side writes are seen')
})

test('pitfall: writing into a tf tensor silently changes every tf tensor sharing its array (opt in with writable)', (t) => {
  const x = tf.tensor(new Float32Array([1, 2, 3, 4]), [4])
  const reshaped = x.reshape([2, 2]) // shares x's array
  const tensor = fromDLPack(x, { writable: true })
  t.false(tensor.readonly)
  tensor.data[0] = 100
  t.is(x.dataSync()[0], 100, 'x changed')
  t.is(reshaped.dataSync()[0], 100, 'and so did the "immutable" reshaped tensor')
  t.deepEqual(tf.sum(x).dataSync()[0], 109, 'tf computes with the written value')
})

test('int32 results of tf ops are views too; the tensor outlives tf.dispose', (t) => {
  const y = tf.add(tf.tensor([1, 2, 3], [3], 'int32'), tf.scalar(1, 'int32'))
  const data = y.dataSync()
  const tensor = fromDLPack(y)
  t.is(tensor.dtype, 'int32')
  t.is(tensor.dataPointer, addressOf(data))
  y.dispose()
  // tfjs dropped its reference; ours keeps the array alive.
  t.deepEqual([...tensor.getData({ allowReadOnly: true })], [2, 3, 4])
})

test('bool and complex64 have no view (dataSync copies): COPY_REQUIRED unless copy: true', (t) => {
  const flags = tf.tensor([true, false, true], [3], 'bool')
  throwsCode(t, () => fromDLPack(flags), 'ERR_DLPACK_COPY_REQUIRED', BufferError)
  const bools = fromDLPack(flags, { copy: true })
  t.is(bools.dtype, 'bool')
  t.deepEqual(bools.toArray(), [true, false, true])
  t.false(bools.readonly, 'a copy is ours to write')

  const complex = tf.complex([1, 2], [3, 4])
  throwsCode(t, () => fromDLPack(complex), 'ERR_DLPACK_COPY_REQUIRED', BufferError)
  t.deepEqual(fromDLPack(complex, { copy: true }).toArray(), [
    [1, 3],
    [2, 4],
  ])
})

test('a disposed tf tensor is refused', (t) => {
  const x = tf.tensor([1, 2])
  x.dispose()
  throwsCode(t, () => fromDLPack(x), 'ERR_TENSOR_DISPOSED', TensorDisposedError)
})

test('back to tfjs: tf.tensor(t.data, t.shape) keeps our memory for float32 and int32', (t) => {
  const tensor = Tensor.from(new Float32Array([1, 2, 3, 4]), [2, 2])
  const x = tf.tensor(tensor.data, tensor.shape.slice())
  t.is(x.dataSync(), tensor.data, 'same array')
  tensor.data[3] = 40
  t.is(tf.max(x).dataSync()[0], 40, 'tf computes on our memory')

  const ints = Tensor.from(new Int32Array([5, 6]))
  t.is(tf.tensor(ints.data, [2], 'int32').dataSync(), ints.data)
})

test('pitfalls back to tfjs: uint8 becomes an int32 copy, 64-bit integers are refused', (t) => {
  const bytes = Tensor.from(new Uint8Array([1, 2]))
  const x = tf.tensor(bytes.data)
  t.is(x.dtype, 'int32')
  t.not(x.dataSync().buffer, bytes.data.buffer, 'a copy')
  t.throws(() => tf.tensor(Tensor.from(new BigInt64Array([1n])).data as unknown as Float32Array))
})

test('copy: true gives a writable copy that leaves the tf tensor alone', (t) => {
  const values = new Float32Array([1, 2])
  const x = tf.tensor(values)
  const copy = fromDLPack(x, { copy: true })
  t.true(copy.isCopy)
  t.false(copy.readonly)
  t.not(copy.dataPointer, addressOf(values))
  copy.data[0] = 50
  t.is(x.dataSync()[0], 1)
})

test('string tf tensors are refused with ERR_DLPACK_UNSUPPORTED_DTYPE', (t) => {
  throwsCode(t, () => fromDLPack(tf.tensor(['a', 'b'])), 'ERR_DLPACK_UNSUPPORTED_DTYPE', DLPackTypeError)
})
