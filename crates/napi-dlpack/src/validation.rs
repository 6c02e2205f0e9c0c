//! Validation of untrusted `DLTensor` metadata: the pointers, counts and codes a producer
//! hands over are checked here, once, before anything is read through them. The layout
//! arithmetic the checks rely on (element count, byte span, address range, contiguity) is the
//! `layout` module's, shared with export and the copies.

use crate::device::Device;
use crate::dtype::DType;
use crate::error::{DLPackError, ErrorKind};
use crate::ffi::DLTensor;
use crate::layout::layout_of_matching;
// Moved to `layout`; re-exported so that existing `validation::` paths keep compiling.
#[doc(hidden)]
pub use crate::layout::{
  contiguous_strides, fill_contiguous_strides, is_f_contiguous, layout_of, write_row_major_strides,
  Layout, MAX_NDIM,
};

#[cold]
#[inline(never)]
fn err(kind: ErrorKind, message: impl Into<String>) -> DLPackError {
  DLPackError::new(kind, message)
}

/// Validates `tensor` (with the versioned `flags`, 0 for legacy tensors).
///
/// # Safety
/// `tensor.shape` (when `ndim > 0`) must point to `ndim` readable `i64`s, and `tensor.strides`
/// (when non-NULL and `ndim > 0`) likewise — the DLPack contract of the producer. NULL pointers
/// are detected here; dangling ones cannot be.
#[inline(always)]
pub unsafe fn validate(tensor: &DLTensor, flags: u64) -> Result<Layout, DLPackError> {
  let device = Device::from_dl(tensor.device)?;
  let dtype = DType::from_dl(tensor.dtype, flags)?;
  if tensor.ndim < 0 || tensor.ndim as usize > MAX_NDIM {
    return Err(err(
      ErrorKind::Ndim,
      format!("ndim {} is outside 0..={MAX_NDIM}", tensor.ndim),
    ));
  }
  let ndim = tensor.ndim as usize;
  let shape: &[i64] = if ndim == 0 {
    &[]
  } else {
    if tensor.shape.is_null() {
      return Err(err(
        ErrorKind::NullShape,
        format!("shape is NULL with ndim {ndim}"),
      ));
    }
    if !tensor.shape.is_aligned() {
      return Err(err(
        ErrorKind::InvalidLayout,
        "shape pointer is not aligned for int64",
      ));
    }
    // SAFETY: non-NULL, aligned, `ndim` elements readable per the caller's contract.
    unsafe { core::slice::from_raw_parts(tensor.shape, ndim) }
  };
  let strides: Option<&[i64]> = if ndim == 0 || tensor.strides.is_null() {
    None
  } else {
    if !tensor.strides.is_aligned() {
      return Err(err(
        ErrorKind::InvalidLayout,
        "strides pointer is not aligned for int64",
      ));
    }
    // SAFETY: non-NULL, aligned, `ndim` elements readable per the caller's contract.
    Some(unsafe { core::slice::from_raw_parts(tensor.strides, ndim) })
  };
  let first_element = (tensor.data as usize as u64)
    .checked_add(tensor.byte_offset)
    .filter(|address| usize::try_from(*address).is_ok())
    .ok_or_else(|| {
      err(
        ErrorKind::ByteOffset,
        "data + byte_offset overflows the address space",
      )
    })? as usize;
  // `shape` and `strides` were both made `ndim` long above.
  let layout = layout_of_matching(dtype, device, shape, strides, first_element)?;
  if layout.numel() > 0 && tensor.data.is_null() {
    return Err(err(
      ErrorKind::NullData,
      format!(
        "data is NULL but the tensor has {} elements",
        layout.numel()
      ),
    ));
  }
  Ok(layout)
}
