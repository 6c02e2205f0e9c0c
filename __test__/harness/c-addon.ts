// The plain C addon (__test__/native/c-addon: only include/napi_dlpack.h and node_api.h, never
// Rust), an independent DLPack peer: its interface, the addon loaded (built when missing), and
// what the specs of its exchange with napi-dlpack share (__test__/abi/c-addon-*.spec.ts, and the
// CUDA specs that hand it CUDA capsules).
import type { DLPackCapsule, Tensor } from '../../dist/index.js'
import { nativeFixture } from './helpers.js'

/** What `makeTensor` builds: a DLPack tensor in C memory (iota-filled unless `fill: 'none'`). */
export interface MakeTensorOptions {
  dtype?: { code: number; bits: number; lanes: number }
  device?: [number, number]
  shape: (number | bigint)[]
  strides?: (number | bigint)[] | null
  byteOffset?: number
  versioned: boolean
  readonly?: boolean
  flags?: number
  version?: [number, number]
  fill?: 'iota' | 'none'
  nullData?: boolean
  nullShape?: boolean
  ndim?: number
  nullDeleter?: boolean
}

/** A tensor the C side consumed and holds, as it sees it. */
export interface HeldInfo {
  versioned: boolean
  version: [number, number] | null
  flags: number
  ndim: number
  shape: number[] | null
  strides: number[] | null
  byteOffset: number
  dtype: { code: number; bits: number; lanes: number }
  device: [number, number]
  data: bigint
}

/** The C side's handle of a consumed tensor (an External). */
export type Held = { readonly __held: unique symbol }

export interface CAddon {
  makeTensor(options: MakeTensorOptions): DLPackCapsule
  deleterCalls(): number
  resetDeleterCalls(): void
  dataPointer(capsule: DLPackCapsule): bigint
  isConsumed(capsule: DLPackCapsule): boolean
  consume(capsule: DLPackCapsule): Held
  heldInfo(held: Held): HeldInfo
  heldFloat32(held: Held): Float32Array
  heldWriteFloat32(held: Held, index: number, value: number, force?: boolean): void
  release(held: Held): boolean
  releaseOnThread(held: Held): boolean
  heldToCapsule(held: Held): DLPackCapsule
}

const fixture = nativeFixture<CAddon>('c-addon', 'c_addon.node')
/** Where the C addon is (Workers load it themselves). */
export const cAddonPath = fixture.path
export const c = fixture.addon

/** DLPack flag bits (DLPACK_FLAG_BITMASK_*). */
export const READ_ONLY = 1
export const IS_COPIED = 2
export const SUBBYTE_PADDED = 4

export const iota = (n: number) => Array.from({ length: n }, (_, i) => i)

/** `flat` (row-major) as nested arrays of `shape`. */
export function reshape(flat: number[], shape: number[]): unknown {
  if (shape.length === 0) return flat[0]
  const [head, ...rest] = shape
  const size = rest.reduce((a, b) => a * b, 1)
  return Array.from({ length: head! }, (_, i) => reshape(flat.slice(i * size, (i + 1) * size), rest))
}

/** C-order flat index of `index` -> element offset in `t.data` (offset + Σ index·stride). */
export function dataIndex(tensor: Tensor, flat: number): number {
  let at = tensor.offset
  const shape = tensor.shape
  for (let d = shape.length - 1; d >= 0; d--) {
    const i = flat % shape[d]!
    flat = Math.floor(flat / shape[d]!)
    at += i * tensor.strides[d]!
  }
  return at
}
