// Shared test helpers (not a test file: ava only runs *.spec.ts).
import { execFileSync } from 'node:child_process'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

import type { ExecutionContext } from 'ava'

import { DLPackError, Tensor } from '../../dist/index.js'

/** The JS runtime running the tests. */
export const runtime: 'node' | 'bun' | 'deno' =
  'Bun' in globalThis ? 'bun' : 'Deno' in globalThis ? 'deno' : 'node'

/**
 * Whether the runtime runs the finalizers of `napi_external`s still alive when a Worker ends.
 * Node does; Bun and Deno do not (they run env cleanup hooks instead, which napi-dlpack uses
 * for its own capsules and tensors; another addon's capsules need that addon's own hook).
 */
export const finalizesExternalsAtWorkerExit = runtime === 'node'

/** One turn of the event loop (Node-API finalizers run from it). */
export const turn = () => new Promise<void>((resolve) => setImmediate(resolve))

/** Collects garbage until `cond()` holds or `rounds` collections have been made. */
export async function gcUntil(cond: () => boolean, rounds = 30): Promise<boolean> {
  const gc = (globalThis as { gc?: () => void }).gc
  if (!gc) throw new Error('run the tests with --expose-gc (the ava config does)')
  for (let i = 0; i < rounds && !cond(); i++) {
    gc()
    await turn()
    await turn()
  }
  return cond()
}

/** Lets garbage of earlier tests be finalized, so counters only see the current test's. */
export const drainGarbage = () => gcUntil(() => false, 6)

/** Asserts that `fn` throws a DLPackError subclass `Class` with the stable `code`. */
export function throwsCode<E extends DLPackError>(
  t: ExecutionContext,
  fn: () => unknown,
  code: string,
  Class: abstract new (...args: never[]) => E = DLPackError as never,
  message?: string,
): E {
  const error = t.throws(fn, { instanceOf: Error }, message) as unknown as E
  t.true(error instanceof DLPackError, `${message ?? code}: not a DLPackError (${String(error)})`)
  t.true(error instanceof Class, `${message ?? code}: expected ${Class.name}, got ${error?.constructor?.name}`)
  t.is((error as { code?: string }).code, code, `${message ?? code}: ${String(error?.message)}`)
  return error
}

/** The `code` of what `fn` throws (undefined when it returns). */
export const codeOf = (fn: () => unknown): string | undefined => {
  try {
    fn()
  } catch (error) {
    return (error as { code?: string }).code
  }
  return undefined
}

/**
 * Address of element 0 of `array`, from a zero-copy tensor over its whole ArrayBuffer (JS
 * memory is zero-copy in every mode), for zero-copy checks by pointer identity.
 */
export function addressOf(array: ArrayBufferView): bigint {
  const whole = Tensor.from(new Uint8Array(array.buffer))
  const base = whole.dataPointer
  whole.dispose()
  return base + BigInt(array.byteOffset)
}

/** Deterministic pseudo-random numbers (mulberry32), so a failure can be replayed. */
export function random(seed: number): () => number {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32
  }
}

const repositoryRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..')

/**
 * A native test fixture's addon, `target/<dir>/<file>`, loaded (built first by
 * `__test__/native/<dir>/build.sh` when missing or stale: `npm test` builds every fixture first, a spec
 * run on its own builds the ones it needs).
 */
export function nativeFixture<T>(dir: string, file: string): { path: string; addon: T } {
  const path = join(repositoryRoot, 'target', dir, file)
  // Always asked, not only when the file is missing: each build.sh returns at once when its
  // output is newer than its sources, and a stale fixture (say, built before a header change)
  // gives failures that have nothing to do with the code under test.
  execFileSync('bash', [join(repositoryRoot, '__test__', 'native', dir, 'build.sh')], { stdio: ['ignore', 'ignore', 'inherit'] })
  return { path, addon: createRequire(import.meta.url)(path) as T }
}
