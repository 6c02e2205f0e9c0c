//! JS views of a host tensor's memory: the ArrayBuffer `.data` is made from, and windows of it
//! (`getData({ offset, length })`).

use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::Unknown;
use napi::Env;
use napi_dlpack::ErrorKind;

use crate::errors::{fail, Result};
use crate::handle::{Handle, ViewSlot};
use crate::js_memory::{self, BufferRef};
use crate::layout::is_aligned;
use crate::storage::Memory;

/// An ArrayBuffer (or SharedArrayBuffer) and the byte offset in it of the first byte viewed.
pub(crate) struct HostView<'env> {
  pub buffer: Unknown<'env>,
  pub byte_offset: i64,
}

/// The memory of a host tensor as an ArrayBuffer (or SharedArrayBuffer) and the byte offset of
/// its lowest element in it (what `.data` is made from). Zero-copy: JS memory is returned as
/// is; foreign memory through an external ArrayBuffer that keeps the storage alive, cached in
/// the handle.
pub(crate) fn view_of<'env>(env: &'env Env, handle: &Handle) -> Result<HostView<'env>> {
  let storage = handle.storage()?.clone();
  if !handle.layout.device.is_host_accessible() {
    return Err(fail(
      ErrorKind::NotCpu,
      format!(
        "tensor memory is on {}; call .to('cpu') first",
        handle.layout.device
      ),
    ));
  }
  let span_start = handle.layout.span_start();
  match storage.memory() {
    // Unreachable (device memory is never host-accessible), but never viewed either way.
    Memory::Cuda(_) => Err(fail(
      ErrorKind::NotCpu,
      "device memory has no host view; call .to('cpu') first",
    )),
    Memory::Js {
      buffer,
      base_offset,
      ..
    } => {
      // SAFETY: our env, on its thread.
      let array_buffer = unsafe { buffer.value(env.raw())? };
      // SAFETY: live value of this env.
      if unsafe { js_memory::is_detached(env.raw(), array_buffer) } {
        return Err(fail(
          ErrorKind::Detached,
          "the tensor's ArrayBuffer has been detached (transferred)",
        ));
      }
      Ok(HostView {
        // SAFETY: live value of this env.
        buffer: unsafe { Unknown::from_raw_unchecked(env.raw(), array_buffer) },
        byte_offset: (base_offset + span_start) as i64,
      })
    }
    Memory::Foreign(_) | Memory::Owned(_) | Memory::Pinned(_) => {
      if let Some((cached, _)) = handle.view.borrow().as_ref() {
        // SAFETY: our env, on its thread.
        let value = unsafe { cached.value(env.raw())? };
        return Ok(HostView {
          // SAFETY: live value of this env.
          buffer: unsafe { Unknown::from_raw_unchecked(env.raw(), value) },
          byte_offset: 0,
        });
      }
      // SAFETY: span_start lies inside the storage region.
      let start = unsafe { storage.base().add(span_start) };
      let len = handle.layout.span_bytes;
      if matches!(storage.memory(), Memory::Pinned(_)) {
        refuse_pinned_copy(env)?;
      }
      let slot: ViewSlot = Arc::new(Mutex::new(Some(storage.clone())));
      // SAFETY: our env; the slot keeps the memory alive until the ArrayBuffer dies or
      // `dispose()` detaches it first.
      let value = unsafe { js_memory::external_arraybuffer(env.raw(), start, len, slot.clone())? };
      // SAFETY: live value of this env.
      *handle.view.borrow_mut() = Some((unsafe { BufferRef::new(env.raw(), value)? }, slot));
      Ok(HostView {
        // SAFETY: live value of this env.
        buffer: unsafe { Unknown::from_raw_unchecked(env.raw(), value) },
        byte_offset: 0,
      })
    }
  }
}

/// Elements `offset..offset + length` of the span `.data` covers (from the lowest to the highest
/// element). Where `.data` works, the window lies inside that same (cached) view. Past the
/// ArrayBuffer limit, a window of foreign memory is its own external ArrayBuffer, which holds
/// the memory until it is collected (dispose() cannot empty it), or a copy where external
/// ArrayBuffers are refused or the data is misaligned.
pub(crate) fn window_of<'env>(
  env: &'env Env,
  handle: &Handle,
  offset: i64,
  length: i64,
) -> Result<HostView<'env>> {
  let storage = handle.storage()?.clone();
  let layout = &handle.layout;
  if !layout.device.is_host_accessible() {
    return Err(fail(
      ErrorKind::NotCpu,
      format!(
        "tensor memory is on {}; call .to('cpu') first",
        layout.device
      ),
    ));
  }
  let itemsize = layout.dtype.itemsize();
  let span_elements = layout.span_elements();
  let end = offset.checked_add(length);
  if offset < 0 || length < 0 || end.is_none_or(|end| end as u64 > span_elements as u64) {
    return Err(fail(
      ErrorKind::InvalidArgument,
      format!(
        "window of {length} elements at {offset} is outside the {span_elements} elements the \
         tensor's data spans"
      ),
    ));
  }
  // In range of the span, so these products fit in usize.
  let (first, count) = (offset as usize * itemsize, length as usize * itemsize);
  // SAFETY: our env, on its thread.
  let externals = unsafe { js_memory::external_buffers_allowed(env.raw()) };
  let whole_view_possible = matches!(storage.memory(), Memory::Js { .. })
    || (externals && layout.span_bytes <= js_memory::max_arraybuffer_bytes());
  if whole_view_possible {
    let view = view_of(env, handle)?;
    return Ok(HostView {
      buffer: view.buffer,
      byte_offset: view.byte_offset + first as i64,
    });
  }
  if matches!(storage.memory(), Memory::Cuda(_)) {
    return Err(fail(ErrorKind::NotCpu, "device memory has no host view"));
  }
  if matches!(storage.memory(), Memory::Pinned(_)) {
    refuse_pinned_copy(env)?;
  }
  js_memory::check_arraybuffer_len(count)?;
  // SAFETY: the window lies inside the storage's validated, host-accessible span.
  let start = unsafe { storage.base().add(layout.span_start() + first) };
  let buffer = if externals && is_aligned(start as usize, layout.dtype) {
    // SAFETY: our env; the window's ArrayBuffer holds the storage until it is collected.
    unsafe { js_memory::external_arraybuffer(env.raw(), start, count, storage)? }
  } else {
    // A copy (writes to it do not reach the tensor): no external buffers (Electron), or
    // misaligned data no TypedArray can view.
    // SAFETY: the window's bytes are readable (validated span, kept alive by `storage`).
    let bytes = unsafe { std::slice::from_raw_parts(start, count) };
    // SAFETY: our env.
    unsafe { js_memory::arraybuffer_copy(env.raw(), bytes)? }
  };
  Ok(HostView {
    // SAFETY: live value of this env.
    buffer: unsafe { Unknown::from_raw_unchecked(env.raw(), buffer) },
    byte_offset: 0,
  })
}

/// Where external ArrayBuffers are refused (Electron's memory cage), a JS view of pinned memory
/// could only be a copy, and writes to a copy would never reach the memory the GPU copies from:
/// refused with `ERR_DLPACK_COPY_REQUIRED` rather than handed out silently.
fn refuse_pinned_copy(env: &Env) -> Result<()> {
  // SAFETY: our env, on its thread.
  if unsafe { js_memory::external_buffers_allowed(env.raw()) } {
    return Ok(());
  }
  Err(fail(
    ErrorKind::CopyRequired,
    "this runtime does not allow external ArrayBuffers (Electron's memory cage), so pinned \
     (cuda_host) memory has no JS view: read it with toTypedArray() (a copy), write it with \
     copy_(src), or use a cpu tensor",
  ))
}
