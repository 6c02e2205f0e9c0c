/**
 * The exchange table (include/napi_dlpack.h part 3, docs/protocol.md §5): installs napi-dlpack's
 * C function table on `Tensor.prototype` and `globalThis` for this environment, so native
 * addons can borrow a `Tensor` for a call without a capsule and return tensors as `Tensor`s.
 */
import { dlpackError } from './errors'
import { native } from './native.js'
import { EXCHANGE_API_PROPERTY, exchangeHandle } from './exchange-slots'
import { Tensor } from './tensor'
import type { AdaptedSource } from './interop/from-library'
import type { DType } from './dtype'
import type { CanDLPack, HasExchangeApi, NDArrayLike } from './protocol'
import type { DLPackCapsule, TensorHandle } from './opaque'

// `dlpackError`: errors thrown to a native consumer through the table are the DLPackError
// subclasses the JS API throws (docs/protocol.md §1.4).
native.installExchangeApi(Tensor.prototype, exchangeHandle, (handle: unknown) => Tensor._fromHandle(handle), dlpackError)

export { EXCHANGE_API_PROPERTY }

/**
 * What a native function taking `napi_dlpack::arg::TensorArg` accepts: a `Tensor`, its
 * `native` handle or its `id` (borrowed for the call, no capsule; by handle or id with one
 * table lookup and no property read), any
 * object exposing an exchange table, a capsule (consumed), any
 * object with `__dlpack__`, and, napi-dlpack being loaded (it is, if you import it), the
 * library tensors and images `fromDLPack` recognises (ONNX Runtime / transformers.js, sharp,
 * ImageData / RawImage, Arrow, tfjs, ndarray-likes: lib/interop/native-adapter.ts), zero-copy over the
 * library's memory. Addons built on the crate name their arguments with this type.
 */
export type TensorArg = Tensor | TensorHandle | number | HasExchangeApi | DLPackCapsule | CanDLPack | AdaptedSource | NDArrayLike

/** Same as `TensorArg`, for `napi_dlpack::arg::OwnedTensorArg` (the native side keeps the tensor after the call). */
export type OwnedTensorArg = TensorArg

/**
 * What `napi_dlpack::arg::TensorResult` returns: a `Tensor` when napi-dlpack is loaded (it is,
 * if you import it), else a capsule; `D` is the dtype when the addon's signature names it
 * (`#[napi(ts_return_type = "TensorResult<'float32'>")]`). Either way,
 * `fromDLPack(result, { dtype })` is a checked `Tensor<D>` (sharing the tensor, or importing
 * the capsule), and `result instanceof Tensor` narrows it.
 */
export type TensorResult<D extends DType = DType> = Tensor<D> | DLPackCapsule
