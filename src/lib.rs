//! The `napi-dlpack` Node addon: thin bindings over the `napi-dlpack` crate. The JS `Tensor`
//! class and the protocol functions live in `lib/` (TypeScript) and call these.

#![deny(clippy::all)]

mod cuda;
mod js_memory;
mod storage;
mod tensor;
