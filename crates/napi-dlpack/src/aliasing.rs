//! Dynamic borrow checking of the host memory the typed views lend out.
//!
//! Two imported tensors can be the same memory: JS can call `f(x, x)`, pass two capsules of one
//! tensor, or a tensor and a view of it. The borrow checker sees two unrelated values, so
//! without a check an addon could hold `as_mut_slice()` of one and `as_slice()` of the other:
//! an overlapping `&mut` and `&`, undefined behaviour in safe code.
//!
//! So every typed access ([`crate::view`]) registers the byte range it lends in one
//! process-wide table for as long as the slice or view lives (its guard holds a `Claim`),
//! with `RefCell`'s rule across tensors: any number of shared claims on a byte, or one
//! exclusive claim. A request that breaks the rule is refused with `ERR_DLPACK_ALIASED`
//! instead of lending. The table is process-wide, not per thread, because an owned argument
//! may be used on another thread while the JS thread reads the same memory.
//!
//! A claim covers the tensor's span, from its lowest to its highest element byte. Two strided
//! tensors that interleave within one span without sharing an element (the even and the odd
//! columns of one matrix) therefore count as overlapping: refused though disjoint. That is the
//! conservative side; an addon that needs both takes them from one tensor instead.
//!
//! What is not covered: memory written by JS or another addon through its own pointers during
//! the native call (another thread writing a SharedArrayBuffer), which no Rust-side check can
//! see.

use std::sync::{Mutex, PoisonError};

use crate::error::{DLPackError, ErrorKind};

/// One lent range: `[start, end)` in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Lent {
  start: usize,
  end: usize,
  exclusive: bool,
}

impl Lent {
  fn overlaps(&self, other: &Lent) -> bool {
    self.start < other.end && other.start < self.end
  }
}

/// Every range lent out now, in any thread. Short: one entry per live slice or view.
static LENT: Mutex<Vec<Lent>> = Mutex::new(Vec::new());

fn lent() -> std::sync::MutexGuard<'static, Vec<Lent>> {
  // Nothing panics while the lock is held, so a poisoned lock's data is still consistent.
  LENT.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A registered range, given back when dropped. Empty ranges are never registered (they cannot
/// overlap anything), so an empty tensor's views hold no claim.
#[derive(Debug)]
pub(crate) struct Claim {
  range: Lent,
}

impl Claim {
  /// Claims `len` bytes from `start` for reading: refused while any part of them is lent for
  /// writing.
  pub(crate) fn shared(start: usize, len: usize) -> Result<Option<Claim>, DLPackError> {
    Claim::register(start, len, false)
  }

  /// Claims `len` bytes from `start` for writing: refused while any part of them is lent at
  /// all.
  pub(crate) fn exclusive(start: usize, len: usize) -> Result<Option<Claim>, DLPackError> {
    Claim::register(start, len, true)
  }

  fn register(start: usize, len: usize, exclusive: bool) -> Result<Option<Claim>, DLPackError> {
    if len == 0 {
      return Ok(None);
    }
    let range = Lent {
      start,
      // A validated span lies within the address space, so this only saturates on bad input.
      end: start.saturating_add(len),
      exclusive,
    };
    let mut lent = lent();
    if let Some(held) = lent
      .iter()
      .find(|held| held.overlaps(&range) && (exclusive || held.exclusive))
    {
      let (held_kind, wanted) = match (held.exclusive, exclusive) {
        (true, true) => ("written", "write"),
        (true, false) => ("written", "read"),
        _ => ("read", "write"),
      };
      return Err(aliased(held_kind, wanted, held, &range));
    }
    lent.push(range);
    Ok(Some(Claim { range }))
  }

  /// Another shared claim of the same range (a cloned view). Cannot conflict: while this shared
  /// claim lives, no exclusive claim overlaps it.
  pub(crate) fn duplicate(&self) -> Claim {
    debug_assert!(!self.range.exclusive);
    lent().push(self.range);
    Claim { range: self.range }
  }
}

impl Drop for Claim {
  fn drop(&mut self) {
    let mut lent = lent();
    // Equal entries are interchangeable, so removing any one of them is exact.
    if let Some(index) = lent.iter().position(|held| *held == self.range) {
      lent.swap_remove(index);
    }
  }
}

#[cold]
#[inline(never)]
fn aliased(held_kind: &str, wanted: &str, held: &Lent, range: &Lent) -> DLPackError {
  DLPackError::new(
    ErrorKind::Aliased,
    format!(
      "bytes {:#x}..{:#x} are already lent out to be {held_kind} (bytes {:#x}..{:#x}, another \
       argument or view over the same memory), so they cannot be lent to {wanted}: drop that \
       slice or view first",
      range.start, range.end, held.start, held.end
    ),
  )
}

/// How many ranges are lent out now (tests: every guard gives its claim back).
#[doc(hidden)]
pub fn lent_ranges() -> usize {
  lent().len()
}

#[cfg(test)]
mod tests {
  use super::*;

  // The table is process-wide and tests run in parallel: each test uses its own addresses,
  // far apart, so tests never see each other's claims.

  #[test]
  fn shared_claims_coexist_and_an_exclusive_one_is_refused_until_they_are_dropped() {
    let base = 0x1000_0000;
    let first = Claim::shared(base, 64).unwrap();
    let second = Claim::shared(base + 32, 64).unwrap();
    let error = Claim::exclusive(base + 60, 8).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Aliased);
    drop(first);
    assert_eq!(
      Claim::exclusive(base + 60, 8).unwrap_err().kind(),
      ErrorKind::Aliased
    );
    drop(second);
    assert!(Claim::exclusive(base + 60, 8).unwrap().is_some());
  }

  #[test]
  fn an_exclusive_claim_refuses_readers_and_writers_of_any_overlapping_byte() {
    let base = 0x2000_0000;
    let writer = Claim::exclusive(base, 16).unwrap();
    // The last byte and the first byte overlap; the bytes just outside do not.
    assert_eq!(
      Claim::shared(base + 15, 1).unwrap_err().kind(),
      ErrorKind::Aliased
    );
    assert_eq!(
      Claim::exclusive(base - 4, 5).unwrap_err().kind(),
      ErrorKind::Aliased
    );
    assert!(Claim::shared(base + 16, 8).unwrap().is_some());
    assert!(Claim::exclusive(base - 8, 8).unwrap().is_some());
    drop(writer);
    assert!(Claim::shared(base + 15, 1).unwrap().is_some());
  }

  #[test]
  fn empty_ranges_claim_nothing() {
    let base = 0x3000_0000;
    let _writer = Claim::exclusive(base, 16).unwrap();
    assert!(Claim::exclusive(base + 4, 0).unwrap().is_none());
    assert!(Claim::shared(base, 0).unwrap().is_none());
  }

  #[test]
  fn a_duplicate_keeps_the_range_claimed_after_the_original_is_dropped() {
    let base = 0x4000_0000;
    let original = Claim::shared(base, 8).unwrap().unwrap();
    let copy = original.duplicate();
    drop(original);
    assert_eq!(
      Claim::exclusive(base, 8).unwrap_err().kind(),
      ErrorKind::Aliased
    );
    drop(copy);
    assert!(Claim::exclusive(base, 8).unwrap().is_some());
  }

  #[test]
  fn equal_claims_are_given_back_one_at_a_time() {
    let base = 0x5000_0000;
    let first = Claim::shared(base, 8).unwrap();
    let second = Claim::shared(base, 8).unwrap();
    drop(first);
    assert_eq!(
      Claim::exclusive(base, 8).unwrap_err().kind(),
      ErrorKind::Aliased
    );
    drop(second);
    assert!(Claim::exclusive(base, 8).unwrap().is_some());
  }

  #[test]
  fn claims_are_seen_across_threads() {
    let base = 0x6000_0000;
    let writer = Claim::exclusive(base, 8).unwrap();
    let refused = std::thread::spawn(move || Claim::shared(base, 8).map(|_| ()))
      .join()
      .unwrap();
    assert_eq!(refused.unwrap_err().kind(), ErrorKind::Aliased);
    drop(writer);
  }
}
