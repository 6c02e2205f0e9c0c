//! Export: turning an owned Rust value into a `DLManagedTensor[Versioned]` that foreign code
//! owns until it calls the deleter.
//!
//! One heap allocation per export holds the managed struct, the shape and strides (inline for
//! up to four dimensions) and the exported value itself. The value is moved into that
//! allocation *before* [`IntoDLPack::tensor_info`] is called, so the data pointer it reports is
//! the one that stays valid: types that keep their elements inline are safe to export.

use core::any::TypeId;
use core::ffi::c_void;
use core::panic::AssertUnwindSafe;
use core::ptr::NonNull;
use std::sync::Arc;

use smallvec::SmallVec;

use crate::device::Device;
use crate::dtype::{DType, Element};
use crate::error::{DLPackError, ErrorKind};
use crate::ffi::{
  DLManagedTensor, DLManagedTensorDeleter, DLManagedTensorVersioned,
  DLManagedTensorVersionedDeleter, DLPackVersion, DLTensor, DLPACK_FLAG_BITMASK_IS_COPIED,
  DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED, DLPACK_FLAG_BITMASK_READ_ONLY,
};
use crate::layout::{layout_of, write_row_major_strides};
use crate::managed::{ManagedPtr, ManagedTensor};

/// Shape or strides storage; inline up to four dimensions.
pub type Dims = SmallVec<[i64; 4]>;

/// A value that can be handed to foreign code as a DLPack tensor.
///
/// # Safety
/// Implementors promise that:
/// - the [`TensorInfo`] returned by `tensor_info` describes memory that is valid for the
///   described dtype, shape, strides and byte offset, on the described device;
/// - that memory stays valid, and the data pointer unchanged, until the value is dropped
///   (the drop happens inside the DLPack deleter, which may run on any thread — hence `Send`);
/// - nobody else writes the memory while it is exported unless the info is marked read-only
///   and only readers exist, or the sharing is otherwise synchronised by the user;
/// - `tensor_info` is called once, after the value has been moved to its final heap location,
///   so pointers into the value itself are allowed. It takes `&mut self` so that a writable
///   export can derive its pointer from exclusive access (`as_mut_ptr`): a pointer derived from
///   `&self` must only be exported read-only (see [`TensorInfo::from_slice`]).
pub unsafe trait IntoDLPack: Send + 'static {
  /// Describes the memory to export. Called after `self` reached its final address.
  fn tensor_info(&mut self) -> TensorInfo;
}

/// Which owning struct to produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExportFormat {
  /// `DLManagedTensorVersioned` (DLPack ≥ 1.0), carrying flags. The default.
  #[default]
  Versioned,
  /// The legacy `DLManagedTensor`, for consumers that can only read DLPack 0.x.
  Legacy,
}

impl ExportFormat {
  /// The format to use for a consumer that announced `max_version` (`None`: it said nothing,
  /// and the JS protocol is versioned from day one, so we produce versioned).
  pub fn for_max_version(max_version: Option<(u32, u32)>) -> ExportFormat {
    match max_version {
      Some((major, _)) if major < 1 => ExportFormat::Legacy,
      _ => ExportFormat::Versioned,
    }
  }
}

/// What an export describes. Build with [`TensorInfo::contiguous`] or [`TensorInfo::strided`].
#[derive(Debug, Clone)]
pub struct TensorInfo {
  data: *mut c_void,
  dtype: DType,
  shape: Dims,
  strides: Option<Dims>,
  byte_offset: u64,
  device: Device,
  read_only: bool,
  copied: bool,
}

// SAFETY: a TensorInfo is a plain description; the pointer is never dereferenced through it.
// Whether the memory may be touched from another thread is the `IntoDLPack` contract.
unsafe impl Send for TensorInfo {}
// SAFETY: as above.
unsafe impl Sync for TensorInfo {}

impl TensorInfo {
  /// A row-major contiguous tensor on the CPU.
  pub fn contiguous(data: *mut c_void, dtype: DType, shape: &[i64]) -> TensorInfo {
    TensorInfo {
      data,
      dtype,
      shape: Dims::from_slice(shape),
      strides: None,
      byte_offset: 0,
      device: Device::CPU,
      read_only: false,
      copied: false,
    }
  }

  /// A strided tensor on the CPU; `strides` are in elements, one per dimension, and may be
  /// zero or negative.
  pub fn strided(data: *mut c_void, dtype: DType, shape: &[i64], strides: &[i64]) -> TensorInfo {
    TensorInfo {
      strides: Some(Dims::from_slice(strides)),
      ..TensorInfo::contiguous(data, dtype, shape)
    }
  }

  /// A writable 1-D view of a slice.
  pub fn from_mut_slice<T: Element>(slice: &mut [T]) -> TensorInfo {
    let len = slice.len() as i64;
    TensorInfo::contiguous(slice.as_mut_ptr().cast::<c_void>(), T::DTYPE, &[len])
  }

  /// A read-only 1-D view of a slice: the pointer comes from a shared borrow, so consumers
  /// must not write through it and the export carries `READ_ONLY`.
  pub fn from_slice<T: Element>(slice: &[T]) -> TensorInfo {
    TensorInfo::contiguous(
      slice.as_ptr() as *mut c_void,
      T::DTYPE,
      &[slice.len() as i64],
    )
    .read_only(true)
  }

  /// Bytes between `data` and the first element.
  pub fn byte_offset(mut self, byte_offset: u64) -> TensorInfo {
    self.byte_offset = byte_offset;
    self
  }

  pub fn device(mut self, device: Device) -> TensorInfo {
    self.device = device;
    self
  }

  /// Sets `READ_ONLY` on versioned exports (a legacy export of read-only data is refused).
  pub fn read_only(mut self, read_only: bool) -> TensorInfo {
    self.read_only = read_only;
    self
  }

  /// Sets `IS_COPIED`: this export is a private copy made for the consumer.
  pub fn copied(mut self, copied: bool) -> TensorInfo {
    self.copied = copied;
    self
  }

  pub fn data(&self) -> *mut c_void {
    self.data
  }

  pub fn dtype(&self) -> DType {
    self.dtype
  }

  pub fn shape(&self) -> &[i64] {
    &self.shape
  }

  pub fn strides(&self) -> Option<&[i64]> {
    self.strides.as_deref()
  }

  pub fn is_read_only(&self) -> bool {
    self.read_only
  }

  pub fn is_copied(&self) -> bool {
    self.copied
  }

  /// The DLPack flags a versioned export of this info carries.
  pub fn flags(&self) -> u64 {
    let mut flags = 0;
    if self.read_only {
      flags |= DLPACK_FLAG_BITMASK_READ_ONLY;
    }
    if self.copied {
      flags |= DLPACK_FLAG_BITMASK_IS_COPIED;
    }
    if self.dtype.is_subbyte() {
      flags |= DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED;
    }
    flags
  }
}

/// The single allocation behind one export: a header that does not depend on the owner's
/// type, then the owner. `managed` must stay the first field: the pointer handed out is the
/// address of `managed`, and `manager_ctx` points at the whole context.
#[repr(C)]
struct ExportContext<M, T> {
  header: ContextHeader<M>,
  owner: T,
}

/// The part of an export's context the deleters and [`take_owner`] read before they know the
/// owner's type. The deleters are not generic, so each format has one deleter with one address
/// (a generic function may be instantiated more than once, and then an address comparison
/// misses); `release` and `owner_type` carry what depends on the owner's type.
#[repr(C)]
struct ContextHeader<M> {
  managed: M,
  /// The shape followed by the strides (`2 * ndim` values; inline up to four dimensions).
  /// Right after `managed`, so that a consumer reading the metadata of a small tensor touches
  /// two cache lines, not three.
  dims: ExportDims,
  /// Checked by [`take_owner`] before the owner is trusted to be a `T`.
  owner_type: TypeId,
  /// Frees the context as the `ExportContext<M, T>` it is (dropping the owner).
  release: unsafe fn(*mut ContextHeader<M>),
}

/// Ranks up to this keep their shape and strides inside the export's single allocation.
const INLINE_RANK: usize = 4;

/// Shape then strides of one export: inline for the common ranks (no allocation besides the
/// context itself), on the heap for higher ones. Written once, in place, by [`fill`]: no
/// zero-fill of a growable buffer, no copy into it and then out again.
struct ExportDims {
  inline: [i64; 2 * INLINE_RANK],
  heap: Option<Box<[i64]>>,
}

impl ExportDims {
  #[inline(always)]
  const fn new() -> ExportDims {
    ExportDims {
      inline: [0; 2 * INLINE_RANK],
      heap: None,
    }
  }

  /// Room for `len` values (shape then strides), inline when they fit.
  #[inline(always)]
  fn slots(&mut self, len: usize) -> Result<&mut [i64], DLPackError> {
    if len <= self.inline.len() {
      return Ok(&mut self.inline[..len]);
    }
    let mut heap = Vec::new();
    heap
      .try_reserve_exact(len)
      .map_err(|_| DLPackError::new(ErrorKind::NoMemory, "cannot allocate shape and strides"))?;
    heap.resize(len, 0);
    Ok(self.heap.insert(heap.into_boxed_slice()))
  }
}

/// The managed struct of one format, as [`export_into`] needs to build it.
trait ManagedFormat: Sized {
  fn new() -> Self;
  fn set_tensor(&mut self, tensor: DLTensor, flags: u64, manager_ctx: *mut c_void);
  /// # Safety
  /// `ptr` must point at a live export of this format.
  unsafe fn managed_tensor(ptr: *mut Self) -> ManagedTensor;
  fn check(info: &TensorInfo) -> Result<(), DLPackError>;
}

impl ManagedFormat for DLManagedTensorVersioned {
  #[inline(always)]
  fn new() -> Self {
    DLManagedTensorVersioned {
      version: DLPackVersion::CURRENT,
      manager_ctx: core::ptr::null_mut(),
      deleter: Some(delete_versioned),
      flags: 0,
      dl_tensor: DLTensor::zeroed(),
    }
  }

  #[inline(always)]
  fn set_tensor(&mut self, tensor: DLTensor, flags: u64, manager_ctx: *mut c_void) {
    self.dl_tensor = tensor;
    self.flags = flags;
    self.manager_ctx = manager_ctx;
  }

  #[inline(always)]
  unsafe fn managed_tensor(ptr: *mut Self) -> ManagedTensor {
    // SAFETY: forwarded contract; `ptr` comes from a Box and is never NULL.
    unsafe { ManagedTensor::from_ptr(ManagedPtr::Versioned(NonNull::new_unchecked(ptr))) }
  }

  #[inline(always)]
  fn check(_info: &TensorInfo) -> Result<(), DLPackError> {
    Ok(())
  }
}

impl ManagedFormat for DLManagedTensor {
  #[inline(always)]
  fn new() -> Self {
    DLManagedTensor {
      dl_tensor: DLTensor::zeroed(),
      manager_ctx: core::ptr::null_mut(),
      deleter: Some(delete_legacy),
    }
  }

  #[inline(always)]
  fn set_tensor(&mut self, tensor: DLTensor, _flags: u64, manager_ctx: *mut c_void) {
    self.dl_tensor = tensor;
    self.manager_ctx = manager_ctx;
  }

  #[inline(always)]
  unsafe fn managed_tensor(ptr: *mut Self) -> ManagedTensor {
    // SAFETY: forwarded contract; `ptr` comes from a Box and is never NULL.
    unsafe { ManagedTensor::from_ptr(ManagedPtr::Legacy(NonNull::new_unchecked(ptr))) }
  }

  /// Read-only data and sub-byte dtypes need flags the legacy struct cannot carry (a consumer
  /// would write to read-only memory, or misread padded elements as packed).
  fn check(info: &TensorInfo) -> Result<(), DLPackError> {
    if info.read_only {
      return Err(DLPackError::new(
        ErrorKind::ReadOnly,
        "a read-only tensor cannot be exported as a legacy DLManagedTensor (it has no READ_ONLY flag); ask for maxVersion >= [1, 0]",
      ));
    }
    if info.dtype.is_subbyte() {
      return Err(DLPackError::new(
        ErrorKind::Dtype,
        format!(
          "{} needs the IS_SUBBYTE_TYPE_PADDED flag, which legacy tensors lack",
          info.dtype
        ),
      ));
    }
    Ok(())
  }
}

/// Exports `value` in the requested format.
pub fn export<T: IntoDLPack>(value: T, format: ExportFormat) -> Result<ManagedTensor, DLPackError> {
  match format {
    ExportFormat::Versioned => export_versioned(value),
    ExportFormat::Legacy => export_legacy(value),
  }
}

/// Exports `value` as a `DLManagedTensorVersioned` (version 1.3).
pub fn export_versioned<T: IntoDLPack>(value: T) -> Result<ManagedTensor, DLPackError> {
  export_into::<DLManagedTensorVersioned, T>(value)
}

/// Exports `value` as a legacy `DLManagedTensor`. Refused for read-only data and sub-byte
/// dtypes, whose flags the legacy struct cannot carry.
pub fn export_legacy<T: IntoDLPack>(value: T) -> Result<ManagedTensor, DLPackError> {
  export_into::<DLManagedTensor, T>(value)
}

/// The export itself. The context is written field by field into its heap slot, so the value
/// is moved exactly once (into its final address) and nothing larger than a field is copied.
#[inline(always)]
fn export_into<M: ManagedFormat, T: IntoDLPack>(value: T) -> Result<ManagedTensor, DLPackError> {
  let mut slot = Box::<ExportContext<M, T>>::new_uninit();
  let context = slot.as_mut_ptr();
  // SAFETY: `context` points at the uninitialised, suitably aligned allocation; each field is
  // written exactly once through a raw place (no reference to uninitialised memory is made).
  unsafe {
    let header = &raw mut (*context).header;
    (&raw mut (*header).managed).write(M::new());
    (&raw mut (*header).dims).write(ExportDims::new());
    (&raw mut (*header).owner_type).write(TypeId::of::<T>());
    (&raw mut (*header).release).write(drop_context::<M, T>);
    (&raw mut (*context).owner).write(value);
  }
  // SAFETY: every field was initialised above.
  let context = Box::into_raw(unsafe { slot.assume_init() });
  // From here on the context is reached only through this raw pointer. The shape and strides
  // pointers `fill` stores point into it, and turning it back into a Box (or moving a Box)
  // would invalidate them under Rust's aliasing rules (Miri reports that as UB).
  let reclaim_on_error = ReclaimOnDrop(context);
  // SAFETY: `context` is valid and nothing else refers to it yet. `owner` is at its final
  // address now; only then ask it where its data is.
  let info = unsafe { (*context).owner.tensor_info() };
  M::check(&info)?;
  // SAFETY: as above; this is the only reference to `dims` while it lives.
  let tensor = fill(&info, unsafe { &mut (*context).header.dims })?;
  let flags = info.flags();
  // The deleter owns the context from now on.
  core::mem::forget(reclaim_on_error);
  // SAFETY: `context` is valid; the struct is ours until the deleter reclaims it, and the
  // managed struct is complete once its tensor is set.
  unsafe {
    (*context)
      .header
      .managed
      .set_tensor(tensor, flags, context.cast());
    Ok(M::managed_tensor(&raw mut (*context).header.managed))
  }
}

/// Checks `info` and builds the `DLTensor`, storing shape then strides in `dims` (which lives
/// in the context, whose address is stable: it is a Box that is not moved again).
#[inline(always)]
fn fill(info: &TensorInfo, dims: &mut ExportDims) -> Result<DLTensor, DLPackError> {
  let first_element = (info.data as usize as u64)
    .checked_add(info.byte_offset)
    .and_then(|address| usize::try_from(address).ok())
    .ok_or_else(|| DLPackError::new(ErrorKind::ByteOffset, "data + byte_offset overflows"))?;
  let layout = layout_of(
    info.dtype,
    info.device,
    &info.shape,
    info.strides.as_deref(),
    first_element,
  )?;
  if layout.numel() > 0 && info.data.is_null() {
    return Err(DLPackError::new(
      ErrorKind::NullData,
      "exporting NULL data with elements",
    ));
  }
  let ndim = info.shape.len();
  let slots = dims.slots(2 * ndim)?;
  let (shape, strides) = slots.split_at_mut(ndim);
  shape.copy_from_slice(&info.shape);
  // Strides are never NULL when ndim > 0 (DLPack ≥ 1.2); real strides are reported as they
  // are, without normalising size-1 dimensions (consumers rely on them, pytorch#99803).
  match &info.strides {
    // `layout_of` checked there is one per dimension.
    Some(given) => strides.copy_from_slice(given),
    None => {
      if !write_row_major_strides(&info.shape, strides) {
        return Err(DLPackError::new(ErrorKind::Overflow, "strides overflow"));
      }
    }
  }
  let empty = layout.numel() == 0;
  let (shape, strides) = if ndim == 0 {
    (core::ptr::null_mut(), core::ptr::null_mut())
  } else {
    (shape.as_mut_ptr(), strides.as_mut_ptr())
  };
  Ok(DLTensor {
    // Zero-size tensors carry NULL data, as the header asks.
    data: if empty {
      core::ptr::null_mut()
    } else {
      info.data
    },
    device: info.device.to_dl(),
    ndim: ndim as i32, // ≤ MAX_NDIM, checked by layout_of
    dtype: info.dtype.to_dl(),
    shape,
    strides,
    byte_offset: if empty { 0 } else { info.byte_offset },
  })
}

/// Frees an export context whose export failed (an error or a panic in `tensor_info`), so the
/// value is dropped on every path.
struct ReclaimOnDrop<M, T>(*mut ExportContext<M, T>);

impl<M, T> Drop for ReclaimOnDrop<M, T> {
  fn drop(&mut self) {
    // SAFETY: the pointer came from Box::into_raw and the export did not hand it on.
    drop(unsafe { Box::from_raw(self.0) });
  }
}

/// The deleter of every versioned export. Never inlined, so that it exists once in the program:
/// a function the compiler may inline across crates can also be copied into each crate that
/// names it, and [`take_owner`] compares this address.
#[inline(never)]
unsafe extern "C" fn delete_versioned(managed: *mut DLManagedTensorVersioned) {
  if managed.is_null() {
    return;
  }
  // SAFETY: only `export_into` installs this deleter, so `manager_ctx` points at an export
  // context of this format, which the DLPack contract says we are now asked to free, once.
  unsafe {
    release_export(
      (*managed)
        .manager_ctx
        .cast::<ContextHeader<DLManagedTensorVersioned>>(),
    )
  }
}

/// The deleter of every legacy export (never inlined, as `delete_versioned`).
#[inline(never)]
unsafe extern "C" fn delete_legacy(managed: *mut DLManagedTensor) {
  if managed.is_null() {
    return;
  }
  // SAFETY: as in `delete_versioned`, for the legacy format.
  unsafe {
    release_export(
      (*managed)
        .manager_ctx
        .cast::<ContextHeader<DLManagedTensor>>(),
    )
  }
}

/// # Safety
/// `header` must start a live export context of format `M` that nobody uses afterwards.
unsafe fn release_export<M>(header: *mut ContextHeader<M>) {
  // SAFETY: per the contract; `release` frees the context as its real type.
  unsafe { ((*header).release)(header) }
}

/// The `release` of an `ExportContext<M, T>`.
///
/// # Safety
/// As for [`release_export`], and the context's owner must be a `T`.
unsafe fn drop_context<M, T>(header: *mut ContextHeader<M>) {
  // SAFETY: the header is the first field of the context `export_into` leaked from a Box.
  let context = unsafe { Box::from_raw(header.cast::<ExportContext<M, T>>()) };
  // A panicking Drop must not unwind into the (possibly C) caller.
  let _ = std::panic::catch_unwind(AssertUnwindSafe(move || drop(context)));
}

/// Takes back the value an export of `T` made in this process, without running the deleter:
/// the fast path for a tensor that leaves through DLPack and comes straight back (the consumer
/// can then share the original owner, with no copy and no validation of trusted metadata).
/// Returns the managed tensor unchanged when it is not such an export.
///
/// Recognition is by deleter address (only this crate installs these deleters, one per
/// format), then by the `TypeId` stored in the context.
pub fn take_owner<T: IntoDLPack>(managed: ManagedTensor) -> Result<T, ManagedTensor> {
  // Read from the prefix of the struct only (field by field): the tensor may come from any
  // producer, of any major version, and is not validated yet.
  let (context, deleter) = managed.context_and_deleter();
  match managed.as_ptr() {
    ManagedPtr::Versioned(_) => {
      let ours = deleter == delete_versioned as DLManagedTensorVersionedDeleter as usize;
      // SAFETY: when `ours`, `context` is an export context of the versioned format.
      unsafe { take_from::<DLManagedTensorVersioned, T>(managed, ours, context) }
    }
    ManagedPtr::Legacy(_) => {
      let ours = deleter == delete_legacy as DLManagedTensorDeleter as usize;
      // SAFETY: as above, for the legacy format.
      unsafe { take_from::<DLManagedTensor, T>(managed, ours, context) }
    }
  }
}

/// # Safety
/// When `ours`, `context` must be the context of the export of format `M` that `managed` owns.
#[inline(always)]
unsafe fn take_from<M, T: 'static>(
  managed: ManagedTensor,
  ours: bool,
  context: *mut c_void,
) -> Result<T, ManagedTensor> {
  // SAFETY: the header does not depend on the owner's type, so it may be read before the
  // owner's type is known.
  if !ours || unsafe { (*context.cast::<ContextHeader<M>>()).owner_type } != TypeId::of::<T>() {
    return Err(managed);
  }
  // Ownership moves to `reclaim`; no deleter call.
  let _ = managed.into_raw();
  // SAFETY: the context is an ExportContext<M, T> leaked by `export_into`.
  Ok(unsafe { reclaim(context.cast::<ExportContext<M, T>>()) })
}

/// Frees an export's context and returns its owner, moving only the owner out.
///
/// # Safety
/// `context` must come from `Box::into_raw` in [`export_into`] and not be used again.
#[inline(always)]
unsafe fn reclaim<M, T>(context: *mut ExportContext<M, T>) -> T {
  // SAFETY: per the contract the context is initialised and ours; `owner` is read once and the
  // allocation is then freed as uninitialised memory, so the owner is not dropped twice. The
  // other fields are plain data except `dims`, dropped in place (it frees only when spilled).
  unsafe {
    let owner = core::ptr::read(&raw const (*context).owner);
    core::ptr::drop_in_place(&raw mut (*context).header.dims);
    drop(Box::from_raw(
      context.cast::<core::mem::MaybeUninit<ExportContext<M, T>>>(),
    ));
    owner
  }
}

// SAFETY: a Vec's heap buffer does not move when the Vec is moved, it is freed only when the
// Vec drops (inside the deleter), and the exclusive owner is the export. Vec<T> is Send for
// Element types.
unsafe impl<T: Element> IntoDLPack for Vec<T> {
  fn tensor_info(&mut self) -> TensorInfo {
    TensorInfo::from_mut_slice(self)
  }
}

// SAFETY: as for Vec<T>.
unsafe impl<T: Element> IntoDLPack for Box<[T]> {
  fn tensor_info(&mut self) -> TensorInfo {
    TensorInfo::from_mut_slice(self)
  }
}

// SAFETY: the buffer lives as long as any Arc clone, including the one owned by the export.
// Other clones may read concurrently, so the export is marked read-only.
unsafe impl<T: Element> IntoDLPack for Arc<[T]> {
  fn tensor_info(&mut self) -> TensorInfo {
    TensorInfo::from_slice(self)
  }
}

// SAFETY: as for Arc<[T]>.
unsafe impl<T: Element> IntoDLPack for Arc<Vec<T>> {
  fn tensor_info(&mut self) -> TensorInfo {
    TensorInfo::from_slice(self.as_slice())
  }
}

/// An owned buffer with an explicit shape (and optional strides), for exporting n-d data.
#[derive(Debug, Clone)]
pub struct ShapedBuffer<T> {
  data: Vec<T>,
  shape: Dims,
  strides: Option<Dims>,
  byte_offset: u64,
}

impl<T: Element> ShapedBuffer<T> {
  /// A row-major tensor; fails unless `data.len()` equals the product of `shape`.
  pub fn new(data: Vec<T>, shape: &[i64]) -> Result<ShapedBuffer<T>, DLPackError> {
    let numel = shape.iter().try_fold(
      1i64,
      |acc, &dim| {
        if dim < 0 {
          None
        } else {
          acc.checked_mul(dim)
        }
      },
    );
    if numel != Some(data.len() as i64) {
      return Err(DLPackError::new(
        ErrorKind::InvalidLayout,
        format!("{} elements do not fill shape {shape:?}", data.len()),
      ));
    }
    Ok(ShapedBuffer {
      data,
      shape: Dims::from_slice(shape),
      strides: None,
      byte_offset: 0,
    })
  }

  /// A strided view of `data` starting `offset` elements in; every element the view reaches
  /// must lie inside `data`.
  pub fn strided(
    data: Vec<T>,
    shape: &[i64],
    strides: &[i64],
    offset: usize,
  ) -> Result<ShapedBuffer<T>, DLPackError> {
    let first_element = offset
      .checked_mul(T::DTYPE.itemsize())
      .and_then(|bytes| (data.as_ptr() as usize).checked_add(bytes))
      .ok_or_else(|| DLPackError::new(ErrorKind::Overflow, "offset overflows"))?;
    let itemsize = T::DTYPE.itemsize();
    layout_of(T::DTYPE, Device::CPU, shape, Some(strides), first_element)?
      .check_fits_in(offset * itemsize, data.len() * itemsize)?;
    Ok(ShapedBuffer {
      data,
      shape: Dims::from_slice(shape),
      strides: Some(Dims::from_slice(strides)),
      byte_offset: (offset * T::DTYPE.itemsize()) as u64,
    })
  }

  pub fn into_vec(self) -> Vec<T> {
    self.data
  }
}

// SAFETY: the Vec's buffer is stable and exclusively owned by the export; `new`/`strided`
// checked that the described elements lie inside it.
unsafe impl<T: Element> IntoDLPack for ShapedBuffer<T> {
  fn tensor_info(&mut self) -> TensorInfo {
    let info = TensorInfo::contiguous(
      self.data.as_mut_ptr().cast::<c_void>(),
      T::DTYPE,
      &self.shape,
    )
    .byte_offset(self.byte_offset);
    match &self.strides {
      Some(strides) => TensorInfo {
        strides: Some(strides.clone()),
        ..info
      },
      None => info,
    }
  }
}
