//! Helpers shared by the conversion tests.

/// Row-major strides of `shape`.
pub(super) fn strides_of(shape: &[i64]) -> Vec<i64> {
  crate::layout::contiguous_strides(shape).unwrap().to_vec()
}

/// The reference: row-major walk with the documented formula written out longhand.
pub(super) fn reference_offsets(shape: &[i64], strides: &[i64]) -> Vec<i64> {
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

/// Distinct bytes (a byte's value follows its position, period 251, a prime).
pub(super) fn pattern(len: usize) -> Vec<u8> {
  (0..len).map(|i| (i % 251) as u8).collect()
}
