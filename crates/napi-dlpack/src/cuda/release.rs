//! Releases off the caller's thread: the release thread, its queue and its stats.

use core::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use super::device::{lock, CudaDevice, Handle};
use super::driver::{
  error_name, CuEvent, CuResult, CUDA_ERROR_NOT_PERMITTED, CUDA_ERROR_NOT_READY, CUDA_SUCCESS,
  EVENT_DISABLE_TIMING, LEGACY_STREAM,
};

// ---------------------------------------------------------------------------------------------
// Releases off the caller's thread

/// Work for the release thread.
pub(super) enum Job {
  /// Free one of our allocations (blocking driver calls).
  Free { device: Arc<CudaDevice>, ptr: u64 },
  /// Free one of our pinned host allocations (`cuMemFreeHost` synchronises the device).
  FreeHost {
    device: Arc<CudaDevice>,
    ptr: Handle,
  },
  /// Drop `owner` (a producer's tensor: its deleter runs) once `event` has completed.
  Release {
    device: Arc<CudaDevice>,
    event: Handle,
    owner: Box<dyn Send>,
  },
  /// Drop `owner` once everything enqueued on the device's stream so far has run (when no
  /// event could be recorded where the release started, e.g. in a CUDA host function).
  ReleaseAfterStream {
    device: Arc<CudaDevice>,
    owner: Box<dyn Send>,
  },
}

/// Jobs handed to the release thread and not finished yet.
static PENDING_RELEASES: AtomicUsize = AtomicUsize::new(0);
/// Signalled (under its mutex) when [`PENDING_RELEASES`] drops to 0, for [`drain_releases`].
static RELEASES_DRAINED: (Mutex<()>, Condvar) = (Mutex::new(()), Condvar::new());
/// Driver failures in release paths (drops and deleters), which have no caller to report to.
static RELEASE_ERRORS: AtomicUsize = AtomicUsize::new(0);

/// What the release paths did, for tests and diagnostics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReleaseStats {
  /// Frees and producer deleters waiting on the release thread.
  pub pending: usize,
  /// Driver failures in drops and deleters since the process started (each leaks what it was
  /// releasing, or runs a deleter without the wait it should have had).
  pub errors: usize,
}

/// Counters of the release paths.
pub fn release_stats() -> ReleaseStats {
  ReleaseStats {
    pending: PENDING_RELEASES.load(Ordering::SeqCst),
    errors: RELEASE_ERRORS.load(Ordering::SeqCst),
  }
}

/// Counts a failure in a release path and prints the first one (a drop cannot return it).
pub(super) fn release_failed(what: &str, code: CuResult) {
  static PRINTED: AtomicBool = AtomicBool::new(false);
  RELEASE_ERRORS.fetch_add(1, Ordering::SeqCst);
  if !PRINTED.swap(true, Ordering::SeqCst) {
    eprintln!(
      "napi-dlpack: releasing CUDA memory failed: {what}: {} ({code}). Later failures are \
       only counted (native cudaReleaseStats().errors).",
      error_name(code)
    );
  }
}

fn run_job(job: Job) {
  match job {
    Job::Free { device, ptr } => device.free_blocking(ptr),
    Job::FreeHost { device, ptr } => device.free_host_blocking(ptr.0),
    Job::Release {
      device,
      event,
      owner,
    } => {
      match device.bind() {
        Ok(bound) => {
          // SAFETY: our event, recorded on our stream; destroyed once, here.
          unsafe {
            let code = (bound.driver.event_synchronize)(event.0);
            if code != CUDA_SUCCESS {
              release_failed("cuEventSynchronize (deferred deleter)", code);
            }
            let code = (bound.driver.event_destroy)(event.0);
            if code != CUDA_SUCCESS {
              release_failed("cuEventDestroy (deferred deleter)", code);
            }
          }
        }
        Err(_) => release_failed(
          "cuCtxPushCurrent (deferred deleter)",
          CUDA_ERROR_NOT_PERMITTED,
        ),
      }
      // With no context of ours current any more: the producer's deleter binds its own.
      drop(owner);
    }
    Job::ReleaseAfterStream { device, owner } => {
      match device.bind() {
        // SAFETY: the legacy stream of our (bound) context.
        Ok(bound) => match unsafe { (bound.driver.stream_synchronize)(LEGACY_STREAM) } {
          CUDA_SUCCESS => {}
          code => release_failed("cuStreamSynchronize (deferred deleter)", code),
        },
        Err(_) => release_failed(
          "cuCtxPushCurrent (deferred deleter)",
          CUDA_ERROR_NOT_PERMITTED,
        ),
      }
      drop(owner);
    }
  }
}

/// Runs a job handed to [`defer`] and marks it finished, even if a deleter panics.
fn finish(job: Job) {
  let outcome = catch_unwind(AssertUnwindSafe(|| run_job(job)));
  if outcome.is_err() {
    RELEASE_ERRORS.fetch_add(1, Ordering::SeqCst);
  }
  if PENDING_RELEASES.fetch_sub(1, Ordering::SeqCst) == 1 {
    // Under the mutex, so a drainer between its check and its wait cannot miss it.
    let _guard = lock(&RELEASES_DRAINED.0);
    RELEASES_DRAINED.1.notify_all();
  }
}

/// Waits, at most `timeout`, until the release thread has no job left: the frees and producer
/// deleters handed to it so far (and any handed to it meanwhile) have run. Returns whether it
/// got there. Call it where a runtime environment ends (its cleanup hook): the process may exit
/// right after, and a deleter still queued then would never run. Costs one atomic load when
/// nothing is pending. Do not call it from the release thread or from a deleter.
pub fn drain_releases(timeout: Duration) -> bool {
  if PENDING_RELEASES.load(Ordering::SeqCst) == 0 {
    return true;
  }
  let deadline = Instant::now() + timeout;
  let mut guard = lock(&RELEASES_DRAINED.0);
  while PENDING_RELEASES.load(Ordering::SeqCst) != 0 {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
      return false;
    }
    guard = RELEASES_DRAINED
      .1
      .wait_timeout(guard, left)
      .unwrap_or_else(PoisonError::into_inner)
      .0;
  }
  true
}

/// How long `drain_at_exit` waits for the release thread.
pub const RELEASE_DRAIN_LIMIT: Duration = Duration::from_secs(10);

extern "C" {
  fn atexit(callback: extern "C" fn()) -> c_int;
}

/// The C `atexit` handler (registered with the release thread): runs the queued releases
/// before the process goes, bounded by [`RELEASE_DRAIN_LIMIT`].
extern "C" fn drain_at_exit() {
  warn_if_undrained(drain_releases(RELEASE_DRAIN_LIMIT), "process exit");
}

/// Prints (never panics, as in an `atexit` handler) that a bounded drain gave up.
pub fn warn_if_undrained(drained: bool, at: &str) {
  if !drained {
    use std::io::Write;
    let _ = writeln!(
      std::io::stderr(),
      "napi-dlpack: CUDA releases still pending after {} s at {at}; they may not run \
       (native cudaReleaseStats().pending)",
      RELEASE_DRAIN_LIMIT.as_secs()
    );
  }
}

/// Hands `job` to the release thread (started on first use); runs it here if there is none.
pub(super) fn defer(job: Job) {
  static SENDER: OnceLock<Option<Mutex<Sender<Job>>>> = OnceLock::new();
  PENDING_RELEASES.fetch_add(1, Ordering::SeqCst);
  let sender = SENDER.get_or_init(|| {
    let (sender, receiver) = mpsc::channel::<Job>();
    std::thread::Builder::new()
      .name("napi-dlpack-cuda-release".into())
      .spawn(move || {
        // A panicking deleter does not end the thread (`finish` catches it).
        for job in receiver {
          finish(job);
        }
      })
      .ok()
      .map(|_| {
        // `process.exit()` in Node ends the process without the environments' cleanup hooks:
        // drain there too. Nothing to do if it cannot be registered; cleanup hooks still drain.
        // SAFETY: registering a plain function that never unwinds.
        unsafe { atexit(drain_at_exit) };
        Mutex::new(sender)
      })
  });
  let job = match sender {
    Some(sender) => match lock(sender).send(job) {
      Ok(()) => return,
      Err(mpsc::SendError(job)) => job,
    },
    None => job,
  };
  finish(job);
}

/// Drops `owner` (an imported tensor: its producer's deleter runs) once the work enqueued so
/// far on `device`'s stream has completed, so that a producer that reuses the memory at once
/// (a caching allocator, `cuMemFreeAsync` on its own stream) cannot overwrite what our queued
/// copies still read. One event record and query here; when the work is still running the
/// wait and the deleter happen on the release thread, never blocking this one.
pub fn release_after_queued_work<T: Send + 'static>(device: &Arc<CudaDevice>, owner: T) {
  let Ok(bound) = device.bind() else {
    // Driver calls are refused here (a CUDA host function): the release thread waits for
    // everything on our stream instead, which includes the reads.
    return defer(Job::ReleaseAfterStream {
      device: device.clone(),
      owner: Box::new(owner),
    });
  };
  let mut event: CuEvent = core::ptr::null_mut();
  // SAFETY: valid out-pointer; our context is current. Then the new event on our stream.
  let recorded = unsafe {
    let code = (bound.driver.event_create)(&mut event, EVENT_DISABLE_TIMING);
    if code == CUDA_SUCCESS {
      let code = (bound.driver.event_record)(event, LEGACY_STREAM);
      if code != CUDA_SUCCESS {
        (bound.driver.event_destroy)(event);
      }
      code
    } else {
      code
    }
  };
  if recorded != CUDA_SUCCESS {
    // No event: wait here instead (rare: the driver is failing anyway).
    release_failed("recording the release event", recorded);
    // SAFETY: the legacy stream of our (bound) context.
    let code = unsafe { (bound.driver.stream_synchronize)(LEGACY_STREAM) };
    if code != CUDA_SUCCESS {
      release_failed("cuStreamSynchronize (deleter)", code);
    }
    drop(bound);
    return drop(owner);
  }
  // SAFETY: the event just recorded.
  let query = unsafe { (bound.driver.event_query)(event) };
  if query != CUDA_SUCCESS {
    drop(bound);
    if query != CUDA_ERROR_NOT_READY {
      release_failed("cuEventQuery (deleter)", query);
    }
    return defer(Job::Release {
      device: device.clone(),
      event: Handle(event),
      owner: Box::new(owner),
    });
  }
  // SAFETY: completed, ours, destroyed once.
  let code = unsafe { (bound.driver.event_destroy)(event) };
  if code != CUDA_SUCCESS {
    release_failed("cuEventDestroy (deleter)", code);
  }
  drop(bound);
  drop(owner);
}
