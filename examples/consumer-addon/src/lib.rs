//! An addon that is *not* part of napi-dlpack, built on its own, exchanging tensors with the
//! `napi-dlpack` npm package (and any other capsule-ABI addon) through JavaScript, zero-copy.
//!
//! - `makeMatrix` / `makeTransposedMatrix` export a Rust-owned matrix as a DLPack capsule;
//! - `fwhtRowsInPlace` imports a capsule and runs the Walsh–Hadamard transform over its rows,
//!   writing into the producer's memory;
//! - `describe` imports a capsule and reports its metadata;
//! - `countTrue` imports a bool tensor of any layout and counts its `true` elements;
//! - `liveMatrices` / `lastExportedPointer` let tests check the deleter and the zero-copy path.

#![deny(clippy::all)]
#![deny(unsafe_op_in_unsafe_fn)]

use std::ffi::c_void;
use std::ops::{Add, Sub};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

pub mod guide;
pub mod hot;
pub mod typed;

use napi::bindgen_prelude::{BigInt, Unknown};
use napi::Env;
use napi_derive::napi;
use napi_dlpack::capsule;
use napi_dlpack::{
  DLPackError, DType, ErrorKind, ExportFormat, ForeignTensor, IntoDLPack, TensorInfo,
};

/// `From<DLPackError> for napi::Error<&'static str>` puts the crate's stable code
/// (`ERR_DLPACK_*`) on the thrown JS error's `code`, so `?` is all the glue needed.
type Result<T> = std::result::Result<T, napi::Error<&'static str>>;

fn fail(kind: ErrorKind, message: impl Into<String>) -> napi::Error<&'static str> {
  DLPackError::new(kind, message).into()
}

// ---------------------------------------------------------------------------------------------
// Export: a Rust-owned matrix as a DLPack tensor
// ---------------------------------------------------------------------------------------------

/// Matrices alive right now (created and not yet dropped). A DLPack deleter may run on any
/// thread, so this is an atomic rather than a thread-local.
static LIVE_MATRICES: AtomicUsize = AtomicUsize::new(0);
/// Address of the first element of the most recent export (for zero-copy checks).
static LAST_EXPORTED_POINTER: AtomicU64 = AtomicU64::new(0);

/// The elements, in one of the two dtypes the example supports.
enum Elements {
  F32(Vec<f32>),
  F64(Vec<f64>),
}

/// A dense `rows × cols` matrix, row-major in memory. Exported either as itself (shape
/// `[rows, cols]`, strides `[cols, 1]`) or as its transpose, a non-contiguous view of the same
/// memory (shape `[cols, rows]`, strides `[1, cols]`).
pub struct Matrix {
  rows: usize,
  cols: usize,
  elements: Elements,
  transposed: bool,
}

/// Largest matrix the example agrees to allocate (elements), so a typo in JS cannot abort the
/// process on an allocation failure.
const MAX_ELEMENTS: usize = 1 << 28;

impl Matrix {
  /// Element `(i, j)` holds `i * cols + j`, its row-major index (exact in float32 up to 2^24).
  fn new(rows: u32, cols: u32, dtype: DType, transposed: bool) -> Result<Matrix> {
    let (rows, cols) = (rows as usize, cols as usize);
    let count = rows
      .checked_mul(cols)
      .filter(|&count| count <= MAX_ELEMENTS)
      .ok_or_else(|| {
        fail(
          ErrorKind::InvalidArgument,
          format!("a {rows}x{cols} matrix is too large"),
        )
      })?;
    let elements = match dtype {
      DType::Float32 => Elements::F32((0..count).map(|k| k as f32).collect()),
      DType::Float64 => Elements::F64((0..count).map(|k| k as f64).collect()),
      other => {
        return Err(fail(
          ErrorKind::InvalidArgument,
          format!("dtype must be 'float32' or 'float64', got '{other}'"),
        ))
      }
    };
    LIVE_MATRICES.fetch_add(1, Ordering::SeqCst);
    Ok(Matrix {
      rows,
      cols,
      elements,
      transposed,
    })
  }
}

impl Drop for Matrix {
  /// Runs inside the DLPack deleter: on the JS thread, on a worker thread, or wherever the
  /// last consumer released the tensor.
  fn drop(&mut self) {
    LIVE_MATRICES.fetch_sub(1, Ordering::SeqCst);
  }
}

// SAFETY:
// - the described memory is the `rows * cols` elements of `elements`, a Vec allocated once in
//   `Matrix::new`: valid for the dtype, on the CPU, and the transposed view reaches exactly
//   the same elements (max offset (cols-1)*1 + (rows-1)*cols = rows*cols - 1);
// - the Vec is never resized and is freed only when the Matrix drops, which napi-dlpack does
//   inside the deleter; moving the Matrix (into the export allocation) does not move the heap
//   buffer;
// - the export owns the only Matrix and Rust never touches the elements after export, so the
//   consumer is the only writer; the pointer comes from `&mut self` (`as_mut_ptr`), so writes
//   through it are allowed;
// - Matrix is `Send` (`Vec<f32|f64>` and integers): it may be dropped on any thread.
unsafe impl IntoDLPack for Matrix {
  fn tensor_info(&mut self) -> TensorInfo {
    let (data, dtype) = match &mut self.elements {
      Elements::F32(values) => (values.as_mut_ptr().cast::<c_void>(), DType::Float32),
      Elements::F64(values) => (values.as_mut_ptr().cast::<c_void>(), DType::Float64),
    };
    LAST_EXPORTED_POINTER.store(data as usize as u64, Ordering::SeqCst);
    let (rows, cols) = (self.rows as i64, self.cols as i64);
    if self.transposed {
      TensorInfo::strided(data, dtype, &[cols, rows], &[1, cols])
    } else {
      TensorInfo::contiguous(data, dtype, &[rows, cols])
    }
  }
}

/// Options of the two matrix exports.
#[napi(object)]
pub struct ExportOptions {
  /// Produce a legacy (DLPack 0.x) `DLManagedTensor` instead of the versioned struct.
  pub legacy: Option<bool>,
}

fn export_matrix<'env>(
  env: &'env Env,
  matrix: Matrix,
  options: Option<ExportOptions>,
) -> Result<Unknown<'env>> {
  let format = match options.and_then(|options| options.legacy) {
    Some(true) => ExportFormat::Legacy,
    _ => ExportFormat::Versioned,
  };
  // On error the matrix has been dropped already (LIVE_MATRICES stays balanced).
  Ok(capsule::env::export(env, matrix, format)?)
}

fn parse_dtype(dtype: &str) -> Result<DType> {
  match DType::from_name(dtype) {
    Some(dtype @ (DType::Float32 | DType::Float64)) => Ok(dtype),
    _ => Err(fail(
      ErrorKind::InvalidArgument,
      format!("dtype must be 'float32' or 'float64', got {dtype:?}"),
    )),
  }
}

/// A new `rows × cols` matrix whose element `(i, j)` is `i * cols + j`, exported as a
/// consume-once DLPack capsule (shape `[rows, cols]`, row-major). The memory is Rust's and is
/// freed when the consumer releases the tensor.
#[napi(
  js_name = "makeMatrix",
  ts_args_type = "rows: number, cols: number, dtype: 'float32' | 'float64', options?: ExportOptions",
  ts_return_type = "DLPackCapsule"
)]
pub fn make_matrix<'env>(
  env: &'env Env,
  rows: u32,
  cols: u32,
  dtype: String,
  options: Option<ExportOptions>,
) -> Result<Unknown<'env>> {
  let matrix = Matrix::new(rows, cols, parse_dtype(&dtype)?, false)?;
  export_matrix(env, matrix, options)
}

/// The transpose of `makeMatrix(rows, cols, dtype)` without copying: shape `[cols, rows]`,
/// strides `[1, cols]` over the same row-major buffer (element `(j, i)` is `i * cols + j`).
#[napi(
  js_name = "makeTransposedMatrix",
  ts_args_type = "rows: number, cols: number, dtype: 'float32' | 'float64', options?: ExportOptions",
  ts_return_type = "DLPackCapsule"
)]
pub fn make_transposed_matrix<'env>(
  env: &'env Env,
  rows: u32,
  cols: u32,
  dtype: String,
  options: Option<ExportOptions>,
) -> Result<Unknown<'env>> {
  let matrix = Matrix::new(rows, cols, parse_dtype(&dtype)?, true)?;
  export_matrix(env, matrix, options)
}

/// Matrices created by this addon and not yet freed by their DLPack deleter.
#[napi(js_name = "liveMatrices")]
pub fn live_matrices() -> u32 {
  LIVE_MATRICES.load(Ordering::SeqCst) as u32
}

/// Address of the first element of the most recently exported matrix.
#[napi(js_name = "lastExportedPointer")]
pub fn last_exported_pointer() -> BigInt {
  BigInt::from(LAST_EXPORTED_POINTER.load(Ordering::SeqCst))
}

// ---------------------------------------------------------------------------------------------
// Import: an in-place fast Walsh–Hadamard transform over each row
// ---------------------------------------------------------------------------------------------

/// Unnormalised in-place FWHT of one row (length a power of two): `H·x` with `H` the
/// Sylvester–Hadamard matrix of ±1 entries, so applying it twice gives `n·x`.
fn fwht<T: Copy + Add<Output = T> + Sub<Output = T>>(row: &mut [T]) {
  let n = row.len();
  let mut half = 1;
  while half < n {
    for block in row.chunks_exact_mut(2 * half) {
      let (low, high) = block.split_at_mut(half);
      for (a, b) in low.iter_mut().zip(high.iter_mut()) {
        let (x, y) = (*a, *b);
        *a = x + y;
        *b = x - y;
      }
    }
    half *= 2;
  }
}

fn fwht_rows<T: Copy + Add<Output = T> + Sub<Output = T>>(elements: &mut [T], cols: usize) {
  for row in elements.chunks_exact_mut(cols) {
    fwht(row);
  }
}

/// Consumes `capsule` (a 2-D, row-major, writable float32 or float64 CPU tensor whose rows have
/// a power-of-two length) and replaces every row by its unnormalised Walsh–Hadamard transform,
/// in the producer's memory. Returns nothing: the caller reads the result through its own
/// tensor.
#[napi(js_name = "fwhtRowsInPlace", ts_args_type = "capsule: DLPackCapsule")]
pub fn fwht_rows_in_place<'env>(env: &'env Env, capsule: Unknown<'env>) -> Result<()> {
  // Consumes and validates; from here on, dropping `tensor` calls the producer's deleter
  // exactly once (also on every early return below).
  let mut tensor: ForeignTensor = capsule::env::import(env, &capsule)?;
  let dtype = tensor.dtype();
  if !matches!(dtype, DType::Float32 | DType::Float64) {
    return Err(fail(
      ErrorKind::DtypeMismatch,
      format!("fwhtRowsInPlace needs float32 or float64, got {dtype}"),
    ));
  }
  let &[_, cols] = tensor.shape() else {
    return Err(fail(
      ErrorKind::InvalidArgument,
      format!(
        "fwhtRowsInPlace needs a 2-D tensor, got shape {:?}",
        tensor.shape()
      ),
    ));
  };
  if cols <= 0 || !(cols as u64).is_power_of_two() {
    return Err(fail(
      ErrorKind::InvalidArgument,
      format!("the row length must be a power of two, got {cols}"),
    ));
  }
  let cols = cols as usize;
  // `as_mut_slice` checks, in this order: READ_ONLY (ERR_DLPACK_READ_ONLY), the dtype, that the
  // memory is host-accessible (ERR_DLPACK_NOT_CPU), alignment (ERR_DLPACK_MISALIGNED) and
  // row-major contiguity (ERR_DLPACK_NOT_CONTIGUOUS), and that no other slice or view lends
  // the same memory meanwhile (ERR_DLPACK_ALIASED).
  match dtype {
    DType::Float32 => fwht_rows(&mut tensor.as_mut_slice::<f32>()?, cols),
    _ => fwht_rows(&mut tensor.as_mut_slice::<f64>()?, cols),
  }
  Ok(())
}

/// Consumes `capsule` (a bool CPU tensor of any layout) and counts its `true` elements. The
/// crate refuses bytes other than 0 and 1 (ERR_DLPACK_INVALID_BOOL) before any of them becomes
/// a Rust `bool`, on the contiguous path (a slice) and on the strided one alike.
#[napi(js_name = "countTrue", ts_args_type = "capsule: DLPackCapsule")]
pub fn count_true<'env>(env: &'env Env, capsule: Unknown<'env>) -> Result<u32> {
  let tensor: ForeignTensor = capsule::env::import(env, &capsule)?;
  let count = if tensor.is_contiguous() {
    tensor.as_slice::<bool>()?.iter().filter(|&&x| x).count()
  } else {
    tensor.view::<bool>()?.iter().filter(|&x| x).count()
  };
  u32::try_from(count).map_err(|_| fail(ErrorKind::Overflow, "more than 2^32 - 1 true elements"))
}

// ---------------------------------------------------------------------------------------------
// Import: metadata
// ---------------------------------------------------------------------------------------------

// An imported tensor may be moved to another thread (an `AsyncTask`, a thread pool) and dropped
// there; the producer's deleter then runs on that thread.
const _: () = {
  const fn assert_send<T: Send>() {}
  assert_send::<ForeignTensor>();
};

/// What `describe` reports.
#[napi(object)]
pub struct TensorDescription {
  pub dtype: String,
  pub shape: Vec<i64>,
  /// In elements (row-major strides synthesised when the producer sent NULL).
  pub strides: Vec<i64>,
  /// `[DLDeviceType, device id]`.
  pub device: (u32, i32),
  /// DLPack `byte_offset`: bytes from `data` to the first element.
  pub byte_offset: i64,
  /// Address of the first element (`data + byte_offset`).
  pub data_pointer: BigInt,
  /// The producer set `DLPACK_FLAG_BITMASK_READ_ONLY`.
  pub readonly: bool,
  /// The capsule held a `DLManagedTensorVersioned` (false: legacy `DLManagedTensor`).
  pub versioned: bool,
}

/// Reads a capsule's metadata natively. Capsules are consume-once, and there is no way to read
/// one without taking ownership, so this CONSUMES the capsule: the tensor is released (its
/// deleter runs) before `describe` returns, and the capsule cannot be imported again.
#[napi(ts_args_type = "capsule: DLPackCapsule")]
pub fn describe<'env>(env: &'env Env, capsule: Unknown<'env>) -> Result<TensorDescription> {
  let tensor = capsule::env::import(env, &capsule)?;
  let device = tensor.device();
  let byte_offset = i64::try_from(tensor.byte_offset()).map_err(|_| {
    fail(
      ErrorKind::Overflow,
      "byte_offset does not fit in a JS-safe integer",
    )
  })?;
  Ok(TensorDescription {
    dtype: tensor.dtype().name().to_string(),
    shape: tensor.shape().to_vec(),
    strides: tensor.strides().to_vec(),
    device: (device.device_type as u32, device.id),
    byte_offset,
    data_pointer: BigInt::from(tensor.data_ptr() as usize as u64),
    readonly: tensor.is_read_only(),
    versioned: tensor.is_versioned(),
  })
}
