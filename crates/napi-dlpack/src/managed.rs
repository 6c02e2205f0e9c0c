//! Raw ownership of a `DLManagedTensor[Versioned]*`: whoever holds a [`ManagedTensor`] owes the
//! producer exactly one deleter call, and dropping it pays that debt. Nothing here reads the
//! tensor's metadata; validation lives in [`crate::validation`].

use core::ffi::c_void;
use core::ptr::NonNull;

use crate::error::{DLPackError, ErrorKind};
use crate::ffi::{DLManagedTensor, DLManagedTensorVersioned, DLPackVersion, DLPACK_MAJOR_VERSION};

/// A pointer to one of the two owning DLPack structs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ManagedPtr {
  Versioned(NonNull<DLManagedTensorVersioned>),
  Legacy(NonNull<DLManagedTensor>),
}

/// Owns a managed DLPack tensor and calls its deleter exactly once, when dropped.
///
/// The deleter is called on whatever thread drops this value; DLPack requires deleters to be
/// callable from any thread.
///
/// One pointer wide: both structs are 8-byte aligned, so the low bit of the address says which
/// one it is (set for legacy). An imported tensor embeds this value and is moved on every
/// import, so the 8 bytes an enum tag would add are paid on the hot path.
#[derive(Debug)]
pub struct ManagedTensor {
  tagged: NonNull<u8>,
}

const LEGACY_TAG: usize = 1;
/// Both managed structs hold pointers, so a valid pointer to either has these bits clear.
const ALIGN_MASK: usize = 7;
const _: () = assert!(core::mem::align_of::<DLManagedTensorVersioned>() > ALIGN_MASK);
const _: () = assert!(core::mem::align_of::<DLManagedTensor>() > ALIGN_MASK);

// SAFETY: DLPack requires the deleter to be callable from any thread, and a ManagedTensor only
// hands out shared reads of immutable metadata; moving the owner between threads is allowed.
unsafe impl Send for ManagedTensor {}
// SAFETY: `&ManagedTensor` only allows reading the struct, which the producer must not mutate
// while the consumer owns it.
unsafe impl Sync for ManagedTensor {}

impl ManagedTensor {
  /// Takes ownership of a versioned tensor.
  ///
  /// # Safety
  /// `ptr` must be NULL or point to a live `DLManagedTensorVersioned` whose ownership is
  /// transferred to the returned value (nobody else will call its deleter). At least the
  /// fields up to `deleter` (`version`, `manager_ctx`, `deleter`) must be readable: that
  /// prefix is stable across majors, and a struct of another major may end there. Nothing
  /// past it is read, and no reference to the whole struct is made, until the major is 1.
  pub unsafe fn from_raw_versioned(
    ptr: *mut DLManagedTensorVersioned,
  ) -> Result<ManagedTensor, DLPackError> {
    let ptr = NonNull::new(ptr).ok_or_else(null_tensor)?;
    // SAFETY: forwarded contract.
    unsafe { ManagedTensor::checked(ManagedPtr::Versioned(ptr)) }
  }

  /// Takes ownership of a legacy tensor.
  ///
  /// # Safety
  /// `ptr` must be NULL or point to a live `DLManagedTensor` whose ownership is transferred to
  /// the returned value.
  pub unsafe fn from_raw_legacy(ptr: *mut DLManagedTensor) -> Result<ManagedTensor, DLPackError> {
    let ptr = NonNull::new(ptr).ok_or_else(null_tensor)?;
    // SAFETY: forwarded contract.
    unsafe { ManagedTensor::checked(ManagedPtr::Legacy(ptr)) }
  }

  /// Takes ownership of either struct, refusing a misaligned pointer. A producer that hands
  /// one over still gave up ownership, so its deleter is called (read without assuming
  /// alignment) before the error is returned.
  ///
  /// # Safety
  /// As for [`ManagedTensor::from_raw_versioned`] / [`ManagedTensor::from_raw_legacy`],
  /// except that the pointer may be misaligned.
  pub unsafe fn checked(ptr: ManagedPtr) -> Result<ManagedTensor, DLPackError> {
    if ptr.address() & ALIGN_MASK == 0 {
      // SAFETY: aligned, and the rest is the caller's contract.
      return Ok(unsafe { ManagedTensor::from_ptr(ptr) });
    }
    // SAFETY: we own the tensor (caller's contract), and nothing else will call its deleter.
    unsafe { call_deleter(ptr) };
    Err(DLPackError::new(
      ErrorKind::Misaligned,
      "the managed tensor pointer is not 8-byte aligned",
    ))
  }

  /// Takes ownership of either struct.
  ///
  /// # Safety
  /// As for [`ManagedTensor::from_raw_versioned`] / [`ManagedTensor::from_raw_legacy`]; the
  /// pointer must also be aligned, as every pointer to a live struct is (see
  /// [`ManagedTensor::checked`] for pointers from code that may break that).
  #[inline]
  pub unsafe fn from_ptr(ptr: ManagedPtr) -> ManagedTensor {
    debug_assert_eq!(ptr.address() & ALIGN_MASK, 0, "misaligned managed tensor");
    let tagged = match ptr {
      ManagedPtr::Versioned(ptr) => ptr.cast::<u8>(),
      // SAFETY: the address is aligned, so setting its low bit keeps it non-NULL and inside
      // the same struct; `as_ptr` clears the bit again before anyone dereferences it.
      ManagedPtr::Legacy(ptr) => unsafe { ptr.cast::<u8>().byte_add(LEGACY_TAG) },
    };
    ManagedTensor { tagged }
  }

  /// Gives up ownership without calling the deleter; the caller now owes that call.
  pub fn into_raw(self) -> ManagedPtr {
    let ptr = self.as_ptr();
    core::mem::forget(self);
    ptr
  }

  #[inline]
  pub fn as_ptr(&self) -> ManagedPtr {
    if self.is_versioned() {
      ManagedPtr::Versioned(self.tagged.cast())
    } else {
      // SAFETY: undoes the tag added in `from_ptr`, giving back the original non-NULL pointer.
      ManagedPtr::Legacy(unsafe { self.tagged.byte_sub(LEGACY_TAG) }.cast())
    }
  }

  #[inline]
  pub fn is_versioned(&self) -> bool {
    self.tagged.as_ptr() as usize & LEGACY_TAG == 0
  }

  /// The version of a versioned tensor (always safe to read), `None` for legacy ones.
  #[inline]
  pub fn version(&self) -> Option<DLPackVersion> {
    match self.as_ptr() {
      // SAFETY: `version` is in the prefix every major keeps (type invariant). It is read
      // through a raw place: a reference to the whole struct would claim all 80 bytes, while a
      // producer of another major may have allocated only the prefix.
      ManagedPtr::Versioned(ptr) => Some(unsafe { (&raw const (*ptr.as_ptr()).version).read() }),
      ManagedPtr::Legacy(_) => None,
    }
  }

  /// The flags of a versioned tensor of major 1, 0 for legacy tensors and for other majors
  /// (whose layout past `deleter` is unknown, so `flags` is not read).
  #[inline]
  pub fn flags(&self) -> u64 {
    match self.as_ptr() {
      ManagedPtr::Versioned(ptr) if self.is_known_major() => {
        // SAFETY: major 1: the whole struct is there, `flags` included.
        unsafe { (&raw const (*ptr.as_ptr()).flags).read() }
      }
      ManagedPtr::Versioned(_) | ManagedPtr::Legacy(_) => 0,
    }
  }

  /// Whether this is a legacy tensor or a versioned one of the major this crate implements, so
  /// that its layout is known past the stable prefix.
  #[inline]
  fn is_known_major(&self) -> bool {
    self
      .version()
      .is_none_or(|version| version.major == DLPACK_MAJOR_VERSION)
  }

  /// `manager_ctx` and the deleter's address (0 for none): both in the stable prefix of either
  /// struct, so readable before anything else is known, whatever the major.
  #[inline]
  pub fn context_and_deleter(&self) -> (*mut c_void, usize) {
    match self.as_ptr() {
      // SAFETY: the prefix is readable (type invariant); read field by field through raw
      // places, never through a reference to the whole struct (see `version`).
      ManagedPtr::Versioned(ptr) => unsafe {
        (
          (&raw const (*ptr.as_ptr()).manager_ctx).read(),
          (&raw const (*ptr.as_ptr()).deleter)
            .read()
            .map_or(0, |f| f as usize),
        )
      },
      // SAFETY: the legacy struct has one layout, all of it readable (type invariant).
      ManagedPtr::Legacy(ptr) => unsafe {
        (
          (&raw const (*ptr.as_ptr()).manager_ctx).read(),
          (&raw const (*ptr.as_ptr()).deleter)
            .read()
            .map_or(0, |f| f as usize),
        )
      },
    }
  }

  /// The `DLTensor` inside.
  ///
  /// # Safety
  /// For versioned tensors the caller must have checked that the major version is one this
  /// crate understands; with another major the layout after `flags` is unknown.
  #[inline]
  pub unsafe fn dl_tensor(&self) -> &crate::ffi::DLTensor {
    match self.as_ptr() {
      // SAFETY: the pointee is live while we own it; major version checked by the caller.
      ManagedPtr::Versioned(ptr) => unsafe { &ptr.as_ref().dl_tensor },
      // SAFETY: the legacy struct has a single layout.
      ManagedPtr::Legacy(ptr) => unsafe { &ptr.as_ref().dl_tensor },
    }
  }
}

impl ManagedPtr {
  fn address(self) -> usize {
    match self {
      ManagedPtr::Versioned(ptr) => ptr.as_ptr() as usize,
      ManagedPtr::Legacy(ptr) => ptr.as_ptr() as usize,
    }
  }
}

impl Drop for ManagedTensor {
  fn drop(&mut self) {
    // SAFETY: we own the tensor, and dropping is the one time its deleter is owed.
    unsafe { call_deleter(self.as_ptr()) };
  }
}

/// Calls the deleter of `ptr`, if it has one: DLPack allows a NULL deleter ("no way to provide
/// a reasonable destructor"), in which case nothing runs. The deleter field (in the stable
/// prefix of either struct) is read without assuming alignment, so this also serves the
/// misaligned pointers [`ManagedTensor::checked`] refuses; for aligned ones it is a plain load.
///
/// # Safety
/// The caller owns the tensor, the struct's prefix is readable, and the call is the one
/// deleter call owed.
unsafe fn call_deleter(ptr: ManagedPtr) {
  match ptr {
    ManagedPtr::Versioned(ptr) => {
      // SAFETY: readable per the contract; an unaligned read needs no alignment.
      if let Some(deleter) = unsafe { (&raw const (*ptr.as_ptr()).deleter).read_unaligned() } {
        // SAFETY: called once, with the pointer the producer gave us.
        unsafe { deleter(ptr.as_ptr()) };
      }
    }
    ManagedPtr::Legacy(ptr) => {
      // SAFETY: as above, for the legacy struct.
      if let Some(deleter) = unsafe { (&raw const (*ptr.as_ptr()).deleter).read_unaligned() } {
        // SAFETY: called once, with the pointer the producer gave us.
        unsafe { deleter(ptr.as_ptr()) };
      }
    }
  }
}

fn null_tensor() -> DLPackError {
  DLPackError::new(ErrorKind::NullTensor, "NULL managed tensor pointer")
}
