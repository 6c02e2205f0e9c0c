// Instructions per call of the small copies of benches/wall/copies.mjs (the engine's set-up cost),
// counted by callgrind: wall time on a shared 2-core machine is noise, instruction counts are
// not. Each case runs twice in its own `node --predictable` process with LOW and HIGH calls; the
// difference divided by HIGH - LOW is reported, so start-up and teardown cancel out.
//
//   node benches/callgrind/copies.mjs [package root]     (needs valgrind; takes minutes)
//
// The package root (default: this checkout) is where dist/ and the .node are loaded from: give
// a copy of another build's dist/ (its addon is in dist/binding/) to compare two builds.
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { batchedProgram, instructions, perOperation } from './runner.mjs'

const root = resolve(process.argv[2] ?? join(dirname(fileURLToPath(import.meta.url)), '..', '..'))
const LOW = 2000
const HIGH = 12000
const CASES = {
  'toTypedArray(), 1 KiB float32': 'small.toTypedArray()',
  'contiguous() of a transposed 16x16 float32': 'square.contiguous().dispose()',
  '__dlpack__({ copy: true }), 1 KiB float32': 'small.__dlpack__({ copy: true })',
  'floor: Float32Array.prototype.slice(), 1 KiB': 'plain.slice()',
}

function program(body, n) {
  return batchedProgram(
    `const { Tensor } = require(${JSON.stringify(join(root, 'dist', 'index.js'))})
const plain = new Float32Array(256).map((_, i) => i)
const small = Tensor.from(plain.slice(), [256])
const square = Tensor.from(plain.slice(), [16, 16]).transpose(0, 1)`,
    body,
    n,
  )
}

console.log(`\n### small copies: instructions per call (callgrind, Node ${process.versions.node}; ${root})\n`)
console.log('| operation | instructions |')
console.log('|---|---:|')
for (const [name, body] of Object.entries(CASES)) {
  const count = (n) => instructions(process.execPath, ['--predictable', '--expose-gc', '-e', program(body, n)])
  console.log(`| ${name} | ${Math.round(perOperation(count, LOW, HIGH))} |`)
}
