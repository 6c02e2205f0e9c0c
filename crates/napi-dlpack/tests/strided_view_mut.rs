//! `StridedViewMut`: in-place writes through any strides, READ_ONLY refused, bounds kept.

use std::sync::Arc;

use napi_dlpack::{export_versioned, take_owner, ErrorKind, ForeignTensor, ShapedBuffer};

/// A 3x2 transposed view over [0, 1, 2, 3, 4, 5] (element (i, j) = data[i + 3 j]).
fn transposed() -> ForeignTensor {
  let buffer =
    ShapedBuffer::strided((0..6).map(|v| v as f32).collect(), &[3, 2], &[1, 3], 0).unwrap();
  ForeignTensor::new(export_versioned(buffer).unwrap()).unwrap()
}

fn values(tensor: ForeignTensor) -> Vec<f32> {
  take_owner::<ShapedBuffer<f32>>(tensor.into_managed())
    .map_err(|_| "not our export")
    .unwrap()
    .into_vec()
}

#[test]
fn map_in_place_writes_every_element_of_a_transposed_view() {
  let mut tensor = transposed();
  tensor.view_mut::<f32>().unwrap().map_in_place(|v| v * 10.0);
  assert_eq!(values(tensor), vec![0.0, 10.0, 20.0, 30.0, 40.0, 50.0]);
}

#[test]
fn map_indexed_visits_in_row_major_order() {
  let mut tensor = transposed();
  let mut seen = Vec::new();
  tensor
    .view_mut::<f32>()
    .unwrap()
    .map_indexed(|position, v| {
      seen.push(v);
      position as f32
    });
  // Row-major over the view: (0,0)=0, (0,1)=3, (1,0)=1, (1,1)=4, (2,0)=2, (2,1)=5.
  assert_eq!(seen, vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
  assert_eq!(values(tensor), vec![0.0, 2.0, 4.0, 1.0, 3.0, 5.0]);
}

#[test]
fn get_and_set_use_the_strides_and_refuse_out_of_bounds() {
  let mut tensor = transposed();
  let mut view = tensor.view_mut::<f32>().unwrap();
  assert_eq!(view.get(&[2, 1]), Some(5.0));
  assert!(view.set(&[0, 1], -1.0));
  assert!(!view.set(&[3, 0], 9.0), "row 3 is out of bounds");
  assert!(!view.set(&[0, 2], 9.0), "column 2 is out of bounds");
  assert!(!view.set(&[0], 9.0), "wrong number of indices");
  assert_eq!(view.get(&[0, 1]), Some(-1.0));
  assert_eq!(view.as_view().get(&[0, 1]), Some(-1.0));
  assert_eq!(values(tensor), vec![0.0, 1.0, 2.0, -1.0, 4.0, 5.0]);
}

#[test]
fn negative_and_zero_strides() {
  let reversed = ShapedBuffer::strided(vec![1.0f64, 2.0, 3.0], &[3], &[-1], 2).unwrap();
  let mut tensor = ForeignTensor::new(export_versioned(reversed).unwrap()).unwrap();
  tensor
    .view_mut::<f64>()
    .unwrap()
    .map_indexed(|position, _| position as f64);
  let data = take_owner::<ShapedBuffer<f64>>(tensor.into_managed())
    .ok()
    .unwrap()
    .into_vec();
  assert_eq!(data, vec![2.0, 1.0, 0.0]);

  let broadcast = ShapedBuffer::strided(vec![1i32], &[4], &[0], 0).unwrap();
  let mut tensor = ForeignTensor::new(export_versioned(broadcast).unwrap()).unwrap();
  tensor.view_mut::<i32>().unwrap().map_in_place(|v| v * 2);
  let data = take_owner::<ShapedBuffer<i32>>(tensor.into_managed())
    .ok()
    .unwrap()
    .into_vec();
  assert_eq!(
    data,
    vec![16],
    "the one element is visited once per index naming it"
  );
}

#[test]
fn read_only_and_wrong_dtype_are_refused() {
  let shared: Arc<[f32]> = Arc::from(vec![1.0f32, 2.0]);
  let mut tensor = ForeignTensor::new(export_versioned(shared.clone()).unwrap()).unwrap();
  assert!(tensor.is_read_only());
  assert_eq!(
    tensor.view_mut::<f32>().unwrap_err().kind(),
    ErrorKind::ReadOnly
  );
  assert_eq!(&*shared, &[1.0, 2.0]);
  let mut writable = transposed();
  assert_eq!(
    writable.view_mut::<f64>().unwrap_err().kind(),
    ErrorKind::DtypeMismatch
  );
}
