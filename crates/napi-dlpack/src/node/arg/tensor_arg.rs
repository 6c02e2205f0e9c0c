//! [`TensorArg`]: a tensor borrowed from its producer for the call, or owned (consumed from a
//! capsule), and its accessors. How a JS value becomes one is in the sibling modules.

use core::ffi::c_void;
use core::marker::PhantomData;
use core::ptr::NonNull;

use napi::sys;

use crate::device::Device;
use crate::dtype::{DType, Element};
use crate::error::DLPackError;
use crate::exchange;
use crate::ffi::{DLTensor, DLPACK_FLAG_BITMASK_READ_ONLY};
use crate::id_slots::{self, SlotHead};
use crate::import::ForeignTensor;
use crate::layout::Layout;
use crate::view::{
  mut_slice_of, slice_of, strided_mut_of, strided_of, vec_of, BorrowedSlice, BorrowedSliceMut,
  StridedView, StridedViewMut, ViewSource,
};

/// A tensor argument, valid for the duration of the native call (see the module docs).
#[derive(Debug)]
pub struct TensorArg<'call> {
  pub(super) inner: Inner<'call>,
}

#[derive(Debug)]
pub(super) enum Inner<'call> {
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
pub(super) struct BorrowView {
  pub(super) layout: Layout,
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
  pub(super) fn new(layout: Layout, tensor: &DLTensor, flags: u64) -> Self {
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

/// A borrow from an exchange table: its view, and how to end it.
#[derive(Debug)]
pub(super) struct Borrowed<'call> {
  pub(super) view: BorrowView,
  /// The producer's token and how to give it back: what keeps the memory, shape and strides
  /// alive even if JS disposes the argument during the call (another argument's `__dlpack__`
  /// or getter may run arbitrary JS), or after it.
  pub(super) env: sys::napi_env,
  pub(super) keep_alive: *mut c_void,
  pub(super) release: exchange::ReleaseBorrow,
  /// The producer's slot, for a borrow by id made inline (`id_slots::lend`): its release is
  /// inline too.
  pub(super) slot: Option<NonNull<SlotHead>>,
  pub(super) _call: PhantomData<&'call ()>,
}

/// Ends a borrow: inline for an inline borrow by id, unless it was the last pin of a tensor
/// that let go meanwhile; else through the producer's `release_borrow`.
///
/// # Safety
/// The token of a successful borrow (and its slot, for an inline one), given here once, on the
/// env's JS thread.
#[inline(always)]
pub(super) unsafe fn end_borrow(
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
