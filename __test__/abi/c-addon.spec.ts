// napi-dlpack against an independent peer: the plain C addon in __test__/native/c-addon (it uses only
// include/napi_dlpack.h and node_api.h). Covers C -> JS and JS -> C exchange, zero-copy
// (pointer identity + writes seen on the other side), deleters run exactly once on every path,
// validation of malformed tensors, and deleters at worker teardown.
//
// Runs in both modes: with external ArrayBuffers (zero-copy import of C memory) and with
// NAPI_DLPACK_NO_EXTERNAL_BUFFERS=1 (Electron mode: C memory is copied at import, and the C
// deleter runs right away). JS memory is zero-copy to C in both.
import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Worker } from 'node:worker_threads'

import test, { type ExecutionContext } from 'ava'

import {
  BufferError,
  CapsuleError,
  CudaError,
  DLPackError,
  DLPackTypeError,
  InvalidTensorError,
  ReadOnlyError,
  Tensor,
  cuda,
  externalBuffersAllowed,
  fromDLPack,
  isCapsule,
  isCapsuleConsumed,
  type DLPackCapsule,
} from '../../dist/index.js'
import { drainGarbage, finalizesExternalsAtWorkerExit, gcUntil, runtime, throwsCode, turn } from '../harness/helpers.js'

// ---------------------------------------------------------------------------------------------
// The C addon

interface MakeTensorOptions {
  dtype?: { code: number; bits: number; lanes: number }
  device?: [number, number]
  shape: (number | bigint)[]
  strides?: (number | bigint)[] | null
  byteOffset?: number
  versioned: boolean
  readonly?: boolean
  flags?: number
  version?: [number, number]
  fill?: 'iota' | 'none'
  nullData?: boolean
  nullShape?: boolean
  ndim?: number
  nullDeleter?: boolean
}

interface HeldInfo {
  versioned: boolean
  version: [number, number] | null
  flags: number
  ndim: number
  shape: number[] | null
  strides: number[] | null
  byteOffset: number
  dtype: { code: number; bits: number; lanes: number }
  device: [number, number]
  data: bigint
}

type Held = { readonly __held: unique symbol }

interface CAddon {
  makeTensor(options: MakeTensorOptions): DLPackCapsule
  deleterCalls(): number
  resetDeleterCalls(): void
  dataPointer(capsule: DLPackCapsule): bigint
  isConsumed(capsule: DLPackCapsule): boolean
  consume(capsule: DLPackCapsule): Held
  heldInfo(held: Held): HeldInfo
  heldFloat32(held: Held): Float32Array
  heldWriteFloat32(held: Held, index: number, value: number, force?: boolean): void
  release(held: Held): boolean
  releaseOnThread(held: Held): boolean
  heldToCapsule(held: Held): DLPackCapsule
}

const here = dirname(fileURLToPath(import.meta.url))
const root = join(here, '..', '..')
const addonPath = join(root, 'target', 'c-addon', 'c_addon.node')
// `npm test` builds every fixture first; build it here too when run on its own.
if (!existsSync(addonPath)) execFileSync('bash', [join(here, '..', 'native', 'c-addon', 'build.sh')], { stdio: 'inherit' })
const c = createRequire(import.meta.url)(addonPath) as CAddon

const zeroCopy = externalBuffersAllowed()
const READ_ONLY = 1
const IS_COPIED = 2
const SUBBYTE_PADDED = 4

// ---------------------------------------------------------------------------------------------
// Helpers


const iota = (n: number) => Array.from({ length: n }, (_, i) => i)

function reshape(flat: number[], shape: number[]): unknown {
  if (shape.length === 0) return flat[0]
  const [head, ...rest] = shape
  const size = rest.reduce((a, b) => a * b, 1)
  return Array.from({ length: head! }, (_, i) => reshape(flat.slice(i * size, (i + 1) * size), rest))
}

/** C-order flat index of `index` -> element offset in `t.data` (offset + Σ index·stride). */
function dataIndex(tensor: Tensor, flat: number): number {
  let at = tensor.offset
  const shape = tensor.shape
  for (let d = shape.length - 1; d >= 0; d--) {
    const i = flat % shape[d]!
    flat = Math.floor(flat / shape[d]!)
    at += i * tensor.strides[d]!
  }
  return at
}

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

// ---------------------------------------------------------------------------------------------
// Deleter exactly once

for (const versioned of [true, false]) {
  const tag = versioned ? 'versioned' : 'legacy'

  test.serial(`deleter (${tag}): consumed, then disposed`, async (t) => {
    await drainGarbage()
    const before = c.deleterCalls()
    const tensor = fromDLPack(c.makeTensor({ shape: [8], versioned }))
    t.is(c.deleterCalls(), zeroCopy ? before : before + 1)
    t.is(tensor.data.length, 8)
    tensor.dispose()
    t.is(c.deleterCalls(), before + 1)
    tensor.dispose()
    t.is(c.deleterCalls(), before + 1, 'a second dispose is a no-op')
    await drainGarbage()
    t.is(c.deleterCalls(), before + 1)
  })

  test.serial(`deleter (${tag}): two JS tensors sharing one import release once, after the last`, async (t) => {
    await drainGarbage()
    const before = c.deleterCalls()
    const a = fromDLPack(c.makeTensor({ shape: [8], versioned }))
    const b = fromDLPack(a)
    t.is(b.dataPointer, a.dataPointer)
    a.dispose()
    t.is(c.deleterCalls(), zeroCopy ? before : before + 1)
    t.is((b.toArray() as unknown[]).length, 8)
    b.dispose()
    t.is(c.deleterCalls(), before + 1)
  })

  for (const touchData of [false, true]) {
    test.serial(`deleter (${tag}): consumed, tensor dropped and collected${touchData ? ' (data view taken)' : ''}`, async (t) => {
      await drainGarbage()
      const before = c.deleterCalls()
      ;(() => {
        const tensor = fromDLPack(c.makeTensor({ shape: [64], versioned }))
        if (touchData) t.is(tensor.data[63], 63)
      })()
      if (zeroCopy) {
        t.true(await gcUntil(() => c.deleterCalls() > before), 'deleter not called after GC')
      } else {
        t.is(c.deleterCalls(), before + 1, 'released at import (copy)')
      }
      await drainGarbage()
      t.is(c.deleterCalls(), before + 1)
    })
  }

  test.serial(`deleter (${tag}): a re-exported capsule that is never consumed keeps C memory until collected`, async (t) => {
    await drainGarbage()
    const before = c.deleterCalls()
    const tensor = fromDLPack(c.makeTensor({ shape: [4], versioned }))
    ;(() => {
      tensor.__dlpack__()
    })()
    tensor.dispose()
    if (zeroCopy) {
      t.is(c.deleterCalls(), before, 'the capsule still owns an export')
      t.true(await gcUntil(() => c.deleterCalls() > before), 'deleter not called after the capsule was collected')
    }
    await drainGarbage()
    t.is(c.deleterCalls(), before + 1)
  })

  test.serial(`deleter (${tag}): a capsule never consumed is released when collected`, async (t) => {
    await drainGarbage()
    const before = c.deleterCalls()
    ;(() => {
      c.makeTensor({ shape: [16], versioned })
    })()
    t.true(await gcUntil(() => c.deleterCalls() > before), 'deleter not called after GC')
    await drainGarbage()
    t.is(c.deleterCalls(), before + 1)
  })

  test.serial(`deleter (${tag}): double consume is rejected, one deleter call in all`, async (t) => {
    await drainGarbage()
    const before = c.deleterCalls()
    const capsule = c.makeTensor({ shape: [2], versioned })
    const tensor = fromDLPack(capsule)
    throwsCode(t, () => fromDLPack(capsule), 'ERR_DLPACK_CAPSULE_CONSUMED', CapsuleError)
    throwsCode(t, () => fromDLPack(capsule, { copy: true }), 'ERR_DLPACK_CAPSULE_CONSUMED', CapsuleError)
    t.throws(() => c.consume(capsule), { code: 'ERR_DLPACK_CAPSULE_CONSUMED' } as never)
    t.is(c.deleterCalls(), zeroCopy ? before : before + 1)
    tensor.dispose()
    await drainGarbage()
    t.is(c.deleterCalls(), before + 1)
  })

  test.serial(`deleter (${tag}): C consumed first, JS import rejected`, async (t) => {
    await drainGarbage()
    const before = c.deleterCalls()
    const capsule = c.makeTensor({ shape: [2], versioned })
    const held = c.consume(capsule)
    throwsCode(t, () => fromDLPack(capsule), 'ERR_DLPACK_CAPSULE_CONSUMED', CapsuleError)
    t.is(c.deleterCalls(), before)
    t.true(c.release(held))
    t.is(c.deleterCalls(), before + 1)
  })

  test.serial(`deleter (${tag}): failed validation releases the tensor once, at the throw`, async (t) => {
    await drainGarbage()
    const before = c.deleterCalls()
    const capsule = c.makeTensor({ shape: [-2], versioned })
    throwsCode(t, () => fromDLPack(capsule), 'ERR_DLPACK_SHAPE', InvalidTensorError)
    t.is(c.deleterCalls(), before + 1)
    t.true(isCapsuleConsumed(capsule))
    throwsCode(t, () => fromDLPack(capsule), 'ERR_DLPACK_CAPSULE_CONSUMED', CapsuleError)
    await drainGarbage()
    t.is(c.deleterCalls(), before + 1)
  })

  test.serial(`deleter (${tag}): a device refusal leaves the capsule unconsumed; it is released once later`, async (t) => {
    await drainGarbage()
    const before = c.deleterCalls()
    const capsule = c.makeTensor({ shape: [2], versioned })
    throwsCode(t, () => fromDLPack(capsule, { device: [2, 0] }), 'ERR_DLPACK_DEVICE')
    // The device is read in place (docs/protocol.md §1.3): nothing was consumed or released.
    t.false(c.isConsumed(capsule))
    t.is(c.deleterCalls(), before)
    fromDLPack(capsule).dispose()
    t.is(c.deleterCalls(), before + 1)
  })
}

test.serial('deleter: a NULL deleter is allowed and nothing is counted', async (t) => {
  await drainGarbage()
  const before = c.deleterCalls()
  const tensor = fromDLPack(c.makeTensor({ shape: [3], versioned: true, nullDeleter: true }))
  t.deepEqual(tensor.toArray(), [0, 1, 2])
  tensor.dispose()
  t.is(c.deleterCalls(), before)
})

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

// ---------------------------------------------------------------------------------------------
// Worker teardown

for (const exit of ['natural', 'process.exit', 'terminate'] as const) {
  for (const producerHook of [false, true]) {
    const title = `worker (${exit}${producerHook ? ', C producer with a teardown hook' : ''})`
    test.serial(`${title}: deleters of imported and unconsumed C tensors run at env teardown`, async (t) => {
      await drainGarbage()
      const before = c.deleterCalls()
      const imported = 5
      const reexported = 2
      const unconsumed = 3
      const ours = imported + reexported
      const worker = new Worker(new URL('../harness/workers/c-addon-worker.mjs', import.meta.url), {
        workerData: { addonPath, imported, reexported, unconsumed, exit, producerHook },
      })
      let report: { made: number; deletedBeforeExit: number; externalBuffers: boolean; isCopy: boolean[] } | undefined
      worker.on('message', (message) => {
        report = message
        if (exit === 'terminate') void worker.terminate()
      })
      const code = await new Promise<number>((resolve, reject) => {
        worker.once('error', reject)
        worker.once('exit', resolve)
      })
      t.is(code, exit === 'terminate' ? 1 : 0)
      t.truthy(report, 'the worker reported before exiting')
      t.is(report!.made, ours + unconsumed)
      t.is(report!.externalBuffers, zeroCopy, 'workers run in the same mode')
      t.deepEqual(report!.isCopy, Array(imported).fill(!zeroCopy))
      t.is(report!.deletedBeforeExit, zeroCopy ? 0 : ours)
      // Our tensors (the imports, and our capsules re-exporting C tensors) are released at
      // teardown in every runtime. The C addon's unconsumed capsules are its own: released by
      // its finalizers where the runtime runs them at teardown (Node), or by its own cleanup
      // hook. Bun and Deno run neither finalizer, so without the hook those tensors are never
      // released there: a documented limitation.
      const expected = finalizesExternalsAtWorkerExit || producerHook ? ours + unconsumed : ours
      // Node has run them all by the 'exit' event; elsewhere the last holders (external
      // ArrayBuffers' backing stores) may be freed a little later.
      if (runtime !== 'node') await gcUntil(() => c.deleterCalls() - before >= expected)
      t.is(c.deleterCalls() - before, expected, 'every tensor made in the worker was released exactly once')
      await drainGarbage()
      t.is(c.deleterCalls() - before, expected)
    })
  }
}

test.serial('deleter on another thread: a JS-memory export released by a C worker thread frees the buffer', async (t) => {
  // DLPack deleters may run on any thread. Ours then hands the JS reference to the owning
  // thread (a threadsafe-function queue); the buffer must become collectable, and nothing may
  // touch Node-API off-thread (which would crash).
  let collected = 0
  const registry = new FinalizationRegistry(() => {
    collected += 1
  })
  const made = 8
  ;(() => {
    for (let i = 0; i < made; i++) {
      const buffer = new ArrayBuffer(64)
      registry.register(buffer, i)
      const tensor = Tensor.from(new Float32Array(buffer))
      const held = c.consume(tensor.__dlpack__())
      tensor.dispose()
      t.true(c.releaseOnThread(held), 'the deleter ran on the other thread')
      t.false(c.releaseOnThread(held), 'and only once')
    }
  })()
  // Bun's collector scans the native stack conservatively, so a stale stack slot may pin one of
  // the buffers (seen: 7 of 8). Every buffer whose reference we failed to release would stay,
  // so all but that one must go there; everywhere else all of them.
  const needed = runtime === 'bun' ? made - 1 : made
  t.true(await gcUntil(() => collected >= needed), `collected ${collected} of ${made}`)
})

// ---------------------------------------------------------------------------------------------
// Protocol edges (docs/protocol.md §1.3, §1.4, §2): what a peer author needs pinned down

interface ProtocolEdges {
  makeOddCapsule(options: {
    tag?: 'capsule' | 'none' | 'other'
    nullPayload?: boolean
    abi?: number
    kind?: number
    tensor?: 'null' | 'poison'
  }): DLPackCapsule
  checkCapsule(value: unknown): string
  payloadTensor(value: unknown): bigint
  makePrefixOnlyTensor(version: [number, number]): DLPackCapsule
  makeMisalignedArrays(which: 'shape' | 'strides'): DLPackCapsule
  makeThreadTrackedTensor(): DLPackCapsule
  trackedDeleterStats(): { calls: number; offThread: number }
}
const edges = c as CAddon & ProtocolEdges
/** The address the fixture puts in `tensor` of odd capsules: reading through it would crash. */
const POISON = 0x10n

/** Asserts that a C-side call throws a JS Error with `code`. */
const cThrows = (t: ExecutionContext, fn: () => unknown, code: string, what: string) =>
  t.is((t.throws(fn, undefined, what) as { code?: string } | undefined)?.code, code, what)

test.serial('not a capsule: every External that is no capsule is ERR_DLPACK_NOT_A_CAPSULE, in JS and in the header', (t) => {
  const notCapsules: [string, unknown][] = [
    ['untagged External', edges.makeOddCapsule({ tag: 'none' })],
    ['External with another tag', edges.makeOddCapsule({ tag: 'other' })],
    ['tagged External with a NULL payload', edges.makeOddCapsule({ nullPayload: true })],
  ]
  const held = c.consume(c.makeTensor({ shape: [1], versioned: true }))
  notCapsules.push(['a C held tensor (another addon\'s tagged External)', held])
  for (const [what, value] of notCapsules) {
    t.false(isCapsule(value), what)
    t.is(edges.checkCapsule(value), 'ERR_DLPACK_NOT_A_CAPSULE', `${what}: napi_dlpack_capsule_check`)
    throwsCode(t, () => fromDLPack(value as never), 'ERR_DLPACK_NOT_A_CAPSULE', CapsuleError, `${what}: fromDLPack`)
    throwsCode(t, () => fromDLPack(value as never, { device: 'cpu' }), 'ERR_DLPACK_NOT_A_CAPSULE', CapsuleError, `${what}: fromDLPack with a device`)
    throwsCode(t, () => fromDLPack({ __dlpack__: () => value } as never), 'ERR_DLPACK_NOT_A_CAPSULE', CapsuleError, `${what}: from __dlpack__`)
    throwsCode(t, () => isCapsuleConsumed(value as never), 'ERR_DLPACK_NOT_A_CAPSULE', CapsuleError, `${what}: isCapsuleConsumed`)
    cThrows(t, () => c.isConsumed(value as never), 'ERR_DLPACK_NOT_A_CAPSULE', `${what}: napi_dlpack_capsule_is_consumed`)
    cThrows(t, () => c.consume(value as never), 'ERR_DLPACK_NOT_A_CAPSULE', `${what}: napi_dlpack_capsule_consume`)
  }
  t.is(edges.payloadTensor(notCapsules[0]![1]), POISON, 'an untagged payload was not touched')
  t.is(edges.payloadTensor(notCapsules[1]![1]), POISON, 'a payload under another tag was not touched')
  t.true(c.release(held), 'the held tensor was not touched either')
  // Values that are not Externals: a bad argument to fromDLPack, not a capsule elsewhere.
  for (const value of [{}, [], new Map(), 1]) {
    throwsCode(t, () => fromDLPack(value as never), 'ERR_DLPACK_INVALID_ARGUMENT', DLPackTypeError)
    throwsCode(t, () => fromDLPack({ __dlpack__: () => value } as never), 'ERR_DLPACK_NOT_A_CAPSULE', CapsuleError)
    throwsCode(t, () => isCapsuleConsumed(value as never), 'ERR_DLPACK_NOT_A_CAPSULE', CapsuleError)
  }
})

test.serial('a capsule of another ABI version or kind: a capsule, refused with ERR_DLPACK_CAPSULE_ABI by every reader, tensor untouched', (t) => {
  for (const odd of [{ abi: 2 }, { abi: 0 }, { kind: 7 }]) {
    const what = JSON.stringify(odd)
    const capsule = edges.makeOddCapsule(odd)
    t.true(isCapsule(capsule), what)
    t.is(edges.checkCapsule(capsule), 'OK', `${what}: napi_dlpack_capsule_check`)
    throwsCode(t, () => isCapsuleConsumed(capsule), 'ERR_DLPACK_CAPSULE_ABI', CapsuleError, `${what}: isCapsuleConsumed`)
    cThrows(t, () => c.isConsumed(capsule), 'ERR_DLPACK_CAPSULE_ABI', `${what}: napi_dlpack_capsule_is_consumed`)
    throwsCode(t, () => fromDLPack(capsule), 'ERR_DLPACK_CAPSULE_ABI', CapsuleError, `${what}: fromDLPack`)
    throwsCode(t, () => fromDLPack(capsule, { device: 'cpu' }), 'ERR_DLPACK_CAPSULE_ABI', CapsuleError, `${what}: fromDLPack with a device`)
    cThrows(t, () => c.consume(capsule), 'ERR_DLPACK_CAPSULE_ABI', `${what}: napi_dlpack_capsule_consume`)
    t.is(edges.payloadTensor(capsule), POISON, `${what}: tensor neither exchanged nor released`)
  }
})

test.serial('a NULL tensor in a payload means consumed: ERR_DLPACK_CAPSULE_CONSUMED, never ERR_DLPACK_NULL_TENSOR', (t) => {
  const capsule = edges.makeOddCapsule({ tensor: 'null' })
  t.true(isCapsule(capsule))
  t.is(edges.checkCapsule(capsule), 'OK')
  t.true(isCapsuleConsumed(capsule))
  t.true(c.isConsumed(capsule))
  throwsCode(t, () => fromDLPack(capsule), 'ERR_DLPACK_CAPSULE_CONSUMED', CapsuleError)
  throwsCode(t, () => fromDLPack(capsule, { device: 'cpu' }), 'ERR_DLPACK_CAPSULE_CONSUMED', CapsuleError)
  cThrows(t, () => c.consume(capsule), 'ERR_DLPACK_CAPSULE_CONSUMED', 'napi_dlpack_capsule_consume')
})

test.serial('import failures after the consume: every error class has run the deleter when it is thrown', async (t) => {
  const cases: { what: string; make: () => DLPackCapsule; options?: Parameters<typeof fromDLPack>[1]; code: string; Class: typeof DLPackError }[] = [
    { what: 'negative dimension', make: () => c.makeTensor({ shape: [-1], versioned: true }), code: 'ERR_DLPACK_SHAPE', Class: InvalidTensorError },
    { what: 'major version 2', make: () => edges.makePrefixOnlyTensor([2, 0]), code: 'ERR_DLPACK_VERSION', Class: InvalidTensorError },
    { what: 'unknown device type', make: () => c.makeTensor({ shape: [1], versioned: true, device: [5, 0] }), code: 'ERR_DLPACK_DEVICE', Class: BufferError },
    {
      what: 'unknown device type, a device requested (not readable in place, refused at validation)',
      make: () => c.makeTensor({ shape: [1], versioned: true, device: [5, 0] }),
      options: { device: 'cpu' },
      code: 'ERR_DLPACK_DEVICE',
      Class: BufferError,
    },
    {
      what: 'copy: true of ROCm memory (no host copy of that device)',
      make: () => c.makeTensor({ shape: [1], versioned: true, device: [10, 0] }),
      options: { copy: true },
      code: 'ERR_DLPACK_DEVICE',
      Class: BufferError,
    },
  ]
  if (!zeroCopy) {
    cases.push({
      what: 'copy: false where only a copy can give a JS view (Electron mode)',
      make: () => c.makeTensor({ shape: [1], versioned: true }),
      options: { copy: false },
      code: 'ERR_DLPACK_COPY_REQUIRED',
      Class: BufferError,
    })
  }
  if (!cuda.isAvailable()) {
    cases.push({
      what: 'a CUDA tensor with no driver to check it',
      make: () => c.makeTensor({ shape: [1], versioned: true, device: [2, 0] }),
      code: 'ERR_CUDA_UNAVAILABLE',
      Class: CudaError,
    })
  }
  for (const { what, make, options, code, Class } of cases) {
    await drainGarbage()
    const before = c.deleterCalls()
    const capsule = make()
    throwsCode(t, () => fromDLPack(capsule, options), code, Class, what)
    t.is(c.deleterCalls(), before + 1, `${what}: the deleter ran before the throw`)
    t.true(c.isConsumed(capsule), what)
    await drainGarbage()
    t.is(c.deleterCalls(), before + 1, `${what}: and never again`)
  }
})

test.serial('versioned major != 1: a tensor allocated as just the stable prefix is refused, deleter once', async (t) => {
  for (const version of [
    [2, 0],
    [0, 9],
    [3, 1],
  ] as [number, number][]) {
    await drainGarbage()
    const before = c.deleterCalls()
    // 24 bytes: version, manager_ctx, deleter. Nothing past them may be read (flags included).
    throwsCode(t, () => fromDLPack(edges.makePrefixOnlyTensor(version)), 'ERR_DLPACK_VERSION', InvalidTensorError)
    // With a device requested, the in-place device read must not look past the prefix either.
    throwsCode(t, () => fromDLPack(edges.makePrefixOnlyTensor(version), { device: 'cpu' }), 'ERR_DLPACK_VERSION', InvalidTensorError)
    t.is(c.deleterCalls(), before + 2, String(version))
  }
})

test.serial('unknown flag bits are accepted, ignored, and not forwarded on re-export', async (t) => {
  await drainGarbage()
  const before = c.deleterCalls()
  // Bits no DLPack version defines yet (a newer minor may), next to READ_ONLY.
  const unknownBits = (1n << 9n) | (1n << 40n) | (1n << 63n)
  const odd = fromDLPack(c.makeTensor({ shape: [3], versioned: true, flags: (BigInt(READ_ONLY) | unknownBits) as never }))
  t.true(odd.readonly, 'known bits keep their meaning')
  t.deepEqual([...odd.getData({ allowReadOnly: true })], [0, 1, 2])
  const held = c.consume(odd.__dlpack__())
  t.is(c.heldInfo(held).flags, READ_ONLY, 're-exports carry only the flags napi-dlpack sets')
  c.release(held)
  odd.dispose()
  t.is(c.deleterCalls(), before + 1)
})

test.serial('NULL strides are row-major in every version, 1.2 and newer included', (t) => {
  for (const version of [
    [1, 0],
    [1, 2],
    [1, 3],
    [1, 9],
  ] as [number, number][]) {
    const tensor = fromDLPack(c.makeTensor({ shape: [2, 3], strides: null, versioned: true, version }))
    t.deepEqual(tensor.strides, [3, 1], String(version))
    t.deepEqual(tensor.toArray(), [
      [0, 1, 2],
      [3, 4, 5],
    ])
    tensor.dispose()
  }
})

test.serial('misaligned shape and strides pointers are both refused with ERR_DLPACK_INVALID_LAYOUT, deleter once', async (t) => {
  for (const which of ['shape', 'strides'] as const) {
    await drainGarbage()
    const before = c.deleterCalls()
    const capsule = edges.makeMisalignedArrays(which)
    throwsCode(t, () => fromDLPack(capsule), 'ERR_DLPACK_INVALID_LAYOUT', InvalidTensorError, which)
    t.is(c.deleterCalls(), before + 1, which)
  }
})

test.serial('fromDLPack refuses a capsule before consuming it whenever it can: the capsule stays usable', async (t) => {
  await drainGarbage()
  const before = c.deleterCalls()
  const capsule = c.makeTensor({ shape: [3], versioned: true })
  const refusals: [Parameters<typeof fromDLPack>[1], string][] = [
    [{ device: 'cuda:0' }, 'ERR_DLPACK_DEVICE'],
    [{ device: [1, 1] as [number, number] }, 'ERR_DLPACK_DEVICE'],
    [{ device: 'cuda:0', copy: false }, 'ERR_DLPACK_COPY_REQUIRED'],
    [{ stream: 0n }, 'ERR_DLPACK_STREAM'],
    [{ stream: -5n }, 'ERR_DLPACK_STREAM'],
    [{ stream: 'default' as never }, 'ERR_DLPACK_INVALID_ARGUMENT'],
    [{ copy: 'yes' as never }, 'ERR_DLPACK_INVALID_ARGUMENT'],
    [{ device: 'tpu:0' as never }, 'ERR_DLPACK_INVALID_ARGUMENT'],
  ]
  for (const [options, code] of refusals) {
    throwsCode(t, () => fromDLPack(capsule, options), code, DLPackError, JSON.stringify(options, (_, v) => (typeof v === 'bigint' ? `${v}n` : v)))
    t.false(isCapsuleConsumed(capsule), `${code}: not consumed`)
  }
  t.is(c.deleterCalls(), before, 'nothing was released')
  const tensor = fromDLPack(capsule, { device: 'cpu' })
  t.deepEqual(tensor.toArray(), [0, 1, 2])
  tensor.dispose()
  t.is(c.deleterCalls(), before + 1)
})

test.serial('a capsule asked onto a CUDA device that cannot be used now is refused unconsumed, and stays usable', async (t) => {
  await drainGarbage()
  const before = c.deleterCalls()
  // The first ordinal past the driver's devices (cuda:0 without a driver): on it, a CUDA
  // capsule can be neither checked nor used, which is known before the capsule is consumed.
  const ordinal = cuda.deviceCount()
  const capsule = c.makeTensor({ shape: [3], versioned: true, device: [2, ordinal] })
  const expected = cuda.isAvailable() ? 'ERR_DLPACK_DEVICE' : 'ERR_CUDA_UNAVAILABLE'
  for (const options of [{ device: `cuda:${ordinal}` }, { device: [2, ordinal] as [number, number], copy: true }]) {
    throwsCode(t, () => fromDLPack(capsule, options), expected, DLPackError, JSON.stringify(options))
    t.false(isCapsuleConsumed(capsule), `${JSON.stringify(options)}: not consumed`)
  }
  t.is(c.deleterCalls(), before, 'nothing was released')
  // Still usable: another consumer takes it, and its deleter runs once.
  const held = c.consume(capsule)
  t.deepEqual(c.heldInfo(held).device, [2, ordinal])
  t.true(c.release(held))
  t.is(c.deleterCalls(), before + 1)
})

test.serial('imports on devices other than CPU and CUDA are accepted unchecked', async (t) => {
  await drainGarbage()
  const before = c.deleterCalls()
  // ROCm (10): no driver is asked; the memory is never viewed, copied or freed by napi-dlpack.
  const capsule = c.makeTensor({ shape: [2, 2], versioned: true, device: [10, 1] })
  const pointer = c.dataPointer(capsule)
  const rocm = fromDLPack(capsule, { device: [10, 1] })
  t.deepEqual(rocm.__dlpack_device__(), [10, 1])
  t.false(rocm.isCopy, 'device memory is never copied by an import, in Electron mode neither')
  throwsCode(t, () => rocm.data, 'ERR_DLPACK_NOT_CPU', BufferError)
  const held = c.consume(rocm.__dlpack__())
  t.deepEqual(c.heldInfo(held).device, [10, 1])
  t.is(c.heldInfo(held).data + BigInt(c.heldInfo(held).byteOffset), pointer, 'the same device pointer passes through')
  c.release(held)
  rocm.dispose()
  t.is(c.deleterCalls(), before + 1)
  // CUDA host (pinned) memory is host-accessible: read as host memory, with no driver check.
  const pinned = fromDLPack(c.makeTensor({ shape: [3], versioned: true, device: [3, 0] }))
  t.deepEqual([...pinned.getData({ allowReadOnly: true })], [0, 1, 2])
  pinned.dispose()
  t.is(c.deleterCalls(), before + 2)
})

test.serial('releasing a re-export on another thread runs the original producer\'s deleter synchronously on that thread', (t) => {
  const start = edges.trackedDeleterStats()
  const tensor = fromDLPack(edges.makeThreadTrackedTensor())
  if (!zeroCopy) {
    // Electron mode copies at import and releases the C tensor right there, on the JS thread.
    t.deepEqual(edges.trackedDeleterStats(), { calls: start.calls + 1, offThread: start.offThread })
  }
  const held = c.consume(tensor.__dlpack__())
  tensor.dispose() // the re-export is now the last owner of the C tensor
  t.is(edges.trackedDeleterStats().calls, start.calls + (zeroCopy ? 0 : 1))
  t.true(c.releaseOnThread(held))
  // releaseOnThread joins its thread before returning: the deleter ran there, during the call.
  t.deepEqual(edges.trackedDeleterStats(), { calls: start.calls + 1, offThread: start.offThread + (zeroCopy ? 1 : 0) })
})

// Hostile layouts (issue 10): the C producer hands over what a careless or future producer
// may, and the Rust consumers in this process (this package's addon, and the separately built
// example addon in examples/consumer-addon, which uses the crate's typed access) refuse it with
// a stable code, the C deleter running exactly once. Each refusal is a check that
// `npm run mutants` (scripts/mutants.mjs) removes one at a time: the fixtures are built so that
// without the check the import goes on, and an assertion here fails (not a crash).

interface HostileLayouts {
  makeMisalignedTensor(options: { versioned: boolean; offset: number }): DLPackCapsule
  makeRawTensor(options: {
    versioned: boolean
    shape: (number | bigint)[]
    strides: (number | bigint)[]
    misalign?: 'shape' | 'strides'
    shift?: number
  }): DLPackCapsule
  makePrefixOnlyMajor(major: number): DLPackCapsule
}

interface ConsumerExample {
  fwhtRowsInPlace(capsule: unknown): void
  countTrue(capsule: unknown): number
  describe(capsule: unknown): { shape: number[] }
}

const hostile = c as unknown as HostileLayouts
const consumerPath = join(root, 'target', 'consumer-addon', 'consumer_addon.node')
if (!existsSync(consumerPath)) execFileSync('bash', [join(here, '..', 'native', 'consumer-addon', 'build.sh')], { stdio: 'inherit' })
const consumer = createRequire(import.meta.url)(consumerPath) as ConsumerExample
const BOOL = { code: 6, bits: 8, lanes: 1 }

/** `importer(make())` throws `code`, and the C deleter ran exactly once, at the throw. */
function refusedOnce(t: ExecutionContext, make: () => DLPackCapsule, importer: (capsule: DLPackCapsule) => unknown, code: string, what: string) {
  const before = c.deleterCalls()
  const capsule = make()
  const error = t.throws(() => importer(capsule), { instanceOf: Error }, what) as (Error & { code?: string }) | undefined
  t.is(error?.code, code, `${what}: ${String(error?.message)}`)
  t.is(c.deleterCalls(), before + 1, `${what}: the deleter ran once, at the refusal`)
  t.true(c.isConsumed(capsule), what)
}

/** Runs `body` (which makes `made` C tensors), then checks that collection calls no deleter
 * again: every C tensor was released exactly once. */
async function releasedOnce(t: ExecutionContext, made: number, body: () => void) {
  await drainGarbage()
  const before = c.deleterCalls()
  body()
  await drainGarbage()
  t.is(c.deleterCalls(), before + made, 'each C tensor released exactly once')
}

const importers: [string, (capsule: DLPackCapsule) => unknown][] = [
  ['fromDLPack', (capsule) => fromDLPack(capsule)],
  ['example addon', (capsule) => consumer.describe(capsule)],
]

for (const versioned of [true, false]) {
  const tag = versioned ? 'versioned' : 'legacy'

  test.serial(`hostile (${tag}): a misaligned managed struct is refused, its deleter called once`, async (t) => {
    // Offset 4 first: it keeps the pointer's low bit clear, so without the alignment check the
    // import would succeed and this assertion fail; offset 1 is the careless producer's case.
    const offsets = [4, 1]
    await releasedOnce(t, offsets.length * importers.length, () => {
      for (const offset of offsets) {
        for (const [name, importer] of importers) {
          refusedOnce(t, () => hostile.makeMisalignedTensor({ versioned, offset }), importer, 'ERR_DLPACK_MISALIGNED', `${name}, offset ${offset}`)
        }
      }
    })
  })

  test.serial(`hostile (${tag}): misaligned shape and strides pointers are refused`, async (t) => {
    await releasedOnce(t, 1 + 2 * 2 * importers.length, () => {
      // The same tensor with aligned arrays imports (the control).
      const tensor = fromDLPack(hostile.makeRawTensor({ versioned, shape: [2, 2], strides: [2, 1] }))
      t.deepEqual(tensor.toArray(), [[0, 1], [2, 3]])
      tensor.dispose()
      for (const misalign of ['shape', 'strides'] as const) {
        for (const shift of [4, 1]) {
          for (const [name, importer] of importers) {
            const make = () => hostile.makeRawTensor({ versioned, shape: [2, 2], strides: [2, 1], misalign, shift })
            refusedOnce(t, make, importer, 'ERR_DLPACK_INVALID_LAYOUT', `${name}, ${misalign} shifted by ${shift}`)
          }
        }
      }
    })
  })

  test.serial(`hostile (${tag}): stride extents that overflow int64 are refused`, async (t) => {
    // (dim - 1) * stride = 2^64 wraps to 0 in 64-bit arithmetic: lost, the overflow would make
    // the first case a one-element tensor, and views would read 2^32 elements past the
    // 64-byte buffer.
    const cases: [(number | bigint)[], (number | bigint)[]][] = [
      [[2n ** 32n + 1n], [2n ** 32n]],
      [[2n ** 32n + 1n], [-(2n ** 32n)]],
      [[2, 2n ** 32n + 1n], [1, 2n ** 32n]],
      [[3], [2n ** 62n]],
      [[2, 2], [2n ** 62n, 2n ** 62n]],
    ]
    await releasedOnce(t, 1 + cases.length * importers.length, () => {
      const control = fromDLPack(hostile.makeRawTensor({ versioned, shape: [4], strides: [4] }))
      t.deepEqual(control.toArray(), [0, 4, 8, 12])
      control.dispose()
      for (const [shape, strides] of cases) {
        for (const [name, importer] of importers) {
          const what = `${name}, shape ${shape} strides ${strides}`
          refusedOnce(t, () => hostile.makeRawTensor({ versioned, shape, strides }), importer, 'ERR_DLPACK_OVERFLOW', what)
        }
      }
    })
  })

  test.serial(`hostile (${tag}): misaligned float32 data is refused by the crate's typed access`, async (t) => {
    await releasedOnce(t, 2, () => {
      // The example addon writes in place through `as_mut_slice::<f32>`, which must refuse
      // data 2 bytes off alignment rather than hand out a misaligned slice.
      const make = () => c.makeTensor({ shape: [2, 4], byteOffset: 2, versioned })
      refusedOnce(t, make, (capsule) => consumer.fwhtRowsInPlace(capsule), 'ERR_DLPACK_MISALIGNED', 'fwhtRowsInPlace')
      // This package copies such data instead (flagged), so JS never sees a misaligned view.
      const tensor = fromDLPack(make())
      t.true(tensor.isCopy)
      t.deepEqual(tensor.toArray(), [[0, 1, 2, 3], [4, 5, 6, 7]])
      tensor.dispose()
    })
  })

  test.serial(`hostile (${tag}): bool bytes other than 0 and 1 are refused on both access paths`, async (t) => {
    await releasedOnce(t, 4, () => {
      // fill 'iota' gives non-float dtypes the bytes 0, 1, 2, ... over the data region.
      t.is(consumer.countTrue(c.makeTensor({ shape: [2], dtype: BOOL, versioned })), 1, 'bytes 0, 1')
      // Negative stride: elements at bytes 1, 0 (valid) or 2, 1, 0 (invalid), read through
      // the strided path.
      t.is(consumer.countTrue(c.makeTensor({ shape: [2], strides: [-1], dtype: BOOL, versioned })), 1, 'strided, bytes 1, 0')
      const contiguous = () => c.makeTensor({ shape: [4], dtype: BOOL, versioned })
      refusedOnce(t, contiguous, (capsule) => consumer.countTrue(capsule), 'ERR_DLPACK_INVALID_BOOL', 'contiguous, bytes 0..3')
      const strided = () => c.makeTensor({ shape: [3], strides: [-1], dtype: BOOL, versioned })
      refusedOnce(t, strided, (capsule) => consumer.countTrue(capsule), 'ERR_DLPACK_INVALID_BOOL', 'strided, bytes 2, 1, 0')
    })
  })
}

test.serial('hostile: a struct of another major allocated as the stable prefix only is refused', async (t) => {
  // The C producer allocates exactly version + manager_ctx + deleter; the consumer must read
  // nothing past them (valgrind or ASan would report the read) and call the deleter once.
  const majors = [2, 0, 0xffffffff]
  await releasedOnce(t, majors.length * importers.length, () => {
    for (const major of majors) {
      for (const [name, importer] of importers) {
        refusedOnce(t, () => hostile.makePrefixOnlyMajor(major), importer, 'ERR_DLPACK_VERSION', `${name}, major ${major}`)
      }
    }
  })
})
