// napi-dlpack against the plain C addon: the protocol's edges (docs/protocol.md §1.3, §1.4, §2)
// a peer author needs pinned down: what is and is not a capsule, ABI versions, consumed payloads,
// failures after the consume, flags, NULL strides, refusals before consuming, other devices,
// releases on other threads.
//
// Runs in both modes: with external ArrayBuffers (zero-copy import of C memory) and with
// NAPI_DLPACK_NO_EXTERNAL_BUFFERS=1 (Electron mode: C memory is copied at import, and the C
// deleter runs right away). JS memory is zero-copy to C in both. The C addon and what these
// specs share: __test__/harness/c-addon.ts.
import test, { type ExecutionContext } from 'ava'

import {
  BufferError,
  CapsuleError,
  CudaError,
  DLPackError,
  DLPackTypeError,
  InvalidTensorError,
  cuda,
  externalBuffersAllowed,
  fromDLPack,
  isCapsule,
  isCapsuleConsumed,
  type DLPackCapsule,
} from '../../dist/index.js'
import { c, type CAddon, READ_ONLY } from '../harness/c-addon.js'
import { drainGarbage, throwsCode } from '../harness/helpers.js'

const zeroCopy = externalBuffersAllowed()

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
