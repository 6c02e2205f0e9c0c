//! Handle ids (`docs/protocol.md` §5.6): the process-wide slot table behind `Tensor#id` and
//! `Tensor#native`, and the exchange table's "borrow by handle id" (`exchange`, `borrow_id`).
//!
//! A handle that JS asks for an id takes a slot. The slot holds what a borrow hands out,
//! computed and validated once there: a [`LentTensor`] record of the `DLTensor` (data, shape and
//! strides pointing into the handle's [`BorrowPin`], which the slot keeps alive), its flags,
//! its extent and the borrow token. A tensor's layout never changes and its data pointer moves
//! only if its `ArrayBuffer` is detached, so a borrow by id is a bounds-checked table lookup
//! that hands out the record itself: no type tag, no property, no re-validation, no copy. The
//! detach check stays only for JS memory that this runtime can still detach after it was
//! marked untransferable (see [`set_marked_buffers_detachable`]).
//!
//! An id is an integer below 2^53 (exact as a JS number): the slot's index in its low
//! [`INDEX_BITS`] bits, the slot's generation above. Refused, without reading anything the id
//! names, are ids whose slot
//! - was never allocated (bounds: the chunk is absent);
//! - is owned by another JS thread, or by a finished one: a slot records its owner thread's key
//!   ([`thread_key`]: the thread pointer where one can be read with one instruction, else a
//!   never-reused serial). A thread gives up all its slots when it ends, so a thread that
//!   reuses an ended one's pointer owns none of them (an env is per addon and may be reused for
//!   another thread after a Worker ends, so it cannot be the key);
//! - has another generation: a slot's generation is bumped when its handle lets go (`dispose()`,
//!   a collected tensor, a finished environment), so ids of a disposed tensor never name the
//!   tensor that reuses the slot. A slot whose generation would wrap is retired, never reused:
//!   an id names one handle for the life of the process.
//!
//! A borrow pins its slot: a handle that lets go while borrowed (a `dispose()` or a GC during the
//! call) bumps the generation at once, so no new borrow succeeds, but the slot (and the memory it
//! keeps) is freed only when the last borrow is released.
//!
//! Everything but the two atomics of a slot is touched only by its owner thread: a thread reads a
//! slot's state only after finding its own key in `owner`, which only it writes while it owns
//! the slot.
//!
//! The table is published to consumers (the exchange table's `id_slots`, minor 3: layout
//! [`napi_dlpack::id_slots`]): every slot starts with that module's `SlotHead`, so that a
//! consumer on a thread-pointer platform borrows an id inline, making the hot path's checks
//! itself under the same rules (it reads a slot's state only after finding its own thread's key
//! in `owner`), and calls `borrow_id` for everything else.

use std::cell::{RefCell, UnsafeCell};
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use napi_dlpack::exchange::{BorrowExtent, LentTensor};
use napi_dlpack::ffi::DLTensor;
use napi_dlpack::id_slots::{
  IdSlots, SlotHead, SlotShared, CHUNK_BITS, CHUNK_COUNT, CHUNK_LEN, SCRATCH_BYTES,
};
use napi_dlpack::thread_key;

use crate::handle::BorrowPin;

/// Bits of an id that name the slot (16,777,216 slots in the process at most).
pub(crate) const INDEX_BITS: u32 = napi_dlpack::id_slots::INDEX_BITS;
/// Bits of an id that carry the generation: `INDEX_BITS + GENERATION_BITS = 53`, so that every
/// id is an exact integer as a JS number.
const GENERATION_BITS: u32 = 29;
const INDEX_MASK: u64 = (1 << INDEX_BITS) - 1;
/// The largest generation an id can carry; a slot released at it is retired.
const LAST_GENERATION: u32 = (1 << GENERATION_BITS) - 1;
/// The largest id (2^53 - 1).
pub(crate) const MAX_ID: u64 = (1 << (INDEX_BITS + GENERATION_BITS)) - 1;
// Slots are allocated in chunks (`CHUNK_BITS`), so that a lookup is an array index, a pointer
// load and a second index, and a slot never moves.

const _: () = assert!(INDEX_BITS + GENERATION_BITS == 53);
const _: () = assert!(MAX_ID == napi_dlpack::id_slots::MAX_ID);
// What docs/protocol.md §5.6 says a slot costs.
#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<Slot>() == 240);
// A slot starts as the published layout says (`SlotHead`; `State` starts with `SlotShared`).
const _: () = {
  assert!(core::mem::offset_of!(Slot, owner) == core::mem::offset_of!(SlotHead, owner));
  assert!(core::mem::offset_of!(Slot, generation) == core::mem::offset_of!(SlotHead, generation));
  assert!(core::mem::offset_of!(Slot, state) == core::mem::offset_of!(SlotHead, shared));
  assert!(core::mem::offset_of!(State, shared) == 0);
  assert!(core::mem::size_of::<Slot>().is_multiple_of(8));
};

/// What a borrow by id hands out, prepared when the slot is taken (the slot adds the token).
pub(crate) struct Prepared {
  pub(crate) tensor: DLTensor,
  pub(crate) flags: u64,
  pub(crate) extent: BorrowExtent,
}

/// The owner-thread part of a slot.
#[repr(C)]
pub(crate) struct State {
  /// What consumers may touch (the owner thread only): borrows in progress (`pins`), whether a
  /// borrow needs no slow step (`ready`: `marked && !check_detach`), whether the handle let go
  /// (`released`: the slot is freed when `pins` reaches 0), and the record a borrow hands out
  /// (`lent`, by address: it stays put while the slot is pinned, since slots never move and
  /// nothing writes it until the slot is freed).
  shared: SlotShared,
  /// The storage and layout `lent` points into; `None` while the slot is free.
  pub(crate) pin: Option<Arc<BorrowPin>>,
  /// A borrow must first run the slow path ([`State::ready`] is false): the memory was not
  /// marked untransferable yet, or it is JS memory this runtime can still detach.
  marked: bool,
  check_detach: bool,
}

impl State {
  /// Whether a borrow can be handed out with no Node-API call at all.
  #[inline(always)]
  pub(crate) fn ready(&self) -> bool {
    self.shared.ready != 0
  }

  /// Whether the memory was marked untransferable.
  pub(crate) fn marked(&self) -> bool {
    self.marked
  }

  /// Records whether the memory is marked untransferable and whether every borrow must still
  /// check it for a detach.
  pub(crate) fn set_marks(&mut self, marked: bool, check_detach: bool) {
    self.marked = marked;
    self.check_detach = check_detach;
    self.shared.ready = u8::from(marked && !check_detach);
  }

  /// Whether every borrow must check the memory for a detach.
  pub(crate) fn check_detach(&self) -> bool {
    self.check_detach
  }
}

#[repr(C)]
pub(crate) struct Slot {
  /// Key of the owning thread ([`thread_key::current`]; [`thread_key::NOBODY`]: in the
  /// process-wide free list; [`thread_key::ENDED`]: its thread ended while it was live).
  owner: AtomicU64,
  /// The generation ids of the current occupant carry (bumped when it lets go).
  generation: AtomicU32,
  /// This slot's index (fixed; in what was padding): a borrow token is the slot's address, and
  /// freeing the slot needs its index.
  index: u32,
  state: UnsafeCell<State>,
}

// SAFETY: `owner` and `generation` are atomics; `state` is only touched by the thread whose key
// is in `owner` (module docs), and a key names one live thread (a thread clears it from its
// slots when it ends).
unsafe impl Sync for Slot {}

impl Slot {
  fn empty(index: u32) -> Slot {
    Slot {
      owner: AtomicU64::new(0),
      generation: AtomicU32::new(1),
      index,
      state: UnsafeCell::new(State {
        shared: SlotShared {
          pins: 0,
          ready: 0,
          released: 1,
          reserved: [0; 2],
          lent: LentTensor {
            tensor: DLTensor::zeroed(),
            flags: 0,
            extent: BorrowExtent::default(),
            keep_alive: ptr::null_mut(),
          },
          scratch_key: 0,
          scratch: [0; SCRATCH_BYTES / 8],
        },
        pin: None,
        marked: false,
        check_detach: false,
      }),
    }
  }

  /// The owner-thread state.
  ///
  /// # Safety
  /// The calling thread owns the slot (its key is in `owner`, see [`lookup`]), and no other
  /// reference to the state is alive.
  #[allow(clippy::mut_from_ref)]
  #[inline(always)]
  pub(crate) unsafe fn state(&self) -> &mut State {
    // SAFETY: caller contract.
    unsafe { &mut *self.state.get() }
  }

  /// The address of the record a borrow by id hands out, made from the cell's raw pointer (not
  /// through a `&mut State`, which later owner-thread accesses would invalidate): the borrower
  /// reads it until it gives the token back, while this thread updates `pins` beside it.
  #[inline(always)]
  pub(crate) fn lent(&self) -> *const LentTensor {
    // SAFETY: a field projection of the cell's own pointer; nothing is read.
    unsafe { &raw const (*self.state.get()).shared.lent }
  }
}

static CHUNKS: [AtomicPtr<Slot>; CHUNK_COUNT] =
  [const { AtomicPtr::new(ptr::null_mut()) }; CHUNK_COUNT];

/// The table as the exchange table publishes it (`id_slots`).
pub(crate) static ID_SLOTS: IdSlots = IdSlots {
  layout: napi_dlpack::id_slots::LAYOUT,
  thread_key: thread_key::KIND,
  slot_size: std::mem::size_of::<Slot>() as u64,
  // `AtomicPtr<Slot>` and `AtomicPtr<u8>` have one layout.
  chunks: CHUNKS.as_ptr().cast(),
};

/// Slots no thread owns (their thread ended) and the next never-used index.
struct Global {
  free: Vec<u32>,
  next: u32,
}

static GLOBAL: Mutex<Global> = Mutex::new(Global {
  free: Vec::new(),
  next: 0,
});

/// Whether JS memory marked untransferable can still be detached by JS in this runtime
/// (`ArrayBuffer.prototype.transfer` on Node 22 and Bun ignores the mark). Until JS has probed
/// it (`lib/native.ts`), assume it can.
static MARKED_DETACHABLE: AtomicBool = AtomicBool::new(true);

/// Told once per environment by `lib/native.ts`, which probes it.
pub(crate) fn set_marked_buffers_detachable(detachable: bool) {
  MARKED_DETACHABLE.store(detachable, Ordering::Relaxed);
}

pub(crate) fn marked_buffers_detachable() -> bool {
  MARKED_DETACHABLE.load(Ordering::Relaxed)
}

/// This thread's slots that its handles let go of, to reuse. Every thread that takes a slot
/// touches it first ([`take_index`]), so its drop runs when such a thread ends: the thread's
/// free slots go to the process, and the ones still live (a tensor its environment never
/// collected) are marked [`thread_key::ENDED`], owned by no thread. After that no slot names the
/// ended thread's key, which a new thread may reuse (a thread pointer).
struct LocalFree(RefCell<Vec<u32>>);

impl Drop for LocalFree {
  fn drop(&mut self) {
    let me = thread_key::current();
    let free = std::mem::take(self.0.get_mut());
    let Ok(mut global) = GLOBAL.lock() else {
      return;
    };
    for index in 0..global.next {
      if let Some(slot) = slot_at(index) {
        if slot.owner.load(Ordering::Acquire) == me {
          slot.owner.store(thread_key::ENDED, Ordering::Release);
        }
      }
    }
    for &index in &free {
      if let Some(slot) = slot_at(index) {
        slot.owner.store(thread_key::NOBODY, Ordering::Release);
      }
    }
    global.free.extend(free);
  }
}

thread_local! {
  static FREE: LocalFree = const { LocalFree(RefCell::new(Vec::new())) };
}

#[inline(always)]
fn slot_at(index: u32) -> Option<&'static Slot> {
  let index = index as usize;
  let chunk = CHUNKS.get(index >> CHUNK_BITS)?.load(Ordering::Acquire);
  if chunk.is_null() {
    return None;
  }
  // SAFETY: a chunk is a leaked, never freed array of CHUNK_LEN slots; the offset is masked.
  Some(unsafe { &*chunk.add(index & (CHUNK_LEN - 1)) })
}

/// Why an id was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refused {
  /// Not an id of this table: above 2^53, generation 0, or a slot that never existed.
  Unknown,
  /// A slot of another JS thread, or of a finished one.
  OtherThread,
  /// The slot's generation moved on: the tensor was disposed or collected.
  Stale,
}

impl Refused {
  pub(crate) fn message(self) -> &'static str {
    match self {
      Refused::Unknown => "not a napi-dlpack tensor handle id",
      Refused::OtherThread => {
        "the tensor handle id belongs to another JS thread (or to one that ended)"
      }
      Refused::Stale => "the tensor handle id is stale: its tensor was disposed or collected",
    }
  }
}

/// The slot an id names, if it is a live slot of this thread with the id's generation. Nothing
/// but the slot's two atomics is read before that is established.
#[inline(always)]
pub(crate) fn lookup(id: u64) -> Result<&'static Slot, Refused> {
  // Generations start at 1: an id below 2^24 (a small integer) was never handed out.
  if id > MAX_ID || id >> INDEX_BITS == 0 {
    return Err(Refused::Unknown);
  }
  let Some(slot) = slot_at((id & INDEX_MASK) as u32) else {
    return Err(Refused::Unknown);
  };
  if slot.owner.load(Ordering::Acquire) != thread_key::current() {
    return Err(Refused::OtherThread);
  }
  if slot.generation.load(Ordering::Relaxed) != (id >> INDEX_BITS) as u32 {
    return Err(Refused::Stale);
  }
  Ok(slot)
}

/// A free slot index: this thread's own, a finished thread's, or a new one. `None` when the
/// process used all 2^24 slots (the caller reports it).
fn take_index() -> Option<u32> {
  if let Some(index) = FREE
    .try_with(|free| free.0.borrow_mut().pop())
    .ok()
    .flatten()
  {
    return Some(index);
  }
  let mut global = GLOBAL.lock().ok()?;
  if let Some(index) = global.free.pop() {
    return Some(index);
  }
  let index = global.next;
  if u64::from(index) > INDEX_MASK {
    return None;
  }
  let chunk = index as usize >> CHUNK_BITS;
  if CHUNKS[chunk].load(Ordering::Acquire).is_null() {
    let first = index & !(CHUNK_LEN as u32 - 1);
    let slots: Box<[Slot]> = (0..CHUNK_LEN as u32)
      .map(|offset| Slot::empty(first + offset))
      .collect();
    // Leaked: slots never move or go away, so a lookup needs no lock.
    CHUNKS[chunk].store(Box::leak(slots).as_mut_ptr(), Ordering::Release);
  }
  global.next = index + 1;
  Some(index)
}

/// Takes a slot for a handle: `pin` keeps what `prepared` points into alive. Returns the slot
/// index and the id, or `None` when no slot is left.
pub(crate) fn allocate(
  pin: Arc<BorrowPin>,
  prepared: Prepared,
  marked: bool,
  check_detach: bool,
) -> Option<(u32, u64)> {
  let me = thread_key::current();
  let index = take_index()?;
  let slot = slot_at(index)?;
  // SAFETY: a free slot: no thread reads its state (its owner is this thread, whose earlier
  // occupant is gone, or nobody), and no borrow of it is alive (`pins` was 0 when it was freed).
  let state = unsafe { slot.state() };
  state.pin = Some(pin);
  state.shared.lent = LentTensor {
    tensor: prepared.tensor,
    flags: prepared.flags,
    extent: prepared.extent,
    keep_alive: token(slot),
  };
  state.shared.pins = 0;
  state.shared.released = 0;
  // What a consumer derived from the previous tensor's record is not this one's.
  state.shared.scratch_key = 0;
  state.set_marks(marked, check_detach);
  slot.owner.store(me, Ordering::Release);
  let generation = slot.generation.load(Ordering::Relaxed);
  Some((
    index,
    (u64::from(generation) << INDEX_BITS) | u64::from(index),
  ))
}

/// The handle in slot `index` lets go: ids of it are refused from now on, and the slot is freed
/// once no borrow holds it.
pub(crate) fn release(index: u32) {
  let Some(slot) = slot_at(index) else { return };
  // A handle is dropped on its own thread; should that ever not hold, leak the slot rather
  // than touch another thread's state.
  if slot.owner.load(Ordering::Acquire) != thread_key::current() {
    return;
  }
  // SAFETY: this thread owns the slot; no other reference to its state is alive (borrows keep
  // none, only the count).
  let state = unsafe { slot.state() };
  if state.shared.released != 0 {
    return;
  }
  state.shared.released = 1;
  slot.generation.fetch_add(1, Ordering::Relaxed);
  if state.shared.pins == 0 {
    free(index, slot, state);
  }
}

/// Counts a borrow of an id's slot.
///
/// # Safety
/// `slot` was returned by [`lookup`] on this thread.
#[allow(clippy::mut_from_ref)]
#[inline(always)]
pub(crate) unsafe fn pin(slot: &Slot) -> &mut State {
  // SAFETY: caller contract: this thread owns the slot.
  let state = unsafe { slot.state() };
  state.shared.pins += 1;
  state
}

/// The borrow token of `slot` (released with [`unpin_token`]): the slot's address, which never
/// changes nor goes away (chunks are leaked), plus 1: odd, so that it is never mistaken for the
/// `Arc` pointer a borrow of a handle object hands out. Releasing it needs no table lookup.
#[inline(always)]
pub(crate) fn token(slot: &'static Slot) -> *mut core::ffi::c_void {
  const _: () = assert!(core::mem::align_of::<Slot>() >= 2);
  ptr::from_ref(slot)
    .cast_mut()
    .cast::<u8>()
    .wrapping_add(1)
    .cast()
}

/// The slot of a [`token`].
///
/// # Safety
/// `token` was made by [`token`] (the table's contract: a borrower releases the token it was
/// given, once).
#[inline(always)]
unsafe fn slot_of_token(token: *mut core::ffi::c_void) -> &'static Slot {
  // SAFETY: caller contract: the address of a slot plus 1; slots never move or go away.
  unsafe { &*token.cast::<u8>().wrapping_sub(1).cast::<Slot>() }
}

/// Whether a borrow token is a slot's ([`token`]).
#[inline(always)]
pub(crate) fn is_token(token: *mut core::ffi::c_void) -> bool {
  token.addr() & 1 == 1
}

/// Ends a borrow by id. True when that is all (the common case); false when the slot's handle
/// let go meanwhile and this was its last borrow: then [`free_token`] must free it (dropping
/// the storage may run a producer's deleter, which the caller guards against unwinding).
///
/// # Safety
/// `token` was made by [`token`].
#[inline(always)]
pub(crate) unsafe fn unpin_token(token: *mut core::ffi::c_void) -> bool {
  // SAFETY: caller contract.
  let slot = unsafe { slot_of_token(token) };
  if slot.owner.load(Ordering::Acquire) != thread_key::current() {
    return true; // not this thread's: the table's contract was broken; touch nothing
  }
  // SAFETY: this thread owns the slot.
  let state = unsafe { slot.state() };
  if state.shared.pins == 0 {
    return true; // released twice: the table's contract was broken; ignore rather than underflow
  }
  state.shared.pins -= 1;
  !(state.shared.pins == 0 && state.shared.released != 0)
}

/// Frees the slot of `token` after [`unpin_token`] said so.
///
/// # Safety
/// `token` was made by [`token`].
pub(crate) unsafe fn free_token(token: *mut core::ffi::c_void) {
  // SAFETY: caller contract.
  let slot = unsafe { slot_of_token(token) };
  if slot.owner.load(Ordering::Acquire) != thread_key::current() {
    return;
  }
  // SAFETY: this thread owns the slot.
  let state = unsafe { slot.state() };
  if state.shared.pins == 0 && state.shared.released != 0 && state.pin.is_some() {
    free(slot.index, slot, state);
  }
}

fn free(index: u32, slot: &Slot, state: &mut State) {
  // Dropping the pin may release the storage (a foreign producer's deleter): do it before the
  // free list is borrowed.
  let pin = state.pin.take();
  state.shared.lent.tensor = DLTensor::zeroed();
  drop(pin);
  if slot.generation.load(Ordering::Relaxed) > LAST_GENERATION {
    return; // retired: no id may ever name it again
  }
  let _ = FREE.try_with(|free| free.0.borrow_mut().push(index));
}

/// Live (occupied or pinned) slots of this thread, for `nativeStats()`.
pub(crate) fn live_slots() -> u32 {
  let me = thread_key::current();
  let next = GLOBAL.lock().map(|global| global.next).unwrap_or(0);
  (0..next)
    .filter_map(slot_at)
    .filter(|slot| slot.owner.load(Ordering::Acquire) == me)
    // SAFETY: this thread owns the slot; only the flag is read.
    .filter(|slot| unsafe { slot.state() }.pin.is_some())
    .count() as u32
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::layout::TensorLayout;
  use crate::storage::{Memory, Storage};
  use napi_dlpack::{DType, Device};

  fn a_pin() -> Arc<BorrowPin> {
    let storage = Storage::new(Memory::Owned(vec![0u64; 2]));
    let layout = TensorLayout::row_major(DType::Float32, &[4], Device::CPU).expect("a layout");
    Arc::new(BorrowPin {
      storage,
      layout: Arc::new(layout),
    })
  }

  /// The slot tests share the process-wide table: one at a time, so that none takes a slot
  /// another one is looking at (a thread with no free slot of its own takes the process's).
  static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

  fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
      .lock()
      .unwrap_or_else(std::sync::PoisonError::into_inner)
  }

  fn take() -> (u32, u64) {
    let prepared = Prepared {
      tensor: DLTensor::zeroed(),
      flags: 0,
      extent: BorrowExtent::default(),
    };
    allocate(a_pin(), prepared, true, false).expect("a slot")
  }

  #[test]
  fn an_id_names_its_slot_until_released_and_the_slot_is_reused_with_a_new_generation() {
    let _one = one_at_a_time();
    let (index, id) = take();
    assert!(lookup(id).is_ok());
    assert_eq!(
      lookup(id + (1 << INDEX_BITS)).err(),
      Some(Refused::Stale),
      "another generation"
    );
    assert_eq!(
      lookup(u64::from(index)).err(),
      Some(Refused::Unknown),
      "generation 0"
    );
    assert_eq!(lookup(MAX_ID + 1).err(), Some(Refused::Unknown));
    release(index);
    assert_eq!(lookup(id).err(), Some(Refused::Stale));
    let (again, next) = take();
    assert_eq!(again, index, "this thread's freed slot is reused first");
    assert_eq!(next, id + (1 << INDEX_BITS), "with the next generation");
    assert_eq!(lookup(id).err(), Some(Refused::Stale));
    release(again);
  }

  #[test]
  fn a_borrow_pins_the_slot_past_its_release() {
    let _one = one_at_a_time();
    let (index, id) = take();
    let slot = lookup(id).expect("live");
    // SAFETY: this thread owns the slot.
    unsafe { pin(slot) };
    let token = token(slot);
    assert!(is_token(token));
    release(index);
    assert_eq!(lookup(id).err(), Some(Refused::Stale), "refused at once");
    // SAFETY: this thread owns the slot; the pin is still held.
    assert!(unsafe { slot.state() }.pin.is_some(), "the memory is kept");
    let (other, _) = take();
    assert_ne!(other, index, "a pinned slot is not reused");
    // SAFETY: the token made above, released once.
    let more = unsafe { unpin_token(token) };
    assert!(!more, "the last borrow of a released slot");
    // SAFETY: as above.
    unsafe { free_token(token) };
    assert!(
      // SAFETY: as above.
      unsafe { slot.state() }.pin.is_none(),
      "freed when the borrow ended"
    );
    release(other);
  }

  #[test]
  fn a_slot_whose_generation_would_wrap_is_retired() {
    let _one = one_at_a_time();
    let (index, id) = take();
    let slot = lookup(id).expect("live");
    slot.generation.store(LAST_GENERATION, Ordering::Relaxed);
    let last = (u64::from(LAST_GENERATION) << INDEX_BITS) | u64::from(index);
    assert!(last <= MAX_ID);
    assert!(lookup(last).is_ok(), "the last generation an id can carry");
    release(index);
    assert_eq!(lookup(last).err(), Some(Refused::Stale));
    let (other, _) = take();
    assert_ne!(other, index, "retired: never handed out again");
    release(other);
  }

  #[test]
  fn another_thread_is_refused_and_never_reads_the_slot() {
    let _one = one_at_a_time();
    let (index, id) = take();
    let seen = std::thread::spawn(move || lookup(id).err())
      .join()
      .expect("the thread ran");
    assert_eq!(seen, Some(Refused::OtherThread));
    // A thread that owns slots of its own is refused too (live threads have distinct keys).
    let seen = std::thread::spawn(move || {
      let (own, _) = take();
      let seen = lookup(id).err();
      release(own);
      seen
    })
    .join()
    .expect("the thread ran");
    assert_eq!(seen, Some(Refused::OtherThread));
    release(index);
  }

  #[test]
  fn an_ended_threads_slots_are_owned_by_no_later_thread() {
    let _one = one_at_a_time();
    // The thread leaves a live slot (a tensor never collected) and a freed one.
    let (key, live, freed) = std::thread::spawn(|| {
      let (_, live) = take();
      let (index, _) = take();
      release(index);
      (thread_key::current(), live, index)
    })
    .join()
    .expect("the thread ran");
    let live_slot = slot_at((live & INDEX_MASK) as u32).expect("allocated");
    assert_eq!(live_slot.owner.load(Ordering::Acquire), thread_key::ENDED);
    let freed_slot = slot_at(freed).expect("allocated");
    assert_eq!(freed_slot.owner.load(Ordering::Acquire), thread_key::NOBODY);
    assert!(GLOBAL.lock().expect("lock").free.contains(&freed));
    // Later threads, one of which usually gets the ended one's thread pointer (glibc reuses a
    // joined thread's stack and control block), cannot borrow the live slot: its owner is no
    // thread's key any more (asserted above; whether a pointer is reused is the allocator's
    // business).
    for _ in 0..16 {
      let (same_key, seen) =
        std::thread::spawn(move || (thread_key::current() == key, lookup(live).err()))
          .join()
          .expect("the thread ran");
      assert_eq!(seen, Some(Refused::OtherThread));
      if same_key {
        break;
      }
    }
  }
}
