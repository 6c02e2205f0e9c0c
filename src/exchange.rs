//! napi-dlpack's exchange table (`include/napi_dlpack.h` part 3, `docs/protocol.md` §5): what
//! lets any addon borrow a JS `Tensor` for the duration of a native call without a capsule,
//! get an owning export of it, or return a tensor to JS as a `Tensor` without linking us.
//!
//! `lib/exchange.ts` calls [`install_exchange_api`] once per environment: the table goes on
//! `Tensor.prototype` (so every tensor exposes it) and on `globalThis` (the environment's
//! default importer, which `napi_dlpack::arg::TensorResult` uses). The table reads a `Tensor`
//! object's native handle back under a private symbol: a getter on `Tensor.prototype` (no own
//! property per tensor, so no `Object.defineProperty` per tensor and nothing JS can overwrite),
//! undefined once the tensor is disposed and for any other object.
//!
//! The fast path (`docs/protocol.md` §5.2): a handle external is tagged with the public
//! `napi_dlpack::exchange::OBJECT_TAG` and its [`Handle`] starts with the table's header
//! ([`register_table`]), and each `Tensor` also keeps its handle as an own property under the
//! exchange symbol, `Symbol.for('__dlpack_napi_exchange_api__')` (shadowing the prototype's
//! table). A consumer's one
//! property lookup then lands on the handle itself and calls [`dltensor_from_object`] with it:
//! no second lookup by the producer. `dispose()` deletes that property, so consumers then reach
//! the prototype's table, whose [`dltensor_from_value`] reports the disposed tensor.

use std::cell::RefCell;
use std::ffi::{c_void, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::sync::Arc;

use napi::bindgen_prelude::{Object, Unknown};
use napi::{sys, Env, JsValue};
use napi_derive::napi;
use napi_dlpack::exchange::{self, ExchangeApi, LentTensor};
use napi_dlpack::ffi::{DLDevice, DLManagedTensorVersioned, DLTensor};
use napi_dlpack::{export, Device, DeviceType, ErrorKind, ExportFormat, ForeignTensor};

use crate::errors::{fail, status, Result};
use crate::handle::{describe, BorrowPin, Handle};
use crate::own_capsule::{self, ExportOwner};
use crate::slots::{self, Refused};

/// The table, for the whole process (every environment, every thread).
static EXCHANGE_API: ExchangeApi = ExchangeApi::new(
  Some(dltensor_from_value),
  Some(release_borrow),
  Some(managed_tensor_from_value),
  Some(managed_tensor_to_value),
  Some(current_work_stream),
  Some(dltensor_from_object),
)
.with_borrow_id(borrow_id)
.with_id_slots(&slots::ID_SLOTS);

/// Makes every handle created from now on start with this table's header (see
/// `handle::EXCHANGE_TABLE`): called when the module loads, before any handle exists.
pub(crate) fn register_table() {
  crate::handle::set_exchange_table(&EXCHANGE_API.header);
}

/// What the table needs per JS thread: our env, the symbol under which a `Tensor` keeps its
/// handle, and the JS function making a `Tensor` from a handle.
///
/// Table functions are called with the *caller's* `napi_env` (every addon has its own), so the
/// state is found by thread (one isolate per JS thread: the main thread or a worker). The
/// work is done on our env, like any other call into this addon (handles, references and
/// finalizers stay ours); only the outcome is reported on the caller's env (see [`run`]).
struct EnvExchange {
  env: sys::napi_env,
  handle_key: sys::napi_ref,
  make_tensor: sys::napi_ref,
  /// `dlpackError(code, message)` of lib/errors.ts: the `DLPackError` subclass of a code, so
  /// that errors thrown through the table are the classes §1.4 promises.
  make_error: sys::napi_ref,
}

thread_local! {
  static ENV_EXCHANGE: RefCell<Option<EnvExchange>> = const { RefCell::new(None) };
  /// References the exchange state of this thread holds (for `nativeStats()`: a second
  /// install must not leak the first one's).
  static LIVE_REFERENCES: core::cell::Cell<u32> = const { core::cell::Cell::new(0) };
}

unsafe extern "C" fn forget_env(_arg: *mut c_void) {
  // Node (20 at least) does not free a module's references when a Worker's environment ends
  // (valgrind showed them lost), so delete them here: cleanup hooks run while the env is alive.
  if let Some(exchange) = ENV_EXCHANGE.with(|state| state.borrow_mut().take()) {
    delete_references(
      exchange.env,
      &[
        exchange.handle_key,
        exchange.make_tensor,
        exchange.make_error,
      ],
    );
  }
  LIVE_REFERENCES.with(|live| live.set(0));
}

/// References held by this thread's exchange state (`nativeStats().exchangeReferences`).
pub(crate) fn live_references() -> u32 {
  LIVE_REFERENCES.with(core::cell::Cell::get)
}

/// Deletes references of `env` (those of a replaced or abandoned install, or of an env being
/// torn down).
fn delete_references(env: sys::napi_env, references: &[sys::napi_ref]) {
  for &reference in references {
    // SAFETY: references of this env, on its thread, while it is alive (during a call, or in
    // its cleanup hook), deleted once.
    if unsafe { sys::napi_delete_reference(env, reference) } == sys::Status::napi_ok {
      LIVE_REFERENCES.with(|live| live.set(live.get().saturating_sub(1)));
    }
  }
}

/// Installs the exchange table for this environment (called once by `lib/exchange.ts`):
/// `prototype` (`Tensor.prototype`) and `globalThis` get the table (one table object for both),
/// `handleKey` is the symbol under which a tensor's handle is read (a getter on the prototype),
/// `makeTensor(handle)` wraps a handle in a `Tensor`, `makeError(code, message)` makes the
/// `DLPackError` subclass of a code. A later install in the same environment (the module loaded
/// twice) replaces the handle key and factories, deleting the references to the previous ones.
#[napi(js_name = "installExchangeApi")]
pub fn install_exchange_api(
  env: &Env,
  prototype: Object,
  handle_key: Unknown,
  make_tensor: Unknown,
  make_error: Unknown,
) -> Result<()> {
  let raw = env.raw();
  for (value, what) in [(&make_tensor, "makeTensor"), (&make_error, "makeError")] {
    if value_type(env, value.raw())? != sys::ValueType::napi_function {
      return Err(fail(
        ErrorKind::InvalidArgument,
        format!("{what} must be a function"),
      ));
    }
  }

  // One table object for the prototype and globalThis (each costs the environment memory it
  // keeps until it ends).
  // SAFETY: our env.
  let table = unsafe { exchange::api_value(raw, &EXCHANGE_API)? };
  // SAFETY: a live object of this env. First, so that a refused install changes nothing.
  unsafe { exchange::install_value(raw, prototype.raw(), table)? };
  let mut references = [ptr::null_mut(); 3];
  for (index, value) in [&handle_key, &make_tensor, &make_error]
    .into_iter()
    .enumerate()
  {
    // SAFETY: live values of this env.
    let made = status("napi_create_reference", unsafe {
      sys::napi_create_reference(raw, value.raw(), 1, &mut references[index])
    });
    if let Err(error) = made {
      delete_references(raw, &references[..index]);
      return Err(error);
    }
    LIVE_REFERENCES.with(|live| live.set(live.get() + 1));
  }
  let [key_ref, factory_ref, error_ref] = references;
  let previous = ENV_EXCHANGE.with(|state| {
    state.borrow_mut().replace(EnvExchange {
      env: raw,
      handle_key: key_ref,
      make_tensor: factory_ref,
      make_error: error_ref,
    })
  });
  match previous {
    // A second install in this env: its references are ours to delete (else they leak).
    Some(old) if old.env == raw => {
      delete_references(raw, &[old.handle_key, old.make_tensor, old.make_error])
    }
    Some(_) => {}
    None => {
      // SAFETY: our env; the hook only clears this thread's state.
      status("napi_add_env_cleanup_hook", unsafe {
        sys::napi_add_env_cleanup_hook(raw, Some(forget_env), ptr::null_mut())
      })?;
    }
  }
  let mut global = ptr::null_mut();
  // SAFETY: our env.
  status("napi_get_global", unsafe {
    sys::napi_get_global(raw, &mut global)
  })?;
  // Another copy of napi-dlpack loaded first in this environment keeps the default importer.
  // SAFETY: the global object of this env.
  if unsafe { exchange::find_api(raw, global)? }.is_none() {
    // SAFETY: as above; `table` is this env's.
    unsafe { exchange::install_value(raw, global, table)? };
  }
  Ok(())
}

/// Runs a table function body on our env. An error is thrown on the *caller's* env (a JS
/// exception our own env caught is moved there), where the caller sees it pending and its
/// callback passes it on; the function then returns -1. A panic never unwinds into the caller.
fn run(caller: sys::napi_env, body: impl FnOnce(&Env, &EnvExchange) -> Result<()>) -> i32 {
  let outcome = ENV_EXCHANGE.with(|state| {
    let state = state.borrow();
    let Some(exchange) = state.as_ref() else {
      return Err((
        fail(ErrorKind::Napi, "napi-dlpack is not loaded on this thread"),
        None,
      ));
    };
    let ours = Env::from_raw(exchange.env);
    catch_unwind(AssertUnwindSafe(|| body(&ours, exchange)))
      .unwrap_or_else(|_| Err(fail(ErrorKind::Napi, "internal panic in napi-dlpack")))
      .inspect_err(|_| move_exception(exchange.env, caller))
      .map_err(|error| {
        let made = classed_error(exchange, &error);
        (error, made)
      })
  });
  match outcome {
    Ok(()) => 0,
    Err((error, made)) => {
      let mut pending = false;
      // SAFETY: the caller's env, on its thread.
      unsafe { sys::napi_is_exception_pending(caller, &mut pending) };
      if !pending {
        // SAFETY: the caller's env, on its thread; a value of its isolate.
        let thrown = made
          .is_some_and(|value| unsafe { sys::napi_throw(caller, value) } == sys::Status::napi_ok);
        if !thrown {
          // The addon's errors carry the stable code as their status (see `errors`).
          let code = CString::new(error.status).unwrap_or_default();
          let message = CString::new(error.reason.replace('\0', " ")).unwrap_or_default();
          // SAFETY: the caller's env, on its thread; NUL-terminated strings.
          unsafe { sys::napi_throw_error(caller, code.as_ptr(), message.as_ptr()) };
        }
      }
      -1
    }
  }
}

/// The `DLPackError` subclass instance for one of our errors (lib/errors.ts `dlpackError`, as
/// the JS layer throws it), made on our env; `None` when a JS exception is already pending (it
/// is passed on as it is) or the factory fails (a plain coded `Error` is thrown instead).
fn classed_error(exchange: &EnvExchange, error: &crate::errors::Error) -> Option<sys::napi_value> {
  let env = exchange.env;
  let mut pending = false;
  // SAFETY: our env, on its thread.
  unsafe { sys::napi_is_exception_pending(env, &mut pending) };
  if pending {
    return None;
  }
  let code: &str = error.status;
  let message = error.reason.as_str();
  let (mut factory, mut global, mut result) = (ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
  let mut arguments = [ptr::null_mut(); 2];
  // SAFETY: our env and its reference; string pointers with their lengths.
  let made = unsafe {
    sys::napi_get_reference_value(env, exchange.make_error, &mut factory) == sys::Status::napi_ok
      && sys::napi_get_global(env, &mut global) == sys::Status::napi_ok
      && sys::napi_create_string_utf8(
        env,
        code.as_ptr().cast(),
        code.len() as isize,
        &mut arguments[0],
      ) == sys::Status::napi_ok
      && sys::napi_create_string_utf8(
        env,
        message.as_ptr().cast(),
        message.len() as isize,
        &mut arguments[1],
      ) == sys::Status::napi_ok
      && sys::napi_call_function(env, global, factory, 2, arguments.as_ptr(), &mut result)
        == sys::Status::napi_ok
  };
  if made {
    return Some(result);
  }
  // A factory that threw: leave our env clean; the caller gets the plain coded error.
  let mut ignored = ptr::null_mut();
  // SAFETY: our env.
  unsafe { sys::napi_get_and_clear_last_exception(env, &mut ignored) };
  None
}

/// Moves an exception JS code threw during one of our Node-API calls (recorded on our env)
/// to the caller's env, so ours is left clean and the caller passes it on.
fn move_exception(ours: sys::napi_env, caller: sys::napi_env) {
  let mut pending = false;
  // SAFETY: our env, on its thread.
  unsafe { sys::napi_is_exception_pending(ours, &mut pending) };
  if !pending {
    return;
  }
  let mut exception = ptr::null_mut();
  // SAFETY: as above.
  if unsafe { sys::napi_get_and_clear_last_exception(ours, &mut exception) } == sys::Status::napi_ok
  {
    // SAFETY: a live value of this isolate, thrown on the caller's env.
    unsafe { sys::napi_throw(caller, exception) };
  }
}

/// The handle of a `Tensor` object (read under the handle symbol: `Tensor.prototype`'s getter,
/// undefined once disposed or for an object that is no `Tensor`), or the handle external
/// itself when JS passed that (`Tensor.native`, protocol §5.2: a consumer then calls the table
/// with the external as the value).
fn tensor_handle<'a>(
  env: &Env,
  exchange: &EnvExchange,
  value: sys::napi_value,
) -> Result<&'a mut Handle> {
  let mut external_data = ptr::null_mut();
  // SAFETY: a live value of this env. Anything but an external answers `napi_invalid_arg`
  // without throwing: cheaper than `napi_typeof` for the objects this path mostly sees.
  if unsafe { sys::napi_get_value_external(env.raw(), value, &mut external_data) }
    == sys::Status::napi_ok
  {
    // SAFETY: a live external of this env; the borrow ends with this table call.
    return unsafe { own_capsule::handle_of_external(env.raw(), value) };
  }
  let key = exchange.handle_key;
  let (mut key_value, mut handle) = (ptr::null_mut(), ptr::null_mut());
  // SAFETY: a reference of this env, alive while the env is.
  status("napi_get_reference_value", unsafe {
    sys::napi_get_reference_value(env.raw(), key, &mut key_value)
  })?;
  // SAFETY: live values of this env; the caller found our table on `value`, an object.
  status("napi_get_property", unsafe {
    sys::napi_get_property(env.raw(), value, key_value, &mut handle)
  })?;
  let kind = value_type(env, handle)?;
  if kind != sys::ValueType::napi_external {
    // `dispose()` clears the slot (undefined); an object merely inheriting our prototype never
    // had one. (Checked first: a tag check on a primitive throws.)
    return Err(fail(
      ErrorKind::Disposed,
      "the tensor has been disposed (or is not a napi-dlpack Tensor)",
    ));
  }
  // One of our handle externals, or an adopted capsule serving as the handle (`own_capsule`).
  // SAFETY: a live external of this env; the borrow ends with this table call.
  unsafe { own_capsule::handle_of_external(env.raw(), handle) }
}

fn value_type(env: &Env, value: sys::napi_value) -> Result<sys::napi_valuetype> {
  let mut kind = 0;
  // SAFETY: a live value of this env.
  status("napi_typeof", unsafe {
    sys::napi_typeof(env.raw(), value, &mut kind)
  })?;
  Ok(kind)
}

/// `dltensor_from_value`: borrows the tensor (found through the handle symbol).
unsafe extern "C" fn dltensor_from_value(
  env: sys::napi_env,
  value: sys::napi_value,
  out: *mut DLTensor,
  out_flags: *mut u64,
  out_keep_alive: *mut *mut c_void,
) -> i32 {
  run(env, |env, exchange| {
    if let Some(id) = id_of_value(env, value)? {
      if out.is_null() || out_flags.is_null() || out_keep_alive.is_null() {
        return Err(fail(ErrorKind::InvalidArgument, "NULL output pointer"));
      }
      let lent = lend_id(env, id)?;
      // SAFETY: the slot's record, pinned until the token is released; non-NULL out pointers
      // (checked) for this call.
      unsafe {
        let lent = &*lent;
        out.write(lent.tensor);
        out_flags.write(lent.flags);
        out_keep_alive.write(lent.keep_alive);
      }
      return Ok(());
    }
    let handle = tensor_handle(env, exchange, value)?;
    lend(env, handle, out, out_flags, out_keep_alive)
  })
}

/// `borrow_id` (table minor 2, `docs/protocol.md` §5.6): borrows the tensor a handle id names.
/// The hot path is a slot lookup (bounds, owner thread, generation), a pin, and the address of
/// the record the slot prepared when the id was made: no Node-API call, no validation, no
/// allocation, no copy. The first borrow of JS memory (it marks the buffer untransferable), a
/// detach check where the runtime can still detach it, and every refusal take
/// [`borrow_id_slow`].
unsafe extern "C" fn borrow_id(env: sys::napi_env, id: u64) -> *const LentTensor {
  if let Ok(slot) = slots::lookup(id) {
    // SAFETY: `lookup` established that this thread owns the slot; the reference ends here.
    if unsafe { slot.state() }.ready() {
      // SAFETY: as above.
      unsafe { slots::pin(slot) };
      return slot.lent();
    }
  }
  // SAFETY: forwarded contract.
  unsafe { borrow_id_slow(env, id) }
}

/// [`borrow_id`] off its hot path: on our env, with errors thrown to the caller (NULL). An
/// `extern "C"` function (it cannot unwind: `run` catches panics), so that the hot path jumps to
/// it instead of keeping a frame for a call.
#[cold]
#[inline(never)]
unsafe extern "C" fn borrow_id_slow(env: sys::napi_env, id: u64) -> *const LentTensor {
  let mut lent = ptr::null();
  if run(env, |env, _| {
    lent = lend_id(env, id)?;
    Ok(())
  }) != 0
  {
    return ptr::null();
  }
  lent
}

/// The refusal of an id (`slots::Refused`), coded.
fn refused(why: Refused) -> crate::errors::Error {
  match why {
    Refused::Unknown => fail(ErrorKind::InvalidArgument, why.message()),
    Refused::OtherThread | Refused::Stale => fail(ErrorKind::StaleId, why.message()),
  }
}

/// The handle id `value` is, if it is one: an id external (`Tensor#native`) or a number
/// (`Tensor#id`, which must then be an exact integer below 2^53).
fn id_of_value(env: &Env, value: sys::napi_value) -> Result<Option<u64>> {
  let mut data = ptr::null_mut();
  // SAFETY: a live value of this env; anything but an external fails without throwing.
  if unsafe { sys::napi_get_value_external(env.raw(), value, &mut data) } == sys::Status::napi_ok {
    return Ok(exchange::handle_id_of_external(data));
  }
  if value_type(env, value)? != sys::ValueType::napi_number {
    return Ok(None);
  }
  let mut number = 0f64;
  // SAFETY: a live number of this env.
  status("napi_get_value_double", unsafe {
    sys::napi_get_value_double(env.raw(), value, &mut number)
  })?;
  if !(0.0..=slots::MAX_ID as f64).contains(&number) || number.fract() != 0.0 {
    return Err(fail(
      ErrorKind::InvalidArgument,
      "a tensor handle id must be an integer in 0..2^53 (Tensor#id)",
    ));
  }
  Ok(Some(number as u64))
}

/// Borrows slot `id` (any path): the slow steps first if the slot needs them, then a pin of the
/// slot and the address of its record (valid until its token is released).
fn lend_id(env: &Env, id: u64) -> Result<*const LentTensor> {
  let slot = slots::lookup(id).map_err(refused)?;
  let (storage, ready, marked) = {
    // SAFETY: this thread owns the slot; the reference ends before any JS can run.
    let state = unsafe { slot.state() };
    let Some(pin) = &state.pin else {
      return Err(refused(Refused::Stale));
    };
    (pin.storage.clone(), state.ready(), state.marked())
  };
  if !ready {
    if marked {
      storage.check_attached(env)?;
    } else {
      // Marks the buffer untransferable: this calls JS (the runtime's marker), which may have
      // disposed the tensor meanwhile, so the slot is looked up again below.
      storage.pin_for_export(env)?;
    }
  }
  let slot = slots::lookup(id).map_err(refused)?;
  // SAFETY: this thread owns the slot; no other reference to its state is alive.
  let state = unsafe { slots::pin(slot) };
  // The first borrow's mark may have been left to the runtime's (an external ArrayBuffer,
  // which Node 24's transfer() can still detach): then every borrow keeps the detach check.
  let check_detach = state.check_detach() || storage.mark_left_to_runtime();
  state.set_marks(true, check_detach);
  Ok(slot.lent())
}

/// `dltensor_from_object`: borrows the tensor whose handle a consumer found under the
/// exchange property (the fast path: no lookup here).
unsafe extern "C" fn dltensor_from_object(
  env: sys::napi_env,
  _value: sys::napi_value,
  object: *mut c_void,
  out: *mut DLTensor,
  out_flags: *mut u64,
  out_keep_alive: *mut *mut c_void,
) -> i32 {
  run(env, |env, _| {
    if object.is_null() {
      return Err(fail(ErrorKind::InvalidArgument, "NULL object"));
    }
    // SAFETY: the table's contract: `object` is the data of an OBJECT_TAG external whose header
    // names this table, i.e. one of our handle externals (the only ones whose header names
    // it), which the consumer holds for this call: a live `Handle`. JS is single-threaded and
    // no other borrow of the handle is alive during this call.
    let handle = unsafe { &mut *object.cast::<Handle>() };
    lend(env, handle, out, out_flags, out_keep_alive)
  })
}

/// Fills a borrow of `handle`. The token is one strong count on the handle's [`BorrowPin`]
/// (its storage and its metadata, where shape and strides live), so a `dispose()` or a GC of
/// the JS object during or after the borrow frees nothing the borrower uses. The pin is made on
/// a handle's first borrow; later borrows allocate nothing.
fn lend(
  env: &Env,
  handle: &mut Handle,
  out: *mut DLTensor,
  out_flags: *mut u64,
  out_keep_alive: *mut *mut c_void,
) -> Result<()> {
  if out.is_null() || out_flags.is_null() || out_keep_alive.is_null() {
    return Err(fail(ErrorKind::InvalidArgument, "NULL output pointer"));
  }
  let storage = handle.storage()?;
  storage.check_attached(env)?;
  let pin = match &handle.borrow_pin {
    Some(pin) => pin.clone(),
    None => {
      // A borrow may be kept past the call (the pin allows it), so the memory is pinned as
      // for an owned export; once per handle, off the path of later borrows.
      storage.pin_for_export(env)?;
      let pin = Arc::new(BorrowPin {
        storage: storage.clone(),
        layout: handle.layout.clone(),
      });
      handle.borrow_pin = Some(pin.clone());
      pin
    }
  };
  let (tensor, flags) = describe(&pin);
  // SAFETY: non-NULL out pointers (checked) that the caller provides for this call.
  unsafe {
    out.write(tensor);
    out_flags.write(flags);
    out_keep_alive.write(Arc::into_raw(pin).cast_mut().cast());
  }
  Ok(())
}

/// `release_borrow`: ends a borrow. A borrow by id (an odd token, `slots::token`) is unpinned
/// here, without a frame; anything else takes [`release_borrow_slow`].
unsafe extern "C" fn release_borrow(env: sys::napi_env, keep_alive: *mut c_void) {
  // The table's contract: the borrower gives back the token it was given, once.
  // SAFETY: an odd token is one `slots::token` made.
  if slots::is_token(keep_alive) && unsafe { slots::unpin_token(keep_alive) } {
    // A borrow by id, unpinned; its slot stays (no deleter can run).
    return;
  }
  // SAFETY: forwarded contract.
  unsafe { release_borrow_slow(env, keep_alive) }
}

/// [`release_borrow`] of a borrow by object (the count [`dltensor_from_value`] took: the last
/// one frees the storage, running a foreign producer's deleter), or of a borrow by id whose
/// handle let go meanwhile (the slot is freed). An `extern "C"` function, as
/// [`borrow_id_slow`].
#[inline(never)]
unsafe extern "C" fn release_borrow_slow(_env: sys::napi_env, keep_alive: *mut c_void) {
  if keep_alive.is_null() {
    return;
  }
  let by_id = slots::is_token(keep_alive);
  // A panic in a deleter must not unwind into the caller.
  let _ = catch_unwind(|| {
    if by_id {
      // A borrow by id whose handle let go meanwhile: the slot is freed (the storage with it).
      // SAFETY: a token `slots::token` made, whose last pin `release_borrow` just dropped.
      unsafe { slots::free_token(keep_alive) };
      return;
    }
    // SAFETY: a token `dltensor_from_value` made with `Arc::into_raw`, released once (the
    // table's contract).
    drop(unsafe { Arc::from_raw(keep_alive.cast_const().cast::<BorrowPin>()) });
  });
}

/// `managed_tensor_from_value`: an owning export, as `__dlpack__()` makes but without a
/// capsule and without stream synchronisation (`_no_sync`).
unsafe extern "C" fn managed_tensor_from_value(
  env: sys::napi_env,
  value: sys::napi_value,
  out: *mut *mut DLManagedTensorVersioned,
) -> i32 {
  run(env, |env, exchange| {
    if out.is_null() {
      return Err(fail(ErrorKind::InvalidArgument, "NULL output pointer"));
    }
    let (storage, layout) = match id_of_value(env, value)? {
      Some(id) => {
        let slot = slots::lookup(id).map_err(refused)?;
        // SAFETY: this thread owns the slot; the reference ends here.
        let state = unsafe { slot.state() };
        let pin = state.pin.as_ref().ok_or_else(|| refused(Refused::Stale))?;
        (pin.storage.clone(), pin.layout.clone())
      }
      None => {
        let handle = tensor_handle(env, exchange, value)?;
        (handle.storage()?.clone(), handle.layout.clone())
      }
    };
    storage.pin_for_export(env)?;
    let owner = ExportOwner::new(storage, layout);
    match export(owner, ExportFormat::Versioned)?.into_raw() {
      // SAFETY: a non-NULL out pointer; the caller now owns the tensor.
      napi_dlpack::ManagedPtr::Versioned(tensor) => unsafe { out.write(tensor.as_ptr()) },
      napi_dlpack::ManagedPtr::Legacy(_) => unreachable!("a versioned export is versioned"),
    }
    Ok(())
  })
}

/// `managed_tensor_to_value`: takes `tensor` (its deleter runs exactly once, now on failure)
/// and makes a `Tensor` of it, as `fromDLPack(capsule)` would.
unsafe extern "C" fn managed_tensor_to_value(
  env: sys::napi_env,
  tensor: *mut DLManagedTensorVersioned,
  out: *mut sys::napi_value,
) -> i32 {
  // Ownership first, so that every path below releases the tensor exactly once.
  // SAFETY: the caller hands us ownership of `tensor` (NULL is refused).
  let owned = unsafe { ForeignTensor::from_raw_versioned(tensor) };
  run(env, |env, exchange| {
    if out.is_null() {
      return Err(fail(ErrorKind::InvalidArgument, "NULL output pointer"));
    }
    let make_tensor = exchange.make_tensor;
    let handle = crate::ops::import::import_foreign(env, owned?)?;
    let (mut function, mut global, mut result) =
      (ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
    // SAFETY: a reference of this env.
    status("napi_get_reference_value", unsafe {
      sys::napi_get_reference_value(env.raw(), make_tensor, &mut function)
    })?;
    // SAFETY: our env.
    status("napi_get_global", unsafe {
      sys::napi_get_global(env.raw(), &mut global)
    })?;
    let argument = handle.raw();
    // SAFETY: live values of this env; one argument.
    status("napi_call_function", unsafe {
      sys::napi_call_function(env.raw(), global, function, 1, &argument, &mut result)
    })?;
    // SAFETY: a non-NULL out pointer.
    unsafe { out.write(result) };
    Ok(())
  })
}

/// The CUDA driver's handle of the legacy default stream.
const CU_STREAM_LEGACY: usize = 0x1;

/// `current_work_stream`: where our writes to a device are ordered. CUDA tensors of ours are
/// written on the device's legacy default stream (`CU_STREAM_LEGACY`, 0x1); other devices have
/// no stream (NULL).
unsafe extern "C" fn current_work_stream(
  env: sys::napi_env,
  device_type: i32,
  device_id: i32,
  out_stream: *mut *mut c_void,
) -> i32 {
  run(env, |_, _| {
    if out_stream.is_null() {
      return Err(fail(ErrorKind::InvalidArgument, "NULL output pointer"));
    }
    // The device rules of import: a DLPack 1.3 device type and a non-negative id.
    Device::from_dl(DLDevice {
      device_type: device_type as u32,
      device_id,
    })?;
    let stream = if device_type == DeviceType::Cuda as i32 {
      // A handle value, not a pointer to anything (the driver's CU_STREAM_LEGACY).
      ptr::without_provenance_mut::<c_void>(CU_STREAM_LEGACY)
    } else {
      ptr::null_mut()
    };
    // SAFETY: a non-NULL out pointer.
    unsafe { out_stream.write(stream) };
    Ok(())
  })
}

/// `fromDLPack`'s route for an object that lends only through an exchange table (another
/// addon's tensor class; protocol §1.3): a capsule holding the producer's owning export
/// (`managed_tensor_from_value`), which `fromDLPack` imports like any capsule, its options
/// applied there. `undefined` when `value` exposes no table with an owning export (a table of an
/// unknown major is `ERR_DLPACK_VERSION`). The producer's exception, if it threw, is passed on.
#[napi(js_name = "exchangeCapsule")]
pub fn exchange_capsule<'env>(env: &'env Env, value: Unknown<'env>) -> Result<Unknown<'env>> {
  let raw = env.raw();
  // SAFETY: our env and a live value of it.
  let found = unsafe { exchange::find(raw, value.raw())? };
  let Some(export) = found.and_then(|found| found.api().managed_tensor_from_value) else {
    let mut undefined = ptr::null_mut();
    // SAFETY: our env.
    status("napi_get_undefined", unsafe {
      sys::napi_get_undefined(raw, &mut undefined)
    })?;
    // SAFETY: a live value of this env.
    return Ok(unsafe { Unknown::from_raw_unchecked(raw, undefined) });
  };
  let mut managed = ptr::null_mut();
  // SAFETY: the producer's function, on this env's thread, with a valid out pointer.
  if unsafe { export(raw, value.raw(), &mut managed) } != 0 {
    let mut pending = false;
    // SAFETY: our env.
    unsafe { sys::napi_is_exception_pending(raw, &mut pending) };
    if !pending {
      return Err(fail(
        ErrorKind::Napi,
        "the exchange table reported a failure without an exception",
      ));
    }
    // The producer's exception (its code, its class) stays pending: returning leaves it to be
    // thrown to the caller as it is, and the value returned is never seen.
    let mut undefined = ptr::null_mut();
    // SAFETY: our env (this call is allowed with an exception pending).
    unsafe { sys::napi_get_undefined(raw, &mut undefined) };
    // SAFETY: a live value of this env.
    return Ok(unsafe { Unknown::from_raw_unchecked(raw, undefined) });
  }
  // SAFETY: the producer handed us ownership of `managed` (NULL is refused).
  let tensor = unsafe { napi_dlpack::ManagedTensor::from_raw_versioned(managed)? };
  // SAFETY: our env; on failure the tensor's deleter has run.
  let capsule = unsafe { napi_dlpack::capsule::create_capsule(raw, tensor)? };
  // SAFETY: a live value of this env.
  Ok(unsafe { Unknown::from_raw_unchecked(raw, capsule) })
}
