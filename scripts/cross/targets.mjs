// The prebuilds that scripts/cross/build.mjs cross-compiles with zig on this x64 Linux machine
// (all seven targets of package.json's `napi.targets`, the one list napi-rs reads), and the
// facts the build, the checks (scripts/cross/check*.mjs) and the runs (scripts/cross/test.mjs)
// share: the glibc floor, the minimum macOS, where each artifact lands, how to run it.
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

export const root = fileURLToPath(new URL('../..', import.meta.url))

/** The oldest glibc the gnu prebuilds run on (that of CentOS 7 / RHEL 7, as napi-rs packages). */
export const GLIBC_FLOOR = '2.17'

/**
 * The ava specs every prebuild is tested with (scripts/cross/test.mjs here, scripts/cross/
 * test-prebuild.mjs on the release workflow's runners): the addon, the JS protocol, lifetimes
 * and the C ABI, without peer libraries (onnxruntime, libtorch) or the CUDA test double.
 */
export const PREBUILD_SPECS = [
  'core/smoke.spec.ts',
  'core/tensor.spec.ts',
  'core/protocol.spec.ts',
  'core/lifetime.spec.ts',
  ...['import', 'export', 'deleters', 'malformed', 'edges', 'hostile'].map((topic) => `abi/c-addon-${topic}.spec.ts`),
]

/**
 * The specs the Windows build runs under wine (scripts/cross/test.mjs): the JS specs that need
 * no native test fixture (the C addon and the others are built for Linux here), those that exist.
 */
export const WINDOWS_SPECS = ['core/smoke.spec.ts', 'core/tensor.spec.ts', 'core/protocol.spec.ts', 'core/lifetime.spec.ts', 'core/convert.spec.ts', 'core/types.spec.ts']

/** Where the cross builds put their `.node` files: `napi artifacts`' default input folder. */
export const artifactsDir = join(root, 'artifacts')

/** Tools the cross builds install for themselves (zig, cargo-zigbuild, an arm64 Node, …). */
export const toolsDir = join(root, '.cross')

const packageJson = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'))
export const binaryName = packageJson.napi.binaryName

const nodeArch = { x86_64: 'x64', aarch64: 'arm64' }

/**
 * @typedef {object} LinuxTarget
 * @property {string} triple       Rust target triple, e.g. aarch64-unknown-linux-gnu
 * @property {string} platform     napi-rs platform name, e.g. linux-arm64-gnu (the npm/ folder)
 * @property {'x64' | 'arm64'} arch Node's process.arch
 * @property {'gnu' | 'musl'} libc
 * @property {string} zigTarget    what `napi build -x --target` gets: gnu targets carry the glibc floor
 * @property {string} artifact     path of the built .node under artifacts/
 */

/** The linux targets of package.json's napi.targets, in its order. @returns {LinuxTarget[]} */
export function linuxTargets() {
  return packageJson.napi.targets
    .filter((triple) => triple.includes('-linux-'))
    .map((triple) => {
      const [cpu] = triple.split('-')
      const libc = triple.endsWith('-musl') ? 'musl' : 'gnu'
      const arch = nodeArch[cpu]
      if (!arch) throw new Error(`cross-targets: no Node arch known for ${triple}`)
      const platform = `linux-${arch}-${libc}`
      return {
        triple,
        platform,
        arch,
        libc,
        zigTarget: libc === 'gnu' ? `${triple}.${GLIBC_FLOOR}` : triple,
        artifact: join(artifactsDir, triple, `${binaryName}.${platform}.node`),
      }
    })
}

/**
 * @typedef {object} ForeignTarget  a macOS or Windows prebuild, built with `cargo zigbuild`
 * @property {string} triple       the declared triple (x86_64-pc-windows-msvc for Windows)
 * @property {string} buildTriple  what is compiled: the same, except x86_64-pc-windows-gnu
 *   for Windows (the MSVC toolchain's CRT and SDK cannot be had here; see docs/platforms.md)
 * @property {string} platform     napi-rs platform name (darwin-arm64, win32-x64-msvc)
 * @property {'darwin' | 'win32'} os
 * @property {'x64' | 'arm64'} arch
 * @property {string} artifact     path of the .node under artifacts/<triple>/, named as the
 *   package's loader and its npm/<platform> package expect
 */

/** The macOS and Windows targets of package.json's napi.targets. @returns {ForeignTarget[]} */
export function foreignTargets() {
  return packageJson.napi.targets
    .filter((triple) => triple.includes('-apple-darwin') || triple.includes('-pc-windows-'))
    .map((triple) => {
      const [cpu] = triple.split('-')
      const arch = nodeArch[cpu]
      if (!arch) throw new Error(`cross-targets: no Node arch known for ${triple}`)
      const os = triple.includes('-apple-darwin') ? 'darwin' : 'win32'
      if (os === 'win32' && !triple.endsWith('-msvc')) throw new Error(`cross-targets: ${triple}: only the msvc naming is loaded by official Node builds`)
      const platform = os === 'darwin' ? `darwin-${arch}` : `win32-${arch}-msvc`
      return {
        triple,
        buildTriple: os === 'win32' ? triple.replace(/-msvc$/, '-gnu') : triple,
        platform,
        os,
        arch,
        artifact: join(artifactsDir, triple, `${binaryName}.${platform}.node`),
      }
    })
}

/** Every declared target: the Linux ones (os 'linux'), then macOS and Windows. */
export const allTargets = () => [...linuxTargets().map((t) => ({ ...t, os: 'linux' })), ...foreignTargets()]

/**
 * The macOS universal file (x64 and arm64 slices, made by llvm-lipo from the two builds): the
 * package's loader tries `napi-dlpack.darwin-universal.node` first on macOS, and apps that ship
 * one file for both Macs (Electron universal builds) use it. Not an npm package of its own.
 */
export const universalArtifact = join(artifactsDir, 'universal-apple-darwin', `${binaryName}.darwin-universal.node`)

/** Words that pick a group of targets on the command line. */
const GROUPS = { linux: 'linux', darwin: 'darwin', macos: 'darwin', windows: 'win32', win32: 'win32' }

/**
 * The targets picked by command-line words (triples, platform names, or a group: linux, macos,
 * windows); all when none.
 */
export function selectTargets(words) {
  const all = allTargets()
  if (!words.length) return all
  return words.flatMap((word) => {
    if (GROUPS[word]) return all.filter((t) => t.os === GROUPS[word])
    const target = all.find((t) => t.triple === word || t.platform === word)
    if (!target) throw new Error(`unknown target ${word}; declared: ${all.map((t) => t.platform).join(', ')} (or linux, macos, windows)`)
    return [target]
  })
}

/** The targets whose artifact has been built. */
export const builtTargets = () => allTargets().filter((target) => existsSync(target.artifact))

/**
 * The oldest macOS each darwin prebuild loads on (MACOSX_DEPLOYMENT_TARGET of its build): 10.13
 * for x64 (as napi-rs packages); arm64 Macs start at macOS 11, which is also the oldest zig
 * has a libSystem for (asking zig for arm64 10.13 fails the link).
 */
export const MACOS_MIN = { x64: '10.13', arm64: '11.0' }
