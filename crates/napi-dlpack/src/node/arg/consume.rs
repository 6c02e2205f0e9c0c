//! The paths that end in an owned tensor ([`ForeignTensor`]): a capsule consumed, a producer's
//! owning export, the JS protocol (`__dlpack__`) and, last, the library adapter. Both
//! [`TensorArg`](super::TensorArg) (for what it cannot borrow) and
//! [`OwnedTensorArg`](super::OwnedTensorArg) take them.

use core::ptr;

use napi::sys;

use crate::adapter;
use crate::capsule;
use crate::error::{DLPackError, ErrorKind};
use crate::exchange::{self, coded_error, take_exception, type_of};
use crate::import::ForeignTensor;

use super::errors::{coded, invalid_argument, thrown_by_argument, EXPECTED};

/// Consumes a capsule (from any producer) and validates its tensor.
///
/// # Safety
/// `env` live, `value` a live external of it.
pub(super) unsafe fn consume_capsule(
  env: sys::napi_env,
  value: sys::napi_value,
) -> napi::Result<ForeignTensor> {
  // SAFETY: forwarded contract.
  unsafe { coded(env, capsule::import_capsule(env, value)) }
}

/// Owning export through `managed_tensor_from_value`, validated.
///
/// # Safety
/// `env` live, `value` a live value of it.
pub(super) unsafe fn export_from(
  env: sys::napi_env,
  value: sys::napi_value,
  export: exchange::ManagedTensorFromValue,
) -> napi::Result<ForeignTensor> {
  let mut managed = ptr::null_mut();
  // SAFETY: the producer's function with a valid out pointer.
  if unsafe { export(env, value, &mut managed) } != 0 {
    // SAFETY: forwarded contract.
    return Err(unsafe { take_exception(env) });
  }
  // SAFETY: the producer handed us ownership of `managed` (or NULL, refused).
  unsafe { coded(env, ForeignTensor::from_raw_versioned(managed)) }
}

/// The JS protocol: `value.__dlpack__({ maxVersion: [1, 3] })`, then the capsule.
///
/// # Safety
/// `env` live, `value` a live object of it.
pub(super) unsafe fn from_protocol(
  env: sys::napi_env,
  value: sys::napi_value,
) -> napi::Result<ForeignTensor> {
  let mut method = ptr::null_mut();
  // SAFETY: a live object of this env.
  let status =
    unsafe { sys::napi_get_named_property(env, value, c"__dlpack__".as_ptr(), &mut method) };
  if status != sys::Status::napi_ok {
    // SAFETY: a getter threw: pass its exception on (coded, or as the cause of a coded one).
    return Err(unsafe { thrown_by_argument(env) });
  }
  if type_of(env, method)? != sys::ValueType::napi_function {
    // SAFETY: forwarded contract.
    return unsafe { from_adapter(env, value) };
  }
  // SAFETY: forwarded contract.
  let options = unsafe { max_version_options(env)? };
  let mut capsule_value = ptr::null_mut();
  // SAFETY: live values of this env; one argument.
  let status =
    unsafe { sys::napi_call_function(env, value, method, 1, &options, &mut capsule_value) };
  if status != sys::Status::napi_ok {
    // SAFETY: `__dlpack__` threw: pass its exception (and code) on, as above.
    return Err(unsafe { thrown_by_argument(env) });
  }
  if type_of(env, capsule_value)? != sys::ValueType::napi_external {
    // The one code for whatever `__dlpack__` returned that is not a capsule (protocol §3).
    // SAFETY: forwarded contract.
    return Err(unsafe {
      coded_error(
        env,
        &DLPackError::new(
          ErrorKind::NotACapsule,
          "__dlpack__ did not return a DLPack capsule",
        ),
      )
    });
  }
  // SAFETY: a live external of this env.
  unsafe { consume_capsule(env, capsule_value) }
}

/// The last resort: a library's tensor or image (ONNX Runtime, sharp, `ImageData`, Arrow, ...),
/// which napi-dlpack's adapter turns into a capsule over the library's memory when napi-dlpack
/// is loaded in this environment (see [`crate::adapter`]). Without it, or for a value it does
/// not recognise, the argument is refused as before.
///
/// # Safety
/// `env` live, `value` a live value of it.
unsafe fn from_adapter(env: sys::napi_env, value: sys::napi_value) -> napi::Result<ForeignTensor> {
  // SAFETY: forwarded contract.
  match unsafe { adapter::adapt(env, value)? } {
    // Checked like any capsule: whatever else a function under the adapter's key returned is
    // ERR_DLPACK_NOT_A_CAPSULE, and it is never passed to the adapter again.
    // SAFETY: a live value of this env.
    Some(capsule) => unsafe { consume_capsule(env, capsule) },
    None => Err(invalid_argument(env, EXPECTED)),
  }
}

/// `{ maxVersion: [1, 3] }`.
///
/// # Safety
/// `env` must be the live env of this thread.
unsafe fn max_version_options(env: sys::napi_env) -> napi::Result<sys::napi_value> {
  let failed =
    |what: &str, status| napi::Error::new(napi::Status::from(status), format!("{what} failed"));
  let (mut options, mut array, mut major, mut minor) = (
    ptr::null_mut(),
    ptr::null_mut(),
    ptr::null_mut(),
    ptr::null_mut(),
  );
  // SAFETY: live env; out pointers valid.
  unsafe {
    let steps = [
      (
        "napi_create_object",
        sys::napi_create_object(env, &mut options),
      ),
      (
        "napi_create_array",
        sys::napi_create_array_with_length(env, 2, &mut array),
      ),
      (
        "napi_create_uint32",
        sys::napi_create_uint32(env, crate::ffi::DLPACK_MAJOR_VERSION, &mut major),
      ),
      (
        "napi_create_uint32",
        sys::napi_create_uint32(env, crate::ffi::DLPACK_MINOR_VERSION, &mut minor),
      ),
    ];
    for (what, status) in steps {
      if status != sys::Status::napi_ok {
        return Err(failed(what, status));
      }
    }
    for (index, element) in [(0, major), (1, minor)] {
      let status = sys::napi_set_element(env, array, index, element);
      if status != sys::Status::napi_ok {
        return Err(failed("napi_set_element", status));
      }
    }
    let status = sys::napi_set_named_property(env, options, c"maxVersion".as_ptr(), array);
    if status != sys::Status::napi_ok {
      return Err(failed("napi_set_named_property", status));
    }
  }
  Ok(options)
}
