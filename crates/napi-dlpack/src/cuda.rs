//! CUDA device memory through [cudarc] (feature `cuda`).
//!
//! - The driver library (`libcuda.so`, `nvcuda.dll`) is loaded at run time, on first use, so this
//!   module builds without a CUDA toolkit and a process without a driver keeps working: every
//!   call then fails with [`ErrorKind::CudaUnavailable`]. cudarc panics where a library or
//!   symbol is missing; every cudarc call here runs under `catch_unwind`, so those panics become
//!   errors too and never cross into the host (a Node process, say).
//! - One primary context per device, retained on first use and kept for the life of the
//!   process (the primary context is the one the CUDA runtime, PyTorch, CuPy and ONNX Runtime
//!   use, so pointers are valid across all of them).
//! - **Streams.** All work of this module runs on the device's *legacy default stream*
//!   (DLPack stream value `1`). That is "the stream" of every [`DeviceBuffer`]: its last write
//!   was enqueued there. Hand-overs to a consumer on another stream record one event on the
//!   source stream and make the consumer's stream wait on it ([`CudaDevice::sync_to`]); nothing
//!   blocks the host. cudarc's own per-allocation event tracking is switched off (our single
//!   stream orders everything), which saves two events per allocation.
//! - Imported device memory is never freed here: [`validate_foreign`] only reads the driver's
//!   pointer attributes, and the producer's deleter stays the only way the memory goes.

use core::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use cudarc::driver::{
  result, sys, CudaContext, CudaEvent, CudaSlice, CudaStream, DevicePtr, DriverError,
};

use crate::device::{Device, DeviceType};
use crate::dtype::DType;
use crate::error::{DLPackError, ErrorKind};
use crate::export::{IntoDLPack, TensorInfo};
use crate::import::ForeignTensor;
use crate::validation::layout_of;

type Result<T, E = DLPackError> = core::result::Result<T, E>;

/// DLPack stream value of the legacy default stream (`CU_STREAM_LEGACY`).
pub const STREAM_LEGACY: i64 = 1;
/// DLPack stream value of the per-thread default stream (`CU_STREAM_PER_THREAD`).
pub const STREAM_PER_THREAD: i64 = 2;
/// DLPack stream value meaning "the producer must not synchronise".
pub const STREAM_NO_SYNC: i64 = -1;

fn cuda_error(message: impl Into<String>) -> DLPackError {
  DLPackError::new(ErrorKind::Cuda, message)
}

fn unavailable(message: impl Into<String>) -> DLPackError {
  DLPackError::new(ErrorKind::CudaUnavailable, message)
}

fn driver_error(what: &str, error: DriverError) -> DLPackError {
  // `{:?}` of the CUresult enum is its name; it does not call into the driver (cudarc's
  // `Display` of `DriverError` does, through cuGetErrorString).
  cuda_error(format!("{what} failed: {:?} ({})", error.0, error.0 as u32))
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

/// Runs cudarc code, turning its errors and its panics (a missing library or symbol) into
/// `ERR_CUDA` errors.
fn guarded<T>(what: &str, f: impl FnOnce() -> Result<T, DriverError>) -> Result<T> {
  match catch_unwind(AssertUnwindSafe(f)) {
    Ok(Ok(value)) => Ok(value),
    Ok(Err(error)) => Err(driver_error(what, error)),
    Err(payload) => Err(cuda_error(format!(
      "{what}: the CUDA driver library failed: {}",
      panic_message(payload.as_ref())
    ))),
  }
}

/// The availability probe, run once per process: library present, then `cuInit` +
/// `cuDeviceGetCount`. `Ok(count)` with `count > 0`, or why CUDA is unavailable.
fn probe() -> &'static Result<usize> {
  static PROBE: OnceLock<Result<usize>> = OnceLock::new();
  PROBE.get_or_init(|| {
    // SAFETY: `is_culib_present` only dlopens and dlcloses candidate library names (cudarc
    // ≥ 0.19.5 resolves no symbol there); a panic is caught.
    let present = catch_unwind(|| unsafe { sys::is_culib_present() }).unwrap_or(false);
    if !present {
      return Err(unavailable(
        "no CUDA driver library (libcuda.so / nvcuda.dll) could be loaded",
      ));
    }
    match catch_unwind(CudaContext::device_count) {
      Ok(Ok(count)) if count > 0 => Ok(count as usize),
      Ok(Ok(_)) => Err(unavailable("the CUDA driver reports no devices")),
      Ok(Err(error)) => Err(unavailable(format!(
        "the CUDA driver cannot be initialised: {:?} ({})",
        error.0, error.0 as u32
      ))),
      Err(payload) => Err(unavailable(format!(
        "the CUDA driver library failed: {}",
        panic_message(payload.as_ref())
      ))),
    }
  })
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
  fn raw(self) -> Option<sys::CUstream> {
    match self {
      Stream::NoSync => None,
      Stream::Legacy => Some(1 as sys::CUstream),
      Stream::PerThread => Some(2 as sys::CUstream),
      Stream::Handle(handle) => Some(handle as usize as sys::CUstream),
    }
  }
}

/// One CUDA device: its primary context, the stream all our work goes to, and the event used
/// for stream hand-overs.
pub struct CudaDevice {
  ordinal: i32,
  ctx: Arc<CudaContext>,
  /// The context's default stream (the NULL handle, i.e. the legacy default stream).
  stream: Arc<CudaStream>,
  /// Created on the first hand-over and reused: an event may be re-recorded once a wait on it
  /// has been enqueued (earlier waits keep what they captured). The lock makes record + wait
  /// one step.
  event: Mutex<Option<CudaEvent>>,
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
  let ctx = guarded("retaining the primary context", || CudaContext::new(index))?;
  // SAFETY: no slice of this context exists yet. Every operation of this module runs on the
  // context's default stream, so stream order does what cudarc's per-slice events would do;
  // cross-stream hand-overs record and wait on an explicit event (`sync_to`, `wait_for`).
  unsafe { ctx.disable_event_tracking() };
  let device = Arc::new(CudaDevice {
    ordinal,
    stream: ctx.default_stream(),
    ctx,
    event: Mutex::new(None),
  });
  devices[index] = Some(device.clone());
  Ok(device)
}

impl CudaDevice {
  pub fn ordinal(&self) -> i32 {
    self.ordinal
  }

  /// `cuda:<ordinal>`.
  pub fn dl_device(&self) -> Device {
    Device::cuda(self.ordinal)
  }

  /// The cudarc context (the device's primary context).
  pub fn context(&self) -> &Arc<CudaContext> {
    &self.ctx
  }

  /// The stream our buffers' work is enqueued on: the legacy default stream.
  pub fn stream(&self) -> Stream {
    Stream::Legacy
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
    if slot.is_none() {
      *slot = Some(guarded("cuEventCreate", || self.ctx.new_event(None))?);
    }
    let Some(event) = slot.as_ref() else {
      return Err(cuda_error("no event"));
    };
    let raw_event = event.cu_event();
    guarded("binding the CUDA context", || self.ctx.bind_to_thread())?;
    // SAFETY: the event is alive (held by `slot`, under the lock) and belongs to this
    // context; `from` is our stream or a stream the caller vouched for as alive, in this
    // context. A bad handle is reported by the driver as an error.
    guarded("cuEventRecord", || unsafe {
      result::event::record(raw_event, from)
    })?;
    // SAFETY: as above; the event may come from another context than `to`.
    guarded("cuStreamWaitEvent", || unsafe {
      result::stream::wait_event(
        to,
        raw_event,
        sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
      )
    })
  }

  /// Blocks the host until everything enqueued on our stream has run.
  pub fn synchronize(&self) -> Result<()> {
    guarded("cuStreamSynchronize", || self.stream.synchronize())
  }

  /// Enqueues a host → device copy of `src` to `dst` on our stream. The driver stages pageable
  /// host memory before it returns, so `src` may be reused right away.
  ///
  /// # Safety
  /// `dst .. dst + src.len()` must be device memory of this device that stays allocated until
  /// the copy has run (stream order: until later work on our stream, or a sync).
  pub unsafe fn copy_from_host(&self, dst: u64, src: &[u8]) -> Result<()> {
    if src.is_empty() {
      return Ok(());
    }
    guarded("cuMemcpyHtoDAsync", || {
      self.ctx.bind_to_thread()?;
      // SAFETY: the caller's contract; `src` is readable host memory.
      unsafe { result::memcpy_htod_async(dst, src, self.stream.cu_stream()) }
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
    guarded("cuMemcpyDtoHAsync", || {
      self.ctx.bind_to_thread()?;
      // SAFETY: the caller's contract; `dst` is writable host memory that outlives the copy,
      // because we synchronise before returning.
      unsafe { result::memcpy_dtoh_async(dst, src, self.stream.cu_stream()) }?;
      self.stream.synchronize()
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
    guarded("cuMemcpyDtoDAsync", || {
      self.ctx.bind_to_thread()?;
      // SAFETY: the caller's contract.
      unsafe { result::memcpy_dtod_async(dst, src, len, self.stream.cu_stream()) }
    })
  }
}

/// Device memory we allocated (through cudarc, on the device's stream). Freed, stream-ordered,
/// when dropped, on any thread.
pub struct DeviceBuffer {
  /// `None` for zero bytes (no allocation; the pointer is 0).
  slice: Option<CudaSlice<u8>>,
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
        slice: None,
        ptr: 0,
        len: 0,
        device: device.clone(),
      });
    }
    let stream = &device.stream;
    let slice = if zeroed {
      guarded("allocating zeroed device memory", || {
        stream.alloc_zeros::<u8>(len)
      })?
    } else {
      // SAFETY: bytes have no invalid bit patterns; the memory is written before it is read
      // (or handed out as `empty`, whose contents are documented as undefined).
      guarded("allocating device memory", || unsafe {
        stream.alloc::<u8>(len)
      })?
    };
    // With event tracking off, the guard records nothing.
    let ptr = {
      let (ptr, _no_event) = slice.device_ptr(stream);
      ptr
    };
    Ok(DeviceBuffer {
      slice: Some(slice),
      ptr,
      len,
      device: device.clone(),
    })
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
    if let Some(slice) = self.slice.take() {
      let ctx = self.device.ctx.clone();
      // cudarc frees on the slice's stream (cuMemFreeAsync, or a stream sync + cuMemFree)
      // without binding the context, and the last owner may be on any thread: bind first.
      // Errors cannot be reported from a drop; clear them so they do not resurface on an
      // unrelated later call (cudarc keeps them "sticky" in the context).
      let _ = catch_unwind(AssertUnwindSafe(move || {
        let _ = ctx.bind_to_thread();
        drop(slice);
        let _ = ctx.check_err();
      }));
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
pub const MEMORY_TYPE_DEVICE: u32 = sys::CUmemorytype_enum::CU_MEMORYTYPE_DEVICE as u32;

/// Queries the driver's pointer attributes of `address` (in `device`'s context). Unknown
/// addresses are not an error: they come back with `memory_type == 0`.
pub fn pointer_info(device: &CudaDevice, address: u64) -> Result<PointerInfo> {
  use sys::CUpointer_attribute_enum as Attribute;
  let mut memory_type: u32 = 0;
  let mut device_ordinal: i32 = -2;
  let mut range_start: sys::CUdeviceptr = 0;
  let mut range_size: usize = 0;
  let mut attributes = [
    Attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
    Attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
    Attribute::CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
    Attribute::CU_POINTER_ATTRIBUTE_RANGE_SIZE,
  ];
  let mut data: [*mut c_void; 4] = [
    (&raw mut memory_type).cast(),
    (&raw mut device_ordinal).cast(),
    (&raw mut range_start).cast(),
    (&raw mut range_size).cast(),
  ];
  guarded("cuPointerGetAttributes", || {
    device.ctx.bind_to_thread()?;
    // SAFETY: four attributes, each with a pointer to storage of the size the driver writes
    // (unsigned int, int, CUdeviceptr, size_t), all alive for the call.
    unsafe {
      sys::cuPointerGetAttributes(
        attributes.len() as u32,
        attributes.as_mut_ptr(),
        data.as_mut_ptr(),
        address,
      )
    }
    .result()
  })?;
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
