// Views of CUDA tensors (docs/views.md) are metadata only: they address the same allocation,
// export their own layout and read back as the same view of a host tensor does; the host
// kernels (contiguous copies, astype) refuse device memory.
//
// Runs in the settings of scripts/test.mjs (the fake driver, a real GPU, no driver, a driver
// without devices; see __test__/harness/fake-cuda.ts and setting.spec.ts, which checks that the
// setting is the one NAPI_DLPACK_CUDA_EXPECT names).

import test from 'ava'

import { BufferError, fromDLPack, Tensor } from '../../dist/index.js'
import { available, control, fakeLoaded, peer } from '../harness/fake-cuda.js'
import { drainGarbage, throwsCode } from '../harness/helpers.js'

/** The loaded libcuda is the fake (see __test__/harness/fake-cuda.ts). */
const fake = fakeLoaded

// ---------------------------------------------------------------------------------------------
// Conversions (lib/convert.ts): views are metadata only, so they work on device memory; the
// host kernels refuse it.

;(available ? test.serial : test.serial.skip)('permute views CUDA memory in place; contiguous copies and astype refuse it', (t) => {
  const host = Tensor.from(new Float32Array(24).map((_, i) => i), [2, 3, 4])
  const device = host.to('cuda:0')
  const view = device.permute(2, 0, 1)
  t.deepEqual(view.shape, [4, 2, 3])
  t.deepEqual(view.strides, [1, 12, 4])
  t.is(view.dataPointer, device.dataPointer)
  t.is(String(view.device), 'cuda:0')
  t.is(device.contiguous().dataPointer, device.dataPointer, 'already contiguous: shared')
  throwsCode(t, () => view.contiguous(), 'ERR_DLPACK_NOT_CPU', BufferError)
  throwsCode(t, () => device.astype('float64'), 'ERR_DLPACK_NOT_CPU', BufferError)
  // Back on the host, the permuted view converts like any other.
  const back = view.to('cpu').astype('float64')
  t.deepEqual(Array.from(back.data).slice(0, 6), [0, 4, 8, 12, 16, 20])
  for (const tensor of [host, device, view, back]) tensor.dispose()
})

// The views of docs/views.md on device memory: metadata only, so they never touch the device;
// the view addresses the same allocation (data pointer arithmetic), exports the view's own first
// element and strides to another addon, and reads back (to('cpu')) as the same view of the host
// tensor does. Both CUDA storages: our allocation, and a foreign producer's.
;(available ? test.serial : test.serial.skip)('views of CUDA tensors: same allocation, exported with their own layout, same values as on the host', async (t) => {
  await drainGarbage()
  const host = Tensor.from(new Float32Array(60).map((_, i) => i), [3, 4, 5])
  const ptr = peer!.alloc(60 * 4)
  peer!.upload(ptr, host.data)
  const sources: [string, Tensor<'float32'>][] = [
    ['our allocation', host.to('cuda:0')],
    ['a foreign allocation', fromDLPack(peer!.makeTensor({ ptr, shape: [3, 4, 5], owned: false })) as Tensor<'float32'>],
  ]
  const views: [string, (x: Tensor<'float32'>) => Tensor<'float32'>][] = [
    ['reshape', (x) => x.reshape(12, -1)],
    ['view + unsqueeze', (x) => x.view(3, 20).unsqueeze(1)],
    ['squeeze', (x) => x.narrow(0, 1, 1).squeeze(0)],
    ['flatten', (x) => x.flatten(1)],
    ['slice, negative step', (x) => x.slice(2, -1, 0, -2)],
    ['narrow', (x) => x.narrow(1, -3, 2)],
    ['select', (x) => x.select(2, 3)],
    ['expand', (x) => x.select(0, 2).unsqueeze(0).expand(2, -1, -1)],
    ['permuted then sliced', (x) => x.permute(2, 0, 1).slice(0, 1, null, 2).select(1, 1)],
  ]
  const allocations = () => (fake ? control!.callCount('cuMemAllocAsync') + control!.callCount('cuMemAlloc_v2') : 0)
  const allocated = allocations()
  for (const [origin, device] of sources) {
    for (const [name, make] of views) {
      const what = `${origin}: ${name}`
      const expected = make(host)
      const view = make(device)
      t.is(String(view.device), 'cuda:0', what)
      t.deepEqual([view.shape, view.strides, view.readonly], [expected.shape, expected.strides, expected.readonly], what)
      t.is(view.dataPointer - device.dataPointer, expected.dataPointer - host.dataPointer, `${what}: same offset into the allocation`)
      t.deepEqual(view.to('cpu').toArray(), expected.toArray(), `${what}: values`)
      const seen = peer!.consume(view.__dlpack__())
      t.is(seen.data + BigInt(seen.byteOffset), view.dataPointer, `${what}: the consumer's first element`)
      t.deepEqual([seen.shape, seen.strides ?? []], [view.shape, view.strides], what)
      t.is(fromDLPack(view.__dlpack__()).dataPointer, view.dataPointer, what)
    }
  }
  t.is(allocations(), allocated, 'no view allocates device memory')
  throwsCode(t, () => sources[0]![1].transpose(0, 2).reshape(-1), 'ERR_DLPACK_NOT_CONTIGUOUS')
  for (const [, device] of sources) device.dispose()
  host.dispose()
  await drainGarbage()
  peer!.free(ptr)
})
