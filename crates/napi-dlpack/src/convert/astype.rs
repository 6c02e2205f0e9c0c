//! dtype conversion ([`convert`]): the formula of the [`convert` module docs](super) per element, with an
//! optional affine step per channel, and its fast paths (lookup tables for one-byte sources,
//! a vectorised direct loop, pixel-order lookups for images).

use core::mem::MaybeUninit;

use smallvec::SmallVec;

use super::engine::{as_uninit, check_out, copy_dense_uninit, Rows};
use super::scalar::{BoolByte, Scalar};
use super::{invalid, is_convertible, Strided};
use crate::dtype::DType;
use crate::error::DLPackError;

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
  /// The float64 formula of the `convert` module docs, one IEEE operation per step given.
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

/// Writes the elements of `source` converted to `target` (see the `convert` module docs for the formula)
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

/// One element, by the path the `convert` module docs define.
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
  use crate::convert::permute;
  use crate::convert::testing::{reference_offsets, strides_of};
  use crate::error::ErrorKind;

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
}
