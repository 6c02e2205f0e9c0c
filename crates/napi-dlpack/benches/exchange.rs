//! Export and import+validate of a `Vec<f32>`, timing the exchange only.
//!
//! Method: a pool of `BATCH` vectors per size is allocated once (`vec![0.0; n]` gets fresh,
//! untouched zero pages from the allocator, so 64 × 1 GiB costs address space, not memory).
//! Each timed batch exports every vector (or imports every exported tensor); between batches,
//! untimed, `take_owner` hands each vector back without running the deleter (and
//! `ForeignTensor::into_managed` hands each import back), so no buffer is ever allocated or
//! freed inside a timed region and the allocator stays in its steady state — the state an addon
//! exchanging tensors in a loop is in. The baseline in the same run is the copy a consumer would
//! otherwise make (`to_vec`), which scales with the size.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use napi_dlpack::{export_versioned, take_owner, ForeignTensor, ManagedTensor};

const SIZES: [(&str, usize); 3] = [("1Ki", 1 << 10), ("1Mi", 1 << 20), ("256Mi", 1 << 28)];
/// Exports per timed batch. Seven in flight at a time fit glibc's per-thread allocation cache
/// (7 entries per size class): the allocator state of an addon that exchanges tensors one
/// after another. The timer overhead (two clock reads per batch, ~6 ns per export here) is
/// included in the result.
const EXPORT_BATCH: usize = 7;
/// Imports per timed batch: an import allocates nothing, so a larger batch only dilutes the
/// timer overhead.
const IMPORT_BATCH: usize = 64;

fn exchange(c: &mut Criterion) {
  let mut group = c.benchmark_group("exchange");
  group.warm_up_time(Duration::from_millis(500));
  group.measurement_time(Duration::from_secs(2));
  for (label, len) in SIZES {
    let mut pool: Vec<Vec<f32>> = (0..IMPORT_BATCH).map(|_| vec![0f32; len]).collect();
    group.bench_function(BenchmarkId::new("export_versioned", label), |b| {
      b.iter_custom(|iters| {
        let mut total = Duration::ZERO;
        let mut exported: Vec<ManagedTensor> = Vec::with_capacity(EXPORT_BATCH);
        let mut done = 0;
        while done < iters {
          let n = EXPORT_BATCH.min((iters - done) as usize);
          let start = Instant::now();
          for data in pool.drain(..n) {
            exported.push(export_versioned(black_box(data)).unwrap());
          }
          total += start.elapsed();
          for managed in exported.drain(..) {
            let Ok(data) = take_owner::<Vec<f32>>(managed) else {
              panic!("our own export must be recognised");
            };
            pool.push(data);
          }
          done += n as u64;
        }
        total
      })
    });

    let mut managed: Vec<ManagedTensor> = pool
      .drain(..)
      .map(|data| export_versioned(data).unwrap())
      .collect();
    group.bench_function(BenchmarkId::new("import_validate", label), |b| {
      b.iter_custom(|iters| {
        let mut total = Duration::ZERO;
        let mut imported: Vec<ForeignTensor> = Vec::with_capacity(IMPORT_BATCH);
        let mut done = 0;
        while done < iters {
          let n = IMPORT_BATCH.min((iters - done) as usize);
          let start = Instant::now();
          for tensor in managed.drain(..n) {
            imported.push(ForeignTensor::new(black_box(tensor)).unwrap());
          }
          total += start.elapsed();
          managed.extend(imported.drain(..).map(ForeignTensor::into_managed));
          done += n as u64;
        }
        total
      })
    });
    drop(managed); // deleters free the pool, outside any timed region
  }
  group.finish();

  let mut copy = c.benchmark_group("baseline_copy");
  copy.warm_up_time(Duration::from_millis(500));
  copy.measurement_time(Duration::from_secs(2));
  copy.sample_size(10);
  for (label, len) in SIZES {
    let source = vec![1f32; len];
    copy.bench_function(BenchmarkId::new("to_vec", label), |b| {
      b.iter(|| black_box(&source).to_vec())
    });
  }
  copy.finish();
}

criterion_group!(benches, exchange);
criterion_main!(benches);
