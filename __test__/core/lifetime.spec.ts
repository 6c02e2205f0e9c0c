import { once } from 'node:events'
import { fileURLToPath } from 'node:url'
import { Worker } from 'node:worker_threads'

import test from 'ava'

import { native } from '../../dist/native.js'
import { Tensor, fromDLPack } from '../../dist/index.js'
import { drainGarbage, gcUntil } from '../harness/helpers.js'


test.serial('dropped capsules, imports and copies release every storage (leak check)', async (t) => {
  await drainGarbage()
  const before = native.nativeStats().liveStorages
  ;(() => {
    for (let i = 0; i < 50; i++) {
      const tensor = Tensor.zeros([16])
      tensor.__dlpack__() // dropped unconsumed
      fromDLPack(tensor.__dlpack__()) // consumed, dropped
      fromDLPack(tensor.__dlpack__({ copy: true })).dispose() // copied export, disposed
      fromDLPack(tensor, { copy: true }).data // copied, viewed, dropped
    }
  })()
  t.true(native.nativeStats().liveStorages > before, 'the loop created storages')
  // Nothing above is reachable any more, so everything it made must go.
  t.true(await gcUntil(() => native.nativeStats().liveStorages <= before), `live: ${native.nativeStats().liveStorages}, before: ${before}`)
})

test.serial('an exported capsule keeps JS memory alive until it is consumed and dropped', async (t) => {
  let collected = false
  const registry = new FinalizationRegistry(() => {
    collected = true
  })
  let capsule: unknown = (() => {
    const buffer = new ArrayBuffer(64)
    registry.register(buffer, 'buffer')
    const tensor = Tensor.from(new Float32Array(buffer))
    const exported = tensor.__dlpack__()
    tensor.dispose()
    return exported
  })()
  await drainGarbage()
  await drainGarbage()
  t.false(collected, 'the ArrayBuffer must outlive the tensor while a capsule holds it')
  let imported: Tensor | undefined = fromDLPack(capsule as never)
  capsule = undefined
  await drainGarbage()
  t.false(collected, 'the import holds it now')
  t.is(imported.data.length, 16)
  imported.dispose()
  imported = undefined
  t.true(await gcUntil(() => collected), 'released once nothing holds it')
})

for (const exit of ['natural', 'terminate'] as const) {
  test.serial(`tensors created in a worker are released when the worker exits (${exit})`, async (t) => {
    await drainGarbage()
    const before = native.nativeStats().liveStorages
    const worker = new Worker(fileURLToPath(new URL('../harness/workers/worker-tensors.mjs', import.meta.url)), {
      workerData: { count: 20, exit },
    })
    // Listen for 'exit' before awaiting the message: a worker that exits right after posting
    // has its message and its exit emitted in the same tick, so a listener attached after the
    // message promise resolves would miss the exit and hang.
    const exited = once(worker, 'exit')
    const [message] = (await once(worker, 'message')) as [{ made: number; live: number }]
    t.is(message.made, 20)
    t.true(message.live >= before + 20, 'the worker holds its storages while it runs')
    if (exit === 'terminate') await worker.terminate()
    const [code] = (await exited) as [number]
    t.is(code, exit === 'terminate' ? 1 : 0)
    t.true(await gcUntil(() => native.nativeStats().liveStorages <= before), `live: ${native.nativeStats().liveStorages}`)
  })
}

/** The native handle behind a tensor (`_handle()` is internal, so not in the public types). */
const handleOf = (tensor: Tensor) => (tensor as unknown as { _handle(): unknown })._handle()

test.serial('our own capsule coming back becomes the new tensor handle, and is freed exactly once', async (t) => {
  await drainGarbage()
  const before = native.nativeStats().liveStorages
  const source = Tensor.from(new Float32Array([1, 2, 3, 4]))
  const capsule = source.__dlpack__()
  const imported = fromDLPack(capsule) as Tensor<'float32'>
  // The round trip made no second native handle: the consumed capsule serves as it.
  t.is(handleOf(imported), capsule)
  t.true(native.capsuleIsConsumed(capsule))
  t.is(native.dataPointer(handleOf(imported)), native.dataPointer(handleOf(source)))
  imported.data[1] = 20
  t.is(source.data[1], 20)
  // Consumed once: a second import is refused, and the tensor it backs keeps working.
  t.throws(() => fromDLPack(capsule), { code: 'ERR_DLPACK_CAPSULE_CONSUMED' })
  // Either side can go first.
  source.dispose()
  t.deepEqual(Array.from(imported.data), [1, 20, 3, 4])
  const again = fromDLPack(imported.__dlpack__()) as Tensor<'float32'>
  imported.dispose()
  t.deepEqual(Array.from(again.data), [1, 20, 3, 4])
  again.dispose()
  t.true(await gcUntil(() => native.nativeStats().liveStorages <= before), `live: ${native.nativeStats().liveStorages}, before: ${before}`)
})

test.serial('a capsule is a tensor handle only once this addon adopted it', (t) => {
  const source = Tensor.zeros([4])
  const capsule = source.__dlpack__()
  const code = (fn: () => unknown) => (t.throws(fn) as { code?: string }).code
  // Unconsumed: not a handle (and checking it does not consume it).
  t.is(code(() => native.exportCapsule(capsule)), 'ERR_DLPACK_INVALID_ARGUMENT')
  t.is(code(() => native.handleInfo(capsule)), 'ERR_DLPACK_INVALID_ARGUMENT')
  t.false(native.capsuleIsConsumed(capsule))
  // Consumed by the raw import without a JS Tensor around it: now it is the handle.
  const handle = native.importCapsule(capsule, 0, null)
  t.is(handle, capsule)
  t.deepEqual(native.handleInfo(handle).shape, [4])
  // Other values never are.
  t.is(code(() => native.handleInfo({})), 'ERR_DLPACK_INVALID_ARGUMENT')
  t.is(code(() => native.handleInfo(native.benchTaggedExternal())), 'ERR_DLPACK_INVALID_ARGUMENT')
  source.dispose()
})

test('the raw entry points check their arguments and throw coded errors', (t) => {
  const source = Tensor.zeros([2])
  const handle = handleOf(source)
  const code = (fn: () => unknown) => (t.throws(fn) as { code?: string }).code
  t.is(code(() => native.exportCapsule(handle, 'no' as never)), 'ERR_DLPACK_INVALID_ARGUMENT')
  t.is(code(() => native.exportCapsule(handle, false, 'x' as never)), 'ERR_DLPACK_INVALID_ARGUMENT')
  t.is(code(() => native.exportCapsule(undefined)), 'ERR_DLPACK_INVALID_ARGUMENT')
  const capsule = source.__dlpack__()
  t.is(code(() => native.importCapsule(capsule, 'x' as never, null)), 'ERR_DLPACK_INVALID_ARGUMENT')
  t.is(code(() => native.importCapsule(capsule, 7, null)), 'ERR_DLPACK_INVALID_ARGUMENT')
  t.is(code(() => native.importCapsule({}, 0, null)), 'ERR_DLPACK_NOT_A_CAPSULE')
  t.false(native.capsuleIsConsumed(capsule), 'bad arguments leave the capsule usable')
  t.is(code(() => native.handleInfoInto(handle, new Float64Array(3))), 'ERR_DLPACK_INVALID_ARGUMENT')
  t.is(code(() => native.handleInfoInto(handle, new Float32Array(200) as never)), 'ERR_DLPACK_INVALID_ARGUMENT')
  t.deepEqual(Array.from((fromDLPack(capsule) as Tensor<'float32'>).data), [0, 0])
})

test.serial("a handle id takes a slot owned by this thread's key and gives it back on dispose (every platform, no fixture)", (t) => {
  const liveSlots = () => (native.nativeStats() as { liveSlots: number }).liveSlots
  const before = liveSlots()
  const first = Tensor.from(new Float32Array(4))
  const id = first.id
  t.true(Number.isSafeInteger(id) && id >= 2 ** 24, 'generation above the slot bits')
  t.is(first.id, id, 'stable')
  t.is(liveSlots(), before + 1, "counted as this thread's: the owner key read back equal")
  first.dispose()
  t.is(liveSlots(), before, 'released by its owner thread (a key that changed would leak the slot)')
  const next = Tensor.from(new Float32Array(4))
  t.is(next.id % 2 ** 24, id % 2 ** 24, "this thread's freed slot is reused first")
  t.not(next.id, id, 'with a new generation')
  next.dispose()
})
