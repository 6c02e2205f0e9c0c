//! Where a tensor enters: JS memory wrapped in place ([`wrap_js_memory`]), a capsule consumed
//! ([`import_capsule`]), or a tensor handed over by native code ([`import_foreign`]).

use std::sync::Arc;

use napi::bindgen_prelude::{BigInt, Unknown};
use napi::{sys, Env, JsValue};
use napi_dlpack::capsule;
use napi_dlpack::cuda::Stream;
use napi_dlpack::{
  export, take_owner, DType, Device, DeviceType, ErrorKind, ExportFormat, ForeignTensor,
};

use crate::errors::{fail, status, Result};
use crate::handle::{new_handle, Handle};
use crate::js_memory::{self, BufferRef};
use crate::layout::{is_aligned, TensorLayout};
use crate::own_capsule::{self, ExportOwner};
use crate::storage::{foreign_span_start, Memory, Storage};

/// `copyMode` of [`import_capsule`].
pub(crate) const COPY_IF_NEEDED: u32 = 0;
pub(crate) const COPY_ALWAYS: u32 = 1;
pub(crate) const COPY_NEVER: u32 = 2;

/// Wraps JS memory (a Uint8Array over an ArrayBuffer or SharedArrayBuffer) without copying.
/// `offset` is in elements from the start of `bytes`; strides in elements (`None`: row-major).
/// Memory that is not aligned to the element size (a Buffer or DataView at an odd byte offset)
/// cannot be viewed by a TypedArray nor handed to typed consumers, so, as for foreign memory,
/// the tensor's span is copied (`isCopy`). (`fromDLPack` never gets here with misaligned
/// memory: it wraps TypedArrays with their own element type, or bytes.)
pub(crate) fn wrap_js_memory<'env>(
  env: &'env Env,
  bytes: &Unknown<'env>,
  dtype: DType,
  shape: &[i64],
  strides: Option<&[i64]>,
  offset: i64,
  read_only: bool,
) -> Result<Unknown<'env>> {
  // SAFETY: live value of this env.
  let (base, len, array_buffer, base_offset) =
    unsafe { js_memory::typedarray_bytes(env.raw(), bytes.raw())? };
  // SAFETY: live value of this env.
  if unsafe { js_memory::is_detached(env.raw(), array_buffer) } {
    return Err(fail(
      ErrorKind::Detached,
      "the ArrayBuffer has been detached",
    ));
  }
  if offset < 0 {
    return Err(fail(
      ErrorKind::InvalidLayout,
      "offset must be non-negative",
    ));
  }
  let first_byte = (offset as u64)
    .checked_mul(dtype.itemsize() as u64)
    .and_then(|bytes| usize::try_from(bytes).ok())
    .ok_or_else(|| fail(ErrorKind::Overflow, "offset overflows"))?;
  let layout = TensorLayout::over_region(
    dtype,
    shape,
    strides,
    first_byte,
    base as usize,
    len,
    read_only,
  )?;
  // The first element is aligned iff every element is (strides count whole elements).
  if !is_aligned(base as usize + first_byte, dtype) {
    return copy_misaligned(env, base, &layout);
  }
  // SAFETY: live value of this env; the reference keeps the buffer (and `base`) alive.
  let buffer = unsafe { BufferRef::new(env.raw(), array_buffer)? };
  let storage = Storage::new(Memory::Js {
    base,
    base_offset,
    buffer,
  });
  new_handle(env, storage, layout)
}

/// A handle over a copy of the span of `layout` (laid out over JS memory at `base`) in a fresh,
/// aligned V8 ArrayBuffer: same shape, strides and offsets, flagged `isCopy`.
fn copy_misaligned<'env>(
  env: &'env Env,
  base: *mut u8,
  layout: &TensorLayout,
) -> Result<Unknown<'env>> {
  let span_start = layout.span_start();
  let bytes: &[u8] = if layout.span_bytes == 0 {
    &[]
  } else {
    // SAFETY: `TensorLayout::over_region` checked that the span lies inside the JS buffer at
    // `base`, which the caller's JS value keeps alive during this call.
    unsafe { std::slice::from_raw_parts(base.add(span_start), layout.span_bytes) }
  };
  // SAFETY: our env.
  let array_buffer = unsafe { js_memory::arraybuffer_copy(env.raw(), bytes)? };
  let layout = TensorLayout {
    first_byte: layout.first_byte - span_start,
    ..layout.clone()
  };
  host_copy_handle(env, array_buffer, layout)
}

/// Consumes a capsule (from any addon) into a new handle. Host tensors stay zero-copy where the
/// runtime allows external ArrayBuffers and the data is aligned; otherwise they are copied into
/// V8 memory (`isCopy`), unless `copyMode` is never-copy, which throws instead. CUDA tensors are
/// checked against the driver's pointer attributes; `stream` is the consumer stream the
/// producer was asked to synchronise to (CUDA only; unset: the legacy default stream).
pub(crate) fn import_capsule<'env>(
  env: &'env Env,
  capsule: Unknown<'env>,
  copy_mode: u32,
  stream: Option<BigInt>,
) -> Result<Unknown<'env>> {
  if !matches!(copy_mode, COPY_IF_NEEDED | COPY_ALWAYS | COPY_NEVER) {
    return Err(fail(
      ErrorKind::InvalidArgument,
      format!("invalid copy mode {copy_mode}"),
    ));
  }
  // Checked before the capsule is consumed, so a bad value leaves it usable.
  let stream = crate::cuda::stream_arg(stream.as_ref())?;
  // SAFETY: live value of this env; the payload lives at least as long as this call.
  let payload = unsafe { capsule::payload_of(env.raw(), capsule.raw())? };
  // SAFETY: as above. From here on we own the tensor: every error path below drops it, which
  // runs its deleter exactly once.
  let managed = unsafe { &*payload }.take()?;
  let version = managed.version().map(|v| (v.major, v.minor));
  let format = if managed.is_versioned() {
    ExportFormat::Versioned
  } else {
    ExportFormat::Legacy
  };
  let managed = if copy_mode == COPY_ALWAYS {
    managed
  } else {
    // Our own export coming straight back: share the original storage, no copy, no
    // re-validation of metadata we produced ourselves.
    match take_owner::<ExportOwner>(managed) {
      Ok(owner) => {
        // SAFETY: our env, on its thread.
        let viewable = matches!(owner.storage.memory(), Memory::Js { .. })
          || !owner.layout.device.is_host_accessible()
          || unsafe { js_memory::external_buffers_allowed(env.raw()) };
        if viewable {
          let layout = TensorLayout {
            version,
            flags: if version.is_some() {
              owner.info.flags()
            } else {
              0
            },
            // A share of a copy is still a copy; IS_COPIED marks a copy made for this export.
            copied: owner.layout.copied || owner.info.is_copied(),
            ..(*owner.layout).clone()
          };
          if own_capsule::is_own(&owner, payload) {
            // Our own capsule straight back: it becomes the new tensor's handle, so the round
            // trip creates no second finalizable external.
            let handle = Handle::new(owner.storage, Arc::new(layout));
            // SAFETY: `capsule` is a live capsule of this env whose payload is ours (is_own).
            let value = unsafe { own_capsule::adopt(capsule.raw(), payload, handle) };
            // SAFETY: live value of this env.
            return Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), value) });
          }
          return new_handle(env, owner.storage, layout);
        }
        // Memory a JS view can only copy (Electron): take the general path below.
        export(owner, format)?
      }
      Err(managed) => managed,
    }
  };
  from_foreign(env, ForeignTensor::new(managed)?, copy_mode, stream)
}

/// A handle for a validated tensor handed over by native code (the exchange table's
/// `managed_tensor_to_value`): what `importCapsule` makes of it, copying only if needed.
pub(crate) fn import_foreign<'env>(env: &'env Env, tensor: ForeignTensor) -> Result<Unknown<'env>> {
  from_foreign(env, tensor, COPY_IF_NEEDED, None)
}

fn from_foreign<'env>(
  env: &'env Env,
  tensor: ForeignTensor,
  copy_mode: u32,
  stream: Option<Stream>,
) -> Result<Unknown<'env>> {
  let layout = TensorLayout::of_foreign(&tensor);
  if tensor.device().device_type == DeviceType::Cuda {
    let (storage, layout) = crate::cuda::import_device(
      tensor,
      layout,
      copy_mode == COPY_ALWAYS,
      stream.unwrap_or(Stream::Legacy),
    )?;
    return new_handle(env, storage, layout);
  }
  if !tensor.device().is_host_accessible() {
    if copy_mode == COPY_ALWAYS {
      return Err(fail(
        ErrorKind::Device,
        format!(
          "copying {} memory to the host is not supported",
          tensor.device()
        ),
      ));
    }
    // Device memory is never viewed from JS; the handle only carries it.
    let storage = Storage::new(Memory::Foreign(tensor));
    return new_handle(env, storage, layout);
  }
  if tensor.span_bytes() > js_memory::max_arraybuffer_bytes() {
    // No ArrayBuffer can hold it in this runtime, so neither a view nor a copy of it can
    // exist: keep the producer's memory (exports stay zero-copy), `.data` throws
    // ERR_DLPACK_TOO_LARGE and `getData({ offset, length })` views or copies windows of it.
    if copy_mode == COPY_ALWAYS {
      return Err(fail(
        ErrorKind::TooLarge,
        format!(
          "copy: true asks for a copy of {} bytes, more than this runtime's largest ArrayBuffer \
           ({} bytes)",
          tensor.span_bytes(),
          js_memory::max_arraybuffer_bytes()
        ),
      ));
    }
    let storage = Storage::new(Memory::Foreign(tensor));
    return new_handle(env, storage, layout);
  }
  let aligned = is_aligned(tensor.data_ptr() as usize, tensor.dtype());
  // SAFETY: our env, on its thread.
  let zero_copy_possible = aligned && unsafe { js_memory::external_buffers_allowed(env.raw()) };
  if copy_mode != COPY_ALWAYS && zero_copy_possible {
    let storage = Storage::new(Memory::Foreign(tensor));
    return new_handle(env, storage, layout);
  }
  if copy_mode == COPY_NEVER {
    let why = if aligned {
      "this runtime does not allow external ArrayBuffers (Electron's memory cage), so a JS view needs a copy"
    } else {
      "the data is not aligned to its element size, so a JS view needs a copy"
    };
    return Err(fail(
      ErrorKind::CopyRequired,
      format!("copy: false cannot be honoured: {why}"),
    ));
  }
  // Copy the span as it is (keeping strides and offsets) into V8 memory; the foreign tensor is
  // released right after, so its deleter runs now.
  let span = foreign_span_start(&tensor).cast_const();
  // SAFETY: the validated span of a host-accessible tensor is readable.
  let bytes = unsafe { std::slice::from_raw_parts(span, tensor.span_bytes()) };
  // SAFETY: our env.
  let array_buffer = unsafe { js_memory::arraybuffer_copy(env.raw(), bytes)? };
  drop(tensor);
  host_copy_handle(env, array_buffer, layout)
}

/// A handle over a host copy we just made in a fresh V8 ArrayBuffer: marked `isCopy`, and on
/// the CPU whatever host-accessible kind of memory the source was.
pub(crate) fn host_copy_handle<'env>(
  env: &'env Env,
  array_buffer: sys::napi_value,
  layout: TensorLayout,
) -> Result<Unknown<'env>> {
  js_storage_handle(
    env,
    array_buffer,
    TensorLayout {
      copied: true,
      device: Device::CPU,
      ..layout
    },
  )
}

/// A handle over a fresh V8 ArrayBuffer holding the whole region `layout` describes.
pub(crate) fn js_storage_handle<'env>(
  env: &'env Env,
  array_buffer: sys::napi_value,
  layout: TensorLayout,
) -> Result<Unknown<'env>> {
  let (mut data, mut _len) = (std::ptr::null_mut(), 0usize);
  // SAFETY: a live ArrayBuffer of this env.
  status("napi_get_arraybuffer_info", unsafe {
    sys::napi_get_arraybuffer_info(env.raw(), array_buffer, &mut data, &mut _len)
  })?;
  // SAFETY: as above; the reference keeps the buffer alive.
  let buffer = unsafe { BufferRef::new(env.raw(), array_buffer)? };
  let storage = Storage::new(Memory::Js {
    base: data.cast(),
    base_offset: 0,
    buffer,
  });
  new_handle(env, storage, layout)
}
