//! The per-environment state: references that any thread may drop, our externals, and the
//! cleanup hook that frees what the runtime leaves at the end of an environment.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::ffi::c_void;
use std::hash::{BuildHasherDefault, Hasher};
use std::ptr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::ThreadId;

use napi::sys;
use napi_dlpack::{cuda, ErrorKind};

use crate::errors::{fail, status, Result};

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
  pub(super) static EXTERNALS_ALLOWED: Cell<Option<bool>> = const { Cell::new(None) };
  /// This environment's externals (by data address) whose finalizers have not run yet, and
  /// how to free each: freed by the finalizer or by the teardown hook, whichever comes first.
  static LIVE_EXTERNALS: RefCell<HashMap<usize, FreeExternal, BuildHasherDefault<AddressHasher>>> =
    RefCell::new(HashMap::default());
  /// This environment's `worker_threads.markAsUntransferable` (lib/native.ts hands it over at
  /// load; see [`mark_untransferable`]). `None` where the runtime has none.
  pub(super) static UNTRANSFERABLE_MARKER: RefCell<Option<BufferRef>> = const { RefCell::new(None) };
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
  // The pinned staging chunks go with the last environment that made a staged copy.
  cuda::staging_env_ended();
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
