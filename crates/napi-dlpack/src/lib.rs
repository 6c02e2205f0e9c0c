//! # napi-dlpack
//!
//! DLPack 1.3 for Node.js addons written with napi-rs: the FFI structs, validated import of
//! untrusted tensors ([`ForeignTensor`]), sound export of owned Rust values ([`IntoDLPack`]),
//! typed consumer access ([`FromDLPack`]), and — with the default `napi` feature — the Node
//! capsule ABI ([`capsule`]) that lets any addon in the process exchange tensors with any
//! other through JavaScript, with no copy.
//!
//! Everything except [`capsule`] is plain Rust and builds and tests without Node. The `cuda`
//! feature adds `cuda`: device memory, stream hand-overs and import checks through cudarc,
//! with the driver loaded at run time (it builds without a CUDA toolkit).
//!
//! ```
//! use napi_dlpack::{export_versioned, ForeignTensor};
//!
//! let exported = export_versioned(vec![1.0f32, 2.0, 3.0]).unwrap();
//! let tensor = ForeignTensor::new(exported).unwrap(); // validates, owns, frees once
//! assert_eq!(tensor.as_slice::<f32>().unwrap(), &[1.0, 2.0, 3.0]);
//! ```

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

#[cfg(feature = "napi")]
pub mod arg;
#[cfg(feature = "napi")]
pub mod capsule;
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
pub mod managed;
pub mod validation;
pub mod view;

pub use device::{Device, DeviceType};
pub use dtype::{DType, DataTypeCode, Element};
pub use error::{DLPackError, ErrorKind};
pub use export::{
  export, export_legacy, export_versioned, take_owner, ExportFormat, IntoDLPack, ShapedBuffer,
  TensorInfo,
};
pub use import::ForeignTensor;
pub use managed::{ManagedPtr, ManagedTensor};
pub use validation::{Layout, MAX_NDIM};
pub use view::{FromDLPack, FromDLPackMut, StridedView, StridedViewMut};
