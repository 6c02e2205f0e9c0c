// `npm run build:cross`: builds the prebuilds of all seven targets of package.json's
// napi.targets on this x64 Linux machine by cross-compilation with zig, with the release
// profile (LTO) of the native build:
//   linux-x64-gnu, linux-arm64-gnu   `napi build -x`, against glibc 2.17 (GLIBC_FLOOR)
//   linux-x64-musl, linux-arm64-musl `napi build -x` (dynamically linked to musl, as Node needs)
//   darwin-arm64, darwin-x64         `cargo zigbuild`, MACOSX_DEPLOYMENT_TARGET per target
//                                    (MACOS_MIN: 11.0 / 10.13), linked with -dead_strip_dylibs
//                                    (only libSystem stays), @rpath/<file> as install name (not
//                                    this machine's path), header padding for a later re-sign;
//                                    zig's linker ad-hoc signs the arm64 file
//   darwin-universal                 llvm-lipo of the two (not a package; the loader tries it first)
//   win32-x64-msvc                   `cargo zigbuild --target x86_64-pc-windows-gnu` against an
//                                    empty libnode stub (LIBNODE_PATH), shipped under the msvc
//                                    name that official (MSVC-built) Node loads; what that means:
//                                    docs/platforms.md
// Each .node lands in artifacts/<declared triple>/, where `napi artifacts` looks for them. A
// target whose artifact is newer than every Rust source is not rebuilt (--force rebuilds). Each
// artifact is then checked (scripts/cross/check.mjs: ELF, Mach-O or PE checks).
// Usage: node scripts/cross/build.mjs [--force] [--package] [--native] [TARGET ...]
//   TARGET: a triple, a platform name (linux-arm64-gnu) or a group (linux, macos, windows);
//   default every declared target.
//   --package: then `napi artifacts` into npm/ for the picked targets, the checks again on the
//   npm/<platform>/ files, `napi prepublish --dry-run`, and `npm pack` of each platform
//   package into target/cross/packs/.
//   --native: for the release workflow's macOS and Windows runners: the same target with that
//   platform's own toolchain (`cargo build`: Apple's linker; MSVC for x86_64-pc-windows-msvc,
//   with the C runtime linked statically so the import allow-list holds), the same link
//   arguments and deployment targets, then the same checks.
// zig, cargo-zigbuild, llvm-lipo and the Rust targets are installed on first use
// (scripts/cross/tools.mjs). Builds run one at a time (nice'd: they share the machine).
import { execFileSync } from 'node:child_process'
import { copyFileSync, mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs'
import { basename, dirname, join } from 'node:path'

import { checkTarget, checkUniversal } from './check.mjs'
import { MACOS_MIN, artifactsDir, binaryName, root, selectTargets, universalArtifact } from './targets.mjs'
import { ensureRustTargets, libnodeStub, llvmLipo, zigEnv } from './tools.mjs'

const args = process.argv.slice(2)
const force = args.includes('--force')
const pack = args.includes('--package')
const native = args.includes('--native')
const targets = selectTargets(args.filter((arg) => !arg.startsWith('--')))
const napiCli = join(root, 'node_modules', '@napi-rs', 'cli', 'dist', 'cli.js')
/** The addon crate's library name, as cargo names its cdylib. */
const crateLib = 'napi_dlpack_node'

/** Newest modification time of what a build depends on (Rust sources, manifests, lockfile). */
function newestBuildInput() {
  const files = ['Cargo.toml', 'Cargo.lock', 'build.rs', 'crates/napi-dlpack/Cargo.toml', 'scripts/cross/build.mjs']
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

/** Runs a build command at low priority where `nice` exists (this machine is shared), output shown. */
const build = (cmd, cmdArgs, env) =>
  process.platform === 'win32'
    ? execFileSync(cmd, cmdArgs, { cwd: root, stdio: 'inherit', env, shell: false })
    : execFileSync('nice', ['-n', '10', cmd, ...cmdArgs], { cwd: root, stdio: 'inherit', env })

/** `CARGO_TARGET_<TRIPLE>_RUSTFLAGS`: flags for one target only (host build scripts keep theirs). */
const rustflagsVar = (triple) => `CARGO_TARGET_${triple.toUpperCase().replace(/-/g, '_')}_RUSTFLAGS`

/** The command that builds one target (the artifact is then copied into place). */
function buildTarget(target, env) {
  if (target.os === 'linux') {
    console.log(`\n### napi build --target ${target.zigTarget} -x (cargo zigbuild)`)
    build(process.execPath, [napiCli, 'build', '--platform', '--release', '--target', target.zigTarget, '--cross-compile',
      '--output-dir', join(artifactsDir, target.triple), '--no-js', '--dts', 'index.d.ts'], env)
    return
  }
  if (native && target.os === 'linux') throw new Error('--native: the Linux prebuilds are always built with zig (for the glibc floor)')
  // Natively, Windows builds the declared msvc triple itself.
  const triple = native ? target.triple : target.buildTriple
  const cargo = [native ? 'build' : 'zigbuild', '--release', '--target', triple, '-p', 'napi-dlpack-node']
  let output
  if (target.os === 'darwin') {
    const linkArgs = [
      // zig adds libiconv/libcharset load commands that nothing binds to (Rust's libc crate
      // asks for -liconv): drop every dylib without a used symbol, so only libSystem is loaded.
      '-dead_strip_dylibs',
      // Room in the header for a later `codesign`/`rcodesign` with a real identity (zig leaves
      // none, and re-signing the x86_64 file then fails).
      '-headerpad_max_install_names',
      // The dylib's own name (LC_ID_DYLIB): otherwise this machine's absolute build path.
      `-install_name,@rpath/${basename(target.artifact)}`,
    ]
    const flags = [...linkArgs.flatMap((arg) => ['-C', `link-arg=-Wl,${arg}`])].join(' ')
    // Per target: zig has no libSystem for arm64 below macOS 11, and x64 stays at 10.13.
    env = { ...env, MACOSX_DEPLOYMENT_TARGET: MACOS_MIN[target.arch], [rustflagsVar(triple)]: flags }
    output = join(root, 'target', triple, 'release', `lib${crateLib}.dylib`)
    console.log(`\n### MACOSX_DEPLOYMENT_TARGET=${env.MACOSX_DEPLOYMENT_TARGET} ${rustflagsVar(triple)}="${flags}" cargo ${cargo.join(' ')}`)
  } else if (native) {
    // MSVC: the C runtime linked in (+crt-static), so the file imports no vcruntime140.dll, which
    // a Windows machine without the Visual C++ redistributable lacks.
    env = { ...env, [rustflagsVar(triple)]: '-C target-feature=+crt-static' }
    output = join(root, 'target', triple, 'release', `${crateLib}.dll`)
    console.log(`\n### ${rustflagsVar(triple)}="${env[rustflagsVar(triple)]}" cargo ${cargo.join(' ')}`)
  } else {
    env = { ...env, LIBNODE_PATH: libnodeStub(env) }
    output = join(root, 'target', triple, 'release', `${crateLib}.dll`)
    console.log(`\n### LIBNODE_PATH=${env.LIBNODE_PATH} cargo ${cargo.join(' ')}`)
  }
  build('cargo', cargo, env)
  mkdirSync(dirname(target.artifact), { recursive: true })
  copyFileSync(output, target.artifact)
}

const env = native ? { ...process.env } : zigEnv()
ensureRustTargets([...new Set(targets.map((t) => (native ? t.triple : (t.buildTriple ?? t.triple))))])
const inputs = newestBuildInput()
const report = []
let failed = false
const seconds = (started) => ((Date.now() - started) / 1000).toFixed(0)
const addCheck = ({ problems, summary }) => {
  report.push(`  ${problems.length ? 'FAIL' : 'ok'}: ${summary}${problems.map((p) => `\n  ${p}`).join('')}`)
  if (problems.length) failed = true
}
for (const target of targets) {
  if (!force && mtime(target.artifact) > inputs) {
    report.push(`${target.platform}: up to date (${target.artifact})`)
  } else {
    const started = Date.now()
    try {
      buildTarget(target, env)
      report.push(`${target.platform}: built in ${seconds(started)} s`)
    } catch (error) {
      report.push(`${target.platform}: BUILD FAILED after ${seconds(started)} s${error.code ? ` (${error.code})` : ''}`)
      failed = true
      continue
    }
  }
  addCheck(checkTarget(target))
}

// The universal file, when both macOS builds were picked (and built).
const darwin = targets.filter((t) => t.os === 'darwin')
if (darwin.length === 2 && !failed) {
  if (!force && mtime(universalArtifact) > Math.max(...darwin.map((t) => mtime(t.artifact)))) {
    report.push(`darwin-universal: up to date (${universalArtifact})`)
  } else {
    const lipo = llvmLipo()
    if (!lipo) {
      report.push('darwin-universal: NOT BUILT: no llvm-lipo on PATH (Debian: apt-get install llvm)')
      failed = true
    } else {
      mkdirSync(dirname(universalArtifact), { recursive: true })
      execFileSync(lipo, ['-create', ...darwin.map((t) => t.artifact), '-output', universalArtifact], { stdio: 'inherit' })
      report.push(`darwin-universal: made by ${basename(lipo)}`)
    }
  }
  if (!report.at(-1).includes('NOT BUILT')) addCheck(checkUniversal())
}
console.log(`\n### cross builds\n${report.join('\n')}`)
if (failed) process.exit(1)

if (pack) {
  // `napi artifacts` wants an artifact for every target of its config: it runs with a config
  // naming the picked targets only.
  const outDir = join(root, 'target', 'cross')
  mkdirSync(join(outDir, 'packs'), { recursive: true })
  const config = join(outDir, 'napi-picked.json')
  const { napi } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'))
  writeFileSync(config, JSON.stringify({ ...napi, targets: targets.map((t) => t.triple) }, null, 2))
  const napiRun = (...cmd) => execFileSync(process.execPath, [napiCli, ...cmd, '--config-path', config], { cwd: root, stdio: 'inherit' })
  napiRun('artifacts')
  // What npm would publish: each npm/<platform>/ file, checked again where it now lies.
  execFileSync(process.execPath, [join(root, 'scripts', 'cross', 'check.mjs'), '--npm', ...targets.map((t) => t.platform)], { cwd: root, stdio: 'inherit' })
  napiRun('prepublish', '--dry-run', '--skip-optional-publish')
  for (const target of targets) {
    execFileSync('npm', ['pack', '--pack-destination', join(outDir, 'packs'), join(root, 'npm', target.platform)], { cwd: root, stdio: 'inherit' })
  }
  console.log(`\n# ${binaryName}: platform packages of ${targets.map((t) => t.platform).join(', ')} packed into ${join(outDir, 'packs')}`)
}
