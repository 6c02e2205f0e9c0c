//! Which JS thread is calling: the key a slot records as its owner (`slots` module docs).
//!
//! Where the platform has a thread pointer that code can read with one instruction (the
//! x86_64 TCB's self pointer at `fs:0` on Linux, the TEB's at `gs:0x30` on Windows,
//! `tpidr_el0` on aarch64 Linux), the key is that pointer: no thread-local access, which in a
//! dynamically loaded addon is a `__tls_get_addr` call on every borrow and release. A thread
//! pointer is unique among live threads but is reused once a thread has ended, so a thread
//! that owned slots gives them all up when it ends (the drop of `slots`'s per-thread free
//! list): a later thread with the same pointer finds none. Elsewhere the key is a serial from a process-wide counter, taken on
//! a thread's first slot and never reused.

/// The owner of no slot: a free slot of the process-wide free list.
pub const NOBODY: u64 = 0;
/// The owner of a slot whose thread ended while its handle was still live (a tensor never
/// collected before its environment went away): no thread's key, so no borrow, release or
/// reuse ever touches it again.
pub const ENDED: u64 = u64::MAX;

/// `NAPI_DLPACK_THREAD_KEY_POINTER`: the key is the thread pointer, as [`current`] reads it.
pub const KIND_THREAD_POINTER: u32 = 1;
/// `NAPI_DLPACK_THREAD_KEY_PRIVATE`: the key is private to the producer (a serial).
pub const KIND_PRIVATE: u32 = 0;

/// How [`current`] computes the key on this platform.
#[cfg(any(
  all(
    target_arch = "x86_64",
    any(target_os = "linux", target_os = "windows")
  ),
  all(target_arch = "aarch64", target_os = "linux")
))]
pub const KIND: u32 = KIND_THREAD_POINTER;
/// How [`current`] computes the key on this platform.
#[cfg(not(any(
  all(
    target_arch = "x86_64",
    any(target_os = "linux", target_os = "windows")
  ),
  all(target_arch = "aarch64", target_os = "linux")
)))]
pub const KIND: u32 = KIND_PRIVATE;

/// The calling thread's key (never [`NOBODY`] or [`ENDED`]).
#[cfg(all(
  target_arch = "x86_64",
  any(target_os = "linux", target_os = "windows")
))]
#[inline(always)]
pub fn current() -> u64 {
  let key: u64;
  // SAFETY: reads the thread's own control block, mapped for the life of the thread: on Linux
  // (glibc and musl) the x86_64 TLS ABI requires its first word to point to itself; on Windows
  // `gs:0x30` is the TEB's `Self` field. A user-space address: neither 0 nor u64::MAX.
  unsafe {
    #[cfg(target_os = "linux")]
    core::arch::asm!(
      "mov {key}, qword ptr fs:[0]",
      key = out(reg) key,
      options(nostack, readonly, preserves_flags, pure)
    );
    #[cfg(target_os = "windows")]
    core::arch::asm!(
      "mov {key}, qword ptr gs:[0x30]",
      key = out(reg) key,
      options(nostack, readonly, preserves_flags, pure)
    );
  }
  key
}

/// The calling thread's key (never [`NOBODY`] or [`ENDED`]).
#[cfg(all(target_arch = "aarch64", target_os = "linux"))]
#[inline(always)]
pub fn current() -> u64 {
  let key: u64;
  // SAFETY: reads the thread pointer register, which the C library sets to the thread's control
  // block for the life of the thread (non-zero for every thread it creates); no memory access.
  unsafe {
    core::arch::asm!(
      "mrs {key}, tpidr_el0",
      key = out(reg) key,
      options(nomem, nostack, preserves_flags, pure)
    );
  }
  key
}

/// The calling thread's key (never [`NOBODY`] or [`ENDED`]): a serial of this copy of the
/// crate, taken on first use, never reused.
#[cfg(not(any(
  all(
    target_arch = "x86_64",
    any(target_os = "linux", target_os = "windows")
  ),
  all(target_arch = "aarch64", target_os = "linux")
)))]
pub fn current() -> u64 {
  use std::cell::Cell;
  use std::sync::atomic::{AtomicU64, Ordering};

  /// The next serial (0 is [`NOBODY`]).
  static NEXT: AtomicU64 = AtomicU64::new(1);
  thread_local! {
    static SERIAL: Cell<u64> = const { Cell::new(0) };
  }
  let serial = SERIAL.with(Cell::get);
  if serial != 0 {
    return serial;
  }
  let serial = NEXT.fetch_add(1, Ordering::Relaxed);
  SERIAL.with(|cell| cell.set(serial));
  serial
}
