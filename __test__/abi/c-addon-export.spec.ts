// napi-dlpack against the plain C addon, JS -> C: JS tensors exported to C (versioned and legacy),
// zero-copy in both modes, read-only and copy flags, and capsules consumed by one side refused by
// the other.
//
// Runs in both modes: with external ArrayBuffers (zero-copy import of C memory) and with
// NAPI_DLPACK_NO_EXTERNAL_BUFFERS=1 (Electron mode: C memory is copied at import, and the C
// deleter runs right away). JS memory is zero-copy to C in both. The C addon and what these
// specs share: __test__/harness/c-addon.ts.
import test from 'ava'

import {
  CapsuleError,
  ReadOnlyError,
  Tensor,
  fromDLPack,
  isCapsule,
  isCapsuleConsumed,
} from '../../dist/index.js'
import { c, READ_ONLY, IS_COPIED, iota } from '../harness/c-addon.js'
import { throwsCode } from '../harness/helpers.js'

// ---------------------------------------------------------------------------------------------
// JS -> C (JS memory: zero-copy in both modes)

for (const legacy of [false, true]) {
  const tag = legacy ? 'legacy (maxVersion [0, 8])' : 'versioned'
  const exportOptions = legacy ? { maxVersion: [0, 8] as [number, number] } : {}

  test(`JS -> C (${tag}): C sees the tensor's memory and layout, writes go both ways`, (t) => {
    const source = new Float32Array([10, 11, 12, 13, 14, 15])
    const tensor = Tensor.from(source, [2, 3])
    const capsule = tensor.__dlpack__(exportOptions)
    t.true(isCapsule(capsule))
    t.is(c.dataPointer(capsule), tensor.dataPointer)
    const held = c.consume(capsule)
    t.true(isCapsuleConsumed(capsule))
    const info = c.heldInfo(held)
    t.is(info.versioned, !legacy)
    t.deepEqual(info.version, legacy ? null : [1, 3])
    t.is(info.flags, 0)
    t.is(info.ndim, 2)
    t.deepEqual(info.shape, [2, 3])
    t.deepEqual(info.strides, [3, 1])
    t.deepEqual(info.dtype, { code: 2, bits: 32, lanes: 1 })
    t.deepEqual(info.device, [1, 0])
    t.is(info.data + BigInt(info.byteOffset), tensor.dataPointer, 'zero-copy: same address')
    t.deepEqual([...c.heldFloat32(held)], [10, 11, 12, 13, 14, 15])

    c.heldWriteFloat32(held, 4, 42.5)
    t.is(tensor.data[4], 42.5)
    t.is(source[4], 42.5, 'the original TypedArray sees the C write')
    source[1] = -1
    t.is(c.heldFloat32(held)[1], -1, 'C sees JS writes')

    // the capsule keeps the memory alive after the tensor is disposed
    tensor.dispose()
    c.heldWriteFloat32(held, 0, 7)
    t.is(source[0], 7)
    t.true(c.release(held))
  })

  test(`JS -> C (${tag}): strided and negative-stride views keep their layout`, (t) => {
    const source = new Float32Array(iota(12))
    // every other column of a 3x4 matrix, rows reversed
    const tensor = Tensor.from(source, [3, 2], { strides: [-4, 2], offset: 9 })
    t.deepEqual(tensor.toArray(), [[9, 11], [5, 7], [1, 3]])
    const held = c.consume(tensor.__dlpack__(exportOptions))
    const info = c.heldInfo(held)
    t.deepEqual(info.shape, [3, 2])
    t.deepEqual(info.strides, [-4, 2])
    t.is(info.data + BigInt(info.byteOffset), tensor.dataPointer)
    t.deepEqual([...c.heldFloat32(held)], [9, 11, 5, 7, 1, 3])
    c.heldWriteFloat32(held, 5, -30)
    t.is(source[3], -30)
    c.release(held)
  })
}

test('JS -> C: Tensor.empty memory is V8 memory and zero-copy in both modes', (t) => {
  const tensor = Tensor.empty([5], 'float32')
  const held = c.consume(tensor.__dlpack__())
  t.is(c.heldInfo(held).data + BigInt(c.heldInfo(held).byteOffset), tensor.dataPointer)
  c.heldWriteFloat32(held, 3, 8)
  t.deepEqual([...tensor.data], [0, 0, 0, 8, 0])
  c.release(held)
})

test('JS -> C: read-only tensors export READ_ONLY; legacy export refuses them', (t) => {
  const source = new Float32Array([1, 2, 3])
  const tensor = Tensor.from(source, [3], { readonly: true })
  const held = c.consume(tensor.__dlpack__())
  const info = c.heldInfo(held)
  t.is(info.flags & READ_ONLY, READ_ONLY)
  t.is(info.flags & IS_COPIED, 0)
  t.is(info.data + BigInt(info.byteOffset), tensor.dataPointer)
  // the C side honours the flag
  t.throws(() => c.heldWriteFloat32(held, 0, 5), { code: 'ERR_DLPACK_READ_ONLY' } as never)
  c.release(held)
  throwsCode(t, () => tensor.__dlpack__({ maxVersion: [0, 8] }), 'ERR_DLPACK_READ_ONLY', ReadOnlyError)
})

test('JS -> C: copy: true exports a private copy flagged IS_COPIED', (t) => {
  const source = new Float32Array([1, 2, 3, 4, 5, 6])
  const tensor = Tensor.from(source, [3, 2], { strides: [1, 3] })
  const held = c.consume(tensor.__dlpack__({ copy: true }))
  const info = c.heldInfo(held)
  t.is(info.flags & IS_COPIED, IS_COPIED)
  t.is(info.flags & READ_ONLY, 0)
  t.not(info.data + BigInt(info.byteOffset), tensor.dataPointer)
  t.deepEqual(info.shape, [3, 2])
  t.deepEqual(info.strides, [2, 1], 'the copy is row-major')
  t.deepEqual([...c.heldFloat32(held)], [1, 4, 2, 5, 3, 6])
  c.heldWriteFloat32(held, 0, 99)
  t.is(source[0], 1, 'writes to the copy do not reach the original')
  c.release(held)
  // a copy of a read-only tensor is writable
  const ro = Tensor.from(new Float32Array([1]), [1], { readonly: true })
  const heldRo = c.consume(ro.__dlpack__({ copy: true }))
  t.is(c.heldInfo(heldRo).flags, IS_COPIED)
  c.release(heldRo)
})

test('JS -> C -> JS: heldToCapsule sends a JS tensor back, still zero-copy in both modes', (t) => {
  const tensor = Tensor.from(new Float32Array([1, 2, 3]))
  const held = c.consume(tensor.__dlpack__())
  const back = fromDLPack(c.heldToCapsule(held))
  t.false(c.release(held), 'ownership moved to the new capsule')
  t.deepEqual(back.toArray(), [1, 2, 3])
  // napi-dlpack recognises its own export (V8 memory), even after a trip through C
  t.false(back.isCopy)
  t.is(back.dataPointer, tensor.dataPointer)
  back.data[0] = 50
  t.is(tensor.data[0], 50)
  tensor.data[2] = 60
  t.is(back.data[2], 60)
  back.dispose()
  t.deepEqual([...tensor.data], [50, 2, 60])
})

test('JS -> C: a capsule consumed by C cannot be imported by JS, and the other way round', (t) => {
  const tensor = Tensor.from(new Float32Array([1, 2]))
  const capsule = tensor.__dlpack__()
  const held = c.consume(capsule)
  throwsCode(t, () => fromDLPack(capsule), 'ERR_DLPACK_CAPSULE_CONSUMED', CapsuleError)
  c.release(held)
  const capsule2 = tensor.__dlpack__()
  const imported = fromDLPack(capsule2)
  t.throws(() => c.consume(capsule2), { code: 'ERR_DLPACK_CAPSULE_CONSUMED' } as never)
  imported.dispose()
})
