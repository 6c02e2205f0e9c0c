// examples/consumer-addon: a separately built napi-rs addon that uses the napi-dlpack crate the
// way an outside author would. Tensors go both ways through capsules, and the in-place FWHT
// writes into memory the JS side keeps.
//
// Runs in both CI modes: with external ArrayBuffers (foreign memory viewed zero-copy from JS)
// and with NAPI_DLPACK_NO_EXTERNAL_BUFFERS=1 (Electron: foreign memory imported into JS is a
// copy; JS memory exported to native stays zero-copy). Every test asserts the behaviour of the
// mode it runs in.
//
// Build the addon first: bash __test__/native/consumer-addon/build.sh (npm test does).
import { once } from 'node:events'
import { Worker } from 'node:worker_threads'

import test from 'ava'

import { type DLPackCapsule, Tensor, externalBuffersAllowed, fromDLPack, isCapsuleConsumed } from '../../dist/index.js'
import { drainGarbage, gcUntil, nativeFixture } from '../harness/helpers.js'

interface TensorDescription {
  dtype: string
  shape: number[]
  strides: number[]
  device: [number, number]
  byteOffset: number
  dataPointer: bigint
  readonly: boolean
  versioned: boolean
}

type MatrixDType = 'float32' | 'float64'

interface ConsumerAddon {
  makeMatrix(rows: number, cols: number, dtype: MatrixDType, options?: { legacy?: boolean }): DLPackCapsule
  makeTransposedMatrix(rows: number, cols: number, dtype: MatrixDType, options?: { legacy?: boolean }): DLPackCapsule
  fwhtRowsInPlace(capsule: unknown): void
  describe(capsule: unknown): TensorDescription
  liveMatrices(): number
  lastExportedPointer(): bigint
}

const { path: addonPath, addon } = nativeFixture<ConsumerAddon>('consumer-addon', 'consumer_addon.node')

/** false with NAPI_DLPACK_NO_EXTERNAL_BUFFERS=1 (and in Electron). */
const zeroCopy = externalBuffersAllowed()
const mode = zeroCopy ? 'external buffers' : 'Electron mode'
const DTYPES: MatrixDType[] = ['float32', 'float64']
const CPU: [number, number] = [1, 0]

const gc = (globalThis as { gc?: () => void }).gc

/** The pattern of makeMatrix: element (i, j) is i * cols + j. */
function pattern(rows: number, cols: number): number[][] {
  return Array.from({ length: rows }, (_, i) => Array.from({ length: cols }, (_, j) => i * cols + j))
}

/** Deterministic values in [-1, 1). */
function random(count: number, seed: number): number[] {
  let state = seed >>> 0
  return Array.from({ length: count }, () => {
    state = (state + 0x6d2b79f5) >>> 0
    let z = state
    z = Math.imul(z ^ (z >>> 15), z | 1)
    z ^= z + Math.imul(z ^ (z >>> 7), z | 61)
    return (((z ^ (z >>> 14)) >>> 0) / 2 ** 32) * 2 - 1
  })
}

function popcount(x: number): number {
  let count = 0
  for (; x !== 0; x &= x - 1) count++
  return count
}

/**
 * Reference unnormalised Walsh–Hadamard transform of each row, straight from the definition
 * y_i = Σ_j (-1)^popcount(i & j) x_j (O(n²), independent of the butterfly in the addon), and
 * Σ_j |x_j| per row (a bound on |y_i| that scales the tolerance).
 */
function referenceRows(x: ArrayLike<number>, rows: number, n: number): { y: Float64Array; scale: Float64Array } {
  const y = new Float64Array(rows * n)
  const scale = new Float64Array(rows)
  for (let r = 0; r < rows; r++) {
    const base = r * n
    for (let j = 0; j < n; j++) scale[r] += Math.abs(x[base + j] as number)
    for (let i = 0; i < n; i++) {
      let sum = 0
      for (let j = 0; j < n; j++) sum += popcount(i & j) & 1 ? -(x[base + j] as number) : (x[base + j] as number)
      y[base + i] = sum
    }
  }
  return { y, scale }
}

/**
 * Relative tolerance (times Σ|x| of the row): the butterfly's error is at most log2(n) unit
 * roundoffs of Σ|x|, the O(n²) float64 reference's at most n of them.
 */
const TOLERANCE: Record<MatrixDType, number> = { float32: 1e-6, float64: 2e-13 }

function maxScaledError(actual: ArrayLike<number>, expected: Float64Array, scale: Float64Array, n: number): number {
  let worst = 0
  for (let k = 0; k < expected.length; k++) {
    const bound = Math.max(scale[Math.floor(k / n)] as number, Number.MIN_VALUE)
    worst = Math.max(worst, Math.abs((actual[k] as number) - (expected[k] as number)) / bound)
  }
  return worst
}

function makeArray(dtype: MatrixDType, values: number[]): Float32Array | Float64Array {
  return dtype === 'float32' ? Float32Array.from(values) : Float64Array.from(values)
}

test.serial(`the addon loads and gc is exposed (${mode})`, (t) => {
  t.is(typeof gc, 'function', 'the suite needs --expose-gc')
  t.is(typeof addon.fwhtRowsInPlace, 'function')
  t.is(typeof addon.liveMatrices(), 'number')
  if (process.env.NAPI_DLPACK_NO_EXTERNAL_BUFFERS === '1') t.false(zeroCopy, 'the switch forces Electron mode')
  else t.is(zeroCopy, process.versions.electron === undefined, 'only Electron refuses external buffers')
})

// ---------------------------------------------------------------------------------------------
// example → main package
// ---------------------------------------------------------------------------------------------

for (const dtype of DTYPES) {
  test.serial(`example → main package: a ${dtype} matrix imports with its shape and values (${mode})`, (t) => {
    const before = addon.liveMatrices()
    const capsule = addon.makeMatrix(3, 4, dtype)
    t.is(addon.liveMatrices(), before + 1)
    const pointer = addon.lastExportedPointer()
    const tensor = fromDLPack(capsule)
    t.true(isCapsuleConsumed(capsule))
    t.is(tensor.dtype, dtype)
    t.deepEqual(tensor.shape, [3, 4])
    t.deepEqual(tensor.strides, [4, 1])
    t.deepEqual(tensor.__dlpack_device__(), CPU)
    t.true(tensor.isContiguous)
    t.false(tensor.readonly)
    t.deepEqual(tensor.toArray(), pattern(3, 4))
    if (zeroCopy) {
      t.false(tensor.isCopy)
      t.is(tensor.dataPointer, pointer, 'the JS tensor views the Rust allocation')
      t.is(addon.liveMatrices(), before + 1, 'the matrix lives as long as the JS tensor')
    } else {
      t.true(tensor.isCopy)
      t.not(tensor.dataPointer, pointer, 'Electron mode copies foreign memory into V8')
      t.is(addon.liveMatrices(), before, 'the copy released the matrix (deleter ran) at import')
    }
    t.deepEqual(Array.from(tensor.data as Float32Array | Float64Array), pattern(3, 4).flat())
    tensor.dispose()
    t.is(addon.liveMatrices(), before, 'dispose() runs the deleter now')
  })

  test.serial(`example → main package: a transposed ${dtype} view keeps its strides (${mode})`, (t) => {
    const before = addon.liveMatrices()
    const tensor = fromDLPack(addon.makeTransposedMatrix(3, 4, dtype))
    const pointer = addon.lastExportedPointer()
    t.deepEqual(tensor.shape, [4, 3])
    t.deepEqual(tensor.strides, [1, 4])
    t.false(tensor.isContiguous)
    const transposed = pattern(3, 4)
    t.deepEqual(
      tensor.toArray(),
      [0, 1, 2, 3].map((j) => [0, 1, 2].map((i) => transposed[i]![j])),
    )
    t.is(tensor.isCopy, !zeroCopy)
    if (zeroCopy) t.is(tensor.dataPointer, pointer)
    else t.not(tensor.dataPointer, pointer)
    // Natively, too: the strides reach the consumer as exported.
    const described = addon.describe(addon.makeTransposedMatrix(3, 4, dtype))
    t.deepEqual(described.shape, [4, 3])
    t.deepEqual(described.strides, [1, 4])
    t.is(described.dataPointer, addon.lastExportedPointer())
    // Re-exported from JS to the example: the FWHT refuses the non-contiguous layout.
    const square = fromDLPack(addon.makeTransposedMatrix(4, 4, dtype))
    const error = t.throws(() => addon.fwhtRowsInPlace(square.__dlpack__()), { code: 'ERR_DLPACK_NOT_CONTIGUOUS' })
    t.true(error instanceof Error)
    t.deepEqual(square.toArray(), [0, 1, 2, 3].map((j) => [0, 1, 2, 3].map((i) => i * 4 + j)), 'untouched')
    square.dispose()
    tensor.dispose()
    t.is(addon.liveMatrices(), before)
  })
}

test.serial(`example → main package: legacy (DLPack 0.x) exports work too (${mode})`, (t) => {
  const before = addon.liveMatrices()
  const described = addon.describe(addon.makeMatrix(2, 2, 'float64', { legacy: true }))
  t.false(described.versioned)
  t.deepEqual(described.shape, [2, 2])
  t.true(addon.describe(addon.makeMatrix(2, 2, 'float64', { legacy: false })).versioned)
  const tensor = fromDLPack(addon.makeMatrix(2, 2, 'float64', { legacy: true }))
  t.deepEqual(tensor.toArray(), [
    [0, 1],
    [2, 3],
  ])
  t.is(tensor.isCopy, !zeroCopy)
  tensor.dispose()
  t.is(addon.liveMatrices(), before)
})

// ---------------------------------------------------------------------------------------------
// main package → example
// ---------------------------------------------------------------------------------------------

test.serial(`main package → example: describe reads a JS tensor's metadata, same pointer (${mode})`, (t) => {
  // JS memory exported to native is zero-copy in both modes.
  const tensor = Tensor.from(new Float64Array(12), [3, 4])
  const capsule = tensor.__dlpack__()
  const described = addon.describe(capsule)
  t.deepEqual(described, {
    dtype: 'float64',
    shape: [3, 4],
    strides: [4, 1],
    device: CPU,
    byteOffset: described.byteOffset,
    dataPointer: tensor.dataPointer,
    readonly: false,
    versioned: true,
  })
  t.true(Number.isSafeInteger(described.byteOffset) && described.byteOffset >= 0)
  // describe consumed the capsule.
  t.true(isCapsuleConsumed(capsule))
  t.throws(() => addon.describe(capsule), { code: 'ERR_DLPACK_CAPSULE_CONSUMED' })
  t.throws(() => fromDLPack(capsule), { code: 'ERR_DLPACK_CAPSULE_CONSUMED' })

  // An offset, strided, read-only view; a legacy capsule.
  const base = new Float32Array(32)
  const view = Tensor.from(base, [4, 2], { offset: 3, strides: [4, 2], readonly: true })
  const viewed = addon.describe(view.__dlpack__())
  t.is(viewed.dtype, 'float32')
  t.deepEqual(viewed.shape, [4, 2])
  t.deepEqual(viewed.strides, [4, 2])
  t.true(viewed.readonly)
  t.is(viewed.dataPointer, view.dataPointer)
  t.is(view.dataPointer, Tensor.from(base).dataPointer + 12n, 'the first element is 3 floats in')
  t.false(addon.describe(tensor.__dlpack__({ maxVersion: [0, 8] })).versioned)
  t.is(addon.describe(Tensor.from(new Int32Array(5)).__dlpack__()).dtype, 'int32')
})

for (const dtype of DTYPES) {
  for (const n of [1, 2, 8, 1024]) {
    test.serial(`main package → example: FWHT of ${dtype} rows of ${n} in place, against the JS reference (${mode})`, (t) => {
      const rows = 3
      const values = random(rows * n, n * 7 + (dtype === 'float32' ? 1 : 2))
      const array = makeArray(dtype, values)
      const input = Array.from(array) // the values as stored (rounded to float32 where relevant)
      const tensor = Tensor.from(array, [rows, n])
      const pointer = tensor.dataPointer
      const capsule = tensor.__dlpack__()
      t.is(addon.describe(tensor.__dlpack__()).dataPointer, pointer, 'the example sees the JS memory itself')
      t.is(addon.fwhtRowsInPlace(capsule), undefined)
      t.true(isCapsuleConsumed(capsule))
      // Zero-copy both ways: the original TypedArray and the tensor see the transformed rows.
      t.is(tensor.dataPointer, pointer)
      t.is(tensor.data.buffer, array.buffer)
      const { y, scale } = referenceRows(input, rows, n)
      const error = maxScaledError(array, y, scale, n)
      t.true(error <= TOLERANCE[dtype], `max error ${error} × Σ|x| exceeds ${TOLERANCE[dtype]}`)
      if (n === 1) t.deepEqual(Array.from(array), input, 'a length-1 transform is the identity')
      else t.notDeepEqual(Array.from(array), input)
      // Row 0, element 0 is the row sum: a cheap independent check.
      const rowSum = input.slice(0, n).reduce((a, b) => a + b, 0)
      t.true(Math.abs((array[0] as number) - rowSum) <= TOLERANCE[dtype] * (scale[0] as number) + Number.MIN_VALUE)
    })
  }

  test.serial(`main package → example: FWHT twice gives n·x (${dtype}, ${mode})`, (t) => {
    for (const n of [2, 8, 1024]) {
      // Small integers: every intermediate is exact in float32 and float64, so the identity is exact.
      const ints = Array.from({ length: 2 * n }, (_, k) => ((k * 37) % 11) - 5)
      const exact = makeArray(dtype, ints)
      const tensor = Tensor.from(exact, [2, n])
      addon.fwhtRowsInPlace(tensor.__dlpack__())
      addon.fwhtRowsInPlace(tensor.__dlpack__())
      t.deepEqual(Array.from(exact), ints.map((v) => v * n), `n = ${n}`)
      // Random values: n·x within tolerance.
      const values = makeArray(dtype, random(2 * n, n))
      const input = Array.from(values)
      const noisy = Tensor.from(values, [2, n])
      addon.fwhtRowsInPlace(noisy.__dlpack__())
      addon.fwhtRowsInPlace(noisy.__dlpack__())
      let worst = 0
      for (let k = 0; k < input.length; k++) {
        worst = Math.max(worst, Math.abs((values[k] as number) - n * (input[k] as number)) / n)
      }
      t.true(worst <= TOLERANCE[dtype] * 4, `n = ${n}: max |H(Hx)/n - x| = ${worst}`)
    }
  })

  test.serial(`round trip: FWHT of a matrix the example made, through the JS tensor (${dtype}, ${mode})`, (t) => {
    const before = addon.liveMatrices()
    const tensor = fromDLPack(addon.makeMatrix(2, 8, dtype))
    // Zero-copy mode: the JS tensor views Rust memory, and re-exporting it hands that memory
    // back to the example. Electron mode: the JS tensor is a V8 copy, transformed in place.
    addon.fwhtRowsInPlace(tensor.__dlpack__())
    const { y } = referenceRows(pattern(2, 8).flat(), 2, 8)
    t.deepEqual(Array.from(tensor.data as Float32Array | Float64Array), Array.from(y), 'integer inputs: exact')
    t.is(addon.liveMatrices(), zeroCopy ? before + 1 : before)
    tensor.dispose()
    t.is(addon.liveMatrices(), before)
  })
}

// ---------------------------------------------------------------------------------------------
// errors
// ---------------------------------------------------------------------------------------------

test.serial(`fwhtRowsInPlace rejects bad inputs with the crate's stable codes (${mode})`, (t) => {
  const cases: Array<[string, () => Tensor, string]> = [
    ['rows of 3', () => Tensor.from(new Float32Array(6), [2, 3]), 'ERR_DLPACK_INVALID_ARGUMENT'],
    ['rows of 12', () => Tensor.from(new Float64Array(24), [2, 12]), 'ERR_DLPACK_INVALID_ARGUMENT'],
    ['rows of 0', () => Tensor.from(new Float64Array(0), [2, 0]), 'ERR_DLPACK_INVALID_ARGUMENT'],
    ['1-D', () => Tensor.from(new Float32Array(8)), 'ERR_DLPACK_INVALID_ARGUMENT'],
    ['3-D', () => Tensor.from(new Float32Array(8), [2, 2, 2]), 'ERR_DLPACK_INVALID_ARGUMENT'],
    ['int32', () => Tensor.from(new Int32Array(8), [2, 4]), 'ERR_DLPACK_DTYPE_MISMATCH'],
    ['float16', () => Tensor.from(new Uint16Array(8), [2, 4], { dtype: 'float16' }), 'ERR_DLPACK_DTYPE_MISMATCH'],
    ['read-only', () => Tensor.from(new Float32Array(8).fill(1), [2, 4], { readonly: true }), 'ERR_DLPACK_READ_ONLY'],
    ['transposed', () => Tensor.from(new Float32Array(16).fill(1), [4, 4], { strides: [1, 4] }), 'ERR_DLPACK_NOT_CONTIGUOUS'],
    ['every other column', () => Tensor.from(new Float64Array(16).fill(1), [2, 4], { strides: [8, 2] }), 'ERR_DLPACK_NOT_CONTIGUOUS'],
  ]
  for (const [name, make, code] of cases) {
    const tensor = make()
    const before = tensor.toTypedArray()
    const capsule = tensor.__dlpack__()
    const error = t.throws(() => addon.fwhtRowsInPlace(capsule), { code }, name)
    t.true(error instanceof Error, name)
    t.true(isCapsuleConsumed(capsule), `${name}: the capsule was consumed (and released) anyway`)
    t.deepEqual(tensor.toTypedArray(), before, `${name}: the data is untouched`)
  }
  t.throws(() => addon.fwhtRowsInPlace({}), { code: 'ERR_DLPACK_NOT_A_CAPSULE' })
  t.throws(() => addon.fwhtRowsInPlace(Tensor.from(new Float32Array(8), [2, 4])), { code: 'ERR_DLPACK_NOT_A_CAPSULE' })
  t.throws(() => addon.describe(42), { code: 'ERR_DLPACK_NOT_A_CAPSULE' })
  t.throws(() => addon.describe(undefined), { code: 'ERR_DLPACK_NOT_A_CAPSULE' })
  const capsule = Tensor.from(new Float32Array(8), [2, 4]).__dlpack__()
  addon.fwhtRowsInPlace(capsule)
  t.throws(() => addon.fwhtRowsInPlace(capsule), { code: 'ERR_DLPACK_CAPSULE_CONSUMED' })
})

test.serial(`makeMatrix rejects bad arguments (${mode})`, (t) => {
  const before = addon.liveMatrices()
  t.throws(() => addon.makeMatrix(2, 2, 'int32' as MatrixDType), { code: 'ERR_DLPACK_INVALID_ARGUMENT' })
  t.throws(() => addon.makeMatrix(2, 2, 'float' as MatrixDType), { code: 'ERR_DLPACK_INVALID_ARGUMENT' })
  t.throws(() => addon.makeTransposedMatrix(1 << 16, 1 << 16, 'float32'), { code: 'ERR_DLPACK_INVALID_ARGUMENT' })
  t.is(addon.liveMatrices(), before)
})

// ---------------------------------------------------------------------------------------------
// deleter accounting
// ---------------------------------------------------------------------------------------------

test.serial(`every matrix is freed once: consumed by the example, disposed, or failing (${mode})`, (t) => {
  const start = addon.liveMatrices()
  // Consumed natively: describe releases at once, and so does a failing FWHT.
  addon.describe(addon.makeMatrix(4, 4, 'float32'))
  addon.describe(addon.makeTransposedMatrix(4, 4, 'float64', { legacy: true }))
  t.throws(() => addon.fwhtRowsInPlace(addon.makeMatrix(2, 3, 'float32')), { code: 'ERR_DLPACK_INVALID_ARGUMENT' })
  t.throws(() => addon.fwhtRowsInPlace(addon.makeTransposedMatrix(4, 4, 'float64')), { code: 'ERR_DLPACK_NOT_CONTIGUOUS' })
  addon.fwhtRowsInPlace(addon.makeMatrix(2, 4, 'float64'))
  t.is(addon.liveMatrices(), start)

  // Imported into JS and disposed, with and without a zero-copy view taken.
  const tensors: Tensor[] = []
  for (let i = 0; i < 10; i++) {
    const tensor = fromDLPack(addon.makeMatrix(2, 8, i % 2 ? 'float32' : 'float64', { legacy: i % 3 === 0 }))
    if (i % 2) void tensor.data
    tensors.push(tensor)
  }
  // Sharing without a capsule keeps the memory until the last sharer goes.
  const shared = fromDLPack(tensors[0]!)
  t.is(addon.liveMatrices(), zeroCopy ? start + 10 : start)
  for (const tensor of tensors) tensor.dispose()
  t.is(addon.liveMatrices(), zeroCopy ? start + 1 : start)
  shared.dispose()
  t.is(addon.liveMatrices(), start)
})

test.serial(`dropped capsules and tensors free their matrices on GC (${mode})`, async (t) => {
  t.is(typeof gc, 'function', 'this test needs --expose-gc')
  await drainGarbage()
  const start = addon.liveMatrices()
  const made = (() => {
    let count = 0
    for (let i = 0; i < 20; i++) {
      addon.makeMatrix(4, 4, 'float32') // never consumed: the capsule's finalizer frees it
      addon.makeTransposedMatrix(4, 4, 'float64', { legacy: true })
      const tensor = fromDLPack(addon.makeMatrix(4, 8, 'float64')) // imported, never disposed
      if (i % 2) void tensor.data
      tensor.__dlpack__() // a re-export of the foreign memory, never consumed
      count += 3
    }
    return count
  })()
  const live = addon.liveMatrices()
  // Unconsumed capsules hold theirs in both modes (imports too, with external buffers).
  t.true(live > start, `${live - start} of ${made} alive before GC`)
  t.true(await gcUntil(() => addon.liveMatrices() === start), `live: ${addon.liveMatrices()}, start: ${start}`)
})

for (const exit of ['natural', 'terminate'] as const) {
  test.serial(`a Worker that ends (${exit}) frees the matrices of the crate's capsules and of our tensors (${mode})`, async (t) => {
    await drainGarbage()
    const start = addon.liveMatrices()
    const worker = new Worker(new URL('../harness/workers/consumer-addon-worker.mjs', import.meta.url), {
      workerData: { addonPath, each: 4, exit },
    })
    const exited = once(worker, 'exit') // before the message: both can come in one tick
    const [message] = (await once(worker, 'message')) as [{ made: number }]
    t.is(message.made, 12)
    if (exit === 'terminate') await worker.terminate()
    const [code] = (await exited) as [number]
    t.is(code, exit === 'terminate' ? 1 : 0)
    // Node frees them before 'exit'; elsewhere external ArrayBuffers may go a little later.
    t.true(await gcUntil(() => addon.liveMatrices() === start), `live: ${addon.liveMatrices()}, start: ${start}`)
    await drainGarbage()
    t.is(addon.liveMatrices(), start, 'and nothing is freed twice')
  })
}
