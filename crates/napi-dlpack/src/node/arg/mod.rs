//! Typed tensor arguments and results for `#[napi]` functions.
//!
//! The crate docs ("Writing an addon") walk through a complete addon built on these types.
//!
//! - [`TensorArg`] lives for the call. It takes, cheapest first: a
//!   handle id, napi-dlpack's `Tensor.native` (an id external) or `Tensor.id` (a number), borrowed
//!   from the default importer's slot table, inline, or through its `borrow_id` (one slot
//!   lookup, no tag check, no validation: `docs/protocol.md` §5.6); a producer's per-object
//!   external passed as the argument itself (one tag check, no
//!   property lookup, then the table's `dltensor_from_object`); an object carrying such an
//!   external under the exchange symbol (napi-dlpack's `Tensor`: one property lookup more), or
//!   any object whose prototype exposes the exchange table (`dltensor_from_value`) — all
//!   borrowed, no capsule, no allocation: the producer holds the memory until the argument
//!   drops, whatever JS runs meanwhile; a capsule from any producer (consumed:
//!   the argument owns the tensor); any object with `__dlpack__` (called with
//!   `{ maxVersion: [1, 3] }`, then consumed); last, when napi-dlpack's JS package is loaded in
//!   the environment, the tensors and images of common libraries as they are (ONNX Runtime and
//!   transformers.js tensors, sharp's `{ data, info }`, `ImageData` / `RawImage`, Arrow
//!   vectors, tfjs tensors, ndarray-likes): napi-dlpack's adapter (see [`crate::adapter`])
//!   recognises them by `fromDLPack`'s rules and hands over a capsule over the library's own
//!   memory (zero-copy; consumed, owned), or throws `fromDLPack`'s coded error where that
//!   would need a copy (`ERR_DLPACK_NULLS`, `ERR_DLPACK_COPY_REQUIRED`, ...). Without
//!   napi-dlpack loaded such objects are refused (`ERR_DLPACK_INVALID_ARGUMENT`).
//! - [`OwnedTensorArg`] owns its tensor, so it may outlive the call (an `AsyncTask`, another
//!   thread): exchange-table producers are asked for an owning export
//!   (`managed_tensor_from_value`, given the object or the per-object external passed);
//!   capsules, `__dlpack__` objects and library objects are consumed as for [`TensorArg`].
//! - [`TensorResult`] returns an export: a napi-dlpack `Tensor` when napi-dlpack is loaded in
//!   the calling environment (through the table it installs on `globalThis`), else a capsule.
//!
//! All three name themselves in the generated `index.d.ts` (`TensorArg`, `OwnedTensorArg`,
//! `TensorResult`); napi-dlpack exports TypeScript types of the same names, so an addon's
//! `index.d.ts` is complete with `dtsHeader: "import type { TensorArg, OwnedTensorArg,
//! TensorResult } from 'napi-dlpack'"` in its `package.json`'s `napi` section.
//!
//! # Aliasing: checked when lent
//!
//! Two arguments may be the same memory: JS can call `f(x, x)`, or pass two capsules of one
//! tensor. Slices and views are therefore lent like `RefCell` borrows across every tensor in
//! the process (see [`crate::aliasing`]): while `as_mut_slice()` or `view_mut()` of one
//! argument lives, any slice or view of memory it overlaps is refused with
//! `ERR_DLPACK_ALIASED`, and the other way round. `f(x, x)` into a function that writes one
//! and reads the other is a coded error, never an overlapping `&mut` and `&`. Take the read
//! slice first and the write slice second, or the other way round: either order is checked.
//!
//! # Where each part lives
//!
//! Modules depend in one direction, each on those listed before it: `errors` (the coded
//! errors every path throws), `tensor_arg` (the borrowed-or-owned argument and its
//! accessors), `consume` (the paths that end in an owned tensor: a capsule, an owning export,
//! `__dlpack__`, the library adapter), `by_table` (borrows through a producer's exchange
//! table, falling back on `consume`), `by_id` (the hot path: borrows of a handle id from the
//! default importer's slot table), `from_value` (the order in which a JS value tries them),
//! `owned` ([`OwnedTensorArg`]) and `result` ([`TensorResult`]).

mod by_id;
mod by_table;
mod consume;
mod errors;
mod from_value;
mod owned;
mod result;
mod tensor_arg;

pub(crate) use errors::thrown_by_argument;
pub use owned::OwnedTensorArg;
pub use result::TensorResult;
pub use tensor_arg::TensorArg;
