// Leak check of Worker teardown (run by scripts/test.mjs): runs ./workload.mjs under valgrind
// memcheck and fails if any block is definitely or indirectly lost with napi-dlpack's addon on
// its allocation stack (indirectly: a payload of ours reachable only from a lost block, such as
// the bookkeeping of an external that was never finalized). Exits 77 (reported as a skip) where valgrind is not installed.
//
// One kind of loss is Node's, not ours, and is reported without failing: Node (20 to 26) loses
// the 40-byte bookkeeping object of every `napi_external` still alive when its environment is
// torn down, whichever addon made it (the plain C fixture shows the same records). Those
// records are recognised by their allocation site: `napi_create_external` itself, inside node.
// The release build is stripped, so our frames are recognised by the object they are in: the
// `napi-dlpack.*.node` addon, and the example addon built on the crate (`consumer_addon.node`).
import { execFileSync, spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

const SKIP = 77
const here = fileURLToPath(new URL('.', import.meta.url))

try {
  execFileSync('valgrind', ['--version'], { stdio: 'ignore' })
} catch {
  console.log('valgrind is not installed: leak check skipped')
  process.exit(SKIP)
}

const dir = mkdtempSync(join(tmpdir(), 'napi-dlpack-valgrind-'))
const log = join(dir, 'memcheck.log')
const args = ['--leak-check=full', '--show-leak-kinds=definite,indirect', '--num-callers=60', `--log-file=${log}`, process.execPath, join(here, 'workload.mjs')]
console.log(`$ valgrind ${args.join(' ')}`)
const run = spawnSync('valgrind', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] })
process.stdout.write(run.stdout ?? '')
const report = readFileSync(log, 'utf8')
rmSync(dir, { recursive: true, force: true })
if (run.status !== 0 || !run.stdout?.includes('workload: done')) {
  console.log(report.split('\n').slice(-40).join('\n'))
  console.log(`FAIL: the workload did not finish under valgrind (status ${run.status})`)
  process.exit(1)
}

/** The definitely and indirectly lost loss records: their headline and their stack frames. */
const records = report
  .replace(/^==\d+== ?/gm, '')
  .split(/\n\s*\n/)
  .filter((block) => /are (definitely|indirectly) lost in loss record/.test(block))
  .map((block) => {
    const lines = block.trim().split('\n')
    const headline = lines.find((line) => / (definitely|indirectly) lost in loss record/.test(line))
    return { headline, frames: lines.filter((line) => /^\s+(at|by) /.test(line)), bytes: Number(headline.match(/^([\d,]+) (?:\([^)]*\) )?bytes/)?.[1].replace(/,/g, '') ?? NaN) }
  })

const ours = /(napi-dlpack[^/\s]*|consumer_addon)\.node\)/
/** Node's bookkeeping of externals alive at teardown: allocated by napi_create_external itself. */
const nodeExternal = (record) => record.headline.includes('definitely') && record.frames.length > 1 && /: napi_create_external \(in [^)]*node\)$/.test(record.frames[1])

/**
 * Indirect losses allocated by C++ `operator new` are Node's own objects (such as the
 * bookkeeping of an external, reachable from another lost Node object), even when the stack
 * shows our call site: the addon is Rust and allocates with malloc only. Our payloads lost
 * behind a lost external are malloc'd, so they still count.
 */
const nodeIndirect = (record) => record.headline.includes('indirectly') && /operator new/.test(record.frames[0] ?? '')

let nodeBytes = 0
const failures = []
const others = []
for (const record of records) {
  if (nodeExternal(record)) nodeBytes += record.bytes
  else if (nodeIndirect(record)) nodeBytes += record.bytes
  else if (record.frames.some((frame) => ours.test(frame))) failures.push(record)
  else others.push(record)
}
const summary = [/definitely lost: [^\n]*/, /indirectly lost: [^\n]*/].map((kind) => report.match(kind)?.[0] ?? `${kind.source.split(':')[0]}: 0 bytes`).join(', ')
console.log(`memcheck: ${summary}`)
console.log(`  Node's napi_external bookkeeping (40 bytes per external alive at teardown, any addon): ${nodeBytes} bytes`)
for (const record of others) console.log(`  not ours (no napi-dlpack frame): ${record.headline}\n${record.frames.slice(0, 4).join('\n')}`)
for (const record of failures) console.log(`  OURS: ${record.headline}\n${record.frames.join('\n')}`)
if (failures.length) {
  console.log(`FAIL: ${failures.length} loss records with napi-dlpack's addon on the allocation stack`)
  process.exit(1)
}
console.log('ok: nothing definitely or indirectly lost from napi-dlpack')
