// The one callgrind runner of the `*-callgrind.mjs` benchmarks: on a shared 2-core machine wall
// time is noise, instruction counts are not. Each script runs a case twice, with LOW and HIGH
// operations, and reports the difference divided by HIGH - LOW (`perOperation`), so start-up,
// warm-up and teardown cancel out.
import { spawnSync } from 'node:child_process'

/**
 * Instructions `command args` executes under callgrind (valgrind), with `env` added to this
 * process's environment. Exits 77 (skipped) when valgrind is not installed; throws when the
 * program fails or callgrind reports no count.
 */
export function instructions(command, args, env = {}) {
  const run = spawnSync('valgrind', ['--tool=callgrind', '--callgrind-out-file=/dev/null', command, ...args], {
    encoding: 'utf8',
    env: { ...process.env, ...env },
  })
  if (run.error?.code === 'ENOENT') {
    console.error('valgrind is not installed: nothing to count')
    process.exit(77)
  }
  const match = /Collected : (\d+)/.exec(run.stderr ?? '')
  if (run.status !== 0 || !match) throw new Error(`callgrind failed for ${command} ${args.join(' ').slice(0, 200)}:\n${run.stderr}`)
  return Number(match[1])
}

/** Instructions per operation: `count(n)` runs n operations and returns its instructions. */
export function perOperation(count, low, high) {
  return (count(high) - count(low)) / (high - low)
}
