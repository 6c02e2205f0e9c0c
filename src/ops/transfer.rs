//! Tensors handed to another JS thread (a `worker_threads` Worker) without copying: the
//! process-wide registry of transfer tokens (`Tensor#transfer()`, `Tensor.fromTransfer()`; the
//! `#[napi]` functions are in `binding::transfer`).
//!
//! Only memory that no JS thread owns goes through here: a producer's DLPack memory
//! (`Memory::Foreign`, released by its deleter, which may run on any thread: docs/protocol.md
//! §2.4), our own private copies (`Memory::Owned`) and our CUDA allocations (freed on any thread,
//! the driver context bound by the free itself). JS memory never does: an ArrayBuffer belongs to
//! one isolate and is freed with it, so a tensor over one cannot outlive its thread; tensors over
//! a SharedArrayBuffer travel by structured clone instead (lib/transfer.ts), where V8 itself
//! shares the backing store between threads.
//!
//! [`register`] (`transferHandle`) parks one strong count of the tensor's storage under a new token; the
//! receiving thread's [`claim`] (`claimTransfer`) takes it out (the registry lock makes the claim atomic, so
//! a token is claimed at most once) and makes its own handle of it. From then on the storage is
//! shared by the two threads' handles like any other `Arc<Storage>`: the producer's deleter runs
//! once, on whichever thread lets go last (dispose, GC, or its environment's teardown when a
//! thread ends, terminated or not).
//!
//! A producer's deleter is code of the producer's addon, and Node unloads (dlclose) an addon
//! loaded only in a Worker when that Worker ends: a tensor claimed on another thread would then
//! call into unmapped code when released. [`register`] therefore pins the module holding
//! the deleter for the life of the process ([`pin_module_of`]), as an addon loaded on the main
//! thread is anyway.
//!
//! A token nobody claims is released by [`release`] (`releaseTransfer`), or when the environment that made it
//! ends (this module's env cleanup hook): the receiver cannot be known, and a token that outlived
//! its sender until process exit would leak in a server whose messages get lost (a Worker
//! terminated before reading them). No timeout: a claim never races a clock.

use std::cell::Cell;
use std::collections::hash_map::RandomState;
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::hash::{BuildHasher, Hasher};
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use napi::bindgen_prelude::Unknown;
use napi::{sys, Env};
use napi_dlpack::{cuda, ErrorKind};

use crate::errors::{fail, status, Result};
use crate::handle::{new_handle, Handle};
use crate::layout::TensorLayout;
use crate::storage::{Memory, Storage};

/// A tensor waiting for its claim.
struct Pending {
  storage: Arc<Storage>,
  layout: Arc<TensorLayout>,
  /// The environment that made the token (see [`SENDER`]): its teardown releases the token.
  sender: u64,
}

/// Unclaimed tokens, by id (ids are never reused).
static PENDING: Mutex<BTreeMap<u64, Pending>> = Mutex::new(BTreeMap::new());
static NEXT_TOKEN: AtomicU64 = AtomicU64::new(1);
static NEXT_SENDER: AtomicU64 = AtomicU64::new(1);

thread_local! {
  /// This thread's environment id, set (with its cleanup hook) by its first transfer.
  static SENDER: Cell<Option<u64>> = const { Cell::new(None) };
}

fn pending() -> MutexGuard<'static, BTreeMap<u64, Pending>> {
  // Single inserts and removes: a panic cannot leave the map half-updated.
  PENDING.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A random key naming this process in every token, so that a token posted to another process
/// (child_process IPC, a file) is refused there instead of claiming that process's token of the
/// same number.
pub(crate) fn process_key() -> String {
  static KEY: OnceLock<String> = OnceLock::new();
  KEY
    .get_or_init(|| {
      let mut hasher = RandomState::new().build_hasher();
      hasher.write_u32(std::process::id());
      format!("{:016x}", hasher.finish())
    })
    .clone()
}

/// The environment cleanup hook: releases the tokens this environment made and nobody claimed
/// (their producers' deleters run here, if these were the last owners).
unsafe extern "C" fn release_unclaimed(arg: *mut c_void) {
  let sender = arg as usize as u64;
  let released: Vec<Pending> = {
    let mut map = pending();
    let ids: Vec<u64> = map
      .iter()
      .filter(|(_, entry)| entry.sender == sender)
      .map(|(id, _)| *id)
      .collect();
    ids.iter().filter_map(|id| map.remove(id)).collect()
  };
  let _ = SENDER.try_with(|slot| slot.set(None));
  // Outside the lock: a deleter may take its time, or transfer something itself.
  let any = !released.is_empty();
  drop(released);
  if any {
    // CUDA frees and producer deleters handed to the release thread just now must run before
    // the thread (or the process) ends, as at every other teardown (see js_memory).
    cuda::warn_if_undrained(
      cuda::drain_releases(cuda::RELEASE_DRAIN_LIMIT),
      "environment teardown (unclaimed transfers)",
    );
  }
}

/// This environment's sender id, registering its cleanup hook on first use.
fn sender_id(env: &Env) -> Result<u64> {
  if let Some(id) = SENDER.with(Cell::get) {
    return Ok(id);
  }
  let id = NEXT_SENDER.fetch_add(1, Ordering::Relaxed);
  // SAFETY: our env, on its thread; the hook only reads its argument (an id, not a pointer).
  status("napi_add_env_cleanup_hook", unsafe {
    sys::napi_add_env_cleanup_hook(
      env.raw(),
      Some(release_unclaimed),
      ptr::without_provenance_mut(id as usize),
    )
  })?;
  SENDER.with(|slot| slot.set(Some(id)));
  Ok(id)
}

/// Keeps the shared library (or executable) containing `address` loaded until the process ends;
/// does nothing where the address belongs to no module (or the platform has no such call).
fn pin_module_of(address: usize) {
  if address != 0 {
    platform::pin_module_of(address);
  }
}

#[cfg(unix)]
mod platform {
  use std::ffi::{c_char, c_int, c_void};

  #[repr(C)]
  struct DlInfo {
    dli_fname: *const c_char,
    dli_fbase: *mut c_void,
    dli_sname: *const c_char,
    dli_saddr: *mut c_void,
  }

  extern "C" {
    fn dladdr(address: *const c_void, info: *mut DlInfo) -> c_int;
    fn dlopen(filename: *const c_char, flags: c_int) -> *mut c_void;
  }

  const RTLD_NOW: c_int = 2;
  #[cfg(any(target_os = "macos", target_os = "ios"))]
  const RTLD_NOLOAD: c_int = 0x10;
  #[cfg(not(any(target_os = "macos", target_os = "ios")))]
  const RTLD_NOLOAD: c_int = 4;

  pub(super) fn pin_module_of(address: usize) {
    let mut info = DlInfo {
      dli_fname: std::ptr::null(),
      dli_fbase: std::ptr::null_mut(),
      dli_sname: std::ptr::null(),
      dli_saddr: std::ptr::null_mut(),
    };
    // SAFETY: dladdr only reads the loader's tables for `address` and fills `info`.
    let found = unsafe { dladdr(address as *const c_void, &mut info) };
    if found == 0 || info.dli_fname.is_null() {
      return;
    }
    // SAFETY: a NUL-terminated path the loader gave us for a module it has loaded; NOLOAD only
    // takes one more reference to it (never loads anything). The handle is deliberately never
    // closed: the module then stays mapped until the process ends.
    let _ = unsafe { dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD) };
  }
}

#[cfg(windows)]
mod platform {
  use std::ffi::c_void;

  const GET_MODULE_HANDLE_EX_FLAG_PIN: u32 = 0x1;
  const GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS: u32 = 0x4;

  #[link(name = "kernel32")]
  extern "system" {
    fn GetModuleHandleExW(flags: u32, module_name: *const u16, module: *mut *mut c_void) -> i32;
  }

  pub(super) fn pin_module_of(address: usize) {
    let mut module = std::ptr::null_mut();
    // SAFETY: FROM_ADDRESS makes the name argument an address inside the module; PIN keeps the
    // module loaded until the process ends. Nothing is written but `module`.
    let _ = unsafe {
      GetModuleHandleExW(
        GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_PIN,
        address as *const u16,
        &mut module,
      )
    };
  }
}

#[cfg(not(any(unix, windows)))]
mod platform {
  pub(super) fn pin_module_of(_address: usize) {}
}

/// Registers the tensor of `handle` under a new transfer token and returns the token's number;
/// `None` for JS memory (an ArrayBuffer or SharedArrayBuffer), which lib/transfer.ts handles. The
/// handle stays usable: sender and receiver share the memory, as two tensors of one import do.
pub(crate) fn register(env: &Env, handle: &Handle) -> Result<Option<u64>> {
  let storage = handle.storage()?;
  match storage.memory() {
    Memory::Js { .. } => return Ok(None),
    // The deleter may now run on a thread that outlives the producer's (see the module doc).
    Memory::Foreign(tensor) => pin_module_of(tensor.managed().context_and_deleter().1),
    Memory::Owned(_) | Memory::Cuda(_) | Memory::Pinned(_) => {}
  }
  let sender = sender_id(env)?;
  let id = NEXT_TOKEN.fetch_add(1, Ordering::Relaxed);
  let entry = Pending {
    storage: storage.clone(),
    layout: handle.layout.clone(),
    sender,
  };
  pending().insert(id, entry);
  Ok(Some(id))
}

/// Claims token `id` on this thread: a new handle over the transferred memory. A token is
/// claimed once; afterwards (or once released) this is ERR_DLPACK_TRANSFER_CLAIMED.
pub(crate) fn claim<'env>(env: &'env Env, id: u64) -> Result<Unknown<'env>> {
  let entry = pending().remove(&id).ok_or_else(|| {
    fail(
      ErrorKind::TransferClaimed,
      format!(
        "transfer token {id} is not pending: it was claimed already (a token is claimed once), \
         released with releaseTransfer(), or the thread that made it ended before the claim"
      ),
    )
  })?;
  // If the handle cannot be made, the storage drops here: the token is spent either way, and
  // the memory is released once nobody else holds it.
  new_handle(env, entry.storage, (*entry.layout).clone())
}

/// Releases unclaimed token `id`; false when it is not pending (claimed or released already).
pub(crate) fn release(id: u64) -> bool {
  // Taken out under the lock, dropped after it: the drop may run a producer's deleter.
  let entry = pending().remove(&id);
  entry.is_some()
}

/// Tokens made and not yet claimed or released, in the whole process.
pub(crate) fn pending_count() -> usize {
  pending().len()
}
