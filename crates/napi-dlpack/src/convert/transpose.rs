//! Register transposes of square blocks of 1-, 2-, 4-, 8- and 16-byte elements: one 16-byte
//! vector per line (16x16 bytes, 8x8 of 2 bytes, 4x4 of 4, 2x2 of 8; a 16-byte element is a
//! block of its own). SSE2 on x86_64 and NEON on aarch64 (both part of every CPU of those
//! architectures, so nothing is detected at run time); element by element elsewhere.
//!
//! The vector transpose is `log2(side)` rounds of the same step: vectors `i` and
//! `i + side / 2` are interleaved element by element into vectors `2i` (their lower halves)
//! and `2i + 1` (their upper halves). Writing an element's row and column as one bit string
//! (row bits, then column bits), one round rotates that string left by one bit, so after
//! `log2(side)` rounds the row bits and the column bits have traded places: the transpose.

/// Elements per side of the block [`transpose_square`] moves for `width`-byte elements.
pub(super) const fn square_side(width: usize) -> usize {
  if width >= 16 {
    1
  } else {
    16 / width
  }
}

/// Transposes a square block of [`square_side`]`(W)` elements a side: source line `j` (the
/// side's elements, ascending, at `source + j * source_stride` bytes) becomes column `j` of the
/// destination (row `i` at `out + i * out_stride` bytes). No alignment is needed.
///
/// # Safety
/// Each source line readable and each destination row writable for `side * W` bytes, the
/// destination rows not overlapping the source lines.
#[inline(always)]
pub(super) unsafe fn transpose_square<const W: usize>(
  source: *const u8,
  source_stride: isize,
  out: *mut u8,
  out_stride: isize,
) {
  #[cfg(all(any(target_arch = "x86_64", target_arch = "aarch64"), not(miri)))]
  // SAFETY: forwarded (the same contract).
  unsafe {
    vector::transpose::<W>(source, source_stride, out, out_stride)
  };
  #[cfg(not(all(any(target_arch = "x86_64", target_arch = "aarch64"), not(miri))))]
  // SAFETY: forwarded (the same contract).
  unsafe {
    transpose_scalar::<W>(source, source_stride, out, out_stride)
  };
}

/// [`transpose_square`] element by element: the portable fallback (and the tests' second
/// opinion on the vector one).
///
/// # Safety
/// As [`transpose_square`].
#[cfg_attr(
  all(any(target_arch = "x86_64", target_arch = "aarch64"), not(miri)),
  allow(dead_code)
)]
#[inline(always)]
pub(super) unsafe fn transpose_scalar<const W: usize>(
  source: *const u8,
  source_stride: isize,
  out: *mut u8,
  out_stride: isize,
) {
  let side = square_side(W);
  for i in 0..side {
    for j in 0..side {
      // SAFETY: element i of source line j and element j of destination row i (the contract).
      unsafe {
        let element = source
          .offset(j as isize * source_stride)
          .add(i * W)
          .cast::<[u8; W]>()
          .read_unaligned();
        out
          .offset(i as isize * out_stride)
          .add(j * W)
          .cast::<[u8; W]>()
          .write_unaligned(element);
      }
    }
  }
}

#[cfg(all(any(target_arch = "x86_64", target_arch = "aarch64"), not(miri)))]
mod vector {
  #[cfg(target_arch = "aarch64")]
  use core::arch::aarch64::*;
  #[cfg(target_arch = "x86_64")]
  use core::arch::x86_64::*;

  #[cfg(target_arch = "x86_64")]
  type Vector = __m128i;
  #[cfg(target_arch = "aarch64")]
  type Vector = uint8x16_t;

  /// # Safety
  /// 16 bytes readable at `at`.
  #[inline(always)]
  unsafe fn load(at: *const u8) -> Vector {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the contract; unaligned loads are allowed.
    return unsafe { _mm_loadu_si128(at.cast()) };
    #[cfg(target_arch = "aarch64")]
    // SAFETY: the contract; vld1q has no alignment requirement for bytes.
    return unsafe { vld1q_u8(at) };
  }

  /// # Safety
  /// 16 bytes writable at `at`.
  #[inline(always)]
  unsafe fn store(at: *mut u8, vector: Vector) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the contract; unaligned stores are allowed.
    unsafe {
      _mm_storeu_si128(at.cast(), vector)
    };
    #[cfg(target_arch = "aarch64")]
    // SAFETY: the contract.
    unsafe {
      vst1q_u8(at, vector)
    };
  }

  /// The `W`-byte elements of `a` and `b` interleaved: (a0 b0 a1 b1 ... of the lower halves,
  /// the same of the upper halves).
  #[inline(always)]
  fn zip<const W: usize>(a: Vector, b: Vector) -> (Vector, Vector) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: register operations only, of SSE2, which every x86_64 CPU has (the target's
    // baseline).
    unsafe {
      match W {
        1 => (_mm_unpacklo_epi8(a, b), _mm_unpackhi_epi8(a, b)),
        2 => (_mm_unpacklo_epi16(a, b), _mm_unpackhi_epi16(a, b)),
        4 => (_mm_unpacklo_epi32(a, b), _mm_unpackhi_epi32(a, b)),
        _ => (_mm_unpacklo_epi64(a, b), _mm_unpackhi_epi64(a, b)),
      }
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: register operations only, of NEON, which every aarch64 CPU has (the target's
    // baseline).
    unsafe {
      match W {
        1 => (vzip1q_u8(a, b), vzip2q_u8(a, b)),
        2 => {
          let (a, b) = (vreinterpretq_u16_u8(a), vreinterpretq_u16_u8(b));
          (
            vreinterpretq_u8_u16(vzip1q_u16(a, b)),
            vreinterpretq_u8_u16(vzip2q_u16(a, b)),
          )
        }
        4 => {
          let (a, b) = (vreinterpretq_u32_u8(a), vreinterpretq_u32_u8(b));
          (
            vreinterpretq_u8_u32(vzip1q_u32(a, b)),
            vreinterpretq_u8_u32(vzip2q_u32(a, b)),
          )
        }
        _ => {
          let (a, b) = (vreinterpretq_u64_u8(a), vreinterpretq_u64_u8(b));
          (
            vreinterpretq_u8_u64(vzip1q_u64(a, b)),
            vreinterpretq_u8_u64(vzip2q_u64(a, b)),
          )
        }
      }
    }
  }

  /// See [`super::transpose_square`] (and the module's note on the rounds).
  ///
  /// # Safety
  /// As [`super::transpose_square`].
  #[inline(always)]
  pub(super) unsafe fn transpose<const W: usize>(
    source: *const u8,
    source_stride: isize,
    out: *mut u8,
    out_stride: isize,
  ) {
    let side = super::square_side(W);
    if side == 1 {
      // SAFETY: one element of 16 bytes (the contract).
      unsafe { store(out, load(source)) };
      return;
    }
    // SAFETY: line j of the source (the contract), for j < side.
    let mut lines: [Vector; 16] =
      core::array::from_fn(|j| unsafe { load(source.offset((j % side) as isize * source_stride)) });
    let mut rounds = side.trailing_zeros();
    while rounds > 0 {
      let mut next = lines;
      for i in 0..side / 2 {
        (next[2 * i], next[2 * i + 1]) = zip::<W>(lines[i], lines[i + side / 2]);
      }
      lines = next;
      rounds -= 1;
    }
    for (i, &line) in lines.iter().take(side).enumerate() {
      // SAFETY: row i of the destination (the contract), i < side.
      unsafe { store(out.offset(i as isize * out_stride), line) };
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::convert::testing::pattern;

  /// Both kernels against the definition, with strides larger than a line, negative, and
  /// unaligned starts.
  fn check<const W: usize>() {
    let side = square_side(W);
    let line = side * W;
    for (source_stride, out_stride, skew) in [
      (line as isize, line as isize, 0usize),
      (line as isize + 3, line as isize + 5, 1),
      (-(2 * line as isize), 3 * line as isize, 7),
    ] {
      let span = side * source_stride.unsigned_abs() + line + 16;
      let bytes = pattern(span + skew);
      let first = if source_stride < 0 {
        skew + (side - 1) * source_stride.unsigned_abs()
      } else {
        skew
      };
      let out_len = side * out_stride.unsigned_abs() + line;
      let mut want = vec![0u8; out_len];
      for i in 0..side {
        for j in 0..side {
          let from = (first as isize + j as isize * source_stride) as usize + i * W;
          let to = i * out_stride as usize + j * W;
          want[to..to + W].copy_from_slice(&bytes[from..from + W]);
        }
      }
      for vector in [true, false] {
        let mut out = vec![0u8; out_len];
        // SAFETY: every line and row is inside `bytes` and `out` (sized above).
        unsafe {
          let source = bytes.as_ptr().add(first);
          if vector {
            transpose_square::<W>(source, source_stride, out.as_mut_ptr(), out_stride);
          } else {
            transpose_scalar::<W>(source, source_stride, out.as_mut_ptr(), out_stride);
          }
        }
        assert_eq!(
          out, want,
          "W {W}, strides {source_stride} {out_stride}, vector {vector}"
        );
      }
    }
  }

  #[test]
  fn square_transposes_match_the_definition_at_every_width() {
    check::<1>();
    check::<2>();
    check::<4>();
    check::<8>();
    check::<16>();
  }
}
