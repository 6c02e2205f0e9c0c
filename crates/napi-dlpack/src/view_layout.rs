//! The layout arithmetic of zero-copy views: the shape, strides and first-element offset of
//! `reshape`, `unsqueeze`, `squeeze`, `flatten`, `slice`, `narrow`, `select` and `expand`
//! over a tensor of a given shape and strides. Pure functions over element counts (no memory,
//! no dtype, no device): the addon (and any other caller) checks the result against the
//! memory it describes before anything is read through it.
//!
//! Every function here selects a subset of the source's elements (or the same elements in
//! another arrangement), so a view of a tensor whose elements lie in a region lies in it too;
//! callers still check, since the check is what makes a bug here an error instead of an
//! out-of-bounds read.
//!
//! Indices follow Python/PyTorch: dimensions and indices may be negative (counted from the
//! end); `slice` clamps its bounds like a Python slice (negative steps included), the others
//! refuse what is out of range. Bad arguments are [`ErrorKind::InvalidArgument`]; a reshape
//! that the strides cannot express without moving elements is [`ErrorKind::NotContiguous`].

use smallvec::SmallVec;

use crate::error::{DLPackError, ErrorKind};
use crate::layout::MAX_NDIM;

/// Shape or strides, inline up to 4 dimensions.
pub type Dims = SmallVec<[i64; 4]>;

/// A view's layout over its source's memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewLayout {
  pub shape: Dims,
  /// In elements.
  pub strides: Dims,
  /// Offset of the view's first element from the source's first element, in elements (may be
  /// negative where the source has negative strides). 0 for an empty view.
  pub offset: i64,
  /// Some element is reached through more than one index (an `expand`ed dimension of size
  /// above 1 with stride 0).
  pub broadcasts: bool,
}

#[cold]
fn invalid(message: impl Into<String>) -> DLPackError {
  DLPackError::new(ErrorKind::InvalidArgument, message)
}

fn overflow() -> DLPackError {
  DLPackError::new(ErrorKind::Overflow, "the view's offset or strides overflow")
}

/// The dimension `dim` names among `ndim` (negative counts from the end).
pub fn normalize_dim(dim: i64, ndim: usize) -> Result<usize, DLPackError> {
  let n = ndim as i64;
  let resolved = if dim < 0 { dim + n } else { dim };
  if resolved < 0 || resolved >= n {
    return Err(invalid(format!(
      "dimension {dim} is out of range for a tensor of {ndim} dimensions (valid: {} to {})",
      -n,
      n - 1
    )));
  }
  Ok(resolved as usize)
}

fn numel(shape: &[i64]) -> Result<i64, DLPackError> {
  shape
    .iter()
    .try_fold(1i64, |acc, &dim| acc.checked_mul(dim))
    .ok_or_else(|| DLPackError::new(ErrorKind::Overflow, "the element count overflows"))
}

fn check_ndim(ndim: usize) -> Result<(), DLPackError> {
  if ndim > MAX_NDIM {
    return Err(DLPackError::new(
      ErrorKind::Ndim,
      format!("a view of {ndim} dimensions is above the limit of {MAX_NDIM}"),
    ));
  }
  Ok(())
}

fn same(shape: &[i64], strides: &[i64]) -> ViewLayout {
  ViewLayout {
    shape: shape.into(),
    strides: strides.into(),
    offset: 0,
    broadcasts: false,
  }
}

fn check_strides(shape: &[i64], strides: &[i64]) -> Result<(), DLPackError> {
  if shape.len() != strides.len() {
    return Err(invalid(format!(
      "{} strides for {} dimensions",
      strides.len(),
      shape.len()
    )));
  }
  Ok(())
}

/// `shape` with its one `-1` (if any) replaced so that the element count is `count`. Every
/// other entry must be ≥ 0 and the product must match.
pub fn infer_shape(count: i64, shape: &[i64]) -> Result<Dims, DLPackError> {
  check_ndim(shape.len())?;
  let mut inferred = None;
  let mut known: i64 = 1;
  for (axis, &dim) in shape.iter().enumerate() {
    if dim == -1 {
      if inferred.replace(axis).is_some() {
        return Err(invalid(format!(
          "only one dimension can be -1, got {shape:?}"
        )));
      }
    } else if dim < 0 {
      return Err(invalid(format!(
        "dimension {axis} is {dim}: sizes are ≥ 0 (or -1 for one inferred size)"
      )));
    } else {
      known = known.checked_mul(dim).ok_or_else(overflow)?;
    }
  }
  let mut out: Dims = shape.into();
  match inferred {
    Some(axis) => {
      if known == 0 || count % known != 0 {
        return Err(invalid(format!(
          "shape {shape:?} is invalid for {count} elements"
        )));
      }
      out[axis] = count / known;
    }
    None if known != count => {
      return Err(invalid(format!(
        "shape {shape:?} ({known} elements) is invalid for {count} elements"
      )));
    }
    None => {}
  }
  Ok(out)
}

/// Row-major strides of `shape` (1 for the last dimension); saturating, since they only matter
/// for tensors whose element count was checked.
fn row_major(shape: &[i64]) -> Dims {
  let mut strides: Dims = SmallVec::from_elem(1, shape.len());
  let mut running = 1i64;
  for (stride, &dim) in strides.iter_mut().zip(shape).rev() {
    *stride = running;
    running = running.saturating_mul(dim.max(1));
  }
  strides
}

/// The strides that show the elements of (`shape`, `strides`), in row-major order, as
/// `new_shape` (same element count), or `None` where no strides can (the elements would have
/// to move). A run of source dimensions that are contiguous with each other (each stride is
/// the next one's times its size) can be split and merged freely; a reshape that merges
/// across the boundary of two runs needs a copy. This is PyTorch's rule for `view`.
fn view_strides(shape: &[i64], strides: &[i64], new_shape: &[i64]) -> Option<Dims> {
  let count: i64 = shape.iter().product();
  if count <= 1 {
    // No element, or one at offset 0: any strides address it; row-major ones are what
    // consumers expect.
    return Some(row_major(new_shape));
  }
  let mut new_strides: Dims = SmallVec::from_elem(0, new_shape.len());
  // The new dimensions still to place, from the last.
  let mut view_d = new_shape.len() as isize - 1;
  // Stride of the innermost dimension of the current run of contiguous source dimensions.
  let mut chunk_base_stride = *strides.last()?;
  let (mut tensor_numel, mut view_numel) = (1i64, 1i64);
  for tensor_d in (0..shape.len()).rev() {
    tensor_numel *= shape[tensor_d];
    // The run ends at the outermost dimension, or where the next one out is not contiguous
    // with it (size-1 dimensions never end a run: they address nothing).
    let run_ends = tensor_d == 0
      || (shape[tensor_d - 1] != 1
        && Some(strides[tensor_d - 1]) != tensor_numel.checked_mul(chunk_base_stride));
    if run_ends {
      while view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d as usize] == 1) {
        new_strides[view_d as usize] = view_numel.checked_mul(chunk_base_stride)?;
        view_numel *= new_shape[view_d as usize];
        view_d -= 1;
      }
      if view_numel != tensor_numel {
        return None;
      }
      if tensor_d > 0 {
        chunk_base_stride = strides[tensor_d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  (view_d == -1).then_some(new_strides)
}

/// `reshape(shape)` / `view(shape)`: the same elements in row-major order under `new_shape`
/// (one entry may be `-1`, inferred). `ERR_DLPACK_NOT_CONTIGUOUS` where the strides cannot
/// express it (a copy would be needed: `contiguous()` first).
pub fn reshape(
  shape: &[i64],
  strides: &[i64],
  new_shape: &[i64],
) -> Result<ViewLayout, DLPackError> {
  check_strides(shape, strides)?;
  let count = numel(shape)?;
  let new_shape = infer_shape(count, new_shape)?;
  let new_strides = view_strides(shape, strides, &new_shape).ok_or_else(|| {
    DLPackError::new(
      ErrorKind::NotContiguous,
      format!(
        "a tensor of shape {shape:?} and strides {strides:?} cannot be viewed as {:?} without \
         moving elements: call contiguous() first (a copy when needed)",
        new_shape.as_slice()
      ),
    )
  })?;
  Ok(ViewLayout {
    shape: new_shape,
    strides: new_strides,
    offset: 0,
    broadcasts: false,
  })
}

/// `unsqueeze(dim)`: a new size-1 dimension at `dim` (−(ndim+1) ≤ dim ≤ ndim).
pub fn unsqueeze(shape: &[i64], strides: &[i64], dim: i64) -> Result<ViewLayout, DLPackError> {
  check_strides(shape, strides)?;
  check_ndim(shape.len() + 1)?;
  let at = normalize_dim(dim, shape.len() + 1)?;
  // A size-1 dimension addresses nothing; its stride is the one row-major order would give it
  // (what PyTorch gives), so consumers that look at every stride see a plain layout.
  let stride = match (shape.get(at), strides.get(at)) {
    (Some(&size), Some(&stride)) => size.saturating_mul(stride),
    _ => 1,
  };
  let mut view = same(shape, strides);
  view.shape.insert(at, 1);
  view.strides.insert(at, stride);
  Ok(view)
}

/// `squeeze()`: without `dim`, every size-1 dimension removed; with it, that dimension, which
/// must have size 1 (`InvalidArgument` otherwise: silently keeping it, as PyTorch does, hides
/// a wrong index).
pub fn squeeze(
  shape: &[i64],
  strides: &[i64],
  dim: Option<i64>,
) -> Result<ViewLayout, DLPackError> {
  check_strides(shape, strides)?;
  match dim {
    None => {
      let (shape, strides) = shape
        .iter()
        .zip(strides)
        .filter(|(&size, _)| size != 1)
        .map(|(&size, &stride)| (size, stride))
        .unzip();
      Ok(ViewLayout {
        shape,
        strides,
        offset: 0,
        broadcasts: false,
      })
    }
    Some(dim) => {
      let at = normalize_dim(dim, shape.len())?;
      if shape[at] != 1 {
        return Err(invalid(format!(
          "squeeze({dim}): dimension {at} has size {}, not 1",
          shape[at]
        )));
      }
      let mut view = same(shape, strides);
      view.shape.remove(at);
      view.strides.remove(at);
      Ok(view)
    }
  }
}

/// `flatten(startDim, endDim)`: dimensions `start..=end` merged into one (a 0-d tensor becomes
/// `[1]`). `NotContiguous` where they are not one contiguous run.
pub fn flatten(
  shape: &[i64],
  strides: &[i64],
  start: i64,
  end: i64,
) -> Result<ViewLayout, DLPackError> {
  check_strides(shape, strides)?;
  if shape.is_empty() {
    // Dimension 0 and -1 name the one (implicit) dimension of a scalar, as in PyTorch.
    normalize_dim(start, 1)?;
    normalize_dim(end, 1)?;
    return reshape(shape, strides, &[1]);
  }
  let (first, last) = (
    normalize_dim(start, shape.len())?,
    normalize_dim(end, shape.len())?,
  );
  if first > last {
    return Err(invalid(format!(
      "flatten({start}, {end}): the start dimension comes after the end dimension"
    )));
  }
  let merged = numel(&shape[first..=last])?;
  let mut new_shape: Dims = shape[..first].into();
  new_shape.push(merged);
  new_shape.extend_from_slice(&shape[last + 1..]);
  reshape(shape, strides, &new_shape)
}

/// The elements `start, start + step, ...` before `end` of dimension `dim`, with Python's
/// slice rules: `None` bounds default to the whole dimension (in the step's direction),
/// negative bounds count from the end, bounds past either end are clamped; `step` is not 0
/// and may be negative (the elements in reverse order, through a negative stride).
pub fn slice(
  shape: &[i64],
  strides: &[i64],
  dim: i64,
  start: Option<i64>,
  end: Option<i64>,
  step: i64,
) -> Result<ViewLayout, DLPackError> {
  check_strides(shape, strides)?;
  let at = normalize_dim(dim, shape.len())?;
  if step == 0 {
    return Err(invalid("slice step must not be 0"));
  }
  let size = shape[at];
  // Python's slice.indices(size).
  let resolve = |bound: Option<i64>, default: i64, low: i64, high: i64| -> i64 {
    match bound {
      None => default,
      Some(value) => {
        let value = if value < 0 {
          value.saturating_add(size)
        } else {
          value
        };
        value.clamp(low, high)
      }
    }
  };
  let (first, stop) = if step > 0 {
    (resolve(start, 0, 0, size), resolve(end, size, 0, size))
  } else {
    (
      resolve(start, size - 1, -1, size - 1),
      resolve(end, -1, -1, size - 1),
    )
  };
  // Elements in the slice: ceil(distance / |step|) where the distance is positive.
  let length = if step > 0 {
    if stop > first {
      (stop - first - 1) / step + 1
    } else {
      0
    }
  } else if first > stop {
    (first - stop - 1) / step.unsigned_abs() as i64 + 1
  } else {
    0
  };
  let mut view = same(shape, strides);
  view.shape[at] = length;
  view.strides[at] = strides[at].checked_mul(step).ok_or_else(overflow)?;
  view.offset = offset_of(&view.shape, first, strides[at])?;
  Ok(view)
}

/// The element offset of index `index` along a dimension of stride `stride`, or 0 for a view
/// without elements (whose first element must stay where the source's is: it may lie past the
/// end otherwise).
fn offset_of(view_shape: &[i64], index: i64, stride: i64) -> Result<i64, DLPackError> {
  if view_shape.contains(&0) {
    return Ok(0);
  }
  index.checked_mul(stride).ok_or_else(overflow)
}

/// `narrow(dim, start, length)`: elements `start..start + length` of dimension `dim` (`start`
/// may be negative, counted from the end; the range must lie inside the dimension).
pub fn narrow(
  shape: &[i64],
  strides: &[i64],
  dim: i64,
  start: i64,
  length: i64,
) -> Result<ViewLayout, DLPackError> {
  check_strides(shape, strides)?;
  let at = normalize_dim(dim, shape.len())?;
  let size = shape[at];
  let first = if start < 0 {
    start.saturating_add(size)
  } else {
    start
  };
  if first < 0 || first > size || length < 0 || length > size - first {
    return Err(invalid(format!(
      "narrow({dim}, {start}, {length}) is out of range for a dimension of size {size}"
    )));
  }
  let mut view = same(shape, strides);
  view.shape[at] = length;
  view.offset = offset_of(&view.shape, first, strides[at])?;
  Ok(view)
}

/// `select(dim, index)`: the slice at `index` of dimension `dim`, without that dimension
/// (`index` may be negative, counted from the end; it must lie inside the dimension).
pub fn select(
  shape: &[i64],
  strides: &[i64],
  dim: i64,
  index: i64,
) -> Result<ViewLayout, DLPackError> {
  check_strides(shape, strides)?;
  let at = normalize_dim(dim, shape.len())?;
  let size = shape[at];
  let resolved = if index < 0 {
    index.saturating_add(size)
  } else {
    index
  };
  if resolved < 0 || resolved >= size {
    return Err(invalid(format!(
      "select({dim}, {index}): index out of range for a dimension of size {size}"
    )));
  }
  let mut view = same(shape, strides);
  view.shape.remove(at);
  view.strides.remove(at);
  view.offset = offset_of(&view.shape, resolved, strides[at])?;
  Ok(view)
}

/// `expand(shape)`: size-1 dimensions repeated to the sizes of `new_shape` through stride 0,
/// new leading dimensions likewise; `-1` keeps a dimension's size. A dimension whose size is
/// not 1 cannot change (`InvalidArgument`); new leading dimensions cannot be `-1`.
pub fn expand(
  shape: &[i64],
  strides: &[i64],
  new_shape: &[i64],
) -> Result<ViewLayout, DLPackError> {
  check_strides(shape, strides)?;
  check_ndim(new_shape.len())?;
  if new_shape.len() < shape.len() {
    return Err(invalid(format!(
      "expand to {new_shape:?}: {} dimensions cannot hold a tensor of {} ({shape:?})",
      new_shape.len(),
      shape.len()
    )));
  }
  let leading = new_shape.len() - shape.len();
  let mut view = ViewLayout {
    shape: SmallVec::with_capacity(new_shape.len()),
    strides: SmallVec::with_capacity(new_shape.len()),
    offset: 0,
    broadcasts: false,
  };
  for (axis, &target) in new_shape.iter().enumerate() {
    let source = axis.checked_sub(leading).map(|d| (shape[d], strides[d]));
    let (size, stride) = match source {
      None if target < 0 => {
        return Err(invalid(format!(
          "expand to {new_shape:?}: new leading dimension {axis} must have a size ≥ 0, got {target}"
        )))
      }
      None => (target, 0),
      Some((size, stride)) if target == -1 || target == size => (size, stride),
      Some((1, _)) if target >= 0 => (target, 0),
      Some((size, _)) => {
        return Err(invalid(format!(
          "expand to {new_shape:?}: dimension {axis} has size {size}, which only expands from 1 (to keep it, give {size} or -1)"
        )))
      }
    };
    view.broadcasts |= stride == 0 && size > 1;
    view.shape.push(size);
    view.strides.push(stride);
  }
  // A view without elements repeats none.
  view.broadcasts &= numel(&view.shape)? > 0;
  Ok(view)
}

#[cfg(test)]
mod tests {
  use super::*;

  /// Element offsets of every index in row-major order (the reference the views are checked
  /// against).
  fn offsets(shape: &[i64], strides: &[i64], base: i64) -> Vec<i64> {
    let count: i64 = shape.iter().product();
    (0..count)
      .map(|mut linear| {
        let mut offset = base;
        for axis in (0..shape.len()).rev() {
          offset += (linear % shape[axis]) * strides[axis];
          linear /= shape[axis];
        }
        offset
      })
      .collect()
  }

  fn of(view: &ViewLayout) -> Vec<i64> {
    offsets(&view.shape, &view.strides, view.offset)
  }

  fn code(error: DLPackError) -> ErrorKind {
    error.kind()
  }

  #[test]
  fn reshape_of_contiguous_is_row_major() {
    let view = reshape(&[2, 3, 4], &[12, 4, 1], &[4, -1]).unwrap();
    assert_eq!(view.shape.as_slice(), [4, 6]);
    assert_eq!(view.strides.as_slice(), [6, 1]);
    assert_eq!(of(&view), offsets(&[2, 3, 4], &[12, 4, 1], 0));
  }

  #[test]
  fn reshape_splits_and_merges_within_runs_of_strided_tensors() {
    // A transposed [3, 4] (strides [1, 3]): splitting a dimension is fine, merging is not.
    let source = ([4, 3], [1, 4]);
    let view = reshape(&source.0, &source.1, &[2, 2, 3]).unwrap();
    assert_eq!(of(&view), offsets(&source.0, &source.1, 0));
    assert_eq!(
      code(reshape(&source.0, &source.1, &[12]).unwrap_err()),
      ErrorKind::NotContiguous
    );
    // Every other column of a [4, 6] matrix: the rows merge with nothing, the columns split.
    let view = reshape(&[4, 3], &[6, 2], &[4, 3, 1]).unwrap();
    assert_eq!(view.strides.as_slice(), [6, 2, 2]);
    // Reversed rows (negative stride) of a contiguous [3, 4]: each row stays a run.
    let view = reshape(&[3, 4], &[-4, 1], &[3, 2, 2]).unwrap();
    assert_eq!(of(&view), offsets(&[3, 4], &[-4, 1], 0));
    // A fully reversed vector reshapes to anything.
    let view = reshape(&[6], &[-1], &[2, 3]).unwrap();
    assert_eq!(view.strides.as_slice(), [-3, -1]);
    assert_eq!(of(&view), offsets(&[6], &[-1], 0));
  }

  #[test]
  fn reshape_of_tiny_tensors_takes_any_shape_of_the_same_count() {
    assert_eq!(reshape(&[], &[], &[1, 1]).unwrap().shape.as_slice(), [1, 1]);
    assert_eq!(reshape(&[1, 1], &[7, 9], &[]).unwrap().shape.as_slice(), []);
    assert_eq!(
      reshape(&[0, 3], &[3, 1], &[3, -1, 5])
        .unwrap()
        .shape
        .as_slice(),
      [3, 0, 5]
    );
    let view = reshape(&[0, 3], &[3, 1], &[3, -1, 0]).unwrap_err();
    assert_eq!(
      code(view),
      ErrorKind::InvalidArgument,
      "-1 next to a 0 is ambiguous"
    );
    assert_eq!(
      reshape(&[0, 3], &[3, 1], &[3, 0]).unwrap().shape.as_slice(),
      [3, 0]
    );
  }

  #[test]
  fn reshape_refuses_bad_shapes() {
    for bad in [&[5][..], &[-1, -1], &[-2, 3], &[7, -1], &[2, 4]] {
      assert_eq!(
        code(reshape(&[2, 3], &[3, 1], bad).unwrap_err()),
        ErrorKind::InvalidArgument,
        "{bad:?}"
      );
    }
    assert_eq!(
      code(reshape(&[2, 3], &[3, 1], &[1; 65]).unwrap_err()),
      ErrorKind::Ndim
    );
  }

  #[test]
  fn unsqueeze_and_squeeze() {
    let view = unsqueeze(&[2, 3], &[3, 1], 0).unwrap();
    assert_eq!(
      (view.shape.as_slice(), view.strides.as_slice()),
      ([1, 2, 3].as_slice(), [6, 3, 1].as_slice())
    );
    let view = unsqueeze(&[2, 3], &[3, 1], -1).unwrap();
    assert_eq!(
      (view.shape.as_slice(), view.strides.as_slice()),
      ([2, 3, 1].as_slice(), [3, 1, 1].as_slice())
    );
    assert_eq!(
      unsqueeze(&[2, 3], &[3, 1], 2).unwrap().shape.as_slice(),
      [2, 3, 1]
    );
    for bad in [3, -4] {
      assert_eq!(
        code(unsqueeze(&[2, 3], &[3, 1], bad).unwrap_err()),
        ErrorKind::InvalidArgument
      );
    }
    let view = squeeze(&[1, 2, 1, 3], &[6, 3, 3, 1], None).unwrap();
    assert_eq!(
      (view.shape.as_slice(), view.strides.as_slice()),
      ([2, 3].as_slice(), [3, 1].as_slice())
    );
    let view = squeeze(&[1, 2, 1, 3], &[6, 3, 3, 1], Some(-2)).unwrap();
    assert_eq!(view.shape.as_slice(), [1, 2, 3]);
    assert_eq!(
      code(squeeze(&[1, 2], &[2, 1], Some(1)).unwrap_err()),
      ErrorKind::InvalidArgument
    );
    assert_eq!(
      code(squeeze(&[1, 2], &[2, 1], Some(2)).unwrap_err()),
      ErrorKind::InvalidArgument
    );
  }

  #[test]
  fn flatten_merges_a_run() {
    let view = flatten(&[2, 3, 4], &[12, 4, 1], 1, -1).unwrap();
    assert_eq!(view.shape.as_slice(), [2, 12]);
    assert_eq!(
      flatten(&[2, 3, 4], &[12, 4, 1], 0, -1)
        .unwrap()
        .shape
        .as_slice(),
      [24]
    );
    assert_eq!(flatten(&[], &[], 0, -1).unwrap().shape.as_slice(), [1]);
    // [2, 3, 4] permuted (1, 2, 0): dims 0 and 1 are one run, 1 and 2 are not.
    let (shape, strides) = ([3, 4, 2], [4, 1, 12]);
    assert_eq!(
      code(flatten(&shape, &strides, 1, 2).unwrap_err()),
      ErrorKind::NotContiguous
    );
    let view = flatten(&shape, &strides, 0, 1).unwrap();
    assert_eq!(of(&view), offsets(&shape, &strides, 0));
    assert_eq!(
      code(flatten(&shape, &strides, 2, 1).unwrap_err()),
      ErrorKind::InvalidArgument
    );
    assert_eq!(
      code(flatten(&shape, &strides, 0, 3).unwrap_err()),
      ErrorKind::InvalidArgument
    );
  }

  #[test]
  fn slice_follows_python() {
    let items: Vec<i64> = (0..7).collect();
    let python = |start: Option<i64>, end: Option<i64>, step: i64| -> Vec<i64> {
      // Python's rules written out independently: indices() then range().
      let n = 7i64;
      let fix = |v: i64| if v < 0 { v + n } else { v };
      let (lo, hi) = if step > 0 { (0, n) } else { (-1, n - 1) };
      let s = start.map_or(if step > 0 { 0 } else { n - 1 }, |v| fix(v).clamp(lo, hi));
      let e = end.map_or(if step > 0 { n } else { -1 }, |v| fix(v).clamp(lo, hi));
      let mut out = vec![];
      let mut i = s;
      while (step > 0 && i < e) || (step < 0 && i > e) {
        out.push(items[i as usize]);
        i += step;
      }
      out
    };
    let bounds = [
      None,
      Some(-9),
      Some(-7),
      Some(-3),
      Some(-1),
      Some(0),
      Some(2),
      Some(6),
      Some(7),
      Some(20),
    ];
    for start in bounds {
      for end in bounds {
        for step in [-3, -2, -1, 1, 2, 5] {
          let view = slice(&[7], &[1], 0, start, end, step).unwrap();
          assert_eq!(
            of(&view),
            python(start, end, step),
            "[{start:?}:{end:?}:{step}]"
          );
        }
      }
    }
    assert_eq!(
      code(slice(&[7], &[1], 0, None, None, 0).unwrap_err()),
      ErrorKind::InvalidArgument
    );
    assert_eq!(
      code(slice(&[7], &[1], 1, None, None, 1).unwrap_err()),
      ErrorKind::InvalidArgument
    );
  }

  #[test]
  fn slice_of_a_strided_dimension_scales_its_stride() {
    let view = slice(&[4, 5], &[-5, 1], 0, Some(1), None, 2).unwrap();
    assert_eq!(view.shape.as_slice(), [2, 5]);
    assert_eq!(view.strides.as_slice(), [-10, 1]);
    assert_eq!(view.offset, -5);
    // An empty slice keeps the first element where it was.
    let view = slice(&[4, 5], &[5, 1], 1, Some(5), None, 1).unwrap();
    assert_eq!((view.shape.as_slice(), view.offset), ([4, 0].as_slice(), 0));
  }

  #[test]
  fn narrow_and_select() {
    let view = narrow(&[4, 5], &[5, 1], 1, -3, 2).unwrap();
    assert_eq!((view.shape.as_slice(), view.offset), ([4, 2].as_slice(), 2));
    assert_eq!(narrow(&[4, 5], &[5, 1], 1, 5, 0).unwrap().offset, 0);
    for (start, length) in [(4, 2), (-6, 1), (0, 6), (1, -1)] {
      assert_eq!(
        code(narrow(&[4, 5], &[5, 1], 1, start, length).unwrap_err()),
        ErrorKind::InvalidArgument
      );
    }
    let view = select(&[4, 5], &[5, 1], 0, -1).unwrap();
    assert_eq!(
      (view.shape.as_slice(), view.strides.as_slice(), view.offset),
      ([5].as_slice(), [1].as_slice(), 15)
    );
    let view = select(&[4, 5], &[5, -1], 1, 3).unwrap();
    assert_eq!((view.shape.as_slice(), view.offset), ([4].as_slice(), -3));
    for index in [4, -5] {
      assert_eq!(
        code(select(&[4, 5], &[5, 1], 0, index).unwrap_err()),
        ErrorKind::InvalidArgument
      );
    }
  }

  #[test]
  fn expand_repeats_size_one_dimensions() {
    let view = expand(&[3, 1], &[1, 1], &[2, -1, 4]).unwrap();
    assert_eq!(
      (view.shape.as_slice(), view.strides.as_slice()),
      ([2, 3, 4].as_slice(), [0, 1, 0].as_slice())
    );
    assert!(view.broadcasts);
    let view = expand(&[3, 1], &[1, 1], &[3, 1]).unwrap();
    assert!(!view.broadcasts, "nothing repeated");
    let view = expand(&[3, 1], &[1, 1], &[1, 3, 1]).unwrap();
    assert!(!view.broadcasts, "a new size-1 dimension repeats nothing");
    let view = expand(&[3, 1], &[1, 1], &[0, 3, 4]).unwrap();
    assert!(!view.broadcasts, "an empty view repeats nothing");
    for bad in [&[4, 1][..], &[3], &[-1, 3, 1], &[3, -2]] {
      assert_eq!(
        code(expand(&[3, 1], &[1, 1], bad).unwrap_err()),
        ErrorKind::InvalidArgument,
        "{bad:?}"
      );
    }
  }

  #[test]
  fn strides_must_match_the_shape() {
    assert_eq!(
      code(reshape(&[2, 3], &[1], &[6]).unwrap_err()),
      ErrorKind::InvalidArgument
    );
  }
}
