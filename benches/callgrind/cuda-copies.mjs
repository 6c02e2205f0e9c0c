// Instructions per call of small host <-> CUDA copies (1 KiB), counted by callgrind against the
// fake CUDA driver (a test double, __test__/native/fake-cuda; built when missing): what our side
// of a copy costs, the fake's own work included (a few hundred instructions, the same for every
// build). Copies below the staging threshold (256 KiB) must cost what they cost before the
// pinned staging pipeline: compare two builds by giving the other one's package root.
//
//   node benches/callgrind/cuda-copies.mjs [package root]     (needs valgrind; takes minutes)
//
// The package root (default: this checkout) is where dist/ and the addon are loaded from.
import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { batchedProgram, instructions, perOperation } from './runner.mjs'

const here = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
const root = resolve(process.argv[2] ?? here)
const fakeDir = join(here, 'target', 'fake-cuda')
if (!existsSync(join(fakeDir, 'libcuda.so'))) execFileSync('bash', [join(here, '__test__', 'native', 'fake-cuda', 'build.sh')], { stdio: 'inherit' })
const LOW = 2000
const HIGH = 8000
const CASES = {
  "to('cuda:0') of 1 KiB": "small.to('cuda:0').dispose()",
  "to('cpu') of 1 KiB": "onDevice.to('cpu')",
  'copy_ 1 KiB host -> device': 'deviceDst.copy_(small)',
  "to('cpu', { out }) of 1 KiB": 'onDevice.to("cpu", { out: hostDst })',
}

function program(body, n) {
  return batchedProgram(
    `const { Tensor, cuda } = require(${JSON.stringify(join(root, 'dist', 'index.js'))})
if (!cuda.isAvailable()) throw new Error('the fake CUDA driver did not load: ' + cuda.unavailableReason())
const small = Tensor.from(new Float32Array(256).map((_, i) => i))
const onDevice = small.to('cuda:0')
const deviceDst = Tensor.empty([256], 'float32', { device: 'cuda:0' })
const hostDst = Tensor.zeros([256], 'float32')`,
    body,
    n,
  )
}

console.log(`\n### small host <-> CUDA copies (fake driver): instructions per call (callgrind, Node ${process.versions.node}; ${root})\n`)
console.log('| operation | instructions |')
console.log('|---|---:|')
for (const [name, body] of Object.entries(CASES)) {
  const count = (n) =>
    instructions(process.execPath, ['--predictable', '--expose-gc', '-e', program(body, n)], { LD_LIBRARY_PATH: fakeDir })
  console.log(`| ${name} | ${Math.round(perOperation(count, LOW, HIGH))} |`)
}
