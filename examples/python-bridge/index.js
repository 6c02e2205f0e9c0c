'use strict'
// JS half of the napi-dlpack Python bridge: DLPack tensors between Node and the CPython that
// node-calls-python embeds in this process, without copying. See README.md.
//
// The native half (build/napi_dlpack_bridge.node, from bridge.c) speaks the Node capsule ABI of
// include/napi_dlpack.h and Python's PyCapsule protocol; it does not link napi-dlpack, so any
// producer or consumer of capsules works on this side (napi-dlpack's Tensor and fromDLPack, a
// C addon, ...).
const { readFileSync } = require('node:fs')
const { join } = require('node:path')

const build = join(__dirname, 'build')
// NAPI_DLPACK_BRIDGE_NATIVE: another build of bridge.c (test/mutants.mjs); napi_dlpack_bridge.py
// reads the same variable, so both halves still load one file.
const native = require(process.env.NAPI_DLPACK_BRIDGE_NATIVE || join(build, 'napi_dlpack_bridge.node'))

/** The Python build.sh built against, and where numpy was installed (install-deps.sh). */
function config() {
  return JSON.parse(readFileSync(join(build, 'config.json'), 'utf8'))
}

/** Folders Python must import from: this one (napi_dlpack_bridge.py) and .python-packages. */
function pythonPath() {
  return [__dirname, join(__dirname, '.python-packages')]
}

let interpreter

/**
 * Loads node-calls-python with the interpreter build.sh chose, once, and returns its
 * `interpreter`. node-calls-python starts CPython when it is loaded, and at that moment runs
 * `python3-config` and `python3` from PATH to find (and dlopen) libpython: with pyenv's shims
 * first in PATH that would load a second libpython next to the one it was linked with, and
 * crash. So PATH starts with build/bin (wrappers for the chosen interpreter) while it loads,
 * and PYTHONPATH (read once, when CPython starts) puts `path` (default `pythonPath()`) first.
 */
function loadInterpreter({ path = pythonPath() } = {}) {
  if (interpreter) return interpreter
  const saved = { PATH: process.env.PATH, PYTHONPATH: process.env.PYTHONPATH }
  process.env.PATH = [join(build, 'bin'), saved.PATH].filter(Boolean).join(':')
  process.env.PYTHONPATH = [...path, saved.PYTHONPATH].filter(Boolean).join(':')
  try {
    interpreter = require('node-calls-python').interpreter
  } finally {
    // PYTHONPATH stays: Python's subprocesses (multiprocessing) need it too.
    process.env.PATH = saved.PATH
  }
  return interpreter
}

/**
 * Hands a tensor to Python: `x` is a capsule or anything with `__dlpack__` (napi-dlpack's
 * Tensor). The capsule is consumed; the returned token is claimed once on the Python side with
 * `napi_dlpack_bridge.from_node(token)` / `to_numpy(token)`. Throws a coded Error
 * (`ERR_DLPACK_NOT_A_CAPSULE`, `ERR_DLPACK_CAPSULE_CONSUMED`, `ERR_DLPACK_VERSION`).
 */
function toPython(x) {
  const capsule = x !== null && typeof x === 'object' && typeof x.__dlpack__ === 'function' ? x.__dlpack__({ maxVersion: [1, 3] }) : x
  return native.toPython(capsule)
}

/**
 * Claims the tensor Python sent with `napi_dlpack_bridge.to_node(array)`, as a capsule for
 * `fromDLPack` (or any capsule consumer). Throws `ERR_DLPACK_CAPSULE_CONSUMED` for a token
 * already claimed, `ERR_DLPACK_INVALID_ARGUMENT` for one never issued.
 */
function fromPython(token) {
  return native.fromPython(token)
}

/** Releases a tensor handed over and never claimed (its deleter runs now); false if claimed. */
function release(token) {
  return native.release(token)
}

/** How many handed-over tensors (either direction) nobody has claimed yet. */
function pending() {
  return native.pending()
}

module.exports = { toPython, fromPython, release, pending, loadInterpreter, pythonPath, config }
