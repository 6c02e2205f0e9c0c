// The install test: what a user gets from npm, checked before it is published.
//
//  1. pack the main package as `napi prepublish` publishes it (optionalDependencies on every
//     platform package) and the host's platform package (npm/<platform> with the built .node);
//  2. install both from the tarballs OFFLINE (empty npm cache, clean HOME) into a temporary
//     project, with only node and npm on PATH: no Rust, no C compiler, no install script;
//  3. use it from a CommonJS script, an ES module and `tsc --strict` against the published
//     types: TypeScript 5.9 and 5.0, `lib: ["es2022"]`, `skipLibCheck: false`, no @types/node,
//     module nodenext (CJS and ESM files), node10 and bundler;
//  4. install the main package alone: the error must name what is missing for the way it was
//     installed (the platform tarball for a tarball install, the registry package otherwise);
//  5. the README's from-source install, as written: `npm run pack:local`, then in a blank project
//     `npm install <clone>/napi-dlpack-*.tgz` (offline), then the README's app example run there
//     (its other dependencies, sharp and onnxruntime-node, linked from this repository's
//     node_modules: the test is offline);
//  6. publint and @arethetypeswrong/cli on the main tarball, publint and `npm publish --dry-run`
//     of every package whose files exist here, and (CI=true only: it compiles the packaged crate, about
//     two minutes) `cargo publish --dry-run -p napi-dlpack`.
// Needs the addon and dist/ built (scripts/ensure-built.mjs). Exits 1 when any check fails.
import { execFileSync } from 'node:child_process'
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { delimiter, dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

import { extractBlocks, writeFixtures } from './doc-test.mjs'
import { packMain, packPlatform, platformDirs, stagePlatform } from './pack-local.mjs'
import { allTargets } from './cross/targets.mjs'
import { isCI } from './test-prerequisites.mjs'

const root = fileURLToPath(new URL('..', import.meta.url))
const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'))
const { name, version } = manifest
const { hostSuffix } = await import(join(root, 'dist', 'loader.js'))
const suffix = hostSuffix()
const platformName = `${name}-${suffix}`
const work = mkdtempSync(join(tmpdir(), 'napi-dlpack-install-'))
const failures = []

/** Runs one named check; a thrown error fails it (and is printed), the rest go on. */
function check(label, body) {
  const started = Date.now()
  try {
    body()
    console.log(`ok   ${label} (${((Date.now() - started) / 1000).toFixed(1)} s)`)
  } catch (error) {
    failures.push(label)
    console.log(`FAIL ${label}\n${String(error?.stderr ?? '')}${String(error?.stdout ?? '')}${error?.message ?? error}`)
  }
}

function run(cmd, args, options = {}) {
  return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], ...options })
}

/** Where `command` is on this process's PATH, or undefined. */
function which(command) {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir && existsSync(join(dir, command))) return join(dir, command)
  }
  return undefined
}

// ---- the sandbox: only node and npm on PATH, a clean HOME and an empty npm cache ------------
const bin = join(work, 'bin')
const home = join(work, 'home')
mkdirSync(bin)
mkdirSync(home)
const npmCli = which('npm')
if (!npmCli) throw new Error('npm not found on PATH')
symlinkSync(process.execPath, join(bin, 'node'))
symlinkSync(realpathSync(npmCli), join(bin, 'npm'))
const sandboxEnv = {
  PATH: bin,
  HOME: home,
  npm_config_cache: join(work, 'npm-cache'),
  npm_config_userconfig: join(home, '.npmrc'),
  npm_config_update_notifier: 'false',
  npm_config_fund: 'false',
  npm_config_audit: 'false',
  LANG: 'C',
}
const npm = (args, cwd) => run(join(bin, 'npm'), args, { cwd, env: sandboxEnv })
const node = (args, cwd) => run(join(bin, 'node'), args, { cwd, env: sandboxEnv })
const toolchain = ['cc', 'gcc', 'g++', 'clang', 'cargo', 'rustc', 'make', 'ld']

// ---- 1. pack (scripts/pack-local.mjs, what `npm run pack:local` runs) -------------------------
const tarballs = join(work, 'tarballs')
const stage = join(work, 'stage')
mkdirSync(tarballs)
mkdirSync(stage)
const targetDirs = platformDirs()

/** npm/<target> staged with a placeholder in place of its binary (not built here); recorded in `names`. */
function stagePlaceholder(target, into, names) {
  const dir = join(into, target)
  cpSync(join(root, 'npm', target), dir, { recursive: true })
  const { main } = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'))
  writeFileSync(join(dir, main), 'placeholder: not a shared object')
  cpSync(join(root, 'LICENSE'), join(dir, 'LICENSE'))
  names.push(target)
  return dir
}

let mainTarball
let platformTarball
check(`pack ${name} as published (optionalDependencies on ${targetDirs.length} platform packages)`, () => {
  mainTarball = packMain(tarballs)
})
check(`pack ${platformName} (npm/${suffix} with the built addon)`, () => {
  platformTarball = packPlatform(suffix, tarballs)
})

// ---- 2. install offline, no toolchain -----------------------------------------------------
const app = join(work, 'app')
mkdirSync(app)
writeFileSync(join(app, 'package.json'), `${JSON.stringify({ name: 'app', version: '1.0.0', private: true }, null, 2)}\n`)

check('install both tarballs offline, only node and npm on PATH', () => {
  if (!mainTarball || !platformTarball) throw new Error('nothing to install (packing failed)')
  for (const tool of toolchain) {
    if (existsSync(join(bin, tool))) throw new Error(`${tool} is reachable from the sandbox PATH`)
  }
  npm(['install', '--offline', '--no-package-lock', mainTarball, platformTarball], app)
  const installed = JSON.parse(readFileSync(join(app, 'node_modules', name, 'package.json'), 'utf8'))
  if (installed.version !== version) throw new Error(`installed ${name}@${installed.version}`)
  if (!existsSync(join(app, 'node_modules', platformName))) throw new Error(`${platformName} not installed`)
})

// ---- 3. CJS, ESM and TypeScript consumers -----------------------------------------------------
writeFileSync(
  join(app, 'use.cjs'),
  `'use strict'
const assert = require('node:assert/strict')
const { existsSync } = require('node:fs')
const { join } = require('node:path')
const { Tensor, fromDLPack, DLPackError } = require('${name}')
assert.ok(require.resolve('${name}').startsWith(__dirname), 'resolved from the installed package')
const t = Tensor.from(new Float32Array([1, 2, 3, 4]), [2, 2])
const back = fromDLPack(t)
assert.equal(back.dataPointer, t.dataPointer, 'zero-copy: same data pointer')
back.data[3] = 42
assert.equal(t.data[3], 42, 'a write through one is seen through the other')
assert.throws(() => fromDLPack(42), (error) => error instanceof DLPackError && typeof error.code === 'string')
const include = require('${name}/include')
assert.ok(existsSync(join(include.dir, 'napi_dlpack.h')), 'include dir holds the header')
assert.equal(require.resolve('${name}/include/napi_dlpack.h'), include.header)
assert.equal(include.include, JSON.stringify(include.dir))
console.log('cjs ok', include.dir)
`,
)
writeFileSync(
  join(app, 'use.mjs'),
  `import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import { Tensor, fromDLPack } from '${name}'
import { dir } from '${name}/include'
const require = createRequire(import.meta.url)
assert.equal(Tensor, require('${name}').Tensor, 'import and require share one module instance')
const t = Tensor.zeros([3], 'float64')
const back = fromDLPack(t.__dlpack__())
back.data[1] = 7
assert.deepEqual([...t.data], [0, 7, 0])
assert.equal(dir, require('${name}/include').dir)
console.log('esm ok')
`,
)
check('CommonJS: require, zero-copy round trip, errors, napi-dlpack/include', () => node(['use.cjs'], app))
check('ES module: import, one instance with require, zero-copy round trip', () => node(['use.mjs'], app))

// The TypeScript consumers: an ESM and a CJS file under nodenext, one file per other setting.
const typesDir = join(app, 'types')
mkdirSync(typesDir)
const consumerSource = `import { Tensor, fromDLPack, DLPackError, type DataArray, type DType, type Float16View } from '${name}'
import { dir, header } from '${name}/include'

const t: Tensor<'float32'> = Tensor.from(new Float32Array([1, 2, 3]))
const data: Float32Array = t.data
const viaProtocol: Tensor = fromDLPack(t)
const pointer: bigint = viaProtocol.dataPointer
const names: DType[] = ['float32', 'int64']
const wide: DataArray<'int64'> = new BigInt64Array(1)
const half: Float16View = new Uint16Array(1)
// @ts-expect-error: not a dtype
Tensor.zeros([2], 'float33')
t[Symbol.dispose]()
function codeOf(error: unknown): string | undefined {
  return error instanceof DLPackError ? error.code : undefined
}
export const used = [data, pointer, names, wide, half, codeOf, dir.length, header.length]
`
writeFileSync(join(typesDir, 'consumer.mts'), consumerSource)
writeFileSync(join(typesDir, 'consumer.cts'), consumerSource)
writeFileSync(join(typesDir, 'consumer.ts'), consumerSource)
writeFileSync(
  join(typesDir, 'float16.ts'),
  `import type { Float16View } from '${name}'
// With a lib that declares Float16Array, the float16 view type includes it.
export const half: Float16View = new Float16Array(1)
`,
)
const compilerBase = { strict: true, noEmit: true, skipLibCheck: false, types: [], target: 'es2022', lib: ['es2022'] }
const tsConfigs = [
  { label: 'nodenext, ESM and CJS files', files: ['consumer.mts', 'consumer.cts'], options: { module: 'nodenext', moduleResolution: 'nodenext' } },
  { label: 'node10 (CommonJS)', files: ['consumer.ts'], options: { module: 'commonjs', moduleResolution: 'node' } },
  { label: 'bundler', files: ['consumer.ts'], options: { module: 'esnext', moduleResolution: 'bundler' } },
]
const compilers = [
  { label: 'TypeScript 5.9', tsc: join(root, 'node_modules', 'typescript', 'bin', 'tsc') },
  { label: 'TypeScript 5.0', tsc: join(root, 'node_modules', 'typescript-5.0', 'bin', 'tsc') },
]
for (const { label: compiler, tsc } of compilers) {
  const tscVersion = run(process.execPath, [tsc, '--version']).trim()
  for (const { label, files, options } of tsConfigs) {
    check(`tsc --strict (${tscVersion.replace('Version', 'TypeScript')}), lib es2022, skipLibCheck false, ${label}`, () => {
      const config = join(typesDir, `tsconfig.${compiler.replace(/\W+/g, '')}.${label.replace(/\W+/g, '-')}.json`)
      writeFileSync(config, JSON.stringify({ compilerOptions: { ...compilerBase, ...options }, files }, null, 2))
      node([tsc, '-p', config], typesDir)
    })
  }
}
check('tsc --strict (TypeScript 5.9), lib esnext: Float16View includes Float16Array', () => {
  const config = join(typesDir, 'tsconfig.float16.json')
  const compilerOptions = { ...compilerBase, lib: ['esnext'], module: 'nodenext', moduleResolution: 'nodenext' }
  writeFileSync(config, JSON.stringify({ compilerOptions, files: ['float16.ts', 'consumer.mts'] }, null, 2))
  node([compilers[0].tsc, '-p', config], typesDir)
})

// ---- 4. the main package without its platform package -----------------------------------------
check(`without ${platformName}: the error's first line says to install it; a broken one says why`, () => {
  const bare = join(work, 'bare')
  mkdirSync(bare)
  writeFileSync(join(bare, 'package.json'), `${JSON.stringify({ name: 'bare', version: '1.0.0', private: true }, null, 2)}\n`)
  // --omit=optional: the same main tarball, installed as `npm install --omit=optional` leaves it.
  npm(['install', '--offline', '--no-package-lock', '--omit=optional', mainTarball], bare)
  if (existsSync(join(bare, 'node_modules', platformName))) throw new Error(`${platformName} was installed`)
  const script = `try { require('${name}'); console.log('loaded') } catch (error) { console.log(JSON.stringify({ code: error.code, message: error.message })) }`
  const { code, message } = JSON.parse(node(['-e', script], bare))
  const first = message.split('\n')[0]
  if (code !== 'ERR_DLPACK_ADDON_NOT_INSTALLED') throw new Error(`code ${code}: ${first}`)
  // Installed from a tarball: the missing piece is the platform tarball next to it, not a
  // registry package (none is published yet).
  const expectedTarball = join(tarballs, `${platformName}-${version}.tgz`)
  if (!first.includes(expectedTarball)) throw new Error(`first line does not name ${expectedTarball}: ${first}`)
  if (!first.includes(`npm install ${join(tarballs, `${name}-*.tgz`)}`)) throw new Error(`first line does not say how to install both tarballs: ${first}`)
  if (first.includes(`${platformName}@`)) throw new Error(`a tarball install is told to install from a registry: ${first}`)
  if (/wasm32|wasi/.test(first)) throw new Error(`first line names a WASI package: ${first}`)
  // Without npm's record of the tarball (another package manager, a registry install), the
  // error names the registry package.
  rmSync(join(bare, 'node_modules', '.package-lock.json'))
  const registry = JSON.parse(node(['-e', script], bare))
  const registryFirst = registry.message.split('\n')[0]
  if (registry.code !== 'ERR_DLPACK_ADDON_NOT_INSTALLED' || !registryFirst.includes(`npm install ${platformName}@${version}`)) {
    throw new Error(`without the lockfile record: ${registry.code}: ${registryFirst}`)
  }

  // A platform package that is there but cannot load (here: not an ELF file; in the field, a
  // libc too old): the error says so and quotes the OS loader's reason.
  const broken = join(bare, 'node_modules', platformName)
  const platformManifest = JSON.parse(readFileSync(join(root, 'npm', suffix, 'package.json'), 'utf8'))
  mkdirSync(broken)
  writeFileSync(join(broken, 'package.json'), JSON.stringify(platformManifest))
  writeFileSync(join(broken, platformManifest.main), 'not a shared object')
  const loadFailure = JSON.parse(node(['-e', script], bare))
  if (loadFailure.code !== 'ERR_DLPACK_ADDON_LOAD') throw new Error(`code ${loadFailure.code}: ${loadFailure.message}`)
  const reason = loadFailure.message.split('\n')[0]
  if (!reason.includes(platformName) || !reason.includes(platformManifest.main)) throw new Error(`no package or OS reason in: ${reason}`)
})

// ---- 4b. the seven platform packages: layouts, and the loader finding each one ----------------
// What a user on each platform gets: npm/<platform>/package.json must carry the os/cpu/libc that
// make npm install it there and only there, and the file name the generated loader
// (lib/binding/index.js, published as dist/binding/index.js)
// asks for; the main package must list every one as an optional dependency. Then, in child
// processes that fake process.platform/arch (and musl), the installed package must ask the OS
// loader for exactly that package's file, and without the package name what to install.
const declaredTargets = allTargets()
const NPM_LIBC = { gnu: 'glibc', musl: 'musl' }
check(`npm/: one package per target of napi.targets (${declaredTargets.length}), os/cpu/libc, file names the loader asks for, optionalDependencies`, () => {
  const problems = []
  const loaderSource = readFileSync(join(root, 'lib', 'binding', 'index.js'), 'utf8')
  const dirs = new Set(targetDirs)
  for (const target of declaredTargets) {
    const where = `npm/${target.platform}/package.json`
    if (!dirs.delete(target.platform)) {
      problems.push(`no ${where} for ${target.triple}`)
      continue
    }
    const pkg = JSON.parse(readFileSync(join(root, 'npm', target.platform, 'package.json'), 'utf8'))
    const file = `${manifest.napi.binaryName}.${target.platform}.node`
    const want = { name: `${name}-${target.platform}`, version, main: file, os: [target.os], cpu: [target.arch], libc: target.libc ? [NPM_LIBC[target.libc]] : undefined }
    for (const [key, value] of Object.entries(want)) {
      if (JSON.stringify(pkg[key]) !== JSON.stringify(value)) problems.push(`${where}: ${key} is ${JSON.stringify(pkg[key])}, expected ${JSON.stringify(value)}`)
    }
    if (!pkg.files?.includes(file)) problems.push(`${where}: files does not list ${file}`)
    // The generated loader's candidates on that platform: the package, and the same file name
    // next to the loader (a local build).
    if (!loaderSource.includes(`require('${want.name}')`)) problems.push(`lib/binding/index.js never requires ${want.name}`)
    if (!loaderSource.includes(`require('./${file}')`)) problems.push(`lib/binding/index.js never requires ./${file}`)
  }
  for (const extra of dirs) problems.push(`npm/${extra} is not a target of napi.targets`)
  // The packed main package, as `napi prepublish` publishes it.
  const packed = JSON.parse(run('tar', ['xzOf', mainTarball, 'package/package.json']))
  const sorted = (entries) => JSON.stringify(Object.entries(entries ?? {}).sort(([a], [b]) => a.localeCompare(b)))
  const wantOptional = Object.fromEntries(declaredTargets.map((t) => [`${name}-${t.platform}`, version]))
  if (sorted(packed.optionalDependencies) !== sorted(wantOptional)) {
    problems.push(`the packed ${name}'s optionalDependencies are ${JSON.stringify(packed.optionalDependencies)}, expected ${JSON.stringify(wantOptional)}`)
  }
  if (problems.length) throw new Error(problems.join('\n'))
})

// A preload that makes this Linux x64 Node look like another platform to both loaders (binding/index.js
// and lib/loader.ts): process.platform/arch, and for musl the two things the loaders read (the
// text of /usr/bin/ldd, the process report's glibc version), and that records every native
// module the process asks the OS to load.
const fakePlatform = join(work, 'fake-platform.cjs')
writeFileSync(
  fakePlatform,
  `'use strict'
const fs = require('node:fs')
const { FAKE_PLATFORM: platform, FAKE_ARCH: arch, FAKE_LIBC: libc } = process.env
Object.defineProperty(process, 'platform', { value: platform })
Object.defineProperty(process, 'arch', { value: arch })
if (libc === 'musl') {
  const readFileSync = fs.readFileSync
  fs.readFileSync = function (file, ...rest) {
    return file === '/usr/bin/ldd' ? 'musl libc' : readFileSync.call(this, file, ...rest)
  }
  const getReport = process.report.getReport.bind(process.report)
  process.report.getReport = (...args) => {
    const report = getReport(...args)
    delete report.header.glibcVersionRuntime
    return report
  }
}
globalThis.dlopened = []
const dlopen = process.dlopen
process.dlopen = function (module, file, ...rest) {
  globalThis.dlopened.push(file)
  return dlopen.call(this, module, file, ...rest)
}
`,
)
const tryLoad = `let result
try { require('${name}'); result = { loaded: true } } catch (error) { result = { code: error.code, message: error.message } }
console.log(JSON.stringify({ ...result, platform: process.platform, arch: process.arch, dlopened: globalThis.dlopened }))`
const underFake = (dir, { os, arch, libc }) =>
  JSON.parse(run(join(bin, 'node'), ['--require', fakePlatform, '-e', tryLoad], { cwd: dir, env: { ...sandboxEnv, FAKE_PLATFORM: os, FAKE_ARCH: arch, FAKE_LIBC: libc ?? '' } }))

check(`each of the ${declaredTargets.length} platforms (faked in a child) without its package: ERR_DLPACK_ADDON_NOT_INSTALLED naming it; one with no prebuild says so`, () => {
  const problems = []
  const bare = join(work, 'bare-platforms')
  mkdirSync(bare)
  writeFileSync(join(bare, 'package.json'), `${JSON.stringify({ name: 'bare-platforms', version: '1.0.0', private: true }, null, 2)}\n`)
  npm(['install', '--offline', '--no-package-lock', '--omit=optional', mainTarball], bare)
  for (const target of declaredTargets) {
    const got = underFake(bare, target)
    const first = (got.message ?? '').split('\n')[0]
    if (got.platform !== target.os || got.arch !== target.arch) problems.push(`${target.platform}: the fake did not hold (${got.platform}-${got.arch})`)
    else if (got.code !== 'ERR_DLPACK_ADDON_NOT_INSTALLED' || !first.includes(`${name}-${target.platform}`)) problems.push(`${target.platform}: ${got.code}: ${first}`)
  }
  for (const other of [{ os: 'freebsd', arch: 'x64', suffix: 'freebsd-x64' }, { os: 'win32', arch: 'arm64', suffix: 'win32-arm64-msvc' }]) {
    const got = underFake(bare, other)
    const first = (got.message ?? '').split('\n')[0]
    if (got.code !== 'ERR_DLPACK_ADDON_NOT_INSTALLED' || !first.includes(`no prebuilt native addon for ${other.suffix}`)) problems.push(`${other.suffix}: ${got.code}: ${first}`)
  }
  if (problems.length) throw new Error(problems.join('\n'))
})

check(`the ${declaredTargets.length} platform packages packed and installed (--force, offline): on each faked platform the loader opens that package's file`, () => {
  const problems = []
  const all = join(work, 'all-platforms')
  mkdirSync(all)
  writeFileSync(join(all, 'package.json'), `${JSON.stringify({ name: 'all-platforms', version: '1.0.0', private: true }, null, 2)}\n`)
  const packs = join(work, 'platform-packs')
  mkdirSync(packs)
  const placeholders = []
  const platformTarballs = declaredTargets.map((target) => {
    // The real prebuild where one is built here (the host's, and artifacts/ after
    // `npm run build:cross`), else a placeholder: the OS loader refuses it either way off its
    // platform, and which file it was asked to open is what this check is about.
    const dir = stagePlatform(target.platform, join(stage, 'all')) ?? stagePlaceholder(target.platform, join(stage, 'all'), placeholders)
    const [{ filename }] = JSON.parse(run('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', packs], { cwd: dir }))
    return join(packs, filename)
  })
  // --force: npm otherwise refuses (EBADPLATFORM) packages whose os/cpu/libc are not this machine's.
  npm(['install', '--offline', '--no-package-lock', '--force', mainTarball, ...platformTarballs], all)
  for (const target of declaredTargets) {
    const got = underFake(all, target)
    const expected = join(all, 'node_modules', `${name}-${target.platform}`, `${manifest.napi.binaryName}.${target.platform}.node`)
    const ours = got.dlopened.filter((file) => file.includes(manifest.napi.binaryName))
    if (ours.length !== 1 || ours[0] !== expected) problems.push(`${target.platform}: the loader opened ${JSON.stringify(ours)}, expected ${expected}`)
    if (target.platform === suffix) {
      if (!got.loaded) problems.push(`${target.platform} (this machine): did not load: ${got.code}: ${got.message}`)
    } else {
      const first = (got.message ?? '').split('\n')[0]
      if (got.code !== 'ERR_DLPACK_ADDON_LOAD' || !first.includes(`${name}-${target.platform}`)) problems.push(`${target.platform}: ${got.code}: ${first}`)
    }
  }
  if (placeholders.length) console.log(`note placeholder files (no prebuild built here; npm run build:cross builds them): ${placeholders.join(', ')}`)
  if (problems.length) throw new Error(problems.join('\n'))
})

// ---- 5. the README's from-source install, then its app example ------------------------------
// The files the README's example reads (image.png, model.onnx), as the doc test writes them.
const fixtures = join(work, 'fixtures')
mkdirSync(fixtures)
await writeFixtures(fixtures)
check("the README's from-source install (npm run pack:local; npm install <clone>/napi-dlpack-*.tgz, offline) and its app example", () => {
  const readme = readFileSync(join(root, 'README.md'), 'utf8')
  const install = /```sh\n([^`]*npm run pack:local[^`]*)```/.exec(readme)?.[1]
  if (!install) throw new Error('the README shows no install block with npm run pack:local')
  const installLine = install.split('\n').find((line) => /npm install \S*napi-dlpack-\*\.tgz/.test(line))
  if (!installLine) throw new Error(`the README's install block installs no napi-dlpack-*.tgz: ${install}`)
  // `npm run pack:local` as the README says, here with the build already done (the install test
  // runs after it) and the tarballs written outside the repository.
  const clone = join(work, 'clone-out')
  run(process.execPath, [join(root, 'scripts', 'pack-local.mjs'), '--no-build', '--out', clone], { cwd: root })
  const written = readdirSync(clone).filter((file) => /^napi-dlpack-.*\.tgz$/.test(file))
  const expected = [`${name}-${version}.tgz`, `${platformName}-${version}.tgz`].sort()
  if (JSON.stringify(written.sort()) !== JSON.stringify(expected)) throw new Error(`pack:local wrote ${written.join(', ')}`)
  // A blank project of the user's own, then the README's `npm install .../napi-dlpack-*.tgz`,
  // the glob expanded as a shell would.
  const project = join(work, 'my-app')
  mkdirSync(project)
  writeFileSync(join(project, 'package.json'), `${JSON.stringify({ name: 'my-app', version: '1.0.0', private: true, type: 'module' }, null, 2)}\n`)
  npm(['install', '--offline', ...written.map((file) => join(clone, file))], project)
  if (!existsSync(join(project, 'node_modules', platformName))) throw new Error(`${platformName} not installed`)
  // The app example: the README's block, its fixtures (the doc test's), its other dependencies.
  const [example] = extractBlocks('README.md', readme).filter((block) => /onnxruntime-node/.test(block.code) && /sharp/.test(block.code))
  if (!example) throw new Error('the README has no app example (sharp and onnxruntime-node)')
  if (example.mode === 'skip') {
    console.log(`note the README's app example is marked skip (${example.reason}): installed, not run`)
    return
  }
  for (const dependency of ['sharp', 'onnxruntime-node', '@types/node']) {
    mkdirSync(dirname(join(project, 'node_modules', dependency)), { recursive: true })
    symlinkSync(join(root, 'node_modules', dependency), join(project, 'node_modules', dependency), 'dir')
  }
  for (const fixture of ['image.png', 'model.onnx']) cpSync(join(fixtures, fixture), join(project, fixture))
  writeFileSync(join(project, 'app.mts'), example.code)
  const compilerOptions = { strict: true, target: 'es2022', lib: ['es2023'], module: 'nodenext', moduleResolution: 'nodenext', types: ['node'], skipLibCheck: true, outDir: 'out' }
  writeFileSync(join(project, 'tsconfig.json'), JSON.stringify({ compilerOptions, files: ['app.mts'] }, null, 2))
  node([join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'], project)
  const output = node([join('out', 'app.mjs')], project)
  console.log(`     the app example printed: ${output.trim().split('\n').join(' | ')}`)
})

// ---- 6. linters and publish dry runs ----------------------------------------------------------
check('publint (--strict) on the main tarball', () => {
  node([join(root, 'node_modules', 'publint', 'src', 'cli.js'), 'run', '--strict', mainTarball], work)
})
check('@arethetypeswrong/cli on the main tarball (offline: no @types lookup)', () => {
  // napi_dlpack.h is exported for require.resolve, and is not a module for attw to type-check.
  const attw = join(root, 'node_modules', '@arethetypeswrong', 'cli', 'dist', 'index.js')
  node([attw, '--no-definitely-typed', '--no-emoji', '--no-color', '--exclude-entrypoints', './include/napi_dlpack.h', '--', mainTarball], work)
})
check(`npm publish --dry-run: ${name}`, () => {
  npm(['publish', '--dry-run', '--offline', '--ignore-scripts', mainTarball], work)
})
for (const target of targetDirs) {
  const dir = stagePlatform(target, stage)
  if (!dir) {
    console.log(`note npm publish --dry-run: npm/${target} has no built binary here (built on its own platform or by cross-compilation)`)
    continue
  }
  check(`publint (--strict) and npm publish --dry-run: npm/${target}`, () => {
    node([join(root, 'node_modules', 'publint', 'src', 'cli.js'), 'run', '--strict', '--pack', 'npm', dir], work)
    npm(['publish', '--dry-run', '--offline', '--ignore-scripts'], dir)
  })
}
if (isCI(process.env)) {
  check('cargo publish --dry-run -p napi-dlpack', () => {
    run('cargo', ['publish', '--dry-run', '-p', 'napi-dlpack', '--allow-dirty'], { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] })
  })
} else {
  console.log('note cargo publish --dry-run -p napi-dlpack: runs with CI=true only (it compiles the packaged crate)')
}

rmSync(work, { recursive: true, force: true })
console.log(failures.length ? `install test: ${failures.length} check(s) failed: ${failures.join('; ')}` : 'install test: every check passed')
process.exit(failures.length ? 1 : 0)
