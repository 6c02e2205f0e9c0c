//! The `#[napi]` functions of tensors, handles and capsules (`lib/tensor.ts`,
//! `lib/protocol.ts`).

use napi::bindgen_prelude::{BigInt, Unknown};
use napi::{Env, JsValue};
use napi_derive::napi;
use napi_dlpack::ffi::DLDevice;
use napi_dlpack::{capsule, Device, ErrorKind};

use crate::binding::args::parse_dtype;
use crate::errors::{fail, Result};
use crate::facts::INFO_SLOTS;
use crate::handle::Handle;
use crate::js_memory;
use crate::ops::negotiation::{self, CopyRequest};
use crate::ops::view::HostView;
use crate::own_capsule::handle_of;

/// Wraps JS memory (a Uint8Array over an ArrayBuffer or SharedArrayBuffer) without copying,
/// unless it is misaligned or `resizable` (a resizable ArrayBuffer: see
/// `ops::import::wrap_js_memory`). `offset` is in elements from the start of `bytes`; strides
/// in elements (null: row-major).
#[napi(js_name = "wrapBuffer")]
#[allow(clippy::too_many_arguments)]
pub fn wrap_buffer<'env>(
  env: &'env Env,
  bytes: Unknown<'env>,
  dtype: String,
  shape: Vec<i64>,
  strides: Option<Vec<i64>>,
  offset: i64,
  readonly: bool,
  resizable: bool,
) -> Result<Unknown<'env>> {
  crate::ops::import::wrap_js_memory(
    env,
    &bytes,
    parse_dtype(&dtype)?,
    &shape,
    strides.as_deref(),
    offset,
    readonly,
    resizable,
  )
}

/// A copy of a tensor in a new handle (`isCopy`): row-major in V8 memory for host tensors, a
/// device copy on the same device for CUDA tensors.
#[napi(js_name = "copyHandle")]
pub fn copy_handle<'env>(env: &'env Env, handle: Unknown<'env>) -> Result<Unknown<'env>> {
  crate::ops::copy::copy_handle(env, handle_of(env, &handle)?)
}

/// `handleInfo` for the hot path (a raw call, see `binding::fast`): writes the same facts as
/// numbers into a caller-owned Float64Array of at least `INFO_SLOTS` elements, in the order of
/// `TensorLayout::write_slots`.
pub(crate) fn handle_info_into(env: &Env, handle: Unknown<'_>, out: Unknown<'_>) -> Result<()> {
  let handle = handle_of(env, &handle)?;
  let storage = handle.storage()?;
  // SAFETY: a live value of this env, on its thread.
  let slots = unsafe { js_memory::float64_array(env.raw(), out.raw(), INFO_SLOTS) }?;
  handle
    .layout
    .write_slots(storage.export_byte_offset(&handle.layout), slots);
  Ok(())
}

/// The memory of a host tensor as an ArrayBuffer (or SharedArrayBuffer) and the byte offset of
/// its lowest element in it. Zero-copy: JS memory is returned as is; foreign memory through an
/// external ArrayBuffer that keeps the storage alive.
#[napi(object)]
pub struct HandleView<'env> {
  pub buffer: Unknown<'env>,
  pub byte_offset: i64,
}

impl<'env> From<HostView<'env>> for HandleView<'env> {
  fn from(view: HostView<'env>) -> HandleView<'env> {
    HandleView {
      buffer: view.buffer,
      byte_offset: view.byte_offset,
    }
  }
}

#[napi(js_name = "handleView")]
pub fn handle_view<'env>(env: &'env Env, handle: Unknown<'env>) -> Result<HandleView<'env>> {
  Ok(crate::ops::view::view_of(env, handle_of(env, &handle)?)?.into())
}

/// Elements `offset..offset + length` of the span `.data` covers (see `ops::view::window_of`).
#[napi(js_name = "handleWindow")]
pub fn handle_window<'env>(
  env: &'env Env,
  handle: Unknown<'env>,
  offset: i64,
  length: i64,
) -> Result<HandleView<'env>> {
  Ok(crate::ops::view::window_of(env, handle_of(env, &handle)?, offset, length)?.into())
}

/// Tells the addon the runtime's largest ArrayBuffer, in bytes (`buffer.constants.MAX_LENGTH`;
/// lib/native.ts passes it once at load). Views and copies past it throw ERR_DLPACK_TOO_LARGE
/// instead of asking the runtime for an ArrayBuffer it cannot make.
#[napi(js_name = "setArrayBufferLimit")]
pub fn set_array_buffer_limit(bytes: f64) -> Result<()> {
  if !(bytes.is_finite() && bytes >= 0.0 && bytes.fract() == 0.0 && bytes <= (1u64 << 53) as f64) {
    return Err(fail(
      ErrorKind::InvalidArgument,
      format!("the ArrayBuffer limit must be a safe non-negative integer, got {bytes}"),
    ));
  }
  js_memory::set_max_arraybuffer_bytes(bytes as usize);
  Ok(())
}

/// Hands this environment's `worker_threads.markAsUntransferable` to the addon (lib/native.ts,
/// once per environment at load): exports of V8 memory mark their ArrayBuffer with it, so that
/// a transfer list cannot move memory that native code still points into.
#[napi(js_name = "setUntransferableMarker")]
pub fn set_untransferable_marker(env: &Env, marker: Unknown<'_>) -> Result<()> {
  let mut kind = 0;
  // SAFETY: a live value of our env.
  crate::errors::status("napi_typeof", unsafe {
    napi::sys::napi_typeof(env.raw(), marker.raw(), &mut kind)
  })?;
  if kind != napi::sys::ValueType::napi_function {
    return Err(fail(
      ErrorKind::InvalidArgument,
      "the untransferable marker must be a function",
    ));
  }
  // SAFETY: our env, on its thread; `marker` is a live value of it.
  unsafe { js_memory::set_untransferable_marker(env.raw(), marker.raw()) }
}

/// Whether this runtime lets JS detach an `ArrayBuffer` marked untransferable (probed once by
/// `lib/native.ts`): where it cannot, a borrow by id of JS memory skips the detach check.
#[napi(js_name = "setMarkedBuffersDetachable")]
pub fn set_marked_buffers_detachable(detachable: bool) {
  crate::slots::set_marked_buffers_detachable(detachable);
}

/// Releases the handle's storage now (`dispose()`); later calls fail with ERR_TENSOR_DISPOSED.
/// Memory still referenced by live exports or views stays valid until they go.
#[napi(js_name = "releaseHandle")]
pub fn release_handle(env: &Env, handle: Unknown<'_>) -> Result<bool> {
  handle_of(env, &handle)?.release(env)
}

/// Address of the first element, for zero-copy checks and diagnostics.
#[napi(js_name = "dataPointer")]
pub fn data_pointer(env: &Env, handle: Unknown<'_>) -> Result<BigInt> {
  let handle: &Handle = handle_of(env, &handle)?;
  let storage = handle.storage()?;
  Ok(BigInt::from(storage.first_address(&handle.layout) as u64))
}

#[napi(js_name = "isCapsule")]
pub fn is_capsule(env: &Env, value: Unknown<'_>) -> bool {
  // SAFETY: live value of this env.
  unsafe { capsule::is_capsule(env.raw(), value.raw()) }
}

#[napi(js_name = "capsuleIsConsumed")]
pub fn capsule_is_consumed(env: &Env, value: Unknown<'_>) -> Result<bool> {
  // SAFETY: live value of this env.
  Ok(unsafe { capsule::is_consumed(env.raw(), value.raw())? })
}

/// Whether `value` is a `napi_external` (any addon's): `fromDLPack` takes every External for
/// a capsule, so one that is not a capsule is `ERR_DLPACK_NOT_A_CAPSULE`, not a bad argument.
#[napi(js_name = "isExternal")]
pub fn is_external(env: &Env, value: Unknown<'_>) -> Result<bool> {
  // SAFETY: live value of this env.
  unsafe { js_memory::is_external(env.raw(), value.raw()) }
}

/// Whether this runtime lets us create external ArrayBuffers (false in Electron, or with
/// `NAPI_DLPACK_NO_EXTERNAL_BUFFERS=1`).
#[napi(js_name = "externalBuffersAllowed")]
pub fn external_buffers_allowed(env: &Env) -> bool {
  // SAFETY: our env, on its thread.
  unsafe { js_memory::external_buffers_allowed(env.raw()) }
}

/// Device of a handle as `[type, id]`, without exporting (`__dlpack_device__`).
#[napi(js_name = "handleDevice")]
pub fn handle_device(env: &Env, handle: Unknown<'_>) -> Result<Vec<i32>> {
  let handle = handle_of(env, &handle)?;
  handle.storage()?;
  Ok(vec![
    handle.layout.device.device_type as i32,
    handle.layout.device.id,
  ])
}

/// `fromDLPack`'s device check for sources that are no capsule (a `Tensor`, JS memory): the
/// rule capsule imports follow too (`ops::negotiation::check_import_device`). `copyMode` as
/// for `importCapsule`.
#[napi(js_name = "checkImportDevice")]
pub fn check_import_device(
  wanted_type: u32,
  wanted_id: i32,
  copy_mode: u32,
  actual_type: u32,
  actual_id: i32,
) -> Result<()> {
  let device = |device_type, device_id| {
    Device::from_dl(DLDevice {
      device_type,
      device_id,
    })
  };
  negotiation::check_import_device(
    Some(device(wanted_type, wanted_id)?),
    CopyRequest::from_mode(copy_mode)?,
    device(actual_type, actual_id)?,
  )
}
