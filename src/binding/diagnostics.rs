//! Bindings for tests, leak checks and diagnostics: what the product (lib/) never calls. Kept in
//! one module so the product's surface reads apart from them; each reads a fact and changes
//! nothing.

use napi::bindgen_prelude::Unknown;
use napi::Env;
use napi_derive::napi;
use napi_dlpack::{cuda, DType};

use crate::errors::Result;
use crate::js_memory;
use crate::ops::transfer;
use crate::own_capsule::handle_of;
use crate::storage::LIVE_STORAGES;

/// Layout and flags of a handle, read once per JS tensor (`handleInfoInto` writes the same
/// facts as numbers: see `TensorLayout::write_slots`).
#[napi(object, js_name = "TensorLayout")]
pub struct TensorLayoutObject {
  pub dtype: String,
  pub shape: Vec<i64>,
  pub strides: Vec<i64>,
  /// DLPack byte_offset an export of this tensor carries.
  pub byte_offset: i64,
  pub device_type: u32,
  pub device_id: i32,
  /// JS spelling (`TensorLayout::read_only`).
  pub readonly: bool,
  /// JS spelling (`TensorLayout::copied`).
  pub is_copy: bool,
  pub contiguous: bool,
  pub numel: i64,
  /// Element offset of the first element inside the `.data` view (non-zero with negative
  /// strides).
  pub view_offset: i64,
  /// Elements the `.data` view spans (from the lowest to the highest element).
  pub view_length: i64,
  pub version: Option<Vec<u32>>,
  pub flags: i64,
}

#[napi(js_name = "handleInfo")]
pub fn handle_info(env: &Env, handle: Unknown<'_>) -> Result<TensorLayoutObject> {
  let handle = handle_of(env, &handle)?;
  let storage = handle.storage()?;
  let layout = &handle.layout;
  Ok(TensorLayoutObject {
    dtype: layout.dtype.name().to_string(),
    shape: layout.shape.to_vec(),
    strides: layout.strides.to_vec(),
    byte_offset: storage.export_byte_offset(layout) as i64,
    device_type: layout.device.device_type as u32,
    device_id: layout.device.id,
    readonly: layout.read_only,
    is_copy: layout.copied,
    contiguous: layout.contiguous,
    numel: layout.numel as i64,
    view_offset: -layout.min_offset,
    view_length: layout.span_elements() as i64,
    version: layout.version.map(|(major, minor)| vec![major, minor]),
    flags: layout.flags as i64,
  })
}

/// The ArrayBuffer limit in force, in bytes (see `setArrayBufferLimit`).
#[napi(js_name = "arrayBufferLimit")]
pub fn array_buffer_limit() -> f64 {
  js_memory::max_arraybuffer_bytes() as f64
}

/// Process-wide counters for leak checks: storages (memory regions) still alive.
#[napi(object)]
pub struct NativeStats {
  pub live_storages: u32,
  /// References this thread's exchange-table state holds (2 once installed).
  pub exchange_references: u32,
  /// Handle-id slots this thread holds (live ids, and slots pinned by a borrow).
  pub live_slots: u32,
}

#[napi(js_name = "nativeStats")]
pub fn native_stats() -> NativeStats {
  NativeStats {
    live_storages: LIVE_STORAGES.load(std::sync::atomic::Ordering::Relaxed) as u32,
    exchange_references: crate::exchange::live_references(),
    live_slots: crate::slots::live_slots(),
  }
}

/// Names of every dtype, in the order of `DType::ALL`.
#[napi(js_name = "dtypeNames")]
pub fn dtype_names() -> Vec<&'static str> {
  DType::ALL.iter().map(|dtype| dtype.name()).collect()
}

/// Counters of the CUDA release paths (frees and producer deleters that cannot report errors):
/// `pending` releases still waiting on the release thread, `errors` driver failures there.
#[napi(object)]
pub struct CudaReleaseStats {
  pub pending: u32,
  pub errors: u32,
}

/// What the CUDA release paths did (tests and diagnostics). Never throws.
#[napi(js_name = "cudaReleaseStats")]
pub fn cuda_release_stats() -> CudaReleaseStats {
  let stats = cuda::release_stats();
  CudaReleaseStats {
    pending: stats.pending as u32,
    errors: stats.errors as u32,
  }
}

#[napi(object)]
pub struct CudaStagingStats {
  /// Page-locked staging chunks allocated now (all devices).
  pub chunks: u32,
  pub chunk_bytes: u32,
  /// Copies that went through the staging pipeline so far.
  pub staged: u32,
  /// Copies large enough to stage that took the direct path (no pinned memory; pool busy).
  pub fallbacks: u32,
  /// Pools dropped because their device was reset under us.
  pub pools_lost: u32,
  /// Copies of fewer bytes than this take the direct path.
  pub min_bytes: u32,
  /// The smallest piece a staged copy is cut into.
  pub min_piece_bytes: u32,
}

/// What the pinned staging pipeline did (tests and diagnostics). Never throws.
#[napi(js_name = "cudaStagingStats")]
pub fn cuda_staging_stats() -> CudaStagingStats {
  let stats = cuda::staging_stats();
  CudaStagingStats {
    chunks: stats.chunks as u32,
    chunk_bytes: stats.chunk_bytes as u32,
    staged: stats.staged as u32,
    fallbacks: stats.fallbacks as u32,
    pools_lost: stats.pools_lost as u32,
    min_bytes: cuda::STAGING_MIN_BYTES as u32,
    min_piece_bytes: cuda::MIN_PIECE_BYTES as u32,
  }
}

/// Tokens made and not yet claimed or released, in the whole process (leak checks).
#[napi(js_name = "pendingTransfers")]
pub fn pending_transfers() -> u32 {
  transfer::pending_count() as u32
}

/// Makes `cycles` handles over `handle`'s storage and layout, one after another, each taking an
/// id and letting go of it (the alloc/free cycle of a tensor that is made, used by id and
/// disposed, without the JS-side cost of `Tensor.from`); returns the last id. For the slot-reuse
/// test (`__test__/abi/handle-ids.spec.ts`).
#[napi(js_name = "cycleHandleIds")]
pub fn cycle_handle_ids(env: &Env, handle: Unknown<'_>, cycles: u32) -> Result<f64> {
  let handle = handle_of(env, &handle)?;
  let storage = handle.storage()?.clone();
  let layout = handle.layout.clone();
  let mut last = 0;
  for _ in 0..cycles {
    let mut cycled = crate::handle::Handle::new(storage.clone(), layout.clone());
    last = cycled.id(env)?;
    drop(cycled); // lets go of the slot
  }
  Ok(last as f64)
}
