//! The element types of [`convert`](super::convert): reading each as a float64 or an exact
//! integer and storing back with the documented rounding and saturation.

/// One element type as the conversions see it (read and written unaligned, by value).
pub(super) trait Scalar: Copy + 'static {
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
pub(super) struct BoolByte(u8);

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
