//! The `#[napi]` functions of worker-thread transfers (`lib/transfer.ts`): tokens of the
//! process-wide registry (`ops::transfer`) and the one copy of `toShared()`.

use napi::bindgen_prelude::Unknown;
use napi::{Env, JsValue};
use napi_derive::napi;
use napi_dlpack::ErrorKind;

use crate::errors::{fail, Result};
use crate::ops::transfer;
use crate::own_capsule::handle_of;

/// Registers the tensor of `handle` under a new transfer token and returns the token's number;
/// `null` for JS memory (an ArrayBuffer or SharedArrayBuffer), which lib/transfer.ts handles. The
/// handle stays usable: sender and receiver share the memory, as two tensors of one import do.
#[napi(js_name = "transferHandle")]
pub fn transfer_handle(env: &Env, handle: Unknown<'_>) -> Result<Option<f64>> {
  // Ids stay far below 2^53 (one per transfer), so the number is exact in JS.
  Ok(transfer::register(env, handle_of(env, &handle)?)?.map(|id| id as f64))
}

/// A random key naming this process in every token (a token posted to another process is
/// refused there).
#[napi(js_name = "transferProcessKey")]
pub fn transfer_process_key() -> String {
  transfer::process_key()
}

/// The token number `id` as a registry key, or ERR_DLPACK_INVALID_ARGUMENT.
fn token_id(id: f64) -> Result<u64> {
  if id.is_finite() && id >= 1.0 && id.fract() == 0.0 && id <= (1u64 << 53) as f64 {
    Ok(id as u64)
  } else {
    Err(fail(
      ErrorKind::InvalidArgument,
      format!("a transfer token number is a positive safe integer, got {id}"),
    ))
  }
}

/// Claims token `id` on this thread: a new handle over the transferred memory. A token is
/// claimed once; afterwards (or once released) this throws ERR_DLPACK_TRANSFER_CLAIMED.
#[napi(js_name = "claimTransfer")]
pub fn claim_transfer<'env>(env: &'env Env, id: f64) -> Result<Unknown<'env>> {
  transfer::claim(env, token_id(id)?)
}

/// Releases unclaimed token `id`; false when it is not pending (claimed or released already).
#[napi(js_name = "releaseTransfer")]
pub fn release_transfer(id: f64) -> Result<bool> {
  Ok(transfer::release(token_id(id)?))
}

/// Copies the elements of a host tensor in row-major order into `bytes`, a Uint8Array of exactly
/// the elements' size that does not overlap the tensor (`toShared()`'s one copy).
#[napi(js_name = "copyHandleInto")]
pub fn copy_handle_into(env: &Env, handle: Unknown<'_>, bytes: Unknown<'_>) -> Result<()> {
  crate::ops::copy::copy_into(env, handle_of(env, &handle)?, bytes.raw())
}
