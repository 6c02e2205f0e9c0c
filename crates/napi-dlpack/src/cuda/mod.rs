//! CUDA device memory through the driver API, loaded by [cudarc] (feature `cuda`).
//!
//! - The driver library (`libcuda.so`, `nvcuda.dll`) is loaded at run time, on first use, by
//!   cudarc's loader, so this module builds without a CUDA toolkit and a process without a
//!   driver keeps working: every call then fails with
//!   [`ErrorKind::CudaUnavailable`](crate::error::ErrorKind::CudaUnavailable).
//! - **Raw entry points, raw results.** We call the driver through our own table of entry points
//!   (`Driver`) whose results are plain integers. cudarc's bindings type `CUresult` as a Rust
//!   enum generated from one toolkit version (12.8 here); a newer driver returns codes that enum
//!   lacks (13.x: 36, 47, 227, 917–919), and such a value in an enum is undefined behaviour.
//!   Error names come from the driver itself (`cuGetErrorName`), so they are right for any
//!   driver version.
//! - One primary context per device, retained on first use and kept for the life of the
//!   process (the primary context is the one the CUDA runtime, PyTorch, CuPy and ONNX Runtime
//!   use, so pointers are valid across all of them).
//! - **The caller's context is left alone.** Every driver call we make, the ones in drops and
//!   DLPack deleters included, runs between `cuCtxPushCurrent` of our context and
//!   `cuCtxPopCurrent` (`CudaDevice::bind`): the thread's current context afterwards is the
//!   one it had before, whether that was none, another device's or another library's.
//! - **Streams.** All work of this module runs on the device's *legacy default stream*
//!   (DLPack stream value `1`). That is "the stream" of every [`DeviceBuffer`]: its last write
//!   was enqueued there. Hand-overs to a consumer on another stream record one event on the
//!   source stream and make the consumer's stream wait on it ([`CudaDevice::sync_to`]); nothing
//!   blocks the host.
//! - **Releases.** Our allocations are freed stream-ordered on our stream (`cuMemFreeAsync`);
//!   without memory pools the free (a stream synchronisation and `cuMemFree`) runs on a
//!   release thread, so a drop never blocks the thread that drops, and a deleter called from a
//!   CUDA host function cannot deadlock on it. Imported device memory is never freed here; its
//!   producer's deleter is delayed until our queued reads of it completed
//!   ([`release_after_queued_work`]). The release thread is drained before an environment or
//!   the process ends ([`drain_releases`]). Pinned host memory ([`PinnedBuffer`]) is freed
//!   with `cuMemFreeHost` on the release thread too (it synchronises the device). Failures in these paths are counted
//!   ([`release_stats`]) and the first one is printed to stderr.

use crate::error::DLPackError;

/// The result of the CUDA calls: a [`DLPackError`] with its stable code on failure.
type Result<T, E = DLPackError> = core::result::Result<T, E>;

/// DLPack stream value of the legacy default stream (`CU_STREAM_LEGACY`).
pub const STREAM_LEGACY: i64 = 1;
/// DLPack stream value of the per-thread default stream (`CU_STREAM_PER_THREAD`).
pub const STREAM_PER_THREAD: i64 = 2;
/// DLPack stream value meaning "the producer must not synchronise".
pub const STREAM_NO_SYNC: i64 = -1;

mod buffer;
mod device;
mod driver;
mod pinned;
mod release;
mod staging;
mod validation;

pub use buffer::{DeviceBuffer, DeviceTensor};
pub use device::{device, CudaDevice, Stream};
pub use driver::{check_available, device_count, is_available};
pub use pinned::PinnedBuffer;
pub use release::{
  drain_releases, release_after_queued_work, release_stats, warn_if_undrained, ReleaseStats,
  RELEASE_DRAIN_LIMIT,
};
pub use staging::{
  release_staging, staging_env_ended, staging_stats, Staged, StagingStats, MIN_PIECE_BYTES,
  STAGING_CHUNKS, STAGING_CHUNK_BYTES, STAGING_MIN_BYTES,
};
pub use validation::{pointer_info, validate_foreign, PointerInfo, MEMORY_TYPE_DEVICE};

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn unavailable_cuda_is_an_error_not_a_panic() {
    // Whatever this machine has, the calls return; without a driver they say why.
    if !is_available() {
      assert_eq!(device_count(), 0);
      assert_eq!(
        check_available().map_err(|e| e.code()),
        Err("ERR_CUDA_UNAVAILABLE")
      );
      assert_eq!(
        device(0).map(|_| ()).map_err(|e| e.code()),
        Err("ERR_CUDA_UNAVAILABLE")
      );
    } else {
      assert!(device_count() > 0);
      assert_eq!(
        device(device_count() as i32)
          .map(|_| ())
          .map_err(|e| e.code()),
        Err("ERR_DLPACK_DEVICE")
      );
    }
  }
}
