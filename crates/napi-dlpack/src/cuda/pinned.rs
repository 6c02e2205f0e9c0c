//! Page-locked ("pinned") host memory: `cuMemHostAlloc` / `cuMemFreeHost`.
//!
//! The driver copies between pinned memory and a device by DMA, without staging it through a
//! buffer of its own, and asynchronously (an async copy from pageable memory is staged, and a
//! copy into pageable memory completes before the call returns). That is what makes
//! `cuda_host` tensors (DLPack `kDLCUDAHost`) and staging chunks transfer at the link's rate.
//!
//! - Allocated with `CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP` in a device's
//!   primary context: usable from every context of the process, at the same address on the
//!   host and on every device (unified addressing).
//! - **Freed off the caller's thread.** `cuMemFreeHost` synchronises the device (the driver
//!   waits for queued work that may still touch the buffer), which would block a drop on the
//!   JS thread, and the driver refuses it inside a CUDA host function. A drop therefore hands
//!   the free to the release thread (`release.rs`), which binds the allocating context, frees
//!   once and counts a failure; environments and the process drain it before they end.
//! - Host-accessible: the bytes are ordinary host memory for the CPU (read and write them
//!   directly), so no synchronisation is needed on the host side beyond the one our copies do.

use core::ffi::c_void;
use std::sync::Arc;

use crate::error::{DLPackError, ErrorKind};

use super::device::{CudaDevice, Handle};
use super::driver::{check, CUDA_ERROR_NOT_PERMITTED, CUDA_SUCCESS, HOST_ALLOC_FLAGS};
use super::release::{defer, release_failed, Job};
use super::Result;

/// Page-locked host memory from `cuMemHostAlloc`, freed with `cuMemFreeHost` (on the release
/// thread) when dropped, on any thread. Zero bytes allocate nothing.
pub struct PinnedBuffer {
  /// The host (and, with unified addressing, device) address; dangling for zero bytes.
  ptr: core::ptr::NonNull<u8>,
  len: usize,
  /// Whether `ptr` came from the driver (false for zero bytes).
  allocated: bool,
  /// The device whose context allocated it (and binds for the free).
  device: Arc<CudaDevice>,
}

// SAFETY: the buffer is a fixed allocation owned by this value; the driver's memory may be used
// and freed from any thread (the free binds a context itself). Shared access only reads the
// address; writes through it are the owner's to synchronise, as for any host memory.
unsafe impl Send for PinnedBuffer {}
// SAFETY: as above.
unsafe impl Sync for PinnedBuffer {}

impl core::fmt::Debug for PinnedBuffer {
  fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
    write!(
      f,
      "PinnedBuffer({:p}, {} bytes, allocated in cuda:{})",
      self.ptr, self.len, self.device.ordinal
    )
  }
}

impl PinnedBuffer {
  /// Allocates `len` bytes of pinned host memory in `device`'s context (contents undefined; the
  /// driver does not clear them). Fails with `ERR_CUDA` naming the driver's result (e.g.
  /// `CUDA_ERROR_OUT_OF_MEMORY` when the host cannot lock that much); nothing is left allocated
  /// then.
  pub fn alloc(device: &Arc<CudaDevice>, len: usize) -> Result<PinnedBuffer> {
    if len == 0 {
      return Ok(PinnedBuffer {
        // Aligned for every element type, like an empty Vec<u64>'s.
        ptr: core::ptr::NonNull::<u64>::dangling().cast(),
        len: 0,
        allocated: false,
        device: device.clone(),
      });
    }
    let bound = device.bind()?;
    let mut ptr: *mut c_void = core::ptr::null_mut();
    // SAFETY: a valid out-pointer; our context is current.
    check("allocating pinned host memory (cuMemHostAlloc)", unsafe {
      (bound.driver.mem_host_alloc)(&mut ptr, len, HOST_ALLOC_FLAGS)
    })?;
    drop(bound);
    let Some(ptr) = core::ptr::NonNull::new(ptr.cast::<u8>()) else {
      // A driver that reports success without an address: nothing to free.
      return Err(DLPackError::new(
        ErrorKind::Cuda,
        "allocating pinned host memory (cuMemHostAlloc) returned NULL",
      ));
    };
    Ok(PinnedBuffer {
      ptr,
      len,
      allocated: true,
      device: device.clone(),
    })
  }

  /// [`PinnedBuffer::alloc`], then every byte set to 0 on the host.
  pub fn alloc_zeroed(device: &Arc<CudaDevice>, len: usize) -> Result<PinnedBuffer> {
    let mut buffer = PinnedBuffer::alloc(device, len)?;
    buffer.as_mut_slice().fill(0);
    Ok(buffer)
  }

  /// The host address of the first byte (dangling, never dereferenced, for zero bytes).
  pub fn as_ptr(&self) -> *mut u8 {
    self.ptr.as_ptr()
  }

  pub fn len(&self) -> usize {
    self.len
  }

  pub fn is_empty(&self) -> bool {
    self.len == 0
  }

  /// The device whose context allocated the buffer.
  pub fn device(&self) -> &Arc<CudaDevice> {
    &self.device
  }

  /// The bytes. Not synchronised with device work: a queued async copy into or out of this
  /// buffer must have completed (its stream synchronised) before the host reads or writes here.
  pub fn as_slice(&self) -> &[u8] {
    // SAFETY: `len` bytes of our live allocation (or an empty slice at a dangling, aligned
    // address), initialised as far as the host is concerned (pinned pages are ordinary memory).
    unsafe { core::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
  }

  /// The bytes, writable (see [`PinnedBuffer::as_slice`]).
  pub fn as_mut_slice(&mut self) -> &mut [u8] {
    // SAFETY: as in `as_slice`; `&mut self` makes this the only reference through the buffer.
    unsafe { core::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
  }
}

impl Drop for PinnedBuffer {
  fn drop(&mut self) {
    if self.allocated {
      // Exactly once: `allocated` is only set by a successful allocation, and drop runs once.
      defer(Job::FreeHost {
        device: self.device.clone(),
        ptr: Handle(self.ptr.as_ptr().cast()),
      });
    }
  }
}

impl CudaDevice {
  /// The release thread's free of a pinned allocation of this device's context.
  pub(super) fn free_host_blocking(&self, ptr: *mut c_void) {
    let bound = match self.bind() {
      Ok(bound) => bound,
      Err(_) => return release_failed("cuCtxPushCurrent (pinned free)", CUDA_ERROR_NOT_PERMITTED),
    };
    // SAFETY: our pinned allocation, freed once (its buffer was dropped); our context is current.
    let code = unsafe { (bound.driver.mem_free_host)(ptr) };
    if code != CUDA_SUCCESS {
      release_failed("cuMemFreeHost", code);
    }
  }
}
