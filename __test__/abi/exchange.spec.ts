// The exchange table (include/napi_dlpack.h part 3, docs/protocol.md §5) against a plain C addon
// built from the header only (__test__/native/exchange-c): borrowing a napi-dlpack Tensor for a call
// (no capsule), owning exports, C memory returned to JS as a Tensor through the default importer,
// the work stream, a third-party class with its own table, unknown table majors, and the
// header's validation helper. Pointer identity, writes seen on both sides, deleter counts.
// Runs in both modes (with NAPI_DLPACK_NO_EXTERNAL_BUFFERS=1: the Electron path).
import { execFileSync } from 'node:child_process'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Worker } from 'node:worker_threads'

import test from 'ava'

import { native } from '../../dist/native.js'
import {
  BufferError,
  DLPackError,
  EXCHANGE_API_PROPERTY,
  InvalidTensorError,
  Tensor,
  TensorDisposedError,
  externalBuffersAllowed,
  fromDLPack,
} from '../../dist/index.js'
import { addressOf, codeOf, drainGarbage, gcUntil, nativeFixture } from '../harness/helpers.js'

interface BorrowedSum {
  sum: number
  pointer: bigint
  flags: number
  numel: number
  contiguous: boolean
  spanBytes: number
}

interface CTensorInstance {
  readonly [EXCHANGE_API_PROPERTY]: unknown
  pointer(): bigint
  values(): number[]
}
type CTensorClass = new (readonly?: boolean) => CTensorInstance

interface ExchangeC {
  borrowSum(value: unknown): BorrowedSum
  borrowScale(value: unknown, factor: number): void
  borrowStatus(value: unknown): { code: string; status: number }
  selectDepth(tables: number): boolean
  keyedBorrow(value: unknown): { pointer: bigint; sum: number }
  keyedAdaptedPointer(value: unknown): bigint | null
  installOn(value: unknown): number
  installFinalized(): number
  borrowInspect(value: unknown): {
    flags: number
    code: number
    bits: number
    extent: string | { numel: number; itemsize: number; spanBytes: number }
  }
  borrowKeep(value: unknown): void
  keptSum(): number
  extentOf(spec: {
    shape: bigint[]
    strides?: bigint[] | null
    data?: bigint
    byteOffset?: bigint
    bits?: number
    code?: number
    lanes?: number
    flags?: number
    deviceType?: number
    deviceId?: number
    misaligned?: 'shape' | 'strides'
  }):
    | string
    | { numel: bigint; minOffset: bigint; maxOffset: bigint; spanBytes: bigint; contiguous: boolean }
  exportHold(value: unknown): bigint
  heldFlags(index: number): number
  releaseHeld(): number
  makeTensor(n: number, readonly: boolean): Tensor
  makeBadTensor(): Tensor
  deleterCalls(): number
  lastMadePointer(): bigint
  currentStream(value: unknown, deviceType: number, deviceId?: number): bigint | null
  liveCTensors(): number
  forgedObject(kind: 'future' | 'empty' | 'untagged'): object
  lendingPath(value: unknown): string
  borrowCounts(): { object: number; value: number }
  adaptedPointer(value: unknown): { pointer: bigint; readonly: boolean } | null
  CTensor: CTensorClass
  BadVersionTensor: CTensorClass
  ChainedTensor: CTensorClass
}

const here = dirname(fileURLToPath(import.meta.url))
const { path: addonPath, addon: c } = nativeFixture<ExchangeC>('exchange-c', 'exchange_c.node')

const zeroCopy = externalBuffersAllowed()
const READ_ONLY = 1
const SUBBYTE_PADDED = 4
// napi_dlpack_status (include/napi_dlpack.h).
const NAPI_DLPACK_OK = 0
const NAPI_DLPACK_ERR_VERSION = 7
const NAPI_DLPACK_ERR_NO_EXCHANGE = 8
const live = () => native.nativeStats().liveStorages
test('Tensor.prototype exposes the table, each Tensor its own handle (one lookup); the C helper finds both', (t) => {
  const tensor = Tensor.from(new Float32Array([1, 2]))
  t.is(EXCHANGE_API_PROPERTY as symbol, Symbol.for('__dlpack_napi_exchange_api__'), 'a registered symbol: any addon can make the key')
  t.true(EXCHANGE_API_PROPERTY in Tensor.prototype)
  t.false(Object.getOwnPropertyDescriptor(Tensor.prototype, EXCHANGE_API_PROPERTY)?.enumerable, 'not enumerable')
  t.is(c.lendingPath(Object.create(Tensor.prototype)), 'table', 'the prototype holds the table itself')
  t.true(Object.prototype.hasOwnProperty.call(tensor, EXCHANGE_API_PROPERTY), 'each tensor shadows it with its own handle')
  t.is(c.lendingPath(tensor), 'object', 'found as per-object data: the fast path')
  t.deepEqual(c.borrowStatus(tensor), { code: 'OK', status: NAPI_DLPACK_OK })
  t.false(Object.keys(tensor).includes(String(EXCHANGE_API_PROPERTY)), 'invisible to Object.keys and JSON')
  tensor.dispose()
  t.false(Object.prototype.hasOwnProperty.call(tensor, EXCHANGE_API_PROPERTY), 'dispose() removes it')
  t.is(c.lendingPath(tensor), 'table', 'a disposed tensor reaches the prototype table, which refuses it')
  t.is(codeOf(() => c.borrowSum(tensor)), 'ERR_TENSOR_DISPOSED')
  // A capsule adopted as the handle (our own capsule straight back) lends through the table.
  const adopted = fromDLPack(Tensor.from(new Float32Array([3, 4])).__dlpack__())
  t.is(c.lendingPath(adopted), 'table')
  t.is(c.borrowSum(adopted).sum, 7)
  // globalThis carries the table too: the environment's default importer.
  t.is(c.currentStream(globalThis, 2), 1n)
})

test.serial('Tensor.native: the C helper borrows the id external (no lookup), exports it, and refuses it once disposed', async (t) => {
  await drainGarbage()
  const data = new Float32Array([1, 2, 3, 4])
  const tensor = Tensor.from(data, [2, 2])
  const handle = tensor.native
  t.not(handle, tensor as unknown, 'a lending tensor gives its handle, not itself')
  t.is(c.lendingPath(handle), 'table', 'an id external: the default importer lends it')
  const before = live()
  const borrowed = c.borrowSum(handle)
  t.is(borrowed.pointer, tensor.dataPointer, 'zero-copy: the same first-element address')
  t.is(borrowed.sum, 10)
  t.is(live(), before, 'a borrow creates no storage')
  c.borrowScale(handle, 2)
  t.deepEqual([...data], [2, 4, 6, 8], 'writes through the handle are seen in JS')
  t.is(c.exportHold(handle), tensor.dataPointer, 'an owning export of the handle: same memory')
  // Externals of other kinds are not lending objects: the consumer falls back to capsules.
  const noExchange = { code: 'ERR_DLPACK_INVALID_ARGUMENT', status: NAPI_DLPACK_ERR_NO_EXCHANGE }
  t.deepEqual(c.borrowStatus(Tensor.from(new Float32Array(1)).__dlpack__()), noExchange, 'a capsule')
  const table = Object.getOwnPropertyDescriptor(Tensor.prototype, EXCHANGE_API_PROPERTY)?.value
  t.deepEqual(c.borrowStatus(table), noExchange, 'the table external passed as the value')
  tensor.dispose()
  t.is(codeOf(() => tensor.native), 'ERR_TENSOR_DISPOSED')
  t.is(codeOf(() => c.borrowSum(handle)), 'ERR_TENSOR_STALE_ID', 'a handle kept past dispose() lends nothing')
  t.is(codeOf(() => c.exportHold(handle)), 'ERR_TENSOR_STALE_ID')
  t.is(c.releaseHeld(), 1, 'the one export made before dispose() is released once')
  t.deepEqual([...data], [2, 4, 6, 8])
  // A tensor over an adopted capsule has an id external too.
  const adopted = fromDLPack(Tensor.from(new Float32Array([3, 4])).__dlpack__())
  t.is(c.lendingPath(adopted.native), 'table')
  t.is(c.borrowSum(adopted.native).sum, 7)
  t.true(await gcUntil(() => live() <= before), `live ${live()} before ${before}`)
})

test('a buffer a borrow pinned, then detached by ArrayBuffer.prototype.transfer(): later borrows are ERR_TENSOR_DETACHED', (t) => {
  // Pinning (marking untransferable) stops postMessage and structuredClone, but Node 22's
  // transfer() still detaches such a buffer (Node 24 refuses; Node 20 has no transfer()), so
  // the producer checks for a detached buffer on every borrow, by handle or by object.
  const data = new Float32Array([1, 2])
  const tensor = Tensor.from(data)
  const handle = tensor.native
  t.is(c.borrowSum(handle).sum, 3, 'the first borrow pins the buffer')
  const buffer = data.buffer as ArrayBuffer & { transfer?: () => ArrayBuffer }
  let moved: ArrayBuffer | undefined
  try {
    moved = buffer.transfer?.()
  } catch (error) {
    t.is((error as Error).name, 'TypeError', 'a runtime that refuses to detach a pinned buffer')
  }
  if (moved !== undefined && buffer.byteLength === 0) {
    t.is(codeOf(() => c.borrowSum(handle)), 'ERR_TENSOR_DETACHED')
    t.is(codeOf(() => c.borrowSum(tensor)), 'ERR_TENSOR_DETACHED')
    t.is(codeOf(() => c.exportHold(handle)), 'ERR_TENSOR_DETACHED')
  } else {
    t.is(c.borrowSum(handle).sum, 3, 'not detached: still lent')
  }
})

test('loading napi-dlpack installs the table without leaving an exception pending (node -e, fresh global)', (t) => {
  // The first install finds no table on globalThis: the lookup must not tag-check `undefined`
  // (which throws a TypeError that stays pending and fails the load).
  const dist = join(here, '..', '..', 'dist', 'index.js')
  const out = execFileSync(process.execPath, ['-e', `const m = require(${JSON.stringify(dist)}); process.stdout.write(String(m.EXCHANGE_API_PROPERTY in globalThis))`], {
    encoding: 'utf8',
  })
  t.is(out, 'true')
})

test('borrowing a Tensor: same memory, values, strides, no storage made or kept', (t) => {
  const data = new Float32Array([1, 2, 3, 4, 5, 6])
  const tensor = Tensor.from(data, [2, 3])
  const before = live()
  const borrowed = c.borrowSum(tensor)
  t.is(live(), before, 'a borrow creates no storage')
  t.is(borrowed.pointer, tensor.dataPointer, 'zero-copy: the same first-element address')
  t.is(borrowed.sum, 21)
  t.is(borrowed.numel, 6)
  t.true(borrowed.contiguous)
  t.is(borrowed.flags, 0)
  // A transposed view over the same buffer: strides travel as they are.
  const transposed = Tensor.from(data, [3, 2], { strides: [1, 3] })
  const view = c.borrowSum(transposed)
  t.is(view.pointer, tensor.dataPointer)
  t.false(view.contiguous)
  t.is(view.sum, 21)
  // An offset view: data + byte_offset is the first element.
  const tail = Tensor.from(data, [2], { offset: 4 })
  t.is(c.borrowSum(tail).sum, 11)
  t.is(c.borrowSum(tail).pointer, tensor.dataPointer + 16n)
})

test.serial('sub-byte dtypes lend IS_SUBBYTE_TYPE_PADDED (one element per byte), as their capsules do; the header helper accepts them', (t) => {
  for (const [dtype, code, bits] of [
    ['float4_e2m1fn', 17, 4],
    ['float6_e2m3fn', 15, 6],
    ['float6_e3m2fn', 16, 6],
  ] as const) {
    const tensor = Tensor.zeros([4], dtype)
    const seen = c.borrowInspect(tensor)
    t.is(seen.code, code, dtype)
    t.is(seen.bits, bits, dtype)
    t.is(seen.flags & SUBBYTE_PADDED, SUBBYTE_PADDED, `${dtype}: a borrow says padded, like its capsule`)
    t.deepEqual(seen.extent, { numel: 4, itemsize: 1, spanBytes: 4 }, dtype)
    t.is(c.borrowInspect(tensor.native).flags & SUBBYTE_PADDED, SUBBYTE_PADDED, `${dtype} by handle`)
    // The owning export says the same.
    c.exportHold(tensor)
    t.is(c.heldFlags(0) & SUBBYTE_PADDED, SUBBYTE_PADDED, `${dtype}: owning export`)
    c.releaseHeld()
  }
  t.is(c.borrowInspect(Tensor.zeros([4], 'uint8')).flags & SUBBYTE_PADDED, 0, 'whole-byte dtypes are not flagged')
})

test('writes through a borrowed tensor are seen in JS, strided included', (t) => {
  const data = new Float32Array([1, 2, 3, 4, 5, 6])
  const transposed = Tensor.from(data, [3, 2], { strides: [1, 3] })
  c.borrowScale(transposed, 10)
  t.deepEqual([...data], [10, 20, 30, 40, 50, 60])
  t.deepEqual(transposed.toArray(), [
    [10, 40],
    [20, 50],
    [30, 60],
  ])
})

test('a read-only tensor lends READ_ONLY; the C consumer refuses to write', (t) => {
  const data = new Float32Array([1, 2])
  const tensor = Tensor.from(data, [2], { readonly: true })
  t.is(c.borrowSum(tensor).flags & READ_ONLY, READ_ONLY)
  t.is(codeOf(() => c.borrowScale(tensor, 2)), 'ERR_DLPACK_READ_ONLY')
  t.deepEqual([...data], [1, 2])
})

test('disposed tensors and detached buffers are coded errors from the producer', (t) => {
  const tensor = Tensor.from(new Float32Array([1]))
  const shared = fromDLPack(tensor) // a second Tensor over the same handle
  tensor.dispose()
  t.is(codeOf(() => c.borrowSum(tensor)), 'ERR_TENSOR_DISPOSED')
  t.is(c.borrowSum(shared).sum, 1, 'another tensor over the same handle still lends')
  const buffer = new ArrayBuffer(8)
  const over = Tensor.from(buffer, [2], { dtype: 'float32' })
  structuredClone(buffer, { transfer: [buffer] })
  t.is(codeOf(() => c.borrowSum(over)), 'ERR_TENSOR_DETACHED')
  // An object that merely inherits the prototype has no handle.
  t.is(codeOf(() => c.borrowSum(Object.create(Tensor.prototype))), 'ERR_TENSOR_DISPOSED')
})

test('hostile values under the exchange symbol: forged per-object data, unknown majors, foreign handles', (t) => {
  const version = { code: 'ERR_DLPACK_VERSION', status: NAPI_DLPACK_ERR_VERSION }
  const noExchange = { code: 'ERR_DLPACK_INVALID_ARGUMENT', status: NAPI_DLPACK_ERR_NO_EXCHANGE }
  t.deepEqual(c.borrowStatus(c.forgedObject('future')), version, 'per-object data naming a major-99 table')
  t.deepEqual(c.borrowStatus(c.forgedObject('empty')), noExchange, 'per-object data naming no table')
  t.deepEqual(c.borrowStatus(c.forgedObject('untagged')), noExchange, 'an untagged external is never read')
  // JS can copy a tensor's handle onto another object: it lends that same tensor (memory-safe:
  // the handle keeps its memory alive), and refuses once the tensor's storage is released.
  const tensor = Tensor.from(new Float32Array([5, 6]))
  const handle = (tensor as unknown as Record<symbol, unknown>)[EXCHANGE_API_PROPERTY]
  const copy = { [EXCHANGE_API_PROPERTY]: handle }
  t.is(c.borrowSum(copy).sum, 11)
  tensor.dispose()
  t.is(codeOf(() => c.borrowSum(copy)), 'ERR_TENSOR_DISPOSED')
  // A third-party per-object external carries the same public tag but is not one of
  // napi-dlpack's handles: its header names another table.
  const foreign = (new c.CTensor() as unknown as Record<symbol, unknown>)[EXCHANGE_API_PROPERTY]
  t.is(codeOf(() => native.dataPointer(foreign)), 'ERR_DLPACK_INVALID_ARGUMENT')
  t.is(codeOf(() => native.releaseHandle(foreign)), 'ERR_DLPACK_INVALID_ARGUMENT')
})

test('a third-party class lends through its per-object data; deleting it falls back to the prototype table', (t) => {
  const producer = new c.CTensor()
  t.is(c.lendingPath(producer), 'object')
  const before = c.borrowCounts()
  t.is(c.borrowSum(producer).sum, 15)
  t.deepEqual(c.borrowCounts(), { object: before.object + 1, value: before.value }, 'dltensor_from_object, not a lookup')
  delete (producer as unknown as Record<symbol, unknown>)[EXCHANGE_API_PROPERTY]
  t.is(c.lendingPath(producer), 'table')
  t.is(c.borrowSum(producer).sum, 15)
  t.deepEqual(c.borrowCounts(), { object: before.object + 1, value: before.value + 1 }, 'dltensor_from_value')
  t.deepEqual(c.borrowStatus(new c.BadVersionTensor()), { code: 'ERR_DLPACK_VERSION', status: NAPI_DLPACK_ERR_VERSION })
  t.is(c.lendingPath(new c.ChainedTensor()), 'object', 'an unknown major with a major-1 table behind it')
})

test('a second installExchangeApi in one environment deletes the first one\'s references (node -e)', (t) => {
  // In a child: the install replaces this environment's handle key and factories.
  const dist = join(here, '..', '..', 'dist')
  const script = `
    const { native } = require(${JSON.stringify(join(dist, 'native.js'))})
    require(${JSON.stringify(join(dist, 'index.js'))})
    const counts = [native.nativeStats().exchangeReferences]
    for (let i = 0; i < 3; i++) {
      native.installExchangeApi(Object.create(null), Symbol('h' + i), () => null, () => null)
      counts.push(native.nativeStats().exchangeReferences)
    }
    process.stdout.write(JSON.stringify(counts))`
  const counts = JSON.parse(execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' })) as number[]
  t.deepEqual(counts, [3, 3, 3, 3], 'each install holds its three references and releases the previous three')
})

test('values without a table: NO_EXCHANGE (the consumer falls back to capsules)', (t) => {
  // NO_EXCHANGE and INVALID_ARG share the code ERR_DLPACK_INVALID_ARGUMENT: the number tells.
  const noExchange = { code: 'ERR_DLPACK_INVALID_ARGUMENT', status: NAPI_DLPACK_ERR_NO_EXCHANGE }
  for (const value of [{}, 1.5, -1, 2 ** 60, 'x', null, undefined, [], () => 1, Tensor.from(new Float32Array(1)).__dlpack__()]) {
    t.deepEqual(c.borrowStatus(value), noExchange, typeof value)
  }
  // An integer is a handle id (protocol §5.6), lent by the default importer, which refuses one
  // that names no tensor (its coded exception is passed on).
  t.is(codeOf(() => c.borrowStatus(3)), 'ERR_DLPACK_INVALID_ARGUMENT')
  // A property that is not a tagged external is not a table.
  t.deepEqual(c.borrowStatus({ [EXCHANGE_API_PROPERTY]: 42 }), noExchange)
  t.deepEqual(c.borrowStatus({ [EXCHANGE_API_PROPERTY]: Tensor.from(new Float32Array(1)).__dlpack__() }), noExchange)
})

test.serial('a C borrow outlives dispose() and GC: readable until released, the deleter runs once, after', async (t) => {
  await drainGarbage()
  // C memory holding 0..3, its deleter counted. (Without external buffers the import copies
  // and the deleter has run already: `owed` is what the Tensor still holds.)
  const owed = zeroCopy ? 1 : 0
  const tensor = c.makeTensor(4, false)
  const before = c.deleterCalls()
  c.borrowKeep(tensor)
  tensor.dispose()
  t.is(c.deleterCalls(), before, 'dispose() released nothing the borrow uses')
  t.is(c.keptSum(), 6, 'the memory is still the producer\'s')
  t.is(c.deleterCalls(), before + owed, 'released with the borrow, once')
  // The JS object collected while the borrow lasts.
  ;(() => c.borrowKeep(c.makeTensor(5, false)))()
  const beforeGc = c.deleterCalls()
  await gcUntil(() => false, 6)
  t.is(c.deleterCalls(), beforeGc, 'a collected Tensor released nothing the borrow uses')
  t.is(c.keptSum(), 10)
  t.is(c.deleterCalls(), beforeGc + owed)
})

test('tables of an unknown major: refused alone, the older table behind it used', (t) => {
  t.deepEqual(c.borrowStatus(new c.BadVersionTensor()), { code: 'ERR_DLPACK_VERSION', status: NAPI_DLPACK_ERR_VERSION })
  const chained = new c.ChainedTensor()
  t.deepEqual(c.borrowStatus(chained), { code: 'OK', status: NAPI_DLPACK_OK })
  t.is(c.borrowSum(chained).sum, 15)
})

test.serial('owning exports keep the memory after dispose; each deleter runs once', async (t) => {
  await drainGarbage()
  const before = live()
  const data = new Float32Array([1, 2, 3])
  ;(() => {
    const tensor = Tensor.from(data)
    t.is(c.exportHold(tensor), tensor.dataPointer)
    const readonly = Tensor.from(data, [3], { readonly: true })
    c.exportHold(readonly)
    t.is(c.heldFlags(1) & READ_ONLY, READ_ONLY)
    tensor.dispose()
    readonly.dispose()
  })()
  await gcUntil(() => false, 4)
  t.true(live() > before, 'the held exports keep their storages')
  t.is(c.releaseHeld(), 2)
  t.true(await gcUntil(() => live() <= before), `live ${live()} before ${before}`)
})

test.serial('owned exports and borrows mark V8 memory untransferable (a borrow may be kept past the call)', (t) => {
  const lends: Array<[string, (tensor: Tensor) => unknown]> = [
    ['owned export', (tensor) => c.exportHold(tensor)],
    ['borrow', (tensor) => c.borrowSum(tensor)],
  ]
  for (const [name, lend] of lends) {
    const buffer = new ArrayBuffer(8)
    const tensor = Tensor.from(new Float32Array(buffer))
    lend(tensor)
    try {
      structuredClone(buffer, { transfer: [buffer] })
    } catch (error) {
      // Node >= 21 and Bun: DataCloneError; Deno: TypeError (the detach key); Node 20 clones.
      t.true(['DataCloneError', 'TypeError'].includes((error as Error).name), `${name}: ${String(error)}`)
    }
    t.is(buffer.byteLength, 8, `${name}: still attached`)
    t.is(c.borrowSum(tensor).sum, 0, `${name}: still lends`)
  }
  t.is(c.releaseHeld(), 1)
})

test.serial('C memory returned as a Tensor through the default importer: zero-copy, deleter once', async (t) => {
  await drainGarbage()
  const deleters = c.deleterCalls()
  const before = live()
  ;(() => {
    const tensor = c.makeTensor(5, false)
    t.true(tensor instanceof Tensor)
    t.deepEqual(tensor.toArray(), [0, 1, 2, 3, 4])
    t.is(tensor.dtype, 'float32')
    if (zeroCopy) {
      t.is(tensor.dataPointer, c.lastMadePointer(), 'the Tensor views the C memory')
      t.false(tensor.isCopy)
      t.is(c.deleterCalls(), deleters, 'the C memory is alive while the Tensor is')
      // And it is a napi-dlpack Tensor in every respect: it lends itself back to C.
      t.is(c.borrowSum(tensor).pointer, c.lastMadePointer())
      tensor.data[0] = 7
      t.is(c.borrowSum(tensor).sum, 17)
    } else {
      t.true(tensor.isCopy, 'Electron mode: copied into V8 memory')
      t.is(c.deleterCalls(), deleters + 1, 'and the C deleter ran at once')
    }
    const readonly = c.makeTensor(2, true)
    t.true(readonly.readonly)
    readonly.dispose()
    tensor.dispose()
  })()
  t.true(await gcUntil(() => c.deleterCalls() === deleters + 2 && live() <= before), `deleters ${c.deleterCalls() - deleters}`)
  t.is(c.deleterCalls(), deleters + 2, 'exactly once each')
})

test.serial('a tensor the importer refuses is a coded error and its deleter runs once', (t) => {
  const deleters = c.deleterCalls()
  t.is(codeOf(() => c.makeBadTensor()), 'ERR_DLPACK_NDIM')
  t.is(c.deleterCalls(), deleters + 1)
})

test('current_work_stream: NULL on the CPU, the legacy default stream for CUDA', (t) => {
  const tensor = Tensor.from(new Float32Array(1))
  t.is(c.currentStream(tensor, 1), null)
  t.is(c.currentStream(tensor, 2), 1n)
  t.is(c.currentStream(tensor, 2, 3), 1n)
  t.is(c.currentStream(new c.CTensor(), 1), null)
})

test('current_work_stream validates its device: unknown types and negative ids are ERR_DLPACK_DEVICE (BufferError)', (t) => {
  const tensor = Tensor.from(new Float32Array(1))
  for (const [type, id] of [
    [0, 0],
    [5, 0],
    [19, 0],
    [-1, 0],
    [2, -1],
  ]) {
    const error = t.throws(() => c.currentStream(tensor, type, id), undefined, `device [${type}, ${id}]`)
    t.is((error as { code?: string } | undefined)?.code, 'ERR_DLPACK_DEVICE', `device [${type}, ${id}]`)
    t.true(error instanceof BufferError, `device [${type}, ${id}]: a BufferError, as §1.4 promises`)
  }
})

test('errors through the table are DLPackError subclasses with their code, as §1.4 promises', (t) => {
  const tensor = Tensor.from(new Float32Array([1]))
  tensor.dispose()
  const disposed = t.throws(() => c.borrowSum(tensor))
  t.true(disposed instanceof TensorDisposedError)
  t.true(disposed instanceof DLPackError)
  t.is((disposed as DLPackError).code, 'ERR_TENSOR_DISPOSED')
  const bad = t.throws(() => c.makeBadTensor())
  t.true(bad instanceof InvalidTensorError, 'managed_tensor_to_value refusing the tensor')
  t.is((bad as DLPackError).code, 'ERR_DLPACK_NDIM')
  const buffer = new ArrayBuffer(8)
  const over = Tensor.from(buffer, [2], { dtype: 'float32' })
  structuredClone(buffer, { transfer: [buffer] })
  const detached = t.throws(() => c.borrowSum(over))
  t.true(detached instanceof DLPackError)
  t.is((detached as DLPackError).code, 'ERR_TENSOR_DETACHED')
})

test("a tensor's own exchange property is non-enumerable and read-only: copies lend nothing, writes change nothing", (t) => {
  const tensor = Tensor.from(new Float32Array([1, 2]))
  t.like(Object.getOwnPropertyDescriptor(tensor, EXCHANGE_API_PROPERTY), { enumerable: false, writable: false, configurable: true })
  // Object.assign and spreads copy own enumerable properties, symbols included: nothing here.
  const copy = Object.assign({}, tensor)
  t.deepEqual(Object.getOwnPropertySymbols(copy), [], 'Object.assign copies no handle')
  t.deepEqual(Object.getOwnPropertySymbols({ ...tensor }), [], 'a spread copies no handle')
  t.deepEqual(c.borrowStatus(copy), { code: 'ERR_DLPACK_INVALID_ARGUMENT', status: NAPI_DLPACK_ERR_NO_EXCHANGE })
  t.throws(
    () => {
      ;(tensor as unknown as Record<symbol, unknown>)[EXCHANGE_API_PROPERTY] = undefined
    },
    { instanceOf: TypeError },
  )
  t.is(c.borrowSum(tensor).sum, 3, 'the tensor still lends')
  tensor.dispose()
  t.is(Object.getOwnPropertyDescriptor(tensor, EXCHANGE_API_PROPERTY), undefined, 'dispose() still removes it')
})

test('one table object per environment: Tensor.prototype and globalThis share it', (t) => {
  const onPrototype = Object.getOwnPropertyDescriptor(Tensor.prototype, EXCHANGE_API_PROPERTY)?.value
  const onGlobal = Object.getOwnPropertyDescriptor(globalThis, EXCHANGE_API_PROPERTY)?.value
  t.is(typeof onPrototype, 'object')
  t.is(onPrototype, onGlobal)
})

test.serial('a third-party class exposing its own table lends to C; its owning exports keep it alive', async (t) => {
  await drainGarbage()
  const deleters = c.deleterCalls()
  const liveC = c.liveCTensors()
  ;(() => {
    const producer = new c.CTensor()
    const borrowed = c.borrowSum(producer)
    t.is(borrowed.pointer, producer.pointer())
    t.is(borrowed.sum, 15)
    // An owning export outlives the JS object.
    t.is(c.exportHold(producer), producer.pointer())
  })()
  await gcUntil(() => c.liveCTensors() === liveC, 6)
  t.is(c.liveCTensors(), liveC + 1, 'the held export keeps the C tensor alive')
  t.is(c.releaseHeld(), 1)
  t.is(c.deleterCalls(), deleters + 1)
  t.is(c.liveCTensors(), liveC)
})

test.serial('fromDLPack takes a producer that lends only through an exchange table: its owning export, zero-copy, deleter once', async (t) => {
  await drainGarbage()
  const deleters = c.deleterCalls()
  const liveC = c.liveCTensors()
  ;(() => {
    const producer = new c.CTensor()
    const tensor = fromDLPack(producer)
    t.is(tensor.dataPointer, zeroCopy ? producer.pointer() : tensor.dataPointer, 'the producer\'s memory (where the runtime allows)')
    t.deepEqual([...tensor.toTypedArray()], producer.values())
    t.throws(() => fromDLPack(producer, { copy: false, device: 'cuda:0' }), { instanceOf: DLPackError })
    const copy = fromDLPack(producer, { copy: true })
    t.true(copy.isCopy)
    t.not(copy.dataPointer, producer.pointer())
    tensor.dispose()
    copy.dispose()
  })()
  await gcUntil(() => c.liveCTensors() === liveC && c.deleterCalls() >= deleters + 3, 6)
  t.is(c.deleterCalls(), deleters + 3, 'each export released once (two imports and the refused one)')
  // A table of an unknown major is refused; the major-1 table behind one is used.
  t.is(codeOf(() => fromDLPack(new c.BadVersionTensor())), 'ERR_DLPACK_VERSION')
  t.deepEqual([...fromDLPack(new c.ChainedTensor()).toTypedArray()], new c.ChainedTensor().values())
})

test('a chain of tables: the first 16 are looked at (the first and 15 older), in the header as in the crate', (t) => {
  t.true(c.selectDepth(1))
  t.true(c.selectDepth(16), 'the 16th table is found')
  t.false(c.selectDepth(17), 'the 17th is not')
})

test.serial('napi_dlpack_exchange_object_install says whether finalize_cb will run', async (t) => {
  await drainGarbage()
  const before = c.installFinalized()
  const NOT_INSTALLED = 10
  let installed = 0
  ;(() => {
    const statuses = [c.installOn({}), c.installOn(Object.freeze({})), c.installOn(Object.preventExtensions({}))]
    t.deepEqual(statuses, [NAPI_DLPACK_OK, NOT_INSTALLED, NOT_INSTALLED], 'made but not installed on a non-extensible object')
    installed = statuses.length
  })()
  await gcUntil(() => c.installFinalized() === before + installed, 8)
  t.is(c.installFinalized(), before + installed, 'every external made (OK or NOT_INSTALLED) was finalized once')
})

test('the _by_key helpers with keys kept per environment (header part 5) borrow, export and adapt as the others do', (t) => {
  const tensor = Tensor.from(new Float32Array([1, 2, 3]))
  t.deepEqual(c.keyedBorrow(tensor), { pointer: tensor.dataPointer, sum: 6 })
  t.deepEqual(c.keyedBorrow(tensor.native), { pointer: tensor.dataPointer, sum: 6 }, 'the handle itself')
  t.deepEqual(c.keyedBorrow(new c.CTensor()).sum, 15, 'a third-party table')
  t.is(codeOf(() => c.keyedBorrow({})), 'ERR_DLPACK_INVALID_ARGUMENT', 'no table: NO_EXCHANGE')
  const values = new Float32Array([1, 2, 3])
  t.is(c.keyedAdaptedPointer({ type: 'float32', dims: [3], location: 'cpu', data: values }), addressOf(values))
  t.is(c.keyedAdaptedPointer({}), null)
})

test('fromDLPack of a Tensor is unaffected (the table is an addition)', (t) => {
  const tensor = Tensor.from(new Float32Array([1, 2]))
  t.is(fromDLPack(tensor).dataPointer, tensor.dataPointer)
})

test('the header validation helper: extent, overflow and shape checks', (t) => {
  const ok = c.extentOf({ shape: [2n, 3n], strides: [3n, 1n] })
  t.deepEqual(ok, { numel: 6n, minOffset: 0n, maxOffset: 5n, spanBytes: 24n, contiguous: true })
  t.deepEqual(c.extentOf({ shape: [2n, 3n], strides: null }), ok, 'NULL strides are row-major')
  t.deepEqual(c.extentOf({ shape: [3n, 2n], strides: [1n, 3n] }), { numel: 6n, minOffset: 0n, maxOffset: 5n, spanBytes: 24n, contiguous: false })
  t.deepEqual(c.extentOf({ shape: [4n], strides: [-1n], data: 0x1000n, byteOffset: 12n }), { numel: 4n, minOffset: -3n, maxOffset: 0n, spanBytes: 16n, contiguous: false })
  t.deepEqual(c.extentOf({ shape: [0n, 5n], strides: [5n, 1n] }), { numel: 0n, minOffset: 0n, maxOffset: 0n, spanBytes: 0n, contiguous: true })
  t.is(c.extentOf({ shape: [-1n] }), 'ERR_DLPACK_SHAPE')
  t.is(c.extentOf({ shape: [1n << 62n, 4n] }), 'ERR_DLPACK_OVERFLOW', 'numel overflows int64')
  t.is(c.extentOf({ shape: [2n], strides: [1n << 62n] }), 'ERR_DLPACK_OVERFLOW', 'span bytes overflow')
  t.is(c.extentOf({ shape: [2n], strides: [-(1n << 63n)] }), 'ERR_DLPACK_OVERFLOW', 'INT64_MIN stride')
  // Import's codes (crates/napi-dlpack/tests/fuzz_validation.rs compares every verdict).
  t.is(c.extentOf({ shape: [4n], strides: [-1n], data: 0x4n }), 'ERR_DLPACK_BYTE_OFFSET', 'below address 0')
  t.is(c.extentOf({ shape: [4n], data: 0xffff_ffff_ffff_fff0n }), 'ERR_DLPACK_BYTE_OFFSET', 'past the address space')
  t.is(c.extentOf({ shape: [1n], data: 0x10n, byteOffset: 0xffff_ffff_ffff_fff8n }), 'ERR_DLPACK_BYTE_OFFSET')
  t.is(c.extentOf({ shape: [0n], data: 0x10n, byteOffset: 0xffff_ffff_ffff_fff8n }), 'ERR_DLPACK_BYTE_OFFSET', 'even when empty, as import')
  t.is(c.extentOf({ shape: [1n], data: 0n }), 'ERR_DLPACK_NULL_DATA')
  t.is(c.extentOf({ shape: [2n], bits: 4 }), 'ERR_DLPACK_DTYPE')
  t.is(c.extentOf({ shape: new Array(65).fill(1n) }), 'ERR_DLPACK_NDIM')
  // A size-1 dimension addresses nothing whatever its stride (import accepts it).
  t.deepEqual(c.extentOf({ shape: [1n], strides: [-(1n << 63n)] }), { numel: 1n, minOffset: 0n, maxOffset: 0n, spanBytes: 4n, contiguous: true })
  // Flags are honoured: padded sub-byte floats are one byte per element.
  t.deepEqual(c.extentOf({ shape: [3n], code: 17, bits: 4, flags: 4 }), { numel: 3n, minOffset: 0n, maxOffset: 2n, spanBytes: 3n, contiguous: true })
  t.deepEqual(c.extentOf({ shape: [3n], code: 15, bits: 6, flags: 4 }), { numel: 3n, minOffset: 0n, maxOffset: 2n, spanBytes: 3n, contiguous: true })
  t.is(c.extentOf({ shape: [3n], code: 17, bits: 4 }), 'ERR_DLPACK_DTYPE', 'packed fp4 is refused')
  // The dtype code, lanes and device checks of import.
  t.is(c.extentOf({ shape: [2n], lanes: 2 }), 'ERR_DLPACK_DTYPE', 'vector lanes')
  t.is(c.extentOf({ shape: [2n], code: 3, bits: 64 }), 'ERR_DLPACK_DTYPE', 'opaque handles')
  t.is(c.extentOf({ shape: [2n], code: 2, bits: 8 }), 'ERR_DLPACK_DTYPE', 'no 8-bit kDLFloat')
  t.is(c.extentOf({ shape: [2n], code: 99, bits: 8 }), 'ERR_DLPACK_DTYPE', 'unknown code')
  t.is(c.extentOf({ shape: [2n], deviceType: 5 }), 'ERR_DLPACK_DEVICE', 'unassigned device type')
  t.is(c.extentOf({ shape: [2n], deviceType: 2, deviceId: -1 }), 'ERR_DLPACK_DEVICE', 'negative device id')
  t.is(c.extentOf({ shape: [2n], misaligned: 'shape' }), 'ERR_DLPACK_INVALID_LAYOUT')
  t.is(c.extentOf({ shape: [2n], strides: [1n], misaligned: 'strides' }), 'ERR_DLPACK_INVALID_LAYOUT')
  // CUDA pointers are addresses too; OpenCL's data is a handle (no address arithmetic).
  t.is(c.extentOf({ shape: [4n], strides: [-1n], data: 0x4n, deviceType: 2 }), 'ERR_DLPACK_BYTE_OFFSET')
  t.like(c.extentOf({ shape: [4n], strides: [-1n], data: 0x4n, deviceType: 4 }), { numel: 4n, minOffset: -3n })
})

test('workers: each thread installs its own table; borrowing, returning and typed arguments work there and at exit', async (t) => {
  const code = `
    const { parentPort } = require('node:worker_threads')
    const { Tensor } = require(${JSON.stringify(join(here, '..', '..', 'dist', 'index.js'))})
    const c = require(${JSON.stringify(addonPath)})
    const typed = require(${JSON.stringify(join(here, '..', '..', 'target', 'consumer-addon', 'consumer_addon.node'))})
    const tensor = Tensor.from(new Float32Array([1, 2, 3]))
    const made = c.makeTensor(3, false)
    parentPort.postMessage({
      sum: c.borrowSum(tensor).sum,
      same: c.borrowSum(tensor).pointer === tensor.dataPointer,
      made: made instanceof Tensor ? Array.from(made.toTypedArray()) : null,
      borrowed: typed.inspect(tensor).borrowed,
      result: typed.matrix(1, 2, 'float32') instanceof Tensor,
    })`
  for (let i = 0; i < 2; i++) {
    const worker = new Worker(code, { eval: true })
    const exited = new Promise((resolve) => worker.once('exit', resolve))
    const message = await new Promise((resolve, reject) => {
      worker.once('message', resolve)
      worker.once('error', reject)
    })
    t.deepEqual(message, { sum: 6, same: true, made: [0, 1, 2], borrowed: true, result: true })
    t.is(await exited, 0)
  }
  // The main thread's table still works after the workers' environments went away.
  t.is(c.borrowSum(Tensor.from(new Float32Array([4]))).sum, 4)
})

test.serial('a C addon takes library tensors through the library adapter (header part 4): same memory, released at once, refusals coded', async (t) => {
  await drainGarbage()
  const live = () => native.nativeStats().liveStorages
  const values = new Float32Array([1, 2, 3])
  const ortLike = { type: 'float32', dims: [3], location: 'cpu', data: values }
  const before = live()
  t.deepEqual(c.adaptedPointer(ortLike), { pointer: addressOf(values), readonly: false })
  t.is(live(), before, 'the capsule was consumed and its deleter ran')
  // A tfjs-like tensor (its array shared with other tfjs tensors) arrives READ_ONLY, as fromDLPack makes it.
  const shared = new Float32Array([4, 5])
  const tfLike = { dtype: 'float32', shape: [2], isDisposed: false, dataSync: () => shared }
  t.deepEqual(c.adaptedPointer(tfLike), { pointer: addressOf(shared), readonly: true })
  // Not a library object: no capsule.
  t.is(c.adaptedPointer({}), null)
  t.is(c.adaptedPointer(42), null)
  t.is(c.adaptedPointer(Object.create(null)), null)
  // Recognised but refused: the adapter's coded error reaches JS through the C addon.
  t.is(codeOf(() => c.adaptedPointer({ ...ortLike, location: 'gpu-buffer' })), 'ERR_DLPACK_NOT_CPU')
  t.is(live(), before)
})
