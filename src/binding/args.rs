//! Argument conversion shared by the bindings: JS values that several calls take in the same
//! form (a dtype by name, a bigint, a DLPack stream as a bigint) become the Rust values the
//! layers below take. Converting JS values is this layer's job only; `ops` and `cuda` see
//! `DType`s and `Stream`s, never a `BigInt`.

use napi::bindgen_prelude::BigInt;
use napi_dlpack::cuda::Stream;
use napi_dlpack::{DType, ErrorKind};

use crate::errors::{fail, Result};

/// A dtype argument, by its name (`lib/dtype.ts`'s names, `DType::name`).
pub(crate) fn parse_dtype(name: &str) -> Result<DType> {
  DType::from_name(name).ok_or_else(|| fail(ErrorKind::Dtype, format!("unknown dtype {name:?}")))
}

/// A JS bigint as i128 (`None` when it does not fit).
pub(crate) fn bigint_value(value: &BigInt) -> Option<i128> {
  let mut magnitude: u128 = 0;
  for (index, &word) in value.words.iter().enumerate() {
    match index {
      0 | 1 => magnitude |= (word as u128) << (64 * index),
      _ if word != 0 => return None,
      _ => {}
    }
  }
  let magnitude = i128::try_from(magnitude).ok()?;
  Some(if value.sign_bit {
    -magnitude
  } else {
    magnitude
  })
}

/// Parses a `stream` argument (`importCapsule`, `copyBetween`: a bigint or nothing) as a CUDA
/// stream; `None` when none was given. Bad values fail with `ERR_DLPACK_STREAM`.
pub(crate) fn stream_arg(stream: Option<&BigInt>) -> Result<Option<Stream>> {
  let Some(stream) = stream else {
    return Ok(None);
  };
  let value = bigint_value(stream)
    .ok_or_else(|| fail(ErrorKind::Stream, "the stream value is out of range"))?;
  Ok(Some(Stream::from_dlpack(Some(value))?))
}

#[cfg(test)]
mod tests {
  use super::*;

  fn bigint(sign_bit: bool, words: &[u64]) -> BigInt {
    BigInt {
      sign_bit,
      words: words.to_vec(),
    }
  }

  #[test]
  fn bigints_up_to_i128_are_read() {
    assert_eq!(bigint_value(&bigint(false, &[5])), Some(5));
    assert_eq!(bigint_value(&bigint(true, &[1])), Some(-1));
    assert_eq!(bigint_value(&bigint(false, &[0, 1])), Some(1 << 64));
    assert_eq!(bigint_value(&bigint(false, &[7, 0, 0])), Some(7));
    assert_eq!(bigint_value(&bigint(false, &[0, 0, 1])), None);
    assert_eq!(bigint_value(&bigint(false, &[0, u64::MAX])), None);
  }

  #[test]
  fn stream_arguments() {
    assert_eq!(stream_arg(None).unwrap(), None);
    assert_eq!(
      stream_arg(Some(&bigint(false, &[1]))).unwrap(),
      Some(Stream::Legacy)
    );
    assert_eq!(
      stream_arg(Some(&bigint(true, &[1]))).unwrap(),
      Some(Stream::NoSync)
    );
    assert_eq!(
      stream_arg(Some(&bigint(false, &[0x1234]))).unwrap(),
      Some(Stream::Handle(0x1234))
    );
    for bad in [
      bigint(false, &[0]),
      bigint(true, &[5]),
      bigint(false, &[0, 0, 1]),
    ] {
      assert_eq!(
        stream_arg(Some(&bad)).unwrap_err().status,
        "ERR_DLPACK_STREAM"
      );
    }
  }

  #[test]
  fn dtypes_are_read_by_name() {
    assert_eq!(parse_dtype("float32").unwrap(), DType::Float32);
    assert_eq!(
      parse_dtype("float33").unwrap_err().status,
      "ERR_DLPACK_DTYPE"
    );
  }
}
