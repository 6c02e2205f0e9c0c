//! A device: its retained primary context, bound around every call, and its streams and
//! events.

use core::ffi::{c_int, c_void};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::device::Device;
use crate::error::{DLPackError, ErrorKind};

use super::driver::{
  check, driver, probe, CuContext, CuEvent, CuStream, Driver, ATTRIBUTE_MEMORY_POOLS_SUPPORTED,
  CUDA_ERROR_NOT_PERMITTED, CUDA_SUCCESS, EVENT_DISABLE_TIMING, LEGACY_STREAM,
};
use super::release::{defer, release_failed, Job};
use super::Result;

/// A consumer's (or producer's) stream, as the DLPack protocol encodes it for CUDA.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stream {
  /// `-1`: no synchronisation at all.
  NoSync,
  /// `1` (also what an unset stream means): the legacy default stream.
  Legacy,
  /// `2`: the per-thread default stream.
  PerThread,
  /// Any value above 2: a `CUstream` handle.
  Handle(u64),
}

impl Stream {
  /// Parses a DLPack stream value for a CUDA tensor: unset → legacy default stream; `-1` no
  /// synchronisation; `1` legacy; `2` per-thread; above 2 a stream handle. `0` is ambiguous in
  /// the protocol and refused, as are other negative values (`ERR_DLPACK_STREAM`).
  pub fn from_dlpack(value: Option<i128>) -> Result<Stream> {
    match value {
      None | Some(1) => Ok(Stream::Legacy),
      Some(-1) => Ok(Stream::NoSync),
      Some(2) => Ok(Stream::PerThread),
      Some(0) => Err(DLPackError::new(
        ErrorKind::Stream,
        "stream 0 is not allowed for CUDA: pass 1n (legacy default stream), 2n (per-thread default stream), -1n (no synchronisation) or a stream handle",
      )),
      Some(value) => match u64::try_from(value) {
        Ok(handle) => Ok(Stream::Handle(handle)),
        Err(_) => Err(DLPackError::new(
          ErrorKind::Stream,
          format!("invalid CUDA stream value {value}"),
        )),
      },
    }
  }

  /// The DLPack value (`-1`, `1`, `2` or the handle).
  pub fn to_dlpack(self) -> i128 {
    match self {
      Stream::NoSync => -1,
      Stream::Legacy => 1,
      Stream::PerThread => 2,
      Stream::Handle(handle) => handle as i128,
    }
  }

  /// The `CUstream` to pass to the driver (`CU_STREAM_LEGACY` and `CU_STREAM_PER_THREAD` are
  /// the handles 1 and 2); `None` for [`Stream::NoSync`].
  fn raw(self) -> Option<CuStream> {
    match self {
      Stream::NoSync => None,
      Stream::Legacy => Some(LEGACY_STREAM),
      Stream::PerThread => Some(2 as CuStream),
      Stream::Handle(handle) => Some(handle as usize as CuStream),
    }
  }
}

/// A driver handle (context or event) that may be used from any thread, as driver handles can.
#[derive(Debug, Clone, Copy)]
pub(super) struct Handle(pub(super) *mut c_void);

// SAFETY: driver handles are process-wide: the driver allows using a context or event from any
// thread (with the context bound where the call needs it, which `CudaDevice::bind` does).
unsafe impl Send for Handle {}
// SAFETY: as above; the handle itself is never written through.
unsafe impl Sync for Handle {}

/// One CUDA device: its primary context, whether it allocates from memory pools, and the event
/// used for stream hand-overs.
pub struct CudaDevice {
  pub(super) ordinal: i32,
  /// The device's primary context, retained once and never released.
  ctx: Handle,
  /// `CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED`: allocate with `cuMemAllocAsync` and free
  /// with `cuMemFreeAsync` (stream-ordered), else `cuMemAlloc` / `cuMemFree`.
  pub(super) pools: bool,
  /// Created on the first hand-over and reused: an event may be re-recorded once a wait on it
  /// has been enqueued (earlier waits keep what they captured). The lock makes record + wait
  /// one step.
  event: Mutex<Option<Handle>>,
  /// The pinned staging pool (`staging.rs`), allocated on the first staged copy.
  pub(super) staging: Mutex<super::staging::StagingState>,
}

impl core::fmt::Debug for CudaDevice {
  fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
    write!(f, "CudaDevice(cuda:{})", self.ordinal)
  }
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
  // A panic while holding the lock leaves plain data behind; keep going.
  mutex
    .lock()
    .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The devices made so far, by ordinal.
static DEVICES: Mutex<Vec<Option<Arc<CudaDevice>>>> = Mutex::new(Vec::new());

/// Every device made so far (for releases that concern them all).
pub(super) fn known_devices() -> Vec<Arc<CudaDevice>> {
  lock(&DEVICES).iter().flatten().cloned().collect()
}

/// The device `cuda:<ordinal>`, its context retained on first use and kept for the process.
/// Fails with `ERR_CUDA_UNAVAILABLE` without a driver, `ERR_DLPACK_DEVICE` for an ordinal the
/// driver does not have, and `ERR_CUDA` when the context cannot be made.
pub fn device(ordinal: i32) -> Result<Arc<CudaDevice>> {
  let count = *probe().as_ref().map_err(Clone::clone)?;
  let index = usize::try_from(ordinal)
    .ok()
    .filter(|&index| index < count)
    .ok_or_else(|| {
      DLPackError::new(
        ErrorKind::Device,
        format!("cuda:{ordinal} does not exist: the driver reports {count} device(s)"),
      )
    })?;
  let mut devices = lock(&DEVICES);
  if devices.len() < count {
    devices.resize(count, None);
  }
  if let Some(device) = &devices[index] {
    return Ok(device.clone());
  }
  let driver = driver()?;
  let mut handle: c_int = 0;
  // SAFETY: valid out-pointer, an ordinal below the device count.
  check("cuDeviceGet", unsafe {
    (driver.device_get)(&mut handle, ordinal)
  })?;
  let mut ctx: CuContext = core::ptr::null_mut();
  // SAFETY: valid out-pointer and device. Retaining makes no context current anywhere.
  check("retaining the primary context", unsafe {
    (driver.primary_ctx_retain)(&mut ctx, handle)
  })?;
  let mut pools: c_int = 0;
  // SAFETY: valid out-pointer, attribute and device.
  check("cuDeviceGetAttribute", unsafe {
    (driver.device_get_attribute)(&mut pools, ATTRIBUTE_MEMORY_POOLS_SUPPORTED, handle)
  })?;
  let device = Arc::new(CudaDevice {
    ordinal,
    ctx: Handle(ctx),
    pools: pools > 0,
    event: Mutex::new(None),
    staging: Mutex::new(Default::default()),
  });
  devices[index] = Some(device.clone());
  Ok(device)
}

/// Our context pushed on the calling thread's context stack; popping it on drop gives the
/// thread back whatever context it had (none included).
pub(super) struct Bound {
  pub(super) driver: &'static Driver,
}

impl Drop for Bound {
  fn drop(&mut self) {
    let mut popped: CuContext = core::ptr::null_mut();
    // SAFETY: pops the context `CudaDevice::bind` pushed on this thread.
    let code = unsafe { (self.driver.ctx_pop)(&mut popped) };
    if code != CUDA_SUCCESS {
      release_failed("cuCtxPopCurrent", code);
    }
  }
}

impl CudaDevice {
  pub fn ordinal(&self) -> i32 {
    self.ordinal
  }

  /// `cuda:<ordinal>`.
  pub fn dl_device(&self) -> Device {
    Device::cuda(self.ordinal)
  }

  /// The stream our buffers' work is enqueued on: the legacy default stream.
  pub fn stream(&self) -> Stream {
    Stream::Legacy
  }

  /// Whether allocations come from the device's memory pool (stream-ordered free).
  pub fn has_memory_pools(&self) -> bool {
    self.pools
  }

  /// Makes our context current on this thread until the guard drops, then restores the
  /// thread's previous one (`cuCtxPushCurrent` / `cuCtxPopCurrent`: the raw driver calls,
  /// nothing cached or sticky in between).
  pub(super) fn bind(&self) -> Result<Bound> {
    let driver = driver()?;
    // SAFETY: our retained primary context, valid for the life of the process.
    check("cuCtxPushCurrent", unsafe { (driver.ctx_push)(self.ctx.0) })?;
    Ok(Bound { driver })
  }

  /// Producer side of a hand-over: makes `consumer` wait for everything enqueued so far on our
  /// stream (one `cuEventRecord` + one `cuStreamWaitEvent`, no host synchronisation). Nothing
  /// happens for [`Stream::NoSync`] and for the legacy default stream, which is ours.
  pub fn sync_to(&self, consumer: Stream) -> Result<()> {
    match consumer {
      Stream::NoSync | Stream::Legacy => Ok(()),
      other => self.link(Stream::Legacy, other),
    }
  }

  /// Consumer side: makes our stream wait for everything enqueued so far on `producer`
  /// (same cost as [`CudaDevice::sync_to`]).
  pub fn wait_for(&self, producer: Stream) -> Result<()> {
    match producer {
      Stream::NoSync | Stream::Legacy => Ok(()),
      other => self.link(other, Stream::Legacy),
    }
  }

  /// Records the shared event on `from` and makes `to` wait on it.
  fn link(&self, from: Stream, to: Stream) -> Result<()> {
    let (Some(from), Some(to)) = (from.raw(), to.raw()) else {
      return Ok(());
    };
    let mut slot = lock(&self.event);
    let bound = self.bind()?;
    let event = match *slot {
      Some(event) => event,
      None => {
        let mut event: CuEvent = core::ptr::null_mut();
        // SAFETY: valid out-pointer; our context is current.
        check("cuEventCreate", unsafe {
          (bound.driver.event_create)(&mut event, EVENT_DISABLE_TIMING)
        })?;
        *slot = Some(Handle(event));
        Handle(event)
      }
    };
    // SAFETY: the event is alive (held by `slot`, under the lock) and belongs to this context;
    // `from` is our stream or a stream the caller vouched for as alive, in this context. A
    // bad handle is undefined behaviour in a real driver (only the fake reports it).
    check("cuEventRecord", unsafe {
      (bound.driver.event_record)(event.0, from)
    })?;
    // SAFETY: as above; the event may come from another context than `to`.
    check("cuStreamWaitEvent", unsafe {
      (bound.driver.stream_wait_event)(to, event.0, 0)
    })
  }

  /// Blocks the host until everything enqueued on our stream has run.
  pub fn synchronize(&self) -> Result<()> {
    let bound = self.bind()?;
    // SAFETY: the legacy stream of our (bound) context.
    check("cuStreamSynchronize", unsafe {
      (bound.driver.stream_synchronize)(LEGACY_STREAM)
    })
  }

  /// Enqueues a host → device copy of `src` to `dst` on our stream. The driver stages pageable
  /// host memory before it returns, so `src` may be reused right away (the staging may also
  /// make the call wait for the stream on a real driver: see docs/cuda.md).
  ///
  /// # Safety
  /// `dst .. dst + src.len()` must be device memory of this device that stays allocated until
  /// the copy has run (stream order: until later work on our stream, or a sync).
  pub unsafe fn copy_from_host(&self, dst: u64, src: &[u8]) -> Result<()> {
    if src.is_empty() {
      return Ok(());
    }
    let bound = self.bind()?;
    // SAFETY: the caller's contract; `src` is readable host memory for the call.
    check("cuMemcpyHtoDAsync", unsafe {
      (bound.driver.memcpy_htod_async)(dst, src.as_ptr().cast(), src.len(), LEGACY_STREAM)
    })
  }

  /// Copies `src .. src + dst.len()` (device memory) into `dst` on our stream and waits for it.
  ///
  /// # Safety
  /// The source range must be device memory that stays allocated for the call.
  pub unsafe fn copy_to_host(&self, dst: &mut [u8], src: u64) -> Result<()> {
    if dst.is_empty() {
      return Ok(());
    }
    let bound = self.bind()?;
    // SAFETY: the caller's contract; `dst` is writable host memory that outlives the copy,
    // because we synchronise before returning.
    check("cuMemcpyDtoHAsync", unsafe {
      (bound.driver.memcpy_dtoh_async)(dst.as_mut_ptr().cast(), src, dst.len(), LEGACY_STREAM)
    })?;
    // SAFETY: the legacy stream of our (bound) context.
    check("cuStreamSynchronize", unsafe {
      (bound.driver.stream_synchronize)(LEGACY_STREAM)
    })
  }

  /// Enqueues a device → device copy of `len` bytes on our stream.
  ///
  /// # Safety
  /// Both ranges must be device memory that stays allocated until the copy has run.
  pub unsafe fn copy_device(&self, dst: u64, src: u64, len: usize) -> Result<()> {
    if len == 0 {
      return Ok(());
    }
    let bound = self.bind()?;
    // SAFETY: the caller's contract.
    check("cuMemcpyDtoDAsync", unsafe {
      (bound.driver.memcpy_dtod_async)(dst, src, len, LEGACY_STREAM)
    })
  }

  /// Frees an allocation of ours (from [`DeviceBuffer::alloc`]) in stream order. With memory
  /// pools: `cuMemFreeAsync` on our stream, here. Without: a stream synchronisation and
  /// `cuMemFree` on the release thread. Never blocks; failures are counted.
  pub(super) fn free(self: &Arc<Self>, ptr: u64) {
    if !self.pools {
      defer(Job::Free {
        device: self.clone(),
        ptr,
      });
      return;
    }
    let code = match self.bind() {
      // SAFETY: our allocation, freed once; later work on our stream cannot reach it.
      Ok(bound) => unsafe { (bound.driver.mem_free_async)(ptr, LEGACY_STREAM) },
      Err(_) => CUDA_ERROR_NOT_PERMITTED,
    };
    match code {
      CUDA_SUCCESS => {}
      // Called from a CUDA host function (where the driver forbids calls) or similar: the
      // release thread frees it instead.
      CUDA_ERROR_NOT_PERMITTED => defer(Job::Free {
        device: self.clone(),
        ptr,
      }),
      code => release_failed("cuMemFreeAsync", code),
    }
  }

  /// The release thread's (blocking) free.
  pub(super) fn free_blocking(&self, ptr: u64) {
    let bound = match self.bind() {
      Ok(bound) => bound,
      Err(_) => return release_failed("cuCtxPushCurrent (free)", CUDA_ERROR_NOT_PERMITTED),
    };
    // SAFETY: the legacy stream of our (bound) context; then our allocation, freed once, after
    // the work queued on it (stream-ordered with pools, after the synchronisation without).
    unsafe {
      let code = if self.pools {
        (bound.driver.mem_free_async)(ptr, LEGACY_STREAM)
      } else {
        let code = (bound.driver.stream_synchronize)(LEGACY_STREAM);
        if code != CUDA_SUCCESS {
          release_failed("cuStreamSynchronize (free)", code);
        }
        (bound.driver.mem_free)(ptr)
      };
      if code != CUDA_SUCCESS {
        release_failed("freeing device memory", code);
      }
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn stream_values_follow_the_protocol() {
    assert_eq!(Stream::from_dlpack(None), Ok(Stream::Legacy));
    assert_eq!(Stream::from_dlpack(Some(1)), Ok(Stream::Legacy));
    assert_eq!(Stream::from_dlpack(Some(2)), Ok(Stream::PerThread));
    assert_eq!(Stream::from_dlpack(Some(-1)), Ok(Stream::NoSync));
    assert_eq!(
      Stream::from_dlpack(Some(0x7f00_dead_beef)),
      Ok(Stream::Handle(0x7f00_dead_beef))
    );
    assert_eq!(
      Stream::from_dlpack(Some(u64::MAX as i128)),
      Ok(Stream::Handle(u64::MAX))
    );
    for bad in [0, -2, i64::MIN as i128, u64::MAX as i128 + 1] {
      assert_eq!(
        Stream::from_dlpack(Some(bad)).map_err(|e| e.code()),
        Err("ERR_DLPACK_STREAM"),
        "{bad}"
      );
    }
    for stream in [
      Stream::NoSync,
      Stream::Legacy,
      Stream::PerThread,
      Stream::Handle(77),
    ] {
      assert_eq!(Stream::from_dlpack(Some(stream.to_dlpack())), Ok(stream));
    }
  }
}
