/**
 * The JS half of an export (`Tensor#__dlpack__`): the options' JS shapes converted for
 * `native.exportCapsule`. What the request asks for is judged natively, once
 * (src/ops/negotiation.rs `plan_export`).
 */
import { native } from './native.js'
import { toDevice } from './device'
import { DLPackTypeError, callNative as call } from './errors'
import type { DLPackCapsule } from './opaque'
import type { DLPackOptions } from './options'

/** A new capsule exporting the tensor behind `handle`, as `options` ask. */
export function exportCapsule(handle: unknown, options: DLPackOptions): DLPackCapsule {
  const { stream, maxVersion, dlDevice, copy } = options ?? {}
  if (stream == null && maxVersion == null && dlDevice == null && copy == null) {
    // No option given (the hot path): the native call reads no option either.
    return call(() => native.exportCapsule(handle)) as DLPackCapsule
  }
  // JS shapes are converted here; what the request asks for is judged natively, once
  // (src/ops/negotiation.rs `plan_export`).
  let maxMajor: number | null = null
  if (maxVersion !== undefined && maxVersion !== null) {
    if (!Array.isArray(maxVersion) || maxVersion.length !== 2 || !maxVersion.every(Number.isInteger)) {
      throw new DLPackTypeError('ERR_DLPACK_INVALID_ARGUMENT', 'maxVersion must be [major, minor]')
    }
    maxMajor = maxVersion[0] as number
  }
  const target = dlDevice === undefined || dlDevice === null ? undefined : toDevice(dlDevice)
  return call(() => native.exportCapsule(handle, copy, stream, maxMajor, target?.type, target?.id)) as DLPackCapsule
}
