//! Export and import+validate of a `Vec<f32>`, timing the exchange only.
//!
//! `iter_batched` builds the inputs before the timed loop and drops the outputs after it, so
//! neither allocating nor freeing the buffer is measured: a 256 Mi-element export costs what a
//! 1 Ki-element one does. Buffers come from `vec![0.0; n]`, which the allocator serves with
//! fresh zeroed pages that are never touched, so a batch of 1 GiB buffers costs address space,
//! not memory. The baseline in the same run is the copy a consumer would otherwise make
//! (`to_vec`), which scales with the size.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion};
use napi_dlpack::{export_versioned, ForeignTensor};

const SIZES: [(&str, usize); 3] = [("1Ki", 1 << 10), ("1Mi", 1 << 20), ("256Mi", 1 << 28)];

fn exchange(c: &mut Criterion) {
  let mut group = c.benchmark_group("exchange");
  group.warm_up_time(Duration::from_millis(500));
  group.measurement_time(Duration::from_secs(2));
  for (label, len) in SIZES {
    // Small batches keep the untouched address space bounded (64 × 1 GiB of untouched pages at 256 Mi).
    let batch = BatchSize::NumIterations(64);
    group.bench_function(BenchmarkId::new("export_versioned", label), |b| {
      b.iter_batched(
        || vec![0f32; len],
        |data| export_versioned(black_box(data)).unwrap(),
        batch,
      )
    });
    group.bench_function(BenchmarkId::new("import_validate", label), |b| {
      b.iter_batched(
        || export_versioned(vec![0f32; len]).unwrap(),
        |managed| ForeignTensor::new(black_box(managed)).unwrap(),
        batch,
      )
    });
  }
  group.finish();

  // Baseline: what the exchange replaces. Sized down at 256 Mi to keep the run short.
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
