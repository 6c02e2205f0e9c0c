//! The errors of a tensor argument: every refusal and every exception a path meets becomes a
//! thrown JS error with a stable `code` (the user's own exception kept as its `cause`), and the
//! checks of a value's kind and of a handle id given as a number, shared by every path.

use core::ptr;

use napi::sys;

use crate::error::{DLPackError, ErrorKind};
use crate::exchange::{coded_error, type_of};

pub(super) fn invalid_argument(env: sys::napi_env, message: &str) -> napi::Error {
  // SAFETY: called from `from_napi_value`, whose env is the live env of this thread.
  unsafe {
    coded_error(
      env,
      &DLPackError::new(ErrorKind::InvalidArgument, message.to_string()),
    )
  }
}

/// The exception that reading an argument threw (a getter, `__dlpack__`, the library adapter),
/// taken: passed on as it is when it carries a string `code` (napi-dlpack's own errors, another
/// producer's coded ones), else wrapped in an `ERR_DLPACK_INVALID_ARGUMENT` error whose `cause`
/// is the exception. Every failure of a tensor argument then has a stable code, and the user's
/// own error is kept.
///
/// # Safety
/// `env` must be the current, live environment of the calling JS thread.
pub(crate) unsafe fn thrown_by_argument(env: sys::napi_env) -> napi::Error {
  let mut exception = ptr::null_mut();
  // SAFETY: caller contract.
  let taken = unsafe { sys::napi_get_and_clear_last_exception(env, &mut exception) };
  let kind = if taken == sys::Status::napi_ok && !exception.is_null() {
    type_of(env, exception).unwrap_or(sys::ValueType::napi_undefined)
  } else {
    sys::ValueType::napi_undefined
  };
  if kind == sys::ValueType::napi_undefined {
    // SAFETY: caller contract.
    return unsafe {
      coded_error(
        env,
        &DLPackError::new(
          ErrorKind::Napi,
          "reading the tensor argument failed without an exception",
        ),
      )
    };
  }
  // SAFETY: caller contract; `exception` is a live value of this env.
  if unsafe { has_string_code(env, exception) } {
    // SAFETY: as above.
    return napi::Error::from(unsafe {
      napi::bindgen_prelude::Unknown::from_raw_unchecked(env, exception)
    });
  }
  let (code, message) = (
    ErrorKind::InvalidArgument.code(),
    "reading the tensor argument threw (the exception is this error's cause)",
  );
  let (mut code_value, mut message_value, mut error) =
    (ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
  // SAFETY: caller contract; strings passed with their lengths; `exception` is live.
  let made = unsafe {
    sys::napi_create_string_utf8(
      env,
      code.as_ptr().cast(),
      code.len() as isize,
      &mut code_value,
    ) == sys::Status::napi_ok
      && sys::napi_create_string_utf8(
        env,
        message.as_ptr().cast(),
        message.len() as isize,
        &mut message_value,
      ) == sys::Status::napi_ok
      && sys::napi_create_error(env, code_value, message_value, &mut error) == sys::Status::napi_ok
      && sys::napi_set_named_property(env, error, c"cause".as_ptr(), exception)
        == sys::Status::napi_ok
  };
  let thrown = if made { error } else { exception };
  // SAFETY: a live value of this env.
  napi::Error::from(unsafe { napi::bindgen_prelude::Unknown::from_raw_unchecked(env, thrown) })
}

/// Whether `value` is an object whose `code` is a string. A `code` getter that throws counts
/// as none (its exception is cleared).
///
/// # Safety
/// `env` must be the current, live environment and `value` a live value of it.
unsafe fn has_string_code(env: sys::napi_env, value: sys::napi_value) -> bool {
  if !matches!(
    type_of(env, value),
    Ok(sys::ValueType::napi_object | sys::ValueType::napi_function)
  ) {
    return false;
  }
  let mut code = ptr::null_mut();
  // SAFETY: caller contract; an object of this env.
  if unsafe { sys::napi_get_named_property(env, value, c"code".as_ptr(), &mut code) }
    != sys::Status::napi_ok
  {
    let mut ignored = ptr::null_mut();
    // SAFETY: caller contract: clearing what the getter threw.
    unsafe { sys::napi_get_and_clear_last_exception(env, &mut ignored) };
    return false;
  }
  matches!(type_of(env, code), Ok(sys::ValueType::napi_string))
}

/// [`coded`] for a lookup on the argument: an exception pending (a getter under the exchange
/// symbol threw) is what the caller sees, through [`thrown_by_argument`], not the failed
/// Node-API status.
///
/// # Safety
/// `env` must be the current, live environment of the calling JS thread.
pub(super) unsafe fn coded_lookup<T>(
  env: sys::napi_env,
  result: Result<T, DLPackError>,
) -> napi::Result<T> {
  result.map_err(|error| {
    let mut pending = false;
    // SAFETY: forwarded contract.
    let status = unsafe { sys::napi_is_exception_pending(env, &mut pending) };
    if status == sys::Status::napi_ok && pending {
      // SAFETY: forwarded contract.
      unsafe { thrown_by_argument(env) }
    } else {
      // SAFETY: forwarded contract.
      unsafe { coded_error(env, &error) }
    }
  })
}

/// Runs `body`, turning a crate error into a JS error with its code.
///
/// # Safety
/// `env` must be the current, live environment of the calling JS thread.
pub(super) unsafe fn coded<T>(
  env: sys::napi_env,
  result: Result<T, DLPackError>,
) -> napi::Result<T> {
  // SAFETY: forwarded contract.
  result.map_err(|error| unsafe { coded_error(env, &error) })
}

pub(super) const EXPECTED: &str = "expected a tensor: a tensor handle id (Tensor#id, Tensor#native), an object exposing the DLPack exchange table (a napi-dlpack Tensor), a DLPack capsule, an object with __dlpack__, or (with napi-dlpack loaded) a library tensor fromDLPack recognises";

/// Rejects what no path accepts, before any work (`ValidateNapiValue`).
pub(super) fn check_kind(
  env: sys::napi_env,
  value: sys::napi_value,
) -> napi::Result<sys::napi_valuetype> {
  let value_type = type_of(env, value)?;
  match value_type {
    sys::ValueType::napi_object | sys::ValueType::napi_function | sys::ValueType::napi_external => {
      Ok(value_type)
    }
    _ => Err(invalid_argument(env, EXPECTED)),
  }
}

/// [`check_kind`] for [`TensorArg`](super::TensorArg), which also takes a handle id as a number.
pub(super) fn check_kind_or_number(
  env: sys::napi_env,
  value: sys::napi_value,
) -> napi::Result<sys::napi_valuetype> {
  let value_type = type_of(env, value)?;
  match value_type {
    sys::ValueType::napi_object
    | sys::ValueType::napi_function
    | sys::ValueType::napi_external
    | sys::ValueType::napi_number => Ok(value_type),
    _ => Err(invalid_argument(env, EXPECTED)),
  }
}

/// A handle id given as a JS number: an exact integer in `0..2^53` (read as a double, so that
/// `1.5` is refused rather than rounded to 1, as `napi_get_value_int64` would).
///
/// # Safety
/// `env` live, `value` a live number of it.
pub(super) unsafe fn id_of_number(env: sys::napi_env, value: sys::napi_value) -> napi::Result<u64> {
  let mut number = f64::NAN;
  // SAFETY: a live number of this env (NaN, refused below, if the read fails).
  unsafe { sys::napi_get_value_double(env, value, &mut number) };
  id_of_double(env, number)
}

/// [`id_of_number`] of a number already read.
#[inline(always)]
pub(super) fn id_of_double(env: sys::napi_env, number: f64) -> napi::Result<u64> {
  // Exact integers below 2^53 only: NaN fails the range test, a fraction the round trip
  // through an integer (exact in that range; cheaper than `f64::trunc`, a libm call).
  if !(0.0..9_007_199_254_740_992.0).contains(&number) || (number as u64) as f64 != number {
    return Err(invalid_argument(
      env,
      "a tensor handle id must be an integer in 0..2^53 (Tensor#id)",
    ));
  }
  Ok(number as u64)
}

/// The refusal of a borrow whose producer left strides NULL for `ndim > 0`: the exchange table
/// postdates DLPack 1.2, which made them mandatory.
pub(super) fn null_strides() -> DLPackError {
  DLPackError::new(
    ErrorKind::InvalidLayout,
    "the exchange table returned NULL strides (required since DLPack 1.2)",
  )
}
