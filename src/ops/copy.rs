//! Copies of a tensor into new memory: on the host (V8 memory), on a CUDA device, and across
//! devices (`to()`).

use napi::bindgen_prelude::Unknown;
use std::sync::Arc;

use napi::{sys, Env};
use napi_dlpack::convert::{self, Strided};
use napi_dlpack::cuda::{self, CudaDevice, DeviceBuffer, PinnedBuffer, Stream};
use napi_dlpack::ffi::DLDevice;
use napi_dlpack::{Device, DeviceType, ErrorKind};

use crate::errors::{fail, Result};
use crate::handle::{new_handle, Handle};
use crate::js_memory;
use crate::layout::TensorLayout;
use crate::ops::convert::new_dense_handle;
use crate::ops::import::js_storage_handle;
use crate::storage::{
  copy_row_major, copy_row_major_uninit, dense_copy_vec, host_source, try_zeroed_vec, Memory,
  RowRuns, Storage,
};

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
  if layout.span_bytes >= cuda::STAGING_MIN_BYTES {
    // The environment's teardown hook releases the staging pool a large copy may allocate.
    // SAFETY: our env, on its thread.
    unsafe { js_memory::env_shared(env.raw())? };
  }
  let target = Device::from_dl(DLDevice {
    device_type,
    device_id,
  })?;
  let source = layout.device;
  match (source.device_type, target.device_type) {
    (_, DeviceType::Cpu) if source.is_host_accessible() => {
      copy_to_host_handle(env, &storage, &layout)
    }
    (_, DeviceType::CudaHost) if source.is_host_accessible() => {
      // Host -> pinned: the dense-copy engine writes straight into the new pinned buffer.
      let device = crate::cuda::pinned_device(target)?;
      let row_major = TensorLayout::row_major(layout.dtype, &layout.shape, target)?;
      let mut buffer = PinnedBuffer::alloc(&device, row_major.packed_bytes())?;
      copy_row_major(&storage, &layout, buffer.as_mut_slice())?;
      new_handle(env, Storage::new(Memory::Pinned(buffer)), row_major)
    }
    (DeviceType::Cuda, DeviceType::CudaHost) => {
      // Device -> pinned: one DMA into the new buffer (the span as is, strides kept, as for
      // `to('cpu')`), completed before this returns.
      let device = crate::cuda::pinned_device(target)?;
      crate::cuda::device_of(&layout)?;
      let mut buffer = PinnedBuffer::alloc(&device, layout.span_bytes)?;
      crate::cuda::download_span(&storage, &layout, buffer.as_mut_slice(), true)?;
      new_handle(
        env,
        Storage::new(Memory::Pinned(buffer)),
        layout.relocated(target),
      )
    }
    (_, DeviceType::Cuda) if source.is_host_accessible() => {
      let device = cuda::device(target.id)?;
      let row_major = TensorLayout::row_major(layout.dtype, &layout.shape, device.dl_device())?;
      let buffer = DeviceBuffer::alloc(&device, row_major.packed_bytes(), false)?;
      upload_into(&storage, &layout, &device, buffer.device_ptr())?;
      new_handle(env, Storage::new(Memory::Cuda(buffer)), row_major)
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
        crate::cuda::download_span(&storage, &layout, out, false)?;
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

/// The elements of a host tensor, row-major, uploaded to `dst` (device memory of `device`,
/// `packed_bytes()` long, alive until the copy has run: stream order). Enqueued on the device's
/// stream; when this returns the source may change or go.
///
/// - Pageable sources of at least `cuda::STAGING_MIN_BYTES` go through the pinned staging
///   pipeline: a contiguous one is copied into the chunks, a strided one gathered straight into
///   them by the dense-copy engine (`RowRuns`).
/// - Smaller ones (or where no pinned memory is to be had) are uploaded by the driver directly:
///   a contiguous source straight from its own memory, a strided one gathered first.
/// - Contiguous page-locked sources (`cuda_host` tensors, a producer's pinned memory) are read
///   by the DMA directly; strided ones are gathered into the chunks like pageable ones.
fn upload_into(
  storage: &Storage,
  layout: &TensorLayout,
  device: &Arc<CudaDevice>,
  dst: u64,
) -> Result<()> {
  let source = host_source(storage, layout)?;
  if layout.numel == 0 {
    return Ok(());
  }
  let bytes = layout.packed_bytes();
  // Our own pinned memory also when exported as kDLCPU and imported back (a cpu tensor then).
  let page_locked = layout.device.device_type == DeviceType::CudaHost
    || matches!(storage.memory(), Memory::Pinned(_));
  // A contiguous page-locked source is one DMA from its own memory; a strided one is gathered
  // into the staging chunks like pageable memory (instead of into a pageable copy).
  if !(page_locked && layout.contiguous) && bytes >= cuda::STAGING_MIN_BYTES {
    let staged = if layout.contiguous {
      let (start, _) = source.address_range();
      // SAFETY: a contiguous layout's packed bytes start at its lowest (first) element, inside
      // the storage that `storage` keeps alive during the call.
      let packed = unsafe { std::slice::from_raw_parts(start as *const u8, bytes) };
      let mut fill = |offset: usize, piece: &mut [u8]| {
        piece.copy_from_slice(&packed[offset..offset + piece.len()]);
        Ok(())
      };
      // SAFETY: `dst` holds `bytes` bytes of device memory that outlives the copy (the
      // caller's contract).
      unsafe { device.upload_staged(dst, bytes, 1, &mut fill)? }
    } else if let Some(runs) = RowRuns::new(storage, layout, cuda::MIN_PIECE_BYTES)? {
      let mut fill = |offset: usize, piece: &mut [u8]| runs.copy(offset, piece);
      // SAFETY: as above.
      unsafe { device.upload_staged(dst, bytes, runs.unit(), &mut fill)? }
    } else {
      cuda::Staged::Direct
    };
    if staged == cuda::Staged::Done {
      // The source was copied into the chunks: nothing to wait for.
      return Ok(());
    }
  }
  if !layout.contiguous {
    let packed = dense_copy_vec::<u8>(storage, layout)?;
    // SAFETY: `dst` holds `packed.len()` bytes of device memory that outlives the copy (the
    // caller's contract); `packed` is pageable memory of ours, which the driver stages before
    // the call returns.
    unsafe { device.copy_from_host(dst, &packed)? };
    return Ok(());
  }
  let (start, _) = source.address_range();
  // SAFETY: a contiguous layout's packed bytes start at its lowest (first) element, inside the
  // storage that `storage` keeps alive during the call.
  let packed = unsafe { std::slice::from_raw_parts(start as *const u8, bytes) };
  // SAFETY: as above for `dst`; `packed` is readable host memory for the call.
  unsafe { device.copy_from_host(dst, packed)? };
  if !matches!(storage.memory(), Memory::Js { .. }) {
    // The driver stages pageable memory before returning, but reads page-locked memory (our
    // cuda_host tensors, a producer's pinned buffer, memory registered with
    // cuMemHostRegister) later, in stream order: wait, so the source may change or be
    // released once this returns. V8's memory is ours and never page-locked.
    device.synchronize()?;
  }
  Ok(())
}

/// Copies the elements of `src` into `dst` (`Tensor#copy_`): same shape and dtype, `dst`
/// writable and contiguous, any pair of host-accessible and CUDA devices. With `stream`, the
/// copy is ordered after the work already on that stream, and that stream's later work after
/// the copy; otherwise on the devices' legacy default streams. A copy into host memory has
/// completed when this returns; a copy into device memory is enqueued (stream order).
pub(crate) fn copy_between(
  env: &Env,
  dst: &Handle,
  src: &Handle,
  stream: Option<Stream>,
) -> Result<()> {
  let (dst_storage, dst_layout) = (dst.storage()?, &dst.layout);
  let (src_storage, src_layout) = (src.storage()?, &src.layout);
  dst_storage.check_attached(env)?;
  src_storage.check_attached(env)?;
  if dst_layout.packed_bytes() >= cuda::STAGING_MIN_BYTES {
    // As in `to_device`.
    // SAFETY: our env, on its thread.
    unsafe { js_memory::env_shared(env.raw())? };
  }
  if dst_layout.read_only {
    return Err(fail(ErrorKind::ReadOnly, "the destination is read-only"));
  }
  if dst_layout.dtype != src_layout.dtype {
    return Err(fail(
      ErrorKind::DtypeMismatch,
      format!(
        "cannot copy {} into {} (copy_ keeps the dtype: astype converts)",
        src_layout.dtype, dst_layout.dtype
      ),
    ));
  }
  if dst_layout.shape != src_layout.shape {
    return Err(fail(
      ErrorKind::Shape,
      format!(
        "cannot copy shape {:?} into shape {:?}",
        src_layout.shape, dst_layout.shape
      ),
    ));
  }
  if !dst_layout.contiguous {
    return Err(fail(
      ErrorKind::NotContiguous,
      "the destination must be contiguous (row-major)",
    ));
  }
  let (to, from) = (dst_layout.device, src_layout.device);
  let device_kind = |device: napi_dlpack::Device| {
    if device.is_host_accessible() {
      Some(false)
    } else if device.device_type == DeviceType::Cuda {
      Some(true)
    } else {
      None
    }
  };
  let (Some(to_cuda), Some(from_cuda)) = (device_kind(to), device_kind(from)) else {
    return Err(fail(
      ErrorKind::Device,
      format!("copies from {from} to {to} are not supported"),
    ));
  };
  let bytes = dst_layout.packed_bytes();
  let dst_address = dst_storage.span_address(dst_layout);
  let src_address = src_storage.span_address(src_layout);
  let same_space = to_cuda == from_cuda && (!to_cuda || to.id == from.id);
  if same_space
    && bytes > 0
    && dst_address < src_address.saturating_add(src_layout.span_bytes)
    && src_address < dst_address.saturating_add(bytes)
  {
    return Err(fail(
      ErrorKind::InvalidArgument,
      "the destination overlaps the source",
    ));
  }
  match (from_cuda, to_cuda) {
    (false, false) => {
      let out: &mut [u8] = if bytes == 0 {
        &mut []
      } else {
        // SAFETY: a contiguous, writable host tensor: its packed bytes start at its first
        // element inside the storage kept alive by the handle; no JS runs during the call, and
        // the source does not overlap them (checked above).
        unsafe { std::slice::from_raw_parts_mut(dst_address as *mut u8, bytes) }
      };
      copy_row_major(src_storage, src_layout, out)
    }
    (false, true) => {
      let device = crate::cuda::device_of(dst_layout)?;
      if let Some(stream) = stream {
        device.wait_for(stream)?;
      }
      upload_into(src_storage, src_layout, &device, dst_address as u64)?;
      // The destination may be a producer's memory: its deleter must wait for this write.
      dst_storage.note_queued_device_read();
      if let Some(stream) = stream {
        device.sync_to(stream)?;
      }
      Ok(())
    }
    (true, false) => {
      let device = crate::cuda::device_of(src_layout)?;
      if let Some(stream) = stream {
        device.wait_for(stream)?;
      }
      let out: &mut [u8] = if bytes == 0 {
        &mut []
      } else {
        // SAFETY: as in the host-host case.
        unsafe { std::slice::from_raw_parts_mut(dst_address as *mut u8, bytes) }
      };
      download_row_major(
        src_storage,
        src_layout,
        out,
        to.device_type == DeviceType::CudaHost,
      )
    }
    (true, true) => {
      let source = crate::cuda::device_of(src_layout)?;
      let target = crate::cuda::device_of(dst_layout)?;
      if let Some(stream) = stream {
        source.wait_for(stream)?;
        if target.ordinal() != source.ordinal() {
          target.wait_for(stream)?;
        }
      }
      if src_layout.contiguous && source.ordinal() == target.ordinal() {
        // SAFETY: both ranges are device memory of this device kept alive by their storages
        // until the copy has run (our frees are stream-ordered after it; producers' deleters
        // wait for our queued work, noted below); they do not overlap (checked above).
        unsafe { target.copy_device(dst_address as u64, src_address as u64, bytes)? };
        src_storage.note_queued_device_read();
        dst_storage.note_queued_device_read();
      } else {
        // Across devices, or a strided source (no device gather kernel): through the host.
        let mut packed = try_zeroed_vec::<u8>(bytes)?;
        download_row_major(src_storage, src_layout, &mut packed, false)?;
        // SAFETY: `bytes` bytes of device memory of `target` at `dst_address`, alive until the
        // copy has run; the Vec is pageable (copied out before the call returns).
        unsafe { target.upload(dst_address as u64, &packed)? };
        dst_storage.note_queued_device_read();
      }
      if let Some(stream) = stream {
        target.sync_to(stream)?;
      }
      Ok(())
    }
  }
}

/// The elements of a CUDA tensor, row-major, into `out` (`packed_bytes()` long; `page_locked`
/// says whether it is); completed when this returns. A contiguous source lands straight in
/// `out` (through the staging pipeline when pageable and large); a strided one is downloaded as
/// its span and gathered on the host by the dense-copy engine.
fn download_row_major(
  storage: &Storage,
  layout: &TensorLayout,
  out: &mut [u8],
  page_locked: bool,
) -> Result<()> {
  if layout.contiguous {
    return crate::cuda::download_span(storage, layout, out, page_locked);
  }
  let mut span = try_zeroed_vec::<u8>(layout.span_bytes)?;
  crate::cuda::download_span(storage, layout, &mut span, false)?;
  let host = layout.relocated(napi_dlpack::Device::CPU);
  // SAFETY: `host` is the source's layout over its downloaded span (same shape and strides,
  // offsets from the span's start), validated when the source was made; `span` is alive and
  // unchanged while the engine reads it.
  let source = unsafe {
    Strided::from_raw(
      span.as_ptr().add(host.first_byte),
      host.dtype,
      &host.shape,
      &host.strides,
    )
  };
  Ok(convert::copy_dense(&source, out)?)
}
