//! Facts the addon and its TypeScript layer (`lib/`) must agree on, defined once: here for the
//! addon's own (copy requests, the slot layout of `handleInfoInto`), in the core crate for the rest
//! (dtypes, devices, the DLPack version, `MAX_NDIM`, error codes and their classes).
//! [`typescript`] writes them all as `lib/generated/facts.ts`, which is committed; the test at
//! the bottom fails when that file is out of date, and rewrites it with
//! `NAPI_DLPACK_WRITE_GENERATED=1 cargo test -p napi-dlpack-node generated`.

use napi_dlpack::{ErrorKind, MAX_NDIM};

use crate::errors::{fail, Result};

/// `copy` of `fromDLPack` and `__dlpack__` (`null`/`undefined`, `true` or `false`), and the
/// `copyMode` number of `importCapsule` (its discriminant), which `lib/` takes from
/// `COPY_MODE` in lib/generated/facts.ts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyRequest {
  /// Copy only if zero-copy is impossible.
  IfNeeded = 0,
  /// Always copy.
  Always = 1,
  /// Never copy: refuse what needs a copy (`ERR_DLPACK_COPY_REQUIRED`).
  Never = 2,
}

impl CopyRequest {
  pub(crate) const ALL: [CopyRequest; 3] = [
    CopyRequest::IfNeeded,
    CopyRequest::Always,
    CopyRequest::Never,
  ];

  /// The `copyMode` number of `importCapsule`.
  pub fn from_mode(mode: u32) -> Result<CopyRequest> {
    CopyRequest::ALL
      .into_iter()
      .find(|request| *request as u32 == mode)
      .ok_or_else(|| {
        fail(
          ErrorKind::InvalidArgument,
          format!("invalid copy mode {mode}"),
        )
      })
  }

  /// `copy: boolean | null | undefined` (`None`: unset).
  pub fn from_flag(copy: Option<bool>) -> CopyRequest {
    match copy {
      None => CopyRequest::IfNeeded,
      Some(true) => CopyRequest::Always,
      Some(false) => CopyRequest::Never,
    }
  }
}

/// The Float64Array `handleInfoInto` fills: fixed slots, then `ndim` dimensions and `ndim`
/// strides from [`info_slot::SHAPE`] on.
pub(crate) mod info_slot {
  /// Index of the dtype in `DType::ALL` (the order of `DTYPE_ORDER` in TypeScript).
  pub(crate) const DTYPE: usize = 0;
  pub(crate) const DEVICE_TYPE: usize = 1;
  pub(crate) const DEVICE_ID: usize = 2;
  /// The DLPack byte_offset an export of the tensor carries.
  pub(crate) const BYTE_OFFSET: usize = 3;
  /// `info_bit` flags.
  pub(crate) const BITS: usize = 4;
  pub(crate) const NUMEL: usize = 5;
  /// Element offset of the first element inside the `.data` view.
  pub(crate) const VIEW_OFFSET: usize = 6;
  /// Elements the `.data` view spans.
  pub(crate) const VIEW_LENGTH: usize = 7;
  pub(crate) const VERSION_MAJOR: usize = 8;
  pub(crate) const VERSION_MINOR: usize = 9;
  /// The DLPack flags of the imported tensor.
  pub(crate) const FLAGS: usize = 10;
  pub(crate) const NDIM: usize = 11;
  /// First of the `ndim` dimensions; the strides follow them.
  pub(crate) const SHAPE: usize = 12;
}

/// Bits of the [`info_slot::BITS`] slot.
pub(crate) mod info_bit {
  pub(crate) const READ_ONLY: u8 = 1;
  pub(crate) const IS_COPY: u8 = 2;
  pub(crate) const CONTIGUOUS: u8 = 4;
  /// The tensor came from a versioned producer: the version slots are meaningful.
  pub(crate) const HAS_VERSION: u8 = 8;
}

/// Length of the Float64Array `handleInfoInto` needs: the fixed slots, then room for the shape
/// and strides of a tensor of [`MAX_NDIM`] dimensions.
pub(crate) const INFO_SLOTS: usize = info_slot::SHAPE + 2 * MAX_NDIM;

/// The generator of `lib/generated/facts.ts`: test-only, run by the staleness test below.
#[cfg(test)]
mod typescript {
  use napi_dlpack::error::ErrorClass;
  use napi_dlpack::ffi::DLPackVersion;
  use napi_dlpack::{DType, DataTypeCode, DeviceType, ErrorKind, MAX_NDIM};

  use super::{info_bit, info_slot, CopyRequest, INFO_SLOTS};

  /// Every slot of `handleInfoInto` with its TypeScript name, in index order.
  pub(super) const INFO_SLOT_NAMES: [(&str, usize); 13] = [
    ("DTYPE", info_slot::DTYPE),
    ("DEVICE_TYPE", info_slot::DEVICE_TYPE),
    ("DEVICE_ID", info_slot::DEVICE_ID),
    ("BYTE_OFFSET", info_slot::BYTE_OFFSET),
    ("BITS", info_slot::BITS),
    ("NUMEL", info_slot::NUMEL),
    ("VIEW_OFFSET", info_slot::VIEW_OFFSET),
    ("VIEW_LENGTH", info_slot::VIEW_LENGTH),
    ("VERSION_MAJOR", info_slot::VERSION_MAJOR),
    ("VERSION_MINOR", info_slot::VERSION_MINOR),
    ("FLAGS", info_slot::FLAGS),
    ("NDIM", info_slot::NDIM),
    ("SHAPE", info_slot::SHAPE),
  ];

  /// The bits of the `BITS` slot with their TypeScript names.
  pub(super) const INFO_BITS: [(&str, u8); 4] = [
    ("READ_ONLY", info_bit::READ_ONLY),
    ("IS_COPY", info_bit::IS_COPY),
    ("CONTIGUOUS", info_bit::CONTIGUOUS),
    ("HAS_VERSION", info_bit::HAS_VERSION),
  ];

  /// The TypeScript name of a copy request's `copyMode`.
  const fn copy_mode_name(mode: CopyRequest) -> &'static str {
    match mode {
      CopyRequest::IfNeeded => "IF_NEEDED",
      CopyRequest::Always => "ALWAYS",
      CopyRequest::Never => "NEVER",
    }
  }

  /// The member name of a device type in the TypeScript enum `DLDeviceType` (public API, so
  /// spelled as it always was).
  const fn device_type_ts_name(device_type: DeviceType) -> &'static str {
    match device_type {
      DeviceType::Cpu => "CPU",
      DeviceType::Cuda => "CUDA",
      DeviceType::CudaHost => "CUDAHost",
      DeviceType::OpenCl => "OpenCL",
      DeviceType::Vulkan => "Vulkan",
      DeviceType::Metal => "Metal",
      DeviceType::Vpi => "VPI",
      DeviceType::Rocm => "ROCM",
      DeviceType::RocmHost => "ROCMHost",
      DeviceType::ExtDev => "ExtDev",
      DeviceType::CudaManaged => "CUDAManaged",
      DeviceType::OneApi => "OneAPI",
      DeviceType::WebGpu => "WebGPU",
      DeviceType::Hexagon => "Hexagon",
      DeviceType::Maia => "MAIA",
      DeviceType::Trn => "Trn",
    }
  }

  /// The member name of a type code in the TypeScript enum `DLDataTypeCode` (public API).
  const fn type_code_ts_name(code: DataTypeCode) -> &'static str {
    match code {
      DataTypeCode::Int => "Int",
      DataTypeCode::UInt => "UInt",
      DataTypeCode::Float => "Float",
      DataTypeCode::OpaqueHandle => "OpaqueHandle",
      DataTypeCode::Bfloat => "Bfloat",
      DataTypeCode::Complex => "Complex",
      DataTypeCode::Bool => "Bool",
      DataTypeCode::Float8E3M4 => "Float8_e3m4",
      DataTypeCode::Float8E4M3 => "Float8_e4m3",
      DataTypeCode::Float8E4M3B11Fnuz => "Float8_e4m3b11fnuz",
      DataTypeCode::Float8E4M3Fn => "Float8_e4m3fn",
      DataTypeCode::Float8E4M3Fnuz => "Float8_e4m3fnuz",
      DataTypeCode::Float8E5M2 => "Float8_e5m2",
      DataTypeCode::Float8E5M2Fnuz => "Float8_e5m2fnuz",
      DataTypeCode::Float8E8M0Fnu => "Float8_e8m0fnu",
      DataTypeCode::Float6E2M3Fn => "Float6_e2m3fn",
      DataTypeCode::Float6E3M2Fn => "Float6_e3m2fn",
      DataTypeCode::Float4E2M1Fn => "Float4_e2m1fn",
    }
  }

  /// `lib/generated/facts.ts`, relative to the package root.
  pub(super) const GENERATED_PATH: &str = "lib/generated/facts.ts";

  /// The contents of [`GENERATED_PATH`].
  pub(super) fn typescript() -> String {
    let mut ts = String::new();
    let mut line = |text: &str| {
      ts.push_str(text);
      ts.push('\n');
    };
    line("// Generated from the Rust definitions by `typescript()` in src/facts.rs: do not edit.");
    line(
      "// `cargo test -p napi-dlpack-node` fails when this file is out of date; rewrite it with",
    );
    line("// NAPI_DLPACK_WRITE_GENERATED=1 cargo test -p napi-dlpack-node generated");
    line("");

    let version = DLPackVersion::CURRENT;
    line("/** The DLPack version napi-dlpack implements and writes (`DLPackVersion::CURRENT`). */");
    line(&format!(
      "export const DLPACK_VERSION = Object.freeze([{}, {}] as const)",
      version.major, version.minor
    ));
    line("");
    line("/** The most dimensions a tensor may have (`napi_dlpack::MAX_NDIM`). */");
    line(&format!("export const MAX_NDIM = {MAX_NDIM}"));
    line("");
    line("/** The name of the registered symbol (`Symbol.for`) under which producers expose their exchange table (`NAPI_DLPACK_EXCHANGE_API_PROPERTY`). */");
    line(&format!(
      "export const EXCHANGE_API_SYMBOL_NAME = '{}'",
      napi_dlpack::exchange::EXCHANGE_API_PROPERTY
    ));
    line("");
    line("/** The name of the registered symbol (`Symbol.for`) under which napi-dlpack puts its library adapter on `globalThis` (`NAPI_DLPACK_ADAPTER_PROPERTY`). */");
    line(&format!(
      "export const ADAPTER_SYMBOL_NAME = '{}'",
      napi_dlpack::adapter::ADAPTER_PROPERTY
    ));
    line("");

    line("/** DLPack device types (`DLDeviceType`, DLPack 1.3). */");
    line("export enum DLDeviceType {");
    for device_type in DeviceType::ALL {
      line(&format!(
        "  {} = {},",
        device_type_ts_name(device_type),
        device_type as u32
      ));
    }
    line("}");
    line("");
    line("/** The name of each device type in device strings (`'cuda'` in `'cuda:0'`). */");
    line("export const DEVICE_NAMES: Readonly<Record<DLDeviceType, string>> = Object.freeze({");
    for device_type in DeviceType::ALL {
      line(&format!(
        "  [DLDeviceType.{}]: '{}',",
        device_type_ts_name(device_type),
        device_type.name()
      ));
    }
    line("})");
    line("");
    line("/** Device types whose memory the CPU reads and writes directly (`DeviceType::is_host_accessible`). */");
    let host: Vec<String> = DeviceType::ALL
      .into_iter()
      .filter(|device_type| device_type.is_host_accessible())
      .map(|device_type| format!("DLDeviceType.{}", device_type_ts_name(device_type)))
      .collect();
    line(&format!(
      "export const HOST_ACCESSIBLE_DEVICE_TYPES: readonly DLDeviceType[] = Object.freeze([{}])",
      host.join(", ")
    ));
    line("");

    line("/** DLPack element type codes (`DLDataTypeCode`, DLPack 1.3). */");
    line("export enum DLDataTypeCode {");
    for code in DataTypeCode::ALL {
      line(&format!("  {} = {},", type_code_ts_name(code), code as u8));
    }
    line("}");
    line("");
    line("/** Every dtype: its DLPack code and bits, and the bytes one element occupies. */");
    line("export const DTYPE_FACTS = Object.freeze({");
    for dtype in DType::ALL {
      let (code, bits) = dtype.code_bits();
      line(&format!(
        "  {}: Object.freeze({{ code: DLDataTypeCode.{}, bits: {bits}, itemsize: {} }}),",
        dtype.name(),
        type_code_ts_name(code),
        dtype.itemsize()
      ));
    }
    line("})");
    line("");
    line("/** A dtype name. */");
    line("export type DTypeName = keyof typeof DTYPE_FACTS");
    line("");
    line("/** The dtypes in the addon's order (`DType::ALL`): the dtype slot of `handleInfoInto` indexes it. */");
    let names: Vec<String> = DType::ALL
      .iter()
      .map(|dtype| format!("'{}'", dtype.name()))
      .collect();
    line(&format!(
      "export const DTYPE_ORDER: readonly DTypeName[] = Object.freeze([{}])",
      names.join(", ")
    ));
    line("");

    line("/** `copyMode` of the addon's `importCapsule`. */");
    line("export const COPY_MODE = Object.freeze({");
    for mode in CopyRequest::ALL {
      line(&format!("  {}: {},", copy_mode_name(mode), mode as u32));
    }
    line("} as const)");
    line("");
    line(
      "/** Slots of the Float64Array `handleInfoInto` fills; shape then strides start at `SHAPE`. */",
    );
    line("export const INFO_SLOT = Object.freeze({");
    for (name, index) in INFO_SLOT_NAMES {
      line(&format!("  {name}: {index},"));
    }
    line("} as const)");
    line("");
    line("/** Bits of the `BITS` slot. */");
    line("export const INFO_BIT = Object.freeze({");
    for (name, bit) in INFO_BITS {
      line(&format!("  {name}: {bit},"));
    }
    line("} as const)");
    line("");
    line("/** Length of the Float64Array `handleInfoInto` needs (fixed slots, shape and strides of `MAX_NDIM` dimensions). */");
    line(&format!("export const INFO_SLOTS = {INFO_SLOTS}"));
    line("");

    line("/** The error class of every code the addon throws (`ErrorKind::class`). */");
    line("export const ERROR_CLASS_BY_CODE = Object.freeze({");
    for kind in ErrorKind::ALL {
      line(&format!("  {}: '{}',", kind.code(), kind.class().js_name()));
    }
    line("} as const)");
    line("");
    let classes: Vec<String> = ErrorClass::ALL
      .iter()
      .map(|class| format!("'{}'", class.js_name()))
      .collect();
    line("/** The name of every error class a code maps to. */");
    line(&format!(
      "export type ErrorClassName = {}",
      classes.join(" | ")
    ));
    line("");
    line("/** A code the addon throws. */");
    line("export type NativeErrorCode = keyof typeof ERROR_CLASS_BY_CODE");
    ts
  }
}

#[cfg(test)]
mod tests {
  use std::path::Path;

  use super::typescript::{typescript, GENERATED_PATH, INFO_BITS, INFO_SLOT_NAMES};
  use super::{info_slot, CopyRequest, INFO_SLOTS};

  /// The committed TypeScript says what the Rust definitions say.
  #[test]
  fn generated_typescript_is_current() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(GENERATED_PATH);
    let wanted = typescript();
    if std::env::var_os("NAPI_DLPACK_WRITE_GENERATED").is_some() {
      std::fs::create_dir_all(path.parent().unwrap()).unwrap();
      if std::fs::read_to_string(&path).ok().as_deref() != Some(wanted.as_str()) {
        std::fs::write(&path, &wanted).unwrap();
      }
      return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
      committed == wanted,
      "{GENERATED_PATH} is out of date: rewrite it with \
       NAPI_DLPACK_WRITE_GENERATED=1 cargo test -p napi-dlpack-node generated"
    );
  }

  #[test]
  fn slots_are_distinct_and_in_order() {
    for (position, (_, index)) in INFO_SLOT_NAMES.iter().enumerate() {
      assert_eq!(*index, position);
    }
    const { assert!(INFO_SLOTS > info_slot::SHAPE) };
    let mut seen = 0u8;
    for (_, bit) in INFO_BITS {
      assert_eq!(bit.count_ones(), 1);
      assert_eq!(seen & bit, 0);
      seen |= bit;
    }
  }

  #[test]
  fn copy_modes_round_trip() {
    for mode in CopyRequest::ALL {
      assert_eq!(CopyRequest::from_mode(mode as u32).unwrap(), mode);
    }
    assert!(CopyRequest::from_mode(3).is_err());
  }
}
