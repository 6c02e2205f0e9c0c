#![doc = include_str!("../README.md")]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

#[cfg(feature = "napi")]
pub mod adapter;
pub mod aliasing;
#[cfg(feature = "napi")]
pub mod arg;
#[cfg(feature = "napi")]
pub mod capsule;
pub mod convert;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod device;
pub mod dtype;
pub mod error;
#[cfg(feature = "napi")]
pub mod exchange;
pub mod export;
pub mod ffi;
pub mod import;
pub mod layout;
pub mod managed;
pub mod validation;
pub mod view;
pub mod view_layout;

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
