// The addon guide, followed as written: docs/addons.md from `cargo new` to JavaScript calling
// the addon (a step of npm test).
//
//   node scripts/addon-guide-test.mjs
//
//  1. `cargo new --lib my-addon` in a temporary folder;
//  2. its Cargo.toml gets the guide's ```toml block (the napi-dlpack path pointed at this
//     repository, as the guide says for a clone), build.rs the guide's one line, src/lib.rs the
//     guide's ```rust block, package.json the guide's ```json block;
//  3. `napi build --platform --release` (the guide's `npm run build`; the CLI from this
//     repository's node_modules, offline, with examples/consumer-addon's Cargo.lock so that the
//     offline build finds the same crate versions, and its target folder so they are compiled
//     once);
//  4. an app folder with my-addon and napi-dlpack in node_modules runs the guide's JavaScript
//     block, type-checked with tsc --strict first.
// Needs cargo and a C toolchain (as the guide does) and the addon and dist/ built.
import { execFileSync } from 'node:child_process'
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))
const guide = readFileSync(join(root, 'docs', 'addons.md'), 'utf8')
const work = mkdtempSync(join(tmpdir(), 'napi-dlpack-addon-guide-'))
const run = (cmd, args, cwd, env = {}) =>
  execFileSync(cmd, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } })

/** The first ```lang block after `after` (a string the guide contains) that `test` accepts. */
function block(lang, test = () => true, after = '') {
  const from = after ? guide.indexOf(after) : 0
  if (from < 0) throw new Error(`docs/addons.md no longer says ${JSON.stringify(after)}`)
  for (const [, body] of guide.slice(from).matchAll(new RegExp('```' + lang + '\\n([\\s\\S]*?)```\\n', 'g'))) {
    if (test(body)) return body
  }
  throw new Error(`docs/addons.md has no \`\`\`${lang} block${after ? ` after ${JSON.stringify(after)}` : ''}`)
}

let failed = false
try {
  // 1-2. The crate, as the guide writes it.
  run('cargo', ['new', '--lib', 'my-addon', '--vcs', 'none', '--quiet'], work)
  const crate = join(work, 'my-addon')
  const toml = block('toml', (body) => body.includes('[lib]') && body.includes('napi-dlpack'))
  const clonePath = /napi-dlpack = \{ path = "([^"]+)" \}/.exec(toml)?.[1]
  if (!clonePath) throw new Error("the guide's Cargo.toml has no path dependency on napi-dlpack")
  const manifest = readFileSync(join(crate, 'Cargo.toml'), 'utf8').replace(/\n\[dependencies\]\n*$/, '\n')
  writeFileSync(join(crate, 'Cargo.toml'), `${manifest}\n${toml.replace(clonePath, join(root, 'crates', 'napi-dlpack'))}`)
  const buildRs = /\*\*build\.rs\*\*: `([^`]+)`/.exec(guide)?.[1]
  if (!buildRs) throw new Error('the guide no longer gives build.rs')
  writeFileSync(join(crate, 'build.rs'), `${buildRs}\n`)
  writeFileSync(join(crate, 'src', 'lib.rs'), block('rust', () => true, '**src/lib.rs**'))
  const packageJson = JSON.parse(block('json', (body) => body.includes('"napi"')))
  // Its devDependencies (the napi CLI, napi-dlpack's tarballs) are what `npm install` would
  // fetch; offline, the CLI is this repository's and napi-dlpack is linked below.
  delete packageJson.devDependencies
  writeFileSync(join(crate, 'package.json'), `${JSON.stringify(packageJson, null, 2)}\n`)
  cpSync(join(root, 'examples', 'consumer-addon', 'Cargo.lock'), join(crate, 'Cargo.lock'))

  // 3. The guide's `npm run build`.
  const started = Date.now()
  run(process.execPath, [join(root, 'node_modules', '@napi-rs', 'cli', 'dist', 'cli.js'), 'build', '--platform', '--release'], crate, {
    CARGO_TARGET_DIR: join(root, 'target', 'consumer-addon'),
    CARGO_NET_OFFLINE: 'true',
  })
  console.log(`ok   cargo new + the guide's Cargo.toml, build.rs, src/lib.rs, package.json; napi build (${((Date.now() - started) / 1000).toFixed(0)} s)`)
  const types = readFileSync(join(crate, 'index.d.ts'), 'utf8')
  for (const declaration of ['scale(x: TensorArg, factor: number): void', 'ramp(n: number): TensorResult']) {
    if (!types.includes(declaration)) throw new Error(`the generated index.d.ts lacks ${declaration}, which the guide promises`)
  }
  console.log("ok   the generated index.d.ts declares what the guide says (scale(x: TensorArg, ...), ramp(...): TensorResult)")

  // 4. An app using it: the guide's JavaScript, type-checked and run.
  const app = join(work, 'app')
  mkdirSync(join(app, 'node_modules'), { recursive: true })
  symlinkSync(crate, join(app, 'node_modules', 'my-addon'), 'dir')
  symlinkSync(root, join(app, 'node_modules', 'napi-dlpack'), 'dir')
  writeFileSync(join(app, 'package.json'), '{ "name": "app", "private": true, "type": "module" }\n')
  writeFileSync(join(app, 'app.mts'), block('ts', (body) => body.includes("from 'my-addon'"), '**JavaScript**'))
  const compilerOptions = { strict: true, target: 'es2022', lib: ['es2023'], module: 'nodenext', moduleResolution: 'nodenext', types: ['node'], typeRoots: [join(root, 'node_modules', '@types')], skipLibCheck: true }
  writeFileSync(join(app, 'tsconfig.json'), JSON.stringify({ compilerOptions, files: ['app.mts'] }, null, 2))
  run(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'], app)
  run(process.execPath, ['app.mjs'], app)
  console.log("ok   the guide's JavaScript, type-checked (tsc --strict) and run against the addon it built")
} catch (error) {
  failed = true
  console.log(`FAIL the addon guide, followed as written:\n${String(error?.stderr ?? '')}${String(error?.stdout ?? '')}${error?.message ?? error}`)
} finally {
  rmSync(work, { recursive: true, force: true })
}
console.log(failed ? 'addon guide test: failed' : 'addon guide test: docs/addons.md works from cargo new')
process.exit(failed ? 1 : 0)
