/**
 * The library adapter (include/napi_dlpack.h part 4, docs/protocol.md §6): installs on
 * `globalThis`, for this environment, the function native addons call when a tensor argument is
 * none of the things they read natively (an exchange table, a capsule, `__dlpack__`). It runs
 * `fromDLPack`'s recognisers of library tensors and images (lib/interop/from-library.ts, ndarray-likes), so
 * `napi_dlpack::arg::TensorArg` (and any C addon) accepts an ONNX Runtime tensor, sharp's raw
 * output, an ImageData or an Arrow vector as it is, without a second definition of them in Rust.
 */
import { ADAPTER_SYMBOL_NAME } from '../generated/facts'
import { MAX_VERSION, fromLibraryObject } from '../protocol'
import type { DLPackCapsule } from '../opaque'

/** The key of the adapter on `globalThis`: `Symbol.for(NAPI_DLPACK_ADAPTER_PROPERTY)`. */
export const ADAPTER_PROPERTY: unique symbol = Symbol.for(ADAPTER_SYMBOL_NAME)

/**
 * A capsule over `value`'s memory if it is a library object `fromDLPack` recognises (zero-copy;
 * with `fromDLPack(value, { copy: false })`'s coded error where that would need a copy), else
 * `undefined`. The
 * intermediate Tensor is disposed at once: the capsule alone keeps the memory (and the library's
 * array) alive, until the consumer's deleter runs, so nothing waits for a garbage collection.
 */
function adaptArgument(value: unknown): DLPackCapsule | undefined {
  if (typeof value !== 'object' || value === null) return undefined
  // `copy: false`: a typed argument is the library's own memory (an addon may write to it), so
  // what would need a copy is refused with fromDLPack's codes instead of handing over a copy.
  const tensor = fromLibraryObject(value, { copy: false })
  if (tensor === undefined) return undefined
  try {
    // Versioned, so READ_ONLY (a tfjs tensor's default) travels with the tensor.
    return tensor.__dlpack__({ maxVersion: MAX_VERSION })
  } finally {
    tensor.dispose()
  }
}

// Another copy of napi-dlpack loaded first in this environment keeps its adapter (as it keeps
// the default importer, lib/exchange.ts): either copy recognises the same objects.
if (!Object.prototype.hasOwnProperty.call(globalThis, ADAPTER_PROPERTY)) {
  Object.defineProperty(globalThis, ADAPTER_PROPERTY, { value: adaptArgument, enumerable: false, writable: false, configurable: false })
}
