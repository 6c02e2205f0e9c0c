// CUDA tensors on their devices: allocation (empty, zeros), host <-> device and device <->
// device copies through to(), and host views of device memory refused.
//
// Runs in the settings of scripts/test.mjs (the fake driver, a real GPU, no driver, a driver
// without devices; see __test__/harness/fake-cuda.ts and setting.spec.ts, which checks that the
// setting is the one NAPI_DLPACK_CUDA_EXPECT names).

import test from 'ava'

import { BufferError, cuda, DLPackTypeError, DTYPE_NAMES, fromDLPack, Tensor } from '../../dist/index.js'
import { available, control, fakeLoaded, peer, bytesOf, settled } from '../harness/fake-cuda.js'
import { drainGarbage, throwsCode } from '../harness/helpers.js'

/** The loaded libcuda is the fake, with a device (see __test__/harness/fake-cuda.ts). */
const fake = available && fakeLoaded

const cpu = (tensor: Tensor) => tensor.to('cpu')

// Registered (as skipped) without a usable driver too: a spec without tests fails in ava.
const withDriver = available ? test.serial : test.serial.skip
const p = peer!
const devices = available ? cuda.deviceCount() : 0

withDriver('isAvailable() and deviceCount()', (t) => {
  t.true(cuda.isAvailable())
  t.true(devices >= 1)
  t.is(cuda.unavailableReason(), undefined)
  if (fake && process.env.FAKE_CUDA_DEVICE_COUNT) t.is(devices, Number(process.env.FAKE_CUDA_DEVICE_COUNT))
})

withDriver('empty and zeros allocate device memory; zeros really zeroes it', async (t) => {
  await drainGarbage()
  const live = fake ? control!.liveAllocations() : 0
  const empty = Tensor.empty([2, 3], 'float32', { device: 'cuda:0' })
  t.is(String(empty.device), 'cuda:0')
  t.deepEqual(empty.__dlpack_device__(), [2, 0])
  t.deepEqual(empty.shape, [2, 3])
  t.deepEqual(empty.strides, [3, 1])
  t.is(empty.dtype, 'float32')
  t.is(empty.nbytes, 24)
  t.true(empty.isContiguous)
  t.not(empty.dataPointer, 0n)
  for (const dtype of ['float32', 'float64', 'int8', 'uint16', 'int64', 'bool', 'float16', 'complex64'] as const) {
    const zeros = Tensor.zeros([3, 5], dtype, { device: 'cuda:0' })
    const back = zeros.to('cpu')
    t.is(back.dtype, dtype)
    t.true(bytesOf(back.data).every((byte) => byte === 0), dtype)
    zeros.dispose()
  }
  if (fake) {
    // The fake fills new device memory with 0xA5: `empty` really skips the memset, `zeros`
    // really does it.
    t.true(bytesOf(cpu(empty).data).every((byte) => byte === 0xa5))
    await settled() // without memory pools, frees run on the release thread
    t.is(control!.liveAllocations(), live + 1)
  }
  const none = Tensor.zeros([0, 4], 'float32', { device: 'cuda:0' })
  t.is(none.numel, 0)
  t.deepEqual(Array.from(none.to('cpu').data), [])
  if (devices > 1) t.deepEqual(Tensor.zeros([2], 'int32', { device: `cuda:${devices - 1}` }).__dlpack_device__(), [2, devices - 1])
  throwsCode(t, () => Tensor.zeros([2], 'float32', { device: `cuda:${devices}` }), 'ERR_DLPACK_DEVICE', BufferError)
  throwsCode(t, () => Tensor.zeros([-1], 'float32', { device: 'cuda:0' }), 'ERR_DLPACK_INVALID_ARGUMENT', DLPackTypeError)
  throwsCode(t, () => Tensor.zeros([2], 'float32', { device: 'rocm:0' }), 'ERR_DLPACK_DEVICE', BufferError)
})

withDriver('values round trip exactly host -> device -> host, for every dtype', (t) => {
  for (const dtype of DTYPE_NAMES) {
    const source = Tensor.zeros([3, 4], dtype)
    const bytes = bytesOf(source.data)
    for (let i = 0; i < bytes.length; i++) bytes[i] = dtype === 'bool' ? (i * 7) % 2 : (i * 131 + 17) % 256
    const device = source.to('cuda:0')
    t.is(device.dtype, dtype)
    t.deepEqual(device.shape, [3, 4])
    const back = device.to('cpu')
    t.is(String(back.device), 'cpu')
    t.deepEqual(bytesOf(back.data), bytes, dtype)
    t.not(back.dataPointer, source.dataPointer)
  }
})

withDriver('to(): strided host tensors arrive row-major; strided device tensors keep their layout', (t) => {
  const base = new Float32Array([0, 1, 2, 3, 4, 5])
  const transposed = Tensor.from(base, [3, 2], { strides: [1, 3] })
  const device = transposed.to('cuda:0')
  t.true(device.isContiguous)
  t.deepEqual(device.to('cpu').toArray(), transposed.toArray())
  // A strided foreign device tensor: copies keep its strides.
  const ptr = p.alloc(6 * 4)
  p.upload(ptr, base)
  const foreign = fromDLPack(p.makeTensor({ ptr, shape: [3, 2], strides: [1, 3] }))
  t.deepEqual(foreign.strides, [1, 3])
  t.deepEqual(foreign.to('cpu').toArray(), [[0, 3], [1, 4], [2, 5]])
  const copy = foreign.to('cuda:0', { copy: true })
  t.deepEqual(copy.strides, [1, 3])
  t.deepEqual(copy.to('cpu').toArray(), [[0, 3], [1, 4], [2, 5]])
  foreign.dispose()
})

withDriver('to(): device -> device copies, and sharing when nothing needs to move', (t) => {
  const x = Tensor.from(new Int32Array([1, 2, 3, 4]), [2, 2]).to('cuda:0')
  const same = x.to('cuda:0')
  t.is(same.dataPointer, x.dataPointer, 'same device: shared')
  const copy = x.to('cuda:0', { copy: true })
  t.not(copy.dataPointer, x.dataPointer)
  t.deepEqual(copy.to('cpu').toArray(), [[1, 2], [3, 4]])
  t.deepEqual(fromDLPack(x, { copy: true }).to('cpu').toArray(), [[1, 2], [3, 4]])
  t.is(String(fromDLPack(x, { copy: true }).device), 'cuda:0')
  const host = x.to('cpu')
  t.is(host.to('cpu').dataPointer, host.dataPointer)
  t.not(host.to('cpu', { copy: true }).dataPointer, host.dataPointer)
  if (devices > 1) {
    const other = x.to('cuda:1')
    t.is(String(other.device), 'cuda:1')
    t.deepEqual(other.to('cpu').toArray(), [[1, 2], [3, 4]])
    t.deepEqual(other.to('cuda:0').to('cpu').toArray(), [[1, 2], [3, 4]])
  }
  throwsCode(t, () => x.to('vulkan:0'), 'ERR_DLPACK_DEVICE', BufferError)
  throwsCode(t, () => x.to(`cuda:${devices}`), 'ERR_DLPACK_DEVICE', BufferError)
})

withDriver('.data and other host views of CUDA tensors throw, pointing to .to("cpu")', (t) => {
  const x = Tensor.zeros([2], 'float32', { device: 'cuda:0' })
  for (const [what, fn] of [
    ['data', () => x.data],
    ['getData', () => x.getData({ allowReadOnly: true })],
    ['toTypedArray', () => x.toTypedArray()],
    ['toArray', () => x.toArray()],
  ] as const) {
    const error = throwsCode(t, fn, 'ERR_DLPACK_NOT_CPU', BufferError, what)
    t.regex(error.message, /\.to\('cpu'\)/, what)
  }
  t.deepEqual(x.to('cpu').toArray(), [0, 0])
})
