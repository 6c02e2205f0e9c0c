#![doc = include_str!("../README.md")]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod aliasing;
/// The Node-API part (typed `#[napi]` arguments, capsules, the exchange table, library
/// adapters): everything that calls into a JS engine, behind the `napi` feature, beside the
/// engine-free core. Its modules are re-exported at the root, where users import them.
#[cfg(feature = "napi")]
mod node;
#[cfg(feature = "napi")]
pub use node::{adapter, arg, capsule, exchange, hot, id_slots, thread_key};
pub mod convert;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod device;
pub mod dtype;
pub mod error;
pub mod export;
pub mod ffi;
pub mod import;
pub mod layout;
pub mod managed;
pub mod validation;
pub mod view;
pub mod view_layout;

/// The Rust blocks of the addon guide (`docs/addons.md` in the repository) compile as doctests
/// of this crate, so the guide cannot drift from the API. Only under `cfg(doctest)`: the file is
/// outside the packaged crate, and `include_str!` of an item that is configured out is never
/// expanded.
#[cfg(all(doctest, feature = "napi"))]
#[doc = include_str!("../../../docs/addons.md")]
pub struct AddonGuide;

/// The README's addon example (the repository's `README.md`), compiled the same way.
#[cfg(all(doctest, feature = "napi"))]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeExample;

pub use device::{Device, DeviceType};
pub use dtype::{DType, DataTypeCode, Element};
pub use error::{DLPackError, ErrorClass, ErrorKind};
pub use export::{
  export, export_legacy, export_versioned, take_owner, ExportFormat, IntoDLPack, ShapedBuffer,
  TensorInfo,
};
pub use import::ForeignTensor;
pub use layout::{Layout, MAX_NDIM};
pub use managed::{ManagedPtr, ManagedTensor};
pub use view::{
  BorrowedSlice, BorrowedSliceMut, FromDLPack, FromDLPackMut, StridedView, StridedViewMut,
};
