// Runtime smoke test for Bun and Deno (run by scripts/test.mjs with each runtime's binary from
// npm). Plain node:assert, CommonJS, no test framework: the point is that the addon, the JS
// protocol and a second addon (the plain C fixture) work in that runtime's Node-API.
'use strict'
const assert = require('node:assert/strict')
const path = require('node:path')

const root = path.join(__dirname, '..', '..')
const { Tensor, fromDLPack, externalBuffersAllowed, CapsuleError } = require(path.join(root, 'dist', 'index.js'))
const c = require(path.join(root, 'target', 'c-addon', 'c_addon.node'))
const runtime = typeof Bun !== 'undefined' ? `bun ${Bun.version}` : typeof Deno !== 'undefined' ? `deno ${Deno.version.deno}` : `node ${process.version}`
let checks = 0
const check = (fn) => {
  fn()
  checks += 1
}

// JS memory through a capsule: same pointer, writes seen both ways.
const source = Tensor.from(new Float32Array([1, 2, 3, 4]), [2, 2])
const back = fromDLPack(source.__dlpack__())
check(() => assert.equal(back.dataPointer, source.dataPointer))
back.data[0] = 42
check(() => assert.equal(source.data[0], 42))
check(() => assert.deepEqual(fromDLPack(source.__dlpack__({ maxVersion: [0, 8] })).toArray(), [[42, 2], [3, 4]]))

// Consume once.
const capsule = source.__dlpack__()
fromDLPack(capsule)
check(() => assert.throws(() => fromDLPack(capsule), (e) => e instanceof CapsuleError && e.code === 'ERR_DLPACK_CAPSULE_CONSUMED'))

// JS -> C: the C addon (header only, no Rust) consumes our capsule and sees the same memory.
const held = c.consume(source.__dlpack__())
check(() => assert.equal(c.heldInfo(held).data, source.dataPointer))
c.heldWriteFloat32(held, 3, -7)
check(() => assert.equal(source.data[3], -7))
check(() => assert.equal(c.release(held), true))

// C -> JS: a C-made capsule imported zero-copy (or copied where external buffers are refused),
// its deleter run exactly once when the tensor is disposed.
c.resetDeleterCalls()
const fromC = fromDLPack(c.makeTensor({ shape: [3], versioned: true, fill: 'iota', dtype: { code: 2, bits: 32, lanes: 1 } }))
check(() => assert.deepEqual(Array.from(fromC.data), [0, 1, 2]))
fromC.dispose()
check(() => assert.equal(c.deleterCalls(), 1))

// Copies and disposal.
const copy = fromDLPack(source.__dlpack__({ copy: true }))
check(() => assert.equal(copy.isCopy, true))
check(() => assert.notEqual(copy.dataPointer, source.dataPointer))
source.dispose()
check(() => assert.throws(() => source.shape, (e) => e.code === 'ERR_TENSOR_DISPOSED'))
check(() => assert.equal(back.data[0], 42)) // the shared import keeps the memory

// --- The exchange table (include/napi_dlpack.h part 3): a C addon borrows a Tensor for a call
// (no capsule), a C tensor comes back as a Tensor through the default importer, and the Rust
// example's typed arguments borrow too. Table functions run with the caller's env and report
// errors on it: this is where runtimes could differ.
const x = require(path.join(root, 'target', 'exchange-c', 'exchange_c.node'))
const typed = require(path.join(root, 'target', 'consumer-addon', 'consumer_addon.node'))
const lent = Tensor.from(new Float32Array([1, 2, 3, 4, 5, 6]), [3, 2], { strides: [1, 3] })
check(() => assert.equal(x.borrowSum(lent).pointer, lent.dataPointer))
check(() => assert.equal(x.borrowSum(lent).sum, 21))
x.borrowScale(lent, 2)
check(() => assert.deepEqual(lent.toArray(), [[2, 8], [4, 10], [6, 12]]))
const gone = Tensor.from(new Float32Array(1))
gone.dispose()
check(() => assert.throws(() => x.borrowSum(gone), (e) => e.code === 'ERR_TENSOR_DISPOSED'))
check(() => assert.deepEqual(x.borrowStatus(new x.BadVersionTensor()), { code: 'ERR_DLPACK_VERSION', status: 7 }))
const deleters = x.deleterCalls()
const made = x.makeTensor(4, false)
check(() => assert.ok(made instanceof Tensor))
check(() => assert.deepEqual(Array.from(made.toTypedArray()), [0, 1, 2, 3]))
made.dispose()
check(() => assert.equal(x.deleterCalls(), deleters + 1))
check(() => assert.equal(typed.inspect(lent).borrowed, true))
check(() => assert.equal(typed.inspect(lent).dataPointer, lent.dataPointer))
typed.scaleInPlace(lent, 0.5)
check(() => assert.deepEqual(lent.toArray(), [[1, 4], [2, 5], [3, 6]]))
check(() => assert.throws(() => typed.inspect(gone), (e) => e.code === 'ERR_TENSOR_DISPOSED'))
check(() => assert.ok(typed.matrix(2, 2, 'float32') instanceof Tensor))

console.log(`${runtime}: external buffers ${externalBuffersAllowed() ? 'allowed' : 'refused'}`)
console.log(`smoke: ${checks} passed, 0 failed`)
