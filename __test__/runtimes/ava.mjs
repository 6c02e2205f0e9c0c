// Runs the ava suite under Bun or Deno: `bun __test__/runtimes/ava.mjs [files]`,
// `deno run -A __test__/runtimes/ava.mjs [files]`. ava itself works in both runtimes; only
// `v8.takeCoverage()` (called by ava's CLI at the end of a run) is missing there.
import v8 from 'node:v8'

try {
  v8.takeCoverage()
} catch {
  v8.takeCoverage = () => {}
}
await import('../../node_modules/ava/entrypoints/cli.mjs')
