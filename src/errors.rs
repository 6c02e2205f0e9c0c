//! The addon's one error type, and its one check of a Node-API status.
//!
//! Every fallible function of the addon returns [`Result`]. Its error is a `napi::Error` whose
//! status is the stable error code (`ERR_DLPACK_*`, see the table in docs/api.md): napi-rs throws it
//! as the JS error's `code`, and so do the raw entry points (`binding::fast`) and the exchange
//! table (`exchange`). The core crate's `DLPackError` converts into it with `?`.

use napi::sys;
use napi_dlpack::{DLPackError, ErrorKind};

/// An error on its way to JS: `status` is the stable code, `reason` the message.
pub(crate) type Error = napi::Error<&'static str>;

pub(crate) type Result<T> = std::result::Result<T, Error>;

/// An error of `kind` (its code) with `message`.
pub(crate) fn fail(kind: ErrorKind, message: impl Into<String>) -> Error {
  DLPackError::new(kind, message).into()
}

/// `Ok` when a Node-API call returned `napi_ok`; otherwise [`napi_failure`]. Inlined: it sits
/// on every hot path, and only its failure branch is code worth a call.
#[inline(always)]
pub(crate) fn status(what: &str, status: sys::napi_status) -> Result<()> {
  if status == sys::Status::napi_ok {
    Ok(())
  } else {
    Err(napi_failure(what, status))
  }
}

/// `ERR_DLPACK_NAPI`: the Node-API call `what` returned `status` (not `napi_ok`).
#[cold]
#[inline(never)]
pub(crate) fn napi_failure(what: &str, status: sys::napi_status) -> Error {
  fail(
    ErrorKind::Napi,
    format!("{what} failed (napi status {status})"),
  )
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn fail_carries_the_stable_code_as_status() {
    let error = fail(ErrorKind::Disposed, "gone");
    assert_eq!(error.status, "ERR_TENSOR_DISPOSED");
    assert_eq!(error.reason, "gone");
  }

  #[test]
  fn core_errors_keep_their_code() {
    let error: Error = DLPackError::new(ErrorKind::Stream, "bad stream").into();
    assert_eq!(error.status, ErrorKind::Stream.code());
    assert_eq!(error.reason, "bad stream");
  }

  #[test]
  fn status_names_the_call_and_the_status() {
    assert!(status("napi_typeof", sys::Status::napi_ok).is_ok());
    let error = status("napi_typeof", sys::Status::napi_invalid_arg).unwrap_err();
    assert_eq!(error.status, "ERR_DLPACK_NAPI");
    assert_eq!(
      error.reason,
      format!(
        "napi_typeof failed (napi status {})",
        sys::Status::napi_invalid_arg
      )
    );
  }
}
