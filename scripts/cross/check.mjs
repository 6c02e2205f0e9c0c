// The artifact checks of every declared target, by the file's own format:
//   linux-*   scripts/cross/check-linux.mjs   (ELF machine, export, glibc floor / no glibc)
//   darwin-*  scripts/cross/check-macos.mjs   (Mach-O kind/CPU, minimum macOS, libSystem only,
//             export, arm64 signature and page hashes; and the universal file's two slices)
//   win32-*   scripts/cross/check-windows.mjs (PE32+ x64 DLL, imports on the allow-list, export)
// Usage: node scripts/cross/check.mjs [--npm] [TARGET ...]
//   default: the files under artifacts/ (what `npm run build:cross` and the release workflow's
//   builds write), the macOS universal file too when both macOS targets are picked;
//   --npm: the file each npm/<platform>/ package ships (its package.json `main`), after
//   `napi artifacts` moved them there: what `npm publish` would publish.
//   --npm-root DIR: the npm/ folder to read instead (the checks' own controls use a copy);
//   TARGET: a triple, a platform name or a group (linux, macos, windows); default all seven.
// A missing file is a failure naming it, like a file of the wrong format or architecture.
import { existsSync, readFileSync } from 'node:fs'
import { basename, join, relative, resolve } from 'node:path'

import { checkArtifact as checkElf } from './check-linux.mjs'
import { checkMacho } from './check-macos.mjs'
import { checkPe } from './check-windows.mjs'
import { root, selectTargets, universalArtifact } from './targets.mjs'

/** Checks `file` as a prebuild of `target`; a missing file is a problem like any other. */
export function checkTarget(target, file = target.artifact) {
  if (!existsSync(file)) return { problems: [`missing: ${file}`], summary: 'no file' }
  if (target.os === 'darwin') return checkMacho(file, target.arch)
  if (target.os === 'win32') return checkPe(file, target.arch)
  try {
    return checkElf(file, target)
  } catch (error) {
    // Not an ELF file at all (a macOS or Windows file in a Linux package, say).
    return { problems: [error.message.replace(`${file}: `, '')], summary: 'not ELF' }
  }
}

/** The macOS universal file's check (both slices, each as its thin target). */
export const checkUniversal = (file = universalArtifact) =>
  existsSync(file) ? checkMacho(file, 'universal') : { problems: [`missing: ${file}`], summary: 'no file' }

/** The file npm/<platform>/ ships: its package.json's `main`. */
export function npmFile(target, npmRoot = join(root, 'npm')) {
  const dir = join(npmRoot, target.platform)
  const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'))
  return join(dir, manifest.main)
}

if (process.argv[1] && import.meta.url.endsWith(basename(process.argv[1]))) {
  const args = process.argv.slice(2)
  const npm = args.includes('--npm')
  const rootAt = args.indexOf('--npm-root')
  const npmRoot = rootAt === -1 ? undefined : resolve(args[rootAt + 1])
  const words = args.filter((arg, i) => !arg.startsWith('--') && (rootAt === -1 || i !== rootAt + 1))
  const targets = selectTargets(words)
  const checks = targets.map((target) => ({ label: target.platform, file: npm ? npmFile(target, npmRoot) : target.artifact, run: (file) => checkTarget(target, file) }))
  const darwin = targets.filter((t) => t.os === 'darwin')
  if (!npm && darwin.length === 2) checks.push({ label: 'darwin-universal', file: universalArtifact, run: checkUniversal })
  let failed = 0
  for (const { label, file, run } of checks) {
    const { problems, summary } = run(file)
    console.log(`${problems.length ? 'FAIL' : 'ok  '} ${label}: ${relative(root, file)}: ${summary}`)
    for (const problem of problems) console.log(`       ${relative(root, file)}: ${problem}`)
    if (problems.length) failed += 1
  }
  console.log(`${checks.length - failed} of ${checks.length} prebuilds pass${failed ? `; ${failed} FAIL` : ''}`)
  process.exit(failed ? 1 : 0)
}
