//! Device memory we allocate, and the tensors exported over it.

use core::ffi::c_void;
use std::sync::Arc;

use crate::dtype::DType;
use crate::error::{DLPackError, ErrorKind};
use crate::export::{IntoDLPack, TensorInfo};
use crate::layout::layout_of;

use super::device::CudaDevice;
use super::driver::{check, CuDevicePtr, LEGACY_STREAM};
use super::Result;

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
