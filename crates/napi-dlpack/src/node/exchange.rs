//! The exchange table (`include/napi_dlpack.h` part 3, `docs/protocol.md` §5): the Node
//! counterpart of DLPack 1.3's `DLPackExchangeAPI`.
//!
//! A producer (napi-dlpack's `Tensor`, or any addon's own tensor class) makes a process-lifetime
//! C function table reachable from its objects through one property, keyed by the registered
//! symbol `Symbol.for(EXCHANGE_API_PROPERTY)` ([`EXCHANGE_API_PROPERTY`]), whose value is a
//! `napi_external` of one of two kinds:
//!
//! - stamped with [`EXCHANGE_API_TAG`]: the table itself, usually on the prototype of the
//!   producer's objects;
//! - stamped with [`OBJECT_TAG`] (the fast path): the object's own data, which starts with an
//!   [`ExchangeObject`] naming the table, usually an own property of each object. The consumer
//!   passes that pointer back to the table's `dltensor_from_object`, so the producer need not
//!   look anything up again: one property lookup per borrowed argument, in all.
//!
//! A consumer given a JS value checks the tag and the table's major version, and then calls the
//! table: to
//! borrow the tensor into a caller-provided `DLTensor` for the duration of a native call (no
//! allocation, no capsule, no finalizer), to get an owning `DLManagedTensorVersioned*`, to turn
//! an owning tensor into one of the producer's JS objects, or to ask for the producer's current
//! work stream. Nothing here links against the producer.
//!
//! The table functions return 0 on success and -1 on failure with a JS exception pending (an
//! `Error` with a stable `code`), as DLPack's return -1 with a Python exception set.

use core::ffi::c_void;
use core::ptr;
use std::thread::LocalKey;

use napi::sys;

use super::id_slots::IdSlots;
use crate::error::{DLPackError, ErrorKind};
use crate::ffi::{DLManagedTensorVersioned, DLPackVersion, DLTensor};

/// `NAPI_DLPACK_EXCHANGE_API_MAJOR`: the table layout this crate reads and writes. A consumer
/// uses a table whose major equals this (walking `prev_api` if needed); minors only append.
pub const EXCHANGE_API_MAJOR: u32 = 1;
/// `NAPI_DLPACK_EXCHANGE_API_MINOR`.
/// Minor 1 appended `dltensor_from_object` (the per-object fast path); minor 2 appended
/// `borrow_id` (borrow by handle id, [`BorrowId`]); minor 3 appended `id_slots` (the slot table
/// behind handle ids, for inline borrows: [`crate::id_slots`]).
pub const EXCHANGE_API_MINOR: u32 = 3;
/// `NAPI_DLPACK_EXCHANGE_API_PROPERTY`: the registry key of the symbol `Symbol.for(...)` under
/// which producers put the table (on their prototype; on `globalThis` for the process's
/// default importer, see [`global_api`]) or their per-object external. A registered symbol,
/// not a string: a consumer keeps it in a reference (Node-API 9 references symbols, not
/// strings) and pays one property lookup per object, where a string key costs as much again to
/// make or fetch on every call.
pub const EXCHANGE_API_PROPERTY: &str = "__dlpack_napi_exchange_api__";
/// `NAPI_DLPACK_EXCHANGE_API_TAG_LOWER/UPPER`: the tag on the external holding the table.
pub const EXCHANGE_API_TAG: sys::napi_type_tag = sys::napi_type_tag {
  lower: 0x3f0d_9a51_c4e2_4b87,
  upper: 0xa6b1_52e8_7d09_4c3e,
};

/// `NAPI_DLPACK_OBJECT_TAG_LOWER/UPPER`: the public type tag of an external found under
/// [`EXCHANGE_API_PROPERTY`] whose data starts with an [`ExchangeObject`] (version 1 of that
/// layout: a new layout gets a new tag).
pub const OBJECT_TAG: sys::napi_type_tag = sys::napi_type_tag {
  lower: 0x7c2e_4b19_a05d_43f6,
  upper: 0xd18a_3f60_92b4_4e7d,
};

/// `napi_dlpack_object`: what the data of an [`OBJECT_TAG`] external starts with (the start of
/// the producer's own per-object data, alive as long as the external is). A producer removes
/// the object's own property when the object stops lending (a `dispose()`): consumers then find
/// the prototype's table, whose `dltensor_from_value` reports the disposed object.
#[repr(C)]
#[derive(Debug)]
pub struct ExchangeObject {
  /// The producer's table (a process-lifetime header, as behind [`EXCHANGE_API_TAG`]).
  pub api: *const ExchangeApiHeader,
}

impl ExchangeObject {
  /// The header of a producer object lending through `api`.
  pub const fn new(api: &'static ExchangeApi) -> ExchangeObject {
    ExchangeObject { api: &api.header }
  }
}

// SAFETY: it only points to a process-lifetime, immutable table.
unsafe impl Send for ExchangeObject {}
// SAFETY: as above.
unsafe impl Sync for ExchangeObject {}

/// How many tables of a chain [`ExchangeApi::select`] looks at, at most: the first and up to 15
/// older ones behind it (`NAPI_DLPACK_EXCHANGE_MAX_TABLES` in the header; protocol §5.1).
pub const EXCHANGE_MAX_TABLES: usize = 16;

/// `napi_dlpack_exchange_api_header`: the version of the table and the next older table the
/// producer also offers (NULL for none), as in DLPack's `DLPackExchangeAPIHeader`.
#[repr(C)]
#[derive(Debug)]
pub struct ExchangeApiHeader {
  pub version: DLPackVersion,
  pub prev_api: *const ExchangeApiHeader,
}

/// Fills `out` with a tensor borrowed from `value`, `*out_flags` with its DLPack flags
/// (`READ_ONLY`, `IS_COPIED`; a bare `DLTensor` cannot carry them) and `*out_keep_alive` with
/// a token (possibly NULL). Everything `out` points to stays valid until the token is passed to
/// the table's [`ReleaseBorrow`], whatever JS runs meanwhile (a `dispose()`, a GC). No
/// allocation per call, no stream sync.
pub type DLTensorFromValue = unsafe extern "C" fn(
  sys::napi_env,
  sys::napi_value,
  *mut DLTensor,
  *mut u64,
  *mut *mut c_void,
) -> i32;
/// Ends a borrow: called exactly once per successful [`DLTensorFromValue`] with its token, on
/// the env's JS thread while the env is alive.
pub type ReleaseBorrow = unsafe extern "C" fn(sys::napi_env, *mut c_void);
/// [`DLTensorFromValue`] for an object whose property held an [`OBJECT_TAG`] external: `object`
/// is that external's data (an [`ExchangeObject`] whose `api` is this table), so the producer
/// need not look its data up again. Same contract otherwise (table minor >= 1).
pub type DLTensorFromObject = unsafe extern "C" fn(
  sys::napi_env,
  sys::napi_value,
  *mut c_void,
  *mut DLTensor,
  *mut u64,
  *mut *mut c_void,
) -> i32;
/// `napi_dlpack_extent`: where a borrowed tensor's elements are, as
/// `napi_dlpack_tensor_extent` computes it (element count, item size, lowest and highest
/// element offsets in elements, byte span, row-major contiguity).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BorrowExtent {
  pub numel: i64,
  pub itemsize: i64,
  pub min_offset: i64,
  pub max_offset: i64,
  pub span_bytes: u64,
  pub c_contiguous: core::ffi::c_int,
}

/// `napi_dlpack_lent_tensor`: what a borrow by handle id lends ([`BorrowId`]): the producer's
/// own record of the tensor, prepared and validated when it made the id, which the consumer
/// reads in place (nothing is copied per borrow) and never writes. `tensor` is described as by
/// [`DLTensorFromValue`] (strides non-NULL for `ndim > 0`), `flags` are its DLPack flags,
/// `extent` where its elements are (the producer guarantees it agrees with `tensor`, so the
/// consumer need not validate again), and `keep_alive` the token that ends the borrow
/// ([`ReleaseBorrow`]). The record, and everything it points to, stays valid and unchanged
/// until that token is released.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct LentTensor {
  pub tensor: DLTensor,
  pub flags: u64,
  pub extent: BorrowExtent,
  pub keep_alive: *mut c_void,
}

/// Borrow by handle id (table minor >= 2): the tensor a producer's handle id names (an exact
/// integer below 2^53 its JS side handed out, e.g. napi-dlpack's `Tensor#id`, or the id carried
/// by one of its id externals, `Tensor#native`: see [`handle_id_of_external`]). Returns the
/// producer's [`LentTensor`] record of it, pinned until the consumer passes the record's
/// `keep_alive` to the table's [`ReleaseBorrow`], exactly once. An id that is not a live
/// handle of this thread is refused (NULL, with a coded exception pending; napi-dlpack:
/// `ERR_TENSOR_STALE_ID`) and nothing it names is read. One call, one pointer back: a borrow
/// by id copies nothing, which is what makes it the hot path (`docs/protocol.md` §5.6).
pub type BorrowId = unsafe extern "C" fn(sys::napi_env, u64) -> *const LentTensor;

/// `NAPI_DLPACK_HANDLE_ID_EXTERNAL_MARK`: the top 11 bits of the value of an id external (a
/// `napi_external` whose data is not a pointer but `mark | id`). No user-space address on a
/// 64-bit platform has any of them set, so another addon's external is taken for an id only if
/// it, too, stores such a non-pointer value (and then the producer still refuses every id that
/// is not a live handle of this thread, barring a generation collision).
pub const HANDLE_ID_EXTERNAL_MARK: u64 = 0x6d5 << 53;
/// The bits of an id external's value above the id.
pub const HANDLE_ID_EXTERNAL_MASK: u64 = !((1 << 53) - 1);

/// The handle id an external's data carries, if it is an id external
/// ([`HANDLE_ID_EXTERNAL_MARK`]; 64-bit platforms only).
#[inline(always)]
pub fn handle_id_of_external(data: *mut c_void) -> Option<u64> {
  let value = data.addr() as u64;
  (cfg!(target_pointer_width = "64") && value & HANDLE_ID_EXTERNAL_MASK == HANDLE_ID_EXTERNAL_MARK)
    .then_some(value & !HANDLE_ID_EXTERNAL_MASK)
}

/// Writes a new owning export of `value` to `*out` (no stream sync).
pub type ManagedTensorFromValue =
  unsafe extern "C" fn(sys::napi_env, sys::napi_value, *mut *mut DLManagedTensorVersioned) -> i32;
/// Takes ownership of `tensor` (even on failure) and writes a new JS object of the producer's
/// kind viewing it to `*out`.
pub type ManagedTensorToValue =
  unsafe extern "C" fn(sys::napi_env, *mut DLManagedTensorVersioned, *mut sys::napi_value) -> i32;
/// Writes the producer's current work stream for a device to `*out_stream` (NULL on the CPU).
pub type CurrentWorkStream = unsafe extern "C" fn(sys::napi_env, i32, i32, *mut *mut c_void) -> i32;

/// `napi_dlpack_exchange_api` (major 1). Every function may be NULL when unsupported.
#[repr(C)]
#[derive(Debug)]
pub struct ExchangeApi {
  pub header: ExchangeApiHeader,
  pub dltensor_from_value: Option<DLTensorFromValue>,
  /// Non-NULL whenever `dltensor_from_value` is.
  pub release_borrow: Option<ReleaseBorrow>,
  pub managed_tensor_from_value: Option<ManagedTensorFromValue>,
  pub managed_tensor_to_value: Option<ManagedTensorToValue>,
  pub current_work_stream: Option<CurrentWorkStream>,
  /// Minor 1: the borrow of a tagged object (read it through
  /// [`ExchangeApi::dltensor_from_object`], which checks the minor). Needs `release_borrow`.
  pub dltensor_from_object: Option<DLTensorFromObject>,
  /// Minor 2: borrow by handle id (read it through [`ExchangeApi::borrow_id`]). Needs
  /// `release_borrow`.
  pub borrow_id: Option<BorrowId>,
  /// Minor 3: the slot table behind handle ids (read it through [`ExchangeApi::id_slots`]);
  /// NULL when the producer does not publish it.
  pub id_slots: Option<&'static IdSlots>,
}

// SAFETY: a table is immutable and lives for the whole process; `prev_api` points to another
// such table. Its functions are called on the JS thread of the env passed to them.
unsafe impl Sync for ExchangeApi {}
// SAFETY: as above.
unsafe impl Sync for ExchangeApiHeader {}

#[cfg(target_pointer_width = "64")]
const _: () = {
  assert!(core::mem::size_of::<ExchangeApiHeader>() == 16);
  assert!(core::mem::offset_of!(ExchangeApi, dltensor_from_value) == 16);
  assert!(core::mem::offset_of!(ExchangeApi, release_borrow) == 24);
  assert!(core::mem::offset_of!(ExchangeApi, current_work_stream) == 48);
  assert!(core::mem::offset_of!(ExchangeApi, dltensor_from_object) == 56);
  assert!(core::mem::offset_of!(ExchangeApi, borrow_id) == 64);
  assert!(core::mem::offset_of!(ExchangeApi, id_slots) == 72);
  assert!(core::mem::size_of::<ExchangeApi>() == 80);
  assert!(core::mem::size_of::<BorrowExtent>() == 48);
  assert!(core::mem::offset_of!(LentTensor, flags) == 48);
  assert!(core::mem::offset_of!(LentTensor, extent) == 56);
  assert!(core::mem::offset_of!(LentTensor, keep_alive) == 104);
  assert!(core::mem::size_of::<LentTensor>() == 112);
  assert!(core::mem::size_of::<ExchangeObject>() == 8);
};

impl ExchangeApi {
  /// A major-1 table (of this crate's minor) with the given functions and no older table
  /// behind it.
  pub const fn new(
    dltensor_from_value: Option<DLTensorFromValue>,
    release_borrow: Option<ReleaseBorrow>,
    managed_tensor_from_value: Option<ManagedTensorFromValue>,
    managed_tensor_to_value: Option<ManagedTensorToValue>,
    current_work_stream: Option<CurrentWorkStream>,
    dltensor_from_object: Option<DLTensorFromObject>,
  ) -> ExchangeApi {
    ExchangeApi {
      header: ExchangeApiHeader {
        version: DLPackVersion {
          major: EXCHANGE_API_MAJOR,
          minor: EXCHANGE_API_MINOR,
        },
        prev_api: ptr::null(),
      },
      dltensor_from_value,
      release_borrow,
      managed_tensor_from_value,
      managed_tensor_to_value,
      current_work_stream,
      dltensor_from_object,
      borrow_id: None,
      id_slots: None,
    }
  }

  /// This table with its slot table published (minor 3).
  pub const fn with_id_slots(mut self, id_slots: &'static IdSlots) -> ExchangeApi {
    self.id_slots = Some(id_slots);
    self
  }

  /// `id_slots`, if the table is recent enough to have it (minor >= 3).
  pub fn id_slots(&self) -> Option<&'static IdSlots> {
    if self.header.version.minor >= 3 {
      self.id_slots
    } else {
      None
    }
  }

  /// This table with a borrow by handle id (minor 2).
  pub const fn with_borrow_id(mut self, borrow_id: BorrowId) -> ExchangeApi {
    self.borrow_id = Some(borrow_id);
    self
  }

  /// `borrow_id`, if the table is recent enough to have it (minor >= 2) and has a
  /// `release_borrow`.
  #[inline(always)]
  pub fn borrow_id(&self) -> Option<(BorrowId, ReleaseBorrow)> {
    if self.header.version.minor >= 2 {
      self.borrow_id.zip(self.release_borrow)
    } else {
      None
    }
  }

  /// `dltensor_from_object`, if the table is recent enough to have it (minor >= 1: a minor-0
  /// table ends before that field).
  pub fn dltensor_from_object(&self) -> Option<DLTensorFromObject> {
    if self.header.version.minor >= 1 {
      self.dltensor_from_object
    } else {
      None
    }
  }

  /// The table of `header`'s chain that this crate can read: the first with major
  /// [`EXCHANGE_API_MAJOR`]. An unknown major with nothing readable behind it is
  /// `ERR_DLPACK_VERSION`.
  ///
  /// # Safety
  /// `header` must point to a live table header whose `prev_api` chain is live too.
  pub unsafe fn select(
    header: *const ExchangeApiHeader,
  ) -> Result<&'static ExchangeApi, DLPackError> {
    let mut current = header;
    let mut first_major = None;
    // A chain of more than a few tables is a broken producer; stop rather than loop forever.
    for _ in 0..EXCHANGE_MAX_TABLES {
      if current.is_null() {
        break;
      }
      // SAFETY: caller contract: every header of the chain is live for the process.
      let version = unsafe { (*current).version };
      first_major.get_or_insert(version.major);
      if version.major == EXCHANGE_API_MAJOR {
        // SAFETY: a major-1 header starts a major-1 table (the layout above).
        return Ok(unsafe { &*current.cast::<ExchangeApi>() });
      }
      // SAFETY: as above.
      current = unsafe { (*current).prev_api };
    }
    Err(DLPackError::new(
      ErrorKind::Version,
      format!(
        "exchange table major version {} is not supported (this consumer reads {EXCHANGE_API_MAJOR}.x)",
        first_major.unwrap_or(0)
      ),
    ))
  }
}

fn napi_error(what: &str, status: sys::napi_status) -> DLPackError {
  DLPackError::new(
    ErrorKind::Napi,
    format!("{what} failed with napi status {status}"),
  )
}

fn check(what: &str, status: sys::napi_status) -> Result<(), DLPackError> {
  if status == sys::Status::napi_ok {
    Ok(())
  } else {
    Err(napi_error(what, status))
  }
}

/// Creates the value producers store under [`EXCHANGE_API_PROPERTY`]: an external pointing to
/// `api`, tagged with [`EXCHANGE_API_TAG`], without a finalizer (the table is static).
///
/// # Safety
/// `env` must be the current, live environment of the calling JS thread.
pub unsafe fn api_value(
  env: sys::napi_env,
  api: &'static ExchangeApi,
) -> Result<sys::napi_value, DLPackError> {
  let mut external = ptr::null_mut();
  let data = ptr::from_ref(api).cast_mut().cast::<c_void>();
  // SAFETY: caller contract; the data is static, so no finalizer is needed. Consumers only
  // read through the pointer.
  check("napi_create_external", unsafe {
    sys::napi_create_external(env, data, None, ptr::null_mut(), &mut external)
  })?;
  // SAFETY: a live external of this env.
  check("napi_type_tag_object", unsafe {
    sys::napi_type_tag_object(env, external, &EXCHANGE_API_TAG)
  })?;
  Ok(external)
}

/// Makes `api` discoverable on `target` (a prototype, or `globalThis`): defines the
/// [`EXCHANGE_API_PROPERTY`] symbol as a non-enumerable, non-configurable data property. It is
/// writable so that objects inheriting it can shadow it, by plain assignment, with their own
/// [`OBJECT_TAG`] external (a read-only inherited property forbids that); writing garbage to it
/// only makes the objects stop lending, since consumers trust nothing but the tags.
///
/// # Safety
/// `env` must be the current, live environment and `target` a live object of it.
pub unsafe fn install(
  env: sys::napi_env,
  target: sys::napi_value,
  api: &'static ExchangeApi,
) -> Result<(), DLPackError> {
  // SAFETY: forwarded contract.
  let value = unsafe { api_value(env, api)? };
  // SAFETY: forwarded contract.
  unsafe { install_value(env, target, value) }
}

/// [`install`] with a table value [`api_value`] made: one value can serve several targets of an
/// environment (a prototype and `globalThis`), so that the environment holds one table object.
///
/// # Safety
/// `env` must be the current, live environment, `target` a live object of it and `value` a
/// value [`api_value`] returned for it.
pub unsafe fn install_value(
  env: sys::napi_env,
  target: sys::napi_value,
  value: sys::napi_value,
) -> Result<(), DLPackError> {
  // SAFETY: forwarded contract.
  let key = unsafe { property_key(env)? };
  let descriptor = sys::napi_property_descriptor {
    utf8name: ptr::null(),
    name: key,
    method: None,
    getter: None,
    setter: None,
    value,
    attributes: sys::PropertyAttributes::writable,
    data: ptr::null_mut(),
  };
  // SAFETY: a live object of this env; the name outlives the call.
  check("napi_define_properties", unsafe {
    sys::napi_define_properties(env, target, 1, &descriptor)
  })
}

/// What a value's [`EXCHANGE_API_PROPERTY`] leads to.
#[derive(Clone, Copy, Debug)]
pub enum Found {
  /// An [`OBJECT_TAG`] external: the object's own data (an [`ExchangeObject`]) and its table.
  /// Borrow with `dltensor_from_object` when the table has it.
  Object(&'static ExchangeApi, *mut c_void),
  /// An [`EXCHANGE_API_TAG`] external: the table (borrow with `dltensor_from_value`).
  Table(&'static ExchangeApi),
}

impl Found {
  /// The table, whichever way it was found.
  pub fn api(&self) -> &'static ExchangeApi {
    match *self {
      Found::Object(api, _) | Found::Table(api) => api,
    }
  }
}

/// Classifies a property value (or, without `tables_too`, a value passed as the argument
/// itself, which only the per-object kind may be). `Ok(None)` for anything that is not one of
/// the tagged externals looked for (the property is absent, or someone else's).
///
/// # Safety
/// `env` must be the current, live environment and `value` a live value of it.
unsafe fn classify(
  env: sys::napi_env,
  value: sys::napi_value,
  tables_too: bool,
) -> Result<Option<Found>, DLPackError> {
  // SAFETY: forwarded contract.
  match unsafe { external_data(env, value) } {
    // SAFETY: forwarded contract; `data` is `value`'s.
    Some(data) => unsafe { classify_external(env, value, data, tables_too) },
    None => Ok(None),
  }
}

/// The data of `value` if it is an external, without throwing otherwise: anything but an
/// external (undefined when a property is absent) answers `napi_invalid_arg` without throwing,
/// cheaper than asking `napi_typeof` first; and the tag checks must not see a primitive (a tag
/// check on undefined throws).
///
/// # Safety
/// `env` must be the current, live environment and `value` a live value of it.
unsafe fn external_data(env: sys::napi_env, value: sys::napi_value) -> Option<*mut c_void> {
  let mut data = ptr::null_mut();
  // SAFETY: caller contract.
  let status = unsafe { sys::napi_get_value_external(env, value, &mut data) };
  (status == sys::Status::napi_ok).then_some(data)
}

/// [`classify`] of an external whose data was read already. The data is only read through
/// once a tag vouches for it.
///
/// # Safety
/// `env` must be the current, live environment and `value` a live external of it whose data
/// is `data`.
unsafe fn classify_external(
  env: sys::napi_env,
  value: sys::napi_value,
  data: *mut c_void,
  tables_too: bool,
) -> Result<Option<Found>, DLPackError> {
  if data.is_null() {
    return Ok(None);
  }
  // The per-object kind first: it is the hot path. The table kind is looked for only where a
  // table can be (under the property), sparing a capsule passed as the argument a tag check.
  let kinds: &[_] = if tables_too {
    &[(&OBJECT_TAG, true), (&EXCHANGE_API_TAG, false)]
  } else {
    &[(&OBJECT_TAG, true)]
  };
  for &(tag, per_object) in kinds {
    let mut tagged = false;
    // SAFETY: a live external of this env.
    check("napi_check_object_type_tag", unsafe {
      sys::napi_check_object_type_tag(env, value, tag, &mut tagged)
    })?;
    if !tagged {
      continue;
    }
    if !per_object {
      // SAFETY: the tag says the data is a process-lifetime table header (the ABI's contract).
      return unsafe { ExchangeApi::select(data.cast::<ExchangeApiHeader>()) }
        .map(|api| Some(Found::Table(api)));
    }
    // SAFETY: the tag says the data starts with an `ExchangeObject`, alive with the external.
    let header = unsafe { (*data.cast::<ExchangeObject>()).api };
    if header.is_null() {
      return Ok(None);
    }
    // SAFETY: an `ExchangeObject` names a process-lifetime table header (the ABI's contract).
    return unsafe { select_cached(header) }.map(|api| Some(Found::Object(api, data)));
  }
  Ok(None)
}

thread_local! {
  /// The last table header met through an [`OBJECT_TAG`] external and the table selected from
  /// it: objects of one kind skip the version walk.
  static LAST_OBJECT_API: core::cell::Cell<(*const ExchangeApiHeader, *const ExchangeApi)> =
    const { core::cell::Cell::new((ptr::null(), ptr::null())) };
}

/// [`ExchangeApi::select`], remembering the last header.
///
/// # Safety
/// As for [`ExchangeApi::select`].
unsafe fn select_cached(
  header: *const ExchangeApiHeader,
) -> Result<&'static ExchangeApi, DLPackError> {
  let (last_header, last_api) = LAST_OBJECT_API.with(core::cell::Cell::get);
  if header == last_header {
    // SAFETY: selected from this same process-lifetime header before.
    return Ok(unsafe { &*last_api });
  }
  // SAFETY: forwarded contract.
  let api = unsafe { ExchangeApi::select(header)? };
  LAST_OBJECT_API.with(|last| last.set((header, api)));
  Ok(api)
}

/// What the value `value` lends through (its own [`EXCHANGE_API_PROPERTY`], or one it
/// inherits from its prototype chain; for an [`OBJECT_TAG`] external, itself: see
/// [`find_in_external`]), if anything. Primitives have none. A table of an unknown major
/// version is `ERR_DLPACK_VERSION`.
///
/// # Safety
/// `env` must be the current, live environment and `value` a live value of it.
pub unsafe fn find(
  env: sys::napi_env,
  value: sys::napi_value,
) -> Result<Option<Found>, DLPackError> {
  let mut value_type = 0;
  // SAFETY: caller contract.
  check("napi_typeof", unsafe {
    sys::napi_typeof(env, value, &mut value_type)
  })?;
  if value_type == sys::ValueType::napi_external {
    // SAFETY: forwarded contract.
    return unsafe { find_in_external(env, value) };
  }
  if value_type != sys::ValueType::napi_object && value_type != sys::ValueType::napi_function {
    return Ok(None);
  }
  // SAFETY: forwarded contract; `value` is an object.
  unsafe { find_in_object(env, value) }
}

/// What an external passed as the value itself lends through: a producer may hand its
/// [`OBJECT_TAG`] external to JS, and a consumer given one
/// borrows it with no property lookup at all (`docs/protocol.md` §5.2). `Ok(None)` for anything
/// else, a capsule or another addon's external included (and for a non-external, without
/// throwing: the first Node-API call fails on it, so this may be tried before `napi_typeof`).
/// Only the per-object kind counts: a table external is not a tensor.
///
/// # Safety
/// `env` must be the current, live environment and `value` a live value of it.
pub unsafe fn find_in_external(
  env: sys::napi_env,
  value: sys::napi_value,
) -> Result<Option<Found>, DLPackError> {
  // SAFETY: forwarded contract. Per-object kind only (`tables_too` false).
  unsafe { classify(env, value, false) }
}

/// What an external given as an argument is (a per-object external, or nothing this module
/// knows, e.g. a capsule), its data already read (by a consumer looking for a handle id first:
/// one Node-API call for both).
///
/// # Safety
/// `env` must be the current, live environment and `value` a live external of it whose data
/// is `data`.
pub(crate) unsafe fn find_in_external_data(
  env: sys::napi_env,
  value: sys::napi_value,
  data: *mut c_void,
) -> Result<Option<Found>, DLPackError> {
  // SAFETY: forwarded contract. Per-object kind only, as `find_in_external`.
  unsafe { classify_external(env, value, data, false) }
}

/// [`find`] for a value known to be an object or a function: one property lookup (the key is
/// cached per thread and env), one tag check (two for a prototype table).
///
/// # Safety
/// `env` must be the current, live environment and `object` a live object of it.
pub unsafe fn find_in_object(
  env: sys::napi_env,
  object: sys::napi_value,
) -> Result<Option<Found>, DLPackError> {
  // SAFETY: forwarded contract.
  let key = unsafe { property_key(env)? };
  let mut property = ptr::null_mut();
  // SAFETY: caller contract; `key` is a live symbol of this env.
  check("napi_get_property", unsafe {
    sys::napi_get_property(env, object, key, &mut property)
  })?;
  // SAFETY: a live value of this env.
  unsafe { classify(env, property, true) }
}

/// The exchange table `value` lends through, however found (see [`find`]).
///
/// # Safety
/// `env` must be the current, live environment and `value` a live value of it.
pub unsafe fn find_api(
  env: sys::napi_env,
  value: sys::napi_value,
) -> Result<Option<&'static ExchangeApi>, DLPackError> {
  // SAFETY: forwarded contract.
  Ok(unsafe { find(env, value)? }.map(|found| found.api()))
}

/// A registered symbol of this thread's environment, kept by a reference (one environment per
/// JS thread uses this copy of the crate; its cleanup hook forgets it): `(env, reference)`.
pub(crate) type SymbolCache = core::cell::Cell<(sys::napi_env, sys::napi_ref)>;

thread_local! {
  /// The [`EXCHANGE_API_PROPERTY`] symbol.
  static PROPERTY_KEY: SymbolCache = const { core::cell::Cell::new((ptr::null_mut(), ptr::null_mut())) };
}

/// The cleanup hook of a [`SymbolCache`]: `arg` is its `LocalKey` (a distinct hook argument per
/// cache, as Node requires of hooks sharing a function).
unsafe extern "C" fn forget_symbol(arg: *mut c_void) {
  // SAFETY: `cached_symbol` registered this hook with a `&'static LocalKey<SymbolCache>`.
  let cache = unsafe { &*arg.cast_const().cast::<LocalKey<SymbolCache>>() };
  let (env, reference) = cache.with(|key| key.replace((ptr::null_mut(), ptr::null_mut())));
  if !env.is_null() && !reference.is_null() {
    // Node (20 at least) does not free a module's references when a Worker's environment
    // ends (valgrind showed them lost), so delete it here.
    // SAFETY: our reference of `env`, on its thread, in its cleanup hook (env still live).
    unsafe { sys::napi_delete_reference(env, reference) };
  }
}

/// `Symbol.for(EXCHANGE_API_PROPERTY)` of `env` (cached per thread and env).
///
/// # Safety
/// `env` must be the current, live environment of the calling JS thread.
unsafe fn property_key(env: sys::napi_env) -> Result<sys::napi_value, DLPackError> {
  // SAFETY: forwarded contract.
  unsafe { cached_symbol(&PROPERTY_KEY, env, EXCHANGE_API_PROPERTY) }
}

/// The type of a value (`napi_typeof`), for the argument conversions (`arg`, `adapter`); they
/// call it only under their own contract: `env` live, `value` a live value of it.
pub(crate) fn type_of(
  env: sys::napi_env,
  value: sys::napi_value,
) -> napi::Result<sys::napi_valuetype> {
  let mut value_type = 0;
  // SAFETY: the callers' contract: live env and value.
  let status = unsafe { sys::napi_typeof(env, value, &mut value_type) };
  if status != sys::Status::napi_ok {
    return Err(napi::Error::new(
      napi::Status::from(status),
      "napi_typeof failed",
    ));
  }
  Ok(value_type)
}

/// `Symbol.for(name)` of `env`, kept in `cache` (made once per thread and env by calling the
/// global `Symbol.for`, which every runtime has: `node_api_symbol_for` needs Node-API 9; one
/// `name` per cache).
///
/// # Safety
/// `env` must be the current, live environment of the calling JS thread.
// Inlined, so that the borrow path's key lookup stays specialised to its one cache (measured:
// an outlined call cost ~55 instructions per borrowed argument).
#[inline(always)]
pub(crate) unsafe fn cached_symbol(
  cache: &'static LocalKey<SymbolCache>,
  env: sys::napi_env,
  name: &str,
) -> Result<sys::napi_value, DLPackError> {
  let (cached_env, reference) = cache.with(core::cell::Cell::get);
  let mut key = ptr::null_mut();
  if cached_env == env && !reference.is_null() {
    // SAFETY: a reference of this env, alive until its cleanup hook cleared the cache.
    check("napi_get_reference_value", unsafe {
      sys::napi_get_reference_value(env, reference, &mut key)
    })?;
    return Ok(key);
  }
  // SAFETY: caller contract.
  key = unsafe { registered_symbol(env, name)? };
  if cached_env.is_null() {
    let mut reference = ptr::null_mut();
    let hook_arg = ptr::from_ref(cache).cast_mut().cast::<c_void>();
    // SAFETY: a live symbol of this env. The cleanup hook deletes the reference when the env
    // goes.
    let made = unsafe {
      sys::napi_create_reference(env, key, 1, &mut reference) == sys::Status::napi_ok
        && sys::napi_add_env_cleanup_hook(env, Some(forget_symbol), hook_arg)
          == sys::Status::napi_ok
    };
    if made {
      cache.with(|cache| cache.set((env, reference)));
    }
  }
  Ok(key)
}

/// `Symbol.for(name)`, through the global `Symbol` (a getter or a patched `Symbol.for` that
/// throws leaves its exception pending and fails the call).
///
/// # Safety
/// `env` must be the current, live environment of the calling JS thread.
unsafe fn registered_symbol(
  env: sys::napi_env,
  name: &str,
) -> Result<sys::napi_value, DLPackError> {
  let (mut global, mut symbol, mut symbol_for, mut text, mut key) = (
    ptr::null_mut(),
    ptr::null_mut(),
    ptr::null_mut(),
    ptr::null_mut(),
    ptr::null_mut(),
  );
  // SAFETY: caller contract; NUL-terminated names; `name` passed with its length.
  unsafe {
    check("napi_get_global", sys::napi_get_global(env, &mut global))?;
    check(
      "napi_get_named_property",
      sys::napi_get_named_property(env, global, c"Symbol".as_ptr(), &mut symbol),
    )?;
    check(
      "napi_get_named_property",
      sys::napi_get_named_property(env, symbol, c"for".as_ptr(), &mut symbol_for),
    )?;
    check(
      "napi_create_string_utf8",
      sys::napi_create_string_utf8(env, name.as_ptr().cast(), name.len() as isize, &mut text),
    )?;
    check(
      "napi_call_function",
      sys::napi_call_function(env, symbol, symbol_for, 1, &text, &mut key),
    )?;
  }
  let mut value_type = 0;
  // SAFETY: a live value of this env.
  check("napi_typeof", unsafe {
    sys::napi_typeof(env, key, &mut value_type)
  })?;
  if value_type != sys::ValueType::napi_symbol {
    return Err(DLPackError::new(
      ErrorKind::Napi,
      "Symbol.for did not return a symbol",
    ));
  }
  Ok(key)
}

/// The default importer of this environment: the table napi-dlpack installs on `globalThis`
/// when its JS module is loaded (`None` when it is not loaded in this env).
///
/// # Safety
/// `env` must be the current, live environment of the calling JS thread.
pub unsafe fn global_api(env: sys::napi_env) -> Result<Option<&'static ExchangeApi>, DLPackError> {
  let mut global = ptr::null_mut();
  // SAFETY: caller contract.
  check("napi_get_global", unsafe {
    sys::napi_get_global(env, &mut global)
  })?;
  // SAFETY: the global object of this env.
  unsafe { find_api(env, global) }
}

/// The table that borrows handle ids, once found ([`id_api`]).
static ID_API: core::sync::atomic::AtomicPtr<ExchangeApi> =
  core::sync::atomic::AtomicPtr::new(ptr::null_mut());

/// The table that borrows handle ids: the default importer's ([`global_api`]) of the first
/// environment that had one with `borrow_id`, then kept for the process (tables live
/// for the process; a process-wide static costs no thread-local access, which in a dynamically
/// loaded addon is a `__tls_get_addr` call). A number or an id external carries no table of its
/// own: napi-dlpack, whose JS module installs the default importer, made it. Every environment
/// with napi-dlpack loaded has the same table (a second copy of napi-dlpack in the process would
/// not be asked: its ids are refused, `docs/protocol.md` §5.6); where napi-dlpack is not loaded
/// the table refuses every id, since none was made on that thread.
///
/// # Safety
/// `env` must be the current, live environment of the calling JS thread.
#[inline(always)]
pub unsafe fn id_api(env: sys::napi_env) -> Result<Option<&'static ExchangeApi>, DLPackError> {
  let api = ID_API.load(core::sync::atomic::Ordering::Acquire);
  if !api.is_null() {
    // SAFETY: a process-lifetime table found before.
    return Ok(Some(unsafe { &*api }));
  }
  // SAFETY: forwarded contract.
  let found = unsafe { global_api(env)? };
  if let Some(api) = found.filter(|api| api.borrow_id().is_some()) {
    ID_API.store(
      ptr::from_ref(api).cast_mut(),
      core::sync::atomic::Ordering::Release,
    );
  }
  Ok(found)
}

/// The default importer's borrow by id and the release that ends it ([`id_borrow`]), and its
/// slot table where this crate can borrow from it inline ([`IdSlots::inline_compatible`]).
#[derive(Clone, Copy, Debug)]
pub struct IdBorrow {
  pub borrow: BorrowId,
  pub release: ReleaseBorrow,
  pub slots: Option<&'static IdSlots>,
}

/// [`id_borrow`]'s answer, once found: leaked, so that a borrow reads both functions through one
/// pointer, with no version or NULL checks.
static ID_BORROW: core::sync::atomic::AtomicPtr<IdBorrow> =
  core::sync::atomic::AtomicPtr::new(ptr::null_mut());

/// The functions that borrow a handle id and end that borrow: those of [`id_api`]'s table (a
/// minor-2 table with both), kept for the process once found. `None` when no such table is
/// installed in this environment.
///
/// # Safety
/// `env` must be the current, live environment of the calling JS thread.
#[inline(always)]
pub unsafe fn id_borrow(env: sys::napi_env) -> Result<Option<IdBorrow>, DLPackError> {
  let cached = ID_BORROW.load(core::sync::atomic::Ordering::Acquire);
  if !cached.is_null() {
    // SAFETY: a leaked, never freed or written `IdBorrow` (below).
    return Ok(Some(unsafe { *cached }));
  }
  // SAFETY: forwarded contract.
  unsafe { find_id_borrow(env) }
}

/// [`id_borrow`]'s first lookup.
///
/// # Safety
/// As [`id_borrow`].
#[cold]
#[inline(never)]
unsafe fn find_id_borrow(env: sys::napi_env) -> Result<Option<IdBorrow>, DLPackError> {
  // SAFETY: forwarded contract.
  let Some(api) = (unsafe { id_api(env)? }) else {
    return Ok(None);
  };
  let Some((borrow, release)) = api.borrow_id() else {
    return Ok(None);
  };
  let slots = api.id_slots().filter(|slots| slots.inline_compatible());
  let found = IdBorrow {
    borrow,
    release,
    slots,
  };
  // Every environment finds the same table (`id_api`); should two threads race here, the
  // loser's copy (a few bytes, once) is leaked too.
  let _ = ID_BORROW.compare_exchange(
    ptr::null_mut(),
    Box::leak(Box::new(found)),
    core::sync::atomic::Ordering::AcqRel,
    core::sync::atomic::Ordering::Acquire,
  );
  Ok(Some(found))
}

/// Turns the JS exception a table function left pending (it returned -1) into a napi-rs error
/// that rethrows that same exception, so its `code` reaches the caller unchanged.
///
/// # Safety
/// `env` must be the current, live environment of the calling JS thread.
pub unsafe fn take_exception(env: sys::napi_env) -> napi::Error {
  let mut exception = ptr::null_mut();
  // SAFETY: caller contract.
  let status = unsafe { sys::napi_get_and_clear_last_exception(env, &mut exception) };
  let mut value_type = sys::ValueType::napi_undefined;
  if status == sys::Status::napi_ok && !exception.is_null() {
    // SAFETY: a live value of this env.
    unsafe { sys::napi_typeof(env, exception, &mut value_type) };
  }
  if value_type == sys::ValueType::napi_undefined {
    // The producer failed without throwing: report it with our own code.
    // SAFETY: caller contract.
    return unsafe {
      coded_error(
        env,
        &DLPackError::new(
          ErrorKind::Napi,
          "the exchange table reported a failure without an exception",
        ),
      )
    };
  }
  // SAFETY: a live value of this env.
  napi::Error::from(unsafe { napi::bindgen_prelude::Unknown::from_raw_unchecked(env, exception) })
}

/// A napi-rs error that throws a JS `Error` carrying `error`'s stable `code` (napi-rs errors of
/// `Status` kind would otherwise put the status name there).
///
/// # Safety
/// `env` must be the current, live environment of the calling JS thread.
pub unsafe fn coded_error(env: sys::napi_env, error: &DLPackError) -> napi::Error {
  let fallback = || napi::Error::new(napi::Status::GenericFailure, error.to_string());
  let (mut code, mut message, mut value) = (ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
  let code_text = error.code();
  let message_text = error.message();
  // SAFETY: caller contract; the strings are passed with their lengths.
  let ok = unsafe {
    sys::napi_create_string_utf8(
      env,
      code_text.as_ptr().cast(),
      code_text.len() as isize,
      &mut code,
    ) == sys::Status::napi_ok
      && sys::napi_create_string_utf8(
        env,
        message_text.as_ptr().cast(),
        message_text.len() as isize,
        &mut message,
      ) == sys::Status::napi_ok
      && sys::napi_create_error(env, code, message, &mut value) == sys::Status::napi_ok
  };
  if !ok {
    return fallback();
  }
  // SAFETY: a live value of this env.
  napi::Error::from(unsafe { napi::bindgen_prelude::Unknown::from_raw_unchecked(env, value) })
}

/// Throws `error` as a JS `Error` with its stable `code` and returns -1: what a table function
/// written in Rust returns on failure.
///
/// # Safety
/// `env` must be the current, live environment of the calling JS thread.
pub unsafe fn throw(env: sys::napi_env, error: &DLPackError) -> i32 {
  let code = std::ffi::CString::new(error.code()).unwrap_or_default();
  let message = std::ffi::CString::new(error.message().replace('\0', " ")).unwrap_or_default();
  // SAFETY: caller contract; both strings are NUL-terminated and outlive the call.
  unsafe { sys::napi_throw_error(env, code.as_ptr(), message.as_ptr()) };
  -1
}

#[cfg(test)]
mod tests {
  use super::*;

  /// A chain of `length` tables whose last one has major 1, the others major 99.
  fn chain(length: usize) -> *const ExchangeApiHeader {
    let mut previous: *const ExchangeApiHeader = ptr::null();
    for index in (0..length).rev() {
      let major = if index == length - 1 {
        EXCHANGE_API_MAJOR
      } else {
        99
      };
      if major == EXCHANGE_API_MAJOR {
        let api: &'static mut ExchangeApi = Box::leak(Box::new(ExchangeApi::new(
          None, None, None, None, None, None,
        )));
        previous = ptr::from_ref(&api.header);
      } else {
        previous = Box::leak(Box::new(ExchangeApiHeader {
          version: DLPackVersion { major, minor: 0 },
          prev_api: previous,
        }));
      }
    }
    previous
  }

  #[test]
  fn select_looks_at_the_first_sixteen_tables_of_a_chain() {
    // SAFETY: leaked, hence live, headers (a test leaks a few hundred bytes).
    unsafe {
      assert!(ExchangeApi::select(chain(1)).is_ok());
      assert!(
        ExchangeApi::select(chain(EXCHANGE_MAX_TABLES)).is_ok(),
        "the 16th table is read"
      );
      let error = ExchangeApi::select(chain(EXCHANGE_MAX_TABLES + 1)).unwrap_err();
      assert_eq!(error.code(), "ERR_DLPACK_VERSION", "the 17th is not");
    }
  }
}
