//! Hot calls (`napi_dlpack::hot_function!`): the same kind of functions as `typed.rs`, exported
//! as raw Node-API callbacks, so a call pays no napi-rs per-call machinery (about 1,000
//! instructions, ~45 ns, per call of one or more arguments on Node 20): for small tensors that
//! fixed cost is larger than the borrow itself. Arguments and safety are those of `TensorArg`.
//!
//! - `scaleHot(x, factor)`: `x *= factor` through a mutable strided view;
//! - `addIntoHot(target, source)`: `target += source`, returns `target`'s new values
//!   (`addIntoHot(x, x)` is `ERR_DLPACK_ALIASED`);
//! - `inspectHot(x)`: metadata and whether the argument was borrowed;
//! - `panicHot(x, write)`: borrows `x` (and its slice, for writing when `write`), then panics:
//!   the test of the panic path (the JS error, the borrow and the slice given back);
//! - `benchHot1/3/8`, `benchHotEmpty1/3/8`: the benchmark rows (benches/typed-args*.mjs).
//!
//! Their TypeScript declarations are in `header.d.ts` (napi-rs generates none for them).

use napi::bindgen_prelude::{BigInt, Object, Unknown};
use napi::Env;
use napi_derive::napi;
use napi_dlpack::arg::TensorArg;
use napi_dlpack::{hot, hot_function, DLPackError, DType, ErrorKind};

use crate::typed::Inspection;

hot_function! {
  /// `x *= factor` element by element through a mutable strided view (any strides), float32 or
  /// float64. Refused for READ_ONLY tensors (`ERR_DLPACK_READ_ONLY`).
  pub fn scale_hot(mut x: TensorArg, factor: f64) -> Result<(), DLPackError> {
    match x.dtype() {
      DType::Float32 => x.view_mut::<f32>()?.map_in_place(|v| v * factor as f32),
      DType::Float64 => x.view_mut::<f64>()?.map_in_place(|v| v * factor),
      other => {
        return Err(DLPackError::new(
          ErrorKind::DtypeMismatch,
          format!("scaleHot needs float32 or float64, got {other}"),
        ))
      }
    }
    Ok(())
  }
}

hot_function! {
  /// `target += source` for two contiguous float32 tensors of the same length; returns
  /// `target`'s new values. Two arguments over the same memory are `ERR_DLPACK_ALIASED`.
  pub fn add_into_hot(mut target: TensorArg, source: TensorArg) -> Result<Vec<f64>, DLPackError> {
    let source = source.as_slice::<f32>()?;
    let mut target = target.as_mut_slice::<f32>()?;
    if source.len() != target.len() {
      return Err(DLPackError::new(
        ErrorKind::Shape,
        format!("addIntoHot: {} elements into {}", source.len(), target.len()),
      ));
    }
    for (into, from) in target.iter_mut().zip(source.iter()) {
      *into += *from;
    }
    Ok(target.iter().map(|&v| f64::from(v)).collect())
  }
}

hot_function! {
  /// Metadata of any tensor argument, and whether it was borrowed.
  pub fn inspect_hot(x: TensorArg) -> Result<Inspection, DLPackError> {
    Ok(Inspection {
      dtype: x.dtype().name().to_string(),
      shape: x.shape().to_vec(),
      strides: x.strides().to_vec(),
      data_pointer: BigInt::from(x.data_ptr() as usize as u64),
      readonly: x.is_read_only(),
      borrowed: x.is_borrowed(),
    })
  }
}

hot_function! {
  /// Borrows `x`, lends its elements (for writing when `write`), and panics while both are
  /// held.
  pub fn panic_hot(mut x: TensorArg, write: bool) -> Result<(), DLPackError> {
    if write {
      let slice = x.as_mut_slice::<f32>()?;
      panic!("panicHot: {} elements lent for writing", slice.len());
    }
    let slice = x.as_slice::<f32>()?;
    panic!("panicHot: {} elements lent for reading", slice.len());
  }
}

// Benchmarks: the argument conversion alone (`benchHot*`), and the hot call without it
// (`benchHotEmpty*`, arguments taken as they are), against napi-rs's `benchTensorArg*` and
// `benchFloor*` and the raw C floors of benches/callgrind/lookup-routes. They return `undefined`, as the
// C floors do.

hot_function! {
  /// One tensor argument, converted and dropped.
  pub fn bench_hot_1(a: TensorArg) -> Result<(), DLPackError> {
    let _ = a.ndim();
    Ok(())
  }
}

hot_function! {
  /// Three tensor arguments.
  pub fn bench_hot_3(a: TensorArg, b: TensorArg, c: TensorArg) -> Result<(), DLPackError> {
    let _ = (a.ndim(), b.ndim(), c.ndim());
    Ok(())
  }
}

hot_function! {
  /// Eight tensor arguments.
  pub fn bench_hot_8(
    a: TensorArg, b: TensorArg, c: TensorArg, d: TensorArg,
    e: TensorArg, f: TensorArg, g: TensorArg, h: TensorArg,
  ) -> Result<(), DLPackError> {
    let _ = [&a, &b, &c, &d, &e, &f, &g, &h].map(|x| x.ndim());
    Ok(())
  }
}

hot_function! {
  /// The hot call of one argument, not converted.
  pub fn bench_hot_empty_1(a: Unknown) -> Result<(), DLPackError> {
    let _ = a;
    Ok(())
  }
}

hot_function! {
  /// The hot call of three arguments, not converted.
  pub fn bench_hot_empty_3(a: Unknown, b: Unknown, c: Unknown) -> Result<(), DLPackError> {
    let _ = (a, b, c);
    Ok(())
  }
}

hot_function! {
  /// The hot call of eight arguments, not converted.
  pub fn bench_hot_empty_8(
    a: Unknown, b: Unknown, c: Unknown, d: Unknown,
    e: Unknown, f: Unknown, g: Unknown, h: Unknown,
  ) -> Result<(), DLPackError> {
    let _ = (a, b, c, d, e, f, g, h);
    Ok(())
  }
}

/// Registers the hot functions on the module's exports, next to the `#[napi]` ones.
#[napi(module_exports)]
pub fn register_hot_functions(exports: Object, env: Env) -> napi::Result<()> {
  hot::define(
    &env,
    &exports,
    &[
      (c"scaleHot", scale_hot),
      (c"addIntoHot", add_into_hot),
      (c"inspectHot", inspect_hot),
      (c"panicHot", panic_hot),
      (c"benchHot1", bench_hot_1),
      (c"benchHot3", bench_hot_3),
      (c"benchHot8", bench_hot_8),
      (c"benchHotEmpty1", bench_hot_empty_1),
      (c"benchHotEmpty3", bench_hot_empty_3),
      (c"benchHotEmpty8", bench_hot_empty_8),
    ],
  )
}
