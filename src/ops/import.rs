//! Where a tensor enters: JS memory wrapped in place ([`wrap_js_memory`]), a capsule consumed
//! ([`capsule_to_handle`]), or a tensor handed over by native code ([`import_foreign`]). How a
//! tensor is imported is planned by `ops::negotiation`.

use std::sync::Arc;

use napi::bindgen_prelude::Unknown;
use napi::{sys, Env, JsValue};
use napi_dlpack::capsule;
use napi_dlpack::cuda::{self, Stream};
use napi_dlpack::{
  export, take_owner, DType, Device, DeviceType, ErrorKind, ExportFormat, ForeignTensor,
};

use crate::errors::{fail, status, Result};
use crate::handle::{new_handle, Handle};
use crate::js_memory::{self, BufferRef};
use crate::layout::{is_aligned, TensorLayout};
use crate::ops::negotiation::{
  check_import_device, plan_import, CopyRequest, ImportPlan, ImportRequest, Runtime, Source,
};
use crate::own_capsule::{self, ExportOwner};
use crate::storage::{foreign_span_start, Memory, Storage};

/// Wraps JS memory (a Uint8Array over an ArrayBuffer or SharedArrayBuffer) without copying.
/// `offset` is in elements from the start of `bytes`; strides in elements (`None`: row-major).
/// Memory that is not aligned to the element size (a Buffer or DataView at an odd byte offset)
/// cannot be viewed by a TypedArray nor handed to typed consumers, so, as for foreign memory,
/// the tensor's span is copied (`isCopy`). (`fromDLPack` never gets here with misaligned
/// memory: it wraps TypedArrays with their own element type, or bytes.)
///
/// `resizable`: the buffer is a resizable ArrayBuffer (the JS layer asks its `resizable`
/// getter; Node-API cannot tell). Its span is copied too: `resize()` to a smaller length
/// decommits the pages past the new length in place (V8), so a pointer kept into them (a
/// storage, a capsule, an export, a borrow) would fault or read zeros later, and no API pins
/// the length. A growable SharedArrayBuffer is wrapped in place: it only grows, in place (its
/// whole maximum is reserved up front because other threads may hold its address).
#[allow(clippy::too_many_arguments)]
pub(crate) fn wrap_js_memory<'env>(
  env: &'env Env,
  bytes: &Unknown<'env>,
  dtype: DType,
  shape: &[i64],
  strides: Option<&[i64]>,
  offset: i64,
  read_only: bool,
  resizable: bool,
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
  // The first element is aligned iff every element is (strides count whole elements). The
  // length read above is this call's: no JS runs before the copy, so the span is still there.
  if resizable || !is_aligned(base as usize + first_byte, dtype) {
    return copy_span(env, base, &layout);
  }
  // SAFETY: live value of this env; the reference keeps the buffer (and `base`) alive.
  let buffer = unsafe { BufferRef::new(env.raw(), array_buffer)? };
  let storage = Storage::new(Memory::Js {
    base,
    base_offset,
    len,
    buffer,
  });
  new_handle(env, storage, layout)
}

/// A handle over a copy of the span of `layout` (laid out over JS memory at `base`) in a fresh,
/// aligned, fixed-length V8 ArrayBuffer: same shape, strides and offsets, flagged `isCopy`.
fn copy_span<'env>(env: &'env Env, base: *mut u8, layout: &TensorLayout) -> Result<Unknown<'env>> {
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

/// Consumes a capsule (from any addon) into a new handle, as `request` asks (see
/// `ops::negotiation`). What can be refused before the consume is refused first, so the
/// capsule stays usable: with `refuse_before_consuming`, a requested device the tensor is not on
/// (when its device can be read in place) or that cannot be used now (a CUDA device without a
/// driver, or past the device count). After the consume, [`plan_import`] decides; a refusal
/// then releases the tensor (its deleter runs once, now).
pub(crate) fn capsule_to_handle<'env>(
  env: &'env Env,
  capsule: Unknown<'env>,
  request: &ImportRequest,
  refuse_before_consuming: bool,
) -> Result<Unknown<'env>> {
  // SAFETY: live value of this env; the payload lives at least as long as this call.
  let payload = unsafe { capsule::payload_of(env.raw(), capsule.raw())? };
  if let (Some(wanted), true) = (request.device, refuse_before_consuming) {
    // SAFETY: on the capsule's JS thread, while `capsule` keeps the external alive.
    if let Some(actual) = unsafe { (*payload).peek_device()? } {
      check_import_device(Some(wanted), request.copy, actual)?;
    }
    if wanted.device_type == DeviceType::Cuda {
      cuda::device(wanted.id)?;
    }
  }
  // SAFETY: as above. From here on we own the tensor: every error path below drops it, which
  // runs its deleter exactly once.
  let managed = unsafe { &*payload }.take()?;
  let version = managed.version().map(|v| (v.major, v.minor));
  let format = if managed.is_versioned() {
    ExportFormat::Versioned
  } else {
    ExportFormat::Legacy
  };
  let runtime = runtime(env);
  if request.copy == CopyRequest::Always {
    return from_foreign(env, ForeignTensor::new(managed)?, request, &runtime);
  }
  let owner = match take_owner::<ExportOwner>(managed) {
    Ok(owner) => owner,
    Err(managed) => return from_foreign(env, ForeignTensor::new(managed)?, request, &runtime),
  };
  // Our own export coming back.
  let layout = &owner.layout;
  let source = Source::Own {
    same_capsule: own_capsule::is_own(&owner, payload),
    js_memory: matches!(owner.storage.memory(), Memory::Js { .. }),
    pinned: matches!(owner.storage.memory(), Memory::Pinned(_)),
    device: layout.device,
    span_bytes: layout.span_bytes,
    aligned: is_aligned(
      (owner.storage.base() as usize).wrapping_add(layout.first_byte),
      layout.dtype,
    ),
  };
  // On a refusal `owner` drops here: our hold on the storage is released.
  let plan = plan_import(request, &source, &runtime)?;
  if !matches!(plan, ImportPlan::AdoptOwn | ImportPlan::ShareOwn) {
    // Memory a JS view can only copy (Electron): as any producer's tensor.
    let managed = export(owner, format)?;
    return from_foreign(env, ForeignTensor::new(managed)?, request, &runtime);
  }
  let layout = TensorLayout {
    version,
    flags: if version.is_some() {
      owner.info.flags()
    } else {
      0
    },
    // A share of a copy is still a copy; IS_COPIED marks a copy made for this export.
    copied: layout.copied || owner.info.is_copied(),
    ..(**layout).clone()
  };
  if plan == ImportPlan::AdoptOwn {
    // Our own capsule straight back: it becomes the new tensor's handle, so the round trip
    // creates no second finalizable external.
    let handle = Handle::new(owner.storage, Arc::new(layout));
    // SAFETY: `capsule` is a live capsule of this env whose payload is ours (is_own).
    let value = unsafe { own_capsule::adopt(capsule.raw(), payload, handle) };
    // SAFETY: live value of this env.
    return Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), value) });
  }
  new_handle(env, owner.storage, layout)
}
/// A handle for a validated tensor handed over by native code (the exchange table's
/// `managed_tensor_to_value`): what `importCapsule` makes of it, copying only if needed.
pub(crate) fn import_foreign<'env>(env: &'env Env, tensor: ForeignTensor) -> Result<Unknown<'env>> {
  let request = ImportRequest {
    copy: CopyRequest::IfNeeded,
    device: None,
    stream: None,
  };
  from_foreign(env, tensor, &request, &runtime(env))
}

/// What this environment lets JS view.
fn runtime(env: &Env) -> Runtime {
  Runtime {
    // SAFETY: our env, on its thread.
    external_buffers: unsafe { js_memory::external_buffers_allowed(env.raw()) },
    max_arraybuffer_bytes: js_memory::max_arraybuffer_bytes(),
  }
}

/// Plans and carries out the import of a validated tensor of another producer (or of our own
/// export where it cannot be shared). On every error `tensor` drops: its deleter runs once.
fn from_foreign<'env>(
  env: &'env Env,
  tensor: ForeignTensor,
  request: &ImportRequest,
  runtime: &Runtime,
) -> Result<Unknown<'env>> {
  let source = Source::Foreign {
    device: tensor.device(),
    span_bytes: tensor.span_bytes(),
    aligned: is_aligned(tensor.data_ptr() as usize, tensor.dtype()),
  };
  let plan = plan_import(request, &source, runtime)?;
  let layout = TensorLayout::of_foreign(&tensor);
  match plan {
    ImportPlan::ZeroCopy | ImportPlan::DeviceCopy
      if tensor.device().device_type == DeviceType::Cuda =>
    {
      let (storage, layout) = crate::cuda::import_device(
        tensor,
        layout,
        plan == ImportPlan::DeviceCopy,
        request.stream.unwrap_or(Stream::Legacy),
      )?;
      new_handle(env, storage, layout)
    }
    ImportPlan::ZeroCopy => new_handle(env, Storage::new(Memory::Foreign(tensor)), layout),
    ImportPlan::HostCopy => {
      // Copy the span as it is (keeping strides and offsets) into V8 memory; the foreign tensor
      // is released right after, so its deleter runs now.
      let span = foreign_span_start(&tensor).cast_const();
      // SAFETY: the validated span of a host-accessible tensor (the plan copies no other) is
      // readable.
      let bytes = unsafe { std::slice::from_raw_parts(span, tensor.span_bytes()) };
      // SAFETY: our env.
      let array_buffer = unsafe { js_memory::arraybuffer_copy(env.raw(), bytes)? };
      drop(tensor);
      host_copy_handle(env, array_buffer, layout)
    }
    // Plans of our own exports, or a device copy off CUDA: never made for a foreign source.
    ImportPlan::AdoptOwn | ImportPlan::ShareOwn | ImportPlan::DeviceCopy => Err(fail(
      ErrorKind::Napi,
      format!(
        "import plan {plan:?} for a foreign {} tensor",
        tensor.device()
      ),
    )),
  }
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
  let (mut data, mut len) = (std::ptr::null_mut(), 0usize);
  // SAFETY: a live ArrayBuffer of this env.
  status("napi_get_arraybuffer_info", unsafe {
    sys::napi_get_arraybuffer_info(env.raw(), array_buffer, &mut data, &mut len)
  })?;
  // SAFETY: as above; the reference keeps the buffer alive.
  let buffer = unsafe { BufferRef::new(env.raw(), array_buffer)? };
  let storage = Storage::new(Memory::Js {
    base: data.cast(),
    base_offset: 0,
    len,
    buffer,
  });
  new_handle(env, storage, layout)
}
