//! The conversion kernels alone (no JS, no allocation) on a 1920x1080x3 uint8 image, for
//! counting their instructions with callgrind: `benches/callgrind/convert-kernels.mjs` runs each
//! case with 1 and 3 calls and reports the difference per element, so set-up cancels out.
//!
//!   convert_kernels <normalise|chw_u8|contiguous|scale|plain|transpose_u8|transpose_f32> <calls>
//!
//! The two transposes copy the transposed view of a 2048x2048 uint8 and a 1024x1024 float32
//! matrix (4 MiB each; `copy_dense`'s cache-blocked tiles) instead of the image.
use napi_dlpack::convert::{convert, copy_dense, permute, Affine, Strided};
use napi_dlpack::DType;

fn main() -> Result<(), Box<dyn std::error::Error>> {
  let mut args = std::env::args().skip(1);
  let usage = "usage: convert_kernels \
    <normalise|chw_u8|contiguous|scale|plain|transpose_u8|transpose_f32> <calls>";
  let case = args.next().ok_or(usage)?;
  let calls: usize = args.next().ok_or(usage)?.parse()?;
  let (h, w, c) = (1080i64, 1920i64, 3i64);
  let n = (h * w * c) as usize;
  let pixels: Vec<u8> = (0..n).map(|i| (i * 37 % 251) as u8).collect();
  let hwc = [h, w, c];
  let hwc_strides = [w * c, c, 1];
  let (chw, chw_strides) = permute(&hwc, &hwc_strides, &[2, 0, 1])?;
  let normalise = Affine {
    scale: Some(vec![1.0 / 255.0]),
    mean: Some(vec![0.485, 0.456, 0.406]),
    std: Some(vec![0.229, 0.224, 0.225]),
    axis: Some(0),
    ..Affine::default()
  };
  let scale = Affine {
    scale: Some(vec![1.0 / 255.0]),
    ..Affine::default()
  };
  let mut out = vec![0u8; n * 4];
  let mut checksum = 0u64;
  if let Some(dtype) = match case.as_str() {
    "transpose_u8" => Some(DType::UInt8),
    "transpose_f32" => Some(DType::Float32),
    _ => None,
  } {
    let side = 2048 / dtype.itemsize().isqrt() as i64;
    let bytes = (side * side) as usize * dtype.itemsize();
    let shape = [side, side];
    let strides = [1, side];
    for _ in 0..calls {
      let source = Strided::over_bytes(&pixels[..bytes], 0, dtype, &shape, &strides)?;
      copy_dense(&source, &mut out[..bytes])?;
      checksum = checksum.wrapping_add(u64::from(out[bytes / 2 + 7]));
    }
    println!("{checksum}");
    return Ok(());
  }
  for _ in 0..calls {
    let image = Strided::over_bytes(&pixels, 0, DType::UInt8, &hwc, &hwc_strides)?;
    let planar = Strided::over_bytes(&pixels, 0, DType::UInt8, &chw, &chw_strides)?;
    match case.as_str() {
      "normalise" => convert(&planar, DType::Float32, &normalise, &mut out)?,
      "chw_u8" => convert(&planar, DType::UInt8, &Affine::default(), &mut out[..n])?,
      "contiguous" => copy_dense(&planar, &mut out[..n])?,
      "scale" => convert(&image, DType::Float32, &scale, &mut out)?,
      "plain" => convert(&image, DType::Float32, &Affine::default(), &mut out)?,
      _ => return Err(usage.into()),
    }
    checksum = checksum.wrapping_add(u64::from(out[n / 2 + 7]));
  }
  println!("{checksum}");
  Ok(())
}
