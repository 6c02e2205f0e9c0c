// Builds toArray() results at its cap (2^24 values, lib/to-array.ts MAX_TO_ARRAY_VALUES) in the
// heaviest shapes — 2^24 empty nested arrays, 2^23 complex [re, im] pairs, 2^24 bigints — and
// checks one past the cap is refused with a code. Run under any runtime, for the measurements
// in docs/api.md and by __test__/core/to-array-cap.spec.ts:
//   node __test__/runtimes/to-array-cap.cjs [case ...]   (bun / deno run -A likewise)
'use strict'
const { Tensor } = require('../../dist/index.js')
const cap = 2 ** 24
const cases = {
  nested: [() => Tensor.zeros([cap, 0]), (out) => out.length === cap && out[cap - 1].length === 0],
  complex: [() => Tensor.zeros([cap / 2], 'complex128'), (out) => out.length === cap / 2 && out[0].length === 2],
  bigint: [() => Tensor.zeros([cap], 'int64'), (out) => out.length === cap && out[0] === 0n],
}
const chosen = process.argv.slice(2).length > 0 ? process.argv.slice(2) : Object.keys(cases)
const runtime = 'Bun' in globalThis ? `bun ${globalThis.Bun.version}` : 'Deno' in globalThis ? `deno ${globalThis.Deno.version.deno}` : `node ${process.version}`
for (const name of chosen) {
  const [make, check] = cases[name]
  const started = Date.now()
  let out = make().toArray()
  const ok = check(out)
  const seconds = (Date.now() - started) / 1000
  const rss = process.memoryUsage().rss
  out = undefined
  console.log(JSON.stringify({ runtime, case: name, ok, seconds, rssMiB: Math.round(rss / 2 ** 20) }))
  if (!ok) process.exitCode = 1
}
let refused = ''
try {
  Tensor.zeros([cap + 1, 0]).toArray()
} catch (error) {
  refused = error.code
}
console.log(JSON.stringify({ runtime, pastCap: refused }))
if (refused !== 'ERR_DLPACK_TOO_LARGE') process.exitCode = 1
