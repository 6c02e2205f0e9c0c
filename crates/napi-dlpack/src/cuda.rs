//! CUDA device memory through the driver API, loaded by [cudarc] (feature `cuda`).
//!
//! - The driver library (`libcuda.so`, `nvcuda.dll`) is loaded at run time, on first use, by
//!   cudarc's loader, so this module builds without a CUDA toolkit and a process without a
//!   driver keeps working: every call then fails with [`ErrorKind::CudaUnavailable`].
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
//!   the process ends ([`drain_releases`]). Failures in these paths are counted
//!   ([`release_stats`]) and the first one is printed to stderr.

use core::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use cudarc::driver::sys;

use crate::device::{Device, DeviceType};
use crate::dtype::DType;
use crate::error::{DLPackError, ErrorKind};
use crate::export::{IntoDLPack, TensorInfo};
use crate::import::ForeignTensor;
use crate::layout::layout_of;

type Result<T, E = DLPackError> = core::result::Result<T, E>;

/// DLPack stream value of the legacy default stream (`CU_STREAM_LEGACY`).
pub const STREAM_LEGACY: i64 = 1;
/// DLPack stream value of the per-thread default stream (`CU_STREAM_PER_THREAD`).
pub const STREAM_PER_THREAD: i64 = 2;
/// DLPack stream value meaning "the producer must not synchronise".
pub const STREAM_NO_SYNC: i64 = -1;

// ---------------------------------------------------------------------------------------------
// The driver's entry points, with integer results

/// A driver result as the driver returns it: an integer, never cudarc's enum (see the module
/// documentation).
type CuResult = c_int;
type CuContext = *mut c_void;
type CuStream = *mut c_void;
type CuEvent = *mut c_void;
type CuDevicePtr = u64;

const CUDA_SUCCESS: CuResult = 0;
const CUDA_ERROR_STUB_LIBRARY: CuResult = 34;
const CUDA_ERROR_NOT_READY: CuResult = 600;
const CUDA_ERROR_NOT_PERMITTED: CuResult = 800;
/// `CU_STREAM_LEGACY`: the legacy default stream of the current context.
const LEGACY_STREAM: CuStream = 1 as CuStream;
/// `CU_EVENT_DISABLE_TIMING`.
const EVENT_DISABLE_TIMING: c_uint = 2;
/// `CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED`.
const ATTRIBUTE_MEMORY_POOLS_SUPPORTED: c_int = 115;
/// `CU_POINTER_ATTRIBUTE_*` values we query.
const POINTER_MEMORY_TYPE: c_int = 2;
const POINTER_DEVICE_ORDINAL: c_int = 9;
const POINTER_RANGE_START_ADDR: c_int = 11;
const POINTER_RANGE_SIZE: c_int = 12;

/// Declares [`Driver`]: one function pointer per entry point, all resolved when the table is
/// loaded, so a driver lacking one is reported as unavailable up front instead of failing
/// (or, in cudarc, panicking) in the middle of an operation.
macro_rules! driver_table {
  ($($field:ident = $symbol:literal: fn($($arg:ty),*);)*) => {
    struct Driver {
      $($field: unsafe extern "C" fn($($arg),*) -> CuResult,)*
    }

    impl Driver {
      /// Resolves every entry point through `resolve` (symbol name with its NUL → address).
      ///
      /// # Safety
      /// `resolve` must look names up in a CUDA driver library: each address is called with
      /// the signature of the CUDA driver API declared in the table.
      unsafe fn load(
        resolve: &dyn Fn(&'static str) -> Result<*mut c_void, String>,
      ) -> Result<Driver, String> {
        Ok(Driver {
          $($field: {
            let address = resolve(concat!($symbol, "\0"))?;
            if address.is_null() {
              return Err(format!("the CUDA driver library has a NULL {}", $symbol));
            }
            // SAFETY: a non-NULL address of the driver's entry point of that name, whose
            // signature is the one declared (the caller's contract).
            unsafe {
              core::mem::transmute::<*mut c_void, unsafe extern "C" fn($($arg),*) -> CuResult>(
                address,
              )
            }
          },)*
        })
      }
    }
  };
}

driver_table! {
  init = "cuInit": fn(c_uint);
  device_get_count = "cuDeviceGetCount": fn(*mut c_int);
  device_get = "cuDeviceGet": fn(*mut c_int, c_int);
  device_get_attribute = "cuDeviceGetAttribute": fn(*mut c_int, c_int, c_int);
  primary_ctx_retain = "cuDevicePrimaryCtxRetain": fn(*mut CuContext, c_int);
  ctx_push = "cuCtxPushCurrent_v2": fn(CuContext);
  ctx_pop = "cuCtxPopCurrent_v2": fn(*mut CuContext);
  get_error_name = "cuGetErrorName": fn(CuResult, *mut *const c_char);
  mem_alloc = "cuMemAlloc_v2": fn(*mut CuDevicePtr, usize);
  mem_alloc_async = "cuMemAllocAsync": fn(*mut CuDevicePtr, usize, CuStream);
  mem_free = "cuMemFree_v2": fn(CuDevicePtr);
  mem_free_async = "cuMemFreeAsync": fn(CuDevicePtr, CuStream);
  memset_d8_async = "cuMemsetD8Async": fn(CuDevicePtr, u8, usize, CuStream);
  memcpy_htod_async = "cuMemcpyHtoDAsync_v2": fn(CuDevicePtr, *const c_void, usize, CuStream);
  memcpy_dtoh_async = "cuMemcpyDtoHAsync_v2": fn(*mut c_void, CuDevicePtr, usize, CuStream);
  memcpy_dtod_async = "cuMemcpyDtoDAsync_v2": fn(CuDevicePtr, CuDevicePtr, usize, CuStream);
  stream_synchronize = "cuStreamSynchronize": fn(CuStream);
  stream_wait_event = "cuStreamWaitEvent": fn(CuStream, CuEvent, c_uint);
  event_create = "cuEventCreate": fn(*mut CuEvent, c_uint);
  event_record = "cuEventRecord": fn(CuEvent, CuStream);
  event_query = "cuEventQuery": fn(CuEvent);
  event_synchronize = "cuEventSynchronize": fn(CuEvent);
  event_destroy = "cuEventDestroy_v2": fn(CuEvent);
  pointer_get_attributes = "cuPointerGetAttributes": fn(c_uint, *mut c_int, *mut *mut c_void, CuDevicePtr);
}

fn cuda_error(message: impl Into<String>) -> DLPackError {
  DLPackError::new(ErrorKind::Cuda, message)
}

fn unavailable(message: impl Into<String>) -> DLPackError {
  DLPackError::new(ErrorKind::CudaUnavailable, message)
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
  if let Some(text) = payload.downcast_ref::<&str>() {
    (*text).to_string()
  } else if let Some(text) = payload.downcast_ref::<String>() {
    text.clone()
  } else {
    "unknown panic".to_string()
  }
}

/// The driver's entry points, loaded once (after the library was found to be present). cudarc
/// panics when no library can be loaded; that panic is caught and becomes the error.
fn driver() -> Result<&'static Driver> {
  static DRIVER: OnceLock<Result<Driver, DLPackError>> = OnceLock::new();
  DRIVER
    .get_or_init(|| {
      // SAFETY: `is_culib_present` only dlopens and dlcloses candidate library names (cudarc
      // ≥ 0.19.5 resolves no symbol there); a panic is caught.
      let present = catch_unwind(|| unsafe { sys::is_culib_present() }).unwrap_or(false);
      if !present {
        return Err(unavailable(
          "no CUDA driver library (libcuda.so / nvcuda.dll) could be loaded",
        ));
      }
      let loaded = catch_unwind(|| {
        // SAFETY: cudarc's loader opens the first candidate library that loads (it is present,
        // checked above) and keeps it for the life of the process.
        let library = unsafe { sys::culib() };
        let resolve = |name: &'static str| -> Result<*mut c_void, String> {
          // SAFETY: reading a symbol's address (as a data pointer); nothing is called here.
          unsafe { library.get::<*mut c_void>(name.as_bytes()) }
            .map(|symbol| *symbol)
            .map_err(|error| {
              format!(
                "the CUDA driver library lacks {}: {error}",
                name.trim_end_matches('\0')
              )
            })
        };
        // SAFETY: the library is the CUDA driver library cudarc selected.
        unsafe { Driver::load(&resolve) }
      });
      match loaded {
        Ok(Ok(driver)) => Ok(driver),
        Ok(Err(message)) => Err(unavailable(message)),
        Err(payload) => Err(unavailable(format!(
          "the CUDA driver library failed: {}",
          panic_message(payload.as_ref())
        ))),
      }
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// Names of the codes our messages rely on, for when the driver cannot name them (a stub
/// library, a driver that failed to load).
const KNOWN_NAMES: [(CuResult, &str); 9] = [
  (1, "CUDA_ERROR_INVALID_VALUE"),
  (2, "CUDA_ERROR_OUT_OF_MEMORY"),
  (3, "CUDA_ERROR_NOT_INITIALIZED"),
  (CUDA_ERROR_STUB_LIBRARY, "CUDA_ERROR_STUB_LIBRARY"),
  (35, "CUDA_ERROR_INSUFFICIENT_DRIVER"),
  (36, "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER"),
  (100, "CUDA_ERROR_NO_DEVICE"),
  (227, "CUDA_ERROR_INSUFFICIENT_LOADER_VERSION"),
  (999, "CUDA_ERROR_UNKNOWN"),
];

/// The driver's name for a result code (`cuGetErrorName`, so codes newer than our bindings are
/// named too), else ours, else a plain description.
fn error_name(code: CuResult) -> String {
  if let Ok(driver) = driver() {
    let mut name: *const c_char = core::ptr::null();
    // SAFETY: `name` is a valid out-pointer; the driver returns a static string.
    if unsafe { (driver.get_error_name)(code, &mut name) } == CUDA_SUCCESS && !name.is_null() {
      // SAFETY: a NUL-terminated static string of the driver.
      return unsafe { CStr::from_ptr(name) }
        .to_string_lossy()
        .into_owned();
    }
  }
  KNOWN_NAMES
    .iter()
    .find(|(known, _)| *known == code)
    .map_or_else(
      || "an unknown CUresult".to_string(),
      |(_, name)| name.to_string(),
    )
}

/// `Ok(())` for `CUDA_SUCCESS`, else an `ERR_CUDA` error naming the call and the result.
fn check(what: &str, code: CuResult) -> Result<()> {
  if code == CUDA_SUCCESS {
    Ok(())
  } else {
    Err(cuda_error(format!(
      "{what} failed: {} ({code})",
      error_name(code)
    )))
  }
}

/// The availability probe, run once per process: library present and complete, then `cuInit` +
/// `cuDeviceGetCount`. `Ok(count)` with `count > 0`, or why CUDA is unavailable.
fn probe() -> &'static Result<usize> {
  static PROBE: OnceLock<Result<usize>> = OnceLock::new();
  PROBE.get_or_init(|| {
    let driver = driver()?;
    // SAFETY: plain driver calls with valid arguments.
    let code = unsafe { (driver.init)(0) };
    if code != CUDA_SUCCESS {
      return Err(unavailable(init_failure(code)));
    }
    let mut count: c_int = 0;
    // SAFETY: `count` is a valid out-pointer.
    let code = unsafe { (driver.device_get_count)(&mut count) };
    if code != CUDA_SUCCESS {
      return Err(unavailable(init_failure(code)));
    }
    match usize::try_from(count) {
      Ok(count) if count > 0 => Ok(count),
      _ => Err(unavailable("the CUDA driver reports no devices")),
    }
  })
}

/// Why `cuInit` failed, in words; the toolkit's stub library gets an explanation of its own.
fn init_failure(code: CuResult) -> String {
  let mut message = format!(
    "the CUDA driver cannot be initialised: {} ({code})",
    error_name(code)
  );
  if code == CUDA_ERROR_STUB_LIBRARY {
    message.push_str(
      ": the libcuda.so found first is the CUDA toolkit's stub library (lib64/stubs), which only \
       exists for linking; take the stubs directory off LD_LIBRARY_PATH so that the driver's \
       libcuda.so.1 loads",
    );
  }
  message
}

/// Whether a CUDA driver with at least one device is usable. Probes once, then cached.
pub fn is_available() -> bool {
  probe().is_ok()
}

/// Number of CUDA devices; 0 when CUDA is unavailable.
pub fn device_count() -> usize {
  probe().as_ref().map_or(0, |&count| count)
}

/// `Ok(())` when CUDA is usable, otherwise the `ERR_CUDA_UNAVAILABLE` error saying why.
pub fn check_available() -> Result<()> {
  probe().as_ref().map(|_| ()).map_err(Clone::clone)
}

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
struct Handle(*mut c_void);

// SAFETY: driver handles are process-wide: the driver allows using a context or event from any
// thread (with the context bound where the call needs it, which `CudaDevice::bind` does).
unsafe impl Send for Handle {}
// SAFETY: as above; the handle itself is never written through.
unsafe impl Sync for Handle {}

/// One CUDA device: its primary context, whether it allocates from memory pools, and the event
/// used for stream hand-overs.
pub struct CudaDevice {
  ordinal: i32,
  /// The device's primary context, retained once and never released.
  ctx: Handle,
  /// `CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED`: allocate with `cuMemAllocAsync` and free
  /// with `cuMemFreeAsync` (stream-ordered), else `cuMemAlloc` / `cuMemFree`.
  pools: bool,
  /// Created on the first hand-over and reused: an event may be re-recorded once a wait on it
  /// has been enqueued (earlier waits keep what they captured). The lock makes record + wait
  /// one step.
  event: Mutex<Option<Handle>>,
}

impl core::fmt::Debug for CudaDevice {
  fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
    write!(f, "CudaDevice(cuda:{})", self.ordinal)
  }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
  // A panic while holding the lock leaves plain data behind; keep going.
  mutex
    .lock()
    .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The device `cuda:<ordinal>`, its context retained on first use and kept for the process.
/// Fails with `ERR_CUDA_UNAVAILABLE` without a driver, `ERR_DLPACK_DEVICE` for an ordinal the
/// driver does not have, and `ERR_CUDA` when the context cannot be made.
pub fn device(ordinal: i32) -> Result<Arc<CudaDevice>> {
  static DEVICES: Mutex<Vec<Option<Arc<CudaDevice>>>> = Mutex::new(Vec::new());
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
  });
  devices[index] = Some(device.clone());
  Ok(device)
}

/// Our context pushed on the calling thread's context stack; popping it on drop gives the
/// thread back whatever context it had (none included).
struct Bound {
  driver: &'static Driver,
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
  fn bind(&self) -> Result<Bound> {
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
  fn free(self: &Arc<Self>, ptr: u64) {
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
  fn free_blocking(&self, ptr: u64) {
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

// ---------------------------------------------------------------------------------------------
// Releases off the caller's thread

/// Work for the release thread.
enum Job {
  /// Free one of our allocations (blocking driver calls).
  Free { device: Arc<CudaDevice>, ptr: u64 },
  /// Drop `owner` (a producer's tensor: its deleter runs) once `event` has completed.
  Release {
    device: Arc<CudaDevice>,
    event: Handle,
    owner: Box<dyn Send>,
  },
  /// Drop `owner` once everything enqueued on the device's stream so far has run (when no
  /// event could be recorded where the release started, e.g. in a CUDA host function).
  ReleaseAfterStream {
    device: Arc<CudaDevice>,
    owner: Box<dyn Send>,
  },
}

/// Jobs handed to the release thread and not finished yet.
static PENDING_RELEASES: AtomicUsize = AtomicUsize::new(0);
/// Signalled (under its mutex) when [`PENDING_RELEASES`] drops to 0, for [`drain_releases`].
static RELEASES_DRAINED: (Mutex<()>, Condvar) = (Mutex::new(()), Condvar::new());
/// Driver failures in release paths (drops and deleters), which have no caller to report to.
static RELEASE_ERRORS: AtomicUsize = AtomicUsize::new(0);

/// What the release paths did, for tests and diagnostics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReleaseStats {
  /// Frees and producer deleters waiting on the release thread.
  pub pending: usize,
  /// Driver failures in drops and deleters since the process started (each leaks what it was
  /// releasing, or runs a deleter without the wait it should have had).
  pub errors: usize,
}

/// Counters of the release paths.
pub fn release_stats() -> ReleaseStats {
  ReleaseStats {
    pending: PENDING_RELEASES.load(Ordering::SeqCst),
    errors: RELEASE_ERRORS.load(Ordering::SeqCst),
  }
}

/// Counts a failure in a release path and prints the first one (a drop cannot return it).
fn release_failed(what: &str, code: CuResult) {
  static PRINTED: AtomicBool = AtomicBool::new(false);
  RELEASE_ERRORS.fetch_add(1, Ordering::SeqCst);
  if !PRINTED.swap(true, Ordering::SeqCst) {
    eprintln!(
      "napi-dlpack: releasing CUDA memory failed: {what}: {} ({code}). Later failures are \
       only counted (native cudaReleaseStats().errors).",
      error_name(code)
    );
  }
}

fn run_job(job: Job) {
  match job {
    Job::Free { device, ptr } => device.free_blocking(ptr),
    Job::Release {
      device,
      event,
      owner,
    } => {
      match device.bind() {
        Ok(bound) => {
          // SAFETY: our event, recorded on our stream; destroyed once, here.
          unsafe {
            let code = (bound.driver.event_synchronize)(event.0);
            if code != CUDA_SUCCESS {
              release_failed("cuEventSynchronize (deferred deleter)", code);
            }
            let code = (bound.driver.event_destroy)(event.0);
            if code != CUDA_SUCCESS {
              release_failed("cuEventDestroy (deferred deleter)", code);
            }
          }
        }
        Err(_) => release_failed(
          "cuCtxPushCurrent (deferred deleter)",
          CUDA_ERROR_NOT_PERMITTED,
        ),
      }
      // With no context of ours current any more: the producer's deleter binds its own.
      drop(owner);
    }
    Job::ReleaseAfterStream { device, owner } => {
      match device.bind() {
        // SAFETY: the legacy stream of our (bound) context.
        Ok(bound) => match unsafe { (bound.driver.stream_synchronize)(LEGACY_STREAM) } {
          CUDA_SUCCESS => {}
          code => release_failed("cuStreamSynchronize (deferred deleter)", code),
        },
        Err(_) => release_failed(
          "cuCtxPushCurrent (deferred deleter)",
          CUDA_ERROR_NOT_PERMITTED,
        ),
      }
      drop(owner);
    }
  }
}

/// Runs a job handed to [`defer`] and marks it finished, even if a deleter panics.
fn finish(job: Job) {
  let outcome = catch_unwind(AssertUnwindSafe(|| run_job(job)));
  if outcome.is_err() {
    RELEASE_ERRORS.fetch_add(1, Ordering::SeqCst);
  }
  if PENDING_RELEASES.fetch_sub(1, Ordering::SeqCst) == 1 {
    // Under the mutex, so a drainer between its check and its wait cannot miss it.
    let _guard = lock(&RELEASES_DRAINED.0);
    RELEASES_DRAINED.1.notify_all();
  }
}

/// Waits, at most `timeout`, until the release thread has no job left: the frees and producer
/// deleters handed to it so far (and any handed to it meanwhile) have run. Returns whether it
/// got there. Call it where a runtime environment ends (its cleanup hook): the process may exit
/// right after, and a deleter still queued then would never run. Costs one atomic load when
/// nothing is pending. Do not call it from the release thread or from a deleter.
pub fn drain_releases(timeout: Duration) -> bool {
  if PENDING_RELEASES.load(Ordering::SeqCst) == 0 {
    return true;
  }
  let deadline = Instant::now() + timeout;
  let mut guard = lock(&RELEASES_DRAINED.0);
  while PENDING_RELEASES.load(Ordering::SeqCst) != 0 {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
      return false;
    }
    guard = RELEASES_DRAINED
      .1
      .wait_timeout(guard, left)
      .unwrap_or_else(PoisonError::into_inner)
      .0;
  }
  true
}

/// How long `drain_at_exit` waits for the release thread.
pub const RELEASE_DRAIN_LIMIT: Duration = Duration::from_secs(10);

extern "C" {
  fn atexit(callback: extern "C" fn()) -> c_int;
}

/// The C `atexit` handler (registered with the release thread): runs the queued releases
/// before the process goes, bounded by [`RELEASE_DRAIN_LIMIT`].
extern "C" fn drain_at_exit() {
  warn_if_undrained(drain_releases(RELEASE_DRAIN_LIMIT), "process exit");
}

/// Prints (never panics, as in an `atexit` handler) that a bounded drain gave up.
pub fn warn_if_undrained(drained: bool, at: &str) {
  if !drained {
    use std::io::Write;
    let _ = writeln!(
      std::io::stderr(),
      "napi-dlpack: CUDA releases still pending after {} s at {at}; they may not run \
       (native cudaReleaseStats().pending)",
      RELEASE_DRAIN_LIMIT.as_secs()
    );
  }
}

/// Hands `job` to the release thread (started on first use); runs it here if there is none.
fn defer(job: Job) {
  static SENDER: OnceLock<Option<Mutex<Sender<Job>>>> = OnceLock::new();
  PENDING_RELEASES.fetch_add(1, Ordering::SeqCst);
  let sender = SENDER.get_or_init(|| {
    let (sender, receiver) = mpsc::channel::<Job>();
    std::thread::Builder::new()
      .name("napi-dlpack-cuda-release".into())
      .spawn(move || {
        // A panicking deleter does not end the thread (`finish` catches it).
        for job in receiver {
          finish(job);
        }
      })
      .ok()
      .map(|_| {
        // `process.exit()` in Node ends the process without the environments' cleanup hooks:
        // drain there too. Nothing to do if it cannot be registered; cleanup hooks still drain.
        // SAFETY: registering a plain function that never unwinds.
        unsafe { atexit(drain_at_exit) };
        Mutex::new(sender)
      })
  });
  let job = match sender {
    Some(sender) => match lock(sender).send(job) {
      Ok(()) => return,
      Err(mpsc::SendError(job)) => job,
    },
    None => job,
  };
  finish(job);
}

/// Drops `owner` (an imported tensor: its producer's deleter runs) once the work enqueued so
/// far on `device`'s stream has completed, so that a producer that reuses the memory at once
/// (a caching allocator, `cuMemFreeAsync` on its own stream) cannot overwrite what our queued
/// copies still read. One event record and query here; when the work is still running the
/// wait and the deleter happen on the release thread, never blocking this one.
pub fn release_after_queued_work<T: Send + 'static>(device: &Arc<CudaDevice>, owner: T) {
  let Ok(bound) = device.bind() else {
    // Driver calls are refused here (a CUDA host function): the release thread waits for
    // everything on our stream instead, which includes the reads.
    return defer(Job::ReleaseAfterStream {
      device: device.clone(),
      owner: Box::new(owner),
    });
  };
  let mut event: CuEvent = core::ptr::null_mut();
  // SAFETY: valid out-pointer; our context is current. Then the new event on our stream.
  let recorded = unsafe {
    let code = (bound.driver.event_create)(&mut event, EVENT_DISABLE_TIMING);
    if code == CUDA_SUCCESS {
      let code = (bound.driver.event_record)(event, LEGACY_STREAM);
      if code != CUDA_SUCCESS {
        (bound.driver.event_destroy)(event);
      }
      code
    } else {
      code
    }
  };
  if recorded != CUDA_SUCCESS {
    // No event: wait here instead (rare: the driver is failing anyway).
    release_failed("recording the release event", recorded);
    // SAFETY: the legacy stream of our (bound) context.
    let code = unsafe { (bound.driver.stream_synchronize)(LEGACY_STREAM) };
    if code != CUDA_SUCCESS {
      release_failed("cuStreamSynchronize (deleter)", code);
    }
    drop(bound);
    return drop(owner);
  }
  // SAFETY: the event just recorded.
  let query = unsafe { (bound.driver.event_query)(event) };
  if query != CUDA_SUCCESS {
    drop(bound);
    if query != CUDA_ERROR_NOT_READY {
      release_failed("cuEventQuery (deleter)", query);
    }
    return defer(Job::Release {
      device: device.clone(),
      event: Handle(event),
      owner: Box::new(owner),
    });
  }
  // SAFETY: completed, ours, destroyed once.
  let code = unsafe { (bound.driver.event_destroy)(event) };
  if code != CUDA_SUCCESS {
    release_failed("cuEventDestroy (deleter)", code);
  }
  drop(bound);
  drop(owner);
}

/// Device memory we allocated (on the device's stream). Freed, stream-ordered, when dropped,
/// on any thread.
pub struct DeviceBuffer {
  /// The device address; 0 for zero bytes (no allocation).
  ptr: u64,
  len: usize,
  device: Arc<CudaDevice>,
}

impl core::fmt::Debug for DeviceBuffer {
  fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
    write!(
      f,
      "DeviceBuffer({:#x}, {} bytes, cuda:{})",
      self.ptr, self.len, self.device.ordinal
    )
  }
}

impl DeviceBuffer {
  /// Allocates `len` bytes on `device`; `zeroed` also enqueues a memset to 0 (otherwise the
  /// contents are undefined).
  pub fn alloc(device: &Arc<CudaDevice>, len: usize, zeroed: bool) -> Result<DeviceBuffer> {
    if len == 0 {
      return Ok(DeviceBuffer {
        ptr: 0,
        len: 0,
        device: device.clone(),
      });
    }
    let bound = device.bind()?;
    let mut ptr: CuDevicePtr = 0;
    // SAFETY: valid out-pointer; our context is current.
    check("allocating device memory", unsafe {
      if device.pools {
        (bound.driver.mem_alloc_async)(&mut ptr, len, LEGACY_STREAM)
      } else {
        (bound.driver.mem_alloc)(&mut ptr, len)
      }
    })?;
    // From here on, dropping the buffer frees the allocation.
    let buffer = DeviceBuffer {
      ptr,
      len,
      device: device.clone(),
    };
    if zeroed {
      // SAFETY: `len` bytes of our new allocation, on our stream; our context is current.
      let code = unsafe { (bound.driver.memset_d8_async)(ptr, 0, len, LEGACY_STREAM) };
      check("allocating zeroed device memory (cuMemsetD8Async)", code)?;
    }
    drop(bound);
    Ok(buffer)
  }

  /// A new buffer holding a copy of `bytes` (enqueued; no host synchronisation).
  pub fn from_host(device: &Arc<CudaDevice>, bytes: &[u8]) -> Result<DeviceBuffer> {
    let buffer = DeviceBuffer::alloc(device, bytes.len(), false)?;
    // SAFETY: the buffer is `bytes.len()` bytes of device memory that outlives the copy (it is
    // freed on the same stream, after the copy).
    unsafe { device.copy_from_host(buffer.ptr, bytes)? };
    Ok(buffer)
  }

  /// The device address (0 for an empty buffer).
  pub fn device_ptr(&self) -> u64 {
    self.ptr
  }

  pub fn len(&self) -> usize {
    self.len
  }

  pub fn is_empty(&self) -> bool {
    self.len == 0
  }

  pub fn device(&self) -> &Arc<CudaDevice> {
    &self.device
  }

  /// A copy of the contents (waits for pending work on the buffer's stream).
  pub fn to_vec(&self) -> Result<Vec<u8>> {
    let mut out = vec![0u8; self.len];
    // SAFETY: our allocation, alive for the call.
    unsafe { self.device.copy_to_host(&mut out, self.ptr)? };
    Ok(out)
  }
}

impl Drop for DeviceBuffer {
  fn drop(&mut self) {
    if self.ptr != 0 {
      // Binds our context itself (the raw push/pop, whatever the thread's state), frees in
      // stream order, and counts a failure instead of swallowing it.
      self.device.free(self.ptr);
    }
  }
}

/// A row-major tensor in a [`DeviceBuffer`]: exportable through DLPack as `kDLCUDA` memory,
/// the allocation owned by the export until the consumer's deleter runs.
#[derive(Debug)]
pub struct DeviceTensor {
  buffer: DeviceBuffer,
  dtype: DType,
  shape: Vec<i64>,
}

impl DeviceTensor {
  /// Fails unless `buffer` holds exactly the elements of `shape`.
  pub fn new(buffer: DeviceBuffer, dtype: DType, shape: &[i64]) -> Result<DeviceTensor> {
    let layout = layout_of(dtype, buffer.device.dl_device(), shape, None, 0)?;
    if layout.numel() * dtype.itemsize() != buffer.len {
      return Err(DLPackError::new(
        ErrorKind::InvalidLayout,
        format!(
          "shape {shape:?} of {dtype} needs {} bytes, the buffer has {}",
          layout.numel() * dtype.itemsize(),
          buffer.len
        ),
      ));
    }
    Ok(DeviceTensor {
      buffer,
      dtype,
      shape: shape.to_vec(),
    })
  }

  pub fn buffer(&self) -> &DeviceBuffer {
    &self.buffer
  }

  pub fn into_buffer(self) -> DeviceBuffer {
    self.buffer
  }
}

// SAFETY: the device allocation does not move and is freed only when the buffer drops (inside
// the deleter); `new` checked that the shape covers exactly the buffer. Consumers on other
// streams must be synchronised by the exporter first (`CudaDevice::sync_to`).
unsafe impl IntoDLPack for DeviceTensor {
  fn tensor_info(&mut self) -> TensorInfo {
    TensorInfo::contiguous(
      self.buffer.ptr as usize as *mut c_void,
      self.dtype,
      &self.shape,
    )
    .device(self.buffer.device.dl_device())
  }
}

/// What the driver says about an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PointerInfo {
  /// `CU_POINTER_ATTRIBUTE_MEMORY_TYPE`: 0 not CUDA memory, 1 host, 2 device, 3 array,
  /// 4 unified.
  pub memory_type: u32,
  pub device_ordinal: i32,
  /// The allocation that contains the address.
  pub range_start: u64,
  pub range_size: u64,
}

/// `CU_MEMORYTYPE_DEVICE`.
pub const MEMORY_TYPE_DEVICE: u32 = 2;

/// Queries the driver's pointer attributes of `address` (in `device`'s context). Unknown
/// addresses are not an error: they come back with `memory_type == 0`.
pub fn pointer_info(device: &CudaDevice, address: u64) -> Result<PointerInfo> {
  let mut memory_type: u32 = 0;
  let mut device_ordinal: i32 = -2;
  let mut range_start: CuDevicePtr = 0;
  let mut range_size: usize = 0;
  let mut attributes: [c_int; 4] = [
    POINTER_MEMORY_TYPE,
    POINTER_DEVICE_ORDINAL,
    POINTER_RANGE_START_ADDR,
    POINTER_RANGE_SIZE,
  ];
  let mut data: [*mut c_void; 4] = [
    (&raw mut memory_type).cast(),
    (&raw mut device_ordinal).cast(),
    (&raw mut range_start).cast(),
    (&raw mut range_size).cast(),
  ];
  let bound = device.bind()?;
  // SAFETY: four attributes, each with a pointer to storage of the size the driver writes
  // (unsigned int, int, CUdeviceptr, size_t), all alive for the call; our context is current.
  check("cuPointerGetAttributes", unsafe {
    (bound.driver.pointer_get_attributes)(
      attributes.len() as c_uint,
      attributes.as_mut_ptr(),
      data.as_mut_ptr(),
      address,
    )
  })?;
  drop(bound);
  Ok(PointerInfo {
    memory_type,
    device_ordinal,
    range_start,
    range_size: range_size as u64,
  })
}

/// Checks an imported `kDLCUDA` tensor against the driver: its `data` pointer must be device
/// memory (`MEMORY_TYPE == DEVICE`) of the device it claims (`DEVICE_ORDINAL == device_id`), and
/// that allocation (`[RANGE_START_ADDR, +RANGE_SIZE)`) must cover every byte the validated
/// layout reaches from `data + byte_offset`. Returns the device. Reads attributes only: the memory is never touched or freed.
///
/// Errors: `ERR_CUDA_UNAVAILABLE` without a driver; `ERR_DLPACK_DEVICE` for a device that does
/// not exist, memory that is not device memory, or memory of another device;
/// `ERR_DLPACK_INVALID_LAYOUT` when the span leaves the allocation; `ERR_CUDA` when the query
/// fails.
pub fn validate_foreign(tensor: &ForeignTensor) -> Result<Arc<CudaDevice>> {
  let claimed = tensor.device();
  if claimed.device_type != DeviceType::Cuda {
    return Err(DLPackError::new(
      ErrorKind::Device,
      format!("{claimed} is not a CUDA device"),
    ));
  }
  let device = device(claimed.id)?;
  if tensor.numel() == 0 {
    return Ok(device);
  }
  // Ask about the producer's `data` pointer (what it allocated), then check the span.
  let data = tensor.raw_data() as u64;
  let start = tensor.layout().span_start() as u64;
  let info = pointer_info(&device, data)?;
  if info.memory_type != MEMORY_TYPE_DEVICE {
    let what = match info.memory_type {
      0 => "memory the CUDA driver does not know (plain host memory?)",
      1 => "CUDA host (pinned) memory",
      3 => "a CUDA array",
      4 => "unified memory",
      _ => "memory of an unknown type",
    };
    return Err(DLPackError::new(
      ErrorKind::Device,
      format!("the tensor claims {claimed} device memory, but {data:#x} is {what}"),
    ));
  }
  if info.device_ordinal != claimed.id {
    return Err(DLPackError::new(
      ErrorKind::Device,
      format!(
        "the tensor claims {claimed}, but its memory belongs to cuda:{}",
        info.device_ordinal
      ),
    ));
  }
  let end = start.checked_add(tensor.span_bytes() as u64);
  let range_end = info.range_start.checked_add(info.range_size);
  match (end, range_end) {
    (Some(end), Some(range_end)) if start >= info.range_start && end <= range_end => Ok(device),
    _ => Err(DLPackError::new(
      ErrorKind::InvalidLayout,
      format!(
        "the tensor reaches bytes {start:#x}..{:#x} but its allocation is {:#x}..{:#x}",
        start as u128 + tensor.span_bytes() as u128,
        info.range_start,
        info.range_start as u128 + info.range_size as u128
      ),
    )),
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
