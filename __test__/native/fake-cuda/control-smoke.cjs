// Smoke test of control.node, run by `build.sh --test`. It cannot make CUDA
// calls itself (that is the addon under test's job); it checks the "not
// loaded" errors, load(), and every control function's shape.
'use strict'
const assert = require('node:assert/strict')
const [addonPath, libPath] = process.argv.slice(2)
const fake = require(addonPath)

assert.equal(fake.isLoaded(), false)
for (const fn of ['reset', 'counts', 'liveAllocations', 'hostSyncs']) {
  assert.throws(() => fake[fn](), { code: 'ERR_FAKE_CUDA_NOT_LOADED' }, fn)
}
assert.throws(() => fake.callCount('cuInit'), /not loaded/)

assert.equal(fake.load(libPath), true)
assert.equal(fake.isLoaded(), true)
fake.reset()
assert.deepEqual(fake.counts(), {})
assert.equal(fake.callCount('cuInit'), 0)
assert.throws(() => fake.callCount('cuNoSuchThing'), { code: 'ERR_FAKE_CUDA_UNKNOWN_ENTRY_POINT' })
assert.throws(() => fake.callCount(42), TypeError)
fake.setFault('cuMemAlloc_v2', 1, 2)
fake.setFault('cuEventRecord', 3, 400, true)
fake.setFault('cuMemAlloc_v2', 0, 0)
assert.throws(() => fake.setFault('cuMemAlloc_v2', 1, 12345), RangeError)
assert.throws(() => fake.setFault('cuMemAlloc_v2', -1, 2), RangeError)
assert.throws(() => fake.setFault('cuBogus', 1, 2), { code: 'ERR_FAKE_CUDA_UNKNOWN_ENTRY_POINT' })
fake.setDeferred(true)
assert.equal(fake.isDeferred(), true)
fake.setDeferred(false)
assert.equal(fake.isDeferred(), false)
assert.throws(() => fake.setDeferred(1), TypeError)
for (const fn of ['liveAllocations', 'liveHostAllocations', 'liveStreams', 'liveEvents',
  'hostSyncs', 'pendingOps', 'asyncErrors', 'crossContextFrees']) {
  assert.equal(fake[fn](), 0, fn)
}
fake.reset()

// A second, independent instance of the addon must find the already loaded
// fake through dlopen(RTLD_NOLOAD) without being told where it is.
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fake-cuda-'))
try {
  const second = path.join(dir, 'control-copy.node')
  fs.copyFileSync(addonPath, second)
  const other = require(second)
  assert.equal(other.isLoaded(), true)
  fake.setDeferred(true)
  assert.equal(other.isDeferred(), true)
  other.setDeferred(false)
  assert.equal(fake.isDeferred(), false)
} finally {
  fs.rmSync(dir, { recursive: true, force: true })
}
console.log('fake-cuda control.node smoke test passed')
