//! Devices: every `DLDeviceType` of DLPack 1.3 and a checked `Device` value.

use core::fmt;
use core::str::FromStr;

use crate::error::{DLPackError, ErrorKind};
use crate::ffi::DLDevice;

/// Every `DLDeviceType` of DLPack 1.3 (5 and 6 are unassigned).
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeviceType {
  Cpu = 1,
  Cuda = 2,
  CudaHost = 3,
  OpenCl = 4,
  Vulkan = 7,
  Metal = 8,
  Vpi = 9,
  Rocm = 10,
  RocmHost = 11,
  ExtDev = 12,
  CudaManaged = 13,
  OneApi = 14,
  WebGpu = 15,
  Hexagon = 16,
  Maia = 17,
  Trn = 18,
}

impl DeviceType {
  pub const ALL: [DeviceType; 16] = [
    DeviceType::Cpu,
    DeviceType::Cuda,
    DeviceType::CudaHost,
    DeviceType::OpenCl,
    DeviceType::Vulkan,
    DeviceType::Metal,
    DeviceType::Vpi,
    DeviceType::Rocm,
    DeviceType::RocmHost,
    DeviceType::ExtDev,
    DeviceType::CudaManaged,
    DeviceType::OneApi,
    DeviceType::WebGpu,
    DeviceType::Hexagon,
    DeviceType::Maia,
    DeviceType::Trn,
  ];

  /// `None` for values DLPack 1.3 does not define (0, 5, 6, > 18).
  pub const fn from_raw(raw: u32) -> Option<DeviceType> {
    Some(match raw {
      1 => DeviceType::Cpu,
      2 => DeviceType::Cuda,
      3 => DeviceType::CudaHost,
      4 => DeviceType::OpenCl,
      7 => DeviceType::Vulkan,
      8 => DeviceType::Metal,
      9 => DeviceType::Vpi,
      10 => DeviceType::Rocm,
      11 => DeviceType::RocmHost,
      12 => DeviceType::ExtDev,
      13 => DeviceType::CudaManaged,
      14 => DeviceType::OneApi,
      15 => DeviceType::WebGpu,
      16 => DeviceType::Hexagon,
      17 => DeviceType::Maia,
      18 => DeviceType::Trn,
      _ => return None,
    })
  }

  /// The name used in device strings (`"cuda"` in `"cuda:0"`).
  pub const fn name(self) -> &'static str {
    match self {
      DeviceType::Cpu => "cpu",
      DeviceType::Cuda => "cuda",
      DeviceType::CudaHost => "cuda_host",
      DeviceType::OpenCl => "opencl",
      DeviceType::Vulkan => "vulkan",
      DeviceType::Metal => "metal",
      DeviceType::Vpi => "vpi",
      DeviceType::Rocm => "rocm",
      DeviceType::RocmHost => "rocm_host",
      DeviceType::ExtDev => "ext_dev",
      DeviceType::CudaManaged => "cuda_managed",
      DeviceType::OneApi => "oneapi",
      DeviceType::WebGpu => "webgpu",
      DeviceType::Hexagon => "hexagon",
      DeviceType::Maia => "maia",
      DeviceType::Trn => "trn",
    }
  }

  /// Devices whose `data` pointers are addresses in the process's (unified) virtual address
  /// space, so `data + byte_offset` is meaningful arithmetic. For the others (OpenCL, Metal,
  /// Vulkan, WebGPU, ...) `data` is an opaque handle and `byte_offset` must stay separate.
  pub const fn data_is_address(self) -> bool {
    matches!(
      self,
      DeviceType::Cpu
        | DeviceType::Cuda
        | DeviceType::CudaHost
        | DeviceType::CudaManaged
        | DeviceType::Rocm
        | DeviceType::RocmHost
        | DeviceType::OneApi
    )
  }

  /// Memory the CPU can read and write directly, with no synchronisation. Managed memory is
  /// left out on purpose: it is only coherent after the producing stream was synchronised.
  pub const fn is_host_accessible(self) -> bool {
    matches!(
      self,
      DeviceType::Cpu | DeviceType::CudaHost | DeviceType::RocmHost
    )
  }
}

/// A validated device: known type, non-negative id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Device {
  pub device_type: DeviceType,
  pub id: i32,
}

impl Device {
  pub const CPU: Device = Device {
    device_type: DeviceType::Cpu,
    id: 0,
  };

  pub const fn cuda(id: i32) -> Device {
    Device {
      device_type: DeviceType::Cuda,
      id,
    }
  }

  /// Validates a foreign `DLDevice`.
  #[inline(always)]
  pub fn from_dl(raw: DLDevice) -> Result<Device, DLPackError> {
    match DeviceType::from_raw(raw.device_type) {
      Some(device_type) if raw.device_id >= 0 => Ok(Device {
        device_type,
        id: raw.device_id,
      }),
      _ => Err(device_error(raw)),
    }
  }

  pub const fn to_dl(self) -> DLDevice {
    DLDevice {
      device_type: self.device_type as u32,
      device_id: self.id,
    }
  }

  pub const fn is_host_accessible(self) -> bool {
    self.device_type.is_host_accessible()
  }
}

/// Explains why `raw` was refused (out of line: the accepting path stays small).
#[cold]
#[inline(never)]
fn device_error(raw: DLDevice) -> DLPackError {
  let message = match DeviceType::from_raw(raw.device_type) {
    None => format!("unknown DLDeviceType {}", raw.device_type),
    Some(_) => format!("negative device id {}", raw.device_id),
  };
  DLPackError::new(ErrorKind::Device, message)
}

impl fmt::Display for Device {
  /// `cpu` for the CPU (its id is always 0), `type:id` otherwise (`cuda:0`).
  fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    if self.device_type == DeviceType::Cpu {
      f.write_str("cpu")
    } else {
      write!(f, "{}:{}", self.device_type.name(), self.id)
    }
  }
}

impl FromStr for Device {
  type Err = DLPackError;

  /// Parses `cpu`, `cuda`, `cuda:1`, `cuda_host:0`, ... (a missing id means 0).
  fn from_str(text: &str) -> Result<Device, DLPackError> {
    let bad = || DLPackError::new(ErrorKind::Device, format!("invalid device string {text:?}"));
    let (name, id) = match text.split_once(':') {
      Some((name, id)) => (name, id.parse::<i32>().map_err(|_| bad())?),
      None => (text, 0),
    };
    let device_type = DeviceType::ALL
      .iter()
      .copied()
      .find(|t| t.name() == name)
      .ok_or_else(bad)?;
    if id < 0 || (device_type == DeviceType::Cpu && id != 0) {
      return Err(bad());
    }
    Ok(Device { device_type, id })
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn device_codes_match_dlpark() {
    use dlpark::ffi::DLDeviceType as Other;
    let pairs = [
      (DeviceType::Cpu, Other::CPU),
      (DeviceType::Cuda, Other::CUDA),
      (DeviceType::CudaHost, Other::CUDAHOST),
      (DeviceType::OpenCl, Other::OPENCL),
      (DeviceType::Vulkan, Other::VULKAN),
      (DeviceType::Metal, Other::METAL),
      (DeviceType::Vpi, Other::VPI),
      (DeviceType::Rocm, Other::ROCM),
      (DeviceType::RocmHost, Other::ROCMHOST),
      (DeviceType::ExtDev, Other::EXTDEV),
      (DeviceType::CudaManaged, Other::CUDAMANAGED),
      (DeviceType::OneApi, Other::ONEAPI),
      (DeviceType::WebGpu, Other::WEBGPU),
      (DeviceType::Hexagon, Other::HEXAGON),
      (DeviceType::Maia, Other::MAIA),
      (DeviceType::Trn, Other::TRN),
    ];
    for (ours, theirs) in pairs {
      assert_eq!(ours as u32, theirs.0, "{ours:?}");
    }
    for raw in [0, 5, 6, 19, u32::MAX] {
      assert_eq!(DeviceType::from_raw(raw), None, "{raw}");
    }
  }

  #[test]
  fn display_and_parse_round_trip() {
    for device_type in DeviceType::ALL {
      let id = if device_type == DeviceType::Cpu { 0 } else { 3 };
      let device = Device { device_type, id };
      assert_eq!(device.to_string().parse::<Device>(), Ok(device));
      assert_eq!(Device::from_dl(device.to_dl()), Ok(device));
    }
    assert_eq!(Device::CPU.to_string(), "cpu");
    assert_eq!(Device::cuda(0).to_string(), "cuda:0");
    assert_eq!("cuda".parse::<Device>(), Ok(Device::cuda(0)));
    for bad in ["gpu", "cuda:-1", "cuda:x", "cpu:1", ""] {
      assert_eq!(
        bad.parse::<Device>().map_err(|e| e.code()),
        Err("ERR_DLPACK_DEVICE"),
        "{bad}"
      );
    }
  }

  #[test]
  fn foreign_devices_are_validated() {
    let unknown = DLDevice {
      device_type: 5,
      device_id: 0,
    };
    assert_eq!(
      Device::from_dl(unknown).map_err(|e| e.code()),
      Err("ERR_DLPACK_DEVICE")
    );
    let negative = DLDevice {
      device_type: 2,
      device_id: -1,
    };
    assert_eq!(
      Device::from_dl(negative).map_err(|e| e.code()),
      Err("ERR_DLPACK_DEVICE")
    );
  }
}
