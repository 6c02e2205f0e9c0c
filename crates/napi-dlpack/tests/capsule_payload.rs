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
