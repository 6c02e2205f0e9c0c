// DLPack stream values and stream hand-overs: which values are refused, the consumer's stream
// made to wait for our work (and ours for the producer's), and the driver calls one exchange
// costs (at most one event record and one stream wait, no host sync).
//
// Runs in the settings of scripts/test.mjs (the fake driver, a real GPU, no driver, a driver
// without devices; see __test__/harness/fake-cuda.ts and setting.spec.ts, which checks that the
// setting is the one NAPI_DLPACK_CUDA_EXPECT names).

import test from 'ava'

import { BufferError, type DLPackCapsule, DLPackTypeError, fromDLPack, isCapsuleConsumed, Tensor } from '../../dist/index.js'
import { available, control, fakeLoaded, peer, bytesOf, floats, deferred, measure } from '../harness/fake-cuda.js'
import { throwsCode } from '../harness/helpers.js'

/** The loaded libcuda is the fake, with a device (see __test__/harness/fake-cuda.ts). */
const fake = available && fakeLoaded
const fakeOnly = fake ? test.serial : test.serial.skip

/** The elements of a (number-valued) tensor, copied to the host. */
const values = (tensor: Tensor) => Array.from(tensor.to('cpu').data as ArrayLike<number>)

// Registered (as skipped) without a usable driver too: a spec without tests fails in ava.
const withDriver = available ? test.serial : test.serial.skip
const p = peer!

withDriver('stream values: 0 and other invalid values are refused; -1, 1, 2 and handles accepted', (t) => {
  const x = Tensor.zeros([4], 'float32', { device: 'cuda:0' })
  for (const stream of [0, 0n, -2n, -5, 2n ** 64n, -(2n ** 64n)]) {
    throwsCode(t, () => x.__dlpack__({ stream }), 'ERR_DLPACK_STREAM', BufferError, `stream ${String(stream)}`)
  }
  for (const stream of [1.5, Number.MAX_SAFE_INTEGER + 2, 'x', {}] as unknown as bigint[]) {
    throwsCode(t, () => x.__dlpack__({ stream }), 'ERR_DLPACK_INVALID_ARGUMENT', DLPackTypeError, `stream ${String(stream)}`)
  }
  const s = p.createStream()
  for (const stream of [undefined, null, -1, -1n, 1, 1n, 2, 2n, s, Number(s)]) {
    const seen = p.consume(x.__dlpack__({ stream }), { read: true })
    t.is(seen.data, x.dataPointer, `stream ${String(stream)}`)
  }
  // fromDLPack refuses a bad stream before consuming the capsule.
  const capsule = x.__dlpack__()
  throwsCode(t, () => fromDLPack(capsule, { stream: 0n }), 'ERR_DLPACK_STREAM', BufferError)
  t.false(isCapsuleConsumed(capsule))
  t.is(fromDLPack(capsule, { stream: s }).dataPointer, x.dataPointer)
  // fromDLPack passes the consumer's stream to a producer's __dlpack__.
  const asked: unknown[] = []
  const producer = {
    __dlpack__(options?: { stream?: unknown }) {
      asked.push(options?.stream)
      return x.__dlpack__(options as never)
    },
    __dlpack_device__: () => [2, 0] as const,
  }
  fromDLPack(producer, { stream: s })
  fromDLPack(producer, { stream: -1n })
  fromDLPack(producer)
  t.deepEqual(asked, [s, -1n, undefined])
  p.destroyStream(s)
})

fakeOnly('stream hand-over (fake, deferred): the consumer stream waits for our write; without the wait it reads stale data', async (t) => {
  const s = p.createStream()
  try {
    await deferred(() => {
      // Our producer, a foreign consumer on its own non-blocking stream.
      const x = Tensor.from(new Float32Array([1, 2, 3, 4])).to('cuda:0') // enqueued, not run yet
      t.true(control!.pendingOps() > 0, 'the write is still pending')
      t.deepEqual(floats(p.consume(x.__dlpack__({ stream: s }), { stream: s, read: true }).bytes!), [1, 2, 3, 4])
      for (const stream of [2n, 1n, undefined]) {
        const y = Tensor.from(new Float32Array([5, 6, 7, 8])).to('cuda:0')
        // The consumer reads on the stream it named.
        const read = p.consume(y.__dlpack__({ stream }), { stream: stream ?? 1n, read: true })
        t.deepEqual(floats(read.bytes!), [5, 6, 7, 8], `stream ${String(stream)}`)
      }
      // Negative control: -1 means "no synchronisation"; the consumer stream runs ahead of the
      // pending write and sees the fake's fill pattern, not the data.
      const z = Tensor.from(new Float32Array([1, 2, 3, 4])).to('cuda:0')
      const stale = p.consume(z.__dlpack__({ stream: -1n }), { stream: s, read: true }).bytes!
      t.true(stale.every((byte) => byte === 0xa5), `stale: ${Array.from(stale).join(',')}`)
      // ...while our own later read of it is ordered on our stream and correct.
      t.deepEqual(Array.from(z.to('cpu').data), [1, 2, 3, 4])
      // fromDLPack(tensor, { stream }) makes that stream wait too (no capsule seen by the user).
      const w = Tensor.from(new Float32Array([4, 3, 2, 1])).to('cuda:0')
      const shared = fromDLPack(w, { stream: s })
      t.is(shared.dataPointer, w.dataPointer)
      t.deepEqual(floats(p.download(shared.dataPointer, 16, s)), [4, 3, 2, 1])
    })
  } finally {
    p.destroyStream(s)
  }
})

fakeOnly('stream hand-over (fake, deferred): importing waits for the producer stream it was given', async (t) => {
  const producerStream = p.createStream()
  const consumerStream = p.createStream()
  /** A foreign producer that wrote asynchronously on its own stream and syncs like DLPack says. */
  const producer = (values: number[]) => {
    const ptr = p.alloc(values.length * 4)
    p.uploadAsync(ptr, new Float32Array(values), producerStream)
    return {
      __dlpack__(options?: { stream?: bigint | number | null }) {
        const stream = options?.stream
        if (stream !== -1n && stream !== -1) p.syncStreams(producerStream, BigInt(stream ?? 1n))
        return p.makeTensor({ ptr, shape: [values.length] })
      },
      __dlpack_device__: () => [2, 0] as const,
    }
  }
  try {
    await deferred(() => {
      t.deepEqual(values(fromDLPack(producer([1, 2, 3]))), [1, 2, 3], 'unset: legacy stream')
      t.deepEqual(values(fromDLPack(producer([4, 5, 6]), { stream: 1n })), [4, 5, 6], 'legacy')
      // A consumer stream of the user's: the producer syncs into it, and our stream waits on it.
      t.deepEqual(values(fromDLPack(producer([7, 8, 9]), { stream: consumerStream })), [7, 8, 9], 'custom stream')
      t.deepEqual(values(fromDLPack(producer([3, 2, 1]), { stream: 2n })), [3, 2, 1], 'per-thread stream')
      // Negative control: -1 skips every synchronisation and our read is stale.
      const stale = bytesOf(fromDLPack(producer([1, 1, 1]), { stream: -1n }).to('cpu').data)
      t.true(stale.every((byte) => byte === 0xa5), `stale: ${Array.from(stale).join(',')}`)
    })
  } finally {
    p.destroyStream(producerStream)
    p.destroyStream(consumerStream)
  }
})

fakeOnly('driver calls per exchange (fake): at most one event record and one stream wait, no host sync', async (t) => {
  const x = Tensor.from(new Float32Array([1, 2, 3, 4])).to('cuda:0')
  const s = p.createStream()
  p.consume(x.__dlpack__({ stream: s })) // warm-up: creates the one reusable event
  const rows: string[] = []
  const check = (what: string, result: { counts: Record<string, number>; hostSyncs: number }, waits: number) => {
    const { counts, hostSyncs } = result
    rows.push(`${what}: ${JSON.stringify(counts)} hostSyncs=${hostSyncs}`)
    t.is(counts.cuEventRecord ?? 0, waits, `${what}: cuEventRecord`)
    t.is(counts.cuStreamWaitEvent ?? 0, waits, `${what}: cuStreamWaitEvent`)
    t.is(counts.cuEventCreate ?? 0, 0, `${what}: no new event`)
    t.is(hostSyncs, 0, `${what}: host synchronisations`)
    for (const name of ['cuStreamSynchronize', 'cuEventSynchronize', 'cuCtxSynchronize', 'cuMemAllocAsync', 'cuMemAlloc_v2']) {
      t.is(counts[name] ?? 0, 0, `${what}: ${name}`)
    }
  }
  for (const [label, stream, waits] of [
    ['unset', undefined, 0],
    ['1n', 1n, 0],
    ['-1n', -1n, 0],
    ['2n', 2n, 1],
    ['handle', s, 1],
  ] as const) {
    let capsule: DLPackCapsule | undefined
    check(`export, stream ${label}`, await measure(() => (capsule = x.__dlpack__({ stream }))), waits)
    check(`import of our export, stream ${label}`, await measure(() => fromDLPack(capsule!, { stream })), 0)
    const ptr = p.alloc(16)
    const foreign = p.makeTensor({ ptr, shape: [4] })
    const imported = await measure(() => fromDLPack(foreign, { stream }))
    check(`import of a foreign capsule, stream ${label}`, imported, waits)
    t.is(imported.counts.cuPointerGetAttributes, 1)
  }
  t.log(rows.join('\n'))
  p.destroyStream(s)
})
