// Counts the CUDA driver calls of each DLPack exchange, using the fake CUDA driver (a TEST
// DOUBLE in __test__/native/fake-cuda, which counts every entry point call and every host
// synchronisation). Prints the Markdown table of docs/cuda.md.
//
//   node scripts/cuda-driver-calls.mjs
//
// It builds what it needs (addon, fake driver, peer addon) and restarts itself with the fake
// on LD_LIBRARY_PATH (read only at process start). __test__/cuda/streams.spec.ts asserts the bounds.
import { execFileSync } from 'node:child_process'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))
const fakeDir = join(root, 'target', 'fake-cuda')

if (!process.env.NAPI_DLPACK_DRIVER_CALLS_CHILD) {
  execFileSync(process.execPath, [join(root, 'scripts', 'ensure-built.mjs')], { stdio: 'inherit' })
  for (const fixture of ['fake-cuda', 'cuda-peer']) {
    execFileSync('bash', [join(root, '__test__', 'native', fixture, 'build.sh')], { stdio: ['ignore', 'ignore', 'inherit'] })
  }
  const env = { ...process.env, NAPI_DLPACK_DRIVER_CALLS_CHILD: '1', LD_LIBRARY_PATH: [fakeDir, process.env.LD_LIBRARY_PATH].filter(Boolean).join(':') }
  for (const key of ['FAKE_CUDA_DEFERRED', 'FAKE_CUDA_FAULTS', 'FAKE_CUDA_DEVICE_COUNT', 'FAKE_CUDA_MEMORY_POOLS', 'LD_PRELOAD']) delete env[key]
  execFileSync(process.execPath, ['--expose-gc', fileURLToPath(import.meta.url)], { stdio: 'inherit', env })
  process.exit(0)
}

const require = createRequire(import.meta.url)
const { Tensor, cuda, fromDLPack } = require(join(root, 'dist', 'index.js'))
const control = require(join(fakeDir, 'control.node'))
const peer = require(join(root, 'target', 'cuda-peer', 'cuda_peer.node'))

if (!cuda.isAvailable() || !control.isLoaded()) {
  console.error(`the fake CUDA driver did not load: ${cuda.unavailableReason() ?? 'a real driver was found'}`)
  process.exit(1)
}

const turn = () => new Promise((resolve) => setImmediate(resolve))
async function drain() {
  for (let i = 0; i < 4; i++) {
    global.gc()
    await turn()
  }
}

/** Driver calls of `fn` alone, as counted by the fake. */
async function measure(fn) {
  await drain()
  control.reset()
  fn()
  const counts = control.counts()
  return { counts, hostSyncs: control.hostSyncs() }
}

const x = Tensor.from(new Float32Array(1024)).to('cuda:0')
const stream = peer.createStream()
const streams = [
  ['unset (legacy default)', undefined],
  ['`1n` (legacy default)', 1n],
  ['`-1n` (no synchronisation)', -1n],
  ['`2n` (per-thread default)', 2n],
  ['a stream handle', stream],
]

const rows = []
const row = (what, stream, { counts, hostSyncs }) => {
  const { cuEventRecord = 0, cuStreamWaitEvent = 0, cuEventCreate = 0, ...rest } = counts
  const others = Object.entries(rest).map(([name, n]) => `${name} ×${n}`).join(', ') || '–'
  rows.push(`| ${what} | ${stream} | ${cuEventRecord} | ${cuStreamWaitEvent} | ${cuEventCreate} | ${hostSyncs} | ${others} |`)
}

row('first export to another stream (creates the reusable event)', 'a stream handle', await measure(() => peer.consume(x.__dlpack__({ stream }))))
for (const [label, value] of streams) {
  let capsule
  row('export: `x.__dlpack__({ stream })`', label, await measure(() => (capsule = x.__dlpack__({ stream: value }))))
  row('import of our own export: `fromDLPack(capsule, { stream })`', label, await measure(() => fromDLPack(capsule, { stream: value })))
  const foreign = peer.makeTensor({ ptr: peer.alloc(4096), shape: [1024] })
  row('import of a foreign CUDA capsule: `fromDLPack(capsule, { stream })`', label, await measure(() => fromDLPack(foreign, { stream: value })))
}
row('`fromDLPack(x, { stream })` (a Tensor)', 'a stream handle', await measure(() => fromDLPack(x, { stream })))
row('for comparison: `host.to("cuda:0")` (4 KiB)', '–', await measure(() => Tensor.from(new Float32Array(1024)).to('cuda:0')))
row('for comparison: `x.to("cpu")` (4 KiB)', '–', await measure(() => x.to('cpu')))
peer.destroyStream(stream)

console.log('| exchange | consumer stream | cuEventRecord | cuStreamWaitEvent | cuEventCreate | host syncs | other driver calls |')
console.log('| --- | --- | --- | --- | --- | --- | --- |')
for (const line of rows) console.log(line)
