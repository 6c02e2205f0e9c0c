//! Import: a validated, owning handle to a tensor that came from untrusted foreign code.

use core::ffi::c_void;

use crate::device::Device;
use crate::dtype::DType;
use crate::error::{DLPackError, ErrorKind};
use crate::ffi::{
  DLManagedTensor, DLManagedTensorVersioned, DLPackVersion, DLPACK_FLAG_BITMASK_IS_COPIED,
  DLPACK_FLAG_BITMASK_READ_ONLY, DLPACK_MAJOR_VERSION,
};
use crate::layout::{write_row_major_strides, Layout, MAX_NDIM};
use crate::managed::ManagedTensor;
use crate::validation::validate;

/// A foreign tensor that passed validation. It owns the producer's managed struct and calls the
/// deleter exactly once when dropped; if validation fails the deleter runs before the error is
/// returned, so no path leaks or double-frees.
#[derive(Debug)]
pub struct ForeignTensor {
  managed: ManagedTensor,
  layout: Layout,
  /// Row-major strides synthesised for producers that sent `strides == NULL` (pre-1.2), first
  /// `ndim` entries used; the common path does not allocate. A fixed-size array keeps the
  /// pointer thin (8 bytes instead of a slice's 16), which every import pays for in moves.
  synthesized_strides: Option<Box<[i64; MAX_NDIM]>>,
}

#[cfg(target_pointer_width = "64")]
const _: () = assert!(core::mem::size_of::<ForeignTensor>() == 64);

impl ForeignTensor {
  /// Validates and takes `managed`. On error `managed` has been dropped (deleter called).
  #[inline(always)]
  pub fn new(managed: ManagedTensor) -> Result<ForeignTensor, DLPackError> {
    let version = managed.version();
    if let Some(version) = version {
      if version.major != DLPACK_MAJOR_VERSION {
        // Only the deleter may be touched now; `managed` drops at the return and calls it.
        return Err(DLPackError::new(
          ErrorKind::Version,
          format!(
            "DLPack major version {} is not supported (this consumer implements {}.x)",
            version.major, DLPACK_MAJOR_VERSION
          ),
        ));
      }
    }
    let flags = managed.flags();
    // SAFETY: major version checked above, so the DLTensor is at the known offset; shape and
    // strides readability is the producer's DLPack contract.
    let layout = unsafe { validate(managed.dl_tensor(), flags)? };
    let synthesized_strides = if layout.strides_were_null() {
      // SAFETY: validated above.
      Some(synthesize_strides(unsafe {
        shape_of(&managed, layout.ndim())
      })?)
    } else {
      None
    };
    Ok(ForeignTensor {
      managed,
      layout,
      synthesized_strides,
    })
  }

  /// Takes ownership of a raw versioned tensor and validates it.
  ///
  /// # Safety
  /// See [`ManagedTensor::from_raw_versioned`]; ownership moves in even when this fails.
  pub unsafe fn from_raw_versioned(
    ptr: *mut DLManagedTensorVersioned,
  ) -> Result<ForeignTensor, DLPackError> {
    // SAFETY: forwarded contract.
    ForeignTensor::new(unsafe { ManagedTensor::from_raw_versioned(ptr)? })
  }

  /// Takes ownership of a raw legacy tensor and validates it.
  ///
  /// # Safety
  /// See [`ManagedTensor::from_raw_legacy`]; ownership moves in even when this fails.
  pub unsafe fn from_raw_legacy(ptr: *mut DLManagedTensor) -> Result<ForeignTensor, DLPackError> {
    // SAFETY: forwarded contract.
    ForeignTensor::new(unsafe { ManagedTensor::from_raw_legacy(ptr)? })
  }

  /// Gives the managed struct back (for instance to re-export it unchanged).
  pub fn into_managed(self) -> ManagedTensor {
    self.managed
  }

  pub fn managed(&self) -> &ManagedTensor {
    &self.managed
  }

  pub fn layout(&self) -> &Layout {
    &self.layout
  }

  pub fn dtype(&self) -> DType {
    self.layout.dtype()
  }

  pub fn device(&self) -> Device {
    self.layout.device()
  }

  pub fn ndim(&self) -> usize {
    self.layout.ndim()
  }

  pub fn numel(&self) -> usize {
    self.layout.numel()
  }

  /// Bytes covered from the lowest to the highest element (equals `numel * itemsize` for
  /// contiguous tensors).
  pub fn span_bytes(&self) -> usize {
    self.layout.span_bytes()
  }

  pub fn shape(&self) -> &[i64] {
    // SAFETY: validated in `new`: non-NULL, aligned and `ndim` long when ndim > 0.
    unsafe { shape_of(&self.managed, self.layout.ndim()) }
  }

  /// Strides in elements; synthesised row-major strides when the producer sent NULL.
  pub fn strides(&self) -> &[i64] {
    if let Some(strides) = &self.synthesized_strides {
      return &strides[..self.layout.ndim()];
    }
    if self.layout.ndim() == 0 {
      return &[];
    }
    // SAFETY: non-NULL (otherwise `synthesized_strides` is set), aligned, `ndim` long.
    unsafe { core::slice::from_raw_parts(self.managed.dl_tensor().strides, self.layout.ndim()) }
  }

  /// Whether the producer sent `strides == NULL`.
  pub fn strides_were_null(&self) -> bool {
    self.layout.strides_were_null()
  }

  /// The producer's `data` pointer (before `byte_offset`).
  pub fn raw_data(&self) -> *mut c_void {
    // SAFETY: version checked in `new`.
    unsafe { self.managed.dl_tensor() }.data
  }

  pub fn byte_offset(&self) -> u64 {
    // SAFETY: version checked in `new`.
    unsafe { self.managed.dl_tensor() }.byte_offset
  }

  /// Address of the first element (`data + byte_offset`), derived from the producer's pointer
  /// (not from the validated address, an integer) so that it keeps the pointer's provenance.
  pub fn data_ptr(&self) -> *mut u8 {
    // `data + byte_offset` was checked not to wrap during validation.
    self
      .raw_data()
      .cast::<u8>()
      .wrapping_add(self.byte_offset() as usize)
  }

  /// Row-major contiguous (size-1 dimensions and empty tensors tolerated).
  pub fn is_contiguous(&self) -> bool {
    self.layout.is_c_contiguous()
  }

  /// The versioned flags (0 for legacy tensors), read from the producer's struct: a tensor
  /// stays small by not copying what it can look up.
  pub fn flags(&self) -> u64 {
    self.managed.flags()
  }

  /// `None` for legacy tensors.
  pub fn version(&self) -> Option<DLPackVersion> {
    self.managed.version()
  }

  pub fn is_versioned(&self) -> bool {
    self.managed.is_versioned()
  }

  pub fn is_read_only(&self) -> bool {
    self.flags() & DLPACK_FLAG_BITMASK_READ_ONLY != 0
  }

  pub fn is_copied(&self) -> bool {
    self.flags() & DLPACK_FLAG_BITMASK_IS_COPIED != 0
  }
}

/// Row-major strides for a producer that sent none (pre-1.2). Out of line: the common path,
/// with strides, stays smaller.
#[cold]
#[inline(never)]
fn synthesize_strides(shape: &[i64]) -> Result<Box<[i64; MAX_NDIM]>, DLPackError> {
  let mut stored = Box::new([0i64; MAX_NDIM]);
  // `shape` has at most MAX_NDIM entries: validated.
  if !write_row_major_strides(shape, &mut stored[..shape.len()]) {
    return Err(DLPackError::new(ErrorKind::Overflow, "strides overflow"));
  }
  Ok(stored)
}

/// # Safety
/// `managed` must have passed `validate` with this `ndim`.
unsafe fn shape_of(managed: &ManagedTensor, ndim: usize) -> &[i64] {
  if ndim == 0 {
    return &[];
  }
  // SAFETY: validated: non-NULL, aligned, `ndim` elements.
  unsafe { core::slice::from_raw_parts(managed.dl_tensor().shape, ndim) }
}
