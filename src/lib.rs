//! The `napi-dlpack` Node addon: thin bindings over the `napi-dlpack` crate. The JS `Tensor`
//! class and the protocol functions live in `lib/` (TypeScript) and call these.
//!
//! # Module map
//!
//! Layers, top to bottom; a module uses only the layers below it (`layering_is_one_way`
//! checks it):
//!
//! | layer | modules | what it holds |
//! |---|---|---|
//! | binding | `binding` (`tensor`, `convert`, `cuda`, `fast`, `transfer`; `args`: shared argument conversion), `exchange` | every function JS (or a native addon, through the exchange table) calls: argument conversion, nothing else |
//! | operations | `ops` (`negotiation`, `import`, `export`, `copy`, `convert`, `view`, `transfer`) | what a call does with tensors; `negotiation` turns import and export requests into plans (pure) |
//! | CUDA | `cuda` | device allocations and copies, streams, driver checks of imports |
//! | recognition | `own_capsule` | which handle is behind a JS value; the capsules we make |
//! | handle | `handle`, `slots` | the native handle: a storage plus a layout; the slot table behind handle ids (`Tensor#id`, `Tensor#native`) |
//! | storage | `storage` | where a tensor's bytes live, row-major copies, export addresses |
//! | layout | `layout` | `TensorLayout`: a tensor's place in its storage (plain data) |
//! | JS memory | `js_memory` | raw Node-API calls: `env` (per-environment state, teardown), `buffers` (ArrayBuffers, limits, the untransferable mark), `externals` (tagged externals) |
//! | errors | `errors` | the one error type and the one Node-API status check |
//! | facts | `facts` | what the addon and `lib/` must agree on (copy modes, `handleInfoInto`'s slots), generated into `lib/generated/facts.ts` |
//!
//! - **JS meets Rust** in `binding` only: `#[napi]` functions (declared in the generated
//!   `lib/binding/index.d.ts`) and the raw hot-path calls of `binding::fast` (declared in
//!   `lib/native.ts`); native addons come in through `exchange`.
//! - **A tensor enters** in `ops::import`: JS memory wrapped in place (`wrapBuffer`), a capsule
//!   consumed (`importCapsule`), a tensor handed over by native code (`import_foreign`).
//! - **A tensor leaves** in `ops::export` (`exportCapsule`: a capsule, through
//!   `own_capsule::wrap_in_own_capsule`) and in `exchange` (borrowed or owning exports without a
//!   capsule). JS views of host memory are `ops::view`.
//! - **CUDA lives** in `cuda` (over `napi_dlpack::cuda`); its `#[napi]` functions are in
//!   `binding::cuda`.

#![deny(clippy::all)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]
// napi-derive registers the #[napi] functions only outside `cfg(test)`, so in the test target
// of this cdylib (the pure parts' unit tests) much looks unused.
#![cfg_attr(test, allow(dead_code))]

mod binding;
mod cuda;
mod errors;
mod exchange;
mod facts;
mod handle;
mod js_memory;
mod layout;
mod ops;
mod own_capsule;
mod slots;
mod storage;

#[cfg(test)]
mod layering;
