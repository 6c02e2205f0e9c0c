//! Consumer conversions: typed, checked access to the elements of an imported tensor.

use core::marker::PhantomData;
use core::ops::{Deref, DerefMut};

use crate::aliasing::Claim;

use crate::device::Device;
use crate::dtype::{DType, Element};
use crate::error::{DLPackError, ErrorKind};
use crate::import::ForeignTensor;
use crate::layout::{element_offsets, index_offset, Layout};

/// Conversion from a borrowed imported tensor.
pub trait FromDLPack<'a>: Sized {
  fn from_dlpack(tensor: &'a ForeignTensor) -> Result<Self, DLPackError>;
}

/// Conversion from a mutably borrowed imported tensor.
pub trait FromDLPackMut<'a>: Sized {
  fn from_dlpack_mut(tensor: &'a mut ForeignTensor) -> Result<Self, DLPackError>;
}

impl ForeignTensor {
  /// Shorthand for `T::from_dlpack(self)`: `let xs: &[f32] = tensor.to()?;`.
  pub fn to<'a, T: FromDLPack<'a>>(&'a self) -> Result<T, DLPackError> {
    T::from_dlpack(self)
  }

  /// The elements of a contiguous host tensor (refused while another slice or view writes
  /// the same memory: `ERR_DLPACK_ALIASED`).
  pub fn as_slice<T: Element>(&self) -> Result<BorrowedSlice<'_, T>, DLPackError> {
    slice_of(self)
  }

  /// The elements of a contiguous, writable host tensor (refused for READ_ONLY, and while
  /// another slice or view lends the same memory: `ERR_DLPACK_ALIASED`).
  pub fn as_mut_slice<T: Element>(&mut self) -> Result<BorrowedSliceMut<'_, T>, DLPackError> {
    mut_slice_of(self)
  }

  /// A copy of the elements in row-major order, whatever the strides.
  pub fn to_vec<T: Element>(&self) -> Result<Vec<T>, DLPackError> {
    Vec::<T>::from_dlpack(self)
  }

  /// Strided element access.
  pub fn view<T: Element>(&self) -> Result<StridedView<'_, T>, DLPackError> {
    StridedView::from_dlpack(self)
  }

  /// Strided element writes (any strides; refused for READ_ONLY tensors).
  pub fn view_mut<T: Element>(&mut self) -> Result<StridedViewMut<'_, T>, DLPackError> {
    strided_mut_of(self)
  }
}

/// What the typed views need from a validated tensor: an owned import ([`ForeignTensor`]) or a
/// tensor borrowed for a native call (`crate::arg`). Crate-internal: only validated tensors
/// may implement it, since the views trust the layout.
pub(crate) trait ViewSource {
  /// The layout established by validation.
  fn layout(&self) -> &Layout;
  fn shape(&self) -> &[i64];
  /// In elements; row-major when the producer sent none.
  fn strides(&self) -> &[i64];
  /// Address of the first element, with the producer pointer's provenance.
  fn data_ptr(&self) -> *mut u8;
  fn is_read_only(&self) -> bool;

  fn dtype(&self) -> DType {
    self.layout().dtype()
  }
  fn device(&self) -> Device {
    self.layout().device()
  }
  fn numel(&self) -> usize {
    self.layout().numel()
  }
  fn span_bytes(&self) -> usize {
    self.layout().span_bytes()
  }
  /// Address of the lowest-addressed byte the tensor reaches.
  fn span_start(&self) -> usize {
    self.layout().span_start()
  }
  fn is_contiguous(&self) -> bool {
    self.layout().is_c_contiguous()
  }
}

impl ViewSource for ForeignTensor {
  fn layout(&self) -> &Layout {
    ForeignTensor::layout(self)
  }
  fn shape(&self) -> &[i64] {
    ForeignTensor::shape(self)
  }
  fn strides(&self) -> &[i64] {
    ForeignTensor::strides(self)
  }
  fn data_ptr(&self) -> *mut u8 {
    ForeignTensor::data_ptr(self)
  }
  fn is_read_only(&self) -> bool {
    ForeignTensor::is_read_only(self)
  }
}

/// Checks that `T` matches the tensor and the memory is host-readable and aligned.
fn check_readable<T: Element>(tensor: &impl ViewSource) -> Result<(), DLPackError> {
  if tensor.dtype() != T::DTYPE {
    return Err(DLPackError::new(
      ErrorKind::DtypeMismatch,
      format!("tensor holds {}, not {}", tensor.dtype(), T::DTYPE),
    ));
  }
  if !tensor.device().is_host_accessible() {
    return Err(DLPackError::new(
      ErrorKind::NotCpu,
      format!(
        "tensor memory is on {}, not host-accessible",
        tensor.device()
      ),
    ));
  }
  if tensor.numel() > 0 && !(tensor.data_ptr() as usize).is_multiple_of(align_of::<T>()) {
    return Err(DLPackError::new(
      ErrorKind::Misaligned,
      format!(
        "data + byte_offset is not aligned to {} bytes",
        align_of::<T>()
      ),
    ));
  }
  Ok(())
}

fn check_contiguous(tensor: &impl ViewSource) -> Result<(), DLPackError> {
  if tensor.is_contiguous() {
    Ok(())
  } else {
    Err(DLPackError::new(
      ErrorKind::NotContiguous,
      format!(
        "tensor with shape {:?} and strides {:?} is not row-major contiguous",
        tensor.shape(),
        tensor.strides()
      ),
    ))
  }
}

/// Rejects bool tensors holding bytes other than 0 and 1 (they would be invalid Rust `bool`s).
fn check_bits<T: Element>(bytes: &[u8]) -> Result<(), DLPackError> {
  if T::NEEDS_BIT_CHECK {
    let itemsize = size_of::<T>();
    if !bytes.chunks_exact(itemsize).all(T::is_valid_bits) {
      return Err(DLPackError::new(
        ErrorKind::InvalidBool,
        "bool tensor holds bytes other than 0 and 1",
      ));
    }
  }
  Ok(())
}

/// The elements of a contiguous host tensor, lent for reading: dereferences to `&[T]`. While
/// it lives, no other slice or view may write any byte of the tensor (`crate::aliasing`).
#[derive(Debug)]
pub struct BorrowedSlice<'a, T> {
  elements: &'a [T],
  _claim: Option<Claim>,
}

impl<T> Deref for BorrowedSlice<'_, T> {
  type Target = [T];
  fn deref(&self) -> &[T] {
    self.elements
  }
}

impl<T> AsRef<[T]> for BorrowedSlice<'_, T> {
  fn as_ref(&self) -> &[T] {
    self.elements
  }
}

impl<'b, T> IntoIterator for &'b BorrowedSlice<'_, T> {
  type Item = &'b T;
  type IntoIter = core::slice::Iter<'b, T>;
  fn into_iter(self) -> Self::IntoIter {
    self.elements.iter()
  }
}

impl<T: PartialEq, Other: AsRef<[T]> + ?Sized> PartialEq<Other> for BorrowedSlice<'_, T> {
  fn eq(&self, other: &Other) -> bool {
    self.elements == other.as_ref()
  }
}

/// The elements of a contiguous, writable host tensor, lent for writing: dereferences to
/// `&mut [T]`. While it lives, no other slice or view may touch any byte of the tensor.
#[derive(Debug)]
pub struct BorrowedSliceMut<'a, T> {
  elements: &'a mut [T],
  _claim: Option<Claim>,
}

impl<T> Deref for BorrowedSliceMut<'_, T> {
  type Target = [T];
  fn deref(&self) -> &[T] {
    self.elements
  }
}

impl<T> DerefMut for BorrowedSliceMut<'_, T> {
  fn deref_mut(&mut self) -> &mut [T] {
    self.elements
  }
}

impl<T> AsRef<[T]> for BorrowedSliceMut<'_, T> {
  fn as_ref(&self) -> &[T] {
    self.elements
  }
}

impl<T> AsMut<[T]> for BorrowedSliceMut<'_, T> {
  fn as_mut(&mut self) -> &mut [T] {
    self.elements
  }
}

impl<'b, T> IntoIterator for &'b BorrowedSliceMut<'_, T> {
  type Item = &'b T;
  type IntoIter = core::slice::Iter<'b, T>;
  fn into_iter(self) -> Self::IntoIter {
    self.elements.iter()
  }
}

impl<'b, T> IntoIterator for &'b mut BorrowedSliceMut<'_, T> {
  type Item = &'b mut T;
  type IntoIter = core::slice::IterMut<'b, T>;
  fn into_iter(self) -> Self::IntoIter {
    self.elements.iter_mut()
  }
}

impl<T: PartialEq, Other: AsRef<[T]> + ?Sized> PartialEq<Other> for BorrowedSliceMut<'_, T> {
  fn eq(&self, other: &Other) -> bool {
    *self.elements == *other.as_ref()
  }
}

impl<'a, T: Element> FromDLPack<'a> for BorrowedSlice<'a, T> {
  fn from_dlpack(tensor: &'a ForeignTensor) -> Result<BorrowedSlice<'a, T>, DLPackError> {
    slice_of(tensor)
  }
}

/// The checks of a contiguous host slice after `check_readable`, without lending it.
fn check_slice<T: Element, S: ViewSource>(tensor: &S) -> Result<(), DLPackError> {
  check_contiguous(tensor)?;
  if tensor.numel() > 0 {
    // SAFETY: validated layout: contiguous, `numel` elements of `T` starting at the aligned,
    // host-accessible first element, span within the address space; the producer keeps the
    // memory alive while `tensor` (which we borrow) owns it. Called with a claim on the span
    // held, so nothing writes it meanwhile.
    let bytes = unsafe { core::slice::from_raw_parts(tensor.data_ptr(), tensor.span_bytes()) };
    check_bits::<T>(bytes)?;
  }
  Ok(())
}

/// The elements of a contiguous host tensor (the checks of `BorrowedSlice: FromDLPack`).
pub(crate) fn slice_of<T: Element, S: ViewSource>(
  tensor: &S,
) -> Result<BorrowedSlice<'_, T>, DLPackError> {
  check_readable::<T>(tensor)?;
  // Claimed before the bytes are read for the bit check.
  let claim = Claim::shared(tensor.span_start(), tensor.span_bytes())?;
  check_slice::<T, S>(tensor)?;
  let elements = if tensor.numel() == 0 {
    &[]
  } else {
    // SAFETY: as in `check_slice`; bit validity checked for types that need it; the claim
    // keeps writers of any other tensor over these bytes out while the slice lives.
    unsafe { core::slice::from_raw_parts(tensor.data_ptr().cast::<T>(), tensor.numel()) }
  };
  Ok(BorrowedSlice {
    elements,
    _claim: claim,
  })
}

impl<'a, T: Element> FromDLPackMut<'a> for BorrowedSliceMut<'a, T> {
  fn from_dlpack_mut(
    tensor: &'a mut ForeignTensor,
  ) -> Result<BorrowedSliceMut<'a, T>, DLPackError> {
    mut_slice_of(tensor)
  }
}

/// The elements of a contiguous, writable host tensor (the checks of `BorrowedSliceMut`).
pub(crate) fn mut_slice_of<T: Element, S: ViewSource>(
  tensor: &mut S,
) -> Result<BorrowedSliceMut<'_, T>, DLPackError> {
  if tensor.is_read_only() {
    return Err(DLPackError::new(
      ErrorKind::ReadOnly,
      "tensor is flagged READ_ONLY",
    ));
  }
  check_readable::<T>(tensor)?;
  let claim = Claim::exclusive(tensor.span_start(), tensor.span_bytes())?;
  check_slice::<T, S>(tensor)?;
  let elements = if tensor.numel() == 0 {
    &mut []
  } else {
    // SAFETY: the memory `check_slice` checked, made from the tensor's own data pointer (one
    // derived from a shared slice would only permit reads); `&mut S` rules out another borrow
    // through this tensor and the exclusive claim one through any other tensor over these
    // bytes; the producer granted write access (not READ_ONLY).
    unsafe { core::slice::from_raw_parts_mut(tensor.data_ptr().cast::<T>(), tensor.numel()) }
  };
  Ok(BorrowedSliceMut {
    elements,
    _claim: claim,
  })
}

impl<'a, T: Element> FromDLPack<'a> for Vec<T> {
  fn from_dlpack(tensor: &'a ForeignTensor) -> Result<Vec<T>, DLPackError> {
    vec_of(tensor)
  }
}

/// A row-major copy of the elements, whatever the strides.
pub(crate) fn vec_of<T: Element, S: ViewSource>(tensor: &S) -> Result<Vec<T>, DLPackError> {
  if tensor.is_contiguous() {
    return slice_of::<T, S>(tensor).map(|elements| elements.to_vec());
  }
  Ok(strided_of::<T, S>(tensor)?.iter().collect())
}

/// Read access to any strided host tensor (negative, zero and non-contiguous strides). While it
/// lives, no other slice or view may write any byte of the tensor's span (`crate::aliasing`).
#[derive(Debug)]
pub struct StridedView<'a, T> {
  first: *const T,
  shape: &'a [i64],
  strides: &'a [i64],
  numel: usize,
  /// `None` for an empty tensor, and for the read view of a [`StridedViewMut`], whose
  /// exclusive claim covers it.
  claim: Option<Claim>,
  _tensor: PhantomData<&'a T>,
}

impl<T> Clone for StridedView<'_, T> {
  fn clone(&self) -> Self {
    StridedView {
      first: self.first,
      shape: self.shape,
      strides: self.strides,
      numel: self.numel,
      claim: self.claim.as_ref().map(Claim::duplicate),
      _tensor: PhantomData,
    }
  }
}

impl<'a, T: Element> FromDLPack<'a> for StridedView<'a, T> {
  fn from_dlpack(tensor: &'a ForeignTensor) -> Result<StridedView<'a, T>, DLPackError> {
    strided_of(tensor)
  }
}

/// Strided read access (the checks of `StridedView: FromDLPack`).
pub(crate) fn strided_of<T: Element, S: ViewSource>(
  tensor: &S,
) -> Result<StridedView<'_, T>, DLPackError> {
  check_readable::<T>(tensor)?;
  // Claimed before the bytes are read for the bit check.
  let claim = Claim::shared(tensor.span_start(), tensor.span_bytes())?;
  let view = StridedView {
    first: tensor.data_ptr() as *const T,
    shape: tensor.shape(),
    strides: tensor.strides(),
    numel: tensor.numel(),
    claim,
    _tensor: PhantomData,
  };
  check_strided_bits(&view)?;
  Ok(view)
}

/// Rejects bool views holding bytes other than 0 and 1. Called with a claim on the span held.
fn check_strided_bits<T: Element>(view: &StridedView<'_, T>) -> Result<(), DLPackError> {
  if T::NEEDS_BIT_CHECK {
    let itemsize = size_of::<T>();
    let all_valid = element_offsets(view.shape, view.strides, view.numel).all(|offset| {
      // SAFETY: every offset lies within the validated span; read the raw bytes only.
      let bytes = unsafe {
        core::slice::from_raw_parts(view.first.offset(offset as isize).cast::<u8>(), itemsize)
      };
      T::is_valid_bits(bytes)
    });
    if !all_valid {
      return Err(DLPackError::new(
        ErrorKind::InvalidBool,
        "bool tensor holds bytes other than 0 and 1",
      ));
    }
  }
  Ok(())
}

impl<'a, T: Element> StridedView<'a, T> {
  pub fn shape(&self) -> &'a [i64] {
    self.shape
  }

  pub fn strides(&self) -> &'a [i64] {
    self.strides
  }

  pub fn len(&self) -> usize {
    self.numel
  }

  pub fn is_empty(&self) -> bool {
    self.numel == 0
  }

  /// The element at `index` (one coordinate per dimension), or `None` when out of bounds.
  pub fn get(&self, index: &[usize]) -> Option<T> {
    let offset = index_offset(self.shape, self.strides, index)?;
    // SAFETY: the index is in bounds, so the offset lies within the validated span.
    Some(unsafe { self.first.offset(offset).read() })
  }

  /// All elements in row-major order. The iterator borrows the view, whose claim keeps
  /// writers out while it reads.
  pub fn iter(&self) -> impl Iterator<Item = T> + '_ {
    let first = self.first;
    element_offsets(self.shape, self.strides, self.numel).map(move |offset| {
      // SAFETY: offsets of in-bounds indices lie within the validated span.
      unsafe { first.offset(offset as isize).read() }
    })
  }
}

/// Write access to any strided host tensor: in-place ops on transposed, sliced or broadcast
/// (stride 0) tensors. Elements are read and written by value, never lent out as `&mut T`,
/// because with zero or overlapping strides two indices may name the same element. While it
/// lives, no other slice or view may touch any byte of the tensor's span.
#[derive(Debug)]
pub struct StridedViewMut<'a, T> {
  first: *mut T,
  shape: &'a [i64],
  strides: &'a [i64],
  numel: usize,
  _claim: Option<Claim>,
  _tensor: PhantomData<&'a mut T>,
}

/// Strided write access: the checks of [`StridedView`], and not READ_ONLY.
pub(crate) fn strided_mut_of<T: Element, S: ViewSource>(
  tensor: &mut S,
) -> Result<StridedViewMut<'_, T>, DLPackError> {
  if tensor.is_read_only() {
    return Err(DLPackError::new(
      ErrorKind::ReadOnly,
      "tensor is flagged READ_ONLY",
    ));
  }
  check_readable::<T>(tensor)?;
  // Claimed before the bytes are read for the bit check, and kept by the view.
  let claim = Claim::exclusive(tensor.span_start(), tensor.span_bytes())?;
  let numel = tensor.numel();
  check_strided_bits(&StridedView {
    first: tensor.data_ptr() as *const T,
    shape: tensor.shape(),
    strides: tensor.strides(),
    numel,
    claim: None,
    _tensor: PhantomData,
  })?;
  Ok(StridedViewMut {
    // The tensor's own pointer, not one derived from the shared view, so writes are allowed.
    first: tensor.data_ptr().cast::<T>(),
    shape: tensor.shape(),
    strides: tensor.strides(),
    numel,
    _claim: claim,
    _tensor: PhantomData,
  })
}

impl<'a, T: Element> StridedViewMut<'a, T> {
  pub fn shape(&self) -> &[i64] {
    self.shape
  }

  pub fn strides(&self) -> &[i64] {
    self.strides
  }

  pub fn len(&self) -> usize {
    self.numel
  }

  pub fn is_empty(&self) -> bool {
    self.numel == 0
  }

  /// The element at `index`, or `None` when out of bounds.
  pub fn get(&self, index: &[usize]) -> Option<T> {
    self.as_view().get(index)
  }

  /// Writes `value` at `index`; `false` (nothing written) when out of bounds.
  pub fn set(&mut self, index: &[usize], value: T) -> bool {
    match index_offset(self.shape, self.strides, index) {
      Some(offset) => {
        // SAFETY: in bounds, within the validated, writable span; `&mut self` is the only
        // access through this view.
        unsafe { self.first.offset(offset).write(value) };
        true
      }
      None => false,
    }
  }

  /// Replaces every element, in row-major order, by `f(element)`. With overlapping strides an
  /// element is visited once per index naming it.
  pub fn map_in_place(&mut self, mut f: impl FnMut(T) -> T) {
    let first = self.first;
    for offset in element_offsets(self.shape, self.strides, self.numel) {
      // SAFETY: offsets of in-bounds indices lie within the validated, writable span.
      unsafe {
        let element = first.offset(offset as isize);
        element.write(f(element.read()));
      }
    }
  }

  /// Calls `f(row-major index, element)` and stores its result: in-place ops that depend on
  /// the position (the row-major index counts from 0 to `len() - 1`).
  pub fn map_indexed(&mut self, mut f: impl FnMut(usize, T) -> T) {
    let first = self.first;
    for (position, offset) in element_offsets(self.shape, self.strides, self.numel).enumerate() {
      // SAFETY: as in `map_in_place`.
      unsafe {
        let element = first.offset(offset as isize);
        element.write(f(position, element.read()));
      }
    }
  }

  /// A read-only view of the same elements.
  pub fn as_view(&self) -> StridedView<'_, T> {
    StridedView {
      first: self.first,
      shape: self.shape,
      strides: self.strides,
      numel: self.numel,
      claim: None,
      _tensor: PhantomData,
    }
  }
}
