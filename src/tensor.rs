//! The native tensor handle behind the JS `Tensor` class, and the functions the JS layer calls.
//!
//! A handle is a type-tagged `napi_external` holding a [`Handle`]: a shared storage plus the
//! layout of one tensor over it. One of our own capsules, once this addon has consumed it,
//! serves as a handle too: it then holds the new tensor's `Handle` (see `own_capsule`). The JS
//! class wraps a handle; several JS tensors may share one (`fromDLPack(tensor)` needs no
//! capsule at all). Everything here runs on the JS thread of the environment that created the
//! handle.

use std::cell::RefCell;
use std::ptr;
use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::{BigInt, Unknown};
use napi::{sys, Env, JsValue};
use napi_derive::napi;
use napi_dlpack::capsule;
use napi_dlpack::cuda::Stream;
use napi_dlpack::validation::layout_of;
use napi_dlpack::{
  export, take_owner, DLPackError, DType, Device, DeviceType, ErrorKind, ExportFormat,
  ForeignTensor,
};

use crate::js_memory::{self, BufferRef};
use crate::own_capsule;
use crate::storage::{copy_bytes, try_zeroed_vec, ExportOwner, Memory, Meta, Storage};

/// Type tag of handle externals: the exchange table's public object tag (a consumer finding a
/// handle under a tensor's exchange property borrows it directly, see `exchange`). Other
/// producers' objects carry it too: ours are told apart by the table their header names.
pub(crate) const HANDLE_TAG: sys::napi_type_tag = napi_dlpack::exchange::OBJECT_TAG;

/// What a handle external points to. `repr(C)`: it starts with the exchange table's object
/// header (the external carries the public object tag, see `exchange`).
#[repr(C)]
pub struct Handle {
  exchange: napi_dlpack::exchange::ExchangeObject,
  /// `None` once released (`dispose()`).
  storage: Option<Arc<Storage>>,
  pub(crate) meta: Arc<Meta>,
  /// What an exchange-table borrow holds on to (`exchange::dltensor_from_value`): made on the
  /// first borrow, then shared by every later one (one atomic increment each, no allocation).
  /// Emptied with `storage` by `dispose()`; borrows in progress keep their own count.
  pub(crate) borrow_pin: Option<Arc<BorrowPin>>,
  /// A cached zero-copy view (external ArrayBuffer) of foreign memory, so a storage is wrapped
  /// by at most one ArrayBuffer per handle, and the slot through which that ArrayBuffer keeps
  /// the storage alive (emptied by `dispose()`).
  view: RefCell<Option<(BufferRef, ViewSlot)>>,
}

/// The storage and layout a borrowed `DLTensor` points into (data; shape and strides), kept
/// alive together by one token (`Arc::into_raw`) until the borrower releases it.
pub(crate) struct BorrowPin {
  pub(crate) storage: Arc<Storage>,
  pub(crate) meta: Arc<Meta>,
}

/// What an external ArrayBuffer view holds on to. `dispose()` detaches the ArrayBuffer and
/// empties the slot, so the memory is released now rather than at the next GC.
type ViewSlot = Arc<Mutex<Option<Arc<Storage>>>>;

pub(crate) type Result<T> = std::result::Result<T, napi::Error<&'static str>>;

pub(crate) fn fail(kind: ErrorKind, message: impl Into<String>) -> napi::Error<&'static str> {
  DLPackError::new(kind, message).into()
}

pub(crate) fn status(what: &str, status: sys::napi_status) -> Result<()> {
  if status == sys::Status::napi_ok {
    Ok(())
  } else {
    Err(js_memory::napi_error(what, status).into())
  }
}

pub(crate) fn new_handle<'env>(
  env: &'env Env,
  storage: Arc<Storage>,
  meta: Meta,
) -> Result<Unknown<'env>> {
  let handle = Handle {
    exchange: crate::exchange::object_header(),
    storage: Some(storage),
    meta: Arc::new(meta),
    borrow_pin: None,
    view: RefCell::new(None),
  };
  // SAFETY: our env, on its thread.
  let value = unsafe { js_memory::tagged_external(env.raw(), handle, &HANDLE_TAG)? };
  // SAFETY: live value of this env.
  Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), value) })
}

/// The `Handle` behind a JS value, after checking the type tag.
pub(crate) fn handle_of<'a>(env: &Env, value: &Unknown<'a>) -> Result<&'a mut Handle> {
  let not_a_handle = || {
    fail(
      ErrorKind::InvalidArgument,
      "expected a napi-dlpack tensor handle",
    )
  };
  let mut value_type = 0;
  // SAFETY: live value of this env.
  status("napi_typeof", unsafe {
    sys::napi_typeof(env.raw(), value.raw(), &mut value_type)
  })?;
  if value_type != sys::ValueType::napi_external {
    return Err(not_a_handle());
  }
  let mut tagged = false;
  // SAFETY: live external of this env.
  status("napi_check_object_type_tag", unsafe {
    sys::napi_check_object_type_tag(env.raw(), value.raw(), &HANDLE_TAG, &mut tagged)
  })?;
  if !tagged {
    // One of our capsules that came back and now serves as its tensor's handle.
    // SAFETY: a live external of this env; the borrow ends with this native call.
    return unsafe { own_capsule::handle_in(env.raw(), value.raw()) }.ok_or_else(not_a_handle);
  }
  let mut data = ptr::null_mut();
  // SAFETY: live external of this env.
  status("napi_get_value_external", unsafe {
    sys::napi_get_value_external(env.raw(), value.raw(), &mut data)
  })?;
  // SAFETY: the data of an OBJECT_TAG external (NULL refused first).
  if data.is_null() || !unsafe { crate::exchange::is_own_handle(data) } {
    return Err(not_a_handle());
  }
  // SAFETY: tagged externals of ours always hold a live `Handle` (freed only by the finalizer,
  // which cannot run while `value` is reachable). JS is single-threaded, and no two of these
  // borrows are alive at once: each native call takes one and returns before the next.
  Ok(unsafe { &mut *data.cast::<Handle>() })
}

pub(crate) fn storage_of(handle: &Handle) -> Result<&Arc<Storage>> {
  handle
    .storage
    .as_ref()
    .ok_or_else(|| fail(ErrorKind::Disposed, "the tensor has been disposed"))
}

/// Fails if the JS buffer behind a storage has been detached (transferred) under us.
pub(crate) fn check_attached(env: &Env, storage: &Storage) -> Result<()> {
  if let Memory::Js { buffer, .. } = storage.memory() {
    // SAFETY: our env, on its thread.
    let array_buffer = unsafe { buffer.value(env.raw())? };
    // SAFETY: live value of this env.
    if unsafe { js_memory::is_detached(env.raw(), array_buffer) } {
      return Err(fail(
        ErrorKind::Detached,
        "the tensor's ArrayBuffer has been detached (transferred)",
      ));
    }
  }
  Ok(())
}

pub(crate) fn parse_dtype(name: &str) -> Result<DType> {
  DType::from_name(name).ok_or_else(|| fail(ErrorKind::Dtype, format!("unknown dtype {name:?}")))
}

/// Whether `address` is aligned for elements of `dtype` (to their size, at most 8 bytes), as
/// TypedArrays and typed native consumers need.
pub(crate) fn is_aligned(address: usize, dtype: DType) -> bool {
  address.is_multiple_of(dtype.itemsize().min(8))
}

/// Builds the layout of a tensor over a host storage region of `len` bytes, checking that every
/// element lies inside it.
fn meta_over_region(
  dtype: DType,
  shape: &[i64],
  strides: Option<&[i64]>,
  first_byte: usize,
  base: *mut u8,
  len: usize,
  readonly: bool,
) -> Result<Meta> {
  let first_address = (base as usize)
    .checked_add(first_byte)
    .ok_or_else(|| fail(ErrorKind::InvalidLayout, "offset overflows"))?;
  let layout = layout_of(dtype, Device::CPU, shape, strides, first_address)?;
  let itemsize = dtype.itemsize() as i64;
  let low = first_byte as i64 + layout.min_offset() * itemsize;
  let high = first_byte as i64 + (layout.max_offset() + 1) * itemsize;
  if layout.numel() > 0 && (low < 0 || high > len as i64) {
    return Err(fail(
      ErrorKind::InvalidLayout,
      format!("the tensor reaches bytes {low}..{high} of a buffer of {len} bytes"),
    ));
  }
  let strides = match strides {
    Some(strides) => strides.to_vec(),
    None => napi_dlpack::validation::contiguous_strides(shape)
      .ok_or_else(|| fail(ErrorKind::Overflow, "strides overflow"))?
      .into_vec(),
  };
  Ok(Meta {
    dtype,
    shape: shape.into(),
    strides: strides.into(),
    first_byte,
    min_offset: layout.min_offset(),
    span_bytes: layout.span_bytes(),
    numel: layout.numel(),
    contiguous: layout.is_c_contiguous(),
    device: Device::CPU,
    readonly,
    is_copy: false,
    version: None,
    flags: 0,
  })
}

/// Wraps JS memory (a Uint8Array over an ArrayBuffer or SharedArrayBuffer) without copying.
/// `offset` is in elements from the start of `bytes`; strides in elements (null: row-major).
/// Memory that is not aligned to the element size (a Buffer or DataView at an odd byte offset)
/// cannot be viewed by a TypedArray nor handed to typed consumers, so, as for foreign memory,
/// the tensor's span is copied (`isCopy`). (`fromDLPack` never gets here with misaligned
/// memory: it wraps TypedArrays with their own element type, or bytes.)
#[napi(js_name = "wrapBuffer")]
pub fn wrap_buffer<'env>(
  env: &'env Env,
  bytes: Unknown<'env>,
  dtype: String,
  shape: Vec<i64>,
  strides: Option<Vec<i64>>,
  offset: i64,
  readonly: bool,
) -> Result<Unknown<'env>> {
  let dtype = parse_dtype(&dtype)?;
  // SAFETY: live value of this env.
  let (base, len, array_buffer, base_offset) =
    unsafe { js_memory::typedarray_bytes(env.raw(), bytes.raw())? };
  // SAFETY: live value of this env.
  if unsafe { js_memory::is_detached(env.raw(), array_buffer) } {
    return Err(fail(
      ErrorKind::Detached,
      "the ArrayBuffer has been detached",
    ));
  }
  if offset < 0 {
    return Err(fail(
      ErrorKind::InvalidLayout,
      "offset must be non-negative",
    ));
  }
  let first_byte = (offset as u64)
    .checked_mul(dtype.itemsize() as u64)
    .and_then(|bytes| usize::try_from(bytes).ok())
    .ok_or_else(|| fail(ErrorKind::Overflow, "offset overflows"))?;
  let meta = meta_over_region(
    dtype,
    &shape,
    strides.as_deref(),
    first_byte,
    base,
    len,
    readonly,
  )?;
  // The first element is aligned iff every element is (strides count whole elements).
  if !is_aligned(base as usize + first_byte, dtype) {
    return copy_misaligned(env, base, &meta);
  }
  // SAFETY: live value of this env; the reference keeps the buffer (and `base`) alive.
  let buffer = unsafe { BufferRef::new(env.raw(), array_buffer)? };
  let storage = Storage::new(Memory::Js {
    base,
    base_offset,
    buffer,
  });
  new_handle(env, storage, meta)
}

/// A handle over a copy of the span of `meta` (laid out over JS memory at `base`) in a fresh,
/// aligned V8 ArrayBuffer: same shape, strides and offsets, flagged `isCopy`.
fn copy_misaligned<'env>(env: &'env Env, base: *mut u8, meta: &Meta) -> Result<Unknown<'env>> {
  let span_start = meta.span_start();
  let bytes: &[u8] = if meta.span_bytes == 0 {
    &[]
  } else {
    // SAFETY: meta_over_region checked that the span lies inside the JS buffer at `base`,
    // which the caller's JS value keeps alive during this call.
    unsafe { std::slice::from_raw_parts(base.add(span_start), meta.span_bytes) }
  };
  // SAFETY: our env.
  let array_buffer = unsafe { js_memory::arraybuffer_copy(env.raw(), bytes)? };
  let meta = Meta {
    first_byte: meta.first_byte - span_start,
    ..meta.clone()
  };
  host_copy_handle(env, array_buffer, meta)
}

/// `copyMode` of [`import_capsule`].
const COPY_IF_NEEDED: u32 = 0;
pub(crate) const COPY_ALWAYS: u32 = 1;
const COPY_NEVER: u32 = 2;

/// Consumes a capsule (from any addon) into a new handle. Host tensors stay zero-copy where the
/// runtime allows external ArrayBuffers and the data is aligned; otherwise they are copied into
/// V8 memory (`isCopy`), unless `copyMode` is never-copy, which throws instead. CUDA tensors are
/// checked against the driver's pointer attributes; `stream` is the consumer stream the
/// producer was asked to synchronise to (CUDA only; unset: the legacy default stream).
pub fn import_capsule<'env>(
  env: &'env Env,
  capsule: Unknown<'env>,
  copy_mode: u32,
  stream: Option<BigInt>,
) -> Result<Unknown<'env>> {
  if !matches!(copy_mode, COPY_IF_NEEDED | COPY_ALWAYS | COPY_NEVER) {
    return Err(fail(
      ErrorKind::InvalidArgument,
      format!("invalid copy mode {copy_mode}"),
    ));
  }
  // Checked before the capsule is consumed, so a bad value leaves it usable.
  let stream = crate::cuda::stream_arg(stream.as_ref())?;
  // SAFETY: live value of this env; the payload lives at least as long as this call.
  let payload = unsafe { capsule::payload_of(env.raw(), capsule.raw())? };
  // SAFETY: as above. From here on we own the tensor: every error path below drops it, which
  // runs its deleter exactly once.
  let managed = unsafe { &*payload }.take()?;
  let version = managed.version().map(|v| (v.major, v.minor));
  let format = if managed.is_versioned() {
    ExportFormat::Versioned
  } else {
    ExportFormat::Legacy
  };
  let managed = if copy_mode == COPY_ALWAYS {
    managed
  } else {
    // Our own export coming straight back: share the original storage, no copy, no
    // re-validation of metadata we produced ourselves.
    match take_owner::<ExportOwner>(managed) {
      Ok(owner) => {
        // SAFETY: our env, on its thread.
        let viewable = matches!(owner.storage.memory(), Memory::Js { .. })
          || !owner.meta.device.is_host_accessible()
          || unsafe { js_memory::external_buffers_allowed(env.raw()) };
        if viewable {
          let meta = Meta {
            version,
            flags: if version.is_some() {
              owner.info.flags()
            } else {
              0
            },
            // A share of a copy is still a copy; IS_COPIED marks a copy made for this export.
            is_copy: owner.meta.is_copy || owner.info.is_copied(),
            ..(*owner.meta).clone()
          };
          if own_capsule::is_own(&owner, payload) {
            // Our own capsule straight back: it becomes the new tensor's handle, so the round
            // trip creates no second finalizable external.
            let handle = Handle {
              exchange: crate::exchange::object_header(),
              storage: Some(owner.storage),
              meta: Arc::new(meta),
              borrow_pin: None,
              view: RefCell::new(None),
            };
            // SAFETY: `capsule` is a live capsule of this env whose payload is ours (is_own).
            let value = unsafe { own_capsule::adopt(capsule.raw(), payload, handle) };
            // SAFETY: live value of this env.
            return Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), value) });
          }
          return new_handle(env, owner.storage, meta);
        }
        // Memory a JS view can only copy (Electron): take the general path below.
        export(owner, format)?
      }
      Err(managed) => managed,
    }
  };
  from_foreign(env, ForeignTensor::new(managed)?, copy_mode, stream)
}

/// A handle for a validated tensor handed over by native code (the exchange table's
/// `managed_tensor_to_value`): what `importCapsule` makes of it, copying only if needed.
pub(crate) fn import_foreign<'env>(env: &'env Env, tensor: ForeignTensor) -> Result<Unknown<'env>> {
  from_foreign(env, tensor, COPY_IF_NEEDED, None)
}

fn foreign_meta(tensor: &ForeignTensor) -> Meta {
  let layout = tensor.layout();
  Meta {
    dtype: tensor.dtype(),
    shape: tensor.shape().into(),
    strides: tensor.strides().into(),
    first_byte: layout.first_element() - layout.span_start(),
    min_offset: layout.min_offset(),
    span_bytes: layout.span_bytes(),
    numel: layout.numel(),
    contiguous: layout.is_c_contiguous(),
    device: tensor.device(),
    readonly: tensor.is_read_only(),
    is_copy: tensor.is_copied(),
    version: tensor.version().map(|v| (v.major, v.minor)),
    flags: tensor.flags(),
  }
}

fn from_foreign<'env>(
  env: &'env Env,
  tensor: ForeignTensor,
  copy_mode: u32,
  stream: Option<Stream>,
) -> Result<Unknown<'env>> {
  let meta = foreign_meta(&tensor);
  if tensor.device().device_type == DeviceType::Cuda {
    return crate::cuda::import_device(
      env,
      tensor,
      meta,
      copy_mode,
      stream.unwrap_or(Stream::Legacy),
    );
  }
  if !tensor.device().is_host_accessible() {
    if copy_mode == COPY_ALWAYS {
      return Err(fail(
        ErrorKind::Device,
        format!(
          "copying {} memory to the host is not supported",
          tensor.device()
        ),
      ));
    }
    // Device memory is never viewed from JS; the handle only carries it.
    let storage = Storage::new(Memory::Foreign(tensor));
    return new_handle(env, storage, meta);
  }
  if tensor.span_bytes() > js_memory::max_arraybuffer_bytes() {
    // No ArrayBuffer can hold it in this runtime, so neither a view nor a copy of it can
    // exist: keep the producer's memory (exports stay zero-copy), `.data` throws
    // ERR_DLPACK_TOO_LARGE and `getData({ offset, length })` views or copies windows of it.
    if copy_mode == COPY_ALWAYS {
      return Err(fail(
        ErrorKind::TooLarge,
        format!(
          "copy: true asks for a copy of {} bytes, more than this runtime's largest ArrayBuffer \
           ({} bytes)",
          tensor.span_bytes(),
          js_memory::max_arraybuffer_bytes()
        ),
      ));
    }
    let storage = Storage::new(Memory::Foreign(tensor));
    return new_handle(env, storage, meta);
  }
  let aligned = is_aligned(tensor.data_ptr() as usize, tensor.dtype());
  // SAFETY: our env, on its thread.
  let zero_copy_possible = aligned && unsafe { js_memory::external_buffers_allowed(env.raw()) };
  if copy_mode != COPY_ALWAYS && zero_copy_possible {
    let storage = Storage::new(Memory::Foreign(tensor));
    return new_handle(env, storage, meta);
  }
  if copy_mode == COPY_NEVER {
    let why = if aligned {
      "this runtime does not allow external ArrayBuffers (Electron's memory cage), so a JS view needs a copy"
    } else {
      "the data is not aligned to its element size, so a JS view needs a copy"
    };
    return Err(fail(
      ErrorKind::CopyRequired,
      format!("copy: false cannot be honoured: {why}"),
    ));
  }
  // Copy the span as it is (keeping strides and offsets) into V8 memory; the foreign tensor is
  // released right after, so its deleter runs now.
  let span = tensor.layout().span_start() as *const u8;
  // SAFETY: the validated span of a host-accessible tensor is readable.
  let bytes = unsafe { std::slice::from_raw_parts(span, tensor.span_bytes()) };
  // SAFETY: our env.
  let array_buffer = unsafe { js_memory::arraybuffer_copy(env.raw(), bytes)? };
  drop(tensor);
  host_copy_handle(env, array_buffer, meta)
}

/// A handle over a host copy we just made in a fresh V8 ArrayBuffer: marked `isCopy`, and on
/// the CPU whatever host-accessible kind of memory the source was.
fn host_copy_handle<'env>(
  env: &'env Env,
  array_buffer: sys::napi_value,
  meta: Meta,
) -> Result<Unknown<'env>> {
  js_storage_handle(
    env,
    array_buffer,
    Meta {
      is_copy: true,
      device: Device::CPU,
      ..meta
    },
  )
}

/// A handle over a fresh V8 ArrayBuffer holding the whole region `meta` describes.
pub(crate) fn js_storage_handle<'env>(
  env: &'env Env,
  array_buffer: sys::napi_value,
  meta: Meta,
) -> Result<Unknown<'env>> {
  let (mut data, mut _len) = (ptr::null_mut(), 0usize);
  // SAFETY: a live ArrayBuffer of this env.
  status("napi_get_arraybuffer_info", unsafe {
    sys::napi_get_arraybuffer_info(env.raw(), array_buffer, &mut data, &mut _len)
  })?;
  // SAFETY: as above; the reference keeps the buffer alive.
  let buffer = unsafe { BufferRef::new(env.raw(), array_buffer)? };
  let storage = Storage::new(Memory::Js {
    base: data.cast(),
    base_offset: 0,
    buffer,
  });
  new_handle(env, storage, meta)
}

/// Exports a handle as a new capsule. `legacy` asks for the pre-1.0 struct; `copy` makes the
/// export a private copy flagged `IS_COPIED` (row-major on the host; on a CUDA device, a copy
/// of the span). For CUDA tensors `stream` is the consumer's stream (unset: legacy default):
/// it is made to wait for our stream before the capsule is returned.
pub fn export_capsule<'env>(
  env: &'env Env,
  handle: Unknown<'env>,
  legacy: bool,
  copy: bool,
  stream: Option<BigInt>,
) -> Result<Unknown<'env>> {
  let handle = handle_of(env, &handle)?;
  let storage = storage_of(handle)?.clone();
  check_attached(env, &storage)?;
  let format = if legacy {
    ExportFormat::Legacy
  } else {
    ExportFormat::Versioned
  };
  let stream = crate::cuda::stream_arg(stream.as_ref())?;
  let cuda_device = if handle.meta.device.device_type == DeviceType::Cuda {
    Some(crate::cuda::device_of(&handle.meta)?)
  } else {
    None
  };
  let owner = if let (Some(device), true) = (&cuda_device, copy) {
    let (buffer, meta) = crate::cuda::copy_span_to_device(&storage, &handle.meta, device)?;
    let meta = Meta {
      is_copy: true,
      ..meta
    };
    let mut owner = ExportOwner::new(Storage::new(Memory::Cuda(buffer)), Arc::new(meta));
    owner.info = owner.info.copied(true);
    owner
  } else if copy {
    let words = (handle.meta.numel * handle.meta.dtype.itemsize()).div_ceil(8);
    let mut owned = try_zeroed_vec::<u64>(words)?;
    // SAFETY: reinterpreting initialised u64s as bytes.
    let out = unsafe {
      std::slice::from_raw_parts_mut(
        owned.as_mut_ptr().cast::<u8>(),
        handle.meta.numel * handle.meta.dtype.itemsize(),
      )
    };
    copy_bytes(&storage, &handle.meta, out)?;
    let copy_meta = Meta {
      strides: napi_dlpack::validation::contiguous_strides(&handle.meta.shape)
        .ok_or_else(|| fail(ErrorKind::Overflow, "strides overflow"))?
        .as_slice()
        .into(),
      first_byte: 0,
      min_offset: 0,
      span_bytes: handle.meta.numel * handle.meta.dtype.itemsize(),
      contiguous: true,
      readonly: false,
      is_copy: true,
      // The copy is ordinary host memory, whatever host-accessible kind the source was.
      device: Device::CPU,
      ..(*handle.meta).clone()
    };
    let storage = Storage::new(Memory::Owned(owned));
    ExportOwner::new(storage, Arc::new(copy_meta))
  } else {
    ExportOwner::new(storage, handle.meta.clone())
  };
  // SAFETY: our env, on its thread.
  let capsule = unsafe {
    own_capsule::export_to_capsule(env.raw(), owner, format, || match &cuda_device {
      // The consumer's stream waits for our writes (and any copy just enqueued).
      Some(device) => device.sync_to(stream.unwrap_or(Stream::Legacy)),
      None => Ok(()),
    })?
  };
  // SAFETY: live value of this env.
  Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), capsule) })
}

/// A copy of a tensor in a new handle (`isCopy`): row-major in V8 memory for host tensors, a
/// device copy on the same device for CUDA tensors.
#[napi(js_name = "copyHandle")]
pub fn copy_handle<'env>(env: &'env Env, handle: Unknown<'env>) -> Result<Unknown<'env>> {
  let handle = handle_of(env, &handle)?;
  let storage = storage_of(handle)?.clone();
  check_attached(env, &storage)?;
  if handle.meta.device.device_type == DeviceType::Cuda {
    let device = crate::cuda::device_of(&handle.meta)?;
    let (buffer, meta) = crate::cuda::copy_span_to_device(&storage, &handle.meta, &device)?;
    return new_handle(
      env,
      Storage::new(Memory::Cuda(buffer)),
      Meta {
        is_copy: true,
        ..meta
      },
    );
  }
  let meta = handle.meta.clone();
  copy_to_host_handle(env, &storage, &meta)
}

/// A row-major copy of a host tensor in a new handle over V8 memory (`isCopy`).
pub(crate) fn copy_to_host_handle<'env>(
  env: &'env Env,
  storage: &Storage,
  meta: &Meta,
) -> Result<Unknown<'env>> {
  let nbytes = meta.numel * meta.dtype.itemsize();
  // SAFETY: our env.
  let (array_buffer, data) = unsafe { js_memory::arraybuffer_new(env.raw(), nbytes)? };
  let out: &mut [u8] = if nbytes == 0 {
    &mut []
  } else {
    // SAFETY: V8 just gave us `nbytes` writable bytes.
    unsafe { std::slice::from_raw_parts_mut(data, nbytes) }
  };
  copy_bytes(storage, meta, out)?;
  let meta = meta_over_region(meta.dtype, &meta.shape, None, 0, data, nbytes, false)?;
  host_copy_handle(env, array_buffer, meta)
}

/// Layout and flags of a handle, read once per JS tensor.
#[napi(object)]
pub struct HandleInfo {
  pub dtype: String,
  pub shape: Vec<i64>,
  pub strides: Vec<i64>,
  /// DLPack byte_offset an export of this tensor carries.
  pub byte_offset: i64,
  pub device_type: u32,
  pub device_id: i32,
  pub readonly: bool,
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

/// The DLPack byte_offset an export of this tensor carries (see `ExportOwner::new`): only
/// handle-valued devices keep a separate byte_offset.
fn export_byte_offset(storage: &Storage) -> i64 {
  match storage.memory() {
    Memory::Foreign(tensor) if !tensor.device().device_type.data_is_address() => {
      tensor.byte_offset() as i64
    }
    _ => 0,
  }
}

#[napi(js_name = "handleInfo")]
pub fn handle_info(env: &Env, handle: Unknown<'_>) -> Result<HandleInfo> {
  let handle = handle_of(env, &handle)?;
  let storage = storage_of(handle)?;
  let meta = &handle.meta;
  Ok(HandleInfo {
    dtype: meta.dtype.name().to_string(),
    shape: meta.shape.to_vec(),
    strides: meta.strides.to_vec(),
    byte_offset: export_byte_offset(storage),
    device_type: meta.device.device_type as u32,
    device_id: meta.device.id,
    readonly: meta.readonly,
    is_copy: meta.is_copy,
    contiguous: meta.contiguous,
    numel: meta.numel as i64,
    view_offset: -meta.min_offset,
    view_length: meta.span_bytes as i64 / meta.dtype.itemsize() as i64,
    version: meta.version.map(|(major, minor)| vec![major, minor]),
    flags: meta.flags as i64,
  })
}

/// Length of the Float64Array `handleInfoInto` fills: 12 fixed slots, then shape and strides.
pub const INFO_SLOTS: usize = 12 + 2 * napi_dlpack::MAX_NDIM;

/// `handleInfo` for the hot path: writes the same facts as numbers into a caller-owned
/// Float64Array of at least INFO_SLOTS elements (one Node-API call instead of one per field):
/// `[dtype index (dtypeNames order), device type, device id, byteOffset, bits (1 readonly,
/// 2 isCopy, 4 contiguous, 8 has version), numel, viewOffset, viewLength, version major,
/// version minor, DLPack flags, ndim, shape..., strides...]`.
pub fn handle_info_into(env: &Env, handle: Unknown<'_>, out: Unknown<'_>) -> Result<()> {
  let handle = handle_of(env, &handle)?;
  let storage = storage_of(handle)?;
  let (mut kind, mut length, mut data, mut buffer, mut offset) =
    (0, 0usize, ptr::null_mut(), ptr::null_mut(), 0usize);
  // SAFETY: a live value of this env; non-TypedArrays make the call fail.
  let status_code = unsafe {
    sys::napi_get_typedarray_info(
      env.raw(),
      out.raw(),
      &mut kind,
      &mut length,
      &mut data,
      &mut buffer,
      &mut offset,
    )
  };
  if status_code != sys::Status::napi_ok
    || kind != sys::TypedarrayType::float64_array
    || length < INFO_SLOTS
  {
    return Err(fail(
      ErrorKind::InvalidArgument,
      format!("expected a Float64Array of at least {INFO_SLOTS} elements"),
    ));
  }
  // SAFETY: a Float64Array of `length` elements, aligned by construction; JS is single-threaded
  // and does not run during this call.
  let slots = unsafe { std::slice::from_raw_parts_mut(data.cast::<f64>(), length) };
  let meta = &handle.meta;
  let dtype_index = DType::ALL
    .iter()
    .position(|d| *d == meta.dtype)
    .unwrap_or(0);
  let bits = u8::from(meta.readonly)
    | u8::from(meta.is_copy) << 1
    | u8::from(meta.contiguous) << 2
    | u8::from(meta.version.is_some()) << 3;
  let (major, minor) = meta.version.unwrap_or((0, 0));
  let ndim = meta.shape.len();
  slots[..12].copy_from_slice(&[
    dtype_index as f64,
    f64::from(meta.device.device_type as u32),
    f64::from(meta.device.id),
    export_byte_offset(storage) as f64,
    f64::from(bits),
    meta.numel as f64,
    -meta.min_offset as f64,
    (meta.span_bytes / meta.dtype.itemsize()) as f64,
    f64::from(major),
    f64::from(minor),
    meta.flags as f64,
    ndim as f64,
  ]);
  for (slot, value) in slots[12..12 + ndim].iter_mut().zip(meta.shape.iter()) {
    *slot = *value as f64;
  }
  for (slot, value) in slots[12 + ndim..12 + 2 * ndim]
    .iter_mut()
    .zip(meta.strides.iter())
  {
    *slot = *value as f64;
  }
  Ok(())
}

/// The memory of a host tensor as an ArrayBuffer (or SharedArrayBuffer) and the byte offset of
/// its lowest element in it. Zero-copy: JS memory is returned as is; foreign memory through an
/// external ArrayBuffer that keeps the storage alive.
#[napi(object)]
pub struct HandleView<'env> {
  pub buffer: Unknown<'env>,
  pub byte_offset: i64,
}

#[napi(js_name = "handleView")]
pub fn handle_view<'env>(env: &'env Env, handle: Unknown<'env>) -> Result<HandleView<'env>> {
  view_of(env, handle_of(env, &handle)?)
}

/// The view `.data` is made from (see [`handle_view`]).
fn view_of<'env>(env: &'env Env, handle: &Handle) -> Result<HandleView<'env>> {
  let storage = storage_of(handle)?.clone();
  if !handle.meta.device.is_host_accessible() {
    return Err(fail(
      ErrorKind::NotCpu,
      format!(
        "tensor memory is on {}; call .to('cpu') first",
        handle.meta.device
      ),
    ));
  }
  let span_start = handle.meta.span_start();
  match storage.memory() {
    // Unreachable (device memory is never host-accessible), but never viewed either way.
    Memory::Cuda(_) => Err(fail(
      ErrorKind::NotCpu,
      "device memory has no host view; call .to('cpu') first",
    )),
    Memory::Js {
      buffer,
      base_offset,
      ..
    } => {
      // SAFETY: our env, on its thread.
      let array_buffer = unsafe { buffer.value(env.raw())? };
      // SAFETY: live value of this env.
      if unsafe { js_memory::is_detached(env.raw(), array_buffer) } {
        return Err(fail(
          ErrorKind::Detached,
          "the tensor's ArrayBuffer has been detached (transferred)",
        ));
      }
      Ok(HandleView {
        // SAFETY: live value of this env.
        buffer: unsafe { Unknown::from_raw_unchecked(env.raw(), array_buffer) },
        byte_offset: (base_offset + span_start) as i64,
      })
    }
    Memory::Foreign(_) | Memory::Owned(_) => {
      if let Some((cached, _)) = handle.view.borrow().as_ref() {
        // SAFETY: our env, on its thread.
        let value = unsafe { cached.value(env.raw())? };
        // SAFETY: live value of this env.
        return Ok(HandleView {
          buffer: unsafe { Unknown::from_raw_unchecked(env.raw(), value) },
          byte_offset: 0,
        });
      }
      // SAFETY: span_start lies inside the storage region.
      let start = unsafe { storage.base().add(span_start) };
      let len = handle.meta.span_bytes;
      let slot: ViewSlot = Arc::new(Mutex::new(Some(storage.clone())));
      // SAFETY: our env; the slot keeps the memory alive until the ArrayBuffer dies or
      // `dispose()` detaches it first.
      let value = unsafe { js_memory::external_arraybuffer(env.raw(), start, len, slot.clone())? };
      // SAFETY: live value of this env.
      *handle.view.borrow_mut() = Some((unsafe { BufferRef::new(env.raw(), value)? }, slot));
      // SAFETY: live value of this env.
      Ok(HandleView {
        buffer: unsafe { Unknown::from_raw_unchecked(env.raw(), value) },
        byte_offset: 0,
      })
    }
  }
}

/// Elements `offset..offset + length` of the span `.data` covers (from the lowest to the highest
/// element). Where `.data` works, the window lies inside that same (cached) view. Past the
/// ArrayBuffer limit, a window of foreign memory is its own external ArrayBuffer, which holds
/// the memory until it is collected (dispose() cannot empty it), or a copy where external
/// ArrayBuffers are refused or the data is misaligned.
#[napi(js_name = "handleWindow")]
pub fn handle_window<'env>(
  env: &'env Env,
  handle: Unknown<'env>,
  offset: i64,
  length: i64,
) -> Result<HandleView<'env>> {
  let handle = handle_of(env, &handle)?;
  let storage = storage_of(handle)?.clone();
  let meta = &handle.meta;
  if !meta.device.is_host_accessible() {
    return Err(fail(
      ErrorKind::NotCpu,
      format!("tensor memory is on {}; call .to('cpu') first", meta.device),
    ));
  }
  let itemsize = meta.dtype.itemsize();
  let span_elements = meta.span_bytes / itemsize;
  let end = offset.checked_add(length);
  if offset < 0 || length < 0 || end.is_none_or(|end| end as u64 > span_elements as u64) {
    return Err(fail(
      ErrorKind::InvalidArgument,
      format!(
        "window of {length} elements at {offset} is outside the {span_elements} elements the \
         tensor's data spans"
      ),
    ));
  }
  // In range of the span, so these products fit in usize.
  let (first, count) = (offset as usize * itemsize, length as usize * itemsize);
  // SAFETY: our env, on its thread.
  let externals = unsafe { js_memory::external_buffers_allowed(env.raw()) };
  let whole_view_possible = matches!(storage.memory(), Memory::Js { .. })
    || (externals && meta.span_bytes <= js_memory::max_arraybuffer_bytes());
  if whole_view_possible {
    let view = view_of(env, handle)?;
    return Ok(HandleView {
      buffer: view.buffer,
      byte_offset: view.byte_offset + first as i64,
    });
  }
  if matches!(storage.memory(), Memory::Cuda(_)) {
    return Err(fail(ErrorKind::NotCpu, "device memory has no host view"));
  }
  js_memory::check_arraybuffer_len(count)?;
  // SAFETY: the window lies inside the storage's validated, host-accessible span.
  let start = unsafe { storage.base().add(meta.span_start() + first) };
  let buffer = if externals && is_aligned(start as usize, meta.dtype) {
    // SAFETY: our env; the window's ArrayBuffer holds the storage until it is collected.
    unsafe { js_memory::external_arraybuffer(env.raw(), start, count, storage)? }
  } else {
    // A copy (writes to it do not reach the tensor): no external buffers (Electron), or
    // misaligned data no TypedArray can view.
    // SAFETY: the window's bytes are readable (validated span, kept alive by `storage`).
    let bytes = unsafe { std::slice::from_raw_parts(start, count) };
    // SAFETY: our env.
    unsafe { js_memory::arraybuffer_copy(env.raw(), bytes)? }
  };
  Ok(HandleView {
    // SAFETY: live value of this env.
    buffer: unsafe { Unknown::from_raw_unchecked(env.raw(), buffer) },
    byte_offset: 0,
  })
}

/// Tells the addon the runtime's largest ArrayBuffer, in bytes (`buffer.constants.MAX_LENGTH`;
/// lib/native.ts passes it once at load). Views and copies past it throw ERR_DLPACK_TOO_LARGE
/// instead of asking the runtime for an ArrayBuffer it cannot make.
#[napi(js_name = "setArrayBufferLimit")]
pub fn set_array_buffer_limit(bytes: f64) -> Result<()> {
  if !(bytes.is_finite() && bytes >= 0.0 && bytes.fract() == 0.0 && bytes <= (1u64 << 53) as f64) {
    return Err(fail(
      ErrorKind::InvalidArgument,
      format!("the ArrayBuffer limit must be a safe non-negative integer, got {bytes}"),
    ));
  }
  js_memory::set_max_arraybuffer_bytes(bytes as usize);
  Ok(())
}

/// The ArrayBuffer limit in force, in bytes (see `setArrayBufferLimit`).
#[napi(js_name = "arrayBufferLimit")]
pub fn array_buffer_limit() -> f64 {
  js_memory::max_arraybuffer_bytes() as f64
}

/// Releases the handle's storage now (`dispose()`); later calls fail with ERR_TENSOR_DISPOSED.
/// Memory still referenced by live exports or views stays valid until they go.
#[napi(js_name = "releaseHandle")]
pub fn release_handle(env: &Env, handle: Unknown<'_>) -> Result<bool> {
  let handle = handle_of(env, &handle)?;
  if let Some((view, slot)) = handle.view.borrow_mut().take() {
    // SAFETY: our env, on its thread.
    let value = unsafe { view.value(env.raw())? };
    // SAFETY: a live external ArrayBuffer of this env: views of it become empty.
    unsafe { js_memory::detach(env.raw(), value)? };
    if let Ok(mut slot) = slot.lock() {
      slot.take();
    }
  }
  handle.borrow_pin = None;
  Ok(handle.storage.take().is_some())
}

/// Address of the first element, for zero-copy checks and diagnostics.
#[napi(js_name = "dataPointer")]
pub fn data_pointer(env: &Env, handle: Unknown<'_>) -> Result<BigInt> {
  let handle = handle_of(env, &handle)?;
  let storage = storage_of(handle)?;
  let address = match storage.memory() {
    Memory::Foreign(tensor) => tensor.data_ptr() as u64,
    _ => storage.base() as u64 + handle.meta.first_byte as u64,
  };
  Ok(BigInt::from(address))
}

#[napi(js_name = "isCapsule")]
pub fn is_capsule(env: &Env, value: Unknown<'_>) -> bool {
  // SAFETY: live value of this env.
  unsafe { capsule::is_capsule(env.raw(), value.raw()) }
}

#[napi(js_name = "capsuleIsConsumed")]
pub fn capsule_is_consumed(env: &Env, value: Unknown<'_>) -> Result<bool> {
  // SAFETY: live value of this env.
  Ok(unsafe { capsule::is_consumed(env.raw(), value.raw())? })
}

/// The device of a capsule's tensor as `[type, id]`, read without consuming it; `null` when it
/// cannot be read without consuming (see `CapsulePayload::peek_device`). Throws as a consume
/// would for a value that is no capsule, a consumed capsule or another capsule ABI.
#[napi(js_name = "capsuleDevice")]
pub fn capsule_device(env: &Env, value: Unknown<'_>) -> Result<Option<Vec<i32>>> {
  // SAFETY: live value of this env, on its JS thread.
  let device = unsafe { capsule::peek_device(env.raw(), value.raw())? };
  Ok(device.map(|device| vec![device.device_type as i32, device.id]))
}

/// Whether `value` is a `napi_external` (any addon's): `fromDLPack` takes every External for
/// a capsule, so one that is not a capsule is `ERR_DLPACK_NOT_A_CAPSULE`, not a bad argument.
#[napi(js_name = "isExternal")]
pub fn is_external(env: &Env, value: Unknown<'_>) -> Result<bool> {
  let mut value_type = 0;
  // SAFETY: live value of this env.
  status("napi_typeof", unsafe {
    sys::napi_typeof(env.raw(), value.raw(), &mut value_type)
  })?;
  Ok(value_type == sys::ValueType::napi_external)
}

/// Whether this runtime lets us create external ArrayBuffers (false in Electron, or with
/// `NAPI_DLPACK_NO_EXTERNAL_BUFFERS=1`).
#[napi(js_name = "externalBuffersAllowed")]
pub fn external_buffers_allowed(env: &Env) -> bool {
  // SAFETY: our env, on its thread.
  unsafe { js_memory::external_buffers_allowed(env.raw()) }
}

/// Device of a handle as `[type, id]`, without exporting (`__dlpack_device__`).
#[napi(js_name = "handleDevice")]
pub fn handle_device(env: &Env, handle: Unknown<'_>) -> Result<Vec<i32>> {
  let handle = handle_of(env, &handle)?;
  storage_of(handle)?;
  Ok(vec![
    handle.meta.device.device_type as i32,
    handle.meta.device.id,
  ])
}

/// Process-wide counters for leak checks: storages (memory regions) still alive.
#[napi(object)]
pub struct NativeStats {
  pub live_storages: u32,
  /// References this thread's exchange-table state holds (2 once installed).
  pub exchange_references: u32,
}

#[napi(js_name = "nativeStats")]
pub fn native_stats() -> NativeStats {
  NativeStats {
    live_storages: crate::storage::LIVE_STORAGES.load(std::sync::atomic::Ordering::Relaxed) as u32,
    exchange_references: crate::exchange::live_references(),
  }
}

/// Names of every dtype, in the order of `DType::ALL`.
#[napi(js_name = "dtypeNames")]
pub fn dtype_names() -> Vec<&'static str> {
  DType::ALL.iter().map(|dtype| dtype.name()).collect()
}

/// Benchmark floor: the least any capsule exchange costs — allocate a payload, create a
/// `napi_external` with a finalizer and stamp a type tag (freed by GC later, like a capsule).
pub fn bench_tagged_external<'env>(env: &'env Env) -> Result<Unknown<'env>> {
  const BENCH_TAG: sys::napi_type_tag = sys::napi_type_tag {
    lower: 1,
    upper: 0x6265_6e63_6866_6c72,
  };
  // SAFETY: our env, on its thread.
  let value = unsafe { js_memory::tagged_external(env.raw(), [0u64; 2], &BENCH_TAG)? };
  // SAFETY: live value of this env.
  Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), value) })
}
