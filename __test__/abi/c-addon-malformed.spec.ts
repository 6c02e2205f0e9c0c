// napi-dlpack against the plain C addon: malformed C tensors are each rejected with a stable code
// and their deleter called exactly once; values that are not capsules are refused.
//
// Runs in both modes: with external ArrayBuffers (zero-copy import of C memory) and with
// NAPI_DLPACK_NO_EXTERNAL_BUFFERS=1 (Electron mode: C memory is copied at import, and the C
// deleter runs right away). JS memory is zero-copy to C in both. The C addon and what these
// specs share: __test__/harness/c-addon.ts.
import test from 'ava'

import {
  BufferError,
  CapsuleError,
  DLPackTypeError,
  InvalidTensorError,
  fromDLPack,
  isCapsule,
  isCapsuleConsumed,
} from '../../dist/index.js'
import { c, type MakeTensorOptions } from '../harness/c-addon.js'
import { drainGarbage, throwsCode } from '../harness/helpers.js'

// ---------------------------------------------------------------------------------------------
// Malformed tensors from C: each rejected with its code, deleter called exactly once

const malformed: { name: string; opts: MakeTensorOptions; code: string }[] = [
  { name: 'major version 2', opts: { shape: [2], versioned: true, version: [2, 0] }, code: 'ERR_DLPACK_VERSION' },
  { name: 'major version 0', opts: { shape: [2], versioned: true, version: [0, 9] }, code: 'ERR_DLPACK_VERSION' },
  { name: 'ndim -1', opts: { shape: [], versioned: true, ndim: -1 }, code: 'ERR_DLPACK_NDIM' },
  { name: 'ndim 65', opts: { shape: [], versioned: true, ndim: 65 }, code: 'ERR_DLPACK_NDIM' },
  { name: 'ndim 65 (legacy)', opts: { shape: [], versioned: false, ndim: 65 }, code: 'ERR_DLPACK_NDIM' },
  { name: 'NULL shape, ndim 2', opts: { shape: [2, 2], versioned: true, nullShape: true }, code: 'ERR_DLPACK_NULL_SHAPE' },
  { name: 'negative dim', opts: { shape: [3, -1], versioned: true }, code: 'ERR_DLPACK_SHAPE' },
  { name: 'NULL data with elements', opts: { shape: [2, 2], versioned: true, nullData: true }, code: 'ERR_DLPACK_NULL_DATA' },
  { name: 'NULL data with elements (legacy)', opts: { shape: [1], versioned: false, nullData: true }, code: 'ERR_DLPACK_NULL_DATA' },
  { name: 'lanes 4', opts: { shape: [2], versioned: true, dtype: { code: 2, bits: 32, lanes: 4 } }, code: 'ERR_DLPACK_DTYPE' },
  { name: 'bool of 1 bit', opts: { shape: [2], versioned: true, dtype: { code: 6, bits: 1, lanes: 1 } }, code: 'ERR_DLPACK_DTYPE' },
  { name: 'float of 24 bits', opts: { shape: [2], versioned: true, dtype: { code: 2, bits: 24, lanes: 1 } }, code: 'ERR_DLPACK_DTYPE' },
  { name: 'unknown type code 99', opts: { shape: [2], versioned: true, dtype: { code: 99, bits: 32, lanes: 1 } }, code: 'ERR_DLPACK_DTYPE' },
  {
    name: 'fp4 without IS_SUBBYTE_TYPE_PADDED',
    opts: { shape: [2], versioned: true, dtype: { code: 17, bits: 4, lanes: 1 } },
    code: 'ERR_DLPACK_DTYPE',
  },
  {
    name: 'fp4 in a legacy tensor (no flags at all)',
    opts: { shape: [2], versioned: false, dtype: { code: 17, bits: 4, lanes: 1 } },
    code: 'ERR_DLPACK_DTYPE',
  },
  { name: 'unknown device type 5', opts: { shape: [2], versioned: true, device: [5, 0] }, code: 'ERR_DLPACK_DEVICE' },
  { name: 'negative device id', opts: { shape: [2], versioned: true, device: [1, -1] }, code: 'ERR_DLPACK_DEVICE' },
  {
    // 2^62 * 2^62 overflows before the zero dimension is reached
    name: 'huge shape overflowing the element count',
    opts: { shape: [2n ** 62n, 2n ** 62n, 0], strides: [0, 0, 1], versioned: true },
    code: 'ERR_DLPACK_OVERFLOW',
  },
  {
    // data = NULL, byte_offset 0 and a negative stride: the lowest element would sit below
    // address 0. (The fixture caps byteOffset at 2^30, so data + byte_offset itself cannot wrap.)
    name: 'lowest element address below 0',
    opts: { shape: [2], strides: [-1], versioned: true, nullData: true },
    code: 'ERR_DLPACK_BYTE_OFFSET',
  },
]

for (const { name, opts, code } of malformed) {
  test.serial(`malformed C tensor: ${name} -> ${code}, deleter once`, async (t) => {
    await drainGarbage()
    const before = c.deleterCalls()
    const capsule = c.makeTensor(opts)
    // ERR_DLPACK_DEVICE is shared with "cannot export to that device", so lib/errors.ts maps
    // it to BufferError even when it reports an invalid imported tensor.
    const Class = code === 'ERR_DLPACK_DEVICE' ? BufferError : InvalidTensorError
    throwsCode(t, () => fromDLPack(capsule), code, Class)
    t.is(c.deleterCalls(), before + 1, 'the deleter ran at the throw')
    t.true(c.isConsumed(capsule))
    await drainGarbage()
    t.is(c.deleterCalls(), before + 1, 'and never again')
  })
}

test.serial('malformed C tensor: rejected the same with copy: true and copy: false', async (t) => {
  await drainGarbage()
  const before = c.deleterCalls()
  throwsCode(t, () => fromDLPack(c.makeTensor({ shape: [-1], versioned: true }), { copy: true }), 'ERR_DLPACK_SHAPE')
  throwsCode(t, () => fromDLPack(c.makeTensor({ shape: [-1], versioned: true }), { copy: false }), 'ERR_DLPACK_SHAPE')
  t.is(c.deleterCalls(), before + 2)
})

// ---------------------------------------------------------------------------------------------
// Things that are not capsules

test('fromDLPack of non-capsules throws DLPackTypeError ERR_DLPACK_INVALID_ARGUMENT', (t) => {
  for (const value of [{}, 1, 'capsule', null, undefined, true, 1n, Symbol('s'), () => {}, { data: 1, shape: [1] }]) {
    throwsCode(t, () => fromDLPack(value as never), 'ERR_DLPACK_INVALID_ARGUMENT', DLPackTypeError, String(typeof value))
  }
})

test.serial('fromDLPack of a C "held" External (not a capsule)', (t) => {
  const held = c.consume(c.makeTensor({ shape: [1], versioned: true }))
  t.false(isCapsule(held))
  // An External can only be meant as a capsule: one that is not is ERR_DLPACK_NOT_A_CAPSULE,
  // as when __dlpack__ returns it (docs/protocol.md §1.3).
  throwsCode(t, () => fromDLPack(held as never), 'ERR_DLPACK_NOT_A_CAPSULE', CapsuleError)
  // isCapsuleConsumed asks the capsule ABI, which says what it is not.
  throwsCode(t, () => isCapsuleConsumed(held as never), 'ERR_DLPACK_NOT_A_CAPSULE', CapsuleError)
  t.true(c.release(held), 'the failed imports did not touch the held tensor')
})

test('an object whose __dlpack__ returns a C held External is rejected with ERR_DLPACK_NOT_A_CAPSULE', (t) => {
  const held = c.consume(c.makeTensor({ shape: [1], versioned: true }))
  throwsCode(t, () => fromDLPack({ __dlpack__: () => held } as never), 'ERR_DLPACK_NOT_A_CAPSULE', CapsuleError)
  c.release(held)
})

test('an object whose __dlpack__ returns a C capsule imports it', (t) => {
  const producer = { __dlpack__: () => c.makeTensor({ shape: [2], versioned: true }), __dlpack_device__: () => [1, 0] as const }
  const tensor = fromDLPack(producer as never)
  t.deepEqual(tensor.toArray(), [0, 1])
  tensor.dispose()
})
