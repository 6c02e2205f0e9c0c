//! The binding layer: every function JS calls. `#[napi]` functions (in `tensor`, `convert`,
//! `transfer` and `cuda`; their TypeScript declarations are generated into
//! `lib/binding/index.d.ts`), the raw Node-API entry points of the hot path (`fast`, declared by
//! hand in `lib/native.ts`) and the bindings only tests and diagnostics call (`diagnostics`).
//! Each converts its arguments (the conversions several share are in `args`), finds the handle
//! behind a JS value (`own_capsule::handle_of`) and calls one operation (`ops`) or reads one
//! fact; no other layer calls up into this one.

pub(crate) mod args;
pub(crate) mod convert;
pub(crate) mod cuda;
pub(crate) mod diagnostics;
pub(crate) mod fast;
pub(crate) mod tensor;
pub(crate) mod transfer;
