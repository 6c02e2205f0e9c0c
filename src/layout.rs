//! [`TensorLayout`]: where one tensor's elements lie inside a storage, and its flags. The same
//! facts reach JS as the `TensorLayout` object of `handleInfo` and, on the hot path, as the
//! numbers `handleInfoInto` writes ([`TensorLayout::write_slots`]); `lib/layout.ts` reads them
//! back as its own `TensorLayout`.
//!
//! Everything here is plain data and arithmetic: no Node-API, no memory access.

use std::sync::Arc;

use napi_dlpack::layout::{contiguous_strides, layout_of};
use napi_dlpack::{DType, Device, ErrorKind, ForeignTensor};

use crate::errors::{fail, Result};
use crate::facts::{info_bit, info_slot};

/// The layout of one tensor over a storage, and its flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorLayout {
  pub dtype: DType,
  /// Shared slices, so that a handle made from another (a round trip) copies no dimensions.
  pub shape: Arc<[i64]>,
  /// In elements.
  pub strides: Arc<[i64]>,
  /// Byte offset of the first element from the start of the storage region.
  pub first_byte: usize,
  /// Lowest element offset relative to the first element (≤ 0).
  pub min_offset: i64,
  /// Bytes from the lowest to the end of the highest element.
  pub span_bytes: usize,
  pub numel: usize,
  /// Row-major contiguous.
  pub contiguous: bool,
  pub device: Device,
  /// Exports carry DLPack's READ_ONLY flag; JS gets no writable view (`readonly` in JS).
  pub read_only: bool,
  /// The data is a copy made for this tensor (`isCopy` in JS).
  pub copied: bool,
  /// The DLPack version of the capsule the tensor came from, if versioned.
  pub version: Option<(u32, u32)>,
  /// The DLPack flags of the capsule the tensor came from.
  pub flags: u64,
}

/// Whether `address` is aligned for elements of `dtype` (to their size, at most 8 bytes), as
/// TypedArrays and typed native consumers need.
pub(crate) fn is_aligned(address: usize, dtype: DType) -> bool {
  address.is_multiple_of(dtype.itemsize().min(8))
}

impl TensorLayout {
  /// The layout of a tensor over a host region of `len` bytes at address `base` (an integer:
  /// only used for the alignment check), checking that every element lies inside it.
  /// `first_byte` is the first element's offset in the region; strides in elements (`None`:
  /// row-major).
  pub fn over_region(
    dtype: DType,
    shape: &[i64],
    strides: Option<&[i64]>,
    first_byte: usize,
    base: usize,
    len: usize,
    read_only: bool,
  ) -> Result<TensorLayout> {
    let first_address = base
      .checked_add(first_byte)
      .ok_or_else(|| fail(ErrorKind::InvalidLayout, "offset overflows"))?;
    // An empty tensor fits any region, but its first element's place must still lie in it: a
    // JS view starting past the buffer's end cannot be made (a RangeError later in `.data`).
    if first_byte > len {
      return Err(fail(
        ErrorKind::InvalidLayout,
        format!("the offset ({first_byte} bytes) is past the end of the {len}-byte buffer"),
      ));
    }
    let checked = layout_of(dtype, Device::CPU, shape, strides, first_address)?;
    checked.check_fits_in(first_byte, len)?;
    let strides = match strides {
      Some(strides) => strides.to_vec(),
      None => contiguous_strides(shape)
        .ok_or_else(|| fail(ErrorKind::Overflow, "strides overflow"))?
        .into_vec(),
    };
    Ok(TensorLayout {
      dtype,
      shape: shape.into(),
      strides: strides.into(),
      first_byte,
      min_offset: checked.min_offset(),
      span_bytes: checked.span_bytes(),
      numel: checked.numel(),
      contiguous: checked.is_c_contiguous(),
      device: Device::CPU,
      read_only,
      copied: false,
      version: None,
      flags: 0,
    })
  }

  /// The layout of a view of this tensor over the same storage (any device): `shape` and
  /// `strides` (in elements) from a first element `offset` elements away from this layout's,
  /// checked to lie inside the storage's region of `region_len` bytes from `base` (an integer:
  /// a host or device address, only used for the address-space check). Flags are kept;
  /// `read_only` is added to them. This is the check that makes every view safe to read
  /// through, whatever arithmetic produced it.
  pub fn view(
    &self,
    shape: &[i64],
    strides: &[i64],
    offset: i64,
    base: usize,
    region_len: usize,
    read_only: bool,
  ) -> Result<TensorLayout> {
    let first_byte = i128::from(offset)
      .checked_mul(self.dtype.itemsize() as i128)
      .and_then(|bytes| bytes.checked_add(self.first_byte as i128))
      .and_then(|byte| usize::try_from(byte).ok())
      .filter(|byte| *byte <= region_len)
      .ok_or_else(|| {
        fail(
          ErrorKind::InvalidLayout,
          format!(
            "the view's first element ({offset} elements from the tensor's) lies outside its \
             memory ({region_len} bytes)"
          ),
        )
      })?;
    let first_address = base.wrapping_add(first_byte);
    let checked = layout_of(self.dtype, self.device, shape, Some(strides), first_address)?;
    checked.check_fits_in(first_byte, region_len)?;
    Ok(TensorLayout {
      shape: shape.into(),
      strides: strides.into(),
      first_byte,
      min_offset: checked.min_offset(),
      span_bytes: checked.span_bytes(),
      numel: checked.numel(),
      contiguous: checked.is_c_contiguous(),
      read_only: self.read_only || read_only,
      ..self.clone()
    })
  }

  /// A new row-major tensor on `device` (not read-only, not a copy, no DLPack version).
  pub fn row_major(dtype: DType, shape: &[i64], device: Device) -> Result<TensorLayout> {
    let checked = layout_of(dtype, device, shape, None, 0)?;
    let strides = contiguous_strides(shape)
      .ok_or_else(|| fail(ErrorKind::Overflow, "strides overflow"))?
      .into_vec();
    Ok(TensorLayout {
      dtype,
      shape: shape.into(),
      strides: strides.into(),
      first_byte: 0,
      min_offset: 0,
      span_bytes: checked.span_bytes(),
      numel: checked.numel(),
      contiguous: true,
      device,
      read_only: false,
      copied: false,
      version: None,
      flags: 0,
    })
  }

  /// The layout of a validated foreign tensor over its own span (the storage region of
  /// `Memory::Foreign` starts at the lowest element).
  pub fn of_foreign(tensor: &ForeignTensor) -> TensorLayout {
    let checked = tensor.layout();
    TensorLayout {
      dtype: tensor.dtype(),
      shape: tensor.shape().into(),
      strides: tensor.strides().into(),
      first_byte: checked.first_element() - checked.span_start(),
      min_offset: checked.min_offset(),
      span_bytes: checked.span_bytes(),
      numel: checked.numel(),
      contiguous: checked.is_c_contiguous(),
      device: tensor.device(),
      read_only: tensor.is_read_only(),
      copied: tensor.is_copied(),
      version: tensor.version().map(|v| (v.major, v.minor)),
      flags: tensor.flags(),
    }
  }

  /// This layout over a fresh copy of its span (copied as it is, strides kept) on `device`.
  pub fn relocated(&self, device: Device) -> TensorLayout {
    TensorLayout {
      first_byte: self.first_byte - self.span_start(),
      device,
      read_only: false,
      copied: false,
      version: None,
      flags: 0,
      ..self.clone()
    }
  }

  /// Byte offset, from the storage start, of the lowest-addressed element.
  pub fn span_start(&self) -> usize {
    (self.first_byte as i64 + self.min_offset * self.dtype.itemsize() as i64) as usize
  }

  /// Bytes of a row-major copy of the elements.
  pub fn packed_bytes(&self) -> usize {
    self.numel * self.dtype.itemsize()
  }

  /// Elements from the lowest to the highest one (what `.data` spans).
  pub fn span_elements(&self) -> usize {
    self.span_bytes / self.dtype.itemsize()
  }

  /// Writes the layout as numbers into `slots` (`handleInfoInto`'s Float64Array, at least
  /// `facts::INFO_SLOTS` long), in the slots `facts::info_slot` names (the same names reach
  /// TypeScript through lib/generated/facts.ts). `byte_offset` is the DLPack byte_offset an
  /// export carries (it depends on the storage).
  pub fn write_slots(&self, byte_offset: u64, slots: &mut [f64]) {
    let dtype_index = DType::ALL
      .iter()
      .position(|d| *d == self.dtype)
      .unwrap_or(0);
    let mut bits = 0;
    for (set, bit) in [
      (self.read_only, info_bit::READ_ONLY),
      (self.copied, info_bit::IS_COPY),
      (self.contiguous, info_bit::CONTIGUOUS),
      (self.version.is_some(), info_bit::HAS_VERSION),
    ] {
      if set {
        bits |= bit;
      }
    }
    let (major, minor) = self.version.unwrap_or((0, 0));
    let ndim = self.shape.len();
    slots[info_slot::DTYPE] = dtype_index as f64;
    slots[info_slot::DEVICE_TYPE] = f64::from(self.device.device_type as u32);
    slots[info_slot::DEVICE_ID] = f64::from(self.device.id);
    slots[info_slot::BYTE_OFFSET] = byte_offset as f64;
    slots[info_slot::BITS] = f64::from(bits);
    slots[info_slot::NUMEL] = self.numel as f64;
    slots[info_slot::VIEW_OFFSET] = -self.min_offset as f64;
    slots[info_slot::VIEW_LENGTH] = self.span_elements() as f64;
    slots[info_slot::VERSION_MAJOR] = f64::from(major);
    slots[info_slot::VERSION_MINOR] = f64::from(minor);
    slots[info_slot::FLAGS] = self.flags as f64;
    slots[info_slot::NDIM] = ndim as f64;
    let (shape_slots, rest) = slots[info_slot::SHAPE..].split_at_mut(ndim);
    for (slot, value) in shape_slots.iter_mut().zip(self.shape.iter()) {
      *slot = *value as f64;
    }
    for (slot, value) in rest[..ndim].iter_mut().zip(self.strides.iter()) {
      *slot = *value as f64;
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::facts::INFO_SLOTS;

  #[test]
  fn over_region_row_major() {
    let layout =
      TensorLayout::over_region(DType::Float32, &[2, 3], None, 8, 0x1000, 32, true).unwrap();
    assert_eq!(&*layout.strides, &[3, 1]);
    assert_eq!(layout.numel, 6);
    assert_eq!(layout.span_bytes, 24);
    assert_eq!(layout.span_start(), 8);
    assert_eq!(layout.packed_bytes(), 24);
    assert!(layout.contiguous && layout.read_only && !layout.copied);
  }

  #[test]
  fn over_region_refuses_elements_outside_the_region() {
    // 6 floats from byte 8 end at byte 32: a 31-byte region is one byte short.
    let error =
      TensorLayout::over_region(DType::Float32, &[2, 3], None, 8, 0x1000, 31, false).unwrap_err();
    assert_eq!(error.status, "ERR_DLPACK_INVALID_LAYOUT");
    // A negative stride reaching below the region's start.
    let error = TensorLayout::over_region(DType::Float32, &[3], Some(&[-1]), 4, 0x1000, 64, false)
      .unwrap_err();
    assert_eq!(error.status, "ERR_DLPACK_INVALID_LAYOUT");
  }

  #[test]
  fn negative_strides_span_from_the_lowest_element() {
    // [3] with stride -1, first element at byte 8: elements at bytes 8, 4, 0.
    let layout =
      TensorLayout::over_region(DType::Float32, &[3], Some(&[-1]), 8, 0x1000, 12, false).unwrap();
    assert_eq!(layout.min_offset, -2);
    assert_eq!(layout.span_start(), 0);
    assert_eq!(layout.span_elements(), 3);
    assert!(!layout.contiguous);
    let moved = layout.relocated(Device::CPU);
    assert_eq!(moved.first_byte, 8);
    assert_eq!(moved.span_start(), 0);
  }

  #[test]
  fn views_stay_inside_the_region() {
    // A [4] float32 tensor at byte 4 of a 24-byte region (room for one more element above).
    let source =
      TensorLayout::over_region(DType::Float32, &[4], None, 4, 0x1000, 24, false).unwrap();
    let view = source.view(&[2], &[2], 1, 0x1000, 24, false).unwrap();
    assert_eq!((view.first_byte, view.span_bytes, view.numel), (8, 12, 2));
    assert!(!view.contiguous && !view.read_only);
    // Reversed, from the last element down to byte 4.
    let view = source.view(&[4], &[-1], 3, 0x1000, 24, true).unwrap();
    assert_eq!(
      (view.first_byte, view.min_offset, view.span_start()),
      (16, -3, 4)
    );
    assert!(view.read_only);
    // The last byte of the region is the last one a view may reach...
    source.view(&[1], &[1], 4, 0x1000, 24, false).unwrap();
    // ...and one element further is refused, as is anything below the region.
    for (shape, strides, offset) in [
      (&[1][..], &[1][..], 5),
      (&[2], &[1], 4),
      (&[3], &[-1], 0),
      (&[1], &[1], -2),
      (&[6], &[1], 0),
      (&[2, 2], &[0, 5], 0),
    ] {
      let error = source
        .view(shape, strides, offset, 0x1000, 24, false)
        .unwrap_err();
      assert_eq!(
        error.status, "ERR_DLPACK_INVALID_LAYOUT",
        "{shape:?} {strides:?} {offset}"
      );
    }
    // An empty view fits anywhere inside, but its first element may not lie past the end.
    source.view(&[0], &[1], 5, 0x1000, 24, false).unwrap();
    let error = source.view(&[0], &[1], 6, 0x1000, 24, false).unwrap_err();
    assert_eq!(error.status, "ERR_DLPACK_INVALID_LAYOUT");
    // Read-only stays read-only.
    let read_only =
      TensorLayout::over_region(DType::UInt8, &[4], None, 0, 0x1000, 4, true).unwrap();
    assert!(
      read_only
        .view(&[2], &[1], 0, 0x1000, 4, false)
        .unwrap()
        .read_only
    );
  }

  #[test]
  fn empty_tensors_fit_any_region() {
    let layout =
      TensorLayout::over_region(DType::Float64, &[0, 4], None, 0, 0x1000, 0, false).unwrap();
    assert_eq!(layout.numel, 0);
    assert_eq!(layout.span_bytes, 0);
    // Up to the end of the region, not past it (issue 26: views of it threw RangeErrors).
    TensorLayout::over_region(DType::Float32, &[0], None, 16, 0x1000, 16, false).unwrap();
    let error =
      TensorLayout::over_region(DType::Float32, &[0], None, 40, 0x1000, 16, false).unwrap_err();
    assert_eq!(error.status, "ERR_DLPACK_INVALID_LAYOUT");
  }

  #[test]
  fn alignment_is_to_the_element_size_at_most_eight() {
    assert!(is_aligned(0x1004, DType::Float32));
    assert!(!is_aligned(0x1002, DType::Float32));
    assert!(is_aligned(0x1001, DType::UInt8));
    assert!(is_aligned(0x1008, DType::Complex128));
    assert!(!is_aligned(0x1004, DType::Float64));
  }

  #[test]
  fn row_major_layout() {
    let device = Device::cuda(1);
    let layout = TensorLayout::row_major(DType::Int16, &[4, 5], device).unwrap();
    assert_eq!(&*layout.strides, &[5, 1]);
    assert_eq!(layout.span_bytes, 40);
    assert_eq!(layout.device, device);
    assert!(layout.contiguous && !layout.read_only && !layout.copied);
  }

  #[test]
  fn slots_follow_the_documented_order() {
    let mut layout = TensorLayout::over_region(
      DType::Float32,
      &[2, 3],
      Some(&[1, -2]),
      16,
      0x1000,
      64,
      true,
    )
    .unwrap();
    layout.copied = true;
    layout.version = Some((1, 3));
    layout.flags = 5;
    let mut slots = [f64::NAN; INFO_SLOTS];
    layout.write_slots(7, &mut slots);
    let dtype_index = DType::ALL
      .iter()
      .position(|d| *d == DType::Float32)
      .unwrap();
    assert_eq!(
      slots[..16],
      [
        dtype_index as f64,
        1.0,  // kDLCPU
        0.0,  // device id
        7.0,  // byte_offset
        11.0, // read-only | copied | has version (not contiguous)
        6.0,
        4.0, // view offset: -min_offset
        6.0, // view length: offsets -4..=1
        1.0,
        3.0,
        5.0,
        2.0,
        2.0, // shape
        3.0,
        1.0, // strides
        -2.0,
      ]
    );
    assert!(slots[16].is_nan(), "nothing past ndim's strides is written");
  }
}
