/**
 * Layout reading: a handle's dtype, device, shape, strides, offsets and flags, which native
 * writes into one reused Float64Array (the `INFO_SLOT` slots) in a single call instead of a
 * getter per fact. `Tensor` reads it once per handle and caches it (lib/tensor.ts).
 */
import { native } from './native.js'
import type { DType } from './dtype'
import { rethrow } from './errors'
import { DTYPE_ORDER, INFO_BIT, INFO_SLOT, INFO_SLOTS } from './generated/facts'

/**
 * What `handleInfoInto` reports about a handle: its `TensorLayout` (src/layout.rs), in the slots
 * `INFO_SLOT` names (defined in src/facts.rs, generated into lib/generated/facts.ts).
 */
export interface TensorLayout {
  readonly dtype: DType
  readonly deviceType: number
  readonly deviceId: number
  readonly byteOffset: number
  readonly readonly: boolean
  readonly isCopy: boolean
  readonly contiguous: boolean
  readonly numel: number
  readonly viewOffset: number
  readonly viewLength: number
  readonly version: readonly [number, number] | undefined
  readonly flags: number
  readonly shape: readonly number[]
  readonly strides: readonly number[]
}

/** Reused output buffer of `handleInfoInto` (fixed slots + shape and strides of up to MAX_NDIM dims). */
const infoSlots = new Float64Array(INFO_SLOTS)

function slotRange(start: number, length: number): number[] {
  const values = new Array<number>(length)
  for (let i = 0; i < length; i++) values[i] = infoSlots[start + i] as number
  return values
}

/** The layout of `handle` (a tensor handle or capsule), read from native into fresh frozen arrays. */
export function readInfo(handle: unknown): TensorLayout {
  try {
    native.handleInfoInto(handle, infoSlots)
  } catch (error) {
    rethrow(error)
  }
  const slots = infoSlots
  const bits = slots[INFO_SLOT.BITS] as number
  const ndim = slots[INFO_SLOT.NDIM] as number
  return {
    dtype: DTYPE_ORDER[slots[INFO_SLOT.DTYPE] as number] as DType,
    deviceType: slots[INFO_SLOT.DEVICE_TYPE] as number,
    deviceId: slots[INFO_SLOT.DEVICE_ID] as number,
    byteOffset: slots[INFO_SLOT.BYTE_OFFSET] as number,
    readonly: (bits & INFO_BIT.READ_ONLY) !== 0,
    isCopy: (bits & INFO_BIT.IS_COPY) !== 0,
    contiguous: (bits & INFO_BIT.CONTIGUOUS) !== 0,
    numel: slots[INFO_SLOT.NUMEL] as number,
    viewOffset: slots[INFO_SLOT.VIEW_OFFSET] as number,
    viewLength: slots[INFO_SLOT.VIEW_LENGTH] as number,
    version:
      (bits & INFO_BIT.HAS_VERSION) !== 0
        ? Object.freeze([slots[INFO_SLOT.VERSION_MAJOR] as number, slots[INFO_SLOT.VERSION_MINOR] as number] as const)
        : undefined,
    flags: slots[INFO_SLOT.FLAGS] as number,
    shape: Object.freeze(slotRange(INFO_SLOT.SHAPE, ndim)),
    strides: Object.freeze(slotRange(INFO_SLOT.SHAPE + ndim, ndim)),
  }
}

