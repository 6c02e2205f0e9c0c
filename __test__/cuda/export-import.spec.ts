// DLPack export and import of device memory: our CUDA tensors through __dlpack__, foreign CUDA
// memory imported zero-copy (released only by its producer) or copied, and the driver's pointer
// attributes checked on every import.
//
// Runs in the settings of scripts/test.mjs (the fake driver, a real GPU, no driver, a driver
// without devices; see __test__/harness/fake-cuda.ts and setting.spec.ts, which checks that the
// setting is the one NAPI_DLPACK_CUDA_EXPECT names).

import test from 'ava'

import { BufferError, cuda, type DLPackCapsule, DLPackError, fromDLPack, InvalidTensorError, isCapsuleConsumed, Tensor } from '../../dist/index.js'
import { c } from '../harness/c-addon.js'
import { available, control, fakeLoaded, peer, floats, settled } from '../harness/fake-cuda.js'
import { drainGarbage, gcUntil, throwsCode } from '../harness/helpers.js'

/** The loaded libcuda is the fake, with a device (see __test__/harness/fake-cuda.ts). */
const fake = available && fakeLoaded

/** The elements of a (number-valued) tensor, copied to the host. */
const values = (tensor: Tensor) => Array.from(tensor.to('cpu').data as ArrayLike<number>)

// Registered (as skipped) without a usable driver too: a spec without tests fails in ava.
const withDriver = available ? test.serial : test.serial.skip
const p = peer!
const devices = available ? cuda.deviceCount() : 0

withDriver('CUDA tensors export through __dlpack__ and come back sharing the allocation', (t) => {
  const x = Tensor.from(new Float32Array([1, 2, 3, 4])).to('cuda:0')
  t.deepEqual(x.__dlpack_device__(), [2, 0])
  for (const options of [{}, { maxVersion: [1, 0] as const }, { maxVersion: [0, 8] as const }, { stream: 1n }]) {
    const capsule = x.__dlpack__(options)
    const back = fromDLPack(capsule)
    t.is(back.dataPointer, x.dataPointer, JSON.stringify(options, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v)))
    t.deepEqual(back.__dlpack_device__(), [2, 0])
    t.deepEqual(values(back), [1, 2, 3, 4])
  }
  // fromDLPack(tensor) shares like for CPU tensors.
  t.is(fromDLPack(x).dataPointer, x.dataPointer)
  // Another addon sees the very same device pointer, and the values.
  const seen = p.consume(x.__dlpack__(), { read: true })
  t.is(seen.data, x.dataPointer)
  t.deepEqual(seen.device, [2, 0])
  t.deepEqual(seen.shape, [4])
  t.deepEqual(floats(seen.bytes!), [1, 2, 3, 4])
  // copy: true exports a private device copy.
  const copied = p.consume(x.__dlpack__({ copy: true }), { read: true })
  t.not(copied.data, x.dataPointer)
  t.deepEqual(floats(copied.bytes!), [1, 2, 3, 4])
  // Asking for another device is refused, as for CPU tensors.
  throwsCode(t, () => x.__dlpack__({ dlDevice: [1, 0] }), 'ERR_DLPACK_DEVICE', BufferError)
})

withDriver('foreign CUDA memory imports zero-copy and is released only by its producer', async (t) => {
  await drainGarbage()
  const live = fake ? control!.liveAllocations() : 0
  const deleted = p.deleterCalls()
  const ptr = p.alloc(16)
  p.upload(ptr, new Float32Array([9, 8, 7, 6]))
  const tensor = fromDLPack(p.makeTensor({ ptr, shape: [4] }))
  t.is(tensor.dataPointer, ptr)
  t.deepEqual(tensor.__dlpack_device__(), [2, 0])
  t.deepEqual(values(tensor), [9, 8, 7, 6])
  // Re-exported, it keeps the producer's pointer.
  t.is(p.consume(tensor.__dlpack__()).data, ptr)
  t.is(fromDLPack(tensor.__dlpack__()).dataPointer, ptr)
  if (fake) t.is(control!.liveAllocations(), live + 1)
  t.is(p.deleterCalls(), deleted)
  tensor.dispose()
  t.true(await gcUntil(() => p.deleterCalls() === deleted + 1))
  if (fake) t.is(control!.liveAllocations(), live, 'the producer freed it, in its deleter')

  // Memory whose producer does not free it: we never free it either.
  const kept = p.alloc(64)
  const borrowed = fromDLPack(p.makeTensor({ ptr: kept, shape: [2, 2], byteOffset: 16, owned: false }))
  t.is(borrowed.dataPointer, kept + 16n)
  borrowed.to('cpu')
  borrowed.to('cuda:0', { copy: true }).dispose()
  borrowed.dispose()
  t.true(await gcUntil(() => p.deleterCalls() === deleted + 2))
  await drainGarbage()
  await settled()
  if (fake) t.is(control!.liveAllocations(), live + 1, 'imported memory is never freed by napi-dlpack')
  p.free(kept)
  if (fake) t.is(control!.liveAllocations(), live)
})

withDriver('fromDLPack(cudaCapsule, { copy: true }) copies on the device and releases the producer at once', async (t) => {
  await drainGarbage()
  const deleted = p.deleterCalls()
  const ptr = p.alloc(16)
  p.upload(ptr, new Float32Array([1, 3, 5, 7]))
  const copy = fromDLPack(p.makeTensor({ ptr, shape: [2, 2] }), { copy: true })
  t.is(p.deleterCalls(), deleted + 1)
  t.true(copy.isCopy)
  t.not(copy.dataPointer, ptr)
  t.deepEqual(copy.__dlpack_device__(), [2, 0])
  t.deepEqual(copy.to('cpu').toArray(), [[1, 3], [5, 7]])
})

withDriver('imports are checked with the driver pointer attributes', async (t) => {
  await drainGarbage()
  const live = fake ? control!.liveAllocations() : 0
  const refuse = (capsule: DLPackCapsule, code: string, Class: abstract new (...args: never[]) => DLPackError, what: string) => {
    const error = throwsCode(t, () => fromDLPack(capsule), code, Class, what)
    t.true(isCapsuleConsumed(capsule), what)
    return error
  }
  // Plain host memory claiming to be CUDA memory.
  let before = c.deleterCalls()
  refuse(c.makeTensor({ device: [2, 0], shape: [4], versioned: true }), 'ERR_DLPACK_DEVICE', BufferError, 'host memory')
  refuse(c.makeTensor({ device: [2, 0], shape: [4], versioned: false }), 'ERR_DLPACK_DEVICE', BufferError, 'host memory, legacy')
  t.is(c.deleterCalls(), before + 2, 'the deleter ran at each throw')
  // Pinned host memory claiming to be device memory.
  const pinned = p.hostAlloc(64)
  before = p.deleterCalls()
  refuse(p.makeTensor({ ptr: pinned, shape: [4], owned: false }), 'ERR_DLPACK_DEVICE', BufferError, 'pinned host memory')
  p.hostFree(pinned)
  // A device that does not exist, and memory of another device.
  refuse(p.makeTensor({ ptr: p.alloc(16), shape: [4], device: [2, devices] }), 'ERR_DLPACK_DEVICE', BufferError, 'no such device')
  if (devices > 1) {
    const error = refuse(p.makeTensor({ ptr: p.alloc(16), shape: [4], device: [2, 1] }), 'ERR_DLPACK_DEVICE', BufferError, 'wrong ordinal')
    t.regex(error.message, /belongs to cuda:0/)
  }
  // Spans larger than the allocation: too many elements, an offset past the end, a stride
  // reaching out. (Far out, so that a real driver's rounding of allocation sizes does not
  // matter.)
  refuse(p.makeTensor({ ptr: p.alloc(64), shape: [1 << 24] }), 'ERR_DLPACK_INVALID_LAYOUT', InvalidTensorError, 'shape too large')
  refuse(p.makeTensor({ ptr: p.alloc(64), shape: [4], byteOffset: 1 << 26 }), 'ERR_DLPACK_INVALID_LAYOUT', InvalidTensorError, 'offset too large')
  refuse(p.makeTensor({ ptr: p.alloc(64), shape: [2, 2], strides: [1 << 24, 1] }), 'ERR_DLPACK_INVALID_LAYOUT', InvalidTensorError, 'strides reach out')
  t.is(p.deleterCalls(), before + 5 + (devices > 1 ? 1 : 0), 'the deleter ran at each throw')
  // A view inside the allocation is fine.
  const ptr = p.alloc(64)
  p.upload(ptr, new Float32Array(Array.from({ length: 16 }, (_, i) => i)))
  const inside = fromDLPack(p.makeTensor({ ptr, shape: [2, 3], strides: [4, 1], byteOffset: 8 }))
  t.deepEqual(inside.to('cpu').toArray(), [[2, 3, 4], [6, 7, 8]])
  inside.dispose()
  await drainGarbage()
  if (fake) t.is(control!.liveAllocations(), live, 'every refused (owned) allocation was freed by its producer')
})
