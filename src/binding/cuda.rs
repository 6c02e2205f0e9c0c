//! The CUDA functions JS calls (`lib/cuda.ts`, `Tensor.empty/zeros` on a CUDA device, `to()`).

use napi::bindgen_prelude::{BigInt, Unknown};
use napi::Env;
use napi_derive::napi;
use napi_dlpack::cuda;

use crate::binding::args::{parse_dtype, stream_arg};
use crate::errors::Result;
use crate::handle::new_handle;
use crate::own_capsule::handle_of;

/// Whether CUDA is usable (a driver with at least one device). Never throws.
#[napi(js_name = "cudaIsAvailable")]
pub fn cuda_is_available() -> bool {
  cuda::is_available()
}

/// Number of CUDA devices; 0 without a usable driver. Never throws.
#[napi(js_name = "cudaDeviceCount")]
pub fn cuda_device_count() -> u32 {
  cuda::device_count() as u32
}

/// Why CUDA is unavailable (`undefined` when it is available).
#[napi(js_name = "cudaUnavailableReason")]
pub fn cuda_unavailable_reason() -> Option<String> {
  cuda::check_available()
    .err()
    .map(|error| error.message().to_string())
}

/// Blocks until the work enqueued on `cuda:<deviceId>`'s stream has run.
#[napi(js_name = "cudaSynchronize")]
pub fn cuda_synchronize(device_id: i32) -> Result<()> {
  Ok(cuda::device(device_id)?.synchronize()?)
}

/// Frees the pinned staging chunks of every device (those not in use by a copy right now);
/// after a failed pinned allocation, the next large copy tries again. Never throws.
#[napi(js_name = "cudaReleaseStaging")]
pub fn cuda_release_staging() {
  cuda::release_staging()
}

/// A new row-major tensor in device memory (`zeroed`: memset to 0, else undefined contents).
#[napi(js_name = "cudaEmpty")]
pub fn cuda_empty<'env>(
  env: &'env Env,
  dtype: String,
  shape: Vec<i64>,
  device_id: i32,
  zeroed: bool,
) -> Result<Unknown<'env>> {
  // The device first: without CUDA, ERR_CUDA_UNAVAILABLE whatever the other arguments.
  cuda::device(device_id)?;
  let (storage, layout) = crate::cuda::alloc(parse_dtype(&dtype)?, &shape, device_id, zeroed)?;
  new_handle(env, storage, layout)
}

/// A new row-major tensor in pinned host memory on `cuda_host:<deviceId>` (only 0 exists:
/// see `crate::cuda::CUDA_HOST`); `zeroed`: every byte 0, else undefined contents.
#[napi(js_name = "pinnedEmpty")]
pub fn pinned_empty<'env>(
  env: &'env Env,
  dtype: String,
  shape: Vec<i64>,
  device_id: i32,
  zeroed: bool,
) -> Result<Unknown<'env>> {
  let target = napi_dlpack::Device {
    device_type: napi_dlpack::DeviceType::CudaHost,
    id: device_id,
  };
  // The device first: a bad ordinal or no CUDA is reported whatever the other arguments.
  crate::cuda::pinned_device(target)?;
  let (storage, layout) = crate::cuda::alloc_pinned(parse_dtype(&dtype)?, &shape, target, zeroed)?;
  new_handle(env, storage, layout)
}

/// A copy of a tensor on another device (or the same one): host ↔ CUDA and CUDA ↔ CUDA. Always
/// a new handle over new memory; the JS layer shares instead when nothing needs to move.
#[napi(js_name = "toDevice")]
pub fn to_device<'env>(
  env: &'env Env,
  handle: Unknown<'env>,
  device_type: u32,
  device_id: i32,
) -> Result<Unknown<'env>> {
  crate::ops::copy::to_device(env, handle_of(env, &handle)?, device_type, device_id)
}

/// Copies the elements of `src` into `dst` (`Tensor#copy_`, `to(device, { out })`): same shape
/// and dtype, `dst` contiguous and writable; host ↔ CUDA, CUDA ↔ CUDA and host ↔ host. `stream`
/// (a DLPack stream value) orders the copy after that stream's work, and its later work after
/// the copy.
#[napi(js_name = "copyBetween")]
pub fn copy_between(
  env: &Env,
  dst: Unknown<'_>,
  src: Unknown<'_>,
  stream: Option<BigInt>,
) -> Result<()> {
  let stream = stream_arg(stream.as_ref())?;
  crate::ops::copy::copy_between(env, handle_of(env, &dst)?, handle_of(env, &src)?, stream)
}
