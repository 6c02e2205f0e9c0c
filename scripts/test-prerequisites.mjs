// What the peer suites of `npm test` need from the machine, and the report of what was skipped.
// scripts/test.mjs runs every suite whose prerequisites exist; a suite whose prerequisites are
// missing is switched off through its own variable (so it reports its tests as skipped rather
// than failing), and listed loudly at the end. Under CI (CI=true, as .ci/run sets it, after
// installing everything) a skip fails the run.
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))

/** True when `env.CI` says this is a CI run (CI=true or CI=1, as CI services set it). */
export function isCI(env) {
  return ['1', 'true'].includes((env.CI ?? '').toLowerCase())
}

function onPath(command, env) {
  if (command.includes('/')) return existsSync(command)
  return (env.PATH ?? '').split(':').some((dir) => dir && existsSync(join(dir, command)))
}

/**
 * The suites to skip on this machine: `{ name, reason, remedy, env }` each, where `env` holds
 * the variables that switch the suite off. `env` is the environment the tests will run in.
 */
export function peerSkips(env) {
  const skips = []

  // The libtorch peer (__test__/native/torch-addon/build.sh, __test__/peers/torch.spec.ts): Debian's
  // libtorch-dev (torch 1.13, CPU) and g++, found where build.sh looks for them.
  const torch = 'libtorch peer (fixture torch-addon, __test__/peers/torch.spec.ts)'
  if (env.NAPI_DLPACK_SKIP_TORCH === '1') {
    skips.push({ name: torch, reason: 'NAPI_DLPACK_SKIP_TORCH=1 is set', remedy: 'unset NAPI_DLPACK_SKIP_TORCH', env: {} })
  } else {
    const multiarch = { x64: 'x86_64-linux-gnu', arm64: 'aarch64-linux-gnu' }[process.arch] ?? ''
    const headers = join(env.TORCH_INCLUDE_DIR ?? '/usr/include', 'ATen', 'dlpack.h')
    const library = join(env.TORCH_LIB_DIR ?? join('/usr/lib', multiarch), 'libtorch_cpu.so')
    const cxx = env.CXX ?? 'g++'
    const missing = [
      ...(existsSync(headers) ? [] : [`${headers} (libtorch headers)`]),
      ...(existsSync(library) ? [] : [`${library} (libtorch)`]),
      ...(onPath(cxx, env) ? [] : [`${cxx} (C++ compiler)`]),
    ]
    if (missing.length) {
      skips.push({
        name: torch,
        reason: `missing ${missing.join(', ')}`,
        remedy: 'sudo bash __test__/native/torch-addon/install-deps.sh (Debian/Ubuntu: libtorch-dev, g++)',
        env: { NAPI_DLPACK_SKIP_TORCH: '1' },
      })
    }
  }

  // The Python bridge (examples/python-bridge: build.sh, test/bridge.test.mjs): one CPython
  // with its python3-config (Debian's python3-dev), numpy in the example's .python-packages
  // (install-deps.sh), and Node's headers for node-gyp (never downloaded).
  const python = 'Python bridge (examples/python-bridge: node-calls-python + numpy)'
  if (env.NAPI_DLPACK_SKIP_PYTHON === '1') {
    skips.push({ name: python, reason: 'NAPI_DLPACK_SKIP_PYTHON=1 is set', remedy: 'unset NAPI_DLPACK_SKIP_PYTHON', env: {} })
  } else {
    const bridge = join(root, 'examples', 'python-bridge')
    const interpreter = env.NAPI_DLPACK_PYTHON ?? '/usr/bin/python3'
    const config = env.NAPI_DLPACK_PYTHON_CONFIG ?? `${interpreter}-config`
    const nodeHeaders = join(env.NAPI_DLPACK_NODEDIR ?? join(process.execPath, '..', '..'), 'include', 'node')
    const missing = [
      ...(existsSync(interpreter) ? [] : [`${interpreter} (NAPI_DLPACK_PYTHON)`]),
      ...(existsSync(config) ? [] : [`${config} (python3-dev)`]),
      ...(existsSync(join(bridge, '.python-packages', 'numpy', '__init__.py')) ? [] : ['numpy in examples/python-bridge/.python-packages']),
      ...(existsSync(join(nodeHeaders, 'node_api.h')) && existsSync(join(nodeHeaders, 'common.gypi')) ? [] : [`Node's headers in ${nodeHeaders} (NAPI_DLPACK_NODEDIR)`]),
    ]
    // Its torch case: Debian's python3-torch (torch 1.13), which only Debian's python3 imports.
    const torchInit = '/usr/lib/python3/dist-packages/torch/__init__.py'
    const torchMissing = interpreter !== '/usr/bin/python3' ? `Debian's python3 (NAPI_DLPACK_PYTHON is ${interpreter})` : existsSync(torchInit) ? '' : `${torchInit} (python3-torch)`
    if (!missing.length && env.NAPI_DLPACK_SKIP_PYTHON_TORCH !== '1' && torchMissing) {
      skips.push({
        name: 'Python bridge: its torch 1.13 case (examples/python-bridge/test/bridge.test.mjs)',
        reason: `missing ${torchMissing}`,
        remedy: 'bash examples/python-bridge/install-deps.sh (python3-torch from apt)',
        env: { NAPI_DLPACK_SKIP_PYTHON_TORCH: '1' },
      })
    }
    if (missing.length) {
      skips.push({
        name: python,
        reason: `missing ${missing.join(', ')}`,
        remedy: 'bash examples/python-bridge/install-deps.sh (python3-dev from apt, numpy from PyPI into the example folder)',
        env: { NAPI_DLPACK_SKIP_PYTHON: '1' },
      })
    }
  }

  // The install test's `cargo publish --dry-run` compiles the packaged crate (about two
  // minutes), so it runs in CI only.
  if (!isCI(env)) {
    skips.push({
      name: 'cargo publish --dry-run -p napi-dlpack (install test)',
      reason: 'runs only with CI=true: it compiles the packaged crate (about 2 minutes)',
      remedy: 'CI=true npm test, or cargo publish --dry-run -p napi-dlpack --allow-dirty',
      env: {},
    })
  }

  // Switches a developer may set for quick local runs: still skips, so CI refuses them.
  if (env.NAPI_DLPACK_SKIP_NODE_MATRIX) {
    skips.push({ name: 'ava on Node 22 and 24', reason: 'NAPI_DLPACK_SKIP_NODE_MATRIX is set', remedy: 'unset it', env: {} })
  }
  if (env.NAPI_DLPACK_SKIP_RUNTIMES) {
    skips.push({ name: 'Bun and Deno smoke tests', reason: 'NAPI_DLPACK_SKIP_RUNTIMES is set', remedy: 'unset it', env: {} })
  }
  return skips
}

/** The closing skip report: one line per suite, loud; returns whether the skips fail the run. */
export function reportSkips(skips, ci) {
  if (!skips.length) return false
  const rule = '!'.repeat(96)
  const lines = [
    rule,
    `!!! ${skips.length} TEST SUITE${skips.length === 1 ? '' : 'S'} SKIPPED: they did not run`,
    ...skips.flatMap(({ name, reason, remedy }) => [`!!!   ${name}`, `!!!     why: ${reason}`, `!!!     to run it: ${remedy}`]),
    ci
      ? '!!! CI=true: every suite must run in CI, so these skips FAIL the run.'
      : '!!! The run can pass without them, but they did NOT run: this is not a full test.',
    rule,
  ]
  console.log(`\n${lines.join('\n')}`)
  return ci
}
