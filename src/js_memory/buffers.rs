//! ArrayBuffers and typed arrays: external buffers over native memory (and whether the runtime
//! allows them), the size limits, new and copied buffers, detaching, and the untransferable mark.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use napi::sys;
use napi_dlpack::ErrorKind;

use crate::errors::{fail, napi_failure, status, Result};

use super::env::{EXTERNALS_ALLOWED, UNTRANSFERABLE_MARKER};

/// Whether this environment accepts external ArrayBuffers. Probed once per environment with a
/// real call; `NAPI_DLPACK_NO_EXTERNAL_BUFFERS=1` forces `false` (the Electron behaviour).
///
/// # Safety
/// `env` must be the live environment of the calling thread.
pub unsafe fn external_buffers_allowed(env: sys::napi_env) -> bool {
  if let Some(known) = EXTERNALS_ALLOWED.with(Cell::get) {
    return known;
  }
  let allowed = !forced_copy_mode() && {
    static PROBE: [u8; 8] = [0; 8];
    let mut value = ptr::null_mut();
    // SAFETY: a static buffer needs no finalizer and outlives the ArrayBuffer.
    let status = unsafe {
      sys::napi_create_external_arraybuffer(
        env,
        PROBE.as_ptr() as *mut c_void,
        PROBE.len(),
        None,
        ptr::null_mut(),
        &mut value,
      )
    };
    status == sys::Status::napi_ok
  };
  EXTERNALS_ALLOWED.with(|known| known.set(Some(allowed)));
  allowed
}

pub fn forced_copy_mode() -> bool {
  std::env::var_os("NAPI_DLPACK_NO_EXTERNAL_BUFFERS")
    .is_some_and(|value| value != "0" && !value.is_empty())
}

/// The default of [`max_arraybuffer_bytes`]: 2^32, the smallest limit of the runtimes we
/// support (Node 20 and Bun; Node 22+ and Deno allow 2^53 - 1).
const DEFAULT_MAX_ARRAYBUFFER_BYTES: usize = 1 << 32;

static MAX_ARRAYBUFFER_BYTES: AtomicUsize = AtomicUsize::new(DEFAULT_MAX_ARRAYBUFFER_BYTES);

/// Sets the runtime's largest ArrayBuffer / TypedArray byte length. The JS layer passes
/// `buffer.constants.MAX_LENGTH` once at load: the runtime knows its limit, and asking it with
/// a longer buffer is not safe everywhere (Deno aborts in a V8 CHECK).
pub fn set_max_arraybuffer_bytes(bytes: usize) {
  MAX_ARRAYBUFFER_BYTES.store(bytes, Ordering::Relaxed);
}

/// The largest ArrayBuffer this runtime creates, in bytes (see [`set_max_arraybuffer_bytes`]).
pub fn max_arraybuffer_bytes() -> usize {
  MAX_ARRAYBUFFER_BYTES.load(Ordering::Relaxed)
}

/// `ERR_DLPACK_TOO_LARGE` unless an ArrayBuffer of `len` bytes can exist in this runtime. Every
/// ArrayBuffer we create is checked first: past the limit, Node-API calls fail with an
/// exception pending (Node, Bun) or abort the process (Deno; V8's allocation in the copy path).
pub fn check_arraybuffer_len(len: usize) -> Result<()> {
  let max = max_arraybuffer_bytes();
  if len > max {
    return Err(fail(
      ErrorKind::TooLarge,
      format!(
        "{len} bytes is more than this runtime's largest ArrayBuffer ({max} bytes): view it in \
         windows with getData({{ offset, length }}), or export it to native code"
      ),
    ));
  }
  Ok(())
}

/// What external ArrayBuffers keep alive, by id. The finalizer's hint is the id, not a pointer
/// to the keep-alive: a runtime may call the finalizer of a failed creation synchronously
/// (Node), never (Bun 1.4) or, for all we know, later; whichever of the finalizer and our error
/// path comes first takes the keep-alive out, exactly once, and the other finds nothing.
type KeepAlives = BTreeMap<usize, Box<dyn Send>>;
static KEEP_ALIVES: Mutex<KeepAlives> = Mutex::new(BTreeMap::new());
static NEXT_KEEP_ALIVE: AtomicUsize = AtomicUsize::new(1);

fn keep_alives() -> std::sync::MutexGuard<'static, KeepAlives> {
  // Poisoning cannot leave the map half-updated (single inserts and removes).
  KEEP_ALIVES
    .lock()
    .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Takes a keep-alive out of the registry and drops it (outside the lock: dropping a storage
/// may run a producer's deleter).
fn release_keep_alive(id: usize) {
  let taken = keep_alives().remove(&id);
  drop(taken);
}

unsafe extern "C" fn finalize_keep_alive(
  _env: sys::napi_env,
  _data: *mut c_void,
  hint: *mut c_void,
) {
  release_keep_alive(hint as usize);
}

/// An external ArrayBuffer over `len` bytes at `data`; `keep_alive` is dropped by the
/// ArrayBuffer's finalizer. Fails with `ERR_DLPACK_COPY_REQUIRED` where externals are refused
/// and `ERR_DLPACK_TOO_LARGE` past the runtime's ArrayBuffer limit; on every failure
/// `keep_alive` has been dropped and no exception is left pending.
///
/// # Safety
/// `env` must be the live environment of the calling thread; the memory must stay valid while
/// `keep_alive` is alive.
pub unsafe fn external_arraybuffer<K: Send + 'static>(
  env: sys::napi_env,
  data: *mut u8,
  len: usize,
  keep_alive: K,
) -> Result<sys::napi_value> {
  // Never ask past the limit: that is where runtimes disagree (and Deno aborts).
  check_arraybuffer_len(len)?;
  if len == 0 {
    // Empty views need no memory (and a dangling pointer must not be wrapped).
    // SAFETY: forwarded contract.
    return unsafe { arraybuffer_copy(env, &[]) };
  }
  // SAFETY: forwarded contract.
  if !unsafe { external_buffers_allowed(env) } {
    return Err(fail(
      ErrorKind::CopyRequired,
      "external ArrayBuffers are not allowed in this runtime",
    ));
  }
  let id = NEXT_KEEP_ALIVE.fetch_add(1, Ordering::Relaxed);
  keep_alives().insert(id, Box::new(keep_alive));
  let mut value = ptr::null_mut();
  // SAFETY: memory valid while the keep-alive lives (caller); the finalizer releases it by id.
  let status = unsafe {
    sys::napi_create_external_arraybuffer(
      env,
      data.cast(),
      len,
      Some(finalize_keep_alive),
      id as *mut c_void,
      &mut value,
    )
  };
  if status != sys::Status::napi_ok {
    // No ArrayBuffer exists: release the keep-alive unless the finalizer already did.
    release_keep_alive(id);
    // Our error replaces whatever the runtime threw (Node and Bun throw a RangeError).
    let mut pending = false;
    // SAFETY: valid env; clearing an exception we caused.
    if unsafe { sys::napi_is_exception_pending(env, &mut pending) } == sys::Status::napi_ok
      && pending
    {
      let mut exception = ptr::null_mut();
      // SAFETY: as above.
      unsafe { sys::napi_get_and_clear_last_exception(env, &mut exception) };
    }
    if status == sys::Status::napi_no_external_buffers_allowed {
      EXTERNALS_ALLOWED.with(|known| known.set(Some(false)));
      return Err(fail(
        ErrorKind::CopyRequired,
        "external ArrayBuffers are not allowed in this runtime",
      ));
    }
    return Err(napi_failure("napi_create_external_arraybuffer", status));
  }
  Ok(value)
}

/// From this size on, a new V8 ArrayBuffer is first tried with the system allocator.
const PROBED_ALLOCATION_BYTES: usize = 64 << 20;

/// Checks that a V8 ArrayBuffer of `len` bytes can be made: `ERR_DLPACK_TOO_LARGE` past the
/// runtime's limit, and, for big ones, `ERR_DLPACK_NO_MEMORY` when the system allocator refuses
/// the size. V8 treats a failed ArrayBuffer allocation as fatal (the process aborts), so a copy
/// of a multi-GiB foreign tensor must not be asked for blindly. Best effort: the probe is freed
/// untouched, and under memory overcommit it is only as good as the kernel's answer.
fn check_arraybuffer_alloc(len: usize) -> Result<()> {
  check_arraybuffer_len(len)?;
  if len >= PROBED_ALLOCATION_BYTES {
    let mut probe = Vec::<u8>::new();
    probe.try_reserve_exact(len).map_err(|_| {
      fail(
        ErrorKind::NoMemory,
        format!("cannot allocate {len} bytes for an ArrayBuffer"),
      )
    })?;
    // Keep the optimiser from eliding the unused allocation.
    std::hint::black_box(probe.as_ptr());
  }
  Ok(())
}

/// A new V8-owned ArrayBuffer holding a copy of `bytes`.
///
/// # Safety
/// `env` must be the live environment of the calling thread.
pub unsafe fn arraybuffer_copy(env: sys::napi_env, bytes: &[u8]) -> Result<sys::napi_value> {
  // SAFETY: forwarded contract.
  let (value, data) = unsafe { arraybuffer_new(env, bytes.len())? };
  if !bytes.is_empty() {
    // SAFETY: V8 gave us `bytes.len()` writable bytes at `data`.
    unsafe { ptr::copy_nonoverlapping(bytes.as_ptr(), data, bytes.len()) };
  }
  Ok(value)
}

/// A new zeroed V8-owned ArrayBuffer of `len` bytes and its data pointer (checked first: see
/// [`check_arraybuffer_alloc`]).
///
/// # Safety
/// `env` must be the live environment of the calling thread.
pub unsafe fn arraybuffer_new(
  env: sys::napi_env,
  len: usize,
) -> Result<(sys::napi_value, *mut u8)> {
  check_arraybuffer_alloc(len)?;
  let mut data = ptr::null_mut();
  let mut value = ptr::null_mut();
  // SAFETY: valid env.
  status("napi_create_arraybuffer", unsafe {
    sys::napi_create_arraybuffer(env, len, &mut data, &mut value)
  })?;
  Ok((value, data.cast()))
}

/// A new V8-owned ArrayBuffer of `len` bytes whose contents are not initialised, for a
/// producer that writes every byte before JS can see it: the ArrayBuffer of a Node `Buffer`,
/// which `napi_create_buffer` allocates without zero-filling (runtimes that zero-fill anyway
/// are merely slower). Returns the ArrayBuffer, the data pointer and its byte offset in it
/// (checked first: see [`check_arraybuffer_alloc`]).
///
/// # Safety
/// `env` must be the live environment of the calling thread; the caller must write all `len`
/// bytes before handing the ArrayBuffer (or a view of it) to JS.
pub unsafe fn arraybuffer_new_uninit(
  env: sys::napi_env,
  len: usize,
) -> Result<(sys::napi_value, *mut u8, usize)> {
  check_arraybuffer_alloc(len)?;
  let mut data = ptr::null_mut();
  let mut buffer = ptr::null_mut();
  // SAFETY: valid env.
  status("napi_create_buffer", unsafe {
    sys::napi_create_buffer(env, len, &mut data, &mut buffer)
  })?;
  // SAFETY: `buffer` is the Uint8Array (Buffer) just made.
  let (data, _len, array_buffer, offset) = unsafe { typedarray_bytes(env, buffer)? };
  Ok((array_buffer, data, offset))
}

/// Below this, fresh buffers keep the kernel's default pages (see [`advise_huge_pages`]).
pub const HUGE_PAGE_MIN_BYTES: usize = 4 << 20;

/// Asks the kernel to back the 2 MiB-aligned interior of a fresh, not yet written allocation
/// (`data .. data + len`, of at least [`HUGE_PAGE_MIN_BYTES`]) with transparent huge pages
/// where the system allows them on request (`madvise` mode, the common default). A large copy
/// into fresh memory otherwise takes one page fault per 4 KiB on first touch, which costs more
/// than the copy itself (a 64 MiB transpose: 16,384 faults). Advice only: nothing changes
/// where the kernel declines, and the range belongs to this allocation alone (whole pages
/// inside it). Does nothing on other systems.
pub fn advise_huge_pages(data: *mut u8, len: usize) {
  #[cfg(target_os = "linux")]
  {
    const HUGE: usize = 2 << 20;
    const MADV_HUGEPAGE: std::ffi::c_int = 14;
    extern "C" {
      fn madvise(
        addr: *mut std::ffi::c_void,
        len: usize,
        advice: std::ffi::c_int,
      ) -> std::ffi::c_int;
    }
    if len < HUGE_PAGE_MIN_BYTES {
      return;
    }
    let start = (data as usize).next_multiple_of(HUGE);
    let end = (data as usize + len) / HUGE * HUGE;
    if start < end {
      // SAFETY: whole pages inside the caller's allocation (the contract); MADV_HUGEPAGE only
      // changes how the kernel backs them, never their contents. A failure (EINVAL where THP
      // is compiled out) leaves the default pages.
      let _ = unsafe {
        madvise(
          data.wrapping_add(start - data as usize).cast(),
          end - start,
          MADV_HUGEPAGE,
        )
      };
    }
  }
  #[cfg(not(target_os = "linux"))]
  let _ = (data, len);
}

/// Data pointer, length, backing buffer (ArrayBuffer or SharedArrayBuffer) and byte offset in
/// it of a Uint8Array.
///
/// # Safety
/// `env` must be the live environment of the calling thread and `value` a value of it.
pub unsafe fn typedarray_bytes(
  env: sys::napi_env,
  value: sys::napi_value,
) -> Result<(*mut u8, usize, sys::napi_value, usize)> {
  let mut is_typedarray = false;
  // SAFETY: forwarded contract.
  status("napi_is_typedarray", unsafe {
    sys::napi_is_typedarray(env, value, &mut is_typedarray)
  })?;
  if !is_typedarray {
    return Err(fail(ErrorKind::InvalidArgument, "expected a Uint8Array"));
  }
  let (mut kind, mut length, mut data, mut buffer, mut offset) =
    (0, 0usize, ptr::null_mut(), ptr::null_mut(), 0usize);
  // SAFETY: `value` is a TypedArray.
  status("napi_get_typedarray_info", unsafe {
    sys::napi_get_typedarray_info(
      env,
      value,
      &mut kind,
      &mut length,
      &mut data,
      &mut buffer,
      &mut offset,
    )
  })?;
  if kind != sys::TypedarrayType::uint8_array {
    return Err(fail(ErrorKind::InvalidArgument, "expected a Uint8Array"));
  }
  Ok((data.cast(), length, buffer, offset))
}

/// Whether an ArrayBuffer has been detached (a SharedArrayBuffer never is).
///
/// # Safety
/// `env` must be the live environment of the calling thread and `value` a value of it.
pub unsafe fn is_detached(env: sys::napi_env, value: sys::napi_value) -> bool {
  let mut detached = false;
  // SAFETY: forwarded contract; a non-ArrayBuffer simply reports false.
  let status = unsafe { sys::napi_is_detached_arraybuffer(env, value, &mut detached) };
  status == sys::Status::napi_ok && detached
}

/// Detaches an ArrayBuffer: every view of it becomes empty. Used by `dispose()` so that views of
/// foreign memory cannot outlive the release.
///
/// # Safety
/// `env` must be the live environment of the calling thread and `value` a value of it.
pub unsafe fn detach(env: sys::napi_env, value: sys::napi_value) -> Result<()> {
  // SAFETY: forwarded contract.
  status("napi_detach_arraybuffer", unsafe {
    sys::napi_detach_arraybuffer(env, value)
  })
}

/// Marks an ArrayBuffer so that it can no longer be detached by a `postMessage` or
/// `structuredClone` transfer list (every runtime), nor by `ArrayBuffer.prototype.transfer()`
/// where the runtime sets V8's detach key (Node 24, Deno). Called before native code is handed
/// a pointer into V8 memory that outlives the call (a capsule, an owned or kept export): a
/// transfer would move the memory to another owner, which frees it while the export still
/// points into it. No-op where no marker was handed over.
///
/// Whether the marker marked it: `false` when it left the buffer to the runtime's own mark
/// (lib/native.ts returns `false` for a buffer the runtime reports marked already: Node's
/// external ArrayBuffers, which Node 24's `transfer()` can still detach); `true` otherwise,
/// including a marker that returns nothing.
///
/// # Safety
/// `env` must be the live environment of the calling thread and `buffer` a value of it.
pub unsafe fn mark_untransferable(env: sys::napi_env, buffer: sys::napi_value) -> Result<bool> {
  let function = UNTRANSFERABLE_MARKER.with(|marker| match marker.borrow().as_ref() {
    // SAFETY: forwarded contract.
    Some(reference) => unsafe { reference.value(env) }.map(Some),
    None => Ok(None),
  })?;
  let Some(function) = function else {
    return Ok(true);
  };
  let mut global = ptr::null_mut();
  // SAFETY: forwarded contract.
  status("napi_get_global", unsafe {
    sys::napi_get_global(env, &mut global)
  })?;
  let mut result = ptr::null_mut();
  // SAFETY: a function value of this env (kept by our reference), one live argument.
  status("napi_call_function", unsafe {
    sys::napi_call_function(env, global, function, 1, &buffer, &mut result)
  })?;
  let mut marked = true;
  // SAFETY: `result` is a live value of this env; a non-boolean leaves `marked` as it is.
  let _ = unsafe { sys::napi_get_value_bool(env, result, &mut marked) };
  Ok(marked)
}

/// The type tag [`note_exported`] puts on an ArrayBuffer ("napi-dlpack exported" in ASCII).
const EXPORTED_BUFFER_TAG: sys::napi_type_tag = sys::napi_type_tag {
  lower: 0x6e61_7069_2d64_6c70,
  upper: 0x6578_706f_7274_6564,
};

/// Records on the ArrayBuffer itself that an export points into it (called with
/// [`mark_untransferable`]). `dispose()` of the tensor whose cached view this buffer is then
/// leaves the view attached ([`was_exported`]): the view's finalizer is what keeps the memory
/// alive, and detaching it would free memory the export still points into. Tagging twice is
/// refused by the runtime and ignored here (the tag is already there).
///
/// # Safety
/// `env` must be the live environment of the calling thread and `buffer` a value of it.
pub unsafe fn note_exported(env: sys::napi_env, buffer: sys::napi_value) {
  // SAFETY: forwarded contract; an ArrayBuffer is an object, which is all a type tag needs.
  let _ = unsafe { sys::napi_type_tag_object(env, buffer, &EXPORTED_BUFFER_TAG) };
}

/// Whether [`note_exported`] tagged `buffer`.
///
/// # Safety
/// `env` must be the live environment of the calling thread and `buffer` a value of it.
pub unsafe fn was_exported(env: sys::napi_env, buffer: sys::napi_value) -> bool {
  let mut tagged = false;
  // SAFETY: forwarded contract.
  let status =
    unsafe { sys::napi_check_object_type_tag(env, buffer, &EXPORTED_BUFFER_TAG, &mut tagged) };
  status == sys::Status::napi_ok && tagged
}

/// The elements of `value`, a Float64Array of at least `min_len` elements, for the caller to
/// fill; `ERR_DLPACK_INVALID_ARGUMENT` for any other value.
///
/// # Safety
/// `env` must be the live environment of the calling thread and `value` a value of it. The
/// slice must not outlive the current native call (no JS runs during it, so nothing else
/// touches the array's memory).
pub unsafe fn float64_array<'a>(
  env: sys::napi_env,
  value: sys::napi_value,
  min_len: usize,
) -> Result<&'a mut [f64]> {
  let (mut kind, mut length, mut data, mut buffer, mut offset) =
    (0, 0usize, ptr::null_mut(), ptr::null_mut(), 0usize);
  // SAFETY: forwarded contract; non-TypedArrays make the call fail.
  let code = unsafe {
    sys::napi_get_typedarray_info(
      env,
      value,
      &mut kind,
      &mut length,
      &mut data,
      &mut buffer,
      &mut offset,
    )
  };
  if code != sys::Status::napi_ok || kind != sys::TypedarrayType::float64_array || length < min_len
  {
    return Err(fail(
      ErrorKind::InvalidArgument,
      format!("expected a Float64Array of at least {min_len} elements"),
    ));
  }
  // SAFETY: a Float64Array of `length` elements, aligned by construction; the caller keeps the
  // slice within the current call (forwarded contract).
  Ok(unsafe { std::slice::from_raw_parts_mut(data.cast::<f64>(), length) })
}
