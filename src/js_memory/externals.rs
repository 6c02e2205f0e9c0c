//! `napi_external`s tagged as ours: made, read back with their type tag checked, recognised.

use std::ffi::c_void;
use std::ptr;

use napi::sys;

use crate::errors::{napi_failure, status, Result};

use super::env::{finalize_tracked, track_external};

/// A type-tagged `napi_external` that owns `value`; the external's finalizer drops it, or the
/// environment's teardown hook does if the runtime never finalizes it (see [`track_external`]).
///
/// # Safety
/// `env` must be the live environment of the calling thread.
pub unsafe fn tagged_external<T: 'static>(
  env: sys::napi_env,
  value: T,
  tag: &sys::napi_type_tag,
) -> Result<sys::napi_value> {
  unsafe fn free<T>(data: *mut c_void) {
    // SAFETY: `data` is the Box leaked below; `track_external` calls this once.
    drop(unsafe { Box::from_raw(data.cast::<T>()) });
  }
  let data = Box::into_raw(Box::new(value)).cast::<c_void>();
  // SAFETY: valid env (caller); on error `data` has been freed.
  unsafe { track_external(env, data, free::<T>)? };
  let mut external = ptr::null_mut();
  // SAFETY: valid env (caller); the finalizer owns `data` once the external exists.
  let created = unsafe {
    sys::napi_create_external(
      env,
      data,
      Some(finalize_tracked),
      ptr::null_mut(),
      &mut external,
    )
  };
  if created != sys::Status::napi_ok {
    // SAFETY: not adopted by an external; free it (and forget it) as its finalizer would.
    unsafe { finalize_tracked(env, data, ptr::null_mut()) };
    return Err(napi_failure("napi_create_external", created));
  }
  // SAFETY: `external` is a live external of this env. If tagging fails, the external still
  // owns `data` and frees it when collected.
  status("napi_type_tag_object", unsafe {
    sys::napi_type_tag_object(env, external, tag)
  })?;
  Ok(external)
}

/// The data of `value`, a `napi_external`, if it carries `tag`; `None` if it carries another
/// tag or none. The one place that reads an external of ours back (handles and capsules).
///
/// # Safety
/// `env` must be the live environment of the calling thread and `value` an external of it.
#[inline(always)]
pub unsafe fn tagged_data(
  env: sys::napi_env,
  value: sys::napi_value,
  tag: &sys::napi_type_tag,
) -> Result<Option<*mut c_void>> {
  let mut tagged = false;
  // SAFETY: forwarded contract.
  status("napi_check_object_type_tag", unsafe {
    sys::napi_check_object_type_tag(env, value, tag, &mut tagged)
  })?;
  if !tagged {
    return Ok(None);
  }
  let mut data = ptr::null_mut();
  // SAFETY: forwarded contract: an external.
  status("napi_get_value_external", unsafe {
    sys::napi_get_value_external(env, value, &mut data)
  })?;
  Ok(Some(data))
}

/// Whether `value` is a `napi_external` (of any addon).
///
/// # Safety
/// `env` must be the live environment of the calling thread and `value` a value of it.
pub unsafe fn is_external(env: sys::napi_env, value: sys::napi_value) -> Result<bool> {
  let mut value_type = 0;
  // SAFETY: forwarded contract.
  status("napi_typeof", unsafe {
    sys::napi_typeof(env, value, &mut value_type)
  })?;
  Ok(value_type == sys::ValueType::napi_external)
}
