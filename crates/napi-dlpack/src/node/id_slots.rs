//! The slot table behind handle ids, as a consumer may read it (`napi_dlpack_id_slots`, table
//! minor 3, `docs/protocol.md` §5.6): defined once here for the producer (napi-dlpack's addon,
//! which lays its slots out this way) and for consumers built on this crate, which borrow an id
//! **inline**, without calling into the producer.
//!
//! A producer that publishes its table ([`IdSlots`]) promises that every slot starts with a
//! [`SlotHead`]; the rules for reading one are the producer's own: a slot's `owner` and
//! `generation` are atomics any thread may read; everything in [`SlotShared`] belongs to the
//! owner thread, and is read or written only by a thread that found its own key
//! ([`thread_key::current`]) in `owner`. The inline borrow ([`lend`]) makes the producer's hot
//! path checks itself (the id's bounds, the owner thread, the generation, the slot's `ready`
//! flag), counts a pin, and reads the record ([`SlotShared::lent`]) in place; its release
//! ([`unlend`]) drops the pin, and leaves the one case with work to do (the last pin of a slot
//! whose tensor let go meanwhile) to the table's `release_borrow`. Anything else (an id the
//! checks do not pass, a slot that needs the producer's slow steps) goes to the producer's
//! `borrow_id`, which refuses with a coded error or does those steps. Only thread-pointer keys
//! can be computed outside the producer ([`thread_key::KIND`]), so only they allow inline borrows.
//!
//! Each slot also has a **scratch** area for one consumer: what that consumer derived from the
//! record (its own checked form of it), tagged with a key only that consumer's binary uses
//! ([`SlotShared::scratch_key`]). A record never changes while its slot keeps a generation, and
//! the producer clears the key when the slot gets a new tensor, so a consumer that finds its own
//! key reads back what it derived earlier instead of deriving it again (and a borrow of a tensor
//! passed again and again, the hot loop, skips its checks and conversions). Another consumer
//! overwrites the area with its own key; a consumer copies what it reads out of the area, so
//! that nothing it holds changes under it.

use core::cell::UnsafeCell;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

use super::exchange::LentTensor;
use super::thread_key;

/// `NAPI_DLPACK_ID_SLOTS_LAYOUT`: the layout this module reads (ids, chunks and [`SlotHead`]).
pub const LAYOUT: u32 = 1;
/// Bits of an id that name the slot (`generation << INDEX_BITS | slot`).
pub const INDEX_BITS: u32 = 24;
/// Bits of a slot index that name its place in a chunk.
pub const CHUNK_BITS: u32 = 12;
/// Slots per chunk.
pub const CHUNK_LEN: usize = 1 << CHUNK_BITS;
/// Entries of [`IdSlots::chunks`].
pub const CHUNK_COUNT: usize = 1 << (INDEX_BITS - CHUNK_BITS);
/// The largest id (2^53 - 1: every id is exact as a JS number).
pub const MAX_ID: u64 = (1 << 53) - 1;
const INDEX_MASK: u64 = (1 << INDEX_BITS) - 1;

/// `napi_dlpack_id_slots`: where a producer's slots are and how they are laid out. Lives for
/// the process.
#[repr(C)]
#[derive(Debug)]
pub struct IdSlots {
  /// [`LAYOUT`].
  pub layout: u32,
  /// How slot owners are keyed ([`thread_key::KIND`] of the producer).
  pub thread_key: u32,
  /// Bytes from one slot to the next (a multiple of 8, at least a [`SlotHead`]).
  pub slot_size: u64,
  /// [`CHUNK_COUNT`] chunk pointers, NULL until a chunk exists; a chunk holds [`CHUNK_LEN`]
  /// slots that never move or go away.
  pub chunks: *const AtomicPtr<u8>,
}

// SAFETY: immutable, and points to process-lifetime atomics.
unsafe impl Sync for IdSlots {}

/// `napi_dlpack_id_slot`: how every slot starts.
#[repr(C)]
#[derive(Debug)]
pub struct SlotHead {
  /// The owner thread's key ([`thread_key::current`]); [`thread_key::NOBODY`] for a free slot,
  /// [`thread_key::ENDED`] for one whose thread ended.
  pub owner: AtomicU64,
  /// The generation ids of the slot's tensor carry (bumped when the tensor lets go).
  pub generation: AtomicU32,
  /// The producer's own.
  pub reserved: u32,
  /// The owner thread's part.
  pub shared: UnsafeCell<SlotShared>,
}

/// The owner-thread part of a [`SlotHead`].
#[repr(C)]
#[derive(Debug)]
pub struct SlotShared {
  /// Borrows in progress.
  pub pins: u32,
  /// Non-zero when a borrow needs no step of the producer's (else call its `borrow_id`).
  pub ready: u8,
  /// Non-zero when the tensor let go: the slot is freed when `pins` reaches 0.
  pub released: u8,
  pub reserved: [u8; 2],
  /// What a borrow hands out (`napi_dlpack_lent_tensor`).
  pub lent: LentTensor,
  /// Whose [`SlotShared::scratch`] it is: a consumer's own key (the address of one of its
  /// statics), 0 for nobody's. The producer sets 0 when the slot gets a new tensor.
  pub scratch_key: u64,
  /// A consumer's derived form of `lent` ([`SCRATCH_BYTES`]).
  pub scratch: [u64; SCRATCH_BYTES / 8],
}

/// Bytes of [`SlotShared::scratch`].
pub const SCRATCH_BYTES: usize = 80;

#[cfg(target_pointer_width = "64")]
const _: () = {
  assert!(core::mem::offset_of!(SlotHead, generation) == 8);
  assert!(core::mem::offset_of!(SlotHead, shared) == 16);
  assert!(core::mem::offset_of!(SlotShared, ready) == 4);
  assert!(core::mem::offset_of!(SlotShared, released) == 5);
  assert!(core::mem::offset_of!(SlotShared, lent) == 8);
  assert!(core::mem::offset_of!(SlotShared, scratch_key) == 120);
  assert!(core::mem::offset_of!(SlotShared, scratch) == 128);
  assert!(core::mem::size_of::<SlotHead>() == 224);
  assert!(core::mem::size_of::<IdSlots>() == 24);
};

impl IdSlots {
  /// Whether this crate can borrow from `self` inline: a layout it reads, and thread keys it
  /// computes the same way.
  pub fn inline_compatible(&self) -> bool {
    self.layout == LAYOUT
      && self.thread_key == thread_key::KIND_THREAD_POINTER
      && thread_key::KIND == thread_key::KIND_THREAD_POINTER
      && self.slot_size >= core::mem::size_of::<SlotHead>() as u64
      && self.slot_size.is_multiple_of(8)
      && !self.chunks.is_null()
  }
}

/// An inline borrow of handle id `id`: the slot's head, pinned, when the id names a live,
/// ready slot of the calling thread; `None` when the producer must answer (its `borrow_id`
/// refuses the id or does its slow steps). End it with [`unlend`].
///
/// # Safety
/// `slots` is a live producer's table for which [`IdSlots::inline_compatible`] holds; the
/// caller runs on a JS thread (where the producer's slots of that thread are touched only by
/// that thread).
#[inline(always)]
pub unsafe fn lend(slots: &IdSlots, id: u64) -> Option<NonNull<SlotHead>> {
  let generation = id >> INDEX_BITS;
  // Generations start at 1: an id below 2^24 was never handed out.
  if generation == 0 || id > MAX_ID {
    return None;
  }
  let index = (id & INDEX_MASK) as usize;
  // SAFETY: `index >> CHUNK_BITS` < CHUNK_COUNT, the length of the producer's array (the
  // layout's contract).
  let chunk = unsafe { &*slots.chunks.add(index >> CHUNK_BITS) }.load(Ordering::Acquire);
  if chunk.is_null() {
    return None;
  }
  // SAFETY: a chunk of CHUNK_LEN slots of `slot_size` bytes, each starting with a SlotHead
  // (the layout's contract); the offset stays inside it.
  let head = unsafe {
    &*chunk
      .add((index & (CHUNK_LEN - 1)) * slots.slot_size as usize)
      .cast::<SlotHead>()
  };
  if head.owner.load(Ordering::Acquire) != thread_key::current() {
    return None;
  }
  if head.generation.load(Ordering::Relaxed) != generation as u32 {
    return None;
  }
  let shared = head.shared.get();
  // SAFETY: this thread owns the slot (its key is in `owner`): the owner-thread part is ours
  // to read and write, and no reference to it is alive across this call.
  unsafe {
    if (*shared).ready == 0 {
      return None;
    }
    (*shared).pins += 1;
  }
  Some(NonNull::from(head))
}

/// The record of an inline borrow: valid and unchanged until [`unlend`].
///
/// # Safety
/// `head` was returned by [`lend`] and not yet given to [`unlend`].
#[inline(always)]
pub unsafe fn record<'a>(head: NonNull<SlotHead>) -> &'a LentTensor {
  // SAFETY: caller contract: a pinned slot of this thread, whose record the producer does not
  // write while pinned.
  unsafe { &(*head.as_ref().shared.get()).lent }
}

/// Ends an inline borrow. True when that is all; false when this was the last pin of a slot
/// whose tensor let go meanwhile: then the caller passes the record's `keep_alive` to the
/// table's `release_borrow`, which drops the pin and frees the slot.
///
/// # Safety
/// `head` was returned by [`lend`] on this thread and is given here once.
#[inline(always)]
pub unsafe fn unlend(head: NonNull<SlotHead>) -> bool {
  // SAFETY: caller contract: a slot this thread owns and pinned.
  unsafe {
    let shared = head.as_ref().shared.get();
    let pins = (*shared).pins;
    if (*shared).released != 0 && pins <= 1 {
      return false;
    }
    (*shared).pins = pins.saturating_sub(1);
  }
  true
}

/// What this consumer's binary derived from an inline borrow's record earlier, if the slot's
/// scratch area still holds it: `key` is the address of one of the caller's statics, and `T` the
/// one type the caller ever stores under that key ([`keep_derived`]).
///
/// # Safety
/// `head` was returned by [`lend`] and is still pinned; the caller stores only `T` values under
/// `key`, and `T` fits in [`SCRATCH_BYTES`] with an alignment of at most 8.
#[inline(always)]
pub unsafe fn derived<T: Copy>(head: NonNull<SlotHead>, key: u64) -> Option<T> {
  const { assert!(core::mem::size_of::<T>() <= SCRATCH_BYTES && core::mem::align_of::<T>() <= 8) };
  // SAFETY: caller contract: a slot this thread owns and pinned; its area holds a `T` written by
  // `keep_derived` under `key` for this very tensor (the producer clears the key when the slot
  // gets another).
  unsafe {
    let shared = head.as_ref().shared.get();
    ((*shared).scratch_key == key).then(|| (*shared).scratch.as_ptr().cast::<T>().read())
  }
}

/// Keeps `value`, derived from an inline borrow's record, in the slot's scratch area under
/// `key` (see [`derived`]).
///
/// # Safety
/// As [`derived`].
#[inline(always)]
pub unsafe fn keep_derived<T: Copy>(head: NonNull<SlotHead>, key: u64, value: T) {
  const { assert!(core::mem::size_of::<T>() <= SCRATCH_BYTES && core::mem::align_of::<T>() <= 8) };
  // SAFETY: caller contract; the area is 8-aligned and large enough (checked above).
  unsafe {
    let shared = head.as_ref().shared.get();
    (*shared).scratch.as_mut_ptr().cast::<T>().write(value);
    (*shared).scratch_key = key;
  }
}

#[cfg(all(test, target_pointer_width = "64"))]
mod tests {
  use super::*;
  use crate::exchange::BorrowExtent;
  use crate::ffi::DLTensor;

  /// A producer's slot as napi-dlpack lays it out: the head, then the producer's own bytes.
  #[repr(C)]
  struct ProducerSlot {
    head: SlotHead,
    own: u64,
  }

  fn slot(owner: u64, generation: u32, ready: u8) -> ProducerSlot {
    ProducerSlot {
      head: SlotHead {
        owner: AtomicU64::new(owner),
        generation: AtomicU32::new(generation),
        reserved: 0,
        shared: UnsafeCell::new(SlotShared {
          pins: 0,
          ready,
          released: 0,
          reserved: [0; 2],
          lent: LentTensor {
            tensor: DLTensor::zeroed(),
            flags: 0,
            extent: BorrowExtent::default(),
            keep_alive: core::ptr::null_mut(),
          },
          scratch_key: 0,
          scratch: [0; SCRATCH_BYTES / 8],
        }),
      },
      own: 0,
    }
  }

  /// A table whose chunk 0 holds `slots` (leaked: a producer's chunks live for the process).
  fn table(slots: Vec<ProducerSlot>) -> (&'static IdSlots, &'static [ProducerSlot]) {
    let slots: &'static [ProducerSlot] = Box::leak(slots.into_boxed_slice());
    let chunks: &'static [AtomicPtr<u8>] = Box::leak(
      (0..CHUNK_COUNT)
        .map(|chunk| {
          let first = if chunk == 0 {
            slots.as_ptr().cast_mut().cast()
          } else {
            core::ptr::null_mut()
          };
          AtomicPtr::new(first)
        })
        .collect::<Vec<_>>()
        .into_boxed_slice(),
    );
    let table = Box::leak(Box::new(IdSlots {
      layout: LAYOUT,
      thread_key: thread_key::KIND,
      slot_size: core::mem::size_of::<ProducerSlot>() as u64,
      chunks: chunks.as_ptr(),
    }));
    (table, slots)
  }

  fn pins(slot: &ProducerSlot) -> u32 {
    // SAFETY: a test slot of this thread, no borrow of its state alive.
    unsafe { (*slot.head.shared.get()).pins }
  }

  #[test]
  fn an_inline_borrow_checks_what_the_producer_checks_and_pins() {
    if thread_key::KIND != thread_key::KIND_THREAD_POINTER {
      return; // no inline borrows where keys are private
    }
    let me = thread_key::current();
    let (table, slots) = table(vec![
      slot(me, 3, 1),
      slot(me, 3, 0),
      slot(thread_key::ENDED, 3, 1),
      slot(thread_key::NOBODY, 3, 1),
    ]);
    assert!(table.inline_compatible());
    let id = |index: u64, generation: u64| generation << INDEX_BITS | index;
    // SAFETY: a live, compatible table, on this thread.
    unsafe {
      let head = lend(table, id(0, 3)).expect("a live, ready slot of this thread");
      assert_eq!(pins(&slots[0]), 1);
      assert!(core::ptr::eq(
        record(head),
        &(*slots[0].head.shared.get()).lent
      ));
      assert_eq!(lend(table, id(0, 4)), None, "another generation");
      assert_eq!(lend(table, id(0, 0)), None, "generation 0 is never an id");
      assert_eq!(
        lend(table, id(1, 3)),
        None,
        "not ready: the producer has a step to do"
      );
      assert_eq!(lend(table, id(2, 3)), None, "its thread ended");
      assert_eq!(lend(table, id(3, 3)), None, "free");
      assert_eq!(
        lend(table, id(CHUNK_LEN as u64, 3)),
        None,
        "a chunk that does not exist"
      );
      assert_eq!(lend(table, MAX_ID + 1), None);
      assert!(unlend(head), "not released: nothing more to do");
      assert_eq!(pins(&slots[0]), 0);
    }
    assert_eq!(slots[1].own, 0, "the producer's bytes are never touched");
    // Another thread's key is refused.
    let seen = std::thread::spawn(move || {
      // SAFETY: as above (the slot is refused before anything but its atomics is read).
      unsafe { lend(table, id(0, 3)) }.is_some()
    })
    .join()
    .expect("the thread ran");
    assert!(!seen);
  }

  #[test]
  fn the_last_pin_of_a_released_tensor_goes_back_to_the_producer() {
    if thread_key::KIND != thread_key::KIND_THREAD_POINTER {
      return;
    }
    let (table, slots) = table(vec![slot(thread_key::current(), 1, 1)]);
    // SAFETY: a live, compatible table, on this thread.
    unsafe {
      let first = lend(table, 1 << INDEX_BITS).expect("lent");
      let second = lend(table, 1 << INDEX_BITS).expect("lent again");
      (*slots[0].head.shared.get()).released = 1;
      assert!(unlend(second), "another pin remains");
      assert_eq!(pins(&slots[0]), 1);
      assert!(
        !unlend(first),
        "the last one: the producer's release_borrow frees the slot"
      );
      assert_eq!(pins(&slots[0]), 1, "left for release_borrow to drop");
    }
  }

  #[test]
  fn what_a_consumer_derived_is_read_back_under_its_key_only() {
    if thread_key::KIND != thread_key::KIND_THREAD_POINTER {
      return;
    }
    let (table, _slots) = table(vec![slot(thread_key::current(), 1, 1)]);
    // SAFETY: a live, compatible table, on this thread; only `[u64; 3]` under keys 7 and 9.
    unsafe {
      let head = lend(table, 1 << INDEX_BITS).expect("lent");
      assert_eq!(derived::<[u64; 3]>(head, 7), None, "nothing kept yet");
      keep_derived(head, 7, [1u64, 2, 3]);
      assert_eq!(derived::<[u64; 3]>(head, 7), Some([1, 2, 3]));
      assert_eq!(derived::<[u64; 3]>(head, 9), None, "another consumer's key");
      keep_derived(head, 9, [4u64, 5, 6]);
      assert_eq!(
        derived::<[u64; 3]>(head, 7),
        None,
        "overwritten by the other consumer"
      );
      assert!(unlend(head));
    }
  }
}
