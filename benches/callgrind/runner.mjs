// The one callgrind runner of the benchmarks in benches/callgrind/: on a shared 2-core machine wall
// time is noise, instruction counts are not. Each script runs a case with LOW and HIGH
// operations and reports the difference divided by HIGH - LOW (`perOperation`), so start-up,
// warm-up and teardown cancel out; `converged` does it over two consecutive pairs, to show the
// count no longer moves with the run length (V8's warm-up is over before LOW).
//
// Run directly, it runs every other .mjs and .sh of benches/callgrind/ in turn (this is
// `npm run bench:callgrind`):
//
//   node benches/callgrind/runner.mjs [script-name-part ...]    (needs valgrind; takes a while)
import { spawnSync } from 'node:child_process'
import { readdirSync } from 'node:fs'
import { basename, dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

/**
 * Instructions `command args` executes under callgrind (valgrind), with `env` added to this
 * process's environment. Exits 77 (skipped) when valgrind is not installed; throws when the
 * program fails or callgrind reports no count.
 */
export function instructions(command, args, env = {}) {
  // Node parses NODE_EXTRA_CA_CERTS at start-up: ~400 million instructions under callgrind where
  // it is set, none of them measured (they cancel out), but minutes of valgrind per case.
  const { NODE_EXTRA_CA_CERTS: _certificates, ...inherited } = process.env
  const run = spawnSync('valgrind', ['--tool=callgrind', '--callgrind-out-file=/dev/null', command, ...args], {
    encoding: 'utf8',
    env: { ...inherited, ...env },
  })
  if (run.error?.code === 'ENOENT') {
    console.error('valgrind is not installed: nothing to count')
    process.exit(77)
  }
  const match = /Collected : (\d+)/.exec(run.stderr ?? '')
  if (run.status !== 0 || !match) throw new Error(`callgrind failed for ${command} ${args.join(' ').slice(0, 200)}:\n${run.stderr}`)
  return Number(match[1])
}

/**
 * The program a case runs under callgrind: `setup` (its requires and tensors), then `statement`
 * n times in batches of 1,000, each batch followed by an event-loop turn (so the finalizers and
 * deferred work of a batch are counted with it), then a GC and a last turn.
 */
export function batchedProgram(setup, statement, n) {
  return `${setup}
const turn = () => new Promise((resolve) => setImmediate(resolve))
;(async () => {
  for (let done = 0; done < ${n}; done += 1000) {
    for (let i = 0; i < 1000; i++) ${statement}
    await turn()
  }
  globalThis.gc(); await turn()
})()`
}

/** Instructions per operation: `count(n)` runs n operations and returns its instructions. */
export function perOperation(count, low, high) {
  return (count(high) - count(low)) / (high - low)
}

/**
 * Instructions per operation over two consecutive pairs, (low, mid) and (mid, high), from three
 * runs: `{ first, second, drift }`, drift being second - first. A per-operation count that still
 * moves between the pairs means LOW is inside the warm-up (JIT tiers, inline caches, lazy
 * state): raise it.
 */
export function converged(count, low, mid, high) {
  const [a, b, c] = [count(low), count(mid), count(high)]
  const first = (b - a) / (mid - low)
  const second = (c - b) / (high - mid)
  return { first, second, drift: second - first }
}

const isMain = process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]
if (isMain) {
  const here = dirname(fileURLToPath(import.meta.url))
  const wanted = process.argv.slice(2)
  const scripts = readdirSync(here)
    .filter((name) => /\.(mjs|sh)$/.test(name) && name !== basename(fileURLToPath(import.meta.url)))
    .filter((name) => wanted.length === 0 || wanted.some((part) => name.includes(part)))
    .sort()
  let failed = false
  for (const name of scripts) {
    console.log(`\n## ${name}\n`)
    const [command, args] = name.endsWith('.sh') ? ['bash', [join(here, name)]] : [process.execPath, [join(here, name)]]
    const run = spawnSync(command, args, { stdio: 'inherit' })
    if (run.status === 77) {
      console.log(`${name}: skipped (valgrind is not installed)`)
      continue
    }
    if (run.status !== 0) {
      console.error(`${name}: exit ${run.status}`)
      failed = true
    }
  }
  process.exit(failed ? 1 : 0)
}
