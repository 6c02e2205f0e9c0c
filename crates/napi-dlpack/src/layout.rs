//! Layout arithmetic: where the elements of a tensor are, given its shape and strides. One
//! place for it all, used by import validation, export, the typed views and the addon's copies:
//! [`Layout`] (established with checked arithmetic by [`layout_of`]), the fits-in-buffer check
//! ([`Layout::check_fits_in`]), the row-major strides writer ([`write_row_major_strides`]) and
//! the strided-offset iterator ([`element_offsets`]).

use crate::device::Device;
use crate::dtype::DType;
use crate::error::{DLPackError, ErrorKind};

/// The largest `ndim` accepted on import and export. NumPy's limit is 64 as well; deeper
/// tensors are rejected with `ERR_DLPACK_NDIM` rather than risking huge stack or heap use.
pub const MAX_NDIM: usize = 64;

/// Facts about a tensor's layout, established by [`layout_of`] (and by
/// [`crate::validation::validate`] for foreign tensors).
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

  /// Checks that every element lies inside a buffer of `buffer_bytes` bytes whose first
  /// element is `first_byte` bytes from its start (an empty tensor fits anywhere): the check a
  /// view over memory of known size needs before anything is read through it.
  pub fn check_fits_in(&self, first_byte: usize, buffer_bytes: usize) -> Result<(), DLPackError> {
    if self.numel == 0 {
      return Ok(());
    }
    let itemsize = self.dtype.itemsize() as i128;
    // i128: the offsets are validated i64s, so nothing below can overflow.
    let low = first_byte as i128 + i128::from(self.min_offset) * itemsize;
    let high = first_byte as i128 + (i128::from(self.max_offset) + 1) * itemsize;
    if low < 0 || high > buffer_bytes as i128 {
      return Err(err(
        ErrorKind::InvalidLayout,
        format!("the tensor reaches bytes {low}..{high} of a buffer of {buffer_bytes} bytes"),
      ));
    }
    Ok(())
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
pub(crate) fn layout_of_matching(
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

/// The [`Layout`] of a tensor borrowed by handle id (`exchange::BorrowId`), from the extent
/// its producer computed when it validated the tensor once, at the id's creation: the table's
/// contract says the extent agrees with the tensor, so nothing is re-derived. Only what the
/// crate's own types need is checked (a device and dtype it knows, ndim in range, a
/// non-negative element count), so that a producer breaking that contract gets a coded error
/// here rather than a bad enum value.
#[cfg(feature = "napi")]
#[inline(always)]
pub(crate) fn layout_from_extent(
  tensor: &crate::ffi::DLTensor,
  flags: u64,
  numel: i64,
  min_offset: i64,
  max_offset: i64,
  c_contiguous: bool,
) -> Result<Layout, DLPackError> {
  let device = Device::from_dl(tensor.device)?;
  let dtype = DType::from_dl(tensor.dtype, flags)?;
  if tensor.ndim < 0
    || tensor.ndim as usize > MAX_NDIM
    || numel < 0
    || min_offset > 0
    || max_offset < 0
  {
    return Err(bad_extent());
  }
  Ok(Layout {
    first_element: (tensor.data as usize).wrapping_add(tensor.byte_offset as usize),
    numel: numel as usize,
    min_offset,
    max_offset,
    device,
    dtype,
    ndim: tensor.ndim as u8,
    c_contiguous: numel <= 1 || c_contiguous,
    strides_null: tensor.strides.is_null() && tensor.ndim > 0,
  })
}

/// The refusal of a producer's extent that breaks the table's contract (out of line: the
/// accepting path stays small).
#[cfg(feature = "napi")]
#[cold]
#[inline(never)]
fn bad_extent() -> DLPackError {
  err(
    ErrorKind::InvalidLayout,
    "the producer's extent of a borrowed handle does not describe a tensor",
  )
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

/// Offset in elements of the element at `index` (one coordinate per dimension) from the first
/// element, or `None` when `index` is out of bounds. For a validated layout every partial sum
/// lies within [min_offset, max_offset], so nothing overflows.
pub fn index_offset(shape: &[i64], strides: &[i64], index: &[usize]) -> Option<isize> {
  if index.len() != shape.len() {
    return None;
  }
  let mut offset = 0i64;
  for ((&i, &dim), &stride) in index.iter().zip(shape).zip(strides) {
    if i as u64 >= dim as u64 {
      return None;
    }
    offset += i as i64 * stride;
  }
  Some(offset as isize)
}

/// Element offsets (in elements, from the first element) of the `numel` elements of a tensor,
/// in row-major order. For a layout [`layout_of`] accepted, every offset lies within
/// [`Layout::min_offset`]..=[`Layout::max_offset`] and no step overflows.
pub fn element_offsets<'a>(
  shape: &'a [i64],
  strides: &'a [i64],
  numel: usize,
) -> impl Iterator<Item = i64> + 'a {
  let ndim = shape.len();
  let mut index = vec![0i64; ndim];
  let mut offset = 0i64;
  (0..numel).map(move |step| {
    if step > 0 {
      // Odometer increment, last axis fastest. The stride is added only when the index stays
      // in its dimension, and a wrapping index subtracts the reach it had: so `offset` is
      // always the offset of an element, within the validated [min_offset, max_offset], and no
      // step can overflow. (Adding first would not do: a size-1 dimension may carry any
      // stride, `i64::MAX` included, and the sum would overflow before being taken back.)
      for axis in (0..ndim).rev() {
        if index[axis] + 1 < shape[axis] {
          index[axis] += 1;
          offset += strides[axis];
          break;
        }
        // Validated: (shape - 1) * stride is part of the span, so it fits.
        offset -= strides[axis] * index[axis];
        index[axis] = 0;
      }
    }
    offset
  })
}

#[cfg(test)]
mod tests {
  use super::{element_offsets, layout_of};
  use crate::device::Device;
  use crate::dtype::DType;
  use crate::error::ErrorKind;

  fn offsets(shape: &[i64], strides: &[i64]) -> Vec<i64> {
    let numel = shape.iter().product::<i64>() as usize;
    element_offsets(shape, strides, numel).collect()
  }

  #[test]
  fn offsets_follow_row_major_order() {
    assert_eq!(offsets(&[2, 3], &[3, 1]), [0, 1, 2, 3, 4, 5]);
    assert_eq!(offsets(&[2, 3], &[1, 2]), [0, 2, 4, 1, 3, 5]);
    assert_eq!(offsets(&[2, 2], &[-2, -1]), [0, -1, -2, -3]);
    assert_eq!(offsets(&[3, 2], &[0, 1]), [0, 1, 0, 1, 0, 1]);
    assert_eq!(offsets(&[], &[]), [0]);
  }

  /// A size-1 dimension may carry any stride: it never moves, so no step may add it (the sum
  /// would overflow before the wrap took it back; debug builds panicked here).
  #[test]
  fn extreme_strides_of_size_one_dimensions_are_never_added() {
    for extreme in [i64::MAX, i64::MIN, i64::MAX - 1, i64::MIN + 1] {
      assert_eq!(offsets(&[3, 1], &[1, extreme]), [0, 1, 2]);
      assert_eq!(offsets(&[1, 3], &[extreme, 1]), [0, 1, 2]);
      assert_eq!(offsets(&[2, 1, 2], &[2, extreme, 1]), [0, 1, 2, 3]);
      assert_eq!(offsets(&[3, 1], &[-1, extreme]), [0, -1, -2]);
      assert_eq!(offsets(&[1, 1, 1], &[extreme, extreme, extreme]), [0]);
    }
  }

  /// Offsets at the edges of i64 (the span validation allows): no intermediate value leaves
  /// [min_offset, max_offset].
  #[test]
  fn offsets_at_the_edge_of_the_range_do_not_overflow() {
    let half = i64::MAX / 2;
    assert_eq!(offsets(&[2, 2], &[half, 1]), [0, 1, half, half + 1]);
    assert_eq!(offsets(&[2, 2], &[-half, -1]), [0, -1, -half, -half - 1]);
    assert_eq!(offsets(&[2], &[i64::MAX]), [0, i64::MAX]);
    assert_eq!(
      offsets(&[2, 1], &[i64::MIN + 1, i64::MAX]),
      [0, i64::MIN + 1]
    );
  }

  fn fits(shape: &[i64], strides: &[i64], first_byte: usize, buffer_bytes: usize) -> bool {
    let layout = layout_of(DType::Float32, Device::CPU, shape, Some(strides), 4096).unwrap();
    match layout.check_fits_in(first_byte, buffer_bytes) {
      Ok(()) => true,
      Err(error) => {
        assert_eq!(error.kind(), ErrorKind::InvalidLayout);
        false
      }
    }
  }

  /// The fits-in-buffer check: exact fits accepted, one element out either way refused.
  #[test]
  fn fits_in_buffer_at_both_edges() {
    assert!(fits(&[2, 3], &[3, 1], 0, 24));
    assert!(!fits(&[2, 3], &[3, 1], 0, 23));
    assert!(!fits(&[2, 3], &[3, 1], 4, 24));
    // Negative strides reach below the first element.
    assert!(fits(&[4], &[-2], 24, 28));
    assert!(!fits(&[4], &[-2], 20, 28));
    // Broadcast (stride 0) and empty tensors.
    assert!(fits(&[1000], &[0], 0, 4));
    assert!(!fits(&[1000], &[0], 0, 3));
    assert!(fits(&[0, 5], &[5, 1], 1 << 40, 0));
  }
}
