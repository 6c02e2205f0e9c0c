//! Export → import round trips: every dtype, awkward layouts, both structs, flags, and the
//! export-side ownership rules.

mod common;

use std::ffi::c_void;
use std::sync::Arc;

use common::*;
use napi_dlpack::ffi::*;
use napi_dlpack::*;

fn import(managed: ManagedTensor) -> ForeignTensor {
  ForeignTensor::new(managed).expect("our own export must validate")
}

#[test]
fn every_dtype_round_trips_in_both_formats() {
  for dtype in DType::ALL {
    for format in [ExportFormat::Versioned, ExportFormat::Legacy] {
      // Raw bytes with the dtype's element size, described as that dtype.
      let bytes: Vec<u8> = (0..(dtype.itemsize() * 6) as u32)
        .map(|b| (b % 2) as u8)
        .collect();
      let data_address = bytes.as_ptr() as usize;
      let (value, drops) = counted(bytes, |bytes| {
        TensorInfo::contiguous(
          bytes.as_ptr() as *mut c_void,
          DType::UInt8,
          &[bytes.len() as i64],
        )
      });
      // Re-describe through a wrapper so the dtype varies; bytes stay owned by `value`.
      struct As(Counted<u8>, DType);
      // SAFETY: forwards to Counted's buffer, reinterpreted with an itemsize that divides it.
      unsafe impl IntoDLPack for As {
        fn tensor_info(&mut self) -> TensorInfo {
          let n = (self.0.data.len() / self.1.itemsize()) as i64;
          TensorInfo::contiguous(self.0.data.as_mut_ptr().cast(), self.1, &[2, n / 2])
        }
      }
      let result = export(As(value, dtype), format);
      if format == ExportFormat::Legacy && dtype.is_subbyte() {
        assert_eq!(result.unwrap_err().code(), "ERR_DLPACK_DTYPE");
        assert_eq!(count(&drops), 1, "value dropped when the export is refused");
        continue;
      }
      let tensor = import(result.unwrap());
      assert_eq!(tensor.dtype(), dtype);
      assert_eq!(tensor.shape(), &[2, 3]);
      assert_eq!(tensor.strides(), &[3, 1]);
      assert_eq!(tensor.data_ptr() as usize, data_address, "zero-copy");
      assert_eq!(tensor.is_versioned(), format == ExportFormat::Versioned);
      let padded = tensor.flags() & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED != 0;
      assert_eq!(padded, dtype.is_subbyte());
      assert_eq!(count(&drops), 0);
      drop(tensor);
      assert_eq!(count(&drops), 1, "{dtype} {format:?}");
    }
  }
}

#[test]
fn typed_round_trips_of_vec_and_box() {
  fn check<T: Element + PartialEq + std::fmt::Debug>(values: Vec<T>) {
    let expected = values.clone();
    let address = values.as_ptr() as usize;
    let tensor = import(export_versioned(values).unwrap());
    assert_eq!(tensor.dtype(), T::DTYPE);
    assert_eq!(tensor.data_ptr() as usize, address);
    assert_eq!(tensor.as_slice::<T>().unwrap(), &expected[..]);
    let boxed: Box<[T]> = expected.clone().into_boxed_slice();
    let tensor = import(export_legacy(boxed).unwrap());
    assert_eq!(tensor.to_vec::<T>().unwrap(), expected);
  }
  check(vec![1i8, -2, 3]);
  check(vec![1i16, -2, 3]);
  check(vec![1i32, -2, 3]);
  check(vec![1i64, -2, i64::MIN]);
  check(vec![1u8, 2, 255]);
  check(vec![1u16, 2, 3]);
  check(vec![1u32, 2, 3]);
  check(vec![1u64, 2, u64::MAX]);
  check(vec![1.5f32, -2.0, f32::INFINITY]);
  check(vec![1.5f64, -2.0, f64::MIN_POSITIVE]);
  check(vec![true, false, true]);
  check(vec![half::f16::from_f32(1.5), half::f16::from_f32(-2.0)]);
  check(vec![half::bf16::from_f32(1.5), half::bf16::from_f32(-2.0)]);
  check(vec![num_complex::Complex::new(1.0f32, -1.0)]);
  check(vec![num_complex::Complex::new(1.0f64, -1.0)]);
}

#[test]
fn zero_dimensional_tensor() {
  let (value, drops) = counted(vec![42.0f32], |v| {
    TensorInfo::contiguous(v.as_mut_ptr().cast(), DType::Float32, &[])
  });
  let managed = export_versioned(value).unwrap();
  // SAFETY: we own the export; ndim 0 means NULL shape and strides are allowed.
  let raw = unsafe { managed.dl_tensor() };
  assert_eq!(raw.ndim, 0);
  assert!(raw.shape.is_null() && raw.strides.is_null());
  let tensor = import(managed);
  assert_eq!(tensor.numel(), 1);
  assert_eq!(tensor.shape(), &[] as &[i64]);
  assert_eq!(tensor.as_slice::<f32>().unwrap(), &[42.0]);
  assert_eq!(tensor.view::<f32>().unwrap().get(&[]), Some(42.0));
  drop(tensor);
  assert_eq!(count(&drops), 1);
}

#[test]
fn zero_size_tensor_exports_null_data() {
  let managed = export_versioned(ShapedBuffer::<f32>::new(vec![], &[3, 0, 2]).unwrap()).unwrap();
  // SAFETY: we own the export.
  let raw = unsafe { managed.dl_tensor() };
  assert!(raw.data.is_null());
  assert!(!raw.strides.is_null(), "strides never NULL when ndim > 0");
  let tensor = import(managed);
  assert_eq!(tensor.numel(), 0);
  assert_eq!(tensor.shape(), &[3, 0, 2]);
  assert_eq!(tensor.strides(), &[2, 2, 1]);
}

#[test]
fn thirty_two_dimensions() {
  let shape = vec![1i64; 31].into_iter().chain([3]).collect::<Vec<_>>();
  let tensor =
    import(export_versioned(ShapedBuffer::new(vec![1u8, 2, 3], &shape).unwrap()).unwrap());
  assert_eq!(tensor.ndim(), 32);
  assert_eq!(tensor.shape(), &shape[..]);
  assert_eq!(tensor.as_slice::<u8>().unwrap(), &[1, 2, 3]);
  let mut index = vec![0usize; 32];
  index[31] = 2;
  assert_eq!(tensor.view::<u8>().unwrap().get(&index), Some(3));
}

#[test]
fn transposed_view_reads_in_logical_order() {
  // [[0,1,2],[3,4,5]] stored row-major, exported as its 3x2 transpose.
  let data: Vec<i32> = (0..6).collect();
  let tensor =
    import(export_versioned(ShapedBuffer::strided(data, &[3, 2], &[1, 3], 0).unwrap()).unwrap());
  assert!(!tensor.is_contiguous());
  assert!(napi_dlpack::layout::is_f_contiguous(
    tensor.shape(),
    tensor.strides()
  ));
  assert_eq!(tensor.to_vec::<i32>().unwrap(), vec![0, 3, 1, 4, 2, 5]);
  assert_eq!(tensor.view::<i32>().unwrap().get(&[2, 1]), Some(5));
  assert_eq!(tensor.view::<i32>().unwrap().get(&[3, 0]), None);
}

#[test]
fn negative_stride_and_offset_view() {
  // data[7], data[5], data[3], data[1]
  let data: Vec<f64> = (0..8).map(f64::from).collect();
  let address = data.as_ptr() as usize;
  let buffer = ShapedBuffer::strided(data, &[4], &[-2], 7).unwrap();
  let tensor = import(export_versioned(buffer).unwrap());
  assert_eq!(tensor.byte_offset(), 56);
  assert_eq!(tensor.data_ptr() as usize, address + 56);
  assert_eq!(tensor.to_vec::<f64>().unwrap(), vec![7.0, 5.0, 3.0, 1.0]);
  // A view that reaches outside its buffer is refused at construction.
  let err = ShapedBuffer::strided(vec![0f64; 8], &[4], &[-2], 5).unwrap_err();
  assert_eq!(err.code(), "ERR_DLPACK_INVALID_LAYOUT");
}

#[test]
fn flags_survive_the_round_trip() {
  let (value, _drops) = counted(vec![1f32, 2.0], |v| {
    TensorInfo::from_mut_slice(v).read_only(true).copied(true)
  });
  let tensor = import(export_versioned(value).unwrap());
  assert!(tensor.is_read_only());
  assert!(tensor.is_copied());
  assert_eq!(tensor.version(), Some(DLPackVersion { major: 1, minor: 3 }));

  // Arc-shared buffers are exported read-only, since other owners may still read them.
  let shared: Arc<[u16]> = Arc::from(vec![7u16, 8]);
  let tensor = import(export_versioned(shared.clone()).unwrap());
  assert!(tensor.is_read_only());
  assert_eq!(Arc::strong_count(&shared), 2);
  drop(tensor);
  assert_eq!(Arc::strong_count(&shared), 1);
}

#[test]
fn legacy_export_refuses_read_only_data() {
  // A pointer from a shared borrow is exported read-only, which legacy cannot express.
  let (value, drops) = counted(vec![1f32], |v| TensorInfo::from_slice(v.as_slice()));
  assert_eq!(
    export_legacy(value).unwrap_err().code(),
    "ERR_DLPACK_READ_ONLY"
  );
  assert_eq!(count(&drops), 1);
}

#[test]
fn format_follows_the_consumers_max_version() {
  assert_eq!(ExportFormat::for_max_version(None), ExportFormat::Versioned);
  assert_eq!(
    ExportFormat::for_max_version(Some((0, 8))),
    ExportFormat::Legacy
  );
  assert_eq!(
    ExportFormat::for_max_version(Some((1, 0))),
    ExportFormat::Versioned
  );
  assert_eq!(
    ExportFormat::for_max_version(Some((2, 0))),
    ExportFormat::Versioned
  );
}

#[test]
fn invalid_export_metadata_is_refused_and_the_value_dropped() {
  type Info = fn(&mut Vec<f32>) -> TensorInfo;
  let cases: [(Info, &str); 4] = [
    (
      |v| TensorInfo::strided(v.as_mut_ptr().cast(), DType::Float32, &[2, 2], &[1]),
      "ERR_DLPACK_INVALID_LAYOUT",
    ),
    (
      |v| TensorInfo::contiguous(v.as_mut_ptr().cast(), DType::Float32, &[-1]),
      "ERR_DLPACK_SHAPE",
    ),
    (
      |_| TensorInfo::contiguous(std::ptr::null_mut(), DType::Float32, &[2]),
      "ERR_DLPACK_NULL_DATA",
    ),
    (
      |v| TensorInfo::contiguous(v.as_mut_ptr().cast(), DType::Float32, &[1; 65]),
      "ERR_DLPACK_NDIM",
    ),
  ];
  for (info, code) in cases {
    let (value, drops) = counted(vec![0f32; 4], info);
    assert_eq!(export_versioned(value).unwrap_err().code(), code);
    assert_eq!(count(&drops), 1);
  }
}

#[test]
fn inline_storage_is_read_after_the_move() {
  // A value that stores its elements inline: pyo3-dlpack would hand out a pointer to the
  // pre-move location. Here the pointer must point into the export's own allocation.
  struct Inline([f32; 4]);
  // SAFETY: the array lives inside the value, which stays put in the export allocation.
  unsafe impl IntoDLPack for Inline {
    fn tensor_info(&mut self) -> TensorInfo {
      TensorInfo::from_mut_slice(&mut self.0[..])
    }
  }
  let value = Inline([1.0, 2.0, 3.0, 4.0]);
  let before = value.0.as_ptr() as usize;
  let tensor = import(export_versioned(value).unwrap());
  assert_ne!(tensor.data_ptr() as usize, before);
  assert_eq!(tensor.as_slice::<f32>().unwrap(), &[1.0, 2.0, 3.0, 4.0]);
}

#[test]
fn writes_through_a_mutable_import_reach_the_producer_memory() {
  let data = vec![0f32; 4];
  let address = data.as_ptr() as usize;
  let mut tensor = import(export_versioned(data).unwrap());
  tensor.as_mut_slice::<f32>().unwrap()[2] = 9.0;
  assert_eq!(tensor.data_ptr() as usize, address);
  // Read back through an independent raw path.
  // SAFETY: the tensor is alive and holds 4 floats at `address`.
  assert_eq!(unsafe { *(address as *const f32).add(2) }, 9.0);
}

#[test]
fn exports_dropped_without_import_run_the_deleter_once() {
  let (value, drops) = counted(vec![1u8], |v| TensorInfo::from_mut_slice(v));
  let managed = export_versioned(value).unwrap();
  std::thread::spawn(move || drop(managed)).join().unwrap();
  assert_eq!(count(&drops), 1);
  // into_raw + from_raw hands ownership around without calling it.
  let (value, drops) = counted(vec![1u8], |v| TensorInfo::from_mut_slice(v));
  let raw = export_legacy(value).unwrap().into_raw();
  assert_eq!(count(&drops), 0);
  // SAFETY: `raw` came from into_raw and is owned by nobody else.
  drop_managed(unsafe { ManagedTensor::from_ptr(raw) });
  assert_eq!(count(&drops), 1);
}

#[test]
fn panicking_drop_does_not_unwind_into_the_caller() {
  struct Bomb(Vec<u8>);
  impl Drop for Bomb {
    fn drop(&mut self) {
      panic!("drop panicked");
    }
  }
  // SAFETY: Vec-backed, stable buffer.
  unsafe impl IntoDLPack for Bomb {
    fn tensor_info(&mut self) -> TensorInfo {
      TensorInfo::from_mut_slice(&mut self.0)
    }
  }
  let managed = export_versioned(Bomb(vec![1])).unwrap();
  drop(managed); // the deleter catches the panic
}

#[test]
fn take_owner_recovers_our_own_exports_only() {
  let (value, drops) = counted(vec![1f32, 2.0], |v| TensorInfo::from_mut_slice(v));
  let managed = export_versioned(value).unwrap();
  // Another type's owner is not recognised, and the tensor comes back untouched.
  let managed = take_owner::<Vec<f32>>(managed).unwrap_err();
  let Ok(owner) = take_owner::<Counted<f32>>(managed) else {
    panic!("our own export must be recognised");
  };
  assert_eq!(count(&drops), 0, "taking the owner back runs no deleter");
  assert_eq!(owner.data, vec![1.0, 2.0]);
  drop(owner);
  assert_eq!(count(&drops), 1);

  let legacy = export_legacy(vec![3u8]).unwrap();
  assert_eq!(take_owner::<Vec<u8>>(legacy).ok(), Some(vec![3u8]));

  // A foreign tensor is never mistaken for ours; its deleter still runs once.
  let (ptr, calls) = versioned(Spec::f32(&[2]));
  // SAFETY: ownership handed over.
  let foreign = unsafe { ManagedTensor::from_raw_versioned(ptr) }.unwrap();
  let foreign = take_owner::<Vec<f32>>(foreign).unwrap_err();
  drop(foreign);
  assert_eq!(count(&calls), 1);
}

/// An empty buffer exported with any shape (the shape must have a zero dimension).
struct EmptyWithShape(Vec<i64>);

// SAFETY: the shape has no elements, so the NULL data pointer is never dereferenced.
unsafe impl napi_dlpack::IntoDLPack for EmptyWithShape {
  fn tensor_info(&mut self) -> napi_dlpack::TensorInfo {
    napi_dlpack::TensorInfo::contiguous(std::ptr::null_mut(), napi_dlpack::DType::Float32, &self.0)
  }
}

/// Row-major strides of an export are computed with checked products: a zero dimension keeps
/// the element count at 0, so the count check alone cannot catch a stride that overflows.
#[test]
fn export_strides_overflow_behind_a_zero_dimension() {
  use napi_dlpack::{export_versioned, ErrorKind};
  let huge = 1i64 << 62;
  // strides would be [4 * 2^62 * 2, 4 * 2^62, 4, 1] (zeros count as one): two overflow
  let err = export_versioned(EmptyWithShape(vec![0, 2, huge, 4]))
    .expect_err("an overflowing stride must be refused");
  assert_eq!(err.kind(), ErrorKind::Overflow);
  // the product over the whole shape is never stored, so only it may overflow
  let managed = export_versioned(EmptyWithShape(vec![huge, 0, 4])).expect("strides [4, 4, 1] fit");
  let tensor = napi_dlpack::ForeignTensor::new(managed).unwrap();
  assert_eq!(tensor.shape(), &[huge, 0, 4]);
  assert_eq!(tensor.strides(), &[4, 4, 1]);
  assert_eq!(tensor.numel(), 0);
}
