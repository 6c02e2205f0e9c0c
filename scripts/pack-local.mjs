// `npm run pack:local`: the package tarballs of a from-source install, in one command.
//
//   node scripts/pack-local.mjs [--out DIR] [--no-build]
//
// Builds the addon and dist/ (scripts/ensure-built.mjs; --no-build skips it), then writes into
// DIR (default: the repository root)
//   napi-dlpack-<version>.tgz               the JavaScript package as `napi prepublish` publishes
//                                           it: optionalDependencies on every platform package
//   napi-dlpack-<platform>-<version>.tgz    this platform's package (npm/<platform>) with the
//                                           addon just built
// so that `npm install DIR/napi-dlpack-*.tgz` (both at once) installs a working package, offline,
// with no compiler: npm takes the platform package from its tarball, and leaves out the other
// platforms' packages (optional, and not on a registry until published). The install test
// (scripts/install-test.mjs) packs through this script too.
import { execFileSync } from 'node:child_process'
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))
const readJson = (path) => JSON.parse(readFileSync(path, 'utf8'))

/** The platform directories of npm/ (one per target in `napi.targets`). */
export function platformDirs() {
  return readdirSync(join(root, 'npm')).filter((dir) => existsSync(join(root, 'npm', dir, 'package.json')))
}

function npmPack(dir, destination) {
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'
  const out = execFileSync(npm, ['pack', '--json', '--ignore-scripts', '--pack-destination', destination], {
    cwd: dir,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const [{ filename }] = JSON.parse(out)
  return join(destination, filename)
}

/**
 * Packs the main package with the optionalDependencies `napi prepublish` writes before
 * publishing (a plain `npm pack` has none, so its install would never look for the addon).
 * Returns the tarball's path in `out`.
 */
export function packMain(out) {
  const { version } = readJson(join(root, 'package.json'))
  const stage = mkdtempSync(join(tmpdir(), 'napi-dlpack-pack-'))
  try {
    const raw = npmPack(root, stage)
    const dir = join(stage, 'package')
    mkdirSync(dir)
    execFileSync('tar', ['xzf', raw, '-C', dir, '--strip-components=1'])
    rmSync(raw)
    const manifest = readJson(join(dir, 'package.json'))
    manifest.optionalDependencies = Object.fromEntries(platformDirs().map((target) => [readJson(join(root, 'npm', target, 'package.json')).name, version]))
    writeFileSync(join(dir, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`)
    for (const required of ['LICENSE', 'README.md', 'dist/index.js', 'dist/index.mjs', 'dist/index.d.ts', 'dist/index.d.mts', 'dist/binding/index.js', 'dist/binding/index.d.ts', 'include/napi_dlpack.h', 'include/index.js']) {
      if (!existsSync(join(dir, required))) throw new Error(`the packed package lacks ${required}`)
    }
    // A local build's addon (dist/binding/*.node) stays out: the generated loader would load it
    // before the platform package, on any machine ("files" in package.json excludes it).
    const addons = readdirSync(join(dir, 'dist', 'binding')).filter((file) => file.endsWith('.node'))
    if (addons.length) throw new Error(`the packed package holds a local build: dist/binding/${addons.join(', dist/binding/')}`)
    const packed = npmPack(dir, stage)
    const target = join(out, basename(packed))
    cpSync(packed, target)
    return target
  } finally {
    rmSync(stage, { recursive: true, force: true })
  }
}

/**
 * Stages npm/<target> as `napi artifacts` + `napi prepublish` leave it (the manifest, the built
 * binary, LICENSE) in `stage`; undefined when that target's binary was not built here.
 */
export function stagePlatform(target, stage) {
  const manifest = readJson(join(root, 'npm', target, 'package.json'))
  const binary = manifest.main
  // Where `napi build --platform --output-dir lib/binding` left it, else where `napi artifacts`
  // moved it, else where the cross builds put it (artifacts/<triple>/, `npm run build:cross`).
  const artifacts = join(root, 'artifacts')
  const crossBuilt = existsSync(artifacts) ? readdirSync(artifacts).map((dir) => join(artifacts, dir, binary)) : []
  const built = [join(root, 'lib', 'binding', binary), join(root, 'npm', target, binary), ...crossBuilt].find((path) => existsSync(path))
  if (!built) return undefined
  const dir = join(stage, target)
  cpSync(join(root, 'npm', target), dir, { recursive: true })
  cpSync(built, join(dir, binary))
  cpSync(join(root, 'LICENSE'), join(dir, 'LICENSE'))
  return dir
}

/** Packs this platform's package (`suffix`, e.g. linux-x64-gnu) into `out`. */
export function packPlatform(suffix, out) {
  if (!platformDirs().includes(suffix)) throw new Error(`no npm/${suffix}: ${suffix} is not a target of this package (napi.targets)`)
  const stage = mkdtempSync(join(tmpdir(), 'napi-dlpack-pack-'))
  try {
    const dir = stagePlatform(suffix, stage)
    if (!dir) throw new Error(`the addon for ${suffix} is not built (run node scripts/ensure-built.mjs)`)
    const packed = npmPack(dir, stage)
    const target = join(out, basename(packed))
    renameSync(packed, target)
    return target
  } finally {
    rmSync(stage, { recursive: true, force: true })
  }
}

/** Both tarballs of a from-source install into `out`: `{ main, platform }` paths. */
export async function packLocal({ out = root, build = true } = {}) {
  if (build) execFileSync(process.execPath, [join(root, 'scripts', 'ensure-built.mjs')], { cwd: root, stdio: 'inherit' })
  mkdirSync(out, { recursive: true })
  const { hostSuffix } = await import(join(root, 'dist', 'loader.js'))
  const main = packMain(out)
  const platform = packPlatform(hostSuffix(), out)
  return { main, platform }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2)
  const outAt = args.indexOf('--out')
  const out = outAt >= 0 ? resolve(args[outAt + 1]) : root
  const { main, platform } = await packLocal({ out, build: !args.includes('--no-build') })
  console.log(`wrote\n  ${main}\n  ${platform}\ninstall both into your project (offline, no compiler needed):\n  npm install ${join(out, 'napi-dlpack-*.tgz')}`)
}
