//! [`TensorArg`]'s hot path: the borrow of a handle id from the default importer, inline from
//! the slot table it publishes where it can. Every function here is `#[inline(always)]` so that
//! the borrow is built in the caller's frame (see `from_napi_value`).

use core::marker::PhantomData;
use core::ptr;

use napi::sys;

use crate::error::DLPackError;
use crate::exchange::{self, coded_error, take_exception};
use crate::id_slots;

use super::errors::{coded, invalid_argument, null_strides};
use super::tensor_arg::{end_borrow, BorrowView, Borrowed, Inner, TensorArg};

/// The key under which this binary keeps [`BorrowView`]s in slots' scratch areas: the address
/// of this static, which no other binary's code has.
static VIEW_KEY: u8 = 0;

/// Borrows the tensor a handle id names (a number, or the id an id external carries) from the
/// environment's default importer (`docs/protocol.md` §5.6): inline, from the slot table it
/// publishes (`id_slots`: the id's bounds, owner thread and generation checked, a pin, and the
/// view this binary derived the last time it borrowed that tensor read back), else through its
/// `borrow_id`, which hands back its own record of the tensor or refuses the id. No tag check,
/// no property, no validation: the producer validated the tensor when it made the id, and hands
/// over its extent.
///
/// # Safety
/// `env` must be the current, live environment of the calling JS thread.
#[inline(always)]
pub(super) unsafe fn borrow_by_id<'call>(
  env: sys::napi_env,
  id: u64,
) -> napi::Result<TensorArg<'call>> {
  // SAFETY: forwarded contract.
  let Some(exchange::IdBorrow {
    borrow: borrow_id,
    release,
    slots,
  }) = (unsafe { coded(env, exchange::id_borrow(env))? })
  else {
    return Err(invalid_argument(
      env,
      "a tensor handle id needs a producer that borrows by id (napi-dlpack loaded in this environment)",
    ));
  };
  // Inline where the producer publishes its slots and the checks pass; the producer answers
  // everything else (refusals with its coded errors, its slow steps).
  // SAFETY: `slots` is a live, compatible table (`id_borrow`); this is a JS thread.
  let slot = slots.and_then(|slots| unsafe { id_slots::lend(slots, id) });
  let key = ptr::addr_of!(VIEW_KEY).addr() as u64;
  let lent = match slot {
    Some(head) => {
      // A tensor this binary borrowed before: its view, derived then.
      // SAFETY: pinned just now; only `BorrowView`s are kept under `key`.
      if let Some(view) = unsafe { id_slots::derived::<BorrowView>(head, key) } {
        return Ok(TensorArg {
          inner: Inner::Borrowed(Borrowed {
            view,
            env,
            // SAFETY: pinned.
            keep_alive: unsafe { id_slots::record(head) }.keep_alive,
            release,
            slot,
            _call: PhantomData,
          }),
        });
      }
      // SAFETY: pinned just now.
      unsafe { id_slots::record(head) }
    }
    None => {
      // SAFETY: the producer's function, on this thread.
      let lent = unsafe { borrow_id(env, id) };
      if lent.is_null() {
        // SAFETY: forwarded contract.
        return Err(unsafe { take_exception(env) });
      }
      // SAFETY: non-NULL: the producer's record, readable and unchanged until its token is
      // released (the table's contract).
      unsafe { &*lent }
    }
  };
  match view_of_lent(lent) {
    Ok(view) => {
      if let Some(head) = slot {
        // SAFETY: pinned; a `BorrowView` under this binary's key.
        unsafe { id_slots::keep_derived(head, key, view) };
      }
      // From here on, dropping the argument releases the token once.
      Ok(TensorArg {
        inner: Inner::Borrowed(Borrowed {
          view,
          env,
          keep_alive: lent.keep_alive,
          release,
          slot,
          _call: PhantomData,
        }),
      })
    }
    Err(error) => {
      // SAFETY: the token of the successful borrow above, released once.
      unsafe { end_borrow(env, slot, lent.keep_alive, release) };
      // SAFETY: forwarded contract.
      Err(unsafe { coded_error(env, &error) })
    }
  }
}

/// The view of a borrow by id from the producer's record: the
/// [`Layout`](crate::layout::Layout) from the extent it hands over (not validated again; only
/// what this crate's types need is checked), and strides required for `ndim > 0`.
#[inline(always)]
fn view_of_lent(lent: &exchange::LentTensor) -> Result<BorrowView, DLPackError> {
  let tensor = &lent.tensor;
  let layout = crate::layout::layout_from_extent(
    tensor,
    lent.flags,
    lent.extent.numel,
    lent.extent.min_offset,
    lent.extent.max_offset,
    lent.extent.c_contiguous != 0,
  )?;
  if layout.strides_were_null() {
    return Err(null_strides());
  }
  Ok(BorrowView::new(layout, tensor, lent.flags))
}
