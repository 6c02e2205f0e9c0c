// Smoke test of the plain C addon on its own (no Rust involved).
//   bash __test__/native/c-addon/build.sh && node --expose-gc __test__/native/c-addon/smoke.mjs
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import path from 'node:path'

const here = path.dirname(fileURLToPath(import.meta.url))
const addonPath = path.resolve(here, '../../../target/c-addon/c_addon.node')
const c = createRequire(import.meta.url)(addonPath)

if (typeof global.gc !== 'function') {
  console.error('run with: node --expose-gc __test__/native/c-addon/smoke.mjs')
  process.exit(2)
}

const turn = () => new Promise((resolve) => setImmediate(resolve))
// Collects garbage until `cond()` holds (finalizers of externals may run on a
// later tick than the collection itself).
async function gcUntil(cond, rounds = 20) {
  for (let i = 0; i < rounds && !cond(); i++) {
    global.gc()
    await turn()
    await turn()
  }
  return cond()
}

// Lets garbage left by earlier tests be finalized before counting.
const drainGarbage = () => gcUntil(() => false, 5)

const tests = []
const test = (name, fn) => tests.push({ name, fn })

const codeOf = (code) => (err) => {
  assert.equal(err.code, code, `expected code ${code}, got ${err.code}: ${err.message}`)
  return true
}

for (const versioned of [true, false]) {
  const tag = versioned ? 'versioned' : 'legacy'

  test(`${tag}: make -> consume -> release calls the deleter once`, () => {
    const before = c.deleterCalls()
    const cap = c.makeTensor({ shape: [2, 3], versioned })
    assert.equal(c.isConsumed(cap), false)
    const held = c.consume(cap)
    assert.equal(c.isConsumed(cap), true)
    assert.equal(c.deleterCalls(), before)
    assert.equal(c.release(held), true)
    assert.equal(c.deleterCalls(), before + 1)
    assert.equal(c.release(held), false)
    assert.equal(c.deleterCalls(), before + 1)
  })

  test(`${tag}: consuming twice throws ERR_DLPACK_CAPSULE_CONSUMED`, () => {
    const before = c.deleterCalls()
    const cap = c.makeTensor({ shape: [4], versioned })
    const held = c.consume(cap)
    assert.throws(() => c.consume(cap), codeOf('ERR_DLPACK_CAPSULE_CONSUMED'))
    assert.throws(() => c.dataPointer(cap), codeOf('ERR_DLPACK_CAPSULE_CONSUMED'))
    c.release(held)
    assert.equal(c.deleterCalls(), before + 1)
  })

  test(`${tag}: heldInfo and heldFloat32 describe the tensor`, () => {
    const cap = c.makeTensor({ shape: [2, 3], versioned, byteOffset: 8 })
    const ptr = c.dataPointer(cap)
    const held = c.consume(cap)
    const info = c.heldInfo(held)
    assert.equal(info.versioned, versioned)
    assert.deepEqual(info.version, versioned ? [1, 3] : null)
    assert.equal(info.ndim, 2)
    assert.deepEqual(info.shape, [2, 3])
    assert.deepEqual(info.strides, [3, 1])
    assert.equal(info.byteOffset, 8)
    assert.deepEqual(info.dtype, { code: 2, bits: 32, lanes: 1 })
    assert.deepEqual(info.device, [1, 0])
    assert.equal(info.data + 8n, ptr)
    assert.deepEqual([...c.heldFloat32(held)], [0, 1, 2, 3, 4, 5])
    c.heldWriteFloat32(held, 4, 42.5)
    assert.deepEqual([...c.heldFloat32(held)], [0, 1, 2, 3, 42.5, 5])
    c.release(held)
  })

  test(`${tag}: heldToCapsule round trip keeps the data pointer`, () => {
    const before = c.deleterCalls()
    const cap = c.makeTensor({ shape: [3], versioned })
    const ptr = c.dataPointer(cap)
    const held = c.consume(cap)
    const cap2 = c.heldToCapsule(held)
    assert.equal(c.release(held), false)
    assert.equal(c.isConsumed(cap2), false)
    assert.equal(c.dataPointer(cap2), ptr)
    const held2 = c.consume(cap2)
    assert.equal(c.heldInfo(held2).data, ptr)
    assert.deepEqual([...c.heldFloat32(held2)], [0, 1, 2])
    assert.equal(c.deleterCalls(), before)
    assert.equal(c.release(held2), true)
    assert.equal(c.deleterCalls(), before + 1)
  })

  test(`${tag}: an unconsumed capsule releases its tensor when collected`, async () => {
    await drainGarbage()
    const before = c.deleterCalls()
    ;(() => {
      c.makeTensor({ shape: [16], versioned })
    })()
    assert.ok(await gcUntil(() => c.deleterCalls() >= before + 1), 'deleter not called after GC')
    assert.equal(c.deleterCalls(), before + 1)
  })

  test(`${tag}: a held tensor releases its tensor when collected`, async () => {
    await drainGarbage()
    const before = c.deleterCalls()
    ;(() => {
      const cap = c.makeTensor({ shape: [16], versioned })
      c.consume(cap)
    })()
    assert.ok(await gcUntil(() => c.deleterCalls() >= before + 1), 'deleter not called after GC')
    // the consumed capsule is collected too, and must not call it again
    await drainGarbage()
    assert.equal(c.deleterCalls(), before + 1)
  })
}

test('non-capsules are rejected with ERR_DLPACK_NOT_A_CAPSULE', () => {
  for (const v of [{}, 1, 'x', null, undefined, [], () => {}, 1n, Symbol('s')]) {
    assert.throws(() => c.consume(v), codeOf('ERR_DLPACK_NOT_A_CAPSULE'), String(typeof v))
    assert.throws(() => c.isConsumed(v), codeOf('ERR_DLPACK_NOT_A_CAPSULE'))
  }
  // a held tensor is an External too, but with another tag
  const held = c.consume(c.makeTensor({ shape: [1], versioned: true }))
  assert.throws(() => c.consume(held), codeOf('ERR_DLPACK_NOT_A_CAPSULE'))
  assert.throws(() => c.heldInfo(c.makeTensor({ shape: [1], versioned: true })),
    codeOf('ERR_DLPACK_INVALID_ARGUMENT'))
  c.release(held)
})

test('strided, negative-stride and offset layouts read back in C order', () => {
  const cases = [
    { shape: [3, 2], strides: [1, 3] }, // transposed
    { shape: [4], strides: [-1] },
    { shape: [2, 3], strides: [-3, -1], byteOffset: 4 },
    { shape: [2, 2], strides: [4, 1] }, // padded rows
    { shape: [2, 3], strides: null }, // legacy NULL strides = C-contiguous
    { shape: [3], byteOffset: 2 }, // misaligned first element
  ]
  for (const opts of cases) {
    const held = c.consume(c.makeTensor({ ...opts, versioned: true }))
    const n = opts.shape.reduce((a, b) => a * b, 1)
    assert.deepEqual([...c.heldFloat32(held)], [...Array(n).keys()], JSON.stringify(opts))
    c.heldWriteFloat32(held, n - 1, -7)
    assert.equal(c.heldFloat32(held)[n - 1], -7)
    c.release(held)
  }
})

test('zero-size, null data and scalar tensors', () => {
  const z = c.consume(c.makeTensor({ shape: [0, 3], versioned: true, nullData: true }))
  assert.equal(c.heldFloat32(z).length, 0)
  assert.equal(c.heldInfo(z).data, 0n)
  c.release(z)
  const s = c.consume(c.makeTensor({ shape: [], versioned: true }))
  assert.deepEqual([...c.heldFloat32(s)], [0])
  assert.equal(c.heldInfo(s).ndim, 0)
  c.release(s)
})

test('malformed fields are stored as asked', () => {
  const h = c.consume(c.makeTensor({
    shape: [2], versioned: true, ndim: 3, nullShape: true, flags: 6, readonly: true,
    dtype: { code: 17, bits: 4, lanes: 2 }, device: [2, 1], version: [1, 9],
  }))
  const info = c.heldInfo(h)
  assert.equal(info.ndim, 3)
  assert.equal(info.shape, null)
  assert.equal(info.flags, 7)
  assert.deepEqual(info.dtype, { code: 17, bits: 4, lanes: 2 })
  assert.deepEqual(info.device, [2, 1])
  assert.deepEqual(info.version, [1, 9])
  c.release(h)
  const ro = c.consume(c.makeTensor({ shape: [2], versioned: true, readonly: true }))
  assert.throws(() => c.heldWriteFloat32(ro, 0, 1), codeOf('ERR_DLPACK_READ_ONLY'))
  c.heldWriteFloat32(ro, 0, 1, true)
  c.release(ro)
})

test('other major version: only the version is reported, deleter still runs once', () => {
  const before = c.deleterCalls()
  const h = c.consume(c.makeTensor({ shape: [2], versioned: true, version: [2, 0] }))
  const info = c.heldInfo(h)
  assert.deepEqual(info.version, [2, 0])
  assert.equal(info.shape, undefined)
  assert.throws(() => c.heldFloat32(h), codeOf('ERR_DLPACK_VERSION'))
  assert.equal(c.release(h), true)
  assert.equal(c.deleterCalls(), before + 1)
})

test('nullDeleter: release works and counts nothing (block leaks on purpose)', () => {
  const before = c.deleterCalls()
  const h = c.consume(c.makeTensor({ shape: [2], versioned: false, nullDeleter: true }))
  assert.equal(c.release(h), true)
  assert.equal(c.deleterCalls(), before)
})

test('resetDeleterCalls', () => {
  c.release(c.consume(c.makeTensor({ shape: [1], versioned: true })))
  assert.ok(c.deleterCalls() > 0)
  c.resetDeleterCalls()
  assert.equal(c.deleterCalls(), 0)
})

let failed = 0
for (const { name, fn } of tests) {
  try {
    await fn()
    console.log(`ok - ${name}`)
  } catch (err) {
    failed++
    console.log(`not ok - ${name}`)
    console.log(err)
  }
}
console.log(`${tests.length - failed}/${tests.length} passed`)
process.exitCode = failed ? 1 : 0
