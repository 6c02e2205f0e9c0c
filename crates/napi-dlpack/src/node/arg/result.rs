//! [`TensorResult`]: a tensor returned to JS, as a napi-dlpack `Tensor` or a capsule.

use core::ptr;

use napi::bindgen_prelude::{ToNapiValue, TypeName};
use napi::{sys, ValueType};

use crate::capsule;
use crate::error::DLPackError;
use crate::exchange::{self, take_exception};
use crate::export::{export_versioned, IntoDLPack};
use crate::managed::{ManagedPtr, ManagedTensor};

use super::errors::coded;

/// A tensor returned to JS: a napi-dlpack `Tensor` when napi-dlpack is loaded in the calling
/// environment (it hands the tensor over through the exchange table it installs on
/// `globalThis`), otherwise a capsule for any consumer's `fromDLPack`. The export happens in
/// [`TensorResult::new`]; whichever form JS gets, the deleter runs exactly once.
#[derive(Debug)]
pub struct TensorResult {
  managed: ManagedTensor,
  capsule_only: bool,
}

impl TensorResult {
  /// Exports `value` (versioned).
  pub fn new<T: IntoDLPack>(value: T) -> Result<TensorResult, DLPackError> {
    Ok(TensorResult::from_managed(export_versioned(value)?))
  }

  /// Returns an already exported tensor (for instance `ForeignTensor::into_managed()`).
  pub fn from_managed(managed: ManagedTensor) -> TensorResult {
    TensorResult {
      managed,
      capsule_only: false,
    }
  }

  /// Always a capsule, even when napi-dlpack is loaded.
  pub fn capsule(mut self) -> TensorResult {
    self.capsule_only = true;
    self
  }
}

impl TypeName for TensorResult {
  fn type_name() -> &'static str {
    "TensorResult"
  }

  fn value_type() -> ValueType {
    ValueType::Object
  }
}

impl ToNapiValue for TensorResult {
  unsafe fn to_napi_value(env: sys::napi_env, value: Self) -> napi::Result<sys::napi_value> {
    let TensorResult {
      managed,
      capsule_only,
    } = value;
    let importer = if capsule_only {
      None
    } else {
      // SAFETY: napi-rs's contract: the live env of this thread.
      unsafe { coded(env, exchange::global_api(env))? }.and_then(|api| api.managed_tensor_to_value)
    };
    match (importer, managed.as_ptr()) {
      (Some(import), ManagedPtr::Versioned(pointer)) => {
        let _ = managed.into_raw(); // ownership passes to `import`, even if it fails
        let mut out = ptr::null_mut();
        // SAFETY: the importer's function; it takes ownership of the tensor.
        if unsafe { import(env, pointer.as_ptr(), &mut out) } != 0 {
          // SAFETY: as above.
          return Err(unsafe { take_exception(env) });
        }
        Ok(out)
      }
      // SAFETY: as above; on failure the capsule code released the tensor.
      _ => unsafe { coded(env, capsule::create_capsule(env, managed)) },
    }
  }
}
