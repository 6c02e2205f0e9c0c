/**
 * The addon's exports: the bindings `napi build` generates (`binding/index.js` / `index.d.ts`) plus
 * the raw Node-API entry points of the exchange's hot path (`src/binding/fast.rs`), which the generator
 * does not see because they bypass napi-rs's argument conversion.
 */
import { constants } from 'node:buffer'
import * as workerThreads from 'node:worker_threads'

import type * as Generated from './binding/index.js'
import { loadBinding } from './loader'

/** The hand-registered calls (see `src/binding/fast.rs`); `@internal`, like the rest of the binding. */
export interface FastCalls {
  /**
   * Exports a handle as a new capsule, as `__dlpack__`'s options ask: `copy`, `stream`, the
   * major version of `maxVersion` and `dlDevice` as a device type and id. The request is
   * checked natively (`plan_export` in src/ops/negotiation.rs).
   */
  exportCapsule(
    handle: unknown,
    copy?: boolean | null,
    stream?: bigint | number | null,
    maxMajor?: number | null,
    deviceType?: number,
    deviceId?: number,
  ): unknown
  /**
   * Consumes a capsule into a handle, as `fromDLPack`'s options ask: `copyMode` one of
   * `COPY_MODE` (lib/generated/facts.ts); the consumer `stream`; the device the result must be on. With
   * `refuseBeforeConsuming` (the default) a capsule refused for its device is left unconsumed.
   */
  importCapsule(
    capsule: unknown,
    copyMode: number,
    stream?: bigint | null,
    deviceType?: number,
    deviceId?: number,
    refuseBeforeConsuming?: boolean,
  ): unknown
  /** Writes a handle's layout into `out` (see `TensorLayout::write_slots` in src/layout.rs). */
  handleInfoInto(handle: unknown, out: Float64Array): void
  /**
   * The handle's id (`Tensor#id`, an exact integer) or, with `external`, the id external
   * (`Tensor#native`). The first call takes the handle's slot (src/slots.rs).
   */
  handleId(handle: unknown, external?: boolean): unknown
  /** Benchmark floor: creates a type-tagged `napi_external` with a finalizer. */
  benchTaggedExternal(): unknown
}

export const native = loadBinding() as typeof Generated & FastCalls

/**
 * The runtime's largest ArrayBuffer view, in bytes (`buffer.constants.MAX_LENGTH`: 2^32 on Node
 * 20 and Bun, 2^53 - 1 on Node 22+ and Deno), told to the addon once: views and copies past it
 * throw ERR_DLPACK_TOO_LARGE instead of asking the runtime for an ArrayBuffer it cannot make.
 * (Until told, the addon assumes 2^32.)
 */
export const MAX_VIEW_BYTES: number = typeof constants?.MAX_LENGTH === 'number' ? constants.MAX_LENGTH : 2 ** 32
native.setArrayBufferLimit(MAX_VIEW_BYTES)

// Exports of V8 memory mark their ArrayBuffer untransferable (src/storage.rs `pin_for_export`):
// a transfer list would otherwise move memory that native code still points into. Every
// runtime we test has the function; where one lacks it, exports stay unmarked.
//
// A buffer the runtime already reports as marked is left as it is. Node (22+) marks every
// external ArrayBuffer an addon makes (napi_create_external_arraybuffer: canvas pixels, our own
// views of native memory) itself, so transfer lists already refuse it; marking it again through
// the JS function would, on Node 24, add a V8 detach key, and Node's own teardown of external
// buffers (node::Buffer's cleanup hook) detaches them without a key and aborts the process
// (`FATAL ERROR: v8::FromJust Maybe value is Nothing`) — as does napi_detach_arraybuffer. See
// docs/runtimes.md, "Node 24: exports over external ArrayBuffers". The marker returns whether
// it marked: a buffer left to the runtime's own mark can still be detached by transfer() on
// Node 24, so borrows of it keep their detach check (src/storage.rs `mark_left_to_runtime`).
const { markAsUntransferable } = workerThreads
const isMarkedAsUntransferable = (workerThreads as { isMarkedAsUntransferable?: (value: unknown) => boolean }).isMarkedAsUntransferable
if (typeof markAsUntransferable === 'function') {
  native.setUntransferableMarker(
    typeof isMarkedAsUntransferable === 'function'
      ? (buffer: ArrayBuffer): boolean => {
          if (isMarkedAsUntransferable(buffer)) return false
          markAsUntransferable(buffer)
          return true
        }
      : markAsUntransferable,
  )
}

/**
 * Whether JS can still detach an `ArrayBuffer` once it is marked untransferable, probed with a
 * real one: `ArrayBuffer.prototype.transfer()` ignores the mark on Node 22 and Bun, Node 24 and
 * Deno refuse it, Node 20 has no `transfer()` and clones marked buffers in transfer lists.
 * Where it cannot, a borrow by handle id of JS memory needs no detach check (src/slots.rs).
 */
function markedBuffersDetachable(): boolean {
  if (typeof markAsUntransferable !== 'function') return true
  const probe = new ArrayBuffer(8)
  markAsUntransferable(probe)
  const prototype = ArrayBuffer.prototype as { transfer?: unknown; transferToFixedLength?: unknown }
  for (const move of [prototype.transfer, prototype.transferToFixedLength]) {
    if (typeof move !== 'function') continue
    try {
      move.call(probe)
    } catch {
      // refused: the mark holds
    }
  }
  try {
    structuredClone(probe, { transfer: [probe] })
  } catch {
    // refused: the mark holds
  }
  return probe.byteLength !== 8
}
native.setMarkedBuffersDetachable(markedBuffersDetachable())
