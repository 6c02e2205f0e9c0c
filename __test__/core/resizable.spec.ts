// Resizable ArrayBuffers and growable SharedArrayBuffers under tensors (issue 26, item 1).
//
// Policy: memory of a resizable ArrayBuffer is copied when a tensor is made of it (`isCopy`),
// because `resize()` to a smaller length takes the pages past the new length away in place and
// nothing can pin the length: a kept pointer (a tensor, a capsule, an export, a typed argument)
// then faulted (a segfault in Node, Bun and Deno) or read zeros. `copy: false` refuses it with
// ERR_DLPACK_COPY_REQUIRED. A growable SharedArrayBuffer cannot shrink and grows in place, so it
// is shared zero-copy, and growing it under a live tensor changes nothing the tensor sees.
//
// Every test is skipped where the runtime has no resizable buffers (feature-detected).

import test from 'ava'
import * as ort from 'onnxruntime-node'

import { Tensor, fromDLPack } from '../../dist/index.js'
import { addressOf, codeOf, throwsCode, nativeFixture } from '../harness/helpers.js'

const canResize = typeof (ArrayBuffer.prototype as { resize?: unknown }).resize === 'function'
const canGrow = typeof SharedArrayBuffer === 'function' && typeof (SharedArrayBuffer.prototype as { grow?: unknown }).grow === 'function'
const resizeTest = canResize ? test : test.skip
const growTest = canGrow ? test : test.skip

interface ResizableBuffer extends ArrayBuffer {
  resize(length: number): void
  readonly resizable: boolean
}
interface GrowableBuffer extends SharedArrayBuffer {
  grow(length: number): void
}

const resizable = (length: number, max: number) =>
  new (ArrayBuffer as unknown as new (length: number, options: { maxByteLength: number }) => ResizableBuffer)(length, { maxByteLength: max })
const growable = (length: number, max: number) =>
  new (SharedArrayBuffer as unknown as new (length: number, options: { maxByteLength: number }) => GrowableBuffer)(length, { maxByteLength: max })

/** A float32 view of a resizable buffer holding 1, 2, ..., n (length-tracking: no length given). */
function counting(n: number, max = 1 << 22): { buffer: ResizableBuffer; view: Float32Array } {
  const buffer = resizable(n * 4, max)
  const view = new Float32Array(buffer)
  for (let i = 0; i < n; i++) view[i] = i + 1
  return { buffer, view }
}

const range = (n: number) => Array.from({ length: n }, (_, i) => i + 1)

const addon = nativeFixture<typeof import('../../examples/consumer-addon/index.js')>('consumer-addon', 'consumer_addon.node').addon

resizeTest('a tensor of a resizable ArrayBuffer is a copy: shrinking the buffer to 0 leaves every use of it valid', (t) => {
  const { buffer, view } = counting(1 << 18)
  const tensor = Tensor.from(view)
  t.true(tensor.isCopy)
  t.deepEqual(tensor.shape, [1 << 18])
  // Exported before the shrink: a capsule, a copy, a view; all read after it.
  const capsule = tensor.__dlpack__()
  const data = tensor.data
  buffer.resize(0)
  t.is(view.length, 0)
  const values = tensor.toTypedArray()
  t.is(values.length, 1 << 18)
  t.is(values[0], 1)
  t.is(values[(1 << 18) - 1], 1 << 18)
  t.is(data[12345], 12346)
  t.is(tensor.data[(1 << 18) - 1], 1 << 18)
  t.is(tensor.astype('float64').toTypedArray()[7], 8)
  t.is(tensor.contiguous().toTypedArray()[9], 10)
  t.is(fromDLPack(tensor, { copy: true }).toTypedArray()[11], 12)
  const imported = fromDLPack(capsule)
  t.is(imported.toTypedArray()[13], 14)
  t.is(tensor.toShared().toTypedArray()[15], 16)
  imported.dispose()
  tensor.dispose()
})

resizeTest('a small shrink (and regrowth) does not change what the tensor holds; .data never throws a RangeError', (t) => {
  const { buffer, view } = counting(4, 64)
  const tensor = Tensor.from(view)
  const data = tensor.data
  buffer.resize(8)
  t.deepEqual([...tensor.toTypedArray()], [1, 2, 3, 4])
  buffer.resize(16)
  t.deepEqual([...tensor.toTypedArray()], [1, 2, 3, 4])
  buffer.resize(0)
  t.deepEqual([...tensor.data], [1, 2, 3, 4])
  t.is(tensor.data, data, 'the cached view is still the one of the copy')
  // Writes go to the copy, not to the buffer (isCopy: later writes are not shared either way).
  buffer.resize(16)
  tensor.data[0] = 42
  t.is(new Float32Array(buffer)[0], 0)
})

resizeTest('fixed-length views, bare ArrayBuffers and offsets into a resizable buffer are copied too', (t) => {
  const { buffer } = counting(8)
  const fixed = Tensor.from(new Float32Array(buffer, 8, 4))
  const bytes = Tensor.from(buffer)
  const strided = Tensor.from(new Float32Array(buffer), [3], { strides: [2], offset: 1 })
  for (const tensor of [fixed, bytes, strided]) t.true(tensor.isCopy)
  buffer.resize(0)
  t.deepEqual([...fixed.toTypedArray()], [3, 4, 5, 6])
  t.is(bytes.numel, 32)
  t.deepEqual([...new Float32Array(bytes.toTypedArray().buffer)], range(8))
  t.deepEqual([...strided.toTypedArray()], [2, 4, 6])
})

resizeTest('fromDLPack: copies a resizable buffer when allowed, refuses it with copy: false', (t) => {
  const { buffer, view } = counting(6)
  const copied = fromDLPack(view)
  t.true(copied.isCopy)
  throwsCode(t, () => fromDLPack(view, { copy: false }), 'ERR_DLPACK_COPY_REQUIRED')
  throwsCode(t, () => fromDLPack(buffer, { copy: false }), 'ERR_DLPACK_COPY_REQUIRED')
  throwsCode(t, () => fromDLPack({ data: view, shape: [2, 3] }, { copy: false }), 'ERR_DLPACK_COPY_REQUIRED')
  buffer.resize(0)
  t.deepEqual([...copied.toTypedArray()], range(6))
})

resizeTest('a typed addon argument whose __dlpack__ shrinks the buffer reads the values it was given', (t) => {
  const { buffer, view } = counting(4)
  const shrinking = {
    __dlpack__() {
      const capsule = Tensor.from(view).__dlpack__()
      buffer.resize(0)
      return capsule
    },
  }
  const target = Tensor.from(new Float32Array(4))
  t.deepEqual(addon.addInto(target, shrinking as never), [1, 2, 3, 4])
  // The same through an owned argument, read after the call on another thread.
  buffer.resize(16)
  new Float32Array(buffer).set([1, 2, 3, 4])
  return addon.sumAsync(shrinking as never).then((sum) => t.is(sum, 10))
})

resizeTest('library objects over a resizable buffer: copied by fromDLPack, refused as typed arguments', (t) => {
  const { buffer, view } = counting(4)
  const ortTensor = new ort.Tensor('float32', view, [2, 2])
  const imported = fromDLPack(ortTensor)
  t.true(imported.isCopy)
  throwsCode(t, () => fromDLPack(ortTensor, { copy: false }), 'ERR_DLPACK_COPY_REQUIRED')
  // A typed argument is the library's own memory (the addon may write it): no silent copy.
  t.is(codeOf(() => addon.inspect(ortTensor as never)), 'ERR_DLPACK_COPY_REQUIRED')
  buffer.resize(0)
  t.deepEqual([...imported.toTypedArray()], [1, 2, 3, 4])
})

growTest('a growable SharedArrayBuffer is shared zero-copy; growing it under live tensors and capsules changes nothing', (t) => {
  const buffer = growable(16, 1 << 22)
  const view = new Float32Array(buffer) // length-tracking
  view.set([1, 2, 3, 4])
  const tensor = Tensor.from(view)
  t.false(tensor.isCopy)
  t.is(tensor.dataPointer, addressOf(view))
  const capsule = tensor.__dlpack__()
  buffer.grow(1 << 22)
  t.is(view.length, 1 << 20)
  t.deepEqual(tensor.shape, [4], 'the shape is the one the view had when wrapped')
  view[1] = 20
  t.deepEqual([...tensor.toTypedArray()], [1, 20, 3, 4])
  const imported = fromDLPack(capsule)
  t.is(imported.dataPointer, tensor.dataPointer)
  imported.data[2] = 30
  t.is(view[2], 30)
  t.is(fromDLPack(view, { copy: false }).numel, 1 << 20)
  imported.dispose()
  tensor.dispose()
})
