//! The typed API: tensor arguments and results declared in the function signature.
//!
//! - `scaleInPlace(x, factor)`: multiplies every element in place, any strides (a mutable
//!   strided view), float32 or float64;
//! - `fwhtRows(x)`: the Walsh–Hadamard transform of `fwhtRowsInPlace`, taking any tensor;
//! - `inspect(x)` / `inspectOwned(x)`: metadata and how the argument arrived (borrowed or owned);
//! - `addInto(target, source)`: `target += source` (two borrowed arguments);
//! - `sumAsync(x)`: the sum on the libuv thread pool, from a tensor the task owns;
//! - `matrix(rows, cols, dtype)` / `matrixCapsule(...)`: a Rust matrix returned as a
//!   napi-dlpack `Tensor` (or always as a capsule).
//!
//! Errors: `napi::Result<T, &'static str>` (napi-derive recognises a return type by the name
//! `Result`), whose error `napi::Error<&'static str>` converts from `DLPackError`, so `?` works
//! on every crate call and the thrown JS error carries the crate's stable `code`.

use napi::bindgen_prelude::{AsyncTask, BigInt};
use napi::{Env, Task};
use napi_derive::napi;
use napi_dlpack::arg::{OwnedTensorArg, TensorArg, TensorResult};
use napi_dlpack::{DLPackError, DType, ErrorKind};

use crate::{fwht_rows, parse_dtype, Matrix};

/// `x *= factor`, element by element, through a mutable strided view: transposed, sliced and
/// broadcast tensors included. Refused for READ_ONLY tensors (`ERR_DLPACK_READ_ONLY`).
#[napi(js_name = "scaleInPlace")]
pub fn scale_in_place(mut x: TensorArg, factor: f64) -> napi::Result<(), &'static str> {
  match x.dtype() {
    DType::Float32 => x.view_mut::<f32>()?.map_in_place(|v| v * factor as f32),
    DType::Float64 => x.view_mut::<f64>()?.map_in_place(|v| v * factor),
    other => {
      return Err(
        DLPackError::new(
          ErrorKind::DtypeMismatch,
          format!("scaleInPlace needs float32 or float64, got {other}"),
        )
        .into(),
      )
    }
  }
  Ok(())
}

/// `target += source` for two contiguous float32 tensors of the same length; returns `target`'s
/// new values. `target` is converted first, so whatever JS `source`'s conversion runs (its
/// `__dlpack__`, a getter) runs while `target` is borrowed: the borrow keeps `target`'s memory
/// alive even if that JS disposes it. `addInto(x, x)` (or any `source` overlapping `target`)
/// is refused with `ERR_DLPACK_ALIASED`: the write slice of one and the read slice of the other
/// would be the same memory.
#[napi(js_name = "addInto")]
pub fn add_into(mut target: TensorArg, source: TensorArg) -> napi::Result<Vec<f64>, &'static str> {
  let source = source.as_slice::<f32>()?;
  let mut target = target.as_mut_slice::<f32>()?;
  if source.len() != target.len() {
    return Err(
      DLPackError::new(
        ErrorKind::Shape,
        format!("addInto: {} elements into {}", source.len(), target.len()),
      )
      .into(),
    );
  }
  for (into, from) in target.iter_mut().zip(source.iter()) {
    *into += *from;
  }
  Ok(target.iter().map(|&v| f64::from(v)).collect())
}

/// The unnormalised Walsh–Hadamard transform of every row of a 2-D, row-major, writable
/// float32 or float64 tensor whose rows have a power-of-two length.
#[napi(js_name = "fwhtRows")]
pub fn fwht_rows_typed(mut x: TensorArg) -> napi::Result<(), &'static str> {
  let &[_, cols] = x.shape() else {
    return Err(
      DLPackError::new(
        ErrorKind::InvalidArgument,
        format!("fwhtRows needs a 2-D tensor, got shape {:?}", x.shape()),
      )
      .into(),
    );
  };
  if cols <= 0 || !(cols as u64).is_power_of_two() {
    return Err(
      DLPackError::new(
        ErrorKind::InvalidArgument,
        format!("the row length must be a power of two, got {cols}"),
      )
      .into(),
    );
  }
  match x.dtype() {
    DType::Float32 => fwht_rows(&mut x.as_mut_slice::<f32>()?, cols as usize),
    _ => fwht_rows(&mut x.as_mut_slice::<f64>()?, cols as usize),
  }
  Ok(())
}

/// What `inspect` reports.
#[napi(object)]
pub struct Inspection {
  pub dtype: String,
  pub shape: Vec<i64>,
  pub strides: Vec<i64>,
  /// Address of the first element.
  pub data_pointer: BigInt,
  pub readonly: bool,
  /// Borrowed through an exchange table (no capsule, nothing owned).
  pub borrowed: bool,
}

/// Metadata of any tensor argument, and whether it was borrowed.
#[napi]
pub fn inspect(x: TensorArg) -> Inspection {
  Inspection {
    dtype: x.dtype().name().to_string(),
    shape: x.shape().to_vec(),
    strides: x.strides().to_vec(),
    data_pointer: BigInt::from(x.data_ptr() as usize as u64),
    readonly: x.is_read_only(),
    borrowed: x.is_borrowed(),
  }
}

/// Metadata of an owned argument (an owning export, never a borrow).
#[napi(js_name = "inspectOwned")]
pub fn inspect_owned(x: OwnedTensorArg) -> Inspection {
  Inspection {
    dtype: x.dtype().name().to_string(),
    shape: x.shape().to_vec(),
    strides: x.strides().to_vec(),
    data_pointer: BigInt::from(x.data_ptr() as usize as u64),
    readonly: x.is_read_only(),
    borrowed: false,
  }
}

/// Sums a float32 or float64 tensor on the thread pool.
pub struct SumTask {
  tensor: OwnedTensorArg,
}

impl Task for SumTask {
  type Output = f64;
  type JsValue = f64;

  fn compute(&mut self) -> napi::Result<f64> {
    let sum = match self.tensor.dtype() {
      DType::Float32 => self
        .tensor
        .view::<f32>()
        .map(|view| view.iter().map(f64::from).sum()),
      DType::Float64 => self.tensor.view::<f64>().map(|view| view.iter().sum()),
      other => Err(DLPackError::new(
        ErrorKind::DtypeMismatch,
        format!("sumAsync needs float32 or float64, got {other}"),
      )),
    };
    sum.map_err(|error| napi::Error::new(napi::Status::GenericFailure, error.to_string()))
  }

  fn resolve(&mut self, _env: Env, output: f64) -> napi::Result<f64> {
    Ok(output)
  }
}

/// The sum of `x`, computed off the JS thread. The task owns the tensor: the JS side may
/// dispose its own handle meanwhile; the memory stays until the task is dropped.
#[napi(js_name = "sumAsync", ts_return_type = "Promise<number>")]
pub fn sum_async(x: OwnedTensorArg) -> AsyncTask<SumTask> {
  AsyncTask::new(SumTask { tensor: x })
}

/// A new `rows × cols` matrix (element `(i, j)` = `i * cols + j`) returned as a napi-dlpack
/// `Tensor` (a capsule if napi-dlpack is not loaded). The TypeScript signature names the dtype:
/// `matrix(2, 3, 'float32')` is a `TensorResult<'float32'>`, which
/// `fromDLPack(result, { dtype: 'float32' })` turns into a `Tensor<'float32'>` (checked).
#[napi(
  ts_generic_types = "D extends 'float32' | 'float64'",
  ts_args_type = "rows: number, cols: number, dtype: D",
  ts_return_type = "TensorResult<D>"
)]
pub fn matrix(rows: u32, cols: u32, dtype: String) -> napi::Result<TensorResult, &'static str> {
  let matrix = Matrix::new(rows, cols, parse_dtype(&dtype)?, false)?;
  Ok(TensorResult::new(matrix)?)
}

/// `matrix`, always as a capsule (`TensorResult::capsule`), so typed as one.
#[napi(
  js_name = "matrixCapsule",
  ts_args_type = "rows: number, cols: number, dtype: 'float32' | 'float64'",
  ts_return_type = "DLPackCapsule"
)]
pub fn matrix_capsule(
  rows: u32,
  cols: u32,
  dtype: String,
) -> napi::Result<TensorResult, &'static str> {
  let matrix = Matrix::new(rows, cols, parse_dtype(&dtype)?, false)?;
  Ok(TensorResult::new(matrix)?.capsule())
}

// ---------------------------------------------------------------------------------------------
// Benchmarks (benches/wall/exchange.mjs): the argument conversion alone, against an empty call of the
// same arity taking plain values.
// ---------------------------------------------------------------------------------------------

/// One tensor argument, converted (borrowed, or consumed for a capsule) and dropped.
#[napi(js_name = "benchTensorArg1")]
pub fn bench_tensor_arg_1(a: TensorArg) -> u32 {
  a.ndim() as u32
}

/// Three tensor arguments.
#[napi(js_name = "benchTensorArg3")]
pub fn bench_tensor_arg_3(a: TensorArg, b: TensorArg, c: TensorArg) -> u32 {
  (a.ndim() + b.ndim() + c.ndim()) as u32
}

/// Eight tensor arguments.
#[napi(js_name = "benchTensorArg8")]
#[allow(clippy::too_many_arguments)]
pub fn bench_tensor_arg_8(
  a: TensorArg,
  b: TensorArg,
  c: TensorArg,
  d: TensorArg,
  e: TensorArg,
  f: TensorArg,
  g: TensorArg,
  h: TensorArg,
) -> u32 {
  [&a, &b, &c, &d, &e, &f, &g, &h]
    .iter()
    .map(|x| x.ndim() as u32)
    .sum()
}

/// The floor: an empty call taking one value without converting it.
#[napi(js_name = "benchFloor1")]
pub fn bench_floor_1(a: napi::bindgen_prelude::Unknown) -> u32 {
  let _ = a;
  1
}

/// The floor for three arguments.
#[napi(js_name = "benchFloor3")]
pub fn bench_floor_3(
  a: napi::bindgen_prelude::Unknown,
  b: napi::bindgen_prelude::Unknown,
  c: napi::bindgen_prelude::Unknown,
) -> u32 {
  let _ = (a, b, c);
  3
}

/// The floor for eight arguments.
#[napi(js_name = "benchFloor8")]
#[allow(clippy::too_many_arguments)]
pub fn bench_floor_8(
  a: napi::bindgen_prelude::Unknown,
  b: napi::bindgen_prelude::Unknown,
  c: napi::bindgen_prelude::Unknown,
  d: napi::bindgen_prelude::Unknown,
  e: napi::bindgen_prelude::Unknown,
  f: napi::bindgen_prelude::Unknown,
  g: napi::bindgen_prelude::Unknown,
  h: napi::bindgen_prelude::Unknown,
) -> u32 {
  let _ = (a, b, c, d, e, f, g, h);
  8
}
