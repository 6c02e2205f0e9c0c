//! Raw Node-API entry points for the calls on the exchange's hot path: `exportCapsule`,
//! `importCapsule`, `handleInfoInto`, and the benchmark floor `benchTaggedExternal`.
//!
//! A `#[napi]` function pays napi-rs's generic argument conversion and per-call bookkeeping.
//! On the CI machine, `isCapsule` (a trivial `#[napi]` function) costs 310–390 ns per call, and
//! an empty raw callback in a C addon 25–45 ns (200 000-call loops). On a capsule round trip
//! that overhead was larger than the exchange itself, so these few functions are registered by
//! hand in `#[napi(module_exports)]` and convert their own arguments. They call the same Rust
//! functions the rest of the addon uses; their TypeScript types are in `lib/native.ts`.

use std::ffi::CString;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use napi::bindgen_prelude::{BigInt, FromNapiValue, Object, Unknown};
use napi::{sys, Env, JsValue};
use napi_derive::napi;
use napi_dlpack::ErrorKind;

use crate::tensor::{self, fail, Result};

type RawCallback = unsafe extern "C" fn(sys::napi_env, sys::napi_callback_info) -> sys::napi_value;

#[napi(module_exports)]
pub fn register_fast_calls(exports: Object, env: Env) -> napi::Result<()> {
  const CALLS: [(&str, RawCallback); 4] = [
    ("exportCapsule", export_capsule),
    ("importCapsule", import_capsule),
    ("handleInfoInto", handle_info_into),
    ("benchTaggedExternal", bench_tagged_external),
  ];
  let names: Vec<CString> = CALLS
    .iter()
    .map(|(name, _)| CString::new(*name).map_err(|e| napi::Error::from_reason(e.to_string())))
    .collect::<napi::Result<_>>()?;
  let properties: Vec<sys::napi_property_descriptor> = CALLS
    .iter()
    .zip(&names)
    .map(|((_, callback), name)| sys::napi_property_descriptor {
      utf8name: name.as_ptr(),
      name: ptr::null_mut(),
      method: Some(*callback),
      getter: None,
      setter: None,
      value: ptr::null_mut(),
      attributes: sys::PropertyAttributes::enumerable,
      data: ptr::null_mut(),
    })
    .collect();
  // SAFETY: our env and its exports object; the names outlive the call (V8 copies them).
  let status = unsafe {
    sys::napi_define_properties(
      env.raw(),
      exports.raw(),
      properties.len(),
      properties.as_ptr(),
    )
  };
  if status != sys::Status::napi_ok {
    return Err(napi::Error::from_reason(format!(
      "napi_define_properties failed with status {status}"
    )));
  }
  Ok(())
}

/// Runs `body` with the call's first `N` arguments (missing ones are `undefined`) and how many
/// were passed (so an optional argument left out costs no type check), turning an
/// error into a thrown JS `Error` with the stable `code`, and a panic into `ERR_DLPACK_NAPI`
/// (never an unwind into V8).
///
/// # Safety
/// `env` and `info` must be the ones Node-API passed to the callback.
unsafe fn run<const N: usize>(
  env: sys::napi_env,
  info: sys::napi_callback_info,
  body: impl FnOnce(&Env, [sys::napi_value; N], usize) -> Result<sys::napi_value>,
) -> sys::napi_value {
  let mut argv = [ptr::null_mut(); N];
  let mut argc = N;
  // SAFETY: the callback's own env and info; argv has room for N values.
  let status = unsafe {
    sys::napi_get_cb_info(
      env,
      info,
      &mut argc,
      argv.as_mut_ptr(),
      ptr::null_mut(),
      ptr::null_mut(),
    )
  };
  let outcome = if status == sys::Status::napi_ok {
    let env_ref = Env::from_raw(env);
    catch_unwind(AssertUnwindSafe(|| body(&env_ref, argv, argc)))
      .unwrap_or_else(|_| Err(fail(ErrorKind::Napi, "internal panic in napi-dlpack")))
  } else {
    Err(fail(
      ErrorKind::Napi,
      format!("napi_get_cb_info failed with status {status}"),
    ))
  };
  match outcome {
    Ok(value) => value,
    Err(error) => {
      throw(env, error.status, &error.reason);
      ptr::null_mut()
    }
  }
}

/// Throws a JS `Error` whose `code` is `code`.
fn throw(env: sys::napi_env, code: &str, message: &str) {
  // Interior NULs cannot occur in our codes; a message with one is cut there.
  let code = CString::new(code).unwrap_or_default();
  let message = CString::new(message.split('\0').next().unwrap_or_default()).unwrap_or_default();
  // SAFETY: the callback's env; both strings are NUL-terminated and outlive the call.
  unsafe { sys::napi_throw_error(env, code.as_ptr(), message.as_ptr()) };
}

fn type_of(env: &Env, value: sys::napi_value) -> Result<sys::napi_valuetype> {
  let mut kind = 0;
  // SAFETY: a live value of this env.
  tensor::status("napi_typeof", unsafe {
    sys::napi_typeof(env.raw(), value, &mut kind)
  })?;
  Ok(kind)
}

fn bool_arg(env: &Env, value: sys::napi_value, name: &str) -> Result<bool> {
  let mut out = false;
  // SAFETY: a live value of this env; non-booleans make the call fail.
  let status = unsafe { sys::napi_get_value_bool(env.raw(), value, &mut out) };
  if status != sys::Status::napi_ok {
    return Err(fail(
      ErrorKind::InvalidArgument,
      format!("{name} must be a boolean"),
    ));
  }
  Ok(out)
}

fn u32_arg(env: &Env, value: sys::napi_value, name: &str) -> Result<u32> {
  if type_of(env, value)? != sys::ValueType::napi_number {
    return Err(fail(
      ErrorKind::InvalidArgument,
      format!("{name} must be a number"),
    ));
  }
  let mut out = 0;
  // SAFETY: a live number of this env.
  tensor::status("napi_get_value_uint32", unsafe {
    sys::napi_get_value_uint32(env.raw(), value, &mut out)
  })?;
  Ok(out)
}

/// `bigint | null | undefined`.
fn stream_arg(env: &Env, value: sys::napi_value) -> Result<Option<BigInt>> {
  match type_of(env, value)? {
    sys::ValueType::napi_undefined | sys::ValueType::napi_null => Ok(None),
    sys::ValueType::napi_bigint => {
      // SAFETY: a live BigInt of this env.
      unsafe { BigInt::from_napi_value(env.raw(), value) }
        .map(Some)
        .map_err(|error| fail(ErrorKind::InvalidArgument, error.reason))
    }
    _ => Err(fail(
      ErrorKind::InvalidArgument,
      "stream must be a bigint, null or undefined",
    )),
  }
}

fn unknown<'env>(env: &'env Env, value: sys::napi_value) -> Unknown<'env> {
  // SAFETY: a live value of this env, used only during the current call.
  unsafe { Unknown::from_raw_unchecked(env.raw(), value) }
}

/// `exportCapsule(handle, legacy: boolean, copy: boolean, stream?: bigint | null)`.
unsafe extern "C" fn export_capsule(
  env: sys::napi_env,
  info: sys::napi_callback_info,
) -> sys::napi_value {
  // SAFETY: Node-API's own env and info.
  unsafe {
    run::<4>(env, info, |env, [handle, legacy, copy, stream], argc| {
      let legacy = bool_arg(env, legacy, "legacy")?;
      let copy = bool_arg(env, copy, "copy")?;
      // Left out (the common case, no stream): no type check.
      let stream = if argc > 3 {
        stream_arg(env, stream)?
      } else {
        None
      };
      Ok(tensor::export_capsule(env, unknown(env, handle), legacy, copy, stream)?.raw())
    })
  }
}

/// `importCapsule(capsule, copyMode: number, stream?: bigint | null)`.
unsafe extern "C" fn import_capsule(
  env: sys::napi_env,
  info: sys::napi_callback_info,
) -> sys::napi_value {
  // SAFETY: Node-API's own env and info.
  unsafe {
    run::<3>(env, info, |env, [capsule, copy_mode, stream], argc| {
      let copy_mode = u32_arg(env, copy_mode, "copyMode")?;
      // Left out (the common case, no stream): no type check.
      let stream = if argc > 2 {
        stream_arg(env, stream)?
      } else {
        None
      };
      Ok(tensor::import_capsule(env, unknown(env, capsule), copy_mode, stream)?.raw())
    })
  }
}

/// `handleInfoInto(handle, out: Float64Array): undefined`.
unsafe extern "C" fn handle_info_into(
  env: sys::napi_env,
  info: sys::napi_callback_info,
) -> sys::napi_value {
  // SAFETY: Node-API's own env and info.
  unsafe {
    run::<2>(env, info, |env, [handle, out], _| {
      tensor::handle_info_into(env, unknown(env, handle), unknown(env, out))?;
      Ok(ptr::null_mut()) // undefined
    })
  }
}

/// `benchTaggedExternal()`: the benchmark floor (see `tensor::bench_tagged_external`).
unsafe extern "C" fn bench_tagged_external(
  env: sys::napi_env,
  info: sys::napi_callback_info,
) -> sys::napi_value {
  // SAFETY: Node-API's own env and info.
  unsafe {
    run::<0>(env, info, |env, [], _| {
      Ok(tensor::bench_tagged_external(env)?.raw())
    })
  }
}
