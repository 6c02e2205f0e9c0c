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
use napi_dlpack::ffi::DLDevice;
use napi_dlpack::{Device, ErrorKind};

use crate::binding::args::{bigint_value, stream_arg};
use crate::errors::{fail, napi_failure, status, Result};
use crate::js_memory;
use crate::ops::negotiation::{CopyRequest, ExportRequest, ImportRequest, StreamOption};
use crate::own_capsule::handle_of;

#[napi(module_exports)]
pub fn register_fast_calls(exports: Object, env: Env) -> napi::Result<()> {
  // Before any handle can exist: handles start with the exchange table's header.
  crate::exchange::register_table();
  // The crate's registration of raw callbacks (what its hot calls use too).
  napi_dlpack::hot::define(
    &env,
    &exports,
    &[
      (c"exportCapsule", export_capsule),
      (c"importCapsule", import_capsule),
      (c"handleInfoInto", handle_info_into),
      (c"handleId", handle_id),
      (c"benchTaggedExternal", bench_tagged_external),
    ],
  )
}

/// Runs `body` with the call's first `N` arguments (missing ones are `undefined`) and how many
/// the caller passed (optional arguments left out are not even looked at: the hot path passes
/// none), turning an error into a thrown JS `Error` with the stable `code`, and a panic into
/// `ERR_DLPACK_NAPI` (never an unwind into V8).
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
    Err(napi_failure("napi_get_cb_info", status))
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
  status("napi_typeof", unsafe {
    sys::napi_typeof(env.raw(), value, &mut kind)
  })?;
  Ok(kind)
}

/// The argument at `index` of `argv`, if the caller passed it.
fn given<const N: usize>(
  argv: &[sys::napi_value; N],
  argc: usize,
  index: usize,
) -> Option<sys::napi_value> {
  (index < argc).then(|| argv[index])
}

fn is_nullish(kind: sys::napi_valuetype) -> bool {
  kind == sys::ValueType::napi_undefined || kind == sys::ValueType::napi_null
}

/// `boolean | null | undefined` (`None`: unset, or not passed).
fn optional_bool_arg(
  env: &Env,
  value: Option<sys::napi_value>,
  name: &str,
) -> Result<Option<bool>> {
  let Some(value) = value else {
    return Ok(None);
  };
  let kind = type_of(env, value)?;
  if is_nullish(kind) {
    return Ok(None);
  }
  let mut out = false;
  if kind == sys::ValueType::napi_boolean {
    // SAFETY: a live boolean of this env.
    status("napi_get_value_bool", unsafe {
      sys::napi_get_value_bool(env.raw(), value, &mut out)
    })?;
    return Ok(Some(out));
  }
  Err(fail(
    ErrorKind::InvalidArgument,
    format!("{name} must be a boolean, null or undefined"),
  ))
}

/// `boolean | undefined` (`default` when undefined or not passed).
fn bool_arg_or(
  env: &Env,
  value: Option<sys::napi_value>,
  name: &str,
  default: bool,
) -> Result<bool> {
  let Some(value) = value else {
    return Ok(default);
  };
  if type_of(env, value)? == sys::ValueType::napi_undefined {
    return Ok(default);
  }
  let mut out = false;
  // SAFETY: a live value of this env; non-booleans make the call fail.
  let code = unsafe { sys::napi_get_value_bool(env.raw(), value, &mut out) };
  if code != sys::Status::napi_ok {
    return Err(fail(
      ErrorKind::InvalidArgument,
      format!("{name} must be a boolean"),
    ));
  }
  Ok(out)
}

fn number(env: &Env, value: sys::napi_value) -> Result<f64> {
  let mut out = 0.0;
  // SAFETY: a live number of this env.
  status("napi_get_value_double", unsafe {
    sys::napi_get_value_double(env.raw(), value, &mut out)
  })?;
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
  status("napi_get_value_uint32", unsafe {
    sys::napi_get_value_uint32(env.raw(), value, &mut out)
  })?;
  Ok(out)
}

/// An integer `number | null | undefined` (`None`: unset, or not passed).
fn optional_integer_arg(
  env: &Env,
  value: Option<sys::napi_value>,
  name: &str,
) -> Result<Option<i64>> {
  let Some(value) = value else {
    return Ok(None);
  };
  let kind = type_of(env, value)?;
  if is_nullish(kind) {
    return Ok(None);
  }
  if kind == sys::ValueType::napi_number {
    let value = number(env, value)?;
    if value.fract() == 0.0 && value.abs() <= MAX_SAFE_INTEGER {
      return Ok(Some(value as i64));
    }
  }
  Err(fail(
    ErrorKind::InvalidArgument,
    format!("{name} must be an integer, null or undefined"),
  ))
}

/// `Number.MAX_SAFE_INTEGER`.
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// `bigint | null | undefined` (`None`: unset, or not passed).
fn bigint_arg(env: &Env, value: Option<sys::napi_value>) -> Result<Option<BigInt>> {
  let Some(value) = value else {
    return Ok(None);
  };
  match type_of(env, value)? {
    kind if is_nullish(kind) => Ok(None),
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

/// The `stream` option of `__dlpack__`: `bigint | number | null | undefined`.
fn stream_option_arg(env: &Env, value: Option<sys::napi_value>) -> Result<Option<StreamOption>> {
  let Some(value) = value else {
    return Ok(None);
  };
  match type_of(env, value)? {
    kind if is_nullish(kind) => Ok(None),
    sys::ValueType::napi_bigint => {
      let stream = bigint_arg(env, Some(value))?;
      Ok(Some(match stream.as_ref().and_then(bigint_value) {
        Some(value) => StreamOption::Integer(value),
        None => StreamOption::OutOfRange,
      }))
    }
    sys::ValueType::napi_number => {
      let value = number(env, value)?;
      Ok(Some(
        if value.fract() == 0.0 && value.abs() <= MAX_SAFE_INTEGER {
          StreamOption::Integer(value as i128)
        } else {
          StreamOption::NotAnInteger(value)
        },
      ))
    }
    _ => Err(fail(
      ErrorKind::InvalidArgument,
      "stream must be a bigint, a number, null or undefined",
    )),
  }
}

/// A device as two arguments, `deviceType, deviceId` (both `undefined`: none).
fn device_arg(
  env: &Env,
  device_type: Option<sys::napi_value>,
  device_id: Option<sys::napi_value>,
) -> Result<Option<Device>> {
  let device_type = optional_integer_arg(env, device_type, "deviceType")?;
  let device_id = optional_integer_arg(env, device_id, "deviceId")?;
  let (Some(device_type), Some(device_id)) = (device_type, device_id) else {
    return Ok(None);
  };
  match (u32::try_from(device_type), i32::try_from(device_id)) {
    (Ok(device_type), Ok(device_id)) => Ok(Some(Device::from_dl(DLDevice {
      device_type,
      device_id,
    })?)),
    _ => Err(fail(
      ErrorKind::InvalidArgument,
      format!("invalid device [{device_type}, {device_id}]"),
    )),
  }
}

fn unknown<'env>(env: &'env Env, value: sys::napi_value) -> Unknown<'env> {
  // SAFETY: a live value of this env, used only during the current call.
  unsafe { Unknown::from_raw_unchecked(env.raw(), value) }
}

/// `exportCapsule(handle, copy?: boolean | null, stream?: bigint | number | null,
/// maxMajor?: number | null, deviceType?: number, deviceId?: number)`: `__dlpack__`'s options,
/// converted but not judged (`maxVersion[0]`, `dlDevice` as a device); the request is checked
/// by `ops::negotiation::plan_export`.
unsafe extern "C" fn export_capsule(
  env: sys::napi_env,
  info: sys::napi_callback_info,
) -> sys::napi_value {
  // SAFETY: Node-API's own env and info.
  unsafe {
    run::<6>(env, info, |env, argv, argc| {
      let arg = |index| given(&argv, argc, index);
      let handle = handle_of(env, &unknown(env, argv[0]))?;
      let request = ExportRequest {
        copy: CopyRequest::from_flag(optional_bool_arg(env, arg(1), "copy")?),
        stream: stream_option_arg(env, arg(2))?,
        max_major: optional_integer_arg(env, arg(3), "maxMajor")?,
        device: device_arg(env, arg(4), arg(5))?,
      };
      Ok(crate::ops::export::handle_to_capsule(env, handle, &request)?.raw())
    })
  }
}

/// `importCapsule(capsule, copyMode: number, stream?: bigint | null, deviceType?: number,
/// deviceId?: number, refuseBeforeConsuming = true)`: `fromDLPack`'s options, converted
/// (`copyMode` 0 if needed, 1 always, 2 never); see `ops::import::capsule_to_handle`.
unsafe extern "C" fn import_capsule(
  env: sys::napi_env,
  info: sys::napi_callback_info,
) -> sys::napi_value {
  // SAFETY: Node-API's own env and info.
  unsafe {
    run::<6>(env, info, |env, argv, argc| {
      let arg = |index| given(&argv, argc, index);
      // Every argument is checked before the capsule is touched: a bad one leaves it usable.
      let request = ImportRequest {
        copy: CopyRequest::from_mode(u32_arg(env, argv[1], "copyMode")?)?,
        stream: stream_arg(bigint_arg(env, arg(2))?.as_ref())?,
        device: device_arg(env, arg(3), arg(4))?,
      };
      let refuse = bool_arg_or(env, arg(5), "refuseBeforeConsuming", true)?;
      let capsule = unknown(env, argv[0]);
      Ok(crate::ops::import::capsule_to_handle(env, capsule, &request, refuse)?.raw())
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
      crate::binding::tensor::handle_info_into(env, unknown(env, handle), unknown(env, out))?;
      Ok(ptr::null_mut()) // undefined
    })
  }
}

/// `handleId(handle, external: boolean): number | External`: the handle's id (`Tensor#id`), or
/// the id external (`Tensor#native`): a `napi_external` whose data is the id under
/// `HANDLE_ID_EXTERNAL_MARK`, never a pointer, so it needs no finalizer and no type tag (JS cannot
/// make an external; a consumer reads the id from it with one `napi_get_value_external`).
unsafe extern "C" fn handle_id(
  env: sys::napi_env,
  info: sys::napi_callback_info,
) -> sys::napi_value {
  // SAFETY: Node-API's own env and info.
  unsafe {
    run::<2>(env, info, |env, [handle, external], argc| {
      let as_external = bool_arg_or(env, (argc > 1).then_some(external), "external", false)?;
      let id = handle_of(env, &unknown(env, handle))?.id(env)?;
      id_value(env, id, as_external)
    })
  }
}

/// `id` as a JS number, or as an id external.
fn id_value(env: &Env, id: u64, as_external: bool) -> Result<sys::napi_value> {
  let mut value = ptr::null_mut();
  if as_external && cfg!(target_pointer_width = "64") {
    let data = ptr::without_provenance_mut::<std::ffi::c_void>(
      (napi_dlpack::exchange::HANDLE_ID_EXTERNAL_MARK | id) as usize,
    );
    // SAFETY: our env; no finalizer (the data is not a pointer).
    status("napi_create_external", unsafe {
      sys::napi_create_external(env.raw(), data, None, ptr::null_mut(), &mut value)
    })?;
  } else {
    // SAFETY: our env. Ids are below 2^53: exact as a double.
    status("napi_create_double", unsafe {
      sys::napi_create_double(env.raw(), id as f64, &mut value)
    })?;
  }
  Ok(value)
}

/// `benchTaggedExternal()`: the benchmark floor, the least any capsule exchange costs: allocate
/// a payload, create a `napi_external` with a finalizer and stamp a type tag (freed by GC
/// later, like a capsule).
unsafe extern "C" fn bench_tagged_external(
  env: sys::napi_env,
  info: sys::napi_callback_info,
) -> sys::napi_value {
  const BENCH_TAG: sys::napi_type_tag = sys::napi_type_tag {
    lower: 1,
    upper: 0x6265_6e63_6866_6c72,
  };
  // SAFETY: Node-API's own env and info.
  unsafe {
    run::<0>(env, info, |env, [], _| {
      // SAFETY: our env, on its thread.
      js_memory::tagged_external(env.raw(), [0u64; 2], &BENCH_TAG)
    })
  }
}
