//! The Node capsule ABI (`include/napi_dlpack.h`, `docs/protocol.md`): how a DLPack tensor
//! travels between addons through JavaScript.
//!
//! A capsule is a `napi_external` whose data pointer is a [`CapsulePayload`] allocated by the
//! producer, stamped with [`CAPSULE_TAG`]. Consuming it takes the tensor pointer out with one
//! atomic exchange; the producer's finalizer calls the deleter only if the pointer is still
//! there. Any addon in the process, written in any language, can produce or consume capsules
//! from the header alone.
//!
//! Capsules made by [`create_capsule`] (and the functions built on it) are released when their
//! environment (a Worker) ends, in every runtime: Node finalizes the externals left in an
//! ending environment, but Bun and Deno do not (they run env cleanup hooks instead), so each
//! environment's unconsumed capsules are also listed here and released by a cleanup hook.

use core::ffi::c_void;
use core::ptr;
use core::sync::atomic::{AtomicPtr, Ordering};
use std::cell::RefCell;
use std::collections::HashSet;

use napi::sys;

use crate::device::Device;
use crate::error::{DLPackError, ErrorKind};
use crate::export::{export, ExportFormat, IntoDLPack};
use crate::ffi::{DLManagedTensor, DLManagedTensorVersioned, DLPACK_MAJOR_VERSION};
use crate::import::ForeignTensor;
use crate::managed::{ManagedPtr, ManagedTensor};

/// `NAPI_DLPACK_CAPSULE_ABI_VERSION`: the payload layout below.
pub const CAPSULE_ABI_VERSION: u32 = 1;
/// `NAPI_DLPACK_KIND_LEGACY`: `tensor` is a `DLManagedTensor*`.
pub const KIND_LEGACY: u32 = 0;
/// `NAPI_DLPACK_KIND_VERSIONED`: `tensor` is a `DLManagedTensorVersioned*`.
pub const KIND_VERSIONED: u32 = 1;
/// The 128-bit type tag every capsule carries (`NAPI_DLPACK_CAPSULE_TAG_LOWER/UPPER`).
pub const CAPSULE_TAG: sys::napi_type_tag = sys::napi_type_tag {
  lower: 0xc8f8_f2b7_f76b_4e13,
  upper: 0xb778_e782_6105_b33a,
};

/// `napi_dlpack_capsule`: 16 bytes on 64-bit targets.
#[repr(C)]
#[derive(Debug)]
pub struct CapsulePayload {
  pub abi_version: u32,
  pub kind: u32,
  /// The owned tensor; NULL once consumed. Only accessed atomically.
  pub tensor: AtomicPtr<c_void>,
}

const _: () = {
  assert!(core::mem::offset_of!(CapsulePayload, abi_version) == 0);
  assert!(core::mem::offset_of!(CapsulePayload, kind) == 4);
  assert!(core::mem::offset_of!(CapsulePayload, tensor) == 8);
  assert!(core::mem::size_of::<AtomicPtr<c_void>>() == core::mem::size_of::<*mut c_void>());
};

impl CapsulePayload {
  /// An unconsumed payload owning `tensor`.
  pub fn new(tensor: ManagedTensor) -> CapsulePayload {
    let (kind, raw) = kind_and_pointer(&tensor);
    let _ = tensor.into_raw(); // the payload owns it now
    CapsulePayload {
      abi_version: CAPSULE_ABI_VERSION,
      kind,
      tensor: AtomicPtr::new(raw),
    }
  }

  /// A payload for a tensor of `kind` that is not there yet (it reads as consumed until
  /// [`CapsulePayload::fill`]): for producers that must know the payload's address before
  /// they export.
  pub fn empty(kind: u32) -> CapsulePayload {
    CapsulePayload {
      abi_version: CAPSULE_ABI_VERSION,
      kind,
      tensor: AtomicPtr::new(ptr::null_mut()),
    }
  }

  /// The kind of payload a tensor in `format` needs.
  pub fn kind_for(format: ExportFormat) -> u32 {
    match format {
      ExportFormat::Versioned => KIND_VERSIONED,
      ExportFormat::Legacy => KIND_LEGACY,
    }
  }

  /// Puts `tensor` into an [`CapsulePayload::empty`] payload of its kind; gives it back if the
  /// payload already holds one or the kinds differ.
  pub fn fill(&self, tensor: ManagedTensor) -> Result<(), ManagedTensor> {
    let (kind, raw) = kind_and_pointer(&tensor);
    if kind != self.kind {
      return Err(tensor);
    }
    match self
      .tensor
      .compare_exchange(ptr::null_mut(), raw, Ordering::SeqCst, Ordering::SeqCst)
    {
      Ok(_) => {
        let _ = tensor.into_raw(); // the payload owns it now
        Ok(())
      }
      Err(_) => Err(tensor),
    }
  }

  /// Fails with `ERR_DLPACK_CAPSULE_ABI` unless the payload is of the ABI version and a kind
  /// this crate knows (`docs/protocol.md` §2.3 step 2). Every reader of a payload it did not
  /// make checks this before touching `tensor`: [`CapsulePayload::take`],
  /// [`CapsulePayload::peek_device`] and [`is_consumed`] do.
  pub fn check_abi(&self) -> Result<(), DLPackError> {
    if self.abi_version == CAPSULE_ABI_VERSION && matches!(self.kind, KIND_LEGACY | KIND_VERSIONED)
    {
      return Ok(());
    }
    Err(DLPackError::new(
      ErrorKind::CapsuleAbi,
      format!(
        "capsule ABI version {} / kind {} is not supported (expected version {CAPSULE_ABI_VERSION})",
        self.abi_version, self.kind
      ),
    ))
  }

  /// Consumes the payload: takes the tensor out with one atomic exchange. A second call fails
  /// with `ERR_DLPACK_CAPSULE_CONSUMED`; a payload of another ABI version is not touched.
  pub fn take(&self) -> Result<ManagedTensor, DLPackError> {
    self.check_abi()?;
    let tensor = self.tensor.swap(ptr::null_mut(), Ordering::SeqCst);
    managed_from_raw(self.kind, tensor).unwrap_or_else(|| Err(consumed_error()))
  }

  /// Whether the tensor slot is empty (taken out, or not filled yet). This reads `tensor`
  /// whatever the ABI version: for a payload someone else made, call
  /// [`CapsulePayload::check_abi`] first, as [`is_consumed`] does.
  pub fn is_consumed(&self) -> bool {
    self.tensor.load(Ordering::SeqCst).is_null()
  }

  /// The device of the tensor still in the payload, read without consuming it, so that a
  /// consumer can refuse a capsule on another device and leave it usable (`docs/protocol.md`
  /// §2.3, "Inspecting without consuming"). `Ok(None)` when the device cannot be read safely or
  /// is not valid: a misaligned managed pointer, a versioned tensor of another major version
  /// (only its stable prefix may be read), or an unknown device; consuming then reports the
  /// problem. Errors as [`CapsulePayload::take`] does for another ABI or a consumed payload.
  ///
  /// # Safety
  /// Must be called on the JS thread that owns the capsule external, while it is alive: every
  /// consume goes through that external, so nobody can take and release the tensor during this
  /// call, and the producer keeps an unconsumed tensor alive.
  pub unsafe fn peek_device(&self) -> Result<Option<Device>, DLPackError> {
    self.check_abi()?;
    let tensor = self.tensor.load(Ordering::SeqCst);
    if tensor.is_null() {
      return Err(consumed_error());
    }
    let align = if self.kind == KIND_VERSIONED {
      core::mem::align_of::<DLManagedTensorVersioned>()
    } else {
      core::mem::align_of::<DLManagedTensor>()
    };
    // Section 2.4 refuses a misaligned struct: leave that to the consume. (The reads below
    // assume no alignment all the same, so a missing check here shows as a wrong answer, not
    // as undefined behaviour.)
    if !(tensor as usize).is_multiple_of(align) {
      return Ok(None);
    }
    let raw = if self.kind == KIND_VERSIONED {
      let managed = tensor.cast::<DLManagedTensorVersioned>();
      // SAFETY: a live tensor (contract above); `version` is in the prefix every major version
      // keeps, read through a raw place without a reference to the whole struct.
      let version = unsafe { (&raw const (*managed).version).read_unaligned() };
      if version.major != DLPACK_MAJOR_VERSION {
        return Ok(None);
      }
      // SAFETY: major 1, so the struct has this layout and `dl_tensor.device` is readable.
      unsafe { (&raw const (*managed).dl_tensor.device).read_unaligned() }
    } else {
      let managed = tensor.cast::<DLManagedTensor>();
      // SAFETY: a live legacy tensor (one layout); read through a raw place.
      unsafe { (&raw const (*managed).dl_tensor.device).read_unaligned() }
    };
    Ok(Device::from_dl(raw).ok())
  }

  /// What a producer's finalizer does: releases the tensor (runs its deleter) unless it was
  /// consumed.
  pub fn release(&self) {
    let tensor = self.tensor.swap(ptr::null_mut(), Ordering::SeqCst);
    drop(managed_from_raw(self.kind, tensor));
  }
}

/// The payload `kind` and the raw pointer of a tensor.
fn kind_and_pointer(tensor: &ManagedTensor) -> (u32, *mut c_void) {
  match tensor.as_ptr() {
    ManagedPtr::Versioned(ptr) => (KIND_VERSIONED, ptr.as_ptr().cast::<c_void>()),
    ManagedPtr::Legacy(ptr) => (KIND_LEGACY, ptr.as_ptr().cast::<c_void>()),
  }
}

/// A NULL `tensor` in a payload means "consumed": that is all a NULL there ever means, so a
/// capsule never yields `ERR_DLPACK_NULL_TENSOR` (`docs/protocol.md` §2.1).
fn consumed_error() -> DLPackError {
  DLPackError::new(
    ErrorKind::CapsuleConsumed,
    "the DLPack capsule has already been consumed",
  )
}

fn napi_error(what: &str, status: sys::napi_status) -> DLPackError {
  DLPackError::new(
    ErrorKind::Napi,
    format!("{what} failed with napi status {status}"),
  )
}

/// The payloads of this thread's environment made by [`create_capsule`] and not finalized yet.
struct LiveCapsules {
  /// The environment whose cleanup hook releases `payloads` (NULL: none registered yet).
  env: sys::napi_env,
  /// Payload addresses. Only touched on the JS thread: in `create_capsule`, the finalizer and
  /// the cleanup hook.
  payloads: HashSet<usize>,
}

std::thread_local! {
  static LIVE_CAPSULES: RefCell<LiveCapsules> = RefCell::new(LiveCapsules {
    env: ptr::null_mut(),
    payloads: HashSet::new(),
  });
}

/// Lists `payload` with its environment's live capsules, registering the environment's cleanup
/// hook on first use. If the hook cannot be registered the capsule is not listed (it is then
/// released by its finalizer only).
///
/// # Safety
/// `env` must be the current, live environment of the calling JS thread.
unsafe fn list_capsule(env: sys::napi_env, payload: *mut CapsulePayload) {
  let _ = LIVE_CAPSULES.try_with(|live| {
    let mut live = live.borrow_mut();
    if live.env != env {
      // SAFETY: valid env (caller); the hook takes no argument and runs on this thread.
      let status =
        unsafe { sys::napi_add_env_cleanup_hook(env, Some(release_at_teardown), ptr::null_mut()) };
      if status != sys::Status::napi_ok {
        return;
      }
      live.env = env;
      live.payloads.clear(); // a previous environment's, all released by its hook
    }
    live.payloads.insert(payload as usize);
  });
}

/// The cleanup hook: releases the tensors of the capsules still alive in the ending
/// environment. Their payloads stay for the finalizers, which Node runs afterwards (they then
/// find the tensor gone) and Bun and Deno never run (16 bytes each, no tensor).
unsafe extern "C" fn release_at_teardown(_arg: *mut c_void) {
  let payloads = LIVE_CAPSULES
    .try_with(|live| {
      let mut live = live.borrow_mut();
      live.env = ptr::null_mut();
      core::mem::take(&mut live.payloads)
    })
    .unwrap_or_default();
  for address in payloads {
    // SAFETY: listed payloads are alive: the finalizer unlists a payload before freeing it.
    unsafe { &*(address as *const CapsulePayload) }.release();
  }
}

/// The external's finalizer: runs on the JS thread when the capsule is collected.
unsafe extern "C" fn finalize_capsule(_env: sys::napi_env, data: *mut c_void, _hint: *mut c_void) {
  if data.is_null() {
    return;
  }
  let _ = LIVE_CAPSULES.try_with(|live| live.borrow_mut().payloads.remove(&(data as usize)));
  // SAFETY: `data` is the payload we boxed in `create_capsule`; the finalizer runs once.
  let payload = unsafe { Box::from_raw(data.cast::<CapsulePayload>()) };
  payload.release(); // never consumed: the deleter runs here, exactly once
}

/// `None` when the payload held no tensor (consumed); a misaligned tensor pointer is an error
/// after its deleter has run.
fn managed_from_raw(kind: u32, tensor: *mut c_void) -> Option<Result<ManagedTensor, DLPackError>> {
  let tensor = ptr::NonNull::new(tensor)?;
  let managed_ptr = match kind {
    KIND_VERSIONED => ManagedPtr::Versioned(tensor.cast()),
    KIND_LEGACY => ManagedPtr::Legacy(tensor.cast()),
    _ => return None,
  };
  // SAFETY: the pointer was taken out of a payload with one atomic exchange, so we are its
  // only owner, and `kind` says which struct it is.
  Some(unsafe { ManagedTensor::checked(managed_ptr) })
}

/// Wraps an owned tensor in a new capsule. On failure the tensor is dropped (its deleter runs)
/// and an error is returned: no path leaks it.
///
/// # Safety
/// `env` must be the current, live environment of the calling JS thread.
pub unsafe fn create_capsule(
  env: sys::napi_env,
  tensor: ManagedTensor,
) -> Result<sys::napi_value, DLPackError> {
  let payload = Box::into_raw(Box::new(CapsulePayload::new(tensor)));
  // SAFETY: valid env (caller); the finalizer unlists the payload before freeing it (also when
  // `wrap_payload` fails and calls it right away).
  unsafe { list_capsule(env, payload) };
  // SAFETY: a payload we just allocated, freed only by `finalize_capsule`.
  unsafe { wrap_payload(env, payload.cast(), finalize_capsule) }
}

/// Steps 2–5 of producing a capsule (`docs/protocol.md` §2.2) for an allocation the producer
/// made and filled: creates the external with `finalize`, stamps the tag, and on failure
/// leaves no tensor behind. If the external cannot be created, `finalize` is called right
/// away (it frees the allocation and releases the tensor, as it would at collection); if the
/// tag cannot be set, the tensor is released now and the finalizer frees the rest later.
///
/// # Safety
/// `env` must be the current, live environment of the calling JS thread. `data` must point at
/// an allocation that starts with a filled [`CapsulePayload`] (it may hold more behind it),
/// which `finalize` releases and frees; ownership of it passes to this call.
pub unsafe fn wrap_payload(
  env: sys::napi_env,
  data: *mut c_void,
  finalize: unsafe extern "C" fn(sys::napi_env, *mut c_void, *mut c_void),
) -> Result<sys::napi_value, DLPackError> {
  let mut external = ptr::null_mut();
  // SAFETY: valid env (caller); on success the finalizer owns `data`.
  let status =
    unsafe { sys::napi_create_external(env, data, Some(finalize), ptr::null_mut(), &mut external) };
  if status != sys::Status::napi_ok {
    // SAFETY: no external took `data`, so it is still ours to finalize, once.
    unsafe { finalize(env, data, ptr::null_mut()) };
    return Err(napi_error("napi_create_external", status));
  }
  // SAFETY: `external` is a live value of this env.
  let status = unsafe { sys::napi_type_tag_object(env, external, &CAPSULE_TAG) };
  if status != sys::Status::napi_ok {
    // The external exists and its finalizer will free the allocation later; take the tensor
    // out now so nobody can consume an untagged capsule's tensor, and release it here.
    // SAFETY: the payload stays alive until the finalizer, which cannot run during this call.
    unsafe { &*data.cast::<CapsulePayload>() }.release();
    return Err(napi_error("napi_type_tag_object", status));
  }
  Ok(external)
}

/// Exports `value` and wraps it in a capsule.
///
/// # Safety
/// `env` must be the current, live environment of the calling JS thread.
pub unsafe fn export_to_capsule<T: IntoDLPack>(
  env: sys::napi_env,
  value: T,
  format: ExportFormat,
) -> Result<sys::napi_value, DLPackError> {
  let managed = export(value, format)?;
  // SAFETY: forwarded contract.
  unsafe { create_capsule(env, managed) }
}

/// Returns the payload if `value` is a capsule: an external with the type tag and a non-NULL
/// data pointer, of any ABI version (`docs/protocol.md` §2.1). Anything else, a tagged external
/// with a NULL data pointer included, is `ERR_DLPACK_NOT_A_CAPSULE`. The payload lives as long
/// as the external does: at least until the current native call returns.
///
/// # Safety
/// `env` must be the current, live environment and `value` a live value of it.
pub unsafe fn payload_of(
  env: sys::napi_env,
  value: sys::napi_value,
) -> Result<*mut CapsulePayload, DLPackError> {
  let not_a_capsule = || DLPackError::new(ErrorKind::NotACapsule, "value is not a DLPack capsule");
  let mut data = ptr::null_mut();
  // SAFETY: caller contract. Asked first, instead of `napi_typeof`: anything but an external
  // answers `napi_invalid_arg` without throwing (one Node-API call less on the hot path), and
  // the tag check below must not see a primitive. The data is only used once the tag vouches
  // for it.
  let status = unsafe { sys::napi_get_value_external(env, value, &mut data) };
  if status == sys::Status::napi_invalid_arg {
    return Err(not_a_capsule());
  }
  if status != sys::Status::napi_ok {
    return Err(napi_error("napi_get_value_external", status));
  }
  let mut tagged = false;
  // SAFETY: caller contract; `value` is an external, which Node-API allows tags on.
  let status = unsafe { sys::napi_check_object_type_tag(env, value, &CAPSULE_TAG, &mut tagged) };
  if status != sys::Status::napi_ok {
    return Err(napi_error("napi_check_object_type_tag", status));
  }
  if !tagged {
    return Err(not_a_capsule());
  }
  if data.is_null() {
    // Tagged, but no payload: no producer makes one, and there is no `tensor` to read.
    return Err(not_a_capsule());
  }
  Ok(data.cast())
}

/// Whether `value` is a capsule (consumed or not, of any ABI version): what
/// `napi_dlpack_capsule_check` calls one.
///
/// # Safety
/// `env` must be the current, live environment and `value` a live value of it.
pub unsafe fn is_capsule(env: sys::napi_env, value: sys::napi_value) -> bool {
  // SAFETY: forwarded contract.
  unsafe { payload_of(env, value) }.is_ok()
}

/// Whether a capsule has been consumed. Errors if `value` is not a capsule, and with
/// `ERR_DLPACK_CAPSULE_ABI` (without reading `tensor`) if its payload is of another ABI
/// version or kind, as `napi_dlpack_capsule_is_consumed` in the header does.
///
/// # Safety
/// `env` must be the current, live environment and `value` a live value of it.
pub unsafe fn is_consumed(env: sys::napi_env, value: sys::napi_value) -> Result<bool, DLPackError> {
  // SAFETY: forwarded contract; the payload lives as long as the external.
  let payload = unsafe { &*payload_of(env, value)? };
  payload.check_abi()?;
  Ok(payload.is_consumed())
}

/// The device of a capsule's tensor, without consuming it (see
/// [`CapsulePayload::peek_device`]).
///
/// # Safety
/// `env` must be the current, live environment and `value` a live value of it (so this runs on
/// the capsule's JS thread).
pub unsafe fn peek_device(
  env: sys::napi_env,
  value: sys::napi_value,
) -> Result<Option<Device>, DLPackError> {
  // SAFETY: forwarded contract; the payload lives as long as the external.
  let payload = unsafe { &*payload_of(env, value)? };
  // SAFETY: on the capsule's JS thread (caller), while `value` keeps the external alive.
  unsafe { payload.peek_device() }
}

/// Takes ownership of the tensor in a capsule, without validating it. A second consume fails
/// with `ERR_DLPACK_CAPSULE_CONSUMED`; a payload of another ABI version is not touched.
///
/// # Safety
/// `env` must be the current, live environment and `value` a live value of it.
pub unsafe fn consume_capsule(
  env: sys::napi_env,
  value: sys::napi_value,
) -> Result<ManagedTensor, DLPackError> {
  // SAFETY: forwarded contract; the payload lives as long as the external, which `value`
  // keeps alive during this call.
  let payload = unsafe { &*payload_of(env, value)? };
  payload.take()
}

/// Consumes a capsule and validates the tensor. If validation fails the deleter has already
/// run when the error is returned.
///
/// # Safety
/// `env` must be the current, live environment and `value` a live value of it.
pub unsafe fn import_capsule(
  env: sys::napi_env,
  value: sys::napi_value,
) -> Result<ForeignTensor, DLPackError> {
  // SAFETY: forwarded contract.
  ForeignTensor::new(unsafe { consume_capsule(env, value)? })
}

/// Safe wrappers over the raw functions for napi-rs users.
pub mod env {
  use napi::bindgen_prelude::Unknown;
  use napi::{Env, JsValue};

  use super::*;

  /// Exports `value` into a new capsule (see [`super::export_to_capsule`]).
  pub fn export<'env, T: IntoDLPack>(
    env: &'env Env,
    value: T,
    format: ExportFormat,
  ) -> Result<Unknown<'env>, DLPackError> {
    // SAFETY: an `Env` reference is only available on its JS thread while it is live.
    let raw = unsafe { super::export_to_capsule(env.raw(), value, format)? };
    // SAFETY: `raw` is a live value of this env.
    Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), raw) })
  }

  /// Wraps an already exported tensor (for instance `ForeignTensor::into_managed()` to pass a
  /// received tensor on) in a new capsule (see [`super::create_capsule`]).
  pub fn export_managed<'env>(
    env: &'env Env,
    managed: ManagedTensor,
  ) -> Result<Unknown<'env>, DLPackError> {
    // SAFETY: an `Env` reference is only available on its JS thread while it is live.
    let raw = unsafe { super::create_capsule(env.raw(), managed)? };
    // SAFETY: `raw` is a live value of this env.
    Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), raw) })
  }

  /// Takes ownership of a capsule's tensor without validating it (see
  /// [`super::consume_capsule`]); for [`crate::take_owner`] or a custom validation.
  pub fn consume(env: &Env, value: &Unknown<'_>) -> Result<ManagedTensor, DLPackError> {
    // SAFETY: `value` belongs to `env`, on its JS thread.
    unsafe { super::consume_capsule(env.raw(), value.raw()) }
  }

  /// Whether a capsule has been consumed (errors if `value` is not a capsule).
  pub fn is_consumed(env: &Env, value: &Unknown<'_>) -> Result<bool, DLPackError> {
    // SAFETY: `value` belongs to `env`, on its JS thread.
    unsafe { super::is_consumed(env.raw(), value.raw()) }
  }

  /// Consumes and validates a capsule (see [`super::import_capsule`]).
  pub fn import(env: &Env, value: &Unknown<'_>) -> Result<ForeignTensor, DLPackError> {
    // SAFETY: `value` belongs to `env`, on its JS thread.
    unsafe { super::import_capsule(env.raw(), value.raw()) }
  }

  /// Whether `value` is a capsule.
  pub fn is_capsule(env: &Env, value: &Unknown<'_>) -> bool {
    // SAFETY: `value` belongs to `env`, on its JS thread.
    unsafe { super::is_capsule(env.raw(), value.raw()) }
  }
}
