/**
 * The opaque values the addon hands to JS, which only native code reads: a DLPack capsule (what
 * `__dlpack__` exports) and a tensor's handle external (`Tensor#native`). Their brands keep any
 * other value from passing for one in TypeScript.
 */
declare const capsuleBrand: unique symbol
declare const handleBrand: unique symbol

/**
 * A DLPack capsule: an opaque, consume-once object holding one exported tensor. It is what
 * `x.__dlpack__()` returns; pass it to `fromDLPack` (or to any native addon that speaks the
 * capsule ABI of `include/napi_dlpack.h`) exactly once.
 */
export interface DLPackCapsule {
  readonly [capsuleBrand]: 'DLPackCapsule'
}

/**
 * A tensor's handle id as an opaque external, as `Tensor.native` gives it: a value that only
 * native code reads (a typed argument of an addon built on the Rust crate, or a C consumer of
 * the exchange table, borrows the tensor by the id it carries: docs/protocol.md §5.6).
 */
export interface TensorHandle {
  readonly [handleBrand]: 'TensorHandle'
}
