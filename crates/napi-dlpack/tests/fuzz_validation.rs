//! Randomised validation: hundreds of thousands of hostile `DLTensor` descriptors (extreme
//! dimensions, strides, offsets, dtypes, devices). Validation must never panic (debug builds
//! check every arithmetic overflow), whatever it accepts must satisfy the invariants the rest of
//! the crate relies on, and its verdict on the layout must agree with an independent reference
//! computed in 128-bit arithmetic, which cannot overflow. The data pointer is never
//! dereferenced by validation, so it can point anywhere.

mod common;

use common::{count, import_versioned, Spec};
use napi_dlpack::ffi::{
  DLDataType, DLDevice, DLTensor, DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED,
};
use napi_dlpack::validation::validate;
use napi_dlpack::{DType, Device, ErrorKind};

/// The layout facts the reference computes: element count and the lowest and highest element
/// offsets (in elements, relative to the first element).
#[derive(Debug, PartialEq, Eq)]
struct Extent {
  numel: i128,
  min_offset: i128,
  max_offset: i128,
}

/// The reference: what validation must decide about the layout of a tensor whose dtype,
/// device, ndim and pointers are valid, written from the rules alone, in i128 (no product or
/// sum of two i64 values can overflow it). `None`: the layout must be refused (a negative
/// dimension, or a count, extent, span or address that does not fit).
fn reference_extent(
  shape: &[i64],
  strides: Option<&[i64]>,
  itemsize: i128,
  data: u64,
  byte_offset: u64,
  address_device: bool,
) -> Option<Extent> {
  let first = i128::from(data) + i128::from(byte_offset);
  if first > i128::from(u64::MAX) {
    return None;
  }
  if shape.iter().any(|&dim| dim < 0) {
    return None;
  }
  // The element count is computed left to right in i64: every prefix product must fit (a
  // later zero dimension does not excuse an earlier overflow).
  let mut numel = 1i128;
  for &dim in shape {
    numel *= i128::from(dim);
    if numel > i128::from(i64::MAX) {
      return None;
    }
  }
  if numel == 0 {
    // Nothing is addressed: strides, data and offsets are not looked at.
    return Some(Extent {
      numel,
      min_offset: 0,
      max_offset: 0,
    });
  }
  let (min_offset, max_offset) = match strides {
    None => (0, numel - 1),
    Some(strides) => shape
      .iter()
      .zip(strides)
      .map(|(&dim, &stride)| (i128::from(dim) - 1) * i128::from(stride))
      .fold((0i128, 0i128), |(low, high), reach| {
        (low + reach.min(0), high + reach.max(0))
      }),
  };
  // Offsets are i64 in the layout.
  if min_offset < i128::from(i64::MIN) || max_offset > i128::from(i64::MAX) {
    return None;
  }
  let span = (max_offset - min_offset + 1) * itemsize;
  if span > isize::MAX as i128 {
    return None;
  }
  // On devices whose `data` is an address, every byte from the lowest element to the end of
  // the highest must be an address: no wrap below 0, and the end fits in a usize.
  if address_device
    && (first + min_offset * itemsize < 0
      || first + (max_offset + 1) * itemsize > usize::MAX as i128)
  {
    return None;
  }
  Some(Extent {
    numel,
    min_offset,
    max_offset,
  })
}

/// xorshift64*: deterministic, so a failure reproduces.
struct Rng(u64);

impl Rng {
  fn next(&mut self) -> u64 {
    self.0 ^= self.0 >> 12;
    self.0 ^= self.0 << 25;
    self.0 ^= self.0 >> 27;
    self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
  }

  fn below(&mut self, n: u64) -> u64 {
    self.next() % n
  }

  /// Mostly small values, sometimes the edges of i64.
  fn dim_or_stride(&mut self) -> i64 {
    match self.below(10) {
      0 => i64::MAX - self.below(3) as i64,
      1 => i64::MIN + self.below(3) as i64,
      2 => -(self.below(8) as i64),
      3 => 1 << self.below(63),
      _ => self.below(9) as i64,
    }
  }

  /// A dimension and stride whose reach, (dim - 1) * stride, is exactly ±2^64: it wraps to 0
  /// in 64-bit arithmetic, so a validation that lost the overflow would accept the tensor as
  /// a small one (shape [2^32 + 1], stride 2^32 is the classic case).
  fn wrapping_pair(&mut self) -> (i64, i64) {
    let k = 2 + self.below(61); // 2..=62, so both 2^k and 2^(64-k) fit in an i64
    let stride = 1i64 << (64 - k);
    (
      (1i64 << k) + 1,
      if self.below(2) == 0 { stride } else { -stride },
    )
  }
}

#[test]
fn hostile_descriptors_never_panic_and_accepted_ones_are_consistent() {
  let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
  let mut accepted = 0;
  let mut refused_layouts = 0;
  // Under Miri (about 10 000 times slower) a smaller sample still checks the unsafe reads.
  let cases = if cfg!(miri) { 6_000 } else { 300_000 };
  for _ in 0..cases {
    let ndim = match rng.below(8) {
      0 => rng.below(70) as i32,
      1 => -(rng.below(3) as i32) - 1,
      _ => rng.below(5) as i32,
    };
    let len = ndim.clamp(0, 70) as usize;
    let mut shape: Vec<i64> = (0..len).map(|_| rng.dim_or_stride()).collect();
    let mut strides: Vec<i64> = (0..len).map(|_| rng.dim_or_stride()).collect();
    if len > 0 && rng.below(4) == 0 {
      let axis = rng.below(len as u64) as usize;
      (shape[axis], strides[axis]) = rng.wrapping_pair();
    }
    let data = match rng.below(4) {
      0 => 0usize,
      1 => usize::MAX - rng.below(64) as usize,
      _ => 0x1000_0000 + rng.below(1 << 20) as usize,
    };
    let tensor = DLTensor {
      data: data as *mut _,
      device: DLDevice {
        device_type: rng.below(20) as u32,
        device_id: rng.below(4) as i32 - 1,
      },
      ndim,
      dtype: DLDataType {
        code: rng.below(19) as u8,
        bits: [1, 4, 6, 8, 16, 32, 64, 128, 255][rng.below(9) as usize],
        lanes: if rng.below(8) == 0 { 2 } else { 1 },
      },
      shape: if rng.below(16) == 0 {
        std::ptr::null_mut()
      } else {
        shape.as_mut_ptr()
      },
      strides: if rng.below(4) == 0 {
        std::ptr::null_mut()
      } else {
        strides.as_mut_ptr()
      },
      byte_offset: match rng.below(4) {
        0 => u64::MAX - rng.below(8),
        1 => rng.below(1 << 40),
        _ => rng.below(64),
      },
    };
    let flags = if rng.below(2) == 0 {
      DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED
    } else {
      0
    };
    // SAFETY: shape and strides point at `len` readable i64s (or are NULL); `len >= ndim` when
    // ndim > 0. Validation reads nothing else.
    let verdict = unsafe { validate(&tensor, flags) };
    // The reference, for tensors whose dtype, device and pointers passed: then the layout
    // decides, and validation's verdict on it must be the reference's.
    let reference = || {
      let itemsize = DType::from_dl(tensor.dtype, flags)
        .expect("the dtype was accepted")
        .itemsize();
      let address_device = Device::from_dl(tensor.device)
        .expect("the device was accepted")
        .device_type
        .data_is_address();
      let ndim = usize::try_from(ndim).expect("ndim was accepted");
      let strides = (!tensor.strides.is_null()).then(|| &strides[..ndim]);
      reference_extent(
        &shape[..ndim],
        strides,
        itemsize as i128,
        data as u64,
        tensor.byte_offset,
        address_device,
      )
    };
    let layout = match verdict {
      Ok(layout) => layout,
      Err(error) => {
        match error.kind() {
          ErrorKind::Shape | ErrorKind::Overflow | ErrorKind::ByteOffset => {
            refused_layouts += 1;
            let expected = reference();
            assert!(
              expected.is_none(),
              "refused ({}) a layout the reference accepts: shape {:?} strides {:?} {:?}",
              error.code(),
              &shape[..ndim as usize],
              (!tensor.strides.is_null()).then(|| &strides[..ndim as usize]),
              expected
            );
          }
          ErrorKind::NullData => {
            let expected = reference().expect("NULL data is checked after the layout");
            assert!(expected.numel > 0 && tensor.data.is_null());
          }
          _ => {}
        }
        continue;
      }
    };
    accepted += 1;
    let expected = reference().unwrap_or_else(|| {
      panic!(
        "accepted a layout the reference refuses: shape {:?} strides {:?} data {data:#x} byte_offset {}",
        &shape[..ndim as usize],
        (!tensor.strides.is_null()).then(|| &strides[..ndim as usize]),
        tensor.byte_offset
      )
    });
    assert_eq!(
      Extent {
        numel: layout.numel() as i128,
        min_offset: layout.min_offset().into(),
        max_offset: layout.max_offset().into(),
      },
      expected,
      "shape {:?} strides {:?}",
      &shape[..ndim as usize],
      (!tensor.strides.is_null()).then(|| &strides[..ndim as usize]),
    );
    // Invariants of an accepted layout.
    let numel: i128 = shape
      .iter()
      .take(layout.ndim())
      .map(|&d| i128::from(d))
      .product();
    assert_eq!(layout.numel() as i128, numel);
    assert!(layout.min_offset() <= 0 && layout.max_offset() >= 0);
    let itemsize = layout.dtype().itemsize() as i128;
    if layout.numel() == 0 {
      assert_eq!(layout.span_bytes(), 0);
    } else {
      let span = (i128::from(layout.max_offset()) - i128::from(layout.min_offset()) + 1) * itemsize;
      assert_eq!(layout.span_bytes() as i128, span);
      assert!(span <= isize::MAX as i128);
      assert!(!tensor.data.is_null());
      if layout.device().device_type.data_is_address() {
        let first = layout.first_element() as i128;
        assert!(first + i128::from(layout.min_offset()) * itemsize >= 0);
        assert!(first + (i128::from(layout.max_offset()) + 1) * itemsize <= usize::MAX as i128 + 1);
      }
    }
    assert_eq!(
      layout.first_element() as u128,
      data as u128 + u128::from(tensor.byte_offset)
    );
  }
  // The generator must exercise the accepting path too, not only rejections, and reach the
  // layout checks often enough for the reference to matter.
  assert!(
    accepted > cases / 300,
    "only {accepted} descriptors were accepted"
  );
  assert!(
    refused_layouts > cases / 100,
    "only {refused_layouts} layouts were refused"
  );
}

/// Randomised strided reads: small tensors over real memory, with negative, zero and large
/// strides, and size-1 dimensions carrying any stride (`i64::MAX`, `i64::MIN`, ...: they never
/// move, so they must never be added). Every element read through `view().iter()`, `to_vec`
/// and `get` must be the one an i128 reference computes, and nothing may overflow.
#[test]
fn strided_reads_match_a_reference_on_random_layouts() {
  let mut rng = Rng(0x5eed_0f57_121d_e5a1);
  let cases = if cfg!(miri) { 150 } else { 20_000 };
  let extreme = [
    i64::MAX,
    i64::MIN,
    i64::MAX - 1,
    i64::MIN + 1,
    1 << 62,
    -(1 << 62),
  ];
  for _ in 0..cases {
    let ndim = rng.below(5) as usize;
    let shape: Vec<i64> = (0..ndim)
      .map(|_| {
        if rng.below(12) == 0 {
          0
        } else {
          1 + rng.below(4) as i64
        }
      })
      .collect();
    let strides: Vec<i64> = shape
      .iter()
      .map(|&dim| {
        if dim == 1 && rng.below(2) == 0 {
          extreme[rng.below(extreme.len() as u64) as usize]
        } else {
          rng.below(9) as i64 - 4
        }
      })
      .collect();
    // The reference: the offset of every element in row-major order, in i128.
    let numel: usize = shape.iter().map(|&d| d as usize).product();
    let index_of = |mut flat: usize| -> Vec<usize> {
      let mut index = vec![0; ndim];
      for axis in (0..ndim).rev() {
        index[axis] = flat % shape[axis] as usize;
        flat /= shape[axis] as usize;
      }
      index
    };
    let offset_of = |index: &[usize]| -> i128 {
      index
        .iter()
        .zip(&strides)
        .map(|(&i, &stride)| i as i128 * i128::from(stride))
        .sum()
    };
    let offsets: Vec<i128> = (0..numel).map(|flat| offset_of(&index_of(flat))).collect();
    let lowest = offsets.iter().copied().min().unwrap_or(0).min(0);
    let highest = offsets.iter().copied().max().unwrap_or(0).max(0);
    // Memory: element k of the span (from the lowest element) holds the value k.
    let span = usize::try_from(highest - lowest + 1).unwrap();
    let mut spec = Spec::f32(&[1]).strides(&strides);
    spec.shape = shape.clone();
    spec.data = vec![0; span.div_ceil(2)];
    for k in 0..span {
      spec.data[k / 2] |= u64::from((k as f32).to_bits()) << (32 * (k % 2));
    }
    spec.byte_offset = u64::try_from(-lowest * 4).unwrap();
    let expected: Vec<f32> = offsets.iter().map(|&o| (o - lowest) as f32).collect();

    let (result, calls) = import_versioned(spec);
    let tensor =
      result.unwrap_or_else(|code| panic!("{code}: shape {shape:?} strides {strides:?}"));
    let view = tensor.view::<f32>().unwrap();
    assert_eq!(
      view.iter().collect::<Vec<_>>(),
      expected,
      "shape {shape:?} strides {strides:?}"
    );
    assert_eq!(
      tensor.to_vec::<f32>().unwrap(),
      expected,
      "shape {shape:?} strides {strides:?}"
    );
    for (flat, &value) in expected.iter().enumerate() {
      assert_eq!(view.get(&index_of(flat)), Some(value));
    }
    if ndim > 0 {
      let mut outside = vec![0; ndim];
      let axis = rng.below(ndim as u64) as usize;
      outside[axis] = shape[axis] as usize;
      assert_eq!(
        view.get(&outside),
        None,
        "index {outside:?} of shape {shape:?}"
      );
    }
    drop(tensor);
    assert_eq!(count(&calls), 1);
  }
}
