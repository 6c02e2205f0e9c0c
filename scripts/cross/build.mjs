// `npm run build:cross`: builds the Linux prebuilds of package.json's napi.targets on this x64
// Linux machine by cross-compilation with zig (`napi build -x`, which runs cargo-zigbuild), with
// the release profile (LTO) of the native build:
//   linux-x64-gnu, linux-arm64-gnu  against glibc 2.17 (GLIBC_FLOOR: zig links the 2.17 symbols)
//   linux-x64-musl, linux-arm64-musl (dynamically linked to musl, crt-static off, as Node needs)
// Each .node lands in artifacts/<triple>/, where `napi artifacts` looks for them. A target whose
// artifact is newer than every Rust source is not rebuilt (--force rebuilds). Each artifact is
// then checked (scripts/cross/check-linux.mjs: machine, exports, glibc floor / no glibc).
// Usage: node scripts/cross/build.mjs [--force] [--package] [TARGET ...]
//   TARGET: a triple or a platform name (linux-arm64-gnu); default every declared linux target.
//   --package: then `napi artifacts` into npm/ for the linux targets, `napi prepublish
//   --dry-run`, and `npm pack` of each linux platform package into target/cross/packs/
//   (macOS and Windows artifacts come from .github/workflows/release.yml, not from here).
// zig, cargo-zigbuild and the Rust targets are installed on first use (scripts/cross/tools.mjs).
import { execFileSync } from 'node:child_process'
import { mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

import { checkArtifact } from './check-linux.mjs'
import { artifactsDir, binaryName, root, selectTargets } from './targets.mjs'
import { ensureRustTargets, zigEnv } from './tools.mjs'

const args = process.argv.slice(2)
const force = args.includes('--force')
const pack = args.includes('--package')
const targets = selectTargets(args.filter((arg) => !arg.startsWith('--')))
const napiCli = join(root, 'node_modules', '@napi-rs', 'cli', 'dist', 'cli.js')

/** Newest modification time of what a build depends on (Rust sources, manifests, lockfile). */
function newestBuildInput() {
  const files = ['Cargo.toml', 'Cargo.lock', 'build.rs', 'crates/napi-dlpack/Cargo.toml']
  for (const dir of ['src', 'crates/napi-dlpack/src']) {
    for (const name of readdirSync(join(root, dir), { recursive: true })) files.push(join(dir, name))
  }
  return Math.max(...files.map((file) => statSync(join(root, file)).mtimeMs))
}

const mtime = (file) => {
  try {
    return statSync(file).mtimeMs
  } catch {
    return 0
  }
}

const env = zigEnv()
ensureRustTargets(targets.map((t) => t.triple))
const inputs = newestBuildInput()
const report = []
let failed = false
for (const target of targets) {
  if (!force && mtime(target.artifact) > inputs) {
    report.push(`${target.platform}: up to date (${target.artifact})`)
  } else {
    console.log(`\n### napi build --target ${target.zigTarget} -x (cargo zigbuild)`)
    const started = Date.now()
    try {
      execFileSync(process.execPath, [napiCli, 'build', '--platform', '--release', '--target', target.zigTarget, '--cross-compile',
        '--output-dir', join(artifactsDir, target.triple), '--no-js', '--dts', 'index.d.ts'], { cwd: root, stdio: 'inherit', env })
      report.push(`${target.platform}: built in ${((Date.now() - started) / 1000).toFixed(0)} s`)
    } catch {
      report.push(`${target.platform}: BUILD FAILED after ${((Date.now() - started) / 1000).toFixed(0)} s`)
      failed = true
      continue
    }
  }
  const { problems, summary } = checkArtifact(target.artifact, target)
  report.push(`  ${problems.length ? 'FAIL' : 'ok'}: ${summary}${problems.map((p) => `\n  ${p}`).join('')}`)
  if (problems.length) failed = true
}
console.log(`\n### cross builds\n${report.join('\n')}`)
if (failed) process.exit(1)

if (pack) {
  // `napi artifacts` wants an artifact for every declared target; macOS and Windows are built by
  // the release workflow, so here it runs with a config naming only the linux targets.
  const outDir = join(root, 'target', 'cross')
  mkdirSync(join(outDir, 'packs'), { recursive: true })
  const config = join(outDir, 'napi-linux.json')
  const { napi } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'))
  writeFileSync(config, JSON.stringify({ ...napi, targets: selectTargets([]).map((t) => t.triple) }, null, 2))
  const napiRun = (...cmd) => execFileSync(process.execPath, [napiCli, ...cmd, '--config-path', config], { cwd: root, stdio: 'inherit' })
  napiRun('artifacts')
  napiRun('prepublish', '--dry-run', '--skip-optional-publish')
  for (const target of selectTargets([])) {
    execFileSync('npm', ['pack', '--pack-destination', join(outDir, 'packs'), join(root, 'npm', target.platform)], { cwd: root, stdio: 'inherit' })
  }
  console.log(`\n# ${binaryName}: linux platform packages packed into ${join(outDir, 'packs')}`)
}
