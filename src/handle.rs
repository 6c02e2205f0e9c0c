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
use napi_dlpack::exchange::{BorrowExtent, ExchangeApiHeader, ExchangeObject};
use napi_dlpack::ffi::{
  DLTensor, DLPACK_FLAG_BITMASK_IS_COPIED, DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED,
  DLPACK_FLAG_BITMASK_READ_ONLY,
};
use napi_dlpack::ErrorKind;

use crate::errors::{fail, Result};
use crate::js_memory::{self, BufferRef};
use crate::layout::TensorLayout;
use crate::slots::Prepared;
use crate::storage::{Memory, Storage};

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
  /// The slot behind this handle's id (`Tensor#id`, `Tensor#native`): index and id, taken the
  /// first time JS asks for the id (`slots`), let go with the storage.
  slot: Option<(u32, u64)>,
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
      slot: None,
    }
  }

  /// This handle's id (see `slots`): takes a slot the first time, describing and validating the
  /// tensor once there. `ERR_TENSOR_DISPOSED` after `dispose()`.
  pub fn id(&mut self, env: &Env) -> Result<u64> {
    if let Some((_, id)) = self.slot {
      return Ok(id);
    }
    let storage = self.storage()?.clone();
    // The slot's own pin: `borrow_pin` is made by the first borrow of the handle object, which
    // also marks the memory untransferable; the slot's first borrow does that on its own.
    let pin = Arc::new(BorrowPin {
      storage,
      layout: self.layout.clone(),
    });
    let (tensor, flags) = describe(&pin);
    // SAFETY: shape and strides point into `pin`'s layout, alive here.
    let checked =
      unsafe { napi_dlpack::validation::validate(&tensor, flags) }.map_err(|error| {
        fail(
          error.kind(),
          format!("a tensor handle id could not be made: {}", error.message()),
        )
      })?;
    let extent = BorrowExtent {
      numel: checked.numel() as i64,
      itemsize: checked.dtype().itemsize() as i64,
      min_offset: checked.min_offset(),
      max_offset: checked.max_offset(),
      span_bytes: checked.span_bytes() as u64,
      c_contiguous: i32::from(checked.is_c_contiguous()),
    };
    let (marked, check_detach) = match pin.storage.memory() {
      // JS memory is marked untransferable by its first borrow (as by any export); after
      // that, it is checked for a detach on every borrow only where the runtime can still
      // detach a marked buffer, and only if it is an ArrayBuffer (SharedArrayBuffers never
      // are).
      Memory::Js { .. } => (
        pin.storage.is_marked(),
        (crate::slots::marked_buffers_detachable() || pin.storage.mark_left_to_runtime())
          && pin.storage.can_be_detached(env)?,
      ),
      _ => (true, false),
    };
    let prepared = Prepared {
      tensor,
      flags,
      extent,
    };
    let Some((index, id)) = crate::slots::allocate(pin, prepared, marked, check_detach) else {
      return Err(fail(
        ErrorKind::NoMemory,
        "no tensor handle id is left in this process (2^24 live ids)",
      ));
    };
    self.slot = Some((index, id));
    Ok(id)
  }

  /// Lets go of the id's slot: the id is refused from now on (the slot itself is freed once no
  /// borrow holds it).
  fn release_slot(&mut self) {
    if let Some((index, _)) = self.slot.take() {
      crate::slots::release(index);
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
    self.release_slot();
    Ok(self.storage.take().is_some())
  }
}

impl Drop for Handle {
  fn drop(&mut self) {
    // Collected (its external's finalizer), or its environment ended.
    self.release_slot();
  }
}

/// The `DLTensor` and DLPack flags a borrow of `pin` hands out (by handle object or by id): `data`
/// and `byte_offset` as every export gives them, shape and strides pointing into `pin`'s layout.
pub(crate) fn describe(pin: &BorrowPin) -> (DLTensor, u64) {
  let (storage, layout) = (&pin.storage, &pin.layout);
  let (data, byte_offset) = storage.export_address(layout);
  let flags = if layout.read_only {
    DLPACK_FLAG_BITMASK_READ_ONLY
  } else {
    0
  } | if layout.copied && matches!(storage.memory(), Memory::Owned(_)) {
    DLPACK_FLAG_BITMASK_IS_COPIED
  } else {
    0
  } | if layout.dtype.is_subbyte() {
    // Our sub-byte tensors (float4, float6) hold one element per byte: without the flag a
    // `bits < 8` dtype means packed elements (DLPack), which the memory is not. Capsules and
    // owning exports say the same (`ExportInfo::flags`).
    DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED
  } else {
    0
  };
  let tensor = DLTensor {
    data,
    device: layout.device.to_dl(),
    ndim: layout.shape.len() as i32,
    dtype: layout.dtype.to_dl(),
    shape: layout.shape.as_ptr().cast_mut(),
    strides: layout.strides.as_ptr().cast_mut(),
    byte_offset,
  };
  (tensor, flags)
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
