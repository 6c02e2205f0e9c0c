//! Randomised validation: hundreds of thousands of hostile `DLTensor` descriptors (extreme
//! dimensions, strides, offsets, dtypes, devices). Validation must never panic (debug builds
//! check every arithmetic overflow), and whatever it accepts must satisfy the invariants the
//! rest of the crate relies on. The data pointer is never dereferenced by validation, so it can
//! point anywhere.

use napi_dlpack::ffi::{
  DLDataType, DLDevice, DLTensor, DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED,
};
use napi_dlpack::validation::validate;

/// xorshift64*: deterministic, so a failure reproduces.
struct Rng(u64);

impl Rng {
  fn next(&mut self) -> u64 {
    self.0 ^= self.0 >> 12;
    self.0 ^= self.0 << 25;
    self.0 ^= self.0 >> 27;
    self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
  }

  fn below(&mut self, n: u64) -> u64 {
    self.next() % n
  }

  /// Mostly small values, sometimes the edges of i64.
  fn dim_or_stride(&mut self) -> i64 {
    match self.below(10) {
      0 => i64::MAX - self.below(3) as i64,
      1 => i64::MIN + self.below(3) as i64,
      2 => -(self.below(8) as i64),
      3 => 1 << self.below(63),
      _ => self.below(9) as i64,
    }
  }
}

#[test]
fn hostile_descriptors_never_panic_and_accepted_ones_are_consistent() {
  let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
  let mut accepted = 0;
  // Under Miri (about 10 000 times slower) a smaller sample still checks the unsafe reads.
  let cases = if cfg!(miri) { 6_000 } else { 300_000 };
  for _ in 0..cases {
    let ndim = match rng.below(8) {
      0 => rng.below(70) as i32,
      1 => -(rng.below(3) as i32) - 1,
      _ => rng.below(5) as i32,
    };
    let len = ndim.clamp(0, 70) as usize;
    let mut shape: Vec<i64> = (0..len).map(|_| rng.dim_or_stride()).collect();
    let mut strides: Vec<i64> = (0..len).map(|_| rng.dim_or_stride()).collect();
    let data = match rng.below(4) {
      0 => 0usize,
      1 => usize::MAX - rng.below(64) as usize,
      _ => 0x1000_0000 + rng.below(1 << 20) as usize,
    };
    let tensor = DLTensor {
      data: data as *mut _,
      device: DLDevice {
        device_type: rng.below(20) as u32,
        device_id: rng.below(4) as i32 - 1,
      },
      ndim,
      dtype: DLDataType {
        code: rng.below(19) as u8,
        bits: [1, 4, 6, 8, 16, 32, 64, 128, 255][rng.below(9) as usize],
        lanes: if rng.below(8) == 0 { 2 } else { 1 },
      },
      shape: if rng.below(16) == 0 {
        std::ptr::null_mut()
      } else {
        shape.as_mut_ptr()
      },
      strides: if rng.below(4) == 0 {
        std::ptr::null_mut()
      } else {
        strides.as_mut_ptr()
      },
      byte_offset: match rng.below(4) {
        0 => u64::MAX - rng.below(8),
        1 => rng.below(1 << 40),
        _ => rng.below(64),
      },
    };
    let flags = if rng.below(2) == 0 {
      DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED
    } else {
      0
    };
    // SAFETY: shape and strides point at `len` readable i64s (or are NULL); `len >= ndim` when
    // ndim > 0. Validation reads nothing else.
    let Ok(layout) = (unsafe { validate(&tensor, flags) }) else {
      continue;
    };
    accepted += 1;
    // Invariants of an accepted layout.
    let numel: i128 = shape
      .iter()
      .take(layout.ndim())
      .map(|&d| i128::from(d))
      .product();
    assert_eq!(layout.numel() as i128, numel);
    assert!(layout.min_offset() <= 0 && layout.max_offset() >= 0);
    let itemsize = layout.dtype().itemsize() as i128;
    if layout.numel() == 0 {
      assert_eq!(layout.span_bytes(), 0);
    } else {
      let span = (i128::from(layout.max_offset()) - i128::from(layout.min_offset()) + 1) * itemsize;
      assert_eq!(layout.span_bytes() as i128, span);
      assert!(span <= isize::MAX as i128);
      assert!(!tensor.data.is_null());
      if layout.device().device_type.data_is_address() {
        let first = layout.first_element() as i128;
        assert!(first + i128::from(layout.min_offset()) * itemsize >= 0);
        assert!(first + (i128::from(layout.max_offset()) + 1) * itemsize <= usize::MAX as i128 + 1);
      }
    }
    assert_eq!(
      layout.first_element() as u128,
      data as u128 + u128::from(tensor.byte_offset)
    );
  }
  // The generator must exercise the accepting path too, not only rejections.
  assert!(
    accepted > cases / 300,
    "only {accepted} descriptors were accepted"
  );
}
