// Host <-> CUDA copies (issue 27): uploads straight from a contiguous tensor's own memory (no
// intermediate host copy), copies into an existing tensor (`dst.copy_(src, { stream })`,
// `src.to(device, { out })`) in every direction, their coded errors, stream ordering and fault
// injection.
//
// Runs where every spec of __test__/cuda/ runs (scripts/test.mjs: against the fake CUDA driver, a
// test double, with 2 devices and without memory pools; on a GPU; without a driver). What needs
// the fake's control API (call counts, the host address a copy read or wrote, deferred streams,
// faults) is skipped elsewhere; without a driver only the host-side checks run.
import test from 'ava'

import { BufferError, DLPackTypeError, Tensor, cuda, fromDLPack } from '../../dist/index.js'
import { native } from '../../dist/native.js'
import { UNKNOWN, available, bytesOf, control, deferred, fakeLoaded, peer } from '../harness/fake-cuda.js'
import { drainGarbage, throwsCode } from '../harness/helpers.js'

const fake = available && fakeLoaded
const devices = available ? cuda.deviceCount() : 0

const withCuda = available ? test.serial : test.serial.skip
const fakeOnly = fake ? test.serial : test.serial.skip

const seq = (n: number, from = 0) => Float32Array.from({ length: n }, (_, i) => from + i)

// ---------------------------------------------------------------------------------------------
// Host <-> host: copy_ and to('cpu', { out }) need no driver

test('copy_ between host tensors: strided sources, into a contiguous destination, returning it', (t) => {
  const src = Tensor.from(seq(12), [3, 4]).transpose(0, 1)
  const dst = Tensor.zeros([4, 3], 'float32')
  const pointer = dst.dataPointer
  t.is(dst.copy_(src), dst)
  t.is(dst.dataPointer, pointer, 'written in place')
  t.deepEqual(dst.toArray(), src.toArray())
  const out = Tensor.empty([4, 3], 'float32')
  t.is(src.to('cpu', { out }), out)
  t.deepEqual(out.toArray(), src.toArray())
  // Every width through the engine: a reversed int64 vector, a transposed bool matrix.
  const big = Tensor.from(new BigInt64Array([1n, 2n, 3n]), [3], { strides: [-1], offset: 2 })
  t.deepEqual(Array.from(Tensor.zeros([3], 'int64').copy_(big).data as BigInt64Array), [3n, 2n, 1n])
  const bools = Tensor.from(new Uint8Array([1, 0, 0, 1, 1, 0]), [3, 2], { dtype: 'bool' }).transpose(0, 1)
  t.deepEqual(Array.from(Tensor.zeros([2, 3], 'bool').copy_(bools).toTypedArray() as Uint8Array), [1, 0, 1, 0, 1, 0])
  // Zero elements.
  t.deepEqual(Tensor.zeros([0, 3], 'float32').copy_(Tensor.zeros([0, 3], 'float32')).shape, [0, 3])
})

test('copy_ refuses mismatches with stable codes, before writing anything', (t) => {
  const src = Tensor.from(seq(6), [2, 3])
  const dst = Tensor.zeros([2, 3], 'float32')
  throwsCode(t, () => dst.copy_(Tensor.zeros([3, 2], 'float32')), 'ERR_DLPACK_SHAPE', undefined, 'shape')
  throwsCode(t, () => dst.copy_(Tensor.zeros([2, 3], 'float64')), 'ERR_DLPACK_DTYPE_MISMATCH', undefined, 'dtype')
  throwsCode(t, () => Tensor.from(seq(6), [2, 3], { readonly: true }).copy_(src), 'ERR_DLPACK_READ_ONLY', undefined, 'read-only')
  throwsCode(t, () => Tensor.zeros([3, 2], 'float32').transpose(0, 1).copy_(src), 'ERR_DLPACK_NOT_CONTIGUOUS', undefined, 'strided destination')
  throwsCode(t, () => src.copy_(src), 'ERR_DLPACK_INVALID_ARGUMENT', undefined, 'itself')
  const whole = Tensor.from(seq(8), [8])
  throwsCode(t, () => whole.slice(0, 0, 4).copy_(whole.slice(0, 2, 6)), 'ERR_DLPACK_INVALID_ARGUMENT', undefined, 'overlap')
  throwsCode(t, () => dst.copy_({} as Tensor), 'ERR_DLPACK_INVALID_ARGUMENT', DLPackTypeError, 'not a tensor')
  throwsCode(t, () => src.to('cpu', { out: {} as Tensor }), 'ERR_DLPACK_INVALID_ARGUMENT', DLPackTypeError, 'out not a tensor')
  throwsCode(t, () => dst.copy_(src, { stream: 'x' as unknown as bigint }), 'ERR_DLPACK_INVALID_ARGUMENT', undefined, 'bad stream')
  t.deepEqual(Array.from(dst.data), [0, 0, 0, 0, 0, 0], 'nothing written')
  const disposed = Tensor.zeros([2, 3], 'float32')
  disposed.dispose()
  throwsCode(t, () => dst.copy_(disposed), 'ERR_TENSOR_DISPOSED', undefined, 'disposed source')
  throwsCode(t, () => disposed.copy_(src), 'ERR_TENSOR_DISPOSED', undefined, 'disposed destination')
})

// ---------------------------------------------------------------------------------------------
// Host -> device without an intermediate copy

withCuda("to('cuda') uploads a contiguous tensor straight from its memory; strided ones are gathered first", async (t) => {
  for (const [shape, dtype] of [
    [[0], 'float32'],
    [[1], 'uint8'],
    [[3, 5], 'float32'],
    [[64, 65], 'int16'],
  ] as const) {
    const numel = shape.reduce((a: number, b: number) => a * b, 1)
    const host = Tensor.from(new Uint8Array(numel * (dtype === 'float32' ? 4 : dtype === 'int16' ? 2 : 1)).map((_, i) => i * 7), [...shape], { dtype })
    await drainGarbage()
    if (fake) control!.reset()
    const device = host.to('cuda:0')
    t.deepEqual(bytesOf(device.to('cpu').data), bytesOf(host.data), `${dtype} ${shape}`)
    if (fake && numel > 0) {
      t.is(control!.callCount('cuMemcpyHtoDAsync_v2'), 1)
      t.is(BigInt(control!.lastHostSource()), host.dataPointer, 'read from the tensor itself')
    }
    device.dispose()
  }
  const strided = Tensor.from(seq(12), [3, 4]).transpose(0, 1)
  if (fake) control!.reset()
  const device = strided.to('cuda:0')
  t.deepEqual(device.to('cpu').toArray(), strided.toArray())
  if (fake) t.not(BigInt(control!.lastHostSource()), strided.dataPointer, 'gathered into row-major memory first')
})

fakeOnly('an upload from page-locked foreign memory has completed when to() returns', async (t) => {
  // The driver reads pinned memory in stream order (later), unlike pageable memory: writing the
  // source right after to() must not change what arrived.
  const pinned = peer!.hostAlloc(16)
  try {
    const source = fromDLPack(peer!.makeTensor({ ptr: pinned, shape: [4], device: [1, 0], owned: false }))
    const view = new Float32Array(source.data.buffer, source.data.byteOffset, 4)
    view.set([1, 2, 3, 4])
    await deferred(() => {
      const device = source.to('cuda:0')
      view.set([9, 9, 9, 9])
      t.deepEqual(Array.from(device.to('cpu').data as Float32Array), [1, 2, 3, 4])
      device.dispose()
    })
    source.dispose()
  } finally {
    await drainGarbage()
    peer!.hostFree(pinned)
  }
})

// ---------------------------------------------------------------------------------------------
// Copies into existing tensors

withCuda('copy_ and to({ out }): host -> device, device -> host, device -> device, in place', async (t) => {
  const src = Tensor.from(seq(6, 1), [2, 3])
  const onDevice = Tensor.zeros([2, 3], 'float32', { device: 'cuda:0' })
  const pointer = onDevice.dataPointer
  if (fake) control!.reset()
  t.is(onDevice.copy_(src), onDevice)
  t.is(onDevice.dataPointer, pointer)
  if (fake) t.is(BigInt(control!.lastHostSource()), src.dataPointer, 'H2D from the source itself')
  const back = Tensor.zeros([2, 3], 'float32')
  if (fake) control!.reset()
  t.is(onDevice.to('cpu', { out: back }), back)
  if (fake) t.is(BigInt(control!.lastHostDestination()), back.dataPointer, 'D2H into the destination itself')
  t.deepEqual(back.toArray(), [[1, 2, 3], [4, 5, 6]])
  // Strided host source into device memory; strided device source into host memory.
  onDevice.copy_(Tensor.from(seq(6, 10), [3, 2]).transpose(0, 1))
  t.deepEqual(onDevice.to('cpu').toArray(), [[10, 12, 14], [11, 13, 15]])
  const ptr = peer!.alloc(24)
  try {
    peer!.upload(ptr, seq(6, 20))
    const stridedDevice = fromDLPack(peer!.makeTensor({ ptr, shape: [2, 3], strides: [1, 2], owned: false }))
    t.deepEqual(Tensor.zeros([2, 3], 'float32').copy_(stridedDevice).toArray(), [[20, 22, 24], [21, 23, 25]])
    // Device -> device: contiguous (one device copy), strided (through the host).
    const other = Tensor.zeros([2, 3], 'float32', { device: 'cuda:0' })
    if (fake) control!.reset()
    other.copy_(onDevice)
    if (fake) t.is(control!.callCount('cuMemcpyDtoDAsync_v2'), 1)
    t.deepEqual(other.to('cpu').toArray(), [[10, 12, 14], [11, 13, 15]])
    other.copy_(stridedDevice)
    t.deepEqual(other.to('cpu').toArray(), [[20, 22, 24], [21, 23, 25]])
    // Into a producer's memory.
    const foreignDst = fromDLPack(peer!.makeTensor({ ptr, shape: [6], owned: false }))
    foreignDst.copy_(Tensor.from(seq(6, 30)))
    t.deepEqual(Array.from(foreignDst.to('cpu').data as Float32Array), Array.from(seq(6, 30)))
    if (devices > 1) {
      const far = Tensor.zeros([2, 3], 'float32', { device: 'cuda:1' })
      t.is(onDevice.to('cuda:1', { out: far }), far)
      t.deepEqual(far.to('cpu').toArray(), [[10, 12, 14], [11, 13, 15]])
      far.dispose()
    }
    stridedDevice.dispose()
    foreignDst.dispose()
    other.dispose()
  } finally {
    await drainGarbage()
    native.cudaSynchronize(0)
    peer!.free(ptr)
  }
})

withCuda('copy_ across devices refuses mismatches with stable codes', (t) => {
  const onDevice = Tensor.zeros([2, 3], 'float32', { device: 'cuda:0' })
  throwsCode(t, () => onDevice.copy_(Tensor.zeros([3, 2], 'float32')), 'ERR_DLPACK_SHAPE', undefined, 'shape')
  throwsCode(t, () => onDevice.copy_(Tensor.zeros([2, 3], 'int32')), 'ERR_DLPACK_DTYPE_MISMATCH', undefined, 'dtype')
  throwsCode(t, () => Tensor.zeros([3, 2], 'float32', { device: 'cuda:0' }).transpose(0, 1).copy_(onDevice), 'ERR_DLPACK_NOT_CONTIGUOUS', undefined, 'strided destination')
  throwsCode(t, () => onDevice.copy_(onDevice), 'ERR_DLPACK_INVALID_ARGUMENT', undefined, 'itself')
  throwsCode(t, () => onDevice.to('cpu', { out: Tensor.zeros([2, 3], 'float32', { device: 'cuda:0' }) }), 'ERR_DLPACK_DEVICE', BufferError, 'out elsewhere')
  throwsCode(t, () => Tensor.zeros([2, 3], 'float32').to('cuda:0', { out: Tensor.zeros([2, 3], 'float32') }), 'ERR_DLPACK_DEVICE', BufferError, 'out on the host')
})

fakeOnly('copy_ with a stream: after the work already on it, and before its later work', async (t) => {
  const stream = peer!.createStream()
  const ptr = peer!.alloc(16)
  try {
    peer!.upload(ptr, seq(4))
    const producer = fromDLPack(peer!.makeTensor({ ptr, shape: [4], owned: false }))
    const dst = Tensor.zeros([4], 'float32', { device: 'cuda:0' })
    await deferred(() => {
      // The producer writes on its stream; the copy ordered after that stream sees the write.
      peer!.scribble(ptr, 16, stream, 0x3f)
      control!.reset()
      dst.copy_(producer, { stream })
      t.true(control!.callCount('cuStreamWaitEvent') >= 2, 'waits both ways')
      t.true(bytesOf(dst.to('cpu').data).every((byte) => byte === 0x3f))
    })
    // Negative control: without the stream, the copy may run before the producer's write.
    peer!.upload(ptr, seq(4))
    await deferred(() => {
      peer!.scribble(ptr, 16, stream, 0x3f)
      dst.copy_(producer)
      t.deepEqual(Array.from(dst.to('cpu').data as Float32Array), [0, 1, 2, 3], 'the race is visible')
      peer!.syncStream(stream)
    })
    producer.dispose()
    dst.dispose()
  } finally {
    await drainGarbage()
    native.cudaSynchronize(0)
    peer!.free(ptr)
    peer!.destroyStream(stream)
  }
})

fakeOnly('a failing copy throws ERR_CUDA and leaks nothing', async (t) => {
  await drainGarbage()
  native.cudaSynchronize(0)
  const live = control!.liveAllocations()
  const host = Tensor.from(seq(8))
  control!.setFault('cuMemcpyHtoDAsync_v2', 1, UNKNOWN)
  throwsCode(t, () => host.to('cuda:0'), 'ERR_CUDA', undefined, 'to()')
  const dst = Tensor.zeros([8], 'float32', { device: 'cuda:0' })
  control!.setFault('cuMemcpyHtoDAsync_v2', 1, UNKNOWN)
  throwsCode(t, () => dst.copy_(host), 'ERR_CUDA', undefined, 'copy_ H2D')
  control!.setFault('cuMemcpyDtoHAsync_v2', 1, UNKNOWN)
  throwsCode(t, () => dst.to('cpu', { out: Tensor.zeros([8], 'float32') }), 'ERR_CUDA', undefined, 'copy_ D2H')
  dst.dispose()
  await drainGarbage()
  native.cudaSynchronize(0)
  t.is(control!.liveAllocations(), live, 'the failed upload freed its buffer')
})
