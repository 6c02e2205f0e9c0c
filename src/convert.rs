//! Bindings of the core crate's `convert` module: permuted views, dense copies and dtype
//! conversion of tensor handles (`Tensor#permute`, `#transpose`, `#contiguous`, `#astype`).
//! The kernels and their exact formula live in `napi_dlpack::convert`; this file only turns
//! handles into sources and destinations.

use std::sync::Arc;

use napi::bindgen_prelude::Unknown;
use napi::Env;
use napi_derive::napi;
use napi_dlpack::convert::{self, Affine, Strided};
use napi_dlpack::validation::{contiguous_strides, layout_of};
use napi_dlpack::{DType, Device, ErrorKind};

use crate::js_memory;
use crate::storage::{Meta, Storage};
use crate::tensor::{
  check_attached, fail, handle_of, js_storage_handle, new_handle, parse_dtype, storage_of, Result,
};

/// A new handle over the same memory with dimension `i` being dimension `axes[i]` of the
/// input: only shape and strides change (any device; the data pointer is the same).
#[napi(js_name = "permuteHandle")]
pub fn permute_handle<'env>(
  env: &'env Env,
  handle: Unknown<'env>,
  axes: Vec<i64>,
) -> Result<Unknown<'env>> {
  let handle = handle_of(env, &handle)?;
  let storage = storage_of(handle)?.clone();
  let meta = handle.meta.clone();
  let (shape, strides) = convert::permute(&meta.shape, &meta.strides, &axes)?;
  // Same elements, so the same span and bounds; only contiguity can change. (The address of
  // the first element is what the input's layout was checked with: with negative strides the
  // lowest element lies below it.)
  let first_element = (storage.base() as usize).wrapping_add(meta.first_byte);
  let contiguous = layout_of(
    meta.dtype,
    meta.device,
    &shape,
    Some(&strides),
    first_element,
  )?
  .is_c_contiguous();
  let permuted = Meta {
    shape: shape.as_slice().into(),
    strides: strides.as_slice().into(),
    contiguous,
    ..(*meta).clone()
  };
  new_handle(env, storage, permuted)
}

/// The source of a conversion: the storage (kept alive by the caller) and layout of a host
/// tensor whose buffer is still attached.
fn host_source(env: &Env, handle: &Unknown<'_>) -> Result<(Arc<Storage>, Arc<Meta>)> {
  let handle = handle_of(env, handle)?;
  let storage = storage_of(handle)?.clone();
  let meta = handle.meta.clone();
  if !meta.device.is_host_accessible() {
    return Err(fail(
      ErrorKind::NotCpu,
      format!(
        "tensor memory is on {}: conversions run on the host, call .to('cpu') first",
        meta.device
      ),
    ));
  }
  check_attached(env, &storage)?;
  Ok((storage, meta))
}

/// The elements of `meta` over `storage` as a conversion source.
fn strided<'a>(storage: &'a Storage, meta: &'a Meta) -> Strided<'a> {
  // SAFETY: the layout was validated against the storage region when the handle was made
  // (and permuting keeps the same elements); the storage is host-accessible (host_source) and
  // the caller's Arc keeps it alive while the source is used. JS does not run meanwhile.
  unsafe {
    Strided::from_raw(
      storage.base().add(meta.first_byte),
      meta.dtype,
      &meta.shape,
      &meta.strides,
    )
  }
}

/// Layout of a fresh row-major CPU tensor of `dtype` with the shape of `source`.
fn dense_meta(source: &Meta, dtype: DType) -> Result<Meta> {
  let strides = contiguous_strides(&source.shape)
    .ok_or_else(|| fail(ErrorKind::Overflow, "strides overflow"))?;
  Ok(Meta {
    dtype,
    shape: source.shape.clone(),
    strides: strides.as_slice().into(),
    first_byte: 0,
    min_offset: 0,
    span_bytes: source.numel * dtype.itemsize(),
    numel: source.numel,
    contiguous: true,
    device: Device::CPU,
    readonly: false,
    is_copy: false,
    version: None,
    flags: 0,
  })
}

/// Runs `write` over a new zeroed V8 ArrayBuffer of `meta`'s size and wraps it in a handle.
fn new_dense_handle<'env>(
  env: &'env Env,
  meta: Meta,
  write: impl FnOnce(&mut [u8]) -> Result<()>,
) -> Result<Unknown<'env>> {
  // SAFETY: our env, on its thread.
  let (array_buffer, data) = unsafe { js_memory::arraybuffer_new(env.raw(), meta.span_bytes)? };
  let bytes: &mut [u8] = if meta.span_bytes == 0 {
    &mut []
  } else {
    // SAFETY: V8 gave us `span_bytes` writable bytes at `data`, referenced by nothing else yet.
    unsafe { std::slice::from_raw_parts_mut(data, meta.span_bytes) }
  };
  write(bytes)?;
  js_storage_handle(env, array_buffer, meta)
}

/// A dense row-major copy of a host tensor in V8 memory (the JS side calls this only for
/// tensors that are not contiguous already).
#[napi(js_name = "contiguousHandle")]
pub fn contiguous_handle<'env>(env: &'env Env, handle: Unknown<'env>) -> Result<Unknown<'env>> {
  let (storage, meta) = host_source(env, &handle)?;
  let dense = dense_meta(&meta, meta.dtype)?;
  new_dense_handle(env, dense, |out| {
    Ok(convert::copy_dense(&strided(&storage, &meta), out)?)
  })
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
  let (storage, meta) = host_source(env, &handle)?;
  let axis = options
    .axis
    .map(|axis| convert::normalize_axis(axis, meta.shape.len()))
    .transpose()?;
  let affine = Affine {
    scale: options.scale,
    offset: options.offset,
    mean: options.mean,
    std: options.std,
    axis,
  };
  let source = strided(&storage, &meta);
  let Some(out) = options.out else {
    let dense = dense_meta(&meta, target)?;
    return new_dense_handle(env, dense, |bytes| {
      Ok(convert::convert(&source, target, &affine, bytes)?)
    })
    .map(Some);
  };
  let (out_storage, out_meta) = host_source(env, &out)?;
  if out_meta.readonly {
    return Err(fail(ErrorKind::ReadOnly, "out is read-only"));
  }
  if out_meta.dtype != target || out_meta.shape != meta.shape {
    return Err(fail(
      ErrorKind::InvalidArgument,
      format!(
        "out must be {target} of shape {:?}, got {} of shape {:?}",
        meta.shape, out_meta.dtype, out_meta.shape
      ),
    ));
  }
  if !out_meta.contiguous {
    return Err(fail(ErrorKind::NotContiguous, "out must be contiguous"));
  }
  let len = out_meta.numel * target.itemsize();
  let bytes: &mut [u8] = if len == 0 {
    &mut []
  } else {
    // SAFETY: a contiguous, writable, host-accessible tensor: its `numel` elements start at
    // its first element, inside the storage the Arc keeps alive. No JS runs during the call,
    // and the kernel refuses a destination overlapping the source.
    unsafe { std::slice::from_raw_parts_mut(out_storage.base().add(out_meta.first_byte), len) }
  };
  convert::convert(&source, target, &affine, bytes)?;
  Ok(None)
}
