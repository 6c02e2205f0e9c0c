// What the header's helpers cost per borrow with the exchange key made on every call
// (`napi_dlpack_exchange_borrow`, a `Symbol.for` call each time) and kept per environment
// (`napi_dlpack_exchange_borrow_by_key` with `napi_dlpack_keys`, include/napi_dlpack.h part 5),
// in instructions (callgrind), above an empty native call of one argument. The C fixture
// __test__/native/exchange-c (benchBorrow, benchBorrowKeyed, benchFloor) borrows a napi-dlpack
// Tensor through its own exchange property and releases it. Each case runs twice in its own
// `node --predictable` process, with LOW and HIGH calls; the difference divided by HIGH - LOW is
// the cost per call.
//
//   node benches/callgrind/header-keys.mjs     (needs valgrind, a C compiler and a built package)
import { execFileSync } from 'node:child_process'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { instructions, perOperation } from './runner.mjs'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
execFileSync('bash', [join(root, '__test__', 'native', 'exchange-c', 'build.sh')], { stdio: ['ignore', 'ignore', 'inherit'] })
const addonPath = join(root, 'target', 'exchange-c', 'exchange_c.node')
const packagePath = join(root, 'dist', 'index.js')

const LOW = 20_000
const HIGH = 120_000
const CASES = {
  benchFloor: 'an empty native call of one argument (the floor)',
  benchBorrow: 'napi_dlpack_exchange_borrow + release: the key made per call',
  benchBorrowKeyed: 'napi_dlpack_exchange_borrow_by_key + release: the key kept (napi_dlpack_keys)',
}

function program(name, n) {
  return `
    const { Tensor } = require(${JSON.stringify(packagePath)})
    const c = require(${JSON.stringify(addonPath)})
    const t = Tensor.from(new Float32Array([1, 2, 3, 4, 5, 6]), [2, 3])
    const f = c[${JSON.stringify(name)}]
    for (let i = 0; i < ${n}; i++) f(t)
  `
}

console.log(`node ${process.version}: instructions per call ((n=${HIGH}) - (n=${LOW})) / ${HIGH - LOW}`)
let floor = 0
for (const [name, what] of Object.entries(CASES)) {
  const perCall = perOperation((n) => instructions(process.execPath, ['--predictable', '-e', program(name, n)]), LOW, HIGH)
  if (name === 'benchFloor') floor = perCall
  const above = name === 'benchFloor' ? '' : `  (+${(perCall - floor).toFixed(0)} above the floor)`
  console.log(`  ${name.padEnd(17)} ${perCall.toFixed(0).padStart(6)}${above}  ${what}`)
}
