//! Copies of a tensor into new memory: on the host (V8 memory), on a CUDA device, and across
//! devices (`to()`).

use napi::bindgen_prelude::Unknown;
use napi::{sys, Env};
use napi_dlpack::cuda;
use napi_dlpack::ffi::DLDevice;
use napi_dlpack::{Device, DeviceType, ErrorKind};

use crate::errors::{fail, Result};
use crate::handle::{new_handle, Handle};
use crate::js_memory;
use crate::layout::TensorLayout;
use crate::ops::convert::new_dense_handle;
use crate::ops::import::js_storage_handle;
use crate::storage::{copy_row_major, copy_row_major_uninit, host_source, try_zeroed_vec, Storage};

/// A copy of a tensor in a new handle (`isCopy`): row-major in V8 memory for host tensors, a
/// device copy on the same device for CUDA tensors.
pub(crate) fn copy_handle<'env>(env: &'env Env, handle: &Handle) -> Result<Unknown<'env>> {
  let storage = handle.storage()?.clone();
  storage.check_attached(env)?;
  if handle.layout.device.device_type == DeviceType::Cuda {
    let device = crate::cuda::device_of(&handle.layout)?;
    let (storage, layout) = crate::cuda::copy_span_to_device(&storage, &handle.layout, &device)?;
    return new_handle(
      env,
      storage,
      TensorLayout {
        copied: true,
        ..layout
      },
    );
  }
  copy_to_host_handle(env, &storage, &handle.layout)
}

/// A row-major copy of a host tensor in a new handle over V8 memory (`isCopy`). The buffer is
/// not zero-filled first: the copy writes every byte.
pub(crate) fn copy_to_host_handle<'env>(
  env: &'env Env,
  storage: &Storage,
  layout: &TensorLayout,
) -> Result<Unknown<'env>> {
  // Checked before anything is allocated (as the copy itself would).
  host_source(storage, layout)?;
  new_dense_handle(env, layout.dtype, &layout.shape, true, |out| {
    copy_row_major_uninit(storage, layout, out)
  })
}

/// A copy of a tensor on another device (or the same one): host ↔ CUDA and CUDA ↔ CUDA. Always
/// a new handle over new memory; the JS layer shares instead when nothing needs to move.
pub(crate) fn to_device<'env>(
  env: &'env Env,
  handle: &Handle,
  device_type: u32,
  device_id: i32,
) -> Result<Unknown<'env>> {
  let storage = handle.storage()?.clone();
  storage.check_attached(env)?;
  let layout = handle.layout.clone();
  let target = Device::from_dl(DLDevice {
    device_type,
    device_id,
  })?;
  let source = layout.device;
  match (source.device_type, target.device_type) {
    (_, DeviceType::Cpu) if source.is_host_accessible() => {
      copy_to_host_handle(env, &storage, &layout)
    }
    (_, DeviceType::Cuda) if source.is_host_accessible() => {
      let device = cuda::device(target.id)?;
      let mut packed = try_zeroed_vec::<u8>(layout.packed_bytes())?;
      copy_row_major(&storage, &layout, &mut packed)?;
      let (storage, layout) = crate::cuda::upload(&layout, &packed, &device)?;
      new_handle(env, storage, layout)
    }
    (DeviceType::Cuda, DeviceType::Cpu) => {
      // Checked before the ArrayBuffer is made (as the copy itself would).
      crate::cuda::device_of(&layout)?;
      // SAFETY: our env.
      let (array_buffer, data) =
        unsafe { js_memory::arraybuffer_new(env.raw(), layout.span_bytes)? };
      if layout.span_bytes > 0 {
        // SAFETY: V8 just gave us `span_bytes` writable bytes, which nothing else sees yet.
        let out = unsafe { std::slice::from_raw_parts_mut(data, layout.span_bytes) };
        crate::cuda::download_span(&storage, &layout, out)?;
      }
      js_storage_handle(env, array_buffer, layout.relocated(Device::CPU))
    }
    (DeviceType::Cuda, DeviceType::Cuda) => {
      let device = cuda::device(target.id)?;
      let (storage, layout) = crate::cuda::copy_span_to_device(&storage, &layout, &device)?;
      new_handle(env, storage, layout)
    }
    _ => Err(fail(
      ErrorKind::Device,
      format!("copies from {source} to {target} are not supported"),
    )),
  }
}

/// Copies the elements of a host tensor in row-major order into `bytes`, a Uint8Array of exactly
/// `packed_bytes()` bytes that does not overlap the tensor (`toShared()`'s one copy).
pub(crate) fn copy_into(env: &Env, handle: &Handle, bytes: sys::napi_value) -> Result<()> {
  let storage = handle.storage()?;
  storage.check_attached(env)?;
  let layout = &handle.layout;
  // SAFETY: a live value of this env.
  let (base, len, _, _) = unsafe { js_memory::typedarray_bytes(env.raw(), bytes)? };
  let packed_bytes = layout.packed_bytes();
  if len != packed_bytes {
    return Err(fail(
      ErrorKind::InvalidArgument,
      format!("the target holds {len} bytes, the tensor's elements {packed_bytes}"),
    ));
  }
  if packed_bytes == 0 {
    return Ok(());
  }
  let source = storage.span_address(layout);
  let target = base as usize;
  if layout.device.is_host_accessible()
    && target < source.saturating_add(layout.span_bytes)
    && source < target.saturating_add(len)
  {
    return Err(fail(
      ErrorKind::InvalidArgument,
      "the target overlaps the tensor's own memory",
    ));
  }
  // SAFETY: `len` bytes of a live TypedArray of this env, which no JS runs against during this
  // call and which do not overlap the source (checked above).
  let out = unsafe { std::slice::from_raw_parts_mut(base, len) };
  copy_row_major(storage, layout, out)
}
