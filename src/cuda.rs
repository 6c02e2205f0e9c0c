//! CUDA in the addon: device tensors (`Tensor.empty/zeros` on a CUDA device, `to()`), the
//! stream hand-over of CUDA exports, and the driver checks of CUDA imports. The driver work
//! itself is in `napi_dlpack::cuda`; without a driver every entry point here throws
//! `ERR_CUDA_UNAVAILABLE`.
//!
//! Every CUDA tensor's data is valid on its device's legacy default stream (DLPack stream 1):
//! our copies are enqueued there, exports make the consumer's stream wait on it, and imports
//! given another stream make it wait on that stream.

use std::sync::Arc;

use napi::bindgen_prelude::{BigInt, Unknown};
use napi::Env;
use napi_derive::napi;
use napi_dlpack::cuda::{self, CudaDevice, DeviceBuffer, Stream};
use napi_dlpack::layout::{contiguous_strides, layout_of};
use napi_dlpack::{DType, Device, DeviceType, ErrorKind, ForeignTensor};

use crate::facts::CopyMode;
use crate::js_memory;
use crate::storage::{copy_bytes, Memory, Meta, Storage};
use crate::tensor::{
  check_attached, fail, handle_of, js_storage_handle, new_handle, parse_dtype, storage_of, Result,
};

/// A JS bigint as i128 (`None` when it does not fit).
fn bigint_value(value: &BigInt) -> Option<i128> {
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

/// Parses the `stream` argument of `exportCapsule`/`importCapsule` (a bigint or nothing) as a
/// CUDA stream; `None` when none was given. Bad values throw `ERR_DLPACK_STREAM`.
pub(crate) fn stream_arg(stream: Option<&BigInt>) -> Result<Option<Stream>> {
  let Some(stream) = stream else {
    return Ok(None);
  };
  let value = bigint_value(stream)
    .ok_or_else(|| fail(ErrorKind::Stream, "the stream value is out of range"))?;
  Ok(Some(Stream::from_dlpack(Some(value))?))
}

/// The device of a CUDA tensor.
pub(crate) fn device_of(meta: &Meta) -> Result<Arc<CudaDevice>> {
  Ok(cuda::device(meta.device.id)?)
}

/// Layout of a new row-major tensor.
fn contiguous_meta(dtype: DType, shape: &[i64], device: Device) -> Result<Meta> {
  let layout = layout_of(dtype, device, shape, None, 0)?;
  let strides = contiguous_strides(shape)
    .ok_or_else(|| fail(ErrorKind::Overflow, "strides overflow"))?
    .into_vec();
  Ok(Meta {
    dtype,
    shape: shape.into(),
    strides: strides.into(),
    first_byte: 0,
    min_offset: 0,
    span_bytes: layout.span_bytes(),
    numel: layout.numel(),
    contiguous: true,
    device,
    readonly: false,
    is_copy: false,
    version: None,
    flags: 0,
  })
}

/// `meta` over a fresh copy of its span (the span copied as it is, strides kept) on `device`.
fn relocated(meta: &Meta, device: Device) -> Meta {
  Meta {
    first_byte: meta.first_byte - meta.span_start(),
    device,
    readonly: false,
    is_copy: false,
    version: None,
    flags: 0,
    ..meta.clone()
  }
}

/// Copies the span of a CUDA tensor into a new buffer on `target` (stream-ordered on the same
/// device; staged through host memory across devices). Returns the buffer and the layout of the
/// tensor over it.
pub(crate) fn copy_span_to_device(
  storage: &Storage,
  meta: &Meta,
  target: &Arc<CudaDevice>,
) -> Result<(DeviceBuffer, Meta)> {
  let source = device_of(meta)?;
  let buffer = DeviceBuffer::alloc(target, meta.span_bytes, false)?;
  let from = storage.span_address(meta) as u64;
  if source.ordinal() == target.ordinal() {
    // SAFETY: the source span is device memory kept alive by `storage` (our allocation, or a
    // validated import) until the copy has run: our allocations are freed on this stream
    // after it, and a foreign producer's deleter waits for it (`note_queued_device_read`). The
    // target is the new buffer, freed on the same stream.
    unsafe { target.copy_device(buffer.device_ptr(), from, meta.span_bytes)? };
    storage.note_queued_device_read();
  } else {
    let mut staging = vec![0u8; meta.span_bytes];
    // SAFETY: as above; the copy completes before this returns.
    unsafe { source.copy_to_host(&mut staging, from)? };
    // SAFETY: the new buffer, `staging.len()` bytes.
    unsafe { target.copy_from_host(buffer.device_ptr(), &staging)? };
  }
  Ok((buffer, relocated(meta, target.dl_device())))
}

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

/// Counters of the CUDA release paths (frees and producer deleters that cannot report errors):
/// `pending` releases still waiting on the release thread, `errors` driver failures there.
#[napi(object)]
pub struct CudaReleaseStats {
  pub pending: u32,
  pub errors: u32,
}

/// What the CUDA release paths did (tests and diagnostics). Never throws.
#[napi(js_name = "cudaReleaseStats")]
pub fn cuda_release_stats() -> CudaReleaseStats {
  let stats = cuda::release_stats();
  CudaReleaseStats {
    pending: stats.pending as u32,
    errors: stats.errors as u32,
  }
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

/// A new row-major tensor in device memory (`zeroed`: memset to 0, else undefined contents).
#[napi(js_name = "cudaEmpty")]
pub fn cuda_empty<'env>(
  env: &'env Env,
  dtype: String,
  shape: Vec<i64>,
  device_id: i32,
  zeroed: bool,
) -> Result<Unknown<'env>> {
  let device = cuda::device(device_id)?;
  let meta = contiguous_meta(parse_dtype(&dtype)?, &shape, device.dl_device())?;
  let bytes = meta.numel * meta.dtype.itemsize();
  let buffer = DeviceBuffer::alloc(&device, bytes, zeroed)?;
  new_handle(env, Storage::new(Memory::Cuda(buffer)), meta)
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
  let handle = handle_of(env, &handle)?;
  let storage = storage_of(handle)?.clone();
  check_attached(env, &storage)?;
  let meta = handle.meta.clone();
  let target = Device::from_dl(napi_dlpack::ffi::DLDevice {
    device_type,
    device_id,
  })?;
  let source = meta.device;
  match (source.device_type, target.device_type) {
    (_, DeviceType::Cpu) if source.is_host_accessible() => {
      crate::tensor::copy_to_host_handle(env, &storage, &meta)
    }
    (_, DeviceType::Cuda) if source.is_host_accessible() => {
      let device = cuda::device(target.id)?;
      let nbytes = meta.numel * meta.dtype.itemsize();
      let mut staging = crate::storage::try_zeroed_vec::<u8>(nbytes)?;
      copy_bytes(&storage, &meta, &mut staging)?;
      let buffer = DeviceBuffer::from_host(&device, &staging)?;
      let meta = contiguous_meta(meta.dtype, &meta.shape, device.dl_device())?;
      new_handle(env, Storage::new(Memory::Cuda(buffer)), meta)
    }
    (DeviceType::Cuda, DeviceType::Cpu) => {
      let device = device_of(&meta)?;
      // SAFETY: our env.
      let (array_buffer, data) = unsafe { js_memory::arraybuffer_new(env.raw(), meta.span_bytes)? };
      if meta.span_bytes > 0 {
        // SAFETY: V8 just gave us `span_bytes` writable bytes, which nothing else sees yet.
        let out = unsafe { std::slice::from_raw_parts_mut(data, meta.span_bytes) };
        // SAFETY: the span is device memory kept alive by `storage`; the copy completes (and
        // has written `out`) before this returns.
        unsafe { device.copy_to_host(out, storage.span_address(&meta) as u64)? };
      }
      js_storage_handle(env, array_buffer, relocated(&meta, Device::CPU))
    }
    (DeviceType::Cuda, DeviceType::Cuda) => {
      let device = cuda::device(target.id)?;
      let (buffer, meta) = copy_span_to_device(&storage, &meta, &device)?;
      new_handle(env, Storage::new(Memory::Cuda(buffer)), meta)
    }
    _ => Err(fail(
      ErrorKind::Device,
      format!("copies from {source} to {target} are not supported"),
    )),
  }
}

/// Imports a validated `kDLCUDA` tensor: checks it against the driver's pointer attributes,
/// makes our stream wait on the consumer stream the producer synchronised to, and either keeps
/// the producer's memory (released only by its deleter) or, with `copy: true`, copies it into
/// our own allocation and releases the producer's memory right away.
pub(crate) fn import_device<'env>(
  env: &'env Env,
  tensor: ForeignTensor,
  meta: Meta,
  copy_mode: CopyMode,
  stream: Stream,
) -> Result<Unknown<'env>> {
  // On every error below `tensor` drops: the producer's deleter runs, exactly once.
  let device = cuda::validate_foreign(&tensor)?;
  device.wait_for(stream)?;
  let storage = Storage::new(Memory::Foreign(tensor));
  if copy_mode != CopyMode::Always {
    return new_handle(env, storage, meta);
  }
  let (buffer, copy_meta) = copy_span_to_device(&storage, &meta, &device)?;
  // The producer's deleter may free its memory at once: let the copy finish first.
  device.synchronize()?;
  drop(storage);
  new_handle(
    env,
    Storage::new(Memory::Cuda(buffer)),
    Meta {
      is_copy: true,
      readonly: meta.readonly,
      ..copy_meta
    },
  )
}
