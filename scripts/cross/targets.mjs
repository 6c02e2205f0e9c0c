// The Linux prebuilds that scripts/cross/build.mjs cross-compiles with zig, and the facts the
// build, the checks (scripts/cross/check-linux.mjs) and the run under emulation
// (scripts/cross/test.mjs) share: the glibc floor, where each artifact lands, how to run it.
// The target list itself is package.json's `napi.targets` (the one list napi-rs reads).
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
export const PREBUILD_SPECS = ['core/smoke.spec.ts', 'core/tensor.spec.ts', 'core/protocol.spec.ts', 'core/lifetime.spec.ts', 'abi/c-addon.spec.ts']

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

/** The targets picked by command-line words (triples or platform names); all when none. */
export function selectTargets(words) {
  const all = linuxTargets()
  if (!words.length) return all
  return words.map((word) => {
    const target = all.find((t) => t.triple === word || t.platform === word)
    if (!target) throw new Error(`unknown linux target ${word}; declared: ${all.map((t) => t.platform).join(', ')}`)
    return target
  })
}

/** The targets whose artifact has been built. */
export const builtTargets = () => linuxTargets().filter((target) => existsSync(target.artifact))
