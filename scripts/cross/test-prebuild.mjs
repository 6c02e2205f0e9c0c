// Tests the prebuild that the package loads on this machine, natively: run by
// .github/workflows/release.yml on the runners of the targets this machine cannot run (macOS
// x64 and arm64, Windows x64, Linux arm64), after the job's .node has been put in dist/binding/
// (beside the generated loader, where a local build goes). Steps: the file the package's loader picked (it must be this platform's prebuild, not
// a stale or foreign one), the C test addon and the runtime smoke test where a C compiler and
// bash exist (not on Windows), then the ava specs of PREBUILD_SPECS (abi/c-addon-*.spec.ts only with
// the C test addon). Exit status 1 on any failure.
import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { basename, dirname, join, resolve } from 'node:path'

import { PREBUILD_SPECS, binaryName, root } from './targets.mjs'

let failed = false
function step(name, cmd, args, env = {}) {
  console.log(`\n### ${name}\n$ ${[cmd, ...args].join(' ')}`)
  try {
    execFileSync(cmd, args, { cwd: root, stdio: 'inherit', env: { ...process.env, ...env } })
  } catch {
    console.log(`FAIL ${name}`)
    failed = true
  }
}

const { native } = await import(join(root, 'dist', 'native.js'))
if (!native) throw new Error('dist/native.js exports no binding')
const loaded = process.report.getReport().sharedObjects.filter((file) => file.endsWith('.node'))
const ours = loaded.filter((file) => basename(file).startsWith(`${binaryName}.`))
console.log(`${process.platform}-${process.arch} node ${process.version}: loaded ${ours.join(', ') || '(none)'}`)
// Windows paths compare without regard to case.
const samePath = (a, b) => (process.platform === 'win32' ? resolve(a).toLowerCase() === resolve(b).toLowerCase() : resolve(a) === resolve(b))
const bindingDir = join(root, 'dist', 'binding')
if (ours.length !== 1 || !samePath(dirname(ours[0]), bindingDir)) {
  console.log(`FAIL: expected one ${binaryName}.*.node from ${bindingDir}`)
  failed = true
}

let withCAddon = false
if (process.platform !== 'win32') {
  const nodeInclude = join(dirname(dirname(process.execPath)), 'include', 'node')
  const env = !process.env.NODE_INCLUDE_DIR && existsSync(nodeInclude) ? { NODE_INCLUDE_DIR: nodeInclude } : {}
  step('C test addon', 'bash', [join(root, '__test__', 'native', 'c-addon', 'build.sh')], env)
  withCAddon = !failed
  // The smoke test also uses the exchange-table C addon and the Rust consumer addon.
  if (withCAddon) {
    step('exchange-table C test addon', 'bash', [join(root, '__test__', 'native', 'exchange-c', 'build.sh')], env)
    step('Rust consumer addon', 'bash', [join(root, '__test__', 'native', 'consumer-addon', 'build.sh')], env)
  }
  if (withCAddon && !failed) step('runtime smoke test', process.execPath, [join(root, '__test__', 'runtimes', 'smoke.cjs')])
}
const specs = PREBUILD_SPECS.filter((spec) => withCAddon || !spec.startsWith('abi/c-addon-')).map((spec) => join('__test__', spec))
step(`ava ${specs.join(' ')}`, process.execPath, [join(root, 'node_modules', 'ava', 'entrypoints', 'cli.mjs'), ...specs])
process.exit(failed ? 1 : 0)
