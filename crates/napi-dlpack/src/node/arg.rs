//! Typed tensor arguments and results for `#[napi]` functions.
//!
//! The crate docs ("Writing an addon") walk through a complete addon built on these types.
//!
//! - [`TensorArg`] lives for the call. It takes, cheapest first: a
//!   handle id, napi-dlpack's `Tensor.native` (an id external) or `Tensor.id` (a number), borrowed
//!   from the default importer's slot table, inline, or through its `borrow_id` (one slot
//!   lookup, no tag check, no validation: `docs/protocol.md` §5.6); a producer's per-object
//!   external passed as the argument itself (one tag check, no
//!   property lookup, then the table's `dltensor_from_object`); an object carrying such an
//!   external under the exchange symbol (napi-dlpack's `Tensor`: one property lookup more), or
//!   any object whose prototype exposes the exchange table (`dltensor_from_value`) — all
//!   borrowed, no capsule, no allocation: the producer holds the memory until the argument
//!   drops, whatever JS runs meanwhile; a capsule from any producer (consumed:
//!   the argument owns the tensor); any object with `__dlpack__` (called with
//!   `{ maxVersion: [1, 3] }`, then consumed); last, when napi-dlpack's JS package is loaded in
//!   the environment, the tensors and images of common libraries as they are (ONNX Runtime and
//!   transformers.js tensors, sharp's `{ data, info }`, `ImageData` / `RawImage`, Arrow
//!   vectors, tfjs tensors, ndarray-likes): napi-dlpack's adapter (see [`crate::adapter`])
//!   recognises them by `fromDLPack`'s rules and hands over a capsule over the library's own
//!   memory (zero-copy; consumed, owned), or throws `fromDLPack`'s coded error where that
//!   would need a copy (`ERR_DLPACK_NULLS`, `ERR_DLPACK_COPY_REQUIRED`, ...). Without
//!   napi-dlpack loaded such objects are refused (`ERR_DLPACK_INVALID_ARGUMENT`).
//! - [`OwnedTensorArg`] owns its tensor, so it may outlive the call (an `AsyncTask`, another
//!   thread): exchange-table producers are asked for an owning export
//!   (`managed_tensor_from_value`, given the object or the per-object external passed);
//!   capsules, `__dlpack__` objects and library objects are consumed as for [`TensorArg`].
//! - [`TensorResult`] returns an export: a napi-dlpack `Tensor` when napi-dlpack is loaded in
//!   the calling environment (through the table it installs on `globalThis`), else a capsule.
//!
//! All three name themselves in the generated `index.d.ts` (`TensorArg`, `OwnedTensorArg`,
//! `TensorResult`); napi-dlpack exports TypeScript types of the same names, so an addon's
//! `index.d.ts` is complete with `dtsHeader: "import type { TensorArg, OwnedTensorArg,
//! TensorResult } from 'napi-dlpack'"` in its `package.json`'s `napi` section.
//!
//! # Aliasing: checked when lent
//!
//! Two arguments may be the same memory: JS can call `f(x, x)`, or pass two capsules of one
//! tensor. Slices and views are therefore lent like `RefCell` borrows across every tensor in
//! the process (see [`crate::aliasing`]): while `as_mut_slice()` or `view_mut()` of one
//! argument lives, any slice or view of memory it overlaps is refused with
//! `ERR_DLPACK_ALIASED`, and the other way round. `f(x, x)` into a function that writes one
//! and reads the other is a coded error, never an overlapping `&mut` and `&`. Take the read
//! slice first and the write slice second, or the other way round: either order is checked.

use core::ffi::c_void;
use core::marker::PhantomData;
use core::ops::{Deref, DerefMut};
use core::ptr::{self, NonNull};

use napi::bindgen_prelude::{FromNapiValue, ToNapiValue, TypeName, ValidateNapiValue};
use napi::{sys, ValueType};

use crate::adapter;
use crate::capsule;
use crate::device::Device;
use crate::dtype::{DType, Element};
use crate::error::{DLPackError, ErrorKind};
use crate::exchange::{self, coded_error, take_exception, type_of, Found};
use crate::export::{export_versioned, IntoDLPack};
use crate::ffi::{DLTensor, DLPACK_FLAG_BITMASK_READ_ONLY};
use crate::id_slots::{self, SlotHead};
use crate::import::ForeignTensor;
use crate::layout::Layout;
use crate::managed::{ManagedPtr, ManagedTensor};
use crate::validation::validate;
use crate::view::{
  mut_slice_of, slice_of, strided_mut_of, strided_of, vec_of, BorrowedSlice, BorrowedSliceMut,
  StridedView, StridedViewMut, ViewSource,
};

/// A tensor argument, valid for the duration of the native call (see the module docs).
#[derive(Debug)]
pub struct TensorArg<'call> {
  inner: Inner<'call>,
}

#[derive(Debug)]
enum Inner<'call> {
  /// Filled by the producer's `dltensor_from_value`; points into the producer's memory, which
  /// the producer keeps alive until the borrow's token is released (on drop), whatever JS
  /// does with the argument meanwhile.
  Borrowed(Borrowed<'call>),
  /// Consumed from a capsule: released (deleter) when the argument drops.
  Owned(ForeignTensor),
}

/// What a borrowed argument's accessors read, derived (and checked) from the producer's
/// `DLTensor` and flags. For an inline borrow by id it is kept in the slot's scratch area
/// (`id_slots::derived`), so a tensor passed again skips the derivation.
#[derive(Clone, Copy, Debug)]
struct BorrowView {
  layout: Layout,
  /// `data + byte_offset`, as a pointer (keeping the producer pointer's provenance).
  data: *mut u8,
  /// `ndim` entries each (when `ndim > 0`), in the producer's memory.
  shape: *const i64,
  strides: *const i64,
  read_only: bool,
}

impl BorrowView {
  /// The view of a borrowed `tensor` whose [`Layout`] was checked.
  #[inline(always)]
  fn new(layout: Layout, tensor: &DLTensor, flags: u64) -> Self {
    BorrowView {
      layout,
      // `data + byte_offset` was checked not to wrap (validation, or the producer's when it
      // made the id).
      data: tensor
        .data
        .cast::<u8>()
        .wrapping_add(tensor.byte_offset as usize),
      shape: tensor.shape,
      strides: tensor.strides,
      read_only: flags & DLPACK_FLAG_BITMASK_READ_ONLY != 0,
    }
  }
}

/// The key under which this binary keeps [`BorrowView`]s in slots' scratch areas: the address
/// of this static, which no other binary's code has.
static VIEW_KEY: u8 = 0;

/// A borrow from an exchange table: its view, and how to end it.
#[derive(Debug)]
struct Borrowed<'call> {
  view: BorrowView,
  /// The producer's token and how to give it back: what keeps the memory, shape and strides
  /// alive even if JS disposes the argument during the call (another argument's `__dlpack__`
  /// or getter may run arbitrary JS), or after it.
  env: sys::napi_env,
  keep_alive: *mut c_void,
  release: exchange::ReleaseBorrow,
  /// The producer's slot, for a borrow by id made inline (`id_slots::lend`): its release is
  /// inline too.
  slot: Option<NonNull<SlotHead>>,
  _call: PhantomData<&'call ()>,
}

/// Ends a borrow: inline for an inline borrow by id, unless it was the last pin of a tensor
/// that let go meanwhile; else through the producer's `release_borrow`.
///
/// # Safety
/// The token of a successful borrow (and its slot, for an inline one), given here once, on the
/// env's JS thread.
#[inline(always)]
unsafe fn end_borrow(
  env: sys::napi_env,
  slot: Option<NonNull<SlotHead>>,
  keep_alive: *mut c_void,
  release: exchange::ReleaseBorrow,
) {
  if let Some(head) = slot {
    // SAFETY: caller contract.
    if unsafe { id_slots::unlend(head) } {
      return;
    }
  }
  // SAFETY: caller contract.
  unsafe { release(env, keep_alive) };
}

impl Drop for Borrowed<'_> {
  fn drop(&mut self) {
    // SAFETY: the token of a successful borrow, released once. `Borrowed` is not `Send` (raw
    // pointers), so this runs on the env's JS thread.
    unsafe { end_borrow(self.env, self.slot, self.keep_alive, self.release) };
  }
}

impl ViewSource for Borrowed<'_> {
  fn layout(&self) -> &Layout {
    &self.view.layout
  }

  fn shape(&self) -> &[i64] {
    if self.view.layout.ndim() == 0 {
      return &[];
    }
    // SAFETY: non-NULL, aligned, `ndim` long (validated, or guaranteed by the producer of a
    // borrow by id), alive until the token is released.
    unsafe { core::slice::from_raw_parts(self.view.shape, self.view.layout.ndim()) }
  }

  fn strides(&self) -> &[i64] {
    if self.view.layout.ndim() == 0 {
      return &[];
    }
    // SAFETY: non-NULL (checked when borrowed), aligned, `ndim` long, alive for the call.
    unsafe { core::slice::from_raw_parts(self.view.strides, self.view.layout.ndim()) }
  }

  fn data_ptr(&self) -> *mut u8 {
    self.view.data
  }

  fn is_read_only(&self) -> bool {
    self.view.read_only
  }
}

impl ViewSource for TensorArg<'_> {
  fn layout(&self) -> &Layout {
    match &self.inner {
      Inner::Borrowed(tensor) => tensor.layout(),
      Inner::Owned(tensor) => tensor.layout(),
    }
  }

  fn shape(&self) -> &[i64] {
    match &self.inner {
      Inner::Borrowed(tensor) => tensor.shape(),
      Inner::Owned(tensor) => tensor.shape(),
    }
  }

  fn strides(&self) -> &[i64] {
    match &self.inner {
      Inner::Borrowed(tensor) => tensor.strides(),
      Inner::Owned(tensor) => tensor.strides(),
    }
  }

  fn data_ptr(&self) -> *mut u8 {
    match &self.inner {
      Inner::Borrowed(tensor) => tensor.data_ptr(),
      Inner::Owned(tensor) => tensor.data_ptr(),
    }
  }

  fn is_read_only(&self) -> bool {
    match &self.inner {
      Inner::Borrowed(tensor) => tensor.is_read_only(),
      Inner::Owned(tensor) => tensor.is_read_only(),
    }
  }
}

impl<'call> TensorArg<'call> {
  /// Whether the tensor was borrowed through an exchange table (no capsule, nothing owned).
  pub fn is_borrowed(&self) -> bool {
    matches!(self.inner, Inner::Borrowed(_))
  }

  pub fn layout(&self) -> &Layout {
    ViewSource::layout(self)
  }

  pub fn dtype(&self) -> DType {
    ViewSource::dtype(self)
  }

  pub fn device(&self) -> Device {
    ViewSource::device(self)
  }

  pub fn ndim(&self) -> usize {
    self.layout().ndim()
  }

  pub fn numel(&self) -> usize {
    ViewSource::numel(self)
  }

  pub fn shape(&self) -> &[i64] {
    ViewSource::shape(self)
  }

  /// Strides in elements (row-major ones for producers that sent none).
  pub fn strides(&self) -> &[i64] {
    ViewSource::strides(self)
  }

  /// Address of the first element (`data + byte_offset`).
  pub fn data_ptr(&self) -> *mut u8 {
    ViewSource::data_ptr(self)
  }

  pub fn is_read_only(&self) -> bool {
    ViewSource::is_read_only(self)
  }

  /// Row-major contiguous (size-1 dimensions and empty tensors tolerated).
  pub fn is_contiguous(&self) -> bool {
    ViewSource::is_contiguous(self)
  }

  /// The elements of a contiguous host tensor (refused while another argument's slice or view
  /// writes the same memory: `ERR_DLPACK_ALIASED`).
  pub fn as_slice<T: Element>(&self) -> Result<BorrowedSlice<'_, T>, DLPackError> {
    slice_of(self)
  }

  /// The elements of a contiguous, writable host tensor (refused for READ_ONLY, and while
  /// another argument's slice or view lends the same memory: `ERR_DLPACK_ALIASED`).
  pub fn as_mut_slice<T: Element>(&mut self) -> Result<BorrowedSliceMut<'_, T>, DLPackError> {
    mut_slice_of(self)
  }

  /// Strided read access (refused while another view writes the same memory).
  pub fn view<T: Element>(&self) -> Result<StridedView<'_, T>, DLPackError> {
    strided_of(self)
  }

  /// Strided write access (refused for READ_ONLY, and while another view lends the same
  /// memory).
  pub fn view_mut<T: Element>(&mut self) -> Result<StridedViewMut<'_, T>, DLPackError> {
    strided_mut_of(self)
  }

  /// A row-major copy of the elements.
  pub fn to_vec<T: Element>(&self) -> Result<Vec<T>, DLPackError> {
    vec_of(self)
  }
}

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

fn invalid_argument(env: sys::napi_env, message: &str) -> napi::Error {
  // SAFETY: called from `from_napi_value`, whose env is the live env of this thread.
  unsafe {
    coded_error(
      env,
      &DLPackError::new(ErrorKind::InvalidArgument, message.to_string()),
    )
  }
}

/// The exception that reading an argument threw (a getter, `__dlpack__`, the library adapter),
/// taken: passed on as it is when it carries a string `code` (napi-dlpack's own errors, another
/// producer's coded ones), else wrapped in an `ERR_DLPACK_INVALID_ARGUMENT` error whose `cause`
/// is the exception. Every failure of a tensor argument then has a stable code, and the user's
/// own error is kept.
///
/// # Safety
/// `env` must be the current, live environment of the calling JS thread.
pub(crate) unsafe fn thrown_by_argument(env: sys::napi_env) -> napi::Error {
  let mut exception = ptr::null_mut();
  // SAFETY: caller contract.
  let taken = unsafe { sys::napi_get_and_clear_last_exception(env, &mut exception) };
  let kind = if taken == sys::Status::napi_ok && !exception.is_null() {
    type_of(env, exception).unwrap_or(sys::ValueType::napi_undefined)
  } else {
    sys::ValueType::napi_undefined
  };
  if kind == sys::ValueType::napi_undefined {
    // SAFETY: caller contract.
    return unsafe {
      coded_error(
        env,
        &DLPackError::new(
          ErrorKind::Napi,
          "reading the tensor argument failed without an exception",
        ),
      )
    };
  }
  // SAFETY: caller contract; `exception` is a live value of this env.
  if unsafe { has_string_code(env, exception) } {
    // SAFETY: as above.
    return napi::Error::from(unsafe {
      napi::bindgen_prelude::Unknown::from_raw_unchecked(env, exception)
    });
  }
  let (code, message) = (
    ErrorKind::InvalidArgument.code(),
    "reading the tensor argument threw (the exception is this error's cause)",
  );
  let (mut code_value, mut message_value, mut error) =
    (ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
  // SAFETY: caller contract; strings passed with their lengths; `exception` is live.
  let made = unsafe {
    sys::napi_create_string_utf8(
      env,
      code.as_ptr().cast(),
      code.len() as isize,
      &mut code_value,
    ) == sys::Status::napi_ok
      && sys::napi_create_string_utf8(
        env,
        message.as_ptr().cast(),
        message.len() as isize,
        &mut message_value,
      ) == sys::Status::napi_ok
      && sys::napi_create_error(env, code_value, message_value, &mut error) == sys::Status::napi_ok
      && sys::napi_set_named_property(env, error, c"cause".as_ptr(), exception)
        == sys::Status::napi_ok
  };
  let thrown = if made { error } else { exception };
  // SAFETY: a live value of this env.
  napi::Error::from(unsafe { napi::bindgen_prelude::Unknown::from_raw_unchecked(env, thrown) })
}

/// Whether `value` is an object whose `code` is a string. A `code` getter that throws counts
/// as none (its exception is cleared).
///
/// # Safety
/// `env` must be the current, live environment and `value` a live value of it.
unsafe fn has_string_code(env: sys::napi_env, value: sys::napi_value) -> bool {
  if !matches!(
    type_of(env, value),
    Ok(sys::ValueType::napi_object | sys::ValueType::napi_function)
  ) {
    return false;
  }
  let mut code = ptr::null_mut();
  // SAFETY: caller contract; an object of this env.
  if unsafe { sys::napi_get_named_property(env, value, c"code".as_ptr(), &mut code) }
    != sys::Status::napi_ok
  {
    let mut ignored = ptr::null_mut();
    // SAFETY: caller contract: clearing what the getter threw.
    unsafe { sys::napi_get_and_clear_last_exception(env, &mut ignored) };
    return false;
  }
  matches!(type_of(env, code), Ok(sys::ValueType::napi_string))
}

/// [`coded`] for a lookup on the argument: an exception pending (a getter under the exchange
/// symbol threw) is what the caller sees, through [`thrown_by_argument`], not the failed
/// Node-API status.
///
/// # Safety
/// `env` must be the current, live environment of the calling JS thread.
unsafe fn coded_lookup<T>(env: sys::napi_env, result: Result<T, DLPackError>) -> napi::Result<T> {
  result.map_err(|error| {
    let mut pending = false;
    // SAFETY: forwarded contract.
    let status = unsafe { sys::napi_is_exception_pending(env, &mut pending) };
    if status == sys::Status::napi_ok && pending {
      // SAFETY: forwarded contract.
      unsafe { thrown_by_argument(env) }
    } else {
      // SAFETY: forwarded contract.
      unsafe { coded_error(env, &error) }
    }
  })
}

/// Runs `body`, turning a crate error into a JS error with its code.
///
/// # Safety
/// `env` must be the current, live environment of the calling JS thread.
unsafe fn coded<T>(env: sys::napi_env, result: Result<T, DLPackError>) -> napi::Result<T> {
  // SAFETY: forwarded contract.
  result.map_err(|error| unsafe { coded_error(env, &error) })
}

const EXPECTED: &str = "expected a tensor: a tensor handle id (Tensor#id, Tensor#native), an object exposing the DLPack exchange table (a napi-dlpack Tensor), a DLPack capsule, an object with __dlpack__, or (with napi-dlpack loaded) a library tensor fromDLPack recognises";

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
    return Err(unsafe {
      coded_error(
        env,
        &DLPackError::new(
          ErrorKind::InvalidLayout,
          "the exchange table returned NULL strides (required since DLPack 1.2)",
        ),
      )
    });
  }
  Ok(TensorArg {
    inner: Inner::Borrowed(borrowed),
  })
}

/// Consumes a capsule (from any producer) and validates its tensor.
///
/// # Safety
/// `env` live, `value` a live external of it.
unsafe fn consume_capsule(
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
unsafe fn export_from(
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
unsafe fn from_protocol(env: sys::napi_env, value: sys::napi_value) -> napi::Result<ForeignTensor> {
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

/// Rejects what no path accepts, before any work (`ValidateNapiValue`).
fn check_kind(env: sys::napi_env, value: sys::napi_value) -> napi::Result<sys::napi_valuetype> {
  let value_type = type_of(env, value)?;
  match value_type {
    sys::ValueType::napi_object | sys::ValueType::napi_function | sys::ValueType::napi_external => {
      Ok(value_type)
    }
    _ => Err(invalid_argument(env, EXPECTED)),
  }
}

/// [`check_kind`] for [`TensorArg`], which also takes a handle id as a number.
fn check_kind_or_number(
  env: sys::napi_env,
  value: sys::napi_value,
) -> napi::Result<sys::napi_valuetype> {
  let value_type = type_of(env, value)?;
  match value_type {
    sys::ValueType::napi_object
    | sys::ValueType::napi_function
    | sys::ValueType::napi_external
    | sys::ValueType::napi_number => Ok(value_type),
    _ => Err(invalid_argument(env, EXPECTED)),
  }
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
unsafe fn borrow_by_id<'call>(env: sys::napi_env, id: u64) -> napi::Result<TensorArg<'call>> {
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

/// The view of a borrow by id from the producer's record: the [`Layout`] from the extent it
/// hands over (not validated again; only what this crate's types need is checked), and strides
/// required for `ndim > 0`.
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
  if tensor.strides.is_null() && tensor.ndim != 0 {
    return Err(DLPackError::new(
      ErrorKind::InvalidLayout,
      "the exchange table returned NULL strides (required since DLPack 1.2)",
    ));
  }
  Ok(BorrowView::new(layout, tensor, lent.flags))
}

/// A handle id given as a JS number: an exact integer in `0..2^53` (read as a double, so that
/// `1.5` is refused rather than rounded to 1, as `napi_get_value_int64` would).
///
/// # Safety
/// `env` live, `value` a live number of it.
unsafe fn id_of_number(env: sys::napi_env, value: sys::napi_value) -> napi::Result<u64> {
  let mut number = f64::NAN;
  // SAFETY: a live number of this env (NaN, refused below, if the read fails).
  unsafe { sys::napi_get_value_double(env, value, &mut number) };
  id_of_double(env, number)
}

/// [`id_of_number`] of a number already read.
#[inline(always)]
fn id_of_double(env: sys::napi_env, number: f64) -> napi::Result<u64> {
  // Exact integers below 2^53 only: NaN fails the range test, a fraction the round trip
  // through an integer (exact in that range; cheaper than `f64::trunc`, a libm call).
  if !(0.0..9_007_199_254_740_992.0).contains(&number) || (number as u64) as f64 != number {
    return Err(invalid_argument(
      env,
      "a tensor handle id must be an integer in 0..2^53 (Tensor#id)",
    ));
  }
  Ok(number as u64)
}

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

/// [`TensorArg`]'s conversion of an external that is no handle id: a producer's per-object
/// external (borrowed), else a capsule (consumed). Out of line (see `from_napi_value`).
///
/// # Safety
/// `env` live, `value` a live external of it whose data is `data`.
#[inline(never)]
unsafe fn from_external<'call>(
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
unsafe fn from_object<'call>(
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
object_like_type!(OwnedTensorArg, "OwnedTensorArg");

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

/// An owned argument must be able to travel to a worker thread.
const _: fn() = || {
  fn is_send<T: Send>() {}
  is_send::<OwnedTensorArg>();
};
