//! [`OwnedTensorArg`]: an argument that owns its tensor (an owning export, or a capsule
//! consumed), so that it may outlive the call, and its napi-rs conversion.

use core::ops::{Deref, DerefMut};
use core::ptr;

use napi::bindgen_prelude::{FromNapiValue, TypeName, ValidateNapiValue};
use napi::{sys, ValueType};

use crate::exchange::{self, Found};
use crate::import::ForeignTensor;

use super::consume::{consume_capsule, export_from, from_protocol};
use super::errors::{
  check_kind, check_kind_or_number, coded, coded_lookup, id_of_number, invalid_argument,
};

/// A tensor argument that owns its tensor: `Send`, usable after the call returns (move it into
/// an `AsyncTask` or a thread). It dereferences to [`ForeignTensor`] for typed access.
#[derive(Debug)]
pub struct OwnedTensorArg {
  tensor: ForeignTensor,
}

impl OwnedTensorArg {
  pub fn into_inner(self) -> ForeignTensor {
    self.tensor
  }
}

impl Deref for OwnedTensorArg {
  type Target = ForeignTensor;
  fn deref(&self) -> &ForeignTensor {
    &self.tensor
  }
}

impl DerefMut for OwnedTensorArg {
  fn deref_mut(&mut self) -> &mut ForeignTensor {
    &mut self.tensor
  }
}

/// The owning export a producer's table offers for `value` (`managed_tensor_from_value`).
fn owned_export(found: Option<Found>) -> Option<exchange::ManagedTensorFromValue> {
  found.and_then(|found| found.api().managed_tensor_from_value)
}

/// The owning export of a handle id (a number, or an id external): the default importer's
/// `managed_tensor_from_value`, given the id value as it is (napi-dlpack takes ids there).
///
/// # Safety
/// `env` live, `value` a live value of it.
unsafe fn export_by_id(env: sys::napi_env, value: sys::napi_value) -> napi::Result<ForeignTensor> {
  // SAFETY: forwarded contract.
  let api = unsafe { coded(env, exchange::id_api(env))? };
  let Some(export) = api.and_then(|api| api.managed_tensor_from_value) else {
    return Err(invalid_argument(
      env,
      "a tensor handle id needs a producer that exports by id (napi-dlpack loaded in this environment)",
    ));
  };
  // SAFETY: forwarded contract.
  unsafe { export_from(env, value, export) }
}

impl FromNapiValue for OwnedTensorArg {
  unsafe fn from_napi_value(env: sys::napi_env, value: sys::napi_value) -> napi::Result<Self> {
    let kind = check_kind_or_number(env, value)?;
    let mut data = ptr::null_mut();
    let is_id = kind == sys::ValueType::napi_number
      || (kind == sys::ValueType::napi_external
        // SAFETY: a live external of this env.
        && unsafe { sys::napi_get_value_external(env, value, &mut data) } == sys::Status::napi_ok
        && exchange::handle_id_of_external(data).is_some());
    let tensor = if is_id {
      if kind == sys::ValueType::napi_number {
        // Refuse what is no id before asking the producer.
        // SAFETY: a live number of this env.
        unsafe { id_of_number(env, value)? };
      }
      // SAFETY: as above.
      unsafe { export_by_id(env, value)? }
    } else if kind == sys::ValueType::napi_external {
      // A producer's per-object external is exported by its table; any
      // other external is consumed as a capsule.
      // SAFETY: a live external of this env.
      match owned_export(unsafe { coded(env, exchange::find_in_external(env, value))? }) {
        // SAFETY: as above.
        Some(export) => unsafe { export_from(env, value, export)? },
        // SAFETY: as above.
        None => unsafe { consume_capsule(env, value)? },
      }
    } else {
      // SAFETY: live env and object (`check_kind`).
      match owned_export(unsafe { coded_lookup(env, exchange::find_in_object(env, value))? }) {
        // SAFETY: as above.
        Some(export) => unsafe { export_from(env, value, export)? },
        // SAFETY: as above.
        None => unsafe { from_protocol(env, value)? },
      }
    };
    Ok(OwnedTensorArg { tensor })
  }
}

macro_rules! object_like_type {
  ($ty:ty, $name:literal) => {
    impl TypeName for $ty {
      fn type_name() -> &'static str {
        $name
      }

      fn value_type() -> ValueType {
        ValueType::Object
      }
    }

    impl ValidateNapiValue for $ty {
      unsafe fn validate(
        env: sys::napi_env,
        value: sys::napi_value,
      ) -> napi::Result<sys::napi_value> {
        check_kind(env, value)?;
        Ok(ptr::null_mut())
      }
    }
  };
}

object_like_type!(OwnedTensorArg, "OwnedTensorArg");

/// An owned argument must be able to travel to a worker thread.
const _: fn() = || {
  fn is_send<T: Send>() {}
  is_send::<OwnedTensorArg>();
};
