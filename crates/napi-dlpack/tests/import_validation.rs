//! Untrusted import: every malformed case is rejected with its stable code, and the producer's
//! deleter runs exactly once on every path.

mod common;

use common::*;
use napi_dlpack::ffi::*;
use napi_dlpack::{DType, DeviceType, ForeignTensor, ManagedTensor, MAX_NDIM};

fn rejected(spec: Spec) -> &'static str {
  let (result, calls) = import_versioned(spec);
  let code = result.expect_err("malformed tensor accepted");
  assert_eq!(
    count(&calls),
    1,
    "deleter must run exactly once on rejection ({code})"
  );
  code
}

#[test]
fn newer_major_version_is_rejected_and_only_the_deleter_runs() {
  let mut spec = Spec::f32(&[4]);
  spec.version = DLPackVersion { major: 2, minor: 0 };
  // Poison everything after `flags`: if the consumer read it, validation would fail with
  // another code (or crash on the NULL shape).
  spec.ndim = Some(-7);
  spec.null_shape = true;
  spec.dtype = DLDataType {
    code: 200,
    bits: 0,
    lanes: 0,
  };
  assert_eq!(rejected(spec), "ERR_DLPACK_VERSION");

  let mut spec = Spec::f32(&[4]);
  spec.version = DLPackVersion { major: 0, minor: 8 };
  assert_eq!(rejected(spec), "ERR_DLPACK_VERSION");
}

/// DLPack lets a struct of another major be only as long as the prefix every major keeps
/// (`version`, `manager_ctx`, `deleter`): nothing past it may be read, nor may a reference to the
/// whole struct be made, before the major is known to be 1. The producer here allocates exactly
/// that prefix, so Miri (`npm run test:miri`) reports any access, or any reference to the full
/// 80-byte struct, reaching past it: in `version()`, `flags()`, `take_owner` or the refusal.
#[test]
fn another_major_allocated_as_the_prefix_only_is_refused_reading_only_the_prefix() {
  assert_eq!(PrefixOnly::SIZE, 3 * std::mem::size_of::<usize>());
  for major in [0, 2, u32::MAX] {
    let (ptr, calls) = PrefixOnly::make(major);
    // SAFETY: the prefix is readable and ownership moves in.
    let managed = unsafe { ManagedTensor::from_raw_versioned(ptr) }.unwrap();
    assert_eq!(managed.version(), Some(DLPackVersion { major, minor: 0 }));
    assert_eq!(
      managed.flags(),
      0,
      "the flags of another major are not read"
    );
    let managed = napi_dlpack::take_owner::<Vec<f32>>(managed).expect_err("not one of our exports");
    assert_eq!(count(&calls), 0);
    let err = ForeignTensor::new(managed).unwrap_err();
    assert_eq!(err.code(), "ERR_DLPACK_VERSION");
    assert_eq!(
      count(&calls),
      1,
      "refused, and released through the prefix's deleter"
    );
  }
  let (ptr, calls) = PrefixOnly::make(2);
  // SAFETY: as above.
  let err = unsafe { ForeignTensor::from_raw_versioned(ptr) }.unwrap_err();
  assert_eq!(err.code(), "ERR_DLPACK_VERSION");
  assert_eq!(count(&calls), 1);
}

#[test]
fn newer_minor_version_is_accepted() {
  let mut spec = Spec::f32(&[4]);
  spec.version = DLPackVersion {
    major: 1,
    minor: 99,
  };
  let (result, calls) = import_versioned(spec);
  let tensor = result.expect("minor bump accepted");
  assert_eq!(
    tensor.version(),
    Some(DLPackVersion {
      major: 1,
      minor: 99
    })
  );
  drop(tensor);
  assert_eq!(count(&calls), 1);
}

#[test]
fn ndim_out_of_range() {
  let mut spec = Spec::f32(&[4]);
  spec.ndim = Some(-1);
  assert_eq!(rejected(spec), "ERR_DLPACK_NDIM");
  let mut spec = Spec::f32(&vec![1; MAX_NDIM + 1]);
  spec.ndim = Some(MAX_NDIM as i32 + 1);
  assert_eq!(rejected(spec), "ERR_DLPACK_NDIM");
}

#[test]
fn null_shape_with_dimensions() {
  let mut spec = Spec::f32(&[2, 2]);
  spec.null_shape = true;
  assert_eq!(rejected(spec), "ERR_DLPACK_NULL_SHAPE");
}

#[test]
fn negative_dimension() {
  assert_eq!(rejected(Spec::f32(&[2, -3])), "ERR_DLPACK_SHAPE");
}

#[test]
fn element_count_overflow() {
  let mut spec = Spec::f32(&[1]);
  spec.shape = vec![1 << 40, 1 << 40];
  spec.strides = Some(vec![1 << 40, 1]);
  assert_eq!(rejected(spec), "ERR_DLPACK_OVERFLOW");
}

#[test]
fn byte_span_overflow() {
  let mut spec = Spec::f32(&[1]);
  spec.shape = vec![2, 2];
  spec.strides = Some(vec![i64::MAX / 2, 1]);
  assert_eq!(rejected(spec), "ERR_DLPACK_OVERFLOW");
  let mut spec = Spec::f32(&[1]);
  spec.shape = vec![1 << 62];
  spec.strides = Some(vec![1]);
  assert_eq!(rejected(spec), "ERR_DLPACK_OVERFLOW"); // 2^62 * 4 bytes
}

/// The extent of a strided dimension, (dim - 1) * stride, and the sum of the extents, overflow
/// i64 although the element count does not. Shape [2^32 + 1] with stride 2^32 reaches 2^64
/// elements, which wraps to 0 in 64-bit arithmetic: a validation that lost the overflow would
/// accept it as a one-element span and let views read 2^32 elements past it.
#[test]
fn stride_extent_overflow() {
  let wraps = (1i64 << 32) + 1;
  for (shape, strides) in [
    (vec![wraps], vec![1i64 << 32]),
    (vec![wraps], vec![-(1i64 << 32)]),
    (vec![2, wraps], vec![1, 1i64 << 32]),
    (vec![(1 << 2) + 1], vec![1i64 << 62]),
    (vec![3], vec![i64::MAX / 2 + 1]),
    (vec![3], vec![i64::MIN / 2]),
    // each extent fits, their sum does not
    (vec![2, 2], vec![1i64 << 62, 1i64 << 62]),
    (vec![2, 2], vec![i64::MIN / 2, i64::MIN / 2 - 1]),
  ] {
    // Descriptor only: the data is never reached, so a small buffer stands in for it.
    let mut spec = Spec::f32(&[1]).strides(&strides);
    spec.shape = shape.clone();
    let (result, calls) = import_versioned(spec);
    assert_eq!(
      result.err(),
      Some("ERR_DLPACK_OVERFLOW"),
      "shape {shape:?} strides {strides:?}"
    );
    assert_eq!(count(&calls), 1);
  }
  // Large extents that fit are legal (the address range permitting): the refusals above are
  // the overflow, not the size.
  let layout = |shape: &[i64], strides: &[i64]| {
    napi_dlpack::layout::layout_of(
      DType::Int8,
      napi_dlpack::Device::CPU,
      shape,
      Some(strides),
      0,
    )
  };
  let fits = layout(&[(1 << 30) + 1], &[1 << 32]).expect("an extent of 2^62 fits");
  assert_eq!((fits.min_offset(), fits.max_offset()), (0, 1 << 62));
  assert_eq!(fits.span_bytes(), (1 << 62) + 1);
  assert_eq!(
    layout(&[wraps], &[1 << 32]).unwrap_err().code(),
    "ERR_DLPACK_OVERFLOW"
  );
}

#[test]
fn byte_offset_overflowing_the_address_space() {
  let mut spec = Spec::f32(&[2]);
  spec.byte_offset = u64::MAX - 2;
  assert_eq!(rejected(spec), "ERR_DLPACK_BYTE_OFFSET");
  // A negative stride that walks below address 0.
  let mut spec = Spec::f32(&[8]);
  spec.strides = Some(vec![-1]);
  spec.data_address = Some(8);
  assert_eq!(rejected(spec), "ERR_DLPACK_BYTE_OFFSET");
}

#[test]
fn null_data_with_elements() {
  let mut spec = Spec::f32(&[3]);
  spec.null_data = true;
  assert_eq!(rejected(spec), "ERR_DLPACK_NULL_DATA");
}

#[test]
fn null_data_without_elements_is_fine() {
  for shape in [vec![0], vec![0, 3], vec![1, 8, 0, 128]] {
    let mut spec = Spec::f32(&shape);
    spec.null_data = true;
    // Garbage strides on a zero-size tensor are harmless: nothing can be addressed.
    spec.strides = Some(vec![12345; shape.len()]);
    let (result, calls) = import_versioned(spec);
    let tensor = result.expect("zero-size tensor with NULL data");
    assert_eq!(tensor.numel(), 0);
    assert_eq!(tensor.span_bytes(), 0);
    assert!(tensor.is_contiguous());
    assert_eq!(tensor.as_slice::<f32>().unwrap(), &[] as &[f32]);
    assert_eq!(tensor.to_vec::<f32>().unwrap(), Vec::<f32>::new());
    drop(tensor);
    assert_eq!(count(&calls), 1);
  }
}

#[test]
fn dtype_errors() {
  let bad = [
    DLDataType {
      code: 2,
      bits: 32,
      lanes: 2,
    },
    DLDataType {
      code: 6,
      bits: 1,
      lanes: 1,
    },
    DLDataType {
      code: 5,
      bits: 32,
      lanes: 1,
    },
    DLDataType {
      code: 18,
      bits: 8,
      lanes: 1,
    },
    DLDataType {
      code: 16,
      bits: 6,
      lanes: 1,
    }, // fp6 without the padded flag
  ];
  for dtype in bad {
    let mut spec = Spec::f32(&[2]);
    spec.dtype = dtype;
    assert_eq!(rejected(spec), "ERR_DLPACK_DTYPE", "{dtype:?}");
  }
  // ... and fp6 with the padded flag is accepted, one byte per element.
  let mut spec = Spec::f32(&[5]);
  spec.dtype = DLDataType {
    code: 16,
    bits: 6,
    lanes: 1,
  };
  spec.flags = DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED;
  let (result, _calls) = import_versioned(spec);
  let tensor = result.unwrap();
  assert_eq!(tensor.dtype(), DType::Float6E3M2Fn);
  assert_eq!(tensor.span_bytes(), 5);
}

#[test]
fn legacy_tensors_cannot_carry_subbyte_types() {
  let mut spec = Spec::f32(&[2]);
  spec.dtype = DLDataType {
    code: 17,
    bits: 4,
    lanes: 1,
  };
  let (result, calls) = import_legacy(spec);
  assert_eq!(result.unwrap_err(), "ERR_DLPACK_DTYPE");
  assert_eq!(count(&calls), 1);
}

#[test]
fn unknown_device_type_or_negative_id() {
  for device in [
    DLDevice {
      device_type: 0,
      device_id: 0,
    },
    DLDevice {
      device_type: 5,
      device_id: 0,
    },
    DLDevice {
      device_type: 19,
      device_id: 0,
    },
    DLDevice {
      device_type: 2,
      device_id: -3,
    },
  ] {
    let mut spec = Spec::f32(&[2]);
    spec.device = device;
    assert_eq!(rejected(spec), "ERR_DLPACK_DEVICE", "{device:?}");
  }
}

#[test]
fn every_known_device_type_imports() {
  for device_type in DeviceType::ALL {
    let mut spec = Spec::f32(&[2]);
    spec.device = DLDevice {
      device_type: device_type as u32,
      device_id: 1,
    };
    let (result, calls) = import_versioned(spec);
    let tensor = result.unwrap();
    assert_eq!(tensor.device().device_type, device_type);
    let host = tensor.as_slice::<f32>();
    if device_type.is_host_accessible() {
      assert!(host.is_ok());
    } else {
      assert_eq!(host.unwrap_err().code(), "ERR_DLPACK_NOT_CPU");
    }
    drop(tensor);
    assert_eq!(count(&calls), 1);
  }
}

/// Without the check the misaligned shape would reach `slice::from_raw_parts`, whose debug
/// precondition aborts the process: the test runs in a child, so that is an assertion here.
#[test]
fn misaligned_shape_pointer_is_rejected() {
  in_child_process("misaligned_shape_pointer_is_rejected", || {
    for shift in [1, 4] {
      let (ptr, calls) = versioned(Spec::f32(&[2, 2]).strides(&[2, 1]));
      // SAFETY: we still own `ptr`; the shape is copied `shift` bytes further into a buffer we
      // keep alive, so the pointer stays readable.
      let mut moved = vec![0u64; 3];
      unsafe {
        let target = moved.as_mut_ptr().cast::<u8>().add(shift).cast::<i64>();
        target.write_unaligned(2);
        target.add(1).write_unaligned(2);
        (*ptr).dl_tensor.shape = target;
      }
      // SAFETY: ownership handed over.
      let err = unsafe { ForeignTensor::from_raw_versioned(ptr) }.unwrap_err();
      assert_eq!(
        err.code(),
        "ERR_DLPACK_INVALID_LAYOUT",
        "shape shifted by {shift}"
      );
      assert_eq!(count(&calls), 1);
    }
  });
}

/// As for the shape: a misaligned strides pointer is refused before it is read as a slice.
#[test]
fn misaligned_strides_pointer_is_rejected() {
  in_child_process("misaligned_strides_pointer_is_rejected", || {
    for shift in [1, 4] {
      let (ptr, calls) = versioned(Spec::f32(&[2, 2]).strides(&[2, 1]));
      let mut moved = vec![0u64; 3];
      // SAFETY: as in `misaligned_shape_pointer_is_rejected`, for the strides.
      unsafe {
        let target = moved.as_mut_ptr().cast::<u8>().add(shift).cast::<i64>();
        target.write_unaligned(2);
        target.add(1).write_unaligned(1);
        (*ptr).dl_tensor.strides = target;
      }
      // SAFETY: ownership handed over.
      let err = unsafe { ForeignTensor::from_raw_versioned(ptr) }.unwrap_err();
      assert_eq!(
        err.code(),
        "ERR_DLPACK_INVALID_LAYOUT",
        "strides shifted by {shift}"
      );
      assert_eq!(count(&calls), 1);
    }
  });
}

#[test]
fn misaligned_managed_struct_is_refused_after_its_deleter_runs() {
  // Offset 4 first: without the alignment check such a struct would import (an assertion
  // failure below, not a crash); offset 1 is what a careless producer most likely hands over.
  for offset in [4, 1] {
    let mut producer = Misaligned::at_offset(offset);
    // SAFETY: the struct is readable; its ownership is handed over.
    let result = unsafe { ForeignTensor::from_raw_versioned(producer.versioned()) };
    assert_eq!(
      result.err().map(|e| e.code()),
      Some("ERR_DLPACK_MISALIGNED")
    );
    assert_eq!(
      count(&producer.calls),
      1,
      "one deleter call (offset {offset})"
    );
    // SAFETY: as above, for the legacy struct.
    let result = unsafe { ForeignTensor::from_raw_legacy(producer.legacy()) };
    assert_eq!(
      result.err().map(|e| e.code()),
      Some("ERR_DLPACK_MISALIGNED")
    );
    assert_eq!(
      count(&producer.calls),
      2,
      "one deleter call (offset {offset})"
    );
  }
}

#[test]
fn null_pointer_is_rejected_without_a_deleter() {
  // SAFETY: NULL is explicitly allowed and rejected.
  let err = unsafe { ForeignTensor::from_raw_versioned(std::ptr::null_mut()) }.unwrap_err();
  assert_eq!(err.code(), "ERR_DLPACK_NULL_TENSOR");
  // SAFETY: as above.
  let err = unsafe { ForeignTensor::from_raw_legacy(std::ptr::null_mut()) }.unwrap_err();
  assert_eq!(err.code(), "ERR_DLPACK_NULL_TENSOR");
}

#[test]
fn null_deleter_is_tolerated() {
  let (ptr, calls) = versioned(Spec::f32(&[2]));
  // SAFETY: we own `ptr`; remember the context to free it ourselves afterwards.
  let deleter = unsafe { (*ptr).deleter.take() };
  // SAFETY: ownership handed over.
  let tensor = unsafe { ForeignTensor::from_raw_versioned(ptr) }.unwrap();
  drop(tensor); // nothing to call
  assert_eq!(count(&calls), 0);
  // SAFETY: the tensor is still alive (no deleter ran); free it with the real deleter.
  unsafe { deleter.unwrap()(ptr) };
  assert_eq!(count(&calls), 1);
}

#[test]
fn null_strides_mean_row_major() {
  for (spec, versioned_struct) in [
    (Spec::f32(&[2, 3, 4]), true),
    (Spec::f32(&[2, 3, 4]), false),
  ] {
    let (result, calls) = if versioned_struct {
      import_versioned(spec)
    } else {
      import_legacy(spec)
    };
    let tensor = result.unwrap();
    assert!(tensor.strides_were_null());
    assert_eq!(tensor.strides(), &[12, 4, 1]);
    assert!(tensor.is_contiguous());
    assert_eq!(tensor.span_bytes(), 24 * 4);
    drop(tensor);
    assert_eq!(count(&calls), 1);
  }
}

/// NULL strides behind a zero dimension: the synthesised strides follow the export's rule
/// (every stored stride checked, the unstored product over the whole shape may overflow).
#[test]
fn null_strides_of_an_empty_tensor_with_huge_dimensions() {
  let huge = 1i64 << 62;
  for (shape, expected) in [
    (vec![huge, 0, 4], Ok(vec![4, 4, 1])),
    (vec![0, 2, huge, 4], Err("ERR_DLPACK_OVERFLOW")),
  ] {
    let (result, calls) = import_legacy(Spec::f32(&shape));
    match expected {
      Ok(strides) => {
        let tensor = result.expect("strides fit");
        assert_eq!(tensor.strides(), strides.as_slice());
        assert_eq!(tensor.numel(), 0);
        drop(tensor);
      }
      Err(code) => assert_eq!(result.err(), Some(code)),
    }
    assert_eq!(count(&calls), 1);
  }
}

#[test]
fn size_one_dimensions_never_break_contiguity() {
  // Shape (1, 77) with strides (77, 1) and (1, 1); column vector (1024, 1) with strides (1, 1024).
  for (shape, strides) in [
    (vec![1, 77], vec![77, 1]),
    (vec![1, 77], vec![1, 1]),
    (vec![1, 77], vec![9999, 1]),
    (vec![1024, 1], vec![1, 1024]),
    (vec![1, 1, 1], vec![0, -5, 3]),
    (vec![1], vec![0]),
  ] {
    let (result, _calls) = import_versioned(Spec::f32(&shape).strides(&strides));
    let tensor = result.unwrap();
    assert!(tensor.is_contiguous(), "{shape:?} {strides:?}");
    // Strides are reported as given, never normalised.
    assert_eq!(tensor.strides(), &strides[..]);
  }
}

#[test]
fn negative_and_zero_strides_compute_the_extent_from_min_and_max() {
  // Reverse a row of 8: first element at the end of the buffer.
  let mut spec = Spec::f32(&[8]).strides(&[-1]);
  spec.byte_offset = 7 * 4;
  let (result, _calls) = import_versioned(spec);
  let tensor = result.unwrap();
  assert_eq!(tensor.layout().min_offset(), -7);
  assert_eq!(tensor.layout().max_offset(), 0);
  assert_eq!(tensor.span_bytes(), 32);
  assert!(!tensor.is_contiguous());
  assert_eq!(
    tensor.as_slice::<f32>().unwrap_err().code(),
    "ERR_DLPACK_NOT_CONTIGUOUS"
  );

  // A broadcast (stride 0) dimension.
  let (result, _calls) = import_versioned(Spec::f32(&[5, 3]).strides(&[0, 1]));
  let tensor = result.unwrap();
  assert_eq!(tensor.span_bytes(), 12);
  assert!(!tensor.is_contiguous());
}

#[test]
fn byte_offset_is_applied() {
  let mut spec = Spec::f32(&[2]);
  let base = spec.data.as_ptr() as usize;
  spec.byte_offset = 16;
  let (result, _calls) = import_versioned(spec);
  let tensor = result.unwrap();
  assert_eq!(tensor.data_ptr() as usize, base + 16);
  assert_eq!(tensor.raw_data() as usize, base);
  assert_eq!(tensor.byte_offset(), 16);
}

/// Every typed access refuses data that is not aligned for its element type. The strided view
/// is asked first: it reads nothing when it is made, so without the check it would be handed
/// out and the assertion fails (the slice conversions would instead trip the standard
/// library's debug precondition and abort the process).
#[test]
fn misaligned_elements_are_refused_for_typed_access() {
  for (shape, strides) in [(vec![2i64], vec![1i64]), (vec![2, 2], vec![1, 2])] {
    let mut spec = Spec::f32(&shape).strides(&strides);
    spec.byte_offset = 2;
    let (result, calls) = import_versioned(spec);
    let mut tensor = result.unwrap();
    let misaligned = Some("ERR_DLPACK_MISALIGNED");
    assert_eq!(
      tensor.view::<f32>().err().map(|e| e.code()),
      misaligned,
      "view {shape:?}"
    );
    assert_eq!(
      tensor.to_vec::<f32>().err().map(|e| e.code()),
      misaligned,
      "to_vec {shape:?}"
    );
    assert_eq!(
      tensor.as_slice::<f32>().err().map(|e| e.code()),
      misaligned,
      "as_slice {shape:?}"
    );
    assert_eq!(
      tensor.as_mut_slice::<f32>().err().map(|e| e.code()),
      misaligned,
      "as_mut_slice {shape:?}"
    );
    drop(tensor);
    assert_eq!(count(&calls), 1);
  }
}

/// Bytes other than 0 and 1 are not `bool`s: every typed access refuses them (contiguous
/// slices, strided views, `to_vec` on either path). The results are compared by code only, so
/// that an access that wrongly succeeded never formats the invalid `bool`s it holds.
#[test]
fn invalid_bool_bytes_are_refused() {
  let bool8 = DLDataType {
    code: 6,
    bits: 8,
    lanes: 1,
  };
  let invalid = Some("ERR_DLPACK_INVALID_BOOL");
  let mut spec = Spec::f32(&[3]);
  spec.dtype = bool8;
  spec.data[0] = 0x0000_0000_0002_0100; // bytes 0, 1, 2
  let (result, _calls) = import_versioned(spec);
  let mut tensor = result.unwrap();
  assert_eq!(tensor.as_slice::<bool>().err().map(|e| e.code()), invalid);
  assert_eq!(tensor.view::<bool>().err().map(|e| e.code()), invalid);
  assert_eq!(tensor.to_vec::<bool>().err().map(|e| e.code()), invalid);
  assert_eq!(
    tensor.as_mut_slice::<bool>().err().map(|e| e.code()),
    invalid
  );
  // The same bytes read fine as uint8 would; and a valid bool tensor reads as bool.
  let mut spec = Spec::f32(&[2]);
  spec.dtype = bool8;
  spec.data[0] = 0x0000_0000_0000_0100;
  let (result, _calls) = import_versioned(spec);
  assert_eq!(result.unwrap().as_slice::<bool>().unwrap(), &[false, true]);

  // Strided (every other byte, so only the strided checks run): the invalid byte is one of the
  // elements...
  let mut spec = Spec::f32(&[3]).strides(&[2]);
  spec.dtype = bool8;
  spec.data[0] = 0x0000_0007_0001_0001; // elements 1, 1, 7 at bytes 0, 2, 4
  let (result, _calls) = import_versioned(spec);
  let tensor = result.unwrap();
  assert!(!tensor.is_contiguous());
  assert_eq!(tensor.view::<bool>().err().map(|e| e.code()), invalid);
  assert_eq!(tensor.to_vec::<bool>().err().map(|e| e.code()), invalid);
  // ...while invalid bytes between the elements are not looked at.
  let mut spec = Spec::f32(&[3]).strides(&[2]);
  spec.dtype = bool8;
  spec.data[0] = 0x0000_0000_0901_0900; // elements 0, 1, 0; bytes 9 between them
  let (result, _calls) = import_versioned(spec);
  let tensor = result.unwrap();
  assert_eq!(tensor.to_vec::<bool>().unwrap(), [false, true, false]);
}

#[test]
fn wrong_element_type_is_refused() {
  let (result, _calls) = import_versioned(Spec::f32(&[2]));
  let tensor = result.unwrap();
  assert_eq!(
    tensor.as_slice::<f64>().unwrap_err().code(),
    "ERR_DLPACK_DTYPE_MISMATCH"
  );
  assert_eq!(
    tensor.to_vec::<i32>().unwrap_err().code(),
    "ERR_DLPACK_DTYPE_MISMATCH"
  );
}

#[test]
fn read_only_refuses_mutable_slices() {
  let mut spec = Spec::f32(&[2]);
  spec.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  let (result, _calls) = import_versioned(spec);
  let mut tensor = result.unwrap();
  assert!(tensor.is_read_only());
  assert_eq!(
    tensor.as_mut_slice::<f32>().unwrap_err().code(),
    "ERR_DLPACK_READ_ONLY"
  );
  assert!(tensor.as_slice::<f32>().is_ok());
}

#[test]
fn deleter_runs_once_when_dropped_on_another_thread() {
  let (result, calls) = import_versioned(Spec::f32(&[16]));
  let tensor = result.unwrap();
  std::thread::spawn(move || drop(tensor)).join().unwrap();
  assert_eq!(count(&calls), 1);
}

/// A size-1 dimension may carry any stride (it never moves): shape [3, 1] with strides
/// [1, i64::MAX] is a valid, even contiguous, tensor. Strided reads (`view().iter()`, `to_vec`
/// of a non-contiguous tensor, the bit check of `view::<bool>`) must not add that stride
/// anywhere: debug builds panicked with "attempt to add with overflow", release builds wrapped.
#[test]
fn extreme_strides_of_size_one_dimensions_read_correctly() {
  for extreme in [i64::MAX, i64::MIN] {
    let mut spec = Spec::f32(&[3, 1]).strides(&[1, extreme]);
    spec.data[0] = u64::from(1.0f32.to_bits()) << 32; // elements 0.0, 1.0, 2.0
    spec.data[1] = u64::from(2.0f32.to_bits());
    let (result, calls) = import_versioned(spec);
    let tensor = result.expect("a valid tensor");
    assert!(tensor.is_contiguous());
    assert_eq!(tensor.to_vec::<f32>().unwrap(), [0.0, 1.0, 2.0]);
    let view = tensor.view::<f32>().unwrap();
    assert_eq!(view.iter().collect::<Vec<_>>(), [0.0, 1.0, 2.0]);
    assert_eq!(view.get(&[2, 0]), Some(2.0));
    assert_eq!(view.get(&[0, 1]), None);
    drop(tensor);
    assert_eq!(count(&calls), 1);

    // Non-contiguous: every other element, through the strided path of `to_vec`.
    let mut spec = Spec::f32(&[3, 1]).strides(&[2, extreme]);
    spec.data[0] = 0;
    spec.data[1] = 1.0f32.to_bits().into();
    spec.data[2] = 2.0f32.to_bits().into();
    let (result, _calls) = import_versioned(spec);
    let tensor = result.expect("a valid tensor");
    assert!(!tensor.is_contiguous());
    assert_eq!(tensor.to_vec::<f32>().unwrap(), [0.0, 1.0, 2.0]);

    // bool: the bit check walks the same offsets.
    let mut spec = Spec::f32(&[3, 1]).strides(&[1, extreme]);
    spec.dtype = DLDataType {
      code: 6,
      bits: 8,
      lanes: 1,
    };
    spec.data[0] = 0x0000_0000_0001_0001; // true, false, true
    let (result, _calls) = import_versioned(spec);
    let tensor = result.expect("a valid tensor");
    let view = tensor.view::<bool>().unwrap();
    assert_eq!(view.iter().collect::<Vec<_>>(), [true, false, true]);
  }
}
