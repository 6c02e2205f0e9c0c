#![cfg(feature = "napi")]
//! The capsule payload as a producer and a consumer use it, without a JS engine: consume once,
//! release exactly once, and the fill-later protocol producers use when they must know the
//! payload's address before they export.

mod common;

use common::*;
use napi_dlpack::capsule::{CapsulePayload, CAPSULE_ABI_VERSION, KIND_LEGACY, KIND_VERSIONED};
use napi_dlpack::{ErrorKind, ExportFormat, ManagedTensor};

fn versioned_tensor() -> (
  ManagedTensor,
  std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
  let (ptr, calls) = versioned(Spec::f32(&[3]));
  // SAFETY: a fresh tensor whose ownership moves into the ManagedTensor.
  let managed = unsafe { ManagedTensor::from_raw_versioned(ptr) }.unwrap();
  (managed, calls)
}

/// A tensor whose deleter only counts (its struct is never freed), for the consume-once and
/// release-once tests: a second deleter call, or a second successful consume, then shows up as
/// a count and fails an assertion, instead of aborting the test binary with a double free.
fn counting_tensor(producer: &mut Misaligned) -> ManagedTensor {
  // SAFETY: an aligned struct, readable while `producer` lives; ownership moves in.
  unsafe { ManagedTensor::from_raw_versioned(producer.versioned()) }.unwrap()
}

#[test]
fn consumed_once_then_refused() {
  let mut producer = Misaligned::at_offset(0);
  let (managed, calls) = (counting_tensor(&mut producer), producer.calls.clone());
  let payload = CapsulePayload::new(managed);
  assert_eq!(payload.abi_version, CAPSULE_ABI_VERSION);
  assert_eq!(payload.kind, KIND_VERSIONED);
  assert!(!payload.is_consumed());
  let taken = payload.take().expect("first consume");
  assert!(payload.is_consumed());
  let second = payload.take().expect_err("second consume");
  assert_eq!(second.kind(), ErrorKind::CapsuleConsumed);
  payload.release(); // a finalizer after consumption: nothing to release
  assert_eq!(count(&calls), 0);
  drop(taken);
  assert_eq!(count(&calls), 1);
}

#[test]
fn released_exactly_once_when_never_consumed() {
  let mut producer = Misaligned::at_offset(0);
  let (managed, calls) = (counting_tensor(&mut producer), producer.calls.clone());
  let payload = CapsulePayload::new(managed);
  payload.release();
  payload.release();
  assert_eq!(count(&calls), 1);
  assert_eq!(
    payload.take().unwrap_err().kind(),
    ErrorKind::CapsuleConsumed
  );
}

#[test]
fn other_abi_versions_and_kinds_are_not_touched() {
  let (managed, calls) = versioned_tensor();
  let mut payload = CapsulePayload::new(managed);
  payload.abi_version = 2;
  assert_eq!(payload.take().unwrap_err().kind(), ErrorKind::CapsuleAbi);
  assert!(
    !payload.is_consumed(),
    "a refused consume leaves the tensor in place"
  );
  payload.abi_version = CAPSULE_ABI_VERSION;
  payload.kind = 9;
  assert_eq!(payload.take().unwrap_err().kind(), ErrorKind::CapsuleAbi);
  payload.kind = KIND_VERSIONED;
  drop(payload.take().unwrap());
  assert_eq!(count(&calls), 1);
}

#[test]
fn empty_payload_is_filled_once_with_its_kind() {
  let payload = CapsulePayload::empty(CapsulePayload::kind_for(ExportFormat::Versioned));
  assert!(payload.is_consumed(), "an empty payload reads as consumed");
  assert_eq!(
    payload.take().unwrap_err().kind(),
    ErrorKind::CapsuleConsumed
  );

  // Wrong kind: the tensor comes back untouched.
  let legacy_payload = CapsulePayload::empty(CapsulePayload::kind_for(ExportFormat::Legacy));
  assert_eq!(legacy_payload.kind, KIND_LEGACY);
  let (managed, calls) = versioned_tensor();
  let managed = legacy_payload.fill(managed).expect_err("kind mismatch");
  assert_eq!(count(&calls), 0);

  payload
    .fill(managed)
    .expect("empty payload of the right kind");
  assert!(!payload.is_consumed());
  // Full: a second tensor is refused and handed back.
  let (other, other_calls) = versioned_tensor();
  drop(payload.fill(other).expect_err("already full"));
  assert_eq!(count(&other_calls), 1);

  drop(payload.take().expect("consume the filled tensor"));
  assert_eq!(count(&calls), 1);
}

#[test]
fn misaligned_tensor_in_a_foreign_payload_is_refused_and_released_once() {
  use std::sync::atomic::AtomicPtr;
  let mut producer = Misaligned::new();
  for kind in [KIND_VERSIONED, KIND_LEGACY] {
    let tensor = if kind == KIND_VERSIONED {
      producer.versioned().cast()
    } else {
      producer.legacy().cast()
    };
    // A payload as a C producer fills it in, without going through our constructors.
    let payload = CapsulePayload {
      abi_version: CAPSULE_ABI_VERSION,
      kind,
      tensor: AtomicPtr::new(tensor),
    };
    let before = count(&producer.calls);
    let err = payload.take().expect_err("misaligned tensor accepted");
    assert_eq!(err.kind(), ErrorKind::Misaligned);
    assert_eq!(
      count(&producer.calls),
      before + 1,
      "deleter runs on refusal"
    );
    assert!(payload.is_consumed());
    payload.release(); // the finalizer afterwards: nothing left to release
    assert_eq!(count(&producer.calls), before + 1);
  }
}

#[test]
fn abi_is_checked_before_tensor_is_read() {
  let (managed, calls) = versioned_tensor();
  let mut payload = CapsulePayload::new(managed);
  assert!(payload.check_abi().is_ok());
  for (abi_version, kind) in [(2, KIND_VERSIONED), (CAPSULE_ABI_VERSION, 9)] {
    payload.abi_version = abi_version;
    payload.kind = kind;
    assert_eq!(
      payload.check_abi().unwrap_err().kind(),
      ErrorKind::CapsuleAbi
    );
    // SAFETY: no JS thread involved; nothing else can consume this payload.
    let peeked = unsafe { payload.peek_device() };
    assert_eq!(peeked.unwrap_err().kind(), ErrorKind::CapsuleAbi);
  }
  payload.abi_version = CAPSULE_ABI_VERSION;
  payload.kind = KIND_VERSIONED;
  drop(payload.take().unwrap());
  assert_eq!(count(&calls), 1);
}

#[test]
fn peek_device_reads_without_consuming() {
  use napi_dlpack::ffi::{DLDevice, DLPackVersion};
  use napi_dlpack::{Device, DeviceType};
  let rocm = DLDevice {
    device_type: DeviceType::Rocm as u32,
    device_id: 3,
  };
  let mut spec = Spec::f32(&[2]);
  spec.device = rocm;
  let (ptr, calls) = versioned(spec);
  // SAFETY: a fresh tensor whose ownership moves into the payload.
  let payload = CapsulePayload::new(unsafe { ManagedTensor::from_raw_versioned(ptr) }.unwrap());
  // SAFETY: no JS thread involved; nothing else can consume this payload.
  let device = unsafe { payload.peek_device() }.unwrap();
  assert_eq!(
    device,
    Some(Device {
      device_type: DeviceType::Rocm,
      id: 3
    })
  );
  assert!(!payload.is_consumed());
  assert_eq!(count(&calls), 0, "peeking runs no deleter");
  drop(payload.take().unwrap());
  assert_eq!(count(&calls), 1);
  // SAFETY: as above.
  let consumed = unsafe { payload.peek_device() }.unwrap_err();
  assert_eq!(consumed.kind(), ErrorKind::CapsuleConsumed);

  // Legacy: one layout, always readable.
  let (ptr, legacy_calls) = legacy(Spec::f32(&[1]));
  // SAFETY: a fresh tensor whose ownership moves into the payload.
  let payload = CapsulePayload::new(unsafe { ManagedTensor::from_raw_legacy(ptr) }.unwrap());
  // SAFETY: as above.
  assert_eq!(unsafe { payload.peek_device() }.unwrap(), Some(Device::CPU));
  assert_eq!(count(&legacy_calls), 0);
  drop(payload.take().unwrap());
  assert_eq!(count(&legacy_calls), 1);

  // Another major version: nothing past the prefix is read, so no device.
  let mut spec = Spec::f32(&[2]);
  spec.version = DLPackVersion { major: 2, minor: 0 };
  let (ptr, major_calls) = versioned(spec);
  // SAFETY: a fresh tensor whose ownership moves into the payload.
  let payload = CapsulePayload::new(unsafe { ManagedTensor::from_raw_versioned(ptr) }.unwrap());
  // SAFETY: as above.
  assert_eq!(unsafe { payload.peek_device() }.unwrap(), None);
  payload.release();
  assert_eq!(count(&major_calls), 1);

  // An unknown device type: not a device to compare with.
  let mut spec = Spec::f32(&[2]);
  spec.device = DLDevice {
    device_type: 5,
    device_id: 0,
  };
  let (ptr, unknown_calls) = versioned(spec);
  // SAFETY: a fresh tensor whose ownership moves into the payload.
  let payload = CapsulePayload::new(unsafe { ManagedTensor::from_raw_versioned(ptr) }.unwrap());
  // SAFETY: as above.
  assert_eq!(unsafe { payload.peek_device() }.unwrap(), None);
  payload.release();
  assert_eq!(count(&unknown_calls), 1);

  // A misaligned managed pointer is never dereferenced by a peek.
  let mut producer = Misaligned::new();
  let payload = CapsulePayload {
    abi_version: CAPSULE_ABI_VERSION,
    kind: KIND_VERSIONED,
    tensor: std::sync::atomic::AtomicPtr::new(producer.versioned().cast()),
  };
  // SAFETY: as above.
  assert_eq!(unsafe { payload.peek_device() }.unwrap(), None);
  assert!(!payload.is_consumed());
  drop(payload.take().unwrap_err());
}

/// What every major version keeps of `DLManagedTensorVersioned`, and all a producer of
/// another major need allocate.
#[repr(C)]
struct StablePrefix {
  version: napi_dlpack::ffi::DLPackVersion,
  manager_ctx: *mut std::ffi::c_void,
  deleter: Option<unsafe extern "C" fn(*mut napi_dlpack::ffi::DLManagedTensorVersioned)>,
}

static PREFIX_DELETES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

unsafe extern "C" fn delete_prefix(managed: *mut napi_dlpack::ffi::DLManagedTensorVersioned) {
  PREFIX_DELETES.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
  // SAFETY: made by Box::into_raw below, released once.
  drop(unsafe { Box::from_raw(managed.cast::<StablePrefix>()) });
}

#[test]
fn peek_device_of_another_major_reads_only_the_stable_prefix() {
  use napi_dlpack::ffi::DLPackVersion;
  // Allocated as the 24-byte prefix only: a read past `deleter` would leave the allocation,
  // which Miri (`npm run test:miri`) reports.
  let prefix = Box::into_raw(Box::new(StablePrefix {
    version: DLPackVersion { major: 2, minor: 0 },
    manager_ctx: std::ptr::null_mut(),
    deleter: Some(delete_prefix),
  }));
  let payload = CapsulePayload {
    abi_version: CAPSULE_ABI_VERSION,
    kind: KIND_VERSIONED,
    tensor: std::sync::atomic::AtomicPtr::new(prefix.cast()),
  };
  // SAFETY: no JS thread involved; nothing else can consume this payload.
  assert_eq!(unsafe { payload.peek_device() }.unwrap(), None);
  assert!(!payload.is_consumed());
  payload.release(); // the producer's finalizer: the deleter, read from the prefix
  assert_eq!(PREFIX_DELETES.load(std::sync::atomic::Ordering::SeqCst), 1);
}
