// napi-dlpack against the plain C addon: hostile layouts (issue 10).
//
// Runs in both modes: with external ArrayBuffers (zero-copy import of C memory) and with
// NAPI_DLPACK_NO_EXTERNAL_BUFFERS=1 (Electron mode: C memory is copied at import, and the C
// deleter runs right away). JS memory is zero-copy to C in both. The C addon and what these
// specs share: __test__/harness/c-addon.ts.
import test, { type ExecutionContext } from 'ava'

import {
  fromDLPack,
  type DLPackCapsule,
} from '../../dist/index.js'
import { c } from '../harness/c-addon.js'
import { drainGarbage, nativeFixture } from '../harness/helpers.js'

// Hostile layouts (issue 10): the C producer hands over what a careless or future producer
// may, and the Rust consumers in this process (this package's addon, and the separately built
// example addon in examples/consumer-addon, which uses the crate's typed access) refuse it with
// a stable code, the C deleter running exactly once. Each refusal is a check that
// `npm run mutants` (scripts/mutants.mjs) removes one at a time: the fixtures are built so that
// without the check the import goes on, and an assertion here fails (not a crash).

interface HostileLayouts {
  makeMisalignedTensor(options: { versioned: boolean; offset: number }): DLPackCapsule
  makeRawTensor(options: {
    versioned: boolean
    shape: (number | bigint)[]
    strides: (number | bigint)[]
    misalign?: 'shape' | 'strides'
    shift?: number
  }): DLPackCapsule
  makePrefixOnlyMajor(major: number): DLPackCapsule
}

interface ConsumerExample {
  fwhtRowsInPlace(capsule: unknown): void
  countTrue(capsule: unknown): number
  describe(capsule: unknown): { shape: number[] }
}

const hostile = c as unknown as HostileLayouts
const consumer = nativeFixture<ConsumerExample>('consumer-addon', 'consumer_addon.node').addon
const BOOL = { code: 6, bits: 8, lanes: 1 }

/** `importer(make())` throws `code`, and the C deleter ran exactly once, at the throw. */
function refusedOnce(t: ExecutionContext, make: () => DLPackCapsule, importer: (capsule: DLPackCapsule) => unknown, code: string, what: string) {
  const before = c.deleterCalls()
  const capsule = make()
  const error = t.throws(() => importer(capsule), { instanceOf: Error }, what) as (Error & { code?: string }) | undefined
  t.is(error?.code, code, `${what}: ${String(error?.message)}`)
  t.is(c.deleterCalls(), before + 1, `${what}: the deleter ran once, at the refusal`)
  t.true(c.isConsumed(capsule), what)
}

/** Runs `body` (which makes `made` C tensors), then checks that collection calls no deleter
 * again: every C tensor was released exactly once. */
async function releasedOnce(t: ExecutionContext, made: number, body: () => void) {
  await drainGarbage()
  const before = c.deleterCalls()
  body()
  await drainGarbage()
  t.is(c.deleterCalls(), before + made, 'each C tensor released exactly once')
}

const importers: [string, (capsule: DLPackCapsule) => unknown][] = [
  ['fromDLPack', (capsule) => fromDLPack(capsule)],
  ['example addon', (capsule) => consumer.describe(capsule)],
]

for (const versioned of [true, false]) {
  const tag = versioned ? 'versioned' : 'legacy'

  test.serial(`hostile (${tag}): a misaligned managed struct is refused, its deleter called once`, async (t) => {
    // Offset 4 first: it keeps the pointer's low bit clear, so without the alignment check the
    // import would succeed and this assertion fail; offset 1 is the careless producer's case.
    const offsets = [4, 1]
    await releasedOnce(t, offsets.length * importers.length, () => {
      for (const offset of offsets) {
        for (const [name, importer] of importers) {
          refusedOnce(t, () => hostile.makeMisalignedTensor({ versioned, offset }), importer, 'ERR_DLPACK_MISALIGNED', `${name}, offset ${offset}`)
        }
      }
    })
  })

  test.serial(`hostile (${tag}): misaligned shape and strides pointers are refused`, async (t) => {
    await releasedOnce(t, 1 + 2 * 2 * importers.length, () => {
      // The same tensor with aligned arrays imports (the control).
      const tensor = fromDLPack(hostile.makeRawTensor({ versioned, shape: [2, 2], strides: [2, 1] }))
      t.deepEqual(tensor.toArray(), [[0, 1], [2, 3]])
      tensor.dispose()
      for (const misalign of ['shape', 'strides'] as const) {
        for (const shift of [4, 1]) {
          for (const [name, importer] of importers) {
            const make = () => hostile.makeRawTensor({ versioned, shape: [2, 2], strides: [2, 1], misalign, shift })
            refusedOnce(t, make, importer, 'ERR_DLPACK_INVALID_LAYOUT', `${name}, ${misalign} shifted by ${shift}`)
          }
        }
      }
    })
  })

  test.serial(`hostile (${tag}): stride extents that overflow int64 are refused`, async (t) => {
    // (dim - 1) * stride = 2^64 wraps to 0 in 64-bit arithmetic: lost, the overflow would make
    // the first case a one-element tensor, and views would read 2^32 elements past the
    // 64-byte buffer.
    const cases: [(number | bigint)[], (number | bigint)[]][] = [
      [[2n ** 32n + 1n], [2n ** 32n]],
      [[2n ** 32n + 1n], [-(2n ** 32n)]],
      [[2, 2n ** 32n + 1n], [1, 2n ** 32n]],
      [[3], [2n ** 62n]],
      [[2, 2], [2n ** 62n, 2n ** 62n]],
    ]
    await releasedOnce(t, 1 + cases.length * importers.length, () => {
      const control = fromDLPack(hostile.makeRawTensor({ versioned, shape: [4], strides: [4] }))
      t.deepEqual(control.toArray(), [0, 4, 8, 12])
      control.dispose()
      for (const [shape, strides] of cases) {
        for (const [name, importer] of importers) {
          const what = `${name}, shape ${shape} strides ${strides}`
          refusedOnce(t, () => hostile.makeRawTensor({ versioned, shape, strides }), importer, 'ERR_DLPACK_OVERFLOW', what)
        }
      }
    })
  })

  test.serial(`hostile (${tag}): misaligned float32 data is refused by the crate's typed access`, async (t) => {
    await releasedOnce(t, 2, () => {
      // The example addon writes in place through `as_mut_slice::<f32>`, which must refuse
      // data 2 bytes off alignment rather than hand out a misaligned slice.
      const make = () => c.makeTensor({ shape: [2, 4], byteOffset: 2, versioned })
      refusedOnce(t, make, (capsule) => consumer.fwhtRowsInPlace(capsule), 'ERR_DLPACK_MISALIGNED', 'fwhtRowsInPlace')
      // This package copies such data instead (flagged), so JS never sees a misaligned view.
      const tensor = fromDLPack(make())
      t.true(tensor.isCopy)
      t.deepEqual(tensor.toArray(), [[0, 1, 2, 3], [4, 5, 6, 7]])
      tensor.dispose()
    })
  })

  test.serial(`hostile (${tag}): bool bytes other than 0 and 1 are refused on both access paths`, async (t) => {
    await releasedOnce(t, 4, () => {
      // fill 'iota' gives non-float dtypes the bytes 0, 1, 2, ... over the data region.
      t.is(consumer.countTrue(c.makeTensor({ shape: [2], dtype: BOOL, versioned })), 1, 'bytes 0, 1')
      // Negative stride: elements at bytes 1, 0 (valid) or 2, 1, 0 (invalid), read through
      // the strided path.
      t.is(consumer.countTrue(c.makeTensor({ shape: [2], strides: [-1], dtype: BOOL, versioned })), 1, 'strided, bytes 1, 0')
      const contiguous = () => c.makeTensor({ shape: [4], dtype: BOOL, versioned })
      refusedOnce(t, contiguous, (capsule) => consumer.countTrue(capsule), 'ERR_DLPACK_INVALID_BOOL', 'contiguous, bytes 0..3')
      const strided = () => c.makeTensor({ shape: [3], strides: [-1], dtype: BOOL, versioned })
      refusedOnce(t, strided, (capsule) => consumer.countTrue(capsule), 'ERR_DLPACK_INVALID_BOOL', 'strided, bytes 2, 1, 0')
    })
  })
}

test.serial('hostile: a struct of another major allocated as the stable prefix only is refused', async (t) => {
  // The C producer allocates exactly version + manager_ctx + deleter; the consumer must read
  // nothing past them (valgrind or ASan would report the read) and call the deleter once.
  const majors = [2, 0, 0xffffffff]
  await releasedOnce(t, majors.length * importers.length, () => {
    for (const major of majors) {
      for (const [name, importer] of importers) {
        refusedOnce(t, () => hostile.makePrefixOnlyMajor(major), importer, 'ERR_DLPACK_VERSION', `${name}, major ${major}`)
      }
    }
  })
})
