//! Checks of device pointers and of foreign tensors claiming to be on a CUDA device.

use core::ffi::{c_int, c_uint, c_void};
use std::sync::Arc;

use crate::device::DeviceType;
use crate::error::{DLPackError, ErrorKind};
use crate::import::ForeignTensor;

use super::device::{device, CudaDevice};
use super::driver::{
  check, CuDevicePtr, POINTER_DEVICE_ORDINAL, POINTER_MEMORY_TYPE, POINTER_RANGE_SIZE,
  POINTER_RANGE_START_ADDR,
};
use super::Result;

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
