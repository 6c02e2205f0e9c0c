//! The exchange table (`include/napi_dlpack.h` part 3, `docs/protocol.md` §5): the Node
//! counterpart of DLPack 1.3's `DLPackExchangeAPI`.
//!
//! A producer (napi-dlpack's `Tensor`, or any addon's own tensor class) puts a process-lifetime
//! C function table on the prototype of its objects, under [`EXCHANGE_API_PROPERTY`], as a
//! `napi_external` stamped with [`EXCHANGE_API_TAG`]. A consumer given a JS value looks the
//! property up, checks the tag and the table's major version, and then calls the table: to
//! borrow the tensor into a caller-provided `DLTensor` for the duration of a native call (no
//! allocation, no capsule, no finalizer), to get an owning `DLManagedTensorVersioned*`, to turn
//! an owning tensor into one of the producer's JS objects, or to ask for the producer's current
//! work stream. Nothing here links against the producer.
//!
//! The table functions return 0 on success and -1 on failure with a JS exception pending (an
//! `Error` with a stable `code`), as DLPack's return -1 with a Python exception set.

use core::ffi::c_void;
use core::ptr;

use napi::sys;

use crate::error::{DLPackError, ErrorKind};
use crate::ffi::{DLManagedTensorVersioned, DLPackVersion, DLTensor};

/// `NAPI_DLPACK_EXCHANGE_API_MAJOR`: the table layout this crate reads and writes. A consumer
/// uses a table whose major equals this (walking `prev_api` if needed); minors only append.
pub const EXCHANGE_API_MAJOR: u32 = 1;
/// `NAPI_DLPACK_EXCHANGE_API_MINOR`.
pub const EXCHANGE_API_MINOR: u32 = 0;
/// `NAPI_DLPACK_EXCHANGE_API_PROPERTY`: where producers put the table (on their prototype; on
/// `globalThis` for the process's default importer, see [`global_api`]).
pub const EXCHANGE_API_PROPERTY: &str = "__dlpack_napi_exchange_api__";
const EXCHANGE_API_PROPERTY_C: &core::ffi::CStr = c"__dlpack_napi_exchange_api__";
/// `NAPI_DLPACK_EXCHANGE_API_TAG_LOWER/UPPER`: the tag on the external holding the table.
pub const EXCHANGE_API_TAG: sys::napi_type_tag = sys::napi_type_tag {
  lower: 0x3f0d_9a51_c4e2_4b87,
  upper: 0xa6b1_52e8_7d09_4c3e,
};

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
  assert!(core::mem::size_of::<ExchangeApi>() == 56);
};

impl ExchangeApi {
  /// A major-1 table with the given functions and no older table behind it.
  pub const fn new(
    dltensor_from_value: Option<DLTensorFromValue>,
    release_borrow: Option<ReleaseBorrow>,
    managed_tensor_from_value: Option<ManagedTensorFromValue>,
    managed_tensor_to_value: Option<ManagedTensorToValue>,
    current_work_stream: Option<CurrentWorkStream>,
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
    for _ in 0..16 {
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

/// Makes `api` discoverable on `target` (a prototype, or `globalThis`): defines
/// [`EXCHANGE_API_PROPERTY`] as a non-enumerable, read-only, non-configurable data property.
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
  let descriptor = sys::napi_property_descriptor {
    utf8name: EXCHANGE_API_PROPERTY_C.as_ptr(),
    name: ptr::null_mut(),
    method: None,
    getter: None,
    setter: None,
    value,
    attributes: sys::PropertyAttributes::default,
    data: ptr::null_mut(),
  };
  // SAFETY: a live object of this env; the name outlives the call.
  check("napi_define_properties", unsafe {
    sys::napi_define_properties(env, target, 1, &descriptor)
  })
}

/// The table behind a property value, if it is a tagged exchange external. `Ok(None)` for any
/// other value (the property is absent or someone else's).
///
/// # Safety
/// `env` must be the current, live environment and `value` a live value of it.
unsafe fn api_of_value(
  env: sys::napi_env,
  value: sys::napi_value,
) -> Result<Option<&'static ExchangeApi>, DLPackError> {
  let mut value_type = 0;
  // SAFETY: caller contract.
  check("napi_typeof", unsafe {
    sys::napi_typeof(env, value, &mut value_type)
  })?;
  // Checked first: a tag check on a primitive (undefined, when the property is absent) throws
  // a TypeError, which would stay pending.
  if value_type != sys::ValueType::napi_external {
    return Ok(None);
  }
  let mut tagged = false;
  // SAFETY: a live external of this env.
  check("napi_check_object_type_tag", unsafe {
    sys::napi_check_object_type_tag(env, value, &EXCHANGE_API_TAG, &mut tagged)
  })?;
  if !tagged {
    return Ok(None);
  }
  let mut data = ptr::null_mut();
  // SAFETY: a live external (only externals carry this tag) of this env.
  check("napi_get_value_external", unsafe {
    sys::napi_get_value_external(env, value, &mut data)
  })?;
  if data.is_null() {
    return Ok(None);
  }
  // SAFETY: the tag says the data is a process-lifetime table header (the ABI's contract).
  unsafe { ExchangeApi::select(data.cast::<ExchangeApiHeader>()) }.map(Some)
}

/// The exchange table of the object `value` (found through its prototype chain), if it has
/// one. Primitives have none. A table of an unknown major version is `ERR_DLPACK_VERSION`.
///
/// # Safety
/// `env` must be the current, live environment and `value` a live value of it.
pub unsafe fn find_api(
  env: sys::napi_env,
  value: sys::napi_value,
) -> Result<Option<&'static ExchangeApi>, DLPackError> {
  let mut value_type = 0;
  // SAFETY: caller contract.
  check("napi_typeof", unsafe {
    sys::napi_typeof(env, value, &mut value_type)
  })?;
  if value_type != sys::ValueType::napi_object && value_type != sys::ValueType::napi_function {
    return Ok(None);
  }
  // SAFETY: forwarded contract; `value` is an object.
  unsafe { find_api_of_object(env, value) }
}

/// [`find_api`] for a value known to be an object or a function.
///
/// Tables live on prototypes, so the last prototype a table was found through is remembered
/// (per thread and env): a value with the same prototype skips the property lookup, the most
/// expensive step (`docs/protocol.md` §5.2 allows consumers this cache). A table found on the
/// object itself is never cached.
///
/// # Safety
/// `env` must be the current, live environment and `object` a live object of it.
pub unsafe fn find_api_of_object(
  env: sys::napi_env,
  object: sys::napi_value,
) -> Result<Option<&'static ExchangeApi>, DLPackError> {
  let mut prototype = ptr::null_mut();
  // SAFETY: caller contract.
  let have_prototype =
    unsafe { sys::napi_get_prototype(env, object, &mut prototype) } == sys::Status::napi_ok;
  let (cached_env, cached_prototype, cached_api) = LAST_PROTOTYPE.with(core::cell::Cell::get);
  if have_prototype && cached_env == env && !cached_prototype.is_null() {
    let (mut cached, mut same) = (ptr::null_mut(), false);
    // SAFETY: a reference of this env (the cleanup hook clears the cache with the env), and
    // two live values of it.
    let compared = unsafe {
      sys::napi_get_reference_value(env, cached_prototype, &mut cached) == sys::Status::napi_ok
        && sys::napi_strict_equals(env, prototype, cached, &mut same) == sys::Status::napi_ok
    };
    if compared && same {
      // SAFETY: cached from a tagged external: a process-lifetime table.
      return Ok(Some(unsafe { &*cached_api }));
    }
  }
  // SAFETY: forwarded contract.
  let key = unsafe { property_key(env)? };
  let mut property = ptr::null_mut();
  // SAFETY: caller contract; `key` is a live string of this env.
  check("napi_get_property", unsafe {
    sys::napi_get_property(env, object, key, &mut property)
  })?;
  // SAFETY: a live value of this env.
  let api = unsafe { api_of_value(env, property)? };
  if let (true, Some(api)) = (have_prototype, api) {
    // SAFETY: live values of this env.
    unsafe { remember_prototype(env, object, key, prototype, api) };
  }
  Ok(api)
}

/// Caches (prototype, table) unless the table was found on `object` itself.
///
/// # Safety
/// `env` live; `object`, `key` and `prototype` live values of it.
unsafe fn remember_prototype(
  env: sys::napi_env,
  object: sys::napi_value,
  key: sys::napi_value,
  prototype: sys::napi_value,
  api: &'static ExchangeApi,
) {
  let mut own = true;
  // SAFETY: caller contract.
  if unsafe { sys::napi_has_own_property(env, object, key, &mut own) } != sys::Status::napi_ok
    || own
  {
    return;
  }
  let (cached_env, cached_prototype, _) = LAST_PROTOTYPE.with(core::cell::Cell::get);
  let mut reference = ptr::null_mut();
  // SAFETY: a live object of this env; the reference is deleted when replaced, or dies with
  // the env (whose cleanup hook clears the cache).
  if unsafe { sys::napi_create_reference(env, prototype, 1, &mut reference) }
    != sys::Status::napi_ok
  {
    return;
  }
  if cached_env == env && !cached_prototype.is_null() {
    // SAFETY: our previous reference, of this env.
    unsafe { sys::napi_delete_reference(env, cached_prototype) };
  } else if cached_env != env {
    // SAFETY: this env; registered once per env (the hook clears `cached_env`).
    let hooked =
      unsafe { sys::napi_add_env_cleanup_hook(env, Some(forget_prototype), ptr::null_mut()) }
        == sys::Status::napi_ok;
    if !hooked {
      // SAFETY: the reference just made.
      unsafe { sys::napi_delete_reference(env, reference) };
      return;
    }
  }
  LAST_PROTOTYPE.with(|cache| cache.set((env, reference, api)));
}

thread_local! {
  /// The last prototype (a reference) a table was found through, and that table.
  static LAST_PROTOTYPE: core::cell::Cell<(sys::napi_env, sys::napi_ref, *const ExchangeApi)> =
    const { core::cell::Cell::new((ptr::null_mut(), ptr::null_mut(), ptr::null())) };
}

unsafe extern "C" fn forget_prototype(_arg: *mut c_void) {
  LAST_PROTOTYPE.with(|cache| cache.set((ptr::null_mut(), ptr::null_mut(), ptr::null())));
}

thread_local! {
  /// [`EXCHANGE_API_PROPERTY`] as a JS string, kept (inside a one-element array: Node-API 9
  /// only references objects) by a reference: making the string from UTF-8, and internalizing
  /// a fresh string on every lookup, costs more than the property lookup itself. One
  /// environment per JS thread uses this copy of the crate; its cleanup hook forgets it.
  static PROPERTY_KEY: core::cell::Cell<(sys::napi_env, sys::napi_ref)> =
    const { core::cell::Cell::new((ptr::null_mut(), ptr::null_mut())) };
}

unsafe extern "C" fn forget_property_key(_arg: *mut c_void) {
  let (env, reference) = PROPERTY_KEY.with(|key| key.replace((ptr::null_mut(), ptr::null_mut())));
  if !env.is_null() && !reference.is_null() {
    // Node (20 at least) does not free a module's references when a Worker's environment
    // ends (valgrind showed them lost), so delete it here.
    // SAFETY: our reference of `env`, on its thread, in its cleanup hook (env still live).
    unsafe { sys::napi_delete_reference(env, reference) };
  }
}

/// The property name as a JS string of `env` (cached per thread and env).
///
/// # Safety
/// `env` must be the current, live environment of the calling JS thread.
unsafe fn property_key(env: sys::napi_env) -> Result<sys::napi_value, DLPackError> {
  let (cached_env, reference) = PROPERTY_KEY.with(core::cell::Cell::get);
  let mut key = ptr::null_mut();
  if cached_env == env && !reference.is_null() {
    let mut holder = ptr::null_mut();
    // SAFETY: a reference of this env, alive until its cleanup hook cleared the cache.
    check("napi_get_reference_value", unsafe {
      sys::napi_get_reference_value(env, reference, &mut holder)
    })?;
    // SAFETY: the one-element array made below.
    check("napi_get_element", unsafe {
      sys::napi_get_element(env, holder, 0, &mut key)
    })?;
    return Ok(key);
  }
  // SAFETY: caller contract; the name is passed with its length.
  check("napi_create_string_utf8", unsafe {
    sys::napi_create_string_utf8(
      env,
      EXCHANGE_API_PROPERTY_C.as_ptr(),
      EXCHANGE_API_PROPERTY.len() as isize,
      &mut key,
    )
  })?;
  if cached_env.is_null() {
    let (mut holder, mut reference) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: live values of this env. The cleanup hook deletes the reference when the env
    // goes.
    let made = unsafe {
      sys::napi_create_array_with_length(env, 1, &mut holder) == sys::Status::napi_ok
        && sys::napi_set_element(env, holder, 0, key) == sys::Status::napi_ok
        && sys::napi_create_reference(env, holder, 1, &mut reference) == sys::Status::napi_ok
        && sys::napi_add_env_cleanup_hook(env, Some(forget_property_key), ptr::null_mut())
          == sys::Status::napi_ok
    };
    if made {
      PROPERTY_KEY.with(|cache| cache.set((env, reference)));
    }
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
