//! The driver: its entry points loaded at run time into a table with integer results, the
//! error names and the availability probe.

use core::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::panic::catch_unwind;
use std::sync::OnceLock;

use cudarc::driver::sys;

use crate::error::{DLPackError, ErrorKind};

use super::Result;

// ---------------------------------------------------------------------------------------------
// The driver's entry points, with integer results

/// A driver result as the driver returns it: an integer, never cudarc's enum (see the module
/// documentation).
pub(super) type CuResult = c_int;
pub(super) type CuContext = *mut c_void;
pub(super) type CuStream = *mut c_void;
pub(super) type CuEvent = *mut c_void;
pub(super) type CuDevicePtr = u64;

pub(super) const CUDA_SUCCESS: CuResult = 0;
const CUDA_ERROR_STUB_LIBRARY: CuResult = 34;
pub(super) const CUDA_ERROR_NOT_READY: CuResult = 600;
pub(super) const CUDA_ERROR_NOT_PERMITTED: CuResult = 800;
/// `CU_STREAM_LEGACY`: the legacy default stream of the current context.
pub(super) const LEGACY_STREAM: CuStream = 1 as CuStream;
/// `CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP`: page-locked memory usable by every
/// context of the process (not only the one current at allocation), mapped into the unified
/// address space so a device reads it at the same address.
pub(super) const HOST_ALLOC_FLAGS: c_uint = 0x01 | 0x02;
/// `CU_EVENT_DISABLE_TIMING`.
pub(super) const EVENT_DISABLE_TIMING: c_uint = 2;
/// `CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED`.
pub(super) const ATTRIBUTE_MEMORY_POOLS_SUPPORTED: c_int = 115;
/// `CU_POINTER_ATTRIBUTE_*` values we query.
pub(super) const POINTER_MEMORY_TYPE: c_int = 2;
pub(super) const POINTER_DEVICE_ORDINAL: c_int = 9;
pub(super) const POINTER_RANGE_START_ADDR: c_int = 11;
pub(super) const POINTER_RANGE_SIZE: c_int = 12;

/// Declares [`Driver`]: one function pointer per entry point, all resolved when the table is
/// loaded, so a driver lacking one is reported as unavailable up front instead of failing
/// (or, in cudarc, panicking) in the middle of an operation.
macro_rules! driver_table {
  ($($field:ident = $symbol:literal: fn($($arg:ty),*);)*) => {
    pub(super) struct Driver {
      $(pub(super) $field: unsafe extern "C" fn($($arg),*) -> CuResult,)*
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
  mem_host_alloc = "cuMemHostAlloc": fn(*mut *mut c_void, usize, c_uint);
  mem_free_host = "cuMemFreeHost": fn(*mut c_void);
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
pub(super) fn driver() -> Result<&'static Driver> {
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
pub(super) fn error_name(code: CuResult) -> String {
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
pub(super) fn check(what: &str, code: CuResult) -> Result<()> {
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
pub(super) fn probe() -> &'static Result<usize> {
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
