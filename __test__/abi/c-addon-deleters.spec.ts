// napi-dlpack against the plain C addon: every C deleter runs exactly once, on every path
// (consumed, collected unconsumed, disposed, double consume, refusals), at Worker teardown
// (natural end, process.exit, terminate), and from another thread.
//
// Runs in both modes: with external ArrayBuffers (zero-copy import of C memory) and with
// NAPI_DLPACK_NO_EXTERNAL_BUFFERS=1 (Electron mode: C memory is copied at import, and the C
// deleter runs right away). JS memory is zero-copy to C in both. The C addon and what these
// specs share: __test__/harness/c-addon.ts.
import { Worker } from 'node:worker_threads'

import test from 'ava'

import {
  CapsuleError,
  InvalidTensorError,
  Tensor,
  externalBuffersAllowed,
  fromDLPack,
  isCapsuleConsumed,
} from '../../dist/index.js'
import { c, cAddonPath } from '../harness/c-addon.js'
import { drainGarbage, finalizesExternalsAtWorkerExit, gcUntil, runtime, throwsCode } from '../harness/helpers.js'

const zeroCopy = externalBuffersAllowed()

// ---------------------------------------------------------------------------------------------
// Deleter exactly once

for (const versioned of [true, false]) {
  const tag = versioned ? 'versioned' : 'legacy'

  test.serial(`deleter (${tag}): consumed, then disposed`, async (t) => {
    await drainGarbage()
    const before = c.deleterCalls()
    const tensor = fromDLPack(c.makeTensor({ shape: [8], versioned }))
    t.is(c.deleterCalls(), zeroCopy ? before : before + 1)
    t.is(tensor.data.length, 8)
    tensor.dispose()
    t.is(c.deleterCalls(), before + 1)
    tensor.dispose()
    t.is(c.deleterCalls(), before + 1, 'a second dispose is a no-op')
    await drainGarbage()
    t.is(c.deleterCalls(), before + 1)
  })

  test.serial(`deleter (${tag}): two JS tensors sharing one import release once, after the last`, async (t) => {
    await drainGarbage()
    const before = c.deleterCalls()
    const a = fromDLPack(c.makeTensor({ shape: [8], versioned }))
    const b = fromDLPack(a)
    t.is(b.dataPointer, a.dataPointer)
    a.dispose()
    t.is(c.deleterCalls(), zeroCopy ? before : before + 1)
    t.is((b.toArray() as unknown[]).length, 8)
    b.dispose()
    t.is(c.deleterCalls(), before + 1)
  })

  for (const touchData of [false, true]) {
    test.serial(`deleter (${tag}): consumed, tensor dropped and collected${touchData ? ' (data view taken)' : ''}`, async (t) => {
      await drainGarbage()
      const before = c.deleterCalls()
      ;(() => {
        const tensor = fromDLPack(c.makeTensor({ shape: [64], versioned }))
        if (touchData) t.is(tensor.data[63], 63)
      })()
      if (zeroCopy) {
        t.true(await gcUntil(() => c.deleterCalls() > before), 'deleter not called after GC')
      } else {
        t.is(c.deleterCalls(), before + 1, 'released at import (copy)')
      }
      await drainGarbage()
      t.is(c.deleterCalls(), before + 1)
    })
  }

  test.serial(`deleter (${tag}): a re-exported capsule that is never consumed keeps C memory until collected`, async (t) => {
    await drainGarbage()
    const before = c.deleterCalls()
    const tensor = fromDLPack(c.makeTensor({ shape: [4], versioned }))
    ;(() => {
      tensor.__dlpack__()
    })()
    tensor.dispose()
    if (zeroCopy) {
      t.is(c.deleterCalls(), before, 'the capsule still owns an export')
      t.true(await gcUntil(() => c.deleterCalls() > before), 'deleter not called after the capsule was collected')
    }
    await drainGarbage()
    t.is(c.deleterCalls(), before + 1)
  })

  test.serial(`deleter (${tag}): a capsule never consumed is released when collected`, async (t) => {
    await drainGarbage()
    const before = c.deleterCalls()
    ;(() => {
      c.makeTensor({ shape: [16], versioned })
    })()
    t.true(await gcUntil(() => c.deleterCalls() > before), 'deleter not called after GC')
    await drainGarbage()
    t.is(c.deleterCalls(), before + 1)
  })

  test.serial(`deleter (${tag}): double consume is rejected, one deleter call in all`, async (t) => {
    await drainGarbage()
    const before = c.deleterCalls()
    const capsule = c.makeTensor({ shape: [2], versioned })
    const tensor = fromDLPack(capsule)
    throwsCode(t, () => fromDLPack(capsule), 'ERR_DLPACK_CAPSULE_CONSUMED', CapsuleError)
    throwsCode(t, () => fromDLPack(capsule, { copy: true }), 'ERR_DLPACK_CAPSULE_CONSUMED', CapsuleError)
    t.throws(() => c.consume(capsule), { code: 'ERR_DLPACK_CAPSULE_CONSUMED' } as never)
    t.is(c.deleterCalls(), zeroCopy ? before : before + 1)
    tensor.dispose()
    await drainGarbage()
    t.is(c.deleterCalls(), before + 1)
  })

  test.serial(`deleter (${tag}): C consumed first, JS import rejected`, async (t) => {
    await drainGarbage()
    const before = c.deleterCalls()
    const capsule = c.makeTensor({ shape: [2], versioned })
    const held = c.consume(capsule)
    throwsCode(t, () => fromDLPack(capsule), 'ERR_DLPACK_CAPSULE_CONSUMED', CapsuleError)
    t.is(c.deleterCalls(), before)
    t.true(c.release(held))
    t.is(c.deleterCalls(), before + 1)
  })

  test.serial(`deleter (${tag}): failed validation releases the tensor once, at the throw`, async (t) => {
    await drainGarbage()
    const before = c.deleterCalls()
    const capsule = c.makeTensor({ shape: [-2], versioned })
    throwsCode(t, () => fromDLPack(capsule), 'ERR_DLPACK_SHAPE', InvalidTensorError)
    t.is(c.deleterCalls(), before + 1)
    t.true(isCapsuleConsumed(capsule))
    throwsCode(t, () => fromDLPack(capsule), 'ERR_DLPACK_CAPSULE_CONSUMED', CapsuleError)
    await drainGarbage()
    t.is(c.deleterCalls(), before + 1)
  })

  test.serial(`deleter (${tag}): a device refusal leaves the capsule unconsumed; it is released once later`, async (t) => {
    await drainGarbage()
    const before = c.deleterCalls()
    const capsule = c.makeTensor({ shape: [2], versioned })
    throwsCode(t, () => fromDLPack(capsule, { device: [2, 0] }), 'ERR_DLPACK_DEVICE')
    // The device is read in place (docs/protocol.md §1.3): nothing was consumed or released.
    t.false(c.isConsumed(capsule))
    t.is(c.deleterCalls(), before)
    fromDLPack(capsule).dispose()
    t.is(c.deleterCalls(), before + 1)
  })
}

test.serial('deleter: a NULL deleter is allowed and nothing is counted', async (t) => {
  await drainGarbage()
  const before = c.deleterCalls()
  const tensor = fromDLPack(c.makeTensor({ shape: [3], versioned: true, nullDeleter: true }))
  t.deepEqual(tensor.toArray(), [0, 1, 2])
  tensor.dispose()
  t.is(c.deleterCalls(), before)
})

// ---------------------------------------------------------------------------------------------
// Worker teardown

for (const exit of ['natural', 'process.exit', 'terminate'] as const) {
  for (const producerHook of [false, true]) {
    const title = `worker (${exit}${producerHook ? ', C producer with a teardown hook' : ''})`
    test.serial(`${title}: deleters of imported and unconsumed C tensors run at env teardown`, async (t) => {
      await drainGarbage()
      const before = c.deleterCalls()
      const imported = 5
      const reexported = 2
      const unconsumed = 3
      const ours = imported + reexported
      const worker = new Worker(new URL('../harness/workers/c-addon-worker.mjs', import.meta.url), {
        workerData: { addonPath: cAddonPath, imported, reexported, unconsumed, exit, producerHook },
      })
      let report: { made: number; deletedBeforeExit: number; externalBuffers: boolean; isCopy: boolean[] } | undefined
      worker.on('message', (message) => {
        report = message
        if (exit === 'terminate') void worker.terminate()
      })
      const code = await new Promise<number>((resolve, reject) => {
        worker.once('error', reject)
        worker.once('exit', resolve)
      })
      t.is(code, exit === 'terminate' ? 1 : 0)
      t.truthy(report, 'the worker reported before exiting')
      t.is(report!.made, ours + unconsumed)
      t.is(report!.externalBuffers, zeroCopy, 'workers run in the same mode')
      t.deepEqual(report!.isCopy, Array(imported).fill(!zeroCopy))
      t.is(report!.deletedBeforeExit, zeroCopy ? 0 : ours)
      // Our tensors (the imports, and our capsules re-exporting C tensors) are released at
      // teardown in every runtime. The C addon's unconsumed capsules are its own: released by
      // its finalizers where the runtime runs them at teardown (Node), or by its own cleanup
      // hook. Bun and Deno run neither finalizer, so without the hook those tensors are never
      // released there: a documented limitation.
      const expected = finalizesExternalsAtWorkerExit || producerHook ? ours + unconsumed : ours
      // Node has run them all by the 'exit' event; elsewhere the last holders (external
      // ArrayBuffers' backing stores) may be freed a little later.
      if (runtime !== 'node') await gcUntil(() => c.deleterCalls() - before >= expected)
      t.is(c.deleterCalls() - before, expected, 'every tensor made in the worker was released exactly once')
      await drainGarbage()
      t.is(c.deleterCalls() - before, expected)
    })
  }
}

test.serial('deleter on another thread: a JS-memory export released by a C worker thread frees the buffer', async (t) => {
  // DLPack deleters may run on any thread. Ours then hands the JS reference to the owning
  // thread (a threadsafe-function queue); the buffer must become collectable, and nothing may
  // touch Node-API off-thread (which would crash).
  let collected = 0
  const registry = new FinalizationRegistry(() => {
    collected += 1
  })
  const made = 8
  ;(() => {
    for (let i = 0; i < made; i++) {
      const buffer = new ArrayBuffer(64)
      registry.register(buffer, i)
      const tensor = Tensor.from(new Float32Array(buffer))
      const held = c.consume(tensor.__dlpack__())
      tensor.dispose()
      t.true(c.releaseOnThread(held), 'the deleter ran on the other thread')
      t.false(c.releaseOnThread(held), 'and only once')
    }
  })()
  // Bun's collector scans the native stack conservatively, so a stale stack slot may pin one of
  // the buffers (seen: 7 of 8). Every buffer whose reference we failed to release would stay,
  // so all but that one must go there; everywhere else all of them.
  const needed = runtime === 'bun' ? made - 1 : made
  t.true(await gcUntil(() => collected >= needed), `collected ${collected} of ${made}`)
})
