//! Conversions of host tensors that users otherwise write element loops for: permuted views
//! (metadata only), dense row-major copies of strided tensors, and dtype conversion with an
//! optional per-channel affine step (`uint8` HWC image → `float32` CHW, normalised).
//!
//! Every conversion reads a [`Strided`] source (a validated layout over readable memory) and
//! writes a dense row-major destination of the same shape.
//!
//! # The conversion formula
//!
//! Each element goes through one of two paths, chosen by the dtypes and options alone:
//!
//! * **exact integer path** — integer (or bool) source, integer (or bool) target, no
//!   [`Affine`] step: the exact integer value, saturated to the target's range (`-3` → `uint8`
//!   `0`, `300` → `255`); bool targets get `value != 0`.
//! * **float64 path** — everything else: the value as a float64 (exact, except 64-bit integers
//!   beyond 2^53, which round to nearest), then, in this order and only for the steps given,
//!   `v = v * scale`, `v = v + offset`, `v = v - mean`, `v = v / std`, each one IEEE-754
//!   float64 operation (no fused multiply-add), then `v` is stored in the target:
//!   * float targets: rounded to nearest, ties to even (as a JS `Float32Array` store does);
//!   * integer targets: NaN → 0, otherwise rounded to nearest with ties to even, then saturated
//!     to the target's range (as a JS `Uint8ClampedArray` store does for `uint8`);
//!   * bool: `v !== 0` (NaN → true).
//!
//! This is the plain JS loop `out[i] = ((x * scale + offset) - mean) / std` with `x` a JS
//! number, bit for bit.

use core::marker::PhantomData;

use smallvec::SmallVec;

use crate::device::Device;
use crate::dtype::DType;
use crate::error::{DLPackError, ErrorKind};
use crate::layout::layout_of;

fn invalid(message: impl Into<String>) -> DLPackError {
  DLPackError::new(ErrorKind::InvalidArgument, message)
}

/// Shape or strides of a view, inline up to 4 dimensions.
pub type Dims = SmallVec<[i64; 4]>;

/// The axis `axis` names in a tensor of `ndim` dimensions (negative counts from the end).
pub fn normalize_axis(axis: i64, ndim: usize) -> Result<usize, DLPackError> {
  let resolved = if axis < 0 { axis + ndim as i64 } else { axis };
  if resolved < 0 || resolved >= ndim as i64 {
    return Err(invalid(format!(
      "axis {axis} is out of range for a tensor of {ndim} dimensions"
    )));
  }
  Ok(resolved as usize)
}

/// Shape and strides of the view whose dimension `i` is dimension `axes[i]` of the input:
/// metadata only, the elements stay where they are. `axes` must name every dimension exactly
/// once (negative axes count from the end).
pub fn permute(shape: &[i64], strides: &[i64], axes: &[i64]) -> Result<(Dims, Dims), DLPackError> {
  let ndim = shape.len();
  if axes.len() != ndim || strides.len() != ndim {
    return Err(invalid(format!(
      "permute needs {ndim} axes (one per dimension), got {}",
      axes.len()
    )));
  }
  let mut seen: SmallVec<[bool; 8]> = SmallVec::from_elem(false, ndim);
  let mut new_shape = SmallVec::with_capacity(ndim);
  let mut new_strides = SmallVec::with_capacity(ndim);
  for &axis in axes {
    let axis = normalize_axis(axis, ndim)?;
    if core::mem::replace(&mut seen[axis], true) {
      return Err(invalid(format!("axis {axis} is repeated in {axes:?}")));
    }
    new_shape.push(shape[axis]);
    new_strides.push(strides[axis]);
  }
  Ok((new_shape, new_strides))
}

/// The dtypes [`convert`] reads and writes: bool, the integers and the real floats (float16
/// and bfloat16 with the `half` feature). Complex and the fp8/fp6/fp4 formats are not.
pub fn is_convertible(dtype: DType) -> bool {
  let half = matches!(dtype, DType::Float16 | DType::BFloat16) && cfg!(feature = "half");
  half
    || matches!(
      dtype,
      DType::Bool
        | DType::Int8
        | DType::Int16
        | DType::Int32
        | DType::Int64
        | DType::UInt8
        | DType::UInt16
        | DType::UInt32
        | DType::UInt64
        | DType::Float32
        | DType::Float64
    )
}

/// The elements of a host tensor: a layout over memory that stays readable for `'a`.
#[derive(Debug, Clone, Copy)]
pub struct Strided<'a> {
  first: *const u8,
  dtype: DType,
  shape: &'a [i64],
  strides: &'a [i64],
  numel: usize,
  _memory: PhantomData<&'a [u8]>,
}

impl<'a> Strided<'a> {
  /// A source whose first element is `bytes[first_byte..]`, checked: every element must lie
  /// inside `bytes`.
  pub fn over_bytes(
    bytes: &'a [u8],
    first_byte: usize,
    dtype: DType,
    shape: &'a [i64],
    strides: &'a [i64],
  ) -> Result<Strided<'a>, DLPackError> {
    let first = (bytes.as_ptr() as usize)
      .checked_add(first_byte)
      .ok_or_else(|| DLPackError::new(ErrorKind::Overflow, "first byte overflows"))?;
    let layout = layout_of(dtype, Device::CPU, shape, Some(strides), first)?;
    let itemsize = dtype.itemsize() as i64;
    let low = first_byte as i64 + layout.min_offset() * itemsize;
    let high = first_byte as i64 + (layout.max_offset() + 1) * itemsize;
    if layout.numel() > 0 && (low < 0 || high > bytes.len() as i64) {
      return Err(DLPackError::new(
        ErrorKind::InvalidLayout,
        format!(
          "the tensor reaches bytes {low}..{high} of {} bytes",
          bytes.len()
        ),
      ));
    }
    Ok(Strided {
      // In bounds of `bytes` when there are elements; never read otherwise.
      first: bytes.as_ptr().wrapping_add(first_byte),
      dtype,
      shape,
      strides,
      numel: layout.numel(),
      _memory: PhantomData,
    })
  }

  /// A source over raw memory.
  ///
  /// # Safety
  /// `shape`/`strides` (in elements, one per dimension) must be a layout validated by
  /// [`layout_of`], and every element they address from `first` must be host memory readable
  /// for `'a` and not written by anyone else during the conversions that read it.
  pub unsafe fn from_raw(
    first: *const u8,
    dtype: DType,
    shape: &'a [i64],
    strides: &'a [i64],
  ) -> Strided<'a> {
    let numel = shape.iter().map(|&dim| dim.max(0) as usize).product();
    Strided {
      first,
      dtype,
      shape,
      strides,
      numel,
      _memory: PhantomData,
    }
  }

  pub fn dtype(&self) -> DType {
    self.dtype
  }

  pub fn numel(&self) -> usize {
    self.numel
  }

  /// Bytes a dense row-major copy of the elements takes in `target`.
  pub fn dense_bytes(&self, target: DType) -> usize {
    self.numel * target.itemsize()
  }

  /// Address range `[start, end)` of the bytes the elements occupy (empty when there are none).
  pub fn address_range(&self) -> (usize, usize) {
    if self.numel == 0 {
      return (0, 0);
    }
    let itemsize = self.dtype.itemsize() as i64;
    let (mut low, mut high) = (0i64, 0i64);
    for (&dim, &stride) in self.shape.iter().zip(self.strides) {
      let reach = (dim - 1) * stride;
      if reach < 0 {
        low += reach;
      } else {
        high += reach;
      }
    }
    let first = self.first as usize as i64;
    (
      (first + low * itemsize) as usize,
      (first + (high + 1) * itemsize) as usize,
    )
  }
}

mod astype;
mod engine;
mod kernels;
mod scalar;
#[cfg(test)]
mod testing;
mod transpose;

pub use astype::{convert, convert_uninit, Affine};
pub use engine::{copy_dense, copy_dense_uninit};

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn permute_moves_shape_and_strides_together() {
    let (shape, strides) = permute(&[4, 5, 3], &[15, 3, 1], &[2, 0, 1]).unwrap();
    assert_eq!(shape.as_slice(), [3, 4, 5]);
    assert_eq!(strides.as_slice(), [1, 15, 3]);
    let (shape, strides) = permute(&[4, 5, 3], &[15, 3, 1], &[-1, 0, -2]).unwrap();
    assert_eq!(
      (shape.as_slice(), strides.as_slice()),
      ([3, 4, 5].as_slice(), [1, 15, 3].as_slice())
    );
  }

  #[test]
  fn permute_refuses_bad_axes() {
    for axes in [
      &[0, 1][..],
      &[0, 1, 1],
      &[0, 1, 3],
      &[0, 1, -4],
      &[0, 1, 2, 3],
    ] {
      let error = permute(&[2, 3, 4], &[12, 4, 1], axes).unwrap_err();
      assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{axes:?}");
    }
  }

  #[test]
  fn sources_outside_the_bytes_are_refused() {
    let bytes = [0u8; 16];
    assert!(Strided::over_bytes(&bytes, 0, DType::Float32, &[5], &[1]).is_err());
    assert!(Strided::over_bytes(&bytes, 4, DType::Float32, &[2], &[-2]).is_err());
    assert!(Strided::over_bytes(&bytes, 4, DType::Float32, &[2], &[-1]).is_ok());
  }
}
