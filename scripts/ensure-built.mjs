// Builds the addon (cargo, incremental) and the TypeScript layer when either is missing or
// older than its sources, so `npm test`, `npm run demo` and `npm run bench` work on a fresh
// clone after `npm install`. `napi build` writes the binding (the .node, the generated loader
// index.js and its index.d.ts) into lib/binding/; tsc compiles lib/ into dist/, and
// scripts/copy-binding.mjs copies the binding to dist/binding/, where dist/loader.js loads it.
import { execFileSync } from 'node:child_process'
import { existsSync, readdirSync, rmSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

import { copyBinding } from './copy-binding.mjs'

const root = fileURLToPath(new URL('..', import.meta.url))

function newest(dir, filter) {
  let latest = 0
  const walk = (path) => {
    for (const entry of readdirSync(path, { withFileTypes: true })) {
      const full = join(path, entry.name)
      if (entry.isDirectory()) {
        if (entry.name !== 'target' && entry.name !== 'node_modules') walk(full)
      } else if (filter(entry.name)) {
        latest = Math.max(latest, statSync(full).mtimeMs)
      }
    }
  }
  walk(join(root, dir))
  return latest
}

const mtime = (file) => (existsSync(join(root, file)) ? statSync(join(root, file)).mtimeMs : 0)
const bindingDir = join('lib', 'binding')
const addon = readdirSync(join(root, bindingDir)).find((name) => name.startsWith('napi-dlpack.') && name.endsWith('.node'))
const rustSources = Math.max(
  newest('src', (n) => n.endsWith('.rs')),
  newest('crates/napi-dlpack/src', (n) => n.endsWith('.rs')),
  mtime('Cargo.toml'),
  mtime('crates/napi-dlpack/Cargo.toml'),
  mtime('Cargo.lock'),
)
const run = (cmd, args) => execFileSync(cmd, args, { cwd: root, stdio: 'inherit' })
const napiCli = join(root, 'node_modules', '@napi-rs', 'cli', 'dist', 'cli.js')
const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc')

if (!addon || mtime(join(bindingDir, addon)) < rustSources || process.env.NAPI_DLPACK_REBUILD) {
  console.log('# building the addon (napi build --platform --release)')
  run(process.execPath, [napiCli, 'build', '--platform', '--release', '--output-dir', bindingDir, '--js', 'index.js', '--dts', 'index.d.ts'])
}
const distBuilt = Math.min(mtime('dist/index.js'), mtime('dist/index.mjs'))
if (distBuilt < Math.max(newest('lib', (n) => n.endsWith('.ts') || n.endsWith('.mts')), mtime('tsconfig.json'))) {
  console.log('# compiling the TypeScript layer (tsc)')
  // From an empty dist/: tsc never deletes the output of a source that moved or went away, and
  // dist/ is what the package ships.
  rmSync(join(root, 'dist'), { recursive: true, force: true })
  run(process.execPath, [tsc, '-p', 'tsconfig.json'])
}
const copied = copyBinding()
if (copied.length) console.log(`# lib/binding -> dist/binding: ${copied.join(', ')}`)
