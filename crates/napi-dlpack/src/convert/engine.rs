//! The dense copy engine: [`copy_dense`] of any validated strided layout into row-major
//! order, row by row where the source's rows are the destination's, else tile by tile
//! (cache-blocked transposes).

use core::mem::MaybeUninit;

use smallvec::SmallVec;

use super::kernels::copy_planes_of_3;
use super::transpose::{square_side, transpose_square};
use super::{invalid, Strided};
use crate::dtype::DType;
use crate::error::DLPackError;

/// The source's dimensions after dropping size-1 dimensions and merging neighbours that are
/// laid out as one (the destination is row-major, so only the source decides), keeping the
/// channel axis, when there is one, a dimension of its own.
pub(super) struct Rows {
  pub(super) shape: SmallVec<[usize; 8]>,
  pub(super) strides: SmallVec<[i64; 8]>,
  /// Index in `shape` of the channel dimension.
  pub(super) channel_dim: Option<usize>,
}

impl Rows {
  pub(super) fn of(shape: &[i64], strides: &[i64], channel_axis: Option<usize>) -> Rows {
    let mut rows = Rows {
      shape: SmallVec::new(),
      strides: SmallVec::new(),
      channel_dim: None,
    };
    let mut last_is_channel = false;
    for (axis, (&dim, &stride)) in shape.iter().zip(strides).enumerate() {
      let is_channel = channel_axis == Some(axis);
      if dim == 1 && !is_channel {
        continue;
      }
      let dim = dim as usize;
      let mergeable = !is_channel && !last_is_channel && !rows.shape.is_empty();
      match (rows.shape.last_mut(), rows.strides.last_mut()) {
        (Some(outer), Some(outer_stride)) if mergeable && *outer_stride == stride * dim as i64 => {
          *outer *= dim;
          *outer_stride = stride;
        }
        _ => {
          if is_channel {
            rows.channel_dim = Some(rows.shape.len());
          }
          rows.shape.push(dim);
          rows.strides.push(stride);
        }
      }
      last_is_channel = is_channel;
    }
    if rows.shape.is_empty() {
      rows.shape.push(1);
      rows.strides.push(0);
    }
    rows
  }

  /// Calls `row(source offset of the row's first element (elements), destination index of it,
  /// channel of the row (`None`: the channel is the row's own index))` for each row of the
  /// last dimension, in row-major order. The row has `shape[last]` elements `stride[last]`
  /// apart.
  pub(super) fn for_each(&self, mut row: impl FnMut(i64, usize, Option<usize>)) {
    let ndim = self.shape.len();
    let outer = ndim - 1;
    let row_len = self.shape[outer];
    let rows: usize = self.shape[..outer].iter().product();
    let mut index: SmallVec<[usize; 8]> = SmallVec::from_elem(0, outer);
    let mut offset = 0i64;
    for number in 0..rows {
      let channel = match self.channel_dim {
        Some(dim) if dim < outer => Some(index[dim]),
        Some(_) => None,
        None => Some(0),
      };
      row(offset, number * row_len, channel);
      // Odometer over the outer dimensions; every partial offset is an element's offset.
      for axis in (0..outer).rev() {
        if index[axis] + 1 < self.shape[axis] {
          index[axis] += 1;
          offset += self.strides[axis];
          break;
        }
        offset -= self.strides[axis] * index[axis] as i64;
        index[axis] = 0;
      }
    }
  }
}

pub(super) fn check_out(
  source: &Strided<'_>,
  target: DType,
  out: &[MaybeUninit<u8>],
) -> Result<(), DLPackError> {
  let needed = source.dense_bytes(target);
  if out.len() != needed {
    return Err(invalid(format!(
      "the destination holds {} bytes, the conversion writes {needed}",
      out.len()
    )));
  }
  let (start, end) = source.address_range();
  let out_start = out.as_ptr() as usize;
  if start < end && out_start < end && start < out_start + out.len() {
    return Err(invalid("the destination overlaps the source"));
  }
  Ok(())
}

/// `out` as memory the kernels write without reading.
pub(super) fn as_uninit(out: &mut [u8]) -> &mut [MaybeUninit<u8>] {
  // SAFETY: same layout; the kernels only ever store initialised values through the result,
  // so `out` stays initialised.
  unsafe { core::slice::from_raw_parts_mut(out.as_mut_ptr().cast(), out.len()) }
}

/// Copies the elements of `source` into `out` (`numel * itemsize` bytes) in row-major order.
pub fn copy_dense(source: &Strided<'_>, out: &mut [u8]) -> Result<(), DLPackError> {
  copy_dense_uninit(source, as_uninit(out))
}

/// [`copy_dense`] into memory that may be uninitialised (a fresh allocation): on success every
/// byte of `out` has been written; on error none has.
pub fn copy_dense_uninit(
  source: &Strided<'_>,
  out: &mut [MaybeUninit<u8>],
) -> Result<(), DLPackError> {
  check_out(source, source.dtype, out)?;
  if source.numel == 0 {
    return Ok(());
  }
  if copy_planes_of_3(source, out) {
    return Ok(());
  }
  copy_dense_tiled_from(source, out, TILED_MIN_BYTES);
  Ok(())
}

/// From this many bytes on, transposes are tiled. Zero: even a 1 KiB transpose (16x16 float32)
/// took fewer instructions tiled (one buffered tile) than row by row, measured whole-process
/// with benches/copies-callgrind.mjs.
const TILED_MIN_BYTES: usize = 0;

/// The kernels of [`copy_dense_uninit`] after its checks, tiling transposes of `tiled_min`
/// bytes and more (tests pass 0 to tile every size).
fn copy_dense_tiled_from(source: &Strided<'_>, out: &mut [MaybeUninit<u8>], tiled_min: usize) {
  let tiled = out.len() >= tiled_min;
  match source.dtype.itemsize() {
    1 => copy_elements::<1>(source, out, tiled),
    2 => copy_elements::<2>(source, out, tiled),
    4 => copy_elements::<4>(source, out, tiled),
    8 => copy_elements::<8>(source, out, tiled),
    16 => copy_elements::<16>(source, out, tiled),
    other => unreachable!("no dtype is {other} bytes wide"),
  }
}

/// The dense copy of elements `W` bytes wide: row by row when the destination's rows are the
/// source's innermost dimension, else tile by tile ([`copy_tiled`]).
fn copy_elements<const W: usize>(source: &Strided<'_>, out: &mut [MaybeUninit<u8>], tiled: bool) {
  if let ([rows, cols], [row_stride, col_stride]) = (source.shape, source.strides) {
    if tiled && *rows > 1 && *cols > 1 && row_stride.unsigned_abs() < col_stride.unsigned_abs() {
      // A transposed matrix, the most common transpose: its one block straight away. The
      // general set-up below (merging dimensions, the odometer) would find the same block
      // (two dimensions of more than one element whose outer stride is the smaller cannot
      // merge) and cost more than the 16 register transposes of a 16x16 float32 matrix.
      let block = Block {
        rows: *rows as usize,
        cols: *cols as usize,
        row_stride: *row_stride as isize * W as isize,
        col_stride: *col_stride as isize * W as isize,
        out_row_stride: (*cols as usize * W) as isize,
      };
      // SAFETY: the block is the whole validated source layout (Strided's contract) from its
      // first element, and the destination holds its `numel` elements (check_out), not
      // overlapping the source.
      unsafe { block.copy::<W>(source.first, out.as_mut_ptr().cast()) };
      return;
    }
  }
  let rows = Rows::of(source.shape, source.strides, None);
  match transposed_dim(&rows).filter(|_| tiled) {
    Some(dim) => copy_tiled::<W>(source, &rows, dim, out),
    None => copy_rows::<[u8; W]>(source, &rows, out),
  }
}

/// The dimension to tile together with the destination's rows (the last one): the one the
/// source is densest along, when that is not the last. Row by row, a transposed source would be
/// read one element per cache line (and per page, for large strides) and each line re-read
/// for every row; a tile of both keeps the lines read and the lines written in L1.
fn transposed_dim(rows: &Rows) -> Option<usize> {
  let last = rows.shape.len() - 1;
  let row_stride = rows.strides[last].unsigned_abs();
  (0..last)
    .filter(|&dim| rows.strides[dim].unsigned_abs() < row_stride)
    .min_by_key(|&dim| rows.strides[dim].unsigned_abs())
}

/// Elements per side of a tile: 64 bytes (a cache line) of each row, and at least one register
/// transpose ([`square_side`]), so that a tile's lines (64 read and 64 written at most) stay
/// in L1.
const fn tile_side(itemsize: usize) -> usize {
  let side = 64 / itemsize;
  if side < square_side(itemsize) {
    square_side(itemsize)
  } else {
    side
  }
}

/// Tiles per side of a group: the tiles of one group are copied before the next group's, so
/// that the pages a group touches (one per source line and per destination row: 2 x 512 for
/// bytes) stay in the TLB between its tiles.
const TILE_GROUP: usize = 8;

/// The cache-blocked copy: for each index of the dimensions other than `dim` and the last
/// (an odometer), the 2-D block of those two dimensions is copied tile by tile.
fn copy_tiled<const W: usize>(
  source: &Strided<'_>,
  rows: &Rows,
  dim: usize,
  out: &mut [MaybeUninit<u8>],
) {
  let ndim = rows.shape.len();
  let last = ndim - 1;
  // Destination strides (elements) of the merged dimensions: row-major.
  let mut out_strides: SmallVec<[usize; 8]> = SmallVec::from_elem(1, ndim);
  for axis in (0..last).rev() {
    out_strides[axis] = out_strides[axis + 1] * rows.shape[axis + 1];
  }
  let outer: SmallVec<[usize; 8]> = (0..last).filter(|&axis| axis != dim).collect();
  let blocks: usize = outer.iter().map(|&axis| rows.shape[axis]).product();
  let mut index: SmallVec<[usize; 8]> = SmallVec::from_elem(0, outer.len());
  let (mut from, mut to) = (0isize, 0usize);
  let destination = out.as_mut_ptr().cast::<u8>();
  let block = Block {
    rows: rows.shape[dim],
    cols: rows.shape[last],
    row_stride: rows.strides[dim] as isize * W as isize,
    col_stride: rows.strides[last] as isize * W as isize,
    out_row_stride: (out_strides[dim] * W) as isize,
  };
  for _ in 0..blocks {
    // SAFETY: `from` is the offset of an element of the validated source layout (Strided's
    // contract) and every element of the block is one too; `to + block` stays inside the
    // destination's `numel` elements (check_out), which do not overlap the source.
    unsafe {
      block.copy::<W>(
        source.first.offset(from * W as isize),
        destination.add(to * W),
      )
    };
    // Odometer over the outer dimensions, in row-major order.
    for slot in (0..outer.len()).rev() {
      let axis = outer[slot];
      if index[slot] + 1 < rows.shape[axis] {
        index[slot] += 1;
        from += rows.strides[axis] as isize;
        to += out_strides[axis];
        break;
      }
      from -= rows.strides[axis] as isize * index[slot] as isize;
      to -= out_strides[axis] * index[slot];
      index[slot] = 0;
    }
  }
}

/// A 2-D block of `W`-byte elements: destination element (`r`, `c`), at byte
/// `r * out_row_stride + c * W`, is the source element at byte
/// `r * row_stride + c * col_stride`, for `r < rows`, `c < cols` (strides in bytes).
struct Block {
  rows: usize,
  cols: usize,
  row_stride: isize,
  col_stride: isize,
  out_row_stride: isize,
}

impl Block {
  /// # Safety
  /// Every source element of the block readable, every destination element writable, the two
  /// disjoint.
  unsafe fn copy<const W: usize>(&self, source: *const u8, out: *mut u8) {
    let side = tile_side(W);
    let group = side * TILE_GROUP;
    let mut rg = 0;
    while rg < self.rows {
      let row_end = self.rows.min(rg + group);
      let mut cg = 0;
      while cg < self.cols {
        let col_end = self.cols.min(cg + group);
        let mut r0 = rg;
        while r0 < row_end {
          let rows = side.min(row_end - r0);
          let mut c0 = cg;
          while c0 < col_end {
            let cols = side.min(col_end - c0);
            // SAFETY: a sub-block of the block (the contract).
            unsafe { self.tile::<W>(source, out, r0, c0, rows, cols) };
            c0 += cols;
          }
          r0 += rows;
        }
        cg = col_end;
      }
      rg = row_end;
    }
  }

  /// One tile: `rows` x `cols` elements from (`r0`, `c0`).
  ///
  /// # Safety
  /// As [`Block::copy`], for the tile.
  #[inline(always)]
  unsafe fn tile<const W: usize>(
    &self,
    source: *const u8,
    out: *mut u8,
    r0: usize,
    c0: usize,
    rows: usize,
    cols: usize,
  ) {
    let k = square_side(W);
    if self.row_stride != W as isize || rows < k || cols < k {
      // Not dense along the destination's rows (a step, or reversed), or narrower than one
      // register transpose: element by element.
      for r in r0..r0 + rows {
        // SAFETY: row r of the tile.
        unsafe { self.row_part::<W>(source, out, r, c0, cols) };
      }
      return;
    }
    let side = tile_side(W);
    if rows == side && cols == side {
      // A whole tile: the same loops with constant bounds, which the compiler unrolls (its
      // loads then issue ahead of the stores: measured 1.5x faster for 16-byte elements).
      // SAFETY: the tile (the contract), dense along its rows (checked above).
      unsafe { self.squares::<W>(source, out, r0, c0, side, side) };
      return;
    }
    let (full_rows, full_cols) = (rows - rows % k, cols - cols % k);
    // SAFETY: the tile's first full_rows x full_cols elements (the contract), dense along
    // their rows (checked above).
    unsafe { self.squares::<W>(source, out, r0, c0, full_rows, full_cols) };
    // The edges, element by element: the right one (full_rows x cols - full_cols), then the
    // bottom one (rows - full_rows x cols).
    if full_cols < cols {
      for r in r0..r0 + full_rows {
        // SAFETY: the rest of row r of the tile.
        unsafe { self.row_part::<W>(source, out, r, c0 + full_cols, cols - full_cols) };
      }
    }
    for r in r0 + full_rows..r0 + rows {
      // SAFETY: row r of the tile.
      unsafe { self.row_part::<W>(source, out, r, c0, cols) };
    }
  }

  /// The `rows` x `cols` elements from (`r0`, `c0`), both multiples of [`square_side`], in
  /// register transposes.
  ///
  /// # Safety
  /// As [`Block::copy`], for those elements, and `row_stride == W`.
  #[inline(always)]
  unsafe fn squares<const W: usize>(
    &self,
    source: *const u8,
    out: *mut u8,
    r0: usize,
    c0: usize,
    rows: usize,
    cols: usize,
  ) {
    let k = square_side(W);
    if k == 1 {
      // 16-byte elements: source line by source line (its 64 bytes read in one go, as a
      // hardware prefetcher expects), each element to its own destination row. Measured
      // 1.7x faster than destination row by row for a 2048x2048 complex128 transpose.
      for c in c0..c0 + cols {
        for r in r0..r0 + rows {
          // SAFETY: element (r, c) (the contract).
          unsafe { self.square::<W>(source, out, r, c) };
        }
      }
      return;
    }
    // Destination rows k at a time, each square reading k source lines: the 64 bytes of a
    // destination row's tile part are written by consecutive squares. (Buffering the tile's
    // source lines first, which keeps 4 KiB-strided lines from evicting each other in L1, was
    // measured as slower or no faster at every width up to 8 bytes: L2 absorbs those
    // evictions.)
    for r in (r0..r0 + rows).step_by(k) {
      for c in (c0..c0 + cols).step_by(k) {
        // SAFETY: the square from (r, c) lies inside the rows x cols elements (both multiples
        // of k), dense along its rows (the contract).
        unsafe { self.square::<W>(source, out, r, c) };
      }
    }
  }

  /// The register transpose of the [`square_side`] x [`square_side`] elements from (`r`, `c`).
  ///
  /// # Safety
  /// As [`Block::copy`], for those elements, and `row_stride == W`.
  #[inline(always)]
  unsafe fn square<const W: usize>(&self, source: *const u8, out: *mut u8, r: usize, c: usize) {
    // SAFETY: the square's source lines (c ..) hold its elements from r, dense (row_stride is
    // W); its destination rows (r ..) hold them from c (the contract).
    unsafe {
      transpose_square::<W>(
        self.source_at(source, r, c),
        self.col_stride,
        self.out_at::<W>(out, r, c),
        self.out_row_stride,
      )
    }
  }

  /// Address of source element (`r`, `c`) of the block at `source`.
  #[inline(always)]
  fn source_at(&self, source: *const u8, r: usize, c: usize) -> *const u8 {
    source.wrapping_offset(r as isize * self.row_stride + c as isize * self.col_stride)
  }

  /// Address of destination element (`r`, `c`) of the block at `out`.
  #[inline(always)]
  fn out_at<const W: usize>(&self, out: *mut u8, r: usize, c: usize) -> *mut u8 {
    out.wrapping_offset(r as isize * self.out_row_stride + (c * W) as isize)
  }

  /// `len` elements of destination row `r` from column `c0`.
  ///
  /// # Safety
  /// As [`Block::copy`], for those elements.
  #[inline(always)]
  unsafe fn row_part<const W: usize>(
    &self,
    source: *const u8,
    out: *mut u8,
    r: usize,
    c0: usize,
    len: usize,
  ) {
    let from = self.source_at(source, r, c0);
    let to = self.out_at::<W>(out, r, c0);
    for c in 0..len {
      // SAFETY: elements of the block (the contract).
      unsafe {
        to.add(c * W).cast::<[u8; W]>().write_unaligned(
          from
            .offset(c as isize * self.col_stride)
            .cast::<[u8; W]>()
            .read_unaligned(),
        )
      };
    }
  }
}

fn copy_rows<E: Copy>(source: &Strided<'_>, rows: &Rows, out: &mut [MaybeUninit<u8>]) {
  let row_len = rows.shape[rows.shape.len() - 1];
  let stride = rows.strides[rows.strides.len() - 1] as isize;
  let first = source.first.cast::<E>();
  let destination = out.as_mut_ptr().cast::<E>();
  rows.for_each(|offset, at, _| {
    // SAFETY: `offset` is the offset of an element of the validated source layout (Strided's
    // contract), the row's elements are `stride` apart inside it, and the destination holds
    // `numel` elements (check_out), `at + row_len` of them at most.
    unsafe {
      let row = first.offset(offset as isize);
      let out_row = destination.add(at);
      if stride == 1 {
        core::ptr::copy_nonoverlapping(
          row.cast::<u8>(),
          out_row.cast::<u8>(),
          row_len * size_of::<E>(),
        );
      } else {
        for i in 0..row_len {
          out_row
            .add(i)
            .write_unaligned(row.offset(i as isize * stride).read_unaligned());
        }
      }
    }
  });
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::convert::permute;
  use crate::convert::testing::{pattern, reference_offsets};
  use crate::error::ErrorKind;

  #[test]
  fn copy_dense_of_permuted_and_negative_strides() {
    let data: Vec<u16> = (0..120).collect();
    let bytes: Vec<u8> = data.iter().flat_map(|v| v.to_ne_bytes()).collect();
    let cases: [(&[i64], &[i64], usize); 5] = [
      (&[3, 4, 5], &[1, 15, 3], 0),
      (&[4, 5, 3], &[15, 3, 1], 0),
      (&[5, 4], &[-3, 15], 12 + 3),
      (&[2, 3, 1, 4], &[60, 20, 999, 5], 0),
      (&[6, 2], &[0, 1], 7),
    ];
    for (shape, strides, first) in cases {
      let source = Strided::over_bytes(&bytes, first * 2, DType::UInt16, shape, strides).unwrap();
      let mut out = vec![0u8; source.dense_bytes(DType::UInt16)];
      copy_dense(&source, &mut out).unwrap();
      let got: Vec<u16> = out
        .chunks(2)
        .map(|c| u16::from_ne_bytes([c[0], c[1]]))
        .collect();
      let want: Vec<u16> = reference_offsets(shape, strides)
        .iter()
        .map(|&o| data[(first as i64 + o) as usize])
        .collect();
      assert_eq!(got, want, "{shape:?} {strides:?}");
    }
  }

  /// The dense copy of `shape`/`strides` (elements of `itemsize` bytes, the first at byte
  /// `first_byte` of `bytes`) against the reference walk, byte for byte.
  fn check_copy_dense(
    bytes: &[u8],
    itemsize: usize,
    first_byte: usize,
    shape: &[i64],
    strides: &[i64],
  ) {
    let dtype = DType::ALL
      .into_iter()
      .find(|dtype| dtype.itemsize() == itemsize)
      .unwrap();
    let source = Strided::over_bytes(bytes, first_byte, dtype, shape, strides).unwrap();
    let mut out = vec![0xA5u8; source.dense_bytes(dtype)];
    copy_dense(&source, &mut out).unwrap();
    let mut want = Vec::with_capacity(out.len());
    for offset in reference_offsets(shape, strides) {
      let at = (first_byte as i64 + offset * itemsize as i64) as usize;
      want.extend_from_slice(&bytes[at..at + itemsize]);
    }
    // Tiled whatever the size (copy_dense tiles from TILED_MIN_BYTES on).
    let mut tiled = vec![0x5Au8; out.len()];
    copy_dense_tiled_from(&source, as_uninit(&mut tiled), 0);
    assert!(
      tiled == want,
      "tiled: itemsize {itemsize}, {shape:?} {strides:?}"
    );
    assert!(
      out == want,
      "itemsize {itemsize}, first byte {first_byte}, {shape:?} {strides:?}"
    );
  }

  #[test]
  fn transposes_are_copied_tile_by_tile_at_every_width_and_tile_boundary() {
    // Around the tile sides (8, 16, 32, 64 elements) and the 8x8 byte kernel.
    let sizes = [1i64, 2, 7, 8, 9, 15, 16, 17, 63, 64, 65, 130];
    for itemsize in [1usize, 2, 4, 8, 16] {
      for &rows in &sizes {
        for &cols in &sizes {
          let bytes = pattern((rows * cols) as usize * itemsize + 3 * itemsize + 1);
          // The transpose of a rows x cols matrix, at an element boundary and at an odd byte
          // (an unaligned source).
          for first_byte in [0, 1, itemsize] {
            check_copy_dense(&bytes, itemsize, first_byte, &[cols, rows], &[1, cols]);
          }
          // Reversed along each dimension: the first element is the last in memory.
          let last = ((rows * cols - 1) as usize) * itemsize;
          check_copy_dense(&bytes, itemsize, last, &[cols, rows], &[-1, -cols]);
          check_copy_dense(
            &bytes,
            itemsize,
            (cols as usize - 1) * itemsize,
            &[cols, rows],
            &[-1, cols],
          );
        }
      }
    }
  }

  #[test]
  fn transposes_larger_than_a_tile_group_are_copied_whole() {
    // Groups are 8 tiles a side: 512 bytes, 128 four-byte elements, 64 eight-byte ones.
    for (itemsize, rows, cols) in [(1usize, 520i64, 515i64), (4, 257, 130), (8, 129, 67)] {
      let bytes = pattern((rows * cols) as usize * itemsize);
      check_copy_dense(&bytes, itemsize, 0, &[cols, rows], &[1, cols]);
      check_copy_dense(&bytes, itemsize, 0, &[rows, cols], &[cols, 1]);
    }
  }

  #[test]
  fn permutations_of_three_and_four_dimensions_are_copied_dense() {
    for itemsize in [1usize, 2, 4, 8, 16] {
      // A 9x10x11 (and 3x4x5x6) row-major array seen through every permutation of its axes,
      // plus slices with steps and broadcast (stride 0) dimensions.
      let bytes = pattern(990 * itemsize + 8);
      let shape = [9i64, 10, 11];
      let strides = [110i64, 11, 1];
      for axes in [
        [0, 1, 2],
        [0, 2, 1],
        [1, 0, 2],
        [1, 2, 0],
        [2, 0, 1],
        [2, 1, 0],
      ] {
        let (s, t) = permute(&shape, &strides, &axes).unwrap();
        check_copy_dense(&bytes, itemsize, 0, &s, &t);
      }
      check_copy_dense(&bytes, itemsize, 0, &[5, 4, 11], &[220, 22, 1]);
      check_copy_dense(&bytes, itemsize, 0, &[11, 5, 3], &[1, 220, 44]);
      check_copy_dense(&bytes, itemsize, 8, &[11, 9, 4], &[1, 110, 0]);
      check_copy_dense(&bytes, itemsize, 0, &[3, 70, 1, 2], &[0, 1, 7, 110]);
      let big = pattern(360 * itemsize);
      for axes in [[3, 2, 1, 0], [0, 3, 1, 2], [2, 3, 0, 1]] {
        let (s, t) = permute(&[3, 4, 5, 6], &[120, 30, 6, 1], &axes).unwrap();
        check_copy_dense(&big, itemsize, 0, &s, &t);
      }
    }
  }

  #[test]
  fn the_tiled_path_is_taken_only_for_transposed_rows() {
    let rows = |shape: &[i64], strides: &[i64]| Rows::of(shape, strides, None);
    assert_eq!(transposed_dim(&rows(&[4, 5], &[1, 4])), Some(0));
    assert_eq!(transposed_dim(&rows(&[4, 5, 6], &[30, 1, 5])), Some(1));
    // Row-major, a step along the rows, and a contiguous tensor merged into one row: rows.
    assert_eq!(transposed_dim(&rows(&[4, 5], &[5, 1])), None);
    assert_eq!(transposed_dim(&rows(&[4, 5], &[10, 2])), None);
    assert_eq!(transposed_dim(&rows(&[4, 5, 6], &[30, 6, 1])), None);
    // Negative strides compare by magnitude.
    assert_eq!(transposed_dim(&rows(&[4, 5], &[-1, -4])), Some(0));
    assert_eq!(tile_side(1), 64);
    assert_eq!(tile_side(4), 16);
    assert_eq!(tile_side(16), 4);
  }

  /// xorshift64*: a small deterministic generator (the tests need no crate for it).
  struct Rng(u64);

  impl Rng {
    fn below(&mut self, n: usize) -> usize {
      self.0 ^= self.0 >> 12;
      self.0 ^= self.0 << 25;
      self.0 ^= self.0 >> 27;
      (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n
    }
  }

  /// A random strided view of a row-major array: dimensions at and around the tile and
  /// register-transpose sides, steps, a start inside padding, reversed and broadcast
  /// dimensions, permuted axes. Returns (elements of the array, first element, shape, strides).
  fn random_view(rng: &mut Rng) -> (usize, i64, Vec<i64>, Vec<i64>) {
    const SIDES: [i64; 22] = [
      1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 66, 127, 128, 129, 130,
    ];
    let ndim = 1 + rng.below(4);
    let mut shape: Vec<i64> = (0..ndim).map(|_| SIDES[rng.below(SIDES.len())]).collect();
    // At most 40,000 elements, shrinking the largest dimension.
    while shape.iter().product::<i64>() > 40_000 {
      let largest = (0..ndim).max_by_key(|&axis| shape[axis]).unwrap();
      shape[largest] = SIDES[rng.below(8)];
    }
    let steps: Vec<i64> = (0..ndim)
      .map(|_| {
        if rng.below(4) == 0 {
          2 + rng.below(2) as i64
        } else {
          1
        }
      })
      .collect();
    let pads: Vec<i64> = (0..ndim).map(|_| rng.below(3) as i64).collect();
    let base: Vec<i64> = (0..ndim)
      .map(|axis| (shape[axis] - 1) * steps[axis] + 1 + pads[axis])
      .collect();
    let base_strides = crate::convert::testing::strides_of(&base);
    let mut first = 0i64;
    let mut strides = Vec::with_capacity(ndim);
    for axis in 0..ndim {
      let mut stride = base_strides[axis] * steps[axis];
      first += rng.below(pads[axis] as usize + 1) as i64 * base_strides[axis];
      match rng.below(8) {
        0..=2 => {
          first += (shape[axis] - 1) * stride;
          stride = -stride;
        }
        3 if ndim > 1 => stride = 0,
        _ => {}
      }
      strides.push(stride);
    }
    // Fisher-Yates over the axes.
    for axis in (1..ndim).rev() {
      let other = rng.below(axis + 1);
      shape.swap(axis, other);
      strides.swap(axis, other);
    }
    (base.iter().product::<i64>() as usize, first, shape, strides)
  }

  #[test]
  fn random_strided_views_of_every_dtype_match_the_reference_walk() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for case in 0..1500 {
      let dtype = DType::ALL[case % DType::ALL.len()];
      let itemsize = dtype.itemsize();
      let (elements, first, shape, strides) = random_view(&mut rng);
      // Any byte offset, aligned to the element or not.
      let skew = rng.below(itemsize + 3);
      let bytes = pattern(elements * itemsize + skew);
      let first_byte = skew + first as usize * itemsize;
      let source = Strided::over_bytes(&bytes, first_byte, dtype, &shape, &strides).unwrap();
      let mut out = vec![0xA5u8; source.dense_bytes(dtype)];
      copy_dense(&source, &mut out).unwrap();
      let mut want = Vec::with_capacity(out.len());
      for offset in reference_offsets(&shape, &strides) {
        let at = (first_byte as i64 + offset * itemsize as i64) as usize;
        want.extend_from_slice(&bytes[at..at + itemsize]);
      }
      assert!(
        out == want,
        "case {case}: {dtype}, first byte {first_byte}, {shape:?} {strides:?}"
      );
    }
  }

  #[test]
  fn an_overlapping_destination_is_refused() {
    let mut buffer = [0u8; 16];
    let pointer = buffer.as_mut_ptr();
    let shape = [4];
    let strides = [1];
    // SAFETY: the four bytes are readable for the test.
    let source = unsafe { Strided::from_raw(pointer, DType::UInt8, &shape, &strides) };
    // SAFETY: bytes 2..6 of the same buffer, overlapping the source.
    let out = unsafe { core::slice::from_raw_parts_mut(pointer.add(2), 4) };
    assert_eq!(
      copy_dense(&source, out).unwrap_err().kind(),
      ErrorKind::InvalidArgument
    );
  }
}
