// Adds the lockfile entries npm leaves out for napi-rs style platform packages, so that
// `npm ci` accepts package-lock.json.
//
// Why: a package such as @napi-rs/tar lists one optional dependency per platform
// (@napi-rs/tar-darwin-arm64, ...). npm can only lock those whose manifest it can fetch; when
// the registry it talks to lacks some (a partial mirror, or a release whose platform packages
// were not all published), `npm install` writes a lockfile without them and `npm ci` then
// refuses it ("Missing: @napi-rs/tar-darwin-arm64@ from lock file").
//
// What: for every locked package, each optional dependency that does not resolve from the
// package's place in the tree gets an entry at the top of node_modules with the exact version
// its parent pins and the os/cpu/libc its napi-rs platform suffix names. npm skips such an
// entry on every other platform without fetching it; on its own platform npm fetches it by
// name and version like any other. A suffix this script does not know is an error, never a
// guess.
//
// Run after `npm install` changes the lockfile: `node scripts/lock-platform-packages.mjs`
// (`--check` only reports, and exits 1 when an entry is missing).
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

const lockPath = join(fileURLToPath(new URL('..', import.meta.url)), 'package-lock.json')
const lock = JSON.parse(readFileSync(lockPath, 'utf8'))
const packages = lock.packages

/** napi-rs platform suffixes (the `napi.targets` naming) and what npm matches them against. */
const PLATFORMS = {
  'android-arm-eabi': { os: ['android'], cpu: ['arm'] },
  'android-arm64': { os: ['android'], cpu: ['arm64'] },
  'darwin-arm64': { os: ['darwin'], cpu: ['arm64'] },
  'darwin-x64': { os: ['darwin'], cpu: ['x64'] },
  'darwin-universal': { os: ['darwin'] },
  'freebsd-x64': { os: ['freebsd'], cpu: ['x64'] },
  'freebsd-arm64': { os: ['freebsd'], cpu: ['arm64'] },
  'linux-arm-gnueabihf': { os: ['linux'], cpu: ['arm'], libc: ['glibc'] },
  'linux-arm-musleabihf': { os: ['linux'], cpu: ['arm'], libc: ['musl'] },
  'linux-arm64-gnu': { os: ['linux'], cpu: ['arm64'], libc: ['glibc'] },
  'linux-arm64-musl': { os: ['linux'], cpu: ['arm64'], libc: ['musl'] },
  'linux-ppc64-gnu': { os: ['linux'], cpu: ['ppc64'], libc: ['glibc'] },
  'linux-riscv64-gnu': { os: ['linux'], cpu: ['riscv64'], libc: ['glibc'] },
  'linux-riscv64-musl': { os: ['linux'], cpu: ['riscv64'], libc: ['musl'] },
  'linux-s390x-gnu': { os: ['linux'], cpu: ['s390x'], libc: ['glibc'] },
  'linux-x64-gnu': { os: ['linux'], cpu: ['x64'], libc: ['glibc'] },
  'linux-x64-musl': { os: ['linux'], cpu: ['x64'], libc: ['musl'] },
  'openharmony-arm64': { os: ['openharmony'], cpu: ['arm64'] },
  'wasm32-wasi': { cpu: ['wasm32'] },
  'win32-arm64-msvc': { os: ['win32'], cpu: ['arm64'] },
  'win32-ia32-msvc': { os: ['win32'], cpu: ['ia32'] },
  'win32-x64-msvc': { os: ['win32'], cpu: ['x64'] },
}

/** Where Node's resolution from the package at `location` finds `name`, or undefined. */
function resolveFrom(location, name) {
  let dir = location
  for (;;) {
    const candidate = dir ? `${dir}/node_modules/${name}` : `node_modules/${name}`
    if (packages[candidate]) return candidate
    if (!dir) return undefined
    const cut = dir.lastIndexOf('/node_modules/')
    dir = cut === -1 ? '' : dir.slice(0, cut)
  }
}

const added = []
for (const [location, entry] of Object.entries(packages)) {
  if (!location || entry.link) continue
  for (const [name, version] of Object.entries(entry.optionalDependencies ?? {})) {
    if (resolveFrom(location, name)) continue
    const suffix = Object.keys(PLATFORMS).find((key) => name.endsWith(`-${key}`))
    if (!suffix) throw new Error(`${location}: optional dependency ${name} is not locked and names no known platform`)
    if (!/^\d+\.\d+\.\d+(-[\w.]+)?$/.test(version)) {
      throw new Error(`${location}: ${name} is pinned to a range (${version}), not a version; lock it by hand`)
    }
    const target = `node_modules/${name}`
    const { os, cpu, libc } = PLATFORMS[suffix]
    packages[target] = {
      version,
      ...(cpu && { cpu }),
      ...(entry.dev && { dev: true }),
      ...(libc && { libc }),
      optional: true,
      ...(os && { os }),
    }
    added.push(`${name}@${version} (for ${location})`)
  }
}

if (process.argv.includes('--check')) {
  for (const line of added) console.log(`missing: ${line}`)
  process.exit(added.length ? 1 : 0)
}
// npm keeps `packages` sorted by location.
lock.packages = Object.fromEntries(Object.entries(packages).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
writeFileSync(lockPath, `${JSON.stringify(lock, null, 2)}\n`)
console.log(added.length ? `added ${added.length} entries:\n  ${added.join('\n  ')}` : 'nothing missing')
