//! The addon guide's `src/lib.rs` (docs/addons.md, "Rust: from `cargo new` to a strided in-place
//! op"), verbatim below this header: the doc test (scripts/doc-test.mjs) checks that the two are
//! the same and runs the guide's JavaScript against these functions.

use napi::bindgen_prelude::AsyncTask;
use napi::{Env, Task};
use napi_derive::napi;
use napi_dlpack::arg::{OwnedTensorArg, TensorArg, TensorResult};
use napi_dlpack::{DLPackError, DType, ErrorKind, ShapedBuffer};

/// `x *= factor` in place, for any strides (transposed, sliced, broadcast views). A napi-dlpack
/// `Tensor` is borrowed for the call (no capsule); a capsule or any `__dlpack__` object works too.
#[napi]
pub fn scale(mut x: TensorArg, factor: f64) -> napi::Result<(), &'static str> {
  match x.dtype() {
    DType::Float32 => x.view_mut::<f32>()?.map_in_place(|v| v * factor as f32),
    DType::Float64 => x.view_mut::<f64>()?.map_in_place(|v| v * factor),
    other => return Err(DLPackError::new(ErrorKind::DtypeMismatch, format!("got {other}")).into()),
  }
  Ok(())
}

/// Contiguous data as a slice: `as_slice` / `as_mut_slice` check dtype, device, alignment and
/// contiguity (`ERR_DLPACK_NOT_CONTIGUOUS`), and READ_ONLY for writes.
#[napi]
pub fn total(x: TensorArg) -> napi::Result<f64, &'static str> {
  Ok(x.as_slice::<f32>()?.iter().map(|&v| f64::from(v)).sum())
}

/// A new tensor, returned to JS as a napi-dlpack `Tensor` over this Rust memory (a capsule if
/// napi-dlpack is not loaded). The Vec is freed when the last JS user lets go.
#[napi]
pub fn ramp(n: u32) -> napi::Result<TensorResult, &'static str> {
  let values: Vec<f32> = (0..n).map(|i| i as f32).collect();
  Ok(TensorResult::new(ShapedBuffer::new(
    values,
    &[i64::from(n)],
  )?)?)
}

/// Work off the JS thread: an owned argument keeps the tensor after the call returns, even if
/// JS disposes its `Tensor` meanwhile.
pub struct Total(OwnedTensorArg);

impl Task for Total {
  type Output = f64;
  type JsValue = f64;
  fn compute(&mut self) -> napi::Result<f64> {
    let view = self
      .0
      .view::<f32>()
      .map_err(|e| napi::Error::from_reason(e.to_string()))?;
    Ok(view.iter().map(f64::from).sum())
  }
  fn resolve(&mut self, _env: Env, total: f64) -> napi::Result<f64> {
    Ok(total)
  }
}

#[napi(ts_return_type = "Promise<number>")]
pub fn total_async(x: OwnedTensorArg) -> AsyncTask<Total> {
  AsyncTask::new(Total(x))
}
