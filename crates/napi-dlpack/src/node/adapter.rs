//! The library adapter (`include/napi_dlpack.h` part 4, `docs/protocol.md` §6): how a native
//! consumer takes the tensors of common JS libraries (ONNX Runtime and transformers.js tensors,
//! sharp's raw output, `ImageData` / `RawImage`, Apache Arrow vectors, tfjs tensors,
//! ndarray-like objects) without knowing any of them.
//!
//! The recognisers are written once, in napi-dlpack's JavaScript
//! (`lib/interop/from-library.ts`, the ones `fromDLPack` uses). When that package is loaded, it
//! defines on `globalThis` of the environment, under the registered symbol
//! `Symbol.for(ADAPTER_PROPERTY)`, a function `adapt(value)` that returns a DLPack capsule over
//! the library's own memory (zero-copy, by `fromDLPack`'s rules and with its error codes where
//! that needs a copy), or `undefined` for a value it does not recognise. A consumer calls it
//! last, after the exchange table, the capsule and `__dlpack__` checks, so the other paths pay
//! nothing for it; without napi-dlpack loaded there is no function and nothing changes.
//! [`crate::arg::TensorArg`] and [`crate::arg::OwnedTensorArg`] do exactly that.

use core::ptr;

use napi::sys;

use crate::arg::thrown_by_argument;
use crate::exchange::{cached_symbol, coded_error, type_of, SymbolCache};

/// `NAPI_DLPACK_ADAPTER_PROPERTY`: the registry key of the symbol `Symbol.for(...)` under
/// which napi-dlpack puts its library adapter on `globalThis`.
pub const ADAPTER_PROPERTY: &str = "__dlpack_napi_adapter__";

thread_local! {
  /// The [`ADAPTER_PROPERTY`] symbol of this thread's environment.
  static ADAPTER_KEY: SymbolCache = const { core::cell::Cell::new((ptr::null_mut(), ptr::null_mut())) };
}

/// Asks the library adapter of `env` for a capsule of `value`: `Ok(Some(capsule))` (a value
/// the caller must consume or drop; the adapter answers with a capsule, or anything at all if
/// someone else put a function there, so check it as any capsule), `Ok(None)` when napi-dlpack
/// is not loaded in `env` or does not recognise `value`, `Err` with the adapter's exception
/// (and its `code`) when it recognised `value` but refused it; an exception without a `code`
/// (a getter of the library object threw) comes as the `cause` of an
/// `ERR_DLPACK_INVALID_ARGUMENT` error.
///
/// # Safety
/// `env` must be the current, live environment of the calling JS thread and `value` a live
/// value of it.
pub unsafe fn adapt(
  env: sys::napi_env,
  value: sys::napi_value,
) -> napi::Result<Option<sys::napi_value>> {
  // SAFETY: forwarded contract.
  let key = unsafe { cached_symbol(&ADAPTER_KEY, env, ADAPTER_PROPERTY) }
    // SAFETY: forwarded contract.
    .map_err(|error| unsafe { coded_error(env, &error) })?;
  let (mut global, mut function) = (ptr::null_mut(), ptr::null_mut());
  // SAFETY: forwarded contract; `key` is a live symbol of this env.
  let found = unsafe {
    sys::napi_get_global(env, &mut global) == sys::Status::napi_ok
      && sys::napi_get_property(env, global, key, &mut function) == sys::Status::napi_ok
  };
  if !found {
    // SAFETY: forwarded contract (a getter on globalThis may have thrown).
    return Err(unsafe { thrown_by_argument(env) });
  }
  if type_of(env, function)? != sys::ValueType::napi_function {
    return Ok(None);
  }
  let mut result = ptr::null_mut();
  // SAFETY: live values of this env; one argument.
  if unsafe { sys::napi_call_function(env, global, function, 1, &value, &mut result) }
    != sys::Status::napi_ok
  {
    // SAFETY: the adapter threw: pass its exception (and code) on.
    return Err(unsafe { thrown_by_argument(env) });
  }
  if type_of(env, result)? == sys::ValueType::napi_undefined {
    return Ok(None);
  }
  Ok(Some(result))
}
