//! Validation of untrusted `DLTensor` metadata. Everything a consumer later relies on (element
//! count, byte span, address range, contiguity) is computed here once, with checked
//! arithmetic, so that no later access can overflow or read outside the span.

use crate::device::Device;
use crate::dtype::DType;
use crate::error::{DLPackError, ErrorKind};
use crate::ffi::DLTensor;

/// The largest `ndim` accepted on import and export. NumPy's limit is 64 as well; deeper
/// tensors are rejected with `ERR_DLPACK_NDIM` rather than risking huge stack or heap use.
pub const MAX_NDIM: usize = 64;

/// Facts about a tensor's layout, established by [`validate`] (or [`layout_of`]).
///
/// Kept to 48 bytes: an imported tensor carries one, and every byte of it is written and
/// moved on each import. Derived values (the highest offset, the byte span) are computed on
/// request from the stored ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
  /// `data + byte_offset`: the address (or device handle value) of the first element.
  first_element: usize,
  numel: usize,
  min_offset: i64,
  max_offset: i64,
  device: Device,
  dtype: DType,
  ndim: u8,
  c_contiguous: bool,
  strides_null: bool,
}

#[cfg(target_pointer_width = "64")]
const _: () = assert!(core::mem::size_of::<Layout>() == 48);

impl Layout {
  pub fn dtype(&self) -> DType {
    self.dtype
  }

  pub fn device(&self) -> Device {
    self.device
  }

  /// Number of dimensions (at most [`MAX_NDIM`]).
  pub fn ndim(&self) -> usize {
    usize::from(self.ndim)
  }

  /// Number of elements (product of the shape).
  pub fn numel(&self) -> usize {
    self.numel
  }

  /// Offset, in elements and relative to the first element, of the lowest-addressed element
  /// (≤ 0; negative strides make it negative). 0 when the tensor is empty.
  pub fn min_offset(&self) -> i64 {
    self.min_offset
  }

  /// Offset of the highest-addressed element (≥ 0). 0 when the tensor is empty.
  pub fn max_offset(&self) -> i64 {
    self.max_offset
  }

  /// Bytes from the lowest to the end of the highest-addressed element; 0 when empty.
  pub fn span_bytes(&self) -> usize {
    if self.numel == 0 {
      return 0;
    }
    // Checked in `layout_of_matching` to be at most isize::MAX.
    (self.max_offset - self.min_offset + 1) as usize * self.dtype.itemsize()
  }

  /// `data + byte_offset`: the address (or device handle value) of the first element.
  pub fn first_element(&self) -> usize {
    self.first_element
  }

  /// Row-major contiguous, ignoring the strides of size-1 dimensions (and any strides when
  /// the tensor has at most one element).
  pub fn is_c_contiguous(&self) -> bool {
    self.c_contiguous
  }

  /// No strides were given (`strides == NULL` from a pre-1.2 producer: row-major).
  pub fn strides_were_null(&self) -> bool {
    self.strides_null
  }

  /// Address of the lowest-addressed byte of the span.
  pub fn span_start(&self) -> usize {
    // Cannot overflow: `validate` checked `first_element + min_offset * itemsize` for pointer
    // devices, and for other devices min_offset * itemsize was checked against i64.
    (self.first_element as i64).wrapping_add(self.min_offset * self.dtype.itemsize() as i64)
      as usize
  }
}

#[cold]
#[inline(never)]
fn err(kind: ErrorKind, message: impl Into<String>) -> DLPackError {
  DLPackError::new(kind, message)
}

#[cold]
#[inline(never)]
fn overflow(what: &str) -> DLPackError {
  err(ErrorKind::Overflow, format!("{what} overflows"))
}

/// Names the first negative dimension of `shape`. Found again here, off the hot path, so the
/// loop that detects it keeps no axis counter alive.
#[cold]
#[inline(never)]
fn negative_dimension(shape: &[i64]) -> DLPackError {
  let (axis, dim) = shape
    .iter()
    .enumerate()
    .find(|(_, dim)| **dim < 0)
    .map_or((0, 0), |(axis, dim)| (axis, *dim));
  err(
    ErrorKind::Shape,
    format!("dimension {axis} is negative ({dim})"),
  )
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

/// Computes and checks the layout of `shape`/`strides` (`None` = C-contiguous) for a tensor
/// whose first element is at `first_element`. Shared by import validation and export, so it is
/// written for speed: one pass for the element count, one comparing the strides with the
/// row-major ones, and the extent arithmetic only for strides that are not row-major.
#[inline(always)]
pub fn layout_of(
  dtype: DType,
  device: Device,
  shape: &[i64],
  strides: Option<&[i64]>,
  first_element: usize,
) -> Result<Layout, DLPackError> {
  let ndim = shape.len();
  if ndim > MAX_NDIM {
    return Err(err(
      ErrorKind::Ndim,
      format!("ndim {ndim} is above {MAX_NDIM}"),
    ));
  }
  if let Some(strides) = strides {
    if strides.len() != ndim {
      return Err(err(
        ErrorKind::InvalidLayout,
        format!("{} strides for {ndim} dimensions", strides.len()),
      ));
    }
  }
  layout_of_matching(dtype, device, shape, strides, first_element)
}

/// [`layout_of`] for strides already known to have one entry per dimension (a mismatch can
/// only make the result wrong, never unsafe: the zip below stops at the shorter slice).
#[inline(always)]
fn layout_of_matching(
  dtype: DType,
  device: Device,
  shape: &[i64],
  strides: Option<&[i64]>,
  first_element: usize,
) -> Result<Layout, DLPackError> {
  let ndim = shape.len();
  let itemsize = dtype.itemsize() as i64;
  let mut numel: i64 = 1;
  for &dim in shape {
    if dim < 0 {
      return Err(negative_dimension(shape));
    }
    numel = numel
      .checked_mul(dim)
      .ok_or_else(|| overflow("element count"))?;
  }
  let (mut min_offset, mut max_offset) = (0i64, 0i64);
  let mut c_contiguous = true;
  // Strides of an empty tensor address nothing, so they are not looked at (garbage strides
  // on a zero-size tensor are legal and must not overflow anything).
  if numel > 0 {
    // Row-major strides are the common case and need no extent arithmetic: size-1 dimensions
    // reach nothing whatever their stride, so the elements span offsets 0..numel.
    if let Some(strides) = strides {
      c_contiguous = is_row_major(shape, strides);
    }
    if c_contiguous {
      max_offset = numel - 1;
    } else if let Some(strides) = strides {
      (min_offset, max_offset) = stride_extent(shape, strides)?;
    }
  }
  let span_bytes = if numel == 0 {
    0
  } else {
    max_offset
      .checked_sub(min_offset)
      .and_then(|elements| elements.checked_add(1))
      .and_then(|elements| elements.checked_mul(itemsize))
      .filter(|bytes| *bytes <= isize::MAX as i64)
      .ok_or_else(|| overflow("byte span"))?
  };
  if numel > 0 && device.device_type.data_is_address() {
    // The lowest and highest bytes touched must be addresses: no wrap below 0 or past the end.
    // The bytes below the first element, -min_offset * itemsize, are part of the span, which
    // was checked against isize::MAX above, so neither product below can overflow.
    let below = min_offset.unsigned_abs() as usize * itemsize as usize;
    let from_first = span_bytes as usize - below;
    if first_element < below || first_element.checked_add(from_first).is_none() {
      return Err(err(
        ErrorKind::ByteOffset,
        "the elements' addresses fall outside the address space",
      ));
    }
  }
  Ok(Layout {
    first_element,
    numel: usize::try_from(numel).map_err(|_| overflow("element count"))?,
    min_offset,
    max_offset,
    device,
    dtype,
    ndim: ndim as u8, // ≤ MAX_NDIM: checked by both callers
    c_contiguous: numel <= 1 || c_contiguous,
    strides_null: strides.is_none() && ndim > 0,
  })
}

/// Row-major contiguity of a tensor with elements (every dimension ≥ 1), ignoring the strides
/// of size-1 dimensions. The running product of dimensions cannot overflow: it stays at most
/// the element count, which the caller computed with checked arithmetic.
#[inline(always)]
fn is_row_major(shape: &[i64], strides: &[i64]) -> bool {
  let mut expected = 1i64;
  for (&dim, &stride) in shape.iter().zip(strides).rev() {
    if dim != 1 {
      if stride != expected {
        return false;
      }
      expected *= dim;
    }
  }
  true
}

/// Offsets (in elements, relative to the first element) of the lowest and highest elements a
/// tensor with elements reaches through `strides`, negative and zero strides included.
#[inline(always)]
fn stride_extent(shape: &[i64], strides: &[i64]) -> Result<(i64, i64), DLPackError> {
  let (mut min_offset, mut max_offset) = (0i64, 0i64);
  for (&dim, &stride) in shape.iter().zip(strides) {
    let reach = (dim - 1)
      .checked_mul(stride)
      .ok_or_else(|| overflow("stride extent"))?;
    let bound = if reach < 0 {
      &mut min_offset
    } else {
      &mut max_offset
    };
    *bound = bound
      .checked_add(reach)
      .ok_or_else(|| overflow("stride extent"))?;
  }
  Ok((min_offset, max_offset))
}

/// Column-major contiguity, with the same tolerance for size-1 dimensions and tensors of at
/// most one element as [`Layout::is_c_contiguous`].
pub fn is_f_contiguous(shape: &[i64], strides: &[i64]) -> bool {
  if shape.iter().product::<i64>() <= 1 {
    return true;
  }
  let mut expected = 1i64;
  for (&dim, &stride) in shape.iter().zip(strides) {
    if dim != 1 {
      if stride != expected {
        return false;
      }
      expected = expected.saturating_mul(dim);
    }
  }
  true
}

/// Row-major strides (in elements) for `shape`; `None` if the product overflows.
pub fn contiguous_strides(shape: &[i64]) -> Option<smallvec::SmallVec<[i64; 4]>> {
  let mut strides = smallvec::SmallVec::new();
  fill_contiguous_strides(shape, &mut strides).then_some(strides)
}

/// Writes row-major strides for `shape` into `out` (replacing its contents); `false` if one
/// overflows (see [`write_row_major_strides`]).
#[inline]
pub fn fill_contiguous_strides(shape: &[i64], out: &mut smallvec::SmallVec<[i64; 4]>) -> bool {
  out.clear();
  out.resize(shape.len(), 0);
  write_row_major_strides(shape, out)
}

/// Writes the row-major strides (in elements) of `shape` into `out`, one per dimension, zero
/// dimensions counted as one; `false` if a stride overflows. A stride can overflow even when
/// the element count does not (a zero dimension makes the count 0), so each stored product is
/// checked; the product over the whole shape is never stored, so it may overflow.
#[inline]
pub fn write_row_major_strides(shape: &[i64], out: &mut [i64]) -> bool {
  let mut step = 1i64;
  for (axis, (slot, &dim)) in out.iter_mut().zip(shape).enumerate().rev() {
    *slot = step;
    step = match step.checked_mul(dim.max(1)) {
      Some(next) => next,
      None if axis == 0 => step, // the last product is never stored
      None => return false,
    };
  }
  true
}
