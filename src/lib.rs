//! The `napi-dlpack` Node addon: thin bindings over the `napi-dlpack` crate. The JS `Tensor`
//! class and the protocol functions live in `lib/` (TypeScript) and call these.

#![deny(clippy::all)]
// napi-derive registers the #[napi] functions only outside `cfg(test)`, so in the (empty) test
// target of this cdylib everything looks unused.
#![cfg_attr(test, allow(dead_code))]

mod cuda;
mod exchange;
mod fast;
mod js_memory;
mod own_capsule;
mod storage;
mod tensor;
mod transfer;
