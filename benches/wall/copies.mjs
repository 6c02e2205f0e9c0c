// `npm run bench` (also alone: `node --expose-gc benches/wall/copies.mjs [--quick]`): the dense-copy
// engine (napi_dlpack::convert::copy_dense, behind contiguous(), toTypedArray(),
// __dlpack__({ copy: true }), astype's same-dtype path and the host side of transfers).
//
//   transpose          contiguous() of the transposed view of a 64 MiB square matrix (uint8
//                      8192x8192, float32 4096x4096), against the plain JS loop
//                      `out[i * n + j] = a[j * n + i]` and, when a python3 with numpy is found
//                      (also in examples/python-bridge/.python-packages, where its
//                      install-deps.sh puts it), numpy's `ascontiguousarray(a.T)`, timed in a
//                      python3 child process within the same rounds.
//   floor              `fill()` of a preallocated array of the same byte size: no copy that
//                      writes that output can take less.
//   small copies       toTypedArray(), contiguous() of a transposed view and
//                      __dlpack__({ copy: true }) of 1 KiB tensors, ns per call (so that the
//                      engine's set-up cost stays visible).
//
// Every case is checked against the JS loop byte for byte before timing. Rounds are
// interleaved (JS, native, numpy, floor, JS, ...); the tables report medians over rounds.
import { spawn, spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { cpus } from 'node:os'
import { createRequire } from 'node:module'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'

const require = createRequire(import.meta.url)
const { Tensor } = require('../../dist/index.js')

const quick = process.argv.includes('--quick')
// --small: only the small copies (before/after comparisons of the set-up cost).
const smallOnly = process.argv.includes('--small')
const ROUNDS = quick ? 5 : 11
const gc = globalThis.gc ?? (() => {})
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]

// ---- numpy, in a child process driven round by round ----------------------------------------
const PY = String.raw`
import sys, time
import numpy as np
rng = np.random.default_rng(1)
arrays = {
  'uint8': rng.integers(0, 256, (8192, 8192), dtype=np.uint8),
  'float32': rng.random((4096, 4096), dtype=np.float32),
}
print('ready', np.__version__, flush=True)
for line in sys.stdin:
  a = arrays[line.strip()]
  start, cpu = time.perf_counter(), time.process_time()
  b = np.ascontiguousarray(a.T)
  ms, cpu_ms = (time.perf_counter() - start) * 1e3, (time.process_time() - cpu) * 1e3
  del b
  print(ms, cpu_ms, flush=True)
`
async function startNumpy() {
  const local = fileURLToPath(new URL('../../examples/python-bridge/.python-packages', import.meta.url))
  const env = { ...process.env }
  if (existsSync(local)) env.PYTHONPATH = [local, env.PYTHONPATH].filter(Boolean).join(':')
  for (const python of ['python3', '/usr/bin/python3']) {
    const probe = spawnSync(python, ['-c', 'import numpy'], { env, stdio: 'ignore' })
    if (probe.status !== 0) continue
    const child = spawn(python, ['-c', PY], { env, stdio: ['pipe', 'pipe', 'inherit'] })
    const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]()
    const first = (await lines.next()).value ?? ''
    if (!first.startsWith('ready')) break
    return {
      version: first.split(' ')[1],
      async time(dtype) {
        child.stdin.write(`${dtype}\n`)
        return ((await lines.next()).value ?? '').split(' ').map(Number)
      },
      close: () => child.stdin.end(),
    }
  }
  return null
}

// ---- the transposes -------------------------------------------------------------------------
let seed = 12345
const random = () => {
  seed = (Math.imul(seed, 1103515245) + 12345) >>> 0
  return seed >>> 24
}
const transposes = (smallOnly ? [] : [
  ['uint8', 8192, Uint8Array],
  ['float32', 4096, Float32Array],
]).map(([dtype, n, Ctor]) => {
  const data = new Ctor(n * n).map(random)
  const tensor = Tensor.from(data, [n, n])
  const jsLoop = () => {
    const out = new Ctor(n * n)
    for (let i = 0; i < n; i++) {
      for (let j = 0; j < n; j++) out[i * n + j] = data[j * n + i]
    }
    return out
  }
  const native = () => tensor.transpose(0, 1).contiguous()
  return { dtype, n, bytes: n * n * Ctor.BYTES_PER_ELEMENT, jsLoop, native, floor: new Ctor(n * n) }
})

const asBytes = (view) => Buffer.from(view.buffer, view.byteOffset, view.byteLength)
for (const { dtype, jsLoop, native } of transposes) {
  const result = native()
  if (!asBytes(jsLoop()).equals(asBytes(result.data))) throw new Error(`transpose ${dtype}: contiguous() differs from the JS loop`)
  result.dispose()
}

/** [wall ms, CPU ms of this process (user + system)]: CPU time is the steadier figure on a
 * machine that other work loads. */
const time = (fn) => {
  const cpu = process.cpuUsage()
  const start = process.hrtime.bigint()
  const result = fn()
  const ms = Number(process.hrtime.bigint() - start) / 1e6
  const used = process.cpuUsage(cpu)
  if (typeof result?.dispose === 'function') result.dispose()
  return [ms, (used.user + used.system) / 1e3]
}

const numpy = smallOnly ? null : await startNumpy()
const kinds = ['js', 'numpy', 'native', 'floor']
const samples = new Map(transposes.map(({ dtype }) => [dtype, Object.fromEntries(kinds.map((k) => [k, { wall: [], cpu: [] }]))]))
const push = (slot, [wall, cpu]) => {
  slot.wall.push(wall)
  slot.cpu.push(cpu)
}
for (let round = 0; round < ROUNDS; round++) {
  for (const { dtype, jsLoop, native, floor } of transposes) {
    const s = samples.get(dtype)
    gc()
    push(s.js, time(jsLoop))
    gc()
    push(s.native, time(native))
    if (numpy) push(s.numpy, await numpy.time(dtype))
    push(s.floor, time(() => floor.fill(1)))
  }
}
numpy?.close()

if (!smallOnly) {
const cpu = `${cpus().length}-core ${cpus()[0]?.model?.trim() ?? process.arch}`
console.log(
  `\n### contiguous() of a transposed 64 MiB matrix (Node ${process.versions.node}, ${cpu}; median of ${ROUNDS} interleaved rounds; ms per call, wall clock / CPU time; GB/s = bytes written / wall time)\n`,
)
console.log('| dtype | JS loop (ms) | numpy ascontiguousarray(a.T) (ms) | contiguous() (ms) | GB/s | vs JS | vs numpy | floor: fill (ms) |')
console.log('|---|---:|---:|---:|---:|---:|---:|---:|')
for (const { dtype, bytes } of transposes) {
  const s = samples.get(dtype)
  const m = Object.fromEntries(kinds.map((k) => [k, [median(s[k].wall), median(s[k].cpu)]]))
  const cell = ([wall, cpu]) => `${wall.toFixed(1)} / ${cpu.toFixed(1)}`
  const ratio = (a, b) => `${(a[0] / b[0]).toFixed(1)}x / ${(a[1] / b[1]).toFixed(1)}x`
  console.log(
    `| ${dtype} | ${cell(m.js)} | ${numpy ? cell(m.numpy) : 'n/a'} | ${cell(m.native)} | ${(bytes / m.native[0] / 1e6).toFixed(2)} | ${ratio(m.js, m.native)} | ${numpy ? ratio(m.numpy, m.native) : 'n/a'} | ${cell(m.floor)} |`,
  )
}
if (!numpy) console.log('\n(numpy not found: run examples/python-bridge/install-deps.sh for the numpy column)')
else console.log(`\n(numpy ${numpy.version})`)
}

// ---- small copies ---------------------------------------------------------------------------
const small = Tensor.from(new Float32Array(256).map(random), [256])
const smallSquare = Tensor.from(new Float32Array(256).map(random), [16, 16]).transpose(0, 1)
const smallCases = [
  ['toTypedArray(), 1 KiB float32', () => small.toTypedArray()],
  ['contiguous() of a transposed 16x16 float32', () => smallSquare.contiguous().dispose()],
  ['__dlpack__({ copy: true }), 1 KiB float32', () => small.__dlpack__({ copy: true })],
]
const BATCH = 2000
const smallSamples = new Map(smallCases.map(([name]) => [name, []]))
for (let round = 0; round < ROUNDS * 3; round++) {
  for (const [name, fn] of smallCases) {
    const start = process.hrtime.bigint()
    for (let i = 0; i < BATCH; i++) fn()
    smallSamples.get(name).push(Number(process.hrtime.bigint() - start) / BATCH)
  }
  gc()
}
console.log(`\n### small copies (median of ${ROUNDS * 3} rounds of ${BATCH} calls, ns per call)\n`)
console.log('| operation | ns |')
console.log('|---|---:|')
for (const [name] of smallCases) console.log(`| ${name} | ${median(smallSamples.get(name)).toFixed(0)} |`)
