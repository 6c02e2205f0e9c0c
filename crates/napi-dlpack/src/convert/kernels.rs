//! The planar (CHW) split of interleaved 3-channel pixels (SSSE3 shuffles where the CPU has them).

use core::mem::MaybeUninit;

use super::Strided;

/// The planar (CHW) copy of an interleaved 3-channel byte image: the `permute(2, 0, 1)` view
/// of an HWC `uint8` image (shape `[3, H, W]`, strides `[1, any, 3]`), the most common
/// preprocessing copy. Row by row, each run of 16 pixels (48 interleaved bytes) is split into
/// the three planes with byte shuffles where the CPU has SSSE3 (checked at run time), else
/// byte by byte. The general row copy reads the source three times, one byte in three each
/// time; this reads it once. Returns false, having written nothing, for any other layout.
pub(super) fn copy_planes_of_3(source: &Strided<'_>, out: &mut [MaybeUninit<u8>]) -> bool {
  if source.dtype.itemsize() != 1
    || source.shape.len() != 3
    || source.shape[0] != 3
    || source.strides[0] != 1
    || source.strides[2] != 3
  {
    return false;
  }
  // Non-negative: a validated shape (and numel > 0 was checked by the caller).
  let (height, width) = (source.shape[1] as usize, source.shape[2] as usize);
  let plane = height * width;
  let row_stride = source.strides[1] as isize;
  let planes = out.as_mut_ptr().cast::<u8>();
  for y in 0..height {
    // SAFETY: the row's pixels are the 3 * width bytes from `first + y * row_stride`, all
    // elements of the validated source layout (Strided's contract: readable, not written
    // meanwhile); `out` holds 3 * plane bytes (check_out), the three rows written are
    // `y * width .. (y + 1) * width` of each plane, and `out` does not overlap the source.
    unsafe {
      let row = source.first.offset(y as isize * row_stride);
      let at = y * width;
      split_pixels_of_3(
        row,
        [
          planes.add(at),
          planes.add(plane + at),
          planes.add(2 * plane + at),
        ],
        width,
      );
    }
  }
  true
}

/// Splits `width` interleaved 3-byte pixels at `pixels` into the three rows of `planes`.
///
/// # Safety
/// `pixels` readable for `3 * width` bytes; each of `planes` writable for `width` bytes, none
/// overlapping another or the pixels.
unsafe fn split_pixels_of_3(pixels: *const u8, planes: [*mut u8; 3], width: usize) {
  #[allow(unused_mut)] // assigned only where the SIMD path exists
  let mut done = 0;
  #[cfg(all(target_arch = "x86_64", not(miri)))]
  if std::is_x86_feature_detected!("ssse3") {
    // SAFETY: SSSE3 is present (checked just above); the pointer contract is forwarded.
    done = unsafe { split_pixels_of_3_ssse3(pixels, planes, width) };
  }
  for x in done..width {
    for (channel, plane) in planes.iter().enumerate() {
      // SAFETY: x < width: inside the pixels and each plane row (the contract).
      unsafe { plane.add(x).write(pixels.add(3 * x + channel).read()) };
    }
  }
}

/// The `pshufb` mask that moves the bytes of `channel` found in the `part`-th 16 bytes of a
/// 48-byte run of 16 pixels to their pixel's position, zeroing the rest (bit 7 set).
#[cfg(all(target_arch = "x86_64", not(miri)))]
const fn split_mask(channel: usize, part: usize) -> [i8; 16] {
  let mut mask = [i8::MIN; 16];
  let mut pixel = 0;
  while pixel < 16 {
    let byte = 3 * pixel + channel;
    if byte >= 16 * part && byte < 16 * part + 16 {
      mask[pixel] = (byte - 16 * part) as i8;
    }
    pixel += 1;
  }
  mask
}

/// [`split_pixels_of_3`] 16 pixels at a time with SSSE3 byte shuffles: three loads, nine
/// shuffles, six ORs and three stores per 48 bytes. Returns how many pixels it split (a
/// multiple of 16); the caller does the rest.
///
/// # Safety
/// The CPU supports SSSE3; the pointer contract of [`split_pixels_of_3`].
#[cfg(all(target_arch = "x86_64", not(miri)))]
#[target_feature(enable = "ssse3")]
unsafe fn split_pixels_of_3_ssse3(pixels: *const u8, planes: [*mut u8; 3], width: usize) -> usize {
  use core::arch::x86_64::{
    __m128i, _mm_loadu_si128, _mm_or_si128, _mm_shuffle_epi8, _mm_storeu_si128,
  };
  const MASKS: [[[i8; 16]; 3]; 3] = [
    [split_mask(0, 0), split_mask(0, 1), split_mask(0, 2)],
    [split_mask(1, 0), split_mask(1, 1), split_mask(1, 2)],
    [split_mask(2, 0), split_mask(2, 1), split_mask(2, 2)],
  ];
  // SAFETY: unaligned loads of 16-byte constants.
  let masks: [[__m128i; 3]; 3] =
    MASKS.map(|parts| parts.map(|mask| unsafe { _mm_loadu_si128(mask.as_ptr().cast()) }));
  let mut x = 0;
  while width - x >= 16 {
    // SAFETY: pixels x .. x + 16 are inside the row (x + 16 <= width): bytes 3x .. 3x + 48.
    let parts = unsafe {
      let run = pixels.add(3 * x);
      [
        _mm_loadu_si128(run.cast()),
        _mm_loadu_si128(run.add(16).cast()),
        _mm_loadu_si128(run.add(32).cast()),
      ]
    };
    for (plane, mask) in planes.iter().zip(&masks) {
      let bytes = _mm_or_si128(
        _mm_or_si128(
          _mm_shuffle_epi8(parts[0], mask[0]),
          _mm_shuffle_epi8(parts[1], mask[1]),
        ),
        _mm_shuffle_epi8(parts[2], mask[2]),
      );
      // SAFETY: bytes x .. x + 16 of the plane row (x + 16 <= width).
      unsafe { _mm_storeu_si128(plane.add(x).cast(), bytes) };
    }
    x += 16;
  }
  x
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::convert::copy_dense_uninit;
  use crate::convert::engine::as_uninit;
  use crate::convert::testing::reference_offsets;
  use crate::dtype::DType;

  #[test]
  fn planar_copies_of_3_channel_pixels_match_the_offsets_at_every_width_and_row_stride() {
    // The shuffle path splits 16 pixels at a time: every width 0..=50 covers each tail, and
    // rows of a wider image (cropped) and bottom-up rows (negative stride) each layout the
    // permuted view of an HWC image can have.
    for height in 1..=3usize {
      for width in 0..=50usize {
        let wider = width + 5;
        let bytes: Vec<u8> = (0..height * wider * 3)
          .map(|i| (i * 89 % 241) as u8)
          .collect();
        let row = (wider * 3) as i64;
        let last_row = (height - 1) * wider * 3;
        let shape = [3, height as i64, width as i64];
        for (first, strides) in [
          (0usize, [1, (width * 3) as i64, 3]), // dense HWC
          (0, [1, row, 3]),                     // a crop of a wider image
          (last_row + 3, [1, -row, 3]),         // flipped rows, starting one pixel in
        ] {
          let source = Strided::over_bytes(&bytes, first, DType::UInt8, &shape, &strides).unwrap();
          let mut out = vec![0xa5u8; 3 * height * width];
          copy_dense_uninit(&source, as_uninit(&mut out)).unwrap();
          let want: Vec<u8> = reference_offsets(&shape, &strides)
            .iter()
            .map(|&offset| bytes[(first as i64 + offset) as usize])
            .collect();
          assert_eq!(
            out, want,
            "{height}x{width} strides {strides:?} first {first}"
          );
        }
      }
    }
  }
}
