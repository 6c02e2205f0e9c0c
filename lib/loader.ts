/**
 * Loads the native addon through the loader `napi build` generates (`binding/index.js`, copied
 * from lib/binding/ to dist/binding/ by scripts/copy-binding.mjs), and turns its
 * failure into an error whose first line says what to do. The generated loader tries every
 * candidate it knows (the local build, the platform package, then WASI fallbacks) and throws
 * a generic "Cannot find native binding" whose first cause is the last candidate tried
 * (`napi-dlpack-wasm32-wasi`), which is not the package a user is missing.
 */
import { existsSync, readFileSync } from 'node:fs'
import { basename, dirname, join, resolve } from 'node:path'

import { DLPackError } from './errors'

const PACKAGE = 'napi-dlpack'
const packageRoot = join(__dirname, '..')

/** The platform-package suffix of each Rust target napi-rs builds (`napi.targets`). */
const SUFFIX_BY_TARGET: Record<string, string> = {
  'x86_64-unknown-linux-gnu': 'linux-x64-gnu',
  'x86_64-unknown-linux-musl': 'linux-x64-musl',
  'aarch64-unknown-linux-gnu': 'linux-arm64-gnu',
  'aarch64-unknown-linux-musl': 'linux-arm64-musl',
  'armv7-unknown-linux-gnueabihf': 'linux-arm-gnueabihf',
  'x86_64-apple-darwin': 'darwin-x64',
  'aarch64-apple-darwin': 'darwin-arm64',
  'x86_64-pc-windows-msvc': 'win32-x64-msvc',
  'aarch64-pc-windows-msvc': 'win32-arm64-msvc',
  'i686-pc-windows-msvc': 'win32-ia32-msvc',
  'x86_64-unknown-freebsd': 'freebsd-x64',
  'aarch64-linux-android': 'android-arm64',
}

/** The libc of this Linux process: glibc reports its version in the process report. */
function linuxLibc(): 'gnu' | 'musl' {
  const report = process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined
  return report?.header?.glibcVersionRuntime ? 'gnu' : 'musl'
}

/** This process's platform-package suffix, in napi-rs's naming (e.g. `linux-x64-gnu`). */
export function hostSuffix(): string {
  const base = `${process.platform}-${process.arch}`
  if (process.platform === 'linux') return process.arch === 'arm' ? `${base}-${linuxLibc()}eabihf` : `${base}-${linuxLibc()}`
  if (process.platform === 'win32') return `${base}-msvc`
  return base
}

interface Manifest {
  version?: string
  napi?: { targets?: string[] }
}

/** This package's package.json (its version and `napi.targets`); empty if unreadable. */
function manifest(): Manifest {
  try {
    return require(join(packageRoot, 'package.json')) as Manifest
  } catch {
    return {}
  }
}

function resolves(request: string): boolean {
  try {
    require.resolve(request)
    return true
  } catch {
    return false
  }
}

/** The messages of an error and its causes, outermost first. */
function causeMessages(error: unknown): string[] {
  const messages: string[] = []
  for (let current = error; current instanceof Error && messages.length < 32; current = current.cause) {
    messages.push(current.message.split('\n')[0] ?? '')
  }
  return messages
}

/** The error to throw when the generated loader failed with `error`. */
export function bindingError(error: unknown): DLPackError {
  const suffix = hostSuffix()
  const platformPackage = `${PACKAGE}-${suffix}`
  // Where `napi build --output-dir lib/binding` puts a local build, once copied beside the loader.
  const localBuild = join(__dirname, 'binding', `${PACKAGE}.${suffix}.node`)
  if (existsSync(localBuild) || resolves(platformPackage)) {
    // Present but unloadable: a libc too old, a wrong architecture, a version mismatch. The
    // generated loader's own message is generic; the first of its causes that is not a
    // "Cannot find module" of another candidate says which.
    const [outer = String(error), ...causes] = causeMessages(error)
    const reason = causes.find((message) => !message.startsWith('Cannot find module')) ?? outer
    return new DLPackError(
      'ERR_DLPACK_ADDON_LOAD',
      `${PACKAGE}: the native addon ${existsSync(localBuild) ? localBuild : platformPackage} is installed but failed to load: ${reason}`,
      { cause: error },
    )
  }
  const { version = 'latest', napi } = manifest()
  // The suffixes of the platform packages this version publishes.
  const published = (napi?.targets ?? []).map((target) => SUFFIX_BY_TARGET[target] ?? target)
  if (!published.includes(suffix)) {
    return new DLPackError(
      'ERR_DLPACK_ADDON_NOT_INSTALLED',
      `${PACKAGE}: no prebuilt native addon for ${suffix} (prebuilt: ${published.join(', ') || 'none'}); ` +
        `build it from the repository with \`npm run build\` (needs Rust), or point NAPI_RS_NATIVE_LIBRARY_PATH at a built ${PACKAGE} .node file.`,
      { cause: error },
    )
  }
  const source = installSource()
  if (source.kind === 'checkout') {
    // A clone of the repository (or a link to one): the addon is built there, not installed.
    return new DLPackError(
      'ERR_DLPACK_ADDON_NOT_INSTALLED',
      `${PACKAGE}: the native addon for this platform (${suffix}) is not built in ${packageRoot}; build it there ` +
        'with `npm run build` (needs Rust and a C compiler), or install the package from the tarballs ' +
        '`npm run pack:local` writes.',
      { cause: error },
    )
  }
  if (source.kind === 'tarball') {
    // Installed from a local tarball: the addon is a second tarball, not a registry package
    // (before publication none exists there).
    const platformTarball = join(source.dir, `${platformPackage}-${version}.tgz`)
    return new DLPackError(
      'ERR_DLPACK_ADDON_NOT_INSTALLED',
      `${PACKAGE}: the native addon for this platform (${suffix}) is not installed: ${PACKAGE} came from the tarball ` +
        `${source.tarball}, and its addon is a second tarball, ${platformTarball}; install both with ` +
        `\`npm install ${join(source.dir, `${PACKAGE}-*.tgz`)}\` (\`npm run pack:local\` in the ${PACKAGE} repository writes them).`,
      { cause: error },
    )
  }
  return new DLPackError(
    'ERR_DLPACK_ADDON_NOT_INSTALLED',
    `${PACKAGE}: the native addon for this platform (${suffix}) is not installed; install it with ` +
      `\`npm install ${platformPackage}@${version}\`. It is an optional dependency of ${PACKAGE}, which npm ` +
      'leaves out with --omit=optional, or when the lockfile was written on another platform (npm/cli#4828).',
    { cause: error },
  )
}

type InstallSource = { kind: 'registry' } | { kind: 'checkout' } | { kind: 'tarball'; tarball: string; dir: string }

/**
 * How this copy of the package got here, as far as it can tell: a source checkout (the
 * repository's own files are next to it), a local tarball (npm's hidden lockfile in the
 * enclosing node_modules says `resolved: "file:....tgz"`), or else a registry.
 */
function installSource(): InstallSource {
  if (existsSync(join(packageRoot, 'Cargo.toml')) && existsSync(join(packageRoot, 'lib', 'loader.ts'))) return { kind: 'checkout' }
  const nodeModules = dirname(packageRoot)
  if (basename(nodeModules) !== 'node_modules') return { kind: 'registry' }
  try {
    const lock = JSON.parse(readFileSync(join(nodeModules, '.package-lock.json'), 'utf8')) as {
      packages?: Record<string, { resolved?: string } | undefined>
    }
    const resolved = lock.packages?.[`node_modules/${PACKAGE}`]?.resolved
    if (resolved?.startsWith('file:') && resolved.endsWith('.tgz')) {
      // Relative to the project that holds node_modules.
      const tarball = resolve(dirname(nodeModules), resolved.slice('file:'.length))
      return { kind: 'tarball', tarball, dir: dirname(tarball) }
    }
  } catch {
    // No hidden lockfile (another package manager, an older npm): say what a registry install needs.
  }
  return { kind: 'registry' }
}

/** The generated loader's exports. */
export function loadBinding(): unknown {
  try {
    return require('./binding/index.js') as unknown
  } catch (error) {
    throw bindingError(error)
  }
}
