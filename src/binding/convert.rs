//! The `#[napi]` functions of the conversions (`Tensor#permute`, `#transpose`, `#contiguous`,
//! `#astype` in lib/tensor.ts; argument checks in lib/convert.ts).

use napi::bindgen_prelude::Unknown;
use napi::Env;
use napi_derive::napi;
use napi_dlpack::convert::{normalize_axis, Affine};
use napi_dlpack::view_layout::{self, ViewLayout};
use napi_dlpack::ErrorKind;

use crate::binding::args::parse_dtype;
use crate::errors::{fail, Result};
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

/// What `viewHandle` makes (see `Tensor#reshape` and the other views in lib/tensor.ts); the
/// fields each `op` reads are named in `view_layout_of`.
#[napi(object)]
pub struct ViewRequest {
  /// `reshape`, `unsqueeze`, `squeeze`, `flatten`, `slice`, `narrow`, `select` or `expand`.
  pub op: String,
  pub shape: Option<Vec<i64>>,
  pub dim: Option<i64>,
  pub start: Option<i64>,
  pub end: Option<i64>,
  pub step: Option<i64>,
  pub length: Option<i64>,
}

fn required(value: Option<i64>, op: &str, name: &str) -> Result<i64> {
  value.ok_or_else(|| {
    fail(
      ErrorKind::InvalidArgument,
      format!("{op} needs an integer {name}"),
    )
  })
}

/// The layout of the view `request` asks for, relative to (`shape`, `strides`).
fn view_layout_of(shape: &[i64], strides: &[i64], request: &ViewRequest) -> Result<ViewLayout> {
  let op = request.op.as_str();
  let dims = || {
    request
      .shape
      .as_deref()
      .ok_or_else(|| fail(ErrorKind::InvalidArgument, format!("{op} needs a shape")))
  };
  let dim = || required(request.dim, op, "dimension");
  Ok(match op {
    "reshape" => view_layout::reshape(shape, strides, dims()?)?,
    "unsqueeze" => view_layout::unsqueeze(shape, strides, dim()?)?,
    "squeeze" => view_layout::squeeze(shape, strides, request.dim)?,
    "flatten" => view_layout::flatten(
      shape,
      strides,
      request.start.unwrap_or(0),
      request.end.unwrap_or(-1),
    )?,
    "slice" => view_layout::slice(
      shape,
      strides,
      dim()?,
      request.start,
      request.end,
      request.step.unwrap_or(1),
    )?,
    "narrow" => view_layout::narrow(
      shape,
      strides,
      dim()?,
      required(request.start, op, "start")?,
      required(request.length, op, "length")?,
    )?,
    "select" => view_layout::select(
      shape,
      strides,
      dim()?,
      required(request.start, op, "index")?,
    )?,
    "expand" => view_layout::expand(shape, strides, dims()?)?,
    _ => {
      return Err(fail(
        ErrorKind::InvalidArgument,
        format!("unknown view operation {op:?}"),
      ))
    }
  })
}

/// A zero-copy view over the same memory (any device): `request.op` with its arguments,
/// checked against the memory before it is made (see `ops::convert::view`).
#[napi(js_name = "viewHandle")]
pub fn view_handle<'env>(
  env: &'env Env,
  handle: Unknown<'env>,
  request: ViewRequest,
) -> Result<Unknown<'env>> {
  let handle = handle_of(env, &handle)?;
  let layout = &handle.layout;
  let view = view_layout_of(&layout.shape, &layout.strides, &request)?;
  crate::ops::convert::view(env, handle, &view)
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
