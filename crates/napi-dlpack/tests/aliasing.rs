//! Two imported tensors over the same memory (JS's `f(x, x)`, two capsules of one tensor): a
//! write slice or view of one and any slice or view of the other are never lent at once.

mod common;

use std::sync::{Mutex, MutexGuard};

use common::{count, versioned, Spec};
use napi_dlpack::aliasing::lent_ranges;
use napi_dlpack::ffi::DLManagedTensorVersioned;
use napi_dlpack::{ErrorKind, ForeignTensor, ManagedTensor};

/// The table of lent ranges is process-wide: these tests run one at a time so that each can
/// check that every range it lent was given back.
fn serial() -> MutexGuard<'static, ()> {
  static SERIAL: Mutex<()> = Mutex::new(());
  SERIAL
    .lock()
    .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn import(raw: *mut DLManagedTensorVersioned) -> ForeignTensor {
  // SAFETY: a fresh tensor of the test producer, handed over once.
  let managed = unsafe { ManagedTensor::from_raw_versioned(raw) }.unwrap();
  ForeignTensor::new(managed).unwrap()
}

/// Two tensors of `first`'s and `second`'s metadata over the memory of `first`'s (the second's
/// data pointer is the first's, with its provenance), and their deleter counters.
fn over_one_buffer(first: Spec, second: Spec) -> (ForeignTensor, ForeignTensor, Counters) {
  let (first_raw, first_calls) = versioned(first);
  let (second_raw, second_calls) = versioned(second);
  // SAFETY: both are live test tensors; only the second's data pointer is replaced.
  unsafe { (*second_raw).dl_tensor.data = (*first_raw).dl_tensor.data };
  (
    import(first_raw),
    import(second_raw),
    Counters(first_calls, second_calls),
  )
}

struct Counters(
  std::sync::Arc<std::sync::atomic::AtomicUsize>,
  std::sync::Arc<std::sync::atomic::AtomicUsize>,
);

impl Counters {
  fn assert_each_ran_once(&self) {
    assert_eq!(
      (count(&self.0), count(&self.1)),
      (1, 1),
      "each deleter runs once"
    );
  }
}

fn same_tensor_twice(shape: &[i64]) -> (ForeignTensor, ForeignTensor, Counters) {
  let (a, b, counters) = over_one_buffer(Spec::f32(shape), Spec::f32(shape));
  (a, b, counters)
}

#[test]
fn a_write_slice_of_one_refuses_any_slice_or_view_of_the_other_until_dropped() {
  let _serial = serial();
  let (mut a, mut b, counters) = same_tensor_twice(&[2, 3]);
  {
    let written = a.as_mut_slice::<f32>().unwrap();
    for refused in [
      b.as_slice::<f32>().map(drop),
      b.as_mut_slice::<f32>().map(drop),
      b.view::<f32>().map(drop),
      b.view_mut::<f32>().map(drop),
      b.to_vec::<f32>().map(drop),
    ] {
      assert_eq!(refused.unwrap_err().kind(), ErrorKind::Aliased);
    }
    assert_eq!(written.len(), 6);
  }
  // Given back: the other tensor may now write, and sees the first one's memory.
  a.as_mut_slice::<f32>().unwrap()[4] = 7.0;
  assert_eq!(b.as_mut_slice::<f32>().unwrap()[4], 7.0);
  assert_eq!(lent_ranges(), 0);
  drop((a, b));
  counters.assert_each_ran_once();
}

#[test]
fn a_read_slice_of_one_refuses_writes_through_the_other_in_either_order() {
  let _serial = serial();
  let (a, mut b, counters) = same_tensor_twice(&[4]);
  {
    let read = a.as_slice::<f32>().unwrap();
    assert_eq!(
      b.as_mut_slice::<f32>().unwrap_err().kind(),
      ErrorKind::Aliased
    );
    assert_eq!(b.view_mut::<f32>().unwrap_err().kind(), ErrorKind::Aliased);
    // Reads coexist.
    assert_eq!(b.as_slice::<f32>().unwrap(), &*read);
    assert_eq!(b.view::<f32>().unwrap().iter().count(), 4);
  }
  {
    let view = a.view::<f32>().unwrap();
    assert_eq!(
      b.as_mut_slice::<f32>().unwrap_err().kind(),
      ErrorKind::Aliased
    );
    drop(view);
    assert!(b.as_mut_slice::<f32>().is_ok());
  }
  assert_eq!(lent_ranges(), 0);
  drop((a, b));
  counters.assert_each_ran_once();
}

#[test]
fn a_cloned_read_view_keeps_the_memory_lent_after_the_original_is_dropped() {
  let _serial = serial();
  let (a, mut b, counters) = same_tensor_twice(&[3]);
  let view = a.view::<f32>().unwrap();
  let copy = view.clone();
  drop(view);
  assert_eq!(b.view_mut::<f32>().unwrap_err().kind(), ErrorKind::Aliased);
  drop(copy);
  assert!(b.view_mut::<f32>().is_ok());
  // The read view of a write view holds no claim of its own: none is left behind.
  {
    let mut write = b.view_mut::<f32>().unwrap();
    let read = write.as_view();
    assert_eq!(read.get(&[0]), Some(0.0));
    drop(read);
    assert!(write.set(&[0], 1.0));
  }
  assert_eq!(lent_ranges(), 0);
  drop((a, b));
  counters.assert_each_ran_once();
}

#[test]
fn disjoint_parts_of_one_buffer_are_written_at_once() {
  let _serial = serial();
  // Elements 0..4 and 4..8 of one buffer: adjacent, not overlapping.
  let mut second = Spec::f32(&[4]);
  second.byte_offset = 16;
  let (mut low, mut high, counters) = over_one_buffer(Spec::f32(&[4]), second);
  {
    let mut low_elements = low.as_mut_slice::<f32>().unwrap();
    let mut high_elements = high.as_mut_slice::<f32>().unwrap();
    low_elements.fill(1.0);
    high_elements.fill(2.0);
  }
  assert_eq!(low.to_vec::<f32>().unwrap(), vec![1.0; 4]);
  assert_eq!(high.to_vec::<f32>().unwrap(), vec![2.0; 4]);
  assert_eq!(lent_ranges(), 0);
  drop((low, high));
  counters.assert_each_ran_once();
}

#[test]
fn interleaved_strided_tensors_count_as_overlapping() {
  let _serial = serial();
  // The even and the odd columns of a 2x4 matrix share no element but one span: refused (the
  // check compares spans, the conservative side).
  let mut odd = Spec::f32(&[2, 2]).strides(&[4, 2]);
  odd.byte_offset = 4;
  let (mut even, mut odd, counters) = over_one_buffer(Spec::f32(&[2, 2]).strides(&[4, 2]), odd);
  {
    let _writing = even.view_mut::<f32>().unwrap();
    assert_eq!(
      odd.view_mut::<f32>().unwrap_err().kind(),
      ErrorKind::Aliased
    );
  }
  assert!(odd.view_mut::<f32>().is_ok());
  assert_eq!(lent_ranges(), 0);
  drop((even, odd));
  counters.assert_each_ran_once();
}

#[test]
fn empty_tensors_and_refusals_lend_nothing() {
  let _serial = serial();
  let (mut a, mut b, counters) = same_tensor_twice(&[0, 3]);
  {
    let _one = a.as_mut_slice::<f32>().unwrap();
    let _other = b.as_mut_slice::<f32>().unwrap();
    assert_eq!(lent_ranges(), 0);
  }
  drop((a, b));
  counters.assert_each_ran_once();

  let (mut a, mut b, counters) = same_tensor_twice(&[2]);
  {
    let _written = a.as_mut_slice::<f32>().unwrap();
    assert_eq!(lent_ranges(), 1);
    // A wrong dtype, a refused claim: neither leaves a range behind.
    assert_eq!(
      b.as_mut_slice::<i32>().unwrap_err().kind(),
      ErrorKind::DtypeMismatch
    );
    assert_eq!(b.as_slice::<f32>().unwrap_err().kind(), ErrorKind::Aliased);
    assert_eq!(lent_ranges(), 1);
  }
  assert_eq!(lent_ranges(), 0);
  drop((a, b));
  counters.assert_each_ran_once();
}

#[test]
fn an_owned_tensor_written_on_another_thread_refuses_reads_here() {
  let _serial = serial();
  let (mut a, b, counters) = same_tensor_twice(&[8]);
  let (lent, release) = (std::sync::mpsc::channel(), std::sync::mpsc::channel::<()>());
  let writer = std::thread::spawn(move || {
    let mut elements = a.as_mut_slice::<f32>().unwrap();
    elements[0] = 3.0;
    lent.0.send(()).unwrap();
    release.1.recv().unwrap();
    drop(elements);
    a
  });
  lent.1.recv().unwrap();
  assert_eq!(b.as_slice::<f32>().unwrap_err().kind(), ErrorKind::Aliased);
  release.0.send(()).unwrap();
  let a = writer.join().unwrap();
  assert_eq!(b.as_slice::<f32>().unwrap()[0], 3.0);
  assert_eq!(lent_ranges(), 0);
  drop((a, b));
  counters.assert_each_ran_once();
}
