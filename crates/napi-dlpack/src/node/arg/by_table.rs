//! [`TensorArg`]'s conversions through a producer's exchange table: a per-object external or an
//! object lending by the table is borrowed (or, from a table that only exports, exported);
//! what lends by none is consumed (see [`super::consume`]). Out of line: the hot path is
//! [`super::by_id`].

use core::ffi::c_void;
use core::marker::PhantomData;
use core::ptr;

use napi::sys;

use crate::exchange::{self, coded_error, take_exception, Found};
use crate::ffi::DLTensor;
use crate::validation::validate;

use super::consume::{consume_capsule, export_from, from_protocol};
use super::errors::{check_kind, coded, coded_lookup, invalid_argument, null_strides, EXPECTED};
use super::tensor_arg::{BorrowView, Borrowed, Inner, TensorArg};

/// Borrows through the producer's `dltensor_from_value` or `dltensor_from_object` (`fill`,
/// given the out pointers) and validates.
///
/// # Safety
/// `env` live; `fill` calls its producer's table function on `env`'s thread with the out
/// pointers it is given; `release` is that table's `release_borrow`.
unsafe fn borrow<'call>(
  env: sys::napi_env,
  fill: impl FnOnce(*mut DLTensor, *mut u64, *mut *mut c_void) -> i32,
  release: exchange::ReleaseBorrow,
) -> napi::Result<TensorArg<'call>> {
  let mut tensor = DLTensor::zeroed();
  let mut flags = 0u64;
  let mut keep_alive = ptr::null_mut();
  if fill(&mut tensor, &mut flags, &mut keep_alive) != 0 {
    // SAFETY: forwarded contract.
    return Err(unsafe { take_exception(env) });
  }
  // SAFETY: the producer filled shape/strides for `ndim` entries that stay readable until the
  // token is released (the table's contract).
  let layout = match unsafe { coded(env, validate(&tensor, flags)) } {
    Ok(layout) => layout,
    Err(error) => {
      // SAFETY: the token of the successful call above, released once.
      unsafe { release(env, keep_alive) };
      return Err(error);
    }
  };
  // From here on, dropping `borrowed` (the check below included) releases the token once.
  let borrowed = Borrowed {
    view: BorrowView::new(layout, &tensor, flags),
    env,
    keep_alive,
    release,
    slot: None,
    _call: PhantomData,
  };
  if borrowed.view.layout.strides_were_null() && borrowed.view.layout.ndim() > 0 {
    // The table postdates DLPack 1.2, which made strides mandatory for ndim > 0.
    // SAFETY: forwarded contract.
    return Err(unsafe { coded_error(env, &null_strides()) });
  }
  Ok(TensorArg {
    inner: Inner::Borrowed(borrowed),
  })
}

/// Whether what `value` lends by offers a borrow or an owning export (else the JS protocol is
/// the way).
fn lends(found: &Found) -> bool {
  let api = found.api();
  let by_object = matches!(found, Found::Object(..)) && api.dltensor_from_object().is_some();
  let borrows = api.release_borrow.is_some() && (by_object || api.dltensor_from_value.is_some());
  borrows || api.managed_tensor_from_value.is_some()
}

/// Borrows (or, from a table with only `managed_tensor_from_value`, exports) the tensor of
/// `value` through what it lends by, which [`lends`].
///
/// # Safety
/// `env` live, `value` a live value of it that `found` was found on (or, for an
/// [`exchange::OBJECT_TAG`] external, `value` itself).
unsafe fn from_found<'call>(
  env: sys::napi_env,
  value: sys::napi_value,
  found: Found,
) -> napi::Result<TensorArg<'call>> {
  let api = found.api();
  let by_object = match found {
    Found::Object(_, object) => api.dltensor_from_object().map(|fill| (fill, object)),
    Found::Table(_) => None,
  };
  if let (Some((fill, object)), Some(release)) = (by_object, api.release_borrow) {
    // The fast path (napi-dlpack's `Tensor`): the object's own data, no second lookup.
    // SAFETY: the producer's function with the object's own data, on this thread, with the
    // out pointers `borrow` provides.
    let fill = |out, flags, keep_alive| unsafe { fill(env, value, object, out, flags, keep_alive) };
    // SAFETY: as above.
    return unsafe { borrow(env, fill, release) };
  }
  if let (Some(fill), Some(release)) = (api.dltensor_from_value, api.release_borrow) {
    // SAFETY: the producer's function, on this thread, with `borrow`'s out pointers.
    let fill = |out, flags, keep_alive| unsafe { fill(env, value, out, flags, keep_alive) };
    // SAFETY: as above.
    return unsafe { borrow(env, fill, release) };
  }
  let Some(export) = api.managed_tensor_from_value else {
    // Not reached for a `found` that `lends`.
    return Err(invalid_argument(env, EXPECTED));
  };
  // SAFETY: as above.
  let tensor = unsafe { export_from(env, value, export)? };
  Ok(TensorArg {
    inner: Inner::Owned(tensor),
  })
}

/// [`TensorArg`]'s conversion of an external that is no handle id: a producer's per-object
/// external (borrowed), else a capsule (consumed). Out of line (see `from_napi_value`).
///
/// # Safety
/// `env` live, `value` a live external of it whose data is `data`.
#[inline(never)]
pub(super) unsafe fn from_external<'call>(
  env: sys::napi_env,
  value: sys::napi_value,
  data: *mut c_void,
) -> napi::Result<TensorArg<'call>> {
  // SAFETY: forwarded contract.
  if let Some(found) = unsafe { coded(env, exchange::find_in_external_data(env, value, data))? } {
    if lends(&found) {
      // SAFETY: as above; `found` is `value` itself.
      return unsafe { from_found(env, value, found) };
    }
  }
  // SAFETY: a live external of this env.
  let tensor = unsafe { consume_capsule(env, value)? };
  Ok(TensorArg {
    inner: Inner::Owned(tensor),
  })
}

/// [`TensorArg`]'s conversion of a value that is neither an external nor a number: an object
/// lending through an exchange table, else the JS protocol or the library adapter. Out of line
/// (see `from_napi_value`).
///
/// # Safety
/// `env` and `value` live (napi-rs's contract for `from_napi_value`).
#[inline(never)]
pub(super) unsafe fn from_object<'call>(
  env: sys::napi_env,
  value: sys::napi_value,
) -> napi::Result<TensorArg<'call>> {
  check_kind(env, value)?;
  // SAFETY: live env and object (napi-rs's contract for this call; not an external, and
  // `check_kind` said object or function).
  if let Some(found) = unsafe { coded_lookup(env, exchange::find_in_object(env, value))? } {
    // A table with neither a borrow nor an export falls through to the JS protocol.
    if lends(&found) {
      // SAFETY: as above; `found` was found on `value`.
      return unsafe { from_found(env, value, found) };
    }
  }
  // SAFETY: as above.
  let tensor = unsafe { from_protocol(env, value)? };
  Ok(TensorArg {
    inner: Inner::Owned(tensor),
  })
}
