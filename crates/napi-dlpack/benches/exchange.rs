//! Export and import+validate of a `Vec<f32>`, timing the exchange only.
//!
//! Method: a pool of `IMPORT_BATCH` vectors per size is allocated once (`vec![0.0; n]` gets
//! fresh, untouched zero pages from the allocator, so 64 × 1 GiB costs address space, not
//! memory). Each timed batch exports vectors (or imports exported tensors); between batches,
//! untimed, `take_owner` hands each vector back without running the deleter (and
//! `ForeignTensor::into_managed` hands each import back), so no buffer is ever allocated or
//! freed inside a timed region and the allocator stays in its steady state — the state an addon
//! exchanging tensors in a loop is in. The baseline in the same run is the copy a consumer would
//! otherwise make (`to_vec`), which scales with the size.
//!
//! Two measurements:
//! - criterion, one size after another (its usual statistics and reports);
//! - an interleaved pass afterwards that cycles through the sizes in rounds and reports the
//!   median per size. On a shared VM the speed of identical code drifts by tens of percent over
//!   seconds, more than any real difference between sizes, so only measurements taken side by
//!   side say whether the cost is flat.
//!
//! And side by side with dlpark (the `vs_dlpark` group), the exchange's own cost with the data
//! kept out of it: export + release of a 1-d `f32` tensor whose owner frees nothing (ours:
//! `export_versioned` of a no-op owner; dlpark: its builders with a no-op context, at run-time
//! rank (`Dynamic`, also followed by its `validate_export`, since ours validates what it exports)
//! and compile-time rank (`Fixed`)), and import + validate + release of one
//! static `DLManagedTensorVersioned` with a no-op deleter (ours: `ForeignTensor::new`; dlpark:
//! `Managed::from_raw` + `validate`). `EXCHANGE_CALLGRIND=<case>:<n>` runs one of these `n`
//! times and exits, for instruction counts: `node benches/callgrind/exchange.mjs`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use std::ffi::c_void;

use criterion::{criterion_group, BenchmarkId, Criterion};
use napi_dlpack::ffi::{DLManagedTensorVersioned, DLPackVersion, DLTensor};
use napi_dlpack::{
  export_versioned, take_owner, DType, ForeignTensor, IntoDLPack, ManagedTensor, TensorInfo,
};

const SIZES: [(&str, usize); 3] = [("1Ki", 1 << 10), ("1Mi", 1 << 20), ("256Mi", 1 << 28)];
/// Exports per timed batch. Seven in flight at a time fit glibc's per-thread allocation cache
/// (7 entries per size class): the allocator state of an addon that exchanges tensors one
/// after another. The timer overhead (one clock read per batch, ~45 ns on this VM, so ~6 ns
/// per export) is included in the result.
const EXPORT_BATCH: usize = 7;
/// Imports per timed batch: an import allocates nothing, so a larger batch only dilutes the
/// timer overhead (under 1 ns per import).
const IMPORT_BATCH: usize = 64;
/// Rounds of the interleaved pass, and timed operations per size and operation in each round.
const ROUNDS: usize = 41;
const OPS_PER_ROUND: usize = 50_000;

/// Times `ops` exports, `EXPORT_BATCH` at a time, recycling the vectors outside the timer.
fn time_exports(pool: &mut Vec<Vec<f32>>, ops: u64) -> Duration {
  let mut total = Duration::ZERO;
  let mut exported: Vec<ManagedTensor> = Vec::with_capacity(EXPORT_BATCH);
  let mut done = 0;
  while done < ops {
    let n = EXPORT_BATCH.min((ops - done) as usize);
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
}

/// Times `ops` imports, `IMPORT_BATCH` at a time, handing the tensors back outside the timer.
fn time_imports(managed: &mut Vec<ManagedTensor>, ops: u64) -> Duration {
  let mut total = Duration::ZERO;
  let mut imported: Vec<ForeignTensor> = Vec::with_capacity(IMPORT_BATCH);
  let mut done = 0;
  while done < ops {
    let n = IMPORT_BATCH.min((ops - done) as usize);
    let start = Instant::now();
    for tensor in managed.drain(..n) {
      imported.push(ForeignTensor::new(black_box(tensor)).unwrap());
    }
    total += start.elapsed();
    managed.extend(imported.drain(..).map(ForeignTensor::into_managed));
    done += n as u64;
  }
  total
}

fn pool_of(len: usize) -> Vec<Vec<f32>> {
  (0..IMPORT_BATCH).map(|_| vec![0f32; len]).collect()
}

fn exchange(c: &mut Criterion) {
  let mut group = c.benchmark_group("exchange");
  group.warm_up_time(Duration::from_millis(500));
  group.measurement_time(Duration::from_secs(2));
  for (label, len) in SIZES {
    let mut pool = pool_of(len);
    group.bench_function(BenchmarkId::new("export_versioned", label), |b| {
      b.iter_custom(|iters| time_exports(&mut pool, iters))
    });
    let mut managed: Vec<ManagedTensor> = pool
      .drain(..)
      .map(|data| export_versioned(data).unwrap())
      .collect();
    group.bench_function(BenchmarkId::new("import_validate", label), |b| {
      b.iter_custom(|iters| time_imports(&mut managed, iters))
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

fn median(samples: &mut [f64]) -> f64 {
  samples.sort_by(f64::total_cmp);
  samples[samples.len() / 2]
}

/// The interleaved pass: in every round, each size is timed for both operations, so drift of
/// the machine hits all sizes alike. Prints the median ns per operation and slowest/fastest.
fn interleaved(_: &mut Criterion) {
  // Respect criterion's filter argument loosely: skip when a filter names something else.
  let filter = std::env::args().skip(1).find(|arg| !arg.starts_with('-'));
  if filter.is_some_and(|filter| !"interleaved".contains(filter.as_str())) {
    return;
  }
  let mut pools: Vec<Vec<Vec<f32>>> = SIZES.iter().map(|&(_, len)| pool_of(len)).collect();
  let mut export_ns = vec![Vec::with_capacity(ROUNDS); SIZES.len()];
  let mut import_ns = vec![Vec::with_capacity(ROUNDS); SIZES.len()];
  let ops = OPS_PER_ROUND as u64;
  for round in 0..=ROUNDS {
    for (size, pool) in pools.iter_mut().enumerate() {
      let export = time_exports(pool, ops);
      let mut managed: Vec<ManagedTensor> = pool
        .drain(..)
        .map(|data| export_versioned(data).unwrap())
        .collect();
      let import = time_imports(&mut managed, ops);
      for exported in managed {
        let Ok(data) = take_owner::<Vec<f32>>(exported) else {
          panic!("our own export must be recognised");
        };
        pool.push(data);
      }
      if round > 0 {
        // round 0 warms caches and the allocator up
        export_ns[size].push(export.as_nanos() as f64 / ops as f64);
        import_ns[size].push(import.as_nanos() as f64 / ops as f64);
      }
    }
  }
  println!(
    "\ninterleaved: median ns/op over {ROUNDS} rounds of {OPS_PER_ROUND} ops per size, sizes cycled within each round"
  );
  for (name, samples) in [
    ("export_versioned", export_ns),
    ("import_validate", import_ns),
  ] {
    let medians: Vec<f64> = samples.into_iter().map(|mut s| median(&mut s)).collect();
    let cells: Vec<String> = SIZES
      .iter()
      .zip(&medians)
      .map(|((label, _), ns)| format!("{label} {ns:.1} ns"))
      .collect();
    let slowest = medians.iter().copied().fold(f64::MIN, f64::max);
    let fastest = medians.iter().copied().fold(f64::MAX, f64::min);
    println!(
      "interleaved/{name}: {}  slowest/fastest {:.2}",
      cells.join("  "),
      slowest / fastest
    );
  }
}

/// Elements of the tensor in the dlpark comparison (its data is never touched).
const COMPARE_LEN: i64 = 1 << 10;

/// Memory the comparison's exports describe: allocated once, never freed.
fn compare_data() -> *mut f32 {
  static DATA: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
  *DATA.get_or_init(|| {
    Box::leak(vec![0f32; COMPARE_LEN as usize].into_boxed_slice()).as_mut_ptr() as usize
  }) as *mut f32
}

/// An owner that frees nothing, so export + release costs the exchange only (dlpark's own
/// bench does the same with a no-op context).
struct NoopOwner {
  data: *mut f32,
  /// Read at run time (through `black_box`), as dlpark's shape is: no constant folding.
  len: i64,
}

// SAFETY: the pointer is to memory that is never freed; nothing is dropped.
unsafe impl Send for NoopOwner {}

// SAFETY: `compare_data` lives for the whole process and holds COMPARE_LEN elements.
unsafe impl IntoDLPack for NoopOwner {
  fn tensor_info(&mut self) -> TensorInfo {
    TensorInfo::contiguous(self.data.cast::<c_void>(), DType::Float32, &[self.len])
  }
}

struct NoopContext;

// SAFETY: nothing to release; callable from any thread.
unsafe impl dlpark::OpaqueContext for NoopContext {
  fn into_raw(self) -> *mut c_void {
    std::ptr::null_mut()
  }

  unsafe fn drop_raw(_raw: *mut c_void) {}
}

fn ours_export() {
  let owner = NoopOwner {
    data: compare_data(),
    len: black_box(COMPARE_LEN),
  };
  let managed = export_versioned(owner).unwrap();
  drop(black_box(managed));
}

fn dlpark_float32() -> dlpark::ffi::DLDataType {
  dlpark::ffi::DLDataType {
    code: dlpark::ffi::DLDataTypeCode::FLOAT,
    bits: 32,
    lanes: 1,
  }
}

fn dlpark_cpu() -> dlpark::ffi::DLDevice {
  dlpark::ffi::DLDevice {
    device_type: dlpark::ffi::DLDeviceType::CPU,
    device_id: 0,
  }
}

fn dlpark_export_runtime_rank() {
  let shape = [black_box(COMPARE_LEN)];
  let mut initialized = dlpark::metadata::Dynamic::compact(shape.as_slice())
    .initialize(NoopContext)
    .unwrap();
  initialized
    .set_data(compare_data().cast())
    .set_dtype(dlpark_float32())
    .set_device(dlpark_cpu());
  // SAFETY: the data lives for the process; the builder set shape and strides.
  let managed = unsafe { initialized.finish() };
  drop(black_box(managed));
}

/// dlpark's run-time-rank export followed by its own export validation (`validate_export`):
/// what ours does, since `export_versioned` validates the layout it is given.
fn dlpark_export_runtime_rank_validated() {
  let shape = [black_box(COMPARE_LEN)];
  let mut initialized = dlpark::metadata::Dynamic::compact(shape.as_slice())
    .initialize(NoopContext)
    .unwrap();
  initialized
    .set_data(compare_data().cast())
    .set_dtype(dlpark_float32())
    .set_device(dlpark_cpu());
  // SAFETY: as above.
  let managed = unsafe { initialized.finish() };
  black_box(managed.validate_export().unwrap());
  drop(black_box(managed));
}

fn dlpark_export_compile_time_rank() {
  let shape = [black_box(COMPARE_LEN)];
  let strides = [1i64];
  let mut initialized = dlpark::metadata::Fixed::new(&shape, &strides)
    .initialize_as::<dlpark::ffi::DLManagedTensorVersioned>(NoopContext)
    .unwrap();
  initialized
    .set_data(compare_data().cast())
    .set_dtype(dlpark_float32())
    .set_device(dlpark_cpu());
  // SAFETY: as above.
  let managed = unsafe { initialized.finish() };
  drop(black_box(managed));
}

unsafe extern "C" fn noop_deleter(_: *mut DLManagedTensorVersioned) {}

/// One versioned tensor with a no-op deleter, for repeated imports (never freed).
fn static_tensor() -> *mut DLManagedTensorVersioned {
  static TENSOR: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
  *TENSOR.get_or_init(|| {
    let dims: &'static mut [i64; 2] = Box::leak(Box::new([COMPARE_LEN, 1]));
    let managed = Box::leak(Box::new(DLManagedTensorVersioned {
      version: DLPackVersion::CURRENT,
      manager_ctx: std::ptr::null_mut(),
      deleter: Some(noop_deleter),
      flags: 0,
      dl_tensor: DLTensor {
        data: compare_data().cast(),
        device: napi_dlpack::Device::CPU.to_dl(),
        ndim: 1,
        dtype: DType::Float32.to_dl(),
        shape: dims.as_mut_ptr(),
        // SAFETY: one past the shape, inside `dims`.
        strides: unsafe { dims.as_mut_ptr().add(1) },
        byte_offset: 0,
      },
    }));
    managed as *mut DLManagedTensorVersioned as usize
  }) as *mut DLManagedTensorVersioned
}

fn ours_import() {
  // SAFETY: a live versioned tensor whose deleter does nothing, so it can be taken repeatedly.
  let managed = unsafe { ManagedTensor::from_raw_versioned(black_box(static_tensor())) }.unwrap();
  let tensor = ForeignTensor::new(managed).unwrap();
  black_box(tensor.layout());
  drop(tensor);
}

fn dlpark_import() {
  let raw = black_box(static_tensor()).cast::<dlpark::ffi::DLManagedTensorVersioned>();
  // SAFETY: as above; dlpark's struct has the same layout (checked in ffi.rs's tests).
  let managed = unsafe { dlpark::versioned::Dlpack::from_raw(raw) }.unwrap();
  black_box(managed.validate().unwrap());
  drop(managed);
}

/// The cases of the dlpark comparison, by name.
const COMPARISON: [(&str, fn()); 6] = [
  ("export_release/ours", ours_export),
  (
    "export_release/dlpark_runtime_rank",
    dlpark_export_runtime_rank,
  ),
  (
    "export_release/dlpark_runtime_rank_validated",
    dlpark_export_runtime_rank_validated,
  ),
  (
    "export_release/dlpark_compile_time_rank",
    dlpark_export_compile_time_rank,
  ),
  ("import_validate_release/ours", ours_import),
  ("import_validate_release/dlpark", dlpark_import),
];

fn vs_dlpark(c: &mut Criterion) {
  let mut group = c.benchmark_group("vs_dlpark");
  group.warm_up_time(Duration::from_millis(500));
  group.measurement_time(Duration::from_secs(2));
  for (name, case) in COMPARISON {
    group.bench_function(name, |b| b.iter(case));
  }
  group.finish();

  // Interleaved: every round times each case in turn, so the machine's drift hits all alike.
  const ROUNDS: usize = 101;
  const OPS: u32 = 20_000;
  let mut samples = vec![Vec::with_capacity(ROUNDS); COMPARISON.len()];
  for round in 0..=ROUNDS {
    for ((_, case), samples) in COMPARISON.iter().zip(&mut samples) {
      let start = Instant::now();
      for _ in 0..OPS {
        case();
      }
      if round > 0 {
        samples.push(start.elapsed().as_nanos() as f64 / f64::from(OPS));
      }
    }
  }
  println!("\ninterleaved_vs_dlpark: median ns/op over {ROUNDS} rounds of {OPS} ops per case");
  for ((name, _), mut samples) in COMPARISON.iter().zip(samples) {
    println!(
      "interleaved_vs_dlpark/{name}: {:.1} ns",
      median(&mut samples)
    );
  }
}

criterion_group!(benches, exchange, interleaved, vs_dlpark);

fn main() {
  // `EXCHANGE_CALLGRIND=<case>:<n>`: run one comparison case n times (under callgrind).
  if let Ok(spec) = std::env::var("EXCHANGE_CALLGRIND") {
    let (name, count) = spec.split_once(':').expect("EXCHANGE_CALLGRIND=<case>:<n>");
    let count: u64 = count.parse().expect("a count");
    let (_, case) = COMPARISON
      .iter()
      .find(|(case, _)| *case == name)
      .unwrap_or_else(|| panic!("unknown case {name}"));
    // Lazily made statics first, so the counts hold the loop only.
    compare_data();
    static_tensor();
    for _ in 0..count {
      case();
    }
    return;
  }
  benches();
  Criterion::default().configure_from_args().final_summary();
}
