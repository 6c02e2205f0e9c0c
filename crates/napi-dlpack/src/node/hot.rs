//! Hot calls: functions an addon exports as raw Node-API callbacks, whose arguments (tensors
//! included) are converted without napi-rs's per-call machinery.
//!
//! A `#[napi]` function with at least one argument pays napi-rs 3.16's per-call bookkeeping
//! (a `CallbackInfo`, a native-borrow scope and its barrier, a deferred-scope guard) before
//! and after the body: measured with callgrind on Node 20, an empty `#[napi]` function of one
//! argument runs ~1,000 instructions more than a raw C callback of one argument, more than
//! everything this crate does to borrow a tensor (see `docs/benchmarks.md`). A function made
//! with [`hot_function!`](crate::hot_function) is registered as the raw callback itself: it reads its arguments
//! with one `napi_get_cb_info` into a stack array, converts each with the same
//! [`FromNapiValue`] conversions a `#[napi]` function uses ([`TensorArg`](crate::arg::TensorArg),
//! [`OwnedTensorArg`](crate::arg::OwnedTensorArg), numbers, strings, ...), runs the body and
//! converts its result with [`ToNapiValue`].
//!
//! The safety of [`TensorArg`](crate::arg::TensorArg) is unchanged, since the arguments are
//! the same values: validation of every borrowed tensor, the aliasing check when slices and
//! views are lent (`f(x, x)` into a function writing one and reading the other is
//! `ERR_DLPACK_ALIASED`), `ERR_DLPACK_READ_ONLY` for writes to read-only tensors. Every borrow
//! is released on every path: the arguments are dropped when the body returns, when a later
//! argument's conversion fails, and while a panic unwinds. A panic never crosses into V8: it
//! becomes a thrown `Error` with code `ERR_DLPACK_NAPI` and the panic's message.
//!
//! What a hot function does not have: napi-rs's generated TypeScript declaration (write it in
//! the addon's `index.d.ts` header, see the example addon), `this`, and async (`AsyncTask`
//! results work: they are ordinary return values). Registration is one call in the addon's
//! `#[napi(module_exports)]` function:
//!
//! ```
//! use napi::bindgen_prelude::Object;
//! use napi::Env;
//! use napi_dlpack::arg::TensorArg;
//! use napi_dlpack::{hot, hot_function, DLPackError};
//!
//! hot_function! {
//!   /// `x *= factor` for a contiguous float32 tensor (JS: `scaleHot(x, 2)`).
//!   pub fn scale_hot(mut x: TensorArg, factor: f64) -> Result<(), DLPackError> {
//!     for value in x.as_mut_slice::<f32>()?.iter_mut() {
//!       *value *= factor as f32;
//!     }
//!     Ok(())
//!   }
//! }
//!
//! #[napi_derive::napi(module_exports)]
//! pub fn register_hot_functions(exports: Object, env: Env) -> napi::Result<()> {
//!   hot::define(&env, &exports, &[(c"scaleHot", scale_hot)])
//! }
//! ```

use core::ffi::CStr;
use core::mem::MaybeUninit;
use core::ptr;
use std::panic::{catch_unwind, AssertUnwindSafe};

use napi::bindgen_prelude::{FromNapiValue, Object, ToNapiValue};
use napi::{Env, JsValue};

use crate::error::{DLPackError, ErrorKind};

/// Re-exported for [`hot_function!`](crate::hot_function)'s expansion.
#[doc(hidden)]
pub use napi::sys;

/// What [`hot_function!`](crate::hot_function) makes: a raw Node-API callback.
pub type Callback = unsafe extern "C" fn(sys::napi_env, sys::napi_callback_info) -> sys::napi_value;

/// The most arguments a hot function takes.
pub const MAX_ARGS: usize = 8;

/// A tuple of arguments converted from a call's `argv`, in order (arities 0 to [`MAX_ARGS`]).
pub trait FromArgs: Sized {
  /// How many arguments the tuple takes.
  const ARITY: usize;

  /// Converts the first [`FromArgs::ARITY`] values of `argv`, in order. When a conversion
  /// fails, the arguments already converted are dropped (their borrows released) before the
  /// error is returned.
  ///
  /// # Safety
  /// `env` must be the live env of the current callback and `argv` point to its first
  /// [`FromArgs::ARITY`] argument values (`undefined` past the number the caller passed).
  unsafe fn from_args(env: sys::napi_env, argv: *const sys::napi_value) -> napi::Result<Self>;
}

impl FromArgs for () {
  const ARITY: usize = 0;

  unsafe fn from_args(_: sys::napi_env, _: *const sys::napi_value) -> napi::Result<()> {
    Ok(())
  }
}

macro_rules! from_args_tuple {
  ($arity:literal; $($ty:ident $index:literal),+) => {
    impl<$($ty: FromNapiValue),+> FromArgs for ($($ty,)+) {
      const ARITY: usize = $arity;

      #[inline(always)]
      unsafe fn from_args(
        env: sys::napi_env,
        argv: *const sys::napi_value,
      ) -> napi::Result<Self> {
        // In order; `?` drops the values converted so far when a later one fails.
        // SAFETY: forwarded contract: live env, the callback's own argument values, the first
        // ARITY of them filled.
        Ok(($(unsafe { $ty::from_napi_value(env, argv.add($index).read())? },)+))
      }
    }
  };
}

from_args_tuple!(1; A 0);
from_args_tuple!(2; A 0, B 1);
from_args_tuple!(3; A 0, B 1, C 2);
from_args_tuple!(4; A 0, B 1, C 2, D 3);
from_args_tuple!(5; A 0, B 1, C 2, D 3, E 4);
from_args_tuple!(6; A 0, B 1, C 2, D 3, E 4, F 5);
from_args_tuple!(7; A 0, B 1, C 2, D 3, E 4, F 5, G 6);
from_args_tuple!(8; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);

/// An error a hot function's body may return: thrown to JS with its code.
pub trait IntoJsError {
  /// Throws `self` as a JS exception (a pending exception the error stands for is rethrown
  /// as it is, with its own `code`).
  ///
  /// # Safety
  /// `env` must be the live env of the current callback.
  unsafe fn throw(self, env: sys::napi_env);
}

impl IntoJsError for DLPackError {
  unsafe fn throw(self, env: sys::napi_env) {
    // SAFETY: forwarded contract.
    unsafe { napi::Error::<&'static str>::from(self).throw(env) }
  }
}

impl<S: AsRef<str>> IntoJsError for napi::Error<S> {
  unsafe fn throw(self, env: sys::napi_env) {
    // SAFETY: forwarded contract. napi-rs puts the status (for the crate's errors, the
    // stable code) on `code`.
    unsafe { napi::JsError::from(self).throw_into(env) }
  }
}

/// The body of a raw callback: reads `A::ARITY` arguments, converts them (see [`FromArgs`]),
/// runs `body`, and returns its result converted to JS, or throws its error. A panic anywhere
/// in there (a conversion, the body, a drop) is caught: the arguments are dropped while it
/// unwinds and JS gets an `Error` with code `ERR_DLPACK_NAPI` carrying the panic's message.
/// [`hot_function!`](crate::hot_function) is the usual way to call this.
///
/// # Safety
/// `env` and `info` must be the ones Node-API passed to the callback now running.
#[inline(always)]
pub unsafe fn call<A, R, E>(
  env: sys::napi_env,
  info: sys::napi_callback_info,
  body: impl FnOnce(A) -> Result<R, E>,
) -> sys::napi_value
where
  A: FromArgs,
  R: ToNapiValue,
  E: IntoJsError,
{
  let outcome = catch_unwind(AssertUnwindSafe(|| {
    // Left uninitialised: Node-API fills the first `A::ARITY`, which are all that is read.
    let mut argv = [MaybeUninit::<sys::napi_value>::uninit(); MAX_ARGS];
    let mut argc = A::ARITY;
    // SAFETY: the callback's own env and info (caller contract); `argv` has room for
    // `A::ARITY` values (at most MAX_ARGS); Node-API fills the ones the caller left out with
    // `undefined`.
    let status = unsafe {
      sys::napi_get_cb_info(
        env,
        info,
        &mut argc,
        argv.as_mut_ptr().cast(),
        ptr::null_mut(),
        ptr::null_mut(),
      )
    };
    if status != sys::Status::napi_ok {
      let error = napi::Error::new(napi::Status::from(status), "napi_get_cb_info failed");
      // SAFETY: caller contract.
      unsafe { error.throw(env) };
      return ptr::null_mut();
    }
    // SAFETY: caller contract; `argv` as filled above.
    let converted = unsafe { A::from_args(env, argv.as_ptr().cast()) };
    let result = match converted {
      // The arguments move into the body and are dropped when it returns (or unwinds).
      Ok(args) => body(args),
      Err(error) => {
        // SAFETY: caller contract.
        unsafe { error.throw(env) };
        return ptr::null_mut();
      }
    };
    match result {
      // A callback returning NULL returns `undefined`: `()` needs no `napi_get_undefined`.
      Ok(value) if is_unit::<R>() => {
        drop(value);
        ptr::null_mut()
      }
      // SAFETY: caller contract.
      Ok(value) => match unsafe { R::to_napi_value(env, value) } {
        Ok(value) => value,
        Err(error) => {
          // SAFETY: caller contract.
          unsafe { error.throw(env) };
          ptr::null_mut()
        }
      },
      Err(error) => {
        // SAFETY: caller contract.
        unsafe { error.throw(env) };
        ptr::null_mut()
      }
    }
  }));
  match outcome {
    Ok(value) => value,
    Err(payload) => {
      let message = panic_message(&*payload);
      // A payload whose drop panics again must not unwind into V8: leak it instead.
      core::mem::forget(payload);
      let error = DLPackError::new(
        ErrorKind::Napi,
        format!("a hot function panicked: {message}"),
      );
      // Building the error allocates; a panic there (allocation failure aborts instead) is
      // not expected, but nothing may unwind out of a callback.
      let thrown = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: caller contract.
        unsafe { error.throw(env) }
      }));
      if thrown.is_err() {
        // SAFETY: caller contract; static NUL-terminated strings.
        unsafe {
          sys::napi_throw_error(
            env,
            c"ERR_DLPACK_NAPI".as_ptr(),
            c"a hot function panicked".as_ptr(),
          )
        };
      }
      ptr::null_mut()
    }
  }
}

/// Whether `R` is `()` (compiled to a constant). Should the type name's form ever change, the
/// result goes through `ToNapiValue` as any other: `undefined` either way.
fn is_unit<R>() -> bool {
  core::mem::size_of::<R>() == 0 && core::any::type_name::<R>() == "()"
}

fn panic_message(payload: &(dyn core::any::Any + Send)) -> String {
  if let Some(text) = payload.downcast_ref::<&str>() {
    (*text).to_string()
  } else if let Some(text) = payload.downcast_ref::<String>() {
    text.clone()
  } else {
    "(a panic payload that is not a string)".to_string()
  }
}

/// Defines hot functions on `exports` (in the addon's `#[napi(module_exports)]` function),
/// each under its JS name, as enumerable methods.
pub fn define(env: &Env, exports: &Object, functions: &[(&CStr, Callback)]) -> napi::Result<()> {
  let properties: Vec<sys::napi_property_descriptor> = functions
    .iter()
    .map(|&(name, callback)| sys::napi_property_descriptor {
      utf8name: name.as_ptr(),
      name: ptr::null_mut(),
      method: Some(callback),
      getter: None,
      setter: None,
      value: ptr::null_mut(),
      attributes: sys::PropertyAttributes::enumerable,
      data: ptr::null_mut(),
    })
    .collect();
  // SAFETY: a live env and its exports object (napi-rs's `Env` and `Object` of the module's
  // initialisation); the names outlive the call (V8 copies them).
  let status = unsafe {
    sys::napi_define_properties(
      env.raw(),
      exports.raw(),
      properties.len(),
      properties.as_ptr(),
    )
  };
  if status != sys::Status::napi_ok {
    return Err(napi::Error::new(
      napi::Status::from(status),
      "napi_define_properties failed for the hot functions",
    ));
  }
  Ok(())
}

/// Defines a hot function: an `unsafe extern "C"` Node-API callback (a [`Callback`]) named
/// like the function, for [`define`]. The body is an ordinary Rust function body with typed
/// arguments (any [`FromNapiValue`](napi::bindgen_prelude::FromNapiValue) type, at most
/// [`MAX_ARGS`]; `mut` allowed) returning `Result<R, E>` where `R` converts to JS
/// ([`ToNapiValue`](napi::bindgen_prelude::ToNapiValue)) and `E` is a [`DLPackError`] or a
/// `napi::Error`. See the [module docs](crate::hot).
#[macro_export]
macro_rules! hot_function {
  (
    $(#[$attr:meta])*
    $vis:vis fn $name:ident ( $( $first:ident $($second:ident)? : $ty:ty ),* $(,)? ) -> $ret:ty
    $body:block
  ) => {
    $(#[$attr])*
    ///
    /// (A raw Node-API callback made by `napi_dlpack::hot_function!`: register it with
    /// `napi_dlpack::hot::define`.)
    $vis unsafe extern "C" fn $name(
      env: $crate::hot::sys::napi_env,
      info: $crate::hot::sys::napi_callback_info,
    ) -> $crate::hot::sys::napi_value {
      // Outside the unsafe block below: the body gets no unsafe context it did not ask for.
      let body = |($( $first $($second)? ,)*): ($($ty,)*)| -> $ret { $body };
      // SAFETY: Node-API calls this callback with its own env and info.
      unsafe { $crate::hot::call(env, info, body) }
    }
  };
}
