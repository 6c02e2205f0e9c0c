//! A hand-rolled "foreign producer" for tests: builds raw DLPack structs with arbitrary (also
//! malformed) metadata and a deleter that counts its calls.

#![allow(dead_code)]

use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use napi_dlpack::ffi::*;
use napi_dlpack::{ForeignTensor, IntoDLPack, ManagedTensor, TensorInfo};

/// Everything a raw tensor needs, kept alive until the deleter runs.
pub struct Spec {
  pub data: Vec<u64>, // u64 storage keeps the bytes 8-aligned
  pub shape: Vec<i64>,
  pub strides: Option<Vec<i64>>,
  pub dtype: DLDataType,
  pub device: DLDevice,
  pub ndim: Option<i32>,
  pub byte_offset: u64,
  pub null_data: bool,
  pub null_shape: bool,
  pub data_address: Option<usize>,
  pub version: DLPackVersion,
  pub flags: u64,
}

impl Spec {
  pub fn f32(shape: &[i64]) -> Spec {
    let numel: i64 = shape.iter().product();
    Spec {
      data: vec![0; (numel.max(1) as usize).div_ceil(2) + 8],
      shape: shape.to_vec(),
      strides: None,
      dtype: DLDataType {
        code: 2,
        bits: 32,
        lanes: 1,
      },
      device: DLDevice {
        device_type: 1,
        device_id: 0,
      },
      ndim: None,
      byte_offset: 0,
      null_data: false,
      null_shape: false,
      data_address: None,
      version: DLPackVersion { major: 1, minor: 3 },
      flags: 0,
    }
  }

  pub fn strides(mut self, strides: &[i64]) -> Spec {
    self.strides = Some(strides.to_vec());
    self
  }
}

struct Owned<M> {
  managed: M,
  spec: Spec,
  calls: Arc<AtomicUsize>,
}

unsafe extern "C" fn delete_versioned(managed: *mut DLManagedTensorVersioned) {
  // SAFETY: test producer: manager_ctx is the Box we leaked in `versioned`.
  let owned = unsafe {
    Box::from_raw(
      (*managed)
        .manager_ctx
        .cast::<Owned<DLManagedTensorVersioned>>(),
    )
  };
  owned.calls.fetch_add(1, Ordering::SeqCst);
}

unsafe extern "C" fn delete_legacy(managed: *mut DLManagedTensor) {
  // SAFETY: as above.
  let owned = unsafe { Box::from_raw((*managed).manager_ctx.cast::<Owned<DLManagedTensor>>()) };
  owned.calls.fetch_add(1, Ordering::SeqCst);
}

fn dl_tensor(spec: &mut Spec) -> DLTensor {
  let data = if spec.null_data {
    std::ptr::null_mut()
  } else if let Some(address) = spec.data_address {
    address as *mut c_void
  } else {
    spec.data.as_mut_ptr().cast()
  };
  DLTensor {
    data,
    device: spec.device,
    ndim: spec.ndim.unwrap_or(spec.shape.len() as i32),
    dtype: spec.dtype,
    shape: if spec.null_shape {
      std::ptr::null_mut()
    } else {
      spec.shape.as_mut_ptr()
    },
    strides: spec
      .strides
      .as_mut()
      .map_or(std::ptr::null_mut(), |s| s.as_mut_ptr()),
    byte_offset: spec.byte_offset,
  }
}

/// A raw versioned tensor and the counter its deleter increments.
pub fn versioned(mut spec: Spec) -> (*mut DLManagedTensorVersioned, Arc<AtomicUsize>) {
  let calls = Arc::new(AtomicUsize::new(0));
  let tensor = dl_tensor(&mut spec);
  let owned = Box::into_raw(Box::new(Owned {
    managed: DLManagedTensorVersioned {
      version: spec.version,
      manager_ctx: std::ptr::null_mut(),
      deleter: Some(delete_versioned),
      flags: spec.flags,
      dl_tensor: tensor,
    },
    spec,
    calls: calls.clone(),
  }));
  // SAFETY: freshly leaked box.
  unsafe {
    (*owned).managed.manager_ctx = owned.cast();
    (&raw mut (*owned).managed, calls)
  }
}

/// A raw legacy tensor and the counter its deleter increments.
pub fn legacy(mut spec: Spec) -> (*mut DLManagedTensor, Arc<AtomicUsize>) {
  let calls = Arc::new(AtomicUsize::new(0));
  let tensor = dl_tensor(&mut spec);
  let owned = Box::into_raw(Box::new(Owned {
    managed: DLManagedTensor {
      dl_tensor: tensor,
      manager_ctx: std::ptr::null_mut(),
      deleter: Some(delete_legacy),
    },
    spec,
    calls: calls.clone(),
  }));
  // SAFETY: freshly leaked box.
  unsafe {
    (*owned).managed.manager_ctx = owned.cast();
    (&raw mut (*owned).managed, calls)
  }
}

/// Imports a versioned spec; returns the result (as codes) and the deleter counter.
pub fn import_versioned(spec: Spec) -> (Result<ForeignTensor, &'static str>, Arc<AtomicUsize>) {
  let (ptr, calls) = versioned(spec);
  // SAFETY: we hand over the only pointer to a live tensor.
  let result = unsafe { ForeignTensor::from_raw_versioned(ptr) }.map_err(|e| e.code());
  (result, calls)
}

pub fn import_legacy(spec: Spec) -> (Result<ForeignTensor, &'static str>, Arc<AtomicUsize>) {
  let (ptr, calls) = legacy(spec);
  // SAFETY: we hand over the only pointer to a live tensor.
  let result = unsafe { ForeignTensor::from_raw_legacy(ptr) }.map_err(|e| e.code());
  (result, calls)
}

/// An exportable value that counts its drops (= deleter calls of its exports).
pub struct Counted<T> {
  pub data: Vec<T>,
  pub info: fn(&mut Vec<T>) -> TensorInfo,
  pub drops: Arc<AtomicUsize>,
}

impl<T> Drop for Counted<T> {
  fn drop(&mut self) {
    self.drops.fetch_add(1, Ordering::SeqCst);
  }
}

// SAFETY: the Vec's buffer is stable and owned by the export; tests only describe memory
// inside it.
unsafe impl<T: Send + 'static> IntoDLPack for Counted<T> {
  fn tensor_info(&mut self) -> TensorInfo {
    (self.info)(&mut self.data)
  }
}

pub fn counted<T: Send + 'static>(
  data: Vec<T>,
  info: fn(&mut Vec<T>) -> TensorInfo,
) -> (Counted<T>, Arc<AtomicUsize>) {
  let drops = Arc::new(AtomicUsize::new(0));
  (
    Counted {
      data,
      info,
      drops: drops.clone(),
    },
    drops,
  )
}

pub fn count(calls: &AtomicUsize) -> usize {
  calls.load(Ordering::SeqCst)
}

/// Keeps a ManagedTensor type reachable for tests that move ownership around.
pub fn drop_managed(managed: ManagedTensor) {
  drop(managed);
}

/// A managed struct stored one byte past an 8-byte boundary, as a careless producer could hand
/// over. Its deleter reads the struct without assuming alignment and counts its calls.
pub struct Misaligned {
  storage: Vec<u64>,
  offset: usize,
  pub calls: Arc<AtomicUsize>,
}

unsafe extern "C" fn count_misaligned_versioned(managed: *mut DLManagedTensorVersioned) {
  // SAFETY: test producer: manager_ctx holds a pointer to the counter, read unaligned.
  let counter = unsafe { (&raw const (*managed).manager_ctx).read_unaligned() };
  // SAFETY: `counter` points into the Arc kept alive by `Misaligned`.
  unsafe { (*counter.cast::<AtomicUsize>()).fetch_add(1, Ordering::SeqCst) };
}

unsafe extern "C" fn count_misaligned_legacy(managed: *mut DLManagedTensor) {
  // SAFETY: as above.
  let counter = unsafe { (&raw const (*managed).manager_ctx).read_unaligned() };
  // SAFETY: as above.
  unsafe { (*counter.cast::<AtomicUsize>()).fetch_add(1, Ordering::SeqCst) };
}

impl Misaligned {
  /// Structs one byte past an 8-byte boundary.
  pub fn new() -> Misaligned {
    Misaligned::at_offset(1)
  }

  /// Structs `offset` (0..=7) bytes past an 8-byte boundary. Offset 4 keeps the low bit clear,
  /// which the crate uses to tag legacy pointers, and x86 reads such structs without faulting:
  /// if the alignment check were gone the import would go on and succeed, and the test's
  /// assertion (not a crash) reports it. Offset 0 gives aligned structs whose deleter only
  /// counts (nothing is freed): a second deleter call is then a count an assertion sees, not a
  /// double free that aborts the test binary.
  pub fn at_offset(offset: usize) -> Misaligned {
    assert!(offset < 8);
    Misaligned {
      storage: vec![0; 32],
      offset,
      calls: Arc::new(AtomicUsize::new(0)),
    }
  }

  fn slot(&mut self) -> *mut u8 {
    // SAFETY: at most 7 bytes into a 256-byte buffer; both structs fit after it.
    unsafe { self.storage.as_mut_ptr().cast::<u8>().add(self.offset) }
  }

  fn counter(&self) -> *mut c_void {
    Arc::as_ptr(&self.calls) as *mut c_void
  }

  /// A versioned struct of an empty f32 tensor at an odd address.
  pub fn versioned(&mut self) -> *mut DLManagedTensorVersioned {
    let managed = DLManagedTensorVersioned {
      version: DLPackVersion { major: 1, minor: 3 },
      manager_ctx: self.counter(),
      deleter: Some(count_misaligned_versioned),
      flags: 0,
      dl_tensor: empty_tensor(),
    };
    let slot = self.slot().cast::<DLManagedTensorVersioned>();
    // SAFETY: `slot` has room for the struct; the write does not need alignment.
    unsafe { slot.write_unaligned(managed) };
    slot
  }

  /// A legacy struct at an odd address.
  pub fn legacy(&mut self) -> *mut DLManagedTensor {
    let managed = DLManagedTensor {
      dl_tensor: empty_tensor(),
      manager_ctx: self.counter(),
      deleter: Some(count_misaligned_legacy),
    };
    let slot = self.slot().cast::<DLManagedTensor>();
    // SAFETY: as above.
    unsafe { slot.write_unaligned(managed) };
    slot
  }
}

fn empty_tensor() -> DLTensor {
  DLTensor {
    data: std::ptr::null_mut(),
    device: DLDevice {
      device_type: 1,
      device_id: 0,
    },
    ndim: 0,
    dtype: DLDataType {
      code: 2,
      bits: 32,
      lanes: 1,
    },
    shape: std::ptr::null_mut(),
    strides: std::ptr::null_mut(),
    byte_offset: 0,
  }
}

/// A producer of a future major version whose allocation holds ONLY the prefix every major
/// keeps (`version`, `manager_ctx`, `deleter`: 24 bytes on 64-bit targets), as DLPack allows:
/// a consumer must read nothing past it before it has checked the major version. Miri reports
/// any reference to the full 80-byte struct made from this pointer.
pub struct PrefixOnly;

/// The prefix of `DLManagedTensorVersioned` that is stable across majors.
#[repr(C)]
struct StablePrefix {
  version: DLPackVersion,
  manager_ctx: *mut c_void,
  deleter: Option<DLManagedTensorVersionedDeleter>,
}

const _: () = {
  assert!(
    std::mem::offset_of!(StablePrefix, version)
      == std::mem::offset_of!(DLManagedTensorVersioned, version)
  );
  assert!(
    std::mem::offset_of!(StablePrefix, manager_ctx)
      == std::mem::offset_of!(DLManagedTensorVersioned, manager_ctx)
  );
  assert!(
    std::mem::offset_of!(StablePrefix, deleter)
      == std::mem::offset_of!(DLManagedTensorVersioned, deleter)
  );
};

unsafe extern "C" fn delete_prefix_only(managed: *mut DLManagedTensorVersioned) {
  let prefix = managed.cast::<StablePrefix>();
  // SAFETY: test producer: `manager_ctx` holds a leaked `Arc<AtomicUsize>` (see `make`), and
  // only the prefix is read.
  let calls = unsafe { Arc::from_raw((*prefix).manager_ctx.cast::<AtomicUsize>()) };
  calls.fetch_add(1, Ordering::SeqCst);
  // SAFETY: `prefix` is the Box allocated in `make`, freed once.
  drop(unsafe { Box::from_raw(prefix) });
}

impl PrefixOnly {
  /// A tensor of major version `major` allocated as the prefix only, and its deleter counter.
  pub fn make(major: u32) -> (*mut DLManagedTensorVersioned, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let prefix = Box::new(StablePrefix {
      version: DLPackVersion { major, minor: 0 },
      manager_ctx: Arc::into_raw(calls.clone()) as *mut c_void,
      deleter: Some(delete_prefix_only),
    });
    (Box::into_raw(prefix).cast(), calls)
  }

  /// Bytes the producer allocated.
  pub const SIZE: usize = std::mem::size_of::<StablePrefix>();
}

/// Runs `body` in a child process (this test binary, filtered to exactly `test_name`, which
/// must be the calling test) and asserts that the child ran it to the end.
///
/// For tests of checks whose absence would not fail an assertion but abort the process: a
/// refused pointer that reached `slice::from_raw_parts` trips the standard library's debug
/// precondition check, which aborts the whole test binary. In a child the abort becomes this
/// assertion's failure, naming the test. Under Miri (no processes) `body` runs in place.
pub fn in_child_process(test_name: &str, body: impl FnOnce()) {
  const CHILD: &str = "NAPI_DLPACK_TEST_CHILD";
  let finished = format!("child finished: {test_name}");
  if cfg!(miri) || std::env::var(CHILD).as_deref() == Ok(test_name) {
    body();
    println!("{finished}");
    return;
  }
  let exe = std::env::current_exe().expect("the test binary's path");
  let output = std::process::Command::new(exe)
    .args([test_name, "--exact", "--nocapture", "--test-threads=1"])
    .env(CHILD, test_name)
    .output()
    .expect("the test binary runs");
  let stdout = String::from_utf8_lossy(&output.stdout);
  assert!(
    output.status.success() && stdout.contains(&finished),
    "{test_name} did not complete in its child process ({}): a refused pointer was used?\n\
     --- stdout\n{stdout}\n--- stderr\n{}",
    output.status,
    String::from_utf8_lossy(&output.stderr)
  );
}
