//! Recognition: the one place that answers "which handle is behind this JS value"
//! ([`handle_of`]), and the capsules this addon makes, one of which may become a tensor handle.
//!
//! A handle is either a type-tagged `napi_external` holding a [`Handle`] (`handle`), or one of
//! our own capsules that this addon consumed and that now holds its tensor's handle.
//!
//! Every capsule we make starts with the ABI payload (`napi_dlpack_capsule`), which is all any
//! other consumer reads. Behind it sits one more slot: when this addon consumes its own capsule
//! (`fromDLPack(t.__dlpack__())`), the new tensor's native [`Handle`] is parked there and the
//! capsule object itself serves as the tensor's handle. A round trip then creates one
//! finalizable external (the capsule) instead of two, which is most of its cost.
//!
//! A capsule is recognised as ours by the export inside it: [`ExportOwner::capsule`] holds a
//! `Weak` to the allocation, so while the owner is alive no other payload can have that address.
//! A capsule used as a handle is recognised by [`handle_of`], through a per-thread set of the
//! adopted payload addresses (values never cross JS threads, and each set entry lives exactly as
//! long as its capsule).

use std::cell::{RefCell, UnsafeCell};
use std::ffi::c_void;
use std::ptr;
use std::sync::{Arc, Weak};

use napi::bindgen_prelude::Unknown;
use napi::{sys, Env, JsValue};
use napi_dlpack::capsule::{wrap_payload, CapsulePayload, CAPSULE_TAG};
use napi_dlpack::{export, ErrorKind, ExportFormat, IntoDLPack, ManagedTensor, TensorInfo};

use crate::errors::{fail, Result};
use crate::handle::{is_own_handle, Handle, HANDLE_TAG};
use crate::js_memory::{self, AddressSet};
use crate::layout::TensorLayout;
use crate::storage::{Memory, Storage};

/// A DLPack export of (part of) a storage. Holding the Arc keeps the memory alive until the
/// consumer calls the deleter, wherever that happens.
pub struct ExportOwner {
  /// Dropping this (in the consumer's deleter) releases our hold on the memory.
  pub storage: Arc<Storage>,
  pub layout: Arc<TensorLayout>,
  /// What the exported `DLTensor` says (`data`, shape, strides, flags).
  pub info: TensorInfo,
  /// The capsule this export was first wrapped in, if we made one: lets an import recognise
  /// that capsule coming straight back ([`is_own`]). Weak, so it keeps only the allocation
  /// (and with it the uniqueness of its address), not the capsule.
  pub capsule: Weak<OwnCapsule>,
}

// SAFETY: `info` describes memory inside `storage`, which this owner keeps alive and which
// never moves (ArrayBuffer backing stores, foreign memory and device allocations are fixed,
// the Vec is not resized). Writes by other holders are the user's to synchronise, as
// documented; device memory is handed to the consumer's stream by the export operation.
unsafe impl IntoDLPack for ExportOwner {
  fn tensor_info(&mut self) -> TensorInfo {
    self.info.clone()
  }
}

impl ExportOwner {
  /// Describes `layout` over `storage` for export.
  pub fn new(storage: Arc<Storage>, layout: Arc<TensorLayout>) -> ExportOwner {
    let (data, byte_offset) = storage.export_address(&layout);
    let info = TensorInfo::strided(data, layout.dtype, &layout.shape, &layout.strides)
      .byte_offset(byte_offset)
      .device(layout.device)
      .read_only(layout.read_only)
      .copied(layout.copied && matches!(storage.memory(), Memory::Owned(_)));
    ExportOwner {
      storage,
      layout,
      info,
      capsule: Weak::new(),
    }
  }
}

/// Our capsule payload: the ABI struct first (other consumers read only that), then the slot
/// for the handle of the tensor this addon made from the capsule.
#[repr(C)]
pub struct OwnCapsule {
  payload: CapsulePayload,
  /// The adopted handle, if any. Only touched on the JS thread that owns the capsule (`adopt`,
  /// `handle_of_external`, and the finalizer, which drops it with the cell).
  adopted: UnsafeCell<Option<Handle>>,
}

// SAFETY: the ABI payload is atomic. `adopted` is only accessed on the JS thread that owns the
// capsule external (see the field); other threads only ever hold a `Weak` to the cell (inside
// an `ExportOwner`, dropped by whichever thread runs the deleter), which they compare by
// address and never upgrade, and dropping a Weak frees at most the allocation, never the value.
unsafe impl Send for OwnCapsule {}
// SAFETY: as above.
unsafe impl Sync for OwnCapsule {}

const _: () = assert!(std::mem::offset_of!(OwnCapsule, payload) == 0);

thread_local! {
  /// Addresses of this thread's adopted capsules (their payloads), for `handle_of_external`.
  static ADOPTED: RefCell<AddressSet> = RefCell::new(AddressSet::default());
}

/// Exports `owner` in `format` into a new capsule. `before_wrap` runs after the export and
/// before the capsule exists (the CUDA stream hand-off); if it fails, the export is released.
///
/// # Safety
/// `env` must be the current, live environment of the calling JS thread.
pub unsafe fn wrap_in_own_capsule(
  env: sys::napi_env,
  mut owner: ExportOwner,
  format: ExportFormat,
  before_wrap: impl FnOnce() -> Result<()>,
) -> Result<sys::napi_value> {
  let cell = Arc::new(OwnCapsule {
    payload: CapsulePayload::empty(CapsulePayload::kind_for(format)),
    adopted: UnsafeCell::new(None),
  });
  owner.capsule = Arc::downgrade(&cell);
  let managed: ManagedTensor = export(owner, format)?;
  before_wrap()?; // on error `managed` drops here: the deleter releases the export
  if cell.payload.fill(managed).is_err() {
    // Unreachable: the payload is empty and of the export's kind. The tensor was dropped.
    return Err(fail(ErrorKind::Napi, "capsule payload refused its tensor"));
  }
  let data = Arc::into_raw(cell).cast_mut().cast::<c_void>();
  // SAFETY: valid env (caller); `free_capsule(data)` is valid once. On error it has run.
  unsafe { js_memory::track_external(env, data, free_capsule)? };
  // SAFETY: valid env (caller); `data` starts with the filled payload, and `finalize_tracked`
  // releases and frees it through `free_capsule` (unless env teardown already did).
  Ok(unsafe { wrap_payload(env, data, js_memory::finalize_tracked) }?)
}

/// Whether `payload` (taken from a capsule just consumed) is the one `owner` was wrapped in.
pub fn is_own(owner: &ExportOwner, payload: *const CapsulePayload) -> bool {
  // `Weak::as_ptr` of an empty Weak is a sentinel no payload can have; a live Weak pins the
  // allocation, so equal addresses mean the very same capsule.
  ptr::eq(owner.capsule.as_ptr().cast::<CapsulePayload>(), payload)
}

/// Parks `handle` in our capsule `value` (whose payload was just consumed, see [`is_own`]) so
/// that the capsule serves as the handle from now on. Returns `value`.
///
/// # Safety
/// `env` must be the current environment, `value` a live capsule of it whose payload is an
/// [`OwnCapsule`] (established by [`is_own`]).
pub unsafe fn adopt(
  value: sys::napi_value,
  payload: *const CapsulePayload,
  handle: Handle,
) -> sys::napi_value {
  let cell = payload.cast::<OwnCapsule>();
  // SAFETY: caller contract: a live OwnCapsule of this thread. Its payload was consumed by this
  // very call and a consume succeeds once, so the slot is empty and nobody borrows it.
  let slot = unsafe { &mut *(*cell).adopted.get() };
  debug_assert!(slot.is_none());
  *slot = Some(handle);
  ADOPTED.with(|set| set.borrow_mut().insert(cell as usize));
  value
}

/// The [`Handle`] behind a JS value: a handle external of ours, or one of this thread's adopted
/// capsules. `ERR_DLPACK_INVALID_ARGUMENT` for anything else.
///
/// The borrow ends with the native call that asked (the value may be collected after it): JS is
/// single-threaded, and each call takes at most one borrow of a handle and returns before the
/// next call starts.
pub(crate) fn handle_of<'a>(env: &Env, value: &Unknown<'_>) -> Result<&'a mut Handle> {
  // SAFETY: a live value of this env.
  if !unsafe { js_memory::is_external(env.raw(), value.raw())? } {
    return Err(not_a_handle());
  }
  // SAFETY: a live external of this env.
  unsafe { handle_of_external(env.raw(), value.raw()) }
}

/// [`handle_of`] for a value already known to be an external.
///
/// # Safety
/// `env` must be the live environment of the calling thread and `value` an external of it; the
/// returned borrow must end before control returns to JS.
#[inline(always)]
pub(crate) unsafe fn handle_of_external<'a>(
  env: sys::napi_env,
  value: sys::napi_value,
) -> Result<&'a mut Handle> {
  // SAFETY: forwarded contract.
  if let Some(data) = unsafe { js_memory::tagged_data(env, value, &HANDLE_TAG)? } {
    // The tag is public (the exchange's object tag): another producer's per-object data is
    // refused (NULL refused first).
    // SAFETY: the data of an OBJECT_TAG external.
    if data.is_null() || !unsafe { is_own_handle(data) } {
      return Err(not_a_handle());
    }
    // SAFETY: tagged externals of ours always hold a live `Handle` (freed only by the
    // finalizer, which cannot run while `value` is reachable); no other borrow of it is alive
    // (forwarded contract).
    return Ok(unsafe { &mut *data.cast::<Handle>() });
  }
  // One of our capsules that came back and now serves as its tensor's handle.
  // SAFETY: forwarded contract.
  let Some(data) = (unsafe { js_memory::tagged_data(env, value, &CAPSULE_TAG)? }) else {
    return Err(not_a_handle());
  };
  let adopted = ADOPTED
    .try_with(|set| set.borrow().contains(&(data as usize)))
    .unwrap_or(false);
  if !adopted {
    return Err(not_a_handle());
  }
  // SAFETY: the address is in the set, so it is a live OwnCapsule of this thread with an
  // adopted handle (entries leave the set in the finalizer, before the cell is dropped). No
  // other borrow of the handle is alive (forwarded contract).
  unsafe { (*(*data.cast::<OwnCapsule>()).adopted.get()).as_mut() }.ok_or_else(not_a_handle)
}

#[cold]
fn not_a_handle() -> crate::errors::Error {
  fail(
    ErrorKind::InvalidArgument,
    "expected a napi-dlpack tensor handle",
  )
}

/// Frees a capsule (JS thread), from its finalizer or at env teardown, whichever comes first
/// (see `js_memory::track_external`): drops an adopted handle, releases an unconsumed tensor (its
/// deleter runs here, exactly once), then lets go of the cell.
unsafe fn free_capsule(data: *mut c_void) {
  if data.is_null() {
    return;
  }
  // SAFETY: `data` is the Arc leaked in `wrap_in_own_capsule`; `track_external` calls this once.
  let cell = unsafe { Arc::from_raw(data.cast::<OwnCapsule>()) };
  let _ = ADOPTED.try_with(|set| set.borrow_mut().remove(&(data as usize)));
  cell.payload.release();
  // Dropping the cell (the last strong reference) drops an adopted handle, here on the JS
  // thread; an ExportOwner's Weak may keep the bare allocation a while longer.
  drop(cell);
}
