//! CUDA in the addon: device allocations, copies of CUDA tensors, and the driver checks of CUDA
//! imports. The driver work itself is in `napi_dlpack::cuda`; without a driver every entry point
//! here fails with `ERR_CUDA_UNAVAILABLE`. The `#[napi]` functions over it are in
//! `binding::cuda`; the `stream` arguments (JS bigints) are parsed in `binding::args`.
//!
//! Every CUDA tensor's data is valid on its device's legacy default stream (DLPack stream 1):
//! our copies are enqueued there, exports make the consumer's stream wait on it, and imports
//! given another stream make it wait on that stream.

use std::sync::Arc;

use napi_dlpack::cuda::{self, CudaDevice, DeviceBuffer, PinnedBuffer, Stream};
use napi_dlpack::{DType, Device, DeviceType, ErrorKind, ForeignTensor};

use crate::errors::{fail, Result};
use crate::layout::TensorLayout;
use crate::storage::{Memory, Storage};

/// The device of a CUDA tensor.
pub(crate) fn device_of(layout: &TensorLayout) -> Result<Arc<CudaDevice>> {
  Ok(cuda::device(layout.device.id)?)
}

/// A new row-major tensor in device memory on `cuda:<device_id>` (`zeroed`: memset to 0, else
/// undefined contents).
pub(crate) fn alloc(
  dtype: DType,
  shape: &[i64],
  device_id: i32,
  zeroed: bool,
) -> Result<(Arc<Storage>, TensorLayout)> {
  let device = cuda::device(device_id)?;
  let layout = TensorLayout::row_major(dtype, shape, device.dl_device())?;
  let buffer = DeviceBuffer::alloc(&device, layout.packed_bytes(), zeroed)?;
  Ok((Storage::new(Memory::Cuda(buffer)), layout))
}

/// The device of every pinned tensor we allocate: `cuda_host:0`. Pinned memory is allocated
/// portable (usable by every context) and mapped at the same address on every device, so it
/// belongs to no device: the DLPack device id of `kDLCUDAHost` carries no meaning here, and is
/// 0, as PyTorch reports for `pin_memory()` tensors.
pub(crate) const CUDA_HOST: Device = Device {
  device_type: DeviceType::CudaHost,
  id: 0,
};

/// The context pinned memory is allocated in (and freed in): device 0's primary context. Fails
/// with `ERR_DLPACK_DEVICE` for a `cuda_host:N` other than 0 (checked before the driver, so the
/// code does not depend on the machine), then `ERR_CUDA_UNAVAILABLE` without a driver.
pub(crate) fn pinned_device(target: Device) -> Result<Arc<CudaDevice>> {
  if target != CUDA_HOST {
    return Err(fail(
      ErrorKind::Device,
      format!(
        "cannot allocate pinned memory on {target}: pinned host memory belongs to no device \
         (it is usable by every one), so its device is cuda_host (cuda_host:0)"
      ),
    ));
  }
  Ok(cuda::device(0)?)
}

/// A new row-major tensor in pinned host memory (`cuda_host:0`); `zeroed`: every byte 0, else
/// undefined contents.
pub(crate) fn alloc_pinned(
  dtype: DType,
  shape: &[i64],
  target: Device,
  zeroed: bool,
) -> Result<(Arc<Storage>, TensorLayout)> {
  let device = pinned_device(target)?;
  let layout = TensorLayout::row_major(dtype, shape, CUDA_HOST)?;
  let buffer = if zeroed {
    PinnedBuffer::alloc_zeroed(&device, layout.packed_bytes())?
  } else {
    PinnedBuffer::alloc(&device, layout.packed_bytes())?
  };
  Ok((Storage::new(Memory::Pinned(buffer)), layout))
}

/// Copies the span of a CUDA tensor into `out` (`layout.span_bytes` long); the copy has
/// completed when this returns. `out` in pageable memory (`page_locked` false) goes through the
/// staging pipeline when it is large; page-locked memory is written by the DMA directly.
pub(crate) fn download_span(
  storage: &Storage,
  layout: &TensorLayout,
  out: &mut [u8],
  page_locked: bool,
) -> Result<()> {
  let device = device_of(layout)?;
  if !out.is_empty() {
    let from = storage.span_address(layout) as u64;
    // SAFETY: the span is device memory kept alive by `storage`; the copy completes (and has
    // written `out`) before this returns.
    unsafe {
      if page_locked {
        device.copy_to_host(out, from)?
      } else {
        device.download(out, from)?
      }
    };
  }
  Ok(())
}

/// Copies the span of a CUDA tensor into a new buffer on `target` (stream-ordered on the same
/// device; staged through host memory across devices). Returns the buffer's storage and the
/// layout of the tensor over it.
pub(crate) fn copy_span_to_device(
  storage: &Storage,
  layout: &TensorLayout,
  target: &Arc<CudaDevice>,
) -> Result<(Arc<Storage>, TensorLayout)> {
  let source = device_of(layout)?;
  let buffer = DeviceBuffer::alloc(target, layout.span_bytes, false)?;
  let from = storage.span_address(layout) as u64;
  if source.ordinal() == target.ordinal() {
    // SAFETY: the source span is device memory kept alive by `storage` (our allocation, or a
    // validated import) until the copy has run: our allocations are freed on this stream
    // after it, and a foreign producer's deleter waits for it (`note_queued_device_read`). The
    // target is the new buffer, freed on the same stream.
    unsafe { target.copy_device(buffer.device_ptr(), from, layout.span_bytes)? };
    storage.note_queued_device_read();
  } else {
    let mut staging = crate::storage::try_zeroed_vec::<u8>(layout.span_bytes)?;
    // SAFETY: as above; the copy completes before this returns.
    unsafe { source.download(&mut staging, from)? };
    // SAFETY: the new buffer, `staging.len()` bytes.
    unsafe { target.upload(buffer.device_ptr(), &staging)? };
  }
  Ok((
    Storage::new(Memory::Cuda(buffer)),
    layout.relocated(target.dl_device()),
  ))
}

/// Imports a validated `kDLCUDA` tensor: checks it against the driver's pointer attributes,
/// makes our stream wait on the consumer stream the producer synchronised to, and either keeps
/// the producer's memory (released only by its deleter) or, with `copy`, copies it into our
/// own allocation and releases the producer's memory right away.
pub(crate) fn import_device(
  tensor: ForeignTensor,
  layout: TensorLayout,
  copy: bool,
  stream: Stream,
) -> Result<(Arc<Storage>, TensorLayout)> {
  // On every error below `tensor` drops: the producer's deleter runs, exactly once.
  let device = cuda::validate_foreign(&tensor)?;
  device.wait_for(stream)?;
  let storage = Storage::new(Memory::Foreign(tensor));
  if !copy {
    return Ok((storage, layout));
  }
  let (copy_storage, copy_layout) = copy_span_to_device(&storage, &layout, &device)?;
  // The producer's deleter may free its memory at once: let the copy finish first.
  device.synchronize()?;
  drop(storage);
  Ok((
    copy_storage,
    TensorLayout {
      copied: true,
      read_only: layout.read_only,
      ..copy_layout
    },
  ))
}
