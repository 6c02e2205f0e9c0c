/**
 * napi-dlpack: zero-copy DLPack tensor exchange for Node.js.
 *
 * ```ts
 * import { Tensor, fromDLPack } from 'napi-dlpack'
 * const t = Tensor.from(new Float32Array([1, 2, 3]))
 * const capsule = t.__dlpack__()      // hand to any native addon
 * const back = fromDLPack(capsule)    // same memory, no copy
 * ```
 */
export { type AstypeOptions, type PerChannel } from './convert'
export { cuda } from './cuda'
export { Device, type DeviceLike, type DeviceString, toDevice } from './device'
export {
  type ArrayDType,
  type DataArray,
  DLDataTypeCode,
  DLDeviceType,
  type DType,
  type DTypeArrayMap,
  DTYPE_NAMES,
  DTYPES,
  type Float16View,
  isDType,
} from './dtype'
export {
  BufferError,
  CapsuleError,
  CudaError,
  DLPackError,
  DLPackTypeError,
  InvalidTensorError,
  NodeApiError,
  ReadOnlyError,
  TensorDisposedError,
} from './errors'
export {
  EXCHANGE_API_PROPERTY,
  type OwnedTensorArg,
  type TensorArg,
  type TensorResult,
} from './exchange'
export { ADAPTER_PROPERTY } from './interop/native-adapter'
export {
  type CanDLPack,
  type CanDLPackDevice,
  type DLPackSource,
  externalBuffersAllowed,
  fromDLPack,
  type FromDLPackOptions,
  type HasExchangeApi,
  isCapsule,
  isCapsuleConsumed,
  MAX_VERSION,
  type NDArrayLike,
} from './protocol'
export {
  type AdaptedSource,
  type ArrowDataLike,
  type ArrowVectorLike,
  type ImageLike,
  type OrtTensorLike,
  type SharpRawLike,
  type TfTensorLike,
} from './interop/from-library'
export {
  type ArrowModule,
  type ArrowParts,
  type ArrowTypeName,
  type ImageDataArgs,
  type OrtOptions,
  type OrtTensorArgs,
  type OrtType,
  type SharpArgs,
  type SharpPixels,
  type TfDType,
  type TfTensorArgs,
} from './interop/to-library'
export {
  type CopyOptions,
  type CreateOptions,
  type DataOptions,
  type DLPackOptions,
  type FromArrayOptions,
  type PeerViewOptions,
} from './options'
export { type DLPackCapsule, type TensorHandle } from './opaque'
export { type ClampedTensor, Tensor, type TensorViews, type ToOptions } from './tensor'
export { isTransfer, releaseTransfer, type SharedTransfer, type TensorTransfer, type TokenTransfer } from './transfer'
