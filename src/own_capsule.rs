//! The capsules this addon makes, and how one of them becomes a tensor handle.
//!
//! Every capsule we make starts with the ABI payload (`napi_dlpack_capsule`), which is all any
//! other consumer reads. Behind it sits one more slot: when this addon consumes its own capsule
//! (`fromDLPack(t.__dlpack__())`), the new tensor's native [`Handle`] is parked there and the
//! capsule object itself serves as the tensor's handle. A round trip then creates one
//! finalizable external (the capsule) instead of two, which is most of its cost.
//!
//! A capsule is recognised as ours by the export inside it: [`ExportOwner::capsule`] holds a
//! `Weak` to the allocation, so while the owner is alive no other payload can have that address.
//! A capsule used as a handle is recognised by [`handle_in`], through a per-thread set of the
//! adopted payload addresses (values never cross JS threads, and each set entry lives exactly as
//! long as its capsule).

use std::cell::{RefCell, UnsafeCell};
use std::ffi::c_void;
use std::ptr;
use std::sync::Arc;

use napi::sys;
use napi_dlpack::capsule::{wrap_payload, CapsulePayload, CAPSULE_TAG};
use napi_dlpack::{export, DLPackError, ErrorKind, ExportFormat, ManagedTensor};

use crate::js_memory::{self, AddressSet};
use crate::storage::ExportOwner;
use crate::tensor::Handle;

/// Our capsule payload: the ABI struct first (other consumers read only that), then the slot
/// for the handle of the tensor this addon made from the capsule.
#[repr(C)]
pub struct OwnCapsule {
  payload: CapsulePayload,
  /// The adopted handle, if any. Only touched on the JS thread that owns the capsule (`adopt`,
  /// `handle_in`, and the finalizer, which drops it with the cell).
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
  /// Addresses of this thread's adopted capsules (their payloads), for `handle_in`.
  static ADOPTED: RefCell<AddressSet> = RefCell::new(AddressSet::default());
}

/// Exports `owner` in `format` into a new capsule. `before_wrap` runs after the export and
/// before the capsule exists (the CUDA stream hand-off); if it fails, the export is released.
///
/// # Safety
/// `env` must be the current, live environment of the calling JS thread.
pub unsafe fn export_to_capsule(
  env: sys::napi_env,
  mut owner: ExportOwner,
  format: ExportFormat,
  before_wrap: impl FnOnce() -> Result<(), DLPackError>,
) -> Result<sys::napi_value, DLPackError> {
  let cell = Arc::new(OwnCapsule {
    payload: CapsulePayload::empty(CapsulePayload::kind_for(format)),
    adopted: UnsafeCell::new(None),
  });
  owner.capsule = Arc::downgrade(&cell);
  let managed: ManagedTensor = export(owner, format)?;
  before_wrap()?; // on error `managed` drops here: the deleter releases the export
  if cell.payload.fill(managed).is_err() {
    // Unreachable: the payload is empty and of the export's kind. The tensor was dropped.
    return Err(DLPackError::new(
      ErrorKind::Napi,
      "capsule payload refused its tensor",
    ));
  }
  let data = Arc::into_raw(cell).cast_mut().cast::<c_void>();
  // SAFETY: valid env (caller); `free_capsule(data)` is valid once. On error it has run.
  unsafe { js_memory::track_external(env, data, free_capsule)? };
  // SAFETY: valid env (caller); `data` starts with the filled payload, and `finalize_tracked`
  // releases and frees it through `free_capsule` (unless env teardown already did).
  unsafe { wrap_payload(env, data, js_memory::finalize_tracked) }
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

/// The handle parked in `value`, if it is one of this thread's adopted capsules.
///
/// # Safety
/// `env` must be the current environment and `value` a live external of it. The returned
/// borrow must end before control returns to JS (the capsule may be collected after that).
pub unsafe fn handle_in<'a>(env: sys::napi_env, value: sys::napi_value) -> Option<&'a mut Handle> {
  let mut tagged = false;
  // SAFETY: caller contract.
  let status = unsafe { sys::napi_check_object_type_tag(env, value, &CAPSULE_TAG, &mut tagged) };
  if status != sys::Status::napi_ok || !tagged {
    return None;
  }
  let mut data = ptr::null_mut();
  // SAFETY: caller contract; `value` is an external.
  let status = unsafe { sys::napi_get_value_external(env, value, &mut data) };
  if status != sys::Status::napi_ok {
    return None;
  }
  let known = ADOPTED
    .try_with(|set| set.borrow().contains(&(data as usize)))
    .unwrap_or(false);
  if !known {
    return None;
  }
  // SAFETY: the address is in the set, so it is a live OwnCapsule of this thread with an
  // adopted handle (entries leave the set in the finalizer, before the cell is dropped). JS is
  // single-threaded and each native call holds at most one borrow of a handle.
  unsafe { (*(*data.cast::<OwnCapsule>()).adopted.get()).as_mut() }
}

/// Frees a capsule (JS thread), from its finalizer or at env teardown, whichever comes first
/// (see `js_memory::track_external`): drops an adopted handle, releases an unconsumed tensor (its
/// deleter runs here, exactly once), then lets go of the cell.
unsafe fn free_capsule(data: *mut c_void) {
  if data.is_null() {
    return;
  }
  // SAFETY: `data` is the Arc leaked in `export_to_capsule`; `track_external` calls this once.
  let cell = unsafe { Arc::from_raw(data.cast::<OwnCapsule>()) };
  let _ = ADOPTED.try_with(|set| set.borrow_mut().remove(&(data as usize)));
  cell.payload.release();
  // Dropping the cell (the last strong reference) drops an adopted handle, here on the JS
  // thread; an ExportOwner's Weak may keep the bare allocation a while longer.
  drop(cell);
}
