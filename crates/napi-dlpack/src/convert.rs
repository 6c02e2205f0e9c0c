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
use core::mem::MaybeUninit;

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

/// The optional affine step of [`convert`]: each entry is either one value (every element) or
/// one value per index along `axis` of the source.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Affine {
  pub scale: Option<Vec<f64>>,
  pub offset: Option<Vec<f64>>,
  pub mean: Option<Vec<f64>>,
  pub std: Option<Vec<f64>>,
  /// The source axis per-channel entries follow (needed only when one has more than one value).
  pub axis: Option<usize>,
}

impl Affine {
  pub fn is_identity(&self) -> bool {
    self.scale.is_none() && self.offset.is_none() && self.mean.is_none() && self.std.is_none()
  }

  fn entries(&self) -> [(&'static str, Option<&Vec<f64>>); 4] {
    [
      ("scale", self.scale.as_ref()),
      ("offset", self.offset.as_ref()),
      ("mean", self.mean.as_ref()),
      ("std", self.std.as_ref()),
    ]
  }

  /// Checks the entries against the source shape; the number of channels (1 when every entry
  /// is a single value) and the axis they follow.
  fn channels(&self, shape: &[i64]) -> Result<(usize, Option<usize>), DLPackError> {
    let mut channels = 1usize;
    for (name, values) in self.entries() {
      let Some(values) = values else { continue };
      if values.is_empty() {
        return Err(invalid(format!("{name} must have at least one value")));
      }
      if values.len() > 1 {
        let Some(axis) = self.axis else {
          return Err(invalid(format!(
            "{name} has {} values: say which axis they follow with `axis`",
            values.len()
          )));
        };
        let extent = *shape.get(axis).ok_or_else(|| {
          invalid(format!(
            "axis {axis} is out of range for a tensor of {} dimensions",
            shape.len()
          ))
        })?;
        if values.len() as i64 != extent {
          return Err(invalid(format!(
            "{name} has {} values but axis {axis} has {extent} entries",
            values.len()
          )));
        }
        channels = values.len();
      }
    }
    Ok((channels, if channels > 1 { self.axis } else { None }))
  }

  /// The steps for channel `channel`.
  fn steps(&self, channel: usize) -> Steps {
    let pick = |values: Option<&Vec<f64>>| {
      values.map(|values| values[if values.len() == 1 { 0 } else { channel }])
    };
    Steps {
      scale: pick(self.scale.as_ref()),
      offset: pick(self.offset.as_ref()),
      mean: pick(self.mean.as_ref()),
      std: pick(self.std.as_ref()),
    }
  }
}

/// The affine steps of one channel.
#[derive(Debug, Clone, Copy)]
struct Steps {
  scale: Option<f64>,
  offset: Option<f64>,
  mean: Option<f64>,
  std: Option<f64>,
}

impl Steps {
  /// The float64 formula of the module docs, one IEEE operation per step given.
  #[inline(always)]
  fn apply(&self, mut v: f64) -> f64 {
    if let Some(scale) = self.scale {
      v *= scale;
    }
    if let Some(offset) = self.offset {
      v += offset;
    }
    if let Some(mean) = self.mean {
      v -= mean;
    }
    if let Some(std) = self.std {
      v /= std;
    }
    v
  }
}

/// One element type as the conversions see it (read and written unaligned, by value).
trait Scalar: Copy + 'static {
  /// Whether the exact integer path applies to it (integers and bool).
  const INTEGER: bool;
  /// `f32` and `f64`: converting to them is a machine instruction that vectorises, cheaper
  /// than a lookup table (the other targets round in software or saturate).
  const HARDWARE_FLOAT: bool = false;
  fn to_f64(self) -> f64;
  /// The documented rounding and saturation of the float64 path.
  fn from_f64(value: f64) -> Self;
  /// Integers and bool: the exact value (floats: unused).
  fn to_i128(self) -> i128;
  /// Integers and bool: saturated (bool: `value != 0`).
  fn from_i128(value: i128) -> Self;
}

/// A `bool` element as stored: one byte, any non-zero value reads as true.
#[derive(Clone, Copy)]
#[repr(transparent)]
struct BoolByte(u8);

impl Scalar for BoolByte {
  const INTEGER: bool = true;
  fn to_f64(self) -> f64 {
    f64::from(u8::from(self.0 != 0))
  }
  fn from_f64(value: f64) -> Self {
    BoolByte(u8::from(value != 0.0))
  }
  fn to_i128(self) -> i128 {
    i128::from(self.0 != 0)
  }
  fn from_i128(value: i128) -> Self {
    BoolByte(u8::from(value != 0))
  }
}

macro_rules! integer_scalar {
  ($($ty:ty),*) => {$(
    impl Scalar for $ty {
      const INTEGER: bool = true;
      #[inline(always)]
      fn to_f64(self) -> f64 {
        // Exact below 2^53; 64-bit values beyond round to nearest, as JS `Number(big)` does.
        self as f64
      }
      #[inline(always)]
      fn from_f64(value: f64) -> Self {
        // `as` maps NaN to 0 and saturates; rounding first makes it round-to-nearest-even.
        value.round_ties_even() as $ty
      }
      #[inline(always)]
      fn to_i128(self) -> i128 {
        self as i128
      }
      #[inline(always)]
      fn from_i128(value: i128) -> Self {
        value.clamp(<$ty>::MIN as i128, <$ty>::MAX as i128) as $ty
      }
    }
  )*};
}
integer_scalar!(i8, i16, i32, i64, u8, u16, u32, u64);

macro_rules! float_scalar {
  ($($ty:ty: $to:expr, $from:expr, $hardware:expr);* $(;)?) => {$(
    impl Scalar for $ty {
      const INTEGER: bool = false;
      const HARDWARE_FLOAT: bool = $hardware;
      #[inline(always)]
      fn to_f64(self) -> f64 {
        $to(self)
      }
      #[inline(always)]
      fn from_f64(value: f64) -> Self {
        $from(value)
      }
      fn to_i128(self) -> i128 {
        unreachable!("float elements never take the exact integer path")
      }
      fn from_i128(_value: i128) -> Self {
        unreachable!("float elements never take the exact integer path")
      }
    }
  )*};
}
float_scalar!(
  f32: f64::from, |value: f64| value as f32, true;
  f64: |value: f64| value, |value: f64| value, true;
);
#[cfg(feature = "half")]
float_scalar!(
  half::f16: f64::from, half::f16::from_f64, false;
  half::bf16: f64::from, half::bf16::from_f64, false;
);

/// The source's dimensions after dropping size-1 dimensions and merging neighbours that are
/// laid out as one (the destination is row-major, so only the source decides), keeping the
/// channel axis, when there is one, a dimension of its own.
struct Rows {
  shape: SmallVec<[usize; 8]>,
  strides: SmallVec<[i64; 8]>,
  /// Index in `shape` of the channel dimension.
  channel_dim: Option<usize>,
}

impl Rows {
  fn of(shape: &[i64], strides: &[i64], channel_axis: Option<usize>) -> Rows {
    let mut rows = Rows {
      shape: SmallVec::new(),
      strides: SmallVec::new(),
      channel_dim: None,
    };
    let mut last_is_channel = false;
    for (axis, (&dim, &stride)) in shape.iter().zip(strides).enumerate() {
      let is_channel = channel_axis == Some(axis);
      if dim == 1 && !is_channel {
        continue;
      }
      let dim = dim as usize;
      let mergeable = !is_channel && !last_is_channel && !rows.shape.is_empty();
      match (rows.shape.last_mut(), rows.strides.last_mut()) {
        (Some(outer), Some(outer_stride)) if mergeable && *outer_stride == stride * dim as i64 => {
          *outer *= dim;
          *outer_stride = stride;
        }
        _ => {
          if is_channel {
            rows.channel_dim = Some(rows.shape.len());
          }
          rows.shape.push(dim);
          rows.strides.push(stride);
        }
      }
      last_is_channel = is_channel;
    }
    if rows.shape.is_empty() {
      rows.shape.push(1);
      rows.strides.push(0);
    }
    rows
  }

  /// Calls `row(source offset of the row's first element (elements), destination index of it,
  /// channel of the row (`None`: the channel is the row's own index))` for each row of the
  /// last dimension, in row-major order. The row has `shape[last]` elements `stride[last]`
  /// apart.
  fn for_each(&self, mut row: impl FnMut(i64, usize, Option<usize>)) {
    let ndim = self.shape.len();
    let outer = ndim - 1;
    let row_len = self.shape[outer];
    let rows: usize = self.shape[..outer].iter().product();
    let mut index: SmallVec<[usize; 8]> = SmallVec::from_elem(0, outer);
    let mut offset = 0i64;
    for number in 0..rows {
      let channel = match self.channel_dim {
        Some(dim) if dim < outer => Some(index[dim]),
        Some(_) => None,
        None => Some(0),
      };
      row(offset, number * row_len, channel);
      // Odometer over the outer dimensions; every partial offset is an element's offset.
      for axis in (0..outer).rev() {
        if index[axis] + 1 < self.shape[axis] {
          index[axis] += 1;
          offset += self.strides[axis];
          break;
        }
        offset -= self.strides[axis] * index[axis] as i64;
        index[axis] = 0;
      }
    }
  }
}

fn check_out(
  source: &Strided<'_>,
  target: DType,
  out: &[MaybeUninit<u8>],
) -> Result<(), DLPackError> {
  let needed = source.dense_bytes(target);
  if out.len() != needed {
    return Err(invalid(format!(
      "the destination holds {} bytes, the conversion writes {needed}",
      out.len()
    )));
  }
  let (start, end) = source.address_range();
  let out_start = out.as_ptr() as usize;
  if start < end && out_start < end && start < out_start + out.len() {
    return Err(invalid("the destination overlaps the source"));
  }
  Ok(())
}

/// `out` as memory the kernels write without reading.
fn as_uninit(out: &mut [u8]) -> &mut [MaybeUninit<u8>] {
  // SAFETY: same layout; the kernels only ever store initialised values through the result,
  // so `out` stays initialised.
  unsafe { core::slice::from_raw_parts_mut(out.as_mut_ptr().cast(), out.len()) }
}

/// Copies the elements of `source` into `out` (`numel * itemsize` bytes) in row-major order.
pub fn copy_dense(source: &Strided<'_>, out: &mut [u8]) -> Result<(), DLPackError> {
  copy_dense_uninit(source, as_uninit(out))
}

/// [`copy_dense`] into memory that may be uninitialised (a fresh allocation): on success every
/// byte of `out` has been written; on error none has.
pub fn copy_dense_uninit(
  source: &Strided<'_>,
  out: &mut [MaybeUninit<u8>],
) -> Result<(), DLPackError> {
  check_out(source, source.dtype, out)?;
  if source.numel == 0 {
    return Ok(());
  }
  if copy_planes_of_3(source, out) {
    return Ok(());
  }
  copy_dense_tiled_from(source, out, TILED_MIN_BYTES);
  Ok(())
}

/// From this many bytes on, transposes are tiled. Zero: even a 1 KiB transpose (16x16 float32)
/// took fewer instructions tiled (one buffered tile) than row by row, measured whole-process
/// with benches/copies-callgrind.mjs.
const TILED_MIN_BYTES: usize = 0;

/// The kernels of [`copy_dense_uninit`] after its checks, tiling transposes of `tiled_min`
/// bytes and more (tests pass 0 to tile every size).
fn copy_dense_tiled_from(source: &Strided<'_>, out: &mut [MaybeUninit<u8>], tiled_min: usize) {
  let tiled = out.len() >= tiled_min;
  match source.dtype.itemsize() {
    1 => copy_elements::<[u8; 1]>(source, out, tiled),
    2 => copy_elements::<[u8; 2]>(source, out, tiled),
    4 => copy_elements::<[u8; 4]>(source, out, tiled),
    8 => copy_elements::<[u8; 8]>(source, out, tiled),
    16 => copy_elements::<[u8; 16]>(source, out, tiled),
    other => unreachable!("no dtype is {other} bytes wide"),
  }
}

/// The dense copy of elements `size_of::<E>()` bytes wide: row by row when the destination's
/// rows are the source's innermost dimension, else tile by tile ([`copy_tiled`]).
fn copy_elements<E: Copy>(source: &Strided<'_>, out: &mut [MaybeUninit<u8>], tiled: bool) {
  let rows = Rows::of(source.shape, source.strides, None);
  match transposed_dim(&rows).filter(|_| tiled) {
    Some(dim) => copy_tiled::<E>(source, &rows, dim, out),
    None => copy_rows::<E>(source, &rows, out),
  }
}

/// The dimension to tile together with the destination's rows (the last one): the one the
/// source is densest along, when that is not the last. Row by row, a transposed source would be
/// read one element per cache line (and per page, for large strides) and each line re-read
/// for every row; a tile of both keeps the lines read and the lines written in L1.
fn transposed_dim(rows: &Rows) -> Option<usize> {
  let last = rows.shape.len() - 1;
  let row_stride = rows.strides[last].unsigned_abs();
  (0..last)
    .filter(|&dim| rows.strides[dim].unsigned_abs() < row_stride)
    .min_by_key(|&dim| rows.strides[dim].unsigned_abs())
}

/// Elements per tile side: 64 bytes (a cache line) of each row, 8 elements at least, so that a
/// tile's lines (64 read and 64 written at most) stay in L1.
const fn tile_side(itemsize: usize) -> usize {
  let side = 64 / itemsize;
  if side < 8 {
    8
  } else {
    side
  }
}

/// Tiles per side of a group: the tiles of one group are copied before the next group's, so
/// that the pages a group touches (one per source line and per destination row: 2 x 512 for
/// bytes) stay in the TLB between its tiles.
const TILE_GROUP: usize = 8;

/// The cache-blocked copy: for each index of the dimensions other than `dim` and the last
/// (an odometer), the 2-D block of those two dimensions is copied tile by tile.
fn copy_tiled<E: Copy>(source: &Strided<'_>, rows: &Rows, dim: usize, out: &mut [MaybeUninit<u8>]) {
  let ndim = rows.shape.len();
  let last = ndim - 1;
  // Destination strides (elements) of the merged dimensions: row-major.
  let mut out_strides: SmallVec<[usize; 8]> = SmallVec::from_elem(1, ndim);
  for axis in (0..last).rev() {
    out_strides[axis] = out_strides[axis + 1] * rows.shape[axis + 1];
  }
  let outer: SmallVec<[usize; 8]> = (0..last).filter(|&axis| axis != dim).collect();
  let blocks: usize = outer.iter().map(|&axis| rows.shape[axis]).product();
  let mut index: SmallVec<[usize; 8]> = SmallVec::from_elem(0, outer.len());
  let (mut from, mut to) = (0isize, 0usize);
  let first = source.first.cast::<E>();
  let destination = out.as_mut_ptr().cast::<E>();
  let block = Block {
    rows: rows.shape[dim],
    cols: rows.shape[last],
    row_stride: rows.strides[dim] as isize,
    col_stride: rows.strides[last] as isize,
    out_row_stride: out_strides[dim],
  };
  for _ in 0..blocks {
    // SAFETY: `from` is the offset of an element of the validated source layout (Strided's
    // contract) and every element of the block is one too; `to + block` stays inside the
    // destination's `numel` elements (check_out), which do not overlap the source.
    unsafe { block.copy(first.offset(from), destination.add(to)) };
    // Odometer over the outer dimensions, in row-major order.
    for slot in (0..outer.len()).rev() {
      let axis = outer[slot];
      if index[slot] + 1 < rows.shape[axis] {
        index[slot] += 1;
        from += rows.strides[axis] as isize;
        to += out_strides[axis];
        break;
      }
      from -= rows.strides[axis] as isize * index[slot] as isize;
      to -= out_strides[axis] * index[slot];
      index[slot] = 0;
    }
  }
}

/// A 2-D block: `out[r * out_row_stride + c] = source[r * row_stride + c * col_stride]` for
/// `r < rows`, `c < cols` (elements).
struct Block {
  rows: usize,
  cols: usize,
  row_stride: isize,
  col_stride: isize,
  out_row_stride: usize,
}

impl Block {
  /// # Safety
  /// Every source element of the block readable, every destination element writable, the two
  /// disjoint.
  unsafe fn copy<E: Copy>(&self, source: *const E, out: *mut E) {
    let side = tile_side(size_of::<E>());
    let group = side * TILE_GROUP;
    let mut rg = 0;
    while rg < self.rows {
      let row_end = self.rows.min(rg + group);
      let mut cg = 0;
      while cg < self.cols {
        let col_end = self.cols.min(cg + group);
        let mut r0 = rg;
        while r0 < row_end {
          let rows = side.min(row_end - r0);
          let mut c0 = cg;
          while c0 < col_end {
            let cols = side.min(col_end - c0);
            // SAFETY: a sub-block of the block (the contract).
            unsafe { self.tile(source, out, r0, c0, rows, cols) };
            c0 += cols;
          }
          r0 += rows;
        }
        cg = col_end;
      }
      rg = row_end;
    }
  }

  /// One tile: `rows` x `cols` elements from (`r0`, `c0`).
  ///
  /// # Safety
  /// As [`Block::copy`], for the tile.
  #[inline(always)]
  unsafe fn tile<E: Copy>(
    &self,
    source: *const E,
    out: *mut E,
    r0: usize,
    c0: usize,
    rows: usize,
    cols: usize,
  ) {
    let side = tile_side(size_of::<E>());
    if rows == side && cols == side && self.row_stride == 1 {
      // SAFETY: a whole tile, dense along its rows in the source (the contract).
      unsafe { self.tile_buffered(source, out, r0, c0) };
      return;
    }
    let mut r = 0;
    if size_of::<E>() == 1 && self.row_stride == 1 {
      // Bytes, dense along the tile's rows: 8x8 at a time in registers.
      while rows - r >= 8 {
        let mut c = 0;
        while cols - c >= 8 {
          // SAFETY: the 8x8 sub-tile from (r0 + r, c0 + c) lies inside the tile.
          unsafe {
            transpose_bytes_8x8(
              source
                .cast::<u8>()
                .offset((r0 + r) as isize + (c0 + c) as isize * self.col_stride),
              self.col_stride,
              out
                .cast::<u8>()
                .add((r0 + r) * self.out_row_stride + c0 + c),
              self.out_row_stride,
            )
          };
          c += 8;
        }
        for rr in r..r + 8 {
          // SAFETY: the rest of rows r .. r + 8 of the tile.
          unsafe { self.row_part(source, out, r0 + rr, c0 + c, cols - c) };
        }
        r += 8;
      }
    }
    while r < rows {
      // SAFETY: row r of the tile.
      unsafe { self.row_part(source, out, r0 + r, c0, cols) };
      r += 1;
    }
  }

  /// A whole tile whose rows are dense in the source (`row_stride == 1`), through two local
  /// buffers: each source line's part (one cache line) is read into the first in one go, the
  /// tile is transposed between the buffers, and each destination row's part is written in one
  /// go. Every cache line of the source and the destination is then touched once per tile.
  /// Directly, with strides that are multiples of 4 KiB (any power-of-two matrix), the tile's
  /// 64 source lines (and its 64 destination rows) would all fall in the same L1 set and evict
  /// each other between the accesses of one tile.
  ///
  /// # Safety
  /// As [`Block::copy`], for the tile of `tile_side` x `tile_side` elements from (`r0`, `c0`),
  /// and `row_stride == 1`.
  #[inline(always)]
  unsafe fn tile_buffered<E: Copy>(&self, source: *const E, out: *mut E, r0: usize, c0: usize) {
    const WORDS: usize = 512; // 4 KiB: the largest tile (64 x 64 bytes; 8 x 8 x 16 is 1 KiB)
    let side = tile_side(size_of::<E>());
    let mut lines = [MaybeUninit::<u64>::uninit(); WORDS];
    let mut columns = [MaybeUninit::<u64>::uninit(); WORDS];
    let lines = lines.as_mut_ptr().cast::<E>();
    let columns = columns.as_mut_ptr().cast::<E>();
    for j in 0..side {
      // SAFETY: source line c0 + j holds the tile's `side` elements from r0, dense
      // (row_stride 1, the contract); the buffer holds side * side elements (at most 4 KiB).
      unsafe {
        core::ptr::copy_nonoverlapping(
          source.offset(r0 as isize + (c0 + j) as isize * self.col_stride),
          lines.add(j * side),
          side,
        )
      };
    }
    if size_of::<E>() == 1 {
      for i in (0..side).step_by(8) {
        for j in (0..side).step_by(8) {
          // SAFETY: 8x8 bytes inside the two side x side buffers (side is 64 for bytes).
          unsafe {
            transpose_bytes_8x8(
              lines.cast::<u8>().add(j * side + i),
              side as isize,
              columns.cast::<u8>().add(i * side + j),
              side,
            )
          };
        }
      }
    } else {
      for i in 0..side {
        for j in 0..side {
          // SAFETY: inside the two side x side buffers; every element of `columns` is written
          // from an element of `lines` written above.
          unsafe {
            columns
              .add(i * side + j)
              .write(lines.add(j * side + i).read())
          };
        }
      }
    }
    for i in 0..side {
      // SAFETY: destination row r0 + i holds the tile's `side` elements from c0 (the
      // contract); the buffer row was fully written above.
      unsafe {
        core::ptr::copy_nonoverlapping(
          columns.add(i * side),
          out.add((r0 + i) * self.out_row_stride + c0),
          side,
        )
      };
    }
  }

  /// `len` elements of destination row `r` from column `c0`.
  ///
  /// # Safety
  /// As [`Block::copy`], for those elements.
  #[inline(always)]
  unsafe fn row_part<E: Copy>(
    &self,
    source: *const E,
    out: *mut E,
    r: usize,
    c0: usize,
    len: usize,
  ) {
    // SAFETY: elements of the block (the contract).
    unsafe {
      let from = source.offset(r as isize * self.row_stride + c0 as isize * self.col_stride);
      let to = out.add(r * self.out_row_stride + c0);
      for c in 0..len {
        to.add(c)
          .write(from.offset(c as isize * self.col_stride).read());
      }
    }
  }
}

/// Transposes an 8x8 block of bytes: source row `j` (8 bytes at `source + j * source_stride`)
/// becomes column `j` of the destination (8 rows at `out + i * out_stride`). Three rounds of
/// masked swaps on eight 64-bit words (4x4 blocks, then 2x2, then single bytes): 8 loads and 8
/// stores instead of 64 of each.
///
/// # Safety
/// The 8 source rows readable and the 8 destination rows writable (8 bytes each), disjoint.
#[inline(always)]
unsafe fn transpose_bytes_8x8(
  source: *const u8,
  source_stride: isize,
  out: *mut u8,
  out_stride: usize,
) {
  let mut x = [0u64; 8];
  for (j, word) in x.iter_mut().enumerate() {
    // SAFETY: row j of the source block (the contract); little-endian: byte i is column i.
    *word = u64::from_le(unsafe {
      source
        .offset(j as isize * source_stride)
        .cast::<u64>()
        .read_unaligned()
    });
  }
  for (distance, mask) in [
    (4usize, 0x0000_0000_FFFF_FFFFu64),
    (2, 0x0000_FFFF_0000_FFFF),
    (1, 0x00FF_00FF_00FF_00FF),
  ] {
    let shift = 8 * distance as u32;
    for row in 0..8 {
      if row & distance == 0 {
        let (a, b) = (x[row], x[row + distance]);
        x[row] = (a & mask) | ((b & mask) << shift);
        x[row + distance] = ((a >> shift) & mask) | (b & !mask);
      }
    }
  }
  for (i, word) in x.iter().enumerate() {
    // SAFETY: row i of the destination block (the contract).
    unsafe {
      out
        .add(i * out_stride)
        .cast::<u64>()
        .write_unaligned(word.to_le())
    };
  }
}

/// The planar (CHW) copy of an interleaved 3-channel byte image: the `permute(2, 0, 1)` view
/// of an HWC `uint8` image (shape `[3, H, W]`, strides `[1, any, 3]`), the most common
/// preprocessing copy. Row by row, each run of 16 pixels (48 interleaved bytes) is split into
/// the three planes with byte shuffles where the CPU has SSSE3 (checked at run time), else
/// byte by byte. The general row copy reads the source three times, one byte in three each
/// time; this reads it once. Returns false, having written nothing, for any other layout.
fn copy_planes_of_3(source: &Strided<'_>, out: &mut [MaybeUninit<u8>]) -> bool {
  if source.dtype.itemsize() != 1
    || source.shape.len() != 3
    || source.shape[0] != 3
    || source.strides[0] != 1
    || source.strides[2] != 3
  {
    return false;
  }
  // Non-negative: a validated shape (and numel > 0 was checked by the caller).
  let (height, width) = (source.shape[1] as usize, source.shape[2] as usize);
  let plane = height * width;
  let row_stride = source.strides[1] as isize;
  let planes = out.as_mut_ptr().cast::<u8>();
  for y in 0..height {
    // SAFETY: the row's pixels are the 3 * width bytes from `first + y * row_stride`, all
    // elements of the validated source layout (Strided's contract: readable, not written
    // meanwhile); `out` holds 3 * plane bytes (check_out), the three rows written are
    // `y * width .. (y + 1) * width` of each plane, and `out` does not overlap the source.
    unsafe {
      let row = source.first.offset(y as isize * row_stride);
      let at = y * width;
      split_pixels_of_3(
        row,
        [
          planes.add(at),
          planes.add(plane + at),
          planes.add(2 * plane + at),
        ],
        width,
      );
    }
  }
  true
}

/// Splits `width` interleaved 3-byte pixels at `pixels` into the three rows of `planes`.
///
/// # Safety
/// `pixels` readable for `3 * width` bytes; each of `planes` writable for `width` bytes, none
/// overlapping another or the pixels.
unsafe fn split_pixels_of_3(pixels: *const u8, planes: [*mut u8; 3], width: usize) {
  #[allow(unused_mut)] // assigned only where the SIMD path exists
  let mut done = 0;
  #[cfg(all(target_arch = "x86_64", not(miri)))]
  if std::is_x86_feature_detected!("ssse3") {
    // SAFETY: SSSE3 is present (checked just above); the pointer contract is forwarded.
    done = unsafe { split_pixels_of_3_ssse3(pixels, planes, width) };
  }
  for x in done..width {
    for (channel, plane) in planes.iter().enumerate() {
      // SAFETY: x < width: inside the pixels and each plane row (the contract).
      unsafe { plane.add(x).write(pixels.add(3 * x + channel).read()) };
    }
  }
}

/// The `pshufb` mask that moves the bytes of `channel` found in the `part`-th 16 bytes of a
/// 48-byte run of 16 pixels to their pixel's position, zeroing the rest (bit 7 set).
#[cfg(all(target_arch = "x86_64", not(miri)))]
const fn split_mask(channel: usize, part: usize) -> [i8; 16] {
  let mut mask = [i8::MIN; 16];
  let mut pixel = 0;
  while pixel < 16 {
    let byte = 3 * pixel + channel;
    if byte >= 16 * part && byte < 16 * part + 16 {
      mask[pixel] = (byte - 16 * part) as i8;
    }
    pixel += 1;
  }
  mask
}

/// [`split_pixels_of_3`] 16 pixels at a time with SSSE3 byte shuffles: three loads, nine
/// shuffles, six ORs and three stores per 48 bytes. Returns how many pixels it split (a
/// multiple of 16); the caller does the rest.
///
/// # Safety
/// The CPU supports SSSE3; the pointer contract of [`split_pixels_of_3`].
#[cfg(all(target_arch = "x86_64", not(miri)))]
#[target_feature(enable = "ssse3")]
unsafe fn split_pixels_of_3_ssse3(pixels: *const u8, planes: [*mut u8; 3], width: usize) -> usize {
  use core::arch::x86_64::{
    __m128i, _mm_loadu_si128, _mm_or_si128, _mm_shuffle_epi8, _mm_storeu_si128,
  };
  const MASKS: [[[i8; 16]; 3]; 3] = [
    [split_mask(0, 0), split_mask(0, 1), split_mask(0, 2)],
    [split_mask(1, 0), split_mask(1, 1), split_mask(1, 2)],
    [split_mask(2, 0), split_mask(2, 1), split_mask(2, 2)],
  ];
  // SAFETY: unaligned loads of 16-byte constants.
  let masks: [[__m128i; 3]; 3] =
    MASKS.map(|parts| parts.map(|mask| unsafe { _mm_loadu_si128(mask.as_ptr().cast()) }));
  let mut x = 0;
  while width - x >= 16 {
    // SAFETY: pixels x .. x + 16 are inside the row (x + 16 <= width): bytes 3x .. 3x + 48.
    let parts = unsafe {
      let run = pixels.add(3 * x);
      [
        _mm_loadu_si128(run.cast()),
        _mm_loadu_si128(run.add(16).cast()),
        _mm_loadu_si128(run.add(32).cast()),
      ]
    };
    for (plane, mask) in planes.iter().zip(&masks) {
      let bytes = _mm_or_si128(
        _mm_or_si128(
          _mm_shuffle_epi8(parts[0], mask[0]),
          _mm_shuffle_epi8(parts[1], mask[1]),
        ),
        _mm_shuffle_epi8(parts[2], mask[2]),
      );
      // SAFETY: bytes x .. x + 16 of the plane row (x + 16 <= width).
      unsafe { _mm_storeu_si128(plane.add(x).cast(), bytes) };
    }
    x += 16;
  }
  x
}

fn copy_rows<E: Copy>(source: &Strided<'_>, rows: &Rows, out: &mut [MaybeUninit<u8>]) {
  let row_len = rows.shape[rows.shape.len() - 1];
  let stride = rows.strides[rows.strides.len() - 1] as isize;
  let first = source.first.cast::<E>();
  let destination = out.as_mut_ptr().cast::<E>();
  rows.for_each(|offset, at, _| {
    // SAFETY: `offset` is the offset of an element of the validated source layout (Strided's
    // contract), the row's elements are `stride` apart inside it, and the destination holds
    // `numel` elements (check_out), `at + row_len` of them at most.
    unsafe {
      let row = first.offset(offset as isize);
      let out_row = destination.add(at);
      if stride == 1 {
        core::ptr::copy_nonoverlapping(
          row.cast::<u8>(),
          out_row.cast::<u8>(),
          row_len * size_of::<E>(),
        );
      } else {
        for i in 0..row_len {
          out_row
            .add(i)
            .write_unaligned(row.offset(i as isize * stride).read_unaligned());
        }
      }
    }
  });
}

/// Elements per step of the dense table loops: a constant count that the compiler unrolls, so
/// that the loop's own instructions (counter, compare, branch) are paid once per step instead
/// of once per element. (Not the pixel loop: unrolled 4 pixels at a time it ran 21% fewer
/// instructions but took about 10% longer, repeatably.)
const ELEMENTS_UNROLLED: usize = 8;

/// Calls `body(i)` for every `i` in `0..n`, in order, `N` calls per loop iteration.
#[inline(always)]
fn unrolled<const N: usize>(n: usize, mut body: impl FnMut(usize)) {
  let mut i = 0;
  while n - i >= N {
    for k in 0..N {
      body(i + k);
    }
    i += N;
  }
  while i < n {
    body(i);
    i += 1;
  }
}

/// Writes the elements of `source` converted to `target` (see the module docs for the formula)
/// into `out`, dense and row-major (`numel * target.itemsize()` bytes, not overlapping the
/// source). `ERR_DLPACK_INVALID_ARGUMENT` for dtypes [`is_convertible`] refuses, a badly sized
/// or overlapping `out`, and affine entries that do not match the source's shape.
pub fn convert(
  source: &Strided<'_>,
  target: DType,
  affine: &Affine,
  out: &mut [u8],
) -> Result<(), DLPackError> {
  convert_uninit(source, target, affine, as_uninit(out))
}

/// [`convert`] into memory that may be uninitialised (a fresh allocation): on success every
/// byte of `out` has been written; on error none has.
pub fn convert_uninit(
  source: &Strided<'_>,
  target: DType,
  affine: &Affine,
  out: &mut [MaybeUninit<u8>],
) -> Result<(), DLPackError> {
  for dtype in [source.dtype, target] {
    if !is_convertible(dtype) {
      return Err(invalid(format!(
        "astype converts bool, integer and real float dtypes, not {dtype}"
      )));
    }
  }
  let (channels, axis) = affine.channels(source.shape)?;
  if target == source.dtype && affine.is_identity() && is_plain_integer(target) {
    // Each element converts to itself (the exact integer path): the copy's kernels are
    // cheaper than a lookup per element.
    return copy_dense_uninit(source, out);
  }
  check_out(source, target, out)?;
  if source.numel == 0 {
    return Ok(());
  }
  let plan = Plan {
    source,
    affine,
    channels,
    rows: Rows::of(source.shape, source.strides, axis),
  };
  dispatch_source(&plan, target, out);
  Ok(())
}

/// Integer dtypes, whose exact conversion to themselves is the identity on every bit pattern
/// (not bool, whose conversion maps every nonzero byte to 1, nor floats, whose NaN payloads
/// the float64 path may change).
fn is_plain_integer(dtype: DType) -> bool {
  matches!(
    dtype,
    DType::Int8
      | DType::Int16
      | DType::Int32
      | DType::Int64
      | DType::UInt8
      | DType::UInt16
      | DType::UInt32
      | DType::UInt64
  )
}

/// What one conversion needs besides the element types.
struct Plan<'p, 'a> {
  source: &'p Strided<'a>,
  affine: &'p Affine,
  channels: usize,
  rows: Rows,
}

fn dispatch_source(plan: &Plan<'_, '_>, target: DType, out: &mut [MaybeUninit<u8>]) {
  match plan.source.dtype {
    DType::Bool => dispatch_target::<BoolByte>(plan, target, out),
    DType::Int8 => dispatch_target::<i8>(plan, target, out),
    DType::Int16 => dispatch_target::<i16>(plan, target, out),
    DType::Int32 => dispatch_target::<i32>(plan, target, out),
    DType::Int64 => dispatch_target::<i64>(plan, target, out),
    DType::UInt8 => dispatch_target::<u8>(plan, target, out),
    DType::UInt16 => dispatch_target::<u16>(plan, target, out),
    DType::UInt32 => dispatch_target::<u32>(plan, target, out),
    DType::UInt64 => dispatch_target::<u64>(plan, target, out),
    DType::Float32 => dispatch_target::<f32>(plan, target, out),
    DType::Float64 => dispatch_target::<f64>(plan, target, out),
    #[cfg(feature = "half")]
    DType::Float16 => dispatch_target::<half::f16>(plan, target, out),
    #[cfg(feature = "half")]
    DType::BFloat16 => dispatch_target::<half::bf16>(plan, target, out),
    other => unreachable!("{other} was refused by is_convertible"),
  }
}

fn dispatch_target<S: Scalar>(plan: &Plan<'_, '_>, target: DType, out: &mut [MaybeUninit<u8>]) {
  match target {
    DType::Bool => run::<S, BoolByte>(plan, out),
    DType::Int8 => run::<S, i8>(plan, out),
    DType::Int16 => run::<S, i16>(plan, out),
    DType::Int32 => run::<S, i32>(plan, out),
    DType::Int64 => run::<S, i64>(plan, out),
    DType::UInt8 => run::<S, u8>(plan, out),
    DType::UInt16 => run::<S, u16>(plan, out),
    DType::UInt32 => run::<S, u32>(plan, out),
    DType::UInt64 => run::<S, u64>(plan, out),
    DType::Float32 => run::<S, f32>(plan, out),
    DType::Float64 => run::<S, f64>(plan, out),
    #[cfg(feature = "half")]
    DType::Float16 => run::<S, half::f16>(plan, out),
    #[cfg(feature = "half")]
    DType::BFloat16 => run::<S, half::bf16>(plan, out),
    other => unreachable!("{other} was refused by is_convertible"),
  }
}

/// One element, by the path the module docs define.
#[inline(always)]
fn convert_one<S: Scalar, D: Scalar>(value: S, steps: &Steps, exact_integers: bool) -> D {
  if exact_integers {
    D::from_i128(value.to_i128())
  } else {
    D::from_f64(steps.apply(value.to_f64()))
  }
}

/// Sources with at most this many channels of one-byte elements go through a lookup table.
const MAX_TABLE_CHANNELS: usize = 64;

fn run<S: Scalar, D: Scalar>(plan: &Plan<'_, '_>, out: &mut [MaybeUninit<u8>]) {
  let exact_integers = S::INTEGER && D::INTEGER && plan.affine.is_identity();
  let steps: SmallVec<[Steps; 4]> = (0..plan.channels)
    .map(|channel| plan.affine.steps(channel))
    .collect();
  let rows = &plan.rows;
  let row_len = rows.shape[rows.shape.len() - 1];
  let stride = rows.strides[rows.strides.len() - 1] as isize;
  let first = plan.source.first.cast::<S>();
  let destination = out.as_mut_ptr().cast::<D>();
  // A dense source under one set of steps: one run of `numel` elements, in the same order as
  // the destination.
  let flat = rows.shape.len() == 1 && stride == 1 && plan.channels == 1;
  // One-byte sources take 256 values: convert each once per channel (with the same function,
  // so the results are identical) and look the elements up. Not for a dense source without
  // steps into f32/f64: the conversion itself is one vectorised instruction there.
  let direct = flat && D::HARDWARE_FLOAT && plan.affine.is_identity();
  let table: Option<Vec<D>> = (size_of::<S>() == 1
    && !direct
    && plan.channels <= MAX_TABLE_CHANNELS
    && plan.source.numel >= 4 * 256 * plan.channels)
    .then(|| {
      (0..plan.channels * 256)
        .map(|entry| {
          let byte = [(entry % 256) as u8];
          // SAFETY: S is one byte wide and every bit pattern is a valid S (u8, i8, BoolByte).
          let value = unsafe { byte.as_ptr().cast::<S>().read() };
          convert_one::<S, D>(value, &steps[entry / 256], exact_integers)
        })
        .collect()
    });
  if flat {
    let steps = &steps[0];
    match &table {
      Some(table) => {
        let lookup: &[D; 256] = table[..256]
          .try_into()
          .expect("the table holds 256 entries per channel");
        let first = first.cast::<u8>();
        unrolled::<ELEMENTS_UNROLLED>(row_len, |i| {
          // In bounds: the source's `numel` elements are dense from `first` (Strided's
          // contract), the destination holds `numel` elements of D (check_out).
          // SAFETY: see above; one-byte elements.
          let byte = unsafe { first.add(i).read() };
          // SAFETY: see above.
          unsafe {
            destination
              .add(i)
              .write_unaligned(lookup[usize::from(byte)])
          };
        });
      }
      None if direct => {
        for i in 0..row_len {
          // In bounds as above. SAFETY: see above.
          let value = unsafe { first.add(i).read_unaligned() };
          // The float64 path without steps (convert_one's result for an identity affine into a
          // float target), written out so that the loop has no branch and vectorises.
          // SAFETY: see above.
          unsafe {
            destination
              .add(i)
              .write_unaligned(D::from_f64(value.to_f64()))
          };
        }
      }
      None => {
        for i in 0..row_len {
          // In bounds as above. SAFETY: see above.
          let value = unsafe { first.add(i).read_unaligned() };
          // SAFETY: see above.
          unsafe {
            destination
              .add(i)
              .write_unaligned(convert_one::<S, D>(value, steps, exact_integers))
          };
        }
      }
    }
    return;
  }
  if let Some(table) = &table {
    if lookup_pixels(table, rows, first.cast::<u8>(), destination) {
      return;
    }
  }
  rows.for_each(|offset, at, channel| {
    // The pointer arithmetic and accesses below are in bounds: `offset` is the offset of an
    // element of the validated source layout (Strided's contract) and the row's `row_len`
    // elements are `stride` apart inside it; the destination holds `numel` elements of D
    // (check_out), of which this row writes `at..at + row_len`.
    // SAFETY: see above.
    let row = unsafe { first.offset(offset as isize) };
    // SAFETY: see above.
    let out_row = unsafe { destination.add(at) };
    match (&table, channel) {
      (Some(table), Some(channel)) => {
        let lookup: &[D; 256] = table[channel * 256..channel * 256 + 256]
          .try_into()
          .expect("the table holds 256 entries per channel");
        unrolled::<ELEMENTS_UNROLLED>(row_len, |i| {
          // SAFETY: see above; one-byte elements.
          let byte = unsafe { row.offset(i as isize * stride).cast::<u8>().read() };
          // SAFETY: see above.
          unsafe { out_row.add(i).write_unaligned(lookup[usize::from(byte)]) };
        });
      }
      (Some(table), None) => {
        for i in 0..row_len {
          // SAFETY: see above; the row is the channel dimension, so `i < channels`.
          let byte = unsafe { row.offset(i as isize * stride).cast::<u8>().read() };
          // SAFETY: see above.
          unsafe {
            out_row
              .add(i)
              .write_unaligned(table[i * 256 + usize::from(byte)])
          };
        }
      }
      (None, channel) => {
        let fixed = steps[channel.unwrap_or(0)];
        for i in 0..row_len {
          let steps = if channel.is_some() { &fixed } else { &steps[i] };
          // SAFETY: see above.
          let value = unsafe { row.offset(i as isize * stride).read_unaligned() };
          // SAFETY: see above.
          unsafe {
            out_row
              .add(i)
              .write_unaligned(convert_one::<S, D>(value, steps, exact_integers))
          };
        }
      }
    }
  });
}

/// Images: two dimensions after merging, one of them a few channels (HWC, or its CHW view).
/// Walks the source once in pixel order, looking each pixel's channels up, instead of one pass
/// over the whole source per channel (or one short row per pixel). `false` (nothing written)
/// for other shapes.
fn lookup_pixels<D: Scalar>(
  table: &[D],
  rows: &Rows,
  first: *const u8,
  destination: *mut D,
) -> bool {
  match (rows.shape.len(), rows.channel_dim, rows.shape.as_slice()) {
    (2, Some(dim), shape) if shape[dim] == 3 => {
      lookup_pixels_of::<D, 3>(table, rows, dim, first, destination)
    }
    (2, Some(dim), shape) if shape[dim] == 4 => {
      lookup_pixels_of::<D, 4>(table, rows, dim, first, destination)
    }
    _ => return false,
  }
  true
}

fn lookup_pixels_of<D: Scalar, const C: usize>(
  table: &[D],
  rows: &Rows,
  channel_dim: usize,
  first: *const u8,
  destination: *mut D,
) {
  // One 256-entry table per channel (the table holds C * 256 entries): indexing with a byte
  // needs no bounds check.
  let lookups: [&[D; 256]; C] = core::array::from_fn(|c| {
    table[c * 256..c * 256 + 256]
      .try_into()
      .expect("the table holds 256 entries per channel")
  });
  let pixel_dim = 1 - channel_dim;
  let pixels = rows.shape[pixel_dim];
  let pixel_stride = rows.strides[pixel_dim] as isize;
  let channel_stride = rows.strides[channel_dim] as isize;
  // The destination is row-major over the two dimensions.
  let (out_pixel, out_channel) = if channel_dim == 0 {
    (1, pixels)
  } else {
    (C, 1)
  };
  for p in 0..pixels {
    // In bounds: pixel `p` and channel `c` name an element of the validated source layout
    // (Strided's contract); the destination holds the `C * pixels` elements (check_out).
    // SAFETY: see above.
    let source = unsafe { first.offset(p as isize * pixel_stride) };
    // SAFETY: see above.
    let out = unsafe { destination.add(p * out_pixel) };
    for (c, lookup) in lookups.iter().enumerate() {
      // SAFETY: see above; one-byte elements.
      let byte = unsafe { source.offset(c as isize * channel_stride).read() };
      // SAFETY: see above.
      unsafe {
        out
          .add(c * out_channel)
          .write_unaligned(lookup[usize::from(byte)])
      };
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  fn strides_of(shape: &[i64]) -> Vec<i64> {
    crate::layout::contiguous_strides(shape).unwrap().to_vec()
  }

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

  /// The reference: row-major walk with the documented formula written out longhand.
  fn reference_offsets(shape: &[i64], strides: &[i64]) -> Vec<i64> {
    let numel: i64 = shape.iter().product();
    (0..numel)
      .map(|mut linear| {
        let mut offset = 0;
        for axis in (0..shape.len()).rev() {
          offset += (linear % shape[axis]) * strides[axis];
          linear /= shape[axis];
        }
        offset
      })
      .collect()
  }

  #[test]
  fn copy_dense_of_permuted_and_negative_strides() {
    let data: Vec<u16> = (0..120).collect();
    let bytes: Vec<u8> = data.iter().flat_map(|v| v.to_ne_bytes()).collect();
    let cases: [(&[i64], &[i64], usize); 5] = [
      (&[3, 4, 5], &[1, 15, 3], 0),
      (&[4, 5, 3], &[15, 3, 1], 0),
      (&[5, 4], &[-3, 15], 12 + 3),
      (&[2, 3, 1, 4], &[60, 20, 999, 5], 0),
      (&[6, 2], &[0, 1], 7),
    ];
    for (shape, strides, first) in cases {
      let source = Strided::over_bytes(&bytes, first * 2, DType::UInt16, shape, strides).unwrap();
      let mut out = vec![0u8; source.dense_bytes(DType::UInt16)];
      copy_dense(&source, &mut out).unwrap();
      let got: Vec<u16> = out
        .chunks(2)
        .map(|c| u16::from_ne_bytes([c[0], c[1]]))
        .collect();
      let want: Vec<u16> = reference_offsets(shape, strides)
        .iter()
        .map(|&o| data[(first as i64 + o) as usize])
        .collect();
      assert_eq!(got, want, "{shape:?} {strides:?}");
    }
  }

  /// The dense copy of `shape`/`strides` (elements of `itemsize` bytes, the first at byte
  /// `first_byte` of `bytes`) against the reference walk, byte for byte.
  fn check_copy_dense(
    bytes: &[u8],
    itemsize: usize,
    first_byte: usize,
    shape: &[i64],
    strides: &[i64],
  ) {
    let dtype = DType::ALL
      .into_iter()
      .find(|dtype| dtype.itemsize() == itemsize)
      .unwrap();
    let source = Strided::over_bytes(bytes, first_byte, dtype, shape, strides).unwrap();
    let mut out = vec![0xA5u8; source.dense_bytes(dtype)];
    copy_dense(&source, &mut out).unwrap();
    let mut want = Vec::with_capacity(out.len());
    for offset in reference_offsets(shape, strides) {
      let at = (first_byte as i64 + offset * itemsize as i64) as usize;
      want.extend_from_slice(&bytes[at..at + itemsize]);
    }
    // Tiled whatever the size (copy_dense tiles from TILED_MIN_BYTES on).
    let mut tiled = vec![0x5Au8; out.len()];
    copy_dense_tiled_from(&source, as_uninit(&mut tiled), 0);
    assert!(
      tiled == want,
      "tiled: itemsize {itemsize}, {shape:?} {strides:?}"
    );
    assert!(
      out == want,
      "itemsize {itemsize}, first byte {first_byte}, {shape:?} {strides:?}"
    );
  }

  /// Distinct bytes (a byte's value follows its position, period 251, a prime).
  fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
  }

  #[test]
  fn transposes_are_copied_tile_by_tile_at_every_width_and_tile_boundary() {
    // Around the tile sides (8, 16, 32, 64 elements) and the 8x8 byte kernel.
    let sizes = [1i64, 2, 7, 8, 9, 15, 16, 17, 63, 64, 65, 130];
    for itemsize in [1usize, 2, 4, 8, 16] {
      for &rows in &sizes {
        for &cols in &sizes {
          let bytes = pattern((rows * cols) as usize * itemsize + 3 * itemsize + 1);
          // The transpose of a rows x cols matrix, at an element boundary and at an odd byte
          // (an unaligned source).
          for first_byte in [0, 1, itemsize] {
            check_copy_dense(&bytes, itemsize, first_byte, &[cols, rows], &[1, cols]);
          }
          // Reversed along each dimension: the first element is the last in memory.
          let last = ((rows * cols - 1) as usize) * itemsize;
          check_copy_dense(&bytes, itemsize, last, &[cols, rows], &[-1, -cols]);
          check_copy_dense(
            &bytes,
            itemsize,
            (cols as usize - 1) * itemsize,
            &[cols, rows],
            &[-1, cols],
          );
        }
      }
    }
  }

  #[test]
  fn transposes_larger_than_a_tile_group_are_copied_whole() {
    // Groups are 8 tiles a side: 512 bytes, 128 four-byte elements, 64 eight-byte ones.
    for (itemsize, rows, cols) in [(1usize, 520i64, 515i64), (4, 257, 130), (8, 129, 67)] {
      let bytes = pattern((rows * cols) as usize * itemsize);
      check_copy_dense(&bytes, itemsize, 0, &[cols, rows], &[1, cols]);
      check_copy_dense(&bytes, itemsize, 0, &[rows, cols], &[cols, 1]);
    }
  }

  #[test]
  fn permutations_of_three_and_four_dimensions_are_copied_dense() {
    for itemsize in [1usize, 2, 4, 8, 16] {
      // A 9x10x11 (and 3x4x5x6) row-major array seen through every permutation of its axes,
      // plus slices with steps and broadcast (stride 0) dimensions.
      let bytes = pattern(990 * itemsize + 8);
      let shape = [9i64, 10, 11];
      let strides = [110i64, 11, 1];
      for axes in [
        [0, 1, 2],
        [0, 2, 1],
        [1, 0, 2],
        [1, 2, 0],
        [2, 0, 1],
        [2, 1, 0],
      ] {
        let (s, t) = permute(&shape, &strides, &axes).unwrap();
        check_copy_dense(&bytes, itemsize, 0, &s, &t);
      }
      check_copy_dense(&bytes, itemsize, 0, &[5, 4, 11], &[220, 22, 1]);
      check_copy_dense(&bytes, itemsize, 0, &[11, 5, 3], &[1, 220, 44]);
      check_copy_dense(&bytes, itemsize, 8, &[11, 9, 4], &[1, 110, 0]);
      check_copy_dense(&bytes, itemsize, 0, &[3, 70, 1, 2], &[0, 1, 7, 110]);
      let big = pattern(360 * itemsize);
      for axes in [[3, 2, 1, 0], [0, 3, 1, 2], [2, 3, 0, 1]] {
        let (s, t) = permute(&[3, 4, 5, 6], &[120, 30, 6, 1], &axes).unwrap();
        check_copy_dense(&big, itemsize, 0, &s, &t);
      }
    }
  }

  #[test]
  fn the_tiled_path_is_taken_only_for_transposed_rows() {
    let rows = |shape: &[i64], strides: &[i64]| Rows::of(shape, strides, None);
    assert_eq!(transposed_dim(&rows(&[4, 5], &[1, 4])), Some(0));
    assert_eq!(transposed_dim(&rows(&[4, 5, 6], &[30, 1, 5])), Some(1));
    // Row-major, a step along the rows, and a contiguous tensor merged into one row: rows.
    assert_eq!(transposed_dim(&rows(&[4, 5], &[5, 1])), None);
    assert_eq!(transposed_dim(&rows(&[4, 5], &[10, 2])), None);
    assert_eq!(transposed_dim(&rows(&[4, 5, 6], &[30, 6, 1])), None);
    // Negative strides compare by magnitude.
    assert_eq!(transposed_dim(&rows(&[4, 5], &[-1, -4])), Some(0));
    assert_eq!(tile_side(1), 64);
    assert_eq!(tile_side(4), 16);
    assert_eq!(tile_side(16), 8);
  }

  #[test]
  fn sources_outside_the_bytes_are_refused() {
    let bytes = [0u8; 16];
    assert!(Strided::over_bytes(&bytes, 0, DType::Float32, &[5], &[1]).is_err());
    assert!(Strided::over_bytes(&bytes, 4, DType::Float32, &[2], &[-2]).is_err());
    assert!(Strided::over_bytes(&bytes, 4, DType::Float32, &[2], &[-1]).is_ok());
  }

  fn f32s(out: &[u8]) -> Vec<f32> {
    out
      .chunks(4)
      .map(|c| f32::from_ne_bytes(c.try_into().unwrap()))
      .collect()
  }

  /// HWC uint8 → CHW float32, (x / 255 - mean) / std per channel, against the formula
  /// evaluated element by element (with and without the lookup table).
  #[test]
  fn hwc_uint8_to_chw_float32_normalised() {
    for (h, w) in [(2, 3), (40, 37)] {
      let pixels: Vec<u8> = (0..h * w * 3).map(|i| (i * 37 % 256) as u8).collect();
      let (shape, strides) = permute(&[h, w, 3], &strides_of(&[h, w, 3]), &[2, 0, 1]).unwrap();
      let source = Strided::over_bytes(&pixels, 0, DType::UInt8, &shape, &strides).unwrap();
      let mean = [0.485, 0.456, 0.406];
      let std = [0.229, 0.224, 0.225];
      let affine = Affine {
        scale: Some(vec![1.0 / 255.0]),
        mean: Some(mean.to_vec()),
        std: Some(std.to_vec()),
        axis: Some(0),
        ..Affine::default()
      };
      let mut out = vec![0u8; source.dense_bytes(DType::Float32)];
      convert(&source, DType::Float32, &affine, &mut out).unwrap();
      let mut want = Vec::new();
      for c in 0..3 {
        for y in 0..h {
          for x in 0..w {
            let v = f64::from(pixels[((y * w + x) * 3 + c) as usize]);
            want.push((((v * (1.0 / 255.0)) - mean[c as usize]) / std[c as usize]) as f32);
          }
        }
      }
      let got = f32s(&out);
      assert_eq!(
        got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        want.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
      );
    }
  }

  /// The channel as the innermost dimension (HWC normalised in place order), table and no table.
  #[test]
  fn channel_as_the_last_axis() {
    for pixels_count in [4usize, 1100] {
      let pixels: Vec<u8> = (0..pixels_count * 3)
        .map(|i| (i * 91 % 256) as u8)
        .collect();
      let shape = [pixels_count as i64, 3];
      let strides = [3, 1];
      let source = Strided::over_bytes(&pixels, 0, DType::UInt8, &shape, &strides).unwrap();
      let affine = Affine {
        scale: Some(vec![0.5, 2.0, -1.0]),
        offset: Some(vec![1.0]),
        axis: Some(1),
        ..Affine::default()
      };
      let mut out = vec![0u8; source.dense_bytes(DType::Float32)];
      convert(&source, DType::Float32, &affine, &mut out).unwrap();
      let scale = [0.5, 2.0, -1.0];
      let want: Vec<f32> = pixels
        .iter()
        .enumerate()
        .map(|(i, &p)| (f64::from(p) * scale[i % 3] + 1.0) as f32)
        .collect();
      assert_eq!(f32s(&out), want);
    }
  }

  fn convert_values<S: Copy, D: Copy + Default>(
    values: &[S],
    source: DType,
    target: DType,
    affine: &Affine,
  ) -> Vec<D> {
    // SAFETY: plain numeric slices viewed as bytes.
    let bytes =
      unsafe { core::slice::from_raw_parts(values.as_ptr().cast::<u8>(), size_of_val(values)) };
    let shape = [values.len() as i64];
    let source = Strided::over_bytes(bytes, 0, source, &shape, &[1]).unwrap();
    let mut out = vec![D::default(); values.len()];
    // SAFETY: as above.
    let out_bytes = unsafe {
      core::slice::from_raw_parts_mut(out.as_mut_ptr().cast::<u8>(), size_of_val(out.as_slice()))
    };
    convert(&source, target, affine, out_bytes).unwrap();
    out
  }

  #[test]
  fn integer_targets_round_half_to_even_and_saturate() {
    let values = [
      -1.5f64,
      -0.5,
      0.5,
      1.5,
      2.5,
      254.5,
      255.5,
      300.0,
      f64::NAN,
      f64::INFINITY,
      f64::NEG_INFINITY,
      -0.0,
    ];
    let got: Vec<u8> = convert_values(&values, DType::Float64, DType::UInt8, &Affine::default());
    assert_eq!(got, [0, 0, 0, 2, 2, 254, 255, 255, 0, 255, 0, 0]);
    let got: Vec<i8> = convert_values(&values, DType::Float64, DType::Int8, &Affine::default());
    assert_eq!(got, [-2, 0, 0, 2, 2, 127, 127, 127, 0, 127, -128, 0]);
    let big = [i64::MAX, i64::MIN, 1 << 53, (1 << 53) + 1];
    let got: Vec<u64> = convert_values(&big, DType::Int64, DType::UInt64, &Affine::default());
    assert_eq!(
      got,
      [i64::MAX as u64, 0, 1 << 53, (1 << 53) + 1],
      "exact integer path"
    );
    let got: Vec<i16> = convert_values(
      &[-40000i32, 40000, 7],
      DType::Int32,
      DType::Int16,
      &Affine::default(),
    );
    assert_eq!(got, [i16::MIN, i16::MAX, 7]);
    let got: Vec<u8> = convert_values(
      &[0u8, 1, 2, 255],
      DType::UInt8,
      DType::Bool,
      &Affine::default(),
    );
    assert_eq!(got, [0, 1, 1, 1]);
  }

  #[test]
  fn float_targets_keep_negative_zero_and_go_through_float64() {
    let got: Vec<f32> = convert_values(
      &[-0.0f64, 1e300, 0.1],
      DType::Float64,
      DType::Float32,
      &Affine::default(),
    );
    assert_eq!(got[0].to_bits(), (-0.0f32).to_bits());
    assert_eq!(got[1], f32::INFINITY);
    assert_eq!(got[2], 0.1f32);
    // int64 → float32 through float64, as `Math.fround(Number(big))`: 2^60 + 2^36 + 1 rounds
    // to 2^60 + 2^36 in float64, which ties to even (2^60) in float32.
    let tie = (1i64 << 60) + (1 << 36) + 1;
    let got: Vec<f32> = convert_values(&[tie], DType::Int64, DType::Float32, &Affine::default());
    assert_eq!(got[0], ((tie as f64) as f32));
  }

  #[cfg(feature = "half")]
  #[test]
  fn half_floats_round_once_from_float64() {
    let values = [1.0f64 / 3.0, 65520.0, -0.0, 1e-8, 300.5];
    let got: Vec<half::f16> =
      convert_values(&values, DType::Float64, DType::Float16, &Affine::default());
    let want: Vec<half::f16> = values.iter().map(|&v| half::f16::from_f64(v)).collect();
    assert_eq!(
      got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
      want.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    );
    assert!(
      got[1].is_infinite(),
      "65520 rounds up to infinity in float16"
    );
    let bytes = [0u8, 128, 255];
    let affine = Affine {
      scale: Some(vec![1.0 / 255.0]),
      ..Affine::default()
    };
    let got: Vec<half::bf16> = convert_values(&bytes, DType::UInt8, DType::BFloat16, &affine);
    let want: Vec<half::bf16> = bytes
      .iter()
      .map(|&b| half::bf16::from_f64(f64::from(b) * (1.0 / 255.0)))
      .collect();
    assert_eq!(got, want);
    let back: Vec<u8> = convert_values(
      &want,
      DType::BFloat16,
      DType::UInt8,
      &Affine {
        scale: Some(vec![255.0]),
        ..Affine::default()
      },
    );
    assert_eq!(back, [0, 128, 255]);
  }

  #[test]
  fn affine_entries_are_checked() {
    let values = [1u8, 2, 3, 4];
    let bytes = &values[..];
    let shape = [2, 2];
    let source = Strided::over_bytes(bytes, 0, DType::UInt8, &shape, &[2, 1]).unwrap();
    let mut out = vec![0u8; 16];
    let cases = [
      Affine {
        scale: Some(vec![1.0, 2.0]),
        ..Affine::default()
      },
      Affine {
        scale: Some(vec![1.0, 2.0, 3.0]),
        axis: Some(1),
        ..Affine::default()
      },
      Affine {
        scale: Some(vec![]),
        ..Affine::default()
      },
      Affine {
        std: Some(vec![1.0, 2.0]),
        axis: Some(2),
        ..Affine::default()
      },
    ];
    for affine in cases {
      let error = convert(&source, DType::Float32, &affine, &mut out).unwrap_err();
      assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{affine:?}");
    }
    let error = convert(&source, DType::Complex64, &Affine::default(), &mut out).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument);
    let error = convert(&source, DType::Float32, &Affine::default(), &mut out[..12]).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument);
  }

  /// Source bytes, shape, strides, target and steps of one conversion.
  type Case<'a> = (&'a [u8], &'a [i64], &'a [i64], DType, &'a Affine);

  /// Runs a conversion into a buffer that starts out as garbage (0xa5), as the addon's
  /// uninitialised allocations do: every byte must be written.
  fn convert_over_garbage(source: &Strided<'_>, target: DType, affine: &Affine) -> Vec<u8> {
    let mut out = vec![0xa5u8; source.dense_bytes(target)];
    convert_uninit(source, target, affine, as_uninit(&mut out)).unwrap();
    out
  }

  #[test]
  fn planar_copies_of_3_channel_pixels_match_the_offsets_at_every_width_and_row_stride() {
    // The shuffle path splits 16 pixels at a time: every width 0..=50 covers each tail, and
    // rows of a wider image (cropped) and bottom-up rows (negative stride) each layout the
    // permuted view of an HWC image can have.
    for height in 1..=3usize {
      for width in 0..=50usize {
        let wider = width + 5;
        let bytes: Vec<u8> = (0..height * wider * 3)
          .map(|i| (i * 89 % 241) as u8)
          .collect();
        let row = (wider * 3) as i64;
        let last_row = (height - 1) * wider * 3;
        let shape = [3, height as i64, width as i64];
        for (first, strides) in [
          (0usize, [1, (width * 3) as i64, 3]), // dense HWC
          (0, [1, row, 3]),                     // a crop of a wider image
          (last_row + 3, [1, -row, 3]),         // flipped rows, starting one pixel in
        ] {
          let source = Strided::over_bytes(&bytes, first, DType::UInt8, &shape, &strides).unwrap();
          let mut out = vec![0xa5u8; 3 * height * width];
          copy_dense_uninit(&source, as_uninit(&mut out)).unwrap();
          let want: Vec<u8> = reference_offsets(&shape, &strides)
            .iter()
            .map(|&offset| bytes[(first as i64 + offset) as usize])
            .collect();
          assert_eq!(
            out, want,
            "{height}x{width} strides {strides:?} first {first}"
          );
        }
      }
    }
  }

  /// Every fast path (dense lookup, dense direct, interleaved and strided pixel lookups, the
  /// same-dtype integer copy and the strided copy) gives the bytes of the formula written out
  /// element by element, at element counts of every remainder modulo the dense loop's
  /// unrolled step (8), at sizes no smaller than the lookup table's threshold (4 * 256
  /// elements per channel).
  #[test]
  fn fast_paths_match_the_formula_at_every_unrolled_tail() {
    #[cfg(not(miri))]
    const SIZES: &[(usize, usize)] = &[
      (1, 1024),
      (1, 1025),
      (2, 513),
      (1, 1027),
      (1, 1028),
      (1, 1029),
      (1, 1030),
      (1, 1031),
      (7, 151),
      (33, 97),
    ];
    // Miri interprets far slower (the list above ran for over 20 minutes there, this one size
    // about 3): one size of the longest tail (3087 elements, 7 past the unrolled step).
    #[cfg(miri)]
    const SIZES: &[(usize, usize)] = &[(1, 1029)];
    for &(h, w) in SIZES {
      let n = h * w * 3;
      let pixels: Vec<u8> = (0..n).map(|i| (i * 131 % 251) as u8).collect();
      let hwc = [h as i64, w as i64, 3];
      let hwc_strides = strides_of(&hwc);
      let (chw, chw_strides) = permute(&hwc, &hwc_strides, &[2, 0, 1]).unwrap();
      // Every other column of a wider image: strided pixels.
      let wide: Vec<u8> = (0..n * 2).map(|i| (i * 77 % 253) as u8).collect();
      let cropped = [h as i64, w as i64, 3];
      let cropped_strides = [(w * 6) as i64, 6, 1];
      let normalise = Affine {
        scale: Some(vec![1.0 / 255.0]),
        mean: Some(vec![0.485, 0.456, 0.406]),
        std: Some(vec![0.229, 0.224, 0.225]),
        axis: Some(0),
        ..Affine::default()
      };
      let scale = Affine {
        scale: Some(vec![1.0 / 255.0]),
        ..Affine::default()
      };
      let channels_last = Affine {
        axis: Some(2),
        ..normalise.clone()
      };
      let identity = Affine::default();
      let cases: [Case<'_>; 9] = [
        (&pixels, &hwc, &hwc_strides, DType::Float32, &identity),
        (&pixels, &hwc, &hwc_strides, DType::Float32, &scale),
        (&pixels, &hwc, &hwc_strides, DType::Float64, &channels_last),
        (&pixels, &chw, &chw_strides, DType::Float32, &normalise),
        (&pixels, &chw, &chw_strides, DType::Float32, &scale),
        (
          &wide,
          &cropped,
          &cropped_strides,
          DType::Float32,
          &channels_last,
        ),
        (&pixels, &chw, &chw_strides, DType::Int16, &identity),
        (&pixels, &chw, &chw_strides, DType::UInt8, &identity),
        (&wide, &cropped, &cropped_strides, DType::UInt8, &identity),
      ];
      for (bytes, shape, strides, target, affine) in cases {
        let source = Strided::over_bytes(bytes, 0, DType::UInt8, shape, strides).unwrap();
        let (channels, axis) = affine.channels(shape).unwrap();
        let want: Vec<u8> = reference_offsets(shape, strides)
          .iter()
          .enumerate()
          .flat_map(|(linear, &offset)| {
            let channel = match axis {
              Some(axis) if channels > 1 => {
                let inner: i64 = shape[axis + 1..].iter().product();
                (linear as i64 / inner % shape[axis]) as usize
              }
              _ => 0,
            };
            let v = f64::from(bytes[offset as usize]);
            let v = affine.steps(channel).apply(v);
            match target {
              DType::Float32 => (v as f32).to_ne_bytes().to_vec(),
              DType::Float64 => v.to_ne_bytes().to_vec(),
              DType::UInt8 => vec![v as u8],
              _ => (v as i16).to_ne_bytes().to_vec(),
            }
          })
          .collect();
        assert_eq!(
          convert_over_garbage(&source, target, affine),
          want,
          "{shape:?} {strides:?} {target}"
        );
      }
      let source = Strided::over_bytes(&pixels, 0, DType::UInt8, &chw, &chw_strides).unwrap();
      let mut out = vec![0xa5u8; n];
      copy_dense_uninit(&source, as_uninit(&mut out)).unwrap();
      let want: Vec<u8> = reference_offsets(&chw, &chw_strides)
        .iter()
        .map(|&offset| pixels[offset as usize])
        .collect();
      assert_eq!(out, want, "copy of the CHW view {h}x{w}");
    }
  }

  /// astype to the same integer dtype takes the copy's kernels: the bytes are the source's,
  /// in row-major order, for every width (a strided view of int32 included), and bool, whose
  /// conversion is not the identity, does not: its nonzero bytes become 1.
  #[test]
  fn same_dtype_astype_copies_integers_but_normalises_bool() {
    let values: Vec<i32> = (0..24).map(|i| i * 1_000_003 - 7).collect();
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_ne_bytes()).collect();
    let shape = [4i64, 6];
    let (t_shape, t_strides) = permute(&shape, &strides_of(&shape), &[1, 0]).unwrap();
    let source = Strided::over_bytes(&bytes, 0, DType::Int32, &t_shape, &t_strides).unwrap();
    let want: Vec<u8> = reference_offsets(&t_shape, &t_strides)
      .iter()
      .flat_map(|&offset| values[offset as usize].to_ne_bytes())
      .collect();
    assert_eq!(
      convert_over_garbage(&source, DType::Int32, &Affine::default()),
      want
    );
    let flags = [0u8, 1, 2, 255];
    let source = Strided::over_bytes(&flags, 0, DType::Bool, &[4], &[1]).unwrap();
    assert_eq!(
      convert_over_garbage(&source, DType::Bool, &Affine::default()),
      [0, 1, 1, 1]
    );
  }

  #[test]
  fn an_overlapping_destination_is_refused() {
    let mut buffer = [0u8; 16];
    let pointer = buffer.as_mut_ptr();
    let shape = [4];
    let strides = [1];
    // SAFETY: the four bytes are readable for the test.
    let source = unsafe { Strided::from_raw(pointer, DType::UInt8, &shape, &strides) };
    // SAFETY: bytes 2..6 of the same buffer, overlapping the source.
    let out = unsafe { core::slice::from_raw_parts_mut(pointer.add(2), 4) };
    assert_eq!(
      copy_dense(&source, out).unwrap_err().kind(),
      ErrorKind::InvalidArgument
    );
  }
}
