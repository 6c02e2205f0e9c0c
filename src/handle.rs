//! The native tensor handle behind the JS `Tensor` class: a shared [`Storage`] plus the
//! [`TensorLayout`] of one tensor over it, owned by a type-tagged `napi_external` (or, after a
//! round trip, by one of our own capsules: see `own_capsule`). Several JS tensors may share one
//! handle (`fromDLPack(tensor)` needs no capsule at all). Everything here runs on the JS thread
//! of the environment that created the handle.

use std::cell::RefCell;
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::Unknown;
use napi::{sys, Env};
use napi_dlpack::exchange::{ExchangeApiHeader, ExchangeObject};
use napi_dlpack::ErrorKind;

use crate::errors::{fail, Result};
use crate::js_memory::{self, BufferRef};
use crate::layout::TensorLayout;
use crate::storage::Storage;

/// Type tag of handle externals: the exchange table's public object tag (a consumer finding a
/// handle under a tensor's exchange property borrows it directly, see `exchange`). Other
/// producers' per-object externals carry it too: ours are told apart by the table their
/// header names ([`is_own_handle`]).
pub(crate) const HANDLE_TAG: sys::napi_type_tag = napi_dlpack::exchange::OBJECT_TAG;

/// The header of this addon's exchange table (`exchange::EXCHANGE_API`), which every handle
/// starts with. Set once when the module loads (`exchange::register_table`, called from the
/// module's exports hook, before any handle can exist); a lower layer cannot name the table
/// itself, whose functions use every layer.
static EXCHANGE_TABLE: AtomicPtr<ExchangeApiHeader> = AtomicPtr::new(ptr::null_mut());

/// Records the table header handles name (see [`EXCHANGE_TABLE`]).
pub(crate) fn set_exchange_table(header: &'static ExchangeApiHeader) {
  EXCHANGE_TABLE.store(ptr::from_ref(header).cast_mut(), Ordering::Release);
}

/// Whether the data of an `OBJECT_TAG` external is one of this addon's handles: its header
/// names this copy's table (other producers', and other copies of napi-dlpack's, name theirs).
///
/// # Safety
/// `data` must be the non-NULL data of an external tagged with `OBJECT_TAG` (so it starts with
/// an `ExchangeObject`).
pub(crate) unsafe fn is_own_handle(data: *const std::ffi::c_void) -> bool {
  let ours = EXCHANGE_TABLE.load(Ordering::Acquire);
  // SAFETY: caller contract.
  !ours.is_null() && ptr::eq(unsafe { (*data.cast::<ExchangeObject>()).api }, ours)
}

/// What a handle external points to. `repr(C)`: it starts with the exchange table's object
/// header (the external carries the public object tag, see `exchange`).
#[repr(C)]
pub struct Handle {
  exchange: ExchangeObject,
  /// `None` once released (`dispose()`).
  pub(crate) storage: Option<Arc<Storage>>,
  pub(crate) layout: Arc<TensorLayout>,
  /// What an exchange-table borrow holds on to (`exchange::dltensor_from_value`): made on the
  /// first borrow, then shared by every later one (one atomic increment each, no allocation).
  /// Emptied with `storage` by `dispose()`; borrows in progress keep their own count.
  pub(crate) borrow_pin: Option<Arc<BorrowPin>>,
  /// A cached zero-copy view (external ArrayBuffer) of foreign memory, so a storage is wrapped
  /// by at most one ArrayBuffer per handle, and the slot through which that ArrayBuffer keeps
  /// the storage alive (emptied by `dispose()`).
  pub(crate) view: RefCell<Option<(BufferRef, ViewSlot)>>,
}

/// The storage and layout a borrowed `DLTensor` points into (data; shape and strides), kept
/// alive together by one token (`Arc::into_raw`) until the borrower releases it.
pub(crate) struct BorrowPin {
  pub(crate) storage: Arc<Storage>,
  pub(crate) layout: Arc<TensorLayout>,
}

/// What an external ArrayBuffer view holds on to. `dispose()` detaches the ArrayBuffer and
/// empties the slot, so the memory is released now rather than at the next GC.
pub(crate) type ViewSlot = Arc<Mutex<Option<Arc<Storage>>>>;

impl Handle {
  pub fn new(storage: Arc<Storage>, layout: Arc<TensorLayout>) -> Handle {
    Handle {
      exchange: ExchangeObject {
        api: EXCHANGE_TABLE.load(Ordering::Acquire),
      },
      storage: Some(storage),
      layout,
      borrow_pin: None,
      view: RefCell::new(None),
    }
  }

  /// The storage, or `ERR_TENSOR_DISPOSED` after `dispose()`.
  pub fn storage(&self) -> Result<&Arc<Storage>> {
    self
      .storage
      .as_ref()
      .ok_or_else(|| fail(ErrorKind::Disposed, "the tensor has been disposed"))
  }

  /// Releases the storage now (`dispose()`): detaches the cached view, so that it cannot
  /// outlive the release, and drops the borrow pin. Whether the storage was still held.
  pub fn release(&mut self, env: &Env) -> Result<bool> {
    if let Some((view, slot)) = self.view.borrow_mut().take() {
      // SAFETY: our env, on its thread.
      let value = unsafe { view.value(env.raw())? };
      // A view that another tensor exported (`Tensor.from(t.data).__dlpack__()`) is left as
      // it is, attached and holding the memory through its slot until it is collected: that
      // export points into it, and releasing it here would free the memory under the export
      // (and detaching it aborts on Node 24, whose detach key no Node-API call can pass).
      // SAFETY: a live external ArrayBuffer of this env.
      if !unsafe { js_memory::was_exported(env.raw(), value) } {
        // SAFETY: as above: views of it become empty.
        unsafe { js_memory::detach(env.raw(), value)? };
        if let Ok(mut slot) = slot.lock() {
          slot.take();
        }
      }
    }
    self.borrow_pin = None;
    Ok(self.storage.take().is_some())
  }
}

/// A new handle external over `storage` with `layout`.
pub(crate) fn new_handle<'env>(
  env: &'env Env,
  storage: Arc<Storage>,
  layout: TensorLayout,
) -> Result<Unknown<'env>> {
  let handle = Handle::new(storage, Arc::new(layout));
  // SAFETY: our env, on its thread.
  let value = unsafe { js_memory::tagged_external(env.raw(), handle, &HANDLE_TAG)? };
  // SAFETY: live value of this env.
  Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), value) })
}
