// Fault injection and leaks (the fake driver only): driver failures throw ERR_CUDA and leak
// nothing; device allocations and events go back to the baseline after dispose and GC.
//
// Runs in the settings of scripts/test.mjs (the fake driver, a real GPU, no driver, a driver
// without devices; see __test__/harness/fake-cuda.ts and setting.spec.ts, which checks that the
// setting is the one NAPI_DLPACK_CUDA_EXPECT names).

import test from 'ava'

import { native } from '../../dist/native.js'
import { CudaError, fromDLPack, Tensor } from '../../dist/index.js'
import { available, control, fakeLoaded, peer, OUT_OF_MEMORY, INVALID_HANDLE, ILLEGAL_ADDRESS, UNKNOWN, floats } from '../harness/fake-cuda.js'
import { drainGarbage, gcUntil, throwsCode } from '../harness/helpers.js'

/** The loaded libcuda is the fake, with a device (see __test__/harness/fake-cuda.ts). */
const fake = available && fakeLoaded
const fakeOnly = fake ? test.serial : test.serial.skip

const p = peer!

fakeOnly('fault injection (fake): driver failures throw ERR_CUDA and leak nothing', async (t) => {
  await drainGarbage()
  const live = control!.liveAllocations()
  const storages = native.nativeStats().liveStorages
  const cudaError = (fn: () => unknown, what: string, pattern: RegExp) => {
    const error = throwsCode(t, fn, 'ERR_CUDA', CudaError, what)
    t.regex(error.message, pattern, what)
  }
  const fault = (name: string, result: number) => control!.setFault(name, 1, result)
  const clear = (...names: string[]) => names.forEach((name) => control!.setFault(name, 0, UNKNOWN))
  // Allocation failure (whichever allocator the device uses).
  fault('cuMemAllocAsync', OUT_OF_MEMORY)
  fault('cuMemAlloc_v2', OUT_OF_MEMORY)
  cudaError(() => Tensor.empty([1024], 'float32', { device: 'cuda:0' }), 'alloc', /OUT_OF_MEMORY/)
  clear('cuMemAllocAsync', 'cuMemAlloc_v2')
  // memset failure in zeros: the fresh allocation is released.
  fault('cuMemsetD8Async', UNKNOWN)
  cudaError(() => Tensor.zeros([16], 'float32', { device: 'cuda:0' }), 'memset', /UNKNOWN/)
  // Copy failures, both ways.
  fault('cuMemcpyHtoDAsync_v2', UNKNOWN)
  cudaError(() => Tensor.from(new Float32Array(8)).to('cuda:0'), 'host -> device', /cuMemcpyHtoDAsync/)
  const x = Tensor.from(new Float32Array([1, 2])).to('cuda:0')
  fault('cuMemcpyDtoHAsync_v2', ILLEGAL_ADDRESS)
  cudaError(() => x.to('cpu'), 'device -> host', /ILLEGAL_ADDRESS/)
  fault('cuMemcpyDtoDAsync_v2', UNKNOWN)
  cudaError(() => x.to('cuda:0', { copy: true }), 'device -> device', /cuMemcpyDtoDAsync/)
  // Event record and stream wait failures during an export: no capsule, nothing held.
  const s = p.createStream()
  fault('cuEventRecord', INVALID_HANDLE)
  cudaError(() => x.__dlpack__({ stream: s }), 'event record', /cuEventRecord.*INVALID_HANDLE/)
  fault('cuStreamWaitEvent', INVALID_HANDLE)
  cudaError(() => x.__dlpack__({ stream: s }), 'stream wait', /cuStreamWaitEvent/)
  cudaError(() => x.__dlpack__({ stream: 0xdead0000n }), 'a bogus stream handle', /INVALID_HANDLE/)
  // Pointer attribute query failure during an import: refused, the deleter ran.
  const deleted = p.deleterCalls()
  fault('cuPointerGetAttributes', UNKNOWN)
  cudaError(() => fromDLPack(p.makeTensor({ ptr: p.alloc(16), shape: [4] })), 'pointer attributes', /cuPointerGetAttributes/)
  t.is(p.deleterCalls(), deleted + 1)
  // Everything still works afterwards.
  t.deepEqual(Array.from(x.to('cpu').data), [1, 2])
  t.deepEqual(floats(p.consume(x.__dlpack__({ stream: s }), { stream: s, read: true }).bytes!), [1, 2])
  p.destroyStream(s)
  x.dispose()
  t.true(await gcUntil(() => control!.liveAllocations() === live && native.nativeStats().liveStorages === storages))
  t.is(control!.liveAllocations(), live)
})

fakeOnly('leaks (fake): device allocations go back to the baseline after dispose and GC', async (t) => {
  await drainGarbage()
  const live = control!.liveAllocations()
  const events = control!.liveEvents()
  const storages = native.nativeStats().liveStorages
  const s = p.createStream()
  // In a plain function: a suspended async frame would keep the last iteration's tensors.
  const churn = (i: number) => {
    const x = Tensor.zeros([64], 'float32', { device: 'cuda:0' })
    const y = Tensor.from(new Float64Array(8)).to('cuda:0')
    const z = y.to('cuda:0', { copy: true })
    z.to('cpu')
    fromDLPack(x.__dlpack__({ stream: s })) // consumed
    x.__dlpack__() // never consumed: released by GC
    x.__dlpack__({ copy: true }) // a private copy, never consumed
    p.consume(y.__dlpack__({ stream: s }), { read: true })
    if (i % 2 === 0) {
      x.dispose()
      y.dispose()
    }
  }
  for (let i = 0; i < 20; i++) churn(i)
  t.true(control!.liveAllocations() > live)
  t.true(
    await gcUntil(() => control!.liveAllocations() === live && native.nativeStats().liveStorages === storages),
    `live allocations ${control!.liveAllocations()} (baseline ${live})`,
  )
  t.is(control!.liveEvents(), events, 'no event per exchange (one is reused)')
  p.destroyStream(s)
})
