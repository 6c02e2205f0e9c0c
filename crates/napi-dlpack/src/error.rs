//! One error type for the whole crate. Every variant has a stable string code that the JS
//! layer puts on `Error.code`; docs/api.md lists them all, so renaming one is a breaking change.

use core::fmt;

/// What went wrong. [`ErrorKind::code`] is the stable identifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
  /// A NULL `DLManagedTensor*` / `DLManagedTensorVersioned*` was handed over.
  NullTensor,
  /// A versioned tensor whose major version this crate does not implement.
  Version,
  /// `ndim` negative or above [`crate::MAX_NDIM`].
  Ndim,
  /// `shape` is NULL while `ndim > 0`.
  NullShape,
  /// A negative dimension.
  Shape,
  /// Element count, byte span or address arithmetic overflowed.
  Overflow,
  /// `data` is NULL but the tensor has elements.
  NullData,
  /// `data + byte_offset` (or the lowest element address) is outside the address space.
  ByteOffset,
  /// Invalid or unsupported `DLDataType` (lanes, bits, code).
  Dtype,
  /// Unknown device type or negative device id.
  Device,
  /// Typed access with a Rust type whose dtype differs from the tensor's.
  DtypeMismatch,
  /// The operation needs a C-contiguous tensor.
  NotContiguous,
  /// Mutable access to a READ_ONLY tensor, or read-only data exported where the flag is lost.
  ReadOnly,
  /// Host access to memory that is not host-accessible.
  NotCpu,
  /// The data pointer is not aligned for the element type, or a managed tensor pointer is not
  /// aligned for its struct.
  Misaligned,
  /// A `bool` tensor holding bytes other than 0 and 1.
  InvalidBool,
  /// Inconsistent export metadata (strides and shape of different lengths, ...).
  InvalidLayout,
  /// A value that is not a capsule was given where a capsule is required.
  NotACapsule,
  /// The capsule has already been consumed.
  CapsuleConsumed,
  /// The capsule payload has an ABI version this crate does not understand.
  CapsuleAbi,
  /// A Node-API call failed.
  Napi,
  /// An allocation failed.
  NoMemory,
  /// A bad argument (wrong type or value) from the caller.
  InvalidArgument,
  /// The request needs a copy but the caller asked for none (`copy: false`).
  CopyRequired,
  /// The tensor was disposed.
  Disposed,
  /// The JS ArrayBuffer behind the tensor was detached (transferred).
  Detached,
  /// A tensor handle id (`Tensor#id`, `Tensor#native`) that names no live tensor of this JS
  /// thread: its tensor was disposed or collected, or it is another (or a finished) thread's.
  StaleId,
  /// No usable CUDA driver.
  CudaUnavailable,
  /// A CUDA driver call failed.
  Cuda,
  /// A stream value the protocol forbids for this device.
  Stream,
  /// The memory is larger than the runtime's largest ArrayBuffer, so it cannot be viewed (or
  /// copied) as one; export still works, and windows of it can be viewed.
  TooLarge,
  /// A transfer token (a tensor handed to another JS thread) that is not pending: claimed
  /// already, released, or its sending thread ended before the claim.
  TransferClaimed,
  /// (JS library adapters) An Arrow column with nulls, which a tensor cannot hold.
  Nulls,
  /// (JS library adapters) A library's element type with no DLPack dtype (ORT `string`, Arrow
  /// `Utf8`, ...), or a dtype the library has no type for.
  UnsupportedDtype,
  /// Typed access to memory that another live slice or view lends out in a conflicting way:
  /// two arguments over the same memory, one of them written (see `crate::aliasing`).
  Aliased,
}

impl ErrorKind {
  /// The stable string code, as thrown to JS on `error.code`.
  pub const fn code(self) -> &'static str {
    match self {
      ErrorKind::NullTensor => "ERR_DLPACK_NULL_TENSOR",
      ErrorKind::Version => "ERR_DLPACK_VERSION",
      ErrorKind::Ndim => "ERR_DLPACK_NDIM",
      ErrorKind::NullShape => "ERR_DLPACK_NULL_SHAPE",
      ErrorKind::Shape => "ERR_DLPACK_SHAPE",
      ErrorKind::Overflow => "ERR_DLPACK_OVERFLOW",
      ErrorKind::NullData => "ERR_DLPACK_NULL_DATA",
      ErrorKind::ByteOffset => "ERR_DLPACK_BYTE_OFFSET",
      ErrorKind::Dtype => "ERR_DLPACK_DTYPE",
      ErrorKind::Device => "ERR_DLPACK_DEVICE",
      ErrorKind::DtypeMismatch => "ERR_DLPACK_DTYPE_MISMATCH",
      ErrorKind::NotContiguous => "ERR_DLPACK_NOT_CONTIGUOUS",
      ErrorKind::ReadOnly => "ERR_DLPACK_READ_ONLY",
      ErrorKind::NotCpu => "ERR_DLPACK_NOT_CPU",
      ErrorKind::Misaligned => "ERR_DLPACK_MISALIGNED",
      ErrorKind::InvalidBool => "ERR_DLPACK_INVALID_BOOL",
      ErrorKind::InvalidLayout => "ERR_DLPACK_INVALID_LAYOUT",
      ErrorKind::NotACapsule => "ERR_DLPACK_NOT_A_CAPSULE",
      ErrorKind::CapsuleConsumed => "ERR_DLPACK_CAPSULE_CONSUMED",
      ErrorKind::CapsuleAbi => "ERR_DLPACK_CAPSULE_ABI",
      ErrorKind::Napi => "ERR_DLPACK_NAPI",
      ErrorKind::NoMemory => "ERR_DLPACK_NO_MEMORY",
      ErrorKind::InvalidArgument => "ERR_DLPACK_INVALID_ARGUMENT",
      ErrorKind::CopyRequired => "ERR_DLPACK_COPY_REQUIRED",
      ErrorKind::Disposed => "ERR_TENSOR_DISPOSED",
      ErrorKind::Detached => "ERR_TENSOR_DETACHED",
      ErrorKind::StaleId => "ERR_TENSOR_STALE_ID",
      ErrorKind::CudaUnavailable => "ERR_CUDA_UNAVAILABLE",
      ErrorKind::Cuda => "ERR_CUDA",
      ErrorKind::Stream => "ERR_DLPACK_STREAM",
      ErrorKind::TooLarge => "ERR_DLPACK_TOO_LARGE",
      ErrorKind::TransferClaimed => "ERR_DLPACK_TRANSFER_CLAIMED",
      ErrorKind::Nulls => "ERR_DLPACK_NULLS",
      ErrorKind::UnsupportedDtype => "ERR_DLPACK_UNSUPPORTED_DTYPE",
      ErrorKind::Aliased => "ERR_DLPACK_ALIASED",
    }
  }
}

impl ErrorKind {
  /// Every kind, in declaration order (the error table of docs/api.md and of `lib/errors.ts`).
  pub const ALL: [ErrorKind; 35] = [
    ErrorKind::NullTensor,
    ErrorKind::Version,
    ErrorKind::Ndim,
    ErrorKind::NullShape,
    ErrorKind::Shape,
    ErrorKind::Overflow,
    ErrorKind::NullData,
    ErrorKind::ByteOffset,
    ErrorKind::Dtype,
    ErrorKind::Device,
    ErrorKind::DtypeMismatch,
    ErrorKind::NotContiguous,
    ErrorKind::ReadOnly,
    ErrorKind::NotCpu,
    ErrorKind::Misaligned,
    ErrorKind::InvalidBool,
    ErrorKind::InvalidLayout,
    ErrorKind::NotACapsule,
    ErrorKind::CapsuleConsumed,
    ErrorKind::CapsuleAbi,
    ErrorKind::Napi,
    ErrorKind::NoMemory,
    ErrorKind::InvalidArgument,
    ErrorKind::CopyRequired,
    ErrorKind::Disposed,
    ErrorKind::Detached,
    ErrorKind::StaleId,
    ErrorKind::CudaUnavailable,
    ErrorKind::Cuda,
    ErrorKind::Stream,
    ErrorKind::TooLarge,
    ErrorKind::TransferClaimed,
    ErrorKind::Nulls,
    ErrorKind::UnsupportedDtype,
    ErrorKind::Aliased,
  ];

  /// The family this kind belongs to: what a caller can do about it, and the JS error class
  /// napi-dlpack throws it as (`lib/errors.ts` takes its table from here).
  pub const fn class(self) -> ErrorClass {
    match self {
      ErrorKind::NullTensor
      | ErrorKind::Version
      | ErrorKind::Ndim
      | ErrorKind::NullShape
      | ErrorKind::Shape
      | ErrorKind::Overflow
      | ErrorKind::NullData
      | ErrorKind::ByteOffset
      | ErrorKind::Dtype
      | ErrorKind::InvalidLayout
      | ErrorKind::Misaligned
      | ErrorKind::InvalidBool => ErrorClass::InvalidTensor,
      // A tensor of the wrong type or layout for the function it was passed to: an argument
      // error, as nanobind raises TypeError for an ndarray that fails a function's constraints.
      ErrorKind::DtypeMismatch
      | ErrorKind::NotContiguous
      | ErrorKind::InvalidArgument
      | ErrorKind::UnsupportedDtype
      | ErrorKind::Aliased => ErrorClass::Type,
      // The exchange cannot be done as asked; an allocation refused for a copy is the sibling
      // of a copy larger than the runtime's largest ArrayBuffer (TooLarge).
      ErrorKind::Device
      | ErrorKind::NotCpu
      | ErrorKind::CopyRequired
      | ErrorKind::Stream
      | ErrorKind::TooLarge
      | ErrorKind::NoMemory
      | ErrorKind::Nulls => ErrorClass::Buffer,
      ErrorKind::NotACapsule
      | ErrorKind::CapsuleConsumed
      | ErrorKind::CapsuleAbi
      | ErrorKind::TransferClaimed => ErrorClass::Capsule,
      ErrorKind::ReadOnly => ErrorClass::ReadOnly,
      ErrorKind::Disposed | ErrorKind::Detached | ErrorKind::StaleId => ErrorClass::Disposed,
      ErrorKind::CudaUnavailable | ErrorKind::Cuda => ErrorClass::Cuda,
      ErrorKind::Napi => ErrorClass::NodeApi,
    }
  }
}

/// Families of errors, one JS error class each (all subclasses of `DLPackError`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorClass {
  /// The exchange cannot be done as asked (device, stream, a forbidden or impossible copy).
  Buffer,
  /// Not a capsule, a consumed one, or one of an unknown ABI; nothing was consumed.
  Capsule,
  /// A foreign tensor's metadata failed validation (its deleter has run).
  InvalidTensor,
  /// The tensor was disposed, or its ArrayBuffer detached.
  Disposed,
  /// Write access to read-only data.
  ReadOnly,
  /// An argument of the wrong type or value.
  Type,
  /// CUDA is unavailable or a driver call failed.
  Cuda,
  /// A Node-API call failed: the runtime refused an operation.
  NodeApi,
}

impl ErrorClass {
  /// Every class.
  pub const ALL: [ErrorClass; 8] = [
    ErrorClass::Buffer,
    ErrorClass::Capsule,
    ErrorClass::InvalidTensor,
    ErrorClass::Disposed,
    ErrorClass::ReadOnly,
    ErrorClass::Type,
    ErrorClass::Cuda,
    ErrorClass::NodeApi,
  ];

  /// The name of the JS class (exported by the npm package).
  pub const fn js_name(self) -> &'static str {
    match self {
      ErrorClass::Buffer => "BufferError",
      ErrorClass::Capsule => "CapsuleError",
      ErrorClass::InvalidTensor => "InvalidTensorError",
      ErrorClass::Disposed => "TensorDisposedError",
      ErrorClass::ReadOnly => "ReadOnlyError",
      ErrorClass::Type => "DLPackTypeError",
      ErrorClass::Cuda => "CudaError",
      ErrorClass::NodeApi => "NodeApiError",
    }
  }
}

/// The crate's error: a kind with a stable code, and a message for people.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DLPackError {
  kind: ErrorKind,
  message: String,
}

impl DLPackError {
  pub fn new(kind: ErrorKind, message: impl Into<String>) -> DLPackError {
    DLPackError {
      kind,
      message: message.into(),
    }
  }

  pub fn kind(&self) -> ErrorKind {
    self.kind
  }

  /// The stable code, e.g. `"ERR_DLPACK_NDIM"`.
  pub fn code(&self) -> &'static str {
    self.kind.code()
  }

  pub fn message(&self) -> &str {
    &self.message
  }
}

impl fmt::Display for DLPackError {
  fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    write!(f, "{}: {}", self.kind.code(), self.message)
  }
}

impl std::error::Error for DLPackError {}

#[cfg(feature = "napi")]
impl From<DLPackError> for napi::Error<&'static str> {
  fn from(err: DLPackError) -> napi::Error<&'static str> {
    // napi-rs creates the JS error with `napi_create_error(code = status, msg = reason)`, so
    // the stable code lands on `error.code`.
    napi::Error::new(err.kind.code(), err.message)
  }
}

#[cfg(feature = "napi")]
impl<S: AsRef<str>> From<napi::Error<S>> for DLPackError {
  /// Lets addon code use `?` on napi-rs calls and crate calls alike, with `DLPackError` as the
  /// error type (`ERR_DLPACK_NAPI`, keeping napi's status and message).
  fn from(err: napi::Error<S>) -> DLPackError {
    DLPackError::new(
      ErrorKind::Napi,
      format!("{}: {}", err.status.as_ref(), err.reason),
    )
  }
}

/// Shorthand used throughout the crate.
pub type Result<T, E = DLPackError> = core::result::Result<T, E>;

#[cfg(test)]
mod tests {
  use super::{ErrorClass, ErrorKind};

  /// `ALL` lists every kind: as many entries as `code()` has arms, each code once.
  #[test]
  fn all_lists_every_kind_once() {
    let arms = include_str!("error.rs")
      .matches(concat!("=> \"", "ERR_"))
      .count();
    assert_eq!(ErrorKind::ALL.len(), arms);
    let mut codes: Vec<&str> = ErrorKind::ALL.iter().map(|kind| kind.code()).collect();
    codes.sort_unstable();
    codes.dedup();
    assert_eq!(codes.len(), ErrorKind::ALL.len());
  }

  #[test]
  fn every_class_has_a_kind_and_a_distinct_name() {
    for class in ErrorClass::ALL {
      assert!(
        ErrorKind::ALL.iter().any(|kind| kind.class() == class),
        "{class:?}"
      );
    }
    let mut names: Vec<&str> = ErrorClass::ALL.iter().map(|c| c.js_name()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), ErrorClass::ALL.len());
  }
}
