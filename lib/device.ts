import { DLDeviceType } from './dtype'
import { DEVICE_NAMES } from './generated/facts'
import { DLPackTypeError, describe } from './errors'

/** Device-string names by device type (defined in Rust: lib/generated/facts.ts). */
const NAMES: Readonly<Record<number, string>> = DEVICE_NAMES

/** A device: DLPack type and ordinal. Prints as `cpu` or `cuda:0`. */
export class Device<T extends DLDeviceType = DLDeviceType, I extends number = number> {
  readonly type: T
  readonly id: I

  constructor(type: T, id: I) {
    this.type = type
    this.id = id
    Object.freeze(this)
  }

  /** `'cpu'`, `'cuda'`, ... */
  get name(): string {
    return NAMES[this.type] ?? `device${this.type}`
  }

  toString(): string {
    return this.type === DLDeviceType.CPU ? 'cpu' : `${this.name}:${this.id}`
  }

  toJSON(): string {
    return this.toString()
  }

  /** `[type, id]`, as `__dlpack_device__` returns it. */
  toDLPack(): [T, I] {
    return [this.type, this.id]
  }

  equals(other: DeviceLike): boolean {
    const device = toDevice(other)
    return device.type === this.type && device.id === this.id
  }

  static readonly CPU = new Device(DLDeviceType.CPU, 0)

  /** `cuda_host` (`cuda_host:0`): pinned host memory of the CUDA driver (DLPack `kDLCUDAHost`). */
  static readonly CUDA_HOST = new Device(DLDeviceType.CUDAHost, 0)
}

/**
 * The device strings napi-dlpack allocates on and copies to, spelled out for completion:
 * `'cpu'`, `'cuda'` / `'cuda:N'` (device memory), `'cuda_host'` (pinned host memory, DLPack
 * `kDLCUDAHost`; its only id is 0). Any other DLPack device name (`'rocm:0'`, ...) is a
 * `string` too: such tensors can be imported and carried, not allocated.
 */
export type DeviceString = 'cpu' | 'cuda' | `cuda:${number}` | 'cuda_host' | 'cuda_host:0' | (string & {})

/** Anything that names a device: `'cpu'`, `'cuda:1'`, `'cuda_host'`, `[2, 1]`, `{ type: 2, id: 1 }`, a Device. */
export type DeviceLike = Device | DeviceString | readonly [number, number] | { readonly type: number; readonly id: number }

const BY_NAME = new Map(Object.entries(NAMES).map(([type, name]) => [name, Number(type) as DLDeviceType]))

export function toDevice(value: DeviceLike): Device {
  if (value instanceof Device) return value
  if (typeof value === 'string') {
    const match = /^([a-z_]+)(?::(\d+))?$/.exec(value)
    const type = match ? BY_NAME.get(match[1] as string) : undefined
    const id = match?.[2] === undefined ? 0 : Number(match[2])
    if (type === undefined || (type === DLDeviceType.CPU && id !== 0)) {
      throw new DLPackTypeError('ERR_DLPACK_INVALID_ARGUMENT', `invalid device string ${describe(value)}`)
    }
    return type === DLDeviceType.CPU ? Device.CPU : new Device(type, id)
  }
  if (typeof value !== 'object' || value === null) {
    throw new DLPackTypeError('ERR_DLPACK_INVALID_ARGUMENT', `invalid device ${describe(value)}: expected 'cpu', 'cuda:N', 'cuda_host', [type, id] or { type, id }`)
  }
  // Each field read once: what is checked is what is used.
  const [type, id]: unknown[] = Array.isArray(value)
    ? [value[0], value[1]]
    : [(value as { type: unknown }).type, (value as { id: unknown }).id]
  if (!Number.isSafeInteger(type) || !Number.isSafeInteger(id) || NAMES[type as number] === undefined || (id as number) < 0) {
    throw new DLPackTypeError('ERR_DLPACK_INVALID_ARGUMENT', `invalid device ${describe(value)}`)
  }
  return type === DLDeviceType.CPU && id === 0 ? Device.CPU : new Device(type as DLDeviceType, id as number)
}
