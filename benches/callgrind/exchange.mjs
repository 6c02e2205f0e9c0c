// Instructions per operation of the Rust core against dlpark (the `vs_dlpark` cases of
// crates/napi-dlpack/benches/exchange.rs), counted by callgrind (valgrind): on a shared 2-core
// machine wall time is noise, instruction counts are not. Each case runs twice in the bench
// binary (`EXCHANGE_CALLGRIND=<case>:<n>`), with LOW and HIGH operations, and the difference
// divided by HIGH - LOW is reported, so start-up and teardown cancel out. Then, unless
// `--no-criterion`, the medians of the same cases from `cargo bench ... -- vs_dlpark`:
// criterion's (one case after another) and an interleaved pass (the cases in turn, each round).
//
//   node benches/callgrind/exchange.mjs [--no-criterion]     (needs valgrind)
import { execFileSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { instructions, perOperation } from './runner.mjs'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
const LOW = 10_000
const HIGH = 110_000
const CASES = [
  'export_release/ours',
  'export_release/dlpark_runtime_rank',
  'export_release/dlpark_runtime_rank_validated',
  'export_release/dlpark_compile_time_rank',
  'import_validate_release/ours',
  'import_validate_release/dlpark',
]
const cargoArgs = ['bench', '-p', 'napi-dlpack', '--bench', 'exchange']

/** The bench binary, built (release, LTO: the bench profile) if needed. */
function benchBinary() {
  const out = execFileSync('cargo', [...cargoArgs, '--no-run', '--message-format=json'], {
    cwd: root,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  for (const line of out.split('\n')) {
    if (!line.startsWith('{')) continue
    const message = JSON.parse(line)
    if (message.reason === 'compiler-artifact' && message.target?.name === 'exchange' && message.executable) {
      return message.executable
    }
  }
  throw new Error('cargo did not report the bench executable')
}


const binary = benchBinary()
console.log(`callgrind: instructions per operation ((n=${HIGH}) - (n=${LOW})) / ${HIGH - LOW}`)
for (const name of CASES) {
  const perOp = perOperation((n) => instructions(binary, [], { EXCHANGE_CALLGRIND: `${name}:${n}` }), LOW, HIGH)
  console.log(`  ${name.padEnd(46)} ${perOp.toFixed(1)}`)
}

if (!process.argv.includes('--no-criterion')) {
  const out = execFileSync('cargo', [...cargoArgs, '--', 'vs_dlpark'], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] })
  console.log('criterion: median ns per operation (point estimate and 95% interval)')
  for (const name of CASES) {
    const file = join(root, 'target', 'criterion', 'vs_dlpark', name.replaceAll('/', '_'), 'new', 'estimates.json')
    if (!existsSync(file)) throw new Error(`no criterion estimates at ${file}`)
    const { median } = JSON.parse(readFileSync(file, 'utf8'))
    const interval = median.confidence_interval
    console.log(
      `  ${name.padEnd(46)} ${median.point_estimate.toFixed(1)} ns  [${interval.lower_bound.toFixed(1)}, ${interval.upper_bound.toFixed(1)}]`,
    )
  }
  for (const line of out.split('\n')) if (line.startsWith('interleaved_vs_dlpark')) console.log(line)
}
