//! Where a tensor's bytes live, and how they are exported.

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use napi_dlpack::cuda::{self, DeviceBuffer};
use napi_dlpack::layout::element_offsets;
use napi_dlpack::{
  DLPackError, DType, Device, DeviceType, ErrorKind, ForeignTensor, IntoDLPack, TensorInfo,
};

use crate::js_memory::BufferRef;
use crate::own_capsule::OwnCapsule;

/// The memory behind one or more tensors. Shared through `Arc` by tensor handles, JS views
/// and DLPack exports; the last owner to let go releases it, on whatever thread that is.
pub enum Memory {
  /// V8-owned memory: an ArrayBuffer or SharedArrayBuffer kept alive by a reference. Zero-copy
  /// in every runtime, Electron included.
  /// `buffer` references the ArrayBuffer (or SharedArrayBuffer) itself; `base` is its data
  /// pointer plus `base_offset`, the byte offset of the wrapped view inside it.
  Js {
    base: *mut u8,
    base_offset: usize,
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
}

// SAFETY: `base` points into the ArrayBuffer that `buffer` keeps alive; the pointer itself is
// plain data. BufferRef, ForeignTensor and DeviceBuffer are Send + Sync.
unsafe impl Send for Memory {}
// SAFETY: as above; `&Memory` only reads.
unsafe impl Sync for Memory {}

/// The layout of one tensor over a storage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
  pub dtype: DType,
  /// Shared slices, so that a handle made from another (a round trip) copies no dimensions.
  pub shape: Arc<[i64]>,
  pub strides: Arc<[i64]>,
  /// Byte offset of the first element from the start of the storage region.
  pub first_byte: usize,
  /// Lowest element offset relative to the first element (≤ 0).
  pub min_offset: i64,
  /// Bytes from the lowest to the end of the highest element.
  pub span_bytes: usize,
  pub numel: usize,
  pub contiguous: bool,
  pub device: Device,
  pub readonly: bool,
  pub is_copy: bool,
  pub version: Option<(u32, u32)>,
  pub flags: u64,
}

impl Meta {
  /// Byte offset, from the storage start, of the lowest-addressed element.
  pub fn span_start(&self) -> usize {
    (self.first_byte as i64 + self.min_offset * self.dtype.itemsize() as i64) as usize
  }
}

pub struct Storage {
  memory: Memory,
  /// Set once we enqueued device work that reads this memory on our CUDA stream (an
  /// asynchronous copy out of it). For foreign memory the producer's deleter must then wait
  /// for that work: see `Drop`.
  device_reads_queued: AtomicBool,
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
      Memory::Foreign(tensor) => tensor.layout().span_start() as *mut u8,
      Memory::Owned(words) => words.as_ptr() as *mut u8,
      Memory::Cuda(buffer) => buffer.device_ptr() as usize as *mut u8,
    }
  }

  /// Address of the lowest element of `meta` over this storage, as an integer (host or device
  /// address; no pointer arithmetic on device addresses).
  pub fn span_address(&self, meta: &Meta) -> usize {
    (self.base() as usize).wrapping_add(meta.span_start())
  }
}

/// A DLPack export of (part of) a storage. Holding the Arc keeps the memory alive until the
/// consumer calls the deleter, wherever that happens.
pub struct ExportOwner {
  /// Dropping this (in the consumer's deleter) releases our hold on the memory.
  pub storage: Arc<Storage>,
  pub meta: Arc<Meta>,
  pub info: TensorInfo,
  /// The capsule this export was first wrapped in, if we made one (see `own_capsule`): lets
  /// an import recognise that capsule coming straight back. Weak, so it keeps only the
  /// allocation (and with it the uniqueness of its address), not the capsule.
  pub capsule: Weak<OwnCapsule>,
}

// SAFETY: `info` describes memory inside `storage`, which this owner keeps alive and which
// never moves (ArrayBuffer backing stores, foreign memory and device allocations are fixed,
// the Vec is not resized). Writes by other holders are the user's to synchronise, as
// documented; device memory is handed to the consumer's stream by `export_capsule`.
unsafe impl IntoDLPack for ExportOwner {
  fn tensor_info(&mut self) -> TensorInfo {
    self.info.clone()
  }
}

/// The DLPack `data` and `byte_offset` of `meta` over `storage`, as every export (owning, or
/// borrowed through the exchange table) describes them.
pub fn export_address(storage: &Storage, meta: &Meta) -> (*mut c_void, u64) {
  match storage.memory() {
    // Re-exports of address-valued memory point `data` at the first element with
    // byte_offset 0: consumers that ignore byte_offset (torch 1.13's at::fromDLPack, for one)
    // then still read the right elements.
    Memory::Foreign(tensor) if tensor.device().device_type.data_is_address() => {
      (tensor.data_ptr().cast(), 0)
    }
    // Handle-valued devices (OpenCL, Metal, ...) keep the producer's handle and offset: `data`
    // is not an address, so the offset cannot be folded into it.
    Memory::Foreign(tensor) => (tensor.raw_data(), tensor.byte_offset()),
    // Our device memory: the first element's device address (integer arithmetic only).
    Memory::Cuda(buffer) => (
      (buffer.device_ptr() as usize).wrapping_add(meta.first_byte) as *mut c_void,
      0,
    ),
    // Our own memory: data points at the first element, byte_offset 0, which every consumer
    // reads correctly (including those that ignore byte_offset).
    Memory::Js { .. } | Memory::Owned(_) => (
      // SAFETY: first_byte lies inside the storage region (checked at construction).
      unsafe { storage.base().add(meta.first_byte) }.cast::<c_void>(),
      0,
    ),
  }
}

impl ExportOwner {
  /// Describes `meta` over `storage` for export.
  pub fn new(storage: Arc<Storage>, meta: Arc<Meta>) -> ExportOwner {
    let (data, byte_offset) = export_address(&storage, &meta);
    let info = TensorInfo::strided(data, meta.dtype, &meta.shape, &meta.strides)
      .byte_offset(byte_offset)
      .device(meta.device)
      .read_only(meta.readonly)
      .copied(meta.is_copy && matches!(storage.memory(), Memory::Owned(_)));
    ExportOwner {
      storage,
      meta,
      info,
      capsule: Weak::new(),
    }
  }
}

/// `len` zeroed elements, or ERR_DLPACK_NO_MEMORY: copies of foreign tensors may be any size,
/// and an infallible allocation would abort the process.
pub fn try_zeroed_vec<T: Clone + Default>(len: usize) -> Result<Vec<T>, DLPackError> {
  let mut out = Vec::new();
  out.try_reserve_exact(len).map_err(|_| {
    DLPackError::new(
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

/// Copies the elements of a host tensor in row-major order into `out` (`numel * itemsize`
/// bytes). `first` is the address of the first element.
///
/// # Safety
/// Every element addressed by `shape`/`strides` from `first` must be readable.
pub unsafe fn gather(
  first: *const u8,
  itemsize: usize,
  shape: &[i64],
  strides: &[i64],
  contiguous: bool,
  out: &mut [u8],
) {
  if out.is_empty() {
    return;
  }
  if contiguous {
    // SAFETY: contiguous: `out.len()` bytes from `first` are the elements (caller contract).
    unsafe { std::ptr::copy_nonoverlapping(first, out.as_mut_ptr(), out.len()) };
    return;
  }
  let numel = out.len() / itemsize;
  for (chunk, offset) in out
    .chunks_exact_mut(itemsize)
    .zip(element_offsets(shape, strides, numel))
  {
    // SAFETY: `offset` is the element offset of an in-bounds index (caller contract).
    let source = unsafe { first.offset(offset as isize * itemsize as isize) };
    // SAFETY: one element, readable (caller contract); `chunk` is one element long.
    unsafe { std::ptr::copy_nonoverlapping(source, chunk.as_mut_ptr(), itemsize) };
  }
}

/// Bytes of a row-major copy of a tensor described by `meta` over `storage`.
pub fn copy_bytes(storage: &Storage, meta: &Meta, out: &mut [u8]) -> Result<(), DLPackError> {
  if !meta.device.is_host_accessible() {
    return Err(DLPackError::new(
      ErrorKind::NotCpu,
      format!(
        "tensor memory is on {}; host copies need .to('cpu')",
        meta.device
      ),
    ));
  }
  // SAFETY: the layout was validated against the storage region at construction.
  unsafe {
    gather(
      storage.base().add(meta.first_byte),
      meta.dtype.itemsize(),
      &meta.shape,
      &meta.strides,
      meta.contiguous,
      out,
    )
  };
  Ok(())
}
