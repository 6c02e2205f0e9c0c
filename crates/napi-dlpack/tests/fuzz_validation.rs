//! Randomised validation: hundreds of thousands of hostile `DLTensor` descriptors (extreme
//! dimensions, strides, offsets, dtypes, devices). Validation must never panic (debug builds
//! check every arithmetic overflow), whatever it accepts must satisfy the invariants the rest of
//! the crate relies on, and its verdict on the layout must agree with an independent reference
//! computed in 128-bit arithmetic, which cannot overflow. The data pointer is never
//! dereferenced by validation, so it can point anywhere.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{count, import_versioned, Spec};
use napi_dlpack::ffi::{
  DLDataType, DLDevice, DLTensor, DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED,
};
use napi_dlpack::validation::validate;
use napi_dlpack::{DType, Device, ErrorKind};

/// The layout facts the reference computes: element count and the lowest and highest element
/// offsets (in elements, relative to the first element).
#[derive(Debug, PartialEq, Eq)]
struct Extent {
  numel: i128,
  min_offset: i128,
  max_offset: i128,
}

/// The reference: what validation must decide about the layout of a tensor whose dtype,
/// device, ndim and pointers are valid, written from the rules alone, in i128 (no product or
/// sum of two i64 values can overflow it). `None`: the layout must be refused (a negative
/// dimension, or a count, extent, span or address that does not fit).
fn reference_extent(
  shape: &[i64],
  strides: Option<&[i64]>,
  itemsize: i128,
  data: u64,
  byte_offset: u64,
  address_device: bool,
) -> Option<Extent> {
  let first = i128::from(data) + i128::from(byte_offset);
  if first > i128::from(u64::MAX) {
    return None;
  }
  if shape.iter().any(|&dim| dim < 0) {
    return None;
  }
  // The element count is computed left to right in i64: every prefix product must fit (a
  // later zero dimension does not excuse an earlier overflow).
  let mut numel = 1i128;
  for &dim in shape {
    numel *= i128::from(dim);
    if numel > i128::from(i64::MAX) {
      return None;
    }
  }
  if numel == 0 {
    // Nothing is addressed: strides, data and offsets are not looked at.
    return Some(Extent {
      numel,
      min_offset: 0,
      max_offset: 0,
    });
  }
  let (min_offset, max_offset) = match strides {
    None => (0, numel - 1),
    Some(strides) => shape
      .iter()
      .zip(strides)
      .map(|(&dim, &stride)| (i128::from(dim) - 1) * i128::from(stride))
      .fold((0i128, 0i128), |(low, high), reach| {
        (low + reach.min(0), high + reach.max(0))
      }),
  };
  // Offsets are i64 in the layout.
  if min_offset < i128::from(i64::MIN) || max_offset > i128::from(i64::MAX) {
    return None;
  }
  let span = (max_offset - min_offset + 1) * itemsize;
  if span > isize::MAX as i128 {
    return None;
  }
  // On devices whose `data` is an address, every byte from the lowest element to the end of
  // the highest must be an address: no wrap below 0, and the end fits in a usize.
  if address_device
    && (first + min_offset * itemsize < 0
      || first + (max_offset + 1) * itemsize > usize::MAX as i128)
  {
    return None;
  }
  Some(Extent {
    numel,
    min_offset,
    max_offset,
  })
}

/// xorshift64*: deterministic, so a failure reproduces.
struct Rng(u64);

impl Rng {
  fn next(&mut self) -> u64 {
    self.0 ^= self.0 >> 12;
    self.0 ^= self.0 << 25;
    self.0 ^= self.0 >> 27;
    self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
  }

  fn below(&mut self, n: u64) -> u64 {
    self.next() % n
  }

  /// Mostly small values, sometimes the edges of i64.
  fn dim_or_stride(&mut self) -> i64 {
    match self.below(10) {
      0 => i64::MAX - self.below(3) as i64,
      1 => i64::MIN + self.below(3) as i64,
      2 => -(self.below(8) as i64),
      3 => 1 << self.below(63),
      _ => self.below(9) as i64,
    }
  }

  /// A dimension and stride whose reach, (dim - 1) * stride, is exactly ±2^64: it wraps to 0
  /// in 64-bit arithmetic, so a validation that lost the overflow would accept the tensor as
  /// a small one (shape [2^32 + 1], stride 2^32 is the classic case).
  fn wrapping_pair(&mut self) -> (i64, i64) {
    let k = 2 + self.below(61); // 2..=62, so both 2^k and 2^(64-k) fit in an i64
    let stride = 1i64 << (64 - k);
    (
      (1i64 << k) + 1,
      if self.below(2) == 0 { stride } else { -stride },
    )
  }
}

/// A random descriptor: its `DLTensor` (shape and strides pointers only say NULL or not: the
/// caller points them at `shape` and `strides`), the values, and the versioned flags.
struct Case {
  tensor: DLTensor,
  shape: Vec<i64>,
  strides: Vec<i64>,
  flags: u64,
}

/// The hostile descriptors both fuzz tests feed their validators.
fn random_case(rng: &mut Rng) -> Case {
  let ndim = match rng.below(8) {
    0 => rng.below(70) as i32,
    1 => -(rng.below(3) as i32) - 1,
    _ => rng.below(5) as i32,
  };
  let len = ndim.clamp(0, 70) as usize;
  let mut shape: Vec<i64> = (0..len).map(|_| rng.dim_or_stride()).collect();
  let mut strides: Vec<i64> = (0..len).map(|_| rng.dim_or_stride()).collect();
  if len > 0 && rng.below(4) == 0 {
    let axis = rng.below(len as u64) as usize;
    (shape[axis], strides[axis]) = rng.wrapping_pair();
  }
  let data = match rng.below(4) {
    0 => 0usize,
    1 => usize::MAX - rng.below(64) as usize,
    _ => 0x1000_0000 + rng.below(1 << 20) as usize,
  };
  let tensor = DLTensor {
    data: data as *mut _,
    device: DLDevice {
      device_type: rng.below(20) as u32,
      device_id: rng.below(4) as i32 - 1,
    },
    ndim,
    dtype: DLDataType {
      code: rng.below(19) as u8,
      bits: [1, 4, 6, 8, 16, 32, 64, 128, 255][rng.below(9) as usize],
      lanes: if rng.below(8) == 0 { 2 } else { 1 },
    },
    shape: if rng.below(16) == 0 {
      std::ptr::null_mut()
    } else {
      std::ptr::NonNull::dangling().as_ptr()
    },
    strides: if rng.below(4) == 0 {
      std::ptr::null_mut()
    } else {
      std::ptr::NonNull::dangling().as_ptr()
    },
    byte_offset: match rng.below(4) {
      0 => u64::MAX - rng.below(8),
      1 => rng.below(1 << 40),
      _ => rng.below(64),
    },
  };
  let flags = if rng.below(2) == 0 {
    DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED
  } else {
    0
  };
  Case {
    tensor,
    shape,
    strides,
    flags,
  }
}

#[test]
fn hostile_descriptors_never_panic_and_accepted_ones_are_consistent() {
  let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
  let mut accepted = 0;
  let mut refused_layouts = 0;
  // Under Miri (about 10 000 times slower) a smaller sample still checks the unsafe reads.
  let cases = if cfg!(miri) { 6_000 } else { 300_000 };
  for _ in 0..cases {
    let Case {
      tensor,
      mut shape,
      mut strides,
      flags,
    } = random_case(&mut rng);
    let ndim = tensor.ndim;
    let data = tensor.data as usize;
    let tensor = DLTensor {
      shape: if tensor.shape.is_null() {
        std::ptr::null_mut()
      } else {
        shape.as_mut_ptr()
      },
      strides: if tensor.strides.is_null() {
        std::ptr::null_mut()
      } else {
        strides.as_mut_ptr()
      },
      ..tensor
    };
    // SAFETY: shape and strides point at `len` readable i64s (or are NULL); `len >= ndim` when
    // ndim > 0. Validation reads nothing else.
    let verdict = unsafe { validate(&tensor, flags) };
    // The reference, for tensors whose dtype, device and pointers passed: then the layout
    // decides, and validation's verdict on it must be the reference's.
    let reference = || {
      let itemsize = DType::from_dl(tensor.dtype, flags)
        .expect("the dtype was accepted")
        .itemsize();
      let address_device = Device::from_dl(tensor.device)
        .expect("the device was accepted")
        .device_type
        .data_is_address();
      let ndim = usize::try_from(ndim).expect("ndim was accepted");
      let strides = (!tensor.strides.is_null()).then(|| &strides[..ndim]);
      reference_extent(
        &shape[..ndim],
        strides,
        itemsize as i128,
        data as u64,
        tensor.byte_offset,
        address_device,
      )
    };
    let layout = match verdict {
      Ok(layout) => layout,
      Err(error) => {
        match error.kind() {
          ErrorKind::Shape | ErrorKind::Overflow | ErrorKind::ByteOffset => {
            refused_layouts += 1;
            let expected = reference();
            assert!(
              expected.is_none(),
              "refused ({}) a layout the reference accepts: shape {:?} strides {:?} {:?}",
              error.code(),
              &shape[..ndim as usize],
              (!tensor.strides.is_null()).then(|| &strides[..ndim as usize]),
              expected
            );
          }
          ErrorKind::NullData => {
            let expected = reference().expect("NULL data is checked after the layout");
            assert!(expected.numel > 0 && tensor.data.is_null());
          }
          _ => {}
        }
        continue;
      }
    };
    accepted += 1;
    let expected = reference().unwrap_or_else(|| {
      panic!(
        "accepted a layout the reference refuses: shape {:?} strides {:?} data {data:#x} byte_offset {}",
        &shape[..ndim as usize],
        (!tensor.strides.is_null()).then(|| &strides[..ndim as usize]),
        tensor.byte_offset
      )
    });
    assert_eq!(
      Extent {
        numel: layout.numel() as i128,
        min_offset: layout.min_offset().into(),
        max_offset: layout.max_offset().into(),
      },
      expected,
      "shape {:?} strides {:?}",
      &shape[..ndim as usize],
      (!tensor.strides.is_null()).then(|| &strides[..ndim as usize]),
    );
    // Invariants of an accepted layout.
    let numel: i128 = shape
      .iter()
      .take(layout.ndim())
      .map(|&d| i128::from(d))
      .product();
    assert_eq!(layout.numel() as i128, numel);
    assert!(layout.min_offset() <= 0 && layout.max_offset() >= 0);
    let itemsize = layout.dtype().itemsize() as i128;
    if layout.numel() == 0 {
      assert_eq!(layout.span_bytes(), 0);
    } else {
      let span = (i128::from(layout.max_offset()) - i128::from(layout.min_offset()) + 1) * itemsize;
      assert_eq!(layout.span_bytes() as i128, span);
      assert!(span <= isize::MAX as i128);
      assert!(!tensor.data.is_null());
      if layout.device().device_type.data_is_address() {
        let first = layout.first_element() as i128;
        assert!(first + i128::from(layout.min_offset()) * itemsize >= 0);
        assert!(first + (i128::from(layout.max_offset()) + 1) * itemsize <= usize::MAX as i128 + 1);
      }
    }
    assert_eq!(
      layout.first_element() as u128,
      data as u128 + u128::from(tensor.byte_offset)
    );
  }
  // The generator must exercise the accepting path too, not only rejections, and reach the
  // layout checks often enough for the reference to matter.
  assert!(
    accepted > cases / 300,
    "only {accepted} descriptors were accepted"
  );
  assert!(
    refused_layouts > cases / 100,
    "only {refused_layouts} layouts were refused"
  );
}

/// Randomised strided reads: small tensors over real memory, with negative, zero and large
/// strides, and size-1 dimensions carrying any stride (`i64::MAX`, `i64::MIN`, ...: they never
/// move, so they must never be added). Every element read through `view().iter()`, `to_vec`
/// and `get` must be the one an i128 reference computes, and nothing may overflow.
#[test]
fn strided_reads_match_a_reference_on_random_layouts() {
  let mut rng = Rng(0x5eed_0f57_121d_e5a1);
  let cases = if cfg!(miri) { 150 } else { 20_000 };
  let extreme = [
    i64::MAX,
    i64::MIN,
    i64::MAX - 1,
    i64::MIN + 1,
    1 << 62,
    -(1 << 62),
  ];
  for _ in 0..cases {
    let ndim = rng.below(5) as usize;
    let shape: Vec<i64> = (0..ndim)
      .map(|_| {
        if rng.below(12) == 0 {
          0
        } else {
          1 + rng.below(4) as i64
        }
      })
      .collect();
    let strides: Vec<i64> = shape
      .iter()
      .map(|&dim| {
        if dim == 1 && rng.below(2) == 0 {
          extreme[rng.below(extreme.len() as u64) as usize]
        } else {
          rng.below(9) as i64 - 4
        }
      })
      .collect();
    // The reference: the offset of every element in row-major order, in i128.
    let numel: usize = shape.iter().map(|&d| d as usize).product();
    let index_of = |mut flat: usize| -> Vec<usize> {
      let mut index = vec![0; ndim];
      for axis in (0..ndim).rev() {
        index[axis] = flat % shape[axis] as usize;
        flat /= shape[axis] as usize;
      }
      index
    };
    let offset_of = |index: &[usize]| -> i128 {
      index
        .iter()
        .zip(&strides)
        .map(|(&i, &stride)| i as i128 * i128::from(stride))
        .sum()
    };
    let offsets: Vec<i128> = (0..numel).map(|flat| offset_of(&index_of(flat))).collect();
    let lowest = offsets.iter().copied().min().unwrap_or(0).min(0);
    let highest = offsets.iter().copied().max().unwrap_or(0).max(0);
    // Memory: element k of the span (from the lowest element) holds the value k.
    let span = usize::try_from(highest - lowest + 1).unwrap();
    let mut spec = Spec::f32(&[1]).strides(&strides);
    spec.shape = shape.clone();
    spec.data = vec![0; span.div_ceil(2)];
    for k in 0..span {
      spec.data[k / 2] |= u64::from((k as f32).to_bits()) << (32 * (k % 2));
    }
    spec.byte_offset = u64::try_from(-lowest * 4).unwrap();
    let expected: Vec<f32> = offsets.iter().map(|&o| (o - lowest) as f32).collect();

    let (result, calls) = import_versioned(spec);
    let tensor =
      result.unwrap_or_else(|code| panic!("{code}: shape {shape:?} strides {strides:?}"));
    let view = tensor.view::<f32>().unwrap();
    assert_eq!(
      view.iter().collect::<Vec<_>>(),
      expected,
      "shape {shape:?} strides {strides:?}"
    );
    assert_eq!(
      tensor.to_vec::<f32>().unwrap(),
      expected,
      "shape {shape:?} strides {strides:?}"
    );
    for (flat, &value) in expected.iter().enumerate() {
      assert_eq!(view.get(&index_of(flat)), Some(value));
    }
    if ndim > 0 {
      let mut outside = vec![0; ndim];
      let axis = rng.below(ndim as u64) as usize;
      outside[axis] = shape[axis] as usize;
      assert_eq!(
        view.get(&outside),
        None,
        "index {outside:?} of shape {shape:?}"
      );
    }
    drop(tensor);
    assert_eq!(count(&calls), 1);
  }
}

/// The directory holding Node's `node_api.h` (the header includes it): `NODE_INCLUDE_DIR`,
/// else the system's, else the running `node`'s own `include/node`.
fn node_include_dir() -> PathBuf {
  let has_header = |dir: &Path| dir.join("node_api.h").is_file();
  if let Some(dir) = std::env::var_os("NODE_INCLUDE_DIR").map(PathBuf::from) {
    assert!(has_header(&dir), "NODE_INCLUDE_DIR has no node_api.h");
    return dir;
  }
  let system = PathBuf::from("/usr/include/node");
  if has_header(&system) {
    return system;
  }
  let exec_path = Command::new("node")
    .args(["-p", "process.execPath"])
    .output()
    .expect("node_api.h: set NODE_INCLUDE_DIR, or put node on PATH");
  let node = PathBuf::from(String::from_utf8_lossy(&exec_path.stdout).trim());
  let dir = node
    .parent()
    .and_then(Path::parent)
    .map(|prefix| prefix.join("include").join("node"))
    .filter(|dir| has_header(dir))
    .expect("node_api.h: set NODE_INCLUDE_DIR");
  dir
}

/// Compiles `tests/header/extent_oracle.c` (the header's `napi_dlpack_tensor_extent` as a
/// filter) with `$CC` (default `cc`), with undefined-behaviour checks where the compiler has
/// them, so a signed overflow inside the helper fails the test too.
fn build_extent_oracle() -> PathBuf {
  let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
  let source = manifest
    .join("tests")
    .join("header")
    .join("extent_oracle.c");
  let include = manifest.join("..").join("..").join("include");
  let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("extent_oracle");
  let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
  let compile = |sanitize: bool| {
    let mut command = Command::new(&compiler);
    command.args([
      "-std=c99",
      "-O1",
      "-Wall",
      "-Wextra",
      "-Werror",
      "-DNAPI_VERSION=8",
    ]);
    if sanitize {
      command.args(["-fsanitize=undefined", "-fno-sanitize-recover=all"]);
    }
    command
      .arg("-I")
      .arg(&include)
      .arg("-I")
      .arg(node_include_dir())
      .arg("-o")
      .arg(&out)
      .arg(&source)
      .output()
      .expect("the C compiler ($CC, default cc) runs")
  };
  let built = compile(true);
  if !built.status.success() {
    // Without a UB runtime the verdicts are still compared.
    let plain = compile(false);
    assert!(
      plain.status.success(),
      "extent_oracle.c does not compile:\n{}",
      String::from_utf8_lossy(&plain.stderr)
    );
  }
  out
}

/// Where the header helper's `shape` / `strides` pointer goes: NULL, a real array, or one byte
/// past its start (misaligned: both validators must refuse it before reading).
fn pointer_mode(rng: &mut Rng, null: bool) -> u8 {
  match (null, rng.below(16)) {
    (true, _) => 0,
    (false, 0) => 2,
    (false, _) => 1,
  }
}

/// The same descriptors through `napi_dlpack_tensor_extent` (include/napi_dlpack.h, what C
/// consumers of the exchange table validate a borrow with, protocol §5.4) and through the
/// crate's import validation: the same verdict on every one, the same error code when both
/// refuse, and the same extent when both accept. One set of rules in two languages.
#[test]
fn the_header_extent_helper_agrees_with_import_validation() {
  if cfg!(miri) {
    return; // runs a C program
  }
  let oracle = build_extent_oracle();
  let mut rng = Rng(0x6a09_e667_f3bc_c908);
  let cases = 200_000;
  let mut input = String::new();
  let mut expected = Vec::with_capacity(cases);
  let mut descriptors = Vec::with_capacity(cases);
  for _ in 0..cases {
    let Case {
      tensor,
      shape,
      strides,
      flags,
    } = random_case(&mut rng);
    let shape_mode = pointer_mode(&mut rng, tensor.shape.is_null());
    let strides_mode = pointer_mode(&mut rng, tensor.strides.is_null());
    // One spare element, so a pointer one byte in stays inside the allocation.
    let mut shape_store = shape.clone();
    shape_store.push(0);
    let mut strides_store = strides.clone();
    strides_store.push(0);
    let place = |store: &mut Vec<i64>, mode: u8| match mode {
      0 => std::ptr::null_mut(),
      1 => store.as_mut_ptr(),
      _ => store
        .as_mut_ptr()
        .cast::<u8>()
        .wrapping_add(1)
        .cast::<i64>(),
    };
    let tensor = DLTensor {
      shape: place(&mut shape_store, shape_mode),
      strides: place(&mut strides_store, strides_mode),
      ..tensor
    };
    // SAFETY: shape and strides are NULL, misaligned (refused before any read), or point at
    // `len >= ndim` readable i64s. The data pointer is never read.
    let verdict = match unsafe { validate(&tensor, flags) } {
      Err(error) => format!("E {}", error.code()),
      Ok(layout) => format!(
        "OK {} {} {} {} {} {}",
        layout.numel(),
        layout.dtype().itemsize(),
        layout.min_offset(),
        layout.max_offset(),
        layout.span_bytes(),
        u8::from(layout.is_c_contiguous())
      ),
    };
    expected.push(verdict);
    let values = |values: &[i64]| {
      values
        .iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(" ")
    };
    let line = format!(
      "{} {} {} {} {} {} {} {} {} {} {} {} {} {}",
      tensor.data as usize,
      tensor.byte_offset,
      tensor.device.device_type,
      tensor.device.device_id,
      tensor.ndim,
      tensor.dtype.code,
      tensor.dtype.bits,
      tensor.dtype.lanes,
      flags,
      shape_mode,
      strides_mode,
      shape.len(),
      values(&shape),
      values(&strides),
    );
    input.push_str(&line);
    input.push('\n');
    descriptors.push(line);
  }
  let mut child = Command::new(&oracle)
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("the oracle runs");
  let mut stdin = child.stdin.take().expect("piped stdin");
  let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
  let output = child.wait_with_output().expect("the oracle finishes");
  let written = writer.join().expect("the writer thread");
  let answers = String::from_utf8(output.stdout).expect("ASCII answers");
  let answers: Vec<&str> = answers.lines().collect();
  // A crash or a sanitizer report: name the descriptor it stopped at.
  assert!(
    output.status.success() && written.is_ok(),
    "the header helper failed ({:?}) at descriptor {}: {}\n{}",
    output.status,
    answers.len(),
    descriptors.get(answers.len()).map_or("", String::as_str),
    String::from_utf8_lossy(&output.stderr)
  );
  assert_eq!(answers.len(), cases, "one answer per descriptor");
  let (mut accepted, mut disagreements) = (0, Vec::new());
  for ((answer, expected), descriptor) in answers.iter().zip(&expected).zip(&descriptors) {
    if answer.starts_with("OK") {
      accepted += 1;
    }
    if answer != expected {
      disagreements.push(format!(
        "header {answer:?}, import {expected:?}: {descriptor}"
      ));
    }
  }
  assert!(
    disagreements.is_empty(),
    "{} of {cases} verdicts differ, e.g.\n{}",
    disagreements.len(),
    disagreements[..disagreements.len().min(8)].join("\n")
  );
  assert!(accepted > cases / 300, "only {accepted} accepted");
}
