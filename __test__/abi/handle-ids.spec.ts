// Handle ids (docs/protocol.md §5.6, src/slots/): `t.id` (an exact integer) and `t.native` (an
// id external) name a slot in napi-dlpack's table. Borrowed by the crate's TensorArg (#[napi] and
// hot functions) and by a C consumer written from the header alone (__test__/native/exchange-c):
// pointer identity, writes seen in JS, READ_ONLY, aliasing, every stale path refused with
// ERR_TENSOR_STALE_ID and nothing read, the slot pinned by a borrow, every deleter exactly once.
// Runs in both modes (with NAPI_DLPACK_NO_EXTERNAL_BUFFERS=1: the Electron path).
import test from 'ava'

import { native } from '../../dist/native.js'
import { Tensor, TensorDisposedError, externalBuffersAllowed, fromDLPack } from '../../dist/index.js'
import { codeOf, drainGarbage, gcUntil, nativeFixture } from '../harness/helpers.js'

type Addon = typeof import('../../examples/consumer-addon/index.js')
interface ExchangeC {
  idBorrowSum(value: unknown): { sum: number; pointer: bigint; numel: number; contiguous: boolean; flags: number }
  idLentTwice(value: unknown): { same: boolean; pointer: bigint; numel: number; readOnly: boolean }
  borrowSum(value: unknown): { sum: number; pointer: bigint }
  borrowScale(value: unknown, factor: number): void
  borrowKeep(value: unknown): void
  keptSum(): number
  exportHold(value: unknown): bigint
  releaseHeld(): number
  deleterCalls(): number
  makeTensor(n: number, readonly: boolean): Tensor
}

const { addon } = nativeFixture<Addon>('consumer-addon', 'consumer_addon.node')
const { addon: c } = nativeFixture<ExchangeC>('exchange-c', 'exchange_c.node')

const zeroCopy = externalBuffersAllowed()
const slots = () => (native.nativeStats() as { liveSlots: number }).liveSlots
const STALE = 'ERR_TENSOR_STALE_ID'
/** An id's slot index (its low 24 bits). */
const slotOf = (id: number) => id % 2 ** 24

test('an id is an exact integer below 2^53, stable per handle, shared by tensors sharing the handle', (t) => {
  const tensor = Tensor.from(new Float32Array(4))
  const id = tensor.id
  t.true(Number.isSafeInteger(id) && id >= 2 ** 24, String(id))
  t.is(tensor.id, id)
  t.is(tensor.native, tensor.native, 'the external is made once')
  t.is(typeof tensor.native, 'object')
  const shared = fromDLPack(tensor)
  t.is(shared.id, id, 'fromDLPack(t) shares the handle, and its id')
  t.not(Tensor.from(new Float32Array(4)).id, id)
  // A tensor over our own capsule coming back (its handle is the adopted capsule) has an id too.
  const adopted = fromDLPack(Tensor.from(new Float32Array([3, 4])).__dlpack__())
  t.is(addon.inspect(adopted.native).shape[0], 2)
  t.is(c.idBorrowSum(adopted.id).sum, 7)
})

test('borrowed by id and by native: the same memory, writes seen in JS, through #[napi], hot and C consumers', (t) => {
  const data = new Float32Array([1, 2, 3, 4, 5, 6])
  const tensor = Tensor.from(data, [3, 2], { strides: [1, 3] })
  for (const handle of [tensor.id, tensor.native]) {
    for (const seen of [addon.inspect(handle as never), addon.inspectHot(handle as never)]) {
      t.true(seen.borrowed)
      t.is(seen.dataPointer, tensor.dataPointer)
      t.deepEqual(seen.shape, [3, 2])
      t.deepEqual(seen.strides, [1, 3])
      t.false(seen.readonly)
    }
  }
  addon.scaleInPlace(tensor.id as never, 2)
  addon.scaleHot(tensor.native, 2)
  c.borrowScale(tensor.id, 0.5)
  t.deepEqual([...data], [2, 4, 6, 8, 10, 12], 'strided writes by id are seen in JS')
  const contiguous = Tensor.from(new Float32Array([1, 2, 3]))
  for (const handle of [contiguous.id, contiguous.native]) {
    const borrowed = c.idBorrowSum(handle)
    t.is(borrowed.pointer, contiguous.dataPointer, 'the C consumer: zero-copy')
    t.deepEqual([borrowed.sum, borrowed.numel, borrowed.contiguous], [6, 3, true], 'the extent the producer handed over')
    t.is(c.borrowSum(handle).pointer, contiguous.dataPointer, 'the generic header borrow takes ids too')
  }
  t.is(addon.inspectOwned(contiguous.id as never).dataPointer, contiguous.dataPointer, 'an owning export by id')
  t.is(c.exportHold(contiguous.native), contiguous.dataPointer)
  t.is(c.releaseHeld(), 1)
})

test('borrow_id lends the producer record itself: two borrows are one record, read in place, and leave no pin', (t) => {
  const tensor = Tensor.from(new Float32Array([1, 2, 3, 4, 5, 6]), [2, 3])
  const frozen = Tensor.from(new Float32Array(2), [2], { readonly: true })
  const ids = [tensor.id, frozen.id]
  const liveBefore = slots()
  for (const value of [tensor.id, tensor.native]) {
    const lent = c.idLentTwice(value)
    t.true(lent.same, 'one record per slot, not a copy per borrow')
    t.is(lent.numel, 6)
    t.false(lent.readOnly)
    if (zeroCopy) t.is(lent.pointer, tensor.dataPointer)
  }
  t.true(c.idLentTwice(frozen.native).readOnly, 'the flags are in the record')
  tensor.dispose()
  t.is(slots(), liveBefore - 1, 'every borrow was released: the disposed tensor\'s slot is free at once')
  t.is(codeOf(() => c.idLentTwice(ids[0])), STALE, 'refused once disposed (NULL, coded)')
  frozen.dispose()
})

test('the first borrow by id marks JS memory untransferable, as every borrow does; a handle alone does not', (t) => {
  const control = new ArrayBuffer(16)
  const unborrowed = Tensor.from(new Float32Array(control))
  t.true(unborrowed.id > 0)
  structuredClone(control, { transfer: [control] })
  t.is(control.byteLength, 0, 'the control: an id alone leaves the buffer transferable')
  for (const handleOf of [(x: Tensor) => x.native, (x: Tensor) => x.id]) {
    const buffer = new ArrayBuffer(16)
    const tensor = Tensor.from(new Float32Array(buffer))
    addon.inspectHot(handleOf(tensor) as never)
    // Node 20 ignores a marked buffer in a transfer list; Node 21+ throws a DataCloneError.
    try {
      structuredClone(buffer, { transfer: [buffer] })
    } catch {}
    t.is(buffer.byteLength, 16, 'not transferred after the borrow')
    tensor.dispose()
  }
})

test('a number that is no id is ERR_DLPACK_INVALID_ARGUMENT (never rounded); an id read as a double', (t) => {
  const tensor = Tensor.from(new Float32Array(2))
  for (const value of [1.5, -1, 2 ** 53, NaN, Infinity, tensor.id + 0.5, 42, 0]) {
    t.is(codeOf(() => addon.inspect(value as never)), 'ERR_DLPACK_INVALID_ARGUMENT', String(value))
    t.is(codeOf(() => addon.inspectHot(value as never)), 'ERR_DLPACK_INVALID_ARGUMENT', String(value))
    t.is(codeOf(() => c.idBorrowSum(value)), 'ERR_DLPACK_INVALID_ARGUMENT', String(value))
  }
  // Another addon's external is not an id (a capsule, the exchange table): refused as before.
  t.is(codeOf(() => addon.inspect(native.benchTaggedExternal() as never)), 'ERR_DLPACK_NOT_A_CAPSULE')
})

test('READ_ONLY: ids of read-only tensors are lent for reading only', (t) => {
  const data = new Float32Array([1, 2])
  const readonly = Tensor.from(data, [2], { readonly: true })
  for (const handle of [readonly.id, readonly.native]) {
    t.true(addon.inspectHot(handle as never).readonly)
    t.is(codeOf(() => addon.scaleHot(handle as never, 2)), 'ERR_DLPACK_READ_ONLY')
    t.is(codeOf(() => addon.scaleInPlace(handle as never, 2)), 'ERR_DLPACK_READ_ONLY')
    t.is(codeOf(() => addon.addIntoHot(handle as never, Tensor.from(new Float32Array(2)))), 'ERR_DLPACK_READ_ONLY')
    t.is(codeOf(() => c.borrowScale(handle, 2)), 'ERR_DLPACK_READ_ONLY')
    t.is(c.idBorrowSum(handle).flags & 1, 1, 'the READ_ONLY flag')
  }
  t.deepEqual([...data], [1, 2])
})

test('aliasing: the same id twice, an id and its tensor, an id and the external, is ERR_DLPACK_ALIASED', (t) => {
  const values = new Float32Array([1, 2, 3, 4])
  const x = Tensor.from(values)
  const cases: Array<[string, () => readonly [unknown, unknown]]> = [
    ['the same id twice', () => [x.id, x.id]],
    ['an id and its Tensor', () => [x.id, x]],
    ['a Tensor and its id', () => [x, x.id]],
    ['an id and the external', () => [x.native, x.id]],
    ['an id and a view of its last three elements', () => [x.id, x.slice(0, 1).id]],
  ]
  for (const [name, make] of cases) {
    const [target, source] = make()
    t.is(codeOf(() => addon.addIntoHot(target as never, source as never)), 'ERR_DLPACK_ALIASED', `hot: ${name}`)
    t.is(codeOf(() => addon.addInto(target as never, source as never)), 'ERR_DLPACK_ALIASED', `#[napi]: ${name}`)
  }
  t.deepEqual([...values], [1, 2, 3, 4], 'nothing was written')
  t.deepEqual(addon.addIntoHot(x.id, Tensor.from(new Float32Array(4).fill(1)).id), [2, 3, 4, 5], 'the claims were given back')
})

test.serial('stale after dispose(): every consumer refuses the id and the external, coded, and reads nothing', async (t) => {
  await drainGarbage()
  const before = slots()
  const tensor = Tensor.from(new Float32Array([1, 2]))
  const { id, native: external } = tensor
  t.is(slots(), before + 1, 'the id took a slot')
  tensor.dispose()
  t.is(slots(), before, 'dispose() let go of it')
  for (const handle of [id, external]) {
    for (const call of [
      () => addon.inspect(handle as never),
      () => addon.inspectHot(handle as never),
      () => addon.inspectOwned(handle as never),
      () => c.idBorrowSum(handle),
      () => c.borrowSum(handle),
      () => c.exportHold(handle),
    ]) {
      t.is(codeOf(call), STALE)
    }
    const error = t.throws(() => addon.inspectHot(handle as never))
    t.true(error instanceof TensorDisposedError, 'the class of the code')
  }
  t.is(codeOf(() => tensor.id), 'ERR_TENSOR_DISPOSED', 'a disposed Tensor has no id')
  t.is(codeOf(() => tensor.native), 'ERR_TENSOR_DISPOSED')
})

test.serial('stale after GC: an id does not keep its tensor alive, and is refused once it is collected', async (t) => {
  const make = () => {
    const tensor = Tensor.from(new Float32Array([5, 6]))
    return { id: tensor.id, external: tensor.native }
  }
  const { id, external } = make()
  t.true(await gcUntil(() => codeOf(() => addon.inspectHot(id as never)) === STALE), 'collected')
  t.is(codeOf(() => addon.inspect(external as never)), STALE)
  t.is(codeOf(() => c.idBorrowSum(id)), STALE)
})

test.serial('stale after slot reuse: a million alloc/free cycles reuse one slot, and the first id stays refused', (t) => {
  const memory = new Float32Array([7])
  const first = Tensor.from(memory)
  const id = first.id
  first.dispose()
  // Through JS (a Tensor made, its id taken, disposed) a thousand times ...
  let last = 0
  for (let i = 0; i < 1000; i++) {
    const tensor = Tensor.from(memory)
    last = tensor.id
    tensor.dispose()
  }
  t.is(slotOf(last), slotOf(id), 'the same slot, reused')
  // ... and a million more natively (the same Handle::id and release, without Tensor.from's cost).
  const base = Tensor.from(memory)
  const handle = (base as unknown as { _handle(): unknown })._handle()
  const cycled = (native as unknown as { cycleHandleIds(handle: unknown, cycles: number): number }).cycleHandleIds(handle, 1_000_000)
  base.dispose()
  const newest = Tensor.from(memory)
  t.is(slotOf(newest.id), slotOf(id), 'still the same slot')
  t.true(newest.id > cycled && cycled > last && last > id, 'with a new generation each time')
  for (const stale of [id, last, cycled]) {
    t.is(codeOf(() => addon.inspectHot(stale as never)), STALE)
    t.is(codeOf(() => c.idBorrowSum(stale)), STALE)
  }
  t.is(addon.inspectHot(newest.id as never).dataPointer, newest.dataPointer)
  newest.dispose()
})

test.serial('a consumer keeps what it derived per slot: read back for the same tensor, never for the next one in the slot', (t) => {
  const first = Tensor.from(new Float32Array([1, 2, 3, 4, 5, 6]), [2, 3])
  const slot = slotOf(first.id)
  const seen = addon.inspectHot(first.native as never)
  t.deepEqual(addon.inspectHot(first.native as never), seen, 'the same view, borrowed again')
  t.deepEqual(seen.shape, [2, 3])
  first.dispose()
  // This thread's freed slot is the next one taken: a different tensor in the same slot.
  const next = Tensor.from(new Uint8Array([9, 8, 7, 6, 5]), [5], { readonly: true })
  t.is(slotOf(next.id), slot, 'the slot was reused')
  const view = addon.inspectHot(next.native as never)
  t.is(view.dtype, 'uint8')
  t.deepEqual(view.shape, [5])
  t.deepEqual(view.strides, [1])
  t.true(view.readonly)
  t.is(view.dataPointer, next.dataPointer, 'the new tensor, not what was kept for the old one')
  next.dispose()
})

test.serial('a borrow pins its slot: disposed during the call, the memory lives until the call ends; deleters once', async (t) => {
  await drainGarbage()
  // C memory (deleter counted). Without external buffers the import copies: the deleter has run
  // at once and only the storage tells.
  const owed = zeroCopy ? 1 : 0
  const before = c.deleterCalls()
  const target = c.makeTensor(4, false)
  const id = target.id
  // The second argument's __dlpack__ runs while the first is borrowed, and disposes it.
  const source = {
    __dlpack__: () => {
      target.dispose()
      return Tensor.from(new Float32Array([10, 10, 10, 10])).__dlpack__()
    },
  }
  t.is(c.deleterCalls(), before + 1 - owed)
  t.deepEqual(addon.addIntoHot(id as never, source as never), [10, 11, 12, 13], 'written through the pinned borrow')
  t.is(c.deleterCalls(), before + 1, 'released once, when the call let go')
  t.is(codeOf(() => addon.inspectHot(id as never)), STALE, 'and the id is stale')

  // A C consumer keeps a borrow by id past dispose(): the memory stays until it lets go.
  const kept = c.makeTensor(3, false)
  const keptExternal = kept.native
  c.borrowKeep(keptExternal)
  const slotsBefore = slots()
  kept.dispose()
  t.is(c.deleterCalls(), before + 2 - owed, 'pinned past dispose()')
  t.is(slots(), slotsBefore, 'the slot is held by the borrow')
  t.is(codeOf(() => c.idBorrowSum(keptExternal)), STALE, 'the id is refused at once')
  t.is(c.keptSum(), 3, 'the kept borrow still reads the memory (0 + 1 + 2)')
  t.is(c.deleterCalls(), before + 2, 'freed once, when the borrow ended')
  t.is(slots(), slotsBefore - 1)

  // Many borrows by id on every path leave no pin behind.
  const many = c.makeTensor(4, false)
  for (let i = 0; i < 1000; i++) addon.benchHot3(many.id as never, many.native as never, many)
  t.is(codeOf(() => addon.addIntoHot(many.id as never, 42 as never)), 'ERR_DLPACK_INVALID_ARGUMENT', 'a later argument failed')
  t.is(codeOf(() => addon.panicHot(many.id as never, true)), 'ERR_DLPACK_NAPI', 'the body panicked')
  many.dispose()
  t.is(c.deleterCalls(), before + 3, 'no borrow was left')
})
