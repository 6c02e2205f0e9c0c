//! Where a tensor's bytes live ([`Storage`]), and where in them the elements of a
//! [`TensorLayout`] are: for JS views, row-major copies and DLPack exports.

use std::ffi::c_void;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use napi::Env;
use napi_dlpack::convert::{self, Strided};
use napi_dlpack::cuda::{self, DeviceBuffer, PinnedBuffer};
use napi_dlpack::{DeviceType, ErrorKind, ForeignTensor};

use crate::errors::{fail, Result};
use crate::js_memory::{self, BufferRef};
use crate::layout::TensorLayout;

/// The memory behind one or more tensors. Shared through `Arc` by tensor handles, JS views
/// and DLPack exports; the last owner to let go releases it, on whatever thread that is.
pub enum Memory {
  /// V8-owned memory: an ArrayBuffer or SharedArrayBuffer kept alive by a reference. Zero-copy
  /// in every runtime, Electron included.
  /// `buffer` references the ArrayBuffer (or SharedArrayBuffer) itself; `base` is its data
  /// pointer plus `base_offset`, the byte offset of the wrapped view inside it; `len` is the
  /// wrapped view's length in bytes (the region a tensor over it may reach).
  Js {
    base: *mut u8,
    base_offset: usize,
    len: usize,
    buffer: BufferRef,
  },
  /// Producer-owned memory imported through DLPack; the producer's deleter runs when the last
  /// owner drops it.
  Foreign(ForeignTensor),
  /// A copy we made for an export (`copy: true`), owned by that export alone.
  Owned(Vec<u64>),
  /// CUDA device memory we allocated (`Tensor.empty/zeros` on a CUDA device, `to('cuda:N')`).
  /// Its writes are enqueued on the device's legacy default stream. Never host-dereferenced.
  Cuda(DeviceBuffer),
  /// Page-locked host memory we allocated (`cuda_host` tensors: `Tensor.empty/zeros` on
  /// `cuda_host`, `to('cuda_host')`). Host memory for the CPU; freed with `cuMemFreeHost` when
  /// the last owner (tensor, JS view, export) lets go, on whatever thread that is. No device
  /// work of ours is ever left queued on it: our copies into and out of it complete before the
  /// call returns.
  Pinned(PinnedBuffer),
}

// SAFETY: `base` points into the ArrayBuffer that `buffer` keeps alive; the pointer itself is
// plain data. BufferRef, ForeignTensor, DeviceBuffer and PinnedBuffer are Send + Sync.
unsafe impl Send for Memory {}
// SAFETY: as above; `&Memory` only reads.
unsafe impl Sync for Memory {}

pub struct Storage {
  memory: Memory,
  /// Set once we enqueued device work that reads this memory on our CUDA stream (an
  /// asynchronous copy out of it). For foreign memory the producer's deleter must then wait
  /// for that work: see `Drop`.
  device_reads_queued: AtomicBool,
  /// Set once the ArrayBuffer of `Memory::Js` was marked untransferable (see `pin_for_export`).
  marked_untransferable: AtomicBool,
  /// Set when that mark was left to the runtime's own (see [`Storage::mark_left_to_runtime`]).
  mark_left_to_runtime: AtomicBool,
}

/// Storages alive in this process (all environments): a leak check for tests and diagnostics.
pub static LIVE_STORAGES: AtomicUsize = AtomicUsize::new(0);

impl Drop for Storage {
  fn drop(&mut self) {
    LIVE_STORAGES.fetch_sub(1, Ordering::Relaxed);
    let foreign_cuda = matches!(&self.memory, Memory::Foreign(tensor)
      if tensor.device().device_type == DeviceType::Cuda);
    if foreign_cuda && *self.device_reads_queued.get_mut() {
      // Our queued copies may still be reading the producer's memory, and a producer may
      // reuse it the moment its deleter runs (a caching allocator, or cuMemFreeAsync on its
      // own stream): the deleter runs once our stream has passed those reads.
      if let Memory::Foreign(tensor) =
        std::mem::replace(&mut self.memory, Memory::Owned(Vec::new()))
      {
        match cuda::device(tensor.device().id) {
          Ok(device) => cuda::release_after_queued_work(&device, tensor),
          // Unreachable in practice (the reads were queued on that device); drop it now.
          Err(_) => drop(tensor),
        }
      }
    }
  }
}

impl Storage {
  pub fn new(memory: Memory) -> Arc<Storage> {
    LIVE_STORAGES.fetch_add(1, Ordering::Relaxed);
    Arc::new(Storage {
      memory,
      device_reads_queued: AtomicBool::new(false),
      marked_untransferable: AtomicBool::new(false),
      mark_left_to_runtime: AtomicBool::new(false),
    })
  }

  /// Records that device work reading this memory was enqueued on our CUDA stream and may
  /// still be running (see `Drop`).
  pub fn note_queued_device_read(&self) {
    self.device_reads_queued.store(true, Ordering::Relaxed);
  }

  pub fn memory(&self) -> &Memory {
    &self.memory
  }

  /// Start of the storage region (for foreign tensors: the lowest element's address). For
  /// device memory this is a device address: never dereference it on the host.
  pub fn base(&self) -> *mut u8 {
    match &self.memory {
      Memory::Js { base, .. } => *base,
      Memory::Foreign(tensor) => foreign_span_start(tensor),
      Memory::Owned(words) => words.as_ptr() as *mut u8,
      Memory::Cuda(buffer) => buffer.device_ptr() as usize as *mut u8,
      Memory::Pinned(buffer) => buffer.as_ptr(),
    }
  }

  /// Bytes of the region from [`Self::base`] that tensors over this storage may reach: the
  /// wrapped JS view, a foreign tensor's span, our own allocation.
  pub fn region_len(&self) -> usize {
    match &self.memory {
      Memory::Js { len, .. } => *len,
      Memory::Foreign(tensor) => tensor.layout().span_bytes(),
      Memory::Owned(words) => words.len() * std::mem::size_of::<u64>(),
      Memory::Cuda(buffer) => buffer.len(),
      Memory::Pinned(buffer) => buffer.len(),
    }
  }

  /// Address of the first element of `layout` over this storage, as an integer (host or
  /// device address, or a handle value plus offset on handle-valued devices): what
  /// `dataPointer` reports.
  pub fn first_address(&self, layout: &TensorLayout) -> usize {
    (self.base() as usize).wrapping_add(layout.first_byte)
  }

  /// Address of the lowest element of `layout` over this storage, as an integer (host or
  /// device address; no pointer arithmetic on device addresses).
  pub fn span_address(&self, layout: &TensorLayout) -> usize {
    (self.base() as usize).wrapping_add(layout.span_start())
  }

  /// Fails if the JS buffer behind this storage has been detached (transferred) under us.
  pub fn check_attached(&self, env: &Env) -> Result<()> {
    if let Memory::Js { buffer, .. } = &self.memory {
      // SAFETY: our env, on its thread.
      let array_buffer = unsafe { buffer.value(env.raw())? };
      // SAFETY: live value of this env.
      if unsafe { js_memory::is_detached(env.raw(), array_buffer) } {
        return Err(fail(
          ErrorKind::Detached,
          "the tensor's ArrayBuffer has been detached (transferred)",
        ));
      }
    }
    Ok(())
  }

  /// Whether JS could detach this memory: V8 memory in an `ArrayBuffer` (a SharedArrayBuffer
  /// never detaches; other memory is not JS's).
  pub fn can_be_detached(&self, env: &Env) -> Result<bool> {
    let Memory::Js { buffer, .. } = &self.memory else {
      return Ok(false);
    };
    // SAFETY: our env, on its thread.
    let value = unsafe { buffer.value(env.raw())? };
    let mut is_array_buffer = false;
    // SAFETY: a live value of this env.
    crate::errors::status("napi_is_arraybuffer", unsafe {
      napi::sys::napi_is_arraybuffer(env.raw(), value, &mut is_array_buffer)
    })?;
    Ok(is_array_buffer)
  }

  /// Whether [`Storage::pin_for_export`] marked this memory already (always, for memory that is
  /// not JS's).
  pub fn is_marked(&self) -> bool {
    !matches!(self.memory, Memory::Js { .. }) || self.marked_untransferable.load(Ordering::Relaxed)
  }

  /// Whether [`Storage::pin_for_export`] left the ArrayBuffer to the runtime's own untransferable
  /// mark instead of marking it (an external ArrayBuffer Node marked when an addon made it; see
  /// lib/native.ts): transfer lists refuse it, but Node 24's `transfer()` can still detach it,
  /// so borrows must keep checking for a detach whatever `slots::marked_buffers_detachable`
  /// says.
  pub fn mark_left_to_runtime(&self) -> bool {
    self.mark_left_to_runtime.load(Ordering::Relaxed)
  }

  /// Before native code is handed a pointer into this memory that outlives the call (a capsule,
  /// an owned exchange export, a borrow kept across calls): fails if the JS buffer was detached,
  /// and marks it untransferable, once per storage. Without the mark, a `postMessage` transfer
  /// list would move V8 memory to a thread that frees it while the export still points into it.
  /// A refusal (`DataCloneError`, or a copy on Node 20) is what the user then sees instead.
  pub fn pin_for_export(&self, env: &Env) -> Result<()> {
    self.check_attached(env)?;
    if let Memory::Js { buffer, .. } = &self.memory {
      if !self.marked_untransferable.load(Ordering::Relaxed) {
        // SAFETY: our env, on its thread (checked by `value`).
        let value = unsafe { buffer.value(env.raw())? };
        // SAFETY: as above; `value` is a live ArrayBuffer of this env.
        let ours = unsafe { js_memory::mark_untransferable(env.raw(), value)? };
        // SAFETY: as above.
        unsafe { js_memory::note_exported(env.raw(), value) };
        self.mark_left_to_runtime.store(!ours, Ordering::Relaxed);
        self.marked_untransferable.store(true, Ordering::Relaxed);
      }
    }
    Ok(())
  }

  /// The DLPack `data` and `byte_offset` of `layout` over this storage, as every export
  /// (owning, or borrowed through the exchange table) describes them.
  pub fn export_address(&self, layout: &TensorLayout) -> (*mut c_void, u64) {
    match &self.memory {
      // Re-exports of address-valued memory point `data` at the first element with
      // byte_offset 0: consumers that ignore byte_offset (torch 1.13's at::fromDLPack, for one)
      // then still read the right elements. The first element is the layout's, not the
      // producer's: a view (`slice`, `select`, ...) starts elsewhere in the same span. Derived
      // from the span start (the producer's pointer) so that it keeps the pointer's provenance;
      // wrapping, since device addresses are never dereferenced here.
      Memory::Foreign(tensor) if tensor.device().device_type.data_is_address() => (
        self.base().wrapping_add(layout.first_byte).cast::<c_void>(),
        0,
      ),
      // Handle-valued devices (OpenCL, Metal, ...) keep the producer's handle and an offset
      // into it: `data` is not an address, so the offset cannot be folded into it.
      Memory::Foreign(tensor) => (tensor.raw_data(), self.export_byte_offset(layout)),
      // Our device memory: the first element's device address (integer arithmetic only).
      Memory::Cuda(buffer) => (
        (buffer.device_ptr() as usize).wrapping_add(layout.first_byte) as *mut c_void,
        0,
      ),
      // Our own memory: data points at the first element, byte_offset 0, which every consumer
      // reads correctly (including those that ignore byte_offset).
      Memory::Js { .. } | Memory::Owned(_) | Memory::Pinned(_) => (
        // SAFETY: first_byte lies inside the storage region (checked at construction).
        unsafe { self.base().add(layout.first_byte) }.cast::<c_void>(),
        0,
      ),
    }
  }

  /// The DLPack byte_offset an export of `layout` over this storage carries (see
  /// [`Self::export_address`]): only handle-valued devices keep a separate byte_offset, the
  /// producer's moved by as far as the layout's first element lies from the producer's (a
  /// view starting elsewhere in the span).
  pub fn export_byte_offset(&self, layout: &TensorLayout) -> u64 {
    // Views whose offset would be negative are refused when made (`ops::convert::view`).
    self.byte_offset_of(layout).unwrap_or(0)
  }

  /// [`Self::export_byte_offset`], or `None` where it would be negative: a view below the
  /// producer's `data` handle on a handle-valued device (negative strides with a small
  /// byte_offset), which DLPack's unsigned byte_offset cannot describe.
  pub fn byte_offset_of(&self, layout: &TensorLayout) -> Option<u64> {
    match &self.memory {
      Memory::Foreign(tensor) if !tensor.device().device_type.data_is_address() => {
        let checked = tensor.layout();
        // The producer's first element, from the span start (what `layout.first_byte` counts
        // from).
        let producer_first = (checked.first_element() - checked.span_start()) as i128;
        let moved = layout.first_byte as i128 - producer_first;
        u64::try_from(i128::from(tensor.byte_offset()) + moved).ok()
      }
      _ => Some(0),
    }
  }
}

/// The lowest element of a foreign tensor, derived from the producer's pointer
/// (`ForeignTensor::data_ptr`, the first element) so that it keeps the pointer's provenance. For
/// device memory it is only ever used as an address (never dereferenced on the host), hence the
/// wrapping arithmetic.
pub fn foreign_span_start(tensor: &ForeignTensor) -> *mut u8 {
  let checked = tensor.layout();
  // The first element lies `first_element - span_start` bytes above the lowest (validated).
  tensor
    .data_ptr()
    .wrapping_sub(checked.first_element() - checked.span_start())
}

/// `len` zeroed elements, or ERR_DLPACK_NO_MEMORY: copies of foreign tensors may be any size,
/// and an infallible allocation would abort the process.
pub fn try_zeroed_vec<T: Clone + Default>(len: usize) -> Result<Vec<T>> {
  let mut out = Vec::new();
  out.try_reserve_exact(len).map_err(|_| {
    fail(
      ErrorKind::NoMemory,
      format!(
        "cannot allocate {len} elements of {} bytes",
        std::mem::size_of::<T>()
      ),
    )
  })?;
  out.resize(len, T::default());
  Ok(out)
}

/// The elements of a host tensor as a source of the crate's dense-copy engine
/// (`napi_dlpack::convert`), or ERR_DLPACK_NOT_CPU for device memory.
pub fn host_source<'a>(storage: &'a Storage, layout: &'a TensorLayout) -> Result<Strided<'a>> {
  if !layout.device.is_host_accessible() {
    return Err(fail(
      ErrorKind::NotCpu,
      format!(
        "tensor memory is on {}; host copies need .to('cpu')",
        layout.device
      ),
    ));
  }
  // SAFETY: the layout was validated against the storage region when the handle was made
  // (views keep to the same elements); the memory is host-accessible (checked above) and
  // `storage` keeps it alive for 'a. No JS runs while a copy reads it.
  Ok(unsafe {
    Strided::from_raw(
      storage.base().add(layout.first_byte),
      layout.dtype,
      &layout.shape,
      &layout.strides,
    )
  })
}

/// Writes a row-major copy of the elements of `layout` over `storage` into `out`
/// (`layout.packed_bytes()` long, not overlapping the tensor), with the crate's one dense-copy
/// engine.
pub fn copy_row_major(storage: &Storage, layout: &TensorLayout, out: &mut [u8]) -> Result<()> {
  // SAFETY: same layout; the copy only stores initialised bytes through it.
  let out = unsafe { std::slice::from_raw_parts_mut(out.as_mut_ptr().cast(), out.len()) };
  copy_row_major_uninit(storage, layout, out)
}

/// [`copy_row_major`] into memory that may be uninitialised (a fresh allocation): on success
/// every byte of `out` has been written.
pub fn copy_row_major_uninit(
  storage: &Storage,
  layout: &TensorLayout,
  out: &mut [MaybeUninit<u8>],
) -> Result<()> {
  let source = host_source(storage, layout)?;
  if layout.contiguous && out.len() == layout.packed_bytes() && !out.is_empty() {
    let (start, end) = source.address_range();
    let target = out.as_ptr() as usize;
    if target >= end || target + out.len() <= start {
      // Already row-major: one memcpy, without the engine's set-up (a small copy's cost is
      // mostly that set-up).
      // SAFETY: a contiguous layout's `packed_bytes` elements start at its first element
      // (validated against the storage, which stays alive), and `out` does not overlap them.
      unsafe {
        std::ptr::copy_nonoverlapping(
          storage.base().add(layout.first_byte),
          out.as_mut_ptr().cast::<u8>(),
          out.len(),
        )
      };
      return Ok(());
    }
  }
  Ok(convert::copy_dense_uninit(&source, out)?)
}

/// A row-major copy of a host tensor in new Rust memory of `T` words (`u64`: 8-byte aligned
/// for every dtype), or ERR_DLPACK_NO_MEMORY. Not zero-filled first: the copy writes every
/// element, and only the padding of the last word is zeroed.
pub fn dense_copy_vec<T: Copy>(storage: &Storage, layout: &TensorLayout) -> Result<Vec<T>> {
  let bytes = layout.packed_bytes();
  let words = bytes.div_ceil(size_of::<T>());
  let mut out: Vec<T> = Vec::new();
  out.try_reserve_exact(words).map_err(|_| {
    fail(
      ErrorKind::NoMemory,
      format!("cannot allocate {bytes} bytes for a copy"),
    )
  })?;
  let spare = out.spare_capacity_mut();
  // SAFETY: the spare capacity holds at least `words * size_of::<T>() >= bytes` bytes;
  // MaybeUninit<u8> makes no claim about their contents.
  let spare_bytes: &mut [MaybeUninit<u8>] =
    unsafe { std::slice::from_raw_parts_mut(spare.as_mut_ptr().cast(), words * size_of::<T>()) };
  let (elements, padding) = spare_bytes.split_at_mut(bytes);
  copy_row_major_uninit(storage, layout, elements)?;
  padding.fill(MaybeUninit::new(0));
  // SAFETY: every byte of the first `words` words was written just above (T is plain data:
  // u8 or u64, any bytes are a valid value).
  unsafe { out.set_len(words) };
  Ok(out)
}

/// The elements of a strided host tensor in row-major order, copied out a range at a time by
/// the dense-copy engine: how the staging pipeline gathers a strided source straight into its
/// page-locked chunks (no whole-tensor copy first).
///
/// A range is a run of whole "rows" of one axis (`axis`: every element with the same indices up
/// to it), each `unit` bytes of the row-major output. The axis is the outermost one whose rows
/// are at most `max_unit` bytes, so that pieces are close to the size asked for; a run that
/// crosses an index of an outer axis is copied as one engine call per outer index.
pub struct RowRuns<'a> {
  first: *const u8,
  dtype: napi_dlpack::DType,
  shape: &'a [i64],
  strides: &'a [i64],
  axis: usize,
  unit: usize,
}

impl<'a> RowRuns<'a> {
  /// `None` for a tensor without dimensions (one element: nothing to cut).
  pub fn new(
    storage: &'a Storage,
    layout: &'a TensorLayout,
    max_unit: usize,
  ) -> Result<Option<RowRuns<'a>>> {
    host_source(storage, layout)?;
    let ndim = layout.shape.len();
    if ndim == 0 {
      return Ok(None);
    }
    let itemsize = layout.dtype.itemsize();
    // Bytes of one index of axis `j`: the elements of the axes after it.
    let mut unit = itemsize;
    let mut axis = ndim - 1;
    while axis > 0 {
      let wider = unit.saturating_mul(layout.shape[axis].max(0) as usize);
      if wider > max_unit {
        break;
      }
      unit = wider;
      axis -= 1;
    }
    Ok(Some(RowRuns {
      // SAFETY: the first element lies inside the storage region (validated with the layout).
      first: unsafe { storage.base().add(layout.first_byte) },
      dtype: layout.dtype,
      shape: &layout.shape,
      strides: &layout.strides,
      axis,
      unit,
    }))
  }

  /// Bytes of one row: offsets and lengths given to [`RowRuns::copy`] are multiples of it.
  pub fn unit(&self) -> usize {
    self.unit
  }

  /// Writes bytes `offset .. offset + out.len()` of the row-major copy into `out`.
  pub fn copy(
    &self,
    offset: usize,
    out: &mut [u8],
  ) -> std::result::Result<(), napi_dlpack::DLPackError> {
    if !offset.is_multiple_of(self.unit) || !out.len().is_multiple_of(self.unit) {
      return Err(napi_dlpack::DLPackError::new(
        ErrorKind::InvalidArgument,
        format!(
          "a range of rows of {} bytes was asked for at {offset} (+{})",
          self.unit,
          out.len()
        ),
      ));
    }
    let rows_of_axis = self.shape[self.axis].max(0) as usize;
    let itemsize = self.dtype.itemsize() as isize;
    let mut row = offset / self.unit;
    let mut written = 0;
    let mut inner_shape: Vec<i64> = self.shape[self.axis..].to_vec();
    let inner_strides = &self.strides[self.axis..];
    while written < out.len() {
      let (outer, start) = (row / rows_of_axis, row % rows_of_axis);
      // At least one row: `out.len() - written` is a non-zero multiple of `unit`.
      let rows = (rows_of_axis - start).min((out.len() - written) / self.unit);
      // Element offset of (outer indices, start, 0, ...) from the first element.
      let mut element = start as i64 * self.strides[self.axis];
      let mut rest = outer;
      for dim in (0..self.axis).rev() {
        let size = self.shape[dim] as usize;
        element += (rest % size) as i64 * self.strides[dim];
        rest /= size;
      }
      inner_shape[0] = rows as i64;
      // SAFETY: the run's elements are elements of the validated layout (indices within the
      // shape), so they lie in the storage `RowRuns::new` was given, alive for 'a and not written
      // during the copy. Wrapping: the offset may be negative (negative strides).
      let source = unsafe {
        napi_dlpack::convert::Strided::from_raw(
          self.first.wrapping_offset(element as isize * itemsize),
          self.dtype,
          &inner_shape,
          inner_strides,
        )
      };
      let bytes = rows * self.unit;
      convert::copy_dense(&source, &mut out[written..written + bytes])?;
      written += bytes;
      row += rows;
    }
    Ok(())
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn the_span_of_a_foreign_tensor_starts_at_its_lowest_element() {
    use napi_dlpack::{export, ExportFormat, ShapedBuffer};
    // Elements 1, 3, 5, 7 of the buffer seen backwards: the first element is element 7 and the
    // span starts at element 1.
    let buffer = ShapedBuffer::strided((0u32..8).collect(), &[4], &[-2], 7).unwrap();
    let tensor = ForeignTensor::new(export(buffer, ExportFormat::Versioned).unwrap()).unwrap();
    let start = foreign_span_start(&tensor);
    assert_eq!(start as usize, tensor.layout().span_start());
    // SAFETY: the span of a validated host tensor, alive with `tensor`; derived from the
    // producer's pointer, so reading through it is allowed (Miri checks the provenance).
    let first = unsafe { start.cast::<u32>().read() };
    assert_eq!(first, 1);
    let storage = Storage::new(Memory::Foreign(tensor));
    assert_eq!(storage.base(), start);
    let layout = TensorLayout::of_foreign(match storage.memory() {
      Memory::Foreign(tensor) => tensor,
      _ => unreachable!("a foreign storage"),
    });
    let mut out = [0u8; 16];
    copy_row_major(&storage, &layout, &mut out).unwrap();
    let values: Vec<u32> = out
      .chunks_exact(4)
      .map(|word| u32::from_ne_bytes([word[0], word[1], word[2], word[3]]))
      .collect();
    assert_eq!(values, [7, 5, 3, 1]);
    assert_eq!(storage.export_byte_offset(&layout), 0);
    let (data, byte_offset) = storage.export_address(&layout);
    assert_eq!((data as usize, byte_offset), (start as usize + 24, 0));
  }

  #[test]
  fn row_runs_copy_any_range_of_rows_like_the_whole_copy() {
    use napi_dlpack::DType;
    // A buffer of distinct u16 values; views of it permuted and reversed, cut into runs of
    // rows at every unit size, must give the bytes of the whole row-major copy.
    let words: Vec<u64> = (0..512u64)
      .map(|i| (i * 4) | ((i * 4 + 1) << 16) | ((i * 4 + 2) << 32) | ((i * 4 + 3) << 48))
      .collect();
    let storage = Storage::new(Memory::Owned(words));
    let base = storage.base() as usize;
    let len = storage.region_len();
    // (shape, strides in elements, first element offset in elements)
    let views: [(&[i64], &[i64], usize); 5] = [
      (&[4, 6, 5], &[1, 20, 4], 0),        // permuted
      (&[3, 7, 11], &[-77, 11, -1], 230),  // reversed outer and inner axes
      (&[1000], &[-1], 999),               // one reversed axis
      (&[2, 3, 4, 5], &[60, 1, 15, 3], 7), // four axes, transposed inner pair
      (&[9, 1, 13], &[13, 500, 1], 3),     // contiguous apart from a size-1 axis
    ];
    for (shape, strides, first) in views {
      let layout = TensorLayout::over_region(
        DType::UInt16,
        shape,
        Some(strides),
        first * 2,
        base,
        len,
        false,
      )
      .unwrap();
      let mut whole = vec![0u8; layout.packed_bytes()];
      copy_row_major(&storage, &layout, &mut whole).unwrap();
      for max_unit in [1, 2, 3, 10, 22, 64, 130, 1 << 20] {
        let runs = RowRuns::new(&storage, &layout, max_unit).unwrap().unwrap();
        let unit = runs.unit();
        assert!(unit <= max_unit.max(2), "{shape:?} {max_unit}");
        for rows_per_piece in [1, 2, 3, 7] {
          let piece = unit * rows_per_piece;
          let mut out = vec![0u8; whole.len()];
          let mut offset = 0;
          while offset < out.len() {
            let bytes = piece.min(out.len() - offset);
            runs.copy(offset, &mut out[offset..offset + bytes]).unwrap();
            offset += bytes;
          }
          assert_eq!(
            out, whole,
            "{shape:?} {strides:?} unit {unit} x {rows_per_piece}"
          );
        }
      }
      // Ranges that are not whole rows are refused, not copied wrongly.
      let runs = RowRuns::new(&storage, &layout, 64).unwrap().unwrap();
      if runs.unit() > 2 {
        let mut out = vec![0u8; runs.unit()];
        assert!(runs.copy(2, &mut out).is_err());
      }
    }
  }

  #[test]
  fn impossible_allocations_are_errors_not_aborts() {
    let error = try_zeroed_vec::<u64>(usize::MAX / 4).unwrap_err();
    assert_eq!(error.status, "ERR_DLPACK_NO_MEMORY");
    let huge = TensorLayout::row_major(
      napi_dlpack::DType::UInt8,
      &[1i64 << 62],
      napi_dlpack::Device::CPU,
    );
    if let Ok(huge) = huge {
      let storage = Storage::new(Memory::Owned(Vec::new()));
      let error = dense_copy_vec::<u64>(&storage, &huge).unwrap_err();
      assert_eq!(error.status, "ERR_DLPACK_NO_MEMORY");
    }
    assert_eq!(error.status, "ERR_DLPACK_NO_MEMORY");
    assert_eq!(try_zeroed_vec::<u8>(3).unwrap(), [0, 0, 0]);
  }
}
