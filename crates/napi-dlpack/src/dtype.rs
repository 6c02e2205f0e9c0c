//! Element types: the raw DLPack type codes, the named dtypes this crate accepts, and the
//! Rust scalar types that can be viewed or exported.

use core::fmt;

use crate::error::{DLPackError, ErrorKind};
use crate::ffi::{DLDataType, DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED};

/// Every `DLDataTypeCode` of DLPack 1.3.
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataTypeCode {
  Int = 0,
  UInt = 1,
  Float = 2,
  OpaqueHandle = 3,
  Bfloat = 4,
  Complex = 5,
  Bool = 6,
  Float8E3M4 = 7,
  Float8E4M3 = 8,
  Float8E4M3B11Fnuz = 9,
  Float8E4M3Fn = 10,
  Float8E4M3Fnuz = 11,
  Float8E5M2 = 12,
  Float8E5M2Fnuz = 13,
  Float8E8M0Fnu = 14,
  Float6E2M3Fn = 15,
  Float6E3M2Fn = 16,
  Float4E2M1Fn = 17,
}

impl DataTypeCode {
  /// All codes, in numeric order.
  pub const ALL: [DataTypeCode; 18] = [
    DataTypeCode::Int,
    DataTypeCode::UInt,
    DataTypeCode::Float,
    DataTypeCode::OpaqueHandle,
    DataTypeCode::Bfloat,
    DataTypeCode::Complex,
    DataTypeCode::Bool,
    DataTypeCode::Float8E3M4,
    DataTypeCode::Float8E4M3,
    DataTypeCode::Float8E4M3B11Fnuz,
    DataTypeCode::Float8E4M3Fn,
    DataTypeCode::Float8E4M3Fnuz,
    DataTypeCode::Float8E5M2,
    DataTypeCode::Float8E5M2Fnuz,
    DataTypeCode::Float8E8M0Fnu,
    DataTypeCode::Float6E2M3Fn,
    DataTypeCode::Float6E3M2Fn,
    DataTypeCode::Float4E2M1Fn,
  ];

  /// `None` for codes DLPack 1.3 does not define.
  #[inline]
  pub fn from_raw(code: u8) -> Option<DataTypeCode> {
    DataTypeCode::ALL.get(usize::from(code)).copied()
  }
}

/// The element types a tensor may have. Each maps to exactly one `DLDataType` with `lanes == 1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
  Bool,
  Int8,
  Int16,
  Int32,
  Int64,
  UInt8,
  UInt16,
  UInt32,
  UInt64,
  Float16,
  BFloat16,
  Float32,
  Float64,
  Complex64,
  Complex128,
  Float8E3M4,
  Float8E4M3,
  Float8E4M3B11Fnuz,
  Float8E4M3Fn,
  Float8E4M3Fnuz,
  Float8E5M2,
  Float8E5M2Fnuz,
  Float8E8M0Fnu,
  /// 6-bit float; only accepted with one element per byte (the padded flag).
  Float6E2M3Fn,
  Float6E3M2Fn,
  /// 4-bit float; only accepted with one element per byte (the padded flag).
  Float4E2M1Fn,
}

impl DType {
  /// Every dtype, in a stable order (used by tests and by the JS name table).
  pub const ALL: [DType; 26] = [
    DType::Bool,
    DType::Int8,
    DType::Int16,
    DType::Int32,
    DType::Int64,
    DType::UInt8,
    DType::UInt16,
    DType::UInt32,
    DType::UInt64,
    DType::Float16,
    DType::BFloat16,
    DType::Float32,
    DType::Float64,
    DType::Complex64,
    DType::Complex128,
    DType::Float8E3M4,
    DType::Float8E4M3,
    DType::Float8E4M3B11Fnuz,
    DType::Float8E4M3Fn,
    DType::Float8E4M3Fnuz,
    DType::Float8E5M2,
    DType::Float8E5M2Fnuz,
    DType::Float8E8M0Fnu,
    DType::Float6E2M3Fn,
    DType::Float6E3M2Fn,
    DType::Float4E2M1Fn,
  ];

  /// The `(code, bits)` pair of this dtype. `lanes` is always 1.
  pub const fn code_bits(self) -> (DataTypeCode, u8) {
    use DataTypeCode as C;
    match self {
      DType::Bool => (C::Bool, 8),
      DType::Int8 => (C::Int, 8),
      DType::Int16 => (C::Int, 16),
      DType::Int32 => (C::Int, 32),
      DType::Int64 => (C::Int, 64),
      DType::UInt8 => (C::UInt, 8),
      DType::UInt16 => (C::UInt, 16),
      DType::UInt32 => (C::UInt, 32),
      DType::UInt64 => (C::UInt, 64),
      DType::Float16 => (C::Float, 16),
      DType::BFloat16 => (C::Bfloat, 16),
      DType::Float32 => (C::Float, 32),
      DType::Float64 => (C::Float, 64),
      DType::Complex64 => (C::Complex, 64),
      DType::Complex128 => (C::Complex, 128),
      DType::Float8E3M4 => (C::Float8E3M4, 8),
      DType::Float8E4M3 => (C::Float8E4M3, 8),
      DType::Float8E4M3B11Fnuz => (C::Float8E4M3B11Fnuz, 8),
      DType::Float8E4M3Fn => (C::Float8E4M3Fn, 8),
      DType::Float8E4M3Fnuz => (C::Float8E4M3Fnuz, 8),
      DType::Float8E5M2 => (C::Float8E5M2, 8),
      DType::Float8E5M2Fnuz => (C::Float8E5M2Fnuz, 8),
      DType::Float8E8M0Fnu => (C::Float8E8M0Fnu, 8),
      DType::Float6E2M3Fn => (C::Float6E2M3Fn, 6),
      DType::Float6E3M2Fn => (C::Float6E3M2Fn, 6),
      DType::Float4E2M1Fn => (C::Float4E2M1Fn, 4),
    }
  }

  /// The dtype with this `(code, bits)`, if any (the inverse of [`DType::code_bits`]).
  pub const fn from_code_bits(code: DataTypeCode, bits: u8) -> Option<DType> {
    use DataTypeCode as C;
    Some(match (code, bits) {
      (C::Bool, 8) => DType::Bool,
      (C::Int, 8) => DType::Int8,
      (C::Int, 16) => DType::Int16,
      (C::Int, 32) => DType::Int32,
      (C::Int, 64) => DType::Int64,
      (C::UInt, 8) => DType::UInt8,
      (C::UInt, 16) => DType::UInt16,
      (C::UInt, 32) => DType::UInt32,
      (C::UInt, 64) => DType::UInt64,
      (C::Float, 16) => DType::Float16,
      (C::Bfloat, 16) => DType::BFloat16,
      (C::Float, 32) => DType::Float32,
      (C::Float, 64) => DType::Float64,
      (C::Complex, 64) => DType::Complex64,
      (C::Complex, 128) => DType::Complex128,
      (C::Float8E3M4, 8) => DType::Float8E3M4,
      (C::Float8E4M3, 8) => DType::Float8E4M3,
      (C::Float8E4M3B11Fnuz, 8) => DType::Float8E4M3B11Fnuz,
      (C::Float8E4M3Fn, 8) => DType::Float8E4M3Fn,
      (C::Float8E4M3Fnuz, 8) => DType::Float8E4M3Fnuz,
      (C::Float8E5M2, 8) => DType::Float8E5M2,
      (C::Float8E5M2Fnuz, 8) => DType::Float8E5M2Fnuz,
      (C::Float8E8M0Fnu, 8) => DType::Float8E8M0Fnu,
      (C::Float6E2M3Fn, 6) => DType::Float6E2M3Fn,
      (C::Float6E3M2Fn, 6) => DType::Float6E3M2Fn,
      (C::Float4E2M1Fn, 4) => DType::Float4E2M1Fn,
      _ => return None,
    })
  }

  /// The raw DLPack descriptor.
  pub const fn to_dl(self) -> DLDataType {
    let (code, bits) = self.code_bits();
    DLDataType {
      code: code as u8,
      bits,
      lanes: 1,
    }
  }

  /// Bytes one element occupies in memory. Sub-byte floats are only accepted padded to a
  /// byte each, so this is never fractional.
  pub const fn itemsize(self) -> usize {
    let (_, bits) = self.code_bits();
    if bits < 8 {
      1
    } else {
      bits as usize / 8
    }
  }

  /// Sub-byte types (fp6, fp4) that need `IS_SUBBYTE_TYPE_PADDED` on import and export.
  pub const fn is_subbyte(self) -> bool {
    self.code_bits().1 < 8
  }

  /// The name used in JS and in error messages (`"float32"`, `"float8_e4m3fn"`, ...).
  pub const fn name(self) -> &'static str {
    match self {
      DType::Bool => "bool",
      DType::Int8 => "int8",
      DType::Int16 => "int16",
      DType::Int32 => "int32",
      DType::Int64 => "int64",
      DType::UInt8 => "uint8",
      DType::UInt16 => "uint16",
      DType::UInt32 => "uint32",
      DType::UInt64 => "uint64",
      DType::Float16 => "float16",
      DType::BFloat16 => "bfloat16",
      DType::Float32 => "float32",
      DType::Float64 => "float64",
      DType::Complex64 => "complex64",
      DType::Complex128 => "complex128",
      DType::Float8E3M4 => "float8_e3m4",
      DType::Float8E4M3 => "float8_e4m3",
      DType::Float8E4M3B11Fnuz => "float8_e4m3b11fnuz",
      DType::Float8E4M3Fn => "float8_e4m3fn",
      DType::Float8E4M3Fnuz => "float8_e4m3fnuz",
      DType::Float8E5M2 => "float8_e5m2",
      DType::Float8E5M2Fnuz => "float8_e5m2fnuz",
      DType::Float8E8M0Fnu => "float8_e8m0fnu",
      DType::Float6E2M3Fn => "float6_e2m3fn",
      DType::Float6E3M2Fn => "float6_e3m2fn",
      DType::Float4E2M1Fn => "float4_e2m1fn",
    }
  }

  /// Inverse of [`DType::name`].
  pub fn from_name(name: &str) -> Option<DType> {
    DType::ALL
      .iter()
      .copied()
      .find(|dtype| dtype.name() == name)
  }

  /// Validates a foreign `DLDataType`. `flags` are the versioned flags (0 for legacy tensors):
  /// sub-byte types are accepted only when `IS_SUBBYTE_TYPE_PADDED` is set, since a packed
  /// layout cannot be addressed per element with byte strides.
  #[inline(always)]
  pub fn from_dl(raw: DLDataType, flags: u64) -> Result<DType, DLPackError> {
    // Two table loads instead of a match on (code, bits): no indirect jump on the import path.
    let dtype = match DTYPE_BY_CODE_AND_WIDTH.get(usize::from(raw.code)) {
      Some(by_width) if raw.lanes == 1 => by_width[usize::from(WIDTH_CLASS[usize::from(raw.bits)])],
      _ => None,
    };
    match dtype {
      Some(dtype)
        if !dtype.is_subbyte() || flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED != 0 =>
      {
        Ok(dtype)
      }
      _ => Err(dtype_error(raw)),
    }
  }
}

/// The bit widths DLPack 1.3 dtypes use, in the order of the columns of
/// [`DTYPE_BY_CODE_AND_WIDTH`]; column 0 stands for every other width.
const WIDTHS: [u8; 8] = [0, 4, 6, 8, 16, 32, 64, 128];

/// `bits` → column of [`DTYPE_BY_CODE_AND_WIDTH`] (0: no dtype has that width).
static WIDTH_CLASS: [u8; 256] = {
  let mut classes = [0u8; 256];
  let mut column = 1;
  while column < WIDTHS.len() {
    classes[WIDTHS[column] as usize] = column as u8;
    column += 1;
  }
  classes
};

/// The dtype of each `(code, width column)`, built from [`DType::code_bits`] so the two
/// directions cannot disagree (a test checks every raw pair against `from_code_bits`).
static DTYPE_BY_CODE_AND_WIDTH: [[Option<DType>; WIDTHS.len()]; DataTypeCode::ALL.len()] = {
  let mut table = [[None; WIDTHS.len()]; DataTypeCode::ALL.len()];
  let mut index = 0;
  while index < DType::ALL.len() {
    let dtype = DType::ALL[index];
    let (code, bits) = dtype.code_bits();
    let mut column = 1;
    while WIDTHS[column] != bits {
      column += 1; // every dtype's width is in WIDTHS, or this indexes out of bounds at compile time
    }
    table[code as usize][column] = Some(dtype);
    index += 1;
  }
  table
};

/// Explains why `raw` was refused (kept out of line: the accepting path stays small).
#[cold]
#[inline(never)]
fn dtype_error(raw: DLDataType) -> DLPackError {
  let message = if raw.lanes != 1 {
    format!(
      "vector dtypes are not supported (lanes = {}, must be 1)",
      raw.lanes
    )
  } else {
    match DataTypeCode::from_raw(raw.code) {
      None => format!("unknown DLDataTypeCode {}", raw.code),
      Some(code) => match DType::from_code_bits(code, raw.bits) {
        None => format!(
          "{} bits is not a supported width for type code {code:?}",
          raw.bits
        ),
        Some(dtype) => format!(
          "{} is only supported padded to one element per byte (IS_SUBBYTE_TYPE_PADDED)",
          dtype.name()
        ),
      },
    }
  };
  DLPackError::new(ErrorKind::Dtype, message)
}

impl fmt::Display for DType {
  fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    f.write_str(self.name())
  }
}

/// A Rust scalar that can be exported as, and viewed from, a DLPack tensor element.
///
/// # Safety
/// `DTYPE.itemsize()` must equal `size_of::<Self>()`, `Self` must have no padding, and every
/// bit pattern of that size must be a valid `Self` unless [`Element::is_valid_bits`] says
/// otherwise (it is checked on every foreign element before a typed view is handed out).
pub unsafe trait Element: Copy + Send + Sync + 'static {
  /// The dtype this Rust type stands for.
  const DTYPE: DType;
  /// Whether [`Element::is_valid_bits`] must be run over foreign data (only `bool`).
  const NEEDS_BIT_CHECK: bool = false;
  /// Whether the bytes of one element form a valid `Self`.
  fn is_valid_bits(_element: &[u8]) -> bool {
    true
  }
}

macro_rules! element {
  ($($ty:ty => $dtype:ident),* $(,)?) => {$(
    // SAFETY: primitive numeric types with no padding, every bit pattern valid, and the size
    // matches the dtype (checked by the `itemsize_matches_rust_size` test).
    unsafe impl Element for $ty {
      const DTYPE: DType = DType::$dtype;
    }
  )*};
}

element!(
  i8 => Int8, i16 => Int16, i32 => Int32, i64 => Int64,
  u8 => UInt8, u16 => UInt16, u32 => UInt32, u64 => UInt64,
  f32 => Float32, f64 => Float64,
);

// SAFETY: bool is one byte; only 0 and 1 are valid, which `is_valid_bits` enforces on every
// foreign element before a `&[bool]` is created.
unsafe impl Element for bool {
  const DTYPE: DType = DType::Bool;
  const NEEDS_BIT_CHECK: bool = true;
  fn is_valid_bits(element: &[u8]) -> bool {
    matches!(element, [0] | [1])
  }
}

#[cfg(feature = "half")]
element!(half::f16 => Float16, half::bf16 => BFloat16);

#[cfg(feature = "complex")]
element!(num_complex::Complex<f32> => Complex64, num_complex::Complex<f64> => Complex128);

#[cfg(test)]
mod tests {
  use super::*;
  use core::mem::size_of;

  #[test]
  #[cfg_attr(
    miri,
    ignore = "262 144 safe lookups: too slow under Miri, no unsafe code"
  )]
  fn the_import_table_agrees_with_from_code_bits_for_every_raw_pair() {
    let padded = DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED;
    let mut accepted = 0;
    for code in 0..=u8::MAX {
      for bits in 0..=u8::MAX {
        let expected = DataTypeCode::from_raw(code).and_then(|c| DType::from_code_bits(c, bits));
        for lanes in [1u16, 0, 2, 4] {
          let raw = DLDataType { code, bits, lanes };
          let imported = DType::from_dl(raw, padded).ok();
          assert_eq!(
            imported,
            expected.filter(|_| lanes == 1),
            "code {code} bits {bits} lanes {lanes}"
          );
          accepted += usize::from(imported.is_some());
        }
      }
    }
    assert_eq!(accepted, DType::ALL.len());
  }

  #[test]
  fn every_dtype_round_trips_through_dl_and_name() {
    for dtype in DType::ALL {
      let flags = if dtype.is_subbyte() {
        DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED
      } else {
        0
      };
      assert_eq!(DType::from_dl(dtype.to_dl(), flags).ok(), Some(dtype));
      assert_eq!(DType::from_name(dtype.name()), Some(dtype));
    }
    assert_eq!(DType::from_name("float128"), None);
  }

  #[test]
  fn codes_match_dlpark() {
    use dlpark::ffi::DLDataTypeCode as Other;
    let pairs = [
      (DataTypeCode::Int, Other::INT),
      (DataTypeCode::UInt, Other::UINT),
      (DataTypeCode::Float, Other::FLOAT),
      (DataTypeCode::OpaqueHandle, Other::OPAQUEHANDLE),
      (DataTypeCode::Bfloat, Other::BFLOAT),
      (DataTypeCode::Complex, Other::COMPLEX),
      (DataTypeCode::Bool, Other::BOOL),
      (DataTypeCode::Float8E3M4, Other::FLOAT8_E3M4),
      (DataTypeCode::Float8E4M3, Other::FLOAT8_E4M3),
      (DataTypeCode::Float8E4M3B11Fnuz, Other::FLOAT8_E4M3B11FNUZ),
      (DataTypeCode::Float8E4M3Fn, Other::FLOAT8_E4M3FN),
      (DataTypeCode::Float8E4M3Fnuz, Other::FLOAT8_E4M3FNUZ),
      (DataTypeCode::Float8E5M2, Other::FLOAT8_E5M2),
      (DataTypeCode::Float8E5M2Fnuz, Other::FLOAT8_E5M2FNUZ),
      (DataTypeCode::Float8E8M0Fnu, Other::FLOAT8_E8M0FNU),
      (DataTypeCode::Float6E2M3Fn, Other::FLOAT6_E2M3FN),
      (DataTypeCode::Float6E3M2Fn, Other::FLOAT6_E3M2FN),
      (DataTypeCode::Float4E2M1Fn, Other::FLOAT4_E2M1FN),
    ];
    for (ours, theirs) in pairs {
      assert_eq!(ours as u8, theirs.0, "{ours:?}");
      assert_eq!(DataTypeCode::from_raw(theirs.0), Some(ours));
    }
    assert_eq!(DataTypeCode::from_raw(18), None);
    assert_eq!(DataTypeCode::from_raw(255), None);
  }

  #[test]
  fn invalid_descriptors_are_rejected_with_the_dtype_code() {
    let cases = [
      DLDataType {
        code: 2,
        bits: 32,
        lanes: 4,
      }, // vector
      DLDataType {
        code: 2,
        bits: 32,
        lanes: 0,
      }, // zero lanes
      DLDataType {
        code: 99,
        bits: 8,
        lanes: 1,
      }, // unknown code
      DLDataType {
        code: 6,
        bits: 1,
        lanes: 1,
      }, // bool must be 8 bits
      DLDataType {
        code: 5,
        bits: 32,
        lanes: 1,
      }, // complex bits are the whole value
      DLDataType {
        code: 2,
        bits: 24,
        lanes: 1,
      }, // odd float width
      DLDataType {
        code: 0,
        bits: 4,
        lanes: 1,
      }, // int4 unsupported
      DLDataType {
        code: 3,
        bits: 64,
        lanes: 1,
      }, // opaque handle cannot be viewed
      DLDataType {
        code: 17,
        bits: 4,
        lanes: 1,
      }, // fp4 without the padded flag
      DLDataType {
        code: 15,
        bits: 8,
        lanes: 1,
      }, // fp6 must be 6 bits
      DLDataType {
        code: 10,
        bits: 16,
        lanes: 1,
      }, // fp8 must be 8 bits
    ];
    for raw in cases {
      let err = DType::from_dl(raw, 0).expect_err(&format!("{raw:?} accepted"));
      assert_eq!(err.code(), "ERR_DLPACK_DTYPE", "{raw:?}");
    }
  }

  #[test]
  fn itemsize_matches_rust_size() {
    fn check<T: Element>() {
      assert_eq!(T::DTYPE.itemsize(), size_of::<T>(), "{}", T::DTYPE);
    }
    check::<i8>();
    check::<i16>();
    check::<i32>();
    check::<i64>();
    check::<u8>();
    check::<u16>();
    check::<u32>();
    check::<u64>();
    check::<f32>();
    check::<f64>();
    check::<bool>();
    #[cfg(feature = "half")]
    {
      check::<half::f16>();
      check::<half::bf16>();
    }
    #[cfg(feature = "complex")]
    {
      check::<num_complex::Complex<f32>>();
      check::<num_complex::Complex<f64>>();
    }
    assert_eq!(DType::Float4E2M1Fn.itemsize(), 1);
    assert_eq!(DType::Complex128.itemsize(), 16);
  }

  #[test]
  fn bool_bits_are_checked() {
    assert!(bool::is_valid_bits(&[0]));
    assert!(bool::is_valid_bits(&[1]));
    assert!(!bool::is_valid_bits(&[2]));
    assert!(!bool::is_valid_bits(&[255]));
  }
}
