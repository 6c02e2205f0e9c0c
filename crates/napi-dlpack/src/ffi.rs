//! `#[repr(C)]` mirrors of the DLPack 1.3 ABI.
//!
//! Enumerations are stored as raw integers (`u32` device types, `u8` type codes) rather than
//! Rust enums: a foreign producer can put any value in these fields, and a Rust enum holding an
//! unlisted discriminant would be undefined behaviour. The typed views live in [`crate::device`]
//! and [`crate::dtype`], which convert with checks.
//!
//! The layout is checked at compile time below (sizes, alignments and every field offset, for
//! both 32- and 64-bit targets) and, in the tests, against an independent implementation.

use core::ffi::c_void;
use core::mem::{align_of, offset_of, size_of};

/// The DLPack major version this crate implements. A versioned tensor with another major
/// version must not be read (only its deleter may be called).
pub const DLPACK_MAJOR_VERSION: u32 = 1;
/// The DLPack minor version this crate implements (1.3: fp8/fp6/fp4 codes, kDLTrn).
pub const DLPACK_MINOR_VERSION: u32 = 3;

/// The tensor must not be written through.
pub const DLPACK_FLAG_BITMASK_READ_ONLY: u64 = 1 << 0;
/// The producer made a copy for this export; the consumer owns it exclusively.
pub const DLPACK_FLAG_BITMASK_IS_COPIED: u64 = 1 << 1;
/// Sub-byte element types (fp4, fp6) occupy one whole byte each instead of being packed.
pub const DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED: u64 = 1 << 2;

/// `DLPackVersion`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DLPackVersion {
  pub major: u32,
  pub minor: u32,
}

impl DLPackVersion {
  /// The version this crate writes into exported versioned tensors.
  pub const CURRENT: DLPackVersion = DLPackVersion {
    major: DLPACK_MAJOR_VERSION,
    minor: DLPACK_MINOR_VERSION,
  };
}

/// `DLDevice`: the C enum `DLDeviceType` is 32 bits wide; we keep it as a raw `u32`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DLDevice {
  pub device_type: u32,
  pub device_id: i32,
}

/// `DLDataType`: `code` is a raw `DLDataTypeCode`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DLDataType {
  pub code: u8,
  pub bits: u8,
  pub lanes: u16,
}

/// `DLTensor`: a borrowed description of strided memory.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DLTensor {
  pub data: *mut c_void,
  pub device: DLDevice,
  pub ndim: i32,
  pub dtype: DLDataType,
  pub shape: *mut i64,
  /// In elements, not bytes. May be NULL from producers older than DLPack 1.2 (C-contiguous).
  pub strides: *mut i64,
  pub byte_offset: u64,
}

/// Deleter of the legacy struct.
pub type DLManagedTensorDeleter = unsafe extern "C" fn(*mut DLManagedTensor);
/// Deleter of the versioned struct.
pub type DLManagedTensorVersionedDeleter = unsafe extern "C" fn(*mut DLManagedTensorVersioned);

/// `DLManagedTensor`: the pre-1.0 (legacy) owning struct. It has no version and no flags.
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensor {
  pub dl_tensor: DLTensor,
  pub manager_ctx: *mut c_void,
  /// `Option<fn>` is pointer-sized thanks to the null niche, so NULL is representable.
  pub deleter: Option<DLManagedTensorDeleter>,
}

/// `DLManagedTensorVersioned`: the DLPack ≥ 1.0 owning struct. Everything up to `flags` is
/// stable across major versions so that a consumer can always call the deleter.
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensorVersioned {
  pub version: DLPackVersion,
  pub manager_ctx: *mut c_void,
  pub deleter: Option<DLManagedTensorVersionedDeleter>,
  pub flags: u64,
  pub dl_tensor: DLTensor,
}

impl DLTensor {
  /// An all-zero tensor: NULL pointers, CPU-less device 0, ndim 0.
  pub const fn zeroed() -> DLTensor {
    DLTensor {
      data: core::ptr::null_mut(),
      device: DLDevice {
        device_type: 0,
        device_id: 0,
      },
      ndim: 0,
      dtype: DLDataType {
        code: 0,
        bits: 0,
        lanes: 0,
      },
      shape: core::ptr::null_mut(),
      strides: core::ptr::null_mut(),
      byte_offset: 0,
    }
  }
}

// Compile-time layout checks. `P` is the pointer size, so the same expressions hold on 32-bit
// targets (wasm32: DLTensor is 40 bytes there) and on 64-bit targets (48 bytes).
const P: usize = size_of::<*mut c_void>();
const fn round_up(value: usize, align: usize) -> usize {
  value.div_ceil(align) * align
}
const TENSOR_SHAPE: usize = round_up(20 + 4, P);
const TENSOR_BYTE_OFFSET: usize = round_up(TENSOR_SHAPE + 2 * P, align_of::<u64>());
const TENSOR_SIZE: usize = round_up(TENSOR_BYTE_OFFSET + 8, align_of::<DLTensor>());

const _: () = {
  assert!(size_of::<DLPackVersion>() == 8 && align_of::<DLPackVersion>() == 4);
  assert!(offset_of!(DLPackVersion, major) == 0 && offset_of!(DLPackVersion, minor) == 4);

  assert!(size_of::<DLDevice>() == 8 && align_of::<DLDevice>() == 4);
  assert!(offset_of!(DLDevice, device_type) == 0 && offset_of!(DLDevice, device_id) == 4);

  assert!(size_of::<DLDataType>() == 4 && align_of::<DLDataType>() == 2);
  assert!(offset_of!(DLDataType, code) == 0);
  assert!(offset_of!(DLDataType, bits) == 1);
  assert!(offset_of!(DLDataType, lanes) == 2);

  assert!(offset_of!(DLTensor, data) == 0);
  assert!(offset_of!(DLTensor, device) == P);
  assert!(offset_of!(DLTensor, ndim) == P + 8);
  assert!(offset_of!(DLTensor, dtype) == P + 12);
  assert!(offset_of!(DLTensor, shape) == round_up(P + 16, P));
  assert!(offset_of!(DLTensor, shape) == TENSOR_SHAPE || P != 8);
  assert!(offset_of!(DLTensor, strides) == offset_of!(DLTensor, shape) + P);
  assert!(offset_of!(DLTensor, byte_offset) == round_up(offset_of!(DLTensor, strides) + P, 8));
  assert!(size_of::<DLTensor>() == TENSOR_SIZE || P != 8);
  assert!(
    size_of::<DLTensor>()
      == round_up(
        offset_of!(DLTensor, byte_offset) + 8,
        align_of::<DLTensor>()
      )
  );

  assert!(size_of::<Option<DLManagedTensorDeleter>>() == P);
  assert!(offset_of!(DLManagedTensor, dl_tensor) == 0);
  assert!(offset_of!(DLManagedTensor, manager_ctx) == size_of::<DLTensor>());
  assert!(offset_of!(DLManagedTensor, deleter) == size_of::<DLTensor>() + P);
  assert!(size_of::<DLManagedTensor>() == size_of::<DLTensor>() + 2 * P);

  assert!(offset_of!(DLManagedTensorVersioned, version) == 0);
  assert!(offset_of!(DLManagedTensorVersioned, manager_ctx) == 8);
  assert!(offset_of!(DLManagedTensorVersioned, deleter) == 8 + P);
  assert!(offset_of!(DLManagedTensorVersioned, flags) == round_up(8 + 2 * P, 8));
  assert!(
    offset_of!(DLManagedTensorVersioned, dl_tensor)
      == round_up(
        offset_of!(DLManagedTensorVersioned, flags) + 8,
        align_of::<DLTensor>()
      )
  );
};

#[cfg(target_pointer_width = "64")]
const _: () = {
  // The x86_64 / aarch64 numbers, spelled out as the C header documents them.
  assert!(size_of::<DLTensor>() == 48);
  assert!(offset_of!(DLTensor, shape) == 24);
  assert!(offset_of!(DLTensor, strides) == 32);
  assert!(offset_of!(DLTensor, byte_offset) == 40);
  assert!(size_of::<DLManagedTensor>() == 64);
  assert!(size_of::<DLManagedTensorVersioned>() == 80);
  assert!(offset_of!(DLManagedTensorVersioned, flags) == 24);
  assert!(offset_of!(DLManagedTensorVersioned, dl_tensor) == 32);
};

#[cfg(test)]
mod tests {
  use super::*;
  use dlpark::ffi as other;

  // The independent implementation: dlpark's bindgen output of the DLPack 1.3 header.
  #[test]
  fn sizes_match_dlpark() {
    assert_eq!(
      size_of::<DLPackVersion>(),
      size_of::<other::DLPackVersion>()
    );
    assert_eq!(size_of::<DLDevice>(), size_of::<other::DLDevice>());
    assert_eq!(size_of::<DLDataType>(), size_of::<other::DLDataType>());
    assert_eq!(size_of::<DLTensor>(), size_of::<other::DLTensor>());
    assert_eq!(
      size_of::<DLManagedTensor>(),
      size_of::<other::DLManagedTensor>()
    );
    assert_eq!(
      size_of::<DLManagedTensorVersioned>(),
      size_of::<other::DLManagedTensorVersioned>()
    );
    assert_eq!(align_of::<DLTensor>(), align_of::<other::DLTensor>());
    assert_eq!(
      align_of::<DLManagedTensorVersioned>(),
      align_of::<other::DLManagedTensorVersioned>()
    );
  }

  #[test]
  fn offsets_match_dlpark() {
    assert_eq!(
      offset_of!(DLPackVersion, minor),
      offset_of!(other::DLPackVersion, minor)
    );
    assert_eq!(
      offset_of!(DLDevice, device_id),
      offset_of!(other::DLDevice, device_id)
    );
    assert_eq!(
      offset_of!(DLDataType, bits),
      offset_of!(other::DLDataType, bits)
    );
    assert_eq!(
      offset_of!(DLDataType, lanes),
      offset_of!(other::DLDataType, lanes)
    );
    assert_eq!(
      offset_of!(DLTensor, device),
      offset_of!(other::DLTensor, device)
    );
    assert_eq!(
      offset_of!(DLTensor, ndim),
      offset_of!(other::DLTensor, ndim)
    );
    assert_eq!(
      offset_of!(DLTensor, dtype),
      offset_of!(other::DLTensor, dtype)
    );
    assert_eq!(
      offset_of!(DLTensor, shape),
      offset_of!(other::DLTensor, shape)
    );
    assert_eq!(
      offset_of!(DLTensor, strides),
      offset_of!(other::DLTensor, strides)
    );
    assert_eq!(
      offset_of!(DLTensor, byte_offset),
      offset_of!(other::DLTensor, byte_offset)
    );
    assert_eq!(
      offset_of!(DLManagedTensor, manager_ctx),
      offset_of!(other::DLManagedTensor, manager_ctx)
    );
    assert_eq!(
      offset_of!(DLManagedTensor, deleter),
      offset_of!(other::DLManagedTensor, deleter)
    );
    assert_eq!(
      offset_of!(DLManagedTensorVersioned, manager_ctx),
      offset_of!(other::DLManagedTensorVersioned, manager_ctx)
    );
    assert_eq!(
      offset_of!(DLManagedTensorVersioned, deleter),
      offset_of!(other::DLManagedTensorVersioned, deleter)
    );
    assert_eq!(
      offset_of!(DLManagedTensorVersioned, flags),
      offset_of!(other::DLManagedTensorVersioned, flags)
    );
    assert_eq!(
      offset_of!(DLManagedTensorVersioned, dl_tensor),
      offset_of!(other::DLManagedTensorVersioned, dl_tensor)
    );
  }

  #[test]
  fn flag_bits_match_dlpark() {
    assert_eq!(
      DLPACK_FLAG_BITMASK_READ_ONLY,
      other::DLPACK_FLAG_BITMASK_READ_ONLY as u64
    );
    assert_eq!(
      DLPACK_FLAG_BITMASK_IS_COPIED,
      other::DLPACK_FLAG_BITMASK_IS_COPIED as u64
    );
    assert_eq!(
      DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED,
      other::DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED as u64
    );
    assert_eq!(DLPACK_MAJOR_VERSION, other::DLPACK_MAJOR_VERSION);
    assert_eq!(DLPACK_MINOR_VERSION, other::DLPACK_MINOR_VERSION);
  }
}
