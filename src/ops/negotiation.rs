//! Negotiation: what an import or an export was asked for (a request), checked against what the
//! tensor is, and turned into one plan. Pure functions over plain facts (no Node-API, no
//! memory access), so every decision is unit-tested here; `ops::import` and `ops::export`
//! gather the facts and carry the plans out, and `lib/` only converts JS values.
//!
//! An import is decided in two steps, as nanobind does: [`check_import_device`] before the
//! capsule is consumed (what can be refused then leaves the capsule usable), then
//! [`plan_import`] once the tensor is ours.

use napi_dlpack::cuda::Stream;
use napi_dlpack::{Device, DeviceType, ErrorKind, ExportFormat};

use crate::errors::{fail, Result};

// `CopyRequest` is one of the facts `lib/` shares (its `copyMode` numbers): defined in `facts`.
pub use crate::facts::CopyRequest;

/// What an import asks for, checked before the capsule is consumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImportRequest {
  pub copy: CopyRequest,
  /// The device the result must be on (`None`: where the data is).
  pub device: Option<Device>,
  /// The consumer stream the producer was asked to synchronise to (CUDA only; `None`: the
  /// legacy default stream).
  pub stream: Option<Stream>,
}

/// Refuses a result on `actual` when the request names another device (only same-device
/// results exist so far): `ERR_DLPACK_COPY_REQUIRED` under `copy: false` (a move would be a
/// copy), `ERR_DLPACK_DEVICE` otherwise.
pub fn check_import_device(
  wanted: Option<Device>,
  copy: CopyRequest,
  actual: Device,
) -> Result<()> {
  match wanted {
    Some(wanted) if wanted != actual => Err(fail(
      if copy == CopyRequest::Never {
        ErrorKind::CopyRequired
      } else {
        ErrorKind::Device
      },
      format!("the data is on {actual}, not {wanted}"),
    )),
    _ => Ok(()),
  }
}

/// The runtime's limits on JS views of memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Runtime {
  /// External ArrayBuffers are allowed (false in Electron).
  pub external_buffers: bool,
  /// The largest ArrayBuffer, in bytes.
  pub max_arraybuffer_bytes: usize,
}

/// What a consumed capsule holds, as far as the plan is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
  /// One of our own exports, coming back.
  Own {
    /// The very capsule the export was first wrapped in (not a re-wrap by another addon).
    same_capsule: bool,
    /// Its storage is V8 memory (viewable in every runtime).
    js_memory: bool,
    /// Its storage is our pinned memory (`cuda_host`): shared in every runtime, like the
    /// tensor it came from, whose JS view is refused where external buffers are (Electron).
    pinned: bool,
    device: Device,
    span_bytes: usize,
    /// The first element is aligned to the element size.
    aligned: bool,
  },
  /// Any other producer's tensor (validated).
  Foreign {
    device: Device,
    span_bytes: usize,
    aligned: bool,
  },
}

/// How an import is carried out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImportPlan {
  /// Our own capsule straight back: it becomes the new tensor's handle (no new external).
  AdoptOwn,
  /// Our own export through another capsule: share its storage.
  ShareOwn,
  /// Keep the producer's memory (viewed zero-copy, or carried: device memory, or a host tensor
  /// no ArrayBuffer can hold).
  ZeroCopy,
  /// Copy the span into V8 memory (then release the producer's tensor).
  HostCopy,
  /// Copy into a new allocation on the same CUDA device (then release the producer's tensor).
  DeviceCopy,
}

impl ImportPlan {
  /// The device of the tensor the plan makes from a source on `source`.
  pub fn result_device(self, source: Device) -> Device {
    match self {
      ImportPlan::HostCopy => Device::CPU,
      _ => source,
    }
  }
}

/// Picks how to import `source` as `request` asks, in `runtime`; an error is a refusal (the
/// tensor is then released, running its producer's deleter). The requested device is checked
/// against the result too: [`check_import_device`] before the consume could only see the
/// producer's device, when it could read it at all.
pub fn plan_import(
  request: &ImportRequest,
  source: &Source,
  runtime: &Runtime,
) -> Result<ImportPlan> {
  let plan = plan_for(request, source, runtime)?;
  let device = match *source {
    Source::Own { device, .. } | Source::Foreign { device, .. } => device,
  };
  check_import_device(request.device, request.copy, plan.result_device(device))?;
  Ok(plan)
}

fn plan_for(request: &ImportRequest, source: &Source, runtime: &Runtime) -> Result<ImportPlan> {
  let (device, span_bytes, aligned) = match *source {
    Source::Own {
      same_capsule,
      js_memory,
      pinned,
      device,
      span_bytes,
      aligned,
    } => {
      // Our own export, unless a copy was asked for: share the original storage, no copy, no
      // re-validation of metadata we produced ourselves, wherever JS can view it as it is (or,
      // for pinned memory, wherever the original tensor is usable: everywhere).
      let viewable =
        js_memory || pinned || !device.is_host_accessible() || runtime.external_buffers;
      if request.copy != CopyRequest::Always && viewable {
        return Ok(if same_capsule {
          ImportPlan::AdoptOwn
        } else {
          ImportPlan::ShareOwn
        });
      }
      // Memory a JS view can only copy (Electron), or a copy asked for: as any producer's.
      (device, span_bytes, aligned)
    }
    Source::Foreign {
      device,
      span_bytes,
      aligned,
    } => (device, span_bytes, aligned),
  };
  let copy = request.copy == CopyRequest::Always;
  if device.device_type == DeviceType::Cuda {
    // Checked against the driver by the import itself; copies stay on the device.
    return Ok(if copy {
      ImportPlan::DeviceCopy
    } else {
      ImportPlan::ZeroCopy
    });
  }
  if !device.is_host_accessible() {
    if copy {
      return Err(fail(
        ErrorKind::Device,
        format!("copying {device} memory to the host is not supported"),
      ));
    }
    // Device memory is never viewed from JS; the handle only carries it.
    return Ok(ImportPlan::ZeroCopy);
  }
  if span_bytes > runtime.max_arraybuffer_bytes {
    // No ArrayBuffer can hold it in this runtime, so neither a view nor a copy of it can
    // exist: keep the producer's memory (exports stay zero-copy), `.data` throws
    // ERR_DLPACK_TOO_LARGE and `getData({ offset, length })` views or copies windows of it.
    if copy {
      return Err(fail(
        ErrorKind::TooLarge,
        format!(
          "copy: true asks for a copy of {span_bytes} bytes, more than this runtime's largest \
           ArrayBuffer ({} bytes)",
          runtime.max_arraybuffer_bytes
        ),
      ));
    }
    return Ok(ImportPlan::ZeroCopy);
  }
  if !copy && aligned && runtime.external_buffers {
    return Ok(ImportPlan::ZeroCopy);
  }
  if request.copy == CopyRequest::Never {
    let why = if aligned {
      "this runtime does not allow external ArrayBuffers (Electron's memory cage), so a JS view needs a copy"
    } else {
      "the data is not aligned to its element size, so a JS view needs a copy"
    };
    return Err(fail(
      ErrorKind::CopyRequired,
      format!("copy: false cannot be honoured: {why}"),
    ));
  }
  Ok(ImportPlan::HostCopy)
}

/// The `stream` option of `__dlpack__`, as JS gave it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StreamOption {
  /// A bigint, or a number that is a safe integer.
  Integer(i128),
  /// Any other number.
  NotAnInteger(f64),
  /// A bigint too large for any stream value.
  OutOfRange,
}

/// What an export (`__dlpack__`) asks for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExportRequest {
  pub copy: CopyRequest,
  /// The major version of `maxVersion` (`None`: unset, the newest).
  pub max_major: Option<i64>,
  /// `dlDevice`: the device the consumer wants the data on.
  pub device: Option<Device>,
  pub stream: Option<StreamOption>,
}

/// How an export is carried out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportPlan {
  pub format: ExportFormat,
  /// Export a private copy (`IS_COPIED`).
  pub copy: bool,
  /// The consumer's stream, for CUDA tensors (`None`: the legacy default stream).
  pub stream: Option<Stream>,
  /// The device the export names: the tensor's, or `cpu` for pinned host memory (`cuda_host`)
  /// asked for as `dlDevice: [1, 0]` (the same bytes, readable by the CPU: no copy).
  pub device: Device,
}

/// Checks an export request against the tensor's device and picks the export. The checks run in
/// a fixed order, so that each bad request gets one stable code: the stream given to a CPU
/// tensor, a stream that is no integer, a device the data is not on, then the stream's value.
pub fn plan_export(request: &ExportRequest, device: Device) -> Result<ExportPlan> {
  let format = match request.max_major {
    Some(major) if major < 1 => ExportFormat::Legacy,
    _ => ExportFormat::Versioned,
  };
  let cuda = device.device_type == DeviceType::Cuda;
  if let Some(stream) = request.stream {
    if device.device_type == DeviceType::Cpu {
      return Err(fail(
        ErrorKind::Stream,
        "CPU tensors take no stream (pass null or leave it out)",
      ));
    }
    if let (true, StreamOption::NotAnInteger(value)) = (cuda, stream) {
      return Err(fail(
        ErrorKind::InvalidArgument,
        format!("stream must be a bigint, a safe integer, null or undefined, got {value}"),
      ));
    }
  }
  // Pinned host memory is CPU memory too: a consumer that only takes kDLCPU (NumPy) gets it
  // under that name, zero-copy.
  let pinned_as_cpu =
    device.device_type == DeviceType::CudaHost && request.device == Some(Device::CPU);
  if let Some(target) = request.device {
    if target != device && !pinned_as_cpu {
      return Err(fail(
        if request.copy == CopyRequest::Never {
          ErrorKind::CopyRequired
        } else {
          ErrorKind::Device
        },
        format!("cannot export a {device} tensor to {target}"),
      ));
    }
  }
  // Only CUDA exports synchronise; other devices ignore the stream.
  let stream = match request.stream {
    Some(StreamOption::Integer(value)) if cuda => Some(Stream::from_dlpack(Some(value))?),
    Some(StreamOption::OutOfRange) if cuda => {
      return Err(fail(ErrorKind::Stream, "the stream value is out of range"))
    }
    _ => None,
  };
  Ok(ExportPlan {
    format,
    copy: request.copy == CopyRequest::Always,
    stream,
    device: if pinned_as_cpu { Device::CPU } else { device },
  })
}

#[cfg(test)]
mod tests {
  use super::*;

  const CUDA0: Device = Device::cuda(0);
  const CUDA1: Device = Device::cuda(1);
  const ROCM: Device = Device {
    device_type: DeviceType::Rocm,
    id: 0,
  };
  const CUDA_HOST: Device = Device {
    device_type: DeviceType::CudaHost,
    id: 0,
  };
  const NODE: Runtime = Runtime {
    external_buffers: true,
    max_arraybuffer_bytes: 1 << 32,
  };
  const ELECTRON: Runtime = Runtime {
    external_buffers: false,
    max_arraybuffer_bytes: 1 << 32,
  };

  fn request(copy: CopyRequest) -> ImportRequest {
    ImportRequest {
      copy,
      device: None,
      stream: None,
    }
  }

  fn foreign(device: Device, span_bytes: usize, aligned: bool) -> Source {
    Source::Foreign {
      device,
      span_bytes,
      aligned,
    }
  }

  fn own(same_capsule: bool, js_memory: bool, device: Device) -> Source {
    Source::Own {
      same_capsule,
      js_memory,
      pinned: false,
      device,
      span_bytes: 64,
      aligned: true,
    }
  }

  fn code<T: std::fmt::Debug>(result: Result<T>) -> &'static str {
    result.unwrap_err().status
  }

  #[test]
  fn copy_modes() {
    assert_eq!(CopyRequest::from_mode(0).unwrap(), CopyRequest::IfNeeded);
    assert_eq!(CopyRequest::from_mode(1).unwrap(), CopyRequest::Always);
    assert_eq!(CopyRequest::from_mode(2).unwrap(), CopyRequest::Never);
    assert_eq!(
      code(CopyRequest::from_mode(3)),
      "ERR_DLPACK_INVALID_ARGUMENT"
    );
    assert_eq!(CopyRequest::from_flag(None), CopyRequest::IfNeeded);
    assert_eq!(CopyRequest::from_flag(Some(true)), CopyRequest::Always);
    assert_eq!(CopyRequest::from_flag(Some(false)), CopyRequest::Never);
  }

  #[test]
  fn another_device_is_refused_before_anything_is_consumed() {
    let ask = |copy| check_import_device(Some(CUDA0), copy, Device::CPU);
    assert_eq!(code(ask(CopyRequest::IfNeeded)), "ERR_DLPACK_DEVICE");
    assert_eq!(code(ask(CopyRequest::Always)), "ERR_DLPACK_DEVICE");
    assert_eq!(code(ask(CopyRequest::Never)), "ERR_DLPACK_COPY_REQUIRED");
    let error = ask(CopyRequest::IfNeeded).unwrap_err();
    assert_eq!(error.reason, "the data is on cpu, not cuda:0");
    assert!(check_import_device(Some(CUDA0), CopyRequest::Never, CUDA0).is_ok());
    assert!(check_import_device(None, CopyRequest::Never, CUDA1).is_ok());
    assert_eq!(
      code(check_import_device(
        Some(CUDA0),
        CopyRequest::IfNeeded,
        CUDA1
      )),
      "ERR_DLPACK_DEVICE"
    );
  }

  #[test]
  fn own_exports_are_adopted_or_shared() {
    let plan = |source, runtime| plan_import(&request(CopyRequest::IfNeeded), &source, &runtime);
    assert_eq!(
      plan(own(true, true, Device::CPU), NODE).unwrap(),
      ImportPlan::AdoptOwn
    );
    assert_eq!(
      plan(own(false, false, Device::CPU), NODE).unwrap(),
      ImportPlan::ShareOwn
    );
    // Electron: V8 memory and device memory are still shared; foreign host memory is not.
    assert_eq!(
      plan(own(true, true, Device::CPU), ELECTRON).unwrap(),
      ImportPlan::AdoptOwn
    );
    assert_eq!(
      plan(own(true, false, CUDA0), ELECTRON).unwrap(),
      ImportPlan::AdoptOwn
    );
    assert_eq!(
      plan(own(true, false, Device::CPU), ELECTRON).unwrap(),
      ImportPlan::HostCopy
    );
    // Our own pinned memory is shared in Electron too (its JS view is what is refused there).
    let pinned = Source::Own {
      same_capsule: true,
      js_memory: false,
      pinned: true,
      device: CUDA_HOST,
      span_bytes: 64,
      aligned: true,
    };
    assert_eq!(plan(pinned, ELECTRON).unwrap(), ImportPlan::AdoptOwn);
    assert_eq!(
      plan(own(true, false, CUDA_HOST), ELECTRON).unwrap(),
      ImportPlan::HostCopy
    );
    // copy: false never gets a copy of an own export either.
    assert_eq!(
      code(plan_import(
        &request(CopyRequest::Never),
        &own(true, false, Device::CPU),
        &ELECTRON
      )),
      "ERR_DLPACK_COPY_REQUIRED"
    );
    // copy: true always copies, own export or not.
    assert_eq!(
      plan_import(
        &request(CopyRequest::Always),
        &own(true, true, Device::CPU),
        &NODE
      )
      .unwrap(),
      ImportPlan::HostCopy
    );
    assert_eq!(
      plan_import(
        &request(CopyRequest::Always),
        &own(true, false, CUDA0),
        &NODE
      )
      .unwrap(),
      ImportPlan::DeviceCopy
    );
  }

  #[test]
  fn foreign_host_memory_is_viewed_when_it_can_be_and_copied_otherwise() {
    let plan = |copy, source, runtime| plan_import(&request(copy), &source, &runtime);
    let aligned = foreign(Device::CPU, 64, true);
    let misaligned = foreign(Device::CPU, 64, false);
    assert_eq!(
      plan(CopyRequest::IfNeeded, aligned, NODE).unwrap(),
      ImportPlan::ZeroCopy
    );
    assert_eq!(
      plan(CopyRequest::Always, aligned, NODE).unwrap(),
      ImportPlan::HostCopy
    );
    assert_eq!(
      plan(CopyRequest::IfNeeded, misaligned, NODE).unwrap(),
      ImportPlan::HostCopy
    );
    assert_eq!(
      plan(CopyRequest::IfNeeded, aligned, ELECTRON).unwrap(),
      ImportPlan::HostCopy
    );
    let refused = plan(CopyRequest::Never, misaligned, NODE).unwrap_err();
    assert_eq!(refused.status, "ERR_DLPACK_COPY_REQUIRED");
    assert!(refused.reason.contains("not aligned"));
    let refused = plan(CopyRequest::Never, aligned, ELECTRON).unwrap_err();
    assert!(refused.reason.contains("external ArrayBuffers"));
    assert_eq!(
      plan(CopyRequest::Never, aligned, NODE).unwrap(),
      ImportPlan::ZeroCopy
    );
    // Pinned host memory is host memory; its copy is on the CPU.
    assert_eq!(
      plan(CopyRequest::IfNeeded, foreign(CUDA_HOST, 64, true), NODE).unwrap(),
      ImportPlan::ZeroCopy
    );
    assert_eq!(ImportPlan::HostCopy.result_device(CUDA_HOST), Device::CPU);
  }

  #[test]
  fn host_tensors_past_the_arraybuffer_limit_are_kept_never_copied() {
    let small = Runtime {
      external_buffers: false,
      max_arraybuffer_bytes: 63,
    };
    let big = foreign(Device::CPU, 64, false);
    for copy in [CopyRequest::IfNeeded, CopyRequest::Never] {
      assert_eq!(
        plan_import(&request(copy), &big, &small).unwrap(),
        ImportPlan::ZeroCopy
      );
    }
    assert_eq!(
      code(plan_import(&request(CopyRequest::Always), &big, &small)),
      "ERR_DLPACK_TOO_LARGE"
    );
  }

  #[test]
  fn device_memory_is_carried_or_copied_on_its_device() {
    let plan = |copy, device| plan_import(&request(copy), &foreign(device, 64, true), &ELECTRON);
    assert_eq!(
      plan(CopyRequest::IfNeeded, CUDA0).unwrap(),
      ImportPlan::ZeroCopy
    );
    assert_eq!(
      plan(CopyRequest::Never, CUDA0).unwrap(),
      ImportPlan::ZeroCopy
    );
    assert_eq!(
      plan(CopyRequest::Always, CUDA0).unwrap(),
      ImportPlan::DeviceCopy
    );
    assert_eq!(
      plan(CopyRequest::IfNeeded, ROCM).unwrap(),
      ImportPlan::ZeroCopy
    );
    assert_eq!(code(plan(CopyRequest::Always, ROCM)), "ERR_DLPACK_DEVICE");
  }

  #[test]
  fn the_requested_device_is_checked_against_the_result() {
    // A pinned-memory capsule, copied (Electron): the result is on the CPU, not cuda_host:0.
    let ask = |device| ImportRequest {
      copy: CopyRequest::IfNeeded,
      device: Some(device),
      stream: None,
    };
    let pinned = foreign(CUDA_HOST, 64, true);
    assert_eq!(
      code(plan_import(&ask(CUDA_HOST), &pinned, &ELECTRON)),
      "ERR_DLPACK_DEVICE"
    );
    assert_eq!(
      plan_import(&ask(Device::CPU), &pinned, &ELECTRON).unwrap(),
      ImportPlan::HostCopy
    );
    assert_eq!(
      plan_import(&ask(CUDA_HOST), &pinned, &NODE).unwrap(),
      ImportPlan::ZeroCopy
    );
  }

  fn export(device: Device, request: ExportRequest) -> Result<ExportPlan> {
    plan_export(&request, device)
  }

  const PLAIN: ExportRequest = ExportRequest {
    copy: CopyRequest::IfNeeded,
    max_major: None,
    device: None,
    stream: None,
  };

  #[test]
  fn export_format_and_copy() {
    let plan = export(Device::CPU, PLAIN).unwrap();
    assert_eq!(
      plan,
      ExportPlan {
        format: ExportFormat::Versioned,
        copy: false,
        stream: None,
        device: Device::CPU,
      }
    );
    for (major, format) in [
      (0, ExportFormat::Legacy),
      (-1, ExportFormat::Legacy),
      (1, ExportFormat::Versioned),
      (2, ExportFormat::Versioned),
    ] {
      let request = ExportRequest {
        max_major: Some(major),
        ..PLAIN
      };
      assert_eq!(export(Device::CPU, request).unwrap().format, format);
    }
    let copy = ExportRequest {
      copy: CopyRequest::Always,
      ..PLAIN
    };
    assert!(export(Device::CPU, copy).unwrap().copy);
    let never = ExportRequest {
      copy: CopyRequest::Never,
      ..PLAIN
    };
    assert!(!export(Device::CPU, never).unwrap().copy);
  }

  #[test]
  fn export_streams() {
    let with = |stream| ExportRequest {
      stream: Some(stream),
      ..PLAIN
    };
    assert_eq!(
      code(export(Device::CPU, with(StreamOption::Integer(1)))),
      "ERR_DLPACK_STREAM"
    );
    assert_eq!(
      code(export(Device::CPU, with(StreamOption::NotAnInteger(1.5)))),
      "ERR_DLPACK_STREAM"
    );
    assert_eq!(
      export(CUDA0, with(StreamOption::Integer(2)))
        .unwrap()
        .stream,
      Some(Stream::PerThread)
    );
    assert_eq!(
      export(CUDA0, with(StreamOption::Integer(-1)))
        .unwrap()
        .stream,
      Some(Stream::NoSync)
    );
    assert_eq!(export(CUDA0, PLAIN).unwrap().stream, None);
    assert_eq!(
      code(export(CUDA0, with(StreamOption::OutOfRange))),
      "ERR_DLPACK_STREAM"
    );
    assert_eq!(
      code(export(CUDA0, with(StreamOption::Integer(0)))),
      "ERR_DLPACK_STREAM"
    );
    assert_eq!(
      code(export(CUDA0, with(StreamOption::NotAnInteger(0.5)))),
      "ERR_DLPACK_INVALID_ARGUMENT"
    );
    // Other devices take a stream and ignore it.
    assert_eq!(
      export(ROCM, with(StreamOption::NotAnInteger(0.5)))
        .unwrap()
        .stream,
      None
    );
  }

  #[test]
  fn export_devices() {
    let to = |device, copy| ExportRequest {
      device: Some(device),
      copy,
      ..PLAIN
    };
    assert!(export(Device::CPU, to(Device::CPU, CopyRequest::Never)).is_ok());
    let refused = export(Device::CPU, to(CUDA0, CopyRequest::IfNeeded)).unwrap_err();
    assert_eq!(refused.status, "ERR_DLPACK_DEVICE");
    assert_eq!(refused.reason, "cannot export a cpu tensor to cuda:0");
    assert_eq!(
      code(export(Device::CPU, to(CUDA0, CopyRequest::Never))),
      "ERR_DLPACK_COPY_REQUIRED"
    );
    // The order of the checks: a stream on a CPU tensor is reported before the device.
    let both = ExportRequest {
      stream: Some(StreamOption::Integer(1)),
      ..to(CUDA0, CopyRequest::IfNeeded)
    };
    assert_eq!(code(export(Device::CPU, both)), "ERR_DLPACK_STREAM");
    // ... and a bad device before the stream's value.
    let both = ExportRequest {
      stream: Some(StreamOption::Integer(0)),
      ..to(CUDA1, CopyRequest::IfNeeded)
    };
    assert_eq!(code(export(CUDA0, both)), "ERR_DLPACK_DEVICE");
  }

  #[test]
  fn pinned_memory_exports_as_cpu_memory_when_asked() {
    let to = |device, copy| ExportRequest {
      device: Some(device),
      copy,
      ..PLAIN
    };
    assert_eq!(export(CUDA_HOST, PLAIN).unwrap().device, CUDA_HOST);
    for copy in [
      CopyRequest::IfNeeded,
      CopyRequest::Never,
      CopyRequest::Always,
    ] {
      let plan = export(CUDA_HOST, to(Device::CPU, copy)).unwrap();
      assert_eq!(plan.device, Device::CPU);
      assert_eq!(plan.copy, copy == CopyRequest::Always);
    }
    assert_eq!(
      export(CUDA_HOST, to(CUDA_HOST, CopyRequest::Never))
        .unwrap()
        .device,
      CUDA_HOST
    );
    // Only that way: CPU memory is not pinned memory, and pinned memory is not device memory.
    assert_eq!(
      code(export(Device::CPU, to(CUDA_HOST, CopyRequest::IfNeeded))),
      "ERR_DLPACK_DEVICE"
    );
    assert_eq!(
      code(export(CUDA_HOST, to(CUDA0, CopyRequest::IfNeeded))),
      "ERR_DLPACK_DEVICE"
    );
  }
}
