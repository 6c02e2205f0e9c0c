// The CUDA setting: the run is in the setting NAPI_DLPACK_CUDA_EXPECT names (so a broken
// library path cannot silently skip the CUDA suite), and with no usable driver every CUDA call
// throws ERR_CUDA_UNAVAILABLE and the process survives.
//
// Every spec under __test__/cuda/ runs in three settings (scripts/test.mjs runs all of them):
// - against the fake CUDA driver, a TEST DOUBLE (__test__/native/fake-cuda): start the process with
//   LD_LIBRARY_PATH=<repo>/target/fake-cuda (cudarc dlopens libcuda.so at the first CUDA call;
//   the variable is read at process start). Everything runs, including what only the fake can
//   show: driver call counts, deferred stream execution (a missing wait gives stale data),
//   fault injection, live allocation counts.
// - on a real GPU: leave target/fake-cuda off LD_LIBRARY_PATH and set NAPI_DLPACK_CUDA_EXPECT=gpu.
//   Every behavioural test runs; those needing the fake's control API are skipped.
// - with no usable driver (no libcuda, or a driver without devices): every CUDA call must throw
//   ERR_CUDA_UNAVAILABLE, and the process must survive.
// NAPI_DLPACK_CUDA_EXPECT=fake|gpu|none makes this spec fail when the setting is not the one
// expected (so a broken library path cannot silently skip the suite); unset, it adapts.

import test from 'ava'

import { native } from '../../dist/native.js'
import { cuda, CudaError, fromDLPack, isCapsuleConsumed, Tensor } from '../../dist/index.js'
import { c } from '../harness/c-addon.js'
import { available, control, fakeLoaded, expected } from '../harness/fake-cuda.js'
import { drainGarbage, throwsCode } from '../harness/helpers.js'

/** The loaded libcuda is the fake (see __test__/harness/fake-cuda.ts). */
const fake = fakeLoaded

/** The elements of a (number-valued) tensor, copied to the host. */
const values = (tensor: Tensor) => Array.from(tensor.to('cpu').data as ArrayLike<number>)

// ---------------------------------------------------------------------------------------------
// The setting

test.serial('the CUDA setting is the expected one', (t) => {
  t.log(`available=${available} fake=${fake} devices=${cuda.deviceCount()} reason=${cuda.unavailableReason() ?? '-'}`)
  if (expected === 'fake') {
    t.true(available, `the fake CUDA driver should be usable: ${cuda.unavailableReason() ?? ''} (is <repo>/target/fake-cuda first on LD_LIBRARY_PATH?)`)
    t.true(fake, 'the loaded libcuda is not the fake')
  } else if (expected === 'gpu') {
    t.true(available, `a real GPU should be usable: ${cuda.unavailableReason() ?? ''}`)
    t.false(fake, 'the fake CUDA driver is loaded: take target/fake-cuda off LD_LIBRARY_PATH')
  } else if (expected === 'none') {
    t.false(available, 'CUDA should be unavailable in this setting')
  } else {
    // No expectation set: the probe must at least be self-consistent.
    t.is(available, cuda.deviceCount() > 0)
  }
})

// ---------------------------------------------------------------------------------------------
// No usable driver: every CUDA call throws ERR_CUDA_UNAVAILABLE, nothing crashes

if (!available) {
  test.serial('no driver: isAvailable() is false, deviceCount() is 0, and the reason is given', (t) => {
    t.false(cuda.isAvailable())
    t.is(cuda.deviceCount(), 0)
    t.is(typeof cuda.unavailableReason(), 'string')
    t.false(native.cudaIsAvailable())
    t.is(native.cudaDeviceCount(), 0)
  })

  test.serial('no driver: every CUDA operation throws ERR_CUDA_UNAVAILABLE', async (t) => {
    const unavailable = (fn: () => unknown, what: string) => throwsCode(t, fn, 'ERR_CUDA_UNAVAILABLE', CudaError, what)
    unavailable(() => Tensor.empty([2], 'float32', { device: 'cuda:0' }), 'empty')
    unavailable(() => Tensor.zeros([2, 3], 'int32', { device: 'cuda' }), 'zeros')
    unavailable(() => Tensor.zeros([0], 'float32', { device: 'cuda:1' }), 'zeros, empty shape, device 1')
    const host = Tensor.from(new Float32Array([1, 2]))
    unavailable(() => host.to('cuda:0'), 'to')
    unavailable(() => host.to([2, 0]), 'to [2, 0]')
    t.is((t.throws(() => native.cudaSynchronize(0)) as { code?: string }).code, 'ERR_CUDA_UNAVAILABLE')
    // A CUDA capsule cannot be checked without a driver: refused, and its deleter runs once.
    await drainGarbage()
    const before = c.deleterCalls()
    const capsule = c.makeTensor({ device: [2, 0], shape: [4], versioned: true })
    unavailable(() => fromDLPack(capsule), 'import of a CUDA capsule')
    t.true(isCapsuleConsumed(capsule))
    t.is(c.deleterCalls(), before + 1)
    // Still unavailable on a second try (the answer is cached, and nothing panicked).
    unavailable(() => Tensor.empty([1], 'uint8', { device: 'cuda:0' }), 'second try')
    // CPU work is unaffected.
    t.deepEqual(Array.from(host.to('cpu').data), [1, 2])
    t.deepEqual(values(fromDLPack(host.__dlpack__())), [1, 2])
  })

  ;(fake ? test.serial : test.serial.skip)('no driver: the fake, loaded with no device, saw no allocation', (t) => {
    t.is(control!.liveAllocations(), 0)
    t.is(control!.callCount('cuMemAllocAsync') + control!.callCount('cuMemAlloc_v2'), 0)
  })
}
