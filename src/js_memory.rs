//! The few raw Node-API calls that touch ArrayBuffer memory, in one place.
//!
//! napi-rs's own external-buffer helpers fall back to a copy silently, and some of those
//! fallbacks returned views of freed memory before 3.12.3 (see docs/protocol.md). We make these
//! calls ourselves so that every fallback is explicit, reported (`isCopy`) and tested: the
//! `NAPI_DLPACK_NO_EXTERNAL_BUFFERS=1` switch forces the Electron behaviour in any runtime.
//!
//! It also owns the per-environment state that lets a JS buffer reference be released from any
//! thread: DLPack deleters may run anywhere, but `napi_delete_reference` must run on the JS
//! thread of its environment.
//!
//! And it owns what happens when an environment (the main thread, or a Worker) ends. Its
//! cleanup hook, [`on_env_teardown`], frees every external of ours that the runtime has not
//! finalized yet, then deletes every reference still alive:
//! - Bun and Deno run env cleanup hooks when a Worker ends, but not the finalizers of the
//!   `napi_external`s still alive in it (Bun runs those of external ArrayBuffers and wrapped
//!   objects, Deno only those of external ArrayBuffers). Without the hook, the tensors of
//!   unconsumed capsules and of imported tensors left in a Worker were never released there.
//! - Node runs those finalizers after the cleanup hooks, but does not free references the addon
//!   did not delete itself (Node 20: 40 bytes per `napi_create_reference`).
//!
//! Finalizers that do run after the hook find their external already freed (it has left the
//! live set) and do nothing, so everything is freed exactly once in every runtime.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::c_void;
use std::hash::{BuildHasherDefault, Hasher};
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::ThreadId;

use napi::sys;
use napi_dlpack::{cuda, ErrorKind};

use crate::errors::{fail, napi_failure, status, Result};

/// Hashes addresses (unique, 8-aligned) with one multiply: the sets keyed by address are
/// consulted on hot paths (every handle and capsule, every round trip), and SipHash's flood
/// resistance buys nothing here.
#[derive(Default)]
pub(crate) struct AddressHasher(u64);

impl Hasher for AddressHasher {
  fn finish(&self) -> u64 {
    self.0
  }

  fn write(&mut self, bytes: &[u8]) {
    for &byte in bytes {
      self.0 = (self.0.rotate_left(8) ^ u64::from(byte)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
  }

  fn write_usize(&mut self, address: usize) {
    self.0 = (address as u64 >> 3).wrapping_mul(0x9e37_79b9_7f4a_7c15);
  }
}

pub(crate) type AddressSet = HashSet<usize, BuildHasherDefault<AddressHasher>>;

/// State shared between one JS environment (main thread or a Worker) and the threads that may
/// drop its buffer references.
pub struct EnvShared {
  env: sys::napi_env,
  thread: ThreadId,
  /// The release queue and the references not deleted yet; `None` once the environment is
  /// being torn down (the teardown hook deleted them all). Calls into the threadsafe function
  /// happen under this lock, so it is never used after release.
  live: Mutex<Option<LiveReferences>>,
}

struct LiveReferences {
  queue: SendPtr,
  /// Every reference created by [`BufferRef::new`] and not deleted yet, including those queued
  /// for deletion by another thread. Whatever is left here at teardown is deleted by the hook.
  references: AddressSet,
}

impl EnvShared {
  fn live(&self) -> MutexGuard<'_, Option<LiveReferences>> {
    // A panic while holding the lock cannot leave the set half-updated in a way that matters:
    // at worst a reference is deleted by the hook instead of by its owner.
    self.live.lock().unwrap_or_else(PoisonError::into_inner)
  }
}

#[derive(Clone, Copy)]
struct SendPtr(sys::napi_threadsafe_function);
// SAFETY: a threadsafe function handle is designed to be used from any thread.
unsafe impl Send for SendPtr {}

// SAFETY: `env` is only dereferenced (passed to Node-API) on `thread`, checked at each use; the
// queue handle is thread-safe and guarded by the mutex.
unsafe impl Send for EnvShared {}
// SAFETY: as above.
unsafe impl Sync for EnvShared {}

/// Frees what one of our externals owns: what its finalizer does, called at most once.
pub type FreeExternal = unsafe fn(*mut c_void);

thread_local! {
  /// One environment per JS thread in Node (the main thread, or one per Worker).
  static ENV_STATE: RefCell<Option<Arc<EnvShared>>> = const { RefCell::new(None) };
  /// Whether external ArrayBuffers work here; probed once per environment.
  static EXTERNALS_ALLOWED: Cell<Option<bool>> = const { Cell::new(None) };
  /// This environment's externals (by data address) whose finalizers have not run yet, and
  /// how to free each: freed by the finalizer or by the teardown hook, whichever comes first.
  static LIVE_EXTERNALS: RefCell<HashMap<usize, FreeExternal, BuildHasherDefault<AddressHasher>>> =
    RefCell::new(HashMap::default());
  /// This environment's `worker_threads.markAsUntransferable` (lib/native.ts hands it over at
  /// load; see [`mark_untransferable`]). `None` where the runtime has none.
  static UNTRANSFERABLE_MARKER: RefCell<Option<BufferRef>> = const { RefCell::new(None) };
}

/// Keeps `function` (the runtime's `markAsUntransferable`) for [`mark_untransferable`] in
/// this environment.
///
/// # Safety
/// `env` must be the live environment of the calling thread and `function` a value of it.
pub unsafe fn set_untransferable_marker(
  env: sys::napi_env,
  function: sys::napi_value,
) -> Result<()> {
  // SAFETY: forwarded contract.
  let reference = unsafe { BufferRef::new(env, function)? };
  // The previous marker (a second load of lib/native.ts) is dropped here, on its thread.
  UNTRANSFERABLE_MARKER.with(|marker| marker.borrow_mut().replace(reference));
  Ok(())
}

/// Marks an ArrayBuffer so that it can no longer be detached by a `postMessage` or
/// `structuredClone` transfer list (every runtime), nor by `ArrayBuffer.prototype.transfer()`
/// where the runtime sets V8's detach key (Node 24, Deno). Called before native code is handed
/// a pointer into V8 memory that outlives the call (a capsule, an owned or kept export): a
/// transfer would move the memory to another owner, which frees it while the export still
/// points into it. No-op where no marker was handed over.
///
/// # Safety
/// `env` must be the live environment of the calling thread and `buffer` a value of it.
pub unsafe fn mark_untransferable(env: sys::napi_env, buffer: sys::napi_value) -> Result<()> {
  let function = UNTRANSFERABLE_MARKER.with(|marker| match marker.borrow().as_ref() {
    // SAFETY: forwarded contract.
    Some(reference) => unsafe { reference.value(env) }.map(Some),
    None => Ok(None),
  })?;
  let Some(function) = function else {
    return Ok(());
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
  })
}

/// Runs on the JS thread for each queued reference.
unsafe extern "C" fn release_on_js_thread(
  env: sys::napi_env,
  _callback: sys::napi_value,
  _context: *mut c_void,
  data: *mut c_void,
) {
  // `env` is NULL when the queue is drained during teardown: the hook deleted what was queued.
  if env.is_null() || data.is_null() {
    return;
  }
  let Some(shared) = ENV_STATE.with(|state| state.borrow().clone()) else {
    return;
  };
  let mut live = shared.live();
  if let Some(live) = live.as_mut() {
    if live.references.remove(&(data as usize)) {
      // SAFETY: `data` is a live napi_ref of this env (still in the set), queued by
      // `BufferRef::drop`; we are on the env's thread.
      unsafe { sys::napi_delete_reference(env, data.cast()) };
    }
  }
}

/// The environment's cleanup hook (its JS thread; the environment is still alive, no JS runs).
unsafe extern "C" fn on_env_teardown(arg: *mut c_void) {
  // SAFETY: `arg` is the Arc we leaked in `env_shared`; reclaim it.
  let shared = unsafe { Arc::from_raw(arg.cast::<EnvShared>()) };
  // First the externals the runtime has not finalized (all of them in Node, whose finalizers
  // run later and then find nothing to do): unconsumed capsules release their tensors, handles
  // their storages. Their buffer references are deleted on the way, while the queue is open.
  loop {
    let live = LIVE_EXTERNALS.with(|live| std::mem::take(&mut *live.borrow_mut()));
    if live.is_empty() {
      break;
    }
    for (address, free) in live {
      // SAFETY: `address` left the live set just now, so neither its finalizer nor this loop
      // has freed it; `free` is the function registered with it.
      unsafe { free(address as *mut c_void) };
    }
  }
  // The marker's reference goes with the environment (deleted now, while the set is open).
  UNTRANSFERABLE_MARKER.with(|marker| marker.borrow_mut().take());
  // Then the references still held by exports that native code has not released: delete them
  // now (Node does not free them), and close the queue. Deleters that run later find `None`.
  if let Some(live) = shared.live().take() {
    for reference in live.references {
      // SAFETY: a live reference of this env (still in the set), deleted once: the set is gone.
      unsafe { sys::napi_delete_reference(shared.env, reference as sys::napi_ref) };
    }
    // SAFETY: the handle is live until this release; no caller can use it after we cleared
    // the slot under the lock.
    unsafe {
      sys::napi_release_threadsafe_function(live.queue.0, sys::ThreadsafeFunctionReleaseMode::abort)
    };
  }
  ENV_STATE.with(|state| state.borrow_mut().take());
  EXTERNALS_ALLOWED.with(|allowed| allowed.set(None));
  // Last, the CUDA frees and producer deleters on the release thread (some handed to it just
  // now): the process may exit right after this hook, and a deleter still queued then would
  // never run. Bounded, so a deleter that hangs cannot hang the exit; free when none is queued.
  cuda::warn_if_undrained(
    cuda::drain_releases(cuda::RELEASE_DRAIN_LIMIT),
    "environment teardown",
  );
}

/// Makes sure the current environment has its teardown hook (and shared state).
///
/// # Safety
/// `env` must be the live environment of the calling thread.
unsafe fn ensure_teardown_hook(env: sys::napi_env) -> Result<()> {
  if ENV_STATE.with(|state| state.borrow().is_some()) {
    return Ok(());
  }
  // SAFETY: forwarded contract.
  unsafe { env_shared(env) }.map(drop)
}

/// Registers `data`, about to be owned by an external of `env` whose finalizer is
/// [`finalize_tracked`], so that `free(data)` runs exactly once: in that finalizer, or in the
/// environment's teardown hook if the runtime has not finalized the external by then. On error
/// `data` has been freed.
///
/// # Safety
/// `env` must be the live environment of the calling thread; `free(data)` must be valid once.
pub unsafe fn track_external(
  env: sys::napi_env,
  data: *mut c_void,
  free: FreeExternal,
) -> Result<()> {
  // SAFETY: forwarded contract.
  if let Err(error) = unsafe { ensure_teardown_hook(env) } {
    // SAFETY: caller contract; not registered, so this is the only free.
    unsafe { free(data) };
    return Err(error);
  }
  LIVE_EXTERNALS.with(|live| live.borrow_mut().insert(data as usize, free));
  Ok(())
}

/// The finalizer of every external registered with [`track_external`]: frees it unless the
/// teardown hook already has.
pub unsafe extern "C" fn finalize_tracked(
  _env: sys::napi_env,
  data: *mut c_void,
  _hint: *mut c_void,
) {
  // `try_with`: a finalizer run during thread exit, after the set is gone, leaks rather than
  // guessing.
  let free = LIVE_EXTERNALS
    .try_with(|live| live.borrow_mut().remove(&(data as usize)))
    .ok()
    .flatten();
  if let Some(free) = free {
    // SAFETY: registered with `data` and removed just now, so this is the only call.
    unsafe { free(data) };
  }
}

/// The shared state of the current thread's environment, created on first use.
///
/// # Safety
/// `env` must be the live environment of the calling thread.
pub unsafe fn env_shared(env: sys::napi_env) -> Result<Arc<EnvShared>> {
  if let Some(shared) = ENV_STATE.with(|state| state.borrow().clone()) {
    return Ok(shared);
  }
  let mut name = ptr::null_mut();
  let label = "napi-dlpack release queue";
  // SAFETY: valid env, UTF-8 string with explicit length.
  status("napi_create_string_utf8", unsafe {
    sys::napi_create_string_utf8(env, label.as_ptr().cast(), label.len() as isize, &mut name)
  })?;
  let mut tsfn = ptr::null_mut();
  // SAFETY: no JS function; `release_on_js_thread` does the work. Unbounded queue.
  status("napi_create_threadsafe_function", unsafe {
    sys::napi_create_threadsafe_function(
      env,
      ptr::null_mut(),
      ptr::null_mut(),
      name,
      0,
      1,
      ptr::null_mut(),
      None,
      ptr::null_mut(),
      Some(release_on_js_thread),
      &mut tsfn,
    )
  })?;
  // The queue must not keep the process alive.
  // SAFETY: live handle on its own env.
  status("napi_unref_threadsafe_function", unsafe {
    sys::napi_unref_threadsafe_function(env, tsfn)
  })?;
  let shared = Arc::new(EnvShared {
    env,
    thread: std::thread::current().id(),
    live: Mutex::new(Some(LiveReferences {
      queue: SendPtr(tsfn),
      references: AddressSet::default(),
    })),
  });
  let hook_arg = Arc::into_raw(shared.clone()) as *mut c_void;
  // SAFETY: the hook reclaims `hook_arg` exactly once, at teardown.
  status("napi_add_env_cleanup_hook", unsafe {
    sys::napi_add_env_cleanup_hook(env, Some(on_env_teardown), hook_arg)
  })?;
  ENV_STATE.with(|state| *state.borrow_mut() = Some(shared.clone()));
  Ok(shared)
}

/// A strong reference to a JS value (an ArrayBuffer; the untransferable marker) that may be
/// dropped on any thread.
pub struct BufferRef {
  reference: sys::napi_ref,
  shared: Arc<EnvShared>,
}

// SAFETY: the reference is only used on its env's thread; other threads hand it to the
// release queue (see Drop).
unsafe impl Send for BufferRef {}
// SAFETY: no `&self` method touches the reference off-thread.
unsafe impl Sync for BufferRef {}

impl BufferRef {
  /// # Safety
  /// `env` must be the live environment of the calling thread and `value` a value of it.
  pub unsafe fn new(env: sys::napi_env, value: sys::napi_value) -> Result<BufferRef> {
    // SAFETY: forwarded contract.
    let shared = unsafe { env_shared(env)? };
    let mut reference = ptr::null_mut();
    // SAFETY: forwarded contract.
    status("napi_create_reference", unsafe {
      sys::napi_create_reference(env, value, 1, &mut reference)
    })?;
    if let Some(live) = shared.live().as_mut() {
      live.references.insert(reference as usize);
    }
    Ok(BufferRef { reference, shared })
  }

  /// The referenced value, on the owning thread only.
  ///
  /// # Safety
  /// `env` must be the live environment of the calling thread.
  pub unsafe fn value(&self, env: sys::napi_env) -> Result<sys::napi_value> {
    if env != self.shared.env || std::thread::current().id() != self.shared.thread {
      return Err(fail(
        ErrorKind::InvalidArgument,
        "tensor used outside the JS environment that created it",
      ));
    }
    let mut value = ptr::null_mut();
    // SAFETY: our reference, on its env's thread.
    status("napi_get_reference_value", unsafe {
      sys::napi_get_reference_value(env, self.reference, &mut value)
    })?;
    Ok(value)
  }
}

impl Drop for BufferRef {
  fn drop(&mut self) {
    let on_owner_thread = std::thread::current().id() == self.shared.thread;
    let mut live = self.shared.live();
    let Some(live) = live.as_mut() else {
      // The environment's teardown hook has deleted the reference already.
      return;
    };
    if on_owner_thread {
      live.references.remove(&(self.reference as usize));
      // SAFETY: our reference, on its env's thread, env still alive (not torn down).
      unsafe { sys::napi_delete_reference(self.shared.env, self.reference) };
    } else {
      // SAFETY: the queue handle is live while we hold the lock.
      let status = unsafe {
        sys::napi_call_threadsafe_function(
          live.queue.0,
          self.reference.cast(),
          sys::ThreadsafeFunctionCallMode::nonblocking,
        )
      };
      // The reference stays in the set until the JS thread deletes it; if the queue refused
      // it (napi_closing: the env is shutting down), the teardown hook deletes it.
      let _ = status;
    }
  }
}

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

/// A type-tagged `napi_external` that owns `value`; the external's finalizer drops it, or the
/// environment's teardown hook does if the runtime never finalizes it (see [`track_external`]).
///
/// # Safety
/// `env` must be the live environment of the calling thread.
pub unsafe fn tagged_external<T: 'static>(
  env: sys::napi_env,
  value: T,
  tag: &sys::napi_type_tag,
) -> Result<sys::napi_value> {
  unsafe fn free<T>(data: *mut c_void) {
    // SAFETY: `data` is the Box leaked below; `track_external` calls this once.
    drop(unsafe { Box::from_raw(data.cast::<T>()) });
  }
  let data = Box::into_raw(Box::new(value)).cast::<c_void>();
  // SAFETY: valid env (caller); on error `data` has been freed.
  unsafe { track_external(env, data, free::<T>)? };
  let mut external = ptr::null_mut();
  // SAFETY: valid env (caller); the finalizer owns `data` once the external exists.
  let created = unsafe {
    sys::napi_create_external(
      env,
      data,
      Some(finalize_tracked),
      ptr::null_mut(),
      &mut external,
    )
  };
  if created != sys::Status::napi_ok {
    // SAFETY: not adopted by an external; free it (and forget it) as its finalizer would.
    unsafe { finalize_tracked(env, data, ptr::null_mut()) };
    return Err(napi_failure("napi_create_external", created));
  }
  // SAFETY: `external` is a live external of this env. If tagging fails, the external still
  // owns `data` and frees it when collected.
  status("napi_type_tag_object", unsafe {
    sys::napi_type_tag_object(env, external, tag)
  })?;
  Ok(external)
}

/// The data of `value`, a `napi_external`, if it carries `tag`; `None` if it carries another
/// tag or none. The one place that reads an external of ours back (handles and capsules).
///
/// # Safety
/// `env` must be the live environment of the calling thread and `value` an external of it.
#[inline(always)]
pub unsafe fn tagged_data(
  env: sys::napi_env,
  value: sys::napi_value,
  tag: &sys::napi_type_tag,
) -> Result<Option<*mut c_void>> {
  let mut tagged = false;
  // SAFETY: forwarded contract.
  status("napi_check_object_type_tag", unsafe {
    sys::napi_check_object_type_tag(env, value, tag, &mut tagged)
  })?;
  if !tagged {
    return Ok(None);
  }
  let mut data = ptr::null_mut();
  // SAFETY: forwarded contract: an external.
  status("napi_get_value_external", unsafe {
    sys::napi_get_value_external(env, value, &mut data)
  })?;
  Ok(Some(data))
}

/// Whether `value` is a `napi_external` (of any addon).
///
/// # Safety
/// `env` must be the live environment of the calling thread and `value` a value of it.
pub unsafe fn is_external(env: sys::napi_env, value: sys::napi_value) -> Result<bool> {
  let mut value_type = 0;
  // SAFETY: forwarded contract.
  status("napi_typeof", unsafe {
    sys::napi_typeof(env, value, &mut value_type)
  })?;
  Ok(value_type == sys::ValueType::napi_external)
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
