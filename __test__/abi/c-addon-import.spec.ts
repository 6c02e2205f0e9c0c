// napi-dlpack against an independent peer, the plain C addon (__test__/native/c-addon: only
// include/napi_dlpack.h and node_api.h), C -> JS: C tensors of every layout imported, zero-copy
// (pointer identity, writes seen on the other side) or copied, read-only and sub-byte flags.
//
// Runs in both modes: with external ArrayBuffers (zero-copy import of C memory) and with
// NAPI_DLPACK_NO_EXTERNAL_BUFFERS=1 (Electron mode: C memory is copied at import, and the C
// deleter runs right away). JS memory is zero-copy to C in both. The C addon and what these
// specs share: __test__/harness/c-addon.ts.
import test from 'ava'

import {
  ReadOnlyError,
  externalBuffersAllowed,
  fromDLPack,
  isCapsule,
  isCapsuleConsumed,
} from '../../dist/index.js'
import { c, type MakeTensorOptions, READ_ONLY, SUBBYTE_PADDED, iota, reshape, dataIndex } from '../harness/c-addon.js'
import { drainGarbage, throwsCode } from '../harness/helpers.js'

const zeroCopy = externalBuffersAllowed()

// ---------------------------------------------------------------------------------------------
// C -> JS

const cLayouts: { name: string; opts: Omit<MakeTensorOptions, 'versioned'>; strides: number[] }[] = [
  { name: 'row-major with byte_offset', opts: { shape: [2, 3], byteOffset: 8 }, strides: [3, 1] },
  { name: 'NULL strides', opts: { shape: [2, 3], strides: null }, strides: [3, 1] },
  { name: 'transposed', opts: { shape: [3, 2], strides: [1, 3] }, strides: [1, 3] },
  { name: 'negative strides', opts: { shape: [2, 3], strides: [-3, -1], byteOffset: 4 }, strides: [-3, -1] },
  { name: 'scalar', opts: { shape: [] }, strides: [] },
]

for (const versioned of [true, false]) {
  const tag = versioned ? 'versioned' : 'legacy'

  for (const { name, opts, strides } of cLayouts) {
    test.serial(`C -> JS (${tag}, ${name}): layout, values, zero-copy or copy, one deleter call`, async (t) => {
      await drainGarbage()
      const before = c.deleterCalls()
      const capsule = c.makeTensor({ ...opts, versioned })
      const cPointer = c.dataPointer(capsule)
      const shape = opts.shape as number[]
      const n = shape.reduce((a, b) => a * b, 1)
      t.true(isCapsule(capsule))
      t.false(isCapsuleConsumed(capsule))

      const tensor = fromDLPack(capsule)
      t.true(isCapsuleConsumed(capsule))
      t.true(c.isConsumed(capsule))
      t.deepEqual(tensor.shape, shape)
      t.deepEqual(tensor.strides, strides)
      t.is(tensor.dtype, 'float32')
      t.deepEqual(tensor.__dlpack_device__(), [1, 0])
      t.is(tensor.numel, n)
      t.is(tensor.readonly, false)
      t.deepEqual(tensor.toArray(), reshape(iota(n), shape))

      if (zeroCopy) {
        t.false(tensor.isCopy)
        t.is(tensor.dataPointer, cPointer, 'same memory as the C producer')
        // Re-exports of host memory fold byte_offset into data (consumers such as torch 1.13
        // ignore byte_offset), so the export this tensor would make carries 0.
        t.is(tensor.byteOffset, 0)
        t.is(c.deleterCalls(), before, 'the producer memory is still in use')
      } else {
        t.true(tensor.isCopy)
        t.not(tensor.dataPointer, cPointer)
        t.is(tensor.byteOffset, 0)
        t.is(c.deleterCalls(), before + 1, 'the copy released the C tensor at import')
      }

      // JS writes element n-1 (C order) through the zero-copy view, then sends the tensor back to C.
      tensor.data[dataIndex(tensor, n - 1)] = 100.5
      const held = c.consume(tensor.__dlpack__())
      const info = c.heldInfo(held)
      t.true(info.versioned)
      t.is(info.ndim, shape.length)
      // a 0-d export may carry shape = NULL (allowed for ndim 0)
      t.deepEqual(info.shape ?? [], shape)
      t.deepEqual(info.strides ?? [], strides)
      t.is(info.data + BigInt(info.byteOffset), tensor.dataPointer)
      if (zeroCopy) {
        t.is(info.data + BigInt(info.byteOffset), cPointer, 'C sees its own memory again')
        // Host re-exports point data at the first element (byte_offset folded in), so consumers
        // that ignore byte_offset still read the right element.
        t.is(info.byteOffset, 0, 're-export folds byte_offset into data')
        t.is(info.data, cPointer)
      }
      t.deepEqual([...c.heldFloat32(held)], [...iota(n - 1), 100.5])
      // ... and C writes element 0, seen by JS
      c.heldWriteFloat32(held, 0, -3)
      t.is(tensor.data[dataIndex(tensor, 0)], -3)
      t.is([tensor.toArray()].flat(4)[0], -3)

      t.is(c.deleterCalls(), zeroCopy ? before : before + 1)
      t.true(c.release(held))
      t.is(c.deleterCalls(), zeroCopy ? before : before + 1, 'the JS tensor still holds the memory')
      tensor.dispose()
      t.is(c.deleterCalls(), before + 1)
      await drainGarbage()
      t.is(c.deleterCalls(), before + 1, 'exactly once')
    })
  }

  test.serial(`C -> JS (${tag}): C writes through a re-export are seen by JS; own exports re-import zero-copy`, (t) => {
    const capsule = c.makeTensor({ shape: [4], versioned })
    const tensor = fromDLPack(capsule)
    // JS -> C -> JS: the C addon consumes a re-export and writes through it
    const held = c.consume(tensor.__dlpack__())
    c.heldWriteFloat32(held, 2, 9)
    t.deepEqual([...tensor.data], [0, 1, 9, 3])
    c.release(held)
    // our own export of it comes back zero-copy in both modes (C memory, or the V8 copy of it)
    const again = fromDLPack(tensor.__dlpack__())
    t.is(again.dataPointer, tensor.dataPointer)
    again.data[3] = 33
    t.is(tensor.data[3], 33)
    again.dispose()
    tensor.dispose()
  })

  test.serial(`C -> JS (${tag}): copy: false`, async (t) => {
    await drainGarbage()
    const before = c.deleterCalls()
    const capsule = c.makeTensor({ shape: [3], versioned })
    if (zeroCopy) {
      const tensor = fromDLPack(capsule, { copy: false })
      t.false(tensor.isCopy)
      t.is(c.deleterCalls(), before)
      tensor.dispose()
    } else {
      throwsCode(t, () => fromDLPack(capsule, { copy: false }), 'ERR_DLPACK_COPY_REQUIRED')
      t.true(isCapsuleConsumed(capsule), 'the capsule was consumed and its tensor released')
    }
    t.is(c.deleterCalls(), before + 1)
  })

  test.serial(`C -> JS (${tag}): copy: true always copies and releases the C tensor at once`, async (t) => {
    await drainGarbage()
    const before = c.deleterCalls()
    const capsule = c.makeTensor({ shape: [2, 2], versioned })
    const pointer = c.dataPointer(capsule)
    const tensor = fromDLPack(capsule, { copy: true })
    t.true(tensor.isCopy)
    t.not(tensor.dataPointer, pointer)
    t.deepEqual(tensor.toArray(), [[0, 1], [2, 3]])
    t.is(c.deleterCalls(), before + 1)
    tensor.dispose()
    t.is(c.deleterCalls(), before + 1)
  })
}

test.serial('C -> JS: a read-only C tensor imports read-only', (t) => {
  const capsule = c.makeTensor({ shape: [3], versioned: true, readonly: true })
  const pointer = c.dataPointer(capsule)
  const tensor = fromDLPack(capsule)
  t.true(tensor.readonly)
  throwsCode(t, () => tensor.data, 'ERR_DLPACK_READ_ONLY', ReadOnlyError)
  const view = tensor.getData({ allowReadOnly: true })
  t.deepEqual([...view], [0, 1, 2])
  t.is(tensor.dataPointer === pointer, zeroCopy)
  // the flag travels on
  const held = c.consume(tensor.__dlpack__())
  t.is(c.heldInfo(held).flags & READ_ONLY, READ_ONLY)
  c.release(held)
  throwsCode(t, () => tensor.__dlpack__({ maxVersion: [0, 8] }), 'ERR_DLPACK_READ_ONLY', ReadOnlyError)
  tensor.dispose()
})

test.serial('C -> JS: fp4 with IS_SUBBYTE_TYPE_PADDED is accepted', async (t) => {
  await drainGarbage()
  const before = c.deleterCalls()
  const capsule = c.makeTensor({
    shape: [4],
    versioned: true,
    dtype: { code: 17, bits: 4, lanes: 1 },
    flags: SUBBYTE_PADDED,
  })
  const tensor = fromDLPack(capsule)
  t.is(tensor.dtype, 'float4_e2m1fn')
  t.deepEqual(tensor.shape, [4])
  t.deepEqual([...tensor.getData({ allowReadOnly: true })], [0, 1, 2, 3])
  tensor.dispose()
  t.is(c.deleterCalls(), before + 1)
})
