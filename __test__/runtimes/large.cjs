// Tensors past the runtime's largest ArrayBuffer, and misaligned JS memory (issue 10, items 1
// and 2), under Bun and Deno (run by scripts/test.mjs; Node runs __test__/core/large.spec.ts and
// __test__/core/alignment.spec.ts). Plain node:assert, CommonJS. The limit differs by runtime:
// buffer.constants.MAX_LENGTH is 2^32 in Bun (which refuses longer external ArrayBuffers with an
// exception and never calls their finalizer) and 2^53 - 1 in Deno (where a longer one aborts
// the process in a V8 CHECK), so it must be known before asking.
'use strict'
const assert = require('node:assert/strict')
const { constants } = require('node:buffer')
const path = require('node:path')

const root = path.join(__dirname, '..', '..')
const { Tensor, fromDLPack, externalBuffersAllowed, BufferError } = require(path.join(root, 'dist', 'index.js'))
const { native } = require(path.join(root, 'dist', 'native.js'))
const c = require(path.join(root, 'target', 'c-addon', 'c_addon.node'))
const runtime = typeof Bun !== 'undefined' ? `bun ${Bun.version}` : typeof Deno !== 'undefined' ? `deno ${Deno.version.deno}` : `node ${process.version}`
const gc = globalThis.gc ?? (typeof Bun !== 'undefined' ? () => Bun.gc(true) : undefined)
let checks = 0
const check = (fn) => {
  fn()
  checks += 1
}
const tooLarge = (e) => e instanceof BufferError && e.code === 'ERR_DLPACK_TOO_LARGE'

const GiB4 = 2 ** 32
const limit = constants.MAX_LENGTH
const zeroCopy = externalBuffersAllowed()
check(() => assert.equal(native.arrayBufferLimit(), limit))
c.resetMappedDeleterCalls()

// 4 GiB + 1 byte over a real mapping (skipped where it fits the limit but external buffers are
// refused: the import would copy 4 GiB, as documented).
let producers = 1
if (GiB4 + 1 > limit || zeroCopy) {
  producers += 1
  const capsule = c.makeMappedTensor({ bytes: GiB4 + 1 })
  const address = c.dataPointer(capsule)
  const tensor = fromDLPack(capsule)
  check(() => assert.equal(tensor.dataPointer, address))
  if (GiB4 + 1 > limit) {
    check(() => assert.throws(() => tensor.data, tooLarge))
    check(() => assert.throws(() => tensor.toTypedArray(), tooLarge))
  } else {
    check(() => assert.equal(tensor.data.length, GiB4 + 1))
  }
  check(() => assert.throws(() => tensor.toArray(), tooLarge))
  tensor.getData({ offset: GiB4, length: 1 })[0] = 7
  const held = c.consume(tensor.__dlpack__())
  check(() => assert.equal(c.heldInfo(held).data, address))
  if (zeroCopy) check(() => assert.equal(c.heldReadU8(held, GiB4), 7))
  c.heldWriteU8(held, 1, 9)
  check(() => assert.equal(tensor.getData({ offset: 1, length: 1 })[0], 9))
  c.release(held)
  tensor.dispose()
}

// A failed external ArrayBuffer must release its keep-alive exactly once whatever the runtime
// does with the finalizer: reachable only by telling the addon a larger limit than the
// runtime's, where asking past it is not fatal (Bun never calls the finalizer, Node calls it
// synchronously; Deno would abort, so not there).
if (GiB4 + 1 > limit && zeroCopy) {
  c.resetMappedDeleterCalls()
  const tensor = fromDLPack(c.makeMappedTensor({ bytes: GiB4 + 1 }))
  native.setArrayBufferLimit(2 ** 53)
  try {
    check(() => assert.throws(() => tensor.data, (e) => e.code === 'ERR_DLPACK_NAPI'))
  } finally {
    native.setArrayBufferLimit(limit)
  }
  check(() => assert.equal(Tensor.from(new Uint8Array([1, 2])).data[1], 2)) // nothing left pending
  tensor.dispose()
  check(() => assert.equal(c.mappedDeleterCalls(), 1))
  c.resetMappedDeleterCalls()
}

// [2^62] int8 whose first 4096 bytes are real.
{
  const capsule = c.makeHugeTensor({ shape: [2 ** 62] })
  const address = c.dataPointer(capsule)
  const tensor = fromDLPack(capsule)
  check(() => assert.throws(() => tensor.data, tooLarge))
  check(() => assert.throws(() => tensor.toTypedArray(), tooLarge))
  check(() => assert.throws(() => tensor.toArray(), tooLarge))
  tensor.getData({ offset: 0, length: 4096 })[10] = -1
  const held = c.consume(tensor.__dlpack__())
  check(() => assert.equal(c.heldInfo(held).data, address))
  if (zeroCopy) check(() => assert.equal(c.heldReadU8(held, 10), 255))
  c.release(held)
  tensor.dispose()
}

// Misaligned JS memory is copied (isCopy), aligned memory is not.
{
  const odd = Buffer.alloc(9).subarray(1)
  odd.set([1, 0, 2, 0, 3, 0, 4, 0])
  const copied = Tensor.from(odd, [4], { dtype: 'uint16' })
  check(() => assert.equal(copied.isCopy, true))
  check(() => assert.equal(copied.dataPointer % 2n, 0n))
  check(() => assert.deepEqual(Array.from(copied.data), [1, 2, 3, 4]))
  const held = c.consume(copied.__dlpack__())
  check(() => assert.equal(c.heldInfo(held).data, copied.dataPointer))
  c.release(held)
  check(() => assert.equal(Tensor.from(Buffer.alloc(10).subarray(2), [4], { dtype: 'uint16' }).isCopy, false))
}

// Each producer deleter exactly once, after the windows are collected.
const finish = (rounds) => {
  if (c.mappedDeleterCalls() !== producers && rounds > 0 && gc) {
    gc()
    setTimeout(() => finish(rounds - 1), 10)
    return
  }
  check(() => assert.equal(c.mappedDeleterCalls(), producers))
  console.log(`${runtime}: ArrayBuffer limit ${limit}, external buffers ${zeroCopy ? 'allowed' : 'refused'}`)
  console.log(`large: ${checks} passed, 0 failed`)
}
finish(100)
