//! The pinned staging pipeline: copies between pageable host memory (V8's, a Vec) and device
//! memory through a small pool of page-locked chunks per device.
//!
//! The driver copies pageable memory through its own small bounce buffers, one after the
//! other, at a fraction of the link's rate (8.6 GB/s for torch's pageable `.cuda()` on an H200
//! whose link does 55). Here the host side is ours: the CPU copy (or strided gather) of piece
//! `k + 1` into one chunk runs while the DMA engine reads piece `k` from the other, and on the
//! way down the copy out of one chunk runs while the next piece lands in the other.
//!
//! **Ordering.** Everything runs on the device's legacy default stream, our stream. Each chunk
//! has an event, recorded after the DMA that uses it:
//! - host → device: before the CPU writes a chunk again, it waits for that chunk's event (the
//!   DMA that read its previous contents); the last pieces stay in flight when the call returns
//!   (the source has been copied out by then; the device data is stream-ordered, as for every
//!   copy of ours);
//! - device → host: the CPU copies a chunk out only once its event completed; the call returns
//!   once every piece is out (no chunk stays in flight).
//!
//! A DMA into a chunk that an earlier upload still reads from needs no wait: both are on our
//! stream, in order. A failure in the middle (a copy, a record, a wait) synchronises the stream
//! before the chunks can be used again, or drops the pool if even that fails.
//!
//! **Sizes.** Two chunks of [`STAGING_CHUNK_BYTES`] (4 MiB): 8 MiB of page-locked memory per
//! device that made a staged copy. A 4 MiB DMA takes ~76 µs at 55 GB/s, well above the few µs a
//! copy call, an event record and a wait cost, while filling 4 MiB on the CPU takes several
//! times longer: the CPU side is the slower stage in both directions, so a third chunk would
//! only hold memory. Copies below [`STAGING_MIN_BYTES`] (256 KiB) keep the driver's direct path,
//! whose own bounce buffer serves them as fast (1 KiB: 5.5 µs on the H200); mid-sized copies are
//! cut into pieces of at least [`MIN_PIECE_BYTES`], a quarter of the copy where that is larger,
//! so that they overlap too.
//!
//! **Lifetime.** The pool is allocated on the first staged copy of a device (portable pinned
//! memory, [`PinnedBuffer`]: a chunk of one device is also read by the other device's DMA in
//! cross-device copies) and reused by every later one, from any thread (one copy at a time: a copy that
//! finds the pool busy takes the direct path instead of waiting). It is released by
//! [`release_staging`] (the addon calls it when the last JS environment that made a staged
//! copy ends) and dropped, without freeing, when the device was reset under us
//! (`cuDevicePrimaryCtxReset`, e.g. `cudaDeviceReset()` in another library, frees every
//! allocation of the context): each staged copy first checks the chunks' buffer ids with one
//! `cuPointerGetAttributes` call.
//!
//! **Failures.** When `cuMemHostAlloc` fails (page-locked memory is limited, e.g. by
//! `ulimit -l` in containers), the copy takes the direct path, which needs no pinned memory, and
//! the device does not try again until the pool is released: a copy never fails for want of
//! pinned memory.

use core::cell::Cell;
use core::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::device::{known_devices, Bound, CudaDevice};
use super::driver::{
  check, CuDevicePtr, CuEvent, CUDA_ERROR_NOT_PERMITTED, CUDA_SUCCESS, EVENT_DISABLE_TIMING,
  LEGACY_STREAM, POINTER_MEMORY_TYPE,
};
use super::pinned::PinnedBuffer;
use super::release::release_failed;
use super::Result;

/// Bytes per chunk (see the module documentation for the choice).
pub const STAGING_CHUNK_BYTES: usize = 4 << 20;
/// Chunks per device: double buffering.
pub const STAGING_CHUNKS: usize = 2;
/// Copies of fewer bytes take the driver's direct path.
pub const STAGING_MIN_BYTES: usize = 256 << 10;
/// The smallest piece a staged copy is cut into (but the last).
pub const MIN_PIECE_BYTES: usize = 256 << 10;

/// `CU_MEMORYTYPE_HOST`.
const MEMORY_TYPE_HOST: u32 = 1;
/// `CU_POINTER_ATTRIBUTE_BUFFER_ID`: unique per allocation in the process.
const POINTER_BUFFER_ID: c_int = 7;

/// One page-locked chunk and the event recorded after the last DMA that used it.
struct Chunk {
  /// Portable pinned memory (`pinned.rs`): freed on the release thread when dropped.
  buffer: PinnedBuffer,
  host: *mut u8,
  /// The driver's id of the allocation (0 where the driver reports none): a reset device has
  /// freed it, and a new allocation at the same address has another id.
  buffer_id: u64,
  event: CuEvent,
  /// A DMA using the chunk was enqueued after its event's last completed wait.
  in_flight: bool,
}

/// The chunks of one device.
pub(super) struct Pool {
  chunks: Vec<Chunk>,
  /// The chunk the next upload piece goes to (uploads rotate, so that the oldest DMA is the
  /// one waited for).
  next: usize,
}

/// A device's staging state, under the device's lock.
#[derive(Default)]
pub(super) enum StagingState {
  /// Nothing allocated yet (or released).
  #[default]
  Empty,
  Ready(Pool),
  /// `cuMemHostAlloc` failed: direct copies until the pool is released.
  Failed,
}

// SAFETY: the chunks are page-locked host memory owned by the pool (`host` is the address of
// `buffer`), and events are process-wide driver handles; the pool is only used under its
// device's lock.
unsafe impl Send for StagingState {}

static STAGED: AtomicUsize = AtomicUsize::new(0);
static DIRECT_FALLBACKS: AtomicUsize = AtomicUsize::new(0);
static POOLS_LOST: AtomicUsize = AtomicUsize::new(0);
static LIVE_CHUNKS: AtomicUsize = AtomicUsize::new(0);
/// JS environments (threads) that made a staged copy and have not ended.
static STAGING_USERS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
  /// Whether this thread's environment made a staged copy (counted in `STAGING_USERS`).
  static USES_STAGING: Cell<bool> = const { Cell::new(false) };
}

/// What the staging pipeline did, for tests and diagnostics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StagingStats {
  /// Page-locked chunks allocated now, all devices.
  pub chunks: usize,
  /// Bytes per chunk.
  pub chunk_bytes: usize,
  /// Copies that went through the pipeline.
  pub staged: usize,
  /// Copies large enough to stage that took the direct path (no pinned memory, or the pool
  /// was busy with another thread's copy).
  pub fallbacks: usize,
  /// Pools dropped without being freed because their device was reset under us.
  pub pools_lost: usize,
}

pub fn staging_stats() -> StagingStats {
  StagingStats {
    chunks: LIVE_CHUNKS.load(Ordering::SeqCst),
    chunk_bytes: STAGING_CHUNK_BYTES,
    staged: STAGED.load(Ordering::SeqCst),
    fallbacks: DIRECT_FALLBACKS.load(Ordering::SeqCst),
    pools_lost: POOLS_LOST.load(Ordering::SeqCst),
  }
}

/// Releases every device's pool: waits for the DMAs still reading the chunks (an upload's last
/// pieces), then frees them. A pool in use by another thread's copy at that moment is left to
/// the next release. Also forgets a failed allocation, so the next copy tries again.
pub fn release_staging() {
  for device in known_devices() {
    let Some(mut state) = try_lock(&device.staging) else {
      continue;
    };
    if let StagingState::Ready(pool) = std::mem::take(&mut *state) {
      match device.bind() {
        Ok(bound) => pool.free(&bound),
        Err(_) => release_failed("cuCtxPushCurrent (staging)", CUDA_ERROR_NOT_PERMITTED),
      }
    }
  }
}

/// Called where a JS environment ends: when it is the last one that made a staged copy, every
/// pool is released ([`release_staging`]).
pub fn staging_env_ended() {
  if USES_STAGING.with(|uses| uses.replace(false))
    && STAGING_USERS.fetch_sub(1, Ordering::SeqCst) == 1
  {
    release_staging();
  }
}

fn note_user() {
  USES_STAGING.with(|uses| {
    if !uses.replace(true) {
      STAGING_USERS.fetch_add(1, Ordering::SeqCst);
    }
  });
}

/// The pool's lock if no other thread holds it. Poisoning is ignored: a panic while it was held
/// can only come from a copy's fill or drain (the driver calls return codes), after that chunk
/// was waited for and before a DMA used it again, so every chunk's `in_flight` and event still
/// describe it.
fn try_lock(state: &Mutex<StagingState>) -> Option<MutexGuard<'_, StagingState>> {
  match state.try_lock() {
    Ok(guard) => Some(guard),
    Err(std::sync::TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
    Err(std::sync::TryLockError::WouldBlock) => None,
  }
}

/// How a staged copy is cut: pieces of at most a chunk, multiples of `unit` bytes (at most a
/// chunk), about a quarter of the copy but at least [`MIN_PIECE_BYTES`], and of even sizes (no
/// tiny last piece).
fn piece_bytes(len: usize, unit: usize) -> usize {
  let target = (len / 4).clamp(MIN_PIECE_BYTES, STAGING_CHUNK_BYTES);
  let even = len.div_ceil(len.div_ceil(target).max(1));
  let piece = even.div_ceil(unit).saturating_mul(unit);
  if piece > STAGING_CHUNK_BYTES {
    (STAGING_CHUNK_BYTES / unit * unit).max(unit)
  } else {
    piece.max(unit)
  }
}

impl Pool {
  /// Allocates the chunks; on failure frees what it had allocated.
  fn alloc(device: &Arc<CudaDevice>, bound: &Bound) -> Result<Pool> {
    let mut pool = Pool {
      chunks: Vec::with_capacity(STAGING_CHUNKS),
      next: 0,
    };
    for _ in 0..STAGING_CHUNKS {
      let buffer = match PinnedBuffer::alloc(device, STAGING_CHUNK_BYTES) {
        Ok(buffer) => buffer,
        Err(error) => {
          pool.free(bound);
          return Err(error);
        }
      };
      let mut event: CuEvent = core::ptr::null_mut();
      // SAFETY: valid out-pointer; our context is current.
      let code = unsafe { (bound.driver.event_create)(&mut event, EVENT_DISABLE_TIMING) };
      if let Err(error) = check("cuEventCreate (staging)", code) {
        drop(buffer);
        pool.free(bound);
        return Err(error);
      }
      LIVE_CHUNKS.fetch_add(1, Ordering::SeqCst);
      pool.chunks.push(Chunk {
        host: buffer.as_ptr(),
        buffer,
        buffer_id: 0,
        event,
        in_flight: false,
      });
    }
    for index in 0..pool.chunks.len() {
      match pool.identify(bound, index) {
        Ok((_, id)) => pool.chunks[index].buffer_id = id,
        Err(error) => {
          pool.free(bound);
          return Err(error);
        }
      }
    }
    Ok(pool)
  }

  /// The driver's memory type and buffer id of a chunk.
  fn identify(&self, bound: &Bound, index: usize) -> Result<(u32, u64)> {
    let mut memory_type: u32 = 0;
    let mut buffer_id: u64 = 0;
    let mut attributes: [c_int; 2] = [POINTER_MEMORY_TYPE, POINTER_BUFFER_ID];
    let mut data: [*mut c_void; 2] = [(&raw mut memory_type).cast(), (&raw mut buffer_id).cast()];
    // SAFETY: two attributes with storage of the sizes the driver writes (unsigned int,
    // unsigned long long), alive for the call; our context is current.
    check("cuPointerGetAttributes (staging)", unsafe {
      (bound.driver.pointer_get_attributes)(
        2,
        attributes.as_mut_ptr(),
        data.as_mut_ptr(),
        self.chunks[index].host as usize as CuDevicePtr,
      )
    })?;
    Ok((memory_type, buffer_id))
  }

  /// Whether the chunks are still the allocations we made (a device reset frees them).
  fn intact(&self, bound: &Bound) -> Result<bool> {
    for (index, chunk) in self.chunks.iter().enumerate() {
      let (memory_type, id) = self.identify(bound, index)?;
      if memory_type != MEMORY_TYPE_HOST || id != chunk.buffer_id {
        return Ok(false);
      }
    }
    Ok(true)
  }

  /// Waits for the chunk's last DMA, if one may still be running.
  fn settle(&mut self, bound: &Bound, index: usize) -> Result<()> {
    let chunk = &mut self.chunks[index];
    if chunk.in_flight {
      // SAFETY: our event, alive while the pool is.
      check("cuEventSynchronize (staging)", unsafe {
        (bound.driver.event_synchronize)(chunk.event)
      })?;
      chunk.in_flight = false;
    }
    Ok(())
  }

  /// After a failure in the middle of a copy, makes every chunk idle: a stream
  /// synchronisation, since an event may not cover the DMAs enqueued before the failure.
  /// Whether the pool can be used again.
  fn recover(&mut self, bound: &Bound) -> bool {
    // SAFETY: the legacy stream of our (bound) context.
    let code = unsafe { (bound.driver.stream_synchronize)(LEGACY_STREAM) };
    if code != CUDA_SUCCESS {
      return false;
    }
    for chunk in &mut self.chunks {
      chunk.in_flight = false;
    }
    true
  }

  /// Waits for the chunks' DMAs, destroys their events and frees them (on the release thread;
  /// failures are counted: nobody to report to).
  fn free(self, bound: &Bound) {
    for chunk in self.chunks {
      // SAFETY: our event, destroyed once, after the last DMA using the chunk has run.
      unsafe {
        if chunk.in_flight {
          let code = (bound.driver.event_synchronize)(chunk.event);
          if code != CUDA_SUCCESS {
            // The DMA may still use the chunk: make sure nothing is queued before freeing.
            let code = (bound.driver.stream_synchronize)(LEGACY_STREAM);
            if code != CUDA_SUCCESS {
              release_failed("cuStreamSynchronize (staging)", code);
            }
          }
        }
        let code = (bound.driver.event_destroy)(chunk.event);
        if code != CUDA_SUCCESS {
          release_failed("cuEventDestroy (staging)", code);
        }
      }
      drop(chunk.buffer);
      LIVE_CHUNKS.fetch_sub(1, Ordering::SeqCst);
    }
  }

  /// Forgets chunks that a device reset freed already (and their events with them).
  fn forget(self) {
    LIVE_CHUNKS.fetch_sub(self.chunks.len(), Ordering::SeqCst);
    POOLS_LOST.fetch_add(1, Ordering::SeqCst);
    for chunk in self.chunks {
      // Freeing memory that is no longer ours could free someone else's allocation.
      core::mem::forget(chunk.buffer);
    }
  }

  fn chunk_bytes(&mut self, index: usize, len: usize) -> &mut [u8] {
    debug_assert!(len <= STAGING_CHUNK_BYTES);
    // SAFETY: `len` bytes of a live chunk of STAGING_CHUNK_BYTES, which no DMA uses now (the
    // caller settled it) and which nothing else references while the pool is borrowed.
    unsafe { core::slice::from_raw_parts_mut(self.chunks[index].host, len) }
  }

  fn record(&mut self, bound: &Bound, index: usize) -> Result<()> {
    let chunk = &mut self.chunks[index];
    // Marked first: if the record fails, the DMA enqueued before it still uses the chunk
    // (`recover` then waits for the whole stream).
    chunk.in_flight = true;
    // SAFETY: our event, our stream; same context.
    check("cuEventRecord (staging)", unsafe {
      (bound.driver.event_record)(chunk.event, LEGACY_STREAM)
    })
  }

  fn upload(
    &mut self,
    bound: &Bound,
    dst: u64,
    len: usize,
    unit: usize,
    fill: &mut dyn FnMut(usize, &mut [u8]) -> Result<()>,
  ) -> Result<()> {
    let piece = piece_bytes(len, unit);
    let mut offset = 0;
    while offset < len {
      let bytes = piece.min(len - offset);
      let index = self.next;
      self.next = (index + 1) % self.chunks.len();
      // The DMA that read this chunk's previous piece must have run before it is overwritten.
      self.settle(bound, index)?;
      fill(offset, self.chunk_bytes(index, bytes))?;
      // SAFETY: `dst + offset .. + bytes` lies in the caller's device range; the chunk is
      // page-locked and stays allocated and unwritten until the event recorded next completed.
      check("cuMemcpyHtoDAsync (staging)", unsafe {
        (bound.driver.memcpy_htod_async)(
          dst + offset as u64,
          self.chunks[index].host.cast(),
          bytes,
          LEGACY_STREAM,
        )
      })?;
      self.record(bound, index)?;
      offset += bytes;
    }
    Ok(())
  }

  fn download(
    &mut self,
    bound: &Bound,
    src: u64,
    len: usize,
    drain: &mut dyn FnMut(usize, &[u8]) -> Result<()>,
  ) -> Result<()> {
    let piece = piece_bytes(len, 1);
    let pieces = len.div_ceil(piece);
    let chunks = self.chunks.len();
    let span = |k: usize| (k * piece, piece.min(len - k * piece));
    // Piece k lands in chunk k % chunks. A chunk an earlier upload still reads from is written
    // after that read: both DMAs are on our stream.
    let enqueue = |pool: &mut Pool, k: usize| -> Result<()> {
      let (offset, bytes) = span(k);
      let index = k % chunks;
      // SAFETY: `src + offset .. + bytes` lies in the caller's device range; the chunk is
      // page-locked and not read on the host until the event recorded next completed.
      check("cuMemcpyDtoHAsync (staging)", unsafe {
        (bound.driver.memcpy_dtoh_async)(
          pool.chunks[index].host.cast(),
          src + offset as u64,
          bytes,
          LEGACY_STREAM,
        )
      })?;
      pool.record(bound, index)
    };
    for k in 0..pieces.min(chunks) {
      enqueue(self, k)?;
    }
    for k in 0..pieces {
      let index = k % chunks;
      // The piece is in the chunk only once its DMA ran.
      self.settle(bound, index)?;
      let (offset, bytes) = span(k);
      drain(offset, self.chunk_bytes(index, bytes))?;
      if k + chunks < pieces {
        enqueue(self, k + chunks)?;
      }
    }
    Ok(())
  }
}

/// What [`CudaDevice::upload_staged`] and [`CudaDevice::download_staged`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Staged {
  /// The copy went through the pipeline.
  Done,
  /// Not staged (too small, no pinned memory, the pool busy): nothing was done, the caller
  /// copies directly.
  Direct,
}

impl CudaDevice {
  /// Runs `copy` with the device's pool (allocated on first use), or returns
  /// [`Staged::Direct`] when there is none to be had.
  fn with_pool(
    self: &Arc<Self>,
    len: usize,
    copy: &mut dyn FnMut(&mut Pool, &Bound) -> Result<()>,
  ) -> Result<Staged> {
    if len < STAGING_MIN_BYTES {
      return Ok(Staged::Direct);
    }
    let Some(mut state) = try_lock(&self.staging) else {
      // Another thread's copy: the direct path rather than waiting for it.
      DIRECT_FALLBACKS.fetch_add(1, Ordering::SeqCst);
      return Ok(Staged::Direct);
    };
    let bound = self.bind()?;
    if let StagingState::Ready(pool) = &*state {
      if !pool.intact(&bound)? {
        if let StagingState::Ready(pool) = std::mem::take(&mut *state) {
          pool.forget();
        }
      }
    }
    // This environment is a user from its first try: its end releases the pool, or forgets a
    // failed allocation.
    note_user();
    if let StagingState::Empty = &*state {
      *state = match Pool::alloc(self, &bound) {
        Ok(pool) => StagingState::Ready(pool),
        Err(_) => StagingState::Failed,
      };
    }
    let StagingState::Ready(pool) = &mut *state else {
      DIRECT_FALLBACKS.fetch_add(1, Ordering::SeqCst);
      return Ok(Staged::Direct);
    };
    if let Err(error) = copy(pool, &bound) {
      if !pool.recover(&bound) {
        if let StagingState::Ready(pool) = std::mem::take(&mut *state) {
          pool.free(&bound);
        }
      }
      return Err(error);
    }
    STAGED.fetch_add(1, Ordering::SeqCst);
    Ok(Staged::Done)
  }

  /// Enqueues a host → device copy of `len` bytes to `dst` through the staging pipeline:
  /// `fill(offset, piece)` writes bytes `offset .. offset + piece.len()` of the data (both
  /// multiples of `unit`, at most [`STAGING_CHUNK_BYTES`]) into a page-locked chunk, while the
  /// previous piece's DMA runs. When this returns every piece has been filled (the source may
  /// change); the last DMAs are still enqueued on our stream. [`Staged::Direct`] when the copy
  /// is too small or no pool is available: nothing was copied then. On error some pieces may
  /// have been copied.
  ///
  /// # Safety
  /// `dst .. dst + len` must be device memory of this device that stays allocated until the
  /// copy has run (stream order: until later work on our stream, or a sync).
  pub unsafe fn upload_staged(
    self: &Arc<Self>,
    dst: u64,
    len: usize,
    unit: usize,
    fill: &mut dyn FnMut(usize, &mut [u8]) -> Result<()>,
  ) -> Result<Staged> {
    if unit == 0 || unit > STAGING_CHUNK_BYTES {
      return Ok(Staged::Direct);
    }
    self.with_pool(len, &mut |pool, bound| {
      pool.upload(bound, dst, len, unit, fill)
    })
  }

  /// Copies `len` bytes from `src` (device memory) through the staging pipeline:
  /// `drain(offset, piece)` gets bytes `offset .. offset + piece.len()` in order, each while
  /// the next piece's DMA runs. Complete when this returns. [`Staged::Direct`] as for
  /// [`CudaDevice::upload_staged`].
  ///
  /// # Safety
  /// `src .. src + len` must be device memory that stays allocated for the call.
  pub unsafe fn download_staged(
    self: &Arc<Self>,
    src: u64,
    len: usize,
    drain: &mut dyn FnMut(usize, &[u8]) -> Result<()>,
  ) -> Result<Staged> {
    self.with_pool(len, &mut |pool, bound| {
      pool.download(bound, src, len, drain)
    })
  }

  /// A host → device copy of `src` to `dst`: through the staging pipeline when it is large
  /// enough, else (or without pinned memory) the driver's direct copy. When this returns `src`
  /// may change. For pageable memory only: memory that is already page-locked gains nothing
  /// from the extra copy ([`CudaDevice::copy_from_host`] reads it directly).
  ///
  /// # Safety
  /// As [`CudaDevice::copy_from_host`].
  pub unsafe fn upload(self: &Arc<Self>, dst: u64, src: &[u8]) -> Result<()> {
    let mut fill = |offset: usize, piece: &mut [u8]| {
      piece.copy_from_slice(&src[offset..offset + piece.len()]);
      Ok(())
    };
    // SAFETY: forwarded contract.
    match unsafe { self.upload_staged(dst, src.len(), 1, &mut fill)? } {
      Staged::Done => Ok(()),
      // SAFETY: forwarded contract.
      Staged::Direct => unsafe { self.copy_from_host(dst, src) },
    }
  }

  /// A device → host copy of `dst.len()` bytes from `src` into pageable memory, complete when
  /// this returns: staged when large enough, else direct.
  ///
  /// # Safety
  /// As [`CudaDevice::copy_to_host`].
  pub unsafe fn download(self: &Arc<Self>, dst: &mut [u8], src: u64) -> Result<()> {
    let len = dst.len();
    let mut drain = |offset: usize, piece: &[u8]| {
      dst[offset..offset + piece.len()].copy_from_slice(piece);
      Ok(())
    };
    // SAFETY: forwarded contract.
    match unsafe { self.download_staged(src, len, &mut drain)? } {
      Staged::Done => Ok(()),
      // SAFETY: forwarded contract.
      Staged::Direct => unsafe { self.copy_to_host(dst, src) },
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn pieces_are_whole_units_of_at_most_a_chunk() {
    assert_eq!(piece_bytes(STAGING_MIN_BYTES, 1), MIN_PIECE_BYTES);
    assert_eq!(piece_bytes(1 << 30, 1), STAGING_CHUNK_BYTES);
    assert_eq!(piece_bytes(8 << 20, 1), 2 << 20, "a quarter");
    assert_eq!(piece_bytes((5 << 20) + 3, 1), (1 << 20) + 1, "even pieces");
    assert_eq!(piece_bytes(1 << 30, 3), STAGING_CHUNK_BYTES / 3 * 3);
    assert_eq!(
      piece_bytes(1 << 30, STAGING_CHUNK_BYTES),
      STAGING_CHUNK_BYTES
    );
    assert_eq!(piece_bytes(300 << 10, 200 << 10), 200 << 10);
    for len in [STAGING_MIN_BYTES, (1 << 20) + 7, 3 << 22, (1 << 30) + 1] {
      for unit in [1, 2, 8, 12, 1000, 200 << 10, STAGING_CHUNK_BYTES] {
        let piece = piece_bytes(len, unit);
        assert!(
          piece.is_multiple_of(unit) && piece <= STAGING_CHUNK_BYTES,
          "{len} {unit}"
        );
      }
    }
  }
}
