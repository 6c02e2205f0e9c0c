//! The `#[napi]` functions of the conversions (`Tensor#permute`, `#transpose`, `#contiguous`,
//! `#astype` in lib/tensor.ts; argument checks in lib/convert.ts).

use napi::bindgen_prelude::Unknown;
use napi::Env;
use napi_derive::napi;
use napi_dlpack::convert::{normalize_axis, Affine};

use crate::binding::parse_dtype;
use crate::errors::Result;
use crate::ops::convert::host_tensor;
use crate::own_capsule::handle_of;

/// A zero-copy view with dimension `i` being dimension `axes[i]` (see `ops::convert::permute`).
#[napi(js_name = "permuteHandle")]
pub fn permute_handle<'env>(
  env: &'env Env,
  handle: Unknown<'env>,
  axes: Vec<i64>,
) -> Result<Unknown<'env>> {
  crate::ops::convert::permute(env, handle_of(env, &handle)?, &axes)
}

/// A dense row-major copy of a host tensor in V8 memory.
#[napi(js_name = "contiguousHandle")]
pub fn contiguous_handle<'env>(env: &'env Env, handle: Unknown<'env>) -> Result<Unknown<'env>> {
  crate::ops::convert::contiguous(env, handle_of(env, &handle)?)
}

/// Arguments of `astypeHandle` (see `Tensor#astype` in lib/tensor.ts).
#[napi(object)]
pub struct AstypeArgs<'env> {
  pub scale: Option<Vec<f64>>,
  pub offset: Option<Vec<f64>>,
  pub mean: Option<Vec<f64>>,
  pub std: Option<Vec<f64>>,
  pub axis: Option<i64>,
  /// A handle to write into instead of allocating (contiguous, writable, host, same shape,
  /// the target dtype, not overlapping the source).
  pub out: Option<Unknown<'env>>,
}

/// The elements converted to `dtype` (the formula of `napi_dlpack::convert`), in a new dense
/// CPU tensor, or written into `options.out` (then `null` is returned).
#[napi(js_name = "astypeHandle")]
pub fn astype_handle<'env>(
  env: &'env Env,
  handle: Unknown<'env>,
  dtype: String,
  options: AstypeArgs<'env>,
) -> Result<Option<Unknown<'env>>> {
  let target = parse_dtype(&dtype)?;
  // Each handle is borrowed only long enough to take its storage and layout (the two may be
  // the same JS value).
  let source = host_tensor(env, handle_of(env, &handle)?)?;
  let out = match &options.out {
    Some(out) => Some(host_tensor(env, handle_of(env, out)?)?),
    None => None,
  };
  let axis = options
    .axis
    .map(|axis| normalize_axis(axis, source.1.shape.len()))
    .transpose()?;
  let affine = Affine {
    scale: options.scale,
    offset: options.offset,
    mean: options.mean,
    std: options.std,
    axis,
  };
  crate::ops::convert::astype(env, &source, target, &affine, out.as_ref())
}
