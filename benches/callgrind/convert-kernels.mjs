// Instructions per element of the conversion kernels alone (crates/napi-dlpack/examples/
// convert_kernels.rs: no JS, no allocation, 1920x1080x3 uint8; transpose_u8/transpose_f32: the
// transposed view of a 4 MiB square matrix, per element of it), counted through the one
// callgrind runner: each case runs with 1 and 3 calls and the difference is divided by 2 calls
// and the element count. Deterministic (unlike the whole-process counts of convert.mjs here,
// which move with V8's background threads and GC). Needs valgrind.
//
//   node benches/callgrind/convert-kernels.mjs [case ...]
import { execFileSync } from 'node:child_process'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

import { instructions, perOperation } from './runner.mjs'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
execFileSync('cargo', ['build', '--release', '-q', '-p', 'napi-dlpack', '--example', 'convert_kernels'], { cwd: root, stdio: 'inherit' })
const binary = join(root, 'target', 'release', 'examples', 'convert_kernels')
const elements = (name) => ({ transpose_u8: 2048 * 2048, transpose_f32: 1024 * 1024 })[name] ?? 1080 * 1920 * 3
const wanted = process.argv.slice(2)
console.log('| case | instructions per element |\n|---|---:|')
for (const name of wanted.length ? wanted : ['normalise', 'chw_u8', 'contiguous', 'scale', 'plain', 'transpose_u8', 'transpose_f32']) {
  const perCall = perOperation((calls) => instructions(binary, [name, String(calls)]), 1, 3)
  console.log(`| ${name} | ${(perCall / elements(name)).toFixed(2)} |`)
}
