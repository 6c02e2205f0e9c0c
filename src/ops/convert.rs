//! Layout and dtype conversions of tensors (`Tensor#permute`, `#transpose`, `#contiguous`,
//! `#astype`). The kernels and their exact formula live in `napi_dlpack::convert`; this module
//! turns handles into their sources and destinations.

use std::mem::MaybeUninit;
use std::sync::Arc;

use napi::bindgen_prelude::Unknown;
use napi::Env;
use napi_dlpack::convert::{self, Affine, Strided};
use napi_dlpack::view_layout::ViewLayout;
use napi_dlpack::{DType, Device, ErrorKind};

use crate::errors::{fail, Result};
use crate::handle::{new_handle, Handle};
use crate::js_memory::{self, BufferRef};
use crate::layout::TensorLayout;
use crate::ops::import::js_storage_handle;
use crate::storage::{Memory, Storage};

/// A new handle over the same memory with dimension `i` being dimension `axes[i]` of the
/// input: only shape and strides change (any device; the data pointer is the same).
pub(crate) fn permute<'env>(
  env: &'env Env,
  handle: &Handle,
  axes: &[i64],
) -> Result<Unknown<'env>> {
  let layout = &handle.layout;
  let (shape, strides) = convert::permute(&layout.shape, &layout.strides, axes)?;
  view(
    env,
    handle,
    &ViewLayout {
      shape,
      strides,
      offset: 0,
      broadcasts: false,
    },
  )
}

/// A new handle over the same storage with the layout `view` describes relative to this
/// handle's (the arithmetic of `napi_dlpack::view_layout`), checked against the storage's
/// region before anything can read through it (`TensorLayout::view`). Any device. A view that
/// repeats elements (`expand`) is read-only: a writer through it (a kernel given it as its
/// output, a consumer of its export) would write one element from several indices.
pub(crate) fn view<'env>(
  env: &'env Env,
  handle: &Handle,
  view: &ViewLayout,
) -> Result<Unknown<'env>> {
  let storage = handle.storage()?.clone();
  let layout = handle.layout.view(
    &view.shape,
    &view.strides,
    view.offset,
    storage.base() as usize,
    storage.region_len(),
    view.broadcasts,
  )?;
  if storage.byte_offset_of(&layout).is_none() {
    return Err(fail(
      ErrorKind::ByteOffset,
      "this view would start below the producer's data handle, which a DLPack byte_offset \
       cannot describe",
    ));
  }
  new_handle(env, storage, layout)
}

/// The storage and layout of a host tensor whose buffer is still attached: the source (or the
/// destination) of a conversion. The Arc keeps the memory alive while it is used.
pub(crate) type HostTensor = (Arc<Storage>, Arc<TensorLayout>);

pub(crate) fn host_tensor(env: &Env, handle: &Handle) -> Result<HostTensor> {
  let storage = handle.storage()?.clone();
  let layout = handle.layout.clone();
  if !layout.device.is_host_accessible() {
    return Err(fail(
      ErrorKind::NotCpu,
      format!(
        "tensor memory is on {}: conversions run on the host, call .to('cpu') first",
        layout.device
      ),
    ));
  }
  storage.check_attached(env)?;
  Ok((storage, layout))
}

/// The elements of a host tensor as a conversion source.
fn strided((storage, layout): &HostTensor) -> Strided<'_> {
  // SAFETY: the layout was validated against the storage region when the handle was made
  // (permuting keeps the same elements); the storage is host-accessible (host_tensor) and the
  // Arc keeps it alive while the source is used. JS does not run meanwhile.
  unsafe {
    Strided::from_raw(
      storage.base().add(layout.first_byte),
      layout.dtype,
      &layout.shape,
      &layout.strides,
    )
  }
}

/// Below this size, dense results go to a zeroed ArrayBuffer (see [`new_dense_handle`]).
const UNINIT_MIN_BYTES: usize = 64 << 10;

/// Runs `write` over a new V8 ArrayBuffer for a row-major CPU tensor of `dtype` with `shape`,
/// and wraps it in a handle. The buffer is not zero-filled first: `write` (a conversion
/// kernel) stores every byte, and on error the buffer is dropped unseen. Zero-filling 25 MB
/// and faulting in its pages cost more than the conversion itself.
///
/// `copied` marks the tensor as a copy of another (`isCopy`).
pub(crate) fn new_dense_handle<'env>(
  env: &'env Env,
  dtype: DType,
  shape: &[i64],
  copied: bool,
  write: impl FnOnce(&mut [MaybeUninit<u8>]) -> Result<()>,
) -> Result<Unknown<'env>> {
  let layout = TensorLayout {
    copied,
    ..TensorLayout::row_major(dtype, shape, Device::CPU)?
  };
  let len = layout.span_bytes;
  if len == 0 {
    // SAFETY: our env, on its thread.
    let (array_buffer, _data) = unsafe { js_memory::arraybuffer_new(env.raw(), 0)? };
    write(&mut [])?;
    return js_storage_handle(env, array_buffer, layout);
  }
  if len < UNINIT_MIN_BYTES {
    // Small: a zeroed ArrayBuffer costs fewer instructions than an uninitialised Buffer (fewer
    // Node-API calls; zeroing a few KiB is nothing). Measured with benches/callgrind/copies.mjs.
    // SAFETY: our env, on its thread.
    let (array_buffer, data) = unsafe { js_memory::arraybuffer_new(env.raw(), len)? };
    // SAFETY: V8 gave us `len` writable bytes at `data`, referenced by nothing else yet.
    write(unsafe { std::slice::from_raw_parts_mut(data.cast(), len) })?;
    return js_storage_handle(env, array_buffer, layout);
  }
  // SAFETY: our env, on its thread; every byte is written (below) before JS sees the buffer.
  let (array_buffer, data, base_offset) =
    unsafe { js_memory::arraybuffer_new_uninit(env.raw(), len)? };
  if !(data as usize).is_multiple_of(dtype.itemsize()) {
    // Runtimes' allocators align far more than an element; should one not, the zeroed
    // ArrayBuffer path (aligned by V8) takes it.
    // SAFETY: our env, on its thread.
    let (array_buffer, data) = unsafe { js_memory::arraybuffer_new(env.raw(), len)? };
    // SAFETY: V8 gave us `len` writable bytes at `data`, referenced by nothing else yet.
    write(unsafe { std::slice::from_raw_parts_mut(data.cast(), len) })?;
    return js_storage_handle(env, array_buffer, layout);
  }
  js_memory::advise_huge_pages(data, len);
  // SAFETY: the runtime gave us `len` writable (uninitialised) bytes at `data`, referenced by
  // nothing else yet; MaybeUninit makes no claim about their contents.
  write(unsafe { std::slice::from_raw_parts_mut(data.cast(), len) })?;
  // SAFETY: a live ArrayBuffer of this env; the reference keeps it (and `data`) alive.
  let buffer = unsafe { BufferRef::new(env.raw(), array_buffer)? };
  let storage = Storage::new(Memory::Js {
    base: data,
    base_offset,
    len,
    buffer,
  });
  new_handle(env, storage, layout)
}

/// A dense row-major copy of a host tensor in V8 memory (the JS side calls this only for
/// tensors that are not contiguous already).
pub(crate) fn contiguous<'env>(env: &'env Env, handle: &Handle) -> Result<Unknown<'env>> {
  let source = host_tensor(env, handle)?;
  let layout = &source.1;
  new_dense_handle(env, layout.dtype, &layout.shape, false, |out| {
    Ok(convert::copy_dense_uninit(&strided(&source), out)?)
  })
}

/// The elements of `source` converted to `target` (the formula of `napi_dlpack::convert`), in
/// a new dense CPU tensor (returned), or written into `out` (then `None`): a contiguous,
/// writable host tensor of the target dtype and the source's shape.
pub(crate) fn astype<'env>(
  env: &'env Env,
  source: &HostTensor,
  target: DType,
  affine: &Affine,
  out: Option<&HostTensor>,
) -> Result<Option<Unknown<'env>>> {
  let shape = &source.1.shape;
  let Some((out_storage, out_layout)) = out else {
    return new_dense_handle(env, target, shape, false, |bytes| {
      Ok(convert::convert_uninit(
        &strided(source),
        target,
        affine,
        bytes,
      )?)
    })
    .map(Some);
  };
  if out_layout.read_only {
    return Err(fail(ErrorKind::ReadOnly, "out is read-only"));
  }
  if out_layout.dtype != target || out_layout.shape != *shape {
    return Err(fail(
      ErrorKind::InvalidArgument,
      format!(
        "out must be {target} of shape {shape:?}, got {} of shape {:?}",
        out_layout.dtype, out_layout.shape
      ),
    ));
  }
  if !out_layout.contiguous {
    return Err(fail(ErrorKind::NotContiguous, "out must be contiguous"));
  }
  let len = out_layout.packed_bytes();
  let bytes: &mut [u8] = if len == 0 {
    &mut []
  } else {
    // SAFETY: a contiguous, writable, host-accessible tensor (host_tensor): its `numel`
    // elements start at its first element, inside the storage the Arc keeps alive. No JS runs
    // during the call, and the kernel refuses a destination overlapping the source.
    unsafe { std::slice::from_raw_parts_mut(out_storage.base().add(out_layout.first_byte), len) }
  };
  convert::convert(&strided(source), target, affine, bytes)?;
  Ok(None)
}
