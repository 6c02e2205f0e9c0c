// Checks Linux prebuilds by reading the ELF files themselves (readelf from binutils):
//  - the machine is the target's (x86-64 or AArch64) and the file exports napi_register_module_v1;
//  - gnu builds: every glibc symbol version the file requires (its .gnu.version_r entries, which
//    the dynamic loader checks at load time) is at most GLIBC_FLOOR, so `require` works on
//    glibc 2.17 systems (CentOS 7, Ubuntu 14.04 on) and not only on the build machine's glibc;
//  - musl builds: no glibc symbol version and no glibc library (libc.so.6, ld-linux) needed.
// Usage: node scripts/cross/check-linux.mjs [FILE.node ...]
//   with no FILE: every built artifact under artifacts/ (exit 1 when there is none).
//   A FILE's target is read from its name (napi-dlpack.linux-x64-gnu.node).
// Exit status 1 on any violation, with one line per file either way.
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { basename } from 'node:path'

import { GLIBC_FLOOR, builtTargets } from './targets.mjs'

const ELF_MACHINE = { x64: 62, arm64: 183 }

/** Compares dotted versions numerically: '2.3.4' < '2.14'. */
export function compareVersions(a, b) {
  const pa = a.split('.').map(Number)
  const pb = b.split('.').map(Number)
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0)
    if (d) return Math.sign(d)
  }
  return 0
}

/** The glibc versions a file requires, from readelf's version-needs listing. */
export function requiredGlibcVersions(readelfVersionInfo) {
  const versions = new Set()
  for (const match of readelfVersionInfo.matchAll(/Name: GLIBC_([0-9.]+)/g)) versions.add(match[1])
  return [...versions].sort(compareVersions)
}

function elfMachine(file) {
  const header = readFileSync(file).subarray(0, 20)
  if (header.readUInt32BE(0) !== 0x7f454c46) throw new Error(`${file}: not an ELF file`)
  return header.readUInt16LE(18) // e_machine (both targets are little-endian)
}

/** Checks one file; returns the problems found (empty when it passes) and a summary. */
export function checkArtifact(file, { arch, libc }) {
  const problems = []
  const machine = elfMachine(file)
  if (machine !== ELF_MACHINE[arch]) problems.push(`ELF machine ${machine}, expected ${ELF_MACHINE[arch]} (${arch})`)
  const readelf = (...args) => execFileSync('readelf', [...args, '--wide', file], { encoding: 'utf8' })
  if (!/\snapi_register_module_v1\b/.test(readelf('--dyn-syms'))) problems.push('does not export napi_register_module_v1')
  const needed = [...readelf('--dynamic').matchAll(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/g)].map((m) => m[1])
  const glibc = requiredGlibcVersions(readelf('--version-info'))
  const newest = glibc.at(-1)
  if (libc === 'gnu') {
    if (!newest) problems.push('requires no GLIBC_ symbol version at all (not a glibc build?)')
    else if (compareVersions(newest, GLIBC_FLOOR) > 0) {
      const above = glibc.filter((v) => compareVersions(v, GLIBC_FLOOR) > 0)
      problems.push(`requires GLIBC_${above.join(', GLIBC_')}, above the floor GLIBC_${GLIBC_FLOOR}`)
    }
  } else {
    if (newest) problems.push(`a musl build requiring GLIBC_${glibc.join(', GLIBC_')}`)
    const glibcLibs = needed.filter((lib) => lib === 'libc.so.6' || lib.startsWith('ld-linux'))
    if (glibcLibs.length) problems.push(`a musl build needing ${glibcLibs.join(', ')}`)
  }
  const summary = libc === 'gnu' ? `newest GLIBC_${newest ?? '(none)'} (floor ${GLIBC_FLOOR})` : `needs ${needed.join(', ')}`
  return { problems, summary }
}

function targetOfFile(file) {
  const match = /\.linux-(x64|arm64)-(gnu|musl)\.node$/.exec(basename(file))
  if (!match) throw new Error(`${file}: name does not say its target (want *.linux-<x64|arm64>-<gnu|musl>.node)`)
  return { arch: match[1], libc: match[2] }
}

if (process.argv[1] && import.meta.url.endsWith(basename(process.argv[1]))) {
  const files = process.argv.slice(2)
  const checks = files.length
    ? files.map((file) => ({ file, ...targetOfFile(file) }))
    : builtTargets().filter((t) => t.os === 'linux').map((t) => ({ file: t.artifact, arch: t.arch, libc: t.libc }))
  if (!checks.length) {
    console.error('check-linux-artifacts: no artifacts under artifacts/ (run `npm run build:cross` first)')
    process.exit(1)
  }
  let failed = 0
  for (const { file, arch, libc } of checks) {
    const { problems, summary } = checkArtifact(file, { arch, libc })
    console.log(`${problems.length ? 'FAIL' : 'ok  '} ${file}: linux-${arch}-${libc}, ${summary}`)
    for (const problem of problems) console.log(`       ${problem}`)
    if (problems.length) failed += 1
  }
  process.exit(failed ? 1 : 0)
}
