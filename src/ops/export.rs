//! Where a tensor leaves: an owning DLPack export of a handle in a new capsule of ours.

use std::sync::Arc;

use napi::bindgen_prelude::Unknown;
use napi::Env;
use napi_dlpack::cuda::Stream;
use napi_dlpack::layout::contiguous_strides;
use napi_dlpack::{Device, DeviceType, ErrorKind};

use crate::errors::{fail, Result};
use crate::handle::Handle;
use crate::layout::TensorLayout;
use crate::ops::negotiation::{plan_export, ExportPlan, ExportRequest};
use crate::own_capsule::{self, ExportOwner};
use crate::storage::{dense_copy_vec, Memory, Storage};

/// Exports a handle as a new capsule, as `request` asks (see `ops::negotiation::plan_export`):
/// the legacy pre-1.0 struct for a `maxVersion` below 1; with `copy: true` a private copy
/// flagged `IS_COPIED` (row-major on the host; on a CUDA device, a copy of the span). For CUDA
/// tensors the consumer's stream (unset: legacy default) is made to wait for our stream before
/// the capsule is returned.
pub(crate) fn handle_to_capsule<'env>(
  env: &'env Env,
  handle: &Handle,
  request: &ExportRequest,
) -> Result<Unknown<'env>> {
  let ExportPlan {
    format,
    copy,
    stream,
    device,
  } = plan_export(request, handle.layout.device)?;
  let storage = handle.storage()?.clone();
  if copy {
    storage.check_attached(env)?;
  } else {
    storage.pin_for_export(env)?;
  }
  let layout = &handle.layout;
  let cuda_device = if layout.device.device_type == DeviceType::Cuda {
    Some(crate::cuda::device_of(layout)?)
  } else {
    None
  };
  let owner = if let (Some(device), true) = (&cuda_device, copy) {
    let (storage, copy_layout) = crate::cuda::copy_span_to_device(&storage, layout, device)?;
    let copy_layout = TensorLayout {
      copied: true,
      ..copy_layout
    };
    let mut owner = ExportOwner::new(storage, Arc::new(copy_layout));
    owner.info = owner.info.copied(true);
    owner
  } else if copy {
    let packed_bytes = layout.packed_bytes();
    let owned = dense_copy_vec::<u64>(&storage, layout)?;
    let copy_layout = TensorLayout {
      strides: contiguous_strides(&layout.shape)
        .ok_or_else(|| fail(ErrorKind::Overflow, "strides overflow"))?
        .as_slice()
        .into(),
      first_byte: 0,
      min_offset: 0,
      span_bytes: packed_bytes,
      contiguous: true,
      read_only: false,
      copied: true,
      // The copy is ordinary host memory, whatever host-accessible kind the source was.
      device: Device::CPU,
      ..(**layout).clone()
    };
    let storage = Storage::new(Memory::Owned(owned));
    ExportOwner::new(storage, Arc::new(copy_layout))
  } else if device != layout.device {
    // Pinned host memory exported under the name kDLCPU (`dlDevice: [1, 0]`): the same bytes.
    ExportOwner::new(
      storage,
      Arc::new(TensorLayout {
        device,
        ..(**layout).clone()
      }),
    )
  } else {
    ExportOwner::new(storage, layout.clone())
  };
  // SAFETY: our env, on its thread.
  let capsule = unsafe {
    own_capsule::wrap_in_own_capsule(env.raw(), owner, format, || match &cuda_device {
      // The consumer's stream waits for our writes (and any copy just enqueued).
      Some(device) => Ok(device.sync_to(stream.unwrap_or(Stream::Legacy))?),
      None => Ok(()),
    })?
  };
  // SAFETY: live value of this env.
  Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), capsule) })
}
