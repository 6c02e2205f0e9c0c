//! How napi-rs turns a JS value into a [`TensorArg`]: handle ids first (the hot path, inline),
//! then externals and objects (out of line), and the type name and pre-check napi-rs asks for.

use core::ptr;

use napi::bindgen_prelude::{FromNapiValue, TypeName, ValidateNapiValue};
use napi::{sys, ValueType};

use crate::exchange;

use super::by_id::borrow_by_id;
use super::by_table::{from_external, from_object};
use super::errors::{check_kind_or_number, id_of_double};
use super::tensor_arg::TensorArg;

impl FromNapiValue for TensorArg<'_> {
  // Inlined into the caller (a hot function's callback, napi-rs's generated glue): the borrow
  // of a handle id is then built in the caller's frame instead of returned through a `Result`
  // and copied again into the argument tuple. Every other kind of argument takes
  // [`from_external`] or [`from_object`], out of line.
  #[inline(always)]
  unsafe fn from_napi_value(env: sys::napi_env, value: sys::napi_value) -> napi::Result<Self> {
    // Handle ids first, by reading the value as each form, without `napi_typeof`: an id
    // external (`Tensor#native`, the hot path) costs one Node-API call, a number (`Tensor#id`)
    // two; anything else costs the failed reads more.
    let mut data = ptr::null_mut();
    // SAFETY: live env and value (napi-rs's contract for this call). Anything but an external
    // answers `napi_invalid_arg` without throwing.
    if unsafe { sys::napi_get_value_external(env, value, &mut data) } == sys::Status::napi_ok {
      if let Some(id) = exchange::handle_id_of_external(data) {
        // An id external: its value is the id, never dereferenced.
        // SAFETY: as above.
        return unsafe { borrow_by_id(env, id) };
      }
      // SAFETY: as above; `data` is the external's.
      return unsafe { from_external(env, value, data) };
    }
    let mut number = 0f64;
    // SAFETY: live env and value; anything but a number fails without throwing.
    if unsafe { sys::napi_get_value_double(env, value, &mut number) } == sys::Status::napi_ok {
      let id = id_of_double(env, number)?;
      // SAFETY: live env.
      return unsafe { borrow_by_id(env, id) };
    }
    // SAFETY: forwarded contract; neither an external nor a number.
    unsafe { from_object(env, value) }
  }
}

impl TypeName for TensorArg<'_> {
  fn type_name() -> &'static str {
    "TensorArg"
  }

  fn value_type() -> ValueType {
    ValueType::Object
  }
}

impl ValidateNapiValue for TensorArg<'_> {
  unsafe fn validate(env: sys::napi_env, value: sys::napi_value) -> napi::Result<sys::napi_value> {
    // Objects, externals, and handle ids (numbers).
    check_kind_or_number(env, value)?;
    Ok(ptr::null_mut())
  }
}
