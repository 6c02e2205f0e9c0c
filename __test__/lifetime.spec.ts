import { once } from 'node:events'
import { fileURLToPath } from 'node:url'
import { Worker } from 'node:worker_threads'

import test from 'ava'

import { native } from '../dist/native.js'
import { Tensor, fromDLPack } from '../dist/index.js'
import { drainGarbage, gcUntil } from './helpers.js'


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

test.serial('tensors created in a worker are released when the worker exits', async (t) => {
  await drainGarbage()
  const before = native.nativeStats().liveStorages
  const worker = new Worker(fileURLToPath(new URL('./fixtures/worker-tensors.mjs', import.meta.url)), {
    workerData: { count: 20 },
  })
  const [message] = (await once(worker, 'message')) as [{ made: number; live: number }]
  t.is(message.made, 20)
  t.true(message.live >= before + 20, 'the worker holds its storages while it runs')
  await once(worker, 'exit')
  t.true(await gcUntil(() => native.nativeStats().liveStorages <= before), `live: ${native.nativeStats().liveStorages}`)
})
